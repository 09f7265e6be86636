/* Empty network namespaces, made on a thread: see netns.h. */
#include "sandbox/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

/* On a thread of its own: unshare(CLONE_NEWNET) changes the calling
 * thread's namespace only, and this thread ends right after; the fd keeps
 * the namespace alive. */
static void *mk_main(void *arg)
{
	struct wd_netns_job *k = arg;
	k->step = "unshare(CLONE_NEWNET)";
	if (unshare(CLONE_NEWNET) < 0) {
		k->fd = -errno;
		return NULL;
	}
	k->step = "open /proc/thread-self/ns/net";
	k->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (k->fd < 0)
		k->fd = -errno;
	return NULL;
}

void wd_netns_begin(struct wd_netns_job *j)
{
	*j = (struct wd_netns_job){.fd = -EINVAL, .step = "thread"};
	int e = pthread_create(&j->t, NULL, mk_main, j);
	if (e)
		j->fd = -e;
	j->running = e == 0;
}

int wd_netns_end(struct wd_netns_job *j, struct wd_err *err)
{
	if (j->running)
		pthread_join(j->t, NULL);
	j->running = false;
	if (j->fd < 0)
		return wd_err_set(err, j->fd,
				  "network: cannot make an empty network "
				  "namespace: %s: %s",
				  j->step, strerror(-j->fd));
	return j->fd;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int shared_fd = -1;
static struct wd_netns_job shared_job; /* while .running: being made */

void wd_netns_empty_begin(void)
{
	pthread_mutex_lock(&mu);
	if (shared_fd < 0 && !shared_job.running)
		wd_netns_begin(&shared_job);
	pthread_mutex_unlock(&mu);
}

int wd_netns_empty_fd(struct wd_err *err)
{
	pthread_mutex_lock(&mu);
	if (shared_fd < 0) {
		if (!shared_job.running)
			wd_netns_begin(&shared_job);
		int fd = wd_netns_end(&shared_job, err);
		if (fd < 0) {
			pthread_mutex_unlock(&mu);
			return fd;
		}
		shared_fd = fd;
	}
	int r = shared_fd;
	pthread_mutex_unlock(&mu);
	return r;
}
