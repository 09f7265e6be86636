/* wd_rm_rf: remove a tree a sandboxed program may have shaped.
 *
 * The tree is hostile: a tool may leave 10,000 nested directories, symlinks
 * to /, directories it renamed, and the remover may run with few fds left
 * (a daemon near RLIMIT_NOFILE). So the walk is iterative (constant stack:
 * a recursive remover overflowed the reaper thread's stack at ~3,000
 * levels), holds at most two directory fds at any time (the level it reads
 * and the one it steps to), opens every directory with O_NOFOLLOW |
 * O_DIRECTORY relative to its parent and never by path, removes with
 * unlinkat, stays on the file system it started on (a mount inside the
 * tree is left alone, not emptied), and climbs back with ".." only after
 * checking that ".." is the directory it came from (a directory moved
 * meanwhile cannot lead the walk outside the tree). The memory it needs
 * grows with the depth (16 bytes a level, on the heap), not the stack.
 * tests/unit/test_rmtree.c. */
#include "common/util.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct dirent64_k {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

#define DT_DIR_K     4
#define DT_UNKNOWN_K 0

struct level {
	dev_t dev;
	ino_t ino;
	off_t resume;  /* where this level's listing goes on after the child */
	unsigned errs; /* the walk's error count when it came down here */
};

struct walk {
	struct level *lv;
	size_t n, cap;
	struct {
		dev_t dev;
		ino_t ino;
	} * bad; /* directories that could not be emptied: not entered again */
	size_t n_bad, cap_bad;
	int err;       /* first error, -errno */
	unsigned errs; /* errors so far */
};

/* at most this many undeletable directories before the walk gives up */
#define BAD_MAX 4096

static void note(struct walk *w, int e)
{
	if (!w->err && e)
		w->err = e;
	w->errs++;
}

static void push(struct walk *w, const struct stat *st)
{
	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 64;
		w->lv = wd_realloc(w->lv, w->cap * sizeof(*w->lv));
	}
	w->lv[w->n++] = (struct level){st->st_dev, st->st_ino, 0, w->errs};
}

static bool is_bad(struct walk *w, const struct stat *st)
{
	for (size_t i = 0; i < w->n_bad; i++)
		if (w->bad[i].dev == st->st_dev && w->bad[i].ino == st->st_ino)
			return true;
	return false;
}

static int mark_bad(struct walk *w, dev_t dev, ino_t ino)
{
	if (w->n_bad == BAD_MAX)
		return -ELOOP;
	if (w->n_bad == w->cap_bad) {
		w->cap_bad = w->cap_bad ? 2 * w->cap_bad : 16;
		w->bad = wd_realloc(w->bad, w->cap_bad * sizeof(*w->bad));
	}
	w->bad[w->n_bad].dev = dev;
	w->bad[w->n_bad].ino = ino;
	w->n_bad++;
	return 0;
}

/* An entry of directory fd: removed if it can be; *child set to an open
 * fd when it is a non-empty directory to enter (its stat in *cst). */
static void entry(struct walk *w, int fd, const char *name, unsigned type,
		  int *child, struct stat *cst)
{
	*child = -1;
	if (type != DT_DIR_K && type != DT_UNKNOWN_K) {
		if (unlinkat(fd, name, 0) < 0 && errno != ENOENT)
			note(w, -errno);
		return;
	}
	if (unlinkat(fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return;
	if (errno == ENOTDIR) { /* DT_UNKNOWN: not a directory after all */
		if (unlinkat(fd, name, 0) < 0 && errno != ENOENT)
			note(w, -errno);
		return;
	}
	if (errno != ENOTEMPTY && errno != EEXIST) {
		note(w, -errno);
		return;
	}
	int c =
	    openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c < 0) {
		note(w, -errno);
		return;
	}
	if (fstat(c, cst) < 0) {
		note(w, -errno);
		close(c);
		return;
	}
	if (cst->st_dev != w->lv[0].dev || is_bad(w, cst)) {
		/* another file system mounted here is not ours to empty;
		 * a directory that failed once is not walked again */
		if (cst->st_dev != w->lv[0].dev)
			note(w, -EXDEV);
		close(c);
		return;
	}
	*child = c;
}

/* Read fd's directory from *pos on; stop at the first directory to enter
 * (returned open, *pos left at its own entry so that the listing comes
 * back to it). -1 when the directory has been read to its end. */
static int scan(struct walk *w, int fd, off_t *pos, char *buf, size_t bufsz,
		struct stat *cst)
{
	if (lseek(fd, *pos, SEEK_SET) < 0) {
		note(w, -errno);
		return -1;
	}
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, bufsz);
		if (n <= 0) {
			if (n < 0)
				note(w, -errno);
			return -1;
		}
		off_t at = *pos;
		for (long o = 0; o < n;) {
			struct dirent64_k *d = (struct dirent64_k *)(buf + o);
			o += d->d_reclen;
			const char *nm = d->d_name;
			if (!strcmp(nm, ".") || !strcmp(nm, "..")) {
				at = d->d_off;
				continue;
			}
			int c;
			entry(w, fd, nm, d->d_type, &c, cst);
			if (c >= 0) {
				*pos = at; /* re-read this entry on return */
				return c;
			}
			at = d->d_off;
		}
		*pos = at;
	}
}

int wd_rm_rf(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct walk w = {0};
	const size_t bufsz = 32 << 10;
	char *buf = wd_malloc(bufsz);
	if (fstat(fd, &st) < 0) {
		note(&w, -errno);
		goto out;
	}
	push(&w, &st);
	for (;;) {
		struct stat cst;
		struct level *cur = &w.lv[w.n - 1];
		int c = scan(&w, fd, &cur->resume, buf, bufsz, &cst);
		if (c >= 0) { /* down */
			close(fd);
			fd = c;
			push(&w, &cst);
			continue;
		}
		if (w.n == 1)
			break;
		/* up: this level is read to its end. Its parent, by "..",
		 * only if that is still the directory we came down from. */
		struct level done = w.lv[--w.n];
		int p = openat(fd, "..",
			       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat pst;
		if (p < 0 || fstat(p, &pst) < 0 ||
		    pst.st_dev != w.lv[w.n - 1].dev ||
		    pst.st_ino != w.lv[w.n - 1].ino) {
			note(&w, p < 0 ? -errno : -ESTALE);
			if (p >= 0)
				close(p);
			goto out; /* moved under us: stop here */
		}
		close(fd);
		fd = p;
		/* Coming back, the listing re-reads the child's entry: empty
		 * now, it goes; left non-empty by an error below, it is not
		 * entered again (each directory is emptied at most once). */
		if (w.errs > done.errs) {
			int r = mark_bad(&w, done.dev, done.ino);
			if (r < 0) {
				note(&w, r);
				goto out;
			}
		}
	}
	close(fd);
	fd = -1;
	if (rmdir(path) < 0 && errno != ENOENT)
		note(&w, -errno);
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(w.lv);
	free(w.bad);
	return w.err;
}
