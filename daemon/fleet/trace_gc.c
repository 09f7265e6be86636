/* `warden fleet gc`: the fleet's trace retention (seed 000 step 8: full
 * traces 30 days, metadata 13 months), as `warden trace gc` applies it to
 * a node's own store (trace/gc.c):
 *  - metadata: the day partitions of warden.trace_lines and
 *    warden.trace_records older than metadata_days (395 by default) are
 *    dropped whole (DROP TABLE: the space comes back at once), oldest day
 *    first, each in a transaction that first records, per node, the last
 *    seq dropped and its line's hash (warden.trace_gc): the node's shipped
 *    chain then verifies from the next seq (trace_verify.c). The runs that
 *    ended (or, never ended, started) before the cutoff leave
 *    warden.trace_runs;
 *  - payloads: a blob row goes when the run that last named it ended ok,
 *    is not flagged, and its retention_days (30 when its run_start named
 *    none) have passed since its end; blobs of failed, flagged or
 *    unfinished runs stay until metadata retention takes their day;
 *  - the queue (warden.runs, warden.approvals): an ended run's task and
 *    output are cleared by the payload rule of its shipped trace_runs row;
 *    ended runs and done approvals go past metadata_days.
 * Days are UTC days of the records' own timestamps; the database's clock
 * says what today is.
 *
 * It deletes for the whole fleet: root only (the rule of policy reload),
 * through any node's wardend. One gc at a time (an advisory lock: a second
 * one is refused, not queued). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "fleet/fleet_int.h"
#include "policy/agent.h"
#include "trace/trace.h"

/* "warden" + 2: the gc's advisory lock */
#define GC_LOCK "7775716110734416"

static int run(PGconn *c, const char *sql, int n, const char **pv,
	       PGresult **out, struct wd_err *err)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, pv, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK &&
	    PQresultStatus(r) != PGRES_COMMAND_OK)
		return fl_pg_err(r, c, "fleet gc", err);
	if (out)
		*out = r;
	else
		PQclear(r);
	return 0;
}

/* A statement answering one row of counts: column i into o[keys[i]]. */
static int counts(PGconn *c, const char *sql, int n, const char **pv,
		  const char *const *keys, int nk, json_t *o,
		  struct wd_err *err)
{
	PGresult *r;
	int rc = run(c, sql, n, pv, &r, err);
	if (rc)
		return rc;
	for (int i = 0; i < nk; i++)
		json_object_set_new(
		    o, keys[i],
		    json_integer(strtoll(PQgetvalue(r, 0, i), NULL, 10)));
	PQclear(r);
	return 0;
}

/* Drop one day: the last dropped line of each node is remembered first,
 * in the same transaction. *lines: the lines it held. */
static int drop_day(PGconn *c, const char *day, json_t *dropped, int64_t *lines,
		    struct wd_err *err)
{
	char ln[64], rn[64];
	snprintf(ln, sizeof(ln), "trace_lines_%s", day);
	snprintf(rn, sizeof(rn), "trace_records_%s", day);
	/* the names are the catalog's (YYYYMMDD checked by the caller) */
	char *sql_last = wd_asprintf(
	    "SELECT DISTINCT ON (node_id) node_id, seq, line FROM warden.%s "
	    "ORDER BY node_id, seq DESC",
	    ln);
	char *sql_n = wd_asprintf("SELECT count(*) FROM warden.%s", ln);
	PGresult *r = NULL;
	int rc = run(c, "BEGIN", 0, NULL, NULL, err);
	bool lines_exist = true;
	if (!rc) {
		const char *pv[1] = {ln};
		rc = run(c, "SELECT to_regclass('warden.' || $1) IS NOT NULL",
			 1, pv, &r, err);
		if (!rc) {
			lines_exist = *PQgetvalue(r, 0, 0) == 't';
			PQclear(r);
		}
	}
	if (!rc && lines_exist)
		rc = run(c, sql_last, 0, NULL, &r, err);
	for (int i = 0; !rc && lines_exist && i < PQntuples(r); i++) {
		char h[WD_TRACE_REF_LEN];
		wd_trace_ref_of(PQgetvalue(r, i, 2),
				(size_t)PQgetlength(r, i, 2), h);
		const char *pv[3] = {PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
				     h};
		rc = run(c,
			 "INSERT INTO warden.trace_gc (node_id, last_seq, "
			 "last_hash) VALUES ($1, $2::bigint, $3) ON CONFLICT "
			 "(node_id) DO UPDATE SET last_seq = EXCLUDED.last_seq,"
			 " last_hash = EXCLUDED.last_hash, dropped_at = now() "
			 "WHERE EXCLUDED.last_seq > trace_gc.last_seq",
			 3, pv, NULL, err);
	}
	if (lines_exist && r)
		PQclear(r);
	*lines = 0;
	if (!rc && lines_exist) {
		rc = run(c, sql_n, 0, NULL, &r, err);
		if (!rc) {
			*lines = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
			PQclear(r);
		}
	}
	const char *names[2] = {ln, rn};
	for (int i = 0; !rc && i < 2; i++) {
		const char *pv[1] = {names[i]};
		rc = run(c, "SELECT to_regclass('warden.' || $1) IS NOT NULL",
			 1, pv, &r, err);
		if (rc)
			break;
		bool exists = *PQgetvalue(r, 0, 0) == 't';
		PQclear(r);
		if (!exists)
			continue;
		char *d = wd_asprintf("DROP TABLE warden.%s", names[i]);
		rc = run(c, d, 0, NULL, NULL, err);
		free(d);
		if (!rc)
			json_array_append_new(
			    dropped, json_sprintf("warden.%s", names[i]));
	}
	if (!rc)
		rc = run(c, "COMMIT", 0, NULL, NULL, err);
	if (rc)
		PQclear(PQexec(c, "ROLLBACK"));
	else
		wd_info("fleet gc: dropped the partitions of %s (%lld lines)",
			day, (long long)*lines);
	free(sql_last);
	free(sql_n);
	return rc;
}

static bool is_day(const char *s)
{
	if (strlen(s) != 8)
		return false;
	for (int i = 0; i < 8; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* The deletions after the days' partitions, each one statement answering
 * its counts ($1 metadata days, $2 the default payload days):
 *  - payload blobs of runs past their payload retention, and of days past
 *    metadata retention */
#define SQL_BLOBS                                                              \
	"WITH d AS (DELETE FROM warden.trace_blobs b WHERE b.day < (now() AT " \
	"TIME ZONE 'UTC')::date - $1::integer OR EXISTS (SELECT 1 FROM "       \
	"warden.trace_runs x WHERE x.run_id = b.run_id AND x.node_id = "       \
	"b.node_id AND x.ended IS NOT NULL AND x.status IN ('ok', "            \
	"'completed', 'success') AND NOT x.flagged AND x.ended + "             \
	"coalesce(x.retention_days, $2::integer) * interval '1 day' < now()) " \
	"RETURNING octet_length(b.body) AS n) SELECT count(*), "               \
	"coalesce(sum(n), 0) FROM d"
/*  - the queue's payloads (a run's task and output) by the same rule,
 *    learnt from the run's shipped trace_runs row (under its local id,
 *    queue.c): a run without one (not shipped: a hash_only agent puts no
 *    task here) keeps them until its row goes ($1 the default payload
 *    days) */
#define SQL_RUN_PAYLOADS                                                       \
	"WITH d AS (UPDATE warden.runs r SET task = NULL, output = NULL "      \
	"WHERE r.ended_at IS NOT NULL AND (r.task IS NOT NULL OR r.output IS " \
	"NOT NULL) AND EXISTS (SELECT 1 FROM warden.trace_runs x WHERE "       \
	"x.node_id = r.node_id AND x.run_id = CASE WHEN r.attempt > 0 THEN "   \
	"r.id || '-a' || r.attempt ELSE r.id END AND x.ended IS NOT NULL AND " \
	"x.status IN ('ok', 'completed', 'success') AND NOT x.flagged AND "    \
	"r.ended_at + coalesce(x.retention_days, $1::integer) * interval '1 "  \
	"day' < now()) RETURNING 1) SELECT count(*) FROM d"
/* the start of the UTC day $1 days ago */
#define CUTOFF                                                                 \
	"((now() AT TIME ZONE 'UTC')::date - $1::integer)::timestamp AT TIME " \
	"ZONE 'UTC'"
/*  - the queue's metadata: ended runs and done approvals past the window */
#define SQL_QUEUE_META                                                         \
	"WITH d AS (DELETE FROM warden.runs WHERE state IN ('done', "          \
	"'interrupted') AND ended_at < " CUTOFF " RETURNING 1), a AS (DELETE " \
	"FROM warden.approvals WHERE state = 'done' AND coalesce(decided_at, " \
	"created_at) < " CUTOFF " RETURNING 1) SELECT (SELECT count(*) FROM "  \
	"d), (SELECT count(*) FROM a)"
/*  - the shipped index's runs past the window */
#define SQL_TRACE_RUNS                                                         \
	"WITH d AS (DELETE FROM warden.trace_runs WHERE coalesce(ended, "      \
	"started) < " CUTOFF " RETURNING 1) SELECT count(*) FROM d"

static int gc(PGconn *c, unsigned metadata_days, json_t *o, struct wd_err *err)
{
	char md[16], pd[16];
	snprintf(md, sizeof(md), "%u", metadata_days);
	snprintf(pd, sizeof(pd), "%d", WD_AGENT_DEFAULT_RETENTION_DAYS);
	const char *pv[1] = {md};
	PGresult *r;
	/* the days whose partitions are past retention, oldest first */
	int rc = run(
	    c,
	    "SELECT DISTINCT right(k.relname, 8) FROM pg_inherits i JOIN "
	    "pg_class k ON k.oid "
	    "= i.inhrelid JOIN pg_class p ON p.oid = i.inhparent JOIN "
	    "pg_namespace n ON n.oid = p.relnamespace WHERE n.nspname = "
	    "'warden' AND p.relname IN ('trace_lines', 'trace_records') AND "
	    "k.relname ~ '_[0-9]{8}$' AND to_date(right(k.relname, 8), "
	    "'YYYYMMDD') < (now() AT TIME ZONE 'UTC')::date - $1::integer "
	    "ORDER BY 1",
	    1, pv, &r, err);
	if (rc)
		return rc;
	json_t *dropped = json_array();
	int64_t lines = 0;
	for (int i = 0; !rc && i < PQntuples(r); i++) {
		int64_t n = 0;
		if (is_day(PQgetvalue(r, i, 0)))
			rc = drop_day(c, PQgetvalue(r, i, 0), dropped, &n, err);
		lines += n;
	}
	PQclear(r);
	json_object_set_new(o, "partitions_dropped", dropped);
	json_object_set_new(o, "lines_removed", json_integer(lines));
	if (rc)
		return rc;
	/* payloads first: the runs that decide them are still there */
	const char *pb[2] = {md, pd};
	const struct {
		const char *sql;
		int n;
		const char **pv;
		const char *keys[2];
		int nk;
	} steps[] = {
	    {SQL_BLOBS, 2, pb, {"blobs_deleted", "blob_bytes_deleted"}, 2},
	    {SQL_RUN_PAYLOADS, 1, pb + 1, {"run_payloads_cleared"}, 1},
	    {SQL_QUEUE_META,
	     1,
	     pv,
	     {"queue_runs_removed", "approvals_removed"},
	     2},
	    {SQL_TRACE_RUNS, 1, pv, {"runs_removed"}, 1},
	};
	for (size_t i = 0; !rc && i < WD_ARRAY_SIZE(steps); i++)
		rc = counts(c, steps[i].sql, steps[i].n, steps[i].pv,
			    steps[i].keys, steps[i].nk, o, err);
	return rc;
}

json_t *wd_fleet_trace_gc(struct wd_fleet *f, const struct wd_caller *c,
			  unsigned metadata_days, struct wd_err *err)
{
	if (c->uid != 0 && c->uid != geteuid()) {
		wd_err_set(err, -EPERM,
			   "fleet gc deletes every node's shipped trace past "
			   "retention: root only");
		errno = EPERM;
		return NULL;
	}
	if (!metadata_days)
		metadata_days = WD_TRACE_METADATA_DAYS;
	PGconn *db = fl_connect(f, 0);
	int rc = PQstatus(db) == CONNECTION_OK
		     ? 0
		     : fl_pg_err(NULL, db, "fleet database unreachable", err);
	PGresult *r = NULL;
	if (!rc)
		rc = run(db, "SELECT pg_try_advisory_lock(" GC_LOCK ")", 0,
			 NULL, &r, err);
	if (!rc && *PQgetvalue(r, 0, 0) != 't')
		rc = wd_err_set(err, -EBUSY,
				"another fleet gc is running (advisory lock "
				"held)");
	if (r)
		PQclear(r);
	json_t *o =
	    json_pack("{s:i, s:i}", "metadata_days", (int)metadata_days,
		      "payload_days_default", WD_AGENT_DEFAULT_RETENTION_DAYS);
	if (!rc)
		rc = gc(db, metadata_days, o, err);
	PQfinish(db); /* the lock goes with the session */
	if (rc) {
		json_decref(o);
		errno = rc == -EBUSY ? EBUSY : EAGAIN;
		return NULL;
	}
	return o;
}
