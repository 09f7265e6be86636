/* The agent loop (seed 000 step 5): every bound checked every step, context
 * fitted to the budget, the model called through the gateway, tool calls
 * sent through the broker (concurrently), every step recorded. */
#include <math.h>
#include <string.h>

#include "common/log.h"
#include "events/stream.h"
#include "gateway/gateway.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

#define RESULT_CONTEXT_MAX 16384 /* bytes of one tool result in context */
#define MAX_PARALLEL	   16

static uint64_t active_now(struct wd_run *r)
{
	return r->active_ns + (wd_now_ns() - r->slice_start);
}

/* Rough token estimate for context fitting: 4 bytes per token. */
static long long msg_tokens(json_t *m)
{
	size_t n = 16;
	const char *t = json_string_value(json_object_get(m, "text"));
	if (t)
		n += strlen(t);
	json_t *tc = json_object_get(m, "tool_calls");
	if (json_array_size(tc)) {
		char *s = json_dumps(tc, JSON_COMPACT);
		n += s ? strlen(s) : 0;
		free(s);
	}
	return (long long)(n / 4);
}

static long long ctx_tokens(json_t *msgs)
{
	long long t = 0;
	size_t i;
	json_t *m;
	json_array_foreach(msgs, i, m) t += msg_tokens(m);
	return t;
}

/* Bring the serialized conversation and the token estimates up to date
 * with r->msgs: only the messages appended since the last call are
 * serialized (a step used to serialize the whole conversation, twice). */
static void conv_cache(struct wd_run *r)
{
	size_t n = json_array_size(r->msgs);
	if (r->pgen != r->msgs_gen || r->pn > n) {
		r->ptext.len = 0;
		r->pn = 0;
		r->ptok_sum = 0;
		r->pgen = r->msgs_gen;
	}
	if (r->pn == n && r->ptext.len)
		return;
	r->ptok = wd_realloc(r->ptok, (n ? n : 1) * sizeof(*r->ptok));
	if (!r->ptext.len)
		wd_buf_append(&r->ptext, "[", 1);
	for (size_t i = r->pn; i < n; i++) {
		json_t *m = json_array_get(r->msgs, i);
		char *s = json_dumps(m, JSON_COMPACT);
		if (i)
			wd_buf_append(&r->ptext, ",", 1);
		if (s)
			wd_buf_append(&r->ptext, s, strlen(s));
		free(s);
		r->ptok[i] = msg_tokens(m);
		r->ptok_sum += r->ptok[i];
	}
	r->pn = n;
}

/* The conversation as JSON text (what json_dumps(msgs, JSON_COMPACT)
 * gives), freshly allocated. */
static char *conv_text(struct wd_run *r)
{
	conv_cache(r);
	char *s = wd_malloc(r->ptext.len + 2);
	memcpy(s, r->ptext.data, r->ptext.len);
	memcpy(s + r->ptext.len, "]", 2);
	return s;
}

/* ctx_tokens(r->msgs), from the cache. */
static long long conv_tokens(struct wd_run *r)
{
	conv_cache(r);
	return r->ptok_sum;
}

static const char *role_of(json_t *m)
{
	return json_string_value(json_object_get(m, "role"));
}

/* Fit the conversation into context.budget_tokens: first externalise
 * older tool results to the trace (a blob; the message keeps a reference
 * the run's trace can resolve), then slide the window by dropping the
 * oldest whole turns (an assistant message with its tool results, so no
 * provider sees a tool result without its call). The system prompt and
 * the task stay. */
static void fit_context(struct wd_run *r)
{
	long long budget = r->agent->context_budget_tokens;
	if (budget <= 0 || conv_tokens(r) <= budget)
		return;
	/* what follows edits messages in place */
	r->msgs_gen++;
	/* the last turn (assistant + its results) is never touched */
	size_t n = json_array_size(r->msgs), last_asst = n;
	for (size_t i = n; i-- > 0;)
		if (!strcmp(role_of(json_array_get(r->msgs, i)), "assistant")) {
			last_asst = i;
			break;
		}
	int externalised = 0, dropped = 0;
	for (size_t i = 0; i < last_asst && ctx_tokens(r->msgs) > budget; i++) {
		json_t *m = json_array_get(r->msgs, i);
		if (strcmp(role_of(m), "tool") ||
		    json_is_true(json_object_get(m, "externalised")))
			continue;
		const char *t = json_string_value(json_object_get(m, "text"));
		size_t len = t ? strlen(t) : 0;
		if (len < 256)
			continue;
		char ref[WD_TRACE_REF_LEN];
		struct wd_err e = {0};
		if (wd_trace_put_blob(r->rt->trace, r->id, t, len, ref, &e))
			continue;
		cleanup_free char *note = wd_asprintf(
		    "[earlier result of %s (%zu bytes) moved out of the "
		    "context to the run's trace as %s]",
		    json_string_value(json_object_get(m, "tool_name")), len,
		    ref);
		json_object_set_new(m, "text", json_string(note));
		json_object_set_new(m, "externalised", json_true());
		json_object_set_new(m, "ref", json_string(ref));
		externalised++;
	}
	/* sliding window: drop the oldest turns after the task */
	while (ctx_tokens(r->msgs) > budget) {
		size_t first = 0;
		while (first < json_array_size(r->msgs) &&
		       strcmp(role_of(json_array_get(r->msgs, first)),
			      "assistant"))
			first++;
		n = json_array_size(r->msgs);
		if (first >= n)
			break;
		size_t end = first + 1;
		while (end < n &&
		       !strcmp(role_of(json_array_get(r->msgs, end)), "tool"))
			end++;
		if (end >= n) /* that is the last turn: keep it */
			break;
		for (size_t k = first; k < end; k++)
			json_array_remove(r->msgs, first);
		dropped++;
	}
	if (externalised || dropped) {
		json_t *rec = rt_rec_new(r, "context_fit");
		json_object_set_new(rec, "budget_tokens", json_integer(budget));
		json_object_set_new(rec, "estimated_tokens",
				    json_integer(ctx_tokens(r->msgs)));
		json_object_set_new(rec, "externalised",
				    json_integer(externalised));
		json_object_set_new(rec, "dropped_turns",
				    json_integer(dropped));
		rt_record(r, rec, false, NULL);
		json_decref(rec);
	}
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

struct conv {
	struct wd_msg *m;
	struct wd_tool_call **calls;
	int n;
};

static void conv_build(json_t *msgs, struct conv *c)
{
	c->n = (int)json_array_size(msgs);
	c->m = wd_calloc((size_t)c->n, sizeof(*c->m));
	c->calls = wd_calloc((size_t)c->n, sizeof(*c->calls));
	for (int i = 0; i < c->n; i++) {
		json_t *j = json_array_get(msgs, (size_t)i);
		const char *role = role_of(j);
		struct wd_msg *m = &c->m[i];
		m->text = json_string_value(json_object_get(j, "text"));
		if (!strcmp(role, "system"))
			m->role = WD_ROLE_SYSTEM;
		else if (!strcmp(role, "user"))
			m->role = WD_ROLE_USER;
		else if (!strcmp(role, "assistant")) {
			m->role = WD_ROLE_ASSISTANT;
			json_t *tc = json_object_get(j, "tool_calls");
			int k = (int)json_array_size(tc);
			c->calls[i] = wd_calloc((size_t)k, sizeof(**c->calls));
			for (int x = 0; x < k; x++) {
				json_t *t = json_array_get(tc, (size_t)x);
				c->calls[i][x].id = (char *)json_string_value(
				    json_object_get(t, "id"));
				c->calls[i][x].name = (char *)json_string_value(
				    json_object_get(t, "name"));
				c->calls[i][x].arguments =
				    json_object_get(t, "arguments");
			}
			m->tool_calls = c->calls[i];
			m->n_tool_calls = k;
		} else {
			m->role = WD_ROLE_TOOL;
			m->tool_call_id = json_string_value(
			    json_object_get(j, "tool_call_id"));
			m->tool_name =
			    json_string_value(json_object_get(j, "tool_name"));
			m->is_error =
			    json_is_true(json_object_get(j, "is_error"));
		}
	}
}

static void conv_free(struct conv *c)
{
	for (int i = 0; i < c->n; i++)
		free(c->calls[i]);
	free(c->calls);
	free(c->m);
}

static int model_step(struct wd_run *r, struct wd_err *err)
{
	const struct wd_agent_def *a = r->agent;
	struct conv c;
	conv_build(r->msgs, &c);
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
	uint64_t t0 = wd_now_ns();
	int rc = wd_gateway_complete(r->ps->gw, &req, &resp, err);
	r->ext_ns += wd_now_ns() - t0;
	r->model_calls++;
	conv_free(&c);
	rt_subagent_schemas_free(ts, nsub);
	free(ts);
	__atomic_add_fetch(&r->rt->m_model_calls, 1, __ATOMIC_RELAXED);

	/* record the call whatever happened */
	json_t *rec = rt_rec_new(r, "model_call");
	json_object_set_new(rec, "gen_ai.request.model", json_string(a->model));
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
	cleanup_free char *prompt = conv_text(r);
	if (prompt) {
		char ref[WD_TRACE_REF_LEN], h[WD_TRACE_REF_LEN];
		wd_trace_ref_of(prompt, strlen(prompt), h);
		json_object_set_new(rec, "prompt_hash", json_string(h));
		struct wd_err be = {0};
		if (!wd_trace_put_blob(r->rt->trace, r->id, prompt,
				       strlen(prompt), ref, &be))
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
	json_t *rj = NULL;
	if (!rc) {
		json_t *tcs = json_array();
		for (int i = 0; i < resp.n_tool_calls; i++) {
			struct wd_tool_call *t = &resp.tool_calls[i];
			json_t *o = json_pack(
			    "{s:s,s:s,s:O}", "id", t->id ? t->id : "", "name",
			    t->name ? t->name : "", "arguments",
			    t->arguments ? t->arguments : json_object());
			if (t->parse_error)
				json_object_set_new(o, "parse_error",
						    json_true());
			json_array_append_new(tcs, o);
		}
		rj = json_pack("{s:s,s:s,s:O}", "stop_reason",
			       wd_stop_reason_name(resp.stop_reason), "text",
			       resp.text ? resp.text : "", "tool_calls", tcs);
		json_decref(tcs);
		cleanup_free char *rtext = json_dumps(rj, JSON_COMPACT);
		char ref[WD_TRACE_REF_LEN];
		struct wd_err be = {0};
		if (rtext && !wd_trace_put_blob(r->rt->trace, r->id, rtext,
						strlen(rtext), ref, &be))
			json_object_set_new(rec, "response_ref",
					    json_string(ref));
		if (!a->hash_only)
			json_object_set(rec, "response", rj);
		else
			json_object_set_new(
			    rec, "response",
			    json_pack("{s:s,s:i}", "stop_reason",
				      wd_stop_reason_name(resp.stop_reason),
				      "tool_calls", resp.n_tool_calls));
	} else {
		json_object_set_new(rec, "error", json_string(err->msg));
	}
	struct wd_err re = {0};
	if (rt_record(r, rec, false, &re))
		wd_warn("run %s: model_call not recorded: %s", r->id, re.msg);
	json_decref(rec);

	if (rc) {
		wd_complete_resp_free(&resp);
		json_decref(rj);
		return rc;
	}
	r->in_tokens += resp.usage.input_tokens;
	r->out_tokens += resp.usage.output_tokens;
	r->cost += resp.cost_usd;

	/* the assistant turn joins the conversation as the model sent it */
	json_t *am = json_pack("{s:s,s:s,s:O}", "role", "assistant", "text",
			       resp.text ? resp.text : "", "tool_calls",
			       json_object_get(rj, "tool_calls"));
	json_array_append_new(r->msgs, am);
	if (resp.n_tool_calls == 0) {
		rt_finish(r, "ok", NULL, resp.text ? resp.text : "");
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
	return 0;
}

/* ---- tool calls ---- */

static const struct wd_manifest *tool_lookup(void *arg, const char *name)
{
	return wd_pset_tool(arg, name);
}

static int rec_hook(void *arg, json_t *rec, bool durable, struct wd_err *err)
{
	return rt_record(arg, rec, durable, err);
}

static void broker_run(struct wd_run *r, struct wd_broker_run *b)
{
	memset(b, 0, sizeof(*b));
	b->run_id = r->id;
	b->step = r->step;
	b->agent = r->agent->name;
	b->team = r->agent->team;
	b->granted = r->agent->tools;
	b->n_granted = r->agent->n_tools;
	b->user = r->caller.user;
	b->uid = r->caller.uid;
	b->gid = r->caller.gid;
	b->user_scopes = r->scopes;
	b->n_user_scopes = r->n_scopes;
	b->trace = r->rt->trace;
	b->hash_only = r->agent->hash_only;
	b->tool = tool_lookup;
	b->tool_arg = r->ps;
	b->events = r->rt->events;
	b->record = rec_hook;
	b->record_arg = r;
}

static void call_of(json_t *pc, struct wd_broker_call *c)
{
	c->call_id = json_string_value(json_object_get(pc, "id"));
	c->name = json_string_value(json_object_get(pc, "name"));
	c->args = json_object_get(pc, "arguments");
	c->parse_error = json_is_true(json_object_get(pc, "parse_error"));
}

static char *dup_key(json_t *pc)
{
	cleanup_free char *a = json_dumps(json_object_get(pc, "arguments"),
					  JSON_COMPACT | JSON_SORT_KEYS);
	return wd_asprintf("%s\x1f%s",
			   json_string_value(json_object_get(pc, "name")),
			   a ? a : "");
}

static const char *pstate(json_t *pc)
{
	return json_string_value(json_object_get(pc, "state"));
}

void rt_set_done(json_t *pc, const char *content, bool is_error)
{
	json_object_set_new(pc, "state", json_string("done"));
	json_object_set_new(pc, "content", json_string(content));
	json_object_set_new(pc, "is_error", json_boolean(is_error));
}

char *rt_content_for_model(struct wd_run *r, json_t *result)
{
	char *s = json_dumps(result, JSON_COMPACT);
	if (!s)
		return wd_strdup("{\"status\":\"error\"}");
	size_t n = strlen(s), cap = RESULT_CONTEXT_MAX;
	if (r->agent->context_budget_tokens > 0)
		cap = WD_MIN(cap, (size_t)r->agent->context_budget_tokens);
	cap = WD_MAX(cap, 1024);
	if (n <= cap)
		return s;
	char ref[WD_TRACE_REF_LEN] = "";
	struct wd_err e = {0};
	wd_trace_put_blob(r->rt->trace, r->id, s, n, ref, &e);
	/* cut on a UTF-8 boundary */
	size_t k = cap;
	while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
		k--;
	char *out = wd_asprintf("%.*s\n[truncated: the result is %zu bytes, "
				"only the first %zu are shown; the full result "
				"is stored in the trace as %s]",
				(int)k, s, n, k, ref[0] ? ref : "(not stored)");
	free(s);
	return out;
}

struct exec_job {
	struct wd_run *r;
	json_t *pc;
	struct wd_broker_run b;
	const struct wd_manifest *m;
	json_t *result;
	char status[24];
	int rc;
	struct wd_err err;
};

static void *exec_thread(void *arg)
{
	struct exec_job *j = arg;
	struct wd_broker_call c;
	call_of(j->pc, &c);
	j->rc = wd_broker_execute(&j->b, &c, j->m,
				  json_object_get(j->pc, "approval"),
				  &j->result, j->status, &j->err);
	return NULL;
}

/* Returns 1 when every call of the step is done, 0 when the run must
 * suspend on approvals, -errno (run failed, err set). */
static int tool_step(struct wd_run *r, struct wd_err *err)
{
	struct wd_rt *rt = r->rt;
	struct wd_broker_run b;
	broker_run(r, &b);
	size_t i, n = json_array_size(r->pending);
	json_t *pc;
	struct exec_job *jobs = wd_calloc(n, sizeof(*jobs));
	int nj = 0;

	/* Only this worker touches the run's calls while it runs, except
	 * a decision on a call registered as waiting (under rt->mu). */
	json_array_foreach(r->pending, i, pc)
	{
		const char *st = pstate(pc);
		if (strcmp(st, "new") && strcmp(st, "approved") &&
		    strcmp(st, "denied"))
			continue;
		struct wd_broker_call c;
		call_of(pc, &c);
		if (!strcmp(st, "denied")) {
			const char *why = json_string_value(
			    json_object_get(pc, "denied_reason"));
			cleanup_free char *msg = wd_asprintf(
			    "{\"status\":\"denied\",\"check\":\"approval\","
			    "\"error\":\"%s\"}",
			    why ? why : "approval denied");
			rt_set_done(pc, msg, true);
			continue;
		}
		bool approved = !strcmp(st, "approved");
		/* seed 000 step 7: the same (tool, args) again is answered,
		 * not executed */
		cleanup_free char *key = dup_key(pc);
		json_t *prev = json_object_get(r->done, key);
		if (prev && !approved) {
			cleanup_free char *msg = wd_asprintf(
			    "You already called %s with exactly these "
			    "arguments at step %d; it was not run again. The "
			    "earlier result: %s",
			    c.name,
			    (int)json_integer_value(
				json_object_get(prev, "step")),
			    json_string_value(
				json_object_get(prev, "content")));
			json_t *rec = rt_rec_new(r, "tool_result");
			json_object_set_new(rec, "gen_ai.tool.name",
					    json_string(c.name));
			json_object_set_new(rec, "gen_ai.tool.call.id",
					    json_string(c.call_id));
			json_object_set_new(rec, "status",
					    json_string("duplicate"));
			rt_record(r, rec, false, NULL);
			json_decref(rec);
			rt_set_done(pc, msg, false);
			continue;
		}
		if (rt_is_subagent_tool(c.name)) {
			/* a child run, on this thread, one at a time: each
			 * child is bounded by what the ones before it left */
			uint64_t ts0 = wd_now_ns();
			rt_subagent_call(r, pc);
			r->ext_ns += wd_now_ns() - ts0;
			json_object_set_new(
			    r->done, key,
			    json_pack("{s:i,s:O}", "step", r->step, "content",
				      json_object_get(pc, "content")));
			continue;
		}
		const struct wd_manifest *m = NULL;
		char check[16], reason[512];
		enum wd_broker_verdict v =
		    wd_broker_check(&b, &c, rt->rl, approved, &m, check, reason,
				    sizeof(reason));
		if (v == WD_BRK_DENIED || v == WD_BRK_INVALID) {
			__atomic_add_fetch(&rt->m_refusals, 1,
					   __ATOMIC_RELAXED);
			wd_broker_record_refusal(&b, &c, v, check, reason,
						 NULL);
			json_t *o = json_pack("{s:s,s:s,s:s}", "status",
					      wd_broker_verdict_name(v),
					      "check", check, "error", reason);
			cleanup_free char *msg = json_dumps(o, JSON_COMPACT);
			json_decref(o);
			rt_set_done(pc, msg, true);
			continue;
		}
		if (v == WD_BRK_APPROVAL && r->parent_id[0]) {
			/* a sub-agent's run is run by its parent's thread
			 * and cannot suspend: the call is refused */
			char why[700];
			snprintf(why, sizeof(why),
				 "%s; a sub-agent's run cannot wait for an "
				 "approval, so tools that need one are refused "
				 "here",
				 reason);
			__atomic_add_fetch(&rt->m_refusals, 1,
					   __ATOMIC_RELAXED);
			wd_broker_record_refusal(&b, &c, WD_BRK_DENIED,
						 "approval", why, NULL);
			json_t *o =
			    json_pack("{s:s,s:s,s:s}", "status", "denied",
				      "check", "approval", "error", why);
			cleanup_free char *msg = json_dumps(o, JSON_COMPACT);
			json_decref(o);
			rt_set_done(pc, msg, true);
			continue;
		}
		if (v == WD_BRK_APPROVAL) {
			char aid[24] = "ap_";
			wd_rand_hex(aid + 3, 16);
			uint64_t now = wd_wall_ns();
			json_t *ap = json_pack(
			    "{s:s,s:s,s:s,s:s,s:O,s:s,s:s,s:s,s:s,s:I,s:I}",
			    "id", aid, "run_id", r->id, "call_id", c.call_id,
			    "tool", c.name, "args", c.args, "reason", reason,
			    "agent", r->agent->name, "team", r->agent->team,
			    "user", r->caller.user, "created_ns",
			    (json_int_t)now, "expires_ns",
			    (json_int_t)(now +
					 (uint64_t)(rt->approval_ttl_s
							? rt->approval_ttl_s
							: r->agent
							      ->approval_ttl_s) *
					     1000000000ull));
			json_object_set(rt->approvals, aid, ap);
			json_object_set_new(pc, "state",
					    json_string("waiting"));
			json_object_set_new(pc, "approval_id",
					    json_string(aid));
			json_t *rec = rt_rec_new(r, "approval_request");
			json_object_set_new(rec, "approval_id",
					    json_string(aid));
			json_object_set_new(rec, "gen_ai.tool.name",
					    json_string(c.name));
			json_object_set_new(rec, "gen_ai.tool.call.id",
					    json_string(c.call_id));
			json_object_set_new(rec, "reason", json_string(reason));
			json_object_set_new(
			    rec, "expires_ns",
			    json_object_get(ap, "expires_ns")
				? json_copy(json_object_get(ap, "expires_ns"))
				: json_null());
			if (!r->agent->hash_only)
				json_object_set(rec, "args", c.args);
			/* on disk before anyone can decide it */
			rt_record(r, rec, true, NULL);
			json_decref(rec);
			pthread_mutex_lock(&rt->mu);
			json_object_set_new(pc, "approval_id",
					    json_string(aid));
			json_object_set_new(pc, "state",
					    json_string("waiting"));
			json_object_set(rt->approvals, aid, ap);
			pthread_mutex_unlock(&rt->mu);
			json_decref(ap);
			continue;
		}
		json_object_set_new(pc, "state", json_string("ready"));
		jobs[nj].r = r;
		jobs[nj].pc = pc;
		jobs[nj].b = b;
		jobs[nj].m = m;
		nj++;
	}

	/* parallel tool calls from one model response run concurrently */
	uint64_t t0 = wd_now_ns();
	pthread_t th[MAX_PARALLEL];
	bool started[MAX_PARALLEL] = {0};
	for (int base = 0; base < nj; base += MAX_PARALLEL) {
		int k = WD_MIN(nj - base, MAX_PARALLEL);
		for (int x = 0; x < k; x++) {
			if (k == 1) {
				exec_thread(&jobs[base + x]);
				continue;
			}
			started[x] = !pthread_create(&th[x], NULL, exec_thread,
						     &jobs[base + x]);
			if (!started[x])
				exec_thread(&jobs[base + x]);
		}
		for (int x = 0; x < k; x++)
			if (started[x]) {
				pthread_join(th[x], NULL);
				started[x] = false;
			}
	}
	r->ext_ns += wd_now_ns() - t0;
	__atomic_add_fetch(&rt->m_tool_calls, (uint64_t)nj, __ATOMIC_RELAXED);

	int ret = 1;
	pthread_mutex_lock(&rt->mu);
	for (int x = 0; x < nj; x++) {
		struct exec_job *j = &jobs[x];
		if (j->rc) {
			wd_err_set(err, j->rc,
				   "tool '%s' not run: its attempt could not "
				   "be recorded durably: %s",
				   j->m->name, j->err.msg);
			ret = j->rc;
			rt_set_done(j->pc, err->msg, true);
			continue;
		}
		json_t *den = json_object_get(j->result, "denials");
		__atomic_add_fetch(&rt->m_denials, json_array_size(den),
				   __ATOMIC_RELAXED);
		char *content = rt_content_for_model(r, j->result);
		bool is_err = strcmp(j->status, "ok") != 0;
		rt_set_done(j->pc, content, is_err);
		cleanup_free char *key = dup_key(j->pc);
		json_object_set_new(r->done, key,
				    json_pack("{s:i,s:s}", "step", r->step,
					      "content", content));
		free(content);
		json_decref(j->result);
	}
	if (ret == 1) {
		json_array_foreach(r->pending, i, pc)
		{
			if (strcmp(pstate(pc), "done"))
				ret = 0; /* waiting on a human */
		}
	}
	pthread_mutex_unlock(&rt->mu);
	free(jobs);
	return ret;
}

/* All calls answered: their results join the conversation in call order. */
static void close_step(struct wd_run *r)
{
	size_t i;
	json_t *pc;
	json_array_foreach(r->pending, i, pc)
	{
		json_array_append_new(
		    r->msgs,
		    json_pack("{s:s,s:O,s:O,s:O,s:O}", "role", "tool",
			      "tool_call_id", json_object_get(pc, "id"),
			      "tool_name", json_object_get(pc, "name"), "text",
			      json_object_get(pc, "content"), "is_error",
			      json_object_get(pc, "is_error")));
	}
	json_decref(r->pending);
	r->pending = NULL;
	r->step++;
	__atomic_add_fetch(&r->rt->m_steps, 1, __ATOMIC_RELAXED);
}

static void advance(struct wd_run *r);

/* Platform overhead = the slice's time minus time in the model and in
 * tools (the bench's "per step excluding model and tool time"). */
void rt_advance(struct wd_run *r)
{
	uint64_t t0 = wd_now_ns();
	r->ext_ns = 0;
	advance(r);
	uint64_t all = wd_now_ns() - t0;
	__atomic_add_fetch(&r->rt->m_overhead_ns,
			   all > r->ext_ns ? all - r->ext_ns : 0,
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
			int rc = tool_step(r, &err);
			if (rc < 0) {
				rt_finish(r, "failed", err.msg, NULL);
				return;
			}
			if (rc == 0) {
				/* suspend: no thread waits for the human */
				pthread_mutex_lock(&rt->mu);
				bool waiting = false;
				size_t i;
				json_t *pc;
				json_array_foreach(r->pending, i, pc) waiting |=
				    !strcmp(pstate(pc), "waiting");
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
			close_step(r);
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
		fit_context(r);
		int rc = model_step(r, &err);
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
