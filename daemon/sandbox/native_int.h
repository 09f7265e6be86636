/* Tiers 1 and 2, shared between the parent side (native.c: set-up,
 * supervision, teardown) and the child side (native_child.c: the steps
 * between clone and exec). Internal to daemon/sandbox/. */
#ifndef WD_NATIVE_INT_H
#define WD_NATIVE_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "enforce/resolver.h"
#include "enforce/landlock.h"
#include "enforce/lsm.h"
#include "enforce/seccomp.h"
#include "events/bpf_route.h"
#include "events/landlock_audit.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"

/* struct clone_args (linux/sched.h, 5.7); Debian 12's glibc headers do
 * not export it next to <sched.h>. */
struct wd_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
	    stack_size, tls, set_tid, set_tid_size, cgroup;
};
/* linux/sched.h (5.5): the child's caught signals go back to their
 * default action in the clone itself; ignored ones stay ignored */
#ifndef CLONE_CLEAR_SIGHAND
#define CLONE_CLEAR_SIGHAND 0x100000000ULL
#endif

/* A message of `len` bytes at data with room for one SCM_RIGHTS fd: the
 * child sends T's seccomp listener with it, the parent receives it. The
 * msghdr points into *s: keep s in place while the message is used. */
struct wd_scm1 {
	struct iovec iov;
	struct msghdr msg;
	/* last: clang takes CMSG_SPACE for a variable size */
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
};

static inline struct msghdr *wd_scm1_init(struct wd_scm1 *s, void *data,
					  size_t len)
{
	memset(s, 0, sizeof(*s));
	s->iov = (struct iovec){.iov_base = data, .iov_len = len};
	s->msg = (struct msghdr){.msg_iov = &s->iov,
				 .msg_iovlen = 1,
				 .msg_control = s->u.buf,
				 .msg_controllen = sizeof(s->u.buf)};
	return &s->msg;
}

struct launch {
	const struct wd_call *call;
	const struct wd_manifest *m;
	int tier;
	uid_t uid;
	gid_t gid;
	char id[40];
	char calldir[256]; /* host dir for this call (scratch, root) */
	int ownerfd;	   /* calldir itself, flock'ed while the call lives */
	char scratch[300]; /* tier 1 TMPDIR/HOME */
	/* tier 1: the options of the tmpfs T mounts on scratch in a mount
	 * namespace of its own (size: memory_mb; owner: the call's uid) */
	char scratch_opts[96];
	char root[300]; /* tier 2 new root mountpoint */
	bool netns;	/* a new, empty network namespace of the call's own */
	/* the supervisor saw the call's cgroup empty once its first process
	 * had exited and the cgroup been killed: nothing of the call is
	 * left to start another (native_run skips its own kill and wait) */
	bool cg_empty;
	int netfd; /* the empty namespace the first process joins: the
		    * call's own (netns: ours to close) or tier 1's shared
		    * one (netns.h: not ours); -1 */
	char **argv;
	char *exec_path; /* argv[0] with symlinks resolved: tier 2 binds
			  * targets, not the links (/bin/sh -> dash) */
	char **envp;
	struct wd_seccomp_prog sc;
	struct wd_lsm *lsm;	/* armed for this call, or NULL */
	struct wd_landlock *ll; /* the call's ruleset, built by the parent */
	struct wd_landlock_audit *lla; /* Landlock denials, or NULL */
	uint64_t cgid;
	struct wd_cgroup *cg;
	/* names in network.allow: the call's resolver (enforce/resolver.h)
	 * and what its pins go through */
	struct wd_resolver *resolver;
	struct {
		struct wd_egress *eg;
		uint64_t cgid;
	} rpin;
	int errp[2]; /* child → parent: setup error text (CLOEXEC) */
	int sock[2]; /* child → parent: seccomp listener fd */
	int in[2], out[2], err[2];
	/* tier 1, T sharing the daemon's memory (wd_native_spawn_tier1):
	 * the caller's signal mask, restored by T just before exec */
	bool vm_child;
	sigset_t mask;
	/* The process T (tier 1) or C (tier 2) is a child of: T and C die
	 * with it (PR_SET_PDEATHSIG), and check it still lives once the
	 * signal is armed. Tier 2: C's pidfd, which G1 inherits and polls
	 * for the same check (G1's getppid() is 0: C is outside its pid
	 * namespace). */
	pid_t ppid;
	int cpidfd;
	/* tier 2: G1 execs warden-init (native_init.c) by this path
	 * ("/proc/self/fd/N" of the init's fd, in G1's own procfs) with
	 * init_argv = {"warden-init", ERRFD, init_oomfd, exec_path, argv...};
	 * init_oomfd's digits are G1's to write. init_path: for Landlock. */
	const char *init_path;
	int init_fd; /* the init's fd (the daemon's, never closed); -1 */
	char init_exec[32];
	char **init_argv;
	char init_oomfd[16];
	/* tier 2: the new root's mounts, planned by the parent (shared with
	 * other calls of the manifest: read-only; see sandbox/plancache.h) */
	struct wd_mount_plan *mplan;
	void *mplan_ref;
	/* the call's mount namespace (tier 2's new root, tier 1's scratch
	 * tmpfs), held from its first process's birth (G1's, or T's once
	 * it has exec'd) so that its teardown (unmounting, an RCU wait)
	 * happens when the reaper closes this, not in the tool's exit; -1
	 * if not held (the fork fallback, or both ways of holding failed) */
	int mntns;
};

/* Child side (native_child.c). */
/* Build the call's Landlock ruleset in the parent (no allocation may
 * happen between clone and exec in a threaded daemon). 0 or -errno. */
int wd_native_build_landlock(struct launch *l, struct wd_err *err);
/* Create T inside the call's v2 leaf (clone3 CLONE_INTO_CGROUP), or fork
 * when the kernel lacks it (*self_v2 = true: T joins by itself). */
pid_t wd_native_clone_into_leaf(struct launch *l, bool *self_v2);
/* T's programme for each tier, and tier 2's G1's; never return. */
void wd_native_tier1_main(struct launch *l, bool self_v2)
    __attribute__((noreturn));
void wd_native_tier2_main(struct launch *l) __attribute__((noreturn));
void wd_native_g1_main(struct launch *l, bool self_v2)
    __attribute__((noreturn));
/* Reset the daemon's OOM protection, inherited at clone, of process pid
 * (0: ourselves), which must not share the daemon's memory. Best effort:
 * 0 or -errno. */
int wd_native_oom_adj_reset(pid_t pid);

/* The spawn (native_spawn.c). */
/* Tier 1's T: like wd_native_clone_into_leaf + wd_native_tier1_main, but
 * where it can, T shares the daemon's memory until it execs (clone3
 * CLONE_VM on a stack of its own, as posix_spawn does): no
 * copy of the daemon's page tables to make and tear down again at exec.
 * The calling thread is suspended until T has exec'd or died. Returns T's
 * pid or -1 with errno. */
pid_t wd_native_spawn_tier1(struct launch *l);
/* Tier 2's G1: created by the daemon on its own memory (clone3 CLONE_VM
 * with the call's new namespaces, into the v2 leaf) where it can; else
 * C, a fork, unshares and clones G1. Like wd_native_spawn_tier1, returns
 * once G1 has exec'd warden-init or died: G1's pid (or C's), or -1 with
 * errno. */
pid_t wd_native_spawn_tier2(struct launch *l);
/* native_init.c. The init's fd, opened once a process (and *path, its
 * resolved name), or -ENOENT with a message saying where it was looked
 * for. */
int wd_native_init(const char **path, struct wd_err *err);
/* The supervising process's OOM protection, set once (root only). */
#define WD_SUPERVISOR_OOM_ADJ "-900"
void wd_native_protect_self(void);
/* G1's argv for the init (struct launch init_argv), once errp, argv and
 * exec_path are made; freed with wd_native_init_argv_free. */
void wd_native_init_argv(struct launch *l, int argc);
void wd_native_init_argv_free(struct launch *l);
/* The runtime dir traversable by a call's uid (once a process). */
void wd_native_runtime_dir_open(const char *dir);

/* Parent side while the tool runs (native_supervise.c). */
/* Supervise the call's child until the call ends (exit, timeout, OOM):
 * events, output, verdicts into res. 0 or -errno with err. */
int wd_native_supervise(struct launch *l, pid_t child, struct wd_cgroup *cg,
			struct wd_egress *eg, struct wd_bpf_route *rt,
			struct wd_result *res, struct wd_err *err);

#endif
