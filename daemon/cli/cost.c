/* warden cost [--by team|agent|user] [--since WHEN] [--json] */
#include <getopt.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: warden cost [--by team|agent|user] [--since WHEN] "
		   "[--json] [--socket PATH]\n"
		   "  WHEN: 2026-11-29, 2026-11-29T10:00:00Z, 24h, 7d, 30m\n");
}

static int verb_cost(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"by", required_argument, 0, 'b'},
	    {"since", required_argument, 0, 'S'},
	    {"json", no_argument, 0, 'j'},
	    {"socket", required_argument, 0, 's'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	const char *by = "team", *since = NULL, *sock = NULL;
	bool json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			by = optarg;
			break;
		case 'S':
			since = optarg;
			break;
		case 'j':
			json = true;
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
	if (optind != argc ||
	    (strcmp(by, "team") && strcmp(by, "agent") && strcmp(by, "user"))) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	sock = wd_cli_socket(sock);
	struct wd_buf path = {0};
	wd_buf_printf(&path, "/v1/cost?by=%s", by);
	if (since) {
		/* the value goes in a query string: only safe characters;
		 * and a bare number ("30": days? 1970?) is no WHEN */
		if (!*since ||
		    strspn(since, "0123456789-:TZsmhd") != strlen(since) ||
		    strspn(since, "0123456789") == strlen(since)) {
			fprintf(stderr,
				"warden cost: --since wants a date "
				"(2026-11-29[T10:00:00Z]) or an age (7d, 24h, "
				"30m), not '%s'\n",
				since);
			wd_buf_free(&path);
			return WD_EXIT_USAGE;
		}
		wd_buf_printf(&path, "&since=%s", since);
	}
	long st = 0;
	json_t *resp =
	    wd_cli_api("cost", sock, "GET", path.data, NULL, 200, &st);
	wd_buf_free(&path);
	if (!resp)
		return st == 400 ? WD_EXIT_USAGE : WD_EXIT_FAIL;
	/* a fleet node whose database is away counts its own runs only,
	 * and says so */
	const char *partial =
	    json_string_value(json_object_get(resp, "unavailable"));
	if (partial)
		fprintf(stderr, "warden cost: %s\n", partial);
	if (json) {
		wd_cli_print_json(resp, JSON_INDENT(2), "{}");
	} else {
		/* INPUT_TOK = UNCACHED + CACHED (read from a prompt cache,
		 * billed at the cache-read price) */
		printf("%-20s %6s %12s %12s %12s %12s %12s\n", by, "RUNS",
		       "INPUT_TOK", "UNCACHED", "CACHED", "OUTPUT_TOK",
		       "COST_USD");
		size_t i;
		json_t *g;
		json_array_foreach(json_object_get(resp, "groups"), i, g)
		{
			long long in = json_integer_value(
				      json_object_get(g, "input_tokens")),
				  ca = json_integer_value(
				      json_object_get(g, "cached_tokens"));
			printf(
			    "%-20s %6lld %12lld %12lld %12lld %12lld %12.6f\n",
			    json_string_value(json_object_get(g, by)),
			    json_integer_value(json_object_get(g, "runs")), in,
			    in - ca, ca,
			    json_integer_value(
				json_object_get(g, "output_tokens")),
			    json_number_value(json_object_get(g, "cost_usd")));
		}
		printf("%-20s %6s %12s %12s %12s %12s %12.6f\n", "total", "",
		       "", "", "", "",
		       json_number_value(json_object_get(resp, "total_usd")));
	}
	json_decref(resp);
	return WD_EXIT_OK;
}

WD_VERB(cost, "cost", "model cost attributed by team, agent or user",
	verb_cost);
