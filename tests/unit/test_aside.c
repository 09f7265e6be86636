/* wd_aside_start / wd_aside_join (common/util.h): a short job started on a
 * CPU other than its creator's, free to run anywhere of the creator's CPUs
 * once it runs; joined for its return value. With a single CPU allowed it
 * runs all the same (there is no other CPU to put it on). A job that cannot
 * start on the other CPUs (held by a real-time spinner here) is taken by the
 * joiner's CPU once the joiner waits for it.
 * aside/other-cpu fails on a plain pthread_create only on a kernel that
 * queues a new thread on its creator's CPU (ours: sched_vcpu_pack); where
 * the fork balancing picks an idle CPU the old code passes it as well. */
#include "t.h"

#include "common/util.h"

#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

struct seen {
	atomic_int started;
	int cpu;	/* where it started */
	cpu_set_t cpus; /* its affinity once running */
	int aff_rc;
};

static void *job(void *arg)
{
	struct seen *s = arg;
	s->cpu = sched_getcpu();
	s->aff_rc = sched_getaffinity(0, sizeof(s->cpus), &s->cpus);
	atomic_store(&s->started, 1);
	return (void *)0x5eed;
}

/* Start a job and keep this CPU busy (no blocking call) until it has
 * started or a second has gone. creator: our CPU just before and just after
 * the start (-1 if we moved in between). */
static int run(struct seen *s, int *creator, void **ret)
{
	struct wd_aside a;
	memset(s, 0, sizeof(*s));
	int before = sched_getcpu();
	int e = wd_aside_start(&a, 64 << 10, job, s);
	int after = sched_getcpu();
	*creator = before == after ? before : -1;
	if (e)
		return e;
	uint64_t until = wd_now_ns() + 1000000000ull;
	while (!atomic_load(&s->started) && wd_now_ns() < until)
		;
	*ret = wd_aside_join(&a);
	return 0;
}

/* The other CPU taken by a SCHED_FIFO spinner (a child process, for at
 * most 400 ms) while a job is started aside onto it: the join must not wait
 * for the spinner (without the join's widening the job ran only when the
 * spinner stopped). */
static void join_takes_waiting_job(const cpu_set_t *mine)
{
	const char *n = "aside/join-takes-waiting-job";
	int me = sched_getcpu(), other = -1;
	for (int c = 0; c < CPU_SETSIZE && other < 0; c++)
		if (c != me && CPU_ISSET(c, mine))
			other = c;
	int p[2];
	if (other < 0 || pipe(p) < 0) {
		T_FAIL(n, "no other CPU (%d) or pipe", other);
		return;
	}
	fflush(stdout); /* the child's copy is never written */
	pid_t pid = fork();
	if (pid == 0) {
		cpu_set_t o;
		CPU_ZERO(&o);
		CPU_SET(other, &o);
		struct sched_param sp = {.sched_priority = 1};
		char ok = sched_setaffinity(0, sizeof(o), &o) == 0 &&
			  sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
		if (write(p[1], &ok, 1) != 1 || !ok)
			_exit(1);
		uint64_t until = wd_now_ns() + 400000000ull;
		while (wd_now_ns() < until)
			;
		_exit(0);
	}
	close(p[1]);
	char ok = 0;
	if (pid < 0 || read(p[0], &ok, 1) != 1 || !ok) {
		close(p[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		T_SKIP(n, "no real-time spinner (not root?)");
		return;
	}
	close(p[0]);
	struct wd_aside a;
	struct seen s = {0};
	uint64_t t0 = wd_now_ns();
	int e = wd_aside_start(&a, 64 << 10, job, &s);
	void *ret = e ? NULL : wd_aside_join(&a);
	uint64_t ms = (wd_now_ns() - t0) / 1000000;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	T_OK(e == 0 && ret == (void *)0x5eed && ms < 100, n,
	     "start %d, joined after %llu ms (the spinner holds CPU %d for "
	     "400)",
	     e, (unsigned long long)ms, other);
}

int main(void)
{
	cpu_set_t mine;
	struct seen s;
	int creator;
	void *ret = NULL;
	if (sched_getaffinity(0, sizeof(mine), &mine) < 0) {
		T_FAIL("aside/affinity", "sched_getaffinity: %s",
		       strerror(errno));
		return T_DONE();
	}

	T_OK(run(&s, &creator, &ret) == 0, "aside/starts", "wd_aside_start");
	T_OK(ret == (void *)0x5eed, "aside/join-returns-value", "got %p", ret);
	T_OK(s.aff_rc == 0 && CPU_EQUAL(&s.cpus, &mine),
	     "aside/widened-once-running",
	     "the job's CPUs (%d of them) are not its creator's (%d)",
	     CPU_COUNT(&s.cpus), CPU_COUNT(&mine));
	if (CPU_COUNT(&mine) < 2) {
		T_SKIP("aside/other-cpu", "one CPU allowed: nowhere aside");
	} else {
		/* a creator that moved CPUs during the start tells nothing:
		 * tried a few times */
		int tries = 0;
		while (creator < 0 && tries++ < 20)
			run(&s, &creator, &ret);
		if (creator < 0)
			T_SKIP("aside/other-cpu", "the creator kept moving");
		else
			T_OK(s.cpu != creator, "aside/other-cpu",
			     "started on the creator's CPU %d while it was "
			     "busy",
			     creator);
	}

	if (CPU_COUNT(&mine) >= 2)
		join_takes_waiting_job(&mine);

	/* one CPU: no aside, the job still runs (once this thread joins) */
	int one = sched_getcpu();
	cpu_set_t single;
	CPU_ZERO(&single);
	CPU_SET(one, &single);
	if (sched_setaffinity(0, sizeof(single), &single) < 0) {
		T_FAIL("aside/single-cpu", "sched_setaffinity: %s",
		       strerror(errno));
	} else {
		struct wd_aside a;
		memset(&s, 0, sizeof(s));
		int e = wd_aside_start(&a, 0, job, &s);
		ret = e ? NULL : wd_aside_join(&a);
		T_OK(e == 0 && ret == (void *)0x5eed && s.cpu == one &&
			 CPU_COUNT(&s.cpus) == 1 && CPU_ISSET(one, &s.cpus),
		     "aside/single-cpu",
		     "start %d, ret %p, cpu %d (want %d), %d CPUs", e, ret,
		     s.cpu, one, CPU_COUNT(&s.cpus));
		sched_setaffinity(0, sizeof(mine), &mine);
	}
	return T_DONE();
}
