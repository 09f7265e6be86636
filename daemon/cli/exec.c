/* warden exec --policy FILE [--json] [--stdin FILE|-] [--uid N --gid N]
 *             -- CMD [ARG...]
 * Run one command as a tool call under the manifest's sandbox; no daemon.
 * Exit code: the command's; 124 timeout; 125 sandbox error. */
#include "enforce/resolver.h"
#include "cli/cli.h"
#include "common/log.h"
#include "enforce/egress.h"
#include "enforce/probe.h"
#include "policy/manifest.h"
#include "sandbox/reaper.h"
#include "sandbox/sandbox.h"

#include <getopt.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: warden exec --policy FILE [--json] [--stdin FILE|-]\n"
	       "                   [--uid UID --gid GID] [--dns-upstream "
	       "ADDR:PORT]\n"
	       "                   [--dns-hosts FILE] -- CMD [ARG...]\n"
	       "Run CMD as one tool call under the manifest's sandbox (tier "
	       "from the manifest).\n"
	       "Exit code: CMD's own; 124 on timeout; 125 if the sandbox "
	       "could not be set up\n"
	       "(a constraint that cannot be enforced here refuses the "
	       "call); 137 (status oom)\n"
	       "when the call reached its memory_mb.\n"
	       "  --json        print {status, exit_code, stdout, stderr, "
	       "truncated, denials[],\n"
	       "                tier, duration_ms, enforcement{}, run_as_uid, "
	       "run_as_gid}\n"
	       "  --stdin FILE  feed FILE (or - for our stdin) to the tool\n"
	       "  --uid/--gid   the calling user (default: the caller): owner "
	       "of the files the\n"
	       "                call leaves in its write paths (a root "
	       "caller's go to each\n"
	       "                path's owner)\n"
	       "  --dns-upstream ADDR:PORT  where the call's resolver looks "
	       "up the names of\n"
	       "                network.allow (IPv4; default: /etc/hosts, then "
	       "the node's resolver)\n"
	       "  --dns-hosts FILE  names of your own (hosts format), asked "
	       "before the above\n"
	       "The tool runs as a uid/gid of the call's own, from "
	       "$WARDEN_UID_RANGE\n"
	       "(FIRST-LAST, default 2000000000-2000004095); every uid of "
	       "it in use: refused.\n"
	       "CMD with a '/' is taken relative to the current directory, "
	       "a bare name is\n"
	       "looked up in $PATH; the file it names (symlinks resolved) "
	       "must be listed,\n"
	       "or be under a directory listed, in the manifest's "
	       "filesystem.exec.\n");
}

static void print_denial(const struct wd_event *e)
{
	fprintf(stderr, "warden: %s %s: %s%s%s%s%s (%s)\n",
		e->verdict == WD_VERDICT_DENIED ? "denied" : "audited",
		wd_event_source_name(e->source), e->kind,
		e->syscall[0] ? " " : "", e->syscall, e->target[0] ? " " : "",
		e->target, e->err ? strerror(e->err) : "allowed");
}

/* CMD as the caller means it, as an absolute path the sandbox can take
 * (wardend resolves bare names against a fixed list of system dirs; the
 * caller's cwd and PATH are the CLI's to apply): a name with a '/' is taken
 * relative to our cwd, a bare name is looked up in our $PATH (the first
 * executable regular file, as execvp does). Returns a new string, or NULL
 * with a message in err. */
static char *resolve_cmd(const char *cmd, struct wd_err *err)
{
	if (cmd[0] == '/')
		return wd_strdup(cmd);
	if (strchr(cmd, '/')) {
		char *cwd = getcwd(NULL, 0);
		if (!cwd) {
			wd_err_set(err, -errno, "command '%s': cwd: %s", cmd,
				   strerror(errno));
			return NULL;
		}
		char *abs =
		    wd_asprintf("%s/%s", strcmp(cwd, "/") ? cwd : "", cmd);
		free(cwd);
		if (access(abs, X_OK) < 0) {
			wd_err_set(err, -errno, "command '%s' (%s): %s", cmd,
				   abs, strerror(errno));
			free(abs);
			return NULL;
		}
		return abs;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		/* an empty PATH element means the cwd (execvp) */
		char *cand = n ? wd_asprintf("%.*s/%s", (int)n, p, cmd) : NULL;
		if (!n) {
			char *cwd = getcwd(NULL, 0);
			if (cwd)
				cand = wd_asprintf("%s/%s", cwd, cmd);
			free(cwd);
		}
		struct stat st;
		if (cand && cand[0] == '/' && stat(cand, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
			return cand;
		free(cand);
		p = colon ? colon + 1 : NULL;
	}
	wd_err_set(err, -ENOENT, "command '%s' not found in PATH (%s)", cmd,
		   path);
	return NULL;
}

/* Is canonical path `p` one of `l`'s paths or below one of them? */
static bool path_covered(const struct wd_path_list *l, const char *p)
{
	for (int i = 0; i < l->n; i++) {
		size_t n = strlen(l->v[i]);
		if (!strncmp(p, l->v[i], n) &&
		    (p[n] == 0 || p[n] == '/' || !strcmp(l->v[i], "/")))
			return true;
	}
	return false;
}

static int verb_exec(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"policy", required_argument, 0, 'p'},
	    {"json", no_argument, 0, 'j'},
	    {"stdin", required_argument, 0, 's'},
	    {"uid", required_argument, 0, 'u'},
	    {"gid", required_argument, 0, 'g'},
	    {"dns-upstream", required_argument, 0, 'D'},
	    {"dns-hosts", required_argument, 0, 'H'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0}};
	const char *policy = NULL, *stdin_file = NULL;
	bool json = false;
	long uid = -1, gid = -1;
	int c;
	optind = 1;
	/* The one verb that does not permute: everything from CMD on is
	 * CMD's own (`warden exec --policy F -- python3 -c ...`: that -c, or
	 * a --json, must never be read as ours). CMD starts after `--` or at
	 * the first argument that is not an option. */
	struct wd_dns_upstream dns_up = {0};
	bool dns_set = false;
	/* as wardend: a tool that stops reading its stdin (or a runsc that
	 * exits) is an EPIPE to handle, not the end of the supervisor; the
	 * tool itself starts with SIGPIPE's default action */
	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt_long(argc, argv, "+p:js:u:g:D:H:h", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'D': {
			struct wd_err de = {0};
			if (wd_dns_upstream_parse(optarg, &dns_up, &de) < 0) {
				fprintf(stderr,
					"warden exec: --dns-upstream: %s\n",
					de.msg);
				return WD_EXIT_USAGE;
			}
			dns_set = true;
			break;
		}
		case 'H':
			if (access(optarg, R_OK) < 0) {
				fprintf(stderr,
					"warden exec: --dns-hosts %s: %s\n",
					optarg, strerror(errno));
				return WD_EXIT_USAGE;
			}
			if (strlen(optarg) >= sizeof(dns_up.zone_path)) {
				fprintf(stderr, "warden exec: --dns-hosts: "
						"path too long\n");
				return WD_EXIT_USAGE;
			}
			wd_strlcpy(dns_up.zone_path, optarg,
				   sizeof(dns_up.zone_path));
			dns_set = true;
			break;
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
		case 'g': {
			/* a typo must not become 0: root's, owner of what
			 * the call leaves (uid_t's -1 is "no change") */
			unsigned long long v = 0;
			if (wd_parse_uint(optarg, 0, UINT32_MAX - 1, &v)) {
				fprintf(stderr,
					"warden exec: --%s wants a numeric "
					"id, not '%s'\n",
					c == 'u' ? "uid" : "gid", optarg);
				return WD_EXIT_USAGE;
			}
			if (c == 'u')
				uid = (long)v;
			else
				gid = (long)v;
			break;
		}
		case 'h':
			usage(stdout);
			return WD_EXIT_OK;
		default:
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	if (dns_set)
		wd_resolver_set_upstream(&dns_up);
	if (!policy) {
		fprintf(stderr, "warden exec: --policy FILE is required\n");
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	/* The probe first, whatever the tier (each needs it): its AUDIT_GET
	 * is answered by a kernel thread while we read the manifest and set
	 * the call up (enforce/probe.h, wd_probe_audit_settle). */
	if (geteuid() == 0) {
		/* one call: the audit answer such calls share, when fresh */
		wd_probe_one_call();
		(void)wd_probe();
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
	/* CMD resolved here, where the caller's cwd and PATH are known; the
	 * sandbox then needs the file it names (symlinks resolved, as the
	 * manifest's paths are) under filesystem.exec. */
	char **cargv = NULL;
	if (optind < argc) {
		struct wd_err rerr = {0};
		char *cmd = resolve_cmd(argv[optind], &rerr);
		if (!cmd) {
			wd_error("exec: %s", rerr.msg);
			wd_manifest_free(m);
			return 125;
		}
		char *canon = NULL;
		if (wd_path_canonical(cmd, &canon, &rerr) == 0 &&
		    !path_covered(&m->fs_exec, canon))
			fprintf(stderr,
				"warden exec: '%s' is %s, which the manifest's "
				"filesystem.exec does not cover: the sandbox "
				"will refuse to execute it (list \"%s\" or a "
				"directory above it in filesystem.exec)\n",
				argv[optind], canon, canon);
		free(canon);
		int n = argc - optind;
		cargv = wd_calloc((size_t)n + 1, sizeof(*cargv));
		cargv[0] = cmd;
		for (int i = 1; i < n; i++)
			cargv[i] = argv[optind + i];
	}
	struct wd_call call = {
	    .manifest = m,
	    .argv = cargv,
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
	/* one call in this process: the node's pinned programs, attached to
	 * its cgroup, instead of a load of our own (enforce/egress_pin.c) */
	wd_egress_shared_use_pins(true);
	/* without names in network.allow its DNS programs stay unopened */
	wd_egress_pins_no_names(!wd_manifest_names(m));
	/* and its teardown inline: nothing else would use the thread */
	wd_reaper_inline();
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
	if (cargv)
		free(cargv[0]);
	free(cargv);
	free(in);
	wd_manifest_free(m);
	return rc;
}

WD_VERB(exec, "exec", "run one command as a tool call under a manifest",
	verb_exec);
