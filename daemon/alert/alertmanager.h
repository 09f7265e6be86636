/* Alerts to Prometheus Alertmanager, as its v2 API takes them
 * (POST <base>/api/v2/alerts, Content-Type: application/json, a JSON
 * array of {labels, annotations, startsAt, endsAt, generatorURL};
 * prometheus.io/docs/alerting/clients, api/v2/openapi.yaml's
 * postableAlerts). Alertmanager identifies an alert by its labels and
 * expects a client to send it again while it is active ("on the order of
 * 30 seconds to 3 minutes"), else it resolves it itself after its
 * resolve_timeout; endsAt is set only once the end is known. So:
 *   fire     the alert is posted at once with startsAt (no endsAt)
 *   repeat   every resend_ns, every active alert is posted again
 *   resolve  posted once with endsAt = now, then forgotten
 * Delivery goes through a wd_webhook (bounded queue, its own thread,
 * retries with backoff); the caller's thread never blocks on the network.
 * Not thread-safe: the alerter calls it under its own lock. Internal to
 * daemon/alert/.
 */
#ifndef WD_ALERT_ALERTMANAGER_H
#define WD_ALERT_ALERTMANAGER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "alert/webhook.h"

struct wd_am;

/* url: Alertmanager's base URL (http[s]://host:port[/prefix]), or the
 * full .../api/v2/alerts. generator_url: the alerts' back-link (NULL =
 * none). NULL + errno EINVAL for a URL that is not http(s). */
struct wd_am *wd_am_new(const char *url, const char *generator_url,
			uint64_t resend_ns, uint32_t timeout_ms,
			uint32_t max_retries, uint32_t backoff_ms);
/* Stops the sender; alerts still active are not resolved (Alertmanager
 * resolves them after its resolve_timeout: a stopped daemon is not a
 * resolved spike). */
void wd_am_free(struct wd_am *am);

/* Fire the alert identified by `id` (the caller's key, e.g. "tool\x1ffetch")
 * or update an active one's annotations. labels must hold alertname;
 * labels and annotations are consumed. now: the caller's monotonic clock;
 * wall: CLOCK_REALTIME ns (startsAt). Posts at once when new. */
void wd_am_fire(struct wd_am *am, const char *id, json_t *labels,
		json_t *annotations, uint64_t now, uint64_t wall);
/* Resolve every active alert for which still(arg, id) is false (posted
 * with endsAt = wall), then repeat the active ones if resend_ns passed. */
void wd_am_tick(struct wd_am *am, uint64_t now, uint64_t wall,
		bool (*still)(void *arg, const char *id), void *arg);
int wd_am_active(const struct wd_am *am);
/* Alerts not sent because AM_MAX_ACTIVE (256) were active already. */
uint64_t wd_am_overflow(const struct wd_am *am);
void wd_am_stats(struct wd_am *am, struct wd_webhook_stats *out);
/* 0 once everything queued was sent or given up on, else -ETIMEDOUT. */
int wd_am_flush(struct wd_am *am, int timeout_ms);

#endif
