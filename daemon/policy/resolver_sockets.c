/* Host resolvers' unix sockets (resolver_sockets.h). */
#include "policy/resolver_sockets.h"

#include <string.h>

#include "common/util.h"

const char *const wd_resolver_socket_dirs[] = {
    "/run/systemd/resolve",
    "/var/run/systemd/resolve",
    "/run/nscd",
    "/var/run/nscd",
    "/run/dbus",
    "/var/run/dbus",
    "/run/avahi-daemon",
    "/var/run/avahi-daemon",
};
const size_t wd_n_resolver_socket_dirs = WD_ARRAY_SIZE(wd_resolver_socket_dirs);

/* a under b: equal, or b followed by '/' ("/" covers everything) */
static bool under(const char *a, const char *b)
{
	size_t n = strlen(b);
	if (n == 1 && b[0] == '/')
		return true;
	return !strncmp(a, b, n) && (a[n] == 0 || a[n] == '/');
}

const char *wd_resolver_dir_touched(const char *p)
{
	for (size_t i = 0; i < wd_n_resolver_socket_dirs; i++) {
		const char *d = wd_resolver_socket_dirs[i];
		if (under(d, p) || under(p, d))
			return d;
	}
	return NULL;
}
