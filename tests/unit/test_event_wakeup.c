/* The ring buffer's wake-up policy against the real kernel (egress programs
 * on a scratch cgroup v2 leaf): a denial after a quiet spell wakes the
 * consumer's fd by itself; a burst, most of whose records go in without a
 * wake-up, is read completely by the consumer loop (wd_egress_poll) and by
 * wardend's own consumer (events/bpf_route.h: the bounded wait, the
 * routed drain, each event published on the stream as the broker does),
 * with nothing lost. No timing
 * is asserted: only that the wake-up comes and every event arrives. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/util.h"
#include "enforce/egress.h"
#include "events/bpf_route.h"
#include "events/stream.h"
#include "t.h"

static char cg_path[256];

/* A child in the cgroup makes n denied connect() calls. */
static int deny_n(int n)
{
	fflush(stdout); /* a child must not print the parent's lines again */
	pid_t p = fork();
	if (p == 0) {
		char procs[300];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_path);
		if (wd_write_str(procs, "0"))
			_exit(2);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_port = htons(9)};
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		for (int i = 0; i < n; i++)
			if (connect(fd, (void *)&sin, sizeof(sin)) == 0 ||
			    errno != EPERM)
				_exit(3);
		_exit(0);
	}
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void count(const struct wd_event *ev, void *arg)
{
	if (!strcmp(ev->target, "127.0.0.1:9"))
		(*(int *)arg)++;
}

/* Events handed to a call, checked for order: ts_ns never goes back, and
 * the first 500 (one child) come before the next 500 (another child). */
struct order {
	int n;
	bool sorted;
	uint64_t last_ts;
	int first_pids[2];
};

static void in_order(const struct wd_event *ev, void *arg)
{
	struct order *o = arg;
	if (strcmp(ev->target, "127.0.0.1:9"))
		return;
	if (o->n == 0)
		o->sorted = true;
	if (ev->ts_ns < o->last_ts)
		o->sorted = false;
	o->last_ts = ev->ts_ns;
	if (o->n == 0)
		o->first_pids[0] = ev->pid;
	else if (o->n == 500)
		o->first_pids[1] = ev->pid;
	else if (o->n < 500 ? ev->pid != o->first_pids[0]
			    : ev->pid != o->first_pids[1])
		o->sorted = false;
	o->n++;
}

static void publish(const struct wd_event *ev, void *arg)
{
	wd_stream_publish(arg, ev);
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("event_wakeup", "needs root (BPF, cgroups)");
		return T_DONE();
	}
	struct wd_err err = {0};
	struct wd_egress *e = NULL;
	if (wd_egress_open(&e, &err)) {
		T_FAIL("wakeup_egress_open", "%s", err.msg);
		return T_DONE();
	}
	snprintf(cg_path, sizeof(cg_path),
		 "/sys/fs/cgroup/unified/warden-test-wake-%d", (int)getpid());
	if (access("/sys/fs/cgroup/unified/cgroup.procs", F_OK))
		snprintf(cg_path, sizeof(cg_path),
			 "/sys/fs/cgroup/warden-test-wake-%d", (int)getpid());
	if (mkdir(cg_path, 0755)) {
		T_FAIL("wakeup_cgroup", "mkdir %s: %s", cg_path,
		       strerror(errno));
		wd_egress_close(e);
		return T_DONE();
	}
	int cgfd = open(cg_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat sb;
	fstat(cgfd, &sb);
	uint64_t cgid = (uint64_t)sb.st_ino;
	int rc = wd_egress_attach(e, cgfd, cgid, NULL, 0, false, 0, &err);
	T_OK(rc == 0, "wakeup_attach", "%s", err.msg);
	if (rc)
		goto out;

	/* a single denial after a quiet spell wakes the fd */
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ee = {.events = EPOLLIN};
	epoll_ctl(ep, EPOLL_CTL_ADD, wd_egress_events_fd(e), &ee);
	int got = 0;
	wd_egress_consume(e, NULL, NULL);
	usleep(5000); /* > WD_WAKE_GAP_NS since any earlier wake-up */
	rc = deny_n(1);
	int ready = epoll_wait(ep, &ee, 1, 5000);
	wd_egress_consume(e, count, &got);
	T_OK(rc == 0 && ready == 1 && got == 1, "sparse_denial_wakes",
	     "child %d, epoll %d, %d events", rc, ready, got);
	close(ep);

	/* a burst: read completely by the consumer loop, nothing lost */
	uint64_t lost0 = 0, lost1 = 0;
	wd_egress_lost(e, &lost0);
	rc = deny_n(3000);
	got = 0;
	for (int i = 0; i < 200 && got < 3000; i++)
		if (wd_egress_poll(e, 1000, count, &got) < 0)
			break;
	wd_egress_lost(e, &lost1);
	T_OK(rc == 0 && got == 3000 && lost1 == lost0, "burst_read_by_poll",
	     "child %d, %d events of 3000, lost %llu", rc, got,
	     (unsigned long long)(lost1 - lost0));

	/* the same through wardend's consumer: routed to the call, then on
	 * the stream */
	struct wd_stream *s = wd_stream_new(8192);
	struct wd_bpf_route route;
	wd_bpf_route_add(&route, cgid);
	rc = deny_n(3000);
	struct wd_stream_stats st = {0};
	for (int i = 0; i < 200 && st.published < 3000; i++) {
		if (wd_egress_wait(e, 1000) < 0 ||
		    wd_bpf_route_drain(e, &route, publish, s) < 0)
			break;
		wd_stream_stats(s, &st);
	}
	wd_bpf_route_del(&route);
	struct wd_egress_loss l = {0};
	wd_egress_loss(e, &l);
	T_OK(rc == 0 && st.published == 3000 &&
		 l.ringbuf + l.invalid + l.dropped == lost1,
	     "burst_read_by_route",
	     "child %d, %llu published of 3000, lost %llu+%llu+%llu (was "
	     "%llu)",
	     rc, (unsigned long long)st.published,
	     (unsigned long long)l.ringbuf, (unsigned long long)l.invalid,
	     (unsigned long long)l.dropped, (unsigned long long)lost1);

	/* another call's drain puts this call's records in its mailbox;
	 * this call's own drain hands that mail over first, then what it
	 * reads itself: every record once, in the order they were made */
	struct wd_bpf_route mine_rt, drainer;
	wd_bpf_route_add(&mine_rt, cgid);
	wd_bpf_route_add(&drainer, 2); /* a call of another cgroup */
	struct order o = {0};
	int rc1 = deny_n(500);
	for (int i = 0; i < 50; i++) { /* all 500 read by the other call */
		wd_egress_wait(e, 100);
		wd_bpf_route_drain(e, &drainer, publish, s);
		pthread_mutex_lock(&mine_rt.mu);
		int queued = mine_rt.n;
		pthread_mutex_unlock(&mine_rt.mu);
		if (queued >= 500)
			break;
	}
	int rc2 = deny_n(500);
	for (int i = 0; i < 100 && o.n < 1000; i++) {
		wd_egress_wait(e, 100);
		if (wd_bpf_route_drain(e, &mine_rt, in_order, &o) < 0)
			break;
	}
	wd_bpf_route_del(&drainer);
	wd_bpf_route_del(&mine_rt);
	T_OK(rc1 == 0 && rc2 == 0 && o.n == 1000 && o.sorted &&
		 o.first_pids[0] != o.first_pids[1],
	     "mail_then_own_in_order",
	     "children %d %d, %d of 1000, in order %d, pids %d %d", rc1, rc2,
	     o.n, o.sorted, o.first_pids[0], o.first_pids[1]);

	/* a record of a cgroup no call owns is counted lost, not dropped
	 * silently */
	struct wd_bpf_route other; /* a route, but not of this cgroup */
	wd_bpf_route_add(&other, 1);
	rc = deny_n(5);
	int mine = 0;
	for (int i = 0; i < 50; i++) {
		struct wd_egress_loss m = {0};
		wd_egress_wait(e, 100);
		wd_bpf_route_drain(e, &other, publish, s);
		wd_egress_loss(e, &m);
		if (m.dropped >= l.dropped + 5) {
			mine = (int)(m.dropped - l.dropped);
			break;
		}
	}
	wd_bpf_route_del(&other);
	T_OK(rc == 0 && mine == 5, "unrouted_counted", "child %d, %d of 5", rc,
	     mine);
	wd_stream_free(s);
	wd_egress_detach(e, cgid);
out:
	wd_egress_close(e);
	close(cgfd);
	if (rmdir(cg_path))
		T_FAIL("wakeup_cgroup_removed", "rmdir %s: %s", cg_path,
		       strerror(errno));
	return T_DONE();
}
