/* The index's queries behind warden trace ls / grep / cost: SQL over the
 * derived tables, rows as JSON (timestamps as ISO 8601). */
#include "trace/trace_int.h"

#include <string.h>

static json_t *col_json(sqlite3_stmt *st, int i)
{
	switch (sqlite3_column_type(st, i)) {
	case SQLITE_INTEGER:
		return json_integer(sqlite3_column_int64(st, i));
	case SQLITE_FLOAT:
		return json_real(sqlite3_column_double(st, i));
	case SQLITE_TEXT:
		return json_string((const char *)sqlite3_column_text(st, i));
	default:
		return json_null();
	}
}

static json_t *ts_json(sqlite3_stmt *st, int i)
{
	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return json_null();
	char b[40];
	wd_iso8601((uint64_t)sqlite3_column_int64(st, i) * 1000, b, sizeof(b));
	return json_string(b);
}

/* The reader's runs as a condition on runs' columns (uid, team): the
 * teams are bound as parameters after the others. */
static void reader_cond(struct wd_buf *sql, const struct wd_trace_reader *rd,
			const char **args, size_t *n)
{
	wd_buf_printf(sql, "(uid = %lld", (long long)rd->uid);
	if (rd->n_teams) {
		wd_buf_printf(sql, " OR team IN (");
		for (size_t i = 0; i < rd->n_teams; i++) {
			wd_buf_printf(sql, i ? ",?" : "?");
			args[(*n)++] = rd->teams[i];
		}
		wd_buf_printf(sql, ")");
	}
	wd_buf_printf(sql, ")");
}

static int run_query(struct wd_trace *t, struct wd_buf *sql, const char **args,
		     size_t nargs, json_t **array, struct wd_err *err,
		     const char *const *tscols)
{
	if (!t->idx)
		return wd_err_set(err, -EINVAL, "store opened without index");
	int r = wd_trace_visible(t);
	if (r < 0)
		return wd_err_set(err, r, "trace store unhealthy: %s",
				  strerror(-r));
	pthread_mutex_lock(&t->idx_mu);
	sqlite3 *db = wd_idx_db(t->idx);
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, sql->data, -1, &st, NULL) != SQLITE_OK) {
		r = wd_err_set(err, -EIO, "index query: %s",
			       sqlite3_errmsg(db));
		pthread_mutex_unlock(&t->idx_mu);
		return r;
	}
	for (size_t i = 0; i < nargs; i++)
		sqlite3_bind_text(st, i + 1, args[i], -1, SQLITE_STATIC);
	json_t *arr = json_array();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *o = json_object();
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			const char *name = sqlite3_column_name(st, c);
			bool is_ts = false;
			for (size_t k = 0; tscols[k]; k++)
				is_ts |= !strcmp(tscols[k], name);
			json_object_set_new(
			    o, name, is_ts ? ts_json(st, c) : col_json(st, c));
		}
		json_array_append_new(arr, o);
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&t->idx_mu);
	if (rc != SQLITE_DONE) {
		json_decref(arr);
		return wd_err_set(err, -EIO, "index query failed");
	}
	*array = arr;
	return 0;
}

int wd_trace_query_runs(struct wd_trace *t, const struct wd_trace_query *q,
			json_t **array, struct wd_err *err)
{
	static const char *const tscols[] = {"started", "ended", "last_ts",
					     NULL};
	struct wd_buf sql = {0};
	size_t nt = q->reader ? q->reader->n_teams : 0;
	cleanup_free const char **args = wd_calloc(8 + nt, sizeof(*args));
	size_t n = 0;
	wd_buf_printf(
	    &sql,
	    "SELECT run_id, agent, team, user, uid, model, status, "
	    "started, ended, last_ts, cost_nusd / 1e9 AS cost_usd, "
	    "input_tokens, "
	    "output_tokens, model_calls, steps, records, "
	    "flagged, payloads, retention_days, "
	    "payloads_dropped, cached_tokens, replay_of, replay_from, "
	    "replay_converged, replay_diverged_at, reason%s FROM runs "
	    "WHERE 1",
	    q->page ? ", coalesce(started, 0) AS page_started" : "");
#define F(field, col)                                                          \
	if (q->field) {                                                        \
		wd_buf_printf(&sql, " AND " col " = ?");                       \
		args[n++] = q->field;                                          \
	}
	F(agent, "agent");
	F(team, "team");
	F(user, "user");
	F(status, "status");
	F(replay_of, "replay_of");
#undef F
	if (q->tool) {
		wd_buf_printf(&sql, " AND run_id IN (SELECT run_id FROM "
				    "records WHERE tool = ?)");
		args[n++] = q->tool;
	}
	if (q->prompt_hash) {
		wd_buf_printf(&sql,
			      " AND run_id IN (SELECT run_id FROM records "
			      "WHERE seq IN (" WD_IDX_HKEY_SEQS
			      ") AND prompt_hash = ?)",
			      (long long)wd_idx_key(q->prompt_hash));
		args[n++] = q->prompt_hash;
	}
	if (q->result_hash) {
		wd_buf_printf(&sql,
			      " AND run_id IN (SELECT run_id FROM records "
			      "WHERE seq IN (" WD_IDX_HKEY_SEQS
			      ") AND result_hash = ?)",
			      (long long)wd_idx_key(q->result_hash));
		args[n++] = q->result_hash;
	}
	if (q->since_ns)
		wd_buf_printf(&sql, " AND started >= %llu",
			      (unsigned long long)(q->since_ns / 1000));
	if (q->reader) {
		wd_buf_printf(&sql, " AND ");
		reader_cond(&sql, q->reader, args, &n);
	}
	/* a page goes on after the previous page's last (start, run id):
	 * the order below, with an unknown start first as SQLite sorts it */
	if (q->page && q->after_run) {
		wd_buf_printf(&sql,
			      " AND (coalesce(started, 0) > %llu OR "
			      "(coalesce(started, 0) = %llu AND run_id > ?))",
			      (unsigned long long)q->after_started,
			      (unsigned long long)q->after_started);
		args[n++] = q->after_run;
	}
	wd_buf_printf(&sql, q->page ? " ORDER BY coalesce(started, 0), run_id"
				    : " ORDER BY started, run_id");
	if (q->limit)
		wd_buf_printf(&sql, " LIMIT %u", q->limit);
	int r = run_query(t, &sql, args, n, array, err, tscols);
	wd_buf_free(&sql);
	return r;
}

int wd_trace_query_records(struct wd_trace *t, const struct wd_trace_query *q,
			   json_t **array, struct wd_err *err)
{
	static const char *const tscols[] = {"ts", NULL};
	struct wd_buf sql = {0};
	size_t nt = q->reader ? q->reader->n_teams : 0;
	cleanup_free const char **args = wd_calloc(8 + nt, sizeof(*args));
	size_t n = 0;
	wd_buf_printf(&sql, "SELECT seq, run_id, step, type, tool, call_id, "
			    "status, prompt_hash, result_hash, ts, "
			    "refusal_check AS \"check\" FROM records WHERE 1");
#define F(field, col)                                                          \
	if (q->field) {                                                        \
		wd_buf_printf(&sql, " AND " col " = ?");                       \
		args[n++] = q->field;                                          \
	}
	F(tool, "tool");
	F(status, "status");
#undef F
	/* by the hash's key, then its text (a key may collide) */
	if (q->prompt_hash) {
		wd_buf_printf(&sql,
			      " AND seq IN (" WD_IDX_HKEY_SEQS
			      ") AND prompt_hash = ?",
			      (long long)wd_idx_key(q->prompt_hash));
		args[n++] = q->prompt_hash;
	}
	if (q->result_hash) {
		wd_buf_printf(&sql,
			      " AND seq IN (" WD_IDX_HKEY_SEQS
			      ") AND result_hash = ?",
			      (long long)wd_idx_key(q->result_hash));
		args[n++] = q->result_hash;
	}
	if (q->agent || q->team || q->user || q->reader) {
		wd_buf_printf(&sql, " AND run_id IN (SELECT run_id FROM runs "
				    "WHERE 1");
		if (q->agent) {
			wd_buf_printf(&sql, " AND agent = ?");
			args[n++] = q->agent;
		}
		if (q->team) {
			wd_buf_printf(&sql, " AND team = ?");
			args[n++] = q->team;
		}
		if (q->user) {
			wd_buf_printf(&sql, " AND user = ?");
			args[n++] = q->user;
		}
		if (q->reader) {
			wd_buf_printf(&sql, " AND ");
			reader_cond(&sql, q->reader, args, &n);
		}
		wd_buf_printf(&sql, ")");
	}
	if (q->since_ns)
		wd_buf_printf(&sql, " AND ts >= %llu",
			      (unsigned long long)(q->since_ns / 1000));
	if (q->after_seq)
		wd_buf_printf(&sql, " AND seq > %llu",
			      (unsigned long long)q->after_seq);
	wd_buf_printf(&sql, " ORDER BY seq");
	if (q->limit)
		wd_buf_printf(&sql, " LIMIT %u", q->limit);
	int r = run_query(t, &sql, args, n, array, err, tscols);
	wd_buf_free(&sql);
	return r;
}
