#include "trace/records.h"
#include "trace/trace.h"

#include <string.h>

static const struct wd_rec_desc table[WD_REC__COUNT] = {
    [WD_REC_UNKNOWN] = {WD_REC_UNKNOWN, "?", "", "kept as is by every reader"},
    [WD_REC_RUN_START] =
	{WD_REC_RUN_START, "run_start",
	 "agent, team, user, uid, gen_ai.request.model, "
	 "trace{}, bounds{}, tools[], task, definitions{agent, "
	 "tools{}, scopes, route}, replay_of{}",
	 "index, otlp, trace show, warden run, replay"},
    [WD_REC_MODEL_CALL] = {WD_REC_MODEL_CALL, "model_call",
			   "gen_ai.request.model, gen_ai.response.model, "
			   "gen_ai.provider.name, gen_ai.response.id, "
			   "gen_ai.usage.input_tokens, "
			   "gen_ai.usage.output_tokens, cached_tokens, "
			   "cost_usd, priced, latency_ms, params{max_tokens, "
			   "temperature, seed}, route, system_fingerprint, "
			   "from_record, prompt_hash, prompt_ref, "
			   "attempts[{provider, model, status, latency_ms, "
			   "error}], response_ref, output_hash, response | "
			   "error (written by runtime/model_rec.c)",
			   "index, otlp, trace show, warden run, replay"},
    [WD_REC_TOOL_ATTEMPT] = {WD_REC_TOOL_ATTEMPT, "tool_attempt",
			     "gen_ai.tool.name, gen_ai.tool.call.id, "
			     "side_effects, args | args_ref, approval",
			     "index, trace show, warden run, recover, replay"},
    [WD_REC_TOOL_RESULT] = {WD_REC_TOOL_RESULT, "tool_result",
			    "gen_ai.tool.name, gen_ai.tool.call.id, status, "
			    "result_hash, result_ref, exit_code, latency_ms, "
			    "replay",
			    "index, trace show, warden run, replay"},
    [WD_REC_DENIAL] = {WD_REC_DENIAL, "denial",
		       "gen_ai.tool.name, call_id, "
		       "event{}",
		       "index, trace show, warden run"},
    [WD_REC_APPROVAL_REQUEST] = {WD_REC_APPROVAL_REQUEST, "approval_request",
				 "approval_id, gen_ai.tool.name, reason, "
				 "expires_ns, args",
				 "trace show, warden run, recover"},
    [WD_REC_APPROVAL_DECISION] = {WD_REC_APPROVAL_DECISION, "approval_decision",
				  "approval_id, decision, by, reason",
				  "trace show, warden run, recover"},
    [WD_REC_BUDGET_STOP] = {WD_REC_BUDGET_STOP, "budget_stop",
			    "bound, limit, used, used_by_subagents, inherited",
			    "trace show, warden run"},
    [WD_REC_CONTEXT_FIT] = {WD_REC_CONTEXT_FIT, "context_fit",
			    "budget_tokens, estimated_tokens, externalised, "
			    "dropped_turns",
			    "trace show"},
    [WD_REC_RUN_END] = {WD_REC_RUN_END, "run_end",
			"status, reason, steps, cost_usd, total{}, output, "
			"replay{}",
			"index, otlp, trace show, warden run, replay"},
    [WD_REC_FLAG] = {WD_REC_FLAG, "flag", "reason", "index, gc"},
    [WD_REC_GC] = {WD_REC_GC, "gc", "refs[] | segments[], reason",
		   "index, verify, trace show"},
    [WD_REC_REPLAY_STEP] = {WD_REC_REPLAY_STEP, "replay_step",
			    "of_run_id, of_seq, prompt_hash, response_ref, "
			    "results[]",
			    "trace show, warden replay"},
    [WD_REC_REPLAY_REFUSED] = {WD_REC_REPLAY_REFUSED, "replay_refused",
			       "gen_ai.tool.name, gen_ai.tool.call.id, "
			       "side_effects, reason",
			       "trace show, warden replay"},
    [WD_REC_REPLAY_DIVERGENCE] = {WD_REC_REPLAY_DIVERGENCE, "replay_divergence",
				  "kind (different|missing|extra), what "
				  "(tool|arguments|text|prompt), recorded, "
				  "replay, message",
				  "trace show, warden replay"},
    [WD_REC_PAYLOAD_READ] = {WD_REC_PAYLOAD_READ, "payload_read",
			     "reader, uid, access, payload_type, "
			     "read[{seq, field, hash}]",
			     "trace show, trace html"},
};

const struct wd_rec_desc *wd_rec_desc_of(const char *name)
{
	if (name)
		for (int i = 1; i < WD_REC__COUNT; i++)
			if (!strcmp(table[i].name, name))
				return &table[i];
	return &table[WD_REC_UNKNOWN];
}

enum wd_rec_type wd_rec_type_of(const char *name)
{
	return wd_rec_desc_of(name)->type;
}

enum wd_rec_type wd_rec_type_json(const json_t *rec)
{
	return wd_rec_type_of(
	    json_string_value(json_object_get((json_t *)rec, "type")));
}

const char *wd_rec_type_name(enum wd_rec_type t)
{
	return t > 0 && t < WD_REC__COUNT ? table[t].name : NULL;
}

int wd_rec_output_hash(const json_t *response, char out[72])
{
	json_t *text = json_object_get(response, "text");
	if (!json_is_string(text))
		return -EINVAL;
	json_t *calls = json_array();
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(response, "tool_calls"), i, c)
	{
		json_t *a = json_object_get(c, "arguments");
		json_array_append_new(
		    calls, json_pack("{s:O,s:O}", "name",
				     json_object_get(c, "name") ?: json_null(),
				     "arguments", a ? a : json_null()));
	}
	json_t *o = json_pack("{s:O,s:o}", "text", text, "tool_calls", calls);
	char *t = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (!t)
		return -ENOMEM;
	wd_trace_ref_of(t, strlen(t), out);
	free(t);
	return 0;
}
