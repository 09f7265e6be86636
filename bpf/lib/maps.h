/* Maps shared by every warden BPF object, and the event-emit helper.
 * BPF side only (include after vmlinux.h and bpf_helpers.h).
 *
 * Each object that includes this declares the same four maps; the egress
 * object (daemon/enforce/egress.c) creates them, and the others take its fds
 * with bpf_map__reuse_fd() before load (wd_egress_map_fds()), so one policy
 * entry per call and one ring buffer serve every hook on the node.
 * The ring buffer size is set by user space before load
 * (bpf_map__set_max_entries); the value here is only the default.
 */
#ifndef WD_BPF_MAPS_H
#define WD_BPF_MAPS_H

#include "lib/events.h"
#include "lib/policy.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WD_POLICY_MAX_CALLS);
	__type(key, __u64); /* cgroup id */
	__type(value, struct wd_call_policy);
} wd_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, WD_EGRESS_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* required for LPM tries */
	__type(key, struct wd_egress_key);
	__type(value, struct wd_egress_val);
} wd_egress_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22); /* bytes; user space may change it */
} wd_events SEC(".maps");

/* Per-call rings (a one-shot `warden exec` on pinned programs,
 * daemon/enforce/egress_pin.c): the programs are shared by every process
 * on the node, so one shared ring would hand each process the others'
 * denials to drop. A process claims a slot of wd_call_rings (a ring made
 * once per slot and boot, reused: a map-in-map update costs an RCU grace
 * period, ~10 ms) and files it under its call's cgroup id in
 * wd_ring_slot. With wd_call_rings_on set (the pinned object only) a record
 * goes to the ring of the cgroup it happened in, or is counted lost if that
 * cgroup has none. Off (wardend's own object), every record goes to
 * wd_events as before, and these maps are never read. */
struct wd_call_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, WD_CALL_RING_BYTES);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, WD_CALL_RING_SLOTS);
	__type(key, __u32);
	__array(values, struct wd_call_ring);
} wd_call_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WD_POLICY_MAX_CALLS);
	__type(key, __u64);   /* cgroup id */
	__type(value, __u32); /* its slot in wd_call_rings */
} wd_ring_slot SEC(".maps");

const volatile __u8 wd_call_rings_on = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WD_LOSS_NR);
	__type(key, __u32);
	__type(value, __u64);
} wd_loss SEC(".maps");

static __always_inline void wd_count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&wd_loss, &idx);
	if (c)
		*c += 1; /* per-CPU: no atomic needed */
}

/* Count an event against its call (wd_call_policy.n_denied/n_audited)
 * whether or not the ring buffer has room for its record, so that the
 * call's denial total is exact under a flood. p: the call's entry in
 * wd_policy; NULL (policy miss): the event belongs to no call. */
static __always_inline void wd_call_count_pol(struct wd_call_policy *p,
					      __u8 verdict)
{
	if (!p)
		return;
	if (verdict == WD_KEV_AUDITED)
		__sync_fetch_and_add(&p->n_audited, 1);
	else
		__sync_fetch_and_add(&p->n_denied, 1);
}

/* The current task's v2 cgroup id, as bpf_get_current_cgroup_id() reads
 * it (task_dfl_cgroup(current)->kn->id), through the task's BTF pointer:
 * loads, not a helper call (3.4% of a denied connect()'s producer CPU).
 * Safe without a reference in a program that runs in an RCU read-side
 * section (cgroup sock_addr, lsm_cgroup and non-sleepable lsm programs:
 * css_set and cgroup are RCU-freed), never from a sleepable one; every
 * load through the chain is a fault-checked one, 0 if a pointer were NULL:
 * cgroup id 0 has no policy entry, so a bad read fails closed. */
static __always_inline __u64 wd_task_cgid(struct task_struct *t)
{
	return t->cgroups->dfl_cgrp->kn->id;
}

/* The common fields of a record (everything before path); cgid: the
 * current task's cgroup (wd_task_cgid), read once by the caller; t: the
 * current task (bpf_get_current_task_btf).
 * pid, tgid, uid and comm are read from the task as the helpers
 * bpf_get_current_pid_tgid, _uid_gid and _comm read them (task->pid and
 * ->tgid are the init namespace's; cred->uid is the kernel uid, which is
 * init_user_ns's uid), without their three calls, the uid's namespace
 * mapping and comm's strscpy (~7% of the producer's CPU at a flood).
 * comm: the task's 16 bytes as they are; the kernel keeps them
 * NUL-terminated, and the reader bounds them anyway. family .. arg2 are
 * the caller's to write (no zeroing here that the caller writes again). */
static __always_inline void wd_event_fill(struct wd_kevent *e, __u16 kind,
					  __u8 verdict, __s32 err, __u64 cgid,
					  struct task_struct *t)
{
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = cgid;
	e->pid = t->pid;
	e->tgid = t->tgid;
	e->uid = t->cred->uid.val;
	e->kind = kind;
	e->err = err;
	e->verdict = verdict;
	const __u64 *c = (const __u64 *)t->comm;
	__u64 *d = (__u64 *)e->comm;
	_Static_assert(sizeof(e->comm) == 16, "comm: two words");
	d[0] = c[0];
	d[1] = c[1];
}

/* Every field a caller of wd_event_fill may leave alone, zeroed. */
static __always_inline void wd_event_zero_rest(struct wd_kevent *e)
{
	e->family = 0;
	e->protocol = 0;
	e->port = 0;
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	e->arg = 0;
	e->arg2 = 0;
}

/* The ring a record of cgroup cgid goes to; NULL: none (counted). */
static __always_inline void *wd_ring(__u64 cgid)
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

/* Reserve a record of `size` bytes (a constant: sizeof(struct wd_kevent)
 * or WD_KEV_SHORT_SIZE) for the current task t, of cgroup cgid and policy
 * entry pol (NULL: none), with the common fields filled in (not family ..
 * arg2: the caller writes them); or NULL after counting the loss (the
 * caller still enforces: a full ring buffer never turns a denial into an
 * allow). A program that has looked up its policy passes what it found:
 * a denied connect() read the cgroup id three times and the policy twice
 * before (~10% of the producer's CPU at a flood). */
static __always_inline struct wd_kevent *
wd_event_reserve_at(__u32 size, __u16 kind, __u8 verdict, __s32 err, __u64 cgid,
		    struct wd_call_policy *pol, struct task_struct *t)
{
	wd_call_count_pol(pol, verdict);
	void *rb = wd_ring(cgid);
	if (!rb)
		return NULL;
	struct wd_kevent *e = bpf_ringbuf_reserve(rb, size, 0);
	if (!e) {
		wd_count(WD_LOSS_RINGBUF);
		return NULL;
	}
	wd_event_fill(e, kind, verdict, err, cgid, t);
	return e;
}

/* A full record (path[0] = 0, family .. arg2 zero), for a program without
 * its policy entry at hand. The cgroup id through the helper: this one is
 * also called from sleepable LSM programs (lsm.s/), which run outside an
 * RCU read-side section, where the task's css_set could be freed under a
 * walk of its pointers (a task moved to another cgroup meanwhile); the
 * helper takes the RCU read lock itself. The task's own fields stay safe:
 * it is current, and only it changes its cred. */
static __always_inline struct wd_kevent *
wd_event_reserve(__u16 kind, __u8 verdict, __s32 err)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 cgid = bpf_get_current_cgroup_id();
	struct wd_kevent *e =
	    wd_event_reserve_at(sizeof(*e), kind, verdict, err, cgid,
				bpf_map_lookup_elem(&wd_policy, &cgid), t);
	if (e) {
		wd_event_zero_rest(e);
		e->path[0] = 0;
	}
	return e;
}

/* A record without a path (WD_KEV_SHORT_SIZE bytes: see lib/events.h):
 * e->path is outside the reservation, and the verifier refuses a program
 * that touches it. The caller writes family .. arg2. */
static __always_inline struct wd_kevent *
wd_event_reserve_short_pol(__u16 kind, __u8 verdict, __s32 err, __u64 cgid,
			   struct wd_call_policy *pol, struct task_struct *t)
{
	return wd_event_reserve_at(WD_KEV_SHORT_SIZE, kind, verdict, err, cgid,
				   pol, t);
}

/* Submit a record from wd_event_reserve, waking the consumer only as the
 * wake-up policy in lib/events.h says (WD_WAKE_GAP_NS). The ring's fill
 * is asked for at most once per WD_WAKE_GAP_FULL_NS per CPU: two
 * bpf_ringbuf_query calls on every record of a flood (the consumer_pos
 * they read is written by the consumer's CPU) were ~30 ns of a denied
 * connect()'s ~340 ns program. */
static __always_inline void wd_event_submit(struct wd_kevent *e)
{
	__u32 idx = WD_STATE_WAKE_NS, cidx = WD_STATE_FULL_CHECK_NS;
	/* a per-call ring's reader waits on that ring alone: the node-wide
	 * wake-up gap below would let another ring's wake-up silence it */
	if (wd_call_rings_on) {
		bpf_ringbuf_submit(e, 0);
		return;
	}
	__u64 *last = bpf_map_lookup_elem(&wd_loss, &idx);
	if (!last) {
		bpf_ringbuf_submit(e, 0); /* kernel default: adaptive */
		return;
	}
	__u64 now = e->ts_ns, gap = now - *last;
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (gap >= WD_WAKE_GAP_NS) {
		flags = BPF_RB_FORCE_WAKEUP;
	} else if (gap >= WD_WAKE_GAP_FULL_NS) {
		__u64 *checked = bpf_map_lookup_elem(&wd_loss, &cidx);
		if (checked && now - *checked >= WD_WAKE_GAP_FULL_NS) {
			*checked = now;
			if (bpf_ringbuf_query(&wd_events, BPF_RB_AVAIL_DATA) *
				2 >=
			    bpf_ringbuf_query(&wd_events, BPF_RB_RING_SIZE))
				flags = BPF_RB_FORCE_WAKEUP;
		}
	}
	if (flags == BPF_RB_FORCE_WAKEUP)
		*last = now;
	bpf_ringbuf_submit(e, flags);
}

#endif
