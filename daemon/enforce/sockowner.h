/* The owner of the socket at the other end of a loopback query: a call's
 * resolver listens in the host's network namespace, where anything on the
 * node could send it queries, and answers only its call's uid (a uid of
 * its own, never shared with a live call) -- or, on tier 3's link, only a
 * source no socket of the node's owns (enforce/resolver.c). */
#ifndef WD_SOCKOWNER_H
#define WD_SOCKOWNER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* The uid owning the loopback inet socket at peer (proto IPPROTO_UDP or
 * IPPROTO_TCP, family of peer) talking to our port (host order), asked
 * on diag (a NETLINK_SOCK_DIAG socket) with the peer as the socket's
 * source (peer_is_src) or destination; -1 if not found. */
long wd_sockowner_diag(int diag, int proto, uint16_t port,
		       const struct sockaddr_storage *peer, bool peer_is_src);
/* The same from /proc/net/{udp,tcp}{,6}, for kernels whose socket
 * diagnostics lack the protocol (udp_diag is a module): the uid of the
 * socket whose local end is the peer's port on its address or on any
 * (TCP: connected to ours); -1 if none, -2 if neither file could be
 * read. */
long wd_sockowner_proc(int proto, const struct sockaddr_storage *peer,
		       uint16_t ours);

#endif
