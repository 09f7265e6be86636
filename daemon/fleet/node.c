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

static int params_cmd(PGconn *c, const char *sql, int n, const char **pv,
		      const char *what, int64_t *rows, struct wd_err *err)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, pv, NULL, NULL, 0);
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

int fl_register(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	char cap[16], lease[16];
	snprintf(cap, sizeof(cap), "%u", f->capacity);
	snprintf(lease, sizeof(lease), "%u", f->lease_ms);
	const char *pv[6] = {f->node_id, f->hostname,	 f->version,
			     cap,	 f->labels_json, lease};
	int rc = params_cmd(
	    c,
	    "INSERT INTO warden.nodes (id, hostname, version, capacity, "
	    "labels, state, started_at, heartbeat_at, lease_until) "
	    "VALUES ($1, $2, $3, $4::integer, $5::jsonb, 'up', now(), now(), "
	    "now() + $6::integer * interval '1 millisecond') "
	    "ON CONFLICT (id) DO UPDATE SET hostname = $2, version = $3, "
	    "capacity = $4::integer, labels = $5::jsonb, state = 'up', "
	    "started_at = now(), heartbeat_at = now(), "
	    "lease_until = now() + $6::integer * interval '1 millisecond'",
	    6, pv, "register", NULL, err);
	if (rc || f->registered)
		return rc; /* a reconnection: the runs held here go on */
	/* what this node held before it (re)started ran in a process that
	 * is gone: the runtime's own recovery ends them in the local trace
	 * (runtime.h "Restart"), and they are never run again */
	int64_t n = 0;
	rc =
	    params_cmd(c,
		       "UPDATE warden.runs SET state = 'interrupted', "
		       "status = 'interrupted', reason = 'its node restarted', "
		       "ended_at = clock_timestamp(), lease_until = NULL "
		       "WHERE node_id = $1 AND state = 'running'",
		       1, pv, "register: earlier runs", &n, err);
	if (!rc)
		f->registered = true;
	if (!rc && n)
		wd_warn("fleet: %lld run%s this node held before it restarted "
			"marked interrupted",
			(long long)n, n == 1 ? "" : "s");
	return rc;
}

/* The node's lease and those of the runs it holds, renewed together: a
 * node that cannot renew its own cannot renew its runs' either. */
int fl_heartbeat(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	char lease[16];
	snprintf(lease, sizeof(lease), "%u", f->lease_ms);
	const char *pv[2] = {f->node_id, lease};
	return params_cmd(
	    c,
	    "WITH n AS (UPDATE warden.nodes SET heartbeat_at = now(), "
	    "lease_until = now() + $2::integer * interval '1 millisecond', "
	    "state = 'up' WHERE id = $1 RETURNING id) "
	    "UPDATE warden.runs SET lease_until = now() + $2::integer * "
	    "interval '1 millisecond' WHERE node_id = $1 AND state = "
	    "'running' AND EXISTS (SELECT 1 FROM n)",
	    2, pv, "heartbeat", NULL, err);
}

/* Not within a lease of the database's own start: while it was down no
 * node could renew anything, and every lease ran out with nobody at fault;
 * the live nodes renew theirs as soon as they are back. */
int fl_reap(struct wd_fleet *f, PGconn *c, int64_t *n, struct wd_err *err)
{
	char lease[16];
	snprintf(lease, sizeof(lease), "%u", f->lease_ms);
	const char *pv[1] = {lease};
	PGresult *r = PQexecParams(
	    c,
	    "WITH ok AS (SELECT clock_timestamp() > pg_postmaster_start_time() "
	    "+ $1::integer * interval '1 millisecond' AS may), "
	    "lost AS (UPDATE warden.runs SET state = 'interrupted', "
	    "status = 'interrupted', reason = 'node ' || node_id || "
	    "' stopped renewing its lease (until ' || lease_until || ')', "
	    "ended_at = clock_timestamp() WHERE state = 'running' AND "
	    "lease_until < clock_timestamp() AND (SELECT may FROM ok) "
	    "RETURNING id), "
	    "gone AS (UPDATE warden.nodes SET state = 'lost' WHERE state "
	    "= 'up' AND lease_until < clock_timestamp() AND (SELECT may FROM "
	    "ok) RETURNING id) "
	    "SELECT (SELECT count(*) FROM lost), (SELECT count(*) FROM "
	    "gone), (SELECT count(*) FROM warden.runs WHERE state = "
	    "'queued'), (SELECT count(*) FROM warden.nodes WHERE state = "
	    "'up')",
	    1, NULL, pv, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, "reap", err);
	*n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	long long nodes = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	pthread_mutex_lock(&f->mu);
	f->queue_depth = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	f->nodes_up = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
	f->m_interrupted += (uint64_t)*n;
	pthread_mutex_unlock(&f->mu);
	PQclear(r);
	if (*n || nodes)
		wd_warn("fleet: %lld node%s lost, %lld run%s interrupted "
			"(their lease ran out)",
			nodes, nodes == 1 ? "" : "s", (long long)*n,
			*n == 1 ? "" : "s");
	return 0;
}

/* A clean stop: the node is `stopped`, and what it still holds is
 * interrupted now rather than when the lease runs out. */
int fl_node_stopped(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	const char *pv[1] = {f->node_id};
	int64_t n = 0;
	int rc = params_cmd(c,
			    "UPDATE warden.runs SET state = 'interrupted', "
			    "status = 'interrupted', reason = 'its node "
			    "stopped', ended_at = clock_timestamp(), "
			    "lease_until = NULL WHERE node_id = $1 AND state "
			    "= 'running'",
			    1, pv, "stop: runs", &n, err);
	if (!rc)
		rc = params_cmd(c,
				"UPDATE warden.nodes SET state = 'stopped', "
				"lease_until = now() WHERE id = $1",
				1, pv, "stop: node", NULL, err);
	if (!rc && n)
		wd_warn("fleet: %lld run%s in progress marked interrupted "
			"(node stopping)",
			(long long)n, n == 1 ? "" : "s");
	return rc;
}
