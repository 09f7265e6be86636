/* Tier 3 with a non-empty network.allow: the sandbox's link, the host-side
 * programs that hold it to the call's allow map, and the call's resolver.
 *
 * gVisor runs with --network=sandbox in a network namespace of the call's
 * own whose only link is a veth pair (sandbox/t3link.h). gVisor's
 * configuration is not what enforces: every frame its netstack writes
 * crosses the host end, where bpf/t3net.bpf.c judges it against the same
 * allow map (wd_egress_rules under the call's cgroup id) tiers 1-2 use,
 * drops what is not allowed and records it on the same ring. What the
 * link reaches: the node's own addresses always; beyond the node only
 * where the node already forwards IPv4 (sandbox/t3beyond.h), by
 * forwarding from the call's host end and source NAT, turned on when an
 * IP rule or a name's answer lies beyond the node. A rule wholly beyond a
 * node that does not forward is refused at call start, such an answer
 * withheld and recorded. Names: the sandbox's resolv.conf names gw, where
 * the call's resolver listens (enforce/resolver.h, sockets bound to the
 * link); every other packet to port 53 or 853 is dropped. Its answers are
 * pinned in the allow map for their TTL, as in tiers 1-2. The node's
 * loopback is gw as the sandbox sees it (bpf/t3net.bpf.c says why): an
 * answer 127.0.0.1 is told as gw, pinned as 127.0.0.1; an IP rule
 * 127.0.0.1:P is reached at gw:P and judged as 127.0.0.1:P. Any setup
 * step failing refuses the call (fail closed): nothing runs with a link
 * that is not filtered.
 */
#include "sandbox/common.h"
#include "sandbox/gvisor.h"
#include "sandbox/gvisor_int.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>

#include "common/log.h"
#include "enforce/egress.h"
#include "enforce/resolver.h"
#include "enforce/t3net.h"
#include "events/bpf_route.h"
#include "sandbox/t3beyond.h"
#include "sandbox/t3link.h"

struct wd_t3_net {
	struct wd_t3link link;
	struct wd_egress *eg;
	struct wd_t3net *tn;
	uint64_t cgid;
	bool filed, attached, routed;
	struct wd_bpf_route route;
	struct wd_resolver *resolver;
	/* forwarding and source NAT on (t3beyond.h): at start for an IP
	 * rule beyond the node, at the first answer beyond it for names
	 * (the resolver's thread), under mu */
	pthread_mutex_t mu;
	bool beyond;
};

static bool v4_of(const uint8_t a[16], uint32_t *out)
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};
	if (memcmp(a, pre, 12))
		return false;
	memcpy(out, a + 12, 4);
	return true;
}

/* An address of this node (on any interface) other than a tier-3 link's
 * own gw (another call's). */
static bool node_local(uint32_t a_be)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0)
		return false;
	bool found = false;
	for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next)
		found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
			    a_be &&
			strncmp(i->ifa_name, "w3h", 3);
	freeifaddrs(ifa);
	return found;
}

/* A rule's range holds `a` (network order). */
static bool rule_holds(const struct wd_net_rule *r, uint32_t a_be)
{
	uint8_t m[16] = {0};
	m[10] = m[11] = 0xff;
	memcpy(m + 12, &a_be, 4);
	for (int i = 0; i < 16; i++) {
		int bits = r->prefix - i * 8;
		uint8_t mask = bits >= 8   ? 0xff
			       : bits <= 0 ? 0
					   : (uint8_t)(0xff << (8 - bits));
		if ((m[i] & mask) != (r->addr[i] & mask))
			return false;
	}
	return true;
}

/* A rule's range holds an address other than 127.0.0.1 and this node's:
 * what it allows lies (partly) beyond the node. */
static bool rule_beyond(const struct wd_net_rule *r, uint32_t a_be)
{
	if (r->prefix < 128)
		return true;
	return a_be != htonl(INADDR_LOOPBACK) && !node_local(a_be);
}

/* An IP rule tier 3 can hold as written: IPv4; holding 127.0.0.1 or an
 * address of this node, or beyond it where the node routes there
 * (t3beyond.h). *beyond: the call should route beyond the node for it
 * (the node can; a range that also holds the node's own addresses is
 * held without routing where the node cannot). */
static int check_rule(const struct wd_net_rule *r, bool *beyond,
		      struct wd_err *err)
{
	uint32_t a;
	*beyond = false;
	if (r->needs_resolve)
		return 0;
	if (!v4_of(r->addr, &a) || r->prefix < 96)
		return wd_err_set(err, -ENOTSUP,
				  "network.allow '%s': tier 3's link carries "
				  "IPv4 only",
				  r->text);
	bool local = rule_holds(r, htonl(INADDR_LOOPBACK));
	struct ifaddrs *ifa = NULL;
	if (!local && getifaddrs(&ifa) == 0) {
		for (struct ifaddrs *i = ifa; i && !local; i = i->ifa_next)
			local =
			    i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			    strncmp(i->ifa_name, "w3h", 3) &&
			    rule_holds(r, ((struct sockaddr_in *)i->ifa_addr)
					      ->sin_addr.s_addr);
		freeifaddrs(ifa);
	}
	if (!rule_beyond(r, a))
		return 0;
	char why[320];
	if (wd_t3_beyond_can(a, why, sizeof(why)) == 0) {
		*beyond = true;
		return 0;
	}
	if (local)
		return 0; /* the node's own addresses in it only */
	return wd_err_set(err, -ENOTSUP,
			  "network.allow '%s': beyond this node, and %s: tier "
			  "3 reaches beyond the node only by forwarding from "
			  "the call's link where the node already forwards "
			  "(the replies arrive on the device of its route, and "
			  "IPv4 forwards by the device a packet arrives on); "
			  "warden never turns forwarding on for the node",
			  r->text, why);
}

/* wd_t3_net_check, and whether some IP rule routes beyond the node. */
static int check_rules(const struct wd_manifest *m, bool *beyond,
		       struct wd_err *err)
{
	*beyond = false;
	for (int i = 0; i < m->n_net_allow; i++) {
		bool b;
		int r = check_rule(&m->net_allow[i], &b, err);
		if (r < 0)
			return r;
		*beyond |= b;
	}
	return 0;
}

int wd_t3_net_check(const struct wd_manifest *m, struct wd_err *err)
{
	bool beyond;
	return check_rules(m, &beyond, err);
}

/* Forwarding and source NAT for the call, once: 0 or -errno. */
static int beyond_on(struct wd_t3_net *n, struct wd_err *err)
{
	int r = 0;
	pthread_mutex_lock(&n->mu);
	if (!n->beyond && (r = wd_t3_beyond_on(&n->link, err)) == 0)
		n->beyond = true;
	pthread_mutex_unlock(&n->mu);
	return r;
}

static int pin(void *arg, const uint8_t addr[16], uint16_t port, bool add)
{
	struct wd_t3_net *n = arg;
	return wd_egress_answer(n->eg, n->cgid, addr, port, add);
}

/* resolver.h `shown`: what the sandbox reaches an answer at. */
static int shown(void *arg, const uint8_t addr[16], uint8_t out[16], char *why,
		 size_t why_len)
{
	struct wd_t3_net *n = arg;
	uint32_t a;
	if (!v4_of(addr, &a))
		return 1; /* AAAA: the link carries IPv4 only */
	memcpy(out, addr, 16);
	if (a == htonl(INADDR_LOOPBACK)) {
		memcpy(out + 12, &n->link.gw, 4);
		return 0;
	}
	if (node_local(a))
		return 0;
	/* beyond the node: given (and pinned) where the node routes it,
	 * through the call's forwarding and source NAT */
	char t[INET_ADDRSTRLEN], cond[320];
	inet_ntop(AF_INET, &a, t, sizeof(t));
	int r = wd_t3_beyond_can(a, cond, sizeof(cond));
	if (r == 0) {
		struct wd_err e = {0};
		if ((r = beyond_on(n, &e)) == 0)
			return 0;
		snprintf(cond, sizeof(cond), "%s", e.msg);
	}
	snprintf(why, why_len, "answer %s is beyond the node: %s", t, cond);
	return -EHOSTUNREACH;
}

int wd_t3_net_start(struct wd_t3 *s, const struct wd_manifest *m,
		    struct wd_err *err)
{
	int r;
	if (!s->cg.v2_id)
		return wd_err_set(err, -ENOTSUP,
				  "network.allow: tier 3 needs the call's "
				  "cgroup v2 leaf (its allow map's key)");
	struct wd_t3_net *n = wd_calloc(1, sizeof(*n));
	n->link.netns_fd = -1;
	pthread_mutex_init(&n->mu, NULL);
	s->net = n;
	n->cgid = s->cg.v2_id;
	bool beyond;
	if ((r = check_rules(m, &beyond, err)) < 0 ||
	    (r = wd_t3link_make(&n->link, err)) < 0)
		return r;
	if (!(n->eg = wd_egress_shared(err)) ||
	    !(n->tn = wd_t3net_shared(n->eg, err)))
		return err->code ? err->code : -EINVAL;
	wd_bpf_route_add(&n->route, n->cgid);
	n->routed = true;
	/* the policy and rules under the call's id, no cgroup program:
	 * gVisor's netstack makes no host socket of the call's */
	if ((r = wd_egress_attach(n->eg, -1, n->cgid, m->net_allow,
				  m->n_net_allow, false, 0, err)) < 0)
		return r;
	n->filed = true;
	struct wd_t3_link tl = {.cgid = n->cgid,
				.sbx = n->link.sbx,
				.gw = n->link.gw,
				.uid = s->uid};
	if ((r = wd_t3net_attach(n->tn, n->link.host_ifindex, &tl, err)) < 0)
		return r;
	n->attached = true;
	/* an IP rule beyond the node: routed from the start, the filter
	 * attached first (nothing is forwarded that it did not judge) */
	if (beyond && (r = beyond_on(n, err)) < 0)
		return r;
	/* the resolver is gw:53 whether or not a rule names a host: with
	 * none, every name is NXDOMAIN and recorded */
	struct wd_resolver_opts ro = {.rules = m->net_allow,
				      .n = m->n_net_allow,
				      .priv = m->net_private,
				      .npriv = m->n_net_private,
				      .pin = pin,
				      .pin_arg = n,
				      .cgroup_id = n->cgid,
				      .uid = s->uid,
				      .dev = n->link.host_name,
				      .dev_addr = n->link.gw,
				      .dev_peer = n->link.sbx,
				      .shown = shown,
				      .shown_arg = n};
	wd_resolver_upstream(&ro.up);
	if ((r = wd_resolver_start(&ro, &n->resolver, err)) < 0)
		return r;
	char gw[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &n->link.gw, gw, sizeof(gw));
	cleanup_free char *rc = wd_asprintf("nameserver %s\n", gw);
	cleanup_free char *p = wd_asprintf("%s/resolv.conf", s->dir);
	if ((r = wd_write_file(p, rc, strlen(rc), 0644)) < 0)
		return wd_err_set(err, r, "tier 3: '%s': %s", p, strerror(-r));
	return 0;
}

const char *wd_t3_net_ns_path(const struct wd_t3 *s)
{
	return s->net ? s->net->link.ns_path : NULL;
}

static void on_event(struct wd_t3 *s, const struct wd_call *call,
		     struct wd_result *res, struct wd_event *e)
{
	wd_strlcpy(e->call_id, res->call_id, sizeof(e->call_id));
	wd_sb_name_target(s->net->resolver, e);
	wd_result_add_denial(res, e);
	if (call && call->on_event)
		call->on_event(e, call->on_event_arg);
}

struct drain_ctx {
	struct wd_t3 *s;
	const struct wd_call *call;
	struct wd_result *res;
};

static void on_bpf(const struct wd_event *ev, void *arg)
{
	struct drain_ctx *d = arg;
	struct wd_event e = *ev;
	on_event(d->s, d->call, d->res, &e);
}

int wd_t3_net_fds(const struct wd_t3 *s, struct pollfd *p)
{
	const struct wd_t3_net *n = s->net;
	if (!n || !n->filed)
		return 0;
	int k = 0;
	p[k++] = (struct pollfd){wd_egress_events_fd(n->eg), POLLIN, 0};
	if (n->resolver)
		p[k++] = (struct pollfd){wd_resolver_events_fd(n->resolver),
					 POLLIN, 0};
	return k;
}

bool wd_t3_net_failed(const struct wd_t3 *s, char *msg, size_t n)
{
	return s->net && wd_resolver_failed(s->net->resolver, msg, n);
}

void wd_t3_net_drain(struct wd_t3 *s, const struct wd_call *call,
		     struct wd_result *res)
{
	struct wd_t3_net *n = s->net;
	if (!n || !n->filed)
		return;
	struct drain_ctx d = {s, call, res};
	wd_bpf_route_drain(n->eg, &n->route, on_bpf, &d);
	if (n->resolver) {
		struct wd_event ev[32];
		int k;
		while ((k = wd_resolver_take(n->resolver, ev, 32)) > 0)
			for (int i = 0; i < k; i++)
				on_event(s, call, res, &ev[i]);
		res->lost_denials += (int)wd_resolver_take_dropped(n->resolver);
	}
}

/* Whether the call was routed beyond the node: set at start, and again
 * at its end (a name's answer may have turned it on meanwhile). */
static void beyond_enf(struct wd_t3_net *n, struct wd_result *res)
{
	pthread_mutex_lock(&n->mu);
	bool beyond = n->beyond;
	pthread_mutex_unlock(&n->mu);
	if (beyond)
		wd_result_enf(res, "network_beyond",
			      "forwarded from %s, source NAT (nftables table "
			      "warden_%s)",
			      n->link.host_name, n->link.host_name);
	else
		wd_result_enf(res, "network_beyond",
			      "not routed: the node's own addresses only");
}

void wd_t3_net_collect(struct wd_t3 *s, const struct wd_call *call,
		       struct wd_result *res)
{
	struct wd_t3_net *n = s->net;
	if (!n || !n->filed)
		return;
	wd_t3_net_drain(s, call, res);
	beyond_enf(n, res);
	/* the sandbox is gone: the kernel's count of its drops is final */
	if (!wd_egress_call_counts(n->eg, n->cgid, &res->kernel_counts[0],
				   &res->kernel_counts[1]))
		res->has_kernel_counts = true;
}

void wd_t3_net_stop(struct wd_t3 *s)
{
	struct wd_t3_net *n = s->net;
	if (!n)
		return;
	wd_resolver_stop(n->resolver);
	/* the resolver's thread is gone: nothing turns it on any more */
	if (n->beyond)
		wd_t3_beyond_off(&n->link);
	int ifindex = n->link.host_ifindex;
	/* the pair goes with the netns, which the kernel frees in the
	 * background once we drop it (no process of the sandbox is left):
	 * deleting it here costs the call ~15-20 ms of RCU waits. Until then
	 * the host end keeps its programs and, with its entry removed below,
	 * they drop every frame. */
	wd_t3link_release(&n->link);
	if (n->attached)
		wd_t3net_detach(n->tn, ifindex);
	if (n->filed)
		wd_egress_detach(n->eg, n->cgid);
	if (n->routed)
		wd_bpf_route_del(&n->route);
	pthread_mutex_destroy(&n->mu);
	free(n);
	s->net = NULL;
}

void wd_t3_net_enforcement(const struct wd_t3 *s, struct wd_result *res)
{
	struct wd_t3_net *n = s->net;
	if (!n) {
		wd_result_enf(res, "network",
			      "none (--network=none, loopback only)");
		return;
	}
	char gw[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &n->link.gw, gw, sizeof(gw));
	wd_result_enf(res, "network",
		      "netns + veth %s: tc BPF allow-list (cgroup %llu); "
		      "resolver %s:53",
		      n->link.host_name, (unsigned long long)n->cgid, gw);
	beyond_enf(n, res);
}
