/* libsqlite3 for the CLI, loaded when a verb first asks for it.
 *
 * The trace index (trace/index.c) is SQLite; a one-shot `warden exec`
 * never opens it. Bound at start, libsqlite3 (and libcrypto, see
 * cli/crypto_lazy.c) cost ~1 ms of CPU in the dynamic loader on every
 * start of `warden` (an empty program linked with both: 1.53 ms against
 * 0.49 ms without them, perf stat -r 100). So, as with libcurl
 * (cli/curl_lazy.c), the CLI is linked without -lsqlite3 and these
 * definitions of the calls libwarden makes load libsqlite3.so.0 at the
 * first one; wardend and the tests link it directly.
 *
 * A library the CLI was built against and cannot load ends the process
 * at the first call, as the loader would have at start (cli/lazy.c):
 * nothing here answers in SQLite's place. */
#include "common/lazy.h"

#include <sqlite3.h>
#include <stdarg.h>

enum {
	BIND_INT,
	BIND_INT64,
	BIND_NULL,
	BIND_TEXT,
	BUSY_TIMEOUT,
	CHANGES,
	CLEAR_BINDINGS,
	CLOSE,
	COLUMN_COUNT,
	COLUMN_DOUBLE,
	COLUMN_INT,
	COLUMN_INT64,
	COLUMN_NAME,
	COLUMN_TEXT,
	COLUMN_TYPE,
	CONFIG,
	DB_RELEASE_MEMORY,
	ERRMSG,
	EXEC,
	FINALIZE,
	FREE,
	OPEN_V2,
	PREPARE_V2,
	PREPARE_V3,
	RESET,
	STEP,
	N_SYM
};
static const char *const names[] = {
    "sqlite3_bind_int",
    "sqlite3_bind_int64",
    "sqlite3_bind_null",
    "sqlite3_bind_text",
    "sqlite3_busy_timeout",
    "sqlite3_changes",
    "sqlite3_clear_bindings",
    "sqlite3_close",
    "sqlite3_column_count",
    "sqlite3_column_double",
    "sqlite3_column_int",
    "sqlite3_column_int64",
    "sqlite3_column_name",
    "sqlite3_column_text",
    "sqlite3_column_type",
    "sqlite3_config",
    "sqlite3_db_release_memory",
    "sqlite3_errmsg",
    "sqlite3_exec",
    "sqlite3_finalize",
    "sqlite3_free",
    "sqlite3_open_v2",
    "sqlite3_prepare_v2",
    "sqlite3_prepare_v3",
    "sqlite3_reset",
    "sqlite3_step",
};
WD_LAZY_LIBRARY(wd_lazy_need, "libsqlite3.so.0");

/* every call below loads the library first (ready() returns only once it
 * is loaded), so a statement or handle can only be one SQLite made */
#define S(T, S) (ready(), F(T, S))

int sqlite3_bind_int(sqlite3_stmt *s, int i, int v)
{
	return S(int (*)(sqlite3_stmt *, int, int), BIND_INT)(s, i, v);
}

int sqlite3_bind_int64(sqlite3_stmt *s, int i, sqlite3_int64 v)
{
	return S(int (*)(sqlite3_stmt *, int, sqlite3_int64), BIND_INT64)(s, i,
									  v);
}

int sqlite3_bind_null(sqlite3_stmt *s, int i)
{
	return S(int (*)(sqlite3_stmt *, int), BIND_NULL)(s, i);
}

int sqlite3_bind_text(sqlite3_stmt *s, int i, const char *v, int n,
		      void (*d)(void *))
{
	return S(
	    int (*)(sqlite3_stmt *, int, const char *, int, void (*)(void *)),
	    BIND_TEXT)(s, i, v, n, d);
}

int sqlite3_busy_timeout(sqlite3 *db, int ms)
{
	return S(int (*)(sqlite3 *, int), BUSY_TIMEOUT)(db, ms);
}

int sqlite3_changes(sqlite3 *db)
{
	return S(int (*)(sqlite3 *), CHANGES)(db);
}

int sqlite3_clear_bindings(sqlite3_stmt *s)
{
	return S(int (*)(sqlite3_stmt *), CLEAR_BINDINGS)(s);
}

int sqlite3_close(sqlite3 *db)
{
	return S(int (*)(sqlite3 *), CLOSE)(db);
}

int sqlite3_column_count(sqlite3_stmt *s)
{
	return S(int (*)(sqlite3_stmt *), COLUMN_COUNT)(s);
}

double sqlite3_column_double(sqlite3_stmt *s, int i)
{
	return S(double (*)(sqlite3_stmt *, int), COLUMN_DOUBLE)(s, i);
}

int sqlite3_column_int(sqlite3_stmt *s, int i)
{
	return S(int (*)(sqlite3_stmt *, int), COLUMN_INT)(s, i);
}

sqlite3_int64 sqlite3_column_int64(sqlite3_stmt *s, int i)
{
	return S(sqlite3_int64(*)(sqlite3_stmt *, int), COLUMN_INT64)(s, i);
}

const char *sqlite3_column_name(sqlite3_stmt *s, int i)
{
	return S(const char *(*)(sqlite3_stmt *, int), COLUMN_NAME)(s, i);
}

const unsigned char *sqlite3_column_text(sqlite3_stmt *s, int i)
{
	return S(const unsigned char *(*)(sqlite3_stmt *, int), COLUMN_TEXT)(s,
									     i);
}

int sqlite3_column_type(sqlite3_stmt *s, int i)
{
	return S(int (*)(sqlite3_stmt *, int), COLUMN_TYPE)(s, i);
}

/* The verb says what follows (sqlite3.h): none for the threading modes,
 * one int for the switches below. Any other verb is refused
 * (SQLITE_MISUSE, as SQLite answers a verb it does not know), never
 * passed on with an argument read as the wrong type. */
int sqlite3_config(int op, ...)
{
	int (*config)(int, ...) = S(int (*)(int, ...), CONFIG);
	va_list ap;
	int rc;
	va_start(ap, op);
	switch (op) {
	case SQLITE_CONFIG_SINGLETHREAD:
	case SQLITE_CONFIG_MULTITHREAD:
	case SQLITE_CONFIG_SERIALIZED:
		rc = config(op);
		break;
	case SQLITE_CONFIG_MEMSTATUS:
	case SQLITE_CONFIG_URI:
	case SQLITE_CONFIG_COVERING_INDEX_SCAN:
	case SQLITE_CONFIG_SMALL_MALLOC:
	case SQLITE_CONFIG_STMTJRNL_SPILL:
		rc = config(op, va_arg(ap, int));
		break;
	default:
		rc = SQLITE_MISUSE;
	}
	va_end(ap);
	return rc;
}

int sqlite3_db_release_memory(sqlite3 *db)
{
	return S(int (*)(sqlite3 *), DB_RELEASE_MEMORY)(db);
}

const char *sqlite3_errmsg(sqlite3 *db)
{
	return S(const char *(*)(sqlite3 *), ERRMSG)(db);
}

int sqlite3_exec(sqlite3 *db, const char *sql,
		 int (*cb)(void *, int, char **, char **), void *arg,
		 char **err)
{
	return S(int (*)(sqlite3 *, const char *,
			 int (*)(void *, int, char **, char **), void *,
			 char **),
		 EXEC)(db, sql, cb, arg, err);
}

int sqlite3_finalize(sqlite3_stmt *s)
{
	return S(int (*)(sqlite3_stmt *), FINALIZE)(s);
}

void sqlite3_free(void *p)
{
	S(void (*)(void *), FREE)(p);
}

int sqlite3_open_v2(const char *path, sqlite3 **db, int flags, const char *vfs)
{
	return S(int (*)(const char *, sqlite3 **, int, const char *),
		 OPEN_V2)(path, db, flags, vfs);
}

int sqlite3_prepare_v2(sqlite3 *db, const char *sql, int n, sqlite3_stmt **s,
		       const char **tail)
{
	return S(int (*)(sqlite3 *, const char *, int, sqlite3_stmt **,
			 const char **),
		 PREPARE_V2)(db, sql, n, s, tail);
}

int sqlite3_prepare_v3(sqlite3 *db, const char *sql, int n, unsigned int flags,
		       sqlite3_stmt **s, const char **tail)
{
	return S(int (*)(sqlite3 *, const char *, int, unsigned int,
			 sqlite3_stmt **, const char **),
		 PREPARE_V3)(db, sql, n, flags, s, tail);
}

int sqlite3_reset(sqlite3_stmt *s)
{
	return S(int (*)(sqlite3_stmt *), RESET)(s);
}

int sqlite3_step(sqlite3_stmt *s)
{
	return S(int (*)(sqlite3_stmt *), STEP)(s);
}
