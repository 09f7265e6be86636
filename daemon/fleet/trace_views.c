/* The shipped trace index, read fleet-wide (ship.c writes it): the runs of
 * every node and one run's index rows, for callers who may read them (the
 * trace's rule, in the query). Index rows only: payloads stay on the node
 * that ran the run. */
#include <errno.h>
#include <string.h>

#include "fleet/fleet_int.h"

json_t *wd_fleet_trace_runs(struct wd_fleet *f, const struct wd_caller *c,
			    unsigned limit, struct wd_err *err)
{
	struct fl_scope sc;
	fl_scope_params(f, c, &sc);
	char lim[16];
	snprintf(lim, sizeof(lim), "%u", limit);
	const char *pv[4] = {sc.all, sc.uid, sc.teams.data, lim};
	json_t *o = fl_row_json(
	    f,
	    "SELECT coalesce(json_agg(x ORDER BY x.started DESC, x.run_id), "
	    "'[]')::text FROM (SELECT r.run_id, r.node_id AS node, r.agent, "
	    "r.team, r.user_name AS user, r.uid, r.model, r.status, "
	    "r.started, r.ended, r.cost_usd, r.steps FROM warden.trace_runs r "
	    "WHERE ($1::boolean OR r.uid = $2::bigint OR r.team = "
	    "ANY($3::text[])) ORDER BY r.started DESC NULLS LAST, r.run_id "
	    "LIMIT $4::integer) x",
	    4, pv, err);
	wd_buf_free(&sc.teams);
	if (!o && errno == ENOENT)
		o = json_array();
	return o;
}

json_t *wd_fleet_trace_run(struct wd_fleet *f, const struct wd_caller *c,
			   const char *id, struct wd_err *err)
{
	struct fl_scope sc;
	fl_scope_params(f, c, &sc);
	const char *pv[4] = {sc.all, sc.uid, sc.teams.data, id};
	/* a run the caller may not read answers as one that is not there:
	 * its id tells nothing */
	json_t *o = fl_row_json(
	    f,
	    "SELECT json_build_object('run', row_to_json(r), 'records', "
	    "(SELECT coalesce(json_agg(x ORDER BY x.seq), '[]') FROM "
	    "(SELECT t.seq, t.step, t.type, t.tool, t.call_id, t.status, "
	    "t.prompt_hash, t.result_hash, t.ts FROM warden.trace_records t "
	    "WHERE t.node_id = r.node_id AND t.run_id = r.run_id) x))::text "
	    "FROM (SELECT run_id, node_id, agent, team, user_name AS user, "
	    "uid, model, status, started, ended, cost_usd, steps FROM "
	    "warden.trace_runs WHERE run_id = $4 AND ($1::boolean OR uid = "
	    "$2::bigint OR team = ANY($3::text[]))) r",
	    4, pv, err);
	wd_buf_free(&sc.teams);
	if (!o && errno == ENOENT)
		wd_err_set(err, -ENOENT,
			   "no run %s in the fleet's trace that you may read",
			   id);
	return o;
}
