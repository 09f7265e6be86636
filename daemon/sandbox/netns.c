/* Empty network namespaces, made on a thread, and the node's pinned one:
 * see netns.h. */
#include "sandbox/netns.h"

#include "common/log.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* A new namespace for the calling thread, which must be a thread of its
 * own that ends soon after (unshare(CLONE_NEWNET) changes the calling
 * thread's namespace only): its fd, or -errno with *step set. */
static int mk_here(const char **step)
{
	*step = "unshare(CLONE_NEWNET)";
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	*step = "open /proc/thread-self/ns/net";
	int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static void *mk_main(void *arg)
{
	struct wd_netns_job *k = arg;
	k->fd = mk_here(&k->step);
	return NULL;
}

/* The jobs' threads need a few pages (a 16 KB netlink buffer, paths): a
 * stack of 256 KB, not glibc's 8 MB, whose unused part the exiting thread
 * hands back with an madvise over all of it (a one-shot call's thread, on
 * the other core while the call is set up). */
#define JOB_STACK (256 << 10)

static void job_start(struct wd_netns_job *j, void *(*fn)(void *))
{
	*j = (struct wd_netns_job){.fd = -EINVAL, .step = "thread"};
	int e = wd_aside_start(&j->t, JOB_STACK, fn, j);
	if (e)
		j->fd = -e;
	j->running = e == 0;
}

void wd_netns_begin(struct wd_netns_job *j)
{
	job_start(j, mk_main);
}

int wd_netns_end(struct wd_netns_job *j, struct wd_err *err)
{
	if (j->running)
		wd_aside_join(&j->t);
	j->running = false;
	if (j->fd < 0)
		return wd_err_set(err, j->fd,
				  "network: cannot make an empty network "
				  "namespace: %s: %s",
				  j->step, strerror(-j->fd));
	return j->fd;
}

const char *wd_netns_pin_path(void)
{
	const char *p = getenv("WARDEN_NETNS_PIN");
	return p && *p ? p : WD_NETNS_PIN_DEFAULT;
}

/* 0 when fd is a network namespace owned by our own user namespace, else
 * -EPERM (or -errno). The owner matters: whoever holds CAP_NET_ADMIN in
 * the owning user namespace (any user, for a user namespace of their own)
 * can add links or bring lo up at any time after we looked; in ours, only
 * root can, or enter it. */
static int ns_ours(int fd)
{
	int t = ioctl(fd, NS_GET_NSTYPE);
	if (t < 0)
		/* not an nsfs file: ENOTTY, EINVAL */
		return -EPERM;
	if (t != CLONE_NEWNET)
		return -EPERM;
	cleanup_close int u = ioctl(fd, NS_GET_USERNS);
	if (u < 0)
		return -EPERM;
	struct stat a, b;
	if (fstat(u, &a) < 0 || stat("/proc/self/ns/user", &b) < 0)
		return -errno;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? 0 : -EPERM;
}

/* 0 when the calling thread's network namespace has one link, the
 * loopback (ifindex 1), and it is down; -ENOTEMPTY when it has anything
 * else; -errno. One RTM_GETLINK dump (~16 us of CPU, netns.h). Links are what
 * make a namespace reachable: with no link up there is no route to any
 * address, 127.0.0.1 included; its abstract unix names are kept apart by
 * Landlock's scope (netns.h). */
static int links_empty(void)
{
	cleanup_close int s =
	    socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (s < 0)
		return -errno;
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = {
	    .h = {.nlmsg_len = sizeof(req),
		  .nlmsg_type = RTM_GETLINK,
		  .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		  .nlmsg_seq = 1},
	    .i = {.ifi_family = AF_UNSPEC},
	};
	struct sockaddr_nl k = {.nl_family = AF_NETLINK};
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&k, sizeof(k)) <
	    0)
		return -errno;
	/* a dump part never splits a message: one link's is ~1.5 KiB. On
	 * the stack (pin_main's thread has the default one), not in TLS:
	 * static TLS is carved from every thread's stack, small ones too */
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	int links = 0;
	for (;;) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		int len = (int)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf;
		     NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return links == 1 ? 0 : -ENOTEMPTY;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
					return -EIO;
				return e->error < 0 ? e->error : -EIO;
			}
			if (h->nlmsg_type != RTM_NEWLINK)
				continue;
			if (h->nlmsg_len <
			    NLMSG_LENGTH(sizeof(struct ifinfomsg)))
				return -EIO;
			const struct ifinfomsg *i = NLMSG_DATA(h);
			/* a second link, or lo up: not empty; no need to
			 * read the rest */
			if (++links > 1 || i->ifi_index != 1 ||
			    !(i->ifi_flags & IFF_LOOPBACK) ||
			    (i->ifi_flags & IFF_UP))
				return -ENOTEMPTY;
		}
	}
}

/* One directory on the pin's path, opened (O_PATH) by the walk below:
 * root's, and not writable by group or others -- or, above the pin's own
 * directory, writable but sticky (as /tmp): there nobody but root can
 * rename or remove an entry that is root's. Anything else lets a user put
 * a directory, a file or a symlink of their own in the path's place (a
 * mount needs root, a rename does not). */
static bool dir_trusted(int fd, bool parent)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0)
		return false;
	if (!(st.st_mode & 022))
		return true;
	return !parent && (st.st_mode & S_ISVTX);
}

/* Every directory from / down to the pin's, walked one component at a
 * time without following a symlink (O_PATH | O_NOFOLLOW opens a symlink
 * as itself: refused), each judged by dir_trusted. 0; -ENOENT when a
 * component is missing below trusted ones (the caller may make it);
 * -EPERM with what[] saying what and where; -EINVAL for a path that is
 * not absolute and plain ("." or ".." components, "//"); or -errno. Only
 * at a (re)judge, never per call (pin_main). */
static int dir_ok(const char *pin, char *what, size_t nwhat)
{
	char path[4096];
	if (wd_strlcpy(path, pin, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	char *last = strrchr(path, '/');
	if (path[0] != '/' || !last[1])
		return -EINVAL;
	*last = 0; /* path: the pin's directory, "" for / */
	cleanup_close int fd =
	    open("/", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* fd is the directory path[0, c) */
	for (char *c = path;;) {
		bool parent = *c == 0;
		if (!dir_trusted(fd, parent)) {
			*c = 0;
			snprintf(what, nwhat,
				 "a directory that is not root's alone ('%s')",
				 path[0] ? path : "/");
			return -EPERM;
		}
		if (parent)
			return 0;
		char *name = c + 1, *end = strchr(name, '/');
		if (end)
			*end = 0;
		if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
			return -EINVAL;
		int n = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (n < 0)
			return -errno;
		close(fd);
		fd = n;
		struct stat st;
		if (fstat(fd, &st) < 0)
			return -errno;
		if (S_ISLNK(st.st_mode)) {
			snprintf(what, nwhat, "a symlink on its path ('%s')",
				 path);
			return -EPERM;
		}
		if (end)
			*end = '/';
		c = end ? end : name + strlen(name);
	}
}

/* What is at the pin, opened and judged on the calling thread (which it
 * moves into the namespace found: a thread of its own). An fd of it when
 * it is an empty network namespace of ours; else -errno, with *what
 * saying what was found:
 *   -ENOENT: nothing;
 *   -ENODATA: a regular file that is no namespace: the mount point an
 *            earlier boot left (mounts do not outlive a boot) or one whose
 *            mount was taken away — expected, nothing to report;
 *   -EPERM, -ENOTEMPTY: something else, a namespace that is not ours or
 *            not empty: never used, reported and replaced. */
static int pin_open(const char *pin, const char **what)
{
	/* a namespace's file is a regular one: a device, a FIFO or a
	 * directory put there is not even opened */
	struct stat st;
	*what = "lstat";
	if (lstat(pin, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode)) {
		*what = "a symlink";
		return -EPERM;
	}
	if (!S_ISREG(st.st_mode)) {
		*what = "not a regular file";
		return -EPERM;
	}
	*what = "open";
	cleanup_close int fd =
	    open(pin, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ELOOP)
			*what = "a symlink";
		return errno == ELOOP ? -EPERM : -errno;
	}
	int r = ns_ours(fd);
	if (r < 0) {
		if (fstat(fd, &st) < 0)
			return -errno;
		bool nsfs = ioctl(fd, NS_GET_NSTYPE) >= 0;
		if (!nsfs && S_ISREG(st.st_mode)) {
			*what = "a plain file";
			return -ENODATA;
		}
		*what = nsfs ? "a namespace of another type or user namespace"
			     : "not a regular file";
		return -EPERM;
	}
	*what = "setns";
	if (setns(fd, CLONE_NEWNET) < 0)
		return -errno;
	*what = "a network namespace that is not empty (a link other than "
		"lo, or lo up)";
	if ((r = links_empty()) < 0) {
		if (r != -ENOTEMPTY)
			*what = "links dump";
		return r;
	}
	return steal_fd(&fd);
}

/* Under the lock: removes whatever is mounted at the pin, leaves a plain
 * root file there, and mounts a new empty namespace on it (made on this
 * thread). A rename cannot move a mountpoint, hence in place, under the
 * lock. The new namespace's fd, or -errno with *step. */
static int pin_make(const char *pin, const char **step)
{
	/* every layer: a bad namespace may have been stacked on ours */
	*step = "umount";
	for (int i = 0; i < 64; i++) {
		if (umount2(pin, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
			continue;
		if (errno == EINVAL || errno == ENOENT)
			break; /* no (more) mount there */
		return -errno;
	}
	*step = "mount point";
	struct stat st;
	if (lstat(pin, &st) == 0 && !S_ISREG(st.st_mode) && unlink(pin) < 0)
		return -errno;
	int f = open(pin, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (f < 0)
		return -errno;
	close(f);
	cleanup_close int fd = mk_here(step);
	if (fd < 0)
		return fd;
	*step = "bind mount";
	char src[64];
	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	if (mount(src, pin, NULL, MS_BIND, NULL) < 0)
		return -errno;
	return steal_fd(&fd);
}

/* What dir_ok found wrong, for pin_what: pin_main runs on one thread at a
 * time (shared_job), its caller reads this after the join */
static char pin_bad[4200];

/* The shared namespace's thread: the pinned one (checked), else a new
 * pin, else a private namespace. On its own thread: pin_open setns'es. */
static void *pin_main(void *arg)
{
	struct wd_netns_job *k = arg;
	const char *pin = wd_netns_pin_path();
	const char *what = "";
	cleanup_close int lfd = -1;
	k->pinned = false;
	k->pin_err = 0;
	k->pin_what = "";
	int r = dir_ok(pin, pin_bad, sizeof(pin_bad));
	if (r < 0) {
		/* the directory is made once, as the runtime dir is (under
		 * trusted ones only: dir_ok's -ENOENT) */
		char dir[4096];
		if (r == -ENOENT && wd_strlcpy(dir, pin, sizeof(dir)) == 0 &&
		    strrchr(dir, '/') && strrchr(dir, '/') != dir) {
			*strrchr(dir, '/') = 0;
			if (wd_mkdir_p(dir, 0711) == 0)
				r = dir_ok(pin, pin_bad, sizeof(pin_bad));
		}
		if (r < 0) {
			k->pin_err = r;
			k->pin_what = r == -EPERM ? pin_bad : "its directory";
			goto private;
		}
	}
	/* The fast path, without the lock: whatever it opens is judged in
	 * full, and one that looks while the pin is being replaced (after
	 * the umount, before the mount) finds a plain file or nothing and
	 * takes the lock below. */
	if ((r = pin_open(pin, &what)) >= 0)
		goto pinned;
	char lk[4200];
	snprintf(lk, sizeof(lk), "%s.lock", pin);
	lfd = open(lk, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lfd < 0 || flock(lfd, LOCK_EX) < 0) {
		k->pin_err = -errno;
		k->pin_what = "lock";
		goto private;
	}
	/* another call may have made it while we waited */
	if ((r = pin_open(pin, &what)) >= 0)
		goto pinned;
	if (r == -EPERM || r == -ENOTEMPTY) {
		/* reported by the caller, then replaced */
		k->pin_err = r;
		k->pin_what = what;
	}
	const char *step = "";
	if ((r = pin_make(pin, &step)) >= 0) {
		k->pinned = true;
		k->fd = r;
		return NULL;
	}
	if (!k->pin_err) {
		k->pin_err = r;
		k->pin_what = step;
	}
	/* never a call without an empty namespace: a private one */
      private:
	k->fd = mk_here(&k->step);
	return NULL;
pinned:
	k->pinned = true;
	k->pin_err = 0;
	k->fd = r;
	return NULL;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* The shared namespace: its fd number never changes once set (a new
 * namespace is dup3'ed onto it), so a call that read it before a re-judge
 * joins the old one or the new one, both judged, never a closed or reused
 * fd. */
static int shared_fd = -1;
static struct wd_netns_job shared_job; /* while .running: being made */
/* shared_fd is the pinned one: the pin's identity when judged (an nsfs
 * file's st_dev/st_ino, as lstat of the mount point shows it) */
static bool shared_pinned;
static dev_t pin_dev;
static ino_t pin_ino;

/* Under mu: the pin no longer shows the namespace we judged there
 * (replaced, unmounted, removed: by root, or what held it went away).
 * One lstat (~1 us) per call; the RTM_GETLINK dump only on a change.
 * What the kernel lets change inside the same namespace (root bringing
 * lo up) is root's restraint, as netns.h says. */
static bool pin_moved(void)
{
	struct stat st;
	if (!shared_pinned)
		return false;
	return lstat(wd_netns_pin_path(), &st) < 0 || st.st_dev != pin_dev ||
	       st.st_ino != pin_ino;
}

void wd_netns_empty_begin(void)
{
	pthread_mutex_lock(&mu);
	if (shared_fd < 0 && !shared_job.running)
		job_start(&shared_job, pin_main);
	pthread_mutex_unlock(&mu);
}

/* Under mu: joins shared_job and takes its namespace as the shared one
 * (the first, or one judged again); logs what it found. The shared fd,
 * or -errno with err (the old one stays when a re-judge made none). */
static int shared_take(struct wd_err *err)
{
	bool again = shared_fd >= 0;
	struct wd_err le = {0};
	int fd = wd_netns_end(&shared_job, again ? &le : err);
	/* logged here: what a call finds at the pin is root's doing or a
	 * failure root should see */
	int pe = shared_job.pin_err;
	/* found: what was there says it all; else what failed */
	bool found = pe == -EPERM || pe == -ENOTEMPTY;
	if (pe)
		wd_warn("netns pin '%s': %s%s%s%s; %s", wd_netns_pin_path(),
			found ? "found " : "", shared_job.pin_what,
			found ? "" : ": ", found ? "" : strerror(-pe),
			!shared_job.pinned ? "a private empty namespace "
					     "instead"
			: fd >= 0	   ? "replaced by a new one"
					   : "");
	if (fd < 0 && again)
		wd_warn("netns pin '%s': %s; the namespace judged before kept",
			wd_netns_pin_path(), le.msg);
	if (fd < 0)
		return again ? shared_fd : fd;
	struct stat st;
	bool pinned = shared_job.pinned && fstat(fd, &st) == 0;
	if (again) {
		if (dup3(fd, shared_fd, O_CLOEXEC) < 0) {
			int e = -errno;
			close(fd);
			wd_warn("netns pin '%s': cannot take the namespace "
				"judged again: %s; the one judged before kept",
				wd_netns_pin_path(), strerror(-e));
			return shared_fd;
		}
		close(fd);
	} else {
		shared_fd = fd;
	}
	shared_pinned = pinned;
	if (pinned) {
		pin_dev = st.st_dev;
		pin_ino = st.st_ino;
	}
	return shared_fd;
}

int wd_netns_empty_fd(struct wd_err *err)
{
	pthread_mutex_lock(&mu);
	bool moved = shared_fd >= 0 && !shared_job.running && pin_moved();
	if (moved)
		wd_warn("netns pin '%s': no longer the namespace judged there "
			"(net:[%lu]): judged again",
			wd_netns_pin_path(), (unsigned long)pin_ino);
	if ((shared_fd < 0 || moved) && !shared_job.running)
		job_start(&shared_job, pin_main);
	/* a job that could not start (no thread) is taken too: its error
	 * says why, and a re-judge keeps the namespace judged before */
	int r = shared_job.running || shared_fd < 0 || moved ? shared_take(err)
							     : shared_fd;
	pthread_mutex_unlock(&mu);
	return r;
}
