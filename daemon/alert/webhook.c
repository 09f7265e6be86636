/* Alert webhook sender: bounded queue + one libcurl thread. */
#include "alert/webhook.h"

#include <curl/curl.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

#define BACKOFF_CAP_MS 30000u

struct wd_webhook {
	char *url;
	uint32_t qmax, timeout_ms, max_retries, backoff_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char **q; /* ring of qmax bodies */
	uint32_t head, n;
	bool inflight, stop;
	pthread_t thr;
	struct wd_webhook_stats st;
};

static size_t discard(char *p, size_t sz, size_t n, void *arg)
{
	return sz * n;
}

/* One POST. 0 on a 2xx answer, else -EIO (message in err). */
static int post_once(struct wd_webhook *w, CURL *c, const char *body,
		     char *errbuf, size_t errlen)
{
	struct curl_slist *h =
	    curl_slist_append(NULL, "Content-Type: application/json");
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, w->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)w->timeout_ms);
	/* a daemon thread: no SIGALRM-based resolver timeouts */
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	/* an alert endpoint answering with a redirect to file:// or another
	 * scheme must not make the daemon fetch it */
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "wardend-alert/1");
	CURLcode rc = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		snprintf(errbuf, errlen, "%s", curl_easy_strerror(rc));
		return -EIO;
	}
	if (code < 200 || code > 299) {
		snprintf(errbuf, errlen, "HTTP %ld", code);
		return -EIO;
	}
	return 0;
}

/* Sleep ms unless stopped. Called with w->mu held. Returns true if
 * stopping. */
static bool wait_ms_locked(struct wd_webhook *w, uint32_t ms)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	while (!w->stop)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) == ETIMEDOUT)
			break;
	return w->stop;
}

static void *sender(void *arg)
{
	struct wd_webhook *w = arg;
	CURL *c = curl_easy_init();
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->n && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		char *body = w->q[w->head];
		w->q[w->head] = NULL;
		w->head = (w->head + 1) % w->qmax;
		w->n--;
		w->inflight = true;
		uint32_t delay = w->backoff_ms;
		bool ok = false, stopped = false;
		char errbuf[256] = "";
		for (uint32_t attempt = 0;; attempt++) {
			pthread_mutex_unlock(&w->mu);
			int rc =
			    c ? post_once(w, c, body, errbuf, sizeof(errbuf))
			      : -ENOMEM;
			pthread_mutex_lock(&w->mu);
			if (rc == 0) {
				ok = true;
				break;
			}
			if (attempt >= w->max_retries)
				break;
			w->st.retries++;
			if ((stopped = wait_ms_locked(w, delay)))
				break;
			delay = WD_MIN(delay * 2, BACKOFF_CAP_MS);
		}
		if (ok)
			w->st.sent++;
		else if (stopped)
			w->st.dropped++;
		else {
			w->st.failures++;
			wd_warn("alert webhook '%s': giving up after %u "
				"retries: %s",
				w->url, w->max_retries, errbuf);
		}
		free(body);
		w->inflight = false;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

struct wd_webhook *wd_webhook_new(const char *url, uint32_t queue_max,
				  uint32_t timeout_ms, uint32_t max_retries,
				  uint32_t backoff_ms)
{
	if (!url ||
	    (strncasecmp(url, "http://", 7) &&
	     strncasecmp(url, "https://", 8)) ||
	    !queue_max) {
		errno = EINVAL;
		return NULL;
	}
	struct wd_webhook *w = wd_calloc(1, sizeof(*w));
	w->url = wd_strdup(url);
	w->qmax = queue_max;
	w->timeout_ms = timeout_ms;
	w->max_retries = max_retries;
	w->backoff_ms = backoff_ms ? backoff_ms : 1;
	w->q = wd_calloc(queue_max, sizeof(*w->q));
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = pthread_create(&w->thr, NULL, sender, w);
	if (rc) {
		free(w->q);
		free(w->url);
		free(w);
		errno = rc;
		return NULL;
	}
	return w;
}

void wd_webhook_free(struct wd_webhook *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thr, NULL);
	for (uint32_t i = 0; i < w->n; i++)
		free(w->q[(w->head + i) % w->qmax]);
	free(w->q);
	free(w->url);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

int wd_webhook_push(struct wd_webhook *w, char *body)
{
	int rc = 0;
	pthread_mutex_lock(&w->mu);
	if (w->stop || w->n >= w->qmax) {
		w->st.dropped++;
		rc = -ENOSPC;
		free(body);
	} else {
		w->q[(w->head + w->n) % w->qmax] = body;
		w->n++;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

void wd_webhook_stats(struct wd_webhook *w, struct wd_webhook_stats *out)
{
	pthread_mutex_lock(&w->mu);
	*out = w->st;
	out->depth = w->n;
	pthread_mutex_unlock(&w->mu);
}

int wd_webhook_flush(struct wd_webhook *w, int timeout_ms)
{
	uint64_t end = wd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	pthread_mutex_lock(&w->mu);
	while (w->n || w->inflight) {
		uint64_t now = wd_now_ns();
		if (now >= end)
			break;
		uint64_t left = (end - now) / 1000000ull + 1;
		(void)wait_ms_locked(w, (uint32_t)WD_MIN(left, 50));
	}
	int rc = (w->n || w->inflight) ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&w->mu);
	return rc;
}
