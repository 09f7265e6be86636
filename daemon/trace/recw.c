/* The typed record encoder (recw.h): members straight into the calling
 * thread's buffer, redacted on the way, index fields noted as written. */
#include "trace/recw.h"
#include "trace/trace_int.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define RED "[REDACTED]"
/* as deep as jansson parses (JSON_PARSER_MAX_DEPTH): any args a model
 * sent fit; keys past NKEYS open at once are written unchecked for
 * duplicates (only a typed caller's own keys could repeat) */
#define DEPTH	 2048
#define NKEYS	 4096
#define ENC_KEEP (256u << 10) /* a buffer grown past this is given back */

struct wd_recw {
	struct wd_trace *t;
	struct wd_buf b;     /* the record: {"run_id":...,"step":...,... */
	struct wd_buf arena; /* strings the index reads, NUL-terminated */
	bool busy, heap, appended;
	int err;
	int depth;		/* open containers; 1: the record itself */
	bool arr[DEPTH];	/* container d is an array */
	bool any[DEPTH];	/* container d has a member or element */
	int parent[DEPTH];	/* container d: the top-level member (WD_IM_*)
				 * whose object it is, or -1 */
	unsigned kstart[DEPTH]; /* container d's keys start here in keys */
	unsigned nkeys;
	struct {
		uint32_t off, len; /* the escaped key in b */
	} keys[NKEYS];
	/* index fields: WD_IV_STR values as arena offsets (in .i) until
	 * wd_trace_append_w resolves them */
	struct wd_idxvals v;
	size_t refoff[WD_IDXREC_MAXREFS];
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void recw_free(struct wd_recw *w)
{
	wd_buf_free(&w->b);
	wd_buf_free(&w->arena);
	free(w);
}

static void tls_free(void *p)
{
	recw_free(p);
}

static void tls_make(void)
{
	if (pthread_key_create(&tls_key, tls_free))
		abort();
}

/* The bytes the index gets of a string written as JSON: what a parser
 * reads back (each invalid UTF-8 byte as U+FFFD), up to a NUL (the index
 * reads C strings, as json_string_value gives them). */
static void keep_idx_str(struct wd_recw *w, struct wd_iv *iv, const char *s,
			 size_t n)
{
	n = strnlen(s, n);
	iv->kind = WD_IV_STR;
	iv->i = (int64_t)w->arena.len;
	iv->s = NULL;
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, from = 0;
	while (i < n) {
		if (u[i] < 0x80) {
			i++;
			continue;
		}
		size_t l = wd_utf8_len(u + i, n - i);
		if (l) {
			i += l;
			continue;
		}
		wd_buf_append(&w->arena, s + from, i - from);
		wd_buf_append(&w->arena, "\xef\xbf\xbd", 3);
		from = ++i;
	}
	wd_buf_append(&w->arena, s + from, n - from);
	wd_buf_append(&w->arena, "", 1);
}

static void fail(struct wd_recw *w)
{
	if (!w->err)
		w->err = -EINVAL;
}

static void emit_str(struct wd_buf *b, const char *s, size_t n)
{
	wd_buf_end(
	    b, wd_json_put_str(wd_buf_room(b, WD_JSON_STR_MAX(n)), s, n, true));
}

/* A byte the JSON escaper stops at (a control, '"', '\\', >= 0x80), or
 * the first byte of a pair that could start a built-in redaction pattern
 * ("sk", "be", "x-", "au", case folded by ORing 0x20, as redact.c's
 * next_candidate looks for them). */
static bool plain_stop(const unsigned char *u, size_t i, size_t n)
{
	unsigned char c = u[i];
	if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80)
		return true;
	if (i + 1 >= n)
		return false;
	return wd_redact_pair(c | 0x20, u[i + 1] | 0x20);
}

/* The common string in one pass: nothing to escape, nothing the built-in
 * redaction could match, no extra patterns. Written as '"' s '"' (what
 * wd_json_put_str writes for it, wd_trace_redact_text leaving it as is);
 * false, nothing written, when the string needs the full path. */
static bool put_plain(struct wd_recw *w, const char *s, size_t n)
{
	if (w->t && w->t->nrx)
		return false;
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
#if defined(__SSE2__)
	const __m128i lo = _mm_set1_epi8(0x1f), fold = _mm_set1_epi8(0x20);
	while (i + 17 <= n) {
		__m128i x =
		    _mm_loadu_si128((const __m128i *)(const void *)(u + i));
		__m128i a = _mm_or_si128(x, fold);
		__m128i b = _mm_or_si128(
		    _mm_loadu_si128((const __m128i *)(const void *)(u + i + 1)),
		    fold);
		__m128i m = _mm_or_si128(
		    wd_redact_pairs16(a, b),
		    _mm_or_si128(
			_mm_cmpeq_epi8(_mm_max_epu8(x, lo), lo),
			_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
				     _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')))));
		if (_mm_movemask_epi8(m) | _mm_movemask_epi8(x))
			return false;
		i += 16;
	}
#endif
	for (; i < n; i++)
		if (plain_stop(u, i, n))
			return false;
	char *o = wd_buf_room(&w->b, n + 2);
	o[0] = '"';
	memcpy(o + 1, s, n);
	o[n + 1] = '"';
	wd_buf_end(&w->b, o + n + 2);
	return true;
}

/* one byte, without a call while the buffer has room */
static inline void put_ch(struct wd_buf *b, char c)
{
	if (b->len + 2 <= b->cap) {
		b->data[b->len++] = c;
		b->data[b->len] = 0;
	} else {
		wd_buf_append(b, &c, 1);
	}
}

/* Where a value goes: the separator and key are written; returns the
 * WD_IM_* slot the value fills (-1 none) and whether the key is a *_ref
 * of the record. top: the record's own run_id/step/type. */
struct slot {
	int im;
	bool ref;
	const char *key; /* NULL for an array element */
};

/* A top-level key the store writes itself: run_id, step and type are
 * index members (im), seq, ts, prev and crc are not. */
static bool reserved(const char *k, size_t kl, int im)
{
	if (im == WD_IM_RUN || im == WD_IM_STEP || im == WD_IM_TYPE)
		return true;
	return (kl == 2 && !memcmp(k, "ts", 2)) ||
	       (kl == 3 && (!memcmp(k, "seq", 3) || !memcmp(k, "crc", 3))) ||
	       (kl == 4 && !memcmp(k, "prev", 4));
}

static struct slot put_key(struct wd_recw *w, const char *k, bool top)
{
	struct slot s = {-1, false, k};
	int d = w->depth;
	if (w->err || d < 1 || w->arr[d - 1] != (k == NULL)) {
		fail(w);
		return s;
	}
	if (!k) {
		if (w->any[d - 1])
			put_ch(&w->b, ',');
		w->any[d - 1] = true;
		return s;
	}
	/* ',' "key" ':' in one reservation */
	size_t kl = strlen(k);
	char *o = wd_buf_room(&w->b, WD_JSON_STR_MAX(kl) + 2);
	if (w->any[d - 1])
		*o++ = ',';
	w->any[d - 1] = true;
	size_t at = (size_t)(o - w->b.data);
	char *e = wd_json_put_str(o, k, kl, true);
	size_t el = (size_t)(e - o);
	*e++ = ':';
	wd_buf_end(&w->b, e);
	/* a key twice in one object: readers refuse the line
	 * (JSON_REJECT_DUPLICATES), so the record is refused here */
	for (unsigned i = w->kstart[d - 1]; i < w->nkeys; i++)
		if (w->keys[i].len == el &&
		    !memcmp(w->b.data + w->keys[i].off, w->b.data + at, el)) {
			fail(w);
			return s;
		}
	if (w->nkeys < NKEYS) {
		w->keys[w->nkeys].off = (uint32_t)at;
		w->keys[w->nkeys++].len = (uint32_t)el;
	}
	if (d == 1) {
		s.im = wd_idx_member(k, kl);
		if (!top && reserved(k, kl, s.im)) {
			fail(w);
			return s;
		}
		s.ref = kl > 4 && !memcmp(k + kl - 4, "_ref", 4);
	} else if (d == 2 && w->parent[1] >= 0) {
		s.im = wd_idx_submember(w->parent[1], k, kl);
	}
	return s;
}

static void put_string(struct wd_recw *w, struct slot s, const char *str,
		       size_t n)
{
	if (w->err)
		return;
	const char *v = str;
	size_t vn = n;
	char *red = NULL;
	/* as wd_trace_redact_json: a secret key's string value is replaced
	 * whole, every other string is scanned */
	if (s.key && wd_trace_secret_key(s.key)) {
		v = RED;
		vn = sizeof(RED) - 1;
		emit_str(&w->b, v, vn);
	} else if (!put_plain(w, str, n)) {
		if ((red = wd_trace_redact_text(w->t, str, n, &vn)))
			v = red;
		emit_str(&w->b, v, vn);
	}
	if (s.im >= 0)
		keep_idx_str(w, &w->v.m[s.im], v, vn);
	if (s.ref && w->v.nrefs < WD_IDXREC_MAXREFS && vn == 71 &&
	    !memchr(v, 0, vn)) {
		char r[72];
		memcpy(r, v, 71);
		r[71] = 0;
		if (wd_trace_ref_ok(r)) {
			w->refoff[w->v.nrefs++] = w->arena.len;
			wd_buf_append(&w->arena, r, 72);
		}
	}
	free(red);
}

static void put_int(struct wd_recw *w, struct slot s, int64_t iv)
{
	if (w->err)
		return;
	char num[24], *e = num + sizeof(num), *p = e;
	unsigned long long u =
	    iv < 0 ? -(unsigned long long)iv : (unsigned long long)iv;
	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (iv < 0)
		*--p = '-';
	wd_buf_append(&w->b, p, e - p);
	if (s.im >= 0)
		w->v.m[s.im] = (struct wd_iv){.kind = WD_IV_INT, .i = iv};
}

static void note_kind(struct wd_recw *w, struct slot s, enum wd_iv_kind k)
{
	if (s.im >= 0)
		w->v.m[s.im] = (struct wd_iv){.kind = k};
}

struct wd_recw *wd_recw_begin(struct wd_trace *t, const char *run_id,
			      int64_t step, enum wd_rec_type type)
{
	pthread_once(&tls_once, tls_make);
	struct wd_recw *w = pthread_getspecific(tls_key);
	if (!w) {
		w = wd_calloc(1, sizeof(*w));
		if (pthread_setspecific(tls_key, w))
			w->heap = true; /* freed at its end */
	} else if (w->busy) {
		w = wd_calloc(1, sizeof(*w));
		w->heap = true;
	}
	w->busy = true;
	w->appended = false;
	w->t = t;
	w->b.len = 0;
	w->arena.len = 0;
	w->err = 0;
	w->depth = 1;
	w->arr[0] = false;
	w->any[0] = false;
	w->parent[0] = -1;
	w->kstart[0] = 0;
	w->nkeys = 0;
	memset(&w->v, 0, sizeof(w->v));
	wd_buf_append(&w->b, "{", 1);
	const char *tn = wd_rec_type_name(type);
	if (!run_id || !*run_id || step < 0 || !tn) {
		fail(w);
		return w;
	}
	put_string(w, put_key(w, "run_id", true), run_id, strlen(run_id));
	put_int(w, put_key(w, "step", true), step);
	put_string(w, put_key(w, "type", true), tn, strlen(tn));
	return w;
}

void wd_recw_strn(struct wd_recw *w, const char *key, const char *s, size_t n)
{
	struct slot sl = put_key(w, key, false);
	if (!s)
		fail(w);
	put_string(w, sl, s, n);
}

void wd_recw_str(struct wd_recw *w, const char *key, const char *s)
{
	wd_recw_strn(w, key, s, s ? strlen(s) : 0);
}

void wd_recw_int(struct wd_recw *w, const char *key, int64_t v)
{
	put_int(w, put_key(w, key, false), v);
}

void wd_recw_real(struct wd_recw *w, const char *key, double d)
{
	struct slot s = put_key(w, key, false);
	if (w->err)
		return;
	if (!isfinite(d)) {
		fail(w);
		return;
	}
	/* as emit.c and jansson: %.17g round-trips, ".0" keeps it real */
	char num[WD_JSON_REAL_MAX];
	wd_buf_append(&w->b, num, wd_json_put_real(num, d) - num);
	if (s.im >= 0)
		w->v.m[s.im] = (struct wd_iv){.kind = WD_IV_REAL, .d = d};
}

void wd_recw_bool(struct wd_recw *w, const char *key, bool v)
{
	struct slot s = put_key(w, key, false);
	if (w->err)
		return;
	wd_buf_append(&w->b, v ? "true" : "false", v ? 4 : 5);
	note_kind(w, s, v ? WD_IV_TRUE : WD_IV_FALSE);
}

void wd_recw_null(struct wd_recw *w, const char *key)
{
	struct slot s = put_key(w, key, false);
	if (w->err)
		return;
	wd_buf_append(&w->b, "null", 4);
	note_kind(w, s, WD_IV_NULL);
}

static void open_c(struct wd_recw *w, const char *key, bool arr)
{
	struct slot s = put_key(w, key, false);
	if (w->err)
		return;
	if (w->depth == DEPTH) {
		fail(w);
		return;
	}
	note_kind(w, s, arr ? WD_IV_ARRAY : WD_IV_OBJECT);
	int d = w->depth++;
	w->arr[d] = arr;
	w->any[d] = false;
	w->parent[d] = !arr && d == 1 &&
			       (s.im == WD_IM_TRACE ||
				s.im == WD_IM_REPLAY_OF || s.im == WD_IM_REPLAY)
			   ? s.im
			   : -1;
	w->kstart[d] = w->nkeys;
	put_ch(&w->b, arr ? '[' : '{');
}

static void close_c(struct wd_recw *w, bool arr)
{
	if (w->err)
		return;
	if (w->depth < 2 || w->arr[w->depth - 1] != arr) {
		fail(w);
		return;
	}
	w->depth--;
	w->nkeys = w->kstart[w->depth];
	put_ch(&w->b, arr ? ']' : '}');
}

void wd_recw_obj_begin(struct wd_recw *w, const char *key)
{
	open_c(w, key, false);
}

void wd_recw_obj_end(struct wd_recw *w)
{
	close_c(w, false);
}

void wd_recw_arr_begin(struct wd_recw *w, const char *key)
{
	open_c(w, key, true);
}

void wd_recw_arr_end(struct wd_recw *w)
{
	close_c(w, true);
}

void wd_recw_json(struct wd_recw *w, const char *key, const json_t *v)
{
	const char *k;
	json_t *x;
	size_t i;
	if (w->err)
		return;
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT:
		wd_recw_obj_begin(w, key);
		json_object_foreach((json_t *)v, k, x) wd_recw_json(w, k, x);
		wd_recw_obj_end(w);
		return;
	case JSON_ARRAY:
		wd_recw_arr_begin(w, key);
		json_array_foreach(v, i, x) wd_recw_json(w, NULL, x);
		wd_recw_arr_end(w);
		return;
	case JSON_STRING:
		wd_recw_strn(w, key, json_string_value(v),
			     json_string_length(v));
		return;
	case JSON_INTEGER:
		wd_recw_int(w, key, json_integer_value(v));
		return;
	case JSON_REAL:
		wd_recw_real(w, key, json_real_value(v));
		return;
	case JSON_TRUE:
	case JSON_FALSE:
		wd_recw_bool(w, key, json_is_true(v));
		return;
	case JSON_NULL:
		wd_recw_null(w, key);
		return;
	}
}

const char *wd_recw_body(const struct wd_recw *w, size_t *len)
{
	*len = w->b.len;
	return w->b.data;
}

void wd_recw_end(struct wd_recw *w)
{
	if (!w)
		return;
	w->busy = false;
	if (w->heap) {
		recw_free(w);
		return;
	}
	if (w->b.cap > ENC_KEEP)
		wd_buf_free(&w->b);
	if (w->arena.cap > ENC_KEEP)
		wd_buf_free(&w->arena);
}

char *wd_recw_line(const struct wd_recw *w, const struct wd_trace_head *h)
{
	struct wd_buf o = {0};
	wd_buf_append(&o, w->b.data, w->b.len);
	char seq[24];
	int n = snprintf(seq, sizeof(seq), "%llu", (unsigned long long)h->seq);
	wd_buf_append(&o, ",\"seq\":", 7);
	wd_buf_append(&o, seq, n);
	wd_buf_append(&o, ",\"ts\":", 6);
	emit_str(&o, h->ts, strlen(h->ts));
	wd_buf_append(&o, ",\"prev\":", 8);
	emit_str(&o, h->prev, strlen(h->prev));
	wd_buf_append(&o, "}", 2); /* with the NUL */
	return o.data;
}

struct wd_idxrec *wd_recw_idx(const struct wd_recw *w)
{
	struct wd_idxvals v = w->v;
	for (int i = 0; i < WD_IM_ALL; i++)
		if (v.m[i].kind == WD_IV_STR)
			v.m[i].s = w->arena.data + v.m[i].i;
	for (unsigned i = 0; i < v.nrefs; i++)
		v.refs[i] = w->arena.data + w->refoff[i];
	return wd_idx_build(&v);
}

int wd_trace_append_w(struct wd_trace *t, struct wd_recw *w, bool durable,
		      struct wd_trace_head *head, struct wd_err *err)
{
	if (w->appended)
		return wd_err_set(err, -EALREADY, "trace record appended once");
	if (w->err || w->depth != 1)
		return wd_err_set(err, -EINVAL,
				  "trace record: cannot encode (a key twice, a "
				  "reserved key, NaN or infinity, or "
				  "unbalanced)");
	if (t->o.read_only)
		return wd_err_set(err, -EROFS, "trace store opened read-only");
	w->appended = true;
	wd_buf_append(&w->b, "}", 1);
	/* the index fields, in the arena as written */
	for (int i = 0; i < WD_IM_ALL; i++)
		if (w->v.m[i].kind == WD_IV_STR)
			w->v.m[i].s = w->arena.data + w->v.m[i].i;
	for (unsigned i = 0; i < w->v.nrefs; i++)
		w->v.refs[i] = w->arena.data + w->refoff[i];
	/* the index block after the record, in the same buffer (no
	 * allocation once the buffer has grown) */
	size_t ib = 0, blen = w->b.len;
	bool want_idx =
	    t->idx && !__atomic_load_n(&t->iq_overflow, __ATOMIC_RELAXED);
	if (want_idx)
		ib = wd_idx_build_into(&w->v, &w->b);
	const struct wd_idxrec *idx =
	    want_idx ? (const struct wd_idxrec *)(void *)(w->b.data + ib)
		     : NULL;
	const char *run_id = w->v.m[WD_IM_RUN].s;
	const char *pl = w->v.m[WD_IM_TRACE_PAYLOADS].kind == WD_IV_STR
			     ? w->v.m[WD_IM_TRACE_PAYLOADS].s
			 : w->v.m[WD_IM_PAYLOADS].kind == WD_IV_STR
			     ? w->v.m[WD_IM_PAYLOADS].s
			     : NULL;
	wd_trace_note_run(t, w->v.m[WD_IM_TYPE].s, run_id, pl);
	struct wd_trace_head h;
	char prev_hex[65];
	int r = wd_trace_append_body(t, w->b.data, blen, idx, durable, &h.seq,
				     h.ts, prev_hex, err);
	w->b.len = blen - 1; /* the body again, for wd_recw_line */
	if (r < 0)
		return r;
	memcpy(h.prev, "sha256:", 7);
	memcpy(h.prev + 7, prev_hex, 65);
	if (t->o.otlp) {
		/* the exporter reads JSON (best effort, rarely configured) */
		cleanup_free char *line = wd_recw_line(w, &h);
		json_t *rec = json_loads(line, 0, NULL);
		if (rec)
			wd_otlp_feed(t->o.otlp, rec);
		json_decref(rec);
	}
	if (head)
		*head = h;
	return 0;
}
