/* What other boxes ask of the runtime about runs without running them:
 * the fleet's queue (fleet/queue.c) checks a run before it is queued, reads
 * fleet runs with the trace's rule, and hears of each run's end. */
#include <string.h>
#include <unistd.h>

#include "policy/users.h"
#include "runtime/rt_int.h"

/* The tiers of a's tools and, a sub-agent running on its parent's node,
 * of its sub-agents' (load refuses a cycle: the depth bound is a guard). */
static unsigned agent_tiers(const struct wd_pset *ps,
			    const struct wd_agent_def *a, int depth)
{
	unsigned t = 0;
	for (int i = 0; i < a->n_tools; i++) {
		const struct wd_manifest *m = wd_pset_tool(ps, a->tools[i]);
		if (m)
			t |= 1u << m->tier;
	}
	for (int i = 0; depth < 16 && i < a->n_subagents; i++) {
		const struct wd_agent_def *s =
		    wd_pset_agent(ps, a->subagents[i]);
		if (s)
			t |= agent_tiers(ps, s, depth + 1);
	}
	return t;
}

int wd_rt_run_check(struct wd_rt *rt, const struct wd_caller *c,
		    const char *agent, struct wd_rt_agent_facts *out,
		    struct wd_err *err)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *ps = wd_pset_ref(rt->ps);
	pthread_mutex_unlock(&rt->mu);
	int rc = 0;
	char why[256];
	const struct wd_agent_def *a = wd_pset_agent(ps, agent);
	if (!a)
		rc = wd_err_set(err, -ENOENT, "no agent '%s' in %s", agent,
				ps->dir);
	else if (!wd_pset_may_run(ps, c->uid, a, why, sizeof(why)))
		rc = wd_err_set(err, -EACCES, "%s", why);
	else {
		snprintf(out->team, sizeof(out->team), "%s",
			 a->team ? a->team : "");
		out->placement = a->placement ? wd_strdup(a->placement) : NULL;
		out->resume = a->resume;
		out->hash_only = a->hash_only;
		out->tiers = agent_tiers(ps, a, 0);
	}
	wd_pset_unref(ps);
	return rc;
}

bool wd_rt_may_run_again(struct wd_rt *rt, const char *agent, char *why,
			 size_t why_len)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *ps = wd_pset_ref(rt->ps);
	pthread_mutex_unlock(&rt->mu);
	const struct wd_agent_def *a = wd_pset_agent(ps, agent);
	bool ok = false;
	if (!a)
		snprintf(why, why_len, "no agent '%s' in this node's policy",
			 agent);
	else if (!a->resume)
		snprintf(why, why_len,
			 "agent '%s' has resume: never in this node's policy",
			 agent);
	else if (a->n_subagents)
		snprintf(why, why_len,
			 "agent '%s' has sub-agents in this node's policy",
			 agent);
	else {
		ok = true;
		/* policy/agent.c wd_agents_check_resume's rule, again here:
		 * a tool this node cannot find counts as side-effecting */
		for (int i = 0; ok && i < a->n_tools; i++) {
			const struct wd_manifest *m =
			    wd_pset_tool(ps, a->tools[i]);
			if (!m || m->side_effects != WD_SE_NONE) {
				snprintf(
				    why, why_len,
				    "agent '%s''s tool '%s' has "
				    "side_effects: %s in this node's "
				    "policy",
				    agent, a->tools[i],
				    m ? wd_side_effects_words[m->side_effects]
				      : "unknown (no such tool)");
				ok = false;
			}
		}
	}
	wd_pset_unref(ps);
	return ok;
}

bool wd_rt_may_read(struct wd_rt *rt, const struct wd_caller *c,
		    int64_t run_uid, const char *team)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *ps = wd_pset_ref(rt->ps);
	pthread_mutex_unlock(&rt->mu);
	bool ok = wd_users_may_read_run(ps->users, c->uid, run_uid, team, NULL);
	wd_pset_unref(ps);
	return ok;
}

void wd_rt_set_run_end_hook(struct wd_rt *rt, wd_rt_run_end_fn fn, void *arg)
{
	pthread_mutex_lock(&rt->end_hook_mu);
	rt->end_hook = fn;
	rt->end_hook_arg = arg;
	pthread_mutex_unlock(&rt->end_hook_mu);
}

void wd_rt_set_fence_hook(struct wd_rt *rt, wd_rt_fence_fn fn, void *arg)
{
	pthread_rwlock_wrlock(&rt->fence_mu);
	rt->fence = fn;
	rt->fence_arg = arg;
	pthread_rwlock_unlock(&rt->fence_mu);
}

json_t *wd_rt_read_scope(struct wd_rt *rt, const struct wd_caller *c)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *ps = wd_pset_ref(rt->ps);
	pthread_mutex_unlock(&rt->mu);
	struct wd_read_scope sc;
	wd_users_read_scope(ps->users, c->uid, &sc);
	json_t *teams = json_array();
	for (int i = 0; i < sc.n_teams; i++)
		json_array_append_new(teams, json_string(sc.teams[i]));
	json_t *o = json_pack("{s:b,s:I,s:o}", "all", sc.all != NULL, "uid",
			      (json_int_t)c->uid, "teams", teams);
	wd_read_scope_free(&sc);
	wd_pset_unref(ps);
	return o;
}

bool wd_rt_is_approver(struct wd_rt *rt, uid_t uid)
{
	pthread_mutex_lock(&rt->mu);
	bool ok = wd_pset_is_approver(rt->ps, uid);
	pthread_mutex_unlock(&rt->mu);
	return ok;
}

json_t *wd_rt_approvals_meta(struct wd_rt *rt)
{
	json_t *out = json_array();
	pthread_mutex_lock(&rt->mu);
	const char *k;
	json_t *ap;
	json_object_foreach(rt->approvals, k, ap)
	{
		struct wd_run *r = rt_find_run_locked(
		    rt, json_string_value(json_object_get(ap, "run_id")));
		json_t *o = json_pack(
		    "{s:s,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:I}", "id",
		    k, "run_id", json_object_get(ap, "run_id"), "tool",
		    json_object_get(ap, "tool"), "reason",
		    json_object_get(ap, "reason"), "agent",
		    json_object_get(ap, "agent"), "team",
		    json_object_get(ap, "team"), "user",
		    json_object_get(ap, "user"), "created_ns",
		    json_object_get(ap, "created_ns"), "expires_ns",
		    json_object_get(ap, "expires_ns"), "uid",
		    (json_int_t)(r ? (int64_t)r->caller.uid : -1));
		if (o)
			json_array_append_new(out, o);
	}
	pthread_mutex_unlock(&rt->mu);
	return out;
}

/* Before a run of `a` is created under given_id (NULL: a new id): a placed
 * agent runs only under the fleet's id, and that id must be new here. 0,
 * -EINVAL, -EEXIST (err set). */
int rt_run_id_check(struct wd_rt *rt, const struct wd_agent_def *a,
		    const char *given_id, struct wd_err *err)
{
	if (a->placement && !given_id)
		/* a placement is a promise about which node runs it: only a
		 * fleet's queue keeps it (fleet/queue.c) */
		return wd_err_set(err, -EINVAL,
				  "agent '%s' has placement %s: its runs are "
				  "placed by a fleet's queue (wardend "
				  "--fleet), not started on this node",
				  a->name, a->placement);
	if (!given_id)
		return 0;
	pthread_mutex_lock(&rt->mu);
	bool dup = rt_find_run_locked(rt, given_id) != NULL;
	pthread_mutex_unlock(&rt->mu);
	cleanup_free char *mark = rt_run_path(rt, given_id, "active");
	if (dup || access(mark, F_OK) == 0)
		return wd_err_set(err, -EEXIST, "run %s exists on this node",
				  given_id);
	return 0;
}
