/* Denial-rate alerting: what the alerter tells the rest of the daemon --
 * its counters, a key's judged state, waiting for it to catch up, and its
 * Prometheus families. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "alert/alert_int.h"
#include "alert/alertmanager.h"
#include "alert/metrics.h"
#include "alert/webhook.h"

void wd_alert_stats(struct wd_alert *a, struct wd_alert_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&a->mu);
	out->processed = a->processed;
	out->next_seq = a->cur.next;
	out->lost_overrun = a->cur.lost;
	out->alerts_spike = a->alerts_spike;
	out->alerts_lost = a->alerts_lost;
	out->alerts = a->alerts_spike + a->alerts_lost;
	out->keys = a->keys.n;
	out->keys_evicted = a->keys.evicted;
	pthread_mutex_unlock(&a->mu);
	if (a->wh) {
		struct wd_webhook_stats w;
		wd_webhook_stats(a->wh, &w);
		out->webhook_sent = w.sent;
		out->webhook_failures = w.failures;
		out->webhook_retries = w.retries;
		out->webhook_dropped = w.dropped;
		out->queue_depth = w.depth;
	}
	if (a->am) {
		struct wd_webhook_stats w;
		wd_am_stats(a->am, &w);
		out->am_sent = w.sent;
		out->am_failures = w.failures;
		out->am_retries = w.retries;
		out->am_dropped = w.dropped;
		pthread_mutex_lock(&a->mu);
		out->am_active = (uint32_t)wd_am_active(a->am);
		out->am_overflow = wd_am_overflow(a->am);
		pthread_mutex_unlock(&a->mu);
	}
}

int wd_alert_sync(struct wd_alert *a, uint64_t seq, int timeout_ms)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	int rc = 0;
	pthread_mutex_lock(&a->mu);
	while (a->done_seq < seq && !a->reader_done)
		if (pthread_cond_timedwait(&a->cv, &a->mu, &dl) == ETIMEDOUT)
			break;
	if (a->done_seq < seq)
		rc = -ETIMEDOUT;
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int wd_alert_flush(struct wd_alert *a, int timeout_ms)
{
	int rc = a->wh ? wd_webhook_flush(a->wh, timeout_ms) : 0;
	int rc2 = a->am ? wd_am_flush(a->am, timeout_ms) : 0;
	return rc ? rc : rc2;
}

int wd_alert_key(struct wd_alert *a, enum wd_alert_dim dim, const char *value,
		 struct wd_alert_key_view *out)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&a->mu);
	struct wd_akey *k = wd_akeys_find(&a->keys, dim, value);
	if (k) {
		struct wd_judged j;
		wd_alert_judge(a, k, wd_alert_now(a), &j);
		out->short_count = j.sc;
		out->long_count = j.lc;
		out->baseline_per_short = j.base;
		out->threshold = j.thr;
		out->in_spike = k->in_spike;
		out->alerts = k->alerts;
		rc = 0;
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

/* ---- metrics ---- */

/* Families (all new; none collides with wd_rt_metrics's):
 *   warden_denial_events_total{source,kind,team,tool,verdict}  counter
 *   warden_denial_events_lost_total{reason}                   counter
 *   warden_denial_rate_per_second{dim,key,window}              gauge
 *   warden_alerts_total{type}                                  counter
 *   warden_alerts_suppressed_total                             counter
 *   warden_alert_webhook_{sent,failures,retries,dropped}_total counter
 *   warden_alert_queue_depth, warden_alert_keys                gauge
 *   warden_alert_keys_evicted_total, warden_alert_events_processed_total
 */
void wd_alert_metrics_render(struct wd_alert *a, struct wd_buf *out)
{
	struct wd_alert_stats st;
	wd_alert_stats(a, &st);
	pthread_mutex_lock(&a->mu);
	uint64_t now = wd_alert_now(a);
	wd_metrics_family(
	    out, "warden_denial_events_total", "counter",
	    "Denial and audit events seen on the node's event stream.");
	for (struct wd_series *s = a->series.first; s; s = s->next) {
		wd_buf_printf(out, "warden_denial_events_total{");
		wd_metrics_label(out, "source", s->source, true);
		wd_metrics_label(out, "kind", s->kind, false);
		wd_metrics_label(out, "team", s->team, false);
		wd_metrics_label(out, "tool", s->tool, false);
		wd_metrics_label(out, "verdict", s->verdict, false);
		wd_buf_printf(out, "} %llu\n", (unsigned long long)s->count);
	}
	if (a->series.other)
		wd_buf_printf(out,
			      "warden_denial_events_total{source=\"other\","
			      "kind=\"other\",team=\"other\",tool=\"other\","
			      "verdict=\"other\"} %llu\n",
			      (unsigned long long)a->series.other->count);
	wd_metrics_family(out, "warden_denial_events_lost_total", "counter",
			  "Denial events lost before alerting saw them, by "
			  "where they were lost.");
	for (int i = 0; i < LOST_KINDS; i++)
		wd_buf_printf(out,
			      "warden_denial_events_lost_total{reason=\"%s\"} "
			      "%llu\n",
			      wd_alert_lost_name(i),
			      (unsigned long long)a->lost_seen[i]);
	wd_metrics_family(
	    out, "warden_denial_rate_per_second", "gauge",
	    "Denial rate per key over the short window and baseline.");
	for (struct wd_akey *k = a->keys.newest; k; k = k->older) {
		struct wd_judged j;
		wd_alert_judge(a, k, now, &j);
		double rs = (double)j.sc * NS / (double)a->short_ns;
		double rb = j.base * NS / (double)a->short_ns;
		for (int w = 0; w < 2; w++) {
			wd_buf_printf(out, "warden_denial_rate_per_second{");
			wd_metrics_label(out, "dim", wd_alert_dim_name(k->dim),
					 true);
			wd_metrics_label(out, "key", k->value, false);
			wd_metrics_label(out, "window",
					 w ? "baseline" : "short", false);
			wd_buf_printf(out, "} %.6g\n", w ? rb : rs);
		}
	}
	wd_metrics_family(out, "warden_alerts_total", "counter",
			  "Alerts raised.");
	wd_buf_printf(out,
		      "warden_alerts_total{type=\"denial_spike\"} %llu\n"
		      "warden_alerts_total{type=\"events_lost\"} %llu\n",
		      (unsigned long long)a->alerts_spike,
		      (unsigned long long)a->alerts_lost);
	wd_metrics_family(
	    out, "warden_alerts_suppressed_total", "counter",
	    "Spike crossings the webhook did not post: folded into the "
	    "alert of a more specific key, or within the key's cool-down "
	    "(Alertmanager is sent each of them).");
	wd_buf_printf(out, "warden_alerts_suppressed_total %llu\n",
		      (unsigned long long)a->suppressed);
	pthread_mutex_unlock(&a->mu);
	struct {
		const char *name, *type, *help;
		uint64_t v;
	} m[] = {
	    {"warden_alert_webhook_sent_total", "counter",
	     "Alerts the webhook accepted (2xx).", st.webhook_sent},
	    {"warden_alert_webhook_failures_total", "counter",
	     "Alerts given up on after all retries.", st.webhook_failures},
	    {"warden_alert_webhook_retries_total", "counter",
	     "Webhook attempts retried.", st.webhook_retries},
	    {"warden_alert_webhook_dropped_total", "counter",
	     "Alerts dropped: queue full or shutting down.",
	     st.webhook_dropped},
	    {"warden_alert_queue_depth", "gauge",
	     "Alerts waiting for the webhook.", st.queue_depth},
	    {"warden_alert_keys", "gauge", "Alert keys held.", st.keys},
	    {"warden_alert_keys_evicted_total", "counter",
	     "Alert keys evicted by the key cap.", st.keys_evicted},
	    {"warden_alert_events_processed_total", "counter",
	     "Events the alerter has read.", st.processed},
	    {"warden_alertmanager_sent_total", "counter",
	     "Posts Alertmanager accepted (2xx).", st.am_sent},
	    {"warden_alertmanager_failures_total", "counter",
	     "Posts to Alertmanager given up on after all retries.",
	     st.am_failures},
	    {"warden_alertmanager_retries_total", "counter",
	     "Posts to Alertmanager retried.", st.am_retries},
	    {"warden_alertmanager_dropped_total", "counter",
	     "Posts to Alertmanager dropped: queue full or shutting down.",
	     st.am_dropped},
	    {"warden_alertmanager_alerts_active", "gauge",
	     "The daemon's own alerts firing at Alertmanager.", st.am_active},
	    {"warden_alertmanager_overflow_total", "counter",
	     "Alerts not sent to Alertmanager: 256 were firing already.",
	     st.am_overflow},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(m); i++) {
		wd_metrics_family(out, m[i].name, m[i].type, m[i].help);
		wd_buf_printf(out, "%s %llu\n", m[i].name,
			      (unsigned long long)m[i].v);
	}
}
