/* microbench: per-operation cost of a syscall pattern, run inside and
 * outside the sandbox by tests/bench/bench_spawn.c.
 *   microbench getpid N | open N PATH | connect N IP PORT
 * Prints "ns_per_op <float>". */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long n = atol(argv[2]);
	double t0 = now();
	if (!strcmp(argv[1], "getpid")) {
		for (long i = 0; i < n; i++)
			syscall(SYS_getpid);
	} else if (!strcmp(argv[1], "open") && argc > 3) {
		for (long i = 0; i < n; i++) {
			int fd = open(argv[3], O_RDONLY);
			if (fd < 0)
				return 1;
			close(fd);
		}
	} else if (!strcmp(argv[1], "connect") && argc > 4) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons(atoi(argv[4]))};
		inet_pton(AF_INET, argv[3], &a.sin_addr);
		for (long i = 0; i < n; i++) {
			int s = socket(AF_INET, SOCK_STREAM, 0);
			if (s < 0 || connect(s, (void *)&a, sizeof(a)) < 0)
				return 1;
			close(s);
		}
	} else {
		return 2;
	}
	printf("ns_per_op %.1f\n", (now() - t0) / n);
	return 0;
}
