/* The empty network namespace tier-1 calls without network share.
 *
 * Abstract unix names and ports belong to a network namespace: a tool in
 * the host's can bind one that a host client then drives. Tier 2 unshares
 * a namespace per call; tier 1 (host namespaces otherwise) joins this
 * one, made once per process, because making and destroying a namespace
 *  costs each call 1.1-2.5 ms on the development machines (measured
 * under load: fork+exec of /bin/true 1.3-3.2 ms, with unshare(CLONE_NEWNET)
 * 2.4-5.2 ms, with setns() into a held one no more than without; tests/bench
 * bench_spawn: tier-1 spawn must stay within 1.5x fork+exec). Sharing it
 * is safe only with what else holds between its calls: loopback stays
 * down (no route to any address, 127.0.0.1 included), the egress
 * programs refuse every connect and send of a call with an empty
 * allow-list, bind4/6 refuse every port, listen() is refused, and
 * Landlock's abstract-unix scope (ABI 6) keeps each call from connecting
 * or sending to another call's abstract names. Without that scope the
 * sandbox gives the call a namespace of its own instead.
 */
#ifndef WD_SANDBOX_NETNS_H
#define WD_SANDBOX_NETNS_H

#include "common/util.h"

#include <pthread.h>
#include <stdbool.h>

/* A new empty network namespace, made on a thread of its own while the
 * caller goes on setting up the call (the kernel's ~0.5 ms of making one
 * is then off the call's path on a machine with a second core): begin,
 * then end for its fd. Every begin needs its end. */
struct wd_netns_job {
	pthread_t t;
	bool running; /* the thread was started and not yet joined */
	int fd;	      /* the namespace, or -errno */
	const char *step;
};
void wd_netns_begin(struct wd_netns_job *j);
/* Joins the thread: the namespace's fd (the caller's to close), or -errno
 * with a message. */
int wd_netns_end(struct wd_netns_job *j, struct wd_err *err);

/* Starts making the shared one (below) if it is not made yet: a later
 * wd_netns_empty_fd then only waits for what is left of it. */
void wd_netns_empty_begin(void);
/* An fd of the shared namespace (owned by the process: never close it),
 * made on first use; thread-safe. -errno with a message when it cannot be
 * made (later calls retry). */
int wd_netns_empty_fd(struct wd_err *err);

#endif
