/* Per-call identity (DESIGN §2 "identity"): every call's processes run
 * under a uid/gid of their own, taken from a configured range, never
 * shared with another live call, and reused only once nothing of it
 * remains (no process, no socket, no file in the call's write paths that
 * still belongs to it; IPC objects live in the call's own IPC namespace
 * and die with it). The calling user stays the authorisation principal.
 *
 *   struct wd_uid_lease *ls;
 *   wd_uid_acquire(&ls, err);                    // uid = gid = ls->uid
 *   wd_uid_grant_paths(ls, principal, pgid, m->fs_write.v, n, err);
 *   ... run the call's processes as ls->uid ...
 *   wd_uid_release(ls, procs_gone);              // settle, check, free
 *
 * Safe across processes (several `warden exec` and wardend on one node)
 * and across crashes: each uid has a lock file $WARDEN_UID_DIR/<uid> (default
 * /var/lib/warden/uids: persistent, see uidpool.c), held
 * with flock by the lease's owner for the lease's whole life, so a dead
 * owner frees it. The file records what the lease touched (its write
 * paths, by path and inode); it is emptied only once the release found
 * nothing of the uid left. A later acquire that finds a free lock on a
 * non-empty record does the release the dead owner could not (kills the
 * uid's processes, revokes its ACL entries, settles its files, looks for
 * its sockets) and takes the uid only if that left nothing; else it moves
 * on. Every uid of the range busy or unclean: the call is refused.
 *
 * The records live on persistent storage, so a node rebooted after a
 * crash mid-call still knows which write paths a dead call had. A record
 * warden makes for a uid it never used on this node starts as "fresh":
 * its first taker (and any later one while it stays fresh) skips the
 * uid if any process of it is alive — the range is warden's by
 * configuration, not by proof, and a process of a uid warden never ran
 * is nobody's to kill.
 */
#ifndef WD_UIDPOOL_H
#define WD_UIDPOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/util.h"

/* systemd's "unused" block (UIDS-GIDS.md: above the nspawn container
 * ranges 524288-1879048191, below the mountfsd foreign range at
 * 2147352576): clear of DynamicUser (61184-65519), nobody (65534), the
 * 100000+ subuid ranges useradd hands out (up to 600100000) and of
 * regular users. */
#define WD_UID_RANGE_FIRST 2000000000u
#define WD_UID_RANGE_COUNT 4096u

struct wd_uid_range {
	uint32_t first, count; /* [first, first + count) */
};

/* systemd's UIDS-GIDS.md: 0-999 system users, 1000-60000 regular ones */
#define WD_UID_REGULAR_LAST 60000u

/* "FIRST-LAST" (inclusive) into r. 0 or -EINVAL with err. Refuses empty
 * ranges and any range holding: 0, a uid up to WD_UID_REGULAR_LAST,
 * systemd's dynamic users (61184-65519), 65534/65535, ids above 2^31-2,
 * or the id of an account or group of the user database (err names
 * it). */
int wd_uid_range_parse(const char *s, struct wd_uid_range *r,
		       struct wd_err *err);
/* The range this process allocates from: set by wardend from daemon.yaml
 * (uids.range), else $WARDEN_UID_RANGE, else the default above. Set it
 * before the first call. */
void wd_uid_range_set(const struct wd_uid_range *r);
/* 0, or -EINVAL with err when $WARDEN_UID_RANGE is malformed. */
int wd_uid_range_get(struct wd_uid_range *r, struct wd_err *err);

#define WD_UID_MAX_PATHS 32

struct wd_uid_path {
	int fd; /* the write path, opened when granted; -1 */
	uid_t owner;
	gid_t group; /* who its settled files belong to */
	bool acl;    /* our ACL entry is on it */
	bool is_dir;
};

struct wd_uid_lease {
	uid_t uid;
	gid_t gid;
	int lockfd;
	struct wd_uid_path p[WD_UID_MAX_PATHS];
	int n_paths;
	char call_id[40];
};

/* A free uid of the range for the call call_id (may be NULL). 0 with
 * *out, or -EAGAIN (range exhausted: fail closed, never shared) / -errno
 * with err. */
int wd_uid_acquire(struct wd_uid_lease **out, const char *call_id,
		   struct wd_err *err);
/* Give the lease's uid rwx on each write path (a POSIX ACL entry on the
 * path itself, removed at release; see settle.c for why this mechanism)
 * and record the paths for the settling. Files the call leaves there
 * will belong to principal (when it is not root) or else to the path's
 * own owner. 0 or -errno with err (the call must then not run).
 * Tier 3 (tier3 true): gVisor's sentry judges access by the mode bits the
 * gofer reports, not by the host's ACLs, so no entry is added and a path
 * the call's uid could not write as "other" refuses the call. */
int wd_uid_grant_paths(struct wd_uid_lease *l, uid_t principal, gid_t pgid,
		       char *const *paths, int n, bool tier3,
		       struct wd_err *err);
/* End of the lease: procs_gone says the runner saw every process of the
 * call die. Revokes, settles, checks for leftovers; frees l. The uid is
 * free for reuse only if nothing of it remained; otherwise its record
 * stays and the next acquire of that uid finishes the job. */
void wd_uid_release(struct wd_uid_lease *l, bool procs_gone);

/* The same, on the reaper thread (sandbox/reaper.h), after the teardown
 * jobs submitted before it. l may be NULL. */
void wd_uid_release_async(struct wd_uid_lease *l, bool procs_gone);

/* settle.c: the parts that touch files and the process/socket tables. */
/* Add (grant) or remove our USER entry for uid on fd's access ACL,
 * serialised per inode across processes. 0 or -errno. */
int wd_acl_grant(int fd, uid_t uid, bool is_dir, const struct wd_uid_range *r);
int wd_acl_revoke(int fd, uid_t uid, const struct wd_uid_range *r);
/* Give every entry under fd (a directory or a file) owned by uid or gid
 * to owner/group instead; strips the ACLs of what it re-owns. A symlink
 * whose owner would be root gets WD_SETTLE_LINK_UID instead: root's links
 * are the ones warden's grants follow (common/safepath.h), a tool's never.
 * Iterative, two fds, never follows a symbolic link. Returns the number
 * of entries changed, or -errno (a tree it could not walk completely). */
#define WD_SETTLE_LINK_UID ((uid_t)65534) /* the kernel's overflow uid */
long wd_settle_tree(int fd, uid_t uid, gid_t gid, uid_t owner, gid_t group);
/* Processes with uid in any of their ids: killed (SIGKILL, by pidfd) and
 * waited for up to wait_ms. Returns how many remain (0 = none). */
int wd_uid_kill_procs(uid_t uid, int wait_ms);
/* Processes with uid in any of their ids: how many (none killed). */
int wd_uid_count_procs(uid_t uid);
/* inet sockets (tcp, udp, raw; v4 and v6) of the host's network
 * namespace owned by uid: how many. */
int wd_uid_count_sockets(uid_t uid);

/* The directory of the uid records (and the ACL mask records of
 * sandbox/settle.c), made if missing: $WARDEN_UID_DIR or
 * /var/lib/warden/uids. 0 or -errno. */
int wd_uid_dir(char *out, size_t n);
/* The same directory's name, not made. */
void wd_uid_dir_name(char *out, size_t n);

/* The uids whose record is lost (uidpool.c REC_LOST: a write path of a
 * dead call's was moved or removed, so what it left there cannot be
 * found; the uid is never reused): how many records in dir say so, the
 * lowest such uid in *first (0 if none). -errno when dir cannot be read
 * (-ENOENT: no call has run). */
int wd_uid_lost_count(const char *dir, uint32_t *first);

#endif
