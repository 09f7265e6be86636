/* Alertmanager v2 client: active alert set, repeat, resolve. */
#include "alert/alertmanager.h"

#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/util.h"

/* Alerts active at once; a spike on more keys than this is not a state
 * worth tracking per key (the node and team keys still say it). */
#define AM_MAX_ACTIVE 256

struct am_alert {
	char *id;
	json_t *doc; /* {labels, annotations, startsAt[, generatorURL]} */
};

struct wd_am {
	struct wd_webhook *wh;
	char *generator_url;
	uint64_t resend_ns, last_resend;
	struct am_alert a[AM_MAX_ACTIVE];
	int n;
	uint64_t overflow;
};

struct wd_am *wd_am_new(const char *url, const char *generator_url,
			uint64_t resend_ns, uint32_t timeout_ms,
			uint32_t max_retries, uint32_t backoff_ms)
{
	if (!url || (strncasecmp(url, "http://", 7) &&
		     strncasecmp(url, "https://", 8))) {
		errno = EINVAL;
		return NULL;
	}
	size_t n = strlen(url);
	while (n > 8 && url[n - 1] == '/')
		n--;
	static const char path[] = "/api/v2/alerts";
	size_t pl = sizeof(path) - 1;
	cleanup_free char *full =
	    n >= pl && !strncmp(url + n - pl, path, pl)
		? wd_asprintf("%.*s", (int)n, url)
		: wd_asprintf("%.*s%s", (int)n, url, path);
	struct wd_webhook *wh =
	    wd_webhook_new(full, 64, timeout_ms, max_retries, backoff_ms);
	if (!wh)
		return NULL;
	struct wd_am *am = wd_calloc(1, sizeof(*am));
	am->wh = wh;
	am->generator_url =
	    generator_url && *generator_url ? wd_strdup(generator_url) : NULL;
	am->resend_ns = resend_ns ? resend_ns : 60ull * 1000000000ull;
	return am;
}

void wd_am_free(struct wd_am *am)
{
	if (!am)
		return;
	wd_webhook_free(am->wh);
	for (int i = 0; i < am->n; i++) {
		free(am->a[i].id);
		json_decref(am->a[i].doc);
	}
	free(am->generator_url);
	free(am);
}

/* Post a JSON array (consumed). */
static void post(struct wd_am *am, json_t *arr)
{
	char *body = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	if (body)
		(void)wd_webhook_push(am->wh, body);
}

static int find(const struct wd_am *am, const char *id)
{
	for (int i = 0; i < am->n; i++)
		if (!strcmp(am->a[i].id, id))
			return i;
	return -1;
}

void wd_am_fire(struct wd_am *am, const char *id, json_t *labels,
		json_t *annotations, uint64_t now, uint64_t wall)
{
	int i = find(am, id);
	if (i >= 0) {
		/* annotations are "always set to those received most
		 * recently": the next repeat carries these */
		json_object_set_new(am->a[i].doc, "annotations", annotations);
		json_decref(labels);
		return;
	}
	if (am->n == AM_MAX_ACTIVE) {
		am->overflow++;
		wd_warn("alertmanager: %d alerts active already; '%s' not "
			"sent",
			AM_MAX_ACTIVE, id);
		json_decref(labels);
		json_decref(annotations);
		return;
	}
	char ts[64];
	wd_iso8601(wall, ts, sizeof(ts));
	json_t *doc = json_pack("{s:o,s:o,s:s}", "labels", labels,
				"annotations", annotations, "startsAt", ts);
	if (am->generator_url)
		json_object_set_new(doc, "generatorURL",
				    json_string(am->generator_url));
	if (!am->n)
		am->last_resend = now; /* the next repeat is resend_ns away */
	am->a[am->n].id = wd_strdup(id);
	am->a[am->n].doc = doc;
	am->n++;
	post(am, json_pack("[O]", doc));
}

void wd_am_tick(struct wd_am *am, uint64_t now, uint64_t wall,
		bool (*still)(void *arg, const char *id), void *arg)
{
	char ts[64];
	wd_iso8601(wall, ts, sizeof(ts));
	json_t *resolved = NULL;
	for (int i = 0; i < am->n;) {
		if (still(arg, am->a[i].id)) {
			i++;
			continue;
		}
		json_object_set_new(am->a[i].doc, "endsAt", json_string(ts));
		if (!resolved)
			resolved = json_array();
		json_array_append_new(resolved, am->a[i].doc);
		free(am->a[i].id);
		am->a[i] = am->a[--am->n];
	}
	if (resolved)
		post(am, resolved);
	if (!am->n || now - am->last_resend < am->resend_ns)
		return;
	am->last_resend = now;
	json_t *arr = json_array();
	for (int i = 0; i < am->n; i++)
		json_array_append(arr, am->a[i].doc);
	post(am, arr);
}

int wd_am_active(const struct wd_am *am)
{
	return am->n;
}

uint64_t wd_am_overflow(const struct wd_am *am)
{
	return am->overflow;
}

void wd_am_stats(struct wd_am *am, struct wd_webhook_stats *out)
{
	wd_webhook_stats(am->wh, out);
}

int wd_am_flush(struct wd_am *am, int timeout_ms)
{
	return wd_webhook_flush(am->wh, timeout_ms);
}
