/* Per-call uids (sandbox/uidpool.h): the range parser, the ACL entry's
 * grant and revoke (mode and mask as they were), the settling walk (deep
 * trees, symbolic links never followed, set-uid cleared, ACLs dropped),
 * and two leases never sharing a uid. Needs root (chown, ACLs). */
#include "sandbox/uidpool.h"
#include "t.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define X 2000004090u /* the "call's" uid in these tests */

/* Whether a process of uid:gid (no supplementary groups) can make a
 * directory in dir: the kernel's own answer, from outside any sandbox. */
static bool can_create(const char *dir, uid_t uid, gid_t gid)
{
	pid_t p = fork();
	if (p == 0) {
		char f[128];
		snprintf(f, sizeof(f), "%s/by-%u-%u", dir, uid, gid);
		if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			_exit(2);
		_exit(mkdir(f, 0700) == 0 ? 0 : 1);
	}
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* An access ACL of n (tag, perm, id) triples, written raw. */
static int acl_set(int fd, const uint32_t (*e)[3], int n)
{
	char b[4 + 8 * 16];
	uint32_t ver = 2;
	memcpy(b, &ver, 4);
	for (int i = 0; i < n; i++) {
		uint16_t tag = (uint16_t)e[i][0], perm = (uint16_t)e[i][1];
		memcpy(b + 4 + 8 * i, &tag, 2);
		memcpy(b + 6 + 8 * i, &perm, 2);
		memcpy(b + 8 + 8 * i, &e[i][2], 4);
	}
	return fsetxattr(fd, "system.posix_acl_access", b, 4 + 8 * (size_t)n,
			 0);
}

static int owner_of(int dfd, const char *p)
{
	struct stat st;
	return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -1
							     : (int)st.st_uid;
}

int main(void)
{
	struct wd_uid_range r;
	struct wd_err e = {0};
	T_OK(wd_uid_range_parse("2000000000-2000004095", &r, &e) == 0 &&
		 r.first == 2000000000u && r.count == 4096,
	     "range-parse", "%s", e.msg);
	T_OK(wd_uid_range_parse("65000-66000", &r, &e) == -EINVAL,
	     "range-refuses-nobody", "accepted");
	T_OK(wd_uid_range_parse("0-10", &r, &e) == -EINVAL, "range-refuses-0",
	     "accepted");
	T_OK(wd_uid_range_parse("5-", &r, &e) == -EINVAL, "range-refuses-form",
	     "accepted");
	if (geteuid() != 0) {
		T_SKIP("settle", "needs root (chown, ACLs)");
		return T_DONE();
	}
	char tmpl[] = "/tmp/wd-settle.XXXXXX";
	char *dir = mkdtemp(tmpl);
	char rt[64];
	snprintf(rt, sizeof(rt), "%s/rt", dir);
	mkdir(rt, 0711);
	setenv("WARDEN_RUNTIME_DIR", rt, 1);
	/* the uid records and the ACL lock files: the test's own */
	char ud[80];
	snprintf(ud, sizeof(ud), "%s/uidrec", dir);
	mkdir(ud, 0700);
	setenv("WARDEN_UID_DIR", ud, 1);
	char rtu[80];
	snprintf(rtu, sizeof(rtu), "%s/uids", rt);
	mkdir(rtu, 0700);
	r = (struct wd_uid_range){2000004000u, 96};
	wd_uid_range_set(&r);

	/* ACL: granted, then the path exactly as it was */
	char w[64];
	snprintf(w, sizeof(w), "%s/w", dir);
	mkdir(w, 0750);
	chmod(w, 0750);
	int wfd = open(w, O_RDONLY | O_DIRECTORY);
	T_OK(wd_acl_grant(wfd, X, true, &r) == 0, "acl-grant", "failed");
	struct stat st;
	fstat(wfd, &st);
	T_OK((st.st_mode & 07777) == 0770 &&
		 fgetxattr(wfd, "system.posix_acl_access", NULL, 0) > 0,
	     "acl-grant-mask", "mode %o", st.st_mode & 07777);
	T_OK(wd_acl_grant(wfd, X + 1, true, &r) == 0, "acl-grant-second",
	     "failed");
	T_OK(wd_acl_revoke(wfd, X, &r) == 0, "acl-revoke-first", "failed");
	fstat(wfd, &st);
	T_OK((st.st_mode & 07777) == 0770, "acl-other-entry-keeps-mask",
	     "mode %o", st.st_mode & 07777);
	T_OK(wd_acl_revoke(wfd, X + 1, &r) == 0, "acl-revoke-last", "failed");
	fstat(wfd, &st);
	errno = 0;
	T_OK((st.st_mode & 07777) == 0750 &&
		 fgetxattr(wfd, "system.posix_acl_access", NULL, 0) < 0 &&
		 errno == ENODATA,
	     "acl-path-as-before", "mode %o, xattr errno %d",
	     st.st_mode & 07777, errno);

	/* Named entries masked down: user 1234 and group 4321 hold rwx, the
	 * owning group rwx, the mask r-x: none may create in w2. A grant
	 * raises the mask for the call's entry; none of them may gain by it,
	 * while one call or two hold the path, and the last revoke puts the
	 * ACL back byte for byte. */
	char w2[64];
	snprintf(w2, sizeof(w2), "%s/w2", dir);
	mkdir(w2, 0770);
	chmod(dir, 0755);
	int w2fd = open(w2, O_RDONLY | O_DIRECTORY);
	static const uint32_t masked[][3] = {{0x01, 7, ~0u}, {0x02, 7, 1234},
					     {0x04, 7, ~0u}, {0x08, 7, 4321},
					     {0x10, 5, ~0u}, {0x20, 0, ~0u}};
	T_OK(acl_set(w2fd, masked, 6) == 0, "acl-masked-set", "%s",
	     strerror(errno));
	char before[256], after[256];
	ssize_t nb =
	    fgetxattr(w2fd, "system.posix_acl_access", before, sizeof(before));
	T_OK(!can_create(w2, 1234, 9999) && !can_create(w2, 9998, 4321) &&
		 !can_create(w2, 9998, 0),
	     "acl-masked-before",
	     "a masked-down entry writes before any grant");
	T_OK(wd_acl_grant(w2fd, X, true, &r) == 0, "acl-masked-grant",
	     "failed");
	T_OK(can_create(w2, X, X), "acl-masked-call-writes",
	     "the call's uid cannot create");
	T_OK(!can_create(w2, 1234, 9999), "acl-masked-user-not-raised",
	     "user 1234's masked-down rwx became effective during the call");
	T_OK(!can_create(w2, 9998, 4321), "acl-masked-group-not-raised",
	     "group 4321's masked-down rwx became effective during the call");
	T_OK(!can_create(w2, 9998, 0), "acl-masked-owner-group-not-raised",
	     "the owning group's masked-down rwx became effective");
	T_OK(wd_acl_grant(w2fd, X + 1, true, &r) == 0 &&
		 wd_acl_revoke(w2fd, X, &r) == 0,
	     "acl-masked-second", "failed");
	T_OK(!can_create(w2, 1234, 9999) && !can_create(w2, 9998, 4321) &&
		 can_create(w2, X + 1, X + 1),
	     "acl-masked-second-holds", "lowered entries raised, or X+1 lost");
	T_OK(wd_acl_revoke(w2fd, X + 1, &r) == 0, "acl-masked-revoke-last",
	     "failed");
	ssize_t na =
	    fgetxattr(w2fd, "system.posix_acl_access", after, sizeof(after));
	T_OK(nb > 0 && na == nb && !memcmp(before, after, (size_t)nb),
	     "acl-masked-as-before", "%zd bytes before, %zd after", nb, na);
	/* four processes granting and revoking at once, over and over: the
	 * lock file a last revoke unlinks is never held twice (a lost
	 * record would leave the mask raised or an entry lowered) */
	pid_t kids[4];
	for (int k = 0; k < 4; k++)
		if ((kids[k] = fork()) == 0) {
			int ok = 1;
			for (int i = 0; i < 60; i++)
				ok &= wd_acl_grant(w2fd, X - 10 - k, true,
						   &r) == 0 &&
				      wd_acl_revoke(w2fd, X - 10 - k, &r) == 0;
			_exit(ok ? 0 : 1);
		}
	int kids_ok = 1;
	for (int k = 0; k < 4; k++) {
		int ws = 0;
		waitpid(kids[k], &ws, 0);
		kids_ok &= WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
	}
	na = fgetxattr(w2fd, "system.posix_acl_access", after, sizeof(after));
	T_OK(kids_ok && na == nb && !memcmp(before, after, (size_t)nb),
	     "acl-concurrent-as-before", "children ok %d, %zd bytes vs %zd",
	     kids_ok, na, nb);
	close(w2fd);
	/* the last revokes took their lock files with them */
	int left = 0;
	DIR *ud_d = opendir(ud);
	for (struct dirent *de; ud_d && (de = readdir(ud_d));)
		left += !strncmp(de->d_name, "acl-", 4);
	if (ud_d)
		closedir(ud_d);
	T_OK(ud_d && left == 0, "acl-lock-files-gone", "%d left", left);

	/* An entry of the range already there but no record of it (lost,
	 * or not warden's): the mask as found is lowered to, not none */
	char w3[64];
	snprintf(w3, sizeof(w3), "%s/w3", dir);
	mkdir(w3, 0770);
	int w3fd = open(w3, O_RDONLY | O_DIRECTORY);
	static const uint32_t foreign[][3] = {{0x01, 7, ~0u},	{0x02, 7, 1234},
					      {0x02, 5, X - 2}, {0x04, 7, ~0u},
					      {0x10, 5, ~0u},	{0x20, 0, ~0u}};
	T_OK(acl_set(w3fd, foreign, 6) == 0 &&
		 wd_acl_grant(w3fd, X, true, &r) == 0,
	     "acl-norecord-grant", "%s", strerror(errno));
	T_OK(can_create(w3, X, X) && !can_create(w3, 1234, 9999) &&
		 !can_create(w3, 9998, 0),
	     "acl-norecord-not-raised",
	     "a masked-down entry became effective (no record)");
	T_OK(wd_acl_revoke(w3fd, X, &r) == 0, "acl-norecord-revoke", "failed");
	close(w3fd);

	/* settle: a 3,000-deep tree of X's, a symlink of X's pointing at a
	 * file of X's outside the write path, a set-uid file */
	char out[80];
	snprintf(out, sizeof(out), "%s/outside", dir);
	close(open(out, O_CREAT | O_WRONLY, 0644));
	chown(out, X, X);
	int cur = dup(wfd);
	for (int i = 0; i < 3000; i++) {
		mkdirat(cur, "d", 0755);
		fchownat(cur, "d", X, X, 0);
		int n = openat(cur, "d", O_RDONLY | O_DIRECTORY);
		close(cur);
		cur = n;
	}
	close(openat(cur, "leaf", O_CREAT | O_WRONLY, 04755));
	fchownat(cur, "leaf", X, X, 0);
	fchmodat(cur, "leaf", 04755, 0);
	symlinkat(out, cur, "link");
	fchownat(cur, "link", X, X, AT_SYMLINK_NOFOLLOW);
	close(openat(wfd, "mine", O_CREAT | O_WRONLY, 0644)); /* root's */
	long n = wd_settle_tree(wfd, X, X, 4242, 4243);
	T_OK(n == 3002, "settle-counts", "%ld entries changed", n);
	fstatat(cur, "leaf", &st, 0);
	T_OK(st.st_uid == 4242 && st.st_gid == 4243 && !(st.st_mode & 04000),
	     "settle-deep-leaf-setuid-cleared", "uid %u mode %o", st.st_uid,
	     st.st_mode);
	T_OK(owner_of(cur, "link") == 4242, "settle-symlink-itself", "owner %d",
	     owner_of(cur, "link"));
	T_OK(owner_of(AT_FDCWD, out) == (int)X, "settle-never-follows-link",
	     "the link's target was re-owned");
	T_OK(owner_of(wfd, "mine") == 0, "settle-others-untouched", "owner %d",
	     owner_of(wfd, "mine"));
	T_OK(wd_settle_tree(wfd, X, X, 4242, 4243) == 0, "settle-idempotent",
	     "second pass changed something");
	close(cur);

	/* leases: two at once never share a uid; a range of one refuses */
	struct wd_uid_lease *a = NULL, *b = NULL, *c = NULL;
	struct wd_uid_range one = {2000004050u, 2};
	wd_uid_range_set(&one);
	int ra = wd_uid_acquire(&a, "a", &e), rb = wd_uid_acquire(&b, "b", &e);
	int rc = wd_uid_acquire(&c, "c", &e);
	T_OK(ra == 0 && rb == 0 && a->uid != b->uid, "lease-distinct",
	     "ra %d rb %d", ra, rb);
	T_OK(rc == -EAGAIN && strstr(e.msg, "no free uid"), "lease-exhausted",
	     "rc %d: %s", rc, e.msg);
	uid_t au = a ? a->uid : 0;
	wd_uid_release(a, true);
	rc = wd_uid_acquire(&c, "c", &e);
	T_OK(rc == 0 && c->uid == au, "lease-reused-after-release", "rc %d: %s",
	     rc, e.msg);
	wd_uid_release(b, true);
	wd_uid_release(c, true);
	close(wfd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_OK(system(cmd) == 0, "cleanup", "rm failed");
	return T_DONE();
}
