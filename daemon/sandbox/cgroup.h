/* A cgroup per call: a v2 leaf (identity, BPF attachment, cgroup.kill) and
 * the memory/pids/cpu limits wherever the node has those controllers — on
 * v2, or on the v1 hierarchies of a hybrid node. Two managers behind one
 * small table (crun cgroup-internal.h style): the v2 one and the v1 one;
 * a call uses v2 for what v2 has and v1 for the rest.
 *
 * We only ever mkdir/rmdir below "warden/" in each hierarchy; the node's
 * hierarchies are never mounted, unmounted or remounted.
 */
#ifndef WD_CGROUP_H
#define WD_CGROUP_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/util.h"
#include "enforce/probe.h"

struct wd_cg_limits {
	uint64_t memory_bytes; /* 0 = none */
	uint32_t pids;	       /* 0 = none */
	double cpus;	       /* 0 = none */
};

struct wd_cgroup {
	char v2[512];		   /* leaf path in the v2 hierarchy */
	int v2_fd;		   /* O_DIRECTORY fd of the leaf */
	uint64_t v2_id;		   /* cgroup id (inode) for BPF */
	char v1[WD_CG_NCTRL][512]; /* v1 leaves, "" where unused */
	bool on_v2[WD_CG_NCTRL];   /* controller handled on v2 */
};

/* Create the leaves for call `id` and apply limits. Fails (-errno, message
 * naming the controller) if a limit is asked for and no hierarchy has its
 * controller: fail closed. */
int wd_cgroup_create(struct wd_cgroup *cg, const struct wd_cgroup_layout *lay,
		     const char *id, const struct wd_cg_limits *lim,
		     struct wd_err *err);
/* wd_cgroup_create in two steps: begin makes the v2 leaf (its id and fd
 * are set on return) and its v2 limits, and the v1 leaves (on a thread of
 * its own when `threaded` and one must be made: no spare); end waits for
 * those and returns their first error (the caller removes what was made, as
 * with any leaf: wd_cgroup_destroy). Between the two the caller may use the v2
 * leaf but not cg->v1, which the thread writes. */
struct wd_cgroup_job {
	struct wd_aside t;
	bool running;
	struct wd_cgroup *cg;
	const struct wd_cgroup_layout *lay;
	struct wd_cg_limits lim;
	char id[64];
	unsigned mask; /* the v1 controllers */
	int rc;
	struct wd_err err;
};
int wd_cgroup_create_begin(struct wd_cgroup *cg,
			   const struct wd_cgroup_layout *lay, const char *id,
			   const struct wd_cg_limits *lim, bool threaded,
			   struct wd_cgroup_job *job, struct wd_err *err);
int wd_cgroup_create_end(struct wd_cgroup_job *job, struct wd_err *err);
/* Move `pid` into every leaf. */
int wd_cgroup_enter(struct wd_cgroup *cg, pid_t pid);
/* Move the calling (single-threaded) process into the v1 leaves, and into
 * the v2 leaf too if `v2` (when it was not born there by clone3
 * CLONE_INTO_CGROUP). Between fork and exec: no allocation. */
int wd_cgroup_enter_self(struct wd_cgroup *cg, bool v2);
/* Kill every process in the call (cgroup.kill on v2, else SIGKILL each pid
 * listed, repeated until empty). */
int wd_cgroup_kill(struct wd_cgroup *cg);
/* Whether any process remains. */
bool wd_cgroup_populated(struct wd_cgroup *cg);
/* Wait (poll on cgroup.events, no naps) until no process remains:
 * 0, or -ETIMEDOUT after timeout_ms. */
int wd_cgroup_wait_empty(struct wd_cgroup *cg, int timeout_ms);
/* OOM kills counted by the memory controller since creation. */
uint64_t wd_cgroup_oom_kills(struct wd_cgroup *cg);
/* A leaf of a call whose supervisor is gone (the start-up sweep): kill
 * every process left in it, wait for them, remove it. 0 or -EBUSY. */
int wd_cgroup_remove_dir(const char *dir);
/* Kill what remains, wait for it, remove the leaves. Safe to call twice. */
void wd_cgroup_destroy(struct wd_cgroup *cg);
/* wd_cgroup_destroy for a call whose v2 leaf a kill and a wait found empty
 * already (nothing of the call can enter it again: the leaf is root's, and
 * every process of the call is in it): the leaves removed without killing
 * and waiting once more. true when the v2 leaf is gone. */
bool wd_cgroup_remove_emptied(struct wd_cgroup *cg);
/* Call fn with the mount point of every cgroup v1 hierarchy of this
 * node (all of them: runsc makes leaves in blkio, cpuset, devices, ...). */
void wd_cgroup_each_v1(void (*fn)(const char *mp, void *arg), void *arg);
/* A tier-3 call's runsc makes warden/ parents in every v1 hierarchy: this
 * process removes those too at its exit (when empty). Called before. */
void wd_cgroup_note_runsc_parents(void);
/* `parent` (a warden/ parent this process made or used) is not removed at
 * this process's exit: it holds objects kept for the boot (the v2
 * warden/keep-warm, the egress keep-warm links: enforce/egress_keep.c). */
void wd_cgroup_parent_keep(const char *parent);
/* <v2 root>/warden/keep-warm, into out: the cgroup the egress keep-warm
 * links hang on (enforce/egress_keep.c). A sibling of the call leaves that
 * holds no process: on the leaves' parent, every connect, sendmsg and bind
 * of every call would run an allow-all program too. Made if missing by
 * this process's first call (then removed at its exit, unless kept:
 * wd_cgroup_parents_keep; links of others on it go defunct then, which
 * costs their next call a relink, never a verdict); later calls only name
 * it. The sweep passes it by (no call id). 0 or -errno. */
int wd_cgroup_keep_dir(const struct wd_cgroup_layout *lay, char *out, size_t n);
/* wd_cgroup_parent_keep of the v2 warden/ and its keep-warm/, and of every
 * v1 warden/ cg has a leaf under: kept for the boot beside the egress
 * keep-warm links (a
 * one-shot call would otherwise make and remove memory/ and pids/ warden/
 * each time: 0.12 ms a call, measured). */
void wd_cgroup_parents_keep(const struct wd_cgroup_layout *lay,
			    const struct wd_cgroup *cg);
/* Spare v1 leaves (cgroup.c): made ahead, off the caller's path, for the
 * controllers in v1_mask (bit = enum wd_cg_ctrl) and renamed to a call's
 * id by wd_cgroup_create. Removed by wd_cgroup_spares_clear (run at exit
 * too; no more are made after it). */
void wd_cgroup_spares_fill(const struct wd_cgroup_layout *lay,
			   unsigned v1_mask);
void wd_cgroup_spares_clear(void);
int wd_cgroup_spares_count(int c);

#endif
