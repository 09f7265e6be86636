/* The shared empty network namespace: see netns.h. */
#include "sandbox/netns.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

struct mk {
	int fd; /* or -errno */
	const char *step;
};

/* On a thread of its own: unshare(CLONE_NEWNET) changes the calling
 * thread's namespace only, and this thread ends right after; the fd keeps
 * the namespace alive. */
static void *mk_main(void *arg)
{
	struct mk *k = arg;
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

int wd_netns_empty_fd(struct wd_err *err)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static int fd = -1;
	pthread_mutex_lock(&mu);
	if (fd < 0) {
		struct mk k = {.fd = -EINVAL, .step = "thread"};
		pthread_t t;
		int e = pthread_create(&t, NULL, mk_main, &k);
		if (e)
			k.fd = -e;
		else
			pthread_join(t, NULL);
		if (k.fd < 0) {
			pthread_mutex_unlock(&mu);
			return wd_err_set(err, k.fd,
					  "network: cannot make the empty "
					  "network namespace: %s: %s",
					  k.step, strerror(-k.fd));
		}
		fd = k.fd;
	}
	int r = fd;
	pthread_mutex_unlock(&mu);
	return r;
}
