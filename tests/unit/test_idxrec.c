/* The index fields of a record as the queue holds them (trace/idxrec.c,
 * wd_idx_build_into): a string the record carries twice (a model_call's
 * prompt_hash and prompt_ref, a tool_result's result_hash and result_ref) is
 * stored once, and every slot still reads back its own value. */
#include "t.h"
#include "trace/trace_int.h"

#include <string.h>

static json_t *model_call(const char *ph, const char *pref)
{
	return json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:i}", "run_id", "run-a",
			 "step", 3, "type", "model_call",
			 "gen_ai.request.model", "claude-sonnet-4",
			 "prompt_hash", ph, "prompt_ref", pref,
			 "gen_ai.usage.input_tokens", 6412);
}

int main(void)
{
	char ha[WD_TRACE_REF_LEN], hb[WD_TRACE_REF_LEN];
	int a = 1, b = 2;
	wd_trace_ref_of(&a, sizeof(a), ha);
	wd_trace_ref_of(&b, sizeof(b), hb);

	json_t *same = model_call(ha, ha), *other = model_call(ha, hb);
	struct wd_idxrec *fs = wd_idx_extract(same);
	struct wd_idxrec *fo = wd_idx_extract(other);
	/* the same members, one 72-byte string fewer (blocks are 16-byte
	 * sized) */
	T_OK(fs->size + 64 <= fo->size,
	     "idxrec: a string the record carries twice is stored once",
	     "block %zu bytes, %zu with two different hashes", fs->size,
	     fo->size);
	T_OK(fs->nrefs == 1 && fs->s[WD_IDXREC_PROMPT] &&
		 !strcmp(fs->s[WD_IDXREC_PROMPT], ha) &&
		 !strcmp(fs->refs[0], ha) && fo->nrefs == 1 &&
		 !strcmp(fo->s[WD_IDXREC_PROMPT], ha) &&
		 !strcmp(fo->refs[0], hb),
	     "idxrec: each slot reads its own value", "prompt %s ref %s",
	     fs->s[WD_IDXREC_PROMPT] ? fs->s[WD_IDXREC_PROMPT] : "(null)",
	     fs->nrefs ? fs->refs[0] : "(none)");
	T_OK(!strcmp(fs->s[WD_IDXREC_RUN], "run-a") &&
		 !strcmp(fs->s[WD_IDXREC_TYPE], "model_call") &&
		 !strcmp(fs->s[WD_IDXREC_MODEL], "claude-sonnet-4") &&
		 !fs->s[WD_IDXREC_RESULT] && fs->step == 3 &&
		 fs->in_tokens == 6412,
	     "idxrec: the other fields unchanged", "run %s type %s",
	     fs->s[WD_IDXREC_RUN], fs->s[WD_IDXREC_TYPE]);

	/* blocks appended one after another in one buffer (the queue's
	 * arena) resolve at their own offsets */
	struct wd_idxvals vs, vo;
	wd_idx_extract_vals(same, &vs);
	wd_idx_extract_vals(other, &vo);
	struct wd_buf arena = {0};
	size_t o1 = wd_idx_build_into(&vo, &arena);
	size_t o2 = wd_idx_build_into(&vs, &arena);
	struct wd_idxrec *r1 = (struct wd_idxrec *)(void *)(arena.data + o1);
	struct wd_idxrec *r2 = (struct wd_idxrec *)(void *)(arena.data + o2);
	wd_idx_resolve(r1);
	wd_idx_resolve(r2);
	T_OK(r2->size == fs->size && !strcmp(r2->s[WD_IDXREC_PROMPT], ha) &&
		 !strcmp(r2->refs[0], ha) && !strcmp(r1->refs[0], hb) &&
		 (char *)r2->s[WD_IDXREC_PROMPT] >= (char *)r2 &&
		 (char *)r2->refs[0] < (char *)r2 + r2->size,
	     "idxrec: blocks in one arena resolve in place", "differ");
	wd_buf_free(&arena);
	free(fs);
	free(fo);
	json_decref(same);
	json_decref(other);
	return T_DONE();
}
