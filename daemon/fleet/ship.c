/* Shipping this node's trace to the fleet (README "More than one node").
 * The node's own store stays the record: a tool_attempt is on the node's
 * disk before the tool starts, whatever the database is doing. A thread of
 * its own (and its own connection) copies, in seq order, SHIP_BATCH
 * records at a time:
 *  - each record's segment line, byte for byte, into warden.trace_lines
 *    (its UTC day's partition, made when missing), so the chain verifies
 *    from the database alone (trace_verify.c);
 *  - its index row (run, step, type, tool, status, hashes, ts) into
 *    warden.trace_records, and the runs it starts, ends or flags into
 *    warden.trace_runs;
 *  - the payload blobs it names, as the node stores them (zlib), into
 *    warden.trace_blobs: only for a run whose run_start says payloads are
 *    kept (never a hash_only run's), only blobs still on the node (gc may
 *    have dropped them), and a body the database already has is not sent
 *    again;
 * and moves the node's cursor (warden.trace_ship) in the same transaction:
 * after an outage or a restart it resumes where the database says, and a
 * batch shipped twice (the cursor's commit lost) inserts nothing twice
 * (the day is the record's, so a line goes to the same partition again).
 *
 * Order: the index thread adds batches in seq order (trace/indexq.c), so
 * rows after the cursor appear as a growing prefix; a row is never behind
 * one already shipped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "fleet/fleet_int.h"
#include "trace/trace.h"

#define SHIP_BATCH   1000u
#define SHIP_IDLE_MS 250
/* blob bytes read for one batch: past this the batch ends at that record
 * (a record's own blobs always go, whatever their size) */
#define SHIP_BLOB_BYTES (16u << 20)

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
 * cost_usd, steps, payloads, retention_days, flagged} from the run's
 * run_start, run_end and flag records, as far as written; NULL when the
 * store has no record of it. */
static json_t *run_row(struct wd_trace *t, const char *id)
{
	json_t *recs = NULL;
	struct wd_err err = {0};
	if (wd_trace_run_records(t, id, &recs, &err))
		return NULL;
	json_t *row = json_pack("{s:s, s:b}", "run_id", id, "flagged", 0);
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
			/* what payload retention needs (trace_gc.c) */
			json_t *tr = json_object_get(r, "trace");
			json_t *pl = json_object_get(tr, "payloads");
			json_object_set(row, "payloads",
					pl ? pl
					   : json_object_get(r, "payloads"));
			json_object_set(row, "retention_days",
					json_object_get(tr, "retention_days"));
		} else if (!strcmp(type, "flag")) {
			json_object_set_new(row, "flagged", json_true());
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
			if (json_is_true(json_object_get(r, "flagged")))
				json_object_set_new(row, "flagged",
						    json_true());
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

/* "YYYY-MM-DD" of a record's ts (microseconds, UTC): the partition it
 * goes to, the same however often it is shipped */
static void utc_day(int64_t ts_us, char out[16])
{
	time_t s = (time_t)(ts_us / 1000000);
	struct tm tm;
	if (ts_us <= 0 || !gmtime_r(&s, &tm) ||
	    !strftime(out, 16, "%Y-%m-%d", &tm))
		snprintf(out, 16, "1970-01-01");
}

static bool ships_payloads(const json_t *line)
{
	/* a run whose run_start the store has not seen is not known to
	 * keep payloads: nothing of it is sent */
	const char *p = str(line, "payloads");
	return p && strcmp(p, "hash_only");
}

/* The refs the database has among those of the batch's lines: the set
 * (ref -> true) in *have. In the batch's transaction. */
static int blobs_present(PGconn *c, json_t *lines, json_t **have,
			 struct wd_err *err)
{
	json_t *refs = json_array();
	size_t i, j;
	json_t *l, *ref;
	json_array_foreach(lines, i, l)
	{
		if (!ships_payloads(l))
			continue;
		json_array_foreach(json_object_get(l, "refs"), j, ref)
		    json_array_append(refs, ref);
		json_array_foreach(json_object_get(l, "def_refs"), j, ref)
		    json_array_append(refs, ref);
	}
	*have = json_object();
	if (!json_array_size(refs)) {
		json_decref(refs);
		return 0;
	}
	char *text = json_dumps(refs, JSON_COMPACT);
	json_decref(refs);
	const char *pv[1] = {text};
	PGresult *r = PQexecParams(
	    c,
	    "SELECT b.ref FROM warden.trace_blobs b JOIN "
	    "jsonb_array_elements_text($1::jsonb) x(ref) ON b.ref = x.ref",
	    1, NULL, pv, NULL, NULL, 0);
	free(text);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, "ship: blobs present", err);
	for (int k = 0; k < PQntuples(r); k++)
		json_object_set_new(*have, PQgetvalue(r, k, 0), json_true());
	PQclear(r);
	return 0;
}

static char *hex_of(const char *b, size_t n)
{
	static const char d[] = "0123456789abcdef";
	char *h = wd_malloc(2 * n + 1);
	for (size_t i = 0; i < n; i++) {
		h[2 * i] = d[(unsigned char)b[i] >> 4];
		h[2 * i + 1] = d[(unsigned char)b[i] & 15];
	}
	h[2 * n] = 0;
	return h;
}

/* One blob named by line l into blobs (ref -> {ref, run_id, day, body: hex
 * or absent when the database has it}): the latest record naming it, whose
 * run (null for a definition, which every run of its agent shares: payload
 * retention leaves those to metadata retention) and day decide its
 * retention. Adds the bytes read to *bytes. 0 or -errno. */
static int add_blob(struct wd_trace *t, json_t *blobs, json_t *have,
		    const json_t *l, const char *rs, bool definition,
		    size_t *bytes, struct wd_err *err)
{
	json_t *prev = json_object_get(blobs, rs);
	json_t *b =
	    json_pack("{s:s, s:O, s:O}", "ref", rs, "run_id",
		      definition ? json_null() : json_object_get(l, "run_id"),
		      "day", json_object_get(l, "day"));
	if (prev && json_object_get(prev, "body"))
		json_object_set(b, "body", json_object_get(prev, "body"));
	else if (!prev && !json_object_get(have, rs)) {
		char *data = NULL;
		size_t len = 0;
		int r = wd_trace_blob_stored(t, rs, &data, &len);
		if (r == -ENOENT) {
			json_decref(b);
			return 0; /* dropped by the node's gc */
		}
		if (r < 0) {
			json_decref(b);
			return wd_err_set(err, r, "ship: blob %s: %s", rs,
					  strerror(-r));
		}
		char *hx = hex_of(data, len);
		free(data);
		json_object_set_new(b, "body", json_string_nocheck(hx));
		free(hx);
		*bytes += len;
	}
	json_object_set_new(blobs, rs, b);
	return 0;
}

/* The blobs of lines[0..] to send, read from the store in line order until
 * SHIP_BLOB_BYTES; returns how many lines they cover (the batch is cut
 * there). A blob the store no longer has is not sent. */
static size_t batch_blobs(struct wd_trace *t, json_t *lines, json_t *have,
			  json_t *blobs, int *rc, struct wd_err *err)
{
	size_t bytes = 0, i, j;
	json_t *l, *ref;
	*rc = 0;
	json_array_foreach(lines, i, l)
	{
		if (i && bytes > SHIP_BLOB_BYTES)
			return i;
		if (!ships_payloads(l))
			continue;
		json_array_foreach(json_object_get(l, "refs"), j, ref)
		{
			*rc =
			    add_blob(t, blobs, have, l, json_string_value(ref),
				     false, &bytes, err);
			if (*rc)
				return 0;
		}
		json_array_foreach(json_object_get(l, "def_refs"), j, ref)
		{
			*rc =
			    add_blob(t, blobs, have, l, json_string_value(ref),
				     true, &bytes, err);
			if (*rc)
				return 0;
		}
	}
	return json_array_size(lines);
}

static int begin(PGconn *c, struct wd_err *err)
{
	PGresult *b = PQexec(c, "BEGIN");
	if (PQresultStatus(b) != PGRES_COMMAND_OK)
		return fl_pg_err(b, c, "ship: begin", err);
	PQclear(b);
	return 0;
}

static int exec_tuples(PGconn *c, const char *sql, int n, const char **pv,
		       const char *what, struct wd_err *err)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, pv, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK &&
	    PQresultStatus(r) != PGRES_COMMAND_OK)
		return fl_pg_err(r, c, what, err);
	PQclear(r);
	return 0;
}

/* The batch's statements, in its transaction (text: JSON arrays). */
struct ship_text {
	char *days, *lines, *rows, *runs, *last;
	char *blobs, *known; /* with a body; the database has the body */
};

static int ship_write(struct wd_fleet *f, PGconn *c, const struct ship_text *x,
		      bool runs, size_t blobs, size_t known, struct wd_err *err)
{
	const char *pd[1] = {x->days};
	int rc = exec_tuples(c,
			     "SELECT warden.trace_partitions(d::date) FROM "
			     "jsonb_array_elements_text($1::jsonb) d",
			     1, pd, "ship: partitions", err);
	/* each: $1 the node, $2 a JSON array */
	const struct {
		bool on;
		const char *arg, *what, *sql;
	} st[] = {
	    {true, x->lines, "ship: lines",
	     "INSERT INTO warden.trace_lines (node_id, seq, day, "
	     "run_id, line) SELECT $1, x.seq, x.day::date, x.run_id, "
	     "x.line FROM jsonb_to_recordset($2::jsonb) AS x(seq "
	     "bigint, day text, run_id text, line text) ON CONFLICT "
	     "DO NOTHING"},
	    {true, x->rows, "ship: records",
	     "INSERT INTO warden.trace_records (node_id, seq, day, "
	     "run_id, step, type, tool, call_id, status, prompt_hash, "
	     "result_hash, ts) SELECT $1, x.seq, x.day::date, x.run_id, "
	     "x.step, x.type, x.tool, x.call_id, x.status, "
	     "x.prompt_hash, x.result_hash, x.ts::timestamptz FROM "
	     "jsonb_to_recordset($2::jsonb) AS x(seq bigint, day text, "
	     "run_id text, step integer, type text, tool text, call_id "
	     "text, status text, prompt_hash text, result_hash text, ts "
	     "text) ON CONFLICT DO NOTHING"},
	    /* an interrupted run's last attempt was read from what had
	     * been shipped when it was lost: its node, back, ships the
	     * rest -- what it named then is refreshed */
	    {true, x->rows, "ship: last attempts",
	     "UPDATE warden.runs SET last_attempt = " LAST_ATTEMPT
	     " WHERE state = 'interrupted' AND node_id = $1 AND CASE WHEN "
	     "attempt > 0 THEN id || '-a' || attempt ELSE id END IN (SELECT "
	     "x.run_id FROM jsonb_to_recordset($2::jsonb) AS x(run_id text, "
	     "type text) WHERE x.type IN ('tool_attempt', 'tool_result'))"},
	    {blobs > 0, x->blobs, "ship: blobs",
	     "INSERT INTO warden.trace_blobs (ref, body, node_id, "
	     "run_id, day) SELECT x.ref, decode(x.body, 'hex'), $1, "
	     "x.run_id, x.day::date FROM jsonb_to_recordset($2::jsonb) "
	     "AS x(ref text, body text, run_id text, day text) ON "
	     "CONFLICT (ref) DO UPDATE SET node_id = EXCLUDED.node_id, "
	     "run_id = EXCLUDED.run_id, day = EXCLUDED.day WHERE "
	     "EXCLUDED.day >= trace_blobs.day"},
	    {runs, x->runs, "ship: runs",
	     "INSERT INTO warden.trace_runs (run_id, node_id, agent, "
	     "team, user_name, uid, model, status, started, ended, "
	     "cost_usd, input_tokens, output_tokens, steps, payloads, "
	     "retention_days, flagged) SELECT "
	     "x.run_id, $1, x.agent, x.team, x.user_name, x.uid, "
	     "x.model, x.status, x.started::timestamptz, "
	     "x.ended::timestamptz, x.cost_usd, x.input_tokens, "
	     "x.output_tokens, x.steps, x.payloads, x.retention_days, "
	     "coalesce(x.flagged, false) FROM "
	     "jsonb_to_recordset($2::jsonb) "
	     "AS x(run_id text, agent text, team text, user_name text, "
	     "uid bigint, model text, status text, started text, ended "
	     "text, cost_usd double precision, input_tokens bigint, "
	     "output_tokens bigint, steps integer, payloads text, "
	     "retention_days integer, flagged boolean) "
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
	     "steps = coalesce(EXCLUDED.steps, trace_runs.steps), "
	     "payloads = coalesce(EXCLUDED.payloads, "
	     "trace_runs.payloads), "
	     "retention_days = coalesce(EXCLUDED.retention_days, "
	     "trace_runs.retention_days), "
	     "flagged = EXCLUDED.flagged OR trace_runs.flagged"},
	    {true, x->last, "ship: cursor",
	     "INSERT INTO warden.trace_ship (node_id, seq, shipped_at) "
	     "VALUES ($1, $2::bigint, now()) ON CONFLICT (node_id) DO "
	     "UPDATE SET seq = greatest(trace_ship.seq, EXCLUDED.seq), "
	     "shipped_at = now()"},
	};
	for (size_t i = 0; !rc && i < WD_ARRAY_SIZE(st); i++) {
		const char *pv[2] = {f->node_id, st[i].arg};
		if (st[i].on)
			rc = exec_params(c, st[i].sql, 2, pv, st[i].what, err);
	}
	/* bodies the database had: the row names the latest run instead;
	 * one gc deleted since it was looked up is sent again (the batch is
	 * rolled back and read anew) */
	const char *pm[2] = {f->node_id, x->known};
	if (!rc && known) {
		PGresult *r = PQexecParams(
		    c,
		    "UPDATE warden.trace_blobs b SET node_id = CASE WHEN "
		    "x.day::date >= b.day THEN $1 ELSE b.node_id END, run_id = "
		    "CASE WHEN x.day::date >= b.day THEN x.run_id ELSE "
		    "b.run_id END, day = greatest(b.day, x.day::date) FROM "
		    "jsonb_to_recordset($2::jsonb) AS x(ref text, run_id text, "
		    "day text) WHERE b.ref = x.ref",
		    2, NULL, pm, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rc = fl_pg_err(r, c, "ship: blobs known", err);
		else {
			if (strtoul(PQcmdTuples(r), NULL, 10) != known)
				rc =
				    wd_err_set(err, -EAGAIN,
					       "ship: a blob was deleted by gc "
					       "meanwhile; sending it again");
			PQclear(r);
		}
	}
	return rc;
}

/* One batch: 0 with *n records shipped (0: nothing new), or -errno. */
static int ship_batch(struct wd_fleet *f, PGconn *c, size_t *n,
		      struct wd_err *err)
{
	*n = 0;
	pthread_mutex_lock(&f->mu);
	int64_t from = f->shipped_seq;
	pthread_mutex_unlock(&f->mu);
	struct wd_trace *t = wd_rt_trace(f->rt);
	/* the index's rows (wd_trace_query_records waits for what was
	 * appended to be indexed), then the same records' lines */
	struct wd_trace_query q = {.after_seq = (uint64_t)from,
				   .limit = SHIP_BATCH};
	json_t *rows = NULL, *lines = NULL, *have = NULL;
	json_t *blobs = json_object(), *runs = json_array(),
	       *seen = json_object(), *days = json_object();
	struct ship_text x = {0};
	int rc = wd_trace_query_records(t, &q, &rows, err);
	if (!rc && json_array_size(rows))
		rc = wd_trace_lines(t, (uint64_t)from,
				    (unsigned)json_array_size(rows), &lines,
				    err);
	if (rc || !json_array_size(rows))
		goto out;
	/* both are the index's prefix after `from`: the same seqs */
	size_t m = json_array_size(lines);
	if (m != json_array_size(rows) ||
	    json_integer_value(
		json_object_get(json_array_get(lines, m - 1), "seq")) !=
		json_integer_value(
		    json_object_get(json_array_get(rows, m - 1), "seq"))) {
		rc = wd_err_set(err, -EAGAIN,
				"ship: the index changed under the batch");
		goto out;
	}
	size_t i;
	json_t *l;
	json_array_foreach(lines, i, l)
	{
		char day[16];
		utc_day(json_integer_value(json_object_get(l, "ts_us")), day);
		json_object_set_new(l, "day", json_string(day));
	}
	rc = begin(c, err);
	if (!rc)
		rc = blobs_present(c, lines, &have, err);
	if (!rc)
		m = batch_blobs(t, lines, have, blobs, &rc, err);
	if (rc)
		goto rollback;
	json_t *lv = json_array(), *rv = json_array();
	int64_t last = from;
	for (i = 0; i < m; i++) {
		l = json_array_get(lines, i);
		json_t *r = json_array_get(rows, i);
		const char *day = str(l, "day");
		json_object_set_new(days, day, json_true());
		last = json_integer_value(json_object_get(l, "seq"));
		json_array_append_new(
		    lv, json_pack("{s:I, s:s, s:O, s:O}", "seq",
				  (json_int_t)last, "day", day, "run_id",
				  json_object_get(l, "run_id"), "line",
				  json_object_get(l, "line")));
		json_object_set_new(r, "day", json_string(day));
		json_array_append(rv, r);
		const char *type = str(r, "type"), *id = str(r, "run_id");
		if (!id || !type || json_object_get(seen, id) ||
		    (strcmp(type, "run_start") && strcmp(type, "run_end") &&
		     strcmp(type, "flag")))
			continue;
		json_object_set_new(seen, id, json_true());
		json_t *row = run_row(t, id);
		if (row)
			json_array_append_new(runs, row);
	}
	json_t *dv = json_array(), *bv = json_array(), *kv = json_array();
	const char *k;
	json_t *v;
	json_object_foreach(days, k, v)
	    json_array_append_new(dv, json_string(k));
	json_object_foreach(blobs, k, v)
	    json_array_append(json_object_get(v, "body") ? bv : kv, v);
	x.days = json_dumps(dv, JSON_COMPACT);
	x.lines = json_dumps(lv, JSON_COMPACT);
	x.rows = json_dumps(rv, JSON_COMPACT);
	x.runs = json_dumps(runs, JSON_COMPACT);
	x.blobs = json_dumps(bv, JSON_COMPACT);
	x.known = json_dumps(kv, JSON_COMPACT);
	x.last = wd_asprintf("%lld", (long long)last);
	size_t nb = json_array_size(bv), nk = json_array_size(kv);
	json_decref(kv);
	json_decref(dv);
	json_decref(lv);
	json_decref(rv);
	json_decref(bv);
	rc = ship_write(f, c, &x, json_array_size(runs), nb, nk, err);
	if (!rc) {
		PGresult *e = PQexec(c, "COMMIT");
		rc = PQresultStatus(e) == PGRES_COMMAND_OK
			 ? (PQclear(e), 0)
			 : fl_pg_err(e, c, "ship: commit", err);
	}
	if (!rc) {
		*n = m;
		pthread_mutex_lock(&f->mu);
		f->shipped_seq = last;
		f->m_shipped += m;
		f->m_blobs_shipped += nb;
		pthread_mutex_unlock(&f->mu);
		goto out;
	}
rollback:
	PQclear(PQexec(c, "ROLLBACK"));
out:
	free(x.days);
	free(x.lines);
	free(x.rows);
	free(x.runs);
	free(x.blobs);
	free(x.known);
	free(x.last);
	json_decref(rows);
	json_decref(lines);
	json_decref(have);
	json_decref(blobs);
	json_decref(runs);
	json_decref(seen);
	json_decref(days);
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

/* How old the oldest record not in the database is, for /metrics: 0 when
 * the last look found none, -1 while the cursor is not known. */
static void note_lag(struct wd_fleet *f, bool caught_up)
{
	pthread_mutex_lock(&f->mu);
	int64_t from = f->shipped_seq;
	pthread_mutex_unlock(&f->mu);
	double lag = caught_up ? 0 : -1;
	json_t *l = NULL;
	if (!caught_up && from >= 0 &&
	    !wd_trace_lines(wd_rt_trace(f->rt), (uint64_t)from, 1, &l, NULL)) {
		json_t *x = json_array_get(l, 0);
		int64_t ts = json_integer_value(json_object_get(x, "ts_us"));
		int64_t now = (int64_t)(wd_wall_ns() / 1000);
		lag = x && now > ts ? (double)(now - ts) / 1e6 : 0;
		json_decref(l);
	}
	pthread_mutex_lock(&f->mu);
	f->ship_lag_s = lag;
	pthread_mutex_unlock(&f->mu);
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
			f->ship_db = fl_connect(f, 0);
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
			note_lag(f, false);
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
		note_lag(f, n < SHIP_BATCH);
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
