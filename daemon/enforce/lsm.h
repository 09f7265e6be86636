/* BPF LSM enforcement (bpf/lsm.bpf.c): probe, load what this kernel allows,
 * and judge each tool call's processes by its cgroup id.
 *
 * Probe and fall back: wd_lsm_open() first tries to load the whole object;
 * if the kernel refuses, it tries each program alone, switches off the ones
 * that cannot load (bpf_program__set_autoload(prog, false)) and loads the
 * rest. Each hook then reports "active" or "unavailable" with the errno.
 * If `bpf` is not in the kernel's active LSM list (read by wd_probe() from
 * securityfs, mounted in a private mount namespace when the node has not
 * mounted it), the programs would load and attach but the kernel would never
 * call them: every hook is reported unavailable (-EOPNOTSUPP) and nothing is
 * attached. The other mechanisms (Landlock, seccomp, cgroup sock_addr BPF)
 * hold their lines either way; a manifest with `require: [bpf_lsm]` is
 * refused by the sandbox unless wd_lsm_active().
 *
 * The LSM object shares the per-call policy, the egress allow-list, the
 * event ring buffer and the loss counters of the egress object
 * (daemon/enforce/egress.h, bpf_map__reuse_fd before load): denials arrive
 * on the same stream (wd_egress_consume) with source "bpf_lsm".
 *
 * Per call:
 *   wd_egress_attach(eg, cgfd, cgid, ...);      // creates the policy entry
 *   ... call's processes set up their namespaces and mounts ...
 *   wd_lsm_begin(l, cgfd, cgid, manifest, err); // just before the tool's
 *                                               // execve: from here on,
 *                                               // mounts, bpf(), files
 *                                               // outside the manifest ...
 *                                               // are denied
 *   ... tool runs ...
 *   wd_lsm_end(l, cgid);                        // before wd_egress_detach
 *
 * Errors: 0 or -errno, with a message in `err` where the signature has one.
 */
#ifndef WD_ENFORCE_LSM_H
#define WD_ENFORCE_LSM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"
#include "enforce/egress.h"
#include "policy/manifest.h"

struct wd_lsm;

enum wd_lsm_hook {
	WD_LSM_H_SOCKET_CREATE,
	WD_LSM_H_SOCKET_CONNECT,
	WD_LSM_H_FILE_OPEN,
	WD_LSM_H_BPRM_CHECK,
	WD_LSM_H_PTRACE,
	WD_LSM_H_TASK_KILL,
	WD_LSM_H_BPF,
	WD_LSM_H_SB_MOUNT,
	WD_LSM_H_MOVE_MOUNT,
	WD_LSM_H_KMOD_REQUEST,
	WD_LSM_H_NR,
};

struct wd_lsm_hook_status {
	const char *hook;   /* LSM hook name, e.g. "file_open" */
	const char *attach; /* "lsm", "lsm.s" (sleepable) or "lsm_cgroup" */
	bool active;	    /* loaded, attached (or attachable per call) and
			     * bpf is in the active LSM list */
	int err;	    /* 0 when active, else -errno of the failure */
	char reason[160];   /* "" when active, else why not, with the errno */
};

/* Probe, load and attach the global (lsm/) programs, sharing eg's maps.
 * Never fails because hooks are unavailable: that is reported per hook.
 * Fails (-errno) only on allocation or object-open errors. */
int wd_lsm_open(struct wd_lsm **out, struct wd_egress *eg, struct wd_err *err);
/* The process-wide instance on top of wd_egress_shared(). Where that is
 * the node's pinned egress instance (a one-shot `warden exec`), the node's
 * pinned LSM instance (lsm_pin.c: loaded once per boot and build, its
 * global programs attached for the boot through pinned links, the
 * lsm_cgroup programs attached per call), unless WARDEN_LSM_DISABLE is set
 * (a load of this process's own, without the hooks it names). NULL (with
 * err) if the egress object cannot load, or if the LSM pins are not ours
 * or cannot be made (the call is refused, never run without them). Never
 * closed. */
struct wd_lsm *wd_lsm_shared(struct wd_err *err);
/* Ends every call and closes the instance's links. The kernel detaches an
 * lsm/ program only when the last fd of its link is closed, and a process
 * forked while `l` was open holds copies (they are O_CLOEXEC, so only until
 * it execs): until then the programs stay attached, and judge nothing but
 * the calls `l` armed (owner tag, bpf/lsm_policy.h), i.e. nothing. The
 * pinned instance's global links stay attached (their pins hold them)
 * until the pins go. */
void wd_lsm_close(struct wd_lsm *l);

/* Per-hook state of `l`, WD_LSM_H_NR entries. */
void wd_lsm_status(const struct wd_lsm *l,
		   struct wd_lsm_hook_status out[WD_LSM_H_NR]);
/* Number of active hooks of `l` (WD_LSM_H_NR = all). */
int wd_lsm_n_active(const struct wd_lsm *l);

/* For `warden status`: the shared instance's hooks (opening it on first
 * use). Returns WD_LSM_H_NR. If the shared egress object cannot load, every
 * hook is unavailable with its errno. */
int wd_lsm_hook_status(struct wd_lsm_hook_status out[WD_LSM_H_NR]);
/* Every hook is active on this node (the shared instance): what
 * `require: [bpf_lsm]` asks for. */
bool wd_lsm_active(void);

/* Start judging the call in cgroup `cgid` (cgroup_fd: its v2 directory) by
 * manifest `m`: files (filesystem.read/write/exec, by inode, plus the
 * character devices every program needs: /dev/null, zero, full, random,
 * urandom), exec, socket families (unix, inet, inet6 + socket_families),
 * connect (egress allow-list; unix only if socket_families names "unix"),
 * and ptrace/kill outside the cgroup, bpf(), mounts and module requests.
 * Listed paths that do not exist grant nothing. Tier 3 (gVisor) calls get
 * nothing from the LSM (runsc itself mounts and ptraces): returns 0 with
 * nothing armed. With no active hook, returns 0 and arms nothing (the
 * sandbox checks wd_lsm_active() against `require`). On failure nothing
 * stays armed. -EEXIST if cgid is already armed. */
int wd_lsm_begin(struct wd_lsm *l, int cgroup_fd, uint64_t cgid,
		 const struct wd_manifest *m, struct wd_err *err);
/* Two-phase form for sandboxes whose own setup runs inside the call's
 * cgroup and needs what the LSM denies (tier 2: mounts, bpf() for
 * wd_lsm_allow_fd): wd_lsm_prepare() does everything wd_lsm_begin() does
 * except switching the hooks on; the sandbox's child, once its setup is
 * done and before it forks or execs the tool, calls wd_lsm_arm(). Both
 * wd_lsm_arm() and wd_lsm_allow_fd() are fork-safe (fd operations only, no
 * lock, no allocation). wd_lsm_end() disarms either form. */
int wd_lsm_prepare(struct wd_lsm *l, int cgroup_fd, uint64_t cgid,
		   const struct wd_manifest *m, struct wd_err *err);
/* -ENOENT if cgid was not prepared by `l`. */
int wd_lsm_arm(struct wd_lsm *l, uint64_t cgid);
/* Grant `access` (WD_LSM_READ|WRITE|EXECUTE from bpf/lsm_policy.h) on the
 * inode of `fd` and everything beneath it to the call of cgid: for scratch
 * directories, /proc, /dev/shm the sandbox creates. Callable before or
 * after arming (after arming only from outside the call: the bpf hook
 * denies bpf() inside it). */
int wd_lsm_allow_fd(struct wd_lsm *l, uint64_t cgid, int fd, unsigned access);
/* Disarm: detach the call's links, delete its file rules, clear its LSM
 * flags. Safe for a cgid never armed (-ENOENT). */
int wd_lsm_end(struct wd_lsm *l, uint64_t cgid);

const char *wd_lsm_hook_name(enum wd_lsm_hook h);

#endif
