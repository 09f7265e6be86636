/* Internal structures of the runtime (runtime.c, approvals.c, recover.c,
 * views.c, loop.c). */
#ifndef WD_RT_INT_H
#define WD_RT_INT_H

#include <pthread.h>

#include "alert/metrics.h"
#include "broker/broker.h"
#include "runtime/pset.h"
#include "runtime/runtime.h"

struct wd_stream;
struct rt_replay;
struct wd_complete_req;
struct wd_complete_resp;

enum run_state { R_QUEUED, R_RUNNING, R_SUSPENDED, R_DONE };

/* A run's effective bounds (0 = none): its agent's, or for a sub-agent's
 * run the minimum of its agent's and the parent's remaining ones at the
 * moment of the call (subagent.c). */
struct rt_limits {
	int max_steps;
	long long token_budget;
	double wall_clock_s;
	double cost_cap_usd;
};
/* bits of wd_run.inherited: which limits came from the parent */
enum {
	RT_B_STEPS = 1,
	RT_B_TOKENS = 2,
	RT_B_WALL = 4,
	RT_B_COST = 8,
};

struct wd_run {
	struct wd_run *next;  /* rt->runs */
	struct wd_run *qnext; /* rt->queue */
	int refs;	      /* under rt->mu */
	struct wd_rt *rt;
	char id[40];
	/* the policy set and the agent inside it: NULL once the run is
	 * done and shed (rt_run_shed_locked); views use the names below */
	struct wd_pset *ps;
	const struct wd_agent_def *agent;
	char *agent_name, *team;
	bool hash_only; /* trace.payloads: hash_only (views show no output) */
	struct wd_caller caller;
	char **scopes;
	int n_scopes;
	char *task;
	/* conversation: [{role, text, tool_calls[], tool_call_id, tool_name,
	 * is_error, externalised}] */
	json_t *msgs;
	/* msgs as serialized so far ("[m0,m1" without the closing bracket)
	 * and each message's token estimate: extended as messages are
	 * appended, rebuilt after msgs_gen moves (in-place edits) */
	struct wd_buf ptext;
	size_t pn;
	long long *ptok, ptok_sum;
	unsigned msgs_gen, pgen;
	/* the current step's tool calls: [{id, name, arguments,
	 * parse_error, state, content, is_error, approval_id, approval}]
	 * state: new | waiting | approved | denied | ready | done */
	json_t *pending;
	json_t *done; /* "tool\x1f<canonical args>" -> {step, content} */
	int step;
	uint64_t in_tokens, out_tokens;
	double cost;
	uint64_t active_ns;   /* time spent running (not suspended) */
	uint64_t slice_start; /* wd_now_ns() when it last became active */
	uint64_t started_wall;
	enum run_state state;
	char status[24];       /* run_end status */
	char stop_reason[256]; /* bound or failure */
	char stop_bound[16];   /* the bound that stopped it, or "" */
	char *final_text;
	struct rt_limits lim;
	unsigned inherited; /* RT_B_* */
	int model_calls;    /* own model calls (a sub-agent is charged these) */
	/* context overflow (loop.c refit_once): refitted once already for
	 * the current overflow; the budget it fitted to (0 = the agent's) */
	bool ctx_refit;
	long long ctx_cut;
	uint64_t cached_tokens; /* part of in_tokens read from a prompt cache */
	/* sub-agents (subagent.c): a child run is run by its parent's
	 * thread, inside the parent's tool step */
	char parent_id[40]; /* "" = top-level run */
	int parent_step;
	int depth; /* 0 = top level */
	/* usage of every descendant run, charged against this run's
	 * bounds (steps = their model calls) */
	int sub_runs, sub_steps;
	uint64_t sub_in_tokens, sub_out_tokens;
	double sub_cost;
	json_t *children; /* ids of the direct child runs */
	/* a replay's state (replay.c), NULL for an ordinary run */
	struct rt_replay *replay;
	uint64_t step_t0_ns; /* the current step's first model call, 0 */
	/* a fleet run (created under the fleet's id): its steps and side
	 * effects are fenced by its lease (rt_fence); fence_id is the
	 * top-level run's id (a sub-agent's run inherits both) */
	bool fenced;
	char fence_id[40];
	/* rt_fence's -errno that stopped the current tool step (0 none) */
	int fence_rc;
	/* step events for streams: JSON lines, guarded by rt->mu */
	char **lines;
	uint64_t *line_seq;
	size_t n_lines, cap_lines;
};

struct wd_rt {
	char *state_dir, *policy_dir, *runs_dir;
	struct wd_trace *trace;
	struct wd_stream *events;
	struct wd_alert *alert; /* denial-rate alerts; NULL = off */
	struct wd_ratelimit *rl;
	pthread_mutex_t mu;
	pthread_cond_t qcond; /* queue non-empty / stopping */
	pthread_cond_t ecood; /* new stream lines (all runs) */
	struct wd_pset *ps;
	/* with a warm pool, a replaced policy set is kept here until its
	 * last run ended, then its pool keys are dropped and it is freed
	 * (rt_reap_retired) */
	struct wd_pool *pool;
	struct wd_otlp *otlp; /* the caller's exporter (not owned), or NULL */
	struct wd_pset **retired;
	int n_retired;
	struct wd_run *runs;
	struct wd_run *qhead, *qtail;
	pthread_t *workers;
	int n_workers;
	pthread_t ttl_thread;
	bool stopping;
	bool fleet; /* wd_rt_opts.fleet */
	unsigned approval_ttl_s;
	char *webhook;
	/* approvals: id -> {run_id, call_id, ...}; pointers to runs are
	 * looked up by run_id under mu */
	json_t *approvals;
	/* run id -> its run_end record, not recorded yet (the store was
	 * unhealthy): recover.c records it when the store recovers */
	json_t *unended;
	/* "run|uid|what|content" of view and stream reads recorded
	 * (trace_access.c rt_note_view_read): recorded once each */
	json_t *reads_noted;
	/* told of every run's end, after it is recorded (fleet/); called
	 * and changed under end_hook_mu, never under mu */
	pthread_mutex_t end_hook_mu;
	wd_rt_run_end_fn end_hook;
	void *end_hook_arg;
	/* the fleet's fence (wd_rt_set_fence_hook): called under the read
	 * side (calls may wait, several at once), changed under the write
	 * side */
	pthread_rwlock_t fence_mu;
	wd_rt_fence_fn fence;
	void *fence_arg;
	/* metrics */
	struct wd_metrics *metrics; /* labelled families (rt_metrics.c) */
	uint64_t m_overhead_ns;	    /* platform time per step, summed */
	/* policy generation: +1 at each reload (under mu, atomically: read
	 * without it by wd_rt_policy_gen); a stream's read decision is made
	 * again when it changed (views.c, server.c) */
	uint64_t ps_gen;
	/* something was freed since the last malloc_trim (under mu) */
	bool trim_pending;
	uint64_t trim_last_ns;
};

/* runtime.c */
void rt_enqueue_locked(struct wd_rt *rt, struct wd_run *r);
void rt_run_unref_locked(struct wd_run *r);
struct wd_pset *rt_run_shed_locked(struct wd_run *r);
/* May c read r (its view, stream, output)? Under rt->mu. */
bool rt_may_read_run_locked(struct wd_rt *rt, const struct wd_caller *c,
			    const struct wd_run *r);
/* The same as 0 or -EACCES with err saying who may: a run in memory
 * (under rt->mu), or one judged from its records as loaded (-ENOENT when
 * they hold no run_start) */
int rt_check_read_locked(struct wd_rt *rt, const struct wd_caller *c,
			 const struct wd_run *r, struct wd_err *err);
int rt_check_read_records(struct wd_rt *rt, const struct wd_caller *c,
			  const char *run_id, json_t *recs, struct wd_err *err);
/* A payload read through a run's view or stream (trace_access.c). */
struct rt_view_read {
	const char *run_id, *team;
	int64_t run_uid; /* -1: unknown (never the reader's own run) */
	int64_t step;
	const char *what; /* payload_type: "run_view" | "stream" */
	const char
	    *content;	/* what was read, for "read once" (a hash, a seq) */
	bool follow;	/* a live run's stream: later records too */
	uint64_t since; /* the stream's since= */
	/* why allowed when not as a reader of the run (an approver) */
	const char *access;
	/* the node that ran it, when another one (a fleet): named in the
	 * payload_read as run_node */
	const char *run_node;
	/* what is handed out (borrowed): an object or an array of them; the
	 * payload_read names their fields (rt_fields_returned) */
	json_t *returned;
};
/* [{fields, seqs, count}] of the objects in objs (an array or one). */
json_t *rt_fields_returned(json_t *objs);
/* Record the read unless c is the run's own user or read the same content
 * before; 0, or -EAGAIN (err set): not recorded, not to be handed out.
 * Takes `read` ([{seq|hash, field}]); call without rt->mu. */
int rt_note_view_read(struct wd_rt *rt, const struct wd_caller *c,
		      const struct rt_view_read *v, json_t *read,
		      struct wd_err *err);
/* The same for the records `recs` (borrowed) a stream hands out. */
int rt_note_stream_read(struct wd_rt *rt, const struct wd_caller *c,
			const struct rt_view_read *v, json_t *recs,
			struct wd_err *err);
/* The index rows (runs) matching q that c may read: 0 with a new array,
 * or -errno with err. */
int rt_readable_runs(struct wd_rt *rt, const struct wd_caller *c,
		     const struct wd_trace_query *q, json_t **out,
		     struct wd_err *err);
/* A hash_only run's denial records (recs, changed in place) with any
 * target an older build wrote verbatim hashed (wd_event_hashed_target). */
void rt_hash_old_targets(json_t *recs);
/* The first record of `type` in recs (borrowed), NULL if none */
json_t *rt_recs_first(json_t *recs, const char *type);
/* Append a record to the trace and to the run's stream. */
int rt_record(struct wd_run *r, json_t *rec, bool durable, struct wd_err *err);
/* rt_record for a typed record (trace/recw.h): appended, its line pushed
 * to the run's followers; head (may be NULL) gets seq, ts, prev. */
struct wd_recw;
struct wd_trace_head;
int rt_record_w(struct wd_run *r, struct wd_recw *w, bool durable,
		struct wd_trace_head *head, struct wd_err *err);
json_t *rt_rec_new(struct wd_run *r, const char *type);
void rt_finish(struct wd_run *r, const char *status, const char *reason,
	       const char *text);
/* run_check.c */
int rt_run_id_check(struct wd_rt *rt, const struct wd_agent_def *a,
		    const char *given_id, struct wd_err *err);
int rt_save_snapshot(struct wd_run *r);
void rt_drop_snapshot(struct wd_run *r);
/* Append a record's JSON line to the run's stream and wake readers
 * (rt->mu held). */
void rt_push_line_locked(struct wd_run *r, json_t *rec);
/* The run with that id in rt->runs, or NULL (rt->mu held). */
struct wd_run *rt_find_run_locked(struct wd_rt *rt, const char *id);
/* "<runs_dir>/<id>.<ext>", allocated (aborts on OOM). */
char *rt_run_path(struct wd_rt *rt, const char *id, const char *ext);
/* A new run (one reference, for rt->runs) on policy set ps; not yet
 * listed nor queued; the caller sets id and msgs. */
struct wd_run *rt_run_new(struct wd_rt *rt, struct wd_pset *ps,
			  const struct wd_agent_def *a,
			  const struct wd_caller *c, const char *task);

/* Free the retired policy sets no run holds any more (rt->mu not held). */
void rt_reap_retired(struct wd_rt *rt);
/* malloc_trim when no run is running or queued and memory was freed
 * (rt->mu held; dropped around the trim). */
void rt_trim_idle_locked(struct wd_rt *rt);

/* approvals.c */
/* The pending tool call with that id in r->pending, or NULL (rt->mu held). */
json_t *rt_find_call_locked(struct wd_run *r, const char *call_id);
/* Thread body (arg: the struct wd_rt *), every 250 ms until rt->stopping:
 * denies approvals past their TTL, frees retired policy sets, trims the
 * heap when idle. */
void *rt_ttl_thread(void *arg);

/* recover.c */
/* Write the run's marker runs/ID.active (content: {agent[, end]}), over
 * the old one in place, or created (O_EXCL). 0 or -errno. */
int rt_marker_write(struct wd_rt *rt, const char *id, json_t *content,
		    bool create);
/* rec (a run_end the store could not take) waits to be recorded; rt->mu
 * held; takes a reference. */
void rt_unended_add_locked(struct wd_rt *rt, const char *id, json_t *rec);
/* Record the waiting run_ends if the store is healthy (rt->mu not held). */
void rt_unended_flush(struct wd_rt *rt);
/* Restore or mark interrupted every run left active in runs_dir. */
void rt_recover(struct wd_rt *rt);
/* The run's first trace record of that type (a new reference), or NULL. */
json_t *rt_first_of(struct wd_rt *rt, const char *run_id, const char *type);

/* Record the run's run_start (durably). */
int rt_record_start(struct wd_run *r, struct wd_err *err);
/* Usage totals of the run and its descendants (new JSON object
 * {steps, input_tokens, output_tokens, cost_usd}); own_steps: the run's
 * steps as the caller counts them (completed steps, or model calls). */
json_t *rt_totals_json(const struct wd_run *r, int own_steps);

/* rt_metrics.c: the labelled families of alert/metrics.h with the run's
 * team and agent as their first two labels, then l2.. in the family's
 * order. Tool names pass through rt_m_tool_label. */
void rt_m_add(struct wd_run *r, enum wd_metric id, uint64_t n, const char *l2,
	      const char *l3, const char *l4);
void rt_m_observe(struct wd_run *r, enum wd_metric id, double seconds,
		  const char *l2, const char *l3);
/* name if the run's agent is granted that tool, else WD_METRICS_UNGRANTED
 * (a model-chosen name never becomes a label value). */
const char *rt_m_tool_label(const struct wd_run *r, const char *name);
/* "1", "2", "3" */
const char *rt_m_tier(int tier);
/* Series at 0 for every agent (and granted tool) of ps. */
void rt_m_init_policy(struct wd_rt *rt, const struct wd_pset *ps);

/* loop.c */
void rt_advance(struct wd_run *r);
/* A fenced run (wd_run.fenced) asks the fleet whether it still holds the
 * run's lease: 0 go on (always for a run not fenced); side_effects: a
 * lease that is merely uncertain (the database unreachable) is waited
 * for, within the run's wall clock, else it is not. -ESTALE the run is
 * lost (err: why; it is to end `interrupted`), -ETIME the wall clock
 * ran out waiting, -ECANCELED wardend is stopping. */
int rt_fence(struct wd_run *r, bool side_effects, struct wd_err *err);
/* time this slice spent in the model or in tools (the overhead figure
 * leaves it out); per thread: once a slice parks its run, another worker
 * may already advance it */
void rt_slice_ext(uint64_t ns);

/* context.c */
/* The conversation as JSON text (json_dumps(msgs, JSON_COMPACT)), new. */
char *rt_conv_text(struct wd_run *r);
/* Externalise old tool results, then slide the window, until the
 * conversation fits context.budget_tokens (recorded as context_fit). */
void rt_fit_context(struct wd_run *r);
/* The conversation in the gateway's form; points into msgs. */
struct rt_conv {
	struct wd_msg *m;
	struct wd_tool_call **calls;
	int n;
};
void rt_conv_build(json_t *msgs, struct rt_conv *c);
void rt_conv_free(struct rt_conv *c);

/* tools.c */
/* Run the pending tool calls: 1 all answered, 0 some wait for a human,
 * -errno (err) the run cannot go on. */
int rt_tool_step(struct wd_run *r, struct wd_err *err);
/* All calls answered: their results join the conversation in call order. */
void rt_close_step(struct wd_run *r);
/* A pending call's state ("new", "waiting", "ready", "done"). */
const char *rt_pstate(json_t *pc);
/* The result as the model sees it: bounded, with a note when cut. */
char *rt_content_for_model(struct wd_run *r, json_t *result);
/* Mark a pending call answered. */
void rt_set_done(json_t *pc, const char *content, bool is_error);

/* subagent.c */
/* Is `name` a sub-agent's tool name (WD_SUBAGENT_TOOL_PREFIX)? */
bool rt_is_subagent_tool(const char *name);
/* The sub-agent tools offered to the model: fills ts[] (room for
 * r->agent->n_subagents), returns how many; free with
 * rt_subagent_schemas_free. */
struct wd_tool_schema;
int rt_subagent_schemas(struct wd_run *r, struct wd_tool_schema *ts);
void rt_subagent_schemas_free(struct wd_tool_schema *ts, int n);
/* Answer a pending call to a sub-agent tool: the checks (grant, schema,
 * authz, depth, budget), then a child run on this thread; the child's
 * output or failure becomes the call's content and its usage is charged to
 * r. The call is done when this returns. */
void rt_subagent_call(struct wd_run *r, json_t *pc);

/* replay_defs.c */
/* run_start.definitions: the agent definition, each granted manifest, the
 * user's scopes and the gateway route, each by sha256 of a blob (stored
 * here). A new object. */
json_t *rt_definitions_json(struct wd_run *r);

/* replay.c (the replay's own hooks into the loop; none for other runs) */
void rt_replay_free(struct rt_replay *rp);
/* run_start.replay_of (new reference). */
json_t *rt_replay_of_json(const struct rt_replay *rp);
/* Before a model call at r->step: sets the request's seed (pinned). 1 =
 * answered from the record (recorded-model: resp filled, no gateway call),
 * 0 = call the gateway, -errno (err) = the run cannot go on. */
int rt_replay_model(struct wd_run *r, struct wd_complete_req *req,
		    struct wd_complete_resp *resp, struct wd_err *err);
/* After a model response at r->step (rj: {stop_reason, text, tool_calls}):
 * divergence from the original, then --args patches into rj. */
void rt_replay_after_model(struct wd_run *r, json_t *rj);
/* The replay state of a sub-agent's run started by a replaying parent
 * for the pending call pc (replay.c). */
struct rt_replay *rt_replay_child(struct wd_run *parent, json_t *pc);
/* The broker's replay gate of the run (NULL: not a replay). */
const struct wd_broker_replay *rt_replay_gate(struct wd_run *r);
/* run_end.replay: the summary (and a replay_divergence for calls the
 * original made that the replay never reached). New reference. */
json_t *rt_replay_summary(struct wd_run *r, const char *status,
			  const char *text);

#endif
