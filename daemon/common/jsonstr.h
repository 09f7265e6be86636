/* Writing JSON strings without jansson, for the hot paths that build
 * records and event lines directly (daemon/trace/emit.c,
 * daemon/events/event.c). */
#ifndef WD_JSONSTR_H
#define WD_JSONSTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Word-at-a-time byte tests (8 bytes per step): a 0x80 bit in each byte
 * position that may match. Never misses a match; may flag a byte above a
 * real match (callers re-check bytes exactly). */
#define WD_REP8(c) (0x0101010101010101ull * (uint8_t)(c))
static inline uint64_t wd_zbytes(uint64_t v)
{
	return (v - WD_REP8(1)) & ~v & WD_REP8(0x80);
}
static inline uint64_t wd_ltbytes(uint64_t v, uint8_t n) /* n <= 128 */
{
	return (v - WD_REP8(n)) & ~v & WD_REP8(0x80);
}

/* Length of the valid UTF-8 sequence at s (n >= 1 bytes left), 0 if it is
 * not one (overlong forms, surrogates, above U+10FFFF: what jansson
 * refuses). */
size_t wd_utf8_len(const unsigned char *s, size_t n);

/* Room a string of n bytes can need: \uXXXX per byte, and the quotes. */
#define WD_JSON_STR_MAX(n) (6 * (size_t)(n) + 2)

/* s (n bytes) as a JSON string, quotes included, at out (room for
 * WD_JSON_STR_MAX(n)), as jansson's compact dump writes it: '"', '\\' and
 * control characters escaped (\b \f \n \r \t, else \u00XX in upper-case
 * hex), everything else as it is. With check_utf8, a byte that does not
 * start a valid UTF-8 sequence becomes \uFFFD (strings jansson holds are
 * valid already). Returns the end of what was written. */
char *wd_json_put_str(char *out, const char *s, size_t n, bool check_utf8);

/* Room wd_json_put_real can need. */
#define WD_JSON_REAL_MAX 32

/* A finite d as jansson and the trace write reals: exactly the bytes of
 * snprintf("%.17g") (round-trips), then ".0" if that has neither '.' nor
 * an exponent (it stays a real when read back). Without printf for
 * 1e-6 <= |d| < 1e17 (and 0): the digits come from exact integer
 * arithmetic, so they are the correctly rounded ones printf gives (ties to
 * even); other magnitudes through snprintf. No NUL written. Returns the
 * end of what was written. */
char *wd_json_put_real(char *out, double d);

#endif
