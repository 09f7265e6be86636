/* Denial-rate alerting: follow the node-wide event stream, keep sliding-
 * window denial counts per key, raise one alert per spike, deliver alerts
 * to a webhook, and render Prometheus metrics.
 *
 *   wd_stream ──cursor──▶ alert thread ──▶ per-key windows ──▶ spike?
 *                            │                                   │
 *                            └─▶ counters (metrics)     bounded queue
 *                                                                │
 *                                              webhook thread (libcurl,
 *                                              retries with backoff)
 *
 * Keys. Every event updates one key per enabled dimension:
 *   node   (the node name)          team   (event.team)
 *   agent  ("team/agent")           tool   (event.tool)
 *   source ("seccomp", "bpf", ...)  kind   ("source:kind", e.g. "bpf:connect")
 * An empty attribute is the value "unknown". At most max_keys keys are
 * held; a new key evicts the least recently updated one (counted).
 *
 * Windows. Each key has a short ring (short_window_s in 60 buckets) and a
 * long ring (long_window_s in 60 buckets); memory per key is fixed.
 *   short  = events in the last short window
 *   base   = (long-window events - short) / (observed - short_window) * short
 *            — the baseline expressed as "expected events per short window",
 *            where observed = min(long window, time since the alerter
 *            started). The short window is excluded so a spike does not
 *            raise its own baseline.
 *   spike  ⇔ short >= min_count  and  short > factor * base
 * While the alerter is younger than warmup_s (default 2 short windows) no
 * spike alert is raised (there is no baseline yet); counts are kept.
 * Cool-down: a key alerts when it enters the spike state, and not again
 * until it has left that state and cooldown_s has passed since its last
 * alert — one spike, one alert. Across dimensions (judged most specific
 * first: tool, agent, kind, team, source, node): keys crossing on the same
 * event share one alert ("keys"); a key crossing while a more specific key
 * of the same event is already in a reported spike is folded into it
 * (counted as suppressed), so a burst on one tool raises one alert, not
 * one per dimension, while a node-wide spike never hides a new tool's.
 * The cool-down and the folding apply to the webhook only: Alertmanager
 * (--alertmanager) is sent every key that enters its spike as an alert of
 * its own, again after a resolve however soon (a crossing the webhook is
 * spared within the cool-down is counted as suppressed), because its
 * state must follow the truth; Alertmanager groups and throttles.
 * Keys: tool "team/tool" and agent "team/agent" (per team: Alertmanager
 * labels team, tool / agent), team, and the node-wide source, kind
 * "source:kind" and node.
 *
 * Loss. Events the alerter's cursor missed (stream overrun) are counted
 * (warden_denial_events_lost_total{reason="overrun"}), carried in every
 * alert, and raise an alert of type "events_lost" (same cool-down rule,
 * key node). The stream's own losses (BPF ring buffer, sources) are
 * reported alongside.
 *
 * Alert document (JSON, POSTed with Content-Type: application/json):
 *   {"type":"denial_spike", "node":..., "ts":"ISO-8601", "key":{"dim":
 *    "tool","value":"fetch"}, "window":{"short_s":60,"long_s":3600,
 *    "short_count":N,"long_count":N,"baseline_per_short":X,
 *    "threshold":X,"factor":F,"min_count":M},
 *    "first":{event sample}, "last":{event sample},
 *    "lost":{"overrun":N,"bpf_ringbuf":N,"source":N}, "seq":N}
 *   event sample = {"seq", "ts", "run_id", "step", "call_id", "tool",
 *    "agent", "team", "source", "kind", "syscall", "target", "err",
 *    "verdict", "pid", "uid"}; "first" is the key's first event in the
 *   current short window, "last" the event that crossed the threshold.
 *   type "events_lost" has "lost" and "lost_new" (missed since the last
 *   such alert) and no window/first/last.
 *
 * Delivery. Alerts are logged (wd_warn) and queued for the webhook thread
 * (queue_max entries; when full the alert is dropped and counted — the
 * stream is never blocked). Each POST has timeout_ms; a failure (transport
 * error or non-2xx) is retried max_retries times with exponential backoff
 * (backoff_ms, doubling, capped at 30 s); after the last try it counts as
 * a webhook failure. Without a webhook URL alerts are only logged/counted.
 *
 * Alertmanager (alertmanager_url; alertmanager.h): each spike alert and
 * each events_lost alert is also an Alertmanager alert, posted to its v2
 * API when raised, repeated every resend_s while active and posted with
 * endsAt when it ends: a spike ends when its key's short-window count is
 * no longer a spike (checked every reader loop, ~100 ms, without waiting
 * for the key's next event); a loss alert ends once a short window passed
 * with no new loss. Labels: alertname WardenDaemonDenialSpike (severity
 * warning, node, dim, and the key as its own labels: tool, team,
 * team+agent, source, source+kind) or WardenDaemonEventsLost (severity
 * warning, node); annotations: summary, description, first_event and
 * last_event (run/step/tool/kind/target of the key's first event in the
 * window and the one that crossed), short_count, baseline, threshold.
 *
 * Threads: one reader (the stream), one sender per target (webhook,
 * Alertmanager). The render and
 * query functions may be called from any thread.
 */
#ifndef WD_ALERT_H
#define WD_ALERT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"
#include "events/stream.h"

enum wd_alert_dim {
	WD_DIM_NODE,
	WD_DIM_TEAM,
	WD_DIM_AGENT,
	WD_DIM_TOOL,
	WD_DIM_SOURCE,
	WD_DIM_KIND,
	WD_DIM_NR,
};
#define WD_DIM_ALL ((1u << WD_DIM_NR) - 1)

/* A clock in nanoseconds (monotonic in production; tests inject theirs). */
typedef uint64_t (*wd_alert_clock_fn)(void *arg);

struct wd_alert_config {
	const char *node;	      /* node name; NULL = gethostname() */
	const char *webhook_url;      /* NULL/"" = log and count only */
	const char *alertmanager_url; /* NULL/"" = none; see above */
	const char *generator_url;    /* Alertmanager back-link; NULL = none */
	uint32_t resend_s;	 /* Alertmanager repeat; 0 = min(60, short) */
	uint32_t short_window_s; /* 0 = 60 */
	uint32_t long_window_s;	 /* 0 = 3600; must be >= 2 x short */
	double factor;		 /* 0 = 5.0 */
	uint32_t min_count;	 /* 0 = 20 (events per short window) */
	uint32_t cooldown_s;	 /* 0 = 300 */
	uint32_t warmup_s;	 /* 0 = 2 x short window; see above */
	uint32_t dims;		 /* bitmask of 1 << wd_alert_dim; 0 = all */
	bool denied_only;	 /* ignore verdict "audited" (default: count
				  * both; audit mode's would-be denials are a
				  * signal too) */
	uint32_t max_keys;	 /* 0 = 1024 */
	uint32_t max_series;	 /* counter label sets; 0 = 4096; beyond it
				  * counts go to labels "other" */
	uint32_t queue_max;	 /* 0 = 64 */
	uint32_t timeout_ms;	 /* per POST; 0 = 5000 */
	uint32_t max_retries;	 /* UINT32_MAX = none; 0 = 3 */
	uint32_t backoff_ms;	 /* first retry delay; 0 = 500 */
	uint64_t since_seq;	 /* cursor start; 0 = oldest held */
	wd_alert_clock_fn clock; /* NULL = wd_now_ns */
	void *clock_arg;
};

struct wd_alert;

/* The back-link of the daemon's Alertmanager alerts (generatorURL).
 * `given` (--alert-generator-url): used as it is once checked: http:// or
 * https://, a host, no spaces or control characters, < 512 bytes.
 * Otherwise derived from `metrics` (--metrics ADDR:PORT, may be NULL:
 * then *out = NULL, no link): http://ADDR:PORT/metrics, where the
 * wildcard 0.0.0.0 is replaced by `hostname` (the node's name: a wildcard
 * is not an address a reader can open) and no ADDR is 127.0.0.1 (as the
 * listener binds it). 0 with *out
 * (malloc'd or NULL), or -EINVAL with err->msg. */
int wd_alert_generator_url(const char *given, const char *metrics,
			   const char *hostname, char **out,
			   struct wd_err *err);

/* Validate cfg, start the reader and sender threads. Returns 0 / -errno
 * (-EINVAL with err->msg for a bad config). */
int wd_alert_new(const struct wd_alert_config *cfg, struct wd_stream *events,
		 struct wd_alert **out, struct wd_err *err);
/* Stop both threads (pending webhook retries are abandoned; queued alerts
 * still undelivered are counted as dropped) and free. NULL is a no-op.
 * Call before the stream is freed. */
void wd_alert_free(struct wd_alert *a);

/* Append Prometheus text exposition (families prefixed warden_denial_ and
 * warden_alert; see wd_alert_metrics_render in alert.c for the list). */
void wd_alert_metrics_render(struct wd_alert *a, struct wd_buf *out);

struct wd_alert_stats {
	uint64_t processed;    /* events read from the stream */
	uint64_t next_seq;     /* cursor position */
	uint64_t lost_overrun; /* events the cursor missed */
	uint64_t alerts;       /* raised (spike + loss) */
	uint64_t alerts_spike;
	uint64_t alerts_lost;
	uint64_t webhook_sent;	   /* 2xx received */
	uint64_t webhook_failures; /* gave up after retries */
	uint64_t webhook_retries;  /* individual retried attempts */
	uint64_t webhook_dropped;  /* queue full or shut down */
	uint64_t am_sent, am_failures, am_retries, am_dropped;
	uint32_t am_active;
	uint64_t am_overflow; /* not sent: too many active already */
	uint64_t keys;	      /* keys held now */
	uint64_t keys_evicted;
	uint32_t queue_depth;
};
void wd_alert_stats(struct wd_alert *a, struct wd_alert_stats *out);

/* Wait until the reader has processed every event up to seq (inclusive),
 * or timeout_ms passes. 0 / -ETIMEDOUT. For tests and orderly shutdown. */
int wd_alert_sync(struct wd_alert *a, uint64_t seq, int timeout_ms);
/* Wait until the webhook queue is empty and nothing is in flight.
 * 0 / -ETIMEDOUT. */
int wd_alert_flush(struct wd_alert *a, int timeout_ms);

/* Current window view of one key (for tests and `warden status`):
 * 0, or -ENOENT if the key is not held. */
struct wd_alert_key_view {
	uint64_t short_count, long_count;
	double baseline_per_short, threshold;
	bool in_spike;
	uint64_t alerts;
};
int wd_alert_key(struct wd_alert *a, enum wd_alert_dim dim, const char *value,
		 struct wd_alert_key_view *out);

const char *wd_alert_dim_name(enum wd_alert_dim d);

#endif
