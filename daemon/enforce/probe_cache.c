/* The per-boot cache of the kernel feature probe (probe.h).
 *
 * What a tier-1/2 call needs from the probe (BTF, BPF program types,
 * the LSM list, Landlock, seccomp, namespaces) cannot change while the
 * kernel runs, except the namespace limits (sysctls, part of the key; a
 * one-shot call leaves them out and takes no namespace answer). It
 * is probed once per boot, kernel and warden build, and kept in
 * <runtime dir>/probe-kernel. What can change at any time (the cgroup
 * mounts of this mount namespace, io_uring and ping sysctls, audit) is
 * read afresh by every process and never cached, but for what one-shot
 * calls share: the audit answer, for a second (below), and the cgroup
 * layout while its mounts are the very same (probe_cgroup.c).
 *
 * Threat: the cache decides which mechanisms a call relies on. A file we
 * did not write (another owner, writable by others, a symlink, garbage, an
 * older boot's or build's answers), or one in a directory someone else can
 * write or point elsewhere (not root's, writable by group or others, a
 * symlink), is never trusted: the probe runs again and the file is
 * replaced by temp + rename (not in such a directory: nothing is written). The
 * checksum catches torn or corrupt files, not attackers: only root can write a
 * file that passes the owner and mode checks.
 */
#include "enforce/probe.h"
#include "enforce/probe_int.h"
#include "common/log.h"
#include "common/util.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#define CACHE_MAGIC   "WDPROBE\1"
#define CACHE_VERSION 2u

struct cache_file {
	char magic[8];
	uint32_t version;
	uint32_t features_size; /* sizeof(struct wd_features) */
	struct wd_probe_key key;
	struct wd_features f;
	/* crc32 of everything above: a torn or damaged file, not a forged
	 * one (that is the owner and mode check's job). Not sha256: hashing
	 * with libcrypto first loads its configuration and providers, ~0.5 ms
	 * of a one-shot `warden exec` that hashes nothing else (issue 16) */
	uint32_t sum;
};

int wd_probe_runtime_path(char *out, size_t len, const char *name)
{
	int n = snprintf(out, len, "%s/%s", wd_runtime_dir(), name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int wd_probe_cache_path(char *out, size_t len)
{
	return wd_probe_runtime_path(out, len, "probe-kernel");
}

/* The running executable's GNU build id, as hex. */
static int build_id_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	char *out = arg;
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof(*nh);
			const unsigned char *desc =
			    (const unsigned char *)name +
			    ((nh->n_namesz + 3) & ~3u);
			if ((const char *)desc + nh->n_descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID &&
			    nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
			    nh->n_descsz <= 40) {
				for (unsigned j = 0; j < nh->n_descsz; j++)
					snprintf(out + 2 * j, 3, "%02x",
						 desc[j]);
				return 1;
			}
			p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return 1; /* the first object is the executable: stop there */
}

static void build_identity(char *out, size_t len)
{
	char id[81] = "";
	dl_iterate_phdr(build_id_cb, id);
	if (id[0]) {
		snprintf(out, len, "gnu:%s", id);
		return;
	}
	/* no build-id note: the binary's identity on disk */
	struct stat st;
	if (stat("/proc/self/exe", &st) == 0)
		snprintf(out, len, "exe:%llx:%llx:%llx:%lld.%09ld",
			 (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino,
			 (unsigned long long)st.st_size,
			 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	else
		snprintf(out, len, "unknown");
}

int wd_probe_key_now(struct wd_probe_key *k)
{
	int r = wd_probe_key_base(k);
	return r < 0 ? r : wd_probe_key_sysctls(k);
}

int wd_probe_key_base(struct wd_probe_key *k)
{
	memset(k, 0, sizeof(*k));
	char b[64];
	ssize_t r =
	    wd_read_small("/proc/sys/kernel/random/boot_id", b, sizeof(b));
	if (r < 0)
		return (int)r;
	wd_probe_strip_nl(b);
	if (!b[0] || wd_strlcpy(k->boot_id, b, sizeof(k->boot_id)) < 0)
		return -EINVAL;
	struct utsname u;
	if (uname(&u) < 0)
		return -errno;
	wd_strlcpy(k->release, u.release, sizeof(k->release));
	build_identity(k->build, sizeof(k->build));
	return 0;
}

int wd_probe_key_sysctls(struct wd_probe_key *k)
{
	/* the namespace probes' answers follow these sysctls */
	memset(k->sysctl, 0, sizeof(k->sysctl));
	static const char *const ns[] = {"user", "mnt", "pid",
					 "ipc",	 "uts", "net"};
	size_t off = 0;
	for (size_t i = 0; i < WD_ARRAY_SIZE(ns); i++) {
		char p[64], v[64];
		snprintf(p, sizeof(p), "/proc/sys/user/max_%s_namespaces",
			 ns[i]);
		if (wd_read_small(p, v, sizeof(v)) < 0)
			wd_strlcpy(v, "?", sizeof(v));
		wd_probe_strip_nl(v);
		int n = snprintf(k->sysctl + off, sizeof(k->sysctl) - off,
				 "%s%s", i ? "," : "", v);
		if (n < 0 || (size_t)n >= sizeof(k->sysctl) - off)
			return -E2BIG;
		off += n;
	}
	return 0;
}

static uint32_t checksum(const struct cache_file *c)
{
	return wd_crc32(c, offsetof(struct cache_file, sum));
}

/* The directory holding path, opened (not followed if it is a symlink)
 * and checked: root's, writable by root alone. Its fd (the caller closes
 * it), *base the file's name in it (in path). Every later step is relative
 * to the fd, so the directory checked is the one used: a path swapped
 * after the check (a symlink, a rename) changes nothing. -EPERM when it is
 * not such a directory (a symlink, another owner, writable by group or
 * others), -ENOENT etc. from open. */
static int root_dir_open(const char *path, const char **base)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	*base = slash ? slash + 1 : path;
	if (!**base)
		return -EINVAL;
	if (!slash)
		wd_strlcpy(dir, ".", sizeof(dir));
	else if (slash == path)
		wd_strlcpy(dir, "/", sizeof(dir));
	else if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	/* O_NOFOLLOW: a symlink in place of the directory is refused (ELOOP),
	 * not followed to a directory someone else keeps */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -EPERM : -errno;
	struct stat ds;
	if (fstat(dfd, &ds) < 0) {
		int e = -errno;
		close(dfd);
		return e;
	}
	if (!S_ISDIR(ds.st_mode) || ds.st_uid != 0 || (ds.st_mode & 022)) {
		close(dfd);
		return -EPERM;
	}
	return dfd;
}

/* A file we trust: regular, root's, that only root can write. */
static bool root_file_ok(const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_uid == 0 && !(st->st_mode & 022);
}

int wd_root_file_read(const char *path, void **out, size_t *len, size_t max)
{
	*out = NULL;
	const char *base;
	cleanup_close int dfd = root_dir_open(path, &base);
	if (dfd < 0)
		return dfd;
	/* O_NOFOLLOW: a symlink planted in the runtime dir is refused, not
	 * followed to a file that happens to pass the checks */
	cleanup_close int fd =
	    openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!root_file_ok(&st))
		return -EPERM;
	if (st.st_size <= 0 || (size_t)st.st_size > max)
		return -EINVAL;
	char *b = wd_malloc((size_t)st.st_size + 1);
	/* one byte more than the size: a file that grew is not whole */
	ssize_t n = wd_probe_read_full(fd, b, (size_t)st.st_size + 1);
	if (n != (ssize_t)st.st_size) {
		free(b);
		return -EINVAL;
	}
	*out = b;
	*len = (size_t)n;
	return 0;
}

int wd_root_file_write(const char *path, const void *buf, size_t len)
{
	int r;
	char dir[4096], tmp[300];
	if (wd_strlcpy(dir, path, sizeof(dir)) < 0)
		return -ENAMETOOLONG;
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		/* as every call's dir makes it (sandbox/native.c): a call's
		 * uid must be able to traverse it */
		if ((r = wd_mkdir_p(dir, 0711)) < 0)
			return r;
	}
	/* made, or found: a directory (not a symlink to one) that only root
	 * can write, or the file would go wherever someone else points it;
	 * the temp file and the rename are made in the directory checked */
	const char *base;
	cleanup_close int dfd = root_dir_open(path, &base);
	if (dfd < 0)
		return dfd;
	char rnd[17];
	wd_rand_hex(rnd, 16);
	if (snprintf(tmp, sizeof(tmp), "%s.%s.tmp", base, rnd) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd =
	    openat(dfd, tmp,
		   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	/* explicit: a umask must not matter, and neither may a group */
	if (fchmod(fd, 0644) < 0 || fchown(fd, 0, 0) < 0)
		r = -errno;
	else
		r = wd_write_all(fd, buf, len);
	if (r < 0) {
		close(fd);
		unlinkat(dfd, tmp, 0);
		return r;
	}
	close(fd);
	/* rename over whatever is there (a tampered file, a symlink): the
	 * directory entry is replaced, nothing is followed */
	if (renameat(dfd, tmp, dfd, base) < 0) {
		r = -errno;
		unlinkat(dfd, tmp, 0);
		return r;
	}
	return 0;
}

int wd_probe_cache_read(const char *path, const struct wd_probe_key *k,
			struct wd_features *out)
{
	cleanup_free struct cache_file *c = NULL;
	size_t n;
	int r = wd_root_file_read(path, (void **)&c, &n, sizeof(*c));
	if (r < 0)
		return r;
	if (n != sizeof(*c))
		return -EINVAL;
	if (memcmp(c->magic, CACHE_MAGIC, sizeof(c->magic)) ||
	    c->version != CACHE_VERSION ||
	    c->features_size != sizeof(struct wd_features) ||
	    checksum(c) != c->sum)
		return -EINVAL;
	/* every string of the key is compared whole, NUL included; the
	 * sysctls only when the caller read them */
	if (memcmp(c->key.boot_id, k->boot_id, sizeof(k->boot_id)) ||
	    memcmp(c->key.release, k->release, sizeof(k->release)) ||
	    memcmp(c->key.build, k->build, sizeof(k->build)) ||
	    (k->sysctl[0] &&
	     memcmp(c->key.sysctl, k->sysctl, sizeof(k->sysctl))))
		return -ESTALE;
	*out = c->f;
	/* strings from the file are bounded before anyone prints them */
	out->kernel_release[sizeof(out->kernel_release) - 1] = 0;
	out->machine[sizeof(out->machine) - 1] = 0;
	out->lsm_list[sizeof(out->lsm_list) - 1] = 0;
	out->lsm_source[sizeof(out->lsm_source) - 1] = 0;
	return 0;
}

int wd_probe_cache_write(const char *path, const struct wd_probe_key *k,
			 const struct wd_features *f)
{
	cleanup_free struct cache_file *c = wd_calloc(1, sizeof(*c));
	memcpy(c->magic, CACHE_MAGIC, sizeof(c->magic));
	c->version = CACHE_VERSION;
	c->features_size = sizeof(struct wd_features);
	c->key = *k;
	c->f = *f;
	c->sum = checksum(c);
	return wd_root_file_write(path, c, sizeof(*c));
}

/* ---- the audit answer, shared by one-shot calls --------------------------
 * AUDIT_GET makes the kernel start a thread for its answer (probe.c): the
 * largest single cost of a one-shot `warden exec` that was left (~0.12 ms
 * of its wall time, paired runs). A one-shot call takes an answer another
 * one got less than a second ago (wd_probe_audit_memo): the staleness
 * wardend already allows itself (native.c remembers "off" for a second).
 * Kept in <runtime dir>/probe-audit, read and written as the probe cache
 * is (root's file in root's directory), but overwritten in place: a
 * process that exits while writing leaves a torn file (the checksum) and
 * no temp file. Only answers (audit_err 0) are shared: a caller that
 * could not ask (a container's root without CAP_AUDIT_CONTROL) shares
 * nothing. The second is CLOCK_MONOTONIC's: a writer or reader in a time
 * namespace with an offset finds the answer from the future or old. */

#define MEMO_MAGIC "WDAUDIT\1"

struct audit_memo {
	char magic[8];
	char boot_id[40]; /* CLOCK_MONOTONIC restarts with the boot */
	uint64_t at_ns;	  /* when it was asked (wd_now_ns) */
	int32_t audit_enabled, audit_err;
	uint8_t audit;
	uint8_t pad[7];
	uint32_t sum;
};

static uint32_t memo_sum(const struct audit_memo *m)
{
	return wd_crc32(m, offsetof(struct audit_memo, sum));
}

int wd_probe_audit_memo_read(const char *boot_id, uint64_t now,
			     struct wd_features *f, uint64_t *at_ns)
{
	char path[4096];
	cleanup_free struct audit_memo *m = NULL;
	size_t n;
	int r = wd_probe_runtime_path(path, sizeof(path), "probe-audit");
	if (r < 0 ||
	    (r = wd_root_file_read(path, (void **)&m, &n, sizeof(*m))) < 0)
		return r;
	if (n != sizeof(*m) || memcmp(m->magic, MEMO_MAGIC, 8) ||
	    memo_sum(m) != m->sum)
		return -EINVAL;
	m->boot_id[sizeof(m->boot_id) - 1] = 0;
	if (strcmp(m->boot_id, boot_id) || m->at_ns > now ||
	    now - m->at_ns >= WD_AUDIT_MEMO_NS)
		return -ESTALE;
	f->audit = m->audit != 0;
	f->audit_enabled = m->audit_enabled;
	f->audit_err = m->audit_err;
	*at_ns = m->at_ns;
	return 0;
}

int wd_probe_audit_memo_write(const char *boot_id, const struct wd_features *f,
			      uint64_t at_ns)
{
	struct audit_memo m;
	memset(&m, 0, sizeof(m));
	memcpy(m.magic, MEMO_MAGIC, 8);
	wd_strlcpy(m.boot_id, boot_id, sizeof(m.boot_id));
	m.at_ns = at_ns;
	m.audit = f->audit;
	m.audit_enabled = f->audit_enabled;
	m.audit_err = f->audit_err;
	m.sum = memo_sum(&m);
	char path[4096];
	const char *base;
	int r = wd_probe_runtime_path(path, sizeof(path), "probe-audit");
	if (r < 0)
		return r;
	cleanup_close int dfd = root_dir_open(path, &base);
	if (dfd < 0)
		return dfd;
	/* judged before it is opened: a device node or a FIFO put there is
	 * never opened for writing, a second link never written through */
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (!root_file_ok(&st) || st.st_nlink != 1))
		return -EPERM;
	cleanup_close int fd =
	    openat(dfd, base,
		   O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		fd = openat(
		    dfd, base,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0 && (fchmod(fd, 0644) < 0 || fchown(fd, 0, 0) < 0))
			return -errno;
	}
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* someone else's file: left alone (the reader refuses it too) */
	if (!root_file_ok(&st) || st.st_nlink != 1)
		return -EPERM;
	if (pwrite(fd, &m, sizeof(m), 0) != (ssize_t)sizeof(m))
		return -EIO;
	if (st.st_size > (off_t)sizeof(m) && ftruncate(fd, sizeof(m)) < 0)
		return -errno;
	return 0;
}

void wd_probe_audit_memo_forget(void)
{
	char path[4096];
	const char *base;
	if (wd_probe_runtime_path(path, sizeof(path), "probe-audit") < 0)
		return;
	cleanup_close int dfd = root_dir_open(path, &base);
	if (dfd >= 0)
		unlinkat(dfd, base, 0);
}
