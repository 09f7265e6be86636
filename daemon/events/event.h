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
};

enum wd_verdict { WD_VERDICT_DENIED, WD_VERDICT_AUDITED };

struct wd_event {
	uint64_t ts_ns;	    /* CLOCK_REALTIME */
	uint64_t cgroup_id; /* the call's v2 cgroup id, 0 if unknown */
	char call_id[40];   /* filled when the cgroup maps to a call */
	int32_t pid;
	uint32_t uid;
	enum wd_event_source source;
	char kind[24];	    /* "syscall", "connect", "sendmsg", "socket",
			     * "file_open", "exec", "ptrace", "kill", ... */
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
/* JSON object with the fields above (names as in `warden events --json`). */
json_t *wd_event_to_json(const struct wd_event *e);

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
