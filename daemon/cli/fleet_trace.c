/* warden fleet verify [RUN] | gc [--metadata-days N]: the shipped trace's
 * chain checked and its retention applied, by wardend on the fleet's
 * database (fleet/trace_verify.c, fleet/trace_gc.c). verify: root and the
 * auditors group, exit 1 when a chain is broken; gc: root. */
#include <getopt.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: warden fleet verify [RUN] [--json] [--socket PATH]\n"
		"       warden fleet gc [--metadata-days N] [--json] [--socket "
		"PATH]\n"
		"  verify: each node's hash chain recomputed from the lines it "
		"shipped to the\n"
		"  database (every seq once, in order, each prev the hash of "
		"the line before),\n"
		"  or only around RUN's lines; exit 1 on a break (root, "
		"auditors).\n"
		"  gc: drop the day partitions of shipped lines and index rows "
		"older than N days\n"
		"  (default 395: 13 months) and the payload blobs past their "
		"run's retention\n"
		"  (its agent's retention_days, 30 by default; not of failed "
		"or flagged runs)\n"
		"  for the whole fleet (root).\n");
}

static void print_verify(const json_t *o)
{
	size_t i;
	json_t *n;
	json_array_foreach(json_object_get(o, "nodes"), i, n)
	{
		json_t *sa = json_object_get(n, "starts_after");
		printf("node %s: %lld line(s), seq %lld..%lld, shipped through "
		       "%lld",
		       json_string_value(json_object_get(n, "node")),
		       json_integer_value(json_object_get(n, "lines")),
		       json_integer_value(json_object_get(n, "first_seq")),
		       json_integer_value(json_object_get(n, "last_seq")),
		       json_integer_value(json_object_get(n, "shipped")));
		if (sa)
			printf(" (days before seq %lld dropped by gc)",
			       json_integer_value(sa) + 1);
		long long p =
		    json_integer_value(json_object_get(n, "problems"));
		printf(": %s\n", p ? "BROKEN" : "ok");
	}
	json_array_foreach(json_object_get(o, "problems"), i, n)
	{
		printf("  %s seq %lld: %s: %s\n",
		       json_string_value(json_object_get(n, "node")),
		       json_integer_value(json_object_get(n, "seq")),
		       json_string_value(json_object_get(n, "kind")),
		       json_string_value(json_object_get(n, "message")));
	}
	long long np = json_integer_value(json_object_get(o, "problem_count"));
	if (np > (long long)json_array_size(json_object_get(o, "problems")))
		printf("  ... %lld problem(s) in all\n", np);
	printf("fleet verify: %s\n", np ? "chain broken" : "ok");
}

static void print_gc(const json_t *o)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(o, "partitions_dropped"), i, p)
	    printf("fleet gc: dropped %s\n", json_string_value(p));
	printf("fleet gc: %lld line(s) past %lld days of metadata "
	       "retention removed, %lld run(s) with them\n",
	       json_integer_value(json_object_get(o, "lines_removed")),
	       json_integer_value(json_object_get(o, "metadata_days")),
	       json_integer_value(json_object_get(o, "runs_removed")));
	printf("fleet gc: %lld payload blob(s) deleted (%lld bytes)\n",
	       json_integer_value(json_object_get(o, "blobs_deleted")),
	       json_integer_value(json_object_get(o, "blob_bytes_deleted")));
	printf("fleet gc: %lld fleet run(s)' task and output cleared past "
	       "payload retention; %lld ended run(s) and %lld done "
	       "approval(s) past metadata retention removed from the queue\n",
	       json_integer_value(json_object_get(o, "run_payloads_cleared")),
	       json_integer_value(json_object_get(o, "queue_runs_removed")),
	       json_integer_value(json_object_get(o, "approvals_removed")));
}

int wd_cli_fleet_trace(const char *sock, const char *sub, const char *run,
		       const char *days, bool json)
{
	bool verify = !strcmp(sub, "verify");
	char *end = NULL;
	long d = days ? strtol(days, &end, 10) : 0;
	if ((days && verify) ||
	    (days && (!*days || *end || d < 1 || d > 36500))) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	/* the run id goes into a query string: its own alphabet only */
	if (run && (!*run || strspn(run, "abcdefghijklmnopqrstuvwxyz"
					 "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
					 "0123456789_-") != strlen(run))) {
		fprintf(stderr, "warden fleet: bad run id\n");
		return WD_EXIT_USAGE;
	}
	long st = 0;
	json_t *resp;
	if (verify) {
		struct wd_buf path = {0};
		wd_buf_printf(&path, "/v1/fleet/trace/verify%s%s",
			      run ? "?run=" : "", run ? run : "");
		resp = wd_cli_api("fleet verify", sock, "GET", path.data, NULL,
				  200, &st);
		wd_buf_free(&path);
	} else {
		json_t *body = days
				   ? json_pack("{s:i}", "metadata_days", (int)d)
				   : json_object();
		resp = wd_cli_api("fleet gc", sock, "POST",
				  "/v1/fleet/trace/gc", body, 200, &st);
		json_decref(body);
	}
	if (!resp)
		return st == 400 ? WD_EXIT_USAGE : WD_EXIT_FAIL;
	if (json)
		wd_cli_print_json(resp, JSON_INDENT(2), "{}");
	else if (verify)
		print_verify(resp);
	else
		print_gc(resp);
	int rc = verify && !json_is_true(json_object_get(resp, "ok"))
		     ? WD_EXIT_FAIL
		     : WD_EXIT_OK;
	json_decref(resp);
	return rc;
}

/* `warden trace gc|verify --fleet`: the shipped trace's, fleet-wide --
 * what `warden fleet gc|verify` does (fleet_trace.c), through wardend. */
int wd_cli_trace_fleet(int argc, char **argv, const char *sub)
{
	static const struct option opts[] = {
	    {"fleet", no_argument, 0, 'f'},
	    {"json", no_argument, 0, 'j'},
	    {"metadata-days", required_argument, 0, 'm'},
	    {"socket", required_argument, 0, 's'},
	    {0, 0, 0, 0},
	};
	const char *sock = NULL, *days = NULL;
	bool json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc - 1, argv + 1, "j", opts, NULL)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == 'm')
			days = optarg;
		else if (c == 's')
			sock = optarg;
		else if (c != 'f') {
			fprintf(stderr,
				"warden trace %s --fleet: [--metadata-days N] "
				"[--json] [--socket PATH]%s (the database's "
				"clock: no --now; no --state)\n",
				sub, !strcmp(sub, "verify") ? " [RUN]" : "");
			return WD_EXIT_USAGE;
		}
	}
	int npos = argc - 1 - optind;
	if (npos > (!strcmp(sub, "verify") ? 1 : 0)) {
		fprintf(stderr, "warden trace %s --fleet: too many arguments\n",
			sub);
		return WD_EXIT_USAGE;
	}
	return wd_cli_fleet_trace(wd_cli_socket(sock), sub,
				  npos ? argv[1 + optind] : NULL, days, json);
}

bool wd_cli_trace_fleet_asked(int argc, char **argv, const char *sub)
{
	if (strcmp(sub, "gc") && strcmp(sub, "verify"))
		return false;
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--fleet"))
			return true;
	return false;
}
