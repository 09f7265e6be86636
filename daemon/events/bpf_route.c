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

/* arg: the egress object, which counts a record no live call owns as
 * lost. */
static void on_bpf(const struct wd_event *ev, void *arg)
{
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
		wd_egress_count_dropped(arg);
		wd_debug("bpf event of cgroup %llu: no live call",
			 (unsigned long long)ev->cgroup_id);
	}
	pthread_mutex_unlock(&routes_mu);
}

int wd_bpf_route_drain(struct wd_egress *eg, struct wd_bpf_route *rt,
		       void (*cb)(const struct wd_event *ev, void *arg),
		       void *arg)
{
	int rc = wd_egress_consume(eg, on_bpf, eg);
	pthread_mutex_lock(&rt->mu);
	struct wd_event *v = rt->v;
	int n = rt->n;
	rt->v = NULL;
	rt->n = rt->cap = 0;
	pthread_mutex_unlock(&rt->mu);
	for (int i = 0; i < n; i++)
		cb(&v[i], arg);
	free(v);
	return rc < 0 ? rc : n;
}
