/* Tier 3: gVisor (runsc), one sandbox per call. See gvisor.h.
 *
 * How a call runs
 *   bundle    <rt>/gvisor/<id>/{config.json,rootfs/} from the manifest
 *             (oci.c): read-only empty root + explicit binds, tmpfs /tmp,
 *             process.user = the caller (never 0), no capabilities,
 *             noNewPrivileges, rlimits.
 *   cgroup    warden creates the leaves /warden/<id> itself (cgroup.c) with
 *             memory/pids/cpu limits and passes that path to runsc, which
 *             joins existing cgroups without touching their limits and does
 *             not delete them: the OOM counter survives the sandbox.
 *             The manifest's pids is RLIMIT_NPROC inside the sentry (a
 *             flood gets EAGAIN, the sandbox lives); the host pids.max is
 *             the outer bound with room for the sentry's own tasks (oci.h).
 *   started   only the boot log's "Process should have started" proves
 *             the program ran; without it the call is refused (125),
 *             whatever runsc exited with.
 *   network   `--network=none` for `network.allow: []`; else
 *             `--network=sandbox` in a netns of the call's own whose only
 *             link is held on the host end (gvisor_net.c)
 *   runsc     `runsc --network=... --platform=ptrace run` under a shim: a
 *             forked child that is PR_SET_CHILD_SUBREAPER, so the sandbox,
 *             gofer and helper processes runsc leaves behind are reaped by us
 *             and not by the node's init (which here does not reap them: a
 *             zombie keeps the cgroup busy and `runsc wait` slow).
 *   timeout   every process in the call's cgroup is SIGKILLed (the sentry,
 *             the gofer and the ptrace stubs all live there, so this is
 *             certain even when the sentry is wedged), then `runsc delete
 *             --force` removes runsc's state.
 *   oom       the memory cgroup's oom_kill counter (v1 memory.oom_control,
 *             v2 memory.events) > 0. The host OOM killer picks the sentry
 *             (it holds the guest's memory), runsc reports 137.
 *
 * Denials gVisor can report (runsc 0.0~20221219, Debian)
 *   - "Unsupported syscall NAME(args)" lines in the sentry's (boot) log,
 *     written at info level without --debug: syscalls gVisor does not
 *     implement; the program got ENOSYS (or a documented stand-in). These
 *     become WD_SRC_GVISOR events, kind "syscall", err ENOSYS.
 *   - The baseline deny list (tiers 1-2's, enforce/seccomp.c) plus
 *     syscalls.deny is loaded as OCI seccomp inside the sentry
 *     (--oci-seccomp, answers EPERM; clone with a namespace flag too)
 *     and the sentry logs "Syscall N: denied by seccomp" — at debug
 *     level only, so every call runs with --debug (boot log only);
 *     those become events kind "syscall", err EPERM.
 *   - Host pids limit reached (pids.events "max") and OOM kills become
 *     WD_SRC_SANDBOX events.
 *   What it cannot report: file opens outside the root (the path simply
 *   does not exist in the sentry's VFS: ENOENT, no log), connects under
 *   --network=none (no route/ENETUNREACH inside the netstack, no log),
 *   capability checks failing with EPERM (mount, bpf, reboot: not logged
 *   unless traced); there is no seccomp-notify or audit channel out of the
 *   sentry, and its own host seccomp filter kills the sandbox rather than
 *   logging.
 */
#include "sandbox/common.h"
#include "sandbox/gvisor.h"
#include "sandbox/gvisor_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <seccomp.h>

#include "common/log.h"
#include "enforce/probe.h"
#include "sandbox/oci.h"
#include "sandbox/uidpool.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static const char *runtime_dir(void)
{
	const char *d = getenv("WARDEN_RUNTIME_DIR");
	return d && *d ? d : "/run/warden";
}

static bool executable(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int wd_t3_runsc_path(char *out, size_t len, struct wd_err *err)
{
	const char *env = getenv("WARDEN_RUNSC");
	if (env && *env) {
		if (env[0] == '/' && executable(env))
			return wd_strlcpy(out, env, len);
		return wd_err_set(err, -ENOENT,
				  "tier 3: runsc '%s' (WARDEN_RUNSC) is not "
				  "an executable file; cannot enforce tier 3",
				  env);
	}
	const char *path = getenv("PATH");
	if (path) {
		char tmp[4096];
		wd_strlcpy(tmp, path, sizeof(tmp));
		char *sv = NULL;
		for (char *d = strtok_r(tmp, ":", &sv); d;
		     d = strtok_r(NULL, ":", &sv)) {
			char c[PATH_MAX];
			if (*d != '/')
				continue; /* never a relative PATH entry */
			snprintf(c, sizeof(c), "%s/runsc", d);
			if (executable(c))
				return wd_strlcpy(out, c, len);
		}
	}
	return wd_err_set(err, -ENOENT,
			  "tier 3: runsc (gVisor) not found on PATH; install "
			  "the runsc package or set WARDEN_RUNSC");
}

int wd_t3_precheck(const struct wd_manifest *m, uid_t uid, gid_t gid,
		   struct wd_err *err)
{
	char p[PATH_MAX];
	int r;
	if ((r = wd_t3_net_check(m, err)) < 0)
		return r;
	if (uid == 0 || gid == 0)
		return wd_err_set(err, -EPERM,
				  "tier 3: refusing to run as uid/gid 0");
	return wd_t3_runsc_path(p, sizeof(p), err) < 0 ? err->code : 0;
}

/* Between fork and _exit: async-signal-safe calls only (the daemon is
 * multithreaded). The shim holds nothing but the three stdio pipe ends,
 * which it hands to runsc and then drops, so EOF on our side means every
 * sandbox process is gone. Its exit code is runsc's (128+sig if runsc was
 * killed); 126 when runsc could not be started. */
static void __attribute__((noreturn))
shim_main(int in, int out, int errfd, const char *path, char **argv,
	  char **envp, bool net)
{
	int st;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		_exit(126);
	/* --network=sandbox: this runsc tells the root network namespace
	 * from others by /proc/sys/net/core/rmem_default being there, which
	 * kernels since 5.x show in every namespace, and then refuses to
	 * run ("cannot run with network enabled in root network
	 * namespace"). runsc and what it starts see an empty, read-only
	 * /proc/sys/net in a mount namespace of their own: the sandbox's
	 * netns is ours, never the root one (gvisor_net.c), and nothing of
	 * runsc's reads that tree otherwise. The host's mounts are not
	 * touched (private propagation first). */
	if (net && (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("none", "/proc/sys/net", "tmpfs",
			  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "size=4k") < 0))
		_exit(126);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
		_exit(126);
	syscall(SYS_close_range, 3U, ~0U, 0U);
	/* runsc and everything it starts leave the supervisor's OOM
	 * protection (-900, inherited by fork): the tool's memory is the
	 * sentry's. Raising it needs no privilege. */
	int oa = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oa >= 0) {
		if (write(oa, "0", 1) < 0)
			_exit(126);
		close(oa);
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	pid_t p = fork();
	if (p < 0)
		_exit(126);
	if (p == 0) {
		execve(path, argv, envp);
		_exit(126);
	}
	int nul = open("/dev/null", O_RDWR);
	if (nul >= 0) {
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		if (nul > 2)
			close(nul);
	}
	int code = 126;
	for (;;) {
		pid_t w = waitpid(-1, &st, 0);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: everything reaped */
		}
		if (w == p)
			code = WIFEXITED(st) ? WEXITSTATUS(st)
					     : 128 + WTERMSIG(st);
	}
	_exit(code);
}

/* Run runsc with args (stdio /dev/null), wait up to 10 s. */
static int runsc_cmd(const char *runsc, char *const *argv)
{
	pid_t p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
		}
		syscall(SYS_close_range, 3U, ~0U, 0U);
		char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		execve(runsc, argv, envp);
		_exit(126);
	}
	int st;
	for (int i = 0; i < 1000; i++) {
		pid_t w = waitpid(p, &st, WNOHANG);
		if (w == p)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -EINTR;
		if (w < 0 && errno != EINTR)
			return -errno;
		usleep(10000);
	}
	kill(p, SIGKILL);
	waitpid(p, &st, 0);
	return -ETIMEDOUT;
}

/* Kill every process of the sandbox. runsc joins only the v1 hierarchies
 * on a hybrid node (not the v2 leaf cgroup.kill would act on), so walk
 * the v1 leaves' cgroup.procs until they stay empty; the pids limit
 * bounds how many there can be. */
void wd_t3_kill_all(struct wd_t3 *s)
{
	wd_cgroup_kill(&s->cg);
	for (int round = 0; round < 100; round++) {
		bool any = false;
		for (int c = 0; c < WD_CG_NCTRL; c++) {
			if (!s->cg.v1[c][0])
				continue;
			char p[600];
			cleanup_free char *txt = NULL;
			size_t n;
			snprintf(p, sizeof(p), "%s/cgroup.procs", s->cg.v1[c]);
			if (wd_read_file(p, &txt, &n) < 0)
				continue;
			for (char *t = txt, *e; *t; t = e) {
				long pid = strtol(t, &e, 10);
				if (e == t)
					break;
				if (pid > 1) {
					kill((pid_t)pid, SIGKILL);
					any = true;
				}
				while (*e == '\n')
					e++;
			}
		}
		if (!any)
			return;
		usleep(2000);
	}
}

/* Whether runsc still has state for `id` under `root` (its files are named
 * after the container id). */
bool wd_t3_runsc_has_state(const char *root, const char *id)
{
	DIR *d = opendir(root);
	if (!d)
		return false;
	struct dirent *e;
	bool found = false;
	size_t n = strlen(id);
	/* "<id>_sandbox:<id>.state"; a leftover ".lock" is not state */
	while (!found && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		found = !strncmp(e->d_name, id, n) && e->d_name[n] == '_' &&
			l > 6 && !strcmp(e->d_name + l - 6, ".state");
	}
	closedir(d);
	return found;
}

int wd_t3_spawn(const struct wd_manifest *m, char *const *argv, uid_t uid,
		gid_t gid, const char *id, struct wd_t3 **out,
		struct wd_err *err)
{
	int r;
	char **av = NULL, **env = NULL, **rargv = NULL;
	cleanup_free char *cgpath = NULL, *resolv = NULL;
	int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
	const struct wd_features *f = wd_probe_tier3();
	struct wd_t3 *s = wd_calloc(1, sizeof(*s));
	s->cg.v2_fd = -1;
	s->shim = -1;
	s->in = s->out = s->err = -1;
	s->uid = uid;
	s->gid = gid;
	*out = NULL;

	if ((r = wd_t3_precheck(m, uid, gid, err)) < 0)
		goto fail;
	wd_t3_runsc_path(s->runsc, sizeof(s->runsc), err);
	if (f->cg_err < 0) {
		r = wd_err_set(err, f->cg_err,
			       "tier 3: no cgroup layout: cannot enforce "
			       "memory/pids/cpu");
		goto fail;
	}

	char *const *src = argv ? argv : m->exec;
	if (!src || !src[0]) {
		r = wd_err_set(err, -EINVAL,
			       "no command: manifest '%s' has no exec and none "
			       "was given",
			       m->name);
		goto fail;
	}
	int argc = 0;
	while (src[argc])
		argc++;
	av = wd_calloc(argc + 1, sizeof(char *));
	av[0] = wd_sb_resolve_exec(src[0]);
	if (!av[0]) {
		r = wd_err_set(err, -ENOENT, "command '%s' not found", src[0]);
		goto fail;
	}
	for (int i = 1; i < argc; i++)
		av[i] = wd_strdup(src[i]);
	/* runsc execs args[0] inside the sandbox's VFS, where only the
	 * canonical file is bound (python3 -> python3.11): name that. */
	char rp[PATH_MAX];
	if (realpath(av[0], rp)) {
		free(av[0]);
		av[0] = wd_strdup(rp);
	}

	snprintf(s->id, sizeof(s->id), "wd-%s", id);
	snprintf(s->root, sizeof(s->root), "%s/runsc", runtime_dir());
	snprintf(s->dir, sizeof(s->dir), "%s/gvisor/%s", runtime_dir(), s->id);
	if ((r = wd_mkdir_p(s->root, 0700)) < 0 ||
	    (r = wd_mkdir_p(s->dir, 0711)) < 0) {
		wd_err_set(err, r, "tier 3: state dirs under '%s': %s",
			   runtime_dir(), strerror(-r));
		s->dir[0] = 0;
		goto fail;
	}

	/* A clean environment: nothing of the caller's reaches the tool. */
	env = wd_calloc(8 + (size_t)m->n_env, sizeof(char *));
	env[0] = wd_strdup("PATH=/usr/local/bin:/usr/bin:/bin");
	env[1] = wd_strdup("HOME=/tmp");
	env[2] = wd_strdup("TMPDIR=/tmp");
	env[3] = wd_strdup("LANG=C.UTF-8");
	env[4] = wd_asprintf("WARDEN_CALL_ID=%s", id);
	/* a replay environment's own variables (manifest.h replay_env) */
	for (int i = 0; i < m->n_env; i++)
		env[5 + i] = wd_strdup(m->env[i]);

	cgpath = wd_asprintf("/warden/%s", s->id);
	wd_cgroup_note_runsc_parents();
	struct wd_cg_limits lim = {
	    .memory_bytes = ((uint64_t)(m->memory_mb ? m->memory_mb
						     : WD_DEFAULT_MEMORY_MB) +
			     WD_T3_MEM_OVERHEAD_MB)
			    << 20,
	    .pids = wd_t3_host_pids(m->pids ? m->pids : WD_DEFAULT_PIDS),
	    .cpus = m->cpus,
	};
	if ((r = wd_cgroup_create(&s->cg, &f->cg, s->id, &lim, err)) < 0)
		goto fail;
	/* runsc joins the leaves by path: they must be the same path in
	 * every v1 hierarchy and (pure v2) on v2. */

	/* a non-empty allow-list: the filtered link, before anything runs */
	if (m->n_net_allow > 0 && (r = wd_t3_net_start(s, m, err)) < 0)
		goto fail;
	if (s->net)
		resolv = wd_asprintf("%s/resolv.conf", s->dir);
	struct wd_oci_opts o = {.argv = av,
				.envp = env,
				.uid = uid,
				.gid = gid,
				.cgroups_path = cgpath,
				.hostname = "warden",
				.netns_path = wd_t3_net_ns_path(s),
				.resolv_conf = resolv};
	if ((r = wd_oci_bundle_write(s->dir, m, &o, err)) < 0)
		goto fail;

	if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 ||
	    pipe2(perr, O_CLOEXEC) < 0) {
		r = wd_err_set(err, -errno, "pipes: %s", strerror(errno));
		goto fail;
	}

	const char *plat = f->runsc_platform[0] ? f->runsc_platform : "ptrace";
	rargv = wd_calloc(24, sizeof(char *));
	int k = 0;
	rargv[k++] = wd_strdup(s->runsc);
	rargv[k++] = wd_asprintf("--root=%s", s->root);
	rargv[k++] = wd_asprintf("--platform=%s", plat);
	/* Only loopback inside, or the call's filtered link (its netns is
	 * the spec's: gvisor_net.c) */
	rargv[k++] = wd_strdup(s->net ? "--network=sandbox" : "--network=none");
	rargv[k++] = wd_asprintf("--log=%s/runsc.log", s->dir);
	rargv[k++] = wd_strdup("--log-format=json");
	rargv[k++] = wd_asprintf("--debug-log=%s/%%COMMAND%%.log", s->dir);
	rargv[k++] = wd_strdup("--debug-command=boot");
	/* The baseline deny list + syscalls.deny (oci.c: seccomp_json),
	 * applied by the sentry. gVisor logs "Syscall N: denied by seccomp"
	 * at debug level only; --debug-command=boot keeps it to the
	 * sentry's log, which gvisor_finish.c turns into denials. */
	rargv[k++] = wd_strdup("--oci-seccomp");
	rargv[k++] = wd_strdup("--debug");
	rargv[k++] = wd_strdup("run");
	rargv[k++] = wd_asprintf("--bundle=%s", s->dir);
	rargv[k++] = wd_strdup(s->id);
	char *renv[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

	s->shim = fork();
	if (s->shim < 0) {
		r = wd_err_set(err, -errno, "fork: %s", strerror(errno));
		goto fail;
	}
	if (s->shim == 0)
		shim_main(pin[0], pout[1], perr[1], s->runsc, rargv, renv,
			  s->net != NULL);
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	s->in = pin[1];
	s->out = pout[0];
	s->err = perr[0];
	s->spawned_ns = wd_now_ns();
	wd_sb_free_strv(av);
	wd_sb_free_strv(env);
	wd_sb_free_strv(rargv);
	*out = s;
	return 0;

fail:
	for (int i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
	}
	wd_sb_free_strv(av);
	wd_sb_free_strv(env);
	wd_sb_free_strv(rargv);
	wd_t3_destroy(s);
	return r;
}

void wd_t3_destroy(struct wd_t3 *s)
{
	if (!s)
		return;
	int st;
	if (s->shim >= 0) {
		/* Still running (not used, or an error path): kill every
		 * process of the sandbox; runsc then exits and the shim reaps
		 * it. The shim itself is outside the cgroup. */
		wd_t3_kill_all(s);
		bool done = false;
		for (int i = 0; i < 500 && !done; i++) {
			done = wd_t3_reap_shim(s, WNOHANG, &st);
			if (!done)
				usleep(10000);
		}
		if (!done) {
			kill(s->shim, SIGKILL);
			wd_t3_reap_shim(s, 0, &st);
		}
	}
	if (s->root[0] && s->id[0] && wd_t3_runsc_has_state(s->root, s->id)) {
		cleanup_free char *rootarg = wd_asprintf("--root=%s", s->root);
		char *argv[] = {s->runsc,  rootarg, "delete",
				"--force", s->id,   NULL};
		int r = runsc_cmd(s->runsc, argv);
		if (r != 0)
			wd_warn("tier 3 '%s': runsc delete --force: %d", s->id,
				r);
	}
	/* every process of the sandbox is dead: its link can go */
	wd_t3_net_stop(s);
	wd_cgroup_destroy(&s->cg);
	if (s->in >= 0)
		close(s->in);
	if (s->out >= 0)
		close(s->out);
	if (s->err >= 0)
		close(s->err);
	if (s->dir[0])
		wd_rm_rf(s->dir);
	/* every process of the sandbox is dead: its uid can go */
	wd_uid_release_async(s->lease, true);
	free(s);
}

static void enforcement(const struct wd_manifest *m, struct wd_t3 *s,
			struct wd_result *res)
{
	const struct wd_features *f = wd_probe_tier3();
	const char *plat = f->runsc_platform[0] ? f->runsc_platform : "ptrace";
	wd_result_enf(res, "gvisor", "runsc %s, platform %s",
		      f->runsc_version[0] ? f->runsc_version : "?", plat);
	wd_t3_net_enforcement(s, res);
	wd_result_enf(res, "filesystem",
		      "OCI: read-only empty root + %d read, %d write (noexec), "
		      "%d exec binds + loader/libs (ro); tmpfs /tmp (noexec)",
		      m->fs_read.n, m->fs_write.n, m->fs_exec.n);
	unsigned pids = m->pids ? m->pids : WD_DEFAULT_PIDS;
	wd_result_enf(res, "cgroup",
		      "host: memory %u+%d MB, pids.max %u, cpus %.2f (%s)",
		      m->memory_mb ? m->memory_mb : WD_DEFAULT_MEMORY_MB,
		      WD_T3_MEM_OVERHEAD_MB, wd_t3_host_pids(pids), m->cpus,
		      s->cg.on_v2[WD_CG_MEMORY] ? "v2" : "v1");
	/* state[] holds 95 characters */
	wd_result_enf(res, "pids",
		      "%u tasks: RLIMIT_NPROC in the sentry (EAGAIN); host "
		      "pids.max %u = %ux%d+%d",
		      pids, wd_t3_host_pids(pids), pids, WD_T3_PIDS_PER_TASK,
		      WD_T3_PIDS_OVERHEAD);
	wd_result_enf(res, "identity",
		      "uid %u gid %u, no capabilities, noNewPrivileges", s->uid,
		      s->gid);
	wd_result_enf(res, "syscalls",
		      "gVisor sentry + OCI seccomp: baseline + %d denied "
		      "(EPERM)",
		      m->n_syscalls_deny);
	if (m->mode == WD_MODE_AUDIT)
		wd_result_enf(res, "mode",
			      "audit not available in tier 3: enforced");
}

static int gvisor_run(const struct wd_call *call, struct wd_result *res,
		      struct wd_err *err)
{
	const struct wd_manifest *m = call->manifest;
	struct wd_t3 *s = NULL;
	int r = wd_t3_spawn(m, call->argv, call->run_uid, call->run_gid,
			    res->call_id, &s, err);
	if (r < 0)
		return r;
	enforcement(m, s, res);
	wd_result_enf(res, "pool", "cold start");
	r = wd_t3_finish(s, m, call, res, err);
	wd_t3_destroy(s);
	return r;
}

const struct wd_runner wd_runner_gvisor = {.tier = 3, .run = gvisor_run};

void wd_t3_enforcement(const struct wd_manifest *m, struct wd_t3 *s,
		       struct wd_result *res)
{
	enforcement(m, s, res);
}
