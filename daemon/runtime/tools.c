/* A model response's tool calls: each through the broker into its sandbox
 * (several at once when the model asked for several), sub-agent calls
 * into child runs, repeats answered from what was already done; results
 * bounded for the context and joined to the conversation in call order. */
#include <string.h>

#include "common/log.h"
#include "runtime/rt_int.h"
#include "sandbox/sandbox.h"
#include "trace/trace.h"

#define RESULT_CONTEXT_MAX 16384 /* bytes of one tool result in context */
#define MAX_PARALLEL	   16

static const struct wd_manifest *tool_lookup(void *arg, const char *name)
{
	return wd_pset_tool(arg, name);
}

static int rec_hook(void *arg, json_t *rec, bool durable, struct wd_err *err)
{
	return rt_record(arg, rec, durable, err);
}

static int rec_hook_w(void *arg, struct wd_recw *w, bool durable,
		      struct wd_trace_head *head, struct wd_err *err)
{
	return rt_record_w(arg, w, durable, head, err);
}

static void broker_run(struct wd_run *r, struct wd_broker_run *b)
{
	memset(b, 0, sizeof(*b));
	b->run_id = r->id;
	b->step = r->step;
	b->agent = r->agent->name;
	b->team = r->agent->team;
	b->granted = r->agent->tools;
	b->n_granted = r->agent->n_tools;
	b->user = r->caller.user;
	b->uid = r->caller.uid;
	b->gid = r->caller.gid;
	b->user_scopes = r->scopes;
	b->n_user_scopes = r->n_scopes;
	b->trace = r->rt->trace;
	b->hash_only = r->agent->hash_only;
	b->unrecorded_read_only = r->agent->unrecorded_read_only;
	b->tool = tool_lookup;
	b->tool_arg = r->ps;
	b->events = r->rt->events;
	b->record = rec_hook;
	b->record_w = rec_hook_w;
	b->record_arg = r;
	b->replay = rt_replay_gate(r);
}

static void call_of(json_t *pc, struct wd_broker_call *c)
{
	c->call_id = json_string_value(json_object_get(pc, "id"));
	c->name = json_string_value(json_object_get(pc, "name"));
	c->args = json_object_get(pc, "arguments");
	c->parse_error = json_is_true(json_object_get(pc, "parse_error"));
}

static char *dup_key(json_t *pc)
{
	cleanup_free char *a =
	    json_dumps(json_object_get(pc, "arguments"),
		       JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	return wd_asprintf("%s\x1f%s",
			   json_string_value(json_object_get(pc, "name")),
			   a ? a : "");
}

const char *rt_pstate(json_t *pc)
{
	return json_string_value(json_object_get(pc, "state"));
}

void rt_set_done(json_t *pc, const char *content, bool is_error)
{
	json_object_set_new(pc, "state", json_string("done"));
	json_object_set_new(pc, "content", json_string(content));
	json_object_set_new(pc, "is_error", json_boolean(is_error));
}

char *rt_content_for_model(struct wd_run *r, json_t *result)
{
	char *s = json_dumps(result, JSON_COMPACT);
	if (!s)
		return wd_strdup("{\"status\":\"error\"}");
	size_t n = strlen(s), cap = RESULT_CONTEXT_MAX;
	if (r->agent->context_budget_tokens > 0)
		cap = WD_MIN(cap, (size_t)r->agent->context_budget_tokens);
	cap = WD_MAX(cap, 1024);
	if (n <= cap)
		return s;
	char ref[WD_TRACE_REF_LEN] = "";
	struct wd_err e = {0};
	wd_trace_put_blob(r->rt->trace, r->id, s, n, ref, &e);
	/* cut on a UTF-8 boundary */
	size_t k = cap;
	while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
		k--;
	char *out = wd_asprintf("%.*s\n[truncated: the result is %zu bytes, "
				"only the first %zu are shown; the full result "
				"is stored in the trace as %s]",
				(int)k, s, n, k, ref[0] ? ref : "(not stored)");
	free(s);
	return out;
}

struct exec_job {
	struct wd_run *r;
	json_t *pc;
	struct wd_broker_run b;
	const struct wd_manifest *m;
	json_t *result;
	char status[24];
	int rc;
	struct wd_err err;
	uint64_t ns;		    /* how long wd_broker_execute took */
	struct wd_denial_counts dc; /* every denial/audit of the call */
};

static void *exec_thread(void *arg)
{
	struct exec_job *j = arg;
	struct wd_broker_call c;
	call_of(j->pc, &c);
	uint64_t t0 = wd_now_ns();
	j->rc = wd_broker_execute(&j->b, &c, j->m,
				  json_object_get(j->pc, "approval"),
				  &j->result, j->status, &j->dc, &j->err);
	j->ns = wd_now_ns() - t0;
	return NULL;
}

/* An approval that cannot be recorded fails its call with the store's
 * error (the tool never runs without its request on disk). */
static void approval_failed(json_t *pc, const char *what, const char *msg)
{
	json_t *o = json_pack("{s:s,s:s,s:s}", "status", "error", "check",
			      "approval", "error", "");
	cleanup_free char *why = wd_asprintf(
	    "approval needed, but %s could not be recorded: %s", what, msg);
	json_object_set_new(o, "error", json_string(why));
	cleanup_free char *c = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	rt_set_done(pc, c, true);
}

/* rt->mu held. The step's approval requests (recorded durably, state
 * "recorded") become "waiting" and are listed in rt->approvals, after the
 * run's snapshot naming them is on disk: an approval anyone can see (and
 * decide) survives a kill -9 of the daemon (agent_approvals.sh
 * "approval-listed-survives-kill"). Once, under the lock: the table is
 * shared with the API threads and the TTL thread. */
static void publish_approvals(struct wd_run *r)
{
	size_t i;
	json_t *pc;
	int n = 0;
	json_array_foreach(r->pending, i, pc)
	{
		if (strcmp(rt_pstate(pc), "recorded"))
			continue;
		json_object_set_new(pc, "state", json_string("waiting"));
		n++;
	}
	if (!n)
		return;
	/* the snapshot must not carry the table's copy */
	json_t *held = json_object();
	json_array_foreach(r->pending, i, pc)
	{
		json_t *ap = json_object_get(pc, "approval_pending");
		if (!ap)
			continue;
		json_object_set(
		    held, json_string_value(json_object_get(ap, "id")), ap);
		json_object_del(pc, "approval_pending");
	}
	int rc = rt_save_snapshot(r);
	const char *k;
	json_t *ap;
	json_object_foreach(held, k, ap)
	{
		json_t *call = rt_find_call_locked(
		    r, json_string_value(json_object_get(ap, "call_id")));
		if (rc) {
			if (call)
				approval_failed(call, "the run's snapshot",
						strerror(-rc));
			continue;
		}
		json_object_set(r->rt->approvals, k, ap);
	}
	json_decref(held);
}

/* Returns 1 when every call of the step is done, 0 when the run must
 * suspend on approvals, -errno (run failed, err set). */
int rt_tool_step(struct wd_run *r, struct wd_err *err)
{
	struct wd_rt *rt = r->rt;
	struct wd_broker_run b;
	broker_run(r, &b);
	size_t i, n = json_array_size(r->pending);
	json_t *pc;
	struct exec_job *jobs = wd_calloc(n, sizeof(*jobs));
	int nj = 0;

	/* Only this worker touches the run's calls while it runs, except
	 * a decision on a call registered as waiting (under rt->mu). */
	json_array_foreach(r->pending, i, pc)
	{
		const char *st = rt_pstate(pc);
		if (strcmp(st, "new") && strcmp(st, "approved") &&
		    strcmp(st, "denied"))
			continue;
		struct wd_broker_call c;
		call_of(pc, &c);
		if (!strcmp(st, "denied")) {
			const char *why = json_string_value(
			    json_object_get(pc, "denied_reason"));
			cleanup_free char *msg = wd_asprintf(
			    "{\"status\":\"denied\",\"check\":\"approval\","
			    "\"error\":\"%s\"}",
			    why ? why : "approval denied");
			rt_set_done(pc, msg, true);
			continue;
		}
		bool approved = !strcmp(st, "approved");
		/* seed 000 step 7: the same (tool, args) again is answered,
		 * not executed */
		cleanup_free char *key = dup_key(pc);
		json_t *prev = json_object_get(r->done, key);
		if (prev && !approved) {
			cleanup_free char *msg = wd_asprintf(
			    "You already called %s with exactly these "
			    "arguments at step %d; it was not run again. The "
			    "earlier result: %s",
			    c.name,
			    (int)json_integer_value(
				json_object_get(prev, "step")),
			    json_string_value(
				json_object_get(prev, "content")));
			json_t *rec = rt_rec_new(r, "tool_result");
			json_object_set_new(rec, "gen_ai.tool.name",
					    json_string(c.name));
			json_object_set_new(rec, "gen_ai.tool.call.id",
					    json_string(c.call_id));
			json_object_set_new(rec, "status",
					    json_string("duplicate"));
			rt_record(r, rec, false, NULL);
			json_decref(rec);
			rt_set_done(pc, msg, false);
			continue;
		}
		if (rt_is_subagent_tool(c.name)) {
			/* a child run, on this thread, one at a time: each
			 * child is bounded by what the ones before it left */
			uint64_t ts0 = wd_now_ns();
			rt_subagent_call(r, pc);
			rt_slice_ext(wd_now_ns() - ts0);
			json_object_set_new(
			    r->done, key,
			    json_pack("{s:i,s:O}", "step", r->step, "content",
				      json_object_get(pc, "content")));
			continue;
		}
		const struct wd_manifest *m = NULL;
		char check[16], reason[512];
		enum wd_broker_verdict v =
		    wd_broker_check(&b, &c, rt->rl, approved, &m, check, reason,
				    sizeof(reason));
		if (v == WD_BRK_DENIED || v == WD_BRK_INVALID) {
			rt_m_add(r, WD_M_TOOL_REFUSALS, 1,
				 rt_m_tool_label(r, c.name), check, NULL);
			wd_broker_record_refusal(&b, &c, v, check, reason,
						 NULL);
			json_t *o = json_pack("{s:s,s:s,s:s}", "status",
					      wd_broker_verdict_name(v),
					      "check", check, "error", reason);
			cleanup_free char *msg = json_dumps(o, JSON_COMPACT);
			json_decref(o);
			rt_set_done(pc, msg, true);
			continue;
		}
		if (v == WD_BRK_APPROVAL && r->parent_id[0]) {
			/* a sub-agent's run is run by its parent's thread
			 * and cannot suspend: the call is refused */
			char why[700];
			snprintf(why, sizeof(why),
				 "%s; a sub-agent's run cannot wait for an "
				 "approval, so tools that need one are refused "
				 "here",
				 reason);
			rt_m_add(r, WD_M_TOOL_REFUSALS, 1,
				 rt_m_tool_label(r, c.name), "approval", NULL);
			wd_broker_record_refusal(&b, &c, WD_BRK_DENIED,
						 "approval", why, NULL);
			json_t *o =
			    json_pack("{s:s,s:s,s:s}", "status", "denied",
				      "check", "approval", "error", why);
			cleanup_free char *msg = json_dumps(o, JSON_COMPACT);
			json_decref(o);
			rt_set_done(pc, msg, true);
			continue;
		}
		if (v == WD_BRK_APPROVAL) {
			char aid[24] = "ap_";
			wd_rand_hex(aid + 3, 16);
			uint64_t now = wd_wall_ns();
			json_t *ap = json_pack(
			    "{s:s,s:s,s:s,s:s,s:O,s:s,s:s,s:s,s:s,s:I,s:I}",
			    "id", aid, "run_id", r->id, "call_id", c.call_id,
			    "tool", c.name, "args", c.args, "reason", reason,
			    "agent", r->agent->name, "team", r->agent->team,
			    "user", r->caller.user, "created_ns",
			    (json_int_t)now, "expires_ns",
			    (json_int_t)(now +
					 (uint64_t)(rt->approval_ttl_s
							? rt->approval_ttl_s
							: r->agent
							      ->approval_ttl_s) *
					     1000000000ull));
			json_t *rec = rt_rec_new(r, "approval_request");
			json_object_set_new(rec, "approval_id",
					    json_string(aid));
			json_object_set_new(rec, "gen_ai.tool.name",
					    json_string(c.name));
			json_object_set_new(rec, "gen_ai.tool.call.id",
					    json_string(c.call_id));
			json_object_set_new(rec, "reason", json_string(reason));
			json_object_set_new(
			    rec, "expires_ns",
			    json_object_get(ap, "expires_ns")
				? json_copy(json_object_get(ap, "expires_ns"))
				: json_null());
			if (!r->agent->hash_only)
				json_object_set(rec, "args", c.args);
			/* on disk before anyone can decide it; published
			 * (under rt->mu, once) at the end of the step, with
			 * the run's snapshot: see publish_approvals */
			struct wd_err ae = {0};
			int arc = rt_record(r, rec, true, &ae);
			json_decref(rec);
			if (arc) {
				json_decref(ap);
				approval_failed(pc, "its request", ae.msg);
				continue;
			}
			json_object_set_new(pc, "approval_id",
					    json_string(aid));
			json_object_set_new(pc, "approval_pending", ap);
			json_object_set_new(pc, "state",
					    json_string("recorded"));
			continue;
		}
		json_object_set_new(pc, "state", json_string("ready"));
		jobs[nj].r = r;
		jobs[nj].pc = pc;
		jobs[nj].b = b;
		jobs[nj].m = m;
		nj++;
	}

	/* parallel tool calls from one model response run concurrently */
	uint64_t t0 = wd_now_ns();
	pthread_t th[MAX_PARALLEL];
	bool started[MAX_PARALLEL] = {0};
	int frc = 0;
	for (int base = 0; base < nj; base += MAX_PARALLEL) {
		int k = WD_MIN(nj - base, MAX_PARALLEL);
		/* a fleet run starts a side effect only under a lease its
		 * node certainly holds (rt_fence): another node may have the
		 * run otherwise */
		bool effects = false;
		for (int x = base; x < base + k; x++)
			effects |= jobs[x].m->side_effects != WD_SE_NONE;
		if (effects && (frc = rt_fence(r, true, err)))
			break;
		for (int x = 0; x < k; x++) {
			if (k == 1) {
				exec_thread(&jobs[base + x]);
				continue;
			}
			started[x] = !pthread_create(&th[x], NULL, exec_thread,
						     &jobs[base + x]);
			if (!started[x])
				exec_thread(&jobs[base + x]);
		}
		for (int x = 0; x < k; x++)
			if (started[x]) {
				pthread_join(th[x], NULL);
				started[x] = false;
			}
		/* fail closed: once an attempt could not be recorded, the
		 * calls of the next batches do not start */
		int bad = -1;
		for (int x = base; x < base + k && bad < 0; x++)
			if (jobs[x].rc)
				bad = x;
		for (int x = base + k; bad >= 0 && x < nj; x++) {
			jobs[x].rc = jobs[bad].rc;
			wd_err_set(&jobs[x].err, jobs[bad].rc,
				   "not started after '%s' failed: %s",
				   jobs[bad].m->name, jobs[bad].err.msg);
		}
		if (bad >= 0)
			break;
	}
	rt_slice_ext(wd_now_ns() - t0);
	if (frc) {
		/* the run ends here (loop.c: interrupted, or its wall clock):
		 * the results of the calls that ran are in the trace */
		r->fence_rc = frc;
		for (int x = 0; x < nj; x++)
			json_decref(jobs[x].result);
		free(jobs);
		return frc;
	}
	for (int x = 0; x < nj; x++) {
		struct exec_job *j = &jobs[x];
		const char *tool = j->m->name; /* from policy */
		const char *tier = rt_m_tier((int)j->m->tier);
		rt_m_add(r, WD_M_TOOL_CALLS, 1, tool, tier,
			 j->rc ? "not_run" : j->status);
		if (!j->rc) /* a call never started has no duration */
			rt_m_observe(r, WD_M_TOOL_SECONDS, (double)j->ns / 1e9,
				     tool, tier);
		/* every denial and audit the call made (the kernel's own
		 * count included: a record the ring buffer had no room for,
		 * or one past the 4,096 a result keeps, is still counted),
		 * not just those the result lists */
		if (j->rc)
			continue;
		if (j->dc.n[WD_VERDICT_DENIED])
			rt_m_add(r, WD_M_DENIALS, j->dc.n[WD_VERDICT_DENIED],
				 tool, tier, "denied");
		if (j->dc.n[WD_VERDICT_AUDITED])
			rt_m_add(r, WD_M_DENIALS, j->dc.n[WD_VERDICT_AUDITED],
				 tool, tier, "audited");
		if (j->dc.untraced)
			rt_m_add(r, WD_M_DENIALS_UNTRACED, j->dc.untraced, tool,
				 tier, NULL);
	}

	int ret = 1;
	pthread_mutex_lock(&rt->mu);
	for (int x = 0; x < nj; x++) {
		struct exec_job *j = &jobs[x];
		if (j->rc) {
			/* fail closed (issue 5): the run ends with the
			 * store's reason */
			if (j->m->side_effects != WD_SE_NONE)
				wd_err_set(err, j->rc,
					   "tool '%s' not run: its attempt "
					   "could not be recorded durably: %s",
					   j->m->name, j->err.msg);
			else
				wd_err_set(err, j->rc,
					   "tool '%s' not run: its attempt "
					   "could not be recorded (the agent "
					   "has trace.unrecorded_read_only: "
					   "refuse): %s",
					   j->m->name, j->err.msg);
			ret = j->rc;
			rt_set_done(j->pc, err->msg, true);
			continue;
		}
		char *content = rt_content_for_model(r, j->result);
		bool is_err = strcmp(j->status, "ok") != 0;
		rt_set_done(j->pc, content, is_err);
		cleanup_free char *key = dup_key(j->pc);
		json_object_set_new(r->done, key,
				    json_pack("{s:i,s:s}", "step", r->step,
					      "content", content));
		free(content);
		json_decref(j->result);
	}
	if (ret == 1)
		publish_approvals(r);
	if (ret == 1) {
		json_array_foreach(r->pending, i, pc)
		{
			if (strcmp(rt_pstate(pc), "done"))
				ret = 0; /* waiting on a human */
		}
	}
	pthread_mutex_unlock(&rt->mu);
	free(jobs);
	return ret;
}

/* All calls answered: their results join the conversation in call order. */
void rt_close_step(struct wd_run *r)
{
	size_t i;
	json_t *pc;
	json_array_foreach(r->pending, i, pc)
	{
		json_array_append_new(
		    r->msgs,
		    json_pack("{s:s,s:O,s:O,s:O,s:O}", "role", "tool",
			      "tool_call_id", json_object_get(pc, "id"),
			      "tool_name", json_object_get(pc, "name"), "text",
			      json_object_get(pc, "content"), "is_error",
			      json_object_get(pc, "is_error")));
	}
	pthread_mutex_lock(&r->rt->mu); /* views read step and pending */
	json_decref(r->pending);
	r->pending = NULL;
	r->step++;
	pthread_mutex_unlock(&r->rt->mu);
	rt_m_add(r, WD_M_STEPS, 1, NULL, NULL, NULL);
	if (r->step_t0_ns)
		rt_m_observe(r, WD_M_STEP_SECONDS,
			     (double)(wd_now_ns() - r->step_t0_ns) / 1e9, NULL,
			     NULL);
	r->step_t0_ns = 0;
}
