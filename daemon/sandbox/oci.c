/* OCI bundle generation for tier 3: see oci.h. */
#include "sandbox/common.h"
#include "sandbox/oci.h"
#include "common/safepath.h"

#include <dirent.h>
#include <limits.h>
#include <sched.h>
#include <seccomp.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "enforce/seccomp.h"

#include "sandbox/elfdeps.h"

struct bind {
	char *src; /* host path */
	char *dst; /* path in the sandbox */
	bool write;
	bool exec; /* mounted without noexec: filesystem.exec, the program
		    * and its start closure */
};

static int cmp_bind(const void *a, const void *b)
{
	return strcmp(((const struct bind *)a)->dst,
		      ((const struct bind *)b)->dst);
}

static json_t *strv_json(char *const *v)
{
	json_t *a = json_array();
	for (int i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *mount_json(const char *dst, const char *type, const char *src,
			  const char *const *opts)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "destination", dst, "type",
			      type, "source", src);
	json_t *a = json_array();
	for (int i = 0; opts && opts[i]; i++)
		json_array_append_new(a, json_string(opts[i]));
	json_object_set_new(o, "options", a);
	return o;
}

static int add_bind(struct bind *b, int *k, const char *p, bool write,
		    bool exec, struct wd_err *err)
{
	struct stat st;
	/* A path the host lacks is not an error (a manifest may list /lib64
	 * on a system without it); it simply is not there. */
	if (!p || lstat(p, &st) < 0)
		return 0;
	/* runsc binds the source as root, following symlinks: it is given
	 * the path resolved here, through root's links only (safepath.h);
	 * one a tool could have made refuses the call */
	char src[PATH_MAX], why[PATH_MAX + 160];
	int r = wd_path_resolve_trusted(p, src, sizeof(src), why, sizeof(why));
	if (r < 0)
		return wd_err_set(err, r, "tier 3: filesystem: '%s': %s", p,
				  why[0] ? why : strerror(-r));
	b[(*k)++] = (struct bind){wd_strdup(src), wd_strdup(p), write, exec};
	return 0;
}

/* A file of the program's start closure, named `p` by the kernel or the
 * loader (/lib64/ld-linux-x86-64.so.2, /lib/x86_64-linux-gnu/libc.so.6):
 * bound read-only as that one file (never its directory), at `p` with its
 * directory canonicalised, so that the path resolves in the sandbox
 * through the root's copied top-level symlinks (/lib64 -> usr/lib64) to
 * the bind; the source is the file itself (symlinks resolved on the host).
 * What is not bound (the symlinks inside library directories, siblings)
 * does not exist in the sandbox. */
static void add_file_bind(struct bind *b, int *k, const char *p)
{
	char dir[PATH_MAX], src[PATH_MAX];
	const char *slash = strrchr(p, '/');
	if (!slash || !slash[1] || (size_t)(slash - p) >= sizeof(dir))
		return;
	memcpy(dir, p, slash - p);
	dir[slash - p] = 0;
	char *cdir = realpath(dir[0] ? dir : "/", NULL);
	if (cdir && realpath(p, src))
		b[(*k)++] = (struct bind){
		    wd_strdup(src),
		    wd_asprintf("%s/%s", strcmp(cdir, "/") ? cdir : "",
				slash + 1),
		    false, true};
	free(cdir);
}

/* The mount list: proc, a gVisor-internal /dev, a tmpfs scratch at /tmp,
 * then the manifest's paths and the program with its start closure (the
 * dynamic loader, its libraries and /etc/ld.so.cache, or a script's
 * interpreter and its closure: elfdeps.h) as read-only binds of single
 * files, and nothing else of the host; parents before children; a path already
 * under a bind of a parent with the same access is not bound twice (a
 * read-only child under a writable parent is kept: it narrows; an exec
 * child under a noexec parent too: it widens exactly that path).
 * filesystem.exec is held here by noexec, tier 3 having no Landlock:
 * /tmp, the `write` binds and the `read` binds carry it, so neither a file
 * the tool writes nor a readable binary outside `exec` can be execve'd.
 * Only `exec` paths, the program and its closure are mounted executable.
 * Not held: this gVisor (runsc 20221219) does not apply noexec to
 * mmap(PROT_EXEC), so the dynamic loader, which is in the closure and
 * must be executable to start the program (the sentry opens PT_INTERP as
 * it opens a program: same mount and mode checks), maps any readable or
 * written file executable when run as `ld.so FILE` (README, "not held").
 * Memfds are the OCI seccomp profile's (exec_rules). NULL + errno with a
 * message when the closure cannot be computed (the program could not start in
 * the sandbox either). */
static json_t *mounts_json(const struct wd_manifest *m, const char *argv0,
			   struct wd_err *err)
{
	char **closure = NULL;
	int nc = 0;
	if (argv0) {
		struct wd_err e = {0};
		nc = wd_elf_closure(argv0, NULL, &closure, &e);
		if (nc < 0) {
			wd_err_set(err, nc,
				   "tier 3: cannot find what '%s' needs to "
				   "start: %s",
				   argv0, e.msg);
			errno = -nc;
			return NULL;
		}
	}
	json_t *a = json_array();
	static const char *const procopts[] = {"nosuid", "noexec", "nodev",
					       NULL};
	static const char *const devopts[] = {"nosuid", "noexec", "mode=755",
					      NULL};
	static const char *const tmpopts[] = {"nosuid", "nodev", "noexec",
					      "mode=1777", NULL};
	json_array_append_new(a, mount_json("/proc", "proc", "proc", procopts));
	json_array_append_new(a, mount_json("/dev", "tmpfs", "tmpfs", devopts));
	json_array_append_new(a, mount_json("/tmp", "tmpfs", "tmpfs", tmpopts));

	int n = m->fs_read.n + m->fs_exec.n + m->fs_write.n + nc + 1;
	struct bind *b = wd_calloc(n, sizeof(*b));
	int k = 0, br = 0;
	for (int i = 0; i < m->fs_read.n && !br; i++)
		br = add_bind(b, &k, m->fs_read.v[i], false, false, err);
	for (int i = 0; i < m->fs_exec.n && !br; i++)
		br = add_bind(b, &k, m->fs_exec.v[i], false, true, err);
	for (int i = 0; i < m->fs_write.n && !br; i++)
		br = add_bind(b, &k, m->fs_write.v[i], true, false, err);
	for (int i = 0; i < nc && !br; i++)
		add_file_bind(b, &k, closure[i]);
	wd_sb_free_strv(closure);
	char rp[PATH_MAX];
	if (!br && argv0 && realpath(argv0, rp))
		br = add_bind(b, &k, rp, false, true, err);
	if (br) {
		for (int i = 0; i < k; i++) {
			free(b[i].src);
			free(b[i].dst);
		}
		free(b);
		json_decref(a);
		errno = -br;
		return NULL;
	}
	qsort(b, k, sizeof(*b), cmp_bind);
	static const char *const ro[] = {"rbind", "ro",	    "nosuid",
					 "nodev", "noexec", NULL};
	static const char *const rw[] = {"rbind", "rw",	    "nosuid",
					 "nodev", "noexec", NULL};
	static const char *const rox[] = {"rbind", "ro", "nosuid", "nodev",
					  NULL};
	static const char *const rwx[] = {"rbind", "rw", "nosuid", "nodev",
					  NULL};
	for (int i = 0; i < k; i++) {
		bool covered = false;
		for (int j = 0; j < i && !covered; j++) {
			size_t pl = strlen(b[j].dst);
			covered = !strncmp(b[i].dst, b[j].dst, pl) &&
				  (b[i].dst[pl] == '/' || b[i].dst[pl] == 0 ||
				   !strcmp(b[j].dst, "/")) &&
				  b[j].write == b[i].write &&
				  b[j].exec == b[i].exec;
		}
		if (!covered)
			json_array_append_new(
			    a, mount_json(b[i].dst, "bind", b[i].src,
					  b[i].write  ? (b[i].exec ? rwx : rw)
					  : b[i].exec ? rox
						      : ro));
	}
	for (int i = 0; i < k; i++) {
		free(b[i].src);
		free(b[i].dst);
	}
	free(b);
	return a;
}

/* Namespace-creating clone flags, as tier 1's filter refuses them
 * (enforce/seccomp.c) */
static const unsigned long ns_flags[] = {
    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,	CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};

static void add_names(json_t *names, const char *name)
{
	/* names this arch lacks (vm86, _sysctl on x86_64) are left out, as
	 * the tier-1 builder does; gVisor would refuse the profile */
	if (seccomp_syscall_resolve_name(name) < 0)
		return;
	size_t i;
	json_t *v;
	json_array_foreach(names, i,
			   v) if (!strcmp(json_string_value(v), name)) return;
	json_array_append_new(names, json_string(name));
}

static json_t *arg(int index, const char *op, json_int_t v, json_int_t v2)
{
	return json_pack("{s:i, s:I, s:I, s:s}", "index", index, "value", v,
			 "valueTwo", v2, "op", op);
}

static void deny_socket(json_t *rules, json_t *args)
{
	json_array_append_new(rules,
			      json_pack("{s:[s], s:s, s:i, s:o}", "names",
					"socket", "action", "SCMP_ACT_ERRNO",
					"errnoRet", EPERM, "args", args));
}

/* network.families as in tiers 1-2 (enforce/seccomp.c): socket() of a
 * domain outside unix, inet, inet6 and the manifest's list; ping sockets
 * unless icmp is listed; inet raw sockets always. */
static void socket_rules(json_t *rules, const struct wd_manifest *m)
{
	bool ok[AF_MAX] = {false};
	ok[AF_UNIX] = ok[AF_INET] = ok[AF_INET6] = true;
	for (int i = 0; i < m->n_socket_families; i++)
		if (m->socket_family_nums && m->socket_family_nums[i] > 0 &&
		    m->socket_family_nums[i] < AF_MAX)
			ok[m->socket_family_nums[i]] = true;
	for (int af = 0; af < AF_MAX; af++)
		if (!ok[af])
			deny_socket(
			    rules,
			    json_pack("[o]", arg(0, "SCMP_CMP_EQ", af, 0)));
	deny_socket(rules, json_pack("[o]", arg(0, "SCMP_CMP_GE", AF_MAX, 0)));
	static const int ping[][2] = {{AF_INET, IPPROTO_ICMP},
				      {AF_INET6, IPPROTO_ICMPV6}};
	for (size_t i = 0; i < WD_ARRAY_SIZE(ping); i++) {
		if (!m->net_icmp)
			deny_socket(
			    rules,
			    json_pack(
				"[o, o, o]",
				arg(0, "SCMP_CMP_EQ", ping[i][0], 0),
				arg(1, "SCMP_CMP_MASKED_EQ", 0xf, SOCK_DGRAM),
				arg(2, "SCMP_CMP_EQ", ping[i][1], 0)));
		deny_socket(
		    rules,
		    json_pack("[o, o]", arg(0, "SCMP_CMP_EQ", ping[i][0], 0),
			      arg(1, "SCMP_CMP_MASKED_EQ", 0xf, SOCK_RAW)));
	}
}

/* Anonymous executables, as tier 1's filter refuses them
 * (enforce/seccomp.c): a memfd lives on the sentry's internal tmpfs, on
 * no noexec mount, and gVisor has no vm.memfd_noexec, so a memfd holding a
 * copy of any readable binary (or of bytes the tool wrote) would run
 * through execve("/proc/self/fd/N"). memfd_create without MFD_NOEXEC_SEAL
 * is refused (this gVisor knows no MFD_NOEXEC_SEAL and answers EINVAL to
 * it: no memfd at all), and execveat of a bare fd (AT_EMPTY_PATH,
 * fexecve) too. Both are integer flags. */
static void exec_rules(json_t *rules)
{
	json_array_append_new(
	    rules,
	    json_pack("{s:[s], s:s, s:i, s:[o]}", "names", "memfd_create",
		      "action", "SCMP_ACT_ERRNO", "errnoRet", EPERM, "args",
		      arg(1, "SCMP_CMP_MASKED_EQ", WD_MFD_NOEXEC_SEAL, 0)));
	json_array_append_new(
	    rules,
	    json_pack("{s:[s], s:s, s:i, s:[o]}", "names", "execveat", "action",
		      "SCMP_ACT_ERRNO", "errnoRet", EPERM, "args",
		      arg(4, "SCMP_CMP_MASKED_EQ", WD_AT_EMPTY_PATH,
			  WD_AT_EMPTY_PATH)));
}

/* The OCI seccomp profile gVisor's sentry applies inside the sandbox
 * (runsc --oci-seccomp): the baseline deny list of tiers 1 and 2
 * (wd_seccomp_baseline) plus syscalls.deny, answered EPERM; clone with a
 * namespace flag EPERM; clone3 ENOSYS (its flags are behind a pointer, so
 * libc falls back to clone, which is judged); socket() as
 * network.families says; memfd_create and execveat as exec_rules says.
 * The same lines as tier 1's filter, held by the
 * sentry instead of the host kernel. */
static json_t *seccomp_json(const struct wd_manifest *m)
{
	json_t *names = json_array();
	for (const char *const *s = wd_seccomp_baseline; *s; s++)
		add_names(names, *s);
	for (int i = 0; i < m->n_syscalls_deny; i++)
		add_names(names, m->syscalls_deny[i]);
	json_t *rules = json_array();
	json_array_append_new(
	    rules, json_pack("{s:o, s:s, s:i}", "names", names, "action",
			     "SCMP_ACT_ERRNO", "errnoRet", EPERM));
	for (size_t i = 0; i < WD_ARRAY_SIZE(ns_flags); i++)
		json_array_append_new(
		    rules,
		    json_pack("{s:[s], s:s, s:i, s:[{s:i, s:I, s:I, s:s}]}",
			      "names", "clone", "action", "SCMP_ACT_ERRNO",
			      "errnoRet", EPERM, "args", "index", 0, "value",
			      (json_int_t)ns_flags[i], "valueTwo",
			      (json_int_t)ns_flags[i], "op",
			      "SCMP_CMP_MASKED_EQ"));
	json_array_append_new(
	    rules, json_pack("{s:[s], s:s, s:i}", "names", "clone3", "action",
			     "SCMP_ACT_ERRNO", "errnoRet", ENOSYS));
	socket_rules(rules, m);
	exec_rules(rules);
	return json_pack("{s:s, s:[s], s:o}", "defaultAction", "SCMP_ACT_ALLOW",
			 "architectures", "SCMP_ARCH_X86_64", "syscalls",
			 rules);
}

json_t *wd_oci_config(const struct wd_manifest *m, const struct wd_oci_opts *o,
		      struct wd_err *err)
{
	if (o->uid == 0 || o->gid == 0) {
		/* Never uid 0 in the guest either: root in gVisor still holds
		 * every capability over the bound host paths. */
		wd_err_set(err, -EPERM, "tier 3: refusing to run as uid/gid 0");
		errno = EPERM;
		return NULL;
	}
	uint64_t mem =
	    (uint64_t)(m->memory_mb ? m->memory_mb : WD_DEFAULT_MEMORY_MB)
	    << 20;
	json_t *empty = json_array();
	json_t *caps = json_pack("{s:O, s:O, s:O, s:O, s:O}", "bounding", empty,
				 "effective", empty, "inheritable", empty,
				 "permitted", empty, "ambient", empty);
	json_decref(empty);
	/* RLIMIT_NPROC is the manifest's pids inside the sentry: gVisor
	 * counts the uid's tasks (threads included, as pids.max does) and
	 * fails fork/clone with EAGAIN, so a flood stops in the guest while
	 * the sandbox lives. The host cgroup's pids.max (pids + overhead for
	 * the sentry, gofer and ptrace stubs) stays the outer bound. */
	json_int_t nproc = m->pids ? m->pids : WD_DEFAULT_PIDS;
	json_t *rlimits = json_pack(
	    "[{s:s, s:I, s:I}, {s:s, s:I, s:I}, {s:s, s:I, s:I}]", "type",
	    "RLIMIT_NOFILE", "hard", (json_int_t)1024, "soft", (json_int_t)1024,
	    "type", "RLIMIT_CORE", "hard", (json_int_t)0, "soft", (json_int_t)0,
	    "type", "RLIMIT_NPROC", "hard", nproc, "soft", nproc);
	json_t *proc = json_pack(
	    "{s:{s:I, s:I}, s:o, s:o, s:s, s:b, s:o, s:o, s:i}", "user", "uid",
	    (json_int_t)o->uid, "gid", (json_int_t)o->gid, "args",
	    strv_json(o->argv), "env", strv_json(o->envp), "cwd", "/tmp",
	    "noNewPrivileges", 1, "capabilities", caps, "rlimits", rlimits,
	    /* the tool's sandbox and gofer: not the supervisor's -900
	     * (runsc sets it on them only when the spec names one) */
	    "oomScoreAdj", 0);
	json_t *res = json_pack(
	    "{s:{s:I}, s:{s:I}}", "memory", "limit", (json_int_t)mem, "pids",
	    "limit", (json_int_t)(m->pids ? m->pids : WD_DEFAULT_PIDS));
	if (m->cpus > 0)
		json_object_set_new(res, "cpu",
				    json_pack("{s:I, s:I}", "quota",
					      (json_int_t)(m->cpus * 100000),
					      "period", (json_int_t)100000));
	json_t *ns = json_pack("[{s:s}, {s:s}, {s:s}, {s:s}]", "type", "pid",
			       "type", "ipc", "type", "uts", "type", "mount");
	json_t *netns = json_pack("{s:s}", "type", "network");
	if (o->netns_path)
		json_object_set_new(netns, "path", json_string(o->netns_path));
	json_array_append_new(ns, netns);
	json_t *linux_ =
	    json_pack("{s:o, s:o, s:s}", "namespaces", ns, "resources", res,
		      "cgroupsPath", o->cgroups_path);
	json_object_set_new(linux_, "seccomp", seccomp_json(m));
	json_t *mounts = mounts_json(m, o->argv[0], err);
	if (!mounts) {
		int e = errno;
		json_decref(proc);
		json_decref(linux_);
		errno = e;
		return NULL;
	}
	/* last: over a host /etc the manifest may bind */
	static const char *const rc_opts[] = {"rbind", "ro",	 "nosuid",
					      "nodev", "noexec", NULL};
	if (o->resolv_conf)
		json_array_append_new(mounts,
				      mount_json("/etc/resolv.conf", "bind",
						 o->resolv_conf, rc_opts));
	json_t *c = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}",
			      "ociVersion", "1.0.0", "process", proc, "root",
			      "path", "rootfs", "readonly", 1, "hostname",
			      o->hostname ? o->hostname : "warden", "mounts",
			      mounts, "linux", linux_);
	if (!c) {
		wd_err_set(err, -ENOMEM, "tier 3: cannot build config.json");
		errno = ENOMEM;
	}
	return c;
}

int wd_oci_bundle_write(const char *dir, const struct wd_manifest *m,
			const struct wd_oci_opts *o, struct wd_err *err)
{
	json_t *c = wd_oci_config(m, o, err);
	if (!c)
		return -errno;
	cleanup_free char *root = wd_asprintf("%s/rootfs", dir);
	cleanup_free char *cfg = wd_asprintf("%s/config.json", dir);
	int r = 0;
	/* 0755 exactly, whatever the daemon's umask: gVisor's sandbox
	 * reads the root (and finds /tmp in it) as an unprivileged user */
	if (mkdir(root, 0755) < 0 || chmod(root, 0755) < 0) {
		r = wd_err_set(err, -errno, "bundle '%s': %s", root,
			       strerror(errno));
		goto out;
	}
	if ((r = wd_sb_copy_root_symlinks(root)) < 0) {
		wd_err_set(err, r, "bundle '%s': symlinks: %s", root,
			   strerror(-r));
		goto out;
	}
	if (json_dump_file(c, cfg, JSON_COMPACT) < 0)
		r = wd_err_set(err, -EIO, "bundle '%s': cannot write", cfg);
out:
	json_decref(c);
	return r;
}
