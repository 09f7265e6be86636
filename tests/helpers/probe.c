/* probe: a statically linked attack helper run INSIDE the sandbox under test.
 *
 *   probe ACTION [ARGS...]
 *
 * Exit status: 0 = the action succeeded (for an attack: the sandbox failed),
 * 1 = the action was refused (errno printed), 2 = usage, other = crashed or
 * killed. Tests judge by evidence outside the sandbox as well, never only by
 * what this program says.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int res(int r, const char *what)
{
	if (r < 0) {
		printf("%s: refused: %s (errno %d)\n", what, strerror(errno),
		       errno);
		return 1;
	}
	printf("%s: succeeded\n", what);
	return 0;
}

static int do_connect(int family, const char *host, int port, int type,
		      int fastopen)
{
	int s = socket(family, type, 0);
	if (s < 0)
		return res(-1, "socket");
	int r;
	if (family == AF_INET) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons(port)};
		inet_pton(AF_INET, host, &a.sin_addr);
		if (type == SOCK_DGRAM)
			r = sendto(s, "x", 1, 0, (void *)&a, sizeof(a));
		else if (fastopen)
			r = sendto(s, "x", 1, MSG_FASTOPEN, (void *)&a,
				   sizeof(a));
		else
			r = connect(s, (void *)&a, sizeof(a));
	} else {
		struct sockaddr_in6 a = {.sin6_family = AF_INET6,
					 .sin6_port = htons(port)};
		inet_pton(AF_INET6, host, &a.sin6_addr);
		if (type == SOCK_DGRAM)
			r = sendto(s, "x", 1, 0, (void *)&a, sizeof(a));
		else
			r = connect(s, (void *)&a, sizeof(a));
	}
	if (r >= 0 && type == SOCK_STREAM && !fastopen)
		(void)!write(s, "x", 1);
	return res(r, "connect");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: probe ACTION [ARGS]\n");
		return 2;
	}
	const char *a = argv[1];
	setvbuf(stdout, NULL, _IONBF, 0);

	if (!strcmp(a, "read") && argc > 2) {
		char buf[64];
		int fd = open(argv[2], O_RDONLY);
		if (fd < 0)
			return res(-1, "open");
		ssize_t n = read(fd, buf, sizeof(buf));
		return res(n < 0 ? -1 : 0, "read");
	}
	if (!strcmp(a, "write") && argc > 2) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			return res(-1, "open");
		return res(write(fd, "pwned\n", 6) == 6 ? 0 : -1, "write");
	}
	if (!strcmp(a, "ls") && argc > 2) {
		int fd = open(argv[2], O_RDONLY | O_DIRECTORY);
		return res(fd, "opendir");
	}
	if (!strcmp(a, "exec") && argc > 2) {
		execv(argv[2], argv + 2);
		return res(-1, "exec");
	}
	if (!strcmp(a, "connect4") && argc > 3)
		return do_connect(AF_INET, argv[2], atoi(argv[3]), SOCK_STREAM,
				  0);
	if (!strcmp(a, "connect6") && argc > 3)
		return do_connect(AF_INET6, argv[2], atoi(argv[3]), SOCK_STREAM,
				  0);
	if (!strcmp(a, "udp4") && argc > 3)
		return do_connect(AF_INET, argv[2], atoi(argv[3]), SOCK_DGRAM,
				  0);
	if (!strcmp(a, "udp6") && argc > 3)
		return do_connect(AF_INET6, argv[2], atoi(argv[3]), SOCK_DGRAM,
				  0);
	if (!strcmp(a, "fastopen") && argc > 3)
		return do_connect(AF_INET, argv[2], atoi(argv[3]), SOCK_STREAM,
				  1);
	if (!strcmp(a, "socket") && argc > 2) {
		int fam = !strcmp(argv[2], "netlink")  ? AF_NETLINK
			  : !strcmp(argv[2], "packet") ? AF_PACKET
			  : !strcmp(argv[2], "vsock")  ? AF_VSOCK
			  : !strcmp(argv[2], "alg")    ? AF_ALG
						       : atoi(argv[2]);
		return res(socket(fam, SOCK_RAW, 0), "socket");
	}
	if (!strcmp(a, "rawsock"))
		return res(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), "raw");
	if (!strcmp(a, "kill") && argc > 2)
		return res(kill(atoi(argv[2]), SIGKILL), "kill");
	if (!strcmp(a, "ptrace") && argc > 2)
		return res(ptrace(PTRACE_ATTACH, atoi(argv[2]), 0, 0),
			   "ptrace");
	if (!strcmp(a, "setuid0"))
		return res(setuid(0), "setuid");
	if (!strcmp(a, "unshare-user"))
		return res(unshare(CLONE_NEWUSER), "unshare");
	if (!strcmp(a, "clone-newuser")) {
		long r =
		    syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid(r, NULL, 0);
		return res(r < 0 ? -1 : 0, "clone");
	}
	if (!strcmp(a, "mount"))
		return res(mount("tmpfs", "/tmp", "tmpfs", 0, NULL), "mount");
	if (!strcmp(a, "chroot"))
		return res(chroot("/tmp"), "chroot");
	if (!strcmp(a, "bpf")) {
		union bpf_attr at;
		memset(&at, 0, sizeof(at));
		at.map_type = BPF_MAP_TYPE_ARRAY;
		at.key_size = 4;
		at.value_size = 4;
		at.max_entries = 1;
		return res(syscall(SYS_bpf, BPF_MAP_CREATE, &at, sizeof(at)),
			   "bpf");
	}
	if (!strcmp(a, "perf")) {
		struct perf_event_attr pa;
		memset(&pa, 0, sizeof(pa));
		pa.size = sizeof(pa);
		pa.type = PERF_TYPE_SOFTWARE;
		pa.config = PERF_COUNT_SW_CPU_CLOCK;
		return res(syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0),
			   "perf");
	}
	if (!strcmp(a, "io_uring"))
		return res(syscall(SYS_io_uring_setup, 4, calloc(1, 128)),
			   "io_uring_setup");
	if (!strcmp(a, "keyctl"))
		return res(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0),
			   "keyctl");
	if (!strcmp(a, "userfaultfd"))
		return res(syscall(SYS_userfaultfd, 0), "userfaultfd");
	if (!strcmp(a, "int80")) {
		/* i386 getpid (20) through the 32-bit entry point: the filter
		 * must kill us rather than judge it as a 64-bit syscall. */
		long r;
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory");
		printf("int80: returned %ld\n", r);
		return 0;
	}
	if (!strcmp(a, "x32")) {
		/* x32 getpid: __X32_SYSCALL_BIT | 39 */
		long r = syscall(0x40000000 | 39);
		printf("x32: returned %ld\n", r);
		return r < 0 ? 1 : 0;
	}
	if (!strcmp(a, "cgroup-escape") && argc > 2) {
		/* move ourselves to another cgroup */
		char p[512];
		snprintf(p, sizeof(p), "%s/cgroup.procs", argv[2]);
		int fd = open(p, O_WRONLY);
		if (fd < 0)
			return res(-1, "open cgroup.procs");
		return res(write(fd, "0", 1) < 0 ? -1 : 0, "cgroup move");
	}
	if (!strcmp(a, "forkbomb")) {
		int n = 0;
		for (int i = 0; i < 100000; i++) {
			pid_t p = fork();
			if (p == 0) {
				pause();
				_exit(0);
			}
			if (p < 0)
				break;
			n++;
		}
		printf("forked %d\n", n);
		return 0;
	}
	if (!strcmp(a, "memhog") && argc > 2) {
		size_t mb = atol(argv[2]);
		for (size_t i = 0; i < mb; i++) {
			char *p = malloc(1 << 20);
			if (!p) {
				printf("malloc failed at %zu MB\n", i);
				return 1;
			}
			memset(p, 1, 1 << 20);
		}
		printf("allocated %zu MB\n", mb);
		return 0;
	}
	if (!strcmp(a, "outflood") && argc > 2) {
		size_t n = atol(argv[2]);
		static char buf[65536];
		memset(buf, 'A', sizeof(buf));
		while (n) {
			size_t k = n < sizeof(buf) ? n : sizeof(buf);
			ssize_t w = write(1, buf, k);
			if (w <= 0)
				return 1;
			n -= w;
		}
		return 0;
	}
	if (!strcmp(a, "daemonize") && argc > 3) {
		/* Leave a grandchild behind that writes a marker after a delay:
		 * the sandbox must kill it at the end of the call. */
		pid_t p = fork();
		if (p == 0) {
			setsid();
			if (fork() == 0) {
				close(0);
				close(1);
				close(2);
				sleep(atoi(argv[3]));
				int fd =
				    open(argv[2], O_WRONLY | O_CREAT, 0644);
				if (fd >= 0)
					(void)!write(fd, "alive\n", 6);
				_exit(0);
			}
			_exit(0);
		}
		waitpid(p, NULL, 0);
		printf("daemonized\n");
		return 0;
	}
	if (!strcmp(a, "sleep") && argc > 2) {
		sleep(atoi(argv[2]));
		return 0;
	}
	if (!strcmp(a, "env")) {
		extern char **environ;
		for (char **e = environ; *e; e++)
			printf("%s\n", *e);
		return 0;
	}
	if (!strcmp(a, "caps")) {
		char buf[4096];
		int fd = open("/proc/self/status", O_RDONLY);
		if (fd < 0) {
			/* no /proc: read capabilities with capget */
			struct {
				uint32_t v, pid;
			} h = {0x20080522, 0};
			uint32_t d[6] = {0};
			if (syscall(SYS_capget, &h, d) < 0)
				return res(-1, "capget");
			printf("CapEff: %08x%08x\nCapPrm: %08x%08x\n", d[3],
			       d[0], d[4], d[1]);
			return 0;
		}
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = 0;
		for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
			if (!strncmp(l, "Cap", 3) ||
			    !strncmp(l, "NoNewPrivs", 10) ||
			    !strncmp(l, "Seccomp", 7) || !strncmp(l, "Uid", 3))
				printf("%s\n", l);
		return 0;
	}
	if (!strcmp(a, "symlink-escape") && argc > 3) {
		/* plant a symlink to a host path in a writable dir and read
		 * through it */
		char p[512];
		snprintf(p, sizeof(p), "%s/link", argv[2]);
		unlink(p);
		if (symlink(argv[3], p) < 0)
			return res(-1, "symlink");
		int fd = open(p, O_RDONLY);
		return res(fd, "read via symlink");
	}
	if (!strcmp(a, "hardlink") && argc > 3) {
		char p[512];
		snprintf(p, sizeof(p), "%s/hl", argv[2]);
		return res(link(argv[3], p), "hardlink");
	}
	if (!strcmp(a, "getpriority")) {
		errno = 0;
		long r = syscall(SYS_getpriority, 0 /* PRIO_PROCESS */, 0);
		return res(r < 0 && errno ? -1 : 0, "getpriority");
	}
	if (!strcmp(a, "mprotect-exec")) {
		/* W^X is not our line; recorded for completeness */
		void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return res(mprotect(p, 4096, PROT_READ | PROT_EXEC),
			   "mprotect");
	}
	fprintf(stderr, "probe: unknown action '%s'\n", a);
	return 2;
}
