/* Who owns a loopback socket (sockowner.h): the kernel's socket
 * diagnostics first, /proc/net where they lack the protocol. */
#include "enforce/sockowner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>

/* The uid owning the loopback inet socket at peer (proto IPPROTO_UDP or
 * IPPROTO_TCP, family of peer), from the kernel's socket diagnostics; -1
 * if not found. */
long wd_sockowner_diag(int diag, int proto, uint16_t port,
		       const struct sockaddr_storage *peer, bool peer_is_src)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} m;
	memset(&m, 0, sizeof(m));
	m.nlh.nlmsg_len = sizeof(m);
	m.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	m.nlh.nlmsg_flags = NLM_F_REQUEST;
	/* a reply to an earlier query (its wait timed out) is told apart by
	 * its seq and skipped */
	static _Atomic uint32_t next_seq;
	uint32_t seq = ++next_seq;
	m.nlh.nlmsg_seq = seq;
	m.req.sdiag_family = (uint8_t)peer->ss_family;
	m.req.sdiag_protocol = (uint8_t)proto;
	m.req.idiag_states = ~0u;
	m.req.id.idiag_cookie[0] = m.req.id.idiag_cookie[1] =
	    INET_DIAG_NOCOOKIE;
	uint32_t us_addr[4] = {0}, peer_addr[4] = {0};
	uint16_t us = htons(port), peer_port;
	if (peer->ss_family == AF_INET) {
		const struct sockaddr_in *p4 = (const void *)peer;
		us_addr[0] = htonl(INADDR_LOOPBACK);
		peer_addr[0] = p4->sin_addr.s_addr;
		peer_port = p4->sin_port;
	} else {
		const struct sockaddr_in6 *p6 = (const void *)peer;
		memcpy(us_addr, &in6addr_loopback, 16);
		memcpy(peer_addr, &p6->sin6_addr, 16);
		peer_port = p6->sin6_port;
	}
	if (peer_is_src) {
		memcpy(m.req.id.idiag_src, peer_addr, 16);
		m.req.id.idiag_sport = peer_port;
		memcpy(m.req.id.idiag_dst, us_addr, 16);
		m.req.id.idiag_dport = us;
	} else {
		memcpy(m.req.id.idiag_src, us_addr, 16);
		m.req.id.idiag_sport = us;
		memcpy(m.req.id.idiag_dst, peer_addr, 16);
		m.req.id.idiag_dport = peer_port;
	}
	struct sockaddr_nl k = {.nl_family = AF_NETLINK};
	if (diag < 0 ||
	    sendto(diag, &m, sizeof(m), 0, (void *)&k, sizeof(k)) < 0)
		return -1;
	long uid = -1;
	for (;;) {
		char buf[8192];
		ssize_t n = recv(diag, buf, sizeof(buf), 0);
		if (n <= 0)
			return -1;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_ERROR ||
			    h->nlmsg_type == NLMSG_DONE)
				return uid;
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
			    h->nlmsg_len <
				NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
				continue;
			struct inet_diag_msg *d = NLMSG_DATA(h);
			/* the peer's own socket: its local end is the
			 * port the query came from */
			if (d->id.idiag_sport == peer_port)
				uid = d->idiag_uid;
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				return uid;
		}
	}
}

/* The same from /proc/net/{udp,tcp}{,6}, for kernels whose socket
 * diagnostics lack the protocol (udp_diag is a module): the uid of the
 * socket whose local end is the peer's port on its address or on any; -1
 * if none, -2 if neither file could be read. */
long wd_sockowner_proc(int proto, const struct sockaddr_storage *peer,
		       uint16_t ours)
{
	uint16_t port;
	uint32_t want[4] = {0};
	if (peer->ss_family == AF_INET) {
		const struct sockaddr_in *p4 = (const void *)peer;
		port = ntohs(p4->sin_port);
		want[0] = p4->sin_addr.s_addr;
	} else {
		const struct sockaddr_in6 *p6 = (const void *)peer;
		port = ntohs(p6->sin6_port);
		memcpy(want, &p6->sin6_addr, 16);
	}
	const char *files[2] = {
	    proto == IPPROTO_TCP ? "/proc/net/tcp" : "/proc/net/udp",
	    proto == IPPROTO_TCP ? "/proc/net/tcp6" : "/proc/net/udp6"};
	long uid = -1;
	int read = 0;
	for (int f = 0; f < 2 && uid < 0; f++) {
		FILE *fp = fopen(files[f], "re");
		if (!fp)
			continue;
		read++;
		char line[512];
		while (uid < 0 && fgets(line, sizeof(line), fp)) {
			char la[40], ra[40];
			unsigned lp, rp, st, u;
			if (sscanf(line,
				   " %*u: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x "
				   "%x %*s %*s %*s %u",
				   la, &lp, ra, &rp, &st, &u) != 6 ||
			    lp != port || (proto == IPPROTO_TCP && rp != ours))
				continue; /* TCP: the connection to us */
			/* the address as the kernel prints it: each 32-bit
			 * word of the network-order address, as a number */
			uint32_t a[4] = {0};
			int words = strlen(la) == 32 ? 4 : 1;
			for (int i = 0; i < words; i++) {
				char w[9];
				memcpy(w, la + i * 8, 8);
				w[8] = 0;
				a[i] = (uint32_t)strtoul(w, NULL, 16);
			}
			bool any = !a[0] && !a[1] && !a[2] && !a[3];
			bool same =
			    words == 1
				? a[0] == want[0] && peer->ss_family == AF_INET
				: !memcmp(a, want, 16) ||
				      (peer->ss_family == AF_INET &&
				       a[0] == 0 && a[1] == 0 &&
				       a[2] == htonl(0xffff) &&
				       a[3] == want[0]);
			if (any || same)
				uid = u;
		}
		fclose(fp);
	}
	return read ? uid : -2; /* -2: neither file could be read */
}
