/* Tier 3's netns and veth pair (t3link.h), with rtnetlink. */
#include "sandbox/t3link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#define NL_BUF 1024

struct nlreq {
	struct nlmsghdr *h;
	char buf[NL_BUF];
};

static void *nl_start(struct nlreq *q, uint16_t type, uint16_t flags,
		      size_t hdr_len)
{
	memset(q->buf, 0, sizeof(q->buf));
	q->h = (struct nlmsghdr *)q->buf;
	q->h->nlmsg_len = NLMSG_LENGTH(hdr_len);
	q->h->nlmsg_type = type;
	q->h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	return NLMSG_DATA(q->h);
}

static struct rtattr *nl_attr(struct nlreq *q, uint16_t type, const void *data,
			      size_t len)
{
	size_t at = NLMSG_ALIGN(q->h->nlmsg_len);
	if (at + RTA_SPACE(len) > sizeof(q->buf))
		return NULL; /* cannot happen with the requests below */
	struct rtattr *a = (struct rtattr *)(q->buf + at);
	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(a), data, len);
	q->h->nlmsg_len = (uint32_t)(at + RTA_SPACE(len));
	return a;
}

/* Close a nested attribute opened with nl_attr(q, type, NULL, 0). */
static void nl_end(struct nlreq *q, struct rtattr *nest)
{
	nest->rta_len =
	    (unsigned short)(q->buf + q->h->nlmsg_len - (char *)nest);
}

/* Send one request and read its ack: 0 or the kernel's -errno. */
static int nl_talk(int fd, struct nlreq *q)
{
	if (send(fd, q->buf, q->h->nlmsg_len, 0) < 0)
		return -errno;
	char rb[NL_BUF];
	for (;;) {
		ssize_t n = recv(fd, rb, sizeof(rb), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)rb;
		     NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n))
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				return e->error;
			}
	}
}

static int nl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int link_up(int fd, int ifindex)
{
	struct nlreq q;
	struct ifinfomsg *i = nl_start(&q, RTM_NEWLINK, 0, sizeof(*i));
	i->ifi_family = AF_UNSPEC;
	i->ifi_index = ifindex;
	i->ifi_flags = IFF_UP;
	i->ifi_change = IFF_UP;
	return nl_talk(fd, &q);
}

static int addr_add(int fd, int ifindex, uint32_t a)
{
	struct nlreq q;
	struct ifaddrmsg *m =
	    nl_start(&q, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, sizeof(*m));
	m->ifa_family = AF_INET;
	m->ifa_prefixlen = 30;
	m->ifa_index = (uint32_t)ifindex;
	m->ifa_scope = RT_SCOPE_UNIVERSE;
	nl_attr(&q, IFA_LOCAL, &a, 4);
	nl_attr(&q, IFA_ADDRESS, &a, 4);
	return nl_talk(fd, &q);
}

static int route_default(int fd, int ifindex, uint32_t gw)
{
	struct nlreq q;
	struct rtmsg *r =
	    nl_start(&q, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, sizeof(*r));
	r->rtm_family = AF_INET;
	r->rtm_table = RT_TABLE_MAIN;
	r->rtm_protocol = RTPROT_BOOT;
	r->rtm_scope = RT_SCOPE_UNIVERSE;
	r->rtm_type = RTN_UNICAST;
	uint32_t oif = (uint32_t)ifindex;
	nl_attr(&q, RTA_GATEWAY, &gw, 4);
	nl_attr(&q, RTA_OIF, &oif, 4);
	return nl_talk(fd, &q);
}

/* A sysctl of a host interface: 0 or -errno. */
static int dev_sysctl(const char *fam, const char *dev, const char *key,
		      const char *val)
{
	char p[128];
	snprintf(p, sizeof(p), "/proc/sys/net/%s/conf/%s/%s", fam, dev, key);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, val, strlen(val));
	int rc = w < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* The netns side, on a thread of its own that joins it (setns changes
 * the calling thread only). */
struct inside {
	int nsfd;
	uint32_t gw, sbx;
	int rc;
	const char *step;
};

static void *inside_main(void *arg)
{
	struct inside *in = arg;
	in->step = "setns";
	if (setns(in->nsfd, CLONE_NEWNET) < 0) {
		in->rc = -errno;
		return NULL;
	}
	int fd = nl_open();
	if (fd < 0) {
		in->step = "netlink";
		in->rc = fd;
		return NULL;
	}
	int lo = (int)if_nametoindex("lo");
	int eth = (int)if_nametoindex("eth0");
	in->step = "lo, eth0";
	in->rc = lo && eth ? 0 : -ENODEV;
	if (!in->rc) {
		in->step = "lo up";
		in->rc = link_up(fd, lo);
	}
	if (!in->rc) {
		in->step = "eth0 address";
		in->rc = addr_add(fd, eth, in->sbx);
	}
	if (!in->rc) {
		in->step = "eth0 up";
		in->rc = link_up(fd, eth);
	}
	if (!in->rc) {
		in->step = "default route";
		in->rc = route_default(fd, eth, in->gw);
	}
	close(fd);
	return NULL;
}

static void *mkns_main(void *arg)
{
	int *fd = arg;
	if (unshare(CLONE_NEWNET) < 0) {
		*fd = -errno;
		return NULL;
	}
	*fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		*fd = -errno;
	return NULL;
}

static int on_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	int e = pthread_create(&t, NULL, fn, arg);
	if (e)
		return -e;
	pthread_join(t, NULL);
	return 0;
}

/* 169.254.X.Y/30 of slot `i`: X skips 169 (the metadata /24). */
static uint32_t slot_base(uint32_t i)
{
	uint32_t x = i / 64, y = (i % 64) * 4;
	if (x >= 169)
		x++;
	return (169u << 24) | (254u << 16) | (x << 8) | y;
}

/* Some address on the node in base/30 already. */
static bool slot_taken(uint32_t base)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0)
		return true; /* cannot tell: taken */
	bool taken = false;
	for (struct ifaddrs *i = ifa; i && !taken; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
			uint32_t a = ntohl(((struct sockaddr_in *)i->ifa_addr)
					       ->sin_addr.s_addr);
			taken = (a & ~3u) == base;
		}
	freeifaddrs(ifa);
	return taken;
}

int wd_t3link_make(struct wd_t3link *l, struct wd_err *err)
{
	static atomic_uint seq;
	memset(l, 0, sizeof(*l));
	l->netns_fd = -1;
	int rc = 0, fd = -1;
	int nsfd = -EINVAL;
	if ((rc = on_thread(mkns_main, &nsfd)) < 0 || (rc = nsfd) < 0) {
		wd_err_set(err, rc,
			   "tier 3 network: cannot make the sandbox's network "
			   "namespace: %s",
			   strerror(-rc));
		return rc;
	}
	l->netns_fd = nsfd;
	snprintf(l->ns_path, sizeof(l->ns_path), "/proc/%d/fd/%d",
		 (int)getpid(), nsfd);
	snprintf(l->host_name, sizeof(l->host_name), "w3h%06x%04x",
		 (unsigned)getpid() & 0xffffff,
		 atomic_fetch_add(&seq, 1) & 0xffff);
	if ((fd = nl_open()) < 0) {
		rc = wd_err_set(err, fd, "tier 3 network: netlink: %s",
				strerror(-fd));
		goto fail;
	}
	/* the pair: ours in the host, eth0 in the sandbox's netns */
	struct nlreq q;
	struct ifinfomsg *i =
	    nl_start(&q, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, sizeof(*i));
	i->ifi_family = AF_UNSPEC;
	nl_attr(&q, IFLA_IFNAME, l->host_name, strlen(l->host_name) + 1);
	struct rtattr *li = nl_attr(&q, IFLA_LINKINFO, NULL, 0);
	nl_attr(&q, IFLA_INFO_KIND, "veth", 5);
	struct rtattr *data = nl_attr(&q, IFLA_INFO_DATA, NULL, 0);
	struct rtattr *peer = nl_attr(&q, VETH_INFO_PEER, NULL, 0);
	struct ifinfomsg pi = {.ifi_family = AF_UNSPEC};
	q.h->nlmsg_len += NLMSG_ALIGN(sizeof(pi));
	memcpy((char *)RTA_DATA(peer), &pi, sizeof(pi));
	nl_attr(&q, IFLA_IFNAME, "eth0", 5);
	uint32_t ns = (uint32_t)nsfd;
	nl_attr(&q, IFLA_NET_NS_FD, &ns, 4);
	nl_end(&q, peer);
	nl_end(&q, data);
	nl_end(&q, li);
	if ((rc = nl_talk(fd, &q)) < 0) {
		wd_err_set(err, rc, "tier 3 network: cannot make veth '%s': %s",
			   l->host_name, strerror(-rc));
		goto fail;
	}
	l->host_ifindex = (int)if_nametoindex(l->host_name);
	if (!l->host_ifindex) {
		rc = wd_err_set(err, -ENODEV, "tier 3 network: veth '%s' gone",
				l->host_name);
		goto fail;
	}
	uint32_t base = slot_base((uint32_t)l->host_ifindex % (254 * 64));
	if (slot_taken(base)) {
		rc = wd_err_set(err, -EADDRINUSE,
				"tier 3 network: 169.254.%u.%u/30 is taken on "
				"this node: no address for the sandbox's link",
				(base >> 8) & 255, base & 255);
		goto fail;
	}
	l->gw = htonl(base + 1);
	l->sbx = htonl(base + 2);
	/* the host end: IPv6 off (the link carries IPv4), no forwarding
	 * (only the node's own addresses are reached, until the call is
	 * routed beyond the node: sandbox/t3beyond.h), route_localnet (the
	 * node's loopback at gw, translated by the tc programs) */
	const char *step = "ipv6 disable_ipv6";
	if (!(rc = dev_sysctl("ipv6", l->host_name, "disable_ipv6", "1"))) {
		step = "ipv4 forwarding";
		rc = dev_sysctl("ipv4", l->host_name, "forwarding", "0");
	}
	if (!rc) {
		step = "ipv4 route_localnet";
		rc = dev_sysctl("ipv4", l->host_name, "route_localnet", "1");
	}
	if (!rc) {
		step = "address";
		rc = addr_add(fd, l->host_ifindex, l->gw);
	}
	if (!rc) {
		step = "up";
		rc = link_up(fd, l->host_ifindex);
	}
	if (rc) {
		wd_err_set(err, rc, "tier 3 network: host end '%s': %s: %s",
			   l->host_name, step, strerror(-rc));
		goto fail;
	}
	struct inside in = {.nsfd = nsfd, .gw = l->gw, .sbx = l->sbx};
	if ((rc = on_thread(inside_main, &in)) < 0 || (rc = in.rc) < 0) {
		wd_err_set(err, rc, "tier 3 network: sandbox side: %s: %s",
			   in.step ? in.step : "thread", strerror(-rc));
		goto fail;
	}
	close(fd);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	wd_t3link_destroy(l);
	return rc;
}

void wd_t3link_destroy(struct wd_t3link *l)
{
	if (l->host_ifindex > 0) {
		int fd = nl_open();
		if (fd >= 0) {
			struct nlreq q;
			struct ifinfomsg *i =
			    nl_start(&q, RTM_DELLINK, 0, sizeof(*i));
			i->ifi_family = AF_UNSPEC;
			i->ifi_index = l->host_ifindex;
			/* -ENODEV: the netns went first, the pair with it */
			nl_talk(fd, &q);
			close(fd);
		}
		l->host_ifindex = 0;
	} else if (l->host_name[0]) {
		/* made but its index unknown: by name */
		int fd = nl_open();
		if (fd >= 0) {
			struct nlreq q;
			struct ifinfomsg *i =
			    nl_start(&q, RTM_DELLINK, 0, sizeof(*i));
			i->ifi_family = AF_UNSPEC;
			nl_attr(&q, IFLA_IFNAME, l->host_name,
				strlen(l->host_name) + 1);
			nl_talk(fd, &q);
			close(fd);
		}
	}
	l->host_name[0] = 0;
	if (l->netns_fd >= 0)
		close(l->netns_fd);
	l->netns_fd = -1;
}

void wd_t3link_release(struct wd_t3link *l)
{
	l->host_ifindex = 0;
	l->host_name[0] = 0;
	if (l->netns_fd >= 0)
		close(l->netns_fd);
	l->netns_fd = -1;
}
