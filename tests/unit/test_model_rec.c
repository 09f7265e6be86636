/* A step's model_call record, typed (runtime/model_rec.c, as loop.c writes
 * it) against the JSON record loop.c built before (old_rec below, that
 * code as it was): for the same request and response, into two stores, the
 * same bytes between the head (seq, ts, prev) and the crc, the same line
 * for the run's followers (before seq), the same index rows, and the run
 * going on with the same response (the JSON record redacted the response
 * it shared with the run in place). Cases: every optional member, none, a
 * hash_only agent, a failed call, a cost jansson cannot hold (NaN), reals
 * with exponents; secrets in the text, the arguments, an attempt's error
 * and the error message. */
#include "t.h"
#include "runtime/model_rec.h"
#include "trace/recw.h"
#include "trace/trace.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static const char *const extra_rx[] = {"internal-[0-9]{4}", NULL};

struct mc_case {
	const char *name;
	struct wd_complete_req req;
	struct wd_complete_resp resp;
	bool from_record, hash_only, prompt, failed;
};

/* loop.c's JSON model_call before the typed path, with rj shared */
static json_t *old_rec(struct wd_trace *t, const struct mc_case *k,
		       const char *prompt, json_t *rj, const char *err_msg)
{
	const struct wd_complete_req req = k->req;
	const struct wd_complete_resp resp = k->resp;
	json_t *rec = json_pack("{s:s,s:i,s:s}", "run_id", "run-m", "step", 4,
				"type", "model_call");
	json_object_set_new(rec, "gen_ai.request.model", json_string("m-1"));
	if (resp.model)
		json_object_set_new(rec, "gen_ai.response.model",
				    json_string(resp.model));
	if (resp.provider)
		json_object_set_new(rec, "gen_ai.provider.name",
				    json_string(resp.provider));
	if (resp.response_id)
		json_object_set_new(rec, "gen_ai.response.id",
				    json_string(resp.response_id));
	json_object_set_new(rec, "gen_ai.usage.input_tokens",
			    json_integer((json_int_t)resp.usage.input_tokens));
	json_object_set_new(rec, "gen_ai.usage.output_tokens",
			    json_integer((json_int_t)resp.usage.output_tokens));
	json_object_set_new(rec, "cached_tokens",
			    json_integer((json_int_t)resp.usage.cached_tokens));
	json_object_set_new(rec, "cost_usd", json_real(resp.cost_usd));
	json_object_set_new(rec, "priced", json_boolean(resp.priced));
	json_object_set_new(rec, "latency_ms",
			    json_integer((json_int_t)(resp.latency_us / 1000)));
	json_t *params = json_pack("{s:i}", "max_tokens",
				   req.max_tokens ? (int)req.max_tokens : 4096);
	if (req.temperature >= 0)
		json_object_set_new(params, "temperature",
				    json_real(req.temperature));
	if (req.seed_set)
		json_object_set_new(params, "seed",
				    json_integer((json_int_t)req.seed));
	json_object_set_new(rec, "params", params);
	json_object_set_new(rec, "route", json_string("m-1"));
	if (resp.system_fingerprint)
		json_object_set_new(rec, "system_fingerprint",
				    json_string(resp.system_fingerprint));
	if (k->from_record)
		json_object_set_new(rec, "from_record", json_true());
	if (prompt) {
		char ref[WD_TRACE_REF_LEN], h[WD_TRACE_REF_LEN];
		wd_trace_ref_redacted(t, prompt, strlen(prompt), h);
		json_object_set_new(rec, "prompt_hash", json_string(h));
		if (!wd_trace_put_blob(t, "run-m", prompt, strlen(prompt), ref,
				       NULL))
			json_object_set_new(rec, "prompt_ref",
					    json_string(ref));
	}
	json_t *att = json_array();
	for (int i = 0; i < resp.n_attempts; i++) {
		struct wd_attempt *x = &resp.attempts[i];
		json_t *o =
		    json_pack("{s:s,s:s,s:i,s:I}", "provider", x->provider,
			      "model", x->model, "status", x->http_status,
			      "latency_ms", (json_int_t)(x->latency_us / 1000));
		if (x->error[0])
			json_object_set_new(o, "error", json_string(x->error));
		json_array_append_new(att, o);
	}
	json_object_set_new(rec, "attempts", att);
	if (!err_msg) {
		cleanup_free char *rtext = json_dumps(rj, JSON_COMPACT);
		char ref[WD_TRACE_REF_LEN];
		if (rtext && !wd_trace_put_blob(t, "run-m", rtext,
						strlen(rtext), ref, NULL))
			json_object_set_new(rec, "response_ref",
					    json_string(ref));
		char oh[72];
		json_t *red = wd_trace_redacted_copy(t, rj);
		if (red && !wd_rec_output_hash(red, oh))
			json_object_set_new(rec, "output_hash",
					    json_string(oh));
		json_decref(red);
		if (!k->hash_only)
			json_object_set(rec, "response", rj);
		else
			json_object_set_new(
			    rec, "response",
			    json_pack("{s:s,s:i}", "stop_reason",
				      wd_stop_reason_name(resp.stop_reason),
				      "tool_calls", resp.n_tool_calls));
	} else {
		json_object_set_new(rec, "error", json_string(err_msg));
	}
	return rec;
}

/* loop.c's typed record; *rj becomes what the run goes on with */
static struct wd_recw *new_rec(struct wd_trace *t, const struct mc_case *k,
			       struct rt_model_rec *mr, const char *prompt,
			       json_t **rj, const char *err_msg)
{
	*mr = (struct rt_model_rec){.model = "m-1",
				    .req = &k->req,
				    .resp = &k->resp,
				    .from_record = k->from_record,
				    .hash_only = k->hash_only,
				    .error = err_msg};
	rt_model_rec_payloads(t, "run-m", mr, prompt, rj);
	struct wd_recw *w = wd_recw_begin(t, "run-m", 4, WD_REC_MODEL_CALL);
	rt_model_call_w(w, mr);
	return w;
}

/* The bytes between the head (..."prev":"sha256:<64>",) and ,"crc" */
static char *inner(const char *line)
{
	const char *p = strstr(line, "\"prev\":\"sha256:");
	size_t len = strlen(line);
	if (!p || len < 18 || line + len - 18 < p + 15 + 64 + 2)
		return NULL;
	p += 15 + 64 + 2;
	return strndup(p, (size_t)(line + len - 18 - p));
}

static char *seg_line(const char *dir, size_t want)
{
	char *p = wd_asprintf("%s/trace/segments/0000000000000001.jsonl", dir);
	char *buf = NULL, *out = NULL;
	size_t len = 0, n = 0;
	int r = wd_read_file(p, &buf, &len);
	free(p);
	if (r < 0)
		return NULL;
	for (char *s = buf, *nl; (nl = memchr(s, '\n', buf + len - s));
	     s = nl + 1)
		if (n++ == want) {
			out = strndup(s, nl - s);
			break;
		}
	free(buf);
	return out;
}

static json_t *rows(struct wd_trace *t)
{
	struct wd_trace_query q = {0};
	json_t *a = NULL;
	if (wd_trace_flush(t, NULL) || wd_trace_query_records(t, &q, &a, NULL))
		return NULL;
	size_t i;
	json_t *x;
	json_array_foreach(a, i, x) json_object_del(x, "ts");
	return a;
}

static void one(struct wd_trace *ta, struct wd_trace *tb, const char *da,
		const char *db, size_t nth, const struct mc_case *k)
{
	char name[96];
	const char *prompt =
	    k->prompt ? "user: look up Bearer abcdefghijklmnop0123" : NULL;
	const char *err_msg =
	    k->failed
		? "all providers failed: x-api-key: zzzzzzzzzzzzzzzz refused"
		: NULL;
	json_t *rj_old = k->failed ? NULL : rt_model_response(&k->resp);
	json_t *rj_new = k->failed ? NULL : rt_model_response(&k->resp);
	json_t *rec = old_rec(ta, k, prompt, rj_old, err_msg);
	struct rt_model_rec mr;
	struct wd_recw *w = new_rec(tb, k, &mr, prompt, &rj_new, err_msg);
	struct wd_err e1 = {0}, e2 = {0};
	struct wd_trace_head h = {0};
	int r1 = wd_trace_append(ta, rec, false, NULL, &e1);
	int r2 = wd_trace_append_w(tb, w, false, &h, &e2);
	snprintf(name, sizeof(name), "model_call %s: appended both ways",
		 k->name);
	T_OK(!r1 && !r2, name, "%s / %s", e1.msg, e2.msg);

	/* on disk */
	wd_trace_flush(ta, NULL);
	wd_trace_flush(tb, NULL);
	char *la = seg_line(da, nth), *lb = seg_line(db, nth);
	char *a = la ? inner(la) : NULL, *b = lb ? inner(lb) : NULL;
	snprintf(name, sizeof(name), "model_call %s: bytes on disk = JSON's",
		 k->name);
	T_OK(a && b && !strcmp(a, b), name, "\n#  json  %s\n#  typed %s",
	     a ? a : "?", b ? b : "?");
	if (getenv("MC_DEBUG"))
		printf("# %s\n", b ? b : "?");
	snprintf(name, sizeof(name), "model_call %s: no secret on disk",
		 k->name);
	T_OK(b && !strstr(b, "abcdefghijklmnop") && !strstr(b, "zzzzzzzz") &&
		 !strstr(b, "internal-1234") && !strstr(b, "hunter2"),
	     name, "%s", b ? b : "?");
	free(la);
	free(lb);
	free(a);
	free(b);

	/* the followers' line: rt_record's json_dumps against rt_record_w's
	 * wd_recw_line, up to seq (whose values differ by store). A real
	 * with an exponent is written as on disk (2.4e-06) where jansson
	 * wrote 2.4e-6: the same number; compared as jansson reads and
	 * writes both (members, order, values). */
	char *fj = json_dumps(rec, JSON_COMPACT);
	char *fw = wd_recw_line(w, &h);
	char *cj = fj ? strstr(fj, ",\"seq\":") : NULL;
	char *cw = fw ? strstr(fw, ",\"seq\":") : NULL;
	bool same = cj && cw && cj - fj == cw - fw && !memcmp(fj, fw, cj - fj);
	if (!same && cj && cw) {
		memcpy(cj, "}", 2);
		memcpy(cw, "}", 2);
		json_t *pj = json_loads(fj, 0, NULL),
		       *pw = json_loads(fw, 0, 0);
		char *dj = pj ? json_dumps(pj, JSON_COMPACT) : NULL;
		char *dw = pw ? json_dumps(pw, JSON_COMPACT) : NULL;
		same = dj && dw && !strcmp(dj, dw);
		json_decref(pj);
		json_decref(pw);
		free(dj);
		free(dw);
	}
	snprintf(name, sizeof(name), "model_call %s: followers' line = JSON's",
		 k->name);
	T_OK(same, name, "\n#  json  %s\n#  typed %s", fj ? fj : "?",
	     fw ? fw : "?");
	free(fj);
	free(fw);

	/* the response the run goes on with */
	snprintf(name, sizeof(name),
		 "model_call %s: run goes on with the same response", k->name);
	T_OK(json_equal(rj_old, rj_new) || (!rj_old && !rj_new), name,
	     "differ");
	wd_recw_end(w);
	json_decref(rec);
	json_decref(rj_old);
	json_decref(rj_new);
}

int main(void)
{
	char da[] = "/tmp/wd-mc-a.XXXXXX", db[] = "/tmp/wd-mc-b.XXXXXX";
	if (!mkdtemp(da) || !mkdtemp(db))
		return 1;
	struct wd_trace_opts o = {.redact_regexes = extra_rx};
	struct wd_trace *ta, *tb;
	struct wd_err err = {0};
	if (wd_trace_open(da, &o, &ta, &err) ||
	    wd_trace_open(db, &o, &tb, &err)) {
		T_FAIL("model_call open", "%s", err.msg);
		return T_DONE();
	}
	json_t *args0 = json_pack(
	    "{s:s,s:s,s:[s,i,f],s:{s:s}}", "url", "https://x/\"q\"\\\n\t",
	    "Authorization", "Bearer abcdefghijklmnop0123", "list",
	    "key sk-ant-abcdefghijklmnopqrstuvwxyz h\xc3\xa9llo", 3, 0.5, "o",
	    "api_key", "hunter2");
	json_t *args1 = json_string("{not json internal-1234");
	struct wd_tool_call tcs[2] = {
	    {.id = "toolu_01", .name = "fetch", .arguments = args0},
	    {.id = NULL, .name = "bad", .arguments = args1, .parse_error = 1},
	};
	struct wd_attempt at[2] = {
	    {.provider = "anthropic",
	     .model = "claude-x",
	     .http_status = 529,
	     .error = "overloaded; Authorization: Bearer abcdefghijklmnop",
	     .latency_us = 812345},
	    {.provider = "openai",
	     .model = "gpt-x",
	     .http_status = 200,
	     .latency_us = 1999999},
	};
	struct wd_complete_resp full = {
	    .stop_reason = WD_STOP_TOOL_USE,
	    .text = "calling with sk-abcdefghijklmnopqrstuvwx and \"quotes\"\n",
	    .tool_calls = tcs,
	    .n_tool_calls = 2,
	    .usage = {.input_tokens = 6412,
		      .output_tokens = 184,
		      .cached_tokens = 4096},
	    .cost_usd = 0.0231,
	    .priced = true,
	    .provider = "openai",
	    .model = "gpt-x-2026",
	    .response_id = "chatcmpl-1",
	    .system_fingerprint = "fp_abc",
	    .latency_us = 2812345,
	    .attempts = at,
	    .n_attempts = 2,
	};
	struct wd_complete_resp bare = {.stop_reason = WD_STOP_END_TURN,
					.text = "done"};
	struct wd_complete_resp nan_cost = full;
	nan_cost.cost_usd = NAN;
	struct wd_complete_resp tiny_cost = bare;
	tiny_cost.cost_usd = 2.4e-06;
	tiny_cost.priced = true;
	struct wd_complete_resp failed = {.attempts = at, .n_attempts = 1};
	const struct mc_case cases[] = {
	    {"full",
	     {.max_tokens = 1024,
	      .temperature = 0.2,
	      .seed_set = 1,
	      .seed = -7},
	     full,
	     true,
	     false,
	     true,
	     false},
	    {"bare", {.temperature = -1}, bare, false, false, false, false},
	    {"hash_only", {.temperature = 0}, full, false, true, true, false},
	    {"failed", {.temperature = 1.5}, failed, false, false, true, true},
	    {"nan cost",
	     {.temperature = -1},
	     nan_cost,
	     false,
	     false,
	     true,
	     false},
	    {"tiny cost",
	     {.temperature = 1e-7},
	     tiny_cost,
	     false,
	     false,
	     false,
	     false},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(cases); i++)
		one(ta, tb, da, db, i, &cases[i]);
	json_t *ra = rows(ta), *rb = rows(tb);
	T_OK(ra && json_array_size(ra) == WD_ARRAY_SIZE(cases) &&
		 json_equal(ra, rb),
	     "model_call index rows = the JSON path's", "differ");
	json_decref(ra);
	json_decref(rb);
	json_decref(args0);
	json_decref(args1);
	wd_trace_close(ta);
	wd_trace_close(tb);
	wd_rm_rf(da);
	wd_rm_rf(db);
	return T_DONE();
}
