/* Agent definitions' `subagents`: strict parsing (positions, duplicates,
 * reserved tool names) and the cross-definition checks (unknown names,
 * self-delegation, cycles, delegation depth, tool-name length) with exact
 * file:line:col diagnostics. */
#include "policy/agent.h"
#include "t.h"

/* One agent document; `extra` holds more top-level lines. */
static char *doc(const char *name, const char *extra)
{
	return wd_asprintf("name: %s\nteam: t\nmodel: m\nsystem_prompt: x\n"
			   "tools: []\n%s"
			   "bounds: {max_steps: 3, token_budget: 10, "
			   "wall_clock_s: 1, cost_cap_usd: 1}\n",
			   name, extra);
}

/* Load every `---`-separated agent of `text` (one file "p.yaml") and run
 * the cross checks. Returns the diagnostics (parse + checks). */
static int load_check(const char *text, struct wd_diag *d, int *problems)
{
	struct wd_agent **v = NULL;
	int n = 0;
	int rc = wd_agent_load_all_str("p.yaml", text, strlen(text), &v, &n, d);
	*problems = rc ? -1 : wd_agents_check_subagents(v, n, d);
	wd_agent_free_all(v, n);
	return rc;
}

static bool has_msg(const struct wd_diag *d, const char *want)
{
	for (int i = 0; i < d->n; i++)
		if (!strcmp(d->msgs[i], want))
			return true;
	return false;
}

static void dump(const struct wd_diag *d)
{
	for (int i = 0; i < d->n; i++)
		printf("    got: %s\n", d->msgs[i]);
}

static void test_parse(void)
{
	cleanup_free char *t = doc("boss", "subagents: [helper, writer]\n");
	struct wd_agent *a = NULL;
	struct wd_diag d = {0};
	int rc = wd_agent_load_str("p.yaml", t, strlen(t), &a, &d);
	T_OK(rc == 0 && a && a->n_subagents == 2 &&
		 !strcmp(a->subagents[0], "helper") &&
		 !strcmp(a->subagents[1], "writer") && !a->subagents[2],
	     "subagents-parsed", "rc %d", rc);
	T_OK(a && a->subagent_line[0] == 6 && a->subagent_col[0] == 13 &&
		 a->subagent_line[1] == 6 && a->subagent_col[1] == 21,
	     "subagents-positions", "%d:%d", a ? a->subagent_line[0] : -1,
	     a ? a->subagent_col[0] : -1);
	wd_agent_free(a);
	wd_diag_free(&d);

	/* absent: an empty list, never NULL */
	cleanup_free char *t2 = doc("solo", "");
	a = NULL;
	memset(&d, 0, sizeof(d));
	rc = wd_agent_load_str("p.yaml", t2, strlen(t2), &a, &d);
	T_OK(rc == 0 && a && a->n_subagents == 0 && a->subagents &&
		 !a->subagents[0],
	     "subagents-absent-empty", "rc %d", rc);
	wd_agent_free(a);
	wd_diag_free(&d);

	static const struct {
		const char *name, *extra, *want;
	} bad[] = {
	    {"subagents-twice", "subagents: [helper, helper]\n",
	     "p.yaml:6:21: 'subagents': 'helper' listed twice"},
	    {"subagents-bad-name", "subagents: [Helper!]\n",
	     "p.yaml:6:13: 'subagents': 'Helper!' is not an agent name"},
	    {"subagents-not-list", "subagents: helper\n",
	     "p.yaml:6:12: 'subagents' must be a list of strings, not a "
	     "scalar"},
	    {"subagents-typo-key", "subagent: [helper]\n",
	     "p.yaml:6:1: unknown key 'subagent' in agent (did you mean "
	     "'subagents'?)"},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(bad); i++) {
		cleanup_free char *x = doc("boss", bad[i].extra);
		a = NULL;
		memset(&d, 0, sizeof(d));
		rc = wd_agent_load_str("p.yaml", x, strlen(x), &a, &d);
		bool ok = rc == -EINVAL && !a && d.n == 1 &&
			  !strcmp(d.msgs[0], bad[i].want);
		T_OK(ok, bad[i].name, "rc %d, %d messages", rc, d.n);
		if (!ok)
			dump(&d);
		wd_agent_free(a);
		wd_diag_free(&d);
	}

	/* the sub-agent tool prefix is reserved in `tools` */
	static const char res[] =
	    "name: boss\nteam: t\nmodel: m\nsystem_prompt: x\n"
	    "tools: [echo, agent__x]\n"
	    "bounds: {max_steps: 3, token_budget: 10, wall_clock_s: 1, "
	    "cost_cap_usd: 1}\n";
	a = NULL;
	memset(&d, 0, sizeof(d));
	rc = wd_agent_load_str("p.yaml", res, strlen(res), &a, &d);
	T_OK(rc == -EINVAL && d.n == 1 &&
		 !strcmp(d.msgs[0],
			 "p.yaml:5:15: 'tools': names starting with 'agent__' "
			 "are reserved for sub-agents; list the agent under "
			 "'subagents'"),
	     "subagents-reserved-tool", "rc %d", rc);
	if (rc != -EINVAL || d.n != 1 || !strstr(d.msgs[0], ":5:15:"))
		dump(&d);
	wd_agent_free(a);
	wd_diag_free(&d);
}

static void test_graph(void)
{
	struct wd_diag d = {0};
	int problems;
	/* a diamond is not a cycle */
	cleanup_free char *a = doc("a", "subagents: [b, c]\n");
	cleanup_free char *b = doc("b", "subagents: [d]\n");
	cleanup_free char *c = doc("c", "subagents: [d]\n");
	cleanup_free char *dd = doc("d", "");
	cleanup_free char *diamond =
	    wd_asprintf("%s---\n%s---\n%s---\n%s", a, b, c, dd);
	int rc = load_check(diamond, &d, &problems);
	T_OK(rc == 0 && problems == 0 && d.n == 0, "subagents-diamond-ok",
	     "rc %d problems %d", rc, problems);
	wd_diag_free(&d);

	/* a hash_only agent's sub-agent keeps hashes only too: its task
	 * and answer are the parent's conversation */
	cleanup_free char *ho = doc("a", "subagents: [b, c]\n"
					 "trace: {payloads: hash_only}\n");
	cleanup_free char *hb = doc("b", "trace: {payloads: hash_only}\n");
	cleanup_free char *hc = doc("c", "");
	cleanup_free char *hot = wd_asprintf("%s---\n%s---\n%s", ho, hb, hc);
	memset(&d, 0, sizeof(d));
	rc = load_check(hot, &d, &problems);
	T_OK(rc == 0 && problems == 1 &&
		 has_msg(&d,
			 "p.yaml:6:16: agent 'a': sub-agent 'c': this "
			 "agent keeps hashes only (trace.payloads: "
			 "hash_only) and the sub-agent keeps full payloads: "
			 "its trace would hold what this agent's does not; "
			 "give it hash_only too"),
	     "subagents-hash-only-parent-full-child", "rc %d problems %d", rc,
	     problems);
	if (problems != 1)
		dump(&d);
	wd_diag_free(&d);

	/* unknown and self: at the entry */
	cleanup_free char *u = doc("a", "subagents: [nosuch, a]\n");
	memset(&d, 0, sizeof(d));
	rc = load_check(u, &d, &problems);
	T_OK(problems == 2 &&
		 has_msg(&d, "p.yaml:6:13: agent 'a': sub-agent 'nosuch': no "
			     "agent of that name in the policy") &&
		 has_msg(&d, "p.yaml:6:21: agent 'a': sub-agent 'a': an agent "
			     "cannot be its own sub-agent"),
	     "subagents-unknown-self", "problems %d", problems);
	if (problems != 2)
		dump(&d);
	wd_diag_free(&d);

	/* a 3-cycle is reported once, at the entry closing it, with its
	 * path, whatever the order of the definitions */
	cleanup_free char *x = doc("x", "subagents: [y]\n");
	cleanup_free char *y = doc("y", "subagents: [z]\n");
	cleanup_free char *z = doc("z", "subagents:\n  - x\n");
	cleanup_free char *cyc = wd_asprintf("%s---\n%s---\n%s", z, y, x);
	memset(&d, 0, sizeof(d));
	rc = load_check(cyc, &d, &problems);
	/* z is the first document: its entry is on line 7, column 5 */
	T_OK(problems == 1 && d.n == 1 &&
		 !strcmp(d.msgs[0], "p.yaml:7:5: agent 'z': sub-agent 'x' "
				    "makes a cycle (x -> y -> z -> x)"),
	     "subagents-cycle", "problems %d", problems);
	if (problems != 1)
		dump(&d);
	wd_diag_free(&d);

	/* depth: a chain of WD_SUBAGENT_MAX_DEPTH delegations is fine, one
	 * more is refused where the too-deep chain starts */
	struct wd_buf chain = {0};
	int len = WD_SUBAGENT_MAX_DEPTH + 1; /* agents c0 .. c{len} */
	for (int i = 0; i <= len; i++) {
		char name[16], extra[64];
		snprintf(name, sizeof(name), "c%d", i);
		if (i < len)
			snprintf(extra, sizeof(extra), "subagents: [c%d]\n",
				 i + 1);
		else
			extra[0] = 0;
		cleanup_free char *one = doc(name, extra);
		wd_buf_printf(&chain, "%s%s", i ? "---\n" : "", one);
	}
	memset(&d, 0, sizeof(d));
	rc = load_check(chain.data, &d, &problems);
	char want[256];
	snprintf(want, sizeof(want),
		 "p.yaml:6:13: agent 'c0': sub-agent 'c1' starts a delegation "
		 "chain %d deep (at most %d)",
		 len, WD_SUBAGENT_MAX_DEPTH);
	T_OK(rc == 0 && problems == 1 && d.n == 1 && !strcmp(d.msgs[0], want),
	     "subagents-depth", "problems %d", problems);
	if (problems != 1)
		dump(&d);
	wd_diag_free(&d);
	wd_buf_free(&chain);

	/* the tool name agent__<name> must fit 64 characters */
	char longname[65];
	memset(longname, 'l', 64);
	longname[64] = 0;
	cleanup_free char *sub = wd_asprintf("subagents: [%s]\n", longname);
	cleanup_free char *p = doc("p", sub);
	cleanup_free char *l = doc(longname, "");
	cleanup_free char *both = wd_asprintf("%s---\n%s", p, l);
	memset(&d, 0, sizeof(d));
	rc = load_check(both, &d, &problems);
	T_OK(rc == 0 && problems == 1 && d.n == 1 &&
		 strstr(d.msgs[0], "longer than 64 characters"),
	     "subagents-tool-name-length", "problems %d", problems);
	wd_diag_free(&d);
}

int main(void)
{
	test_parse();
	test_graph();
	return T_DONE();
}
