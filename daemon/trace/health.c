/* The store's health: a failed write (ENOSPC, EIO, ...) latches it
 * unhealthy (trace.h: every append fails with that error, so the broker
 * fails closed); the writer thread then probes, with backoff from 100 ms
 * to 5 s, whether it can write again, and recovers by itself when it can:
 * no restart.
 *
 * Recovery is safe because nothing of a failed batch is on disk: the
 * writer cuts a partial write back off (write_batch), and the probe cuts
 * it again if that failed. The batch's records were never acknowledged as
 * written (durable appends and wd_trace_wait_written() returned the
 * error), so the chain continues from the last record that is on disk:
 * next_seq and prev go back to it (written_seq, written_prev). Waiters
 * that started before the recovery see `epoch` move and return the error
 * their records got. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "trace/trace_int.h"

#define PROBE_FIRST_NS 100000000ull  /* first probe 100 ms after */
#define PROBE_MAX_NS   5000000000ull /* backoff up to 5 s */
#define PROBE_BYTES    (1u << 20)    /* room a probe must find */

void wd_trace_latch_locked(struct wd_trace *t, int r, const char *what)
{
	if (t->error)
		return;
	t->error = t->last_error = r;
	t->failures++;
	t->error_since_ns = wd_now_ns();
	t->probe_delay_ns = PROBE_FIRST_NS;
	t->probe_at_ns = t->error_since_ns + PROBE_FIRST_NS;
	snprintf(t->error_what, sizeof(t->error_what), "%s", what);
	pthread_cond_broadcast(&t->done);
	pthread_cond_signal(&t->wake);
}

bool wd_trace_note_write_error(struct wd_trace *t, int err, const char *what)
{
	if (err != -ENOSPC && err != -EDQUOT && err != -EIO && err != -EROFS)
		return false;
	pthread_mutex_lock(&t->mu);
	bool first = !t->error;
	wd_trace_latch_locked(t, err, what);
	pthread_mutex_unlock(&t->mu);
	if (first)
		wd_log_errno(WD_LOG_ERROR, err,
			     "trace '%s': %s; store is unhealthy until a "
			     "probe finds it writable",
			     t->root, what);
	return true;
}

void wd_trace_note_written(struct wd_trace *t, struct wd_batch *b, size_t i)
{
	wd_sha256_hex(b->buf.data + b->v[i].off, b->v[i].len, t->written_prev);
}

/* Writer thread, unlocked. Can the store write again? The segment is cut
 * back to what was written, the blobs still queued are settled, a
 * PROBE_BYTES file is written and synced (so the next batches find room,
 * not just the first), and what was written so far is synced. 0 or
 * -errno. */
static int probe(struct wd_trace *t, uint64_t seg_size)
{
	if (t->segfd >= 0) {
		struct stat st;
		if (fstat(t->segfd, &st) < 0)
			return -errno;
		if ((uint64_t)st.st_size != seg_size &&
		    ftruncate(t->segfd, (off_t)seg_size) < 0)
			return -errno;
	}
	cleanup_free char *p = wd_asprintf("%s/.probe", t->root);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	cleanup_free char *zero = wd_calloc(1, 65536);
	int r = 0;
	for (unsigned n = 0; !r && n < PROBE_BYTES; n += 65536)
		r = wd_write_all(fd, zero, 65536);
	if (!r && fdatasync(fd) < 0)
		r = -errno;
	close(fd);
	unlink(p);
	if (r)
		return r;
	if ((r = wd_trace_blobs_settle(t)) < 0)
		return r;
	if ((r = wd_trace_blobs_sync(t)) < 0)
		return r;
	if (t->segfd >= 0 && fdatasync(t->segfd) < 0)
		return -errno;
	return 0;
}

void wd_trace_probe_locked(struct wd_trace *t)
{
	uint64_t now = wd_now_ns();
	if (now < t->probe_at_ns) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = ts.tv_nsec + (t->probe_at_ns - now);
		ts.tv_sec += ns / 1000000000ull;
		ts.tv_nsec = ns % 1000000000ull;
		pthread_cond_timedwait(&t->wake, &t->mu, &ts);
		return;
	}
	uint64_t seg_size = t->seg_size;
	pthread_mutex_unlock(&t->mu);
	int r = probe(t, seg_size);
	pthread_mutex_lock(&t->mu);
	if (r < 0 || t->cur.n) {
		t->probe_delay_ns = WD_MIN(t->probe_delay_ns * 2, PROBE_MAX_NS);
		t->probe_at_ns = wd_now_ns() + t->probe_delay_ns;
		if (r < 0)
			t->last_error = r;
		return;
	}
	uint64_t down = wd_now_ns() - t->error_since_ns;
	t->next_seq = t->written_seq + 1;
	memcpy(t->prev, t->written_prev, sizeof(t->prev));
	t->synced_seq = t->written_seq;
	t->last_sync_ns = wd_now_ns();
	t->error = 0;
	t->error_what[0] = 0;
	t->recoveries++;
	t->epoch++;
	pthread_cond_broadcast(&t->done);
	wd_info("trace '%s': writable again after %.1f s; recovered (the "
		"chain goes on after seq %llu)",
		t->root, (double)down / 1e9,
		(unsigned long long)t->written_seq);
}

int wd_trace_health(struct wd_trace *t, struct wd_trace_health *h)
{
	memset(h, 0, sizeof(*h));
	pthread_mutex_lock(&t->mu);
	h->error = t->error;
	h->probe_error = t->error ? t->last_error : 0;
	h->since_ns = t->error ? t->error_since_ns : 0;
	h->next_probe_ns = t->error ? t->probe_at_ns : 0;
	h->failures = t->failures;
	h->recoveries = t->recoveries;
	snprintf(h->what, sizeof(h->what), "%s", t->error_what);
	pthread_mutex_unlock(&t->mu);
	return h->error;
}

void wd_trace_release_memory(struct wd_trace *t)
{
	if (!t->idx)
		return;
	/* the index's page cache (up to cache_size, index.c) refills from
	 * the file on the next query: a daemon at rest gives it back */
	pthread_mutex_lock(&t->idx_mu);
	sqlite3_db_release_memory(wd_idx_db(t->idx));
	pthread_mutex_unlock(&t->idx_mu);
}
