/* Helpers of the node's BPF pins (under $WARDEN_BPF_PIN_DIR, default
 * /sys/fs/bpf/warden), shared by the objects pinned there: egress
 * (egress_pin.c, which implements these) and BPF LSM (lsm_pin.c). */
#ifndef WD_ENFORCE_BPF_PIN_H
#define WD_ENFORCE_BPF_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/util.h"

/* The pin dir: $WARDEN_BPF_PIN_DIR or /sys/fs/bpf/warden. */
const char *wd_pin_dir(void);
/* The pin dir exists, on bpffs (mounted on its parent if need be), and is
 * root's and writable by root alone; `who` prefixes the message. */
int wd_pin_dir_ensure(const char *who, const char *dir, struct wd_err *err);
/* 0 if `st` (of path p) is a directory of root's that only root can
 * write; else -EPERM with "<who>: pin dir 'p' is not ours ..." in err. */
int wd_pin_owner_ok(const char *who, const char *p, const struct stat *st,
		    struct wd_err *err);
/* BPF_OBJ_GET of `name` in directory dfd (BPF_F_PATH_FD where the kernel
 * has it), else of the whole path `full`; fd or -1 with errno. */
int wd_pin_get(int dfd, const char *full, const char *name);
/* BPF_OBJ_PIN of fd as `name` in directory dfd, the same way; 0 or -1
 * with errno. */
int wd_pin_put(int dfd, const char *full, const char *name, int fd);
/* Remove the directory `name` of dfd and the pins in it (unlinking a pin
 * drops the name only: what an fd or a link still holds stays). */
void wd_pin_remove(int dfd, const char *name);
/* Finish a directory of pins made as dfd's `tmp` (rc: 0 if every pin is
 * in it): add the version record `ver` (a frozen one-entry array,
 * wd_version) and rename it `name`, replacing nothing; on any failure the
 * directory is removed. 0 or -errno (message in err). */
int wd_pin_commit(const char *who, const char *dir, int dfd, const char *tmp,
		  const char *name, const void *ver, size_t vsz, int rc,
		  struct wd_err *err);
/* The pins of directory hd, opened by open_fn; missing or stale (any
 * error but -EPERM, which is "not ours": refused), made again by make_fn
 * (dfd: the pin dir) under an exclusive flock of the pin dir, after one
 * more open_fn there (another creator's may be in place by then), and
 * opened. 0 or -errno, the message in err. */
int wd_pin_open_or_make(const char *who, const char *dir, const char *hd,
			int (*open_fn)(void *ctx, const char *hd,
				       struct wd_err *err),
			int (*make_fn)(void *ctx, int dfd, struct wd_err *err),
			void *ctx, struct wd_err *err);
/* False only if the cgroup of id cgid is known gone (mfd: an fd of the
 * cgroup v2 root, for open_by_handle_at). */
bool wd_cgroup_alive(int mfd, uint64_t cgid);

#endif
