/* The broker's checks in order (grant -> authz -> schema -> rate limit ->
 * approval), the sliding-window rate limiter and approval thresholds. */
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "t.h"

static struct wd_manifest *tools[4];
static int n_tools;

static const struct wd_manifest *lookup(void *arg, const char *name)
{
	for (int i = 0; i < n_tools; i++)
		if (!strcmp(tools[i]->name, name))
			return tools[i];
	return NULL;
}

static struct wd_manifest *load(const char *yaml)
{
	struct wd_manifest *m = NULL;
	struct wd_diag d = {0};
	if (wd_manifest_load_str("test.yaml", yaml, strlen(yaml), &m, &d)) {
		for (int i = 0; i < d.n; i++)
			printf("manifest: %s\n", d.msgs[i]);
		wd_diag_free(&d);
		return NULL;
	}
	return m;
}

static enum wd_broker_verdict chk(const struct wd_broker_run *r,
				  const char *tool, const char *args,
				  struct wd_ratelimit *rl, bool approved,
				  char *check, char *reason)
{
	json_error_t je;
	struct wd_broker_call c = {.call_id = "c1", .name = tool};
	c.args = json_loads(args, 0, &je);
	const struct wd_manifest *m;
	enum wd_broker_verdict v =
	    wd_broker_check(r, &c, rl, approved, &m, check, reason, 512);
	json_decref(c.args);
	return v;
}

int main(void)
{
	tools[n_tools++] =
	    load("name: mail\ntier: 1\nexec: [\"/usr/bin/cat\"]\n"
		 "args_schema: {type: object, required: [to], properties: {to: "
		 "{type: array, items: {type: string}}, n: {type: integer}}}\n"
		 "filesystem: {exec: [\"/usr/bin/cat\"]}\n"
		 "auth: {mode: on_behalf_of_user, scopes: [\"email:send\"]}\n"
		 "rate_limit: \"2/min per run\"\n"
		 "approval: {required_above: {to: 1, n: 10}}\n");
	tools[n_tools++] = load("name: svc\ntier: 1\nexec: [\"/usr/bin/cat\"]\n"
				"filesystem: {exec: [\"/usr/bin/cat\"]}\n"
				"auth: {mode: service}\napproval: always\n");
	tools[n_tools++] =
	    load("name: secret\ntier: 1\nexec: [\"/usr/bin/cat\"]\n"
		 "filesystem: {exec: [\"/usr/bin/cat\"]}\n"
		 "auth: {mode: on_behalf_of_user, scopes: [\"x:y\"]}\n");
	if (!tools[0] || !tools[1] || !tools[2]) {
		T_FAIL("broker/manifests", "test manifests do not load");
		return T_DONE();
	}
	char *granted[] = {"mail", "svc"};
	char *scopes[] = {"email:*", "docs:read"};
	struct wd_broker_run r = {
	    .run_id = "run_1",
	    .agent = "a",
	    .team = "t",
	    .granted = granted,
	    .n_granted = 2,
	    .user = "alice",
	    .uid = 1000,
	    .gid = 1000,
	    .user_scopes = scopes,
	    .n_user_scopes = 2,
	    .tool = lookup,
	};
	struct wd_ratelimit *rl = wd_ratelimit_new();
	char check[16], reason[512];
	enum wd_broker_verdict v;

	/* 1. grant first: even a tool the user could use, if not granted */
	v = chk(&r, "secret", "{}", rl, false, check, reason);
	T_OK(v == WD_BRK_DENIED && !strcmp(check, "grant"), "broker/grant",
	     "%d %s", v, check);
	v = chk(&r, "nosuch", "{}", rl, false, check, reason);
	T_OK(v == WD_BRK_DENIED && !strcmp(check, "grant"),
	     "broker/grant-unknown", "%d %s", v, check);
	/* 2. authz before schema: a user without the scope learns nothing
	 * about the schema */
	char *noscope[] = {"docs:read"};
	struct wd_broker_run r2 = r;
	r2.user_scopes = noscope;
	r2.n_user_scopes = 1;
	v = chk(&r2, "mail", "{\"bad\":1}", rl, false, check, reason);
	T_OK(v == WD_BRK_DENIED && !strcmp(check, "authz") &&
		 strstr(reason, "lacks scope 'email:send'"),
	     "broker/authz-before-schema", "%d %s %s", v, check, reason);
	/* wildcard grant email:* covers email:send; schema next */
	v = chk(&r, "mail", "{\"to\":\"x\"}", rl, false, check, reason);
	T_OK(v == WD_BRK_INVALID && !strcmp(check, "schema") &&
		 strstr(reason, "$.to: expected array"),
	     "broker/schema-message", "%d %s %s", v, check, reason);
	/* a schema error does not use a rate-limit token */
	v = chk(&r, "mail", "{\"to\":[\"a\"]}", rl, false, check, reason);
	T_OK(v == WD_BRK_ALLOW, "broker/allow", "%d %s %s", v, check, reason);
	/* 5. approval: 2 recipients > 1 */
	v = chk(&r, "mail", "{\"to\":[\"a\",\"b\"]}", rl, false, check, reason);
	T_OK(v == WD_BRK_APPROVAL && strstr(reason, "to = 2 is above"),
	     "broker/approval-array-length", "%d %s", v, reason);
	/* 4. third call in the minute: rate limited (before approval) */
	v = chk(&r, "mail", "{\"to\":[\"a\"]}", rl, false, check, reason);
	T_OK(v == WD_BRK_DENIED && !strcmp(check, "rate_limit"),
	     "broker/rate-limit", "%d %s %s", v, check, reason);
	/* other runs have their own window */
	struct wd_broker_run r3 = r;
	r3.run_id = "run_2";
	v = chk(&r3, "mail", "{\"to\":[\"a\"],\"n\":11}", rl, false, check,
		reason);
	T_OK(v == WD_BRK_APPROVAL && strstr(reason, "n = 11"),
	     "broker/approval-numeric", "%d %s", v, reason);
	/* an approved call skips the gate, never the other checks */
	v = chk(&r3, "mail", "{\"to\":5}", rl, true, check, reason);
	T_OK(v == WD_BRK_INVALID, "broker/approved-still-validated", "%d", v);
	/* service mode: no user scopes needed; approval: always */
	v = chk(&r2, "svc", "{}", rl, false, check, reason);
	T_OK(v == WD_BRK_APPROVAL, "broker/service-no-scopes-always-approval",
	     "%d %s", v, reason);
	/* a model's unparsable arguments are a schema error */
	struct wd_broker_call bad = {.call_id = "c",
				     .name = "mail",
				     .args = json_object(),
				     .parse_error = true};
	const struct wd_manifest *m;
	v = wd_broker_check(&r3, &bad, rl, false, &m, check, reason, 512);
	T_OK(v == WD_BRK_INVALID, "broker/parse-error-invalid", "%d", v);
	json_decref(bad.args);

	/* sliding window: 2 per 10 s, kept in WD_RL_SLOTS buckets of 10/31 s:
	 * a token comes back one bucket after the exact 10 s at most */
	struct wd_ratelimit *w = wd_ratelimit_new();
	uint64_t s = 1000000000ull;
	bool a = wd_ratelimit_take(w, "r", "k", 2, 10, 100 * s);
	bool b = wd_ratelimit_take(w, "r", "k", 2, 10, 101 * s);
	bool c = wd_ratelimit_take(w, "r", "k", 2, 10, 105 * s);
	bool c2 = wd_ratelimit_take(w, "r", "k", 2, 10, 109 * s);
	/* first aged out (with its bucket) */
	bool d = wd_ratelimit_take(w, "r", "k", 2, 10, 110 * s + s / 2);
	bool e = wd_ratelimit_take(w, "r", "k", 2, 10, 110 * s + s / 2);
	bool f = wd_ratelimit_take(w, "r", "other", 2, 10, 110 * s);
	bool g = wd_ratelimit_take(w, "r2", "k", 2, 10, 110 * s);
	T_OK(a && b && !c && !c2 && d && !e && f && g,
	     "ratelimit/sliding-window", "%d%d%d%d%d%d%d%d", a, b, c, c2, d, e,
	     f, g);
	wd_ratelimit_free(w);

	/* never more than N in ANY window of the limit's length, checked
	 * against an exact log of the allowed calls, at random call times */
	w = wd_ratelimit_new();
	enum { N = 7, PER = 3, CALLS = 20000 };
	static uint64_t allowed[CALLS];
	int na = 0, worst = 0;
	uint64_t t = 5 * s;
	srand(42);
	for (int i = 0; i < CALLS; i++) {
		t += (uint64_t)(rand() % 400) * 1000000ull;
		if (wd_ratelimit_take(w, "run_x", "k", N, PER, t))
			allowed[na++] = t;
	}
	for (int i = 0, j = 0; i < na; i++) {
		while (allowed[i] - allowed[j] >= (uint64_t)PER * s)
			j++;
		if (i - j + 1 > worst)
			worst = i - j + 1;
	}
	/* and not much stricter than exact: over ~4000 s at ~5 calls/s
	 * an exact limiter allows about N per PER s */
	T_OK(worst <= N && na > (int)((t - 5 * s) / (PER * s)) * N * 9 / 10,
	     "ratelimit/never-over-n-any-window",
	     "worst window held %d (limit %d), %d allowed", worst, N, na);
	wd_ratelimit_free(w);

	/* bounded memory: a key's state does not grow with its limit or
	 * its calls; a run's keys go when it is forgotten; idle keys of
	 * users expire as the table is used */
	w = wd_ratelimit_new();
	size_t b1 = 0, b2 = 0, b3 = 0, b4 = 0;
	wd_ratelimit_take(w, "run_a", "shell|run", 1, 60, 10 * s);
	wd_ratelimit_keys(w, &b1);
	for (int i = 0; i < 30000; i++)
		wd_ratelimit_take(w, "run_b", "shell|run", 30000, 60,
				  10 * s + (uint64_t)i * 1000);
	wd_ratelimit_keys(w, &b2);
	T_OK(b2 - b1 == b1, "ratelimit/fixed-size-per-key",
	     "1/min key %zu bytes, 30000/min key with 30000 calls %zu bytes",
	     b1, b2 - b1);
	wd_ratelimit_forget(w, "run_b");
	size_t k = wd_ratelimit_keys(w, &b3);
	T_OK(k == 1 && b3 == b1, "ratelimit/forget-run", "%zu keys %zu bytes",
	     k, b3);
	for (int i = 0; i < 100; i++) {
		char who[16];
		snprintf(who, sizeof(who), "user%d", i);
		wd_ratelimit_take(w, who, "shell|user", 5, 1, 20 * s);
	}
	/* 2 s later every window has passed: 1024 takes sweep every chain */
	for (int i = 0; i < 1100; i++)
		wd_ratelimit_take(w, "run_c", "shell|run", 1000000, 1,
				  23 * s + (uint64_t)i);
	/* left: run_c, and run_a whose 1/min window has not passed */
	k = wd_ratelimit_keys(w, &b4);
	T_OK(k == 2, "ratelimit/keys-expire", "%zu keys left", k);
	wd_ratelimit_free(w);
	wd_ratelimit_free(rl);
	for (int i = 0; i < n_tools; i++)
		wd_manifest_free(tools[i]);
	return T_DONE();
}
