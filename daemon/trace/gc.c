/* Retention (seed 000 step 8: full traces 30 days, metadata 13 months):
 * payload blobs of runs past their retention_days are deleted unless the run
 * failed, is flagged, or never ended (a crash is a failure until someone
 * looks). Records stay; a `gc` record names what was dropped so `verify`
 * knows the blobs are gone on purpose and the index can say so. */
#include "trace/trace_int.h"

#include <string.h>

#define GC_OK_STATUS(s)                                                        \
	(!strcmp(s, "ok") || !strcmp(s, "completed") || !strcmp(s, "success"))

int wd_trace_gc(struct wd_trace *t, uint64_t now_ns, struct wd_err *err)
{
	if (!t->idx)
		return wd_err_set(err, -EINVAL, "store opened without index");
	if (t->o.read_only)
		return wd_err_set(err, -EROFS, "trace store opened read-only");
	int r = wd_trace_flush(t, err);
	if (r < 0)
		return r;
	if (!now_ns)
		now_ns = wd_wall_ns();
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
	    "coalesce(r.ended, 0), r.payloads_dropped FROM refs f JOIN runs r "
	    "ON r.run_id = f.run_id",
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
