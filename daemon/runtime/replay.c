/* Execution replay (DESIGN §4 "Replay (execution)"): a new run, linked to
 * the original by run_start.replay_of, that takes the original's steps
 * before `from` from the record — model responses and tool results, no
 * gateway call, no sandbox, no cost, the rebuilt conversation checked
 * against the recorded prompt_hash at every step — and runs the agent live
 * from there with the recorded definitions (or the patched ones). Tool
 * calls then pass the broker's replay gate (broker/replay_gate.c), which
 * never lets an external side effect happen again. Each live model
 * response is compared with the original's at the same step; the first
 * difference is a `replay_divergence` record, the outcome a summary in
 * run_end.replay. */
#include <string.h>

#include "common/log.h"
#include "gateway/gateway.h"
#include "runtime/replay_int.h"
#include "trace/records.h"
#include "trace/trace.h"

void rt_replay_free(struct rt_replay *rp)
{
	if (!rp)
		return;
	rp_orig_free(&rp->o);
	json_decref(rp->patches);
	json_decref(rp->args);
	json_decref(rp->gate.orig_side_effects);
	json_decref(rp->gate.mocks);
	free(rp->message);
	free(rp);
}

static const char *det_name(enum rp_det d)
{
	return d == RP_PINNED		? "pinned"
	       : d == RP_RECORDED_MODEL ? "recorded-model"
					: "divergent";
}

json_t *rt_replay_of_json(const struct rt_replay *rp)
{
	return json_pack("{s:s,s:s,s:i,s:O,s:s,s:s,s:b}", "run_id",
			 rp->of_run_id, "head", rp->head, "from_step", rp->from,
			 "patches", rp->patches, "determinism",
			 det_name(rp->det), "tools",
			 rp->gate.tools_recorded ? "recorded" : "live",
			 "live_internal", rp->gate.live_internal);
}

const struct wd_broker_replay *rt_replay_gate(struct wd_run *r)
{
	return r->replay ? &r->replay->gate : NULL;
}

/* ---- the original's steps ---- */

static json_t *orig_call(struct rt_replay *rp, int step)
{
	return step >= 0 ? json_array_get(rp->o.calls, (size_t)step) : NULL;
}

/* The original's response at a step ({stop_reason, text, tool_calls}), a
 * new reference, from its blob (hash checked) or the record. */
json_t *rt_replay_orig_response(struct wd_rt *rt, struct rt_replay *rp,
				int step, struct wd_err *err)
{
	json_t *mc = orig_call(rp, step);
	if (!mc)
		return NULL;
	const char *ref =
	    json_string_value(json_object_get(mc, "response_ref"));
	char *text = NULL;
	size_t len = 0;
	if (!ref) {
		json_t *inl = json_object_get(mc, "response");
		if (json_is_array(json_object_get(inl, "tool_calls")))
			return json_incref(inl);
	}
	if (rp_blob(rt, "response_ref", step, ref, &text, &len, err))
		return NULL;
	json_t *j = json_loadb(text, len, 0, NULL);
	free(text);
	if (!json_is_object(j)) {
		json_decref(j);
		wd_err_set(err, -EBADMSG,
			   "the record cannot be reproduced: step %d: the "
			   "recorded response is not JSON",
			   step);
		return NULL;
	}
	return j;
}

json_t *rt_replay_orig_prompt(struct wd_rt *rt, struct rt_replay *rp, int step,
			      struct wd_err *err)
{
	json_t *mc = orig_call(rp, step);
	char *text = NULL;
	size_t len = 0;
	if (rp_blob(rt, "prompt_ref", step,
		    json_string_value(json_object_get(mc, "prompt_ref")), &text,
		    &len, err))
		return NULL;
	json_t *j = json_loadb(text, len, 0, NULL);
	free(text);
	if (!json_is_array(j)) {
		json_decref(j);
		wd_err_set(err, -EBADMSG,
			   "the record cannot be reproduced: step %d: the "
			   "recorded prompt is not a conversation",
			   step);
		return NULL;
	}
	return j;
}

/* ---- describing and comparing responses ---- */

static void desc_calls(json_t *calls, const char *text, struct wd_buf *b)
{
	size_t i;
	json_t *c;
	if (!json_array_size(calls)) {
		wd_buf_printf(b, "text \"%.160s\"", text ? text : "");
		return;
	}
	json_array_foreach(calls, i, c)
	{
		char *a =
		    json_dumps(json_object_get(c, "arguments"),
			       JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
		wd_buf_printf(b, "%s%s(%.200s)", i ? ", " : "",
			      json_string_value(json_object_get(c, "name")),
			      a ? a : "");
		free(a);
	}
}

static void desc_one(json_t *c, struct wd_buf *b)
{
	if (!c) {
		wd_buf_printf(b, "nothing");
		return;
	}
	char *a = json_dumps(json_object_get(c, "arguments"),
			     JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	wd_buf_printf(b, "%s(%.200s)",
		      json_string_value(json_object_get(c, "name")),
		      a ? a : "");
	free(a);
}

/* Both calls told by what differs: NAME(key: value, ...) with only the
 * arguments whose values differ, each value cut to a window around its
 * first differing byte (a long email body differs in its last line). */
static void desc_arg_diff(json_t *x, json_t *y, struct wd_buf *a,
			  struct wd_buf *b)
{
	json_t *xa = json_object_get(x, "arguments"),
	       *ya = json_object_get(y, "arguments");
	wd_buf_printf(a, "%s(", json_string_value(json_object_get(x, "name")));
	wd_buf_printf(b, "%s(", json_string_value(json_object_get(y, "name")));
	int n = 0;
	for (int pass = 0; pass < 2; pass++) {
		const char *k;
		json_t *v;
		json_object_foreach(pass ? ya : xa, k, v)
		{
			json_t *u = json_object_get(pass ? xa : ya, k);
			if ((pass && u) || json_equal(u, v))
				continue; /* same, or seen in pass 0 */
			char *sx = json_dumps(pass ? u : v,
					      JSON_COMPACT | JSON_ENCODE_ANY |
						  JSON_SORT_KEYS);
			char *sy = json_dumps(pass ? v : u,
					      JSON_COMPACT | JSON_ENCODE_ANY |
						  JSON_SORT_KEYS);
			size_t i = 0;
			while (sx && sy && sx[i] && sx[i] == sy[i])
				i++;
			size_t from = i > 40 ? i - 40 : 0;
			wd_buf_printf(a, "%s%s: %s%.100s", n ? ", " : "", k,
				      from ? "…" : "",
				      sx ? sx + WD_MIN(from, strlen(sx))
					 : "(absent)");
			wd_buf_printf(b, "%s%s: %s%.100s", n ? ", " : "", k,
				      from ? "…" : "",
				      sy ? sy + WD_MIN(from, strlen(sy))
					 : "(absent)");
			n++;
			free(sx);
			free(sy);
		}
	}
	wd_buf_printf(a, ")");
	wd_buf_printf(b, ")");
}

static void diverge(struct wd_run *r, int step, const char *kind,
		    const char *what, const char *rec, const char *rep)
{
	struct rt_replay *rp = r->replay;
	rp->diverged = true;
	rp->diverged_at = step;
	free(rp->message);
	rp->message = wd_asprintf("diverged at step %d: recorded %s, replay %s",
				  step, rec, rep);
	json_t *x = rt_rec_new(r, wd_rec_type_name(WD_REC_REPLAY_DIVERGENCE));
	json_object_set_new(x, "step", json_integer(step));
	json_object_set_new(x, "kind", json_string(kind));
	json_object_set_new(x, "what", json_string(what));
	json_object_set_new(x, "recorded", json_string(rec));
	json_object_set_new(x, "replay", json_string(rep));
	json_object_set_new(x, "message", json_string(rp->message));
	json_object_set_new(x, "of_run_id", json_string(rp->of_run_id));
	rt_record(r, x, false, NULL);
	json_decref(x);
}

/* Temporal's three shapes: different (both made a command, they differ:
 * the tool, or only its arguments), missing (the record made one the
 * replay did not), extra (the replay made one the record did not). */
static void compare(struct wd_run *r, json_t *orig, json_t *rj)
{
	int step = r->step;
	json_t *oc = json_object_get(orig, "tool_calls");
	json_t *nc = json_object_get(rj, "tool_calls");
	const char *ot = json_string_value(json_object_get(orig, "text"));
	const char *nt = json_string_value(json_object_get(rj, "text"));
	struct wd_buf a = {0}, b = {0};
	if (!orig) {
		desc_calls(nc, nt, &b);
		diverge(r, step, "extra", json_array_size(nc) ? "tool" : "text",
			"nothing (the original had ended)", b.data);
		goto out;
	}
	size_t no = json_array_size(oc), nn = json_array_size(nc);
	if (!no && !nn) {
		const char *x = ot ? ot : "", *y = nt ? nt : "";
		if (strcmp(x, y)) {
			/* a window around the first difference */
			size_t i = 0;
			while (x[i] && x[i] == y[i])
				i++;
			size_t from = i > 40 ? i - 40 : 0;
			wd_buf_printf(&a, "text \"%s%.120s\"", from ? "…" : "",
				      x + from);
			wd_buf_printf(&b, "text \"%s%.120s\"", from ? "…" : "",
				      y + from);
			diverge(r, step, "different", "text", a.data, b.data);
		}
		goto out;
	}
	for (size_t i = 0; i < WD_MAX(no, nn); i++) {
		json_t *x = json_array_get(oc, i), *y = json_array_get(nc, i);
		a.len = b.len = 0;
		desc_one(x, &a);
		desc_one(y, &b);
		if (!x || !y) {
			/* a call only one side made; the other side's text
			 * when it made no call at all */
			if (!no) {
				a.len = 0;
				desc_calls(oc, ot, &a);
			}
			if (!nn) {
				b.len = 0;
				desc_calls(nc, nt, &b);
			}
			diverge(r, step, x ? "missing" : "extra", "tool",
				a.data, b.data);
			goto out;
		}
		if (strcmp(json_string_value(json_object_get(x, "name")),
			   json_string_value(json_object_get(y, "name")))) {
			diverge(r, step, "different", "tool", a.data, b.data);
			goto out;
		}
		if (!json_equal(json_object_get(x, "arguments"),
				json_object_get(y, "arguments"))) {
			a.len = b.len = 0;
			desc_arg_diff(x, y, &a, &b);
			diverge(r, step, "different", "arguments", a.data,
				b.data);
			goto out;
		}
	}
out:
	wd_buf_free(&a);
	wd_buf_free(&b);
}

void rt_replay_after_model(struct wd_run *r, json_t *rj)
{
	struct rt_replay *rp = r->replay;
	/* pinned: the seed is checked against what the provider says
	 * served it; another backend configuration means another output */
	const char *fp =
	    json_string_value(json_object_get(rj, "system_fingerprint"));
	const char *ofp = json_string_value(
	    json_object_get(orig_call(rp, r->step), "system_fingerprint"));
	if (rp->det == RP_PINNED && rp->fp_changed_at < 0 && fp && ofp &&
	    strcmp(fp, ofp))
		rp->fp_changed_at = r->step;
	json_object_del(rj, "system_fingerprint");
	if (!rp->diverged && rp->det != RP_RECORDED_MODEL) {
		struct wd_err err = {0};
		json_t *orig =
		    rt_replay_orig_response(r->rt, rp, r->step, &err);
		if (!orig && orig_call(rp, r->step))
			wd_warn("run %s: replay: %s", r->id, err.msg);
		else
			compare(r, orig, rj);
		json_decref(orig);
	}
	/* --args STEP.CALL=JSON: the call's arguments replaced before the
	 * broker sees it */
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(rj, "tool_calls"), i, c)
	{
		char k[48];
		snprintf(k, sizeof(k), "%d.%zu", r->step, i);
		json_t *a = json_object_get(rp->args, k);
		if (a)
			json_object_set(c, "arguments", a);
	}
}

/* every stop reason a record may hold (gateway.h) */
static enum wd_stop_reason stop_of(const char *s)
{
	return wd_stop_reason_parse(s);
}

int rt_replay_model(struct wd_run *r, struct wd_complete_req *req,
		    struct wd_complete_resp *resp, struct wd_err *err)
{
	struct rt_replay *rp = r->replay;
	if (rp->det == RP_PINNED) {
		req->seed_set = true;
		req->seed = rp->seed;
		return 0;
	}
	if (rp->det != RP_RECORDED_MODEL)
		return 0;
	/* recorded-model: the model's part is the record's; only the tools
	 * run again. A conversation that differs from the original's means
	 * the tools answered differently. */
	json_t *mc = orig_call(rp, r->step);
	if (!mc)
		return wd_err_set(err, -ENOENT,
				  "recorded-model: the original has no model "
				  "response at step %d",
				  r->step);
	if (!rp->diverged) {
		char *p = rt_conv_text(r);
		char h[WD_TRACE_REF_LEN];
		const char *oh =
		    json_string_value(json_object_get(mc, "prompt_hash"));
		bool same = rt_prompt_hash_matches(r->rt, p, oh, h);
		free(p);
		if (oh && !same) {
			cleanup_free char *a =
			    wd_asprintf("conversation %.23s", oh);
			cleanup_free char *b =
			    wd_asprintf("conversation %.23s (the tool results "
					"of step %d differ)",
					h, r->step - 1);
			diverge(r, r->step, "different", "prompt", a, b);
		}
	}
	json_t *o = rt_replay_orig_response(r->rt, rp, r->step, err);
	if (!o)
		return err->code ? err->code : -EBADMSG;
	json_t *tc = json_object_get(o, "tool_calls");
	resp->stop_reason =
	    stop_of(json_string_value(json_object_get(o, "stop_reason")));
	resp->text =
	    wd_strdup(json_string_value(json_object_get(o, "text")) ?: "");
	resp->n_tool_calls = (int)json_array_size(tc);
	resp->tool_calls = wd_calloc((size_t)resp->n_tool_calls + 1,
				     sizeof(*resp->tool_calls));
	for (int i = 0; i < resp->n_tool_calls; i++) {
		json_t *c = json_array_get(tc, (size_t)i);
		resp->tool_calls[i].id = wd_strdup(
		    json_string_value(json_object_get(c, "id")) ?: "");
		resp->tool_calls[i].name = wd_strdup(
		    json_string_value(json_object_get(c, "name")) ?: "");
		json_t *a = json_object_get(c, "arguments");
		resp->tool_calls[i].arguments =
		    a ? json_deep_copy(a) : json_object();
		resp->tool_calls[i].parse_error =
		    json_is_true(json_object_get(c, "parse_error"));
	}
	resp->provider = wd_strdup("record");
	resp->model = wd_strdup(
	    json_string_value(json_object_get(mc, "gen_ai.response.model"))
		?: "record");
	json_decref(o);
	return 1;
}

json_t *rt_replay_summary(struct wd_run *r, const char *status,
			  const char *text)
{
	struct rt_replay *rp = r->replay;
	int n = (int)json_array_size(rp->o.calls);
	/* the replay ended before the original did: the record's next call
	 * is missing from it */
	if (!rp->diverged && !strcmp(status, "ok") && text && n > r->step + 1) {
		struct wd_err err = {0};
		json_t *o =
		    rt_replay_orig_response(r->rt, rp, r->step + 1, &err);
		struct wd_buf a = {0};
		desc_calls(json_object_get(o, "tool_calls"),
			   json_string_value(json_object_get(o, "text")), &a);
		diverge(r, r->step + 1, "missing", "tool", a.data ?: "?",
			"nothing (the replay had ended)");
		wd_buf_free(&a);
		json_decref(o);
	}
	if (!rp->message)
		rp->message = wd_strdup("converged");
	json_t *s =
	    json_pack("{s:s,s:i,s:s,s:b,s:s}", "of_run_id", rp->of_run_id,
		      "from_step", rp->from, "determinism", det_name(rp->det),
		      "converged", !rp->diverged, "summary", rp->message);
	if (rp->diverged)
		json_object_set_new(s, "diverged_at",
				    json_integer(rp->diverged_at));
	if (rp->det == RP_PINNED)
		json_object_set_new(
		    s, "seed",
		    json_pack("{s:I,s:o}", "value", (json_int_t)rp->seed,
			      "fingerprint_changed_at",
			      rp->fp_changed_at >= 0
				  ? json_integer(rp->fp_changed_at)
				  : json_null()));
	return s;
}

/* A sub-agent's run started by a replaying parent is replayed by the same
 * rules: the original's child run for the same call (same step, same
 * sub-agent, same arguments) is its record — its recorded results answer
 * its internal and external tools, its responses its recorded-model steps,
 * divergence is measured against it. A call the original never made has
 * no record: everything with side effects is then refused (or mocked). */
struct rt_replay *rt_replay_child(struct wd_run *parent, json_t *pc)
{
	struct rt_replay *pr = parent->replay;
	struct rt_replay *rp = wd_calloc(1, sizeof(*rp));
	const char *tool = json_string_value(json_object_get(pc, "name"));
	json_t *args = json_object_get(pc, "arguments");
	const char *orig = NULL;
	const char *k;
	json_t *at;
	json_object_foreach(pr->o.attempts, k, at)
	{
		const char *cid =
		    json_string_value(json_object_get(at, "child_run_id"));
		if (cid &&
		    json_integer_value(json_object_get(at, "step")) ==
			parent->step &&
		    !strcmp(json_string_value(
				json_object_get(at, "gen_ai.tool.name"))
				?: "",
			    tool ? tool : "") &&
		    json_equal(json_object_get(at, "args"), args)) {
			orig = cid;
			break;
		}
	}
	struct wd_err err = {0};
	if (!orig || rp_load_original(parent->rt, orig, &rp->o, &err)) {
		rp_orig_free(&rp->o);
		rp->o.records = json_array();
		rp->o.calls = json_array();
		rp->o.recorded = json_object();
		rp->o.attempts = json_object();
	}
	snprintf(rp->of_run_id, sizeof(rp->of_run_id), "%s", orig ? orig : "");
	snprintf(rp->gate.of_run_id, sizeof(rp->gate.of_run_id), "%s",
		 rp->of_run_id);
	json_t *last =
	    json_array_get(rp->o.records, json_array_size(rp->o.records) - 1);
	char *lt = last ? json_dumps(last, JSON_COMPACT) : NULL;
	if (lt)
		wd_trace_ref_of(lt, strlen(lt), rp->head);
	free(lt);
	rp->from = 0;
	rp->fp_changed_at = -1;
	rp->det = pr->det;
	rp->seed = pr->seed;
	rp->patches = json_object();
	rp->args = json_object();
	rp->gate.recorded = rp->o.recorded;
	/* a copy: no JSON is shared between runs' threads */
	rp->gate.mocks = json_deep_copy(pr->gate.mocks);
	rp->gate.tools_recorded = pr->gate.tools_recorded;
	rp->gate.live_internal = pr->gate.live_internal;
	/* the stricter side effects of every manifest either run recorded */
	rp->gate.orig_side_effects = json_deep_copy(pr->gate.orig_side_effects);
	json_t *v;
	json_object_foreach(
	    json_object_get(json_object_get(rp->o.start, "definitions"),
			    "tools"),
	    k, v)
	{
		const char *se =
		    json_string_value(json_object_get(v, "side_effects"));
		const char *old = json_string_value(
		    json_object_get(rp->gate.orig_side_effects, k));
		/* "none" < "internal" < "external": keep the stricter */
		if (se && (!old ||
			   (strcmp(old, "external") &&
			    (!strcmp(se, "external") || !strcmp(old, "none")))))
			json_object_set_new(rp->gate.orig_side_effects, k,
					    json_string(se));
	}
	return rp;
}
