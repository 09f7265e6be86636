/* Kernel feature probe. Each probe is a small, independent function that
 * fills its fields of struct wd_features and records -errno when it fails.
 *
 * Probes that change process state (seccomp filters, unshare, mounts) run in
 * a forked child, so the caller's process is never altered: the child only
 * makes raw system calls on buffers prepared before fork() (the caller may
 * be multi-threaded, so no malloc/stdio/locks in the child) and reports
 * through a pipe or its exit status.
 */
#include "enforce/probe.h"
#include "common/log.h"
#include "common/util.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>

#ifndef AUDIT_ARCH_X86_64
#define AUDIT_ARCH_X86_64 0xc000003e
#endif

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
static int wait_child(pid_t pid, int timeout_ms)
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

/* Read exactly len bytes from fd (or fewer at EOF). Returns bytes read. */
static ssize_t read_full(int fd, void *buf, size_t len)
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
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
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
	ssize_t n = read_full(p[0], &err, sizeof(err));
	ssize_t m = 0;
	if (n == sizeof(err) && !err)
		m = read_full(p[0], buf, len - 1);
	close(p[0]);
	wait_child(pid, 2000);
	if (n != sizeof(err))
		return -EIO;
	if (err)
		return -err;
	buf[m] = 0;
	return 0;
}

static void strip_nl(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

static bool list_has(const char *list, const char *word)
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
	strip_nl(f->lsm_list);
	f->bpf_in_lsm_list = list_has(f->lsm_list, "bpf");
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

/* ---- seccomp ----------------------------------------------------------- */

static int seccomp_action_avail(uint32_t action)
{
	if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0)
		return -errno;
	return 0;
}

struct notify_result {
	int setup_err; /* errno of filter install or listener */
	int recv_err;  /* errno of NOTIF_RECV */
	int addfd_err; /* errno of NOTIF_ADDFD (0 = ok) */
	int cont_err;  /* errno of NOTIF_SEND with FLAG_CONTINUE */
	int target_st; /* wait status of the notified grandchild */
};

/* The child: installs a filter that sends getppid() to a listener, forks a
 * target that calls getppid(), and answers that notification first with
 * ADDFD (an fd at number 100 in the target) then with FLAG_CONTINUE. The
 * target exits with bit 0 = getppid() returned the real parent (continue
 * worked), bit 1 = fd 100 exists (addfd worked). */
static void notify_child(int out, const struct seccomp_notif_sizes *sz)
{
	struct notify_result res = {0};
	/* a buffer large enough for any seccomp_notif of today's kernels;
	 * the kernel says how large it writes (sz->seccomp_notif) */
	union {
		struct seccomp_notif n;
		char b[512];
	} req;
	struct sock_filter insns[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		     offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		     offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getppid, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = WD_ARRAY_SIZE(insns), .filter = insns};
	/* a SIGCHLD handler inherited from the caller must not reap the
	 * target before we read its status */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigaction(SIGCHLD, &dfl, NULL);
	alarm(5);
	if (sz->seccomp_notif > sizeof(req)) {
		res.setup_err = E2BIG;
		goto out;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		res.setup_err = errno;
		goto out;
	}
	pid_t me = getpid();
	int lfd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			  SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (lfd < 0) {
		res.setup_err = errno;
		goto out;
	}
	close(100); /* only ADDFD may create it in the target */
	pid_t t = fork();
	if (t < 0) {
		res.setup_err = errno;
		goto out;
	}
	if (t == 0) {
		alarm(5);
		long pp = syscall(SYS_getppid);
		int bits =
		    (pp == me ? 1 : 0) | (fcntl(100, F_GETFD) >= 0 ? 2 : 0);
		_exit(bits);
	}
	memset(&req, 0, sizeof(req));
	if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
		res.recv_err = errno;
		kill(t, SIGKILL);
	} else {
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		struct seccomp_notif_addfd a = {.id = req.n.id,
						.flags =
						    SECCOMP_ADDFD_FLAG_SETFD,
						.srcfd = nul,
						.newfd = 100};
		if (nul < 0 || ioctl(lfd, SECCOMP_IOCTL_NOTIF_ADDFD, &a) < 0)
			res.addfd_err = errno ? errno : EBADF;
		struct seccomp_notif_resp resp = {
		    .id = req.n.id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
		if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0) {
			res.cont_err = errno;
			struct seccomp_notif_resp deny = {.id = req.n.id,
							  .error = -EPERM};
			if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &deny) < 0)
				kill(t, SIGKILL);
		}
	}
	while (waitpid(t, &res.target_st, 0) < 0 && errno == EINTR)
		;
out:
	if (write(out, &res, sizeof(res)) != sizeof(res))
		_exit(1);
	_exit(0);
}

static void probe_seccomp(struct wd_features *f)
{
	f->seccomp_filter_err = seccomp_action_avail(SECCOMP_RET_KILL_PROCESS);
	if (!f->seccomp_filter_err)
		f->seccomp_filter_err = seccomp_action_avail(SECCOMP_RET_ERRNO);
	f->seccomp_filter = f->seccomp_filter_err == 0;

	struct seccomp_notif_sizes sz = {0};
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0) {
		f->seccomp_notify_err = -errno;
	} else {
		f->seccomp_notif_sizes[0] = sz.seccomp_notif;
		f->seccomp_notif_sizes[1] = sz.seccomp_notif_resp;
		f->seccomp_notif_sizes[2] = sz.seccomp_data;
		f->seccomp_notify_err =
		    seccomp_action_avail(SECCOMP_RET_USER_NOTIF);
	}
	f->seccomp_continue_err = f->seccomp_addfd_err = f->seccomp_notify_err;
	if (f->seccomp_notify_err)
		return;

	/* A listener is only useful if a notification round-trips: check
	 * it for real in a child (installing a filter is irreversible). */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		f->seccomp_notify_err = -errno;
		return;
	}
	pid_t pid = fork();
	if (pid < 0) {
		f->seccomp_notify_err = -errno;
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		close(p[0]);
		notify_child(p[1], &sz);
	}
	close(p[1]);
	struct notify_result res;
	ssize_t n = read_full(p[0], &res, sizeof(res));
	close(p[0]);
	int st = wait_child(pid, 6000);
	if (n != sizeof(res)) {
		f->seccomp_notify_err = st == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
		f->seccomp_continue_err = f->seccomp_addfd_err =
		    f->seccomp_notify_err;
		return;
	}
	int err = res.setup_err ? res.setup_err : res.recv_err;
	if (err) {
		f->seccomp_notify_err = -err;
		f->seccomp_continue_err = f->seccomp_addfd_err = -err;
		return;
	}
	f->seccomp_notify = true;
	int bits = WIFEXITED(res.target_st) ? WEXITSTATUS(res.target_st) : 0;
	f->seccomp_addfd_err =
	    res.addfd_err ? -res.addfd_err : (bits & 2 ? 0 : -EIO);
	f->seccomp_continue_err =
	    res.cont_err ? -res.cont_err : (bits & 1 ? 0 : -EIO);
	f->seccomp_addfd = f->seccomp_addfd_err == 0;
	f->seccomp_notify_continue = f->seccomp_continue_err == 0;
}

/* ---- namespaces -------------------------------------------------------- */

/* One child per namespace type: a child that unshared a mount namespace is
 * still a clean place to try the next one, but separate children keep each
 * answer independent of the others. */
static int try_unshare(int flags)
{
	/* The answer travels through a pipe, not the exit status: a daemon
	 * that reaps children with its own SIGCHLD handler must not turn a
	 * working namespace into "unavailable". */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	if (pid == 0) {
		int e = unshare(flags) < 0 ? errno : 0;
		_exit(write(p[1], &e, sizeof(e)) == sizeof(e) ? 0 : 1);
	}
	close(p[1]);
	int e = 0;
	ssize_t n = read_full(p[0], &e, sizeof(e));
	close(p[0]);
	wait_child(pid, 2000);
	if (n != sizeof(e))
		return -EIO;
	return -e;
}

static void probe_namespaces(struct wd_features *f)
{
	static const int flags[WD_NS_N] = {CLONE_NEWNS, CLONE_NEWPID,
					   CLONE_NEWIPC, CLONE_NEWUTS,
					   CLONE_NEWNET};
	f->userns_err = try_unshare(CLONE_NEWUSER);
	f->userns = f->userns_err == 0;
	for (int i = 0; i < WD_NS_N; i++)
		f->ns_err[i] = try_unshare(flags[i]);
}

/* ---- io_uring, audit --------------------------------------------------- */

static void probe_io_uring(struct wd_features *f)
{
	cleanup_free char *s = NULL;
	f->io_uring_disabled = -1;
	f->io_uring_err =
	    wd_read_file("/proc/sys/kernel/io_uring_disabled", &s, NULL);
	if (!f->io_uring_err && s[0] >= '0' && s[0] <= '9')
		f->io_uring_disabled = atoi(s);
	else if (!f->io_uring_err)
		f->io_uring_err = -EINVAL;
}

static void probe_audit(struct wd_features *f)
{
	f->audit_enabled = -1;
	cleanup_close int fd =
	    socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
	if (fd < 0) {
		f->audit_err = -errno;
		return;
	}
	struct timeval tv = {.tv_sec = 1};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_nl kern = {.nl_family = AF_NETLINK};
	struct {
		struct nlmsghdr h;
		char pad[16];
	} req = {.h = {.nlmsg_len = NLMSG_LENGTH(0),
		       .nlmsg_type = AUDIT_GET,
		       .nlmsg_flags = NLM_F_REQUEST,
		       .nlmsg_seq = 1}};
	if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kern,
		   sizeof(kern)) < 0) {
		f->audit_err = -errno;
		return;
	}
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	for (int tries = 0; tries < 4; tries++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			f->audit_err = errno == EAGAIN ? -ETIMEDOUT : -errno;
			return;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf;
		     NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_ERROR &&
			    h->nlmsg_len >=
				NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				if (e->error) {
					f->audit_err = e->error;
					return;
				}
			} else if (h->nlmsg_type == AUDIT_GET &&
				   h->nlmsg_len >=
				       NLMSG_LENGTH(offsetof(
					   struct audit_status, pid))) {
				struct audit_status *s = NLMSG_DATA(h);
				f->audit = true;
				f->audit_err = 0;
				f->audit_enabled = (int)s->enabled;
				return;
			}
		}
	}
	f->audit_err = -ENOMSG;
}

/* ---- cgroups ----------------------------------------------------------- */

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' &&
		    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 +
				      (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
}

static bool opt_has(const char *opts, const char *word)
{
	return list_has(opts, word);
}

int wd_cgroup_layout_parse(const char *mountinfo, const char *controllers,
			   struct wd_cgroup_layout *out)
{
	memset(out, 0, sizeof(*out));
	bool v2 = false;
	const char *line = mountinfo;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char l[4096];
		if (len < sizeof(l)) {
			memcpy(l, line, len);
			l[len] = 0;
			/* id parent maj:min root mountpoint opts [tags] - fs
			 * source superopts */
			char *sep = strstr(l, " - ");
			char *f[5] = {0};
			char *save = NULL;
			int nf = 0;
			if (sep) {
				*sep = 0;
				for (char *t = strtok_r(l, " ", &save);
				     t && nf < 5;
				     t = strtok_r(NULL, " ", &save))
					f[nf++] = t;
				save = NULL;
				char *fs = strtok_r(sep + 3, " ", &save);
				char *src = strtok_r(NULL, " ", &save);
				char *sopts = strtok_r(NULL, " ", &save);
				(void)src;
				if (nf == 5 && fs && !strcmp(fs, "cgroup2") &&
				    !v2) {
					unescape(f[4]);
					wd_strlcpy(out->v2_root, f[4],
						   sizeof(out->v2_root));
					v2 = true;
				} else if (nf == 5 && fs &&
					   !strcmp(fs, "cgroup") && sopts) {
					bool any = false;
					unescape(f[4]);
					for (int c = 0; c < WD_CG_NCTRL; c++) {
						if (!opt_has(
							sopts,
							wd_cg_ctrl_name(c)))
							continue;
						any = true;
						if (!out->v1_root[c][0])
							wd_strlcpy(
							    out->v1_root[c],
							    f[4],
							    sizeof(out->v1_root
								       [c]));
					}
					/* any real controller, not only a
					 * named hierarchy (name=systemd) */
					char tmp[512];
					wd_strlcpy(tmp, sopts, sizeof(tmp));
					char *s2 = NULL;
					for (char *t = strtok_r(tmp, ",", &s2);
					     t; t = strtok_r(NULL, ",", &s2))
						if (strcmp(t, "rw") &&
						    strcmp(t, "ro") &&
						    strncmp(t, "name=", 5) &&
						    strcmp(t, "none") &&
						    strcmp(t, "noprefix") &&
						    strncmp(t, "release_agent",
							    13) &&
						    strcmp(t,
							   "clone_children") &&
						    strcmp(t, "xattr") &&
						    strcmp(t, "cpuset_v2_mode"))
							any = true;
					if (any)
						out->n_v1++;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (v2) {
		cleanup_free char *own = NULL;
		if (!controllers) {
			char p[300];
			snprintf(p, sizeof(p), "%s/cgroup.controllers",
				 out->v2_root);
			if (wd_read_file(p, &own, NULL) == 0)
				controllers = own;
		}
		if (controllers) {
			char tmp[256];
			wd_strlcpy(out->v2_controllers, controllers,
				   sizeof(out->v2_controllers));
			strip_nl(out->v2_controllers);
			wd_strlcpy(tmp, out->v2_controllers, sizeof(tmp));
			char *s2 = NULL;
			for (char *t = strtok_r(tmp, " ", &s2); t;
			     t = strtok_r(NULL, " ", &s2))
				for (int c = 0; c < WD_CG_NCTRL; c++)
					if (!strcmp(t, wd_cg_ctrl_name(c)))
						out->v2_ctrl[c] = true;
		}
	}
	out->hybrid = v2 && out->n_v1 > 0;
	if (!v2 && !out->n_v1)
		return -ENOENT;
	return 0;
}

int wd_cgroup_layout_detect(struct wd_cgroup_layout *out)
{
	cleanup_free char *mi = NULL;
	int r = wd_read_file("/proc/self/mountinfo", &mi, NULL);
	if (r < 0) {
		memset(out, 0, sizeof(*out));
		return r;
	}
	return wd_cgroup_layout_parse(mi, NULL, out);
}

/* ---- runsc ------------------------------------------------------------- */

/* Run argv with stdout+stderr into out (truncated, NUL-terminated), killing
 * its process group after timeout_ms. Returns the wait status or -errno
 * (-ETIMEDOUT). */
static int run_capture(char *const argv[], int timeout_ms, char *out,
		       size_t outlen)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
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
	int st = wait_child(pid, timeout ? 1000 : timeout_ms);
	if (timeout || st == -ETIMEDOUT) {
		kill(-pid, SIGKILL);
		return -ETIMEDOUT;
	}
	return st;
}

static bool executable(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static int find_runsc(char *out, size_t len)
{
	const char *env = getenv("WARDEN_RUNSC");
	if (env && *env)
		return executable(env) ? wd_strlcpy(out, env, len) : -ENOENT;
	const char *path = getenv("PATH");
	if (path) {
		char tmp[4096];
		wd_strlcpy(tmp, path, sizeof(tmp));
		char *s = NULL;
		for (char *d = strtok_r(tmp, ":", &s); d;
		     d = strtok_r(NULL, ":", &s)) {
			char c[PATH_MAX];
			if (*d != '/')
				continue; /* never a relative PATH entry */
			snprintf(c, sizeof(c), "%s/runsc", d);
			if (executable(c))
				return wd_strlcpy(out, c, len);
		}
	}
	static const char *const fixed[] = {"/usr/bin/runsc",
					    "/usr/sbin/runsc"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(fixed); i++)
		if (executable(fixed[i]))
			return wd_strlcpy(out, fixed[i], len);
	return -ENOENT;
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
		strip_nl(f->runsc_note);
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

static void probe_runsc(struct wd_features *f)
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

static void probe_runsc_run(struct wd_features *f)
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

/* ---- entry points ------------------------------------------------------ */

static struct wd_features g_basic, g_full;
static pthread_once_t g_basic_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_full_once = PTHREAD_ONCE_INIT;

static void do_probe(void)
{
	struct wd_features *f = &g_basic;
	memset(f, 0, sizeof(*f));
	probe_kernel(f);
	probe_lsm(f);
	probe_bpf(f);
	probe_landlock(f);
	probe_seccomp(f);
	probe_namespaces(f);
	probe_io_uring(f);
	probe_audit(f);
	f->cg_err = wd_cgroup_layout_detect(&f->cg);
	probe_runsc(f);
}

static void do_probe_full(void)
{
	g_full = *wd_probe();
	probe_runsc_run(&g_full);
}

const struct wd_features *wd_probe(void)
{
	pthread_once(&g_basic_once, do_probe);
	return &g_basic;
}

const struct wd_features *wd_probe_full(void)
{
	pthread_once(&g_full_once, do_probe_full);
	return &g_full;
}
