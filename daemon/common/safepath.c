/* Grant paths opened without following a symlink a tool could have made
 * (safepath.h). */
#include "common/safepath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's own walk (MAXSYMLINKS) */

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

/* Whether the symlink lfd, in directory dfd, may be followed (safepath.h:
 * root's, in a directory of root's no one else may write). */
static int judge_link(int dfd, int lfd, const char *res, const char *name,
		      char *why, size_t whylen)
{
	struct stat d, l;
	if (fstat(dfd, &d) < 0 || fstat(lfd, &l) < 0)
		return -errno;
	if (l.st_uid != 0)
		return say(why, whylen, -ELOOP,
			   "'%s/%s' is a symlink of uid %u, not root's: not "
			   "followed (name its target instead)",
			   res, name, (unsigned)l.st_uid);
	if (d.st_uid != 0 || (d.st_mode & 022))
		return say(why, whylen, -ELOOP,
			   "'%s/%s' is a symlink in a directory %s: not "
			   "followed (name its target instead)",
			   res, name,
			   d.st_uid != 0 ? "not root's"
					 : "its group or others may write");
	return 0;
}

/* The walk (safepath.h). fd_out: the last component opened with flags
 * (NULL: none opened); out: the path resolved; allow_missing: a missing
 * component ends the walk with the rest kept as written. */
static int walk(const char *path, int flags, int *fd_out, char *out,
		size_t outlen, bool allow_missing, char *why, size_t whylen)
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
			res_pop(res, &rl);
			continue;
		}
		int cfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			rc = -errno;
			if (rc == -ENOENT && allow_missing) {
				rc = res_push(res, &rl, sizeof(res), name, cl);
				if (!rc)
					rc = res_lexical(res, &rl, sizeof(res),
							 p);
				goto done;
			}
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
			rc = judge_link(dfd, cfd, res, name, why, whylen);
			ssize_t tl =
			    rc ? -1 : readlinkat(cfd, "", tgt, sizeof(tgt) - 1);
			if (!rc && tl < 0)
				rc = -errno;
			close(cfd);
			if (!rc && (++links > MAX_LINKS ||
				    (size_t)tl >= sizeof(tgt) - 1))
				rc = links > MAX_LINKS ? -ELOOP : -ENAMETOOLONG;
			size_t pl = strlen(p);
			if (!rc && (size_t)tl + pl + 1 > sizeof(rest))
				rc = -ENAMETOOLONG;
			if (rc)
				goto out;
			/* the target in place of the link, the rest after
			 * it (moved first: the two may overlap) */
			memmove(rest + tl, p, pl + 1);
			memcpy(rest, tgt, (size_t)tl);
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
			if (fd_out && !(flags & O_PATH)) {
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
			if (fd_out)
				*fd_out = fd;
			else
				close(fd);
			goto done;
		}
		if (!S_ISDIR(st.st_mode)) {
			close(cfd);
			rc = -ENOTDIR;
			/* under a file: nothing more exists, kept as written */
			if (allow_missing)
				rc = res_lexical(res, &rl, sizeof(res), p);
			if (rc)
				goto out;
			goto done;
		}
		close(dfd);
		dfd = cfd;
	}
	if (fd_out) { /* the path named a directory ("/", "a/..") */
		int fd = (flags & O_PATH) ? fcntl(dfd, F_DUPFD_CLOEXEC, 0)
					  : openat(dfd, ".", flags | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			goto out;
		}
		*fd_out = fd;
	}
done:
	if (!rc && out) {
		if (rl == 0) {
			res[rl++] = '/';
			res[rl] = 0;
		}
		if (rl + 1 > outlen) {
			rc = -ENAMETOOLONG;
			if (fd_out && *fd_out >= 0) {
				close(*fd_out);
				*fd_out = -1;
			}
		} else {
			memcpy(out, res, rl + 1);
		}
	}
out:
	close(dfd);
	return rc;
}

int wd_open_trusted(const char *path, int flags, char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = 0;
	int fd = open_nolinks(path, flags);
	/* a symlink on the way; or no openat2 (a kernel before 5.6, or a
	 * filter refusing it): walked */
	if (fd >= 0 || (fd != -ELOOP && fd != -ENOSYS && fd != -EPERM))
		return fd;
	fd = -1;
	int rc = walk(path, flags, &fd, NULL, 0, false, why, whylen);
	return rc < 0 ? rc : fd;
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
	if (fd >= 0) {
		close(fd);
		char res[PATH_MAX];
		size_t rl = 0;
		res[0] = 0;
		if (res_lexical(res, &rl, sizeof(res), path) < 0)
			return -ENAMETOOLONG;
		if (rl == 0) {
			res[rl++] = '/';
			res[rl] = 0;
		}
		if (rl + 1 > outlen)
			return -ENAMETOOLONG;
		memcpy(out, res, rl + 1);
		return 0;
	}
	return walk(path, O_PATH, NULL, out, outlen, true, why, whylen);
}
