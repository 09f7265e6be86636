/* Paths a tool call is granted (a write path's ACL, a Landlock rule, a
 * tier-2 bind mount), opened or resolved as root without following a
 * symlink that anyone but root could have made.
 *
 * Why: a call that may write under a directory may leave a symlink there
 * (`rmdir ws/out; ln -s /etc ws/out`). A later grant of a path through it,
 * made as root, would land on the link's target: the next call of a
 * manifest naming ws/out (or another team's manifest naming a path under a
 * directory this call may write) would be given /etc.
 *
 * The rule: a symlink is followed only when it is root's and lies in a
 * directory that is root's and that neither its group nor others may
 * write (an ACL with a write entry shows as the group's write bit): the
 * system's own links (/lib -> usr/lib) pass; a link a tool made (its uid)
 * or one in a directory a tool may write does not. The fast path is one
 * openat2(RESOLVE_NO_SYMLINKS); only a path that has a symlink on it is
 * walked a component at a time. No allocation: usable in a clone child. */
#ifndef WD_SAFEPATH_H
#define WD_SAFEPATH_H

#include <stddef.h>

/* Open absolute path with flags (O_CLOEXEC added; O_PATH or an access
 * mode) as described above. Returns the fd, or -errno: -ELOOP for a
 * symlink refused (why, if not NULL, says which and why), -ENOENT when a
 * component does not exist. */
int wd_open_trusted(const char *path, int flags, char *why, size_t whylen);

/* The path with every symlink on it resolved under the same rule, into out
 * (outlen bytes); a missing component and everything after it kept as
 * written (lexically normalised), so a file still to be made resolves to
 * where it will be. By names (lstat, readlink: cheaper than descriptors);
 * a link put on the resolved path afterwards is refused by the grant's
 * wd_open_trusted, never followed. 0, or -errno (-ELOOP with why as
 * above, -ENAMETOOLONG, -EINVAL for a relative path). */
int wd_path_resolve_trusted(const char *path, char *out, size_t outlen,
			    char *why, size_t whylen);

#endif
