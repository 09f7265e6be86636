/* The fleet: many wardend nodes sharing one PostgreSQL database (README
 * "More than one node"). Off unless wardend is given --fleet; a node
 * without it needs no database and behaves as it always did.
 *
 *   schema.c  the tables, created and migrated by wardend itself: numbered
 *             steps applied in one transaction under an advisory lock, so
 *             nodes starting together apply each step once
 *   node.c    this node's row: registration, heartbeat, its lease; the
 *             reaper that interrupts the runs of a node whose lease ran out
 *   fence.c   fencing: whether this node certainly still holds a run's
 *             lease, asked by the runtime before side effects
 *   queue.c   the run queue: submit (POST /v1/runs), claim (fair share
 *             between teams, an agent's placement held by the node's
 *             labels, the run's tiers by the node's room in each,
 *             FOR UPDATE SKIP LOCKED), run ends, the queue's views
 *   fleet.c   the node's fleet thread (LISTEN/NOTIFY, heartbeats, claims),
 *             status, metrics
 *   ship.c    the trace shipper: the node's records (lines, index rows,
 *             payload blobs), in order, with the cursor in the same
 *             transaction
 *   trace_views.c  the shipped index read fleet-wide: runs, a run, cost
 *   trace_verify.c the shipped chains verified (`warden fleet verify`)
 *   trace_gc.c     retention over the shipped trace (`warden fleet gc`)
 *   approvals.c    pending approvals published by the run's node, decided
 *             on any node, applied by the run's node as the approver
 *
 * Leases: a node's claimed runs carry lease_until (database time), renewed
 * by every heartbeat; when it passes, any node's reaper marks them
 * `interrupted` fleet-wide -- or, for an agent with `resume: if_read_only`
 * (every tool side_effects: none, no sub-agents: policy/agent.h), queued
 * again to be run from its task elsewhere (node.c LOSE_RUN).
 *
 * Fencing (fence.c): a node that cannot reach the database cannot know
 * whether another node's reaper took its runs. A fleet run starts a tool
 * with side effects (and each new step) only after asking the runtime's
 * fence hook (runtime.h wd_rt_set_fence_hook): OK while this node's last
 * heartbeat that went through began less than 4/5 of a lease ago (local
 * monotonic time: the database's lease began after it); LOST once a
 * heartbeat did not renew the run (its UPDATE returns the runs renewed)
 * -- the run ends `interrupted` here, the fleet's verdict stands
 * (fl_write_ends writes only over the row of the attempt it ran as, and
 * only while `running` there); else UNSURE: a side effect waits, within
 * the run's wall clock, while tools without side effects and model calls
 * go on. So an outage (the database down for every node) interrupts
 * nothing -- the tools wait and run once it is back -- while a node cut
 * off alone acts on no run the others have interrupted or queued again.
 *
 * Degraded mode: with the database unreachable a node keeps running the
 * runs it holds (their ends are written when it is back; side effects wait
 * for the lease, above), claims nothing,
 * and refuses new submissions with 503 -- or, configured with
 * `when_down: run_here`, runs them itself as a node without a fleet would
 * (not when its labels lack the agent's placement; never when the
 * submission may have reached the queue); it reconnects by itself.
 */
#ifndef WD_FLEET_H
#define WD_FLEET_H

#include <jansson.h>
#include <stdint.h>

#include "common/util.h"
#include "runtime/runtime.h"

struct wd_fleet;

#define WD_FLEET_LABELS_MAX 16

struct wd_fleet_opts {
	/* a libpq connection string or URI ("postgresql://...", "host=..."),
	 * or "@FILE" / an absolute path of a file holding one */
	const char *url;
	const char *state_dir; /* STATE/fleet-node-id names the node */
	unsigned capacity;     /* runs held at once; 0 = submit only */
	/* runs using tier 1, 2, 3 held at once; -1: `capacity` for each tier
	 * this node can run (enforce/probe.h wd_tier_runs), 0 for the others.
	 * A tier given > 0 that the node cannot run is refused (-EINVAL). */
	int tier_capacity[3];
	unsigned lease_ms; /* 0 = WD_FLEET_LEASE_MS_DEFAULT */
	const char *labels[WD_FLEET_LABELS_MAX]; /* "key=value" */
	unsigned n_labels;
	/* with the database unreachable, a submission is run on this node
	 * (when its labels hold the agent's placement) instead of refused
	 * (fleet.when_down: run_here) */
	bool run_here_when_down;
};

#define WD_FLEET_LEASE_MS_DEFAULT 10000u
#define WD_FLEET_LEASE_MS_MIN	  300u

/* Read the URL (a file's first line for @FILE or a path), check its
 * syntax with libpq, and the other options. 0 or -EINVAL / -errno with
 * err. *conninfo is malloc'd. */
int wd_fleet_conninfo(const char *url, char **conninfo, struct wd_err *err);
int wd_fleet_label_check(const char *kv, struct wd_err *err);
/* "refuse" 0, "run_here" 1, else -1 (fleet.when_down, --fleet-when-down) */
int wd_fleet_when_down_parse(const char *s);

/* Connect, migrate, register and start the fleet thread. A database that
 * cannot be reached is not an error: the node starts degraded and retries
 * (err is then a warning in the log). -EINVAL for options, -EPROTO for a
 * schema newer than this build. */
int wd_fleet_start(const struct wd_fleet_opts *o, struct wd_rt *rt,
		   struct wd_fleet **out, struct wd_err *err);
/* Claims nothing more from now on (a stopping node: called before the API
 * closes, which may take a while). */
void wd_fleet_stop_claims(struct wd_fleet *f);
/* Stops claiming, writes what it can, marks the node stopped. Runs still
 * held are interrupted by the runtime's own close (their run_end). */
void wd_fleet_stop(struct wd_fleet *f);

/* POST /v1/runs in a fleet: checks the agent and the caller as a local run
 * would (wd_rt_run_check), then queues it. id: the run's id. -ENOENT,
 * -EACCES, -EAGAIN (database unreachable: not queued), -EINVAL, -EBUSY (a
 * hash_only agent's run on a node without room); 1: not queued, to be run
 * on this node: a hash_only agent's (its task is not put in the shared
 * database) under id, in a slot of this node's capacity taken for it
 * (wd_fleet_local_release it if the run is not created; its end frees it),
 * or, id "", the database is unreachable and the node is configured to run
 * here then (err says so). */
int wd_fleet_submit(struct wd_fleet *f, const struct wd_caller *c,
		    const char *agent, const char *task, char id[64],
		    struct wd_err *err);
void wd_fleet_local_release(struct wd_fleet *f, const char *id);
/* GET /v1/fleet/runs/ID: the run's row for a caller who may read it (the
 * trace's rule). NULL with errno ENOENT, EACCES or EAGAIN and err. */
json_t *wd_fleet_run_get(struct wd_fleet *f, const struct wd_caller *c,
			 const char *id, struct wd_err *err);
/* GET /v1/fleet/runs: the newest `limit` rows the caller may read (state:
 * NULL or one of queued|running|done|interrupted), without tasks and
 * outputs. NULL with errno EAGAIN. */
json_t *wd_fleet_runs(struct wd_fleet *f, const struct wd_caller *c,
		      const char *state, unsigned limit, struct wd_err *err);
/* GET /v1/fleet/trace/runs: the newest `limit` runs of the shipped trace
 * index (every node's) the caller may read. NULL with errno EAGAIN. */
json_t *wd_fleet_trace_runs(struct wd_fleet *f, const struct wd_caller *c,
			    unsigned limit, struct wd_err *err);
/* GET /v1/fleet/trace/runs/ID: {run, records: [index rows]}; NULL with
 * errno ENOENT (none the caller may read) or EAGAIN. */
json_t *wd_fleet_trace_run(struct wd_fleet *f, const struct wd_caller *c,
			   const char *id, struct wd_err *err);
/* GET /v1/fleet/cost: the cost of the ended runs of every node's shipped
 * trace the caller may read, by team, agent or user, started since
 * since_ns: {by, groups: [{<by>, runs, cost_usd, input_tokens,
 * output_tokens, nodes}], total_usd}. Each run's own cost (a sub-agent's
 * run is counted as itself). NULL with errno EAGAIN / EINVAL. */
json_t *wd_fleet_cost(struct wd_fleet *f, const struct wd_caller *c,
		      const char *by, uint64_t since_ns, struct wd_err *err);
/* GET /v1/approvals in a fleet, the other nodes' part: their pending
 * approvals for approvers and the runs' readers, without arguments (those
 * are read on the run's node, where the read is recorded). NULL with
 * errno EAGAIN. */
json_t *wd_fleet_approvals(struct wd_fleet *f, const struct wd_caller *c,
			   struct wd_err *err);
/* POST /v1/approvals/ID for an approval another node holds: the decision
 * is written and that node applies it as c (its own approver check); waits
 * up to 5 s for its verdict. 0, -ENOENT (no such pending approval), the
 * run's node's -errno (-EPERM not an approver there), -EAGAIN. */
int wd_fleet_approval_decide(struct wd_fleet *f, const struct wd_caller *c,
			     const char *id, bool approve, const char *reason,
			     struct wd_err *err);
/* The plain trace reads in a fleet (trace_reads.c): a source of other
 * nodes' runs for runtime.h wd_rt_trace_records_from / _payload_from
 * (records from warden.trace_lines, blobs from warden.trace_blobs; either
 * -EAGAIN when the database cannot be read, saying so). */
void wd_fleet_trace_src(struct wd_fleet *f, struct wd_rt_trace_src *src);
/* Other nodes' runs of the shipped index for GET /v1/trace/runs: at most
 * limit rows after q's cursor matching q's filters, readable by c, in
 * page order with page_started (runtime.h wd_rt_trace_runs_with). NULL
 * with errno EAGAIN (err). */
struct wd_trace_query;
json_t *wd_fleet_trace_page(struct wd_fleet *f, const struct wd_caller *c,
			    const struct wd_trace_query *q, unsigned limit,
			    struct wd_err *err);
/* Other nodes' shipped index rows for GET /v1/trace/records: at most
 * limit rows after (after_node, after_seq) in (node, seq) order matching
 * q's filters, of runs c may read, each naming its node. NULL with errno
 * EAGAIN (err). */
json_t *wd_fleet_trace_records(struct wd_fleet *f, const struct wd_caller *c,
			       const struct wd_trace_query *q,
			       const char *after_node, int64_t after_seq,
			       unsigned limit, struct wd_err *err);
/* Other nodes' ended runs started since since_ns that c may read, for
 * GET /v1/cost (runtime.h wd_rt_cost_with). NULL with errno EAGAIN. */
json_t *wd_fleet_cost_runs(struct wd_fleet *f, const struct wd_caller *c,
			   uint64_t since_ns, struct wd_err *err);
/* This node's id in the fleet. */
const char *wd_fleet_node_id(struct wd_fleet *f);
/* GET /v1/fleet/trace/verify[?run=ID] (`warden fleet verify`): each
 * node's chain recomputed from the lines it shipped (trace_verify.c):
 * {ok, nodes: [{node, shipped, starts_after?, lines, first_seq, last_seq,
 * problems}], problem_count, problems: [{node, seq, kind, message}]}.
 * Root and the auditors group. NULL with errno EACCES, ENOENT (no shipped
 * line of RUN) or EAGAIN. */
json_t *wd_fleet_trace_verify(struct wd_fleet *f, const struct wd_caller *c,
			      const char *run, struct wd_err *err);
/* POST /v1/fleet/trace/gc (`warden fleet gc`): retention over the shipped
 * trace (trace_gc.c); metadata_days 0 = WD_TRACE_METADATA_DAYS.
 * {metadata_days, payload_days_default, partitions_dropped: [names],
 * lines_removed, blobs_deleted, blob_bytes_deleted, runs_removed,
 * run_payloads_cleared (warden.runs' task and output of ended runs past
 * their payload retention), queue_runs_removed, approvals_removed (ended
 * runs, done approvals past metadata_days)}. Root
 * only. NULL with errno EPERM, EBUSY (another gc runs) or EAGAIN. */
json_t *wd_fleet_trace_gc(struct wd_fleet *f, const struct wd_caller *c,
			  unsigned metadata_days, struct wd_err *err);
/* GET /v1/fleet/nodes: every node's row. NULL with errno EAGAIN. */
json_t *wd_fleet_nodes(struct wd_fleet *f, struct wd_err *err);
/* The node's fleet state for /v1/status (new reference). */
json_t *wd_fleet_status(struct wd_fleet *f);
/* warden_fleet_* metrics (Prometheus text appended to b). */
void wd_fleet_metrics(struct wd_fleet *f, struct wd_buf *b);

#endif
