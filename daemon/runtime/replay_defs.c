/* What a run records so it can be replayed (DESIGN §4 "Replay
 * (execution)"): run_start names by sha256 the exact definitions it ran
 * under — the agent definition's file, each granted tool's manifest file,
 * the user's scopes as users.yaml gave them, and the gateway route of its
 * model — each stored as a blob, so a replay runs the recorded definitions
 * and not whatever the files say today. */
#include <string.h>

#include "gateway/gateway.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

/* "sha256:..." of text stored as a blob (policy, not a run payload: kept
 * even for hash_only runs), or NULL when the store refused it. */
static json_t *blob_ref(struct wd_run *r, const char *text)
{
	char ref[WD_TRACE_REF_LEN];
	if (!text || wd_trace_put_blob(r->rt->trace, NULL, text, strlen(text),
				       ref, NULL))
		return json_null();
	return json_string(ref);
}

static const char *tool_text(const struct wd_pset *ps, const char *name)
{
	for (int i = 0; i < ps->n_tools; i++)
		if (!strcmp(ps->tools[i]->name, name))
			return ps->tool_texts ? ps->tool_texts[i] : NULL;
	return NULL;
}

json_t *rt_definitions_json(struct wd_run *r)
{
	const struct wd_agent_def *a = r->agent;
	json_t *d = json_object();
	json_object_set_new(d, "agent",
			    json_pack("{s:s,s:o}", "name", a->name, "ref",
				      blob_ref(r, a->def_text)));
	json_t *tools = json_object();
	for (int i = 0; i < a->n_tools; i++) {
		const struct wd_manifest *m = wd_pset_tool(r->ps, a->tools[i]);
		if (!m)
			continue; /* refused at the grant check */
		static const char *const se[] = {"none", "internal",
						 "external"};
		/* a replay records the side effects its gate judged by (the
		 * stricter of its manifest's and its original's): a replay
		 * of a replay cannot inherit a relabelled tool */
		int sev = (int)m->side_effects;
		const struct wd_broker_replay *g = rt_replay_gate(r);
		const char *os = g ? json_string_value(json_object_get(
					 g->orig_side_effects, a->tools[i]))
				   : NULL;
		for (int k = 0; os && k < 3; k++)
			if (!strcmp(os, se[k]) && k > sev)
				sev = k;
		json_object_set_new(
		    tools, a->tools[i],
		    json_pack("{s:o,s:s}", "ref",
			      blob_ref(r, tool_text(r->ps, a->tools[i])),
			      "side_effects", se[sev]));
	}
	json_object_set_new(d, "tools", tools);
	/* the user's scopes entry as the broker will check it */
	json_t *sc = json_array();
	for (int i = 0; i < r->n_scopes; i++)
		json_array_append_new(sc, json_string(r->scopes[i]));
	json_t *se = json_pack("{s:s,s:i,s:o}", "user", r->caller.user, "uid",
			       (int)r->caller.uid, "scopes", sc);
	char *st = json_dumps(se, JSON_COMPACT | JSON_SORT_KEYS);
	json_object_set_new(se, "ref", blob_ref(r, st));
	free(st);
	json_object_set_new(d, "scopes", se);
	json_t *route = wd_gateway_route_json(r->ps->gw, a->model);
	json_t *ro = json_pack("{s:s,s:o}", "model", a->model, "routes",
			       route ? route : json_array());
	char *rt = json_dumps(json_object_get(ro, "routes"),
			      JSON_COMPACT | JSON_SORT_KEYS);
	json_object_set_new(ro, "ref", blob_ref(r, rt));
	free(rt);
	json_object_set_new(d, "route", ro);
	return d;
}
