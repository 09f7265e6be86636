/* The tool broker: seed 000 step 4, every check enforced, in this order:
 *
 *   1. granted   the tool is in the agent's tools[] (a prompt-injected call
 *                to anything else stops here)
 *   2. authz     as the calling USER: on_behalf_of_user needs every scope of
 *                the manifest among the user's scopes (users.yaml);
 *                `service` only where the manifest says so, and recorded
 *   3. schema    args validated against args_schema and, for input: argv,
 *                placed on the command line (broker/argv.h: unknown keys
 *                and values starting with '-' refused); the message goes
 *                back to the model so it can correct the call
 *   4. rate      rate_limit per run / user / agent (broker/ratelimit.h)
 *   5. approval  `approval: always` or required_above thresholds → the run
 *                suspends (the caller handles it; see runtime)
 *   6. attempt   `tool_attempt` appended BEFORE the sandbox starts:
 *                durably (fdatasync) when side_effects != none, else
 *                written to its segment. If it cannot be (disk full, I/O
 *                error) the tool does not run — fail closed — unless it
 *                has no side effects and the agent says
 *                `trace: {unrecorded_read_only: allow}`
 *   7. sandbox   wd_sandbox_run() as the calling user's uid (never 0)
 *   8. result    `tool_result` + one `denial` record per kernel denial,
 *                attributed to run, step, call and tool
 */
#ifndef WD_BROKER_H
#define WD_BROKER_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "broker/ratelimit.h"
#include "common/util.h"
#include "policy/manifest.h"

struct wd_denial_counts; /* sandbox/sandbox.h */

struct wd_trace;
struct wd_stream;
struct wd_broker_replay;
struct wd_recw;
struct wd_trace_head;

/* Who and what a call is made for. */
struct wd_broker_run {
	const char *run_id;
	int step;
	const char *agent, *team;
	char *const *granted; /* the agent's tools[] */
	int n_granted;
	const char *user; /* calling user (from SO_PEERCRED) */
	uid_t uid;
	gid_t gid;
	char *const *user_scopes; /* the user's scopes from users.yaml */
	int n_user_scopes;
	struct wd_trace *trace;
	bool hash_only; /* trace payloads: hash_only */
	/* trace.unrecorded_read_only: allow — a side_effects: none tool
	 * runs even when its attempt cannot be written (false: it does not) */
	bool unrecorded_read_only;
	struct wd_stream *events; /* node-wide stream; may be NULL */
	/* Append a record (to the trace and the run's followers); the
	 * contract of wd_trace_append(). NULL = wd_trace_append(trace). */
	int (*record)(void *arg, json_t *rec, bool durable, struct wd_err *err);
	/* The same for a typed record (trace/recw.h; the contract of
	 * wd_trace_append_w()): the hot records (tool_attempt, tool_result,
	 * denial) are built without jansson. NULL = through `record` (the
	 * record parsed back into JSON), else wd_trace_append_w(trace). */
	int (*record_w)(void *arg, struct wd_recw *w, bool durable,
			struct wd_trace_head *head, struct wd_err *err);
	void *record_arg;
	/* Tools by name (the run's policy snapshot). */
	const struct wd_manifest *(*tool)(void *arg, const char *name);
	void *tool_arg;
	/* Non-NULL in a replay (DESIGN §4 "Replay (execution)"): every call
	 * goes through the replay gate below, whatever the caller asks. */
	const struct wd_broker_replay *replay;
};

struct wd_broker_call {
	const char *call_id;
	const char *name;
	json_t *args; /* object */
	bool parse_error;
};

enum wd_broker_verdict {
	WD_BRK_ALLOW,	 /* run it (wd_broker_execute) */
	WD_BRK_DENIED,	 /* checks 1, 2 or 4 failed */
	WD_BRK_INVALID,	 /* check 3 failed: message for the model */
	WD_BRK_APPROVAL, /* needs a human decision first */
};
const char *wd_broker_verdict_name(enum wd_broker_verdict v);

/* Checks 1–5. Fills `check` with the name of the failing check ("grant",
 * "authz", "schema", "rate_limit", "approval") and `reason` with a message
 * fit for the model and the trace. *m is the tool's manifest when known.
 * `approved` skips the approval gate (a human already said yes) but never
 * the other checks. */
enum wd_broker_verdict wd_broker_check(const struct wd_broker_run *run,
				       const struct wd_broker_call *call,
				       struct wd_ratelimit *rl, bool approved,
				       const struct wd_manifest **m,
				       char check[16], char *reason,
				       size_t reason_len);

/* Does this call need approval under the manifest? Sets why: the property
 * and the threshold, and its measure (number, length, count) only when
 * `show_value` (never for a hash_only run: why is recorded and shown). */
bool wd_broker_needs_approval(const struct wd_manifest *m, const json_t *args,
			      bool show_value, char *why, size_t why_len);

/* Steps 6–8. `approval` (may be NULL) is recorded in the attempt. Returns
 * 0 with *result_for_model set (a new JSON object: status, exit_code,
 * stdout, stderr, truncated, denials[]) — whatever the tool's own outcome —
 * or -errno when the attempt could not be recorded (the tool did not run;
 * the run must fail) with err set: a side-effecting tool's attempt must be
 * on disk (fdatasync), a read-only one's written to its segment unless
 * run->unrecorded_read_only. *status_out gets the tool_result status.
 * *counts (may be NULL) gets the denials and audits the call made, all of
 * them (wd_result_denial_counts; zero for a call that did not run live). */
int wd_broker_execute(const struct wd_broker_run *run,
		      const struct wd_broker_call *call,
		      const struct wd_manifest *m, const json_t *approval,
		      json_t **result_for_model, char status_out[24],
		      struct wd_denial_counts *counts, struct wd_err *err);

/* Record a call refused by a check (tool_result {status: "denied" |
 * "invalid", check, reason}). */
int wd_broker_record_refusal(const struct wd_broker_run *run,
			     const struct wd_broker_call *call,
			     enum wd_broker_verdict v, const char *check,
			     const char *reason, struct wd_err *err);

/* A call's args above this many bytes are recorded by reference
 * (args_ref), not inline. */
#define WD_BROKER_ARGS_INLINE_MAX 4096

/* ---- replay (broker/replay_gate.c) ----
 * In a replay, a call's side effects decide whether it runs, judged by the
 * STRICTER of the manifest the replay runs with (which a --tool patch may
 * have replaced) and the manifest the original run recorded:
 *   none      live (or the recorded result with --tools recorded)
 *   internal  with --live-internal and a manifest that names a replay
 *             environment (manifest.h replay_env): live, run with that
 *             environment's manifest; else the recorded result of the
 *             same call (tool + canonical arguments at that step), else
 *             refused
 *   external  the recorded result, else a declared mock, else refused
 * A refusal is a `replay_refused` record and an error for the model. No
 * flag reaches past this: external never runs live in a replay. */
struct wd_broker_replay {
	char of_run_id[40];
	/* "STEP\x1fTOOL\x1fARGS" (args: compact, sorted keys) -> result_ref
	 * of the original's tool_result */
	json_t *recorded;
	json_t *orig_side_effects; /* tool -> "none"|"internal"|"external" */
	json_t *mocks;		   /* tool -> mock stdout text */
	bool tools_recorded;	   /* --tools recorded */
	bool live_internal;	   /* --live-internal */
};
enum wd_replay_disp {
	WD_RP_LIVE,
	WD_RP_LIVE_ENV, /* internal, live in its replay environment */
	WD_RP_RECORDED,
	WD_RP_MOCK,
	WD_RP_REFUSED,
};
/* Key of a call in wd_broker_replay.recorded (free()). */
char *wd_broker_replay_key(int step, const char *tool, const json_t *args);
/* The call's disposition; *se gets the side effects it was judged by,
 * *what (may be NULL) the result_ref or mock text, or the refusal
 * reason. */
enum wd_replay_disp wd_broker_replay_disposition(
    const struct wd_broker_run *run, const struct wd_broker_call *call,
    const struct wd_manifest *m, enum wd_side_effects *se, const char **what);
/* A replayed call that does not run live: answered here (recorded, mock
 * or refused, each recorded in the trace). Returns 1 when the call is to
 * run live (nothing done; *live_m = the manifest to run it with: m, or
 * m->replay_env for WD_RP_LIVE_ENV), else wd_broker_execute()'s
 * contract. */
int wd_broker_replay_execute(const struct wd_broker_run *run,
			     const struct wd_broker_call *call,
			     const struct wd_manifest *m,
			     const struct wd_manifest **live_m,
			     json_t **result_for_model, char status_out[24],
			     struct wd_err *err);

#endif
