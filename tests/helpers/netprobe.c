/* netprobe: a statically linked helper run INSIDE the sandbox under test
 * for inbound, ICMP and exec attacks (tests/integration/exec_inbound.sh,
 * tier3_parity.sh), a flood of denied connects
 * (tests/integration/events_loss.sh) and a rising stream of them
 * (tests/integration/monitoring.sh).
 *
 *   netprobe ACTION [ARGS...]
 *
 * Each step prints "STEP: succeeded" or "STEP: refused: ERR (errno N)".
 * Exit status: 0 = the attack worked (a peer was accepted or a datagram
 * received, an exec ran), 1 = a step was refused, 3 = every step passed
 * but no peer came, 2 = usage. The tests judge by what a client OUTSIDE
 * the sandbox could reach, not by this exit status alone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int step(int r, const char *what)
{
	if (r < 0) {
		printf("%s: refused: %s (errno %d)\n", what, strerror(errno),
		       errno);
		fflush(stdout);
		return -1;
	}
	printf("%s: succeeded\n", what);
	fflush(stdout);
	return 0;
}

static socklen_t inet_addr_of(int fam, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (fam == AF_INET) {
		struct sockaddr_in *s = (void *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof(*s);
	}
	struct sockaddr_in6 *s = (void *)ss;
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(port);
	s->sin6_addr = in6addr_loopback;
	return sizeof(*s);
}

static socklen_t abstract_of(const char *name, struct sockaddr_un *su)
{
	memset(su, 0, sizeof(*su));
	su->sun_family = AF_UNIX;
	size_t n = strlen(name);
	if (n > sizeof(su->sun_path) - 2)
		n = sizeof(su->sun_path) - 2;
	memcpy(su->sun_path + 1, name, n); /* sun_path[0] = 0: abstract */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Accept peers on fd for wait_ms; prints and returns how many came. */
static int accept_for(int fd, int wait_ms)
{
	int n = 0;
	double end = now_ms() + wait_ms;
	for (;;) {
		int left = (int)(end - now_ms());
		if (left <= 0)
			break;
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, left) <= 0)
			continue;
		int c = accept(fd, NULL, NULL);
		if (c >= 0) {
			n++;
			(void)!write(c, "tool\n", 5);
			close(c);
		}
	}
	printf("accepted %d\n", n);
	fflush(stdout);
	return n;
}

static int recv_for(int fd, int wait_ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	char b[512];
	int n = 0;
	double end = now_ms() + wait_ms;
	for (;;) {
		int left = (int)(end - now_ms());
		if (left <= 0)
			break;
		if (poll(&p, 1, left) > 0 && recv(fd, b, sizeof(b), 0) >= 0)
			n++;
	}
	printf("received %d\n", n);
	fflush(stdout);
	return n;
}

/* A listening TCP socket on loopback:PORT (fam 4 or 6); when the bind
 * is refused, a listen() on an unbound socket (the kernel would pick the
 * port) is tried too, so both lines are seen. */
static int tcp_listen(int fam, int port, int wait_ms)
{
	struct sockaddr_storage ss;
	socklen_t len = inet_addr_of(fam, port, &ss);
	int s = socket(fam, SOCK_STREAM, 0);
	if (step(s, "socket") < 0)
		return 1;
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int b = step(bind(s, (void *)&ss, len), "bind");
	int l = step(listen(s, 16), "listen");
	if (b < 0 || l < 0)
		return 1;
	return accept_for(s, wait_ms) > 0 ? 0 : 3;
}

static int udp_recv(int fam, int port, int wait_ms)
{
	struct sockaddr_storage ss;
	socklen_t len = inet_addr_of(fam, port, &ss);
	int s = socket(fam, SOCK_DGRAM, 0);
	if (step(s, "socket") < 0)
		return 1;
	if (step(bind(s, (void *)&ss, len), "bind") < 0)
		return 1;
	return recv_for(s, wait_ms) > 0 ? 0 : 3;
}

static int abstract_listen(const char *name, int wait_ms)
{
	struct sockaddr_un su;
	socklen_t len = abstract_of(name, &su);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (step(s, "socket") < 0)
		return 1;
	int b = step(bind(s, (void *)&su, len), "bind");
	int l = step(listen(s, 16), "listen");
	if (b < 0 || l < 0)
		return 1;
	return accept_for(s, wait_ms) > 0 ? 0 : 3;
}

/* A unix datagram socket bound to an abstract name: from socket(), or
 * one end of a socketpair (pair != 0); type SOCK_DGRAM, or SOCK_RAW (the
 * kernel makes that a datagram socket too). */
static int abstract_dgram(const char *name, int wait_ms, int pair, int type)
{
	struct sockaddr_un su;
	socklen_t len = abstract_of(name, &su);
	int s;
	if (pair) {
		int sv[2];
		if (step(socketpair(AF_UNIX, type, 0, sv), "socketpair") < 0)
			return 1;
		s = sv[0];
	} else {
		s = socket(AF_UNIX, type, 0);
		if (step(s, "socket") < 0)
			return 1;
	}
	if (step(bind(s, (void *)&su, len), "bind") < 0)
		return 1;
	return recv_for(s, wait_ms) > 0 ? 0 : 3;
}

/* Send one datagram to an abstract name (another call's, in the shared
 * empty network namespace): 0 sent, 1 refused. */
static int abstract_send(const char *name)
{
	struct sockaddr_un su;
	socklen_t len = abstract_of(name, &su);
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (step(s, "socket") < 0)
		return 1;
	return step((int)sendto(s, "cmd", 3, 0, (void *)&su, len), "sendto") < 0
		   ? 1
		   : 0;
}

/* Join a host listener's port on 127.0.0.1 with SO_REUSEPORT. */
static int reuseport(int port, int wait_ms)
{
	struct sockaddr_storage ss;
	socklen_t len = inet_addr_of(AF_INET, port, &ss);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (step(s, "socket") < 0)
		return 1;
	int one = 1;
	int o = step(setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)),
		     "setsockopt SO_REUSEPORT");
	int b = step(bind(s, (void *)&ss, len), "bind");
	int l = step(listen(s, 16), "listen");
	if (o < 0 || b < 0 || l < 0)
		return 1;
	return accept_for(s, wait_ms) > 0 ? 0 : 3;
}

static unsigned short csum(const void *p, size_t n)
{
	const unsigned short *w = p;
	unsigned long s = 0;
	for (; n > 1; n -= 2)
		s += *w++;
	if (n)
		s += *(const unsigned char *)w;
	s = (s >> 16) + (s & 0xffff);
	s += s >> 16;
	return (unsigned short)~s;
}

/* An echo request from a ping socket (fam 4/6) or a raw one (raw). */
static int ping(int fam, int raw)
{
	int proto = fam == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6;
	int s = socket(fam, raw ? SOCK_RAW : SOCK_DGRAM, proto);
	if (step(s, raw ? "socket SOCK_RAW" : "socket ping") < 0)
		return 1;
	struct sockaddr_storage ss;
	socklen_t len = inet_addr_of(fam, 0, &ss);
	unsigned char pkt[16] = {0};
	pkt[0] = fam == AF_INET ? ICMP_ECHO : 128; /* ICMP6_ECHO_REQUEST */
	pkt[7] = 1;				   /* sequence */
	if (fam == AF_INET && raw) {
		unsigned short c = csum(pkt, sizeof(pkt));
		memcpy(pkt + 2, &c, 2);
	}
	if (step((int)sendto(s, pkt, sizeof(pkt), 0, (void *)&ss, len),
		 "sendto") < 0)
		return 1;
	return recv_for(s, 1000) > 0 ? 0 : 3;
}

/* Copy this program to dst, make it executable and run it there with
 * args (NULL-terminated). */
static int write_exec(const char *dst, char **args)
{
	int in = open("/proc/self/exe", O_RDONLY);
	if (step(in, "open /proc/self/exe") < 0)
		return 1;
	int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (step(out, "create") < 0)
		return 1;
	struct stat st;
	fstat(in, &st);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			return step(-1, "write"), 1;
	close(in);
	fchmod(out, 0755);
	close(out);
	execv(dst, args - 1); /* argv[0] = dst */
	return step(-1, "exec"), 1;
}

/* Copy this program into a memfd and run that (args NULL-terminated,
 * argv[0] included): an anonymous file on no noexec mount. */
static int memfd_exec(char **args)
{
	int in = open("/proc/self/exe", O_RDONLY);
	if (step(in, "open /proc/self/exe") < 0)
		return 1;
	int mfd = (int)syscall(SYS_memfd_create, "probe", 0);
	if (step(mfd, "memfd_create") < 0)
		return 1;
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(mfd, buf, n) != n)
			return step(-1, "write"), 1;
	close(in);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	execv(path, args);
	return step(-1, "exec"), 1;
}

/* The first nameserver of /etc/resolv.conf into out (64 bytes): in tier 3
 * with an allow-list, the call's link's host end, which stands for the
 * node's 127.0.0.1 (tier3_parity.sh). */
static int nameserver(char out[64])
{
	FILE *f = fopen("/etc/resolv.conf", "r");
	if (!f)
		return -1;
	char line[256];
	int r = -1;
	while (r < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "nameserver %63s", out) == 1)
			r = 0;
	fclose(f);
	if (r < 0)
		errno = ENOENT;
	return r;
}

/* N connect() calls to HOST:PORT (127.0.0.1 unless given; "nameserver":
 * the first of /etc/resolv.conf), as fast as one thread makes them, on one
 * socket (a refused connect leaves it fresh): each denied one is a kernel
 * denial event. Prints how many were refused with EPERM, how many failed
 * otherwise, how many connected. */
static int connect_flood(int port, long n, const char *host)
{
	char ns[64];
	if (host && !strcmp(host, "nameserver")) {
		if (step(nameserver(ns), "nameserver") < 0)
			return 1;
		host = ns;
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (step(fd, "socket") < 0)
		return 1;
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port)};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (host && inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
		fprintf(stderr, "connect-flood: bad host\n");
		return 2;
	}
	long eperm = 0, other = 0, ok = 0;
	for (long i = 0; i < n; i++) {
		if (connect(fd, (void *)&sin, sizeof(sin)) == 0) {
			ok++;
			close(fd);
			fd = socket(AF_INET, SOCK_STREAM, 0);
		} else if (errno == EPERM) {
			eperm++;
		} else {
			other++;
		}
	}
	printf("connect-flood: %ld refused (EPERM), %ld failed otherwise, "
	       "%ld connected\n",
	       eperm, other, ok);
	return ok ? 0 : 1;
}

/* For SECONDS seconds, second k (1..SECONDS) makes k * PER connects to
 * 127.0.0.1:PORT, then waits for the second's end: a denial rate that
 * keeps rising, so a detector that compares a short window with the time
 * before it stays in its spike the whole time. */
static int connect_ramp(int port, int seconds, long per)
{
	long eperm = 0, other = 0;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port)};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (step(fd, "socket") < 0)
		return 1;
	for (int k = 1; k <= seconds; k++) {
		for (long i = 0; i < k * per; i++) {
			if (connect(fd, (void *)&sin, sizeof(sin)) == 0) {
				printf("connect-ramp: connected\n");
				return 0;
			}
			if (errno == EPERM)
				eperm++;
			else
				other++;
		}
		struct timespec end = {.tv_sec = t0.tv_sec + k,
				       .tv_nsec = t0.tv_nsec};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end,
				       NULL) == EINTR)
			;
	}
	printf("connect-ramp: %ld refused (EPERM), %ld failed otherwise\n",
	       eperm, other);
	return 1;
}

/* execveat(fd, "", AT_EMPTY_PATH) of this very program: fexecve. */
static int fd_exec(char **args)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (step(fd, "open /proc/self/exe") < 0)
		return 1;
	extern char **environ;
	syscall(SYS_execveat, fd, "", args, environ, AT_EMPTY_PATH);
	return step(-1, "execveat"), 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *a = argc > 1 ? argv[1] : "";
	int fam = argc > 2 && !strcmp(argv[2], "6") ? AF_INET6 : AF_INET;
	if (!strcmp(a, "tcp-listen") && argc > 4)
		return tcp_listen(fam, atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(a, "udp-recv") && argc > 4)
		return udp_recv(fam, atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(a, "abstract-listen") && argc > 3)
		return abstract_listen(argv[2], atoi(argv[3]));
	if (!strcmp(a, "abstract-dgram") && argc > 3)
		return abstract_dgram(argv[2], atoi(argv[3]), 0, SOCK_DGRAM);
	if (!strcmp(a, "abstract-pair") && argc > 3)
		return abstract_dgram(argv[2], atoi(argv[3]), 1, SOCK_DGRAM);
	if (!strcmp(a, "abstract-raw") && argc > 3)
		return abstract_dgram(argv[2], atoi(argv[3]), 0,
				      SOCK_RAW | SOCK_CLOEXEC);
	if (!strcmp(a, "abstract-rawpair") && argc > 3)
		return abstract_dgram(argv[2], atoi(argv[3]), 1,
				      SOCK_RAW | SOCK_NONBLOCK);
	if (!strcmp(a, "abstract-send") && argc > 2)
		return abstract_send(argv[2]);
	if (!strcmp(a, "connect-flood") && argc > 3)
		return connect_flood(atoi(argv[2]), atol(argv[3]),
				     argc > 4 ? argv[4] : NULL);
	if (!strcmp(a, "connect-ramp") && argc > 4)
		return connect_ramp(atoi(argv[2]), atoi(argv[3]),
				    atol(argv[4]));
	if (!strcmp(a, "reuseport") && argc > 3)
		return reuseport(atoi(argv[2]), atoi(argv[3]));
	if (!strcmp(a, "ping") && argc > 2)
		return ping(fam, 0);
	if (!strcmp(a, "raw") && argc > 2)
		return ping(fam, 1);
	if (!strcmp(a, "write-exec") && argc > 3)
		return write_exec(argv[2], argv + 3);
	if (!strcmp(a, "memfd-exec") && argc > 2)
		return memfd_exec(argv + 1); /* argv[0] = "memfd-exec" */
	if (!strcmp(a, "fd-exec") && argc > 2)
		return fd_exec(argv + 1);
	if (!strcmp(a, "exec") && argc > 2) {
		execv(argv[2], argv + 2);
		return step(-1, "exec"), 1;
	}
	if (!strcmp(a, "mark") && argc > 2) /* evidence of having run */
		return step(open(argv[2], O_WRONLY | O_CREAT, 0644), "mark") < 0
			   ? 1
			   : 0;
	if (!strcmp(a, "unshare-user"))
		return step(unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)") <
			       0
			   ? 1
			   : 0;
	if (!strcmp(a, "clone-newuser")) {
		long p =
		    syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
		if (p == 0)
			_exit(0);
		return step((int)p, "clone(CLONE_NEWUSER)") < 0 ? 1 : 0;
	}
	if (!strcmp(a, "say") && argc > 2) {
		printf("%s\n", argv[2]);
		return 0;
	}
	fprintf(stderr,
		"usage: netprobe tcp-listen 4|6 PORT MS | udp-recv 4|6 PORT MS "
		"| abstract-listen|abstract-dgram|abstract-pair|abstract-raw|"
		"abstract-rawpair NAME MS | "
		"abstract-send NAME | "
		"reuseport PORT MS | connect-flood PORT N [HOST|nameserver] | "
		"connect-ramp PORT SECONDS PER | ping|raw 4|6 | "
		"write-exec PATH ARGS... | "
		"exec PATH ARGS... | memfd-exec|fd-exec ARGS... | mark FILE | "
		"unshare-user | clone-newuser "
		"| say TEXT\n");
	return 2;
}
