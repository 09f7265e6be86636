/* Probes of the process-level mechanisms: seccomp (filter, actions,
 * user-notify), namespaces, io_uring and audit. Those that change process
 * state run in a forked child (see probe.c). */
#include "enforce/probe.h"
#include "enforce/probe_int.h"
#include "common/log.h"
#include "common/util.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef AUDIT_ARCH_X86_64
#define AUDIT_ARCH_X86_64 0xc000003e
#endif
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

void wd_probe_seccomp(struct wd_features *f)
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
	pid_t pid = wd_probe_fork_pipe(p);
	if (pid < 0) {
		f->seccomp_notify_err = pid;
		return;
	}
	if (pid == 0) {
		close(p[0]);
		notify_child(p[1], &sz);
	}
	close(p[1]);
	struct notify_result res;
	ssize_t n = wd_probe_read_full(p[0], &res, sizeof(res));
	close(p[0]);
	int st = wd_probe_wait_child(pid, 6000);
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
	pid_t pid = wd_probe_fork_pipe(p);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		int e = unshare(flags) < 0 ? errno : 0;
		_exit(write(p[1], &e, sizeof(e)) == sizeof(e) ? 0 : 1);
	}
	close(p[1]);
	int e = 0;
	ssize_t n = wd_probe_read_full(p[0], &e, sizeof(e));
	close(p[0]);
	wd_probe_wait_child(pid, 2000);
	if (n != sizeof(e))
		return -EIO;
	return -e;
}

void wd_probe_namespaces(struct wd_features *f)
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

void wd_probe_io_uring(struct wd_features *f)
{
	char s[64];
	f->io_uring_disabled = -1;
	ssize_t n =
	    wd_read_small("/proc/sys/kernel/io_uring_disabled", s, sizeof(s));
	f->io_uring_err = n < 0 ? (int)n : 0;
	if (!f->io_uring_err && s[0] >= '0' && s[0] <= '9')
		f->io_uring_disabled = atoi(s);
	else if (!f->io_uring_err)
		f->io_uring_err = -EINVAL;
}

/* Ping sockets need no privilege for a gid in this range: the seccomp
 * filter refuses them unless network.families lists icmp
 * (policy/families.h), whatever the node says; status reports it. */
void wd_probe_ping(struct wd_features *f)
{
	char s[64];
	f->ping_gid_lo = f->ping_gid_hi = -1;
	ssize_t n =
	    wd_read_small("/proc/sys/net/ipv4/ping_group_range", s, sizeof(s));
	f->ping_err = n < 0 ? (int)n : 0;
	if (!f->ping_err &&
	    sscanf(s, "%ld %ld", &f->ping_gid_lo, &f->ping_gid_hi) != 2) {
		f->ping_gid_lo = f->ping_gid_hi = -1;
		f->ping_err = -EINVAL;
	}
}

static uint64_t audit_at;

uint64_t wd_probe_audit_at_ns(void)
{
	return __atomic_load_n(&audit_at, __ATOMIC_RELAXED);
}

void wd_probe_audit_note_at(uint64_t at_ns)
{
	__atomic_store_n(&audit_at, at_ns, __ATOMIC_RELAXED);
}

void wd_probe_audit(struct wd_features *f)
{
	f->audit_enabled = -1;
	__atomic_store_n(&audit_at, wd_now_ns(), __ATOMIC_RELAXED);
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
