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
 *          125), and it closes at the tool's exec
 *   OOMFD  /proc/self/oom_score_adj, opened by G1 while root: the
 *          daemon's protection (-900) is not the tool's, reset to 0
 *   PATH   the tool's binary; ARGV0... its argv
 * stdin/stdout/stderr are already the tool's. Built static by the Makefile
 * (found next to the binaries, or in $(PREFIX)/libexec/warden). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(int fd, const char *a, const char *b, const char *c)
{
	const char *v[] = {a, b, c};
	for (int i = 0; i < 3; i++)
		if (v[i])
			(void)!write(fd, v[i], strlen(v[i]));
}

int main(int argc, char **argv, char **envp)
{
	if (argc < 5)
		return 125;
	int errfd = atoi(argv[1]), oomfd = atoi(argv[2]);
	/* the tool runs as our uid: it may not read or write our memory */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (oomfd > 2) {
		(void)!write(oomfd, "0", 1);
		close(oomfd);
	}
	if (errfd > 2)
		fcntl(errfd, F_SETFD, FD_CLOEXEC);
	/* vfork: no copy of our (small) memory; a manifest denying it gets
	 * the copying fork */
	pid_t t = vfork();
	if (t < 0)
		t = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (t < 0) {
		say(errfd, "fork: ", strerrordesc_np(errno), NULL);
		return 125;
	}
	if (t == 0) {
		execve(argv[3], argv + 4, envp);
		say(errfd, "exec '", argv[4], "': ");
		say(errfd,
		    strerrordesc_np(errno) ? strerrordesc_np(errno) : "?", NULL,
		    NULL);
		_exit(125);
	}
	/* the tool holds the call's stdio and error pipe now; we do not,
	 * so its readers see the end when the tool's side is done */
	close(0);
	close(1);
	close(2);
	if (errfd > 2)
		close(errfd);
	for (;;) {
		int st;
		pid_t p = wait(&st);
		if (p == t)
			return WIFEXITED(st)	 ? WEXITSTATUS(st)
			       : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
						 : 128;
		if (p < 0 && errno == ECHILD)
			return 125;
	}
}
