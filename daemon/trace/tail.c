/* Opening a store: the tail of the last segment is read back (a torn tail
 * cut, damage followed by good records kept and continued in a new
 * segment), the chain head and next seq found, the index's rows for that
 * segment checked against it, and the runs whose payloads are hash_only
 * listed. Called by wd_trace_open (store.c) before the writer starts. */
#include "trace/trace_int.h"
#include "common/log.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void note_line(struct wd_trace *t, uint64_t off, uint64_t len);

/* A forward walk over the well-framed lines of a segment (past damage):
 * the highest seq and the hash of the last one. */
struct good_ctx {
	uint64_t max_seq;
	char last_hash[65];
	bool any;
	struct wd_trace *t; /* non-NULL: note each line in t->dmg */
	uint64_t base;
};

static int good_cb(void *x, const char *line, size_t len, uint64_t off,
		   json_t *rec)
{
	struct good_ctx *c = x;
	json_int_t seq = json_integer_value(json_object_get(rec, "seq"));
	if (seq <= 0)
		return 0;
	if ((uint64_t)seq > c->max_seq)
		c->max_seq = seq;
	wd_sha256_hex(line, len, c->last_hash);
	c->any = true;
	if (c->t)
		note_line(c->t, c->base + off, len);
	return 0;
}

/* Do the index's rows of the last segment name exactly its first good
 * lines (the index may lag, never differ)? Rows indexed before the segment
 * was damaged (a flipped record, lines shifted by a lost block) or before
 * it was repaired (a line the index never saw) must not be trusted: then
 * the index is rebuilt from the segments. */
bool wd_trace_idx_matches_last(struct wd_trace *t)
{
	sqlite3 *db = wd_idx_db(t->idx);
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db,
			       "SELECT seg, off, len FROM records WHERE seq "
			       ">= ?1 ORDER BY off",
			       -1, &st, NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_int64(st, 1, t->dmg.seg);
	bool ok = true;
	size_t i = 0;
	while (ok && sqlite3_step(st) == SQLITE_ROW) {
		ok = (uint64_t)sqlite3_column_int64(st, 0) == t->dmg.seg &&
		     i < t->dmg.n &&
		     t->dmg.off[i] == (uint64_t)sqlite3_column_int64(st, 1) &&
		     t->dmg.len[i] == (uint64_t)sqlite3_column_int64(st, 2);
		i++;
	}
	sqlite3_finalize(st);
	return ok;
}

/* Chain head of a segment file that is not the last one: the hash of its
 * last well-framed line, and the highest seq it holds (so that a later
 * segment never reuses one). */
static int seg_head(struct wd_trace *t, uint64_t first, char hash[65],
		    uint64_t *seq)
{
	cleanup_free char *p = wd_trace_seg_path(t, first);
	cleanup_free char *buf = NULL;
	size_t len;
	int r = wd_read_file(p, &buf, &len);
	if (r < 0)
		return r;
	/* fast path: the last complete line is good (always, unless the
	 * segment is damaged) */
	size_t end = len;
	while (end > 0 && buf[end - 1] != '\n')
		end--;
	if (end == 0)
		return -ENOENT;
	size_t s = end - 1;
	while (s > 0 && buf[s - 1] != '\n')
		s--;
	json_t *rec = NULL;
	if (wd_trace_check_line(buf + s, end - 1 - s, hash, &rec) == 0) {
		*seq = json_integer_value(json_object_get(rec, "seq"));
		json_decref(rec);
		return 0;
	}
	struct good_ctx c = {0};
	wd_trace_scan_skip(buf, len, good_cb, &c, NULL);
	if (!c.any)
		return -EBADMSG;
	memcpy(hash, c.last_hash, 65);
	*seq = c.max_seq;
	return 0;
}

struct tail_ctx {
	struct wd_trace *t;
	uint64_t last_seq;
	char last_hash[65];
	bool any;
};

static void note_line(struct wd_trace *t, uint64_t off, uint64_t len)
{
	if (t->dmg.n == t->dmg.cap) {
		t->dmg.cap = t->dmg.cap ? 2 * t->dmg.cap : 256;
		t->dmg.off =
		    wd_realloc(t->dmg.off, t->dmg.cap * sizeof(uint64_t));
		t->dmg.len =
		    wd_realloc(t->dmg.len, t->dmg.cap * sizeof(uint64_t));
	}
	t->dmg.off[t->dmg.n] = off;
	t->dmg.len[t->dmg.n++] = len;
}

static int tail_cb(void *x, const char *line, size_t len, uint64_t off,
		   json_t *rec)
{
	struct tail_ctx *c = x;
	note_line(c->t, off, len);
	c->last_seq = json_integer_value(json_object_get(rec, "seq"));
	wd_sha256_hex(line, len, c->last_hash);
	c->any = true;
	return 0;
}

/* The chain start of the first segment: zeros for a store that begins at
 * seq 1; after metadata retention dropped the oldest segments, the prev of
 * the first remaining record (verify checks it against the `gc` record that
 * names the dropped segments). */
static void chain_start(struct wd_trace *t, uint64_t first, char prev[65])
{
	memcpy(prev, WD_ZERO_HASH, 65);
	if (first <= 1)
		return;
	cleanup_free char *p = wd_trace_seg_path(t, first);
	cleanup_free char *buf = NULL;
	size_t len;
	if (wd_read_file(p, &buf, &len) < 0)
		return;
	const char *nl = memchr(buf, '\n', len);
	json_t *rec = NULL;
	if (!nl || wd_trace_check_line(buf, nl - buf, NULL, &rec) < 0)
		return;
	const char *pv = json_string_value(json_object_get(rec, "prev"));
	if (pv && strlen(pv) == 71 && !strncmp(pv, "sha256:", 7))
		memcpy(prev, pv + 7, 65);
	json_decref(rec);
}

/* Opening the store for writing, the last segment may end in
 *  - a torn tail: bad bytes up to its end and no well-framed line after
 *    them, which is what a crash in the middle of a write leaves (nothing
 *    in it was acknowledged as durable): moved to <segment>.torn-<off>.<ns>
 *    and cut, appends continue in that segment;
 *  - damage followed by good records (a flipped bit, a lost block, an
 *    edit): those records were acknowledged, so nothing is cut: the
 *    segment stays byte for byte as it is (verify reports the damage with
 *    its place), and appends continue in a NEW segment after the highest
 *    seq the file holds, chained to its last good record. Readers and the
 *    index skip the damaged lines. */
int wd_trace_load_tail(struct wd_trace *t, struct wd_err *err)
{
	cleanup_free uint64_t *segs = NULL;
	size_t n;
	int r = wd_trace_list_segments(t, &segs, &n);
	if (r < 0)
		return wd_err_set(err, r, "%s: %s", t->segdir, strerror(-r));
	memcpy(t->prev, WD_ZERO_HASH, 65);
	t->next_seq = 1;
	if (!n)
		return 0;
	uint64_t last = segs[n - 1];
	char prev[65];
	uint64_t prev_seq = 0;
	chain_start(t, segs[0], prev);
	if (n > 1) {
		r = seg_head(t, segs[n - 2], prev, &prev_seq);
		if (r < 0)
			return wd_err_set(err, -EBADMSG,
					  "segment %016llu: cannot read its "
					  "last record (%s); run 'warden "
					  "trace verify'",
					  (unsigned long long)segs[n - 2],
					  strerror(-r));
	}
	cleanup_free char *path = wd_trace_seg_path(t, last);
	cleanup_free char *buf = NULL;
	size_t len;
	r = wd_read_file(path, &buf, &len);
	if (r < 0)
		return wd_err_set(err, r, "%s: %s", path, strerror(-r));
	struct tail_ctx c = {.t = t};
	t->dmg.seg = last;
	bool chain_ok;
	size_t good = wd_trace_scan(buf, len, prev, tail_cb, &c, &chain_ok);
	/* a well-framed complete line after the bad bytes? */
	struct good_ctx g = {.t = t, .base = good};
	if (good < len && memchr(buf + good, '\n', len - good))
		wd_trace_scan_skip(buf + good, len - good, good_cb, &g, NULL);
	bool damage = good < len && (!chain_ok || g.any);
	if (damage) {
		uint64_t hi = g.max_seq > c.last_seq ? g.max_seq : c.last_seq;
		if (hi < prev_seq)
			hi = prev_seq;
		if (hi + 1 < last)
			hi = last - 1;
		if (t->o.read_only)
			wd_warn("trace segment '%s': damaged data at byte %zu "
				"followed by good records (run 'warden trace "
				"verify')",
				path, good);
		else
			wd_warn("trace segment '%s': damaged data at byte %zu "
				"followed by good records; the segment is kept "
				"as it is (run 'warden trace verify') and "
				"appends continue in a new segment at seq %llu",
				path, good, (unsigned long long)(hi + 1));
		t->next_seq = hi + 1;
		memcpy(t->prev, g.any ? g.last_hash : c.last_hash, 65);
		if (!g.any && !c.any)
			memcpy(t->prev, prev, 65);
		t->seg_first = 0; /* the writer opens a new segment */
		t->seg_size = 0;
		return 0;
	}
	if (good < len && !t->o.read_only) {
		cleanup_free char *keep =
		    wd_asprintf("%s.torn-%zu.%llu", path, good,
				(unsigned long long)wd_wall_ns());
		r = wd_write_file(keep, buf + good, len - good, 0640);
		if (r < 0)
			return wd_err_set(err, r, "%s: %s", keep, strerror(-r));
		if (truncate(path, good) < 0)
			return wd_err_set(err, -errno, "%s: cut tail: %s", path,
					  strerror(errno));
		wd_info("trace segment '%s': torn tail of %zu bytes cut at "
			"byte %zu",
			path, len - good, good);
	}
	if (c.any) {
		t->next_seq = c.last_seq + 1;
		memcpy(t->prev, c.last_hash, 65);
	} else {
		/* an empty (or wholly torn) last segment: the chain goes on
		 * from the one before, at the seq this one is named for */
		t->next_seq =
		    n > 1 && prev_seq + 1 > last ? prev_seq + 1 : last;
		memcpy(t->prev, prev, 65);
	}
	t->seg_first = last;
	t->seg_size = good;
	return 0;
}

int wd_trace_load_hash_only(struct wd_trace *t)
{
	if (!t->idx)
		return 0;
	sqlite3_stmt *st;
	sqlite3 *db = wd_idx_db(t->idx);
	if (sqlite3_prepare_v2(db,
			       "SELECT run_id FROM runs WHERE payloads = "
			       "'hash_only' AND ended IS NULL",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	while (sqlite3_step(st) == SQLITE_ROW)
		json_object_set_new(t->hash_only,
				    (const char *)sqlite3_column_text(st, 0),
				    json_true());
	sqlite3_finalize(st);
	return 0;
}
