/* The runtime's side of the labelled /metrics families (alert/metrics.h):
 * every label value here comes from the run's agent definition or
 * manifest (policy), or from the code's own small sets. */
#include <string.h>

#include "policy/agent.h"
#include "runtime/rt_int.h"

void rt_m_add(struct wd_run *r, enum wd_metric id, uint64_t n, const char *l2,
	      const char *l3, const char *l4)
{
	const char *l[5] = {r->agent->team, r->agent->name, l2, l3, l4};
	wd_metrics_add(r->rt->metrics, id, n, l);
}

void rt_m_observe(struct wd_run *r, enum wd_metric id, double seconds,
		  const char *l2, const char *l3)
{
	const char *l[4] = {r->agent->team, r->agent->name, l2, l3};
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
