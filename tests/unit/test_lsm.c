/* BPF LSM hooks (bpf/lsm.bpf.c, daemon/enforce/lsm.c).
 *
 * On a kernel that refuses the programs (the build machines: every program
 * that needs a BPF trampoline fails with EPERM) this checks that each hook
 * is reported unavailable with the kernel's errno, and skips enforcement
 * saying why. On a kernel that runs them (the vmtest guest) each hook must
 * deny inside a test call's cgroup, allow the same operation outside it,
 * report every denial as an event attributed to that cgroup, and in audit
 * mode allow and report "audited".
 *
 * Every probe runs in a forked child: one in the call's cgroup, one outside
 * it, so both sides run identical code. Mount probes run in the child's own
 * private mount namespace (made before the LSM is armed).
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "enforce/egress.h"
#include "enforce/lsm.h"
#include "enforce/probe.h"
#include "lib/events.h"
#include "t.h"

enum probe {
	P_SOCK_NETLINK,
	P_SOCK_INET,
	P_CONNECT_OK,
	P_CONNECT_DENIED,
	P_CONNECT_UNIX,
	P_OPEN_OK,
	P_OPEN_DENIED,
	P_OPEN_WRITE_RO,
	P_EXEC_OK,
	P_EXEC_DENIED,
	P_PTRACE_OUT,
	P_KILL_OUT,
	P_KILL_SELF,
	P_BPF,
	P_MOUNT,
	P_MOVE_MOUNT,
	P_KMOD,
	P_NR
};

static const struct {
	const char *name;
	bool denied_inside; /* enforce mode: EPERM inside the call */
	int hook;	    /* enum wd_lsm_hook judging it */
	const char *kind;   /* event kind of the denial */
} probes[P_NR] = {
    [P_SOCK_NETLINK] = {"socket-netlink", true, WD_LSM_H_SOCKET_CREATE,
			"socket"},
    [P_SOCK_INET] = {"socket-inet", false, WD_LSM_H_SOCKET_CREATE, NULL},
    [P_CONNECT_OK] = {"connect-allowed", false, WD_LSM_H_SOCKET_CONNECT, NULL},
    [P_CONNECT_DENIED] = {"connect-denied-port", true, WD_LSM_H_SOCKET_CONNECT,
			  "connect"},
    [P_CONNECT_UNIX] = {"connect-unix-path", true, WD_LSM_H_SOCKET_CONNECT,
			"connect"},
    [P_OPEN_OK] = {"open-listed", false, WD_LSM_H_FILE_OPEN, NULL},
    [P_OPEN_DENIED] = {"open-unlisted", true, WD_LSM_H_FILE_OPEN, "file_open"},
    [P_OPEN_WRITE_RO] = {"open-write-readonly", true, WD_LSM_H_FILE_OPEN,
			 "file_open"},
    [P_EXEC_OK] = {"exec-listed", false, WD_LSM_H_BPRM_CHECK, NULL},
    [P_EXEC_DENIED] = {"exec-unlisted", true, WD_LSM_H_BPRM_CHECK, "exec"},
    [P_PTRACE_OUT] = {"ptrace-outside", true, WD_LSM_H_PTRACE, "ptrace"},
    [P_KILL_OUT] = {"kill-outside", true, WD_LSM_H_TASK_KILL, "kill"},
    [P_KILL_SELF] = {"kill-self", false, WD_LSM_H_TASK_KILL, NULL},
    [P_BPF] = {"bpf-map-create", true, WD_LSM_H_BPF, "bpf"},
    [P_MOUNT] = {"mount-tmpfs", true, WD_LSM_H_SB_MOUNT, "mount"},
    [P_MOVE_MOUNT] = {"move-mount", true, WD_LSM_H_MOVE_MOUNT, "move_mount"},
    /* request_module's result is not visible to the caller (the open
     * fails with ENXIO either way): judged by its event only */
    [P_KMOD] = {"module-request", false, WD_LSM_H_KMOD_REQUEST,
		"module_request"},
};

struct env {
	char dir[64];
	char path[8][128];
	uint16_t port_ok, port_denied;
	pid_t sleeper;
	int lfd[3];
};
enum {
	F_OK_TXT,
	F_SECRET,
	F_EXE_OK,
	F_EXE_DENIED,
	F_MNT,
	F_SRC,
	F_SOCK,
	F_KDEV
};

static int connect_in(const struct sockaddr *sa, socklen_t len, int family)
{
	int s = socket(family, SOCK_STREAM, 0);
	if (s < 0)
		return errno;
	int r = connect(s, sa, len) < 0 ? errno : 0;
	close(s);
	return r;
}

static int connect_port(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	return connect_in((struct sockaddr *)&a, sizeof(a), AF_INET);
}

static int run_exe(const char *exe)
{
	pid_t p = fork();
	if (p == 0) {
		char *argv[] = {(char *)exe, "--exit-7", NULL};
		execv(exe, argv);
		_exit(errno == EPERM ? 100 : 101);
	}
	int st = 0;
	waitpid(p, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 7)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 100)
		return EPERM;
	return EIO;
}

static int do_probe(const struct env *env, int i)
{
	int fd, r;
	switch (i) {
	case P_SOCK_NETLINK:
	case P_SOCK_INET:
		fd = i == P_SOCK_NETLINK ? socket(AF_NETLINK, SOCK_RAW, 0)
					 : socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return errno;
		close(fd);
		return 0;
	case P_CONNECT_OK:
		return connect_port(env->port_ok);
	case P_CONNECT_DENIED:
		return connect_port(env->port_denied);
	case P_CONNECT_UNIX: {
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		wd_strlcpy(a.sun_path, env->path[F_SOCK], sizeof(a.sun_path));
		return connect_in((struct sockaddr *)&a, sizeof(a), AF_UNIX);
	}
	case P_OPEN_OK:
	case P_OPEN_DENIED:
	case P_OPEN_WRITE_RO:
		fd = open(env->path[i == P_OPEN_DENIED ? F_SECRET : F_OK_TXT],
			  i == P_OPEN_WRITE_RO ? O_WRONLY : O_RDONLY);
		if (fd < 0)
			return errno;
		close(fd);
		return 0;
	case P_EXEC_OK:
		return run_exe(env->path[F_EXE_OK]);
	case P_EXEC_DENIED:
		return run_exe(env->path[F_EXE_DENIED]);
	case P_PTRACE_OUT:
		if (ptrace(PTRACE_ATTACH, env->sleeper, 0, 0) < 0)
			return errno;
		waitpid(env->sleeper, NULL, __WALL);
		ptrace(PTRACE_DETACH, env->sleeper, 0, 0);
		return 0;
	case P_KILL_OUT:
		return kill(env->sleeper, 0) < 0 ? errno : 0;
	case P_KILL_SELF:
		return kill(getpid(), 0) < 0 ? errno : 0;
	case P_BPF: {
		union bpf_attr a = {.map_type = BPF_MAP_TYPE_ARRAY,
				    .key_size = 4,
				    .value_size = 4,
				    .max_entries = 1};
		fd = syscall(__NR_bpf, BPF_MAP_CREATE, &a, sizeof(a));
		if (fd < 0)
			return errno;
		close(fd);
		return 0;
	}
	case P_MOUNT:
		if (mount("none", env->path[F_MNT], "tmpfs", 0, NULL) < 0)
			return errno;
		umount2(env->path[F_MNT], MNT_DETACH);
		return 0;
	case P_MOVE_MOUNT:
		fd = syscall(__NR_open_tree, AT_FDCWD, env->path[F_SRC],
			     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (fd < 0)
			return 1000 + errno; /* setup failure, not a verdict */
		r = syscall(__NR_move_mount, fd, "", AT_FDCWD, env->path[F_MNT],
			    MOVE_MOUNT_F_EMPTY_PATH) < 0
			? errno
			: 0;
		close(fd);
		if (!r)
			umount2(env->path[F_MNT], MNT_DETACH);
		return r;
	case P_KMOD:
		/* char major 240 is unassigned: opening it makes the kernel
		 * request "char-major-240-0" */
		fd = open(env->path[F_KDEV], O_RDWR);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	return EINVAL;
}

/* Fork a child that (optionally) joins the cgroup, makes a private mount
 * namespace, says "ready", waits for "go" (the parent arms the LSM in
 * between), runs every probe and writes the results. */
static int run_side(const struct env *env, const char *cg_procs,
		    int (*arm)(void *), void *arm_arg, int res[P_NR])
{
	int ready[2], go[2], out[2];
	if (pipe(ready) || pipe(go) || pipe(out))
		return -errno;
	pid_t p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		char b = 1;
		int rr[P_NR];
		if (cg_procs && wd_write_str(cg_procs, "0") < 0)
			_exit(2);
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(3);
		if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
			_exit(4);
		for (int i = 0; i < P_NR; i++)
			rr[i] = do_probe(env, i);
		_exit(write(out[1], rr, sizeof(rr)) == sizeof(rr) ? 0 : 5);
	}
	close(ready[1]);
	close(go[0]);
	close(out[1]);
	char b = 0;
	int rc = read(ready[0], &b, 1) == 1 ? 0 : -ECHILD;
	if (!rc && arm)
		rc = arm(arm_arg);
	if (write(go[1], &b, 1) != 1 && !rc)
		rc = -EPIPE;
	close(go[1]);
	if (!rc && read(out[0], res, sizeof(int) * P_NR) !=
		       (ssize_t)(sizeof(int) * P_NR))
		rc = -EIO;
	int st;
	waitpid(p, &st, 0);
	close(ready[0]);
	close(out[0]);
	if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = -ECHILD;
	return rc;
}

struct evs {
	struct wd_event *v;
	int n;
};
static void collect(const struct wd_event *e, void *arg)
{
	struct evs *s = arg;
	s->v = wd_realloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n++] = *e;
}

static int count_events(const struct evs *s, uint64_t cgid, const char *kind,
			enum wd_verdict verdict)
{
	int n = 0;
	for (int i = 0; i < s->n; i++)
		if (s->v[i].source == WD_SRC_LSM && s->v[i].cgroup_id == cgid &&
		    s->v[i].verdict == verdict &&
		    (!kind || !strcmp(s->v[i].kind, kind)))
			n++;
	return n;
}

static int listen_tcp(uint16_t *port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(s, 64) || getsockname(s, (struct sockaddr *)&a, &l))
		return -1;
	*port = ntohs(a.sin_port);
	return s;
}

static int copy_file(const char *from, const char *to)
{
	cleanup_free char *data = NULL;
	size_t len = 0;
	int rc = wd_read_file(from, &data, &len);
	return rc ? rc : wd_write_file(to, data, len, 0755);
}

static int setup_env(struct env *env)
{
	snprintf(env->dir, sizeof(env->dir), "/tmp/wd-test-lsm.%d", getpid());
	static const char *names[] = {
	    "allowed/ok.txt", "secret.txt", "exe-allowed",
	    "exe-denied",     "mnt",	    "src",
	    "s.sock",	      "kdev"};
	for (int i = 0; i < 8; i++)
		snprintf(env->path[i], sizeof(env->path[i]), "%s/%s", env->dir,
			 names[i]);
	char allowed[160];
	snprintf(allowed, sizeof(allowed), "%s/allowed", env->dir);
	if (wd_mkdir_p(allowed, 0755) || mkdir(env->path[F_MNT], 0755) ||
	    mkdir(env->path[F_SRC], 0755) ||
	    wd_write_file(env->path[F_OK_TXT], "ok\n", 3, 0644) ||
	    wd_write_file(env->path[F_SECRET], "secret\n", 7, 0644) ||
	    copy_file("/proc/self/exe", env->path[F_EXE_OK]) ||
	    copy_file("/proc/self/exe", env->path[F_EXE_DENIED]) ||
	    mknod(env->path[F_KDEV], S_IFCHR | 0600, makedev(240, 0)))
		return -errno ? -errno : -EIO;
	env->lfd[0] = listen_tcp(&env->port_ok);
	env->lfd[1] = listen_tcp(&env->port_denied);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	wd_strlcpy(a.sun_path, env->path[F_SOCK], sizeof(a.sun_path));
	env->lfd[2] = socket(AF_UNIX, SOCK_STREAM, 0);
	if (env->lfd[0] < 0 || env->lfd[1] < 0 || env->lfd[2] < 0 ||
	    bind(env->lfd[2], (struct sockaddr *)&a, sizeof(a)) ||
	    listen(env->lfd[2], 64))
		return -EIO;
	env->sleeper = fork();
	if (env->sleeper == 0) {
		/* hold none of the test's fds: an inherited BPF link fd would
		 * keep a closed instance's programs attached */
		close_range(3, ~0U, 0);
		for (;;)
			pause();
	}
	return 0;
}

static void teardown_env(struct env *env)
{
	if (env->sleeper > 0) {
		kill(env->sleeper, SIGKILL);
		waitpid(env->sleeper, NULL, 0);
	}
	for (int i = 0; i < 3; i++)
		if (env->lfd[i] >= 0)
			close(env->lfd[i]);
	wd_rm_rf(env->dir);
}

struct arm_ctx {
	struct wd_lsm *l;
	int cgfd;
	uint64_t cgid;
	struct wd_manifest *m;
	struct wd_err err;
};
static int arm(void *arg)
{
	struct arm_ctx *a = arg;
	return wd_lsm_begin(a->l, a->cgfd, a->cgid, a->m, &a->err);
}

static char *canon(const char *p)
{
	char *c = NULL;
	return wd_path_canonical(p, &c, NULL) == 0 ? c : wd_strdup(p);
}

/* Ids of the BPF LSM (lsm/, trampoline) links that exist now. */
#define MAX_LINKS 256
static int lsm_link_ids(uint32_t ids[MAX_LINKS])
{
	int n = 0;
	for (uint32_t id = 0;
	     n < MAX_LINKS && !bpf_link_get_next_id(id, &id);) {
		int fd = bpf_link_get_fd_by_id(id);
		struct bpf_link_info info = {0};
		uint32_t len = sizeof(info);
		if (fd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) &&
		    info.type == BPF_LINK_TYPE_TRACING &&
		    info.tracing.attach_type == BPF_LSM_MAC)
			ids[n++] = id;
		close(fd);
	}
	return n;
}

/* Of the n link ids in `ids` not in `old`, how many still exist. */
static int links_alive(const uint32_t *ids, int n, const uint32_t *old,
		       int n_old)
{
	uint32_t now[MAX_LINKS];
	int n_now = lsm_link_ids(now), alive = 0;
	for (int i = 0; i < n; i++) {
		bool was = false, is = false;
		for (int j = 0; j < n_old; j++)
			was |= old[j] == ids[i];
		for (int j = 0; j < n_now; j++)
			is |= now[j] == ids[i];
		alive += !was && is;
	}
	return alive;
}

static void check_status_unavailable(struct wd_lsm *l)
{
	struct wd_lsm_hook_status st[WD_LSM_H_NR];
	const struct wd_features *f = wd_probe();
	wd_lsm_status(l, st);
	for (int h = 0; h < WD_LSM_H_NR; h++) {
		char name[64];
		snprintf(name, sizeof(name), "lsm-status-%s", st[h].hook);
		printf("# %s (%s): %s\n", st[h].hook, st[h].attach,
		       st[h].active ? "active" : st[h].reason);
		if (st[h].active) {
			T_PASS(name);
			continue;
		}
		/* unavailable: must carry an errno and name it */
		T_OK(st[h].err < 0 &&
			 strstr(st[h].reason, strerror(-st[h].err)),
		     name, "unavailable without errno: err=%d reason='%s'",
		     st[h].err, st[h].reason);
	}
	/* Cross-check with the independent probe (enforce/probe.c): when the
	 * kernel refuses an lsm/file_open program there, our load must have
	 * been refused with the same errno. */
	if (f->bpf_in_lsm_list && f->lsm_prog_err < 0)
		T_OK(st[WD_LSM_H_FILE_OPEN].err == f->lsm_prog_err,
		     "lsm-status-matches-probe", "probe says %d, lsm says %d",
		     f->lsm_prog_err, st[WD_LSM_H_FILE_OPEN].err);
	else if (!f->bpf_in_lsm_list)
		T_OK(st[0].err == -EOPNOTSUPP &&
			 strstr(st[0].reason, "LSM list"),
		     "lsm-status-not-in-lsm-list", "reason '%s'", st[0].reason);
}

static void round_check(const char *mode, bool audit, const int in[P_NR],
			const int out[P_NR], const struct evs *ev,
			uint64_t cgid, const struct wd_lsm_hook_status *st)
{
	char name[96];

	/* Completeness: each denial (or audited would-be denial) the probes
	 * cause is exactly one event of its kind, attributed to the call. */
	int want_total = 0,
	    got_total = count_events(
		ev, cgid, NULL, audit ? WD_VERDICT_AUDITED : WD_VERDICT_DENIED);
	bool all_active = true;
	for (int i = 0; i < P_NR; i++) {
		all_active &= st[probes[i].hook].active;
		want_total += probes[i].kind != NULL;
	}
	snprintf(name, sizeof(name), "lsm-%s-events-exact", mode);
	if (all_active)
		T_OK(got_total == want_total, name,
		     "%d events for %d denials caused", got_total, want_total);
	for (int i = 0; i < P_NR; i++) {
		snprintf(name, sizeof(name), "lsm-%s-%s", mode, probes[i].name);
		if (!st[probes[i].hook].active) {
			T_SKIP(name, "hook %s unavailable: %s",
			       st[probes[i].hook].hook,
			       st[probes[i].hook].reason);
			continue;
		}
		int want_in = probes[i].denied_inside && !audit ? EPERM : 0;
		bool ev_ok = true;
		int n_ev = 0;
		if (probes[i].kind) {
			n_ev = count_events(ev, cgid, probes[i].kind,
					    audit ? WD_VERDICT_AUDITED
						  : WD_VERDICT_DENIED);
			ev_ok = n_ev >= 1;
		}
		if (in[i] == want_in && out[i] == 0 && ev_ok)
			T_PASS(name);
		else
			T_FAIL(name,
			       "inside %s (want %s), outside %s (want ok), "
			       "%d '%s' events",
			       in[i] ? strerror(in[i] % 1000) : "ok",
			       want_in ? strerror(want_in) : "ok",
			       out[i] ? strerror(out[i] % 1000) : "ok", n_ev,
			       probes[i].kind ? probes[i].kind : "-");
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--exit-7"))
		_exit(7);
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct wd_err err = {0};
	struct wd_egress *eg = NULL;
	int rc = wd_egress_open(&eg, &err);
	if (rc) {
		T_SKIP("lsm-all", "egress object (shared maps) cannot load: %s",
		       err.msg);
		return T_DONE();
	}
	struct wd_lsm *l = NULL;
	uint32_t links0[MAX_LINKS], links1[MAX_LINKS];
	int n_links0 = lsm_link_ids(links0);
	uint64_t t0 = wd_now_ns();
	rc = wd_lsm_open(&l, eg, &err);
	int n_links1 = lsm_link_ids(links1);
	int n_new = links_alive(links1, n_links1, links0, n_links0);
	T_OK(rc == 0, "lsm-open", "%s", err.msg);
	if (rc)
		return T_DONE();
	printf("# probe+load took %.1f ms, %d/%d hooks active\n",
	       (wd_now_ns() - t0) / 1e6, wd_lsm_n_active(l), WD_LSM_H_NR);
	check_status_unavailable(l);
	struct wd_lsm_hook_status st[WD_LSM_H_NR];
	wd_lsm_status(l, st);

	if (!wd_lsm_n_active(l)) {
		T_SKIP("lsm-enforcement",
		       "no BPF LSM hook can run on this kernel (%s); the "
		       "guest-kernel run (make vmtest) tests enforcement",
		       st[WD_LSM_H_FILE_OPEN].reason);
		wd_lsm_close(l);
		wd_egress_close(eg);
		return T_DONE();
	}

	/* ---- a call cgroup with a manifest ---- */
	const struct wd_features *f = wd_probe();
	struct env env = {.lfd = {-1, -1, -1}};
	char cg[320], procs[340];
	snprintf(cg, sizeof(cg), "%s/wd-test-lsm-%d", f->cg.v2_root, getpid());
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	rc = setup_env(&env);
	if (rc || mkdir(cg, 0755) < 0) {
		T_FAIL("lsm-setup", "env/cgroup %s: %s", cg, strerror(errno));
		teardown_env(&env);
		return T_DONE();
	}
	int cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat cst;
	fstat(cgfd, &cst);
	uint64_t cgid = cst.st_ino; /* kernfs ino of a v2 cgroup = its id */

	char allowed[160];
	snprintf(allowed, sizeof(allowed), "%s/allowed", env.dir);
	char *rd[] = {allowed,		 canon("/lib"),	      canon("/lib64"),
		      canon("/usr/lib"), canon("/usr/lib64"), canon("/etc")};
	char *ex[] = {env.path[F_EXE_OK], canon("/lib64/ld-linux-x86-64.so.2")};
	char *wr[] = {env.path[F_KDEV]};
	struct wd_manifest m = {.name = "test_lsm", .tier = WD_TIER_1};
	m.fs_read = (struct wd_path_list){rd, 6};
	m.fs_exec = (struct wd_path_list){ex, 2};
	m.fs_write = (struct wd_path_list){wr, 1};
	struct wd_net_rule rule;
	char rtext[64];
	snprintf(rtext, sizeof(rtext), "127.0.0.1:%u", env.port_ok);
	wd_net_rule_parse(rtext, &rule, NULL);

	const char *modes[] = {"enforce", "audit"};
	for (int r = 0; r < 2; r++) {
		bool audit = r == 1;
		m.mode = audit ? WD_MODE_AUDIT : WD_MODE_ENFORCE;
		struct arm_ctx a = {
		    .l = l, .cgfd = cgfd, .cgid = cgid, .m = &m};
		int in[P_NR] = {0}, out[P_NR] = {0};
		struct evs ev = {0};
		char name[64];
		rc = wd_egress_attach(eg, cgfd, cgid, &rule, 1, audit, 0, &err);
		if (rc) {
			T_FAIL("lsm-egress-attach", "%s", err.msg);
			break;
		}
		int rin = run_side(&env, procs, arm, &a, in);
		snprintf(name, sizeof(name), "lsm-%s-inside-ran", modes[r]);
		T_OK(rin == 0, name, "%s (%s)", strerror(-rin), a.err.msg);
		wd_lsm_end(l, cgid);
		wd_egress_detach(eg, cgid);
		wd_egress_consume(eg, collect, &ev);
		int rout = run_side(&env, NULL, NULL, NULL, out);
		snprintf(name, sizeof(name), "lsm-%s-outside-ran", modes[r]);
		T_OK(rout == 0, name, "%s", strerror(-rout));
		wd_egress_consume(eg, collect, &ev);
		if (!rin && !rout)
			round_check(modes[r], audit, in, out, &ev, cgid, st);
		/* nothing outside a call is ever reported by the LSM */
		int stray = 0;
		for (int i = 0; i < ev.n; i++)
			stray += ev.v[i].source == WD_SRC_LSM &&
				 ev.v[i].cgroup_id != cgid;
		snprintf(name, sizeof(name), "lsm-%s-no-events-outside",
			 modes[r]);
		T_OK(stray == 0, name, "%d LSM events from other cgroups",
		     stray);
		free(ev.v);
	}

	/* disarmed: the same cgroup is free again */
	{
		int in[P_NR];
		int rin = run_side(&env, procs, NULL, NULL, in);
		T_OK(rin == 0 && in[P_SOCK_NETLINK] == 0 &&
			 in[P_OPEN_DENIED] == 0,
		     "lsm-end-disarms", "rc %d netlink %d open %d", rin,
		     in[P_SOCK_NETLINK], in[P_OPEN_DENIED]);
	}

	/* The first instance's global programs read the same policy map as
	 * the fallback instance below. A process forked while an instance is
	 * open inherits its link fds, and the kernel detaches an lsm/
	 * (tracing) link only when its last fd is closed (there is no detach
	 * for that link type): `holder` keeps the first instance's programs
	 * attached after wd_lsm_close(), as any child of the daemon would.
	 * They must not judge the fallback instance's call (owner tag,
	 * bpf/lsm_policy.h): with their own, emptied rule map they would deny
	 * every listed file. */
	pid_t holder = fork();
	if (holder == 0) {
		for (;;)
			pause();
	}
	wd_lsm_close(l);
	l = NULL;
	int n_stale = links_alive(links1, n_links1, links0, n_links0);
	T_OK(holder > 0 && n_new > 0 && n_stale == n_new,
	     "lsm-stale-instance-attached",
	     "holder %d keeps %d of the closed instance's %d lsm/ links",
	     holder, n_stale, n_new);

	/* Fallback: a hook that cannot load is switched off (autoload false)
	 * and the rest load; with file_open off, bprm_check_security judges
	 * exec on its own. */
	{
		struct wd_lsm *l2 = NULL;
		struct wd_lsm_hook_status st2[WD_LSM_H_NR];
		setenv("WARDEN_LSM_DISABLE", "file_open", 1);
		wd_lsm_open(&l2, eg, &err);
		unsetenv("WARDEN_LSM_DISABLE");
		wd_lsm_status(l2, st2);
		T_OK(!st2[WD_LSM_H_FILE_OPEN].active &&
			 st2[WD_LSM_H_FILE_OPEN].err == -ECANCELED &&
			 wd_lsm_n_active(l2) == WD_LSM_H_NR - 1,
		     "lsm-fallback-partial-load",
		     "file_open %d (%s), %d active",
		     st2[WD_LSM_H_FILE_OPEN].err,
		     st2[WD_LSM_H_FILE_OPEN].reason, wd_lsm_n_active(l2));
		m.mode = WD_MODE_ENFORCE;
		struct arm_ctx a = {
		    .l = l2, .cgfd = cgfd, .cgid = cgid, .m = &m};
		int in[P_NR] = {0};
		struct evs ev = {0};
		int rin = -1;
		if (wd_egress_attach(eg, cgfd, cgid, &rule, 1, false, 0,
				     &err) == 0) {
			rin = run_side(&env, procs, arm, &a, in);
			wd_lsm_end(l2, cgid);
			wd_egress_detach(eg, cgid);
			wd_egress_consume(eg, collect, &ev);
		}
		T_OK(rin == 0 && in[P_EXEC_DENIED] == EPERM &&
			 in[P_OPEN_DENIED] == 0 &&
			 count_events(&ev, cgid, "exec", WD_VERDICT_DENIED) >=
			     1 &&
			 count_events(&ev, cgid, "file_open",
				      WD_VERDICT_DENIED) == 0,
		     "lsm-fallback-bprm-denies-unlisted",
		     "rc %d exec-unlisted %d open %d, %d exec events", rin,
		     in[P_EXEC_DENIED], in[P_OPEN_DENIED],
		     count_events(&ev, cgid, "exec", WD_VERDICT_DENIED));
		/* the listed binary runs, and its exec is not reported */
		int n_exec_ok = 0;
		for (int i = 0; i < ev.n; i++)
			n_exec_ok += ev.v[i].source == WD_SRC_LSM &&
				     ev.v[i].cgroup_id == cgid &&
				     !strcmp(ev.v[i].kind, "exec") &&
				     strstr(ev.v[i].target, "/exe-allowed");
		T_OK(rin == 0 && in[P_EXEC_OK] == 0 && n_exec_ok == 0,
		     "lsm-fallback-bprm-allows-listed",
		     "rc %d exec-listed %s, %d exec events for it", rin,
		     in[P_EXEC_OK] ? strerror(in[P_EXEC_OK] % 1000) : "ok",
		     n_exec_ok);
		free(ev.v);
		wd_lsm_close(l2);
	}

	/* the last fd gone, the closed instance's programs are detached */
	if (holder > 0) {
		kill(holder, SIGKILL);
		waitpid(holder, NULL, 0);
	}
	n_stale = links_alive(links1, n_links1, links0, n_links0);
	T_OK(n_stale == 0, "lsm-close-detaches",
	     "%d lsm/ links of the closed instance remain", n_stale);

	close(cgfd);
	rmdir(cg);
	teardown_env(&env);
	for (int i = 1; i < 6; i++)
		free(rd[i]);
	free(ex[1]);
	wd_egress_close(eg);
	return T_DONE();
}
