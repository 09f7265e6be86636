/* runsc (gVisor, tier 3): where it is, its version, and a real `runsc do`
 * test per platform, cached by the binary's path, size and mtime. */
#include "enforce/probe.h"
#include "enforce/probe_int.h"
#include "sandbox/gvisor.h"
#include "common/log.h"
#include "common/util.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* ---- runsc ------------------------------------------------------------- */

/* Run argv with stdout+stderr into out (truncated, NUL-terminated), killing
 * its process group after timeout_ms. Returns the wait status or -errno
 * (-ETIMEDOUT). */
static int run_capture(char *const argv[], int timeout_ms, char *out,
		       size_t outlen)
{
	int p[2];
	pid_t pid = wd_probe_fork_pipe(p);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		setpgid(0, 0);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(p[1], 1);
		dup2(p[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	uint64_t deadline = wd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	bool timeout = false;
	for (;;) {
		int64_t left = (int64_t)(deadline - wd_now_ns()) / 1000000;
		if ((int64_t)(deadline - wd_now_ns()) <= 0) {
			timeout = true;
			break;
		}
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int r = poll(&pf, 1, (int)WD_MIN(left + 1, 1000));
		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		char tmp[1024];
		ssize_t n = read(p[0], tmp, sizeof(tmp));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t k = WD_MIN((size_t)n, outlen - 1 - got);
		memcpy(out + got, tmp, k);
		got += k;
	}
	out[got] = 0;
	close(p[0]);
	if (timeout)
		kill(-pid, SIGKILL);
	int st = wd_probe_wait_child(pid, timeout ? 1000 : timeout_ms);
	if (timeout || st == -ETIMEDOUT) {
		kill(-pid, SIGKILL);
		return -ETIMEDOUT;
	}
	return st;
}

/* The runsc tier 3 will use (sandbox/gvisor.c owns the lookup), so the
 * status reports exactly what a call would get. */
static int find_runsc(char *out, size_t len)
{
	struct wd_err err = {0};
	return wd_t3_runsc_path(out, len, &err) < 0 ? -ENOENT : 0;
}

static void last_line(const char *s, char *out, size_t len)
{
	const char *end = s + strlen(s);
	while (end > s && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	const char *b = end;
	while (b > s && b[-1] != '\n')
		b--;
	size_t n = WD_MIN((size_t)(end - b), len - 1);
	memcpy(out, b, n);
	out[n] = 0;
}

/* The cache line: "v2 <path> <size> <mtime_s> <mtime_ns> <ino> <err>
 * <platform|-> <oci_seccomp 0|1> <note...>". A runsc upgrade changes
 * size/mtime/inode and so invalidates it. */
static int runsc_cache_read(struct wd_features *f, const struct stat *st)
{
	cleanup_free char *s = NULL;
	struct stat cs;
	/* Trust only a cache root wrote: a forged "works" would make tier 3
	 * look available where it is not. */
	if (lstat(WD_PROBE_RUNSC_CACHE, &cs) < 0)
		return -errno;
	if (!S_ISREG(cs.st_mode) || cs.st_uid != 0 || (cs.st_mode & 022))
		return -EPERM;
	int r = wd_read_file(WD_PROBE_RUNSC_CACHE, &s, NULL);
	if (r < 0)
		return r;
	char path[128], plat[16];
	long long size, ms, mns, ino;
	int err, off = 0;
	int oci;
	if (sscanf(s, "v2 %127s %lld %lld %lld %lld %d %15s %d %n", path, &size,
		   &ms, &mns, &ino, &err, plat, &oci, &off) != 8)
		return -EINVAL;
	if (strcmp(path, f->runsc_path) || size != (long long)st->st_size ||
	    ms != (long long)st->st_mtim.tv_sec ||
	    mns != (long long)st->st_mtim.tv_nsec ||
	    ino != (long long)st->st_ino)
		return -ESTALE;
	f->runsc_tested = f->runsc_cached = true;
	f->runsc_run_err = err;
	f->runsc_oci_seccomp = oci == 1;
	if (strcmp(plat, "-"))
		wd_strlcpy(f->runsc_platform, plat, sizeof(f->runsc_platform));
	if (off > 0) {
		wd_strlcpy(f->runsc_note, s + off, sizeof(f->runsc_note));
		wd_probe_strip_nl(f->runsc_note);
	}
	return 0;
}

static void runsc_cache_write(const struct wd_features *f,
			      const struct stat *st)
{
	if (wd_mkdir_p("/run/warden", 0755) < 0)
		return;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s.%d", WD_PROBE_RUNSC_CACHE, getpid());
	cleanup_free char *line = wd_asprintf(
	    "v2 %s %lld %lld %lld %lld %d %s %d %s\n", f->runsc_path,
	    (long long)st->st_size, (long long)st->st_mtim.tv_sec,
	    (long long)st->st_mtim.tv_nsec, (long long)st->st_ino,
	    f->runsc_run_err, f->runsc_platform[0] ? f->runsc_platform : "-",
	    f->runsc_oci_seccomp ? 1 : 0, f->runsc_note);
	if (wd_write_file(tmp, line, strlen(line), 0644) < 0 ||
	    rename(tmp, WD_PROBE_RUNSC_CACHE) < 0) {
		unlink(tmp);
		wd_debug("probe: cannot write %s", WD_PROBE_RUNSC_CACHE);
	}
}

void wd_probe_runsc(struct wd_features *f)
{
	f->runsc_err = find_runsc(f->runsc_path, sizeof(f->runsc_path));
	if (f->runsc_err)
		return;
	char out[4096];
	char *argv[] = {f->runsc_path, "--version", NULL};
	int st = run_capture(argv, 5000, out, sizeof(out));
	if (st < 0 && st != -ECHILD) {
		f->runsc_err = st;
		return;
	}
	/* -ECHILD: reaped by a caller's SIGCHLD handler; judge by output */
	if (st >= 0 ? !WIFEXITED(st) || WEXITSTATUS(st)
		    : !strstr(out, "runsc version ")) {
		f->runsc_err = -ENOEXEC;
		last_line(out, f->runsc_note, sizeof(f->runsc_note));
		return;
	}
	const char *v = strstr(out, "runsc version ");
	if (v) {
		v += strlen("runsc version ");
		size_t n =
		    WD_MIN(strcspn(v, "\n "), sizeof(f->runsc_version) - 1);
		memcpy(f->runsc_version, v, n);
		f->runsc_version[n] = 0;
	}
	f->runsc = true;
	struct stat sb;
	if (stat(f->runsc_path, &sb) == 0)
		runsc_cache_read(f, &sb);
}

/* Run `runsc --platform=P --network=none do /bin/true` under a private
 * --root; 0, -ETIMEDOUT, -EIO when it exits non-zero, or -ECHILD when its
 * status was reaped by someone else (a caller's SIGCHLD handler). */
static int runsc_try(struct wd_features *f, const char *platform)
{
	char root[] = "/tmp/warden-probe-runsc.XXXXXX";
	if (!mkdtemp(root))
		return -errno;
	cleanup_free char *rootarg = wd_asprintf("--root=%s", root);
	cleanup_free char *platarg = wd_asprintf("--platform=%s", platform);
	char *argv[] = {f->runsc_path, rootarg,	    platarg, "--network=none",
			"do",	       "/bin/true", NULL};
	char out[4096];
	int st = run_capture(argv, 15000, out, sizeof(out));
	wd_rm_rf(root);
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	last_line(out, f->runsc_note, sizeof(f->runsc_note));
	return st < 0 ? st : -EIO;
}

void wd_probe_runsc_run(struct wd_features *f)
{
	if (!f->runsc || (f->runsc_tested && f->runsc_cached))
		return;
	struct stat sb;
	if (stat(f->runsc_path, &sb) < 0)
		return;
	/* ptrace works everywhere (nested KVM is unreliable on our nodes);
	 * systrap is the newer default where the package has it */
	static const char *const platforms[] = {"ptrace", "systrap"};
	int err = -ENOENT;
	f->runsc_note[0] = 0;
	for (size_t i = 0; i < WD_ARRAY_SIZE(platforms); i++) {
		err = runsc_try(f, platforms[i]);
		if (!err) {
			wd_strlcpy(f->runsc_platform, platforms[i],
				   sizeof(f->runsc_platform));
			f->runsc_note[0] = 0;
			break;
		}
	}
	char out[16384];
	char *argv[] = {f->runsc_path, "flags", NULL};
	int st = run_capture(argv, 5000, out, sizeof(out));
	f->runsc_oci_seccomp = st >= 0 && strstr(out, "-oci-seccomp");
	f->runsc_tested = err != -ECHILD;
	f->runsc_cached = false;
	f->runsc_run_err = err;
	/* an unknowable answer is not cached: it would outlive its cause */
	if (f->runsc_tested)
		runsc_cache_write(f, &sb);
}
