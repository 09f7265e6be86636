/* Landlock: the filesystem line of tiers 1 and 2 (DESIGN.md §2).
 *
 * Every access right the kernel's ABI knows is "handled", so whatever the
 * ruleset does not grant is denied. Paths are turned into path_beneath rules
 * (rules attach to inodes, so a bind mount of a granted path is granted
 * too). Landlock has no permissive mode: `mode: audit` cannot watch the
 * filesystem line, it is always enforced (`warden status` says so).
 */
#ifndef WD_LANDLOCK_H
#define WD_LANDLOCK_H

#include <stdint.h>

#include "common/util.h"

enum wd_ll_grant { WD_LL_READ, WD_LL_WRITE, WD_LL_EXEC, WD_LL_DEV };

struct wd_landlock;

/* The running kernel's Landlock ABI version, or -errno. */
int wd_landlock_abi(void);
/* Start a ruleset handling every right of the current ABI; scope signals
 * and abstract unix sockets to the domain where ABI >= 6. */
int wd_landlock_new(struct wd_landlock **out, struct wd_err *err);
/* Grant `g` beneath `path`. A path that does not exist is skipped (nothing
 * to grant); any other failure is an error. */
int wd_landlock_allow(struct wd_landlock *ll, const char *path,
		      enum wd_ll_grant g, struct wd_err *err);
/* no_new_privs must already be set. Closes the ruleset fd in the caller's
 * fd table and writes no memory (the caller may share the daemon's: ll is
 * still freed by its owner, wd_landlock_free). Async-signal-safe enough
 * for the child between fork and exec (no allocation). */
/* No symlink is made under any path granted after this: for a call whose
 * DNS is its resolver's, a link in a write path naming a host resolver's
 * socket would pass the unix-socket rules, which judge the path as
 * written (enforce/egress_unix.c). */
void wd_landlock_no_symlinks(struct wd_landlock *ll);
int wd_landlock_restrict(struct wd_landlock *ll);
void wd_landlock_free(struct wd_landlock *ll);

#endif
