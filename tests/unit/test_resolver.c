/* A call's resolver (enforce/resolver.c), asked the way glibc asks (UDP,
 * then TCP with RES_USEVC): an allowed name is answered and pinned before
 * the answer arrives, on the rule's port, and unpinned when its TTL runs
 * out; a name not allowed is NXDOMAIN with a "dns.name" denial queued; a
 * loopback answer is refused ("dns.answer") unless its range is listed. */
#include "enforce/resolver.h"
#include "t.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int pinned, unpinned;
static uint16_t last_port;
static uint8_t last_addr[16];

static int pin(void *arg, const uint8_t a[16], uint16_t port, bool add)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	if (add) {
		pinned++;
		last_port = port;
		memcpy(last_addr, a, 16);
	} else {
		unpinned++;
	}
	pthread_mutex_unlock(&mu);
	return 0;
}

static int count(int *v)
{
	pthread_mutex_lock(&mu);
	int x = *v;
	pthread_mutex_unlock(&mu);
	return x;
}

/* A pin callback whose removal of 192.0.2.10 fails: the resolver must
 * fail closed (every other pin removed, the call's DNS turned off, no
 * more answers). */
static int f_pinned, f_unpinned, f_unpin_failed, f_off;

static int pin_failing(void *arg, const uint8_t a[16], uint16_t port, bool add)
{
	(void)arg;
	(void)port;
	static const uint8_t bad[16] = {[10] = 0xff, [11] = 0xff, [12] = 192,
					[13] = 0,    [14] = 2,	  [15] = 10};
	int rc = 0;
	pthread_mutex_lock(&mu);
	if (add)
		f_pinned++;
	else if (!memcmp(a, bad, 16)) {
		f_unpin_failed++;
		rc = -EIO;
	} else
		f_unpinned++;
	pthread_mutex_unlock(&mu);
	return rc;
}

static void off(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	f_off++;
	pthread_mutex_unlock(&mu);
}

/* res_nquery at 127.0.0.1:port; the answer's rcode, or -1 */
static int ask(uint16_t port, const char *name, int type, bool tcp,
	       int *answers)
{
	struct __res_state st;
	memset(&st, 0, sizeof(st));
	res_ninit(&st);
	st.nscount = 1;
	st.nsaddr_list[0] =
	    (struct sockaddr_in){.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	st.options &= ~(unsigned long)(RES_DEFNAMES | RES_DNSRCH);
	if (tcp)
		st.options |= RES_USEVC;
	st.retrans = 2;
	st.retry = 1;
	uint8_t ans[1024];
	int r = res_nquery(&st, name, ns_c_in, type, ans, sizeof(ans));
	int rc = -1;
	*answers = 0;
	if (r >= 12) {
		ns_msg h;
		if (ns_initparse(ans, r, &h) == 0) {
			rc = ns_msg_getflag(h, ns_f_rcode);
			*answers = ns_msg_count(h, ns_s_an);
		}
	} else if (st.res_h_errno == HOST_NOT_FOUND) {
		rc = ns_r_nxdomain;
	} else if (st.res_h_errno == NO_RECOVERY) {
		rc = ns_r_refused; /* glibc says NO_RECOVERY for REFUSED */
	}
	res_nclose(&st);
	return rc;
}

/* one query by hand over UDP: the reply's rcode (glibc's stub turns a
 * REFUSED into a retry, so its caller never sees it), or -1 */
static int ask_raw(uint16_t port, const char *name, int type, int *answers)
{
	uint8_t q[512], a[1024];
	int ql = res_mkquery(0, name, 1, type, NULL, 0, NULL, q, sizeof(q));
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int rc = -1;
	if (ql > 0 &&
	    sendto(fd, q, (size_t)ql, 0, (void *)&to, sizeof(to)) == ql) {
		ssize_t n = recv(fd, a, sizeof(a), 0);
		ns_msg h;
		if (n >= 12 && ns_initparse(a, (int)n, &h) == 0) {
			rc = ns_msg_getflag(h, ns_f_rcode);
			*answers = ns_msg_count(h, ns_s_an);
		}
	}
	close(fd);
	return rc;
}

int main(void)
{
	char hp[] = "/tmp/wd-rhosts.XXXXXX";
	int hf = mkstemp(hp);
	dprintf(hf, "192.0.2.10 search-svc.internal\n"
		    "192.0.2.11 x.wild.internal\n"
		    "127.0.0.1 loop.internal\n");
	close(hf);
	struct wd_net_rule rules[3];
	struct wd_err err = {0};
	const char *texts[] = {"search-svc.internal:9200", "loop.internal:80",
			       "*.wild.internal:443"};
	for (int i = 0; i < 3; i++)
		T_OK(wd_net_rule_parse(texts[i], &rules[i], &err) == 0, "rule",
		     "%s: %s", texts[i], err.msg);
	struct wd_resolver_opts o = {.rules = rules,
				     .n = 3,
				     .up = {.hosts_path = hp, .hosts_ttl = 1},
				     .pin = pin,
				     .cgroup_id = 42,
				     .uid = getuid()};
	struct wd_resolver *r = NULL;
	T_OK(wd_resolver_start(&o, &r, &err) == 0, "start", "%s", err.msg);
	if (!r)
		return T_DONE();
	uint16_t port = wd_resolver_port(r);
	int an = 0;

	int rc = ask(port, "search-svc.internal", ns_t_a, false, &an);
	char at[64];
	uint8_t got[16];
	pthread_mutex_lock(&mu);
	memcpy(got, last_addr, 16);
	uint16_t got_port = last_port;
	pthread_mutex_unlock(&mu);
	inet_ntop(AF_INET, got + 12, at, sizeof(at));
	T_OK(rc == 0 && an == 1 && count(&pinned) == 1 && got_port == 9200 &&
		 !strcmp(at, "192.0.2.10"),
	     "udp-allowed-pinned", "rcode %d answers %d pinned %d port %u %s",
	     rc, an, count(&pinned), got_port, at);
	char name[64];
	T_OK(wd_resolver_name_of(r, got, name, sizeof(name)) &&
		 !strcmp(name, "search-svc.internal"),
	     "name-of", "'%s'", name);

	rc = ask(port, "search-svc.internal", ns_t_a, true, &an);
	T_OK(rc == 0 && an == 1, "tcp-allowed", "rcode %d answers %d", rc, an);

	rc = ask(port, "exfil-data.attacker.example", ns_t_a, false, &an);
	T_OK(rc == ns_r_nxdomain && an == 0, "not-allowed-nxdomain", "rcode %d",
	     rc);
	rc = ask(port, "a.b.wild.internal", ns_t_txt, true, &an);
	T_OK(rc == ns_r_nxdomain, "wild-two-labels-nxdomain", "rcode %d", rc);

	rc = ask_raw(port, "loop.internal", ns_t_a, &an);
	T_OK(rc == ns_r_refused && an == 0, "loopback-answer-refused",
	     "rcode %d answers %d", rc, an);

	struct pollfd p = {wd_resolver_events_fd(r), POLLIN, 0};
	T_OK(poll(&p, 1, 2000) == 1, "events-signalled", "eventfd readable");
	struct wd_event ev[8];
	int k = wd_resolver_take(r, ev, 8);
	T_OK(k == 3 && !strcmp(ev[0].kind, "dns.name") &&
		 !strcmp(ev[0].target, "exfil-data.attacker.example") &&
		 ev[0].source == WD_SRC_RESOLVER && ev[0].cgroup_id == 42 &&
		 ev[0].uid == getuid() && !strcmp(ev[2].kind, "dns.answer") &&
		 strstr(ev[2].target, "127.0.0.1 is loopback"),
	     "denials-queued", "%d: %s %s / %s %s", k, k ? ev[0].kind : "",
	     k ? ev[0].target : "", k > 2 ? ev[2].kind : "",
	     k > 2 ? ev[2].target : "");

	/* TTL 1 s: unpinned within ~2 s */
	int waited = 0;
	while (count(&unpinned) < 1 && waited < 40) {
		usleep(100000);
		waited++;
	}
	T_OK(count(&unpinned) == 1, "ttl-unpins", "unpinned %d after %d ms",
	     count(&unpinned), waited * 100);

	/* a resolver of another call's uid does not answer us */
	struct wd_resolver_opts o2 = o;
	o2.uid = getuid() + 4321;
	struct wd_resolver *r2 = NULL;
	T_OK(wd_resolver_start(&o2, &r2, &err) == 0, "start-other", "%s",
	     err.msg);
	int before = count(&pinned);
	rc = r2 ? ask_raw(wd_resolver_port(r2), "search-svc.internal", ns_t_a,
			  &an)
		: 0;
	T_OK(rc == -1 && count(&pinned) == before, "foreign-unanswered",
	     "rcode %d pinned %d", rc, count(&pinned) - before);
	wd_resolver_stop(r2);

	ask(port, "search-svc.internal", ns_t_a, false, &an);
	wd_resolver_stop(r);
	T_OK(count(&unpinned) == count(&pinned), "stop-unpins",
	     "pinned %d unpinned %d", count(&pinned), count(&unpinned));

	/* an answer that cannot be unpinned when its TTL ends: the
	 * resolver fails closed */
	struct wd_resolver_opts of = o;
	of.pin = pin_failing;
	of.off = off;
	struct wd_resolver *rf = NULL;
	T_OK(wd_resolver_start(&of, &rf, &err) == 0, "start-failing", "%s",
	     err.msg);
	if (rf) {
		uint16_t fport = wd_resolver_port(rf);
		int a1 = ask(fport, "search-svc.internal", ns_t_a, false, &an);
		int a2 = ask(fport, "x.wild.internal", ns_t_a, false, &an);
		T_OK(a1 == 0 && a2 == 0 && count(&f_pinned) == 2,
		     "failing-pinned", "rcodes %d %d pinned %d", a1, a2,
		     count(&f_pinned));
		waited = 0;
		while (!wd_resolver_failed(rf, NULL, 0) && waited < 50) {
			usleep(100000);
			waited++;
		}
		char why[200] = "";
		bool fl = wd_resolver_failed(rf, why, sizeof(why));
		/* the thread removes the rest and turns DNS off as it ends */
		for (int i = 0; i < 20 && count(&f_off) == 0; i++)
			usleep(50000);
		T_OK(fl && strstr(why, "cannot unpin") &&
			 strstr(why, "search-svc.internal") &&
			 count(&f_unpin_failed) >= 1 &&
			 count(&f_unpinned) == 1 && count(&f_off) == 1,
		     "unpin-failure-fails-closed",
		     "failed %d '%s' unpin failed %d unpinned %d off %d", fl,
		     why, count(&f_unpin_failed), count(&f_unpinned),
		     count(&f_off));
		struct pollfd fp = {wd_resolver_events_fd(rf), POLLIN, 0};
		T_OK(poll(&fp, 1, 0) == 1, "failure-signalled",
		     "events fd not readable");
		int before_f = count(&f_pinned);
		rc = ask_raw(fport, "search-svc.internal", ns_t_a, &an);
		T_OK(rc == -1 && count(&f_pinned) == before_f,
		     "failed-answers-nothing", "rcode %d pinned %d", rc,
		     count(&f_pinned) - before_f);
		wd_resolver_stop(rf);
		T_OK(count(&f_off) == 1, "off-once", "off %d", count(&f_off));
	}
	/* a wildcard lets the tool choose labels (data upstream): at most
	 * 64 distinct names are looked up, the next is REFUSED and recorded;
	 * a name already looked up still is */
	char hp2[] = "/tmp/wd-rhosts2.XXXXXX";
	int hf2 = mkstemp(hp2);
	for (int i = 0; i <= 64; i++)
		dprintf(hf2, "192.0.2.%d n%d.wild.internal\n", 100 + i % 100,
			i);
	close(hf2);
	struct wd_resolver_opts ol = o;
	ol.up.hosts_path = hp2;
	unpinned = pinned = 0;
	struct wd_resolver *rl = NULL;
	T_OK(wd_resolver_start(&ol, &rl, &err) == 0, "start-limit", "%s",
	     err.msg);
	if (rl) {
		uint16_t lport = wd_resolver_port(rl);
		int ok64 = 0;
		for (int i = 0; i < 64; i++) {
			char nm[64];
			snprintf(nm, sizeof(nm), "n%d.wild.internal", i);
			ok64 += ask_raw(lport, nm, ns_t_a, &an) == 0 && an == 1;
		}
		int r65 = ask_raw(lport, "n64.wild.internal", ns_t_a, &an);
		int again = ask_raw(lport, "N3.wild.internal", ns_t_a, &an);
		struct wd_event lev[8];
		int lk = wd_resolver_take(rl, lev, 8);
		T_OK(ok64 == 64 && r65 == ns_r_refused && again == 0 &&
			 lk == 1 && !strcmp(lev[0].kind, "dns.name") &&
			 strstr(lev[0].target, "n64.wild.internal (the call "
					       "looked up 64 distinct names"),
		     "distinct-names-capped",
		     "answered %d/64, 65th rcode %d, again %d, %d denials "
		     "(%s)",
		     ok64, r65, again, lk, lk ? lev[0].target : "");
		wd_resolver_stop(rl);
	}
	unlink(hp2);
	unlink(hp);
	return T_DONE();
}
