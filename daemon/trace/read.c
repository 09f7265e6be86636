/* Reading a run's records back: through the index (seq order), or by
 * scanning the segments when the store has no index. */
#include "trace/trace_int.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

struct collect_ctx {
	const char *run_id;
	json_t *arr;
};

static int collect_cb(void *x, const char *line, size_t len, uint64_t off,
		      json_t *rec)
{
	struct collect_ctx *c = x;
	const char *r = json_string_value(json_object_get(rec, "run_id"));
	if (r && !strcmp(r, c->run_id))
		json_array_append(c->arr, rec);
	return 0;
}

int wd_trace_read_line(struct wd_trace *t, uint64_t seg, uint64_t off,
		       uint64_t len, json_t **rec)
{
	cleanup_free char *p = wd_trace_seg_path(t, seg);
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	/* the index's offset and length, checked against the segment: a
	 * damaged index row is a bad line, not a huge allocation */
	if (!wd_trace_span_ok(off, len, (uint64_t)st.st_size))
		return -EBADMSG;
	cleanup_free char *buf = wd_malloc(len + 1);
	ssize_t n = pread(fd, buf, len, off);
	if (n != (ssize_t)len)
		return n < 0 ? -errno : -EBADMSG;
	return wd_trace_check_line(buf, len, NULL, rec);
}

int wd_trace_run_records(struct wd_trace *t, const char *run_id, json_t **array,
			 struct wd_err *err)
{
	int r = wd_trace_visible(t);
	if (r < 0)
		return wd_err_set(err, r, "trace store unhealthy: %s",
				  strerror(-r));
	json_t *arr = json_array();
	if (!t->idx) {
		cleanup_free uint64_t *segs = NULL;
		size_t n;
		r = wd_trace_list_segments(t, &segs, &n);
		for (size_t i = 0; !r && i < n; i++) {
			cleanup_free char *p = wd_trace_seg_path(t, segs[i]);
			cleanup_free char *buf = NULL;
			size_t len;
			r = wd_read_file(p, &buf, &len);
			struct collect_ctx c = {run_id, arr};
			if (!r)
				wd_trace_scan_skip(buf, len, collect_cb, &c,
						   NULL);
		}
		if (r < 0) {
			json_decref(arr);
			return wd_err_set(err, r, "read segments: %s",
					  strerror(-r));
		}
		*array = arr;
		return 0;
	}
	pthread_mutex_lock(&t->idx_mu);
	sqlite3_stmt *st;
	sqlite3 *db = wd_idx_db(t->idx);
	if (sqlite3_prepare_v2(db,
			       "SELECT seg, off, len FROM records WHERE "
			       "run_id = ? ORDER BY seq",
			       -1, &st, NULL) != SQLITE_OK) {
		pthread_mutex_unlock(&t->idx_mu);
		json_decref(arr);
		return wd_err_set(err, -EIO, "index: %s", sqlite3_errmsg(db));
	}
	sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
	while (!r && sqlite3_step(st) == SQLITE_ROW) {
		json_t *rec;
		uint64_t seg = sqlite3_column_int64(st, 0);
		uint64_t off = sqlite3_column_int64(st, 1);
		r = wd_trace_read_line(t, seg, off, sqlite3_column_int64(st, 2),
				       &rec);
		if (r < 0)
			wd_err_set(
			    err, r,
			    "segment %016llu offset %llu: %s; run "
			    "'warden trace verify'",
			    (unsigned long long)seg, (unsigned long long)off,
			    r == -EBADMSG ? "damaged record" : strerror(-r));
		else
			json_array_append_new(arr, rec);
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&t->idx_mu);
	if (r < 0) {
		json_decref(arr);
		return r;
	}
	*array = arr;
	return 0;
}

static int local_blob(void *ctx, const char *ref, char **data, size_t *len,
		      struct wd_err *err)
{
	return wd_trace_get_blob(ctx, ref, data, len, err);
}

int wd_trace_step_payloads(struct wd_trace *t, const char *run_id, int64_t step,
			   const char *type, json_t **array, struct wd_err *err)
{
	json_t *recs;
	int r = wd_trace_run_records(t, run_id, &recs, err);
	if (r < 0)
		return r;
	r = wd_trace_records_payloads(recs, run_id, step, type, local_blob, t,
				      array, err);
	json_decref(recs);
	return r;
}

int wd_trace_records_payloads(json_t *recs, const char *run_id, int64_t step,
			      const char *type, wd_trace_blob_fn blob,
			      void *ctx, json_t **array, struct wd_err *err)
{
	/* a hash_only run's payloads are never handed out, by any path (the
	 * store's --state readers as well as wardend's): a blob with the same
	 * hash may be kept for another run that stored it */
	json_t *tr = json_object_get(json_array_get(recs, 0), "trace");
	const char *mode = json_string_value(json_object_get(tr, "payloads"));
	bool hash_only = mode && !strcmp(mode, "hash_only");
	json_t *out = json_array();
	bool found = false;
	size_t i;
	json_t *rec;
	json_array_foreach(recs, i, rec)
	{
		const char *ty =
		    json_string_value(json_object_get(rec, "type"));
		if (json_integer_value(json_object_get(rec, "step")) != step ||
		    !ty || (type && strcmp(type, ty)))
			continue;
		found = true;
		const char *k;
		json_t *v;
		json_object_foreach(rec, k, v)
		{
			const char *ref = json_string_value(v);
			if (!wd_trace_is_ref_key(k) || !wd_trace_ref_ok(ref))
				continue;
			json_t *o =
			    json_pack("{s:O?, s:s, s:s, s:s}", "seq",
				      json_object_get(rec, "seq"), "type", ty,
				      "field", k, "ref", ref);
			char *data = NULL;
			size_t len = 0;
			struct wd_err e = {0};
			if (hash_only)
				json_object_set_new(
				    o, "error",
				    json_string("hash_only run: payloads are "
						"not shown, only their "
						"hashes"));
			else if (blob(ctx, ref, &data, &len, &e) < 0)
				json_object_set_new(o, "error",
						    json_string(e.msg));
			else if (json_object_set_new(o, "payload",
						     json_stringn(data, len)))
				json_object_set_new(
				    o, "error",
				    json_sprintf("%zu bytes, not UTF-8 text",
						 len));
			free(data);
			json_array_append_new(out, o);
		}
	}
	if (!found) {
		json_decref(out);
		return wd_err_set(
		    err, -ENOENT, "run '%s' has no %s%srecord at step %lld",
		    run_id, type ? type : "", type ? " " : "", (long long)step);
	}
	*array = out;
	return 0;
}
