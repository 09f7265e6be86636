/* The runtime's shared state: callers, run records and stream lines,
 * snapshots of suspended runs, the run table and worker pool, open/close/
 * reload. A run's creation and its run_start are in run_create.c;
 * approvals (with TTL) are in approvals.c, crash recovery in
 * recover.c, stream cursors and the API's JSON views in views.c; the loop
 * itself is in loop.c. */
#include <curl/curl.h>
#include <malloc.h>
#include <pwd.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common/log.h"
#include "enforce/egress.h"
#include "events/landlock_audit.h"
#include "events/stream.h"
#include "trace/recw.h"
#include "gateway/gateway.h"
#include "policy/daemon_config.h"
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

/* Takes line (may be NULL: nothing to push). */
static void push_text_locked(struct wd_run *r, char *line, uint64_t seq)
{
	if (!line)
		return;
	if (r->n_lines == r->cap_lines) {
		r->cap_lines = r->cap_lines ? r->cap_lines * 2 : 32;
		r->lines = wd_realloc(r->lines, r->cap_lines * sizeof(char *));
		r->line_seq =
		    wd_realloc(r->line_seq, r->cap_lines * sizeof(uint64_t));
	}
	r->lines[r->n_lines] = line;
	r->line_seq[r->n_lines] = seq;
	r->n_lines++;
	pthread_cond_broadcast(&r->rt->ecood);
}

static uint64_t rec_seq(json_t *rec)
{
	return (uint64_t)json_integer_value(json_object_get(rec, "seq"));
}

void rt_push_line_locked(struct wd_run *r, json_t *rec)
{
	push_text_locked(r, json_dumps(rec, JSON_COMPACT), rec_seq(rec));
}

int rt_record(struct wd_run *r, json_t *rec, bool durable, struct wd_err *err)
{
	int rc = wd_trace_append(r->rt->trace, rec, durable, NULL, err);
	/* serialized before taking the daemon-wide lock */
	char *line = json_dumps(rec, JSON_COMPACT);
	pthread_mutex_lock(&r->rt->mu);
	push_text_locked(r, line, rec_seq(rec));
	pthread_mutex_unlock(&r->rt->mu);
	return rc;
}

int rt_record_w(struct wd_run *r, struct wd_recw *w, bool durable,
		struct wd_trace_head *head, struct wd_err *err)
{
	struct wd_trace_head h = {0};
	int rc = wd_trace_append_w(r->rt->trace, w, durable, &h, err);
	if (head)
		*head = h;
	if (rc == -EINVAL || rc == -EALREADY)
		return rc; /* nothing valid to show */
	/* the line followers get, as rt_record's: the record's JSON (with
	 * seq, ts and prev once appended) even when the store failed */
	char *line;
	if (rc) {
		size_t n;
		const char *body = wd_recw_body(w, &n);
		struct wd_buf b = {0};
		wd_buf_append(&b, body, n);
		wd_buf_append(&b, "}", 2);
		line = b.data;
	} else {
		line = wd_recw_line(w, &h);
	}
	pthread_mutex_lock(&r->rt->mu);
	push_text_locked(r, line, h.seq);
	pthread_mutex_unlock(&r->rt->mu);
	return rc;
}

/* ---- snapshots (suspended runs survive a restart) ---- */

char *rt_run_path(struct wd_rt *rt, const char *id, const char *ext)
{
	return wd_asprintf("%s/%s.%s", rt->runs_dir, id, ext);
}

static json_t *snapshot_json(struct wd_run *r)
{
	json_t *s = json_pack(
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
	/* usage of the run's sub-agents (charged to its bounds) */
	json_object_set_new(
	    s, "sub",
	    json_pack("{s:i,s:i,s:I,s:I,s:f,s:O}", "runs", r->sub_runs, "steps",
		      r->sub_steps, "input_tokens",
		      (json_int_t)r->sub_in_tokens, "output_tokens",
		      (json_int_t)r->sub_out_tokens, "cost_usd", r->sub_cost,
		      "children", r->children));
	json_object_set_new(s, "model_calls", json_integer(r->model_calls));
	/* a fleet run stays fenced across a restart: the fleet holding it
	 * no more, its next step ends it (runtime.h wd_rt_set_fence_hook) */
	json_object_set_new(s, "fenced", json_boolean(r->fenced));
	/* a replay's gate lives in memory only: recover.c must not bring it
	 * back as an ordinary run (its external tools would run live) */
	if (r->replay)
		json_object_set_new(s, "replay_of",
				    rt_replay_of_json(r->replay));
	return s;
}

/* Called with rt->mu held. Written atomically (tmp + rename + fsync). */
int rt_save_snapshot(struct wd_run *r)
{
	json_t *s = snapshot_json(r);
	cleanup_free char *text = json_dumps(s, JSON_COMPACT);
	json_decref(s);
	cleanup_free char *path = rt_run_path(r->rt, r->id, "json");
	cleanup_free char *tmp = rt_run_path(r->rt, r->id, "json.tmp");
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
	cleanup_free char *path = rt_run_path(r->rt, r->id, "json");
	unlink(path);
}

/* ---- runs ---- */

static void run_free(struct wd_run *r)
{
	wd_pset_unref(r->ps);
	free(r->agent_name);
	free(r->team);
	wd_pset_strv_free(r->scopes, r->n_scopes);
	free(r->task);
	json_decref(r->msgs);
	wd_buf_free(&r->ptext);
	free(r->ptok);
	json_decref(r->pending);
	json_decref(r->done);
	json_decref(r->children);
	rt_replay_free(r->replay);
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

struct wd_run *rt_find_run_locked(struct wd_rt *rt, const char *id)
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
	/* Broadcast, not signal: the approval-TTL thread also waits on
	 * qcond, and a signal that woke it instead of a worker left the run
	 * queued until the next enqueue (seen: 30 s). */
	pthread_cond_broadcast(&rt->qcond);
}

/* A finished run stays in memory for its views and streams (ids, usage,
 * status, its lines) until DONE_KEEP newer ones have finished; what only
 * a live run needs goes as soon as it is done: the conversation, the
 * pending calls, the repeated-call table, the replay state and its
 * policy set (a replaced set is freed when its last run ends, not 256
 * runs later). Returns the set's reference for the caller to drop outside
 * the lock; NULL if the run is not done or was shed already. */
struct wd_pset *rt_run_shed_locked(struct wd_run *r)
{
	if (r->state != R_DONE || !r->ps)
		return NULL;
	json_decref(r->msgs);
	r->msgs = NULL;
	wd_buf_free(&r->ptext);
	free(r->ptok);
	r->ptok = NULL;
	r->pn = 0;
	json_decref(r->pending);
	r->pending = NULL;
	json_decref(r->done);
	r->done = NULL;
	rt_replay_free(r->replay);
	r->replay = NULL;
	struct wd_pset *ps = r->ps;
	r->ps = NULL;
	r->agent = NULL;
	return ps;
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
	/* cost_usd and gen_ai.usage.* above are the run's own (each dollar
	 * is attributed once, to the agent that spent it); `total` adds its
	 * sub-agents' runs, which its bounds were checked against */
	json_object_set_new(rec, "total", rt_totals_json(r, r->step));
	if (json_array_size(r->children))
		json_object_set(rec, "subagent_runs", r->children);
	if (r->parent_id[0]) {
		json_object_set_new(rec, "parent_run_id",
				    json_string(r->parent_id));
		json_object_set_new(rec, "parent_step",
				    json_integer(r->parent_step));
	}
	if (r->replay)
		json_object_set_new(rec, "replay",
				    rt_replay_summary(r, status, text));
	/* In the segment file before the run is reported finished (a daemon
	 * crash keeps it); on disk with the next group commit, within a
	 * second: an fdatasync here cost each run ~1 ms of its worker. What
	 * must be durable before it acts, tool_attempt, still is. */
	struct wd_err err = {0};
	uint64_t seq = 0;
	int rc = wd_trace_append(rt->trace, rec, false, &seq, &err);
	if (!rc && (rc = wd_trace_wait_written(rt->trace, seq)))
		wd_err_set(&err, rc, "%s", strerror(-rc));
	bool unrecorded = rc != 0;
	if (unrecorded) {
		/* the run stays recoverable: its marker is kept and says
		 * how it ended (recover.c); the record waits for the store */
		json_t *mk =
		    json_pack("{s:s,s:{s:s,s:s,s:s}}", "agent", r->agent->name,
			      "end", "status", status, "reason",
			      reason ? reason : "", "error", err.msg);
		int mrc = rt_marker_write(rt, r->id, mk, false);
		json_decref(mk);
		wd_error("run %s: run_end not recorded (%s); kept to be "
			 "recorded when the trace store recovers%s",
			 r->id, err.msg, mrc ? ", its marker not updated" : "");
		json_t *late =
		    json_pack("{s:s,s:I}", "error", err.msg, "ended_wall_ns",
			      (json_int_t)wd_wall_ns());
		json_object_set_new(rec, "recorded_late", late);
		json_object_del(rec, "seq");
		json_object_del(rec, "ts");
		json_object_del(rec, "prev");
	}
	char *line = json_dumps(rec, JSON_COMPACT);
	pthread_mutex_lock(&rt->mu);
	if (unrecorded)
		rt_unended_add_locked(rt, r->id, rec);
	json_decref(rec);
	push_text_locked(r, line, seq);
	snprintf(r->status, sizeof(r->status), "%s", status);
	snprintf(r->stop_reason, sizeof(r->stop_reason), "%s",
		 reason ? reason : "");
	free(r->final_text);
	r->final_text = text ? wd_strdup(text) : NULL;
	r->state = R_DONE;
	rt_m_add(r, WD_M_RUNS_ENDED, 1, status, NULL, NULL);
	if (r->stop_bound[0] && !strcmp(status, "stopped"))
		rt_m_add(r, WD_M_BUDGET_STOPS, 1, r->stop_bound, NULL, NULL);
	/* its "per run" rate-limit windows end with it */
	wd_ratelimit_forget(rt->rl, r->id);
	rt->trim_pending = true;
	rt_drop_snapshot(r);
	if (!unrecorded) {
		cleanup_free char *active = rt_run_path(rt, r->id, "active");
		unlink(active);
	}
	pthread_cond_broadcast(&rt->ecood);
	trim_done_locked(rt);
	pthread_mutex_unlock(&rt->mu);
	wd_info("run %s: %s%s%s", r->id, status, reason ? ": " : "",
		reason ? reason : "");
	/* under its own lock, held for the call: the hook's owner clears it
	 * (wd_rt_set_run_end_hook) before freeing what arg points to, and
	 * that waits for a call in progress */
	pthread_mutex_lock(&rt->end_hook_mu);
	if (rt->end_hook) {
		struct wd_rt_run_end e = {
		    .run_id = r->id,
		    .status = status,
		    .reason = reason,
		    .output = r->hash_only ? NULL : text,
		    .steps = r->step,
		    .cost_usd = r->cost,
		};
		rt->end_hook(rt->end_hook_arg, &e);
	}
	pthread_mutex_unlock(&rt->end_hook_mu);
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
		struct wd_pset *shed = rt_run_shed_locked(r);
		rt_run_unref_locked(r);
		if (shed) {
			pthread_mutex_unlock(&rt->mu);
			wd_pset_unref(shed);
			/* a replaced set whose last run this was */
			rt_reap_retired(rt);
			pthread_mutex_lock(&rt->mu);
		}
	}
	pthread_mutex_unlock(&rt->mu);
	return NULL;
}

/* ---- open/close/reload ---- */

/* The BPF side's losses (arg: which one, enum wd_stream_lost_src), read
 * from the egress object whose ring buffer wardend's calls drain
 * (events/bpf_route.h): reserve failures in the kernel, records that
 * failed validation, records no live call owned. */
static int bpf_loss_probe(void *arg, uint64_t *total)
{
	struct wd_egress *e = wd_egress_shared_peek();
	struct wd_egress_loss l;
	if (!e)
		return -ENOENT; /* no call yet: nothing consumed, none lost */
	int rc = wd_egress_loss(e, &l);
	switch ((enum wd_stream_lost_src)(intptr_t)arg) {
	case WD_LOST_BPF_RINGBUF:
		*total = l.ringbuf;
		return rc;
	case WD_LOST_BPF_INVALID:
		*total = l.invalid;
		return 0;
	case WD_LOST_BPF_UNROUTED:
		*total = l.dropped;
		return 0;
	default:
		return -EINVAL;
	}
}

/* The Landlock audit readers' queue overflows (events/landlock_audit.h). */
static int landlock_loss_probe(void *arg, uint64_t *total)
{
	(void)arg;
	*total = wd_landlock_audit_lost_total();
	return 0;
}

int wd_rt_open(const struct wd_rt_opts *o, struct wd_rt **out,
	       struct wd_err *err)
{
	struct wd_rt *rt = wd_calloc(1, sizeof(*rt));
	int rc;
	rt->state_dir = wd_strdup(o->state_dir);
	rt->policy_dir = wd_strdup(o->policy_dir);
	rt->runs_dir = wd_asprintf("%s/runs", o->state_dir);
	rt->approval_ttl_s = o->approval_ttl_s; /* 0: the agent's */
	rt->webhook = o->webhook_url ? wd_strdup(o->webhook_url) : NULL;
	rt->approvals = json_object();
	rt->unended = json_object();
	rt->reads_noted = json_object();
	rt->rl = wd_ratelimit_new();
	rt->events = wd_stream_new(65536);
	rt->metrics = wd_metrics_new(0);
	for (int i = WD_LOST_BPF_RINGBUF; i <= WD_LOST_BPF_UNROUTED; i++)
		wd_stream_set_loss_probe(rt->events, (enum wd_stream_lost_src)i,
					 bpf_loss_probe, (void *)(intptr_t)i);
	wd_stream_set_loss_probe(rt->events, WD_LOST_LANDLOCK_AUDIT,
				 landlock_loss_probe, NULL);
	pthread_mutex_init(&rt->mu, NULL);
	pthread_mutex_init(&rt->end_hook_mu, NULL);
	/* writers first: clearing the hook is not starved by runs that keep
	 * asking */
	pthread_rwlockattr_t fa;
	pthread_rwlockattr_init(&fa);
	pthread_rwlockattr_setkind_np(
	    &fa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&rt->fence_mu, &fa);
	pthread_rwlockattr_destroy(&fa);
	pthread_cond_init(&rt->qcond, NULL);
	pthread_cond_init(&rt->ecood, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if ((rc = wd_mkdir_p(rt->runs_dir, 0700))) {
		wd_err_set(err, rc, "cannot create %s", rt->runs_dir);
		goto fail;
	}
	if ((rc = wd_pset_load(rt->policy_dir, &rt->ps, err)))
		goto fail;
	rt_m_init_policy(rt, rt->ps);
	struct wd_trace_opts to = {.redact_regexes = o->redact_regexes,
				   .otlp = o->otlp};
	if ((rc = wd_trace_open(rt->state_dir, &to, &rt->trace, err)))
		goto fail;
	rt->otlp = o->otlp;
	rt->fleet = o->fleet;
	/* what calls killed with the previous daemon left behind */
	int swept = wd_sandbox_sweep();
	if (swept > 0)
		wd_info("removed %d leftovers of interrupted tool calls",
			swept);
	struct wd_pool_config pc = {.size = o->warm_pool};
	if (o->pool)
		pc = *o->pool;
	if (pc.size > 0) {
		rt->pool = wd_pool_new(&pc);
		if (rt->pool)
			wd_sandbox_use_pool(rt->pool);
		else
			wd_log_errno(WD_LOG_WARN, -errno,
				     "warm pool: cold starts only");
	}
	rt_recover(rt);
	if (o->alert && wd_alert_new(o->alert, rt->events, &rt->alert, err)) {
		rc = err ? err->code : -EINVAL;
		goto fail;
	}
	rt->n_workers = o->workers > 0 ? o->workers : 8;
	rt->workers = wd_calloc((size_t)rt->n_workers, sizeof(pthread_t));
	for (int i = 0; i < rt->n_workers; i++)
		pthread_create(&rt->workers[i], NULL, worker, rt);
	pthread_create(&rt->ttl_thread, NULL, rt_ttl_thread, rt);
	*out = rt;
	return 0;
fail:
	/* the trace store feeds the caller's exporter: closed here, before
	 * the caller stops it */
	if (rt->pool) {
		wd_sandbox_use_pool(NULL);
		wd_pool_free(rt->pool);
	}
	wd_alert_free(rt->alert);
	wd_trace_close(rt->trace);
	wd_pset_unref(rt->ps);
	wd_ratelimit_free(rt->rl);
	wd_stream_free(rt->events);
	wd_metrics_free(rt->metrics);
	json_decref(rt->approvals);
	json_decref(rt->unended);
	json_decref(rt->reads_noted);
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
	wd_metrics_free(rt->metrics);
	json_decref(rt->approvals);
	json_decref(rt->unended);
	json_decref(rt->reads_noted);
	free(rt->workers);
	free(rt->state_dir);
	free(rt->policy_dir);
	free(rt->runs_dir);
	free(rt->webhook);
	free(rt);
}

/* Without rt->mu: the event stream asks per event (server.c), which its
 * per-run cache exists to keep off the runtime's lock. */
uint64_t wd_rt_policy_gen(struct wd_rt *rt)
{
	return __atomic_load_n(&rt->ps_gen, __ATOMIC_ACQUIRE);
}

int wd_rt_reload(struct wd_rt *rt, struct wd_err *err)
{
	struct wd_pset *ps = NULL;
	/* daemon.yaml applies at the next start (daemon_config.h), but a
	 * reload checks it: a bad file must not wait for the restart to be
	 * found, and fails the reload like any other policy file */
	struct wd_daemon_config *dc = NULL;
	int rc = wd_daemon_config_load_dir(rt->policy_dir, &dc, err);
	wd_daemon_config_free(dc);
	if (rc)
		return rc;
	rc = wd_pset_load(rt->policy_dir, &ps, err);
	if (rc)
		return rc;
	rt_m_init_policy(rt, ps);
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *old = rt->ps;
	rt->ps = ps;
	__atomic_add_fetch(&rt->ps_gen, 1, __ATOMIC_RELEASE);
	/* streams waiting for lines judge their reader again (views.c) */
	pthread_cond_broadcast(&rt->ecood);
	if (rt->pool) {
		rt->retired =
		    wd_realloc(rt->retired, (size_t)(rt->n_retired + 1) *
						sizeof(*rt->retired));
		rt->retired[rt->n_retired++] = old;
		old = NULL;
	}
	rt->trim_pending = true;
	pthread_mutex_unlock(&rt->mu);
	wd_pset_unref(old); /* runs hold their own reference */
	rt_reap_retired(rt);
	return 0;
}

void rt_reap_retired(struct wd_rt *rt)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset **dead = NULL;
	int n = 0;
	for (int i = 0; i < rt->n_retired;) {
		struct wd_pset *p = rt->retired[i];
		/* only this list holds it: no run can take a new reference
		 * (runs reference the current set, or the one they hold) */
		if (__atomic_load_n(&p->refs, __ATOMIC_ACQUIRE) == 1) {
			dead =
			    wd_realloc(dead, (size_t)(n + 1) * sizeof(*dead));
			dead[n++] = p;
			rt->retired[i] = rt->retired[--rt->n_retired];
		} else {
			i++;
		}
	}
	if (!rt->n_retired) {
		free(rt->retired);
		rt->retired = NULL;
	}
	pthread_mutex_unlock(&rt->mu);
	/* the warm pool's keys point at the set's manifests: dropped (and
	 * the pool done reading them) before they are freed */
	for (int i = 0; i < n; i++) {
		for (int t = 0; t < dead[i]->n_tools; t++)
			wd_pool_forget(rt->pool, dead[i]->tools[t]);
		wd_pset_unref(dead[i]);
	}
	free(dead);
}

/* glibc keeps freed memory in its arenas (one per thread that ever
 * allocated): given back when the daemon is idle, at most every 2 s, so
 * RSS follows what is live (daemon_memory.sh). */
void rt_trim_idle_locked(struct wd_rt *rt)
{
	if (!rt->trim_pending || wd_now_ns() - rt->trim_last_ns < 2000000000ull)
		return;
	for (struct wd_run *r = rt->runs; r; r = r->next)
		if (r->state == R_RUNNING || r->state == R_QUEUED)
			return;
	rt->trim_pending = false;
	rt->trim_last_ns = wd_now_ns();
	pthread_mutex_unlock(&rt->mu);
	wd_trace_release_memory(rt->trace);
	malloc_trim(0);
	pthread_mutex_lock(&rt->mu);
}

struct wd_trace *wd_rt_trace(struct wd_rt *rt)
{
	return rt->trace;
}

struct wd_stream *wd_rt_events(struct wd_rt *rt)
{
	return rt->events;
}
