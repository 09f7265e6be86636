/* The broker's replay gate (broker.h "replay"): the one place that decides
 * whether a call made during a replay touches the world. It sits inside
 * wd_broker_check() and wd_broker_execute(), below every caller, so no CLI
 * flag, patch or runtime path can route around it. */
#include <string.h>

#include "broker/broker.h"
#include "trace/records.h"
#include "trace/trace.h"

#define REFUSED_EXTERNAL                                                       \
	"not executed during replay: external side effect, no recording or "   \
	"mock"
#define REFUSED_INTERNAL                                                       \
	"not executed during replay: internal side effect, no recording of "   \
	"this call (an internal tool runs live in a replay only with "         \
	"--live-internal, in the replay environment its manifest names)"
#define REFUSED_INTERNAL_NOENV                                                 \
	"not executed during replay: internal side effect, no recording of "   \
	"this call, and its manifest names no replay environment "             \
	"(replay.environment) for --live-internal to run it in"
#define REFUSED_NONE                                                           \
	"not executed during replay: --tools recorded and no recording of "    \
	"this call"

char *wd_broker_replay_key(int step, const char *tool, const json_t *args)
{
	char *a = args ? json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS |
					      JSON_ENCODE_ANY)
		       : NULL;
	char *k =
	    wd_asprintf("%d\x1f%s\x1f%s", step, tool ? tool : "", a ? a : "{}");
	free(a);
	return k;
}

static const char *refusal(const struct wd_broker_replay *rp,
			   const struct wd_manifest *m, enum wd_side_effects se)
{
	if (se == WD_SE_EXTERNAL)
		return REFUSED_EXTERNAL;
	if (se == WD_SE_INTERNAL)
		return rp->live_internal && !m->replay_env
			   ? REFUSED_INTERNAL_NOENV
			   : REFUSED_INTERNAL;
	return REFUSED_NONE;
}

enum wd_replay_disp
wd_broker_replay_disposition(const struct wd_broker_run *run,
			     const struct wd_broker_call *call,
			     const struct wd_manifest *m,
			     enum wd_side_effects *se_out, const char **what)
{
	const struct wd_broker_replay *rp = run->replay;
	/* the stricter of today's (possibly patched) manifest and the one
	 * the original recorded: relabelling a tool cannot lower it */
	enum wd_side_effects se = m->side_effects;
	json_t *o = json_object_get(rp->orig_side_effects, call->name);
	if (o) {
		enum wd_side_effects os =
		    wd_side_effects_parse(json_string_value(o));
		if (os > se)
			se = os;
	}
	if (se_out)
		*se_out = se;
	if (se == WD_SE_NONE && !rp->tools_recorded)
		return WD_RP_LIVE;
	/* internal by both labels (an original that recorded it external
	 * keeps it external: se), asked for, and a staging to run it in:
	 * live there, with the environment's network and write paths, never
	 * production's (manifest.h replay_env) */
	if (se == WD_SE_INTERNAL && rp->live_internal && m->replay_env &&
	    m->side_effects == WD_SE_INTERNAL) {
		if (what)
			*what = NULL;
		return WD_RP_LIVE_ENV;
	}
	char *key = wd_broker_replay_key(run->step, call->name, call->args);
	json_t *ref = json_object_get(rp->recorded, key);
	free(key);
	if (json_is_string(ref)) {
		if (what)
			*what = json_string_value(ref);
		return WD_RP_RECORDED;
	}
	json_t *mock = json_object_get(rp->mocks, call->name);
	if (se == WD_SE_EXTERNAL && json_is_string(mock)) {
		if (what)
			*what = json_string_value(mock);
		return WD_RP_MOCK;
	}
	if (what)
		*what = refusal(rp, m, se);
	return WD_RP_REFUSED;
}

static json_t *rec_new(const struct wd_broker_run *run,
		       const struct wd_broker_call *call, enum wd_rec_type t)
{
	return json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:s,s:s}", "run_id",
			 run->run_id, "step", run->step, "type",
			 wd_rec_type_name(t), "gen_ai.tool.name", call->name,
			 "gen_ai.tool.call.id", call->call_id, "agent",
			 run->agent, "team", run->team, "user", run->user);
}

/* The call's arguments on a result the gate answered (recorded or mock),
 * as a tool_attempt would carry them (inline, or args_ref when the run
 * keeps only hashes or they are large): a replay of this replay finds the
 * same call's result by them (replay_src.c). */
static void rec_args(const struct wd_broker_run *run,
		     const struct wd_broker_call *call, json_t *r)
{
	char *a =
	    json_dumps(call->args ? call->args : json_object(), JSON_COMPACT);
	if (!a)
		return;
	if (run->hash_only || strlen(a) > WD_BROKER_ARGS_INLINE_MAX) {
		char ref[WD_TRACE_REF_LEN];
		if (!wd_trace_put_blob(run->trace, run->run_id, a, strlen(a),
				       ref, NULL))
			json_object_set_new(r, "args_ref", json_string(ref));
	} else {
		json_object_set(r, "args",
				call->args ? call->args : json_object());
	}
	free(a);
}

static int rec_put(const struct wd_broker_run *run, json_t *rec)
{
	struct wd_err e = {0};
	int rc = run->record
		     ? run->record(run->record_arg, rec, false, &e)
		     : wd_trace_append(run->trace, rec, false, NULL, &e);
	json_decref(rec);
	return rc;
}

int wd_broker_replay_execute(const struct wd_broker_run *run,
			     const struct wd_broker_call *call,
			     const struct wd_manifest *m,
			     const struct wd_manifest **live_m,
			     json_t **result_for_model, char status_out[24],
			     struct wd_err *err)
{
	enum wd_side_effects se;
	const char *what = NULL;
	enum wd_replay_disp d =
	    wd_broker_replay_disposition(run, call, m, &se, &what);
	*live_m = d == WD_RP_LIVE_ENV ? m->replay_env : m;
	if (d == WD_RP_LIVE || d == WD_RP_LIVE_ENV)
		return 1;
	json_t *out = NULL;
	if (d == WD_RP_RECORDED) {
		char *data = NULL;
		size_t len = 0;
		struct wd_err be = {0};
		int rc = wd_trace_get_blob(run->trace, what, &data, &len, &be);
		if (!rc) {
			out = json_loadb(data, len, 0, NULL);
			free(data);
		}
		if (!json_is_object(out)) {
			/* a recording that cannot be read is no recording:
			 * the call is refused, never run */
			json_decref(out);
			out = NULL;
			d = WD_RP_REFUSED;
			what = refusal(run->replay, m, se);
		}
	}
	if (d == WD_RP_RECORDED) {
		json_t *r = rec_new(run, call, WD_REC_TOOL_RESULT);
		const char *st =
		    json_string_value(json_object_get(out, "status"));
		snprintf(status_out, 24, "%s", st ? st : "error");
		json_object_set_new(r, "status", json_string(status_out));
		json_object_set_new(r, "replay", json_string("recorded"));
		json_object_set_new(r, "side_effects",
				    json_string(wd_side_effects_words[se]));
		json_object_set_new(r, "result_ref", json_string(what));
		json_object_set_new(r, "recorded_from",
				    json_string(run->replay->of_run_id));
		rec_args(run, call, r);
		rec_put(run, r);
	} else if (d == WD_RP_MOCK) {
		out = json_pack("{s:s,s:i,s:s,s:s,s:b,s:[],s:b}", "status",
				"ok", "exit_code", 0, "stdout", what, "stderr",
				"", "truncated", 0, "denials", "mocked", 1);
		snprintf(status_out, 24, "ok");
		json_t *r = rec_new(run, call, WD_REC_TOOL_RESULT);
		json_object_set_new(r, "status", json_string("ok"));
		json_object_set_new(r, "replay", json_string("mock"));
		json_object_set_new(r, "side_effects",
				    json_string(wd_side_effects_words[se]));
		char *p = json_dumps(out, JSON_COMPACT);
		char ref[WD_TRACE_REF_LEN];
		if (p && !wd_trace_put_blob(run->trace, run->run_id, p,
					    strlen(p), ref, NULL))
			json_object_set_new(r, "result_ref", json_string(ref));
		free(p);
		rec_args(run, call, r);
		rec_put(run, r);
	} else {
		out =
		    json_pack("{s:s,s:s,s:s}", "status", "refused", "error",
			      what, "side_effects", wd_side_effects_words[se]);
		snprintf(status_out, 24, "refused");
		json_t *r = rec_new(run, call, WD_REC_REPLAY_REFUSED);
		json_object_set_new(r, "side_effects",
				    json_string(wd_side_effects_words[se]));
		json_object_set_new(r, "reason", json_string(what));
		if (!run->hash_only)
			json_object_set(r, "args",
					call->args ? call->args : json_null());
		rec_put(run, r);
	}
	(void)err;
	*result_for_model = out;
	return 0;
}
