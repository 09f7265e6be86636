/* The broker's rate limiter (check 4 of broker.h): "N/unit per
 * run|user|agent" from a manifest's rate_limit, shared by every run of the
 * daemon.
 *
 * Memory is bounded: each key (tool, scope, who) holds a fixed ring of
 * WD_RL_SLOTS counters, not a timestamp per call, so a 30000/min tool costs
 * what a 1/min one does; a run's keys are dropped when the run ends
 * (wd_ratelimit_forget), and any key whose window has passed with nothing
 * taken is evicted as the table is used (user and agent keys included).
 *
 * Exactness: never more than N calls in any window of the configured
 * length (per_s). The window is kept as WD_RL_SLOTS buckets of
 * per_s / (WD_RL_SLOTS - 1) each; a call is counted until its whole bucket
 * has left the window, so a taken token comes back between 1 and
 * 1 + 1/(WD_RL_SLOTS - 1) windows after it was taken (a 60/min limit may
 * refuse for up to ~2 s longer than an exact log would), never earlier. */
#ifndef WD_RATELIMIT_H
#define WD_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WD_RL_SLOTS 32

struct wd_ratelimit;
struct wd_ratelimit *wd_ratelimit_new(void);
void wd_ratelimit_free(struct wd_ratelimit *rl);
/* Take one token for `key`, owned by `who` (the run id, user or agent the
 * key's scope names), if fewer than `count` were taken in the last `per_s`
 * seconds (at now_ns, a monotonic clock). true = allowed (and counted). */
bool wd_ratelimit_take(struct wd_ratelimit *rl, const char *who,
		       const char *key, int count, int per_s, uint64_t now_ns);
/* Drop every key owned by `who` (a run that ended). */
void wd_ratelimit_forget(struct wd_ratelimit *rl, const char *who);
/* Keys held now, and the bytes they take (for tests and /metrics). */
size_t wd_ratelimit_keys(struct wd_ratelimit *rl, size_t *bytes);

#endif
