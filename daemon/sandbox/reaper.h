/* Teardown off the caller's path: what is left of a call once every
 * process of it is dead (its cgroup directories, BPF attachments, call
 * directory) is removed by one background thread of the library, so the
 * result returns without waiting for those directory removals.
 *
 * Nothing leaks: the queue is drained (waited for) at process exit (an
 * atexit handler: `warden exec` leaves nothing behind) and by
 * wd_reaper_drain(). A job submitted from a forked child, or when the
 * thread cannot start, or while the queue is long, runs inline. A process
 * killed with -9 before the drain leaves what a killed call always left:
 * the start-up sweep removes it (the call directory's owner lock is free).
 */
#ifndef WD_REAPER_H
#define WD_REAPER_H

/* Run fn(arg) on the reaper thread (or now, inline; see above). fn must
 * not block on anything the submitting thread holds. */
void wd_reaper_submit(void (*fn)(void *arg), void *arg);
/* Wait until every job submitted so far has run. */
void wd_reaper_drain(void);
/* This process runs one call and exits (a one-shot `warden exec`): its
 * jobs run inline. The thread would only be started for one job and
 * waited for at exit (a clone, its stack and a malloc arena of its own:
 * ~0.1 ms of CPU a call). */
void wd_reaper_inline(void);

#endif
