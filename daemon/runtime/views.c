/* Stream cursors over a run's records and the API's JSON views: run info,
 * run list, cost, status and Prometheus metrics. */
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "enforce/egress.h"
#include "events/stream.h"
#include "gateway/gateway.h"
#include "sandbox/pool.h"
#include "trace/otlp.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

/* ---- streams ---- */

struct wd_rt_stream {
	struct wd_rt *rt;
	struct wd_run *run; /* NULL: replaying a finished run from the trace */
	json_t *recs;	    /* when run == NULL */
	size_t idx;
	uint64_t since;
	/* who reads, and the policy generation their access was judged
	 * under: a reload (users.yaml changed) judges them again */
	struct wd_caller who;
	uint64_t gen;
};

struct wd_rt_stream *wd_rt_stream_open(struct wd_rt *rt,
				       const struct wd_caller *c,
				       const char *run_id, uint64_t since_seq,
				       struct wd_err *err)
{
	struct wd_rt_stream *s = wd_calloc(1, sizeof(*s));
	s->rt = rt;
	s->since = since_seq;
	s->who = *c;
	int rc = 0;
	/* a run's steps carry its task, arguments and answers: read by
	 * those who may read its trace */
	struct rt_view_read v = {.run_id = run_id,
				 .what = "stream",
				 .since = since_seq,
				 .run_uid = -1};
	json_t *shown = NULL; /* the records handed out now, when payload */
	char team[64] = "";
	pthread_mutex_lock(&rt->mu);
	s->gen = rt->ps_gen;
	s->run = rt_find_run_locked(rt, run_id);
	bool held = false;
	if (s->run && !(rc = rt_check_read_locked(rt, c, s->run, err))) {
		s->run->refs++;
		held = true;
		struct wd_run *r = s->run;
		v.run_uid = r->caller.uid;
		v.step = r->step;
		v.follow = r->state != R_DONE;
		wd_strlcpy(team, r->team, sizeof(team));
		/* a hash_only run's records hold no payload; the run's own
		 * user's reads are not recorded */
		if (!r->hash_only && c->uid != r->caller.uid) {
			shown = json_array();
			for (size_t i = 0; i < r->n_lines; i++)
				if (!since_seq || r->line_seq[i] > since_seq)
					json_array_append_new(
					    shown, json_string(r->lines[i]));
		}
	}
	pthread_mutex_unlock(&rt->mu);
	if (!s->run) {
		rc = wd_trace_run_records(rt->trace, run_id, &s->recs, err);
		if (!rc)
			rc = rt_check_read_records(rt, c, run_id, s->recs, err);
		else
			rc = wd_err_set(err, -ENOENT, "no run '%s'", run_id);
		json_t *st = rt_recs_first(s->recs, "run_start");
		json_t *tr = json_object_get(st, "trace");
		const char *p =
		    json_string_value(json_object_get(tr, "payloads"));
		if (!rc && p && !strcmp(p, "hash_only"))
			rt_hash_old_targets(s->recs);
		if (!rc && !(p && !strcmp(p, "hash_only"))) {
			json_t *u = json_object_get(st, "uid");
			v.run_uid =
			    json_is_integer(u) ? json_integer_value(u) : -1;
			wd_strlcpy(
			    team,
			    json_string_value(json_object_get(st, "team"))
				?: "",
			    sizeof(team));
			shown = json_array();
			size_t i;
			json_t *x;
			json_array_foreach(s->recs, i, x)
			{
				json_int_t q = json_integer_value(
				    json_object_get(x, "seq"));
				if (!since_seq || (uint64_t)q > since_seq)
					json_array_append(shown, x);
				v.step = json_integer_value(
				    json_object_get(x, "step"));
			}
		}
	}
	if (!rc && shown) {
		/* lines (a live run) are JSON text: the fields they hold */
		size_t i;
		json_t *x;
		json_array_foreach(shown, i, x)
		{
			if (!json_is_string(x))
				continue;
			json_t *rec = json_loads(json_string_value(x), 0, NULL);
			json_array_set_new(shown, i, rec ? rec : json_object());
		}
		json_t *last =
		    json_array_get(shown, json_array_size(shown) - 1);
		char content[48];
		snprintf(
		    content, sizeof(content), "%lld%s",
		    (long long)json_integer_value(json_object_get(last, "seq")),
		    v.follow ? "+" : "");
		v.team = team;
		v.content = content;
		rc = rt_note_stream_read(rt, c, &v, shown, err);
	}
	json_decref(shown);
	if (rc) {
		if (held) {
			pthread_mutex_lock(&rt->mu);
			rt_run_unref_locked(s->run);
			pthread_mutex_unlock(&rt->mu);
		}
		json_decref(s->recs);
		free(s);
		errno = -rc;
		return NULL;
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
	       !rt->stopping && s->gen == rt->ps_gen) {
		if (pthread_cond_timedwait(&rt->ecood, &rt->mu, &ts))
			break;
	}
	/* the policy was reloaded since the reader's access was judged:
	 * judged again before another line leaves; a reader who lost it
	 * gets one line saying so and the end of the stream */
	if (s->gen != rt->ps_gen) {
		s->gen = rt->ps_gen;
		struct wd_err err = {0};
		if (rt_check_read_locked(rt, &s->who, s->run, &err)) {
			pthread_mutex_unlock(&rt->mu);
			json_t *o =
			    json_pack("{s:s,s:s,s:s}", "type", "access_revoked",
				      "run_id", s->run->id, "error", err.msg);
			char *l = json_dumps(o, JSON_COMPACT);
			if (l)
				wd_buf_printf(out, "%s\n", l);
			free(l);
			json_decref(o);
			return 0;
		}
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

static json_t *run_view_locked(struct wd_run *r, bool with_output)
{
	json_t *o = json_pack(
	    "{s:s,s:s,s:s,s:s,s:s,s:i,s:I,s:I,s:f}", "run_id", r->id, "agent",
	    r->agent_name, "team", r->team, "user", r->caller.user, "state",
	    state_name(r->state), "steps", r->step, "input_tokens",
	    (json_int_t)r->in_tokens, "output_tokens",
	    (json_int_t)r->out_tokens, "cost_usd", r->cost);
	/* with sub-agents: the usage of the whole tree, and the links */
	json_object_set_new(o, "total", rt_totals_json(r, r->step));
	if (json_array_size(r->children))
		json_object_set(o, "subagent_runs", r->children);
	if (r->parent_id[0]) {
		json_object_set_new(o, "parent_run_id",
				    json_string(r->parent_id));
		json_object_set_new(o, "parent_step",
				    json_integer(r->parent_step));
	}
	if (r->state == R_DONE) {
		json_object_set_new(o, "status", json_string(r->status));
		if (r->stop_reason[0])
			json_object_set_new(o, "reason",
					    json_string(r->stop_reason));
		/* a hash_only run keeps no payload anywhere a reader
		 * sees it: its trace has no output either */
		if (r->final_text && !r->hash_only && with_output)
			json_object_set_new(o, "output",
					    json_string(r->final_text));
	}
	return o;
}

/* A view holding the run's output, read by someone other than its user:
 * recorded first (rt_note_view_read), else not handed out. */
static json_t *note_output_read(struct wd_rt *rt, const struct wd_caller *c,
				json_t *o, struct rt_view_read *v,
				struct wd_err *err)
{
	const char *out = json_string_value(json_object_get(o, "output"));
	if (!out)
		return o;
	char h[WD_TRACE_REF_LEN];
	wd_trace_ref_redacted(rt->trace, out, strlen(out), h);
	v->what = "run_view";
	v->content = h;
	v->returned = o;
	int rc = rt_note_view_read(
	    rt, c, v, json_pack("[{s:s,s:s}]", "field", "output", "hash", h),
	    err);
	if (rc) {
		json_decref(o);
		errno = -rc;
		return NULL;
	}
	return o;
}

json_t *wd_rt_fleet_output_read(struct wd_rt *rt, const struct wd_caller *c,
				json_t *o, const char *run_id, int64_t run_uid,
				const char *team, const char *run_node,
				struct wd_err *err)
{
	struct rt_view_read v = {.run_id = run_id,
				 .run_uid = run_uid,
				 .team = team,
				 .run_node = run_node};
	/* the step the run ended at, as a local view's read names its step */
	v.step = json_integer_value(json_object_get(o, "steps"));
	return note_output_read(rt, c, o, &v, err);
}

json_t *wd_rt_run_info(struct wd_rt *rt, const struct wd_caller *c,
		       const char *run_id, struct wd_err *err)
{
	int rc = 0;
	json_t *o = NULL, *recs = NULL;
	struct rt_view_read v = {.run_id = run_id, .run_uid = -1};
	char team[64] = "";
	pthread_mutex_lock(&rt->mu);
	struct wd_run *r = rt_find_run_locked(rt, run_id);
	if (r && !(rc = rt_check_read_locked(rt, c, r, err))) {
		o = run_view_locked(r, true);
		v.run_uid = r->caller.uid;
		v.step = r->step;
		wd_strlcpy(team, r->team, sizeof(team));
	}
	pthread_mutex_unlock(&rt->mu);
	v.team = team;
	if (o)
		return note_output_read(rt, c, o, &v, err);
	if (rc) {
		errno = -rc;
		return NULL;
	}
	/* a run from before this daemon started: from the trace, read
	 * once */
	if (wd_trace_run_records(rt->trace, run_id, &recs, err))
		rc = wd_err_set(err, -ENOENT, "no run '%s'", run_id);
	else
		rc = rt_check_read_records(rt, c, run_id, recs, err);
	if (rc) {
		json_decref(recs);
		errno = -rc;
		return NULL;
	}
	json_t *start = rt_recs_first(recs, "run_start");
	json_t *end = rt_recs_first(recs, "run_end");
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
		const char *keys[] = {"total", "subagent_runs", "parent_run_id",
				      "parent_step"};
		for (size_t i = 0; i < WD_ARRAY_SIZE(keys); i++)
			if (json_object_get(end, keys[i]))
				json_object_set(o, keys[i],
						json_object_get(end, keys[i]));
	}
	json_t *u = json_object_get(start, "uid");
	v.run_uid = json_is_integer(u) ? json_integer_value(u) : -1;
	wd_strlcpy(team,
		   json_string_value(json_object_get(start, "team")) ?: "",
		   sizeof(team));
	v.step = json_integer_value(json_object_get(end, "steps"));
	json_decref(recs);
	return note_output_read(rt, c, o, &v, err);
}

json_t *wd_rt_runs_list(struct wd_rt *rt, const struct wd_caller *c)
{
	json_t *a = json_array();
	pthread_mutex_lock(&rt->mu);
	/* the list shows each run's output to its own user only: anyone
	 * else reads it through the run's view, where the read is
	 * recorded */
	for (struct wd_run *r = rt->runs; r; r = r->next)
		if (rt_may_read_run_locked(rt, c, r))
			json_array_append_new(
			    a, run_view_locked(r, c->uid == r->caller.uid));
	pthread_mutex_unlock(&rt->mu);
	return a;
}

json_t *wd_rt_cost(struct wd_rt *rt, const struct wd_caller *c, const char *by,
		   uint64_t since_ns, struct wd_err *err)
{
	return wd_rt_cost_with(rt, c, by, since_ns, NULL, err);
}

json_t *wd_rt_cost_with(struct wd_rt *rt, const struct wd_caller *c,
			const char *by, uint64_t since_ns, json_t *extra,
			struct wd_err *err)
{
	/* ended runs from the index; runs in progress from memory; of
	 * each, only those the caller may read */
	struct wd_trace_query q = {.since_ns = since_ns};
	json_t *runs = NULL;
	if (rt_readable_runs(rt, c, &q, &runs, err))
		return NULL;
	json_t *groups = json_object();
	json_t *seen = json_object();
	pthread_mutex_lock(&rt->mu);
	for (struct wd_run *r = rt->runs; r; r = r->next) {
		if (r->started_wall < since_ns ||
		    !rt_may_read_run_locked(rt, c, r))
			continue;
		json_array_append_new(
		    runs,
		    json_pack("{s:s,s:s,s:s,s:s,s:f,s:I,s:I,s:I,s:b}", "run_id",
			      r->id, "team", r->team, "agent", r->agent_name,
			      "user", r->caller.user, "cost_usd", r->cost,
			      "input_tokens", (json_int_t)r->in_tokens,
			      "cached_tokens", (json_int_t)r->cached_tokens,
			      "output_tokens", (json_int_t)r->out_tokens,
			      "_live", 1));
	}
	pthread_mutex_unlock(&rt->mu);
	json_array_extend(runs, extra);
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
			g = json_pack("{s:s,s:f,s:i,s:I,s:I,s:I}", by, k,
				      "cost_usd", 0.0, "runs", 0,
				      "input_tokens", (json_int_t)0,
				      "cached_tokens", (json_int_t)0,
				      "output_tokens", (json_int_t)0);
			json_object_set_new(groups, k, g);
		}
		double usd = json_number_value(json_object_get(x, "cost_usd"));
		total += usd;
		json_object_set_new(g, "cost_usd",
				    json_real(json_number_value(json_object_get(
						  g, "cost_usd")) +
					      usd));
		json_object_set_new(
		    g, "runs",
		    json_integer(
			json_integer_value(json_object_get(g, "runs")) + 1));
		/* cached_tokens: the part of input_tokens a prompt cache
		 * served (billed at the cache-read price) */
		const char *tk[] = {"input_tokens", "output_tokens",
				    "cached_tokens"};
		for (int t = 0; t < 3; t++)
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
	json_t *o =
	    json_pack("{s:s,s:s,s:i,s:i,s:{s:i,s:i,s:i,s:i},s:i,s:i,s:i}",
		      "policy_dir", rt->policy_dir, "state_dir", rt->state_dir,
		      "tools", rt->ps->n_tools, "agents", rt->ps->n_agents,
		      "runs", "queued", q, "running", run, "awaiting_approval",
		      susp, "done_in_memory", done, "approvals_pending",
		      (int)json_object_size(rt->approvals), "workers",
		      rt->n_workers, "approval_ttl_s", (int)rt->approval_ttl_s);
	json_object_set_new(
	    o, "runs_end_unrecorded",
	    json_integer((json_int_t)json_object_size(rt->unended)));
	/* the gateway's circuit breakers (a reload builds a new gateway:
	 * its breakers start closed) */
	if (rt->ps->gw)
		json_object_set_new(o, "model_routes",
				    wd_gateway_breakers_json(rt->ps->gw));
	pthread_mutex_unlock(&rt->mu);
	/* one reading for both fields (and the same as /healthz and the
	 * warden_trace_healthy gauge): wd_rt_health */
	struct wd_trace_health h;
	char why[256] = "";
	wd_trace_health(rt->trace, &h);
	if (h.error)
		wd_rt_health_why(&h, why, sizeof(why));
	json_object_set_new(o, "trace_healthy", json_boolean(!h.error));
	json_object_set_new(o, "trace",
			    json_pack("{s:b,s:s,s:I,s:I}", "healthy", !h.error,
				      "reason", why, "failures",
				      (json_int_t)h.failures, "recoveries",
				      (json_int_t)h.recoveries));
	/* the pool is set at open and freed at close only: no lock needed */
	json_t *pool = json_null();
	if (rt->pool) {
		struct wd_pool_stats ps;
		wd_pool_stats(rt->pool, &ps);
		pool = wd_pool_stats_json(&ps);
	}
	json_object_set_new(o, "warm_pool", pool);
	return o;
}

/* Each model route's circuit breaker: open (1) means later calls skip
 * it and go straight to the next route. Providers and models come from
 * gateway.yaml (bounded by policy). */
static void route_metrics(json_t *routes, struct wd_buf *b)
{
	static const struct {
		const char *name, *type, *help;
	} f[] = {
	    {"warden_model_route_open", "gauge",
	     "1 while the route's circuit breaker is open."},
	    {"warden_model_route_failures", "gauge",
	     "Consecutive failures of the route."},
	    {"warden_model_route_opened_total", "counter",
	     "Times the route's circuit breaker opened."},
	};
	for (size_t k = 0; k < WD_ARRAY_SIZE(f); k++) {
		wd_metrics_family(b, f[k].name, f[k].type, f[k].help);
		size_t i;
		json_t *r;
		json_array_foreach(routes, i, r)
		{
			const char *p =
			    json_string_value(json_object_get(r, "provider"));
			const char *m =
			    json_string_value(json_object_get(r, "model"));
			const char *st =
			    json_string_value(json_object_get(r, "state"));
			long long v = k == 0 ? (st && strcmp(st, "closed") != 0)
				      : k == 1
					  ? (long long)json_integer_value(
						json_object_get(r, "failures"))
					  : (long long)json_integer_value(
						json_object_get(r, "opened"));
			wd_buf_printf(b, "%s{", f[k].name);
			wd_metrics_label(b, "provider", p ? p : "", true);
			wd_metrics_label(b, "model", m ? m : "", false);
			wd_buf_printf(b, "} %lld\n", v);
		}
	}
}

/* The tier-3 warm pool: a miss (pool empty, shape new, tenant over its
 * quota) is a cold start. */
static void pool_metrics(struct wd_pool *p, struct wd_buf *b)
{
	struct wd_pool_stats s;
	wd_pool_stats(p, &s);
	static const char *const c[] = {
	    "hits",    "misses", "quota_misses", "spawned",    "spawn_failures",
	    "expired", "used",	 "evicted_idle", "evicted_cap"};
	static const char *const ch[] = {
	    "Tier-3 calls served by a warm sandbox.",
	    "Tier-3 calls that found no warm sandbox (cold starts).",
	    "Cold starts because the tenant was over its pool quota.",
	    "Warm sandboxes started.",
	    "Warm sandboxes that failed to start.",
	    "Ready sandboxes replaced after idle_s.",
	    "Warm sandboxes handed to a call.",
	    "Pool keys dropped after key_idle_s unused.",
	    "Pool keys evicted by max_keys."};
	const uint64_t cv[] = {s.hits,	  s.misses,	    s.quota_misses,
			       s.spawned, s.spawn_failures, s.expired,
			       s.used,	  s.evicted_idle,   s.evicted_cap};
	for (size_t i = 0; i < WD_ARRAY_SIZE(c); i++)
		wd_buf_printf(b,
			      "# HELP warden_pool_%s_total %s\n"
			      "# TYPE warden_pool_%s_total counter\n"
			      "warden_pool_%s_total %llu\n",
			      c[i], ch[i], c[i], c[i],
			      (unsigned long long)cv[i]);
	static const char *const g[] = {"ready", "spawning", "in_use", "keys"};
	static const char *const gh[] = {
	    "Warm sandboxes ready.", "Warm sandboxes starting.",
	    "Warm sandboxes in use by a call.", "Call shapes the pool holds."};
	const int gv[] = {s.ready, s.spawning, s.in_use, s.keys};
	for (size_t i = 0; i < WD_ARRAY_SIZE(g); i++)
		wd_buf_printf(b,
			      "# HELP warden_pool_%s %s\n"
			      "# TYPE warden_pool_%s gauge\n"
			      "warden_pool_%s %d\n",
			      g[i], gh[i], g[i], g[i], gv[i]);
}

/* The live OTLP export: best effort, so what it dropped is counted. */
static void otlp_metrics(struct wd_otlp *o, struct wd_buf *b)
{
	struct wd_otlp_stats s;
	wd_otlp_stats(o, &s);
	static const char *const c[] = {"queued", "sent", "dropped", "failed"};
	static const char *const ch[] = {
	    "GenAI spans queued for OTLP export.",
	    "GenAI spans the collector accepted.",
	    "GenAI spans dropped (queue full).",
	    "GenAI spans given up on after retries."};
	const uint64_t cv[] = {s.queued, s.sent, s.dropped, s.failed};
	for (size_t i = 0; i < WD_ARRAY_SIZE(c); i++)
		wd_buf_printf(b,
			      "# HELP warden_otlp_spans_%s_total %s\n"
			      "# TYPE warden_otlp_spans_%s_total counter\n"
			      "warden_otlp_spans_%s_total %llu\n",
			      c[i], ch[i], c[i], c[i],
			      (unsigned long long)cv[i]);
}

void wd_rt_health_why(const struct wd_trace_health *h, char *why, size_t len)
{
	uint64_t now = wd_now_ns();
	snprintf(why, len,
		 "trace store cannot write: %s (%s %.0f s ago; runs are "
		 "refused; next probe in %.1f s%s%s)",
		 strerror(-h->error), h->what,
		 (double)(now - h->since_ns) / 1e9,
		 h->next_probe_ns > now ? (double)(h->next_probe_ns - now) / 1e9
					: 0.0,
		 h->probe_error ? "; last probe: " : "",
		 h->probe_error ? strerror(-h->probe_error) : "");
}

int wd_rt_health(struct wd_rt *rt, char *why, size_t len)
{
	struct wd_trace_health h;
	if (len)
		why[0] = 0;
	if (wd_trace_health(rt->trace, &h))
		wd_rt_health_why(&h, why, len);
	return h.error;
}

/* The daemon process itself, as Prometheus' client libraries name it
 * (process_*), and the heap the allocator holds for live objects: RSS
 * also counts freed memory glibc keeps in its arenas, so a leak shows in
 * the heap figure first (daemon_memory.sh). */
static void process_metrics(struct wd_buf *b)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	if (f) {
		if (fscanf(f, "%llu %llu", &size, &resident) != 2)
			size = resident = 0;
		fclose(f);
	}
	int fds = 0;
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			fds += de->d_name[0] != '.';
		closedir(d);
		fds--; /* the directory's own descriptor */
	}
	struct mallinfo2 mi = mallinfo2();
	wd_metrics_family(b, "process_resident_memory_bytes", "gauge",
			  "Resident memory size in bytes.");
	wd_buf_printf(b, "process_resident_memory_bytes %llu\n",
		      resident * (unsigned long long)page);
	wd_metrics_family(b, "process_virtual_memory_bytes", "gauge",
			  "Virtual memory size in bytes.");
	wd_buf_printf(b, "process_virtual_memory_bytes %llu\n",
		      size * (unsigned long long)page);
	wd_metrics_family(b, "process_open_fds", "gauge",
			  "Number of open file descriptors.");
	wd_buf_printf(b, "process_open_fds %d\n", fds);
	wd_metrics_family(b, "warden_heap_inuse_bytes", "gauge",
			  "Heap bytes allocated to live objects (malloc'd and "
			  "not freed; arenas' free memory excluded).");
	wd_buf_printf(b, "warden_heap_inuse_bytes %zu\n",
		      mi.uordblks + mi.hblkhd);
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
	size_t napp = json_object_size(rt->approvals), past_ttl = 0;
	uint64_t now_wall = wd_wall_ns(), oldest_ns = 0;
	const char *ak;
	json_t *ap;
	json_object_foreach(rt->approvals, ak, ap)
	{
		uint64_t exp = (uint64_t)json_integer_value(
		    json_object_get(ap, "expires_ns"));
		uint64_t made = (uint64_t)json_integer_value(
		    json_object_get(ap, "created_ns"));
		past_ttl += exp && now_wall >= exp;
		if (made && (!oldest_ns || made < oldest_ns))
			oldest_ns = made;
	}
	size_t nunended = json_object_size(rt->unended);
	json_t *routes =
	    rt->ps->gw ? wd_gateway_breakers_json(rt->ps->gw) : json_array();
	pthread_mutex_unlock(&rt->mu);
	struct wd_trace_health th;
	wd_trace_health(rt->trace, &th);
	struct wd_stream_stats st;
	wd_stream_refresh_lost(rt->events);
	wd_stream_stats(rt->events, &st);
	wd_metrics_render(rt->metrics, &b);
	wd_buf_printf(
	    &b,
	    "# HELP warden_runs_active Runs running or queued.\n"
	    "# TYPE warden_runs_active gauge\nwarden_runs_active %d\n"
	    "# HELP warden_runs_suspended Runs waiting on an approval.\n"
	    "# TYPE warden_runs_suspended gauge\nwarden_runs_suspended %d\n"
	    "# HELP warden_approvals_pending Approval requests waiting for "
	    "a decision.\n"
	    "# TYPE warden_approvals_pending gauge\n"
	    "warden_approvals_pending %zu\n"
	    "# HELP warden_approvals_pending_past_ttl Approval requests still "
	    "pending after their expiry (the expiry could not be recorded).\n"
	    "# TYPE warden_approvals_pending_past_ttl gauge\n"
	    "warden_approvals_pending_past_ttl %zu\n"
	    "# HELP warden_approval_oldest_pending_seconds Age of the oldest "
	    "pending approval request (0 when none).\n"
	    "# TYPE warden_approval_oldest_pending_seconds gauge\n"
	    "warden_approval_oldest_pending_seconds %.3f\n"
	    "# HELP warden_events_published_total Events published on the "
	    "node's event stream.\n"
	    "# TYPE warden_events_published_total counter\n"
	    "warden_events_published_total %llu\n"
	    "# HELP warden_event_stream_overruns_total Events readers of the "
	    "event stream missed: its ring wrapped past them (the alerter, "
	    "`warden events --follow` readers).\n"
	    "# TYPE warden_event_stream_overruns_total counter\n"
	    "warden_event_stream_overruns_total %llu\n"
	    "# HELP warden_bpf_event_ring_bytes Size of the kernel's denial "
	    "event ring buffer (wardend --event-ring-bytes).\n"
	    "# TYPE warden_bpf_event_ring_bytes gauge\n"
	    "warden_bpf_event_ring_bytes %u\n"
	    "# HELP warden_trace_healthy 1 while the trace store can write, "
	    "0 while runs are refused for it.\n"
	    "# TYPE warden_trace_healthy gauge\nwarden_trace_healthy %d\n"
	    "# HELP warden_platform_overhead_seconds_total Time in steps "
	    "outside the model and the tools.\n"
	    "# TYPE warden_platform_overhead_seconds_total counter\n"
	    "warden_platform_overhead_seconds_total %.9f\n",
	    active, susp, napp, past_ttl,
	    oldest_ns && oldest_ns < now_wall
		? (double)(now_wall - oldest_ns) / 1e9
		: 0.0,
	    (unsigned long long)st.published, (unsigned long long)st.overrun,
	    wd_egress_shared_ring_size(), th.error ? 0 : 1,
	    (double)rt->m_overhead_ns / 1e9);
	wd_buf_printf(
	    &b,
	    "# HELP warden_trace_write_failures_total Trace store writes that "
	    "failed.\n"
	    "# TYPE warden_trace_write_failures_total counter\n"
	    "warden_trace_write_failures_total %llu\n"
	    "# HELP warden_trace_recoveries_total Times the trace store became "
	    "writable again.\n"
	    "# TYPE warden_trace_recoveries_total counter\n"
	    "warden_trace_recoveries_total %llu\n"
	    "# HELP warden_trace_unhealthy_seconds How long the trace store "
	    "has been unable to write (0 when healthy).\n"
	    "# TYPE warden_trace_unhealthy_seconds gauge\n"
	    "warden_trace_unhealthy_seconds %.3f\n"
	    "# HELP warden_runs_end_unrecorded Runs whose run_end waits for "
	    "the trace store.\n"
	    "# TYPE warden_runs_end_unrecorded gauge\n"
	    "warden_runs_end_unrecorded %zu\n",
	    (unsigned long long)th.failures, (unsigned long long)th.recoveries,
	    th.error ? (double)(wd_now_ns() - th.since_ns) / 1e9 : 0.0,
	    nunended);
	size_t rl_bytes = 0;
	size_t rl_keys = wd_ratelimit_keys(rt->rl, &rl_bytes);
	wd_buf_printf(&b,
		      "# HELP warden_ratelimit_keys Rate-limit windows held.\n"
		      "# TYPE warden_ratelimit_keys gauge\n"
		      "warden_ratelimit_keys %zu\n"
		      "# HELP warden_ratelimit_bytes Memory of the rate-limit "
		      "windows.\n"
		      "# TYPE warden_ratelimit_bytes gauge\n"
		      "warden_ratelimit_bytes %zu\n",
		      rl_keys, rl_bytes);
	route_metrics(routes, &b);
	json_decref(routes);
	if (rt->alert)
		wd_alert_metrics_render(rt->alert, &b);
	if (rt->pool)
		pool_metrics(rt->pool, &b);
	if (rt->otlp)
		otlp_metrics(rt->otlp, &b);
	process_metrics(&b);
	return b.data ? b.data : wd_strdup("");
}
