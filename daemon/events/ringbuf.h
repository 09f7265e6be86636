/* A reader of one BPF ring buffer map (BPF_MAP_TYPE_RINGBUF), in place of
 * libbpf's ring_buffer: the same records, in the same order, handed to the
 * same kind of callback, through the same level-triggered epoll fd; the
 * one difference is when it tells the kernel what it has read.
 *
 * libbpf stores the consumer position after every record. The producing
 * CPU reads that position on every bpf_ringbuf_reserve (is there room?),
 * so at a flood every record cost the producer a cache line pulled back
 * from the consumer's CPU. This reader stores it once per pass over the
 * records it found, and at least every WD_RINGBUF_PUBLISH_MAX bytes (or an
 * eighth of the ring, whichever is less) inside a long pass: the ring
 * never looks fuller to the producer than by that much, so a ring sized
 * for zero loss stays so (tests/unit/test_event_wakeup.c, events_loss.sh).
 *
 * After each store it re-reads the producer position behind a full fence,
 * so a record committed while it stored is either read in this drain or
 * was committed after the kernel saw the consumer caught up (and then its
 * adaptive wake-up fires: kernel/bpf/ringbuf.c, bpf_ringbuf_commit).
 *
 * Not thread-safe: one consumer at a time (the caller's lock). */
#ifndef WD_EVENTS_RINGBUF_H
#define WD_EVENTS_RINGBUF_H

#include <stddef.h>
#include <stdint.h>

#define WD_RINGBUF_PUBLISH_MAX (64u * 1024)

/* A record's bytes (its header excluded) and size. A negative return stops
 * the drain: wd_ringbuf_consume returns it, the record counts as read. */
typedef int (*wd_ringbuf_cb)(void *ctx, void *data, size_t size);

struct wd_ringbuf;

/* Map the ring of map_fd (not taken over: the caller keeps it open for as
 * long as the reader lives). NULL + errno (EINVAL: not a ring buffer). */
struct wd_ringbuf *wd_ringbuf_new(int map_fd, wd_ringbuf_cb cb, void *ctx);
void wd_ringbuf_free(struct wd_ringbuf *r);
/* An epoll fd readable while records are pending (level-triggered on the
 * map, as libbpf's ring_buffer__epoll_fd). */
int wd_ringbuf_epoll_fd(const struct wd_ringbuf *r);
/* Hand every committed record to cb, in ring order, up to the first one
 * still being written. Returns the number of records read (discarded ones
 * not counted) or the callback's negative return. */
int64_t wd_ringbuf_consume(struct wd_ringbuf *r);

#endif
