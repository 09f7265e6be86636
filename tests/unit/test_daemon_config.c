/* policy/daemon.yaml parser: defaults, every key, strictness (unknown keys,
 * types, ranges, regexes) with file:line:col, the shipped file, a missing
 * file, the diff a reload reports. */
#include "../t.h"
#include "policy/daemon_config.h"

#include <grp.h>
#include <pwd.h>
#include <regex.h>
#include <stdlib.h>
#include <unistd.h>

static int load(const char *text, struct wd_daemon_config **c,
		struct wd_diag *d)
{
	memset(d, 0, sizeof(*d));
	return wd_daemon_config_load_str("d.yaml", text, strlen(text), c, d);
}

/* The config must fail with exactly one diagnostic starting with `want`. */
static void bad(const char *name, const char *text, const char *want)
{
	struct wd_daemon_config *c = NULL;
	struct wd_diag d;
	int rc = load(text, &c, &d);
	T_OK(rc == -EINVAL && !c && d.n >= 1 &&
		 !strncmp(d.msgs[0], want, strlen(want)),
	     name, "rc %d, %d diags, first '%s', want '%s'", rc, d.n,
	     d.n ? d.msgs[0] : "", want);
	wd_diag_free(&d);
}

/* The same, the diagnostic matching the POSIX extended regex `re`. */
static void bad_re(const char *name, const char *text, const char *re)
{
	struct wd_daemon_config *c = NULL;
	struct wd_diag d;
	regex_t rx;
	int rc = load(text, &c, &d);
	bool ok = regcomp(&rx, re, REG_EXTENDED | REG_NOSUB) == 0;
	T_OK(ok && rc == -EINVAL && !c && d.n >= 1 &&
		 regexec(&rx, d.msgs[0], 0, NULL, 0) == 0,
	     name, "rc %d, %d diags, first '%s', want /%s/", rc, d.n,
	     d.n ? d.msgs[0] : "", re);
	if (ok)
		regfree(&rx);
	wd_diag_free(&d);
}

/* What the uid range check must name for [a, b]: the first account (or
 * group) of the user database in it, as `getent` enumerates, else
 * `fallback`. */
static char *conflict_re(unsigned a, unsigned b, const char *fallback)
{
	char *re = NULL;
	setpwent();
	for (struct passwd *pw; !re && (pw = getpwent());)
		if (pw->pw_uid >= a && pw->pw_uid <= b)
			re = wd_asprintf("uid %u is the account '%s'",
					 (unsigned)pw->pw_uid, pw->pw_name);
	endpwent();
	setgrent();
	for (struct group *gr; !re && (gr = getgrent());)
		if (gr->gr_gid >= a && gr->gr_gid <= b)
			re = wd_asprintf("gid %u is the group '%s'",
					 (unsigned)gr->gr_gid, gr->gr_name);
	endgrent();
	return re ? re : wd_strdup(fallback);
}

int main(void)
{
	struct wd_daemon_config *c = NULL;
	struct wd_diag d;

	/* defaults: no file, empty file, a file of comments */
	c = wd_daemon_config_new();
	T_OK(c->warm_pool.size == 0 && c->warm_pool.idle_s == 300 &&
		 !c->otlp.endpoint && c->redact && !c->redact[0],
	     "defaults", "size %d idle %u", c->warm_pool.size,
	     c->warm_pool.idle_s);
	wd_daemon_config_free(c);
	int rc = load("# nothing set\n", &c, &d);
	T_OK(rc == 0 && c && c->warm_pool.size == 0 && c->n_redact == 0,
	     "comments-only-is-defaults", "rc %d", rc);
	wd_daemon_config_free(c);
	wd_diag_free(&d);

	/* every key */
	rc = load("warm_pool: {size: 3, per_tenant: 2, idle_s: 45, "
		  "key_idle_s: 90, max_keys: 7}\n"
		  "trace:\n"
		  "  otlp: {endpoint: \"http://127.0.0.1:4318/v1/traces\", "
		  "queue: 100, batch: 10, timeout_ms: 500, service_name: n1}\n"
		  "  redact: [\"pw=[0-9]+\", \"[Tt]oken=[a-z]+\"]\n",
		  &c, &d);
	T_OK(rc == 0 && c, "full-parses", "rc %d: %s", rc,
	     d.n ? d.msgs[0] : "");
	if (c) {
		T_OK(c->warm_pool.size == 3 && c->warm_pool.per_tenant == 2 &&
			 c->warm_pool.idle_s == 45 &&
			 c->warm_pool.key_idle_s == 90 &&
			 c->warm_pool.max_keys == 7,
		     "full-pool", "%d %d %u", c->warm_pool.size,
		     c->warm_pool.per_tenant, c->warm_pool.idle_s);
		T_OK(c->otlp.endpoint &&
			 !strcmp(c->otlp.endpoint,
				 "http://127.0.0.1:4318/v1/traces") &&
			 c->otlp.queue == 100 && c->otlp.batch == 10 &&
			 c->otlp.timeout_ms == 500 &&
			 !strcmp(c->otlp.service_name, "n1"),
		     "full-otlp", "endpoint %s queue %u", c->otlp.endpoint,
		     c->otlp.queue);
		T_OK(c->n_redact == 2 && !strcmp(c->redact[0], "pw=[0-9]+") &&
			 !strcmp(c->redact[1], "[Tt]oken=[a-z]+") &&
			 !c->redact[2],
		     "full-redact", "%d patterns", c->n_redact);
	}
	wd_diag_free(&d);

	/* diff: what a reload reports as needing a restart */
	struct wd_daemon_config *c2 = NULL;
	rc = load("warm_pool: {size: 3, per_tenant: 2, idle_s: 45}\n"
		  "trace: {redact: [\"pw=[0-9]+\"]}\n",
		  &c2, &d);
	wd_diag_free(&d);
	struct wd_buf b = {0};
	if (c && c2)
		wd_daemon_config_diff(c, c2, &b);
	T_OK(b.data && !strcmp(b.data, "warm_pool.key_idle_s, "
				       "warm_pool.max_keys, "
				       "trace.otlp.endpoint, "
				       "trace.otlp.service_name, "
				       "trace.otlp.queue, trace.otlp.batch, "
				       "trace.otlp.timeout_ms, trace.redact"),
	     "diff-names", "'%s'", b.data ? b.data : "");
	wd_buf_free(&b);
	if (c)
		wd_daemon_config_diff(c, c, &b);
	T_OK(b.len == 0, "diff-same-empty", "'%s'", b.data);
	wd_buf_free(&b);
	wd_daemon_config_free(c);
	wd_daemon_config_free(c2);

	/* strictness: each error names file:line:col */
	bad("unknown-top-key", "warm_pool: {size: 1}\nwarmpool: {}\n",
	    "d.yaml:2:1: unknown key 'warmpool'");
	bad("unknown-pool-key", "warm_pool: {size: 1, sise: 2}\n",
	    "d.yaml:1:22: unknown key 'sise' in 'warm_pool'");
	bad("unknown-otlp-key",
	    "trace:\n  otlp: {endpoint: \"http://x\", queu: 1}\n",
	    "d.yaml:2:32: unknown key 'queu' in 'trace.otlp'");
	bad("pcre-regex",
	    "trace:\n  redact:\n    - \"ok=[0-9]+\"\n"
	    "    - \"(?i)token=[a-z0-9]+\"\n",
	    "d.yaml:4:7: 'trace.redact': '(?i)token=[a-z0-9]+' is not a "
	    "POSIX extended regex");
	bad("unbalanced-regex", "trace: {redact: [\"a(b\"]}\n",
	    "d.yaml:1:18: 'trace.redact': 'a(b' is not a POSIX");
	bad("empty-match-regex", "trace: {redact: [\"x*\"]}\n",
	    "d.yaml:1:18: 'trace.redact': 'x*' matches the empty string");
	bad("redact-not-list", "trace: {redact: \"pw=.*\"}\n", "d.yaml:1:17:");
	bad("size-type", "warm_pool: {size: one}\n",
	    "d.yaml:1:19: 'warm_pool.size' must be an integer");
	bad("size-range", "warm_pool: {size: 1000}\n",
	    "d.yaml:1:19: 'warm_pool.size': 1000 is out of range");
	bad("max-keys-zero", "warm_pool: {max_keys: 0}\n",
	    "d.yaml:1:23: 'warm_pool.max_keys': 0 is out of range");
	bad("idle-zero", "warm_pool: {idle_s: 0}\n",
	    "d.yaml:1:21: 'warm_pool.idle_s': 0 is out of range");
	bad("endpoint-scheme", "trace: {otlp: {endpoint: \"udp://x\"}}\n",
	    "d.yaml:1:26: 'trace.otlp.endpoint': 'udp://x' is not an http");
	bad("endpoint-required", "trace: {otlp: {queue: 5}}\n",
	    "d.yaml:1:15: missing required key 'endpoint'");
	bad("queue-zero", "trace: {otlp: {endpoint: \"http://x\", queue: 0}}\n",
	    "d.yaml:1:45: 'trace.otlp.queue': 0 is out of range");
	bad("duplicate-key", "warm_pool: {size: 1}\nwarm_pool: {size: 2}\n",
	    "d.yaml:2:1: duplicate key 'warm_pool'");
	bad("two-documents", "warm_pool: {size: 1}\n---\nwarm_pool: {}\n",
	    "d.yaml:3:1: daemon config must hold one document");
	bad("yaml-syntax", "warm_pool: {size: 1\n", "d.yaml:");

	/* several errors in one pass */
	rc =
	    load("warm_pool: {sise: 1, idle_s: -1}\ntrace: {redact: [\"(\"]}\n",
		 &c, &d);
	T_OK(rc == -EINVAL && d.n == 3, "several-errors", "rc %d, %d diags", rc,
	     d.n);
	wd_diag_free(&d);

	/* uids.range: the per-call uids (sandbox/uidpool.h) */
	bad("uids-range-negative-to-some",
	    "uids: {range: 3000000000-3000000009}\n",
	    "d.yaml:1:15: 'uids.range': uid range '3000000000-3000000009': "
	    "above 2147483646");
	/* ranges that hold the node's accounts or groups, regular users'
	 * ids, systemd's dynamic users or nobody: a tool would run as them */
	char *uwant = conflict_re(60000, 70000, "holds uids up to 60000");
	char *ure = wd_asprintf(
	    "^d.yaml:2:10: 'uids.range': uid range '60000-70000': %s", uwant);
	bad_re("uids-range-nobody", "uids:\n  range: 60000-70000\n", ure);
	free(uwant);
	free(ure);
	uwant = conflict_re(1000, 1999, "holds uids up to 60000");
	ure = wd_asprintf(
	    "^d.yaml:1:15: 'uids.range': uid range '1000-1999': %s", uwant);
	bad_re("uids-range-regular-users", "uids: {range: 1000-1999}\n", ure);
	free(uwant);
	free(ure);
	uwant = conflict_re(1, 60000, "holds uids up to 60000");
	ure = wd_asprintf("^d.yaml:1:15: 'uids.range': uid range '1-60000': %s",
			  uwant);
	bad_re("uids-range-1-60000", "uids: {range: 1-60000}\n", ure);
	free(uwant);
	free(ure);
	uwant = conflict_re(61184, 61300,
			    "overlaps systemd's dynamic users \\(61184-65519");
	ure = wd_asprintf(
	    "^d.yaml:1:15: 'uids.range': uid range '61184-61300': %s", uwant);
	bad_re("uids-range-dynamic-users", "uids: {range: 61184-61300}\n", ure);
	free(uwant);
	free(ure);
	uwant = conflict_re(65534, 65534, "holds 65534 \\(nobody\\)");
	ure = wd_asprintf(
	    "^d.yaml:1:15: 'uids.range': uid range '65534-65534': %s", uwant);
	bad_re("uids-range-nobody-alone", "uids: {range: 65534-65534}\n", ure);
	free(uwant);
	free(ure);
	bad("uids-range-form", "uids: {range: \"12\"}\n",
	    "d.yaml:1:15: 'uids.range': uid range '12': expected FIRST-LAST");
	bad("uids-range-reversed", "uids: {range: 20-10}\n",
	    "d.yaml:1:15: 'uids.range': uid range '20-10': must be FIRST-LAST");
	bad("uids-unknown-key", "uids: {rnage: 1-2}\n", "d.yaml:1:8:");
	/* dns: the resolvers' upstream and the operator's names */
	bad("dns-upstream-name", "dns: {upstream: \"resolver:53\"}\n",
	    "d.yaml:1:17: 'dns.upstream': DNS upstream 'resolver:53': want "
	    "IPV4:PORT");
	bad("dns-hosts-relative", "dns: {hosts: hosts.txt}\n",
	    "d.yaml:1:14: 'dns.hosts': 'hosts.txt' must be an absolute path");
	rc = load(
	    "dns: {upstream: \"10.0.0.2:5353\", hosts: /etc/warden/hosts}\n",
	    &c, &d);
	T_OK(rc == 0 && c && c->dns.have_upstream &&
		 c->dns.upstream.server_port == 5353 &&
		 c->dns.upstream.server4[0] == 10 && c->dns.hosts &&
		 !strcmp(c->dns.hosts, "/etc/warden/hosts"),
	     "dns-parsed", "rc %d", rc);
	wd_daemon_config_free(c);
	wd_diag_free(&d);
	rc = load("uids: {range: 1500000000-1500000099}\n", &c, &d);
	T_OK(rc == 0 && c && c->uids.first == 1500000000u &&
		 c->uids.count == 100,
	     "uids-range-parsed", "rc %d", rc);
	wd_daemon_config_free(c);
	wd_diag_free(&d);

	/* the shipped file parses and sets a warm pool */
	memset(&d, 0, sizeof(d));
	rc = wd_daemon_config_load_file("policy/daemon.yaml", &c, &d);
	if (rc == -ENOENT)
		T_SKIP("shipped", "run from the source tree");
	else
		T_OK(rc == 0 && c && c->warm_pool.size >= 1 && c->n_redact > 0,
		     "shipped", "rc %d: %s", rc, d.n ? d.msgs[0] : "");
	wd_daemon_config_free(c);
	wd_diag_free(&d);

	/* load_dir: a missing file is the defaults; a bad one an error
	 * naming file:line:col */
	char dir[] = "/tmp/wd-dcfg.XXXXXX";
	if (!mkdtemp(dir)) {
		T_FAIL("dir", "mkdtemp: %s", strerror(errno));
		return T_DONE();
	}
	struct wd_err err = {0};
	rc = wd_daemon_config_load_dir(dir, &c, &err);
	T_OK(rc == 0 && c && !c->source && c->warm_pool.size == 0,
	     "dir-missing-file-defaults", "rc %d %s", rc, err.msg);
	wd_daemon_config_free(c);
	char *path = wd_asprintf("%s/daemon.yaml", dir);
	wd_write_file(path, "trace: {redact: [ok, \"[z\"]}\n", 28, 0600);
	rc = wd_daemon_config_load_dir(dir, &c, &err);
	char *want = wd_asprintf("%s:1:22: 'trace.redact': '[z'", path);
	T_OK(rc == -EINVAL && !c && !strncmp(err.msg, want, strlen(want)),
	     "dir-bad-file", "rc %d '%s'", rc, err.msg);
	free(want);
	unlink(path);
	free(path);
	rmdir(dir);
	return T_DONE();
}
