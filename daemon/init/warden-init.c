/* warden-init: pid 1 of a tier-2 call's pid namespace, on its own memory.
 *
 * G1 (daemon/sandbox/native_child.c) sets the call up on the daemon's
 * memory (mounts, identity, Landlock, seccomp), then execs this: from here
 * on nothing of the call shares an address space with the supervisor, so
 * the memory cgroup's OOM killer, which kills every process sharing its
 * victim's memory, can only ever kill the call. It starts the tool, reaps
 * every orphan, and leaves when the tool does (its exit ends the pid
 * namespace and whatever the tool left in it); its exit status is the
 * tool's, 128+N for a signal.
 *
 * argv: warden-init ERRFD OOMFD PATH ARGV0 [ARG...]; envp is the tool's.
 *   ERRFD  the setup-error pipe: an exec failure is reported on it (status
 *          125); it closes at the tool's exec
 *   OOMFD  /proc/self/oom_score_adj, opened by G1 while root: the
 *          supervisor's protection is not the tool's, reset to 0
 *   PATH   the tool's binary; ARGV0... its argv
 * stdin/stdout/stderr are already the tool's.
 *
 * Every call execs this once, so it is small: on x86_64 and aarch64 it is
 * built without libc (-nostdlib, raw system calls; a static glibc binary
 * costs ~0.35 ms more per exec here), elsewhere against static glibc
 * (WD_INIT_LIBC). Found next to the binaries or in $(PREFIX)/libexec/warden
 * (daemon/sandbox/native_init.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#if !defined(WD_INIT_LIBC) && (defined(__x86_64__) || defined(__aarch64__))
static long sys(long n, long a, long b, long c, long d)
{
	long ret;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
#else
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3)
			 : "memory", "cc");
	ret = x0;
#endif
	return ret;
}
#else
#include <unistd.h>
static long sys(long n, long a, long b, long c, long d)
{
	long r = syscall(n, a, b, c, d);
	return r < 0 ? -errno : r;
}
#endif

static unsigned long len(const char *s)
{
	unsigned long n = 0;
	while (s && s[n])
		n++;
	return n;
}

static void say(int fd, const char *s)
{
	sys(SYS_write, fd, (long)s, (long)len(s), 0);
}

static int num(const char *s)
{
	int v = 0, neg = *s == '-';
	for (s += neg; *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (*s - '0');
	return neg ? -v : v;
}

static const char *errname(long e)
{
	switch (e) {
	case ENOENT:
		return "No such file or directory";
	case EACCES:
		return "Permission denied";
	case EPERM:
		return "Operation not permitted";
	case ENOEXEC:
		return "Exec format error";
	case ENOMEM:
		return "Cannot allocate memory";
	case E2BIG:
		return "Argument list too long";
	case ETXTBSY:
		return "Text file busy";
	case ELOOP:
		return "Too many levels of symbolic links";
	case EAGAIN:
		return "Resource temporarily unavailable";
	default:
		return "error";
	}
}

static int init_main(int argc, char **argv, char **envp)
{
	if (argc < 5)
		return 125;
	int errfd = num(argv[1]), oomfd = num(argv[2]);
	/* the tool runs as our uid: it may not read or write our memory */
	sys(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0);
	if (oomfd > 2) {
		sys(SYS_write, oomfd, (long)"0", 1, 0);
		sys(SYS_close, oomfd, 0, 0, 0);
	}
	if (errfd > 2)
		sys(SYS_fcntl, errfd, F_SETFD, FD_CLOEXEC, 0);
	/* a copying fork: our memory is a few pages */
	long t = sys(SYS_clone, SIGCHLD, 0, 0, 0);
	if (t < 0) {
		say(errfd, "fork: ");
		say(errfd, errname(-t));
		return 125;
	}
	if (t == 0) {
		long e = sys(SYS_execve, (long)argv[3], (long)(argv + 4),
			     (long)envp, 0);
		say(errfd, "exec '");
		say(errfd, argv[4]);
		say(errfd, "': ");
		say(errfd, errname(-e));
		sys(SYS_exit_group, 125, 0, 0, 0);
	}
	/* the tool holds the call's stdio and error pipe now; we do not,
	 * so their readers see the end when the tool's side is done */
	for (int fd = 0; fd < 3; fd++)
		sys(SYS_close, fd, 0, 0, 0);
	if (errfd > 2)
		sys(SYS_close, errfd, 0, 0, 0);
	for (;;) {
		int st = 0;
		long p = sys(SYS_wait4, -1, (long)&st, 0, 0);
		if (p == t)
			return WIFEXITED(st)	 ? WEXITSTATUS(st)
			       : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
						 : 128;
		if (p == -ECHILD)
			return 125;
	}
}

#if !defined(WD_INIT_LIBC) && (defined(__x86_64__) || defined(__aarch64__))
/* the kernel's initial stack: argc, argv[], NULL, envp[], NULL */
__attribute__((used)) static void start_c(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	sys(SYS_exit_group, init_main(argc, argv, argv + argc + 1), 0, 0, 0);
}

#if defined(__x86_64__)
__asm__(".text\n.global _start\n_start:\n\t"
	"xor %ebp, %ebp\n\tmov %rsp, %rdi\n\tand $-16, %rsp\n\t"
	"call start_c\n\thlt\n");
#else
__asm__(".text\n.global _start\n_start:\n\t"
	"mov x29, #0\n\tmov x30, #0\n\tmov x0, sp\n\t"
	"bl start_c\n\tbrk #0\n");
#endif
#else
int main(int argc, char **argv, char **envp)
{
	return init_main(argc, argv, envp);
}
#endif
