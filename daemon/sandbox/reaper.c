/* Teardown off the caller's path: see reaper.h. */
#include "sandbox/reaper.h"
#include "common/util.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* more than this many jobs waiting: the submitter runs its own (a flood
 * of calls must not pile up an unbounded backlog of live directories) */
#define REAP_QUEUE_MAX 64

struct job {
	void (*fn)(void *arg);
	void *arg;
	struct job *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t cv_idle = PTHREAD_COND_INITIALIZER;
static struct job *head, **tail = &head;
static int queued;
static bool busy, started, failed, inline_only;
static pid_t owner; /* the process whose thread runs the queue */

static void *reaper_main(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!head)
			pthread_cond_wait(&cv_work, &mu);
		struct job *j = head;
		head = j->next;
		if (!head)
			tail = &head;
		queued--;
		busy = true;
		pthread_mutex_unlock(&mu);
		j->fn(j->arg);
		free(j);
		pthread_mutex_lock(&mu);
		busy = false;
		if (!head)
			pthread_cond_broadcast(&cv_idle);
	}
	return NULL;
}

void wd_reaper_drain(void)
{
	pthread_mutex_lock(&mu);
	if (started && owner == getpid())
		while (head || busy)
			pthread_cond_wait(&cv_idle, &mu);
	pthread_mutex_unlock(&mu);
}

static void drain_at_exit(void)
{
	wd_reaper_drain();
}

/* with mu held */
static bool start_locked(void)
{
	if (started)
		return owner == getpid();
	if (failed)
		return false;
	pthread_t th;
	sigset_t all, old;
	/* signals stay with the process's own threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = wd_thread_start(&th, 256 << 10, true, reaper_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0 || atexit(drain_at_exit) != 0) {
		/* without the exit drain a job could be lost: inline only */
		failed = true;
		if (r == 0)
			started = true, owner = -1;
		return false;
	}
	started = true;
	owner = getpid();
	return true;
}

void wd_reaper_submit(void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&mu);
	if (inline_only || queued >= REAP_QUEUE_MAX || !start_locked()) {
		pthread_mutex_unlock(&mu);
		fn(arg);
		return;
	}
	struct job *j = wd_calloc(1, sizeof(*j));
	j->fn = fn;
	j->arg = arg;
	*tail = j;
	tail = &j->next;
	queued++;
	pthread_cond_signal(&cv_work);
	pthread_mutex_unlock(&mu);
}

void wd_reaper_inline(void)
{
	pthread_mutex_lock(&mu);
	inline_only = true;
	pthread_mutex_unlock(&mu);
}
