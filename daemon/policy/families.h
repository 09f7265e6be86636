/* Socket families a manifest may name in network.families: the one table
 * the parser (policy/manifest_fields.c), the seccomp builder
 * (enforce/seccomp.c) and `warden status` all read, so a name that passes
 * `warden policy check` is one every tier-1/2 call can hold.
 *
 * Every family here is held by seccomp on socket()/socketpair(): the
 * domain (and, for icmp, the type and protocol) are integers, safe to
 * judge there (DESIGN.md §2). A family missing from the table (AF_KEY,
 * AF_RDS, ...) cannot be allowed: such a manifest is a load error.
 */
#ifndef WD_POLICY_FAMILIES_H
#define WD_POLICY_FAMILIES_H

#include <stdbool.h>
#include <stddef.h>

enum wd_family_kind {
	WD_FAM_ALWAYS, /* unix, inet, inet6: allowed in every call */
	WD_FAM_AF,     /* an AF_* allowed when listed */
	WD_FAM_ICMP,   /* not an AF: ping sockets of inet/inet6 (below) */
};

/* icmp: socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP) and (AF_INET6,
 * SOCK_DGRAM, IPPROTO_ICMPV6). No cgroup hook judges their destinations
 * (the kernel runs no sendmsg hook for ping sockets), so listing icmp lets
 * the tool ping any address its network namespace routes to; the node's
 * net.ipv4.ping_group_range must also admit the tool's gid. Raw sockets
 * (SOCK_RAW) stay refused whatever the list says. */
struct wd_family {
	const char *name;
	int af; /* AF_*; -1 for icmp */
	enum wd_family_kind kind;
};

extern const struct wd_family wd_families[];
extern const size_t wd_n_families;

/* The entry named `name`, or NULL. */
const struct wd_family *wd_family_find(const char *name);
/* "netlink, packet, ..., icmp": the names a manifest may list beyond the
 * always-allowed three, for messages. Static storage. */
const char *wd_family_names(void);

#endif
