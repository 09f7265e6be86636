/* Other nodes' runs for the plain `warden trace` and `warden cost` reads
 * (README "More than one node"): the records each node's store holds, as
 * shipped to warden.trace_lines (the lines themselves, checked and parsed
 * by the store's own reader: trace.h wd_trace_check_line), its blobs as
 * shipped to warden.trace_blobs (inflated and checked against their ref:
 * wd_trace_blob_decode), and the runs of the shipped index. Who may read
 * what is decided by the runtime as for a local run (runtime.h
 * wd_rt_trace_*_from), which also records each payload read in this
 * node's store. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet_int.h"
#include "trace/records.h"
#include "trace/trace.h"

const char *wd_fleet_node_id(struct wd_fleet *f)
{
	return f->node_id;
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* The run's records: those of the node that started it (its run_start is
 * among them) in seq order, then the records other nodes wrote under its
 * id (their payload_read records: who read it there) by node and seq. */
static int lines_records(void *ctx, const char *run_id, json_t **out,
			 char node[64], struct wd_err *err)
{
	struct wd_fleet *f = ctx;
	const char *pv[1] = {run_id};
	json_t *rows = fl_row_json(
	    f,
	    "SELECT coalesce(json_agg(json_build_array(node_id, seq, line) "
	    "ORDER BY node_id, seq), '[]')::text FROM warden.trace_lines "
	    "WHERE run_id = $1",
	    1, pv, err);
	if (!rows)
		return wd_err_set(err, -EAGAIN,
				  "run %s is not in this node's store, and "
				  "other nodes' runs are not available: %s",
				  run_id, err->msg);
	json_t *recs = json_array();
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row)
	{
		const char *n = json_string_value(json_array_get(row, 0));
		const char *line = json_string_value(json_array_get(row, 2));
		json_t *rec = NULL;
		if (!n || !line ||
		    wd_trace_check_line(line, strlen(line), NULL, &rec)) {
			wd_err_set(err, -EBADMSG,
				   "run %s: node %s's record %lld in the "
				   "fleet database is damaged",
				   run_id, n ? n : "?",
				   (long long)json_integer_value(
				       json_array_get(row, 1)));
			json_decref(recs);
			json_decref(rows);
			return -EBADMSG;
		}
		/* a line is the run's only under its own id (the column is
		 * the shipper's copy of it) */
		if (!str(rec, "run_id") || strcmp(str(rec, "run_id"), run_id)) {
			json_decref(rec);
			continue;
		}
		json_object_set_new(rec, "node", json_string(n));
		if (!node[0] && wd_rec_type_json(rec) == WD_REC_RUN_START)
			snprintf(node, 64, "%s", n);
		json_array_append_new(recs, rec);
	}
	json_decref(rows);
	if (!node[0]) {
		json_decref(recs);
		return wd_err_set(err, -ENOENT,
				  "no run '%s' here or in the fleet's trace",
				  run_id);
	}
	/* its node's records first, in seq order (the rows came by node
	 * and seq); a stable pass keeps each part's order */
	json_t *own = json_array(), *rest = json_array();
	json_array_foreach(recs, i, row)
	    json_array_append(strcmp(str(row, "node"), node) ? rest : own, row);
	json_decref(recs);
	json_array_foreach(own, i, row) json_object_del(row, "node");
	json_array_extend(own, rest);
	json_decref(rest);
	*out = own;
	return 0;
}

static int shipped_blob(void *ctx, const char *ref, char **data, size_t *len,
			struct wd_err *err)
{
	struct wd_fleet *f = ctx;
	const char *pv[1] = {ref};
	PGresult *r =
	    fl_api_exec(f, "SELECT body FROM warden.trace_blobs WHERE ref = $1",
			1, pv, 1, err);
	if (!r)
		return wd_err_set(err, -EAGAIN,
				  "blob %s: other nodes' payloads are not "
				  "available: %s",
				  ref, err->msg);
	if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0)) {
		PQclear(r);
		return wd_err_set(err, -ENOENT,
				  "blob %s: not in the fleet database "
				  "(hash_only run, dropped by retention, or "
				  "not shipped yet)",
				  ref);
	}
	int rc =
	    wd_trace_blob_decode(ref, PQgetvalue(r, 0, 0),
				 (size_t)PQgetlength(r, 0, 0), data, len, err);
	PQclear(r);
	return rc;
}

void wd_fleet_trace_src(struct wd_fleet *f, struct wd_rt_trace_src *src)
{
	*src = (struct wd_rt_trace_src){
	    .records = lines_records, .blob = shipped_blob, .ctx = f};
}

/* A statement's rows (a json_agg: one row even when empty), the scope's
 * parameters freed; NULL (errno EAGAIN) when it could not be read. */
static json_t *rows_of(json_t *o, struct fl_scope *sc)
{
	wd_buf_free(&sc->teams);
	if (!o && errno == ENOENT)
		o = json_array();
	return o;
}

/* The ISO 8601 form the node's index gives (trace/query.c) from a
 * column of microseconds, or null. */
static void us_to_iso(json_t *row, const char *from, const char *to)
{
	json_t *v = json_object_get(row, from);
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		char b[40];
		wd_iso8601((uint64_t)json_integer_value(v) * 1000, b,
			   sizeof(b));
		json_object_set_new(row, to, json_string(b));
	} else {
		json_object_set_new(row, to, json_null());
	}
	if (strcmp(from, "page_started"))
		json_object_del(row, from);
}

/* A start as the node's index orders it: microseconds, unknown = 0 */
#define STARTED_US "coalesce((extract(epoch FROM r.started) * 1e6)::bigint, 0)"

json_t *wd_fleet_trace_page(struct wd_fleet *f, const struct wd_caller *c,
			    const struct wd_trace_query *q, unsigned limit,
			    struct wd_err *err)
{
	/* replays are found by the node that ran them (trace_runs does not
	 * say what a run replays) */
	if (q->replay_of)
		return json_array();
	struct fl_scope sc;
	fl_scope_params(f, c, &sc);
	char lim[16], since[32], after[24];
	snprintf(lim, sizeof(lim), "%u", limit);
	snprintf(since, sizeof(since), "%.6f", (double)q->since_ns / 1e9);
	snprintf(after, sizeof(after), "%llu",
		 (unsigned long long)q->after_started);
	const char *pv[16] = {
	    sc.all,	    sc.uid,  sc.teams.data, f->node_id, q->agent,
	    q->team,	    q->user, q->status,	    q->tool,	q->prompt_hash,
	    q->result_hash, since,   q->after_run,  after,	lim};
	/* the same filters and order as the node's index (trace/query.c
	 * wd_trace_query_runs), run ids compared bytewise as SQLite does */
	json_t *o = fl_row_json(
	    f,
	    "SELECT coalesce(json_agg(x ORDER BY x.page_started, x.run_id "
	    "COLLATE \"C\"), '[]')::text FROM (SELECT r.run_id, r.node_id AS "
	    "node, r.agent, r.team, r.user_name AS user, r.uid, r.model, "
	    "coalesce(r.status, 'running') AS status, " STARTED_US
	    " AS page_started, (extract(epoch FROM r.ended) * 1e6)::bigint AS "
	    "ended_us, r.cost_usd, r.input_tokens, r.output_tokens, r.steps "
	    "FROM warden.trace_runs r WHERE r.node_id <> $4 AND ($1::boolean "
	    "OR r.uid = $2::bigint OR r.team = ANY($3::text[])) AND ($5::text "
	    "IS NULL OR r.agent = $5) AND ($6::text IS NULL OR r.team = $6) "
	    "AND ($7::text IS NULL OR r.user_name = $7) AND ($8::text IS NULL "
	    "OR coalesce(r.status, 'running') = $8) AND ($9::text IS NULL OR "
	    "EXISTS (SELECT 1 FROM warden.trace_records t WHERE t.node_id = "
	    "r.node_id AND t.run_id = r.run_id AND t.tool = $9)) AND "
	    "($10::text IS NULL OR EXISTS (SELECT 1 FROM warden.trace_records "
	    "t WHERE t.node_id = r.node_id AND t.run_id = r.run_id AND "
	    "t.prompt_hash = $10)) AND ($11::text IS NULL OR EXISTS (SELECT 1 "
	    "FROM warden.trace_records t WHERE t.node_id = r.node_id AND "
	    "t.run_id = r.run_id AND t.result_hash = $11)) AND "
	    "($12::double precision = 0 OR r.started >= "
	    "to_timestamp($12::double precision)) AND ($13::text IS NULL "
	    "OR " STARTED_US " > $14::bigint OR (" STARTED_US
	    " = $14::bigint AND "
	    "r.run_id COLLATE \"C\" > $13)) ORDER BY " STARTED_US
	    ", r.run_id COLLATE \"C\" LIMIT $15::integer) x",
	    15, pv, err);
	o = rows_of(o, &sc);
	size_t i;
	json_t *row;
	json_array_foreach(o, i, row)
	{
		us_to_iso(row, "page_started", "started");
		us_to_iso(row, "ended_us", "ended");
	}
	return o;
}

json_t *wd_fleet_cost_runs(struct wd_fleet *f, const struct wd_caller *c,
			   uint64_t since_ns, struct wd_err *err)
{
	struct fl_scope sc;
	fl_scope_params(f, c, &sc);
	char since[32];
	snprintf(since, sizeof(since), "%.6f", (double)since_ns / 1e9);
	const char *pv[5] = {sc.all, sc.uid, sc.teams.data, f->node_id, since};
	json_t *o = fl_row_json(
	    f,
	    "SELECT coalesce(json_agg(x), '[]')::text FROM (SELECT r.run_id, "
	    "r.node_id AS node, r.team, r.agent, r.user_name AS user, "
	    "coalesce(r.cost_usd, 0) AS cost_usd, coalesce(r.input_tokens, 0) "
	    "AS input_tokens, coalesce(r.output_tokens, 0) AS output_tokens "
	    "FROM warden.trace_runs r WHERE r.node_id <> $4 AND r.ended IS "
	    "NOT NULL AND r.started >= to_timestamp($5::double precision) AND "
	    "($1::boolean OR r.uid = $2::bigint OR r.team = "
	    "ANY($3::text[]))) x",
	    5, pv, err);
	o = rows_of(o, &sc);
	return o;
}

json_t *wd_fleet_trace_records(struct wd_fleet *f, const struct wd_caller *c,
			       const struct wd_trace_query *q,
			       const char *after_node, int64_t after_seq,
			       unsigned limit, struct wd_err *err)
{
	struct fl_scope sc;
	fl_scope_params(f, c, &sc);
	char lim[16], since[32], after[24];
	snprintf(lim, sizeof(lim), "%u", limit);
	snprintf(since, sizeof(since), "%.6f", (double)q->since_ns / 1e9);
	snprintf(after, sizeof(after), "%lld", (long long)after_seq);
	const char *pv[15] = {
	    sc.all,    sc.uid,	       sc.teams.data,  f->node_id, q->tool,
	    q->status, q->prompt_hash, q->result_hash, q->agent,   q->team,
	    q->user,   since,	       after_node,     after,	   lim};
	/* the filters of the node's index (trace/query.c
	 * wd_trace_query_records) over the shipped index rows; a refused
	 * tool_result's broker check from its shipped line */
	json_t *o = fl_row_json(
	    f,
	    "SELECT coalesce(json_agg(x ORDER BY x.node COLLATE \"C\", x.seq), "
	    "'[]')::text FROM (SELECT t.node_id AS node, t.seq, t.run_id, "
	    "t.step, t.type, t.tool, t.call_id, t.status, t.prompt_hash, "
	    "t.result_hash, (extract(epoch FROM t.ts) * 1e6)::bigint AS ts_us, "
	    "CASE WHEN t.type = 'tool_result' THEN (SELECT l.line::jsonb ->> "
	    "'check' FROM warden.trace_lines l WHERE l.node_id = t.node_id AND "
	    "l.seq = t.seq AND l.day = t.day LIMIT 1) END AS \"check\" FROM "
	    "warden.trace_records "
	    "t LEFT JOIN warden.trace_runs r ON r.run_id = t.run_id AND "
	    "r.node_id = t.node_id WHERE t.node_id <> $4 AND ($1::boolean OR "
	    "r.uid = $2::bigint OR r.team = ANY($3::text[])) AND ($5::text IS "
	    "NULL OR t.tool = $5) AND ($6::text IS NULL OR t.status = $6) AND "
	    "($7::text IS NULL OR t.prompt_hash = $7) AND ($8::text IS NULL "
	    "OR t.result_hash = $8) AND ($9::text IS NULL OR r.agent = $9) "
	    "AND ($10::text IS NULL OR r.team = $10) AND ($11::text IS NULL "
	    "OR r.user_name = $11) AND ($12::double precision = 0 OR t.ts >= "
	    "to_timestamp($12::double precision)) AND (t.node_id COLLATE "
	    "\"C\" > $13 OR (t.node_id = $13 AND t.seq > $14::bigint)) ORDER "
	    "BY t.node_id COLLATE \"C\", t.seq LIMIT $15::integer) x",
	    15, pv, err);
	o = rows_of(o, &sc);
	size_t i;
	json_t *row;
	json_array_foreach(o, i, row) us_to_iso(row, "ts_us", "ts");
	return o;
}
