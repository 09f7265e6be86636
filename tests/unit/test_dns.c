/* Names in network.allow (enforce/dns.c): the query and answer wire format
 * (a reply glibc's resolver takes: checked through res_nquery against a
 * server answering with these functions), the one-label wildcard, address
 * kinds, /etc/hosts and an upstream server, and the decision: names not
 * allowed NXDOMAIN, private answers refused unless their range is
 * listed. */
#include "enforce/dns.h"
#include "policy/manifest.h"
#include "t.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <resolv.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* an upstream on loopback: up.example -> 203.0.113.7 (TTL 7), AAAA
 * 2001:db8::7; priv.example -> 10.1.2.3; meta.example -> 169.254.169.254;
 * every other name NXDOMAIN */
static int up_fd = -1;
static volatile int up_stop;

static int up_queries; /* queries the upstream answered */

static int asked(void)
{
	return __atomic_load_n(&up_queries, __ATOMIC_SEQ_CST);
}

static void *upstream(void *arg)
{
	(void)arg;
	uint8_t b[1500], out[1500];
	while (!up_stop) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n =
		    recvfrom(up_fd, b, sizeof(b), 0, (void *)&from, &fl);
		if (n <= 0)
			continue;
		struct wd_dns_query q;
		if (wd_dns_parse_query(b, (size_t)n, &q))
			continue;
		__atomic_add_fetch(&up_queries, 1, __ATOMIC_SEQ_CST);
		struct wd_dns_rr rr = {.ttl = 7};
		int rc = WD_DNS_NOERROR, k = 0;
		if (!strncmp(q.name, "many", 4) && q.qtype == WD_DNS_A) {
			rr.type = WD_DNS_A; /* many0.example, many1... */
			rr.addr[10] = rr.addr[11] = 0xff;
			inet_pton(AF_INET, "203.0.113.9", rr.addr + 12);
			k = 1;
		} else if (!strcmp(q.name, "zero.example") &&
			   q.qtype == WD_DNS_A) {
			rr.type = WD_DNS_A; /* TTL 0: never kept */
			rr.ttl = 0;
			rr.addr[10] = rr.addr[11] = 0xff;
			inet_pton(AF_INET, "203.0.113.8", rr.addr + 12);
			k = 1;
		} else if (!strcmp(q.name, "up.example") &&
			   q.qtype == WD_DNS_A) {
			rr.type = WD_DNS_A;
			rr.addr[10] = rr.addr[11] = 0xff;
			inet_pton(AF_INET, "203.0.113.7", rr.addr + 12);
			k = 1;
		} else if (!strcmp(q.name, "up.example")) {
			rr.type = WD_DNS_AAAA;
			inet_pton(AF_INET6, "2001:db8::7", rr.addr);
			k = q.qtype == WD_DNS_AAAA;
		} else if (!strcmp(q.name, "priv.example") &&
			   q.qtype == WD_DNS_A) {
			rr.type = WD_DNS_A;
			rr.addr[10] = rr.addr[11] = 0xff;
			inet_pton(AF_INET, "10.1.2.3", rr.addr + 12);
			k = 1;
		} else if (!strcmp(q.name, "meta.example") &&
			   q.qtype == WD_DNS_A) {
			rr.type = WD_DNS_A;
			rr.addr[10] = rr.addr[11] = 0xff;
			inet_pton(AF_INET, "169.254.169.254", rr.addr + 12);
			k = 1;
		} else if (strcmp(q.name, "priv.example") &&
			   strcmp(q.name, "meta.example")) {
			rc = WD_DNS_NXDOMAIN;
		}
		size_t w = wd_dns_answer(&q, b, rc, &rr, k, out, sizeof(out));
		sendto(up_fd, out, w, 0, (void *)&from, fl);
	}
	return NULL;
}

static struct wd_net_rule rule(const char *text)
{
	struct wd_net_rule r;
	struct wd_err err = {0};
	memset(&r, 0, sizeof(r));
	int rc = wd_net_rule_parse(text, &r, &err);
	T_OK(rc == 0, "rule-parse", "'%s': %s", text, err.msg);
	return r;
}

int main(void)
{
	/* the wildcard: exactly one label */
	T_OK(wd_dns_name_match("*.svc.internal", "search.svc.internal"),
	     "wild-one-label", "match");
	T_OK(!wd_dns_name_match("*.svc.internal", "a.b.svc.internal"),
	     "wild-not-two-labels", "no match");
	T_OK(!wd_dns_name_match("*.svc.internal", "svc.internal"),
	     "wild-not-suffix-itself", "no match");
	T_OK(!wd_dns_name_match("*.svc.internal", "xsvc.internal"),
	     "wild-label-boundary", "no match");
	T_OK(wd_dns_name_match("Search-Svc.Internal", "search-svc.internal"),
	     "exact-case", "match");

	/* address kinds */
	struct {
		const char *a;
		enum wd_addr_kind k;
	} kinds[] = {
	    {"127.0.0.1", WD_ADDR_LOOPBACK},
	    {"10.9.8.7", WD_ADDR_PRIVATE},
	    {"172.31.0.1", WD_ADDR_PRIVATE},
	    {"172.32.0.1", WD_ADDR_PUBLIC},
	    {"192.168.1.1", WD_ADDR_PRIVATE},
	    {"169.254.169.254", WD_ADDR_METADATA},
	    {"169.254.1.1", WD_ADDR_LINK_LOCAL},
	    {"100.64.0.1", WD_ADDR_SHARED},
	    {"0.0.0.0", WD_ADDR_UNSPECIFIED},
	    {"8.8.8.8", WD_ADDR_PUBLIC},
	    {"::1", WD_ADDR_LOOPBACK},
	    {"fd12::1", WD_ADDR_PRIVATE},
	    {"fe80::1", WD_ADDR_LINK_LOCAL},
	    {"fd00:ec2::254", WD_ADDR_METADATA},
	    {"::ffff:127.0.0.1", WD_ADDR_LOOPBACK},
	    {"2001:db8::1", WD_ADDR_PUBLIC},
	    /* v4 carried in v6 is judged as that v4 */
	    {"64:ff9b::10.1.2.3", WD_ADDR_PRIVATE},
	    {"64:ff9b::169.254.169.254", WD_ADDR_METADATA},
	    {"64:ff9b::8.8.8.8", WD_ADDR_PUBLIC},
	    {"64:ff9b:1:a01:2:300::", WD_ADDR_PRIVATE}, /* 10.1.2.3 */
	    {"2002:a01:203::1", WD_ADDR_PRIVATE},	/* 6to4 of 10.1.2.3 */
	    {"2002:7f00:1::1", WD_ADDR_LOOPBACK},
	    {"168.63.129.16", WD_ADDR_METADATA},
	    {"224.0.0.251", WD_ADDR_MULTICAST},
	    {"239.255.255.250", WD_ADDR_MULTICAST},
	    {"ff02::fb", WD_ADDR_MULTICAST},
	    {"255.255.255.255", WD_ADDR_RESERVED},
	    {"240.0.0.1", WD_ADDR_RESERVED},
	    {"fec0::1", WD_ADDR_PRIVATE},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(kinds); i++) {
		uint8_t a[16] = {0};
		if (strchr(kinds[i].a, ':')) {
			inet_pton(AF_INET6, kinds[i].a, a);
		} else {
			a[10] = a[11] = 0xff;
			inet_pton(AF_INET, kinds[i].a, a + 12);
		}
		T_OK(wd_addr_kind_of(a) == kinds[i].k, "addr-kind", "%s: %s",
		     kinds[i].a, wd_addr_kind_name(wd_addr_kind_of(a)));
	}

	/* a query as glibc writes it, and malformed ones */
	uint8_t qm[512];
	int ql = res_mkquery(0, "Search-Svc.Internal", 1, WD_DNS_A, NULL, 0,
			     NULL, qm, sizeof(qm));
	struct wd_dns_query q;
	T_OK(ql > 0 && wd_dns_parse_query(qm, (size_t)ql, &q) == 0 &&
		 !strcmp(q.name, "search-svc.internal") && q.qtype == WD_DNS_A,
	     "parse-query", "name '%s' type %u", q.name, q.qtype);
	T_OK(wd_dns_parse_query(qm, 11, &q) == -1, "parse-short", "-1");
	uint8_t bad[64];
	memcpy(bad, qm, 12);
	bad[12] = 0xc0; /* a pointer to itself */
	bad[13] = 12;
	T_OK(wd_dns_parse_query(bad, 18, &q) == WD_DNS_FORMERR,
	     "parse-pointer-loop", "FORMERR");
	/* a label that is no host name's: "x\\.a" is one label to the
	 * stub that would ask upstream, and bytes a terminal reads */
	uint8_t esc[64];
	int el = res_mkquery(0, "x\\.a.wild.example", 1, WD_DNS_A, NULL, 0,
			     NULL, esc, sizeof(esc));
	T_OK(el > 0 &&
		 wd_dns_parse_query(esc, (size_t)el, &q) == WD_DNS_FORMERR,
	     "parse-escaped-label", "FORMERR for %d bytes", el);
	memcpy(bad, qm, (size_t)ql);
	bad[2] |= 0x80; /* a response: never answered */
	T_OK(wd_dns_parse_query(bad, (size_t)ql, &q) == -1,
	     "parse-no-reflection", "-1");

	/* the upstream */
	up_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t sl = sizeof(sin);
	struct timeval tv = {0, 200000};
	setsockopt(up_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	T_OK(bind(up_fd, (void *)&sin, sizeof(sin)) == 0 &&
		 getsockname(up_fd, (void *)&sin, &sl) == 0,
	     "upstream-bind", "bound");
	pthread_t th;
	pthread_create(&th, NULL, upstream, NULL);
	char spec[64];
	snprintf(spec, sizeof(spec), "127.0.0.1:%u", ntohs(sin.sin_port));
	struct wd_dns_upstream u = {0};
	struct wd_err err = {0};
	T_OK(wd_dns_upstream_parse(spec, &u, &err) == 0, "upstream-parse", "%s",
	     err.msg);
	T_OK(wd_dns_upstream_parse("localhost:53", &(struct wd_dns_upstream){0},
				   &err) == -EINVAL,
	     "upstream-parse-bad", "%s", err.msg);

	struct wd_dns_rr rr[4];
	int n = wd_dns_lookup(&u, "up.example", WD_DNS_A, rr, 4, &err);
	char at[64] = "";
	if (n > 0)
		wd_addr_text(rr[0].addr, at, sizeof(at));
	T_OK(n == 1 && rr[0].ttl == 7 && !strcmp(at, "203.0.113.7"), "lookup-a",
	     "n %d ttl %u %s (%s)", n, n > 0 ? rr[0].ttl : 0, at, err.msg);
	n = wd_dns_lookup(&u, "up.example", WD_DNS_AAAA, rr, 4, &err);
	T_OK(n == 1 && rr[0].type == WD_DNS_AAAA, "lookup-aaaa", "n %d", n);
	n = wd_dns_lookup(&u, "nope.example", WD_DNS_A, rr, 4, &err);
	T_OK(n == -ENOENT, "lookup-nxdomain", "n %d", n);

	/* a call's answers kept for their TTL (wd_dns_cache): asked
	 * upstream once, then from the cache with the TTL lowered by the
	 * time kept; by name without case, per type; gone at the TTL's end;
	 * NXDOMAIN and TTL 0 never kept */
	struct wd_dns_cache *dc = wd_calloc(1, sizeof(*dc));
	uint64_t t0 = 1000ull * 1000000000ull, sec = 1000000000ull;
	int a0 = asked();
	n = wd_dns_lookup_cached(dc, t0, &u, "up.example", WD_DNS_A, rr, 4,
				 &err);
	T_OK(n == 1 && rr[0].ttl == 7 && asked() == a0 + 1, "cache-miss-asks",
	     "n %d ttl %u asked %d", n, n > 0 ? rr[0].ttl : 0, asked() - a0);
	n = wd_dns_lookup_cached(dc, t0 + 2 * sec + sec / 2, &u, "UP.Example",
				 WD_DNS_A, rr, 4, &err);
	if (n > 0)
		wd_addr_text(rr[0].addr, at, sizeof(at));
	T_OK(n == 1 && rr[0].ttl == 5 && !strcmp(at, "203.0.113.7") &&
		 asked() == a0 + 1 && dc->hits == 1,
	     "cache-hit-ttl-lowered", "n %d ttl %u %s asked %d hits %llu", n,
	     n > 0 ? rr[0].ttl : 0, at, asked() - a0,
	     (unsigned long long)dc->hits);
	n = wd_dns_lookup_cached(dc, t0 + 3 * sec, &u, "up.example",
				 WD_DNS_AAAA, rr, 4, &err);
	T_OK(n == 1 && rr[0].type == WD_DNS_AAAA && asked() == a0 + 2,
	     "cache-per-type", "n %d asked %d", n, asked() - a0);
	n = wd_dns_lookup_cached(dc, t0 + 6 * sec + sec / 2, &u, "up.example",
				 WD_DNS_A, rr, 4, &err);
	T_OK(n == 1 && rr[0].ttl == 1 && asked() == a0 + 2, "cache-last-second",
	     "n %d ttl %u asked %d", n, n > 0 ? rr[0].ttl : 0, asked() - a0);
	n = wd_dns_lookup_cached(dc, t0 + 7 * sec, &u, "up.example", WD_DNS_A,
				 rr, 4, &err);
	T_OK(n == 1 && rr[0].ttl == 7 && asked() == a0 + 3,
	     "cache-expired-asks-again", "n %d ttl %u asked %d", n,
	     n > 0 ? rr[0].ttl : 0, asked() - a0);
	for (int i = 0; i < 2; i++)
		wd_dns_lookup_cached(dc, t0 + 8 * sec, &u, "nope.example",
				     WD_DNS_A, rr, 4, &err);
	T_OK(asked() == a0 + 5, "cache-nxdomain-not-kept", "asked %d",
	     asked() - a0);
	for (int i = 0; i < 2; i++)
		n = wd_dns_lookup_cached(dc, t0 + 8 * sec, &u, "zero.example",
					 WD_DNS_A, rr, 4, &err);
	T_OK(n == 1 && asked() == a0 + 7, "cache-ttl0-not-kept",
	     "n %d asked %d", n, asked() - a0);
	/* more names than entries: the oldest answers go, not the newest */
	for (int i = 0; i < WD_DNS_CACHE_N + 4; i++) {
		char nm[32];
		snprintf(nm, sizeof(nm), "many%d.example", i);
		wd_dns_lookup_cached(dc, t0 + 9 * sec, &u, nm, WD_DNS_A, rr, 4,
				     &err);
	}
	int a1 = asked();
	char last[32];
	snprintf(last, sizeof(last), "many%d.example", WD_DNS_CACHE_N + 3);
	n = wd_dns_lookup_cached(dc, t0 + 9 * sec, &u, last, WD_DNS_A, rr, 4,
				 &err);
	T_OK(n == 1 && asked() == a1, "cache-keeps-newest", "n %d asked %d", n,
	     asked() - a1);
	n = wd_dns_lookup_cached(dc, t0 + 9 * sec, &u, "many0.example",
				 WD_DNS_A, rr, 4, &err);
	T_OK(n == 1 && asked() == a1 + 1, "cache-evicts-oldest",
	     "n %d asked %d", n, asked() - a1);
	free(dc);

	/* decisions: search-svc by name, a one-label wildcard, a private
	 * name with and without its range listed */
	struct wd_net_rule rules[] = {
	    rule("up.example:443"),
	    rule("*.wild.example:80"),
	    rule("priv.example:8080"),
	    rule("meta.example:80"),
	};
	struct wd_dns_decision d;
	q = (struct wd_dns_query){.qtype = WD_DNS_A, .qclass = 1};
	snprintf(q.name, sizeof(q.name), "up.example");
	wd_dns_decide(rules, 4, NULL, 0, &u, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_NOERROR && d.n == 1 && d.nports == 1 &&
		 d.ports[0] == 443 && !d.denied,
	     "decide-allowed", "rcode %d n %d port %u", d.rcode, d.n,
	     d.nports ? d.ports[0] : 0);
	snprintf(q.name, sizeof(q.name), "other.example");
	wd_dns_decide(rules, 4, NULL, 0, &u, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_NXDOMAIN && d.denied && strstr(d.why, "not in"),
	     "decide-not-allowed", "rcode %d why %s", d.rcode, d.why);
	snprintf(q.name, sizeof(q.name), "priv.example");
	wd_dns_decide(rules, 4, NULL, 0, &u, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_REFUSED && d.n == 0 && d.denied &&
		 strstr(d.why, "10.1.2.3 is private"),
	     "decide-private-refused", "rcode %d why %s", d.rcode, d.why);
	snprintf(q.name, sizeof(q.name), "meta.example");
	wd_dns_decide(rules, 4, NULL, 0, &u, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_REFUSED && strstr(d.why, "metadata"),
	     "decide-metadata-refused", "why %s", d.why);
	struct wd_net_rule listed[] = {rule("priv.example:8080"),
				       rule("10.0.0.0/8:*")};
	snprintf(q.name, sizeof(q.name), "priv.example");
	wd_dns_decide(listed, 1, NULL, 0, &u, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_REFUSED, "decide-ip-rule-no-listing",
	     "an IP rule means what it says: rcode %d", d.rcode);
	wd_dns_decide(listed, 1, listed + 1, 1, &u, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_NOERROR && d.n == 1, "decide-private-listed",
	     "rcode %d n %d", d.rcode, d.n);
	q.qtype = 16; /* TXT of an allowed name: no data, nothing asked */
	snprintf(q.name, sizeof(q.name), "up.example");
	wd_dns_decide(rules, 4, NULL, 0, &u, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_NOERROR && d.n == 0, "decide-txt-nodata",
	     "rcode %d n %d", d.rcode, d.n);

	/* /etc/hosts first when no server is given */
	char hp[] = "/tmp/wd-hosts.XXXXXX";
	int hf = mkstemp(hp);
	dprintf(hf, "# test\n127.0.0.1 search-svc.internal search\n"
		    "::1 search-svc.internal\n");
	close(hf);
	struct wd_dns_upstream hu = {.hosts_path = hp, .hosts_ttl = 5};
	n = wd_dns_lookup(&hu, "SEARCH-SVC.internal", WD_DNS_A, rr, 4, &err);
	T_OK(n == 1 && rr[0].ttl == 5, "hosts-a", "n %d", n);
	struct wd_net_rule demo[] = {rule("search-svc.internal:9200"),
				     rule("127.0.0.0/8:*")};
	q.qtype = WD_DNS_A;
	snprintf(q.name, sizeof(q.name), "search-svc.internal");
	wd_dns_decide(demo, 1, demo + 1, 1, &hu, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_NOERROR && d.n == 1 && d.ports[0] == 9200,
	     "hosts-decide", "rcode %d n %d", d.rcode, d.n);
	wd_dns_decide(demo, 1, NULL, 0, &hu, NULL, &q, &d);
	T_OK(d.rcode == WD_DNS_REFUSED && strstr(d.why, "loopback"),
	     "hosts-loopback-refused", "rcode %d %s", d.rcode, d.why);
	unlink(hp);

	/* an answer a stub resolver takes */
	uint8_t out[512];
	struct wd_dns_rr one = {.type = WD_DNS_A, .ttl = 30};
	one.addr[10] = one.addr[11] = 0xff;
	inet_pton(AF_INET, "192.0.2.1", one.addr + 12);
	wd_dns_parse_query(qm, (size_t)ql, &q);
	size_t w =
	    wd_dns_answer(&q, qm, WD_DNS_NOERROR, &one, 1, out, sizeof(out));
	ns_msg h;
	ns_rr r0;
	T_OK(w > 0 && ns_initparse(out, (int)w, &h) == 0 &&
		 ns_msg_count(h, ns_s_an) == 1 &&
		 ns_parserr(&h, ns_s_an, 0, &r0) == 0 && ns_rr_ttl(r0) == 30 &&
		 ns_msg_id(h) == q.id,
	     "answer-parses", "%zu bytes", w);

	up_stop = 1;
	pthread_join(th, NULL);
	close(up_fd);
	return T_DONE();
}
