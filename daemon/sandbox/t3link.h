/* Tier 3's link to the host: a network namespace of the call's own with
 * one veth pair, for runsc --network=sandbox (gVisor's netstack takes the
 * netns side over and writes real frames to it).
 *
 *   sandbox netns:  lo (up), eth0 = sbx/30, default route via gw
 *   host:           w3h<...> = gw/30, route_localnet=1 (the node's
 *                   loopback is reached at gw: bpf/t3net.bpf.c says why),
 *                   forwarding=0 (nothing beyond the node is reached;
 *                   sandbox/t3beyond.h turns it on for a call routed
 *                   beyond the node, where the node forwards),
 *                   IPv6 off
 *
 * The /30 is 169.254.X.Y (link-local, never 169.254.169.0/24, the metadata
 * range), chosen from the host end's ifindex (unique among live links) and
 * checked against every address on the node. Made with rtnetlink (no
 * iproute2 process per call). Nothing leaves the host end unfiltered: the
 * caller attaches enforce/t3net.h's programs before the sandbox starts.
 */
#ifndef WD_SANDBOX_T3LINK_H
#define WD_SANDBOX_T3LINK_H

#include <stdint.h>

#include "common/util.h"

struct wd_t3link {
	int netns_fd;	  /* the sandbox's netns, or -1 */
	int host_ifindex; /* the host end, or 0 */
	char host_name[16];
	uint32_t gw, sbx; /* network order */
	char ns_path[64]; /* /proc/<pid>/fd/<netns_fd>, for the OCI spec */
};

/* Make the netns and the pair, configured as above. 0 or -errno with a
 * message; on failure nothing is left. */
int wd_t3link_make(struct wd_t3link *l, struct wd_err *err);

/* Delete the pair (both ends go) and drop the netns. Safe on a link that
 * was never (or partly) made. */
void wd_t3link_destroy(struct wd_t3link *l);
/* Drop the netns only: the kernel deletes the pair with it, in the
 * background, once nothing else holds it (the sandbox's processes are
 * dead). */
void wd_t3link_release(struct wd_t3link *l);

#endif
