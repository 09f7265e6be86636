/* The agent loop (seed 000 step 5): every bound checked every step, context
 * fitted to the budget, the model called through the gateway, tool calls
 * sent through the broker (concurrently), every step recorded. */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "gateway/gateway.h"
#include "runtime/model_rec.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"
#include "trace/records.h"

static uint64_t active_now(struct wd_run *r)
{
	return r->active_ns + (wd_now_ns() - r->slice_start);
}

/* Check the four bounds against the run's effective limits, counting the
 * usage of its sub-agents' runs too (so the bounds hold over the whole
 * tree). Returns true (and fills bound/limit/used) when one is reached. */
static bool bound_hit(struct wd_run *r, const char **bound, double *limit,
		      double *used)
{
	const struct rt_limits *l = &r->lim;
	int steps = r->step + r->sub_steps;
	uint64_t tokens =
	    r->in_tokens + r->out_tokens + r->sub_in_tokens + r->sub_out_tokens;
	double cost = r->cost + r->sub_cost;
	if (l->max_steps > 0 && steps >= l->max_steps) {
		*bound = "max_steps";
		*limit = l->max_steps;
		*used = steps;
		return true;
	}
	if (l->token_budget > 0 && (long long)tokens >= l->token_budget) {
		*bound = "token_budget";
		*limit = (double)l->token_budget;
		*used = (double)tokens;
		return true;
	}
	double el = (double)active_now(r) / 1e9;
	if (l->wall_clock_s > 0 && el >= l->wall_clock_s) {
		*bound = "wall_clock_s";
		*limit = l->wall_clock_s;
		*used = el;
		return true;
	}
	if (l->cost_cap_usd > 0 && cost >= l->cost_cap_usd) {
		*bound = "cost_cap_usd";
		*limit = l->cost_cap_usd;
		*used = cost;
		return true;
	}
	return false;
}

static unsigned bound_bit(const char *bound)
{
	return !strcmp(bound, "max_steps")	? RT_B_STEPS
	       : !strcmp(bound, "token_budget") ? RT_B_TOKENS
	       : !strcmp(bound, "wall_clock_s") ? RT_B_WALL
						: RT_B_COST;
}

static void budget_stop(struct wd_run *r, const char *bound, double limit,
			double used)
{
	unsigned bit = bound_bit(bound);
	/* a sub-agent's limit may be its parent's remaining budget */
	bool inherited = (r->inherited & bit) != 0;
	/* how much of `used` the run's sub-agents spent */
	double by_sub = bit == RT_B_STEPS ? r->sub_steps
			: bit == RT_B_TOKENS
			    ? (double)(r->sub_in_tokens + r->sub_out_tokens)
			: bit == RT_B_COST ? r->sub_cost
					   : 0;
	json_t *rec = rt_rec_new(r, "budget_stop");
	json_object_set_new(rec, "bound", json_string(bound));
	json_object_set_new(rec, "limit", json_real(limit));
	json_object_set_new(rec, "used", json_real(used));
	if (by_sub > 0)
		json_object_set_new(rec, "used_by_subagents",
				    json_real(by_sub));
	if (inherited) {
		json_object_set_new(rec, "inherited", json_true());
		json_object_set_new(rec, "parent_run_id",
				    json_string(r->parent_id));
	}
	rt_record(r, rec, false, NULL);
	json_decref(rec);
	cleanup_free char *sub =
	    by_sub > 0 ? wd_asprintf("; %g of it by sub-agent runs", by_sub)
		       : wd_strdup("");
	cleanup_free char *why =
	    inherited ? wd_asprintf("%s reached (limit %g, used %g%s; the "
				    "limit is what remained of parent run "
				    "%s's budget)",
				    bound, limit, used, sub, r->parent_id)
		      : wd_asprintf("%s reached (limit %g, used %g%s)", bound,
				    limit, used, sub);
	snprintf(r->stop_bound, sizeof(r->stop_bound), "%s", bound);
	rt_finish(r, "stopped", why, NULL);
}

/* ---- model call ---- */

/* The answer as the user sees it: a reply cut at max_tokens or paused
 * (pause_turn) and then continued is one answer over several assistant
 * messages; join them. `last` is the text of the final one. */
static char *joined_answer(struct wd_run *r, const char *last)
{
	size_t n = json_array_size(r->msgs), i = n ? n - 1 : 0;
	struct wd_buf b = {0};
	/* r->msgs[n-1] is the final assistant message (text `last`) */
	while (i >= 1) {
		json_t *p = json_array_get(r->msgs, i - 1);
		const char *role =
		    json_string_value(json_object_get(p, "role"));
		if (!strcmp(role, "user") &&
		    json_is_true(json_object_get(p, "continuation")) && i >= 2)
			i -= 2;
		else if (!strcmp(role, "assistant") &&
			 json_is_true(json_object_get(p, "paused")))
			i -= 1;
		else
			break;
	}
	for (size_t k = i; k + 1 < n; k++) {
		json_t *m = json_array_get(r->msgs, k);
		const char *t = json_string_value(json_object_get(m, "text"));
		if (t && !strcmp(json_string_value(json_object_get(m, "role")),
				 "assistant"))
			wd_buf_append(&b, t, strlen(t));
	}
	wd_buf_append(&b, last ? last : "", strlen(last ? last : ""));
	wd_buf_append(&b, "", 1);
	return b.data;
}

/* Context overflow (the provider's stop reason or error): fit the
 * conversation to half of what overflowed and call once more. false:
 * that was done already for this overflow (the run ends
 * context_exceeded). */
static bool refit_once(struct wd_run *r)
{
	if (r->ctx_refit)
		return false;
	r->ctx_refit = true;
	cleanup_free char *all = rt_conv_text(r);
	long long est = (long long)(strlen(all) / 4);
	r->ctx_cut = WD_MAX(est / 2, 256);
	rt_fit_context(r);
	return true;
}

/* 0: the model answered (r->pending holds its tool calls, or the run
 * finished with its text or its stop reason's outcome); 1: the run was
 * finished here (its model_call could not be recorded); 2: call the model
 * again (an answer cut at max_tokens, a paused turn, a refitted
 * context); -errno: the call failed (err). */
static int model_step(struct wd_run *r, struct wd_err *err)
{
	const struct wd_agent_def *a = r->agent;
	struct rt_conv c;
	rt_conv_build(r->msgs, &c);
	struct wd_tool_schema *ts =
	    wd_calloc((size_t)(a->n_tools + a->n_subagents) + 1, sizeof(*ts));
	int nsub = rt_subagent_schemas(r, ts);
	int nts = nsub;
	for (int i = 0; i < a->n_tools; i++) {
		const struct wd_manifest *m = wd_pset_tool(r->ps, a->tools[i]);
		if (!m)
			continue;
		ts[nts].name = m->name;
		ts[nts].description = m->description;
		ts[nts].parameters_json = m->args_schema;
		nts++;
	}
	uint64_t deadline = 0;
	if (r->lim.wall_clock_s > 0) {
		double left = r->lim.wall_clock_s - (double)active_now(r) / 1e9;
		deadline = wd_now_ns() + (uint64_t)(WD_MAX(left, 0.001) * 1e9);
	}
	struct wd_complete_req req = {
	    .model = a->model,
	    .msgs = c.m,
	    .n_msgs = c.n,
	    .tools = ts,
	    .n_tools = nts,
	    .temperature = a->temperature,
	    .attr = {.team = a->team,
		     .agent = a->name,
		     .run_id = r->id,
		     .user = r->caller.user},
	    .deadline_ns = deadline,
	};
	struct wd_complete_resp resp;
	memset(&resp, 0, sizeof(resp));
	/* a replay may pin the seed or answer from the record (replay.c) */
	int rc = r->replay ? rt_replay_model(r, &req, &resp, err) : 0;
	bool from_record = rc == 1;
	if (rc == 0) {
		uint64_t t0 = wd_now_ns();
		if (!r->step_t0_ns)
			r->step_t0_ns = t0;
		rc = wd_gateway_complete(r->ps->gw, &req, &resp, err);
		uint64_t dt = wd_now_ns() - t0;
		rt_slice_ext(dt);
		r->model_calls++;
		const char *outcome = rc ? "error" : "ok";
		rt_m_add(r, WD_M_MODEL_CALLS, 1, outcome, NULL, NULL);
		rt_m_observe(r, WD_M_MODEL_SECONDS, (double)dt / 1e9, outcome,
			     NULL);
	} else if (rc == 1) {
		rc = 0;
	}
	rt_conv_free(&c);
	rt_subagent_schemas_free(ts, nsub);
	free(ts);

	/* record the call whatever happened (model_rec.c: typed, straight
	 * into the store's buffer) */
	struct rt_model_rec mr = {.model = a->model,
				  .req = &req,
				  .resp = &resp,
				  .from_record = from_record,
				  .hash_only = a->hash_only};
	if (rc)
		mr.error = err->msg;
	json_t *rj = rc ? NULL : rt_model_response(&resp);
	cleanup_free char *prompt = rt_conv_text(r);
	rt_model_rec_payloads(r->rt->trace, r->id, &mr, prompt, &rj);
	struct wd_recw *w =
	    wd_recw_begin(r->rt->trace, r->id, r->step, WD_REC_MODEL_CALL);
	rt_model_call_w(w, &mr);
	struct wd_err re = {0};
	int rrc = rt_record_w(r, w, false, NULL, &re);
	wd_recw_end(w);

	if (rc) {
		if (rrc)
			wd_warn("run %s: model_call not recorded: %s", r->id,
				re.msg);
		wd_complete_resp_free(&resp);
		json_decref(rj);
		return rc;
	}
	/* under rt->mu: the API's views read a run's usage while it runs */
	pthread_mutex_lock(&r->rt->mu);
	r->in_tokens += resp.usage.input_tokens;
	r->cached_tokens += resp.usage.cached_tokens;
	r->out_tokens += resp.usage.output_tokens;
	r->cost += resp.cost_usd;
	pthread_mutex_unlock(&r->rt->mu);
	if (rrc && !a->unrecorded_read_only) {
		/* fail closed (issue 5): no tool runs after a step the
		 * trace could not keep. A failure the store finds later, at
		 * its group commit, stops the next tool at its attempt. */
		cleanup_free char *why =
		    wd_asprintf("model_call could not be recorded in the "
				"trace (the agent has "
				"trace.unrecorded_read_only: refuse): %s",
				re.msg);
		wd_complete_resp_free(&resp);
		json_decref(rj);
		rt_finish(r, "failed", why, NULL);
		return 1;
	}
	if (rrc)
		wd_warn(
		    "run %s: model_call not recorded (%s); the agent allows "
		    "trace.unrecorded_read_only: going on",
		    r->id, re.msg);

	/* a replay compares the response with the original's and applies
	 * its --args patches (the record above keeps what the model said) */
	if (r->replay) {
		if (resp.system_fingerprint)
			json_object_set_new(
			    rj, "system_fingerprint",
			    json_string(resp.system_fingerprint));
		rt_replay_after_model(r, rj);
	}
	/* Every stop reason has its outcome (README "Model gateway"): a
	 * response without tool calls is an answer only when the model
	 * ended its turn. */
	const char *text = resp.text ? resp.text : "";
	enum wd_stop_reason sr = resp.stop_reason;
	int out = 0;
	if (sr == WD_STOP_CONTEXT) {
		/* the context window filled up: the reply is cut off and
		 * does not join the conversation */
		if (refit_once(r))
			out = 2;
		else
			rt_finish(r, "context_exceeded",
				  "the conversation filled the model's context "
				  "window (stop_reason "
				  "model_context_window_exceeded), also after "
				  "fitting it to half its size",
				  NULL);
		json_decref(rj);
		wd_complete_resp_free(&resp);
		return out;
	}
	r->ctx_refit = false;
	/* the assistant turn joins the conversation as the model sent it */
	json_t *am =
	    json_pack("{s:s,s:s,s:O}", "role", "assistant", "text", text,
		      "tool_calls", json_object_get(rj, "tool_calls"));
	if (sr == WD_STOP_PAUSE && resp.n_tool_calls == 0)
		json_object_set_new(am, "paused", json_true());
	json_array_append_new(r->msgs, am);
	if (resp.n_tool_calls && sr == WD_STOP_MAX_TOKENS) {
		/* a tool call cut at max_tokens: its arguments may be
		 * incomplete (Anthropic: retry with a higher max_tokens);
		 * it is never run, and asking again with the same limit
		 * would cut it again */
		cleanup_free char *why = wd_asprintf(
		    "the model's tool call was cut at max_tokens (%s stop "
		    "reason '%s'): its arguments may be incomplete, so it was "
		    "not run; raise the agent's max_tokens",
		    resp.provider ? resp.provider : "provider",
		    resp.stop_raw ? resp.stop_raw : "");
		rt_finish(r, "truncated", why, text);
	} else if (sr == WD_STOP_REFUSAL) {
		cleanup_free char *why = wd_asprintf(
		    "the model refused (%s stop reason '%s'%s%s): %s",
		    resp.provider ? resp.provider : "provider",
		    resp.stop_raw ? resp.stop_raw : "",
		    resp.stop_detail ? ", " : "",
		    resp.stop_detail ? resp.stop_detail : "",
		    *text ? text : "(no text)");
		rt_finish(r, "refused", why, text);
	} else if (resp.n_tool_calls == 0 && sr == WD_STOP_PAUSE) {
		/* pause_turn: the turn goes back as it is and the model
		 * carries on from there */
		rt_close_step(r);
		out = 2;
	} else if (resp.n_tool_calls == 0 && sr == WD_STOP_MAX_TOKENS) {
		/* cut at max_tokens: ask the model to go on while the
		 * run's bounds allow one more step; else the run ends
		 * truncated (never "ok" with half an answer) */
		const char *bound;
		double limit, used;
		rt_close_step(r);
		if (bound_hit(r, &bound, &limit, &used)) {
			cleanup_free char *all = joined_answer(r, text);
			cleanup_free char *why = wd_asprintf(
			    "the answer was cut at max_tokens and %s (limit "
			    "%g, used %g) leaves no room to continue",
			    bound, limit, used);
			rt_finish(r, "truncated", why, all);
		} else {
			json_array_append_new(
			    r->msgs,
			    json_pack("{s:s,s:s,s:b}", "role", "user", "text",
				      "Your previous answer was cut off at "
				      "the output token limit. Continue "
				      "exactly where it stopped.",
				      "continuation", true));
			out = 2;
		}
	} else if (resp.n_tool_calls == 0 && sr == WD_STOP_OTHER) {
		cleanup_free char *why = wd_asprintf(
		    "the model stopped for a reason warden does not know "
		    "(%s stop reason '%s')",
		    resp.provider ? resp.provider : "provider",
		    resp.stop_raw ? resp.stop_raw : "");
		rt_finish(r, "failed", why, text);
	} else if (resp.n_tool_calls == 0) {
		cleanup_free char *all = joined_answer(r, text);
		rt_finish(r, "ok", NULL, all);
	} else {
		json_t *p = json_array();
		size_t i;
		json_t *t;
		json_array_foreach(json_object_get(rj, "tool_calls"), i, t)
		{
			json_t *pc = json_deep_copy(t);
			json_object_set_new(pc, "state", json_string("new"));
			json_array_append_new(p, pc);
		}
		json_decref(r->pending);
		r->pending = p;
	}
	json_decref(rj);
	wd_complete_resp_free(&resp);
	return out;
}

/* ---- the fleet's fence ---- */

/* How long one question to the hook may wait for the lease's renewal
 * (the stop and the wall clock are looked at between questions). */
#define FENCE_WAIT_NS 250000000ull

int rt_fence(struct wd_run *r, bool side_effects, struct wd_err *err)
{
	if (!r->fenced)
		return 0;
	struct wd_rt *rt = r->rt;
	bool said = false;
	int rc = 0;
	for (;;) {
		char why[256] = "";
		enum wd_rt_fence v = WD_RT_FENCE_LOST;
		pthread_rwlock_rdlock(&rt->fence_mu);
		if (rt->fence)
			v = rt->fence(rt->fence_arg, r->fence_id,
				      side_effects ? FENCE_WAIT_NS : 0, why,
				      sizeof(why));
		else
			snprintf(why, sizeof(why),
				 "this node's fleet connection is closed (the "
				 "fleet has the run interrupted)");
		pthread_rwlock_unlock(&rt->fence_mu);
		if (v == WD_RT_FENCE_OK ||
		    (v == WD_RT_FENCE_UNSURE && !side_effects))
			break;
		if (v == WD_RT_FENCE_LOST) {
			rc =
			    wd_err_set(err, -ESTALE,
				       "its fleet lease was lost (%s); another "
				       "node may have the run: nothing more "
				       "of it runs here",
				       why);
			break;
		}
		/* uncertain: a side effect waits for the lease's renewal or
		 * the verdict; the run's wall clock bounds the wait */
		if (!said)
			wd_warn("run %s: a tool with side effects waits: this "
				"node's fleet lease is not certain (%s)",
				r->id, why);
		said = true;
		pthread_mutex_lock(&rt->mu);
		bool stop = rt->stopping;
		pthread_mutex_unlock(&rt->mu);
		if (stop) {
			rc = wd_err_set(err, -ECANCELED,
					"wardend stopping while the run waited "
					"for its fleet lease to be renewed "
					"before a tool with side effects");
			break;
		}
		if (r->lim.wall_clock_s > 0 &&
		    (double)active_now(r) / 1e9 >= r->lim.wall_clock_s) {
			rc =
			    wd_err_set(err, -ETIME,
				       "wall_clock_s reached while waiting for "
				       "the fleet lease to be renewed");
			break;
		}
	}
	/* (the wait is in the tool step's time: not platform overhead) */
	if (said && !rc)
		wd_info("run %s: fleet lease renewed; its tools go on", r->id);
	return rc;
}

static void advance(struct wd_run *r);

/* The current slice's model and tool time on this thread. Not in the
 * run: a slice that parks its run (suspended, waiting on an approval)
 * hands it to whichever worker the decision wakes, which may start the
 * next slice before this one has taken its figure (a race TSan saw in the
 * approval storm). A sub-agent's slice nests inside its parent's tool
 * step on the same thread: rt_advance keeps the outer figure aside. */
static __thread uint64_t slice_ext_ns;

void rt_slice_ext(uint64_t ns)
{
	slice_ext_ns += ns;
}

/* Platform overhead = the slice's time minus time in the model and in
 * tools (the bench's "per step excluding model and tool time"). */
void rt_advance(struct wd_run *r)
{
	struct wd_rt *rt = r->rt;
	uint64_t outer = slice_ext_ns;
	slice_ext_ns = 0;
	uint64_t t0 = wd_now_ns();
	advance(r);
	uint64_t all = wd_now_ns() - t0, ext = slice_ext_ns;
	slice_ext_ns = outer;
	__atomic_add_fetch(&rt->m_overhead_ns, all > ext ? all - ext : 0,
			   __ATOMIC_RELAXED);
}

static void advance(struct wd_run *r)
{
	struct wd_rt *rt = r->rt;
	r->slice_start = wd_now_ns();
	for (;;) {
		struct wd_err err = {0};
		/* daemon stopping: park the run between steps; the next
		 * start resumes it from its snapshot */
		pthread_mutex_lock(&rt->mu);
		if (rt->stopping && r->parent_id[0]) {
			/* a sub-agent's run lives inside its parent's step:
			 * it ends; the parent is parked with its result */
			pthread_mutex_unlock(&rt->mu);
			rt_finish(r, "interrupted",
				  "wardend stopping: the sub-agent's run was "
				  "ended between steps",
				  NULL);
			return;
		}
		if (rt->stopping) {
			r->active_ns += wd_now_ns() - r->slice_start;
			r->state = R_SUSPENDED;
			rt_save_snapshot(r);
			pthread_mutex_unlock(&rt->mu);
			return;
		}
		pthread_mutex_unlock(&rt->mu);
		if (r->pending) {
			r->fence_rc = 0;
			int rc = rt_tool_step(r, &err);
			if (rc < 0 && r->fence_rc == -ETIME) {
				budget_stop(r, "wall_clock_s",
					    r->lim.wall_clock_s,
					    (double)active_now(r) / 1e9);
				return;
			}
			if (rc < 0) {
				/* the fence's verdicts end it interrupted */
				rt_finish(
				    r, r->fence_rc ? "interrupted" : "failed",
				    err.msg, NULL);
				return;
			}
			if (rc == 0) {
				/* suspend: no thread waits for the human */
				pthread_mutex_lock(&rt->mu);
				bool waiting = false;
				size_t i;
				json_t *pc;
				json_array_foreach(r->pending, i, pc) waiting |=
				    !strcmp(rt_pstate(pc), "waiting");
				if (waiting) {
					r->active_ns +=
					    wd_now_ns() - r->slice_start;
					r->state = R_SUSPENDED;
					rt_save_snapshot(r);
					pthread_mutex_unlock(&rt->mu);
					return;
				}
				/* decided while we were busy: go on */
				pthread_mutex_unlock(&rt->mu);
				continue;
			}
			rt_close_step(r);
			/* back to the top: a stop requested during the tool
			 * calls (e.g. one that ended a sub-agent's run as
			 * interrupted) parks the run before its next model
			 * call */
			continue;
		}
		const char *bound;
		double limit, used;
		if (bound_hit(r, &bound, &limit, &used)) {
			budget_stop(r, bound, limit, used);
			return;
		}
		/* a fleet run its node lost goes no further: another node
		 * may hold it (an uncertain lease lets it go on: the model
		 * call changes nothing in the world) */
		if (rt_fence(r, false, &err)) {
			rt_finish(r, "interrupted", err.msg, NULL);
			return;
		}
		rt_fit_context(r);
		int rc = model_step(r, &err);
		if (rc == 2)
			continue; /* continue the answer / the turn */
		if (rc > 0)
			return; /* finished: the step could not be recorded */
		if (rc == -E2BIG) {
			/* the provider said the prompt is over its context
			 * window */
			if (refit_once(r))
				continue;
			cleanup_free char *why = wd_asprintf(
			    "the conversation is over the model's context "
			    "window, also after fitting it to half its size: "
			    "%s",
			    err.msg);
			rt_finish(r, "context_exceeded", why, NULL);
			return;
		}
		if (rc == -ETIMEDOUT && r->lim.wall_clock_s > 0) {
			budget_stop(r, "wall_clock_s", r->lim.wall_clock_s,
				    (double)active_now(r) / 1e9);
			return;
		}
		if (rc) {
			cleanup_free char *why =
			    wd_asprintf("model call failed: %s", err.msg);
			rt_finish(r, "failed", why, NULL);
			return;
		}
		if (!r->pending)
			return; /* finished with the model's answer */
	}
}
