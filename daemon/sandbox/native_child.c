/* Tiers 1 and 2, the child side: what T (and, in tier 2, C) do
 * between clone and exec, as a flat list of steps in privilege order. See
 * native.c for the process tree. Code here runs in a child of a possibly
 * threaded daemon: no allocation, no locks, errors via child_fail(). */
#include "sandbox/native_int.h"
#include "common/log.h"
#include "sandbox/common.h"
#include "sandbox/mounts.h"
#include "lsm_policy.h"

#include <fcntl.h>
#include <poll.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* linux/close_range.h (5.11); Debian 12's headers lack the flag. */
#define WD_CLOSE_RANGE_CLOEXEC (1U << 2)

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
	if (wd_manifest_names(m))
		wd_landlock_no_symlinks(ll);
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
	/* tier 1's scratch: granted by T on the tmpfs it mounts there (a
	 * rule on the directory below would not cover the mount on it) */
	if (l->tier == 2) /* G1 execs it, already restricted */
		GRANT(l->init_path, WD_LL_EXEC);
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

/* Die with the supervisor. The kernel clears PR_SET_PDEATHSIG on a change
 * of euid, egid, fsuid or fsgid or a capability gain (commit_creds), so an
 * earlier prctl does not survive drop_identity's setresuid: arm it after
 * the last such change (Landlock's restrict_self and the capability drop
 * leave it in place). A parent that died before the prctl sends nothing,
 * so check that it still lives: tier 1's T by getppid(), tier 2's G1 by
 * C's pidfd (its parent is outside its pid namespace: getppid() is 0).
 * Without this a supervisor killed with -9 left the tool running. */
static void die_with_parent(struct launch *l)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(l, errno, "supervision: parent-death signal");
	if (l->tier == 1) {
		if (getppid() != l->ppid)
			_exit(125);
		return;
	}
	struct pollfd p = {l->cpidfd, POLLIN, 0};
	if (poll(&p, 1, 0) != 0)
		_exit(125); /* C has exited, or cannot be watched */
	close(l->cpidfd);
}

/* Steps shared by both tiers once namespaces and mounts are in place. The
 * caller is the process that will (after a possible fork) exec the tool. */
static void restrict_self(struct launch *l)
{
	set_rlimits(l);
	drop_identity(l);
	die_with_parent(l);
	/* Nothing of the caller's fd table may reach the tool (an fd the
	 * caller opened on a root-only file was read through it): every fd
	 * above stdio closes at exec. CLOEXEC rather than closed now: the
	 * error pipe, the listener hand-off socket and tier 1's exec watch
	 * pipe are used until the exec itself; the listener made below is
	 * CLOEXEC from birth. */
	if (syscall(SYS_close_range, 3U, ~0U, WD_CLOSE_RANGE_CLOEXEC) < 0)
		child_fail(l, errno, "fds: close_range");
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
	/* tier 1's own IPC namespace (see wd_native_spawn_tier1); tier 2's
	 * C has unshared its namespaces already */
	struct wd_clone_args a = {.flags = CLONE_INTO_CGROUP |
					   (l->tier == 1 ? CLONE_NEWIPC : 0),
				  .exit_signal = SIGCHLD,
				  .cgroup = (uint64_t)l->cg->v2_fd};
	*self_v2 = false;
#ifdef WD_TSAN_SPAWN
	(void)a;
	*self_v2 = true;
	return fork();
#endif
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

/* T sharing the daemon's memory runs none of the daemon's signal handlers
 * (they would run on the daemon's data): every caught signal goes back to
 * its default action (ignored ones stay ignored across exec, as with fork),
 * then the daemon thread's mask, blocked over the clone, is restored.
 * The clone does the first (CLONE_CLEAR_SIGHAND, 5.5; CLONE_INTO_CGROUP
 * needs 5.7, so every kernel that takes the one takes the other), in the
 * kernel before T runs a single instruction: T was resetting all 62 with
 * one rt_sigaction each (22 us of its path to exec, measured), and only
 * SIGPIPE is left to it. Raw rt_sigaction: the kernel's struct, our own
 * table (no CLONE_SIGHAND). */
/* A forked T (not sharing the daemon's memory) keeps the daemon's
 * dispositions but SIGPIPE's (see vm_child_signals). */
static void pipe_default(struct launch *l)
{
	struct {
		unsigned long handler, flags, restorer, mask;
	} dfl = {0};
	if (syscall(SYS_rt_sigaction, SIGPIPE, &dfl, NULL, 8) < 0)
		child_fail(l, errno, "signals: reset %d", SIGPIPE);
}

static void vm_child_signals(struct launch *l)
{
	/* the caught ones are default already (the clone's
	 * CLONE_CLEAR_SIGHAND). SIGPIPE is ignored by the supervisor for
	 * itself (a tool leaving its pipes must not kill it): a tool starts
	 * with the default action, as from a shell */
	pipe_default(l);
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &l->mask, NULL, 8) < 0)
		child_fail(l, errno, "signals: mask");
}

/* Reset the daemon's OOM protection (WD_SUPERVISOR_OOM_ADJ), inherited
 * at clone, for a process that does not share its memory (a write to a
 * process sharing it would change the daemon's too). Best effort: 0 or
 * -errno. pid 0: ourselves. */
int wd_native_oom_adj_reset(pid_t pid)
{
	char p[48];
	if (pid)
		snprintf(p, sizeof(p), "/proc/%d/oom_score_adj", (int)pid);
	else
		wd_strlcpy(p, "/proc/self/oom_score_adj", sizeof(p));
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = write(fd, "0", 1) == 1 ? 0 : -errno;
	close(fd);
	return r;
}

/* Tier 1's scratch: a tmpfs of the call's own, capped at its memory_mb
 * (its pages are charged to the writer's memory cgroup, the call's: a
 * fill ends at the cap or in the call's OOM, never on the host's disk),
 * mounted in a mount namespace of T's own so that the host never sees it:
 * it goes when the call's last process does (or when the daemon drops
 * its hold, sandbox/native.c), and a killed daemon leaves no mount behind.
 * The namespace is otherwise the host's: the same paths, the same files.
 * Our copy of the host's mounts becomes a slave first: a mount made here
 * must not propagate back to the host through a shared /run. */
static void scratch_tmpfs(struct launch *l)
{
	if (syscall(SYS_unshare, CLONE_NEWNS) < 0)
		child_fail(l, errno, "scratch: mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		child_fail(l, errno, "scratch: mount propagation");
	if (mount("warden-scratch", l->scratch, "tmpfs",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC, l->scratch_opts) < 0)
		child_fail(l, errno, "scratch: tmpfs");
	struct wd_err e = {0};
	if (wd_landlock_allow(l->ll, l->scratch, WD_LL_WRITE, &e) < 0)
		child_fail(l, 0, "%s", e.msg);
	if (l->lsm) {
		int fd = open(l->scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || wd_lsm_allow_fd(l->lsm, l->cgid, fd,
					      WD_LSM_READ | WD_LSM_WRITE) < 0)
			child_fail(l, errno, "bpf_lsm: grant scratch");
		close(fd);
	}
}

/* Whether path p shows /proc: "/", "/proc" or one under it. */
static bool shows_proc_path(const char *p)
{
	return !strcmp(p, "/") ||
	       (!strncmp(p, "/proc", 5) && (p[5] == 0 || p[5] == '/'));
}

/* Whether a path of pl does. */
static bool shows_proc(const struct wd_path_list *pl)
{
	for (int i = 0; i < pl->n; i++)
		if (shows_proc_path(pl->v[i]))
			return true;
	return false;
}

/* The grants of pl that show /proc, made again on the call's own procfs
 * ("/" as /proc itself; /proc/self/... now names the tool's own). */
static void regrant_proc(struct launch *l, const struct wd_path_list *pl,
			 enum wd_ll_grant g, unsigned lsm_access)
{
	for (int i = 0; i < pl->n; i++) {
		const char *p = pl->v[i];
		if (!shows_proc_path(p))
			continue;
		if (!strcmp(p, "/"))
			p = "/proc";
		struct wd_err e = {0};
		if (wd_landlock_allow(l->ll, p, g, &e) < 0)
			child_fail(l, 0, "%s", e.msg);
		if (l->lsm) {
			int fd = open(p, O_RDONLY | O_CLOEXEC);
			if (fd < 0 && errno == ENOENT)
				continue;
			if (fd < 0 || wd_lsm_allow_fd(l->lsm, l->cgid, fd,
						      lsm_access) < 0)
				child_fail(l, errno, "bpf_lsm: grant %s", p);
			close(fd);
		}
	}
}

/* Tier 1 shares the host's pid namespace: the host's /proc, where the
 * manifest grants it, lists every process of the node (other teams'
 * calls: their argv, uids, limits, /proc/PID/net); where it does not,
 * Landlock refuses reading it but not stat(): /proc/PID's existence, owner
 * and start time of every process of the node. In the call's mount
 * namespace a procfs of its own is mounted over it with hidepid=invisible
 * (hidepid=2 before 5.8): only the processes of the call's uid appear.
 * The parent's rules name the host's procfs, which the new mount covers:
 * the grants are made again on the new one. */
static void own_proc(struct launch *l)
{
	const struct wd_manifest *m = l->m;
	const unsigned long fl = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	if (mount("proc", "/proc", "proc", fl, "hidepid=invisible") < 0 &&
	    (errno != EINVAL ||
	     mount("proc", "/proc", "proc", fl, "hidepid=2") < 0))
		child_fail(l, errno, "/proc of the call's own (hidepid)");
	if (!shows_proc(&m->fs_read) && !shows_proc(&m->fs_exec) &&
	    !shows_proc(&m->fs_write))
		return;
	regrant_proc(l, &m->fs_read, WD_LL_READ, WD_LSM_READ);
	regrant_proc(l, &m->fs_exec, WD_LL_EXEC, WD_LSM_READ);
	regrant_proc(l, &m->fs_write, WD_LL_WRITE, WD_LSM_READ | WD_LSM_WRITE);
}

/* Tier 1's T, cloned by the daemon itself straight into the v2 leaf. The
 * daemon may have other threads, so from here to exec nothing allocates or
 * takes a libc lock: the ruleset and the empty capability set were made
 * by the parent; the rest is system calls. With l->vm_child T also shares
 * the daemon's memory: it writes nothing but its own stack (and errno in
 * the TLS of the daemon thread that waits for it in poll()). */
void wd_native_tier1_main(struct launch *l, bool self_v2)
{
	if (!l->vm_child)
		pipe_default(l);
	if (l->vm_child) {
		vm_child_signals(l);
		/* The parent learns that we left its memory when this pipe's
		 * write end closes at exec. Made here, it is in our fd table
		 * only: none of the daemon's other forks can hold it open. */
		int pp[2];
		if (pipe2(pp, O_CLOEXEC) < 0)
			child_fail(l, errno, "exec watch pipe");
		int r = send_fd(l->sock[1], pp[0]);
		if (r < 0)
			child_fail(l, -r, "exec watch pipe: send");
		close(pp[0]);
	}
	close_parent_ends(l);
	/* The parent may die: never outlive it unsupervised. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	int cr = wd_cgroup_enter_self(l->cg, self_v2);
	if (cr < 0)
		child_fail(l, -cr, "cgroup: cannot enter");
	/* No network: the empty namespace (the call's own or the shared
	 * one, sandbox/netns.h), while still privileged. The fd closes at
	 * exec with the rest (restrict_self). */
	if (l->netfd >= 0 && setns(l->netfd, CLONE_NEWNET) < 0)
		child_fail(l, errno, "network: join the empty namespace");
	/* a plain fork (kernels before clone3) got no IPC namespace */
	if (self_v2 && syscall(SYS_unshare, CLONE_NEWIPC) < 0)
		child_fail(l, errno, "namespaces: unshare ipc");
	/* on our own memory (a copy): the daemon's protection goes; on the
	 * daemon's, the daemon resets it once we have exec'd */
	if (!l->vm_child)
		wd_native_oom_adj_reset(0);
	scratch_tmpfs(l);
	own_proc(l);
	/* the scratch is mounted: from here the BPF LSM's mount hooks (and
	 * the rest) hold this call (native.c prepared it unarmed) */
	if (l->lsm) {
		int ar = wd_lsm_arm(l->lsm, l->cgid);
		if (ar < 0)
			child_fail(l, -ar, "bpf_lsm: arm");
	}
	restrict_self(l);
	exec_tool(l);
}

static void fmt_uint(char *buf, size_t len, unsigned v)
{
	char t[16];
	size_t n = 0;
	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < sizeof(t));
	size_t i = 0;
	for (; i < n && i + 1 < len; i++)
		buf[i] = t[n - 1 - i];
	buf[i] = 0;
}

/* G1 = T: pid 1 of the call's pid namespace, in the v2 leaf from birth;
 * joins the v1 leaves before anything else. Created by C (a fork of the
 * daemon: l->vm_child false), or by the daemon itself on the daemon's
 * memory (wd_native_spawn_tier2): then nothing here allocates or takes a
 * lock. G1 ends by exec'ing warden-init, which starts the tool and reaps:
 * while G1 shares the daemon's memory it is in the call's memory cgroup
 * only for its setup, and the OOM killer, which kills every process
 * sharing its victim's memory, never finds the daemon's memory in the
 * call's cgroup while the tool runs (exec_oom.sh). */
void wd_native_g1_main(struct launch *l, bool self_v2)
{
	if (!l->vm_child)
		pipe_default(l);
	if (l->vm_child) {
		vm_child_signals(l);
		/* as in tier 1: the daemon waits until this pipe's write
		 * ends are gone: ours closes when we exec the init */
		int pp[2];
		if (pipe2(pp, O_CLOEXEC) < 0)
			child_fail(l, errno, "exec watch pipe");
		int r = send_fd(l->sock[1], pp[0]);
		if (r < 0)
			child_fail(l, -r, "exec watch pipe: send");
		close(pp[0]);
		close_parent_ends(l);
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	int cr = wd_cgroup_enter_self(l->cg, self_v2);
	if (cr < 0)
		child_fail(l, -cr, "cgroup: cannot enter");
	/* the call's own namespace, made by the parent (sandbox/netns.h):
	 * joined by G1 rather than made by its clone, which would wait for
	 * it */
	if (l->netns && setns(l->netfd, CLONE_NEWNET) < 0)
		child_fail(l, errno, "network: join the call's namespace");
	if (l->netns)
		lo_up(l);
	struct wd_err e = {0};
	if (wd_mounts_apply(l->mplan, &e) < 0)
		child_fail(l, 0, "%s", e.msg);
	/* without the sysctl (before 6.3) the seccomp filter holds memfds */
	if (wd_memfd_noexec_sysctl() && wd_mounts_memfd_noexec(&e) < 0)
		child_fail(l, 0, "%s", e.msg);
	if (sethostname("warden", 6) < 0)
		child_fail(l, errno, "uts: sethostname");
	/* while root, in the call's own /proc, before the LSM's file_open
	 * hook and Landlock hold it: the init sets it back to 0 once it runs
	 * on its own memory (here it would change the daemon's) */
	int oomfd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oomfd < 0)
		child_fail(l, errno, "oom_score_adj");
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
		/* warden-init, exec'd below: not in filesystem.exec, so
		 * granted by inode like the mounts above */
		if (l->init_fd >= 0 &&
		    wd_lsm_allow_fd(l->lsm, l->cgid, l->init_fd,
				    WD_LSM_READ | WD_LSM_EXECUTE) < 0)
			child_fail(l, errno, "bpf_lsm: grant warden-init");
		int ar = wd_lsm_arm(l->lsm, l->cgid);
		if (ar < 0)
			child_fail(l, -ar, "bpf_lsm: arm");
	}
	grant_own_mounts(l);
	restrict_self(l);
	/* The init's fds: the error pipe and oomfd survive the exec, stdio
	 * is the tool's already, every other fd closes (restrict_self). */
	fmt_uint(l->init_oomfd, sizeof(l->init_oomfd), (unsigned)oomfd);
	if (fcntl(oomfd, F_SETFD, 0) < 0 || fcntl(l->errp[1], F_SETFD, 0) < 0)
		child_fail(l, errno, "init: fds");
	if (dup2(l->in[0], 0) < 0 || dup2(l->out[1], 1) < 0 ||
	    dup2(l->err[1], 2) < 0)
		child_fail(l, errno, "stdio");
	if (chdir("/tmp") < 0)
		child_fail(l, errno, "chdir");
	/* By our own procfs's magic link: an exec by path, judged like the
	 * tool's (Landlock allows this one file, wd_native_build_landlock);
	 * execveat of a bare fd is refused to tools on some kernels. This
	 * exec ends our use of the daemon's memory: the exec watch pipe
	 * closes with it and the daemon goes on. */
	execve(l->init_exec, l->init_argv, l->envp);
	child_fail(l, errno, "exec warden-init");
}

/* C: a fork of the daemon (where G1 cannot share its memory), in the host
 * pid namespace. */
void wd_native_tier2_main(struct launch *l)
{
	close_parent_ends(l);
	/* The parent may die: never outlive it unsupervised. C changes no
	 * credential, so the signal stays armed; a parent already gone
	 * would never send it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != l->ppid)
		_exit(125);
	/* G1 watches C through this (die_with_parent) */
	l->cpidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (l->cpidfd < 0)
		child_fail(l, errno, "supervision: pidfd_open");

	/* the network namespace G1 joins (l->netfd) */
	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
	if (unshare(flags) < 0)
		child_fail(l, errno, "namespaces: unshare");
	bool self_v2;
	pid_t t = wd_native_clone_into_leaf(l, &self_v2);
	if (t < 0)
		child_fail(l, errno, "cgroup: clone into the call's cgroup");
	if (t == 0)
		wd_native_g1_main(l, self_v2);
	/* C: outside the call's cgroup, holds nothing the tool can reach;
	 * relays T's status. */
	int st;
	/* The parent attributes Landlock records by the domain's creator, T:
	 * tell it T's pid (ours, the initial namespace's). */
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
