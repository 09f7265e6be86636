/* Tiers 1 and 2: the tool runs on the host kernel, held by cgroups, BPF,
 * Landlock and seccomp; tier 2 adds mount, pid, ipc, uts (and, with no
 * egress, network) namespaces with only the manifest's paths bound.
 *
 * Process tree:
 *   tier 1: warden ── T (restricts itself, execs the tool)
 *   tier 2: warden ── C (host pid ns; unshares; waits) ── G1 = T (pid 1:
 *           mounts, restricts itself, execs warden-init, which forks G2
 *           and reaps) ── G2 (execs the tool)
 * T (and, where it can, tier 2's G1: no C then) is a clone of the daemon
 * on the daemon's own memory until it execs (native_spawn.c); tier 1's T
 * also mounts its scratch tmpfs in a mount namespace of its own.
 * T is created inside the call's v2 cgroup (clone3 CLONE_INTO_CGROUP; by
 * the daemon in tier 1, by C in tier 2, C running nothing of the tool's
 * and relaying T's status) and joins the v1 leaves before it does anything
 * else, so everything T starts is in them and dies with cgroup.kill at the
 * end of the call.
 *
 * The launch is a flat list of steps in privilege order (nsjail contain.cc):
 * namespaces → mounts → rlimits → identity (groups, gid, capability bounding
 * set, uid, libcap clear) → no_new_privs → Landlock → seccomp → exec.
 * A failing step reports on the error pipe and exits 125: nothing runs
 * weaker than its manifest.
 */
#include "sandbox/native_int.h"
#include "sandbox/netns.h"
#include "sandbox/common.h"
#include "sandbox/sandbox.h"
#include "common/log.h"
#include "enforce/egress.h"
#include "enforce/landlock.h"
#include "enforce/lsm.h"
#include "lsm_policy.h"
#include "enforce/probe.h"
#include "enforce/seccomp.h"
#include "events/landlock_audit.h"
#include "sandbox/cgroup.h"
#include "sandbox/mounts.h"
#include "sandbox/plancache.h"
#include "sandbox/reaper.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* ---- parent side ------------------------------------------------------------
 */

static void closep2(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

static void build_env(struct launch *l)
{
	const char *home = l->tier == 1 ? l->scratch : "/tmp";
	/* A clean environment: nothing of the caller's (API keys, tokens,
	 * sockets) reaches the tool. */
	const struct wd_manifest *m = l->m;
	l->envp = wd_calloc(8 + (size_t)m->n_env, sizeof(char *));
	l->envp[0] = wd_strdup("PATH=/usr/local/bin:/usr/bin:/bin");
	l->envp[1] = wd_asprintf("HOME=%s", home);
	l->envp[2] = wd_asprintf("TMPDIR=%s", home);
	l->envp[3] = wd_strdup("LANG=C.UTF-8");
	l->envp[4] = wd_asprintf("WARDEN_CALL_ID=%s", l->id);
	/* a replay environment's own variables (manifest.h replay_env; the
	 * names above are refused there at load) */
	for (int i = 0; i < m->n_env; i++)
		l->envp[5 + i] = wd_strdup(m->env[i]);
}

/* A call directory is empty (tier 2's root is the shared t2root, tier
 * 1's scratch the shared t1scratch; its lock is on itself): one rmdir
 * instead of a directory walk. false: something else is there, walk it. */
static bool rm_calldir(struct launch *l)
{
	return rmdir(l->calldir) == 0;
}

/* What is left of a call once every process of it is dead: its egress
 * attachment, its cgroup directories, its call directory. Removed on the
 * reaper thread (sandbox/reaper.h): the result does not wait for the
 * directory removals (~0.5 ms a call on an ext4 /run). */
struct teardown {
	struct wd_egress *eg; /* detach cgid from it, or NULL */
	uint64_t cgid;
	struct wd_cgroup cg;
	bool cg_emptied; /* native_run's kill and wait found it empty */
	int tier;
	char calldir[256];
	int ownerfd; /* held until the call directory is gone */
	/* the call's mount namespace (tier 2's root, tier 1's scratch
	 * tmpfs), held when its first process was cloned on our memory
	 * (native_spawn.c hold_mntns); else -1 */
	int mntns;
	const struct wd_cgroup_layout *lay;
};

/* Calls this process has run: spare v1 leaves are made from the second
 * on (a one-call `warden exec` would only make and remove them). */
static int n_calls;

static void *close_main(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

static void teardown_run(void *arg)
{
	struct teardown *t = arg;
	/* The namespace's mounts go with our hold on it, and that close
	 * waits for an RCU grace period (~0.3 ms, perf trace of a one-shot
	 * tier-1 call): on a thread of its own while the cgroup leaves go,
	 * joined before the call directory (tier 2's mounts are under no
	 * directory of the call's, but nothing of the call's is given back
	 * while its mounts may still be there) */
	struct wd_aside closer;
	bool closing = false;
	if (t->mntns >= 0) {
		closing = wd_aside_start(&closer, 64 << 10, close_main,
					 (void *)(intptr_t)t->mntns) == 0;
		if (!closing)
			close(t->mntns);
	}
	unsigned v1_mask = 0;
	for (int c = 0; c < WD_CG_NCTRL; c++)
		if (t->cg.v1[c][0])
			v1_mask |= 1u << c;
	/* The leaves first: once the v2 one is gone, so are the programs
	 * attached to it (a removed cgroup holds no process and the kernel
	 * releases them), and only the call's map entries are left to
	 * remove: 8 detaches fewer a call. A leaf that stays (a process the
	 * kill left) keeps its programs until the detach. */
	bool removed = false;
	if (t->cg_emptied)
		removed = t->cg.v2[0] && wd_cgroup_remove_emptied(&t->cg);
	else
		wd_cgroup_destroy(&t->cg);
	if (t->eg && removed)
		wd_egress_detach_removed(t->eg, t->cgid);
	else if (t->eg)
		wd_egress_detach(t->eg, t->cgid);
	if (closing)
		wd_aside_join(&closer);
	/* kept as the next call's, else removed */
	if (t->calldir[0] && t->ownerfd >= 0 &&
	    wd_sandbox_spare_calldir(t->calldir, t->ownerfd))
		t->ownerfd = -1;
	else if (t->calldir[0]) {
		struct launch l = {.tier = t->tier};
		memcpy(l.calldir, t->calldir, sizeof(l.calldir));
		if (!rm_calldir(&l))
			wd_rm_rf(t->calldir);
	}
	if (t->ownerfd >= 0)
		close(t->ownerfd);
	if (v1_mask && t->lay &&
	    __atomic_add_fetch(&n_calls, 1, __ATOMIC_RELAXED) >= 2)
		wd_cgroup_spares_fill(t->lay, v1_mask);
	free(t);
}

static int resolver_pin(void *arg, const uint8_t addr[16], uint16_t port,
			bool add)
{
	struct launch *l = arg;
	return wd_egress_answer(l->rpin.eg, l->rpin.cgid, addr, port, add);
}

/* resolver.h `off`: the resolver failed, the call's DNS fails closed. */
static void resolver_off(void *arg)
{
	struct launch *l = arg;
	int rc = wd_egress_dns_off(l->rpin.eg, l->rpin.cgid);
	if (rc)
		wd_warn("resolver: cgroup %llu: DNS redirect off: %s",
			(unsigned long long)l->rpin.cgid, strerror(-rc));
}

/* The call's resolver when its allow-list names a host (else nothing). */
static int start_resolver(struct launch *l, struct wd_egress *eg, uint64_t cgid,
			  const struct wd_manifest *m, struct wd_err *err)
{
	if (!wd_manifest_names(m))
		return 0;
	l->rpin.eg = eg;
	l->rpin.cgid = cgid;
	struct wd_resolver_opts ro = {.rules = m->net_allow,
				      .n = m->n_net_allow,
				      .priv = m->net_private,
				      .npriv = m->n_net_private,
				      .audit = m->mode == WD_MODE_AUDIT,
				      .pin = resolver_pin,
				      .pin_arg = l,
				      .off = resolver_off,
				      .off_arg = l,
				      .cgroup_id = cgid,
				      .uid = l->uid};
	wd_resolver_upstream(&ro.up);
	int r = wd_resolver_start(&ro, &l->resolver, err);
	if (r < 0)
		return r;
	return wd_egress_dns(eg, cgid, wd_resolver_port(l->resolver),
			     wd_resolver_has_v6(l->resolver), err);
}

static int native_run(const struct wd_call *call, struct wd_result *res,
		      struct wd_err *err)
{
	const struct wd_manifest *m = call->manifest;
	const struct wd_features *f = wd_probe();
	struct launch l = {.call = call,
			   .m = m,
			   .tier = m->tier,
			   .ownerfd = -1,
			   .mntns = -1,
			   .netfd = -1,
			   .init_fd = -1};
	struct wd_cgroup cg = {.v2_fd = -1};
	struct wd_cgroup_job cgjob = {0}; /* the v1 leaves being made */
	/* the keep-warm links are on: warden/ and warden/keep-warm stay at
	 * our exit (set once the v1 leaves are known, at out:) */
	bool keep_parents = false;
	struct wd_egress *eg = NULL;
	bool attached = false, routed = false;
	struct wd_bpf_route route;
	struct wd_netns_job nsjob = {.fd = -1}; /* the call's own netns */
	pid_t child = -1;
	int r;

	int *fds[] = {l.errp, l.sock, l.in, l.out, l.err};
	for (size_t i = 0; i < WD_ARRAY_SIZE(fds); i++)
		fds[i][0] = fds[i][1] = -1;
	wd_strlcpy(l.id, res->call_id, sizeof(l.id));
	/* the call's own uid (sandbox/uidpool.h), never the caller's */
	l.uid = call->run_uid;
	l.gid = call->run_gid;
	if (l.uid == 0 || l.gid == 0) {
		r = wd_err_set(err, -EPERM,
			       "identity: no uid of the call's own");
		goto out;
	}
	/* Fail closed, before anything is created: every line the manifest
	 * draws needs its mechanism. */
	if (f->landlock_abi < 1) {
		r = wd_err_set(err, -ENOTSUP,
			       "filesystem: cannot enforce: Landlock "
			       "unavailable (%s)",
			       strerror(-f->landlock_abi));
		goto out;
	}
	if (!f->seccomp_notify) {
		r = wd_err_set(err, -ENOTSUP,
			       "syscalls: cannot enforce: seccomp user "
			       "notification unavailable");
		goto out;
	}
	if (m->mode == WD_MODE_AUDIT && !f->seccomp_notify_continue) {
		r = wd_err_set(err, -ENOTSUP,
			       "mode audit: seccomp USER_NOTIF_FLAG_CONTINUE "
			       "unavailable");
		goto out;
	}
	/* argv */
	char *const *src = call->argv ? call->argv : m->exec;
	if (!src || !src[0]) {
		r = wd_err_set(err, -EINVAL,
			       "no command: manifest '%s' has no "
			       "exec and none was given",
			       m->name);
		goto out;
	}
	int argc = 0;
	while (src[argc])
		argc++;
	l.argv = wd_calloc(argc + 1, sizeof(char *));
	l.argv[0] = wd_sb_resolve_exec(src[0]);
	if (!l.argv[0]) {
		r = wd_err_set(err, -ENOENT, "command '%s' not found", src[0]);
		goto out;
	}
	for (int i = 1; i < argc; i++)
		l.argv[i] = wd_strdup(src[i]);
	l.exec_path = realpath(l.argv[0], NULL);
	if (!l.exec_path) {
		r = wd_err_set(err, -errno, "command '%s': %s", l.argv[0],
			       strerror(errno));
		goto out;
	}

	/* Network namespace. Without egress and without network.listen
	 * the call gets an empty one: nothing outside can reach a port or
	 * an abstract unix name of it (tier 2: its own; tier 1: the shared
	 * one, sandbox/netns.h). Audit mode records and allows: the egress
	 * programs watch the host's network instead. */
	bool no_net =
	    m->n_net_allow == 0 && !m->net_listen && m->mode != WD_MODE_AUDIT;
	/* a family beyond unix/inet/inet6 (netlink, packet, ...) reaches
	 * other sockets of its namespace that neither Landlock's scope nor
	 * the unix programs judge: such a call gets a namespace of its own,
	 * never the one other calls share */
	l.netns = no_net && (l.tier == 2 || f->landlock_abi < 6 ||
			     m->n_socket_families > 0);
	bool shared_net = no_net && !l.netns;
	/* made while the rest is set up, joined just before the spawn */
	if (l.netns)
		wd_netns_begin(&nsjob);
	else if (shared_net)
		wd_netns_empty_begin();
	r = wd_seccomp_build(m, !no_net, &l.sc, err);
	if (r < 0)
		goto out;

	/* Call directory: its owner lock. */
	wd_native_runtime_dir_open(wd_runtime_dir());
	wd_native_protect_self();
	if (l.tier == 2) {
		int ifd = wd_native_init(&l.init_path, err);
		if (ifd < 0) {
			r = ifd;
			goto out;
		}
		l.init_fd = ifd;
		snprintf(l.init_exec, sizeof(l.init_exec), "/proc/self/fd/%d",
			 ifd);
	}
	/* Held while this process lives: a start-up sweep removes what a
	 * killed daemon's calls left behind as soon as the lock is free.
	 * calls/ is made when it is missing, not walked up to per call. */
	snprintf(l.calldir, sizeof(l.calldir), "%s/calls/%s", wd_runtime_dir(),
		 l.id);
	r = wd_sandbox_own_calldir(l.calldir, &l.ownerfd, err);
	if (r == -ENOENT) {
		char calls[sizeof(l.calldir)];
		snprintf(calls, sizeof(calls), "%s/calls", wd_runtime_dir());
		if ((r = wd_mkdir_p(calls, 0711)) < 0) {
			wd_err_set(err, r, "call dir '%s': %s", calls,
				   strerror(-r));
			goto out;
		}
		*err = (struct wd_err){0};
		r = wd_sandbox_own_calldir(l.calldir, &l.ownerfd, err);
	}
	if (r < 0)
		goto out;
	/* Tier 2: every call mounts its new root on this one directory, in
	 * its own mount namespace (on the host it stays empty): no directory
	 * to make and remove per call, and the plan is the same for every
	 * call of a manifest (sandbox/plancache.h). Tier 1 likewise mounts
	 * its scratch tmpfs on one shared directory in T's own mount
	 * namespace (native_child.c): a per-call mount point cost a mkdir,
	 * a chown and, once the namespace was gone, an rmdir that waited for
	 * the kernel to detach the dead namespace's mount (~1-8 ms). Either
	 * is root's and only root's to write: mount(2) follows a symlink put
	 * in its place. */
	snprintf(l.root, sizeof(l.root), "%s/t2root", wd_runtime_dir());
	snprintf(l.scratch, sizeof(l.scratch), "%s/t1scratch",
		 wd_runtime_dir());
	const char *mp = l.tier == 1 ? l.scratch : l.root;
	struct stat rst;
	if ((mkdir(mp, 0755) < 0 && errno != EEXIST) || lstat(mp, &rst) < 0) {
		r = wd_err_set(err, -errno, "%s '%s': %s",
			       l.tier == 1 ? "scratch" : "root", mp,
			       strerror(errno));
		goto out;
	} else if (!S_ISDIR(rst.st_mode) || rst.st_uid != 0 ||
		   (rst.st_mode & 022)) {
		r = wd_err_set(err, -EPERM,
			       "%s '%s': not a directory of root's that "
			       "only root may write",
			       l.tier == 1 ? "scratch" : "root", mp);
		goto out;
	} else if (l.tier == 1) {
		snprintf(l.scratch_opts, sizeof(l.scratch_opts),
			 "mode=0700,uid=%u,gid=%u,size=%um", l.uid, l.gid,
			 m->memory_mb ? m->memory_mb : WD_DEFAULT_MEMORY_MB);
	} else if ((r = wd_plan_get(&l.mplan, &l.mplan_ref, l.root, m, err)) <
		   0) {
		goto out;
	}
	build_env(&l);

	/* cgroup */
	struct wd_cg_limits lim = {
	    .memory_bytes =
		(uint64_t)(m->memory_mb ? m->memory_mb : WD_DEFAULT_MEMORY_MB)
		<< 20,
	    .pids = m->pids ? m->pids : WD_DEFAULT_PIDS,
	    .cpus = m->cpus,
	};
	/* the v1 leaves are made while the rest is set up (cgroup.h),
	 * waited for just before the spawn */
	if ((r = wd_cgroup_create_begin(&cg, &f->cg, l.id, &lim, true, &cgjob,
					err)) < 0)
		goto out;
	wd_result_enf(res, "cgroup", "%s (memory %s, pids %s%s)",
		      f->cg.hybrid ? "hybrid v1+v2" : "v2",
		      cg.on_v2[WD_CG_MEMORY] ? "v2" : "v1",
		      cg.on_v2[WD_CG_PIDS] ? "v2" : "v1",
		      lim.cpus > 0
			  ? (cg.on_v2[WD_CG_CPU] ? ", cpu v2" : ", cpu v1")
			  : "");

	/* egress: the in-kernel allow-list, attached to the call's cgroup.
	 * Tier 2 with no egress also gets an empty network namespace. */
	eg = wd_egress_shared(err);
	if (!eg) {
		r = wd_err_set(err, -ENOTSUP,
			       "network.allow: cannot enforce: BPF egress "
			       "programs unavailable: %s",
			       err->msg);
		goto out;
	}
	char keep_dir[sizeof(f->cg.v2_root) + 24];
	keep_parents =
	    wd_cgroup_keep_dir(&f->cg, keep_dir, sizeof(keep_dir)) == 0 &&
	    wd_egress_keep_warm(eg, keep_dir);
	r = wd_egress_attach(eg, cg.v2_fd, cg.v2_id, m->net_allow,
			     m->n_net_allow, m->mode == WD_MODE_AUDIT, 0, err);
	if (r < 0)
		goto out;
	attached = true;
	/* inbound: a port of any number only when the manifest asks */
	if (m->net_listen &&
	    (r = wd_egress_allow_listen(eg, cg.v2_id, err)) < 0)
		goto out;
	/* unix sockets: only under the manifest's write paths */
	r = wd_egress_allow_unix(eg, cg.v2_id, m->fs_write.v, m->fs_write.n,
				 err);
	if (r < 0)
		goto out;
	wd_bpf_route_add(&route, cg.v2_id);
	routed = true;
	/* names in network.allow: the call's own resolver, where the
	 * programs send its DNS; what it answers is pinned for the TTL */
	if ((r = start_resolver(&l, eg, cg.v2_id, m, err)) < 0)
		goto out;

	/* BPF LSM where the kernel runs it; `require: [bpf_lsm]` refuses the
	 * call without it. */
	bool need_lsm = false;
	for (int i = 0; i < m->n_require; i++)
		if (!strcmp(m->require[i], "bpf_lsm"))
			need_lsm = true;
	struct wd_err lerr = {0};
	struct wd_lsm *lsm = wd_lsm_shared(&lerr);
	if (!lsm) {
		/* the egress object loaded (above): the LSM's own instance
		 * was refused (the node's pins not ours, or not made) */
		r = wd_err_set(err, lerr.code ? lerr.code : -EINVAL,
			       "bpf_lsm: cannot enforce: %s",
			       lerr.msg[0] ? lerr.msg : "instance unavailable");
		goto out;
	}
	if (need_lsm && !wd_lsm_active()) {
		r = wd_err_set(err, -ENOTSUP,
			       "require bpf_lsm: cannot enforce: BPF LSM "
			       "unavailable on this kernel%s%s (see warden "
			       "status)",
			       lerr.msg[0] ? ": " : "", lerr.msg);
		goto out;
	}
	if (lsm && wd_lsm_n_active(lsm) > 0) {
		/* both tiers mount inside the cgroup (tier 2's new root, tier
		 * 1's scratch tmpfs), so the first process arms the hooks
		 * itself once its setup is done (wd_lsm_arm, native_child.c) */
		r = wd_lsm_prepare(lsm, cg.v2_fd, cg.v2_id, m, err);
		if (r < 0)
			goto out;
		l.lsm = lsm;
		l.cgid = cg.v2_id;
		wd_result_enf(res, "bpf_lsm", "%s (%d hooks)",
			      m->mode == WD_MODE_AUDIT ? "audit" : "enforced",
			      wd_lsm_n_active(lsm));
	} else {
		wd_result_enf(res, "bpf_lsm",
			      "unavailable on this kernel: "
			      "Landlock + seccomp + cgroup "
			      "BPF hold its lines");
	}
	wd_result_enf(res, "bpf_egress",
		      "%s: cgroup/connect4,6 sendmsg4,6 "
		      "(%d rule%s)%s",
		      m->mode == WD_MODE_AUDIT ? "audit" : "enforced",
		      m->n_net_allow, m->n_net_allow == 1 ? "" : "s",
		      l.netns	   ? " + empty netns"
		      : shared_net ? " + the shared empty netns"
				   : "");
	wd_result_enf(res, "landlock", "enforced (ABI %d)%s", f->landlock_abi,
		      m->mode == WD_MODE_AUDIT ? "; audit mode cannot watch "
						 "the filesystem"
					       : "");
	wd_result_enf(res, "seccomp", "%s (user-notify, %u instructions)",
		      m->mode == WD_MODE_AUDIT ? "audit" : "enforced",
		      l.sc.prog.len);
	wd_result_enf(res, "identity",
		      "uid %u gid %u of the call's own, no capabilities, "
		      "no_new_privs",
		      l.uid, l.gid);
	if (l.tier == 2)
		wd_result_enf(res, "namespaces", "mnt pid ipc uts%s",
			      l.netns ? " net" : "");
	else /* the mount namespace holds the scratch (native_child.c) */
		wd_result_enf(res, "namespaces", "ipc mnt%s",
			      l.netns	   ? " net"
			      : shared_net ? " net (the shared empty one)"
					   : "");

	/* tier 1's scratch: granted by T on its tmpfs (native_child.c) */
	l.cg = &cg;
	/* Landlock reports through audit (ABI 7); we listen when audit is
	 * already on, or when WARDEN_LANDLOCK_AUDIT=enable asks us to turn it
	 * on (and leave it on: concurrent calls restoring it would switch it
	 * off under each other). Enabling audit costs every process on the
	 * node an audit context: the operator's choice, not ours.
	 * Subscribed before the child exists: its first records come fast. */
	const char *lle = getenv("WARDEN_LANDLOCK_AUDIT");
	bool ll_enable = lle && !strcmp(lle, "enable");
	struct wd_err llerr = {0};
	/* Asked each call, not from the cached probe: an operator may turn
	 * audit on while the daemon runs (-ENODATA while it is off). */
	/* Off is remembered for a second: asking costs two netlink sockets
	 * and a round trip to the audit subsystem (~0.3 ms a call). Only the
	 * reporting of Landlock denials waits for that second, not Landlock. */
	static uint64_t audit_off_until;
	/* the probe's AUDIT_GET, answered while the above was set up */
	wd_probe_audit_settle();
	uint64_t now = wd_now_ns();
	/* the probe of this process asked moments ago (a one-shot call's):
	 * its "off" is remembered as our own would be */
	uint64_t asked = wd_probe_audit_at_ns();
	if (f->audit_enabled == 0 && asked && now < asked + 1000000000ull)
		__atomic_store_n(&audit_off_until, asked + 1000000000ull,
				 __ATOMIC_RELAXED);
	/* and its "on" as the reader's own AUDIT_GET would be: a one-shot
	 * call asks the audit subsystem once, not twice (a round trip
	 * through it: 0.1 ms, several under load) */
	if (f->audit_enabled >= 1 && asked && now < asked + 1000000000ull)
		wd_landlock_audit_known_on(asked);
	if ((ll_enable ||
	     (f->audit &&
	      now >= __atomic_load_n(&audit_off_until, __ATOMIC_RELAXED))) &&
	    (r = wd_landlock_audit_open(&l.lla, ll_enable, &llerr)) < 0) {
		l.lla = NULL;
		if (r == -ENODATA)
			__atomic_store_n(&audit_off_until, now + 1000000000ull,
					 __ATOMIC_RELAXED);
	}
	r = 0;
	if (l.lla)
		wd_landlock_audit_keep_enabled(l.lla);
	else /* enforced all the same; say that nobody hears the denials */
		wd_result_enf(
		    res, "landlock",
		    "enforced (ABI %d); its denials are not recorded: "
		    "%s%s",
		    f->landlock_abi,
		    f->landlock_abi < 7
			? "Landlock before ABI 7 reports nothing"
			: "kernel audit is off (auditctl -e 1, or "
			  "WARDEN_LANDLOCK_AUDIT=enable)",
		    m->mode == WD_MODE_AUDIT
			? "; audit mode cannot watch the filesystem"
			: "");
	if ((r = wd_native_build_landlock(&l, err)) < 0)
		goto out;
	if (pipe2(l.errp, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, l.sock) < 0 ||
	    pipe2(l.in, O_CLOEXEC) < 0 || pipe2(l.out, O_CLOEXEC) < 0 ||
	    pipe2(l.err, O_CLOEXEC) < 0) {
		r = wd_err_set(err, -errno, "pipes: %s", strerror(errno));
		goto out;
	}
	if (l.tier == 2)
		wd_native_init_argv(&l, argc);
	/* the v1 leaves T joins first thing */
	if ((r = wd_cgroup_create_end(&cgjob, err)) < 0)
		goto out;
	/* the network namespace begun above: the call's own (either tier
	 * joins it as its first process starts: native_child.c) or the
	 * shared one */
	if (l.netns || shared_net) {
		l.netfd = l.netns ? wd_netns_end(&nsjob, err)
				  : wd_netns_empty_fd(err);
		if (l.netfd < 0) {
			r = l.netfd;
			l.netfd = -1;
			goto out;
		}
	}
	l.ppid = getpid(); /* T and C die with us (die_with_parent) */
	l.cpidfd = -1;
	if (l.tier == 1) {
		child = wd_native_spawn_tier1(&l);
	} else {
		child = wd_native_spawn_tier2(&l);
	}
	if (child < 0) {
		r = wd_err_set(err, -errno, "fork: %s", strerror(errno));
		goto out;
	}

	close(l.errp[1]);
	l.errp[1] = -1;
	close(l.sock[1]);
	l.sock[1] = -1;
	close(l.in[0]);
	l.in[0] = -1;
	close(l.out[1]);
	l.out[1] = -1;
	close(l.err[1]);
	l.err[1] = -1;
	r = wd_native_supervise(&l, child, &cg, eg, &route, res, err);

out:
	/* a step that failed while the v1 leaves were being made */
	(void)wd_cgroup_create_end(&cgjob, NULL);
	if (keep_parents)
		wd_cgroup_parents_keep(&f->cg, &cg);
	if (routed)
		wd_bpf_route_del(&route);
	if (l.lsm)
		wd_lsm_end(l.lsm, l.cgid);
	/* Every process of the call is dead before we return: the rest can
	 * be removed behind our back. */
	bool cg_emptied = l.cg_empty;
	if (cg.v2[0] && !cg_emptied) {
		wd_cgroup_kill(&cg);
		cg_emptied = wd_cgroup_wait_empty(&cg, 2000) == 0;
		if (!cg_emptied) {
			/* the uid's release looks for them (uidpool.c) */
			res->procs_left = true;
			wd_warn("call %s: processes left in its cgroup after "
				"cgroup.kill",
				l.id);
		}
	}
	/* the processes are dead: the kernel's count of the call's events
	 * is final (it includes those the ring buffer had no room for) */
	if (attached && eg &&
	    !wd_egress_call_counts(eg, cg.v2_id, &res->kernel_counts[0],
				   &res->kernel_counts[1]))
		res->has_kernel_counts = true;
	/* no process of the call is left to ask it: its pins go */
	wd_resolver_stop(l.resolver);
	l.resolver = NULL;
	for (size_t i = 0; i < WD_ARRAY_SIZE(fds); i++)
		closep2(fds[i]);
	struct teardown *td = wd_calloc(1, sizeof(*td));
	td->eg = attached ? eg : NULL;
	td->cgid = cg.v2_id;
	td->cg = cg;
	td->cg_emptied = cg_emptied;
	td->tier = l.tier;
	memcpy(td->calldir, l.calldir, sizeof(td->calldir));
	td->ownerfd = l.ownerfd;
	l.ownerfd = -1;
	td->mntns = l.mntns;
	l.mntns = -1;
	td->lay = &f->cg;
	wd_reaper_submit(teardown_run, td);
	if (nsjob.running) { /* a setup step failed before the join */
		struct wd_err ne = {0};
		int nfd = wd_netns_end(&nsjob, &ne);
		if (nfd >= 0)
			close(nfd);
	}
	if (l.netns &&
	    l.netfd >= 0) /* the call's own: its processes are gone */
		close(l.netfd);
	wd_seccomp_prog_free(&l.sc);
	wd_plan_put(l.mplan_ref); /* G1, its reader, is gone */
	wd_landlock_free(l.ll);
	wd_landlock_audit_close(l.lla);
	wd_native_init_argv_free(&l);
	wd_sb_free_strv(l.argv);
	wd_sb_free_strv(l.envp);
	free(l.exec_path);
	return r;
}

const struct wd_runner wd_runner_native = {.tier = 1, .run = native_run};
