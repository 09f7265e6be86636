/* warden approvals ls | approve ID [--reason TEXT] | deny ID [--reason TEXT]
 * Decisions are made as the calling user (SO_PEERCRED); wardend checks
 * that the uid is an approver in users.yaml. */
#include <getopt.h>
#include <string.h>
#include <time.h>

#include "api/client.h"
#include "cli/cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: warden approvals ls [--json] [--socket PATH]\n"
		   "       warden approvals approve ID [--reason TEXT] "
		   "[--socket PATH]\n"
		   "       warden approvals deny ID [--reason TEXT] "
		   "[--socket PATH]\n");
}

static int list(const char *sock, bool json)
{
	json_t *resp = wd_cli_api("approvals", sock, "GET", "/v1/approvals",
				  NULL, 200, NULL);
	if (!resp)
		return WD_EXIT_FAIL;
	if (json) {
		wd_cli_print_json(resp, JSON_INDENT(2), "[]");
	} else if (!json_array_size(resp)) {
		printf("no pending approvals\n");
	} else {
		printf("%-22s %-24s %-20s %-8s %-10s %s\n", "ID", "RUN", "TOOL",
		       "USER", "EXPIRES", "WHY");
		size_t i;
		json_t *a;
		json_array_foreach(resp, i, a)
		{
			long long exp = json_integer_value(
			    json_object_get(a, "expires_ns"));
			long long left =
			    (exp - (long long)time(NULL) * 1000000000ll) /
			    1000000000ll;
			/* another node's (a fleet): it names the node and
			 * its expiry time; its arguments are read there */
			const char *node =
			    json_string_value(json_object_get(a, "node"));
			char *args =
			    node
				? wd_asprintf("(on node %s, expires %s)", node,
					      json_string_value(
						  json_object_get(a, "expires"))
						  ?: "?")
				: json_dumps(json_object_get(a, "args"),
					     JSON_COMPACT);
			char exps[24] = "-";
			if (!node)
				snprintf(exps, sizeof(exps), "%lld", left);
			printf("%-22s %-24s %-20s %-8s %-10s %s\n         "
			       "args: %.300s\n",
			       json_string_value(json_object_get(a, "id")),
			       json_string_value(json_object_get(a, "run_id")),
			       json_string_value(json_object_get(a, "tool")),
			       json_string_value(json_object_get(a, "user")),
			       exps,
			       json_string_value(json_object_get(a, "reason")),
			       args ? args : "");
			free(args);
		}
	}
	json_decref(resp);
	return WD_EXIT_OK;
}

static int decide(const char *sock, const char *id, bool approve,
		  const char *reason, bool json)
{
	json_t *body =
	    json_pack("{s:s}", "decision", approve ? "approve" : "deny");
	if (reason)
		json_object_set_new(body, "reason", json_string(reason));
	char path[160];
	snprintf(path, sizeof(path), "/v1/approvals/%s", id);
	json_t *resp =
	    wd_cli_api("approvals", sock, "POST", path, body, 200, NULL);
	json_decref(body);
	if (!resp)
		return WD_EXIT_FAIL;
	if (json) {
		wd_cli_print_json(resp, JSON_COMPACT, "{}");
	} else {
		printf("%s %s\n", id, approve ? "approved" : "denied");
	}
	json_decref(resp);
	return WD_EXIT_OK;
}

static int verb_approvals(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, 0, 'j'},
	    {"socket", required_argument, 0, 's'},
	    {"reason", required_argument, 0, 'r'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	bool json = false;
	const char *sock = NULL, *reason = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 's':
			sock = optarg;
			break;
		case 'r':
			reason = optarg;
			break;
		case 'h':
			usage(stdout);
			return WD_EXIT_OK;
		default:
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	int n = argc - optind;
	char **a = argv + optind;
	sock = wd_cli_socket(sock);
	if (n == 0 ||
	    (n == 1 && (!strcmp(a[0], "ls") || !strcmp(a[0], "list"))))
		return list(sock, json);
	if (n == 2 && !strcmp(a[0], "approve"))
		return decide(sock, a[1], true, reason, json);
	if (n == 2 && !strcmp(a[0], "deny"))
		return decide(sock, a[1], false, reason, json);
	usage(stderr);
	return WD_EXIT_USAGE;
}

WD_VERB(approvals, "approvals",
	"list pending tool-call approvals; approve or deny one",
	verb_approvals);
