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

/* One statement per grouping: the column is chosen here, never spliced
 * from the request. */
static const struct {
	const char *by, *sql;
} cost_sql[] = {
#define COST_SQL(col)                                                          \
	"SELECT coalesce(json_agg(x ORDER BY x.cost_usd DESC), "               \
	"'[]')::text FROM (SELECT coalesce(" col ", '(unknown)') AS key, "     \
	"count(*) AS runs, coalesce(sum(cost_usd), 0) AS cost_usd, "           \
	"coalesce(sum(input_tokens), 0) AS input_tokens, "                     \
	"coalesce(sum(output_tokens), 0) AS output_tokens, "                   \
	"count(DISTINCT node_id) AS nodes FROM warden.trace_runs WHERE "       \
	"ended IS NOT NULL AND started >= to_timestamp($4::double precision) " \
	"AND ($1::boolean OR uid = $2::bigint OR team = ANY($3::text[])) "     \
	"GROUP BY 1) x"
    {"team", COST_SQL("team")},
    {"agent", COST_SQL("agent")},
    {"user", COST_SQL("user_name")},
#undef COST_SQL
};

json_t *wd_fleet_cost(struct wd_fleet *f, const struct wd_caller *c,
		      const char *by, uint64_t since_ns, struct wd_err *err)
{
	const char *sql = NULL;
	for (size_t i = 0; i < WD_ARRAY_SIZE(cost_sql); i++)
		if (!strcmp(by, cost_sql[i].by))
			sql = cost_sql[i].sql;
	if (!sql) {
		wd_err_set(err, -EINVAL, "by must be team, agent or user");
		errno = EINVAL;
		return NULL;
	}
	struct fl_scope sc;
	fl_scope_params(f, c, &sc);
	char since[32];
	snprintf(since, sizeof(since), "%.6f", (double)since_ns / 1e9);
	const char *pv[4] = {sc.all, sc.uid, sc.teams.data, since};
	json_t *rows = fl_row_json(f, sql, 4, pv, err);
	wd_buf_free(&sc.teams);
	if (!rows && errno == ENOENT)
		rows = json_array();
	if (!rows)
		return NULL;
	/* the key under the grouping's own name, as `warden cost` has it */
	double total = 0;
	size_t i;
	json_t *g;
	json_array_foreach(rows, i, g)
	{
		json_object_set(g, by, json_object_get(g, "key"));
		json_object_del(g, "key");
		total += json_number_value(json_object_get(g, "cost_usd"));
	}
	return json_pack("{s:s,s:o,s:f,s:s}", "by", by, "groups", rows,
			 "total_usd", total, "counted",
			 "ended runs shipped from every node's trace");
}
