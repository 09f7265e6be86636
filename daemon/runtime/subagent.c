/* Sub-agents (issue #6): an agent definition's `subagents: [name, ...]`
 * are offered to its model as tools named "agent__<name>" taking
 * {task: string}. A call starts a child run of that agent:
 *
 *   checks   grant (the name is in the caller's `subagents`), schema,
 *            authz (the same user may run agents), depth
 *            (WD_SUBAGENT_MAX_DEPTH), budget (something remains)
 *   bounds   each of the four is the minimum of the child's definition
 *            and what remains of the parent's at that moment (steps: the
 *            parent's step cap minus its model calls so far, its current
 *            one included, and its earlier sub-agents' model calls);
 *            the ones taken from the parent are listed in the child's
 *            run_start (bounds_inherited) and named in its budget_stop
 *   identity the parent's user (uid, scopes); the child's tool calls go
 *            through the broker with the CHILD's grants, so it never has
 *            more authority than the user or its own definition
 *   run      on the parent's thread, inside the parent's tool step (the
 *            parent's wall clock keeps running), one child at a time so
 *            each is bounded by what the ones before it left; a child
 *            cannot suspend on an approval (such calls are refused)
 *   charge   the child's usage, with its own descendants' (model calls as
 *            steps, tokens, cost), is added to the parent's sub_* totals,
 *            which the parent's bounds are checked against
 *   trace    the parent records tool_attempt / tool_result with
 *            `subagent` and `child_run_id`; the child's run_start and
 *            run_end carry parent_run_id and parent_step
 *
 * The child's output (or status and reason: which bound stopped it) is
 * the call's result for the parent's model. */
#include <string.h>

#include "broker/schema.h"
#include "common/log.h"
#include "gateway/gateway.h"
#include "policy/agent.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

#define PREVIEW_MAX 512

static const char task_schema[] =
    "{\"type\":\"object\",\"required\":[\"task\"],"
    "\"additionalProperties\":false,\"properties\":{\"task\":{\"type\":"
    "\"string\",\"minLength\":1,\"maxLength\":100000,\"description\":"
    "\"The task for the sub-agent, self-contained: it sees nothing of "
    "this conversation.\"}}}";

bool rt_is_subagent_tool(const char *name)
{
	return name && !strncmp(name, WD_SUBAGENT_TOOL_PREFIX,
				strlen(WD_SUBAGENT_TOOL_PREFIX));
}

int rt_subagent_schemas(struct wd_run *r, struct wd_tool_schema *ts)
{
	const struct wd_agent_def *a = r->agent;
	int n = 0;
	if (r->depth >= WD_SUBAGENT_MAX_DEPTH)
		return 0;
	for (int i = 0; i < a->n_subagents; i++) {
		const struct wd_agent_def *d =
		    wd_pset_agent(r->ps, a->subagents[i]);
		if (!d)
			continue;
		ts[n].name = wd_asprintf(WD_SUBAGENT_TOOL_PREFIX "%s", d->name);
		ts[n].description = wd_asprintf(
		    "Delegate a task to the sub-agent '%s'%s%s. It works "
		    "with its own tools, within what remains of your "
		    "budget, and returns its final answer (or why it "
		    "stopped).",
		    d->name, *d->description ? ": " : "", d->description);
		ts[n].parameters_json = task_schema;
		n++;
	}
	return n;
}

void rt_subagent_schemas_free(struct wd_tool_schema *ts, int n)
{
	for (int i = 0; i < n; i++) {
		free((char *)ts[i].name);
		free((char *)ts[i].description);
	}
}

static json_t *call_rec(struct wd_run *r, json_t *pc, const char *type,
			const char *agent)
{
	json_t *rec = rt_rec_new(r, type);
	json_object_set(rec, "gen_ai.tool.name", json_object_get(pc, "name"));
	json_object_set(rec, "gen_ai.tool.call.id", json_object_get(pc, "id"));
	json_object_set_new(rec, "agent", json_string(r->agent->name));
	json_object_set_new(rec, "team", json_string(r->agent->team));
	json_object_set_new(rec, "user", json_string(r->caller.user));
	if (agent)
		json_object_set_new(rec, "subagent", json_string(agent));
	return rec;
}

/* A call refused before any child run: the same record and result shape
 * as the broker's refusals. */
static void refuse(struct wd_run *r, json_t *pc, const char *status,
		   const char *check, const char *reason)
{
	const char *name = json_string_value(json_object_get(pc, "name"));
	json_t *rec = call_rec(r, pc, "tool_result",
			       name + strlen(WD_SUBAGENT_TOOL_PREFIX));
	json_object_set_new(rec, "status", json_string(status));
	json_object_set_new(rec, "check", json_string(check));
	json_object_set_new(rec, "reason", json_string(reason));
	if (!r->agent->hash_only)
		json_object_set(rec, "args",
				json_object_get(pc, "arguments")
				    ?: json_null());
	struct wd_err e = {0};
	if (rt_record(r, rec, false, &e))
		wd_warn("run %s: refusal not recorded: %s", r->id, e.msg);
	json_decref(rec);
	rt_m_add(
	    r, WD_M_TOOL_REFUSALS, 1,
	    rt_m_tool_label(r, json_string_value(json_object_get(pc, "name"))),
	    check, NULL);
	json_t *o = json_pack("{s:s,s:s,s:s}", "status", status, "check", check,
			      "error", reason);
	cleanup_free char *msg = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	rt_set_done(pc, msg, true);
}

static uint64_t tokens_of(const struct wd_run *r)
{
	return r->in_tokens + r->out_tokens + r->sub_in_tokens +
	       r->sub_out_tokens;
}

/* One bound: what remains of the parent's cap (if it has one) after `used`
 * becomes the child's, when tighter than the child's own (*own <= 0: none).
 * false (why set) when nothing remains. Counts are exact in a double. */
static bool inherit(const struct wd_run *r, const char *name, double cap,
		    double used, double *own, unsigned bit, unsigned *inh,
		    char *why, size_t len)
{
	if (cap <= 0)
		return true;
	double rem = cap - used;
	if (rem <= 0) {
		snprintf(why, len,
			 "no %s left for a sub-agent: run %s used %.15g of "
			 "%.15g",
			 name, r->id, used, cap);
		return false;
	}
	if (*own <= 0 || rem < *own) {
		*own = rem;
		*inh |= bit;
	}
	return true;
}

/* The child's limits: its own, lowered to what remains of the parent's.
 * Returns false (why set) when a bound of the parent has nothing left. */
static bool child_limits(struct wd_run *r, const struct wd_agent_def *d,
			 struct rt_limits *out, unsigned *inh, char *why,
			 size_t len)
{
	const struct rt_limits *p = &r->lim;
	double steps = d->max_steps, tokens = (double)d->token_budget,
	       wall = d->wall_clock_s, cost = d->cost_cap_usd;
	double active =
	    (double)(r->active_ns + (wd_now_ns() - r->slice_start)) / 1e9;
	*inh = 0;
	/* steps: the parent's current model call is one of them */
	if (!inherit(r, "max_steps", p->max_steps, r->step + 1 + r->sub_steps,
		     &steps, RT_B_STEPS, inh, why, len) ||
	    !inherit(r, "token_budget", (double)p->token_budget,
		     (double)tokens_of(r), &tokens, RT_B_TOKENS, inh, why,
		     len) ||
	    !inherit(r, "wall_clock_s", p->wall_clock_s, active, &wall,
		     RT_B_WALL, inh, why, len) ||
	    !inherit(r, "cost_cap_usd", p->cost_cap_usd, r->cost + r->sub_cost,
		     &cost, RT_B_COST, inh, why, len))
		return false;
	*out = (struct rt_limits){.max_steps = (int)steps,
				  .token_budget = (long long)tokens,
				  .wall_clock_s = wall,
				  .cost_cap_usd = cost};
	return true;
}

static json_t *limits_json(const struct rt_limits *l)
{
	return json_pack("{s:i,s:I,s:f,s:f}", "max_steps", l->max_steps,
			 "token_budget", (json_int_t)l->token_budget,
			 "wall_clock_s", l->wall_clock_s, "cost_cap_usd",
			 l->cost_cap_usd);
}

/* The child run, created and listed; NULL (pc answered) on failure. */
static struct wd_run *child_start(struct wd_run *r, json_t *pc,
				  const struct wd_agent_def *d,
				  const char *task, const struct rt_limits *lim,
				  unsigned inh)
{
	struct wd_rt *rt = r->rt;
	struct wd_run *k = rt_run_new(rt, r->ps, d, &r->caller, task);
	memcpy(k->id, "run_", 4);
	wd_rand_hex(k->id + 4, 16);
	snprintf(k->parent_id, sizeof(k->parent_id), "%s", r->id);
	k->parent_step = r->step;
	k->depth = r->depth + 1;
	/* fenced by its top-level run's lease */
	k->fenced = r->fenced;
	snprintf(k->fence_id, sizeof(k->fence_id), "%s", r->fence_id);
	k->lim = *lim;
	k->inherited = inh;
	k->started_wall = wd_wall_ns();
	/* a replaying parent's children replay by the same rules (replay.c) */
	if (r->replay)
		k->replay = rt_replay_child(r, pc);
	k->msgs = json_array();
	if (d->system_prompt && *d->system_prompt)
		json_array_append_new(k->msgs,
				      json_pack("{s:s,s:s}", "role", "system",
						"text", d->system_prompt));
	json_array_append_new(
	    k->msgs, json_pack("{s:s,s:s}", "role", "user", "text", task));

	/* the parent's attempt, on disk before the child does anything: a
	 * child's tools may have side effects */
	json_t *att = call_rec(r, pc, "tool_attempt", d->name);
	json_object_set_new(att, "child_run_id", json_string(k->id));
	json_object_set_new(att, "side_effects", json_string("subagent"));
	json_object_set_new(att, "bounds", limits_json(lim));
	if (!r->agent->hash_only)
		json_object_set(att, "args", json_object_get(pc, "arguments"));
	struct wd_err e = {0};
	int rc = rt_record(r, att, true, &e);
	json_decref(att);
	cleanup_free char *active = rt_run_path(rt, k->id, "active");
	if (!rc) {
		/* a crash while the child runs leaves it marked interrupted
		 * at the next start (recover.c) */
		wd_write_file(active, d->name, strlen(d->name), 0600);
		rc = rt_record_start(k, &e);
		if (rc)
			unlink(active);
	}
	if (rc) {
		cleanup_free char *msg =
		    wd_asprintf("sub-agent '%s' not started: its start could "
				"not be recorded durably: %s",
				d->name, e.msg);
		json_t *o =
		    json_pack("{s:s,s:s}", "status", "error", "error", msg);
		cleanup_free char *m = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		rt_set_done(pc, m, true);
		pthread_mutex_lock(&rt->mu);
		rt_run_unref_locked(k);
		pthread_mutex_unlock(&rt->mu);
		return NULL;
	}
	pthread_mutex_lock(&rt->mu);
	k->next = rt->runs;
	rt->runs = k;
	k->refs++; /* ours, until the result is taken */
	k->state = R_RUNNING;
	rt_m_add(k, WD_M_RUNS_STARTED, 1, NULL, NULL, NULL);
	json_array_append_new(r->children, json_string(k->id));
	pthread_mutex_unlock(&rt->mu);
	wd_info("run %s: sub-agent %s as run %s (depth %d)", r->id, d->name,
		k->id, k->depth);
	return k;
}

/* The child ended: charge its usage, record and answer the call. */
static void child_done(struct wd_run *r, json_t *pc, struct wd_run *k,
		       uint64_t t0)
{
	struct wd_rt *rt = r->rt;
	pthread_mutex_lock(&rt->mu);
	bool done = k->state == R_DONE;
	r->sub_runs += 1 + k->sub_runs;
	r->sub_steps += k->model_calls + k->sub_steps;
	r->sub_in_tokens += k->in_tokens + k->sub_in_tokens;
	r->sub_out_tokens += k->out_tokens + k->sub_out_tokens;
	r->sub_cost += k->cost + k->sub_cost;
	const char *status = done ? k->status : "failed";
	json_t *res = json_pack("{s:s,s:s,s:s}", "status", status, "agent",
				k->agent->name, "run_id", k->id);
	if (done && !strcmp(status, "ok"))
		json_object_set_new(
		    res, "output",
		    json_string(k->final_text ? k->final_text : ""));
	else
		json_object_set_new(
		    res, "reason",
		    json_string(done && k->stop_reason[0]
				    ? k->stop_reason
				    : "the sub-agent's run did not end"));
	if (k->stop_bound[0]) {
		json_object_set_new(res, "bound", json_string(k->stop_bound));
		bool inh = false;
		if (!strcmp(k->stop_bound, "max_steps"))
			inh = k->inherited & RT_B_STEPS;
		else if (!strcmp(k->stop_bound, "token_budget"))
			inh = k->inherited & RT_B_TOKENS;
		else if (!strcmp(k->stop_bound, "wall_clock_s"))
			inh = k->inherited & RT_B_WALL;
		else
			inh = k->inherited & RT_B_COST;
		json_object_set_new(res, "inherited", json_boolean(inh));
	}
	json_object_set_new(res, "usage", rt_totals_json(k, k->model_calls));
	pthread_mutex_unlock(&rt->mu);

	json_t *rec = call_rec(r, pc, "tool_result", k->agent->name);
	json_object_set_new(rec, "child_run_id", json_string(k->id));
	json_object_set_new(rec, "status", json_string(status));
	const char *keys[] = {"reason", "bound", "inherited", "usage"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(keys); i++)
		if (json_object_get(res, keys[i]))
			json_object_set(rec, keys[i],
					json_object_get(res, keys[i]));
	json_object_set_new(
	    rec, "latency_ms",
	    json_integer((json_int_t)((wd_now_ns() - t0) / 1000000)));
	cleanup_free char *payload = json_dumps(res, JSON_COMPACT);
	if (payload) {
		size_t plen = strlen(payload);
		char h[WD_TRACE_REF_LEN], ref[WD_TRACE_REF_LEN];
		wd_trace_ref_redacted(rt->trace, payload, plen, h);
		json_object_set_new(rec, "result_hash", json_string(h));
		json_object_set_new(rec, "bytes",
				    json_integer((json_int_t)plen));
		struct wd_err be = {0};
		if (!wd_trace_put_blob(rt->trace, r->id, payload, plen, ref,
				       &be))
			json_object_set_new(rec, "result_ref",
					    json_string(ref));
		if (!r->agent->hash_only)
			json_object_set_new(
			    rec, "preview",
			    json_stringn(payload, WD_MIN(plen, PREVIEW_MAX)));
	}
	struct wd_err e = {0};
	if (rt_record(r, rec, false, &e))
		wd_warn("run %s: tool_result of sub-agent %s not recorded: %s",
			r->id, k->id, e.msg);
	json_decref(rec);
	char *content = rt_content_for_model(r, res);
	rt_set_done(pc, content, strcmp(status, "ok") != 0);
	free(content);
	json_decref(res);
	pthread_mutex_lock(&rt->mu);
	rt_run_unref_locked(k);
	pthread_mutex_unlock(&rt->mu);
}

void rt_subagent_call(struct wd_run *r, json_t *pc)
{
	const char *tool = json_string_value(json_object_get(pc, "name"));
	const char *name = tool + strlen(WD_SUBAGENT_TOOL_PREFIX);
	json_t *args = json_object_get(pc, "arguments");
	char why[512];

	/* 1. granted: listed in this agent's subagents */
	bool granted = false;
	for (int i = 0; i < r->agent->n_subagents; i++)
		granted |= !strcmp(r->agent->subagents[i], name);
	if (!granted) {
		snprintf(why, sizeof(why),
			 "tool '%s' is not granted to agent '%s' ('%s' is not "
			 "in its subagents)",
			 tool, r->agent->name, name);
		refuse(r, pc, "denied", "grant", why);
		return;
	}
	const struct wd_agent_def *d = wd_pset_agent(r->ps, name);
	if (!d) {
		snprintf(why, sizeof(why),
			 "tool '%s': no agent '%s' in the loaded policy", tool,
			 name);
		refuse(r, pc, "denied", "grant", why);
		return;
	}
	/* 2. the same user may run agents at all */
	if (!wd_pset_may_run(r->ps, r->caller.uid, d, why, sizeof(why))) {
		refuse(r, pc, "denied", "authz", why);
		return;
	}
	/* 3. args: {task: string} */
	json_error_t je;
	json_t *schema = json_loads(task_schema, 0, &je);
	struct wd_err se = {0};
	int rc = json_is_true(json_object_get(pc, "parse_error")) ||
			 !json_is_object(args)
		     ? wd_err_set(&se, -EINVAL,
				  "arguments are not a JSON "
				  "object")
		     : wd_schema_validate(schema, args, &se);
	json_decref(schema);
	if (rc) {
		snprintf(why, sizeof(why),
			 "invalid arguments for '%s': %s; send {\"task\": "
			 "\"...\"}",
			 tool, se.msg);
		refuse(r, pc, "invalid", "schema", why);
		return;
	}
	/* 4. nesting depth */
	if (r->depth + 1 > WD_SUBAGENT_MAX_DEPTH) {
		snprintf(why, sizeof(why),
			 "sub-agent '%s' would run at depth %d (at most %d)",
			 name, r->depth + 1, WD_SUBAGENT_MAX_DEPTH);
		refuse(r, pc, "denied", "depth", why);
		return;
	}
	/* 5. the bounds: what remains of this run's, at most the child's */
	struct rt_limits lim;
	unsigned inh;
	if (!child_limits(r, d, &lim, &inh, why, sizeof(why))) {
		refuse(r, pc, "denied", "budget", why);
		return;
	}
	uint64_t t0 = wd_now_ns();
	struct wd_run *k = child_start(
	    r, pc, d, json_string_value(json_object_get(args, "task")), &lim,
	    inh);
	if (!k)
		return;
	rt_advance(k);
	child_done(r, pc, k, t0);
}
