#include "events/stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common/log.h"

struct wd_stream {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct wd_stream_entry *ring;
	uint32_t cap;
	size_t ring_bytes;
	uint64_t last; /* seq of the newest event, 0 if none */
	uint64_t lost[WD_LOST_NR];
	uint64_t overrun;
	bool shut;
	wd_stream_attrib_fn attrib;
	void *attrib_arg;
	wd_stream_loss_fn probe[WD_LOST_NR];
	void *probe_arg[WD_LOST_NR];
};

static const char *const lost_names[WD_LOST_NR] = {
    [WD_LOST_BPF_RINGBUF] = "bpf_ringbuf",
    [WD_LOST_BPF_INVALID] = "bpf_invalid",
    [WD_LOST_BPF_UNROUTED] = "bpf_unrouted",
    [WD_LOST_LANDLOCK_AUDIT] = "landlock_audit",
};

const char *wd_stream_lost_name(enum wd_stream_lost_src src)
{
	return (unsigned)src < WD_LOST_NR ? lost_names[src] : "?";
}

struct wd_stream *wd_stream_new(uint32_t capacity)
{
	struct wd_stream *s = wd_calloc(1, sizeof(*s));
	s->cap = capacity ? capacity : 1;
	/* The ring is committed here, whole: from calloc its zero pages were
	 * only made resident as events first reached them, so the daemon's
	 * RSS rose with every event until the ring wrapped (65,536 entries,
	 * 44 MB: 2 Landlock denials per tool call grew it 13.8 MB over 5,000
	 * runs, daemon_memory.sh rss-after-runs). A fixed-size ring is a
	 * fixed cost, paid and visible at start. */
	s->ring_bytes = (size_t)s->cap * sizeof(*s->ring);
	s->ring = mmap(NULL, s->ring_bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (s->ring == MAP_FAILED) { /* out of memory, as wd_calloc */
		wd_error("event stream: cannot map its ring of %u entries: %s",
			 s->cap, strerror(errno));
		abort();
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	return s;
}

void wd_stream_free(struct wd_stream *s)
{
	if (!s)
		return;
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	munmap(s->ring, s->ring_bytes);
	free(s);
}

void wd_stream_set_attrib(struct wd_stream *s, wd_stream_attrib_fn fn,
			  void *arg)
{
	pthread_mutex_lock(&s->mu);
	s->attrib = fn;
	s->attrib_arg = arg;
	pthread_mutex_unlock(&s->mu);
}

uint64_t wd_stream_publish(struct wd_stream *s, const struct wd_event *ev)
{
	struct wd_event copy = *ev;
	return wd_stream_publish_batch(s, &copy, 1);
}

uint64_t wd_stream_publish_batch(struct wd_stream *s, struct wd_event *evs,
				 int n)
{
	if (n <= 0)
		return 0;
	pthread_mutex_lock(&s->mu);
	wd_stream_attrib_fn fn = s->attrib;
	void *arg = s->attrib_arg;
	pthread_mutex_unlock(&s->mu);
	if (fn)
		for (int i = 0; i < n; i++)
			fn(&evs[i], arg);
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < n; i++) {
		uint64_t seq = ++s->last;
		struct wd_stream_entry *slot = &s->ring[(seq - 1) % s->cap];
		slot->seq = seq;
		slot->ev = evs[i];
	}
	uint64_t last = s->last;
	/* one wake-up per batch, not per event */
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return last;
}

void wd_stream_set_lost(struct wd_stream *s, enum wd_stream_lost_src src,
			uint64_t total)
{
	if ((unsigned)src >= WD_LOST_NR)
		return;
	pthread_mutex_lock(&s->mu);
	if (total > s->lost[src]) {
		s->lost[src] = total;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
}

void wd_stream_set_loss_probe(struct wd_stream *s, enum wd_stream_lost_src src,
			      wd_stream_loss_fn fn, void *arg)
{
	if ((unsigned)src >= WD_LOST_NR)
		return;
	pthread_mutex_lock(&s->mu);
	s->probe[src] = fn;
	s->probe_arg[src] = arg;
	pthread_mutex_unlock(&s->mu);
}

void wd_stream_refresh_lost(struct wd_stream *s)
{
	wd_stream_loss_fn fn[WD_LOST_NR];
	void *arg[WD_LOST_NR];
	pthread_mutex_lock(&s->mu);
	memcpy(fn, s->probe, sizeof(fn));
	memcpy(arg, s->probe_arg, sizeof(arg));
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < WD_LOST_NR; i++) {
		uint64_t total = 0;
		if (fn[i] && !fn[i](arg[i], &total))
			wd_stream_set_lost(s, (enum wd_stream_lost_src)i,
					   total);
	}
}

static uint64_t oldest_locked(const struct wd_stream *s)
{
	if (!s->last)
		return 0;
	return s->last > s->cap ? s->last - s->cap + 1 : 1;
}

void wd_stream_stats(struct wd_stream *s, struct wd_stream_stats *out)
{
	pthread_mutex_lock(&s->mu);
	out->published = s->last;
	out->oldest = oldest_locked(s);
	out->capacity = s->cap;
	memcpy(out->lost, s->lost, sizeof(out->lost));
	out->overrun = s->overrun;
	pthread_mutex_unlock(&s->mu);
}

void wd_stream_cursor_init(struct wd_stream_cursor *c, uint64_t since)
{
	memset(c, 0, sizeof(*c));
	c->next = since + 1;
}

void wd_stream_shutdown(struct wd_stream *s)
{
	pthread_mutex_lock(&s->mu);
	s->shut = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

int wd_stream_read(struct wd_stream *s, struct wd_stream_cursor *c,
		   struct wd_stream_entry *out, int max, int timeout_ms)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	if (timeout_ms > 0) {
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&s->mu);
	for (;;) {
		/* a cursor ahead of the stream (since= in the future, or a
		 * restarted daemon) waits for that seq */
		if (c->next <= s->last)
			break;
		if (s->shut) {
			pthread_mutex_unlock(&s->mu);
			return -EPIPE;
		}
		if (timeout_ms == 0)
			break;
		if (timeout_ms < 0)
			pthread_cond_wait(&s->cv, &s->mu);
		else if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) ==
			 ETIMEDOUT)
			break;
	}
	uint64_t oldest = oldest_locked(s);
	if (oldest && c->next < oldest) {
		/* overrun: the ring wrapped past this subscriber */
		c->lost += oldest - c->next;
		s->overrun += oldest - c->next;
		c->next = oldest;
	}
	int n = 0;
	while (n < max && c->next <= s->last) {
		out[n++] = s->ring[(c->next - 1) % s->cap];
		c->next++;
	}
	pthread_mutex_unlock(&s->mu);
	return n;
}

json_t *wd_stream_entry_json(const struct wd_stream_entry *e)
{
	json_t *o = wd_event_to_json(&e->ev);
	json_object_set_new(o, "type", json_string("event"));
	json_object_set_new(o, "seq", json_integer((json_int_t)e->seq));
	return o;
}

static void append_json(struct wd_buf *out, json_t *o)
{
	char *line = json_dumps(o, JSON_COMPACT);
	if (line) {
		wd_buf_append(out, line, strlen(line));
		wd_buf_append(out, "\n", 1);
		free(line);
	}
	json_decref(o);
}

/* One event line, exactly the JSON of wd_stream_entry_json() (written
 * directly: see wd_event_json_members). */
static void append_entry(struct wd_buf *out, const struct wd_stream_entry *e)
{
	char line[WD_EVENT_JSON_MAX + 64];
	char *p = line;
	*p++ = '{';
	p += wd_event_json_members(&e->ev, p);
	p += snprintf(p, 64, ",\"type\":\"event\",\"seq\":%llu}\n",
		      (unsigned long long)e->seq);
	wd_buf_append(out, line, (size_t)(p - line));
}

int wd_stream_render(struct wd_stream *s, struct wd_stream_cursor *c,
		     struct wd_buf *out, int max, int timeout_ms)
{
	struct wd_stream_entry buf[64];
	int total = 0, rc = 0;
	bool first = true;
	while (total < max) {
		int want = WD_MIN(max - total, (int)WD_ARRAY_SIZE(buf));
		rc = wd_stream_read(s, c, buf, want, first ? timeout_ms : 0);
		first = false;
		if (rc <= 0)
			break;
		for (int i = 0; i < rc; i++)
			if (!c->keep || c->keep(&buf[i].ev, c->keep_arg))
				append_entry(out, &buf[i]);
		total += rc;
		if (rc < want)
			break;
	}
	struct wd_stream_stats st;
	wd_stream_refresh_lost(s);
	wd_stream_stats(s, &st);
	uint64_t now[WD_LOST_NR + 1];
	memcpy(now, st.lost, sizeof(st.lost));
	now[WD_LOST_NR] = c->lost;
	uint64_t t = wd_now_ns();
	if (!c->shown_once || memcmp(now, c->shown, sizeof(now)) ||
	    t - c->last_line_ns >= 10ull * 1000000000ull) {
		json_t *o = json_object();
		json_object_set_new(o, "type", json_string("loss"));
		for (int i = 0; i < WD_LOST_NR; i++)
			json_object_set_new(o, lost_names[i],
					    json_integer((json_int_t)now[i]));
		json_object_set_new(o, "overrun",
				    json_integer((json_int_t)now[WD_LOST_NR]));
		json_object_set_new(o, "next_seq",
				    json_integer((json_int_t)c->next));
		append_json(out, o);
		memcpy(c->shown, now, sizeof(now));
		c->shown_once = true;
	}
	if (total || rc == 0)
		c->last_line_ns = t;
	return total ? total : rc;
}
