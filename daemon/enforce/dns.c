/* DNS for names in network.allow: the wire format of a query and its
 * answer (RFC 1035), the name rule, address kinds, the upstream lookup and
 * the per-query decision. See dns.h. */
#include "enforce/dns.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- wire format ---- */

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* A name at msg+*off into out (lower case, dotted, no trailing dot);
 * compression pointers followed (at most 32, backwards only). *off moves
 * past the name as written. 0 / -EBADMSG. */
static int read_name(const uint8_t *msg, size_t len, size_t *off, char *out,
		     size_t cap)
{
	size_t o = *off, w = 0, end = 0;
	int jumps = 0;
	for (;;) {
		if (o >= len)
			return -EBADMSG;
		uint8_t l = msg[o];
		if ((l & 0xc0) == 0xc0) {
			if (o + 1 >= len || ++jumps > 32)
				return -EBADMSG;
			size_t to = (size_t)(l & 0x3f) << 8 | msg[o + 1];
			if (!end)
				end = o + 2;
			if (to >= o)
				return -EBADMSG; /* only backwards: no loop */
			o = to;
			continue;
		}
		if (l & 0xc0)
			return -EBADMSG;
		o++;
		if (!l)
			break;
		if (o + l > len || w + l + 2 > cap)
			return -EBADMSG;
		if (w)
			out[w++] = '.';
		for (uint8_t i = 0; i < l; i++) {
			char c = (char)msg[o + i];
			/* a host name's label: letters, digits, '-', '_'.
			 * Anything else ('.', '\\', NUL, escapes) would
			 * mean another name to the resolver library that asks
			 * upstream
			 * ("x\\.a.example" is the label "x.a"), or bytes a
			 * terminal reads */
			if (!((c >= 'a' && c <= 'z') ||
			      (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '-' || c == '_'))
				return -EBADMSG;
			out[w++] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
		}
		o += l;
	}
	out[w] = 0;
	*off = end ? end : o;
	return 0;
}

int wd_dns_parse_query(const uint8_t *msg, size_t len, struct wd_dns_query *q)
{
	memset(q, 0, sizeof(*q));
	if (len < 12)
		return -1;
	q->id = get16(msg);
	uint16_t fl = get16(msg + 2);
	q->rd = fl & 0x0100;
	if (fl & 0x8000)
		return -1; /* a response: never answered (no reflection) */
	if (((fl >> 11) & 0xf) != 0)
		return WD_DNS_NOTIMP;
	if (get16(msg + 4) != 1)
		return WD_DNS_FORMERR; /* one question, as every resolver */
	size_t off = 12;
	if (read_name(msg, len, &off, q->name, sizeof(q->name)) ||
	    off + 4 > len)
		return WD_DNS_FORMERR;
	q->qtype = get16(msg + off);
	q->qclass = get16(msg + off + 2);
	q->qend = off + 4;
	return 0;
}

size_t wd_dns_answer(const struct wd_dns_query *q, const uint8_t *qmsg,
		     int rcode, const struct wd_dns_rr *rrs, int n,
		     uint8_t *out, size_t cap)
{
	size_t qlen = q->qend >= 12 ? q->qend : 12;
	if (qlen > cap)
		return 0;
	memcpy(out, qmsg, qlen);
	/* QR, opcode 0, AA (warden is the authority on what a call may
	 * resolve), RD echoed, RA */
	put16(out + 2, (uint16_t)(0x8000 | 0x0400 | (q->rd ? 0x0100 : 0) |
				  0x0080 | (rcode & 0xf)));
	put16(out + 4, q->qend >= 12 ? 1 : 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	size_t w = qlen;
	int an = 0;
	for (int i = 0; i < n && q->qend >= 12; i++) {
		size_t rl = rrs[i].type == WD_DNS_A ? 4 : 16;
		if (w + 12 + rl > cap) {
			/* as many as fit, and TC so that the asker asks again
			 * over TCP for all of them */
			out[2] |= 0x02;
			break;
		}
		put16(out + w, 0xc00c); /* the question's name */
		put16(out + w + 2, rrs[i].type);
		put16(out + w + 4, 1); /* IN */
		uint32_t ttl = rrs[i].ttl;
		out[w + 6] = (uint8_t)(ttl >> 24);
		out[w + 7] = (uint8_t)(ttl >> 16);
		out[w + 8] = (uint8_t)(ttl >> 8);
		out[w + 9] = (uint8_t)ttl;
		put16(out + w + 10, (uint16_t)rl);
		memcpy(out + w + 12, rl == 4 ? rrs[i].addr + 12 : rrs[i].addr,
		       rl);
		w += 12 + rl;
		an++;
	}
	put16(out + 6, (uint16_t)an);
	return w;
}

/* ---- names ---- */

bool wd_dns_name_match(const char *pattern, const char *name)
{
	if (pattern[0] == '*' && pattern[1] == '.') {
		const char *suffix = pattern + 1; /* ".suffix" */
		size_t sl = strlen(suffix), nl = strlen(name);
		if (nl <= sl || strcasecmp(name + nl - sl, suffix))
			return false;
		/* exactly one label before it */
		return !memchr(name, '.', nl - sl);
	}
	return !strcasecmp(pattern, name);
}

/* ---- addresses ---- */

static bool in4(const uint8_t a[16], uint32_t net, int bits)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};
	if (memcmp(a, mapped, 12))
		return false;
	uint32_t v = (uint32_t)a[12] << 24 | (uint32_t)a[13] << 16 |
		     (uint32_t)a[14] << 8 | a[15];
	uint32_t mask = bits ? ~0u << (32 - bits) : 0;
	return (v & mask) == (net & mask);
}

static enum wd_addr_kind kind_of(const uint8_t a[16], int depth);

/* The IPv4 address an IPv6 one carries to a v4 host (NAT64's
 * 64:ff9b::/96 and 64:ff9b:1::/48, 6to4's 2002::/16): judged as that
 * address (a NAT gateway delivers it to the private network behind). */
static bool embedded_v4(const uint8_t a[16], uint8_t v4[16])
{
	static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
	memset(v4, 0, 16);
	v4[10] = v4[11] = 0xff;
	if (!memcmp(a, nat64, 12)) {
		memcpy(v4 + 12, a + 12, 4);
		return true;
	}
	if (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b &&
	    a[4] == 0x00 && a[5] == 0x01) {
		/* RFC 8215 local-use prefix /48: the v4 address sits at
		 * bits 48..79 of an RFC 6052 /48 (octet 8 is reserved) */
		v4[12] = a[6];
		v4[13] = a[7];
		v4[14] = a[9];
		v4[15] = a[10];
		return true;
	}
	if (a[0] == 0x20 && a[1] == 0x02) { /* 2002:AABB:CCDD::/48 */
		memcpy(v4 + 12, a + 2, 4);
		return true;
	}
	return false;
}

enum wd_addr_kind wd_addr_kind_of(const uint8_t a[16])
{
	return kind_of(a, 0);
}

static enum wd_addr_kind kind_of(const uint8_t a[16], int depth)
{
	static const uint8_t zero[16], one[16] = {[15] = 1};
	/* cloud platforms' own services on a fixed address: 169.254.169.254
	 * (AWS, GCP, Azure, OpenStack), Azure's 168.63.129.16 */
	if (in4(a, 0xa9fea9fe, 32) || in4(a, 0xa83f8110, 32))
		return WD_ADDR_METADATA;
	if (in4(a, 0x7f000000, 8))
		return WD_ADDR_LOOPBACK;
	if (in4(a, 0x0a000000, 8) || in4(a, 0xac100000, 12) ||
	    in4(a, 0xc0a80000, 16))
		return WD_ADDR_PRIVATE;
	if (in4(a, 0xa9fe0000, 16))
		return WD_ADDR_LINK_LOCAL;
	if (in4(a, 0x00000000, 8))
		return WD_ADDR_UNSPECIFIED;
	if (in4(a, 0x64400000, 10))
		return WD_ADDR_SHARED;
	/* multicast 224/4, reserved 240/4 and the broadcast address */
	if (in4(a, 0xe0000000, 4))
		return WD_ADDR_MULTICAST;
	if (in4(a, 0xf0000000, 4))
		return WD_ADDR_RESERVED;
	if (!memcmp(a, zero, 16))
		return WD_ADDR_UNSPECIFIED;
	if (!memcmp(a, one, 16))
		return WD_ADDR_LOOPBACK;
	/* fd00:ec2::254, AWS's IPv6 metadata address */
	static const uint8_t md6[16] = {0xfd, 0x00,	   0x0e,
					0xc2, [14] = 0x02, [15] = 0x54};
	if (!memcmp(a, md6, 16))
		return WD_ADDR_METADATA;
	if ((a[0] & 0xfe) == 0xfc)
		return WD_ADDR_PRIVATE; /* ULA fc00::/7 */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return WD_ADDR_LINK_LOCAL; /* fe80::/10 */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
		return WD_ADDR_PRIVATE; /* site-local fec0::/10 (deprecated) */
	if (a[0] == 0xff)
		return WD_ADDR_MULTICAST; /* ff00::/8 */
	uint8_t v4[16];
	if (depth == 0 && embedded_v4(a, v4)) {
		enum wd_addr_kind k = kind_of(v4, 1);
		if (k != WD_ADDR_PUBLIC)
			return k;
	}
	return WD_ADDR_PUBLIC;
}

const char *wd_addr_kind_name(enum wd_addr_kind k)
{
	switch (k) {
	case WD_ADDR_PUBLIC:
		return "public";
	case WD_ADDR_LOOPBACK:
		return "loopback";
	case WD_ADDR_PRIVATE:
		return "private";
	case WD_ADDR_LINK_LOCAL:
		return "link-local";
	case WD_ADDR_METADATA:
		return "the cloud metadata address";
	case WD_ADDR_UNSPECIFIED:
		return "unspecified";
	case WD_ADDR_SHARED:
		return "shared (CGNAT)";
	case WD_ADDR_MULTICAST:
		return "multicast or broadcast";
	case WD_ADDR_RESERVED:
		return "reserved";
	}
	return "?";
}

void wd_addr_text(const uint8_t a[16], char *buf, size_t n)
{
	if (in4(a, 0, 0))
		inet_ntop(AF_INET, a + 12, buf, (socklen_t)n);
	else
		inet_ntop(AF_INET6, a, buf, (socklen_t)n);
}

/* ---- upstream ---- */

int wd_dns_upstream_parse(const char *text, struct wd_dns_upstream *u,
			  struct wd_err *err)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", text);
	char *c = strrchr(buf, ':');
	char *end = NULL;
	unsigned long port = c ? strtoul(c + 1, &end, 10) : 0;
	struct in_addr a;
	if (!c || !end || *end || c[1] == 0 || port == 0 || port > 65535 ||
	    (*c = 0, inet_pton(AF_INET, buf, &a) != 1))
		return wd_err_set(err, -EINVAL,
				  "DNS upstream '%s': want IPV4:PORT, e.g. "
				  "127.0.0.1:5353",
				  text);
	memcpy(u->server4, &a, 4);
	u->server_port = (uint16_t)port;
	u->have_server = true;
	return 0;
}

/* /etc/hosts: the addresses of name of the wanted family. -ENOENT when
 * the name is not there at all. */
static int hosts_lookup(const struct wd_dns_upstream *u, const char *path,
			const char *name, uint16_t qtype, struct wd_dns_rr *out,
			int max)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	char line[1024];
	int n = 0;
	bool seen = false;
	while (fgets(line, sizeof(line), f)) {
		char *h = strchr(line, '#');
		if (h)
			*h = 0;
		char *save = NULL, *addr = strtok_r(line, " \t\r\n", &save);
		if (!addr)
			continue;
		bool match = false;
		for (char *t; (t = strtok_r(NULL, " \t\r\n", &save));)
			if (!strcasecmp(t, name))
				match = true;
		if (!match)
			continue;
		uint8_t a[16] = {0};
		uint16_t type;
		if (inet_pton(AF_INET, addr, a + 12) == 1) {
			a[10] = a[11] = 0xff;
			type = WD_DNS_A;
		} else if (inet_pton(AF_INET6, addr, a) == 1) {
			type = WD_DNS_AAAA;
		} else {
			continue;
		}
		seen = true;
		if (type != qtype || n >= max)
			continue;
		out[n].type = type;
		out[n].ttl = u->hosts_ttl ? u->hosts_ttl : 60;
		memcpy(out[n].addr, a, 16);
		n++;
	}
	fclose(f);
	return seen ? n : -ENOENT;
}

/* The A/AAAA records for name in a response (CNAME chains followed by
 * taking every record of the wanted type: the resolver answered for
 * name). */
int wd_dns_parse_answers(const uint8_t *msg, size_t len, uint16_t qtype,
			 struct wd_dns_rr *out, int max)
{
	if (len < 12)
		return -EBADMSG;
	int rcode = get16(msg + 2) & 0xf;
	if (rcode == WD_DNS_NXDOMAIN)
		return -ENOENT;
	if (rcode != WD_DNS_NOERROR)
		return -EAGAIN;
	int qd = get16(msg + 4), an = get16(msg + 6);
	size_t off = 12;
	char name[256];
	for (int i = 0; i < qd; i++) {
		if (read_name(msg, len, &off, name, sizeof(name)) ||
		    off + 4 > len)
			return -EBADMSG;
		off += 4;
	}
	int n = 0;
	for (int i = 0; i < an; i++) {
		if (read_name(msg, len, &off, name, sizeof(name)) ||
		    off + 10 > len)
			return -EBADMSG;
		uint16_t type = get16(msg + off);
		uint32_t ttl = (uint32_t)msg[off + 4] << 24 |
			       (uint32_t)msg[off + 5] << 16 |
			       (uint32_t)msg[off + 6] << 8 | msg[off + 7];
		uint16_t rl = get16(msg + off + 8);
		off += 10;
		if (off + rl > len)
			return -EBADMSG;
		if (type == qtype && n < max &&
		    ((type == WD_DNS_A && rl == 4) ||
		     (type == WD_DNS_AAAA && rl == 16))) {
			memset(&out[n], 0, sizeof(out[n]));
			out[n].type = type;
			out[n].ttl = ttl > 86400 ? 86400 : ttl;
			if (rl == 4) {
				out[n].addr[10] = out[n].addr[11] = 0xff;
				memcpy(out[n].addr + 12, msg + off, 4);
			} else {
				memcpy(out[n].addr, msg + off, 16);
			}
			n++;
		}
		off += rl;
	}
	return n;
}

int wd_dns_lookup(const struct wd_dns_upstream *u, const char *name,
		  uint16_t qtype, struct wd_dns_rr *out, int max,
		  struct wd_err *err)
{
	if (u->zone_path[0]) {
		int h = hosts_lookup(u, u->zone_path, name, qtype, out, max);
		if (h >= 0)
			return h;
	}
	if (!u->have_server) {
		int h = hosts_lookup(
		    u, u->hosts_path ? u->hosts_path : "/etc/hosts", name,
		    qtype, out, max);
		if (h >= 0)
			return h;
	}
	struct __res_state st;
	memset(&st, 0, sizeof(st));
	if (res_ninit(&st))
		return wd_err_set(err, -EAGAIN,
				  "no resolver configuration (resolv.conf)");
	if (u->have_server) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_port = htons(u->server_port)};
		memcpy(&sin.sin_addr, u->server4, 4);
		st.nscount = 1;
		st.nsaddr_list[0] = sin;
	}
	/* bounded: a silent upstream costs the asking call at most ~8 s (its
	 * resolver is one thread) */
	st.retrans = 2;
	st.retry = 2;
	/* the name as given: no search list, no ndots games */
	st.options &= ~(unsigned long)(RES_DEFNAMES | RES_DNSRCH);
	uint8_t ans[4096];
	int r = res_nquery(&st, name, ns_c_in, qtype, ans, sizeof(ans));
	int e = r < 0 ? st.res_h_errno : 0;
	res_nclose(&st);
	if (r < 0) {
		if (e == HOST_NOT_FOUND)
			return -ENOENT;
		if (e == NO_DATA)
			return 0;
		return wd_err_set(err, -EAGAIN, "upstream lookup of %s: %s",
				  name, hstrerror(e));
	}
	int n = wd_dns_parse_answers(ans, (size_t)r, qtype, out, max);
	if (n == -EBADMSG)
		return wd_err_set(err, -EAGAIN,
				  "upstream lookup of %s: a malformed answer",
				  name);
	return n;
}

/* ---- the decision ---- */

/* Is a in one of the ranges of network.allow_private: where a name's
 * answer may fall although not public, because the manifest lists it. */
static bool listed(const struct wd_net_rule *rules, int n, const uint8_t a[16])
{
	for (int i = 0; i < n; i++) {
		const struct wd_net_rule *r = &rules[i];
		if (r->needs_resolve)
			continue;
		int bits = r->prefix, k = 0;
		for (; k < bits; k++) {
			int m = 0x80 >> (k % 8);
			if ((a[k / 8] & m) != (r->addr[k / 8] & m))
				break;
		}
		if (k == bits)
			return true;
	}
	return false;
}

bool wd_dns_would_look_up(const struct wd_net_rule *rules, int n,
			  const struct wd_dns_query *q)
{
	if (q->qclass != 1 || (q->qtype != WD_DNS_A && q->qtype != WD_DNS_AAAA))
		return false;
	for (int i = 0; i < n; i++)
		if (rules[i].needs_resolve &&
		    wd_dns_name_match(rules[i].host, q->name))
			return true;
	return false;
}

int wd_dns_lookup_cached(struct wd_dns_cache *c, uint64_t now_ns,
			 const struct wd_dns_upstream *u, const char *name,
			 uint16_t qtype, struct wd_dns_rr *out, int max,
			 struct wd_err *err)
{
	if (!c)
		return wd_dns_lookup(u, name, qtype, out, max, err);
	/* the name and type's entry (one at most), else the oldest */
	struct wd_dns_cached *e = &c->e[c->next];
	bool found = false;
	for (int i = 0; i < WD_DNS_CACHE_N && !found; i++) {
		if (c->e[i].exp_ns && c->e[i].qtype == qtype &&
		    !strcasecmp(c->e[i].name, name)) {
			e = &c->e[i];
			found = true;
		}
	}
	if (found && now_ns < e->exp_ns) {
		uint64_t kept_s = (now_ns - e->at_ns) / 1000000000ull;
		int k = e->n < max ? e->n : max;
		for (int j = 0; j < k; j++) {
			out[j] = e->rr[j];
			out[j].ttl = out[j].ttl > kept_s + 1
					 ? out[j].ttl - (uint32_t)kept_s
					 : 1;
		}
		c->hits++;
		return k;
	}
	if (found)
		e->exp_ns = 0; /* expired: its slot takes the new answer */
	int m = wd_dns_lookup(u, name, qtype, out, max, err);
	uint32_t ttl = m > 0 ? WD_DNS_CACHE_MAX_S : 0;
	for (int j = 0; j < m; j++)
		if (out[j].ttl < ttl)
			ttl = out[j].ttl;
	if (m > 0 && ttl > 0 && m <= WD_DNS_MAX_RR &&
	    strlen(name) < sizeof(e->name)) {
		if (!found)
			c->next = (c->next + 1) % WD_DNS_CACHE_N;
		wd_strlcpy(e->name, name, sizeof(e->name));
		e->qtype = qtype;
		e->n = m;
		memcpy(e->rr, out, (size_t)m * sizeof(out[0]));
		e->at_ns = now_ns;
		e->exp_ns = now_ns + (uint64_t)ttl * 1000000000ull;
	}
	return m;
}

void wd_dns_decide(const struct wd_net_rule *rules, int n,
		   const struct wd_net_rule *priv, int npriv,
		   const struct wd_dns_upstream *u, struct wd_dns_cache *c,
		   const struct wd_dns_query *q, struct wd_dns_decision *d)
{
	memset(d, 0, sizeof(*d));
	bool any_port = false;
	for (int i = 0; i < n; i++) {
		if (!rules[i].needs_resolve ||
		    !wd_dns_name_match(rules[i].host, q->name))
			continue;
		if (!rules[i].port)
			any_port = true;
		bool have = false;
		for (int k = 0; k < d->nports; k++)
			have |= d->ports[k] == rules[i].port;
		if (!have && d->nports < (int)WD_ARRAY_SIZE(d->ports))
			d->ports[d->nports++] = rules[i].port;
	}
	if (!d->nports) {
		d->rcode = WD_DNS_NXDOMAIN;
		d->denied = true;
		snprintf(d->why, sizeof(d->why),
			 "name not in network.allow: NXDOMAIN");
		return;
	}
	if (any_port) {
		d->ports[0] = 0;
		d->nports = 1;
	}
	if (q->qclass != 1 ||
	    (q->qtype != WD_DNS_A && q->qtype != WD_DNS_AAAA)) {
		/* an allowed name, another record type: no data (nothing
		 * but addresses leaves for a call) */
		d->rcode = WD_DNS_NOERROR;
		return;
	}
	struct wd_dns_rr got[WD_DNS_MAX_RR];
	struct wd_err err = {0};
	int m = wd_dns_lookup_cached(c, wd_now_ns(), u, q->name, q->qtype, got,
				     WD_DNS_MAX_RR, &err);
	if (m == -ENOENT) {
		d->rcode = WD_DNS_NXDOMAIN;
		return; /* the name does not exist: not a denial */
	}
	if (m < 0) {
		d->rcode = WD_DNS_SERVFAIL;
		snprintf(d->why, sizeof(d->why), "%s", err.msg);
		return;
	}
	int refused = 0;
	for (int i = 0; i < m; i++) {
		enum wd_addr_kind k = wd_addr_kind_of(got[i].addr);
		if (k != WD_ADDR_PUBLIC && !listed(priv, npriv, got[i].addr)) {
			if (!refused++) {
				char at[64];
				wd_addr_text(got[i].addr, at, sizeof(at));
				snprintf(d->why, sizeof(d->why),
					 "answer %s is %s: not in "
					 "network.allow_private",
					 at, wd_addr_kind_name(k));
			}
			continue;
		}
		d->rr[d->n++] = got[i];
	}
	d->denied = refused > 0;
	d->rcode = refused && !d->n ? WD_DNS_REFUSED : WD_DNS_NOERROR;
}
