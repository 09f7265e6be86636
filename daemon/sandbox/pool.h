/* Warm pool of tier-3 (gVisor) sandboxes.
 *
 * Each sandbox is booted ahead of need for one sandbox shape (a key: the
 * manifest, the argv, the uid/gid it runs as), serves exactly one call and
 * is destroyed after it: nothing of one call can reach the next. A
 * background thread keeps `size` ready sandboxes per registered key,
 * replaces any that have idled longer than `idle_ms`, and refills after
 * each take. A call with no ready sandbox (a miss: pool empty, key not
 * registered, or the tenant over its quota) is a cold start and counted.
 *
 * Keys are bounded: a key no call has used for `key_idle_ms` is dropped
 * with its ready sandboxes (new argv shapes, users and the policy sets a
 * reload retires would otherwise stay warm forever), and registering a key
 * beyond `max_keys` evicts the least recently used one. So at most
 * max_keys x size sandboxes are ever warm. Evicted sandboxes are destroyed
 * (runsc delete, cgroups, bundle) by the refill thread, not by the call
 * that caused the eviction. A call of an evicted shape is a cold start and
 * registers it again.
 *
 * A manifest given to wd_pool_register() must outlive its keys: before
 * freeing it, call wd_pool_forget() (the runtime does, for each policy set
 * a reload retired, once its last run ended).
 */
#ifndef WD_POOL_H
#define WD_POOL_H

#include <stdint.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"

struct wd_pool_config {
	int size;	      /* ready sandboxes kept per key (default 2) */
	int tenant_quota;     /* warm sandboxes one tenant may hold at once
			       * (0 = no quota) */
	uint32_t idle_ms;     /* a ready sandbox older than this is replaced
			       * (0 = 60 s) */
	uint32_t key_idle_ms; /* a key unused (no register, no call) for this
			       * long is dropped, its sandboxes destroyed
			       * (0 = 10 min) */
	int max_keys;	      /* keys kept at most; one more evicts the least
			       * recently used (0 = 32) */
};

struct wd_pool_stats {
	uint64_t hits, misses, quota_misses; /* quota_misses are in misses */
	uint64_t spawned, spawn_failures, expired, used;
	uint64_t evicted_idle, evicted_cap; /* keys dropped, by cause */
	int ready, spawning, in_use, keys;
};

struct wd_pool;

/* NULL + errno. Starts the refill thread. */
struct wd_pool *wd_pool_new(const struct wd_pool_config *cfg);
/* Stops the thread and destroys every ready sandbox. */
void wd_pool_free(struct wd_pool *p);

/* Keep sandboxes warm for this shape. argv NULL = manifest exec. Checks the
 * manifest can run in tier 3 at all (0 or -errno with err). */
int wd_pool_register(struct wd_pool *p, const struct wd_manifest *m,
		     char *const *argv, uid_t uid, gid_t gid,
		     struct wd_err *err);

/* Run one call: a warm sandbox of the call's shape if one is ready and the
 * tenant is under quota, else a cold start. Contract as wd_sandbox_run()
 * (the call's identity must already be the effective one, never 0). */
int wd_pool_run(struct wd_pool *p, const struct wd_call *call,
		const char *tenant, struct wd_result *res, struct wd_err *err);

/* Block until every registered key has `size` ready sandboxes or
 * `timeout_ms` passes. 0 or -ETIMEDOUT. */
int wd_pool_wait_ready(struct wd_pool *p, uint32_t timeout_ms);
/* Drop every key of this manifest (their ready sandboxes are destroyed by
 * the refill thread) and wait until the pool no longer reads it. */
void wd_pool_forget(struct wd_pool *p, const struct wd_manifest *m);

void wd_pool_stats(struct wd_pool *p, struct wd_pool_stats *out);
json_t *wd_pool_stats_json(const struct wd_pool_stats *s);

#endif
