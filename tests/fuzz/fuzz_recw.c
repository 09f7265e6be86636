/* The typed record encoder (trace/recw.h) against the JSON append path, on
 * any JSON object: its members written through wd_recw_json must give the
 * bytes the JSON path writes (wd_trace_redact_json, then wd_trace_emit in
 * the store's order: run_id, step, type, the rest) and the same index
 * fields (wd_idx_extract of the JSON record). A record the JSON path
 * writes is never refused by the typed one. */
#include "trace/recw.h"
#include "trace/trace_int.h"

#include <string.h>

static bool reserved(const char *k)
{
	return !strcmp(k, "seq") || !strcmp(k, "ts") || !strcmp(k, "prev") ||
	       !strcmp(k, "crc") || !strcmp(k, "run_id") ||
	       !strcmp(k, "step") || !strcmp(k, "type");
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *v = json_loadb((const char *)data, size, 0, NULL);
	if (!json_is_object(v)) {
		json_decref(v);
		return 0;
	}
	/* the JSON path: a record holding the same members, redacted in
	 * place, encoded as the store does */
	json_t *rec = json_pack("{s:s,s:i,s:s}", "run_id", "run-f", "step", 3,
				"type", "tool_attempt");
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x) if (!reserved(k))
	    json_object_set(rec, k, x);
	json_t *copy = json_deep_copy(rec);
	wd_trace_redact_json(NULL, copy);
	struct wd_buf old = {0};
	wd_buf_append(&old, "{\"run_id\":", 10);
	int er = wd_trace_emit(&old, json_object_get(copy, "run_id"));
	wd_buf_append(&old, ",\"step\":", 8);
	er |= wd_trace_emit(&old, json_object_get(copy, "step"));
	wd_buf_append(&old, ",\"type\":", 8);
	er |= wd_trace_emit(&old, json_object_get(copy, "type"));
	json_object_foreach(copy, k, x)
	{
		if (reserved(k))
			continue;
		wd_buf_append(&old, ",", 1);
		er |= wd_trace_emit_member(&old, k, x);
	}
	/* the typed path, the members as they came */
	struct wd_recw *w =
	    wd_recw_begin(NULL, "run-f", 3, WD_REC_TOOL_ATTEMPT);
	json_object_foreach(v, k, x) if (!reserved(k)) wd_recw_json(w, k, x);
	size_t n;
	const char *body = wd_recw_body(w, &n);
	if (er || n != old.len || memcmp(body, old.data, n))
		__builtin_trap();
	/* the index fields the typed path noted = what the index reads
	 * back from the line (catch-up, reindex) */
	wd_buf_append(&old, "}", 1);
	json_t *back = json_loadb(old.data, old.len, 0, NULL);
	if (!back)
		__builtin_trap();
	struct wd_idxrec *a = wd_idx_extract(back);
	struct wd_idxrec *b = wd_recw_idx(w);
	for (int i = 0; i < WD_IDXREC_NSTR; i++)
		if (!same_str(a->s[i], b->s[i]))
			__builtin_trap();
	for (unsigned i = 0; i < a->nrefs && a->nrefs == b->nrefs; i++)
		if (!same_str(a->refs[i], b->refs[i]))
			__builtin_trap();
	if (a->nrefs != b->nrefs || a->step != b->step ||
	    a->in_tokens != b->in_tokens || a->out_tokens != b->out_tokens ||
	    a->cached_tokens != b->cached_tokens ||
	    a->cost_nusd != b->cost_nusd || a->has_cost != b->has_cost ||
	    a->rd != b->rd || a->has_rd != b->has_rd ||
	    a->flagged != b->flagged || a->uid != b->uid ||
	    a->has_uid != b->has_uid || a->replay_from != b->replay_from ||
	    a->replay_converged != b->replay_converged ||
	    a->has_diverged != b->has_diverged ||
	    a->diverged_at != b->diverged_at)
		__builtin_trap();
	free(a);
	free(b);
	json_decref(back);
	wd_recw_end(w);
	wd_buf_free(&old);
	json_decref(copy);
	json_decref(rec);
	json_decref(v);
	return 0;
}
