#include "enforce/egress.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

#include "common/log.h"
#include "egress.skel.h"
#include "lib/events.h"
#include "lib/policy.h"
#include "egress_unix.h"
#include "enforce/egress_int.h"
#include "enforce/lsm.h"

/* Open and load the BPF object into e->skel (a previous one destroyed
 * first), its ring buffer `ring` bytes, with or without the unix programs.
 * cgroup/connect_unix and sendmsg_unix: libbpf 1.1 names no section for
 * them, so they are declared as connect4/sendmsg4 and given their attach
 * type here. */
int wd_egress_load_skel(struct wd_egress *e, uint32_t ring, bool with_unix,
			bool call_rings, struct wd_err *err)
{
	egress_bpf__destroy(e->skel);
	e->skel = egress_bpf__open();
	if (!e->skel) {
		int rc = -errno;
		return wd_err_set(err, rc, "egress: open BPF object: %s",
				  strerror(-rc));
	}
	e->skel->rodata->wd_call_rings_on = call_rings;
	int rc = bpf_map__set_max_entries(e->skel->maps.wd_events, ring);
	if (rc)
		return wd_err_set(err, rc, "map 'wd_events': set size %u: %s",
				  ring, strerror(-rc));
	struct bpf_program *u[4] = {e->skel->progs.wd_connect_unix,
				    e->skel->progs.wd_sendmsg_unix,
				    e->skel->progs.wd_keep_connect_unix,
				    e->skel->progs.wd_keep_sendmsg_unix};
	for (int i = 0; i < 4; i++)
		bpf_program__set_expected_attach_type(
		    u[i],
		    i % 2 ? WD_ATTACH_UNIX_SENDMSG : WD_ATTACH_UNIX_CONNECT);
	for (int i = 0; !with_unix && i < 4; i++)
		bpf_program__set_autoload(u[i], false);
	rc = egress_bpf__load(e->skel);
	if (rc)
		return wd_err_set(err, rc,
				  "egress: load cgroup sock_addr programs: %s "
				  "(needs root and CONFIG_CGROUP_BPF)",
				  strerror(-rc));
	return 0;
}

int wd_egress_open_opts(struct wd_egress **out, const struct wd_egress_opts *o,
			struct wd_err *err)
{
	int rc;
	uint32_t ring =
	    o && o->ring_bytes ? o->ring_bytes : WD_EGRESS_RING_DEFAULT;

	*out = NULL;
	if ((rc = wd_egress_ring_check(ring, err)))
		return rc;
	wd_log_route_libbpf();
	struct wd_egress *e = wd_egress_new();
	/* cgroup/connect_unix and sendmsg_unix (6.7): a kernel without them
	 * refuses the load: load again without them (warden status says
	 * so), but only then */
	rc = wd_egress_load_skel(e, ring, true, false, err);
	e->unix_ok = !rc;
	if (rc && wd_egress_unix_hook_missing())
		rc = wd_egress_load_skel(e, ring, false, false, err);
	if (rc)
		goto fail;
	wd_egress_fds_from_skel(e);
	if ((rc = wd_egress_open_ring(e, e->events_fd, err)) < 0)
		goto fail;
	*out = e;
	return 0;
fail:
	wd_egress_close(e);
	return rc;
}

struct wd_egress *wd_egress_new(void)
{
	struct wd_egress *e = wd_calloc(1, sizeof(*e));
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->consume_lock, NULL);
	e->poll_ep = -1;
	e->pin_dfd = -1;
	int *fds[] = {&e->policy_fd,   &e->rules_fd, &e->unix_fd, &e->loss_fd,
		      &e->events_fd,   &e->rings_fd, &e->slot_fd, &e->owner_fd,
		      &e->own_ring_fd, &e->own_slot};
	for (size_t i = 0; i < WD_ARRAY_SIZE(fds); i++)
		*fds[i] = -1;
	for (int i = 0; i < WD_EG_NPROG; i++)
		e->prog_fd[i] = -1;
	for (int i = 0; i < WD_EG_NKEEP; i++)
		e->keep_fd[i] = e->keep[i] = -1;
	return e;
}

int wd_egress_open_ring(struct wd_egress *e, int ring_fd, struct wd_err *err)
{
	int rc;
	e->rb = wd_ringbuf_new(ring_fd, wd_egress_on_sample, e);
	if (!e->rb) {
		rc = -errno;
		return wd_err_set(err, rc, "map 'wd_events': ring buffer: %s",
				  strerror(-rc));
	}
	/* Edge-triggered: wd_egress_poll returns on a new wake-up (or its
	 * timeout), not again and again while records keep coming. Level-
	 * triggered, a consumer keeping pace spun through epoll_wait + drain
	 * for every record or two (~1.1 us CPU per event at 600k/s) instead
	 * of draining batches once per WD_WAKE_GAP_NS. */
	struct epoll_event pe = {.events = EPOLLIN | EPOLLET};
	e->poll_ep = epoll_create1(EPOLL_CLOEXEC);
	if (e->poll_ep < 0 ||
	    epoll_ctl(e->poll_ep, EPOLL_CTL_ADD, ring_fd, &pe)) {
		rc = -errno;
		return wd_err_set(err, rc, "map 'wd_events': epoll: %s",
				  strerror(-rc));
	}
	return 0;
}

int wd_egress_open(struct wd_egress **out, struct wd_err *err)
{
	return wd_egress_open_opts(out, NULL, err);
}

int wd_egress_ring_check(uint64_t bytes, struct wd_err *err)
{
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		page = 4096;
	if (bytes < (uint64_t)page || bytes > WD_EGRESS_RING_MAX)
		return wd_err_set(err, -EINVAL,
				  "event ring size %llu bytes: must be between "
				  "the page size (%ld) and %u",
				  (unsigned long long)bytes, page,
				  WD_EGRESS_RING_MAX);
	if (bytes & (bytes - 1))
		return wd_err_set(err, -EINVAL,
				  "event ring size %llu bytes: the kernel "
				  "wants a power of two",
				  (unsigned long long)bytes);
	/* a power of two >= the page size (itself a power of two) is a
	 * multiple of it; said in case a page size ever is not */
	if (bytes % (uint64_t)page)
		return wd_err_set(err, -EINVAL,
				  "event ring size %llu bytes: the kernel "
				  "wants a multiple of the page size (%ld)",
				  (unsigned long long)bytes, page);
	return 0;
}

static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static struct wd_egress *shared;
static struct wd_egress_opts shared_opts;

int wd_egress_shared_set_opts(const struct wd_egress_opts *o,
			      struct wd_err *err)
{
	struct wd_egress_opts want = o ? *o : (struct wd_egress_opts){0};
	int rc = 0;
	if (want.ring_bytes &&
	    (rc = wd_egress_ring_check(want.ring_bytes, err)))
		return rc;
	pthread_mutex_lock(&shared_mu);
	if (shared && memcmp(&want, &shared_opts, sizeof(want)))
		rc = wd_err_set(err, -EBUSY,
				"egress: the shared instance is already open "
				"with other options");
	else
		shared_opts = want;
	pthread_mutex_unlock(&shared_mu);
	return rc;
}

uint32_t wd_egress_ring_size(struct wd_egress *e)
{
	/* pinned (a one-shot exec): its call's ring of the shared table */
	return e->skel ? bpf_map__max_entries(e->skel->maps.wd_events)
		       : WD_RING_PINNED;
}

uint32_t wd_egress_shared_ring_size(void)
{
	pthread_mutex_lock(&shared_mu);
	uint32_t r = shared		      ? wd_egress_ring_size(shared)
		     : shared_opts.ring_bytes ? shared_opts.ring_bytes
					      : WD_EGRESS_RING_DEFAULT;
	pthread_mutex_unlock(&shared_mu);
	return r;
}

static bool shared_pins;

void wd_egress_shared_use_pins(bool on)
{
	pthread_mutex_lock(&shared_mu);
	shared_pins = on;
	pthread_mutex_unlock(&shared_mu);
}

struct wd_egress *wd_egress_shared(struct wd_err *err)
{
	pthread_mutex_lock(&shared_mu);
	if (!shared && shared_pins)
		wd_egress_open_pinned(&shared, err);
	else if (!shared)
		wd_egress_open_opts(&shared, &shared_opts, err);
	struct wd_egress *e = shared;
	pthread_mutex_unlock(&shared_mu);
	return e;
}

struct wd_egress *wd_egress_shared_peek(void)
{
	pthread_mutex_lock(&shared_mu);
	struct wd_egress *e = shared;
	pthread_mutex_unlock(&shared_mu);
	return e;
}

static void key_for(struct wd_egress_key *k, uint64_t cgid, const uint8_t a[16],
		    int prefix, uint16_t port)
{
	memset(k, 0, sizeof(*k));
	k->prefixlen = WD_EGRESS_KEY_FIXED_BITS + prefix;
	k->cgid_lo = (uint32_t)cgid;
	k->cgid_hi = cgid >> 32;
	k->port = htons(port);
	/* zero the bits past the prefix so equal rules give equal keys */
	for (int i = 0; i < 16; i++) {
		int bits = prefix - i * 8;
		uint8_t mask = bits >= 8   ? 0xff
			       : bits <= 0 ? 0
					   : (uint8_t)(0xff << (8 - bits));
		k->addr[i] = a[i] & mask;
	}
}

static int add_key(struct wd_egress *e, struct wd_egress_call *c,
		   const struct wd_egress_key *k, uint32_t rule,
		   struct wd_err *err, const char *text)
{
	struct wd_egress_val v = {.rule = rule};
	for (int i = 0; i < c->n_keys; i++)
		if (!memcmp(&c->keys[i], k, sizeof(*k)))
			return 0; /* duplicate rule */
	if (bpf_map_update_elem(e->rules_fd, k, &v, BPF_ANY)) {
		int rc = -errno;
		return wd_err_set(err, rc,
				  "map 'wd_egress_rules': rule '%s': %s", text,
				  strerror(-rc));
	}
	c->keys = wd_realloc(c->keys, (c->n_keys + 1) * sizeof(*c->keys));
	c->keys[c->n_keys++] = *k;
	return 0;
}

/* A name (needs_resolve) adds nothing here: the call's resolver pins the
 * addresses it answers for it (wd_egress_answer), and only those. */
static int add_rule(struct wd_egress *e, struct wd_egress_call *c,
		    const struct wd_net_rule *r, uint32_t idx,
		    struct wd_err *err)
{
	struct wd_egress_key k;
	if (r->needs_resolve)
		return 0;
	if (r->prefix > 128)
		return wd_err_set(err, -EINVAL,
				  "egress: rule '%s': prefix %u > 128", r->text,
				  r->prefix);
	key_for(&k, c->cgid, r->addr, r->prefix, r->port);
	return add_key(e, c, &k, idx, err, r->text);
}

static struct wd_egress_call *call_of(struct wd_egress *e, uint64_t cgid)
{
	for (struct wd_egress_call *c = e->calls; c; c = c->next)
		if (c->cgid == cgid)
			return c;
	return NULL;
}

bool wd_egress_names_ok(struct wd_egress *e, const char **why)
{
	/* a resolver reached over a unix socket (nscd, systemd-resolved's
	 * varlink) would resolve any name for the tool: names need those
	 * sockets judged (cgroup/connect_unix, 6.7+, or the BPF LSM) */
	if (e && (e->unix_ok || wd_lsm_active()))
		return true;
	if (why)
		*why = !e ? "the BPF egress programs do not load"
			  : "unix sockets are not judged on this kernel "
			    "(cgroup/connect_unix needs Linux 6.7, or the "
			    "BPF LSM), so a tool could ask a resolver "
			    "listening on one (nscd, systemd-resolved) for "
			    "any name";
	return false;
}

int wd_egress_dns(struct wd_egress *e, uint64_t cgid, uint16_t port, bool v6,
		  struct wd_err *err)
{
	int rc = 0;
	pthread_mutex_lock(&e->lock);
	struct wd_egress_call *c = call_of(e, cgid);
	struct wd_call_policy pol;
	if (!c) {
		rc =
		    wd_err_set(err, -ENOENT, "egress: cgroup %llu not attached",
			       (unsigned long long)cgid);
		goto out;
	}
	const char *why = NULL;
	if (!wd_egress_names_ok(e, &why)) {
		rc = wd_err_set(err, -ENOTSUP,
				"network.allow names: cannot enforce: %s", why);
		goto out;
	}
	if (bpf_map_lookup_elem(e->policy_fd, &cgid, &pol)) {
		rc = -errno;
		wd_err_set(err, rc, "map 'wd_policy': cgroup %llu: %s",
			   (unsigned long long)cgid, strerror(-rc));
		goto out;
	}
	if ((rc = wd_egress_deny_resolver_sockets(e, c, err)) < 0)
		goto out;
	/* the programs that show the asked-for address back first: once
	 * the policy says DNS, connects to port 53 are redirected */
	for (int i = WD_EG_FIRST_DNS; i < WD_EG_NPROG; i++) {
		if (e->prog_fd[i] < 0) {
			rc = wd_err_set(err, -ENOTSUP,
					"egress: names in network.allow need "
					"program '%s', not loaded",
					wd_eg_prog_names[i]);
			goto out;
		}
		if (bpf_prog_attach(e->prog_fd[i], c->cgfd, wd_eg_prog_at[i],
				    BPF_F_ALLOW_MULTI)) {
			rc = -errno;
			wd_err_set(err, rc,
				   "egress: attach '%s' to cgroup %llu: %s",
				   wd_eg_prog_names[i],
				   (unsigned long long)cgid, strerror(-rc));
			goto out;
		}
		c->attached |= 1u << i;
	}
	pol.flags |= WD_POL_DNS | (v6 ? WD_POL_DNS6 : 0);
	pol.dns_port = htons(port);
	if (bpf_map_update_elem(e->policy_fd, &cgid, &pol, BPF_EXIST)) {
		rc = -errno;
		wd_err_set(err, rc, "map 'wd_policy': cgroup %llu: %s",
			   (unsigned long long)cgid, strerror(-rc));
	}
out:
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int wd_egress_dns_off(struct wd_egress *e, uint64_t cgid)
{
	int rc = 0;
	struct wd_call_policy pol;
	pthread_mutex_lock(&e->lock);
	if (!call_of(e, cgid)) {
		rc = -ENOENT;
	} else if (bpf_map_lookup_elem(e->policy_fd, &cgid, &pol)) {
		rc = -errno;
	} else {
		/* WD_POL_DNS stays: port 53 is judged by the allow-list,
		 * which holds no rule for it beside a name (policy check) */
		pol.dns_port = 0;
		if (bpf_map_update_elem(e->policy_fd, &cgid, &pol, BPF_EXIST))
			rc = -errno;
	}
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int wd_egress_answer(struct wd_egress *e, uint64_t cgid, const uint8_t addr[16],
		     uint16_t port, bool add)
{
	struct wd_egress_key k;
	int rc = 0;
	pthread_mutex_lock(&e->lock);
	struct wd_egress_call *c = call_of(e, cgid);
	if (!c) {
		rc = -ENOENT;
		goto out;
	}
	key_for(&k, cgid, addr, 128, port);
	/* a key a rule of the manifest put there stays the rule's */
	for (int i = 0; i < c->n_keys; i++)
		if (!memcmp(&c->keys[i], &k, sizeof(k)))
			goto out;
	int at = -1;
	for (int i = 0; i < c->n_dkeys && at < 0; i++)
		if (!memcmp(&c->dkeys[i], &k, sizeof(k)))
			at = i;
	if (add && at < 0) {
		struct wd_egress_val v = {.rule = UINT32_MAX};
		if (bpf_map_update_elem(e->rules_fd, &k, &v, BPF_ANY)) {
			rc = -errno;
			goto out;
		}
		c->dkeys =
		    wd_realloc(c->dkeys, (c->n_dkeys + 1) * sizeof(*c->dkeys));
		c->dkeys[c->n_dkeys++] = k;
	} else if (!add && at >= 0) {
		bpf_map_delete_elem(e->rules_fd, &k);
		c->dkeys[at] = c->dkeys[--c->n_dkeys];
	}
out:
	pthread_mutex_unlock(&e->lock);
	return rc;
}

const char *const wd_eg_prog_names[WD_EG_NPROG] = {
    "wd_connect4",     "wd_connect6",	  "wd_sendmsg4",     "wd_sendmsg6",
    "wd_connect_unix", "wd_sendmsg_unix", "wd_bind4",	     "wd_bind6",
    "wd_recvmsg4",     "wd_recvmsg6",	  "wd_getpeername4", "wd_getpeername6"};
const enum bpf_attach_type wd_eg_prog_at[WD_EG_NPROG] = {
    BPF_CGROUP_INET4_CONNECT,	  BPF_CGROUP_INET6_CONNECT,
    BPF_CGROUP_UDP4_SENDMSG,	  BPF_CGROUP_UDP6_SENDMSG,
    WD_ATTACH_UNIX_CONNECT,	  WD_ATTACH_UNIX_SENDMSG,
    BPF_CGROUP_INET4_BIND,	  BPF_CGROUP_INET6_BIND,
    BPF_CGROUP_UDP4_RECVMSG,	  BPF_CGROUP_UDP6_RECVMSG,
    BPF_CGROUP_INET4_GETPEERNAME, BPF_CGROUP_INET6_GETPEERNAME};
const char *const wd_eg_keep_names[WD_EG_NKEEP] = {
    "wd_keep_connect4",	    "wd_keep_connect6",	   "wd_keep_sendmsg4",
    "wd_keep_sendmsg6",	    "wd_keep_bind4",	   "wd_keep_bind6",
    "wd_keep_connect_unix", "wd_keep_sendmsg_unix"};
const enum bpf_attach_type wd_eg_keep_at[WD_EG_NKEEP] = {
    BPF_CGROUP_INET4_CONNECT, BPF_CGROUP_INET6_CONNECT, BPF_CGROUP_UDP4_SENDMSG,
    BPF_CGROUP_UDP6_SENDMSG,  BPF_CGROUP_INET4_BIND,	BPF_CGROUP_INET6_BIND,
    WD_ATTACH_UNIX_CONNECT,   WD_ATTACH_UNIX_SENDMSG};

/* The fds of a loaded skeleton (owned by it). */
void wd_egress_fds_from_skel(struct wd_egress *e)
{
	struct egress_bpf *k = e->skel;
	struct bpf_program *p[WD_EG_NPROG] = {
	    k->progs.wd_connect4,     k->progs.wd_connect6,
	    k->progs.wd_sendmsg4,     k->progs.wd_sendmsg6,
	    k->progs.wd_connect_unix, k->progs.wd_sendmsg_unix,
	    k->progs.wd_bind4,	      k->progs.wd_bind6,
	    k->progs.wd_recvmsg4,     k->progs.wd_recvmsg6,
	    k->progs.wd_getpeername4, k->progs.wd_getpeername6};
	struct bpf_program *q[WD_EG_NKEEP] = {
	    k->progs.wd_keep_connect4,	   k->progs.wd_keep_connect6,
	    k->progs.wd_keep_sendmsg4,	   k->progs.wd_keep_sendmsg6,
	    k->progs.wd_keep_bind4,	   k->progs.wd_keep_bind6,
	    k->progs.wd_keep_connect_unix, k->progs.wd_keep_sendmsg_unix};
	for (int i = 0; i < WD_EG_NPROG; i++)
		e->prog_fd[i] = (i == 4 || i == 5) && !e->unix_ok
				    ? -1
				    : bpf_program__fd(p[i]);
	for (int i = 0; i < WD_EG_NKEEP; i++)
		e->keep_fd[i] = i >= WD_EG_KEEP_UNIX && !e->unix_ok
				    ? -1
				    : bpf_program__fd(q[i]);
	e->policy_fd = bpf_map__fd(k->maps.wd_policy);
	e->rules_fd = bpf_map__fd(k->maps.wd_egress_rules);
	e->unix_fd = bpf_map__fd(k->maps.wd_unix_rules);
	e->loss_fd = bpf_map__fd(k->maps.wd_loss);
	e->events_fd = bpf_map__fd(k->maps.wd_events);
	e->rings_fd = bpf_map__fd(k->maps.wd_call_rings);
	e->slot_fd = bpf_map__fd(k->maps.wd_ring_slot);
}

static void call_free_maps(struct wd_egress *e, struct wd_egress_call *c,
			   bool cg_removed)
{
	for (int i = 0; i < WD_EG_NPROG && !cg_removed; i++)
		if (c->attached & (1u << i))
			/* fails only if the cgroup is gone, and so are they */
			bpf_prog_detach2(e->prog_fd[i], c->cgfd,
					 wd_eg_prog_at[i]);
	c->attached = 0;
	if (c->cgfd >= 0)
		close(c->cgfd);
	c->cgfd = -1;
	/* programs first: with them gone nothing reads the entries */
	for (int i = 0; i < c->n_keys; i++)
		bpf_map_delete_elem(e->rules_fd, &c->keys[i]);
	for (int i = 0; i < c->n_ukeys; i++)
		bpf_map_delete_elem(e->unix_fd, &c->ukeys[i]);
	for (int i = 0; i < c->n_dkeys; i++)
		bpf_map_delete_elem(e->rules_fd, &c->dkeys[i]);
	free(c->dkeys);
	c->dkeys = NULL;
	c->n_dkeys = 0;
	free(c->ukeys);
	c->ukeys = NULL;
	c->n_ukeys = 0;
	bpf_map_delete_elem(e->policy_fd, &c->cgid);
	if (e->pinned)
		wd_egress_pin_release(e, c->cgid);
	free(c->keys);
	c->keys = NULL;
	c->n_keys = 0;
}

int wd_egress_attach(struct wd_egress *e, int cgroup_fd, uint64_t cgid,
		     const struct wd_net_rule *rules, int n, bool audit,
		     uint64_t families_mask, struct wd_err *err)
{
	int rc = 0;
	if (!e || cgroup_fd < -1 || n < 0 || (n && !rules))
		return wd_err_set(err, -EINVAL, "egress: bad arguments");
	pthread_mutex_lock(&e->lock);
	for (struct wd_egress_call *c = e->calls; c; c = c->next)
		if (c->cgid == cgid) {
			pthread_mutex_unlock(&e->lock);
			return wd_err_set(
			    err, -EEXIST,
			    "egress: cgroup %llu already attached",
			    (unsigned long long)cgid);
		}
	struct wd_egress_call *c = wd_calloc(1, sizeof(*c));
	c->cgid = cgid;
	c->cgfd = -1;
	if (e->pinned && e->calls) {
		pthread_mutex_unlock(&e->lock);
		free(c);
		/* one ring, one reader: a second call would share it */
		return wd_err_set(err, -EBUSY,
				  "egress: the pinned instance holds one call "
				  "at a time");
	}
	if (e->pinned) {
		/* the maps outlive processes: whatever an earlier holder of
		 * this id left (a crashed caller) goes before anything of
		 * ours is written, and the call's records go to our ring */
		wd_egress_pin_purge(e, cgid);
		if ((rc = wd_egress_pin_claim(e, cgid, err)) < 0)
			goto fail;
	}
	for (int i = 0; i < n && !rc; i++)
		rc = add_rule(e, c, &rules[i], (uint32_t)i, err);
	if (rc)
		goto fail;
	uint32_t kinds = 0; /* the trie lookups the programs make */
	for (int i = 0; i < n; i++)
		kinds |= rules[i].needs_resolve
			     ? WD_POL_PORT_RULES | WD_POL_ANYPORT_RULES
			 : rules[i].port ? WD_POL_PORT_RULES
					 : WD_POL_ANYPORT_RULES;
	struct wd_call_policy pol = {
	    .flags = WD_POL_EGRESS | (audit ? WD_POL_AUDIT : 0) |
		     (families_mask ? WD_POL_FAMILIES : 0) | kinds,
	    .n_rules = (uint32_t)n,
	    .families_mask = families_mask,
	};
	if (bpf_map_update_elem(e->policy_fd, &cgid, &pol, BPF_ANY)) {
		rc = -errno;
		wd_err_set(err, rc, "map 'wd_policy': cgroup %llu: %s",
			   (unsigned long long)cgid, strerror(-rc));
		goto fail;
	}
	if (cgroup_fd < 0)
		goto filed; /* maps only: tier 3's tc programs (t3net.h) */
	c->cgfd = fcntl(cgroup_fd, F_DUPFD_CLOEXEC, 3);
	if (c->cgfd < 0) {
		rc = -errno;
		wd_err_set(err, rc, "egress: cgroup %llu: dup: %s",
			   (unsigned long long)cgid, strerror(-rc));
		goto fail;
	}
	for (int i = 0; i < WD_EG_FIRST_DNS; i++) {
		if (e->prog_fd[i] < 0)
			continue;
		/* ALLOW_MULTI: beside whatever another tool attached above
		 * (as multi); every program must allow */
		if (bpf_prog_attach(e->prog_fd[i], cgroup_fd, wd_eg_prog_at[i],
				    BPF_F_ALLOW_MULTI) == 0) {
			c->attached |= 1u << i;
		} else {
			rc = -errno;
			wd_err_set(err, rc,
				   "egress: attach '%s' to cgroup %llu: %s",
				   wd_eg_prog_names[i],
				   (unsigned long long)cgid, strerror(-rc));
			goto fail;
		}
	}
filed:
	c->next = e->calls;
	e->calls = c;
	pthread_mutex_unlock(&e->lock);
	return 0;
fail:
	call_free_maps(e, c, false);
	free(c);
	pthread_mutex_unlock(&e->lock);
	return rc;
}

bool wd_egress_keep_warm(struct wd_egress *e, const char *dir)
{
	if (!e)
		return false;
	pthread_mutex_lock(&e->lock);
	if (e->keep_tried) {
		bool kp = e->keep_pinned;
		pthread_mutex_unlock(&e->lock);
		return kp;
	}
	e->keep_tried = true;
	/* a one-shot call's: links that outlive it (egress_pin.c) */
	if (e->pinned && wd_egress_pin_keep(e, dir)) {
		e->keep_pinned = true;
		pthread_mutex_unlock(&e->lock);
		return true;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; fd >= 0 && i < WD_EG_NKEEP; i++) {
		if (e->keep_fd[i] < 0)
			continue; /* a unix type this kernel lacks */
		/* a link: it goes with this process */
		e->keep[i] =
		    bpf_link_create(e->keep_fd[i], fd, wd_eg_keep_at[i], NULL);
		if (e->keep[i] < 0)
			/* only slower: each call flips the keys itself */
			wd_log_errno(WD_LOG_DEBUG, -errno,
				     "egress: keep '%s' attached to '%s'",
				     wd_eg_keep_names[i], dir);
	}
	if (fd >= 0)
		close(fd);
	pthread_mutex_unlock(&e->lock);
	return false;
}

static int detach(struct wd_egress *e, uint64_t cgid, bool cg_removed)
{
	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	struct wd_egress_call **pp = &e->calls, *c = NULL;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->cgid == cgid) {
			c = *pp;
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&e->lock);
	if (!c) {
		bpf_map_delete_elem(e->policy_fd, &cgid);
		if (e->pinned)
			wd_egress_pin_release(e, cgid);
		return -ENOENT;
	}
	call_free_maps(e, c, cg_removed);
	free(c);
	return 0;
}

int wd_egress_detach(struct wd_egress *e, uint64_t cgid)
{
	return detach(e, cgid, false);
}

int wd_egress_detach_removed(struct wd_egress *e, uint64_t cgid)
{
	return detach(e, cgid, true);
}

int wd_egress_call_counts(struct wd_egress *e, uint64_t cgid, uint64_t *denied,
			  uint64_t *audited)
{
	if (!e)
		return -EINVAL;
	struct wd_call_policy p;
	if (bpf_map_lookup_elem(e->policy_fd, &cgid, &p))
		return -errno;
	*denied = p.n_denied;
	*audited = p.n_audited;
	return 0;
}

int wd_egress_allow_listen(struct wd_egress *e, uint64_t cgid,
			   struct wd_err *err)
{
	if (!e)
		return -EINVAL;
	int fd = e->policy_fd;
	struct wd_call_policy pol;
	pthread_mutex_lock(&e->lock);
	int rc = 0;
	if (bpf_map_lookup_elem(fd, &cgid, &pol) < 0) {
		rc = -errno;
	} else {
		pol.flags |= WD_POL_LISTEN;
		if (bpf_map_update_elem(fd, &cgid, &pol, BPF_EXIST) < 0)
			rc = -errno;
	}
	pthread_mutex_unlock(&e->lock);
	if (rc)
		return wd_err_set(err, rc,
				  "map 'wd_policy': cgroup %llu: listen: %s",
				  (unsigned long long)cgid, strerror(-rc));
	return 0;
}

void wd_egress_map_fds(struct wd_egress *e, struct wd_egress_map_fds *out)
{
	out->policy = e->policy_fd;
	out->egress_rules = e->rules_fd;
	out->events = e->events_fd;
	out->loss = e->loss_fd;
	out->call_rings = e->rings_fd;
	out->ring_slot = e->slot_fd;
	out->call_rings_on = e->pinned;
}

void wd_egress_close(struct wd_egress *e)
{
	if (!e)
		return;
	while (e->calls) {
		struct wd_egress_call *c = e->calls;
		e->calls = c->next;
		call_free_maps(e, c, false);
		free(c);
	}
	for (int i = 0; i < WD_EG_NKEEP; i++)
		if (e->keep[i] >= 0)
			close(e->keep[i]);
	if (e->poll_ep >= 0)
		close(e->poll_ep);
	wd_ringbuf_free(e->rb);
	if (e->pinned) {
		int *fds[] = {&e->policy_fd, &e->rules_fd,  &e->unix_fd,
			      &e->loss_fd,   &e->events_fd, &e->rings_fd,
			      &e->slot_fd,   &e->owner_fd,  &e->own_ring_fd};
		for (size_t i = 0; i < WD_ARRAY_SIZE(fds); i++)
			if (*fds[i] >= 0)
				close(*fds[i]);
		for (int i = 0; i < WD_EG_NPROG; i++)
			if (e->prog_fd[i] >= 0)
				close(e->prog_fd[i]);
		for (int i = 0; i < WD_EG_NKEEP; i++)
			if (e->keep_fd[i] >= 0)
				close(e->keep_fd[i]);
	}
	if (e->pin_dfd >= 0)
		close(e->pin_dfd);
	free(e->pin_hd);
	egress_bpf__destroy(e->skel);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->consume_lock);
	free(e);
}
