/* Starting a replay (runtime.h wd_rt_replay_create): options checked (a
 * mode this build does not have is refused, never ignored), the original
 * read back, its steps before `from` rebuilt from the record and checked
 * against the recorded prompt hashes, then the new run queued like any
 * other. */
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "gateway/gateway.h"
#include "runtime/replay_int.h"
#include "trace/records.h"
#include "trace/trace.h"

static json_t *sha_of(const char *text)
{
	char h[WD_TRACE_REF_LEN];
	wd_trace_ref_of(text, strlen(text), h);
	return json_string(h);
}

bool rt_prompt_hash_matches(struct wd_rt *rt, const char *prompt,
			    const char *want, char h[WD_TRACE_REF_LEN])
{
	size_t n = strlen(prompt);
	wd_trace_ref_redacted(rt->trace, prompt, n, h);
	if (!want)
		return false;
	if (!strcmp(want, h))
		return true;
	char raw[WD_TRACE_REF_LEN];
	wd_trace_ref_of(prompt, n, raw);
	return !strcmp(want, raw);
}

static bool all_strings(json_t *o)
{
	const char *k;
	json_t *v;
	if (!json_is_object(o))
		return false;
	json_object_foreach(o, k, v) if (!json_is_string(v)) return false;
	return true;
}

static int parse_opts(const json_t *o, struct rt_replay *rp, struct wd_err *err)
{
	static const char *const keys[] = {
	    "from",  "determinism",   "tools", "live_internal",
	    "agent", "system_prompt", "model", "tool",
	    "args",  "mock",	      NULL};
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)o, k, v)
	{
		bool ok = false;
		for (int i = 0; keys[i]; i++)
			ok |= !strcmp(k, keys[i]);
		if (!ok)
			return wd_err_set(err, -EINVAL,
					  "unknown replay option '%s'", k);
	}
	json_t *from = json_object_get(o, "from");
	if (!json_is_integer(from) || json_integer_value(from) < 0 ||
	    json_integer_value(from) > 1000000)
		return wd_err_set(err, -EINVAL,
				  "--from N: a step number >= 0 is required");
	rp->from = (int)json_integer_value(from);
	const char *d = json_string_value(json_object_get(o, "determinism"));
	if (!d || !strcmp(d, "divergent"))
		rp->det = RP_DIVERGENT;
	else if (!strcmp(d, "pinned"))
		rp->det = RP_PINNED;
	else if (!strcmp(d, "recorded-model"))
		rp->det = RP_RECORDED_MODEL;
	else
		return wd_err_set(err, -EINVAL,
				  "--determinism %s: divergent, pinned or "
				  "recorded-model",
				  d);
	const char *t = json_string_value(json_object_get(o, "tools"));
	if (t && strcmp(t, "live") && strcmp(t, "recorded"))
		return wd_err_set(err, -EINVAL, "--tools %s: only 'recorded'",
				  t);
	rp->gate.tools_recorded = t && !strcmp(t, "recorded");
	json_t *li = json_object_get(o, "live_internal");
	if (li && !json_is_boolean(li))
		return wd_err_set(err, -EINVAL, "live_internal: a boolean");
	/* the broker runs an internal tool live only where its manifest
	 * names a replay environment (replay_gate.c); others stay recorded */
	rp->gate.live_internal = json_is_true(li);
	for (const char *const *s =
		 (const char *const[]){"agent", "system_prompt", "model", NULL};
	     *s; s++) {
		json_t *x = json_object_get(o, *s);
		if (x && !json_is_string(x))
			return wd_err_set(err, -EINVAL, "%s: a string", *s);
	}
	json_t *tool = json_object_get(o, "tool"),
	       *mock = json_object_get(o, "mock");
	if ((tool && !all_strings(tool)) || (mock && !all_strings(mock)))
		return wd_err_set(err, -EINVAL,
				  "tool and mock: objects of NAME: text");
	json_t *args = json_object_get(o, "args");
	if (args && !json_is_object(args))
		return wd_err_set(err, -EINVAL, "args: an object");
	json_object_foreach(args, k, v)
	{
		int step = -1, call = -1, n = 0;
		if (sscanf(k, "%d.%d%n", &step, &call, &n) != 2 || k[n] ||
		    step < 0 || call < 0)
			return wd_err_set(err, -EINVAL,
					  "--args %s: STEP.CALL=JSON", k);
		if (step < rp->from)
			return wd_err_set(err, -EINVAL,
					  "--args %s: step %d is before --from "
					  "%d (those steps come from the "
					  "record)",
					  k, step, rp->from);
		if (!json_is_object(v))
			return wd_err_set(err, -EINVAL,
					  "--args %s: the arguments must be a "
					  "JSON object",
					  k);
	}
	/* copies: the request's JSON is the API thread's, freed when it has
	 * answered, while the run reads these on a worker */
	rp->args = args ? json_deep_copy(args) : json_object();
	rp->gate.mocks = mock ? json_deep_copy(mock) : json_object();
	/* what was patched, by sha256 of the texts given */
	json_t *p = json_object();
	const char *a = json_string_value(json_object_get(o, "agent"));
	const char *sp = json_string_value(json_object_get(o, "system_prompt"));
	const char *m = json_string_value(json_object_get(o, "model"));
	if (a)
		json_object_set_new(p, "agent", sha_of(a));
	if (sp)
		json_object_set_new(p, "system_prompt", sha_of(sp));
	if (m)
		json_object_set_new(p, "model", json_string(m));
	for (int i = 0; i < 2; i++) {
		json_t *src = i ? mock : tool, *dst = json_object();
		json_object_foreach(src, k, v)
		    json_object_set_new(dst, k, sha_of(json_string_value(v)));
		if (json_object_size(dst))
			json_object_set(p, i ? "mock" : "tool", dst);
		json_decref(dst);
	}
	if (json_object_size(rp->args))
		json_object_set(p, "args", rp->args);
	rp->patches = p;
	return 0;
}

/* --determinism pinned: every route of agent `d`'s model takes a seed,
 * else -EINVAL naming the agent (when a sub-agent), model and provider. */
static int pinned_route(const struct wd_pset *ps, const struct wd_agent_def *d,
			bool sub, struct wd_err *err)
{
	json_t *route = wd_gateway_route_json(ps->gw, d->model);
	size_t i;
	json_t *e;
	int rc = 0;
	cleanup_free char *who =
	    sub ? wd_asprintf("sub-agent '%s': ", d->name) : wd_strdup("");
	json_array_foreach(route, i, e)
	{
		if (json_is_true(json_object_get(e, "seed")))
			continue;
		rc = wd_err_set(
		    err, -EINVAL,
		    "--determinism pinned: %smodel '%s' routes to provider "
		    "'%s' (%s), which takes no seed; pinned needs a seed on "
		    "every route of every agent in the run's tree (OpenAI "
		    "Chat Completions)",
		    who, d->model,
		    json_string_value(json_object_get(e, "provider")),
		    json_string_value(json_object_get(e, "kind")));
		break;
	}
	json_decref(route);
	return rc;
}

/* The original read back, if the caller may replay it (its user, or
 * root): decided before anything else about the run or the request is
 * looked at, so a stranger is told only that, whatever else is wrong —
 * the checks after it (an --agent patch against the recorded definition,
 * --from against its steps, a --mock against its tools) each say
 * something about the run. */
static int load_own(struct wd_rt *rt, const struct wd_caller *c,
		    struct rt_replay *rp, struct wd_err *err)
{
	int rc = rp_load_original(rt, rp->of_run_id, &rp->o, err);
	if (rc)
		return rc;
	json_t *st = rp->o.start;
	uid_t ouid = (uid_t)json_integer_value(json_object_get(st, "uid"));
	if (c->uid != 0 && c->uid != geteuid() && c->uid != ouid)
		return wd_err_set(
		    err, -EACCES,
		    "run %s is %s's: only they or root may "
		    "replay it",
		    rp->of_run_id,
		    json_string_value(json_object_get(st, "user")));
	return 0;
}

/* The checks that need the original and the replay's policy. */
static int check_run(struct wd_rt *rt, struct rt_replay *rp,
		     const struct wd_pset *ps, struct wd_err *err)
{
	json_t *st = rp->o.start;
	if (json_object_get(st, "parent_run_id"))
		return wd_err_set(err, -EINVAL,
				  "run %s is a sub-agent's run: replay its "
				  "top-level run",
				  rp->of_run_id);
	if (!strcmp(json_string_value(json_object_get(
			json_object_get(st, "trace"), "payloads"))
			?: "",
		    "hash_only") ||
	    !json_object_get(st, "task"))
		return wd_err_set(err, -EINVAL,
				  "run %s kept only hashes of its payloads "
				  "(trace.payloads: hash_only): there is "
				  "nothing to replay from",
				  rp->of_run_id);
	if (!rp->o.end)
		return wd_err_set(err, -EINVAL,
				  "run %s has not ended: replay it when it has",
				  rp->of_run_id);
	int n = (int)json_array_size(rp->o.calls);
	if (rp->from >= n)
		return wd_err_set(err, -EINVAL,
				  "--from %d: run %s has %d model step%s "
				  "(0..%d)",
				  rp->from, rp->of_run_id, n, n == 1 ? "" : "s",
				  n - 1);
	const char *k;
	json_t *v;
	json_object_foreach(rp->gate.mocks, k, v)
	{
		const struct wd_manifest *m = wd_pset_tool(ps, k);
		const char *ose = json_string_value(
		    json_object_get(rp->gate.orig_side_effects, k));
		bool ext = (m && m->side_effects == WD_SE_EXTERNAL) ||
			   (ose && !strcmp(ose, "external"));
		if (!ext)
			return wd_err_set(err, -EINVAL,
					  "--mock %s: not an external tool of "
					  "the replayed agent (a mock stands "
					  "in for an external side effect "
					  "only)",
					  k);
	}
	/* pinned: every agent of the tree (the sub-agents' child runs send
	 * the seed too), before anything runs */
	for (int x = 0; rp->det == RP_PINNED && x < ps->n_agents; x++) {
		int rc = pinned_route(ps, &ps->agents[x], x > 0, err);
		if (rc)
			return rc;
	}
	(void)rt;
	return 0;
}

static int check_hash(struct wd_run *r, int s, struct wd_err *err)
{
	json_t *mc = json_array_get(r->replay->o.calls, (size_t)s);
	const char *want =
	    json_string_value(json_object_get(mc, "prompt_hash"));
	cleanup_free char *p = rt_conv_text(r);
	char h[WD_TRACE_REF_LEN];
	if (!rt_prompt_hash_matches(r->rt, p, want, h))
		return wd_err_set(err, -EBADMSG,
				  "the record cannot be reproduced: step %d: "
				  "the rebuilt conversation hashes to %s, the "
				  "record says %s",
				  s, h, want ? want : "(none)");
	return 0;
}

static bool is_system(json_t *m)
{
	return !strcmp(json_string_value(json_object_get(m, "role")) ?: "",
		       "system");
}

/* The system message a step's recorded prompt had: the original may
 * itself be a replay that changed it from its step N (--system-prompt,
 * --agent), so it is not always step 0's. */
static void sync_system(struct wd_run *r, json_t *prompt)
{
	json_t *want = json_array_get(prompt, 0),
	       *have = json_array_get(r->msgs, 0);
	bool w = is_system(want), h = is_system(have);
	if ((!w && !h) || (w && h && json_equal(want, have)))
		return;
	if (h)
		json_array_remove(r->msgs, 0);
	if (w)
		json_array_insert_new(r->msgs, 0, json_deep_copy(want));
	r->msgs_gen++;
}

/* Steps 0..from-1 from the record: no gateway call, no sandbox, no cost;
 * one replay_step record each, referencing what it reused by hash. */
static int prefix(struct wd_run *r, json_t **prompts, json_t **resps,
		  struct wd_err *err)
{
	struct rt_replay *rp = r->replay;
	for (int s = 0;; s++) {
		sync_system(r, prompts[s]);
		rt_fit_context(r);
		int rc = check_hash(r, s, err);
		if (rc || s == rp->from)
			return rc;
		json_t *resp = resps[s];
		/* copies: the prompts and responses are freed on this thread
		 * once the run is queued, while a worker reads its messages */
		json_t *tc = json_object_get(resp, "tool_calls");
		json_t *am = json_pack(
		    "{s:s,s:s,s:o}", "role", "assistant", "text",
		    json_string_value(json_object_get(resp, "text")) ?: "",
		    "tool_calls", tc ? json_deep_copy(tc) : json_array());
		json_t *next = prompts[s + 1];
		size_t k = json_array_size(next);
		while (k-- > 0 && strcmp(json_string_value(json_object_get(
					     json_array_get(next, k), "role"))
					     ?: "",
					 "assistant"))
			;
		if (k == (size_t)-1 ||
		    !json_equal(json_array_get(next, k), am)) {
			json_decref(am);
			return wd_err_set(err, -EBADMSG,
					  "the record cannot be reproduced: "
					  "step %d: the recorded response is "
					  "not the assistant turn of step "
					  "%d's prompt",
					  s, s + 1);
		}
		json_array_append_new(r->msgs, am);
		for (size_t j = k + 1; j < json_array_size(next); j++) {
			json_t *tm = json_array_get(next, j);
			json_array_append_new(r->msgs, json_deep_copy(tm));
			const char *cid = json_string_value(
			    json_object_get(tm, "tool_call_id"));
			cleanup_free char *ck =
			    wd_asprintf("%d\x1f%s", s, cid ? cid : "");
			json_t *at = json_object_get(rp->o.attempts, ck);
			/* executed calls answer repeats, as in the original
			 * (tools.c dup_key) */
			size_t x;
			json_t *c;
			json_array_foreach(json_object_get(resp, "tool_calls"),
					   x, c)
			{
				if (!at || strcmp(json_string_value(
						      json_object_get(c, "id"))
						      ?: "",
						  cid ? cid : ""))
					continue;
				char *a =
				    json_dumps(json_object_get(c, "arguments"),
					       JSON_COMPACT | JSON_SORT_KEYS |
						   JSON_ENCODE_ANY);
				char *key =
				    wd_asprintf("%s\x1f%s",
						json_string_value(
						    json_object_get(c, "name")),
						a ? a : "");
				json_object_set_new(
				    r->done, key,
				    json_pack("{s:i,s:o}", "step", s, "content",
					      json_deep_copy(json_object_get(
						  tm, "text"))));
				free(a);
				free(key);
			}
		}
		json_t *mc = json_array_get(rp->o.calls, (size_t)s);
		json_t *rec =
		    rt_rec_new(r, wd_rec_type_name(WD_REC_REPLAY_STEP));
		json_object_set_new(rec, "of_run_id",
				    json_string(rp->of_run_id));
		json_object_set(rec, "of_seq", json_object_get(mc, "seq"));
		json_object_set(rec, "prompt_hash",
				json_object_get(mc, "prompt_hash"));
		json_object_set(rec, "prompt_ref",
				json_object_get(mc, "prompt_ref"));
		json_object_set(rec, "response_ref",
				json_object_get(mc, "response_ref"));
		json_object_set(
		    rec, "next_prompt_ref",
		    json_object_get(json_array_get(rp->o.calls, (size_t)s + 1),
				    "prompt_ref"));
		json_object_set_new(
		    rec, "tool_results",
		    json_integer((json_int_t)json_array_size(next) -
				 (json_int_t)k - 1));
		rc = rt_record(r, rec, false, err);
		json_decref(rec);
		if (rc)
			return rc;
		r->step++;
	}
}

/* The conversation's system message becomes `text` from the live steps
 * on (the agent's own prompt when given no --system-prompt: none when it
 * has none, as a new run of that agent would have). */
static void set_system_prompt(struct wd_run *r, const char *text,
			      bool drop_empty)
{
	json_t *first = json_array_get(r->msgs, 0);
	bool has = is_system(first);
	if (drop_empty && (!text || !*text)) {
		if (has)
			json_array_remove(r->msgs, 0);
	} else if (has) {
		json_object_set_new(first, "text", json_string(text));
	} else {
		json_array_insert_new(
		    r->msgs, 0,
		    json_pack("{s:s,s:s}", "role", "system", "text", text));
	}
	r->msgs_gen++;
}

int wd_rt_replay_create(struct wd_rt *rt, const struct wd_caller *c,
			const char *of, const json_t *opts, char id[64],
			uint64_t *prefix_us, struct wd_err *err)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *base = wd_pset_ref(rt->ps);
	pthread_mutex_unlock(&rt->mu);
	struct rt_replay *rp = wd_calloc(1, sizeof(*rp));
	struct wd_pset *ps = NULL;
	json_t **prompts = NULL, **resps = NULL, *floor = NULL;
	int n = 0, rc;
	char why[256];
	snprintf(rp->of_run_id, sizeof(rp->of_run_id), "%s", of);
	rp->fp_changed_at = -1;
	if ((rc = load_own(rt, c, rp, err)) || (rc = parse_opts(opts, rp, err)))
		goto fail;
	/* a patched manifest is policy — it says what the sandbox allows
	 * (exec, egress, writes) — so only who may change the policy may
	 * replay with one */
	if (json_object_size(json_object_get(opts, "tool")) && c->uid != 0 &&
	    c->uid != geteuid()) {
		rc = wd_err_set(err, -EPERM,
				"--tool: a patched manifest is a policy change "
				"(what the sandbox allows); only root may "
				"replay with one");
		goto fail;
	}
	if (!wd_pset_may_run(base, c->uid, NULL, why, sizeof(why))) {
		rc = wd_err_set(err, -EACCES, "%s", why);
		goto fail;
	}
	floor = json_object();
	if ((rc = rp_build_pset(rt, base, &rp->o, opts,
				c->uid == 0 || c->uid == geteuid(), floor, &ps,
				err)))
		goto fail;
	const struct wd_agent_def *a = &ps->agents[0];
	/* the broker judges side effects by the recorded manifests too, and
	 * by those a --tool patch replaced (the stricter) */
	rp->gate.orig_side_effects = json_object();
	const char *k;
	json_t *v;
	json_object_foreach(
	    json_object_get(json_object_get(rp->o.start, "definitions"),
			    "tools"),
	    k, v) json_object_set(rp->gate.orig_side_effects, k,
				  json_object_get(v, "side_effects"));
	json_object_foreach(floor, k, v)
	{
		const char *old = json_string_value(
		    json_object_get(rp->gate.orig_side_effects, k));
		if (!old || wd_side_effects_parse(json_string_value(v)) >
				wd_side_effects_parse(old))
			json_object_set(rp->gate.orig_side_effects, k, v);
	}
	snprintf(rp->gate.of_run_id, sizeof(rp->gate.of_run_id), "%s", of);
	rp->gate.recorded = rp->o.recorded;
	if ((rc = check_run(rt, rp, ps, err)))
		goto fail;
	/* pinned: the original's seed where it sent one, else one derived
	 * from its id (so two pinned replays of a run send the same) */
	json_t *os = json_object_get(
	    json_object_get(json_array_get(rp->o.calls, (size_t)rp->from),
			    "params"),
	    "seed");
	/* (unsigned before the cut: a seed is a non-negative 31-bit value) */
	uint64_t idh =
	    strtoull(of + (strncmp(of, "run_", 4) ? 0 : 4), NULL, 16);
	rp->seed = json_is_integer(os) ? json_integer_value(os)
				       : (int64_t)(idh % 2147483647u);
	json_t *last =
	    json_array_get(rp->o.records, json_array_size(rp->o.records) - 1);
	char *lt = json_dumps(last, JSON_COMPACT);
	wd_trace_ref_of(lt ? lt : "", lt ? strlen(lt) : 0, rp->head);
	free(lt);
	uint64_t t0 = wd_now_ns();
	/* every blob the prefix needs, before anything is recorded: a
	 * damaged one stops the replay before its step 0 */
	n = rp->from + 1;
	prompts = wd_calloc((size_t)n, sizeof(*prompts));
	resps = wd_calloc((size_t)n, sizeof(*resps));
	for (int s = 0; s < n; s++) {
		if (!(prompts[s] = rt_replay_orig_prompt(rt, rp, s, err)) ||
		    (s < rp->from &&
		     !(resps[s] = rt_replay_orig_response(rt, rp, s, err)))) {
			rc = err->code ? err->code : -EBADMSG;
			goto fail;
		}
	}
	/* the recorded system prompt and task: what step 0's prompt held */
	json_t *p0 = prompts[0];
	const char *task =
	    json_string_value(json_object_get(rp->o.start, "task"));
	struct wd_run *r = rt_run_new(rt, ps, a, c, task ? task : "");
	memcpy(r->id, "run_", 4);
	wd_rand_hex(r->id + 4, 16);
	r->started_wall = wd_wall_ns();
	r->msgs = json_array();
	json_t *m0 = json_array_get(p0, 0);
	if (!strcmp(json_string_value(json_object_get(m0, "role")) ?: "",
		    "system"))
		json_array_append_new(r->msgs, json_deep_copy(m0));
	json_array_append_new(
	    r->msgs, json_pack("{s:s,s:s}", "role", "user", "text", r->task));
	r->replay = rp;
	rp = NULL;
	char *active = rt_run_path(rt, r->id, "active");
	wd_write_file(active, a->name, strlen(a->name), 0600);
	free(active);
	rc = rt_record_start(r, err);
	if (!rc)
		rc = prefix(r, prompts, resps, err);
	r->replay->prefix_ns = wd_now_ns() - t0;
	if (rc) {
		cleanup_free char *why2 = wd_strdup(err->msg);
		rt_finish(r, "failed", why2, NULL);
		wd_err_set(err, rc, "replay %s stopped before step 0: %s",
			   r->id, why2);
		pthread_mutex_lock(&rt->mu);
		rt_run_unref_locked(r);
		pthread_mutex_unlock(&rt->mu);
		goto fail;
	}
	/* a patched system prompt (--system-prompt, else the --agent
	 * patch's own): the live steps see it; the prefix was checked
	 * against the recorded one */
	const char *sp =
	    json_string_value(json_object_get(opts, "system_prompt"));
	if (sp || json_object_get(opts, "agent"))
		set_system_prompt(r, sp ? sp : a->system_prompt, !sp);
	/* what the answer and the log say, read before the run is queued: a
	 * worker may run it to its end and free it once the lock drops */
	snprintf(id, 64, "%s", r->id);
	if (prefix_us)
		*prefix_us = r->replay->prefix_ns / 1000;
	wd_info("run %s: replay of %s from step %d for %s", r->id, of,
		r->replay->from, r->caller.user);
	pthread_mutex_lock(&rt->mu);
	r->next = rt->runs;
	rt->runs = r;
	rt_m_add(r, WD_M_RUNS_STARTED, 1, NULL, NULL, NULL);
	rt_enqueue_locked(rt, r);
	pthread_mutex_unlock(&rt->mu);
	rc = 0;
fail:
	for (int s = 0; s < n; s++) {
		json_decref(prompts[s]);
		json_decref(resps[s]);
	}
	free(prompts);
	free(resps);
	json_decref(floor);
	rt_replay_free(rp); /* NULL once the run owns it */
	wd_pset_unref(ps);  /* the run holds its own reference */
	wd_pset_unref(base);
	return rc;
}
