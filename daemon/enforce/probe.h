/* Kernel feature probe: what this node can enforce, and why not when it
 * cannot. Filled once per process by wd_probe() (cached); the sandbox uses it
 * to refuse calls whose constraints cannot be enforced (fail closed) and
 * `warden status` prints it.
 *
 * Every "_err" field is 0 when the feature works and -errno from the probe
 * that failed otherwise (so a reason can always be printed).
 */
#ifndef WD_PROBE_H
#define WD_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum wd_cg_ctrl { WD_CG_MEMORY, WD_CG_PIDS, WD_CG_CPU, WD_CG_NCTRL };

struct wd_cgroup_layout {
	bool hybrid;	   /* v1 controllers + a v2 hierarchy */
	char v2_root[256]; /* "/sys/fs/cgroup" or "/sys/fs/cgroup/unified" */
	bool v2_ctrl[WD_CG_NCTRL]; /* controller available on v2 */
	char v1_root[WD_CG_NCTRL]
		    [256];	  /* v1 mount of the controller, "" if none */
	char v2_controllers[256]; /* the v2 root's cgroup.controllers */
	int n_v1;		  /* v1 hierarchies with a controller */
};

/* Namespaces a tier-2 sandbox unshares; probed one by one. */
enum wd_ns { WD_NS_MNT, WD_NS_PID, WD_NS_IPC, WD_NS_UTS, WD_NS_NET, WD_NS_N };

struct wd_features {
	char kernel_release[65];
	char machine[16];   /* uname -m */
	bool btf;	    /* /sys/kernel/btf/vmlinux */
	int btf_err;	    /* loading vmlinux BTF through libbpf */
	char lsm_list[256]; /* active LSMs, "" if unreadable */
	int lsm_err;
	/* where lsm_list came from: "securityfs", "securityfs (private mount
	 * namespace)", "/proc/cmdline lsm=" (requested, not necessarily
	 * active) or "" */
	char lsm_source[48];
	bool bpf_in_lsm_list;
	int trampoline_err;	 /* 0 if an fentry program loads, else -errno */
	int lsm_prog_err;	 /* 0 if an lsm/file_open program loads */
	int cgroup_sockaddr_err; /* 0 if cgroup/connect4 loads, else -errno */
	int ringbuf_err;	 /* 0 if a BPF ring buffer can be created */
	int landlock_abi;	 /* <= 0: -errno from the ABI query */
	int landlock_errata;	 /* bitmask, or -errno (before ABI 7) */
	bool seccomp_filter;	 /* seccomp-bpf with RET_ERRNO/KILL_PROCESS */
	int seccomp_filter_err;
	bool seccomp_notify; /* SECCOMP_RET_USER_NOTIF usable */
	int seccomp_notify_err;
	bool seccomp_notify_continue; /* SECCOMP_USER_NOTIF_FLAG_CONTINUE */
	int seccomp_continue_err;
	bool seccomp_addfd; /* SECCOMP_IOCTL_NOTIF_ADDFD */
	int seccomp_addfd_err;
	uint16_t seccomp_notif_sizes[3]; /* notif, resp, data */
	bool userns;			 /* user namespaces creatable */
	int userns_err;
	int ns_err[WD_NS_N];   /* unshare() of each tier-2 namespace */
	int io_uring_disabled; /* kernel.io_uring_disabled, -1 unknown */
	int io_uring_err;
	/* net.ipv4.ping_group_range of the host's network namespace: the
	 * gids that may open ping sockets ("1 0": none); -1 -1 unknown */
	long ping_gid_lo, ping_gid_hi;
	int ping_err;
	bool audit; /* audit netlink readable */
	int audit_err;
	int audit_enabled; /* AUDIT_GET: 0 off, 1 on, 2 locked; -1 unknown */
	int cg_err;	   /* wd_cgroup_layout_detect() */
	struct wd_cgroup_layout cg;
	bool runsc; /* runsc found and `runsc --version` runs */
	int runsc_err;
	char runsc_path[128];
	char runsc_version[64];
	char runsc_platform[16]; /* platform that works here, "" if none */
	bool runsc_tested;	 /* a `runsc do /bin/true` result is known */
	bool runsc_cached;	 /* ... and it came from the cache file */
	int runsc_run_err;	 /* 0 ok, -ETIMEDOUT, -EIO (non-zero exit) */
	char runsc_note[160];	 /* last stderr line of a failed run */
	bool runsc_oci_seccomp;	 /* `runsc flags` lists -oci-seccomp */
	/* the boot-stable probes came from the per-boot cache file */
	bool from_cache;
};

/* What tiers 1 and 2 need (everything but runsc, whose fields stay
 * zero), probed once per process. Never fails: unknown things are reported
 * as unavailable with their errno. Thread-safe. As root, the boot-stable
 * probes (kernel, BTF and BPF loads, LSM list, Landlock, seccomp,
 * namespaces) come from the per-boot cache file (wd_probe_cache_read) when
 * it can be trusted, else they run and the file is rewritten; the cgroup
 * layout and audit are read afresh, but by a one-shot call, which takes
 * what another one found (wd_probe_one_call). io_uring and ping are not
 * read here (-1, err -EAGAIN): wd_probe_full reads them; nor, by a one-shot
 * call that found the cache, the namespace answers (-EAGAIN). */
const struct wd_features *wd_probe(void);
/* wd_probe()'s audit fields (audit, audit_enabled, audit_err) hold its
 * answer only after this: the probe asks AUDIT_GET on a thread of its own
 * (the kernel starts a thread to answer each request, probe.c) and this
 * waits for that answer. Until then audit_err is -EINPROGRESS.
 * Thread-safe; wd_probe_tier3/full have it settled already. */
void wd_probe_audit_settle(void);
/* When wd_probe()'s audit answer (audit_enabled) was asked
 * (wd_now_ns), or 0. */
uint64_t wd_probe_audit_at_ns(void);
/* wd_probe() plus runsc: its path and version (`runsc --version`), and the
 * platform from the cache file WD_PROBE_RUNSC_CACHE, never by running a
 * sandbox. Tier 3 only. Cached for the process, thread-safe. */
const struct wd_features *wd_probe_tier3(void);
/* wd_probe_tier3() plus a real `runsc --platform=ptrace --network=none do
 * /bin/true` (~0.2 s) unless the cache file keyed by runsc's path, size and
 * mtime already holds the answer, and io_uring's and ping's sysctls (read
 * afresh). Cached for the process, thread-safe. */
const struct wd_features *wd_probe_full(void);

/* The per-boot cache (probe_cache.c). Its key: a probe made under another
 * boot, kernel or warden build is never used, nor one made under other
 * namespace sysctls but by a one-shot call, which takes none of its
 * namespace answers (wd_probe_key_base). */
struct wd_probe_key {
	char boot_id[40]; /* /proc/sys/kernel/random/boot_id */
	char release[65]; /* uname -r */
	char build[96];	  /* "gnu:<build-id>" of the executable, or its
			     identity on disk */
	char sysctl[128]; /* user.max_{user,mnt,pid,ipc,uts,net}_namespaces */
};
/* <runtime dir>/probe-kernel. 0 or -ENAMETOOLONG. */
int wd_probe_cache_path(char *out, size_t len);
/* This boot's, kernel's, build's and namespace sysctls' key. 0 or
 * -errno. */
int wd_probe_key_now(struct wd_probe_key *k);
/* Its boot, kernel and build only (sysctl left empty), and the sysctls
 * added to such a key: a one-shot call never reads the namespace answers
 * (only `warden status` and the fleet's node report show them), so it
 * does not read the six sysctls either (~50 us) unless it probes and
 * writes the cache. 0 or -errno. */
int wd_probe_key_base(struct wd_probe_key *k);
int wd_probe_key_sysctls(struct wd_probe_key *k);
/* The cached features if the file can be trusted: 0; -EPERM if it is not
 * a regular root-owned file that only root can write (a symlink is
 * refused, not followed); -EINVAL if it is not a whole cache of this
 * format (garbage, torn, checksum); -ESTALE if its key is not `k` (a key
 * without sysctls, wd_probe_key_base's, matches on the rest); -ENOENT
 * etc. from open. */
int wd_probe_cache_read(const char *path, const struct wd_probe_key *k,
			struct wd_features *out);
/* Write it atomically (temp file + rename, mode 0644 root:root), making
 * the directory if needed. 0 or -errno. */
int wd_probe_cache_write(const char *path, const struct wd_probe_key *k,
			 const struct wd_features *f);
/* The boot, kernel and build of the key this process's probe was read or
 * written under (its sysctl empty, whichever the probe read: what the
 * seccomp programs' cache depends on), or NULL when the probe is not
 * cached (not root, no key). After wd_probe(). */
const struct wd_probe_key *wd_probe_cache_key(void);
/* The files of the per-boot caches (this one, the seccomp programs':
 * seccomp_cache.c). Both first open the directory that holds the file
 * (a symlink in its place is refused, not followed) and check it: root's,
 * writable by root alone, else -EPERM; the file is then opened, written
 * and renamed relative to that directory's fd. Read: a regular file,
 * root's, that only root can write (a symlink is refused, not followed),
 * of at most max bytes, whole: 0 with *out (the caller's to free) and
 * *len; -EPERM (not such a file or directory), -EINVAL (empty, too big, or
 * changed while read), -ENOENT etc. from open. Write: atomically (temp
 * file + rename, mode 0644 root:root), making the directory if needed;
 * 0 or -errno. */
int wd_root_file_read(const char *path, void **out, size_t *len, size_t max);
int wd_root_file_write(const char *path, const void *buf, size_t len);
/* The audit answer one-shot calls share (probe_cache.c): one asked less
 * than WD_AUDIT_MEMO_NS ago, in <runtime dir>/probe-audit, trusted as the
 * probe cache is. Read: 0 with f's audit fields and *at_ns (when it was
 * asked); -ESTALE (older, another boot's), -EINVAL (torn, not ours), or
 * wd_root_file_read's errors. Write: in place (no temp file; a file there
 * that is not a regular one of root's with one link is left alone,
 * -EPERM), 0 or -errno. Forget: removed, by warden when it changes the
 * audit state itself (landlock_audit.c); a change made by anyone else
 * (auditctl) is seen once the answer is a second old. */
#define WD_AUDIT_MEMO_NS 1000000000ull
int wd_probe_audit_memo_read(const char *boot_id, uint64_t now,
			     struct wd_features *f, uint64_t *at_ns);
int wd_probe_audit_memo_write(const char *boot_id, const struct wd_features *f,
			      uint64_t at_ns);
void wd_probe_audit_memo_forget(void);
/* Before the first wd_probe(): this process is one call (`warden exec`).
 * It takes the audit answer shared by such calls when it is fresh
 * (wd_probe_audit_memo_read) and shares its own, and takes the cgroup
 * layout from the file another one left while every mount it names is
 * still the same mount (wd_cgroup_layout_cached). It looks for the probe
 * cache without the namespace sysctls, and its wd_probe() then holds no
 * namespace answers (userns_err, ns_err: -EAGAIN, "not asked"): nothing of
 * a call decides on them. Everything else (wardend, `warden status`)
 * always asks the kernel and reads mountinfo. */
void wd_probe_one_call(void);
/* The layout wd_cgroup_layout_detect found, from <runtime
 * dir>/probe-cgroup (a file of root's, as the probe cache, written by
 * this boot and build) when each mount it names is still mounted there as
 * the very same mount (statx STATX_MNT_ID_UNIQUE, 6.8: never reused within
 * a boot; the mount namespace's copy is another mount) and the v2 root's
 * cgroup.controllers reads the same; else detected and the file
 * rewritten. What it does not name (n_v1, hybrid: only reported) is as it
 * was when written. A kernel without unique mount ids: always detected.
 * 0 or -errno. */
int wd_cgroup_layout_cached(const struct wd_probe_key *k,
			    struct wd_cgroup_layout *out);
/* Only the cgroup layout (cheap; no BPF loads). 0 or -errno. */
int wd_cgroup_layout_detect(struct wd_cgroup_layout *out);
/* Same, from a mountinfo text and a reader of the v2 root's
 * cgroup.controllers (for tests); `controllers` may be NULL to read the
 * file. */
int wd_cgroup_layout_parse(const char *mountinfo, const char *controllers,
			   struct wd_cgroup_layout *out);

const char *wd_cg_ctrl_name(enum wd_cg_ctrl c);
const char *wd_ns_name(enum wd_ns n);

#define WD_PROBE_RUNSC_CACHE "/run/warden/probe-runsc"

/* Can this node run tier `tier` (1-3) at all (probe_tiers.c; `warden
 * status` and the fleet's capacity per tier both ask here)? Tier 1 always
 * (a call whose constraint lacks its mechanism is refused per call); tier
 * 2 needs the namespaces a container unshares (net aside: an empty allow
 * list makes its own later); tier 3 a runsc that ran a sandbox on some
 * platform (wd_probe_full). false with why (a sentence) when not. */
bool wd_tier_runs(const struct wd_features *f, int tier, char *why, size_t len);

#endif
