#include "common/jsonstr.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF (what jansson
 * accepts). */
size_t wd_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

char *wd_json_put_str(char *out, const char *str, size_t n, bool check_utf8)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *s = (const unsigned char *)str;
	/* bytes that stop the copy: controls, '"', '\\' (and, when checking
	 * UTF-8, any byte >= 0x80) */
	uint64_t high = check_utf8 ? WD_REP8(0x80) : 0;
	char *p = out;
	*p++ = '"';
	size_t i = 0;
	while (i < n) {
		size_t from = i;
#if defined(__SSE2__)
		/* 16 bytes a step: a byte below 0x20 is one the unsigned max
		 * with 0x1f leaves at 0x1f; >= 0x80 is the sign bit */
		const __m128i lo = _mm_set1_epi8(0x1f);
		while (i + 16 <= n) {
			__m128i x = _mm_loadu_si128(
			    (const __m128i *)(const void *)(s + i));
			__m128i m = _mm_or_si128(
			    _mm_cmpeq_epi8(_mm_max_epu8(x, lo), lo),
			    _mm_or_si128(
				_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
				_mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
			int bits = _mm_movemask_epi8(m) |
				   (check_utf8 ? _mm_movemask_epi8(x) : 0);
			if (bits) {
				i += (size_t)__builtin_ctz((unsigned)bits);
				break;
			}
			i += 16;
		}
#endif
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			uint64_t m = wd_ltbytes(w, 0x20) |
				     wd_zbytes(w ^ WD_REP8('"')) |
				     wd_zbytes(w ^ WD_REP8('\\')) | (w & high);
			if (m) {
				i += __builtin_ctzll(m) >> 3;
				break;
			}
			i += 8;
		}
		while (i < n && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' &&
		       !(check_utf8 && s[i] >= 0x80))
			i++;
		memcpy(p, s + from, i - from);
		p += i - from;
		if (i >= n)
			break;
		unsigned char c = s[i];
		if (c >= 0x80) { /* check_utf8 */
			size_t l = wd_utf8_len(s + i, n - i);
			if (!l) {
				memcpy(p, "\\uFFFD", 6);
				p += 6;
				i++;
			} else {
				memcpy(p, s + i, l);
				p += l;
				i += l;
			}
			continue;
		}
		i++;
		*p++ = '\\';
		switch (c) {
		case '"':
		case '\\':
			*p++ = (char)c;
			break;
		case '\b':
			*p++ = 'b';
			break;
		case '\f':
			*p++ = 'f';
			break;
		case '\n':
			*p++ = 'n';
			break;
		case '\r':
			*p++ = 'r';
			break;
		case '\t':
			*p++ = 't';
			break;
		default:
			memcpy(p, "u00", 3);
			p[3] = hex[c >> 4];
			p[4] = hex[c & 15];
			p += 5;
		}
	}
	*p++ = '"';
	return p;
}
