/* /metrics for a reader of some teams only (daemon/alert/metrics_scope.c):
 * the series of their teams stay, another team's are left out whatever
 * family they are in (the labelled families, the alerter's denial
 * counters), a series naming an agent, a tool or an alert key without a
 * team is left out, node-wide series and the HELP/TYPE lines stay, and an
 * escaped label value is compared unescaped. */
#include <stdlib.h>
#include <string.h>

#include "alert/metrics.h"
#include "t.h"

int main(void)
{
	struct wd_metrics *m = wd_metrics_new(16);
	const char *mine[] = {"data", "analyst", "fetch", "1", "ok"};
	const char *theirs[] = {"payroll", "payer", "wire", "2", "ok"};
	const char *odd[] = {"t\"e\\am", "a\nb", NULL};
	wd_metrics_add(m, WD_M_TOOL_CALLS, 2, mine);
	wd_metrics_add(m, WD_M_TOOL_CALLS, 5, theirs);
	wd_metrics_add(m, WD_M_RUNS_STARTED, 1, odd);
	wd_metrics_observe(m, WD_M_TOOL_SECONDS, 0.5, theirs);
	struct wd_buf b = {0};
	wd_metrics_render(m, &b);
	wd_buf_printf(
	    &b, "warden_api_connections 3\n"
		"warden_denial_events_total{source=\"bpf\",kind=\"connect\","
		"team=\"payroll\",tool=\"wire\",verdict=\"denied\"} 4\n"
		"warden_denial_events_total{source=\"bpf\",kind=\"connect\","
		"team=\"data\",tool=\"fetch\",verdict=\"denied\"} 1\n"
		"warden_denial_rate_per_second{dim=\"agent\",key=\"payer\","
		"window=\"short\"} 0.5\n"
		"warden_model_route_open{provider=\"fa\",model=\"m1\"} 0\n");
	const char *teams[] = {"data", "t\"e\\am"};
	char *s = wd_metrics_scoped(b.data, teams, 2);
	T_OK(strstr(s, "team=\"data\",agent=\"analyst\",tool=\"fetch\"") !=
		 NULL,
	     "own-team-kept", "%s", s);
	T_OK(!strstr(s, "payroll") && !strstr(s, "payer") && !strstr(s, "wire"),
	     "other-team-left-out", "%s", s);
	T_OK(strstr(s, "team=\"data\",tool=\"fetch\",verdict") != NULL,
	     "own-denials-kept", "%s", s);
	T_OK(strstr(s, "team=\"t\\\"e\\\\am\"") != NULL, "escaped-team-kept",
	     "%s", s);
	T_OK(strstr(s, "warden_api_connections 3\n") != NULL &&
		 strstr(s, "warden_model_route_open{provider=\"fa\"") != NULL,
	     "node-wide-kept", "%s", s);
	T_OK(strstr(s, "# TYPE warden_tool_call_duration_seconds histogram") !=
		 NULL,
	     "help-type-kept", "%s", s);
	free(s);
	/* a reader of no team: no labelled series of any team */
	s = wd_metrics_scoped(b.data, NULL, 0);
	T_OK(!strstr(s, "team=") && !strstr(s, "key="), "no-team-none", "%s",
	     s);
	T_OK(strstr(s, "warden_api_connections 3\n") != NULL,
	     "no-team-node-wide", "%s", s);
	free(s);
	wd_buf_free(&b);
	wd_metrics_free(m);
	return T_DONE();
}
