/* Tier 3 beyond the node: when a call's link may reach an allowed
 * destination that is not an address of this node, and what makes it
 * reach it (forwarding from the call's host end, source NAT).
 *
 * The kernel forwards an IPv4 packet only if the device it arrives on
 * forwards (net/ipv4/route.c, ip_route_input_slow: IN_DEV_FORWARD of the
 * input device; the output device is not checked). A connection beyond
 * the node crosses two such devices:
 *   - the sandbox's packets arrive on the host end (w3h...): its
 *     conf/<w3h>/forwarding is turned on for that call only, and only
 *     once something it may reach lies beyond the node;
 *   - the replies arrive on the uplink (the device of the node's route to
 *     the destination): conf/<uplink>/forwarding must already be on, and
 *     net.ipv4.ip_forward (conf/all) too. warden never turns forwarding
 *     on for the node: where the node does not forward, a rule beyond it
 *     is refused at call start and a name's answer beyond it withheld.
 * The sandbox's address (169.254.X.Y, link-local) must not leave the
 * node: a table of the call's own, `table ip warden_<host end>`, masquerades
 * what comes from it and leaves by any device but a tier-3 link. It is
 * made (libnftables) before forwarding is turned on and deleted when the
 * call ends; nftables unusable: refused (fail closed).
 * Nothing is forwarded that the host end's tc ingress program
 * (bpf/t3net.bpf.c) did not let through: it runs in the device's receive
 * path (sch_handle_ingress) before the IP stack sees the frame at all
 * (netfilter's prerouting, the route lookup, forwarding).
 *
 * Errors: 0 or -errno, with `why` or `err` saying which condition.
 */
#ifndef WD_SANDBOX_T3BEYOND_H
#define WD_SANDBOX_T3BEYOND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"
#include "sandbox/t3link.h"

/* Can this node route a tier-3 call's packets to `dst` (IPv4, network
 * order) and their replies back: net.ipv4.ip_forward is 1, the node has a
 * route to dst (not over another call's link), and the device of that
 * route forwards. 0, or -errno with the reason in `why` (the sysctl or
 * route named, short enough for a denial's target). */
int wd_t3_beyond_can(uint32_t dst, char *why, size_t why_len);

/* Masquerade what comes from link l's sandbox and leaves the node, then
 * turn forwarding on on its host end. Nothing stays on failure. */
int wd_t3_beyond_on(const struct wd_t3link *l, struct wd_err *err);
/* Forwarding off on the host end, the call's table deleted. */
void wd_t3_beyond_off(const struct wd_t3link *l);

/* nftables usable here (its tables can be listed): 0, or -errno with
 * libnftables' message in `why`. For `warden status`. */
int wd_t3_beyond_nft_probe(char *why, size_t why_len);
/* net.ipv4.ip_forward of this netns: 0, 1, or -errno. */
int wd_t3_beyond_ip_forward(void);
/* What tier 3 reaches beyond this node and under which condition, as a
 * sentence for `warden status` (the node's forwarding and nftables, read
 * now). true: it can (given the uplink of each destination forwards). */
bool wd_t3_beyond_describe(char *out, size_t len);

#endif
