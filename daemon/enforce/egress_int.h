/* Internal to the egress owner: egress.c (load, attach, consume) and
 * egress_pin.c (the pinned, load-once-per-boot instance). */
#ifndef WD_ENFORCE_EGRESS_INT_H
#define WD_ENFORCE_EGRESS_INT_H

#include <bpf/bpf.h>
#include <pthread.h>
#include <unistd.h>

#include "enforce/egress.h"
#include "events/ringbuf.h"
#include "lib/policy.h"
#include "egress_unix.h"

/* enum bpf_attach_type (6.7); Debian 12's uapi header stops earlier */
#define WD_ATTACH_UNIX_CONNECT ((enum bpf_attach_type)49)
#define WD_ATTACH_UNIX_SENDMSG ((enum bpf_attach_type)50)

/* The call's programs: the four inet ones, the two unix ones, then
 * bind4 and bind6. */
#define WD_EG_NPROG 12
/* from here on: the DNS programs, attached to a call whose allow-list
 * names hosts only (wd_egress_dns) */
#define WD_EG_FIRST_DNS 8
/* keep-warm programs: inet connect/sendmsg, bind, then the two unix ones
 * (loaded where the call's unix programs are: unix_ok) */
#define WD_EG_NKEEP	8
#define WD_EG_KEEP_UNIX 6

struct wd_egress_call {
	uint64_t cgid;
	/* Attached with BPF_PROG_ATTACH, not as bpf links: a link belongs to
	 * the fds of the process that made it, so a supervisor killed with
	 * -9 took the call's egress programs with it while the tool lived
	 * on. Attached this way they belong to the cgroup: they stay until
	 * wd_egress_detach or until the cgroup is removed (a start-up sweep
	 * does that for a dead supervisor's calls). */
	int cgfd;	   /* dup of the call's cgroup fd, for the detach */
	unsigned attached; /* bit i: progs_of()[i] is attached */
	struct wd_egress_key *keys; /* inserted rule keys, for detach */
	int n_keys;
	struct wd_unix_key *ukeys; /* unix path rules, for detach */
	int n_ukeys;
	/* addresses the call's resolver answered (wd_egress_answer): not
	 * in keys, removed when their TTL ends or at detach */
	struct wd_egress_key *dkeys;
	int n_dkeys;
	struct wd_egress_call *next;
};

struct wd_egress {
	struct egress_bpf *skel; /* this process's own load; NULL when pinned */
	bool pinned;		 /* fds below from bpffs (egress_pin.c), ours */
	/* the call's programs (progs_of order; -1: not loaded) and the
	 * keep-warm ones, with their attach types */
	int prog_fd[WD_EG_NPROG];
	int keep_fd[WD_EG_NKEEP];
	/* maps user space writes or reads */
	int policy_fd, rules_fd, unix_fd, loss_fd, events_fd, rings_fd;
	/* pinned: wd_ring_slot (cgroup id -> slot), wd_ring_owner (slot ->
	 * the cgroup id of the call holding it), and the slot and ring this
	 * process's call holds (-1: none; bpf/lib/maps.h) */
	int slot_fd, owner_fd;
	int own_slot, own_ring_fd;
	uint64_t own_cgid;
	bool discard; /* on_sample drops records (a reused ring's leftovers) */
	struct wd_ringbuf *rb; /* events/ringbuf.h */
	pthread_mutex_t lock;  /* calls, keep */
	struct wd_egress_call *calls;
	int keep[WD_EG_NKEEP]; /* wd_egress_keep_warm's link fds, or -1 */
	bool keep_tried;
	bool keep_pinned; /* the keep links are the pinned ones */
	char *pin_hd;	  /* pinned: the directory of the pins (egress_pin.c) */
	int pin_dfd;	  /* pinned: an O_PATH fd of pin_hd, or -1 */
	/* pinned: the keep-warm programs as wd_version recorded them (id 0:
	 * not pinned); keep_fd is opened only when a link must be made */
	uint32_t keep_id[WD_EG_NKEEP];
	uint8_t keep_tag[WD_EG_NKEEP][8];
	bool unix_ok; /* connect_unix/sendmsg_unix loaded (6.7+) */
	/* one consumer at a time: the ring reader and the fields below
	 * are not safe to share (sandbox/native.c drains from every call's
	 * thread) */
	pthread_mutex_t consume_lock;
	int poll_ep;	  /* wd_egress_poll's epoll: the ring, edge-triggered */
	uint64_t invalid; /* records rejected by validation */
	uint64_t dropped; /* read, but no consumer could take them */
	/* set for the duration of one wd_egress_consume */
	void (*cb)(const struct wd_event *ev, void *arg);
	void *cb_arg;
	int64_t boot_to_wall;
	int delivered;
	int records;	       /* read by this wd_egress_consume, any kind */
	uint64_t last_read_ns; /* CLOCK_MONOTONIC of the last record read */
	uint64_t btw_ns;       /* when boot_to_wall was computed */
};

/* The pinned object's shared ring: with per-call rings on nothing is
 * written to it (bpf/lib/maps.h), so its smallest size. */
#define WD_RING_PINNED ((uint32_t)sysconf(_SC_PAGESIZE))

/* names (as pinned, and as in bpf/egress.bpf.c) and attach types */
extern const char *const wd_eg_prog_names[WD_EG_NPROG];
extern const enum bpf_attach_type wd_eg_prog_at[WD_EG_NPROG];
extern const char *const wd_eg_keep_names[WD_EG_NKEEP];
extern const enum bpf_attach_type wd_eg_keep_at[WD_EG_NKEEP];

/* egress.c */
struct wd_egress *wd_egress_new(void); /* every fd -1 */
/* Open and load the skeleton into e->skel (ring `ring` bytes, the unix
 * programs or not, per-call rings on or off: bpf/lib/maps.h). */
int wd_egress_load_skel(struct wd_egress *e, uint32_t ring, bool with_unix,
			bool call_rings, struct wd_err *err);
void wd_egress_fds_from_skel(struct wd_egress *e);
/* e->rb and e->poll_ep on ring_fd. */
int wd_egress_open_ring(struct wd_egress *e, int ring_fd, struct wd_err *err);
/* The ring reader's callback (egress_events.c): one record to a wd_event
 * for the consumer's cb, counted delivered or invalid. */
int wd_egress_on_sample(void *ctx, void *data, size_t size);

/* egress_pin.c */
/* Pinned e: keep the static keys on with links pinned beside the
 * programs (see the function); false: not done, the caller holds links of
 * its own instead. */
bool wd_egress_pin_keep(struct wd_egress *e, const char *dir);
/* Delete every entry of cgid in the pinned maps (policy, rules, unix
 * rules, ring slot). */
void wd_egress_pin_purge(struct wd_egress *e, uint64_t cgid);
/* Claim a free per-call ring slot for cgid (its ring made on first use of
 * the slot), read it from now on (e->rb), and file it in wd_ring_slot.
 * -EBUSY if every slot is held. */
int wd_egress_pin_claim(struct wd_egress *e, uint64_t cgid, struct wd_err *err);
/* Undo wd_egress_pin_claim: the slot is free, e->rb gone (nothing of this
 * process reads that ring again). Safe for a cgid never claimed. */
void wd_egress_pin_release(struct wd_egress *e, uint64_t cgid);

/* egress_unix.c: a unix rule of call c (v 1 allows the paths under
 * path[0..len), v 0 denies them), and the deny rules for host resolvers'
 * sockets (wd_egress_dns); under e->lock; 0 / -errno with err set. */
int wd_egress_add_ukey(struct wd_egress *e, struct wd_egress_call *c,
		       const char *path, size_t len, uint32_t v,
		       struct wd_err *err);
int wd_egress_deny_resolver_sockets(struct wd_egress *e,
				    struct wd_egress_call *c,
				    struct wd_err *err);

#endif
