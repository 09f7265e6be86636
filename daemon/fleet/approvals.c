/* Approvals across nodes (README "More than one node"). A run waiting on
 * an approval waits on the node that runs it; that node publishes its
 * pending approvals to warden.approvals without the call's arguments (a
 * payload: read on that node, where the read is recorded in the run's
 * trace). An approver on any other node decides: the decision is written
 * to the row and NOTIFYd; the run's node applies it as that approver
 * (wd_rt_approval_decide: its own approver check, its own record) and
 * writes the outcome, which the deciding node waits for. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "fleet/fleet_int.h"

int fl_publish_approvals(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	json_t *meta = wd_rt_approvals_meta(f->rt);
	json_t *ids = json_array();
	size_t i;
	json_t *a;
	json_array_foreach(meta, i, a)
	    json_array_append(ids, json_object_get(a, "id"));
	char *key = json_dumps(ids, JSON_COMPACT);
	json_decref(ids);
	if (f->published && key && !strcmp(f->published, key)) {
		free(key);
		json_decref(meta);
		return 0; /* nothing changed since the last time */
	}
	char *rows = json_dumps(meta, JSON_COMPACT);
	json_decref(meta);
	const char *pv[3] = {f->node_id, rows, key};
	/* new ones in, the ones gone here (decided here, expired, run
	 * ended) done; a row another node decided stays for
	 * fl_apply_decisions */
	PGresult *r = fl_exec(
	    c,
	    "WITH x AS (SELECT * FROM jsonb_to_recordset($2::jsonb) AS x(id "
	    "text, run_id text, tool text, reason text, agent text, team "
	    "text, \"user\" text, uid bigint, created_ns bigint, expires_ns "
	    "bigint)), ins AS (INSERT INTO warden.approvals (id, node_id, "
	    "run_id, agent, team, user_name, uid, tool, reason, created_at, "
	    "expires_at, state) SELECT id, $1, run_id, agent, team, \"user\", "
	    "uid, tool, reason, to_timestamp(created_ns / 1e9), "
	    "to_timestamp(expires_ns / 1e9), 'pending' FROM x ON CONFLICT "
	    "(id) DO NOTHING) UPDATE warden.approvals SET state = 'done', "
	    "result = 'no longer pending on its node' WHERE node_id = $1 AND "
	    "state = 'pending' AND id NOT IN (SELECT jsonb_array_elements_text"
	    "($3::jsonb))",
	    3, pv, 0, fl_thread_wait_ms(f));
	free(rows);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		free(key);
		return fl_pg_err(r, c, "approvals: publish", err);
	}
	PQclear(r);
	free(f->published);
	f->published = key;
	return 0;
}

int fl_apply_decisions(struct wd_fleet *f, PGconn *c, struct wd_err *err)
{
	const char *pv[1] = {f->node_id};
	PGresult *r = fl_exec(
	    c,
	    "SELECT id, decision, decided_by_uid, decided_by, "
	    "coalesce(decision_reason, ''), decided_on FROM warden.approvals "
	    "WHERE node_id = $1 AND state = 'decided'",
	    1, pv, 0, fl_thread_wait_ms(f));
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fl_pg_err(r, c, "approvals: decisions", err);
	int rc = 0, n = PQntuples(r);
	for (int i = 0; !rc && i < n; i++) {
		const char *id = PQgetvalue(r, i, 0);
		bool approve = !strcmp(PQgetvalue(r, i, 1), "approve");
		uid_t uid = (uid_t)strtoul(PQgetvalue(r, i, 2), NULL, 10);
		struct wd_caller who;
		wd_caller_from_uid(uid, uid, &who);
		struct wd_err de = {0};
		/* applied here before, its outcome's write lost with the
		 * connection (the row still says decided): the outcome then,
		 * not "no such approval" now */
		json_t *was = json_object_get(f->applied, id);
		int drc = was ? (int)json_integer_value(json_array_get(was, 0))
			      : wd_rt_approval_decide(f->rt, &who, id, approve,
						      PQgetvalue(r, i, 4), &de);
		if (was)
			snprintf(de.msg, sizeof(de.msg), "%s",
				 json_string_value(json_array_get(was, 1)));
		else
			json_object_set_new(
			    f->applied, id,
			    json_pack("[i,s]", drc, drc ? de.msg : "applied"));
		if (!was)
			wd_info("fleet: approval %s %s by %s on %s: %s", id,
				approve ? "approved" : "denied",
				PQgetvalue(r, i, 3), PQgetvalue(r, i, 5),
				drc ? de.msg : "applied");
		char code[16];
		snprintf(code, sizeof(code), "%d", drc);
		/* refused (not an approver here, the store could not record
		 * it): still pending, for someone who may; gone: done */
		const char *uv[4] = {id, code, drc ? de.msg : "applied",
				     drc && drc != -ENOENT ? "pending"
							   : "done"};
		PGresult *u = fl_exec(
		    c,
		    "UPDATE warden.approvals SET state = $4, result_code = "
		    "$2::integer, result = $3 WHERE id = $1",
		    4, uv, 0, fl_thread_wait_ms(f));
		if (PQresultStatus(u) != PGRES_COMMAND_OK)
			rc = fl_pg_err(u, c, "approvals: outcome", err);
		else {
			PQclear(u);
			json_object_del(f->applied, id);
		}
	}
	PQclear(r);
	if (!rc && n > 0) {
		/* what was decided is no longer pending here */
		free(f->published);
		f->published = NULL;
	}
	return rc;
}

json_t *wd_fleet_approvals(struct wd_fleet *f, const struct wd_caller *c,
			   struct wd_err *err)
{
	struct fl_scope sc;
	fl_scope_params(f, c, &sc);
	bool approver = wd_rt_is_approver(f->rt, c->uid);
	const char *pv[5] = {approver ? "true" : sc.all, sc.uid, sc.teams.data,
			     f->node_id, approver ? "true" : "false"};
	/* as wd_rt_approvals_list shows them to approvers and to the run's
	 * readers, less the arguments; a lost node's are not decidable */
	json_t *o = fl_row_json(
	    f,
	    "SELECT coalesce(json_agg(x ORDER BY x.created), '[]')::text FROM "
	    "(SELECT a.id, a.run_id, a.node_id AS node, a.agent, a.team, "
	    "a.user_name AS user, a.uid, a.tool, a.reason, a.created_at AS "
	    "created, "
	    "a.expires_at AS expires, $5::boolean AS you_may_decide, "
	    "'on node ' || a.node_id || ': shown here once its run''s "
	    "records are shipped (each read recorded)' AS args_withheld FROM "
	    "warden.approvals a WHERE a.state = "
	    "'pending' AND a.node_id <> $4 AND a.node_id IN (SELECT id FROM "
	    "warden.nodes WHERE state = 'up') AND ($1::boolean OR a.uid = "
	    "$2::bigint OR a.team = ANY($3::text[]))) x",
	    5, pv, err);
	wd_buf_free(&sc.teams);
	if (!o && errno == ENOENT)
		o = json_array();
	return o;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int wd_fleet_approval_decide(struct wd_fleet *f, const struct wd_caller *c,
			     const char *id, bool approve, const char *reason,
			     struct wd_err *err)
{
	/* the run's node decides whether c may (its policy); a caller this
	 * node already knows is not an approver is told so here */
	if (!wd_rt_is_approver(f->rt, c->uid))
		return wd_err_set(err, -EPERM,
				  "user '%s' (uid %u) is not an approver in "
				  "users.yaml",
				  c->user, (unsigned)c->uid);
	char uid[16];
	snprintf(uid, sizeof(uid), "%u", (unsigned)c->uid);
	const char *pv[6] = {
	    id, approve ? "approve" : "deny", uid, c->user, reason, f->node_id};
	json_t *o = fl_row_json(
	    f,
	    "WITH d AS (UPDATE warden.approvals SET state = 'decided', "
	    "decision = $2, decided_by_uid = $3::bigint, decided_by = $4, "
	    "decision_reason = $5, decided_on = $6, decided_at = now() WHERE "
	    "id = $1 AND state = 'pending' AND node_id <> $6 RETURNING "
	    "node_id) SELECT json_build_object('node', node_id, 'n', "
	    "pg_notify('" WD_FLEET_APPROVALS "', node_id))::text FROM d",
	    6, pv, err);
	if (!o) {
		if (errno == ENOENT)
			return wd_err_set(err, -ENOENT,
					  "no pending approval '%s' (decided, "
					  "expired or unknown)",
					  id);
		return -EAGAIN;
	}
	char node[40];
	snprintf(node, sizeof(node), "%s",
		 json_string_value(json_object_get(o, "node")) ?: "?");
	json_decref(o);
	/* the run's node applies it within its next wake-up (the NOTIFY):
	 * its verdict is the answer */
	const char *qv[1] = {id};
	for (int waited = 0; waited < 5000; waited += 50) {
		struct wd_err qe = {0};
		json_t *s = fl_row_json(
		    f,
		    "SELECT json_build_object('state', state, 'code', "
		    "result_code, 'result', result)::text FROM "
		    "warden.approvals WHERE id = $1",
		    1, qv, &qe);
		const char *st =
		    s ? json_string_value(json_object_get(s, "state")) : NULL;
		if (st && strcmp(st, "decided")) {
			int code =
			    (int)json_integer_value(json_object_get(s, "code"));
			const char *res =
			    json_string_value(json_object_get(s, "result"));
			int rc = code ? wd_err_set(err, code, "node %s: %s",
						   node, res ? res : "?")
				      : 0;
			json_decref(s);
			return rc;
		}
		json_decref(s);
		nap_ms(50);
	}
	return wd_err_set(err, -EAGAIN,
			  "decision recorded; node %s has not applied it "
			  "within 5 s (it will when it is back)",
			  node);
}
