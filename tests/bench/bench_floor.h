/* bench_events' floor: what one producer's denied connect() costs this
 * kernel with the least a deny program can do (bpf/bench_floor.bpf.c),
 * beside what it costs with warden's programs. Included by
 * tests/bench/bench_events.c only. */
#ifndef WD_BENCH_FLOOR_H
#define WD_BENCH_FLOOR_H

#include <bpf/bpf.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "bench_floor.skel.h"
#include "enforce/egress.h"

static double loadavg(void); /* bench_events.c */

/* The producer of every end-to-end run: joins cg, then connect()s one TCP
 * socket to 127.0.0.1:port `count` times; each must fail with EPERM (the
 * socket stays fresh), else exit 3. */
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

struct floor_fig {
	double ns_call; /* the producer's CPU (user + system) per call */
	double rate;	/* calls/s, wall clock of the producer's life */
};

/* One producer of `per` denied connect() calls in a scratch cgroup of its
 * own with only prog_fd attached (cgroup/connect4). The bench drains the
 * ring (wd_egress_consume, no callback) every millisecond meanwhile, for
 * a program that writes records without a wake-up. 0 or -errno. */
static int floor_run(struct wd_egress *e, int prog_fd, long per,
		     struct floor_fig *out)
{
	char cg[256];
	snprintf(cg, sizeof(cg), "/sys/fs/cgroup/unified/warden-floor-%d",
		 (int)getpid());
	if (mkdir(cg, 0755))
		return -errno;
	int rc = 0, cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cgfd < 0 ||
	    bpf_prog_attach(prog_fd, cgfd, BPF_CGROUP_INET4_CONNECT, 0)) {
		rc = -errno;
		goto out;
	}
	uint64_t t0 = wd_wall_ns(), t1 = 0;
	pid_t kid = fork();
	if (kid == 0)
		producer(cg, 9, per);
	struct rusage ru;
	int st = 0;
	for (;;) {
		struct pollfd p = {wd_egress_events_fd(e), POLLIN, 0};
		poll(&p, 1, 1);
		wd_egress_consume(e, NULL, NULL);
		pid_t w = wait4(kid, &st, WNOHANG, &ru);
		if (w == kid) {
			t1 = wd_wall_ns();
			break;
		}
		if (w < 0) {
			rc = -errno;
			break;
		}
	}
	wd_egress_consume(e, NULL, NULL);
	bpf_prog_detach2(prog_fd, cgfd, BPF_CGROUP_INET4_CONNECT);
	if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st)))
		rc = -EPROTO; /* a call was not denied */
	if (!rc) {
		double cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
			     (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
		out->ns_call = cpu / per;
		out->rate = per / ((t1 - t0) / 1e9);
	}
out:
	if (cgfd >= 0)
		close(cgfd);
	for (int i = 0; i < 200 && rmdir(cg) < 0 && errno == EBUSY; i++)
		usleep(10000);
	return rc;
}

/* The floor line: an empty deny program and one that writes a minimal
 * record, each the median of 3 runs, beside ours (rate and producer CPU
 * per event of the one-producer end-to-end run). */
static void floor_report(struct wd_egress *e, long per, double our_rate,
			 double our_ns)
{
	struct wd_egress_map_fds fds;
	wd_egress_map_fds(e, &fds);
	struct bench_floor_bpf *b = bench_floor_bpf__open();
	int rc = b ? bpf_map__reuse_fd(b->maps.wd_events, fds.events) : -errno;
	if (!rc)
		rc = bench_floor_bpf__load(b);
	if (rc) {
		printf("SKIP events floor: load bench_floor.bpf.o: %s\n",
		       strerror(-rc));
		bench_floor_bpf__destroy(b);
		return;
	}
	int progs[2] = {bpf_program__fd(b->progs.wd_floor_deny),
			bpf_program__fd(b->progs.wd_floor_ring)};
	struct floor_fig f[2];
	for (int k = 0; k < 2; k++) {
		double ns[3], rate[3];
		for (int i = 0; i < 3; i++) {
			struct floor_fig one = {0};
			if ((rc = floor_run(e, progs[k], per, &one))) {
				printf("SKIP events floor: %s\n",
				       strerror(-rc));
				bench_floor_bpf__destroy(b);
				return;
			}
			ns[i] = one.ns_call;
			rate[i] = one.rate;
		}
		f[k].ns_call = bench_median(ns, 3);
		f[k].rate = bench_median(rate, 3);
	}
	bench_floor_bpf__destroy(b);
	printf("events floor (one producer, median of 3, load=%.2f): denied "
	       "connect() with an empty deny program: %.0f ns/call = %.0f/s "
	       "max on this machine (measured %.0f/s); with a minimal ring "
	       "record: %.0f ns/call (%.0f/s); ours %.0f/s (%.0f ns/event) "
	       "= %.2f of the floor\n",
	       loadavg(), f[0].ns_call, 1e9 / f[0].ns_call, f[0].rate,
	       f[1].ns_call, f[1].rate, our_rate, our_ns,
	       our_rate / (1e9 / f[0].ns_call));
}

#endif
