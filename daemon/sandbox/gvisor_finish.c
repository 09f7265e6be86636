/* Tier 3, the end of a call: the sandbox's boot log and runsc's errors read
 * back (did the program start? what did the sentry deny or not support?),
 * the pids/OOM/timeout verdicts, the result. See gvisor.c for the whole
 * picture. */
#include "sandbox/common.h"
#include "sandbox/gvisor.h"
#include "sandbox/gvisor_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <seccomp.h>

#include "common/log.h"
#include "sandbox/oci.h"

static void emit(struct wd_result *res, const struct wd_call *call,
		 struct wd_event *e)
{
	wd_strlcpy(e->call_id, res->call_id, sizeof(e->call_id));
	wd_result_add_denial(res, e);
	if (call && call->on_event)
		call->on_event(e, call->on_event_arg);
}

static uint64_t pids_max_events(struct wd_t3 *s)
{
	char p[600];
	cleanup_free char *txt = NULL;
	size_t n;
	const char *d =
	    s->cg.on_v2[WD_CG_PIDS] ? s->cg.v2 : s->cg.v1[WD_CG_PIDS];
	if (!d[0])
		return 0;
	snprintf(p, sizeof(p), "%s/pids.events", d);
	if (wd_read_file(p, &txt, &n) < 0)
		return 0;
	const char *m = strstr(txt, "max ");
	return m ? strtoull(m + 4, NULL, 10) : 0;
}

/* Parse the sentry's log: "Unsupported syscall NAME(" and, with a deny
 * list, strace lines of those syscalls that returned an error. Input is
 * the sandbox's own log: bounded and parsed defensively. */
static void parse_boot_log(struct wd_t3 *s, const struct wd_manifest *m,
			   const struct wd_call *call, struct wd_result *res)
{
	cleanup_free char *p = wd_asprintf("%s/boot.log", s->dir);
	cleanup_free char *txt = NULL;
	size_t n;
	if (wd_read_file(p, &txt, &n) < 0)
		return;
	for (char *line = txt, *nl; line && *line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = 0;
		struct wd_event e = {.ts_ns = wd_wall_ns(),
				     .source = WD_SRC_GVISOR,
				     .syscall_nr = -1,
				     .uid = s->uid,
				     .verdict = WD_VERDICT_DENIED};
		wd_strlcpy(e.kind, "syscall", sizeof(e.kind));
		const char *u = strstr(line, "Unsupported syscall ");
		if (u) {
			u += strlen("Unsupported syscall ");
			size_t l = strcspn(u, "( ");
			if (l == 0 || l >= sizeof(e.syscall))
				continue;
			memcpy(e.syscall, u, l);
			e.syscall[l] = 0;
			/* glibc registers rseq in every process and falls
			 * back silently: not a denial of anything the
			 * program asked for, and it would be in every call. */
			if (!strcmp(e.syscall, "rseq"))
				continue;
			e.err = ENOSYS;
			wd_strlcpy(e.target, "unsupported by gVisor",
				   sizeof(e.target));
			emit(res, call, &e);
			continue;
		}
		/* "[ tid: tid] Syscall NR: denied by seccomp" (debug level,
		 * always on: the OCI profile is never empty) */
		const char *d = strstr(line, "Syscall ");
		if (!d || !strstr(line, ": denied by seccomp"))
			continue;
		char *endp;
		long nr = strtol(d + 8, &endp, 10);
		if (endp == d + 8 || *endp != ':' || nr < 0 || nr > 4096)
			continue;
		const char *br = strrchr(line, '[');
		if (br && br < d)
			e.pid = (int32_t)strtol(br + 1, NULL, 10);
		e.syscall_nr = (int32_t)nr;
		char *name =
		    seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)nr);
		if (name) {
			wd_strlcpy(e.syscall, name, sizeof(e.syscall));
			free(name);
		}
		e.err = EPERM;
		wd_strlcpy(e.target,
			   "OCI seccomp in gVisor (baseline, syscalls.deny, "
			   "network.families)",
			   sizeof(e.target));
		emit(res, call, &e);
	}
}

/* runsc's own error (it writes JSON lines to --log): "" if none. */
static void runsc_error(struct wd_t3 *s, char *msg, size_t len)
{
	cleanup_free char *p = wd_asprintf("%s/runsc.log", s->dir);
	cleanup_free char *txt = NULL;
	size_t n;
	msg[0] = 0;
	if (wd_read_file(p, &txt, &n) < 0)
		return;
	for (char *line = txt, *nl; line && *line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = 0;
		if (!strstr(line, "\"level\":\"error\"") &&
		    !strstr(line, "\"level\":\"fatal\""))
			continue;
		json_t *o = json_loads(line, 0, NULL);
		const char *s0 =
		    o ? json_string_value(json_object_get(o, "msg")) : NULL;
		wd_strlcpy(msg, s0 ? s0 : line, len);
		json_decref(o);
	}
}

bool wd_t3_reap_shim(struct wd_t3 *s, int flags, int *status)
{
	if (s->shim < 0)
		return true;
	int st;
	pid_t w;
	while ((w = waitpid(s->shim, &st, flags)) < 0 && errno == EINTR)
		;
	if (w == s->shim) {
		*status = st;
		s->shim = -1;
		return true;
	}
	return false;
}

static uint64_t cpu_usage_ns(const char *id)
{
	char p[300];
	cleanup_free char *txt = NULL;
	size_t n;
	snprintf(p, sizeof(p), "/sys/fs/cgroup/cpuacct/warden/%s/cpuacct.usage",
		 id);
	if (wd_read_file(p, &txt, &n) < 0)
		return UINT64_MAX;
	return strtoull(txt, NULL, 10);
}

/* Positive evidence that the sandbox booted and its program started: the
 * sentry's boot log has the loader's line written after the container's
 * first process was created ("Process should have started...", info
 * level, so present without --debug). Its "EXEC: [" line is not enough:
 * it comes before the load, also when the load then fails. runsc's own
 * exit code proves nothing (a runsc that is /bin/true exits 0). */
#define T3_STARTED_MARK "Process should have started"

static bool sandbox_started(struct wd_t3 *s)
{
	if (s->started)
		return true;
	cleanup_free char *bl = wd_asprintf("%s/boot.log", s->dir);
	cleanup_free char *txt = NULL;
	size_t n;
	if (wd_read_file(bl, &txt, &n) == 0 && strstr(txt, T3_STARTED_MARK))
		s->started = true;
	return s->started;
}

/* Whether the shim has exited (without reaping it: its status is the
 * call's). */
static bool shim_exited(struct wd_t3 *s)
{
	siginfo_t si = {0};
	if (s->shim < 0)
		return true;
	if (waitid(P_PID, s->shim, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno != EINTR;
	return si.si_pid == s->shim;
}

int wd_t3_wait_settled(struct wd_t3 *s, uint32_t timeout_ms)
{
	uint64_t end = wd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	/* 1: the sentry has started the program */
	for (;;) {
		if (sandbox_started(s))
			break;
		if (shim_exited(s))
			return -ECHILD;
		if (wd_now_ns() >= end)
			return -ETIMEDOUT;
		usleep(5000);
	}
	/* 2: the sandbox went idle (the program blocks on stdin or has
	 * exited): < 1 ms of CPU over 30 ms. Without cpuacct: step 1 only. */
	uint64_t prev = cpu_usage_ns(s->id);
	if (prev == UINT64_MAX)
		return 0;
	while (wd_now_ns() < end) {
		usleep(30000);
		uint64_t cur = cpu_usage_ns(s->id);
		if (cur == UINT64_MAX || cur - prev < 1000000)
			return 0;
		prev = cur;
	}
	return -ETIMEDOUT;
}

bool wd_t3_alive(struct wd_t3 *s)
{
	return !shim_exited(s) && wd_t3_runsc_has_state(s->root, s->id);
}

/* No evidence that the program started: a refusal naming runsc and what
 * it did, never the program's outcome. */
static int not_started(struct wd_t3 *s, struct wd_result *res, const char *msg,
		       int code, bool timed_out, uint32_t tmo_ms,
		       struct wd_err *err)
{
	char said[256] = "";
	/* runsc's stderr is the capture pipe's: its first line says why
	 * (usage errors go there, not to --log) */
	if (res->err.len) {
		const char *nl = memchr(res->err.data, '\n', res->err.len);
		size_t l = nl ? (size_t)(nl - res->err.data) : res->err.len;
		l = WD_MIN(l, sizeof(said) - 1);
		memcpy(said, res->err.data, l);
		said[l] = 0;
	}
	if (msg[0])
		return wd_err_set(err, -EIO,
				  "tier 3: runsc '%s' failed before the "
				  "program started: %s",
				  s->runsc, msg);
	if (timed_out)
		return wd_err_set(err, -ETIMEDOUT,
				  "tier 3: runsc '%s' did not start the "
				  "sandbox's program within timeout_ms %u",
				  s->runsc, tmo_ms);
	cleanup_free char *bl = wd_asprintf("%s/boot.log", s->dir);
	bool booted = access(bl, F_OK) == 0;
	return wd_err_set(err, -EIO, "tier 3: runsc '%s' exited %d %s%s%s",
			  s->runsc, code,
			  booted ? "after booting a sandbox whose program "
				   "never started"
				 : "without booting a sandbox (no boot log)",
			  said[0] ? ": " : "", said);
}

int wd_t3_finish(struct wd_t3 *s, const struct wd_manifest *m,
		 const struct wd_call *call, struct wd_result *res,
		 struct wd_err *err)
{
	size_t cap =
	    m->output_max_bytes ? m->output_max_bytes : WD_DEFAULT_OUTPUT_MAX;
	uint32_t tmo_ms = m->timeout_ms ? m->timeout_ms : WD_DEFAULT_TIMEOUT_MS;
	uint64_t deadline = wd_now_ns() + (uint64_t)tmo_ms * 1000000ull;
	const char *in = call ? call->stdin_data : NULL;
	size_t in_len = in ? call->stdin_len : 0, in_off = 0;
	bool trunc = false, timed_out = false;
	int status = 0;
	bool exited = false;
	char buf[65536];

	s->finished = true;
	fcntl(s->in, F_SETFL, O_NONBLOCK);
	if (in_len == 0) {
		close(s->in);
		s->in = -1;
	}
	int pidfd =
	    s->shim >= 0 ? (int)syscall(SYS_pidfd_open, s->shim, 0) : -1;
	if (s->shim >= 0 && pidfd < 0) {
		/* The shim was reaped already (cannot be: only we wait for
		 * it) or pidfd is missing: poll with a short tick. */
		wd_debug("tier 3 '%s': pidfd_open: %s", s->id, strerror(errno));
	}
	bool rfailed = false;
	while (s->out >= 0 || s->err >= 0 || !exited) {
		struct pollfd p[6];
		int n = 0, i_out = -1, i_err = -1, i_in = -1, i_pid = -1;
		if (s->out >= 0)
			p[i_out = n++] = (struct pollfd){s->out, POLLIN, 0};
		if (s->err >= 0)
			p[i_err = n++] = (struct pollfd){s->err, POLLIN, 0};
		if (s->in >= 0)
			p[i_in = n++] = (struct pollfd){s->in, POLLOUT, 0};
		if (!exited && pidfd >= 0)
			p[i_pid = n++] = (struct pollfd){pidfd, POLLIN, 0};
		uint64_t now = wd_now_ns();
		int tmo;
		if (timed_out)
			tmo = 100; /* killed: drain what is left */
		else if (now >= deadline)
			tmo = 0;
		else
			tmo = (int)WD_MIN((deadline - now) / 1000000 + 1,
					  (uint64_t)INT32_MAX);
		if (pidfd < 0 && !exited)
			tmo = WD_MIN(tmo, 20);
		/* the link's denials as they come: each named by the answer
		 * its address had then (records are also read without a
		 * wake-up: bpf/lib/events.h) */
		int i_net = n;
		n += wd_t3_net_fds(s, p + n);
		if (n > i_net)
			tmo = WD_MIN(tmo, 50);
		int pr = poll(p, n, tmo);
		if (n > i_net)
			wd_t3_net_drain(s, call, res);
		/* the resolver failed (its pins are gone, it answers
		 * nothing): the call ends, fail closed */
		if (!rfailed && wd_t3_net_failed(s, NULL, 0)) {
			rfailed = true;
			wd_t3_kill_all(s);
		}
		if (pr < 0 && errno != EINTR)
			return wd_err_set(err, -errno, "poll: %s",
					  strerror(errno));
		if (i_in >= 0 && p[i_in].revents) {
			ssize_t w = write(s->in, in + in_off, in_len - in_off);
			if (w > 0)
				in_off += w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) ||
			    in_off == in_len) {
				close(s->in);
				s->in = -1;
			}
		}
		int *fds[2] = {&s->out, &s->err};
		struct wd_buf *bufs[2] = {&res->out, &res->err};
		int idx[2] = {i_out, i_err};
		for (int j = 0; j < 2; j++) {
			if (idx[j] < 0 || !p[idx[j]].revents)
				continue;
			ssize_t r = read(*fds[j], buf, sizeof(buf));
			if (r > 0) {
				wd_sb_take(bufs[j], buf, r, cap, &trunc);
			} else if (r == 0 ||
				   (errno != EINTR && errno != EAGAIN)) {
				close(*fds[j]);
				*fds[j] = -1;
			}
		}
		if (!exited && (i_pid < 0 || p[i_pid].revents))
			exited = wd_t3_reap_shim(s, WNOHANG, &status);
		if (!timed_out && wd_now_ns() >= deadline && !exited) {
			timed_out = true;
			wd_t3_kill_all(s);
		}
		if (timed_out && exited && pr == 0)
			break; /* a leftover writer: stop draining */
	}
	if (pidfd >= 0)
		close(pidfd);
	if (s->in >= 0) {
		close(s->in);
		s->in = -1;
	}

	char rmsg[200];
	if (wd_t3_net_failed(s, rmsg, sizeof(rmsg)))
		return wd_err_set(err, -EIO,
				  "network.allow names: the call's resolver "
				  "failed (%s); the call was ended",
				  rmsg);
	res->truncated = trunc;
	int code =
	    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	res->exit_code = code;
	char msg[512];
	runsc_error(s, msg, sizeof(msg));
	if (!sandbox_started(s))
		return not_started(s, res, msg, code, timed_out, tmo_ms, err);
	parse_boot_log(s, m, call, res);
	wd_t3_net_collect(s, call, res);
	uint64_t ooms = wd_cgroup_oom_kills(&s->cg);
	uint64_t pmax = pids_max_events(s);
	if (pmax > 0) {
		struct wd_event e = {.ts_ns = wd_wall_ns(),
				     .source = WD_SRC_SANDBOX,
				     .syscall_nr = -1,
				     .uid = s->uid,
				     .err = EAGAIN,
				     .verdict = WD_VERDICT_DENIED};
		unsigned pids = m->pids ? m->pids : WD_DEFAULT_PIDS;
		wd_strlcpy(e.kind, "pids", sizeof(e.kind));
		/* RLIMIT_NPROC stops the program's tasks first: reaching
		 * the host bound means the sentry itself could not get host
		 * threads, which it does not survive */
		bool killed = code != 0;
		snprintf(e.target, sizeof(e.target),
			 "host pids.max %u of the sandbox reached %llu "
			 "time(s)%s",
			 wd_t3_host_pids(pids), (unsigned long long)pmax,
			 killed ? ": the gVisor sandbox was killed" : "");
		emit(res, call, &e);
		if (killed)
			wd_result_enf(res, "pids",
				      "sandbox killed by the host pids bound "
				      "(pids.max %u; in-sandbox limit %u)",
				      wd_t3_host_pids(pids), pids);
	}
	if (timed_out) {
		res->status = WD_ST_TIMEOUT;
		res->exit_code = 124;
	} else if (ooms > 0) {
		struct wd_event e = {.ts_ns = wd_wall_ns(),
				     .source = WD_SRC_SANDBOX,
				     .syscall_nr = -1,
				     .uid = s->uid,
				     .err = ENOMEM,
				     .verdict = WD_VERDICT_DENIED};
		wd_strlcpy(e.kind, "oom", sizeof(e.kind));
		snprintf(e.target, sizeof(e.target), "memory limit %u MB",
			 m->memory_mb ? m->memory_mb : WD_DEFAULT_MEMORY_MB);
		emit(res, call, &e);
		res->status = WD_ST_OOM;
	} else if (msg[0] && pmax == 0) {
		/* runsc failed after the start (lost the sandbox): a sandbox
		 * error, not the program's outcome. */
		return wd_err_set(err, -EIO, "tier 3: runsc '%s': %s", s->runsc,
				  msg);
	} else {
		res->status = code == 0 ? WD_ST_OK : WD_ST_ERROR;
	}
	return 0;
}
