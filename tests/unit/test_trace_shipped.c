/* Another node's trace as the fleet database holds it (fleet/trace_reads.c):
 * a blob file's bytes are handed back only when they inflate to the
 * content their ref names (wd_trace_blob_decode), and a run's payloads
 * read from records held elsewhere (wd_trace_records_payloads) look up
 * only the refs those records name at the step asked, none for a
 * hash_only run. */
#include "t.h"
#include "trace/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct calls {
	int n;
	char last[WD_TRACE_REF_LEN];
	struct wd_trace *t;
};

/* a blob source that counts its lookups and reads the store's bytes as
 * the shipper copies them */
static int src_blob(void *ctx, const char *ref, char **data, size_t *len,
		    struct wd_err *err)
{
	struct calls *c = ctx;
	c->n++;
	snprintf(c->last, sizeof(c->last), "%s", ref);
	return wd_trace_get_blob(c->t, ref, data, len, err);
}

static char *blob_file(struct wd_trace *t, const char *ref, size_t *len)
{
	cleanup_free char *p =
	    wd_asprintf("%s/blobs/%.2s/%s", wd_trace_dir(t), ref + 7, ref + 9);
	char *z = NULL;
	if (wd_read_file(p, &z, len))
		return NULL;
	return z;
}

int main(void)
{
	char dir[] = "/tmp/wd-shipped-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	struct wd_trace *t = NULL;
	struct wd_err err = {0};
	int r = wd_trace_open(dir, NULL, &t, &err);
	T_OK(r == 0, "shipped-open", "%s", err.msg);
	if (r)
		return T_DONE();
	const char text[] = "the prompt of another node's run";
	char ref[WD_TRACE_REF_LEN], other[WD_TRACE_REF_LEN];
	r = wd_trace_put_blob(t, NULL, text, strlen(text), ref, &err);
	T_OK(r == 0, "shipped-put", "%s", err.msg);
	r = wd_trace_put_blob(t, NULL, "another", 7, other, &err);
	/* its file as the shipper reads it: once the store settled it */
	char *tmp = NULL;
	size_t tlen = 0;
	if (!wd_trace_get_blob(t, ref, &tmp, &tlen, &err))
		free(tmp);
	size_t zlen = 0;
	cleanup_free char *z = blob_file(t, ref, &zlen);
	T_OK(z && zlen > 0, "shipped-blob-file", "no blob file for %s", ref);
	if (!z)
		return T_DONE();

	char *data = NULL;
	size_t len = 0;
	r = wd_trace_blob_decode(ref, z, zlen, &data, &len, &err);
	T_OK(r == 0 && len == strlen(text) && !memcmp(data, text, len),
	     "shipped-decode", "rc %d: %s", r, err.msg);
	free(data);
	data = NULL;
	/* the bytes of one blob under another's ref: not that content */
	r = wd_trace_blob_decode(other, z, zlen, &data, &len, &err);
	T_OK(r == -EBADMSG && !data, "shipped-decode-wrong-ref", "rc %d", r);
	r = wd_trace_blob_decode(ref, z, zlen - 1, &data, &len, &err);
	T_OK(r == -EBADMSG && !data, "shipped-decode-truncated", "rc %d", r);
	z[zlen / 2] ^= 0x55;
	r = wd_trace_blob_decode(ref, z, zlen, &data, &len, &err);
	T_OK(r == -EBADMSG && !data, "shipped-decode-corrupt", "rc %d", r);
	r = wd_trace_blob_decode("sha256:../../etc", z, zlen, &data, &len,
				 &err);
	T_OK(r == -EINVAL && !data, "shipped-decode-bad-ref", "rc %d", r);

	/* records held elsewhere: step 1 names ref, step 2 names other */
	json_t *recs = json_pack(
	    "[{s:I,s:s,s:I,s:s,s:{s:s}},{s:I,s:s,s:I,s:s,s:s},"
	    "{s:I,s:s,s:I,s:s,s:s}]",
	    "seq", (json_int_t)1, "run_id", "r1", "step", (json_int_t)0, "type",
	    "run_start", "trace", "payloads", "full", "seq", (json_int_t)2,
	    "run_id", "r1", "step", (json_int_t)1, "type", "model_call",
	    "prompt_ref", ref, "seq", (json_int_t)3, "run_id", "r1", "step",
	    (json_int_t)2, "type", "model_call", "prompt_ref", other);
	struct calls c = {.t = t};
	json_t *out = NULL;
	r = wd_trace_records_payloads(recs, "r1", 1, NULL, src_blob, &c, &out,
				      &err);
	const char *got = json_string_value(
	    json_object_get(json_array_get(out, 0), "payload"));
	T_OK(r == 0 && c.n == 1 && !strcmp(c.last, ref) && got &&
		 !strcmp(got, text),
	     "shipped-payloads-step", "rc %d, %d lookups, last %s", r, c.n,
	     c.last);
	json_decref(out);
	out = NULL;
	r = wd_trace_records_payloads(recs, "r1", 7, NULL, src_blob, &c, &out,
				      &err);
	T_OK(r == -ENOENT && !out && c.n == 1, "shipped-payloads-no-step",
	     "rc %d, %d lookups", r, c.n);
	/* hash_only: no lookup at all, each entry says why */
	json_object_set_new(json_object_get(json_array_get(recs, 0), "trace"),
			    "payloads", json_string("hash_only"));
	r = wd_trace_records_payloads(recs, "r1", 1, NULL, src_blob, &c, &out,
				      &err);
	json_t *e = json_array_get(out, 0);
	T_OK(r == 0 && c.n == 1 && !json_object_get(e, "payload") &&
		 strstr(json_string_value(json_object_get(e, "error")) ?: "",
			"hash_only"),
	     "shipped-payloads-hash-only", "rc %d, %d lookups", r, c.n);
	json_decref(out);
	json_decref(recs);
	wd_trace_close(t);
	wd_rm_rf(dir);
	return T_DONE();
}
