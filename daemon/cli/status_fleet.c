/* `warden status`: the node's fleet state, from wardend (GET /v1/status
 * "fleet", fleet/fleet.h wd_fleet_status): not in a fleet, up, or degraded
 * with the database's error. */
#include <stdio.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"
#include "cli/status_int.h"

json_t *wd_status_fleet(char *why, size_t n)
{
	const char *sock = wd_cli_socket(NULL);
	struct wd_err err = {0};
	json_t *resp = NULL;
	long st = 0;
	int rc = wd_api_call(sock, "GET", "/v1/status", NULL, &st, &resp, &err);
	json_t *fleet = NULL;
	if (rc)
		snprintf(why, n, "wardend not reachable: %s", err.msg);
	else if (st != 200)
		snprintf(why, n, "wardend: %s", wd_api_error_text(resp, st));
	else if (!(fleet = json_object_get(resp, "fleet")))
		snprintf(why, n,
			 "not in a fleet (wardend without --fleet): runs start "
			 "on this node");
	json_incref(fleet);
	json_decref(resp);
	return fleet;
}

void wd_status_fleet_text(void)
{
	char why[300] = "";
	json_t *f = wd_status_fleet(why, sizeof(why));
	printf("\nFleet (from wardend)\n");
	if (!f) {
		wd_status_wrap(why);
		return;
	}
	const char *state = json_string_value(json_object_get(f, "state"));
	struct wd_buf b = {0};
	wd_buf_printf(&b,
		      "node %s (%s): %s; capacity %lld, holding %lld, lease "
		      "%lld ms",
		      json_string_value(json_object_get(f, "node")),
		      json_string_value(json_object_get(f, "host")), state,
		      json_integer_value(json_object_get(f, "capacity")),
		      json_integer_value(json_object_get(f, "held")),
		      json_integer_value(json_object_get(f, "lease_ms")));
	json_t *tc = json_object_get(f, "tier_capacity");
	if (tc)
		wd_buf_printf(&b, "; tier 1/2/3 capacity %lld/%lld/%lld",
			      json_integer_value(json_array_get(tc, 0)),
			      json_integer_value(json_array_get(tc, 1)),
			      json_integer_value(json_array_get(tc, 2)));
	const char *wd = json_string_value(json_object_get(f, "when_down"));
	bool here = wd && !strcmp(wd, "run_here");
	if (state && !strcmp(state, "degraded"))
		wd_buf_printf(&b,
			      "; database unreachable (%s): runs held here "
			      "keep running, nothing is claimed, new runs are "
			      "%s",
			      json_string_value(json_object_get(f, "error"))
				  ?: "?",
			      here ? "run on this node (when_down: run_here)"
				   : "refused");
	else if (json_object_get(f, "nodes_up"))
		wd_buf_printf(
		    &b, "; %lld node(s) up, %lld run(s) queued fleet-wide",
		    json_integer_value(json_object_get(f, "nodes_up")),
		    json_integer_value(json_object_get(f, "queued")));
	wd_status_wrap(b.data);
	wd_buf_free(&b);
	json_decref(f);
}
