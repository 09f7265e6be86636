/* Redaction: API keys and Authorization headers never reach the store.
 * Applied to every string of a record and to every blob before anything is
 * hashed or written. Built-in patterns are a hand-written scanner (it runs on
 * every record); extra patterns from wd_trace_opts are POSIX regexes.
 * Replacements only ever consume token characters, never a quote or a
 * backslash, so redacting serialized JSON text keeps it valid JSON. */
#include "trace/trace_int.h"

#include <ctype.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string.h>
#include <strings.h>

#define RED "[REDACTED]"

static bool tok_char(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_';
}

static bool bearer_char(unsigned char c)
{
	return isalnum(c) || (c && strchr("-._~+/=", c));
}

static bool ieq(const char *s, size_t len, size_t i, const char *w)
{
	size_t n = strlen(w);
	return i + n <= len && !strncasecmp(s + i, w, n);
}

/* Length of a header value after `name`: skips `"`, spaces, `:` or `=`,
 * spaces, `"`; returns where the value starts in *vs. */
static size_t header_value(const char *s, size_t len, size_t i, size_t *vs,
			   bool allow_space)
{
	size_t j = i;
	if (j < len && s[j] == '\\')
		j++;
	if (j < len && s[j] == '"')
		j++;
	while (j < len && (s[j] == ' ' || s[j] == '\t'))
		j++;
	if (j >= len || (s[j] != ':' && s[j] != '='))
		return 0;
	j++;
	while (j < len && (s[j] == ' ' || s[j] == '\t'))
		j++;
	if (j < len && s[j] == '\\')
		j++;
	if (j < len && s[j] == '"')
		j++;
	*vs = j;
	if (ieq(s, len, j, RED))
		return 0;
	/* a token; for Authorization "<scheme> <token>" */
	size_t k = j;
	while (k < len && bearer_char(s[k]))
		k++;
	if (allow_space && k > j && k + 1 < len && s[k] == ' ' &&
	    bearer_char(s[k + 1]) && !ieq(s, len, k + 1, RED)) {
		k++;
		while (k < len && bearer_char(s[k]))
			k++;
	}
	return k - j;
}

/* First letters of the built-in patterns: sk-, bearer, x-api-key,
 * authorization. Every other byte is skipped with one table load. */
static const unsigned char trigger[256] = {
    ['s'] = 1, ['S'] = 1, ['b'] = 1, ['B'] = 1,
    ['x'] = 1, ['X'] = 1, ['a'] = 1, ['A'] = 1,
};

/* Where the next possible start of a built-in pattern is, from i, looking
 * at pairs of bytes 8 at a time: "sk", "be", "x-", "au" in any case (ORing
 * 0x20 folds case; it also lets a few other bytes through, which the exact
 * checks reject). Returns i itself for a candidate at i or near the end. */
static size_t next_candidate(const char *s, size_t len, size_t i)
{
#if defined(__SSE2__)
	/* the same pairs 16 at a time (a record's text is scanned whole:
	 * this loop was the largest cost of a typed append) */
	const __m128i fold = _mm_set1_epi8(0x20);
	while (i + 17 <= len) {
		__m128i a = _mm_or_si128(
		    _mm_loadu_si128((const __m128i *)(const void *)(s + i)),
		    fold);
		__m128i b = _mm_or_si128(
		    _mm_loadu_si128((const __m128i *)(const void *)(s + i + 1)),
		    fold);
		__m128i m = wd_redact_pairs16(a, b);
		int bits = _mm_movemask_epi8(m);
		if (bits)
			return i + (size_t)__builtin_ctz((unsigned)bits);
		i += 16;
	}
#endif
	while (i + 8 <= len) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		uint64_t y = w | WD_REP8(0x20);
		uint64_t m = (wd_zbytes(y ^ WD_REP8('s')) &
			      (wd_zbytes(y ^ WD_REP8('k')) >> 8)) |
			     (wd_zbytes(y ^ WD_REP8('b')) &
			      (wd_zbytes(y ^ WD_REP8('e')) >> 8)) |
			     (wd_zbytes(y ^ WD_REP8('x')) &
			      (wd_zbytes(y ^ WD_REP8('-')) >> 8)) |
			     (wd_zbytes(y ^ WD_REP8('a')) &
			      (wd_zbytes(y ^ WD_REP8('u')) >> 8));
		m &= 0x0080808080808080ull; /* pairs inside the word */
		if (m)
			return i + (__builtin_ctzll(m) >> 3);
		i += 7;
	}
	return i;
}

static char *builtin(const char *s, size_t len, size_t *out_len)
{
	struct wd_buf b = {0};
	size_t from = 0, i = 0;
	bool hit = false;
	while (i < len) {
		size_t nx = next_candidate(s, len, i);
		if (nx != i) {
			i = nx;
			continue;
		}
		unsigned char c = s[i];
		size_t skip = 0, keep = 0, n;
		if (!trigger[c]) {
			i++;
			continue;
		}
		size_t vs;
		if ((c == 's' || c == 'S') && i + 3 <= len &&
		    (s[i + 1] == 'k' || s[i + 1] == 'K') && s[i + 2] == '-' &&
		    (i == 0 || !isalnum((unsigned char)s[i - 1]))) {
			for (n = i + 3; n < len && tok_char(s[n]); n++)
				;
			if (n - (i + 3) >= 16) {
				keep = 3;
				skip = n - i;
			}
		} else if ((c | 0x20) == 'b' && i + 1 < len &&
			   (s[i + 1] | 0x20) == 'e' &&
			   ieq(s, len, i, "bearer ")) {
			for (n = i + 7; n < len && s[n] == ' '; n++)
				;
			size_t t0 = n;
			for (; n < len && bearer_char(s[n]); n++)
				;
			if (n - t0 >= 8) {
				keep = t0 - i;
				skip = n - i;
			}
		} else if ((c | 0x20) == 'x' && i + 1 < len &&
			   s[i + 1] == '-' && ieq(s, len, i, "x-api-key")) {
			n = header_value(s, len, i + 9, &vs, false);
			if (n) {
				keep = vs - i;
				skip = vs + n - i;
			}
		} else if ((c | 0x20) == 'a' && i + 1 < len &&
			   (s[i + 1] | 0x20) == 'u' &&
			   ieq(s, len, i, "authorization")) {
			n = header_value(s, len, i + 13, &vs, true);
			if (n) {
				keep = vs - i;
				skip = vs + n - i;
			}
		}
		if (!skip) {
			i++;
			continue;
		}
		hit = true;
		wd_buf_append(&b, s + from, i + keep - from);
		wd_buf_append(&b, RED, sizeof(RED) - 1);
		i += skip;
		from = i;
	}
	if (!hit)
		return NULL;
	wd_buf_append(&b, s + from, len - from);
	*out_len = b.len;
	return b.data;
}

static char *regexes(struct wd_trace *t, const char *s, size_t len,
		     size_t *out_len)
{
	char *cur = NULL;
	size_t cur_len = len;
	for (size_t r = 0; r < t->nrx; r++) {
		const char *src = cur ? cur : s;
		struct wd_buf b = {0};
		size_t from = 0;
		bool hit = false;
		while (from <= cur_len) {
			regmatch_t m = {.rm_so = from, .rm_eo = cur_len};
			if (regexec(&t->rx[r], src, 1, &m,
				    REG_STARTEND | (from ? REG_NOTBOL : 0)))
				break;
			if (m.rm_eo == m.rm_so) { /* empty match: step */
				if ((size_t)m.rm_eo >= cur_len)
					break;
				wd_buf_append(&b, src + from,
					      m.rm_eo + 1 - from);
				from = m.rm_eo + 1;
				continue;
			}
			hit = true;
			wd_buf_append(&b, src + from, m.rm_so - from);
			wd_buf_append(&b, RED, sizeof(RED) - 1);
			from = m.rm_eo;
		}
		if (!hit) {
			wd_buf_free(&b);
			continue;
		}
		wd_buf_append(&b, src + from, cur_len - from);
		free(cur);
		cur = b.data;
		cur_len = b.len;
	}
	if (cur)
		*out_len = cur_len;
	return cur;
}

char *wd_trace_redact_text(struct wd_trace *t, const char *s, size_t len,
			   size_t *out_len)
{
	size_t n1 = 0, n2 = 0;
	char *a = builtin(s, len, &n1);
	char *b = t && t->nrx ? regexes(t, a ? a : s, a ? n1 : len, &n2) : NULL;
	if (b) {
		free(a);
		*out_len = n2;
		return b;
	}
	if (a)
		*out_len = n1;
	return a;
}

bool wd_trace_secret_key(const char *k)
{
	static const char *const keys[] = {
	    "authorization",  "x-api-key",	"api_key",
	    "api-key",	      "apikey",		"proxy-authorization",
	    "x-goog-api-key", "openai_api_key", "anthropic_api_key",
	};
	/* they all start with a, x, p or o; only a key of one of their
	 * lengths is compared (every string key of every record comes here) */
	char c0 = k[0] | 0x20;
	if (c0 != 'a' && c0 != 'x' && c0 != 'p' && c0 != 'o')
		return false;
	size_t kl = strlen(k);
	if (kl > 19 || !(0xa62c0u >> kl & 1)) /* 6 7 9 13 14 17 19 */
		return false;
	for (size_t i = 0; i < WD_ARRAY_SIZE(keys); i++)
		if (strlen(keys[i]) == kl && !strcasecmp(k, keys[i]))
			return true;
	return false;
}

void wd_trace_redact_json(struct wd_trace *t, json_t *v)
{
	const char *k;
	json_t *x;
	size_t i;
	if (json_is_object(v)) {
		json_object_foreach(v, k, x)
		{
			if (wd_trace_secret_key(k) && json_is_string(x)) {
				if (strcmp(json_string_value(x), RED))
					json_string_set(x, RED);
				continue;
			}
			wd_trace_redact_json(t, x);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) wd_trace_redact_json(t, x);
	} else if (json_is_string(v)) {
		size_t n;
		char *r = wd_trace_redact_text(t, json_string_value(v),
					       json_string_length(v), &n);
		if (r) {
			json_string_setn(v, r, n);
			free(r);
		}
	}
}

void wd_trace_ref_redacted(struct wd_trace *t, const char *s, size_t len,
			   char out[WD_TRACE_REF_LEN])
{
	size_t n = 0;
	char *r = wd_trace_redact_text(t, s, len, &n);
	if (r)
		wd_trace_ref_of(r, n, out);
	else
		wd_trace_ref_of(s, len, out);
	free(r);
}

json_t *wd_trace_redacted_copy(struct wd_trace *t, const json_t *v)
{
	json_t *c = json_deep_copy(v);
	if (c)
		wd_trace_redact_json(t, c);
	return c;
}
