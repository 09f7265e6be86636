/* The node-wide event stream: one ordered sequence of denial/audit events
 * from every source (BPF ring buffer, seccomp supervisor, Landlock audit
 * records, the sandbox), kept in a bounded in-memory ring of the last N.
 *
 * - Publishing assigns a sequence number (1, 2, 3, ...; never reused) under
 *   one lock: the order of seq is the stream's order.
 * - Subscribers hold a cursor (the next seq they want). A subscriber slower
 *   than the ring is overrun: the events it missed are counted in its
 *   cursor (`lost`) and it continues at the oldest event still held —
 *   never a silent gap.
 * - Loss counts travel with the stream, by where the events were lost
 *   (enum wd_stream_lost_src; absolute counts, read through each
 *   source's loss probe: in wardend, the BPF ring buffer's consumer
 *   (events/bpf_route.h, wd_egress_loss) and the Landlock audit reader),
 *   and each subscriber's overruns.
 * Thread-safe; readers may block with a timeout.
 *
 * HTTP endpoint (served by wardend; `warden events` is the client):
 *
 *   GET /v1/events[?since=SEQ][&follow=1][&limit=N]
 *   200, Content-Type: application/x-ndjson; one JSON object per line:
 *     {"type":"event","seq":N, ...wd_event_to_json() fields...}
 *     {"type":"loss","bpf_ringbuf":N,"bpf_invalid":N,"bpf_unrouted":N,
 *      "landlock_audit":N,"overrun":N,"next_seq":N}
 *   (the keys of enum wd_stream_lost_src, wd_stream_lost_name(); overrun
 *   is this subscriber's)
 *   since=SEQ: events with seq > SEQ (default 0: everything still held).
 *   Without follow the body is what is held now, then the response ends.
 *   With follow=1 the response stays open and events are written as they
 *   are published; a keep-alive loss line is written at least every 10 s.
 *   A loss line is written first, and again whenever one of its counts
 *   changes (overrun is this subscriber's). wd_stream_render() produces
 *   exactly these lines, so the daemon's handler is a thin loop over it.
 *   503 with {"error":...} if the daemon runs without an event stream.
 */
#ifndef WD_EVENTS_STREAM_H
#define WD_EVENTS_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"
#include "events/event.h"

struct wd_stream;

struct wd_stream_entry {
	uint64_t seq;
	struct wd_event ev;
};

/* Where events were lost before the stream had them (each an absolute
 * count, only ever growing). */
enum wd_stream_lost_src {
	/* the kernel: bpf_ringbuf_reserve failed, the ring buffer was full
	 * (wardend --event-ring-bytes sizes it) */
	WD_LOST_BPF_RINGBUF,
	/* the BPF consumer: a record failed validation */
	WD_LOST_BPF_INVALID,
	/* the BPF consumer: a record no live tool call owned */
	WD_LOST_BPF_UNROUTED,
	/* the Landlock audit reader: its netlink queue overflowed (ENOBUFS;
	 * each overflow lost one or more records, so a lower bound) */
	WD_LOST_LANDLOCK_AUDIT,
	WD_LOST_NR,
};
/* Its key in the loss line and its reason label in /metrics
 * (warden_denial_events_lost_total): "bpf_ringbuf", "bpf_invalid",
 * "bpf_unrouted", "landlock_audit"; "?" out of range. */
const char *wd_stream_lost_name(enum wd_stream_lost_src src);

struct wd_stream_stats {
	uint64_t published; /* = last seq */
	uint64_t oldest;    /* oldest seq held, 0 if empty */
	uint64_t capacity;
	uint64_t lost[WD_LOST_NR];
	uint64_t overrun; /* sum of every subscriber's overruns */
};

struct wd_stream_cursor {
	uint64_t next; /* next seq wanted */
	uint64_t lost; /* events this subscriber missed (overrun) */
	/* what the last rendered loss line said (wd_stream_render) */
	uint64_t shown[WD_LOST_NR + 1];
	bool shown_once;
	uint64_t last_line_ns;
	/* wd_stream_render shows an event only if keep(ev, keep_arg) (NULL:
	 * every event): a reader sees the events of the runs it may read */
	bool (*keep)(const struct wd_event *ev, void *keep_arg);
	void *keep_arg;
};

/* capacity: events held (>= 1). Never NULL (aborts on OOM). */
struct wd_stream *wd_stream_new(uint32_t capacity);
void wd_stream_free(struct wd_stream *s);

/* Publish a copy of ev; returns its seq. Wakes blocked readers. */
uint64_t wd_stream_publish(struct wd_stream *s, const struct wd_event *ev);
/* Publish n events in order under one lock with one wake-up; returns the
 * last seq (0 if n <= 0). The attribution callback fills evs in place. */
uint64_t wd_stream_publish_batch(struct wd_stream *s, struct wd_event *evs,
				 int n);
/* Set an absolute loss count (counts never go down; smaller is ignored). */
void wd_stream_set_lost(struct wd_stream *s, enum wd_stream_lost_src src,
			uint64_t total);
void wd_stream_stats(struct wd_stream *s, struct wd_stream_stats *out);

/* A source's own absolute loss count, read where the stream's losses are
 * reported (the alerter's loop, the events endpoint, /metrics): the
 * sources count their losses where they happen (wardend's calls drain
 * the shared BPF ring buffer themselves and route each record to its
 * call), and every loss reaches the stream: 0 and *total, or -errno
 * (skipped). One probe per loss source; NULL removes it. */
typedef int (*wd_stream_loss_fn)(void *arg, uint64_t *total);
void wd_stream_set_loss_probe(struct wd_stream *s, enum wd_stream_lost_src src,
			      wd_stream_loss_fn fn, void *arg);
/* Read every probe (outside the stream's lock) and fold the counts in as
 * wd_stream_set_lost does. */
void wd_stream_refresh_lost(struct wd_stream *s);

/* Start a cursor after `since` (0 = from the oldest event held). */
void wd_stream_cursor_init(struct wd_stream_cursor *c, uint64_t since);
/* Copy up to max events at the cursor into out and advance it. Blocks up
 * to timeout_ms (0 = don't, -1 = forever) while nothing is available.
 * Returns the count (0 on timeout), or -EPIPE once the stream is shut down
 * and the cursor has read everything. An overrun adds to c->lost. */
int wd_stream_read(struct wd_stream *s, struct wd_stream_cursor *c,
		   struct wd_stream_entry *out, int max, int timeout_ms);
/* Wake every reader and make reads at the end return -EPIPE. */
void wd_stream_shutdown(struct wd_stream *s);

/* Append the endpoint's JSON lines (see above) for what is available at
 * the cursor (at most max events), waiting up to timeout_ms for the first.
 * Returns the number of events rendered, or -EPIPE (see wd_stream_read). */
int wd_stream_render(struct wd_stream *s, struct wd_stream_cursor *c,
		     struct wd_buf *out, int max, int timeout_ms);

/* One line's JSON object for an entry ({"type":"event","seq":...}). */
json_t *wd_stream_entry_json(const struct wd_stream_entry *e);

/* Optional attribution: called under no lock before each publish to fill
 * call/run/step/tool from the cgroup id (the daemon's call table). */
typedef void (*wd_stream_attrib_fn)(struct wd_event *ev, void *arg);
void wd_stream_set_attrib(struct wd_stream *s, wd_stream_attrib_fn fn,
			  void *arg);

#endif
