/* `warden trace html RUN [-o FILE]`: the run as one self-contained HTML
 * page that works offline: no network access, no external script, style,
 * font or image. A timeline of steps (model calls with tokens, cost and
 * latency, prompt and response expandable; tool attempts and results;
 * kernel denials at the step whose call caused them; approvals and who
 * decided; replay steps, refusals and divergences), a chart of budget use
 * per step against the run's four bounds, the sub-agent tree.
 *
 * Everything from the trace is untrusted text (a prompt can hold
 * "</script>" or "<img src=http://...>"): it is HTML-escaped everywhere,
 * and a Content-Security-Policy (default-src 'none', the one script allowed
 * by its sha256) stops any request the page could make even if an escape
 * were missed (tests/integration/trace_html.sh injects both).
 *
 * Payloads come through the same source as `trace payload` (through
 * wardend each read is authorised and recorded); the store's redaction
 * already applies, a hash_only run shows hashes only, and payloads longer
 * than HTML_PAYLOAD_MAX are cut with their size and hash. */
#include "cli/cli.h"
#include "cli/html.h"
#include "cli/trace_int.h"
#include "common/log.h"
#include "trace/records.h"
#include "trace/trace.h"

#include <string.h>
#include <time.h>

#define HTML_PAYLOAD_MAX (32u << 10)
/* a value written into a record itself (a task, arguments, an output, a
 * reason): shown up to this, then cut with its size and hash */
#define HTML_FIELD_MAX (4u << 10)
#define MAX_DEPTH      8

/* One expand/collapse helper, the #p-... fragment opener and the time the
 * page took to load (html[data-load-ms], read by trace_html.sh): the only
 * script the CSP admits (by hash). */
static const char page_script[] =
    "window.addEventListener('load',function(){"
    "document.documentElement.dataset.loadMs=Math.round(performance.now());"
    "});"
    "document.addEventListener('DOMContentLoaded',function(){"
    "var h=decodeURIComponent(location.hash.slice(1));"
    "if(h){var e=document.getElementById(h);"
    "if(e){if(e.tagName==='DETAILS')e.open=true;e.scrollIntoView();}}"
    "var b=document.getElementById('expand-all');"
    "if(b)b.onclick=function(){var o=b.dataset.open!=='1';"
    "document.querySelectorAll('details.payload').forEach(function(d){"
    "d.open=o;});b.dataset.open=o?'1':'0';"
    "b.textContent=o?'collapse all payloads':'expand all payloads';};"
    "});";

struct page {
	FILE *f;
	struct tsrc *s;
	const char *run_id;
	json_t *payloads; /* "seq/field" -> payload entry */
	int children;
};

/* "2026-01-10T12:00:01.123456Z" -> seconds since the epoch (0 if bad) */
static double ts_sec(const char *ts)
{
	struct tm tm = {0};
	const char *p = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return 0;
	double frac = *p == '.' ? strtod(p, NULL) : 0;
	return (double)timegm(&tm) + frac;
}

/* Reads of the run's payloads are recorded in its trace when they happen,
 * after the step they read (or the run's end): they go in their own
 * section, not into the timeline or the budget. */
static bool in_timeline(json_t *r)
{
	return wd_rec_type_json(r) != WD_REC_PAYLOAD_READ;
}

static const char *rec_tool(json_t *r)
{
	return ts_js2(r, "gen_ai.tool.name", "tool");
}

/* Read the payloads of every step that names one (one request per step
 * through wardend, each recorded there as a payload_read). */
static void load_payloads(struct page *pg, json_t *recs)
{
	pg->payloads = json_object();
	int64_t last = -1;
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		int64_t step = (int64_t)ts_num(r, "step");
		bool refs = false;
		const char *k;
		json_t *v;
		json_object_foreach(r, k, v)
		{
			size_t l = strlen(k);
			refs |= l > 4 && !strcmp(k + l - 4, "_ref") &&
				json_is_string(v);
		}
		if (!refs || step == last)
			continue;
		last = step;
		json_t *a = NULL;
		struct wd_err err = {0};
		if (ts_payloads(pg->s, pg->run_id, step, NULL, &a, &err) < 0) {
			wd_warn("trace html: step %lld payloads: %s",
				(long long)step, err.msg);
			continue;
		}
		size_t k2;
		json_t *p;
		json_array_foreach(a, k2, p)
		{
			char key[96];
			snprintf(key, sizeof(key), "%lld/%s",
				 (long long)ts_num(p, "seq"),
				 ts_js(p, "field"));
			json_object_set(pg->payloads, key, p);
		}
		json_decref(a);
	}
}

static void payload_block(struct page *pg, json_t *r, const char *field,
			  const char *label)
{
	const char *ref = ts_js(r, field);
	if (!*ref)
		return;
	FILE *f = pg->f;
	char key[96], id[128];
	snprintf(key, sizeof(key), "%lld/%s", (long long)ts_num(r, "seq"),
		 field);
	snprintf(id, sizeof(id), "p-%lld-%s", (long long)ts_num(r, "seq"),
		 field);
	json_t *p = json_object_get(pg->payloads, key);
	const char *text = json_string_value(json_object_get(p, "payload"));
	size_t len =
	    text ? json_string_length(json_object_get(p, "payload")) : 0;
	fprintf(f, "<details class=\"payload\" id=\"");
	html_esc(f, id);
	fprintf(f, "\" data-field=\"");
	html_esc(f, field);
	fprintf(f, "\"><summary>");
	html_esc(f, label);
	fprintf(f, " <span class=\"hash\">");
	html_esc(f, ref);
	fprintf(f, "</span>");
	if (text)
		fprintf(f, " <span class=\"size\">%zu bytes</span>", len);
	fprintf(f, "</summary>");
	if (!text) {
		fprintf(f, "<p class=\"absent\">payload not shown: ");
		html_esc(f, p ? ts_js(p, "error") : "not read");
		fprintf(f, "</p></details>\n");
		return;
	}
	size_t show = len;
	if (show > HTML_PAYLOAD_MAX) {
		show = HTML_PAYLOAD_MAX;
		/* not inside a UTF-8 sequence */
		while (show && ((unsigned char)text[show] & 0xC0) == 0x80)
			show--;
	}
	fprintf(f, "<pre class=\"text\">");
	html_esc_n(f, text, show);
	fprintf(f, "</pre>");
	if (show < len) {
		fprintf(f,
			"<p class=\"truncated\">truncated: %zu of %zu bytes "
			"shown; the whole payload is ",
			show, len);
		html_esc(f, ref);
		fprintf(f, " (<code>warden trace payload ");
		html_esc(f, pg->run_id);
		fprintf(f, " %lld</code>)</p>", (long long)ts_num(r, "step"));
	}
	fprintf(f, "</details>\n");
}

static void kv(FILE *f, const char *k, const char *v)
{
	if (!v || !*v)
		return;
	fprintf(f, " <span class=\"kv\"><b>");
	html_esc(f, k);
	fprintf(f, "</b> ");
	size_t len = strlen(v), show = len;
	if (show > HTML_FIELD_MAX) {
		show = HTML_FIELD_MAX;
		/* not inside a UTF-8 sequence */
		while (show && ((unsigned char)v[show] & 0xC0) == 0x80)
			show--;
	}
	html_esc_n(f, v, show);
	if (show < len) {
		char h[WD_TRACE_REF_LEN];
		wd_trace_ref_of(v, len, h);
		fprintf(f,
			"<span class=\"truncated\"> &hellip; truncated: %zu of "
			"%zu bytes shown; the whole value is ",
			show, len);
		html_esc(f, h);
		fprintf(f, "</span>");
	}
	fprintf(f, "</span>");
}

/* a number: %.0f, or with a unit/prefix as a literal format */
#define kvf(f, k, fmt, v)                                                      \
	do {                                                                   \
		char kvb_[64];                                                 \
		snprintf(kvb_, sizeof(kvb_), fmt, (double)(v));                \
		kv(f, k, kvb_);                                                \
	} while (0)

static void render_record(struct page *pg, json_t *r)
{
	FILE *f = pg->f;
	enum wd_rec_type t = wd_rec_type_json(r);
	const char *type = ts_js(r, "type");
	fprintf(f, "<div class=\"ev ");
	html_esc(f, type);
	fprintf(f, "\" data-type=\"");
	html_esc(f, type);
	fprintf(f, "\" data-seq=\"%lld\"><span class=\"type\">",
		(long long)ts_num(r, "seq"));
	html_esc(f, t == WD_REC_DENIAL ? "KERNEL DENIAL" : type);
	fprintf(f, "</span>");
	json_t *e;
	switch (t) {
	case WD_REC_RUN_START:
		kv(f, "agent", ts_js(r, "agent"));
		kv(f, "team", ts_js(r, "team"));
		kv(f, "user", ts_js(r, "user"));
		kv(f, "model", ts_js2(r, "gen_ai.request.model", "model"));
		kv(f, "task", ts_js(r, "task"));
		break;
	case WD_REC_MODEL_CALL:
		kv(f, "model",
		   ts_js2(r, "gen_ai.response.model", "gen_ai.request.model"));
		kvf(f, "in", "%.0f tokens",
		    ts_num2(r, "gen_ai.usage.input_tokens", "input_tokens"));
		kvf(f, "out", "%.0f tokens",
		    ts_num2(r, "gen_ai.usage.output_tokens", "output_tokens"));
		kvf(f, "cost", "$%.6f", ts_num(r, "cost_usd"));
		kvf(f, "latency", "%.0f ms", ts_num(r, "latency_ms"));
		kv(f, "error", ts_js(r, "error"));
		if (json_is_true(json_object_get(r, "from_record")))
			kv(f, "source", "from the record (replay)");
		payload_block(pg, r, "prompt_ref", "prompt");
		payload_block(pg, r, "response_ref", "response");
		if (!*ts_js(r, "prompt_ref") && *ts_js(r, "prompt_hash"))
			kv(f, "prompt hash", ts_js(r, "prompt_hash"));
		break;
	case WD_REC_TOOL_ATTEMPT:
		kv(f, "tool", rec_tool(r));
		kv(f, "call", ts_js2(r, "gen_ai.tool.call.id", "call_id"));
		kv(f, "side effects", ts_js(r, "side_effects"));
		kv(f, "sub-agent", ts_js(r, "subagent"));
		kv(f, "child run", ts_js(r, "child_run_id"));
		if ((e = json_object_get(r, "args"))) {
			char *a = json_dumps(e, JSON_COMPACT | JSON_ENCODE_ANY);
			kv(f, "args", a);
			free(a);
		}
		payload_block(pg, r, "args_ref", "arguments");
		break;
	case WD_REC_TOOL_RESULT:
		kv(f, "tool", rec_tool(r));
		kv(f, "call", ts_js2(r, "gen_ai.tool.call.id", "call_id"));
		kv(f, "status", ts_js(r, "status"));
		if (json_object_get(r, "exit_code"))
			kvf(f, "exit", "%.0f", ts_num(r, "exit_code"));
		kvf(f, "latency", "%.0f ms", ts_num(r, "latency_ms"));
		kv(f, "replay", ts_js(r, "replay"));
		kv(f, "reason", ts_js(r, "reason"));
		payload_block(pg, r, "result_ref", "result");
		if (!*ts_js(r, "result_ref"))
			kv(f, "result hash", ts_js(r, "result_hash"));
		break;
	case WD_REC_DENIAL:
		e = json_object_get(r, "event");
		kv(f, "tool", rec_tool(r));
		kv(f, "call", ts_js2(r, "call_id", "gen_ai.tool.call.id"));
		kv(f, "kind", ts_js(e, "kind"));
		kv(f, "syscall", ts_js(e, "syscall"));
		kv(f, "target", ts_js(e, "target"));
		kv(f, "by", ts_js(e, "source"));
		break;
	case WD_REC_APPROVAL_REQUEST:
		kv(f, "tool", rec_tool(r));
		kv(f, "approval", ts_js(r, "approval_id"));
		kv(f, "why", ts_js(r, "reason"));
		break;
	case WD_REC_APPROVAL_DECISION:
		kv(f, "decision", ts_js(r, "decision"));
		kv(f, "decided by", ts_js(r, "by"));
		kv(f, "reason", ts_js(r, "reason"));
		break;
	case WD_REC_BUDGET_STOP:
		kv(f, "bound", ts_js(r, "bound"));
		kvf(f, "limit", "%g", ts_num(r, "limit"));
		kvf(f, "used", "%g", ts_num(r, "used"));
		kv(f, "reason", ts_js(r, "reason"));
		break;
	case WD_REC_RUN_END:
		kv(f, "status", ts_js(r, "status"));
		kv(f, "reason", ts_js(r, "reason"));
		kvf(f, "cost", "$%.6f", ts_num(r, "cost_usd"));
		kv(f, "output", ts_js(r, "output"));
		break;
	case WD_REC_REPLAY_STEP:
		/* the original's page, when it sits next to this one */
		fprintf(f, " <span class=\"kv\"><b>from the record of</b> "
			   "<a href=\"");
		html_esc(f, ts_js(r, "of_run_id"));
		fprintf(f, ".html#");
		html_esc(f, ts_js(r, "of_run_id"));
		fprintf(f, "-step-%.0f\">", ts_num(r, "step"));
		html_esc(f, ts_js(r, "of_run_id"));
		fprintf(f, "</a></span>");
		kvf(f, "seq", "%.0f", ts_num(r, "of_seq"));
		payload_block(pg, r, "response_ref", "response (recorded)");
		break;
	case WD_REC_REPLAY_REFUSED:
		kv(f, "tool", rec_tool(r));
		kv(f, "side effects", ts_js(r, "side_effects"));
		kv(f, "reason", ts_js(r, "reason"));
		break;
	case WD_REC_REPLAY_DIVERGENCE:
		kv(f, "kind", ts_js(r, "kind"));
		kv(f, "what", ts_js(r, "what"));
		kv(f, "", ts_js(r, "message"));
		break;
	default: {
		char *a = json_dumps(r, JSON_COMPACT);
		kv(f, "record", a);
		free(a);
	}
	}
	fprintf(f, "</div>\n");
}

/* Budget use per step against the four bounds, each as a share of its
 * bound (so they share one axis), in inline SVG; the numbers in a table
 * below it. */
static void budget_chart(FILE *f, json_t *recs)
{
	json_t *st = json_array_get(recs, 0);
	json_t *b = json_object_get(st, "bounds");
	double lim[4] = {ts_num(b, "max_steps"), ts_num(b, "token_budget"),
			 ts_num(b, "cost_cap_usd"), ts_num(b, "wall_clock_s")};
	static const char *const name[4] = {"steps", "tokens", "cost",
					    "wall clock"};
	static const char *const color[4] = {"#6a3d9a", "#1f78b4", "#e31a1c",
					     "#33a02c"};
	double t0 = ts_sec(ts_js(st, "ts"));
	int nsteps = 0;
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r) if (in_timeline(r) &&
					   ts_num(r, "step") + 1 > nsteps)
	    nsteps = (int)ts_num(r, "step") + 1;
	if (nsteps < 1)
		nsteps = 1;
	/* cumulative use at the end of each step */
	double(*use)[4] = wd_calloc((size_t)nsteps, sizeof(*use));
	/* a sub-agent's use counts against the run's bounds (its tool_result
	 * carries the child's usage, its own sub-agents included) */
	double tok = 0, cost = 0, wall = 0, sub_steps = 0;
	int cur = 0;
	json_array_foreach(recs, i, r)
	{
		if (!in_timeline(r))
			continue;
		int s = (int)ts_num(r, "step");
		for (; cur < s && cur < nsteps; cur++) {
			use[cur][0] = cur + 1 + sub_steps;
			use[cur][1] = tok;
			use[cur][2] = cost;
			use[cur][3] = wall;
		}
		if (wd_rec_type_json(r) == WD_REC_MODEL_CALL) {
			tok += ts_num2(r, "gen_ai.usage.input_tokens",
				       "input_tokens") +
			       ts_num2(r, "gen_ai.usage.output_tokens",
				       "output_tokens");
			cost += ts_num(r, "cost_usd");
		}
		json_t *u = json_object_get(r, "usage");
		if (wd_rec_type_json(r) == WD_REC_TOOL_RESULT &&
		    json_is_object(u) && *ts_js(r, "child_run_id")) {
			tok += ts_num(u, "input_tokens") +
			       ts_num(u, "output_tokens");
			cost += ts_num(u, "cost_usd");
			sub_steps += ts_num(u, "steps");
		}
		double w = ts_sec(ts_js(r, "ts")) - t0;
		if (t0 > 0 && w > wall)
			wall = w;
	}
	for (; cur < nsteps; cur++) {
		use[cur][0] = cur + 1 + sub_steps;
		use[cur][1] = tok;
		use[cur][2] = cost;
		use[cur][3] = wall;
	}
	const int W = 760, H = 220, L = 48, R = 16, T = 12, B = 28;
	double ymax = 100;
	for (int s = 0; s < nsteps; s++)
		for (int k = 0; k < 4; k++)
			if (lim[k] > 0 && use[s][k] * 100 / lim[k] > ymax)
				ymax = use[s][k] * 100 / lim[k];
	fprintf(f,
		"<section id=\"budget\"><h2>Budget use per step</h2>"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		"height=\"%d\" role=\"img\" aria-label=\"budget use per step "
		"as a share of each bound\">",
		W, H);
	double pw = W - L - R, ph = H - T - B;
#define X(s) (L + (nsteps > 1 ? pw * (s) / (nsteps - 1) : pw / 2))
#define Y(p) (T + ph - ph * (p) / ymax)
	for (int p = 0; p <= (int)ymax; p += 25)
		fprintf(f,
			"<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"%s\"/><text x=\"4\" y=\"%.1f\" "
			"font-size=\"11\">%d%%</text>",
			L, W - R, Y(p), Y(p), p == 100 ? "#000" : "#ddd",
			Y(p) + 4, p);
	for (int s = 0; s<nsteps; s += nsteps> 20 ? 5 : 1)
		fprintf(f,
			"<text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
			"text-anchor=\"middle\">%d</text>",
			X(s), H - 10, s);
	for (int k = 0; k < 4; k++) {
		if (lim[k] <= 0)
			continue;
		fprintf(f,
			"<polyline class=\"bound-%d\" fill=\"none\" "
			"stroke=\"%s\" stroke-width=\"2\" points=\"",
			k, color[k]);
		for (int s = 0; s < nsteps; s++)
			fprintf(f, "%.1f,%.1f ", X(s),
				Y(use[s][k] * 100 / lim[k]));
		fprintf(f, "\"/>");
	}
#undef X
#undef Y
	fprintf(f, "</svg><p class=\"legend\">");
	for (int k = 0; k < 4; k++)
		fprintf(
		    f, "<span style=\"color:%s\">&#9632; %s (bound %g)</span> ",
		    color[k], name[k], lim[k]);
	fprintf(f, " &mdash; 100%% = the bound</p><table class=\"budget\">"
		   "<tr><th>step</th><th>tokens</th><th>cost $</th>"
		   "<th>wall s</th></tr>\n");
	for (int s = 0; s < nsteps; s++)
		fprintf(f,
			"<tr><td>%d</td><td>%.0f</td><td>%.6f</td>"
			"<td>%.2f</td></tr>\n",
			s, use[s][1], use[s][2], use[s][3]);
	fprintf(f, "</table></section>\n");
	free(use);
}

static void timeline(struct page *pg, json_t *recs, int depth);

/* The sub-agent runs a run started (tool_attempt.child_run_id): a tree
 * at the top, each child's own timeline folded below its parent's. */
static void subagents(struct page *pg, json_t *recs, int depth)
{
	size_t i;
	json_t *r;
	bool any = false;
	json_array_foreach(recs, i, r)
	{
		const char *child = ts_js(r, "child_run_id");
		if (wd_rec_type_json(r) != WD_REC_TOOL_ATTEMPT || !*child ||
		    depth > MAX_DEPTH)
			continue;
		if (!any)
			fprintf(pg->f, "%s<ul class=\"tree\">\n",
				depth == 1 ? "<h2>Sub-agent runs</h2>" : "");
		any = true;
		pg->children++;
		json_t *c = NULL;
		struct wd_err err = {0};
		int rc = ts_records(pg->s, child, &c, &err);
		json_t *end = json_array_get(c, json_array_size(c) - 1);
		fprintf(pg->f, "<li class=\"subrun\"><details><summary>");
		kv(pg->f, "sub-agent", ts_js(r, "subagent"));
		kv(pg->f, "run", child);
		kvf(pg->f, "parent step", "%.0f", ts_num(r, "step"));
		if (wd_rec_type_json(end) == WD_REC_RUN_END) {
			kv(pg->f, "status", ts_js(end, "status"));
			kvf(pg->f, "cost", "$%.6f", ts_num(end, "cost_usd"));
		}
		fprintf(pg->f, "</summary>\n");
		if (rc < 0) {
			fprintf(pg->f, "<p class=\"absent\">");
			html_esc(pg->f, err.msg);
			fprintf(pg->f, "</p>");
		} else {
			struct page sub = *pg;
			sub.run_id = child;
			load_payloads(&sub, c);
			timeline(&sub, c, depth + 1);
			json_decref(sub.payloads);
			pg->children = sub.children;
		}
		fprintf(pg->f, "</details></li>\n");
		json_decref(c);
	}
	if (any)
		fprintf(pg->f, "</ul>\n");
}

static void timeline(struct page *pg, json_t *recs, int depth)
{
	FILE *f = pg->f;
	long long cur = -1;
	size_t i;
	json_t *r;
	fprintf(f, "<div class=\"timeline\" data-run=\"");
	html_esc(f, pg->run_id);
	fprintf(f, "\">\n");
	json_array_foreach(recs, i, r)
	{
		if (!in_timeline(r))
			continue;
		long long step = (long long)ts_num(r, "step");
		if (step != cur) {
			if (cur >= 0)
				fprintf(f, "</section>\n");
			cur = step;
			/* flags for the step header: what a reader looks
			 * for first */
			bool den = false, div = false, ref = false;
			for (size_t k = i; k < json_array_size(recs); k++) {
				json_t *x = json_array_get(recs, k);
				if (!in_timeline(x))
					continue;
				if ((long long)ts_num(x, "step") != step)
					break;
				enum wd_rec_type t = wd_rec_type_json(x);
				den |= t == WD_REC_DENIAL;
				div |= t == WD_REC_REPLAY_DIVERGENCE;
				ref |= t == WD_REC_REPLAY_REFUSED;
			}
			fprintf(f,
				"<section class=\"step%s%s\" data-step=\"%lld\""
				" id=\"",
				den ? " has-denial" : "",
				div ? " has-divergence" : "", step);
			html_esc(f, pg->run_id);
			fprintf(f, "-step-%lld\"><h3>step %lld", step, step);
			if (den)
				fprintf(f, " <span class=\"badge denial\">"
					   "kernel denial</span>");
			if (div)
				fprintf(f, " <span class=\"badge divergence\">"
					   "diverges from the original</span>");
			if (ref)
				fprintf(f, " <span class=\"badge refused\">"
					   "refused in replay</span>");
			fprintf(f, "</h3>\n");
		}
		render_record(pg, r);
	}
	if (cur >= 0)
		fprintf(f, "</section>\n");
	fprintf(f, "</div>\n");
	subagents(pg, recs, depth);
}

/* The runs that replay this one (their run_start.replay_of names it):
 * from the index (runs.replay_of), never by reading every other run's
 * records (through wardend each would be a payload read in that run). */
static void replay_links(struct page *pg, json_t *recs)
{
	FILE *f = pg->f;
	json_t *ro = json_object_get(json_array_get(recs, 0), "replay_of");
	if (ro) {
		fprintf(f, "<p class=\"replay-of\">replay of <a href=\"");
		html_esc(f, ts_js(ro, "run_id"));
		fprintf(f, ".html\">");
		html_esc(f, ts_js(ro, "run_id"));
		fprintf(f, "</a> from step %.0f (determinism ",
			ts_num(ro, "from_step"));
		html_esc(f, ts_js(ro, "determinism"));
		fprintf(f, ", tools ");
		html_esc(f, ts_js(ro, "tools"));
		fprintf(f, ")</p>\n");
	}
	json_t *runs = NULL;
	struct wd_err err = {0};
	if (ts_runs(pg->s, &(struct wd_trace_query){.replay_of = pg->run_id},
		    &runs, &err) < 0) {
		wd_warn("trace html: the replays of %s: %s", pg->run_id,
			err.msg);
		return;
	}
	size_t i;
	json_t *r;
	json_array_foreach(runs, i, r)
	{
		const char *id = ts_js(r, "run_id");
		char *out = trace_replay_outcome(r);
		fprintf(f, "<p class=\"replayed-by\">replayed by <a href=\"");
		html_esc(f, id);
		fprintf(f, ".html\">");
		html_esc(f, id);
		fprintf(f, "</a> from step %.0f: ", ts_num(r, "replay_from"));
		html_esc(f, out);
		fprintf(f, "</p>\n");
		free(out);
	}
	json_decref(runs);
}

/* Who read the run's payloads through wardend (payload_read records). */
static void reads_log(FILE *f, json_t *recs)
{
	bool any = false;
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		if (in_timeline(r))
			continue;
		if (!any)
			fprintf(f, "<section id=\"reads\"><h2>Payload "
				   "reads</h2>\n");
		any = true;
		fprintf(f,
			"<div class=\"ev payload_read\" data-step=\"%.0f\">"
			"<span class=\"type\">",
			ts_num(r, "step"));
		html_esc(f, ts_js(r, "ts"));
		fprintf(f, "</span>");
		kv(f, "read by", ts_js(r, "reader"));
		kvf(f, "uid", "%.0f", ts_num(r, "uid"));
		kv(f, "allowed as", ts_js(r, "access"));
		kvf(f, "step", "%.0f", ts_num(r, "step"));
		kvf(f, "payloads", "%.0f",
		    (double)json_array_size(json_object_get(r, "read")));
		fprintf(f, "</div>\n");
	}
	if (any)
		fprintf(f, "</section>\n");
}

int trace_html_page(struct tsrc *s, const char *run_id, json_t *recs, FILE *f)
{
	struct page pg = {.f = f, .s = s, .run_id = run_id};
	json_t *st = json_array_get(recs, 0);
	json_t *end = json_array_get(recs, json_array_size(recs) - 1);
	char title[160];
	snprintf(title, sizeof(title), "warden run %s", run_id);
	html_head(f, title, page_script);
	fprintf(f, "<header><h1>run ");
	html_esc(f, run_id);
	fprintf(f, "</h1><p>");
	kv(f, "agent", ts_js(st, "agent"));
	kv(f, "team", ts_js(st, "team"));
	kv(f, "user", ts_js(st, "user"));
	kv(f, "model", ts_js2(st, "gen_ai.request.model", "model"));
	kv(f, "payloads", ts_js(json_object_get(st, "trace"), "payloads"));
	if (wd_rec_type_json(end) == WD_REC_RUN_END) {
		kv(f, "status", ts_js(end, "status"));
		kvf(f, "steps", "%.0f", ts_num(end, "steps"));
		kvf(f, "cost", "$%.6f", ts_num(end, "cost_usd"));
	} else {
		kv(f, "status", "(no run_end: running or interrupted)");
	}
	fprintf(f, "</p>\n");
	replay_links(&pg, recs);
	fprintf(f, "<button id=\"expand-all\" type=\"button\">expand all "
		   "payloads</button></header>\n<main>\n");
	budget_chart(f, recs);
	fprintf(f, "<section id=\"steps\"><h2>Timeline</h2>\n");
	load_payloads(&pg, recs);
	timeline(&pg, recs, 1);
	json_decref(pg.payloads);
	fprintf(f, "</section>\n");
	reads_log(f, recs);
	fprintf(f, "</main>\n");
	html_foot(f);
	return ferror(f) ? -EIO : 0;
}

int trace_html_cmd(struct tsrc *s, struct trace_opts *o)
{
	if (o->argc != 1) {
		fprintf(stderr, "usage: warden trace html RUN [-o FILE]\n");
		return WD_EXIT_USAGE;
	}
	json_t *recs = NULL;
	struct wd_err err = {0};
	if (ts_records(s, o->argv[0], &recs, &err) < 0 ||
	    !json_array_size(recs)) {
		wd_error("trace html: %s",
			 err.msg[0] ? err.msg : "no such run");
		json_decref(recs);
		return WD_EXIT_FAIL;
	}
	struct ts_out out;
	if (ts_out_open("html", o->out, &out) < 0) {
		json_decref(recs);
		return WD_EXIT_FAIL;
	}
	int rc = trace_html_page(s, o->argv[0], recs, out.f);
	json_decref(recs);
	int crc = ts_out_close(&out, rc == 0);
	rc = rc ? rc : crc;
	if (rc) {
		wd_error("trace html: writing %s: %s",
			 o->out ? o->out : "stdout", strerror(-rc));
		return WD_EXIT_FAIL;
	}
	if (o->out && strcmp(o->out, "-"))
		printf("%s\n", o->out);
	return WD_EXIT_OK;
}
