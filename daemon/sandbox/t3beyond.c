/* Tier 3 beyond the node (t3beyond.h): the node's forwarding, its route
 * to a destination (rtnetlink) and the call's source NAT (libnftables). */
#include "sandbox/t3beyond.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <nftables/libnftables.h>

#include "common/log.h"

/* An integer sysctl under /proc/sys/net/ipv4 (of this thread's netns):
 * its value or -errno. */
static int sysctl_get(const char *rel)
{
	char p[128], b[32];
	snprintf(p, sizeof(p), "/proc/sys/net/ipv4/%s", rel);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, b, sizeof(b) - 1);
	int e = errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? -e : -EIO;
	b[n] = 0;
	return atoi(b);
}

static int sysctl_set(const char *rel, const char *val)
{
	char p[128];
	snprintf(p, sizeof(p), "/proc/sys/net/ipv4/%s", rel);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = write(fd, val, strlen(val)) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

int wd_t3_beyond_ip_forward(void)
{
	return sysctl_get("ip_forward");
}

/* The node's route to dst: its device's index (0 if none) and type;
 * 0 or -errno (-ENETUNREACH: no route). */
static int route_to(uint32_t dst, int *oif, unsigned char *type)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg r;
		char attrs[64];
	} q;
	memset(&q, 0, sizeof(q));
	q.h.nlmsg_len = NLMSG_LENGTH(sizeof(q.r));
	q.h.nlmsg_type = RTM_GETROUTE;
	q.h.nlmsg_flags = NLM_F_REQUEST;
	q.r.rtm_family = AF_INET;
	q.r.rtm_dst_len = 32;
	struct rtattr *a = (struct rtattr *)((char *)&q + q.h.nlmsg_len);
	a->rta_type = RTA_DST;
	a->rta_len = RTA_LENGTH(4);
	memcpy(RTA_DATA(a), &dst, 4);
	q.h.nlmsg_len = NLMSG_ALIGN(q.h.nlmsg_len) + RTA_SPACE(4);
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int rc = -EIO;
	char rb[4096];
	ssize_t n;
	if (send(fd, &q, q.h.nlmsg_len, 0) < 0) {
		rc = -errno;
		goto out;
	}
	do
		n = recv(fd, rb, sizeof(rb), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		rc = -errno;
		goto out;
	}
	for (struct nlmsghdr *h = (struct nlmsghdr *)rb; NLMSG_OK(h, (size_t)n);
	     h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);
			rc = e->error ? e->error : -EIO;
			break;
		}
		if (h->nlmsg_type != RTM_NEWROUTE ||
		    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
			continue;
		const struct rtmsg *r = NLMSG_DATA(h);
		*type = r->rtm_type;
		*oif = 0;
		int len = (int)RTM_PAYLOAD(h);
		for (struct rtattr *x = RTM_RTA(r); RTA_OK(x, len);
		     x = RTA_NEXT(x, len))
			if (x->rta_type == RTA_OIF &&
			    RTA_PAYLOAD(x) >= sizeof(uint32_t))
				memcpy(oif, RTA_DATA(x), sizeof(*oif));
		rc = 0;
		break;
	}
out:
	close(fd);
	return rc;
}

int wd_t3_beyond_can(uint32_t dst, char *why, size_t why_len)
{
	char t[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &dst, t, sizeof(t));
	int f = wd_t3_beyond_ip_forward();
	if (f != 1) {
		if (f < 0)
			snprintf(why, why_len,
				 "net.ipv4.ip_forward cannot be read (%s)",
				 strerror(-f));
		else
			snprintf(why, why_len,
				 "this node does not forward IPv4 "
				 "(net.ipv4.ip_forward=%d)",
				 f);
		return -ENETUNREACH;
	}
	int oif = 0;
	unsigned char type = 0;
	int rc = route_to(dst, &oif, &type);
	if (rc < 0 || type != RTN_UNICAST || oif <= 0) {
		snprintf(why, why_len, "this node has no route to %s%s%s", t,
			 rc < 0 ? ": " : "", rc < 0 ? strerror(-rc) : "");
		return rc < 0 ? rc : -ENETUNREACH;
	}
	char dev[IF_NAMESIZE] = "";
	if (!if_indextoname((unsigned)oif, dev)) {
		snprintf(why, why_len, "the route to %s: device %d gone", t,
			 oif);
		return -ENODEV;
	}
	if (!strncmp(dev, "w3h", 3)) {
		snprintf(why, why_len,
			 "the route to %s leaves by '%s', another tier-3 "
			 "call's link",
			 t, dev);
		return -EACCES;
	}
	char rel[IF_NAMESIZE + 32];
	snprintf(rel, sizeof(rel), "conf/%s/forwarding", dev);
	f = sysctl_get(rel);
	if (f != 1) {
		/* IPv4 forwards by the input device: the replies arrive on
		 * the uplink and are forwarded to the sandbox from there */
		snprintf(why, why_len,
			 "the route to %s leaves by '%s', which does not "
			 "forward IPv4 (net.ipv4.conf.%s.forwarding=%d)",
			 t, dev, dev, f);
		return -ENETUNREACH;
	}
	return 0;
}

/* libnftables: one context for the process, its use serialised (its
 * cache and buffers are the context's). */
static pthread_mutex_t nft_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nft_ctx *nft;

/* Run nft commands `cmd` (one transaction): 0, or -EIO with
 * libnftables' error (first line) in `why`; output into `out` if any. */
static int nft_do(const char *cmd, char *out, size_t out_len, char *why,
		  size_t why_len)
{
	int rc = 0;
	pthread_mutex_lock(&nft_mu);
	if (!nft) {
		nft = nft_ctx_new(NFT_CTX_DEFAULT);
		if (nft &&
		    (nft_ctx_buffer_output(nft) || nft_ctx_buffer_error(nft))) {
			nft_ctx_free(nft);
			nft = NULL;
		}
	}
	if (!nft) {
		snprintf(why, why_len, "libnftables: no context");
		rc = -ENOMEM;
	} else if (nft_run_cmd_from_buffer(nft, cmd) != 0) {
		const char *e = nft_ctx_get_error_buffer(nft);
		snprintf(why, why_len, "%.*s", (int)strcspn(e ? e : "", "\n"),
			 e ? e : "");
		if (!why[0])
			snprintf(why, why_len, "nftables refused '%.60s'", cmd);
		rc = -EIO;
	}
	if (nft) {
		const char *o = nft_ctx_get_output_buffer(nft);
		if (out && out_len)
			snprintf(out, out_len, "%s", o ? o : "");
		/* the error buffer is read (and so reset) for the next run */
		nft_ctx_get_error_buffer(nft);
	}
	pthread_mutex_unlock(&nft_mu);
	return rc;
}

int wd_t3_beyond_nft_probe(char *why, size_t why_len)
{
	return nft_do("list tables ip", NULL, 0, why, why_len);
}

/* Tables of calls whose link is gone (a supervisor that died before
 * deleting its table): each masquerades an address no call holds. */
static void sweep_stale(void)
{
	char why[160];
	char *out = malloc(16384);
	if (!out)
		return;
	if (nft_do("list tables ip", out, 16384, why, sizeof(why)) == 0) {
		char *sv = NULL;
		for (char *ln = strtok_r(out, "\n", &sv); ln;
		     ln = strtok_r(NULL, "\n", &sv)) {
			/* only names as t3link.c makes them: w3h + 10 hex */
			char hex[11] = "", dev[IF_NAMESIZE], cmd[96];
			int end = 0;
			if (sscanf(ln, "table ip warden_w3h%10[0-9a-f]%n", hex,
				   &end) != 1 ||
			    strlen(hex) != 10 || ln[end])
				continue;
			snprintf(dev, sizeof(dev), "w3h%s", hex);
			if (if_nametoindex(dev))
				continue;
			snprintf(cmd, sizeof(cmd),
				 "delete table ip warden_%s\n", dev);
			if (nft_do(cmd, NULL, 0, why, sizeof(why)) == 0)
				wd_info("tier 3: removed table warden_%s "
					"(its link is gone)",
					dev);
		}
	}
	free(out);
}

int wd_t3_beyond_on(const struct wd_t3link *l, struct wd_err *err)
{
	sweep_stale();
	char sbx[INET_ADDRSTRLEN], why[256];
	inet_ntop(AF_INET, &l->sbx, sbx, sizeof(sbx));
	/* the sandbox's address leaves the node as the node's; to another
	 * call's link it is never masqueraded (that link's egress program
	 * drops it: no call reaches another) */
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "add table ip warden_%s\n"
		 "add chain ip warden_%s out { type nat hook postrouting "
		 "priority 100; policy accept; }\n"
		 "add rule ip warden_%s out ip saddr %s oifname != \"w3h*\" "
		 "masquerade\n",
		 l->host_name, l->host_name, l->host_name, sbx);
	int rc = nft_do(cmd, NULL, 0, why, sizeof(why));
	if (rc < 0)
		return wd_err_set(
		    err, rc,
		    "tier 3 beyond the node: cannot make nftables "
		    "table warden_%s (source NAT of the "
		    "sandbox's address): %s; refused",
		    l->host_name, why);
	char rel[IF_NAMESIZE + 32];
	snprintf(rel, sizeof(rel), "conf/%s/forwarding", l->host_name);
	if ((rc = sysctl_set(rel, "1")) < 0) {
		wd_t3_beyond_off(l);
		return wd_err_set(err, rc,
				  "tier 3 beyond the node: "
				  "net.ipv4.conf.%s.forwarding: %s; refused",
				  l->host_name, strerror(-rc));
	}
	return 0;
}

void wd_t3_beyond_off(const struct wd_t3link *l)
{
	char rel[IF_NAMESIZE + 32], cmd[96], why[256];
	snprintf(rel, sizeof(rel), "conf/%s/forwarding", l->host_name);
	sysctl_set(rel, "0"); /* -ENOENT: the link went first */
	snprintf(cmd, sizeof(cmd), "delete table ip warden_%s\n", l->host_name);
	if (nft_do(cmd, NULL, 0, why, sizeof(why)) < 0)
		wd_warn("tier 3: nftables table warden_%s: %s", l->host_name,
			why);
}

bool wd_t3_beyond_describe(char *out, size_t len)
{
	char why[256];
	int f = wd_t3_beyond_ip_forward();
	if (f != 1) {
		snprintf(out, len,
			 "beyond the node: nothing, this node does not forward "
			 "IPv4 (net.ipv4.ip_forward=%d%s%s): a rule wholly "
			 "beyond it is refused at call start, an answer beyond "
			 "it withheld (dns.answer); warden never turns "
			 "forwarding on for the node",
			 f, f < 0 ? ", unreadable: " : "",
			 f < 0 ? strerror(-f) : "");
		return false;
	}
	if (wd_t3_beyond_nft_probe(why, sizeof(why)) < 0) {
		snprintf(out, len,
			 "beyond the node: nothing, nftables is unusable (%s): "
			 "the source NAT a call beyond the node needs cannot "
			 "be made, so such a rule is refused and such an "
			 "answer withheld",
			 why);
		return false;
	}
	snprintf(out, len,
		 "beyond the node: what a rule or answer allows, since this "
		 "node forwards IPv4 (net.ipv4.ip_forward=1): forwarding on "
		 "the call's host end only and source NAT to the node's "
		 "address (nftables table warden_<host end>, made and deleted "
		 "with the call); the device of the route to a destination "
		 "must forward too (net.ipv4.conf.<dev>.forwarding: replies "
		 "arrive there), else the rule is refused, the answer "
		 "withheld");
	return true;
}
