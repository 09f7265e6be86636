/* The fleet's schema, created and migrated by wardend itself (README "More
 * than one node"). Each version is a list of statements; a node applies
 * the versions the database lacks, in order, in one transaction that first
 * takes a transaction-scoped advisory lock: nodes starting together queue
 * on the lock, and the second one finds the work done (the version table
 * is read after the lock, never before). A database at a version this
 * build does not know is refused: an older wardend must not write tables
 * whose meaning changed under it. Statements here carry no outside value
 * (constant text); everything else goes through PQexecParams. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "fleet/fleet_int.h"

/* "warden" in ASCII: the advisory lock's key */
#define MIGRATE_LOCK "7775716110734414"

static const char *const v1[] = {
    "CREATE SCHEMA IF NOT EXISTS warden",
    "CREATE TABLE warden.nodes ("
    " id text PRIMARY KEY,"
    " hostname text NOT NULL,"
    " version text NOT NULL,"
    " capacity integer NOT NULL CHECK (capacity >= 0),"
    " labels jsonb NOT NULL DEFAULT '{}',"
    " state text NOT NULL CHECK (state IN ('up', 'lost', 'stopped')),"
    " started_at timestamptz NOT NULL,"
    " heartbeat_at timestamptz NOT NULL,"
    " lease_until timestamptz NOT NULL)",
    "CREATE SEQUENCE warden.claim_order",
    "CREATE TABLE warden.runs ("
    " id text PRIMARY KEY,"
    " team text NOT NULL,"
    " agent text NOT NULL,"
    " task text NOT NULL,"
    " uid bigint NOT NULL,"
    " gid bigint NOT NULL,"
    " user_name text NOT NULL,"
    " submitted_node text NOT NULL,"
    " submitted_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
    " state text NOT NULL DEFAULT 'queued'"
    "  CHECK (state IN ('queued', 'running', 'done', 'interrupted')),"
    " node_id text,"
    " claim_order bigint,"
    " claimed_at timestamptz,"
    " lease_until timestamptz,"
    " ended_at timestamptz,"
    " status text,"
    " reason text,"
    " output text,"
    " steps integer,"
    " cost_usd double precision)",
    "CREATE INDEX runs_queued ON warden.runs (team, submitted_at, id)"
    " WHERE state = 'queued'",
    "CREATE INDEX runs_running ON warden.runs (node_id)"
    " WHERE state = 'running'",
    "CREATE INDEX runs_lease ON warden.runs (lease_until)"
    " WHERE state = 'running'",
    /* Fair share: teams in order of the runs they hold fleet-wide (then
     * their oldest queued run); the first team whose oldest queued run
     * is not locked by another claimer gets it. A team with 100 queued
     * runs is one candidate like a team with 5. */
    "CREATE FUNCTION warden.claim(p_node text, p_lease_ms integer)"
    " RETURNS TABLE (c_id text, c_agent text, c_task text, c_uid bigint,"
    "  c_gid bigint, c_user text)"
    " LANGUAGE plpgsql AS $$"
    " DECLARE t record; rid text;"
    " BEGIN"
    "  FOR t IN"
    "   SELECT q.team FROM"
    "    (SELECT team, min(submitted_at) AS oldest FROM warden.runs"
    "     WHERE state = 'queued' GROUP BY team) q"
    "   LEFT JOIN (SELECT team, count(*) AS n FROM warden.runs"
    "     WHERE state = 'running' GROUP BY team) h ON h.team = q.team"
    "   ORDER BY coalesce(h.n, 0), q.oldest"
    "  LOOP"
    "   SELECT r.id INTO rid FROM warden.runs r"
    "    WHERE r.state = 'queued' AND r.team = t.team"
    "    ORDER BY r.submitted_at, r.id LIMIT 1 FOR UPDATE SKIP LOCKED;"
    "   IF FOUND THEN"
    "    UPDATE warden.runs r SET state = 'running',"
    "     node_id = p_node, claim_order = nextval('warden.claim_order'),"
    "     claimed_at = clock_timestamp(),"
    "     lease_until = clock_timestamp()"
    "      + p_lease_ms * interval '1 millisecond'"
    "     WHERE r.id = rid"
    "     RETURNING r.id, r.agent, r.task, r.uid, r.gid, r.user_name"
    "     INTO c_id, c_agent, c_task, c_uid, c_gid, c_user;"
    "    RETURN NEXT;"
    "    RETURN;"
    "   END IF;"
    "  END LOOP;"
    " END $$",
};

/* a shipped index row's columns after its key (v2, v6) */
#define RECORD_COLS                                                            \
	" run_id text, step integer, type text NOT NULL, tool text, call_id "  \
	"text, status text, prompt_hash text, result_hash text, ts "           \
	"timestamptz,"

/* The trace index, shipped (ship.c): each node's index rows by (node,
 * seq), the runs they belong to, and each node's cursor. */
static const char *const v2[] = {
    "CREATE TABLE warden.trace_records ("
    " node_id text NOT NULL,"
    " seq bigint NOT NULL," RECORD_COLS " PRIMARY KEY (node_id, seq))",
    "CREATE INDEX trace_records_run ON warden.trace_records (run_id, seq)",
    "CREATE TABLE warden.trace_runs ("
    " run_id text PRIMARY KEY,"
    " node_id text NOT NULL,"
    " agent text,"
    " team text,"
    " user_name text,"
    " uid bigint,"
    " model text,"
    " status text,"
    " started timestamptz,"
    " ended timestamptz,"
    " cost_usd double precision,"
    " input_tokens bigint,"
    " output_tokens bigint,"
    " steps integer)",
    "CREATE INDEX trace_runs_started ON warden.trace_runs (started)",
    "CREATE TABLE warden.trace_ship ("
    " node_id text PRIMARY KEY,"
    " seq bigint NOT NULL,"
    " shipped_at timestamptz NOT NULL)",
};

/* warden.claim() of v3 and later (v5 adds the run's attempt; capacity per
 * tier its argument p_tiers and a filter on the runs it may take) */
#define CLAIM_FN(EXTRA_ARG, EXTRA_WHERE, EXTRA_OUT, EXTRA_RET, EXTRA_INTO)     \
	"CREATE FUNCTION warden.claim(p_node text, p_lease_ms integer,"        \
	" p_labels jsonb" EXTRA_ARG ")"                                        \
	" RETURNS TABLE (c_id text, c_agent text, c_task text, c_uid bigint,"  \
	"  c_gid bigint, c_user text" EXTRA_OUT ")"                            \
	" LANGUAGE plpgsql AS $$"                                              \
	" DECLARE t record; rid text;"                                         \
	" BEGIN"                                                               \
	"  FOR t IN"                                                           \
	"   SELECT q.team FROM"                                                \
	"    (SELECT team, min(submitted_at) AS oldest FROM warden.runs"       \
	"     WHERE state = 'queued' AND placement <@ p_labels" EXTRA_WHERE    \
	"     GROUP BY team) q"                                                \
	"   LEFT JOIN (SELECT team, count(*) AS n FROM warden.runs"            \
	"     WHERE state = 'running' GROUP BY team) h ON h.team = q.team"     \
	"   ORDER BY coalesce(h.n, 0), q.oldest"                               \
	"  LOOP"                                                               \
	"   SELECT r.id INTO rid FROM warden.runs r"                           \
	"    WHERE r.state = 'queued' AND r.team = t.team"                     \
	"    AND r.placement <@ p_labels" EXTRA_WHERE                          \
	"    ORDER BY r.submitted_at, r.id LIMIT 1 FOR UPDATE SKIP LOCKED;"    \
	"   IF FOUND THEN"                                                     \
	"    UPDATE warden.runs r SET state = 'running',"                      \
	"     node_id = p_node, claim_order = nextval('warden.claim_order'),"  \
	"     claimed_at = clock_timestamp(),"                                 \
	"     lease_until = clock_timestamp()"                                 \
	"      + p_lease_ms * interval '1 millisecond'"                        \
	"     WHERE r.id = rid"                                                \
	"     RETURNING r.id, r.agent, r.task, r.uid, r.gid, "                 \
	"r.user_name" EXTRA_RET                                                \
	"     INTO c_id, c_agent, c_task, c_uid, c_gid, c_user" EXTRA_INTO ";" \
	"    RETURN NEXT;"                                                     \
	"    RETURN;"                                                          \
	"   END IF;"                                                           \
	"  END LOOP;"                                                          \
	" END $$"

/* Placement: a run's labels (its agent's `placement`), which a node's own
 * labels must contain for it to claim the run; fair share as in v1, over
 * the runs the claiming node may take. */
static const char *const v3[] = {
    "ALTER TABLE warden.runs ADD COLUMN placement jsonb NOT NULL "
    "DEFAULT '{}'",
    "DROP FUNCTION warden.claim(text, integer)",
    CLAIM_FN("", "", "", "", ""),
};

/* Approvals across nodes (approvals.c): each node publishes its pending
 * approvals (no arguments: those are payload, read on the run's node); a
 * decision taken on another node is written here and applied by the
 * run's node, under its own approver check. */
static const char *const v4[] = {
    "CREATE TABLE warden.approvals ("
    " id text PRIMARY KEY,"
    " node_id text NOT NULL,"
    " run_id text NOT NULL,"
    " agent text,"
    " team text,"
    " user_name text,"
    " uid bigint,"
    " tool text,"
    " reason text,"
    " created_at timestamptz,"
    " expires_at timestamptz,"
    " state text NOT NULL CHECK (state IN ('pending', 'decided', 'done')),"
    " decision text CHECK (decision IN ('approve', 'deny')),"
    " decided_by_uid bigint,"
    " decided_by text,"
    " decision_reason text,"
    " decided_on text,"
    " decided_at timestamptz,"
    " result_code integer,"
    " result text)",
    "CREATE INDEX approvals_node ON warden.approvals (node_id, state)",
};

/* resume: if_read_only: a lost node's run of such an agent is queued again
 * (node.c), at most WD_FLEET_ATTEMPTS times; a claim says which attempt it
 * is (the local run's id, queue.c). */
static const char *const v5[] = {
    "ALTER TABLE warden.runs ADD COLUMN resume boolean NOT NULL DEFAULT "
    "false, ADD COLUMN attempt integer NOT NULL DEFAULT 0",
    "DROP FUNCTION warden.claim(text, integer, jsonb)",
    CLAIM_FN("", "", ", c_attempt integer", ", r.attempt", ", c_attempt"),
};

/* Capacity per tier: each node's room for runs that use tier 1, 2, 3 (0
 * for a tier it cannot run), each run's tiers (bit 1 << tier: its agent's
 * tools and its sub-agents'); a node claims only runs all of whose tiers
 * it has room for now (p_tiers, the same bits). Self-contained: it adds
 * columns and replaces claim(), whatever steps came before it. */
#define TIER_CAP(T)                                                            \
	" ADD COLUMN capacity_t" #T " integer NOT NULL DEFAULT 0"              \
	" CHECK (capacity_t" #T " >= 0)"
static const char *const v_tiers[] = {
    "ALTER TABLE warden.nodes" TIER_CAP(1) "," TIER_CAP(2) "," TIER_CAP(3),
    "ALTER TABLE warden.runs ADD COLUMN tiers integer NOT NULL DEFAULT 0",
    "DROP FUNCTION warden.claim(text, integer, jsonb)",
    CLAIM_FN(", p_tiers integer", " AND (tiers & ~p_tiers) = 0",
	     ", c_attempt integer, c_tiers integer", ", r.attempt, r.tiers",
	     ", c_attempt, c_tiers"),
};

/* The trace itself, shipped (ship.c), partitioned by the records' UTC day
 * so retention (fleet/trace_gc.c) drops whole partitions:
 *  - trace_lines: each record's segment line exactly as the node holds it
 *    (the chain, `prev`, recomputes from them: fleet/trace_verify.c);
 *  - trace_records, v2's index rows, moved under the same day partitions;
 *  - trace_blobs: payload blobs as the node stores them (zlib), one row
 *    per ref, for runs whose payloads are not hash_only; a ref is not a
 *    day, so this table is not partitioned: gc deletes its rows;
 *  - trace_runs learns what payload retention needs (payloads,
 *    retention_days, flagged);
 *  - trace_gc: where each node's shipped chain starts after gc dropped the
 *    days before (the last dropped seq and its line's hash).
 * warden.trace_partitions(day) creates a day's partitions when missing;
 * the shipper calls it before a batch with a new day. Nodes shipping the
 * first record of a day together queue on an advisory lock (keyed by the
 * day) instead of racing to create the same table. */
static const char *const v6[] = {
    "CREATE TABLE warden.trace_lines ("
    " node_id text NOT NULL,"
    " seq bigint NOT NULL,"
    " day date NOT NULL,"
    " run_id text,"
    " line text NOT NULL,"
    " PRIMARY KEY (node_id, seq, day)) PARTITION BY RANGE (day)",
    "CREATE INDEX trace_lines_run ON warden.trace_lines (run_id, seq)",
    "CREATE TABLE warden.trace_blobs ("
    " ref text PRIMARY KEY,"
    " body bytea NOT NULL,"
    " node_id text NOT NULL,"
    " run_id text,"
    " day date NOT NULL)",
    "CREATE INDEX trace_blobs_day ON warden.trace_blobs (day)",
    "CREATE INDEX trace_blobs_run ON warden.trace_blobs (run_id)",
    "ALTER TABLE warden.trace_runs ADD COLUMN payloads text,"
    " ADD COLUMN retention_days integer,"
    " ADD COLUMN flagged boolean NOT NULL DEFAULT false",
    "CREATE INDEX trace_runs_ended ON warden.trace_runs (ended)",
    "CREATE TABLE warden.trace_gc ("
    " node_id text PRIMARY KEY,"
    " last_seq bigint NOT NULL,"
    " last_hash text NOT NULL,"
    " dropped_at timestamptz NOT NULL DEFAULT now())",
    "CREATE FUNCTION warden.trace_partitions(d date) RETURNS void"
    " LANGUAGE plpgsql AS $$"
    " DECLARE t text; p text;"
    " BEGIN"
    "  FOREACH t IN ARRAY ARRAY['trace_lines', 'trace_records'] LOOP"
    "   p := t || '_' || to_char(d, 'YYYYMMDD');"
    "   IF to_regclass('warden.' || p) IS NULL THEN"
    "    PERFORM pg_advisory_xact_lock(7775716, d - date '2000-01-01');"
    "    IF to_regclass('warden.' || p) IS NULL THEN"
    "     EXECUTE format('CREATE TABLE warden.%I PARTITION OF warden.%I"
    " FOR VALUES FROM (%L) TO (%L)', p, t, d, d + 1);"
    "    END IF;"
    "   END IF;"
    "  END LOOP;"
    " END $$",
    /* v2's index rows into day partitions: the day of each row's ts
     * (UTC), as the shipper computes it from the record */
    "ALTER TABLE warden.trace_records RENAME TO trace_records_v2",
    "ALTER TABLE warden.trace_records_v2 RENAME CONSTRAINT "
    "trace_records_pkey TO trace_records_v2_pkey",
    "ALTER INDEX warden.trace_records_run RENAME TO trace_records_v2_run",
    "CREATE TABLE warden.trace_records ("
    " node_id text NOT NULL,"
    " seq bigint NOT NULL,"
    " day date NOT NULL," RECORD_COLS " PRIMARY KEY (node_id, seq, day))"
    " PARTITION BY RANGE (day)",
    "CREATE INDEX trace_records_run ON warden.trace_records (run_id, seq)",
    "SELECT warden.trace_partitions(d) FROM (SELECT DISTINCT"
    " (coalesce(ts, now()) AT TIME ZONE 'UTC')::date AS d"
    " FROM warden.trace_records_v2) x",
    "INSERT INTO warden.trace_records (node_id, seq, day, run_id, step,"
    " type, tool, call_id, status, prompt_hash, result_hash, ts)"
    " SELECT node_id, seq, (coalesce(ts, now()) AT TIME ZONE 'UTC')::date,"
    " run_id, step, type, tool, call_id, status, prompt_hash, result_hash,"
    " ts FROM warden.trace_records_v2",
    "DROP TABLE warden.trace_records_v2",
};

/* A run interrupted fleet-wide names its last durable attempt as shipped
 * (node.c LOSE_RUN): {step, tool, call_id, seq, result}. Retention
 * (trace_gc.c) clears an ended run's task and output past its payload
 * retention: task may then be NULL. */
static const char *const v8[] = {
    "ALTER TABLE warden.runs ADD COLUMN last_attempt jsonb,"
    " ALTER COLUMN task DROP NOT NULL",
    "CREATE INDEX runs_ended ON warden.runs (ended_at)"
    " WHERE ended_at IS NOT NULL",
};

static const struct {
	const char *const *sql;
	size_t n;
} versions[] = {
    {v1, WD_ARRAY_SIZE(v1)},	       {v2, WD_ARRAY_SIZE(v2)},
    {v3, WD_ARRAY_SIZE(v3)},	       {v4, WD_ARRAY_SIZE(v4)},
    {v5, WD_ARRAY_SIZE(v5)},	       {v6, WD_ARRAY_SIZE(v6)},
    {v_tiers, WD_ARRAY_SIZE(v_tiers)}, {v8, WD_ARRAY_SIZE(v8)},
};

_Static_assert(WD_ARRAY_SIZE(versions) == WD_FLEET_SCHEMA_VERSION,
	       "one entry per schema version");

/* fl_exec's reason for the NULL it returned last on this thread: the
 * connection it cut (the connection's own message would only say it was
 * closed) */
static _Thread_local char cut_why[128];

PGresult *fl_exec(PGconn *c, const char *sql, int n, const char *const *pv,
		  int resfmt, unsigned wait_ms)
{
	cut_why[0] = 0;
	if (!PQsendQueryParams(c, sql, n, NULL, pv, NULL, NULL, resfmt))
		return NULL;
	uint64_t dl = wd_now_ns() + (uint64_t)wait_ms * 1000000ull;
	while (PQisBusy(c)) {
		uint64_t now = wd_now_ns();
		struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
		int pr = now < dl
			     ? poll(&p, 1, (int)((dl - now) / 1000000ull) + 1)
			     : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0 || pr < 0) {
			/* no reply in time: a half-open connection (a peer
			 * gone without a word, a stopped proxy) would hold
			 * this thread for ever. Cut: the connection is lost
			 * (fl_pg_lost) and made again; the statement's fate
			 * is unknown to the caller, as after any loss. */
			snprintf(cut_why, sizeof(cut_why),
				 "no reply from the database within %u ms: the "
				 "connection was dropped",
				 wait_ms);
			shutdown(PQsocket(c), SHUT_RDWR);
			while (PQconsumeInput(c) && PQisBusy(c) &&
			       PQstatus(c) == CONNECTION_OK)
				;
			PGresult *x;
			while ((x = PQgetResult(c)))
				PQclear(x);
			return NULL;
		}
		if (!PQconsumeInput(c))
			break; /* PQgetResult has the error */
	}
	/* the first error, else the last result (PQexec's rule, for one
	 * statement: one result) */
	PGresult *res = NULL, *x;
	while ((x = PQgetResult(c))) {
		ExecStatusType st = PQresultStatus(res);
		if (res &&
		    (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE)) {
			PQclear(x);
			continue;
		}
		PQclear(res);
		res = x;
	}
	return res;
}

int fl_pg_err(PGresult *r, PGconn *c, const char *what, struct wd_err *err)
{
	const char *m = r ? PQresultErrorMessage(r) : NULL;
	if ((!m || !*m) && cut_why[0])
		m = cut_why;
	if (!m || !*m)
		m = PQerrorMessage(c);
	char buf[400];
	snprintf(buf, sizeof(buf), "%s", m ? m : "?");
	size_t n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	PQclear(r);
	return wd_err_set(err, -EIO, "%s: %s", what, buf);
}

bool fl_pg_lost(PGconn *c)
{
	return !c || PQstatus(c) != CONNECTION_OK;
}

static int exec_ok(PGconn *c, const char *sql, const char *what,
		   struct wd_err *err)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, what, err);
	PQclear(r);
	return 0;
}

int fl_schema_migrate(PGconn *c, struct wd_err *err)
{
	int rc = exec_ok(c, "BEGIN", "schema: begin", err);
	if (rc)
		return rc;
	rc = exec_ok(c, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK ")",
		     "schema: lock", err);
	if (!rc)
		rc = exec_ok(c, "CREATE SCHEMA IF NOT EXISTS warden",
			     "schema: create", err);
	if (!rc)
		rc = exec_ok(c,
			     "CREATE TABLE IF NOT EXISTS warden.schema_version"
			     " (version integer PRIMARY KEY,"
			     " applied_at timestamptz NOT NULL DEFAULT now())",
			     "schema: version table", err);
	long have = 0;
	if (!rc) {
		PGresult *r = PQexec(c, "SELECT coalesce(max(version), 0)"
					" FROM warden.schema_version");
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			rc = fl_pg_err(r, c, "schema: version", err);
		else {
			have = strtol(PQgetvalue(r, 0, 0), NULL, 10);
			PQclear(r);
		}
	}
	if (!rc && have > WD_FLEET_SCHEMA_VERSION)
		rc = wd_err_set(err, -EPROTO,
				"the fleet database is at schema version %ld, "
				"newer than this wardend's %d: upgrade "
				"wardend",
				have, WD_FLEET_SCHEMA_VERSION);
	for (long v = have; !rc && v < WD_FLEET_SCHEMA_VERSION; v++) {
		for (size_t i = 0; !rc && i < versions[v].n; i++)
			rc = exec_ok(c, versions[v].sql[i], "schema: migrate",
				     err);
		if (rc)
			break;
		char vs[16];
		snprintf(vs, sizeof(vs), "%ld", v + 1);
		const char *pv[1] = {vs};
		PGresult *r = PQexecParams(
		    c,
		    "INSERT INTO warden.schema_version (version) VALUES ($1)",
		    1, NULL, pv, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rc = fl_pg_err(r, c, "schema: record version", err);
		else
			PQclear(r);
		if (!rc)
			wd_info("fleet: schema migrated to version %ld", v + 1);
	}
	if (rc) {
		PQclear(PQexec(c, "ROLLBACK"));
		return rc;
	}
	return exec_ok(c, "COMMIT", "schema: commit", err);
}
