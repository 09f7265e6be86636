#include "enforce/landlock.h"
#include "common/safepath.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* Debian 12's uapi headers stop at ABI 2; the values are ABI-stable. */
#define LL_CREATE_RULESET_VERSION	 (1U << 0)
#define LL_RULE_PATH_BENEATH		 1
#define LL_FS_EXECUTE			 (1ULL << 0)
#define LL_FS_WRITE_FILE		 (1ULL << 1)
#define LL_FS_READ_FILE			 (1ULL << 2)
#define LL_FS_READ_DIR			 (1ULL << 3)
#define LL_FS_REMOVE_DIR		 (1ULL << 4)
#define LL_FS_REMOVE_FILE		 (1ULL << 5)
#define LL_FS_MAKE_CHAR			 (1ULL << 6)
#define LL_FS_MAKE_DIR			 (1ULL << 7)
#define LL_FS_MAKE_REG			 (1ULL << 8)
#define LL_FS_MAKE_SOCK			 (1ULL << 9)
#define LL_FS_MAKE_FIFO			 (1ULL << 10)
#define LL_FS_MAKE_BLOCK		 (1ULL << 11)
#define LL_FS_MAKE_SYM			 (1ULL << 12)
#define LL_FS_REFER			 (1ULL << 13) /* ABI 2 */
#define LL_FS_TRUNCATE			 (1ULL << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV			 (1ULL << 15) /* ABI 5 */
#define LL_SCOPE_ABSTRACT_UNIX		 (1ULL << 0)  /* ABI 6 */
#define LL_SCOPE_SIGNAL			 (1ULL << 1)  /* ABI 6 */
#define LL_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)    /* ABI 7 */

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule	     445
#define __NR_landlock_restrict_self  446
#endif

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

struct wd_landlock {
	int fd;
	int abi;
	uint64_t handled;
	uint64_t withheld; /* rights no rule grants (wd_landlock_no_symlinks) */
};

#define FILE_RIGHTS                                                            \
	(LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | \
	 LL_FS_IOCTL_DEV)

int wd_landlock_abi(void)
{
	long v = syscall(__NR_landlock_create_ruleset, NULL, 0,
			 LL_CREATE_RULESET_VERSION);
	return v < 0 ? -errno : (int)v;
}

static uint64_t handled_for(int abi)
{
	uint64_t h = (LL_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
	if (abi >= 2)
		h |= LL_FS_REFER;
	if (abi >= 3)
		h |= LL_FS_TRUNCATE;
	if (abi >= 5)
		h |= LL_FS_IOCTL_DEV;
	return h;
}

int wd_landlock_new(struct wd_landlock **out, struct wd_err *err)
{
	int abi = wd_landlock_abi();
	if (abi < 1)
		return wd_err_set(err, abi < 0 ? abi : -ENOTSUP,
				  "filesystem: cannot enforce: Landlock "
				  "unavailable (%s)",
				  strerror(abi < 0 ? -abi : ENOTSUP));
	struct ll_ruleset_attr attr = {.handled_access_fs = handled_for(abi)};
	size_t sz = sizeof(attr);
	if (abi >= 6)
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
	else
		sz = offsetof(struct ll_ruleset_attr, scoped);
	if (abi < 4)
		sz = offsetof(struct ll_ruleset_attr, handled_access_net);
	int fd = syscall(__NR_landlock_create_ruleset, &attr, sz, 0);
	if (fd < 0)
		return wd_err_set(err, -errno,
				  "filesystem: cannot enforce: Landlock "
				  "ruleset: %s",
				  strerror(errno));
	struct wd_landlock *ll = wd_calloc(1, sizeof(*ll));
	ll->fd = fd;
	ll->abi = abi;
	ll->handled = attr.handled_access_fs;
	*out = ll;
	return 0;
}

int wd_landlock_allow(struct wd_landlock *ll, const char *path,
		      enum wd_ll_grant g, struct wd_err *err)
{
	uint64_t a = 0;
	switch (g) {
	case WD_LL_READ:
		a = LL_FS_READ_FILE | LL_FS_READ_DIR;
		break;
	case WD_LL_EXEC:
		a = LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_EXECUTE;
		break;
	case WD_LL_DEV:
		a = LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV;
		break;
	case WD_LL_WRITE:
		a = LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_WRITE_FILE |
		    LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR |
		    LL_FS_MAKE_REG | LL_FS_MAKE_SYM | LL_FS_MAKE_FIFO |
		    LL_FS_MAKE_SOCK | LL_FS_REFER | LL_FS_TRUNCATE;
		break;
	}
	/* not through a symlink a tool could have made (safepath.h) */
	char why[PATH_MAX + 160];
	cleanup_close int fd = wd_open_trusted(path, O_PATH, why, sizeof(why));
	if (fd < 0) {
		if (fd == -ENOENT)
			return 0;
		return wd_err_set(err, fd, "filesystem: '%s': %s", path,
				  why[0] ? why : strerror(-fd));
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return wd_err_set(err, -errno, "filesystem: '%s': %s", path,
				  strerror(errno));
	/* Directory-only rights are invalid on a file rule (EINVAL). */
	if (!S_ISDIR(st.st_mode))
		a &= FILE_RIGHTS;
	a &= ll->handled & ~ll->withheld;
	struct ll_path_beneath pb = {.allowed_access = a, .parent_fd = fd};
	if (syscall(__NR_landlock_add_rule, ll->fd, LL_RULE_PATH_BENEATH, &pb,
		    0) < 0)
		return wd_err_set(err, -errno,
				  "filesystem: Landlock rule for '%s': %s",
				  path, strerror(errno));
	return 0;
}

void wd_landlock_no_symlinks(struct wd_landlock *ll)
{
	ll->withheld |= LL_FS_MAKE_SYM;
}

int wd_landlock_restrict(struct wd_landlock *ll)
{
	/* ABI 7: log denials after exec too, so the audit stream sees the
	 * tool's denials, not only ours. */
	unsigned flags = ll->abi >= 7 ? LL_RESTRICT_SELF_LOG_NEW_EXEC_ON : 0;
	if (syscall(__NR_landlock_restrict_self, ll->fd, flags) < 0)
		return -errno;
	/* Only our fd table changes: tier 1's T may share the daemon's
	 * memory (sandbox/native_spawn.c), whose ll still owns its fd. */
	close(ll->fd);
	return 0;
}

void wd_landlock_free(struct wd_landlock *ll)
{
	if (!ll)
		return;
	if (ll->fd >= 0)
		close(ll->fd);
	free(ll);
}
