/* Tier 3's tc programs (t3net.h). */
#include "enforce/t3net.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/log.h"
#include "t3net.skel.h"

struct wd_t3net {
	struct t3net_bpf *skel;
	int links_fd, in_fd, out_fd;
};

static int load(struct wd_egress *e, struct wd_t3net **out, struct wd_err *err)
{
	struct wd_egress_map_fds fds;
	wd_egress_map_fds(e, &fds);
	struct t3net_bpf *s = t3net_bpf__open();
	if (!s)
		return wd_err_set(err, -errno,
				  "tier 3 egress: open bpf/t3net: %s",
				  strerror(errno));
	/* the pinned egress instance files records per call (maps.h) */
	s->rodata->wd_call_rings_on = fds.call_rings_on;
	int rc = 0;
	if ((rc = bpf_map__reuse_fd(s->maps.wd_policy, fds.policy)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_egress_rules,
				    fds.egress_rules)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_events, fds.events)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_loss, fds.loss)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_call_rings, fds.call_rings)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_ring_slot, fds.ring_slot))) {
		t3net_bpf__destroy(s);
		rc = rc < 0 ? rc : -EINVAL;
		return wd_err_set(err, rc,
				  "tier 3 egress: the egress object's maps: %s",
				  strerror(-rc));
	}
	if ((rc = t3net_bpf__load(s)) != 0) {
		t3net_bpf__destroy(s);
		rc = rc < 0 ? rc : -EINVAL;
		return wd_err_set(err, rc,
				  "tier 3 egress: load bpf/t3net (tc): %s",
				  strerror(-rc));
	}
	struct wd_t3net *t = wd_calloc(1, sizeof(*t));
	t->skel = s;
	t->links_fd = bpf_map__fd(s->maps.wd_t3_links);
	t->in_fd = bpf_program__fd(s->progs.wd_t3_from_sandbox);
	t->out_fd = bpf_program__fd(s->progs.wd_t3_to_sandbox);
	*out = t;
	return 0;
}

struct wd_t3net *wd_t3net_shared(struct wd_egress *e, struct wd_err *err)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static struct wd_t3net *shared;
	static struct wd_egress *shared_e;
	pthread_mutex_lock(&mu);
	if (shared && shared_e != e) {
		/* one egress instance per process (wd_egress_shared) */
		pthread_mutex_unlock(&mu);
		wd_err_set(err, -EBUSY,
			   "tier 3 egress: loaded over another egress object");
		return NULL;
	}
	if (!shared && load(e, &shared, err) == 0)
		shared_e = e;
	struct wd_t3net *t = shared;
	pthread_mutex_unlock(&mu);
	return t;
}

static int tc_attach(int ifindex, enum bpf_tc_attach_point at, int prog_fd)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
			    .attach_point = at);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, o, .prog_fd = prog_fd, .handle = 1,
			    .priority = 1);
	int rc = bpf_tc_attach(&hook, &o);
	return rc < 0 ? rc : 0;
}

int wd_t3net_attach(struct wd_t3net *t, int ifindex, const struct wd_t3_link *l,
		    struct wd_err *err)
{
	uint32_t k = (uint32_t)ifindex;
	if (bpf_map_update_elem(t->links_fd, &k, l, BPF_NOEXIST))
		return wd_err_set(err, -errno,
				  "tier 3 egress: map 'wd_t3_links': link %d: "
				  "%s",
				  ifindex, strerror(errno));
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
	int rc = bpf_tc_hook_create(&hook);
	const char *what = "clsact qdisc";
	if (rc == -EEXIST)
		rc = 0;
	if (!rc) {
		what = "ingress program";
		rc = tc_attach(ifindex, BPF_TC_INGRESS, t->in_fd);
	}
	if (!rc) {
		what = "egress program";
		rc = tc_attach(ifindex, BPF_TC_EGRESS, t->out_fd);
	}
	if (rc) {
		/* the ingress program alone still drops what is not
		 * allowed; the call is refused all the same */
		bpf_map_delete_elem(t->links_fd, &k);
		return wd_err_set(err, rc,
				  "tier 3 egress: cannot attach the tc %s to "
				  "link %d: %s; refused (no host-side filter)",
				  what, ifindex, strerror(-rc));
	}
	return 0;
}

void wd_t3net_detach(struct wd_t3net *t, int ifindex)
{
	if (!t)
		return;
	uint32_t k = (uint32_t)ifindex;
	bpf_map_delete_elem(t->links_fd, &k);
}
