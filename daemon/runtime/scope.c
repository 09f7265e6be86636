/* What the node-wide views (/metrics, /v1/status on wardend's unix
 * socket, which any local uid may connect to) show a caller. Root, the
 * daemon's own uid and the auditors group see the whole node, as they may
 * read every run; anyone else sees the figures of their own teams (the
 * groups users.yaml gives their uid) and the node-wide ones that name no
 * team. The --metrics TCP listener is the operator's scrape endpoint, on
 * an address the operator chose: it serves the whole node (server.c). */
#include <string.h>
#include <unistd.h>

#include "alert/metrics.h"
#include "policy/users.h"
#include "runtime/rt_int.h"

static bool sees_all_locked(struct wd_rt *rt, const struct wd_caller *c,
			    struct wd_read_scope *sc)
{
	wd_users_read_scope(rt->ps->users, c->uid, sc);
	return c->uid == 0 || c->uid == geteuid() || sc->all;
}

char *wd_rt_metrics_for(struct wd_rt *rt, const struct wd_caller *c,
			const char *full)
{
	struct wd_read_scope sc;
	pthread_mutex_lock(&rt->mu);
	bool all = sees_all_locked(rt, c, &sc);
	/* the team names point into the policy set: copied under the lock */
	json_t *teams = json_array();
	for (int i = 0; !all && i < sc.n_teams; i++)
		json_array_append_new(teams, json_string(sc.teams[i]));
	pthread_mutex_unlock(&rt->mu);
	wd_read_scope_free(&sc);
	if (all) {
		json_decref(teams);
		return wd_strdup(full);
	}
	size_t n = json_array_size(teams);
	const char **t = wd_calloc(n + 1, sizeof(*t));
	for (size_t i = 0; i < n; i++)
		t[i] = json_string_value(json_array_get(teams, i));
	char *out = wd_metrics_scoped(full, t, n);
	free(t);
	json_decref(teams);
	return out;
}

static bool team_listed(const struct wd_read_scope *sc, const char *team)
{
	for (int i = 0; team && i < sc->n_teams; i++)
		if (!strcmp(sc->teams[i], team))
			return true;
	return false;
}

json_t *wd_rt_status_for(struct wd_rt *rt, const struct wd_caller *c)
{
	json_t *o = wd_rt_status(rt);
	struct wd_read_scope sc;
	int q = 0, run = 0, susp = 0, done = 0, agents = 0, napp = 0;
	json_t *tools = json_object(), *teams = json_array();
	pthread_mutex_lock(&rt->mu);
	if (sees_all_locked(rt, c, &sc)) {
		pthread_mutex_unlock(&rt->mu);
		wd_read_scope_free(&sc);
		json_decref(tools);
		json_decref(teams);
		return o;
	}
	/* the runs it may read, the agents and tools of its teams */
	for (struct wd_run *r = rt->runs; r; r = r->next) {
		if (!rt_may_read_run_locked(rt, c, r))
			continue;
		q += r->state == R_QUEUED;
		run += r->state == R_RUNNING;
		susp += r->state == R_SUSPENDED;
		done += r->state == R_DONE;
	}
	const char *k;
	json_t *ap;
	json_object_foreach(rt->approvals, k, ap)
	{
		struct wd_run *r = rt_find_run_locked(
		    rt, json_string_value(json_object_get(ap, "run_id")));
		napp += r && rt_may_read_run_locked(rt, c, r);
	}
	for (int i = 0; i < rt->ps->n_agents; i++) {
		const struct wd_agent_def *a = &rt->ps->agents[i];
		if (!team_listed(&sc, a->team))
			continue;
		agents++;
		for (int t = 0; t < a->n_tools; t++)
			json_object_set_new(tools, a->tools[t], json_true());
	}
	for (int i = 0; i < sc.n_teams; i++)
		json_array_append_new(teams, json_string(sc.teams[i]));
	pthread_mutex_unlock(&rt->mu);
	wd_read_scope_free(&sc);
	json_object_set_new(o, "runs",
			    json_pack("{s:i,s:i,s:i,s:i}", "queued", q,
				      "running", run, "awaiting_approval", susp,
				      "done_in_memory", done));
	json_object_set_new(o, "approvals_pending", json_integer(napp));
	json_object_set_new(o, "agents", json_integer(agents));
	json_object_set_new(o, "tools",
			    json_integer((json_int_t)json_object_size(tools)));
	json_object_set_new(o, "scope", json_pack("{s:o}", "teams", teams));
	json_decref(tools);
	return o;
}
