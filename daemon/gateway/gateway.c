/* The gateway: alias → failover list → retries → provider over libcurl.
 *
 * Connection reuse: easy handles live in a mutex-protected pool and share
 * one connection cache, DNS cache and TLS session cache (CURLSH), so a
 * steady stream of calls rides a few keep-alive connections instead of a
 * TCP (and TLS) handshake per call.
 *
 * Secrets: the API key is only ever put in a request header. Every byte we
 * hand back (bodies, error texts) goes through redact() first, because
 * providers do echo keys back ("Incorrect API key provided: sk-...").
 */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <strings.h>
#include <sys/random.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "gateway/breaker.h"
#include "gateway/gateway.h"
#include "gateway/provider.h"
#include "gateway/script.h"
#include "policy/gateway_config.h"

#define MAX_RESPONSE_BYTES (32u << 20)
#define REDACTED	   "[REDACTED]"

struct wd_gateway {
	int refs; /* atomic */
	struct wd_gateway_config *cfg;
	char **keys;	 /* per provider; NULL if none or not set */
	char **key_errs; /* per provider; why the key is missing */
	char **ua_hdrs;	 /* per provider: auth header line */
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_lock;
	CURL **pool;
	int n_pool, cap_pool;
	wd_gateway_usage_fn usage_fn;
	void *usage_ud;
	struct wd_breakers *brk;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *ud)
{
	struct wd_gateway *gw = ud;
	pthread_mutex_lock(&gw->share_locks[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *ud)
{
	struct wd_gateway *gw = ud;
	pthread_mutex_unlock(&gw->share_locks[d]);
}

/* ---- secrets ----------------------------------------------------------- */

/* Replace every occurrence of every key in s (in place, may grow). */
static char *redact(const struct wd_gateway *gw, char *s)
{
	if (!s)
		return s;
	for (int i = 0; i < gw->cfg->n_providers; i++) {
		const char *k = gw->keys[i];
		size_t kl;
		char *hit;

		if (!k || (kl = strlen(k)) < 4)
			continue;
		while ((hit = strstr(s, k))) {
			char *n = wd_asprintf("%.*s%s%s", (int)(hit - s), s,
					      REDACTED, hit + kl);
			free(s);
			s = n;
		}
	}
	return s;
}

/* A fixed-size message cut mid-character would not be valid UTF-8, and
 * callers put these texts into JSON (jansson refuses invalid UTF-8). */
static void utf8_trim(char *s)
{
	size_t n = strlen(s), i = n, cont = 0;

	while (i > 0 && ((unsigned char)s[i - 1] & 0xc0) == 0x80 && cont < 3)
		i--, cont++;
	if (i == 0)
		return;
	unsigned char lead = (unsigned char)s[i - 1];
	size_t want = lead >= 0xf0   ? 3
		      : lead >= 0xe0 ? 2
		      : lead >= 0xc0 ? 1
				     : 0;
	if (lead >= 0x80 && want != cont)
		s[i - 1] = 0;
}

static void redact_buf(const struct wd_gateway *gw, char *buf, size_t cap)
{
	char *s = redact(gw, wd_strdup(buf));
	wd_strlcpy(buf, s, cap);
	free(s);
	utf8_trim(buf);
}

static int read_key(const struct wd_provider_cfg *p, char **key, char **why)
{
	*key = NULL;
	*why = NULL;
	if (p->api_key_env) {
		const char *v = getenv(p->api_key_env);
		if (!v || !*v) {
			*why = wd_asprintf("api key not set (environment "
					   "variable %s is empty)",
					   p->api_key_env);
			return 0;
		}
		*key = wd_strdup(v);
	} else if (p->api_key_file) {
		char *t = NULL;
		size_t len;
		int r = wd_read_file(p->api_key_file, &t, &len);
		if (r) {
			*why = wd_asprintf("api key not set (cannot read %s: "
					   "%s)",
					   p->api_key_file, strerror(-r));
			return 0;
		}
		while (len && (t[len - 1] == '\n' || t[len - 1] == '\r' ||
			       t[len - 1] == ' '))
			t[--len] = 0;
		*key = t;
	}
	/* a header injection via a key with CR/LF would let a key file add
	 * arbitrary headers to every request */
	if (*key && strpbrk(*key, "\r\n")) {
		explicit_bzero(*key, strlen(*key));
		free(*key);
		*key = NULL;
		*why = wd_strdup("api key contains a line break");
	}
	return 0;
}

/* ---- lifecycle ---------------------------------------------------------- */

struct wd_gateway *wd_gateway_new(struct wd_gateway_config *cfg,
				  struct wd_err *err)
{
	struct wd_gateway *gw;

	pthread_once(&curl_once, curl_init_once);
	gw = wd_calloc(1, sizeof(*gw));
	gw->refs = 1;
	gw->cfg = cfg;
	gw->keys = wd_calloc(cfg->n_providers + 1, sizeof(char *));
	gw->key_errs = wd_calloc(cfg->n_providers + 1, sizeof(char *));
	gw->ua_hdrs = wd_calloc(cfg->n_providers + 1, sizeof(char *));
	for (int i = 0; i < cfg->n_providers; i++) {
		const struct wd_provider_cfg *p = &cfg->providers[i];
		const struct wd_provider_desc *d = wd_provider_desc_of(p->kind);
		read_key(p, &gw->keys[i], &gw->key_errs[i]);
		if (!gw->keys[i] || !d->auth_fmt)
			continue;
			/* auth_fmt is the table's own literal with one %s */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		gw->ua_hdrs[i] = wd_asprintf(d->auth_fmt, gw->keys[i]);
#pragma GCC diagnostic pop
	}
	pthread_mutex_init(&gw->pool_lock, NULL);
	gw->brk = wd_breakers_new(cfg);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&gw->share_locks[i], NULL);
	gw->share = curl_share_init();
	if (!gw->share) {
		wd_gateway_unref(gw);
		errno = ENOMEM;
		wd_err_set(err, -ENOMEM, "gateway: curl_share_init failed");
		return NULL;
	}
	curl_share_setopt(gw->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(gw->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(gw->share, CURLSHOPT_USERDATA, gw);
	curl_share_setopt(gw->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(gw->share, CURLSHOPT_SHARE,
			  CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(gw->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	return gw;
}

struct wd_gateway *wd_gateway_open(const char *path, struct wd_err *err)
{
	struct wd_gateway_config *cfg;
	int r = wd_gateway_config_load_file(path, &cfg, err);

	if (r) {
		errno = -r;
		return NULL;
	}
	return wd_gateway_new(cfg, err);
}

struct wd_gateway *wd_gateway_ref(struct wd_gateway *gw)
{
	__atomic_add_fetch(&gw->refs, 1, __ATOMIC_RELAXED);
	return gw;
}

void wd_gateway_unref(struct wd_gateway *gw)
{
	if (!gw || __atomic_sub_fetch(&gw->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (int i = 0; i < gw->n_pool; i++)
		curl_easy_cleanup(gw->pool[i]);
	free(gw->pool);
	if (gw->share)
		curl_share_cleanup(gw->share);
	for (int i = 0; i < gw->cfg->n_providers; i++) {
		if (gw->keys[i])
			explicit_bzero(gw->keys[i], strlen(gw->keys[i]));
		if (gw->ua_hdrs[i])
			explicit_bzero(gw->ua_hdrs[i], strlen(gw->ua_hdrs[i]));
		free(gw->keys[i]);
		free(gw->key_errs[i]);
		free(gw->ua_hdrs[i]);
	}
	free(gw->keys);
	free(gw->key_errs);
	free(gw->ua_hdrs);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&gw->share_locks[i]);
	pthread_mutex_destroy(&gw->pool_lock);
	wd_breakers_free(gw->brk);
	wd_gateway_config_free(gw->cfg);
	free(gw);
}

void wd_gateway_set_usage_cb(struct wd_gateway *gw, wd_gateway_usage_fn fn,
			     void *ud)
{
	gw->usage_fn = fn;
	gw->usage_ud = ud;
}

/* ---- routing ----------------------------------------------------------------
 */

/* Resolve `model` to routes. An alias wins; "provider/model" names one
 * route directly (not for script providers: their model is a file path and
 * must come from the policy, not from an agent definition). */
static int resolve(const struct wd_gateway *gw, const char *model,
		   const struct wd_route **routes, int *n,
		   struct wd_route *direct)
{
	const struct wd_alias *a = wd_gateway_config_alias(gw->cfg, model);
	const char *slash;
	char prov[64];
	int pi;

	if (a) {
		*routes = a->routes;
		*n = a->n_routes;
		return 0;
	}
	slash = strchr(model, '/');
	if (!slash || slash == model || !slash[1] ||
	    (size_t)(slash - model) >= sizeof(prov))
		return -ENOENT;
	snprintf(prov, sizeof(prov), "%.*s", (int)(slash - model), model);
	pi = wd_gateway_config_provider(gw->cfg, prov);
	if (pi < 0 || gw->cfg->providers[pi].kind == WD_PROVIDER_SCRIPT)
		return -ENOENT;
	direct->provider = pi;
	direct->model = (char *)slash + 1;
	direct->script = NULL;
	*routes = direct;
	*n = 1;
	return 0;
}

const struct wd_gateway_config *
wd_gateway_config_of(const struct wd_gateway *gw)
{
	return gw->cfg;
}

bool wd_gateway_has_model(const struct wd_gateway *gw, const char *model)
{
	const struct wd_route *routes;
	struct wd_route direct;
	int n;

	return model && resolve(gw, model, &routes, &n, &direct) == 0;
}

json_t *wd_gateway_route_json(const struct wd_gateway *gw, const char *model)
{
	const struct wd_route *routes;
	struct wd_route direct;
	int n;
	if (!model || resolve(gw, model, &routes, &n, &direct))
		return NULL;
	json_t *a = json_array();
	for (int i = 0; i < n; i++) {
		const struct wd_provider_cfg *p =
		    &gw->cfg->providers[routes[i].provider];
		json_array_append_new(
		    a, json_pack("{s:s,s:s,s:s,s:b}", "provider", p->name,
				 "kind", wd_provider_kind_name(p->kind),
				 "model", routes[i].model, "seed",
				 wd_provider_desc_of(p->kind)->seed));
	}
	return a;
}

/* ---- HTTP ------------------------------------------------------------------
 */

struct http_out {
	struct wd_buf body;
	bool too_big;
	long retry_after_ms; /* -1 = none */
};

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
	struct http_out *o = ud;
	size_t n = sz * nm;

	if (o->body.len + n > MAX_RESPONSE_BYTES) {
		o->too_big = true;
		return 0; /* aborts the transfer */
	}
	wd_buf_append(&o->body, p, n);
	return n;
}

/* Retry-After: delta-seconds or an HTTP date; retry-after-ms (OpenAI). */
static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
	struct http_out *o = ud;
	size_t n = sz * nm;
	char line[256], *v;

	if (n >= sizeof(line))
		return n;
	memcpy(line, p, n);
	line[n] = 0;
	v = strchr(line, ':');
	if (!v)
		return n;
	*v++ = 0;
	while (*v == ' ' || *v == '\t')
		v++;
	v[strcspn(v, "\r\n")] = 0;
	if (!strcasecmp(line, "retry-after-ms")) {
		char *e;
		double ms = strtod(v, &e);
		if (e != v && ms >= 0 && ms < 1e9)
			o->retry_after_ms = (long)ms;
	} else if (!strcasecmp(line, "retry-after") && o->retry_after_ms < 0) {
		char *e;
		double s = strtod(v, &e);
		if (e != v && !*e && s >= 0 && s < 1e6) {
			o->retry_after_ms = (long)(s * 1000);
		} else {
			struct tm tm = {0};
			if (strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm)) {
				time_t t = timegm(&tm), now = time(NULL);
				o->retry_after_ms =
				    t > now ? (long)(t - now) * 1000 : 0;
			}
		}
	}
	return n;
}

static CURL *pool_get(struct wd_gateway *gw)
{
	CURL *h = NULL;

	pthread_mutex_lock(&gw->pool_lock);
	if (gw->n_pool)
		h = gw->pool[--gw->n_pool];
	pthread_mutex_unlock(&gw->pool_lock);
	/* reset drops the previous call's pointers (headers, buffers) but
	 * keeps the connection cache, so keep-alive still works */
	if (h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

static void pool_put(struct wd_gateway *gw, CURL *h)
{
	pthread_mutex_lock(&gw->pool_lock);
	if (gw->n_pool < 256) {
		if (gw->n_pool == gw->cap_pool) {
			gw->cap_pool = gw->cap_pool ? gw->cap_pool * 2 : 16;
			gw->pool =
			    wd_realloc(gw->pool, gw->cap_pool * sizeof(CURL *));
		}
		gw->pool[gw->n_pool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&gw->pool_lock);
	if (h)
		curl_easy_cleanup(h);
}

enum outcome { OUT_OK, OUT_RETRY, OUT_NEXT };

struct attempt_ctx {
	struct wd_gateway *gw;
	const struct wd_complete_req *req;
	const struct wd_route *route;
	const struct wd_provider_cfg *prov;
	uint64_t timeout_ms;
	struct wd_attempt *att;
	long retry_after_ms;
	/* filled on the attempt */
	char *raw_request;
	char *raw_response;
};

/* base_url + the table's path; a base_url that already ends in "/v1"
 * (common for OpenAI-compatible servers) does not get it twice */
static char *endpoint(const struct wd_provider_cfg *p,
		      const struct wd_provider_desc *d)
{
	size_t n = strlen(p->base_url);

	if (n >= 3 && !strcmp(p->base_url + n - 3, "/v1") &&
	    !strncmp(d->path, "/v1/", 4))
		return wd_asprintf("%s%s", p->base_url, d->path + 3);
	return wd_asprintf("%s%s", p->base_url, d->path);
}

static enum outcome http_attempt(struct attempt_ctx *a,
				 struct wd_complete_resp *resp)
{
	struct wd_gateway *gw = a->gw;
	int pi = a->route->provider;
	const struct wd_provider_desc *desc =
	    wd_provider_desc_of(a->prov->kind);
	const struct wd_provider_ops *ops = desc->ops;
	struct wd_err e = {0};
	struct http_out out = {.retry_after_ms = -1};
	struct curl_slist *hdrs = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	cleanup_free char *url = NULL;
	json_t *body;
	CURL *h;
	CURLcode cc;
	long status = 0;
	enum outcome oc;

	body = ops->build(a->req, a->prov, a->route->model, &e);
	if (!body) {
		snprintf(a->att->error, sizeof(a->att->error), "%s", e.msg);
		a->att->err_class = WD_ERRC_INVALID;
		return OUT_NEXT;
	}
	a->raw_request = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!a->raw_request) {
		snprintf(a->att->error, sizeof(a->att->error),
			 "cannot encode request");
		return OUT_NEXT;
	}
	if (!gw->keys[pi]) {
		snprintf(a->att->error, sizeof(a->att->error), "%s",
			 gw->key_errs[pi] ? gw->key_errs[pi]
					  : "api key not configured");
		a->att->err_class = WD_ERRC_AUTH;
		return OUT_NEXT;
	}
	h = pool_get(gw);
	if (!h) {
		snprintf(a->att->error, sizeof(a->att->error),
			 "curl_easy_init failed");
		return OUT_RETRY;
	}
	url = endpoint(a->prov, desc);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue RTT */
	if (desc->version_hdr)
		hdrs = curl_slist_append(hdrs, desc->version_hdr);
	hdrs = curl_slist_append(hdrs, gw->ua_hdrs[pi]);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_SHARE, gw->share);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, a->raw_request);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)strlen(a->raw_request));
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)a->timeout_ms);
	curl_easy_setopt(
	    h, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)WD_MIN(a->timeout_ms, (uint64_t)a->prov->connect_timeout_ms));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &out);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	/* the shared cache closes connections beyond this many; the default
	 * (5) is below the number of concurrent calls, and every closed
	 * connection is a new TCP (and TLS) handshake on a later call */
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, 256L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "warden-gateway/1");
	/* a redirect would re-send the key header to wherever it points */
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");

	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	/* the header list holds the key: wipe it before freeing */
	for (struct curl_slist *s = hdrs; s; s = s->next)
		explicit_bzero(s->data, strlen(s->data));
	curl_slist_free_all(hdrs);
	pool_put(gw, h);

	a->att->http_status = (int)status;
	wd_buf_append(&out.body, "", 1);
	out.body.len--;
	if (out.body.data)
		a->raw_response = redact(gw, wd_strdup(out.body.data));
	a->retry_after_ms = out.retry_after_ms;

	if (cc != CURLE_OK) {
		if (out.too_big) {
			snprintf(a->att->error, sizeof(a->att->error),
				 "response larger than %u bytes",
				 MAX_RESPONSE_BYTES);
			a->att->err_class = WD_ERRC_BAD_RESPONSE;
			oc = OUT_NEXT;
		} else {
			snprintf(a->att->error, sizeof(a->att->error), "%s%s%s",
				 cc == CURLE_OPERATION_TIMEDOUT
				     ? "timeout: "
				     : "connection: ",
				 errbuf[0] ? errbuf : "",
				 errbuf[0] ? "" : curl_easy_strerror(cc));
			a->att->err_class = WD_ERRC_TIMEOUT;
			oc = OUT_RETRY;
		}
	} else if (status >= 200 && status < 300) {
		if (ops->parse(a->raw_response ? a->raw_response : "",
			       a->raw_response ? strlen(a->raw_response) : 0,
			       resp, &e) == 0) {
			oc = OUT_OK;
		} else {
			snprintf(a->att->error, sizeof(a->att->error), "%s",
				 e.msg);
			a->att->err_class = WD_ERRC_BAD_RESPONSE;
			oc = OUT_NEXT;
		}
	} else {
		char pm[200] = "";
		if (out.body.data)
			ops->error_message(out.body.data, out.body.len, pm,
					   sizeof(pm));
		/* the class goes after the message: a message cut
		 * mid-character would leave invalid UTF-8 inside */
		utf8_trim(pm);
		enum wd_err_class ec =
		    desc->classify(status, out.body.data, out.body.len);
		snprintf(a->att->error, sizeof(a->att->error),
			 "HTTP %ld%s%s (%s)", status, pm[0] ? ": " : "", pm,
			 wd_err_class_name(ec));
		a->att->err_class = ec;
		/* only a rate limit, an overload, a server error or a
		 * timeout may pass: a quota 429 (insufficient_quota), an
		 * auth failure or an invalid request fails the same way
		 * every time, so the next route is tried at once */
		oc = wd_err_class_retryable(ec) ? OUT_RETRY : OUT_NEXT;
	}
	redact_buf(gw, a->att->error, sizeof(a->att->error));
	wd_buf_free(&out.body);
	return oc;
}

/* ---- the call -------------------------------------------------------------
 */

static uint64_t backoff_ms(const struct wd_retry_cfg *r, int retry)
{
	uint64_t d = r->backoff_base_ms;
	unsigned char rnd;

	for (int i = 1; i < retry && d < r->backoff_max_ms; i++)
		d *= 2;
	if (d > r->backoff_max_ms)
		d = r->backoff_max_ms;
	/* jitter in [d/2, d]: many runs hitting one 429 must not retry in
	 * lock step */
	if (getrandom(&rnd, 1, 0) != 1)
		rnd = 128;
	return d / 2 + (d / 2) * rnd / 255;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static const char *basename_of(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static void price_it(const struct wd_gateway *gw,
		     const struct wd_provider_cfg *prov,
		     const char *route_model, struct wd_complete_resp *resp)
{
	const char *provider = prov->name;
	const struct wd_provider_desc *d = wd_provider_desc_of(prov->kind);
	const struct wd_price *p;

	p = wd_gateway_config_price(gw->cfg, provider, route_model);
	if (!p && resp->model)
		p = wd_gateway_config_price(gw->cfg, provider, resp->model);
	if (!p) /* a price keyed by the provider's name covers its models */
		for (int i = 0; i < gw->cfg->n_prices && !p; i++)
			if (!strcmp(gw->cfg->prices[i].model, provider))
				p = &gw->cfg->prices[i];
	if (!p) {
		resp->priced = false;
		resp->cost_usd = 0;
		return;
	}
	const struct wd_usage *u = &resp->usage;
	uint64_t cached = WD_MIN(u->cached_tokens, u->input_tokens);
	uint64_t wr = WD_MIN(u->cache_write_tokens, u->input_tokens - cached);
	uint64_t wr1h = WD_MIN(u->cache_write_1h_tokens, wr);
	double read_price =
	    p->cached_input >= 0 ? p->cached_input : p->input * d->cache_read_x;
	resp->priced = true;
	/* Anthropic bills a cache write above the input price (1.25x for
	 * 5 minutes, 2x for an hour) and a read at 0.1x; OpenAI only
	 * discounts reads (the multipliers are in providers.c) */
	resp->cost_usd = ((double)(u->input_tokens - cached - wr) * p->input +
			  (double)cached * read_price +
			  (double)(wr - wr1h) * p->input * d->cache_write_5m_x +
			  (double)wr1h * p->input * d->cache_write_1h_x +
			  (double)u->output_tokens * p->output) /
			 1e6;
}

static void add_attempt(struct wd_complete_resp *resp,
			const struct wd_attempt *a)
{
	resp->attempts =
	    wd_realloc(resp->attempts, (resp->n_attempts + 1) * sizeof(*a));
	resp->attempts[resp->n_attempts++] = *a;
}

/* Keep only the reply of the attempt that answered (a failed parse may
 * have left partial fields). */
static void clear_reply(struct wd_complete_resp *resp)
{
	for (int i = 0; i < resp->n_tool_calls; i++)
		wd_tool_call_clear(&resp->tool_calls[i]);
	free(resp->tool_calls);
	resp->tool_calls = NULL;
	resp->n_tool_calls = 0;
	free(resp->text);
	free(resp->stop_raw);
	free(resp->model);
	free(resp->response_id);
	resp->text = resp->stop_raw = resp->model = resp->response_id = NULL;
	memset(&resp->usage, 0, sizeof(resp->usage));
}

json_t *wd_gateway_breakers_json(struct wd_gateway *gw)
{
	return wd_breakers_json(gw->brk);
}

int wd_gateway_complete(struct wd_gateway *gw,
			const struct wd_complete_req *req,
			struct wd_complete_resp *resp, struct wd_err *err)
{
	/* each route's last error, for the reason a failed call gives */
	struct wd_buf why = {0};
	enum wd_err_class last_class = WD_ERRC_NONE;
	int tried = 0;
	const struct wd_retry_cfg *rc = &gw->cfg->retry;
	const struct wd_route *routes;
	struct wd_route direct;
	char last_err[300] = "no attempt made";
	uint64_t t0 = wd_now_ns();
	int n_routes, r;

	memset(resp, 0, sizeof(*resp));
	if (!req->model)
		return wd_err_set(err, -EINVAL, "gateway: no model given");
	if (resolve(gw, req->model, &routes, &n_routes, &direct))
		return wd_err_set(
		    err, -ENOENT,
		    "gateway: unknown model '%s' (not an alias in "
		    "%s, nor provider/model)",
		    req->model, gw->cfg->source);
	for (int i = 0; i < req->n_tools; i++) {
		struct wd_err te = {0};
		json_t *p = wd_tool_parameters(&req->tools[i], &te);
		if (!p)
			return wd_err_set(err, -EINVAL, "gateway: %s", te.msg);
		json_decref(p);
	}

	for (int ri = 0; ri < n_routes; ri++) {
		const struct wd_route *route = &routes[ri];
		const struct wd_provider_cfg *prov =
		    &gw->cfg->providers[route->provider];
		uint64_t wait = 0;
		char bwhy[300];
		enum wd_err_class rclass = WD_ERRC_NONE;

		if (!wd_breaker_allow(gw->brk, route,
				      ri == n_routes - 1 && !tried, bwhy,
				      sizeof(bwhy))) {
			/* skipped: the trace shows why this route was not
			 * tried */
			struct wd_attempt att = {0};
			wd_strlcpy(att.provider, prov->name,
				   sizeof(att.provider));
			wd_strlcpy(att.model,
				   prov->kind == WD_PROVIDER_SCRIPT
				       ? basename_of(route->model)
				       : route->model,
				   sizeof(att.model));
			snprintf(att.error, sizeof(att.error), "%s", bwhy);
			redact_buf(gw, att.error, sizeof(att.error));
			att.err_class = WD_ERRC_CIRCUIT_OPEN;
			add_attempt(resp, &att);
			wd_buf_printf(&why, "%s%s/%s: %s", why.len ? "; " : "",
				      att.provider, att.model, att.error);
			continue;
		}
		tried++;

		for (uint32_t an = 1; an <= rc->max_attempts; an++) {
			struct wd_attempt att = {0};
			struct attempt_ctx a = {.gw = gw,
						.req = req,
						.route = route,
						.prov = prov,
						.att = &att,
						.retry_after_ms = -1};
			uint64_t ta, now = wd_now_ns();
			enum outcome oc;

			if (req->deadline_ns &&
			    now + wait * 1000000ull >= req->deadline_ns) {
				resp->latency_us = (wd_now_ns() - t0) / 1000;
				wd_buf_free(&why);
				/* not the route's fault: no breaker note,
				 * but a half-open trial ends here */
				wd_breaker_note(gw->brk, route, false,
						WD_ERRC_CIRCUIT_OPEN, "");
				return wd_err_set(err, -ETIMEDOUT,
						  "gateway: deadline reached "
						  "after %d attempts; last: %s",
						  resp->n_attempts, last_err);
			}
			if (wait)
				sleep_ms(wait);
			att.wait_ms = wait;
			wd_strlcpy(att.provider, prov->name,
				   sizeof(att.provider));
			wd_strlcpy(att.model,
				   prov->kind == WD_PROVIDER_SCRIPT
				       ? basename_of(route->model)
				       : route->model,
				   sizeof(att.model));
			a.timeout_ms = prov->timeout_ms;
			if (req->deadline_ns) {
				uint64_t left =
				    (req->deadline_ns - wd_now_ns()) / 1000000;
				a.timeout_ms =
				    WD_MAX(1, WD_MIN(a.timeout_ms, left));
			}
			ta = wd_now_ns();
			if (prov->kind == WD_PROVIDER_SCRIPT) {
				struct wd_err se = {0};
				json_t *nr = wd_neutral_request(
				    req, basename_of(route->model));
				a.raw_request = json_dumps(nr, JSON_COMPACT);
				json_decref(nr);
				if (route->script &&
				    wd_script_complete(route->script, req, resp,
						       &se) == 0) {
					oc = OUT_OK;
					a.raw_response =
					    steal_pointer(&resp->raw_response);
				} else {
					snprintf(att.error, sizeof(att.error),
						 "script: %s",
						 se.msg[0] ? se.msg
							   : "not loaded");
					att.err_class = WD_ERRC_INVALID;
					oc = OUT_NEXT;
				}
			} else {
				oc = http_attempt(&a, resp);
			}
			att.latency_us = (wd_now_ns() - ta) / 1000;
			utf8_trim(att.error);
			add_attempt(resp, &att);
			free(resp->raw_request);
			free(resp->raw_response);
			resp->raw_request = a.raw_request;
			resp->raw_response = a.raw_response;
			if (oc == OUT_OK) {
				resp->provider = wd_strdup(prov->name);
				if (!resp->model)
					resp->model = wd_strdup(att.model);
				if (!resp->text)
					resp->text = wd_strdup("");
				if (!resp->stop_raw)
					resp->stop_raw = wd_strdup("");
				price_it(gw, prov, att.model, resp);
				resp->latency_us = (wd_now_ns() - t0) / 1000;
				if (gw->usage_fn)
					gw->usage_fn(gw->usage_ud, &req->attr,
						     resp);
				wd_breaker_note(gw->brk, route, true,
						WD_ERRC_NONE, "");
				wd_buf_free(&why);
				return 0;
			}
			clear_reply(resp);
			snprintf(last_err, sizeof(last_err), "%s/%s: %s",
				 att.provider, att.model, att.error);
			utf8_trim(last_err);
			rclass = att.err_class;
			if (oc == OUT_NEXT)
				break;
			if (a.retry_after_ms >= 0) {
				if ((uint64_t)a.retry_after_ms >
				    rc->retry_after_max_ms)
					break; /* too long: next route */
				wait = (uint64_t)a.retry_after_ms;
			} else {
				wait = backoff_ms(rc, (int)an);
			}
		}
		wd_breaker_note(gw->brk, route, false, rclass, last_err);
		last_class = rclass;
		wd_buf_printf(&why, "%s%s", why.len ? "; " : "", last_err);
	}
	resp->latency_us = (wd_now_ns() - t0) / 1000;
	/* -E2BIG: the prompt is over the context window; the caller may fit
	 * the conversation and call again (runtime/loop.c) */
	r = wd_err_set(err, last_class == WD_ERRC_CONTEXT ? -E2BIG : -EPROTO,
		       "gateway: model '%s' failed after %d attempts: %s",
		       req->model, resp->n_attempts,
		       why.data ? why.data : last_err);
	wd_buf_free(&why);
	if (err) {
		redact_buf(gw, err->msg, sizeof(err->msg));
		utf8_trim(err->msg);
	}
	return r;
}
