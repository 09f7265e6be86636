/* A call's resolver (resolver.h): one thread, one UDP socket and one TCP
 * listener on 127.0.0.1 (same port), answers decided by enforce/dns.c,
 * each answered address pinned for its TTL before the answer leaves. */
#include "enforce/resolver.h"
#include "common/log.h"
#include "enforce/sockowner.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/netlink.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONN    8
#define MAX_QUEUED  1024
#define TCP_MSG_MAX 4096
/* addresses one call may hold pinned at once: the allow map is the node's
 * (WD_EGRESS_MAX_RULES), one call's answers must not fill it */
#define MAX_PINS 256
/* the shortest a pin lives: a TTL-0 answer is still connected to */
#define MIN_PIN_NS 2000000000ull
/* distinct names one call may have looked up (README): a wildcard rule
 * lets the tool choose a label, and each name asked carries its label
 * upstream; past this the resolver answers REFUSED, recorded */
#define MAX_LOOKED_UP 64
/* answers whose TTL ended, kept for naming later denials */
#define NAME_HISTORY 64

struct pin {
	uint8_t addr[16];
	uint16_t port;
	uint64_t expires_ns; /* monotonic */
	char name[254];
};

struct conn {
	int fd;
	uint8_t buf[2 + TCP_MSG_MAX];
	size_t have;
	uint64_t since_ns;
};

struct wd_resolver {
	struct wd_net_rule *rules, *priv;
	int n, npriv;
	struct wd_dns_upstream up;
	char hosts_path[256];
	int (*pin)(void *, const uint8_t[16], uint16_t, bool);
	void *pin_arg;
	uint64_t cgid;
	uint32_t uid;
	bool audit;

	int udp, tcp, stopfd, evfd;
	int udp6, tcp6; /* on [::1] at the same port, or -1 */
	int udpd, tcpd; /* on dev_addr:53 of tier 3's link, or -1 */
	uint32_t dev_addr, dev_peer; /* the link's two ends (network order) */
	int dev_ifindex;
	int (*shown)(void *, const uint8_t[16], uint8_t[16], char *, size_t);
	void *shown_arg;
	uint16_t port;
	struct conn conns[MAX_CONN];
	pthread_t th;
	bool started;

	pthread_mutex_t mu; /* pins, queue, counts */
	struct pin *pins;
	int npins, cap;
	struct wd_event *q;
	int nq;
	uint64_t answered, refused, dropped, foreign;
	struct {
		uint8_t addr[16];
		char name[254];
	} hist[NAME_HISTORY];
	int nhist;
	int diag; /* NETLINK_SOCK_DIAG: who sent a query */
	void (*off)(void *);
	void *off_arg;
	char (*looked)[254]; /* names looked up (the thread's own) */
	int nlooked;
	struct wd_dns_cache *cache; /* the thread's own: its answers */
	char failed[200]; /* why the thread ended on its own, under mu */
};

static pthread_mutex_t up_mu = PTHREAD_MUTEX_INITIALIZER;
static struct wd_dns_upstream up_default;

void wd_resolver_set_upstream(const struct wd_dns_upstream *u)
{
	pthread_mutex_lock(&up_mu);
	up_default = *u;
	up_default.hosts_path = NULL; /* not kept: the default's */
	up_default.zone_path[sizeof(up_default.zone_path) - 1] = 0;
	pthread_mutex_unlock(&up_mu);
}

void wd_resolver_upstream(struct wd_dns_upstream *u)
{
	pthread_mutex_lock(&up_mu);
	*u = up_default;
	pthread_mutex_unlock(&up_mu);
}

static void queue_denial(struct wd_resolver *r, const char *kind,
			 const char *target, int err)
{
	struct wd_event e;
	memset(&e, 0, sizeof(e));
	e.ts_ns = wd_wall_ns();
	e.cgroup_id = r->cgid;
	e.uid = r->uid;
	e.source = WD_SRC_RESOLVER;
	wd_strlcpy(e.kind, kind, sizeof(e.kind));
	e.syscall_nr = -1;
	e.err = err;
	wd_strlcpy(e.target, target, sizeof(e.target));
	e.verdict = r->audit ? WD_VERDICT_AUDITED : WD_VERDICT_DENIED;
	e.step = -1;
	pthread_mutex_lock(&r->mu);
	r->refused++;
	if (r->nq < MAX_QUEUED) {
		if (!r->q)
			r->q = wd_calloc(MAX_QUEUED, sizeof(*r->q));
		r->q[r->nq++] = e;
	} else {
		r->dropped++;
	}
	pthread_mutex_unlock(&r->mu);
	uint64_t one = 1;
	if (write(r->evfd, &one, sizeof(one)) < 0) {
		/* the counter is full: the supervisor is already woken */
	}
}

#define WD_STR_(x) #x
#define WD_STR(x)  WD_STR_(x)
#define LOOKED_UP_WHY                                                          \
	"the call looked up " WD_STR(MAX_LOOKED_UP) " distinct names, the "    \
						    "most it may: REFUSED"
#define PINS_WHY                                                               \
	"the call holds " WD_STR(MAX_PINS) " answered addresses, the most it " \
					   "may"

/* A denial whose target is "name (why)". */
static void queue_named(struct wd_resolver *r, const char *kind,
			const char *name, const char *why)
{
	char t[256];
	snprintf(t, sizeof(t), "%s (%s)", name, why);
	queue_denial(r, kind, t, 0);
}

/* Pin addr:port until exp (or move its expiry later); under no lock. */
static int pin_add(struct wd_resolver *r, const uint8_t a[16], uint16_t port,
		   uint64_t exp, const char *name)
{
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->npins; i++) {
		struct pin *p = &r->pins[i];
		if (p->port == port && !memcmp(p->addr, a, 16)) {
			if (exp > p->expires_ns)
				p->expires_ns = exp;
			wd_strlcpy(p->name, name, sizeof(p->name));
			pthread_mutex_unlock(&r->mu);
			return 0;
		}
	}
	bool full = r->npins >= MAX_PINS;
	pthread_mutex_unlock(&r->mu);
	if (full)
		return -ENOSPC;
	int rc = r->pin(r->pin_arg, a, port, true);
	if (rc)
		return rc;
	pthread_mutex_lock(&r->mu);
	if (r->npins == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 16;
		r->pins =
		    wd_realloc(r->pins, (size_t)r->cap * sizeof(*r->pins));
	}
	struct pin *p = &r->pins[r->npins++];
	memcpy(p->addr, a, 16);
	p->port = port;
	p->expires_ns = exp;
	wd_strlcpy(p->name, name, sizeof(p->name));
	pthread_mutex_unlock(&r->mu);
	return 0;
}

/* Record that the thread fails (the first reason is kept) and wake the
 * supervisor, which ends the call. */
static void fail(struct wd_resolver *r, const char *why)
{
	pthread_mutex_lock(&r->mu);
	if (!r->failed[0])
		wd_strlcpy(r->failed, why, sizeof(r->failed));
	pthread_mutex_unlock(&r->mu);
	uint64_t one = 1;
	if (write(r->evfd, &one, sizeof(one)) < 0) {
		/* the counter is full: the supervisor is already woken */
	}
}

/* Unpin what expired by now (all when now is UINT64_MAX); the next
 * expiry, or 0 if nothing is pinned. An address that cannot be unpinned
 * stays reachable past its TTL: logged, and the resolver fails (the call
 * is ended); the rest are still unpinned. */
static uint64_t expire(struct wd_resolver *r, uint64_t now)
{
	uint64_t next = 0;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->npins;) {
		struct pin p = r->pins[i];
		if (p.expires_ns <= now) {
			r->pins[i] = r->pins[--r->npins];
			int h = r->nhist++ % NAME_HISTORY;
			memcpy(r->hist[h].addr, p.addr, 16);
			wd_strlcpy(r->hist[h].name, p.name,
				   sizeof(r->hist[h].name));
			pthread_mutex_unlock(&r->mu);
			int urc = r->pin(r->pin_arg, p.addr, p.port, false);
			if (urc) {
				char a[INET6_ADDRSTRLEN], why[200];
				inet_ntop(AF_INET6, p.addr, a, sizeof(a));
				snprintf(why, sizeof(why),
					 "cannot unpin %s port %u (%s) at the "
					 "end of its TTL: %s",
					 a, p.port, p.name, strerror(-urc));
				wd_warn("resolver: cgroup %llu: %s",
					(unsigned long long)r->cgid, why);
				fail(r, why);
			}
			pthread_mutex_lock(&r->mu);
			i = 0; /* the list moved under us */
			next = 0;
			continue;
		}
		if (!next || p.expires_ns < next)
			next = p.expires_ns;
		i++;
	}
	pthread_mutex_unlock(&r->mu);
	return next;
}

/* ---- who asks ------------------------------------------------------------
 * The resolver listens on 127.0.0.1 in the host's network namespace:
 * anything on the node could send it queries. Only the call's own
 * processes are answered — the socket a query came from must belong to
 * the call's uid (a uid of its own, never shared with a live call): a
 * host process or another call could otherwise forge the call's denials
 * (and alerts), fill its queue, or keep its pins alive. */

static bool from_call(struct wd_resolver *r, int proto,
		      const struct sockaddr_storage *peer)
{
	bool lo = false;
	if (peer->ss_family == AF_INET) {
		const struct sockaddr_in *p4 = (const void *)peer;
		lo = p4->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
	} else if (peer->ss_family == AF_INET6) {
		const struct sockaddr_in6 *p6 = (const void *)peer;
		lo = !memcmp(&p6->sin6_addr, &in6addr_loopback, 16);
	}
	/* TCP's lookup finds the socket by its local end (src), UDP's by
	 * where it receives (dst): asked that way first, then the other */
	long uid = -1;
	if (lo) {
		uid = wd_sockowner_diag(r->diag, proto, r->port, peer,
					proto == IPPROTO_TCP);
		if (uid < 0)
			uid = wd_sockowner_diag(r->diag, proto, r->port, peer,
						proto != IPPROTO_TCP);
		if (uid < 0)
			uid = wd_sockowner_proc(proto, peer, r->port);
	}
	bool ok = uid >= 0 && (uint32_t)uid == r->uid;
	if (!ok) {
		pthread_mutex_lock(&r->mu);
		r->foreign++;
		pthread_mutex_unlock(&r->mu);
	}
	return ok;
}

/* Tier 3's link sockets: a query is the sandbox's when it comes from the
 * sandbox's own address (gVisor's netstack, behind the link) and (UDP)
 * arrived over the link, and no socket of this node's owns that source:
 * a host process sends to the link's address over loopback, and one that
 * made the sandbox's address its source (IP_FREEBIND) has a socket that
 * /proc/net lists. */
static bool from_link(struct wd_resolver *r, int proto,
		      const struct sockaddr_storage *peer, int ifindex)
{
	const struct sockaddr_in *p4 = (const void *)peer;
	bool ok =
	    peer->ss_family == AF_INET && p4->sin_addr.s_addr == r->dev_peer &&
	    (proto == IPPROTO_TCP || ifindex == r->dev_ifindex) &&
	    /* no socket of the node's has the peer's end (nor the
	     * port on any address): /proc/net, which lists them all
	     * whatever modules the socket diagnostics have */
	    wd_sockowner_proc(proto, peer, 53) == -1; /* -2: unknown, refused */
	if (!ok) {
		pthread_mutex_lock(&r->mu);
		r->foreign++;
		pthread_mutex_unlock(&r->mu);
	}
	return ok;
}

/* Whether name may be looked up: one already looked up, or a new one
 * while fewer than MAX_LOOKED_UP were (then remembered). Names compare
 * without case, as DNS does. */
static bool note_looked_up(struct wd_resolver *r, const char *name)
{
	for (int i = 0; i < r->nlooked; i++)
		if (!strcasecmp(r->looked[i], name))
			return true;
	if (r->nlooked >= MAX_LOOKED_UP)
		return false;
	if (!r->looked)
		r->looked = wd_calloc(MAX_LOOKED_UP, sizeof(*r->looked));
	wd_strlcpy(r->looked[r->nlooked++], name, sizeof(*r->looked));
	return true;
}

/* One query: the answer's length in out (0: none is sent). */
static size_t handle(struct wd_resolver *r, const uint8_t *msg, size_t len,
		     uint8_t *out, size_t cap)
{
	struct wd_dns_query q;
	int pr = wd_dns_parse_query(msg, len, &q);
	if (pr < 0)
		return 0;
	if (pr > 0)
		return wd_dns_answer(&q, msg, pr, NULL, 0, out, cap);
	if (wd_dns_would_look_up(r->rules, r->n, &q) &&
	    !note_looked_up(r, q.name)) {
		queue_named(r, "dns.name", q.name, LOOKED_UP_WHY);
		if (!r->audit) /* audit: recorded, looked up as asked */
			return wd_dns_answer(&q, msg, WD_DNS_REFUSED, NULL, 0,
					     out, cap);
	}
	struct wd_dns_decision d;
	wd_dns_decide(r->rules, r->n, r->priv, r->npriv, &r->up, r->cache, &q,
		      &d);
	if (d.denied) {
		if (d.rcode == WD_DNS_NXDOMAIN)
			queue_denial(r, "dns.name", q.name, 0);
		else /* the answer withheld and its range */
			queue_named(r, "dns.answer", q.name, d.why);
		if (r->audit && q.qclass == 1 &&
		    (q.qtype == WD_DNS_A || q.qtype == WD_DNS_AAAA)) {
			/* audit: answered as the node would; the programs
			 * let every connect through and record it */
			struct wd_err le = {0};
			int m = wd_dns_lookup(&r->up, q.name, q.qtype, d.rr,
					      WD_DNS_MAX_RR, &le);
			d.n = m > 0 ? m : 0;
			d.nports = 0;
			d.rcode = m >= 0	 ? WD_DNS_NOERROR
				  : m == -ENOENT ? WD_DNS_NXDOMAIN
						 : WD_DNS_SERVFAIL;
		}
	}
	/* what the asker can reach (tier 3), as the private ranges are
	 * judged: an answer withheld is recorded, REFUSED if none is left */
	uint8_t told[WD_DNS_MAX_RR][16];
	int kept = 0, withheld = 0;
	for (int i = 0; i < d.n && r->shown; i++) {
		char why[160] = "";
		int sr = r->shown(r->shown_arg, d.rr[i].addr, told[kept], why,
				  sizeof(why));
		if (sr < 0 && !withheld++)
			queue_named(r, "dns.answer", q.name, why);
		if (sr == 0)
			d.rr[kept++] = d.rr[i];
	}
	if (r->shown) {
		d.n = kept;
		if (withheld && !kept)
			d.rcode = WD_DNS_REFUSED;
	}
	uint64_t now = wd_now_ns();
	for (int i = 0; i < d.n; i++) {
		uint64_t life = (uint64_t)d.rr[i].ttl * 1000000000ull;
		uint64_t exp = now + (life < MIN_PIN_NS ? MIN_PIN_NS : life);
		int prc = 0;
		for (int k = 0; k < d.nports && !prc; k++)
			prc = pin_add(r, d.rr[i].addr, d.ports[k], exp, q.name);
		if (prc) {
			/* not pinned: not answered (the connect would be
			 * refused anyway) */
			if (prc == -ENOSPC)
				queue_named(r, "dns.answer", q.name, PINS_WHY);
			d.rcode = WD_DNS_SERVFAIL;
			d.n = 0;
			break;
		}
	}
	if (d.n) {
		pthread_mutex_lock(&r->mu);
		r->answered++;
		pthread_mutex_unlock(&r->mu);
	}
	/* pinned as answered, told as the asker reaches it */
	for (int i = 0; i < d.n && r->shown; i++)
		memcpy(d.rr[i].addr, told[i], 16);
	return wd_dns_answer(&q, msg, d.rcode, d.rr, d.n, out, cap);
}

static void conn_close(struct conn *c)
{
	close(c->fd);
	c->fd = -1;
	c->have = 0;
}

static void conn_read(struct wd_resolver *r, struct conn *c)
{
	ssize_t k = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have,
			 MSG_DONTWAIT);
	if (k <= 0) {
		if (k == 0 || (errno != EAGAIN && errno != EINTR))
			conn_close(c);
		return;
	}
	c->have += (size_t)k;
	while (c->have >= 2) {
		size_t ml = (size_t)c->buf[0] << 8 | c->buf[1];
		if (ml > TCP_MSG_MAX) {
			conn_close(c);
			return;
		}
		if (c->have < 2 + ml)
			return;
		uint8_t out[2 + TCP_MSG_MAX];
		size_t w = handle(r, c->buf + 2, ml, out + 2, TCP_MSG_MAX);
		if (w) {
			out[0] = (uint8_t)(w >> 8);
			out[1] = (uint8_t)w;
			/* one answer per query, small: a reader that does
			 * not take it loses its connection */
			if (send(c->fd, out, w + 2,
				 MSG_DONTWAIT | MSG_NOSIGNAL) !=
			    (ssize_t)(w + 2)) {
				conn_close(c);
				return;
			}
		}
		memmove(c->buf, c->buf + 2 + ml, c->have - 2 - ml);
		c->have -= 2 + ml;
		c->since_ns = wd_now_ns();
	}
}

static void udp_read(struct wd_resolver *r, int fd)
{
	for (int i = 0; i < 64; i++) {
		uint8_t in[1500], out[1500];
		struct sockaddr_storage from;
		char cb[CMSG_SPACE(sizeof(struct in_pktinfo))];
		struct iovec iov = {in, sizeof(in)};
		struct msghdr mh = {.msg_name = &from,
				    .msg_namelen = sizeof(from),
				    .msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cb,
				    .msg_controllen = sizeof(cb)};
		ssize_t m = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (m < 0)
			break;
		socklen_t fl = mh.msg_namelen;
		int ifindex = 0; /* where it arrived (the link's socket) */
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
		     c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == IPPROTO_IP &&
			    c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;
				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				ifindex = pi.ipi_ifindex;
			}
		if (fd == r->udpd ? !from_link(r, IPPROTO_UDP, &from, ifindex)
				  : !from_call(r, IPPROTO_UDP, &from))
			continue; /* not the call's: unanswered */
		/* UDP answers fit 512 bytes unless EDNS says more; ours are
		 * at most 16 records (TC set past that) */
		size_t w = handle(r, in, (size_t)m, out, 512);
		if (w)
			sendto(fd, out, w, MSG_DONTWAIT, (void *)&from, fl);
	}
}

static void tcp_accept(struct wd_resolver *r, int lfd)
{
	struct sockaddr_storage from = {0};
	socklen_t fl = sizeof(from);
	int fd = accept4(lfd, (void *)&from, &fl, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	if (lfd == r->tcpd ? !from_link(r, IPPROTO_TCP, &from, 0)
			   : !from_call(r, IPPROTO_TCP, &from)) {
		close(fd); /* not the call's */
		return;
	}
	for (int i = 0; i < MAX_CONN; i++)
		if (r->conns[i].fd < 0) {
			r->conns[i] =
			    (struct conn){.fd = fd, .since_ns = wd_now_ns()};
			return;
		}
	close(fd); /* at most MAX_CONN at once */
}

static bool failed(struct wd_resolver *r)
{
	pthread_mutex_lock(&r->mu);
	bool f = r->failed[0] != 0;
	pthread_mutex_unlock(&r->mu);
	return f;
}

static void *resolver_main(void *arg)
{
	struct wd_resolver *r = arg;
	for (;;) {
		struct pollfd p[7 + MAX_CONN];
		int n = 0;
		p[n++] = (struct pollfd){r->stopfd, POLLIN, 0};
		p[n++] = (struct pollfd){r->udp, POLLIN, 0};
		p[n++] = (struct pollfd){r->tcp, POLLIN, 0};
		p[n++] = (struct pollfd){r->udp6, POLLIN, 0}; /* -1: none */
		p[n++] = (struct pollfd){r->tcp6, POLLIN, 0};
		p[n++] = (struct pollfd){r->udpd, POLLIN, 0};
		p[n++] = (struct pollfd){r->tcpd, POLLIN, 0};
		int first_conn = n;
		for (int i = 0; i < MAX_CONN; i++)
			if (r->conns[i].fd >= 0)
				p[n++] =
				    (struct pollfd){r->conns[i].fd, POLLIN, 0};
		uint64_t now = wd_now_ns();
		uint64_t next = expire(r, now);
		if (failed(r))
			break;
		int tmo = next ? (int)((next - now) / 1000000) + 1 : 1000;
		if (tmo > 1000)
			tmo = 1000; /* idle TCP connections are cut below */
		int k = poll(p, (nfds_t)n, tmo);
		if (k < 0 && errno != EINTR) {
			char why[200];
			snprintf(why, sizeof(why), "poll: %s", strerror(errno));
			wd_warn("resolver: cgroup %llu: %s",
				(unsigned long long)r->cgid, why);
			fail(r, why);
			break;
		}
		if (p[0].revents)
			return NULL; /* stopped: wd_resolver_stop unpins */
		if (p[1].revents)
			udp_read(r, r->udp);
		if (p[3].revents)
			udp_read(r, r->udp6);
		if (p[2].revents)
			tcp_accept(r, r->tcp);
		if (p[4].revents)
			tcp_accept(r, r->tcp6);
		if (p[5].revents)
			udp_read(r, r->udpd);
		if (p[6].revents)
			tcp_accept(r, r->tcpd);
		for (int j = first_conn; j < n; j++) {
			if (!p[j].revents)
				continue;
			for (int i = 0; i < MAX_CONN; i++)
				if (r->conns[i].fd == p[j].fd)
					conn_read(r, &r->conns[i]);
		}
		now = wd_now_ns();
		for (int i = 0; i < MAX_CONN; i++)
			if (r->conns[i].fd >= 0 &&
			    now - r->conns[i].since_ns > 5000000000ull)
				conn_close(&r->conns[i]);
	}
	/* failed: fail closed. No answer is pinned past its TTL (nothing
	 * expires them any more), and the call's queries fail rather than
	 * wait on sockets nobody reads; the supervisor ends the call. */
	expire(r, UINT64_MAX);
	for (int i = 0; i < MAX_CONN; i++)
		if (r->conns[i].fd >= 0)
			conn_close(&r->conns[i]);
	if (r->off)
		r->off(r->off_arg);
	return NULL;
}

/* dev_addr:53 on tier 3's link, UDP and TCP, bound to the device: 0 or
 * -errno. */
static int open_dev(struct wd_resolver *r, const char *dev, uint32_t addr)
{
	struct sockaddr_in s4 = {.sin_family = AF_INET,
				 .sin_port = htons(53),
				 .sin_addr.s_addr = addr};
	int one = 1;
	r->udpd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	r->tcpd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int fds[2] = {r->udpd, r->tcpd};
	for (int i = 0; i < 2; i++)
		if (fds[i] < 0 ||
		    setsockopt(fds[i], SOL_SOCKET, SO_BINDTODEVICE, dev,
			       (socklen_t)strlen(dev)) ||
		    setsockopt(fds[i], SOL_SOCKET, SO_REUSEADDR, &one,
			       sizeof(one)) ||
		    (i == 0 && setsockopt(fds[i], IPPROTO_IP, IP_PKTINFO, &one,
					  sizeof(one))) ||
		    bind(fds[i], (void *)&s4, sizeof(s4)))
			return -errno;
	return listen(r->tcpd, MAX_CONN) ? -errno : 0;
}

/* [::1] at the v4 side's port, UDP and TCP, v6 only; false (nothing
 * open) when the node has no ::1 or the port is taken there. */
static bool open_v6(struct wd_resolver *r)
{
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(r->port),
				  .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	int one = 1;
	r->udp6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	r->tcp6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (r->udp6 >= 0 && r->tcp6 >= 0 &&
	    !setsockopt(r->udp6, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			sizeof(one)) &&
	    !setsockopt(r->tcp6, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			sizeof(one)) &&
	    !bind(r->udp6, (void *)&s6, sizeof(s6)) &&
	    !bind(r->tcp6, (void *)&s6, sizeof(s6)) &&
	    !listen(r->tcp6, MAX_CONN))
		return true;
	if (r->udp6 >= 0)
		close(r->udp6);
	if (r->tcp6 >= 0)
		close(r->tcp6);
	r->udp6 = r->tcp6 = -1;
	return false;
}

int wd_resolver_start(const struct wd_resolver_opts *o,
		      struct wd_resolver **out, struct wd_err *err)
{
	*out = NULL;
	struct wd_resolver *r = wd_calloc(1, sizeof(*r));
	r->cache = wd_calloc(1, sizeof(*r->cache));
	pthread_mutex_init(&r->mu, NULL);
	r->udp = r->tcp = r->stopfd = r->evfd = r->diag = -1;
	r->udp6 = r->tcp6 = -1;
	r->udpd = r->tcpd = -1;
	for (int i = 0; i < MAX_CONN; i++)
		r->conns[i].fd = -1;
	r->n = o->n;
	r->rules = wd_calloc((size_t)(o->n ? o->n : 1), sizeof(*r->rules));
	if (o->n)
		memcpy(r->rules, o->rules, (size_t)o->n * sizeof(*r->rules));
	r->npriv = o->npriv;
	r->priv =
	    wd_calloc((size_t)(o->npriv ? o->npriv : 1), sizeof(*r->priv));
	if (o->npriv)
		memcpy(r->priv, o->priv, (size_t)o->npriv * sizeof(*r->priv));
	r->up = o->up;
	if (o->up.hosts_path) {
		wd_strlcpy(r->hosts_path, o->up.hosts_path,
			   sizeof(r->hosts_path));
		r->up.hosts_path = r->hosts_path;
	}
	r->pin = o->pin;
	r->pin_arg = o->pin_arg;
	r->cgid = o->cgroup_id;
	r->uid = o->uid;
	r->audit = o->audit;
	r->shown = o->shown;
	r->shown_arg = o->shown_arg;
	r->off = o->off;
	r->off_arg = o->off_arg;
	int rc = 0;
	struct sockaddr_in sin = {.sin_family = AF_INET};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* one port for both: the programs rewrite port 53 to it whatever
	 * the protocol */
	for (int tries = 0; tries < 16; tries++) {
		if (r->udp >= 0)
			close(r->udp);
		if (r->tcp >= 0)
			close(r->tcp);
		r->udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		r->tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		sin.sin_port = 0;
		socklen_t sl = sizeof(sin);
		if (r->udp < 0 || r->tcp < 0 ||
		    bind(r->udp, (void *)&sin, sizeof(sin)) < 0 ||
		    getsockname(r->udp, (void *)&sin, &sl) < 0) {
			rc = -errno;
			break;
		}
		if (bind(r->tcp, (void *)&sin, sizeof(sin)) == 0 &&
		    listen(r->tcp, MAX_CONN) == 0) {
			r->port = ntohs(sin.sin_port);
			rc = 0;
			break;
		}
		rc = -errno; /* that port's TCP side is taken: another */
	}
	if (!r->port) {
		wd_err_set(err, rc ? rc : -EADDRINUSE,
			   "network.allow names: the call's resolver cannot "
			   "listen on 127.0.0.1: %s",
			   strerror(rc ? -rc : EADDRINUSE));
		wd_resolver_stop(r);
		return rc ? rc : -EADDRINUSE;
	}
	open_v6(r);
	r->dev_addr = o->dev_addr;
	r->dev_peer = o->dev_peer;
	r->dev_ifindex = o->dev ? (int)if_nametoindex(o->dev) : 0;
	if (o->dev && (rc = open_dev(r, o->dev, o->dev_addr)) < 0) {
		wd_err_set(err, rc,
			   "network.allow names: the call's resolver cannot "
			   "listen on its tier-3 link '%s' (port 53): %s",
			   o->dev, strerror(-rc));
		wd_resolver_stop(r);
		return rc;
	}
	r->diag =
	    socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (r->diag < 0) {
		rc = -errno;
		wd_err_set(err, rc,
			   "network.allow names: the call's resolver cannot "
			   "tell who asks (NETLINK_SOCK_DIAG: %s)",
			   strerror(-rc));
		wd_resolver_stop(r);
		return rc;
	}
	struct timeval dtv = {1, 0};
	setsockopt(r->diag, SOL_SOCKET, SO_RCVTIMEO, &dtv, sizeof(dtv));
	r->stopfd = eventfd(0, EFD_CLOEXEC);
	r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->stopfd < 0 || r->evfd < 0) {
		rc = -errno;
		wd_err_set(err, rc, "resolver: eventfd: %s", strerror(-rc));
		wd_resolver_stop(r);
		return rc;
	}
	if ((rc = -pthread_create(&r->th, NULL, resolver_main, r))) {
		wd_err_set(err, rc, "resolver: thread: %s", strerror(-rc));
		wd_resolver_stop(r);
		return rc;
	}
	r->started = true;
	*out = r;
	return 0;
}

uint16_t wd_resolver_port(const struct wd_resolver *r)
{
	return r->port;
}

bool wd_resolver_has_v6(const struct wd_resolver *r)
{
	return r->udp6 >= 0;
}

int wd_resolver_events_fd(const struct wd_resolver *r)
{
	return r->evfd;
}

int wd_resolver_take(struct wd_resolver *r, struct wd_event *out, int max)
{
	uint64_t v;
	if (read(r->evfd, &v, sizeof(v)) < 0) {
		/* nothing signalled: the queue may still hold some */
	}
	pthread_mutex_lock(&r->mu);
	int k = r->nq < max ? r->nq : max;
	if (k) {
		memcpy(out, r->q, (size_t)k * sizeof(*out));
		memmove(r->q, r->q + k, (size_t)(r->nq - k) * sizeof(*r->q));
		r->nq -= k;
	}
	bool more = r->nq > 0;
	pthread_mutex_unlock(&r->mu);
	if (more) {
		uint64_t one = 1;
		if (write(r->evfd, &one, sizeof(one)) < 0) {
			/* already readable */
		}
	}
	return k;
}

bool wd_resolver_name_of(struct wd_resolver *r, const uint8_t addr[16],
			 char *name, size_t n)
{
	bool found = false;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->npins && !found; i++)
		if (!memcmp(r->pins[i].addr, addr, 16)) {
			wd_strlcpy(name, r->pins[i].name, n);
			found = true;
		}
	/* an answer whose TTL ended: a later connect to it is still the
	 * name's (denied, and named) */
	int nh = r->nhist < NAME_HISTORY ? r->nhist : NAME_HISTORY;
	for (int i = 0; i < nh && !found; i++)
		if (!memcmp(r->hist[i].addr, addr, 16)) {
			wd_strlcpy(name, r->hist[i].name, n);
			found = true;
		}
	pthread_mutex_unlock(&r->mu);
	if (!found && n)
		name[0] = 0;
	return found;
}

void wd_resolver_counts(struct wd_resolver *r, uint64_t *answered,
			uint64_t *refused)
{
	pthread_mutex_lock(&r->mu);
	*answered = r->answered;
	*refused = r->refused;
	pthread_mutex_unlock(&r->mu);
}

uint64_t wd_resolver_take_dropped(struct wd_resolver *r)
{
	pthread_mutex_lock(&r->mu);
	uint64_t d = r->dropped;
	r->dropped = 0;
	pthread_mutex_unlock(&r->mu);
	return d;
}

bool wd_resolver_failed(struct wd_resolver *r, char *msg, size_t n)
{
	if (!r)
		return false;
	pthread_mutex_lock(&r->mu);
	bool f = r->failed[0] != 0;
	if (f && n)
		wd_strlcpy(msg, r->failed, n);
	pthread_mutex_unlock(&r->mu);
	return f;
}

void wd_resolver_stop(struct wd_resolver *r)
{
	if (!r)
		return;
	if (r->started) {
		uint64_t one = 1;
		if (write(r->stopfd, &one, sizeof(one)) < 0) {
			/* cannot fail on a fresh eventfd */
		}
		pthread_join(r->th, NULL);
	}
	expire(r, UINT64_MAX);
	for (int i = 0; i < MAX_CONN; i++)
		if (r->conns[i].fd >= 0)
			close(r->conns[i].fd);
	int fds[] = {r->udp,  r->tcp,	 r->udp6, r->tcp6, r->udpd,
		     r->tcpd, r->stopfd, r->evfd, r->diag};
	for (size_t i = 0; i < WD_ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	pthread_mutex_destroy(&r->mu);
	free(r->pins);
	free(r->looked);
	free(r->cache);
	free(r->q);
	free(r->rules);
	free(r->priv);
	free(r);
}
