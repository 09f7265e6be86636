/* Cross-tenant probes, run INSIDE a sandbox by tests/integration/
 * exec_tenants.sh; the verdict comes from outside (the victim's nice
 * value, limits and liveness in /proc, ipcs, the files' owners).
 *
 *   tenant hold FILE SECS      write "<pid> <uid>" to FILE, sleep
 *   tenant spawnhold FILE SECS a setsid'ed grandchild writes its pid to
 *                              FILE and sleeps SECS; we sleep too
 *   tenant renice|prlimit|ioprio|sched|kill PID
 *                              try it on PID: exit 0 done, 1 refused
 *   tenant shmleave KEY        leave a SysV segment and message (KEY)
 *   tenant shmread KEY         exit 0 and print if KEY's segment exists
 *   tenant shmid ID            read segment ID: exit 0 and print if it can
 *   tenant write FILE          create FILE
 *   tenant chmod FILE          chmod FILE 0777: exit 0 done, 1 refused
 *   tenant reuseport PORT SECS join 127.0.0.1:PORT with SO_REUSEPORT,
 *                              listen, hold SECS
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/msg.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int verdict(const char *what, int r)
{
	if (r == 0) {
		printf("%s: done\n", what);
		return 0;
	}
	printf("%s: refused: %s\n", what, strerror(errno));
	return 1;
}

static void put(const char *file, long v)
{
	FILE *f = fopen(file, "w");
	if (!f) {
		perror(file);
		exit(2);
	}
	fprintf(f, "%ld %u\n", v, (unsigned)getuid());
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: tenant CMD ARG...\n");
		return 2;
	}
	const char *c = argv[1];
	if (!strcmp(c, "hold") && argc == 4) {
		put(argv[2], getpid());
		sleep(atoi(argv[3]));
		return 0;
	}
	if (!strcmp(c, "spawnhold") && argc == 4) {
		pid_t p = fork();
		if (p == 0) {
			setsid();
			if (fork() == 0) {
				put(argv[2], getpid());
				sleep(atoi(argv[3]));
				_exit(0);
			}
			_exit(0);
		}
		sleep(atoi(argv[3]));
		return 0;
	}
	if (!strcmp(c, "write") && argc == 3) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_EXCL, 0644);
		return fd < 0 ? verdict("write", -1) : verdict("write", 0);
	}
	if (!strcmp(c, "reuseport") && argc == 4) {
		int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons(atoi(argv[2])),
					.sin_addr.s_addr =
					    htonl(INADDR_LOOPBACK)};
		if (s < 0 ||
		    setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one,
			       sizeof(one)) ||
		    bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 8))
			return verdict("reuseport", -1);
		printf("reuseport: joined\n");
		fflush(stdout);
		sleep(atoi(argv[3]));
		return 0;
	}
	if (!strcmp(c, "chmod") && argc == 3)
		return verdict("chmod", chmod(argv[2], 0777));
	if (!strcmp(c, "shmleave") && argc == 3) {
		key_t k = (key_t)strtol(argv[2], NULL, 0);
		int id = shmget(k, 1 << 20, IPC_CREAT | 0666);
		if (id < 0)
			return verdict("shmget", -1);
		char *p = shmat(id, NULL, 0);
		if (p == (void *)-1)
			return verdict("shmat", -1);
		strcpy(p, "left-by-an-earlier-call");
		int q = msgget(k, IPC_CREAT | 0666);
		struct {
			long t;
			char m[32];
		} msg = {1, "left-by-an-earlier-call"};
		if (q < 0 || msgsnd(q, &msg, sizeof(msg.m), 0) < 0)
			return verdict("msg", -1);
		return verdict("shmleave", 0);
	}
	if (!strcmp(c, "shmread") && argc == 3) {
		key_t k = (key_t)strtol(argv[2], NULL, 0);
		int id = shmget(k, 0, 0);
		int q = msgget(k, 0);
		if (id < 0 && q < 0)
			return verdict("shmread", -1);
		char *p = id >= 0 ? shmat(id, NULL, SHM_RDONLY) : (void *)-1;
		printf("found: shm %d msg %d: %s\n", id, q,
		       p != (void *)-1 ? p : "(not attached)");
		return 0;
	}
	if (!strcmp(c, "shmid") && argc == 3) {
		char *p = shmat(atoi(argv[2]), NULL, SHM_RDONLY);
		if (p == (void *)-1)
			return verdict("shmat", -1);
		printf("read: '%.16s'\n", p);
		return 0;
	}
	if (argc != 3)
		return 2;
	pid_t pid = atoi(argv[2]);
	if (!strcmp(c, "renice"))
		return verdict("setpriority",
			       setpriority(PRIO_PROCESS, pid, 19));
	if (!strcmp(c, "prlimit")) {
		struct rlimit r = {1, 1};
		return verdict("prlimit",
			       prlimit(pid, RLIMIT_NOFILE, &r, NULL));
	}
	if (!strcmp(c, "ioprio")) /* IOPRIO_WHO_PROCESS, class idle */
		return verdict("ioprio_set",
			       (int)syscall(SYS_ioprio_set, 1, pid, 3 << 13));
	if (!strcmp(c, "sched")) {
		struct sched_param sp = {0};
		return verdict("sched_setscheduler",
			       sched_setscheduler(pid, SCHED_IDLE, &sp));
	}
	if (!strcmp(c, "kill"))
		return verdict("kill", kill(pid, SIGKILL));
	fprintf(stderr, "tenant: unknown command %s\n", c);
	return 2;
}
