/* The kernel -> user event record, written by every BPF program (egress and
 * LSM) into the shared ring buffer wd_events (bpf/lib/maps.h) and read by
 * daemon/enforce/egress.c (wd_egress_consume), which validates each record
 * (size, kind range) and converts it into struct wd_event. Records are
 * sizeof(struct wd_kevent), or WD_KEV_SHORT_SIZE without path (below).
 *
 * Fixed-width types and explicit padding; sizes and offsets asserted on
 * both sides and checked against the BPF object's BTF by
 * tests/unit/test_event_layout.c. Stable: do not reorder; append kinds.
 */
#ifndef WD_BPF_EVENTS_H
#define WD_BPF_EVENTS_H

#ifndef __bpf__
#include <linux/types.h>
#endif

enum wd_kev_kind {
	WD_KEV_NONE = 0, /* never emitted: a zeroed record is invalid */
	/* cgroup sock_addr (egress.bpf.c) */
	WD_KEV_CONNECT = 1, /* cgroup/connect4, connect6 (incl. TFO sendto) */
	WD_KEV_SENDMSG = 2, /* cgroup/sendmsg4, sendmsg6 (unconnected UDP) */
	/* BPF LSM (lsm.bpf.c) */
	WD_KEV_SOCKET_CREATE = 3,
	WD_KEV_SOCKET_CONNECT = 4,
	WD_KEV_FILE_OPEN = 5,
	WD_KEV_BPRM_CHECK = 6,
	WD_KEV_PTRACE = 7,
	WD_KEV_TASK_KILL = 8,
	WD_KEV_BPF = 9,
	WD_KEV_SB_MOUNT = 10,
	WD_KEV_MOVE_MOUNT = 11,
	WD_KEV_KMOD_REQUEST = 12,
	/* cgroup/connect_unix, sendmsg_unix (egress.bpf.c): path in path */
	WD_KEV_CONNECT_UNIX = 13,
	WD_KEV_SENDMSG_UNIX = 14,
	/* cgroup/bind4, bind6 (egress.bpf.c): a port bound without
	 * network.listen; addr and port are the requested local address */
	WD_KEV_BIND = 15,
	WD_KEV_KIND_MAX, /* first invalid value */
};

/* WD_KEV_BIND's arg: why a port was refused to a call with network.listen
 * (0: a call without it) */
#define WD_KEV_BIND_REUSEADDR 1 /* a datagram socket with SO_REUSEADDR */

/* wd_kevent.verdict */
enum wd_kev_verdict {
	WD_KEV_DENIED = 0,
	WD_KEV_AUDITED = 1, /* audit mode: would be denied, was allowed */
};

/* Consumer wake-ups (wd_event_submit, bpf/lib/maps.h). A wake-up costs the
 * producing CPU an irq_work (a self-IPI; a VM exit under virtualisation),
 * so a record wakes the consumer (BPF_RB_FORCE_WAKEUP) only when
 * WD_WAKE_GAP_NS have passed since its CPU last did, or when the ring is
 * at least half full and WD_WAKE_GAP_FULL_NS have passed (the fill is
 * looked at by a CPU at most once per WD_WAKE_GAP_FULL_NS: a ring filling
 * up is woken for at most that much later); every other record goes in
 * with BPF_RB_NO_WAKEUP. A sparse denial therefore wakes
 * the consumer at once, a flood at most once per gap per CPU.
 * Consumer's side of the contract: a record submitted without a wake-up
 * follows a wake-up on its CPU by less than WD_WAKE_GAP_NS, so a consumer
 * that keeps polling with a short bounded timeout for a while after it
 * last read a record (wd_egress_poll: 2 ms, for 50 ms) reads it within
 * that timeout. */
#define WD_WAKE_GAP_NS	    500000ULL
#define WD_WAKE_GAP_FULL_NS 50000ULL

#define WD_KEV_PATH_LEN 256
#define WD_KEV_COMM_LEN 16

struct wd_kevent {
	__u64 ts_ns;	 /* bpf_ktime_get_boot_ns() (CLOCK_BOOTTIME) */
	__u64 cgroup_id; /* v2 cgroup of the task */
	__u32 pid;	 /* thread id (kernel pid) */
	__u32 tgid;	 /* process id */
	__u32 uid;
	__u16 kind;   /* enum wd_kev_kind */
	__u16 family; /* AF_* of the socket / address; 0 if n/a */
	__s32 err; /* errno returned to the program (positive), 0 if audited */
	__u8 verdict;  /* enum wd_kev_verdict */
	__u8 protocol; /* IPPROTO_* / socket type, 0 if n/a */
	__u16 port;    /* destination port, host order; 0 if n/a */
	__u8 addr[16]; /* destination, network order; v4 as v4-mapped v6 */
	__u32 arg;     /* kind-specific: signal, target pid, bpf cmd, ... */
	__u32 arg2;    /* kind-specific: socket type, mount flags, ... */
	char comm[WD_KEV_COMM_LEN]; /* task comm */
	char path[WD_KEV_PATH_LEN]; /* file/exec/unix path, module name,
				     * NUL-terminated; "" if n/a */
};

_Static_assert(sizeof(struct wd_kevent) == 336, "wd_kevent size");
_Static_assert(__builtin_offsetof(struct wd_kevent, cgroup_id) == 8, "cgid");
_Static_assert(__builtin_offsetof(struct wd_kevent, pid) == 16, "pid");
_Static_assert(__builtin_offsetof(struct wd_kevent, tgid) == 20, "tgid");
_Static_assert(__builtin_offsetof(struct wd_kevent, uid) == 24, "uid");
_Static_assert(__builtin_offsetof(struct wd_kevent, kind) == 28, "kind");
_Static_assert(__builtin_offsetof(struct wd_kevent, family) == 30, "family");
_Static_assert(__builtin_offsetof(struct wd_kevent, err) == 32, "err");
_Static_assert(__builtin_offsetof(struct wd_kevent, verdict) == 36, "verdict");
_Static_assert(__builtin_offsetof(struct wd_kevent, protocol) == 37, "proto");
_Static_assert(__builtin_offsetof(struct wd_kevent, port) == 38, "port");
_Static_assert(__builtin_offsetof(struct wd_kevent, addr) == 40, "addr");
_Static_assert(__builtin_offsetof(struct wd_kevent, arg) == 56, "arg");
_Static_assert(__builtin_offsetof(struct wd_kevent, arg2) == 60, "arg2");
_Static_assert(__builtin_offsetof(struct wd_kevent, comm) == 64, "comm");
_Static_assert(__builtin_offsetof(struct wd_kevent, path) == 80, "path");

/* A record of a kind that never carries a path (egress connect/sendmsg)
 * is written short: its first WD_KEV_SHORT_SIZE bytes, everything before
 * path (88 bytes in the ring with the header instead of 344: four times
 * the events per ring byte). Readers take a record of at least this size
 * and treat the path of a short one as "". */
#define WD_KEV_SHORT_SIZE 80
_Static_assert(__builtin_offsetof(struct wd_kevent, path) == WD_KEV_SHORT_SIZE,
	       "short record = everything before path");

#endif
