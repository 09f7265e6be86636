/* Bringing the index up to the segments: catch-up after the index's tail
 * (at open, and live by the index thread after a queue overflow), and a
 * full rebuild from the segments alone (warden trace reindex). */
#include "trace/trace_int.h"
#include "common/log.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Records per catch-up transaction. */
#define CU_CHUNK 20000

struct cu_ctx {
	struct wd_trace *t;
	uint64_t seg, base, n, upto;
	bool live, done;
	int r;
	/* the transaction's index blocks, kept until it ends
	 * (wd_idx_add_kept) */
	struct wd_idxrec *kept[CU_CHUNK];
	size_t nkept;
	char *scratch; /* the scanner's copies of a line's strings */
	size_t scap;
};

static void cu_free(struct cu_ctx *c)
{
	for (size_t i = 0; i < c->nkept; i++)
		free(c->kept[i]);
	c->nkept = 0;
}

/* Under idx_mu: commit what the transaction holds, tell waiting readers
 * (live catch-up) and start the next transaction. */
static int cu_commit(struct cu_ctx *c, uint64_t seq)
{
	int r = wd_idx_commit(c->t->idx);
	cu_free(c);
	if (r < 0)
		return r;
	if (c->live) {
		pthread_mutex_lock(&c->t->mu);
		if (seq > c->t->indexed_seq)
			c->t->indexed_seq = seq;
		pthread_cond_broadcast(&c->t->done);
		pthread_mutex_unlock(&c->t->mu);
	}
	return wd_idx_begin(c->t->idx);
}

/* A framed line: its fields by the strict scanner, or by jansson (which
 * skips a line that is not a record, as wd_trace_scan_skip does). */
static int cu_cb(void *p, const char *line, size_t len, uint64_t off,
		 json_t *unused)
{
	struct cu_ctx *c = p;
	struct wd_idxvals v;
	uint64_t seq, ts;
	const char *tss;
	struct wd_idxrec *f;
	if (len + 1 > c->scap) {
		c->scap = len + 1 > 2 * c->scap ? len + 1 : 2 * c->scap;
		free(c->scratch);
		c->scratch = wd_malloc(c->scap);
	}
	if (wd_idx_scan_line(line, len, c->scratch, &v, &seq, &tss) == 0) {
		if (c->upto && seq > c->upto) {
			c->done = true;
			return -ECANCELED;
		}
		ts = wd_trace_parse_ts(tss);
		f = wd_idx_build(&v);
	} else {
		json_t *rec;
		if (wd_trace_parse_line(line, len, &rec) < 0)
			return 0;
		seq = json_integer_value(json_object_get(rec, "seq"));
		if (c->upto && seq > c->upto) {
			json_decref(rec);
			c->done = true;
			return -ECANCELED;
		}
		ts = wd_trace_parse_ts(
		    json_string_value(json_object_get(rec, "ts")));
		f = wd_idx_extract(rec);
		json_decref(rec);
	}
	c->kept[c->nkept++] = f;
	c->r =
	    wd_idx_add_kept(c->t->idx, seq, c->seg, c->base + off, len, ts, f);
	if (c->r < 0)
		return c->r;
	if (c->upto && seq == c->upto)
		c->done = true;
	if (++c->n % CU_CHUNK == 0 && (c->r = cu_commit(c, seq)) < 0)
		return c->r;
	return c->done ? -ECANCELED : 0;
}

/* Bytes of a file from `off` to `lim` (0: to its end). */
static int read_from(const char *path, uint64_t off, uint64_t lim, char **out,
		     size_t *len)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	uint64_t size = st.st_size;
	uint64_t stop = lim && lim < size ? lim : size;
	size_t n = stop > off ? stop - off : 0;
	char *buf = wd_malloc(n + 1);
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(fd, buf + got, n - got, off + got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = -errno;
			free(buf);
			return e;
		}
		if (k == 0)
			break;
		got += k;
	}
	*out = buf;
	*len = got;
	return 0;
}

/* Under idx_mu. upto = 0: everything the segments hold; else up to seq upto,
 * whose line ends at byte upto_end of segment upto_seg (no need to read
 * further: the writer may be appending there). */
static int catch_up_locked(struct wd_trace *t, uint64_t upto, uint64_t upto_seg,
			   uint64_t upto_end, bool live)
{
	uint64_t seq, seg, end;
	int r = wd_idx_tail(t->idx, &seq, &seg, &end);
	/* an index ahead of the segments (cut tail, replaced store) is stale */
	if (!r && !live && seq >= t->next_seq) {
		wd_info("trace index '%s' is ahead of the segments; "
			"rebuilding",
			t->root);
		r = wd_idx_clear(t->idx);
		seq = seg = end = 0;
	}
	if (!r && upto && seq >= upto)
		return 0;
	cleanup_free uint64_t *segs = NULL;
	size_t n = 0;
	if (!r)
		r = wd_trace_list_segments(t, &segs, &n);
	bool done = false;
	for (size_t i = 0; !r && !done && i < n; i++) {
		if (segs[i] < seg || (upto && segs[i] > upto_seg))
			continue;
		uint64_t from = segs[i] == seg ? end : 0;
		cleanup_free char *p = wd_trace_seg_path(t, segs[i]);
		cleanup_free char *buf = NULL;
		size_t len = 0;
		r = read_from(p, from,
			      upto && segs[i] == upto_seg ? upto_end : 0, &buf,
			      &len);
		if (r < 0)
			break;
		if (!len)
			continue;
		struct cu_ctx *c = wd_calloc(1, sizeof(*c));
		*c = (struct cu_ctx){.t = t,
				     .seg = segs[i],
				     .base = from,
				     .upto = upto,
				     .live = live};
		if ((r = wd_idx_begin(t->idx)) < 0) {
			free(c);
			break;
		}
		/* past damaged lines too: the records after them were
		 * acknowledged and stay readable (verify reports the
		 * damage) */
		wd_trace_scan_frames(buf, len, cu_cb, c);
		r = c->r;
		done = c->done;
		if (!r)
			r = wd_idx_commit(t->idx);
		else
			wd_idx_rollback(t->idx);
		cu_free(c);
		free(c->scratch);
		free(c);
	}
	return r;
}

int wd_trace_idx_catch_up(struct wd_trace *t, struct wd_err *err)
{
	pthread_mutex_lock(&t->idx_mu);
	int r = catch_up_locked(t, 0, 0, 0, false);
	pthread_mutex_unlock(&t->idx_mu);
	if (r < 0)
		return wd_err_set(err, r, "trace index catch-up: %s",
				  strerror(-r));
	return 0;
}

int wd_trace_idx_catch_up_live(struct wd_trace *t, uint64_t upto,
			       uint64_t upto_seg, uint64_t upto_end,
			       struct wd_err *err)
{
	pthread_mutex_lock(&t->idx_mu);
	int r = catch_up_locked(t, upto, upto_seg, upto_end, true);
	pthread_mutex_unlock(&t->idx_mu);
	if (r < 0)
		return wd_err_set(err, r, "trace index catch-up: %s",
				  strerror(-r));
	return 0;
}

int wd_trace_reindex(struct wd_trace *t, struct wd_err *err)
{
	if (!t->idx)
		return wd_err_set(err, -EINVAL, "store opened without index");
	int r = wd_trace_flush(t, err);
	if (r < 0)
		return r;
	/* clear and rebuild under one hold of idx_mu: the index thread must
	 * not add a later record in between (the rebuild starts after the
	 * index's last record) */
	pthread_mutex_lock(&t->idx_mu);
	r = wd_idx_clear(t->idx);
	if (r < 0) {
		pthread_mutex_unlock(&t->idx_mu);
		return wd_err_set(err, r, "trace index: cannot clear");
	}
	r = catch_up_locked(t, 0, 0, 0, false);
	pthread_mutex_unlock(&t->idx_mu);
	if (r < 0)
		return wd_err_set(err, r, "trace index catch-up: %s",
				  strerror(-r));
	return 0;
}
