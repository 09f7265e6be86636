/* Shared by the C benchmarks: the median of samples, the peer side of a
 * spawn comparison (plain fork + exec, stdio on /dev/null), and the line
 * that sets a figure against the one that held when issue 16 was filed. */
#ifndef WD_BENCH_H
#define WD_BENCH_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"

static int bench_cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static inline double bench_median(double *v, int n)
{
	qsort(v, n, sizeof(*v), bench_cmp_d);
	return v[n / 2];
}

/* Wall time of argv run to its end (ms); its exit status in *status when
 * status is not NULL (a command that fails fast is no measurement). */
static inline double bench_run_status(char *const argv[], int *status)
{
	uint64_t t0 = wd_now_ns();
	pid_t p = fork();
	if (p == 0) {
		int fd = open("/dev/null", O_RDWR);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	int st = -1;
	waitpid(p, &st, 0);
	if (status)
		*status = st;
	return (wd_now_ns() - t0) / 1e6;
}

static inline double bench_run_plain(char *const argv[])
{
	return bench_run_status(argv, NULL);
}

/* The 1-minute load average, -1 if unknown: printed beside a wall-clock
 * figure, which moves with the machine's other load. */
static inline double bench_load(void)
{
	double l;
	return getloadavg(&l, 1) == 1 ? l : -1;
}

/* One figure against the one that held when issue 16 was filed, so a
 * regression shows:
 *   "<what> vs the <held><unit> that held at issue 16: <now><unit>,
 *    <now/held>x (goal <goal>; load L)"
 * prec: decimals of both figures; goal NULL when there is none. A ratio
 * above 1 is worse for a time or a cost ratio, better for a rate. */
static inline void bench_held(const char *what, double now, double held,
			      int prec, const char *unit, const char *goal)
{
	printf("%s vs the %.*f%s that held at issue 16: %.*f%s, %.2fx "
	       "(%s%s%sload %.2f)\n",
	       what, prec, held, unit, prec, now, unit, now / held,
	       goal ? "goal " : "", goal ? goal : "", goal ? "; " : "",
	       bench_load());
}

#endif
