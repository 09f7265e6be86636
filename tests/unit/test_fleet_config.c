/* The fleet's settings: daemon.yaml `fleet:` (every key, ranges, labels
 * checked with file:line:col, unknown keys, the reload diff), the --fleet
 * URL (libpq's syntax check, @FILE and a path, an empty file) and
 * --fleet-label. Nothing here needs a database. */
#include <unistd.h>

#include "../t.h"
#include "fleet/fleet.h"
#include "policy/daemon_config.h"

static int load(const char *text, struct wd_daemon_config **c,
		struct wd_diag *d)
{
	memset(d, 0, sizeof(*d));
	return wd_daemon_config_load_str("d.yaml", text, strlen(text), c, d);
}

static void bad(const char *name, const char *text, const char *want)
{
	struct wd_daemon_config *c = NULL;
	struct wd_diag d;
	int rc = load(text, &c, &d);
	T_OK(rc == -EINVAL && !c && d.n >= 1 && strstr(d.msgs[0], want), name,
	     "rc %d, %d diags, first '%s', want '%s'", rc, d.n,
	     d.n ? d.msgs[0] : "", want);
	wd_diag_free(&d);
}

int main(void)
{
	struct wd_daemon_config *c = wd_daemon_config_new();
	T_OK(!c->fleet.url && c->fleet.capacity == -1 && !c->fleet.lease_ms &&
		 !c->fleet.n_labels && c->fleet.when_down == -1,
	     "fleet-default-off", "url %s", c->fleet.url ? c->fleet.url : "");
	struct wd_daemon_config *def = c;

	struct wd_diag d;
	int rc = load("fleet: {url: \"host=/run/pg dbname=w\", capacity: 3, "
		      "lease_ms: 5000, labels: [\"zone=a\", \"rack=r1\"], "
		      "when_down: run_here}\n",
		      &c, &d);
	T_OK(rc == 0 && c && !strcmp(c->fleet.url, "host=/run/pg dbname=w") &&
		 c->fleet.capacity == 3 && c->fleet.lease_ms == 5000 &&
		 c->fleet.n_labels == 2 &&
		 !strcmp(c->fleet.labels[1], "rack=r1") &&
		 c->fleet.when_down == 1,
	     "fleet-every-key", "rc %d: %s", rc, d.n ? d.msgs[0] : "");
	struct wd_buf b = {0};
	if (c)
		wd_daemon_config_diff(def, c, &b);
	T_OK(b.data && !strcmp(b.data, "fleet.url, fleet.capacity, "
				       "fleet.lease_ms, fleet.labels, "
				       "fleet.when_down"),
	     "fleet-diff", "'%s'", b.data ? b.data : "");
	wd_buf_free(&b);
	wd_daemon_config_free(c);
	wd_daemon_config_free(def);
	wd_diag_free(&d);

	rc = load("fleet: {url: x, capacity: [3, 3, 1]}\n", &c, &d);
	T_OK(rc == 0 && c && c->fleet.capacity == 3 &&
		 c->fleet.tier_capacity[0] == 3 &&
		 c->fleet.tier_capacity[1] == 3 &&
		 c->fleet.tier_capacity[2] == 1,
	     "fleet-capacity-per-tier", "rc %d: %s", rc, d.n ? d.msgs[0] : "");
	def = wd_daemon_config_new();
	struct wd_daemon_config *c2 = NULL;
	struct wd_diag d2;
	int rc2 = load("fleet: {url: x, capacity: [3, 3, 0]}\n", &c2, &d2);
	b = (struct wd_buf){0};
	if (c && c2)
		wd_daemon_config_diff(c, c2, &b);
	T_OK(rc2 == 0 && b.data && !strcmp(b.data, "fleet.capacity"),
	     "fleet-capacity-per-tier-diff", "'%s'", b.data ? b.data : "");
	wd_buf_free(&b);
	wd_daemon_config_free(c2);
	wd_daemon_config_free(c);
	wd_daemon_config_free(def);
	wd_diag_free(&d);
	wd_diag_free(&d2);
	bad("fleet-capacity-two-tiers", "fleet: {url: x, capacity: [2, 2]}\n",
	    "d.yaml:1:27: 'fleet.capacity': a number, or [T1, T2, T3]");
	bad("fleet-capacity-tier-negative",
	    "fleet: {url: x, capacity: [2, -1, 0]}\n",
	    "d.yaml:1:31: 'fleet.capacity': -1 is out of range");
	bad("fleet-url-required", "fleet: {capacity: 2}\n", "'url'");
	bad("fleet-lease-min", "fleet: {url: x, lease_ms: 10}\n",
	    "d.yaml:1:27: 'fleet.lease_ms': 10 is out of range");
	bad("fleet-label-form", "fleet: {url: x, labels: [\"Zone a\"]}\n",
	    "d.yaml:1:26: 'fleet.labels': --fleet-label Zone a: want "
	    "KEY=VALUE");
	bad("fleet-unknown-key", "fleet: {url: x, placement: y}\n",
	    "placement");
	bad("fleet-when-down-value", "fleet: {url: x, when_down: queue}\n",
	    "d.yaml:1:28: 'fleet.when_down': refuse or run_here");
	bad("fleet-url-file-relative", "fleet: {url: \"@fleet.url\"}\n",
	    "absolute path");

	struct wd_err e = {0};
	char *ci = NULL;
	T_OK(wd_fleet_conninfo("postgresql://u@h/db?connect_timeout=2", &ci,
			       &e) == 0 &&
		 ci && !strcmp(ci, "postgresql://u@h/db?connect_timeout=2"),
	     "url-uri", "%s", e.msg);
	free(ci);
	ci = NULL;
	T_OK(wd_fleet_conninfo("host=/tmp bogus_key=1", &ci, &e) == -EINVAL &&
		 strstr(e.msg, "bogus_key"),
	     "url-bad-key", "%s", e.msg);
	char path[] = "/tmp/test_fleet_url.XXXXXX";
	int fd = mkstemp(path);
	T_OK(fd >= 0 && write(fd, "host=/run/pg dbname=w\n", 22) == 22,
	     "url-file-made", "%s", strerror(errno));
	char at[64];
	snprintf(at, sizeof(at), "@%s", path);
	T_OK(wd_fleet_conninfo(at, &ci, &e) == 0 && ci &&
		 !strcmp(ci, "host=/run/pg dbname=w"),
	     "url-at-file", "%s / %s", ci ? ci : "", e.msg);
	free(ci);
	ci = NULL;
	T_OK(wd_fleet_conninfo(path, &ci, &e) == 0 && ci &&
		 !strcmp(ci, "host=/run/pg dbname=w"),
	     "url-path", "%s", e.msg);
	free(ci);
	ci = NULL;
	T_OK(ftruncate(fd, 0) == 0 &&
		 wd_fleet_conninfo(at, &ci, &e) == -EINVAL &&
		 strstr(e.msg, "first line"),
	     "url-file-empty", "%s", e.msg);
	close(fd);
	unlink(path);
	T_OK(wd_fleet_conninfo("@/nonexistent/x", &ci, &e) == -ENOENT,
	     "url-file-missing", "%s", e.msg);
	T_OK(wd_fleet_label_check("zone=eu-west/1", &e) == 0 &&
		 wd_fleet_label_check("=a", &e) == -EINVAL &&
		 wd_fleet_label_check("novalue", &e) == -EINVAL &&
		 wd_fleet_label_check("UPPER=a", &e) == -EINVAL,
	     "labels", "%s", e.msg);
	return T_DONE();
}
