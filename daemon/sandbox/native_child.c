/* Tiers 1 and 2, the child side: what T (and, in tier 2, C and G2) do
 * between clone and exec, as a flat list of steps in privilege order. See
 * native.c for the process tree. Code here runs in a child of a possibly
 * threaded daemon: no allocation, no locks, errors via child_fail(). */
#include "sandbox/native_int.h"
#include "common/log.h"
#include "sandbox/common.h"
#include "sandbox/mounts.h"
#include "lsm_policy.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* ---- child side (between fork and exec) ---------------------------------- */

static void __attribute__((noreturn, format(printf, 3, 4)))
child_fail(struct launch *l, int e, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (e && n > 0 && (size_t)n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, ": %s",
			 strerrordesc_np(e) ? strerrordesc_np(e) : "?");
	(void)!write(l->errp[1], buf, strlen(buf));
	_exit(125);
}

static int send_fd(int sock, int fd)
{
	char c = 'F';
	struct wd_scm1 s;
	struct msghdr *msg = wd_scm1_init(&s, &c, 1);
	struct cmsghdr *c0 = CMSG_FIRSTHDR(msg);
	c0->cmsg_level = SOL_SOCKET;
	c0->cmsg_type = SCM_RIGHTS;
	c0->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c0), &fd, sizeof(int));
	return sendmsg(sock, msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static void lo_up(struct launch *l)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = {0};
	if (s < 0)
		child_fail(l, errno, "network: loopback socket");
	wd_strlcpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		child_fail(l, errno, "network: lo flags");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		child_fail(l, errno, "network: lo up");
	close(s);
}

static void set_rlimits(struct launch *l)
{
	const struct {
		int res;
		rlim_t v;
	} lims[] = {
	    {RLIMIT_CORE, 0},
	    {RLIMIT_NOFILE, 1024},
	    /* a single file cannot exceed the memory the call has */
	    {RLIMIT_FSIZE,
	     (rlim_t)(l->m->memory_mb ? l->m->memory_mb : WD_DEFAULT_MEMORY_MB)
		 << 20},
	    {RLIMIT_MEMLOCK, 64 << 10},
	    {RLIMIT_MSGQUEUE, 0},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(lims); i++) {
		struct rlimit r = {lims[i].v, lims[i].v};
		if (setrlimit(lims[i].res, &r) < 0)
			child_fail(l, errno, "rlimit %d", lims[i].res);
	}
}

/* Raw system calls, not glibc's wrappers: setgroups/setresuid/setresgid
 * in glibc apply to every thread of the process (__nptl_setxid), walking
 * the thread list copied from the daemon. In tier 1's T, a raw clone3 of
 * a threaded daemon, that list names threads that do not exist here; one
 * caught mid-creation makes the walk wait forever (seen: tool calls of
 * concurrent runs hanging until their timeout). The kernel calls change
 * the calling thread, which is all of T. */
static void drop_identity(struct launch *l)
{
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		child_fail(l, errno, "identity: setgroups");
	if (syscall(SYS_setresgid, l->gid, l->gid, l->gid) < 0)
		child_fail(l, errno, "identity: setresgid %u", l->gid);
	/* Empty the bounding set while we still have CAP_SETPCAP: no exec of
	 * a file-capability binary can bring a capability back. */
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			child_fail(l, errno, "identity: drop bounding cap %d",
				   c);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		child_fail(l, errno, "identity: clear ambient caps");
	if (syscall(SYS_setresuid, l->uid, l->uid, l->uid) < 0)
		child_fail(l, errno, "identity: setresuid %u", l->uid);
	struct __user_cap_header_struct h = {.version =
						 _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};
	if (syscall(SYS_capset, &h, d) < 0)
		child_fail(l, errno, "identity: clear capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(l, errno, "identity: no_new_privs");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		child_fail(l, errno, "identity: dumpable");
}

/* Built by the parent, before the fork: the child only restricts itself
 * with it (rules hold inodes, so tier 2's bind mounts of the same paths
 * are covered). Tier 2's own /tmp, /dev/shm and /proc are added by G1 once
 * it has mounted them (grant_own_mounts). */
int wd_native_build_landlock(struct launch *l, struct wd_err *err)
{
	struct wd_landlock *ll = NULL;
	const struct wd_manifest *m = l->m;
	int r;
	if ((r = wd_landlock_new(&ll, err)) < 0)
		return r;
	l->ll = ll;
#define GRANT(path, g)                                                         \
	do {                                                                   \
		if ((r = wd_landlock_allow(ll, path, g, err)) < 0)             \
			return r;                                              \
	} while (0)
	for (int i = 0; i < m->fs_read.n; i++)
		GRANT(m->fs_read.v[i], WD_LL_READ);
	for (int i = 0; i < m->fs_exec.n; i++)
		GRANT(m->fs_exec.v[i], WD_LL_EXEC);
	for (int i = 0; i < m->fs_write.n; i++)
		GRANT(m->fs_write.v[i], WD_LL_WRITE);
	/* The ELF interpreter is opened for execution by the kernel too. */
	for (int i = 0; i < wd_loader_paths_n; i++)
		GRANT(wd_loader_paths[i], WD_LL_EXEC);
	if (l->tier == 1)
		GRANT(l->scratch, WD_LL_WRITE);
	static const char *const devs[] = {"/dev/null", "/dev/zero",
					   "/dev/full", "/dev/random",
					   "/dev/urandom"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(devs); i++)
		GRANT(devs[i], WD_LL_DEV);
#undef GRANT
	return 0;
}

/* G1, after its mounts: the call's fresh /tmp and /dev/shm, and our own
 * pid namespace's procfs (only the call's processes). */
static void grant_own_mounts(struct launch *l)
{
	static const struct {
		const char *p;
		enum wd_ll_grant g;
	} own[] = {{"/tmp", WD_LL_WRITE},
		   {"/proc", WD_LL_READ},
		   {"/dev/shm", WD_LL_WRITE}};
	struct wd_err e = {0};
	for (size_t i = 0; i < WD_ARRAY_SIZE(own); i++)
		if (wd_landlock_allow(l->ll, own[i].p, own[i].g, &e) < 0)
			child_fail(l, 0, "%s", e.msg);
}

/* Steps shared by both tiers once namespaces and mounts are in place. The
 * caller is the process that will (after a possible fork) exec the tool. */
static void restrict_self(struct launch *l)
{
	set_rlimits(l);
	drop_identity(l);
	int r = wd_landlock_restrict(l->ll);
	if (r < 0)
		child_fail(l, -r, "filesystem: cannot enforce: Landlock");
	int nfd = wd_seccomp_install(&l->sc);
	if (nfd < 0)
		child_fail(l, -nfd, "syscalls: cannot enforce: seccomp");
	if ((r = send_fd(l->sock[1], nfd)) < 0)
		child_fail(l, -r, "syscalls: pass seccomp listener");
	close(nfd);
	close(l->sock[1]);
}

static void __attribute__((noreturn)) exec_tool(struct launch *l)
{
	if (dup2(l->in[0], 0) < 0 || dup2(l->out[1], 1) < 0 ||
	    dup2(l->err[1], 2) < 0)
		child_fail(l, errno, "stdio");
	if (chdir(l->tier == 1 ? l->scratch : "/tmp") < 0)
		child_fail(l, errno, "chdir");
	execve(l->exec_path, l->argv, l->envp);
	child_fail(l, errno, "exec '%s'", l->argv[0]);
}

/* Exit the way the child did, so the status travels up unchanged. */
static void __attribute__((noreturn)) exit_like(int st)
{
	if (WIFEXITED(st))
		_exit(WEXITSTATUS(st));
	_exit(128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0));
}

/* The call's first process T starts right inside the v2 leaf (clone3
 * CLONE_INTO_CGROUP): a migration through cgroup.procs takes the global
 * cgroup_threadgroup_rwsem, whose write side waits for an RCU grace period
 * (5-10 ms a call). A raw clone3 skips glibc's fork handlers: tier 1's T
 * allocates nothing before exec (tier1_main); tier 2 calls this from C, a
 * glibc fork() of the daemon, single-threaded with consistent libc state.
 * Kernels before 5.7: fork(), and T moves itself (*self_v2). */
pid_t wd_native_clone_into_leaf(struct launch *l, bool *self_v2)
{
	struct wd_clone_args a = {.flags = CLONE_INTO_CGROUP,
				  .exit_signal = SIGCHLD,
				  .cgroup = (uint64_t)l->cg->v2_fd};
	*self_v2 = false;
	long p = syscall(SYS_clone3, &a, sizeof(a));
	if (p >= 0 || (errno != ENOSYS && errno != E2BIG && errno != EINVAL))
		return (pid_t)p;
	*self_v2 = true;
	return fork();
}

static void close_parent_ends(struct launch *l)
{
	close(l->errp[0]);
	close(l->sock[0]);
	close(l->in[1]);
	close(l->out[0]);
	close(l->err[0]);
}

/* Tier 1's T, cloned by the daemon itself straight into the v2 leaf. The
 * daemon may have other threads, so from here to exec nothing allocates or
 * takes a libc lock: the ruleset and the empty capability set were made
 * by the parent; the rest is system calls. */
void wd_native_tier1_main(struct launch *l, bool self_v2)
{
	close_parent_ends(l);
	/* The parent may die: never outlive it unsupervised. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	int cr = wd_cgroup_enter_self(l->cg, self_v2);
	if (cr < 0)
		child_fail(l, -cr, "cgroup: cannot enter");
	restrict_self(l);
	exec_tool(l);
}

void wd_native_tier2_main(struct launch *l)
{
	close_parent_ends(l);
	/* The parent may die: never outlive it unsupervised. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);

	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
	if (l->netns)
		flags |= CLONE_NEWNET;
	if (unshare(flags) < 0)
		child_fail(l, errno, "namespaces: unshare");
	bool self_v2;
	pid_t t = wd_native_clone_into_leaf(l, &self_v2);
	if (t < 0)
		child_fail(l, errno, "cgroup: clone into the call's cgroup");
	if (t > 0) {
		/* C: outside the call's cgroup, holds nothing the tool can
		 * reach; relays T's status. */
		int st;
		/* The parent attributes Landlock records by the domain's
		 * creator, T: tell it T's pid (ours, the initial namespace's).
		 */
		(void)!send(l->sock[1], &t, sizeof(t), MSG_NOSIGNAL);
		close(l->in[0]);
		close(l->out[1]);
		close(l->err[1]);
		close(l->sock[1]);
		while (waitpid(t, &st, 0) < 0)
			if (errno != EINTR)
				_exit(125);
		exit_like(st);
	}
	/* G1 = T: pid 1 of the call's pid namespace, in the v2 leaf from
	 * birth; joins the v1 leaves before anything else. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	int cr = wd_cgroup_enter_self(l->cg, self_v2);
	if (cr < 0)
		child_fail(l, -cr, "cgroup: cannot enter");
	if (l->netns)
		lo_up(l);
	struct wd_err e = {0};
	if (wd_mounts_setup(l->root, l->m, &e) < 0)
		child_fail(l, 0, "%s", e.msg);
	if (sethostname("warden", 6) < 0)
		child_fail(l, errno, "uts: sethostname");
	if (l->lsm) {
		/* The call's own /tmp, /dev and /proc were made after the
		 * parent armed the LSM; grant them by inode from here, while
		 * we are still root and before seccomp forbids bpf(). */
		static const struct {
			const char *p;
			unsigned a;
		} own[] = {{"/tmp", WD_LSM_READ | WD_LSM_WRITE},
			   {"/dev/shm", WD_LSM_READ | WD_LSM_WRITE},
			   {"/proc", WD_LSM_READ}};
		for (size_t i = 0; i < WD_ARRAY_SIZE(own); i++) {
			int fd =
			    open(own[i].p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0 ||
			    wd_lsm_allow_fd(l->lsm, l->cgid, fd, own[i].a) < 0)
				child_fail(l, errno, "bpf_lsm: grant %s",
					   own[i].p);
			close(fd);
		}
		int ar = wd_lsm_arm(l->lsm, l->cgid);
		if (ar < 0)
			child_fail(l, -ar, "bpf_lsm: arm");
	}
	grant_own_mounts(l);
	restrict_self(l);
	pid_t g2 = fork();
	if (g2 < 0)
		child_fail(l, errno, "fork");
	if (g2 == 0)
		exec_tool(l);
	close(l->in[0]);
	close(l->out[1]);
	close(l->err[1]);
	close(l->errp[1]);
	/* Reap everything; leave when the tool does. Our exit tears the pid
	 * namespace down, killing whatever the tool left behind. */
	for (;;) {
		int st;
		pid_t p = wait(&st);
		if (p == g2)
			exit_like(st);
		if (p < 0 && errno == ECHILD)
			_exit(125);
	}
}
