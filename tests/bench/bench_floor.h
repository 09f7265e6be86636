/* bench_events' floor: what one producer's denied connect() costs this
 * kernel with the least a deny program can do (bpf/bench_floor.bpf.c),
 * beside what it costs with warden's programs. Included by
 * tests/bench/bench_events.c only. */
#ifndef WD_BENCH_FLOOR_H
#define WD_BENCH_FLOOR_H

#include <bpf/bpf.h>
#include <linux/sched.h> /* struct clone_args, CLONE_INTO_CGROUP */
#include <poll.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "bench_floor.skel.h"
#include "enforce/egress.h"

static double loadavg(void); /* bench_events.c */

/* The producer of every end-to-end run: joins cg unless cg is NULL (it
 * was started inside it), then connect()s one TCP socket to
 * 127.0.0.1:port `count` times; each must fail with EPERM (the socket
 * stays fresh), else exit 3. */
static void producer(const char *cg, uint16_t port, long count)
{
	char procs[300];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg ? cg : "");
	if (cg && wd_write_str(procs, "0"))
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

/* errno of the first clone3(CLONE_INTO_CGROUP) the kernel refused (then
 * every producer starts the old way), 0 while it is taken */
static int producer_clone3_refused;

/* How producers start, for the output lines. */
static const char *producer_start(void)
{
	static char how[120];
	if (!producer_clone3_refused)
		return "clone3(CLONE_INTO_CGROUP), as wardend starts a tool";
	snprintf(how, sizeof(how),
		 "fork + cgroup.procs (clone3 into a cgroup refused: %s)",
		 strerror(producer_clone3_refused));
	return how;
}

/* Start a producer of `count` denied connect()s in cgroup cg (cgfd open on
 * it) the way wardend starts a tool (sandbox/native_child.c,
 * wd_native_clone_into_leaf): clone3 with CLONE_INTO_CGROUP, the child
 * born in the cgroup. A fork and a write to cgroup.procs instead takes
 * cgroup_threadgroup_rwsem, whose write side waits for an RCU grace period
 * (4-20 ms on this VM, inside a ~200 ms measurement). Where the kernel
 * refuses clone3 into a cgroup (the errnos wardend falls back on), fork
 * and join, and producer_start() says so. The raw clone3 skips glibc's
 * fork handlers: the child only makes syscalls and _exits. Returns the
 * child's pid or -1 (errno). */
static pid_t producer_spawn(int cgfd, const char *cg, long count)
{
	if (!producer_clone3_refused) {
		struct clone_args a = {.flags = CLONE_INTO_CGROUP,
				       .exit_signal = SIGCHLD,
				       .cgroup = (uint64_t)cgfd};
		long p = syscall(SYS_clone3, &a, sizeof(a));
		if (p == 0)
			producer(NULL, 9, count);
		if (p > 0 ||
		    (errno != ENOSYS && errno != E2BIG && errno != EINVAL))
			return (pid_t)p;
		producer_clone3_refused = errno;
	}
	pid_t p = fork();
	if (p == 0)
		producer(cg, 9, count);
	return p;
}

struct floor_fig {
	double ns_call; /* the producer's CPU (user + system) per call */
	double rate;	/* calls/s, wall clock of the producer's life */
	double prog_ns; /* the program's run time per run (prog_run_ns) */
};

/* The kernel's run time per run of the cgroup/connect4 program attached
 * to cgfd (run_time_ns / run_cnt over one producer of `per` calls), with
 * the kernel's BPF run-time stats on for that run only (BPF_ENABLE_STATS:
 * on while its fd is open; they cost each run two clock reads, so the
 * rates are measured without them). The program's own cost, steadier than
 * the producer's CPU time on a loaded machine. 0 if unavailable. */
static double prog_run_ns(int cgfd, const char *cg, long per)
{
	__u32 ids[4], n = 4;
	if (bpf_prog_query(cgfd, BPF_CGROUP_INET4_CONNECT, 0, NULL, ids, &n) ||
	    n != 1)
		return 0;
	int pfd = bpf_prog_get_fd_by_id(ids[0]);
	int sfd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	double r = 0;
	struct bpf_prog_info a = {0}, b = {0};
	__u32 len = sizeof(a);
	if (pfd >= 0 && sfd >= 0 && !bpf_obj_get_info_by_fd(pfd, &a, &len)) {
		pid_t kid = producer_spawn(cgfd, cg, per);
		int st;
		if (kid > 0)
			waitpid(kid, &st, 0);
		len = sizeof(b);
		if (!bpf_obj_get_info_by_fd(pfd, &b, &len) &&
		    b.run_cnt > a.run_cnt)
			r = (double)(b.run_time_ns - a.run_time_ns) /
			    (b.run_cnt - a.run_cnt);
	}
	if (sfd >= 0)
		close(sfd);
	if (pfd >= 0)
		close(pfd);
	return r;
}

/* One producer of `per` denied connect() calls in cgroup cg (cgfd); the
 * bench drains the ring (wd_egress_consume, no callback) every millisecond
 * meanwhile, for a program that writes records without a wake-up. Then
 * the program's run time (prog_run_ns). 0 or -errno. */
static int floor_measure(struct wd_egress *e, int cgfd, const char *cg,
			 long per, struct floor_fig *out)
{
	uint64_t t0 = wd_wall_ns(), t1 = 0;
	pid_t kid = producer_spawn(cgfd, cg, per);
	if (kid < 0)
		return -errno;
	struct rusage ru;
	int st = 0, rc = 0;
	for (;;) {
		struct pollfd p = {wd_egress_events_fd(e), POLLIN, 0};
		poll(&p, 1, 1);
		wd_egress_consume(e, NULL, NULL);
		pid_t w = wait4(kid, &st, WNOHANG, &ru);
		if (w == kid) {
			t1 = wd_wall_ns();
			break;
		}
		if (w < 0)
			return -errno;
	}
	wd_egress_consume(e, NULL, NULL);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return -EPROTO; /* a call was not denied */
	double cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
		     (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
	out->ns_call = cpu / per;
	out->rate = per / ((t1 - t0) / 1e9);
	/* no more than a quarter of the default ring: nothing drains it */
	out->prog_ns = prog_run_ns(cgfd, cg, per / 8);
	wd_egress_consume(e, NULL, NULL);
	return rc;
}

/* floor_measure in a scratch cgroup of its own with only prog_fd
 * attached (cgroup/connect4). 0 or -errno. */
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
	rc = floor_measure(e, cgfd, cg, per, out);
	bpf_prog_detach2(prog_fd, cgfd, BPF_CGROUP_INET4_CONNECT);
out:
	if (cgfd >= 0)
		close(cgfd);
	for (int i = 0; i < 200 && rmdir(cg) < 0 && errno == EBUSY; i++)
		usleep(10000);
	return rc;
}

/* The floor lines: an empty deny program and one that writes a minimal
 * record, each the median of 3 runs, beside ours (rate and producer CPU
 * per event of the one-producer end-to-end run); then each program's run
 * time: theirs, a minimal record with its timestamp (what the clock adds)
 * and ours (the egress programs attached to our_cgfd, our_cg); then the
 * timestamped record's floor against goal (events/s). */
static void floor_report(struct wd_egress *e, long per, double our_rate,
			 double our_ns, int our_cgfd, const char *our_cg,
			 double goal)
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
	/* the floor's programs, then ours */
	int progs[3] = {bpf_program__fd(b->progs.wd_floor_deny),
			bpf_program__fd(b->progs.wd_floor_ring),
			bpf_program__fd(b->progs.wd_floor_ring_ts)};
	enum { OURS = 3 };
	struct floor_fig f[OURS + 1];
	for (int k = 0; k <= OURS; k++) {
		double ns[3], rate[3], pns[3];
		for (int i = 0; i < 3; i++) {
			struct floor_fig one = {0};
			rc = k < OURS ? floor_run(e, progs[k], per, &one)
				      : floor_measure(e, our_cgfd, our_cg, per,
						      &one);
			if (rc) {
				printf("SKIP events floor: %s\n",
				       strerror(-rc));
				bench_floor_bpf__destroy(b);
				return;
			}
			ns[i] = one.ns_call;
			rate[i] = one.rate;
			pns[i] = one.prog_ns;
		}
		f[k].ns_call = bench_median(ns, 3);
		f[k].rate = bench_median(rate, 3);
		f[k].prog_ns = bench_median(pns, 3);
	}
	bench_floor_bpf__destroy(b);
	printf("events floor (one producer, median of 3, load=%.2f): denied "
	       "connect() with an empty deny program: %.0f ns/call = %.0f/s "
	       "max on this machine (measured %.0f/s); with a minimal ring "
	       "record: %.0f ns/call (%.0f/s); ours %.0f/s end to end (%.0f "
	       "ns/event) = %.2f of the floor (producer CPU: floor/ours "
	       "%.2f); ours in the floor's harness %.0f ns/call (%.0f/s)\n",
	       loadavg(), f[0].ns_call, 1e9 / f[0].ns_call, f[0].rate,
	       f[1].ns_call, f[1].rate, our_rate, our_ns,
	       our_rate / (1e9 / f[0].ns_call),
	       our_ns > 0 ? f[0].ns_call / our_ns : 0, f[OURS].ns_call,
	       f[OURS].rate);
	printf("events program run time (kernel BPF stats, median of 3): "
	       "empty deny %.0f ns/run, minimal ring record %.0f ns/run, the "
	       "same with its timestamp (bpf_ktime_get_boot_ns) %.0f ns/run, "
	       "ours (wd_connect4, a denial with its record) %.0f ns/run\n",
	       f[0].prog_ns, f[1].prog_ns, f[2].prog_ns, f[OURS].prog_ns);
	/* The least a warden record is (a timestamped minimal one) against
	 * the goal: where the machine's syscall cost alone puts that floor
	 * below the goal, no program that records its denials meets it
	 * here, whatever the consumer does; said, with how near ours is. */
	double ts_floor = 1e9 / f[2].ns_call;
	printf("events floor vs the goal: a denied connect() writing a "
	       "timestamped minimal record costs its producer %.0f ns of CPU "
	       "here = %.0f/s at most (measured %.0f/s wall, load %.2f): the "
	       "goal %.0f/s is %s; ours end to end %.0f/s wall = %.2f of that "
	       "floor's measured rate, producer CPU %.0f ns = %.2fx the "
	       "floor's\n",
	       f[2].ns_call, ts_floor, f[2].rate, loadavg(), goal,
	       ts_floor >= goal ? "within it" : "ABOVE it (out of reach here)",
	       our_rate, f[2].rate > 0 ? our_rate / f[2].rate : 0, our_ns,
	       our_ns / f[2].ns_call);
}

#endif
