/* Content-addressed blobs: blobs/ab/cdef... = zlib(payload), where abcdef...
 * is sha256(payload). put_blob hashes the (redacted) payload and queues it.
 * Before the trace writer writes a batch of records, it settles the queue:
 * compress, write a temporary file, fdatasync it, rename it into place; so
 * a blob's content is on disk before its name exists, and in place before
 * any record naming it is in a segment. Before the writer fdatasyncs a
 * segment, it fsyncs the blob directories that got names since
 * (wd_trace_blobs_sync); so a record acknowledged as durable never names a
 * blob that is not on disk. Compression and file system work leave the
 * caller's path (two blobs a model step). */
#include "trace/trace_int.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/log.h"

/* Blobs (count, bytes) waiting for the writer before the putter settles
 * them itself. */
#define BLOB_QUEUE_MAX	 256
#define BLOB_QUEUE_BYTES (32u << 20)

char *wd_trace_blob_path(struct wd_trace *t, const char *hex)
{
	return wd_asprintf("%s/%.2s/%s", t->blobdir, hex, hex + 2);
}

static bool run_hash_only(struct wd_trace *t, const char *run_id)
{
	if (!run_id)
		return false;
	pthread_mutex_lock(&t->runs_mu);
	bool r = json_object_get(t->hash_only, run_id) != NULL;
	pthread_mutex_unlock(&t->runs_mu);
	return r;
}

static int fsync_dir(const char *path)
{
	cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return fsync(fd) < 0 ? -errno : 0;
}

int wd_trace_put_blob(struct wd_trace *t, const char *run_id, const void *data,
		      size_t len, char out_ref[WD_TRACE_REF_LEN],
		      struct wd_err *err)
{
	size_t rlen;
	cleanup_free char *red = wd_trace_redact_text(t, data, len, &rlen);
	if (red) {
		data = red;
		len = rlen;
	}
	char hex[65];
	wd_sha256_hex(data, len, hex);
	snprintf(out_ref, WD_TRACE_REF_LEN, "sha256:%s", hex);
	if (run_hash_only(t, run_id))
		return 0;
	int e = 0;
	if (!wd_trace_healthy(t, &e))
		return wd_err_set(err, e, "trace store unhealthy: %s",
				  strerror(-e));
	if (t->o.read_only)
		return wd_err_set(err, -EROFS, "trace store opened read-only");

	cleanup_free char *path = wd_trace_blob_path(t, hex);
	struct stat st;
	if (stat(path, &st) == 0 && st.st_size > 0)
		return 0; /* dedup: same content already stored */
	bool queued = false;
	pthread_mutex_lock(&t->blob_mu);
	for (size_t i = 0; i < t->bq.n && !queued; i++)
		queued = !strcmp(t->bq.v[i].hex, hex);
	pthread_mutex_unlock(&t->blob_mu);
	if (queued)
		return 0; /* dedup: the same content waits to be settled */

	pthread_mutex_lock(&t->blob_mu);
	if (t->bq.n == t->bq.cap) {
		t->bq.cap = t->bq.cap ? 2 * t->bq.cap : 16;
		t->bq.v = wd_realloc(t->bq.v, t->bq.cap * sizeof(*t->bq.v));
	}
	struct wd_blob_pend *b = &t->bq.v[t->bq.n++];
	memcpy(b->hex, hex, sizeof(b->hex));
	b->len = len;
	if (red) {
		b->data = steal_pointer(&red);
	} else {
		b->data = wd_malloc(len ? len : 1);
		memcpy(b->data, data, len);
	}
	t->bq_bytes += len;
	bool full =
	    t->bq.n >= BLOB_QUEUE_MAX || t->bq_bytes >= BLOB_QUEUE_BYTES;
	pthread_mutex_unlock(&t->blob_mu);
	/* bound what a burst holds in memory: settle here */
	int r;
	if (full && (r = wd_trace_blobs_settle(t)) < 0)
		return wd_err_set(err, r, "blob %s: %s", hex, strerror(-r));
	return 0;
}

/* One queued blob into place: compressed into a temporary file, synced,
 * renamed. Its directory is synced before the next segment fdatasync. 0 or
 * -errno. */
static int settle_one(struct wd_trace *t, struct wd_blob_pend *b)
{
	cleanup_free char *dir = wd_asprintf("%s/%.2s", t->blobdir, b->hex);
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		return -errno;
	uLongf zlen = compressBound(b->len);
	cleanup_free unsigned char *z = wd_malloc(zlen);
	if (compress2(z, &zlen, (const Bytef *)b->data, b->len, Z_BEST_SPEED) !=
	    Z_OK)
		return -ENOMEM;
	char tmpn[32];
	wd_rand_hex(tmpn, 16);
	cleanup_free char *tmp = wd_asprintf("%s/.tmp-%s", dir, tmpn);
	cleanup_free char *path = wd_trace_blob_path(t, b->hex);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	/* content on disk before the name exists: a name found by the dedup
	 * check (or by a reader after a crash) is never a torn blob */
	int r = wd_write_all(fd, z, zlen);
	if (!r && fdatasync(fd) < 0)
		r = -errno;
	close(fd);
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/* Logged once per failure: the health probe (health.c) retries these
 * while the store is unhealthy. */
static void latch(struct wd_trace *t, int r, const char *what)
{
	pthread_mutex_lock(&t->mu);
	bool first = !t->error;
	wd_trace_latch_locked(t, r, what);
	pthread_mutex_unlock(&t->mu);
	if (first)
		wd_log_errno(WD_LOG_ERROR, r,
			     "trace '%s': %s; store is "
			     "unhealthy",
			     t->root, what);
}

int wd_trace_blobs_sync(struct wd_trace *t)
{
	pthread_mutex_lock(&t->settle_mu);
	int r = 0;
	for (unsigned d = 0; !r && d < 256; d++) {
		if (!t->dirty_dirs[d])
			continue;
		cleanup_free char *dir = wd_asprintf("%s/%02x", t->blobdir, d);
		if (!(r = fsync_dir(dir)))
			t->dirty_dirs[d] = false;
	}
	pthread_mutex_unlock(&t->settle_mu);
	/* a store that cannot write is unhealthy: fail closed */
	if (r < 0)
		latch(t, r, "blob directories not synced");
	return r;
}

int wd_trace_blobs_settle(struct wd_trace *t)
{
	pthread_mutex_lock(&t->settle_mu);
	pthread_mutex_lock(&t->blob_mu);
	struct wd_blob_pend *v = t->bq.v;
	size_t n = t->bq.n;
	t->bq.v = NULL;
	t->bq.n = t->bq.cap = 0;
	t->bq_bytes = 0;
	pthread_mutex_unlock(&t->blob_mu);
	int r = 0;
	size_t i = 0;
	for (; i < n; i++) {
		unsigned d;
		if ((r = settle_one(t, &v[i])) < 0)
			break;
		if (sscanf(v[i].hex, "%2x", &d) == 1)
			t->dirty_dirs[d & 255] = true;
		free(v[i].data);
	}
	if (r < 0) {
		/* their refs were handed out: they stay queued (ahead of
		 * any put since) for the next settle, after the store
		 * recovered, rather than be named by records and missing */
		pthread_mutex_lock(&t->blob_mu);
		size_t left = n - i, cap = left + t->bq.n + 1;
		struct wd_blob_pend *nv = wd_calloc(cap, sizeof(*nv));
		memcpy(nv, v + i, left * sizeof(*nv));
		if (t->bq.n)
			memcpy(nv + left, t->bq.v, t->bq.n * sizeof(*nv));
		for (size_t x = 0; x < left; x++)
			t->bq_bytes += v[i + x].len;
		free(t->bq.v);
		t->bq.v = nv;
		t->bq.n += left;
		t->bq.cap = cap;
		pthread_mutex_unlock(&t->blob_mu);
	}
	free(v);
	pthread_mutex_unlock(&t->settle_mu);
	if (r < 0)
		latch(t, r, "blobs not stored");
	return r;
}

/* A blob file's bytes (zlib) back to the payload, checked against its
 * name (hex). 0, -EBADMSG (corrupt or hash mismatch), -ENOMEM. */
static int inflate_checked(const char *hex, const void *z, size_t zlen,
			   char **data, size_t *len)
{
	z_stream s = {0};
	if (inflateInit(&s) != Z_OK)
		return -ENOMEM;
	struct wd_buf b = {0};
	unsigned char out[65536];
	s.next_in = (unsigned char *)z;
	s.avail_in = zlen;
	int zr;
	do {
		s.next_out = out;
		s.avail_out = sizeof(out);
		zr = inflate(&s, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END)
			break;
		wd_buf_append(&b, out, sizeof(out) - s.avail_out);
	} while (zr != Z_STREAM_END && (s.avail_in > 0 || s.avail_out == 0));
	inflateEnd(&s);
	if (zr != Z_STREAM_END || s.avail_in != 0) {
		wd_buf_free(&b);
		return -EBADMSG;
	}
	if (!b.data)
		wd_buf_append(&b, "", 0);
	char h[65];
	wd_sha256_hex(b.data, b.len, h);
	if (strcmp(h, hex)) {
		wd_buf_free(&b);
		return -EBADMSG;
	}
	*data = b.data;
	*len = b.len;
	return 0;
}

/* Decompress a blob file's bytes and check its name. 0, -EBADMSG (corrupt
 * or hash mismatch), -ENOENT. */
int wd_trace_load_blob(struct wd_trace *t, const char *hex, char **data,
		       size_t *len)
{
	cleanup_free char *path = wd_trace_blob_path(t, hex);
	cleanup_free char *z = NULL;
	size_t zlen;
	int r = wd_read_file(path, &z, &zlen);
	if (r == -ENOENT) {
		/* put but perhaps not settled yet */
		wd_trace_blobs_settle(t);
		r = wd_read_file(path, &z, &zlen);
	}
	if (r < 0)
		return r;
	return inflate_checked(hex, z, zlen, data, len);
}

static int blob_err(const char *ref, int r, struct wd_err *err)
{
	if (r == -ENOENT)
		return wd_err_set(err, r,
				  "blob %s: not stored (hash_only "
				  "run or dropped by retention)",
				  ref);
	if (r == -EBADMSG)
		return wd_err_set(err, r,
				  "blob %s: content does not match "
				  "its hash",
				  ref);
	return wd_err_set(err, r, "blob %s: %s", ref, strerror(-r));
}

int wd_trace_blob_decode(const char *ref, const void *z, size_t zlen,
			 char **data, size_t *len, struct wd_err *err)
{
	if (!wd_trace_ref_ok(ref))
		return wd_err_set(err, -EINVAL, "bad blob ref '%s'",
				  ref ? ref : "");
	int r = inflate_checked(ref + 7, z, zlen, data, len);
	return r ? blob_err(ref, r, err) : 0;
}

int wd_trace_get_blob(struct wd_trace *t, const char *ref, char **data,
		      size_t *len, struct wd_err *err)
{
	if (!wd_trace_ref_ok(ref))
		return wd_err_set(err, -EINVAL, "bad blob ref '%s'",
				  ref ? ref : "");
	int r = wd_trace_load_blob(t, ref + 7, data, len);
	return r < 0 ? blob_err(ref, r, err) : 0;
}
