/* The runtime's shared state: worker pool, run table, approvals (with TTL),
 * snapshots of suspended runs, recovery after a crash, stream cursors and
 * the API's JSON views. The loop itself is in loop.c. */
#include <curl/curl.h>
#include <dirent.h>
#include <pwd.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common/log.h"
#include "events/stream.h"
#include "gateway/gateway.h"
#include "sandbox/pool.h"
#include "sandbox/sandbox.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

#define DONE_KEEP 256 /* finished runs kept in memory for streams */

/* ---- callers ---- */

void wd_caller_from_uid(uid_t uid, gid_t gid, struct wd_caller *c)
{
	memset(c, 0, sizeof(*c));
	c->uid = uid;
	c->gid = gid;
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (uid != (uid_t)-1 && !getpwuid_r(uid, &pw, buf, sizeof(buf), &res) &&
	    res)
		snprintf(c->user, sizeof(c->user), "%s", res->pw_name);
	else
		snprintf(c->user, sizeof(c->user), "%u", (unsigned)uid);
}

int wd_caller_from_socket(int fd, struct wd_caller *c)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	if (len != sizeof(uc) || uc.uid == (uid_t)-1)
		return -EPERM;
	wd_caller_from_uid(uc.uid, uc.gid, c);
	c->pid = uc.pid;
	return 0;
}

/* ---- records and stream lines ---- */

json_t *rt_rec_new(struct wd_run *r, const char *type)
{
	json_t *o = json_object();
	json_object_set_new(o, "run_id", json_string(r->id));
	json_object_set_new(o, "step", json_integer(r->step));
	json_object_set_new(o, "type", json_string(type));
	return o;
}

static void push_line_locked(struct wd_run *r, json_t *rec)
{
	char *line = json_dumps(rec, JSON_COMPACT);
	if (!line)
		return;
	if (r->n_lines == r->cap_lines) {
		r->cap_lines = r->cap_lines ? r->cap_lines * 2 : 32;
		r->lines = wd_realloc(r->lines, r->cap_lines * sizeof(char *));
		r->line_seq =
		    wd_realloc(r->line_seq, r->cap_lines * sizeof(uint64_t));
	}
	r->lines[r->n_lines] = line;
	r->line_seq[r->n_lines] =
	    (uint64_t)json_integer_value(json_object_get(rec, "seq"));
	r->n_lines++;
	pthread_cond_broadcast(&r->rt->ecood);
}

int rt_record(struct wd_run *r, json_t *rec, bool durable, struct wd_err *err)
{
	int rc = wd_trace_append(r->rt->trace, rec, durable, NULL, err);
	pthread_mutex_lock(&r->rt->mu);
	push_line_locked(r, rec);
	pthread_mutex_unlock(&r->rt->mu);
	return rc;
}

/* ---- snapshots (suspended runs survive a restart) ---- */

static char *run_path(struct wd_rt *rt, const char *id, const char *ext)
{
	return wd_asprintf("%s/%s.%s", rt->runs_dir, id, ext);
}

static json_t *snapshot_json(struct wd_run *r)
{
	return json_pack(
	    "{s:s,s:s,s:{s:i,s:i,s:s},s:s,s:O,s:O,s:O,s:i,s:I,s:I,s:f,s:I,"
	    "s:I}",
	    "id", r->id, "agent", r->agent->name, "caller", "uid",
	    (int)r->caller.uid, "gid", (int)r->caller.gid, "user",
	    r->caller.user, "task", r->task, "msgs", r->msgs, "pending",
	    r->pending ? r->pending : json_null(), "done", r->done, "step",
	    r->step, "in_tokens", (json_int_t)r->in_tokens, "out_tokens",
	    (json_int_t)r->out_tokens, "cost", r->cost, "active_ns",
	    (json_int_t)r->active_ns, "started_wall",
	    (json_int_t)r->started_wall);
}

/* Called with rt->mu held. Written atomically (tmp + rename + fsync). */
int rt_save_snapshot(struct wd_run *r)
{
	json_t *s = snapshot_json(r);
	cleanup_free char *text = json_dumps(s, JSON_COMPACT);
	json_decref(s);
	cleanup_free char *path = run_path(r->rt, r->id, "json");
	cleanup_free char *tmp = run_path(r->rt, r->id, "json.tmp");
	int rc = text ? wd_write_file(tmp, text, strlen(text), 0600) : -ENOMEM;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		wd_log_errno(WD_LOG_ERROR, rc, "run %s: cannot save snapshot",
			     r->id);
	return rc;
}

void rt_drop_snapshot(struct wd_run *r)
{
	cleanup_free char *path = run_path(r->rt, r->id, "json");
	unlink(path);
}

/* ---- runs ---- */

static void run_free(struct wd_run *r)
{
	wd_pset_unref(r->ps);
	wd_pset_strv_free(r->scopes, r->n_scopes);
	free(r->task);
	json_decref(r->msgs);
	json_decref(r->pending);
	json_decref(r->done);
	free(r->final_text);
	for (size_t i = 0; i < r->n_lines; i++)
		free(r->lines[i]);
	free(r->lines);
	free(r->line_seq);
	free(r);
}

void rt_run_unref_locked(struct wd_run *r)
{
	if (--r->refs == 0)
		run_free(r);
}

static struct wd_run *find_run_locked(struct wd_rt *rt, const char *id)
{
	for (struct wd_run *r = rt->runs; r; r = r->next)
		if (!strcmp(r->id, id))
			return r;
	return NULL;
}

void rt_enqueue_locked(struct wd_rt *rt, struct wd_run *r)
{
	r->state = R_QUEUED;
	r->qnext = NULL;
	r->refs++;
	if (rt->qtail)
		rt->qtail->qnext = r;
	else
		rt->qhead = r;
	rt->qtail = r;
	pthread_cond_signal(&rt->qcond);
}

/* Drop old finished runs from memory (their streams read the trace). */
static void trim_done_locked(struct wd_rt *rt)
{
	int kept = 0;
	struct wd_run **pp = &rt->runs;
	while (*pp) {
		struct wd_run *r = *pp;
		if (r->state == R_DONE && ++kept > DONE_KEEP) {
			*pp = r->next;
			rt_run_unref_locked(r);
			continue;
		}
		pp = &r->next;
	}
}

void rt_finish(struct wd_run *r, const char *status, const char *reason,
	       const char *text)
{
	struct wd_rt *rt = r->rt;
	json_t *rec = rt_rec_new(r, "run_end");
	json_object_set_new(rec, "status", json_string(status));
	if (reason)
		json_object_set_new(rec, "reason", json_string(reason));
	json_object_set_new(rec, "steps", json_integer(r->step));
	json_object_set_new(rec, "cost_usd", json_real(r->cost));
	json_object_set_new(rec, "gen_ai.usage.input_tokens",
			    json_integer((json_int_t)r->in_tokens));
	json_object_set_new(rec, "gen_ai.usage.output_tokens",
			    json_integer((json_int_t)r->out_tokens));
	json_object_set_new(rec, "agent", json_string(r->agent->name));
	json_object_set_new(rec, "team", json_string(r->agent->team));
	json_object_set_new(rec, "user", json_string(r->caller.user));
	if (text && !r->agent->hash_only)
		json_object_set_new(rec, "output", json_string(text));
	struct wd_err err = {0};
	if (rt_record(r, rec, true, &err))
		wd_error("run %s: run_end not recorded: %s", r->id, err.msg);
	json_decref(rec);
	pthread_mutex_lock(&rt->mu);
	snprintf(r->status, sizeof(r->status), "%s", status);
	snprintf(r->stop_reason, sizeof(r->stop_reason), "%s",
		 reason ? reason : "");
	free(r->final_text);
	r->final_text = text ? wd_strdup(text) : NULL;
	r->state = R_DONE;
	rt->m_runs_ended++;
	rt_drop_snapshot(r);
	cleanup_free char *active = run_path(rt, r->id, "active");
	unlink(active);
	pthread_cond_broadcast(&rt->ecood);
	trim_done_locked(rt);
	pthread_mutex_unlock(&rt->mu);
	wd_info("run %s: %s%s%s", r->id, status, reason ? ": " : "",
		reason ? reason : "");
}

static void *worker(void *arg)
{
	struct wd_rt *rt = arg;
	pthread_mutex_lock(&rt->mu);
	for (;;) {
		while (!rt->qhead && !rt->stopping)
			pthread_cond_wait(&rt->qcond, &rt->mu);
		if (rt->stopping)
			break;
		struct wd_run *r = rt->qhead;
		rt->qhead = r->qnext;
		if (!rt->qhead)
			rt->qtail = NULL;
		r->state = R_RUNNING;
		pthread_mutex_unlock(&rt->mu);
		rt_advance(r);
		pthread_mutex_lock(&rt->mu);
		rt_run_unref_locked(r);
	}
	pthread_mutex_unlock(&rt->mu);
	return NULL;
}

static struct wd_run *run_new(struct wd_rt *rt, struct wd_pset *ps,
			      const struct wd_agent_def *a,
			      const struct wd_caller *c, const char *task)
{
	struct wd_run *r = wd_calloc(1, sizeof(*r));
	r->rt = rt;
	r->refs = 1; /* rt->runs */
	r->ps = wd_pset_ref(ps);
	r->agent = a;
	r->caller = *c;
	r->scopes = wd_pset_user_scopes(ps, c->uid, &r->n_scopes);
	/* the policy's name for the uid, when listed, names the user */
	const char *pn = wd_pset_user_name(ps, c->uid);
	if (pn)
		snprintf(r->caller.user, sizeof(r->caller.user), "%s", pn);
	r->task = wd_strdup(task);
	r->done = json_object();
	snprintf(r->status, sizeof(r->status), "running");
	return r;
}

int wd_rt_run_create(struct wd_rt *rt, const struct wd_caller *c,
		     const char *agent, const char *task, char id[64],
		     struct wd_err *err)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *ps = wd_pset_ref(rt->ps);
	pthread_mutex_unlock(&rt->mu);
	int rc = 0;
	cleanup_free char *active = NULL;
	const struct wd_agent_def *a = wd_pset_agent(ps, agent);
	char why[256];
	if (!a) {
		rc = wd_err_set(err, -ENOENT, "no agent '%s' in %s", agent,
				ps->dir);
		goto out;
	}
	if (!wd_pset_may_run(ps, c->uid, a, why, sizeof(why))) {
		rc = wd_err_set(err, -EACCES, "%s", why);
		goto out;
	}
	struct wd_run *r = run_new(rt, ps, a, c, task);
	memcpy(r->id, "run_", 4);
	wd_rand_hex(r->id + 4, 16);
	r->started_wall = wd_wall_ns();
	r->msgs = json_array();
	if (a->system_prompt && *a->system_prompt)
		json_array_append_new(r->msgs,
				      json_pack("{s:s,s:s}", "role", "system",
						"text", a->system_prompt));
	json_array_append_new(
	    r->msgs, json_pack("{s:s,s:s}", "role", "user", "text", task));

	/* the run exists on disk before anything else happens */
	active = run_path(rt, r->id, "active");
	wd_write_file(active, agent, strlen(agent), 0600);
	json_t *rec = rt_rec_new(r, "run_start");
	json_object_set_new(rec, "agent", json_string(a->name));
	json_object_set_new(rec, "team", json_string(a->team));
	json_object_set_new(rec, "user", json_string(r->caller.user));
	json_object_set_new(rec, "uid", json_integer(c->uid));
	json_object_set_new(rec, "gen_ai.request.model", json_string(a->model));
	json_object_set_new(rec, "gen_ai.operation.name",
			    json_string("invoke_agent"));
	json_object_set_new(rec, "trace",
			    json_pack("{s:s,s:i}", "payloads",
				      a->hash_only ? "hash_only" : "full",
				      "retention_days", a->retention_days));
	json_object_set_new(
	    rec, "bounds",
	    json_pack("{s:i,s:I,s:f,s:f,s:I}", "max_steps", a->max_steps,
		      "token_budget", (json_int_t)a->token_budget,
		      "wall_clock_s", a->wall_clock_s, "cost_cap_usd",
		      a->cost_cap_usd, "context_budget_tokens",
		      (json_int_t)a->context_budget_tokens));
	json_t *tl = json_array();
	for (int i = 0; i < a->n_tools; i++)
		json_array_append_new(tl, json_string(a->tools[i]));
	json_object_set_new(rec, "tools", tl);
	if (a->hash_only) {
		char ref[WD_TRACE_REF_LEN];
		/* hash_only: the store computes the ref, keeps nothing */
		if (!wd_trace_put_blob(rt->trace, NULL, "", 0, ref, NULL))
			(void)ref;
	} else {
		json_object_set_new(rec, "task", json_string(task));
	}
	rc = rt_record(r, rec, true, err);
	json_decref(rec);
	if (rc) {
		unlink(active);
		pthread_mutex_lock(&rt->mu);
		rt_run_unref_locked(r);
		pthread_mutex_unlock(&rt->mu);
		goto out;
	}
	pthread_mutex_lock(&rt->mu);
	r->next = rt->runs;
	rt->runs = r;
	rt->m_runs_started++;
	rt_enqueue_locked(rt, r);
	pthread_mutex_unlock(&rt->mu);
	snprintf(id, 64, "%s", r->id);
	wd_info("run %s: agent %s for %s (uid %u)", r->id, a->name,
		r->caller.user, (unsigned)c->uid);
out:
	wd_pset_unref(ps);
	return rc;
}

/* ---- approvals ---- */

static json_t *find_call_locked(struct wd_run *r, const char *call_id)
{
	size_t i;
	json_t *pc;
	json_array_foreach(r->pending, i, pc)
	{
		const char *id = json_string_value(json_object_get(pc, "id"));
		if (id && !strcmp(id, call_id))
			return pc;
	}
	return NULL;
}

static bool any_waiting(struct wd_run *r)
{
	size_t i;
	json_t *pc;
	json_array_foreach(r->pending, i, pc)
	{
		const char *s = json_string_value(json_object_get(pc, "state"));
		if (s && !strcmp(s, "waiting"))
			return true;
	}
	return false;
}

/* Apply a decision (rt->mu held). `decider` NULL = the TTL. */
static int decide_locked(struct wd_rt *rt, const char *aid, bool approve,
			 const char *decider, const char *reason)
{
	json_t *ap = json_object_get(rt->approvals, aid);
	if (!ap)
		return -ENOENT;
	const char *run_id = json_string_value(json_object_get(ap, "run_id"));
	const char *call_id = json_string_value(json_object_get(ap, "call_id"));
	struct wd_run *r = find_run_locked(rt, run_id);
	json_t *pc = r ? find_call_locked(r, call_id) : NULL;
	if (!pc) {
		json_object_del(rt->approvals, aid);
		return -ENOENT;
	}
	const char *what = approve   ? "approved"
			   : decider ? "denied"
				     : "expired";
	json_object_set_new(pc, "state",
			    json_string(approve ? "approved" : "denied"));
	json_t *info = json_pack("{s:s,s:s,s:s}", "id", aid, "decision", what,
				 "by", decider ? decider : "ttl");
	if (reason)
		json_object_set_new(info, "reason", json_string(reason));
	json_object_set(pc, "approval", info);
	if (!approve) {
		cleanup_free char *why =
		    decider
			? wd_asprintf("approval denied by %s%s%s", decider,
				      reason ? ": " : "", reason ? reason : "")
			: wd_strdup("approval not given before its TTL "
				    "expired: denied");
		json_object_set_new(pc, "denied_reason", json_string(why));
	}
	/* the record goes through the trace and the run's stream; the
	 * lock is the one rt_record takes, so append directly here */
	json_t *rec = rt_rec_new(r, "approval_decision");
	json_object_set_new(rec, "approval_id", json_string(aid));
	json_object_set_new(rec, "gen_ai.tool.call.id", json_string(call_id));
	json_object_set(rec, "gen_ai.tool.name", json_object_get(ap, "tool"));
	json_object_set_new(rec, "decision", json_string(what));
	json_object_set_new(rec, "by", json_string(decider ? decider : "ttl"));
	if (reason)
		json_object_set_new(rec, "reason", json_string(reason));
	struct wd_err err = {0};
	if (wd_trace_append(rt->trace, rec, true, NULL, &err))
		wd_error("run %s: approval_decision not recorded: %s", r->id,
			 err.msg);
	push_line_locked(r, rec);
	json_decref(rec);
	json_decref(info);
	json_object_del(rt->approvals, aid);
	if (r->state == R_SUSPENDED && !any_waiting(r)) {
		rt_drop_snapshot(r);
		rt_enqueue_locked(rt, r);
	} else if (r->state == R_SUSPENDED) {
		rt_save_snapshot(r);
	}
	return 0;
}

int wd_rt_approval_decide(struct wd_rt *rt, const struct wd_caller *c,
			  const char *id, bool approve, const char *reason,
			  struct wd_err *err)
{
	pthread_mutex_lock(&rt->mu);
	json_t *ap = json_object_get(rt->approvals, id);
	int rc = 0;
	if (!ap) {
		rc = wd_err_set(err, -ENOENT,
				"no pending approval '%s' (decided, expired "
				"or unknown)",
				id);
		goto out;
	}
	if (!wd_pset_is_approver(rt->ps, c->uid)) {
		rc = wd_err_set(err, -EPERM,
				"user '%s' (uid %u) is not an approver in "
				"users.yaml",
				c->user, (unsigned)c->uid);
		goto out;
	}
	const char *pn = wd_pset_user_name(rt->ps, c->uid);
	rc = decide_locked(rt, id, approve, pn ? pn : c->user, reason);
	if (rc)
		wd_err_set(err, rc, "approval '%s': its run is gone", id);
out:
	pthread_mutex_unlock(&rt->mu);
	return rc;
}

json_t *wd_rt_approvals_list(struct wd_rt *rt, const struct wd_caller *c)
{
	json_t *out = json_array();
	pthread_mutex_lock(&rt->mu);
	const char *k;
	json_t *ap;
	json_object_foreach(rt->approvals, k, ap)
	{
		json_t *o = json_deep_copy(ap);
		json_object_set_new(
		    o, "you_may_decide",
		    json_boolean(wd_pset_is_approver(rt->ps, c->uid)));
		json_array_append_new(out, o);
	}
	pthread_mutex_unlock(&rt->mu);
	return out;
}

static void notify_webhook(struct wd_rt *rt, json_t *payload)
{
	if (!rt->webhook)
		return;
	cleanup_free char *body = json_dumps(payload, JSON_COMPACT);
	CURL *c = curl_easy_init();
	if (!c || !body) {
		if (c)
			curl_easy_cleanup(c);
		return;
	}
	struct curl_slist *h =
	    curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, rt->webhook);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		wd_warn("webhook %s: %s", rt->webhook, curl_easy_strerror(rc));
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
}

/* Approvals never granted are denied at their TTL and notified (seed 000
 * step 7: they must not accumulate silently). */
static void *ttl_thread(void *arg)
{
	struct wd_rt *rt = arg;
	pthread_mutex_lock(&rt->mu);
	while (!rt->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&rt->qcond, &rt->mu, &ts);
		if (rt->stopping)
			break;
		uint64_t now = wd_wall_ns();
		json_t *expired = json_array();
		const char *k;
		json_t *ap;
		json_object_foreach(rt->approvals, k, ap)
		{
			uint64_t exp = (uint64_t)json_integer_value(
			    json_object_get(ap, "expires_ns"));
			if (exp && now >= exp)
				json_array_append(expired, ap);
		}
		size_t i;
		json_array_foreach(expired, i, ap)
		{
			const char *aid =
			    json_string_value(json_object_get(ap, "id"));
			wd_warn(
			    "approval %s (run %s, tool %s) expired", aid,
			    json_string_value(json_object_get(ap, "run_id")),
			    json_string_value(json_object_get(ap, "tool")));
			decide_locked(rt, aid, false, NULL, NULL);
		}
		if (json_array_size(expired) && rt->webhook) {
			pthread_mutex_unlock(&rt->mu);
			json_array_foreach(expired, i, ap)
			{
				json_t *p = json_pack("{s:s,s:O}", "event",
						      "approval_expired",
						      "approval", ap);
				notify_webhook(rt, p);
				json_decref(p);
			}
			pthread_mutex_lock(&rt->mu);
		}
		json_decref(expired);
	}
	pthread_mutex_unlock(&rt->mu);
	return NULL;
}

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

static json_t *first_of(struct wd_rt *rt, const char *run_id, const char *type)
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

static void mark_interrupted(struct wd_rt *rt, const char *id)
{
	json_t *start = first_of(rt, id, "run_start");
	json_t *rec =
	    json_pack("{s:s,s:i,s:s,s:s,s:s}", "run_id", id, "step", 0, "type",
		      "run_end", "status", "interrupted", "reason",
		      "wardend stopped while the run was in "
		      "progress");
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
	    run_new(rt, rt->ps, a, &c,
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
	if (!r->msgs || !r->done) {
		rt_run_unref_locked(r);
		return -EINVAL;
	}
	/* the stream of a restored run starts with what the trace holds */
	json_t *recs = NULL;
	if (!wd_trace_run_records(rt->trace, id, &recs, NULL)) {
		size_t i;
		json_t *x;
		json_array_foreach(recs, i, x) push_line_locked(r, x);
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
			json_t *call = cid ? find_call_locked(r, cid) : NULL;
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

static void recover(struct wd_rt *rt)
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
		cleanup_free char *snap = run_path(rt, id, "json");
		cleanup_free char *active = run_path(rt, id, "active");
		json_error_t je;
		json_t *s = json_load_file(snap, 0, &je);
		pthread_mutex_lock(&rt->mu);
		int rc = s ? restore_run(rt, id, s) : -ENOENT;
		pthread_mutex_unlock(&rt->mu);
		json_decref(s);
		if (rc) {
			mark_interrupted(rt, id);
			unlink(snap);
			unlink(active);
		}
	}
	closedir(d);
}

/* ---- open/close/reload ---- */

int wd_rt_open(const struct wd_rt_opts *o, struct wd_rt **out,
	       struct wd_err *err)
{
	struct wd_rt *rt = wd_calloc(1, sizeof(*rt));
	int rc;
	rt->state_dir = wd_strdup(o->state_dir);
	rt->policy_dir = wd_strdup(o->policy_dir);
	rt->runs_dir = wd_asprintf("%s/runs", o->state_dir);
	rt->approval_ttl_s = o->approval_ttl_s;
	if (!rt->approval_ttl_s) {
		const char *e = getenv("WARDEN_APPROVAL_TTL");
		rt->approval_ttl_s = e ? (unsigned)atoi(e) : 0; /* 0: agent's */
	}
	rt->webhook = o->webhook_url ? wd_strdup(o->webhook_url) : NULL;
	rt->approvals = json_object();
	rt->rl = wd_ratelimit_new();
	rt->events = wd_stream_new(65536);
	pthread_mutex_init(&rt->mu, NULL);
	pthread_cond_init(&rt->qcond, NULL);
	pthread_cond_init(&rt->ecood, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if ((rc = wd_mkdir_p(rt->runs_dir, 0700))) {
		wd_err_set(err, rc, "cannot create %s", rt->runs_dir);
		goto fail;
	}
	if ((rc = wd_pset_load(rt->policy_dir, &rt->ps, err)))
		goto fail;
	if ((rc = wd_trace_open(rt->state_dir, NULL, &rt->trace, err)))
		goto fail;
	/* what calls killed with the previous daemon left behind */
	int swept = wd_sandbox_sweep();
	if (swept > 0)
		wd_info("removed %d leftovers of interrupted tool calls",
			swept);
	if (o->warm_pool > 0) {
		struct wd_pool_config pc = {.size = o->warm_pool};
		rt->pool = wd_pool_new(&pc);
		if (rt->pool)
			wd_sandbox_use_pool(rt->pool);
		else
			wd_log_errno(WD_LOG_WARN, -errno,
				     "warm pool: cold starts only");
	}
	recover(rt);
	if (o->alert && wd_alert_new(o->alert, rt->events, &rt->alert, err)) {
		rc = err ? err->code : -EINVAL;
		goto fail;
	}
	rt->n_workers = o->workers > 0 ? o->workers : 8;
	rt->workers = wd_calloc((size_t)rt->n_workers, sizeof(pthread_t));
	for (int i = 0; i < rt->n_workers; i++)
		pthread_create(&rt->workers[i], NULL, worker, rt);
	pthread_create(&rt->ttl_thread, NULL, ttl_thread, rt);
	*out = rt;
	return 0;
fail:
	wd_pset_unref(rt->ps);
	wd_ratelimit_free(rt->rl);
	wd_stream_free(rt->events);
	json_decref(rt->approvals);
	free(rt->state_dir);
	free(rt->policy_dir);
	free(rt->runs_dir);
	free(rt->webhook);
	free(rt);
	return rc;
}

void wd_rt_close(struct wd_rt *rt)
{
	if (!rt)
		return;
	pthread_mutex_lock(&rt->mu);
	rt->stopping = true;
	pthread_cond_broadcast(&rt->qcond);
	pthread_cond_broadcast(&rt->ecood);
	pthread_mutex_unlock(&rt->mu);
	wd_stream_shutdown(rt->events);
	for (int i = 0; i < rt->n_workers; i++)
		pthread_join(rt->workers[i], NULL);
	pthread_join(rt->ttl_thread, NULL);
	/* queued runs never started their next step: snapshot them so the
	 * next start resumes them (like the runs parked by the workers) */
	pthread_mutex_lock(&rt->mu);
	while (rt->qhead) {
		struct wd_run *r = rt->qhead;
		rt->qhead = r->qnext;
		rt_save_snapshot(r);
		rt_run_unref_locked(r);
	}
	while (rt->runs) {
		struct wd_run *r = rt->runs;
		rt->runs = r->next;
		rt_run_unref_locked(r);
	}
	pthread_mutex_unlock(&rt->mu);
	if (rt->pool) {
		wd_sandbox_use_pool(NULL);
		wd_pool_free(rt->pool);
	}
	for (int i = 0; i < rt->n_retired; i++)
		wd_pset_unref(rt->retired[i]);
	free(rt->retired);
	wd_alert_free(rt->alert); /* after the workers: their denials count */
	wd_trace_close(rt->trace);
	wd_pset_unref(rt->ps);
	wd_ratelimit_free(rt->rl);
	wd_stream_free(rt->events);
	json_decref(rt->approvals);
	free(rt->workers);
	free(rt->state_dir);
	free(rt->policy_dir);
	free(rt->runs_dir);
	free(rt->webhook);
	free(rt);
}

int wd_rt_reload(struct wd_rt *rt, struct wd_err *err)
{
	struct wd_pset *ps = NULL;
	int rc = wd_pset_load(rt->policy_dir, &ps, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *old = rt->ps;
	rt->ps = ps;
	if (rt->pool) {
		rt->retired =
		    wd_realloc(rt->retired, (size_t)(rt->n_retired + 1) *
						sizeof(*rt->retired));
		rt->retired[rt->n_retired++] = old;
		old = NULL;
	}
	pthread_mutex_unlock(&rt->mu);
	wd_pset_unref(old); /* runs hold their own reference */
	return 0;
}

struct wd_trace *wd_rt_trace(struct wd_rt *rt)
{
	return rt->trace;
}

struct wd_stream *wd_rt_events(struct wd_rt *rt)
{
	return rt->events;
}

/* ---- streams ---- */

struct wd_rt_stream {
	struct wd_rt *rt;
	struct wd_run *run; /* NULL: replaying a finished run from the trace */
	json_t *recs;	    /* when run == NULL */
	size_t idx;
	uint64_t since;
};

struct wd_rt_stream *wd_rt_stream_open(struct wd_rt *rt, const char *run_id,
				       uint64_t since_seq, struct wd_err *err)
{
	struct wd_rt_stream *s = wd_calloc(1, sizeof(*s));
	s->rt = rt;
	s->since = since_seq;
	pthread_mutex_lock(&rt->mu);
	s->run = find_run_locked(rt, run_id);
	if (s->run)
		s->run->refs++;
	pthread_mutex_unlock(&rt->mu);
	if (!s->run) {
		if (wd_trace_run_records(rt->trace, run_id, &s->recs, err) ||
		    !json_array_size(s->recs)) {
			json_decref(s->recs);
			free(s);
			wd_err_set(err, -ENOENT, "no run '%s'", run_id);
			errno = ENOENT;
			return NULL;
		}
	}
	return s;
}

int wd_rt_stream_next(struct wd_rt_stream *s, int timeout_ms,
		      struct wd_buf *out)
{
	if (!s->run) {
		for (; s->idx < json_array_size(s->recs); s->idx++) {
			json_t *r = json_array_get(s->recs, s->idx);
			if ((uint64_t)json_integer_value(
				json_object_get(r, "seq")) <= s->since &&
			    s->since)
				continue;
			char *l = json_dumps(r, JSON_COMPACT);
			if (l) {
				wd_buf_printf(out, "%s\n", l);
				free(l);
			}
		}
		return 0;
	}
	struct wd_rt *rt = s->rt;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull +
		     (uint64_t)ts.tv_nsec + (uint64_t)timeout_ms * 1000000ull;
	ts.tv_sec = (time_t)(t / 1000000000ull);
	ts.tv_nsec = (long)(t % 1000000000ull);
	pthread_mutex_lock(&rt->mu);
	while (s->idx >= s->run->n_lines && s->run->state != R_DONE &&
	       !rt->stopping) {
		if (pthread_cond_timedwait(&rt->ecood, &rt->mu, &ts))
			break;
	}
	for (; s->idx < s->run->n_lines; s->idx++) {
		if (s->since && s->run->line_seq[s->idx] <= s->since)
			continue;
		wd_buf_printf(out, "%s\n", s->run->lines[s->idx]);
	}
	int more = s->run->state != R_DONE && !rt->stopping;
	pthread_mutex_unlock(&rt->mu);
	return more;
}

void wd_rt_stream_close(struct wd_rt_stream *s)
{
	if (!s)
		return;
	if (s->run) {
		pthread_mutex_lock(&s->rt->mu);
		rt_run_unref_locked(s->run);
		pthread_mutex_unlock(&s->rt->mu);
	}
	json_decref(s->recs);
	free(s);
}

/* ---- views ---- */

static const char *state_name(enum run_state s)
{
	switch (s) {
	case R_QUEUED:
		return "queued";
	case R_RUNNING:
		return "running";
	case R_SUSPENDED:
		return "awaiting_approval";
	case R_DONE:
		return "done";
	}
	return "?";
}

static json_t *run_view_locked(struct wd_run *r)
{
	json_t *o = json_pack(
	    "{s:s,s:s,s:s,s:s,s:s,s:i,s:I,s:I,s:f}", "run_id", r->id, "agent",
	    r->agent->name, "team", r->agent->team, "user", r->caller.user,
	    "state", state_name(r->state), "steps", r->step, "input_tokens",
	    (json_int_t)r->in_tokens, "output_tokens",
	    (json_int_t)r->out_tokens, "cost_usd", r->cost);
	if (r->state == R_DONE) {
		json_object_set_new(o, "status", json_string(r->status));
		if (r->stop_reason[0])
			json_object_set_new(o, "reason",
					    json_string(r->stop_reason));
		if (r->final_text)
			json_object_set_new(o, "output",
					    json_string(r->final_text));
	}
	return o;
}

json_t *wd_rt_run_info(struct wd_rt *rt, const char *run_id)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_run *r = find_run_locked(rt, run_id);
	json_t *o = r ? run_view_locked(r) : NULL;
	pthread_mutex_unlock(&rt->mu);
	if (o)
		return o;
	/* a run from before this daemon started: from the trace */
	json_t *end = first_of(rt, run_id, "run_end");
	json_t *start = first_of(rt, run_id, "run_start");
	if (!start) {
		json_decref(end);
		errno = ENOENT;
		return NULL;
	}
	o = json_pack("{s:s,s:O,s:O,s:O,s:s}", "run_id", run_id, "agent",
		      json_object_get(start, "agent"), "team",
		      json_object_get(start, "team"), "user",
		      json_object_get(start, "user"), "state",
		      end ? "done" : "unknown");
	if (end) {
		json_object_set(o, "status", json_object_get(end, "status"));
		json_object_set(o, "cost_usd",
				json_object_get(end, "cost_usd"));
		json_object_set(o, "steps", json_object_get(end, "steps"));
		if (json_object_get(end, "reason"))
			json_object_set(o, "reason",
					json_object_get(end, "reason"));
		if (json_object_get(end, "output"))
			json_object_set(o, "output",
					json_object_get(end, "output"));
	}
	json_decref(start);
	json_decref(end);
	return o;
}

json_t *wd_rt_runs_list(struct wd_rt *rt)
{
	json_t *a = json_array();
	pthread_mutex_lock(&rt->mu);
	for (struct wd_run *r = rt->runs; r; r = r->next)
		json_array_append_new(a, run_view_locked(r));
	pthread_mutex_unlock(&rt->mu);
	return a;
}

json_t *wd_rt_cost(struct wd_rt *rt, const char *by, uint64_t since_ns,
		   struct wd_err *err)
{
	/* ended runs from the index; runs in progress from memory */
	struct wd_trace_query q = {.since_ns = since_ns};
	json_t *runs = NULL;
	if (wd_trace_query_runs(rt->trace, &q, &runs, err))
		return NULL;
	json_t *groups = json_object();
	json_t *seen = json_object();
	pthread_mutex_lock(&rt->mu);
	for (struct wd_run *r = rt->runs; r; r = r->next) {
		if (r->started_wall < since_ns)
			continue;
		json_array_append_new(
		    runs,
		    json_pack("{s:s,s:s,s:s,s:s,s:f,s:I,s:I,s:b}", "run_id",
			      r->id, "team", r->agent->team, "agent",
			      r->agent->name, "user", r->caller.user,
			      "cost_usd", r->cost, "input_tokens",
			      (json_int_t)r->in_tokens, "output_tokens",
			      (json_int_t)r->out_tokens, "_live", 1));
	}
	pthread_mutex_unlock(&rt->mu);
	/* a live run also in the index counts once (the live figure) */
	size_t i;
	json_t *x;
	json_array_foreach(runs, i, x)
	{
		if (json_is_true(json_object_get(x, "_live")))
			json_object_set_new(
			    seen,
			    json_string_value(json_object_get(x, "run_id")),
			    json_true());
	}
	double total = 0;
	json_array_foreach(runs, i, x)
	{
		const char *id =
		    json_string_value(json_object_get(x, "run_id"));
		if (!json_is_true(json_object_get(x, "_live")) && id &&
		    json_object_get(seen, id))
			continue;
		const char *k = json_string_value(json_object_get(x, by));
		if (!k)
			k = "(unknown)";
		json_t *g = json_object_get(groups, k);
		if (!g) {
			g = json_pack("{s:s,s:f,s:i,s:I,s:I}", by, k,
				      "cost_usd", 0.0, "runs", 0,
				      "input_tokens", (json_int_t)0,
				      "output_tokens", (json_int_t)0);
			json_object_set_new(groups, k, g);
		}
		double c = json_number_value(json_object_get(x, "cost_usd"));
		total += c;
		json_object_set_new(
		    g, "cost_usd",
		    json_real(
			json_number_value(json_object_get(g, "cost_usd")) + c));
		json_object_set_new(
		    g, "runs",
		    json_integer(
			json_integer_value(json_object_get(g, "runs")) + 1));
		const char *tk[] = {"input_tokens", "output_tokens"};
		for (int t = 0; t < 2; t++)
			json_object_set_new(
			    g, tk[t],
			    json_integer(
				json_integer_value(json_object_get(g, tk[t])) +
				json_integer_value(json_object_get(x, tk[t]))));
	}
	json_t *rows = json_array();
	const char *k;
	json_object_foreach(groups, k, x) json_array_append(rows, x);
	json_t *out =
	    json_pack("{s:s,s:I,s:f,s:o}", "by", by, "since_ns",
		      (json_int_t)since_ns, "total_usd", total, "groups", rows);
	json_decref(groups);
	json_decref(seen);
	json_decref(runs);
	return out;
}

json_t *wd_rt_status(struct wd_rt *rt)
{
	int q = 0, run = 0, susp = 0, done = 0;
	pthread_mutex_lock(&rt->mu);
	for (struct wd_run *r = rt->runs; r; r = r->next) {
		q += r->state == R_QUEUED;
		run += r->state == R_RUNNING;
		susp += r->state == R_SUSPENDED;
		done += r->state == R_DONE;
	}
	json_t *o = json_pack(
	    "{s:s,s:s,s:i,s:i,s:{s:i,s:i,s:i,s:i},s:i,s:i,s:i,s:b}",
	    "policy_dir", rt->policy_dir, "state_dir", rt->state_dir, "tools",
	    rt->ps->n_tools, "agents", rt->ps->n_agents, "runs", "queued", q,
	    "running", run, "awaiting_approval", susp, "done_in_memory", done,
	    "approvals_pending", (int)json_object_size(rt->approvals),
	    "workers", rt->n_workers, "approval_ttl_s", (int)rt->approval_ttl_s,
	    "trace_healthy", wd_trace_healthy(rt->trace, NULL));
	pthread_mutex_unlock(&rt->mu);
	return o;
}

char *wd_rt_metrics(struct wd_rt *rt)
{
	struct wd_buf b = {0};
	int susp = 0, active = 0;
	pthread_mutex_lock(&rt->mu);
	for (struct wd_run *r = rt->runs; r; r = r->next) {
		susp += r->state == R_SUSPENDED;
		active += r->state == R_RUNNING || r->state == R_QUEUED;
	}
	size_t napp = json_object_size(rt->approvals);
	pthread_mutex_unlock(&rt->mu);
	struct wd_stream_stats st;
	wd_stream_stats(rt->events, &st);
	wd_buf_printf(
	    &b,
	    "# TYPE warden_runs_started_total counter\n"
	    "warden_runs_started_total %llu\n"
	    "# TYPE warden_runs_ended_total counter\n"
	    "warden_runs_ended_total %llu\n"
	    "# TYPE warden_runs_active gauge\nwarden_runs_active %d\n"
	    "# TYPE warden_runs_suspended gauge\nwarden_runs_suspended %d\n"
	    "# TYPE warden_approvals_pending gauge\n"
	    "warden_approvals_pending %zu\n"
	    "# TYPE warden_model_calls_total counter\n"
	    "warden_model_calls_total %llu\n"
	    "# TYPE warden_tool_calls_total counter\n"
	    "warden_tool_calls_total %llu\n"
	    "# TYPE warden_tool_refusals_total counter\n"
	    "warden_tool_refusals_total %llu\n"
	    "# TYPE warden_denials_total counter\n"
	    "warden_denials_total %llu\n"
	    "# TYPE warden_events_published_total counter\n"
	    "warden_events_published_total %llu\n"
	    "# TYPE warden_trace_healthy gauge\nwarden_trace_healthy %d\n"
	    "# TYPE warden_steps_total counter\nwarden_steps_total %llu\n"
	    "# TYPE warden_platform_overhead_seconds_total counter\n"
	    "warden_platform_overhead_seconds_total %.9f\n",
	    (unsigned long long)rt->m_runs_started,
	    (unsigned long long)rt->m_runs_ended, active, susp, napp,
	    (unsigned long long)rt->m_model_calls,
	    (unsigned long long)rt->m_tool_calls,
	    (unsigned long long)rt->m_refusals,
	    (unsigned long long)rt->m_denials, (unsigned long long)st.published,
	    wd_trace_healthy(rt->trace, NULL) ? 1 : 0,
	    (unsigned long long)rt->m_steps, (double)rt->m_overhead_ns / 1e9);
	if (rt->alert)
		wd_alert_metrics_render(rt->alert, &b);
	return b.data ? b.data : wd_strdup("");
}
