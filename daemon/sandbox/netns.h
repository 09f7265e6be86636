/* The empty network namespace tier-1 calls without network share, and
 * the node's pin of it.
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
 *
 * One per boot, pinned. A one-shot `warden exec` is a process per call:
 * a namespace per process cost each such call unshare(CLONE_NEWNET)
 * (0.8 ms of its CPU) and the kernel's cleanup_net (0.5-0.6 ms in a
 * kworker; perf record -a over 100 calls of /usr/bin/true). So the
 * shared namespace is bind-mounted (as `ip netns add` does) on
 * $WARDEN_NETNS_PIN, default WD_NETNS_PIN_DEFAULT, and every later
 * one-shot call and wardend joins that one (warden's CPU per call of
 * /usr/bin/true: 4.80 -> 4.18 ms, perf stat task-clock, 6 x 100 calls).
 *  - Where: a node path of its own, not under $WARDEN_RUNTIME_DIR, as
 *    the BPF pins have $WARDEN_BPF_PIN_DIR: tests point the runtime dir
 *    at a temporary one they `rm -rf`, which a mount would make fail
 *    (EBUSY) and leak a namespace per test; with the pin apart they all
 *    share the node's one. A mount does not outlive a boot, so the pin
 *    is keyed by boot for free: after a reboot (with /run on tmpfs) the
 *    path is gone, or, elsewhere, an empty plain file, and a new one is
 *    made.
 *  - Trust, failing closed: every directory on the pin's path, / down
 *    to its own, is root's and not writable by group or others (above
 *    its own, sticky ones of root's such as /tmp are fine), and none is
 *    a symlink (walked with O_PATH | O_NOFOLLOW): else the pin is not
 *    used at all, nor made (tests/integration/exec_netns.sh
 *    pin-ancestor-*); what is opened there
 *    is used only if it is a network namespace (NS_GET_NSTYPE), owned by
 *    our own user namespace (NS_GET_USERNS: in another one its owner
 *    could add links whenever it likes) and empty: one RTM_GETLINK dump
 *    from inside (on the thread that opens it, setns'ed) finds lo alone
 *    and down. setns + the dump cost ~22 us (thread CPU, measured on the
 *    development machines), on the thread that runs beside the call's
 *    set-up. A call without capabilities cannot change the namespace it
 *    is in; root can, or put another namespace there: anything but an
 *    empty one is reported and replaced, never joined. What holds it
 *    empty after we looked is root's restraint (the same holds for a
 *    namespace only wardend's fd holds: /proc/PID/fd reaches it).
 *  - A running process follows the pin: every call lstat()s it (~1.4 us
 *    of thread CPU, tests/integration/daemon_netns_repin.sh) and
 *    compares what is mounted there (st_dev/st_ino) with the namespace
 *    it judged; when root replaced it, unmounted it, or what held it
 *    went away, the pin is judged again as at first (joined, replaced,
 *    or made) and the new namespace dup3()'ed onto the held fd, whose
 *    number never changes: a call that read it just before joins the
 *    old one, also judged. A process on a private namespace stays on it.
 *  - Races: the pin is made and replaced under a flock of "PIN.lock"
 *    (rename cannot move a mountpoint, so it is done in place): every
 *    layer mounted there is unmounted, a plain file left, and a new
 *    namespace mounted on it. A reader that opened the pin as it was
 *    being replaced sees a plain file or the old namespace, and takes
 *    the lock to look again.
 *  - Fallback: if the pin cannot be made or trusted (no mount
 *    permission, a read-only file system, a directory others can write),
 *    the process makes a private namespace as before: a call never runs
 *    without an empty namespace.
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
	struct wd_aside t;
	bool running; /* the thread was started and not yet joined */
	int fd;	      /* the namespace, or -errno */
	const char *step;
	/* the shared one's: joined from the pin; what was wrong with it
	 * (-errno and what, else 0) */
	bool pinned;
	int pin_err;
	const char *pin_what;
};
void wd_netns_begin(struct wd_netns_job *j);
/* Joins the thread: the namespace's fd (the caller's to close), or -errno
 * with a message. */
int wd_netns_end(struct wd_netns_job *j, struct wd_err *err);

#define WD_NETNS_PIN_DEFAULT "/run/warden/netns-empty"
/* $WARDEN_NETNS_PIN, else WD_NETNS_PIN_DEFAULT */
const char *wd_netns_pin_path(void);

/* Starts making the shared one (below) if it is not made yet: a later
 * wd_netns_empty_fd then only waits for what is left of it. */
void wd_netns_empty_begin(void);
/* An fd of the shared namespace (owned by the process: never close it):
 * the pinned one, checked, or made and pinned; a private one where it
 * cannot be pinned. Opened on first use, judged again when the pin no
 * longer shows it (above); thread-safe. -errno with a message when it
 * cannot be made (later calls retry). */
int wd_netns_empty_fd(struct wd_err *err);

#endif
