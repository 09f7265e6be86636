/* `warden trace failures [--since TIME] [--agent A] [--json]`: "the same
 * failure across 400 runs" as a command. Failed or denied tool results
 * (tool_result with a status other than ok) grouped by (tool, result
 * hash): the same tool answering the same bytes is one failure however
 * many runs hit it; a refusal by the broker has no result, so refusals
 * are grouped by (tool, status, the check that refused). Failed runs
 * (run_end status other than ok) grouped by their end reason with its
 * numbers and run ids normalised ("steps reached (limit #, used #)"): the
 * same bound or error whatever amounts each run had used. Each group: its
 * count, the runs it spans and a few example runs, largest first.
 * Everything comes from the index (records by type, status and check;
 * runs with their status and reason): no run's records are read, so
 * through wardend no payload read is recorded and only the runs the
 * caller may read are counted. --since: tool results at or after it,
 * runs that ended at or after it (the time of the failure both ways). */
#include "cli/cli.h"
#include "cli/trace_int.h"
#include "common/log.h"
#include "trace/records.h"

#include <string.h>

#define EXAMPLES 3

/* groups: key -> {key fields..., count, runs{}, examples[]} */
static json_t *group_get(json_t *groups, const char *key, json_t *fields)
{
	json_t *g = json_object_get(groups, key);
	if (!g) {
		g = json_deep_copy(fields);
		json_object_set_new(g, "count", json_integer(0));
		json_object_set_new(g, "run_set", json_object());
		json_object_set_new(g, "examples", json_array());
		json_object_set_new(groups, key, g);
	}
	return g;
}

static void group_add(json_t *g, const char *run, json_t *example)
{
	json_object_set_new(
	    g, "count",
	    json_integer(json_integer_value(json_object_get(g, "count")) + 1));
	json_t *rs = json_object_get(g, "run_set");
	if (json_object_get(rs, run))
		return;
	json_object_set_new(rs, run, json_true());
	json_t *ex = json_object_get(g, "examples");
	if (json_array_size(ex) < EXAMPLES)
		json_array_append(ex, example);
}

static int by_count(const void *a, const void *b)
{
	json_int_t x = json_integer_value(
		       json_object_get(*(json_t *const *)a, "count")),
		   y = json_integer_value(
		       json_object_get(*(json_t *const *)b, "count"));
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The groups as an array, largest first, run_set -> runs (a count). */
static json_t *sorted(json_t *groups)
{
	size_t n = json_object_size(groups), i = 0;
	json_t **v = wd_calloc(n ? n : 1, sizeof(*v));
	const char *k;
	json_t *g;
	json_object_foreach(groups, k, g)
	{
		json_object_set_new(g, "runs",
				    json_integer((json_int_t)json_object_size(
					json_object_get(g, "run_set"))));
		json_object_del(g, "run_set");
		v[i++] = g;
	}
	qsort(v, n, sizeof(*v), by_count);
	json_t *a = json_array();
	for (i = 0; i < n; i++)
		json_array_append(a, v[i]);
	free(v);
	return a;
}

/* A run's end reason as a group key: every number becomes '#' and every
 * run id "run_#" (a budget stop says how much each run used, a sub-agent's
 * its parent's id), so the same bound or error is one group. */
static char *reason_key(const char *status, const char *reason)
{
	if (!reason || !*reason)
		return wd_asprintf("%s (no reason recorded)", status);
	struct wd_buf b = {0};
	for (const char *p = reason; *p;) {
		if (!strncmp(p, "run_", 4) &&
		    strspn(p + 4, "0123456789abcdef") > 0) {
			wd_buf_printf(&b, "run_#");
			p += 4 + strspn(p + 4, "0123456789abcdef");
		} else if ((*p >= '0' && *p <= '9') ||
			   (*p == '.' && p[1] >= '0' && p[1] <= '9')) {
			wd_buf_printf(&b, "#");
			p += strspn(p, "0123456789.");
			/* an exponent (%g: 1e+06) */
			if ((*p == 'e' || *p == 'E') &&
			    (p[1] == '+' || p[1] == '-') && p[2] >= '0' &&
			    p[2] <= '9')
				p += 2 + strspn(p + 2, "0123456789");
		} else {
			wd_buf_append(&b, p, 1);
			p++;
		}
	}
	return b.data ? b.data : wd_strdup("");
}

int trace_failures_cmd(struct tsrc *s, struct trace_opts *o)
{
	if (o->argc) {
		fprintf(stderr, "usage: warden trace failures [--since TIME] "
				"[--agent A] [--json]\n");
		return WD_EXIT_USAGE;
	}
	struct wd_trace_query q = {.agent = o->agent,
				   .team = o->team,
				   .user = o->user,
				   .tool = o->tool,
				   .since_ns = o->since_ns};
	json_t *recs = NULL, *all = NULL;
	struct wd_err err = {0};
	/* runs by when they ended, not when they started: the index's
	 * since is a start time, so the runs are filtered here (ISO 8601
	 * in one format compares as text) */
	if (ts_grep(s, &q, &recs, &err) < 0 ||
	    ts_runs(s,
		    &(struct wd_trace_query){
			.agent = o->agent, .team = o->team, .user = o->user},
		    &all, &err) < 0) {
		wd_error("trace failures: %s", err.msg);
		json_decref(recs);
		return WD_EXIT_FAIL;
	}
	char since[40] = "";
	if (o->since_ns)
		wd_iso8601(o->since_ns, since, sizeof(since));
	json_t *runs = json_array();
	size_t i;
	json_t *r;
	json_array_foreach(all, i, r)
	{
		const char *last = *ts_js(r, "ended") ? ts_js(r, "ended")
						      : ts_js(r, "last_ts");
		if (!since[0] || strcmp(last, since) >= 0)
			json_array_append(runs, r);
	}
	json_decref(all);
	json_t *tools = json_object(), *failed = json_object();
	json_array_foreach(recs, i, r)
	{
		const char *st = ts_js(r, "status");
		if (wd_rec_type_json(r) != WD_REC_TOOL_RESULT || !*st ||
		    !strcmp(st, "ok"))
			continue;
		const char *tool = ts_js(r, "tool"),
			   *h = ts_js(r, "result_hash"),
			   *chk = ts_js(r, "check");
		/* no result (a broker refusal): by the check that refused */
		char *key =
		    *h ? wd_asprintf("%s\x1f%s", tool, h)
		       : wd_asprintf("%s\x1f\x1f%s\x1f%s", tool, st, chk);
		json_t *f = json_pack("{s:s,s:s}", "tool", tool, "result_hash",
				      *h ? h : "(none)");
		if (!*h && *chk)
			json_object_set_new(f, "check", json_string(chk));
		json_t *g = group_get(tools, key, f);
		json_decref(f);
		json_t *sts = json_object_get(g, "statuses");
		if (!sts)
			json_object_set_new(g, "statuses", sts = json_object());
		json_object_set_new(
		    sts, st,
		    json_integer(json_integer_value(json_object_get(sts, st)) +
				 1));
		json_t *ex =
		    json_pack("{s:s,s:I}", "run_id", ts_js(r, "run_id"), "step",
			      (json_int_t)ts_num(r, "step"));
		group_add(g, ts_js(r, "run_id"), ex);
		json_decref(ex);
		free(key);
	}
	unsigned nfailed = 0;
	json_array_foreach(runs, i, r)
	{
		const char *st = ts_js(r, "status");
		if (!*st || !strcmp(st, "ok") || !strcmp(st, "running"))
			continue;
		nfailed++;
		char *e = reason_key(
		    st, *ts_js(r, "reason") ? ts_js(r, "reason") : NULL);
		json_t *f = json_pack("{s:s}", "last_error", e);
		json_t *g = group_get(failed, e, f);
		json_decref(f);
		json_t *ex = json_pack("{s:s,s:s}", "run_id",
				       ts_js(r, "run_id"), "status", st);
		group_add(g, ts_js(r, "run_id"), ex);
		json_decref(ex);
		free(e);
	}
	json_t *tg = sorted(tools), *fg = sorted(failed);
	if (o->json) {
		json_t *out = json_pack("{s:I,s:o,s:o}", "runs",
					(json_int_t)json_array_size(runs),
					"tool_failures", tg, "failed_runs", fg);
		wd_cli_print_json(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER,
				  "null");
		json_decref(out);
	} else {
		printf("%zu run(s); failed or denied tool results by (tool, "
		       "result hash or refusing check):\n",
		       json_array_size(runs));
		printf("%7s %6s  %-20s %-14s %-26s %s\n", "COUNT", "RUNS",
		       "TOOL", "STATUS", "RESULT", "EXAMPLES");
		json_array_foreach(tg, i, r)
		{
			char sts[64] = "";
			const char *k;
			json_t *v;
			size_t off = 0;
			json_object_foreach(json_object_get(r, "statuses"), k,
					    v) if (off < sizeof(sts)) off +=
			    (size_t)snprintf(sts + off, sizeof(sts) - off,
					     "%s%s", off ? "," : "", k);
			cleanup_free char *res =
			    *ts_js(r, "check")
				? wd_asprintf("check %s", ts_js(r, "check"))
				: wd_strdup(ts_js(r, "result_hash"));
			printf("%7lld %6lld  %-20s %-14s %-26.26s",
			       (long long)ts_num(r, "count"),
			       (long long)ts_num(r, "runs"), ts_js(r, "tool"),
			       sts, res);
			size_t k2;
			json_t *x;
			json_array_foreach(json_object_get(r, "examples"), k2,
					   x)
			    printf(" %s@%lld", ts_js(x, "run_id"),
				   (long long)ts_num(x, "step"));
			printf("\n");
		}
		printf("\n%u failed run(s) by end reason (numbers as #):\n",
		       nfailed);
		printf("%7s  %-50s %s\n", "RUNS", "LAST ERROR", "EXAMPLES");
		json_array_foreach(fg, i, r)
		{
			printf("%7lld  %-50.50s", (long long)ts_num(r, "count"),
			       ts_js(r, "last_error"));
			size_t k2;
			json_t *x;
			json_array_foreach(json_object_get(r, "examples"), k2,
					   x) printf(" %s", ts_js(x, "run_id"));
			printf("\n");
		}
		json_decref(tg);
		json_decref(fg);
	}
	json_decref(tools);
	json_decref(failed);
	json_decref(recs);
	json_decref(runs);
	return WD_EXIT_OK;
}
