// SPDX-License-Identifier: GPL-2.0
/* BPF LSM hooks per tool call, keyed by the call's cgroup v2 id on the
 * shared per-call policy (bpf/lib/policy.h + bpf/lsm_policy.h).
 *
 * Two attach styles:
 *  - lsm_cgroup/ for the socket hooks: attached by daemon/enforce/lsm.c to
 *    each call's cgroup, so no other process on the node pays for them on
 *    its hottest path; the kernel selects the program by the socket's (or
 *    the current task's, for socket_create) cgroup. Return 1 = allow,
 *    0 = deny with EPERM.
 *  - lsm/ (global) for the rest: attached once; the first thing each
 *    program does is one hash lookup of the current cgroup id, and a task
 *    outside every call returns 0 at once. Return 0 = allow, -errno = deny.
 *    file_open and bprm_check_security are sleepable (lsm.s/) only so that
 *    a denial can report its path with bpf_d_path().
 *
 * Audit mode (WD_POL_AUDIT): every would-be denial is allowed and reported
 * with verdict "audited". A full ring buffer is counted (wd_loss) and never
 * turns a denial into an allow.
 *
 * Subject: bpf_get_current_cgroup_id() is the v2 cgroup of the task making
 * the request. A task cannot leave its call cgroup (no write access to
 * cgroupfs, no CAP_SYS_ADMIN, no mount), so the key cannot be forged.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "lib/maps.h"
#include "lsm_policy.h"

#define EPERM	  1
#define AF_UNSPEC 0
#define AF_UNIX	  1
#define AF_INET	  2
#define AF_INET6  10

#define FMODE_READ  0x1
#define FMODE_WRITE 0x2
/* f_flags bit of files the kernel opens for execve/uselib and for ELF
 * interpreters (f_mode gets no exec bit at open time; Landlock tests the
 * same flag) */
#define __FMODE_EXEC 0x20

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WD_LSM_MAX_FILES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct wd_lsm_file_key);
	__type(value, __u32); /* WD_LSM_READ | WRITE | EXECUTE */
} wd_lsm_files SEC(".maps");

/* Tag of the instance these programs belong to (bpf/lsm_policy.h,
 * WD_LSM_SLOT_OWNER); never 0. Set by daemon/enforce/lsm.c before load. */
const volatile __u64 wd_lsm_owner = 0;

/* LSM flags of a call armed by this instance, 0 for any other call. */
static __always_inline __u64 lsm_flags(const struct wd_call_policy *p)
{
	if (p->reserved[WD_LSM_SLOT_OWNER] != wd_lsm_owner)
		return 0;
	return p->reserved[WD_LSM_SLOT];
}

/* LSM flags of the current task's call, 0 if it is not in one. */
static __always_inline __u64 call_flags(__u64 cgid, bool *audit)
{
	struct wd_call_policy *p = bpf_map_lookup_elem(&wd_policy, &cgid);
	if (!p)
		return 0;
	__u64 f = lsm_flags(p);
	if (!(f & WD_LSM_ON))
		return 0;
	*audit = p->flags & WD_POL_AUDIT;
	return f;
}

static __always_inline struct wd_kevent *deny_event(__u16 kind, bool audit)
{
	return wd_event_reserve(kind, audit ? WD_KEV_AUDITED : WD_KEV_DENIED,
				audit ? 0 : EPERM);
}

/* lsm/ verdict */
static __always_inline int lsm_ret(bool audit)
{
	return audit ? 0 : -EPERM;
}

/* lsm_cgroup/ verdict */
static __always_inline int cg_ret(bool audit)
{
	return audit ? 1 : 0;
}

/* ---- files -------------------------------------------------------------- */

/* Walk from the opened dentry to the root of the task's view, crossing mount
 * points, and union the access granted to each (dev, ino) on the way.
 * Races: a concurrent rename can move a dentry while it is read; the walk
 * reads with probe-read semantics (never faults) and a chain it could not
 * complete within WD_LSM_MAX_DEPTH is denied, so a race can only produce a
 * denial or the verdict for a path the file really had during the walk. */
static __always_inline bool path_allowed(__u64 cgid, struct dentry *d,
					 struct vfsmount *vm, __u32 need)
{
	struct mount *m = (void *)vm - bpf_core_field_offset(struct mount, mnt);
	struct wd_lsm_file_key k = {.cgid = cgid};
	__u32 have = 0;

	for (int i = 0; i < WD_LSM_MAX_DEPTH; i++) {
		struct inode *ino = BPF_CORE_READ(d, d_inode);
		if (ino) {
			k.ino = BPF_CORE_READ(ino, i_ino);
			k.dev = BPF_CORE_READ(ino, i_sb, s_dev);
			__u32 *acc = bpf_map_lookup_elem(&wd_lsm_files, &k);
			if (acc) {
				have |= *acc;
				if ((have & need) == need)
					return true;
			}
		}
		struct dentry *mroot = BPF_CORE_READ(m, mnt.mnt_root);
		if (d == mroot) {
			struct mount *parent = BPF_CORE_READ(m, mnt_parent);
			if (parent == m)
				return false; /* the root: nothing granted */
			d = BPF_CORE_READ(m, mnt_mountpoint);
			m = parent;
			continue;
		}
		struct dentry *up = BPF_CORE_READ(d, d_parent);
		if (up == d)
			return false;
		d = up;
	}
	return false;
}

SEC("lsm.s/file_open")
int BPF_PROG(wd_file_open, struct file *file)
{
	bool audit = false;
	__u64 cgid = bpf_get_current_cgroup_id();
	__u64 f = call_flags(cgid, &audit);
	if (!(f & WD_LSM_FILES))
		return 0;

	unsigned int mode = file->f_mode;
	bool exec = file->f_flags & __FMODE_EXEC;
	__u32 need = 0;
	if (exec) /* the binary or its ELF interpreter, for execve */
		need = WD_LSM_EXECUTE;
	else {
		if (mode & FMODE_READ)
			need |= WD_LSM_READ;
		if (mode & FMODE_WRITE)
			need |= WD_LSM_WRITE;
	}
	if (!need ||
	    path_allowed(cgid, file->f_path.dentry, file->f_path.mnt, need))
		return 0;

	/* An exec refused here is reported as an exec: it is the same
	 * decision bprm_check_security would make one step later. */
	struct wd_kevent *e =
	    deny_event(exec ? WD_KEV_BPRM_CHECK : WD_KEV_FILE_OPEN, audit);
	if (e) {
		e->arg = need;
		e->arg2 = file->f_flags;
		bpf_d_path((struct path *)&file->f_path, e->path,
			   sizeof(e->path));
		wd_event_submit(e);
	}
	return lsm_ret(audit);
}

SEC("lsm.s/bprm_check_security")
int BPF_PROG(wd_bprm_check, struct linux_binprm *bprm)
{
	bool audit = false;
	__u64 cgid = bpf_get_current_cgroup_id();
	__u64 f = call_flags(cgid, &audit);
	/* With file_open active every exec (binary, script interpreter, ELF
	 * interpreter) was already judged when the kernel opened it with
	 * __FMODE_EXEC: judging again here would report one decision twice.
	 * This hook is the fallback for a kernel where file_open cannot load.
	 */
	if (!(f & WD_LSM_EXEC) || (f & WD_LSM_FILES))
		return 0;

	struct file *file = bprm->file;
	if (path_allowed(cgid, file->f_path.dentry, file->f_path.mnt,
			 WD_LSM_EXECUTE))
		return 0;

	struct wd_kevent *e = deny_event(WD_KEV_BPRM_CHECK, audit);
	if (e) {
		bpf_d_path((struct path *)&file->f_path, e->path,
			   sizeof(e->path));
		wd_event_submit(e);
	}
	return lsm_ret(audit);
}

/* ---- processes outside the call --------------------------------------------
 */

static __always_inline __u64 task_cgid(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(wd_ptrace, struct task_struct *child, unsigned int mode)
{
	bool audit = false;
	__u64 cgid = bpf_get_current_cgroup_id();
	if (!(call_flags(cgid, &audit) & WD_LSM_ON))
		return 0;
	if (task_cgid(child) == cgid)
		return 0;
	struct wd_kevent *e = deny_event(WD_KEV_PTRACE, audit);
	if (e) {
		e->arg = BPF_CORE_READ(child, tgid);
		e->arg2 = mode;
		wd_event_submit(e);
	}
	return lsm_ret(audit);
}

SEC("lsm/task_kill")
int BPF_PROG(wd_task_kill, struct task_struct *p, struct kernel_siginfo *info,
	     int sig, const struct cred *cred)
{
	bool audit = false;
	__u64 cgid = bpf_get_current_cgroup_id();
	if (!(call_flags(cgid, &audit) & WD_LSM_ON))
		return 0;
	if (task_cgid(p) == cgid)
		return 0;
	struct wd_kevent *e = deny_event(WD_KEV_TASK_KILL, audit);
	if (e) {
		e->arg = BPF_CORE_READ(p, tgid);
		e->arg2 = sig;
		wd_event_submit(e);
	}
	return lsm_ret(audit);
}

/* ---- kernel surfaces a tool never needs
 * -------------------------------------- */

SEC("lsm/bpf")
int BPF_PROG(wd_bpf, int cmd, union bpf_attr *attr, unsigned int size)
{
	bool audit = false;
	if (!(call_flags(bpf_get_current_cgroup_id(), &audit) & WD_LSM_ON))
		return 0;
	struct wd_kevent *e = deny_event(WD_KEV_BPF, audit);
	if (e) {
		e->arg = cmd;
		wd_event_submit(e);
	}
	return lsm_ret(audit);
}

SEC("lsm/sb_mount")
int BPF_PROG(wd_sb_mount, const char *dev_name, const struct path *path,
	     const char *type, unsigned long flags, void *data)
{
	bool audit = false;
	if (!(call_flags(bpf_get_current_cgroup_id(), &audit) & WD_LSM_ON))
		return 0;
	struct wd_kevent *e = deny_event(WD_KEV_SB_MOUNT, audit);
	if (e) {
		e->arg2 = (__u32)flags;
		if (dev_name)
			bpf_probe_read_kernel_str(e->path, sizeof(e->path),
						  dev_name);
		wd_event_submit(e);
	}
	return lsm_ret(audit);
}

SEC("lsm/move_mount")
int BPF_PROG(wd_move_mount, const struct path *from_path,
	     const struct path *to_path)
{
	bool audit = false;
	if (!(call_flags(bpf_get_current_cgroup_id(), &audit) & WD_LSM_ON))
		return 0;
	struct wd_kevent *e = deny_event(WD_KEV_MOVE_MOUNT, audit);
	if (e)
		wd_event_submit(e);
	return lsm_ret(audit);
}

SEC("lsm/kernel_module_request")
int BPF_PROG(wd_kmod_request, char *kmod_name)
{
	bool audit = false;
	if (!(call_flags(bpf_get_current_cgroup_id(), &audit) & WD_LSM_ON))
		return 0;
	struct wd_kevent *e = deny_event(WD_KEV_KMOD_REQUEST, audit);
	if (e) {
		bpf_probe_read_kernel_str(e->path, sizeof(e->path), kmod_name);
		wd_event_submit(e);
	}
	return lsm_ret(audit);
}

/* ---- sockets (lsm_cgroup: attached to the call's cgroup only)
 * ---------------- */

SEC("lsm_cgroup/socket_create")
int BPF_PROG(wd_socket_create, int family, int type, int protocol, int kern)
{
	bool audit = false;
	__u64 cgid = bpf_get_current_cgroup_id();
	struct wd_call_policy *p = bpf_map_lookup_elem(&wd_policy, &cgid);

	if (kern) /* sockets the kernel makes for itself */
		return 1;
	if (p) {
		if (!(lsm_flags(p) & WD_LSM_ON))
			return 1;
		audit = p->flags & WD_POL_AUDIT;
		if (!(p->flags & WD_POL_FAMILIES) ||
		    (p->families_mask & (1ull << (family & 63))))
			return 1;
	} else {
		/* attached to this cgroup but no policy: fail closed */
		wd_count(WD_LOSS_POLICY_MISS);
	}
	struct wd_kevent *e = deny_event(WD_KEV_SOCKET_CREATE, audit);
	if (e) {
		e->family = family;
		e->protocol = protocol;
		e->arg2 = type;
		wd_event_submit(e);
	}
	return cg_ret(audit);
}

static __always_inline bool egress_allowed(__u64 cgid, const __u8 a[16],
					   __u16 port_be)
{
	struct wd_egress_key key = {};
	key.prefixlen = WD_EGRESS_KEY_FIXED_BITS + 128;
	key.cgid_lo = (__u32)cgid;
	key.cgid_hi = cgid >> 32;
	key.port = port_be;
	__builtin_memcpy(key.addr, a, 16);
	if (bpf_map_lookup_elem(&wd_egress_rules, &key))
		return true;
	key.port = 0; /* any-port rules (see bpf/lib/policy.h) */
	return bpf_map_lookup_elem(&wd_egress_rules, &key) != NULL;
}

/* Every family: inet/inet6 against the egress allow-list (the same rules the
 * cgroup/connect programs use; this hook runs first, so a connect denied
 * here produces one event, not two), unix (pathname and abstract) only when
 * the policy allows it, any other family only when it is an allowed socket
 * family. */
SEC("lsm_cgroup/socket_connect")
int BPF_PROG(wd_socket_connect, struct socket *sock, struct sockaddr *address,
	     int addrlen)
{
	bool audit = false;
	__u64 cgid = bpf_get_current_cgroup_id();
	struct wd_call_policy *p = bpf_map_lookup_elem(&wd_policy, &cgid);
	__u16 family = 0, port_be = 0;
	__u8 a[16] = {};

	if (addrlen < 2)
		return 1; /* the kernel rejects it (EINVAL) */
	bpf_probe_read_kernel(&family, sizeof(family), &address->sa_family);
	if (family == AF_UNSPEC) /* dissolves a UDP association */
		return 1;
	if (!p) {
		wd_count(WD_LOSS_POLICY_MISS);
		goto deny;
	}
	__u64 f = lsm_flags(p);
	if (!(f & WD_LSM_ON))
		return 1;
	audit = p->flags & WD_POL_AUDIT;

	if (family == AF_INET) {
		struct sockaddr_in *sin = (void *)address;
		if (addrlen < (int)sizeof(*sin))
			return 1; /* EINVAL from the kernel */
		a[10] = 0xff;
		a[11] = 0xff;
		bpf_probe_read_kernel(&a[12], 4, &sin->sin_addr.s_addr);
		bpf_probe_read_kernel(&port_be, 2, &sin->sin_port);
		if (egress_allowed(cgid, a, port_be))
			return 1;
		/* names in network.allow: cgroup/connect4, which runs after
		 * this hook, sends port 53 to the call's resolver */
		if ((p->flags & WD_POL_DNS) && port_be == bpf_htons(53))
			return 1;
	} else if (family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (void *)address;
		if (addrlen < (int)sizeof(*sin6))
			return 1;
		bpf_probe_read_kernel(a, 16, &sin6->sin6_addr);
		bpf_probe_read_kernel(&port_be, 2, &sin6->sin6_port);
		if (egress_allowed(cgid, a, port_be))
			return 1;
		if ((p->flags & WD_POL_DNS) && port_be == bpf_htons(53))
			return 1;
	} else if (family == AF_UNIX) {
		if (f & WD_LSM_ALLOW_UNIX)
			return 1;
	} else if ((p->flags & WD_POL_FAMILIES) &&
		   (p->families_mask & (1ull << (family & 63)))) {
		return 1;
	}

deny:;
	struct wd_kevent *e = deny_event(WD_KEV_SOCKET_CONNECT, audit);
	if (e) {
		e->family = family;
		e->port = bpf_ntohs(port_be);
		__builtin_memcpy(e->addr, a, 16);
		e->arg2 = BPF_CORE_READ(sock, type);
		if (family == AF_UNIX) {
			struct sockaddr_un *sun = (void *)address;
			/* abstract names start with NUL: report them as '@' */
			bpf_probe_read_kernel(e->path, sizeof(sun->sun_path),
					      sun->sun_path);
			e->path[sizeof(sun->sun_path)] = 0;
			if (!e->path[0] && addrlen > 2)
				e->path[0] = '@';
		}
		wd_event_submit(e);
	}
	return cg_ret(audit);
}
