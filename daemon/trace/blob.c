/* Content-addressed blobs: blobs/ab/cdef... = zlib(payload), where abcdef...
 * is sha256(payload). A blob is fsynced (file and directory) before
 * put_blob returns, so the record naming it can never be durable first. */
#include "trace/trace_int.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

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

	cleanup_free char *dir = wd_asprintf("%s/%.2s", t->blobdir, hex);
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		return wd_err_set(err, -errno, "blob dir %s: %s", dir,
				  strerror(errno));
	uLongf zlen = compressBound(len);
	cleanup_free unsigned char *z = wd_malloc(zlen);
	if (compress2(z, &zlen, data, len, Z_BEST_SPEED) != Z_OK)
		return wd_err_set(err, -ENOMEM, "blob %s: compress failed",
				  hex);
	char tmpn[32];
	wd_rand_hex(tmpn, 16);
	cleanup_free char *tmp = wd_asprintf("%s/.tmp-%s", dir, tmpn);
	cleanup_close int fd =
	    open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (fd < 0)
		return wd_err_set(err, -errno, "blob %s: %s", tmp,
				  strerror(errno));
	int r = wd_write_all(fd, z, zlen);
	if (!r && fdatasync(fd) < 0)
		r = -errno;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (!r)
		r = fsync_dir(dir);
	if (r < 0) {
		unlink(tmp);
		/* a store that cannot write is unhealthy: fail closed */
		pthread_mutex_lock(&t->mu);
		if (!t->error)
			t->error = r;
		pthread_mutex_unlock(&t->mu);
		return wd_err_set(err, r, "blob %s: %s", path, strerror(-r));
	}
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
	if (r < 0)
		return r;
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

int wd_trace_get_blob(struct wd_trace *t, const char *ref, char **data,
		      size_t *len, struct wd_err *err)
{
	if (!wd_trace_ref_ok(ref))
		return wd_err_set(err, -EINVAL, "bad blob ref '%s'",
				  ref ? ref : "");
	int r = wd_trace_load_blob(t, ref + 7, data, len);
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
	if (r < 0)
		return wd_err_set(err, r, "blob %s: %s", ref, strerror(-r));
	return 0;
}
