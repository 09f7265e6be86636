/* BPF LSM per-call policy: what bpf/lsm.bpf.c reads besides the shared
 * wd_policy / wd_egress_rules maps (bpf/lib/policy.h, bpf/lib/maps.h), and
 * what daemon/enforce/lsm.c writes.
 *
 * The LSM state of a call lives in wd_call_policy.reserved[WD_LSM_SLOT]
 * (flags below). A cgroup whose entry lacks WD_LSM_ON is not judged by the
 * LSM programs at all: only processes of a call that wd_lsm_begin() set up
 * are affected, everything else on the node is allowed.
 *
 * Files are judged by inode, not by name: wd_lsm_files holds, per call, the
 * (device, inode) of each directory or file the manifest lists with the
 * access it grants. A file_open/exec is allowed when the opened inode or any
 * ancestor up to the root (crossing mount points) carries the access
 * needed: Landlock's "beneath" semantics, immune to path tricks (.., symlinks,
 * bind mounts of the same inode) because nothing is compared as a string.
 */
#ifndef WD_BPF_LSM_H
#define WD_BPF_LSM_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* index into wd_call_policy.reserved used for the flags below */
#define WD_LSM_SLOT 0
/* index of the owner tag: the instance (daemon/enforce/lsm.c) that armed the
 * call. Every instance's programs carry their own tag (wd_lsm_owner, set in
 * .rodata before load) and judge only the calls whose tag matches: the file
 * rules live in each instance's own wd_lsm_files, while wd_policy is shared
 * by every instance opened on the same egress object. Without the tag, the
 * programs of another instance (including a closed one whose links a forked
 * process still holds: the kernel detaches an lsm/ link only when its last
 * fd is closed) would judge the call against their own rules and deny every
 * listed file. */
#define WD_LSM_SLOT_OWNER 1

#define WD_LSM_ON	  (1ull << 0) /* the LSM programs judge this cgroup */
#define WD_LSM_FILES	  (1ull << 1) /* file_open held to wd_lsm_files */
#define WD_LSM_EXEC	  (1ull << 2) /* exec held to wd_lsm_files (EXEC) */
#define WD_LSM_ALLOW_UNIX (1ull << 3) /* connect() on AF_UNIX allowed */

/* access bits (value of wd_lsm_files) */
#define WD_LSM_READ    (1u << 0)
#define WD_LSM_WRITE   (1u << 1)
#define WD_LSM_EXECUTE (1u << 2)

struct wd_lsm_file_key {
	__u64 cgid;
	__u64 ino;
	__u32 dev; /* kernel dev_t: MAJOR << 20 | MINOR (sb->s_dev) */
	__u32 pad; /* zero */
};

#define WD_LSM_MAX_FILES 65536
/* Longest ancestor chain walked (path components + mount crossings). A
 * deeper file is denied: the walk never allows what it did not see. */
#define WD_LSM_MAX_DEPTH 48

_Static_assert(sizeof(struct wd_lsm_file_key) == 24, "wd_lsm_file_key size");

#endif
