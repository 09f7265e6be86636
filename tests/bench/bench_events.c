/* Denial events from kernel to consumer: throughput with zero loss and
 * latency from the denial (BPF timestamp) to the consumer's callback.
 * Producers: children in a scratch cgroup calling connect() to a denied
 * loopback port in a loop. Prints figures; asserts nothing. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/util.h"
#include "enforce/egress.h"

struct stats {
	uint64_t n;
	uint64_t *lat; /* ns */
	uint64_t cap;
	uint64_t first_ns, last_ns;
};

static void on_ev(const struct wd_event *ev, void *arg)
{
	struct stats *s = arg;
	uint64_t now = wd_wall_ns();
	if (!s->n)
		s->first_ns = now;
	s->last_ns = now;
	if (s->n < s->cap)
		s->lat[s->n] = now > ev->ts_ns ? now - ev->ts_ns : 0;
	s->n++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void producer(const char *cg, uint16_t port, long count)
{
	char procs[300];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	if (wd_write_str(procs, "0"))
		_exit(2);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(port)};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (long i = 0; i < count; i++)
		if (connect(fd, (void *)&sin, sizeof(sin)) == 0 ||
		    errno != EPERM)
			_exit(3); /* must be denied: the socket stays fresh */
	_exit(0);
}

static int run(struct wd_egress *e, const char *cg, int nprod, long per,
	       bool pace)
{
	struct stats s = {.cap = (uint64_t)nprod * per};
	s.lat = wd_calloc(s.cap, sizeof(*s.lat));
	uint64_t lost0 = 0, lost1 = 0;
	wd_egress_lost(e, &lost0);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ee = {.events = EPOLLIN};
	epoll_ctl(ep, EPOLL_CTL_ADD, wd_egress_events_fd(e), &ee);
	pid_t kids[64];
	uint64_t t0 = wd_wall_ns();
	for (int i = 0; i < nprod; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			producer(cg, 9, per);
	}
	int alive = nprod, bad = 0;
	uint64_t want = (uint64_t)nprod * per;
	while (alive || s.n + (lost1 - lost0) < want) {
		if (pace)
			epoll_wait(ep, &ee, 1, 10);
		wd_egress_consume(e, on_ev, &s);
		wd_egress_lost(e, &lost1);
		int st;
		pid_t p;
		while (alive && (p = waitpid(-1, &st, WNOHANG)) > 0) {
			alive--;
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				bad++;
		}
		if (!alive && wd_wall_ns() - t0 > 60ull * 1000000000ull)
			break;
	}
	close(ep);
	uint64_t lost = lost1 - lost0;
	double secs = (s.last_ns - t0) / 1e9;
	qsort(s.lat, WD_MIN(s.n, s.cap), sizeof(*s.lat), cmp_u64);
	uint64_t m = WD_MIN(s.n, s.cap);
	printf("events %-14s producers=%d events=%llu lost=%llu "
	       "rate=%.0f/s p50=%.1fus p99=%.1fus max=%.1fus%s\n",
	       pace ? "(epoll wake)" : "(busy poll)", nprod,
	       (unsigned long long)s.n, (unsigned long long)lost,
	       secs > 0 ? s.n / secs : 0, m ? s.lat[m / 2] / 1e3 : 0,
	       m ? s.lat[m * 99 / 100] / 1e3 : 0, m ? s.lat[m - 1] / 1e3 : 0,
	       bad ? " (a producer failed)" : "");
	printf("events_rate_vs_goal %.2f (goal 1000000/s, zero loss: %s)\n",
	       secs > 0 ? s.n / secs / 1e6 : 0, lost ? "no" : "yes");
	printf("events_p99_vs_goal %.4f (goal p99 <= 10 ms)\n",
	       m ? s.lat[m * 99 / 100] / 1e7 : 0);
	free(s.lat);
	return 0;
}

int main(int argc, char **argv)
{
	if (geteuid()) {
		printf("SKIP bench_events: needs root\n");
		return 0;
	}
	long per = argc > 1 ? atol(argv[1]) : 200000;
	char cg[256];
	snprintf(cg, sizeof(cg), "/sys/fs/cgroup/unified/warden-bench-%d",
		 (int)getpid());
	if (mkdir(cg, 0755)) {
		printf("SKIP bench_events: mkdir %s: %s\n", cg,
		       strerror(errno));
		return 0;
	}
	struct wd_err err = {0};
	struct wd_egress *e = NULL;
	struct wd_egress_opts o = {.ring_bytes = 1u << 24};
	int cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat sb;
	fstat(cgfd, &sb);
	if (wd_egress_open_opts(&e, &o, &err) ||
	    wd_egress_attach(e, cgfd, (uint64_t)sb.st_ino, NULL, 0, false, 0,
			     &err)) {
		printf("SKIP bench_events: %s\n", err.msg);
	} else {
		long nc = sysconf(_SC_NPROCESSORS_ONLN);
		int np = nc > 1 ? (int)nc - 1 : 1;
		run(e, cg, np, per, false);
		run(e, cg, 1, per / 4, true);
		wd_egress_detach(e, (uint64_t)sb.st_ino);
	}
	wd_egress_close(e);
	close(cgfd);
	rmdir(cg);
	return 0;
}
