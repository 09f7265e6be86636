/* warden fleet nodes|runs|run ID [--json]: the fleet as the node asked sees
 * it in the database (wardend --fleet; fleet/fleet.h). `runs` lists the
 * queue's rows the caller may read (the trace's rule), newest first;
 * `run ID` one row with its output. */
#include <getopt.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: warden fleet nodes [--json] [--socket PATH]\n"
		"       warden fleet runs [--state queued|running|done|"
		"interrupted] [--limit N]\n"
		"                         [--json] [--socket PATH]\n"
		"       warden fleet run ID [--json] [--socket PATH]\n"
		"       warden fleet trace [RUN] [--limit N] [--json] "
		"[--socket PATH]\n"
		"       warden fleet cost [--by team|agent|user] [--since "
		"WHEN] [--json]\n"
		"                         [--socket PATH]\n"
		"       warden fleet verify [RUN] [--json] [--socket PATH]\n"
		"       warden fleet gc [--metadata-days N] [--json] "
		"[--socket PATH]\n"
		"  The nodes of the fleet this wardend is in, and its runs "
		"(wardend --fleet URL).\n"
		"  trace: the runs of every node's trace index as shipped "
		"to the database,\n"
		"  newest first, or one run's index rows (payloads stay on "
		"its node).\n"
		"  cost: the ended runs of every node's shipped trace you "
		"may read, each run's\n"
		"  own cost (WHEN: 2026-11-29, 24h, 7d, 30m).\n"
		"  verify: every node's hash chain recomputed from the lines "
		"it shipped (or\n"
		"  around RUN's); exit 1 on a break (root, auditors).\n"
		"  gc: drop shipped days older than N days (default 395) "
		"and payloads past\n"
		"  their run's retention, fleet-wide (root).\n");
}

static const char *js(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "-";
}

/* "2026-12-02T04:01:00.123+00:00" -> "2026-12-02 04:01:00" */
static void ts(const json_t *o, const char *k, char out[20])
{
	const char *s = json_string_value(json_object_get(o, k));
	snprintf(out, 20, "%.10s %.8s", s ? s : "-",
		 s && strlen(s) > 11 ? s + 11 : "");
}

static void print_nodes(const json_t *a)
{
	printf("%-22s %-16s %-8s %4s %-11s %7s  %-19s  %s\n", "NODE", "HOST",
	       "STATE", "CAP", "TIERS 1,2,3", "RUNNING", "HEARTBEAT", "LABELS");
	size_t i;
	json_t *n;
	json_array_foreach(a, i, n)
	{
		char hb[20], tc[40];
		ts(n, "heartbeat_at", hb);
		json_t *t = json_object_get(n, "tier_capacity");
		snprintf(tc, sizeof(tc), "%lld,%lld,%lld",
			 json_integer_value(json_array_get(t, 0)),
			 json_integer_value(json_array_get(t, 1)),
			 json_integer_value(json_array_get(t, 2)));
		char *l = json_dumps(json_object_get(n, "labels"),
				     JSON_COMPACT | JSON_SORT_KEYS);
		printf("%-22s %-16.16s %-8s %4lld %-11s %7lld  %-19s  %s\n",
		       js(n, "id"), js(n, "hostname"), js(n, "state"),
		       json_integer_value(json_object_get(n, "capacity")), tc,
		       json_integer_value(json_object_get(n, "running")), hb,
		       l ? l : "{}");
		free(l);
	}
}

static void print_runs(const json_t *a)
{
	printf("%-20s %-16s %-12s %-11s %-12s %-22s %s\n", "RUN", "AGENT",
	       "TEAM", "STATE", "STATUS", "NODE", "SUBMITTED");
	size_t i;
	json_t *r;
	json_array_foreach(a, i, r)
	{
		char sub[20];
		ts(r, "submitted_at", sub);
		printf("%-20s %-16.16s %-12.12s %-11s %-12s %-22s %s\n",
		       js(r, "run_id"), js(r, "agent"), js(r, "team"),
		       js(r, "state"), js(r, "status"), js(r, "node"), sub);
	}
}

static void print_run(const json_t *r)
{
	printf("run %s: agent %s, team %s, user %s\n", js(r, "run_id"),
	       js(r, "agent"), js(r, "team"), js(r, "user"));
	printf("  state %s", js(r, "state"));
	if (json_object_get(r, "status") &&
	    !json_is_null(json_object_get(r, "status")))
		printf(", status %s, %lld steps, $%.6f", js(r, "status"),
		       json_integer_value(json_object_get(r, "steps")),
		       json_number_value(json_object_get(r, "cost_usd")));
	printf("\n  submitted to %s at %s\n", js(r, "submitted_node"),
	       js(r, "submitted_at"));
	if (json_string_value(json_object_get(r, "node")))
		printf("  claimed by %s (%s) at %s\n", js(r, "node"),
		       js(r, "node_host"), js(r, "claimed_at"));
	if (json_string_value(json_object_get(r, "ended_at")))
		printf("  ended at %s\n", js(r, "ended_at"));
	if (json_string_value(json_object_get(r, "reason")))
		printf("  reason: %s\n", js(r, "reason"));
	const json_t *a = json_object_get(r, "last_attempt");
	if (json_is_object(a))
		printf("  last attempt shipped: step %lld, tool %s, call %s "
		       "(seq %lld), %s\n",
		       json_integer_value(json_object_get(a, "step")),
		       js(a, "tool"), js(a, "call_id"),
		       json_integer_value(json_object_get(a, "seq")),
		       json_is_true(json_object_get(a, "result"))
			   ? "its result recorded"
			   : "no result recorded: it may or may not have "
			     "taken effect");
	else if (!strcmp(js(r, "state"), "interrupted") &&
		 json_object_get(r, "last_attempt"))
		printf("  last attempt shipped: none\n");
	if (json_string_value(json_object_get(r, "output")))
		printf("\n%s\n", js(r, "output"));
}

static void print_trace_runs(const json_t *a)
{
	printf("%-20s %-22s %-14s %-12s %-10s %5s %10s  %s\n", "RUN", "NODE",
	       "AGENT", "TEAM", "STATUS", "STEPS", "COST", "STARTED");
	size_t i;
	json_t *r;
	json_array_foreach(a, i, r)
	{
		char st[20];
		ts(r, "started", st);
		printf("%-20s %-22s %-14.14s %-12.12s %-10s %5lld %10.6f  %s\n",
		       js(r, "run_id"), js(r, "node"), js(r, "agent"),
		       js(r, "team"), js(r, "status"),
		       json_integer_value(json_object_get(r, "steps")),
		       json_number_value(json_object_get(r, "cost_usd")), st);
	}
}

static void print_trace_run(const json_t *o)
{
	const json_t *r = json_object_get(o, "run");
	printf("run %s on %s: agent %s, team %s, user %s, status %s\n",
	       js(r, "run_id"), js(r, "node_id"), js(r, "agent"), js(r, "team"),
	       js(r, "user"), js(r, "status"));
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(o, "records"), i, x)
	{
		const char *st =
		    json_string_value(json_object_get(x, "status"));
		printf("  #%-6lld [step %lld] %-17s %s%s%s\n",
		       json_integer_value(json_object_get(x, "seq")),
		       json_integer_value(json_object_get(x, "step")),
		       js(x, "type"),
		       json_string_value(json_object_get(x, "tool")) ?: "",
		       st ? " status=" : "", st ? st : "");
	}
}

static void print_cost(const json_t *o)
{
	const char *by = js(o, "by");
	printf("%-20s %6s %6s %12s %12s %12s\n", by, "RUNS", "NODES",
	       "INPUT_TOK", "OUTPUT_TOK", "COST_USD");
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(o, "groups"), i, g)
	{
		printf("%-20.20s %6lld %6lld %12lld %12lld %12.6f\n", js(g, by),
		       json_integer_value(json_object_get(g, "runs")),
		       json_integer_value(json_object_get(g, "nodes")),
		       json_integer_value(json_object_get(g, "input_tokens")),
		       json_integer_value(json_object_get(g, "output_tokens")),
		       json_number_value(json_object_get(g, "cost_usd")));
	}
	printf("%-20s %6s %6s %12s %12s %12.6f\n", "total", "", "", "", "",
	       json_number_value(json_object_get(o, "total_usd")));
}

static int verb_fleet(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, 0, 'j'},
	    {"state", required_argument, 0, 't'},
	    {"limit", required_argument, 0, 'l'},
	    {"by", required_argument, 0, 'b'},
	    {"since", required_argument, 0, 'S'},
	    {"metadata-days", required_argument, 0, 'm'},
	    {"socket", required_argument, 0, 's'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	bool json = false;
	const char *sock = NULL, *state = NULL, *limit = NULL, *by = NULL,
		   *since = NULL, *days = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 't':
			state = optarg;
			break;
		case 'l':
			limit = optarg;
			break;
		case 'b':
			by = optarg;
			break;
		case 'S':
			since = optarg;
			break;
		case 'm':
			days = optarg;
			break;
		case 's':
			sock = optarg;
			break;
		case 'h':
			usage(stdout);
			return WD_EXIT_OK;
		default:
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	int npos = argc - optind;
	const char *sub = npos ? argv[optind] : "";
	bool nodes = !strcmp(sub, "nodes") && npos == 1;
	bool runs = !strcmp(sub, "runs") && npos == 1;
	bool run = !strcmp(sub, "run") && npos == 2;
	bool trace = !strcmp(sub, "trace") && (npos == 1 || npos == 2);
	bool trace_run = trace && npos == 2;
	bool cost = !strcmp(sub, "cost") && npos == 1;
	/* the shipped trace's maintenance (fleet_trace.c) */
	if (((!strcmp(sub, "verify") && npos <= 2) ||
	     (!strcmp(sub, "gc") && npos == 1)) &&
	    !state && !limit && !by && !since)
		return wd_cli_fleet_trace(wd_cli_socket(sock), sub,
					  npos == 2 ? argv[optind + 1] : NULL,
					  days, json);
	if (days) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	if ((!nodes && !runs && !run && !trace && !cost) ||
	    ((by || since) && !cost) || (state && !runs) ||
	    (limit && !runs && !(trace && !trace_run))) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	/* values go into a path or query string: only their own alphabets
	 * (the daemon checks them again) */
	if (((run || trace_run) &&
	     strspn(argv[optind + 1],
		    "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789_-") != strlen(argv[optind + 1])) ||
	    (state &&
	     strspn(state, "abcdefghijklmnopqrstuvwxyz") != strlen(state)) ||
	    (limit && strspn(limit, "0123456789") != strlen(limit)) ||
	    (by && strspn(by, "abcdefghijklmnopqrstuvwxyz") != strlen(by)) ||
	    (since && (strspn(since, "0123456789-:TZsmhd") != strlen(since) ||
		       strspn(since, "0123456789") == strlen(since)))) {
		fprintf(stderr, "warden fleet: bad argument\n");
		return WD_EXIT_USAGE;
	}
	sock = wd_cli_socket(sock);
	struct wd_buf path = {0};
	if (nodes)
		wd_buf_printf(&path, "/v1/fleet/nodes");
	else if (run)
		wd_buf_printf(&path, "/v1/fleet/runs/%s", argv[optind + 1]);
	else if (trace_run)
		wd_buf_printf(&path, "/v1/fleet/trace/runs/%s",
			      argv[optind + 1]);
	else if (trace)
		wd_buf_printf(&path, "/v1/fleet/trace/runs?limit=%s",
			      limit ? limit : "100");
	else if (cost)
		wd_buf_printf(&path, "/v1/fleet/cost?by=%s%s%s",
			      by ? by : "team", since ? "&since=" : "",
			      since ? since : "");
	else
		wd_buf_printf(&path, "/v1/fleet/runs?limit=%s%s%s",
			      limit ? limit : "100", state ? "&state=" : "",
			      state ? state : "");
	long st = 0;
	json_t *resp =
	    wd_cli_api("fleet", sock, "GET", path.data, NULL, 200, &st);
	wd_buf_free(&path);
	if (!resp)
		return st == 400 ? WD_EXIT_USAGE : WD_EXIT_FAIL;
	if (json)
		wd_cli_print_json(resp, JSON_INDENT(2), "[]");
	else if (nodes)
		print_nodes(resp);
	else if (runs)
		print_runs(resp);
	else if (trace_run)
		print_trace_run(resp);
	else if (trace)
		print_trace_runs(resp);
	else if (cost)
		print_cost(resp);
	else
		print_run(resp);
	json_decref(resp);
	return WD_EXIT_OK;
}

WD_VERB(fleet, "fleet", "the fleet's nodes and runs (wardend --fleet)",
	verb_fleet);
