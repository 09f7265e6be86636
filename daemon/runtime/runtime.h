/* The agent runtime: runs agents' bounded loops on a worker pool.
 *
 *   wd_rt_run_create() ─▶ queue ─▶ worker: run_advance()
 *        loop: check the 4 bounds → fit context → gateway → record
 *              → broker (per tool call, concurrently) → record → step++
 *        a call that needs approval suspends the run: its state goes to
 *        memory + STATE/runs/<id>.json and the worker returns (no thread is
 *        held). wd_rt_approval_decide() or the TTL re-queues it.
 *
 * Policy snapshots are reference counted: a reload swaps the current one;
 * runs keep the snapshot they started with until they end (no run is
 * dropped by a reload).
 *
 * Restart: STATE/runs/<id>.active marks a run in progress. At open, a run
 * with a snapshot (<id>.json: suspended on approval) is restored; any other
 * is ended with run_end {status: "interrupted", last_attempt}.
 */
#ifndef WD_RUNTIME_H
#define WD_RUNTIME_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "alert/alert.h"
#include "common/util.h"

struct wd_rt;
struct wd_run;
struct wd_pool_config;
struct wd_otlp;

/* Who is calling, from the socket (SO_PEERCRED), never from the request. */
struct wd_caller {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	char user[64]; /* passwd name of uid, or the decimal uid */
};
/* Fill from a connected unix socket. 0 / -errno. */
int wd_caller_from_socket(int fd, struct wd_caller *c);
/* Fill from a uid (tests, in-process callers). */
void wd_caller_from_uid(uid_t uid, gid_t gid, struct wd_caller *c);

struct wd_rt_opts {
	const char *state_dir;
	const char *policy_dir;
	int workers;		 /* 0 = 8 */
	unsigned approval_ttl_s; /* 0: each agent's bounds */
	const char *webhook_url; /* approval TTL notifications; NULL = none */
	const struct wd_alert_config *alert; /* NULL = no denial alerting */
	int warm_pool; /* tier-3 sandboxes kept ready per call
			* shape; 0 = cold starts (when pool is NULL) */
	/* the whole warm-pool configuration (policy/daemon.yaml); NULL =
	 * {.size = warm_pool}; size 0 = cold starts */
	const struct wd_pool_config *pool;
	/* extra redaction patterns for the trace store (POSIX EREs,
	 * NULL-terminated, may be NULL); must outlive wd_rt_close() */
	const char *const *redact_regexes;
	/* live OTLP exporter fed by the trace store, or NULL. Not owned:
	 * stop it after wd_rt_close(). */
	struct wd_otlp *otlp;
	/* the node runs in a fleet (wardend --fleet): a restored run whose
	 * snapshot does not say whether it was fenced (written by a build
	 * before fencing) is taken as fenced (recover.c) */
	bool fleet;
};

int wd_rt_open(const struct wd_rt_opts *o, struct wd_rt **out,
	       struct wd_err *err);
/* Stops accepting work, waits for workers to finish their current step,
 * flushes the trace. Runs suspended on approval stay resumable. */
void wd_rt_close(struct wd_rt *rt);

/* Reload policy/. On any error the old policy stays and err says why. */
int wd_rt_reload(struct wd_rt *rt, struct wd_err *err);
/* +1 at each successful reload: a stream that judged its reader's access
 * under another generation judges it again. */
uint64_t wd_rt_policy_gen(struct wd_rt *rt);

/* Start a run. -ENOENT unknown agent, -EACCES caller may not run it. */
int wd_rt_run_create(struct wd_rt *rt, const struct wd_caller *c,
		     const char *agent, const char *task, char id[64],
		     struct wd_err *err);

/* The same with the run's id given (NULL: a new one): a run queued in the
 * fleet keeps the id it was queued under (fleet/queue.c). -EEXIST when a
 * run of that id is in this node's memory. */
int wd_rt_run_create_id(struct wd_rt *rt, const struct wd_caller *c,
			const char *agent, const char *task,
			const char *given_id, char id[64], struct wd_err *err);
/* What wd_rt_run_create checks before it creates anything: the agent
 * exists and c may run it. 0 with what the fleet's queue needs to know of
 * the agent (free placement), -ENOENT, -EACCES. An agent with a placement
 * runs only under an id the fleet gave (wd_rt_run_create: -EINVAL). */
struct wd_rt_agent_facts {
	char team[64];
	char *placement; /* its placement as JSON text, or NULL */
	bool resume;	 /* resume: if_read_only */
	bool hash_only;	 /* trace.payloads: hash_only */
	/* the tiers its tools and its sub-agents' tools run in, bit 1 << tier
	 * (a run needs room in each on the node that runs it: fleet.h) */
	unsigned tiers;
};
int wd_rt_run_check(struct wd_rt *rt, const struct wd_caller *c,
		    const char *agent, struct wd_rt_agent_facts *out,
		    struct wd_err *err);
/* May a fleet run of `agent` whose earlier attempt was lost with its node
 * be run again here, by THIS node's policy (a rolling policy change may
 * have made the submitter's answer stale)? resume: if_read_only, no
 * sub-agents, and no tool with side effects (policy/agent.h
 * wd_agents_check_resume). false with why. */
bool wd_rt_may_run_again(struct wd_rt *rt, const char *agent, char *why,
			 size_t why_len);
/* The trace's read rule (policy/users.h wd_users_may_read_run) for a run
 * known only by its uid and team (a fleet run of another node). */
bool wd_rt_may_read(struct wd_rt *rt, const struct wd_caller *c,
		    int64_t run_uid, const char *team);
/* The same rule as a set, for queries over many runs: {all: bool, uid,
 * teams: [...]} (policy/users.h wd_read_scope; a copy). */
json_t *wd_rt_read_scope(struct wd_rt *rt, const struct wd_caller *c);
/* Is uid an approver (users.yaml approvers)? */
bool wd_rt_is_approver(struct wd_rt *rt, uid_t uid);
/* Every pending approval without its call's arguments (a payload, read
 * only through wd_rt_approvals_list, which records the read): [{id,
 * run_id, tool, reason, agent, team, user, uid, created_ns, expires_ns}]
 * (the fleet publishes them: fleet/approvals.c). */
json_t *wd_rt_approvals_meta(struct wd_rt *rt);
/* A run's end, as recorded in its run_end (output NULL for hash_only). */
struct wd_rt_run_end {
	const char *run_id, *status, *reason, *output;
	int steps;
	double cost_usd;
};
/* Called by the thread that ended the run, after run_end is written,
 * under the hook's own lock only (not the runtime's): it must not block on
 * the network nor call back into the runtime. Setting it (NULL to clear)
 * waits for a call in progress. One hook. */
typedef void (*wd_rt_run_end_fn)(void *arg, const struct wd_rt_run_end *e);
void wd_rt_set_run_end_hook(struct wd_rt *rt, wd_rt_run_end_fn fn, void *arg);
/* Fencing (fleet/fleet.h "Fencing"): a run created under a given id (the
 * fleet's) asks the hook before each step and before any tool with side
 * effects starts whether this node still holds its lease. OK: it does,
 * certainly; UNSURE: not known now (the database unreachable) -- asked
 * again, side effects wait; LOST: it does not (why says so) -- the run
 * ends `interrupted` without starting the tool. The hook may wait up to
 * wait_ns for a better answer than UNSURE. A fenced run with no hook set
 * (the fleet stopped, or not started yet) is LOST. Runs not created under
 * a given id never ask. */
enum wd_rt_fence { WD_RT_FENCE_OK, WD_RT_FENCE_UNSURE, WD_RT_FENCE_LOST };
typedef enum wd_rt_fence (*wd_rt_fence_fn)(void *arg, const char *run_id,
					   uint64_t wait_ns, char *why,
					   size_t why_len);
void wd_rt_set_fence_hook(struct wd_rt *rt, wd_rt_fence_fn fn, void *arg);

/* Replay run `of` (DESIGN §4 "Replay (execution)") as the caller, who
 * must be the run's user or root. opts: {from (required), determinism
 * "divergent"|"pinned"|"recorded-model", tools "live"|"recorded",
 * live_internal, agent, system_prompt (texts), model, tool {NAME: manifest
 * text}, args {"STEP.CALL": value}, mock {TOOL: text}}. The new run's id
 * in id. -ENOENT no such run, -EACCES not the caller's, -EINVAL bad
 * options or a mode not available (err says which), -EBADMSG the record
 * cannot be reproduced (a damaged blob, a conversation that does not hash
 * to the recorded prompt_hash). *prefix_us (may be NULL): the time taken
 * to rebuild the steps before `from` (reading, hash checks, records). */
int wd_rt_replay_create(struct wd_rt *rt, const struct wd_caller *c,
			const char *of, const json_t *opts, char id[64],
			uint64_t *prefix_us, struct wd_err *err);

/* Streaming a run's step events: a cursor over the run's records, for a
 * caller who may read the run (the trace's rule); NULL with errno ENOENT
 * or EACCES and err. */
struct wd_rt_stream;
struct wd_rt_stream *wd_rt_stream_open(struct wd_rt *rt,
				       const struct wd_caller *c,
				       const char *run_id, uint64_t since_seq,
				       struct wd_err *err);
/* Waits up to timeout_ms for more; appends JSON lines to `out`.
 * Returns 1 while more may come, 0 at the end of the run, -errno. */
int wd_rt_stream_next(struct wd_rt_stream *s, int timeout_ms,
		      struct wd_buf *out);
void wd_rt_stream_close(struct wd_rt_stream *s);

/* JSON views for the API (new references; NULL + errno when absent). */
/* A run's view and the list of runs, for callers who may read them (the
 * same rule as the trace: root, the run's user, its team's group,
 * auditors; trace_access.c). _info: NULL with errno ENOENT (no run) or
 * EACCES (err says who may). A hash_only run's view has no output. */
json_t *wd_rt_run_info(struct wd_rt *rt, const struct wd_caller *c,
		       const char *run_id, struct wd_err *err);
json_t *wd_rt_runs_list(struct wd_rt *rt, const struct wd_caller *c);
/* A fleet run's row o (GET /v1/fleet/runs/ID: another node may have run
 * it) holding an output, handed to c: recorded in this node's trace as the
 * local view's read is (a run_view payload_read naming run_node when not
 * NULL), unless c is the run's own user. o, or NULL with errno EAGAIN (o
 * released): not recorded, not to be handed out. */
json_t *wd_rt_fleet_output_read(struct wd_rt *rt, const struct wd_caller *c,
				json_t *o, const char *run_id, int64_t run_uid,
				const char *team, const char *run_node,
				struct wd_err *err);
/* May c see a denial event: root and auditors every one, others those of
 * the runs they may read (by the run in memory, else by its team's
 * group); an event of no run only root and auditors. */
struct wd_event;
bool wd_rt_event_visible(struct wd_rt *rt, const struct wd_caller *c,
			 const struct wd_event *ev);
/* A visible denial event of a full run is about to be handed to c: its
 * target (a path, a host) is payload, so the first one of each run a
 * reader other than the run's own user gets is recorded in that run as a
 * payload_read (payload_type "events"), once per reader and run. 0, or
 * -EAGAIN with err: not recorded, the event is not to be handed out. */
int wd_rt_note_event_read(struct wd_rt *rt, const struct wd_caller *c,
			  const struct wd_event *ev, struct wd_err *err);
json_t *wd_rt_approvals_list(struct wd_rt *rt, const struct wd_caller *c);
/* -ENOENT unknown/decided, -EPERM caller not an approver for it. */
int wd_rt_approval_decide(struct wd_rt *rt, const struct wd_caller *c,
			  const char *id, bool approve, const char *reason,
			  struct wd_err *err);
/* Cost of the runs the caller may read (the read rule of the run views:
 * its own, its teams', all for auditors and root). */
json_t *wd_rt_cost(struct wd_rt *rt, const struct wd_caller *c, const char *by,
		   uint64_t since_ns, struct wd_err *err);
/* The same with other nodes' runs counted too: extra (borrowed, may be
 * NULL) holds rows {run_id, team, agent, user, cost_usd, input_tokens,
 * output_tokens} the caller may read. */
json_t *wd_rt_cost_with(struct wd_rt *rt, const struct wd_caller *c,
			const char *by, uint64_t since_ns, json_t *extra,
			struct wd_err *err);
json_t *wd_rt_status(struct wd_rt *rt);
/* What the node-wide views show c (scope.c): root, the daemon's uid and
 * auditors the whole node; anyone else the runs they may read and the
 * agents, tools and labelled series of their own teams (status: with
 * scope {teams}; metrics: the text `full` filtered, wd_metrics_scoped). */
json_t *wd_rt_status_for(struct wd_rt *rt, const struct wd_caller *c);
char *wd_rt_metrics_for(struct wd_rt *rt, const struct wd_caller *c,
			const char *full);
/* The daemon's health for /healthz and /v1/status: 0 when the trace store
 * takes records; else its latched -errno, with `why` saying what failed,
 * since when and when it is probed next (the store recovers by itself).
 * One mutex, no I/O: cheap enough for every liveness probe. */
int wd_rt_health(struct wd_rt *rt, char *why, size_t len);
struct wd_trace_health;
/* wd_rt_health's reason for a reading already taken (h->error != 0). */
void wd_rt_health_why(const struct wd_trace_health *h, char *why, size_t len);
/* Prometheus text exposition (free()). */
char *wd_rt_metrics(struct wd_rt *rt);

/* Trace reads for `warden trace` through the daemon (trace_access.c): the
 * caller must be root, the run's user, in its team's group or in the
 * auditors group (policy/users.h wd_users_may_read_run), else -EACCES;
 * -ENOENT no such run. _payload records a payload_read before returning
 * (-EAGAIN when it cannot) and never returns a hash_only run's payloads.
 * _runs and _grep return only the rows of runs the caller may read (by the
 * uid that started each run, never its user name). _grep returns one page,
 * {records: [...], more, next_after}: at most q->limit records (1 to
 * WD_TRACE_RECORDS_MAX, else -EINVAL) with seq > q->after_seq; when `more`,
 * the next page is after=next_after. _runs the same by runs: {runs, more,
 * next_after}, at most q->limit (1 to WD_TRACE_RUNS_MAX) after the cursor
 * (q->after_started, q->after_run; next_after is "START.RUN_ID"). */
struct wd_trace_query;
int wd_rt_trace_records(struct wd_rt *rt, const struct wd_caller *c,
			const char *run_id, json_t **out, struct wd_err *err);
int wd_rt_trace_payload(struct wd_rt *rt, const struct wd_caller *c,
			const char *run_id, int64_t step, const char *type,
			json_t **out, struct wd_err *err);
int wd_rt_trace_runs(struct wd_rt *rt, const struct wd_caller *c,
		     const struct wd_trace_query *q, json_t **out,
		     struct wd_err *err);
int wd_rt_trace_grep(struct wd_rt *rt, const struct wd_caller *c,
		     const struct wd_trace_query *q, json_t **out,
		     struct wd_err *err);
/* A run this node's store does not hold, read from elsewhere (another
 * node's, shipped to the fleet database: fleet/fleet.h
 * wd_fleet_trace_src). records: the run's records in seq order, as its
 * node's store holds them, and the node's id; blob: one blob, hash
 * checked (trace.h wd_trace_blob_fn). Either: 0, -ENOENT, -EAGAIN (err
 * says why: the source cannot be read now). */
struct wd_rt_trace_src {
	int (*records)(void *ctx, const char *run_id, json_t **out,
		       char node[64], struct wd_err *err);
	int (*blob)(void *ctx, const char *ref, char **data, size_t *len,
		    struct wd_err *err);
	void *ctx;
};
/* wd_rt_trace_records / _payload over src (NULL: this node's store): the
 * same read rule and the same payload_read record, written here in this
 * node's store (naming the run's node as run_node) before anything is
 * handed out. */
int wd_rt_trace_records_from(struct wd_rt *rt, const struct wd_caller *c,
			     const char *run_id,
			     const struct wd_rt_trace_src *src, json_t **out,
			     struct wd_err *err);
int wd_rt_trace_payload_from(struct wd_rt *rt, const struct wd_caller *c,
			     const char *run_id, int64_t step, const char *type,
			     const struct wd_rt_trace_src *src, json_t **out,
			     struct wd_err *err);
/* Another node's pending approval o (fleet/fleet.h wd_fleet_approvals:
 * listed to approvers and the run's readers) with the arguments its run's
 * approval_request record holds (request, borrowed; none: a hash_only
 * run's, not in its records): handed out in o as this node hands out its
 * own, recorded first as a payload_read here naming run_node, else
 * withheld (args_hash, args_withheld saying why). */
void wd_rt_remote_approval_args(struct wd_rt *rt, const struct wd_caller *c,
				json_t *o, json_t *request, const char *node);
/* Does this node's store hold run_id (its run_start)? */
bool wd_rt_trace_holds(struct wd_rt *rt, const char *run_id);
/* wd_rt_trace_runs with other nodes' rows merged in: extra (borrowed; may
 * be NULL) holds rows of the same shape plus page_started (the start in
 * microseconds, 0 unknown), each after q's cursor and at most q->limit + 1
 * of them, in page order; they are judged by the read rule like the
 * node's own. */
int wd_rt_trace_runs_with(struct wd_rt *rt, const struct wd_caller *c,
			  const struct wd_trace_query *q, json_t *extra,
			  json_t **out, struct wd_err *err);

/* The trace store (for the daemon's events endpoint and tests). */
struct wd_trace *wd_rt_trace(struct wd_rt *rt);
/* The node-wide event stream (GET /v1/events). */
struct wd_stream *wd_rt_events(struct wd_rt *rt);

#endif
