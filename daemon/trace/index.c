/* The SQLite index: derived from the segments alone. Every row can be
 * recomputed by wd_trace_reindex(); wd_idx_add() is idempotent (seq is the
 * key), so the daemon's live indexing and a CLI's catch-up may overlap.
 * synchronous=OFF: losing index pages in a power cut is repaired by the
 * catch-up at the next open, the segments being the truth. */
#include "trace/records.h"
#include "trace/trace_int.h"
#include "common/log.h"

#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
	S_REC,
	S_RUN_NEW,
	S_RUN_START,
	S_RUN_END,
	S_RUN_FLAG,
	S_RUN_GC,
	S_REF,
	S_TAIL,
	S_RUN_KNOWN,
	S_HKEY,
	S_HKEYS, /* HKEY_ROWS rows at once */
	S_RECS,	 /* REC_ROWS records at once */
	S_N
};

static const char *const sqls[S_N] = {
    [S_REC] = "INSERT OR IGNORE INTO records(seq, seg, off, len, ts, "
	      "run_id, step, type, tool, call_id, status, prompt_hash, "
	      "result_hash, refusal_check, ref0) "
	      "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    /* one statement per run and transaction for the run's aggregates */
    [S_RUN_NEW] =
	"INSERT INTO runs(run_id, status, started, last_ts, steps, "
	"records, input_tokens, output_tokens, cost_nusd, "
	"model_calls, model, cached_tokens) VALUES(?1, 'running', "
	"?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT(run_id) "
	"DO UPDATE SET cached_tokens = cached_tokens + "
	"excluded.cached_tokens, "
	"last_ts = max(last_ts, excluded.last_ts), steps = "
	"max(steps, excluded.steps), records = records + "
	"excluded.records, input_tokens = input_tokens + "
	"excluded.input_tokens, output_tokens = output_tokens + "
	"excluded.output_tokens, cost_nusd = cost_nusd + "
	"excluded.cost_nusd, model_calls = model_calls + "
	"excluded.model_calls, model = coalesce(model, "
	"excluded.model)",
    [S_RUN_START] = "UPDATE runs SET agent = ?2, team = ?3, user = ?4, "
		    "model = coalesce(?5, model), started = ?6, payloads = "
		    "?7, retention_days = ?8, uid = ?9, replay_of = ?10, "
		    "replay_from = ?11 WHERE run_id = ?1",
    [S_RUN_END] = "UPDATE runs SET status = ?2, ended = ?3, flagged = "
		  "max(flagged, ?4), cost_nusd = coalesce(?5, cost_nusd), "
		  "reason = ?6, replay_converged = ?7, replay_diverged_at = "
		  "?8 WHERE run_id = ?1",
    [S_RUN_FLAG] = "UPDATE runs SET flagged = 1 WHERE run_id = ?1",
    [S_RUN_GC] = "UPDATE runs SET payloads_dropped = 1 WHERE run_id = ?1",
    [S_REF] = "INSERT OR IGNORE INTO refs(id, seq, ref, run_id) "
	      "VALUES(?,?,?,?)",
    [S_TAIL] = "SELECT seq, seg, off + len + 1 FROM records ORDER BY seq "
	       "DESC LIMIT 1",
    [S_RUN_KNOWN] = "SELECT 1 FROM runs WHERE run_id = ?1",
    [S_HKEY] = "INSERT OR IGNORE INTO hkeys(b, key, seq) VALUES(?1 "
	       ">> " WD_IDX_HKEY_SHIFT_S ", ?2, ?1)",
};

/* The index format: an index.db of another version (PRAGMA user_version) is
 * emptied at open and rebuilt from the segments by the catch-up.
 * 1 (user_version 0): hash columns indexed as text; refs keyed by ref.
 * 2: hashes looked up by an 8-byte key (wd_idx_key()); refs keyed by seq.
 * 3: runs.cached_tokens (warden cost: cached vs uncached input).
 * 4: runs.uid, the uid run_start records (trace reads are authorised by
 *    uid, never by the user name: policy/users.h wd_users_may_read_run);
 *    the rebuild reads it back from each run's run_start.
 * 5: runs.replay_of/replay_from (run_start.replay_of) and
 *    replay_converged/replay_diverged_at (run_end.replay): a run's replays
 *    are found from the index, without reading (and, through wardend,
 *    recording a payload_read in) every other run; runs.reason (run_end)
 *    and records.refusal_check (a refused tool_result's broker check):
 *    `warden trace failures` groups from the index alone.
 * 6: records.ref0, a record's first distinct ref, in its own row; refs
 *    holds only the others (a record names one ref mostly: a row and a
 *    statement less per record, ~2 us of the index thread's ~10 us in
 *    SQLite); the view allrefs reads both as refs was read.
 * 7: the prompt and result hash keys in a table of their own, hkeys(b,
 *    key, seq), b = seq >> WD_IDX_HKEY_SHIFT, instead of two indexes on
 *    records: the keys of random hashes made every transaction rewrite
 *    pages all over those indexes (~1.7 us a record of the index
 *    thread's ~4.5 us at a million records, more as the index grows);
 *    the keys of a transaction are sorted and go to its newest bucket or
 *    two, a few pages. A lookup probes each bucket (a 64k-record bucket:
 *    ~15 probes a million records). */
#define WD_IDX_VERSION 7

/* 16 KiB pages (new index files only; an existing file keeps its size). */
static const char pragmas[] = "PRAGMA page_size=16384;"
			      "PRAGMA journal_mode=WAL;"
			      "PRAGMA synchronous=OFF;"
			      "PRAGMA cache_size=-65536;"
			      "PRAGMA temp_store=MEMORY;";

/* Lookups by hash go through an INTEGER key (the first 64 bits of the
 * sha256, hkeys.key) whose entries are ~6x smaller than the 71-byte
 * text's; the query compares the full text too, so a colliding key (or a
 * prompt key that is another record's result key) cannot return a wrong
 * row. refs are only read by gc, whole or by seq range: a rowid table
 * without any index, id = seq * WD_IDXREC_MAXREFS + the ref's place among
 * the record's distinct refs, so rows are appended in id order and adding a
 * record twice adds its refs once. The first of them is records.ref0 (place
 * 0), refs has the rest. */
#define WD_IDX_MAXREFS_S "64"
_Static_assert(WD_IDXREC_MAXREFS == 64, "WD_IDX_MAXREFS_S");
static const char schema[] =
    "CREATE TABLE IF NOT EXISTS records(seq INTEGER PRIMARY KEY, seg "
    "INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL, ts "
    "INTEGER NOT NULL, run_id TEXT NOT NULL, step INTEGER, type TEXT, tool "
    "TEXT, call_id TEXT, status TEXT, prompt_hash TEXT, result_hash TEXT, "
    "refusal_check TEXT, ref0 TEXT);"
    "CREATE INDEX IF NOT EXISTS rec_run ON records(run_id, seq);"
    "CREATE TABLE IF NOT EXISTS hkeys(b INTEGER NOT NULL, key INTEGER NOT "
    "NULL, seq INTEGER NOT NULL, PRIMARY KEY(b, key, seq)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS rec_tool ON records(tool, status) WHERE "
    "tool IS NOT NULL;"
    "CREATE TABLE IF NOT EXISTS runs(run_id TEXT PRIMARY KEY, agent TEXT, "
    "team TEXT, user TEXT, model TEXT, status TEXT, started INTEGER, ended "
    "INTEGER, last_ts INTEGER, cost_nusd INTEGER NOT NULL DEFAULT 0, "
    "input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT "
    "NULL DEFAULT 0, model_calls INTEGER NOT NULL DEFAULT 0, steps INTEGER "
    "NOT NULL DEFAULT 0, records INTEGER NOT NULL DEFAULT 0, flagged "
    "INTEGER NOT NULL DEFAULT 0, payloads TEXT, retention_days INTEGER, "
    "payloads_dropped INTEGER NOT NULL DEFAULT 0, cached_tokens INTEGER NOT "
    "NULL DEFAULT 0, uid INTEGER, replay_of TEXT, replay_from INTEGER, "
    "replay_converged INTEGER, replay_diverged_at INTEGER, reason TEXT);"
    "CREATE INDEX IF NOT EXISTS runs_started ON runs(started);"
    /* /v1/trace/runs pages in this order (query.c): a page is a range
     * scan, not a sort of every run */
    "CREATE INDEX IF NOT EXISTS runs_page ON runs(coalesce(started, 0), "
    "run_id);"
    "CREATE INDEX IF NOT EXISTS runs_replay ON runs(replay_of) WHERE "
    "replay_of IS NOT NULL;"
    "CREATE TABLE IF NOT EXISTS refs(id INTEGER PRIMARY KEY, seq INTEGER "
    "NOT NULL, ref TEXT NOT NULL, run_id TEXT NOT NULL);"
    /* every ref with the id it had in refs before version 6: a seq range
     * reaches both tables through their keys (readers use seq, not id) */
    "CREATE VIEW IF NOT EXISTS allrefs AS SELECT seq * " WD_IDX_MAXREFS_S
    " AS id, seq, ref0 AS ref, run_id FROM records WHERE ref0 IS NOT NULL "
    "UNION ALL SELECT id, seq, ref, run_id FROM refs;";

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int64_t wd_idx_key(const char *s)
{
	uint64_t k = 0;
	if (!strncmp(s, "sha256:", 7)) {
		int i;
		for (i = 0; i < 16 && hexval(s[7 + i]) >= 0; i++)
			k = k << 4 | (uint64_t)hexval(s[7 + i]);
		if (i == 16)
			return (int64_t)k;
	}
	/* any other value: FNV-1a 64 of the text */
	k = 0xcbf29ce484222325ull;
	for (; *s; s++)
		k = (k ^ (unsigned char)*s) * 0x100000001b3ull;
	return (int64_t)k;
}

/* Per-run aggregates of the records of the current transaction, written
 * with one upsert per run at commit (or before a run-level update). Costs
 * are summed as integer nano-dollars so the sum does not depend on how
 * records were batched: a rebuilt index equals the live one exactly. */
struct agg {
	char *run, *model;
	uint64_t first_ts, last_ts;
	int64_t steps, records, in, out, mc, nusd, cached;
};

#define HKEY_ROWS 128
/* hkeys rows of a transaction: added at commit, sorted, HKEY_ROWS rows a
 * statement (a statement's own cost was ~half of a row's). */
struct hkey {
	int64_t key, seq;
};

/* Records known to be new (seq above every indexed one) whose index
 * blocks stay where they are until the commit (wd_idx_add_kept): inserted
 * REC_ROWS a statement. */
#define REC_ROWS 32
struct rec_row {
	uint64_t seq, seg, off, len, ts;
	const struct wd_idxrec *f;
};

struct wd_idx {
	sqlite3 *db;
	struct rec_row rows[REC_ROWS];
	size_t nrows;
	int64_t newest;	 /* the transaction's highest seq in records */
	struct hkey *hk; /* the transaction's hash keys, added at commit */
	size_t nhk, caphk;
	sqlite3_stmt *st[S_N];
	struct agg *agg;
	size_t nagg, capagg;
	json_t *aggmap; /* run_id -> index in agg */
	size_t last;	/* agg of the last record (runs come in streaks) */
};

static int agg_flush_one(struct wd_idx *x, struct agg *a)
{
	if (!a->records)
		return 0;
	sqlite3_stmt *st = x->st[S_RUN_NEW];
	sqlite3_bind_text(st, 1, a->run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, a->first_ts);
	sqlite3_bind_int64(st, 3, a->last_ts);
	sqlite3_bind_int64(st, 4, a->steps);
	sqlite3_bind_int64(st, 5, a->records);
	sqlite3_bind_int64(st, 6, a->in);
	sqlite3_bind_int64(st, 7, a->out);
	sqlite3_bind_int64(st, 8, a->nusd);
	sqlite3_bind_int64(st, 9, a->mc);
	if (a->model)
		sqlite3_bind_text(st, 10, a->model, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 10);
	sqlite3_bind_int64(st, 11, a->cached);
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	a->records = a->steps = a->in = a->out = a->mc = a->nusd = 0;
	a->cached = 0;
	a->last_ts = 0;
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static void agg_reset(struct wd_idx *x)
{
	x->nhk = 0;
	x->nrows = 0;
	for (size_t i = 0; i < x->nagg; i++) {
		free(x->agg[i].run);
		free(x->agg[i].model);
	}
	x->nagg = 0;
	json_object_clear(x->aggmap);
}

static int cmp_hkey(const void *a, const void *b)
{
	const struct hkey *p = a, *q = b;
	int64_t pb = p->seq >> WD_IDX_HKEY_SHIFT,
		qb = q->seq >> WD_IDX_HKEY_SHIFT;
	if (pb != qb)
		return pb < qb ? -1 : 1;
	if (p->key != q->key)
		return p->key < q->key ? -1 : 1;
	return p->seq < q->seq ? -1 : p->seq > q->seq;
}

static void hkey_add(struct wd_idx *x, const char *hash, uint64_t seq)
{
	if (x->nhk == x->caphk) {
		x->caphk = x->caphk ? x->caphk * 2 : 4096;
		x->hk = wd_realloc(x->hk, x->caphk * sizeof(*x->hk));
	}
	x->hk[x->nhk++] = (struct hkey){wd_idx_key(hash), (int64_t)seq};
}

static int hkey_flush(struct wd_idx *x)
{
	if (!x->nhk)
		return 0; /* hk may be NULL: not for qsort */
	qsort(x->hk, x->nhk, sizeof(*x->hk), cmp_hkey);
	size_t n = 0;
	for (size_t i = 0; i < x->nhk; i++)
		if (!n || x->hk[i].key != x->hk[n - 1].key ||
		    x->hk[i].seq != x->hk[n - 1].seq)
			x->hk[n++] = x->hk[i];
	size_t i = 0;
	while (i < n) {
		bool many = n - i >= HKEY_ROWS;
		sqlite3_stmt *st = x->st[many ? S_HKEYS : S_HKEY];
		for (int j = 0; j < (many ? HKEY_ROWS : 1); j++, i++) {
			sqlite3_bind_int64(st, 2 * j + 1, x->hk[i].seq);
			sqlite3_bind_int64(st, 2 * j + 2, x->hk[i].key);
		}
		int rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE)
			return -EIO;
	}
	x->nhk = 0;
	return 0;
}

static int rows_flush(struct wd_idx *x);

static int agg_flush(struct wd_idx *x)
{
	int r = rows_flush(x);
	if (!r)
		r = hkey_flush(x);
	for (size_t i = 0; !r && i < x->nagg; i++)
		r = agg_flush_one(x, &x->agg[i]);
	agg_reset(x);
	return r;
}

static struct agg *agg_get(struct wd_idx *x, const char *run, uint64_t ts)
{
	if (x->last < x->nagg && !strcmp(x->agg[x->last].run, run))
		return &x->agg[x->last];
	json_t *i = json_object_get(x->aggmap, run);
	if (i) {
		x->last = (size_t)json_integer_value(i);
		return &x->agg[x->last];
	}
	if (x->nagg == x->capagg) {
		x->capagg = x->capagg ? x->capagg * 2 : 64;
		x->agg = wd_realloc(x->agg, x->capagg * sizeof(*x->agg));
	}
	struct agg *a = &x->agg[x->nagg];
	*a = (struct agg){.run = wd_strdup(run), .first_ts = ts};
	x->last = x->nagg;
	json_object_set_new(x->aggmap, run, json_integer(x->nagg++));
	return a;
}

sqlite3 *wd_idx_db(struct wd_idx *x)
{
	return x->db;
}

void wd_idx_close(struct wd_idx *x)
{
	if (!x)
		return;
	agg_reset(x);
	free(x->agg);
	free(x->hk);
	json_decref(x->aggmap);
	for (int i = 0; i < S_N; i++)
		sqlite3_finalize(x->st[i]);
	sqlite3_close(x->db);
	free(x);
}

/* Under an exclusive write lock: an index of another format loses its
 * tables (the catch-up at open rebuilds them from the segments), a new or
 * emptied one gets the current tables and version. */
static int idx_upgrade(sqlite3 *db, const char *path, char **msg)
{
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, msg) != SQLITE_OK)
		return -EIO;
	sqlite3_stmt *st;
	int ver = -1, ntab = 0;
	if (sqlite3_prepare_v2(db,
			       "SELECT (SELECT user_version FROM "
			       "pragma_user_version), (SELECT count(*) FROM "
			       "sqlite_master WHERE type = 'table')",
			       -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW) {
			ver = sqlite3_column_int(st, 0);
			ntab = sqlite3_column_int(st, 1);
		}
		sqlite3_finalize(st);
	}
	int rc = SQLITE_OK;
	if (ver != WD_IDX_VERSION) {
		if (ntab)
			wd_info("trace index '%s': format %d, this build uses "
				"%d; rebuilding it from the segments",
				path, ver, WD_IDX_VERSION);
		rc = sqlite3_exec(db,
				  "DROP VIEW IF EXISTS allrefs; DROP TABLE IF "
				  "EXISTS records; DROP TABLE IF EXISTS runs; "
				  "DROP TABLE IF EXISTS refs; DROP TABLE IF "
				  "EXISTS hkeys;",
				  NULL, NULL, msg);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, schema, NULL, NULL, msg);
		char sql[64];
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d",
			 WD_IDX_VERSION);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, sql, NULL, NULL, msg);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "COMMIT", NULL, NULL, msg);
	if (rc != SQLITE_OK) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		return -EIO;
	}
	return 0;
}

/* The index names every run, its user, team and uid, and its hashes: it
 * is read like the segments (0640, no bits for others) whatever the
 * umask or the mode of the directory it sits in (trace/ is made 0755 as
 * a parent of segments/). SQLite would create it 0644 less the umask
 * (SQLITE_DEFAULT_FILE_PERMISSIONS) and gives its -wal and -shm exactly the
 * database file's mode, so the file is created here first; an index an
 * older build left more open, and its -wal/-shm, lose the extra bits.
 * Never through a symlink. 0 or -errno. */
static int idx_file_mode(const char *path)
{
	for (const char *sfx = ""; sfx; sfx = !*sfx		     ? "-wal"
					      : !strcmp(sfx, "-wal") ? "-shm"
								     : NULL) {
		cleanup_free char *p = wd_asprintf("%s%s", path, sfx);
		int fl =
		    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (*sfx ? 0 : O_CREAT);
		cleanup_close int fd = open(p, fl, 0640);
		struct stat st;
		if (fd < 0 && *sfx && errno == ENOENT)
			continue; /* made by SQLite with index.db's mode */
		if (fd < 0 || fstat(fd, &st) < 0)
			return -errno;
		if (!S_ISREG(st.st_mode))
			return -EINVAL;
		/* a reader that does not own the index cannot change it */
		if ((st.st_mode & 07777 & ~0640) && st.st_uid == geteuid() &&
		    fchmod(fd, st.st_mode & 0640) < 0)
			return -errno;
	}
	return 0;
}

/* SQLite's allocation statistics take a global mutex per malloc (the
 * index thread's largest lock traffic); nothing here reads them. Set
 * before SQLite initializes; refused (harmlessly) after. */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static void sqlite_conf(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int wd_idx_open(const char *path, struct wd_idx **out, struct wd_err *err)
{
	pthread_once(&sqlite_once, sqlite_conf);
	int r = idx_file_mode(path);
	if (r < 0)
		return wd_err_set(err, r, "trace index %s: %s", path,
				  r == -EINVAL ? "not a regular file"
					       : strerror(-r));
	struct wd_idx *x = wd_calloc(1, sizeof(*x));
	char *msg = NULL;
	x->aggmap = json_object();
	if (sqlite3_open_v2(path, &x->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(x->db, 10000);
	if (sqlite3_exec(x->db, pragmas, NULL, NULL, &msg) != SQLITE_OK ||
	    idx_upgrade(x->db, path, &msg) < 0)
		goto fail;
	struct wd_buf many = {0}, recs = {0};
	wd_buf_printf(&many, "INSERT OR IGNORE INTO hkeys(b, key, seq) VALUES");
	for (int j = 0; j < HKEY_ROWS; j++)
		wd_buf_printf(&many,
			      "%s(?%d >> " WD_IDX_HKEY_SHIFT_S ", ?%d, ?%d)",
			      j ? "," : "", 2 * j + 1, 2 * j + 2, 2 * j + 1);
	wd_buf_append(&many, "", 1);
	/* S_REC's statement with REC_ROWS rows of its parameters */
	const char *vals = strstr(sqls[S_REC], " VALUES(");
	wd_buf_append(&recs, sqls[S_REC], vals - sqls[S_REC] + 7);
	for (int j = 1; j < REC_ROWS; j++)
		wd_buf_printf(&recs, "%s,", vals + 7);
	wd_buf_printf(&recs, "%s", vals + 7);
	wd_buf_append(&recs, "", 1);
	for (int i = 0; i < S_N; i++) {
		const char *sql = i == S_HKEYS	? many.data
				  : i == S_RECS ? recs.data
						: sqls[i];
		if (sqlite3_prepare_v3(x->db, sql, -1,
				       SQLITE_PREPARE_PERSISTENT, &x->st[i],
				       NULL) != SQLITE_OK) {
			wd_buf_free(&many);
			wd_buf_free(&recs);
			goto fail;
		}
	}
	wd_buf_free(&many);
	wd_buf_free(&recs);
	*out = x;
	return 0;
fail:
	wd_err_set(err, -EIO, "trace index %s: %s", path,
		   msg ? msg : sqlite3_errmsg(x->db));
	sqlite3_free(msg);
	wd_idx_close(x);
	return -EIO;
}

int wd_idx_begin(struct wd_idx *x)
{
	uint64_t seq, seg, end;
	x->nrows = 0;
	if (sqlite3_exec(x->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    wd_idx_tail(x, &seq, &seg, &end) < 0)
		return -EIO;
	x->newest = (int64_t)seq;
	return 0;
}

int wd_idx_commit(struct wd_idx *x)
{
	if (agg_flush(x) == 0 &&
	    sqlite3_exec(x->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	sqlite3_exec(x->db, "ROLLBACK", NULL, NULL, NULL);
	return -EIO;
}

int wd_idx_rollback(struct wd_idx *x)
{
	agg_reset(x);
	return sqlite3_exec(x->db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK
		   ? 0
		   : -EIO;
}

int wd_idx_clear(struct wd_idx *x)
{
	return sqlite3_exec(x->db,
			    "DELETE FROM records; DELETE FROM runs; DELETE "
			    "FROM refs; DELETE FROM hkeys;",
			    NULL, NULL, NULL) == SQLITE_OK
		   ? 0
		   : -EIO;
}

int wd_idx_tail(struct wd_idx *x, uint64_t *seq, uint64_t *seg, uint64_t *end)
{
	sqlite3_stmt *st = x->st[S_TAIL];
	*seq = *seg = *end = 0;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*seq = sqlite3_column_int64(st, 0);
		*seg = sqlite3_column_int64(st, 1);
		*end = sqlite3_column_int64(st, 2);
	}
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -EIO;
}

bool wd_trace_is_ref_key(const char *k)
{
	size_t n = strlen(k);
	return n > 4 && !strcmp(k + n - 4, "_ref");
}

/* Strings bound stay alive until the statement is reset (they live in the
 * wd_idxrec or the aggregate), so SQLite need not copy them. */
static void bind_str(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static int run_step(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -EIO;
}

static int digits(const char *s, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

/* The store's own format, "2026-01-10T12:00:01.123456Z", with every field
 * in range: computed directly (sscanf + timegm cost microseconds per record
 * in catch-up). 0 = not this exact shape. */
static uint64_t parse_ts_fast(const char *s)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";
	for (size_t i = 0; i < sizeof(shape) - 1; i++)
		if (shape[i] != 'd' && s[i] != shape[i])
			return 0;
	if (s[sizeof(shape) - 1])
		return 0;
	int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2);
	int h = digits(s + 11, 2), mi = digits(s + 14, 2);
	int sec = digits(s + 17, 2), us = digits(s + 20, 6);
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 28 || h < 0 ||
	    h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || us < 0)
		return 0; /* days 29-31 and the rest: the general path */
	int64_t days = days_from_civil(y, mo, d);
	return ((uint64_t)days * 86400 + h * 3600 + mi * 60 + sec) *
		   1000000ull +
	       us;
}

uint64_t wd_trace_parse_ts(const char *s)
{
	uint64_t fast = s ? parse_ts_fast(s) : 0;
	if (fast)
		return fast;
	struct tm tm = {0};
	unsigned us = 0;
	if (!s ||
	    sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%6uZ", &tm.tm_year, &tm.tm_mon,
		   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &us) < 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	time_t t = timegm(&tm);
	if (t < 0)
		return 0;
	return (uint64_t)t * 1000000ull + us;
}

static bool run_known(struct wd_idx *x, const char *run)
{
	sqlite3_stmt *st = x->st[S_RUN_KNOWN];
	bind_str(st, 1, run);
	bool known = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return known;
}

/* A records row's 15 parameters from parameter 1 + at. */
static void bind_rec(sqlite3_stmt *st, int at, const struct rec_row *w)
{
	const struct wd_idxrec *f = w->f;
	enum wd_rec_type rt = wd_rec_type_of(f->s[WD_IDXREC_TYPE]);
	sqlite3_bind_int64(st, at + 1, w->seq);
	sqlite3_bind_int64(st, at + 2, w->seg);
	sqlite3_bind_int64(st, at + 3, w->off);
	sqlite3_bind_int64(st, at + 4, w->len);
	sqlite3_bind_int64(st, at + 5, w->ts);
	bind_str(st, at + 6, f->s[WD_IDXREC_RUN]);
	sqlite3_bind_int64(st, at + 7, f->step);
	bind_str(st, at + 8, f->s[WD_IDXREC_TYPE]);
	bind_str(st, at + 9, f->s[WD_IDXREC_TOOL]);
	bind_str(st, at + 10, f->s[WD_IDXREC_CALL]);
	bind_str(st, at + 11, f->s[WD_IDXREC_STATUS]);
	bind_str(st, at + 12, f->s[WD_IDXREC_PROMPT]);
	bind_str(st, at + 13, f->s[WD_IDXREC_RESULT]);
	bind_str(st, at + 14,
		 rt == WD_REC_TOOL_RESULT ? f->s[WD_IDXREC_CHECK] : NULL);
	/* a gc record's refs name dropped blobs, not references */
	bind_str(st, at + 15, f->nrefs && rt != WD_REC_GC ? f->refs[0] : NULL);
}

static int rows_flush(struct wd_idx *x)
{
	size_t i = 0;
	while (i < x->nrows) {
		bool many = x->nrows - i == REC_ROWS;
		sqlite3_stmt *st = x->st[many ? S_RECS : S_REC];
		for (int j = 0; j < (many ? REC_ROWS : 1); j++, i++)
			bind_rec(st, 15 * j, &x->rows[i]);
		int rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE)
			return -EIO;
	}
	x->nrows = 0;
	return 0;
}

static int idx_add(struct wd_idx *x, uint64_t seq, uint64_t seg, uint64_t off,
		   uint64_t len, uint64_t ts, const struct wd_idxrec *f,
		   bool kept)
{
	const char *run = f->s[WD_IDXREC_RUN];
	const char *type = f->s[WD_IDXREC_TYPE];
	int64_t step = f->step;
	if (!run || !type)
		return 0; /* not a record the index understands */
	enum wd_rec_type rt = wd_rec_type_of(type);
	struct rec_row w = {seq, seg, off, len, ts, f};
	if (kept && (int64_t)seq > x->newest) {
		/* above every seq in records: a new row for certain */
		x->rows[x->nrows++] = w;
		if (x->nrows == REC_ROWS && rows_flush(x) < 0)
			return -EIO;
	} else {
		sqlite3_stmt *st = x->st[S_REC];
		if (rows_flush(x) < 0)
			return -EIO;
		bind_rec(st, 0, &w);
		if (run_step(st) < 0)
			return -EIO;
		if (sqlite3_changes(x->db) == 0)
			return 0; /* already indexed */
	}
	if ((int64_t)seq > x->newest)
		x->newest = (int64_t)seq;
	if (f->s[WD_IDXREC_PROMPT])
		hkey_add(x, f->s[WD_IDXREC_PROMPT], seq);
	if (f->s[WD_IDXREC_RESULT])
		hkey_add(x, f->s[WD_IDXREC_RESULT], seq);

	/* a `gc` record of a run the index no longer knows (metadata
	 * retention dropped its records, or the store's own "trace-gc"
	 * records), or a payload_read of a run this store never held
	 * (another node's, read here through the fleet): the record row
	 * only, no runs row to make up */
	if ((rt == WD_REC_GC || rt == WD_REC_PAYLOAD_READ) &&
	    !json_object_get(x->aggmap, run) && !run_known(x, run))
		return 0;
	bool mc = rt == WD_REC_MODEL_CALL;
	struct agg *ag = agg_get(x, run, ts);
	if (!ag->records)
		ag->first_ts = ag->first_ts ? ag->first_ts : ts;
	ag->records++;
	ag->last_ts = ts > ag->last_ts ? ts : ag->last_ts;
	ag->steps = step > ag->steps ? step : ag->steps;
	if (mc) {
		ag->mc++;
		ag->in += f->in_tokens;
		ag->out += f->out_tokens;
		ag->cached += f->cached_tokens;
		ag->nusd += f->cost_nusd;
		const char *m = f->s[WD_IDXREC_MODEL];
		if (m && !ag->model)
			ag->model = wd_strdup(m);
	}
	bool run_level = rt == WD_REC_RUN_START || rt == WD_REC_RUN_END ||
			 rt == WD_REC_FLAG || rt == WD_REC_GC;
	/* the UPDATEs below need the row and its sums in place */
	if (run_level && agg_flush_one(x, ag) < 0)
		return -EIO;

	sqlite3_stmt *st;
	if (rt == WD_REC_RUN_START) {
		const char *pl = f->s[WD_IDXREC_PAYLOADS];
		st = x->st[S_RUN_START];
		bind_str(st, 1, run);
		bind_str(st, 2, f->s[WD_IDXREC_AGENT]);
		bind_str(st, 3, f->s[WD_IDXREC_TEAM]);
		bind_str(st, 4, f->s[WD_IDXREC_USER]);
		bind_str(st, 5, f->s[WD_IDXREC_MODEL]);
		sqlite3_bind_int64(st, 6, ts);
		bind_str(st, 7, pl ? pl : "full");
		if (f->has_rd)
			sqlite3_bind_int64(st, 8, f->rd);
		else
			sqlite3_bind_null(st, 8);
		/* no uid: NULL, a run no one reads as its own */
		if (f->has_uid)
			sqlite3_bind_int64(st, 9, f->uid);
		else
			sqlite3_bind_null(st, 9);
		bind_str(st, 10, f->s[WD_IDXREC_REPLAY_OF]);
		if (f->s[WD_IDXREC_REPLAY_OF] && f->replay_from >= 0)
			sqlite3_bind_int64(st, 11, f->replay_from);
		else
			sqlite3_bind_null(st, 11);
	} else if (rt == WD_REC_RUN_END) {
		const char *s = f->s[WD_IDXREC_STATUS];
		st = x->st[S_RUN_END];
		bind_str(st, 1, run);
		bind_str(st, 2, s ? s : "ok");
		sqlite3_bind_int64(st, 3, ts);
		sqlite3_bind_int(st, 4, f->flagged);
		if (f->has_cost)
			sqlite3_bind_int64(st, 5, f->cost_nusd);
		else
			sqlite3_bind_null(st, 5);
		bind_str(st, 6, f->s[WD_IDXREC_REASON]);
		if (f->replay_converged >= 0)
			sqlite3_bind_int(st, 7, f->replay_converged);
		else
			sqlite3_bind_null(st, 7);
		if (f->has_diverged)
			sqlite3_bind_int64(st, 8, f->diverged_at);
		else
			sqlite3_bind_null(st, 8);
	} else if (rt == WD_REC_FLAG) {
		st = x->st[S_RUN_FLAG];
		bind_str(st, 1, run);
	} else if (rt == WD_REC_GC) {
		st = x->st[S_RUN_GC];
		bind_str(st, 1, run);
	} else {
		st = NULL;
	}
	if (st && run_step(st) < 0)
		return -EIO;
	if (rt == WD_REC_GC)
		return 0; /* its refs name dropped blobs, not references */
	/* the first is records.ref0 (id seq * WD_IDXREC_MAXREFS) */
	int64_t id = (int64_t)seq * WD_IDXREC_MAXREFS + 1;
	for (unsigned i = 1; i < f->nrefs; i++) {
		bool dup = false;
		for (unsigned j = 0; !dup && j < i; j++)
			dup = !strcmp(f->refs[i], f->refs[j]);
		if (dup)
			continue;
		st = x->st[S_REF];
		sqlite3_bind_int64(st, 1, id++);
		sqlite3_bind_int64(st, 2, seq);
		bind_str(st, 3, f->refs[i]);
		bind_str(st, 4, run);
		if (run_step(st) < 0)
			return -EIO;
	}
	return 0;
}

int wd_idx_add(struct wd_idx *x, uint64_t seq, uint64_t seg, uint64_t off,
	       uint64_t len, uint64_t ts, const struct wd_idxrec *f)
{
	return idx_add(x, seq, seg, off, len, ts, f, false);
}

int wd_idx_add_kept(struct wd_idx *x, uint64_t seq, uint64_t seg, uint64_t off,
		    uint64_t len, uint64_t ts, const struct wd_idxrec *f)
{
	return idx_add(x, seq, seg, off, len, ts, f, true);
}
