/* wd_rm_rf against trees a tool can leave behind: 10,000 nested
 * directories removed by a thread with a 64 KiB stack at RLIMIT_NOFILE 16
 * (the recursive remover died of SIGSEGV at ~3,000 levels and of EMFILE
 * with few fds), symlinks to outside the tree never followed, a wide
 * directory, and an undeletable entry reported without looping. */
#include "t.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* nested dirs d/d/d... made by fd (paths would pass PATH_MAX) */
static int make_deep(const char *root, int depth)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < depth && fd >= 0; i++) {
		if (mkdirat(fd, "d", 0755) < 0)
			return -1;
		if (i % 1000 == 0) {
			int f = openat(fd, "f", O_CREAT | O_WRONLY | O_CLOEXEC,
				       0644);
			if (f >= 0)
				close(f);
		}
		int c = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = c;
	}
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

struct job {
	const char *path;
	int r;
};

static void *rm_thread(void *arg)
{
	struct job *j = arg;
	j->r = wd_rm_rf(j->path);
	return NULL;
}

/* wd_rm_rf on a thread with a small stack and few fds */
static int rm_constrained(const char *path)
{
	struct rlimit old, low = {16, 16};
	getrlimit(RLIMIT_NOFILE, &old);
	if (setrlimit(RLIMIT_NOFILE, &low) < 0)
		return -errno;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 << 10);
	struct job j = {path, -1};
	pthread_t th;
	int r = pthread_create(&th, &at, rm_thread, &j);
	if (r == 0)
		pthread_join(th, NULL);
	pthread_attr_destroy(&at);
	setrlimit(RLIMIT_NOFILE, &old);
	return r ? -r : j.r;
}

int main(void)
{
	char base[] = "/tmp/wd-rmtree.XXXXXX";
	if (!mkdtemp(base))
		return 1;
	char tree[300], outside[300], p[700];
	snprintf(tree, sizeof(tree), "%s/tree", base);
	snprintf(outside, sizeof(outside), "%s/outside", base);
	mkdir(tree, 0755);
	mkdir(outside, 0755);
	snprintf(p, sizeof(p), "%s/keep", outside);
	wd_write_file(p, "x", 1, 0644);

	/* deep + links to outside + a wide level */
	T_OK(make_deep(tree, 10000) == 0, "rmtree/make-deep", "mkdirat");
	snprintf(p, sizeof(p), "%s/link-dir", tree);
	T_OK(symlink(outside, p) == 0, "rmtree/make-link", "symlink");
	snprintf(p, sizeof(p), "%s/link-file", tree);
	char keep[700];
	snprintf(keep, sizeof(keep), "%s/keep", outside);
	symlink(keep, p);
	snprintf(p, sizeof(p), "%s/wide", tree);
	mkdir(p, 0755);
	for (int i = 0; i < 300; i++) {
		char q[800];
		snprintf(q, sizeof(q), "%s/wide/%d", tree, i);
		mkdir(q, 0755);
		snprintf(q, sizeof(q), "%s/wide/%d/f", tree, i);
		wd_write_file(q, "y", 1, 0644);
	}
	int r = rm_constrained(tree);
	T_OK(r == 0, "rmtree/deep-10000-nofile-16-stack-64k", "wd_rm_rf: %d",
	     r);
	T_OK(access(tree, F_OK) < 0, "rmtree/deep-gone", "%s still there",
	     tree);
	T_OK(access(keep, F_OK) == 0, "rmtree/links-not-followed",
	     "%s was removed through a symlink", keep);

	/* an entry that cannot go (immutable): reported, the walk ends,
	 * everything else goes */
	mkdir(tree, 0755);
	snprintf(p, sizeof(p), "%s/a/b", tree);
	wd_mkdir_p(p, 0755);
	char imm[700];
	snprintf(imm, sizeof(imm), "%s/a/b/f", tree);
	wd_write_file(imm, "z", 1, 0644);
	snprintf(p, sizeof(p), "%s/z", tree);
	wd_write_file(p, "z", 1, 0644);
	int fl = FS_IMMUTABLE_FL;
	int ifd = open(imm, O_RDONLY | O_CLOEXEC);
	if (ifd >= 0 && ioctl(ifd, FS_IOC_SETFLAGS, &fl) == 0) {
		r = rm_constrained(tree);
		T_OK(r == -EPERM, "rmtree/undeletable-reported", "r=%d", r);
		T_OK(access(p, F_OK) < 0 && access(imm, F_OK) == 0,
		     "rmtree/undeletable-rest-removed", "z left or f gone");
		fl = 0;
		ioctl(ifd, FS_IOC_SETFLAGS, &fl);
	} else {
		T_SKIP("rmtree/undeletable-reported",
		       "this /tmp has no immutable flag (FS_IOC_SETFLAGS)");
	}
	if (ifd >= 0)
		close(ifd);
	wd_rm_rf(base);
	T_OK(access(base, F_OK) < 0, "rmtree/cleanup", "%s left", base);
	return T_DONE();
}
