/* The index fields of a segment line without building a jansson tree: the
 * catch-up (at open, and the index thread's after a queue overflow) spent
 * ~2/3 of its CPU in json_loadb. Strict: a line is taken only if it is
 * plain JSON that json_loadb(JSON_REJECT_DUPLICATES) accepts and every
 * value the index reads is read here exactly as jansson reads it; anything
 * else (an escape in a key or in a value the index reads, a \u escape,
 * bytes that are not UTF-8, a control character, a duplicate key, a big
 * number, deep nesting) answers "not here" and the caller parses the line with
 * jansson as before. tests/unit/test_idxscan.c holds the two to the same rows.
 */
#include "trace/trace_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAXDEPTH 32
#define MAXKEYS	 64 /* keys of one object checked for duplicates */

struct sc {
	const char *p, *end;
	char *out; /* NUL-terminated copies of the strings kept */
	size_t outlen, outcap;
};

static void ws(struct sc *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' ||
				 *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* The bytes of one UTF-8 character at p (< end) that jansson's loader
 * takes in a string (no overlong form, no surrogate, at most U+10FFFF),
 * else 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0];
	size_t n;
	uint32_t v;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, v = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, v = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, v = c & 0x07;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) ||
	    (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff)
		return 0;
	return n;
}

/* A string at s->p ('"'): its bytes [*b, *b + *n) between the quotes.
 * escaped: whether it has a (simple, valid) escape; a \u escape, a control
 * character or a byte sequence that is not UTF-8 is -1. */
static int str(struct sc *s, const char **b, size_t *n, bool *escaped)
{
	if (s->p >= s->end || *s->p != '"')
		return -1;
	const char *q = ++s->p;
	*escaped = false;
	while (q < s->end && *q != '"') {
		unsigned char c = (unsigned char)*q;
		if (c < 0x20)
			return -1;
		if (c >= 0x80) {
			size_t u = utf8_len((const unsigned char *)q,
					    (const unsigned char *)s->end);
			if (!u)
				return -1;
			q += u;
			continue;
		}
		if (c == '\\') {
			if (q + 1 >= s->end || !strchr("\"\\/bfnrt", q[1]) ||
			    !q[1])
				return -1;
			*escaped = true;
			q += 2;
			continue;
		}
		q++;
	}
	if (q >= s->end)
		return -1;
	*b = s->p;
	*n = (size_t)(q - s->p);
	s->p = q + 1;
	return 0;
}

/* A copy of n bytes, NUL-terminated, in s->out (sized for the line: never
 * moves). */
static const char *keep(struct sc *s, const char *b, size_t n)
{
	if (s->outlen + n + 1 > s->outcap)
		return NULL;
	char *d = s->out + s->outlen;
	memcpy(d, b, n);
	d[n] = 0;
	s->outlen += n + 1;
	return d;
}

/* A number as jansson reads it: an integer (no '.', 'e', 'E') in
 * json_int_t's range, or a double strtod gives without overflow. */
static int number(struct sc *s, struct wd_iv *v)
{
	const char *b = s->p, *q = b;
	bool real = false;
	if (q < s->end && *q == '-')
		q++;
	if (q >= s->end || *q < '0' || *q > '9')
		return -1;
	if (*q == '0')
		q++;
	else
		while (q < s->end && *q >= '0' && *q <= '9')
			q++;
	if (q < s->end && *q == '.') {
		real = true;
		if (++q >= s->end || *q < '0' || *q > '9')
			return -1;
		while (q < s->end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < s->end && (*q == 'e' || *q == 'E')) {
		real = true;
		q++;
		if (q < s->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= s->end || *q < '0' || *q > '9')
			return -1;
		while (q < s->end && *q >= '0' && *q <= '9')
			q++;
	}
	char buf[64];
	if ((size_t)(q - b) >= sizeof(buf))
		return -1;
	memcpy(buf, b, q - b);
	buf[q - b] = 0;
	errno = 0;
	if (real) {
		double d = strtod(buf, NULL);
		if (errno == ERANGE && d != 0)
			return -1; /* jansson: real number overflow */
		*v = (struct wd_iv){.kind = WD_IV_REAL, .d = d};
	} else {
		long long i = strtoll(buf, NULL, 10);
		if (errno == ERANGE)
			return -1; /* jansson: too big integer */
		*v = (struct wd_iv){.kind = WD_IV_INT, .i = i};
	}
	s->p = q;
	return 0;
}

static int lit(struct sc *s, const char *w, size_t n)
{
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n))
		return -1;
	s->p += n;
	return 0;
}

static int value(struct sc *s, int depth, struct wd_iv *v);

/* An object or array the index does not read (its values are checked as
 * jansson would, duplicate keys included, and dropped). */
static int skip_container(struct sc *s, int depth)
{
	if (depth > MAXDEPTH)
		return -1;
	bool obj = *s->p == '{';
	char close = obj ? '}' : ']';
	struct {
		const char *b;
		size_t n;
	} keys[MAXKEYS];
	size_t nk = 0;
	s->p++;
	ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		return 0;
	}
	for (;;) {
		struct wd_iv v;
		if (obj) {
			const char *k;
			size_t kl;
			bool esc;
			ws(s);
			if (str(s, &k, &kl, &esc) < 0 || esc || nk == MAXKEYS)
				return -1;
			for (size_t i = 0; i < nk; i++)
				if (keys[i].n == kl &&
				    !memcmp(keys[i].b, k, kl))
					return -1;
			keys[nk].b = k;
			keys[nk++].n = kl;
			ws(s);
			if (s->p >= s->end || *s->p++ != ':')
				return -1;
		}
		if (value(s, depth + 1, &v) < 0)
			return -1;
		ws(s);
		if (s->p >= s->end)
			return -1;
		if (*s->p == ',') {
			s->p++;
			continue;
		}
		if (*s->p++ != close)
			return -1;
		return 0;
	}
}

/* Any value; a string's bytes are not copied (v->s is NULL). */
static int value(struct sc *s, int depth, struct wd_iv *v)
{
	ws(s);
	if (s->p >= s->end)
		return -1;
	const char *b;
	size_t n;
	bool esc;
	switch (*s->p) {
	case '"':
		if (str(s, &b, &n, &esc) < 0)
			return -1;
		*v = (struct wd_iv){.kind = WD_IV_STR};
		/* the bytes, for the caller to keep (escapes: it may not) */
		v->s = esc ? NULL : b;
		v->i = (int64_t)n;
		return 0;
	case '{':
	case '[':
		*v = (struct wd_iv){.kind = *s->p == '{' ? WD_IV_OBJECT
							 : WD_IV_ARRAY};
		return skip_container(s, depth);
	case 't':
		*v = (struct wd_iv){.kind = WD_IV_TRUE};
		return lit(s, "true", 4);
	case 'f':
		*v = (struct wd_iv){.kind = WD_IV_FALSE};
		return lit(s, "false", 5);
	case 'n':
		*v = (struct wd_iv){.kind = WD_IV_NULL};
		return lit(s, "null", 4);
	default:
		return number(s, v);
	}
}

/* A value the index reads: a string must be kept (no escape in it). */
static int kept_value(struct sc *s, struct wd_iv *v)
{
	if (v->kind != WD_IV_STR)
		return 0;
	if (!v->s)
		return -1;
	v->s = keep(s, v->s, (size_t)v->i);
	v->i = 0;
	return v->s ? 0 : -1;
}

/* The members of the object at s->p that the index reads below the
 * top-level member `parent`. */
static int sub_object(struct sc *s, int parent, struct wd_idxvals *out)
{
	const char *save = s->p;
	/* checked whole (duplicates, values) first */
	if (skip_container(s, 1) < 0)
		return -1;
	const char *after = s->p;
	s->p = save + 1;
	ws(s);
	if (*s->p == '}') {
		s->p = after;
		return 0;
	}
	for (;;) {
		const char *k;
		size_t kl;
		bool esc;
		struct wd_iv v;
		ws(s);
		str(s, &k, &kl, &esc);
		ws(s);
		s->p++; /* ':' */
		if (value(s, 2, &v) < 0)
			return -1;
		int j = wd_idx_submember(parent, k, kl);
		if (j >= 0) {
			if (kept_value(s, &v) < 0)
				return -1;
			out->m[j] = v;
		}
		ws(s);
		if (*s->p++ == '}')
			break;
	}
	s->p = after;
	return 0;
}

int wd_idx_scan_line(const char *line, size_t len, char *scratch,
		     struct wd_idxvals *out, uint64_t *seq, const char **ts)
{
	struct sc s = {
	    .p = line, .end = line + len, .out = scratch, .outcap = len + 1};
	struct {
		const char *b;
		size_t n;
	} keys[MAXKEYS];
	size_t nk = 0;
	bool has_seq = false, has_prev = false;
	*out = (struct wd_idxvals){.nrefs = 0};
	*ts = NULL;
	ws(&s);
	if (s.p >= s.end || *s.p++ != '{')
		return -1;
	ws(&s);
	if (s.p < s.end && *s.p == '}')
		return -1; /* no seq */
	for (;;) {
		const char *k;
		size_t kl;
		bool esc;
		struct wd_iv v;
		ws(&s);
		if (str(&s, &k, &kl, &esc) < 0 || esc || nk == MAXKEYS)
			return -1;
		for (size_t i = 0; i < nk; i++)
			if (keys[i].n == kl && !memcmp(keys[i].b, k, kl))
				return -1;
		keys[nk].b = k;
		keys[nk++].n = kl;
		ws(&s);
		if (s.p >= s.end || *s.p++ != ':')
			return -1;
		ws(&s);
		int i = wd_idx_member(k, kl);
		bool ref = kl > 4 && !memcmp(k + kl - 4, "_ref", 4);
		if ((i == WD_IM_TRACE || i == WD_IM_REPLAY_OF ||
		     i == WD_IM_REPLAY) &&
		    s.p < s.end && *s.p == '{') {
			if (sub_object(&s, i, out) < 0)
				return -1;
			v = (struct wd_iv){.kind = WD_IV_OBJECT};
		} else if (value(&s, 1, &v) < 0) {
			return -1;
		}
		if (kl == 3 && !memcmp(k, "seq", 3)) {
			if (v.kind != WD_IV_INT)
				return -1;
			*seq = (uint64_t)v.i;
			has_seq = true;
		} else if (kl == 4 && !memcmp(k, "prev", 4)) {
			has_prev = v.kind == WD_IV_STR;
		} else if (kl == 2 && !memcmp(k, "ts", 2) &&
			   v.kind == WD_IV_STR) {
			struct wd_iv t = v;
			if (kept_value(&s, &t) < 0)
				return -1;
			*ts = t.s;
		}
		if (i >= 0 || (ref && v.kind == WD_IV_STR)) {
			if (kept_value(&s, &v) < 0)
				return -1;
			if (i >= 0)
				out->m[i] = v;
			if (ref && v.kind == WD_IV_STR &&
			    out->nrefs < WD_IDXREC_MAXREFS &&
			    wd_trace_ref_ok(v.s))
				out->refs[out->nrefs++] = v.s;
		}
		ws(&s);
		if (s.p >= s.end)
			return -1;
		if (*s.p == ',') {
			s.p++;
			continue;
		}
		if (*s.p++ != '}')
			return -1;
		break;
	}
	ws(&s);
	return s.p == s.end && has_seq && has_prev ? 0 : -1;
}
