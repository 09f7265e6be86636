/* Grant paths opened without following a symlink a tool could have made
 * (safepath.h). */
#include "common/safepath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's own walk (MAXSYMLINKS) */

/* Links the walk judged trusted, by where they are, with where they lead
 * (absolute, lexically normal): a later path through one is rewritten and
 * tried on the fast path again, so the system's /lib, /lib64 and the
 * loader's own link cost one walk a process, not one a path (the
 * one-shot `warden exec` met them five times a call). Only root may
 * change a trusted link, yet an entry lives CACHE_NS alone. No lock
 * waited for (a clone child may run this): one not free is passed by. */
static int res_lexical(char *res, size_t *rl, size_t cap, const char *p);

#define CACHE_N	 16
#define CACHE_NS 2000000000ull
static struct {
	char link[128], to[256];
	uint64_t at;
} cache[CACHE_N];
static char cache_lock;
static int cache_next;

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* path with a cached link prefix replaced into out; false: none */
static bool cache_rewrite(const char *path, char *out, size_t outlen)
{
	if (__atomic_test_and_set(&cache_lock, __ATOMIC_ACQUIRE))
		return false;
	bool hit = false;
	uint64_t now = mono_ns();
	for (int i = 0; i < CACHE_N && !hit; i++) {
		size_t ll = strlen(cache[i].link);
		if (!ll || now - cache[i].at > CACHE_NS ||
		    strncmp(path, cache[i].link, ll) ||
		    (path[ll] != '/' && path[ll] != 0))
			continue;
		int n = snprintf(out, outlen, "%s%s", cache[i].to, path + ll);
		hit = n > 0 && (size_t)n < outlen;
	}
	__atomic_clear(&cache_lock, __ATOMIC_RELEASE);
	return hit;
}

/* a trusted link at dir res (physical, "" the root) named name with
 * target tgt: kept when where it leads is plain to compute (".." only
 * leading the target: res is physical) */
static void cache_note(const char *res, const char *name, const char *tgt)
{
	char link[128], to[256];
	size_t rl = 0;
	int n = snprintf(link, sizeof(link), "%s/%s", res, name);
	if (n <= 0 || (size_t)n >= sizeof(link))
		return;
	const char *t = tgt;
	while (t[0] == '.' && t[1] == '.' && (t[2] == '/' || !t[2]))
		t += t[2] ? 3 : 2;
	if (strstr(t, "/..") || !strncmp(t, "..", 2))
		return;
	to[0] = 0;
	if (tgt[0] != '/') {
		if ((rl = strlen(res)) >= sizeof(to))
			return;
		memcpy(to, res, rl + 1);
	}
	if (res_lexical(to, &rl, sizeof(to), tgt) < 0)
		return;
	if (rl == 0) {
		to[rl++] = '/';
		to[rl] = 0;
	}
	if (__atomic_test_and_set(&cache_lock, __ATOMIC_ACQUIRE))
		return;
	int slot = cache_next;
	for (int i = 0; i < CACHE_N; i++)
		if (!strcmp(cache[i].link, link))
			slot = i;
	memcpy(cache[slot].link, link, (size_t)n + 1);
	memcpy(cache[slot].to, to, rl + 1);
	cache[slot].at = mono_ns();
	if (slot == cache_next)
		cache_next = (cache_next + 1) % CACHE_N;
	__atomic_clear(&cache_lock, __ATOMIC_RELEASE);
}

static int say(char *why, size_t n, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int say(char *why, size_t n, int rc, const char *fmt, ...)
{
	if (why && n) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, n, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* One open with no symlink on the way; -ENOSYS where openat2 is missing
 * (or refused by a filter: then the walk decides). */
static int open_nolinks(const char *path, int flags)
{
#ifdef SYS_openat2
	struct open_how how = {.flags = (unsigned)(flags | O_CLOEXEC),
			       .resolve =
				   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	return fd >= 0 ? fd : -errno;
#else
	(void)path;
	(void)flags;
	return -ENOSYS;
#endif
}

/* res (rl bytes, "" for the root) + "/" + name */
static int res_push(char *res, size_t *rl, size_t cap, const char *name,
		    size_t nl)
{
	if (*rl + 1 + nl + 1 > cap)
		return -ENAMETOOLONG;
	res[(*rl)++] = '/';
	memcpy(res + *rl, name, nl);
	*rl += nl;
	res[*rl] = 0;
	return 0;
}

static void res_pop(char *res, size_t *rl)
{
	while (*rl > 0 && res[*rl - 1] != '/')
		(*rl)--;
	if (*rl > 0)
		(*rl)--;
	res[*rl] = 0;
}

/* The rest of a path appended as written, "." and ".." applied to it */
static int res_lexical(char *res, size_t *rl, size_t cap, const char *p)
{
	while (*p) {
		while (*p == '/')
			p++;
		size_t cl = strcspn(p, "/");
		if (!cl)
			break;
		if (cl == 2 && p[0] == '.' && p[1] == '.')
			res_pop(res, rl);
		else if (!(cl == 1 && p[0] == '.') &&
			 res_push(res, rl, cap, p, cl) < 0)
			return -ENAMETOOLONG;
		p += cl;
	}
	return 0;
}

/* res (rl bytes, "" for the root) into out as a path: "/" for "" */
static int res_out(const char *res, size_t rl, char *out, size_t outlen)
{
	if ((rl ? rl : 1) + 1 > outlen)
		return -ENAMETOOLONG;
	if (rl)
		memcpy(out, res, rl + 1);
	else
		memcpy(out, "/", 2);
	return 0;
}

/* The link's target tgt (tl bytes) spliced into rest (cap bytes) in place
 * of the link, p the rest after it (moved first: the two may overlap);
 * an absolute target past a trusted link judged before is rewritten
 * (cache_rewrite). 0 or -ENAMETOOLONG. */
static int splice_link(char *rest, size_t cap, const char *p, const char *tgt,
		       size_t tl)
{
	size_t pl = strlen(p);
	if (tl + pl + 1 > cap)
		return -ENAMETOOLONG;
	memmove(rest + tl, p, pl + 1);
	memcpy(rest, tgt, tl);
	char rw[PATH_MAX * 2];
	if (tgt[0] == '/' && cache_rewrite(rest, rw, sizeof(rw)))
		memcpy(rest, rw, strlen(rw) + 1);
	return 0;
}

/* Whether the symlink lfd, in directory dfd, may be followed (safepath.h:
 * root's, in a directory of root's no one else may write). */
static int judge_link(const struct stat *d, const struct stat *l,
		      const char *res, const char *name, char *why,
		      size_t whylen)
{
	if (l->st_uid != 0)
		return say(why, whylen, -ELOOP,
			   "'%s/%s' is a symlink of uid %u, not root's: not "
			   "followed (name its target instead)",
			   res, name, (unsigned)l->st_uid);
	if (d->st_uid != 0 || (d->st_mode & 022))
		return say(why, whylen, -ELOOP,
			   "'%s/%s' is a symlink in a directory %s: not "
			   "followed (name its target instead)",
			   res, name,
			   d->st_uid != 0 ? "not root's"
					  : "its group or others may write");
	return 0;
}

/* The walk (safepath.h), by descriptors: *fd_out the last component
 * opened with flags. */
static int walk(const char *path, int flags, int *fd_out, char *why,
		size_t whylen)
{
	char rest[PATH_MAX * 2], res[PATH_MAX], name[NAME_MAX + 1];
	size_t rl = 0, n = strlen(path);
	int links = 0, rc = 0;
	if (path[0] != '/')
		return say(why, whylen, -EINVAL, "'%s' is not absolute", path);
	if (n >= sizeof(rest))
		return -ENAMETOOLONG;
	memcpy(rest, path, n + 1);
	res[0] = 0;
	int dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	struct stat dst; /* dfd's, when dst_ok */
	bool dst_ok = false;
	char *p = rest;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break; /* ends on a directory: dfd */
		size_t cl = strcspn(p, "/");
		if (cl > NAME_MAX) {
			rc = -ENAMETOOLONG;
			goto out;
		}
		memcpy(name, p, cl);
		name[cl] = 0;
		p += cl;
		if (cl == 1 && name[0] == '.')
			continue;
		if (cl == 2 && name[0] == '.' && name[1] == '.') {
			int up =
			    openat(dfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (up < 0) {
				rc = -errno;
				goto out;
			}
			close(dfd);
			dfd = up;
			dst_ok = false;
			res_pop(res, &rl);
			continue;
		}
		int cfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			rc = -errno;
			goto out;
		}
		struct stat st;
		if (fstat(cfd, &st) < 0) {
			rc = -errno;
			close(cfd);
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			char tgt[PATH_MAX];
			if (!dst_ok && fstat(dfd, &dst) < 0) {
				rc = -errno;
				close(cfd);
				goto out;
			}
			dst_ok = true;
			rc = judge_link(&dst, &st, res, name, why, whylen);
			ssize_t tl =
			    rc ? -1 : readlinkat(cfd, "", tgt, sizeof(tgt) - 1);
			if (!rc && tl < 0)
				rc = -errno;
			close(cfd);
			if (!rc && (++links > MAX_LINKS ||
				    (size_t)tl >= sizeof(tgt) - 1))
				rc = links > MAX_LINKS ? -ELOOP : -ENAMETOOLONG;
			if (!rc) {
				tgt[tl] = 0;
				cache_note(res, name, tgt);
				rc = splice_link(rest, sizeof(rest), p, tgt,
						 (size_t)tl);
			}
			if (rc)
				goto out;
			p = rest;
			if (tgt[0] == '/') {
				int root =
				    open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (root < 0) {
					rc = -errno;
					goto out;
				}
				close(dfd);
				dfd = root;
				dst_ok = false;
				rl = 0;
				res[0] = 0;
			}
			continue;
		}
		if ((rc = res_push(res, &rl, sizeof(res), name, cl)) < 0) {
			close(cfd);
			goto out;
		}
		const char *q = p;
		while (*q == '/')
			q++;
		if (!*q) { /* the last component */
			int fd = cfd;
			if (!(flags & O_PATH)) {
				/* by name again, refusing a symlink put there
				 * meanwhile (ELOOP) */
				close(cfd);
				fd = openat(dfd, name,
					    flags | O_NOFOLLOW | O_CLOEXEC);
				if (fd < 0) {
					rc = -errno;
					goto out;
				}
			}
			*fd_out = fd;
			goto out;
		}
		if (!S_ISDIR(st.st_mode)) {
			close(cfd);
			rc = -ENOTDIR;
			goto out;
		}
		close(dfd);
		dfd = cfd;
		dst = st;
		dst_ok = true;
	}
	{ /* the path named a directory ("/", "a/..") */
		int fd = (flags & O_PATH) ? fcntl(dfd, F_DUPFD_CLOEXEC, 0)
					  : openat(dfd, ".", flags | O_CLOEXEC);
		if (fd < 0)
			rc = -errno;
		else
			*fd_out = fd;
	}
out:
	close(dfd);
	return rc;
}

/* The resolution (safepath.h), by names: lstat of each component, of each
 * link's directory, readlink. Not by descriptors, as a grant's open is:
 * what it refuses is a link there now that a tool could have made, and a
 * link put there afterwards is refused by the grant's open (no symlink on
 * the resolved path), never followed. */
static int resolve_names(const char *path, char *out, size_t outlen, char *why,
			 size_t whylen)
{
	char rest[PATH_MAX * 2], res[PATH_MAX], name[NAME_MAX + 1];
	size_t rl = 0, n = strlen(path);
	int links = 0, rc = 0;
	if (n >= sizeof(rest))
		return -ENAMETOOLONG;
	memcpy(rest, path, n + 1);
	res[0] = 0;
	char *p = rest;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		size_t cl = strcspn(p, "/");
		if (cl > NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(name, p, cl);
		name[cl] = 0;
		p += cl;
		if (cl == 1 && name[0] == '.')
			continue;
		if (cl == 2 && name[0] == '.' && name[1] == '.') {
			res_pop(res, &rl);
			continue;
		}
		size_t dl = rl;
		if ((rc = res_push(res, &rl, sizeof(res), name, cl)) < 0)
			return rc;
		struct stat st;
		if (lstat(res, &st) < 0) {
			if (errno != ENOENT && errno != ENOTDIR)
				return -errno;
			/* missing (or under a file): kept as written */
			if ((rc = res_lexical(res, &rl, sizeof(res), p)) < 0)
				return rc;
			break;
		}
		if (!S_ISLNK(st.st_mode))
			continue;
		struct stat dst;
		char dir[PATH_MAX], tgt[PATH_MAX];
		memcpy(dir, res, dl);
		dir[dl] = 0;
		res[dl] = 0; /* the link's directory, for messages */
		if (lstat(dl ? dir : "/", &dst) < 0)
			return -errno;
		if ((rc = judge_link(&dst, &st, res, name, why, whylen)) < 0)
			return rc;
		res[dl] = '/';
		ssize_t tl = readlink(res, tgt, sizeof(tgt) - 1);
		if (tl < 0)
			return -errno;
		if (++links > MAX_LINKS)
			return -ELOOP;
		if ((size_t)tl >= sizeof(tgt) - 1)
			return -ENAMETOOLONG;
		tgt[tl] = 0;
		rl = dl;
		res[rl] = 0;
		cache_note(res, name, tgt);
		if ((rc = splice_link(rest, sizeof(rest), p, tgt, (size_t)tl)))
			return rc;
		p = rest;
		if (tgt[0] == '/') {
			rl = 0;
			res[0] = 0;
		}
	}
	return res_out(res, rl, out, outlen);
}

int wd_path_resolve_trusted(const char *path, char *out, size_t outlen,
			    char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = 0;
	if (!path || path[0] != '/')
		return say(why, whylen, -EINVAL, "'%s' is not absolute",
			   path ? path : "");
	/* no symlink on the way: the path as written, normalised */
	int fd = open_nolinks(path, O_PATH);
	char rw[PATH_MAX];
	if (fd == -ELOOP && cache_rewrite(path, rw, sizeof(rw))) {
		int f2 = open_nolinks(rw, O_PATH);
		if (f2 >= 0) { /* past a trusted link already judged */
			path = rw;
			fd = f2;
		}
	}
	if (fd >= 0) {
		close(fd);
		char res[PATH_MAX];
		size_t rl = 0;
		res[0] = 0;
		if (res_lexical(res, &rl, sizeof(res), path) < 0)
			return -ENAMETOOLONG;
		return res_out(res, rl, out, outlen);
	}
	return resolve_names(path, out, outlen, why, whylen);
}

int wd_open_trusted(const char *path, int flags, char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = 0;
	int fd = open_nolinks(path, flags);
	/* no openat2 (a kernel before 5.6, or a filter refusing it): the
	 * walk by descriptors alone */
	if (fd == -ENOSYS || fd == -EPERM)
		goto walk;
	if (fd >= 0 || fd != -ELOOP)
		return fd;
	/* a symlink on the way: past a trusted link judged before, or
	 * resolved by names under the rule, then opened with no symlink on
	 * the way (a link put there meanwhile makes that fail: the walk by
	 * descriptors decides) */
	char rw[PATH_MAX], rp[PATH_MAX];
	const char *q = path;
	if (cache_rewrite(path, rw, sizeof(rw))) {
		q = rw;
		fd = open_nolinks(q, flags);
		if (fd != -ELOOP)
			return fd;
	}
	int r = resolve_names(q, rp, sizeof(rp), why, whylen);
	if (r < 0)
		return r;
	fd = open_nolinks(rp, flags);
	if (fd != -ELOOP)
		return fd;
walk:
	fd = -1;
	r = walk(path, flags, &fd, why, whylen);
	return r < 0 ? r : fd;
}
