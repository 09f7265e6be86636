/* `warden status [--json]`: the node's kernel features, then for every
 * manifest constraint which mechanism holds it per tier on this node
 * (DESIGN.md §2), or why it cannot be held; then which constraints
 * `mode: audit` can watch.
 *
 * The report is built once as a table (struct cell/row, status_int.h) from
 * the probe and then rendered either as aligned text (status_text.c) or as
 * JSON (status_json.c), so both outputs always say the same thing.
 */
#include "api/client.h"
#include "cli/cli.h"
#include "cli/status_int.h"
#include "common/log.h"
#include "common/util.h"
#include "enforce/egress.h"
#include "enforce/lsm.h"
#include "enforce/probe.h"
#include "policy/families.h"
#include "sandbox/oci.h"
#include "sandbox/t3beyond.h"

#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <string.h>

/* ---- errno text ---------------------------------------------------------- */

/* "EPERM (Operation not permitted)" for a -errno value. */
const char *wd_status_etext(int err, char *buf, size_t len)
{
	int e = err < 0 ? -err : err;
	const char *name = strerrorname_np(e);
	snprintf(buf, len, "%s (%s)", name ? name : "E?", strerror(e));
	return buf;
}

static bool kernel_at_least(const struct wd_features *f, int maj, int min)
{
	int a = 0, b = 0;
	if (sscanf(f->kernel_release, "%d.%d", &a, &b) != 2)
		return false;
	return a > maj || (a == maj && b >= min);
}

/* ---- the constraint table ----------------------------------------------- */

static struct cell yes(const char *note, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static struct cell yes(const char *note, const char *fmt, ...)
{
	struct cell c = {.ok = true};
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&c.text, fmt, ap) < 0)
		abort();
	va_end(ap);
	c.note = note ? wd_strdup(note) : NULL;
	return c;
}

static struct cell no(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static struct cell no(const char *fmt, ...)
{
	struct cell c = {.ok = false};
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&c.text, fmt, ap) < 0)
		abort();
	va_end(ap);
	return c;
}

static void add_note(struct cell *c, const char *s);

static struct row *add_row(struct report *r, const char *name)
{
	struct row *w = &r->rows[r->n_rows++];
	w->constraint = name;
	return w;
}

static void add_watch(struct report *r, const char *name, bool ok,
		      const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_watch(struct report *r, const char *name, bool ok,
		      const char *fmt, ...)
{
	struct watch *w = &r->watch[r->n_watch++];
	va_list ap;
	w->constraint = name;
	w->ok = ok;
	va_start(ap, fmt);
	if (vasprintf(&w->text, fmt, ap) < 0)
		abort();
	va_end(ap);
}

/* Why BPF LSM as a whole is not usable here, or NULL when some hook is
 * active. */
static const char *bpf_lsm_missing(const struct report *r, char *buf,
				   size_t len)
{
	const struct wd_features *f = r->f;
	for (int h = 0; h < r->n_hooks; h++)
		if (r->hooks[h].active)
			return NULL;
	if (!f->lsm_list[0])
		snprintf(buf, len, "the active LSM list is unreadable: %s",
			 ET(f->lsm_err));
	else if (!f->bpf_in_lsm_list)
		snprintf(buf, len, "'bpf' is not in the active LSM list (%s)",
			 f->lsm_list);
	else if (f->lsm_prog_err)
		snprintf(buf, len, "lsm programs do not load: %s",
			 ET(f->lsm_prog_err));
	else
		snprintf(buf, len, "no hook is active");
	return buf;
}

/* Why one BPF LSM hook is not active, or NULL when it is. */
static const char *hook_missing(const struct report *r, enum wd_lsm_hook h,
				char *buf, size_t len)
{
	if ((int)h < r->n_hooks && r->hooks[h].active)
		return NULL;
	if ((int)h < r->n_hooks && r->hooks[h].reason[0])
		snprintf(buf, len, "%s", r->hooks[h].reason);
	else if (!bpf_lsm_missing(r, buf, len))
		snprintf(buf, len, "hook not active");
	return buf;
}

/* Each tier's prerequisite (enforce/probe_tiers.c, what the fleet
 * registers too): NULL when the node has it, else buf saying why not. */
static const char *tier3_missing(const struct wd_features *f, char *buf,
				 size_t len)
{
	return wd_tier_runs(f, 3, buf, len) ? NULL : buf;
}

static const char *tier2_missing(const struct wd_features *f, char *buf,
				 size_t len)
{
	return wd_tier_runs(f, 2, buf, len) ? NULL : buf;
}

static void row_network(struct report *r, const char *t2m, const char *t3m)
{
	const struct wd_features *f = r->f;
	struct row *w = add_row(r, "network.allow");
	char lb[256], note[512];
	const char *lsm =
	    hook_missing(r, WD_LSM_H_SOCKET_CONNECT, lb, sizeof(lb));
	snprintf(note, sizeof(note), "%s%s%s%s",
		 lsm ? "BPF LSM socket_connect not used: " : "", lsm ? lsm : "",
		 f->ringbuf_err ? "; no kernel denial records: ring buffer: "
				: "",
		 f->ringbuf_err ? ET(f->ringbuf_err) : "");
	struct cell bpf;
	if (f->cgroup_sockaddr_err)
		bpf = no("BPF cgroup/connect4 does not load: %s",
			 ET(f->cgroup_sockaddr_err));
	else if (!f->cg.v2_root[0])
		bpf = no("no cgroup v2 hierarchy to attach BPF cgroup "
			 "programs to");
	else
		bpf =
		    yes(note[0] ? note : NULL,
			"BPF cgroup/connect4,connect6,sendmsg4,sendmsg6 "
			"allow-list keyed by cgroup id (cgroup v2 at %s)%s",
			f->cg.v2_root, lsm ? "" : " + BPF LSM socket_connect");
	w->t[0] = bpf;
	if (t2m)
		w->t[1] = no("%s", t2m);
	else if (!bpf.ok)
		w->t[1] = no("%s", bpf.text);
	else if (f->ns_err[WD_NS_NET])
		w->t[1] = no("an empty list needs a new network namespace: %s",
			     ET(f->ns_err[WD_NS_NET]));
	else
		w->t[1] = yes(bpf.note,
			      "%s; an empty list: a new, empty network "
			      "namespace",
			      bpf.text);
	char far[700], t3note[1100];
	wd_t3_beyond_describe(far, sizeof(far));
	snprintf(t3note, sizeof(t3note),
		 "the link carries IPv4; it reaches the node's own addresses "
		 "(the node's 127.0.0.1 is the host end as the sandbox sees "
		 "it) and %s; tc BPF is loaded at the first such call, which "
		 "is refused if it cannot load or attach",
		 far);
	if (t3m)
		w->t[2] = no("%s", t3m);
	else
		w->t[2] = yes(
		    t3note,
		    "runsc --network=none (empty list); a non-empty list: a "
		    "netns + veth pair of the call's own (runsc "
		    "--network=sandbox), tc BPF on the host end judges every "
		    "packet against the call's allow map (as tiers 1-2, keyed "
		    "by cgroup id) and records what it drops");
}

/* Names in network.allow ("host:port", "*.suffix:port"): who resolves
 * them and what holds the answers. */
static struct cell names_cell(const struct wd_features *f)
{
	if (f->cgroup_sockaddr_err)
		return no("BPF cgroup/connect4 does not load: %s",
			  ET(f->cgroup_sockaddr_err));
	if (!f->cg.v2_root[0])
		return no("no cgroup v2 hierarchy to attach BPF cgroup "
			  "programs to");
	/* the test the call start makes (wd_egress_dns) */
	struct wd_err e = {0};
	const char *why = NULL;
	struct wd_egress *eg = wd_egress_shared(&e);
	if (!wd_egress_names_ok(eg, &why))
		return no("%s%s%s", why, e.msg[0] ? ": " : "", e.msg);
	char mech[700];
	snprintf(mech, sizeof(mech),
		 "the call's own resolver on 127.0.0.1: BPF "
		 "cgroup/connect4,6 and sendmsg4,6 send every packet to "
		 "port 53 (any address, UDP and TCP) to it, recvmsg4,6 and "
		 "getpeername4,6 show the address asked for; each answer "
		 "is pinned in the call's allow-list for its TTL, nothing "
		 "else of a name is; host resolvers' unix sockets (nscd, "
		 "systemd-resolved, D-Bus, avahi) refused to the call by %s",
		 wd_egress_unix_ok(eg) ? "BPF cgroup/connect_unix, sendmsg_unix"
				       : "the BPF LSM (socket_connect)");
	return yes("a name not allowed is NXDOMAIN and recorded (dns.name); "
		   "an answer in loopback, private, link-local or the "
		   "metadata address is refused unless "
		   "network.allow_private lists it (dns.answer)",
		   "%s", mech);
}

static void row_names(struct report *r, const char *t2m, const char *t3m)
{
	struct row *w = add_row(r, "network.allow names");
	w->t[0] = names_cell(r->f);
	w->t[1] = t2m ? no("%s", t2m) : names_cell(r->f);
	char far[700], t3note[1000];
	bool can = wd_t3_beyond_describe(far, sizeof(far));
	snprintf(t3note, sizeof(t3note),
		 "an answer beyond the node is %s; an answer the sandbox "
		 "cannot reach is withheld and recorded (dns.answer); AAAA "
		 "answers are left out (the link carries IPv4)",
		 can ? "given and pinned (the call is then routed beyond "
		       "the node, see network.allow)"
		     : "withheld: this node does not route tier 3 beyond it "
		       "(see network.allow)");
	w->t[2] = t3m ? no("%s", t3m)
		      : yes(t3note,
			    "the call's own resolver on its link's host end "
			    "(port 53, UDP and TCP, sockets bound to the "
			    "link; the sandbox's resolv.conf names it): tc BPF "
			    "drops every other packet to port 53 or 853; each "
			    "answer is pinned in the call's allow map for its "
			    "TTL");
}

static void row_families(struct report *r, const char *t2m, const char *t3m)
{
	const struct wd_features *f = r->f;
	struct row *w = add_row(r, "network.families");
	char lb[256], note[300];
	const char *lsm =
	    hook_missing(r, WD_LSM_H_SOCKET_CREATE, lb, sizeof(lb));
	snprintf(note, sizeof(note), "BPF LSM socket_create not used: %s",
		 lsm ? lsm : "");
	struct cell c;
	if (!f->seccomp_filter)
		c = no("seccomp filters unavailable: %s",
		       ET(f->seccomp_filter_err));
	else
		c = yes(lsm ? note : NULL,
			"seccomp-bpf on socket() domain, type and protocol "
			"(integers: safe to judge in seccomp): unix, inet, "
			"inet6 + those the manifest lists of: %s; ping "
			"sockets only with icmp (no cgroup hook judges their "
			"destination), inet raw sockets never%s",
			wd_family_names(),
			lsm ? "" : " + BPF LSM socket_create");
	if (c.ok) {
		char pg[160];
		if (f->ping_err)
			snprintf(pg, sizeof(pg),
				 "net.ipv4.ping_group_range unknown: %s",
				 ET(f->ping_err));
		else
			snprintf(pg, sizeof(pg),
				 "net.ipv4.ping_group_range = %ld %ld here "
				 "(%s)",
				 f->ping_gid_lo, f->ping_gid_hi,
				 f->ping_gid_lo > f->ping_gid_hi
				     ? "ping sockets admit no gid"
				     : "ping sockets admit gids: seccomp "
				       "alone holds icmp");
		add_note(&c, pg);
	}
	w->t[0] = c;
	w->t[1] = t2m	 ? no("%s", t2m)
		  : c.ok ? yes(c.note, "%s", c.text)
			 : no("%s", c.text);
	w->t[2] =
	    t3m ? no("%s", t3m)
		: yes(NULL, "the same socket() rules as OCI linux.seccomp in "
			    "the sentry (runsc --oci-seccomp); sockets are the "
			    "sentry's, --network=none has no host network");
}

/* Inbound: binds of a port, listen(), SO_REUSEPORT (network.listen). */
static void row_inbound(struct report *r, const char *t2m, const char *t3m)
{
	const struct wd_features *f = r->f;
	struct row *w = add_row(r, "network.listen");
	struct cell c;
	if (f->cgroup_sockaddr_err || !f->cg.v2_root[0])
		c = no("BPF cgroup/bind4,bind6 cannot be attached: %s",
		       f->cgroup_sockaddr_err ? ET(f->cgroup_sockaddr_err)
					      : "no cgroup v2 hierarchy");
	else if (!f->seccomp_filter)
		c = no("seccomp filters unavailable: %s",
		       ET(f->seccomp_filter_err));
	else
		c = yes("an unconnected UDP socket's ephemeral port (port 0, "
			"or a send's autobind) in the host's network "
			"namespace still receives from any sender that finds "
			"it: only an empty namespace (network.allow: []) "
			"holds that",
			"without listen: true, BPF cgroup/bind4,bind6 refuse "
			"any port but 0 (recorded), seccomp refuses listen() "
			"and setsockopt SO_REUSEPORT; in the host's network "
			"namespace every unix socket type but stream and "
			"seqpacket too (datagram, and raw, which the kernel "
			"makes datagram: an abstract name has no other "
			"hook); network.allow: [] without "
			"listen: the shared empty network namespace, "
			"loopback down (Landlock's abstract-unix scope keeps "
			"calls apart)");
	w->t[0] = c;
	if (t2m)
		w->t[1] = no("%s", t2m);
	else if (!c.ok)
		w->t[1] = no("%s", c.text);
	else
		w->t[1] = yes(c.note,
			      "as tier 1; network.allow: [] without listen: a "
			      "new, empty network namespace of the call's "
			      "own");
	w->t[2] = t3m ? no("%s", t3m)
		      : yes("listen: true is refused by policy check",
			    "a listener is in the sentry's own netstack: "
			    "unreachable with --network=none; on a call's "
			    "link the host end's tc BPF lets no connection "
			    "in (a SYN without ACK toward the sandbox is "
			    "dropped)");
}

static void row_fs(struct report *r, const char *t2m, const char *t3m,
		   const char *name, const char *rights, enum wd_lsm_hook hook,
		   const char *t2, const char *t3)
{
	const struct wd_features *f = r->f;
	struct row *w = add_row(r, name);
	char lb[256], note[300];
	const char *lsm_hook = wd_lsm_hook_name(hook);
	const char *lsm = hook_missing(r, hook, lb, sizeof(lb));
	snprintf(note, sizeof(note), "BPF LSM %s not used: %s", lsm_hook,
		 lsm ? lsm : "");
	struct cell c;
	if (f->landlock_abi <= 0)
		c = no("Landlock unavailable: %s", ET(f->landlock_abi));
	else
		c = yes(lsm ? note : NULL, "Landlock ABI %d ruleset (%s)%s%s",
			f->landlock_abi, rights, lsm ? "" : " + BPF LSM ",
			lsm ? "" : lsm_hook);
	w->t[0] = c;
	if (t2m)
		w->t[1] = no("%s", t2m);
	else if (!c.ok)
		w->t[1] =
		    no("%s (tier 2 layers Landlock over its mounts)", c.text);
	else
		w->t[1] = yes(c.note, "%s + %s", t2, c.text);
	w->t[2] = t3m ? no("%s", t3m) : yes(NULL, "%s", t3);
}

static void row_syscalls(struct report *r, const char *t2m, const char *t3m)
{
	const struct wd_features *f = r->f;
	struct row *w = add_row(r, "syscalls.deny");
	struct cell c;
	char note[256];
	snprintf(note, sizeof(note),
		 "no denial records: seccomp user-notify unavailable: %s",
		 ET(f->seccomp_notify_err));
	if (!f->seccomp_filter)
		c = no("seccomp filters unavailable: %s",
		       ET(f->seccomp_filter_err));
	else if (!f->seccomp_notify)
		c = no("%s (every denial must be recorded: the sandbox "
		       "refuses the call)",
		       note + strlen("no denial records: "));
	else
		c = yes(NULL,
			"seccomp-bpf: baseline deny list + syscalls.deny, "
			"other ABIs (x32, int 0x80) killed; denied => "
			"SECCOMP_RET_USER_NOTIF => supervisor records, answers "
			"EPERM");
	w->t[0] = c;
	w->t[1] = t2m	 ? no("%s", t2m)
		  : c.ok ? yes(c.note, "%s", c.text)
			 : no("%s", c.text);
	if (t3m)
		w->t[2] = no("%s", t3m);
	else if (f->runsc_oci_seccomp)
		w->t[2] = yes(NULL, "gVisor sentry (its own host seccomp "
				    "filters) + the baseline deny list and "
				    "syscalls.deny as OCI linux.seccomp "
				    "(runsc --oci-seccomp; clone with a "
				    "namespace flag refused too)");
	else
		w->t[2] = no("this runsc has no --oci-seccomp: the baseline "
			     "deny list and syscalls.deny cannot be applied "
			     "inside gVisor");
}

static void row_limit(struct report *r, const char *t2m, const char *t3m,
		      const char *name, enum wd_cg_ctrl c, const char *v2file,
		      const char *v1file)
{
	const struct wd_features *f = r->f;
	struct row *w = add_row(r, name);
	struct cell cell;
	if (f->cg.v2_ctrl[c])
		cell = yes(NULL, "cgroup v2 %s (controller on %s)", v2file,
			   f->cg.v2_root);
	else if (f->cg.v1_root[c][0])
		cell = yes(NULL, "cgroup v1 %s under %s (hybrid node)", v1file,
			   f->cg.v1_root[c]);
	else if (f->cg_err)
		cell = no("no cgroup hierarchy found: %s", ET(f->cg_err));
	else
		cell = no("no %s controller: not in %s/cgroup.controllers "
			  "(\"%s\") and not mounted as cgroup v1",
			  wd_cg_ctrl_name(c),
			  f->cg.v2_root[0] ? f->cg.v2_root : "(no v2)",
			  f->cg.v2_controllers);
	w->t[0] = cell;
	w->t[1] = t2m	    ? no("%s", t2m)
		  : cell.ok ? yes(NULL, "%s", cell.text)
			    : no("%s", cell.text);
	if (t3m)
		w->t[2] = no("%s", t3m);
	else if (!cell.ok)
		w->t[2] = no("%s (warden sets the sandbox's host cgroup limits "
			     "with the same controllers)",
			     cell.text);
	else if (c == WD_CG_MEMORY)
		w->t[2] = yes(NULL,
			      "warden sets %s on the sandbox's host cgroup: "
			      "memory_mb + %d MB for the sentry and gofer "
			      "(runsc joins it, limits untouched)",
			      f->cg.v2_ctrl[c] ? v2file : v1file,
			      WD_T3_MEM_OVERHEAD_MB);
	else if (c == WD_CG_PIDS)
		w->t[2] = yes(NULL,
			      "RLIMIT_NPROC = pids in the sentry (fork/clone "
			      "fail with EAGAIN, the sandbox lives); outer "
			      "bound: warden sets %s on the sandbox's host "
			      "cgroup = pids x %d + %d (sentry, gofer, ptrace "
			      "stubs)",
			      f->cg.v2_ctrl[c] ? v2file : v1file,
			      WD_T3_PIDS_PER_TASK, WD_T3_PIDS_OVERHEAD);
	else
		w->t[2] = yes(NULL,
			      "warden sets %s on the sandbox's host cgroup "
			      "(sentry included)",
			      f->cg.v2_ctrl[c] ? v2file : v1file);
}

static void row_timeout(struct report *r, const char *t2m, const char *t3m)
{
	const struct wd_features *f = r->f;
	struct row *w = add_row(r, "timeout_ms");
	struct cell c;
	if (!f->cg.v2_root[0])
		c = no("no cgroup v2 hierarchy: the call's processes cannot "
		       "be found all");
	else if (kernel_at_least(f, 5, 14))
		c = yes(NULL, "cgroup.kill on the call's v2 leaf: every "
			      "process, daemonised grandchildren included");
	else
		c = yes(NULL, "SIGKILL to every pid in the call's "
			      "cgroup.procs until it is empty");
	w->t[0] = c;
	w->t[1] = t2m ? no("%s", t2m)
		  : c.ok
		      ? yes(NULL, "%s (and the pid namespace's init)", c.text)
		      : no("%s", c.text);
	w->t[2] = t3m ? no("%s", t3m)
		      : yes(NULL, "SIGKILL to every process in the sandbox's "
				  "host cgroup (sentry, gofer, stubs), then "
				  "runsc delete --force");
}

/* Append a limitation to a cell's note. */
static void add_note(struct cell *c, const char *s)
{
	char *n = c->note ? wd_asprintf("%s; %s", c->note, s) : wd_strdup(s);
	free(c->note);
	c->note = n;
}

/* Unix sockets, in the network.allow row of tiers 1-2. */
static void note_unix(struct row *w)
{
	struct wd_err e = {0};
	struct wd_egress *eg = wd_egress_shared(&e);
	const char *s =
	    wd_egress_unix_ok(eg)
		? "unix sockets: BPF cgroup/connect_unix, sendmsg_unix deny "
		  "every path, abstract and unnamed connect/sendmsg except to "
		  "a path under filesystem.write (connecting to a socket "
		  "needs write permission on it in Unix semantics); judged "
		  "on the path as the tool wrote it (absolute, no '..'): a "
		  "symlink under a write path that points elsewhere is "
		  "followed by the kernel after the check"
		: "unix sockets: NOT held: cgroup/connect_unix (kernel 6.7+) "
		  "does not load; a tool can connect to host unix sockets "
		  "its uid may write (Landlock scopes only abstract ones)";
	for (int t = 0; t < 2; t++)
		if (w->t[t].ok)
			add_note(&w->t[t], s);
}

static void build_rows(struct report *r)
{
	const struct wd_features *f = r->f;
	char b2[256], b3[512];
	const char *t2m = tier2_missing(f, b2, sizeof(b2));
	const char *t3m = tier3_missing(f, b3, sizeof(b3));

	row_network(r, t2m, t3m);
	note_unix(&r->rows[r->n_rows - 1]);
	row_names(r, t2m, t3m);
	row_families(r, t2m, t3m);
	row_inbound(r, t2m, t3m);
	row_fs(r, t2m, t3m, "filesystem.read", "read_file, read_dir",
	       WD_LSM_H_FILE_OPEN,
	       "mount namespace: only listed paths bound read-only",
	       "OCI mounts: listed paths bound read-only, read-only rootfs; "
	       "the program's loader and libraries (its ELF start closure: "
	       "PT_INTERP, DT_NEEDED via RUNPATH, ld.so.cache, default "
	       "dirs; a script's interpreter) bound read-only, file by file");
	row_fs(r, t2m, t3m, "filesystem.write",
	       f->landlock_abi >= 3 ? "write_file, make_*, remove_*, truncate"
				    : "write_file, make_*, remove_*",
	       WD_LSM_H_FILE_OPEN,
	       "mount namespace: only `write` paths bound writable, tmpfs "
	       "scratch at /tmp",
	       "OCI mounts: `write` paths bound writable, tmpfs scratch");
	row_fs(r, t2m, t3m, "filesystem.exec", "execute", WD_LSM_H_BPRM_CHECK,
	       "mount namespace: only listed paths are visible; scratch "
	       "(/tmp, /dev/shm) and `write` binds noexec (no execve, no "
	       "mmap PROT_EXEC of what the tool writes); vm.memfd_noexec=2 "
	       "in the call's pid namespace",
	       "OCI mounts: /tmp, `read` and `write` binds noexec (no "
	       "execve of what the tool reads or writes); only `exec` "
	       "paths, the program and its start closure executable; the "
	       "OCI seccomp profile refuses memfd_create without "
	       "MFD_NOEXEC_SEAL and execveat of a bare fd (AT_EMPTY_PATH)");
	{
		/* what Landlock does not hold: mmap(PROT_EXEC) is not a
		 * Landlock right, and BPF LSM has no mmap_file hook here */
		static const char *const ld =
		    "Landlock holds execve; mapping a readable file executable "
		    "through the dynamic loader (ld.so FILE) is not held "
		    "without BPF LSM mmap_file: a readable binary outside "
		    "`exec` runs that way";
		struct row *w = &r->rows[r->n_rows - 1];
		if (w->t[0].ok) {
			add_note(&w->t[0], ld);
			add_note(&w->t[0],
				 "so does a binary the tool writes to a "
				 "`write` path (tier 1 binds nothing: no "
				 "noexec there; its scratch tmpfs is "
				 "noexec); seccomp refuses memfd_create "
				 "without MFD_NOEXEC_SEAL and execveat of a "
				 "bare fd (AT_EMPTY_PATH)");
		}
		if (w->t[1].ok)
			add_note(&w->t[1], ld);
		if (w->t[2].ok)
			add_note(&w->t[2],
				 "not held: gVisor applies no noexec to "
				 "mmap(PROT_EXEC), and the loader is in the "
				 "program's closure (executable), so `ld.so "
				 "FILE` runs a readable file or one the tool "
				 "wrote (so does the tool's own mmap)");
	}
	row_syscalls(r, t2m, t3m);
	row_limit(r, t2m, t3m, "memory_mb", WD_CG_MEMORY, "memory.max",
		  "memory.limit_in_bytes");
	row_limit(r, t2m, t3m, "pids", WD_CG_PIDS, "pids.max", "pids.max");
	row_limit(r, t2m, t3m, "cpus", WD_CG_CPU, "cpu.max",
		  "cpu.cfs_quota_us/cpu.cfs_period_us");
	row_timeout(r, t2m, t3m);

	struct row *w = add_row(r, "output.max_bytes");
	w->t[0] = yes(NULL, "warden reads the capture pipes: bytes past the "
			    "cap are drained and dropped, truncated: true");
	w->t[1] = t2m ? no("%s", t2m) : yes(NULL, "%s", w->t[0].text);
	w->t[2] = t3m ? no("%s", t3m) : yes(NULL, "%s", w->t[0].text);

	w = add_row(r, "identity");
	w->t[0] = yes("the calling user stays the authorisation principal "
		      "(the broker's check, the trace's user); the process "
		      "owner is the call's uid (run_as_uid)",
		      "setresgid/setresuid to a uid/gid of the call's own "
		      "(from the configured uid range, never shared with a "
		      "live call, reused once nothing of it remains), "
		      "capabilities dropped (capset), no_new_privs");
	w->t[1] = t2m ? no("%s", t2m) : yes(w->t[0].note, "%s", w->t[0].text);
	w->t[2] = t3m ? no("%s", t3m)
		      : yes(w->t[0].note,
			    "OCI process.user: a uid/gid of the call's own "
			    "(the same range), no capabilities, "
			    "noNewPrivileges");

	w = add_row(r, "tier");
	w->t[0] =
	    f->cg.v2_root[0]
		? yes(NULL, "light process: the host's pid, uts and network "
			    "namespaces (with allow: [] an empty network "
			    "namespace); an IPC namespace of the "
			    "call's own (its SysV objects and POSIX queues "
			    "die with it) and a mount namespace of its own "
			    "holding its scratch tmpfs (memory_mb); a cgroup "
			    "per call")
		: no("no cgroup v2 hierarchy for the call's cgroup");
	char nsl[64] = "mnt, pid, ipc, uts";
	if (!f->ns_err[WD_NS_NET])
		wd_strlcpy(nsl, "mnt, pid, ipc, uts, net", sizeof(nsl));
	w->t[1] = t2m ? no("%s", t2m)
		      : yes(NULL,
			    "container: new %s namespaces, minimal "
			    "/dev, new /proc",
			    nsl);
	w->t[2] = t3m ? no("%s", t3m)
		      : yes(NULL, "gVisor: runsc --platform=%s (version %s)",
			    f->runsc_platform, f->runsc_version);
}

static void build_watch(struct report *r)
{
	const struct wd_features *f = r->f;
	char lb[256];

	add_watch(r, "network.allow names", true,
		  "the call's resolver answers names the manifest does not "
		  "allow and answers it would refuse, from upstream, and "
		  "records them as audited (dns.name, dns.answer; tiers 1-2)");

	if (f->seccomp_notify_continue) {
		add_watch(r, "syscalls.deny", true,
			  "seccomp user-notify: the supervisor records and "
			  "answers SECCOMP_USER_NOTIF_FLAG_CONTINUE");
		add_watch(r, "network.families", true,
			  "seccomp user-notify on socket() domain, answered "
			  "with FLAG_CONTINUE");
	} else {
		add_watch(r, "syscalls.deny", false,
			  "SECCOMP_USER_NOTIF_FLAG_CONTINUE unavailable: %s",
			  ET(f->seccomp_continue_err));
		add_watch(r, "network.families", false,
			  "SECCOMP_USER_NOTIF_FLAG_CONTINUE unavailable: %s",
			  ET(f->seccomp_continue_err));
	}
	if (!f->cgroup_sockaddr_err && !f->ringbuf_err && f->cg.v2_root[0])
		add_watch(r, "network.allow", true,
			  "BPF cgroup/connect*,sendmsg*: record to the ring "
			  "buffer and allow (tiers 1-2: in audit mode tiers "
			  "1-2 keep the host network instead of an empty "
			  "namespace; tier 3's --network=none cannot be "
			  "audited)");
	else
		add_watch(r, "network.allow", false,
			  "BPF egress programs unavailable: connect4 %s, "
			  "ring buffer %s",
			  f->cgroup_sockaddr_err ? ET(f->cgroup_sockaddr_err)
						 : "ok",
			  f->ringbuf_err ? ET(f->ringbuf_err) : "ok");
	if (!f->cgroup_sockaddr_err && !f->ringbuf_err && f->cg.v2_root[0] &&
	    f->seccomp_notify_continue)
		add_watch(r, "network.listen", true,
			  "BPF cgroup/bind4,bind6 record and allow; seccomp "
			  "listen/SO_REUSEPORT/unix datagram refusals answered "
			  "with FLAG_CONTINUE (tiers 1-2, host network)");
	else
		add_watch(r, "network.listen", false,
			  "BPF bind programs or seccomp FLAG_CONTINUE "
			  "unavailable: connect4 %s, ring buffer %s, continue "
			  "%s",
			  f->cgroup_sockaddr_err ? ET(f->cgroup_sockaddr_err)
						 : "ok",
			  f->ringbuf_err ? ET(f->ringbuf_err) : "ok",
			  f->seccomp_continue_err ? ET(f->seccomp_continue_err)
						  : "ok");
	/* The sandbox applies Landlock in audit mode too (it has no
	 * permissive mode), so a BPF LSM hook in audit mode would only record
	 * what Landlock then denies anyway. */
	static const char *const fs[] = {"filesystem.read", "filesystem.write",
					 "filesystem.exec"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(fs); i++) {
		enum wd_lsm_hook h =
		    i == 2 ? WD_LSM_H_BPRM_CHECK : WD_LSM_H_FILE_OPEN;
		const char *why = hook_missing(r, h, lb, sizeof(lb));
		add_watch(r, fs[i], false,
			  "Landlock has no audit/permissive mode and stays "
			  "on in audit mode (ABI 7 logs its denials but still "
			  "denies); BPF LSM %s %s%s",
			  wd_lsm_hook_name(h),
			  why ? "is not active: "
			      : "records, but Landlock "
				"denies first",
			  why ? why : "");
	}
	static const char *const lim[] = {"memory_mb", "pids", "cpus"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(lim); i++)
		add_watch(r, lim[i], false,
			  "a cgroup limit is applied or not: it cannot "
			  "record an overrun and let it through");
	add_watch(r, "timeout_ms", false,
		  "a timeout kills the call; there is no record-and-continue");
	add_watch(r, "output.max_bytes", false,
		  "the cap is applied while capturing; always enforced");
	add_watch(r, "identity", false,
		  "uid, capabilities and no_new_privs are set before exec; "
		  "there is no permissive variant");
	add_watch(r, "tier", false, "isolation is structural, not a check");
}

static void report_free(struct report *r)
{
	for (int i = 0; i < r->n_rows; i++)
		for (int t = 0; t < 3; t++) {
			free(r->rows[i].t[t].text);
			free(r->rows[i].t[t].note);
		}
	for (int i = 0; i < r->n_watch; i++)
		free(r->watch[i].text);
}

/* ---- mechanisms named by `require:` -------------------------------------- */

int wd_status_build_mechs(const struct report *r, struct mech *m)
{
	const struct wd_features *f = r->f;
	char lb[256];
	/* `require: [bpf_lsm]` asks for every hook (wd_lsm_active()) */
	const char *lsm = r->n_hooks ? NULL : "BPF LSM hook status unknown";
	for (int h = 0; h < r->n_hooks && !lsm; h++)
		if (!r->hooks[h].active) {
			snprintf(lb, sizeof(lb), "hook %s: %s",
				 r->hooks[h].hook, r->hooks[h].reason);
			lsm = lb;
		}
	int n = 0;
	m[n] = (struct mech){.name = "bpf_lsm", .ok = !lsm};
	wd_strlcpy(m[n++].why, lsm ? lsm : "", sizeof(m[0].why));
	m[n] = (struct mech){.name = "landlock", .ok = f->landlock_abi > 0};
	if (f->landlock_abi <= 0)
		snprintf(m[n].why, sizeof(m[n].why), "%s", ET(f->landlock_abi));
	n++;
	m[n] = (struct mech){.name = "seccomp", .ok = f->seccomp_filter};
	if (!f->seccomp_filter)
		snprintf(m[n].why, sizeof(m[n].why), "%s",
			 ET(f->seccomp_filter_err));
	n++;
	m[n] = (struct mech){.name = "bpf_egress",
			     .ok = !f->cgroup_sockaddr_err && f->cg.v2_root[0]};
	if (f->cgroup_sockaddr_err)
		snprintf(m[n].why, sizeof(m[n].why), "cgroup/connect4: %s",
			 ET(f->cgroup_sockaddr_err));
	else if (!f->cg.v2_root[0])
		snprintf(m[n].why, sizeof(m[n].why), "no cgroup v2 hierarchy");
	n++;
	m[n] = (struct mech){.name = "cgroup", .ok = !f->cg_err};
	if (f->cg_err)
		snprintf(m[n].why, sizeof(m[n].why), "%s", ET(f->cg_err));
	n++;
	return n;
}

/* ---- verb ------------------------------------------------------------------
 */

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: warden status [--json]\n\n"
	    "Probe the kernel's enforcement features (BPF LSM, BPF cgroup\n"
	    "programs, Landlock, seccomp user-notify, namespaces, cgroups,\n"
	    "runsc) and print, for every manifest constraint and tier, the\n"
	    "mechanism that enforces it on this node or why it cannot.\n\n"
	    "  --json   one JSON object: kernel, features, cgroup, runsc,\n"
	    "           mechanisms, constraints[], audit{}, model_routes,\n"
	    "           fleet, uids{dir, lost, first_lost, fix}\n");
}

static int verb_status(int argc, char **argv)
{
	bool json = false;
	if (wd_cli_wants_help(argc, argv)) {
		usage(stdout);
		return WD_EXIT_OK;
	}
	bool dashdash = false;
	for (int i = 1; i < argc; i++) {
		if (!dashdash && !strcmp(argv[i], "--json")) {
			json = true;
		} else if (!dashdash && !strcmp(argv[i], "--")) {
			dashdash = true; /* nothing positional may follow */
		} else {
			fprintf(stderr,
				"warden status: unknown argument '%s'\n",
				argv[i]);
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	struct wd_err te = {0};
	if (wd_api_timeout_check(&te)) {
		fprintf(stderr, "warden status: %s\n", te.msg);
		return WD_EXIT_USAGE;
	}
	struct report r = {.f = wd_probe_full()};
	/* Loads the shared egress + LSM objects (enforce/lsm.c) the way a
	 * call would, so each hook's state is what a call would get. */
	r.n_hooks = wd_lsm_hook_status(r.hooks);
	if (r.n_hooks < 0 || r.n_hooks > WD_LSM_H_NR)
		r.n_hooks = 0;
	build_rows(&r);
	build_watch(&r);
	if (json) {
		json_t *o = wd_status_json_report(&r);
		char why[300] = "";
		json_t *mr = wd_status_model_routes(why, sizeof(why));
		json_object_set_new(o, "model_routes",
				    mr ? mr : json_pack("{s:s}", "error", why));
		json_t *fl = wd_status_fleet(why, sizeof(why));
		json_object_set_new(o, "fleet",
				    fl ? fl : json_pack("{s:s}", "none", why));
		json_object_set_new(o, "uids", wd_status_uids());
		char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (!s) {
			json_decref(o);
			report_free(&r);
			wd_error("status: cannot serialise JSON");
			return WD_EXIT_FAIL;
		}
		printf("%s\n", s);
		free(s);
		json_decref(o);
	} else {
		wd_status_text_report(&r);
		wd_status_model_routes_text();
		wd_status_fleet_text();
		wd_status_uids_text();
	}
	report_free(&r);
	return WD_EXIT_OK;
}
WD_VERB(status, "status", "kernel features and which mechanism enforces what",
	verb_status);
