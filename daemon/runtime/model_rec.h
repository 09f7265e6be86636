/* A step's model_call record (DESIGN.md "Trace records"), written with
 * the typed encoder (trace/recw.h): the record every step of every run
 * writes goes into the store without a jansson object of its own. Its
 * bytes are those the JSON record loop.c built before gave
 * (tests/unit/test_model_rec.c builds both and compares them). */
#ifndef WD_RT_MODEL_REC_H
#define WD_RT_MODEL_REC_H

#include <jansson.h>
#include <stdbool.h>

#include "gateway/gateway.h"
#include "trace/recw.h"
#include "trace/trace.h"

struct rt_model_rec {
	const char *model; /* the agent's: gen_ai.request.model and route */
	const struct wd_complete_req *req;    /* the parameters sent */
	const struct wd_complete_resp *resp;  /* zeroed if the call failed */
	bool from_record;		      /* a replay answered from it */
	const char *prompt_hash, *prompt_ref; /* NULL: none */
	/* the call failed: its message (nothing of a response written) */
	const char *error;
	/* else: the model's response ({stop_reason, text, tool_calls});
	 * whole, or its summary for a hash_only agent */
	const json_t *response;
	bool hash_only;
	const char *response_ref, *output_hash; /* NULL: none */
	/* what rt_model_rec_payloads() points the fields above at */
	char ph[WD_TRACE_REF_LEN], pref[WD_TRACE_REF_LEN];
	char rref[WD_TRACE_REF_LEN], oh[72];
};

/* The model's response as the run keeps it: {stop_reason, text,
 * tool_calls[{id, name, arguments[, parse_error]}]}; a new reference. */
json_t *rt_model_response(const struct wd_complete_resp *resp);

/* The step's payloads into the store (t) and their hashes into m: the
 * prompt (NULL: none) as prompt_hash/prompt_ref; unless m->error, the
 * response *rj as response_ref, output_hash and m->response. *rj is
 * replaced by its redacted copy unless m->hash_only: the run goes on
 * with the response as its record keeps it (its conversation, its tool
 * calls, a replay's comparison with the original's record), as it did
 * when the JSON record, holding rj itself, redacted it in place; a
 * hash_only record holds a summary, and the run the response as sent. */
void rt_model_rec_payloads(struct wd_trace *t, const char *run_id,
			   struct rt_model_rec *m, const char *prompt,
			   json_t **rj);

/* The members of a model_call after wd_recw_begin(..., WD_REC_MODEL_CALL),
 * in the order readers and the hash chain have always seen: a value
 * jansson could not hold (a NULL string, a NaN) is left out, as
 * json_object_set_new left it out. */
void rt_model_call_w(struct wd_recw *w, const struct rt_model_rec *m);

#endif
