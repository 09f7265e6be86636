/* Unix socket connects of a tool call (bpf/egress.bpf.c: cgroup/connect_unix
 * and sendmsg_unix, kernel 6.7+), shared with daemon/enforce/egress.c.
 *
 * A pathname connect is allowed when the path (as the tool wrote it, before
 * the kernel resolves it) lies under one of the manifest's filesystem.write
 * paths; abstract names, relative paths and paths with a ".." component are
 * denied. Rules live in an LPM trie keyed by cgroup id and path bytes: a
 * write path W is stored twice, "W/" (everything below it) and "W\0" (W
 * itself, a socket named in the manifest).
 *
 * Fixed-width types, explicit sizes, asserted on both sides.
 */
#ifndef WD_BPF_EGRESS_UNIX_H
#define WD_BPF_EGRESS_UNIX_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* sun_path is 108 bytes; the key keeps 4 more zero bytes so that a path of
 * exactly 108 bytes is still followed by a NUL for the "W\0" rules. */
#define WD_UNIX_PATH_MAX 112
#define WD_UNIX_SUN_PATH 108

struct wd_unix_key {
	__u32 prefixlen; /* 64 + 8 * bytes of path matched */
	__u32 cgid_lo;	 /* cgroup id, low and high halves (host order) */
	__u32 cgid_hi;
	char path[WD_UNIX_PATH_MAX];
};
#define WD_UNIX_KEY_FIXED_BITS 64
#define WD_UNIX_MAX_RULES      4096

_Static_assert(sizeof(struct wd_unix_key) == 124, "wd_unix_key size");
_Static_assert(__builtin_offsetof(struct wd_unix_key, cgid_lo) == 4,
	       "LPM data must start right after prefixlen");
_Static_assert(__builtin_offsetof(struct wd_unix_key, path) == 12,
	       "wd_unix_key.path");

#endif
