#include "sandbox/common.h"
#include "sandbox/mounts.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

const char *const wd_loader_paths[] = {
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
};
const int wd_loader_paths_n = WD_ARRAY_SIZE(wd_loader_paths);

struct bind {
	const char *path;
	bool write;
	bool exec; /* listed under filesystem.exec (or a loader) */
	bool noexec;
};

/* A path listed under exec, or below one: the manifest allows running
 * files there, so its bind keeps exec. */
static bool under_exec(const struct wd_manifest *m, const char *p)
{
	for (int i = 0; i < m->fs_exec.n; i++) {
		size_t l = strlen(m->fs_exec.v[i]);
		if (!strncmp(p, m->fs_exec.v[i], l) &&
		    (p[l] == '/' || p[l] == 0 || l == 1))
			return true;
	}
	return false;
}

static int cmp_bind(const void *a, const void *b)
{
	/* Parents before children: binding /usr after /usr/bin would hide
	 * the child mount. */
	return strcmp(((const struct bind *)a)->path,
		      ((const struct bind *)b)->path);
}

/* Create `rel` under root as a directory or an empty file. */
static int make_point(const char *dst, bool dir)
{
	char buf[4096];
	if (wd_strlcpy(buf, dst, sizeof(buf)) < 0)
		return -ENAMETOOLONG;
	char *slash = strrchr(buf, '/');
	if (slash && slash != buf) {
		*slash = 0;
		int r = wd_mkdir_p(buf, 0755);
		if (r < 0)
			return r;
	}
	if (dir)
		return mkdir(dst, 0755) < 0 && errno != EEXIST ? -errno : 0;
	int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	close(fd);
	return 0;
}

/* Bind one host path at the same place in the new root. Not recursive: a
 * mount below the path would otherwise come along with its own (possibly
 * writable) flags; without MS_REC it shows as an empty directory. */
static int bind_one(const char *root, const char *src, bool write, bool noexec,
		    struct wd_err *err)
{
	struct stat st;
	char dst[4096];
	if (stat(src, &st) < 0)
		return errno == ENOENT
			   ? 0
			   : wd_err_set(err, -errno, "filesystem: '%s': %s",
					src, strerror(errno));
	snprintf(dst, sizeof(dst), "%s%s", root, src);
	int r = make_point(dst, S_ISDIR(st.st_mode));
	if (r < 0)
		return wd_err_set(err, r, "filesystem: mountpoint '%s': %s",
				  dst, strerror(-r));
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return wd_err_set(err, -errno, "filesystem: bind '%s': %s", src,
				  strerror(errno));
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV;
	if (!write)
		fl |= MS_RDONLY;
	/* noexec refuses execve and mmap(PROT_EXEC) of every file on the
	 * mount, the dynamic loader's route included (Landlock holds only
	 * execve): what the tool can write it cannot run. */
	if (noexec)
		fl |= MS_NOEXEC;
	if (mount(NULL, dst, NULL, fl, NULL) < 0)
		return wd_err_set(err, -errno, "filesystem: remount '%s'%s: %s",
				  src, write ? "" : " read-only",
				  strerror(errno));
	return 0;
}

static int setup_dev(const char *root, struct wd_err *err)
{
	char dev[4096];
	snprintf(dev, sizeof(dev), "%s/dev", root);
	if (mkdir(dev, 0755) < 0 && errno != EEXIST)
		return wd_err_set(err, -errno, "/dev: %s", strerror(errno));
	if (mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC,
		  "mode=0755,size=64k") < 0)
		return wd_err_set(err, -errno, "/dev tmpfs: %s",
				  strerror(errno));
	static const char *const nodes[] = {"null",   "zero",	 "full",
					    "random", "urandom", "tty"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(nodes); i++) {
		char src[64], dst[4200];
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		snprintf(dst, sizeof(dst), "%s/%s", dev, nodes[i]);
		if (make_point(dst, false) < 0 ||
		    mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return wd_err_set(err, -errno, "/dev/%s: %s", nodes[i],
					  strerror(errno));
	}
	static const char *const links[][2] = {{"/proc/self/fd", "fd"},
					       {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}};
	for (size_t i = 0; i < WD_ARRAY_SIZE(links); i++) {
		char dst[4200];
		snprintf(dst, sizeof(dst), "%s/%s", dev, links[i][1]);
		if (symlink(links[i][0], dst) < 0)
			return wd_err_set(err, -errno, "/dev/%s: %s",
					  links[i][1], strerror(errno));
	}
	char shm[4200];
	snprintf(shm, sizeof(shm), "%s/shm", dev);
	if (mkdir(shm, 01777) < 0 ||
	    mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=1777,size=16m") < 0)
		return wd_err_set(err, -errno, "/dev/shm: %s", strerror(errno));
	/* read-only from here on: nothing can add device nodes */
	if (mount(NULL, dev, NULL,
		  MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
		  "mode=0755,size=64k") < 0)
		return wd_err_set(err, -errno, "/dev read-only: %s",
				  strerror(errno));
	return 0;
}

/* Recreate under `root` every symlink met while resolving `path` on the
 * host, so a short name resolves in the new root to the bound target: the
 * ELF interpreter /lib64/ld-linux-x86-64.so.2 goes through /lib64 and
 * /usr/lib64/ld-linux-x86-64.so.2 before reaching the real file. Links
 * expose nothing by themselves. Runs before the binds: where a parent is
 * bound later, the host's own links show through it. */
static int link_chain(const char *root, const char *path)
{
	char cur[4096], pre[4096], target[4096], next[4096], dst[8192];
	if (wd_strlcpy(cur, path, sizeof(cur)) < 0)
		return -ENAMETOOLONG;
	for (int hops = 0; hops < 40; hops++) {
		size_t i = 1, end;
		bool link = false;
		struct stat st;
		for (;;) {
			const char *slash = strchr(cur + i, '/');
			end = slash ? (size_t)(slash - cur) : strlen(cur);
			memcpy(pre, cur, end);
			pre[end] = 0;
			if (lstat(pre, &st) < 0)
				return 0; /* absent: nothing to grant */
			if (S_ISLNK(st.st_mode)) {
				link = true;
				break;
			}
			if (!slash)
				break;
			i = end + 1;
		}
		if (!link)
			return 0;
		ssize_t n = readlink(pre, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = 0;
		snprintf(dst, sizeof(dst), "%s%s", root, pre);
		char *slash = strrchr(dst, '/');
		*slash = 0;
		int r = wd_mkdir_p(dst, 0755);
		*slash = '/';
		if (r < 0)
			return r;
		if (symlink(target, dst) < 0 && errno != EEXIST)
			return -errno;
		if (target[0] == '/') {
			snprintf(next, sizeof(next), "%s%s", target, cur + end);
		} else {
			char *d = strrchr(pre, '/');
			*d = 0;
			snprintf(next, sizeof(next), "%s/%s%s", pre, target,
				 cur + end);
		}
		if (wd_strlcpy(cur, next, sizeof(cur)) < 0)
			return -ENAMETOOLONG;
	}
	return -ELOOP;
}

int wd_mounts_setup(const char *root, const struct wd_manifest *m,
		    struct wd_err *err)
{
	int r;
	/* Cut propagation both ways before touching anything. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return wd_err_set(err, -errno, "mount: make / private: %s",
				  strerror(errno));
	if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755,size=1m") < 0)
		return wd_err_set(err, -errno, "root tmpfs: %s",
				  strerror(errno));
	if ((r = wd_sb_copy_root_symlinks(root)) < 0)
		return wd_err_set(err, r, "root symlinks: %s", strerror(-r));

	int n = m->fs_read.n + m->fs_exec.n + m->fs_write.n + wd_loader_paths_n;
	struct bind *b = wd_calloc(n, sizeof(*b));
	int k = 0;
	for (int i = 0; i < m->fs_read.n; i++)
		b[k++] = (struct bind){m->fs_read.v[i], false, false, false};
	for (int i = 0; i < m->fs_exec.n; i++)
		b[k++] = (struct bind){m->fs_exec.v[i], false, true, false};
	for (int i = 0; i < m->fs_write.n; i++)
		b[k++] = (struct bind){m->fs_write.v[i], true, false,
				       !under_exec(m, m->fs_write.v[i])};
	for (int i = 0; i < wd_loader_paths_n; i++) {
		char rp[4096];
		if (!realpath(wd_loader_paths[i], rp))
			continue;
		if ((r = link_chain(root, wd_loader_paths[i])) < 0) {
			free(b);
			return wd_err_set(err, r, "loader '%s': %s",
					  wd_loader_paths[i], strerror(-r));
		}
		b[k++] = (struct bind){wd_strdup(rp), false, true, false};
	}
	qsort(b, k, sizeof(*b), cmp_bind);
	for (int i = 0; i < k; i++) {
		/* Skip a path already covered by an earlier bind of a parent
		 * with the same or wider access. */
		bool covered = false;
		for (int j = 0; j < i && !covered; j++) {
			size_t pl = strlen(b[j].path);
			/* a noexec parent never covers an exec path */
			covered =
			    !strncmp(b[i].path, b[j].path, pl) &&
			    (b[i].path[pl] == '/' || b[i].path[pl] == 0) &&
			    (b[j].write || !b[i].write) &&
			    (!b[j].noexec || !b[i].exec);
		}
		if (covered)
			continue;
		if ((r = bind_one(root, b[i].path, b[i].write, b[i].noexec,
				  err)) < 0) {
			free(b);
			return r;
		}
	}
	free(b);

	char p[4096];
	snprintf(p, sizeof(p), "%s/tmp", root);
	uint32_t mb = m->memory_mb ? m->memory_mb : WD_DEFAULT_MEMORY_MB;
	char opts[64];
	snprintf(opts, sizeof(opts), "mode=1777,size=%um", mb);
	/* scratch: writable, so never executable (see bind_one) */
	if (make_point(p, true) < 0 ||
	    mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) <
		0)
		return wd_err_set(err, -errno, "/tmp tmpfs: %s",
				  strerror(errno));
	if ((r = setup_dev(root, err)) < 0)
		return r;
	snprintf(p, sizeof(p), "%s/proc", root);
	if (make_point(p, true) < 0 ||
	    mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "hidepid=2") < 0)
		return wd_err_set(err, -errno, "/proc: %s", strerror(errno));

	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		return wd_err_set(err, -errno, "pivot_root: %s",
				  strerror(errno));
	/* The old root is stacked under the new one: detach it. */
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return wd_err_set(err, -errno, "detach old root: %s",
				  strerror(errno));
	if (mount(NULL, "/", NULL,
		  MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  "mode=0755,size=1m") < 0)
		return wd_err_set(err, -errno, "root read-only: %s",
				  strerror(errno));
	return 0;
}

int wd_mounts_memfd_noexec(struct wd_err *err)
{
	/* Per pid namespace (6.3+), inherited by child namespaces, which
	 * cannot lower it. 2: a memfd is created non-executable and sealed
	 * so (F_SEAL_EXEC), and MFD_EXEC is refused: no execveat of an
	 * anonymous file. */
	int r = wd_write_str("/proc/sys/vm/memfd_noexec", "2");
	if (r < 0)
		return wd_err_set(err, r,
				  "filesystem.exec: cannot enforce: "
				  "vm.memfd_noexec in the call's pid "
				  "namespace (kernel 6.3+): %s",
				  strerror(-r));
	return 0;
}
