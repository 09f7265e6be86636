/* Internals of the BPF LSM owner shared by lsm.c (an instance loaded by
 * this process) and lsm_pin.c (the node's pinned instance). */
#ifndef WD_ENFORCE_LSM_INT_H
#define WD_ENFORCE_LSM_INT_H

#include <bpf/libbpf.h>
#include <pthread.h>

#include "enforce/lsm.h"

struct lsm_bpf;

/* Hook table: the program for each hook and how it attaches. */
struct wd_lsm_hook_def {
	const char *hook, *prog, *attach;
	bool per_cgroup; /* lsm_cgroup: attached to each call's cgroup */
};
extern const struct wd_lsm_hook_def wd_lsm_hooks[WD_LSM_H_NR];

struct wd_lsm_call;

struct wd_lsm {
	struct lsm_bpf *skel; /* this process's own load; NULL when pinned
			       * or when no program loads */
	bool pinned;	      /* fds below from bpffs (lsm_pin.c), ours */
	uint64_t owner;	      /* tag of this instance's calls (never 0) */
	struct wd_egress_map_fds fds;
	int files_fd;		  /* wd_lsm_files; -1: nothing loaded */
	int prog_fd[WD_LSM_H_NR]; /* loaded programs (-1: not) */
	struct bpf_link *links[WD_LSM_H_NR]; /* own load: global lsm/ links */
	int glink_fd[WD_LSM_H_NR]; /* pinned: the global links, held open
				    * while this process runs (-1: none) */
	struct wd_lsm_hook_status st[WD_LSM_H_NR];
	pthread_mutex_t lock;
	struct wd_lsm_call *calls;
};

/* A new instance on eg's maps, nothing loaded (every fd -1). */
struct wd_lsm *wd_lsm_new(struct wd_egress *eg);
/* Probe, load this process's own skeleton and attach the global programs
 * (l->owner set before). Honours WARDEN_LSM_DISABLE. */
void wd_lsm_load(struct wd_lsm *l);
void wd_lsm_set_unavailable(struct wd_lsm_hook_status *st, int err,
			    const char *why);
/* Delete every wd_lsm_files rule of cgid. */
void wd_lsm_sweep_files(int ffd, uint64_t cgid);

/* The node's pinned instance (lsm_pin.c): see wd_lsm_shared. */
int wd_lsm_open_pinned(struct wd_lsm **out, struct wd_egress *eg,
		       struct wd_err *err);

#endif
