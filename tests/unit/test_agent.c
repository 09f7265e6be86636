/* Agent definitions and users.yaml: shipped files, every field, exact
 * diagnostics, scope and approver queries. Run from the repository root. */
#include "policy/agent.h"
#include "policy/users.h"
#include "t.h"

/* Parse `text` as an agent; check the diagnostics are exactly `want`
 * (NULL-terminated, without the "x.yaml:" prefix). */
static void agent_bad(const char *name, const char *text,
		      const char *const *want)
{
	struct wd_agent *a = NULL;
	struct wd_diag d = {0};
	int rc = wd_agent_load_str("x.yaml", text, strlen(text), &a, &d);
	int n = 0;
	bool ok = rc == -EINVAL && !a;
	while (want[n])
		n++;
	ok = ok && d.n == n;
	for (int i = 0; ok && i < n; i++) {
		char full[512];
		snprintf(full, sizeof(full), "x.yaml:%s", want[i]);
		ok = !strcmp(d.msgs[i], full);
	}
	T_OK(ok, name, "rc %d, %d messages (want %d)", rc, d.n, n);
	if (!ok)
		for (int i = 0; i < d.n; i++)
			printf("    got: %s\n", d.msgs[i]);
	wd_agent_free(a);
	wd_diag_free(&d);
}

static void users_bad(const char *name, const char *text,
		      const char *const *want)
{
	struct wd_users *u = NULL;
	struct wd_diag d = {0};
	int rc = wd_users_load_str("u.yaml", text, strlen(text), &u, &d);
	int n = 0;
	bool ok = rc == -EINVAL && !u;
	while (want[n])
		n++;
	ok = ok && d.n == n;
	for (int i = 0; ok && i < n; i++) {
		char full[512];
		snprintf(full, sizeof(full), "u.yaml:%s", want[i]);
		ok = !strcmp(d.msgs[i], full);
	}
	T_OK(ok, name, "rc %d, %d messages (want %d)", rc, d.n, n);
	if (!ok)
		for (int i = 0; i < d.n; i++)
			printf("    got: %s\n", d.msgs[i]);
	wd_users_free(u);
	wd_diag_free(&d);
}

static void test_agent_shipped(void)
{
	struct wd_agent *a = NULL;
	struct wd_diag d = {0};
	int rc = wd_agent_load_file("policy/agents/analyst.yaml", &a, &d);
	T_OK(rc == 0 && a, "agent-shipped-analyst", "rc %d %s", rc,
	     d.n ? d.msgs[0] : "");
	if (a) {
		T_OK(!strcmp(a->name, "analyst") && !strcmp(a->team, "data") &&
			 !strcmp(a->model, "default"),
		     "agent-analyst-identity", "%s/%s/%s", a->name, a->team,
		     a->model);
		T_OK(a->n_tools == 4 && wd_agent_has_tool(a, "run_python") &&
			 wd_agent_has_tool(a, "fetch_url") &&
			 wd_agent_has_tool(a, "send_customer_email") &&
			 wd_agent_has_tool(a, "search_internal_docs") &&
			 !wd_agent_has_tool(a, "shell"),
		     "agent-analyst-tools", "n %d", a->n_tools);
		T_OK(a->bounds.max_steps == 30 &&
			 a->bounds.token_budget == 200000 &&
			 a->bounds.wall_clock_s == 300 &&
			 a->bounds.cost_cap_usd == 2.0,
		     "agent-analyst-bounds", "%u", a->bounds.max_steps);
		T_OK(strstr(a->system_prompt, "You are an analyst.") ==
			 a->system_prompt,
		     "agent-analyst-prompt", "%s", a->system_prompt);
	}
	wd_agent_free(a);
	wd_diag_free(&d);
}

static void test_agent_fields(void)
{
	const char *y =
	    "name: a1\n"
	    "team: t\n"
	    "model: claude\n"
	    "system_prompt: hi\n"
	    "tools: []\n"
	    "bounds: {max_steps: 3, token_budget: 5000, "
	    "wall_clock_s: 9, cost_cap_usd: 0.5, approval_ttl_s: "
	    "60}\n"
	    "context: {budget_tokens: 4096, strategy: sliding_window}\n"
	    "trace: {payloads: hash_only, retention_days: 7}\n"
	    "temperature: 0\n";
	struct wd_agent *a = NULL;
	struct wd_diag d = {0};
	int rc = wd_agent_load_str("a.yaml", y, strlen(y), &a, &d);
	T_OK(rc == 0 && a, "agent-fields-load", "rc %d %s", rc,
	     d.n ? d.msgs[0] : "");
	if (a) {
		T_OK(a->n_tools == 0 && a->tools && !a->tools[0],
		     "agent-field-tools-empty", "%d", a->n_tools);
		T_OK(a->bounds.approval_ttl_s == 60 &&
			 a->bounds.cost_cap_usd == 0.5,
		     "agent-field-bounds", "%u", a->bounds.approval_ttl_s);
		T_OK(a->context.budget_tokens == 4096 &&
			 a->context.strategy == WD_CTX_SLIDING_WINDOW,
		     "agent-field-context", "%d", a->context.strategy);
		T_OK(a->trace.payloads == WD_TRACE_HASH_ONLY &&
			 a->trace.retention_days == 7,
		     "agent-field-trace", "%d", a->trace.payloads);
		T_OK(a->temperature == 0, "agent-field-temperature", "%g",
		     a->temperature);
	}
	wd_agent_free(a);
	wd_diag_free(&d);

	/* defaults; JSON form */
	const char *j = "{\"name\": \"j\", \"team\": \"t\", \"model\": \"m\", "
			"\"system_prompt\": \"\", \"tools\": [\"x\"], "
			"\"bounds\": {\"max_steps\": 1, \"token_budget\": 1, "
			"\"wall_clock_s\": 1, \"cost_cap_usd\": 0.01}}";
	rc = wd_agent_load_str("j.json", j, strlen(j), &a, &d);
	T_OK(rc == 0 && a &&
		 a->context.budget_tokens == WD_AGENT_DEFAULT_CONTEXT_TOKENS &&
		 a->context.strategy == WD_CTX_SLIDING_WINDOW &&
		 a->trace.payloads == WD_TRACE_FULL &&
		 a->trace.retention_days == WD_AGENT_DEFAULT_RETENTION_DAYS &&
		 a->bounds.approval_ttl_s == WD_AGENT_DEFAULT_APPROVAL_TTL_S &&
		 a->temperature < 0,
	     "agent-defaults-json", "rc %d %s", rc, d.n ? d.msgs[0] : "");
	wd_agent_free(a);
	wd_diag_free(&d);
}

static void test_agent_errors(void)
{
	static const char *const w1[] = {
	    "1:1: missing required key 'bounds' in agent", NULL};
	agent_bad("agent-missing-bounds",
		  "name: a\nteam: t\nmodel: m\nsystem_prompt: p\ntools: []\n",
		  w1);
	/* every bound is required: a step cap alone does not bound cost */
	static const char *const w2[] = {
	    "6:9: missing required key 'token_budget' in 'bounds'",
	    "6:9: missing required key 'cost_cap_usd' in 'bounds'", NULL};
	agent_bad("agent-missing-bound-fields",
		  "name: a\nteam: t\nmodel: m\nsystem_prompt: p\ntools: []\n"
		  "bounds: {max_steps: 30, wall_clock_s: 10}\n",
		  w2);
	static const char *const w3[] = {
	    "2:7: 'team' 'Data Team' must match [a-z0-9_-]{1,64}",
	    "4:16: 'system_prompt' must be a string, not a mapping",
	    "5:15: 'tools': 'x' listed twice",
	    "6:21: 'bounds.max_steps': 0 is out of range 1..1000",
	    "6:72: 'bounds.cost_cap_usd' must be a number, not a string",
	    "7:1: unknown key 'contxt' in agent (did you mean 'context'?)",
	    "8:19: 'trace.payloads': 'some' is not one of full|hash_only",
	    "9:14: 'temperature' must be between 0 and 2",
	    NULL};
	agent_bad("agent-errors",
		  "name: a\nteam: Data Team\nmodel: m\nsystem_prompt: {a: b}\n"
		  "tools: [x, y, x]\n"
		  "bounds: {max_steps: 0, token_budget: 5, wall_clock_s: 5, "
		  "cost_cap_usd: \"1\"}\n"
		  "contxt: {}\n"
		  "trace: {payloads: some}\n"
		  "temperature: 3\n",
		  w3);
	static const char *const w4[] = {
	    "4:5: unknown key 'strategie' in 'context' (did you mean "
	    "'strategy'?)",
	    NULL};
	agent_bad("agent-unknown-key-depth",
		  "name: a\nteam: t\ncontext:\n    strategie: x\nmodel: m\n"
		  "system_prompt: p\ntools: []\nbounds: {max_steps: 1, "
		  "token_budget: 1, wall_clock_s: 1, cost_cap_usd: 1}\n",
		  w4);
	/* a strategy that is not built is refused, not run as another */
	static const char *const w6[] = {
	    "7:42: 'context.strategy': summarize is not built; use "
	    "sliding_window (older tool results move to the run's trace, "
	    "then the oldest turns are dropped)",
	    NULL};
	static const char *const w7[] = {
	    "7:42: 'context.strategy': externalize is not built; use "
	    "sliding_window (older tool results move to the run's trace, "
	    "then the oldest turns are dropped)",
	    NULL};
#define STRAT_DOC(s)                                                           \
	"name: a\nteam: t\nmodel: m\nsystem_prompt: p\ntools: []\n"            \
	"bounds: {max_steps: 1, token_budget: 1, wall_clock_s: 1, "            \
	"cost_cap_usd: 1}\n"                                                   \
	"context: {budget_tokens: 4096, strategy: " s "}\n"
	agent_bad("agent-strategy-summarize-not-built", STRAT_DOC("summarize"),
		  w6);
	agent_bad("agent-strategy-externalize-not-built",
		  STRAT_DOC("externalize"), w7);
#undef STRAT_DOC
	static const char *const w5[] = {
	    "x.yaml:1:1: no agent definition in file", NULL};
	struct wd_agent *a = NULL;
	struct wd_diag d = {0};
	int rc = wd_agent_load_str("x.yaml", "# nothing\n", 10, &a, &d);
	T_OK(rc == -EINVAL && d.n == 1 && !strcmp(d.msgs[0], w5[0]),
	     "agent-empty", "rc %d", rc);
	wd_diag_free(&d);
}

static void test_users(void)
{
	struct wd_users *u = NULL;
	struct wd_diag d = {0};
	int rc = wd_users_load_file("policy/users.yaml", &u, &d);
	T_OK(rc == 0 && u, "users-shipped", "rc %d %s", rc,
	     d.n ? d.msgs[0] : "");
	if (u) {
		T_OK(u->n_users == 3 && wd_users_name(u, 0) &&
			 !strcmp(wd_users_name(u, 0), "root") &&
			 !strcmp(wd_users_name(u, 1000), "alice") &&
			 !strcmp(wd_users_name(u, 1001), "bob") &&
			 !wd_users_name(u, 4242),
		     "users-names", "n %d", u->n_users);
		T_OK(wd_users_is_approver(u, 1001) &&
			 wd_users_is_approver(u, 0) &&
			 !wd_users_is_approver(u, 1000) &&
			 !wd_users_is_approver(u, 4242),
		     "users-approvers", "bob/root yes, alice/unknown no");
		T_OK(wd_users_has_scope(u, 1000, "docs:read") &&
			 wd_users_has_scope(u, 1000, "email:send") &&
			 !wd_users_has_scope(u, 1000, "admin:all") &&
			 wd_users_has_scope(u, 0, "admin:all") &&
			 !wd_users_has_scope(u, 4242, "docs:read"),
		     "users-scopes", "scope checks");
		const char **v;
		int n = wd_users_scopes_for_uid(u, 1000, &v);
		T_OK(n == 5 && v[5] == NULL && !strcmp(v[0], "docs:read"),
		     "users-scopes-for-uid", "n %d", n);
		free(v);
		n = wd_users_scopes_for_uid(u, 4242, &v);
		T_OK(n == 0 && v && !v[0], "users-scopes-unknown-uid", "n %d",
		     n);
		free(v);
	}
	wd_users_free(u);
	wd_diag_free(&d);

	/* direct grants, wildcard grants, dedup */
	const char *y = "users:\n"
			"  carol: {uid: 7, groups: [g1, g2], scopes: [x:y]}\n"
			"groups:\n"
			"  g1: {scopes: [\"docs:*\", x:y]}\n"
			"  g2: {scopes: [x:y]}\n";
	rc = wd_users_load_str("u.yaml", y, strlen(y), &u, &d);
	T_OK(rc == 0 && u, "users-grants-load", "rc %d %s", rc,
	     d.n ? d.msgs[0] : "");
	if (u) {
		const char **v;
		int n = wd_users_scopes_for_uid(u, 7, &v);
		T_OK(n == 2, "users-grants-dedup", "n %d", n);
		free(v);
		T_OK(wd_users_has_scope(u, 7, "docs:read") &&
			 wd_users_has_scope(u, 7, "docs:write") &&
			 !wd_users_has_scope(u, 7, "docs") &&
			 !wd_users_has_scope(u, 7, "docsx:read") &&
			 !wd_users_is_approver(u, 7),
		     "users-wildcard", "prefix grant");
	}
	wd_users_free(u);
	wd_diag_free(&d);

	T_OK(wd_scope_match("*", "a:b") && wd_scope_match("a:*", "a:b") &&
		 !wd_scope_match("a:*", "a:") &&
		 !wd_scope_match("a:b", "a:c") && !wd_scope_match("*", ""),
	     "scope-match", "table");

	static const char *const w1[] = {
	    "3:12: uid 0 is already user 'a'",
	    "4:15: unknown key 'group' in user (did you mean 'groups'?)",
	    "5:24: 'scopes': 'do*cs' is not a scope grant (scope, "
	    "\"prefix:*\" or \"*\")",
	    "6:3: duplicate user 'a'", NULL};
	users_bad("users-errors",
		  "users:\n  a: {uid: 0}\n  b: {uid: 0}\n"
		  "  c: {uid: 2, group: [x]}\n"
		  "  d: {uid: 3, scopes: [do*cs]}\n"
		  "  a: {uid: 4}\n",
		  w1);
	static const char *const w2[] = {
	    "2:27: user 'a': unknown group 'nope'",
	    "5:21: approvers: unknown user 'zed'",
	    "5:36: approvers: unknown group 'ghosts'", NULL};
	users_bad("users-dangling-references",
		  "users:\n  a: {uid: 1, groups: [g, nope]}\n"
		  "groups:\n  g: {scopes: []}\n"
		  "approvers: {users: [zed], groups: [ghosts]}\n",
		  w2);
	static const char *const w3[] = {
	    "1:1: missing required key 'users' in users file", NULL};
	users_bad("users-missing", "groups: {}\n", w3);
	static const char *const w4[] = {
	    "2:12: 'uid': 4294967295 is out of range 0..4294967294", NULL};
	users_bad("users-uid-range", "users:\n  a: {uid: 4294967295}\n", w4);
}

int main(void)
{
	test_agent_shipped();
	test_agent_fields();
	test_agent_errors();
	test_users();
	return T_DONE();
}
