/* Shared helpers for the trace store tests. */
#ifndef WD_TEST_TRACE_UTIL_H
#define WD_TEST_TRACE_UTIL_H

#include "trace/trace.h"

#include <dirent.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>

/* The temporary directories this process made (tt_cleanup() removes them,
 * and only them). */
static char *tt_dirs[64];
static unsigned tt_ndirs;

static __attribute__((unused)) char *tt_tmpdir(void)
{
	char tmpl[] = "/tmp/wd-trace-test.XXXXXX";
	char *d = mkdtemp(tmpl);
	if (d && tt_ndirs < WD_ARRAY_SIZE(tt_dirs))
		tt_dirs[tt_ndirs++] = wd_strdup(d);
	return d ? wd_strdup(d) : NULL;
}

static __attribute__((unused)) void tt_cleanup(void)
{
	for (unsigned i = 0; i < tt_ndirs; i++) {
		wd_rm_rf(tt_dirs[i]);
		free(tt_dirs[i]);
	}
	tt_ndirs = 0;
}

static __attribute__((unused)) json_t *tt_rec(const char *run, int step,
					      const char *type)
{
	return json_pack("{s:s, s:i, s:s}", "run_id", run, "step", step, "type",
			 type);
}

static __attribute__((unused)) int tt_append(struct wd_trace *t, json_t *r,
					     bool durable)
{
	struct wd_err err = {0};
	int e = wd_trace_append(t, r, durable, NULL, &err);
	if (e < 0)
		printf("# append: %s\n", err.msg);
	json_decref(r);
	return e;
}

/* Runs sql on the SQLite file at path (an index made by hand in a test);
 * SQLITE_OK or the error code. */
static __attribute__((unused)) int tt_db_exec(const char *path, const char *sql)
{
	sqlite3 *db;
	int rc = sqlite3_open(path, &db);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

/* index files set aside as damaged (index.db*.broken-*) */
/* The first column of the first row of a query on an index file; -1 */
static __attribute__((unused)) int tt_db_int(const char *dbp, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int v = -1;
	if (sqlite3_open(dbp, &db) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return v;
}

static __attribute__((unused)) int tt_count_broken(const char *dir)
{
	char *p = wd_asprintf("%s/trace", dir);
	DIR *d = opendir(p);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strstr(e->d_name, ".broken-") != NULL;
	if (d)
		closedir(d);
	free(p);
	return n;
}

/* All rows of the index tables, as text, for comparisons. */
static __attribute__((unused)) char *tt_dump_index(const char *state)
{
	char *path = wd_asprintf("%s/trace/index.db", state);
	sqlite3 *db;
	struct wd_buf b = {0};
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK) {
		free(path);
		return NULL;
	}
	free(path);
	static const char *const q[] = {
	    "SELECT * FROM records ORDER BY seq",
	    "SELECT * FROM runs ORDER BY run_id",
	    "SELECT * FROM refs ORDER BY ref, seq",
	    "SELECT * FROM hkeys ORDER BY b, key, seq",
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(q); i++) {
		sqlite3_stmt *st;
		if (sqlite3_prepare_v2(db, q[i], -1, &st, NULL) != SQLITE_OK)
			continue;
		while (sqlite3_step(st) == SQLITE_ROW) {
			for (int c = 0; c < sqlite3_column_count(st); c++) {
				const unsigned char *s =
				    sqlite3_column_text(st, c);
				wd_buf_printf(&b, "%s|",
					      s ? (const char *)s : "NULL");
			}
			wd_buf_append(&b, "\n", 1);
		}
		sqlite3_finalize(st);
		wd_buf_append(&b, "--\n", 3);
	}
	sqlite3_close(db);
	return b.data;
}

static __attribute__((unused)) bool tt_file_has(const char *path,
						const char *needle)
{
	char *d = NULL;
	size_t n;
	if (wd_read_file(path, &d, &n) < 0)
		return false;
	bool r = memmem(d, n, needle, strlen(needle)) != NULL;
	free(d);
	return r;
}

#endif
