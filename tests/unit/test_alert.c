/* Denial-rate alerting against a real event stream and a real loopback
 * HTTP server started here: steady baseline (no alert), burst (exactly
 * one alert, right JSON, cool-down, re-arm), retries, a dead and a hung
 * webhook (never blocks the stream; failures and drops counted), stream
 * overrun counted as lost, metrics text that parses with matching counts,
 * and the key cap's LRU eviction. Time runs on an injected clock. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "alert/alert.h"
#include "alert/alertmanager.h"
#include "common/log.h"
#include "common/util.h"
#include "events/stream.h"
#include "t.h"

#define S 1000000000ull

/* ---- injected clock ---- */
static uint64_t fake_now = 1000 * S;
static uint64_t fake_clock(void *arg)
{
	return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}
static void advance(uint64_t ns)
{
	__atomic_add_fetch(&fake_now, ns, __ATOMIC_SEQ_CST);
}

/* ---- a tiny HTTP server on 127.0.0.1 ---- */
#define MAXREQ 64
struct srv {
	int lfd;
	int port;
	int fail_first; /* answer 500 to this many requests first */
	bool no_accept; /* listen, never accept: a hung webhook */
	bool stop;
	pthread_t thr;
	pthread_mutex_t mu;
	int nreq;
	char *bodies[MAXREQ];
	char ctype[MAXREQ][64];
	char line[MAXREQ][128];
};

static void serve_one(struct srv *s, int fd)
{
	char buf[65536];
	size_t len = 0;
	char *hend = NULL;
	while (len < sizeof(buf) - 1) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r <= 0)
			return;
		len += (size_t)r;
		buf[len] = 0;
		if ((hend = strstr(buf, "\r\n\r\n")))
			break;
	}
	if (!hend)
		return;
	size_t clen = 0;
	char ctype[64] = "";
	for (char *l = strstr(buf, "\r\n"); l && l < hend;
	     l = strstr(l + 2, "\r\n")) {
		if (!strncasecmp(l + 2, "Content-Length:", 15))
			clen = strtoul(l + 17, NULL, 10);
		if (!strncasecmp(l + 2, "Content-Type:", 13))
			sscanf(l + 15, " %63[^\r]", ctype);
	}
	size_t hlen = (size_t)(hend + 4 - buf);
	while (len < hlen + clen && len < sizeof(buf) - 1) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	pthread_mutex_lock(&s->mu);
	int i = s->nreq;
	bool fail = i < s->fail_first;
	if (i < MAXREQ) {
		s->bodies[i] = wd_strndup(buf + hlen, WD_MIN(clen, len - hlen));
		snprintf(s->ctype[i], sizeof(s->ctype[i]), "%s", ctype);
		sscanf(buf, "%127[^\r]", s->line[i]);
		s->nreq++;
	}
	pthread_mutex_unlock(&s->mu);
	const char *resp =
	    fail ? "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: "
		   "close\r\n\r\n"
		 : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: "
		   "close\r\n\r\nok";
	wd_write_all(fd, resp, strlen(resp));
}

static void *srv_thread(void *p)
{
	struct srv *s = p;
	while (!__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST)) {
		struct pollfd pf = {.fd = s->lfd, .events = POLLIN};
		if (poll(&pf, 1, 50) <= 0)
			continue;
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		serve_one(s, fd);
		close(fd);
	}
	return NULL;
}

static int srv_start(struct srv *s, int fail_first, bool no_accept)
{
	memset(s, 0, sizeof(*s));
	s->fail_first = fail_first;
	s->no_accept = no_accept;
	pthread_mutex_init(&s->mu, NULL);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(s->lfd, 16) ||
	    getsockname(s->lfd, (struct sockaddr *)&sa, &sl))
		return -errno;
	s->port = ntohs(sa.sin_port);
	if (!no_accept)
		pthread_create(&s->thr, NULL, srv_thread, s);
	return 0;
}

static void srv_stop(struct srv *s)
{
	__atomic_store_n(&s->stop, true, __ATOMIC_SEQ_CST);
	if (!s->no_accept)
		pthread_join(s->thr, NULL);
	close(s->lfd);
	for (int i = 0; i < s->nreq; i++)
		free(s->bodies[i]);
}

static int srv_count(struct srv *s)
{
	pthread_mutex_lock(&s->mu);
	int n = s->nreq;
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* ---- events ---- */
struct evspec {
	const char *tool, *team, *agent, *run;
	enum wd_event_source src;
	const char *kind;
	enum wd_verdict verdict;
};

static uint64_t pub(struct wd_stream *st, const struct evspec *sp, int step)
{
	struct wd_event e = {0};
	e.ts_ns = wd_wall_ns();
	e.source = sp->src;
	e.verdict = sp->verdict;
	e.pid = 4242;
	e.uid = 1000;
	e.syscall_nr = -1;
	e.err = EPERM;
	e.step = step;
	snprintf(e.kind, sizeof(e.kind), "%s", sp->kind);
	snprintf(e.tool, sizeof(e.tool), "%s", sp->tool);
	snprintf(e.team, sizeof(e.team), "%s", sp->team);
	snprintf(e.agent, sizeof(e.agent), "%s", sp->agent);
	snprintf(e.run_id, sizeof(e.run_id), "%s", sp->run);
	snprintf(e.call_id, sizeof(e.call_id), "call-%d", step);
	snprintf(e.target, sizeof(e.target), "127.0.0.1:%d", 9000 + step);
	return wd_stream_publish(st, &e);
}

/* publish and wait until the alerter has seen it (the clock only moves
 * between events, as it would in real time) */
static int pub_sync(struct wd_alert *a, struct wd_stream *st,
		    const struct evspec *sp, int step)
{
	return wd_alert_sync(a, pub(st, sp, step), 5000);
}

static struct wd_alert_config base_cfg(const char *url)
{
	struct wd_alert_config c = {
	    .node = "testnode",
	    .webhook_url = url,
	    .short_window_s = 60,
	    .long_window_s = 3600,
	    .factor = 5,
	    .min_count = 20,
	    .cooldown_s = 300,
	    .backoff_ms = 20,
	    .timeout_ms = 2000,
	    .clock = fake_clock,
	};
	return c;
}

static const struct evspec steady = {"steady",	       "t1",	   "a1",
				     "run-steady",     WD_SRC_BPF, "connect",
				     WD_VERDICT_DENIED};
static const struct evspec burst = {"burst",	      "t1",	      "a1",
				    "run-burst",      WD_SRC_SECCOMP, "syscall",
				    WD_VERDICT_DENIED};

/* Every line is a comment or `name{labels} value`. */
static bool metrics_parse(const char *text, int *nlines)
{
	regex_t re;
	regcomp(&re,
		"^(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*|"
		"[a-zA-Z_:][a-zA-Z0-9_:]*"
		"(\\{[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\""
		"(,[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\")*\\})?"
		" -?[0-9.eE+-]+|[0-9]+)$",
		REG_EXTENDED | REG_NOSUB);
	bool ok = true;
	*nlines = 0;
	char *copy = wd_strdup(text), *save = NULL;
	for (char *l = strtok_r(copy, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		(*nlines)++;
		if (regexec(&re, l, 0, NULL, 0)) {
			printf("# bad metrics line: %s\n", l);
			ok = false;
		}
	}
	free(copy);
	regfree(&re);
	return ok;
}

/* The value of the sample line starting with `prefix` (-1 if absent). */
static long long metric(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	for (const char *l = text; l && *l; l = strchr(l, '\n')) {
		if (*l == '\n')
			l++;
		if (!strncmp(l, prefix, n) && l[n] == ' ')
			return atoll(l + n + 1);
	}
	return -1;
}

static void test_config(void)
{
	struct wd_stream *st = wd_stream_new(16);
	struct wd_alert *a = NULL;
	struct wd_err err = {0};
	struct wd_alert_config c = base_cfg(NULL);
	c.long_window_s = 90;
	T_OK(wd_alert_new(&c, st, &a, &err) == -EINVAL && !a,
	     "alert_config_long_window", "accepted long < 2 x short");
	c = base_cfg("file:///etc/passwd");
	T_OK(wd_alert_new(&c, st, &a, &err) == -EINVAL && !a,
	     "alert_config_url_scheme", "accepted a file:// webhook");
	wd_stream_free(st);
}

static void test_spikes(void)
{
	struct srv srv;
	if (srv_start(&srv, 0, false)) {
		T_FAIL("alert_server", "cannot start loopback server");
		return;
	}
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook", srv.port);
	struct wd_stream *st = wd_stream_new(4096);
	struct wd_alert_config c = base_cfg(url);
	struct wd_alert *a = NULL;
	struct wd_err err = {0};
	int rc = wd_alert_new(&c, st, &a, &err);
	T_OK(rc == 0, "alert_new", "%s", err.msg);
	if (rc) {
		srv_stop(&srv);
		wd_stream_free(st);
		return;
	}
	/* 65 simulated minutes of one denial every 2 s */
	int step = 0;
	bool synced = true;
	for (int i = 0; i < 65 * 30; i++) {
		synced &= pub_sync(a, st, &steady, step++) == 0;
		advance(2 * S);
	}
	struct wd_alert_stats as;
	wd_alert_stats(a, &as);
	T_OK(synced && as.processed == 65 * 30, "alert_steady_processed",
	     "processed %llu", (unsigned long long)as.processed);
	T_OK(as.alerts == 0 && srv_count(&srv) == 0, "alert_steady_no_alert",
	     "%llu alerts, %d webhook posts", (unsigned long long)as.alerts,
	     srv_count(&srv));
	struct wd_alert_key_view kv;
	rc = wd_alert_key(a, WD_DIM_TOOL, "t1/steady", &kv);
	T_OK(rc == 0 && kv.short_count >= 29 && kv.short_count <= 31 &&
		 kv.baseline_per_short > 28 && kv.baseline_per_short < 32,
	     "alert_steady_window", "rc %d short %llu baseline %.2f", rc,
	     (unsigned long long)kv.short_count, kv.baseline_per_short);

	/* a burst: 200 seccomp denials of a new tool in 10 s */
	for (int i = 0; i < 200; i++) {
		pub_sync(a, st, &burst, i);
		advance(S / 20);
	}
	wd_alert_flush(a, 5000);
	wd_alert_stats(a, &as);
	T_OK(as.alerts_spike == 1 && srv_count(&srv) == 1,
	     "alert_burst_one_alert", "%llu alerts, %d posts",
	     (unsigned long long)as.alerts_spike, srv_count(&srv));
	if (srv_count(&srv) >= 1 && getenv("ALERT_DUMP"))
		printf("# alert: %s\n", srv.bodies[0]);
	json_t *j =
	    srv_count(&srv) >= 1 ? json_loads(srv.bodies[0], 0, NULL) : NULL;
	const char *type = NULL, *kdim = NULL, *kval = NULL, *ftool = NULL,
		   *frun = NULL, *node = NULL;
	json_int_t sc = -1, fstep = -1, lstep = -1, lover = -1, mc = -1;
	int nkeys = -1;
	if (j) {
		json_t *keys = NULL;
		json_unpack(j,
			    "{s:s,s:s,s:{s:s,s:s},s:o,s:{s:I,s:I},s:{s:s,s:s,"
			    "s:I},s:{s:I},s:{s:I}}",
			    "type", &type, "node", &node, "key", "dim", &kdim,
			    "value", &kval, "keys", &keys, "window",
			    "short_count", &sc, "min_count", &mc, "first",
			    "tool", &ftool, "run_id", &frun, "step", &fstep,
			    "last", "step", &lstep, "lost", "overrun", &lover);
		nkeys = keys ? (int)json_array_size(keys) : -1;
	}
	T_OK(j && type && !strcmp(type, "denial_spike") && node &&
		 !strcmp(node, "testnode") && kdim && !strcmp(kdim, "tool") &&
		 kval && !strcmp(kval, "t1/burst") && sc == 20 && mc == 20 &&
		 ftool && !strcmp(ftool, "burst") && frun &&
		 !strcmp(frun, "run-burst") && fstep == 0 && lstep == 19 &&
		 lover == 0 && nkeys >= 1,
	     "alert_burst_json",
	     "type %s key %s=%s short %lld first %s/%s step %lld last step "
	     "%lld overrun %lld keys %d",
	     type, kdim, kval, (long long)sc, ftool, frun, (long long)fstep,
	     (long long)lstep, (long long)lover, nkeys);
	T_OK(srv.nreq >= 1 && !strcmp(srv.ctype[0], "application/json") &&
		 !strncmp(srv.line[0], "POST /hook ", 11),
	     "alert_webhook_request", "'%s' content-type '%s'", srv.line[0],
	     srv.ctype[0]);
	json_decref(j);

	/* the burst goes on for 6 more minutes, past the cool-down: still
	 * one alert (the key never left the spike state) */
	for (int i = 0; i < 1800; i++) {
		pub_sync(a, st, &burst, 200 + i);
		advance(S / 5);
	}
	wd_alert_flush(a, 5000);
	wd_alert_stats(a, &as);
	T_OK(as.alerts_spike == 1 && srv_count(&srv) == 1,
	     "alert_burst_cooldown", "%llu alerts during one long burst",
	     (unsigned long long)as.alerts_spike);

	/* quiet past the cool-down, then a second burst re-arms */
	advance(400 * S);
	for (int i = 0; i < 200; i++) {
		pub_sync(a, st, &burst, 3000 + i);
		advance(S / 20);
	}
	wd_alert_flush(a, 5000);
	wd_alert_stats(a, &as);
	rc = wd_alert_key(a, WD_DIM_TOOL, "t1/burst", &kv);
	T_OK(as.alerts_spike == 2 && srv_count(&srv) == 2 && rc == 0 &&
		 kv.alerts == 2 && kv.baseline_per_short > 5,
	     "alert_burst_rearm", "%llu alerts, %d posts, baseline %.1f",
	     (unsigned long long)as.alerts_spike, srv_count(&srv),
	     kv.baseline_per_short);

	/* a tool name that needs escaping in a label */
	struct evspec odd = steady;
	odd.tool = "we\"ird\\tool";
	pub_sync(a, st, &odd, 1);

	struct wd_buf m = {0};
	wd_alert_metrics_render(a, &m);
	wd_buf_append(&m, "", 1);
	int nl = 0;
	T_OK(metrics_parse(m.data, &nl) && nl > 20, "alert_metrics_parse",
	     "%d lines", nl);
	long long v_steady =
	    metric(m.data,
		   "warden_denial_events_total{source=\"bpf\",kind=\"connect\","
		   "team=\"t1\",tool=\"steady\",verdict=\"denied\"}");
	long long v_burst = metric(
	    m.data,
	    "warden_denial_events_total{source=\"seccomp\",kind="
	    "\"syscall\",team=\"t1\",tool=\"burst\",verdict=\"denied\"}");
	long long v_odd = metric(
	    m.data,
	    "warden_denial_events_total{source=\"bpf\",kind=\"connect\","
	    "team=\"t1\",tool=\"we\\\"ird\\\\tool\",verdict=\"denied\"}");
	long long v_alerts =
	    metric(m.data, "warden_alerts_total{type=\"denial_spike\"}");
	long long v_sent = metric(m.data, "warden_alert_webhook_sent_total");
	long long v_fail =
	    metric(m.data, "warden_alert_webhook_failures_total");
	long long v_over = metric(
	    m.data, "warden_denial_events_lost_total{reason=\"overrun\"}");
	T_OK(v_steady == 65 * 30 && v_burst == 2200 && v_odd == 1 &&
		 v_alerts == 2 && v_sent == 2 && v_fail == 0 && v_over == 0,
	     "alert_metrics_counts",
	     "steady %lld burst %lld odd %lld alerts %lld sent %lld fail "
	     "%lld overrun %lld",
	     v_steady, v_burst, v_odd, v_alerts, v_sent, v_fail, v_over);
	/* the burst's short-window rate: 200 events in the last 10 s */
	char *p = strstr(m.data, "warden_denial_rate_per_second{dim=\"tool\","
				 "key=\"t1/burst\",window=\"short\"} ");
	double rate = p ? strtod(strchr(p, '}') + 2, NULL) : -1;
	T_OK(rate > 3.2 && rate < 3.4, "alert_metrics_rate",
	     "short rate %.3f (want 200/60)", rate);
	/* one TYPE line per family */
	int dup = 0;
	for (char *t = strstr(m.data, "# TYPE "); t;
	     t = strstr(t + 1, "# TYPE ")) {
		char name[128];
		sscanf(t + 7, "%127s", name);
		char pat[160];
		snprintf(pat, sizeof(pat), "# TYPE %s ", name);
		dup += strstr(t + 1, pat) != NULL;
	}
	T_OK(dup == 0, "alert_metrics_families_unique", "%d duplicated", dup);
	wd_buf_free(&m);

	wd_alert_free(a);
	wd_stream_free(st);
	srv_stop(&srv);
}

/* the webhook answers 500 twice, then 200: delivered with 2 retries */
static void test_retry(void)
{
	struct srv srv;
	if (srv_start(&srv, 2, false))
		return;
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	struct wd_stream *st = wd_stream_new(1024);
	struct wd_alert_config c = base_cfg(url);
	c.warmup_s = 1;
	struct wd_alert *a = NULL;
	if (wd_alert_new(&c, st, &a, NULL)) {
		T_FAIL("alert_retry", "wd_alert_new");
		return;
	}
	advance(2 * S);
	for (int i = 0; i < 25; i++)
		pub_sync(a, st, &burst, i);
	int fl = wd_alert_flush(a, 5000);
	struct wd_alert_stats as;
	wd_alert_stats(a, &as);
	bool same =
	    srv_count(&srv) == 3 && !strcmp(srv.bodies[0], srv.bodies[2]);
	T_OK(fl == 0 && as.webhook_sent == 1 && as.webhook_retries == 2 &&
		 as.webhook_failures == 0 && same,
	     "alert_webhook_retry",
	     "sent %llu retries %llu failures %llu "
	     "posts %d",
	     (unsigned long long)as.webhook_sent,
	     (unsigned long long)as.webhook_retries,
	     (unsigned long long)as.webhook_failures, srv_count(&srv));
	wd_alert_free(a);
	wd_stream_free(st);
	srv_stop(&srv);
}

/* nothing listens: retried, then counted as a failure; never blocks */
static void test_dead_webhook(void)
{
	/* a port that was just free: bind, read it, close */
	struct srv tmp;
	srv_start(&tmp, 0, true);
	int port = tmp.port;
	srv_stop(&tmp);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	struct wd_stream *st = wd_stream_new(1024);
	struct wd_alert_config c = base_cfg(url);
	c.warmup_s = 1;
	c.max_retries = 2;
	struct wd_alert *a = NULL;
	if (wd_alert_new(&c, st, &a, NULL)) {
		T_FAIL("alert_dead_webhook", "wd_alert_new");
		return;
	}
	advance(2 * S);
	uint64_t t0 = wd_now_ns();
	for (int i = 0; i < 25; i++)
		pub_sync(a, st, &burst, i);
	uint64_t pub_ms = (wd_now_ns() - t0) / 1000000;
	int fl = wd_alert_flush(a, 5000);
	struct wd_alert_stats as;
	wd_alert_stats(a, &as);
	struct wd_buf m = {0};
	wd_alert_metrics_render(a, &m);
	wd_buf_append(&m, "", 1);
	T_OK(fl == 0 && as.alerts_spike == 1 && as.webhook_failures == 1 &&
		 as.webhook_retries == 2 && as.webhook_sent == 0 &&
		 metric(m.data, "warden_alert_webhook_failures_total") == 1,
	     "alert_dead_webhook_counted",
	     "alerts %llu failures %llu retries %llu",
	     (unsigned long long)as.alerts_spike,
	     (unsigned long long)as.webhook_failures,
	     (unsigned long long)as.webhook_retries);
	T_OK(pub_ms < 1000, "alert_dead_webhook_nonblocking",
	     "publishing took %llu ms", (unsigned long long)pub_ms);
	wd_buf_free(&m);
	wd_alert_free(a);
	wd_stream_free(st);
}

/* a webhook that accepts connections but never answers, a queue of 2 and
 * 10 spikes: the stream keeps flowing, the excess is dropped and counted */
static void test_hung_webhook(void)
{
	struct srv srv;
	if (srv_start(&srv, 0, true))
		return;
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	struct wd_stream *st = wd_stream_new(4096);
	struct wd_alert_config c = base_cfg(url);
	c.warmup_s = 1;
	c.queue_max = 2;
	c.timeout_ms = 3000;
	c.dims = 1u << WD_DIM_TOOL;
	struct wd_alert *a = NULL;
	if (wd_alert_new(&c, st, &a, NULL)) {
		T_FAIL("alert_hung_webhook", "wd_alert_new");
		return;
	}
	advance(2 * S);
	uint64_t t0 = wd_now_ns();
	for (int t = 0; t < 10; t++) {
		char tool[16];
		snprintf(tool, sizeof(tool), "tool%d", t);
		struct evspec e = burst;
		e.tool = tool;
		for (int i = 0; i < 20; i++)
			pub_sync(a, st, &e, i);
	}
	uint64_t ms = (wd_now_ns() - t0) / 1000000;
	struct wd_alert_stats as;
	wd_alert_stats(a, &as);
	T_OK(as.alerts_spike == 10 && as.processed == 200 &&
		 as.webhook_dropped >= 7 && as.queue_depth <= 2 && ms < 1000,
	     "alert_hung_webhook_drops",
	     "alerts %llu processed %llu dropped %llu depth %u in %llu ms",
	     (unsigned long long)as.alerts_spike,
	     (unsigned long long)as.processed,
	     (unsigned long long)as.webhook_dropped, as.queue_depth,
	     (unsigned long long)ms);
	t0 = wd_now_ns();
	wd_alert_free(a); /* bounded by the POST timeout */
	ms = (wd_now_ns() - t0) / 1000000;
	T_OK(ms < 3500, "alert_hung_webhook_shutdown", "free took %llu ms",
	     (unsigned long long)ms);
	wd_stream_free(st);
	srv_stop(&srv);
}

/* a cursor the ring has wrapped past: counted, alerted, in metrics */
static void test_overrun(void)
{
	struct srv srv;
	if (srv_start(&srv, 0, false))
		return;
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	struct wd_stream *st = wd_stream_new(16);
	for (int i = 0; i < 100; i++)
		pub(st, &steady, i);
	wd_stream_set_lost(st, WD_LOST_BPF_RINGBUF, 5);
	struct wd_alert_config c = base_cfg(url);
	c.since_seq = 1; /* wants seq 2; the ring holds 85..100 */
	struct wd_alert *a = NULL;
	if (wd_alert_new(&c, st, &a, NULL)) {
		T_FAIL("alert_overrun", "wd_alert_new");
		return;
	}
	wd_alert_sync(a, 100, 5000);
	wd_alert_flush(a, 5000);
	struct wd_alert_stats as;
	wd_alert_stats(a, &as);
	json_t *j =
	    srv_count(&srv) == 1 ? json_loads(srv.bodies[0], 0, NULL) : NULL;
	const char *type = NULL;
	json_int_t over = -1, bpf = -1, newo = -1;
	if (j)
		json_unpack(j, "{s:s,s:{s:I,s:I},s:{s:I}}", "type", &type,
			    "lost", "overrun", &over, "bpf_ringbuf", &bpf,
			    "lost_new", "overrun", &newo);
	T_OK(as.lost_overrun == 83 && as.processed == 16 &&
		 as.alerts_lost == 1 && type && !strcmp(type, "events_lost") &&
		 over == 83 && bpf == 5 && newo == 83,
	     "alert_overrun_lost",
	     "lost %llu processed %llu loss alerts %llu; json %s %lld %lld",
	     (unsigned long long)as.lost_overrun,
	     (unsigned long long)as.processed,
	     (unsigned long long)as.alerts_lost, type, (long long)over,
	     (long long)bpf);
	json_decref(j);
	struct wd_buf m = {0};
	wd_alert_metrics_render(a, &m);
	wd_buf_append(&m, "", 1);
	T_OK(metric(m.data,
		    "warden_denial_events_lost_total{reason=\"overrun\"}") ==
		     83 &&
		 metric(m.data, "warden_denial_events_lost_total{reason="
				"\"bpf_ringbuf\"}") == 5 &&
		 metric(m.data, "warden_alerts_total{type=\"events_lost\"}") ==
		     1,
	     "alert_overrun_metrics", "metrics disagree");
	wd_buf_free(&m);
	/* more BPF loss inside the cool-down: counted, no second alert */
	wd_stream_set_lost(st, WD_LOST_BPF_RINGBUF, 9);
	wd_alert_sync(a, pub(st, &steady, 200), 5000);
	wd_alert_stats(a, &as);
	m = (struct wd_buf){0};
	wd_alert_metrics_render(a, &m);
	wd_buf_append(&m, "", 1);
	T_OK(as.alerts_lost == 1 &&
		 metric(m.data, "warden_denial_events_lost_total{reason="
				"\"bpf_ringbuf\"}") == 9,
	     "alert_loss_cooldown", "loss alerts %llu",
	     (unsigned long long)as.alerts_lost);
	wd_buf_free(&m);
	wd_alert_free(a);
	wd_stream_free(st);
	srv_stop(&srv);
}

static void test_key_cap(void)
{
	struct wd_stream *st = wd_stream_new(1024);
	struct wd_alert_config c = base_cfg(NULL);
	c.max_keys = 8;
	c.dims = 1u << WD_DIM_TOOL;
	struct wd_alert *a = NULL;
	if (wd_alert_new(&c, st, &a, NULL)) {
		T_FAIL("alert_key_cap", "wd_alert_new");
		return;
	}
	char tool[16];
	struct evspec e = steady;
	e.tool = tool;
	for (int t = 0; t < 20; t++) {
		snprintf(tool, sizeof(tool), "t%d", t);
		pub_sync(a, st, &e, t);
		advance(S);
	}
	struct wd_alert_stats as;
	struct wd_alert_key_view kv;
	wd_alert_stats(a, &as);
	T_OK(as.keys == 8 && as.keys_evicted == 12 &&
		 wd_alert_key(a, WD_DIM_TOOL, "t1/t0", &kv) == -ENOENT &&
		 wd_alert_key(a, WD_DIM_TOOL, "t1/t11", &kv) == -ENOENT &&
		 wd_alert_key(a, WD_DIM_TOOL, "t1/t12", &kv) == 0 &&
		 wd_alert_key(a, WD_DIM_TOOL, "t1/t19", &kv) == 0,
	     "alert_key_cap_evicts", "keys %llu evicted %llu",
	     (unsigned long long)as.keys, (unsigned long long)as.keys_evicted);
	/* touching t12 makes t13 the least recent */
	snprintf(tool, sizeof(tool), "t12");
	pub_sync(a, st, &e, 100);
	snprintf(tool, sizeof(tool), "t20");
	pub_sync(a, st, &e, 101);
	T_OK(wd_alert_key(a, WD_DIM_TOOL, "t1/t12", &kv) == 0 &&
		 kv.short_count == 2 &&
		 wd_alert_key(a, WD_DIM_TOOL, "t1/t13", &kv) == -ENOENT &&
		 wd_alert_key(a, WD_DIM_TOOL, "t1/t20", &kv) == 0,
	     "alert_key_cap_lru", "wrong key evicted");
	wd_alert_free(a);
	wd_stream_free(st);
}

/* Alertmanager's v2 API: the spike is posted as a one-alert array with
 * startsAt and no endsAt, repeated every resend_s while the key is in its
 * spike, and posted with endsAt once the short window no longer is one
 * (without any further event of that key). */
static json_t *am_body(struct srv *s, int i)
{
	pthread_mutex_lock(&s->mu);
	json_t *j = i < s->nreq ? json_loads(s->bodies[i], 0, NULL) : NULL;
	pthread_mutex_unlock(&s->mu);
	return j;
}

static bool wait_posts(struct srv *s, int n)
{
	for (int i = 0; i < 500 && srv_count(s) < n; i++)
		usleep(10000);
	return srv_count(s) >= n;
}

static const char *am_label(json_t *arr, const char *name)
{
	return json_string_value(json_object_get(
	    json_object_get(json_array_get(arr, 0), "labels"), name));
}

static void test_alertmanager(void)
{
	struct srv srv;
	if (srv_start(&srv, 0, false)) {
		T_FAIL("am_server", "cannot start loopback server");
		return;
	}
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	struct wd_stream *st = wd_stream_new(4096);
	struct wd_alert_config c = base_cfg(NULL);
	c.alertmanager_url = url;
	c.generator_url = "http://127.0.0.1:9464/metrics";
	c.resend_s = 10;
	c.dims = 1u << WD_DIM_TOOL; /* one key: posts in order */
	struct wd_alert *a = NULL;
	struct wd_err err = {0};
	if (wd_alert_new(&c, st, &a, &err)) {
		T_FAIL("am_new", "%s", err.msg);
		srv_stop(&srv);
		wd_stream_free(st);
		return;
	}
	advance(200 * S); /* past the warm-up */
	for (int i = 0; i < 30; i++) {
		pub_sync(a, st, &burst, i);
		advance(S / 10);
	}
	bool got = wait_posts(&srv, 1);
	json_t *b0 = am_body(&srv, 0);
	json_t *a0 = json_array_get(b0, 0);
	T_OK(got && json_array_size(b0) == 1 &&
		 !strcmp(srv.line[0], "POST /api/v2/alerts HTTP/1.1") &&
		 !strcmp(srv.ctype[0], "application/json"),
	     "am_post_v2_alerts", "%d posts, line '%s', type '%s'",
	     srv_count(&srv), srv.line[0], srv.ctype[0]);
	const char *last = json_string_value(
	    json_object_get(json_object_get(a0, "annotations"), "last_event"));
	T_OK(
	    am_label(b0, "alertname") &&
		!strcmp(am_label(b0, "alertname"), "WardenDaemonDenialSpike") &&
		am_label(b0, "tool") &&
		!strcmp(am_label(b0, "tool"), "burst") &&
		am_label(b0, "team") && !strcmp(am_label(b0, "team"), "t1") &&
		!strcmp(am_label(b0, "dim"), "tool") &&
		!strcmp(am_label(b0, "node"), "testnode") &&
		json_string_value(json_object_get(a0, "startsAt")) &&
		!json_object_get(a0, "endsAt") &&
		!strcmp(json_string_value(json_object_get(a0, "generatorURL")),
			"http://127.0.0.1:9464/metrics") &&
		last && strstr(last, "run run-burst step 19 tool burst"),
	    "am_alert_shape", "%s", srv_count(&srv) ? srv.bodies[0] : "-");
	/* still in its spike 11 s later: repeated, still without endsAt */
	advance(11 * S);
	got = wait_posts(&srv, 2);
	json_t *b1 = am_body(&srv, 1);
	T_OK(got && am_label(b1, "tool") &&
		 !strcmp(am_label(b1, "tool"), "burst") &&
		 !json_object_get(json_array_get(b1, 0), "endsAt") &&
		 json_equal(json_object_get(json_array_get(b1, 0), "startsAt"),
			    json_object_get(a0, "startsAt")),
	     "am_repeat_while_firing", "%s",
	     srv_count(&srv) > 1 ? srv.bodies[1] : "-");
	/* the short window passes with no more events: resolved */
	advance(61 * S);
	got = wait_posts(&srv, 3);
	json_t *b2 = am_body(&srv, 2);
	const char *ends =
	    json_string_value(json_object_get(json_array_get(b2, 0), "endsAt"));
	T_OK(got && am_label(b2, "tool") &&
		 !strcmp(am_label(b2, "tool"), "burst") && ends &&
		 strcmp(ends,
			json_string_value(json_object_get(a0, "startsAt"))) > 0,
	     "am_resolve_endsat", "%s",
	     srv_count(&srv) > 2 ? srv.bodies[2] : "-");
	struct wd_alert_stats as;
	wd_alert_flush(a, 5000);
	wd_alert_stats(a, &as);
	T_OK(as.am_sent == 3 && as.am_active == 0, "am_stats",
	     "sent %llu active %u", (unsigned long long)as.am_sent,
	     as.am_active);
	json_decref(b0);
	json_decref(b1);
	json_decref(b2);
	wd_alert_free(a);
	srv_stop(&srv);
	wd_stream_free(st);
}

static struct wd_alert *am_alerter(struct srv *srv, struct wd_stream *st,
				   uint32_t dims)
{
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv->port);
	struct wd_alert_config c = base_cfg(NULL);
	c.alertmanager_url = url;
	c.resend_s = 10;
	c.dims = dims;
	struct wd_alert *a = NULL;
	struct wd_err err = {0};
	if (wd_alert_new(&c, st, &a, &err))
		T_FAIL("am_alerter", "%s", err.msg);
	return a;
}

/* fire -> resolve -> the same key spikes again within the 300 s
 * cool-down: Alertmanager is sent the alert again (its state follows the
 * truth); the webhook's cool-down spared a post, counted as suppressed */
static void test_am_refire(void)
{
	struct srv srv;
	if (srv_start(&srv, 0, false)) {
		T_FAIL("am_refire_server", "cannot start loopback server");
		return;
	}
	struct wd_stream *st = wd_stream_new(4096);
	struct wd_alert *a = am_alerter(&srv, st, 1u << WD_DIM_TOOL);
	if (!a) {
		srv_stop(&srv);
		wd_stream_free(st);
		return;
	}
	advance(200 * S);
	for (int i = 0; i < 30; i++) {
		pub_sync(a, st, &burst, i);
		advance(S / 10);
	}
	bool fired = wait_posts(&srv, 1);
	advance(61 * S); /* a quiet short window: resolved */
	bool resolved = wait_posts(&srv, 2);
	json_t *b1 = am_body(&srv, 1);
	T_OK(fired && resolved &&
		 json_object_get(json_array_get(b1, 0), "endsAt"),
	     "am_refire_resolved", "%d posts; second '%s'", srv_count(&srv),
	     srv_count(&srv) > 1 ? srv.bodies[1] : "-");
	/* 64 s after the first alert, well within the cool-down; the
	 * baseline now holds the first burst (30 events in ~264 s: ~8.8
	 * a window, threshold ~44): 60 events cross it */
	for (int i = 0; i < 60; i++) {
		pub_sync(a, st, &burst, 100 + i);
		advance(S / 10);
	}
	bool again = wait_posts(&srv, 3);
	json_t *b2 = am_body(&srv, 2);
	json_t *a2 = json_array_get(b2, 0);
	const char *last = json_string_value(
	    json_object_get(json_object_get(a2, "annotations"), "last_event"));
	T_OK(again && json_array_size(b2) == 1 && am_label(b2, "tool") &&
		 !strcmp(am_label(b2, "tool"), "burst") &&
		 !json_object_get(a2, "endsAt") &&
		 json_object_get(a2, "startsAt") && last &&
		 strstr(last, "run run-burst step 1"),
	     "am_refire_within_cooldown", "%d posts; third '%s'",
	     srv_count(&srv), srv_count(&srv) > 2 ? srv.bodies[2] : "-");
	struct wd_alert_stats as;
	wd_alert_stats(a, &as);
	struct wd_buf m = {0};
	wd_alert_metrics_render(a, &m);
	T_OK(as.am_active == 1 && as.alerts == 1 &&
		 metric(m.data, "warden_alerts_suppressed_total") == 1,
	     "am_refire_webhook_suppressed_counted",
	     "active %u alerts %llu suppressed %lld", as.am_active,
	     (unsigned long long)as.alerts,
	     metric(m.data, "warden_alerts_suppressed_total"));
	wd_buf_free(&m);
	json_decref(b1);
	json_decref(b2);
	wd_alert_free(a);
	srv_stop(&srv);
	wd_stream_free(st);
}

/* find the alert of dimension `dim` among the first n posts */
static json_t *am_find(struct srv *s, int n, const char *dim)
{
	for (int i = 0; i < n; i++) {
		json_t *b = am_body(s, i), *x;
		size_t k;
		json_array_foreach(b, k, x)
		{
			const char *d = json_string_value(json_object_get(
			    json_object_get(x, "labels"), "dim"));
			if (d && !strcmp(d, dim) &&
			    !json_object_get(x, "endsAt")) {
				json_t *l =
				    json_incref(json_object_get(x, "labels"));
				json_decref(b);
				return l;
			}
		}
		json_decref(b);
	}
	return NULL;
}

static bool lbl(json_t *l, const char *name, const char *want)
{
	const char *v = json_string_value(json_object_get(l, name));
	return want ? v && !strcmp(v, want) : !v;
}

/* Every key crossing on the same event is its own Alertmanager alert;
 * the keys of one team carry team (and agent) labels to route on */
static void test_am_keys(void)
{
	struct srv srv;
	if (srv_start(&srv, 0, false)) {
		T_FAIL("am_keys_server", "cannot start loopback server");
		return;
	}
	struct wd_stream *st = wd_stream_new(4096);
	struct wd_alert *a = am_alerter(&srv, st, 0); /* every dimension */
	if (!a) {
		srv_stop(&srv);
		wd_stream_free(st);
		return;
	}
	advance(200 * S);
	for (int i = 0; i < 30; i++) {
		pub_sync(a, st, &burst, i);
		advance(S / 10);
	}
	bool got = wait_posts(&srv, WD_DIM_NR);
	int n = srv_count(&srv);
	json_t *tool = am_find(&srv, n, "tool"),
	       *agent = am_find(&srv, n, "agent"),
	       *team = am_find(&srv, n, "team"),
	       *kind = am_find(&srv, n, "kind"),
	       *source = am_find(&srv, n, "source"),
	       *node = am_find(&srv, n, "node");
	T_OK(got && tool && agent && team && kind && source && node,
	     "am_each_crossing_key_posted",
	     "%d posts; tool %d agent %d team %d kind %d source %d node %d", n,
	     !!tool, !!agent, !!team, !!kind, !!source, !!node);
	cleanup_free char *tj = tool ? json_dumps(tool, JSON_COMPACT) : NULL;
	cleanup_free char *aj = agent ? json_dumps(agent, JSON_COMPACT) : NULL;
	T_OK(lbl(tool, "team", "t1") && lbl(tool, "tool", "burst") &&
		 lbl(agent, "team", "t1") && lbl(agent, "agent", "a1") &&
		 lbl(team, "team", "t1") && lbl(kind, "source", "seccomp") &&
		 lbl(kind, "kind", "syscall") && lbl(kind, "team", NULL) &&
		 lbl(node, "team", NULL) && lbl(node, "node", "testnode"),
	     "am_team_labels", "tool %s agent %s", tj ? tj : "-",
	     aj ? aj : "-");
	struct wd_alert_stats as;
	wd_alert_stats(a, &as);
	T_OK(as.am_active == WD_DIM_NR && as.alerts == 1, "am_keys_active",
	     "active %u, webhook alerts %llu", as.am_active,
	     (unsigned long long)as.alerts);
	json_decref(tool);
	json_decref(agent);
	json_decref(team);
	json_decref(kind);
	json_decref(source);
	json_decref(node);
	wd_alert_free(a);
	srv_stop(&srv);
	wd_stream_free(st);
}

/* generatorURL: given (checked), derived from --metrics, never a
 * wildcard address */
static void test_generator_url(void)
{
	struct {
		const char *given, *metrics, *host, *want;
		int rc;
	} c[] = {
	    {NULL, NULL, "n1", NULL, 0},
	    {NULL, "127.0.0.1:9464", "n1", "http://127.0.0.1:9464/metrics", 0},
	    {NULL, "0.0.0.0:9464", "n1.example",
	     "http://n1.example:9464/metrics", 0},
	    {NULL, ":9464", "n1", "http://127.0.0.1:9464/metrics", 0},
	    {NULL, "0.0.0.0:9464", "", "http://0.0.0.0:9464/metrics", 0},
	    {NULL, "9464", "n1", NULL, -EINVAL},
	    {"https://grafana.example/d/warden", "0.0.0.0:9464", "n1",
	     "https://grafana.example/d/warden", 0},
	    {"ftp://x/", NULL, "n1", NULL, -EINVAL},
	    {"http://", NULL, "n1", NULL, -EINVAL},
	    {"http://a b/", NULL, "n1", NULL, -EINVAL},
	    {"grafana.example", NULL, "n1", NULL, -EINVAL},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(c); i++) {
		char *out = (char *)1;
		struct wd_err err = {0};
		int rc = wd_alert_generator_url(c[i].given, c[i].metrics,
						c[i].host, &out, &err);
		bool ok =
		    rc == c[i].rc &&
		    (c[i].want ? out && !strcmp(out, c[i].want) : !out) &&
		    (rc == 0 || strstr(err.msg, "--alert-generator-url") ||
		     strstr(err.msg, "--metrics wants ADDR:PORT"));
		T_OK(ok, "alert_generator_url", "case %zu: rc %d out '%s' (%s)",
		     i, rc, out ? out : "(null)", err.msg);
		free(out);
	}
}

/* More alerts than the client tracks: the rest are counted, not lost
 * silently (warden_alertmanager_overflow_total) */
static void test_am_overflow(void)
{
	/* nothing listens on port 1: the posts fail, the count is what
	 * matters */
	struct wd_am *am =
	    wd_am_new("http://127.0.0.1:1/", NULL, 60 * S, 200, 0, 1);
	if (!am) {
		T_FAIL("am_overflow_new", "wd_am_new: %s", strerror(errno));
		return;
	}
	for (int i = 0; i < 260; i++) {
		char id[16];
		snprintf(id, sizeof(id), "k%d", i);
		wd_am_fire(am, id,
			   json_pack("{s:s,s:s}", "alertname", "X", "k", id),
			   json_object(), fake_clock(NULL), wd_wall_ns());
	}
	T_OK(wd_am_active(am) == 256 && wd_am_overflow(am) == 4,
	     "am_overflow_counted", "active %d overflow %llu", wd_am_active(am),
	     (unsigned long long)wd_am_overflow(am));
	wd_am_free(am);
}

/* Loss read through the stream's probe (as wardend reads its own BPF
 * consumer's count, runtime.c bpf_loss_probe): no pump call, no
 * wd_stream_set_lost; the alerter's loop reads it, counts it in
 * /metrics and raises events_lost. */
static uint64_t probe_total;
static int probe_calls;
static int fake_probe(void *arg, uint64_t *total)
{
	__atomic_add_fetch(&probe_calls, 1, __ATOMIC_SEQ_CST);
	/* arg: a factor, so each source has a count of its own */
	*total = __atomic_load_n(&probe_total, __ATOMIC_SEQ_CST) *
		 (uint64_t)(arg ? (intptr_t)arg : 1);
	return 0;
}

static void test_loss_probe(void)
{
	struct wd_stream *st = wd_stream_new(64);
	wd_stream_set_loss_probe(st, WD_LOST_BPF_RINGBUF, fake_probe, NULL);
	wd_stream_set_loss_probe(st, WD_LOST_BPF_UNROUTED, fake_probe,
				 (void *)(intptr_t)2);
	wd_stream_set_loss_probe(st, WD_LOST_LANDLOCK_AUDIT, fake_probe,
				 (void *)(intptr_t)3);
	struct wd_alert_config c = base_cfg(NULL);
	struct wd_alert *a = NULL;
	struct wd_err err = {0};
	if (wd_alert_new(&c, st, &a, &err)) {
		T_FAIL("loss_probe_new", "%s", err.msg);
		wd_stream_free(st);
		return;
	}
	__atomic_store_n(&probe_total, 7, __ATOMIC_SEQ_CST);
	struct wd_alert_stats as = {0};
	for (int i = 0; i < 300 && !as.alerts_lost; i++) {
		usleep(10000);
		wd_alert_stats(a, &as);
	}
	struct wd_buf m = {0};
	wd_alert_metrics_render(a, &m);
	T_OK(as.alerts_lost == 1 &&
		 metric(m.data, "warden_denial_events_lost_total{reason="
				"\"bpf_ringbuf\"}") == 7 &&
		 metric(m.data, "warden_denial_events_lost_total{reason="
				"\"bpf_unrouted\"}") == 14 &&
		 metric(m.data, "warden_denial_events_lost_total{reason="
				"\"landlock_audit\"}") == 21 &&
		 metric(m.data, "warden_denial_events_lost_total{reason="
				"\"bpf_invalid\"}") == 0,
	     "loss_probe_counted_and_alerted",
	     "alerts_lost %llu, probe calls %d",
	     (unsigned long long)as.alerts_lost, probe_calls);
	struct wd_stream_stats ss;
	wd_stream_stats(st, &ss);
	T_OK(ss.lost[WD_LOST_BPF_RINGBUF] == 7, "loss_probe_in_stream", "%llu",
	     (unsigned long long)ss.lost[WD_LOST_BPF_RINGBUF]);
	wd_buf_free(&m);
	wd_alert_free(a);
	wd_stream_free(st);
}

int main(void)
{
	wd_log_set_level(WD_LOG_ERROR);
	test_config();
	test_spikes();
	test_retry();
	test_dead_webhook();
	test_hung_webhook();
	test_overrun();
	test_key_cap();
	test_alertmanager();
	test_am_refire();
	test_am_keys();
	test_am_overflow();
	test_generator_url();
	test_loss_probe();
	return T_DONE();
}
