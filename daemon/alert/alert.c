/* Denial-rate alerting: the stream follower, spike detection, alert
 * documents and metrics. See alert.h for the model. */
#include "alert/alert_int.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "alert/alertmanager.h"
#include "alert/metrics.h"
#include "alert/webhook.h"
#include "alert/window.h"
#include "common/log.h"

#define READ_BATCH 256

const char *wd_alert_lost_name(int i)
{
	return i == LOST_OVERRUN
		   ? "overrun"
		   : wd_stream_lost_name(
			 (enum wd_stream_lost_src)(i - LOST_STREAM));
}

/* "N overrun, N bpf_ringbuf, ..." for the log and Alertmanager */
static char *lost_text(const uint64_t v[LOST_KINDS])
{
	struct wd_buf b = {0};
	for (int i = 0; i < LOST_KINDS; i++)
		wd_buf_printf(&b, "%s%llu %s", i ? ", " : "",
			      (unsigned long long)v[i], wd_alert_lost_name(i));
	return b.data ? b.data : wd_strdup("");
}

static const char *const dim_names[WD_DIM_NR] = {
    [WD_DIM_NODE] = "node",	[WD_DIM_TEAM] = "team",
    [WD_DIM_AGENT] = "agent",	[WD_DIM_TOOL] = "tool",
    [WD_DIM_SOURCE] = "source", [WD_DIM_KIND] = "kind",
};
/* Order in which an event's keys are judged: when several cross on the
 * same event, the alert names the most specific one. */
static const int dim_order[WD_DIM_NR] = {WD_DIM_TOOL,	WD_DIM_AGENT,
					 WD_DIM_KIND,	WD_DIM_TEAM,
					 WD_DIM_SOURCE, WD_DIM_NODE};

const char *wd_alert_dim_name(enum wd_alert_dim d)
{
	return (unsigned)d < WD_DIM_NR ? dim_names[d] : "?";
}

static uint64_t default_clock(void *arg)
{
	return wd_now_ns();
}

/* Event strings come from the kernel and from sources we do not control:
 * bound them (they need not be NUL-terminated) and keep printable ASCII so
 * they are valid JSON strings and Prometheus label values. */
static void safe_copy(char *dst, size_t dsz, const char *src, size_t ssz,
		      const char *empty)
{
	size_t n = strnlen(src, ssz), j = 0;
	if (!n) {
		snprintf(dst, dsz, "%s", empty);
		return;
	}
	for (size_t i = 0; i < n && j + 1 < dsz; i++) {
		unsigned char ch = (unsigned char)src[i];
		dst[j++] = (ch < 0x20 || ch >= 0x7f) ? '?' : (char)ch;
	}
	dst[j] = 0;
}
#define SAFE(dst, field, empty)                                                \
	safe_copy(dst, sizeof(dst), field, sizeof(field), empty)

struct evstr {
	char team[64], agent[64], tool[64], kind[WD_EVENT_KIND_LEN], run_id[40],
	    call_id[40], syscall[32], target[256];
	const char *source;
};

static void ev_strings(const struct wd_event *e, struct evstr *o)
{
	SAFE(o->team, e->team, "unknown");
	SAFE(o->agent, e->agent, "unknown");
	SAFE(o->tool, e->tool, "unknown");
	SAFE(o->kind, e->kind, "unknown");
	SAFE(o->run_id, e->run_id, "");
	SAFE(o->call_id, e->call_id, "");
	SAFE(o->syscall, e->syscall, "");
	SAFE(o->target, e->target, "");
	o->source = wd_event_source_name(e->source);
	if (!o->source)
		o->source = "unknown";
}

static void dim_value(struct wd_alert *a, int dim, const struct evstr *s,
		      char *out, size_t len)
{
	switch (dim) {
	case WD_DIM_NODE:
		snprintf(out, len, "%s", a->node);
		break;
	case WD_DIM_TEAM:
		snprintf(out, len, "%s", s->team);
		break;
	case WD_DIM_AGENT:
		snprintf(out, len, "%s/%s", s->team, s->agent);
		break;
	case WD_DIM_TOOL:
		/* per team: a tool name is shared by every team whose
		 * agents are granted it, and each team routes its own
		 * alerts (Alertmanager's team label, key_labels) */
		snprintf(out, len, "%s/%s", s->team, s->tool);
		break;
	case WD_DIM_SOURCE:
		snprintf(out, len, "%s", s->source);
		break;
	default:
		snprintf(out, len, "%s:%s", s->source, s->kind);
		break;
	}
}

/* ---- detection ---- */

void wd_alert_judge(struct wd_alert *a, struct wd_akey *k, uint64_t now,
		    struct wd_judged *j)
{
	j->sc = wd_win_count(&k->s, now);
	j->lc = wd_win_count(&k->l, now);
	uint64_t age = now > a->start_ns ? now - a->start_ns : 0;
	uint64_t observed = WD_MIN(a->long_ns, age);
	/* the baseline excludes the short window (a spike must not raise
	 * its own bar); at least one short window of history is assumed so
	 * a young alerter does not divide by a tiny span */
	uint64_t span =
	    observed > 2 * a->short_ns ? observed - a->short_ns : a->short_ns;
	uint64_t bc = j->lc > j->sc ? j->lc - j->sc : 0;
	j->base = (double)bc * (double)a->short_ns / (double)span;
	j->thr = WD_MAX((double)a->min_count, a->factor * j->base);
	j->spike = j->sc >= a->min_count && (double)j->sc > a->factor * j->base;
}

static json_t *sample_json(const struct wd_stream_entry *en)
{
	const struct wd_event *e = &en->ev;
	struct evstr s;
	ev_strings(e, &s);
	char ts[64];
	wd_iso8601(e->ts_ns, ts, sizeof(ts));
	return json_pack(
	    "{s:I,s:s,s:I,s:s,s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:s,"
	    "s:i,s:I}",
	    "seq", (json_int_t)en->seq, "ts", ts, "ts_ns", (json_int_t)e->ts_ns,
	    "run_id", s.run_id, "step", (int)e->step, "call_id", s.call_id,
	    "tool", s.tool, "agent", s.agent, "team", s.team, "source",
	    s.source, "kind", s.kind, "syscall", s.syscall, "target", s.target,
	    "err", (int)e->err, "verdict",
	    e->verdict == WD_VERDICT_AUDITED ? "audited" : "denied", "pid",
	    (int)e->pid, "uid", (json_int_t)e->uid);
}

static json_t *lost_json(const uint64_t v[LOST_KINDS])
{
	json_t *o = json_object();
	for (int i = 0; i < LOST_KINDS; i++)
		json_object_set_new(o, wd_alert_lost_name(i),
				    json_integer((json_int_t)v[i]));
	return o;
}

static json_t *alert_head(struct wd_alert *a, const char *type, uint64_t seq)
{
	char ts[64];
	wd_iso8601(wd_wall_ns(), ts, sizeof(ts));
	return json_pack("{s:s,s:s,s:s,s:I,s:o}", "type", type, "node", a->node,
			 "ts", ts, "seq", (json_int_t)seq, "lost",
			 lost_json(a->lost_seen));
}

/* Log and queue one alert document (consumes o). Called with a->mu held;
 * the webhook's lock is never held while taking a->mu. */
static void emit(struct wd_alert *a, json_t *o)
{
	char *body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!body)
		return;
	if (a->wh)
		(void)wd_webhook_push(a->wh, body);
	else
		free(body);
}

/* "run R step S tool T (team M, agent A): SOURCE KIND [SYSCALL] [TARGET]
 * (errno E, denied)": an event, for an alert annotation */
static char *sample_text(const struct wd_stream_entry *en)
{
	struct evstr s;
	ev_strings(&en->ev, &s);
	return wd_asprintf(
	    "run %s step %d tool %s (team %s, agent %s): %s %s%s%s%s%s "
	    "(errno %d, %s)",
	    s.run_id[0] ? s.run_id : "-", (int)en->ev.step, s.tool, s.team,
	    s.agent, s.source, s.kind, s.syscall[0] ? " " : "", s.syscall,
	    s.target[0] ? " " : "", s.target, (int)en->ev.err,
	    en->ev.verdict == WD_VERDICT_AUDITED ? "audited" : "denied");
}

/* The key as Alertmanager labels: what a route or silence matches on.
 * Keys of one team (team, agent, tool: dim_value) carry `team`, so a
 * route can send each team its own; an agent's key carries `agent` too.
 * source, kind and node keys are node-wide (their spikes span teams):
 * no team label, they go to whoever the route sends unlabelled alerts.
 * Every value is a policy name or a fixed set: bounded. */
static void key_labels(json_t *l, int dim, const char *value)
{
	char a[136], b[136];
	const char *sep = NULL;
	json_object_set_new(l, "dim", json_string(dim_names[dim]));
	switch (dim) {
	case WD_DIM_TEAM:
	case WD_DIM_SOURCE:
		json_object_set_new(l, dim_names[dim], json_string(value));
		break;
	case WD_DIM_AGENT: /* "team/agent" */
	case WD_DIM_TOOL:  /* "team/tool" */
	case WD_DIM_KIND:  /* "source:kind" */
		sep = strchr(value, dim == WD_DIM_KIND ? ':' : '/');
		if (!sep)
			break;
		snprintf(a, sizeof(a), "%.*s", (int)(sep - value), value);
		snprintf(b, sizeof(b), "%s", sep + 1);
		json_object_set_new(l, dim == WD_DIM_KIND ? "source" : "team",
				    json_string(a));
		json_object_set_new(l, dim_names[dim], json_string(b));
		break;
	default:
		break;
	}
}

static void am_fire_spike(struct wd_alert *a, struct wd_akey *k,
			  const struct wd_judged *j)
{
	json_t *l =
	    json_pack("{s:s,s:s,s:s}", "alertname", "WardenDaemonDenialSpike",
		      "severity", "warning", "node", a->node);
	key_labels(l, k->dim, k->value);
	cleanup_free char *first = sample_text(&k->first);
	cleanup_free char *last = sample_text(&k->last);
	cleanup_free char *summary = wd_asprintf(
	    "Denial spike on %s %s: %llu denials in %llu s (baseline %.1f, "
	    "threshold %.1f)",
	    dim_names[k->dim], k->value, (unsigned long long)j->sc,
	    (unsigned long long)(a->short_ns / NS), j->base, j->thr);
	cleanup_free char *desc = wd_asprintf(
	    "wardend on %s saw %llu kernel denials for %s '%s' in its last "
	    "%llu s window, over %.0fx its baseline of %.1f per window. "
	    "First: %s. Last: %s. The sandbox held; `warden events` and "
	    "`warden trace show RUN` give every event.",
	    a->node, (unsigned long long)j->sc, dim_names[k->dim], k->value,
	    (unsigned long long)(a->short_ns / NS), a->factor, j->base, first,
	    last);
	char n[32], b[32], t[32];
	snprintf(n, sizeof(n), "%llu", (unsigned long long)j->sc);
	snprintf(b, sizeof(b), "%.2f", j->base);
	snprintf(t, sizeof(t), "%.2f", j->thr);
	json_t *an =
	    json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "summary", summary,
		      "description", desc, "first_event", first, "last_event",
		      last, "short_count", n, "baseline", b, "threshold", t);
	char id[160];
	snprintf(id, sizeof(id), "%d\x1f%s", k->dim, k->value);
	wd_am_fire(a->am, id, l, an, wd_alert_now(a), wd_wall_ns());
}

/* Still firing? (wd_am_tick's question, a->mu held.) A spike ends when
 * its key's short window is no longer a spike; a loss alert once a short
 * window passed with no new loss. */
static bool am_still(void *arg, const char *id)
{
	struct wd_alert *a = arg;
	uint64_t now = a->tick_now;
	if (!strncmp(id, "lost\x1f", 5)) {
		/* one alert per reason: it ends once a short window passed
		 * with no new loss there */
		for (int i = 0; i < LOST_KINDS; i++)
			if (!strcmp(id + 5, wd_alert_lost_name(i)))
				return now - a->lost_grew_ns[i] < a->short_ns;
		return false;
	}
	char *sep = strchr(id, '\x1f');
	if (!sep)
		return false;
	int dim = atoi(id);
	struct wd_akey *k = wd_akeys_find(&a->keys, dim, sep + 1);
	if (!k)
		return false; /* evicted: nothing left to judge */
	struct wd_judged j;
	wd_alert_judge(a, k, now, &j);
	if (!j.spike)
		k->in_spike = false;
	return j.spike;
}

static void raise_spike(struct wd_alert *a, struct wd_akey **ks,
			struct wd_judged *js, int n,
			const struct wd_stream_entry *en)
{
	struct wd_akey *k = ks[0];
	json_t *o = alert_head(a, "denial_spike", en->seq);
	json_object_set_new(o, "key",
			    json_pack("{s:s,s:s}", "dim", dim_names[k->dim],
				      "value", k->value));
	json_t *keys = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(
		    keys,
		    json_pack("{s:s,s:s,s:I,s:f}", "dim", dim_names[ks[i]->dim],
			      "value", ks[i]->value, "short_count",
			      (json_int_t)js[i].sc, "baseline_per_short",
			      js[i].base));
	json_object_set_new(o, "keys", keys);
	json_object_set_new(
	    o, "window",
	    json_pack("{s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:I}", "short_s",
		      (json_int_t)(a->short_ns / NS), "long_s",
		      (json_int_t)(a->long_ns / NS), "short_count",
		      (json_int_t)js[0].sc, "long_count", (json_int_t)js[0].lc,
		      "baseline_per_short", js[0].base, "threshold", js[0].thr,
		      "factor", a->factor, "min_count",
		      (json_int_t)a->min_count));
	json_object_set_new(o, "first", sample_json(&k->first));
	json_object_set_new(o, "last", sample_json(&k->last));
	a->alerts_spike++;
	wd_warn("alert: denial spike on %s '%s': %llu events in %llu s "
		"(baseline %.1f, threshold %.1f); last: run %s step %d tool "
		"%s %s %s",
		dim_names[k->dim], k->value, (unsigned long long)js[0].sc,
		(unsigned long long)(a->short_ns / NS), js[0].base, js[0].thr,
		k->last.ev.run_id[0] ? k->last.ev.run_id : "-",
		(int)k->last.ev.step,
		k->last.ev.tool[0] ? k->last.ev.tool : "-", k->last.ev.kind,
		k->last.ev.target);
	emit(a, o);
}

static void process(struct wd_alert *a, const struct wd_stream_entry *en,
		    uint64_t now)
{
	const struct wd_event *e = &en->ev;
	struct evstr s;
	ev_strings(e, &s);
	wd_stab_add(&a->series, s.source, s.kind, s.team, s.tool,
		    e->verdict == WD_VERDICT_AUDITED ? "audited" : "denied");
	a->processed++;
	if (a->denied_only && e->verdict == WD_VERDICT_AUDITED)
		return;

	bool warm = now >= a->start_ns && now - a->start_ns >= a->warmup_ns;
	/* Keys are judged most specific first. A key that crosses while a
	 * more specific key of the same event is already in a reported
	 * spike (or cooling down) is folded into that spike: one spike, one
	 * alert. Keys crossing on the same event share one alert. A less
	 * specific key's ongoing spike (e.g. the node's) never hides a new
	 * tool's spike. */
	bool ongoing = false;
	struct wd_akey *fire[WD_DIM_NR], *amk[WD_DIM_NR];
	struct wd_judged fj[WD_DIM_NR], aj[WD_DIM_NR];
	int nf = 0, na = 0;
	for (int i = 0; i < WD_DIM_NR; i++) {
		int dim = dim_order[i];
		if (!(a->dims & (1u << dim)))
			continue;
		char v[136];
		dim_value(a, dim, &s, v, sizeof(v));
		struct wd_akey *k = wd_akeys_touch(&a->keys, dim, v, now);
		if (!wd_win_count(&k->s, now) ||
		    now - k->first_ns >= a->short_ns) {
			k->first = *en;
			k->first_ns = now;
		}
		k->last = *en;
		wd_win_add(&k->s, now, 1);
		wd_win_add(&k->l, now, 1);
		if (!warm)
			continue;
		struct wd_judged j;
		wd_alert_judge(a, k, now, &j);
		if (!j.spike) {
			k->in_spike = false;
			continue;
		}
		if (k->in_spike) {
			ongoing = true;
			continue;
		}
		k->in_spike = true;
		/* Alertmanager follows the state, not the cool-down: each
		 * key entering its spike is an alert of its own there
		 * (distinct labels), and one that resolved and spikes again
		 * fires again, whatever the webhook below was spared */
		amk[na] = k;
		aj[na++] = j;
		if (ongoing) {
			a->suppressed++;
			k->alerted = true;
			k->last_alert_ns = now;
		} else if (!k->alerted ||
			   now - k->last_alert_ns >= a->cooldown_ns) {
			k->alerted = true;
			k->last_alert_ns = now;
			k->alerts++;
			fire[nf] = k;
			fj[nf++] = j;
		} else {
			/* cooling down: the webhook heard of this key's
			 * spike less than cooldown_s ago; not posted again,
			 * counted */
			a->suppressed++;
			ongoing = true;
		}
	}
	if (nf)
		raise_spike(a, fire, fj, nf, en);
	for (int i = 0; a->am && i < na; i++)
		am_fire_spike(a, amk[i], &aj[i]);
}

/* Refresh loss counts; raise an events_lost alert when one grew. */
static void check_loss(struct wd_alert *a, uint64_t now)
{
	struct wd_stream_stats st;
	wd_stream_refresh_lost(a->s);
	wd_stream_stats(a->s, &st);
	uint64_t cur[LOST_KINDS];
	cur[LOST_OVERRUN] = a->cur.lost;
	memcpy(cur + LOST_STREAM, st.lost, sizeof(st.lost));
	bool grew = false;
	for (int i = 0; i < LOST_KINDS; i++) {
		if (cur[i] > a->lost_seen[i]) {
			a->lost_seen[i] = cur[i];
			a->lost_grew_ns[i] = now;
			grew = true;
		}
	}
	if (grew)
		a->last_loss_grew_ns = now;
	/* Alertmanager: one alert per reason that lost events (label
	 * reason, as the shipped WardenEventsLost rule), so each is routed,
	 * silenced and resolved on its own; sent as the loss happens, the
	 * webhook's cool-down below is not Alertmanager's (an active
	 * alert only gets its annotations refreshed) */
	for (int i = 0; a->am && grew && i < LOST_KINDS; i++) {
		if (a->lost_grew_ns[i] != now)
			continue;
		cleanup_free char *all = lost_text(a->lost_seen);
		cleanup_free char *sum = wd_asprintf(
		    "wardend on %s lost denial events at %s: %llu", a->node,
		    wd_alert_lost_name(i), (unsigned long long)a->lost_seen[i]);
		cleanup_free char *d = wd_asprintf(
		    "Lost so far: %s. overrun: the alerter fell behind the "
		    "event ring; bpf_ringbuf: the kernel's ring buffer was "
		    "full (wardend --event-ring-bytes); bpf_invalid: records "
		    "that failed validation; bpf_unrouted: records no live "
		    "tool call owned; landlock_audit: the audit reader's "
		    "queue overflowed. Denials were still enforced; not all "
		    "were recorded.",
		    all);
		char id[48];
		snprintf(id, sizeof(id), "lost\x1f%s", wd_alert_lost_name(i));
		wd_am_fire(
		    a->am, id,
		    json_pack("{s:s,s:s,s:s,s:s}", "alertname",
			      "WardenDaemonEventsLost", "severity", "warning",
			      "node", a->node, "reason", wd_alert_lost_name(i)),
		    json_pack("{s:s,s:s}", "summary", sum, "description", d),
		    now, wd_wall_ns());
	}
	bool pending =
	    memcmp(a->lost_seen, a->lost_reported, sizeof(a->lost_seen)) != 0;
	if (!grew && !pending)
		return;
	if (a->loss_alerted && now - a->last_loss_alert_ns < a->cooldown_ns)
		return; /* carried into the next loss alert's lost_new */
	uint64_t diff[LOST_KINDS];
	for (int i = 0; i < LOST_KINDS; i++)
		diff[i] = a->lost_seen[i] - a->lost_reported[i];
	json_t *o = alert_head(a, "events_lost", a->cur.next - 1);
	json_object_set_new(o, "lost_new", lost_json(diff));
	cleanup_free char *all = lost_text(a->lost_seen);
	cleanup_free char *news = lost_text(diff);
	wd_warn("alert: denial events lost: %s (new since the last report: "
		"%s)",
		all, news);
	memcpy(a->lost_reported, a->lost_seen, sizeof(a->lost_seen));
	a->loss_alerted = true;
	a->last_loss_alert_ns = now;
	a->alerts_lost++;
	emit(a, o);
}

static void *reader(void *arg)
{
	struct wd_alert *a = arg;
	struct wd_stream_entry *buf = wd_calloc(READ_BATCH, sizeof(*buf));
	for (;;) {
		pthread_mutex_lock(&a->mu);
		bool stop = a->stop;
		/* the cursor is ours; reading it without the lock is fine,
		 * but render/key queries look at it under the lock: copy */
		struct wd_stream_cursor c = a->cur;
		pthread_mutex_unlock(&a->mu);
		if (stop)
			break;
		int n = wd_stream_read(a->s, &c, buf, READ_BATCH, 100);
		pthread_mutex_lock(&a->mu);
		a->cur = c;
		if (n == -EPIPE) {
			pthread_mutex_unlock(&a->mu);
			break;
		}
		uint64_t now = wd_alert_now(a);
		for (int i = 0; i < n; i++)
			process(a, &buf[i], now);
		check_loss(a, now);
		if (a->am) {
			a->tick_now = now;
			wd_am_tick(a->am, now, wd_wall_ns(), am_still, a);
		}
		a->done_seq = a->cur.next - 1;
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->mu);
	}
	free(buf);
	pthread_mutex_lock(&a->mu);
	a->reader_done = true;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* ---- lifecycle ---- */

/* unset, empty, or an http(s) URL */
static bool http_url_ok(const char *u)
{
	return !u || !u[0] || !strncmp(u, "http://", 7) ||
	       !strncmp(u, "https://", 8);
}

int wd_alert_generator_url(const char *given, const char *metrics,
			   const char *hostname, char **out, struct wd_err *err)
{
	*out = NULL;
	if (given) {
		size_t n = strlen(given);
		const char *host = !strncmp(given, "http://", 7)    ? given + 7
				   : !strncmp(given, "https://", 8) ? given + 8
								    : NULL;
		bool clean = n < 512;
		for (const char *p = given; clean && *p; p++)
			clean = (unsigned char)*p > 0x20 &&
				(unsigned char)*p < 0x7f;
		if (!host || !*host || *host == '/' || !clean)
			return wd_err_set(
			    err, -EINVAL,
			    "--alert-generator-url wants an http:// or "
			    "https:// URL with a host, printable, no spaces, "
			    "under 512 bytes: '%s'",
			    given);
		*out = wd_strdup(given);
		return 0;
	}
	if (!metrics || !*metrics)
		return 0;
	const char *colon = strrchr(metrics, ':');
	if (!colon)
		return wd_err_set(err, -EINVAL,
				  "--metrics wants ADDR:PORT, not '%s'",
				  metrics);
	size_t hl = (size_t)(colon - metrics);
	/* as wd_server_start_metrics binds it: no ADDR is loopback */
	if (!hl)
		*out = wd_asprintf("http://127.0.0.1%s/metrics", colon);
	else if (hl == 7 && !strncmp(metrics, "0.0.0.0", 7) && hostname &&
		 *hostname)
		*out = wd_asprintf("http://%s%s/metrics", hostname, colon);
	else
		*out = wd_asprintf("http://%s/metrics", metrics);
	return 0;
}

int wd_alert_new(const struct wd_alert_config *cfg, struct wd_stream *events,
		 struct wd_alert **out, struct wd_err *err)
{
	if (!cfg || !events || !out)
		return wd_err_set(err, -EINVAL, "alert: missing argument");
	uint64_t sw = cfg->short_window_s ? cfg->short_window_s : 60;
	uint64_t lw = cfg->long_window_s ? cfg->long_window_s : 3600;
	if (lw < 2 * sw)
		return wd_err_set(err, -EINVAL,
				  "alert: long window %llus must be at least "
				  "twice the short window %llus",
				  (unsigned long long)lw,
				  (unsigned long long)sw);
	double factor = cfg->factor != 0 ? cfg->factor : 5.0;
	if (!(factor >= 1.0 && factor <= 1e6))
		return wd_err_set(err, -EINVAL,
				  "alert: factor must be in [1, 1e6]");
	if (!http_url_ok(cfg->webhook_url))
		return wd_err_set(err, -EINVAL,
				  "alert: webhook URL must be http:// or "
				  "https://: %s",
				  cfg->webhook_url);
	if (!http_url_ok(cfg->alertmanager_url))
		return wd_err_set(err, -EINVAL,
				  "alert: Alertmanager URL must be http:// or "
				  "https://: %s",
				  cfg->alertmanager_url);
	if (cfg->dims & ~WD_DIM_ALL)
		return wd_err_set(err, -EINVAL, "alert: unknown dimension");

	struct wd_alert *a = wd_calloc(1, sizeof(*a));
	if (cfg->node && cfg->node[0])
		wd_strlcpy(a->node, cfg->node, sizeof(a->node));
	else if (gethostname(a->node, sizeof(a->node) - 1))
		wd_strlcpy(a->node, "localhost", sizeof(a->node));
	char tmp[64];
	safe_copy(tmp, sizeof(tmp), a->node, sizeof(a->node), "localhost");
	memcpy(a->node, tmp, sizeof(tmp));
	a->short_ns = sw * NS;
	a->long_ns = lw * NS;
	a->factor = factor;
	a->min_count = cfg->min_count ? cfg->min_count : 20;
	a->cooldown_ns =
	    (uint64_t)(cfg->cooldown_s ? cfg->cooldown_s : 300) * NS;
	a->warmup_ns =
	    cfg->warmup_s ? (uint64_t)cfg->warmup_s * NS : 2 * a->short_ns;
	a->dims = cfg->dims ? cfg->dims : WD_DIM_ALL;
	a->denied_only = cfg->denied_only;
	a->clock = cfg->clock ? cfg->clock : default_clock;
	a->clock_arg = cfg->clock_arg;
	a->s = events;
	wd_akeys_init(&a->keys, cfg->max_keys ? cfg->max_keys : 1024,
		      a->short_ns, a->long_ns);
	wd_stab_init(&a->series, cfg->max_series ? cfg->max_series : 4096);
	wd_stream_cursor_init(&a->cur, cfg->since_seq);
	a->start_ns = wd_alert_now(a);
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cv, &ca);
	pthread_condattr_destroy(&ca);
	int rc;
	if (cfg->webhook_url && cfg->webhook_url[0]) {
		uint32_t retries = cfg->max_retries == UINT32_MAX ? 0
				   : cfg->max_retries ? cfg->max_retries
						      : 3;
		a->wh = wd_webhook_new(
		    cfg->webhook_url, cfg->queue_max ? cfg->queue_max : 64,
		    cfg->timeout_ms ? cfg->timeout_ms : 5000, retries,
		    cfg->backoff_ms ? cfg->backoff_ms : 500);
		if (!a->wh) {
			rc = wd_err_set(err, -errno, "alert: webhook sender");
			goto fail;
		}
	}
	if (cfg->alertmanager_url && cfg->alertmanager_url[0]) {
		uint32_t retries = cfg->max_retries == UINT32_MAX ? 0
				   : cfg->max_retries ? cfg->max_retries
						      : 3;
		uint64_t resend = cfg->resend_s ? (uint64_t)cfg->resend_s * NS
						: WD_MIN(60 * NS, a->short_ns);
		a->am =
		    wd_am_new(cfg->alertmanager_url, cfg->generator_url, resend,
			      cfg->timeout_ms ? cfg->timeout_ms : 5000, retries,
			      cfg->backoff_ms ? cfg->backoff_ms : 500);
		if (!a->am) {
			rc = wd_err_set(err, -errno,
					"alert: Alertmanager sender");
			goto fail;
		}
	}
	if ((rc = -pthread_create(&a->thr, NULL, reader, a))) {
		wd_err_set(err, rc, "alert: reader thread");
		goto fail;
	}
	wd_info("alert: following denial events (short %llus, long %llus, "
		"factor %.1f, min %u, webhook %s, alertmanager %s)",
		(unsigned long long)sw, (unsigned long long)lw, a->factor,
		a->min_count, a->wh ? "on" : "off",
		a->am ? cfg->alertmanager_url : "off");
	*out = a;
	return 0;
fail:
	wd_am_free(a->am);
	wd_webhook_free(a->wh);
	wd_akeys_free(&a->keys);
	wd_stab_free(&a->series);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a);
	return rc;
}

void wd_alert_free(struct wd_alert *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->stop = true;
	pthread_mutex_unlock(&a->mu);
	/* the reader wakes within its 100 ms read timeout */
	pthread_join(a->thr, NULL);
	wd_am_free(a->am);
	wd_webhook_free(a->wh);
	wd_akeys_free(&a->keys);
	wd_stab_free(&a->series);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

/* ---- queries ---- */
