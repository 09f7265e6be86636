/* The store's records as their segment lines, for a reader outside the
 * node that must be able to check the chain itself (the fleet's shipper,
 * fleet/ship.c): the bytes of each line exactly as written, found through
 * the index (seq -> segment, offset, length), with the refs each record
 * names and the payload mode of its run; and a blob's stored bytes. */
#include "trace/trace_int.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

/* Under idx_mu: the refs the index holds for seqs in (after, upto], into
 * each row's refs (by_seq: seq -> row). */
static int add_refs(sqlite3 *db, uint64_t after, uint64_t upto, json_t *by_seq)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db,
			       "SELECT seq, ref FROM allrefs WHERE seq > ?1 "
			       "AND seq <= ?2 AND id >= ?3 AND id < ?4 ORDER "
			       "BY seq, id",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)after);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)upto);
	/* the same range by id, the key of refs (seq * WD_IDXREC_MAXREFS +
	 * place, index.c) */
	sqlite3_bind_int64(st, 3,
			   (sqlite3_int64)(after + 1) * WD_IDXREC_MAXREFS);
	sqlite3_bind_int64(st, 4,
			   (sqlite3_int64)(upto + 1) * WD_IDXREC_MAXREFS);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		char key[24];
		snprintf(key, sizeof(key), "%lld", sqlite3_column_int64(st, 0));
		json_t *row = json_object_get(by_seq, key);
		if (!row)
			continue;
		json_array_append_new(
		    json_object_get(row, "refs"),
		    json_string((const char *)sqlite3_column_text(st, 1)));
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static const char *buf_line(json_t *row)
{
	return json_string_value(json_object_get(row, "line"));
}

/* A run_start's definitions {agent: {ref}, tools: {NAME: {ref}}, scopes:
 * {ref}, route: {ref}}: the blobs replay and `trace payload --policy` read,
 * named one level down (the index lists top-level *_ref values only). */
static void definition_refs(const char *line, json_t *refs)
{
	json_t *rec = json_loads(line, 0, NULL);
	json_t *defs = json_object_get(rec, "definitions");
	const char *k;
	json_t *v;
	json_object_foreach(defs, k, v)
	{
		const char *ref = json_string_value(json_object_get(v, "ref"));
		if (wd_trace_ref_ok(ref)) {
			json_array_append_new(refs, json_string(ref));
			continue;
		}
		const char *k2;
		json_t *v2;
		json_object_foreach(v, k2, v2)
		{
			ref = json_string_value(json_object_get(v2, "ref"));
			if (wd_trace_ref_ok(ref))
				json_array_append_new(refs, json_string(ref));
		}
	}
	json_decref(rec);
}

int wd_trace_lines(struct wd_trace *t, uint64_t after_seq, unsigned limit,
		   json_t **array, struct wd_err *err)
{
	if (!t->idx)
		return wd_err_set(err, -EINVAL, "store opened without index");
	json_t *rows = json_array(), *by_seq = json_object();
	pthread_mutex_lock(&t->idx_mu);
	sqlite3 *db = wd_idx_db(t->idx);
	sqlite3_stmt *st;
	int r = 0;
	if (sqlite3_prepare_v2(
		db,
		"SELECT r.seq, r.seg, r.off, r.len, r.ts, r.run_id, "
		"u.payloads, "
		"r.type "
		"FROM records r LEFT JOIN runs u ON u.run_id = r.run_id WHERE "
		"r.seq > ? ORDER BY r.seq LIMIT ?",
		-1, &st, NULL) != SQLITE_OK) {
		r = wd_err_set(err, -EIO, "index: %s", sqlite3_errmsg(db));
		goto out;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)after_seq);
	sqlite3_bind_int64(st, 2, limit ? (sqlite3_int64)limit : -1);
	/* one open segment at a time: a batch is mostly one segment */
	uint64_t fd_seg = 0, fd_size = 0;
	int fd = -1;
	uint64_t last = after_seq;
	int rc;
	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t seq = (uint64_t)sqlite3_column_int64(st, 0);
		uint64_t seg = (uint64_t)sqlite3_column_int64(st, 1);
		uint64_t off = (uint64_t)sqlite3_column_int64(st, 2);
		uint64_t len = (uint64_t)sqlite3_column_int64(st, 3);
		if (fd < 0 || seg != fd_seg) {
			if (fd >= 0)
				close(fd);
			cleanup_free char *p = wd_trace_seg_path(t, seg);
			fd = open(p, O_RDONLY | O_CLOEXEC);
			fd_seg = seg;
			struct stat sb;
			if (fd < 0 || fstat(fd, &sb) < 0) {
				r = wd_err_set(err, -errno, "%s: %s", p,
					       strerror(errno));
				break;
			}
			fd_size = (uint64_t)sb.st_size;
		}
		if (!wd_trace_span_ok(off, len, fd_size)) {
			r = wd_err_set(
			    err, -EBADMSG,
			    "index: seq %llu: offset %llu length "
			    "%llu outside segment %016llu",
			    (unsigned long long)seq, (unsigned long long)off,
			    (unsigned long long)len, (unsigned long long)seg);
			break;
		}
		char *buf = wd_malloc(len + 1);
		ssize_t n = pread(fd, buf, len, (off_t)off);
		if (n != (ssize_t)len) {
			free(buf);
			r = wd_err_set(err, n < 0 ? -errno : -EBADMSG,
				       "segment %016llu offset %llu: short "
				       "read",
				       (unsigned long long)seg,
				       (unsigned long long)off);
			break;
		}
		json_t *line = json_stringn(buf, len);
		free(buf);
		if (!line) {
			r = wd_err_set(err, -EBADMSG,
				       "segment %016llu offset %llu: not "
				       "UTF-8; run 'warden trace verify'",
				       (unsigned long long)seg,
				       (unsigned long long)off);
			break;
		}
		const char *pl = (const char *)sqlite3_column_text(st, 6);
		json_t *row =
		    json_pack("{s:I, s:I, s:s?, s:o, s:s?, s:[], s:[]}", "seq",
			      (json_int_t)seq, "ts_us",
			      (json_int_t)sqlite3_column_int64(st, 4), "run_id",
			      (const char *)sqlite3_column_text(st, 5), "line",
			      line, "payloads", pl, "refs", "def_refs");
		const char *type = (const char *)sqlite3_column_text(st, 7);
		if (type && !strcmp(type, "run_start"))
			definition_refs(buf_line(row),
					json_object_get(row, "def_refs"));
		char key[24];
		snprintf(key, sizeof(key), "%llu", (unsigned long long)seq);
		json_object_set(by_seq, key, row);
		json_array_append_new(rows, row);
		last = seq;
	}
	if (!r && rc != SQLITE_DONE) /* a batch cut short is no batch */
		r = wd_err_set(err, -EIO, "index: %s", sqlite3_errmsg(db));
	if (fd >= 0)
		close(fd);
	sqlite3_finalize(st);
	if (!r && last > after_seq && add_refs(db, after_seq, last, by_seq))
		r = wd_err_set(err, -EIO, "index refs: %s", sqlite3_errmsg(db));
out:
	pthread_mutex_unlock(&t->idx_mu);
	json_decref(by_seq);
	if (r) {
		json_decref(rows);
		return r;
	}
	*array = rows;
	return 0;
}

int wd_trace_blob_stored(struct wd_trace *t, const char *ref, char **data,
			 size_t *len)
{
	if (!wd_trace_ref_ok(ref))
		return -EINVAL;
	cleanup_free char *p = wd_trace_blob_path(t, ref + 7);
	return wd_read_file(p, data, len);
}
