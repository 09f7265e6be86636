/* Labelled Prometheus families of the runtime: runs, steps, model calls,
 * tool calls, refusals, denials, and the latency histograms. One table
 * (metrics.c `families`) names each family, its type, help text and label
 * names; the runtime only says which family and which label values.
 *
 * Cardinality. Label values must come from loaded policy (team, agent and
 * tool names, tiers) or from small fixed sets in the code (outcomes,
 * checks, bounds) — never run ids, users or addresses. Callers that hold a
 * name the model chose (a tool call for a tool the agent was not granted)
 * pass WD_METRICS_UNGRANTED instead. Each family holds at most max_series
 * label sets; later ones are added to one series whose labels are all
 * "other", so totals stay exact while memory and scrape size stay bounded.
 *
 * Thread-safe (one mutex; a few updates per step).
 */
#ifndef WD_ALERT_METRICS_H
#define WD_ALERT_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"

enum wd_metric {
	WD_M_RUNS_STARTED,     /* counter {team, agent} */
	WD_M_RUNS_ENDED,       /* counter {team, agent, outcome} */
	WD_M_BUDGET_STOPS,     /* counter {team, agent, bound} */
	WD_M_STEPS,	       /* counter {team, agent} */
	WD_M_MODEL_CALLS,      /* counter {team, agent, outcome} */
	WD_M_TOOL_CALLS,       /* counter {team, agent, tool, tier, outcome} */
	WD_M_TOOL_REFUSALS,    /* counter {team, agent, tool, check} */
	WD_M_DENIALS,	       /* counter {team, agent, tool, tier, verdict} */
	WD_M_DENIALS_UNTRACED, /* counter {team, agent, tool, tier} */
	WD_M_STEP_SECONDS,     /* histogram {team, agent} */
	WD_M_MODEL_SECONDS,    /* histogram {team, agent, outcome} */
	WD_M_TOOL_SECONDS,     /* histogram {team, agent, tool, tier} */
	WD_M_NR,
};

#define WD_METRICS_UNGRANTED "not_granted"

struct wd_metrics;

/* max_series per family; 0 = 2048. Never NULL (aborts on OOM). */
struct wd_metrics *wd_metrics_new(uint32_t max_series);
void wd_metrics_free(struct wd_metrics *m);

/* Add n to a counter family. labels: one value per label name of the
 * family, in the table's order (NULL or "" is written "unknown"). */
void wd_metrics_add(struct wd_metrics *m, enum wd_metric id, uint64_t n,
		    const char *const *labels);
/* Observe v (seconds) in a histogram family. */
void wd_metrics_observe(struct wd_metrics *m, enum wd_metric id, double v,
			const char *const *labels);
/* The sum over every series of a counter family (for figures that used to
 * be one unlabelled counter: `warden status`, the bench). */
uint64_t wd_metrics_total(struct wd_metrics *m, enum wd_metric id);

/* Append every family: # HELP, # TYPE, then its series (histograms as
 * _bucket{le=...} cumulative, _sum, _count). */
void wd_metrics_render(struct wd_metrics *m, struct wd_buf *out);

/* Append a family's `# HELP` and `# TYPE` lines (every /metrics renderer) */
void wd_metrics_family(struct wd_buf *b, const char *name, const char *type,
		       const char *help);
/* Append one Prometheus label pair `name="value"` (value escaped; preceded
 * by a comma unless first). Shared with the other /metrics renderers. */
void wd_metrics_label(struct wd_buf *b, const char *name, const char *value,
		      bool first);

/* The exposition text for a reader of teams[] only (metrics_scope.c): a
 * series with a `team` label is kept when it is one of theirs; one naming
 * an agent, a tool or an alert key without a team is left out; the rest
 * (node-wide) is kept. Allocated. */
char *wd_metrics_scoped(const char *text, const char *const *teams,
			size_t n_teams);

#endif
