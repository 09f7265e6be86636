/* Unix socket rules of a call (bpf/egress_unix.h): the write paths it may
 * connect under, and the host resolvers' sockets a call with names may
 * not reach whatever its write paths (policy/resolver_sockets.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "enforce/egress_int.h"
#include "policy/resolver_sockets.h"

bool wd_egress_unix_ok(struct wd_egress *e)
{
	return e && e->unix_ok;
}

bool wd_egress_unix_hook_missing(void)
{
	/* the smallest program of that attach type: r0 = 1; exit */
	const struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K,
	     .dst_reg = BPF_REG_0,
	     .imm = 1},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o,
		    .expected_attach_type = WD_ATTACH_UNIX_CONNECT);
	int fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "wd_probe_unix",
			       "GPL", insns, 2, &o);
	if (fd >= 0) {
		close(fd);
		return false;
	}
	/* the kernel's answer for an attach type it does not know */
	return errno == EINVAL;
}

/* A unix rule: v 1 allows the paths under path[0..len), v 0 denies them
 * (a longer prefix than the allow it carves out of: the trie's longest
 * match decides). */
int wd_egress_add_ukey(struct wd_egress *e, struct wd_egress_call *c,
		       const char *path, size_t len, uint32_t v,
		       struct wd_err *err)
{
	struct wd_unix_key k = {0};
	k.prefixlen = WD_UNIX_KEY_FIXED_BITS + 8 * (uint32_t)len;
	k.cgid_lo = (uint32_t)c->cgid;
	k.cgid_hi = c->cgid >> 32;
	memcpy(k.path, path, len);
	if (bpf_map_update_elem(e->unix_fd, &k, &v, BPF_ANY)) {
		int rc = -errno;
		return wd_err_set(err, rc, "map 'wd_unix_rules': '%s': %s",
				  path, strerror(-rc));
	}
	c->ukeys = wd_realloc(c->ukeys, (c->n_ukeys + 1) * sizeof(*c->ukeys));
	c->ukeys[c->n_ukeys++] = k;
	return 0;
}

int wd_egress_allow_unix(struct wd_egress *e, uint64_t cgid, char *const *paths,
			 int n, struct wd_err *err)
{
	int rc = 0;
	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	struct wd_egress_call *c = e->calls;
	while (c && c->cgid != cgid)
		c = c->next;
	for (int i = 0; c && i < n && !rc; i++) {
		/* "W/" (below W) and "W\0" (W itself); "/" is every path */
		char b[WD_UNIX_PATH_MAX];
		size_t l = strlen(paths[i]);
		if (paths[i][0] != '/' || l + 2 > WD_UNIX_SUN_PATH) {
			/* no sun_path can name anything below it */
			continue;
		}
		memcpy(b, paths[i], l);
		if (l == 1) {
			rc = wd_egress_add_ukey(e, c, "/", 1, 1, err);
			continue;
		}
		b[l] = '/';
		rc = wd_egress_add_ukey(e, c, b, l + 1, 1, err);
		b[l] = 0;
		if (!rc)
			rc = wd_egress_add_ukey(e, c, b, l + 1, 1, err);
	}
	pthread_mutex_unlock(&e->lock);
	if (!c)
		return wd_err_set(err, -ENOENT,
				  "egress: cgroup %llu is not attached",
				  (unsigned long long)cgid);
	return rc;
}

/* A call with names may reach no host resolver's unix socket
 * (policy/resolver_sockets.h), whatever its write paths: `policy check`
 * refuses a write path that reaches one, and this holds it in the kernel.
 * Each directory "D/" is a deny rule, longer than any allow rule of a
 * write path above it; an allow rule at or below D is taken out of the
 * trie. The program refuses "//" and "/./" in such a call's paths, which
 * would name D's sockets without D's prefix. Under e->lock. */
int wd_egress_deny_resolver_sockets(struct wd_egress *e,
				    struct wd_egress_call *c,
				    struct wd_err *err)
{
	for (int i = 0; i < c->n_ukeys; i++) {
		struct wd_unix_key *k = &c->ukeys[i];
		size_t l = (k->prefixlen - WD_UNIX_KEY_FIXED_BITS) / 8;
		char p[WD_UNIX_PATH_MAX + 1];
		memcpy(p, k->path, l);
		p[l] = 0;
		if (l && p[l - 1] == '/')
			p[l - 1] = 0; /* "W/" */
		for (size_t j = 0; j < wd_n_resolver_socket_dirs; j++) {
			const char *d = wd_resolver_socket_dirs[j];
			size_t dl = strlen(d);
			if (!strncmp(p, d, dl) && (!p[dl] || p[dl] == '/') &&
			    bpf_map_delete_elem(e->unix_fd, k) &&
			    errno != ENOENT)
				return wd_err_set(err, -errno,
						  "map 'wd_unix_rules': '%s': "
						  "delete: %s",
						  p, strerror(errno));
		}
	}
	for (size_t j = 0; j < wd_n_resolver_socket_dirs; j++) {
		char b[WD_UNIX_PATH_MAX];
		size_t l = strlen(wd_resolver_socket_dirs[j]);
		memcpy(b, wd_resolver_socket_dirs[j], l);
		b[l] = '/';
		int rc = wd_egress_add_ukey(e, c, b, l + 1, 0, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}
