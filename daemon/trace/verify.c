/* `warden trace verify`: framing (crc), the hash chain and seq continuity of
 * every segment, the hash of every blob (decompressed content against its
 * name), and that every blob a record names exists unless retention dropped
 * it (a `gc` record) or the run stores hashes only. Each problem names its
 * place: segment file + byte offset + line, or blob file. */
#include "trace/trace_int.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

struct vctx {
	struct wd_trace *t;
	const char *run_id;
	json_t *problems;
	json_t *refs;	   /* ref -> run_id, records to check */
	json_t *dropped;   /* ref -> true (gc) */
	json_t *hash_only; /* run_id -> true */
	json_t *runs_seen; /* run_id -> true */
	json_t *starts;	   /* "last_hash" -> last_seq of metadata gc */
	/* the store's first record, when its prev is not zeros: accepted
	 * if a metadata gc record names it as the last dropped one */
	struct {
		bool pending;
		int64_t seq, off, line;
		char prev[72], file[40];
	} start;
};

static void problem(struct vctx *v, const char *kind, const char *file,
		    int64_t off, int64_t line, int64_t seq, const char *fmt,
		    ...) __attribute__((format(printf, 7, 8)));

static void problem(struct vctx *v, const char *kind, const char *file,
		    int64_t off, int64_t line, int64_t seq, const char *fmt,
		    ...)
{
	va_list ap;
	char msg[512];
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *p = json_pack("{s:s, s:s, s:s}", "kind", kind, "file", file,
			      "message", msg);
	if (off >= 0)
		json_object_set_new(p, "offset", json_integer(off));
	if (line > 0)
		json_object_set_new(p, "line", json_integer(line));
	if (seq > 0)
		json_object_set_new(p, "seq", json_integer(seq));
	json_array_append_new(v->problems, p);
}

static void note_record(struct vctx *v, json_t *rec)
{
	const char *run = json_string_value(json_object_get(rec, "run_id"));
	const char *type = json_string_value(json_object_get(rec, "type"));
	if (!run || !type)
		return;
	if (!strcmp(type, "gc")) {
		const char *lh =
		    json_string_value(json_object_get(rec, "last_hash"));
		json_t *ls = json_object_get(rec, "last_seq");
		if (lh && json_is_integer(ls))
			json_object_set(v->starts, lh, ls);
		size_t i;
		json_t *r;
		json_array_foreach(json_object_get(rec, "refs"), i, r)
		    json_object_set_new(v->dropped, json_string_value(r),
					json_true());
		return;
	}
	if (!strcmp(type, "run_start")) {
		json_t *tr = json_object_get(rec, "trace");
		const char *p =
		    json_string_value(json_object_get(tr, "payloads"));
		if (!p)
			p = json_string_value(json_object_get(rec, "payloads"));
		if (p && !strcmp(p, "hash_only"))
			json_object_set_new(v->hash_only, run, json_true());
	}
	if (v->run_id && strcmp(v->run_id, run))
		return;
	json_object_set_new(v->runs_seen, run, json_true());
	const char *k;
	json_t *x;
	json_object_foreach(rec, k, x)
	{
		const char *ref = json_string_value(x);
		if (wd_trace_is_ref_key(k) && wd_trace_ref_ok(ref))
			json_object_set_new(v->refs, ref, json_string(run));
	}
}

void wd_trace_chain_init(struct wd_trace_chain *c)
{
	memcpy(c->prev, WD_ZERO_HASH, 65);
	c->next_seq = 0;
}

unsigned wd_trace_chain_next(struct wd_trace_chain *c, const char *line,
			     size_t len, json_t **rec)
{
	char h[65];
	*rec = NULL;
	if (wd_trace_check_line(line, len, h, rec) < 0) {
		/* the next line can't chain, and its seq can't be checked
		 * against the damaged one's */
		memcpy(c->prev, "!", 2);
		c->next_seq = 0;
		return WD_CHAIN_FRAME;
	}
	int64_t seq = json_integer_value(json_object_get(*rec, "seq"));
	const char *p = json_string_value(json_object_get(*rec, "prev"));
	unsigned bad = 0;
	if (strcmp(c->prev, "!") &&
	    !(p && !strncmp(p, "sha256:", 7) && !strcmp(p + 7, c->prev)))
		bad |= WD_CHAIN_PREV;
	/* a seq below 1 is wrong itself, and would make the next line's
	 * unchecked (next_seq 0 means "any") */
	if (seq < 1 || (c->next_seq && (uint64_t)seq != c->next_seq))
		bad |= WD_CHAIN_SEQ;
	c->next_seq = (uint64_t)seq + 1;
	memcpy(c->prev, h, 65);
	return bad;
}

static void verify_segment(struct vctx *v, uint64_t first,
			   struct wd_trace_chain *ch, bool last,
			   bool store_first)
{
	cleanup_free char *path = wd_trace_seg_path(v->t, first);
	const char *base = strrchr(path, '/') + 1;
	cleanup_free char *buf = NULL;
	size_t len;
	int r = wd_read_file(path, &buf, &len);
	if (r < 0) {
		problem(v, "io", base, -1, 0, 0, "cannot read: %s",
			strerror(-r));
		return;
	}
	size_t off = 0;
	int64_t line = 0;
	bool first_rec = true;
	while (off < len) {
		line++;
		const char *nl = memchr(buf + off, '\n', len - off);
		size_t ll = nl ? (size_t)(nl - (buf + off)) : len - off;
		json_t *rec = NULL;
		if (!nl) {
			problem(v, "torn", base, off, line, 0,
				"%zu bytes without a line end (torn write%s)",
				ll, last ? " still being written?" : "");
			break;
		}
		uint64_t want = ch->next_seq;
		unsigned bad = wd_trace_chain_next(ch, buf + off, ll, &rec);
		if (bad & WD_CHAIN_FRAME) {
			problem(v, "frame", base, off, line, 0,
				"bad framing or checksum (line of %zu bytes)",
				ll);
			off += ll + 1;
			continue;
		}
		int64_t seq = json_integer_value(json_object_get(rec, "seq"));
		const char *p = json_string_value(json_object_get(rec, "prev"));
		if ((bad & WD_CHAIN_PREV) && store_first && first_rec &&
		    seq > 1) {
			/* older segments removed by metadata retention? */
			v->start.pending = true;
			v->start.seq = seq;
			v->start.off = off;
			v->start.line = line;
			snprintf(v->start.prev, sizeof(v->start.prev), "%s",
				 p ? p : "");
			snprintf(v->start.file, sizeof(v->start.file), "%s",
				 base);
		} else if (bad & WD_CHAIN_PREV)
			problem(v, "chain", base, off, line, seq,
				"prev does not match the hash of the previous "
				"record");
		if (bad & WD_CHAIN_SEQ)
			problem(v, "seq", base, off, line, seq,
				"seq %lld where %llu was expected",
				(long long)seq, (unsigned long long)want);
		if (first_rec && (uint64_t)seq != first)
			problem(v, "seq", base, off, line, seq,
				"segment named %llu starts at seq %lld",
				(unsigned long long)first, (long long)seq);
		first_rec = false;
		note_record(v, rec);
		json_decref(rec);
		off += ll + 1;
	}
}

static void verify_blob(struct vctx *v, const char *hex, const char *why)
{
	char *data = NULL;
	size_t len;
	int r = wd_trace_load_blob(v->t, hex, &data, &len);
	free(data);
	char file[80];
	snprintf(file, sizeof(file), "blobs/%.2s/%s", hex, hex + 2);
	if (r == -EBADMSG)
		problem(v, "blob", file, -1, 0, 0,
			"content does not match its sha256 name (%s)", why);
	else if (r < 0 && r != -ENOENT)
		problem(v, "blob", file, -1, 0, 0, "cannot read: %s",
			strerror(-r));
}

static bool is_hex(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static void verify_all_blobs(struct vctx *v)
{
	DIR *d = opendir(v->t->blobdir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!is_hex(e->d_name, 2))
			continue;
		cleanup_free char *sub =
		    wd_asprintf("%s/%s", v->t->blobdir, e->d_name);
		DIR *s = opendir(sub);
		if (!s)
			continue;
		struct dirent *f;
		while ((f = readdir(s))) {
			if (f->d_name[0] == '.')
				continue;
			char hex[600];
			snprintf(hex, sizeof(hex), "%.2s%.500s", e->d_name,
				 f->d_name);
			if (!is_hex(hex, 64)) {
				problem(v, "blob", f->d_name, -1, 0, 0,
					"stray file in blobs/%s", e->d_name);
				continue;
			}
			verify_blob(v, hex, "stored blob");
		}
		closedir(s);
	}
	closedir(d);
}

static void leftover_tails(struct vctx *v)
{
	DIR *d = opendir(v->t->segdir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *m = strstr(e->d_name, WD_SEG_SUFFIX ".damaged-");
		if (m)
			problem(v, "damaged", e->d_name, -1, 0, 0,
				"damaged data cut from the segment when the "
				"store was opened (kept in this file)");
	}
	closedir(d);
}

int wd_trace_verify(struct wd_trace *t, const char *run_id, json_t **problems,
		    struct wd_err *err)
{
	int r = wd_trace_flush(t, err);
	if (r < 0)
		return r;
	struct vctx v = {.t = t,
			 .run_id = run_id,
			 .problems = json_array(),
			 .refs = json_object(),
			 .dropped = json_object(),
			 .hash_only = json_object(),
			 .runs_seen = json_object(),
			 .starts = json_object()};
	cleanup_free uint64_t *segs = NULL;
	size_t n;
	r = wd_trace_list_segments(t, &segs, &n);
	if (r < 0) {
		json_decref(v.problems);
		r = wd_err_set(err, r, "%s: %s", t->segdir, strerror(-r));
		goto out;
	}
	struct wd_trace_chain ch;
	wd_trace_chain_init(&ch);
	for (size_t i = 0; i < n; i++)
		verify_segment(&v, segs[i], &ch, i + 1 == n, i == 0);
	if (v.start.pending) {
		json_t *ls = json_object_get(v.starts, v.start.prev);
		if (!ls || json_integer_value(ls) + 1 != v.start.seq)
			problem(&v, "chain", v.start.file, v.start.off,
				v.start.line, v.start.seq,
				"the store starts at seq %lld after a record "
				"no metadata gc record names as removed",
				(long long)v.start.seq);
	}
	leftover_tails(&v);
	if (run_id && !json_object_get(v.runs_seen, run_id))
		problem(&v, "run", run_id, -1, 0, 0, "no record of this run");
	const char *ref;
	json_t *run;
	json_object_foreach(v.refs, ref, run)
	{
		const char *hex = ref + 7;
		cleanup_free char *p = wd_trace_blob_path(t, hex);
		struct stat st;
		if (stat(p, &st) < 0) {
			if (!json_object_get(v.dropped, ref) &&
			    !json_object_get(v.hash_only,
					     json_string_value(run))) {
				char file[80];
				snprintf(file, sizeof(file), "blobs/%.2s/%s",
					 hex, hex + 2);
				problem(&v, "blob", file, -1, 0, 0,
					"missing blob named by run %s",
					json_string_value(run));
			}
			continue;
		}
		if (run_id)
			verify_blob(&v, hex, "named by the run");
	}
	if (!run_id)
		verify_all_blobs(&v);
	*problems = v.problems;
	r = json_array_size(v.problems) ? -EBADMSG : 0;
out:
	json_decref(v.refs);
	json_decref(v.dropped);
	json_decref(v.hash_only);
	json_decref(v.runs_seen);
	json_decref(v.starts);
	return r;
}
