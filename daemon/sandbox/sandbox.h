/* Run one tool call in the sandbox its manifest asks for.
 *
 *   struct wd_call c = { .manifest = m, .argv = argv, ... };
 *   struct wd_result r;
 *   int rc = wd_sandbox_run(&c, &r, &err);
 *
 * wd_sandbox_run() returns 0 when the call was carried out (whatever the
 * program's own outcome: see r.status) and -errno when the sandbox could not
 * be set up — then nothing was started (fail closed) and err names the
 * constraint and the missing mechanism. Everything the call created (cgroup,
 * BPF map entries, mounts, scratch, processes) is gone when it returns.
 */
#ifndef WD_SANDBOX_H
#define WD_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "common/util.h"
#include "events/event.h"
#include "policy/manifest.h"

enum wd_status {
	WD_ST_OK,      /* exited 0 */
	WD_ST_ERROR,   /* exited non-zero or killed by a signal */
	WD_ST_TIMEOUT, /* timeout_ms reached: everything killed */
	WD_ST_OOM,     /* memory limit reached */
	WD_ST_SANDBOX_ERROR,
};
const char *wd_status_name(enum wd_status s);

struct wd_call {
	const struct wd_manifest *manifest;
	char *const *argv;	/* command; NULL -> manifest exec */
	const char *stdin_data; /* may be NULL */
	size_t stdin_len;
	/* The calling user: the authorisation principal, and the owner of
	 * the files the call leaves in its write paths (a root caller's go
	 * to each path's own owner). Not the identity the tool runs as. */
	uid_t caller_uid;
	gid_t caller_gid;
	/* The call's own uid/gid (sandbox/uidpool.h), set by
	 * wd_sandbox_run() for the runners; never the caller's. */
	uid_t run_uid;
	gid_t run_gid;
	const char *call_id; /* NULL -> generated */
	const char *tenant;  /* team, for the tier-3 pool quota; may be NULL */
	/* Called for each denial while the call runs (from the supervising
	 * thread); may be NULL. Denials are also collected in the result. */
	void (*on_event)(const struct wd_event *e, void *arg);
	void *on_event_arg;
	/* never through the warm pool (a cold start): for a manifest that
	 * does not outlive the pool (a replay's, parsed for it alone, and
	 * its replay environment), which a pool key must */
	bool no_pool;
};

/* Per-mechanism state reported in results and `warden status`. */
struct wd_enforcement {
	char name[32];	/* "landlock", "seccomp", "bpf_egress", "cgroup", ... */
	char state[96]; /* "enforced", "audit", "not needed", ... */
};

struct wd_result {
	enum wd_status status;
	int exit_code; /* the program's, 128+sig if killed, 124 timeout */
	struct wd_buf out, err;
	bool truncated;
	int tier;
	uint64_t duration_ns;
	struct wd_event *denials;
	int n_denials;
	int lost_denials; /* events the call caused but could not record */
	/* every event handed to wd_result_add_denial, kept or lost, by
	 * enum wd_verdict; of them, those from the kernel programs (BPF,
	 * LSM sources) */
	uint64_t seen[2], seen_kernel[2];
	/* the kernel's own count for the call (wd_egress_call_counts):
	 * it includes events whose records the ring buffer had no room
	 * for; valid when has_kernel_counts */
	uint64_t kernel_counts[2];
	bool has_kernel_counts;
	struct wd_enforcement enf[16];
	int n_enf;
	char call_id[40];
	uid_t run_uid; /* the call's own identity; 0 if none was allocated */
	gid_t run_gid;
	/* set by a runner that could not see every process of the call
	 * die: the uid's release then looks for them itself */
	bool procs_left;
};

/* How many denials and audits a call made, whether or not each was kept
 * in the result or even reached user space: n[] by enum wd_verdict;
 * untraced = those of n[] that are not in the result's denials[] (over
 * its cap, lost in the kernel's ring buffer). */
struct wd_denial_counts {
	uint64_t n[2];
	uint64_t untraced;
};
void wd_result_denial_counts(const struct wd_result *r,
			     struct wd_denial_counts *out);

int wd_sandbox_run(const struct wd_call *call, struct wd_result *res,
		   struct wd_err *err);

/* The call's own uid (sandbox/uidpool.h) for *in: *out is *in with
 * run_uid/run_gid set, res records them, *ls holds the uid until
 * wd_sandbox_identity_end() (after the runner returned: it releases the
 * uid once the runner's teardown is done). 0 or -errno with err (range
 * exhausted, a write path the uid cannot be given): nothing may run. */
struct wd_uid_lease;
int wd_sandbox_identity(const struct wd_call *in, struct wd_call *out,
			struct wd_uid_lease **ls, struct wd_result *res,
			struct wd_err *err);
void wd_sandbox_identity_end(struct wd_uid_lease *ls,
			     const struct wd_result *res);

/* Route tier-3 calls through a warm pool (daemon; NULL = cold starts, as
 * `warden exec` does). Each call's shape is registered on first use, so
 * the next call of that tool by that user finds a sandbox ready. The
 * manifests must outlive the pool. */
struct wd_pool;
void wd_sandbox_use_pool(struct wd_pool *p);
/* The supervisor's own OOM protection (oom_score_adj -900, below every
 * tool): set once per process; 0, or -errno when the kernel refused it
 * (lowering it takes CAP_SYS_RESOURCE). */
int wd_sandbox_protect_self(void);

/* Remove what calls killed mid-flight (a daemon killed with -9) left
 * behind: call directories and warden cgroups with no process. Returns the
 * number removed. Called at daemon start. */
int wd_sandbox_sweep(void);
/* Make the call directory calldir (its parent exists) owned by this
 * process: the directory locked (flock) through *fd until it is closed,
 * which the kernel does when the process dies; it appears under its name
 * locked already. 0 or -errno (with err). */
int wd_sandbox_own_calldir(const char *calldir, int *fd, struct wd_err *err);
/* Give the call directory calldir, locked through fd, back as a spare
 * for the next call's wd_sandbox_own_calldir: true if it was empty and is
 * one now (fd closed); false: nothing done, remove it. */
bool wd_sandbox_spare_calldir(const char *calldir, int fd);
void wd_result_free(struct wd_result *r);
json_t *wd_result_to_json(const struct wd_result *r);

/* Helpers for runners */
void wd_result_add_denial(struct wd_result *r, const struct wd_event *e);
void wd_result_enf(struct wd_result *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Tier runners: the table wd_sandbox_run() dispatches through. Tier 3 lives
 * in sandbox/gvisor.c. */
struct wd_runner {
	int tier;
	int (*run)(const struct wd_call *call, struct wd_result *res,
		   struct wd_err *err);
};
extern const struct wd_runner wd_runner_native; /* tiers 1 and 2 */
extern const struct wd_runner wd_runner_gvisor; /* tier 3 */

#endif
