/* `warden trace diff A B [--html] [--json] [-o FILE]`: two runs (an
 * original and its replay, or any two runs of an agent) aligned step by
 * step. Each step is compared on what the record pins by hash: the model's
 * output (output_hash: its text, tool names and arguments without the
 * provider's random tool-call ids, computed from the inline response of
 * records older than that field; the response_ref hash is what is
 * shown), the tool calls (names, then arguments: inline
 * args or args_ref), their results (status and result_hash, or a replay's
 * refusal). A step is `same`, or names what differs, in this order:
 * missing/extra, changed model output, different tool, different
 * arguments, different result; the first step that is not `same` is the first
 * divergence. No payload is read: hashes are compared, so a diff through
 * wardend needs only the records (and is authorised like `trace show`). */
#include "cli/cli.h"
#include "cli/html.h"
#include "cli/trace_int.h"
#include "common/log.h"
#include "trace/records.h"

#include <string.h>

/* What one run did at one step. */
struct side {
	bool present;
	const char *response; /* response hash, "" when none (shown) */
	const char *output;   /* what is compared: output_hash, else response */
	char output_buf[72];
	json_t *tools;	 /* [name...] of tool_attempts */
	json_t *args;	 /* [args json text | args_ref...] */
	json_t *results; /* ["status result_hash" | "refused"...] */
};

enum {
	D_MISSING = 1 << 0, /* only in A */
	D_EXTRA = 1 << 1,   /* only in B */
	D_TOOL = 1 << 2,
	D_ARGS = 1 << 3,
	D_OUTPUT = 1 << 4,
	D_RESULT = 1 << 5,
};

static const struct {
	unsigned bit;
	const char *name;
} kinds[] = {
    {D_MISSING, "missing in B"},	{D_EXTRA, "extra in B"},
    {D_OUTPUT, "changed model output"}, {D_TOOL, "different tool"},
    {D_ARGS, "different arguments"},	{D_RESULT, "different result"},
};

static int64_t max_step(json_t *recs)
{
	int64_t m = -1;
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		enum wd_rec_type t = wd_rec_type_json(r);
		if (t == WD_REC_MODEL_CALL || t == WD_REC_TOOL_ATTEMPT ||
		    t == WD_REC_TOOL_RESULT || t == WD_REC_REPLAY_REFUSED ||
		    t == WD_REC_REPLAY_STEP)
			if ((int64_t)ts_num(r, "step") > m)
				m = (int64_t)ts_num(r, "step");
	}
	return m;
}

static void side_free(struct side *s)
{
	json_decref(s->tools);
	json_decref(s->args);
	json_decref(s->results);
}

/* A run's records and, for a replay, its original's: a step a replay
 * took from the record (replay_step) is the original's step. */
struct run_recs {
	json_t *recs;
	json_t *orig; /* NULL: not a replay, or the original not readable */
};

static void side_of(struct run_recs *rr, int64_t step, struct side *s)
{
	json_t *recs = rr->recs;
	memset(s, 0, sizeof(*s));
	s->response = "";
	s->output = "";
	s->tools = json_array();
	s->args = json_array();
	s->results = json_array();
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		if ((int64_t)ts_num(r, "step") != step)
			continue;
		char buf[200];
		switch (wd_rec_type_json(r)) {
		case WD_REC_REPLAY_STEP:
			if (rr->orig) {
				struct run_recs o = {.recs = rr->orig};
				side_free(s);
				side_of(&o, step, s);
				return;
			}
			/* the original is not readable here: its answer's
			 * hash is all the replay names */
			s->present = true;
			s->response = ts_js(r, "response_ref");
			s->output = s->response;
			json_array_append_new(s->tools,
					      json_string("(from the record)"));
			break;
		case WD_REC_MODEL_CALL:
			s->present = true;
			s->response =
			    ts_js2(r, "response_ref", "response_hash");
			s->output = s->response;
			if (json_is_string(json_object_get(r, "output_hash")))
				s->output = ts_js(r, "output_hash");
			else if (!wd_rec_output_hash(
				     json_object_get(r, "response"),
				     s->output_buf))
				s->output = s->output_buf;
			break;
		case WD_REC_TOOL_ATTEMPT: {
			s->present = true;
			json_array_append_new(
			    s->tools,
			    json_string(ts_js2(r, "gen_ai.tool.name", "tool")));
			json_t *a = json_object_get(r, "args");
			char *t =
			    a ? json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS |
						  JSON_ENCODE_ANY)
			      : NULL;
			json_array_append_new(
			    s->args, json_string(t ? t : ts_js(r, "args_ref")));
			free(t);
			break;
		}
		case WD_REC_TOOL_RESULT:
			s->present = true;
			snprintf(buf, sizeof(buf), "%s %s", ts_js(r, "status"),
				 ts_js2(r, "result_hash", "result_ref"));
			json_array_append_new(s->results, json_string(buf));
			break;
		case WD_REC_REPLAY_REFUSED:
			s->present = true;
			json_array_append_new(s->results,
					      json_string("refused in replay"));
			break;
		default:
			break;
		}
	}
}

static unsigned compare(const struct side *a, const struct side *b)
{
	if (a->present != b->present)
		return a->present ? D_MISSING : D_EXTRA;
	unsigned d = 0;
	if (!json_equal(a->tools, b->tools))
		d |= D_TOOL;
	else if (!json_equal(a->args, b->args))
		d |= D_ARGS;
	if (strcmp(a->output, b->output))
		d |= D_OUTPUT;
	if (!json_equal(a->results, b->results))
		d |= D_RESULT;
	return d;
}

/* "send_mail(to,body) ok" for a side, into b */
static void summary(const struct side *s, char *buf, size_t n)
{
	if (!s->present) {
		snprintf(buf, n, "(no step)");
		return;
	}
	size_t off = 0;
	size_t i;
	json_t *t;
	json_array_foreach(s->tools, i, t)
	{
		const char *res =
		    json_string_value(json_array_get(s->results, i));
		char st[40] = "";
		if (res)
			snprintf(st, sizeof(st), " %.*s",
				 (int)strcspn(res, " ") ?: 20, res);
		off +=
		    (size_t)snprintf(buf + off, off < n ? n - off : 0, "%s%s%s",
				     i ? ", " : "", json_string_value(t), st);
		if (off >= n)
			break;
	}
	if (!json_array_size(s->tools))
		snprintf(buf, n, "answer %.19s",
			 *s->response ? s->response : "(no hash)");
}

/* Which top-level argument keys differ, for the first differing call:
 * "send_mail: body, to". */
static void arg_keys(const struct side *a, const struct side *b, char *buf,
		     size_t n)
{
	buf[0] = 0;
	size_t i;
	json_t *x;
	json_array_foreach(a->args, i, x)
	{
		json_t *y = json_array_get(b->args, i);
		if (y && json_equal(x, y))
			continue;
		json_t *ja =
		    json_loads(json_string_value(x), JSON_DECODE_ANY, NULL);
		json_t *jb =
		    y ? json_loads(json_string_value(y), JSON_DECODE_ANY, NULL)
		      : NULL;
		size_t off = (size_t)snprintf(
		    buf, n,
		    "%s:", json_string_value(json_array_get(a->tools, i)));
		const char *k;
		json_t *v;
		json_object_foreach(ja, k, v)
		{
			if (json_equal(v, json_object_get(jb, k)))
				continue;
			if (off < n)
				off += (size_t)snprintf(buf + off, n - off,
							" %s", k);
		}
		json_object_foreach(jb, k,
				    v) if (!json_object_get(ja, k) && off < n)
		    off += (size_t)snprintf(buf + off, n - off, " %s", k);
		json_decref(ja);
		json_decref(jb);
		return;
	}
}

static void verdict(unsigned d, char *buf, size_t n)
{
	size_t off = 0;
	if (!d)
		snprintf(buf, n, "same");
	for (size_t k = 0; k < WD_ARRAY_SIZE(kinds); k++)
		if ((d & kinds[k].bit) && off < n)
			off += (size_t)snprintf(buf + off, n - off, "%s%s",
						off ? "; " : "", kinds[k].name);
}

/* The original of a replay: the other run of the diff, or read. */
static void load_orig(struct tsrc *s, struct run_recs *rr, const char *id,
		      json_t *recs, const char *other, json_t *other_recs)
{
	json_t *ro = json_object_get(json_array_get(recs, 0), "replay_of");
	const char *of = ts_js(ro, "run_id");
	if (!*of || !strcmp(of, id))
		return;
	if (!strcmp(of, other)) {
		rr->orig = json_incref(other_recs);
		return;
	}
	json_t *o = NULL;
	if (ts_records(s, of, &o, NULL) == 0)
		rr->orig = o;
	else
		json_decref(o);
}

static const char *end_status(json_t *recs)
{
	json_t *e = json_array_get(recs, json_array_size(recs) - 1);
	size_t i;
	json_t *r;
	json_array_foreach(recs, i,
			   r) if (wd_rec_type_json(r) == WD_REC_RUN_END) e = r;
	return wd_rec_type_json(e) == WD_REC_RUN_END ? ts_js(e, "status")
						     : "(no end)";
}

static void relation(json_t *ra, json_t *rb, const char *a, const char *b,
		     char *buf, size_t n)
{
	json_t *oa = json_object_get(json_array_get(ra, 0), "replay_of");
	json_t *ob = json_object_get(json_array_get(rb, 0), "replay_of");
	buf[0] = 0;
	if (ob && !strcmp(ts_js(ob, "run_id"), a))
		snprintf(buf, n, "%s is a replay of %s from step %.0f", b, a,
			 ts_num(ob, "from_step"));
	else if (oa && !strcmp(ts_js(oa, "run_id"), b))
		snprintf(buf, n, "%s is a replay of %s from step %.0f", a, b,
			 ts_num(oa, "from_step"));
}

static void html_side(FILE *f, const struct side *s)
{
	char buf[400];
	summary(s, buf, sizeof(buf));
	fprintf(f, "<td>");
	html_esc(f, buf);
	if (s->present && *s->response) {
		fprintf(f, "<br><span class=\"hash\" title=\"");
		html_esc(f, s->response);
		fprintf(f, "\">answer ");
		html_esc_n(f, s->response, WD_MIN(strlen(s->response), 23));
		fprintf(f, "&hellip;</span>");
	}
	fprintf(f, "</td>");
}

int trace_diff_cmd(struct tsrc *s, struct trace_opts *o)
{
	if (o->argc != 2) {
		fprintf(stderr, "usage: warden trace diff A B [--html] "
				"[--json] [-o FILE]\n");
		return WD_EXIT_USAGE;
	}
	const char *a = o->argv[0], *b = o->argv[1];
	json_t *ra = NULL, *rb = NULL;
	struct wd_err err = {0};
	if (ts_records(s, a, &ra, &err) < 0 || !json_array_size(ra) ||
	    ts_records(s, b, &rb, &err) < 0 || !json_array_size(rb)) {
		wd_error("trace diff: %s",
			 err.msg[0] ? err.msg : "no such run");
		json_decref(ra);
		json_decref(rb);
		return WD_EXIT_FAIL;
	}
	struct ts_out dst;
	if (ts_out_open("diff", o->out, &dst) < 0) {
		json_decref(ra);
		json_decref(rb);
		return WD_EXIT_FAIL;
	}
	FILE *f = dst.f;
	int64_t n = max_step(ra);
	if (max_step(rb) > n)
		n = max_step(rb);
	struct run_recs xa = {.recs = ra}, xb = {.recs = rb};
	load_orig(s, &xa, a, ra, b, rb);
	load_orig(s, &xb, b, rb, a, ra);
	char rel[300], vb[200], sa[400], sb[400], keys[300];
	relation(ra, rb, a, b, rel, sizeof(rel));
	int64_t first = -1;
	json_t *steps = json_array();
	for (int64_t st = 0; st <= n; st++) {
		struct side x, y;
		side_of(&xa, st, &x);
		side_of(&xb, st, &y);
		unsigned d = compare(&x, &y);
		if (d && first < 0)
			first = st;
		verdict(d, vb, sizeof(vb));
		keys[0] = 0;
		if (d & D_ARGS)
			arg_keys(&x, &y, keys, sizeof(keys));
		summary(&x, sa, sizeof(sa));
		summary(&y, sb, sizeof(sb));
		json_t *row = json_pack(
		    "{s:I,s:s,s:b,s:s,s:s,s:{s:O,s:O,s:O,s:s},"
		    "s:{s:O,s:O,s:O,s:s}}",
		    "step", (json_int_t)st, "verdict", vb, "first", st == first,
		    "a_summary", sa, "b_summary", sb, "a", "tools", x.tools,
		    "args", x.args, "results", x.results, "response",
		    x.response, "b", "tools", y.tools, "args", y.args,
		    "results", y.results, "response", y.response);
		if (*keys)
			json_object_set_new(row, "arguments_differ",
					    json_string(keys));
		json_array_append_new(steps, row);
		if (o->html && st == 0) {
			char title[200];
			snprintf(title, sizeof(title), "warden diff %s %s", a,
				 b);
			html_head(f, title, NULL);
			fprintf(f, "<header><h1>diff ");
			html_esc(f, a);
			fprintf(f, " &harr; ");
			html_esc(f, b);
			fprintf(f, "</h1><p>");
			html_esc(f, rel);
			fprintf(f, "</p></header><main><table class=\"diff\">"
				   "<tr><th>step</th><th>verdict</th><th>A ");
			html_esc(f, a);
			fprintf(f, "</th><th>B ");
			html_esc(f, b);
			fprintf(f, "</th></tr>\n");
		}
		if (o->html) {
			fprintf(f,
				"<tr class=\"%s%s\" data-step=\"%lld\"%s>"
				"<td>%lld</td><td class=\"verdict\">",
				d ? "differs" : "same",
				st == first ? " first" : "", (long long)st,
				st == first ? " id=\"first-divergence\"" : "",
				(long long)st);
			html_esc(f, vb);
			if (*keys) {
				fprintf(f, "<br>");
				html_esc(f, keys);
			}
			fprintf(f, "</td>");
			html_side(f, &x);
			html_side(f, &y);
			fprintf(f, "</tr>\n");
		}
		side_free(&x);
		side_free(&y);
	}
	const char *ea = end_status(ra), *eb = end_status(rb);
	if (o->json) {
		json_t *out = json_pack(
		    "{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:s}}", "a", a, "b", b,
		    "relation", rel, "steps", steps, "first_divergence",
		    first < 0 ? json_null() : json_integer(first), "end", "a",
		    ea, "b", eb);
		char *t = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fprintf(f, "%s\n", t ? t : "null");
		free(t);
		json_decref(out);
	} else if (o->html) {
		fprintf(f,
			"</table><p>end: A %s, B %s</p><p "
			"class=\"first-divergence\">",
			ea, eb);
		if (first < 0)
			fprintf(f, "no divergence: every step is the same");
		else
			fprintf(f,
				"<a href=\"#first-divergence\">first "
				"divergence: step %lld</a>",
				(long long)first);
		fprintf(f, "</p></main>\n");
		html_foot(f);
		json_decref(steps);
	} else {
		fprintf(f, "diff %s %s%s%s%s\n", a, b, *rel ? " (" : "", rel,
			*rel ? ")" : "");
		fprintf(f, "%-5s %-34s %-30s %s\n", "STEP", "VERDICT", "A",
			"B");
		size_t i;
		json_t *r;
		json_array_foreach(steps, i, r)
		{
			fprintf(f, "%s%-4lld %-34s %-30s %s\n",
				json_is_true(json_object_get(r, "first")) ? ">"
									  : " ",
				(long long)ts_num(r, "step"),
				ts_js(r, "verdict"), ts_js(r, "a_summary"),
				ts_js(r, "b_summary"));
			if (*ts_js(r, "arguments_differ"))
				fprintf(f, "      arguments differ: %s\n",
					ts_js(r, "arguments_differ"));
		}
		fprintf(f, "end: A %s, B %s\n", ea, eb);
		if (first < 0)
			fprintf(f, "no divergence: every step is the same\n");
		else
			fprintf(f, "first divergence: step %lld: %s\n",
				(long long)first,
				ts_js(json_array_get(steps, (size_t)first),
				      "verdict"));
		json_decref(steps);
	}
	json_decref(xa.orig);
	json_decref(xb.orig);
	json_decref(ra);
	json_decref(rb);
	int rc = ts_out_close(&dst, true);
	if (rc) {
		wd_error("trace diff: writing: %s", strerror(-rc));
		return WD_EXIT_FAIL;
	}
	if (o->out && strcmp(o->out, "-"))
		printf("%s\n", o->out);
	return WD_EXIT_OK;
}
