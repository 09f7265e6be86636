/* The feature probe against independent evidence on this machine: every
 * answer of wd_probe() is re-derived here by another route (a raw syscall,
 * /proc/mounts via getmntent, statfs magic numbers, a command-line tool)
 * and compared. Runs as root against the real kernel. */
#include "t.h"

#include "common/util.h"
#include "enforce/probe.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/landlock.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <mntent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>

static char *run(const char *cmd)
{
	FILE *p = popen(cmd, "r");
	struct wd_buf b = {0};
	char tmp[4096];
	size_t n;
	if (!p)
		return NULL;
	while ((n = fread(tmp, 1, sizeof(tmp), p)) > 0)
		wd_buf_append(&b, tmp, n);
	pclose(p);
	wd_buf_append(&b, "", 0);
	return b.data ? b.data : wd_strdup("");
}

static void chomp(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

static bool list_has_word(const char *list, const char *w)
{
	char *l = wd_asprintf(",%s,", list), *k = wd_asprintf(",%s,", w);
	bool r = strstr(l, k) != NULL;
	free(l);
	free(k);
	return r;
}

static int count_securityfs(void)
{
	FILE *m = setmntent("/proc/self/mounts", "r");
	struct mntent *e;
	int n = 0;
	while (m && (e = getmntent(m)))
		n += !strcmp(e->mnt_type, "securityfs");
	if (m)
		endmntent(m);
	return n;
}

static bool kver_at_least(int maj, int min)
{
	struct utsname u;
	int a = 0, b = 0;
	if (uname(&u) < 0 || sscanf(u.release, "%d.%d", &a, &b) != 2)
		return false;
	return a > maj || (a == maj && b >= min);
}

/* ---- cgroup layout ------------------------------------------------------ */

static void test_cgroup_live(const struct wd_features *f)
{
	/* Independent: /proc/self/mounts through getmntent + hasmntopt. */
	char v2[256] = "", v1[WD_CG_NCTRL][256] = {{0}};
	FILE *m = setmntent("/proc/self/mounts", "r");
	struct mntent *e;
	bool any_v1 = false;
	while (m && (e = getmntent(m))) {
		if (!strcmp(e->mnt_type, "cgroup2") && !v2[0])
			wd_strlcpy(v2, e->mnt_dir, sizeof(v2));
		if (strcmp(e->mnt_type, "cgroup"))
			continue;
		for (int c = 0; c < WD_CG_NCTRL; c++)
			if (hasmntopt(e, wd_cg_ctrl_name(c)) && !v1[c][0]) {
				/* hasmntopt("cpu") must not match "cpuset" */
				char *o = hasmntopt(e, wd_cg_ctrl_name(c));
				size_t l = strlen(wd_cg_ctrl_name(c));
				if (o[l] == ',' || o[l] == 0)
					wd_strlcpy(v1[c], e->mnt_dir,
						   sizeof(v1[c]));
			}
		if (hasmntopt(e, "memory") || hasmntopt(e, "pids") ||
		    hasmntopt(e, "cpuset") || hasmntopt(e, "devices") ||
		    hasmntopt(e, "freezer") || hasmntopt(e, "blkio") ||
		    hasmntopt(e, "cpu") || hasmntopt(e, "cpuacct"))
			any_v1 = true;
	}
	if (m)
		endmntent(m);
	T_OK(!strcmp(f->cg.v2_root, v2), "cgroup_v2_root_matches_mounts",
	     "probe '%s' /proc/self/mounts '%s'", f->cg.v2_root, v2);
	if (v2[0]) {
		struct statfs sf;
		T_OK(statfs(f->cg.v2_root, &sf) == 0 &&
			 sf.f_type == CGROUP2_SUPER_MAGIC,
		     "cgroup_v2_root_is_cgroup2_fs", "statfs %s", v2);
	}
	T_OK(f->cg.hybrid == (v2[0] && any_v1), "cgroup_hybrid_matches_mounts",
	     "probe hybrid=%d, mounts v2=%d v1=%d", f->cg.hybrid, !!v2[0],
	     any_v1);
	cleanup_free char *ctl = NULL;
	char p[300];
	snprintf(p, sizeof(p), "%s/cgroup.controllers", v2);
	if (v2[0] && wd_read_file(p, &ctl, NULL) == 0) {
		for (int c = 0; c < WD_CG_NCTRL; c++) {
			char word[32], name[64];
			snprintf(word, sizeof(word), " %s ",
				 wd_cg_ctrl_name(c));
			char *padded = wd_asprintf(" %s ", ctl);
			for (char *q = padded; *q; q++)
				if (*q == '\n')
					*q = ' ';
			bool on = strstr(padded, word) != NULL;
			free(padded);
			snprintf(name, sizeof(name), "cgroup_v2_ctrl_%s",
				 wd_cg_ctrl_name(c));
			T_OK(f->cg.v2_ctrl[c] == on, name,
			     "probe %d, %s says %d", f->cg.v2_ctrl[c], p, on);
		}
	}
	for (int c = 0; c < WD_CG_NCTRL; c++) {
		char name[64];
		snprintf(name, sizeof(name), "cgroup_v1_%s_matches_mounts",
			 wd_cg_ctrl_name(c));
		T_OK(!strcmp(f->cg.v1_root[c], v1[c]), name,
		     "probe '%s' mounts '%s'", f->cg.v1_root[c], v1[c]);
		if (v1[c][0]) {
			struct statfs sf;
			snprintf(name, sizeof(name),
				 "cgroup_v1_%s_is_cgroup_fs",
				 wd_cg_ctrl_name(c));
			T_OK(statfs(v1[c], &sf) == 0 &&
				 sf.f_type == CGROUP_SUPER_MAGIC,
			     name, "statfs %s", v1[c]);
		}
	}
	struct wd_cgroup_layout again;
	T_OK(wd_cgroup_layout_detect(&again) == 0 &&
		 !memcmp(&again, &f->cg, sizeof(again)),
	     "cgroup_detect_stable", "second detect differs");
}

static void test_cgroup_parse(void)
{
	struct wd_cgroup_layout l;
	const char *pure =
	    "25 30 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 "
	    "rw,nsdelegate\n";
	int r = wd_cgroup_layout_parse(pure, "cpuset cpu io memory pids\n", &l);
	T_OK(r == 0 && !l.hybrid && !strcmp(l.v2_root, "/sys/fs/cgroup") &&
		 l.v2_ctrl[WD_CG_MEMORY] && l.v2_ctrl[WD_CG_PIDS] &&
		 l.v2_ctrl[WD_CG_CPU] && !l.v1_root[WD_CG_CPU][0],
	     "cgroup_parse_pure_v2", "r=%d hybrid=%d root=%s", r, l.hybrid,
	     l.v2_root);

	const char *hyb =
	    "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
	    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup "
	    "rw,cpu,cpuacct\n"
	    "33 31 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
	    "35 31 0:32 / /sys/fs/my\\040mem rw - cgroup cgroup rw,memory\n"
	    "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup "
	    "rw,xattr,name=systemd\n"
	    "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
	r = wd_cgroup_layout_parse(hyb, "hugetlb\n", &l);
	T_OK(r == 0 && l.hybrid && !strcmp(l.v2_root, "/sys/fs/cgroup/unified"),
	     "cgroup_parse_hybrid", "r=%d hybrid=%d root=%s", r, l.hybrid,
	     l.v2_root);
	T_OK(!strcmp(l.v1_root[WD_CG_CPU], "/sys/fs/cgroup/cpu,cpuacct"),
	     "cgroup_parse_cpu_not_cpuset", "cpu at '%s'",
	     l.v1_root[WD_CG_CPU]);
	T_OK(!strcmp(l.v1_root[WD_CG_MEMORY], "/sys/fs/my mem"),
	     "cgroup_parse_octal_escape", "memory at '%s'",
	     l.v1_root[WD_CG_MEMORY]);
	T_OK(!l.v1_root[WD_CG_PIDS][0] && !l.v2_ctrl[WD_CG_PIDS] &&
		 !l.v2_ctrl[WD_CG_MEMORY],
	     "cgroup_parse_missing_pids", "pids at '%s'",
	     l.v1_root[WD_CG_PIDS]);
	T_OK(l.n_v1 == 3, "cgroup_parse_named_hierarchy_not_counted",
	     "n_v1=%d (name=systemd must not count)", l.n_v1);

	const char *named_only =
	    "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup "
	    "rw,xattr,name=systemd\n"
	    "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
	r = wd_cgroup_layout_parse(named_only, "", &l);
	T_OK(r == 0 && !l.hybrid, "cgroup_parse_named_only_not_hybrid",
	     "r=%d hybrid=%d", r, l.hybrid);
	r = wd_cgroup_layout_parse("22 1 0:5 / /proc rw - proc proc rw\n", "",
				   &l);
	T_OK(r == -ENOENT, "cgroup_parse_none", "r=%d", r);
}

/* ---- BPF ---------------------------------------------------------------- */

/* The same loads, made with the raw bpf(2) syscall instead of libbpf. */
static int raw_prog_load(int type, int attach, uint32_t btf_id)
{
	struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 1},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	if (type != BPF_PROG_TYPE_CGROUP_SOCK_ADDR)
		insns[0].imm = 0;
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.prog_type = type;
	a.insns = (uintptr_t)insns;
	a.insn_cnt = 2;
	a.license = (uintptr_t) "GPL";
	a.expected_attach_type = attach;
	a.attach_btf_id = btf_id;
	int fd = syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	return fd < 0 ? -errno : fd;
}

static void test_bpf(const struct wd_features *f)
{
	struct btf *v = btf__load_vmlinux_btf();
	if (libbpf_get_error(v)) {
		T_SKIP("trampoline_err_matches_raw_load", "no vmlinux BTF");
	} else {
		int id = btf__find_by_name_kind(v, "bpf_fentry_test1",
						BTF_KIND_FUNC);
		if (id < 0)
			id = btf__find_by_name_kind(v, "do_sys_openat2",
						    BTF_KIND_FUNC);
		int fd =
		    raw_prog_load(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, id);
		int raw = fd < 0 ? fd : 0;
		if (fd >= 0)
			close(fd);
		T_OK(f->trampoline_err == raw,
		     "trampoline_err_matches_raw_load", "probe %d raw bpf() %d",
		     f->trampoline_err, raw);
		T_OK(f->trampoline_err <= 0 && f->trampoline_err > -4096,
		     "trampoline_err_is_errno", "%d", f->trampoline_err);
		id = btf__find_by_name_kind(v, "bpf_lsm_file_open",
					    BTF_KIND_FUNC);
		fd = raw_prog_load(BPF_PROG_TYPE_LSM, BPF_LSM_MAC, id);
		raw = fd < 0 ? fd : 0;
		if (fd >= 0)
			close(fd);
		T_OK(f->lsm_prog_err == raw, "lsm_prog_err_matches_raw_load",
		     "probe %d raw bpf() %d", f->lsm_prog_err, raw);
		btf__free(v);
	}
	T_OK(f->cgroup_sockaddr_err == 0, "connect4_loads", "%d",
	     f->cgroup_sockaddr_err);
	/* Stronger evidence: the program really attaches to a v2 cgroup. */
	if (f->cg.v2_root[0] && !f->cgroup_sockaddr_err) {
		char cg[320];
		snprintf(cg, sizeof(cg), "%s/warden-test-probe-%d",
			 f->cg.v2_root, getpid());
		int fd = raw_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
				       BPF_CGROUP_INET4_CONNECT, 0);
		int ok = -1;
		if (fd >= 0 && mkdir(cg, 0755) == 0) {
			int cfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (cfd >= 0 &&
			    bpf_prog_attach(fd, cfd, BPF_CGROUP_INET4_CONNECT,
					    0) == 0) {
				ok = 0;
				bpf_prog_detach2(fd, cfd,
						 BPF_CGROUP_INET4_CONNECT);
			}
			if (cfd >= 0)
				close(cfd);
			rmdir(cg);
		}
		if (fd >= 0)
			close(fd);
		T_OK(ok == 0, "connect4_attaches_to_v2_cgroup", "%s", cg);
	}
	int rb = bpf_map_create(BPF_MAP_TYPE_RINGBUF, NULL, 0, 0, 8192, NULL);
	T_OK((rb >= 0) == (f->ringbuf_err == 0), "ringbuf_matches", "probe %d",
	     f->ringbuf_err);
	if (rb >= 0)
		close(rb);
}

/* ---- Landlock, seccomp, namespaces, sysctls -------------------------------
 */

static void test_landlock(const struct wd_features *f)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
			   LANDLOCK_CREATE_RULESET_VERSION);
	int want = abi < 0 ? -errno : (int)abi;
	T_OK(f->landlock_abi == want, "landlock_abi_matches_syscall",
	     "probe %d syscall %d", f->landlock_abi, want);
	T_OK(list_has_word(f->lsm_list, "landlock") == (f->landlock_abi > 0) ||
		 !f->lsm_list[0],
	     "landlock_in_lsm_list_iff_abi", "list '%s' abi %d", f->lsm_list,
	     f->landlock_abi);
}

static void test_seccomp(const struct wd_features *f)
{
	uint32_t act = SECCOMP_RET_USER_NOTIF;
	bool avail =
	    syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &act) == 0;
	T_OK(f->seccomp_notify == avail, "seccomp_notify_matches_action_avail",
	     "probe %d kernel %d (err %d)", f->seccomp_notify, avail,
	     f->seccomp_notify_err);
	/* FLAG_CONTINUE is 5.5, ADDFD 5.9: the round-trip answer must agree
	 * with the kernel version. */
	T_OK(f->seccomp_notify_continue == (avail && kver_at_least(5, 5)),
	     "seccomp_continue_matches_kernel", "probe %d (err %d)",
	     f->seccomp_notify_continue, f->seccomp_continue_err);
	T_OK(f->seccomp_addfd == (avail && kver_at_least(5, 9)),
	     "seccomp_addfd_matches_kernel", "probe %d (err %d)",
	     f->seccomp_addfd, f->seccomp_addfd_err);
	struct seccomp_notif_sizes sz;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) == 0)
		T_OK(f->seccomp_notif_sizes[0] == sz.seccomp_notif &&
			 f->seccomp_notif_sizes[2] == sz.seccomp_data,
		     "seccomp_notif_sizes", "%u/%u", f->seccomp_notif_sizes[0],
		     sz.seccomp_notif);
	/* The probe installed its filter in a child, never here. */
	cleanup_free char *st = NULL;
	wd_read_file("/proc/self/status", &st, NULL);
	char *s = st ? strstr(st, "Seccomp:") : NULL;
	T_OK(s && strtol(s + 8, NULL, 10) == 0, "probe_left_no_filter_here",
	     "%.20s", s ? s : "?");
}

static void test_namespaces_sysctls(const struct wd_features *f)
{
	cleanup_free char *max = NULL;
	if (wd_read_file("/proc/sys/user/max_user_namespaces", &max, NULL) == 0)
		T_OK(f->userns == (atoi(max) > 0), "userns_matches_sysctl",
		     "probe %d max_user_namespaces %d", f->userns, atoi(max));
	cleanup_free char *u = run("unshare -n true 2>/dev/null && echo ok");
	T_OK((f->ns_err[WD_NS_NET] == 0) == (u && !strncmp(u, "ok", 2)),
	     "netns_matches_unshare_tool", "probe %d", f->ns_err[WD_NS_NET]);
	/* a call's probe does not read io_uring's sysctl (nothing it decides
	 * depends on it); the full one (`warden status`) does */
	T_OK(f->io_uring_disabled == -1 && f->io_uring_err == -EAGAIN &&
		 f->ping_err == -EAGAIN,
	     "io_uring_ping_not_read_for_a_call", "io_uring %d err %d ping %d",
	     f->io_uring_disabled, f->io_uring_err, f->ping_err);
	const struct wd_features *full = wd_probe_full();
	cleanup_free char *io =
	    run("sysctl -n kernel.io_uring_disabled 2>/dev/null");
	if (io && io[0]) {
		chomp(io);
		T_OK(full->io_uring_disabled == atoi(io),
		     "io_uring_matches_sysctl", "probe %d sysctl %s",
		     full->io_uring_disabled, io);
	} else {
		T_OK(full->io_uring_disabled == -1 && full->io_uring_err < 0,
		     "io_uring_unknown_reported", "%d",
		     full->io_uring_disabled);
	}
	T_OK(full->ping_err != -EAGAIN, "ping_read_by_full", "err %d",
	     full->ping_err);
	T_OK(f->audit ? (f->audit_enabled >= 0 && f->audit_enabled <= 2)
		      : f->audit_err < 0,
	     "audit_state_consistent", "audit %d enabled %d err %d", f->audit,
	     f->audit_enabled, f->audit_err);
}

static void test_lsm(const struct wd_features *f, int secfs_before)
{
	/* Independent: util-linux unshare + mount in its own private
	 * namespace. */
	cleanup_free char *l =
	    run("cat /sys/kernel/security/lsm 2>/dev/null || unshare -m "
		"--propagation private sh -c 'mount -t securityfs s "
		"/sys/kernel/security && cat /sys/kernel/security/lsm' "
		"2>/dev/null");
	if (!l || !l[0]) {
		T_SKIP("lsm_list_matches_securityfs",
		       "securityfs unreadable here");
	} else {
		chomp(l);
		T_OK(!strcmp(l, f->lsm_list), "lsm_list_matches_securityfs",
		     "probe '%s' securityfs '%s' (source %s)", f->lsm_list, l,
		     f->lsm_source);
	}
	T_OK(f->bpf_in_lsm_list == list_has_word(f->lsm_list, "bpf"),
	     "bpf_in_lsm_list_consistent", "'%s'", f->lsm_list);
	T_OK(count_securityfs() == secfs_before, "lsm_probe_left_host_mounts",
	     "securityfs mounts before %d after %d", secfs_before,
	     count_securityfs());
}

/* ---- runsc -------------------------------------------------------------- */

static void test_runsc(void)
{
	const struct wd_features *f = wd_probe_full();
	struct stat st;
	const char *want = getenv("WARDEN_RUNSC");
	if (!want || !*want)
		want =
		    stat("/usr/bin/runsc", &st) == 0 ? "/usr/bin/runsc" : NULL;
	if (!want) {
		T_OK(!f->runsc && f->runsc_err < 0, "runsc_absent_reported",
		     "runsc %d err %d", f->runsc, f->runsc_err);
		return;
	}
	cleanup_free char *which = run("command -v runsc");
	if (which)
		chomp(which);
	T_OK(f->runsc && (!strcmp(f->runsc_path, want) ||
			  (which && !strcmp(f->runsc_path, which))),
	     "runsc_found", "probe '%s' want '%s'", f->runsc_path, want);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "'%s' --version 2>&1 | head -1",
		 f->runsc_path);
	cleanup_free char *v = run(cmd);
	T_OK(v && f->runsc_version[0] && strstr(v, f->runsc_version),
	     "runsc_version_matches", "probe '%s' runsc says '%s'",
	     f->runsc_version, v ? v : "");
	T_OK(f->runsc_tested, "runsc_tested_by_full_probe", "not tested");
	if (f->runsc_platform[0]) {
		char root[] = "/tmp/warden-test-runsc.XXXXXX";
		if (!mkdtemp(root)) {
			T_FAIL("runsc_platform_really_works", "mkdtemp");
			return;
		}
		snprintf(cmd, sizeof(cmd),
			 "timeout 20 '%s' --root=%s --platform=%s "
			 "--network=none do /bin/true >/dev/null 2>&1 && echo "
			 "ok",
			 f->runsc_path, root, f->runsc_platform);
		cleanup_free char *o = run(cmd);
		wd_rm_rf(root);
		T_OK(o && !strncmp(o, "ok", 2), "runsc_platform_really_works",
		     "%s", f->runsc_platform);
	} else {
		T_SKIP("runsc_platform_really_works",
		       "no platform works here: %s", f->runsc_note);
	}
	glob_t g;
	int gr = glob("/tmp/warden-probe-runsc.*", 0, NULL, &g);
	T_OK(gr == GLOB_NOMATCH, "runsc_probe_cleaned_tmp", "%zu leftover dirs",
	     gr == 0 ? g.gl_pathc : 0);
	if (gr == 0)
		globfree(&g);
}

/* ---- caching ------------------------------------------------------------- */

static void *probe_thread(void *arg)
{
	return (void *)wd_probe();
}

static void test_cache(const struct wd_features *f)
{
	pthread_t t[4];
	void *r[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, probe_thread, NULL);
	bool same = true;
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &r[i]);
		same = same && r[i] == f;
	}
	T_OK(same && wd_probe() == f, "probe_cached_once", "pointers differ");
	T_OK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD,
	     "probe_left_no_children", "a child is still there");
}

/* A daemon that auto-reaps its children (SIGCHLD ignored) must get the
 * same answers: the probe's children report through pipes. Runs in a child
 * forked before this process probes, so its wd_probe() is a fresh one. */
struct sig_answer {
	int ns_err[WD_NS_N], userns_err, notify_err, continue_err, addfd_err;
	char lsm[256];
};

static pid_t start_sigchld_probe(int *rfd)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		signal(SIGCHLD, SIG_IGN);
		/* its own runtime dir: the parent must not read this
		 * child's answers from a cache file */
		char rt[4200];
		snprintf(rt, sizeof(rt), "%s/child",
			 getenv("WARDEN_RUNTIME_DIR"));
		setenv("WARDEN_RUNTIME_DIR", rt, 1);
		const struct wd_features *f = wd_probe();
		struct sig_answer a = {.userns_err = f->userns_err,
				       .notify_err = f->seccomp_notify_err,
				       .continue_err = f->seccomp_continue_err,
				       .addfd_err = f->seccomp_addfd_err};
		memcpy(a.ns_err, f->ns_err, sizeof(a.ns_err));
		wd_strlcpy(a.lsm, f->lsm_list, sizeof(a.lsm));
		_exit(write(p[1], &a, sizeof(a)) == sizeof(a) ? 0 : 1);
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

static void test_sigchld(const struct wd_features *f, pid_t pid, int rfd)
{
	struct sig_answer a;
	ssize_t n = read(rfd, &a, sizeof(a));
	close(rfd);
	waitpid(pid, NULL, 0);
	if (n != sizeof(a)) {
		T_FAIL("probe_with_sigchld_ignored", "child gave no answer");
		return;
	}
	T_OK(!memcmp(a.ns_err, f->ns_err, sizeof(a.ns_err)) &&
		 a.userns_err == f->userns_err,
	     "probe_with_sigchld_ignored_namespaces", "net %d vs %d",
	     a.ns_err[WD_NS_NET], f->ns_err[WD_NS_NET]);
	T_OK(a.notify_err == f->seccomp_notify_err &&
		 a.continue_err == f->seccomp_continue_err &&
		 a.addfd_err == f->seccomp_addfd_err,
	     "probe_with_sigchld_ignored_seccomp", "%d/%d/%d vs %d/%d/%d",
	     a.notify_err, a.continue_err, a.addfd_err, f->seccomp_notify_err,
	     f->seccomp_continue_err, f->seccomp_addfd_err);
	T_OK(!strcmp(a.lsm, f->lsm_list), "probe_with_sigchld_ignored_lsm",
	     "'%s' vs '%s'", a.lsm, f->lsm_list);
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("probe", "needs root");
		return T_DONE();
	}
	/* a fresh runtime dir: the probes below must really run, not come
	 * from the node's per-boot cache (test_probe_cache.c tests that) */
	char rt[] = "/tmp/warden-test-probe.XXXXXX";
	if (!mkdtemp(rt)) {
		T_FAIL("probe_runtime_dir", "mkdtemp: %s", strerror(errno));
		return T_DONE();
	}
	setenv("WARDEN_RUNTIME_DIR", rt, 1);
	int secfs_before = count_securityfs();
	int sig_rfd = -1;
	pid_t sig_pid = start_sigchld_probe(&sig_rfd);
	/* let the child's probe finish first: its answers are compared
	 * below, and its forks must not show up in probe_left_no_children */
	struct pollfd pf = {.fd = sig_rfd, .events = POLLIN};
	poll(&pf, 1, 20000);
	const struct wd_features *f = wd_probe();
	T_OK(f && f->kernel_release[0], "probe_kernel_release", "empty");
	T_OK(!f->from_cache, "probe_ran_not_cached", "answers from a cache");
	test_cgroup_parse();
	if (sig_pid > 0)
		test_sigchld(f, sig_pid, sig_rfd);
	else
		T_FAIL("probe_with_sigchld_ignored", "fork: %s",
		       strerror(errno));
	test_cgroup_live(f);
	test_bpf(f);
	test_landlock(f);
	test_seccomp(f);
	/* the audit answer is asked on a thread and read when settled: after
	 * that it is an answer, never the pending state */
	wd_probe_audit_settle();
	T_OK(f->audit_err != -EINPROGRESS && (f->audit || f->audit_err < 0),
	     "audit_settled", "audit %d err %d", f->audit, f->audit_err);
	test_namespaces_sysctls(f);
	test_lsm(f, secfs_before);
	test_cache(f);
	test_runsc();
	wd_rm_rf(rt);
	return T_DONE();
}
