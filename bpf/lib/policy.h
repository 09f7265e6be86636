/* Per-call policy shared by every BPF object (egress, LSM) and user space.
 *
 * A tool call runs in its own cgroup v2 leaf; every map here is keyed by that
 * cgroup's id (bpf_get_current_cgroup_id(), the v2 cgroup of the task making
 * the call). The policy language stays in user space
 * (daemon/enforce/egress.c): the kernel only sees these flat records.
 *
 * The map *definitions* live in bpf/lib/maps.h (BPF side only) so that
 * every object declares byte-identical maps and user space can hand the
 * egress object's fds to the others with bpf_map__reuse_fd().
 *
 * Layout rules: fixed-width types, explicit padding, _Static_assert on size
 * and offsets compiled on both sides; tests/unit/test_event_layout.c checks
 * that the BPF object's BTF agrees. These layouts are stable: append fields
 * only by consuming `reserved`.
 */
#ifndef WD_BPF_POLICY_H
#define WD_BPF_POLICY_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* wd_call_policy.flags */
#define WD_POL_AUDIT	(1u << 0) /* allow, but emit an event (audited) */
#define WD_POL_EGRESS	(1u << 1) /* egress allow-list in wd_egress_rules */
#define WD_POL_FAMILIES (1u << 2) /* socket families held to families_mask */
#define WD_POL_LISTEN	(1u << 3) /* network.listen: bind4/6 allow any port */
/* names in network.allow: every connect/sendmsg to port 53 (any address)
 * goes to the call's resolver, 127.0.0.1:dns_port (enforce/resolver.h) */
#define WD_POL_DNS (1u << 4)
/* the resolver also listens on [::1]:dns_port: a v6 socket's DNS goes
 * there (else to ::ffff:127.0.0.1, which an unconnected v6 UDP send cannot
 * reach) */
#define WD_POL_DNS6 (1u << 5)
/* which lookups of wd_egress_rules can find a key of the call (judge() in
 * egress.bpf.c makes only those): keys with a port, keys of any port
 * (port 0). Set by daemon/enforce/egress.c at attach, both for a call
 * with names (its resolver's answers are pinned later) */
#define WD_POL_PORT_RULES    (1u << 6)
#define WD_POL_ANYPORT_RULES (1u << 7)

/* Value of wd_policy (key: __u64 cgroup id). A missing entry for a cgroup a
 * program is attached to means deny (fail closed). */
struct wd_call_policy {
	__u32 flags;	     /* WD_POL_* */
	__u32 n_rules;	     /* egress rules loaded (informational) */
	__u64 families_mask; /* bit n set = AF n allowed (AF_MAX < 64) */
	__u64 reserved[2];   /* zero; the LSM's slots (bpf/lsm_policy.h) */
	/* Events the call's programs raised, counted before the ring
	 * buffer is asked for room: a record lost there is still counted
	 * here, against its call (wd_egress_call_counts, read when the
	 * call's processes are dead). Zero at attach; atomic adds. */
	__u64 n_denied;
	__u64 n_audited;
	__u16 dns_port; /* network order; the resolver's (WD_POL_DNS) */
	__u16 pad16[3];
};

/* Key of wd_egress_rules, an LPM trie. The matched bits are, in order:
 * cgroup id (64), destination port (16), address (0..128). A rule with a
 * port stores that port; a rule for any port stores port 0. The programs
 * look up twice — (cgid, dport, addr) then (cgid, 0, addr) — so an allowed
 * port under a shorter prefix is never hidden by a longer prefix with a
 * different port (LPM returns only the longest match for each port).
 * IPv4 is stored and looked up as IPv4-mapped IPv6 (::ffff:a.b.c.d), so a
 * v4 rule of /n has prefix 96 + n. */
struct wd_egress_key {
	__u32 prefixlen; /* 64 + 16 + address prefix (0..128) */
	__u32 cgid_lo;	 /* cgroup id, low and high halves (host order) */
	__u32 cgid_hi;
	__u16 port;    /* network byte order; 0 = any */
	__u8 addr[16]; /* network byte order */
	__u8 pad[2];   /* zero; outside every prefix */
};
#define WD_EGRESS_KEY_FIXED_BITS (64 + 16)

struct wd_egress_val {
	__u32 rule; /* index of the manifest rule, for messages */
	__u32 pad;
};

/* Per-CPU loss/miss counters (wd_loss, a PERCPU_ARRAY indexed by these).
 * User space sums the CPUs; the sums travel with the event stream. */
enum wd_loss_idx {
	WD_LOSS_RINGBUF = 0,	 /* bpf_ringbuf_reserve failed: event lost */
	WD_LOSS_POLICY_MISS = 1, /* no wd_policy entry: denied, event sent */
	/* 2 and 3 are not counts but state of wd_event_submit (maps.h),
	 * bpf_ktime_get_boot_ns times: 2 the CPU's last look at the ring's
	 * fill, 3 its last consumer wake-up. */
	WD_STATE_FULL_CHECK_NS = 2,
	WD_STATE_WAKE_NS = 3,
	WD_LOSS_NR = 4, /* map size */
};

#define WD_POLICY_MAX_CALLS 4096
/* bytes of a per-call ring (bpf/lib/maps.h wd_call_rings): ~3000 short
 * records; a one-shot call drains it while the tool runs */
#define WD_CALL_RING_BYTES (1u << 18)
/* per-call ring slots: one-shot calls running at once on the node */
#define WD_CALL_RING_SLOTS  256
#define WD_EGRESS_MAX_RULES 16384

_Static_assert(sizeof(struct wd_call_policy) == 56, "wd_call_policy size");
_Static_assert(__builtin_offsetof(struct wd_call_policy, families_mask) == 8,
	       "wd_call_policy.families_mask");
_Static_assert(__builtin_offsetof(struct wd_call_policy, n_denied) == 32,
	       "wd_call_policy.n_denied");
_Static_assert(__builtin_offsetof(struct wd_call_policy, dns_port) == 48,
	       "wd_call_policy.dns_port");
_Static_assert(sizeof(struct wd_egress_key) == 32, "wd_egress_key size");
_Static_assert(__builtin_offsetof(struct wd_egress_key, cgid_lo) == 4,
	       "LPM data must start right after prefixlen");
_Static_assert(__builtin_offsetof(struct wd_egress_key, port) == 12,
	       "wd_egress_key.port");
_Static_assert(__builtin_offsetof(struct wd_egress_key, addr) == 14,
	       "wd_egress_key.addr");
_Static_assert(sizeof(struct wd_egress_val) == 8, "wd_egress_val size");

#endif
