/* `warden policy reload`: ask wardend to reload its policy directory (as
 * SIGHUP does). Reached through the `policy` verb (daemon/cli/policy.c). A
 * bad file keeps the old policy; the daemon's answer says why. */
#include <getopt.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"

int wd_cli_policy_reload(int argc, char **argv);

int wd_cli_policy_reload(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, 0, 's'},
	    {"json", no_argument, 0, 'j'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	const char *sock = NULL;
	bool json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			printf("usage: warden policy reload [--socket PATH] "
			       "[--json]\n"
			       "Reload wardend's policy directory. Runs in "
			       "progress keep the policy they\nstarted with; a "
			       "bad file keeps the old policy (exit 1, with "
			       "the reason).\n");
			return WD_EXIT_OK;
		default:
			return WD_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr,
			"usage: warden policy reload [--socket PATH]\n");
		return WD_EXIT_USAGE;
	}
	struct wd_err err = {0};
	json_t *resp = NULL;
	long st = 0;
	if (wd_api_call(wd_cli_socket(sock), "POST", "/v1/policy/reload", NULL,
			&st, &resp, &err)) {
		fprintf(stderr, "warden policy reload: %s\n", err.msg);
		return WD_EXIT_FAIL;
	}
	int rc = st == 200 ? WD_EXIT_OK : WD_EXIT_FAIL;
	if (json) {
		wd_cli_print_json(resp, JSON_COMPACT, "{}");
	} else if (rc == WD_EXIT_OK) {
		printf("policy reloaded\n");
	} else {
		fprintf(stderr, "warden policy reload: %s\n",
			wd_api_error_text(resp, st));
	}
	json_decref(resp);
	return rc;
}
