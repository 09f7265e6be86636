/* The trace index thread: the writer queues the index fields of each
 * written batch (bounded by wd_trace_iq_limit bytes); the index thread adds
 * them in SQLite transactions, or catches up from the segments after an
 * overflow. See store.c for the whole concurrency picture. */
#include "trace/trace_int.h"
#include "common/log.h"

#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define IDX_CHUNK	    20000 /* records per index transaction */
#define WD_TRACE_INDEX_NICE 10

/* ~400 bytes a record: a burst of ~600k records beyond what the index keeps
 * up with fits; past that, catch-up from the segments (which re-parses the
 * lines and costs more CPU per record than the queue). */
size_t wd_trace_iq_limit = 256u << 20;
unsigned long wd_trace_iq_overflows;

/* Under t->mu, writer: hand the index fields of a written batch to the index
 * thread, or fall back to catch-up from the segments. */
void wd_trace_index_enqueue(struct wd_trace *t, struct wd_batch *b)
{
	if (!t->idx) {
		t->indexed_seq = b->v[b->n - 1].seq;
		return;
	}
	size_t bytes = 0;
	bool ok = !t->iq_overflow;
	for (size_t i = 0; ok && i < b->n; i++) {
		ok = b->v[i].idx_len != 0;
		bytes += ok ? b->v[i].idx_len + sizeof(b->v[i]) : 0;
	}
	if (ok && t->iq_bytes + bytes > wd_trace_iq_limit)
		ok = false;
	if (!ok) {
		/* these records are in the segments: the index thread reads
		 * them back from there */
		if (!t->iq_overflow)
			__atomic_fetch_add(&wd_trace_iq_overflows, 1,
					   __ATOMIC_RELAXED);
		__atomic_store_n(&t->iq_overflow, true, __ATOMIC_RELAXED);
	} else {
		if (t->iq.n + b->n > t->iq.cap) {
			t->iq.cap = t->iq.n + b->n > 2 * t->iq.cap
					? t->iq.n + b->n
					: 2 * t->iq.cap;
			t->iq.v =
			    wd_realloc(t->iq.v, t->iq.cap * sizeof(*b->v));
		}
		/* the batch's index blocks after the queue's (both 16-byte
		 * aligned: malloc'ed buffers, blocks of 16-byte sizes) */
		size_t base = t->iq.ia.len;
		wd_buf_append(&t->iq.ia, b->ia.data, b->ia.len);
		memcpy(t->iq.v + t->iq.n, b->v, b->n * sizeof(*b->v));
		for (size_t i = 0; i < b->n; i++)
			t->iq.v[t->iq.n + i].idx_off += base;
		t->iq.n += b->n;
		t->iq_bytes += bytes;
	}
	pthread_cond_signal(&t->iwake);
}

/* Index thread: one transaction per round over everything queued. */
static int index_pend(struct wd_trace *t, struct wd_pend *v, size_t n, char *ia)
{
	pthread_mutex_lock(&t->idx_mu);
	int r = wd_idx_begin(t->idx);
	for (size_t i = 0; !r && i < n; i++) {
		struct wd_idxrec *f =
		    (struct wd_idxrec *)(void *)(ia + v[i].idx_off);
		wd_idx_resolve(f);
		/* the blocks stay in ia until the next round */
		r = wd_idx_add_kept(t->idx, v[i].seq, v[i].seg, v[i].fileoff,
				    v[i].len, v[i].ts_us, f);
	}
	if (!r)
		r = wd_idx_commit(t->idx);
	else
		wd_idx_rollback(t->idx);
	pthread_mutex_unlock(&t->idx_mu);
	return r;
}

void *wd_trace_indexer_main(void *arg)
{
	struct wd_trace *t = arg;
	struct wd_batch spare = {0}; /* v and ia, swapped with the queue's */
	pthread_setname_np(pthread_self(), "wd-trace-index");
	/* The index is derived and may lag; appends and the writer (the
	 * durability path) may not. Under a burst that saturates the CPUs
	 * the index thread yields to them (nice 10: ~1/10 of a busy CPU)
	 * and catches up when the burst ends. A failure only leaves the
	 * thread at the default priority. */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), WD_TRACE_INDEX_NICE) < 0)
		wd_debug("trace index: setpriority: %s", strerror(errno));
	pthread_mutex_lock(&t->mu);
	for (;;) {
		if (t->iq.n) {
			struct wd_pend *v = t->iq.v;
			size_t n = t->iq.n, cap = t->iq.cap;
			struct wd_buf ia = t->iq.ia;
			t->iq.v = spare.v;
			t->iq.cap = spare.cap;
			t->iq.ia = spare.ia;
			t->iq.n = 0;
			t->iq_bytes = 0;
			pthread_mutex_unlock(&t->mu);
			/* commit in chunks: readers waiting for a record see
			 * it without waiting for the whole queue */
			int r = 0;
			size_t done = 0;
			while (done < n && r == 0) {
				size_t k =
				    n - done < IDX_CHUNK ? n - done : IDX_CHUNK;
				r = index_pend(t, v + done, k, ia.data);
				if (r < 0)
					break;
				done += k;
				pthread_mutex_lock(&t->mu);
				if (v[done - 1].seq > t->indexed_seq)
					t->indexed_seq = v[done - 1].seq;
				pthread_cond_broadcast(&t->done);
				pthread_mutex_unlock(&t->mu);
			}
			/* The index is derived: the segments hold the truth,
			 * so a failure is a warning and the index thread
			 * retries from the segments (and the next open would
			 * repair a gap). */
			if (r < 0)
				wd_log_errno(WD_LOG_WARN, r,
					     "trace index '%s'; catching up "
					     "from the segments",
					     t->root);
			spare.v = v;
			spare.cap = cap;
			ia.len = 0;
			spare.ia = ia;
			pthread_mutex_lock(&t->mu);
			if (r < 0) {
				/* what was queued since follows the gap: the
				 * catch-up reads it from the segments too */
				t->iq.n = 0;
				t->iq.ia.len = 0;
				t->iq_bytes = 0;
				__atomic_store_n(&t->iq_overflow, true,
						 __ATOMIC_RELAXED);
			}
			pthread_cond_broadcast(&t->done);
			continue;
		}
		if (t->iq_overflow) {
			uint64_t upto = t->written_seq;
			uint64_t useg = t->written_seg, uend = t->written_end;
			pthread_mutex_unlock(&t->mu);
			struct wd_err err = {0};
			int r = wd_trace_idx_catch_up_live(t, upto, useg, uend,
							   &err);
			if (r < 0)
				wd_warn("trace index '%s': %s", t->root,
					err.msg);
			pthread_mutex_lock(&t->mu);
			if (upto > t->indexed_seq)
				t->indexed_seq = upto;
			/* caught up with the writer, nothing dropped since:
			 * the queue is contiguous again */
			if (t->written_seq == upto && !t->iq.n)
				__atomic_store_n(&t->iq_overflow, false,
						 __ATOMIC_RELAXED);
			pthread_cond_broadcast(&t->done);
			continue;
		}
		if (t->idx_stop)
			break;
		pthread_cond_wait(&t->iwake, &t->mu);
	}
	pthread_mutex_unlock(&t->mu);
	free(spare.v);
	wd_buf_free(&spare.ia);
	return NULL;
}
