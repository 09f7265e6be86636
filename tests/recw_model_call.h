/* The typed model_call record the trace bench appends (~1 KB with its
 * 800-byte text): tests/bench/bench_trace.c and tests/unit/test_recw_alloc.c
 * (which counts what appending it allocates) append the same record. */
#ifndef WD_TEST_RECW_MODEL_CALL_H
#define WD_TEST_RECW_MODEL_CALL_H

#include "trace/recw.h"
#include "trace/trace.h"

static inline int wd_test_append_model_call(struct wd_trace *t, const char *run,
					    int64_t step, const char *ph,
					    const char *text,
					    struct wd_err *err)
{
	struct wd_recw *w = wd_recw_begin(t, run, step, WD_REC_MODEL_CALL);
	wd_recw_str(w, "gen_ai.request.model", "claude-sonnet-4");
	wd_recw_str(w, "prompt_hash", ph);
	wd_recw_str(w, "prompt_ref", ph);
	wd_recw_int(w, "gen_ai.usage.input_tokens", 6412);
	wd_recw_int(w, "gen_ai.usage.output_tokens", 184);
	wd_recw_real(w, "cost_usd", 0.0231);
	wd_recw_int(w, "latency_ms", 1840);
	wd_recw_obj_begin(w, "response");
	wd_recw_str(w, "stop_reason", "tool_use");
	wd_recw_str(w, "text", text);
	wd_recw_obj_end(w);
	int r = wd_trace_append_w(t, w, false, NULL, err);
	wd_recw_end(w);
	return r;
}

#endif
