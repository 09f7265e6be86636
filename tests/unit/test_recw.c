/* The typed record encoder (trace/recw.h) against the JSON append path:
 * the same records written both ways, into two stores, must give the same
 * bytes between the head (seq, ts, prev) and the crc, parse to the same
 * JSON, verify (framing, chain, blobs) and give the same index rows as the
 * JSON path and as a rebuild of the index from the segments. Also:
 * redaction on the typed path, misuse refused with nothing written,
 * hash_only runs noted, invalid UTF-8, a record begun inside another. */
#include "t.h"
#include "common/jsonstr.h"
#include "events/event.h"
#include "trace/recw.h"
#include "trace/trace.h"
#include "trace/trace_int.h" /* wd_trace_secret_key */

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static const char *const extra_rx[] = {"internal-[0-9]{4}", NULL};

static char text[800];

/* one record both ways: fills *j (JSON, members in order) and *w */
typedef void (*mk_fn)(struct wd_trace *t, int i, json_t **j,
		      struct wd_recw **w);

static void mk_model_call(struct wd_trace *t, int i, json_t **j,
			  struct wd_recw **w)
{
	char ph[WD_TRACE_REF_LEN];
	wd_trace_ref_of(&i, sizeof(i), ph);
	*j = json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:i,s:i,s:f,s:i,s:{s:s,s:s,"
		       "s:[{s:s,s:{s:s,s:i}}]},s:n,s:b}",
		       "run_id", "run-a", "step", i, "type", "model_call",
		       "gen_ai.request.model", "claude-sonnet-4", "prompt_hash",
		       ph, "prompt_ref", ph, "gen_ai.usage.input_tokens", 6412,
		       "gen_ai.usage.output_tokens", -184, "cost_usd", 0.0231,
		       "latency_ms", 1840, "response", "stop_reason",
		       "tool_use", "text", text, "tool_calls", "name", "get",
		       "arguments", "url", "https://x/\"q\"\\\n\t", "n", 3,
		       "system_fingerprint", "cached", 1);
	struct wd_recw *r = wd_recw_begin(t, "run-a", i, WD_REC_MODEL_CALL);
	wd_recw_str(r, "gen_ai.request.model", "claude-sonnet-4");
	wd_recw_str(r, "prompt_hash", ph);
	wd_recw_str(r, "prompt_ref", ph);
	wd_recw_int(r, "gen_ai.usage.input_tokens", 6412);
	wd_recw_int(r, "gen_ai.usage.output_tokens", -184);
	wd_recw_real(r, "cost_usd", 0.0231);
	wd_recw_int(r, "latency_ms", 1840);
	wd_recw_obj_begin(r, "response");
	wd_recw_str(r, "stop_reason", "tool_use");
	wd_recw_str(r, "text", text);
	wd_recw_arr_begin(r, "tool_calls");
	wd_recw_obj_begin(r, NULL);
	wd_recw_str(r, "name", "get");
	json_t *args =
	    json_pack("{s:s,s:i}", "url", "https://x/\"q\"\\\n\t", "n", 3);
	wd_recw_json(r, "arguments", args);
	json_decref(args);
	wd_recw_obj_end(r);
	wd_recw_arr_end(r);
	wd_recw_obj_end(r);
	wd_recw_null(r, "system_fingerprint");
	wd_recw_bool(r, "cached", true);
	*w = r;
}

/* secrets everywhere: a secret key, the built-in patterns, the store's
 * extra pattern, in nested args; unicode and control characters */
static void mk_attempt(struct wd_trace *t, int i, json_t **j,
		       struct wd_recw **w)
{
	json_t *args =
	    json_pack("{s:s,s:s,s:[s,s,i,f],s:{s:s,s:n}}", "Authorization",
		      "Bearer abcdefghijklmnop", "note",
		      "key sk-ant-abcdefghijklmnopqrstuvwxyz and internal-1234 "
		      "h\xc3\xa9llo \xe2\x82\xac \x01",
		      "list", "x-api-key: zzzzzzzzzzzz", "ok", -7, 1e300, "hdr",
		      "api_key", "plain-value", "empty");
	*j = json_pack(
	    "{s:s,s:i,s:s,s:s,s:s,s:s,s:O,s:s,s:i,s:f}", "run_id", "run-a",
	    "step", i, "type", "tool_attempt", "gen_ai.tool.name", "send_mail",
	    "gen_ai.tool.call.id", "call-1", "side_effects", "external", "args",
	    args, "args_ref", "sha256:nothex", "user_uid", 1000, "whole", 2.0);
	struct wd_recw *r = wd_recw_begin(t, "run-a", i, WD_REC_TOOL_ATTEMPT);
	wd_recw_str(r, "gen_ai.tool.name", "send_mail");
	wd_recw_str(r, "gen_ai.tool.call.id", "call-1");
	wd_recw_str(r, "side_effects", "external");
	wd_recw_json(r, "args", args);
	wd_recw_str(r, "args_ref", "sha256:nothex");
	wd_recw_int(r, "user_uid", 1000);
	wd_recw_real(r, "whole", 2.0);
	json_decref(args);
	*w = r;
}

static void mk_result(struct wd_trace *t, int i, json_t **j, struct wd_recw **w)
{
	char rr[WD_TRACE_REF_LEN];
	wd_trace_ref_of("out", 3, rr);
	*j = json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:I,s:{s:s}}",
		       "run_id", "run-a", "step", i, "type", "tool_result",
		       "tool", "send_mail", "call_id", "call-1", "status",
		       "denied", "check", "approval", "result_hash", rr,
		       "result_ref", rr, "exit_code", 0, "bytes",
		       (json_int_t)INT64_MIN, "enforcement", "egress", "bpf");
	struct wd_recw *r = wd_recw_begin(t, "run-a", i, WD_REC_TOOL_RESULT);
	wd_recw_str(r, "tool", "send_mail");
	wd_recw_str(r, "call_id", "call-1");
	wd_recw_str(r, "status", "denied");
	wd_recw_str(r, "check", "approval");
	wd_recw_str(r, "result_hash", rr);
	wd_recw_str(r, "result_ref", rr);
	wd_recw_int(r, "exit_code", 0);
	wd_recw_int(r, "bytes", INT64_MIN);
	wd_recw_obj_begin(r, "enforcement");
	wd_recw_str(r, "egress", "bpf");
	wd_recw_obj_end(r);
	*w = r;
}

/* a denial: wd_event_to_json against wd_event_recw, every optional
 * member set (even steps) or none (odd) */
static void mk_denial(struct wd_trace *t, int i, json_t **j, struct wd_recw **w)
{
	struct wd_event e = {.ts_ns = 1764645296123456789ull,
			     .cgroup_id = 0x8000000000000123ull,
			     .pid = 42,
			     .uid = 4294967294u,
			     .source = WD_SRC_BPF,
			     .syscall_nr = -1,
			     .err = 1,
			     .verdict = i % 2 ? WD_VERDICT_AUDITED
					      : WD_VERDICT_DENIED};
	snprintf(e.kind, sizeof(e.kind), "connect");
	if (i % 2 == 0) {
		snprintf(e.call_id, sizeof(e.call_id), "c-1");
		e.syscall_nr = 42;
		snprintf(e.syscall, sizeof(e.syscall), "connect");
		snprintf(e.target, sizeof(e.target),
			 "10.0.0.1:443 Bearer abcdefghijkl \"x\"");
		snprintf(e.run_id, sizeof(e.run_id), "run-a");
		e.step = 3;
		snprintf(e.tool, sizeof(e.tool), "fetch");
		snprintf(e.agent, sizeof(e.agent), "triage");
		snprintf(e.team, sizeof(e.team), "sec");
		e.domain_id = 0xabcdef;
	}
	*j = json_pack("{s:s,s:i,s:s,s:s,s:s,s:o}", "run_id", "run-a", "step",
		       i, "type", "denial", "gen_ai.tool.name", "fetch",
		       "call_id", "c-1", "event", wd_event_to_json(&e));
	struct wd_recw *r = wd_recw_begin(t, "run-a", i, WD_REC_DENIAL);
	wd_recw_str(r, "gen_ai.tool.name", "fetch");
	wd_recw_str(r, "call_id", "c-1");
	wd_event_recw(r, "event", &e);
	*w = r;
}

/* big and deep: an args object of 5000 members, arrays 300 deep (jansson
 * writes both; so must the typed path) */
static void mk_big(struct wd_trace *t, int i, json_t **j, struct wd_recw **w)
{
	json_t *args = json_object();
	for (int k = 0; k < 5000; k++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", k);
		json_object_set_new(args, key, json_integer(k));
	}
	json_t *deep = json_array();
	for (int d = 0; d < 300; d++) {
		json_t *up = json_array();
		json_array_append_new(up, deep);
		deep = up;
	}
	json_object_set_new(args, "deep", deep);
	*j = json_pack("{s:s,s:i,s:s,s:s,s:O}", "run_id", "run-a", "step", i,
		       "type", "tool_attempt", "gen_ai.tool.name", "big",
		       "args", args);
	struct wd_recw *r = wd_recw_begin(t, "run-a", i, WD_REC_TOOL_ATTEMPT);
	wd_recw_str(r, "gen_ai.tool.name", "big");
	wd_recw_json(r, "args", args);
	json_decref(args);
	*w = r;
}

static void mk_start(struct wd_trace *t, int i, json_t **j, struct wd_recw **w)
{
	*j = json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:i,s:s,s:{s:s,s:i},s:{s:s,"
		       "s:i}}",
		       "run_id", "run-h", "step", 0, "type", "run_start",
		       "agent", "triage", "team", "sec", "user", "alice", "uid",
		       1000, "model", "m1", "trace", "payloads", "hash_only",
		       "retention_days", 30, "replay_of", "run_id", "run-a",
		       "from_step", 2);
	struct wd_recw *r = wd_recw_begin(t, "run-h", 0, WD_REC_RUN_START);
	wd_recw_str(r, "agent", "triage");
	wd_recw_str(r, "team", "sec");
	wd_recw_str(r, "user", "alice");
	wd_recw_int(r, "uid", 1000);
	wd_recw_str(r, "model", "m1");
	wd_recw_obj_begin(r, "trace");
	wd_recw_str(r, "payloads", "hash_only");
	wd_recw_int(r, "retention_days", 30);
	wd_recw_obj_end(r);
	wd_recw_obj_begin(r, "replay_of");
	wd_recw_str(r, "run_id", "run-a");
	wd_recw_int(r, "from_step", 2);
	wd_recw_obj_end(r);
	(void)i;
	*w = r;
}

static void mk_end(struct wd_trace *t, int i, json_t **j, struct wd_recw **w)
{
	*j =
	    json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:b,s:{s:b,s:i}}", "run_id",
		      "run-a", "step", i, "type", "run_end", "status", "failed",
		      "reason", "budget: steps", "cost_usd", "0.5", "flagged",
		      1, "replay", "converged", 0, "diverged_at", 3);
	struct wd_recw *r = wd_recw_begin(t, "run-a", i, WD_REC_RUN_END);
	wd_recw_str(r, "status", "failed");
	wd_recw_str(r, "reason", "budget: steps");
	wd_recw_str(r, "cost_usd", "0.5");
	wd_recw_bool(r, "flagged", true);
	wd_recw_obj_begin(r, "replay");
	wd_recw_bool(r, "converged", false);
	wd_recw_int(r, "diverged_at", 3);
	wd_recw_obj_end(r);
	*w = r;
}

/* The bytes between the head (..."prev":"sha256:<64>",) and ,"crc" */
static char *inner(const char *line, size_t len, size_t *n)
{
	const char *p = strstr(line, "\"prev\":\"sha256:");
	const char *e = line + len - 18; /* ,"crc":"xxxxxxxx"} */
	if (!p || e < p + 15 + 64 + 2)
		return NULL;
	p += 15 + 64 + 2;
	*n = e - p;
	return strndup(p, *n);
}

struct lines {
	char *v[64];
	size_t n;
};

static int read_seg(const char *dir, struct lines *out)
{
	char *p = wd_asprintf("%s/trace/segments/0000000000000001.jsonl", dir);
	char *buf = NULL;
	size_t len = 0;
	int r = wd_read_file(p, &buf, &len);
	free(p);
	if (r < 0)
		return r;
	out->n = 0;
	for (char *s = buf, *nl; (nl = memchr(s, '\n', buf + len - s));
	     s = nl + 1)
		if (out->n < 64)
			out->v[out->n++] = strndup(s, nl - s);
	free(buf);
	return 0;
}

/* query results with the times (which differ between the stores) out */
static json_t *query(struct wd_trace *t, bool runs)
{
	struct wd_trace_query q = {0};
	json_t *a = NULL;
	struct wd_err err = {0};
	if (runs ? wd_trace_query_runs(t, &q, &a, &err)
		 : wd_trace_query_records(t, &q, &a, &err))
		return NULL;
	size_t i;
	json_t *x;
	json_array_foreach(a, i, x)
	{
		json_object_del(x, "ts");
		json_object_del(x, "started");
		json_object_del(x, "ended");
		json_object_del(x, "last_ts");
	}
	return a;
}

static bool same_json(json_t *a, json_t *b, const char *name)
{
	if (json_equal(a, b))
		return true;
	char *x = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
	char *y = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	printf("# %s:\n#  json %s\n#  typed %s\n", name, x, y);
	free(x);
	free(y);
	return false;
}

static void both_ways(struct wd_trace *ta, struct wd_trace *tb)
{
	static const mk_fn mk[] = {mk_start,  mk_model_call, mk_attempt,
				   mk_result, mk_denial,     mk_denial,
				   mk_big,    mk_model_call, mk_end};
	bool ok_line = true, ok_seq = true, ok_live = true;
	for (size_t i = 0; i < WD_ARRAY_SIZE(mk); i++) {
		json_t *j;
		struct wd_recw *w;
		struct wd_err e1 = {0}, e2 = {0};
		uint64_t s1 = 0;
		struct wd_trace_head h = {0};
		mk[i](tb, (int)i, &j, &w);
		int r1 = wd_trace_append(ta, j, i == 2, &s1, &e1);
		int r2 = wd_trace_append_w(tb, w, i == 2, &h, &e2);
		if (r1 || r2) {
			T_FAIL("recw append", "record %zu: %s / %s", i, e1.msg,
			       e2.msg);
			ok_seq = false;
		}
		ok_seq &= s1 == h.seq;
		/* the line a run's live readers get: json_dumps of the
		 * appended JSON record (seq/ts/prev differ in value only) */
		char *lj = json_dumps(j, JSON_COMPACT);
		char *lw = wd_recw_line(w, &h);
		json_t *pj = json_loads(lj, 0, NULL),
		       *pw = json_loads(lw, 0, 0);
		const char *cut = strstr(lj, ",\"seq\":");
		ok_live &=
		    pj && pw && cut &&
		    json_integer_value(json_object_get(pw, "seq")) ==
			(json_int_t)h.seq &&
		    !strcmp(json_string_value(json_object_get(pw, "prev")),
			    h.prev);
		/* jansson writes 1e300 where the store writes 1e+300 */
		for (const char *const *k =
			 (const char *const[]){"seq", "ts", "prev", NULL};
		     pj && pw && *k; k++) {
			json_object_del(pj, *k);
			json_object_del(pw, *k);
		}
		ok_live &= json_equal(pj, pw);
		if (getenv("RECW_DEBUG"))
			printf("# %s\n# %s\n", lj, lw);
		json_decref(pj);
		json_decref(pw);
		free(lj);
		free(lw);
		wd_recw_end(w);
		json_decref(j);
	}
	T_OK(ok_seq, "recw appends as the JSON path (same seqs)", "differ");
	T_OK(ok_live, "recw live line = json_dumps of the JSON record",
	     "differs");
	(void)ok_line;
}

/* A string's bytes in a record = the escaper's output of what redaction
 * leaves of it (what recw's one-pass path for plain strings must keep): a
 * store without extra patterns, each pattern's first bytes and each byte
 * the escaper stops at put at every offset of a string around the 16-byte
 * steps, and a string of each length up to 40 bytes. */
static void plain_path(void)
{
	char dc[] = "/tmp/wd-recw-c.XXXXXX";
	struct wd_trace *t;
	struct wd_err err = {0};
	struct wd_trace_opts o = {0};
	if (!mkdtemp(dc) || wd_trace_open(dc, &o, &t, &err)) {
		T_FAIL("recw plain open", "%s", err.msg);
		return;
	}
	static const char *const ins[] = {
	    "sk-abcdefghijklmnop0123",
	    "Bearer abcdefgh12345678",
	    "x-api-key: zzzzzzzzzz",
	    "AUTHORIZATION=Basic abc123",
	    "sk",
	    "be",
	    "x-",
	    "au",
	    "\"",
	    "\\",
	    "\n",
	    "\x01",
	    "\xc3\xa9",
	    "\xff",
	    "\x7f",
	    "s",
	};
	struct wd_recw *w0 = wd_recw_begin(t, "r", 0, WD_REC_FLAG);
	size_t l0 = 0;
	wd_recw_body(w0, &l0);
	wd_recw_end(w0);
	int bad = 0, n = 0;
	char s[96], want[700];
	for (size_t k = 0; k < WD_ARRAY_SIZE(ins) + 40; k++) {
		for (size_t at = 0; at < 40; at++) {
			size_t sl;
			if (k < WD_ARRAY_SIZE(ins)) {
				memset(s, 'q', 40);
				size_t il = strlen(ins[k]);
				memcpy(s + at, ins[k], il);
				sl = at + il + (at % 3) * 7;
				if (sl > 40 + il)
					sl = 40 + il;
				memset(s + at + il, 'q', sl - at - il);
			} else {
				if (at)
					break;
				sl = k - WD_ARRAY_SIZE(ins);
				for (size_t i = 0; i < sl; i++)
					s[i] = "abc ,.-_xyzKLM"[i % 14];
			}
			size_t rl = sl;
			char *r = wd_trace_redact_text(t, s, sl, &rl);
			char *e = wd_json_put_str(want, r ? r : s, rl, true);
			free(r);
			struct wd_recw *w =
			    wd_recw_begin(t, "r", 0, WD_REC_FLAG);
			wd_recw_strn(w, "k", s, sl);
			size_t bl = 0;
			const char *b = wd_recw_body(w, &bl);
			size_t wl = (size_t)(e - want);
			if (bl != l0 + 5 + wl || memcmp(b + l0, ",\"k\":", 5) ||
			    memcmp(b + l0 + 5, want, wl)) {
				if (bad++ < 3)
					printf("# %.*s\n# want %.*s\n", (int)bl,
					       b, (int)wl, want);
			}
			n++;
			wd_recw_end(w);
		}
	}
	T_OK(!bad, "recw string bytes = redaction then escaping (plain path)",
	     "%d of %d differ", bad, n);
	/* the secret keys in any case, and keys one byte off */
	static const char *const sk[] = {
	    "Authorization",  "X-API-KEY",	"api_key",
	    "API-key",	      "apikey",		"Proxy-Authorization",
	    "x-goog-api-key", "OPENAI_API_KEY", "anthropic_api_key",
	};
	int ks = 0;
	for (size_t k = 0; k < WD_ARRAY_SIZE(sk); k++) {
		char longer[40];
		snprintf(longer, sizeof(longer), "%sx", sk[k]);
		ks += wd_trace_secret_key(sk[k]) &&
		      !wd_trace_secret_key(longer) &&
		      !wd_trace_secret_key(sk[k] + 1);
	}
	T_OK(ks == (int)WD_ARRAY_SIZE(sk), "recw secret keys found in any case",
	     "%d of %zu", ks, WD_ARRAY_SIZE(sk));
	wd_trace_close(t);
	wd_rm_rf(dc);
}

int main(void)
{
	char da[] = "/tmp/wd-recw-a.XXXXXX", db[] = "/tmp/wd-recw-b.XXXXXX";
	if (!mkdtemp(da) || !mkdtemp(db))
		return 1;
	for (size_t k = 0; k < sizeof(text) - 1; k++)
		text[k] = "abcdefghij klmnopqrstuvwxyz.,\"\\\n"[k * 7 % 33];
	text[sizeof(text) - 1] = 0;
	struct wd_trace_opts o = {.redact_regexes = extra_rx};
	struct wd_trace *ta, *tb;
	struct wd_err err = {0};
	if (wd_trace_open(da, &o, &ta, &err) ||
	    wd_trace_open(db, &o, &tb, &err)) {
		T_FAIL("recw open", "%s", err.msg);
		return T_DONE();
	}
	/* the payloads the records name, in both stores (verify checks) */
	for (int i = 0; i < 9; i++) {
		char r[WD_TRACE_REF_LEN];
		wd_trace_put_blob(ta, NULL, &i, sizeof(i), r, NULL);
		wd_trace_put_blob(tb, NULL, &i, sizeof(i), r, NULL);
	}
	char rout[WD_TRACE_REF_LEN];
	wd_trace_put_blob(ta, NULL, "out", 3, rout, NULL);
	wd_trace_put_blob(tb, NULL, "out", 3, rout, NULL);
	both_ways(ta, tb);
	plain_path();

	/* hash_only noted from a typed run_start: nothing stored */
	char ref[WD_TRACE_REF_LEN];
	char *data = NULL;
	size_t dl = 0;
	wd_trace_put_blob(tb, "run-h", "secret payload", 14, ref, &err);
	T_OK(wd_trace_get_blob(tb, ref, &data, &dl, NULL) == -ENOENT,
	     "recw run_start hash_only: payloads of the run not stored",
	     "blob stored");
	free(data);

	/* misuse: refused, nothing written */
	struct wd_recw *w;
	int bad = 0;
	w = wd_recw_begin(tb, "run-b", 1, WD_REC_FLAG);
	wd_recw_str(w, "reason", "a");
	wd_recw_str(w, "reason", "b");
	bad += wd_trace_append_w(tb, w, false, NULL, NULL) == -EINVAL;
	wd_recw_end(w);
	w = wd_recw_begin(tb, "run-b", 1, WD_REC_FLAG);
	wd_recw_str(w, "seq", "1");
	bad += wd_trace_append_w(tb, w, false, NULL, NULL) == -EINVAL;
	wd_recw_end(w);
	w = wd_recw_begin(tb, "run-b", 1, WD_REC_FLAG);
	wd_recw_real(w, "x", NAN);
	bad += wd_trace_append_w(tb, w, false, NULL, NULL) == -EINVAL;
	wd_recw_end(w);
	w = wd_recw_begin(tb, "run-b", 1, WD_REC_FLAG);
	wd_recw_obj_begin(w, "o");
	bad += wd_trace_append_w(tb, w, false, NULL, NULL) == -EINVAL;
	wd_recw_end(w);
	w = wd_recw_begin(tb, "", 1, WD_REC_FLAG);
	bad += wd_trace_append_w(tb, w, false, NULL, NULL) == -EINVAL;
	wd_recw_end(w);
	w = wd_recw_begin(tb, "run-b", 1, WD_REC_FLAG);
	wd_recw_arr_begin(w, "a");
	wd_recw_str(w, "k", "element with a key");
	bad += wd_trace_append_w(tb, w, false, NULL, NULL) == -EINVAL;
	wd_recw_end(w);
	T_OK(bad == 6,
	     "recw misuse refused (dup key, reserved, NaN, open, "
	     "no run_id, keyed element)",
	     "%d of 6", bad);

	/* a record begun inside another, same thread; invalid UTF-8 */
	struct wd_trace_head h1 = {0}, h2 = {0};
	struct wd_recw *outer = wd_recw_begin(tb, "run-c", 1, WD_REC_FLAG);
	wd_recw_str(outer, "reason", "outer");
	struct wd_recw *in = wd_recw_begin(tb, "run-c", 2, WD_REC_DENIAL);
	wd_recw_str(in, "tool", "bad\xff\xc3(utf8");
	int r1 = wd_trace_append_w(tb, in, false, &h1, NULL);
	wd_recw_end(in);
	int r2 = wd_trace_append_w(tb, outer, false, &h2, NULL);
	int r3 = wd_trace_append_w(tb, outer, false, NULL, NULL);
	wd_recw_end(outer);
	T_OK(!r1 && !r2 && r3 == -EALREADY && h2.seq == h1.seq + 1,
	     "recw nested records; appended once", "%d %d %d", r1, r2, r3);

	/* the index: the typed store's live rows = the JSON store's = a
	 * rebuild's (the invalid UTF-8 tool name included) */
	wd_trace_flush(ta, NULL);
	wd_trace_flush(tb, NULL);
	json_t *ra = query(ta, false), *rb = query(tb, false);
	json_t *ua = query(ta, true), *ub = query(tb, true);
	/* the typed store has the extra nested records: compare the part
	 * both wrote */
	json_t *rb6 = json_array();
	for (size_t i = 0; i < json_array_size(ra); i++)
		json_array_append(rb6, json_array_get(rb, i));
	json_t *ub2 = json_array();
	size_t i;
	json_t *x;
	json_array_foreach(ub, i, x)
	{
		const char *id =
		    json_string_value(json_object_get(x, "run_id"));
		if (id && strcmp(id, "run-c"))
			json_array_append(ub2, x);
	}
	T_OK(ra && json_array_size(ra) == 9 && same_json(ra, rb6, "records") &&
		 same_json(ua, ub2, "runs"),
	     "recw index rows = the JSON path's", "differ");
	T_OK(wd_trace_reindex(tb, &err) == 0, "recw reindex", "%s", err.msg);
	json_t *rb2 = query(tb, false), *ub3 = query(tb, true);
	T_OK(same_json(rb, rb2, "records rebuilt") &&
		 same_json(ub, ub3, "runs rebuilt"),
	     "recw live index rows = rebuilt from the segments", "differ");
	json_decref(ra);
	json_decref(rb);
	json_decref(ua);
	json_decref(ub);
	json_decref(rb6);
	json_decref(ub2);
	json_decref(rb2);
	json_decref(ub3);

	json_t *pa = NULL, *pb = NULL;
	int va = wd_trace_verify(ta, NULL, &pa, NULL);
	int vb = wd_trace_verify(tb, NULL, &pb, NULL);
	T_OK(va == 0 && vb == 0,
	     "recw both stores verify (frames, chain, blobs)", "%d %d", va, vb);
	if (getenv("RECW_DEBUG")) {
		char *dump = json_dumps(pb, 0);
		printf("# %s\n", dump);
		free(dump);
	}
	json_decref(pa);
	json_decref(pb);
	wd_trace_close(ta);
	wd_trace_close(tb);

	/* the bytes on disk between head and crc, record by record */
	struct lines la = {0}, lb = {0};
	bool same = read_seg(da, &la) == 0 && read_seg(db, &lb) == 0 &&
		    la.n == 9 && lb.n == 11;
	bool red = false;
	for (size_t k = 0; same && k < la.n; k++) {
		size_t n1 = 0, n2 = 0;
		char *a = inner(la.v[k], strlen(la.v[k]), &n1);
		char *b = inner(lb.v[k], strlen(lb.v[k]), &n2);
		if (!a || !b || n1 != n2 || memcmp(a, b, n1)) {
			printf("# record %zu:\n#  json  %s\n#  typed %s\n", k,
			       a ? a : "?", b ? b : "?");
			same = false;
		}
		if (k == 2)
			red = b && strstr(b, "[REDACTED]") &&
			      !strstr(b, "abcdefghijklmnop") &&
			      !strstr(b, "internal-1234") &&
			      !strstr(b, "zzzzzzzzzzzz") &&
			      !strstr(b, "plain-value");
		free(a);
		free(b);
	}
	T_OK(same, "recw bytes on disk = the JSON path's", "differ");
	T_OK(red, "recw redacts (secret key, built-in patterns, extra regex)",
	     "a secret reached the segment");
	bool fffd = lb.n == 11 && strstr(lb.v[9], "bad\\uFFFD\\uFFFD(utf8");
	T_OK(fffd, "recw invalid UTF-8 written as U+FFFD", "%s",
	     lb.n == 11 ? lb.v[9] : "?");
	for (size_t k = 0; k < la.n; k++)
		free(la.v[k]);
	for (size_t k = 0; k < lb.n; k++)
		free(lb.v[k]);
	wd_rm_rf(da);
	wd_rm_rf(db);
	return T_DONE();
}
