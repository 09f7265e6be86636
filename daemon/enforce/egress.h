/* Egress enforcement: the owner of the egress BPF object
 * (bpf/egress.bpf.c: cgroup/connect4, connect6, sendmsg4, sendmsg6, and
 * inbound's bind4, bind6) and of
 * the maps every warden BPF object shares (bpf/lib/maps.h): the per-call
 * policy, the egress allow-list, the event ring buffer and the per-CPU loss
 * counters.
 *
 * Lifecycle: open once per process (wd_egress_open, or the process-wide
 * wd_egress_shared()); for each tool call, wd_egress_attach() after the
 * call's v2 cgroup exists and before the tool starts, wd_egress_detach()
 * when the call ends, whatever happened. The object is thread-safe (one
 * mutex around the per-call table, one around consuming: concurrent
 * consumers are serialized, each getting the records it drained; which
 * call's events those are is the consumer's to check, by cgroup_id).
 *
 * Errors: 0 or -errno, with a message in `err` where the signature has one.
 */
#ifndef WD_ENFORCE_EGRESS_H
#define WD_ENFORCE_EGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"
#include "events/event.h"
#include "policy/manifest.h"

struct wd_egress;

struct wd_egress_opts {
	/* Ring buffer size in bytes (wd_egress_ring_check). 0 = the default
	 * (WD_EGRESS_RING_DEFAULT, 4 MiB: ~43k egress events, 88 bytes each
	 * as short records plus the ring's 8-byte header; ~11k events with a
	 * path, 344 bytes). A smaller ring loses a flood sooner: wardend's
	 * --event-ring-bytes, and the tests that provoke losses. */
	uint32_t ring_bytes;
};

#define WD_EGRESS_RING_DEFAULT (4u << 20)
#define WD_EGRESS_RING_MAX     (1u << 30)

/* A ring buffer size the kernel takes (BPF_MAP_TYPE_RINGBUF: max_entries a
 * power of two and a multiple of the page size) within
 * [page size, WD_EGRESS_RING_MAX]: 0, or -EINVAL with a message naming
 * the rule it breaks. */
int wd_egress_ring_check(uint64_t bytes, struct wd_err *err);

/* Open, size and load the BPF object (libbpf logs go through the warden
 * logger). Nothing is attached yet. -EPERM/-EINVAL etc. from the kernel
 * with a message naming the step. */
int wd_egress_open(struct wd_egress **out, struct wd_err *err);
int wd_egress_open_opts(struct wd_egress **out, const struct wd_egress_opts *o,
			struct wd_err *err);
/* The node's pinned instance (egress_pin.c): the object loaded once per
 * boot and build, its programs and maps pinned under
 * $WARDEN_BPF_PIN_DIR (default /sys/fs/bpf/warden) in a directory named
 * by the hash of the object's bytes; bpffs is mounted on the pin dir's
 * parent if it is not one. Pins of another build are never used: they
 * are removed and ours made (temp dir + rename, under a lock on the pin
 * dir). A pin dir not root's or writable by others, or pins that cannot
 * be checked or replaced: refused (-EPERM, -ESTALE..., message in err).
 * Records of its calls go to this process's own ring (bpf/lib/maps.h
 * wd_call_rings), so processes sharing the programs never read each
 * other's. Map entries of calls whose cgroup is gone (a crashed caller)
 * are removed on open, and a call's id is purged before its entries are
 * written. */
int wd_egress_open_pinned(struct wd_egress **out, struct wd_err *err);
/* A process-wide instance, opened on first use (thread-safe): its own
 * load (wardend: its own ring, one consumer), or the pinned one once
 * wd_egress_shared_use_pins(true) was called (a one-shot `warden exec`).
 * NULL with the error in `err` if it cannot load; later calls retry.
 * Never closed. */
struct wd_egress *wd_egress_shared(struct wd_err *err);
void wd_egress_shared_use_pins(bool on);
/* The pinned instance of a process whose calls name no host in
 * network.allow (a one-shot `warden exec` that has read its manifest):
 * the four programs that only DNS redirection attaches (recvmsg4,6,
 * getpeername4,6: wd_egress_dns) are not opened, 12 bpf()/close calls
 * fewer. A call that names hosts on it anyway is refused by
 * wd_egress_dns ("not loaded"), never run without them. Set before the
 * instance is opened. */
void wd_egress_pins_no_names(bool on);
/* The process-wide instance if a call has opened it, else NULL (never
 * opens it: a loss probe must not load BPF programs). */
struct wd_egress *wd_egress_shared_peek(void);
/* Options of the process-wide instance, set before its first use (wardend
 * at start): 0; -EINVAL for a size wd_egress_ring_check refuses; -EBUSY
 * once the instance is open with other options (it is never reopened). */
int wd_egress_shared_set_opts(const struct wd_egress_opts *o,
			      struct wd_err *err);
/* The ring buffer's size in bytes, as the kernel holds it. */
uint32_t wd_egress_ring_size(struct wd_egress *e);
/* The process-wide instance's: as open, or as it will open. */
uint32_t wd_egress_shared_ring_size(void);

/* Put a call's policy in the maps, then attach the four programs to its
 * cgroup (bpf links on cgroup_fd, an fd of the call's cgroup v2 directory
 * whose id is cgid). Rules with needs_resolve are resolved here with
 * getaddrinfo (every address of the name, each as a /128 or v4 /32 with the
 * rule's port); a name that does not resolve fails the attach (-EHOSTUNREACH,
 * fail closed). cgroup_fd -1: the policy and rules only, no program
 * attached (tier 3: the programs holding the call are tc programs on its
 * link, enforce/t3net.h). families_mask: bit n = AF n may be used; 0 = no
 * family check here (seccomp holds that line). audit: allow and report what
 * would be denied. On failure nothing stays attached or in the maps. -EEXIST if
 * the cgid is already attached. */
int wd_egress_attach(struct wd_egress *e, int cgroup_fd, uint64_t cgid,
		     const struct wd_net_rule *rules, int n, bool audit,
		     uint64_t families_mask, struct wd_err *err);
/* Keep the kernel's cgroup-BPF static keys on for the life of `e`: attach
 * allow-all programs of every type a call uses to `dir` (a cgroup v2
 * directory that runs no process and is above no call leaf:
 * sandbox/cgroup.h wd_cgroup_keep_dir), once;
 * later calls return at once. Without it each attach and detach of a lone
 * call patches kernel text on every CPU. Failure only costs that time
 * (logged at debug level). The programs never deny: a call's own programs
 * still judge. A pinned `e` (one-shot calls) attaches them through links
 * pinned for the boot (egress_pin.c) and returns true: `dir` must then
 * stay (sandbox/cgroup.h wd_cgroup_parents_keep); false: the links go with
 * `e`. */
bool wd_egress_keep_warm(struct wd_egress *e, const char *dir);
/* Unix sockets (cgroup/connect_unix, sendmsg_unix; kernel 6.7+): the
 * programs attached by wd_egress_attach deny every pathname, abstract and
 * unnamed connect/sendmsg of the call except to paths under `paths` (the
 * manifest's filesystem.write: in Unix semantics connecting needs write
 * permission on the socket). Judged on the path as written: absolute, no
 * ".." component. A path too long for any sun_path below it is skipped.
 * Call after wd_egress_attach, before the tool starts. 0 or -errno. */
int wd_egress_allow_unix(struct wd_egress *e, uint64_t cgid, char *const *paths,
			 int n, struct wd_err *err);
/* Inbound (bpf/egress.bpf.c: cgroup/bind4, bind6, attached by
 * wd_egress_attach): a call may bind port 0 only (the kernel picks an
 * ephemeral one), and every other bind fails with EPERM and is recorded
 * (kind "bind"), until this lets it bind any port (network.listen: true).
 * Call after wd_egress_attach, before the tool starts. 0 or -errno. */
int wd_egress_allow_listen(struct wd_egress *e, uint64_t cgid,
			   struct wd_err *err);
/* Whether a call's names in network.allow can be held on this node (the
 * one test wd_egress_dns makes at call start and `warden status` shows):
 * unix sockets judged, by cgroup/connect_unix or the BPF LSM, so that no
 * host resolver on a unix socket answers the tool. false with why set
 * (e NULL: the programs did not load). */
bool wd_egress_names_ok(struct wd_egress *e, const char **why);

/* The unix programs loaded (false on kernels before 6.7). */
bool wd_egress_unix_ok(struct wd_egress *e);
/* This kernel has no cgroup/connect_unix (before 6.7): a program of that
 * attach type is refused with EINVAL. Only then may the egress object be
 * loaded without its unix programs; any other failure to load them is a
 * failure (fail closed), never a quiet downgrade. */
bool wd_egress_unix_hook_missing(void);
/* Detach the call's programs and delete its map entries. Safe to call for a
 * cgid that was never (or only partly) attached: returns -ENOENT then,
 * after removing whatever map entries exist for it. */
int wd_egress_detach(struct wd_egress *e, uint64_t cgid);
/* wd_egress_detach for a call whose cgroup is removed already: its
 * programs went with it (a removed cgroup holds no process, and the
 * kernel releases what is attached to it), only its entries go. */
int wd_egress_detach_removed(struct wd_egress *e, uint64_t cgid);
/* The events the kernel programs raised for an attached call so far
 * (wd_call_policy.n_denied/n_audited: counted whether or not the ring
 * buffer had room for the record). Read it once the call's processes are
 * dead, before wd_egress_detach. 0, or -ENOENT (not attached) / -errno. */
int wd_egress_call_counts(struct wd_egress *e, uint64_t cgid, uint64_t *denied,
			  uint64_t *audited);

/* The ring buffer's epoll-able fd. Readable after a wake-up, until the
 * next wd_egress_consume (edge-triggered: records still pending do not
 * keep it readable); records may also be pending without one (wake-up
 * policy: WD_WAKE_GAP_NS in bpf/lib/events.h), so a consumer that needs
 * them promptly bounds its wait with wd_egress_wait_bound() and drains
 * when the bound expires, or uses wd_egress_poll(). */
int wd_egress_events_fd(struct wd_egress *e);
/* The consumer loop's step: wait for records up to timeout_ms (-1 =
 * forever, 0 = not at all), then drain as wd_egress_consume does. While
 * records were read in the last 50 ms the wait is cut to 2 ms, so a record
 * submitted without a wake-up is read within ~2 ms. Returns the number of
 * events delivered (0 on timeout) or -errno. */
int wd_egress_poll(struct wd_egress *e, int timeout_ms,
		   void (*cb)(const struct wd_event *ev, void *arg), void *arg);
/* wd_egress_poll's wait alone (bounded the same way): 1 after a wake-up,
 * 0 on timeout (records may be pending all the same), or -errno. */
int wd_egress_wait(struct wd_egress *e, int timeout_ms);
/* The bound itself, for a consumer that waits in its own poll(): the
 * timeout to use instead of timeout_ms (-1 = forever); when it is shorter,
 * drain with wd_egress_consume() once it expires. */
int wd_egress_wait_bound(struct wd_egress *e, int timeout_ms);
/* Drain the ring buffer: each record is validated (size, kind range,
 * verdict) and converted to a struct wd_event (source bpf or bpf_lsm, wall
 * clock time, target "a.b.c.d:port" / "[v6]:port" / path). Invalid records
 * are counted (wd_egress_lost's `invalid`) and skipped. Returns the number
 * of events delivered or -errno. */
int wd_egress_consume(struct wd_egress *e,
		      void (*cb)(const struct wd_event *ev, void *arg),
		      void *arg);
/* Every record lost on the way from a BPF program to a consumer's
 * callback, by where it was lost (absolute counts since the open): */
struct wd_egress_loss {
	/* in the kernel: bpf_ringbuf_reserve failed (the ring was full),
	 * summed over CPUs (wd_loss[WD_LOSS_RINGBUF]) */
	uint64_t ringbuf;
	/* in the consumer: the record failed validation (size, kind,
	 * verdict) */
	uint64_t invalid;
	/* in the consumer's callback: read, but no one took it
	 * (wd_egress_count_dropped; wardend: no live call owned its cgroup,
	 * events/bpf_route.c) */
	uint64_t dropped;
};
/* 0, or -errno if the kernel counters could not be read (then ringbuf is
 * 0 and the user-space counts are still filled in). */
int wd_egress_loss(struct wd_egress *e, struct wd_egress_loss *out);
/* The three summed. */
int wd_egress_lost(struct wd_egress *e, uint64_t *lost);
/* A consumer's callback drops a record it read (no call to give it to):
 * counted as lost, never silent. */
void wd_egress_count_dropped(struct wd_egress *e);
/* Policy lookup misses (attached cgroup without a policy entry; denied). */
int wd_egress_policy_misses(struct wd_egress *e, uint64_t *misses);

/* Fds of the shared maps, for other BPF objects (bpf/lsm.bpf.c) to
 * bpf_map__reuse_fd() before their load, so every hook reads the same
 * policy and writes the same ring buffer. Owned by `e`: do not close. */
struct wd_egress_map_fds {
	int policy;	    /* wd_policy */
	int egress_rules;   /* wd_egress_rules */
	int events;	    /* wd_events */
	int loss;	    /* wd_loss */
	int call_rings;	    /* wd_call_rings */
	int ring_slot;	    /* wd_ring_slot */
	bool call_rings_on; /* the pinned instance: records per call */
};
void wd_egress_map_fds(struct wd_egress *e, struct wd_egress_map_fds *out);

/* Convert one kernel record (validated first). 0, or -EINVAL if the record
 * is malformed. `boot_to_wall_ns` = CLOCK_REALTIME - CLOCK_BOOTTIME. */
int wd_kevent_to_event(const void *data, size_t size, int64_t boot_to_wall_ns,
		       struct wd_event *out);

void wd_egress_close(struct wd_egress *e);

/* Names in network.allow: the call's DNS (port 53, any address) goes to
 * 127.0.0.1:port, its resolver (enforce/resolver.h), and a v6 socket's to
 * [::1]:port when v6 (it listens there too); attaches the
 * programs that show the asked-for address back. 0 / -errno. */
int wd_egress_dns(struct wd_egress *e, uint64_t cgid, uint16_t port, bool v6,
		  struct wd_err *err);
/* The call's resolver failed: its DNS is no longer redirected, so a
 * packet to port 53 is judged by the allow-list (denied: a manifest with a
 * name has no rule on 53) instead of waiting on a resolver that answers
 * nothing. 0 / -errno. */
int wd_egress_dns_off(struct wd_egress *e, uint64_t cgid);
/* Allow (add) or stop allowing a connect of the call to addr:port (0 =
 * any): an address its resolver answered, for the answer's TTL. A key of
 * the manifest's own rules is left alone. 0 / -errno. */
int wd_egress_answer(struct wd_egress *e, uint64_t cgid, const uint8_t addr[16],
		     uint16_t port, bool add);

#endif
