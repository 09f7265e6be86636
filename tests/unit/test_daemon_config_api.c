/* policy/daemon.yaml `api:` (wardend's connection limits): defaults, every
 * key, ranges, unknown keys with file:line:col, per-uid above total, the
 * reload diff. */
#include "../t.h"
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
	T_OK(c->api.threads == 4 && c->api.max_connections == 1024 &&
		 c->api.max_connections_per_uid == 64 &&
		 c->api.request_timeout_s == 10 &&
		 c->api.idle_timeout_s == 30 && c->api.listen_backlog == 4096,
	     "api-defaults", "threads %u max %u per uid %u", c->api.threads,
	     c->api.max_connections, c->api.max_connections_per_uid);
	wd_daemon_config_free(c);

	struct wd_diag d;
	int rc = load("api: {threads: 2, max_connections: 300, "
		      "max_connections_per_uid: 30, request_timeout_s: 5, "
		      "idle_timeout_s: 7, listen_backlog: 512}\n",
		      &c, &d);
	T_OK(rc == 0 && c && c->api.threads == 2 &&
		 c->api.max_connections == 300 &&
		 c->api.max_connections_per_uid == 30 &&
		 c->api.request_timeout_s == 5 && c->api.idle_timeout_s == 7 &&
		 c->api.listen_backlog == 512,
	     "api-every-key", "rc %d: %s", rc, d.n ? d.msgs[0] : "");
	struct wd_daemon_config *def = wd_daemon_config_new();
	struct wd_buf b = {0};
	if (c)
		wd_daemon_config_diff(def, c, &b);
	T_OK(b.data && strstr(b.data, "api.threads") &&
		 strstr(b.data, "api.max_connections_per_uid") &&
		 strstr(b.data, "api.listen_backlog"),
	     "api-diff", "'%s'", b.data ? b.data : "");
	wd_buf_free(&b);
	wd_daemon_config_free(def);
	wd_daemon_config_free(c);
	wd_diag_free(&d);

	/* a partial block keeps the other defaults */
	rc = load("api:\n  max_connections_per_uid: 8\n", &c, &d);
	T_OK(rc == 0 && c && c->api.max_connections_per_uid == 8 &&
		 c->api.max_connections == 1024 && c->api.threads == 4,
	     "api-partial-keeps-defaults", "rc %d", rc);
	wd_daemon_config_free(c);
	wd_diag_free(&d);

	bad("api-unknown-key", "api:\n  idle_s: 3\n",
	    "d.yaml:2:3: unknown key 'idle_s' in 'api'");
	bad("api-zero-threads", "api: {threads: 0}\n", "'api.threads'");
	bad("api-zero-timeout", "api: {request_timeout_s: 0}\n",
	    "'api.request_timeout_s'");
	bad("api-negative", "api: {max_connections: -1}\n",
	    "'api.max_connections'");
	bad("api-string", "api: {idle_timeout_s: soon}\n",
	    "'api.idle_timeout_s'");
	bad("api-tiny-backlog", "api: {listen_backlog: 1}\n",
	    "'api.listen_backlog'");
	bad("api-per-uid-above-total",
	    "api: {max_connections: 10, max_connections_per_uid: 20}\n",
	    "'api.max_connections_per_uid' (20) is above "
	    "'api.max_connections' (10)");
	bad("api-not-a-map", "api: 5\n", "'api'");
	return T_DONE();
}
