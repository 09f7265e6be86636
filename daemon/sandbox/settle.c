/* A per-call uid and the files of its write paths (uidpool.h).
 *
 * Access: the call's uid is new, so a write path owned by the calling
 * user (or, for a root caller, by anyone) would refuse it. Of the kernel's
 * mechanisms, a POSIX ACL entry "user:<call uid>:rwx" on the write path
 * itself is the one that holds in every tier that runs on the host's VFS
 * (tier 1 shares the host's mounts; tier 2's binds are the same inodes)
 * and costs one xattr write per path and call. An idmapped bind mount
 * (mount_setattr MOUNT_ATTR_IDMAP) would land files owned by the caller
 * directly, but needs a mount namespace (tier 1 has none) and a user
 * namespace per (call uid, principal) pair. Files the tool creates belong
 * to its uid while it runs; at the end of the call wd_settle_tree gives
 * them to the principal, so a later call given the recycled uid owns
 * nothing an earlier call left. Existing files inside a write path keep
 * their DAC: the tool writes them only where their mode lets others.
 *
 * The entry is added and removed under a per-inode lock (a file in the
 * uid records' directory, wd_uid_dir, flock'ed: several warden processes
 * may share a write path). The mask is raised to let the entry work, and
 * every other group-class entry (named users and groups, the owning group)
 * lowered to the old mask so that none gains access while a call runs; the
 * mask and the lowered entries as they were before warden's first entry are
 * kept in that lock file and put back when the last entry of the range goes
 * (a crashed call's entry stays until its uid's next acquire revokes it:
 * uidpool.c).
 */
#include "sandbox/uidpool.h"
#include "common/log.h"

#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* <linux/posix_acl_xattr.h>, <linux/posix_acl.h>: the on-disk form */
#define ACL_XATTR_VERSION 0x0002
#define ACL_USER_OBJ	  0x01
#define ACL_USER	  0x02
#define ACL_GROUP_OBJ	  0x04
#define ACL_GROUP	  0x08
#define ACL_MASK	  0x10
#define ACL_OTHER	  0x20
#define ACL_XATTR	  "system.posix_acl_access"
#define ACL_XATTR_DEFAULT "system.posix_acl_default"
#define ACL_MAX		  512
/* a lock file's record: "mask N\n", then a "lowered TAG ID PERM\n" line
 * per entry (at most 31 bytes: a 16-bit tag, a 32-bit id, a perm digit) */
#define SAVED_MAX (32 + 40 * ACL_MAX)

struct acl_ent {
	uint16_t tag, perm;
	uint32_t id;
};

struct acl {
	struct acl_ent e[ACL_MAX];
	int n;
};

/* Read fd's access ACL; none: the three entries its mode stands for. */
static int acl_read(int fd, struct acl *a)
{
	char buf[4 + 8 * ACL_MAX];
	ssize_t n = fgetxattr(fd, ACL_XATTR, buf, sizeof(buf));
	a->n = 0;
	if (n < 0 && errno != ENODATA)
		return -errno;
	if (n < 0) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			return -errno;
		a->e[0] = (struct acl_ent){ACL_USER_OBJ, (st.st_mode >> 6) & 7,
					   (uint32_t)-1};
		a->e[1] = (struct acl_ent){ACL_GROUP_OBJ, (st.st_mode >> 3) & 7,
					   (uint32_t)-1};
		a->e[2] =
		    (struct acl_ent){ACL_OTHER, st.st_mode & 7, (uint32_t)-1};
		a->n = 3;
		return 0;
	}
	uint32_t ver;
	if (n < 4 || (n - 4) % 8)
		return -EINVAL;
	memcpy(&ver, buf, 4);
	if (ver != ACL_XATTR_VERSION)
		return -EINVAL;
	for (ssize_t off = 4; off < n; off += 8) {
		struct acl_ent *e = &a->e[a->n++];
		memcpy(&e->tag, buf + off, 2);
		memcpy(&e->perm, buf + off + 2, 2);
		memcpy(&e->id, buf + off + 4, 4);
	}
	return 0;
}

static int ent_cmp(const void *x, const void *y)
{
	const struct acl_ent *a = x, *b = y;
	if (a->tag != b->tag)
		return a->tag < b->tag ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* Write a in the order the kernel requires (posix_acl_valid: by tag, then
 * id). An ACL equal to a mode is turned into that mode by the kernel
 * (posix_acl_update_mode), the xattr removed. */
static int acl_write(int fd, struct acl *a)
{
	char buf[4 + 8 * ACL_MAX];
	uint32_t ver = ACL_XATTR_VERSION;
	qsort(a->e, a->n, sizeof(a->e[0]), ent_cmp);
	memcpy(buf, &ver, 4);
	for (int i = 0; i < a->n; i++) {
		memcpy(buf + 4 + 8 * i, &a->e[i].tag, 2);
		memcpy(buf + 6 + 8 * i, &a->e[i].perm, 2);
		memcpy(buf + 8 + 8 * i, &a->e[i].id, 4);
	}
	return fsetxattr(fd, ACL_XATTR, buf, 4 + 8 * (size_t)a->n, 0) < 0
		   ? -errno
		   : 0;
}

static struct acl_ent *acl_find(struct acl *a, uint16_t tag, uint32_t id)
{
	for (int i = 0; i < a->n; i++)
		if (a->e[i].tag == tag &&
		    (id == (uint32_t)-1 || a->e[i].id == id))
			return &a->e[i];
	return NULL;
}

static void acl_del(struct acl *a, struct acl_ent *e)
{
	*e = a->e[--a->n];
}

static bool in_range(const struct wd_uid_range *r, uint32_t id)
{
	return id >= r->first && id - r->first < r->count;
}

static bool any_in_range(const struct acl *a, const struct wd_uid_range *r)
{
	for (int i = 0; i < a->n; i++)
		if (a->e[i].tag == ACL_USER && in_range(r, a->e[i].id))
			return true;
	return false;
}

/* The per-inode lock (and saved-mask) file of fd, flock'ed; its path in
 * p (n bytes). The last revoke unlinks it: a lock taken on a file that
 * was unlinked while this waited is let go and taken again on the file
 * now at the path (a new one), so that two holders never lock two files. */
static int inode_lock(int fd, char *p, size_t n)
{
	struct stat st, l, now;
	if (fstat(fd, &st) < 0)
		return -errno;
	char dir[400];
	int r = wd_uid_dir(dir, sizeof(dir));
	if (r < 0)
		return r;
	snprintf(p, n, "%s/acl-%llx-%llx", dir, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	for (;;) {
		int lfd =
		    open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (lfd < 0)
			return -errno;
		while (flock(lfd, LOCK_EX) < 0)
			if (errno != EINTR) {
				int e = -errno;
				close(lfd);
				return e;
			}
		if (fstat(lfd, &l) == 0 && lstat(p, &now) == 0 &&
		    l.st_dev == now.st_dev && l.st_ino == now.st_ino)
			return lfd;
		close(lfd);
	}
}

/* The group class's union: what setfacl computes for a mask. */
static uint16_t group_class(const struct acl *a)
{
	uint16_t m = 0;
	for (int i = 0; i < a->n; i++)
		if (a->e[i].tag == ACL_USER || a->e[i].tag == ACL_GROUP ||
		    a->e[i].tag == ACL_GROUP_OBJ)
			m |= a->e[i].perm;
	return m;
}

/* What warden's first entry on a path changed besides its own entries and
 * the mask, kept in the path's lock file and put back by the last revoke:
 * the mask before us (-1: none), and the group-class entries lowered to
 * it, with the permissions they had. Raising the mask for our entry
 * would otherwise make every other named entry, and the owning group,
 * effective up to what it holds: a user:bob:rwx entry masked down to r-x
 * would let bob write while a call runs. Lowered to the old mask, each
 * keeps exactly the access it had. */
struct acl_saved {
	int mask;
	struct acl lowered;
};

/* Whether line is prefix and then exactly n space-separated decimal
 * numbers (each into v[i], at most UINT32_MAX). */
static bool fields(const char *line, const char *prefix, unsigned long *v,
		   int n)
{
	size_t pl = strlen(prefix);
	if (strncmp(line, prefix, pl))
		return false;
	const char *p = line + pl;
	for (int i = 0; i < n; i++) {
		char *end;
		if (*p < '0' || *p > '9')
			return false;
		errno = 0;
		v[i] = strtoul(p, &end, 10);
		if (errno || v[i] > UINT32_MAX)
			return false;
		p = end;
		if (i + 1 < n && *p++ != ' ')
			return false;
	}
	return *p == 0;
}

/* The lock file's text: "mask N" or "nomask", then one "lowered TAG ID
 * PERM" line per entry. 0, or -ENOENT when it holds no record. */
static int saved_read(int lfd, struct acl_saved *sv)
{
	sv->mask = -1;
	sv->lowered.n = 0;
	cleanup_free char *b = wd_malloc(SAVED_MAX + 1);
	ssize_t n = pread(lfd, b, SAVED_MAX, 0);
	if (n <= 0)
		return -ENOENT;
	b[n] = 0;
	/* one line at a time: a field never read from the next line */
	char *save = NULL, *line = strtok_r(b, "\n", &save);
	unsigned long v[3];
	if (line && !strcmp(line, "nomask"))
		sv->mask = -1;
	else if (line && fields(line, "mask ", v, 1) && v[0] <= 7)
		sv->mask = (int)v[0];
	else
		return -ENOENT;
	while ((line = strtok_r(NULL, "\n", &save)))
		if (fields(line, "lowered ", v, 3) && v[0] <= 0xffff &&
		    v[1] <= UINT32_MAX && v[2] <= 7 && sv->lowered.n < ACL_MAX)
			sv->lowered.e[sv->lowered.n++] = (struct acl_ent){
			    (uint16_t)v[0], (uint16_t)v[2], (uint32_t)v[1]};
	return 0;
}

static int saved_write(int lfd, const struct acl_saved *sv)
{
	size_t cap = SAVED_MAX, n;
	cleanup_free char *b = wd_malloc(cap);
	n = sv->mask >= 0 ? (size_t)snprintf(b, cap, "mask %d\n", sv->mask)
			  : (size_t)snprintf(b, cap, "nomask\n");
	for (int i = 0; i < sv->lowered.n && n < cap; i++)
		n += (size_t)snprintf(b + n, cap - n, "lowered %u %u %u\n",
				      sv->lowered.e[i].tag, sv->lowered.e[i].id,
				      sv->lowered.e[i].perm);
	if (n >= cap)
		return -E2BIG;
	if (ftruncate(lfd, 0) < 0)
		return -errno;
	ssize_t w = pwrite(lfd, b, n, 0);
	if (w < 0)
		return -errno;
	return w == (ssize_t)n ? 0 : -EIO;
}

/* Lower every group-class entry but ours (the range's) to mask, noting
 * in sv the permissions of each one lowered the first time. */
static void lower_to_mask(struct acl *a, const struct wd_uid_range *r,
			  uint16_t mask, struct acl_saved *sv)
{
	for (int i = 0; i < a->n; i++) {
		struct acl_ent *e = &a->e[i];
		bool other = (e->tag == ACL_USER && !in_range(r, e->id)) ||
			     e->tag == ACL_GROUP || e->tag == ACL_GROUP_OBJ;
		if (!other || !(e->perm & ~mask & 7))
			continue;
		if (!acl_find(&sv->lowered, e->tag, e->id) &&
		    sv->lowered.n < ACL_MAX)
			sv->lowered.e[sv->lowered.n++] = *e;
		e->perm &= mask;
	}
}

int wd_acl_grant(int fd, uid_t uid, bool is_dir, const struct wd_uid_range *r)
{
	struct acl a;
	struct acl_saved sv;
	char lp[512];
	int lfd = inode_lock(fd, lp, sizeof(lp));
	if (lfd < 0)
		return lfd;
	int rc = acl_read(fd, &a);
	if (rc < 0)
		goto out;
	struct acl_ent *mask = acl_find(&a, ACL_MASK, (uint32_t)-1);
	bool first = !any_in_range(&a, r), note = first;
	if (first) {
		/* the first of ours: remember what to put back */
		sv.mask = mask ? mask->perm : -1;
		sv.lowered.n = 0;
	} else if (saved_read(lfd, &sv) < 0) {
		/* an entry of the range but no record (lost, or an entry
		 * warden did not make): the mask as it is now is the best
		 * known, recorded from here */
		sv.mask = mask ? mask->perm : -1;
		sv.lowered.n = 0;
		note = true;
	}
	/* without a mask there is no named entry: nothing to lower (the
	 * owning group keeps what it had: see the mask made below) */
	if (sv.mask >= 0) {
		int had = sv.lowered.n;
		lower_to_mask(&a, r, (uint16_t)sv.mask, &sv);
		note |= sv.lowered.n != had;
	}
	if (note && (rc = saved_write(lfd, &sv)) < 0)
		goto out;
	uint16_t perm = is_dir ? 7 : 6;
	struct acl_ent *u = acl_find(&a, ACL_USER, uid);
	if (u) {
		u->perm = perm;
	} else if (a.n + 2 > ACL_MAX) {
		rc = -E2BIG;
		goto out;
	} else {
		a.e[a.n++] = (struct acl_ent){ACL_USER, perm, uid};
	}
	mask = acl_find(&a, ACL_MASK, (uint32_t)-1);
	if (mask)
		mask->perm |= perm;
	else /* the group owner keeps exactly what it had */
		a.e[a.n++] =
		    (struct acl_ent){ACL_MASK, group_class(&a), (uint32_t)-1};
	rc = acl_write(fd, &a);
out:
	close(lfd);
	return rc;
}

int wd_acl_revoke(int fd, uid_t uid, const struct wd_uid_range *r)
{
	struct acl a;
	struct acl_saved sv;
	char lp[512];
	int lfd = inode_lock(fd, lp, sizeof(lp));
	if (lfd < 0)
		return lfd;
	int rc = acl_read(fd, &a);
	if (rc < 0)
		goto out;
	struct acl_ent *u = acl_find(&a, ACL_USER, uid);
	if (!u)
		goto out; /* not there (a crash between record and grant) */
	acl_del(&a, u);
	struct acl_ent *mask = acl_find(&a, ACL_MASK, (uint32_t)-1);
	bool last = !any_in_range(&a, r), known = false;
	if (last && mask) {
		/* the last of ours: the mask the path had before us, and
		 * the entries lowered to it as they were (each unless
		 * someone changed it since) */
		known = saved_read(lfd, &sv) == 0;
		bool named = false;
		for (int i = 0; i < a.n; i++)
			named |=
			    a.e[i].tag == ACL_USER || a.e[i].tag == ACL_GROUP;
		if (known && sv.mask >= 0)
			mask->perm = (uint16_t)sv.mask;
		else if (!named)
			acl_del(&a, mask); /* back to a plain mode */
		else
			mask->perm = group_class(&a);
		for (int i = 0; known && sv.mask >= 0 && i < sv.lowered.n;
		     i++) {
			const struct acl_ent *l = &sv.lowered.e[i];
			struct acl_ent *e = acl_find(&a, l->tag, l->id);
			if (e && e->perm == (l->perm & sv.mask))
				e->perm = l->perm;
		}
	}
	rc = acl_write(fd, &a);
	/* the last of ours gone: the record served (a later first entry
	 * writes its own), and its file goes (inode_lock) */
	if (rc == 0 && last)
		unlink(lp);
out:
	close(lfd);
	return rc;
}

/* ---- settling ------------------------------------------------------------ */

struct frame {
	dev_t dev;
	ino_t ino;
	long pos; /* telldir of the entry to go on from; -1: the start */
};

/* One entry of the directory dfd: re-owned if it is the call's. */
static long settle_one(int dfd, const char *name, const struct stat *st,
		       uid_t uid, gid_t gid, uid_t owner, gid_t group)
{
	bool u = st->st_uid == uid, g = st->st_gid == gid;
	if (!u && !g)
		return 0;
	/* the call's own ACLs could name a uid of the range that a later
	 * call gets; it had its chance to share, the next call does not */
	if (!S_ISLNK(st->st_mode)) {
		int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			char p[64];
			snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
			removexattr(p, ACL_XATTR);
			removexattr(p, ACL_XATTR_DEFAULT);
			close(fd);
		}
	}
	/* A symlink the tool made is never root's: warden's grants follow
	 * root's links only (common/safepath.h), a tool's must stay one they
	 * refuse (a link left under a write path would otherwise redirect a
	 * later call's grant, made as root, to its target). */
	uid_t to = owner;
	if (S_ISLNK(st->st_mode) && to == 0)
		to = WD_SETTLE_LINK_UID;
	/* chown clears set-uid/set-gid on non-directories (and file
	 * capabilities): no set-uid-to-the-principal file is left behind */
	if (fchownat(dfd, name, u ? to : (uid_t)-1, g ? group : (gid_t)-1,
		     AT_SYMLINK_NOFOLLOW) < 0 &&
	    errno != ENOENT)
		return -errno;
	return 1;
}

long wd_settle_tree(int rootfd, uid_t uid, gid_t gid, uid_t owner, gid_t group)
{
	struct stat st;
	long changed = 0;
	if (fstat(rootfd, &st) < 0)
		return -errno;
	if (st.st_uid == uid || st.st_gid == gid) {
		if (fchown(rootfd, st.st_uid == uid ? owner : (uid_t)-1,
			   st.st_gid == gid ? group : (gid_t)-1) < 0)
			return -errno;
		changed++;
	}
	if (!S_ISDIR(st.st_mode))
		return changed;
	/* The walk holds at most two fds and its own frame stack on the
	 * heap (no recursion: a 10,000-deep tree costs 10,000 frames of 24
	 * bytes, not the thread's stack). It goes down by name with
	 * O_NOFOLLOW and up by "..", checking that ".." is the directory it
	 * came from (a rename under the walk fails it rather than taking it
	 * elsewhere); symbolic links are re-owned themselves, never followed.
	 * No process of the call lives any more, so the tree changes only
	 * by others' hands. */
	size_t cap = 64, depth = 0;
	struct frame *stk = wd_malloc(cap * sizeof(*stk));
	long rc = 0;
	int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0) {
		free(stk);
		return -errno;
	}
	stk[0] = (struct frame){st.st_dev, st.st_ino, -1};
	for (;;) {
		DIR *d = fdopendir(cur);
		if (!d) {
			rc = -errno;
			close(cur);
			break;
		}
		if (stk[depth].pos >= 0)
			seekdir(d, stk[depth].pos);
		int down = -1;
		struct dirent *e;
		errno = 0;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			struct stat cs;
			if (fstatat(dirfd(d), e->d_name, &cs,
				    AT_SYMLINK_NOFOLLOW) < 0)
				continue; /* gone meanwhile */
			long n = settle_one(dirfd(d), e->d_name, &cs, uid, gid,
					    owner, group);
			if (n < 0) {
				rc = n;
				break;
			}
			changed += n;
			if (!S_ISDIR(cs.st_mode))
				continue;
			down = openat(dirfd(d), e->d_name,
				      O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					  O_CLOEXEC);
			struct stat ds;
			if (down < 0 || fstat(down, &ds) < 0 ||
			    ds.st_dev != cs.st_dev || ds.st_ino != cs.st_ino) {
				rc = down < 0 ? -errno : -ESTALE;
				break;
			}
			stk[depth].pos = telldir(d);
			if (++depth == cap) {
				cap *= 2;
				stk = wd_realloc(stk, cap * sizeof(*stk));
			}
			stk[depth] = (struct frame){ds.st_dev, ds.st_ino, -1};
			break;
		}
		if (rc < 0) {
			if (down >= 0)
				close(down);
			closedir(d);
			break;
		}
		if (down >= 0) {
			closedir(d);
			cur = down;
			continue;
		}
		/* this directory is done: up to its parent, checked */
		if (depth == 0) {
			closedir(d);
			break;
		}
		int up =
		    openat(dirfd(d), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		closedir(d);
		depth--;
		struct stat us;
		if (up < 0 || fstat(up, &us) < 0 ||
		    us.st_dev != stk[depth].dev ||
		    us.st_ino != stk[depth].ino) {
			rc = up < 0 ? -errno : -ESTALE;
			if (up >= 0)
				close(up);
			break;
		}
		cur = up;
	}
	free(stk);
	return rc < 0 ? rc : changed;
}

/* ---- processes and sockets ----------------------------------------------- */

/* Does /proc/<pid>/status name uid among its real/effective/saved/fs
 * uids? */
static bool proc_has_uid(int procfd, const char *pid, uid_t uid)
{
	char p[64], buf[2048];
	snprintf(p, sizeof(p), "%s/status", pid);
	int fd = openat(procfd, p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	const char *u = strstr(buf, "\nUid:");
	unsigned long a, b, c, d;
	if (!u || sscanf(u + 5, "%lu %lu %lu %lu", &a, &b, &c, &d) != 4)
		return false;
	return a == uid || b == uid || c == uid || d == uid;
}

static int scan_kill(uid_t uid, bool kill)
{
	int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (procfd < 0)
		return 1; /* cannot tell: not clean */
	DIR *d = fdopendir(procfd);
	if (!d) {
		close(procfd);
		return 1;
	}
	int found = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		if (!proc_has_uid(dirfd(d), e->d_name, uid))
			continue;
		/* by pidfd, checked again after it is open: a pid reused
		 * between the read and the signal is never hit */
		int pfd = (int)syscall(SYS_pidfd_open, atoi(e->d_name), 0);
		if (pfd < 0)
			continue; /* exited */
		if (proc_has_uid(dirfd(d), e->d_name, uid)) {
			found++;
			if (kill)
				syscall(SYS_pidfd_send_signal, pfd, SIGKILL,
					NULL, 0);
		}
		close(pfd);
	}
	closedir(d);
	return found;
}

int wd_uid_kill_procs(uid_t uid, int wait_ms)
{
	if (scan_kill(uid, true) == 0)
		return 0;
	uint64_t until = wd_now_ns() + (uint64_t)wait_ms * 1000000ull;
	int left;
	do {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
		left = scan_kill(uid, true);
	} while (left && wd_now_ns() < until);
	return left;
}

int wd_uid_count_procs(uid_t uid)
{
	return scan_kill(uid, false);
}

/* One sock_diag dump (family x protocol) of the host's network
 * namespace: how many sockets uid owns, or -errno. Binary netlink rather
 * than /proc/net/tcp: a node with 14,000 sockets formats them as text in
 * ~70 ms; the dump costs a fraction of that. TIME_WAIT entries are left
 * out: they belong to no uid and cannot be joined. */
static int diag_count(int nl, uint8_t family, uint8_t proto, uid_t uid,
		      char *buf, size_t buf_len)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 r;
	} req = {
	    .nh = {.nlmsg_len = sizeof(req),
		   .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
	    .r = {.sdiag_family = family,
		  .sdiag_protocol = proto,
		  .idiag_states = ~(1u << 6 /* TCP_TIME_WAIT */)},
	};
	if (proto == IPPROTO_RAW) /* raw_diag: every protocol number */
		req.r.id.idiag_dport = 0;
	if (send(nl, &req, sizeof(req), 0) < 0)
		return -errno;
	int n = 0;
	for (;;) {
		ssize_t len = recv(nl, buf, buf_len, 0);
		if (len < 0)
			return errno == EINTR ? n : -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf;
		     NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return n;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				/* a protocol without diag support (no
				 * module): it has no sockets to count */
				return e->error == -ENOENT ? n : e->error;
			}
			const struct inet_diag_msg *m = NLMSG_DATA(h);
			if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(*m)) &&
			    m->idiag_uid == uid)
				n++;
		}
	}
}

int wd_uid_count_sockets(uid_t uid)
{
	static const uint8_t fams[] = {AF_INET, AF_INET6};
	static const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP,
					 IPPROTO_UDPLITE, IPPROTO_RAW};
	/* from the heap, not a static thread-local: a 32 KiB __thread
	 * buffer was zeroed into every thread's TLS at its creation (8 page
	 * faults each: a one-shot `warden exec` starts 2-3 threads and counts
	 * no sockets), and a thread stack may be small (probe.c: 64 KiB) */
	enum { DIAG_BUF = 32768 };
	cleanup_free char *buf = wd_malloc(DIAG_BUF);
	int n = 0;
	for (size_t f = 0; f < WD_ARRAY_SIZE(fams); f++)
		for (size_t p = 0; p < WD_ARRAY_SIZE(protos); p++) {
			int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
					NETLINK_SOCK_DIAG);
			if (nl < 0)
				return 1; /* cannot tell: not clean */
			int c = diag_count(nl, fams[f], protos[p], uid, buf,
					   DIAG_BUF);
			close(nl);
			if (c < 0)
				return 1;
			n += c;
		}
	return n;
}
