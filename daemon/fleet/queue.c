/* The fleet's run queue (fleet.h): a run submitted on any node is a row in
 * warden.runs; nodes with room claim rows (warden.claim, schema.c: fair
 * share between teams, FOR UPDATE SKIP LOCKED) and run them through the
 * same path as a local run (wd_rt_run_create_id), under the id the
 * submitter gave it; the executing node writes how it ended. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/request.h"
#include "common/log.h"
#include "fleet/fleet_int.h"

/* The API's connection, made again once when it was lost. Under api_mu. */
static PGconn *api_conn(struct wd_fleet *f, struct wd_err *err)
{
	/* A server gone since the last statement has closed its end: read
	 * that now (without blocking), not under the next statement, whose
	 * fate would then be unknown (a submission refused, never run both
	 * here and from the queue). A backend stopped with the server sends
	 * its "terminating connection" first: the end is the read after. */
	for (int i = 0; i < 3 && f->api && PQstatus(f->api) == CONNECTION_OK;
	     i++)
		PQconsumeInput(f->api);
	if (f->api && PQstatus(f->api) == CONNECTION_OK)
		return f->api;
	if (f->api)
		PQfinish(f->api);
	f->api = fl_connect(f, WD_FLEET_API_WAIT_MS);
	if (PQstatus(f->api) != CONNECTION_OK) {
		fl_pg_err(NULL, f->api, "fleet database unreachable", err);
		pthread_mutex_lock(&f->mu);
		f->m_db_errors++;
		pthread_mutex_unlock(&f->mu);
		return NULL;
	}
	return f->api;
}

static void api_failed(struct wd_fleet *f)
{
	pthread_mutex_lock(&f->mu);
	f->m_db_errors++;
	pthread_mutex_unlock(&f->mu);
}

/* Does this node's labels hold the placement (a JSON object of strings)?
 * No placement: any node. */
static bool placement_here(const struct wd_fleet *f, const char *placement)
{
	if (!placement)
		return true;
	json_t *p = json_loads(placement, 0, NULL);
	json_t *l = json_loads(f->labels_json, 0, NULL);
	bool ok = json_is_object(p) && json_is_object(l);
	const char *k;
	json_t *v;
	json_object_foreach(p, k, v)
	{
		json_t *have = json_object_get(l, k);
		if (!ok || !json_is_string(v) || !json_is_string(have) ||
		    strcmp(json_string_value(v), json_string_value(have)))
			ok = false;
	}
	json_decref(p);
	json_decref(l);
	return ok;
}

/* The database could not be asked and nothing reached the queue: refused
 * (-EAGAIN), or, on a node configured with when_down: run_here whose
 * labels hold the agent's placement, 1: run here. err holds the reason. */
static int submit_down(struct wd_fleet *f, const char *agent,
		       const char *placement, struct wd_err *err)
{
	if (!f->run_here_when_down)
		return wd_err_set(err, -EAGAIN, "%s; the run was not queued",
				  err->msg);
	if (!placement_here(f, placement))
		return wd_err_set(err, -EAGAIN,
				  "%s; the run was not queued, nor run here: "
				  "this node's labels lack agent '%s''s "
				  "placement %s",
				  err->msg, agent, placement);
	pthread_mutex_lock(&f->mu);
	f->m_run_here++;
	pthread_mutex_unlock(&f->mu);
	wd_warn("fleet: %s; agent %s's run is run on this node "
		"(when_down: run_here)",
		err->msg, agent);
	return 1;
}

int wd_fleet_submit(struct wd_fleet *f, const struct wd_caller *c,
		    const char *agent, const char *task, char id[64],
		    struct wd_err *err)
{
	struct wd_rt_agent_facts af = {0};
	id[0] = 0;
	int rc = wd_rt_run_check(f->rt, c, agent, &af, err);
	if (rc)
		return rc;
	cleanup_free char *placement = af.placement;
	/* a hash_only agent's task would sit in the shared database in
	 * plain text (and its row's output too): its runs stay on the node
	 * they were submitted to; with a placement they cannot be placed */
	if (af.hash_only && placement)
		return wd_err_set(err, -EINVAL,
				  "agent '%s' keeps hash_only traces and has "
				  "a placement: its task would be queued in "
				  "the fleet database in plain text; the run "
				  "was not queued",
				  agent);
	char rid[24] = "run_", uid[16], gid[16], tiers[16];
	wd_rand_hex(rid + 4, 16);
	if (af.hash_only) {
		/* run here, under this id, in a slot of this node's */
		if ((rc = fl_reserve_local(f, agent, rid, af.tiers, err)))
			return rc;
		snprintf(id, 64, "%s", rid);
		return 1;
	}
	snprintf(uid, sizeof(uid), "%u", (unsigned)c->uid);
	snprintf(gid, sizeof(gid), "%u", (unsigned)c->gid);
	snprintf(tiers, sizeof(tiers), "%u", af.tiers);
	const char *pv[11] = {rid,
			      af.team,
			      agent,
			      task,
			      uid,
			      gid,
			      c->user,
			      f->node_id,
			      placement ? placement : "{}",
			      af.resume ? "true" : "false",
			      tiers};
	pthread_mutex_lock(&f->api_mu);
	PGconn *db = api_conn(f, err);
	if (!db) {
		pthread_mutex_unlock(&f->api_mu);
		return submit_down(f, agent, placement, err);
	}
	/* a placement or a tier 2/3 no node up could take would wait for
	 * ever: refused (a node may be up and full: then it waits for room;
	 * tier 1 runs on every node unless one says otherwise) */
	if (placement || (af.tiers & ~(1u << 1))) {
		const char *ppv[2] = {placement ? placement : "{}", tiers};
		PGresult *pr = fl_exec(
		    db,
		    "SELECT count(*) FROM warden.nodes WHERE state = 'up' AND "
		    "capacity > 0 AND labels @> $1::jsonb AND ($2::integer & 2 "
		    "= 0 OR capacity_t1 > 0) AND ($2::integer & 4 = 0 OR "
		    "capacity_t2 > 0) AND ($2::integer & 8 = 0 OR capacity_t3 "
		    "> 0)",
		    2, ppv, 0, fl_api_wait_ms(f));
		if (PQresultStatus(pr) != PGRES_TUPLES_OK) {
			fl_pg_err(pr, db, "placement", err);
			pthread_mutex_unlock(&f->api_mu);
			api_failed(f);
			return submit_down(f, agent, placement, err);
		}
		bool none = !strcmp(PQgetvalue(pr, 0, 0), "0");
		PQclear(pr);
		if (none) {
			pthread_mutex_unlock(&f->api_mu);
			if (!(af.tiers & ~(1u << 1)))
				return wd_err_set(
				    err, -EINVAL,
				    "agent '%s' has placement %s and no node "
				    "up with capacity has those labels; the "
				    "run was not queued",
				    agent, placement);
			char tl[16];
			fl_tiers_text(af.tiers, tl);
			return wd_err_set(
			    err, -EINVAL,
			    "agent '%s'%s%s uses tools of tier %s and no node "
			    "up has capacity for each of those tiers%s; the "
			    "run was not queued",
			    agent, placement ? " with placement " : "",
			    placement ? placement : "", tl,
			    placement ? " and those labels" : "");
		}
	}
	/* the notification is delivered at commit: a claimer woken by it
	 * finds the row */
	PGresult *r = fl_exec(
	    db,
	    "WITH ins AS (INSERT INTO warden.runs (id, team, agent, task, "
	    "uid, gid, user_name, submitted_node, placement, resume, tiers) "
	    "VALUES ($1, $2, $3, $4, $5::bigint, $6::bigint, $7, $8, "
	    "$9::jsonb, $10::boolean, $11::integer) RETURNING id) SELECT "
	    "pg_notify('" WD_FLEET_CHANNEL "', id) FROM ins",
	    11, pv, 0, fl_api_wait_ms(f));
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = fl_pg_err(r, db, "queueing the run", err);
		/* the connection lost under the INSERT: its commit may have
		 * happened -- never run it here as well */
		bool unknown = fl_pg_lost(db);
		pthread_mutex_unlock(&f->api_mu);
		api_failed(f);
		if (unknown)
			return wd_err_set(
			    err, -EAGAIN,
			    "%s; whether run %s was queued is unknown: "
			    "GET /v1/fleet/runs/%s once the database is back",
			    err->msg, rid, rid);
		return submit_down(f, agent, placement, err);
	}
	PQclear(r);
	pthread_mutex_unlock(&f->api_mu);
	pthread_mutex_lock(&f->mu);
	f->m_submitted++;
	pthread_mutex_unlock(&f->mu);
	snprintf(id, 64, "%s", rid);
	wd_info("fleet: run %s queued: agent %s for %s (uid %u)", rid, agent,
		c->user, (unsigned)c->uid);
	return 0;
}

PGresult *fl_api_exec(struct wd_fleet *f, const char *sql, int n,
		      const char **pv, int resfmt, struct wd_err *err)
{
	pthread_mutex_lock(&f->api_mu);
	PGconn *db = api_conn(f, err);
	if (!db) {
		pthread_mutex_unlock(&f->api_mu);
		errno = EAGAIN;
		return NULL;
	}
	PGresult *r = fl_exec(db, sql, n, pv, resfmt, fl_api_wait_ms(f));
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fl_pg_err(r, db, "fleet database", err);
		pthread_mutex_unlock(&f->api_mu);
		api_failed(f);
		errno = EAGAIN;
		return NULL;
	}
	pthread_mutex_unlock(&f->api_mu);
	return r;
}

/* One row as JSON text by the server (row_to_json), parsed. NULL with
 * errno ENOENT (no row) or EAGAIN (err). */
json_t *fl_row_json(struct wd_fleet *f, const char *sql, int n, const char **pv,
		    struct wd_err *err)
{
	PGresult *r = fl_api_exec(f, sql, n, pv, 0, err);
	if (!r)
		return NULL;
	json_t *o = NULL;
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
		o = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
	PQclear(r);
	if (!o) {
		wd_err_set(err, -ENOENT, "no such run in the fleet");
		errno = ENOENT;
	}
	return o;
}

json_t *wd_fleet_run_get(struct wd_fleet *f, const struct wd_caller *c,
			 const char *id, struct wd_err *err)
{
	if (!wd_api_id_ok(id)) {
		wd_err_set(err, -ENOENT, "no such run in the fleet");
		errno = ENOENT;
		return NULL;
	}
	const char *pv[1] = {id};
	json_t *o = fl_row_json(
	    f,
	    "SELECT row_to_json(x)::text FROM (SELECT r.id AS run_id, "
	    "r.team, r.agent, r.uid, r.user_name AS user, r.state, r.status, "
	    "r.reason, r.output, r.steps, r.cost_usd, r.submitted_node, "
	    "r.node_id AS node, n.hostname AS node_host, r.submitted_at, "
	    "r.claimed_at, r.ended_at, r.claim_order, r.attempt, "
	    "r.last_attempt, CASE WHEN "
	    "r.attempt > 0 THEN r.id || '-a' || r.attempt ELSE r.id END AS "
	    "local_run_id FROM warden.runs r "
	    "LEFT JOIN warden.nodes n ON n.id = r.node_id WHERE r.id = $1) x",
	    1, pv, err);
	if (!o)
		return NULL;
	int64_t uid = json_integer_value(json_object_get(o, "uid"));
	const char *team = json_string_value(json_object_get(o, "team"));
	if (!wd_rt_may_read(f->rt, c, uid, team ? team : "")) {
		json_decref(o);
		wd_err_set(err, -EACCES,
			   "run %s is readable by its user, its team's group "
			   "and auditors",
			   id);
		errno = EACCES;
		return NULL;
	}
	/* the output is the run's payload: its read is recorded here as the
	 * local view's is, under the run's id on the node that ran it */
	const char *node = json_string_value(json_object_get(o, "node"));
	if (node && !strcmp(node, f->node_id))
		node = NULL;
	return wd_rt_fleet_output_read(
	    f->rt, c, o, json_string_value(json_object_get(o, "local_run_id")),
	    uid, team ? team : "", node, err);
}

void fl_scope_params(struct wd_fleet *f, const struct wd_caller *c,
		     struct fl_scope *s)
{
	json_t *sc = wd_rt_read_scope(f->rt, c);
	memset(s, 0, sizeof(*s));
	wd_buf_printf(&s->teams, "{");
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(sc, "teams"), i, t)
	{
		wd_buf_printf(&s->teams, "%s\"%s\"", i ? "," : "",
			      json_string_value(t));
	}
	wd_buf_printf(&s->teams, "}");
	snprintf(s->uid, sizeof(s->uid), "%lld",
		 (long long)json_integer_value(json_object_get(sc, "uid")));
	s->all = json_is_true(json_object_get(sc, "all")) ? "true" : "false";
	json_decref(sc);
}

json_t *wd_fleet_runs(struct wd_fleet *f, const struct wd_caller *c,
		      const char *state, unsigned limit, struct wd_err *err)
{
	/* the read rule as a set, in the query: a page of rows is a page of
	 * readable rows */
	struct fl_scope sc;
	fl_scope_params(f, c, &sc);
	char lim[16];
	snprintf(lim, sizeof(lim), "%u", limit);
	const char *pv[5] = {sc.all, sc.uid, sc.teams.data, state, lim};
	json_t *o = fl_row_json(
	    f,
	    "SELECT coalesce(json_agg(x ORDER BY x.submitted_at DESC, "
	    "x.run_id), '[]')::text FROM (SELECT r.id AS run_id, r.team, "
	    "r.agent, r.uid, r.user_name AS user, r.state, r.status, "
	    "r.node_id AS node, r.submitted_node, r.submitted_at, "
	    "r.claimed_at, r.ended_at, r.steps, r.cost_usd FROM warden.runs r "
	    "WHERE ($1::boolean OR r.uid = $2::bigint OR r.team = "
	    "ANY($3::text[])) AND ($4::text IS NULL OR r.state = $4) "
	    "ORDER BY r.submitted_at DESC, r.id LIMIT $5::integer) x",
	    5, pv, err);
	wd_buf_free(&sc.teams);
	if (!o && errno == ENOENT)
		o = json_array();
	return o;
}

json_t *wd_fleet_nodes(struct wd_fleet *f, struct wd_err *err)
{
	json_t *o = fl_row_json(
	    f,
	    "SELECT coalesce(json_agg(x ORDER BY x.id), '[]')::text FROM "
	    "(SELECT n.id, n.hostname, n.version, n.capacity, "
	    "json_build_array(n.capacity_t1, n.capacity_t2, n.capacity_t3) "
	    "AS tier_capacity, n.labels, "
	    "n.state, n.started_at, n.heartbeat_at, n.lease_until, "
	    "(SELECT count(*) FROM warden.runs r WHERE r.node_id = n.id AND "
	    "r.state = 'running') AS running FROM warden.nodes n) x",
	    0, NULL, err);
	if (!o && errno == ENOENT)
		o = json_array();
	return o;
}

/* ---- the fleet thread's side ---- */

long fl_attempt_of(const char *lid, const char *fid)
{
	size_t n = strlen(fid);
	return !strncmp(lid, fid, n) && !strncmp(lid + n, "-a", 2)
		   ? strtol(lid + n + 2, NULL, 10)
		   : 0;
}

void fl_on_run_end(void *arg, const struct wd_rt_run_end *e)
{
	struct wd_fleet *f = arg;
	pthread_mutex_lock(&f->mu);
	json_t *fid = json_incref(json_object_get(f->held, e->run_id));
	if (!fid) {
		/* a local run (a sub-agent's, a replay's): not the fleet's;
		 * a hash_only agent's frees its slot */
		bool slot = json_object_get(f->local, e->run_id) != NULL;
		pthread_mutex_unlock(&f->mu);
		if (slot)
			wd_fleet_local_release(f, e->run_id);
		return;
	}
	json_object_del(f->held, e->run_id);
	fl_fence_forget_locked(f, e->run_id);
	/* the attempt it ran as (fl_claim_one: id-aN from the second on):
	 * its end is written only over that attempt's row */
	long attempt = fl_attempt_of(e->run_id, json_string_value(fid));
	/* its tiers stay taken until its end is written (fleet.c room) */
	json_int_t tiers =
	    json_integer_value(json_object_get(f->held_tiers, e->run_id));
	json_object_del(f->held_tiers, e->run_id);
	json_t *o =
	    json_pack("{s:o,s:s,s:i,s:f,s:I,s:i}", "run_id", fid, "status",
		      e->status, "steps", e->steps, "cost", e->cost_usd,
		      "tiers", tiers, "attempt", (int)attempt);
	if (e->reason)
		json_object_set_new(o, "reason", json_string(e->reason));
	if (e->output)
		json_object_set_new(o, "output", json_string(e->output));
	json_array_append_new(f->ended, o);
	pthread_mutex_unlock(&f->mu);
	uint64_t one = 1;
	if (write(f->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		wd_warn("fleet: wake: %s", strerror(errno));
}

int fl_write_ends(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	for (;;) {
		pthread_mutex_lock(&f->mu);
		json_t *o = json_incref(json_array_get(f->ended, 0));
		pthread_mutex_unlock(&f->mu);
		if (!o)
			return 0;
		char steps[16], cost[32], attempt[16];
		snprintf(attempt, sizeof(attempt), "%lld",
			 (long long)json_integer_value(
			     json_object_get(o, "attempt")));
		snprintf(
		    steps, sizeof(steps), "%lld",
		    (long long)json_integer_value(json_object_get(o, "steps")));
		snprintf(cost, sizeof(cost), "%.17g",
			 json_number_value(json_object_get(o, "cost")));
		const char *id =
		    json_string_value(json_object_get(o, "run_id"));
		const char *pv[8] = {
		    id,
		    f->node_id,
		    json_string_value(json_object_get(o, "status")),
		    json_string_value(json_object_get(o, "reason")),
		    json_string_value(json_object_get(o, "output")),
		    steps,
		    cost,
		    attempt};
		PGresult *r = fl_exec(
		    c,
		    "UPDATE warden.runs SET state = 'done', status = $3, "
		    "reason = $4, output = $5, steps = $6::integer, cost_usd = "
		    "$7::double precision, ended_at = clock_timestamp(), "
		    "lease_until = NULL WHERE id = $1 AND node_id = $2 AND "
		    "state = 'running' AND attempt = $8::integer",
		    8, pv, 0, fl_thread_wait_ms(f));
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			json_decref(o);
			return fl_pg_err(r, c, "writing a run's end", err);
		}
		bool lost = strcmp(PQcmdTuples(r), "1") != 0;
		PQclear(r);
		if (lost) {
			/* written already, by the try whose commit's reply was
			 * lost with the connection: not a lease lost */
			r = fl_exec(
			    c,
			    "SELECT 1 FROM warden.runs WHERE id = $1 AND "
			    "node_id = $2 AND state = 'done' AND status "
			    "= $3 AND attempt = $8::integer AND "
			    "steps = $6::integer AND reason IS NOT "
			    "DISTINCT FROM $4 AND output IS NOT "
			    "DISTINCT FROM $5 AND cost_usd = "
			    "$7::double precision",
			    8, pv, 0, fl_thread_wait_ms(f));
			if (PQresultStatus(r) != PGRES_TUPLES_OK) {
				json_decref(o);
				return fl_pg_err(r, c, "re-reading a run's end",
						 err);
			}
			lost = PQntuples(r) != 1;
			PQclear(r);
		}
		/* the fleet's verdict (interrupted, or queued again) stays:
		 * this node's end is in its own trace only */
		if (lost)
			wd_warn("fleet: run %s ended %s after its lease ran "
				"out: the fleet's verdict on it stands; its "
				"end is in this node's trace",
				id, pv[2]);
		pthread_mutex_lock(&f->mu);
		json_array_remove(f->ended, 0);
		if (lost)
			f->m_lease_lost++;
		else
			f->m_ends_written++;
		pthread_mutex_unlock(&f->mu);
		json_decref(o);
	}
}

/* A claimed run that cannot start here (its agent is not in this node's
 * policy, the caller may not run it here): it ends at once, `failed`. */
static void start_failed(struct wd_fleet *f, const char *id, const char *lid,
			 unsigned tiers, const char *why)
{
	wd_warn("fleet: run %s claimed but not started: %s", id, why);
	pthread_mutex_lock(&f->mu);
	json_object_set_new(f->held, lid, json_string(id));
	json_object_set_new(f->held_tiers, lid, json_integer(tiers));
	pthread_mutex_unlock(&f->mu);
	struct wd_rt_run_end e = {
	    .run_id = lid, .status = "failed", .reason = why};
	fl_on_run_end(f, &e);
}

/* A run queued again after its node was lost (attempt > 0), claimed here,
 * that this node's own policy says must not run again (a rolling policy
 * change: the submitter judged `resume` by its policy, node.c LOSE_RUN
 * queued it again on that): never started; interrupted fleet-wide with
 * the reason and what its last attempt did, as a lost run that may not be
 * run again is. -errno on a database error (the row, not renewed by the
 * heartbeat -- it is not held here -- lapses and is reaped). */
static int refuse_again(struct wd_fleet *f, PGconn *c, const char *id,
			long attempt, const char *why, struct wd_err *err)
{
	char att[16], prev[80];
	snprintf(att, sizeof(att), "%ld", attempt);
	if (attempt > 1)
		snprintf(prev, sizeof(prev), "%s-a%ld", id, attempt - 1);
	else
		snprintf(prev, sizeof(prev), "%s", id);
	cleanup_free char *reason = wd_asprintf(
	    "its node was lost and it was queued again, but node %s may not "
	    "run it again: %s; not started (it could do twice what it did)",
	    f->node_id, why);
	const char *pv[5] = {id, f->node_id, att, reason, prev};
	PGresult *r = fl_exec(
	    c,
	    "UPDATE warden.runs SET state = 'interrupted', status = "
	    "'interrupted', reason = $4, ended_at = clock_timestamp(), "
	    "lease_until = NULL, last_attempt = (SELECT "
	    "jsonb_build_object('step', a.step, 'tool', a.tool, 'call_id', "
	    "a.call_id, 'seq', a.seq, 'result', EXISTS (SELECT 1 FROM "
	    "warden.trace_records t WHERE t.node_id = a.node_id AND t.run_id "
	    "= a.run_id AND t.type = 'tool_result' AND t.call_id = a.call_id "
	    "AND t.seq > a.seq)) FROM warden.trace_records a WHERE a.run_id "
	    "= $5 AND a.type = 'tool_attempt' ORDER BY a.seq DESC LIMIT 1) "
	    "WHERE id = $1 AND node_id = $2 AND state = 'running' AND attempt "
	    "= $3::integer",
	    5, pv, 0, fl_thread_wait_ms(f));
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return fl_pg_err(r, c, "refusing a run queued again", err);
	PQclear(r);
	pthread_mutex_lock(&f->mu);
	f->m_interrupted++;
	pthread_mutex_unlock(&f->mu);
	wd_warn("fleet: run %s (attempt %ld) claimed and not started, "
		"interrupted fleet-wide: %s",
		id, attempt + 1, why);
	return 0;
}

int fl_claim_one(struct wd_fleet *f, PGconn *c, unsigned tiers,
		 struct wd_err *err)
{
	char lease[16], room[16];
	snprintf(lease, sizeof(lease), "%u", f->lease_ms);
	snprintf(room, sizeof(room), "%u", tiers);
	const char *pv[4] = {f->node_id, lease, f->labels_json, room};
	uint64_t t0 = wd_now_ns(); /* before the claim's lease began */
	PGresult *r = fl_exec(
	    c,
	    "SELECT c_id, c_agent, c_task, c_uid, c_gid, c_user, c_attempt, "
	    "c_tiers FROM warden.claim($1, $2::integer, $3::jsonb, "
	    "$4::integer)",
	    4, pv, 0, fl_thread_wait_ms(f));
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, "claim", err);
	if (PQntuples(r) != 1) {
		PQclear(r);
		return 0;
	}
	const char *id = PQgetvalue(r, 0, 0);
	/* a run queued again (node.c LOSE_RUN) runs under a local id of its
	 * own: the first attempt's trace, on the lost node, has the first */
	long attempt = strtol(PQgetvalue(r, 0, 6), NULL, 10);
	unsigned rt = (unsigned)strtoul(PQgetvalue(r, 0, 7), NULL, 10);
	char lid[64];
	if (attempt > 0)
		snprintf(lid, sizeof(lid), "%s-a%ld", id, attempt);
	else
		snprintf(lid, sizeof(lid), "%s", id);
	char why[320];
	if (attempt > 0 && !wd_rt_may_run_again(f->rt, PQgetvalue(r, 0, 1), why,
						sizeof(why))) {
		int rc = refuse_again(f, c, id, attempt, why, err);
		PQclear(r);
		return rc ? rc : 1;
	}
	struct wd_caller who;
	wd_caller_from_uid((uid_t)strtoul(PQgetvalue(r, 0, 3), NULL, 10),
			   (gid_t)strtoul(PQgetvalue(r, 0, 4), NULL, 10), &who);
	pthread_mutex_lock(&f->mu);
	f->m_claimed++;
	fl_fence_claimed_locked(f, lid, t0);
	/* held before the run exists: its end may come before
	 * wd_rt_run_create_id returns */
	json_object_set_new(f->held, lid, json_string(id));
	json_object_set_new(f->held_tiers, lid, json_integer(rt));
	pthread_mutex_unlock(&f->mu);
	char out[64];
	struct wd_err re = {0};
	int rc = wd_api_id_ok(lid)
		     ? wd_rt_run_create_id(f->rt, &who, PQgetvalue(r, 0, 1),
					   PQgetvalue(r, 0, 2), lid, out, &re)
		     : wd_err_set(&re, -EINVAL, "bad run id");
	if (rc) {
		pthread_mutex_lock(&f->mu);
		json_object_del(f->held, lid);
		json_object_del(f->held_tiers, lid);
		fl_fence_forget_locked(f, lid);
		pthread_mutex_unlock(&f->mu);
		start_failed(f, id, lid, rt, re.msg);
	} else {
		wd_info(
		    "fleet: run %s claimed (agent %s, submitted for %s)%s%s",
		    id, PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 5),
		    attempt ? ", run again as " : "", attempt ? lid : "");
	}
	PQclear(r);
	return 1;
}
