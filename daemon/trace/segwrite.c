/* The segment files, as the writer thread writes them (store.c's
 * writer_main): opening and rotating, writing a batch, syncing, and
 * dropping what is on disk from the page cache. */
#include "trace/trace_int.h"
#include "common/log.h"

#include <fcntl.h>
#include <sys/stat.h>

/* Drop-behind: a segment's bytes are read back by offset (a run's records,
 * the index's catch-up), seldom and not soon after they were written, so
 * the writer does not leave them in the page cache: once a sync has made
 * them durable (and clean) they are dropped, all but the newest
 * WARM_BYTES (readers following the tail), and a rotated segment whole.
 * Every WB_CHUNK bytes written, their writeback is started, so that the
 * next sync finds less to write. New page-cache pages are what a segment
 * write costs: on a VM that hands freed guest memory back to its host
 * (virtio-balloon free page reporting), each one is a host page fault on
 * first touch; pages the writer freed moments ago are not, and are what
 * it gets next (write() of fresh pages: 356-439 MB/s here, with
 * drop-behind 1326-1412 MB/s). Only what fdatasync said is on disk is
 * dropped: a page whose writeback failed is never thrown away before the
 * error is seen. sync_file_range is only ever asked to start writeback
 * (its WAIT flags would consume the file's writeback error, which the
 * next fdatasync must see). */
#define WB_CHUNK   (8u << 20)
#define WARM_BYTES (8u << 20)

char *wd_trace_seg_path(struct wd_trace *t, uint64_t first)
{
	return wd_asprintf("%s/%016llu" WD_SEG_SUFFIX, t->segdir,
			   (unsigned long long)first);
}

/* Writer thread only: the segment is on disk up to seg_size (an
 * fdatasync just returned 0): its page cache is dropped but the newest
 * WARM_BYTES. Best effort. */
static void drop_synced(struct wd_trace *t)
{
	if (t->clean_off > t->seg_size) /* cut back by a recovery */
		t->clean_off = t->seg_size;
	uint64_t warm_from =
	    t->seg_size > WARM_BYTES ? t->seg_size - WARM_BYTES : 0;
	if (warm_from > t->clean_off &&
	    !posix_fadvise(t->segfd, (off_t)t->clean_off,
			   (off_t)(warm_from - t->clean_off),
			   POSIX_FADV_DONTNEED))
		t->clean_off = warm_from;
	t->wb_off = t->seg_size;
}

/* Writer thread only: starts writeback of what was written since it was
 * last started, once that is WB_CHUNK or more. Errors ignored: writeback
 * that fails to start or fails is the next fdatasync's to do and to
 * report (the mapping keeps the error for it: nothing here waits on
 * writeback, which would consume it). */
static void start_writeback(struct wd_trace *t)
{
	if (t->wb_off > t->seg_size) /* cut back by a recovery */
		t->wb_off = t->seg_size;
	if (t->seg_size - t->wb_off < WB_CHUNK)
		return;
	(void)sync_file_range(t->segfd, (off_t)t->wb_off,
			      (off_t)(t->seg_size - t->wb_off),
			      SYNC_FILE_RANGE_WRITE);
	t->wb_off = t->seg_size;
}

int wd_trace_seg_open(struct wd_trace *t, uint64_t first)
{
	cleanup_free char *p = wd_trace_seg_path(t, first);
	int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	/* a new segment's directory entry must be durable too */
	int dfd = open(t->segdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	if (t->segfd >= 0) {
		/* synced by the caller: all of it is clean */
		posix_fadvise(t->segfd, (off_t)t->clean_off, 0,
			      POSIX_FADV_DONTNEED);
		close(t->segfd);
	}
	t->segfd = fd;
	t->seg_first = first;
	t->seg_size = st.st_size;
	t->wb_off = t->clean_off = 0;
	return 0;
}

int wd_trace_seg_sync(struct wd_trace *t)
{
	int r = wd_trace_blobs_sync(t);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	if (fdatasync(t->segfd) < 0)
		return -1;
	drop_synced(t);
	return 0;
}

int wd_trace_write_batch(struct wd_trace *t, struct wd_batch *b, bool sync,
			 size_t *nw)
{
	size_t i = 0;
	*nw = 0;
	while (i < b->n) {
		struct wd_pend *p = &b->v[i];
		int r;
		if (t->segfd < 0 ||
		    (t->seg_size > 0 &&
		     t->seg_size + p->len + 1 > t->o.segment_bytes)) {
			if (t->segfd >= 0 && wd_trace_seg_sync(t) < 0)
				return -errno;
			r = wd_trace_seg_open(t, p->seq);
			if (r < 0)
				return r;
		}
		/* the run of records that fits in this segment */
		size_t j = i;
		uint64_t sz = t->seg_size;
		while (j < b->n &&
		       (j == i || sz + b->v[j].len + 1 <= t->o.segment_bytes)) {
			b->v[j].seg = t->seg_first;
			b->v[j].fileoff = sz;
			sz += b->v[j].len + 1;
			j++;
		}
		size_t from = b->v[i].off;
		size_t to = b->v[j - 1].off + b->v[j - 1].len + 1;
		r = wd_write_all(t->segfd, b->buf.data + from, to - from);
		if (r < 0) {
			/* leave no partial line behind if we can help it;
			 * open() would cut it anyway */
			if (ftruncate(t->segfd, t->seg_size) < 0)
				wd_debug("trace: cannot cut partial write");
			return r;
		}
		t->seg_size = sz;
		i = j;
		*nw = i; /* in a segment: a later failure cannot take back */
		start_writeback(t);
	}
	if (sync && t->segfd >= 0) {
		if (wd_trace_seg_sync(t) < 0)
			return -errno;
		t->last_sync_ns = wd_now_ns();
	}
	return 0;
}
