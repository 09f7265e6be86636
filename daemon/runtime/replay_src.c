/* Reading a recorded run back for a replay (replay.c): its records by
 * step, the recorded definitions (agent, manifests) parsed again from
 * their blobs, patches applied, and the replay's own policy set built from
 * them, with users and gateway borrowed from today's policy (the caller's
 * scopes are today's: every live call is authorised again). */
#include <string.h>

#include "broker/broker.h"
#include "gateway/gateway.h"
#include "policy/agent.h"
#include "runtime/replay_int.h"
#include "trace/records.h"
#include "trace/trace.h"

int rp_blob(struct wd_rt *rt, const char *what, int step, const char *ref,
	    char **data, size_t *len, struct wd_err *err)
{
	struct wd_err be = {0};
	if (!ref)
		return wd_err_set(err, -ENOENT,
				  "the record cannot be reproduced: step %d "
				  "names no %s",
				  step, what);
	int rc = wd_trace_get_blob(rt->trace, ref, data, len, &be);
	if (rc)
		return wd_err_set(err, rc == -ENOENT ? -ENOENT : -EBADMSG,
				  "the record cannot be reproduced: step %d: "
				  "%s %s: %s (%s; `warden trace verify` "
				  "reports it)",
				  step, what, ref, be.msg,
				  rc == -ENOENT ? "missing blob"
						: "damaged blob");
	return 0;
}

int rp_load_original(struct wd_rt *rt, const char *id, struct rp_orig *o,
		     struct wd_err *err)
{
	memset(o, 0, sizeof(*o));
	json_t *recs = NULL;
	int rc = wd_trace_run_records(rt->trace, id, &recs, err);
	if (rc)
		return rc;
	if (!json_array_size(recs)) {
		json_decref(recs);
		return wd_err_set(err, -ENOENT, "no run '%s' in the trace", id);
	}
	o->records = recs;
	o->calls = json_array();
	o->recorded = json_object();
	/* "step\x1fcall id" -> tool_attempt, or in a replay the record of a
	 * call its gate answered (recorded, mock, refused) */
	json_t *attempts = json_object();
	size_t i;
	json_t *x;
	json_array_foreach(recs, i, x)
	{
		int step = (int)json_integer_value(json_object_get(x, "step"));
		const char *cid = json_string_value(
		    json_object_get(x, "gen_ai.tool.call.id"));
		cleanup_free char *ck =
		    wd_asprintf("%d\x1f%s", step, cid ? cid : "");
		switch (wd_rec_type_json(x)) {
		case WD_REC_RUN_START:
			if (!o->start)
				o->start = x;
			break;
		case WD_REC_MODEL_CALL:
			/* one model_call per step: the run's steps */
			if (step == (int)json_array_size(o->calls) &&
			    !json_object_get(x, "error"))
				json_array_append(o->calls, x);
			break;
		case WD_REC_REPLAY_STEP:
			/* a replay's steps taken from its record are steps
			 * of its own record too (a replay of a replay) */
			if (step == (int)json_array_size(o->calls))
				json_array_append_new(
				    o->calls,
				    json_pack(
					"{s:i,s:O,s:O?,s:O?,s:O?}", "step",
					step, "seq", json_object_get(x, "seq"),
					"prompt_hash",
					json_object_get(x, "prompt_hash"),
					"prompt_ref",
					json_object_get(x, "prompt_ref"),
					"response_ref",
					json_object_get(x, "response_ref")));
			break;
		case WD_REC_TOOL_ATTEMPT:
			json_object_set(attempts, ck, x);
			break;
		case WD_REC_REPLAY_REFUSED:
			/* a replay's refused call was answered (repeats of it
			 * too, tools.c): one its replay's prefix knows */
			if (!json_object_get(attempts, ck))
				json_object_set(attempts, ck, x);
			break;
		case WD_REC_TOOL_RESULT: {
			json_t *at = json_object_get(attempts, ck);
			const char *ref =
			    json_string_value(json_object_get(x, "result_ref"));
			/* a replay's result its broker gate answered from a
			 * recording or a mock (replay_gate.c) has no attempt:
			 * it carries the call's args itself. It is the result
			 * that replay's call had, and a replay of the replay
			 * reproduces it; what runs live is still decided by
			 * the stricter side effects (replay_gate.c) */
			const char *how =
			    json_string_value(json_object_get(x, "replay"));
			if (!at && ref && how &&
			    (!strcmp(how, "recorded") ||
			     !strcmp(how, "mock"))) {
				at = x;
				json_object_set(attempts, ck, x);
			}
			if (!at || !ref)
				break;
			json_t *args = json_object_get(at, "args");
			char *text = NULL;
			size_t len = 0;
			json_t *loaded = NULL;
			const char *aref =
			    json_string_value(json_object_get(at, "args_ref"));
			if (!args && aref &&
			    !wd_trace_get_blob(rt->trace, aref, &text, &len,
					       NULL)) {
				loaded = json_loadb(text, len, 0, NULL);
				free(text);
				args = loaded;
			}
			if (args) {
				char *k = wd_broker_replay_key(
				    step,
				    json_string_value(
					json_object_get(x, "gen_ai.tool.name")),
				    args);
				json_object_set_new(o->recorded, k,
						    json_string(ref));
				free(k);
			}
			json_decref(loaded);
			break;
		}
		case WD_REC_RUN_END:
			o->end = x;
			break;
		default:
			break;
		}
	}
	o->attempts = attempts;
	if (!o->start)
		return wd_err_set(err, -EINVAL, "run '%s' has no run_start",
				  id);
	return 0;
}

void rp_orig_free(struct rp_orig *o)
{
	json_decref(o->records);
	json_decref(o->calls);
	json_decref(o->recorded);
	json_decref(o->attempts);
	memset(o, 0, sizeof(*o));
}

/* The definition named `name` in a policy file's text. */
static int parse_agent(const char *text, const char *name,
		       struct wd_agent_def *d, struct wd_err *err)
{
	struct wd_agent **v = NULL;
	int n = 0;
	struct wd_diag dg = {0};
	if (wd_agent_load_all_str("recorded agent definition", text,
				  strlen(text), &v, &n, &dg)) {
		int rc = wd_err_set(err, -EINVAL, "agent definition: %s",
				    dg.n ? dg.msgs[0] : "invalid");
		wd_diag_free(&dg);
		return rc;
	}
	int rc = -ENOENT;
	for (int i = 0; i < n; i++)
		if (!name || !strcmp(v[i]->name, name)) {
			wd_agent_def_from(d, v[i]);
			d->def_text = wd_strdup(text);
			rc = 0;
			break;
		}
	wd_agent_free_all(v, n);
	if (rc)
		wd_err_set(err, rc, "the agent definition has no agent '%s'",
			   name);
	return rc;
}

static bool strv_has(char *const *v, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

/* An --agent patch from a caller who may not change the policy: the
 * prompt, model, description and context are theirs to try, but what the
 * platform grants the agent (its name and team, tools and sub-agents, the
 * four bounds, what its trace keeps) is policy. A patch may narrow those,
 * never widen them. 0, or -EPERM naming the first field widened. */
static int patch_within(const struct wd_agent_def *p,
			const struct wd_agent_def *r, struct wd_err *err)
{
	const char *f = NULL;
	if (strcmp(p->name, r->name))
		f = "name";
	else if (strcmp(p->team, r->team))
		f = "team";
	for (int i = 0; !f && i < p->n_tools; i++)
		if (!strv_has(r->tools, r->n_tools, p->tools[i]))
			f = "tools";
	for (int i = 0; !f && i < p->n_subagents; i++)
		if (!strv_has(r->subagents, r->n_subagents, p->subagents[i]))
			f = "subagents";
	if (f)
		goto out;
	if (p->max_steps > r->max_steps)
		f = "bounds.max_steps";
	else if (p->token_budget > r->token_budget)
		f = "bounds.token_budget";
	else if (p->wall_clock_s > r->wall_clock_s)
		f = "bounds.wall_clock_s";
	else if (p->cost_cap_usd > r->cost_cap_usd)
		f = "bounds.cost_cap_usd";
	else if (r->hash_only && !p->hash_only)
		f = "trace.payloads";
	else if (p->unrecorded_read_only && !r->unrecorded_read_only)
		f = "trace.unrecorded_read_only";
	else if (p->retention_days != r->retention_days)
		f = "trace.retention_days";
	else if (p->approval_ttl_s > r->approval_ttl_s)
		f = "bounds.approval_ttl_s";
out:
	if (!f)
		return 0;
	return wd_err_set(err, -EPERM,
			  "--agent: the patch changes '%s' of agent '%s' "
			  "beyond its recorded definition; a patch may change "
			  "the prompt, model and context, and only narrow "
			  "grants, bounds and trace settings (policy, which "
			  "only root may widen)",
			  f, r->name);
}

static struct wd_manifest *parse_manifest(const char *text, const char *name,
					  const char *what, struct wd_err *err)
{
	struct wd_manifest **v = NULL, *m = NULL;
	int n = 0;
	struct wd_diag dg = {0};
	if (wd_manifest_load_all_str(what, text, strlen(text), &v, &n, &dg)) {
		wd_err_set(err, -EINVAL, "%s", dg.n ? dg.msgs[0] : what);
		wd_diag_free(&dg);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		if (!m && !strcmp(v[i]->name, name))
			m = v[i];
		else
			wd_manifest_free(v[i]);
	}
	free(v);
	if (!m)
		wd_err_set(err, -ENOENT, "%s defines no tool '%s'", what, name);
	return m;
}

static bool has_scope(const struct wd_manifest *m, const char *s)
{
	for (int i = 0; i < m->n_auth_scopes; i++)
		if (!strcmp(m->auth_scopes[i], s))
			return true;
	return false;
}

/* A --tool patch may change how a tool runs, never who may call it: the
 * recorded auth mode and every recorded scope stay (else a patch would be
 * a way around authz), and its side effects are judged with the
 * recorded ones by the broker (replay_gate.c). */
static int patch_ok(const struct wd_manifest *rec, const struct wd_manifest *p,
		    struct wd_err *err)
{
	if (!rec)
		return 0;
	if (p->auth_mode != rec->auth_mode)
		return wd_err_set(err, -EPERM,
				  "--tool %s: the patched manifest changes "
				  "auth.mode; a replay keeps the recorded one",
				  p->name);
	for (int i = 0; i < rec->n_auth_scopes; i++)
		if (!has_scope(p, rec->auth_scopes[i]))
			return wd_err_set(err, -EPERM,
					  "--tool %s: the patched manifest "
					  "drops scope '%s'; a replay keeps "
					  "every recorded scope",
					  p->name, rec->auth_scopes[i]);
	return 0;
}

/* The side effects of a manifest a --tool patch replaced, into `floor`
 * (tool -> label, the stricter kept): the broker's gate judges by them
 * too (replay_gate.c), so a patch cannot relabel a tool below what it
 * replaced, recorded or today's. */
static void floor_add(json_t *floor, const char *name,
		      const struct wd_manifest *m)
{
	if (!floor || !m)
		return;
	const char *old = json_string_value(json_object_get(floor, name));
	if (!old || m->side_effects > wd_side_effects_parse(old))
		json_object_set_new(
		    floor, name,
		    json_string(wd_side_effects_words[m->side_effects]));
}

static void pset_add_tool(struct wd_pset *p, struct wd_manifest *m,
			  const char *text)
{
	p->tools =
	    wd_realloc(p->tools, (size_t)(p->n_tools + 1) * sizeof(*p->tools));
	p->tool_texts = wd_realloc(p->tool_texts,
				   (size_t)(p->n_tools + 2) * sizeof(char *));
	p->tool_texts[p->n_tools] = wd_strdup(text);
	p->tool_texts[p->n_tools + 1] = NULL;
	p->tools[p->n_tools++] = m;
}

static const char *base_text(const struct wd_pset *b, const char *name)
{
	for (int i = 0; i < b->n_tools; i++)
		if (!strcmp(b->tools[i]->name, name))
			return b->tool_texts ? b->tool_texts[i] : NULL;
	return NULL;
}

/* The first child run of agent `name` among a run's records (its
 * tool_attempt names it), or NULL. */
static const char *child_of(json_t *records, const char *name)
{
	size_t i;
	json_t *x;
	json_array_foreach(records, i, x)
	{
		const char *sub =
		    json_string_value(json_object_get(x, "subagent"));
		const char *cid =
		    json_string_value(json_object_get(x, "child_run_id"));
		if (wd_rec_type_json(x) == WD_REC_TOOL_ATTEMPT && sub && cid &&
		    !strcmp(sub, name))
			return cid;
	}
	return NULL;
}

/* A sub-agent's definition and its tools for the replay's set: as its run
 * in the original recorded them (replayed by the same rules), else
 * today's (it never ran in the original). Depth-bounded like
 * wd_agents_check_subagents. */
static int add_subagent(struct wd_rt *rt, struct wd_pset *p,
			struct wd_pset *base, json_t *records, const char *name,
			const json_t *ptools, json_t *floor, int depth,
			struct wd_err *err)
{
	if (wd_pset_agent(p, name) || depth > WD_SUBAGENT_MAX_DEPTH)
		return 0;
	const char *cid = child_of(records, name);
	json_t *crecs = NULL;
	if (cid)
		wd_trace_run_records(rt->trace, cid, &crecs, NULL);
	json_t *defs = json_object_get(json_array_get(crecs, 0), "definitions");
	const char *aref = json_string_value(
	    json_object_get(json_object_get(defs, "agent"), "ref"));
	struct wd_agent_def d = {0};
	int rc;
	if (aref) {
		char *text = NULL;
		size_t len = 0;
		rc = rp_blob(rt, "sub-agent definition", 0, aref, &text, &len,
			     err);
		if (!rc)
			rc = parse_agent(text, name, &d, err);
		free(text);
	} else {
		const struct wd_agent_def *bd = wd_pset_agent(base, name);
		rc = bd && bd->def_text
			 ? parse_agent(bd->def_text, name, &d, err)
			 : wd_err_set(err, -ENOENT,
				      "sub-agent '%s': no "
				      "recorded or current "
				      "definition",
				      name);
	}
	if (rc) {
		json_decref(crecs);
		return rc;
	}
	p->agents = wd_realloc(p->agents,
			       (size_t)(p->n_agents + 1) * sizeof(*p->agents));
	p->agents[p->n_agents++] = d;
	json_t *rtools = json_object_get(defs, "tools");
	for (int i = 0; i < d.n_tools; i++) {
		const char *tn = d.tools[i];
		if (wd_pset_tool(p, tn))
			continue;
		const char *ref = json_string_value(
		    json_object_get(json_object_get(rtools, tn), "ref"));
		char *text = NULL;
		size_t len = 0;
		struct wd_manifest *m = NULL;
		if (ref &&
		    !rp_blob(rt, "tool manifest", 0, ref, &text, &len, err))
			m = parse_manifest(text, tn, "recorded manifest", err);
		else if (!ref && base_text(base, tn))
			m = parse_manifest(base_text(base, tn), tn, "manifest",
					   err);
		/* a --tool patch of a sub-agent's tool: by the same rules
		 * as the top-level agent's (patch_ok, the stricter label) */
		const char *pt = json_string_value(json_object_get(ptools, tn));
		if (pt) {
			struct wd_manifest *pm = NULL;
			if (ref && !m) {
				cleanup_free char *why = wd_strdup(err->msg);
				rc = wd_err_set(err, -EINVAL,
						"--tool %s: sub-agent '%s' "
						"recorded a manifest for it "
						"that cannot be read (%s), so "
						"the patch cannot be checked "
						"against it",
						tn, name, why);
			} else if (!(pm = parse_manifest(
					 pt, tn, "--tool manifest", err)))
				rc = -EINVAL;
			else if (patch_ok(m, pm, err))
				rc = -EPERM;
			if (rc) {
				if (pm)
					wd_manifest_free(pm);
				if (m)
					wd_manifest_free(m);
				free(text);
				json_decref(crecs);
				return rc;
			}
			floor_add(floor, tn, m);
			if (m)
				wd_manifest_free(m);
			m = pm;
			pset_add_tool(p, m, pt);
		} else if (m) {
			pset_add_tool(p, m, text ? text : base_text(base, tn));
		}
		free(text);
	}
	char **subs = p->agents[p->n_agents - 1].subagents;
	int nsubs = p->agents[p->n_agents - 1].n_subagents;
	for (int i = 0; i < nsubs && !rc; i++)
		rc = add_subagent(rt, p, base, crecs ? crecs : records, subs[i],
				  ptools, floor, depth + 1, err);
	json_decref(crecs);
	return rc;
}

int rp_build_pset(struct wd_rt *rt, struct wd_pset *base,
		  const struct rp_orig *o, const json_t *opts,
		  bool may_change_policy, json_t *floor, struct wd_pset **out,
		  struct wd_err *err)
{
	json_t *defs = json_object_get(o->start, "definitions");
	const char *aname =
	    json_string_value(json_object_get(o->start, "agent"));
	const char *aref = json_string_value(
	    json_object_get(json_object_get(defs, "agent"), "ref"));
	if (!json_is_object(defs) || !aref)
		return wd_err_set(
		    err, -EINVAL,
		    "run '%s' was recorded without its "
		    "definitions (run_start.definitions): it "
		    "cannot be replayed",
		    json_string_value(json_object_get(o->start, "run_id")));
	struct wd_pset *p = wd_calloc(1, sizeof(*p));
	p->refs = 1;
	p->dir = wd_strdup(base->dir);
	p->base = wd_pset_ref(base);
	p->users = base->users;
	p->gw = wd_gateway_ref(base->gw);
	p->agents = wd_calloc(1, sizeof(*p->agents));
	int rc;
	char *text = NULL;
	size_t len = 0;
	const char *patched = json_string_value(json_object_get(opts, "agent"));
	if (patched) {
		rc = parse_agent(patched, NULL, &p->agents[0], err);
		if (!rc && !may_change_policy) {
			struct wd_agent_def rd = {0};
			rc = rp_blob(rt, "agent definition", 0, aref, &text,
				     &len, err);
			if (!rc)
				rc = parse_agent(text, aname, &rd, err);
			free(text);
			text = NULL;
			if (!rc)
				rc = patch_within(&p->agents[0], &rd, err);
			wd_agent_def_free(&rd);
			if (rc)
				wd_agent_def_free(&p->agents[0]);
		}
	} else {
		rc = rp_blob(rt, "agent definition", 0, aref, &text, &len, err);
		if (!rc)
			rc = parse_agent(text, aname, &p->agents[0], err);
		free(text);
	}
	if (rc) {
		free(p->agents);
		p->agents = NULL;
		wd_pset_unref(p);
		return rc;
	}
	p->n_agents = 1;
	struct wd_agent_def *a = &p->agents[0];
	const char *sp =
	    json_string_value(json_object_get(opts, "system_prompt"));
	if (sp) {
		free(a->system_prompt);
		a->system_prompt = wd_strdup(sp);
	}
	const char *model = json_string_value(json_object_get(opts, "model"));
	if (model) {
		if (!wd_gateway_has_model(p->gw, model)) {
			wd_pset_unref(p);
			return wd_err_set(err, -EINVAL,
					  "--model %s: not a model alias of "
					  "today's gateway",
					  model);
		}
		free(a->model);
		a->model = wd_strdup(model);
	}
	json_t *rtools = json_object_get(defs, "tools");
	json_t *ptools = json_object_get(opts, "tool");
	for (int i = 0; i < a->n_tools; i++) {
		const char *name = a->tools[i];
		const char *ref = json_string_value(
		    json_object_get(json_object_get(rtools, name), "ref"));
		struct wd_manifest *rec = NULL;
		char *rtext = NULL;
		if (ref) {
			rc = rp_blob(rt, "tool manifest", 0, ref, &rtext, &len,
				     err);
			if (!rc &&
			    !(rec = parse_manifest(rtext, name,
						   "recorded manifest", err)))
				rc = -EINVAL;
			if (rc) {
				free(rtext);
				wd_pset_unref(p);
				return rc;
			}
		}
		const char *pt =
		    json_string_value(json_object_get(ptools, name));
		if (pt) {
			struct wd_manifest *pm =
			    parse_manifest(pt, name, "--tool manifest", err);
			if (!pm || patch_ok(rec, pm, err)) {
				if (pm)
					wd_manifest_free(pm);
				wd_manifest_free(rec);
				free(rtext);
				wd_pset_unref(p);
				return -EINVAL;
			}
			/* what the patch replaces: the recorded manifest,
			 * else today's (a tool granted by a patched agent) */
			struct wd_manifest *bm =
			    !rec && base_text(base, name)
				? parse_manifest(base_text(base, name), name,
						 "manifest", err)
				: NULL;
			floor_add(floor, name, rec ? rec : bm);
			if (bm)
				wd_manifest_free(bm);
			wd_manifest_free(rec);
			pset_add_tool(p, pm, pt);
		} else if (rec) {
			pset_add_tool(p, rec, rtext);
		} else if (base_text(base, name)) {
			/* granted by a patched agent, not by the original:
			 * today's manifest */
			struct wd_manifest *bm = parse_manifest(
			    base_text(base, name), name, "manifest", err);
			if (bm)
				pset_add_tool(p, bm, base_text(base, name));
		}
		free(rtext);
	}
	for (int i = 0; i < p->agents[0].n_subagents; i++)
		if ((rc = add_subagent(rt, p, base, o->records,
				       p->agents[0].subagents[i], ptools, floor,
				       1, err))) {
			wd_pset_unref(p);
			return rc;
		}
	/* a --tool patch for a tool the replay does not grant would be
	 * accepted and ignored */
	const char *k;
	json_t *v;
	json_object_foreach(ptools, k, v)
	{
		if (!wd_pset_tool(p, k)) {
			wd_pset_unref(p);
			return wd_err_set(err, -EINVAL,
					  "--tool %s: the replayed agent is "
					  "not granted that tool",
					  k);
		}
	}
	*out = p;
	return 0;
}
