/* Tier 3's egress in the host kernel: the owner of bpf/t3net.bpf.c, tc
 * programs on the host end of a gVisor sandbox's veth (the link itself:
 * sandbox/t3link.h) that judge every packet against the call's allow map.
 *
 * The object reads and writes the egress object's maps (its policy, allow
 * map, rings and loss counters: bpf_map__reuse_fd before load, as
 * enforce/lsm.c does), so a call's rules, its resolver's answers and its
 * denials are the same entries and records as in tiers 1-2. Its own map,
 * wd_t3_links, says which call a link belongs to.
 *
 * Errors: 0 or -errno with a message in `err`.
 */
#ifndef WD_ENFORCE_T3NET_H
#define WD_ENFORCE_T3NET_H

#include <stdint.h>

#include "common/util.h"
#include "enforce/egress.h"
#include "lib/t3net.h"

struct wd_t3net;

/* The process's instance over egress object `e` (opened and loaded on
 * first use; thread-safe; never closed). NULL with the error in `err`. */
struct wd_t3net *wd_t3net_shared(struct wd_egress *e, struct wd_err *err);

/* File link `l` under the host end `ifindex`, then attach the programs to
 * its ingress and egress (a clsact qdisc made on it). They stay with the
 * device (netlink tc filters, not links of this process): a supervisor
 * that dies leaves its sandbox's link filtered until the link goes. On
 * failure nothing stays filed. */
int wd_t3net_attach(struct wd_t3net *t, int ifindex, const struct wd_t3_link *l,
		    struct wd_err *err);

/* Remove the link's entry (the programs go with the device). */
void wd_t3net_detach(struct wd_t3net *t, int ifindex);

#endif
