/* Recovery at open: runs left active by a previous daemon are restored
 * from their snapshot (suspended on approval) or marked interrupted. And
 * runs whose run_end could not be recorded (the trace store unhealthy:
 * disk full): their marker (runs/ID.active) stays, says how the run ended,
 * and the run_end is appended at the next chance — when the store has
 * recovered (rt_unended_flush, from the TTL thread), or at the next start
 * as `interrupted` with that reason. So no run stays `running` in the
 * trace that is not live (daemon_diskfull.sh). */
#include <dirent.h>
#include <fcntl.h>
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

json_t *rt_recs_first(json_t *recs, const char *type)
{
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		const char *t = json_string_value(json_object_get(r, "type"));
		if (t && !strcmp(t, type))
			return r;
	}
	return NULL;
}

json_t *rt_first_of(struct wd_rt *rt, const char *run_id, const char *type)
{
	json_t *recs = NULL;
	if (wd_trace_run_records(rt->trace, run_id, &recs, NULL))
		return NULL;
	json_t *out = json_incref(rt_recs_first(recs, type));
	json_decref(recs);
	return out;
}

/* ---- markers ---- */

/* A marker is MARKER_BYTES long from its creation: the end of a run is
 * written over it in place, which needs no new block even on a full disk
 * (tmpfs and ext4 alike). */
#define MARKER_BYTES 1024

/* Halve the longest of the end's reason and error (at a UTF-8 character
 * boundary, marked with "..."): a provider's error can be longer than a
 * marker, and the marker is what says how the run ended if the daemon
 * stops before its run_end is recorded. false when nothing is left to
 * shorten. */
static bool marker_shorten(json_t *content)
{
	json_t *end = json_object_get(content, "end");
	const char *keys[] = {"reason", "error"}, *best = NULL;
	size_t blen = 0;
	for (size_t i = 0; i < WD_ARRAY_SIZE(keys); i++) {
		size_t l = json_string_length(json_object_get(end, keys[i]));
		if (l > blen) {
			blen = l;
			best = keys[i];
		}
	}
	if (!best || blen < 16)
		return false;
	const char *v = json_string_value(json_object_get(end, best));
	size_t cut = blen / 2;
	while (cut > 0 && ((unsigned char)v[cut] & 0xc0) == 0x80)
		cut--; /* not inside a character */
	char *t = wd_asprintf("%.*s...", (int)cut, v);
	json_object_set_new(end, best, json_string(t));
	free(t);
	return true;
}

int rt_marker_write(struct wd_rt *rt, const char *id, json_t *content,
		    bool create)
{
	cleanup_free char *path = rt_run_path(rt, id, "active");
	cleanup_free char *text = json_dumps(content, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	char buf[MARKER_BYTES];
	size_t n = strlen(text);
	while (n >= sizeof(buf) && marker_shorten(content)) {
		free(text);
		if (!(text = json_dumps(content, JSON_COMPACT)))
			return -ENOMEM;
		n = strlen(text);
	}
	if (n >= sizeof(buf))
		return -E2BIG;
	memset(buf, ' ', sizeof(buf));
	memcpy(buf, text, n);
	buf[sizeof(buf) - 1] = '\n';
	cleanup_close int fd = open(
	    path, O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
	if (fd < 0)
		return -errno;
	ssize_t w = pwrite(fd, buf, sizeof(buf), 0);
	if (w < 0)
		return -errno;
	if (w != (ssize_t)sizeof(buf))
		return -ENOSPC;
	return fdatasync(fd) < 0 ? -errno : 0;
}

/* What a marker says ({agent[, end]}), or NULL (an older marker holds the
 * agent's name only). */
static json_t *marker_read(struct wd_rt *rt, const char *id)
{
	cleanup_free char *path = rt_run_path(rt, id, "active");
	json_error_t je;
	return json_load_file(path, JSON_DISABLE_EOF_CHECK, &je);
}

/* rt->mu held. rec (a run_end; a reference is taken) waits in rt->unended
 * until the store can record it. */
void rt_unended_add_locked(struct wd_rt *rt, const char *id, json_t *rec)
{
	json_object_set(rt->unended, id, rec);
}

/* TTL thread, rt->mu not held: record what waits, once the store is
 * healthy again. */
void rt_unended_flush(struct wd_rt *rt)
{
	pthread_mutex_lock(&rt->mu);
	json_t *todo =
	    json_object_size(rt->unended) ? json_deep_copy(rt->unended) : NULL;
	pthread_mutex_unlock(&rt->mu);
	if (!todo || !wd_trace_healthy(rt->trace, NULL)) {
		json_decref(todo);
		return;
	}
	const char *id;
	json_t *rec;
	json_object_foreach(todo, id, rec)
	{
		struct wd_err err = {0};
		if (wd_trace_append(rt->trace, rec, true, NULL, &err)) {
			wd_warn("run %s: run_end still not recorded: %s", id,
				err.msg);
			break;
		}
		cleanup_free char *active = rt_run_path(rt, id, "active");
		unlink(active);
		wd_info("run %s: run_end recorded after the trace store "
			"recovered",
			id);
		pthread_mutex_lock(&rt->mu);
		struct wd_run *r = rt_find_run_locked(rt, id);
		if (r)
			rt_push_line_locked(r, rec);
		json_object_del(rt->unended, id);
		pthread_mutex_unlock(&rt->mu);
	}
	json_decref(todo);
}

/* 0: recorded (or nothing to record), the marker may go; else the record
 * waits in rt->unended and the marker stays. */
static int mark_interrupted(struct wd_rt *rt, const char *id, const char *why)
{
	json_t *start = rt_first_of(rt, id, "run_start");
	if (!start) {
		/* its run_start never reached the trace: no run to end */
		wd_warn("run %s: marker without a run_start; removed", id);
		return 0;
	}
	json_t *ended = rt_first_of(rt, id, "run_end");
	if (ended) {
		/* a late run_end reached the trace, then the daemon died
		 * before the marker went: the run has ended once already */
		wd_info("run %s: already ended (%s); marker removed", id,
			json_string_value(json_object_get(ended, "status"))
			    ?: "?");
		json_decref(ended);
		json_decref(start);
		return 0;
	}
	json_t *rec = json_pack(
	    "{s:s,s:i,s:s,s:s,s:s}", "run_id", id, "step", 0, "type", "run_end",
	    "status", "interrupted", "reason",
	    why ? why : "wardend stopped while the run was in progress");
	json_t *mk = marker_read(rt, id);
	json_t *end = json_object_get(mk, "end");
	if (json_is_object(end)) {
		/* it had ended; its run_end could not be written */
		const char *st =
		    json_string_value(json_object_get(end, "status"));
		const char *ewhy =
		    json_string_value(json_object_get(end, "reason"));
		const char *e =
		    json_string_value(json_object_get(end, "error"));
		cleanup_free char *reason = wd_asprintf(
		    "the run ended (%s%s%s) but its run_end could not be "
		    "recorded (%s), and wardend stopped before the trace store "
		    "recovered",
		    st ? st : "?", ewhy && *ewhy ? ": " : "", ewhy ? ewhy : "",
		    e ? e : "trace store unhealthy");
		json_object_set_new(rec, "reason", json_string(reason));
		json_object_set(rec, "ended_as", end);
	}
	json_decref(mk);
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
	int rc = wd_trace_append(rt->trace, rec, true, NULL, &err);
	if (rc) {
		wd_error("run %s: cannot mark interrupted (kept; recorded once "
			 "the trace store recovers): %s",
			 id, err.msg);
		pthread_mutex_lock(&rt->mu);
		rt_unended_add_locked(rt, id, rec);
		pthread_mutex_unlock(&rt->mu);
	} else {
		wd_warn("run %s: interrupted by a daemon stop; marked", id);
	}
	json_decref(rec);
	json_decref(start);
	return rc;
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
	/* a snapshot from before fencing does not say: on a fleet node it
	 * may be a fleet run the fleet has interrupted or requeued since,
	 * so it is fenced (its next step asks the lease; not held: it ends
	 * interrupted); on a single node nothing else can have it */
	json_t *fj = json_object_get(s, "fenced");
	r->fenced = fj ? json_is_true(fj) : rt->fleet;
	snprintf(r->fence_id, sizeof(r->fence_id), "%s", id);
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
			/* created_ns is a number wherever it is read (the
			 * fleet's approvals table, the API): the record's
			 * ts is text */
			uint64_t ts_us = wd_trace_parse_ts(
			    json_string_value(json_object_get(pc, "ts")));
			json_t *ap = json_pack(
			    "{s:s,s:s,s:s,s:O,s:O,s:O,s:s,s:s,s:s,s:o,s:O}",
			    "id", aid, "run_id", id, "call_id", cid, "tool",
			    json_object_get(call, "name"), "args",
			    json_object_get(call, "arguments"), "reason",
			    json_object_get(pc, "reason"), "agent", a->name,
			    "team", a->team, "user", c.user, "created_ns",
			    ts_us ? json_integer((json_int_t)(ts_us * 1000))
				  : json_null(),
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
		if (rc && !mark_interrupted(rt, id, why)) {
			unlink(snap);
			unlink(active);
		}
	}
	closedir(d);
}
