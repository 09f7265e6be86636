#include "sandbox/common.h"
#include "sandbox/mounts.h"
#include "common/safepath.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
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

/* ---- the plan: built by the parent, applied by G1 ------------------------
 * Everything that reads the host's filesystem, allocates or formats is
 * done here, before the clone; G1 (which may share the daemon's memory)
 * only walks the list making system calls. */

enum mop_kind { MOP_MOUNT, MOP_MKDIR, MOP_FILE, MOP_SYMLINK, MOP_PIVOT };

struct wd_mop {
	enum mop_kind kind;
	/* mount: src, dst, fstype, data; mkdir/file: dst; symlink: src
	 * (target), dst (link) */
	const char *src, *dst, *fstype, *data;
	unsigned long flags;
	int mode;
	bool tolerate_exist;
	const char *what; /* error label */
};

struct wd_mount_plan {
	struct wd_mop *v;
	int n, cap;
	char **strs; /* owned strings */
	int nstrs, capstrs;
};

static const char *keep(struct wd_mount_plan *p, char *s)
{
	if (p->nstrs == p->capstrs) {
		p->capstrs = p->capstrs ? 2 * p->capstrs : 32;
		p->strs = wd_realloc(p->strs, p->capstrs * sizeof(char *));
	}
	p->strs[p->nstrs++] = s;
	return s;
}

static struct wd_mop *add(struct wd_mount_plan *p, enum mop_kind k)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 32;
		p->v = wd_realloc(p->v, p->cap * sizeof(*p->v));
	}
	struct wd_mop *o = &p->v[p->n++];
	*o = (struct wd_mop){.kind = k};
	return o;
}

static void add_mount(struct wd_mount_plan *p, const char *src, const char *dst,
		      const char *fstype, unsigned long fl, const char *data,
		      const char *what)
{
	struct wd_mop *o = add(p, MOP_MOUNT);
	o->src = src;
	o->dst = dst;
	o->fstype = fstype;
	o->flags = fl;
	o->data = data;
	o->what = what;
}

/* mkdir of dst (and its parents below the root, once each) */
static void add_mkdir_p(struct wd_mount_plan *p, const char *root,
			const char *dst, int mode)
{
	size_t rl = strlen(root);
	char buf[4096];
	if (wd_strlcpy(buf, dst, sizeof(buf)) < 0)
		return; /* the mount itself reports the long name */
	for (char *c = buf + rl + 1;; c++) {
		if (*c != '/' && *c)
			continue;
		char sv = *c;
		*c = 0;
		bool seen = false;
		for (int i = 0; i < p->n && !seen; i++)
			seen = p->v[i].kind == MOP_MKDIR &&
			       !strcmp(p->v[i].dst, buf);
		if (!seen) {
			struct wd_mop *o = add(p, MOP_MKDIR);
			o->dst = keep(p, wd_strdup(buf));
			o->mode = mode;
			o->tolerate_exist = true;
			o->what = o->dst;
		}
		if (!sv)
			break;
		*c = sv;
	}
}

/* Create `dst` under root as a directory or an empty file. */
static void add_point(struct wd_mount_plan *p, const char *root,
		      const char *dst, bool dir)
{
	if (dir) {
		add_mkdir_p(p, root, dst, 0755);
		return;
	}
	char buf[4096];
	if (wd_strlcpy(buf, dst, sizeof(buf)) >= 0) {
		char *slash = strrchr(buf, '/');
		if (slash && (size_t)(slash - buf) > strlen(root)) {
			*slash = 0;
			add_mkdir_p(p, root, buf, 0755);
		}
	}
	struct wd_mop *o = add(p, MOP_FILE);
	o->dst = dst;
	o->mode = 0644;
	o->tolerate_exist = true;
	o->what = dst;
}

/* Bind one host path at the same place in the new root. Not recursive: a
 * mount below the path would otherwise come along with its own (possibly
 * writable) flags; without MS_REC it shows as an empty directory. */
static int bind_one(struct wd_mount_plan *p, const char *root, const char *src,
		    bool write, bool noexec, struct wd_err *err)
{
	struct stat st;
	if (stat(src, &st) < 0)
		return errno == ENOENT
			   ? 0
			   : wd_err_set(err, -errno, "filesystem: '%s': %s",
					src, strerror(errno));
	const char *dst = keep(p, wd_asprintf("%s%s", root, src));
	src = keep(p, wd_strdup(src));
	add_point(p, root, dst, S_ISDIR(st.st_mode));
	add_mount(p, src, dst, NULL, MS_BIND, NULL, src);
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV;
	if (!write)
		fl |= MS_RDONLY;
	/* noexec refuses execve and mmap(PROT_EXEC) of every file on the
	 * mount, the dynamic loader's route included (Landlock holds only
	 * execve): what the tool can write it cannot run. */
	if (noexec)
		fl |= MS_NOEXEC;
	add_mount(p, NULL, dst, NULL, fl, NULL, src);
	return 0;
}

static void plan_dev(struct wd_mount_plan *p, const char *root)
{
	const char *dev = keep(p, wd_asprintf("%s/dev", root));
	add_mkdir_p(p, root, dev, 0755);
	add_mount(p, "tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC,
		  "mode=0755,size=64k", "/dev tmpfs");
	static const char *const nodes[] = {"null",   "zero",	 "full",
					    "random", "urandom", "tty"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(nodes); i++) {
		const char *src = keep(p, wd_asprintf("/dev/%s", nodes[i]));
		const char *dst = keep(p, wd_asprintf("%s/%s", dev, nodes[i]));
		struct wd_mop *o = add(p, MOP_FILE);
		o->dst = dst;
		o->mode = 0644;
		o->what = src;
		add_mount(p, src, dst, NULL, MS_BIND, NULL, src);
	}
	static const char *const links[][2] = {{"/proc/self/fd", "fd"},
					       {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}};
	for (size_t i = 0; i < WD_ARRAY_SIZE(links); i++) {
		struct wd_mop *o = add(p, MOP_SYMLINK);
		o->src = links[i][0];
		o->dst = keep(p, wd_asprintf("%s/%s", dev, links[i][1]));
		o->what = o->dst;
	}
	const char *shm = keep(p, wd_asprintf("%s/shm", dev));
	struct wd_mop *o = add(p, MOP_MKDIR);
	o->dst = shm;
	o->mode = 01777;
	o->what = "/dev/shm";
	add_mount(p, "tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=1777,size=16m", "/dev/shm");
	/* read-only from here on: nothing can add device nodes */
	add_mount(p, NULL, dev, NULL,
		  MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
		  "mode=0755,size=64k", "/dev read-only");
}

/* The symlinks of the host's / (/bin -> usr/bin, ...) at the new root. */
static int plan_root_symlinks(struct wd_mount_plan *p, const char *root)
{
	DIR *d = opendir("/");
	struct dirent *e;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char target[256], src[300];
		snprintf(src, sizeof(src), "/%s", e->d_name);
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		struct wd_mop *o = add(p, MOP_SYMLINK);
		o->src = keep(p, wd_strdup(target));
		o->dst = keep(p, wd_asprintf("%s/%s", root, e->d_name));
		o->tolerate_exist = true;
		o->what = o->dst;
	}
	closedir(d);
	return 0;
}

/* Recreate under `root` every symlink met while resolving `path` on the
 * host, so a short name resolves in the new root to the bound target: the
 * ELF interpreter /lib64/ld-linux-x86-64.so.2 goes through /lib64 and
 * /usr/lib64/ld-linux-x86-64.so.2 before reaching the real file. Links
 * expose nothing by themselves. Runs before the binds: where a parent is
 * bound later, the host's own links show through it. */
static int link_chain(struct wd_mount_plan *p, const char *root,
		      const char *path)
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
		if (strlen(dst) > strlen(root))
			add_mkdir_p(p, root, dst, 0755);
		*slash = '/';
		struct wd_mop *o = add(p, MOP_SYMLINK);
		o->src = keep(p, wd_strdup(target));
		o->dst = keep(p, wd_strdup(dst));
		o->tolerate_exist = true;
		o->what = o->dst;
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

void wd_mounts_plan_free(struct wd_mount_plan *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->nstrs; i++)
		free(p->strs[i]);
	free(p->strs);
	free(p->v);
	free(p);
}

int wd_mounts_plan(struct wd_mount_plan **out, const char *root,
		   const struct wd_manifest *m, struct wd_err *err)
{
	int r;
	struct wd_mount_plan *p = wd_calloc(1, sizeof(*p));
	root = keep(p, wd_strdup(root));
	/* Cut propagation both ways before touching anything. */
	add_mount(p, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL,
		  "make / private");
	add_mount(p, "tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755,size=1m", "root tmpfs");
	if ((r = plan_root_symlinks(p, root)) < 0) {
		wd_err_set(err, r, "root symlinks: %s", strerror(-r));
		goto fail;
	}

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
		if ((r = link_chain(p, root, wd_loader_paths[i])) < 0) {
			free(b);
			wd_err_set(err, r, "loader '%s': %s",
				   wd_loader_paths[i], strerror(-r));
			goto fail;
		}
		b[k++] =
		    (struct bind){keep(p, wd_strdup(rp)), false, true, false};
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
		if ((r = bind_one(p, root, b[i].path, b[i].write, b[i].noexec,
				  err)) < 0) {
			free(b);
			goto fail;
		}
	}
	free(b);

	const char *tmp = keep(p, wd_asprintf("%s/tmp", root));
	uint32_t mb = m->memory_mb ? m->memory_mb : WD_DEFAULT_MEMORY_MB;
	add_mkdir_p(p, root, tmp, 0755);
	/* scratch: writable, so never executable (see bind_one) */
	add_mount(p, "tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  keep(p, wd_asprintf("mode=1777,size=%um", mb)), "/tmp tmpfs");
	plan_dev(p, root);
	const char *proc = keep(p, wd_asprintf("%s/proc", root));
	add_mkdir_p(p, root, proc, 0755);
	add_mount(p, "proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "hidepid=2", "/proc");
	struct wd_mop *o = add(p, MOP_PIVOT);
	o->dst = root;
	o->what = "pivot_root";
	add_mount(p, NULL, "/", NULL,
		  MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  "mode=0755,size=1m", "root read-only");
	*out = p;
	return 0;
fail:
	wd_mounts_plan_free(p);
	return r;
}

/* A host path bound into the new root: opened first without following a
 * symlink a tool could have made (common/safepath.h: a link left under a
 * write path by an earlier call would otherwise bind its target), then
 * bound from that very file through its /proc/self/fd link, so nothing
 * put at the path in between is what gets bound. */
static int bind_trusted(const struct wd_mop *o, struct wd_err *err)
{
	char why[PATH_MAX + 160], fdp[64];
	int fd = wd_open_trusted(o->src, O_PATH, why, sizeof(why));
	if (fd < 0)
		return wd_err_set(err, fd, "mount setup: %s: %s", o->what,
				  why[0] ? why : strerrordesc_np(-fd));
	snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", fd);
	int r = mount(fdp, o->dst, o->fstype, o->flags, o->data);
	int e = errno;
	close(fd);
	if (r < 0)
		return wd_err_set(err, -e, "mount setup: %s: %s", o->what,
				  strerrordesc_np(e));
	return 0;
}

int wd_mounts_apply(const struct wd_mount_plan *p, struct wd_err *err)
{
	for (int i = 0; i < p->n; i++) {
		const struct wd_mop *o = &p->v[i];
		int r = 0;
		switch (o->kind) {
		case MOP_MOUNT:
			if ((o->flags & (MS_BIND | MS_REMOUNT)) == MS_BIND &&
			    o->src && o->src[0] == '/') {
				r = bind_trusted(o, err);
				if (r < 0)
					return r;
				break;
			}
			r = mount(o->src, o->dst, o->fstype, o->flags, o->data);
			break;
		case MOP_MKDIR:
			r = mkdir(o->dst, o->mode);
			break;
		case MOP_FILE:
			r = open(o->dst, O_CREAT | O_WRONLY | O_CLOEXEC,
				 o->mode);
			if (r >= 0)
				r = close(r);
			break;
		case MOP_SYMLINK:
			r = symlink(o->src, o->dst);
			break;
		case MOP_PIVOT:
			/* The old root is stacked under the new one:
			 * detach it. */
			if (chdir(o->dst) < 0 ||
			    syscall(SYS_pivot_root, ".", ".") < 0 ||
			    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
				r = -1;
			break;
		}
		if (r < 0 && !(o->tolerate_exist && errno == EEXIST))
			/* strerrordesc_np: no locale lookup (no lock) */
			return wd_err_set(err, -errno, "mount setup: %s: %s",
					  o->what, strerrordesc_np(errno));
	}
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
