/* The node-wide event stream: order, overrun accounting, blocking reads,
 * concurrent publishers, the JSON-lines rendering of GET /v1/events, and
 * `warden events` against an HTTP server on a unix socket started here. */
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "common/util.h"
#include "events/stream.h"
#include "t.h"

static struct wd_event mkev(int i)
{
	struct wd_event e = {0};
	e.ts_ns = wd_wall_ns();
	e.source = WD_SRC_BPF;
	e.pid = 1000 + i;
	e.syscall_nr = -1;
	e.step = -1;
	snprintf(e.kind, sizeof(e.kind), "connect");
	snprintf(e.target, sizeof(e.target), "127.0.0.1:%d", i);
	e.err = EPERM;
	return e;
}

static void attrib_step(struct wd_event *ev, void *arg)
{
	ev->step = ev->pid; /* visible proof the callback saw this event */
}

/* Event lines are written directly (wd_event_json_members): the same
 * bytes as json_dumps(wd_stream_entry_json(), JSON_COMPACT), escapes and
 * optional members included; a string that is not UTF-8 still gives valid
 * JSON (jansson would drop the member). */
static void render_equals_jansson(void)
{
	struct wd_event v[6];
	for (int i = 0; i < 6; i++)
		v[i] = mkev(i);
	v[0].ts_ns = 1700000000123456789ull;
	v[1].ts_ns = 1700000000999999999ull; /* same second, other us */
	snprintf(v[1].target, sizeof(v[1].target),
		 "/a\"b\\c/\x01\x1f\t\n\r"
		 "\b\f\x7f/\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	v[2].source = WD_SRC_LANDLOCK;
	v[2].verdict = WD_VERDICT_AUDITED;
	v[2].domain_id = 0xabcdef0123ull;
	v[2].syscall_nr = 59;
	snprintf(v[2].syscall, sizeof(v[2].syscall), "execve");
	v[2].cgroup_id = 0xfffffffffffffff0ull; /* prints negative, as now */
	snprintf(v[3].call_id, sizeof(v[3].call_id), "c-1");
	snprintf(v[3].run_id, sizeof(v[3].run_id), "r-1");
	v[3].step = 7;
	snprintf(v[3].tool, sizeof(v[3].tool), "t\u00e9");
	snprintf(v[3].agent, sizeof(v[3].agent), "a");
	snprintf(v[3].team, sizeof(v[3].team), "team");
	v[3].pid = -1;
	v[4].target[0] = 0; /* no target member */
	v[4].ts_ns = 0;
	memset(v[5].target, 'x', sizeof(v[5].target)); /* unterminated */
	struct wd_stream *s = wd_stream_new(16);
	for (int i = 0; i < 6; i++)
		wd_stream_publish(s, &v[i]);
	struct wd_stream_cursor c;
	wd_stream_cursor_init(&c, 0);
	struct wd_buf out = {0};
	int n = wd_stream_render(s, &c, &out, 100, 0);
	wd_buf_append(&out, "", 1);
	struct wd_stream_entry ent[6];
	wd_stream_cursor_init(&c, 0);
	wd_stream_read(s, &c, ent, 6, 0);
	int same = 0, k = 0;
	char why[600] = "";
	for (char *save, *l = strtok_r(out.data, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (strstr(l, "\"type\":\"loss\""))
			continue;
		json_t *o = wd_stream_entry_json(&ent[k]);
		char *want = json_dumps(o, JSON_COMPACT);
		if (want && !strcmp(want, l))
			same++;
		else if (!why[0])
			snprintf(why, sizeof(why),
				 "line %d: got %.250s want %.250s", k, l,
				 want ? want : "(null)");
		free(want);
		json_decref(o);
		k++;
	}
	T_OK(n == 6 && k == 6 && same == 6, "stream_render_same_json",
	     "n=%d lines=%d same=%d %s", n, k, same, why);
	wd_buf_free(&out);

	/* not UTF-8: still one valid JSON line, the byte as U+FFFD */
	struct wd_event bad = mkev(9);
	snprintf(bad.target, sizeof(bad.target), "/x\xff\xc3(\xed\xa0\x80y");
	wd_stream_publish(s, &bad);
	n = wd_stream_render(s, &c, &out, 100, 0);
	wd_buf_append(&out, "", 1);
	json_t *o = NULL;
	for (char *save, *l = strtok_r(out.data, "\n", &save); l && !o;
	     l = strtok_r(NULL, "\n", &save))
		if (strstr(l, "\"type\":\"event\""))
			o = json_loads(l, 0, NULL);
	const char *t = json_string_value(json_object_get(o, "target"));
	T_OK(n == 1 && t &&
		 !strcmp(t, "/x\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd"
			    "\xef\xbf\xbd\xef\xbf\xbdy"),
	     "stream_render_not_utf8", "n=%d target '%s'", n, t ? t : "(none)");
	json_decref(o);
	wd_buf_free(&out);
	wd_stream_free(s);
}

struct pub_arg {
	struct wd_stream *s;
	int n;
};
static void *publisher(void *p)
{
	struct pub_arg *a = p;
	for (int i = 0; i < a->n; i++) {
		struct wd_event e = mkev(i);
		wd_stream_publish(a->s, &e);
	}
	return NULL;
}

static void *late_publisher(void *p)
{
	usleep(100 * 1000);
	struct wd_event e = mkev(7);
	wd_stream_publish(p, &e);
	return NULL;
}

/* ---- a minimal /v1/events server, as wardend would serve it ---- */
struct srv_conn {
	struct wd_stream *s;
	struct wd_stream_cursor c;
	bool follow;
	struct wd_buf pending;
	size_t off;
};

static ssize_t srv_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct srv_conn *k = cls;
	if (k->off == k->pending.len) {
		k->pending.len = k->off = 0;
		int n = wd_stream_render(k->s, &k->c, &k->pending, 256,
					 k->follow ? 200 : 0);
		if (n < 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (!k->pending.len)
			return k->follow ? 0 : MHD_CONTENT_READER_END_OF_STREAM;
		if (!k->follow && n == 0 && k->c.shown_once && k->pending.len &&
		    k->off == 0) {
			/* the final loss line of a non-follow answer */
		}
	}
	size_t n = WD_MIN(max, k->pending.len - k->off);
	memcpy(buf, k->pending.data + k->off, n);
	k->off += n;
	return (ssize_t)n;
}

static void srv_free(void *cls)
{
	struct srv_conn *k = cls;
	wd_buf_free(&k->pending);
	free(k);
}

static enum MHD_Result srv_handler(void *cls, struct MHD_Connection *conn,
				   const char *url, const char *method,
				   const char *ver, const char *data,
				   size_t *size, void **state)
{
	if (!*state) { /* first call: headers only */
		*state = (void *)1;
		return MHD_YES;
	}
	struct srv_conn *k = wd_calloc(1, sizeof(*k));
	k->s = cls;
	const char *since =
	    MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "since");
	const char *follow =
	    MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "follow");
	wd_stream_cursor_init(&k->c, since ? strtoull(since, NULL, 10) : 0);
	k->follow = follow && !strcmp(follow, "1");
	struct MHD_Response *r = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, 4096, srv_read, k, srv_free);
	MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
	enum MHD_Result ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

static const char *warden_bin(void)
{
	static char p[256];
	const char *b = getenv("BUILD");
	snprintf(p, sizeof(p), "%s/warden", b && *b ? b : "build");
	return p;
}

/* Run warden with args, capture stdout (and exit code). */
static int run_cli(char *const argv[], char *out, size_t outlen)
{
	int pfd[2];
	if (pipe(pfd))
		return -1;
	pid_t p = fork();
	if (p == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < outlen &&
	       (r = read(pfd[0], out + n, outlen - 1 - n)) > 0)
		n += r;
	out[n] = 0;
	close(pfd[0]);
	int st;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static int count_lines(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void cli_tests(void)
{
	const char *bin = warden_bin();
	if (access(bin, X_OK)) {
		T_SKIP("cli_events", "%s not built", bin);
		return;
	}
	char out[1 << 16];
	char *nod[] = {(char *)bin, "events", "--socket",
		       "/nonexistent/warden.sock", NULL};
	int rc = run_cli(nod, out, sizeof(out));
	T_OK(rc == 1 && strstr(out, "wardend is not running: no socket at"),
	     "cli_without_daemon", "exit %d, output '%s'", rc, out);

	char sock[108];
	snprintf(sock, sizeof(sock), "/tmp/warden-evtest-%d.sock",
		 (int)getpid());
	unlink(sock);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	wd_strlcpy(sun.sun_path, sock, sizeof(sun.sun_path));
	if (lfd < 0 || bind(lfd, (void *)&sun, sizeof(sun)) ||
	    listen(lfd, 16)) {
		T_FAIL("cli_server", "unix socket %s: %s", sock,
		       strerror(errno));
		return;
	}
	struct wd_stream *s = wd_stream_new(1024);
	for (int i = 0; i < 5; i++) {
		struct wd_event e = mkev(i);
		wd_stream_publish(s, &e);
	}
	wd_stream_set_lost(s, WD_LOST_BPF_RINGBUF, 3);
	wd_stream_set_lost(s, WD_LOST_BPF_UNROUTED, 2);
	struct MHD_Daemon *d = MHD_start_daemon(
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
	    NULL, NULL, srv_handler, s, MHD_OPTION_LISTEN_SOCKET, lfd,
	    MHD_OPTION_END);
	if (!d) {
		T_FAIL("cli_server", "MHD_start_daemon failed");
		return;
	}
	char *js[] = {(char *)bin, "events", "--json", "--socket", sock, NULL};
	rc = run_cli(js, out, sizeof(out));
	T_OK(rc == 0 && count_lines(out, "\"type\":\"event\"") == 5 &&
		 strstr(out, "\"bpf_ringbuf\":3") &&
		 strstr(out, "\"bpf_unrouted\":2") &&
		 strstr(out, "\"landlock_audit\":0") &&
		 strstr(out, "\"seq\":5"),
	     "cli_json", "exit %d, output '%.300s'", rc, out);
	char *tx[] = {(char *)bin, "events", "--since", "3",
		      "--socket",  sock,     NULL};
	rc = run_cli(tx, out, sizeof(out));
	T_OK(rc == 0 && count_lines(out, "connect") == 2 &&
		 strstr(out, "127.0.0.1:4") &&
		 strstr(out, "lost: bpf_ringbuf=3 bpf_invalid=0 "
			     "bpf_unrouted=2 landlock_audit=0 overrun=0"),
	     "cli_text_since", "exit %d, output '%.300s'", rc, out);

	/* --follow: an event published later reaches the follower */
	int pfd[2];
	if (pipe(pfd) == 0) {
		pid_t p = fork();
		if (p == 0) {
			dup2(pfd[1], 1);
			execl(bin, bin, "events", "--follow", "--json",
			      "--since", "5", "--socket", sock, (char *)NULL);
			_exit(127);
		}
		close(pfd[1]);
		usleep(300 * 1000);
		struct wd_event e = mkev(42);
		uint64_t t0 = wd_now_ns();
		wd_stream_publish(s, &e);
		char buf[4096] = "";
		size_t n = 0;
		uint64_t lat = 0;
		while (n < sizeof(buf) - 1) {
			ssize_t r = read(pfd[0], buf + n, sizeof(buf) - 1 - n);
			if (r <= 0)
				break;
			n += r;
			buf[n] = 0;
			if (strstr(buf, "127.0.0.1:42")) {
				lat = wd_now_ns() - t0;
				break;
			}
		}
		kill(p, SIGTERM);
		waitpid(p, NULL, 0);
		close(pfd[0]);
		T_OK(lat > 0, "cli_follow", "followed output '%.200s'", buf);
		if (lat)
			printf("# follow latency %.2f ms\n", lat / 1e6);
	}
	MHD_stop_daemon(d);
	close(lfd);
	unlink(sock);
	wd_stream_shutdown(s);
	wd_stream_free(s);
}

int main(void)
{
	struct wd_stream_entry buf[64];
	struct wd_stream_cursor c;

	/* order and seq */
	struct wd_stream *s = wd_stream_new(16);
	for (int i = 0; i < 10; i++) {
		struct wd_event e = mkev(i);
		wd_stream_publish(s, &e);
	}
	wd_stream_cursor_init(&c, 0);
	int n = wd_stream_read(s, &c, buf, 64, 0);
	bool ordered = n == 10;
	for (int i = 0; ordered && i < n; i++)
		ordered =
		    buf[i].seq == (uint64_t)i + 1 && buf[i].ev.pid == 1000 + i;
	T_OK(ordered && c.lost == 0, "stream_order", "n=%d", n);
	wd_stream_cursor_init(&c, 7);
	n = wd_stream_read(s, &c, buf, 64, 0);
	T_OK(n == 3 && buf[0].seq == 8, "stream_since", "n=%d", n);

	/* overrun: capacity 16, 40 published, a cursor at 1 misses 24 */
	for (int i = 10; i < 40; i++) {
		struct wd_event e = mkev(i);
		wd_stream_publish(s, &e);
	}
	wd_stream_cursor_init(&c, 0);
	n = wd_stream_read(s, &c, buf, 64, 0);
	struct wd_stream_stats st;
	wd_stream_stats(s, &st);
	T_OK(n == 16 && c.lost == 24 && buf[0].seq == 25 && st.overrun == 24 &&
		 st.published == 40 && st.oldest == 25,
	     "stream_overrun_counted", "n=%d lost=%llu first=%llu", n,
	     (unsigned long long)c.lost, (unsigned long long)buf[0].seq);

	/* batch publish: one lock for n events, same order and seqs as n
	 * single publishes; attribution applied to each; a batch larger
	 * than the ring overruns a reader by exactly the events it missed */
	struct wd_stream *sb = wd_stream_new(8);
	wd_stream_set_attrib(sb, attrib_step, NULL);
	struct wd_event be[12];
	for (int i = 0; i < 12; i++)
		be[i] = mkev(i);
	uint64_t lastb = wd_stream_publish_batch(sb, be, 3);
	struct wd_stream_cursor cb;
	wd_stream_cursor_init(&cb, 0);
	n = wd_stream_read(sb, &cb, buf, 64, 0);
	bool bok = lastb == 3 && n == 3;
	for (int i = 0; bok && i < n; i++)
		bok = buf[i].seq == (uint64_t)i + 1 &&
		      buf[i].ev.pid == 1000 + i && buf[i].ev.step == 1000 + i;
	T_OK(bok && wd_stream_publish_batch(sb, be, 0) == 0, "stream_batch",
	     "last=%llu n=%d", (unsigned long long)lastb, n);
	lastb = wd_stream_publish_batch(sb, be + 3, 9); /* seqs 4..12 */
	n = wd_stream_read(sb, &cb, buf, 64, 0);
	T_OK(lastb == 12 && n == 8 && cb.lost == 1 && buf[0].seq == 5 &&
		 buf[7].seq == 12 && buf[7].ev.pid == 1011,
	     "stream_batch_overrun", "last=%llu n=%d lost=%llu first=%llu",
	     (unsigned long long)lastb, n, (unsigned long long)cb.lost,
	     n ? (unsigned long long)buf[0].seq : 0ull);
	wd_stream_free(sb);

	render_equals_jansson();

	/* timeout and blocking read */
	uint64_t t0 = wd_now_ns();
	n = wd_stream_read(s, &c, buf, 64, 50);
	uint64_t dt = wd_now_ns() - t0;
	T_OK(n == 0 && dt >= 45 * 1000000ull, "stream_read_timeout",
	     "n=%d after %llu ns", n, (unsigned long long)dt);
	pthread_t th;
	pthread_create(&th, NULL, late_publisher, s);
	n = wd_stream_read(s, &c, buf, 64, 5000);
	pthread_join(th, NULL);
	T_OK(n == 1 && buf[0].seq == 41, "stream_read_wakes", "n=%d", n);

	/* render: loss line then event lines, valid JSON */
	wd_stream_set_lost(s, WD_LOST_BPF_RINGBUF, 7);
	wd_stream_set_lost(s, WD_LOST_BPF_RINGBUF, 5); /* never goes down */
	struct wd_buf out = {0};
	wd_stream_cursor_init(&c, 38);
	n = wd_stream_render(s, &c, &out, 100, 0);
	wd_buf_append(&out, "", 1);
	int lines = 0, events = 0, loss_ok = 0;
	for (char *save, *l = strtok_r(out.data, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		json_t *o = json_loads(l, 0, NULL);
		lines++;
		const char *ty = json_string_value(json_object_get(o, "type"));
		if (ty && !strcmp(ty, "event") &&
		    json_integer_value(json_object_get(o, "seq")) ==
			38 + events + 1)
			events++;
		if (ty && !strcmp(ty, "loss") &&
		    json_integer_value(json_object_get(o, "bpf_ringbuf")) == 7)
			loss_ok++;
		json_decref(o);
	}
	T_OK(n == 3 && events == 3 && loss_ok == 1 && lines == 4,
	     "stream_render_lines", "n=%d lines=%d events=%d loss=%d", n, lines,
	     events, loss_ok);
	wd_buf_free(&out);

	wd_stream_shutdown(s);
	n = wd_stream_read(s, &c, buf, 64, -1);
	T_OK(n == -EPIPE, "stream_shutdown", "read gave %d", n);
	wd_stream_free(s);

	/* concurrent publishers, one live subscriber: no gaps, no loss */
	s = wd_stream_new(1 << 17);
	struct pub_arg pa = {.s = s, .n = 25000};
	pthread_t pubs[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&pubs[i], NULL, publisher, &pa);
	wd_stream_cursor_init(&c, 0);
	uint64_t expect = 1, got = 0;
	bool gapless = true;
	while (got < 100000) {
		n = wd_stream_read(s, &c, buf, 64, 2000);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
			gapless &= buf[i].seq == expect++;
		got += n;
	}
	for (int i = 0; i < 4; i++)
		pthread_join(pubs[i], NULL);
	T_OK(got == 100000 && gapless && c.lost == 0,
	     "stream_concurrent_publish", "got %llu gapless %d lost %llu",
	     (unsigned long long)got, gapless, (unsigned long long)c.lost);
	wd_stream_free(s);

	cli_tests();
	return T_DONE();
}
