/* wd_json_put_real (common/jsonstr.c): the exact bytes of
 * snprintf("%.17g") (+ ".0" when neither '.' nor an exponent), which the
 * trace's segments hold for every real (emit.c, recw.c; test_recw.c checks
 * the lines). Compared with snprintf over random bit patterns across and
 * beyond the range it formats itself (1e-6 <= |d| < 1e17), decimal-looking
 * values, integers, exact ties at the 17th digit (ties to even) and the
 * edges of the range. */
#include "t.h"
#include "common/jsonstr.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static unsigned long nbad;
static char bad[200];

static void check(double d)
{
	if (!isfinite(d))
		return;
	char want[64], got[WD_JSON_REAL_MAX + 1];
	int n = snprintf(want, sizeof(want), "%.17g", d);
	if (!strpbrk(want, ".eE"))
		snprintf(want + n, sizeof(want) - n, ".0");
	char *e = wd_json_put_real(got, d);
	*e = 0;
	if (strcmp(want, got) && !nbad++)
		snprintf(bad, sizeof(bad), "%a: want %s got %s", d, want, got);
}

static double from_bits(uint64_t b)
{
	double d;
	memcpy(&d, &b, sizeof(d));
	return d;
}

int main(void)
{
	/* random bits, exponents from ~1e-9 to ~1e20 and everywhere */
	nbad = 0;
	for (int i = 0; i < 3000000; i++) {
		uint64_t b = next();
		int be = 993 + (int)(next() % 100); /* 2^-30 .. 2^69 */
		b = (b & ~(0x7ffull << 52)) | (uint64_t)be << 52;
		check(from_bits(b));
		check(from_bits(next()));
	}
	T_OK(!nbad, "random-bits", "%lu differ, first %s", nbad, bad);

	/* what records hold: costs, ratios, latencies */
	nbad = 0;
	for (int i = 0; i < 2000000; i++) {
		double m = (double)(next() % 100000000);
		double s = pow(10, -(int)(next() % 14));
		check(m * s);
		check(-m * s);
		check((double)(next() % 10000) / 100.0);
	}
	for (int i = 0; i < 100000; i++)
		check((double)i);
	check(0.0231);
	check(0.1);
	check(0.0);
	check(-0.0);
	check(1.0);
	check(1e16);
	check(9007199254740993.0);
	T_OK(!nbad, "decimal-values", "%lu differ, first %s", nbad, bad);

	/* exact ties at the 17th significant digit: i + 0.25 and i + 0.75
	 * (18 digits, the last a 5) for 16-digit i below 2^51 */
	nbad = 0;
	for (int i = 0; i < 1000000; i++) {
		double base = 1e15 + (double)(next() % 1000000000000000ull);
		check(base + 0.25);
		check(base + 0.75);
		check(base + 0.5);
	}
	T_OK(!nbad, "ties-to-even", "%lu differ, first %s", nbad, bad);

	/* the edges of the range done without printf, and rounding up to
	 * one more digit (9.99...) */
	nbad = 0;
	double edges[] = {1e-6, 1e17, 1e-5, 1e-4, 1e15, 1e16, 0.001, 1e5};
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		double d = edges[i];
		for (int k = 0; k < 2000; k++) {
			check(d);
			check(-d);
			d = nextafter(d, 0);
		}
		d = edges[i];
		for (int k = 0; k < 2000; k++) {
			check(d);
			d = nextafter(d, INFINITY);
		}
	}
	check(from_bits(1)); /* the smallest subnormal */
	check(1.7976931348623157e308);
	T_OK(!nbad, "range-edges", "%lu differ, first %s", nbad, bad);
	return T_DONE();
}
