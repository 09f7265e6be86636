/* Tiers 1 and 2, the spawn: the call's first process (tier 1's T, tier 2's
 * G1) cloned on the daemon's own memory where it can (clone3 CLONE_VM on a
 * guarded stack of its own), else by the copying clone or fork
 * (native_child.c). The child's side of the clone (clone3_run's child, the
 * vm_entry functions) runs on the daemon's memory until it execs: system
 * calls only, and not compiled with a sanitizer (Makefile). */
#include "sandbox/native_int.h"
#include "sandbox/common.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* System calls T makes after its seccomp filter is in place. If the
 * manifest denies one, it would wait for the supervisor's answer, which
 * does not come before T has exec'd (the parent waits for that first): use
 * the copying clone then. */
static bool vm_spawn_safe(const struct wd_manifest *m)
{
	/* tier 2's G1 adds fcntl (the init's fds) */
	static const char *const after[] = {
	    "sendmsg",	  "close",	    "dup2",  "dup3",
	    "chdir",	  "execve",	    "write", "exit",
	    "exit_group", "rt_sigprocmask", "fcntl"};
	for (int i = 0; i < m->n_syscalls_deny; i++)
		for (size_t k = 0; k < WD_ARRAY_SIZE(after); k++)
			if (!strcmp(m->syscalls_deny[i], after[k]))
				return false;
	return true;
}

/* The ThreadSanitizer tree (WD_TSAN_SPAWN, set by the Makefile) spawns
 * with a fork() TSan sees: a child on our memory would run TSan's runtime
 * (its interceptors, the instrumented helpers it calls) on the daemon's
 * TSan state, and a report it began could hang the daemon's. */
#if defined(__x86_64__) && !defined(WD_TSAN_SPAWN)
#define WD_HAVE_VM_CLONE 1
/* clone3 with a new stack: the child cannot return through C (its stack
 * has no frames), so it calls fn(arg), which never returns, from here
 * (and exits 125 if it did).
 * syscall preserves every register but rax, rcx and r11, so fn and arg
 * (in registers the compiler picks among the others) reach the child; the
 * kernel starts it at stack + stack_size, 16-byte aligned. */
static long clone3_run(struct wd_clone_args *a, void (*fn)(void *), void *arg)
{
	long ret;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 /* fn and arg first: either may sit in rbp */
			 "mov %[arg], %%rdi\n\t"
			 "mov %[fn], %%rax\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "call *%%rax\n\t"
			 "mov $60, %%eax\n\t" /* SYS_exit(125) */
			 "mov $125, %%edi\n\t"
			 "syscall\n\t"
			 "ud2\n"
			 "1:\n\t"
			 : "=a"(ret)
			 : "0"((long)SYS_clone3), "D"(a),
			   "S"(sizeof(*a)), [fn] "r"(fn), [arg] "r"(arg)
			 : "rcx", "r11", "memory", "cc");
	return ret;
}
#endif

#define VM_STACK (256 << 10)

static void __attribute__((noreturn)) vm_entry(void *arg)
{
	wd_native_tier1_main(arg, false);
}

static void __attribute__((noreturn)) vm_entry_g1(void *arg)
{
	wd_native_g1_main(arg, false);
}

/* Wait until T has left the daemon's memory: exec'd (the write end of the
 * pipe whose read end T sent first closes when T switches to the new
 * image) or died (pidfd). T stopped (SIGSTOP from a process of its uid) or
 * stuck past the call's timeout is killed with the cgroup it was born in.
 * Returns only once T no longer runs on our memory. */
static void vm_wait_exec(struct launch *l, pid_t t, int pidfd)
{
	uint32_t tmo_ms =
	    l->m->timeout_ms ? l->m->timeout_ms : WD_DEFAULT_TIMEOUT_MS;
	uint64_t until = wd_now_ns() + (uint64_t)tmo_ms * 1000000ull;
	bool killed = false;
	int watch = -1;
	for (;;) {
		struct pollfd p[2] = {
		    {watch >= 0 ? watch : l->sock[0], POLLIN, 0},
		    {pidfd, POLLIN, 0}};
		uint64_t now = wd_now_ns();
		int tmo = killed	 ? -1
			  : now >= until ? 0
					 : (int)((until - now) / 1000000) + 1;
		int r = poll(p, 2, tmo);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break; /* cannot watch: kill, then wait for the exit */
		if (r == 0) {
			wd_cgroup_kill(l->cg);
			killed = true;
			continue;
		}
		if (watch >= 0 && (p[0].revents & (POLLHUP | POLLERR)))
			goto done; /* exec'd: our memory is ours */
		if (watch < 0 && p[0].revents) {
			char c;
			struct wd_scm1 m;
			struct msghdr *msg = wd_scm1_init(&m, &c, 1);
			ssize_t n = recvmsg(l->sock[0], msg,
					    MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
			struct cmsghdr *c0 = n > 0 ? CMSG_FIRSTHDR(msg) : NULL;
			if (c0 && c0->cmsg_type == SCM_RIGHTS &&
			    c0->cmsg_len == CMSG_LEN(sizeof(int)))
				memcpy(&watch, CMSG_DATA(c0), sizeof(int));
			else if (n >= 0 || errno != EAGAIN)
				break; /* not the protocol: kill */
		}
		if (p[1].revents)
			goto done; /* T is gone */
	}
	wd_cgroup_kill(l->cg);
	siginfo_t si;
	while (waitid(P_PID, t, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
done:
	if (watch >= 0)
		close(watch);
}

#ifdef WD_HAVE_VM_CLONE
/* A stack for a child on our memory, with a guard page below: an overflow
 * faults instead of writing into whatever the daemon mapped there. NULL
 * if it cannot be made. */
static char *vm_stack_new(void)
{
	char *stk = mmap(NULL, VM_STACK, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stk == MAP_FAILED)
		return NULL;
	if (mprotect(stk, 4096, PROT_NONE) < 0) {
		munmap(stk, VM_STACK);
		return NULL;
	}
	return stk;
}

/* Before a clone on our memory. The child's setresuid marks the shared mm
 * non-dumpable (commit_creds): make that this process's state from the
 * start rather than a side effect. Every signal blocked in this thread
 * until the clone returns (the clone resets the child's handlers, the
 * child its mask: vm_child_signals); the caller restores l->mask. */
static void vm_begin(struct launch *l)
{
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &l->mask);
	l->vm_child = true;
}

/* Clones l's first process on our memory into l's cgroup, with flags
 * added to the ones every such clone has: its pid, with *pidfd and *stk
 * (the caller unmaps the stack once the child has left it); 0 where the
 * copying spawn is to be used instead (no stack to be had, a kernel
 * without these clone3 flags); -1 with errno on any other failure. */
static pid_t vm_clone(struct launch *l, uint64_t flags, void (*entry)(void *),
		      int *pidfd, char **stk)
{
	char *s = vm_stack_new();
	if (!s)
		return 0;
	vm_begin(l);
	*pidfd = -1;
	flags |=
	    CLONE_INTO_CGROUP | CLONE_VM | CLONE_PIDFD | CLONE_CLEAR_SIGHAND;
	struct wd_clone_args a = {.flags = flags,
				  .pidfd = (uint64_t)(uintptr_t)pidfd,
				  .exit_signal = SIGCHLD,
				  .stack = (uint64_t)(uintptr_t)s,
				  .stack_size = VM_STACK,
				  .cgroup = (uint64_t)l->cg->v2_fd};
	long p = clone3_run(&a, entry, l);
	pthread_sigmask(SIG_SETMASK, &l->mask, NULL);
	if (p > 0) {
		*stk = s;
		return (pid_t)p;
	}
	l->vm_child = false;
	munmap(s, VM_STACK);
	int e = (int)-p;
	if (e == ENOSYS || e == E2BIG || e == EINVAL)
		return 0;
	errno = e;
	return -1;
}
#endif

/* <linux/pidfd.h> (6.11); Debian 12's headers lack it */
#define WD_PIDFD_GET_MNT_NAMESPACE _IO(0xFF, 3)

/* G1's mount namespace, for the caller to hold (see struct launch): by
 * its pidfd, else through /proc; -1 if neither works (G1 then tears it
 * down as it exits, as before). */
static int hold_mntns(int pidfd, pid_t g1)
{
	int fd = ioctl(pidfd, WD_PIDFD_GET_MNT_NAMESPACE, 0);
	if (fd >= 0) {
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		return fd;
	}
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)g1);
	return open(p, O_RDONLY | O_CLOEXEC);
}

pid_t wd_native_spawn_tier1(struct launch *l)
{
	bool self_v2;
#ifdef WD_HAVE_VM_CLONE
	if (vm_spawn_safe(l->m)) {
		int pidfd;
		char *stk;
		/* Its own IPC namespace, dying with its last process: SysV
		 * objects and POSIX message queues a tool leaves cannot reach
		 * the next call, and the host's (a root process's 0644
		 * segment) are out of sight. The other namespaces stay the
		 * host's (DESIGN §2); the cost is in tests/bench. */
		pid_t p = vm_clone(l, CLONE_NEWIPC, vm_entry, &pidfd, &stk);
		if (p > 0) {
			/* l is read by T until it execs: no write to it (or
			 * to anything T reads) until then */
			vm_wait_exec(l, p, pidfd);
			/* the scratch's namespace: its teardown (an RCU
			 * wait) on the reaper, not in the tool's exit */
			l->mntns = hold_mntns(pidfd, p);
			close(pidfd);
			munmap(stk, VM_STACK);
			/* T is on its own memory now: the daemon's
			 * protection is not the tool's (a process the tool
			 * forked before this keeps it) */
			wd_native_oom_adj_reset(p);
			return p;
		}
		if (p < 0)
			return -1;
	}
#endif
	pid_t t = wd_native_clone_into_leaf(l, &self_v2);
	if (t == 0)
		wd_native_tier1_main(l, self_v2);
	return t;
}

pid_t wd_native_spawn_tier2(struct launch *l)
{
#ifdef WD_HAVE_VM_CLONE
	/* G1 polls this (die_with_parent): the daemon is its parent */
	int self = vm_spawn_safe(l->m)
		       ? (int)syscall(SYS_pidfd_open, getpid(), 0)
		       : -1;
	if (self >= 0) {
		int pidfd;
		char *stk;
		l->cpidfd = self;
		/* the network namespace G1 joins (l->netfd) */
		pid_t p = vm_clone(
		    l, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS,
		    vm_entry_g1, &pidfd, &stk);
		/* our fd table's copy: G1 has its own */
		close(self);
		if (p > 0) {
			int ns = hold_mntns(pidfd, p);
			/* l is read by G1 until it has exec'd the init (its
			 * cpidfd too): no write to it before; then stk is no
			 * one's */
			vm_wait_exec(l, p, pidfd);
			l->cpidfd = -1;
			close(pidfd);
			munmap(stk, VM_STACK);
			l->mntns = ns;
			return p;
		}
		l->cpidfd = -1;
		if (p < 0)
			return -1;
	}
#endif
	pid_t c = fork();
	if (c == 0)
		wd_native_tier2_main(l);
	return c;
}
