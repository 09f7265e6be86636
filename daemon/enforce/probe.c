/* Kernel feature probe. Each probe is a small, independent function that
 * fills its fields of struct wd_features and records -errno when it fails.
 *
 * Probes that change process state (seccomp filters, unshare, mounts) run in
 * a forked child, so the caller's process is never altered: the child only
 * makes raw system calls on buffers prepared before fork() (the caller may
 * be multi-threaded, so no malloc/stdio/locks in the child) and reports
 * through a pipe or its exit status.
 *
 * Here: kernel, BTF, LSM list, BPF, Landlock and the entry points;
 * probe_sys.c: seccomp, namespaces, io_uring, audit; probe_cgroup.c: the
 * cgroup layout; probe_runsc.c: gVisor.
 */
#include "enforce/probe.h"
#include "enforce/probe_int.h"
#include "common/log.h"
#include "common/util.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>

const char *wd_cg_ctrl_name(enum wd_cg_ctrl c)
{
	static const char *const n[WD_CG_NCTRL] = {"memory", "pids", "cpu"};
	return c < WD_CG_NCTRL ? n[c] : "?";
}

const char *wd_ns_name(enum wd_ns n)
{
	static const char *const s[WD_NS_N] = {"mnt", "pid", "ipc", "uts",
					       "net"};
	return n < WD_NS_N ? s[n] : "?";
}

/* ---- fork helpers ------------------------------------------------------ */

/* Wait for a probe child, killing it after timeout_ms. Returns the wait
 * status, or -ETIMEDOUT / -errno. */
int wd_probe_wait_child(pid_t pid, int timeout_ms)
{
	uint64_t deadline = wd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int st;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (wd_now_ns() > deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return -ETIMEDOUT;
		}
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
}

pid_t wd_probe_fork_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	return pid;
}

/* Read exactly len bytes from fd (or fewer at EOF). Returns bytes read. */
ssize_t wd_probe_read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	return got;
}

/* ---- kernel, BTF ------------------------------------------------------- */

static void probe_kernel(struct wd_features *f)
{
	struct utsname u;
	if (uname(&u) == 0) {
		wd_strlcpy(f->kernel_release, u.release,
			   sizeof(f->kernel_release));
		wd_strlcpy(f->machine, u.machine, sizeof(f->machine));
	}
}

/* ---- LSM list ---------------------------------------------------------- */

/* securityfs is often not mounted (it is not here). Mounting it on the
 * host would change the node's mounts, so mount it in a private mount
 * namespace of a short-lived child: MS_PRIVATE first, so the mount cannot
 * propagate back to the host's shared /sys. */
static int lsm_from_private_securityfs(char *buf, size_t len)
{
	int p[2];
	pid_t pid = wd_probe_fork_pipe(p);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		char b[256];
		int err = 0;
		ssize_t n = 0;
		close(p[0]);
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("securityfs", "/sys/kernel/security", "securityfs",
			  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
			err = errno;
		} else {
			int fd = open("/sys/kernel/security/lsm",
				      O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				err = errno;
			else if ((n = read(fd, b, sizeof(b) - 1)) < 0)
				err = errno, n = 0;
		}
		if (write(p[1], &err, sizeof(err)) < 0 ||
		    (n > 0 && write(p[1], b, n) < 0))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	int err = 0;
	ssize_t n = wd_probe_read_full(p[0], &err, sizeof(err));
	ssize_t m = 0;
	if (n == sizeof(err) && !err)
		m = wd_probe_read_full(p[0], buf, len - 1);
	close(p[0]);
	wd_probe_wait_child(pid, 2000);
	if (n != sizeof(err))
		return -EIO;
	if (err)
		return -err;
	buf[m] = 0;
	return 0;
}

void wd_probe_strip_nl(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

bool wd_probe_list_has(const char *list, const char *word)
{
	size_t w = strlen(word);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == w && !strncmp(p, word, w))
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

static void probe_lsm(struct wd_features *f)
{
	cleanup_free char *s = NULL;
	int r = wd_read_file("/sys/kernel/security/lsm", &s, NULL);
	if (r == 0) {
		wd_strlcpy(f->lsm_list, s, sizeof(f->lsm_list));
		wd_strlcpy(f->lsm_source, "securityfs", sizeof(f->lsm_source));
	} else {
		char b[256];
		r = lsm_from_private_securityfs(b, sizeof(b));
		if (r == 0) {
			wd_strlcpy(f->lsm_list, b, sizeof(f->lsm_list));
			wd_strlcpy(f->lsm_source,
				   "securityfs (private mount namespace)",
				   sizeof(f->lsm_source));
		}
	}
	if (r < 0) {
		/* Last resort: the boot request. It names what was asked
		 * for, not what is active; lsm_source says so. */
		cleanup_free char *c = NULL;
		const char *p;
		f->lsm_err = r;
		if (wd_read_file("/proc/cmdline", &c, NULL) == 0 &&
		    (p = strstr(c, "lsm=")) && (p == c || p[-1] == ' ')) {
			p += 4;
			size_t n = strcspn(p, " \n");
			if (n < sizeof(f->lsm_list)) {
				memcpy(f->lsm_list, p, n);
				f->lsm_list[n] = 0;
				wd_strlcpy(f->lsm_source, "/proc/cmdline lsm=",
					   sizeof(f->lsm_source));
			}
		}
	}
	wd_probe_strip_nl(f->lsm_list);
	f->bpf_in_lsm_list = wd_probe_list_has(f->lsm_list, "bpf");
}

/* ---- BPF --------------------------------------------------------------- */

static const struct bpf_insn ret0[] = {
    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
    {.code = BPF_JMP | BPF_EXIT},
};
static const struct bpf_insn ret1[] = {
    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1},
    {.code = BPF_JMP | BPF_EXIT},
};

/* Load a minimal trampoline program attached (by BTF id) to `func`. */
static int load_btf_prog(struct btf *vmlinux, enum bpf_prog_type type,
			 enum bpf_attach_type attach, const char *func)
{
	int id = btf__find_by_name_kind(vmlinux, func, BTF_KIND_FUNC);
	if (id < 0)
		return id;
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = attach,
		    .attach_btf_id = id);
	int fd = bpf_prog_load(type, "wd_probe", "GPL", ret0, 2, &o);
	if (fd < 0)
		return fd < -1 ? fd : -errno;
	close(fd);
	return 0;
}

static void probe_bpf(struct wd_features *f)
{
	struct stat st;
	f->btf = stat("/sys/kernel/btf/vmlinux", &st) == 0;
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int e = libbpf_get_error(vmlinux);
	if (e) {
		f->btf_err = e < 0 ? e : -e;
		vmlinux = NULL;
		f->trampoline_err = f->lsm_prog_err = f->btf_err;
	} else {
		/* bpf_fentry_test1 exists for BPF's own selftests; fall back
		 * to a function every kernel has. */
		f->trampoline_err =
		    load_btf_prog(vmlinux, BPF_PROG_TYPE_TRACING,
				  BPF_TRACE_FENTRY, "bpf_fentry_test1");
		if (f->trampoline_err == -ENOENT)
			f->trampoline_err =
			    load_btf_prog(vmlinux, BPF_PROG_TYPE_TRACING,
					  BPF_TRACE_FENTRY, "do_sys_openat2");
		f->lsm_prog_err =
		    load_btf_prog(vmlinux, BPF_PROG_TYPE_LSM, BPF_LSM_MAC,
				  "bpf_lsm_file_open");
		btf__free(vmlinux);
	}

	LIBBPF_OPTS(bpf_prog_load_opts, o,
		    .expected_attach_type = BPF_CGROUP_INET4_CONNECT);
	int fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "wd_probe",
			       "GPL", ret1, 2, &o);
	if (fd < 0) {
		f->cgroup_sockaddr_err = -errno;
	} else {
		close(fd);
		f->cgroup_sockaddr_err = 0;
	}

	fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "wd_probe", 0, 0, 4096, NULL);
	if (fd < 0) {
		f->ringbuf_err = -errno;
	} else {
		close(fd);
		f->ringbuf_err = 0;
	}
}

/* ---- Landlock ---------------------------------------------------------- */

static void probe_landlock(struct wd_features *f)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
			   LANDLOCK_CREATE_RULESET_VERSION);
	f->landlock_abi = abi < 0 ? -errno : (int)abi;
	long errata = syscall(SYS_landlock_create_ruleset, NULL, 0,
			      LANDLOCK_CREATE_RULESET_ERRATA);
	f->landlock_errata = errata < 0 ? -errno : (int)errata;
}

/* ---- entry points ------------------------------------------------------ */

static struct wd_features g_basic, g_t3, g_full;
static pthread_once_t g_basic_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_t3_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_full_once = PTHREAD_ONCE_INIT;

/* The probes whose answers hold for the boot (see probe_cache.c). */
static void probe_boot_stable(struct wd_features *f)
{
	probe_kernel(f);
	probe_lsm(f);
	probe_bpf(f);
	probe_landlock(f);
	wd_probe_seccomp(f);
	wd_probe_namespaces(f);
}

/* AUDIT_GET blocks its sender until the kernel has started a thread to
 * answer it (audit_send_reply: kthreadd forks one per request), 0.2 ms on
 * a quiet machine and 2.5 ms under load, most of a one-shot call's probe:
 * it is asked on a thread (small stack: it only makes the request) while
 * the caller goes on, and the answer taken where it is first needed. */
/* Started aside (common/util.h: on another CPU, or it would wait for the
 * caller to block) and joined by the settle, the one reader of its answer
 * (g_audit_f). A process that never settles (wardend before its first
 * call, a verb that probes and exits) joins it at exit (audit_at_exit):
 * one thread a process (pthread_once), never left to the exit. */
static struct wd_features g_audit_f;
static bool g_audit_running;
static struct wd_aside g_audit_th;
static pid_t g_audit_pid;   /* the process that started it: not a fork's */
static bool g_audit_forked; /* this process is a fork of that one */
static pthread_once_t g_audit_once = PTHREAD_ONCE_INIT;

static struct wd_probe_key g_key;
static bool g_key_ok;
static bool g_one_call; /* wd_probe_one_call */

void wd_probe_one_call(void)
{
	g_one_call = true;
}

/* AUDIT_GET, and for a one-shot call its answer shared with the next
 * ones (probe_cache.c) before anyone reads it: the process may exit as
 * soon as it has the answer. A failure (a timeout, no right to ask) is no
 * answer to share. */
static void audit_ask(struct wd_features *a)
{
	wd_probe_audit(a);
	if (g_one_call && g_key_ok && a->audit_err == 0)
		(void)wd_probe_audit_memo_write(g_key.boot_id, a,
						wd_probe_audit_at_ns());
}

static void *audit_main(void *arg)
{
	audit_ask(&g_audit_f); /* read once joined */
	return arg;
}

static void do_audit_settle(void);

static void audit_at_exit(void)
{
	/* a forked child that exits has no such thread to join (by the
	 * fork handler; by the pid too, for a fork that ran no handlers) */
	if (!__atomic_load_n(&g_audit_forked, __ATOMIC_ACQUIRE) &&
	    getpid() == __atomic_load_n(&g_audit_pid, __ATOMIC_ACQUIRE))
		pthread_once(&g_audit_once, do_audit_settle);
}

static void audit_forked(void)
{
	__atomic_store_n(&g_audit_forked, true, __ATOMIC_RELEASE);
}

static void audit_begin(struct wd_features *f)
{
	f->audit = false;
	f->audit_enabled = -1;
	f->audit_err = -EINPROGRESS;
	g_audit_f = *f;
	/* aside: started on another CPU, not after the caller's set-up */
	g_audit_running =
	    wd_aside_start(&g_audit_th, 64 * 1024, audit_main, NULL) == 0;
	if (!g_audit_running) {
		audit_ask(f);
		return;
	}
	__atomic_store_n(&g_audit_pid, getpid(), __ATOMIC_RELEASE);
	(void)pthread_atfork(NULL, NULL, audit_forked);
	/* the answer comes within the request's receive timeout */
	(void)atexit(audit_at_exit);
}

const struct wd_probe_key *wd_probe_cache_key(void)
{
	(void)wd_probe();
	return g_key_ok ? &g_key : NULL;
}

static void do_probe(void)
{
	struct wd_features *f = &g_basic;
	struct wd_probe_key key;
	char path[4096];
	memset(f, 0, sizeof(*f));
	/* only root's probe is cached: the file is root's, and a non-root
	 * caller's answers (no BPF, fewer namespaces) are not the node's */
	/* a one-shot call decides nothing on the namespace answers: it
	 * leaves their sysctls out of the key it looks for */
	bool cacheable = geteuid() == 0 &&
			 (g_one_call ? wd_probe_key_base(&key)
				     : wd_probe_key_now(&key)) == 0 &&
			 wd_probe_cache_path(path, sizeof(path)) == 0;
	int r = cacheable ? wd_probe_cache_read(path, &key, f) : -ENOENT;
	if (cacheable) {
		g_key = key;
		memset(g_key.sysctl, 0, sizeof(g_key.sysctl));
		g_key_ok = true;
	}
	if (r == 0) {
		f->from_cache = true;
		if (!key.sysctl[0]) {
			/* the file's may follow other sysctls: not asked */
			f->userns = false;
			f->userns_err = -EAGAIN;
			for (int i = 0; i < WD_NS_N; i++)
				f->ns_err[i] = -EAGAIN;
		}
	} else {
		if (cacheable && r != -ENOENT)
			wd_debug("probe: cache '%s' not used (%s): probing",
				 path, strerror(-r));
		/* written under the whole key, whoever probes, read before
		 * the probes whose answers follow it */
		if (cacheable && !key.sysctl[0] &&
		    wd_probe_key_sysctls(&key) < 0)
			cacheable = false;
		memset(f, 0, sizeof(*f));
		probe_boot_stable(f);
		if (cacheable && (r = wd_probe_cache_write(path, &key, f)) < 0)
			/* only slower: the next process probes again */
			wd_log_errno(WD_LOG_DEBUG, r, "probe: cache '%s'",
				     path);
	}
	/* may change at any time, or differ by mount namespace: never
	 * cached (but the audit answer and the cgroup layout one-shot calls
	 * share, below). io_uring and ping are read by wd_probe_full (only
	 * `warden status` and the fleet's node report show them: a call decides
	 * nothing on them) */
	f->io_uring_disabled = -1;
	f->io_uring_err = -EAGAIN;
	f->ping_gid_lo = f->ping_gid_hi = -1;
	f->ping_err = -EAGAIN;
	/* asked on a thread of its own, read by wd_probe_audit_settle; a
	 * one-shot call first takes an answer shared less than a second
	 * ago, as it was then (when it was asked: native.c) */
	uint64_t at;
	if (g_one_call && g_key_ok &&
	    wd_probe_audit_memo_read(g_key.boot_id, wd_now_ns(), f, &at) == 0)
		wd_probe_audit_note_at(at);
	else
		audit_begin(f);
	/* mountinfo, formatted by the kernel for every mount: ~0.1 ms of a
	 * one-shot call, which takes the layout another one found while its
	 * mounts are the same */
	f->cg_err = g_one_call && g_key_ok
			? wd_cgroup_layout_cached(&g_key, &f->cg)
			: wd_cgroup_layout_detect(&f->cg);
}

static void do_audit_settle(void)
{
	if (!g_audit_running)
		return;
	wd_aside_join(&g_audit_th);
	g_audit_running = false;
	g_basic.audit = g_audit_f.audit;
	g_basic.audit_enabled = g_audit_f.audit_enabled;
	g_basic.audit_err = g_audit_f.audit_err;
}

void wd_probe_audit_settle(void)
{
	(void)wd_probe();
	pthread_once(&g_audit_once, do_audit_settle);
}

static void do_probe_tier3(void)
{
	wd_probe_audit_settle();
	g_t3 = *wd_probe();
	wd_probe_runsc(&g_t3);
}

static void do_probe_full(void)
{
	g_full = *wd_probe_tier3();
	wd_probe_io_uring(&g_full);
	wd_probe_ping(&g_full);
	wd_probe_runsc_run(&g_full);
}

const struct wd_features *wd_probe(void)
{
	pthread_once(&g_basic_once, do_probe);
	return &g_basic;
}

const struct wd_features *wd_probe_tier3(void)
{
	pthread_once(&g_t3_once, do_probe_tier3);
	return &g_t3;
}

const struct wd_features *wd_probe_full(void)
{
	pthread_once(&g_full_once, do_probe_full);
	return &g_full;
}
