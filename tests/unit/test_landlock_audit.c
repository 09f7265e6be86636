/* Landlock denials arrive through the audit netlink multicast group and are
 * parsed into events: forked children restrict themselves and are denied a
 * file, for real. */
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/landlock.h>
#include <linux/netlink.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common/util.h"
#include "events/landlock_audit.h"
#include "t.h"

#ifndef LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
#define LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)
#endif

static int allow_read(int rs, const char *path)
{
	struct landlock_path_beneath_attr pb = {
	    .allowed_access = LANDLOCK_ACCESS_FS_READ_FILE};
	pb.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (pb.parent_fd < 0)
		return 0; /* absent on this system: nothing to allow */
	int rc = syscall(__NR_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH,
			 &pb, 0);
	close(pb.parent_fd);
	return rc;
}

/* Child: reads of everything but the loader's paths are denied. */
static pid_t spawn(bool do_exec, uint32_t flags)
{
	pid_t p = fork();
	if (p)
		return p;
	struct landlock_ruleset_attr ra = {.handled_access_fs =
					       LANDLOCK_ACCESS_FS_READ_FILE};
	int rs = syscall(__NR_landlock_create_ruleset, &ra, sizeof(ra), 0);
	if (rs < 0)
		_exit(10);
	if (allow_read(rs, "/usr") || allow_read(rs, "/lib") ||
	    allow_read(rs, "/lib64") || allow_read(rs, "/etc/ld.so.cache"))
		_exit(11);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		_exit(12);
	if (syscall(__NR_landlock_restrict_self, rs, flags))
		_exit(13);
	if (do_exec) {
		execl("/bin/cat", "cat", "/etc/hostname", (char *)NULL);
		_exit(14);
	}
	int fd = open("/etc/hostname", O_RDONLY);
	_exit(fd < 0 && errno == EACCES ? 0 : 15);
}

/* The next fork gets a pid at or just above `want` (other processes of
 * the node may take a few first): false if ns_last_pid is not writable
 * (needs CAP_CHECKPOINT_RESTORE in the initial user namespace). */
static bool steer_pid(pid_t want)
{
	int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	char b[16];
	int n = snprintf(b, sizeof(b), "%d", (int)want - 1);
	bool ok = write(fd, b, n) == n;
	close(fd);
	return ok;
}

static int digits(pid_t p)
{
	int d = 1;
	while (p >= 10) {
		p /= 10;
		d++;
	}
	return d;
}

struct found {
	pid_t pid;
	int n;
	struct wd_event ev;
};

static void on_any(const struct wd_event *ev, void *arg)
{
	struct found *f = arg;
	f->n++;
	f->ev = *ev;
}

static int feed(struct wd_landlock_audit *a, int type, const char *rec,
		struct found *f)
{
	return wd_landlock_audit_feed(a, type, rec, strlen(rec), on_any, f);
}

/* The reader's assembly of events, on records in the kernel's format and
 * order, fed one by one as kauditd multicasts them. */
static void check_assembly(struct wd_landlock_audit *a)
{
	struct found f = {0};
	/* A task with an audit context: access, domain (first denial),
	 * SYSCALL, PROCTITLE, EOE, one serial. A drain may end after any of
	 * them: nothing is delivered before the event is whole. */
	int d = feed(a, AUDIT_LANDLOCK_ACCESS,
		     "audit(1.000:100): domain=1bb0000a1 blockers=fs.read_file "
		     "path=\"/etc/x\" dev=\"vda\" ino=12",
		     &f);
	d += feed(a, AUDIT_LANDLOCK_DOMAIN,
		  "audit(1.000:100): domain=1bb0000a1 status=allocated "
		  "mode=enforcing pid=5346 uid=1000 exe=\"/bin/t\" comm=\"t\"",
		  &f);
	int early = d + f.n;
	d += feed(a, AUDIT_SYSCALL,
		  "audit(1.000:100): arch=c000003e syscall=42 success=no "
		  "exit=-13 a0=3 items=0 ppid=5346 pid=5348 auid=4294967295 "
		  "uid=1000 gid=1000 euid=1000 comm=\"t\" key=(null)",
		  &f);
	d += feed(a, AUDIT_PROCTITLE, "audit(1.000:100): proctitle=74", &f);
	early += d;
	d += feed(a, AUDIT_EOE, "audit(1.000:100): ", &f);
	T_OK(early == 0 && d == 1 && f.n == 1 && f.ev.pid == 5348 &&
		 f.ev.uid == 1000 && f.ev.syscall_nr == 42 &&
		 !strcmp(f.ev.syscall, "connect") && f.ev.err == EACCES &&
		 f.ev.domain_id == 0x1bb0000a1ull &&
		 !strcmp(f.ev.target, "/etc/x") &&
		 wd_landlock_audit_domain_creator(a, 0x1bb0000a1ull) == 5346,
	     "assembly_waits_for_eoe",
	     "before EOE %d, delivered %d/%d, pid %d uid %u syscall %d '%s', "
	     "creator %d",
	     early, d, f.n, f.ev.pid, f.ev.uid, f.ev.syscall_nr, f.ev.syscall,
	     wd_landlock_audit_domain_creator(a, 0x1bb0000a1ull));

	/* No audit context: every record has its own serial, no SYSCALL or
	 * EOE, and another task's record may come between the access record
	 * and its domain record. The event waits for the domain record. */
	memset(&f, 0, sizeof(f));
	d = feed(a, AUDIT_LANDLOCK_ACCESS,
		 "audit(1.000:200): domain=1bb0000a2 blockers=fs.read_dir "
		 "path=\"/\" dev=\"vda\" ino=2",
		 &f);
	d += feed(a, AUDIT_USER,
		  "audit(1.000:201): pid=1 uid=0 auid=4294967295 msg='x'", &f);
	early = d;
	d += feed(a, AUDIT_LANDLOCK_DOMAIN,
		  "audit(1.000:202): domain=1bb0000a2 status=allocated "
		  "mode=enforcing pid=4242 uid=65534 exe=\"/bin/t\" "
		  "comm=\"t\"",
		  &f);
	T_OK(early == 0 && d == 1 && f.n == 1 && f.ev.pid == 4242 &&
		 f.ev.uid == 65534 && !strcmp(f.ev.kind, "fs.read_dir"),
	     "assembly_without_audit_context",
	     "before the domain record %d, delivered %d/%d, pid %d", early, d,
	     f.n, f.ev.pid);

	/* Whatever is kept back comes out at flush, as it is. */
	memset(&f, 0, sizeof(f));
	d = feed(a, AUDIT_LANDLOCK_ACCESS,
		 "audit(1.000:300): domain=1bb0000a3 blockers=fs.execute "
		 "path=\"/bin/sh\" dev=\"vda\" ino=3",
		 &f);
	d += wd_landlock_audit_flush(a, on_any, &f);
	T_OK(d == 1 && f.n == 1 && f.ev.domain_id == 0x1bb0000a3ull &&
		 !f.ev.pid && wd_landlock_audit_flush(a, on_any, &f) == 0,
	     "flush_delivers_kept_events", "delivered %d/%d", d, f.n);
}

static void on_ev(const struct wd_event *ev, void *arg)
{
	struct found *f = arg;
	if (ev->pid == f->pid && !strcmp(ev->target, "/etc/hostname")) {
		f->n++;
		f->ev = *ev;
	}
}

/* kauditd also prints every record to the console when no auditd runs; a
 * node busy with audit records (other tests, a slow console) delays the
 * multicast copy by seconds, so wait generously (returns on the first). */
static void wait_events(struct wd_landlock_audit *a, struct found *f, int ms)
{
	uint64_t end = wd_now_ns() + (uint64_t)ms * 1000000ull;
	while (wd_now_ns() < end) {
		struct pollfd pfd = {.fd = wd_landlock_audit_fd(a),
				     .events = POLLIN};
		poll(&pfd, 1, 100);
		wd_landlock_audit_read(a, on_ev, f);
		if (f->n)
			return;
	}
	wd_landlock_audit_flush(a, on_ev, f);
}

/* A barrier of the test's own, on a socket of its own: once its user
 * record is back, every reader of the group (the pooled one too) has been
 * given every record queued before it. */
static bool own_barrier(int ms)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
			NETLINK_AUDIT);
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
				 .nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1)};
	if (fd < 0 || bind(fd, (void *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	char tok[64];
	int tl = snprintf(tok, sizeof(tok), "warden-test-barrier %llu",
			  (unsigned long long)wd_now_ns());
	struct {
		struct nlmsghdr h;
		char t[64];
	} m = {.h = {.nlmsg_len = NLMSG_LENGTH(tl + 1),
		     .nlmsg_type = AUDIT_USER,
		     .nlmsg_flags = NLM_F_REQUEST}};
	memcpy(m.t, tok, tl);
	struct sockaddr_nl k = {.nl_family = AF_NETLINK};
	bool seen = false;
	if (sendto(fd, &m, m.h.nlmsg_len, 0, (void *)&k, sizeof(k)) < 0)
		ms = 0;
	uint64_t end = wd_now_ns() + (uint64_t)ms * 1000000ull;
	static char buf[1 << 16];
	while (!seen && wd_now_ns() < end) {
		struct pollfd pf = {fd, POLLIN, 0};
		poll(&pf, 1, 100);
		ssize_t n;
		while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0 ||
		       (n < 0 && errno == ENOBUFS)) {
			int left = (int)n;
			for (struct nlmsghdr *h = (void *)buf;
			     n > 0 && NLMSG_OK(h, left);
			     h = NLMSG_NEXT(h, left))
				if (h->nlmsg_type == AUDIT_USER &&
				    memmem(NLMSG_DATA(h),
					   h->nlmsg_len - NLMSG_HDRLEN, tok,
					   tl))
					seen = true;
		}
	}
	close(fd);
	return seen;
}

/* Readers are kept for the next call of the process: a kept one hands
 * nothing of what it queued while idle to its next user, and its barrier
 * (a user record through its own socket) delivers every record before
 * it. */
static void check_pool(void)
{
	struct wd_err err = {0};
	struct wd_landlock_audit *a = NULL, *b = NULL;
	struct found f = {0};
	int st;
	wd_landlock_audit_pool_clear();
	int rc = wd_landlock_audit_open(&a, false, &err);
	if (rc == -ENODATA) {
		T_SKIP("audit_pool", "kernel audit is off: no reader to keep");
		return;
	}
	T_OK(rc == 0, "audit_pool_open", "%s", err.msg);
	if (rc)
		return;
	f.pid = spawn(false, 0);
	waitpid(f.pid, &st, 0);
	rc = wd_landlock_audit_barrier(a, "test=1", 15000, on_ev, &f);
	wd_landlock_audit_flush(a, on_ev, &f);
	T_OK(rc == 0 && f.n == 1, "audit_barrier_delivers_earlier_records",
	     "barrier %d, %d events of child %d", rc, f.n, (int)f.pid);
	wd_landlock_audit_close(a);
	T_OK(wd_landlock_audit_pool_size() == 1, "audit_reader_kept",
	     "%d idle readers", wd_landlock_audit_pool_size());

	/* a denial while the reader is idle: in its queue, not for the next
	 * user */
	memset(&f, 0, sizeof(f));
	f.pid = spawn(false, 0);
	waitpid(f.pid, &st, 0);
	bool queued = own_barrier(15000);
	rc = wd_landlock_audit_open(&b, false, &err);
	T_OK(rc == 0 && b == a, "audit_reader_reused", "rc %d (%s), %s", rc,
	     err.msg, b == a ? "same reader" : "a new reader");
	if (rc)
		return;
	rc = wd_landlock_audit_barrier(b, "test=2", 15000, on_ev, &f);
	wd_landlock_audit_flush(b, on_ev, &f);
	if (!queued)
		T_SKIP("audit_reused_reader_drops_stale",
		       "the test's own barrier record did not come back");
	else
		T_OK(rc == 0 && f.n == 0, "audit_reused_reader_drops_stale",
		     "barrier %d, %d stale events of child %d delivered", rc,
		     f.n, (int)f.pid);
	/* and it still hears what comes now */
	memset(&f, 0, sizeof(f));
	f.pid = spawn(false, 0);
	waitpid(f.pid, &st, 0);
	rc = wd_landlock_audit_barrier(b, "test=3", 15000, on_ev, &f);
	wd_landlock_audit_flush(b, on_ev, &f);
	T_OK(rc == 0 && f.n == 1 &&
		 wd_landlock_audit_domain_creator(b, f.ev.domain_id) == f.pid,
	     "audit_reused_reader_hears_new",
	     "barrier %d, %d events of child %d", rc, f.n, (int)f.pid);
	wd_landlock_audit_close(b);
	wd_landlock_audit_pool_clear();
	T_OK(wd_landlock_audit_pool_size() == 0, "audit_pool_clear",
	     "%d idle readers left", wd_landlock_audit_pool_size());
}

int main(void)
{
	/* parser, on records in the kernel's format */
	struct wd_event ev;
	const char *r1 = "audit(1732000000.123:77): domain=195ba459b "
			 "blockers=fs.read_file path=\"/etc/shadow\" "
			 "dev=\"vda\" ino=1234";
	uint64_t ser = 0;
	int rc = wd_landlock_audit_parse(AUDIT_LANDLOCK_ACCESS, r1, strlen(r1),
					 &ev, &ser);
	T_OK(rc == 1 && ser == 77 && ev.domain_id == 0x195ba459bull &&
		 !strcmp(ev.target, "/etc/shadow") &&
		 !strcmp(ev.kind, "fs.read_file") &&
		 ev.source == WD_SRC_LANDLOCK &&
		 ev.ts_ns == 1732000000123000000ull,
	     "parse_access", "rc %d target '%s' kind '%s'", rc, ev.target,
	     ev.kind);
	const char *r2 = "audit(1.000:5): domain=1a blockers=fs.write_file,"
			 "fs.truncate path=2F746D702F6120622F63";
	rc = wd_landlock_audit_parse(AUDIT_LANDLOCK_ACCESS, r2, strlen(r2), &ev,
				     NULL);
	T_OK(rc == 1 && !strcmp(ev.target, "/tmp/a b/c") &&
		 !strcmp(ev.kind, "fs.write_file"),
	     "parse_hex_path", "target '%s' kind '%s'", ev.target, ev.kind);
	/* the longest blocker name the kernel writes (security/landlock/
	 * audit.c) is kept whole, not cut at the field's size */
	const char *r5 = "audit(1.000:7): domain=1b "
			 "blockers=scope.abstract_unix_socket "
			 "path=\"@/tmp/.X11-unix/X0\"";
	rc = wd_landlock_audit_parse(AUDIT_LANDLOCK_ACCESS, r5, strlen(r5), &ev,
				     NULL);
	T_OK(rc == 1 && !strcmp(ev.kind, "scope.abstract_unix_socket"),
	     "parse_long_kind_whole", "rc %d kind '%s'", rc, ev.kind);
	const char *r6 = "audit(1.000:8): domain=1b blockers=scope.signal "
			 "opid=4321 ocomm=\"sleep\"";
	rc = wd_landlock_audit_parse(AUDIT_LANDLOCK_ACCESS, r6, strlen(r6), &ev,
				     NULL);
	T_OK(rc == 1 && !strcmp(ev.kind, "scope.signal") &&
		 !strcmp(ev.target, "pid 4321"),
	     "parse_signal_target", "rc %d kind '%s' target '%s'", rc, ev.kind,
	     ev.target);
	/* a record's syscall number gets its name from libseccomp's table,
	 * the same one seccomp denials use (and a sendmsg-hook denial the
	 * sendmsg family's name, honestly without a number) */
	memset(&ev, 0, sizeof(ev));
	wd_event_set_syscall(&ev, 0xc000003e, 257);
	struct wd_event sm = {.source = WD_SRC_BPF, .syscall_nr = -1};
	wd_strlcpy(sm.kind, "sendmsg", sizeof(sm.kind));
	wd_event_complete(&sm);
	struct wd_event ll = {.source = WD_SRC_LANDLOCK, .syscall_nr = 59};
	wd_event_complete(&ll);
	T_OK(ev.syscall_nr == 257 && !strcmp(ev.syscall, "openat") &&
		 !strcmp(sm.syscall, WD_EVENT_SENDMSG_SYSCALLS) &&
		 sm.syscall_nr == -1 && !strcmp(ll.syscall, "execve"),
	     "syscall_names", "'%s' '%s' '%s'", ev.syscall, sm.syscall,
	     ll.syscall);
	const char *r3 = "audit(1.000:5): blockers=fs.read_file";
	T_OK(wd_landlock_audit_parse(AUDIT_LANDLOCK_ACCESS, r3, strlen(r3), &ev,
				     NULL) == -EINVAL,
	     "parse_rejects_malformed", "accepted a record without domain");
	/* Numbers are printed bare ("%d"): an even count of digits is not
	 * hex. Only untrusted strings (path, comm, ...) may be hex. */
	const char *r4 = "audit(1.000:6): domain=1a status=allocated "
			 "mode=enforcing pid=5347 uid=1000 syscall=42 "
			 "exe=2F62696E2F6120 comm=6162";
	char pid[16] = "", uid[16] = "", sc[16] = "", exe[32] = "",
	     comm[8] = "";
	wd_audit_field(r4, strlen(r4), "pid", pid, sizeof(pid));
	wd_audit_field(r4, strlen(r4), "uid", uid, sizeof(uid));
	wd_audit_field(r4, strlen(r4), "syscall", sc, sizeof(sc));
	wd_audit_field(r4, strlen(r4), "exe", exe, sizeof(exe));
	wd_audit_field(r4, strlen(r4), "comm", comm, sizeof(comm));
	T_OK(!strcmp(pid, "5347") && !strcmp(uid, "1000") &&
		 !strcmp(sc, "42") && !strcmp(exe, "/bin/a ") &&
		 !strcmp(comm, "ab"),
	     "field_numbers_not_hex",
	     "pid '%s' uid '%s' syscall '%s' exe '%s' comm '%s'", pid, uid, sc,
	     exe, comm);

	if (geteuid() != 0) {
		T_SKIP("landlock_audit", "needs root (CAP_AUDIT_READ/CONTROL)");
		return T_DONE();
	}
	int abi = syscall(__NR_landlock_create_ruleset, NULL, 0,
			  LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 7) {
		T_SKIP("landlock_audit",
		       "Landlock ABI %d < 7: no audit records", abi);
		return T_DONE();
	}
	struct wd_err err = {0};
	struct wd_landlock_audit *a = NULL;
	rc = wd_landlock_audit_open(&a, true, &err);
	T_OK(rc == 0, "audit_open", "%s", err.msg);
	if (rc)
		return T_DONE();
	/* fed before anything is read: no real record mixes in */
	check_assembly(a);

	/* The same check for a pid of 4 digits and one of 5: the denial
	 * must carry the child's pid whatever its width. */
	struct found f = {0};
	int st;
	static const pid_t near[] = {4000, 20000};
	for (size_t k = 0; k < WD_ARRAY_SIZE(near); k++) {
		char name[48];
		snprintf(name, sizeof(name), "same_exec_denial_event_pid%d",
			 digits(near[k]));
		memset(&f, 0, sizeof(f));
		for (int tries = 0; tries < 5; tries++) {
			if (!steer_pid(near[k] + tries * 997))
				break;
			f.pid = spawn(false, 0);
			if (digits(f.pid) == digits(near[k]))
				break;
			waitpid(f.pid, &st, 0);
			f.pid = 0;
		}
		if (!f.pid) {
			T_SKIP(name,
			       "no child with a %d-digit pid: "
			       "/proc/sys/kernel/ns_last_pid not writable "
			       "or pid_max below %d",
			       digits(near[k]), (int)near[k]);
			continue;
		}
		waitpid(f.pid, &st, 0);
		wait_events(a, &f, 15000);
		T_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && f.n == 1 &&
			 f.ev.domain_id && f.ev.err == EACCES &&
			 !strcmp(f.ev.kind, "fs.read_file") &&
			 wd_landlock_audit_domain_creator(a, f.ev.domain_id) ==
			     f.pid,
		     name, "child %d status %d, %d events, creator %d",
		     (int)f.pid, WEXITSTATUS(st), f.n,
		     wd_landlock_audit_domain_creator(a, f.ev.domain_id));
	}

	memset(&f, 0, sizeof(f));
	f.pid = spawn(true, LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON);
	waitpid(f.pid, &st, 0);
	wait_events(a, &f, 15000);
	T_OK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && f.n == 1,
	     "post_exec_denial_event_with_log_new_exec_on",
	     "cat status %d, %d events", WEXITSTATUS(st), f.n);

	memset(&f, 0, sizeof(f));
	f.pid = spawn(true, 0);
	waitpid(f.pid, &st, 0);
	wait_events(a, &f, 1000);
	T_OK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && f.n == 0,
	     "post_exec_not_logged_without_flag",
	     "cat status %d, %d events (kernel logs post-exec denials "
	     "without LOG_NEW_EXEC_ON?)",
	     WEXITSTATUS(st), f.n);
	T_OK(wd_landlock_audit_lost(a) == 0, "audit_no_loss", "lost %llu",
	     (unsigned long long)wd_landlock_audit_lost(a));
	/* while `a` holds audit on (a node with audit off too) */
	check_pool();
	/* puts audit back off if open() turned it on */
	wd_landlock_audit_close(a);
	return T_DONE();
}
