/* Minimal test harness for unit tests. Each check prints one line:
 *   PASS name | FAIL name: why | SKIP name: why
 * tests/run.sh counts the lines; the binary exits 1 if anything failed. */
#ifndef WD_T_H
#define WD_T_H

#include <stdio.h>
#include <string.h>

static int t_failed, t_passed;

#define T_PASS(name) (t_passed++, printf("PASS %s\n", name))
#define T_FAIL(name, ...)                                                      \
	(t_failed++, printf("FAIL %s: ", name), printf(__VA_ARGS__),           \
	 printf(" (%s:%d)\n", __FILE__, __LINE__))
#define T_SKIP(name, ...)                                                      \
	(printf("SKIP %s: ", name), printf(__VA_ARGS__), printf("\n"))
/* Check a condition; name the check. */
#define T_OK(cond, name, ...)                                                  \
	do {                                                                   \
		if (cond)                                                      \
			T_PASS(name);                                          \
		else                                                           \
			T_FAIL(name, __VA_ARGS__);                             \
	} while (0)
#define T_DONE() (fflush(stdout), t_failed ? 1 : 0)

#endif
