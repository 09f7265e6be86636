/* Fencing (fleet.h "Fencing"): a run this node holds starts a side effect
 * only while its lease is certainly still valid. A lease renewed by a
 * heartbeat that began at local monotonic time t0 runs out in the
 * database at its now() + lease, and the database's now() is at or after
 * t0: the lease is certain until t0 + lease - a margin (for clocks that
 * run at slightly different rates). A heartbeat also says which held runs
 * it renewed: a held run it did not renew was taken by another node's
 * reaper (interrupted, or queued again) and is lost for good. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "fleet/fleet_int.h"

/* lease/5: the heartbeat comes every lease/3, so a node that reaches its
 * database is never uncertain */
static uint64_t certain_ns(const struct wd_fleet *f)
{
	return (uint64_t)f->lease_ms * 1000000ull * 4 / 5;
}

/* Under mu. */
static enum wd_rt_fence verdict_locked(struct wd_fleet *f, const char *id,
				       char *why, size_t n)
{
	const char *lost = json_string_value(json_object_get(f->lost, id));
	if (lost) {
		snprintf(why, n, "%s", lost);
		return WD_RT_FENCE_LOST;
	}
	if (json_object_get(f->local, id))
		/* a hash_only agent's run of this node's own (queue.c
		 * wd_fleet_submit): no row, no lease, nobody else runs it */
		return WD_RT_FENCE_OK;
	if (!json_object_get(f->held, id)) {
		/* a run of this node's state from before a restart: the
		 * fleet had it interrupted at the registration */
		snprintf(why, n,
			 "this node does not hold it (it restarted or left "
			 "the fleet since the run started)");
		return WD_RT_FENCE_LOST;
	}
	uint64_t since = f->hb_ok_ns, now = wd_now_ns();
	uint64_t at =
	    (uint64_t)json_integer_value(json_object_get(f->held_at, id));
	if (at > since)
		since = at;
	if (since && now < since + certain_ns(f))
		return WD_RT_FENCE_OK;
	snprintf(why, n, "no lease renewal for %llu ms (lease %u ms)%s%s",
		 since ? (unsigned long long)((now - since) / 1000000ull)
		       : 0ull,
		 f->lease_ms, f->db_error[0] ? ": " : "", f->db_error);
	return WD_RT_FENCE_UNSURE;
}

enum wd_rt_fence fl_fence(void *arg, const char *run_id, uint64_t wait_ns,
			  char *why, size_t why_len)
{
	struct wd_fleet *f = arg;
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += (time_t)(wait_ns / 1000000000ull);
	dl.tv_nsec += (long)(wait_ns % 1000000000ull);
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->mu);
	enum wd_rt_fence v;
	while ((v = verdict_locked(f, run_id, why, why_len)) ==
		   WD_RT_FENCE_UNSURE &&
	       wait_ns &&
	       pthread_cond_timedwait(&f->fence_cond, &f->mu, &dl) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&f->mu);
	return v;
}

void fl_fence_claimed_locked(struct wd_fleet *f, const char *lid, uint64_t t0)
{
	json_object_set_new(f->held_at, lid, json_integer((json_int_t)t0));
}

void fl_fence_forget_locked(struct wd_fleet *f, const char *lid)
{
	json_object_del(f->held_at, lid);
	json_object_del(f->lost, lid);
}

void fl_fence_renewed(struct wd_fleet *f, json_t *before, PGresult *r,
		      uint64_t t0)
{
	/* the local ids renewed: a run queued again and claimed anew runs
	 * under id-aN (queue.c fl_claim_one) */
	json_t *renewed = json_object();
	for (int i = 0; i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		long attempt = strtol(PQgetvalue(r, i, 1), NULL, 10);
		char lid[64];
		if (attempt > 0)
			snprintf(lid, sizeof(lid), "%s-a%ld", id, attempt);
		else
			snprintf(lid, sizeof(lid), "%s", id);
		json_object_set_new(renewed, lid, json_true());
	}
	pthread_mutex_lock(&f->mu);
	size_t i;
	json_t *v;
	int n = 0;
	/* held before the heartbeat began and not renewed by it: no longer
	 * `running` here in the database (claims and end writes are this
	 * thread's: none happened meanwhile; an end not written yet is still
	 * `running` there) */
	json_array_foreach(before, i, v)
	{
		const char *lid = json_string_value(v);
		if (json_object_get(renewed, lid) ||
		    !json_object_get(f->held, lid) ||
		    json_object_get(f->lost, lid))
			continue;
		json_object_set_new(f->lost, lid,
				    json_string("the fleet database has it no "
						"longer running on this node: "
						"its lease ran out and another "
						"node took it"));
		n++;
	}
	f->hb_ok_ns = t0;
	pthread_cond_broadcast(&f->fence_cond);
	pthread_mutex_unlock(&f->mu);
	json_decref(renewed);
	if (n)
		wd_warn("fleet: %d run%s held here lost (their lease ran out "
			"and another node took them): no tool with side "
			"effects starts for them; they end interrupted",
			n, n == 1 ? "" : "s");
}
