/* `warden trace failures [--since TIME] [--agent A] [--json]`: "the same
 * failure across 400 runs" as a command. Failed or denied tool results
 * (tool_result with a status other than ok) grouped by (tool, result
 * hash): the same tool answering the same bytes is one failure however
 * many runs hit it. Failed runs (run_end status other than ok) grouped by
 * their last error (run_end reason, else the last failed tool result or
 * model error). Each group: its count, the runs it spans and a few
 * example runs, largest first. From the index (records by type and
 * status), plus one read of each failed run's records for its last error;
 * through wardend only the runs the caller may read are counted. */
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

/* The last error of a failed run, from its records. */
static char *last_error(struct tsrc *s, const char *run)
{
	json_t *recs = NULL;
	if (ts_records(s, run, &recs, NULL) < 0) {
		json_decref(recs);
		return wd_strdup("(records not readable)");
	}
	char *out = NULL;
	for (size_t i = json_array_size(recs); i-- > 0 && !out;) {
		json_t *r = json_array_get(recs, i);
		enum wd_rec_type t = wd_rec_type_json(r);
		if (t == WD_REC_RUN_END && *ts_js(r, "reason"))
			out = wd_strdup(ts_js(r, "reason"));
		else if (t == WD_REC_TOOL_RESULT && *ts_js(r, "status") &&
			 strcmp(ts_js(r, "status"), "ok"))
			out = wd_asprintf(
			    "%s %s %s", ts_js2(r, "gen_ai.tool.name", "tool"),
			    ts_js(r, "status"),
			    ts_js2(r, "result_hash", "result_ref"));
		else if (t == WD_REC_MODEL_CALL && *ts_js(r, "error"))
			out = wd_asprintf("model: %s", ts_js(r, "error"));
		else if (t == WD_REC_BUDGET_STOP)
			out = wd_asprintf("budget: %s", ts_js(r, "bound"));
	}
	json_decref(recs);
	return out ? out : wd_strdup("(no error recorded)");
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
	json_t *recs = NULL, *runs = NULL;
	struct wd_err err = {0};
	if (ts_grep(s, &q, &recs, &err) < 0 ||
	    ts_runs(s,
		    &(struct wd_trace_query){.agent = o->agent,
					     .team = o->team,
					     .user = o->user,
					     .since_ns = o->since_ns},
		    &runs, &err) < 0) {
		wd_error("trace failures: %s", err.msg);
		json_decref(recs);
		return WD_EXIT_FAIL;
	}
	json_t *tools = json_object(), *failed = json_object();
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		const char *st = ts_js(r, "status");
		if (wd_rec_type_json(r) != WD_REC_TOOL_RESULT || !*st ||
		    !strcmp(st, "ok"))
			continue;
		const char *tool = ts_js(r, "tool"),
			   *h = ts_js(r, "result_hash");
		char *key = wd_asprintf("%s\x1f%s", tool, h);
		json_t *f = json_pack("{s:s,s:s}", "tool", tool, "result_hash",
				      *h ? h : "(none)");
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
		char *e = last_error(s, ts_js(r, "run_id"));
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
		       "result hash):\n",
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
			printf("%7lld %6lld  %-20s %-14s %-26.26s",
			       (long long)ts_num(r, "count"),
			       (long long)ts_num(r, "runs"), ts_js(r, "tool"),
			       sts, ts_js(r, "result_hash"));
			size_t k2;
			json_t *x;
			json_array_foreach(json_object_get(r, "examples"), k2,
					   x)
			    printf(" %s@%lld", ts_js(x, "run_id"),
				   (long long)ts_num(x, "step"));
			printf("\n");
		}
		printf("\n%u failed run(s) by last error:\n", nfailed);
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
