/* Names in network.allow (DESIGN "Names in network.allow"): the DNS wire
 * format of one query and its answer, the rule a name must match, what an
 * answered address may be, and the lookup upstream (the node's resolver,
 * /etc/hosts first, or one server given). No state: the per-call resolver
 * (enforce/resolver.c) owns the sockets and the pins. */
#ifndef WD_ENFORCE_DNS_H
#define WD_ENFORCE_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"
#include "policy/manifest.h"

#define WD_DNS_A      1
#define WD_DNS_AAAA   28
#define WD_DNS_MAX_RR 16
/* rcodes (RFC 1035 4.1.1) */
#define WD_DNS_NOERROR	0
#define WD_DNS_FORMERR	1
#define WD_DNS_SERVFAIL 2
#define WD_DNS_NXDOMAIN 3
#define WD_DNS_NOTIMP	4
#define WD_DNS_REFUSED	5

struct wd_dns_query {
	uint16_t id;
	bool rd;	/* recursion desired: echoed */
	char name[254]; /* lower case, no trailing dot */
	uint16_t qtype, qclass;
	size_t qend; /* bytes of header + question in the message */
};

struct wd_dns_rr {
	uint16_t type;	  /* WD_DNS_A or WD_DNS_AAAA */
	uint32_t ttl;	  /* seconds */
	uint8_t addr[16]; /* v4-mapped for A */
};

/* One question, opcode QUERY, not a response. 0, or the rcode to answer
 * (FORMERR, NOTIMP) with q->id set when the header was readable, or -1
 * when nothing can be answered (shorter than a header). */
int wd_dns_parse_query(const uint8_t *msg, size_t len, struct wd_dns_query *q);

/* The answer to q (its question echoed from qmsg): rcode and rrs (A/AAAA,
 * the question's name). Bytes written to out, 0 if cap is too small. */
size_t wd_dns_answer(const struct wd_dns_query *q, const uint8_t *qmsg,
		     int rcode, const struct wd_dns_rr *rrs, int n,
		     uint8_t *out, size_t cap);

/* "host" matches itself; "*.suffix" matches exactly one label before
 * suffix (a.suffix, not suffix nor a.b.suffix). Case-insensitive. */
bool wd_dns_name_match(const char *pattern, const char *name);

/* What an address is: the ranges a name's answer may not fall in unless
 * the manifest lists them (loopback, RFC 1918/ULA private, link-local,
 * the cloud metadata address, unspecified/this-network, CGNAT). */
enum wd_addr_kind {
	WD_ADDR_PUBLIC,
	WD_ADDR_LOOPBACK,
	WD_ADDR_PRIVATE,
	WD_ADDR_LINK_LOCAL,
	WD_ADDR_METADATA,
	WD_ADDR_UNSPECIFIED,
	WD_ADDR_SHARED,	   /* 100.64.0.0/10 */
	WD_ADDR_MULTICAST, /* 224/4, ff00::/8 */
	WD_ADDR_RESERVED,  /* 240/4, the broadcast address among them */
};
enum wd_addr_kind wd_addr_kind_of(const uint8_t a[16]);
const char *wd_addr_kind_name(enum wd_addr_kind k);
/* "10.1.2.3" / "fd00::1" */
void wd_addr_text(const uint8_t a[16], char *buf, size_t n);

/* Where lookups go: /etc/hosts (hosts_path, NULL = "/etc/hosts") first,
 * then the node's resolver (resolv.conf), or only `server` when set
 * (IPv4 address:port; the resolver's test zone in tests). */
struct wd_dns_upstream {
	const char *hosts_path;
	/* the operator's own names (--dns-hosts, daemon.yaml dns.hosts): a
	 * hosts-format file asked first, whatever else is set */
	char zone_path[256];
	bool have_server;
	uint8_t server4[4];
	uint16_t server_port; /* host order */
	uint32_t hosts_ttl;   /* TTL given to /etc/hosts answers (60) */
};
/* "ADDR:PORT" (IPv4) into u. 0 / -EINVAL with a message. */
int wd_dns_upstream_parse(const char *text, struct wd_dns_upstream *u,
			  struct wd_err *err);

/* The qtype records of an upstream's answer: n >= 0, -ENOENT (NXDOMAIN),
 * -EAGAIN (another rcode), -EBADMSG (malformed). */
int wd_dns_parse_answers(const uint8_t *msg, size_t len, uint16_t qtype,
			 struct wd_dns_rr *out, int max);

/* Whether wd_dns_decide would look q's name up (an A or AAAA query, class
 * IN, for a name a rule of network.allow matches). */
bool wd_dns_would_look_up(const struct wd_net_rule *rules, int n,
			  const struct wd_dns_query *q);

/* A or AAAA records of name: n >= 0 (0 = the name exists, no such
 * record), -ENOENT (no such name), -EAGAIN (upstream failed; err says). */
int wd_dns_lookup(const struct wd_dns_upstream *u, const char *name,
		  uint16_t qtype, struct wd_dns_rr *out, int max,
		  struct wd_err *err);

/* The resolver's decision for one query of a call whose allow-list is
 * rules[0..n) and network.allow_private priv[0..npriv): rcode and the answers
 * to give; each answer kept is one the call may connect to (pinned by the
 * caller for its TTL, on the ports of the rules its name matched:
 * ports[0..nports), 0 = any). why says what was refused (a denial is recorded
 * when it is set). */
struct wd_dns_decision {
	int rcode;
	int n;
	struct wd_dns_rr rr[WD_DNS_MAX_RR];
	uint16_t ports[16];
	int nports;
	bool denied;
	char why[200];
};

/* The answers of a call's lookups, kept for their TTL (a caching
 * forwarder's, as systemd-resolved's or dnsmasq's: the call's second query
 * of a name within its TTL is not sent upstream again). One per call's
 * resolver, used by its thread alone: nothing is shared between calls (a
 * node-wide cache would tell one call what another looked up, by its
 * latency). Positive answers only (a name that does not exist, or an
 * upstream that failed, is asked again), at most WD_DNS_CACHE_MAX_S; an
 * answer with a TTL of 0 is not kept. An answer from the cache has its
 * TTLs lowered by the time it was kept (at least 1 s). */
#define WD_DNS_CACHE_N	   16
#define WD_DNS_CACHE_MAX_S 300u
struct wd_dns_cached {
	char name[254];
	uint16_t qtype;
	int n;
	struct wd_dns_rr rr[WD_DNS_MAX_RR];
	uint64_t at_ns, exp_ns; /* wd_now_ns; exp_ns 0: empty */
};
struct wd_dns_cache {
	struct wd_dns_cached e[WD_DNS_CACHE_N];
	int next;      /* the entry the next new answer replaces */
	uint64_t hits; /* answers given from it */
};
/* wd_dns_lookup through c (NULL: none), as of now_ns. */
int wd_dns_lookup_cached(struct wd_dns_cache *c, uint64_t now_ns,
			 const struct wd_dns_upstream *u, const char *name,
			 uint16_t qtype, struct wd_dns_rr *out, int max,
			 struct wd_err *err);
/* The decision, its lookup through c (NULL: none). */
void wd_dns_decide(const struct wd_net_rule *rules, int n,
		   const struct wd_net_rule *priv, int npriv,
		   const struct wd_dns_upstream *u, struct wd_dns_cache *c,
		   const struct wd_dns_query *q, struct wd_dns_decision *d);

#endif
