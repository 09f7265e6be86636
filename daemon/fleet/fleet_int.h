/* Inside the fleet box (fleet.h): the node's state and the steps each file
 * owns. One libpq connection per thread that talks: the fleet thread's
 * (heartbeats, claims, LISTEN, run ends) and the API's (submit, views),
 * the latter under api_mu. Every statement that carries a value from
 * outside is PQexecParams with parameters. */
#ifndef WD_FLEET_INT_H
#define WD_FLEET_INT_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>

#include "fleet/fleet.h"

/* the channel submissions notify (payload: the run id) */
#define WD_FLEET_CHANNEL "warden_runs"
/* the channel decisions taken on another node notify (payload: the node
 * that holds the approval) */
#define WD_FLEET_APPROVALS "warden_approvals"

struct wd_fleet {
	struct wd_rt *rt;
	char *conninfo;
	char node_id[40];
	char hostname[256];
	char version[96];
	char *labels_json; /* {"key": "value", ...} */
	unsigned capacity, lease_ms;
	bool run_here_when_down;
	unsigned tier_cap[3]; /* runs using tier 1, 2, 3 held at once */

	pthread_t thread;
	bool thread_started;
	int wake_fd;	 /* eventfd: a run ended, or stop */
	PGconn *db;	 /* the fleet thread's */
	bool registered; /* once in this process: later ones reconnect */

	pthread_mutex_t api_mu;
	PGconn *api;

	pthread_mutex_t mu; /* everything below */
	bool stopping;
	bool up; /* the fleet thread's connection works */
	char db_error[256];
	json_t *held;	    /* local run id -> fleet run id: claimed here, not
			     * ended (they differ from the second attempt on) */
	json_t *ended;	    /* [{run_id, status, reason, output, steps, cost,
			     * tiers}] */
	json_t *held_tiers; /* local run id -> its tiers (bits 1 << tier) */
	/* local run id -> its tiers: a hash_only agent's run submitted here
	 * and run here (never queued: queue.c wd_fleet_submit), counted
	 * against this node's capacity until it ends */
	json_t *local;
	/* held by the fleet thread across its room check and claim, and by
	 * a local run's reservation: the two never take the same slot */
	pthread_mutex_t claim_mu;
	/* fencing (fence.c): local run id -> wd_now_ns() before its claim;
	 * local run id -> why, for a held run the database has taken from
	 * this node (until it ends); wd_now_ns() before the last heartbeat
	 * that went through (0 none); fence_cond (with mu) is signalled after
	 * every heartbeat and at stop */
	json_t *held_at;
	json_t *lost;
	uint64_t hb_ok_ns;
	pthread_cond_t fence_cond;
	uint64_t m_claimed, m_submitted, m_lease_lost, m_interrupted,
	    m_db_errors, m_ends_written, m_requeued, m_run_here;
	int64_t queue_depth; /* at the last heartbeat; -1 unknown */
	/* the trace shipper (ship.c): its thread owns ship_db */
	pthread_t ship_thread;
	bool ship_started;
	PGconn *ship_db;
	int64_t shipped_seq;	  /* the database's cursor; -1 not read yet */
	uint64_t m_shipped;	  /* records shipped by this process */
	uint64_t m_blobs_shipped; /* blob rows written by this process */
	double ship_lag_s;	  /* age of the oldest record not shipped */
	pthread_cond_t ship_cond; /* with mu: stopping */
	/* approvals.c, the fleet thread's: the ids last published */
	char *published;
	/* approval id -> [code, result]: decided here, the outcome not yet
	 * written (a lost reply: the next round writes it, not a second
	 * decision's -ENOENT) */
	json_t *applied;
	int64_t nodes_up;
};

/* schema.c: create or migrate the schema on c. 0, -EPROTO (the database
 * is newer than this build), -EIO (err: the server's message). */
int fl_schema_migrate(PGconn *c, struct wd_err *err);
#define WD_FLEET_SCHEMA_VERSION 8
/* a resumable run is run at most this many times in all */
#define WD_FLEET_ATTEMPTS 3

/* the run's last tool_attempt its node shipped (the index rows under the
 * run's local id, queue.c; in an UPDATE of warden.runs: node.c when a
 * run is lost, ship.c when its node ships more of it later), and whether its
 * tool_result was shipped after it: what an interrupted run may have done last.
 * NULL when none was. */
#define LAST_ATTEMPT                                                           \
	"(SELECT jsonb_build_object('step', a.step, 'tool', a.tool, "          \
	"'call_id', a.call_id, 'seq', a.seq, 'result', EXISTS (SELECT 1 "      \
	"FROM warden.trace_records t WHERE t.node_id = a.node_id AND "         \
	"t.run_id = a.run_id AND t.type = 'tool_result' AND t.call_id = "      \
	"a.call_id AND t.seq > a.seq)) FROM warden.trace_records a WHERE "     \
	"a.node_id = runs.node_id AND a.run_id = CASE WHEN runs.attempt > 0 "  \
	"THEN runs.id || '-a' || runs.attempt ELSE runs.id END AND a.type = "  \
	"'tool_attempt' ORDER BY a.seq DESC LIMIT 1)"
/* node.c */
int fl_register(struct wd_fleet *f, PGconn *c, struct wd_err *err);
/* Renews the node's lease and its runs'; held runs not renewed are lost
 * (fence.c fl_fence_renewed). */
int fl_heartbeat(struct wd_fleet *f, PGconn *c, struct wd_err *err);
/* interrupt the runs whose lease ran out (any node's); count in *n */
int fl_reap(struct wd_fleet *f, PGconn *c, int64_t *n, struct wd_err *err);
int fl_node_stopped(struct wd_fleet *f, PGconn *c, struct wd_err *err);
int fl_node_id_load(const char *state_dir, char id[40], struct wd_err *err);

/* queue.c */
/* Claim one run, all of whose tiers are in `tiers` (bits 1 << tier: the
 * tiers with room here now), and start it here. 1 claimed, 0 none queued,
 * -errno. */
int fl_claim_one(struct wd_fleet *f, PGconn *c, unsigned tiers,
		 struct wd_err *err);
/* bits 1 << tier as "1,3" ("none" for 0) */
void fl_tiers_text(unsigned tiers, char out[16]);
/* Write the ends of runs held here; 0 or -errno (the rest stay queued). */
int fl_write_ends(struct wd_fleet *f, PGconn *c, struct wd_err *err);
void fl_on_run_end(void *arg, const struct wd_rt_run_end *e);
/* the attempt a held run's local id (fleet id, or id-aN from the second
 * attempt on: fl_claim_one) runs as */
long fl_attempt_of(const char *lid, const char *fid);

/* approvals.c, on the fleet thread's connection: publish this node's
 * pending approvals (when they changed), apply decisions other nodes
 * wrote for them. 0 or -errno. */
int fl_publish_approvals(struct wd_fleet *f, PGconn *c, struct wd_err *err);
int fl_apply_decisions(struct wd_fleet *f, PGconn *c, struct wd_err *err);

/* fence.c: the runtime's fence hook (runtime.h wd_rt_set_fence_hook)
 * over the node's lease. */
enum wd_rt_fence fl_fence(void *arg, const char *run_id, uint64_t wait_ns,
			  char *why, size_t why_len);
/* After a heartbeat that began at t0 (wd_now_ns) with `before` (a copy of
 * the held run ids then) and renewed the runs of result r (id, attempt):
 * the held runs not renewed are lost; a lease is certain until t0 +
 * lease - margin. Without mu. */
void fl_fence_renewed(struct wd_fleet *f, json_t *before, PGresult *r,
		      uint64_t t0);
/* The fleet's claim on a run started at t0 (the lease is counted from
 * there until the next heartbeat renews it). Under mu. */
void fl_fence_claimed_locked(struct wd_fleet *f, const char *lid, uint64_t t0);
/* A run held here ended: forget it. Under mu. */
void fl_fence_forget_locked(struct wd_fleet *f, const char *lid);

/* ship.c: the shipper thread (started by wd_fleet_start, joined by
 * wd_fleet_stop after `stopping` is set and ship_cond signalled). */
void *fl_ship_thread(void *arg);

/* queue.c: one row of JSON text made by the server (row_to_json,
 * json_agg), parsed; NULL with errno ENOENT (no row) or EAGAIN (err). On
 * the API's connection. */
json_t *fl_row_json(struct wd_fleet *f, const char *sql, int n, const char **pv,
		    struct wd_err *err);
/* One statement (returning rows) on the API's connection: its result
 * (PQclear it), or NULL with errno EAGAIN and err. resfmt 1: columns in
 * binary (a bytea's bytes as they are). */
PGresult *fl_api_exec(struct wd_fleet *f, const char *sql, int n,
		      const char **pv, int resfmt, struct wd_err *err);
/* The trace's read rule as query parameters: $all ("true"/"false"), $uid,
 * $teams (a text[] literal of the caller's groups: names of [a-z0-9_-],
 * passed as a parameter like any other value). Free teams. */
struct fl_scope {
	const char *all;
	char uid[24];
	struct wd_buf teams;
};
void fl_scope_params(struct wd_fleet *f, const struct wd_caller *c,
		     struct fl_scope *s);

/* fleet.c: a slot for a local run (f->local) under id, if this node has
 * room for it in all its tiers: 0, or -EBUSY with err. */
int fl_reserve_local(struct wd_fleet *f, const char *agent, const char *id,
		     unsigned tiers, struct wd_err *err);

/* pq_lazy.c: load libpq (wardend links none: a node without --fleet needs
 * none). 0, or -ENOENT with err. */
int fl_pq_load(struct wd_err *err);

/* fleet.c: a new connection (check PQstatus), with a connect timeout and
 * TCP keepalives unless the URL sets them; stmt_ms > 0: a statement_timeout
 * of stmt_ms and a lock_timeout of lease/3 (0: the server's). */
PGconn *fl_connect(struct wd_fleet *f, unsigned stmt_ms);

/* PQexecParams with a bound on the wait for the reply: none within
 * wait_ms and the connection is cut (lost: fl_pg_lost; fl_pg_err then
 * says why). NULL on a failure to send or a cut. */
PGresult *fl_exec(PGconn *c, const char *sql, int n, const char *const *pv,
		  int resfmt, unsigned wait_ms);
/* the wait for a reply on the fleet thread's connection (heartbeats,
 * claims: the lease is at stake) and on the API's (callers wait) */
unsigned fl_thread_wait_ms(const struct wd_fleet *f);
unsigned fl_api_wait_ms(const struct wd_fleet *f);
/* the API's statements' bound (its views may read much) */
#define WD_FLEET_API_WAIT_MS 30000u

/* A statement's failure as -EIO with the server's words. Clears r. */
int fl_pg_err(PGresult *r, PGconn *c, const char *what, struct wd_err *err);
/* Is the connection gone (to be dropped and made again)? */
bool fl_pg_lost(PGconn *c);

#endif
