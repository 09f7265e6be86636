/* Tier 2's mount plan cache (sandbox/plancache.h): one plan per manifest
 * shape; a different manifest, a reloaded one that changed, another root
 * or an expired entry never gets a cached plan. And the reaper thread
 * (sandbox/reaper.h) runs every job before the process can leave. */
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "policy/manifest.h"
#include "sandbox/plancache.h"
#include "sandbox/reaper.h"
#include "t.h"

static struct wd_manifest *load(const char *read, unsigned mb)
{
	char y[512];
	struct wd_manifest *m = NULL;
	struct wd_diag d = {0};
	snprintf(y, sizeof(y),
		 "name: pc\ntier: 2\nmemory_mb: %u\n"
		 "filesystem: {read: [\"%s\"], exec: [\"/usr/bin/true\"]}\n",
		 mb, read);
	if (wd_manifest_load_str("pc", y, strlen(y), &m, &d) < 0)
		return NULL;
	return m;
}

static atomic_int ran;

static void job(void *arg)
{
	struct timespec ts = {0, 2 * 1000 * 1000};
	nanosleep(&ts, NULL);
	atomic_fetch_add(&ran, *(int *)arg);
}

int main(void)
{
	struct wd_err err = {0};
	struct wd_manifest *a = load("/usr", 256), *a2 = load("/usr", 256),
			   *b = load("/etc", 256), *c = load("/usr", 512);
	if (!a || !a2 || !b || !c) {
		T_FAIL("plan_manifests", "manifest did not load");
		return T_DONE();
	}
	const char *root = "/run/warden-test-plan/root";
	struct wd_mount_plan *pa, *pa2, *pb, *pc, *pr, *pt;
	void *ra, *ra2, *rb, *rc, *rr, *rt;
	int r = wd_plan_get(&pa, &ra, root, a, &err);
	T_OK(r == 0, "plan_get", "%s", err.msg);
	if (r)
		return T_DONE();
	/* the same shape (also a manifest loaded again unchanged) */
	r = wd_plan_get(&pa2, &ra2, root, a2, &err);
	T_OK(r == 0 && pa2 == pa && ra2 == ra, "plan_reused_same_shape",
	     "r %d, %p vs %p", r, (void *)pa2, (void *)pa);
	/* a manifest reloaded with another read path: its own plan */
	r = wd_plan_get(&pb, &rb, root, b, &err);
	T_OK(r == 0 && pb != pa, "plan_not_reused_other_paths",
	     "r %d, same plan", r);
	r = wd_plan_get(&pc, &rc, root, c, &err);
	T_OK(r == 0 && pc != pa && pc != pb, "plan_not_reused_other_memory",
	     "r %d, a cached plan for another memory_mb", r);
	r = wd_plan_get(&pr, &rr, "/run/warden-test-plan/other", a, &err);
	T_OK(r == 0 && pr != pa, "plan_not_reused_other_root", "r %d", r);
	/* past its time the host is read again (the old one is still held
	 * here, so the new one cannot share its address) */
	struct timespec ts = {WD_PLAN_TTL_NS / 1000000000ull,
			      (WD_PLAN_TTL_NS % 1000000000ull) + 50000000};
	nanosleep(&ts, NULL);
	r = wd_plan_get(&pt, &rt, root, a, &err);
	T_OK(r == 0 && pt != pa, "plan_expires", "r %d, stale plan reused", r);
	/* the expired one stays valid for its holders until their put */
	wd_plan_put(ra);
	wd_plan_put(ra2);
	wd_plan_put(rb);
	wd_plan_put(rc);
	wd_plan_put(rr);
	wd_plan_cache_clear();
	struct wd_mount_plan *pn;
	void *rn;
	r = wd_plan_get(&pn, &rn, root, a, &err);
	T_OK(r == 0 && pn != pt, "plan_cache_clear", "r %d, plan kept", r);
	wd_plan_put(rt);
	wd_plan_put(rn);
	wd_plan_cache_clear();

	/* reaper: every job has run once wd_reaper_drain returns */
	static int one = 1;
	for (int i = 0; i < 20; i++)
		wd_reaper_submit(job, &one);
	wd_reaper_drain();
	T_OK(atomic_load(&ran) == 20, "reaper_drain_runs_all", "%d of 20 ran",
	     atomic_load(&ran));
	/* a forked child runs its jobs inline: no thread of ours there */
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		static int hundred = 100;
		int before = atomic_load(&ran);
		wd_reaper_submit(job, &hundred);
		_exit(atomic_load(&ran) == before + 100 ? 0 : 1);
	}
	int st = 0;
	waitpid(p, &st, 0);
	T_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reaper_inline_in_child",
	     "status %d", st);
	wd_manifest_free(a);
	wd_manifest_free(a2);
	wd_manifest_free(b);
	wd_manifest_free(c);
	return T_DONE();
}
