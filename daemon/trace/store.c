/* The trace store: open/close, append with group commit, flush, run reads.
 *
 * Concurrency: appenders serialize only the framing of their line (seq, ts,
 * prev, crc, sha256) under t->mu into the current batch; one writer thread
 * swaps the batch out, writes it (rotating segments by size) and fdatasyncs
 * it when any record in it is durable (or a flush waits, or 1 s passed). A
 * durable appender sleeps until synced_seq covers its seq; so one fdatasync
 * acknowledges every durable record of the batch.
 *
 * The index lags behind asynchronously: the writer hands the index fields of
 * each written batch (extracted by the appenders) to an index thread, which
 * adds everything queued in one SQLite transaction. When more than
 * wd_trace_iq_limit bytes wait, the writer stops queueing (iq_overflow) and the
 * index thread catches up from the segments instead, then resumes from the
 * queue: appends never wait for the index, memory stays bounded. Readers
 * (queries, run_records, flush) wait until indexed_seq covers what they must
 * see. */
#include "trace/trace_int.h"
#include "common/log.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define BATCH_URGENT (1u << 20) /* write now once this much is pending */
#define PENDING_LIMIT                                                          \
	(64u << 20) /* appenders wait above this (backpressure)                \
		     */
#define SYNC_EVERY_NS 1000000000ull /* non-durable data reaches disk within */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int wd_trace_list_segments(struct wd_trace *t, uint64_t **out, size_t *n)
{
	DIR *d = opendir(t->segdir);
	if (!d)
		return -errno;
	uint64_t *v = NULL;
	size_t cnt = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l != 16 + strlen(WD_SEG_SUFFIX) ||
		    strcmp(e->d_name + 16, WD_SEG_SUFFIX) ||
		    strspn(e->d_name, "0123456789") != 16)
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			v = wd_realloc(v, cap * sizeof(*v));
		}
		v[cnt++] = strtoull(e->d_name, NULL, 10);
	}
	closedir(d);
	if (cnt) /* qsort(NULL, 0) is undefined */
		qsort(v, cnt, sizeof(*v), cmp_u64);
	*out = v;
	*n = cnt;
	return 0;
}

const char *wd_trace_dir(struct wd_trace *t)
{
	return t->root;
}

bool wd_trace_healthy(struct wd_trace *t, int *code)
{
	pthread_mutex_lock(&t->mu);
	int e = t->error;
	pthread_mutex_unlock(&t->mu);
	if (code)
		*code = e;
	return e == 0;
}

static void batch_reset(struct wd_batch *b)
{
	b->n = 0;
	b->buf.len = 0;
	b->ia.len = 0;
	b->want_sync = false;
	b->t0 = 0;
}

static void batch_free(struct wd_batch *b)
{
	batch_reset(b);
	free(b->v);
	wd_buf_free(&b->buf);
	wd_buf_free(&b->ia);
}

static void deadline_wait(pthread_cond_t *c, pthread_mutex_t *m,
			  uint64_t ns_from_now)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ns = ts.tv_nsec + ns_from_now;
	ts.tv_sec += ns / 1000000000ull;
	ts.tv_nsec = ns % 1000000000ull;
	pthread_cond_timedwait(c, m, &ts);
}

static void *writer_main(void *arg)
{
	struct wd_trace *t = arg;
	pthread_setname_np(pthread_self(), "wd-trace-write");
	pthread_mutex_lock(&t->mu);
	for (;;) {
		if (t->cur.n == 0) {
			bool dirty = t->synced_seq < t->written_seq;
			if (dirty && !t->error &&
			    (t->flush_waiters || t->stop ||
			     wd_now_ns() - t->last_sync_ns >= SYNC_EVERY_NS)) {
				uint64_t w = t->written_seq;
				pthread_mutex_unlock(&t->mu);
				int r = wd_trace_seg_sync(t) < 0 ? -errno : 0;
				t->last_sync_ns = wd_now_ns();
				pthread_mutex_lock(&t->mu);
				if (r < 0)
					wd_trace_latch_locked(
					    t, r, "segment not synced");
				if (!r)
					t->synced_seq = w;
				pthread_cond_broadcast(&t->done);
				continue;
			}
			if (t->error && !t->stop) {
				wd_trace_probe_locked(t);
				continue;
			}
			if (t->stop)
				break;
			if (dirty)
				deadline_wait(&t->wake, &t->mu, SYNC_EVERY_NS);
			else
				pthread_cond_wait(&t->wake, &t->mu);
			continue;
		}
		bool urgent = t->cur.want_sync ||
			      t->cur.buf.len >= BATCH_URGENT || t->stop ||
			      t->flush_waiters || t->vis_waiters || t->error;
		uint64_t due = t->cur.t0 + (uint64_t)t->o.commit_us * 1000;
		uint64_t now = wd_now_ns();
		if (!urgent && now < due) {
			deadline_wait(&t->wake, &t->mu, due - now);
			continue;
		}
		struct wd_batch b = t->cur;
		t->cur = t->spare;
		t->spare = b;
		struct wd_batch *w = &t->spare;
		bool sync = w->want_sync || t->flush_waiters || t->stop ||
			    wd_now_ns() - t->last_sync_ns >= SYNC_EVERY_NS;
		int r = t->error;
		size_t nw = 0;
		pthread_mutex_unlock(&t->mu);
		/* blobs first: the batch's records may name them */
		if (!r)
			r = wd_trace_blobs_settle(t);
		if (!r)
			r = wd_trace_write_batch(t, w, sync, &nw);
		uint64_t last = w->v[w->n - 1].seq;
		pthread_mutex_lock(&t->mu);
		if (!r) {
			t->written_seq = last;
			t->written_seg = t->seg_first;
			t->written_end = t->seg_size;
			if (sync)
				t->synced_seq = last;
			wd_trace_note_written(t, w, w->n - 1);
			wd_trace_index_enqueue(t, w);
		} else {
			if (nw) {
				/* a batch that spanned a new segment failed
				 * in it: what reached the old one is on file,
				 * and recovery continues the chain after it */
				size_t n = w->n;
				t->written_seq = w->v[nw - 1].seq;
				t->written_seg = w->v[nw - 1].seg;
				t->written_end =
				    w->v[nw - 1].fileoff + w->v[nw - 1].len + 1;
				wd_trace_note_written(t, w, nw - 1);
				w->n = nw;
				wd_trace_index_enqueue(t, w);
				w->n = n;
			}
			if (!t->error)
				wd_log_errno(WD_LOG_ERROR, r,
					     "trace '%s': write failed; store "
					     "is unhealthy until a probe finds "
					     "it writable",
					     t->root);
			wd_trace_latch_locked(t, r, "write failed");
		}
		batch_reset(w);
		pthread_cond_broadcast(&t->done);
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

static bool reserved_key(const char *k)
{
	return !strcmp(k, "seq") || !strcmp(k, "ts") || !strcmp(k, "prev") ||
	       !strcmp(k, "crc") || !strcmp(k, "run_id") ||
	       !strcmp(k, "step") || !strcmp(k, "type");
}

void wd_trace_note_run(struct wd_trace *t, const char *type, const char *run_id,
		       const char *payloads)
{
	if (!type || !run_id)
		return;
	/* an ended run writes no more blobs: the set holds live runs only
	 * (it grew by one entry per hash_only run, for good) */
	bool start = !strcmp(type, "run_start");
	if (!start && strcmp(type, "run_end"))
		return;
	if (start && (!payloads || strcmp(payloads, "hash_only")))
		return;
	pthread_mutex_lock(&t->runs_mu);
	if (start)
		json_object_set_new(t->hash_only, run_id, json_true());
	else
		json_object_del(t->hash_only, run_id);
	pthread_mutex_unlock(&t->runs_mu);
}

/* "2026-01-10T12:00:01.123456Z": the per-second part is cached (called under
 * t->mu), only the microseconds are formatted per record. */
static void fmt_ts(struct wd_trace *t, uint64_t wall, char out[40])
{
	uint64_t sec = wall / 1000000000ull;
	if (sec != t->ts_sec || !t->ts_prefix[0]) {
		wd_iso8601(wall, t->ts_prefix, sizeof(t->ts_prefix));
		char *dot = strchr(t->ts_prefix, '.');
		if (dot)
			dot[1] = 0;
		t->ts_sec = sec;
	}
	size_t n = strlen(t->ts_prefix);
	memcpy(out, t->ts_prefix, n);
	unsigned us = wall % 1000000000ull / 1000;
	for (int i = 5; i >= 0; i--, us /= 10)
		out[n + i] = '0' + us % 10;
	out[n + 6] = 'Z';
	out[n + 7] = 0;
}

static int fmt_head(char *h, uint64_t seq, const char *ts, const char *prev)
{
	char d[24];
	int nd = 0, n;
	do
		d[nd++] = '0' + seq % 10;
	while (seq /= 10);
	memcpy(h, "{\"seq\":", 7);
	n = 7;
	while (nd)
		h[n++] = d[--nd];
	memcpy(h + n, ",\"ts\":\"", 7);
	n += 7;
	size_t tl = strlen(ts);
	memcpy(h + n, ts, tl);
	n += tl;
	memcpy(h + n, "\",\"prev\":\"sha256:", 17);
	n += 17;
	memcpy(h + n, prev, 64);
	n += 64;
	memcpy(h + n, "\",", 2);
	return n + 2;
}

/* Each appending thread encodes its records into a buffer of its own, kept
 * between appends (no malloc/realloc per record); freed when the thread
 * exits, or after a record larger than ENC_KEEP. */
#define ENC_KEEP (256u << 10)
static pthread_key_t enc_key;
static pthread_once_t enc_once = PTHREAD_ONCE_INIT;

static void enc_free(void *p)
{
	struct wd_buf *b = p;
	wd_buf_free(b);
	free(b);
}

static void enc_key_make(void)
{
	if (pthread_key_create(&enc_key, enc_free))
		abort();
}

static struct wd_buf *enc_buf(void)
{
	pthread_once(&enc_once, enc_key_make);
	struct wd_buf *b = pthread_getspecific(enc_key);
	if (!b) {
		b = wd_calloc(1, sizeof(*b));
		if (pthread_setspecific(enc_key, b)) {
			free(b);
			return NULL;
		}
	}
	b->len = 0;
	return b;
}

static void enc_done(struct wd_buf *b)
{
	if (b->cap > ENC_KEEP)
		wd_buf_free(b);
}

int wd_trace_append_body(struct wd_trace *t, const char *mid, size_t midlen,
			 const struct wd_idxrec *idx, bool durable,
			 uint64_t *seq_out, char ts[40], char prev_hex[65],
			 struct wd_err *err)
{
	pthread_mutex_lock(&t->mu);
	while (!t->error && t->cur.buf.len > PENDING_LIMIT)
		pthread_cond_wait(&t->done, &t->mu);
	if (t->error) {
		int e = t->error;
		pthread_mutex_unlock(&t->mu);
		return wd_err_set(err, e, "trace store unhealthy: %s",
				  strerror(-e));
	}
	uint64_t seq = t->next_seq++;
	uint64_t wall = wd_wall_ns();
	char head[200];
	fmt_ts(t, wall, ts);
	int hl = fmt_head(head, seq, ts, t->prev);
	struct wd_batch *b = &t->cur;
	if (b->n == 0)
		b->t0 = wd_now_ns();
	size_t off = b->buf.len;
	wd_buf_append(&b->buf, head, hl);
	wd_buf_append(&b->buf, mid + 1, midlen - 2);
	uint32_t crc = wd_crc32c(0, b->buf.data + off, b->buf.len - off);
	char tail[24];
	memcpy(tail, WD_CRC_TAIL, sizeof(WD_CRC_TAIL) - 1);
	for (int i = 0; i < 8; i++)
		tail[sizeof(WD_CRC_TAIL) - 1 + i] =
		    "0123456789abcdef"[(crc >> (28 - 4 * i)) & 15];
	memcpy(tail + sizeof(WD_CRC_TAIL) - 1 + 8, "\"}", 2);
	int tl = WD_CRC_TAIL_LEN;
	wd_buf_append(&b->buf, tail, tl);
	size_t len = b->buf.len - off;
	memcpy(prev_hex, t->prev, 65);
	wd_sha256_hex(b->buf.data + off, len, t->prev);
	wd_buf_append(&b->buf, "\n", 1);
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 256;
		b->v = wd_realloc(b->v, b->cap * sizeof(*b->v));
	}
	/* the index block, copied in place (blocks are 16-byte sized) */
	size_t ioff = b->ia.len;
	if (idx)
		wd_buf_append(&b->ia, idx, idx->size);
	b->v[b->n++] = (struct wd_pend){.seq = seq,
					.ts_us = wall / 1000,
					.off = off,
					.len = len,
					.idx_off = ioff,
					.idx_len = idx ? idx->size : 0};
	if (durable) {
		b->want_sync = true;
		pthread_cond_signal(&t->wake);
	} else if (b->buf.len >= BATCH_URGENT || b->n == 1) {
		pthread_cond_signal(&t->wake);
	}
	int r = 0;
	if (durable) {
		uint64_t ep = t->epoch;
		while (t->synced_seq < seq && !t->error && t->epoch == ep)
			pthread_cond_wait(&t->done, &t->mu);
		if (t->synced_seq < seq || t->epoch != ep)
			r = t->error ? t->error : t->last_error;
	}
	pthread_mutex_unlock(&t->mu);
	if (r < 0)
		return wd_err_set(err, r, "trace: durable append failed: %s",
				  strerror(-r));
	*seq_out = seq;
	return 0;
}

int wd_trace_append(struct wd_trace *t, json_t *rec, bool durable,
		    uint64_t *seq_out, struct wd_err *err)
{
	const char *run_id = json_string_value(json_object_get(rec, "run_id"));
	const char *type = json_string_value(json_object_get(rec, "type"));
	json_t *step = json_object_get(rec, "step");
	if (!json_is_object(rec) || !run_id || !*run_id || !type || !*type ||
	    !json_is_integer(step) || json_integer_value(step) < 0)
		return wd_err_set(err, -EINVAL,
				  "trace record needs run_id, type (strings) "
				  "and step (integer >= 0)");
	if (t->o.read_only)
		return wd_err_set(err, -EROFS, "trace store opened read-only");

	wd_trace_redact_json(t, rec);
	run_id = json_string_value(json_object_get(rec, "run_id"));
	type = json_string_value(json_object_get(rec, "type"));

	/* serialize outside the lock: run_id, step, type, then the rest */
	struct wd_buf own = {0}, *mb = enc_buf();
	if (!mb)
		mb = &own;
	wd_buf_append(mb, "{\"run_id\":", 10);
	int er = wd_trace_emit(mb, json_object_get(rec, "run_id"));
	wd_buf_append(mb, ",\"step\":", 8);
	er |= wd_trace_emit(mb, step);
	wd_buf_append(mb, ",\"type\":", 8);
	er |= wd_trace_emit(mb, json_object_get(rec, "type"));
	const char *k;
	json_t *v;
	json_object_foreach(rec, k, v)
	{
		if (reserved_key(k))
			continue;
		wd_buf_append(mb, ",", 1);
		er |= wd_trace_emit_member(mb, k, v);
	}
	wd_buf_append(mb, "}", 1);
	size_t midlen = mb->len;
	if (er) {
		enc_done(mb);
		wd_buf_free(&own);
		return wd_err_set(err, -EINVAL,
				  "trace record: cannot encode (NaN or "
				  "infinity?)");
	}
	/* while the index thread catches up from the segments, the writer
	 * queues nothing: skip the extraction. The index block goes after
	 * the record in the same buffer. */
	size_t ib = 0;
	bool want_idx =
	    t->idx && !__atomic_load_n(&t->iq_overflow, __ATOMIC_RELAXED);
	if (want_idx) {
		struct wd_idxvals iv;
		wd_idx_extract_vals(rec, &iv);
		ib = wd_idx_build_into(&iv, mb);
	}
	const struct wd_idxrec *idx =
	    want_idx ? (const struct wd_idxrec *)(void *)(mb->data + ib) : NULL;
	json_t *tr = json_object_get(rec, "trace");
	const char *pl = json_string_value(json_object_get(tr, "payloads"));
	if (!pl)
		pl = json_string_value(json_object_get(rec, "payloads"));
	wd_trace_note_run(t, type, run_id, pl);

	uint64_t seq;
	char ts[40], prev_hex[65];
	int r = wd_trace_append_body(t, mb->data, midlen, idx, durable, &seq,
				     ts, prev_hex, err);
	enc_done(mb);
	wd_buf_free(&own);
	if (r < 0)
		return r;
	/* the written head, for the caller (and the OTLP feed) */
	char pv[7 + 64];
	memcpy(pv, "sha256:", 7);
	memcpy(pv + 7, prev_hex, 64);
	json_object_set_new_nocheck(rec, "seq", json_integer(seq));
	json_object_set_new_nocheck(rec, "ts", json_string_nocheck(ts));
	json_object_set_new_nocheck(rec, "prev",
				    json_stringn_nocheck(pv, sizeof(pv)));
	if (t->o.otlp)
		wd_otlp_feed(t->o.otlp, rec);
	if (seq_out)
		*seq_out = seq;
	return 0;
}

int wd_trace_flush(struct wd_trace *t, struct wd_err *err)
{
	if (!t->have_writer)
		return 0;
	/* durable means the blobs put so far too, named or not yet */
	int br = wd_trace_blobs_settle(t);
	if (!br)
		br = wd_trace_blobs_sync(t);
	if (br < 0)
		return wd_err_set(err, br, "trace flush: blobs: %s",
				  strerror(-br));
	pthread_mutex_lock(&t->mu);
	uint64_t target = t->next_seq - 1, ep = t->epoch;
	t->flush_waiters++;
	pthread_cond_signal(&t->wake);
	while ((t->synced_seq < target || t->indexed_seq < target) &&
	       !t->error && t->epoch == ep)
		pthread_cond_wait(&t->done, &t->mu);
	while (t->error && t->indexed_seq < t->written_seq && t->epoch == ep)
		pthread_cond_wait(&t->done, &t->mu);
	t->flush_waiters--;
	int e = t->epoch != ep ? t->last_error
		: t->synced_seq < target || t->indexed_seq < target ? t->error
								    : 0;
	pthread_mutex_unlock(&t->mu);
	if (e)
		return wd_err_set(err, e, "trace flush: %s", strerror(-e));
	return 0;
}

int wd_trace_wait_written(struct wd_trace *t, uint64_t seq)
{
	if (!t->have_writer)
		return 0;
	pthread_mutex_lock(&t->mu);
	t->vis_waiters++; /* the writer writes the batch now */
	pthread_cond_signal(&t->wake);
	uint64_t ep = t->epoch;
	while (t->written_seq < seq && !t->error && t->epoch == ep)
		pthread_cond_wait(&t->done, &t->mu);
	t->vis_waiters--;
	/* after a recovery, seq may name a newer record: what this caller
	 * appended was in the failed batch */
	int e = t->epoch != ep	       ? t->last_error
		: t->written_seq < seq ? t->error
				       : 0;
	pthread_mutex_unlock(&t->mu);
	return e;
}

/* Wait until everything appended so far is written and indexed (readable),
 * without forcing an fdatasync: readers need visibility, not durability.
 * Returns 0 (kept as int for the callers' error paths). */
int wd_trace_visible(struct wd_trace *t)
{
	if (!t->have_writer)
		return 0;
	pthread_mutex_lock(&t->mu);
	uint64_t target = t->next_seq - 1, ep = t->epoch;
	t->vis_waiters++;
	pthread_cond_signal(&t->wake);
	/* an unhealthy store: what was written still gets indexed */
	while (t->indexed_seq < (t->error ? t->written_seq : target) &&
	       t->epoch == ep)
		pthread_cond_wait(&t->done, &t->mu);
	t->vis_waiters--;
	pthread_mutex_unlock(&t->mu);
	/* an unhealthy store still serves what reached the disk: replay and
	 * `trace show` of the failed run must keep working */
	return 0;
}

int wd_trace_open(const char *state_dir, const struct wd_trace_opts *o,
		  struct wd_trace **out, struct wd_err *err)
{
	struct wd_trace *t = wd_calloc(1, sizeof(*t));
	int r;
	if (o)
		t->o = *o;
	if (!t->o.segment_bytes)
		t->o.segment_bytes = 64ull << 20;
	if (!t->o.commit_us)
		t->o.commit_us = 2000;
	t->root = wd_asprintf("%s/trace", state_dir);
	t->segdir = wd_asprintf("%s/segments", t->root);
	t->blobdir = wd_asprintf("%s/blobs", t->root);
	t->segfd = -1;
	t->hash_only = json_object();
	/* appenders hold mu for the framing of one line (a microsecond or
	 * so): spinning briefly beats sleeping in the kernel and being woken
	 * when two threads append at once */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&t->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_mutex_init(&t->idx_mu, NULL);
	pthread_mutex_init(&t->runs_mu, NULL);
	pthread_mutex_init(&t->blob_mu, NULL);
	pthread_mutex_init(&t->settle_mu, NULL);
	pthread_cond_init(&t->wake, NULL);
	pthread_cond_init(&t->done, NULL);
	pthread_cond_init(&t->iwake, NULL);
	for (size_t i = 0; t->o.redact_regexes && t->o.redact_regexes[i]; i++)
		t->nrx++;
	t->rx = wd_calloc(t->nrx ? t->nrx : 1, sizeof(regex_t));
	for (size_t i = 0; i < t->nrx; i++) {
		r = regcomp(&t->rx[i], t->o.redact_regexes[i], REG_EXTENDED);
		if (r) {
			for (size_t j = 0; j < i; j++)
				regfree(&t->rx[j]);
			t->nrx = 0;
			wd_trace_close(t);
			return wd_err_set(err, -EINVAL,
					  "redaction pattern '%s' is not a "
					  "valid regex",
					  o->redact_regexes[i]);
		}
	}
	if (t->o.read_only) {
		struct stat st;
		if (stat(t->segdir, &st) < 0) {
			r = -errno;
			wd_trace_close(t);
			return wd_err_set(err, r, "no trace store at %s/trace",
					  state_dir);
		}
	} else if ((r = wd_mkdir_p(t->segdir, 0750)) < 0 ||
		   (r = wd_mkdir_p(t->blobdir, 0750)) < 0) {
		wd_trace_close(t);
		return wd_err_set(err, r, "%s: %s", t->root, strerror(-r));
	}
	r = wd_trace_load_tail(t, err);
	if (r < 0) {
		wd_trace_close(t);
		return r;
	}
	t->written_seq = t->synced_seq = t->indexed_seq = t->next_seq - 1;
	memcpy(t->written_prev, t->prev, sizeof(t->written_prev));
	if (!t->o.no_index) {
		cleanup_free char *db = wd_asprintf("%s/index.db", t->root);
		r = wd_idx_open(db, &t->idx, err);
		if (r == 0 && t->dmg.seg && !wd_trace_idx_matches_last(t)) {
			wd_warn("trace index '%s': its rows of segment "
				"%016llu do not match the segment (damaged or "
				"repaired since); rebuilding the index from "
				"the segments",
				db, (unsigned long long)t->dmg.seg);
			pthread_mutex_lock(&t->idx_mu);
			r = wd_idx_clear(t->idx);
			pthread_mutex_unlock(&t->idx_mu);
			if (r < 0)
				wd_err_set(err, r, "cannot clear the index");
		}
		free(t->dmg.off);
		free(t->dmg.len);
		t->dmg.off = t->dmg.len = NULL;
		t->dmg.n = t->dmg.cap = 0;
		if (r == 0)
			r = wd_trace_idx_catch_up(t, err);
		if (r < 0 && !t->o.read_only) {
			/* the index is derived: a damaged one is set aside
			 * and rebuilt from the segments, never trusted */
			wd_warn("trace index '%s': %s; rebuilding it", db,
				err ? err->msg : "unusable");
			wd_idx_close(t->idx);
			t->idx = NULL;
			char ts[24];
			snprintf(ts, sizeof(ts), "%llu",
				 (unsigned long long)wd_wall_ns());
			for (const char *sfx = ""; sfx;
			     sfx = !*sfx		  ? "-wal"
				   : !strcmp(sfx, "-wal") ? "-shm"
							  : NULL) {
				cleanup_free char *from =
				    wd_asprintf("%s%s", db, sfx);
				cleanup_free char *to =
				    wd_asprintf("%s%s.broken-%s", db, sfx, ts);
				rename(from, to);
			}
			r = wd_idx_open(db, &t->idx, err);
			if (r == 0)
				r = wd_trace_idx_catch_up(t, err);
		}
		if (r < 0 && t->o.read_only) {
			/* a reader that cannot bring the index up to date
			 * (disk full, read-only media) still reads the
			 * segments: verify and run_records need no index */
			wd_warn("trace index '%s': %s; reading the segments "
				"without it",
				db, err ? err->msg : "unusable");
			wd_idx_close(t->idx);
			t->idx = NULL;
			r = 0;
		}
		if (r < 0) {
			wd_trace_close(t);
			return r;
		}
		wd_trace_load_hash_only(t);
	}
	if (!t->o.read_only) {
		if (t->seg_first &&
		    (r = wd_trace_seg_open(t, t->seg_first)) < 0) {
			wd_trace_close(t);
			return wd_err_set(err, r, "open segment: %s",
					  strerror(-r));
		}
		t->last_sync_ns = wd_now_ns();
		if ((r = -pthread_create(&t->writer, NULL, writer_main, t))) {
			wd_trace_close(t);
			return wd_err_set(err, r, "trace writer thread");
		}
		t->have_writer = true;
		if (t->idx && (r = -pthread_create(&t->indexer, NULL,
						   wd_trace_indexer_main, t))) {
			wd_trace_close(t);
			return wd_err_set(err, r, "trace index thread");
		}
		t->have_indexer = t->idx != NULL;
	}
	*out = t;
	return 0;
}

void wd_trace_close(struct wd_trace *t)
{
	if (!t)
		return;
	if (t->have_writer) {
		pthread_mutex_lock(&t->mu);
		t->stop = true;
		pthread_cond_signal(&t->wake);
		pthread_mutex_unlock(&t->mu);
		pthread_join(t->writer, NULL);
	}
	/* blobs put after the last batch: no record names them yet, but
	 * their refs were handed out */
	if (t->bq.n)
		wd_trace_blobs_settle(t);
	wd_trace_blobs_sync(t);
	free(t->bq.v);
	if (t->have_indexer) {
		/* the writer has stopped: drain what it queued */
		pthread_mutex_lock(&t->mu);
		t->idx_stop = true;
		pthread_cond_signal(&t->iwake);
		pthread_mutex_unlock(&t->mu);
		pthread_join(t->indexer, NULL);
	}
	free(t->iq.v);
	wd_buf_free(&t->iq.ia);
	if (t->segfd >= 0)
		close(t->segfd);
	wd_idx_close(t->idx);
	for (size_t i = 0; i < t->nrx; i++)
		regfree(&t->rx[i]);
	free(t->rx);
	free(t->dmg.off);
	free(t->dmg.len);
	batch_free(&t->cur);
	batch_free(&t->spare);
	json_decref(t->hash_only);
	pthread_mutex_destroy(&t->mu);
	pthread_mutex_destroy(&t->idx_mu);
	pthread_mutex_destroy(&t->runs_mu);
	pthread_mutex_destroy(&t->blob_mu);
	pthread_mutex_destroy(&t->settle_mu);
	pthread_cond_destroy(&t->wake);
	pthread_cond_destroy(&t->done);
	pthread_cond_destroy(&t->iwake);
	free(t->root);
	free(t->segdir);
	free(t->blobdir);
	free(t);
}
