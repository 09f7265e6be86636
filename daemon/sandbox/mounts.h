/* Tier 2's filesystem view: a new root holding only the manifest's paths.
 * Runs in the call's own mount namespace (G1, as root, before the identity
 * drop); nothing here touches the host's mounts: propagation is cut first. */
#ifndef WD_MOUNTS_H
#define WD_MOUNTS_H

#include "common/util.h"
#include "policy/manifest.h"

/* Build the root at `root` (an empty host directory), pivot into it. */
int wd_mounts_setup(const char *root, const struct wd_manifest *m,
		    struct wd_err *err);

/* In the call's new pid namespace, after its /proc is mounted: memfds
 * are never executable there (vm.memfd_noexec = 2). 0 or -errno. */
int wd_mounts_memfd_noexec(struct wd_err *err);

/* ELF interpreters: the kernel opens them for execution, so Landlock must
 * grant EXECUTE on them for any dynamically linked tool to start. */
extern const char *const wd_loader_paths[];
extern const int wd_loader_paths_n;

#endif
