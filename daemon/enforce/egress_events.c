/* The egress object's denial events (egress.h): its ring read by wardend's
 * own reader (events/ringbuf.h), the waits with their bound, and the loss
 * counters. The programs' loading, attaching and maps are egress.c's. */
#include "enforce/egress.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>

#include "lib/events.h"
#include "enforce/egress_int.h"

/* wd_egress_poll's bounded wait (see WD_WAKE_GAP_NS in bpf/lib/events.h):
 * while a record was read less than WD_POLL_ACTIVE_NS ago, sleep at most
 * WD_POLL_BOUND_MS, since records may be in without a wake-up. */
#define WD_POLL_BOUND_MS  2
#define WD_POLL_ACTIVE_NS (50ull * 1000000ull)
_Static_assert(WD_POLL_ACTIVE_NS > 4 * WD_WAKE_GAP_NS, "active window");
_Static_assert(WD_POLL_BOUND_MS * 1000000ull >= WD_WAKE_GAP_NS,
	       "a bound shorter than the gap only costs wake-ups");

static int64_t boot_to_wall_now(void)
{
	struct timespec r, b;
	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_BOOTTIME, &b);
	return ((int64_t)r.tv_sec - b.tv_sec) * 1000000000LL +
	       (r.tv_nsec - b.tv_nsec);
}

int wd_egress_on_sample(void *ctx, void *data, size_t size)
{
	struct wd_egress *e = ctx;
	struct wd_event ev;
	if (e->discard)
		return 0;
	e->records++;
	if (wd_kevent_to_event(data, size, e->boot_to_wall, &ev)) {
		__atomic_add_fetch(&e->invalid, 1, __ATOMIC_RELAXED);
		return 0;
	}
	e->delivered++;
	if (e->cb)
		e->cb(&ev, e->cb_arg);
	return 0;
}

int wd_egress_events_fd(struct wd_egress *e)
{
	/* pinned: no ring before a call is attached, nor after.
	 * The edge-triggered epoll, as wd_egress_wait's: readable after a
	 * wake-up until the next wd_egress_consume. The reader's own fd is
	 * level-triggered: a consumer polling it while records keep coming
	 * (the supervisors, sandbox/native_supervise.c) woke for every
	 * record or two and drained them one by one (~1 us of its CPU per
	 * event at 700k/s, and the producer's records and positions
	 * bouncing between the CPUs at that rate). */
	if (!e->rb)
		return -1;
	return e->poll_ep >= 0 ? e->poll_ep : wd_ringbuf_epoll_fd(e->rb);
}

int wd_egress_consume(struct wd_egress *e,
		      void (*cb)(const struct wd_event *ev, void *arg),
		      void *arg)
{
	pthread_mutex_lock(&e->consume_lock);
	e->cb = cb;
	e->cb_arg = arg;
	/* the boot -> wall offset moves only when the wall clock is set:
	 * two clock reads per 10 ms are enough (none per event) */
	uint64_t now = wd_now_ns();
	if (!e->btw_ns || now - e->btw_ns >= 10000000ull) {
		e->boot_to_wall = boot_to_wall_now();
		e->btw_ns = now;
	}
	e->delivered = 0;
	e->records = 0;
	/* take the wake-up (wd_egress_events_fd is edge-triggered) before
	 * reading: one that comes after it is for records this drain may
	 * not see, and stays for the next poll */
	struct epoll_event pe;
	if (e->poll_ep >= 0)
		epoll_wait(e->poll_ep, &pe, 1, 0);
	int rc = e->rb ? (int)wd_ringbuf_consume(e->rb) : 0;
	if (e->records)
		__atomic_store_n(&e->last_read_ns, now, __ATOMIC_RELAXED);
	e->cb = NULL;
	e->cb_arg = NULL;
	int delivered = e->delivered;
	pthread_mutex_unlock(&e->consume_lock);
	return rc < 0 ? rc : delivered;
}

int wd_egress_wait_bound(struct wd_egress *e, int timeout_ms)
{
	uint64_t last = __atomic_load_n(&e->last_read_ns, __ATOMIC_RELAXED);
	if (timeout_ms != 0 && wd_now_ns() - last < WD_POLL_ACTIVE_NS &&
	    (timeout_ms < 0 || timeout_ms > WD_POLL_BOUND_MS))
		return WD_POLL_BOUND_MS;
	return timeout_ms;
}

int wd_egress_wait(struct wd_egress *e, int timeout_ms)
{
	int tmo = wd_egress_wait_bound(e, timeout_ms);
	struct epoll_event ev;
	if (e->poll_ep < 0) /* pinned, no call attached: nothing to wait for */
		return poll(NULL, 0, tmo) < 0 && errno != EINTR ? -errno : 0;
	int n = epoll_wait(e->poll_ep, &ev, 1, tmo);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n > 0;
}

int wd_egress_poll(struct wd_egress *e, int timeout_ms,
		   void (*cb)(const struct wd_event *ev, void *arg), void *arg)
{
	int w = wd_egress_wait(e, timeout_ms);
	if (w < 0)
		return w;
	/* a timeout too: records submitted without a wake-up are read here */
	return wd_egress_consume(e, cb, arg);
}

static int sum_counter(struct wd_egress *e, uint32_t idx, uint64_t *out)
{
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	/* read by the loss probes (every alerter loop, scrape and events
	 * line): no allocation on machines of up to 256 CPUs */
	uint64_t small[256];
	uint64_t *v = ncpu <= (int)WD_ARRAY_SIZE(small)
			  ? small
			  : wd_calloc(ncpu, sizeof(*v));
	int rc = 0;
	if (bpf_map_lookup_elem(e->loss_fd, &idx, v))
		rc = -errno;
	uint64_t s = 0;
	for (int i = 0; i < ncpu && !rc; i++)
		s += v[i];
	if (v != small)
		free(v);
	*out = s;
	return rc;
}

int wd_egress_loss(struct wd_egress *e, struct wd_egress_loss *out)
{
	out->ringbuf = 0;
	int rc = sum_counter(e, WD_LOSS_RINGBUF, &out->ringbuf);
	out->invalid = __atomic_load_n(&e->invalid, __ATOMIC_RELAXED);
	out->dropped = __atomic_load_n(&e->dropped, __ATOMIC_RELAXED);
	return rc;
}

int wd_egress_lost(struct wd_egress *e, uint64_t *lost)
{
	struct wd_egress_loss l;
	int rc = wd_egress_loss(e, &l);
	*lost = l.ringbuf + l.invalid + l.dropped;
	return rc;
}

void wd_egress_count_dropped(struct wd_egress *e)
{
	__atomic_add_fetch(&e->dropped, 1, __ATOMIC_RELAXED);
}

int wd_egress_policy_misses(struct wd_egress *e, uint64_t *misses)
{
	return sum_counter(e, WD_LOSS_POLICY_MISS, misses);
}
