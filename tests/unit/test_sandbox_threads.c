/* Tiers 1 and 2 called from a threaded process, as wardend does: calls run
 * from several threads while another thread keeps creating and joining
 * threads. Tier 1's first process is a raw clone3 of this process, so any
 * glibc call in it that walks the (copied) thread list or takes a lock
 * another thread held at clone time would hang it until its timeout; every
 * call here must finish ok, long before that.
 * Then denials of concurrent calls: the BPF ring buffer is shared and any
 * call's supervisor drains it, yet each call must get exactly its own
 * denials, none of another call's. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "policy/manifest.h"
#include "sandbox/sandbox.h"
#include "t.h"

#define NTHREADS 4
#define NCALLS	 40

static atomic_bool stop;

static void *idle(void *arg)
{
	return arg;
}

/* Threads being born and dying all the time, and a malloc arena busy. */
static void *churn(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		pthread_t t;
		void *p = malloc(4096);
		if (pthread_create(&t, NULL, idle, p) == 0)
			pthread_join(t, NULL);
		free(p);
	}
	return NULL;
}

struct job {
	const struct wd_manifest *m;
	int ok, slow, failed;
	char why[256];
};

static void *caller(void *arg)
{
	struct job *j = arg;
	for (int i = 0; i < NCALLS; i++) {
		struct wd_call c = {
		    .manifest = j->m, .caller_uid = 65534, .caller_gid = 65534};
		struct wd_result r;
		struct wd_err e = {0};
		memset(&r, 0, sizeof(r));
		int rc = wd_sandbox_run(&c, &r, &e);
		if (rc < 0) {
			j->failed++;
			snprintf(j->why, sizeof(j->why), "%s", e.msg);
		} else if (r.status == WD_ST_TIMEOUT) {
			j->slow++;
		} else if (r.status == WD_ST_OK) {
			j->ok++;
		} else {
			j->failed++;
			snprintf(j->why, sizeof(j->why), "status %s: %.*s",
				 wd_status_name(r.status), (int)r.err.len,
				 r.err.data ? r.err.data : "");
		}
		wd_result_free(&r);
	}
	return NULL;
}

/* The manifest in yaml, or NULL after failing check `name`. */
static struct wd_manifest *load(const char *name, const char *yaml)
{
	struct wd_manifest *m = NULL;
	struct wd_diag d = {0};
	if (wd_manifest_load_str(name, yaml, strlen(yaml), &m, &d) < 0)
		T_FAIL(name, "%s", d.n ? d.msgs[0] : "?");
	wd_diag_free(&d);
	return m;
}

static void run_tier(int tier)
{
	char yaml[512], name[64];
	snprintf(yaml, sizeof(yaml),
		 "name: t%d\ntier: %d\nexec: [/usr/bin/true]\n"
		 "filesystem: {read: [/usr/lib, /lib64, /etc/ld.so.cache], "
		 "exec: [/usr/bin/true]}\n"
		 "timeout_ms: 5000\n",
		 tier, tier);
	snprintf(name, sizeof(name), "t%d/manifest", tier);
	struct wd_manifest *m = load(name, yaml);
	if (!m)
		return;
	atomic_store(&stop, false);
	pthread_t ch, th[NTHREADS];
	struct job jobs[NTHREADS];
	memset(jobs, 0, sizeof(jobs));
	pthread_create(&ch, NULL, churn, NULL);
	for (int i = 0; i < NTHREADS; i++) {
		jobs[i].m = m;
		pthread_create(&th[i], NULL, caller, &jobs[i]);
	}
	int ok = 0, slow = 0, failed = 0;
	const char *why = "";
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		ok += jobs[i].ok;
		slow += jobs[i].slow;
		failed += jobs[i].failed;
		if (jobs[i].why[0])
			why = jobs[i].why;
	}
	atomic_store(&stop, true);
	pthread_join(ch, NULL);
	snprintf(name, sizeof(name), "t%d/threaded-calls-finish", tier);
	T_OK(slow == 0, name, "%d of %d calls hung until their timeout", slow,
	     NTHREADS * NCALLS);
	snprintf(name, sizeof(name), "t%d/threaded-calls-ok", tier);
	T_OK(ok == NTHREADS * NCALLS, name, "%d ok, %d failed (%s)", ok, failed,
	     why);
	wd_manifest_free(m);
}

#define DENY_CALLS 6
#define DENY_EACH  5

struct djob {
	const struct wd_manifest *m;
	int rc, n_bpf, n_other, status;
	char call_id[40];
	bool foreign; /* an event naming another call */
};

static void *deny_caller(void *arg)
{
	struct djob *j = arg;
	struct wd_call c = {
	    .manifest = j->m, .caller_uid = 65534, .caller_gid = 65534};
	struct wd_result r;
	struct wd_err e = {0};
	memset(&r, 0, sizeof(r));
	j->rc = wd_sandbox_run(&c, &r, &e);
	j->status = r.status;
	snprintf(j->call_id, sizeof(j->call_id), "%s", r.call_id);
	for (int i = 0; i < r.n_denials; i++) {
		if (r.denials[i].source == WD_SRC_BPF)
			j->n_bpf++;
		else
			j->n_other++;
		j->foreign |= strcmp(r.denials[i].call_id, r.call_id) != 0;
	}
	wd_result_free(&r);
	return NULL;
}

static void run_denials(const char *probe)
{
	char yaml[1024];
	snprintf(yaml, sizeof(yaml),
		 "name: deny\ntier: 1\nexec: [/usr/bin/dash, -c, \"for i in "
		 "1 2 3 4 5; do %s connect4 127.0.0.1 9; done; true\"]\n"
		 "filesystem: {read: [/usr/lib, /lib64, /etc/ld.so.cache], "
		 "exec: [/usr/bin/dash, %s]}\n"
		 "network: {allow: []}\ntimeout_ms: 10000\n",
		 probe, probe);
	struct wd_manifest *m = load("deny/manifest", yaml);
	if (!m)
		return;
	pthread_t th[DENY_CALLS];
	struct djob jobs[DENY_CALLS];
	memset(jobs, 0, sizeof(jobs));
	for (int i = 0; i < DENY_CALLS; i++) {
		jobs[i].m = m;
		pthread_create(&th[i], NULL, deny_caller, &jobs[i]);
	}
	int ok = 0, exact = 0, total = 0;
	bool foreign = false;
	char why[256] = "";
	for (int i = 0; i < DENY_CALLS; i++) {
		pthread_join(th[i], NULL);
		ok += jobs[i].rc == 0 && jobs[i].status == WD_ST_OK;
		exact += jobs[i].n_bpf == DENY_EACH;
		total += jobs[i].n_bpf;
		foreign |= jobs[i].foreign;
		if (jobs[i].n_bpf != DENY_EACH)
			snprintf(why, sizeof(why), "call %s got %d",
				 jobs[i].call_id, jobs[i].n_bpf);
	}
	T_OK(ok == DENY_CALLS, "deny/concurrent-calls-ok", "%d of %d ok", ok,
	     DENY_CALLS);
	T_OK(total == DENY_CALLS * DENY_EACH, "deny/n-denials-n-events",
	     "%d denials caused, %d reported", DENY_CALLS * DENY_EACH, total);
	T_OK(exact == DENY_CALLS && !foreign, "deny/each-call-its-own",
	     "%d of %d calls got exactly their %d denials (%s)", exact,
	     DENY_CALLS, DENY_EACH, why);
	wd_manifest_free(m);
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("sandbox-threads", "needs root");
		return 0;
	}
	run_tier(1);
	run_tier(2);
	/* the probe helper, built next to this test: tests/helpers/probe */
	char exe[4096], probe[4200];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	snprintf(probe, sizeof(probe), "%s/../helpers/probe", exe);
	char *real = realpath(probe, NULL);
	if (!real || access(real, X_OK))
		T_SKIP("deny/concurrent",
		       "no probe helper at %s (make "
		       "tests-build)",
		       probe);
	else
		run_denials(real);
	free(real);
	return T_DONE();
}
