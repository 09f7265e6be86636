#include "events/bpf_route.h"

#include <stdlib.h>

#include "common/log.h"
#include "common/util.h"
#include "enforce/egress.h"

static pthread_mutex_t routes_mu = PTHREAD_MUTEX_INITIALIZER;
static struct wd_bpf_route *routes;

void wd_bpf_route_add(struct wd_bpf_route *rt, uint64_t cgid)
{
	*rt = (struct wd_bpf_route){.cgid = cgid};
	pthread_mutex_init(&rt->mu, NULL);
	pthread_mutex_lock(&routes_mu);
	rt->next = routes;
	routes = rt;
	pthread_mutex_unlock(&routes_mu);
}

void wd_bpf_route_del(struct wd_bpf_route *rt)
{
	pthread_mutex_lock(&routes_mu);
	for (struct wd_bpf_route **p = &routes; *p; p = &(*p)->next)
		if (*p == rt) {
			*p = rt->next;
			break;
		}
	pthread_mutex_unlock(&routes_mu);
	free(rt->v);
	rt->v = NULL;
	rt->n = rt->cap = 0;
	pthread_mutex_destroy(&rt->mu);
}

/* One drain: the draining call's own records go straight to its callback
 * (in ring order, no copy into its mailbox: at a flood, a drain's records
 * copied into a growing mailbox and read back were the consumer's largest
 * cost); every other call's into that call's mailbox. */
struct drain {
	struct wd_egress *eg; /* counts a record no live call owns as lost */
	struct wd_bpf_route *self;
	void (*cb)(const struct wd_event *ev, void *arg);
	void *arg;
	int n;	      /* self's events handed to cb */
	bool flushed; /* self's mailbox handed over in this consume */
};

/* Hand over what other drains left in rt's mailbox. */
static void flush_mail(struct drain *d)
{
	struct wd_bpf_route *rt = d->self;
	pthread_mutex_lock(&rt->mu);
	struct wd_event *v = rt->v;
	int n = rt->n;
	rt->v = NULL;
	rt->n = rt->cap = 0;
	pthread_mutex_unlock(&rt->mu);
	for (int i = 0; i < n; i++)
		d->cb(&v[i], d->arg);
	d->n += n;
	free(v);
}

static void on_bpf(const struct wd_event *ev, void *arg)
{
	struct drain *d = arg;
	if (ev->cgroup_id == d->self->cgid) {
		/* The consume lock is held: no other drain adds to the
		 * mailbox now, and what it holds is older than this record
		 * (routed by an earlier drain): it goes first. */
		if (!d->flushed) {
			d->flushed = true;
			flush_mail(d);
		}
		d->cb(ev, d->arg);
		d->n++;
		return;
	}
	pthread_mutex_lock(&routes_mu);
	struct wd_bpf_route *rt = routes;
	while (rt && rt->cgid != ev->cgroup_id)
		rt = rt->next;
	if (rt) {
		pthread_mutex_lock(&rt->mu);
		if (rt->n == rt->cap) {
			rt->cap = rt->cap ? 2 * rt->cap : 16;
			rt->v = wd_realloc(rt->v, rt->cap * sizeof(*rt->v));
		}
		rt->v[rt->n++] = *ev;
		pthread_mutex_unlock(&rt->mu);
	} else {
		wd_egress_count_dropped(d->eg);
		wd_debug("bpf event of cgroup %llu: no live call",
			 (unsigned long long)ev->cgroup_id);
	}
	pthread_mutex_unlock(&routes_mu);
}

int wd_bpf_route_drain(struct wd_egress *eg, struct wd_bpf_route *rt,
		       void (*cb)(const struct wd_event *ev, void *arg),
		       void *arg)
{
	struct drain d = {.eg = eg, .self = rt, .cb = cb, .arg = arg};
	int rc = wd_egress_consume(eg, on_bpf, &d);
	/* the mail routed before this consume (when it read none of rt's
	 * records), or by drains after it: newer than what went to cb */
	flush_mail(&d);
	return rc < 0 ? rc : d.n;
}
