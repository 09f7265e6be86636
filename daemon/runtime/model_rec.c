#include "runtime/model_rec.h"

#include <math.h>
#include <string.h>

#include "common/util.h"

static void str_if(struct wd_recw *w, const char *k, const char *s)
{
	if (s)
		wd_recw_str(w, k, s);
}

static void real_if(struct wd_recw *w, const char *k, double d)
{
	if (isfinite(d))
		wd_recw_real(w, k, d);
}

void rt_model_call_w(struct wd_recw *w, const struct rt_model_rec *m)
{
	const struct wd_complete_req *req = m->req;
	const struct wd_complete_resp *resp = m->resp;
	str_if(w, "gen_ai.request.model", m->model);
	str_if(w, "gen_ai.response.model", resp->model);
	str_if(w, "gen_ai.provider.name", resp->provider);
	str_if(w, "gen_ai.response.id", resp->response_id);
	wd_recw_int(w, "gen_ai.usage.input_tokens",
		    (int64_t)resp->usage.input_tokens);
	wd_recw_int(w, "gen_ai.usage.output_tokens",
		    (int64_t)resp->usage.output_tokens);
	wd_recw_int(w, "cached_tokens", (int64_t)resp->usage.cached_tokens);
	real_if(w, "cost_usd", resp->cost_usd);
	wd_recw_bool(w, "priced", resp->priced);
	wd_recw_int(w, "latency_ms", (int64_t)(resp->latency_us / 1000));
	/* the parameters actually sent and the route (replay_defs.c) */
	wd_recw_obj_begin(w, "params");
	wd_recw_int(w, "max_tokens",
		    req->max_tokens ? (int)req->max_tokens : 4096);
	if (req->temperature >= 0)
		real_if(w, "temperature", req->temperature);
	if (req->seed_set)
		wd_recw_int(w, "seed", req->seed);
	wd_recw_obj_end(w);
	str_if(w, "route", m->model);
	str_if(w, "system_fingerprint", resp->system_fingerprint);
	if (m->from_record)
		wd_recw_bool(w, "from_record", true);
	str_if(w, "prompt_hash", m->prompt_hash);
	str_if(w, "prompt_ref", m->prompt_ref);
	wd_recw_arr_begin(w, "attempts");
	for (int i = 0; i < resp->n_attempts; i++) {
		const struct wd_attempt *x = &resp->attempts[i];
		wd_recw_obj_begin(w, NULL);
		wd_recw_str(w, "provider", x->provider);
		wd_recw_str(w, "model", x->model);
		wd_recw_int(w, "status", x->http_status);
		wd_recw_int(w, "latency_ms", (int64_t)(x->latency_us / 1000));
		if (x->error[0])
			wd_recw_str(w, "error", x->error);
		wd_recw_obj_end(w);
	}
	wd_recw_arr_end(w);
	if (m->error) {
		wd_recw_str(w, "error", m->error);
		return;
	}
	str_if(w, "response_ref", m->response_ref);
	/* what the model said and called, without the provider's per-call
	 * ids: compared by `warden trace diff` */
	str_if(w, "output_hash", m->output_hash);
	if (m->hash_only) {
		wd_recw_obj_begin(w, "response");
		wd_recw_str(w, "stop_reason",
			    wd_stop_reason_name(resp->stop_reason));
		wd_recw_int(w, "tool_calls", resp->n_tool_calls);
		wd_recw_obj_end(w);
	} else if (m->response) {
		wd_recw_json(w, "response", m->response);
	}
}

json_t *rt_model_response(const struct wd_complete_resp *resp)
{
	json_t *tcs = json_array();
	for (int i = 0; i < resp->n_tool_calls; i++) {
		const struct wd_tool_call *t = &resp->tool_calls[i];
		json_t *o =
		    json_pack("{s:s,s:s,s:O}", "id", t->id ? t->id : "", "name",
			      t->name ? t->name : "", "arguments",
			      t->arguments ? t->arguments : json_object());
		if (t->parse_error)
			json_object_set_new(o, "parse_error", json_true());
		json_array_append_new(tcs, o);
	}
	json_t *rj = json_pack("{s:s,s:s,s:O}", "stop_reason",
			       wd_stop_reason_name(resp->stop_reason), "text",
			       resp->text ? resp->text : "", "tool_calls", tcs);
	json_decref(tcs);
	return rj;
}

void rt_model_rec_payloads(struct wd_trace *t, const char *run_id,
			   struct rt_model_rec *m, const char *prompt,
			   json_t **rj)
{
	struct wd_err be = {0};
	if (prompt) {
		wd_trace_ref_redacted(t, prompt, strlen(prompt), m->ph);
		m->prompt_hash = m->ph;
		if (!wd_trace_put_blob(t, run_id, prompt, strlen(prompt),
				       m->pref, &be))
			m->prompt_ref = m->pref;
	}
	if (m->error)
		return;
	cleanup_free char *rtext = json_dumps(*rj, JSON_COMPACT);
	if (rtext &&
	    !wd_trace_put_blob(t, run_id, rtext, strlen(rtext), m->rref, &be))
		m->response_ref = m->rref;
	json_t *red = wd_trace_redacted_copy(t, *rj);
	if (red && !wd_rec_output_hash(red, m->oh))
		m->output_hash = m->oh;
	if (red && !m->hash_only) {
		json_decref(*rj);
		*rj = red;
	} else {
		json_decref(red);
	}
	m->response = *rj;
}
