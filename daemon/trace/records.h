/* One typed table of trace record types (DESIGN.md §4 "Trace records"):
 * each type's name, the fields it carries beyond the common ones (seq, ts,
 * prev, run_id, step, type) and who reads it. Readers switch on
 * wd_rec_type_of() instead of comparing strings, so a new type (replay
 * added several) is one row here, not an edit in every reader. */
#ifndef WD_TRACE_RECORDS_H
#define WD_TRACE_RECORDS_H

#include <jansson.h>

enum wd_rec_type {
	WD_REC_UNKNOWN = 0, /* a type this build does not know (kept as is) */
	WD_REC_RUN_START,
	WD_REC_MODEL_CALL,
	WD_REC_TOOL_ATTEMPT,
	WD_REC_TOOL_RESULT,
	WD_REC_DENIAL,
	WD_REC_APPROVAL_REQUEST,
	WD_REC_APPROVAL_DECISION,
	WD_REC_BUDGET_STOP,
	WD_REC_CONTEXT_FIT,
	WD_REC_RUN_END,
	WD_REC_FLAG,
	WD_REC_GC,
	WD_REC_REPLAY_STEP,	  /* a step taken from the original's record */
	WD_REC_REPLAY_REFUSED,	  /* a call the broker would not run */
	WD_REC_REPLAY_DIVERGENCE, /* first difference from the original */
	WD_REC_PAYLOAD_READ,	  /* who read which payloads through wardend */
	WD_REC__COUNT,
};

struct wd_rec_desc {
	enum wd_rec_type type;
	const char *name;
	const char *fields;  /* the type's own fields, for readers and docs */
	const char *readers; /* who reads it */
};

/* The row of a type name (WD_REC_UNKNOWN's row for NULL/unknown). */
const struct wd_rec_desc *wd_rec_desc_of(const char *name);
enum wd_rec_type wd_rec_type_of(const char *name);
/* The type of a record (its "type" field). */
enum wd_rec_type wd_rec_type_json(const json_t *rec);
const char *wd_rec_type_name(enum wd_rec_type t);

/* A model_call's `output_hash`: sha256 of the model's output with what the
 * provider makes up per call left out, i.e. of the canonical JSON
 * {"text": ..., "tool_calls": [{"name": ..., "arguments": ...}...]} (keys
 * sorted, compact; no stop reason, no tool-call ids such as toolu_... or
 * call_...). Two answers that say and call the same get the same hash
 * (`warden trace diff`). `response` is a model_call's full response
 * ({stop_reason, text, tool_calls[{id, name, arguments}]}); 0, or -EINVAL
 * when it has no text (a hash_only record's summary). out: "sha256:<hex>". */
int wd_rec_output_hash(const json_t *response, char out[72]);

#endif
