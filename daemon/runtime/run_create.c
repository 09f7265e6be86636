/* A run's creation: its state from the agent and the caller, its run_start
 * record (durable before the run is queued), and the API's create. */
#include <string.h>

#include "common/log.h"
#include "runtime/rt_int.h"
#include "trace/recw.h"
#include "trace/trace.h"

struct wd_run *rt_run_new(struct wd_rt *rt, struct wd_pset *ps,
			  const struct wd_agent_def *a,
			  const struct wd_caller *c, const char *task)
{
	struct wd_run *r = wd_calloc(1, sizeof(*r));
	r->rt = rt;
	r->refs = 1; /* rt->runs */
	r->ps = wd_pset_ref(ps);
	r->agent = a;
	r->agent_name = wd_strdup(a->name);
	r->team = wd_strdup(a->team ? a->team : "");
	r->hash_only = a->hash_only;
	r->lim = (struct rt_limits){.max_steps = a->max_steps,
				    .token_budget = a->token_budget,
				    .wall_clock_s = a->wall_clock_s,
				    .cost_cap_usd = a->cost_cap_usd};
	r->children = json_array();
	r->caller = *c;
	r->scopes = wd_pset_user_scopes(ps, c->uid, &r->n_scopes);
	/* the policy's name for the uid, when listed, names the user */
	const char *pn = wd_pset_user_name(ps, c->uid);
	if (pn)
		snprintf(r->caller.user, sizeof(r->caller.user), "%s", pn);
	r->task = wd_strdup(task);
	r->done = json_object();
	snprintf(r->status, sizeof(r->status), "running");
	return r;
}

json_t *rt_totals_json(const struct wd_run *r, int own_steps)
{
	return json_pack(
	    "{s:i,s:I,s:I,s:f}", "steps", own_steps + r->sub_steps,
	    "input_tokens", (json_int_t)(r->in_tokens + r->sub_in_tokens),
	    "output_tokens", (json_int_t)(r->out_tokens + r->sub_out_tokens),
	    "cost_usd", r->cost + r->sub_cost);
}

int rt_record_start(struct wd_run *r, struct wd_err *err)
{
	struct wd_rt *rt = r->rt;
	const struct wd_agent_def *a = r->agent;
	json_t *rec = rt_rec_new(r, "run_start");
	json_object_set_new(rec, "agent", json_string(a->name));
	json_object_set_new(rec, "team", json_string(a->team));
	json_object_set_new(rec, "user", json_string(r->caller.user));
	json_object_set_new(rec, "uid", json_integer(r->caller.uid));
	json_object_set_new(rec, "gen_ai.request.model", json_string(a->model));
	json_object_set_new(rec, "gen_ai.operation.name",
			    json_string("invoke_agent"));
	json_object_set_new(rec, "trace",
			    json_pack("{s:s,s:i}", "payloads",
				      a->hash_only ? "hash_only" : "full",
				      "retention_days", a->retention_days));
	/* the run's effective bounds (a sub-agent's may be lower than its
	 * definition's: see bounds_inherited) */
	json_object_set_new(
	    rec, "bounds",
	    json_pack("{s:i,s:I,s:f,s:f,s:I}", "max_steps", r->lim.max_steps,
		      "token_budget", (json_int_t)r->lim.token_budget,
		      "wall_clock_s", r->lim.wall_clock_s, "cost_cap_usd",
		      r->lim.cost_cap_usd, "context_budget_tokens",
		      (json_int_t)a->context_budget_tokens));
	json_t *tl = json_array();
	for (int i = 0; i < a->n_tools; i++)
		json_array_append_new(tl, json_string(a->tools[i]));
	json_object_set_new(rec, "tools", tl);
	if (a->n_subagents) {
		json_t *sl = json_array();
		for (int i = 0; i < a->n_subagents; i++)
			json_array_append_new(sl, json_string(a->subagents[i]));
		json_object_set_new(rec, "subagents", sl);
	}
	if (r->parent_id[0]) {
		json_object_set_new(rec, "parent_run_id",
				    json_string(r->parent_id));
		json_object_set_new(rec, "parent_step",
				    json_integer(r->parent_step));
		json_object_set_new(rec, "depth", json_integer(r->depth));
		json_t *inh = json_array();
		static const struct {
			unsigned bit;
			const char *name;
		} b[] = {{RT_B_STEPS, "max_steps"},
			 {RT_B_TOKENS, "token_budget"},
			 {RT_B_WALL, "wall_clock_s"},
			 {RT_B_COST, "cost_cap_usd"}};
		for (size_t i = 0; i < WD_ARRAY_SIZE(b); i++)
			if (r->inherited & b[i].bit)
				json_array_append_new(inh,
						      json_string(b[i].name));
		json_object_set_new(rec, "bounds_inherited", inh);
		json_object_set_new(rec, "agent_bounds",
				    json_pack("{s:i,s:I,s:f,s:f}", "max_steps",
					      a->max_steps, "token_budget",
					      (json_int_t)a->token_budget,
					      "wall_clock_s", a->wall_clock_s,
					      "cost_cap_usd", a->cost_cap_usd));
	}
	if (a->hash_only) {
		char ref[WD_TRACE_REF_LEN];
		/* hash_only: the store computes the ref, keeps nothing */
		if (!wd_trace_put_blob(rt->trace, NULL, "", 0, ref, NULL))
			(void)ref;
	} else {
		json_object_set_new(rec, "task", json_string(r->task));
	}
	/* what a replay needs to run exactly this again (replay_defs.c) */
	json_object_set_new(rec, "definitions", rt_definitions_json(r));
	if (r->replay)
		json_object_set_new(rec, "replay_of",
				    rt_replay_of_json(r->replay));
	int rc = rt_record(r, rec, true, err);
	json_decref(rec);
	return rc;
}

int wd_rt_run_create(struct wd_rt *rt, const struct wd_caller *c,
		     const char *agent, const char *task, char id[64],
		     struct wd_err *err)
{
	return wd_rt_run_create_id(rt, c, agent, task, NULL, id, err);
}

int wd_rt_run_create_id(struct wd_rt *rt, const struct wd_caller *c,
			const char *agent, const char *task,
			const char *given_id, char id[64], struct wd_err *err)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *ps = wd_pset_ref(rt->ps);
	pthread_mutex_unlock(&rt->mu);
	int rc = 0;
	cleanup_free char *active = NULL;
	const struct wd_agent_def *a = wd_pset_agent(ps, agent);
	char why[256];
	if (!a) {
		rc = wd_err_set(err, -ENOENT, "no agent '%s' in %s", agent,
				ps->dir);
		goto out;
	}
	if (!wd_pset_may_run(ps, c->uid, a, why, sizeof(why))) {
		rc = wd_err_set(err, -EACCES, "%s", why);
		goto out;
	}
	if ((rc = rt_run_id_check(rt, a, given_id, err)))
		goto out;
	struct wd_run *r = rt_run_new(rt, ps, a, c, task);
	if (given_id) {
		/* the fleet's id (fleet/queue.c): the same name on every
		 * node, checked like an API id by the submitting node */
		snprintf(r->id, sizeof(r->id), "%s", given_id);
		r->fenced = true;
	} else {
		memcpy(r->id, "run_", 4);
		wd_rand_hex(r->id + 4, 16);
	}
	snprintf(r->fence_id, sizeof(r->fence_id), "%s", r->id);
	r->started_wall = wd_wall_ns();
	r->msgs = json_array();
	if (a->system_prompt && *a->system_prompt)
		json_array_append_new(r->msgs,
				      json_pack("{s:s,s:s}", "role", "system",
						"text", a->system_prompt));
	json_array_append_new(
	    r->msgs, json_pack("{s:s,s:s}", "role", "user", "text", task));

	/* the run exists on disk before anything else happens */
	active = rt_run_path(rt, r->id, "active");
	json_t *mk = json_pack("{s:s}", "agent", agent);
	rc = rt_marker_write(rt, r->id, mk, true);
	json_decref(mk);
	if (rc) {
		wd_err_set(err, rc, "cannot create the run's marker %s: %s",
			   active, strerror(-rc));
		/* refused before any record was written: the store would
		 * not notice the full disk by itself, /healthz must */
		wd_trace_note_write_error(rt->trace, rc,
					  "run marker not written");
		unlink(active);
		pthread_mutex_lock(&rt->mu);
		rt_run_unref_locked(r);
		pthread_mutex_unlock(&rt->mu);
		goto out;
	}
	rc = rt_record_start(r, err);
	if (rc) {
		unlink(active);
		pthread_mutex_lock(&rt->mu);
		rt_run_unref_locked(r);
		pthread_mutex_unlock(&rt->mu);
		goto out;
	}
	/* read before the run is queued: a worker may finish and free it
	 * as soon as the lock drops */
	snprintf(id, 64, "%s", r->id);
	wd_info("run %s: agent %s for %s (uid %u)", r->id, a->name,
		r->caller.user, (unsigned)c->uid);
	pthread_mutex_lock(&rt->mu);
	r->next = rt->runs;
	rt->runs = r;
	rt_m_add(r, WD_M_RUNS_STARTED, 1, NULL, NULL, NULL);
	rt_enqueue_locked(rt, r);
	pthread_mutex_unlock(&rt->mu);
out:
	wd_pset_unref(ps);
	return rc;
}
