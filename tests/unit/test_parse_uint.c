/* wd_parse_uint (common/util.h): the command line's numbers, whole or
 * refused. A typo must not become 0 ("--uid abc" as root's uid, "--workers
 * 8x" as the default) nor wrap ("--metrics :70000" as port 4464). */
#include "t.h"

#include "common/util.h"

#include <errno.h>
#include <limits.h>

static void one(const char *s, unsigned long long min, unsigned long long max,
		int want_rc, unsigned long long want)
{
	unsigned long long v = 0xdeadbeef;
	int rc = wd_parse_uint(s, min, max, &v);
	char name[96];
	snprintf(name, sizeof(name), "parse_uint['%s' in %llu..%llu]", s, min,
		 max);
	T_OK(rc == want_rc && (rc ? v == 0xdeadbeef : v == want), name,
	     "rc %d (want %d), value %llu (want %llu)", rc, want_rc, v,
	     rc ? 0xdeadbeefULL : want);
}

int main(void)
{
	one("0", 0, 10, 0, 0);
	one("10", 0, 10, 0, 10);
	one("007", 0, 10, 0, 7);
	one("18446744073709551615", 0, ULLONG_MAX, 0, ULLONG_MAX);
	/* not a number: nothing is read into the value */
	one("", 0, 10, -EINVAL, 0);
	one("abc", 0, 10, -EINVAL, 0);
	one("8x", 0, 10, -EINVAL, 0);
	one("-1", 0, 10, -EINVAL, 0);
	one("+1", 0, 10, -EINVAL, 0);
	one(" 3", 0, 10, -EINVAL, 0);
	one("3 ", 0, 10, -EINVAL, 0);
	one("0x10", 0, 100, -EINVAL, 0);
	/* out of range, and past 64 bits (strtoull would saturate) */
	one("11", 0, 10, -ERANGE, 0);
	one("0", 1, 10, -ERANGE, 0);
	one("18446744073709551616", 0, ULLONG_MAX, -ERANGE, 0);
	one("99999999999999999999999", 0, ULLONG_MAX, -ERANGE, 0);
	return T_DONE();
}
