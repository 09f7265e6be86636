/* Trace records written without jansson: the hot path of the store.
 *
 * A caller opens a record with wd_recw_begin() (run_id, step and its type
 * from the typed table in records.h), adds its members in order with the
 * typed calls below, and appends it with wd_trace_append_w(). The members
 * are encoded straight into a buffer the calling thread keeps between
 * records (no allocation per record once it has grown), redacted on the way
 * exactly as wd_trace_append() redacts a JSON record (secret keys' string
 * values, the built-in patterns, the store's extra regexes, in every string
 * at every depth), and the index fields are noted as they are written, so
 * the store neither re-walks nor re-parses the record.
 *
 * The line on disk is byte for byte the one wd_trace_append() writes for a
 * JSON object holding the same members in the same order (run_id, step and
 * type first, as every caller builds them): compact JSON, strings escaped
 * as jansson's compact dump does, reals as %.17g (tests/unit/test_recw.c
 * encodes records both ways and compares the bytes, the hash chain and the
 * index rows). One difference: a string that is not valid UTF-8 keeps its
 * member, each invalid byte written as U+FFFD, where jansson refuses the
 * string (json_string() returns NULL and the member is lost).
 *
 * Errors are sticky: a misuse (a key twice in one object, a reserved key
 * at the top level: seq, ts, prev, crc, run_id, step, type; a member
 * without a key or an element with one; unbalanced objects; NaN or
 * infinity) makes wd_trace_append_w() fail with -EINVAL and write nothing.
 * A record is used by one thread, from wd_recw_begin to wd_recw_end. */
#ifndef WD_TRACE_RECW_H
#define WD_TRACE_RECW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "trace/records.h"
#include "trace/trace.h"

struct wd_recw;

/* Start a record of `type` (not WD_REC_UNKNOWN) for run_id at step. t
 * (may be NULL) supplies the extra redaction patterns; the record may be
 * appended to any store. Never NULL: the state is the calling thread's
 * (one record at a time; a second one begun before the first ends gets
 * its own allocation). */
struct wd_recw *wd_recw_begin(struct wd_trace *t, const char *run_id,
			      int64_t step, enum wd_rec_type type);
/* Members (key != NULL) of the current object, or elements (key == NULL)
 * of the current array. */
void wd_recw_str(struct wd_recw *w, const char *key, const char *s);
void wd_recw_strn(struct wd_recw *w, const char *key, const char *s, size_t n);
void wd_recw_int(struct wd_recw *w, const char *key, int64_t v);
void wd_recw_real(struct wd_recw *w, const char *key, double v);
void wd_recw_bool(struct wd_recw *w, const char *key, bool v);
void wd_recw_null(struct wd_recw *w, const char *key);
/* Any JSON value (args, a response), redacted as it is written; NULL is
 * written as null. */
void wd_recw_json(struct wd_recw *w, const char *key, const json_t *v);
void wd_recw_obj_begin(struct wd_recw *w, const char *key);
void wd_recw_obj_end(struct wd_recw *w);
void wd_recw_arr_begin(struct wd_recw *w, const char *key);
void wd_recw_arr_end(struct wd_recw *w);

/* The record so far without its closing brace ({"run_id":...), for tests
 * and callers that show the line. */
const char *wd_recw_body(const struct wd_recw *w, size_t *len);

/* What the store set in an appended record. */
struct wd_trace_head {
	uint64_t seq;
	char ts[40];   /* "2026-01-10T12:00:01.123456Z" */
	char prev[72]; /* "sha256:<hex>" */
};

/* Append the record (as wd_trace_append: durable = on disk when this
 * returns). head (may be NULL) gets seq, ts and prev. 0 or -errno; a
 * record is appended at most once (-EALREADY after). */
int wd_trace_append_w(struct wd_trace *t, struct wd_recw *w, bool durable,
		      struct wd_trace_head *head, struct wd_err *err);
/* End a record, appended or not (every wd_recw_begin needs one). NULL is a
 * no-op. */
void wd_recw_end(struct wd_recw *w);

/* The appended record as one JSON line for the readers of a run's live
 * records: what json_dumps(JSON_COMPACT) of the JSON record gave after
 * wd_trace_append() (its members, then seq, ts, prev). A new string
 * (free() it). */
char *wd_recw_line(const struct wd_recw *w, const struct wd_trace_head *h);

#endif
