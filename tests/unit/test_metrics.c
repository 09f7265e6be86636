/* The labelled /metrics families (daemon/alert/metrics.c): every family
 * has HELP and TYPE, histograms are cumulative with +Inf = _count, label
 * values are escaped, and the series cap folds new label sets into
 * "other" with the totals kept exact. promtool's own check of a real
 * scrape is tests/integration/monitoring.sh. */
#include <string.h>

#include "alert/metrics.h"
#include "t.h"

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

int main(void)
{
	struct wd_metrics *m = wd_metrics_new(3);
	const char *l[] = {"data", "analyst", "fetch", "1", "ok"};
	wd_metrics_add(m, WD_M_TOOL_CALLS, 2, l);
	wd_metrics_add(m, WD_M_TOOL_CALLS, 1, l);
	const char *h[] = {"data", "analyst", "fetch", "1"};
	wd_metrics_observe(m, WD_M_TOOL_SECONDS, 0.02, h);
	wd_metrics_observe(m, WD_M_TOOL_SECONDS, 3.0, h);
	wd_metrics_observe(m, WD_M_TOOL_SECONDS, 1000.0, h);
	const char *q[] = {"t\"e\\am", "a\nb", NULL};
	wd_metrics_add(m, WD_M_RUNS_STARTED, 1, q);
	struct wd_buf b = {0};
	wd_metrics_render(m, &b);
	const char *t = b.data;
	T_OK(count(t, "# HELP ") == WD_M_NR && count(t, "# TYPE ") == WD_M_NR,
	     "metrics-help-type", "%d HELP, %d TYPE for %d families",
	     count(t, "# HELP "), count(t, "# TYPE "), WD_M_NR);
	T_OK(strstr(t, "warden_tool_calls_total{team=\"data\",agent="
		       "\"analyst\",tool=\"fetch\",tier=\"1\",outcome=\"ok\"} "
		       "3\n") != NULL,
	     "metrics-counter-labels", "%s", t);
	T_OK(strstr(t, "warden_tool_call_duration_seconds_bucket{team=\"data\","
		       "agent=\"analyst\",tool=\"fetch\",tier=\"1\",le="
		       "\"0.025\"} 1\n") &&
		 strstr(t, "le=\"5\"} 2\n") && strstr(t, "le=\"+Inf\"} 3\n") &&
		 strstr(t, "warden_tool_call_duration_seconds_count{team="
			   "\"data\",agent=\"analyst\",tool=\"fetch\",tier="
			   "\"1\"} 3\n"),
	     "metrics-histogram-cumulative", "%s", t);
	T_OK(strstr(t, "warden_runs_started_total{team=\"t\\\"e\\\\am\","
		       "agent=\"a?b\"} 1\n") != NULL,
	     "metrics-label-escaped", "%s", t);
	/* the cap: 3 label sets per family, then "other" */
	for (int i = 0; i < 10; i++) {
		char tool[16];
		snprintf(tool, sizeof(tool), "t%d", i);
		const char *x[] = {"data", "analyst", tool, "2", "ok"};
		wd_metrics_add(m, WD_M_TOOL_CALLS, 1, x);
	}
	wd_buf_free(&b);
	memset(&b, 0, sizeof(b));
	wd_metrics_render(m, &b);
	t = b.data;
	T_OK(count(t, "warden_tool_calls_total{") == 4 &&
		 strstr(t, "tool=\"other\",tier=\"other\",outcome=\"other\"} "
			   "8\n"),
	     "metrics-cardinality-cap", "%s", t);
	T_OK(wd_metrics_total(m, WD_M_TOOL_CALLS) == 13, "metrics-total-exact",
	     "%llu", (unsigned long long)wd_metrics_total(m, WD_M_TOOL_CALLS));
	wd_buf_free(&b);
	wd_metrics_free(m);
	return T_DONE();
}
