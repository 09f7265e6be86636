/* The store's records as shipped (trace/lines.c, fleet/ship.c): the lines
 * wd_trace_lines() hands out are the segments' bytes, in seq order, after
 * a cursor and up to a limit, with the refs each record names and its
 * run's payloads mode; wd_trace_blob_stored() gives a blob's file as
 * stored (zlib, inflating to the ref's sha256), -ENOENT for a hash_only
 * run's; the chain rule (wd_trace_chain_next) accepts the lines in order
 * and names a changed line, a forged prev and a missing seq. */
#include "t.h"
#include "test_trace_util.h"
#include "trace/trace_int.h"

#include <sqlite3.h>
#include <zlib.h>

#define DEF_A                                                                  \
	"sha256:"                                                              \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define DEF_T                                                                  \
	"sha256:"                                                              \
	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static int run(struct wd_trace *t, const char *id, const char *payloads,
	       char ref[WD_TRACE_REF_LEN])
{
	struct wd_err err = {0};
	json_t *r = tt_rec(id, 0, "run_start");
	json_object_set_new(r, "trace",
			    json_pack("{s:s}", "payloads", payloads));
	/* the definitions it ran with, by ref, one level down */
	json_object_set_new(r, "definitions",
			    json_pack("{s:{s:s}, s:{s:{s:s}}}", "agent", "ref",
				      DEF_A, "tools", "echo", "ref", DEF_T));
	if (tt_append(t, r, false) < 0)
		return -1;
	char text[64];
	snprintf(text, sizeof(text), "the prompt of %s", id);
	if (wd_trace_put_blob(t, id, text, strlen(text), ref, &err) < 0)
		return -1;
	r = tt_rec(id, 1, "model_call");
	json_object_set_new(r, "prompt_ref", json_string(ref));
	if (tt_append(t, r, true) < 0)
		return -1;
	r = tt_rec(id, 1, "run_end");
	json_object_set_new(r, "status", json_string("ok"));
	return tt_append(t, r, true);
}

int main(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	char rf[WD_TRACE_REF_LEN], rh[WD_TRACE_REF_LEN];
	int r = wd_trace_open(dir, NULL, &t, &err);
	T_OK(r == 0, "open", "%s", err.msg);
	if (r)
		return T_DONE();
	T_OK(run(t, "full1", "full", rf) == 0 &&
		 run(t, "secret1", "hash_only", rh) == 0,
	     "write", "append failed");
	wd_trace_flush(t, NULL);
	/* the index catches up with what was written */
	json_t *rows = NULL;
	struct wd_trace_query q = {0};
	wd_trace_query_records(t, &q, &rows, &err);
	json_decref(rows);

	json_t *lines = NULL;
	r = wd_trace_lines(t, 0, 0, &lines, &err);
	T_OK(r == 0 && json_array_size(lines) == 6, "lines-all",
	     "r %d n %zu: %s", r, json_array_size(lines), err.msg);
	cleanup_free char *seg =
	    wd_asprintf("%s/trace/segments/0000000000000001.jsonl", dir);
	cleanup_free char *buf = NULL;
	size_t len = 0;
	wd_read_file(seg, &buf, &len);
	struct wd_buf joined = {0};
	size_t i;
	json_t *l;
	bool order = true;
	json_array_foreach(lines, i, l)
	{
		wd_buf_printf(&joined, "%s\n",
			      json_string_value(json_object_get(l, "line")));
		order &= json_integer_value(json_object_get(l, "seq")) ==
			 (json_int_t)i + 1;
	}
	T_OK(order, "lines-seq-order", "not 1..6");
	T_OK(buf && joined.len == len && !memcmp(joined.data, buf, len),
	     "lines-are-segment-bytes", "%zu vs %zu bytes", joined.len, len);
	json_t *mc = json_array_get(lines, 1);
	T_OK(json_array_size(json_object_get(mc, "refs")) == 1 &&
		 !strcmp(json_string_value(
			     json_array_get(json_object_get(mc, "refs"), 0)),
			 rf) &&
		 !strcmp(json_string_value(json_object_get(mc, "payloads")),
			 "full"),
	     "lines-refs-payloads", "%s", "the model_call's refs or mode");
	json_t *dr = json_object_get(json_array_get(lines, 0), "def_refs");
	T_OK(json_array_size(dr) == 2 &&
		 !strcmp(json_string_value(json_array_get(dr, 0)), DEF_A) &&
		 !strcmp(json_string_value(json_array_get(dr, 1)), DEF_T),
	     "lines-definition-refs", "%zu refs", json_array_size(dr));
	T_OK(!strcmp(json_string_value(
			 json_object_get(json_array_get(lines, 4), "payloads")),
		     "hash_only"),
	     "lines-hash-only-mode", "run secret1's mode");
	json_t *page = NULL;
	r = wd_trace_lines(t, 2, 2, &page, &err);
	T_OK(r == 0 && json_array_size(page) == 2 &&
		 json_integer_value(
		     json_object_get(json_array_get(page, 0), "seq")) == 3,
	     "lines-after-limit", "r %d n %zu", r, json_array_size(page));
	json_decref(page);
	r = wd_trace_lines(t, 6, 10, &page, &err);
	T_OK(r == 0 && json_array_size(page) == 0, "lines-none-after-last",
	     "r %d n %zu", r, json_array_size(page));
	json_decref(page);

	/* the blob as stored: zlib of the payload whose sha256 is the ref */
	char *data = NULL;
	size_t dl = 0;
	r = wd_trace_blob_stored(t, rf, &data, &dl);
	unsigned char out[256];
	uLongf ol = sizeof(out);
	bool inflated =
	    r == 0 && uncompress(out, &ol, (unsigned char *)data, dl) == Z_OK;
	char h[WD_TRACE_REF_LEN] = "";
	if (inflated)
		wd_trace_ref_of(out, ol, h);
	T_OK(inflated && !strcmp(h, rf), "blob-stored-inflates-to-ref",
	     "r %d %s", r, h);
	free(data);
	data = NULL;
	r = wd_trace_blob_stored(t, rh, &data, &dl);
	T_OK(r == -ENOENT, "blob-hash-only-absent", "r %d", r);
	free(data);
	T_OK(wd_trace_blob_stored(t, "sha256:../../x", &data, &dl) == -EINVAL,
	     "blob-bad-ref", "accepted");

	/* the chain rule over the lines */
	struct wd_trace_chain ch;
	wd_trace_chain_init(&ch);
	unsigned bad = 0;
	json_array_foreach(lines, i, l)
	{
		json_t *rec;
		const char *s = json_string_value(json_object_get(l, "line"));
		bad |= wd_trace_chain_next(&ch, s, strlen(s), &rec);
		json_decref(rec);
	}
	T_OK(bad == 0 && ch.next_seq == 7, "chain-intact", "bad %u next %llu",
	     bad, (unsigned long long)ch.next_seq);
	/* 1, 2, then 4: 4's prev is 3's hash, and 3 is missing */
	wd_trace_chain_init(&ch);
	unsigned got[3];
	const size_t pick[3] = {0, 1, 3};
	for (int k = 0; k < 3; k++) {
		json_t *rec;
		const char *s = json_string_value(
		    json_object_get(json_array_get(lines, pick[k]), "line"));
		got[k] = wd_trace_chain_next(&ch, s, strlen(s), &rec);
		json_decref(rec);
	}
	T_OK(got[0] == 0 && got[1] == 0 &&
		 got[2] == (WD_CHAIN_PREV | WD_CHAIN_SEQ),
	     "chain-gap", "%u %u %u", got[0], got[1], got[2]);
	/* a changed byte: its frame fails */
	char *c = wd_strdup(json_string_value(
	    json_object_get(json_array_get(lines, 0), "line")));
	c[10] ^= 1;
	wd_trace_chain_init(&ch);
	json_t *rec;
	T_OK(wd_trace_chain_next(&ch, c, strlen(c), &rec) == WD_CHAIN_FRAME &&
		 !rec,
	     "chain-frame", "accepted a changed line");
	free(c);
	json_decref(lines);

	/* a damaged index row (a length past its segment's end, -1 read as
	 * 2^64-1) is a bad batch, not a read past the segment or a wrapped
	 * allocation */
	cleanup_free char *ip = wd_asprintf("%s/trace/index.db", dir);
	sqlite3 *db = NULL;
	T_OK(sqlite3_open(ip, &db) == SQLITE_OK &&
		 sqlite3_exec(db, "UPDATE records SET len = -1 WHERE seq = 3",
			      NULL, NULL, NULL) == SQLITE_OK,
	     "index-damaged", "%s", db ? sqlite3_errmsg(db) : "open");
	sqlite3_close(db);
	page = NULL;
	r = wd_trace_lines(t, 0, 0, &page, &err);
	T_OK(r == -EBADMSG && strstr(err.msg, "outside segment"),
	     "lines-bad-span-refused", "r %d: %s", r, err.msg);
	json_decref(page);
	wd_buf_free(&joined);
	wd_trace_close(t);
	tt_cleanup();
	free(dir);
	return T_DONE();
}
