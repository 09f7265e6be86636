/* Unix sockets on which a host resolver answers any name (one table, read
 * by `policy check` and by the egress programs' unix rules). */
#ifndef WD_RESOLVER_SOCKETS_H
#define WD_RESOLVER_SOCKETS_H

#include <stddef.h>

/* Directories holding a host resolver's unix socket: systemd-resolved's
 * varlink (io.systemd.Resolve), D-Bus (org.freedesktop.resolve1, avahi),
 * nscd, avahi's own socket; each under /run and /var/run (a directory of
 * its own on nodes where /var/run is not a link). */
extern const char *const wd_resolver_socket_dirs[];
extern const size_t wd_n_resolver_socket_dirs;

/* The resolver socket directory that the absolute path p is, lies under or
 * contains (p covers it), or NULL. */
const char *wd_resolver_dir_touched(const char *p);

#endif
