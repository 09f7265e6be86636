/* Tier 2's filesystem view: a new root holding only the manifest's paths.
 * Runs in the call's own mount namespace (G1, as root, before the identity
 * drop); nothing here touches the host's mounts: propagation is cut first. */
#ifndef WD_MOUNTS_H
#define WD_MOUNTS_H

#include "common/util.h"
#include "policy/manifest.h"

/* The steps that build the root at `root` (an empty host directory) and
 * pivot into it: made by the parent (reads the host, allocates), applied
 * by G1 (system calls only: G1 may share the daemon's memory). */
struct wd_mount_plan;
int wd_mounts_plan(struct wd_mount_plan **out, const char *root,
		   const struct wd_manifest *m, struct wd_err *err);
/* In the call's mount namespace, as root: 0 or -errno with a message. No
 * allocation, no lock. */
int wd_mounts_apply(const struct wd_mount_plan *p, struct wd_err *err);
void wd_mounts_plan_free(struct wd_mount_plan *p);

/* In the call's new pid namespace, after its /proc is mounted: memfds
 * are never executable there (vm.memfd_noexec = 2). 0 or -errno. */
int wd_mounts_memfd_noexec(struct wd_err *err);

/* ELF interpreters: the kernel opens them for execution, so Landlock must
 * grant EXECUTE on them for any dynamically linked tool to start. */
extern const char *const wd_loader_paths[];
extern const int wd_loader_paths_n;

#endif
