/* warden exec --policy FILE [--json] [--stdin FILE|-] [--uid N --gid N]
 *             -- CMD [ARG...]
 * Run one command as a tool call under the manifest's sandbox; no daemon.
 * Exit code: the command's; 124 timeout; 125 sandbox error. */
#include "cli/cli.h"
#include "common/log.h"
#include "policy/manifest.h"
#include "sandbox/sandbox.h"

#include <getopt.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: warden exec --policy FILE [--json] [--stdin FILE|-]\n"
		"                   [--uid UID --gid GID] -- CMD [ARG...]\n"
		"Run CMD as one tool call under the manifest's sandbox (tier "
		"from the manifest).\n"
		"Exit code: CMD's own; 124 on timeout; 125 if the sandbox "
		"could not be set up\n"
		"(a constraint that cannot be enforced here refuses the "
		"call).\n"
		"  --json        print {status, exit_code, stdout, stderr, "
		"truncated, denials[],\n"
		"                tier, duration_ms, enforcement{}}\n"
		"  --stdin FILE  feed FILE (or - for our stdin) to the tool\n"
		"  --uid/--gid   identity to run as (default: the caller; a "
		"root caller's tools\n"
		"                run as $WARDEN_RUNAS_UID or 65534)\n");
}

static void print_denial(const struct wd_event *e)
{
	fprintf(stderr, "warden: %s %s: %s%s%s%s%s (%s)\n",
		e->verdict == WD_VERDICT_DENIED ? "denied" : "audited",
		wd_event_source_name(e->source), e->kind,
		e->syscall[0] ? " " : "", e->syscall, e->target[0] ? " " : "",
		e->target, e->err ? strerror(e->err) : "allowed");
}

static int verb_exec(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"policy", required_argument, 0, 'p'},
	    {"json", no_argument, 0, 'j'},
	    {"stdin", required_argument, 0, 's'},
	    {"uid", required_argument, 0, 'u'},
	    {"gid", required_argument, 0, 'g'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0}};
	const char *policy = NULL, *stdin_file = NULL;
	bool json = false;
	long uid = -1, gid = -1;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:js:u:g:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			policy = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 's':
			stdin_file = optarg;
			break;
		case 'u':
			uid = strtol(optarg, NULL, 10);
			break;
		case 'g':
			gid = strtol(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return WD_EXIT_OK;
		default:
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	if (!policy) {
		fprintf(stderr, "warden exec: --policy FILE is required\n");
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	struct wd_diag diag = {0};
	struct wd_manifest *m = NULL;
	if (wd_manifest_load_file(policy, &m, &diag) < 0) {
		for (int i = 0; i < diag.n; i++)
			fprintf(stderr, "%s\n", diag.msgs[i]);
		wd_diag_free(&diag);
		return 125;
	}
	wd_diag_free(&diag);

	char *in = NULL;
	size_t in_len = 0;
	if (stdin_file) {
		int r = wd_read_file(strcmp(stdin_file, "-") ? stdin_file
							     : "/dev/stdin",
				     &in, &in_len);
		if (r < 0) {
			wd_log_errno(WD_LOG_ERROR, r, "stdin '%s'", stdin_file);
			wd_manifest_free(m);
			return 125;
		}
	}
	struct wd_call call = {
	    .manifest = m,
	    .argv = optind < argc ? argv + optind : NULL,
	    .stdin_data = in,
	    .stdin_len = in_len,
	    .caller_uid = uid >= 0 ? (uid_t)uid : getuid(),
	    .caller_gid = gid >= 0 ? (gid_t)gid : getgid(),
	};
	struct wd_result res;
	struct wd_err err = {0};
	int rc;
	if (geteuid() != 0) {
		wd_error("exec: warden exec without the daemon needs root");
		rc = 125;
		goto out_free;
	}
	if (wd_sandbox_run(&call, &res, &err) < 0) {
		if (json) {
			json_t *o = wd_result_to_json(&res);
			json_object_set_new(o, "error", json_string(err.msg));
			wd_cli_print_json(o, JSON_INDENT(2), "{}");
			json_decref(o);
		}
		wd_error("exec: refused: %s", err.msg);
		wd_result_free(&res);
		rc = 125;
		goto out_free;
	}
	if (json) {
		json_t *o = wd_result_to_json(&res);
		wd_cli_print_json(o, JSON_INDENT(2), "{}");
		json_decref(o);
	} else {
		fwrite(res.out.data ? res.out.data : "", 1, res.out.len,
		       stdout);
		fflush(stdout);
		fwrite(res.err.data ? res.err.data : "", 1, res.err.len,
		       stderr);
		for (int i = 0; i < res.n_denials; i++)
			print_denial(&res.denials[i]);
		if (res.truncated)
			fprintf(stderr,
				"warden: output truncated at %u "
				"bytes per stream\n",
				m->output_max_bytes);
		if (res.status == WD_ST_TIMEOUT)
			fprintf(stderr,
				"warden: timeout after %u ms: every "
				"process of the call was killed\n",
				m->timeout_ms);
		if (res.status == WD_ST_OOM)
			fprintf(stderr, "warden: out of memory (limit %u MB)\n",
				m->memory_mb);
	}
	rc = res.exit_code;
	wd_result_free(&res);
out_free:
	free(in);
	wd_manifest_free(m);
	return rc;
}

WD_VERB(exec, "exec", "run one command as a tool call under a manifest",
	verb_exec);
