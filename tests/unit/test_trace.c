/* Trace store: append/read, chain, blobs, redaction, rotation, reindex
 * equality, tampering, gc, hash_only, concurrent appends. */
#include "t.h"
#include "test_trace_util.h"
#include "trace/trace_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>

static const char *SECRET_OAI = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123";
static const char *SECRET_ANT = "sk-ant-api03-ZZZZyyyyXXXXwwwwVVVV9999";
static const char *SECRET_BEARER = "eyJhbGciOiJIUzI1NiJ9.payload.sig";
static const char *SECRET_XKEY = "xk-live-7777-8888";

/* one small run with every record type */
static int write_run(struct wd_trace *t, const char *run, const char *status,
		     const char *payloads, int retention, char refs[2][72])
{
	struct wd_err err = {0};
	json_t *r = tt_rec(run, 0, "run_start");
	json_object_set_new(r, "agent", json_string("support"));
	json_object_set_new(r, "team", json_string("cs"));
	json_object_set_new(r, "user", json_string("alice"));
	json_object_set_new(r, "gen_ai.request.model", json_string("m1"));
	json_object_set_new(r, "trace",
			    json_pack("{s:s, s:i}", "payloads", payloads,
				      "retention_days", retention));
	if (tt_append(t, r, false) < 0)
		return -1;
	char prompt[128];
	snprintf(prompt, sizeof(prompt), "prompt of %s: same for everyone",
		 strcmp(run, "r-odd") ? "x" : run);
	if (wd_trace_put_blob(t, run, prompt, strlen(prompt), refs[0], &err) <
	    0)
		return -1;
	char result[128];
	snprintf(result, sizeof(result), "result of %s", run);
	if (wd_trace_put_blob(t, run, result, strlen(result), refs[1], &err) <
	    0)
		return -1;
	r = tt_rec(run, 1, "model_call");
	json_object_set_new(r, "gen_ai.request.model", json_string("m1"));
	json_object_set_new(r, "prompt_hash", json_string(refs[0]));
	if (strcmp(payloads, "hash_only"))
		json_object_set_new(r, "prompt_ref", json_string(refs[0]));
	json_object_set_new(r, "gen_ai.usage.input_tokens", json_integer(100));
	json_object_set_new(r, "gen_ai.usage.output_tokens", json_integer(7));
	json_object_set_new(r, "cost_usd", json_real(0.25));
	if (tt_append(t, r, false) < 0)
		return -1;
	r = tt_rec(run, 1, "tool_attempt");
	json_object_set_new(r, "gen_ai.tool.name", json_string("send_mail"));
	json_object_set_new(r, "gen_ai.tool.call.id", json_string("c1"));
	json_object_set_new(r, "side_effects", json_string("external"));
	if (tt_append(t, r, true) < 0)
		return -1;
	r = tt_rec(run, 1, "denial");
	json_object_set_new(r, "gen_ai.tool.name", json_string("send_mail"));
	json_object_set_new(r, "event",
			    json_pack("{s:s, s:s}", "kind", "connect", "target",
				      "10.0.0.1:443"));
	if (tt_append(t, r, false) < 0)
		return -1;
	r = tt_rec(run, 1, "tool_result");
	json_object_set_new(r, "gen_ai.tool.name", json_string("send_mail"));
	json_object_set_new(r, "status", json_string("denied"));
	json_object_set_new(r, "result_hash", json_string(refs[1]));
	if (strcmp(payloads, "hash_only"))
		json_object_set_new(r, "result_ref", json_string(refs[1]));
	if (tt_append(t, r, false) < 0)
		return -1;
	r = tt_rec(run, 2, "run_end");
	json_object_set_new(r, "status", json_string(status));
	return tt_append(t, r, false);
}

static void test_basic(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	char refs[2][72];
	int r = wd_trace_open(dir, NULL, &t, &err);
	T_OK(r == 0, "trace-open", "%s", err.msg);
	if (r)
		return;
	T_OK(write_run(t, "r1", "ok", "full", 30, refs) == 0, "trace-write-run",
	     "failed");
	json_t *recs = NULL;
	r = wd_trace_run_records(t, "r1", &recs, &err);
	T_OK(r == 0 && json_array_size(recs) == 6, "trace-run-records",
	     "r=%d n=%zu %s", r, json_array_size(recs), err.msg);
	bool order = true;
	size_t i;
	json_t *x;
	json_array_foreach(recs, i, x) order &=
	    json_integer_value(json_object_get(x, "seq")) == (json_int_t)i + 1;
	T_OK(order, "trace-seq-order", "records not in seq order");
	const char *p0 =
	    json_string_value(json_object_get(json_array_get(recs, 0), "prev"));
	T_OK(p0 && !strcmp(p0, "sha256:0000000000000000000000000000000000000"
			       "000000000000000000000000000"),
	     "trace-first-prev-zero", "prev=%s", p0 ? p0 : "null");
	json_decref(recs);
	char *data = NULL;
	size_t len = 0;
	r = wd_trace_get_blob(t, refs[1], &data, &len, &err);
	T_OK(r == 0 && len == strlen("result of r1") &&
		 !memcmp(data, "result of r1", len),
	     "trace-blob-roundtrip", "r=%d %s", r, err.msg);
	free(data);
	json_t *probs = NULL;
	r = wd_trace_verify(t, NULL, &probs, &err);
	T_OK(r == 0, "trace-verify-clean", "r=%d %s", r,
	     json_dumps(probs, JSON_COMPACT));
	json_decref(probs);
	wd_trace_close(t);

	/* reopen: the chain continues */
	r = wd_trace_open(dir, NULL, &t, &err);
	T_OK(r == 0, "trace-reopen", "%s", err.msg);
	json_t *rec = tt_rec("r2", 0, "run_start");
	uint64_t seq = 0;
	r = wd_trace_append(t, rec, true, &seq, &err);
	T_OK(r == 0 && seq == 7, "trace-reopen-seq", "seq=%llu",
	     (unsigned long long)seq);
	json_decref(rec);
	r = wd_trace_verify(t, NULL, &probs, &err);
	T_OK(r == 0, "trace-reopen-chain", "%s",
	     json_dumps(probs, JSON_COMPACT));
	json_decref(probs);

	/* queries */
	struct wd_trace_query q = {.prompt_hash = refs[0]};
	json_t *a;
	r = wd_trace_query_runs(t, &q, &a, &err);
	T_OK(r == 0 && json_array_size(a) == 1, "trace-query-prompt-hash",
	     "n=%zu", json_array_size(a));
	json_t *run = json_array_get(a, 0);
	T_OK(json_integer_value(json_object_get(run, "input_tokens")) == 100 &&
		 json_real_value(json_object_get(run, "cost_usd")) == 0.25 &&
		 !strcmp(json_string_value(json_object_get(run, "agent")),
			 "support"),
	     "trace-run-aggregates", "%s", json_dumps(run, JSON_COMPACT));
	json_decref(a);
	struct wd_trace_query q2 = {.tool = "send_mail", .status = "denied"};
	r = wd_trace_query_records(t, &q2, &a, &err);
	T_OK(r == 0 && json_array_size(a) == 1, "trace-query-tool-denied",
	     "n=%zu", json_array_size(a));
	json_decref(a);
	wd_trace_close(t);
	wd_rm_rf(dir);
	free(dir);
}

static void test_redaction(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	const char *extra[] = {"ssn-[0-9]{3}-[0-9]{2}-[0-9]{4}", NULL};
	struct wd_trace_opts o = {.redact_regexes = extra};
	if (wd_trace_open(dir, &o, &t, &err) < 0) {
		T_FAIL("trace-redact", "%s", err.msg);
		return;
	}
	json_t *r = tt_rec("rr", 1, "model_call");
	char *msg =
	    wd_asprintf("use key %s or %s; header Authorization: Bearer %s; "
			"x-api-key: %s; customer ssn-123-45-6789; task-list ok",
			SECRET_OAI, SECRET_ANT, SECRET_BEARER, SECRET_XKEY);
	json_object_set_new(r, "note", json_string(msg));
	json_object_set_new(r, "request",
			    json_pack("{s:{s:s, s:s}}", "headers",
				      "Authorization", "Basic dXNlcjpwYXNz",
				      "x-api-key", SECRET_XKEY));
	T_OK(tt_append(r ? t : t, r, true) == 0, "trace-redact-append",
	     "append failed");
	char ref[72];
	wd_trace_put_blob(t, NULL, msg, strlen(msg), ref, &err);
	wd_trace_close(t);
	char *seg = wd_asprintf("%s/trace/segments/%016d.jsonl", dir, 1);
	char *blob =
	    wd_asprintf("%s/trace/blobs/%.2s/%s", dir, ref + 7, ref + 9);
	bool leak = false;
	const char *secrets[] = {SECRET_OAI,  SECRET_ANT,     SECRET_BEARER,
				 SECRET_XKEY, "dXNlcjpwYXNz", "123-45-6789"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(secrets); i++)
		if (tt_file_has(seg, secrets[i])) {
			printf("# leaked into segment: %s\n", secrets[i]);
			leak = true;
		}
	T_OK(!leak && tt_file_has(seg, "[REDACTED]") &&
		 tt_file_has(seg, "task-list ok"),
	     "trace-redact-record", "secret reached the segment");
	/* blob is zlib: read through the API */
	struct wd_trace *t2;
	char *data = NULL;
	size_t len = 0;
	leak = true;
	if (wd_trace_open(dir, NULL, &t2, &err) == 0) {
		if (wd_trace_get_blob(t2, ref, &data, &len, &err) == 0) {
			leak = false;
			for (size_t i = 0; i < WD_ARRAY_SIZE(secrets); i++)
				if (memmem(data, len, secrets[i],
					   strlen(secrets[i])))
					leak = true;
		}
		wd_trace_close(t2);
	}
	T_OK(!leak && data && strstr(data, "Authorization: [REDACTED]"),
	     "trace-redact-blob", "blob: %s", data ? data : "(none)");
	free(data);
	free(msg);
	free(seg);
	free(blob);
	wd_rm_rf(dir);
	free(dir);
}

static void test_rotation_reindex(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	struct wd_trace_opts o = {.segment_bytes = 4096};
	if (wd_trace_open(dir, &o, &t, &err) < 0) {
		T_FAIL("trace-rotation", "%s", err.msg);
		return;
	}
	char refs[2][72];
	for (int i = 0; i < 40; i++) {
		char run[32];
		snprintf(run, sizeof(run), "run-%02d", i);
		write_run(t, run, i % 3 ? "ok" : "failed", "full", 10, refs);
	}
	wd_trace_flush(t, &err);
	char *before = tt_dump_index(dir);
	wd_trace_close(t);
	char *segdir = wd_asprintf("%s/trace/segments", dir);
	int nseg = 0;
	DIR *d = opendir(segdir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		nseg += strstr(e->d_name, ".jsonl") != NULL;
	if (d)
		closedir(d);
	T_OK(nseg > 5, "trace-rotation", "only %d segments", nseg);
	if (wd_trace_open(dir, &o, &t, &err) < 0) {
		T_FAIL("trace-reindex", "%s", err.msg);
		return;
	}
	json_t *p = NULL;
	int r = wd_trace_verify(t, NULL, &p, &err);
	T_OK(r == 0, "trace-verify-rotated", "%s", json_dumps(p, 0));
	json_decref(p);
	r = wd_trace_reindex(t, &err);
	wd_trace_close(t);
	char *after = tt_dump_index(dir);
	T_OK(r == 0 && before && after && strlen(before) > 1000 &&
		 !strcmp(before, after),
	     "trace-reindex-equals-live", "live and rebuilt index differ");
	/* delete the index entirely: rebuilt at open, same content */
	char *db = wd_asprintf("%s/trace/index.db", dir);
	unlink(db);
	char *wal = wd_asprintf("%s-wal", db);
	unlink(wal);
	free(wal);
	wal = wd_asprintf("%s-shm", db);
	unlink(wal);
	free(wal);
	if (wd_trace_open(dir, &o, &t, &err) == 0)
		wd_trace_close(t);
	char *again = tt_dump_index(dir);
	T_OK(again && !strcmp(before, again),
	     "trace-index-rebuilt-from-scratch", "differs");
	/* a damaged index file is set aside and rebuilt */
	wd_write_file(db, "this is not a database", 22, 0640);
	if (wd_trace_open(dir, &o, &t, &err) == 0)
		wd_trace_close(t);
	char *fixed = tt_dump_index(dir);
	T_OK(fixed && !strcmp(before, fixed), "trace-index-damaged-rebuilt",
	     "differs or open failed: %s", err.msg);
	free(fixed);
	/* an index of the previous format (text hash keys, user_version 0),
	 * with a row the segments do not have: dropped and rebuilt at open */
	unlink(db);
	int nbroken = tt_count_broken(dir);
	int orc = tt_db_exec(
	    db, "PRAGMA journal_mode=WAL;"
		"CREATE TABLE records(seq INTEGER PRIMARY KEY, seg INTEGER "
		"NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL, ts "
		"INTEGER NOT NULL, run_id TEXT NOT NULL, step INTEGER, "
		"type TEXT, tool TEXT, call_id TEXT, status TEXT, "
		"prompt_hash TEXT, result_hash TEXT);"
		"CREATE INDEX rec_prompt ON records(prompt_hash) WHERE "
		"prompt_hash IS NOT NULL;"
		"CREATE TABLE runs(run_id TEXT PRIMARY KEY, agent TEXT);"
		"CREATE TABLE refs(ref TEXT NOT NULL, run_id TEXT NOT "
		"NULL, "
		"seq INTEGER NOT NULL, PRIMARY KEY(ref, seq)) WITHOUT "
		"ROWID;"
		"INSERT INTO records VALUES(999999, 1, 0, 10, 0, 'ghost', "
		"0, 'run_start', NULL, NULL, NULL, NULL, NULL);"
		"INSERT INTO runs VALUES('ghost', 'x');");
	r = wd_trace_open(dir, &o, &t, &err);
	if (r == 0)
		wd_trace_close(t);
	char *upgraded = tt_dump_index(dir);
	/* rebuilt in place, not set aside as a damaged file */
	T_OK(orc == SQLITE_OK && r == 0 && upgraded &&
		 !strcmp(before, upgraded) && tt_count_broken(dir) == nbroken,
	     "trace-index-old-format-rebuilt",
	     "differs, set aside, or open failed: %s", err.msg);
	free(upgraded);
	free(before);
	free(after);
	free(again);
	free(db);
	free(segdir);
	wd_rm_rf(dir);
	free(dir);
}

/* Hashes are looked up by their first 64 bits: two hashes sharing them (and
 * a value that is not a sha256 ref at all) each find their own runs only. */
static void test_hash_key_collision(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	if (wd_trace_open(dir, NULL, &t, &err) < 0) {
		T_FAIL("trace-hash-key-collision", "%s", err.msg);
		return;
	}
	const char *h[3] = {
	    "sha256:0123456789abcdef00000000000000000000000000000000000000000"
	    "0000001",
	    "sha256:0123456789abcdef00000000000000000000000000000000000000000"
	    "0000002",
	    "not-a-sha256-prompt-id",
	};
	const char *run[3] = {"r-a", "r-b", "r-c"};
	T_OK(wd_idx_key(h[0]) == wd_idx_key(h[1]) &&
		 wd_idx_key(h[0]) != wd_idx_key(h[2]),
	     "trace-hash-key-shared", "keys differ");
	for (int i = 0; i < 3; i++) {
		json_t *r = tt_rec(run[i], 1, "model_call");
		json_object_set_new(r, "prompt_hash", json_string(h[i]));
		json_object_set_new(r, "result_hash", json_string(h[i]));
		tt_append(t, r, false);
	}
	bool ok = true;
	for (int i = 0; i < 3; i++) {
		for (int which = 0; which < 2; which++) {
			struct wd_trace_query q = {0};
			if (which)
				q.result_hash = h[i];
			else
				q.prompt_hash = h[i];
			json_t *a = NULL, *b = NULL;
			int r1 = wd_trace_query_runs(t, &q, &a, &err);
			int r2 = wd_trace_query_records(t, &q, &b, &err);
			ok &= r1 == 0 && r2 == 0 && json_array_size(a) == 1 &&
			      json_array_size(b) == 1 &&
			      !strcmp(json_string_value(json_object_get(
					  json_array_get(a, 0), "run_id")),
				      run[i]) &&
			      !strcmp(json_string_value(json_object_get(
					  json_array_get(b, 0), "run_id")),
				      run[i]);
			json_decref(a);
			json_decref(b);
		}
	}
	T_OK(ok, "trace-hash-key-collision",
	     "a hash sharing another's key returned the wrong runs");
	wd_trace_close(t);
	wd_rm_rf(dir);
	free(dir);
}

static bool problems_have(json_t *p, const char *kind, const char *file_sub,
			  bool need_offset)
{
	size_t i;
	json_t *x;
	json_array_foreach(p, i, x)
	{
		const char *k = json_string_value(json_object_get(x, "kind"));
		const char *f = json_string_value(json_object_get(x, "file"));
		if (k && f && !strcmp(k, kind) && strstr(f, file_sub) &&
		    (!need_offset || json_object_get(x, "offset")))
			return true;
	}
	return false;
}

static void flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	unsigned char c;
	if (fd < 0)
		return;
	if (pread(fd, &c, 1, off) == 1) {
		c ^= 0x04;
		(void)!pwrite(fd, &c, 1, off);
	}
	close(fd);
}

static void test_tamper(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	struct wd_trace_opts o = {.segment_bytes = 2048};
	char refs[2][72];
	wd_trace_open(dir, &o, &t, &err);
	for (int i = 0; i < 6; i++) {
		char run[32];
		snprintf(run, sizeof(run), "tam-%d", i);
		write_run(t, run, "ok", "full", 10, refs);
	}
	wd_trace_close(t);
	/* a flipped bit in the middle of the FIRST segment */
	char *seg = wd_asprintf("%s/trace/segments/%016d.jsonl", dir, 1);
	flip_byte(seg, 300);
	wd_trace_open(dir, &(struct wd_trace_opts){.read_only = true}, &t,
		      &err);
	json_t *p = NULL;
	int r = wd_trace_verify(t, NULL, &p, &err);
	T_OK(r == -EBADMSG &&
		 problems_have(p, "frame", "0000000000000001", true),
	     "trace-tamper-bitflip-segment", "r=%d %s", r,
	     json_dumps(p, JSON_COMPACT));
	json_decref(p);
	wd_trace_close(t);
	flip_byte(seg, 300); /* restore */

	/* a rewritten record with a recomputed crc: the chain catches it */
	char *buf;
	size_t len;
	wd_read_file(seg, &buf, &len);
	char *nl = memchr(buf, '\n', len);
	char *second = nl + 1;
	char *nl2 = memchr(second, '\n', len - (second - buf));
	char *m = memmem(second, nl2 - second, "\"step\":", 7);
	if (m) {
		m[7] = m[7] == '9' ? '8' : '9';
		size_t ll = nl2 - second;
		uint32_t crc = 0;
		/* recompute the crc like a careful attacker would */
		extern uint32_t wd_crc32c(uint32_t, const void *, size_t);
		crc = wd_crc32c(0, second, ll - 18);
		char hex[9];
		snprintf(hex, sizeof(hex), "%08x", crc);
		memcpy(second + ll - 10, hex, 8);
		wd_write_file(seg, buf, len, 0640);
	}
	free(buf);
	wd_trace_open(dir, &(struct wd_trace_opts){.read_only = true}, &t,
		      &err);
	r = wd_trace_verify(t, NULL, &p, &err);
	T_OK(m && r == -EBADMSG && problems_have(p, "chain", "000001", true),
	     "trace-tamper-rewrite-chain", "r=%d %s", r,
	     json_dumps(p, JSON_COMPACT));
	json_decref(p);
	wd_trace_close(t);

	/* a truncated blob and a flipped blob */
	char *b1 = wd_asprintf("%s/trace/blobs/%.2s/%s", dir, refs[0] + 7,
			       refs[0] + 9);
	char *b2 = wd_asprintf("%s/trace/blobs/%.2s/%s", dir, refs[1] + 7,
			       refs[1] + 9);
	struct stat st;
	stat(b1, &st);
	(void)!truncate(b1, st.st_size / 2);
	flip_byte(b2, 4);
	wd_trace_open(dir, &(struct wd_trace_opts){.read_only = true}, &t,
		      &err);
	r = wd_trace_verify(t, NULL, &p, &err);
	T_OK(r == -EBADMSG && problems_have(p, "blob", refs[0] + 9, false) &&
		 problems_have(p, "blob", refs[1] + 9, false),
	     "trace-tamper-blob", "%s", json_dumps(p, JSON_COMPACT));
	json_decref(p);
	/* deleting a blob is reported as missing */
	unlink(b2);
	r = wd_trace_verify(t, NULL, &p, &err);
	T_OK(r == -EBADMSG && problems_have(p, "blob", refs[1] + 9, false),
	     "trace-tamper-blob-missing", "%s", json_dumps(p, JSON_COMPACT));
	json_decref(p);
	wd_trace_close(t);

	/* truncation in the middle of the last segment, good records after
	 * it: not a torn tail, nothing is cut, verify keeps reporting it */
	char *dir2 = tt_tmpdir();
	wd_trace_open(dir2, NULL, &t, &err);
	for (int i = 0; i < 3; i++) {
		char run[32];
		snprintf(run, sizeof(run), "tr-%d", i);
		write_run(t, run, "ok", "full", 10, refs);
	}
	wd_trace_close(t);
	char *seg2 = wd_asprintf("%s/trace/segments/%016d.jsonl", dir2, 1);
	wd_read_file(seg2, &buf, &len);
	/* drop 40 bytes from the middle of line 3 */
	char *l3 = buf;
	for (int k = 0; k < 2; k++)
		l3 = memchr(l3, '\n', len - (l3 - buf)) + 1;
	size_t cut = (l3 - buf) + 20;
	memmove(buf + cut, buf + cut + 40, len - cut - 40);
	wd_write_file(seg2, buf, len - 40, 0640);
	free(buf);
	r = wd_trace_open(dir2, NULL, &t, &err);
	T_OK(r == 0, "trace-open-after-truncation", "%s", err.msg);
	json_t *recs = NULL;
	wd_trace_run_records(t, "tr-2", &recs, &err);
	T_OK(json_array_size(recs) == 6, "trace-truncation-keeps-later-records",
	     "tr-2 has %zu of 6 records", json_array_size(recs));
	json_decref(recs);
	r = wd_trace_verify(t, NULL, &p, &err);
	T_OK(r == -EBADMSG &&
		 problems_have(p, "frame", "0000000000000001", true),
	     "trace-tamper-truncate-reported", "r=%d %s", r,
	     json_dumps(p, JSON_COMPACT));
	json_decref(p);
	wd_trace_close(t);
	free(seg2);
	wd_rm_rf(dir2);
	free(dir2);
	free(b1);
	free(b2);
	free(seg);
	wd_rm_rf(dir);
	free(dir);
}

static json_t *problem_at(json_t *p, const char *kind, int64_t off)
{
	size_t i;
	json_t *x;
	json_array_foreach(p, i, x)
	{
		const char *k = json_string_value(json_object_get(x, "kind"));
		if (k && !strcmp(k, kind) &&
		    json_integer_value(json_object_get(x, "offset")) == off)
			return x;
	}
	return NULL;
}

/* byte offset of line `n` (1-based) */
static size_t line_off(const char *buf, size_t len, int n)
{
	size_t off = 0;
	for (int k = 1; k < n; k++) {
		const char *nl = memchr(buf + off, '\n', len - off);
		if (!nl)
			return len;
		off = nl - buf + 1;
	}
	return off;
}

static int count_files(const char *dir, const char *sub)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strstr(e->d_name, sub) != NULL;
	if (d)
		closedir(d);
	return n;
}

/* Damage in the middle of the LAST segment, good records after it: the
 * store opens, keeps the segment byte for byte, loses nothing, reuses no
 * seq, appends in a new segment chained to the last good record; verify
 * reports the damage at its place. A true torn tail is still cut. */
static void test_damage_last_segment(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	char refs[2][72];
	if (wd_trace_open(dir, NULL, &t, &err) < 0) {
		T_FAIL("trace-damage-open", "%s", err.msg);
		return;
	}
	for (int i = 0; i < 5; i++) {
		char run[32];
		snprintf(run, sizeof(run), "dm-%d", i);
		write_run(t, run, "ok", "full", 10, refs);
	}
	wd_trace_close(t); /* seqs 1..30, one segment */
	char *segdir = wd_asprintf("%s/trace/segments", dir);
	char *seg = wd_asprintf("%s/%016d.jsonl", segdir, 1);
	char *buf = NULL, *after = NULL;
	size_t len = 0, alen = 0;
	wd_read_file(seg, &buf, &len);
	size_t off10 = line_off(buf, len, 10);
	flip_byte(seg, off10 + 40); /* seq 10 (run dm-1) */
	free(buf);
	wd_read_file(seg, &buf, &len);

	int r = wd_trace_open(dir, NULL, &t, &err);
	T_OK(r == 0, "trace-damage-open", "%s", err.msg);
	if (r) {
		free(buf);
		free(seg);
		free(segdir);
		return;
	}
	/* nothing after the damage is lost: every other seq readable via the
	 * index (and by run) */
	int missing = 0;
	for (int i = 0; i < 5; i++) {
		char run[32];
		snprintf(run, sizeof(run), "dm-%d", i);
		json_t *recs = NULL;
		wd_trace_run_records(t, run, &recs, &err);
		missing += (i == 1 ? 5 : 6) - (int)json_array_size(recs);
		json_decref(recs);
	}
	json_t *a = NULL;
	struct wd_trace_query q = {.tool = "send_mail"};
	wd_trace_query_records(t, &q, &a, &err);
	/* tool_attempt, denial, tool_result of 5 runs; seq 10 was dm-1's
	 * denial (run_start 7, model_call 8, tool_attempt 9) */
	T_OK(missing == 0 && json_array_size(a) == 14,
	     "trace-damage-later-records-kept", "missing %d, tool rows %zu",
	     missing, json_array_size(a));
	json_decref(a);
	uint64_t seq = 0;
	json_t *rec = tt_rec("dm-new", 0, "run_start");
	r = wd_trace_append(t, rec, true, &seq, &err);
	json_decref(rec);
	T_OK(r == 0 && seq == 31, "trace-damage-no-seq-reuse", "seq=%llu",
	     (unsigned long long)seq);
	rec = tt_rec("dm-new", 1, "run_end");
	wd_trace_append(t, rec, false, NULL, &err);
	json_decref(rec);
	char *seg31 = wd_asprintf("%s/%016d.jsonl", segdir, 31);
	struct stat st;
	wd_trace_flush(t, &err);
	wd_read_file(seg, &after, &alen);
	T_OK(stat(seg31, &st) == 0 && alen == len && !memcmp(after, buf, len) &&
		 count_files(segdir, ".torn-") == 0 &&
		 count_files(segdir, ".damaged-") == 0,
	     "trace-damage-segment-kept-new-segment",
	     "new segment %s, old kept %d", stat(seg31, &st) ? "missing" : "ok",
	     alen == len && !memcmp(after, buf, len));
	json_t *p = NULL;
	r = wd_trace_verify(t, NULL, &p, &err);
	/* exactly one problem: the damaged line, at its place; the new
	 * segment chains to the last good record */
	T_OK(r == -EBADMSG && json_array_size(p) == 1 &&
		 problem_at(p, "frame", off10) &&
		 problems_have(p, "frame", "0000000000000001", true),
	     "trace-damage-verify-location", "r=%d %s", r,
	     json_dumps(p, JSON_COMPACT));
	json_decref(p);
	char *live = tt_dump_index(dir);
	r = wd_trace_reindex(t, &err);
	char *rebuilt = tt_dump_index(dir);
	T_OK(r == 0 && live && rebuilt && !strcmp(live, rebuilt),
	     "trace-damage-reindex-equals-live", "r=%d", r);
	free(live);
	free(rebuilt);
	wd_trace_close(t);

	/* reopen: the chain goes on in the new segment */
	r = wd_trace_open(dir, NULL, &t, &err);
	seq = 0;
	if (r == 0) {
		rec = tt_rec("dm-new", 2, "flag");
		r = wd_trace_append(t, rec, true, &seq, &err);
		json_decref(rec);
		r = r ? r : wd_trace_verify(t, NULL, &p, &err);
		T_OK(r == -EBADMSG && seq == 33 && json_array_size(p) == 1,
		     "trace-damage-reopen-appends-chain", "r=%d seq=%llu %s", r,
		     (unsigned long long)seq, json_dumps(p, JSON_COMPACT));
		json_decref(p);
		wd_trace_close(t);
	} else {
		T_FAIL("trace-damage-reopen-appends-chain", "%s", err.msg);
	}
	/* a reader without the index skips the damaged line too */
	r = wd_trace_open(
	    dir, &(struct wd_trace_opts){.read_only = true, .no_index = true},
	    &t, &err);
	json_t *recs = NULL;
	if (r == 0) {
		wd_trace_run_records(t, "dm-4", &recs, &err);
		wd_trace_close(t);
	}
	T_OK(json_array_size(recs) == 6, "trace-damage-scan-reader",
	     "dm-4 has %zu records without the index", json_array_size(recs));
	json_decref(recs);

	/* a true torn tail (a half line, then a bad complete line, nothing
	 * good after them) of the new last segment is still cut */
	wd_read_file(seg31, &after, &alen);
	size_t good_len = alen;
	int fd = open(seg31, O_WRONLY | O_APPEND);
	(void)!write(fd, "{\"seq\":34,\"garbage\":1}\n{\"seq\":35,\"ts\"", 38);
	close(fd);
	free(after);
	after = NULL;
	r = wd_trace_open(dir, NULL, &t, &err);
	seq = 0;
	if (r == 0) {
		rec = tt_rec("dm-new", 3, "run_end");
		wd_trace_append(t, rec, true, &seq, &err);
		json_decref(rec);
		r = wd_trace_verify(t, NULL, &p, &err);
		json_decref(p);
		wd_trace_close(t);
	}
	stat(seg31, &st);
	T_OK(seq == 34 && count_files(segdir, ".torn-") == 1 &&
		 st.st_size > (off_t)good_len && r == -EBADMSG,
	     "trace-torn-tail-still-cut", "seq=%llu torn files %d r=%d",
	     (unsigned long long)seq, count_files(segdir, ".torn-"), r);
	free(seg31);
	free(buf);
	free(after);
	free(seg);
	free(segdir);
	wd_rm_rf(dir);
	free(dir);
}

static bool blob_exists(const char *dir, const char *ref)
{
	char *p = wd_asprintf("%s/trace/blobs/%.2s/%s", dir, ref + 7, ref + 9);
	struct stat st;
	bool r = stat(p, &st) == 0;
	free(p);
	return r;
}

static void test_gc(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	wd_trace_open(dir, NULL, &t, &err);
	char ok_refs[2][72], fail_refs[2][72], flag_refs[2][72],
	    long_refs[2][72], ho_refs[2][72], odd_refs[2][72];
	/* r-ok, r-fail, r-flag share the prompt blob; r-odd has its own */
	write_run(t, "r-ok", "ok", "full", 30, ok_refs);
	write_run(t, "r-fail", "failed", "full", 30, fail_refs);
	write_run(t, "r-flag", "ok", "full", 30, flag_refs);
	tt_append(t, tt_rec("r-flag", 3, "flag"), false);
	write_run(t, "r-long", "ok", "full", 400, long_refs);
	write_run(t, "r-odd", "ok", "full", 30, odd_refs);
	write_run(t, "r-ho", "ok", "hash_only", 30, ho_refs);
	T_OK(!blob_exists(dir, ho_refs[1]), "trace-hash-only-no-blob",
	     "hash_only run stored a payload");
	int n =
	    wd_trace_gc(t, wd_wall_ns() + 10ull * 86400 * 1000000000ull, &err);
	T_OK(n == 0, "trace-gc-nothing-before-retention", "deleted %d", n);
	n = wd_trace_gc(t, wd_wall_ns() + 31ull * 86400 * 1000000000ull, &err);
	/* dropped: r-ok result, r-odd prompt + result. The shared prompt
	 * stays (failed/flagged runs keep it). */
	T_OK(n == 3, "trace-gc-count", "deleted %d (%s)", n, err.msg);
	T_OK(!blob_exists(dir, ok_refs[1]) && !blob_exists(dir, odd_refs[0]) &&
		 !blob_exists(dir, odd_refs[1]),
	     "trace-gc-drops-expired", "expired blobs still there");
	T_OK(blob_exists(dir, ok_refs[0]) && blob_exists(dir, fail_refs[1]) &&
		 blob_exists(dir, flag_refs[1]) &&
		 blob_exists(dir, long_refs[1]),
	     "trace-gc-keeps-failed-flagged-shared-unexpired",
	     "a kept blob was deleted");
	json_t *recs;
	wd_trace_run_records(t, "r-ok", &recs, &err);
	T_OK(json_array_size(recs) == 7, "trace-gc-keeps-metadata",
	     "r-ok has %zu records", json_array_size(recs));
	json_decref(recs);
	json_t *p;
	int r = wd_trace_verify(t, NULL, &p, &err);
	T_OK(r == 0, "trace-verify-after-gc", "%s", json_dumps(p, 0));
	json_decref(p);
	n = wd_trace_gc(t, wd_wall_ns() + 31ull * 86400 * 1000000000ull, &err);
	T_OK(n == 0, "trace-gc-idempotent", "deleted %d", n);
	wd_trace_close(t);
	wd_rm_rf(dir);
	free(dir);
}

/* Metadata retention: whole old segments go (failed runs' too), runs are
 * never split, the chain stays verifiable from the `gc` record, index rows
 * go and the index equals one rebuilt from the remaining segments. */
static void test_gc_metadata(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	struct wd_trace_opts o = {.segment_bytes = 4096};
	char refs[2][72], new_refs[2][72];
	if (wd_trace_open(dir, &o, &t, &err) < 0) {
		T_FAIL("trace-gc-metadata", "%s", err.msg);
		return;
	}
	for (int i = 0; i < 12; i++) {
		char run[32];
		snprintf(run, sizeof(run), "old-%02d", i);
		write_run(t, run, i % 3 ? "ok" : "failed", "full", 30, refs);
	}
	/* a run that starts before the cutoff and ends after it */
	tt_append(t, tt_rec("straddle", 0, "run_start"), false);
	wd_trace_flush(t, &err);
	usleep(20000);
	uint64_t mid = wd_wall_ns();
	usleep(20000);
	tt_append(t, tt_rec("straddle", 1, "run_end"), false);
	for (int i = 0; i < 6; i++) {
		char run[32];
		snprintf(run, sizeof(run), "new-%02d", i);
		write_run(t, run, "ok", "full", 1000, new_refs);
	}
	wd_trace_flush(t, &err);
	uint64_t day = 86400ull * 1000000000ull;
	struct wd_trace_gc_stats st;
	/* before 395 days nothing goes */
	struct wd_trace_gc_opts go = {.now_ns = mid + 394 * day};
	int r = wd_trace_gc_ex(t, &go, &st, &err);
	T_OK(r == 0 && st.segments == 0, "trace-gc-metadata-not-yet",
	     "r=%d segments %u", r, st.segments);
	/* cutoff between the old runs and the new ones (default 395 days) */
	go.now_ns = mid + 395 * day;
	r = wd_trace_gc_ex(t, &go, &st, &err);
	T_OK(r == 0 && st.segments > 0 && st.records > 0,
	     "trace-gc-metadata-drops-segments", "r=%d segments %u (%s)", r,
	     st.segments, err.msg);
	json_t *recs = NULL;
	wd_trace_run_records(t, "old-00", &recs, &err);
	size_t n_old0 = json_array_size(recs);
	json_decref(recs);
	wd_trace_run_records(t, "straddle", &recs, &err);
	size_t n_str = json_array_size(recs);
	json_decref(recs);
	wd_trace_run_records(t, "new-05", &recs, &err);
	size_t n_new = json_array_size(recs);
	json_decref(recs);
	/* old-00 failed: its metadata expires too (only payloads stay) */
	T_OK(n_old0 == 0 && n_str == 2 && n_new == 6,
	     "trace-gc-metadata-runs-whole",
	     "old-00 %zu records, straddle %zu, new-05 %zu", n_old0, n_str,
	     n_new);
	json_t *a = NULL;
	struct wd_trace_query q = {.agent = "support"};
	wd_trace_query_runs(t, &q, &a, &err);
	bool no_old0 = true;
	size_t i;
	json_t *x;
	json_array_foreach(a, i, x) no_old0 &=
	    strcmp(json_string_value(json_object_get(x, "run_id")), "old-00");
	T_OK(no_old0 && json_array_size(a) >= 6 && json_array_size(a) < 18,
	     "trace-gc-metadata-index-rows", "%zu runs listed, old-00 %s",
	     json_array_size(a), no_old0 ? "gone" : "still there");
	json_decref(a);
	char *seg1 = wd_asprintf("%s/trace/segments/%016d.jsonl", dir, 1);
	struct stat sb;
	T_OK(stat(seg1, &sb) < 0 && blob_exists(dir, new_refs[1]),
	     "trace-gc-metadata-files",
	     "segment 1 still there or new blob "
	     "gone");
	free(seg1);
	json_t *p = NULL;
	r = wd_trace_verify(t, NULL, &p, &err);
	T_OK(r == 0, "trace-gc-metadata-verify", "r=%d %s", r,
	     json_dumps(p, JSON_COMPACT));
	json_decref(p);
	char *live = tt_dump_index(dir);
	r = wd_trace_reindex(t, &err);
	char *rebuilt = tt_dump_index(dir);
	T_OK(r == 0 && live && rebuilt && strlen(live) > 500 &&
		 !strcmp(live, rebuilt),
	     "trace-gc-metadata-reindex-equals-live", "r=%d", r);
	free(live);
	free(rebuilt);
	r = wd_trace_gc_ex(t, &go, &st, &err);
	T_OK(r == 0 && st.segments == 0, "trace-gc-metadata-idempotent",
	     "r=%d segments %u", r, st.segments);
	wd_trace_close(t);
	/* reopen: the chain goes on and still verifies */
	r = wd_trace_open(dir, &o, &t, &err);
	if (r == 0) {
		r = tt_append(t, tt_rec("after-gc", 0, "run_start"), true);
		r = r ? r : wd_trace_verify(t, NULL, &p, &err);
		T_OK(r == 0, "trace-gc-metadata-reopen-verify", "r=%d %s", r,
		     json_dumps(p, JSON_COMPACT));
		json_decref(p);
		/* a chain that starts after records no gc record names is
		 * reported */
		char *g = NULL;
		size_t gl = 0;
		uint64_t *segs = NULL;
		size_t ns = 0;
		wd_trace_list_segments(t, &segs, &ns);
		char *first = ns ? wd_trace_seg_path(t, segs[0]) : NULL;
		char *keep = wd_asprintf("%s.bak", first ? first : "x");
		if (first && wd_read_file(first, &g, &gl) == 0) {
			wd_write_file(keep, g, gl, 0640);
			unlink(first);
		}
		r = wd_trace_verify(t, NULL, &p, &err);
		T_OK(r == -EBADMSG && problems_have(p, "chain", "", true),
		     "trace-gc-metadata-unnamed-gap-reported", "r=%d %s", r,
		     json_dumps(p, JSON_COMPACT));
		json_decref(p);
		free(g);
		free(first);
		free(keep);
		free(segs);
		wd_trace_close(t);
	} else {
		T_FAIL("trace-gc-metadata-reopen-verify", "%s", err.msg);
	}
	wd_rm_rf(dir);
	free(dir);
}

struct thr {
	struct wd_trace *t;
	int id, n, fails;
};

static void *thr_main(void *a)
{
	struct thr *x = a;
	char run[32];
	snprintf(run, sizeof(run), "thr-%d", x->id);
	for (int i = 0; i < x->n; i++) {
		json_t *r = tt_rec(run, i, "model_call");
		json_object_set_new(r, "i", json_integer(i));
		if (tt_append(x->t, r, i % 50 == 0) < 0)
			x->fails++;
	}
	return NULL;
}

static void test_threads(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	wd_trace_open(dir, &(struct wd_trace_opts){.segment_bytes = 1 << 20},
		      &t, &err);
	pthread_t th[4];
	struct thr x[4];
	for (int i = 0; i < 4; i++) {
		x[i] = (struct thr){t, i, 5000, 0};
		pthread_create(&th[i], NULL, thr_main, &x[i]);
	}
	int fails = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		fails += x[i].fails;
	}
	json_t *p = NULL;
	int r = wd_trace_verify(t, NULL, &p, &err);
	json_t *recs = NULL;
	wd_trace_run_records(t, "thr-2", &recs, &err);
	bool in_order = json_array_size(recs) == 5000;
	for (size_t i = 0; in_order && i < 5000; i++)
		in_order = json_integer_value(json_object_get(
			       json_array_get(recs, i), "i")) == (json_int_t)i;
	T_OK(!fails && r == 0 && in_order, "trace-concurrent-appends",
	     "fails=%d verify=%d order=%d", fails, r, in_order);
	json_decref(p);
	json_decref(recs);
	T_OK(wd_trace_healthy(t, NULL), "trace-healthy", "unhealthy");
	wd_trace_close(t);
	wd_rm_rf(dir);
	free(dir);
}

struct ovthr {
	struct wd_trace *t;
	int id, fails;
};

static void *ov_main(void *a)
{
	struct ovthr *x = a;
	char refs[2][72], run[32];
	for (int i = 0; i < 30; i++) {
		snprintf(run, sizeof(run), "ov-%d-%02d", x->id, i);
		x->fails += write_run(x->t, run, i % 4 ? "ok" : "failed",
				      "full", 10, refs) < 0;
	}
	return NULL;
}

/* The index lags behind the writer; past its queue limit it catches up from
 * the segments, and readers still see every earlier append. */
static void test_index_overflow(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	size_t old_limit = wd_trace_iq_limit;
	unsigned long ov0 = wd_trace_iq_overflows;
	wd_trace_iq_limit = 3000; /* a few records */
	if (wd_trace_open(dir, NULL, &t, &err) < 0) {
		T_FAIL("trace-index-overflow", "%s", err.msg);
		wd_trace_iq_limit = old_limit;
		return;
	}
	pthread_t th[4];
	struct ovthr x[4];
	for (int i = 0; i < 4; i++) {
		x[i] = (struct ovthr){t, i, 0};
		pthread_create(&th[i], NULL, ov_main, &x[i]);
	}
	int fails = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		fails += x[i].fails;
	}
	/* no flush: the queries themselves wait for the index */
	json_t *runs = NULL, *recs = NULL;
	struct wd_trace_query q = {.agent = "support"};
	int r1 = wd_trace_query_runs(t, &q, &runs, &err);
	int r2 = wd_trace_run_records(t, "ov-3-29", &recs, &err);
	size_t nruns = json_array_size(runs), nrecs = json_array_size(recs);
	unsigned long ov = wd_trace_iq_overflows - ov0;
	T_OK(!fails && r1 == 0 && r2 == 0 && nruns == 120 && nrecs == 6 &&
		 ov > 0,
	     "trace-index-overflow-visible",
	     "fails=%d runs=%zu records=%zu overflows=%lu", fails, nruns, nrecs,
	     ov);
	json_decref(runs);
	json_decref(recs);
	wd_trace_flush(t, &err);
	char *before = tt_dump_index(dir);
	int r = wd_trace_reindex(t, &err);
	char *after = tt_dump_index(dir);
	T_OK(r == 0 && before && after && strlen(before) > 10000 &&
		 !strcmp(before, after),
	     "trace-index-overflow-equals-rebuilt",
	     "index built through overflow differs from a rebuild");
	free(before);
	free(after);
	wd_trace_close(t);
	wd_trace_iq_limit = old_limit;
	wd_rm_rf(dir);
	free(dir);
}

static void test_bad_input(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	wd_trace_open(dir, NULL, &t, &err);
	json_t *r = json_pack("{s:s}", "type", "x");
	int e = wd_trace_append(t, r, false, NULL, &err);
	T_OK(e == -EINVAL, "trace-append-rejects-incomplete", "e=%d", e);
	json_decref(r);
	char *d = NULL;
	size_t l;
	e = wd_trace_get_blob(t, "sha256:../../etc/passwd", &d, &l, &err);
	T_OK(e == -EINVAL, "trace-get-blob-rejects-bad-ref", "e=%d", e);
	wd_trace_close(t);
	wd_rm_rf(dir);
	free(dir);
}

/* Blobs are settled by the writer before any batch that may name them:
 * readable at once through the API, on disk under their name once a record
 * after them is written, and never named by a record that reached a
 * segment before they did. */
static void test_blob_order(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	if (wd_trace_open(dir, NULL, &t, &err) < 0) {
		T_FAIL("trace-blob-order", "open: %s", err.msg);
		free(dir);
		return;
	}
	char ref[72], *data = NULL;
	size_t len = 0;
	const char *payload = "a blob read back before any record names it";
	int r = wd_trace_put_blob(t, NULL, payload, strlen(payload), ref, &err);
	int lr = r ? r : wd_trace_load_blob(t, ref + 7, &data, &len);
	T_OK(lr == 0 && len == strlen(payload) && !memcmp(data, payload, len),
	     "trace-blob-readable-at-once", "put %d load %d", r, lr);
	free(data);
	bool all_there = true;
	for (int i = 0; i < 300; i++) {
		char p[64], rf[72];
		snprintf(p, sizeof(p), "payload %d", i);
		if (wd_trace_put_blob(t, "ord", p, strlen(p), rf, &err) < 0)
			break;
		json_t *rec = tt_rec("ord", i, "tool_result");
		json_object_set_new(rec, "result_ref", json_string(rf));
		tt_append(t, rec, false); /* takes rec */
		/* once its record is visible, the blob is in place */
		if (i % 50 == 49) {
			wd_trace_visible(t);
			char *path = wd_asprintf("%s/trace/blobs/%.2s/%s", dir,
						 rf + 7, rf + 9);
			struct stat st;
			all_there &= stat(path, &st) == 0 && st.st_size > 0;
			free(path);
		}
	}
	T_OK(all_there, "trace-blob-before-record",
	     "a visible record named a blob not yet in place");
	wd_trace_close(t);
	json_t *probs = NULL;
	r = wd_trace_open(dir, &(struct wd_trace_opts){.read_only = true}, &t,
			  &err);
	if (r == 0) {
		r = wd_trace_verify(t, NULL, &probs, &err);
		wd_trace_close(t);
	}
	T_OK(r == 0, "trace-blob-order-verify", "verify %d", r);
	json_decref(probs);
	wd_rm_rf(dir);
	free(dir);
}

/* Index format 5: a run's replays (runs.replay_of from run_start's
 * replay_of{run_id, from_step}, replay_converged/replay_diverged_at from
 * run_end's replay{}), its end reason, a refusal's check: found by query
 * alone, the same after a rebuild from the segments. */
static void test_index_replay(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	if (wd_trace_open(dir, NULL, &t, &err) < 0) {
		T_FAIL("trace-index-replay", "%s", err.msg);
		return;
	}
	tt_append(t, tt_rec("orig", 0, "run_start"), false);
	json_t *r = tt_rec("orig", 3, "run_end");
	json_object_set_new(r, "status", json_string("stopped"));
	json_object_set_new(
	    r, "reason", json_string("token_budget reached (limit 5, used 7)"));
	tt_append(t, r, false);
	for (int i = 0; i < 2; i++) {
		const char *id = i ? "rep-b" : "rep-a";
		r = tt_rec(id, 0, "run_start");
		json_object_set_new(r, "replay_of",
				    json_pack("{s:s,s:i}", "run_id", "orig",
					      "from_step", 2 + i));
		tt_append(t, r, false);
		r = tt_rec(id, 2, "tool_result");
		json_object_set_new(r, "gen_ai.tool.name", json_string("x"));
		json_object_set_new(r, "status", json_string("denied"));
		json_object_set_new(r, "check", json_string("authz"));
		tt_append(t, r, false);
		r = tt_rec(id, 3, "run_end");
		json_object_set_new(r, "status", json_string("ok"));
		json_object_set_new(r, "replay",
				    i ? json_pack("{s:b,s:i,s:s}", "converged",
						  0, "diverged_at", 3,
						  "summary", "x")
				      : json_pack("{s:b,s:s}", "converged", 1,
						  "summary", "converged"));
		tt_append(t, r, false);
	}
	tt_append(t, tt_rec("other", 0, "run_start"), true);
	for (int pass = 0; pass < 2; pass++) {
		const char *ph = pass ? "-rebuilt" : "";
		json_t *a = NULL;
		struct wd_trace_query q = {.replay_of = "orig"};
		int rc = wd_trace_query_runs(t, &q, &a, &err);
		char *got =
		    rc ? wd_strdup(err.msg) : json_dumps(a, JSON_COMPACT);
		json_t *x = json_array_get(a, 0), *y = json_array_get(a, 1);
		T_OK(
		    !rc && json_array_size(a) == 2 &&
			!strcmp(json_string_value(json_object_get(x, "run_id")),
				"rep-a") &&
			json_integer_value(json_object_get(x, "replay_from")) ==
			    2 &&
			json_integer_value(
			    json_object_get(x, "replay_converged")) == 1 &&
			json_is_null(
			    json_object_get(x, "replay_diverged_at")) &&
			json_integer_value(
			    json_object_get(y, "replay_diverged_at")) == 3 &&
			json_integer_value(
			    json_object_get(y, "replay_converged")) == 0,
		    pass ? "trace-index-replay-of-rebuilt"
			 : "trace-index-replay-of",
		    "%s%s", got, ph);
		free(got);
		json_decref(a);
		a = NULL;
		q = (struct wd_trace_query){.status = "stopped"};
		rc = wd_trace_query_runs(t, &q, &a, &err);
		T_OK(!rc && json_array_size(a) == 1 &&
			 !strcmp(json_string_value(json_object_get(
				     json_array_get(a, 0), "reason")),
				 "token_budget reached (limit 5, used 7)"),
		     pass ? "trace-index-reason-rebuilt" : "trace-index-reason",
		     "rc=%d n=%zu", rc, json_array_size(a));
		json_decref(a);
		a = NULL;
		q = (struct wd_trace_query){.status = "denied"};
		rc = wd_trace_query_records(t, &q, &a, &err);
		T_OK(!rc && json_array_size(a) == 2 &&
			 !strcmp(json_string_value(json_object_get(
				     json_array_get(a, 1), "check")),
				 "authz"),
		     pass ? "trace-index-check-rebuilt" : "trace-index-check",
		     "rc=%d n=%zu", rc, json_array_size(a));
		json_decref(a);
		if (!pass && wd_trace_reindex(t, &err) < 0)
			T_FAIL("trace-index-replay-reindex", "%s", err.msg);
	}
	wd_trace_close(t);
	free(dir);
}

int main(void)
{
	test_basic();
	test_redaction();
	test_rotation_reindex();
	test_hash_key_collision();
	test_tamper();
	test_damage_last_segment();
	test_gc();
	test_gc_metadata();
	test_threads();
	test_index_overflow();
	test_bad_input();
	test_blob_order();
	test_index_replay();
	tt_cleanup();
	return T_DONE();
}
