/* Recovery at open: runs left active by a previous daemon are restored
 * from their snapshot (suspended on approval) or marked interrupted. */
#include <dirent.h>
#include <string.h>

#include "common/log.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

/* ---- recovery ---- */

static json_t *last_attempt(struct wd_rt *rt, const char *run_id)
{
	json_t *recs = NULL;
	if (wd_trace_run_records(rt->trace, run_id, &recs, NULL))
		return NULL;
	json_t *last = NULL;
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		const char *t = json_string_value(json_object_get(r, "type"));
		if (t && !strcmp(t, "tool_attempt"))
			last = r;
	}
	json_t *out = NULL;
	if (last) {
		const char *cid = json_string_value(
		    json_object_get(last, "gen_ai.tool.call.id"));
		bool completed = false;
		json_array_foreach(recs, i, r)
		{
			const char *t =
			    json_string_value(json_object_get(r, "type"));
			const char *c = json_string_value(
			    json_object_get(r, "gen_ai.tool.call.id"));
			if (t && c && cid && !strcmp(t, "tool_result") &&
			    !strcmp(c, cid))
				completed = true;
		}
		out = json_pack("{s:O,s:O,s:O,s:O,s:b}", "seq",
				json_object_get(last, "seq"), "step",
				json_object_get(last, "step"), "tool",
				json_object_get(last, "gen_ai.tool.name"),
				"call_id",
				json_object_get(last, "gen_ai.tool.call.id"),
				"completed", completed);
	}
	json_decref(recs);
	return out;
}

json_t *rt_first_of(struct wd_rt *rt, const char *run_id, const char *type)
{
	json_t *recs = NULL, *out = NULL;
	if (wd_trace_run_records(rt->trace, run_id, &recs, NULL))
		return NULL;
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		const char *t = json_string_value(json_object_get(r, "type"));
		if (t && !strcmp(t, type)) {
			out = json_incref(r);
			break;
		}
	}
	json_decref(recs);
	return out;
}

static void mark_interrupted(struct wd_rt *rt, const char *id, const char *why)
{
	json_t *start = rt_first_of(rt, id, "run_start");
	json_t *rec = json_pack(
	    "{s:s,s:i,s:s,s:s,s:s}", "run_id", id, "step", 0, "type", "run_end",
	    "status", "interrupted", "reason",
	    why ? why : "wardend stopped while the run was in progress");
	json_t *recs = NULL;
	if (!wd_trace_run_records(rt->trace, id, &recs, NULL) &&
	    json_array_size(recs)) {
		json_t *l = json_array_get(recs, json_array_size(recs) - 1);
		json_object_set(rec, "step", json_object_get(l, "step"));
	}
	json_decref(recs);
	if (start) {
		json_object_set(rec, "agent", json_object_get(start, "agent"));
		json_object_set(rec, "team", json_object_get(start, "team"));
		json_object_set(rec, "user", json_object_get(start, "user"));
	}
	json_t *la = last_attempt(rt, id);
	if (la)
		json_object_set_new(rec, "last_attempt", la);
	struct wd_err err = {0};
	if (wd_trace_append(rt->trace, rec, true, NULL, &err))
		wd_error("run %s: cannot mark interrupted: %s", id, err.msg);
	else
		wd_warn("run %s: interrupted by a daemon stop; marked", id);
	json_decref(rec);
	json_decref(start);
}

static int restore_run(struct wd_rt *rt, const char *id, json_t *s)
{
	/* a replay's gate is not in the snapshot: restoring it as an
	 * ordinary run could run its external tools live; it is ended as
	 * interrupted (replay it again) */
	if (json_object_get(s, "replay_of"))
		return -ENOTSUP;
	const char *agent = json_string_value(json_object_get(s, "agent"));
	const struct wd_agent_def *a =
	    agent ? wd_pset_agent(rt->ps, agent) : NULL;
	if (!a)
		return -ENOENT;
	json_t *cj = json_object_get(s, "caller");
	struct wd_caller c;
	wd_caller_from_uid(
	    (uid_t)json_integer_value(json_object_get(cj, "uid")),
	    (gid_t)json_integer_value(json_object_get(cj, "gid")), &c);
	struct wd_run *r =
	    rt_run_new(rt, rt->ps, a, &c,
		       json_string_value(json_object_get(s, "task")) ?: "");
	snprintf(r->id, sizeof(r->id), "%s", id);
	json_decref(r->done);
	r->msgs = json_incref(json_object_get(s, "msgs"));
	r->done = json_incref(json_object_get(s, "done"));
	json_t *p = json_object_get(s, "pending");
	r->pending = json_is_array(p) ? json_incref(p) : NULL;
	r->step = (int)json_integer_value(json_object_get(s, "step"));
	r->in_tokens =
	    (uint64_t)json_integer_value(json_object_get(s, "in_tokens"));
	r->out_tokens =
	    (uint64_t)json_integer_value(json_object_get(s, "out_tokens"));
	r->cost = json_number_value(json_object_get(s, "cost"));
	r->active_ns =
	    (uint64_t)json_integer_value(json_object_get(s, "active_ns"));
	r->started_wall =
	    (uint64_t)json_integer_value(json_object_get(s, "started_wall"));
	r->model_calls =
	    (int)json_integer_value(json_object_get(s, "model_calls"));
	json_t *sub = json_object_get(s, "sub");
	if (json_is_object(sub)) {
		r->sub_runs =
		    (int)json_integer_value(json_object_get(sub, "runs"));
		r->sub_steps =
		    (int)json_integer_value(json_object_get(sub, "steps"));
		r->sub_in_tokens = (uint64_t)json_integer_value(
		    json_object_get(sub, "input_tokens"));
		r->sub_out_tokens = (uint64_t)json_integer_value(
		    json_object_get(sub, "output_tokens"));
		r->sub_cost =
		    json_number_value(json_object_get(sub, "cost_usd"));
		json_t *ch = json_object_get(sub, "children");
		if (json_is_array(ch)) {
			json_decref(r->children);
			r->children = json_incref(ch);
		}
	}
	if (!r->msgs || !r->done) {
		rt_run_unref_locked(r);
		return -EINVAL;
	}
	/* the stream of a restored run starts with what the trace holds */
	json_t *recs = NULL;
	if (!wd_trace_run_records(rt->trace, id, &recs, NULL)) {
		size_t i;
		json_t *x;
		json_array_foreach(recs, i, x) rt_push_line_locked(r, x);
	}
	json_decref(recs);
	r->state = R_SUSPENDED;
	r->next = rt->runs;
	rt->runs = r;
	/* re-register its approvals; a call approved/denied but not yet
	 * run when the daemon stopped goes back to the queue */
	size_t i;
	json_t *pc;
	json_array_foreach(r->pending, i, pc)
	{
		const char *st =
		    json_string_value(json_object_get(pc, "state"));
		if (st && !strcmp(st, "ready"))
			json_object_set_new(pc, "state", json_string("new"));
	}
	bool waiting = false;
	json_t *recs2 = NULL;
	if (!wd_trace_run_records(rt->trace, id, &recs2, NULL)) {
		json_array_foreach(recs2, i, pc)
		{
			const char *t =
			    json_string_value(json_object_get(pc, "type"));
			if (!t || strcmp(t, "approval_request"))
				continue;
			const char *aid = json_string_value(
			    json_object_get(pc, "approval_id"));
			const char *cid = json_string_value(
			    json_object_get(pc, "gen_ai.tool.call.id"));
			json_t *call = cid ? rt_find_call_locked(r, cid) : NULL;
			const char *st =
			    call ? json_string_value(
				       json_object_get(call, "state"))
				 : NULL;
			if (!aid || !st || strcmp(st, "waiting"))
				continue;
			waiting = true;
			json_t *ap = json_pack(
			    "{s:s,s:s,s:s,s:O,s:O,s:O,s:s,s:s,s:s,s:O,s:O}",
			    "id", aid, "run_id", id, "call_id", cid, "tool",
			    json_object_get(call, "name"), "args",
			    json_object_get(call, "arguments"), "reason",
			    json_object_get(pc, "reason"), "agent", a->name,
			    "team", a->team, "user", c.user, "created_ns",
			    json_object_get(pc, "ts") ?: json_null(),
			    "expires_ns", json_object_get(pc, "expires_ns"));
			json_object_set_new(rt->approvals, aid, ap);
		}
	}
	json_decref(recs2);
	if (!waiting)
		rt_enqueue_locked(rt, r);
	wd_info("run %s: restored (%s)", id,
		waiting ? "waiting for approval" : "resuming");
	return 0;
}

void rt_recover(struct wd_rt *rt)
{
	DIR *d = opendir(rt->runs_dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (n < 8 || strcmp(de->d_name + n - 7, ".active"))
			continue;
		char id[64];
		snprintf(id, sizeof(id), "%.*s", (int)(n - 7), de->d_name);
		cleanup_free char *snap = rt_run_path(rt, id, "json");
		cleanup_free char *active = rt_run_path(rt, id, "active");
		json_error_t je;
		json_t *s = json_load_file(snap, 0, &je);
		pthread_mutex_lock(&rt->mu);
		int rc = s ? restore_run(rt, id, s) : -ENOENT;
		pthread_mutex_unlock(&rt->mu);
		/* a replay (waiting on an approval, or between steps) */
		json_t *ro = json_object_get(s, "replay_of");
		cleanup_free char *why =
		    rc == -ENOTSUP && ro
			? wd_asprintf(
			      "wardend restarted: a replay is not resumed "
			      "across a restart (its replay gate — the "
			      "original's recordings, mocks and stricter "
			      "side-effect labels — lives in memory only, "
			      "and resuming it as an ordinary run could run "
			      "its tools live); replay %s again from step %d",
			      json_string_value(json_object_get(ro, "run_id"))
				  ?: "the original",
			      (int)json_integer_value(
				  json_object_get(ro, "from_step")))
			: NULL;
		json_decref(s);
		if (rc) {
			mark_interrupted(rt, id, why);
			unlink(snap);
			unlink(active);
		}
	}
	closedir(d);
}
