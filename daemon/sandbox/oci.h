/* OCI bundles for tier 3 (gVisor): one per sandbox, generated from the
 * manifest. Nothing of the host is visible unless the manifest names it:
 * the root is an empty read-only directory holding only the host's
 * top-level symlinks (/lib -> usr/lib), and every path comes in as an
 * explicit bind mount (read-only unless listed under `write`). Beyond the
 * manifest's paths only what the program needs to start is bound, file by
 * file and read-only: the program, its dynamic loader, its libraries and
 * /etc/ld.so.cache (or a script's interpreter and that one's): see
 * elfdeps.h. */
#ifndef WD_OCI_H
#define WD_OCI_H

#include <sys/types.h>

#include <jansson.h>

#include "common/util.h"
#include "policy/manifest.h"

/* Host memory the gVisor sentry and gofer need on top of the program's
 * memory_mb (they are charged to the same cgroup). */
#define WD_T3_MEM_OVERHEAD_MB 64
/* The manifest's pids is enforced inside the sentry (RLIMIT_NPROC of the
 * guest uid: fork/clone fail with EAGAIN, the sandbox lives). The host
 * cgroup's pids.max is only the outer bound on the sandbox's host tasks:
 * the sentry's and gofer's threads (~50 idle) plus, under the ptrace
 * platform, gVisor's host-side tracee process for each guest address
 * space, with one thread for each sentry thread that ran in it. Measured with
 * runsc 0.0~20221219 (fork floods stopped by RLIMIT_NPROC n): host peak ~50 +
 * 7n (n=16: 146, 32: 256, 64: 494). */
#define WD_T3_PIDS_OVERHEAD 64
#define WD_T3_PIDS_PER_TASK 9

static inline unsigned wd_t3_host_pids(unsigned pids)
{
	return pids * WD_T3_PIDS_PER_TASK + WD_T3_PIDS_OVERHEAD;
}

struct wd_oci_opts {
	char *const *argv; /* absolute argv[0] */
	char *const *envp;
	uid_t uid;
	gid_t gid;
	const char *cgroups_path; /* "/warden/<id>" */
	const char *hostname;
	/* tier 3 with network.allow (gvisor_net.c): the netns to join and
	 * the resolv.conf bound on /etc/resolv.conf; NULL: a new, empty one
	 * (--network=none) */
	const char *netns_path;
	const char *resolv_conf;
};

/* Build the bundle in `dir` (which must exist and be empty): rootfs/ and
 * config.json. 0 or -errno with a message (also when the program's start
 * closure cannot be computed: not x86_64 ELF, malformed, library
 * missing). */
int wd_oci_bundle_write(const char *dir, const struct wd_manifest *m,
			const struct wd_oci_opts *o, struct wd_err *err);

/* The config.json object (for tests). NULL + errno, message in err. */
json_t *wd_oci_config(const struct wd_manifest *m, const struct wd_oci_opts *o,
		      struct wd_err *err);

#endif
