/* Kernel feature probe: what this node can enforce, and why not when it
 * cannot. Filled once per process by wd_probe() (cached); the sandbox uses it
 * to refuse calls whose constraints cannot be enforced (fail closed) and
 * `warden status` prints it.
 */
#ifndef WD_PROBE_H
#define WD_PROBE_H

#include <stdbool.h>
#include <stdint.h>

enum wd_cg_ctrl { WD_CG_MEMORY, WD_CG_PIDS, WD_CG_CPU, WD_CG_NCTRL };

struct wd_cgroup_layout {
	bool hybrid;             /* v1 controllers + a v2 hierarchy */
	char v2_root[256];       /* "/sys/fs/cgroup" or "/sys/fs/cgroup/unified" */
	bool v2_ctrl[WD_CG_NCTRL];     /* controller available on v2 */
	char v1_root[WD_CG_NCTRL][256]; /* v1 mount of the controller, "" if none */
};

struct wd_features {
	char kernel_release[65];
	bool btf;                  /* /sys/kernel/btf/vmlinux */
	char lsm_list[256];        /* active LSMs, "" if unreadable */
	bool bpf_in_lsm_list;
	int trampoline_err;        /* 0 if an lsm/fentry program loads, else -errno */
	int cgroup_sockaddr_err;   /* 0 if cgroup/connect4 loads, else -errno */
	int ringbuf_err;           /* 0 if a BPF ring buffer can be created */
	int landlock_abi;          /* <= 0: -errno from the ABI query */
	bool seccomp_notify;       /* SECCOMP_RET_USER_NOTIF usable */
	bool seccomp_notify_continue; /* SECCOMP_USER_NOTIF_FLAG_CONTINUE */
	bool seccomp_addfd;
	bool userns;               /* user namespaces creatable */
	int io_uring_disabled;     /* kernel.io_uring_disabled, -1 unknown */
	bool audit;                /* audit netlink readable */
	struct wd_cgroup_layout cg;
	bool runsc;                /* runsc found and runs */
	char runsc_path[128];
	char runsc_version[64];
	char runsc_platform[16];   /* platform that works here, "" if none */
};

/* Probe once (cached for the process). Never fails: unknown things are
 * reported as unavailable with their errno. */
const struct wd_features *wd_probe(void);
/* Only the cgroup layout (cheap; no BPF loads). 0 or -errno. */
int wd_cgroup_layout_detect(struct wd_cgroup_layout *out);

#endif
