/* The files a program needs to start, computed without running it: for
 * tier 3's OCI bundle, whose root holds nothing the manifest did not name.
 *
 * For an ELF executable that is its PT_INTERP (the dynamic loader) and the
 * DT_NEEDED libraries, recursively, found the way glibc's ld.so finds them:
 * DT_RPATH (of the object and its loaders, when it has no DT_RUNPATH),
 * DT_RUNPATH, /etc/ld.so.cache, then the default directories. For a #!
 * script it is the interpreter and the interpreter's closure. Only 64-bit
 * little-endian x86_64 ELF is understood; anything else is refused.
 */
#ifndef WD_ELFDEPS_H
#define WD_ELFDEPS_H

#include "common/util.h"

#define WD_LD_SO_CACHE "/etc/ld.so.cache"

/* Bounds: a closure larger or deeper than this is refused. */
#define WD_ELF_MAX_OBJECTS 256
#define WD_ELF_MAX_DEPTH   32
#define WD_ELF_MAX_SCRIPTS 4 /* nested #! interpreters (the kernel's 4) */

/* The start closure of `prog` (an absolute path): a NULL-terminated vector
 * of absolute paths as the kernel and the loader name them (interpreters
 * from #!, PT_INTERP, each library at the path it is found under, and
 * `cache` when an object is dynamically linked and the cache exists).
 * `prog` itself is not in it. A static executable gives an empty vector.
 * `cache` NULL means WD_LD_SO_CACHE. Free with wd_sb_free_strv().
 * Returns the number of paths or -errno with a message naming the file
 * (not ELF, truncated, malformed, other architecture, library not found,
 * bounds exceeded). */
int wd_elf_closure(const char *prog, const char *cache, char ***out,
		   struct wd_err *err);

/* The paths ld.so.cache (`cache`, format "glibc-ld.so.cache1.1") lists for
 * library `name` for x86_64 libc6, best first (glibc-hwcaps variants
 * included). NULL-terminated in *out (free with wd_sb_free_strv()).
 * Returns the count (0: not listed, or no cache file) or -errno with a
 * message when the cache is malformed. */
int wd_ldcache_lookup(const char *cache, const char *name, char ***out,
		      struct wd_err *err);

#endif
