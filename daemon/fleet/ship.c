/* Shipping this node's trace index to the fleet (README "More than one
 * node"). The node's own store stays the record: a tool_attempt is on the
 * node's disk before the tool starts, whatever the database is doing. A
 * thread of its own (and its own connection) copies the index rows (seq,
 * run, step, type, tool, status, hashes, ts: no payloads) in seq order,
 * SHIP_BATCH at a time, into warden.trace_records keyed by (node, seq),
 * with the runs they start or end into warden.trace_runs, and moves the
 * node's cursor (warden.trace_ship) in the same transaction: after an
 * outage or a restart it resumes where the database says, and a batch
 * shipped twice (the cursor's commit lost) inserts nothing twice.
 *
 * Order: the index thread adds batches in seq order (trace/indexq.c), so
 * rows after the cursor appear as a growing prefix; a row is never behind
 * one already shipped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "fleet/fleet_int.h"
#include "trace/trace.h"

#define SHIP_BATCH   1000u
#define SHIP_IDLE_MS 250

static int read_cursor(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	const char *pv[1] = {f->node_id};
	PGresult *r = PQexecParams(
	    c, "SELECT seq FROM warden.trace_ship WHERE node_id = $1", 1, NULL,
	    pv, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, "ship: cursor", err);
	int64_t seq = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
	PQclear(r);
	pthread_mutex_lock(&f->mu);
	f->shipped_seq = seq;
	pthread_mutex_unlock(&f->mu);
	return 0;
}

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* {run_id, agent, team, user_name, uid, model, status, started, ended,
 * cost_usd, steps} from the run's run_start and run_end, as far as
 * written; NULL when the store has no record of it. */
static json_t *run_row(struct wd_trace *t, const char *id)
{
	json_t *recs = NULL;
	struct wd_err err = {0};
	if (wd_trace_run_records(t, id, &recs, &err))
		return NULL;
	json_t *row = json_pack("{s:s}", "run_id", id);
	/* as the node's index counts it (trace/index.c): run_end's cost when
	 * it has one, else what its records spent (a run ended by recovery
	 * after a crash has none of its own) */
	double spent = 0;
	json_int_t in = 0, out = 0;
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		const char *type = str(r, "type");
		if (!type)
			continue;
		if (strcmp(type, "run_end")) {
			spent +=
			    json_number_value(json_object_get(r, "cost_usd"));
			in += json_integer_value(
			    json_object_get(r, "gen_ai.usage.input_tokens"));
			out += json_integer_value(
			    json_object_get(r, "gen_ai.usage.output_tokens"));
		}
		if (!strcmp(type, "run_start")) {
			json_object_set(row, "agent",
					json_object_get(r, "agent"));
			json_object_set(row, "team",
					json_object_get(r, "team"));
			json_object_set(row, "user_name",
					json_object_get(r, "user"));
			json_object_set(row, "uid", json_object_get(r, "uid"));
			json_object_set(
			    row, "model",
			    json_object_get(r, "gen_ai.request.model"));
			json_object_set(row, "started",
					json_object_get(r, "ts"));
		} else if (!strcmp(type, "run_end")) {
			json_object_set(row, "status",
					json_object_get(r, "status"));
			json_object_set(row, "ended", json_object_get(r, "ts"));
			/* the run's own (a sub-agent's run is a row of
			 * its own): each dollar is counted once */
			json_object_set(row, "end_cost",
					json_object_get(r, "cost_usd"));
			json_object_set(
			    row, "end_in",
			    json_object_get(r, "gen_ai.usage.input_tokens"));
			json_object_set(
			    row, "end_out",
			    json_object_get(r, "gen_ai.usage.output_tokens"));
			json_object_set(row, "steps",
					json_object_get(r, "steps"));
		}
	}
	json_decref(recs);
	if (json_object_get(row, "ended")) {
		json_t *ec = json_object_get(row, "end_cost");
		json_object_set_new(row, "cost_usd",
				    json_is_number(ec)
					? json_real(json_number_value(ec))
					: json_real(spent));
		json_t *ei = json_object_get(row, "end_in");
		json_t *eo = json_object_get(row, "end_out");
		json_object_set_new(row, "input_tokens",
				    json_integer(json_is_integer(ei)
						     ? json_integer_value(ei)
						     : in));
		json_object_set_new(row, "output_tokens",
				    json_integer(json_is_integer(eo)
						     ? json_integer_value(eo)
						     : out));
	}
	json_object_del(row, "end_cost");
	json_object_del(row, "end_in");
	json_object_del(row, "end_out");
	return row;
}

static int exec_params(PGconn *c, const char *sql, int n, const char **pv,
		       const char *what, struct wd_err *err)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, pv, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return fl_pg_err(r, c, what, err);
	PQclear(r);
	return 0;
}

/* One batch: 0 with *n rows shipped (0: nothing new), or -errno. */
static int ship_batch(struct wd_fleet *f, PGconn *c, size_t *n,
		      struct wd_err *err)
{
	*n = 0;
	pthread_mutex_lock(&f->mu);
	int64_t from = f->shipped_seq;
	pthread_mutex_unlock(&f->mu);
	struct wd_trace *t = wd_rt_trace(f->rt);
	struct wd_trace_query q = {.after_seq = (uint64_t)from,
				   .limit = SHIP_BATCH};
	json_t *rows = NULL;
	int rc = wd_trace_query_records(t, &q, &rows, err);
	if (rc)
		return rc;
	if (!json_array_size(rows)) {
		json_decref(rows);
		return 0;
	}
	json_t *runs = json_array(), *seen = json_object();
	size_t i;
	json_t *r;
	int64_t last = from;
	json_array_foreach(rows, i, r)
	{
		last = json_integer_value(json_object_get(r, "seq"));
		const char *type = str(r, "type"), *id = str(r, "run_id");
		if (!id || !type || json_object_get(seen, id) ||
		    (strcmp(type, "run_start") && strcmp(type, "run_end")))
			continue;
		json_object_set_new(seen, id, json_true());
		json_t *row = run_row(t, id);
		if (row)
			json_array_append_new(runs, row);
	}
	char *rows_text = json_dumps(rows, JSON_COMPACT);
	char *runs_text = json_dumps(runs, JSON_COMPACT);
	char last_s[24];
	snprintf(last_s, sizeof(last_s), "%lld", (long long)last);
	const char *p2[2] = {f->node_id, rows_text};
	const char *p3[2] = {f->node_id, runs_text};
	const char *p4[2] = {f->node_id, last_s};
	PGresult *b = PQexec(c, "BEGIN");
	rc = PQresultStatus(b) == PGRES_COMMAND_OK
		 ? (PQclear(b), 0)
		 : fl_pg_err(b, c, "ship: begin", err);
	if (!rc)
		rc = exec_params(
		    c,
		    "INSERT INTO warden.trace_records (node_id, seq, run_id, "
		    "step, type, tool, call_id, status, prompt_hash, "
		    "result_hash, ts) SELECT $1, x.seq, x.run_id, x.step, "
		    "x.type, x.tool, x.call_id, x.status, x.prompt_hash, "
		    "x.result_hash, x.ts::timestamptz FROM jsonb_to_recordset("
		    "$2::jsonb) AS x(seq bigint, run_id text, step integer, "
		    "type text, tool text, call_id text, status text, "
		    "prompt_hash text, result_hash text, ts text) "
		    "ON CONFLICT (node_id, seq) DO NOTHING",
		    2, p2, "ship: records", err);
	if (!rc && json_array_size(runs))
		rc = exec_params(
		    c,
		    "INSERT INTO warden.trace_runs (run_id, node_id, agent, "
		    "team, user_name, uid, model, status, started, ended, "
		    "cost_usd, input_tokens, output_tokens, steps) SELECT "
		    "x.run_id, $1, x.agent, x.team, x.user_name, x.uid, "
		    "x.model, x.status, x.started::timestamptz, "
		    "x.ended::timestamptz, x.cost_usd, x.input_tokens, "
		    "x.output_tokens, x.steps FROM "
		    "jsonb_to_recordset($2::jsonb) "
		    "AS x(run_id text, agent text, team text, user_name text, "
		    "uid bigint, model text, status text, started text, ended "
		    "text, cost_usd double precision, input_tokens bigint, "
		    "output_tokens bigint, steps integer) "
		    "ON CONFLICT (run_id) DO UPDATE SET "
		    "agent = coalesce(EXCLUDED.agent, trace_runs.agent), "
		    "team = coalesce(EXCLUDED.team, trace_runs.team), "
		    "user_name = coalesce(EXCLUDED.user_name, "
		    "trace_runs.user_name), "
		    "uid = coalesce(EXCLUDED.uid, trace_runs.uid), "
		    "model = coalesce(EXCLUDED.model, trace_runs.model), "
		    "status = coalesce(EXCLUDED.status, trace_runs.status), "
		    "started = coalesce(EXCLUDED.started, trace_runs.started), "
		    "ended = coalesce(EXCLUDED.ended, trace_runs.ended), "
		    "cost_usd = coalesce(EXCLUDED.cost_usd, "
		    "trace_runs.cost_usd), "
		    "input_tokens = coalesce(EXCLUDED.input_tokens, "
		    "trace_runs.input_tokens), "
		    "output_tokens = coalesce(EXCLUDED.output_tokens, "
		    "trace_runs.output_tokens), "
		    "steps = coalesce(EXCLUDED.steps, trace_runs.steps)",
		    2, p3, "ship: runs", err);
	if (!rc)
		rc = exec_params(
		    c,
		    "INSERT INTO warden.trace_ship (node_id, seq, shipped_at) "
		    "VALUES ($1, $2::bigint, now()) ON CONFLICT (node_id) DO "
		    "UPDATE SET seq = greatest(trace_ship.seq, EXCLUDED.seq), "
		    "shipped_at = now()",
		    2, p4, "ship: cursor", err);
	if (!rc) {
		PGresult *e = PQexec(c, "COMMIT");
		rc = PQresultStatus(e) == PGRES_COMMAND_OK
			 ? (PQclear(e), 0)
			 : fl_pg_err(e, c, "ship: commit", err);
	} else {
		PQclear(PQexec(c, "ROLLBACK"));
	}
	if (!rc) {
		*n = json_array_size(rows);
		pthread_mutex_lock(&f->mu);
		f->shipped_seq = last;
		f->m_shipped += *n;
		pthread_mutex_unlock(&f->mu);
	}
	free(rows_text);
	free(runs_text);
	json_decref(rows);
	json_decref(runs);
	json_decref(seen);
	return rc;
}

/* Wait up to ms or until stopping; true when stopping. */
static bool nap(struct wd_fleet *f, int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->mu);
	while (!f->stopping &&
	       pthread_cond_timedwait(&f->ship_cond, &f->mu, &ts) == 0)
		;
	bool stop = f->stopping;
	pthread_mutex_unlock(&f->mu);
	return stop;
}

void *fl_ship_thread(void *arg)
{
	struct wd_fleet *f = arg;
	bool warned = false;
	for (;;) {
		struct wd_err err = {0};
		int rc = 0;
		size_t n = 0;
		if (!f->ship_db) {
			f->ship_db = fl_connect(f);
			if (PQstatus(f->ship_db) != CONNECTION_OK)
				rc = fl_pg_err(NULL, f->ship_db,
					       "ship: database unreachable",
					       &err);
			else
				rc = read_cursor(f, f->ship_db, &err);
		}
		if (!rc)
			rc = ship_batch(f, f->ship_db, &n, &err);
		if (rc) {
			if (!warned)
				wd_warn("fleet: trace shipping: %s; retrying "
					"(the node's own store keeps every "
					"record)",
					err.msg);
			warned = true;
			pthread_mutex_lock(&f->mu);
			f->m_db_errors++;
			pthread_mutex_unlock(&f->mu);
			if (f->ship_db && fl_pg_lost(f->ship_db)) {
				PQfinish(f->ship_db);
				f->ship_db = NULL;
			}
			if (nap(f, 1000))
				break;
			continue;
		}
		if (warned)
			wd_info("fleet: trace shipping resumed");
		warned = false;
		/* a full batch: more may be waiting */
		if (n < SHIP_BATCH && nap(f, SHIP_IDLE_MS))
			break;
		pthread_mutex_lock(&f->mu);
		bool stop = f->stopping;
		pthread_mutex_unlock(&f->mu);
		if (stop)
			break;
	}
	return NULL;
}
