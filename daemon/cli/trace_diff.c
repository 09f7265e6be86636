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
 * wardend needs only the records (and is authorised like `trace show`).
 *
 * The steps are aligned by what they did, not by their numbers: one step
 * more in B (a retry, a tool call the other run did not need) is one
 * `extra in B` row and the steps after it pair with the steps that did the
 * same, instead of every later step reading as changed. The alignment is
 * an edit distance over the steps' signatures (align()): a pair that is
 * the same costs 0, a pair that differs costs less with the same tools
 * than with other tools, and either costs less than a step missing on one
 * side plus one extra on the other, so an original and its replay that
 * diverge at step 3 pair step 3 with step 3. */
#include "cli/cli.h"
#include "cli/html.h"
#include "cli/trace_int.h"
#include "common/log.h"
#include "trace/records.h"

#include <string.h>

/* What one run did at one step. */
struct side {
	bool present;
	int64_t step;
	const char *response; /* response hash, "" when none (shown) */
	const char *output;   /* what is compared: output_hash, else response */
	char output_buf[72];
	json_t *tools;	    /* [name...] of tool_attempts */
	json_t *args;	    /* [args json text | args_ref...] */
	json_t *ahash;	    /* [args_hash | null...], one per attempt */
	size_t inline_args; /* attempts whose args are held inline */
	json_t *results;    /* ["status result_hash" | "refused"...] */
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
	json_decref(s->ahash);
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
	s->ahash = json_array();
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
			json_array_append(
			    s->ahash,
			    json_is_string(json_object_get(r, "args_hash"))
				? json_object_get(r, "args_hash")
				: json_null());
			s->inline_args += a != NULL;
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

/* The same arguments: the values when both sides hold them inline (keys
 * sorted), else the broker's args_hash when both have one (a hash_only
 * run holds no values: a full run and a hash_only one compare by hash),
 * else whatever each holds (an older record's args_ref). */
static bool args_same(const struct side *a, const struct side *b)
{
	size_t n = json_array_size(a->args);
	if (n != json_array_size(b->args))
		return false;
	bool both_inline = a->inline_args == n && b->inline_args == n;
	for (size_t i = 0; i < n; i++) {
		json_t *ha = json_array_get(a->ahash, i);
		json_t *hb = json_array_get(b->ahash, i);
		bool by_hash =
		    !both_inline && json_is_string(ha) && json_is_string(hb);
		if (!json_equal(by_hash ? ha : json_array_get(a->args, i),
				by_hash ? hb : json_array_get(b->args, i)))
			return false;
	}
	return true;
}

static unsigned compare(const struct side *a, const struct side *b)
{
	if (a->present != b->present)
		return a->present ? D_MISSING : D_EXTRA;
	unsigned d = 0;
	if (!json_equal(a->tools, b->tools))
		d |= D_TOOL;
	else if (!args_same(a, b))
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

/* The present steps of a run, in step order (n: how many). */
static struct side *collect(struct run_recs *rr, size_t *n)
{
	int64_t last = max_step(rr->recs);
	struct side *v = wd_calloc((size_t)(last + 2), sizeof(*v));
	size_t k = 0;
	for (int64_t st = 0; st <= last; st++) {
		/* in place: a side's output may point into its own buffer */
		side_of(rr, st, &v[k]);
		if (!v[k].present) {
			side_free(&v[k]);
			continue;
		}
		v[k++].step = st;
	}
	*n = k;
	return v;
}

/* A row of the diff: A's step index and B's (-1: none on that side). */
struct pair {
	long a, b;
};

#define COST_INDEL 2u /* a step only one run has */
/* a pair that differs: cheaper than a step missing plus one extra (4),
 * so two runs that diverge still pair step by step */
static unsigned pair_cost(const struct side *x, const struct side *y)
{
	unsigned d = compare(x, y);
	if (!d)
		return 0;
	return json_equal(x->tools, y->tools) ? 2u : 3u;
}

/* Beyond this many cells the middle part is paired by position (and the
 * output says so): a run's steps are bounded by max_steps, but two runs
 * read from the store are not. */
#define ALIGN_MAX_CELLS (4u << 20)

/* The rows aligning A and B (at most na + nb into rows): the common
 * prefix and suffix pair as they are, the part between by the least-cost
 * edit script (ties: a pair before a missing step before an extra one).
 * Returns the number of rows; *by_position when the middle was too big. */
static size_t align(const struct side *A, size_t na, const struct side *B,
		    size_t nb, struct pair *rows, bool *by_position)
{
	size_t pre = 0, suf = 0, n = 0;
	while (pre < na && pre < nb && !compare(&A[pre], &B[pre]))
		pre++;
	while (suf < na - pre && suf < nb - pre &&
	       !compare(&A[na - 1 - suf], &B[nb - 1 - suf]))
		suf++;
	for (size_t i = 0; i < pre; i++)
		rows[n++] = (struct pair){(long)i, (long)i};
	size_t m = na - pre - suf, k = nb - pre - suf;
	const struct side *a = A + pre, *b = B + pre;
	*by_position = (m + 1) * (k + 1) > ALIGN_MAX_CELLS;
	if (*by_position) {
		for (size_t i = 0; i < WD_MAX(m, k); i++)
			rows[n++] = (struct pair){i < m ? (long)(pre + i) : -1,
						  i < k ? (long)(pre + i) : -1};
	} else {
		/* c[i][j]: the cost of aligning a[i..] with b[j..] */
		size_t w = k + 1;
		uint32_t *c = wd_calloc((m + 1) * w, sizeof(*c));
		for (size_t i = m + 1; i-- > 0;)
			for (size_t j = k + 1; j-- > 0;) {
				uint32_t best = UINT32_MAX;
				if (i < m && j < k)
					best = c[(i + 1) * w + j + 1] +
					       pair_cost(&a[i], &b[j]);
				if (i < m)
					best = WD_MIN(best, c[(i + 1) * w + j] +
								COST_INDEL);
				if (j < k)
					best = WD_MIN(best, c[i * w + j + 1] +
								COST_INDEL);
				c[i * w + j] = i == m && j == k ? 0 : best;
			}
		size_t i = 0, j = 0;
		while (i < m || j < k) {
			uint32_t here = c[i * w + j];
			if (i < m && j < k &&
			    here == c[(i + 1) * w + j + 1] +
					pair_cost(&a[i], &b[j])) {
				rows[n++] = (struct pair){(long)(pre + i),
							  (long)(pre + j)};
				i++, j++;
			} else if (i < m &&
				   here == c[(i + 1) * w + j] + COST_INDEL) {
				rows[n++] = (struct pair){(long)(pre + i), -1};
				i++;
			} else {
				rows[n++] = (struct pair){-1, (long)(pre + j)};
				j++;
			}
		}
		free(c);
	}
	for (size_t i = 0; i < suf; i++)
		rows[n++] =
		    (struct pair){(long)(na - suf + i), (long)(nb - suf + i)};
	return n;
}

/* "3", or "3/4" when the paired steps have other numbers, or the one
 * side's number. */
static void step_label(const struct side *x, const struct side *y, char *buf,
		       size_t n)
{
	if (x->present && y->present && x->step != y->step)
		snprintf(buf, n, "%lld/%lld", (long long)x->step,
			 (long long)y->step);
	else
		snprintf(buf, n, "%lld",
			 (long long)(x->present ? x->step : y->step));
}

static void html_header(FILE *f, const char *a, const char *b, const char *rel)
{
	char title[200];
	snprintf(title, sizeof(title), "warden diff %s %s", a, b);
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

static void html_row(FILE *f, json_t *row, const struct side *x,
		     const struct side *y)
{
	bool first = json_is_true(json_object_get(row, "first"));
	bool same = !strcmp(ts_js(row, "verdict"), "same");
	fprintf(f, "<tr class=\"%s%s\" data-step=\"%lld\"",
		same ? "same" : "differs", first ? " first" : "",
		(long long)ts_num(row, "step"));
	if (x->present)
		fprintf(f, " data-a-step=\"%lld\"", (long long)x->step);
	if (y->present)
		fprintf(f, " data-b-step=\"%lld\"", (long long)y->step);
	fprintf(f, "%s><td>", first ? " id=\"first-divergence\"" : "");
	html_esc(f, ts_js(row, "label"));
	fprintf(f, "</td><td class=\"verdict\">");
	html_esc(f, ts_js(row, "verdict"));
	if (*ts_js(row, "arguments_differ")) {
		fprintf(f, "<br>");
		html_esc(f, ts_js(row, "arguments_differ"));
	}
	fprintf(f, "</td>");
	html_side(f, x);
	html_side(f, y);
	fprintf(f, "</tr>\n");
}

/* The row of one aligned pair (x or y not present: missing/extra). */
static json_t *row_of(const struct side *x, const struct side *y,
		      unsigned *d_out)
{
	char vb[200], sa[400], sb[400], keys[300], label[48];
	unsigned d = compare(x, y);
	verdict(d, vb, sizeof(vb));
	keys[0] = 0;
	if (d & D_ARGS)
		arg_keys(x, y, keys, sizeof(keys));
	summary(x, sa, sizeof(sa));
	summary(y, sb, sizeof(sb));
	step_label(x, y, label, sizeof(label));
	json_t *row = json_pack(
	    "{s:I,s:s,s:o,s:o,s:s,s:b,s:s,s:s,s:{s:O,s:O,s:O,s:s},"
	    "s:{s:O,s:O,s:O,s:s}}",
	    "step", (json_int_t)(x->present ? x->step : y->step), "label",
	    label, "a_step", x->present ? json_integer(x->step) : json_null(),
	    "b_step", y->present ? json_integer(y->step) : json_null(),
	    "verdict", vb, "first", 0, "a_summary", sa, "b_summary", sb, "a",
	    "tools", x->tools, "args", x->args, "results", x->results,
	    "response", x->response, "b", "tools", y->tools, "args", y->args,
	    "results", y->results, "response", y->response);
	if (*keys)
		json_object_set_new(row, "arguments_differ", json_string(keys));
	*d_out = d;
	return row;
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
	struct run_recs xa = {.recs = ra}, xb = {.recs = rb};
	load_orig(s, &xa, a, ra, b, rb);
	load_orig(s, &xb, b, rb, a, ra);
	char rel[300];
	relation(ra, rb, a, b, rel, sizeof(rel));
	size_t na = 0, nb = 0;
	struct side *sa = collect(&xa, &na), *sb = collect(&xb, &nb);
	struct pair *rows = wd_calloc(na + nb + 1, sizeof(*rows));
	bool by_position = false;
	size_t nrows = align(sa, na, sb, nb, rows, &by_position);
	json_t *steps = json_array(), *first = NULL;
	unsigned counts[4] = {0}; /* same, changed, missing, extra */
	/* the other side of a missing or extra step */
	struct side none = {.response = "",
			    .output = "",
			    .tools = json_array(),
			    .args = json_array(),
			    .ahash = json_array(),
			    .results = json_array()};
	if (o->html)
		html_header(f, a, b, rel);
	for (size_t r = 0; r < nrows; r++) {
		const struct side *x = rows[r].a >= 0 ? &sa[rows[r].a] : &none;
		const struct side *y = rows[r].b >= 0 ? &sb[rows[r].b] : &none;
		unsigned d;
		json_t *row = row_of(x, y, &d);
		counts[!d ? 0 : (d & D_MISSING) ? 2 : (d & D_EXTRA) ? 3 : 1]++;
		if (d && !first) {
			first = row;
			json_object_set_new(row, "first", json_true());
		}
		json_array_append_new(steps, row);
		if (o->html)
			html_row(f, row, x, y);
	}
	const char *ea = end_status(ra), *eb = end_status(rb);
	json_t *cnt =
	    json_pack("{s:I,s:I,s:I,s:I}", "same", (json_int_t)counts[0],
		      "changed", (json_int_t)counts[1], "missing",
		      (json_int_t)counts[2], "extra", (json_int_t)counts[3]);
	const char *align_by = by_position ? "position" : "content";
	if (o->json) {
		json_t *out = json_pack(
		    "{s:s,s:s,s:s,s:s,s:O,s:O,s:O,s:O,s:O,s:{s:s,s:s}}", "a", a,
		    "b", b, "relation", rel, "aligned_by", align_by, "steps",
		    steps, "counts", cnt, "first_divergence",
		    first ? json_object_get(first, "step") : json_null(),
		    "first_divergence_a_step",
		    first ? json_object_get(first, "a_step") : json_null(),
		    "first_divergence_b_step",
		    first ? json_object_get(first, "b_step") : json_null(),
		    "end", "a", ea, "b", eb);
		char *t = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fprintf(f, "%s\n", t ? t : "null");
		free(t);
		json_decref(out);
	} else if (o->html) {
		fprintf(
		    f,
		    "</table><p class=\"counts\">%u same, %u changed, %u "
		    "missing in B, %u extra in B (aligned by %s)</p><p>end: "
		    "A %s, B %s</p><p class=\"first-divergence\">",
		    counts[0], counts[1], counts[2], counts[3], align_by, ea,
		    eb);
		if (!first) {
			fprintf(f, "no divergence: every step is the same");
		} else {
			fprintf(f, "<a href=\"#first-divergence\">first "
				   "divergence: step ");
			html_esc(f, ts_js(first, "label"));
			fprintf(f, "</a>");
		}
		fprintf(f, "</p></main>\n");
		html_foot(f);
	} else {
		fprintf(f, "diff %s %s%s%s%s\n", a, b, *rel ? " (" : "", rel,
			*rel ? ")" : "");
		fprintf(f, "%-5s %-34s %-30s %s\n", "STEP", "VERDICT", "A",
			"B");
		size_t i;
		json_t *r;
		json_array_foreach(steps, i, r)
		{
			fprintf(f, "%s%-4s %-34s %-30s %s\n",
				r == first ? ">" : " ", ts_js(r, "label"),
				ts_js(r, "verdict"), ts_js(r, "a_summary"),
				ts_js(r, "b_summary"));
			if (*ts_js(r, "arguments_differ"))
				fprintf(f, "      arguments differ: %s\n",
					ts_js(r, "arguments_differ"));
		}
		fprintf(f,
			"%u same, %u changed, %u missing in B, %u extra in B "
			"(aligned by %s)\n",
			counts[0], counts[1], counts[2], counts[3], align_by);
		fprintf(f, "end: A %s, B %s\n", ea, eb);
		if (!first)
			fprintf(f, "no divergence: every step is the same\n");
		else
			fprintf(f, "first divergence: step %s: %s\n",
				ts_js(first, "label"), ts_js(first, "verdict"));
	}
	json_decref(cnt);
	json_decref(steps);
	side_free(&none);
	for (size_t i = 0; i < na; i++)
		side_free(&sa[i]);
	for (size_t i = 0; i < nb; i++)
		side_free(&sb[i]);
	free(sa);
	free(sb);
	free(rows);
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
