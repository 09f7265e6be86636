#include "enforce/seccomp.h"
#include "common/log.h"

#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <netinet/in.h>

/* Syscalls no tool needs and every escape wants: namespaces and mounts,
 * tracing other processes, loading code into the kernel, kernel keyrings,
 * io_uring (its operations bypass seccomp), clocks, and host admin;
 * inotify watches (Landlock has no right for them: a tier-1 tool could
 * otherwise watch any host directory its uid may read). */
const char *const wd_seccomp_baseline[] = {"mount",
					   "umount2",
					   "pivot_root",
					   "chroot",
					   "move_mount",
					   "open_tree",
					   "fsopen",
					   "fsconfig",
					   "fsmount",
					   "fspick",
					   "mount_setattr",
					   "unshare",
					   "setns",
					   "ptrace",
					   "process_vm_readv",
					   "process_vm_writev",
					   "process_madvise",
					   "pidfd_getfd",
					   "kcmp",
					   "bpf",
					   "perf_event_open",
					   "userfaultfd",
					   "keyctl",
					   "add_key",
					   "request_key",
					   "io_uring_setup",
					   "io_uring_enter",
					   "io_uring_register",
					   "kexec_load",
					   "kexec_file_load",
					   "init_module",
					   "finit_module",
					   "delete_module",
					   "swapon",
					   "swapoff",
					   "reboot",
					   "acct",
					   "quotactl",
					   "quotactl_fd",
					   "syslog",
					   "name_to_handle_at",
					   "open_by_handle_at",
					   "lookup_dcookie",
					   "iopl",
					   "ioperm",
					   "settimeofday",
					   "clock_settime",
					   "clock_adjtime",
					   "adjtimex",
					   "vhangup",
					   "uselib",
					   "_sysctl",
					   "ustat",
					   "sysfs",
					   "fanotify_init",
					   "inotify_add_watch",
					   "memfd_secret",
					   "personality",
					   "modify_ldt",
					   "nfsservctl",
					   "vm86",
					   "vm86old",
					   "sethostname",
					   "setdomainname",
					   NULL};

bool wd_memfd_noexec_sysctl(void)
{
	static int have = -1; /* probed once, before any call forks */
	int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
	if (h < 0) {
		h = access("/proc/sys/vm/memfd_noexec", F_OK) == 0;
		__atomic_store_n(&have, h, __ATOMIC_RELAXED);
	}
	return h;
}

/* Namespace-creating clone flags (CLONE_NEWUSER needs no privilege). */
#define NS_FLAGS                                                               \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |           \
	 CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP)

/* Exported programs by what they are built from (syscalls.deny,
 * network.families, network.listen, tier, host network): libseccomp's
 * build and export cost ~0.35 ms a call; the same manifest gets the same
 * program. */
#define PROG_CACHE 32
static struct {
	char *key; /* NUL-terminated names, "|" between the two lists */
	size_t key_len;
	struct sock_filter *f;
	unsigned short len;
} cache[PROG_CACHE];
static int cache_next;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static char *prog_key(const struct wd_manifest *m, bool host_net, size_t *len)
{
	struct wd_buf b = {0};
	for (int i = 0; m && i < m->n_syscalls_deny; i++) {
		wd_buf_append(&b, m->syscalls_deny[i],
			      strlen(m->syscalls_deny[i]) + 1);
	}
	wd_buf_append(&b, "|", 2);
	for (int i = 0; m && i < m->n_socket_families; i++)
		wd_buf_append(&b, m->socket_families[i],
			      strlen(m->socket_families[i]) + 1);
	/* tier 1 has rules of its own (anonymous executables) */
	wd_buf_append(&b, m && m->tier == 1 ? "|1" : "|2", 3);
	char k[4] = {m && m->net_icmp ? 'i' : '-',
		     m && m->net_listen ? 'l' : '-', host_net ? 'h' : '-', 0};
	wd_buf_append(&b, k, sizeof(k));
	*len = b.len;
	return b.data;
}

static int build_uncached(const struct wd_manifest *m, bool host_net,
			  struct wd_seccomp_prog *out, struct wd_err *err);

int wd_seccomp_build(const struct wd_manifest *m, bool host_net,
		     struct wd_seccomp_prog *out, struct wd_err *err)
{
	size_t key_len, sz;
	cleanup_free char *key = prog_key(m, host_net, &key_len);
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&cache_mu);
	for (int i = 0; i < PROG_CACHE; i++)
		if (cache[i].key && cache[i].key_len == key_len &&
		    !memcmp(cache[i].key, key, key_len)) {
			sz = cache[i].len * sizeof(struct sock_filter);
			out->prog.filter = wd_malloc(sz);
			memcpy(out->prog.filter, cache[i].f, sz);
			out->prog.len = cache[i].len;
			pthread_mutex_unlock(&cache_mu);
			return 0;
		}
	pthread_mutex_unlock(&cache_mu);
	/* a one-shot process: the program an earlier one built and kept
	 * (seccomp_cache.c), or built here and kept for the next */
	if (wd_seccomp_file_get(key, key_len, out) < 0) {
		int r = build_uncached(m, host_net, out, err);
		if (r < 0)
			return r;
		wd_seccomp_file_put(key, key_len, out);
	}
	sz = out->prog.len * sizeof(struct sock_filter);
	struct sock_filter *f = wd_malloc(sz);
	memcpy(f, out->prog.filter, sz);
	pthread_mutex_lock(&cache_mu);
	int slot = cache_next++ % PROG_CACHE;
	free(cache[slot].key);
	free(cache[slot].f);
	cache[slot].key = steal_pointer(&key);
	cache[slot].key_len = key_len;
	cache[slot].f = f;
	cache[slot].len = out->prog.len;
	pthread_mutex_unlock(&cache_mu);
	return 0;
}

/* The int arguments below (level, optname, protocol, socketpair's domain)
 * are compared on their low 32 bits only, as the kernel reads them: a
 * value with stray upper bits is the same int to the kernel and must be
 * the same to the filter. socket()'s type carries SOCK_NONBLOCK and
 * SOCK_CLOEXEC above its low four bits (SOCK_TYPE_MASK). */
#define A32(i, v)	SCMP_CMP(i, SCMP_CMP_MASKED_EQ, 0xffffffffULL, (v))
#define ATYPE(i, v)	SCMP_CMP(i, SCMP_CMP_MASKED_EQ, 0xfULL, (v))
#define WD_SO_REUSEPORT 15 /* asm-generic/socket.h */

/* socket() and socketpair() of AF_UNIX: only SOCK_STREAM (1) and
 * SOCK_SEQPACKET (5), whatever the flags (SOCK_NONBLOCK, SOCK_CLOEXEC)
 * above the type's low four bits. Every other type is refused, not only
 * SOCK_DGRAM: the kernel makes a unix SOCK_RAW a datagram socket
 * (unix_create), and a type it does not know is refused anyway. With t =
 * type & 0xf, the types 1 and 5 are the only t with bits 1 and 3 clear
 * other than 0 and 4, so four masked compares hold it:
 * t & 0x2, t & 0x8, t == 0, t == 4. */
static int unix_stream_only(scmp_filter_ctx ctx, uint32_t deny)
{
	static const struct {
		uint64_t mask, val;
	} bad[] = {{0x2, 0x2}, {0x8, 0x8}, {0xf, 0}, {0xf, 4}};
	int r;
	for (size_t i = 0; i < WD_ARRAY_SIZE(bad); i++) {
		struct scmp_arg_cmp t =
		    SCMP_A1(SCMP_CMP_MASKED_EQ, bad[i].mask, bad[i].val);
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 2,
					  SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0),
					  t)) < 0)
			return r;
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(socketpair), 2,
					  A32(0, AF_UNIX), t)) < 0)
			return r;
	}
	return 0;
}

/* inet and inet6 sockets: only the types and protocols the cgroup hooks
 * judge (bpf/egress.bpf.c): SOCK_STREAM (TCP), SOCK_DGRAM (UDP, and ping
 * where inbound_rules lets it), protocol 0, TCP, UDP, ICMP, ICMPv6.
 * Others reach addresses no hook sees or were never meant to be used:
 * SCTP (SOCK_STREAM or SOCK_SEQPACKET; its sendmsg runs no cgroup hook),
 * MPTCP (262), UDP-Lite, DCCP (SOCK_DCCP), SOCK_SEQPACKET, SOCK_RDM, and a
 * protocol the kernel would load a module for. The protocol is compared
 * on its low 32 bits (A32) below 59 and on all 64 at or above it (a
 * value with stray upper bits is refused). SOCK_RAW: inbound_rules. */
static int inet_protocols_only(scmp_filter_ctx ctx, uint32_t deny)
{
	static const int afs[] = {AF_INET, AF_INET6};
	int r;
	for (size_t i = 0; i < WD_ARRAY_SIZE(afs); i++) {
		for (int t = 0; t < 16; t++) {
			if (t == SOCK_STREAM || t == SOCK_DGRAM ||
			    t == SOCK_RAW)
				continue;
			if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket),
						  2,
						  SCMP_A0(SCMP_CMP_EQ, afs[i]),
						  ATYPE(1, t))) < 0)
				return r;
		}
		for (int p = 2; p < 59; p++) {
			if (p == IPPROTO_TCP || p == IPPROTO_UDP ||
			    p == IPPROTO_ICMPV6)
				continue;
			if ((r = seccomp_rule_add(
				 ctx, deny, SCMP_SYS(socket), 2,
				 SCMP_A0(SCMP_CMP_EQ, afs[i]), A32(2, p))) < 0)
				return r;
		}
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 2,
					  SCMP_A0(SCMP_CMP_EQ, afs[i]),
					  SCMP_A2(SCMP_CMP_GE, 59))) < 0)
			return r;
	}
	return 0;
}

/* Inbound and ICMP (DESIGN.md §2; the address side is bpf/egress.bpf.c's
 * bind4/bind6). Without network.listen:
 *   - listen() is refused: no stream or seqpacket socket of any family
 *     (a TCP port, an abstract or pathname unix name) accepts a peer;
 *   - setsockopt(SOL_SOCKET, SO_REUSEPORT) is refused: a socket joining
 *     the port of a host service would take a share of its connections
 *     (the bind to that port is refused in the kernel as well);
 *   - with the host's network namespace (host_net), unix sockets
 *     other than stream and seqpacket (socket and socketpair; datagram,
 *     and raw, which the kernel turns into datagram) are refused: one
 *     bound to an abstract name receives from any sender in the
 *     namespace, and no hook judges an abstract bind (Landlock scopes
 *     only the tool's own sends). In an empty namespace of its own the
 *     names are the call's.
 * ICMP sockets (ping: SOCK_DGRAM + IPPROTO_ICMP/ICMPV6) reach any address
 * (no cgroup hook runs for them) and are refused unless network.families
 * lists icmp; inet raw sockets always (they also need CAP_NET_RAW, which
 * no tool holds). 0 or a libseccomp -errno. */
static int inbound_rules(scmp_filter_ctx ctx, const struct wd_manifest *m,
			 bool host_net)
{
	const uint32_t deny = SCMP_ACT_NOTIFY;
	int r;
	if (!m || !m->net_listen) {
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(listen), 0)) < 0)
			return r;
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(setsockopt), 2,
					  A32(1, SOL_SOCKET),
					  A32(2, WD_SO_REUSEPORT))) < 0)
			return r;
		if (host_net && (r = unix_stream_only(ctx, deny)) < 0)
			return r;
	}
	static const struct {
		int af, proto;
	} ping[] = {{AF_INET, IPPROTO_ICMP}, {AF_INET6, IPPROTO_ICMPV6}};
	for (size_t i = 0; i < WD_ARRAY_SIZE(ping); i++) {
		if ((!m || !m->net_icmp) &&
		    (r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 3,
					  SCMP_A0(SCMP_CMP_EQ, ping[i].af),
					  ATYPE(1, SOCK_DGRAM),
					  A32(2, ping[i].proto))) < 0)
			return r;
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 2,
					  SCMP_A0(SCMP_CMP_EQ, ping[i].af),
					  ATYPE(1, SOCK_RAW))) < 0)
			return r;
	}
	return 0;
}

static int build_uncached(const struct wd_manifest *m, bool host_net,
			  struct wd_seccomp_prog *out, struct wd_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = 0;
	const uint32_t deny = SCMP_ACT_NOTIFY;
	bool fam_ok[AF_MAX] = {false};

	memset(out, 0, sizeof(*out));
	if (!ctx)
		return wd_err_set(err, -ENOMEM,
				  "syscalls: seccomp_init failed");
	/* Foreign ABIs (int 0x80 i386, x32) are not added: they hit the
	 * bad-arch action, which kills the process. */
	seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP,
			 0); /* we set NNP ourselves */
	/* A binary tree of syscall numbers instead of one comparison after
	 * another: the same verdicts, in O(log n) instructions per syscall.
	 * The kernel emulates the filter for every syscall number when it
	 * is installed (seccomp_cache_prepare), so a short path per number
	 * is also a cheaper install, which every call pays. */
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);

	for (const char *const *s = wd_seccomp_baseline; *s; s++) {
		int nr = seccomp_syscall_resolve_name(*s);
		if (nr == __NR_SCMP_ERROR || nr < 0)
			continue; /* not a syscall on this arch */
		if ((r = seccomp_rule_add(ctx, deny, nr, 0)) < 0)
			goto fail;
	}
	for (int i = 0; m && i < m->n_syscalls_deny; i++) {
		int nr = seccomp_syscall_resolve_name(m->syscalls_deny[i]);
		if (nr == __NR_SCMP_ERROR) {
			r = -EINVAL;
			seccomp_release(ctx);
			return wd_err_set(err, r, "syscalls.deny: unknown '%s'",
					  m->syscalls_deny[i]);
		}
		if (nr < 0)
			continue;
		r = seccomp_rule_add(ctx, deny, nr, 0);
		if (r < 0 && r != -EEXIST)
			goto fail;
	}
	/* clone: no namespaces. clone3 takes its flags through a pointer we
	 * must not judge, so it gets ENOSYS and libc falls back to clone. */
	/* clone: no namespace flags; libseccomp cannot say "mask != 0",
	 * so each bit gets its own rule. */
	for (int bit = 0; bit < 64; bit++) {
		uint64_t f = 1ULL << bit;
		if (!(NS_FLAGS & f))
			continue;
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
					  SCMP_A0(SCMP_CMP_MASKED_EQ, f, f))) <
		    0)
			goto fail;
	}
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3),
				  0)) < 0)
		goto fail;

	/* socket(): unix, inet, inet6, plus what the manifest names
	 * (policy/families.h; the parser let only those through). The
	 * domain is an integer: safe to judge here. */
	fam_ok[AF_UNIX] = fam_ok[AF_INET] = fam_ok[AF_INET6] = true;
	for (int i = 0; m && i < m->n_socket_families; i++) {
		int af = m->socket_family_nums ? m->socket_family_nums[i] : -1;
		if (af <= 0 || af >= AF_MAX) {
			seccomp_release(ctx);
			return wd_err_set(err, -EINVAL,
					  "network.families: '%s' cannot be "
					  "held by seccomp",
					  m->socket_families[i]);
		}
		fam_ok[af] = true;
	}
	for (int af = 0; af < AF_MAX; af++) {
		if (fam_ok[af])
			continue;
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 1,
					  SCMP_A0(SCMP_CMP_EQ, af))) < 0)
			goto fail;
	}
	/* 64-bit compare: a domain with any of the upper 32 bits set (which
	 * the kernel drops, the argument being an int) is refused here */
	if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 1,
				  SCMP_A0(SCMP_CMP_GE, AF_MAX))) < 0)
		goto fail;
	if ((r = inet_protocols_only(ctx, deny)) < 0)
		goto fail;
	/* socketpair of the same families is harmless; no rule (but see
	 * the unix datagram rule below). */
	if ((r = inbound_rules(ctx, m, host_net)) < 0)
		goto fail;

	/* Tier 1 (no mount or pid namespace of its own, so no noexec scratch
	 * and no vm.memfd_noexec: sandbox/mounts.c does that in tier 2), and
	 * tier 2 on a kernel without vm.memfd_noexec (before 6.3; there
	 * MFD_NOEXEC_SEAL does not exist either, so no memfd at all):
	 * executing an anonymous file would pass Landlock, which judges
	 * execve by the file's path and a memfd has none on any rule.
	 * memfd_create must ask for MFD_NOEXEC_SEAL (the memfd can then
	 * never be made executable), and execveat of a bare fd
	 * (AT_EMPTY_PATH, fexecve) is refused: both are integer flags. */
	if (m && (m->tier == 1 || !wd_memfd_noexec_sysctl())) {
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(memfd_create), 1,
					  SCMP_A1(SCMP_CMP_MASKED_EQ,
						  WD_MFD_NOEXEC_SEAL, 0))) < 0)
			goto fail;
		if ((r = seccomp_rule_add(ctx, deny, SCMP_SYS(execveat), 1,
					  SCMP_A4(SCMP_CMP_MASKED_EQ,
						  WD_AT_EMPTY_PATH,
						  WD_AT_EMPTY_PATH))) < 0)
			goto fail;
	}

	/* Export to raw BPF through a memfd (libseccomp 2.5 has no
	 * in-memory export). */
	int mfd = memfd_create("warden-seccomp", MFD_CLOEXEC);
	if (mfd < 0) {
		r = -errno;
		goto fail;
	}
	r = seccomp_export_bpf(ctx, mfd);
	if (r < 0) {
		close(mfd);
		goto fail;
	}
	off_t len = lseek(mfd, 0, SEEK_END);
	if (len <= 0 || len % sizeof(struct sock_filter)) {
		close(mfd);
		r = -EINVAL;
		goto fail;
	}
	out->prog.filter = wd_malloc(len);
	out->prog.len = len / sizeof(struct sock_filter);
	if (pread(mfd, out->prog.filter, len, 0) != len) {
		close(mfd);
		wd_seccomp_prog_free(out);
		r = -EIO;
		goto fail;
	}
	close(mfd);
	seccomp_release(ctx);
	return 0;
fail:
	seccomp_release(ctx);
	return wd_err_set(err, r, "syscalls: cannot build seccomp filter: %s",
			  strerror(-r));
}

void wd_seccomp_prog_free(struct wd_seccomp_prog *p)
{
	free(p->prog.filter);
	p->prog.filter = NULL;
}

int wd_seccomp_install(const struct wd_seccomp_prog *p)
{
	long fd = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
			  SECCOMP_FILTER_FLAG_NEW_LISTENER, &p->prog);
	return fd < 0 ? -errno : (int)fd;
}

int wd_seccomp_answer(int fd, bool audit, struct wd_event *ev)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;

	memset(&req, 0, sizeof(req));
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
		return errno == ENOENT || errno == EINTR ? 0 : -errno;
	memset(&resp, 0, sizeof(resp));
	resp.id = req.id;
	if (audit) {
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	} else {
		resp.error = -EPERM;
	}
	int r = ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
	if (r < 0 && errno != ENOENT)
		wd_log_errno(WD_LOG_DEBUG, -errno, "seccomp: answer");

	memset(ev, 0, sizeof(*ev));
	ev->ts_ns = wd_wall_ns();
	ev->pid = req.pid;
	ev->source = WD_SRC_SECCOMP;
	wd_strlcpy(ev->kind, "syscall", sizeof(ev->kind));
	ev->syscall_nr = req.data.nr;
	char *name =
	    seccomp_syscall_resolve_num_arch(req.data.arch, req.data.nr);
	wd_strlcpy(ev->syscall, name ? name : "?", sizeof(ev->syscall));
	free(name);
	ev->err = audit ? 0 : EPERM;
	ev->verdict = audit ? WD_VERDICT_AUDITED : WD_VERDICT_DENIED;
	/* Integer arguments only: they are copies taken by the kernel. */
	if (req.data.nr == SCMP_SYS(socket) ||
	    req.data.nr == SCMP_SYS(socketpair))
		snprintf(ev->target, sizeof(ev->target),
			 "family=%llu type=%llu protocol=%llu",
			 (unsigned long long)req.data.args[0],
			 (unsigned long long)(req.data.args[1] & 0xf),
			 (unsigned long long)(uint32_t)req.data.args[2]);
	else if (req.data.nr == SCMP_SYS(setsockopt))
		snprintf(ev->target, sizeof(ev->target), "level=%u optname=%u",
			 (unsigned)req.data.args[1],
			 (unsigned)req.data.args[2]);
	else if (req.data.nr == SCMP_SYS(clone))
		snprintf(ev->target, sizeof(ev->target), "flags=0x%llx",
			 (unsigned long long)req.data.args[0]);
	else if (req.data.nr == SCMP_SYS(memfd_create))
		snprintf(ev->target, sizeof(ev->target), "flags=0x%llx",
			 (unsigned long long)req.data.args[1]);
	else if (req.data.nr == SCMP_SYS(execveat))
		snprintf(ev->target, sizeof(ev->target), "fd=%lld flags=0x%llx",
			 (long long)(int)req.data.args[0],
			 (unsigned long long)req.data.args[4]);
	return 1;
}
