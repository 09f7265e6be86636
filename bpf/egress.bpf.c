// SPDX-License-Identifier: GPL-2.0
/* Egress allow-list per tool call: cgroup sock_addr programs.
 *
 * Attached by daemon/enforce/egress.c to each call's cgroup v2 leaf (and
 * nothing else), so every task here belongs to a warden call. connect4/6
 * see connect() on TCP and UDP sockets and TCP fast-open (sendto with
 * MSG_FASTOPEN runs the connect hook in tcp_sendmsg_fastopen); sendmsg4/6
 * see sendto/sendmsg with an address on unconnected UDP sockets. A UDP
 * socket connected under the connect hook sends to its judged peer only.
 *
 * Verdict: 1 lets the call proceed, 0 makes the syscall fail with EPERM.
 */
#include "vmlinux.h"

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "lib/maps.h"
#include "egress_unix.h"

#define AF_INET	 2
#define AF_INET6 10
/* socket.h's, which vmlinux.h lacks */
#define SOCK_DGRAM_   2
#define SOL_SOCKET_   1
#define SO_REUSEADDR_ 2

char LICENSE[] SEC("license") = "GPL";

/* Keeps struct wd_kevent in the object's BTF (ring buffer records have no
 * BTF type otherwise) so tests/unit/test_event_layout.c can compare it. */
const struct wd_kevent *wd_kevent_btf_anchor __attribute__((unused));

static __always_inline int judge(struct bpf_sock_addr *ctx, const __u32 a[4],
				 __u16 kind)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 cgid = wd_task_cgid(t);
	__u16 port_be = (__u16)ctx->user_port;
	struct wd_egress_key key = {};
	bool audit = false;

	struct wd_call_policy *pol = bpf_map_lookup_elem(&wd_policy, &cgid);
	if (!pol) {
		/* Attached, but no policy: the call is being torn down or
		 * set up out of order. Fail closed. */
		wd_count(WD_LOSS_POLICY_MISS);
		goto deny;
	}
	audit = pol->flags & WD_POL_AUDIT;
	if ((pol->flags & WD_POL_FAMILIES) &&
	    !(pol->families_mask & (1ull << (ctx->user_family & 63))))
		goto deny;

	/* Only the lookups that can find a key of the call: a call without
	 * rules (network.allow: [], no names) walked the trie twice to find
	 * nothing, ~37 ns of a denied connect()'s ~320 ns; one with only
	 * port rules (or only any-port ones) once in vain. */
	__u32 rf = pol->flags;
	if (rf & WD_POL_DNS) /* answers of the call's resolver */
		rf |= WD_POL_PORT_RULES | WD_POL_ANYPORT_RULES;
	if (!(rf & (WD_POL_PORT_RULES | WD_POL_ANYPORT_RULES)))
		goto deny;
	key.prefixlen = WD_EGRESS_KEY_FIXED_BITS + 128;
	key.cgid_lo = (__u32)cgid;
	key.cgid_hi = cgid >> 32;
	key.port = port_be;
	__builtin_memcpy(key.addr, a, 16);
	if ((rf & WD_POL_PORT_RULES) &&
	    bpf_map_lookup_elem(&wd_egress_rules, &key))
		return 1;
	/* Any-port rules: looked up separately so that a longer prefix with
	 * another port cannot shadow a shorter any-port prefix. */
	key.port = 0;
	if ((rf & WD_POL_ANYPORT_RULES) &&
	    bpf_map_lookup_elem(&wd_egress_rules, &key))
		return 1;

deny:;
	/* a short record: an address, no path (lib/events.h) */
	struct wd_kevent *e = wd_event_reserve_short_pol(
	    kind, audit ? WD_KEV_AUDITED : WD_KEV_DENIED,
	    audit ? 0 : 1 /*EPERM*/, cgid, pol, t);
	if (e) {
		e->family = ctx->user_family;
		e->protocol = ctx->protocol;
		e->port = bpf_ntohs(port_be);
		__builtin_memcpy(e->addr, a, 16);
		e->arg = 0;
		e->arg2 = ctx->type;
		wd_event_submit(e);
	}
	return audit ? 1 : 0;
}

/* ---- names in network.allow: DNS goes to the call's resolver ----------
 * A call whose allow-list names hosts (WD_POL_DNS) has every connect and
 * sendmsg to port 53, whatever the address, rewritten to its resolver on
 * 127.0.0.1:dns_port (enforce/resolver.h): no DNS packet of the call
 * reaches another resolver, and the resolver pins what it answers into
 * wd_egress_rules for the answer's TTL before replying. The address the
 * program asked for is kept per socket so that recvmsg and getpeername
 * show it back (a resolver library drops a reply from another address). */
struct wd_dns_orig {
	__u32 addr[4]; /* what the program asked for (v4-mapped for v4) */
	__u16 port;    /* network order: 53 */
	__u16 resolver_port;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* socket cookie */
	__type(value, struct wd_dns_orig);
} wd_dns_orig SEC(".maps");

/* 1 when redirected (allowed: it goes to the resolver), 0 otherwise. */
static __always_inline int dns_redirect(struct bpf_sock_addr *ctx,
					const __u32 a[4], bool v6)
{
	if ((__u16)ctx->user_port != bpf_htons(53))
		return 0;
	__u64 cgid = bpf_get_current_cgroup_id();
	struct wd_call_policy *pol = bpf_map_lookup_elem(&wd_policy, &cgid);
	if (!pol || !(pol->flags & WD_POL_DNS) || !pol->dns_port)
		return 0;
	struct wd_dns_orig o = {.port = (__u16)ctx->user_port,
				.resolver_port = pol->dns_port};
	__builtin_memcpy(o.addr, a, 16);
	__u64 ck = bpf_get_socket_cookie(ctx);
	bpf_map_update_elem(&wd_dns_orig, &ck, &o, BPF_ANY);
	if (v6 && (pol->flags & WD_POL_DNS6)) {
		/* [::1]: the resolver's v6 side */
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = 0;
		ctx->user_ip6[3] = bpf_htonl(1);
	} else if (v6) {
		/* ::ffff:127.0.0.1: a dual-stack socket reaches the v4
		 * resolver; a v6-only one fails to send (fails closed) */
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0xffff);
		ctx->user_ip6[3] = bpf_htonl(0x7f000001);
	} else {
		ctx->user_ip4 = bpf_htonl(0x7f000001);
	}
	ctx->user_port = pol->dns_port;
	return 1;
}

static __always_inline int judge4(struct bpf_sock_addr *ctx, __u16 kind)
{
	__u32 a[4] = {0, 0, bpf_htonl(0xffff), ctx->user_ip4};
	if (dns_redirect(ctx, a, false))
		return 1;
	return judge(ctx, a, kind);
}

/* IPv4-mapped destinations (::ffff:a.b.c.d) on a v6 socket reach the same
 * IPv4 host as connect4 would: they are judged against the same v4-mapped
 * rules because rules store v4 in exactly that form. */
static __always_inline int judge6(struct bpf_sock_addr *ctx, __u16 kind)
{
	__u32 a[4] = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
		      ctx->user_ip6[3]};
	if (dns_redirect(ctx, a, true))
		return 1;
	return judge(ctx, a, kind);
}

/* The resolver's address shown back as the one the program asked for, on
 * a socket the programs redirected (recvmsg: UDP's source; getpeername). */
static __always_inline int show_orig4(struct bpf_sock_addr *ctx)
{
	__u64 ck = bpf_get_socket_cookie(ctx);
	struct wd_dns_orig *o = bpf_map_lookup_elem(&wd_dns_orig, &ck);
	if (o && ctx->user_ip4 == bpf_htonl(0x7f000001) &&
	    (__u16)ctx->user_port == o->resolver_port && o->addr[0] == 0 &&
	    o->addr[1] == 0 && o->addr[2] == bpf_htonl(0xffff)) {
		ctx->user_ip4 = o->addr[3];
		ctx->user_port = o->port;
	}
	return 1;
}

static __always_inline int show_orig6(struct bpf_sock_addr *ctx)
{
	__u64 ck = bpf_get_socket_cookie(ctx);
	struct wd_dns_orig *o = bpf_map_lookup_elem(&wd_dns_orig, &ck);
	if (o && ctx->user_ip6[0] == 0 && ctx->user_ip6[1] == 0 &&
	    ((ctx->user_ip6[2] == bpf_htonl(0xffff) &&
	      ctx->user_ip6[3] == bpf_htonl(0x7f000001)) ||
	     (ctx->user_ip6[2] == 0 && ctx->user_ip6[3] == bpf_htonl(1))) &&
	    (__u16)ctx->user_port == o->resolver_port) {
		ctx->user_ip6[0] = o->addr[0];
		ctx->user_ip6[1] = o->addr[1];
		ctx->user_ip6[2] = o->addr[2];
		ctx->user_ip6[3] = o->addr[3];
		ctx->user_port = o->port;
	}
	return 1;
}

SEC("cgroup/recvmsg4")
int wd_recvmsg4(struct bpf_sock_addr *ctx)
{
	return show_orig4(ctx);
}

SEC("cgroup/recvmsg6")
int wd_recvmsg6(struct bpf_sock_addr *ctx)
{
	return show_orig6(ctx);
}

SEC("cgroup/getpeername4")
int wd_getpeername4(struct bpf_sock_addr *ctx)
{
	return show_orig4(ctx);
}

SEC("cgroup/getpeername6")
int wd_getpeername6(struct bpf_sock_addr *ctx)
{
	return show_orig6(ctx);
}

SEC("cgroup/connect4")
int wd_connect4(struct bpf_sock_addr *ctx)
{
	return judge4(ctx, WD_KEV_CONNECT);
}

SEC("cgroup/connect6")
int wd_connect6(struct bpf_sock_addr *ctx)
{
	return judge6(ctx, WD_KEV_CONNECT);
}

SEC("cgroup/sendmsg4")
int wd_sendmsg4(struct bpf_sock_addr *ctx)
{
	return judge4(ctx, WD_KEV_SENDMSG);
}

SEC("cgroup/sendmsg6")
int wd_sendmsg6(struct bpf_sock_addr *ctx)
{
	return judge6(ctx, WD_KEV_SENDMSG);
}

/* ---- inbound: cgroup/bind4, bind6 -----------------------------------------
 * Without network.listen a call may not bind a port: a socket bound to one
 * receives from (UDP) or, listening, accepts (TCP, refused by seccomp as
 * well) whoever reaches that port, and a bound SO_REUSEPORT socket joins a
 * host service's group and takes a share of its peers. Port 0 (the kernel
 * picks an ephemeral port, as a connect or send does by itself) is client
 * behaviour and allowed: what reaches such a socket is judged by what
 * else holds (seccomp's listen refusal; an empty namespace without
 * egress). These run in bind(2) (and SCTP's bindx) before the port is
 * taken, on the address as the caller passed it. */
static __always_inline int judge_bind(struct bpf_sock_addr *ctx,
				      const __u32 a[4])
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 cgid = wd_task_cgid(t);
	__u16 port_be = (__u16)ctx->user_port;
	bool audit = false;
	__u32 reuse = 0;
	struct wd_call_policy *pol = bpf_map_lookup_elem(&wd_policy, &cgid);
	if (!pol) {
		wd_count(WD_LOSS_POLICY_MISS);
		goto deny;
	}
	audit = pol->flags & WD_POL_AUDIT;
	if (!port_be)
		return 1;
	if (pol->flags & WD_POL_LISTEN) {
		/* Two UDP sockets that both set SO_REUSEADDR share a port
		 * whoever owns them, and the last bound takes the unicast
		 * datagrams: a call's would take a host service's or another
		 * call's. Refused on datagram sockets (a TCP SO_REUSEADDR
		 * socket takes no port that is listening); a helper error
		 * refuses too. */
		int v = 0;
		if (ctx->type != SOCK_DGRAM_ ||
		    (!bpf_getsockopt(ctx, SOL_SOCKET_, SO_REUSEADDR_, &v,
				     sizeof(v)) &&
		     !v))
			return 1;
		reuse = WD_KEV_BIND_REUSEADDR;
	}
deny:;
	struct wd_kevent *e = wd_event_reserve_short_pol(
	    WD_KEV_BIND, audit ? WD_KEV_AUDITED : WD_KEV_DENIED,
	    audit ? 0 : 1 /*EPERM*/, cgid, pol, t);
	if (e) {
		e->family = ctx->user_family;
		e->protocol = ctx->protocol;
		e->port = bpf_ntohs(port_be);
		__builtin_memcpy(e->addr, a, 16);
		e->arg = reuse;
		e->arg2 = ctx->type;
		wd_event_submit(e);
	}
	return audit ? 1 : 0;
}

SEC("cgroup/bind4")
int wd_bind4(struct bpf_sock_addr *ctx)
{
	__u32 a[4] = {0, 0, bpf_htonl(0xffff), ctx->user_ip4};
	return judge_bind(ctx, a);
}

SEC("cgroup/bind6")
int wd_bind6(struct bpf_sock_addr *ctx)
{
	__u32 a[4] = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
		      ctx->user_ip6[3]};
	return judge_bind(ctx, a);
}

/* Neutral programs (always allow), attached once to warden/keep-warm, a
 * cgroup that holds no process and is above no call leaf
 * (daemon/enforce/egress_keep.c). Attaching the first cgroup program of a type
 * turns a kernel static key on and detaching the last turns it off: each
 * is a text patch with IPIs to every CPU, ~0.1 ms, which each call paid
 * four times on attach and four on detach when it was the only one. With
 * these held the per-call attach and detach only count. No call runs
 * them; and were one to (programs of a cgroup and of its ancestors all
 * run, and every one must allow), an allow-all program never overrides a
 * call's verdict. */
SEC("cgroup/connect4")
int wd_keep_connect4(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/connect6")
int wd_keep_connect6(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/sendmsg4")
int wd_keep_sendmsg4(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/sendmsg6")
int wd_keep_sendmsg6(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/bind4")
int wd_keep_bind4(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/bind6")
int wd_keep_bind6(struct bpf_sock_addr *ctx)
{
	return 1;
}

/* ---- unix sockets: cgroup/connect_unix, sendmsg_unix (6.7+) --------------
 * Loaded from sections libbpf 1.1 knows (cgroup/connect4, sendmsg4) with
 * the attach type set to the unix one by daemon/enforce/egress.c before
 * the load: the verifier then holds the programs to the unix context
 * (no user_ip4/port access, which these never touch).
 *
 * The address is the kernel's copy of the caller's sockaddr_un (taken by
 * move_addr_to_kernel before the hook), read through the kernel context;
 * the path is judged as written, before the kernel resolves it. */
#define AF_UNIX 1

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, WD_UNIX_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct wd_unix_key);
	__type(value, __u32);
} wd_unix_rules SEC(".maps");

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

/* The key being judged lives here, not on the stack (124 bytes + the
 * event copy would crowd the 512-byte stack); one slot per CPU, and a
 * cgroup sock_addr program is not re-entered on its CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wd_unix_key);
} wd_unix_scratch SEC(".maps");

static __always_inline int judge_unix(struct bpf_sock_addr *ctx, __u16 kind)
{
	__u64 cgid = bpf_get_current_cgroup_id();
	__u32 zero = 0;
	bool audit = false;
	struct wd_unix_key *key = bpf_map_lookup_elem(&wd_unix_scratch, &zero);
	if (!key)
		return 0;
	__builtin_memset(key, 0, sizeof(*key));

	struct bpf_sock_addr_kern *k = bpf_cast_to_kern_ctx(ctx);
	__u32 n = k->uaddrlen;
	n = n > 2 ? n - 2 : 0; /* minus sun_family */
	if (n > WD_UNIX_SUN_PATH)
		n = WD_UNIX_SUN_PATH;
	if (n && bpf_probe_read_kernel(key->path, n, (char *)k->uaddr + 2))
		goto deny;

	struct wd_call_policy *pol = bpf_map_lookup_elem(&wd_policy, &cgid);
	if (!pol) {
		wd_count(WD_LOSS_POLICY_MISS);
		goto deny;
	}
	audit = pol->flags & WD_POL_AUDIT;
	/* Only absolute names can be judged without the caller's cwd; an
	 * abstract name (leading NUL) or an unnamed address is never under
	 * a write path. */
	if (key->path[0] != '/')
		goto deny;
	/* A ".." component would climb out of the matched prefix. With
	 * names (WD_POL_DNS), "//" and "/./" would name a host resolver's
	 * socket without the deny rule's prefix (daemon/enforce/egress.c,
	 * deny_resolver_sockets). */
	bool dns = pol->flags & WD_POL_DNS;
	char p1 = 0, p2 = 0, p3 = 0;
#pragma unroll
	for (int i = 0; i < WD_UNIX_SUN_PATH + 1; i++) {
		char c = key->path[i];
		if (p3 == '/' && p2 == '.' && p1 == '.' && (c == '/' || !c))
			goto deny;
		if (dns && c == '/' && (p1 == '/' || (p2 == '/' && p1 == '.')))
			goto deny;
		if (!c)
			break;
		p3 = p2;
		p2 = p1;
		p1 = c;
	}
	key->prefixlen = WD_UNIX_KEY_FIXED_BITS + 8 * WD_UNIX_PATH_MAX;
	key->cgid_lo = (__u32)cgid;
	key->cgid_hi = cgid >> 32;
	/* 1: under a write path; 0: a deny rule carved out of one */
	__u32 *allow = bpf_map_lookup_elem(&wd_unix_rules, key);
	if (allow && *allow)
		return 1;

deny:;
	struct wd_kevent *e =
	    wd_event_reserve(kind, audit ? WD_KEV_AUDITED : WD_KEV_DENIED,
			     audit ? 0 : 1 /*EPERM*/);
	if (e) {
		e->family = AF_UNIX;
		e->arg2 = ctx->type;
		__builtin_memcpy(e->path, key->path, WD_UNIX_SUN_PATH);
		if (!e->path[0] && n)
			e->path[0] = '@'; /* abstract: shown as "@name" */
		e->path[WD_UNIX_SUN_PATH] = 0;
		wd_event_submit(e);
	}
	return audit ? 1 : 0;
}

SEC("cgroup/connect4")
int wd_connect_unix(struct bpf_sock_addr *ctx)
{
	return judge_unix(ctx, WD_KEV_CONNECT_UNIX);
}

SEC("cgroup/sendmsg4")
int wd_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return judge_unix(ctx, WD_KEV_SENDMSG_UNIX);
}

/* The keep-warm programs of the two unix types (see wd_keep_connect4),
 * given their attach type as the two above are */
SEC("cgroup/connect4")
int wd_keep_connect_unix(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/sendmsg4")
int wd_keep_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return 1;
}
