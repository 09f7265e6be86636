/* `warden run` on a node in a fleet: the run was queued (POST /v1/runs
 * answered {fleet: true}); whichever node claims it runs it, and writes how
 * it ended to the fleet database. This follows the run's row through the
 * node it was submitted to (GET /v1/fleet/runs/ID) until it is done or
 * interrupted. The steps themselves are in the trace of the node that ran
 * it (`warden trace show --state` there). */
#include <string.h>
#include <time.h>

#include "api/client.h"
#include "cli/cli.h"

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int wd_cli_run_follow_fleet(const char *sock, const char *run_id, bool json)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/fleet/runs/%s", run_id);
	if (!json)
		printf("run %s (queued in the fleet)\n", run_id);
	fflush(stdout);
	char last_node[64] = "";
	int unreachable = 0;
	for (;;) {
		long st = 0;
		json_t *o =
		    wd_cli_api("run", sock, "GET", path, NULL, 200, &st);
		if (!o) {
			/* 503: the fleet database is away for now; the run
			 * goes on where it is */
			if (st == 503 && ++unreachable < 600) {
				nap_ms(1000);
				continue;
			}
			return WD_EXIT_FAIL;
		}
		unreachable = 0;
		const char *state =
		    json_string_value(json_object_get(o, "state"));
		const char *node =
		    json_string_value(json_object_get(o, "node"));
		/* a run queued again (resume: if_read_only) is claimed
		 * again, by another node */
		if (node && strcmp(node, last_node) && !json) {
			const char *lid = json_string_value(
			    json_object_get(o, "local_run_id"));
			printf(
			    "[fleet] claimed by %s (%s)%s%s\n", node,
			    json_string_value(json_object_get(o, "node_host"))
				?: "?",
			    last_node[0] ? ", run again as " : "",
			    last_node[0] && lid ? lid : "");
			fflush(stdout);
		}
		if (node)
			snprintf(last_node, sizeof(last_node), "%s", node);
		if (state &&
		    (!strcmp(state, "done") || !strcmp(state, "interrupted"))) {
			const char *status =
			    json_string_value(json_object_get(o, "status"));
			char final[32];
			snprintf(final, sizeof(final), "%s",
				 status ? status : state);
			if (json) {
				wd_cli_print_json(o, JSON_COMPACT, "{}");
			} else {
				const char *why = json_string_value(
				    json_object_get(o, "reason"));
				const char *out = json_string_value(
				    json_object_get(o, "output"));
				printf("[fleet] run_end status=%s steps=%lld "
				       "cost=$%.6f on %s%s%s\n",
				       final,
				       json_integer_value(
					   json_object_get(o, "steps")),
				       json_number_value(
					   json_object_get(o, "cost_usd")),
				       node ? node : "?",
				       why ? " reason: " : "", why ? why : "");
				if (out)
					printf("\n%s\n", out);
			}
			json_decref(o);
			return wd_cli_run_exit(final);
		}
		json_decref(o);
		nap_ms(100);
	}
}
