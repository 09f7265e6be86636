/* ECMA-262 `pattern` -> POSIX ERE (see schema_regex.h for the subset). */
#include "policy/schema_regex.h"

#include <locale.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPEAT     1000
#define MAX_WIDE_RANGE 512
#define MAX_RANGES     1024
#define MAX_GROUPS     64

struct range {
	uint32_t lo, hi;
};

struct cls {
	struct range r[MAX_RANGES];
	int n;
};

struct tr {
	const char *p, *start;
	struct wd_buf *out;
	struct wd_err *err;
};

static const struct range R_DIGIT[] = {{'0', '9'}};
static const struct range R_WORD[] = {
    {'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
/* ECMA-262 WhiteSpace and LineTerminator */
static const struct range R_SPACE[] = {
    {0x09, 0x0d},     {0x20, 0x20},	{0xa0, 0xa0},	  {0x1680, 0x1680},
    {0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f},
    {0x3000, 0x3000}, {0xfeff, 0xfeff}};
/* what `.` does not match */
static const struct range R_NOTDOT[] = {
    {0x0a, 0x0a}, {0x0d, 0x0d}, {0x2028, 0x2029}};

static int fail(struct tr *t, const char *what)
{
	return wd_err_set(t->err, -EINVAL,
			  "pattern: %s at offset %zu is not supported (JSON "
			  "Schema patterns are ECMA-262; see README, "
			  "args_schema)",
			  what, (size_t)(t->p - t->start));
}

/* Decode one UTF-8 code point (jansson strings are valid UTF-8). */
static uint32_t next_cp(const char **pp)
{
	const unsigned char *s = (const unsigned char *)*pp;
	uint32_t c = s[0];
	int n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	if (n > 1)
		c &= 0x3f >> (n - 1);
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			n = i;
			break;
		}
		c = (c << 6) | (s[i] & 0x3f);
	}
	*pp += n;
	return c;
}

static void put_cp(struct wd_buf *b, uint32_t c)
{
	char u[4];
	size_t n;
	if (c < 0x80) {
		u[0] = (char)c, n = 1;
	} else if (c < 0x800) {
		u[0] = (char)(0xc0 | (c >> 6));
		u[1] = (char)(0x80 | (c & 0x3f)), n = 2;
	} else if (c < 0x10000) {
		u[0] = (char)(0xe0 | (c >> 12));
		u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[2] = (char)(0x80 | (c & 0x3f)), n = 3;
	} else {
		u[0] = (char)(0xf0 | (c >> 18));
		u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[3] = (char)(0x80 | (c & 0x3f)), n = 4;
	}
	wd_buf_append(b, u, n);
}

static int hex_digits(struct tr *t, int n, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < n; i++) {
		char c = t->p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return fail(t, "a malformed \\x or \\u escape");
		v = v * 16 + (uint32_t)d;
	}
	t->p += n;
	*out = v;
	return 0;
}

/* After the backslash: a character escape that stands for one code point.
 * 1 = *cp set; 0 = not a character escape (t->p unchanged); <0 error. */
static int char_escape_(struct tr *t, bool in_class, uint32_t *cp);
static int char_escape(struct tr *t, bool in_class, uint32_t *cp)
{
	int k = char_escape_(t, in_class, cp);
	/* argument strings never hold NUL (the validator refuses them), and
	 * a NUL byte would end the ERE early */
	if (k == 1 && *cp == 0)
		return fail(t, "an escape for NUL");
	return k;
}

static int char_escape_(struct tr *t, bool in_class, uint32_t *cp)
{
	char c = *t->p;
	const char *simple = "t\tn\nr\rv\vf\f";
	for (const char *s = simple; *s; s += 2)
		if (c == s[0]) {
			t->p++;
			*cp = (unsigned char)s[1];
			return 1;
		}
	if (c && strchr("^$\\.*+?()[]{}|/-", c)) {
		t->p++;
		*cp = (unsigned char)c;
		return 1;
	}
	if (in_class && c == 'b') {
		t->p++;
		*cp = 0x08;
		return 1;
	}
	if (c == 'c') {
		char l = t->p[1];
		if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')))
			return fail(t, "a \\c escape without a letter");
		t->p += 2;
		*cp = (uint32_t)(l % 32);
		return 1;
	}
	if (c == 'x') {
		t->p++;
		return hex_digits(t, 2, cp) ?: 1;
	}
	if (c == 'u') {
		t->p++;
		if (*t->p == '{') {
			const char *e = strchr(t->p, '}');
			int n = e ? (int)(e - t->p - 1) : 0;
			if (n < 1 || n > 6)
				return fail(t, "a malformed \\u{...} escape");
			t->p++;
			if (hex_digits(t, n, cp))
				return -EINVAL;
			t->p++;
		} else if (hex_digits(t, 4, cp)) {
			return -EINVAL;
		}
		if (*cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
			return fail(t,
				    "a surrogate or out-of-range \\u escape");
		return 1;
	}
	return 0;
}

static int cls_add(struct tr *t, struct cls *c, uint32_t lo, uint32_t hi)
{
	if (c->n >= MAX_RANGES)
		return fail(t, "a class with too many ranges");
	c->r[c->n++] = (struct range){lo, hi};
	return 0;
}

static int cls_add_set(struct tr *t, struct cls *c, const struct range *r,
		       size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (cls_add(t, c, r[i].lo, r[i].hi))
			return -EINVAL;
	return 0;
}

/* \d \w \s (and their negations when `neg` may be set): the ranges. */
static bool class_escape(char c, const struct range **r, size_t *n, bool *neg)
{
	*neg = c >= 'A' && c <= 'Z';
	switch (c | 0x20) {
	case 'd':
		*r = R_DIGIT, *n = WD_ARRAY_SIZE(R_DIGIT);
		return true;
	case 'w':
		*r = R_WORD, *n = WD_ARRAY_SIZE(R_WORD);
		return true;
	case 's':
		*r = R_SPACE, *n = WD_ARRAY_SIZE(R_SPACE);
		return true;
	}
	return false;
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static bool special(uint32_t c)
{
	return c == ']' || c == '-' || c == '^' || c == '[';
}

/* Emit a POSIX bracket expression for the set. POSIX brackets have their
 * own syntax: `]` only first, `-` only last, `^` not first, `[` never
 * before `:` `.` `=`, backslash literal, and glibc refuses ranges with
 * non-ASCII ends in C.UTF-8 (so those are listed one by one). */
static int cls_emit(struct tr *t, struct cls *c, bool neg)
{
	qsort(c->r, (size_t)c->n, sizeof(c->r[0]), cmp_range);
	int m = 0;
	for (int i = 0; i < c->n; i++) {
		if (m && c->r[i].lo <= c->r[m - 1].hi + 1) {
			if (c->r[i].hi > c->r[m - 1].hi)
				c->r[m - 1].hi = c->r[i].hi;
		} else {
			c->r[m++] = c->r[i];
		}
	}
	c->n = m;
	struct wd_buf body = {0};
	bool has[128] = {false};
	for (int i = 0; i < c->n; i++) {
		uint32_t lo = c->r[i].lo, hi = c->r[i].hi;
		while (lo <= hi && lo < 0x80) {
			/* the longest ASCII run without a special char */
			uint32_t e = lo;
			if (special(lo)) {
				has[lo] = true;
				lo++;
				continue;
			}
			while (e + 1 <= hi && e + 1 < 0x80 && !special(e + 1))
				e++;
			put_cp(&body, lo);
			if (e > lo) {
				if (e > lo + 1)
					wd_buf_append(&body, "-", 1);
				put_cp(&body, e);
			}
			lo = e + 1;
		}
		if (lo <= hi && hi - lo >= MAX_WIDE_RANGE) {
			wd_buf_free(&body);
			return fail(t, "a range of more than 512 non-ASCII "
				       "characters");
		}
		for (; lo <= hi && lo >= 0x80; lo++)
			put_cp(&body, lo);
	}
	bool empty = !body.len;
	if (!neg && empty && has['^'] && !has[']'] && !has['['] && !has['-']) {
		wd_buf_append(t->out, "\\^", 2); /* the class [\^] */
		wd_buf_free(&body);
		return 0;
	}
	wd_buf_append(t->out, neg ? "[^" : "[", neg ? 2 : 1);
	if (has[']'])
		wd_buf_append(t->out, "]", 1), empty = false;
	if (body.len)
		wd_buf_append(t->out, body.data, body.len);
	if (has['['])
		wd_buf_append(t->out, "[", 1), empty = false;
	if (has['^'] && empty && !neg && has['-'])
		wd_buf_append(t->out, "-^", 2), has['-'] = false;
	else if (has['^'])
		wd_buf_append(t->out, "^", 1);
	if (has['-'])
		wd_buf_append(t->out, "-", 1);
	wd_buf_append(t->out, "]", 1);
	wd_buf_free(&body);
	return 0;
}

static int emit_set(struct tr *t, const struct range *r, size_t n, bool neg)
{
	struct cls *c = wd_calloc(1, sizeof(*c));
	int rc = cls_add_set(t, c, r, n) ?: cls_emit(t, c, neg);
	free(c);
	return rc;
}

/* One class item (t->p past any `[` `^`): a code point into *cp (1), or a
 * class escape added to c (0), or an error. */
static int class_atom(struct tr *t, struct cls *c, uint32_t *cp)
{
	if (*t->p != '\\') {
		*cp = next_cp(&t->p);
		return 1;
	}
	t->p++;
	const struct range *r;
	size_t n;
	bool neg;
	if (class_escape(*t->p, &r, &n, &neg)) {
		if (neg)
			return fail(t, "\\D \\S \\W inside a class");
		t->p++;
		return cls_add_set(t, c, r, n);
	}
	int k = char_escape(t, true, cp);
	if (k == 0)
		return fail(t, "this escape inside a class");
	return k;
}

static int parse_class(struct tr *t)
{
	t->p++; /* [ */
	bool neg = *t->p == '^';
	if (neg)
		t->p++;
	struct cls *c = wd_calloc(1, sizeof(*c));
	int rc = 0;
	while (!rc && *t->p != ']') {
		uint32_t lo, hi;
		if (!*t->p) {
			rc = fail(t, "an unterminated class");
			break;
		}
		int k = class_atom(t, c, &lo);
		if (k <= 0) {
			rc = k;
			continue;
		}
		if (t->p[0] == '-' && t->p[1] && t->p[1] != ']') {
			t->p++;
			int k2 = class_atom(t, c, &hi);
			if (k2 < 0) {
				rc = k2;
			} else if (k2 == 0) {
				rc =
				    fail(t, "a range ending in a class escape");
			} else if (hi < lo) {
				rc = fail(t, "a range out of order");
			} else {
				rc = cls_add(t, c, lo, hi);
			}
			continue;
		}
		rc = cls_add(t, c, lo, lo);
	}
	if (!rc) {
		if (!c->n)
			rc = fail(t,
				  neg ? "the class [^]" : "the empty class []");
		else
			rc = cls_emit(t, c, neg);
		t->p++; /* ] */
	}
	free(c);
	return rc;
}

static void emit_literal(struct wd_buf *b, uint32_t c)
{
	if (c < 0x80 && strchr(".[\\()*+?{}|^$", (int)c))
		wd_buf_append(b, "\\", 1);
	put_cp(b, c);
}

/* {n}, {n,}, {n,m}: 1 and the bounds, 0 when not a quantifier */
static int parse_braces(struct tr *t, long *n, long *m)
{
	const char *p = t->p + 1;
	char *e;
	if (*p < '0' || *p > '9')
		return 0;
	*n = strtol(p, &e, 10);
	*m = *n;
	if (*e == ',') {
		p = e + 1;
		if (*p == '}') {
			*m = -1;
			e = (char *)p;
		} else if (*p >= '0' && *p <= '9') {
			*m = strtol(p, &e, 10);
		} else {
			return 0;
		}
	}
	if (*e != '}')
		return 0;
	t->p = e + 1;
	return 1;
}

static int quantifier(struct tr *t, bool *atom)
{
	char q = *t->p;
	if (!*atom)
		return fail(t, "a quantifier with nothing to repeat");
	if (q == '{') {
		long n, m;
		if (!parse_braces(t, &n, &m))
			return fail(t, "a '{' that is not a quantifier (write "
				       "\\{)");
		if (n > MAX_REPEAT || m > MAX_REPEAT)
			return fail(t, "a repeat count above 1000");
		if (m >= 0 && m < n)
			return fail(t, "a {n,m} quantifier with m < n");
		if (m < 0)
			wd_buf_printf(t->out, "{%ld,}", n);
		else if (m == n)
			wd_buf_printf(t->out, "{%ld}", n);
		else
			wd_buf_printf(t->out, "{%ld,%ld}", n, m);
	} else {
		t->p++;
		wd_buf_append(t->out, &q, 1);
	}
	/* lazy: the same strings match (`pattern` only asks whether one
	 * match exists), so `?` is dropped */
	if (*t->p == '?')
		t->p++;
	if (*t->p && strchr("*+?{", *t->p))
		return fail(t, "a quantifier with nothing to repeat");
	*atom = false;
	return 0;
}

static int group_open(struct tr *t)
{
	t->p++; /* ( */
	if (*t->p != '?')
		goto plain;
	if (t->p[1] == ':') {
		t->p += 2;
		goto plain;
	}
	if (t->p[1] == '<' && t->p[2] != '=' && t->p[2] != '!') {
		const char *e = t->p + 2;
		while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') ||
		       (*e >= '0' && *e <= '9') || *e == '_' || *e == '$')
			e++;
		if (*e != '>' || e == t->p + 2)
			return fail(t, "a malformed group name");
		t->p = e + 1;
		goto plain;
	}
	return fail(t, "lookaround or a group modifier");
plain:
	wd_buf_append(t->out, "(", 1);
	return 0;
}

int wd_regex_translate(const char *pat, struct wd_buf *out, struct wd_err *err)
{
	struct tr t = {.p = pat, .start = pat, .out = out, .err = err};
	int depth = 0, rc = 0;
	bool atom = false;
	/* per open group: holds an anchor. glibc matches `^` `$` inside a
	 * repeated group differently from ECMA-262 ("(a$){2}" matches "a"
	 * there), so a quantifier on such a group is refused */
	bool anch[MAX_GROUPS] = {false}, anchored_atom = false;
	/* ECMA's `$` is the end of input: nothing may follow it on its path
	 * (glibc lets "$[^c]" match "\n"). A `$` must end its alternative,
	 * and a group holding one must too. */
	bool dollar[MAX_GROUPS + 1] = {false}, at_end = false;
	/* and `^` is the start of input: nothing may come before it on its
	 * path (glibc matches "x(^a)" in "x\na") */
	bool start_ok[MAX_GROUPS + 1] = {true}, at_start = true;
	while (!rc && *t.p) {
		char c = *t.p;
		if (at_end && c != ')' && c != '|' && c != '$')
			return fail(&t, "more pattern after '$' (ECMA-262's $ "
					"is the end of the input)");
		const struct range *r;
		size_t n;
		bool neg;
		switch (c) {
		case '^':
		case '$':
			if (depth)
				anch[depth - 1] = true;
			if (c == '$')
				at_end = dollar[depth] = true;
			else if (!at_start)
				return fail(&t,
					    "pattern before '^' (ECMA-262's ^ "
					    "is the start of the input)");
			wd_buf_append(out, &c, 1);
			t.p++;
			atom = anchored_atom = false;
			continue; /* keeps at_start: "^^" */
		case '|':
			at_end = false;
			wd_buf_append(out, &c, 1);
			t.p++;
			atom = false;
			at_start = start_ok[depth];
			anchored_atom = false;
			continue;
		case '.':
			t.p++;
			rc = emit_set(&t, R_NOTDOT, WD_ARRAY_SIZE(R_NOTDOT),
				      true);
			atom = true;
			break;
		case '(':
			if (depth >= MAX_GROUPS)
				return fail(&t, "groups nested deeper than 64");
			rc = group_open(&t);
			dollar[depth + 1] = false;
			start_ok[depth + 1] = at_start;
			anch[depth++] = false;
			atom = anchored_atom = false;
			if (rc)
				return rc;
			continue; /* keeps at_start: "(^a)" */
		case ')':
			if (!depth)
				return fail(&t, "an unmatched ')'");
			anchored_atom = anch[--depth];
			if (depth && anchored_atom)
				anch[depth - 1] = true;
			/* a group with a `$` alternative ends its own */
			at_end = dollar[depth + 1];
			if (at_end)
				dollar[depth] = true;
			t.p++;
			wd_buf_append(out, ")", 1);
			atom = true;
			at_start = false;
			continue; /* keeps anchored_atom for a quantifier */
		case '*':
		case '+':
		case '?':
		case '{':
			if (anchored_atom && atom)
				return fail(&t,
					    "a quantifier on a group holding "
					    "^ or $");
			rc = quantifier(&t, &atom);
			break;
		case '[':
			rc = parse_class(&t);
			atom = true;
			break;
		case ']':
		case '}':
			return fail(&t, "a lone ']' or '}' (escape it)");
		case '\\': {
			t.p++;
			uint32_t cp;
			if (class_escape(*t.p, &r, &n, &neg)) {
				t.p++;
				rc = emit_set(&t, r, n, neg);
			} else if ((rc = char_escape(&t, false, &cp)) == 1) {
				emit_literal(out, cp);
				rc = 0;
			} else if (rc == 0) {
				rc = fail(&t, *t.p >= '0' && *t.p <= '9'
						  ? "a backreference or \\0"
					      : *t.p == 'b' || *t.p == 'B'
						  ? "a word boundary"
						  : "this escape");
			}
			atom = true;
			break;
		}
		default:
			emit_literal(out, next_cp(&t.p));
			atom = true;
		}
		anchored_atom = false;
		at_start = false;
	}
	if (!rc && depth)
		rc = fail(&t, "an unclosed '('");
	/* keep out a C string even when nothing was appended */
	wd_buf_append(out, "", 1);
	out->len--;
	return rc;
}

static pthread_once_t loc_once = PTHREAD_ONCE_INIT;
static locale_t loc_utf8 = (locale_t)0;

static void loc_init(void)
{
	loc_utf8 = newlocale(LC_ALL_MASK, "C.UTF-8", (locale_t)0);
}

int wd_regex_compile(const char *pat, regex_t *re, struct wd_err *err)
{
	struct wd_buf b = {0};
	int rc = wd_regex_translate(pat, &b, err);
	if (rc) {
		wd_buf_free(&b);
		return rc;
	}
	pthread_once(&loc_once, loc_init);
	if (!loc_utf8) {
		wd_buf_free(&b);
		return wd_err_set(err, -EINVAL,
				  "pattern: no C.UTF-8 locale to match "
				  "patterns by code point");
	}
	/* per-thread: the daemon's other threads keep their locale */
	locale_t old = uselocale(loc_utf8);
	int r = regcomp(re, b.data, REG_EXTENDED | REG_NOSUB);
	uselocale(old);
	wd_buf_free(&b);
	if (r)
		return wd_err_set(err, -EINVAL, "pattern does not compile");
	return 0;
}

bool wd_regex_match(const regex_t *re, const char *s)
{
	pthread_once(&loc_once, loc_init);
	if (!loc_utf8)
		return false;
	locale_t old = uselocale(loc_utf8);
	bool ok = regexec(re, s, 0, NULL, 0) == 0;
	uselocale(old);
	return ok;
}
