/* A denial (or audit) event, whatever mechanism produced it. This is the
 * user-space form; kernel records (bpf/lib/events.h) are validated and
 * converted into it. One ordered node-wide stream carries these
 * (daemon/events/), and `warden exec --json` returns its call's ones.
 */
#ifndef WD_EVENT_H
#define WD_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

enum wd_event_source {
	WD_SRC_SECCOMP,	 /* seccomp user-notify supervisor */
	WD_SRC_BPF,	 /* cgroup sock_addr programs */
	WD_SRC_LSM,	 /* BPF LSM programs */
	WD_SRC_LANDLOCK, /* Landlock audit records */
	WD_SRC_GVISOR,	 /* runsc logs */
	WD_SRC_SANDBOX,	 /* the sandbox itself (e.g. oom kill, pids limit) */
	WD_SRC_RESOLVER, /* a call's resolver (names in network.allow) */
};

enum wd_verdict { WD_VERDICT_DENIED, WD_VERDICT_AUDITED };

#define WD_EVENT_KIND_LEN 48

struct wd_event {
	uint64_t ts_ns;	    /* CLOCK_REALTIME */
	uint64_t cgroup_id; /* the call's v2 cgroup id, 0 if unknown */
	char call_id[40];   /* filled when the cgroup maps to a call */
	int32_t pid;
	uint32_t uid;
	enum wd_event_source source;
	/* "syscall", "connect", "sendmsg", "socket", "file_open", "exec",
	 * "ptrace", "kill", Landlock blockers ("fs.read_file",
	 * "scope.abstract_unix_socket", ...): room for the longest with
	 * margin (WD_EVENT_KIND_LEN). The kernel record (bpf/lib/events.h)
	 * carries a kind number, not this string: this size is user-space
	 * only. */
	char kind[WD_EVENT_KIND_LEN];
	int32_t syscall_nr; /* -1 if not a syscall event */
	char syscall[32];   /* name, "" if unknown */
	int32_t err;	    /* errno returned to the program (positive) */
	char target[256];   /* "10.0.0.1:443", "/etc/shadow", ... */
	enum wd_verdict verdict;
	/* Attribution the daemon adds when the cgroup maps to a call of a
	 * run ("" / -1 when unknown). */
	char run_id[40];
	int32_t step;  /* -1 unknown (set by the publisher) */
	char tool[64]; /* gen_ai.tool.name */
	char agent[64];
	char team[64];
	uint64_t domain_id; /* Landlock domain id (source landlock), else 0 */
};

const char *wd_event_source_name(enum wd_event_source s);

/* A denial's target as a hash_only run keeps it: "sha256:<hex>" of the
 * target, a network target (source bpf or resolver, kind connect or
 * sendmsg) with its ":PORT" kept. A target already in that form is kept
 * as is. Written to out (at least 80 bytes). */
void wd_event_hashed_target(const char *target, const char *source,
			    const char *kind, char *out, size_t len);
/* The same in place on an event (broker.c, before it leaves the call). */
void wd_event_hide_target(struct wd_event *e);

/* The name given to a denial at a cgroup/sendmsg4,6 hook. The hook runs
 * inside udp_sendmsg()/udpv6_sendmsg() for sendto(2), sendmsg(2) and
 * sendmmsg(2) alike, and nothing in its context says which one the program
 * called (the hook sees a struct bpf_sock_addr, not the syscall; reading
 * /proc/PID/syscall afterwards would race with the program). So the record
 * names the family honestly and carries no syscall_nr rather than a guess. */
#define WD_EVENT_SENDMSG_SYSCALLS "sendto/sendmsg/sendmmsg"

/* Set e->syscall_nr and e->syscall (libseccomp's table, the one seccomp
 * records use) for syscall `nr` of audit architecture `arch` (AUDIT_ARCH_*,
 * which is libseccomp's SCMP_ARCH_*; 0 = native). An unknown number keeps
 * its number and gets the name "?". */
void wd_event_set_syscall(struct wd_event *e, uint32_t arch, int nr);
/* Fill what a producer left out but the record can say: the name of a
 * known syscall number; the sendmsg family for a sendmsg-hook denial.
 * Idempotent. */
void wd_event_complete(struct wd_event *e);
/* e->syscall, or the name wd_event_complete() would give when the producer
 * left it empty and no lookup is needed ("" if none). */
const char *wd_event_syscall_name(const struct wd_event *e);
/* JSON object with the fields above (names as in `warden events --json`). */
json_t *wd_event_to_json(const struct wd_event *e);

/* wd_event_to_json(e) written into a typed trace record (trace/recw.h) as
 * member `key` (NULL: an array element), without jansson: the broker's
 * denial records. Same members, same order. */
struct wd_recw;
void wd_event_recw(struct wd_recw *w, const char *key,
		   const struct wd_event *e);

/* The members of wd_event_to_json(e), as json_dumps(JSON_COMPACT) writes
 * them ("ts":"...",...,"verdict":"denied"; no braces, no NUL), written
 * into buf without allocating: the event stream renders every line with
 * this (jansson took ~7 us per event). One difference: a string that is
 * not valid UTF-8 keeps its member, each invalid byte written as U+FFFD
 * (wd_event_to_json drops such a member). Returns the length, at most
 * WD_EVENT_JSON_MAX. */
#define WD_EVENT_JSON_MAX 4608
size_t wd_event_json_members(const struct wd_event *e, char *buf);

#endif
