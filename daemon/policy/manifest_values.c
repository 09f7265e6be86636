/* Value spaces a manifest field can hold, shared with the enforcers:
 * canonical paths, network rules, socket family names and enforcement
 * mechanism names. */
#include "policy/manifest.h"
#include "policy/families.h"
#include "common/safepath.h"

#include <arpa/inet.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>

/* ---- paths
 * ------------------------------------------------------------------- */

int wd_path_canonical(const char *path, char **out, struct wd_err *err)
{
	*out = NULL;
	if (!path || path[0] != '/')
		return wd_err_set(err, -EINVAL, "path '%s' is not absolute",
				  path ? path : "");
	if (strlen(path) >= PATH_MAX)
		return wd_err_set(err, -ENAMETOOLONG, "path is too long");
	/* symlinks followed only where a tool cannot have made them
	 * (common/safepath.h): a link left under a write path by an earlier
	 * call refuses the manifest, never redirects its grants */
	char rp[PATH_MAX], why[PATH_MAX + 160];
	int r = wd_path_resolve_trusted(path, rp, sizeof(rp), why, sizeof(why));
	if (r == -ENAMETOOLONG)
		return wd_err_set(err, r, "path is too long");
	if (r < 0)
		return wd_err_set(err, r, "path '%s': %s", path,
				  why[0] ? why : strerror(-r));
	*out = wd_strdup(rp);
	return 0;
}

/* ---- network rules
 * ------------------------------------------------------------ */

static bool valid_hostname(const char *h)
{
	size_t n = strlen(h), lab = 0;
	if (!n || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (c == '.') {
			if (lab == 0 || h[i - 1] == '-')
				return false;
			lab = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-'))
			return false;
		if (c == '-' && lab == 0)
			return false;
		if (++lab > 63)
			return false;
	}
	return h[n - 1] != '-';
}

static int parse_port(const char *s, uint16_t *port, struct wd_err *err,
		      const char *text)
{
	if (!strcmp(s, "*")) {
		*port = 0;
		return 0;
	}
	unsigned long v = 0;
	if (!*s || strlen(s) > 5)
		return wd_err_set(err, -EINVAL,
				  "'%s': port must be 1-65535 or '*'", text);
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return wd_err_set(err, -EINVAL,
					  "'%s': port must be 1-65535 or '*'",
					  text);
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v < 1 || v > 65535)
		return wd_err_set(err, -EINVAL,
				  "'%s': port must be 1-65535 or '*'", text);
	*port = (uint16_t)v;
	return 0;
}

static int parse_prefix(const char *s, int max, int *out, struct wd_err *err,
			const char *text)
{
	int v = 0;
	if (!*s || strlen(s) > 3)
		return wd_err_set(err, -EINVAL, "'%s': bad prefix length",
				  text);
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return wd_err_set(err, -EINVAL,
					  "'%s': bad prefix length", text);
		v = v * 10 + (*p - '0');
	}
	if (v > max)
		return wd_err_set(err, -EINVAL,
				  "'%s': prefix length %d exceeds %d", text, v,
				  max);
	*out = v;
	return 0;
}

/* Strict: bits beyond the prefix must be zero ("10.0.0.1/8" is most likely
 * a typo for a host rule, and silently widening it would loosen policy). */
static bool host_bits_clear(const uint8_t a[16], int prefix)
{
	for (int b = prefix; b < 128; b++)
		if (a[b / 8] & (0x80 >> (b % 8)))
			return false;
	return true;
}

int wd_net_rule_parse(const char *text, struct wd_net_rule *r,
		      struct wd_err *err)
{
	memset(r, 0, sizeof(*r));
	if (!text || !*text)
		return wd_err_set(err, -EINVAL, "empty network rule");
	snprintf(r->text, sizeof(r->text), "%s", text);
	if (strlen(text) > 300)
		return wd_err_set(err, -EINVAL, "network rule too long");
	char buf[320];
	snprintf(buf, sizeof(buf), "%s", text);

	char *addr, *port;
	bool bracket = buf[0] == '[';
	if (bracket) {
		char *rb = strchr(buf, ']');
		if (!rb)
			return wd_err_set(err, -EINVAL, "'%s': missing ']'",
					  text);
		*rb = 0;
		addr = buf + 1;
		if (rb[1] != ':')
			return wd_err_set(err, -EINVAL,
					  "'%s': missing ':port' after ']' "
					  "(use :* for any port)",
					  text);
		port = rb + 2;
	} else {
		char *c = strrchr(buf, ':');
		if (!c)
			return wd_err_set(err, -EINVAL,
					  "'%s': missing ':port' (use :* for "
					  "any port)",
					  text);
		*c = 0;
		port = c + 1;
		addr = buf;
		if (strchr(addr, ':'))
			return wd_err_set(err, -EINVAL,
					  "'%s': IPv6 addresses must be "
					  "written in brackets, e.g. [::1]:443",
					  text);
	}
	int rc = parse_port(port, &r->port, err, text);
	if (rc < 0)
		return rc;
	if (!*addr)
		return wd_err_set(err, -EINVAL, "'%s': missing address", text);

	char *slash = strchr(addr, '/');
	if (slash)
		*slash = 0;
	struct in_addr a4;
	struct in6_addr a6;
	int prefix;
	if (!bracket && inet_pton(AF_INET, addr, &a4) == 1) {
		prefix = 32;
		if (slash &&
		    (rc = parse_prefix(slash + 1, 32, &prefix, err, text)) < 0)
			return rc;
		r->addr[10] = 0xff;
		r->addr[11] = 0xff;
		memcpy(r->addr + 12, &a4, 4);
		r->prefix = (uint8_t)(prefix + 96);
	} else if (bracket && inet_pton(AF_INET6, addr, &a6) == 1) {
		prefix = 128;
		if (slash &&
		    (rc = parse_prefix(slash + 1, 128, &prefix, err, text)) < 0)
			return rc;
		memcpy(r->addr, &a6, 16);
		r->prefix = (uint8_t)prefix;
	} else if (bracket) {
		return wd_err_set(err, -EINVAL,
				  "'%s': '%s' is not an IPv6 address", text,
				  addr);
	} else {
		if (slash)
			return wd_err_set(err, -EINVAL,
					  "'%s': a prefix needs an address, "
					  "not a host name",
					  text);
		/* a fully qualified name's root dot says nothing more */
		size_t al = strlen(addr);
		if (al > 1 && addr[al - 1] == '.')
			addr[al - 1] = 0;
		/* "*.suffix": one label of any name before suffix */
		const char *name = addr;
		if (name[0] == '*') {
			if (name[1] != '.' || !strchr(name + 2, '.'))
				return wd_err_set(
				    err, -EINVAL,
				    "'%s': a wildcard is '*.' and a suffix of "
				    "two labels or more (*.svc.internal:443): "
				    "it stands for one label",
				    text);
			name += 2;
		}
		/* dotted digits that inet_pton rejected: a bad IPv4, not a
		 * host name (no TLD is all digits) */
		const char *dot = strrchr(name, '.');
		const char *last = dot ? dot + 1 : name;
		bool numeric = *last;
		for (const char *p = last; *p; p++)
			if (*p < '0' || *p > '9')
				numeric = false;
		if (numeric || !valid_hostname(name))
			return wd_err_set(err, -EINVAL,
					  "'%s': '%s' is not an IPv4 address "
					  "or host name",
					  text, addr);
		r->needs_resolve = true;
		size_t i;
		for (i = 0; addr[i] && i < sizeof(r->host) - 1; i++)
			r->host[i] = (char)((addr[i] >= 'A' && addr[i] <= 'Z')
						? addr[i] + 32
						: addr[i]);
		r->host[i] = 0;
		return 0;
	}
	if (!host_bits_clear(r->addr, r->prefix))
		return wd_err_set(err, -EINVAL,
				  "'%s': address has bits set beyond the "
				  "/%d prefix",
				  text, slash ? prefix : 0);
	return 0;
}

/* ---- socket families / mechanisms
 * -------------------------------------------- */

/* The names and numbers live in policy/families.c, the one table the
 * seccomp builder and `warden status` read too. */
int wd_socket_family_parse(const char *name)
{
	const struct wd_family *f = wd_family_find(name);
	return f ? f->af : -1;
}

static const char *const mechanisms[] = {"bpf_lsm", "landlock", "seccomp",
					 "bpf_egress", "cgroup"};

bool wd_mechanism_known(const char *name)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(mechanisms); i++)
		if (!strcmp(name, mechanisms[i]))
			return true;
	return false;
}
