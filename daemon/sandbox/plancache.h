/* Tier 2's mount plan (sandbox/mounts.h), made once per manifest shape
 * and reused by the calls that follow: planning reads the host (realpath,
 * stat, symlink chains; ~0.2 ms a call). Every tier-2 call mounts its new
 * root on the same host directory (in its own mount namespace), so the
 * plan depends only on what the key holds: the root, the manifest's
 * filesystem lists and memory_mb. A different manifest (or a reloaded one
 * that changed any of these) has a different key and never gets another's
 * plan. What the plan read of the host is trusted for WD_PLAN_TTL_NS: after
 * that the plan is made again (a stale one can only fail a mount, and the
 * call with it; Landlock's rules are made per call). */
#ifndef WD_PLANCACHE_H
#define WD_PLANCACHE_H

#include "common/util.h"
#include "policy/manifest.h"
#include "sandbox/mounts.h"

#define WD_PLAN_TTL_NS (1000ull * 1000000ull)

/* The plan for (root, m): *plan is valid until wd_plan_put(*ref). 0 or
 * -errno with a message. */
int wd_plan_get(struct wd_mount_plan **plan, void **ref, const char *root,
		const struct wd_manifest *m, struct wd_err *err);
void wd_plan_put(void *ref);
/* Forget every cached plan (those in use go with their last put). */
void wd_plan_cache_clear(void);

#endif
