// SPDX-License-Identifier: GPL-2.0
/* Tier 3's egress, held in the host kernel: tc programs on the host end of
 * the veth pair that is a gVisor sandbox's only link (daemon/enforce/
 * t3net.c attaches them; daemon/sandbox/t3link.c makes the link).
 *
 * gVisor's netstack runs in user space: the cgroup sock_addr programs of
 * tiers 1-2 never see its connects, only the frames it writes to its
 * AF_PACKET socket on the netns side of the veth. Every one of them arrives
 * here (ingress of the host end) before the host's IP stack routes it, and
 * is judged against the call's allow map (wd_egress_rules, keyed by the
 * call's cgroup id exactly as tiers 1-2 key it): allowed, it goes on;
 * anything else is dropped, and a TCP SYN or UDP datagram dropped is
 * recorded on the call's ring like a tier-1 denial.
 *
 * Addresses, as the sandbox sees them (struct wd_t3_link):
 *   sbx  the sandbox's own (the only source accepted: no spoofing)
 *   gw   the host end: the sandbox's default route and its nameserver.
 *        gw:53 (UDP, TCP) is the call's resolver (sockets bound to this
 *        device: enforce/resolver.c). gw:P is the node's loopback
 *        127.0.0.1:P — gVisor drops packets with a loopback source on a
 *        non-loopback link, so the node's loopback cannot be addressed
 *        as 127.0.0.1 from inside. The packet is judged as 127.0.0.1:P
 *        (what a manifest rule says) and rewritten to it; the host end has
 *        route_localnet so the kernel delivers it, and the egress program
 *        rewrites the replies' source 127.0.0.1 back to gw.
 *   any other destination is judged as it is: the node's own addresses
 *   are delivered locally; beyond the node, the host end forwards (and
 *   the node source-NATs) only for a call routed there, where the node
 *   forwards (daemon/sandbox/t3beyond.h) — after this program, which runs
 *   before the IP stack sees the frame, let it through.
 * Port 53 and 853 anywhere but gw:53 are dropped and recorded: no DNS
 * packet of the call reaches any resolver but its own.
 * Not IPv4 (but ARP), IP options, fragments, protocols other than TCP and
 * UDP: dropped (the link carries IPv4 TCP/UDP only).
 */
#include "vmlinux.h"

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "lib/maps.h"
#include "lib/t3net.h"

char LICENSE[] SEC("license") = "GPL";

#define TC_ACT_OK	      0
#define TC_ACT_SHOT	      2
#define ETH_P_IP	      0x0800
#define ETH_P_ARP	      0x0806
#define IPPROTO_TCP	      6
#define IPPROTO_UDP	      17
#define AF_INET		      2
#define ETH_HLEN	      14
#define IP_CSUM_OFF	      (ETH_HLEN + 10)
#define IP_SRC_OFF	      (ETH_HLEN + 12)
#define IP_DST_OFF	      (ETH_HLEN + 16)
#define L4_OFF		      (ETH_HLEN + 20)
#define TCP_CSUM_OFF	      (L4_OFF + 16)
#define UDP_CSUM_OFF	      (L4_OFF + 6)
#define BPF_F_PSEUDO_HDR_     (1ULL << 4)
#define BPF_F_MARK_MANGLED_0_ (1ULL << 5)
#define LOOPBACK_BE	      bpf_htonl(0x7f000001)

/* Wire headers and the context, declared here rather than taken from
 * vmlinux.h: its types carry preserve_access_index, and one CO-RE
 * relocation makes libbpf parse the kernel's whole BTF at each load
 * (~12 ms of a one-shot `warden exec`). Packet layouts are fixed by the
 * wire; __sk_buff's by the UAPI (offsets asserted below). */
struct wd_eth {
	__u8 h_dest[6];
	__u8 h_source[6];
	__u16 h_proto;
};

struct wd_ip {
	__u8 ihl_version; /* ihl: low nibble, version: high */
	__u8 tos;
	__u16 tot_len;
	__u16 id;
	__u16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__u32 saddr;
	__u32 daddr;
};

struct wd_tcp {
	__u16 source;
	__u16 dest;
	__u32 seq;
	__u32 ack_seq;
	__u8 doff_res; /* data offset: high nibble */
	__u8 flags;    /* FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10 */
	__u16 window;
	__u16 check;
	__u16 urg_ptr;
};

struct wd_udp {
	__u16 source;
	__u16 dest;
	__u16 len;
	__u16 check;
};

/* struct __sk_buff up to data_end (UAPI: ifindex at 40, data at 76,
 * data_end at 80) */
struct wd_skb {
	__u32 len;
	__u32 pkt_type;
	__u32 mark;
	__u32 before_ifindex[7];
	__u32 ifindex;
	__u32 before_data[8];
	__u32 data;
	__u32 data_end;
};
_Static_assert(__builtin_offsetof(struct wd_skb, mark) == 8, "mark");
_Static_assert(__builtin_offsetof(struct wd_skb, ifindex) == 40, "ifindex");

/* skb->mark of the RSTs refuse() sends: the egress program lets them
 * through although their source is not an allowed peer */
#define WD_T3_RST_MARK 0x77643352u
_Static_assert(__builtin_offsetof(struct wd_skb, data) == 76, "data");
_Static_assert(__builtin_offsetof(struct wd_skb, data_end) == 80, "data_end");
_Static_assert(sizeof(struct wd_ip) == 20 && sizeof(struct wd_tcp) == 20 &&
		   sizeof(struct wd_eth) == 14,
	       "wire headers");

#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WD_POLICY_MAX_CALLS);
	__type(key, __u32); /* ifindex of the host end */
	__type(value, struct wd_t3_link);
} wd_t3_links SEC(".maps");

static __always_inline bool allowed(__u64 cgid, __u32 daddr, __u16 dport)
{
	struct wd_egress_key key = {};
	key.prefixlen = WD_EGRESS_KEY_FIXED_BITS + 128;
	key.cgid_lo = (__u32)cgid;
	key.cgid_hi = cgid >> 32;
	key.port = dport;
	key.addr[10] = 0xff;
	key.addr[11] = 0xff;
	__builtin_memcpy(&key.addr[12], &daddr, 4);
	if (bpf_map_lookup_elem(&wd_egress_rules, &key))
		return true;
	key.port = 0; /* any-port rules: see judge() in egress.bpf.c */
	return bpf_map_lookup_elem(&wd_egress_rules, &key) != NULL;
}

/* The ring of a call's records (bpf/lib/maps.h wd_ring), by the call's
 * cgroup id: in tc there is no current task to take it from. */
static __always_inline void *ring_of(__u64 cgid)
{
	if (wd_call_rings_on) {
		__u32 *slot = bpf_map_lookup_elem(&wd_ring_slot, &cgid);
		void *rb =
		    slot ? bpf_map_lookup_elem(&wd_call_rings, slot) : NULL;
		if (!rb)
			wd_count(WD_LOSS_RINGBUF);
		return rb;
	}
	return &wd_events;
}

/* A dropped packet's record, as connect4/sendmsg4 would write it for the
 * same destination (kind connect for TCP, sendmsg for UDP), counted
 * against the call first (wd_call_policy.n_denied) so a full ring never
 * hides it. */
static __always_inline void record(const struct wd_t3_link *l, __u8 proto,
				   __u32 daddr, __u16 dport)
{
	struct wd_call_policy *p = bpf_map_lookup_elem(&wd_policy, &l->cgid);
	if (p)
		__sync_fetch_and_add(&p->n_denied, 1);
	void *rb = ring_of(l->cgid);
	if (!rb)
		return;
	struct wd_kevent *e = bpf_ringbuf_reserve(rb, WD_KEV_SHORT_SIZE, 0);
	if (!e) {
		wd_count(WD_LOSS_RINGBUF);
		return;
	}
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = l->cgid;
	e->pid = 0;
	e->tgid = 0;
	e->uid = l->uid;
	e->kind = proto == IPPROTO_TCP ? WD_KEV_CONNECT : WD_KEV_SENDMSG;
	e->family = AF_INET;
	e->err = 1; /* EPERM, as the cgroup programs deny */
	e->verdict = WD_KEV_DENIED;
	e->protocol = proto;
	e->port = bpf_ntohs(dport);
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	e->addr[10] = 0xff;
	e->addr[11] = 0xff;
	__builtin_memcpy(&e->addr[12], &daddr, 4);
	e->arg = 0;
	e->arg2 = 0;
	__builtin_memcpy(e->comm, "gvisor", 7);
	bpf_ringbuf_submit(e, 0);
}

/* Rewrite the IPv4 address at off (IP_SRC_OFF or IP_DST_OFF) from `from`
 * to `to`, the IP and TCP/UDP checksums with it (the L4 one covers the
 * address through its pseudo-header). 0, or <0 (drop the packet). */
static __always_inline int rewrite(struct __sk_buff *skb, __u8 proto, int off,
				   __u32 from, __u32 to, bool udp_csum_zero)
{
	int csum_off = proto == IPPROTO_TCP ? TCP_CSUM_OFF : UDP_CSUM_OFF;
	if (!udp_csum_zero &&
	    bpf_l4_csum_replace(
		skb, csum_off, from, to,
		BPF_F_PSEUDO_HDR_ | sizeof(to) |
		    (proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0_ : 0)))
		return -1;
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, from, to, sizeof(to)))
		return -1;
	return bpf_skb_store_bytes(skb, off, &to, sizeof(to), 0);
}

struct pkt {
	__u8 proto;
	__u32 saddr, daddr;
	__u16 sport, dport; /* network order */
	bool syn_only;	    /* TCP SYN without ACK: a new connection */
	bool udp_csum_zero; /* UDP without a checksum */
};

/* Parse an IPv4 TCP/UDP frame: 0, or -1 for anything else. */
static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	const struct wd_skb *k = (const void *)skb;
	void *data = (void *)(long)k->data;
	void *end = (void *)(long)k->data_end;
	struct wd_eth *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	struct wd_ip *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl_version != 0x45)
		return -1;
	/* a fragment's ports are not where they would be: never judged */
	if (ip->frag_off & bpf_htons(0x3fff))
		return -1;
	p->proto = ip->protocol;
	p->saddr = ip->saddr;
	p->daddr = ip->daddr;
	if (p->proto == IPPROTO_TCP) {
		struct wd_tcp *t = (void *)(ip + 1);
		if ((void *)(t + 1) > end)
			return -1;
		p->sport = t->source;
		p->dport = t->dest;
		p->syn_only = (t->flags & (TCP_SYN | TCP_ACK)) == TCP_SYN;
		p->udp_csum_zero = false;
		return 0;
	}
	if (p->proto == IPPROTO_UDP) {
		struct wd_udp *u = (void *)(ip + 1);
		if ((void *)(u + 1) > end)
			return -1;
		p->sport = u->source;
		p->dport = u->dest;
		p->syn_only = false;
		p->udp_csum_zero = u->check == 0;
		return 0;
	}
	return -1;
}

static __always_inline __u16 fold(__s64 c)
{
	__u64 s = (__u64)c;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~(__u16)s;
}

/* Turn a SYN that is refused into the RST that refuses it, back to the
 * sandbox: its connect() fails at once with ECONNREFUSED, as a connect
 * that tiers 1-2 deny fails at once with EPERM (a dropped SYN would leave
 * it retrying for minutes). Built from the SYN itself, trimmed to the
 * headers (no options). TC_ACT_SHOT if anything does not fit. */
static __always_inline int refuse(struct __sk_buff *skb)
{
	if (bpf_skb_change_tail(skb, L4_OFF + sizeof(struct wd_tcp), 0))
		return TC_ACT_SHOT;
	const struct wd_skb *k = (const void *)skb;
	void *data = (void *)(long)k->data;
	void *end = (void *)(long)k->data_end;
	struct wd_eth *eth = data;
	struct wd_ip *ip = (void *)(eth + 1);
	struct wd_tcp *t = (void *)(ip + 1);
	if ((void *)(t + 1) > end)
		return TC_ACT_SHOT;
	__u8 mac[6];
	__builtin_memcpy(mac, eth->h_source, 6);
	__builtin_memcpy(eth->h_source, eth->h_dest, 6);
	__builtin_memcpy(eth->h_dest, mac, 6);
	__u32 a = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = a;
	ip->tot_len = bpf_htons(sizeof(*ip) + sizeof(*t));
	ip->ttl = 64;
	ip->id = 0;
	ip->frag_off = 0;
	ip->check = 0;
	ip->check = fold(bpf_csum_diff(NULL, 0, (__be32 *)ip, sizeof(*ip), 0));
	__u16 p = t->source;
	t->source = t->dest;
	t->dest = p;
	__u32 seq = t->seq;
	t->ack_seq = bpf_htonl(bpf_ntohl(seq) + 1);
	t->seq = 0;
	t->doff_res = 0x50; /* 5 words: no options */
	t->flags = TCP_RST | TCP_ACK;
	t->window = 0;
	t->check = 0;
	t->urg_ptr = 0;
	struct {
		__u32 s, d;
		__u8 z, proto;
		__u16 len;
	} ph = {ip->saddr, ip->daddr, 0, IPPROTO_TCP, bpf_htons(sizeof(*t))};
	__s64 c = bpf_csum_diff(NULL, 0, (__be32 *)&ph, sizeof(ph), 0);
	if (c < 0)
		return TC_ACT_SHOT;
	c = bpf_csum_diff(NULL, 0, (__be32 *)t, sizeof(*t), (__u32)c);
	if (c < 0)
		return TC_ACT_SHOT;
	t->check = fold(c);
	((struct wd_skb *)skb)->mark = WD_T3_RST_MARK;
	return bpf_redirect(((const struct wd_skb *)skb)->ifindex, 0);
}

/* From the sandbox (ingress of the host end). */
SEC("tc")
int wd_t3_from_sandbox(struct __sk_buff *skb)
{
	__u32 ifindex = ((const struct wd_skb *)skb)->ifindex;
	struct wd_t3_link *l = bpf_map_lookup_elem(&wd_t3_links, &ifindex);
	if (!l)
		return TC_ACT_SHOT; /* a warden link without its entry */
	const struct wd_skb *k = (const void *)skb;
	void *data = (void *)(long)k->data;
	void *end = (void *)(long)k->data_end;
	struct wd_eth *eth = data;
	if ((void *)(eth + 1) > end)
		return TC_ACT_SHOT;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return TC_ACT_OK; /* the sandbox asking for gw's MAC */
	struct pkt p;
	if (parse(skb, &p) < 0 || p.saddr != l->sbx)
		return TC_ACT_SHOT;
	bool dns = p.dport == bpf_htons(53) || p.dport == bpf_htons(853);
	if (p.daddr == l->gw && p.dport == bpf_htons(53))
		return TC_ACT_OK; /* its resolver */
	__u32 judged = p.daddr == l->gw ? LOOPBACK_BE : p.daddr;
	if (!dns && allowed(l->cgid, judged, p.dport)) {
		if (judged != p.daddr &&
		    rewrite(skb, p.proto, IP_DST_OFF, p.daddr, judged,
			    p.udp_csum_zero) < 0)
			return TC_ACT_SHOT;
		return TC_ACT_OK;
	}
	/* one record per connection attempt or datagram: a TCP segment
	 * other than a SYN to a destination not allowed belongs to no
	 * connection this program let through */
	if (p.proto == IPPROTO_UDP || p.syn_only)
		record(l, p.proto, judged, p.dport);
	return p.syn_only ? refuse(skb) : TC_ACT_SHOT;
}

/* To the sandbox (egress of the host end): only what comes from a peer
 * the call may reach (judged as the ingress program judges the other way:
 * the allow map, the resolver at gw:53) and the RSTs of refused SYNs; a
 * packet from a peer whose pin ran out is dropped as its packets to that
 * peer are. Replies from the node's loopback carry gw as their source, as
 * the sandbox addressed them. No connection is opened into the sandbox
 * (network.listen is refused in tier 3): a SYN without ACK never reaches
 * it. */
SEC("tc")
int wd_t3_to_sandbox(struct __sk_buff *skb)
{
	__u32 ifindex = ((const struct wd_skb *)skb)->ifindex;
	struct wd_t3_link *l = bpf_map_lookup_elem(&wd_t3_links, &ifindex);
	if (!l)
		return TC_ACT_SHOT;
	const struct wd_skb *k = (const void *)skb;
	void *data = (void *)(long)k->data;
	void *end = (void *)(long)k->data_end;
	struct wd_eth *eth = data;
	if ((void *)(eth + 1) > end)
		return TC_ACT_SHOT;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return TC_ACT_OK;
	struct pkt p;
	if (parse(skb, &p) < 0 || p.daddr != l->sbx || p.syn_only)
		return TC_ACT_SHOT;
	if (k->mark != WD_T3_RST_MARK &&
	    !(p.saddr == l->gw && p.sport == bpf_htons(53)) &&
	    !allowed(l->cgid, p.saddr, p.sport))
		return TC_ACT_SHOT;
	if (p.saddr == LOOPBACK_BE && rewrite(skb, p.proto, IP_SRC_OFF, p.saddr,
					      l->gw, p.udp_csum_zero) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
