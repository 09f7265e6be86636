/* common/safepath.h: the opens and resolutions warden's grants make as
 * root follow root's symlinks in directories only root may write (the
 * system's /lib -> usr/lib) and no other: a link of another uid (a tool's,
 * as settle leaves it: uid 65534), or one in a directory its group or
 * others may write, is refused with the link named; relative and absolute
 * targets, "..", chains, missing tails and the fast path (no link on the
 * way) resolve as the kernel would. Needs root (chown of the links). */
#include "t.h"
#include "common/safepath.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char D[] = "/tmp/wd-safepath.XXXXXX";

static void mk(const char *rel, mode_t mode, bool dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", D, rel);
	if (dir) {
		mkdir(p, mode);
		chmod(p, mode);
	} else {
		int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, mode);
		if (fd >= 0) {
			(void)!write(fd, rel, strlen(rel));
			close(fd);
		}
	}
}

static void ln(const char *target, const char *rel, uid_t owner)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", D, rel);
	(void)!symlink(target, p);
	(void)!lchown(p, owner, (gid_t)-1);
}

/* the inode wd_open_trusted gives for rel, against stat of want */
static int same_as(const char *rel, const char *want, int *rc, char *why,
		   size_t wl)
{
	char p[PATH_MAX], w[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", D, rel);
	snprintf(w, sizeof(w), "%s/%s", D, want);
	int fd = wd_open_trusted(p, O_PATH, why, wl);
	*rc = fd;
	if (fd < 0)
		return 0;
	struct stat a, b;
	int ok = fstat(fd, &a) == 0 && stat(w, &b) == 0 &&
		 a.st_ino == b.st_ino && a.st_dev == b.st_dev;
	close(fd);
	return ok;
}

static void resolves(const char *name, const char *rel, const char *want)
{
	char p[PATH_MAX], out[PATH_MAX], w[PATH_MAX], why[600] = "";
	snprintf(p, sizeof(p), "%s/%s", D, rel);
	snprintf(w, sizeof(w), "%s%s%s", D, *want ? "/" : "", want);
	int r = wd_path_resolve_trusted(p, out, sizeof(out), why, sizeof(why));
	T_OK(r == 0 && !strcmp(out, w), name, "rc %d out '%s' want '%s' (%s)",
	     r, r == 0 ? out : "", w, why);
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("safepath", "needs root (links of other owners)");
		return T_DONE();
	}
	if (!mkdtemp(D))
		return 1;
	chmod(D, 0755);
	mk("real", 0755, true);
	mk("real/f", 0644, false);
	mk("real/sub", 0755, true);
	mk("real/sub/g", 0644, false);
	mk("pub", 01777, true);		  /* like /tmp */
	mk("grp", 0775, true);		  /* its group may write */
	mk("tool", 0755, true);		  /* a write path after its call */
	ln("real", "rel", 0);		  /* root's, relative */
	ln(D, "abs", 0);		  /* root's, absolute, to the top */
	ln("rel/sub", "chain", 0);	  /* a link through a link */
	ln("../real", "real/up", 0);	  /* ".." in a target */
	ln("../real", "pub/rootlink", 0); /* root's, in a 1777 dir */
	ln("../real", "grp/rootlink", 0); /* root's, in a 0775 dir */
	ln("../real", "tool/out", 65534); /* a tool's, as settled */
	ln("../real", "tool/mine", 2000000001); /* a tool's, mid-call */
	ln("loop2", "loop1", 0);
	ln("loop1", "loop2", 0);

	int rc;
	char why[600];
	T_OK(same_as("real/f", "real/f", &rc, why, sizeof(why)), "plain",
	     "rc %d", rc);
	T_OK(same_as("rel/f", "real/f", &rc, why, sizeof(why)),
	     "root-link-relative", "rc %d (%s)", rc, why);
	T_OK(same_as("abs/real/sub/g", "real/sub/g", &rc, why, sizeof(why)),
	     "root-link-absolute", "rc %d (%s)", rc, why);
	T_OK(same_as("chain/g", "real/sub/g", &rc, why, sizeof(why)),
	     "root-link-chain", "rc %d (%s)", rc, why);
	T_OK(same_as("real/up/sub/../f", "real/f", &rc, why, sizeof(why)),
	     "dotdot-after-link", "rc %d (%s)", rc, why);
	T_OK(same_as("rel", "real", &rc, why, sizeof(why)), "link-last",
	     "rc %d (%s)", rc, why);

	/* refused: -ELOOP, the link named and why */
	same_as("tool/out/f", "real/f", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP && strstr(why, "tool/out") &&
		 strstr(why, "uid 65534"),
	     "settled-tool-link-refused", "rc %d (%s)", rc, why);
	same_as("tool/mine", "real", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP && strstr(why, "uid 2000000001"),
	     "call-uid-link-refused", "rc %d (%s)", rc, why);
	same_as("pub/rootlink/f", "real/f", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP && strstr(why, "others may write"),
	     "link-in-sticky-world-dir-refused", "rc %d (%s)", rc, why);
	same_as("grp/rootlink/f", "real/f", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP && strstr(why, "group or others"),
	     "link-in-group-writable-dir-refused", "rc %d (%s)", rc, why);
	same_as("loop1", "real", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP, "loop", "rc %d", rc);
	same_as("nope/x", "real", &rc, why, sizeof(why));
	T_OK(rc == -ENOENT, "missing", "rc %d", rc);

	/* a read-write open: the last component opened again by name */
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/rel/f", D);
	int fd = wd_open_trusted(p, O_RDONLY | O_NONBLOCK, why, sizeof(why));
	char b[16] = "";
	T_OK(fd >= 0 && read(fd, b, sizeof(b) - 1) > 0 && !strcmp(b, "real/f"),
	     "open-rdonly-through-root-link", "fd %d '%s'", fd, b);
	if (fd >= 0)
		close(fd);
	snprintf(p, sizeof(p), "%s/rel", D);
	fd = wd_open_trusted(p, O_RDONLY | O_DIRECTORY, why, sizeof(why));
	T_OK(fd >= 0, "open-dir-through-root-link", "rc %d (%s)", fd, why);
	if (fd >= 0)
		close(fd);

	/* resolution, as manifests' paths are canonicalised */
	resolves("resolve-plain", "real/sub/g", "real/sub/g");
	resolves("resolve-dots", "real/./sub//../f", "real/f");
	resolves("resolve-root-link", "rel/sub", "real/sub");
	resolves("resolve-chain-missing-tail", "chain/new/../x", "real/sub/x");
	resolves("resolve-under-a-file", "real/f/x", "real/f/x");
	char out[PATH_MAX];
	snprintf(p, sizeof(p), "%s/tool/out/new", D);
	int r = wd_path_resolve_trusted(p, out, sizeof(out), why, sizeof(why));
	T_OK(r == -ELOOP && strstr(why, "tool/out"),
	     "resolve-tool-link-refused", "rc %d (%s)", r, why);
	r = wd_path_resolve_trusted("relative/x", out, sizeof(out), why,
				    sizeof(why));
	T_OK(r == -EINVAL, "resolve-relative-refused", "rc %d", r);
	r = wd_path_resolve_trusted("/", out, sizeof(out), why, sizeof(why));
	T_OK(r == 0 && !strcmp(out, "/"), "resolve-root", "rc %d '%s'", r, out);

	wd_rm_rf(D);
	return T_DONE();
}
