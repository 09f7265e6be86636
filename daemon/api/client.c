#include "api/client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
	struct wd_buf *b = ud;
	/* a runaway daemon response must not exhaust the CLI */
	if (b->len + sz * n > 256u << 20)
		return 0;
	wd_buf_append(b, p, sz * n);
	return sz * n;
}

/* Seconds to wait for an answer ($WARDEN_TIMEOUT, default 60). A stream
 * instead must not stay silent longer than this (the daemon writes a
 * keep-alive line every 10 s), so a hung daemon is told apart from a quiet
 * run. */
static long answer_timeout_s(void)
{
	const char *e = getenv("WARDEN_TIMEOUT");
	unsigned long long v = 60;
	if (e && *e && wd_parse_uint(e, 1, 86400, &v))
		v = 60; /* refused before any call: wd_api_timeout_check */
	return (long)v;
}

/* A $WARDEN_TIMEOUT that is no count of seconds ("5m", "0") is refused,
 * not replaced by the default. */
int wd_api_timeout_check(struct wd_err *err)
{
	const char *e = getenv("WARDEN_TIMEOUT");
	unsigned long long v;
	if (!e || !*e || !wd_parse_uint(e, 1, 86400, &v))
		return 0;
	return wd_err_set(err, -EINVAL,
			  "WARDEN_TIMEOUT wants whole seconds, 1 to 86400, "
			  "not '%s'",
			  e);
}

static CURL *make_handle(const char *socket, const char *method,
			 const char *path, struct curl_slist **hdrs)
{
	pthread_once(&curl_once, curl_init);
	CURL *c = curl_easy_init();
	if (!c)
		return NULL;
	cleanup_free char *url = wd_asprintf("http://wardend%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	*hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	*hdrs = curl_slist_append(*hdrs, "Accept: application/json");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
	return c;
}

/* Tell the operator which of these it is: nobody there (not running),
 * there but not taking connections (backlog full), there but silent
 * (timed out), or gone mid-request. A daemon that refuses a connection on
 * its limits answers 503 with the reason instead (a response, not a
 * transport error). */
static int transport_err(CURL *c, CURLcode rc, const char *socket,
			 struct wd_err *err)
{
	long oserr = 0;
	curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &oserr);
	if (rc == CURLE_COULDNT_CONNECT && (oserr == ENOENT || !oserr) &&
	    access(socket, F_OK) < 0)
		return wd_err_set(err, -ENOENT,
				  "wardend is not running: no socket at %s "
				  "(start it, or set --socket or "
				  "$WARDEN_SOCKET)",
				  socket);
	if (rc == CURLE_COULDNT_CONNECT && oserr == ECONNREFUSED)
		return wd_err_set(err, -ECONNREFUSED,
				  "wardend is not running: nothing listens on "
				  "%s (a stale socket; start wardend, or set "
				  "--socket or $WARDEN_SOCKET)",
				  socket);
	if (rc == CURLE_COULDNT_CONNECT && oserr == EAGAIN)
		return wd_err_set(err, -EAGAIN,
				  "wardend at %s is busy: its queue of "
				  "connections waiting to be accepted is full; "
				  "try again",
				  socket);
	if (rc == CURLE_COULDNT_CONNECT && (oserr == EACCES || oserr == EPERM))
		return wd_err_set(err, -EACCES,
				  "cannot connect to wardend at %s: %s", socket,
				  strerror((int)oserr));
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return wd_err_set(err, -ETIMEDOUT,
				  "timed out: wardend at %s did not answer "
				  "within %ld s ($WARDEN_TIMEOUT)",
				  socket, answer_timeout_s());
	if (rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR ||
	    rc == CURLE_SEND_ERROR || rc == CURLE_PARTIAL_FILE)
		return wd_err_set(
		    err, -ECONNRESET,
		    "wardend at %s closed the connection before "
		    "answering in full (%s): its request timeout, "
		    "a restart or a crash",
		    socket, curl_easy_strerror(rc));
	return wd_err_set(err, -EIO, "cannot talk to wardend at %s: %s%s%s",
			  socket, curl_easy_strerror(rc), oserr ? ": " : "",
			  oserr ? strerror((int)oserr) : "");
}

/* A full backlog (EAGAIN on a unix socket's connect) is a burst, not an
 * absent daemon; so is the daemon's own refusal at a connection cap (503
 * with Retry-After, answered at accept before any request is read, so a
 * POST is safe to send again): retry a few times, 25 ms doubling (about
 * 1.5 s in all), then report what the last try said. reset(arg) drops
 * what a refused try wrote. */
static CURLcode perform(CURL *c, void (*reset)(void *), void *arg)
{
	CURLcode rc = CURLE_OK;
	for (int i = 0, ms = 25; i < 7; i++, ms *= 2) {
		rc = curl_easy_perform(c);
		long oserr = 0, status = 0;
		curl_off_t after = -1;
		curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &oserr);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &after);
		bool busy = rc == CURLE_COULDNT_CONNECT && oserr == EAGAIN;
		bool capped = rc == CURLE_OK && status == 503 && after > 0;
		if ((!busy && !capped) || i == 6)
			break;
		reset(arg);
		usleep((useconds_t)ms * 1000);
	}
	return rc;
}

static void reset_buf(void *arg)
{
	((struct wd_buf *)arg)->len = 0;
}

/* the Warden-Unavailable header's value (server.c send_json_partial) */
static size_t header_cb(char *p, size_t sz, size_t n, void *ud)
{
	static const char name[] = "warden-unavailable:";
	struct wd_err *w = ud;
	size_t len = sz * n, k = sizeof(name) - 1;
	if (len > k && !strncasecmp(p, name, k)) {
		size_t v = k + strspn(p + k, " ");
		size_t e = len;
		while (e > v && (p[e - 1] == '\r' || p[e - 1] == '\n'))
			e--;
		snprintf(w->msg, sizeof(w->msg), "%.*s", (int)(e - v), p + v);
	}
	return len;
}

int wd_api_call(const char *socket, const char *method, const char *path,
		const json_t *body, long *status, json_t **resp,
		struct wd_err *err)
{
	struct curl_slist *hdrs = NULL;
	struct wd_buf out = {0};
	cleanup_free char *text = NULL;
	*resp = NULL;
	*status = 0;
	if (wd_api_timeout_check(err))
		return err->code;
	CURL *c = make_handle(socket, method, path, &hdrs);
	if (!c)
		return wd_err_set(err, -ENOMEM, "curl_easy_init failed");
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, text ? text : "{}");
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, answer_timeout_s());
	struct wd_err warn = {0};
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &warn);
	CURLcode rc = perform(c, reset_buf, &out);
	int ret = 0;
	if (rc != CURLE_OK) {
		ret = transport_err(c, rc, socket, err);
	} else {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
		json_error_t je;
		if (out.len)
			*resp = json_loadb(out.data, out.len, 0, &je);
		if (warn.msg[0] && err)
			snprintf(err->msg, sizeof(err->msg), "%s", warn.msg);
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	wd_buf_free(&out);
	return ret;
}

struct stream_ctx {
	struct wd_buf pending;
	int (*line)(void *arg, json_t *obj);
	void *arg;
	int cb_rc;
	long status;
	CURL *c;
	struct wd_buf errbody;
};

static size_t stream_write(char *p, size_t sz, size_t n, void *ud)
{
	struct stream_ctx *s = ud;
	size_t len = sz * n;
	if (!s->status)
		curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &s->status);
	if (s->status < 200 || s->status >= 300)
		return collect(p, sz, n, &s->errbody);
	wd_buf_append(&s->pending, p, len);
	for (;;) {
		char *nl = memchr(s->pending.data, '\n', s->pending.len);
		if (!nl)
			break;
		size_t l = nl - s->pending.data;
		json_error_t je;
		json_t *o = l ? json_loadb(s->pending.data, l, 0, &je) : NULL;
		memmove(s->pending.data, nl + 1, s->pending.len - l - 1);
		s->pending.len -= l + 1;
		if (o) {
			int r = s->line(s->arg, o);
			json_decref(o);
			if (r) {
				s->cb_rc = r;
				return 0; /* abort the transfer */
			}
		}
	}
	if (s->pending.len > 64u << 20)
		return 0;
	return len;
}

static void reset_stream(void *arg)
{
	struct stream_ctx *s = arg;
	s->status = 0;
	s->errbody.len = 0;
	s->pending.len = 0;
}

int wd_api_stream(const char *socket, const char *path,
		  int (*line)(void *arg, json_t *obj), void *arg,
		  struct wd_err *err)
{
	struct curl_slist *hdrs = NULL;
	struct stream_ctx s = {.line = line, .arg = arg};
	if (wd_api_timeout_check(err))
		return err->code;
	CURL *c = make_handle(socket, "GET", path, &hdrs);
	if (!c)
		return wd_err_set(err, -ENOMEM, "curl_easy_init failed");
	s.c = c;
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, answer_timeout_s());
	CURLcode rc = perform(c, reset_stream, &s);
	int ret = 0;
	if (s.cb_rc) {
		ret = s.cb_rc;
	} else if (rc != CURLE_OK) {
		ret = transport_err(c, rc, socket, err);
	} else {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s.status);
		if (s.status < 200 || s.status >= 300) {
			json_error_t je;
			json_t *o = s.errbody.len
					? json_loadb(s.errbody.data,
						     s.errbody.len, 0, &je)
					: NULL;
			ret = wd_err_set(err, -EPROTO, "%s",
					 wd_api_error_text(o, s.status));
			json_decref(o);
		}
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	wd_buf_free(&s.pending);
	wd_buf_free(&s.errbody);
	return ret;
}

const char *wd_api_error_text(const json_t *resp, long status)
{
	const char *m = json_string_value(json_object_get(resp, "error"));
	if (m)
		return m;
	if (status == 404)
		return "not found";
	if (status == 403)
		return "permission denied";
	return "request failed";
}
