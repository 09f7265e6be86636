#include "common/jsonstr.h"

#include <math.h>
#include <stdio.h>
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

/* 10^k, k <= 22 (here only as a 128-bit integer factor) */
static unsigned __int128 pow10_u128(int k)
{
	unsigned __int128 p = 1;
	while (k-- > 0)
		p *= 10;
	return p;
}

/* The 17 significant digits of a = m * 2^e (m < 2^53) as an integer in
 * [10^16, 10^17): round(a * 10^(16 - x)), ties to even, x =
 * floor(log10(a)) after rounding. Exact: m * 10^k < 2^53 * 10^22 < 2^127
 * (k = 16 - x <= 22, i.e. a >= 1e-6) and the division by 2^-e is a shift
 * whose remainder decides the rounding. false when a is outside [1e-6,
 * 1e17) (not covered: the caller uses snprintf). */
static bool digits17(uint64_t m, int e, uint64_t *dig, int *x)
{
	static const uint64_t lo = 10000000000000000ull; /* 10^16 */
	/* log10(a) from the binary exponent: off by at most one, fixed
	 * below */
	int xe =
	    (int)floor((e + 63 - __builtin_clzll(m)) * 0.30102999566398120);
	for (int tries = 0; tries < 3; tries++) {
		int k = 16 - xe;
		if (k < 0 || k > 22)
			return false;
		unsigned __int128 n = (unsigned __int128)m * pow10_u128(k);
		unsigned __int128 q;
		bool up = false;
		if (e >= 0) {
			if (e > 12) /* a < 1e17 < 2^57 */
				return false;
			q = n << e;
		} else {
			int sh = -e;
			if (sh > 120)
				return false;
			q = n >> sh;
			unsigned __int128 rem = n - (q << sh);
			unsigned __int128 half = (unsigned __int128)1
						 << (sh - 1);
			up = rem > half || (rem == half && (q & 1));
		}
		if (q >= 10 * (unsigned __int128)lo) {
			xe++;
			continue;
		}
		if (q < lo) {
			xe--;
			continue;
		}
		uint64_t d = (uint64_t)q + up;
		if (d == 10 * lo) { /* 9.99..95 rounded up: one more digit */
			d = lo;
			xe++;
		}
		*dig = d;
		*x = xe;
		return true;
	}
	return false;
}

char *wd_json_put_real(char *out, double d)
{
	char *p = out;
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	int be = (int)(bits >> 52 & 0x7ff);
	uint64_t m = bits & ((1ull << 52) - 1);
	uint64_t dig;
	int x;
	if (bits >> 63)
		*p++ = '-';
	if (!be && !m) {
		memcpy(p, "0.0", 3);
		return p + 3;
	}
	if (!be || be == 0x7ff ||
	    !digits17(m | 1ull << 52, be - 1075, &dig, &x)) {
		/* subnormal, or outside [1e-6, 1e17) */
		char num[WD_JSON_REAL_MAX];
		int n = snprintf(num, sizeof(num), "%.17g", d);
		if (n < 0 || n >= (int)sizeof(num) - 2)
			n = 0;
		memcpy(out, num, n);
		p = out + n;
		if (!memchr(num, '.', n) && !memchr(num, 'e', n)) {
			memcpy(p, ".0", 2);
			p += 2;
		}
		return p;
	}
	char ds[17];
	for (int i = 16; i >= 0; i--, dig /= 10)
		ds[i] = (char)('0' + dig % 10);
	int nd = 17; /* %g drops trailing zeros */
	while (nd > 1 && ds[nd - 1] == '0')
		nd--;
	if (x < -4) { /* %g's exponent form (x >= 17 is not covered) */
		*p++ = ds[0];
		if (nd > 1) {
			*p++ = '.';
			memcpy(p, ds + 1, nd - 1);
			p += nd - 1;
		}
		memcpy(p, "e-0", 3); /* x is -5 or -6 here */
		p[3] = (char)('0' - x);
		return p + 4;
	}
	if (x < 0) {
		*p++ = '0';
		*p++ = '.';
		for (int i = 0; i < -x - 1; i++)
			*p++ = '0';
		memcpy(p, ds, nd);
		return p + nd;
	}
	memcpy(p, ds, x + 1);
	p += x + 1;
	*p++ = '.';
	if (nd > x + 1) {
		memcpy(p, ds + x + 1, nd - x - 1);
		p += nd - x - 1;
	} else {
		*p++ = '0'; /* an integral value: ".0" keeps it real */
	}
	return p;
}
