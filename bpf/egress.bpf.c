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

#define AF_INET	 2
#define AF_INET6 10

char LICENSE[] SEC("license") = "GPL";

/* Keeps struct wd_kevent in the object's BTF (ring buffer records have no
 * BTF type otherwise) so tests/unit/test_event_layout.c can compare it. */
const struct wd_kevent *wd_kevent_btf_anchor __attribute__((unused));

static __always_inline int judge(struct bpf_sock_addr *ctx, const __u32 a[4],
				 __u16 kind)
{
	__u64 cgid = bpf_get_current_cgroup_id();
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

	key.prefixlen = WD_EGRESS_KEY_FIXED_BITS + 128;
	key.cgid_lo = (__u32)cgid;
	key.cgid_hi = cgid >> 32;
	key.port = port_be;
	__builtin_memcpy(key.addr, a, 16);
	if (bpf_map_lookup_elem(&wd_egress_rules, &key))
		return 1;
	/* Any-port rules: looked up separately so that a longer prefix with
	 * another port cannot shadow a shorter any-port prefix. */
	key.port = 0;
	if (bpf_map_lookup_elem(&wd_egress_rules, &key))
		return 1;

deny:;
	/* a short record: an address, no path (lib/events.h) */
	struct wd_kevent *e =
	    wd_event_reserve_short(kind, audit ? WD_KEV_AUDITED : WD_KEV_DENIED,
				   audit ? 0 : 1 /*EPERM*/);
	if (e) {
		e->family = ctx->user_family;
		e->protocol = ctx->protocol;
		e->arg2 = ctx->type;
		e->port = bpf_ntohs(port_be);
		__builtin_memcpy(e->addr, a, 16);
		wd_event_submit(e);
	}
	return audit ? 1 : 0;
}

static __always_inline int judge4(struct bpf_sock_addr *ctx, __u16 kind)
{
	__u32 a[4] = {0, 0, bpf_htonl(0xffff), ctx->user_ip4};
	return judge(ctx, a, kind);
}

/* IPv4-mapped destinations (::ffff:a.b.c.d) on a v6 socket reach the same
 * IPv4 host as connect4 would: they are judged against the same v4-mapped
 * rules because rules store v4 in exactly that form. */
static __always_inline int judge6(struct bpf_sock_addr *ctx, __u16 kind)
{
	__u32 a[4] = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
		      ctx->user_ip6[3]};
	return judge(ctx, a, kind);
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
