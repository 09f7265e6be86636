/* Internal structures of execution replay (replay.c, replay_src.c). */
#ifndef WD_REPLAY_INT_H
#define WD_REPLAY_INT_H

#include "broker/broker.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

/* The original run as the trace holds it. */
struct rp_orig {
	json_t *records;  /* all of them */
	json_t *start;	  /* run_start (borrowed from records) */
	json_t *end;	  /* run_end or NULL */
	json_t *calls;	  /* model_call per step: calls[s] */
	json_t *recorded; /* broker key -> result_ref */
	json_t *attempts; /* "step\x1fcall id" -> tool_attempt (a replay:
			   * or its gate's answer, replay_src.c) */
};

enum rp_det { RP_DIVERGENT, RP_PINNED, RP_RECORDED_MODEL };

struct rt_replay {
	struct rp_orig o;
	char of_run_id[40];
	char head[72];
	int from;
	enum rp_det det;
	int64_t seed;
	json_t *patches; /* as asked: {agent, system_prompt, model, tool,
			  * args, mock} with files by sha256 */
	json_t *args;	 /* "STEP.CALL" -> arguments */
	struct wd_broker_replay gate;
	uint64_t prefix_ns; /* rebuilding steps 0..from-1 from the record */
	/* pinned: the first step whose system_fingerprint differs from the
	 * original's (the seed then pins nothing), -1 none */
	int fp_changed_at;
	bool diverged;
	int diverged_at;
	char *message; /* "converged" or "diverged at step K: ..." */
};

/* A blob of the original, with a named error ("damaged blob") on
 * failure. */
int rp_blob(struct wd_rt *rt, const char *what, int step, const char *ref,
	    char **data, size_t *len, struct wd_err *err);
int rp_load_original(struct wd_rt *rt, const char *id, struct rp_orig *o,
		     struct wd_err *err);
void rp_orig_free(struct rp_orig *o);
/* The replay's policy set: recorded (or patched) agent and manifests,
 * today's users and gateway; the sub-agents' as their runs recorded
 * them. With !may_change_policy (a caller who is not root), an --agent
 * patch may change the prompt, model and context but not what the
 * platform grants: -EPERM naming the field. A --tool patch (of any
 * agent's tool in the tree) keeps the recorded auth; `floor` gets, per
 * patched tool, the side effects of the manifest it replaced, for the
 * broker's gate to judge by (the stricter). */
int rp_build_pset(struct wd_rt *rt, struct wd_pset *base,
		  const struct rp_orig *o, const json_t *opts,
		  bool may_change_policy, json_t *floor, struct wd_pset **out,
		  struct wd_err *err);

/* The original's prompt (conversation array) and response
 * ({stop_reason, text, tool_calls}) at a step, new references, from their
 * blobs (hash checked); NULL with a named error. */
json_t *rt_replay_orig_prompt(struct wd_rt *rt, struct rt_replay *rp, int step,
			      struct wd_err *err);
json_t *rt_replay_orig_response(struct wd_rt *rt, struct rt_replay *rp,
				int step, struct wd_err *err);

/* Does a rebuilt conversation's text hash to the recorded prompt_hash?
 * The hash is of the redacted text (loop.c, wd_trace_ref_redacted); a
 * record written before that holds the hash of the text as sent, which
 * matches too. h gets the redacted text's hash (for messages). */
bool rt_prompt_hash_matches(struct wd_rt *rt, const char *prompt,
			    const char *want, char h[WD_TRACE_REF_LEN]);

#endif
