/* This node's row in warden.nodes and the leases (fleet.h). Times are the
 * database's (now(), clock_timestamp()): nodes' clocks may disagree, the
 * database's is the one every lease is judged by. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "fleet/fleet_int.h"

/* STATE/fleet-node-id: made once, so a restarted node is the same node
 * (its runs from before the restart are interrupted at registration). */
int fl_node_id_load(const char *state_dir, char id[40], struct wd_err *err)
{
	cleanup_free char *path = wd_asprintf("%s/fleet-node-id", state_dir);
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		char buf[40] = {0};
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		while (n > 0 && (buf[n - 1] == '\n'))
			buf[--n] = 0;
		if (n != 21 || strncmp(buf, "node_", 5) ||
		    strspn(buf + 5, "0123456789abcdef") != 16)
			return wd_err_set(err, -EINVAL,
					  "%s: not a node id (node_ and 16 "
					  "hex digits)",
					  path);
		memcpy(id, buf, 22);
		return 0;
	}
	if (errno != ENOENT)
		return wd_err_set(err, -errno, "%s: %s", path, strerror(errno));
	memcpy(id, "node_", 5);
	wd_rand_hex(id + 5, 16);
	cleanup_free char *tmp = wd_asprintf("%s.tmp", path);
	cleanup_close int wfd =
	    open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (wfd < 0)
		return wd_err_set(err, -errno, "%s: %s", tmp, strerror(errno));
	char line[24];
	int n = snprintf(line, sizeof(line), "%s\n", id);
	if (write(wfd, line, (size_t)n) != n || fsync(wfd) ||
	    rename(tmp, path)) {
		int e = errno;
		unlink(tmp);
		return wd_err_set(err, -e, "%s: %s", path, strerror(e));
	}
	return 0;
}

/* A run its node lost (restarted, stopped, silent past its lease):
 * interrupted, or -- its agent says resume: if_read_only, attempts remain
 * (WD_FLEET_ATTEMPTS in all) -- queued again for any node, to be run from
 * its task (policy/agent.h wd_agents_check_resume: nothing it does can
 * happen twice). Columns in the expressions are the values before the
 * update. WHY: an SQL text expression. The statement RETURNs id, state;
 * LOST_SELECT counts them and wakes the claimers for those queued. */
#define STR_(x) #x
#define STR(x)	STR_(x)
#define AGAIN	"(resume AND attempt + 1 < " STR(WD_FLEET_ATTEMPTS) ")"
#define LOSE_RUN(WHY)                                                          \
	"state = CASE WHEN " AGAIN " THEN 'queued' ELSE 'interrupted' END, "   \
	"status = CASE WHEN " AGAIN " THEN NULL ELSE 'interrupted' END, "      \
	"attempt = CASE WHEN " AGAIN " THEN attempt + 1 ELSE attempt END, "    \
	"node_id = CASE WHEN " AGAIN " THEN NULL ELSE node_id END, "           \
	"reason = " WHY " || CASE WHEN " AGAIN " THEN ': queued again "        \
	"(resume: if_read_only)' ELSE '' END, "                                \
	"ended_at = CASE WHEN " AGAIN " THEN NULL ELSE clock_timestamp() "     \
	"END, last_attempt = CASE WHEN " AGAIN " THEN NULL ELSE " LAST_ATTEMPT \
	" END, lease_until = NULL"
#define LOST_SELECT                                                            \
	"SELECT (SELECT count(*) FROM lost), (SELECT "                         \
	"count(pg_notify('" WD_FLEET_CHANNEL                                   \
	"', id)) FROM lost WHERE state = 'queued')"

static int params_cmd(struct wd_fleet *f, PGconn *c, const char *sql, int n,
		      const char **pv, const char *what, int64_t *rows,
		      struct wd_err *err)
{
	PGresult *r = fl_exec(c, sql, n, pv, 0, fl_thread_wait_ms(f));
	ExecStatusType st = PQresultStatus(r);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, what, err);
	if (rows)
		*rows = st == PGRES_TUPLES_OK
			    ? PQntuples(r)
			    : strtoll(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return 0;
}

/* A LOSE_RUN statement of one node ($1): *n lost, *again queued again. */
static int lose_runs(struct wd_fleet *f, PGconn *c, const char *sql,
		     const char *node, const char *what, int64_t *n,
		     int64_t *again, struct wd_err *err)
{
	const char *pv[1] = {node};
	PGresult *r = fl_exec(c, sql, 1, pv, 0, fl_thread_wait_ms(f));
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, what, err);
	*n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	*again = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	PQclear(r);
	return 0;
}

int fl_register(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	char cap[16], lease[16], t[3][16];
	snprintf(cap, sizeof(cap), "%u", f->capacity);
	snprintf(lease, sizeof(lease), "%u", f->lease_ms);
	for (int i = 0; i < 3; i++)
		snprintf(t[i], sizeof(t[i]), "%u", f->tier_cap[i]);
	const char *pv[9] = {f->node_id, f->hostname,	 f->version,
			     cap,	 f->labels_json, lease,
			     t[0],	 t[1],		 t[2]};
	int rc = params_cmd(
	    f, c,
	    "INSERT INTO warden.nodes (id, hostname, version, capacity, "
	    "labels, state, started_at, heartbeat_at, lease_until, "
	    "capacity_t1, capacity_t2, capacity_t3) "
	    "VALUES ($1, $2, $3, $4::integer, $5::jsonb, 'up', now(), now(), "
	    "now() + $6::integer * interval '1 millisecond', $7::integer, "
	    "$8::integer, $9::integer) "
	    "ON CONFLICT (id) DO UPDATE SET hostname = $2, version = $3, "
	    "capacity = $4::integer, labels = $5::jsonb, state = 'up', "
	    "started_at = now(), heartbeat_at = now(), "
	    "lease_until = now() + $6::integer * interval '1 millisecond', "
	    "capacity_t1 = $7::integer, capacity_t2 = $8::integer, "
	    "capacity_t3 = $9::integer",
	    9, pv, "register", NULL, err);
	if (rc || f->registered)
		return rc; /* a reconnection: the runs held here go on */
	/* what this node held before it (re)started ran in a process that
	 * is gone: the runtime's own recovery ends them in the local trace
	 * (runtime.h "Restart"), and they are never run again */
	int64_t n = 0, again = 0;
	rc = lose_runs(
	    f, c,
	    "WITH lost AS (UPDATE warden.runs SET " LOSE_RUN(
		"'its node restarted'") " WHERE node_id = $1 AND "
					"state = 'running' "
					"RETURNING id, state) " LOST_SELECT,
	    f->node_id, "register: earlier runs", &n, &again, err);
	if (!rc)
		f->registered = true;
	if (!rc && n)
		wd_warn("fleet: %lld run%s this node held before it restarted "
			"marked interrupted (%lld queued again)",
			(long long)n, n == 1 ? "" : "s", (long long)again);
	return rc;
}

/* The node's lease and those of the runs it holds, renewed together: a
 * node that cannot renew its own cannot renew its runs' either. Only the
 * runs it holds (and those whose end it has yet to write). The runs
 * renewed are returned: a held run that is not was taken from this node
 * (fence.c). */
int fl_heartbeat(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	char lease[16];
	snprintf(lease, sizeof(lease), "%u", f->lease_ms);
	json_t *before = json_array();
	/* the rows renewed: [fleet id, attempt] of each run held here, and of
	 * each ended whose end is not written yet (its row is `running` until
	 * then). Only those: a row the database gave this node that the node
	 * never took up (warden.claim committed, its reply lost) lapses and
	 * is reaped as a lost node's would be, not renewed for ever. */
	json_t *rows = json_array();
	pthread_mutex_lock(&f->mu);
	const char *k;
	json_t *v;
	size_t i;
	json_object_foreach(f->held, k, v)
	{
		json_array_append_new(before, json_string(k));
		const char *fid = json_string_value(v);
		long attempt = fl_attempt_of(k, fid);
		json_array_append_new(rows,
				      json_pack("[s,i]", fid, (int)attempt));
	}
	json_array_foreach(f->ended, i, v)
	{
		json_array_append_new(
		    rows, json_pack("[O,O]", json_object_get(v, "run_id"),
				    json_object_get(v, "attempt")));
	}
	pthread_mutex_unlock(&f->mu);
	cleanup_free char *ids = json_dumps(rows, JSON_COMPACT);
	json_decref(rows);
	const char *pv[3] = {f->node_id, lease, ids};
	uint64_t t0 = wd_now_ns();
	PGresult *r = fl_exec(
	    c,
	    "WITH n AS (UPDATE warden.nodes SET heartbeat_at = now(), "
	    "lease_until = now() + $2::integer * interval '1 millisecond', "
	    "state = 'up' WHERE id = $1 RETURNING id) "
	    "UPDATE warden.runs SET lease_until = now() + $2::integer * "
	    "interval '1 millisecond' WHERE node_id = $1 AND state = "
	    "'running' AND (id, attempt) IN (SELECT x->>0, (x->>1)::integer "
	    "FROM jsonb_array_elements($3::jsonb) x) AND EXISTS (SELECT 1 "
	    "FROM n) RETURNING id, attempt",
	    3, pv, 0, fl_thread_wait_ms(f));
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		json_decref(before);
		return fl_pg_err(r, c, "heartbeat", err);
	}
	fl_fence_renewed(f, before, r, t0);
	PQclear(r);
	json_decref(before);
	return 0;
}

/* Not within a lease of the database's own start: while it was down no
 * node could renew anything, and every lease ran out with nobody at fault;
 * the live nodes renew theirs as soon as they are back. */
int fl_reap(struct wd_fleet *f, PGconn *c, int64_t *n, struct wd_err *err)
{
	char lease[16], gone_code[16];
	snprintf(lease, sizeof(lease), "%u", f->lease_ms);
	snprintf(gone_code, sizeof(gone_code), "%d", -ENOENT);
	const char *pv[2] = {lease, gone_code};
	PGresult *r = fl_exec(
	    c,
	    "WITH ok AS (SELECT clock_timestamp() > pg_postmaster_start_time() "
	    "+ $1::integer * interval '1 millisecond' AS may), "
	    "lost AS (UPDATE warden.runs SET " LOSE_RUN(
		"'node ' || node_id || ' stopped renewing its lease (until ' "
		"|| lease_until || ')'") " WHERE state = 'running' AND "
					 "lease_until < clock_timestamp() AND "
					 "(SELECT may FROM ok) "
					 "RETURNING id, state), "
					 "gone AS (UPDATE warden.nodes SET "
					 "state = 'lost' WHERE state "
					 "= 'up' AND lease_until < "
					 "clock_timestamp() AND (SELECT may "
					 "FROM "
					 "ok) RETURNING id), "
					 /* its approvals die with its runs:
					  * listed and decided nowhere */
					 "shut AS (UPDATE warden.approvals SET "
					 "state = 'done', result_code = "
					 "$2::integer, result = 'its "
					 "node was lost' WHERE state IN "
					 "('pending', 'decided') AND node_id "
					 "IN (SELECT id FROM gone)) "
					 "SELECT (SELECT count(*) FROM lost), "
					 "(SELECT count(*) FROM "
					 "gone), (SELECT count(*) FROM "
					 "warden.runs WHERE state = "
					 "'queued'), (SELECT count(*) FROM "
					 "warden.nodes WHERE state = "
					 "'up'), (SELECT "
					 "count(pg_notify('" WD_FLEET_CHANNEL
					 "', id)) FROM "
					 "lost WHERE state = 'queued')",
	    2, pv, 0, fl_thread_wait_ms(f));
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, "reap", err);
	*n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	long long nodes = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	long long again = strtoll(PQgetvalue(r, 0, 4), NULL, 10);
	pthread_mutex_lock(&f->mu);
	f->queue_depth = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	f->nodes_up = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
	f->m_interrupted += (uint64_t)(*n - again);
	f->m_requeued += (uint64_t)again;
	pthread_mutex_unlock(&f->mu);
	PQclear(r);
	if (*n || nodes)
		wd_warn("fleet: %lld node%s lost; of their runs %lld "
			"interrupted, %lld queued again (their lease ran out)",
			nodes, nodes == 1 ? "" : "s", (long long)*n - again,
			again);
	return 0;
}

/* A clean stop: the node is `stopped`, and what it still holds is
 * interrupted now rather than when the lease runs out. */
int fl_node_stopped(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	const char *pv[1] = {f->node_id};
	int64_t n = 0, again = 0;
	int rc = lose_runs(
	    f, c,
	    "WITH lost AS (UPDATE warden.runs SET " LOSE_RUN(
		"'its node stopped'") " WHERE node_id = $1 AND state = "
				      "'running' RETURNING id, "
				      "state) " LOST_SELECT,
	    f->node_id, "stop: runs", &n, &again, err);
	if (!rc)
		rc = params_cmd(f, c,
				"UPDATE warden.nodes SET state = 'stopped', "
				"lease_until = now() WHERE id = $1",
				1, pv, "stop: node", NULL, err);
	/* its runs' approvals end with them */
	char code[16];
	snprintf(code, sizeof(code), "%d", -ENOENT);
	const char *av[2] = {f->node_id, code};
	if (!rc)
		rc = params_cmd(f, c,
				"UPDATE warden.approvals SET state = 'done', "
				"result_code = $2::integer, result = 'its node "
				"stopped' WHERE node_id = $1 AND state IN "
				"('pending', 'decided')",
				2, av, "stop: approvals", NULL, err);
	if (!rc && n)
		wd_warn("fleet: %lld run%s in progress given up (node "
			"stopping): %lld queued again, the rest interrupted",
			(long long)n, n == 1 ? "" : "s", (long long)again);
	return rc;
}
