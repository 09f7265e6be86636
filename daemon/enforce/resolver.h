/* A call's resolver: where the cgroup programs send every DNS packet of a
 * call whose network.allow names hosts (port 53, UDP and TCP, any
 * address). It listens on 127.0.0.1 (one port, UDP and TCP) in its own
 * thread, answers only names the call may resolve (enforce/dns.h), pins
 * each address it answers in the call's allow map for the answer's TTL
 * (through `pin`) before replying, unpins it when the TTL runs out, and
 * queues a denial event for each name refused or answer withheld; the
 * call's supervisor polls events_fd and takes them. */
#ifndef WD_ENFORCE_RESOLVER_H
#define WD_ENFORCE_RESOLVER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"
#include "enforce/dns.h"
#include "events/event.h"
#include "policy/manifest.h"

struct wd_resolver;

struct wd_resolver_opts {
	const struct wd_net_rule *rules; /* the call's allow-list (copied) */
	int n;
	const struct wd_net_rule *priv; /* network.allow_private (copied) */
	int npriv;
	struct wd_dns_upstream up; /* copied (hosts_path too) */
	/* mode: audit: what enforce would refuse is answered (from
	 * upstream) and recorded as audited */
	bool audit;
	/* add (true) or remove an allow-map entry for addr:port (port 0 =
	 * any) of the call; 0 / -errno. Called from the resolver's thread. */
	int (*pin)(void *arg, const uint8_t addr[16], uint16_t port, bool add);
	void *pin_arg;
	uint64_t cgroup_id; /* put in the events */
	uint32_t uid;
	/* Tier 3 (sandbox/t3link.h): also listen on dev_addr:53 (network
	 * order), UDP and TCP, on sockets bound to device dev. A device's
	 * socket still hears the node's own processes (they reach dev_addr
	 * over loopback): it answers only queries from dev_peer, the
	 * sandbox's end (gVisor's netstack, no host socket), that (UDP)
	 * arrived over dev and that no socket of the node sent (socket
	 * diagnostics). NULL: none. */
	const char *dev;
	uint32_t dev_addr, dev_peer;
	/* What the asker is told for an answered address (called before it
	 * is pinned; the pin is the address as answered): 0 = told `shown`
	 * (filled in, may be the same), 1 = left out of the answer without a
	 * denial (a family the call cannot use), -errno = withheld and
	 * recorded as a denial of the name, `why` saying why. NULL: every
	 * address as answered. */
	int (*shown)(void *arg, const uint8_t addr[16], uint8_t shown[16],
		     char *why, size_t why_len);
	void *shown_arg;
	/* Called once from the resolver's thread when it fails (its poll
	 * fails, or an answer could not be unpinned), after every pin is
	 * removed: turn the call's DNS redirect off so that its queries
	 * fail rather than wait or reach anything. NULL: none (the
	 * resolver's sockets stay bound, unanswered, until stop). */
	void (*off)(void *arg);
	void *off_arg;
};

/* Where every call's resolver looks names up (wardend --dns-upstream,
 * warden exec --dns-upstream): set once at start; the default is
 * /etc/hosts, then the node's resolver. */
void wd_resolver_set_upstream(const struct wd_dns_upstream *u);
void wd_resolver_upstream(struct wd_dns_upstream *u);

int wd_resolver_start(const struct wd_resolver_opts *o,
		      struct wd_resolver **out, struct wd_err *err);
/* The port (host order) on 127.0.0.1, UDP and TCP. */
uint16_t wd_resolver_port(const struct wd_resolver *r);
/* Also on [::1] at that port (v6 sockets' DNS goes there). */
bool wd_resolver_has_v6(const struct wd_resolver *r);
/* Readable while denials are queued. */
int wd_resolver_events_fd(const struct wd_resolver *r);
/* Up to max queued denials, oldest first; the count. */
int wd_resolver_take(struct wd_resolver *r, struct wd_event *out, int max);
/* The name an address was answered for in this call ("" if none), for
 * denials of connects to it: "name (addr)". */
bool wd_resolver_name_of(struct wd_resolver *r, const uint8_t addr[16],
			 char *name, size_t n);
/* Answers given and names refused so far; denials not queued (the queue
 * of MAX_QUEUED was full), taken: each is counted once. */
void wd_resolver_counts(struct wd_resolver *r, uint64_t *answered,
			uint64_t *refused);
uint64_t wd_resolver_take_dropped(struct wd_resolver *r);
/* Stop the thread, unpin every address still pinned, free. */
/* Whether the resolver's thread failed (it answers nothing any more and
 * holds no pin): the call must end (fail closed); why in msg. The events
 * fd turns readable when it does. */
bool wd_resolver_failed(struct wd_resolver *r, char *msg, size_t n);

void wd_resolver_stop(struct wd_resolver *r);

#endif
