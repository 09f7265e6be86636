/* Retention (seed 000 step 8: full traces 30 days, metadata 13 months).
 *
 * Payloads: blobs of runs past their retention_days are deleted unless the
 * run failed, is flagged, or never ended (a crash is a failure until someone
 * looks). Records stay; a `gc` record names what was dropped so `verify`
 * knows the blobs are gone on purpose and the index can say so.
 *
 * Metadata: whole segments whose records are all older than metadata_days
 * (default 395, 13 months) are removed, failed and flagged runs included
 * (their payloads outlive the 30 days, their metadata does not outlive the
 * 13 months: retention is a governance decision, not a per-run one). Only
 * a prefix of the segments goes (the chain stays one piece), never the last
 * one (the writer's), and runs stay whole: the prefix stops before a segment
 * holding a record of a run that has records (other than `gc` ones) in a
 * kept segment, so a run's metadata goes when all of it is past retention.
 * First a `gc` record (run_id "trace-gc", reason "metadata_retention") is
 * made durable naming the dropped segments, their seq range and the hash of
 * the last dropped record: the first kept record's prev; verify accepts a
 * chain that starts there. Then the segments go, with the blobs only their
 * records named, and their rows in the index; the runs touched are
 * recomputed from their remaining records, so the index equals one rebuilt
 * from the remaining segments.
 *
 * Blobs are shared by content: a record appended by another process while
 * gc runs may name a blob gc is deleting. Run gc where the daemon runs it,
 * or while no run writes (the CLI on a quiet store). */
#include "trace/trace_int.h"

#include "common/log.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>

#define GC_OK_STATUS(s)                                                        \
	(!strcmp(s, "ok") || !strcmp(s, "completed") || !strcmp(s, "success"))

/* Payload retention: returns the number of blobs deleted or -errno. */
static int gc_payloads(struct wd_trace *t, uint64_t now_ns, struct wd_err *err)
{
	int r;
	uint64_t now_us = now_ns / 1000;

	/* expired: ended, ok, unflagged, retention set and past, not yet done
	 */
	json_t *expired = json_object(); /* run_id -> [refs] */
	json_t *kept = json_object();	 /* refs still needed */
	pthread_mutex_lock(&t->idx_mu);
	sqlite3 *db = wd_idx_db(t->idx);
	sqlite3_stmt *st;
	r = sqlite3_prepare_v2(
	    db,
	    "SELECT r.run_id, f.ref, r.status, r.flagged, r.retention_days, "
	    "coalesce(r.ended, 0), r.payloads_dropped FROM allrefs f JOIN runs "
	    "r ON r.run_id = f.run_id ORDER BY f.id",
	    -1, &st, NULL);
	if (r != SQLITE_OK) {
		pthread_mutex_unlock(&t->idx_mu);
		json_decref(expired);
		json_decref(kept);
		return wd_err_set(err, -EIO, "gc query: %s",
				  sqlite3_errmsg(db));
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *run = (const char *)sqlite3_column_text(st, 0);
		const char *ref = (const char *)sqlite3_column_text(st, 1);
		const char *status = (const char *)sqlite3_column_text(st, 2);
		bool flagged = sqlite3_column_int(st, 3);
		bool has_ret = sqlite3_column_type(st, 4) != SQLITE_NULL;
		int64_t days = sqlite3_column_int64(st, 4);
		uint64_t ended = sqlite3_column_int64(st, 5);
		bool dropped = sqlite3_column_int(st, 6);
		bool expire = has_ret && ended && status &&
			      GC_OK_STATUS(status) && !flagged &&
			      ended + (uint64_t)days * 86400000000ull < now_us;
		if (dropped)
			continue;
		if (!expire) {
			json_object_set_new(kept, ref, json_true());
			continue;
		}
		json_t *a = json_object_get(expired, run);
		if (!a) {
			a = json_array();
			json_object_set_new(expired, run, a);
		}
		json_array_append_new(a, json_string(ref));
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&t->idx_mu);

	int deleted = 0;
	const char *run;
	json_t *refs;
	json_object_foreach(expired, run, refs)
	{
		json_t *gone = json_array();
		size_t i;
		json_t *ref;
		json_array_foreach(refs, i, ref)
		{
			const char *s = json_string_value(ref);
			if (json_object_get(kept, s))
				continue; /* shared with a retained run */
			cleanup_free char *p = wd_trace_blob_path(t, s + 7);
			if (unlink(p) == 0)
				deleted++;
			else if (errno != ENOENT) {
				r = -errno;
				json_decref(gone);
				goto out;
			}
			json_array_append(gone, ref);
		}
		json_t *rec = json_pack("{s:s, s:i, s:s, s:o, s:s}", "run_id",
					run, "step", 0, "type", "gc", "refs",
					gone, "reason", "retention");
		r = wd_trace_append(t, rec, true, NULL, err);
		json_decref(rec);
		if (r < 0)
			goto out;
	}
	r = deleted;
out:
	json_decref(expired);
	json_decref(kept);
	if (r < 0 && err && !err->msg[0])
		wd_err_set(err, r, "gc: %s", strerror(-r));
	return r;
}

/* Under idx_mu: one integer from a query with ?1, ?2 bound (or -1). */
static int64_t q_int(sqlite3 *db, const char *sql, int64_t a, int64_t b,
		     bool *null)
{
	sqlite3_stmt *st;
	int64_t v = -1;
	if (null)
		*null = true;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) != SQLITE_NULL) {
		v = sqlite3_column_int64(st, 0);
		if (null)
			*null = false;
	}
	sqlite3_finalize(st);
	return v;
}

/* Under idx_mu: how many of the oldest segments may go (0 = none). */
static size_t droppable(sqlite3 *db, const uint64_t *segs, size_t n,
			uint64_t cutoff_us)
{
	size_t k = 0;
	int64_t reach = 0; /* highest seq of a run seen so far */
	for (size_t i = 0; i + 1 < n; i++) {
		uint64_t lo = segs[i], hi = segs[i + 1];
		bool null;
		int64_t newest = q_int(db,
				       "SELECT max(ts) FROM records WHERE seq "
				       ">= ?1 AND seq < ?2",
				       lo, hi, &null);
		if (null || newest < 0 || (uint64_t)newest >= cutoff_us)
			break;
		int64_t m = q_int(db,
				  "SELECT max(seq) FROM records WHERE type != "
				  "'gc' AND run_id IN (SELECT run_id FROM "
				  "records WHERE seq >= ?1 AND seq < ?2 AND "
				  "type != 'gc')",
				  lo, hi, &null);
		if (!null && m > reach)
			reach = m;
		if ((uint64_t)reach < hi)
			k = i + 1; /* every run seen so far ends before hi */
	}
	return k;
}

struct last_ctx {
	uint64_t seq;
	char hash[65];
	bool any;
};

static int last_cb(void *x, const char *line, size_t len, uint64_t off,
		   json_t *rec)
{
	struct last_ctx *c = x;
	c->seq = json_integer_value(json_object_get(rec, "seq"));
	wd_sha256_hex(line, len, c->hash);
	c->any = true;
	return 0;
}

static int exec_sql(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* Under idx_mu, after the segments before seq `keep` are gone: their rows
 * go, and every run they touched is recomputed from its remaining records
 * (read back from the segments) exactly as a rebuild would. */
static int unindex(struct wd_trace *t, uint64_t keep)
{
	sqlite3 *db = wd_idx_db(t->idx);
	char sql[768];
	int r = wd_idx_begin(t->idx);
	if (r < 0)
		return r;
	snprintf(sql, sizeof(sql),
		 "DROP TABLE IF EXISTS temp.gc_runs; CREATE TEMP TABLE "
		 "gc_runs AS SELECT DISTINCT run_id FROM records WHERE seq < "
		 "%llu; DROP TABLE IF EXISTS temp.gc_readd; CREATE TEMP TABLE "
		 "gc_readd AS SELECT seq, seg, off, len, ts FROM records "
		 "WHERE seq >= %llu AND run_id IN (SELECT run_id FROM "
		 "gc_runs) ORDER BY seq",
		 (unsigned long long)keep, (unsigned long long)keep);
	r = exec_sql(db, sql);
	/* hkeys: by its key's first column, the bucket (seq >> shift); the
	 * re-added records' rows stay (wd_idx_add adds them once) */
	snprintf(sql, sizeof(sql),
		 "DELETE FROM records WHERE seq < %llu OR seq IN (SELECT seq "
		 "FROM gc_readd); DELETE FROM refs WHERE id < %llu * %d; "
		 "DELETE FROM refs WHERE id >= (SELECT min(seq) FROM gc_readd) "
		 "* %d AND seq IN (SELECT seq FROM gc_readd); DELETE FROM runs "
		 "WHERE run_id IN (SELECT run_id FROM gc_runs); DELETE FROM "
		 "hkeys WHERE b <= %llu >> %d AND seq < %llu",
		 (unsigned long long)keep, (unsigned long long)keep,
		 WD_IDXREC_MAXREFS, WD_IDXREC_MAXREFS, (unsigned long long)keep,
		 WD_IDX_HKEY_SHIFT, (unsigned long long)keep);
	if (!r)
		r = exec_sql(db, sql);
	sqlite3_stmt *st = NULL;
	if (!r && sqlite3_prepare_v2(db,
				     "SELECT seq, seg, off, len, ts FROM "
				     "gc_readd ORDER BY seq",
				     -1, &st, NULL) != SQLITE_OK)
		r = -EIO;
	while (!r && sqlite3_step(st) == SQLITE_ROW) {
		uint64_t seq = sqlite3_column_int64(st, 0);
		uint64_t seg = sqlite3_column_int64(st, 1);
		uint64_t off = sqlite3_column_int64(st, 2);
		uint64_t len = sqlite3_column_int64(st, 3);
		uint64_t ts = sqlite3_column_int64(st, 4);
		json_t *rec = NULL;
		r = wd_trace_read_line(t, seg, off, len, &rec);
		if (r < 0)
			break;
		struct wd_idxrec *f = wd_idx_extract(rec);
		r = wd_idx_add(t->idx, seq, seg, off, len, ts, f);
		free(f);
		json_decref(rec);
	}
	sqlite3_finalize(st);
	if (r < 0) {
		wd_idx_rollback(t->idx);
		return r;
	}
	r = wd_idx_commit(t->idx);
	exec_sql(db, "DROP TABLE IF EXISTS temp.gc_runs; DROP TABLE IF EXISTS "
		     "temp.gc_readd");
	return r;
}

/* Metadata retention; see the top of this file. */
static int gc_metadata(struct wd_trace *t, uint64_t now_ns, unsigned days,
		       struct wd_trace_gc_stats *stats, struct wd_err *err)
{
	uint64_t span = (uint64_t)days * 86400000000ull;
	uint64_t now_us = now_ns / 1000;
	if (now_us <= span)
		return 0;
	uint64_t cutoff = now_us - span;
	cleanup_free uint64_t *segs = NULL;
	size_t n;
	int r = wd_trace_list_segments(t, &segs, &n);
	if (r < 0)
		return wd_err_set(err, r, "%s: %s", t->segdir, strerror(-r));
	pthread_mutex_lock(&t->idx_mu);
	sqlite3 *db = wd_idx_db(t->idx);
	size_t k = droppable(db, segs, n, cutoff);
	uint64_t keep = k ? segs[k] : 0;
	int64_t nrec =
	    k ? q_int(db, "SELECT count(*) FROM records WHERE seq < ?1", keep,
		      0, NULL)
	      : 0;
	/* the blobs only dropped records name */
	json_t *blobs = json_array();
	sqlite3_stmt *st;
	if (k && sqlite3_prepare_v2(db,
				    "SELECT ref FROM allrefs WHERE seq < ?1 "
				    "AND id < ?2 AND ref NOT IN (SELECT ref "
				    "FROM allrefs WHERE seq >= ?1 AND id >= "
				    "?2) GROUP BY ref ORDER BY min(id)",
				    -1, &st, NULL) == SQLITE_OK) {
		/* the same bound twice: by seq (records' key) and by id
		 * (refs', seq * WD_IDXREC_MAXREFS + place, index.c) */
		sqlite3_bind_int64(st, 1, (int64_t)keep);
		sqlite3_bind_int64(st, 2, (int64_t)keep * WD_IDXREC_MAXREFS);
		while (sqlite3_step(st) == SQLITE_ROW)
			json_array_append_new(
			    blobs,
			    json_string(
				(const char *)sqlite3_column_text(st, 0)));
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&t->idx_mu);
	if (!k) {
		json_decref(blobs);
		return 0;
	}

	/* the last dropped record: the first kept one's prev */
	struct last_ctx lc = {0};
	{
		cleanup_free char *p = wd_trace_seg_path(t, segs[k - 1]);
		cleanup_free char *buf = NULL;
		size_t len;
		r = wd_read_file(p, &buf, &len);
		if (r < 0) {
			json_decref(blobs);
			return wd_err_set(err, r, "%s: %s", p, strerror(-r));
		}
		wd_trace_scan_skip(buf, len, last_cb, &lc, NULL);
	}
	if (!lc.any) {
		json_decref(blobs);
		return wd_err_set(err, -EBADMSG,
				  "gc: segment %016llu has no readable record; "
				  "run 'warden trace verify'",
				  (unsigned long long)segs[k - 1]);
	}
	json_t *names = json_array();
	for (size_t i = 0; i < k; i++) {
		char b[40];
		snprintf(b, sizeof(b), "%016llu" WD_SEG_SUFFIX,
			 (unsigned long long)segs[i]);
		json_array_append_new(names, json_string(b));
	}
	char last_ref[WD_TRACE_REF_LEN];
	memcpy(last_ref, "sha256:", 7);
	memcpy(last_ref + 7, lc.hash, 65);
	json_t *rec = json_pack(
	    "{s:s, s:i, s:s, s:s, s:i, s:o, s:I, s:I, s:s, s:I, s:I}", "run_id",
	    "trace-gc", "step", 0, "type", "gc", "reason", "metadata_retention",
	    "metadata_days", (int)days, "segments", names, "first_seq",
	    (json_int_t)segs[0], "last_seq", (json_int_t)lc.seq, "last_hash",
	    last_ref, "records", (json_int_t)nrec, "blobs",
	    (json_int_t)json_array_size(blobs));
	/* durable before anything goes: a crash after it leaves segments a
	 * later gc removes again; the reverse would leave a chain that
	 * starts nowhere */
	r = wd_trace_append(t, rec, true, NULL, err);
	json_decref(rec);
	if (r < 0) {
		json_decref(blobs);
		return r;
	}
	for (size_t i = 0; i < k; i++) {
		cleanup_free char *p = wd_trace_seg_path(t, segs[i]);
		if (unlink(p) < 0 && errno != ENOENT) {
			r = -errno;
			json_decref(blobs);
			return wd_err_set(err, r, "gc: %s: %s", p,
					  strerror(-r));
		}
	}
	/* what open cut or set aside from those segments goes with them */
	DIR *d = opendir(t->segdir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l <= 16 + strlen(WD_SEG_SUFFIX) + 1 ||
		    strspn(e->d_name, "0123456789") != 16 ||
		    strncmp(e->d_name + 16, WD_SEG_SUFFIX ".",
			    strlen(WD_SEG_SUFFIX) + 1) ||
		    strtoull(e->d_name, NULL, 10) >= keep)
			continue;
		unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d) {
		fsync(dirfd(d));
		closedir(d);
	}
	size_t i;
	json_t *ref;
	json_array_foreach(blobs, i, ref)
	{
		cleanup_free char *p =
		    wd_trace_blob_path(t, json_string_value(ref) + 7);
		if (unlink(p) == 0)
			stats->blobs++;
	}
	json_decref(blobs);
	pthread_mutex_lock(&t->idx_mu);
	r = unindex(t, keep);
	pthread_mutex_unlock(&t->idx_mu);
	if (r < 0)
		return wd_err_set(err, r,
				  "gc: index update failed; run 'warden trace "
				  "reindex'");
	stats->segments += k;
	stats->records += nrec;
	wd_info("trace gc: %zu segment(s) before seq %llu past metadata "
		"retention (%u days) removed",
		k, (unsigned long long)keep, days);
	return 0;
}

int wd_trace_gc_ex(struct wd_trace *t, const struct wd_trace_gc_opts *o,
		   struct wd_trace_gc_stats *stats, struct wd_err *err)
{
	struct wd_trace_gc_stats dummy;
	if (!stats)
		stats = &dummy;
	*stats = (struct wd_trace_gc_stats){0};
	if (!t->idx)
		return wd_err_set(err, -EINVAL, "store opened without index");
	if (t->o.read_only)
		return wd_err_set(err, -EROFS, "trace store opened read-only");
	int r = wd_trace_flush(t, err);
	if (r < 0)
		return r;
	uint64_t now_ns = o && o->now_ns ? o->now_ns : wd_wall_ns();
	unsigned days =
	    o && o->metadata_days ? o->metadata_days : WD_TRACE_METADATA_DAYS;
	if (!(o && o->keep_metadata)) {
		r = gc_metadata(t, now_ns, days, stats, err);
		if (r < 0)
			return r;
	}
	r = gc_payloads(t, now_ns, err);
	if (r < 0)
		return r;
	stats->blobs += r;
	return 0;
}

int wd_trace_gc(struct wd_trace *t, uint64_t now_ns, struct wd_err *err)
{
	struct wd_trace_gc_opts o = {.now_ns = now_ns};
	struct wd_trace_gc_stats st;
	int r = wd_trace_gc_ex(t, &o, &st, err);
	return r < 0 ? r : (int)st.blobs;
}
