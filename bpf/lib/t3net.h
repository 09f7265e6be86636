/* Tier 3's link (bpf/t3net.bpf.c and daemon/enforce/t3net.c): the value of
 * wd_t3_links, keyed by the ifindex of the host end of a sandbox's veth. */
#ifndef WD_BPF_T3NET_H
#define WD_BPF_T3NET_H

#ifndef __bpf__
#include <linux/types.h>
#endif

struct wd_t3_link {
	__u64 cgid; /* the call's: its wd_policy and wd_egress_rules keys */
	__u32 sbx;  /* the sandbox's address (network order) */
	__u32 gw;   /* the host end's: route, nameserver, node loopback */
	__u32 uid;  /* the call's, for its records */
	__u32 pad;
};

_Static_assert(sizeof(struct wd_t3_link) == 24, "wd_t3_link size");

#endif
