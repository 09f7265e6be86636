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
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

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

/* a check's name with the run's prefix */
static const char *name_of(char nm[96], const char *pre, const char *s)
{
	size_t a = strlen(pre), b = strlen(s);
	if (a + b >= 96)
		b = 95 - a;
	memcpy(nm, pre, a);
	memcpy(nm + a, s, b);
	nm[a + b] = 0;
	return nm;
}
#define N(s) name_of(nm, pre, s)

static void opens(const char *pre)
{
	int rc;
	char why[600], nm[96];
	T_OK(same_as("real/f", "real/f", &rc, why, sizeof(why)), N("plain"),
	     "rc %d", rc);
	T_OK(same_as("rel/f", "real/f", &rc, why, sizeof(why)),
	     N("root-link-relative"), "rc %d (%s)", rc, why);
	T_OK(same_as("abs/real/sub/g", "real/sub/g", &rc, why, sizeof(why)),
	     N("root-link-absolute"), "rc %d (%s)", rc, why);
	T_OK(same_as("chain/g", "real/sub/g", &rc, why, sizeof(why)),
	     N("root-link-chain"), "rc %d (%s)", rc, why);
	T_OK(same_as("real/up/sub/../f", "real/f", &rc, why, sizeof(why)),
	     N("dotdot-after-link"), "rc %d (%s)", rc, why);
	T_OK(same_as("rel", "real", &rc, why, sizeof(why)), N("link-last"),
	     "rc %d (%s)", rc, why);

	/* refused: -ELOOP, the link named and why */
	same_as("tool/out/f", "real/f", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP && strstr(why, "tool/out") &&
		 strstr(why, "uid 65534"),
	     N("settled-tool-link-refused"), "rc %d (%s)", rc, why);
	same_as("tool/mine", "real", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP && strstr(why, "uid 2000000001"),
	     N("call-uid-link-refused"), "rc %d (%s)", rc, why);
	same_as("pub/rootlink/f", "real/f", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP && strstr(why, "others may write"),
	     N("link-in-sticky-world-dir-refused"), "rc %d (%s)", rc, why);
	same_as("grp/rootlink/f", "real/f", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP && strstr(why, "group or others"),
	     N("link-in-group-writable-dir-refused"), "rc %d (%s)", rc, why);
	same_as("loop1", "real", &rc, why, sizeof(why));
	T_OK(rc == -ELOOP, N("loop"), "rc %d", rc);
	same_as("nope/x", "real", &rc, why, sizeof(why));
	T_OK(rc == -ENOENT, N("missing"), "rc %d", rc);

	/* a read-write open: the last component opened again by name */
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/rel/f", D);
	int fd = wd_open_trusted(p, O_RDONLY | O_NONBLOCK, why, sizeof(why));
	char b[16] = "";
	T_OK(fd >= 0 && read(fd, b, sizeof(b) - 1) > 0 && !strcmp(b, "real/f"),
	     N("open-rdonly-through-root-link"), "fd %d '%s'", fd, b);
	if (fd >= 0)
		close(fd);
	snprintf(p, sizeof(p), "%s/rel", D);
	fd = wd_open_trusted(p, O_RDONLY | O_DIRECTORY, why, sizeof(why));
	T_OK(fd >= 0, N("open-dir-through-root-link"), "rc %d (%s)", fd, why);
	if (fd >= 0)
		close(fd);
}

/* openat2 refused with ENOSYS from here on (a seccomp filter) */
static void no_openat2(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		     offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat2, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog pr = {.len = WD_ARRAY_SIZE(f), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &pr) < 0)
		_exit(2);
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

	opens("");
	fflush(stdout);
	/* the walk by descriptors alone, as where openat2 is missing (before
	 * 5.6) or refused by a filter: openat2 fails with ENOSYS here */
	pid_t kid = fork();
	if (kid == 0) {
		no_openat2();
		opens("no-openat2/");
		fflush(stdout);
		_exit(t_failed ? 1 : 0);
	}
	int kst = 0;
	waitpid(kid, &kst, 0);
	T_OK(WIFEXITED(kst) && WEXITSTATUS(kst) == 0, "no-openat2-walk",
	     "status %d", kst);

	char why[600], p[PATH_MAX];
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
