/* Tier 3: one gVisor sandbox (runsc) per call. wd_runner_gvisor (declared
 * in sandbox.h) is spawn + finish + destroy; the warm pool (pool.h) spawns
 * ahead of need and finishes at call time.
 *
 * A spawned sandbox has booted and started its program, whose stdin is a
 * pipe warden holds: a program reading its input first (run_python's
 * `python3 -`) waits there, fully loaded, for the call's stdin. Everything
 * that makes up the sandbox (argv, env, uid, mounts, limits) is fixed at
 * spawn; the call adds only stdin and the clock. One sandbox serves exactly
 * one call and is destroyed after it.
 */
#ifndef WD_GVISOR_H
#define WD_GVISOR_H

#include <stdbool.h>
#include <sys/types.h>

#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"

struct wd_t3 {
	char id[48];	/* runsc container id, also the cgroup leaf name */
	char dir[512];	/* bundle + logs */
	char root[256]; /* runsc --root */
	char runsc[256];
	struct wd_cgroup cg;
	pid_t shim;	  /* our child, the subreaper of `runsc run` */
	int in, out, err; /* our ends of the program's stdio */
	uint64_t spawned_ns;
	uid_t uid; /* the sandbox's own (sandbox/uidpool.h): OCI process.user */
	gid_t gid;
	/* a pooled sandbox's uid, held from its boot until it is destroyed
	 * (released then); NULL for a cold start, whose call holds it */
	struct wd_uid_lease *lease;
	bool finished;
	bool started; /* the boot log shows the program was started */
	/* network.allow non-empty: the call's link, filter and resolver
	 * (gvisor_net.c); NULL: --network=none */
	struct wd_t3_net *net;
};

/* Path of the runsc binary: $WARDEN_RUNSC, else `runsc` on $PATH. 0 or
 * -ENOENT with a message naming what is missing. */
int wd_t3_runsc_path(char *out, size_t len, struct wd_err *err);

/* Checks that need no sandbox: network.allow rules tier 3 can hold
 * (gvisor_net.c: IPv4, the node's own addresses), runsc must be there,
 * identity not 0. */
int wd_t3_precheck(const struct wd_manifest *m, uid_t uid, gid_t gid,
		   struct wd_err *err);

/* Boot a sandbox for manifest `m` running `argv` (NULL: m->exec). */
int wd_t3_spawn(const struct wd_manifest *m, char *const *argv, uid_t uid,
		gid_t gid, const char *id, struct wd_t3 **out,
		struct wd_err *err);

/* Give the call's stdin, collect output, enforce timeout_ms from now,
 * classify (ok/error/timeout/oom), read gVisor's denials. 0 when the call
 * was carried out, -errno when the sandbox failed (message in err). */
int wd_t3_finish(struct wd_t3 *s, const struct wd_manifest *m,
		 const struct wd_call *call, struct wd_result *res,
		 struct wd_err *err);

/* Kill whatever remains, `runsc delete --force`, remove cgroup and bundle.
 * NULL is fine. */
void wd_t3_destroy(struct wd_t3 *s);

/* Whether the sandbox's program is still alive (a pooled sandbox whose
 * program exited is still usable: its exit status and output are kept). */
bool wd_t3_alive(struct wd_t3 *s);

/* For the pool: wait until the sandbox has booted, exec'd its program and
 * gone idle (the program is blocked on its stdin, or done). 0, -ECHILD
 * (it died) or -ETIMEDOUT. */
int wd_t3_wait_settled(struct wd_t3 *s, uint32_t timeout_ms);

/* Enforcement entries of a tier-3 result (runner and pool). */
void wd_t3_enforcement(const struct wd_manifest *m, struct wd_t3 *s,
		       struct wd_result *res);

#endif
