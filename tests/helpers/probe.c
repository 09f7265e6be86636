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

static int do_connect_p(int family, const char *host, int port, int type,
			int proto, int fastopen)
{
	int s = socket(family, type, proto);
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

static int do_connect(int family, const char *host, int port, int type,
		      int fastopen)
{
	return do_connect_p(family, host, port, type, 0, fastopen);
}

/* The baseline's syscalls (daemon/enforce/seccomp.c, wd_seccomp_baseline)
 * by number, each with arguments that do nothing even if the filter let the
 * call through: NULL pointers, fd -1, invalid commands or flags, or a pure
 * query. So a miss shows as a return value or an errno other than EPERM,
 * never as harm. The test takes the names from the baseline itself and
 * fails on one this table lacks. */
#define NA -1L /* not a syscall on this arch */
static const struct deny_probe {
	const char *name;
	long nr;
	long a[6];
} deny_probes[] = {
    {"mount", SYS_mount, {0, 0, 0, 0, 0}},
    {"umount2", SYS_umount2, {0, 0}},
    {"pivot_root", SYS_pivot_root, {0, 0}},
    {"chroot", SYS_chroot, {0}},
    {"move_mount", SYS_move_mount, {-1, 0, -1, 0, 0}},
    {"open_tree", SYS_open_tree, {-1, 0, 0}},
    {"fsopen", SYS_fsopen, {0, 0}},
    {"fsconfig", SYS_fsconfig, {-1, 0, 0, 0, 0}},
    {"fsmount", SYS_fsmount, {-1, 0, 0}},
    {"fspick", SYS_fspick, {-1, 0, 0}},
    {"mount_setattr", SYS_mount_setattr, {-1, 0, 0, 0, 0}},
    /* CLONE_NEWUSER: the one a tool could do unprivileged */
    {"unshare", SYS_unshare, {CLONE_NEWUSER}},
    {"setns", SYS_setns, {-1, 0}},
    {"ptrace", SYS_ptrace, {-1L /* no such request */, 0, 0, 0}},
    {"process_vm_readv", SYS_process_vm_readv, {0, 0, 0, 0, 0, 0}},
    {"process_vm_writev", SYS_process_vm_writev, {0, 0, 0, 0, 0, 0}},
    {"process_madvise", SYS_process_madvise, {-1, 0, 0, 0, 0}},
    {"pidfd_getfd", SYS_pidfd_getfd, {-1, -1, 0}},
    {"kcmp", SYS_kcmp, {0, 0, -1L /* no such type */, 0, 0}},
    {"bpf", SYS_bpf, {-1L /* no such cmd */, 0, 0}},
    {"perf_event_open", SYS_perf_event_open, {0, 0, -1, -1, 0}},
    {"userfaultfd", SYS_userfaultfd, {~0L}},
    {"keyctl", SYS_keyctl, {-1L /* no such op */, 0, 0, 0, 0}},
    {"add_key", SYS_add_key, {0, 0, 0, 0, 0}},
    {"request_key", SYS_request_key, {0, 0, 0, 0}},
    {"io_uring_setup", SYS_io_uring_setup, {0, 0}},
    {"io_uring_enter", SYS_io_uring_enter, {-1, 0, 0, 0, 0, 0}},
    {"io_uring_register", SYS_io_uring_register, {-1, 0, 0, 0}},
    {"kexec_load", SYS_kexec_load, {0, 0, 0, ~0L}},
    {"kexec_file_load", SYS_kexec_file_load, {-1, -1, 0, 0, ~0L}},
    {"init_module", SYS_init_module, {0, 0, 0}},
    {"finit_module", SYS_finit_module, {-1, 0, ~0L}},
    {"delete_module", SYS_delete_module, {0, 0}},
    {"swapon", SYS_swapon, {0, 0}},
    {"swapoff", SYS_swapoff, {0}},
    {"reboot", SYS_reboot, {0, 0, 0, 0}}, /* bad magic */
    {"acct", SYS_acct, {(long)""}},	  /* ENOENT; NULL would stop acct */
    {"quotactl", SYS_quotactl, {0, 0, 0, 0}},
    {"quotactl_fd", SYS_quotactl_fd, {-1, 0, 0, 0}},
    {"syslog", SYS_syslog, {-1L /* no such action */, 0, 0}},
    {"name_to_handle_at", SYS_name_to_handle_at, {-1, 0, 0, 0, 0}},
    {"open_by_handle_at", SYS_open_by_handle_at, {-1, 0, 0}},
    {"lookup_dcookie", SYS_lookup_dcookie, {0, 0, 0}},
    {"iopl", SYS_iopl, {0}},	       /* level 0: what we have */
    {"ioperm", SYS_ioperm, {0, 0, 0}}, /* turn nothing off */
    {"settimeofday", SYS_settimeofday, {0, 0}},
    {"clock_settime", SYS_clock_settime, {-1, 0}},
    {"clock_adjtime", SYS_clock_adjtime, {-1, 0}},
    {"adjtimex", SYS_adjtimex, {0}},
    {"vhangup", SYS_vhangup, {0}},
    {"uselib", SYS_uselib, {0}},
    {"_sysctl", SYS__sysctl, {0}},
    {"ustat", SYS_ustat, {0, 0}},
    {"sysfs", SYS_sysfs, {-1L /* no such option */, 0, 0}},
    {"fanotify_init", SYS_fanotify_init, {~0L, 0}},
    {"inotify_add_watch", SYS_inotify_add_watch, {-1, 0, 0}},
    {"memfd_secret", SYS_memfd_secret, {~0L}},
    {"personality", SYS_personality, {0xffffffffL}}, /* query only */
    {"modify_ldt", SYS_modify_ldt, {-1L /* no such func */, 0, 0}},
    {"nfsservctl", SYS_nfsservctl, {0, 0, 0}},
#ifdef SYS_vm86
    {"vm86", SYS_vm86, {-1L, 0}},
#else
    {"vm86", NA, {0}},
#endif
#ifdef SYS_vm86old
    {"vm86old", SYS_vm86old, {0}},
#else
    {"vm86old", NA, {0}},
#endif
    {"sethostname", SYS_sethostname, {0, -1L}},
    {"setdomainname", SYS_setdomainname, {0, -1L}},
};

/* deny-table NAME...: each named syscall once, one line each:
 *   "sys NAME NR: refused errno E"  |  "sys NAME NR: returned R"
 *   "sys NAME -1: not on this arch" |  "sys NAME: no entry"
 * Exit 1 when every one present was refused with EPERM, else 0. */
static int deny_table(int n, char **names)
{
	int all = 1;
	for (int i = 0; i < n; i++) {
		const struct deny_probe *d = NULL;
		for (size_t k = 0;
		     k < sizeof(deny_probes) / sizeof(deny_probes[0]); k++)
			if (!strcmp(deny_probes[k].name, names[i]))
				d = &deny_probes[k];
		if (!d) {
			printf("sys %s: no entry\n", names[i]);
			all = 0;
			continue;
		}
		if (d->nr == NA) {
			printf("sys %s -1: not on this arch\n", d->name);
			continue;
		}
		errno = 0;
		long r = syscall(d->nr, d->a[0], d->a[1], d->a[2], d->a[3],
				 d->a[4], d->a[5]);
		if (r == -1) {
			printf("sys %s %ld: refused errno %d\n", d->name, d->nr,
			       errno);
			if (errno != EPERM)
				all = 0;
		} else {
			printf("sys %s %ld: returned %ld\n", d->name, d->nr, r);
			all = 0;
		}
	}
	return all;
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
	/* inetproto FAMILY(4|6) TYPE PROTO HOST PORT: socket(family, type,
	 * proto), then connect (sendto for SOCK_DGRAM) */
	if (!strcmp(a, "inetproto") && argc > 6)
		return do_connect_p(atoi(argv[2]) == 6 ? AF_INET6 : AF_INET,
				    argv[5], atoi(argv[6]), atoi(argv[3]),
				    atoi(argv[4]), 0);
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
		/* volatile: an optimiser may otherwise drop an allocation
		 * nothing reads (clang -O1 did, in the sanitizer trees) */
		static char *volatile keep __attribute__((unused));
		for (size_t i = 0; i < mb; i++) {
			char *p = malloc(1 << 20);
			if (!p) {
				printf("malloc failed at %zu MB\n", i);
				return 1;
			}
			memset(p, 1, 1 << 20);
			keep = p;
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
	if (!strcmp(a, "deny-table"))
		return deny_table(argc - 2, argv + 2);
	if (!strcmp(a, "pidfd-kill") && argc > 2) {
		/* signal a host process through a pidfd (pidfd_open needs
		 * only the same uid; the signal goes through task_kill) */
		int fd = (int)syscall(SYS_pidfd_open, atoi(argv[2]), 0);
		if (fd < 0)
			return res(-1, "pidfd_open");
		return res(
		    (int)syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0),
		    "pidfd_send_signal");
	}
	if (!strcmp(a, "errflood") && argc > 2) {
		size_t n = atol(argv[2]);
		static char ebuf[65536];
		memset(ebuf, 'E', sizeof(ebuf));
		while (n) {
			size_t k = n < sizeof(ebuf) ? n : sizeof(ebuf);
			ssize_t w = write(2, ebuf, k);
			if (w <= 0)
				return 1;
			n -= w;
		}
		return 0;
	}
	if (!strcmp(a, "daemonize-hold") && argc > 4) {
		/* daemonize MARKER DELAY, then stay HOLD seconds: the call
		 * ends by its timeout with a daemonised grandchild alive */
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
		sleep(atoi(argv[4]));
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
	/* ---- exec_confine.sh ---- */
	if (!strcmp(a, "say") && argc > 2) {
		printf("%s\n", argv[2]);
		return 0;
	}
	if (!strcmp(a, "fd-read") && argc > 2) {
		/* an fd the caller opened before starting the sandbox */
		char buf[128];
		ssize_t n = read(atoi(argv[2]), buf, sizeof(buf) - 1);
		if (n < 0)
			return res(-1, "fd-read");
		buf[n] = 0;
		printf("fd-read: got '%s'\n", buf);
		return 0;
	}
	if (!strcmp(a, "memfd-exec") && argc > 3) {
		/* copy a readable (not executable) binary into a memfd and
		 * run it: execveat(fd, "", AT_EMPTY_PATH); argv[3] = flags */
		int src = open(argv[2], O_RDONLY);
		if (src < 0)
			return res(-1, "open");
		int m = (int)syscall(SYS_memfd_create, "x",
				     (unsigned)strtoul(argv[3], NULL, 0));
		if (m < 0)
			return res(-1, "memfd_create");
		char buf[65536];
		ssize_t n;
		while ((n = read(src, buf, sizeof(buf))) > 0)
			if (write(m, buf, n) != n)
				return res(-1, "memfd write");
		char *av[] = {"probe", "say", "MEMFD-RAN", NULL};
		char *ev[] = {NULL};
		syscall(SYS_execveat, m, "", av, ev, 0x1000 /*AT_EMPTY_PATH*/);
		return res(-1, "execveat");
	}
	if (!strcmp(a, "loader-run") && argc > 4) {
		/* copy SRC to DST (chmod 755) and run it through the dynamic
		 * loader LOADER: mmap(PROT_EXEC), not execve, of DST */
		const char *src = argv[2], *dst = argv[3];
		char tdst[512];
		if (!strncmp(dst, "TMPDIR/", 7) && getenv("TMPDIR")) {
			snprintf(tdst, sizeof(tdst), "%s/%s", getenv("TMPDIR"),
				 dst + 7);
			dst = tdst;
		}
		if (strcmp(src, dst)) {
			int s = open(src, O_RDONLY),
			    d = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0755);
			if (s < 0 || d < 0)
				return res(-1, "copy");
			char buf[65536];
			ssize_t n;
			while ((n = read(s, buf, sizeof(buf))) > 0)
				if (write(d, buf, n) != n)
					return res(-1, "copy write");
			close(d);
		}
		char *av[] = {argv[4], (char *)dst, "LOADER-RAN", NULL};
		execv(argv[4], av);
		return res(-1, "exec loader");
	}
	if ((!strcmp(a, "unix-connect") || !strcmp(a, "unix-sendto")) &&
	    argc > 2) {
		/* "@name" = abstract */
		int dgram = !strcmp(a, "unix-sendto");
		int s = socket(AF_UNIX, dgram ? SOCK_DGRAM : SOCK_STREAM, 0);
		if (s < 0)
			return res(-1, "socket");
		struct {
			sa_family_t fam;
			char path[108];
		} u = {AF_UNIX, {0}};
		size_t l = strlen(argv[2]);
		if (l >= sizeof(u.path))
			return 2;
		memcpy(u.path, argv[2], l);
		if (u.path[0] == '@')
			u.path[0] = 0;
		socklen_t len =
		    (socklen_t)(sizeof(sa_family_t) + l + (u.path[0] ? 1 : 0));
		if (dgram)
			return res((int)sendto(s, "x", 1, 0, (void *)&u, len),
				   "unix sendto");
		return res(connect(s, (void *)&u, len), "unix connect");
	}
	if (!strcmp(a, "linger-connect") && argc > 4) {
		/* PORT SECS PIDDIR: write our pid to PIDDIR/first, leave a
		 * daemonised grandchild (pid in PIDDIR/grand) that tries a
		 * loopback connect every 100 ms for SECS, then stay too */
		int port = atoi(argv[2]), secs = atoi(argv[3]);
		char p[512];
		snprintf(p, sizeof(p), "%s/first", argv[4]);
		FILE *f = fopen(p, "w");
		if (f) {
			fprintf(f, "%d\n", getpid());
			fclose(f);
		}
		pid_t c = fork();
		if (c == 0) {
			setsid();
			if (fork() == 0) {
				close(0);
				close(1);
				close(2);
				snprintf(p, sizeof(p), "%s/grand", argv[4]);
				f = fopen(p, "w");
				if (f) {
					fprintf(f, "%d\n", getpid());
					fclose(f);
				}
				for (int i = 0; i < secs * 10; i++) {
					int s = socket(AF_INET, SOCK_STREAM, 0);
					struct sockaddr_in a4 = {
					    .sin_family = AF_INET,
					    .sin_port = htons(port)};
					inet_pton(AF_INET, "127.0.0.1",
						  &a4.sin_addr);
					(void)!connect(s, (void *)&a4,
						       sizeof(a4));
					close(s);
					usleep(100000);
				}
				_exit(0);
			}
			_exit(0);
		}
		waitpid(c, NULL, 0);
		printf("lingering\n");
		sleep(secs);
		return 0;
	}
	fprintf(stderr, "probe: unknown action '%s'\n", a);
	return 2;
}
