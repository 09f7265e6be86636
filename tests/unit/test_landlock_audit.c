/* Landlock denials arrive through the audit netlink multicast group and are
 * parsed into events: forked children restrict themselves and are denied a
 * file, for real. */
#include <fcntl.h>
#include <linux/landlock.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
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

struct found {
	pid_t pid;
	int n;
	struct wd_event ev;
};

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
	const char *r3 = "audit(1.000:5): blockers=fs.read_file";
	T_OK(wd_landlock_audit_parse(AUDIT_LANDLOCK_ACCESS, r3, strlen(r3), &ev,
				     NULL) == -EINVAL,
	     "parse_rejects_malformed", "accepted a record without domain");

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

	struct found f = {0};
	int st;
	f.pid = spawn(false, 0);
	waitpid(f.pid, &st, 0);
	wait_events(a, &f, 15000);
	T_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && f.n == 1 &&
		 f.ev.domain_id && f.ev.err == EACCES &&
		 !strcmp(f.ev.kind, "fs.read_file"),
	     "same_exec_denial_event", "child status %d, %d events",
	     WEXITSTATUS(st), f.n);

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
	wd_landlock_audit_close(a);
	return T_DONE();
}
