/* The task fields of a denial record (bpf/lib/maps.h wd_event_fill: read
 * from the task through its BTF pointer, not by the helpers) are the ones
 * the helpers gave: pid = the denied thread's id, tgid = its process id,
 * uid = its uid as the init namespace sees it, comm = its name, cgroup_id
 * = its v2 cgroup, ts_ns = CLOCK_BOOTTIME. The denied connect() runs in a
 * second thread of a child under uid 65534, so that pid != tgid and uid
 * != 0; the raw record is read from the ring (wd_events) itself. */
#include <bpf/libbpf.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "common/util.h"
#include "enforce/egress.h"
#include "lib/events.h"
#include "t.h"
#include "test_cgroup_util.h"

static char cg_path[256];

struct shot {
	int rc;	      /* errno of the connect (EPERM expected) */
	uint32_t tid; /* the thread that called it */
	uint64_t t0;  /* CLOCK_BOOTTIME before and after */
	uint64_t t1;
};

static uint64_t boot_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void *denied_connect(void *arg)
{
	struct shot *s = arg;
	prctl(PR_SET_NAME, "wd-rec-thread");
	s->tid = (uint32_t)syscall(SYS_gettid);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(9)};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->t0 = boot_ns();
	s->rc = connect(fd, (void *)&sin, sizeof(sin)) ? errno : 0;
	s->t1 = boot_ns();
	close(fd);
	return NULL;
}

/* The child: joins the cgroup, becomes uid/gid 65534, denied connect() in
 * a second thread; writes its shot and pid to wfd. */
static void child(int wfd)
{
	char procs[300];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_path);
	if (wd_write_str(procs, "0") ||
	    syscall(SYS_setresgid, 65534, 65534, 65534) ||
	    syscall(SYS_setresuid, 65534, 65534, 65534))
		_exit(2);
	struct shot s = {0};
	pthread_t th;
	if (pthread_create(&th, NULL, denied_connect, &s) ||
	    pthread_join(th, NULL))
		_exit(3);
	if (write(wfd, &s, sizeof(s)) != sizeof(s))
		_exit(4);
	_exit(0);
}

struct got {
	int n;
	struct wd_kevent k;
};

static int on_rec(void *ctx, void *data, size_t size)
{
	struct got *g = ctx;
	if (size >= WD_KEV_SHORT_SIZE && !g->n++)
		memcpy(&g->k, data, WD_KEV_SHORT_SIZE);
	return 0;
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("event_task", "needs root (BPF, cgroups)");
		return T_DONE();
	}
	struct wd_err err = {0};
	struct wd_egress *e = NULL;
	if (wd_egress_open(&e, &err)) {
		T_FAIL("egress_open", "%s", err.msg);
		return T_DONE();
	}
	int crc = tc_scratch_cgroup(cg_path, sizeof(cg_path), "warden-evtask");
	if (crc) {
		T_FAIL("cgroup", "mkdir %s: %s", cg_path, strerror(-crc));
		wd_egress_close(e);
		return T_DONE();
	}
	int cgfd = open(cg_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat sb;
	fstat(cgfd, &sb);
	uint64_t cgid = sb.st_ino;
	int rc = wd_egress_attach(e, cgfd, cgid, NULL, 0, false, 0, &err);
	T_OK(rc == 0, "attach", "%s", err.msg);

	struct wd_egress_map_fds fds;
	wd_egress_map_fds(e, &fds);
	struct got g = {0};
	struct ring_buffer *rb = ring_buffer__new(fds.events, on_rec, &g, NULL);
	T_OK(rb != NULL, "ring_open", "%s", strerror(errno));
	if (rb)
		ring_buffer__consume(rb); /* nothing from before */
	g.n = 0;

	int pfd[2];
	struct shot s = {0};
	pid_t kid = -1;
	if (!rc && rb && !pipe(pfd)) {
		kid = fork();
		if (kid == 0) {
			close(pfd[0]);
			child(pfd[1]);
		}
		close(pfd[1]);
		if (read(pfd[0], &s, sizeof(s)) != sizeof(s))
			s.rc = -1;
		close(pfd[0]);
		int st;
		waitpid(kid, &st, 0);
		ring_buffer__consume(rb);
	}
	T_OK(s.rc == EPERM && g.n == 1, "one_denied_record",
	     "connect errno %d, %d records", s.rc, g.n);
	if (g.n == 1) {
		const struct wd_kevent *k = &g.k;
		T_OK(k->pid == s.tid && k->tgid == (uint32_t)kid &&
			 k->pid != k->tgid,
		     "record_pid_tgid", "pid %u tgid %u, want %u %d", k->pid,
		     k->tgid, s.tid, (int)kid);
		T_OK(k->uid == 65534, "record_uid", "uid %u", k->uid);
		T_OK(!strncmp(k->comm, "wd-rec-thread", sizeof(k->comm)),
		     "record_comm", "comm '%.16s'", k->comm);
		T_OK(k->cgroup_id == cgid, "record_cgroup_id",
		     "cgroup %llu, want %llu", (unsigned long long)k->cgroup_id,
		     (unsigned long long)cgid);
		T_OK(k->ts_ns >= s.t0 && k->ts_ns <= s.t1, "record_ts_boottime",
		     "ts %llu not in [%llu, %llu]",
		     (unsigned long long)k->ts_ns, (unsigned long long)s.t0,
		     (unsigned long long)s.t1);
		T_OK(k->kind == WD_KEV_CONNECT && k->verdict == WD_KEV_DENIED &&
			 k->err == EPERM && k->family == AF_INET &&
			 k->port == 9 && k->arg == 0 &&
			 k->arg2 == SOCK_STREAM && k->protocol == IPPROTO_TCP,
		     "record_fields",
		     "kind %u verdict %u err %d family %u "
		     "port %u arg %u arg2 %u proto %u",
		     k->kind, k->verdict, k->err, k->family, k->port, k->arg,
		     k->arg2, k->protocol);
	}
	ring_buffer__free(rb);
	wd_egress_detach(e, cgid);
	wd_egress_close(e);
	close(cgfd);
	for (int i = 0; i < 100 && rmdir(cg_path) < 0 && errno == EBUSY; i++)
		usleep(10000);
	T_OK(access(cg_path, F_OK) != 0, "cgroup_removed", "%s stays", cg_path);
	return T_DONE();
}
