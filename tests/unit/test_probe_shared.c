/* What one-shot calls share between processes (enforce/probe_cache.c,
 * probe_cgroup.c): the audit answer, for a second, and the cgroup layout,
 * while every mount it names is the very same mount. Either is taken only
 * from a whole file root wrote for this boot; anything else is refused
 * (the audit answer is asked again, the layout read from mountinfo). Each
 * refusal has its control: the same file, untampered, is accepted. The
 * layout's mount check runs against the real kernel: a mount namespace's
 * copy of the very same mounts is other mounts. Runs as root. */
#include "t.h"

#include "common/util.h"
#include "enforce/probe.h"
#include "enforce/probe_int.h"

#include <fcntl.h>
#include <stddef.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/warden-test-pshared.XXXXXX";
static char memo[4200], cgl[4200];
static const char *boot;
static struct wd_probe_key key; /* this boot's and build's */

/* ---- the audit answer ---------------------------------------------------- */

static int mrd(uint64_t now, struct wd_features *f, uint64_t *at)
{
	memset(f, 0, sizeof(*f));
	f->audit_enabled = -9;
	return wd_probe_audit_memo_read(boot, now, f, at);
}

/* A recognisable answer: an audit state no kernel has. */
static void mfresh(uint64_t at)
{
	struct wd_features f;
	memset(&f, 0, sizeof(f));
	f.audit = true;
	f.audit_enabled = 7;
	f.audit_err = -42;
	unlink(memo);
	if (wd_probe_audit_memo_write(boot, &f, at) < 0)
		T_FAIL("memo_write", "%s: %s", memo, strerror(errno));
}

static void test_memo(void)
{
	struct wd_features f;
	uint64_t at = 0, t0 = wd_now_ns();
	mfresh(t0);
	struct stat st;
	T_OK(stat(memo, &st) == 0 && st.st_uid == 0 &&
		 (st.st_mode & 0777) == 0644,
	     "memo_written_root_0644", "uid %u mode %o", st.st_uid,
	     st.st_mode & 0777);
	int r = mrd(t0 + 1000, &f, &at);
	T_OK(r == 0 && f.audit && f.audit_enabled == 7 && f.audit_err == -42 &&
		 at == t0,
	     "memo_control_taken", "r %d enabled %d at %llu", r,
	     f.audit_enabled, (unsigned long long)at);
	/* a second old, or from the future, or another boot's: asked again */
	r = mrd(t0 + WD_AUDIT_MEMO_NS, &f, &at);
	T_OK(r == -ESTALE && f.audit_enabled == -9, "memo_second_old_stale",
	     "r %d", r);
	T_OK(mrd(t0 + WD_AUDIT_MEMO_NS - 1, &f, &at) == 0,
	     "memo_just_under_a_second_taken", "refused");
	T_OK(mrd(t0 - 1, &f, &at) == -ESTALE, "memo_future_stale", "taken");
	const char *b = boot;
	char other[40];
	wd_strlcpy(other, boot, sizeof(other));
	other[0] = other[0] == 'a' ? 'b' : 'a';
	boot = other;
	T_OK(mrd(t0 + 1000, &f, &at) == -ESTALE, "memo_other_boot_stale",
	     "taken");
	boot = b;

	/* not root's, writable by others, a symlink: refused */
	mfresh(t0);
	r = chown(memo, 65534, 65534);
	T_OK(mrd(t0 + 1000, &f, &at) == -EPERM && f.audit_enabled == -9,
	     "memo_not_root_refused", "taken");
	mfresh(t0);
	chmod(memo, 0646);
	T_OK(mrd(t0 + 1000, &f, &at) == -EPERM, "memo_world_writable_refused",
	     "taken");
	char real[4300];
	snprintf(real, sizeof(real), "%s.real", memo);
	mfresh(t0);
	rename(memo, real);
	r = symlink(real, memo);
	T_OK(r == 0 && mrd(t0 + 1000, &f, &at) == -EPERM,
	     "memo_symlink_refused", "taken (symlink %d)", r);
	/* ... and not written through: the link stays, its target too */
	struct wd_features g = {.audit_enabled = 1};
	r = wd_probe_audit_memo_write(boot, &g, t0);
	struct stat ls;
	T_OK(r == -EPERM && lstat(memo, &ls) == 0 && S_ISLNK(ls.st_mode) &&
		 mrd(0, &f, &at) == -EPERM,
	     "memo_symlink_not_written_through", "r %d", r);
	unlink(memo);
	unlink(real);
	/* someone else's file is left alone */
	mfresh(t0);
	r = chown(memo, 65534, 65534);
	r = wd_probe_audit_memo_write(boot, &g, t0);
	T_OK(r == -EPERM && stat(memo, &st) == 0 && st.st_uid == 65534,
	     "memo_others_file_not_written", "r %d uid %u", r, st.st_uid);

	/* a FIFO in its place (no reader): not waited on, refused */
	unlink(memo);
	r = mkfifo(memo, 0644);
	alarm(10); /* a write that blocks on it ends the test here */
	int wr = wd_probe_audit_memo_write(boot, &g, t0);
	alarm(0);
	T_OK(r == 0 && wr < 0 && mrd(t0 + 1000, &f, &at) == -EPERM,
	     "memo_fifo_refused_not_waited", "setup %d write %d", r, wr);
	unlink(memo);

	/* torn or damaged: refused; rewritten whole in place */
	mfresh(t0);
	r = truncate(memo, 30);
	T_OK(mrd(t0 + 1000, &f, &at) == -EINVAL, "memo_torn_refused", "taken");
	mfresh(t0);
	int fd = open(memo, O_RDWR);
	char c;
	if (pread(fd, &c, 1, 60) == 1) {
		c ^= 0x10;
		r = pwrite(fd, &c, 1, 60);
	}
	close(fd);
	T_OK(mrd(t0 + 1000, &f, &at) == -EINVAL, "memo_flipped_byte_refused",
	     "taken");
	fd = open(memo, O_WRONLY | O_APPEND);
	r = write(fd, "trailing garbage", 16);
	close(fd);
	struct stat before;
	stat(memo, &before);
	r = wd_probe_audit_memo_write(boot, &g, t0);
	T_OK(r == 0 && mrd(t0 + 1000, &f, &at) == 0 && f.audit_enabled == 1 &&
		 stat(memo, &st) == 0 && st.st_ino == before.st_ino,
	     "memo_rewritten_in_place", "r %d enabled %d", r, f.audit_enabled);
	/* a second link to it: never written through */
	char other_link[4300];
	snprintf(other_link, sizeof(other_link), "%s.link", memo);
	mfresh(t0);
	r = link(memo, other_link);
	int wl = wd_probe_audit_memo_write(boot, &g, t0);
	T_OK(r == 0 && wl == -EPERM && mrd(t0 + 1000, &f, &at) == 0 &&
		 f.audit_enabled == 7,
	     "memo_hard_link_not_written", "setup %d write %d", r, wl);
	unlink(other_link);

	/* whatever changes the audit state removes it */
	wd_probe_audit_memo_forget();
	T_OK(access(memo, F_OK) < 0 && errno == ENOENT, "memo_forgotten",
	     "still there");
}

/* ---- the cgroup layout --------------------------------------------------- */

static int cgl_load(struct wd_cgl_file *c)
{
	int fd = open(cgl, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, c, sizeof(*c));
	if (fd >= 0)
		close(fd);
	return n == (ssize_t)sizeof(*c) ? 0 : -1;
}

static int cgl_store(struct wd_cgl_file *c)
{
	c->sum = wd_crc32(c, offsetof(struct wd_cgl_file, sum));
	int fd = open(cgl, O_WRONLY | O_TRUNC);
	ssize_t n = fd < 0 ? -1 : write(fd, c, sizeof(*c));
	if (fd >= 0)
		close(fd);
	return n == (ssize_t)sizeof(*c) ? 0 : -1;
}

/* The file as it stands, with n_v1 set to a value no node has: a layout
 * read back with it came from the file. */
static int cgl_mark(void)
{
	struct wd_cgl_file c;
	if (cgl_load(&c) < 0)
		return -1;
	c.lay.n_v1 = 77;
	return cgl_store(&c);
}

static void test_layout(void)
{
	struct wd_cgroup_layout want, got;
	int r = wd_cgroup_layout_detect(&want);
	if (r < 0 || !want.v2_root[0]) {
		T_SKIP("cgl", "no cgroup2 mount here (%d)", r);
		return;
	}
	r = wd_cgroup_layout_cached(&key, &got);
	struct stat st;
	T_OK(r == 0 && !memcmp(&got, &want, sizeof(got)), "cgl_first_detected",
	     "r %d: differs from mountinfo's", r);
	/* whether this kernel has unique mount ids, asked here */
	struct statx sx;
	bool unique = statx(AT_FDCWD, want.v2_root, AT_SYMLINK_NOFOLLOW,
			    0x4000U /* STATX_MNT_ID_UNIQUE */, &sx) == 0 &&
		      (sx.stx_mask & 0x4000U);
	if (!unique) {
		/* kernels before 6.8: mount ids are reused, nothing kept */
		T_OK(stat(cgl, &st) < 0, "cgl_none_without_unique_ids",
		     "a file was kept");
		return;
	}
	T_OK(stat(cgl, &st) == 0, "cgl_kept", "no file written");
	T_OK(st.st_uid == 0 && (st.st_mode & 0777) == 0644,
	     "cgl_written_root_0644", "uid %u mode %o", st.st_uid,
	     st.st_mode & 0777);
	/* control: the same mounts, the file is taken */
	r = cgl_mark();
	T_OK(r == 0 && wd_cgroup_layout_cached(&key, &got) == 0 &&
		 got.n_v1 == 77,
	     "cgl_control_taken", "n_v1 %d (setup %d)", got.n_v1, r);

	/* a mount id that is not the mount's now: mountinfo again, and the
	 * file rewritten with the real ones */
	struct wd_cgl_file c;
	r = cgl_load(&c);
	c.lay.n_v1 = 77;
	c.mnt[0] ^= 1;
	r = r || cgl_store(&c);
	T_OK(r == 0 && wd_cgroup_layout_cached(&key, &got) == 0 &&
		 !memcmp(&got, &want, sizeof(got)),
	     "cgl_other_mount_detected", "n_v1 %d (setup %d)", got.n_v1, r);
	r = cgl_mark();
	T_OK(r == 0 && wd_cgroup_layout_cached(&key, &got) == 0 &&
		 got.n_v1 == 77,
	     "cgl_rewritten_taken", "n_v1 %d", got.n_v1);
	/* the v2 root's controllers read otherwise: detected */
	r = cgl_load(&c);
	wd_strlcpy(c.lay.v2_controllers, "bogus", sizeof(c.lay.v2_controllers));
	r = r || cgl_store(&c);
	T_OK(r == 0 && wd_cgroup_layout_cached(&key, &got) == 0 &&
		 !memcmp(&got, &want, sizeof(got)),
	     "cgl_other_controllers_detected", "v2 '%s'", got.v2_controllers);
	/* another boot's or build's, not root's, damaged: detected */
	struct wd_probe_key k2 = key;
	r = cgl_mark();
	wd_strlcpy(k2.boot_id, "00000000-0000-0000-0000-000000000000",
		   sizeof(k2.boot_id));
	T_OK(r == 0 && wd_cgroup_layout_cached(&k2, &got) == 0 &&
		 got.n_v1 != 77,
	     "cgl_other_boot_detected", "taken");
	/* the file is ours again (this boot's), then another build asks */
	r = wd_cgroup_layout_cached(&key, &got) || cgl_mark();
	k2 = key;
	wd_strlcpy(k2.build, "gnu:00", sizeof(k2.build));
	T_OK(r == 0 && wd_cgroup_layout_cached(&k2, &got) == 0 &&
		 got.n_v1 != 77,
	     "cgl_other_build_detected", "taken");
	r = wd_cgroup_layout_cached(&key, &got) || cgl_mark();
	T_OK(r == 0 && wd_cgroup_layout_cached(&key, &got) == 0 &&
		 got.n_v1 == 77,
	     "cgl_ours_again_taken", "n_v1 %d (setup %d)", got.n_v1, r);
	r = cgl_mark() || chown(cgl, 65534, 65534);
	T_OK(r == 0 && wd_cgroup_layout_cached(&key, &got) == 0 &&
		 got.n_v1 != 77,
	     "cgl_not_root_detected", "taken (setup %d)", r);
	/* a field only the checksum covers (n_v1 is not a mount) changed
	 * without it: detected */
	r = wd_cgroup_layout_cached(&key, &got) || cgl_load(&c);
	c.lay.n_v1 = 77;
	int fd = open(cgl, O_WRONLY | O_TRUNC);
	r = r || fd < 0 || write(fd, &c, sizeof(c)) != (ssize_t)sizeof(c);
	if (fd >= 0)
		close(fd);
	T_OK(r == 0 && wd_cgroup_layout_cached(&key, &got) == 0 &&
		 got.n_v1 != 77 && !memcmp(&got, &want, sizeof(got)),
	     "cgl_damaged_detected", "taken (setup %d)", r);

	/* the real kernel: in a mount namespace of its own (copies of the
	 * same mounts: new mounts) the file of the host's is not taken */
	r = cgl_mark();
	int p[2];
	if (r || pipe(p) < 0) {
		T_FAIL("cgl_other_namespace", "setup");
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		struct wd_cgroup_layout l;
		int n = -1;
		if (unshare(CLONE_NEWNS) == 0 &&
		    wd_cgroup_layout_cached(&key, &l) == 0)
			n = l.n_v1;
		_exit(write(p[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
	}
	close(p[1]);
	int n = -2;
	r = (int)read(p[0], &n, sizeof(n));
	close(p[0]);
	waitpid(pid, NULL, 0);
	T_OK(r == sizeof(n) && n == want.n_v1, "cgl_other_namespace_detected",
	     "n_v1 %d (the host's file taken?)", n);
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("probe_shared", "needs root (the files are root's)");
		return T_DONE();
	}
	if (!mkdtemp(dir)) {
		T_FAIL("probe_shared_dir", "mkdtemp: %s", strerror(errno));
		return T_DONE();
	}
	char rt[4100];
	snprintf(rt, sizeof(rt), "%s/rt", dir);
	if (mkdir(rt, 0711) < 0 || chmod(dir, 0711) < 0) {
		T_FAIL("probe_shared_dir", "mkdir: %s", strerror(errno));
		return T_DONE();
	}
	setenv("WARDEN_RUNTIME_DIR", rt, 1);
	snprintf(memo, sizeof(memo), "%s/probe-audit", rt);
	snprintf(cgl, sizeof(cgl), "%s/probe-cgroup", rt);
	struct wd_probe_key k;
	if (wd_probe_key_now(&k) < 0) {
		T_FAIL("probe_shared_key", "no boot id");
		return T_DONE();
	}
	key = k;
	boot = key.boot_id;
	test_memo();
	test_layout();
	wd_rm_rf(dir);
	return T_DONE();
}
