/* wardend's consumer of the BPF event ring buffer (wd_events of
 * bpf/lib/maps.h, read through enforce/egress.h), routing each record to
 * the tool call whose cgroup made it.
 *
 * The ring buffer is shared by every call of the process, and any call's
 * supervisor may drain it (sandbox/native_supervise.c): each record of
 * another call goes to the mailbox of the call whose cgroup made it, and
 * each call takes its own mail on its own thread (so a call's event
 * callback runs on its supervising thread); the draining call's own
 * records go straight to its callback, in ring order, after any older
 * mail (its callback runs under the egress object's consume lock, so it
 * must not drain or route itself). The consume lock is held across the
 * routing: once a call's last drain returns, every record its processes
 * made has been handed to it or is in its mailbox. A record no route owns is
 * counted lost (wd_egress_count_dropped: wd_egress_loss's `dropped`), never
 * silent; none should exist, since a call is routed before anything runs
 * in its cgroup and unrouted after its last drain.
 *
 * tests/bench/bench_events.c measures this same code. Thread-safe.
 */
#ifndef WD_EVENTS_BPF_ROUTE_H
#define WD_EVENTS_BPF_ROUTE_H

#include <pthread.h>
#include <stdint.h>

#include "events/event.h"

struct wd_egress;

/* One call's mailbox; owned by the caller, registered while the call
 * lives. */
struct wd_bpf_route {
	uint64_t cgid;
	pthread_mutex_t mu;
	struct wd_event *v;
	int n, cap;
	struct wd_bpf_route *next;
};

/* Route the records of cgroup `cgid` to rt (before anything runs in the
 * cgroup). */
void wd_bpf_route_add(struct wd_bpf_route *rt, uint64_t cgid);
/* Stop routing to rt (after its last drain) and free its mail. */
void wd_bpf_route_del(struct wd_bpf_route *rt);
/* Drain the shared ring buffer (every route's records into its mailbox),
 * then hand rt's mail to cb in order, on the calling thread. Returns the
 * number of rt's events handed to cb, or -errno if the drain failed (the
 * mail already routed is handed over all the same). */
int wd_bpf_route_drain(struct wd_egress *eg, struct wd_bpf_route *rt,
		       void (*cb)(const struct wd_event *ev, void *arg),
		       void *arg);

#endif
