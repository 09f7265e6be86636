/* The runtime's side of the labelled /metrics families (alert/metrics.h):
 * every label value here comes from the run's agent definition or
 * manifest (policy), or from the code's own small sets. */
#include <string.h>

#include "policy/agent.h"
#include "runtime/rt_int.h"

void rt_m_add(struct wd_run *r, enum wd_metric id, uint64_t n, const char *l2,
	      const char *l3, const char *l4)
{
	/* the run's own copies: they outlive its policy set (shed) */
	const char *l[5] = {r->team, r->agent_name, l2, l3, l4};
	wd_metrics_add(r->rt->metrics, id, n, l);
}

void rt_m_observe(struct wd_run *r, enum wd_metric id, double seconds,
		  const char *l2, const char *l3)
{
	const char *l[4] = {r->team, r->agent_name, l2, l3};
	wd_metrics_observe(r->rt->metrics, id, seconds, l);
}

const char *rt_m_tool_label(const struct wd_run *r, const char *name)
{
	if (!name)
		return WD_METRICS_UNGRANTED;
	const struct wd_agent_def *a = r->agent;
	for (int i = 0; i < a->n_tools; i++)
		if (!strcmp(a->tools[i], name))
			return a->tools[i];
	size_t pl = strlen(WD_SUBAGENT_TOOL_PREFIX);
	if (!strncmp(name, WD_SUBAGENT_TOOL_PREFIX, pl))
		for (int i = 0; i < a->n_subagents; i++)
			if (!strcmp(a->subagents[i], name + pl))
				return name;
	return WD_METRICS_UNGRANTED;
}

const char *rt_m_tier(int tier)
{
	static const char *const t[] = {"unknown", "1", "2", "3"};
	return tier >= 1 && tier <= 3 ? t[tier] : t[0];
}

/* Every agent x granted tool of a policy set gets its series at 0 when the
 * set is loaded: Prometheus's rate() and increase() see nothing of a
 * counter's first value, so a tool's first burst of denials would be
 * invisible to the shipped spike rules (policy/monitoring) if its series
 * only appeared with that burst. Bounded by the policy. */
void rt_m_init_policy(struct wd_rt *rt, const struct wd_pset *ps)
{
	static const char *const bounds[] = {"max_steps", "token_budget",
					     "wall_clock_s", "cost_cap_usd"};
	for (int i = 0; i < ps->n_agents; i++) {
		const struct wd_agent_def *a = &ps->agents[i];
		const char *l[5] = {a->team, a->name, NULL, NULL, NULL};
		wd_metrics_add(rt->metrics, WD_M_RUNS_STARTED, 0, l);
		wd_metrics_add(rt->metrics, WD_M_STEPS, 0, l);
		for (size_t b = 0; b < WD_ARRAY_SIZE(bounds); b++) {
			l[2] = bounds[b];
			wd_metrics_add(rt->metrics, WD_M_BUDGET_STOPS, 0, l);
		}
		for (int t = 0; t < a->n_tools; t++) {
			const struct wd_manifest *m =
			    wd_pset_tool(ps, a->tools[t]);
			if (!m)
				continue;
			l[2] = m->name;
			l[3] = rt_m_tier((int)m->tier);
			/* audits at 0 too: only a manifest in audit mode
			 * makes them, but it may be replaced while the
			 * daemon runs (bounded: two per agent x tool) */
			l[4] = "denied";
			wd_metrics_add(rt->metrics, WD_M_DENIALS, 0, l);
			l[4] = "audited";
			wd_metrics_add(rt->metrics, WD_M_DENIALS, 0, l);
			l[4] = NULL;
			wd_metrics_add(rt->metrics, WD_M_DENIALS_UNTRACED, 0,
				       l);
		}
	}
}
