/* Helpers every tier runner shares (sandbox-internal). */
#ifndef WD_SANDBOX_COMMON_H
#define WD_SANDBOX_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/syscall.h>

#include "common/util.h"

/* System call numbers and flags older libc headers lack. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* An absolute path as is; a bare name looked up in the standard system
 * directories (never the caller's PATH). NULL if not found. */
char *wd_sb_resolve_exec(const char *name);
/* Free a NULL-terminated vector of strings (NULL is fine). */
void wd_sb_free_strv(char **v);
/* Recreate the host's top-level symlinks (/lib -> usr/lib on merged-usr)
 * under `root`: ELF interpreters and scripts name the short paths.
 * Symlinks expose nothing by themselves: their targets are bound or absent.
 * 0 or -errno. */
int wd_sb_copy_root_symlinks(const char *root);
/* Append tool output up to `cap` bytes; what is beyond is dropped (the
 * caller keeps draining the pipe) and *truncated set. */
void wd_sb_take(struct wd_buf *b, const char *p, size_t n, size_t cap,
		bool *truncated);
/* A kernel denial of a connect to an address the call's resolver answered
 * for a name names it: "10.1.2.3:9200" -> "search-svc.internal:9200
 * (10.1.2.3)" (native_supervise.c). NULL resolver: unchanged. */
struct wd_resolver;
struct wd_event;
void wd_sb_name_target(struct wd_resolver *resolver, struct wd_event *e);

#endif
