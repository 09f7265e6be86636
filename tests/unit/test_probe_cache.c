/* The per-boot probe cache (enforce/probe_cache.c): a cache file is used
 * only when root wrote it for this boot, kernel and build, and is whole;
 * anything else is refused (and a process probes again). Each refusal is
 * checked against a control: the same file, untampered, is accepted. Runs
 * as root (the owner checks need chown). */
#include "t.h"

#include "common/util.h"
#include "enforce/probe.h"
#include "enforce/probe_int.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/warden-test-pcache.XXXXXX";
static char path[4200];

/* A recognisable answer: a Landlock ABI no kernel has. */
static void sample(struct wd_features *f)
{
	memset(f, 0, sizeof(*f));
	wd_strlcpy(f->kernel_release, "test-release",
		   sizeof(f->kernel_release));
	f->landlock_abi = 4242;
	f->seccomp_notify = true;
}

static int rd(const struct wd_probe_key *k, struct wd_features *f)
{
	memset(f, 0, sizeof(*f));
	return wd_probe_cache_read(path, k, f);
}

/* wd_probe() in a child process whose runtime dir is d/rt, a one-shot
 * call's (wd_probe_one_call) or not: its features in *out. */
static int probe_child(const char *d, bool one, struct wd_features *out)
{
	int p[2];
	memset(out, 0, sizeof(*out));
	if (pipe(p) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		char rt[4200];
		snprintf(rt, sizeof(rt), "%s/rt", d);
		setenv("WARDEN_RUNTIME_DIR", rt, 1);
		if (one)
			wd_probe_one_call();
		const struct wd_features *f = wd_probe();
		_exit(write(p[1], f, sizeof(*f)) == (ssize_t)sizeof(*f) ? 0
									: 1);
	}
	close(p[1]);
	ssize_t n = pid > 0 ? wd_probe_read_full(p[0], out, sizeof(*out)) : -1;
	close(p[0]);
	int st = 0;
	if (pid > 0)
		waitpid(pid, &st, 0);
	return n == (ssize_t)sizeof(*out) && WIFEXITED(st) &&
		       WEXITSTATUS(st) == 0
		   ? 0
		   : -EIO;
}

static void fresh(const struct wd_probe_key *k)
{
	struct wd_features f;
	sample(&f);
	unlink(path);
	if (wd_probe_cache_write(path, k, &f) < 0)
		T_FAIL("cache_write", "%s: %s", path, strerror(errno));
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("probe_cache", "needs root (the cache is root's)");
		return T_DONE();
	}
	if (!mkdtemp(dir)) {
		T_FAIL("probe_cache_dir", "mkdtemp: %s", strerror(errno));
		return T_DONE();
	}
	snprintf(path, sizeof(path), "%s/rt/probe-kernel", dir);
	struct wd_probe_key k;
	int r = wd_probe_key_now(&k);
	T_OK(r == 0 && k.boot_id[0] && k.release[0] && k.build[0],
	     "probe_key_now", "r %d boot '%s' build '%s'", r, k.boot_id,
	     k.build);
	struct wd_features f;

	/* control: what was written is read back */
	fresh(&k);
	struct stat st;
	T_OK(stat(path, &st) == 0 && st.st_uid == 0 &&
		 (st.st_mode & 0777) == 0644,
	     "cache_written_root_0644", "uid %u mode %o", st.st_uid,
	     st.st_mode & 0777);
	r = rd(&k, &f);
	T_OK(r == 0 && f.landlock_abi == 4242, "cache_control_trusted",
	     "r %d abi %d", r, f.landlock_abi);

	/* another boot, kernel, build: stale */
	struct wd_probe_key k2 = k;
	k2.boot_id[0] ^= 1;
	r = rd(&k2, &f);
	T_OK(r == -ESTALE && f.landlock_abi != 4242, "cache_other_boot_stale",
	     "r %d", r);
	k2 = k;
	wd_strlcpy(k2.release, "0.0.0-other", sizeof(k2.release));
	T_OK(rd(&k2, &f) == -ESTALE, "cache_other_kernel_stale", "trusted");
	k2 = k;
	wd_strlcpy(k2.build, "gnu:00", sizeof(k2.build));
	T_OK(rd(&k2, &f) == -ESTALE, "cache_other_build_stale", "trusted");
	/* other namespace sysctls: stale for a key that has them; a key
	 * without them (a one-shot call's) matches on boot, kernel, build */
	k2 = k;
	k2.sysctl[0] = k2.sysctl[0] == '7' ? '8' : '7';
	T_OK(rd(&k2, &f) == -ESTALE, "cache_other_sysctls_stale", "trusted");
	struct wd_probe_key kb;
	r = wd_probe_key_base(&kb);
	T_OK(r == 0 && !kb.sysctl[0] && !strcmp(kb.boot_id, k.boot_id) &&
		 !strcmp(kb.release, k.release) && !strcmp(kb.build, k.build),
	     "key_base_no_sysctls", "r %d sysctl '%s'", r, kb.sysctl);
	r = rd(&kb, &f);
	T_OK(r == 0 && f.landlock_abi == 4242, "cache_base_key_matches", "r %d",
	     r);
	k2 = kb;
	wd_strlcpy(k2.build, "gnu:00", sizeof(k2.build));
	T_OK(rd(&k2, &f) == -ESTALE, "cache_base_key_other_build_stale",
	     "trusted");
	k2 = kb;
	k2.boot_id[0] ^= 1;
	T_OK(rd(&k2, &f) == -ESTALE, "cache_base_key_other_boot_stale",
	     "trusted");
	r = wd_probe_key_sysctls(&kb);
	T_OK(r == 0 && !memcmp(&kb, &k, sizeof(k)), "key_base_plus_sysctls",
	     "r %d: not the whole key", r);

	/* not root's */
	fresh(&k);
	r = chown(path, 65534, 65534);
	r = rd(&k, &f);
	T_OK(r == -EPERM && f.landlock_abi != 4242, "cache_not_root_refused",
	     "r %d", r);
	fresh(&k);
	r = chown(path, 0, 65534);
	chmod(path, 0664);
	T_OK(rd(&k, &f) == -EPERM, "cache_group_writable_refused", "trusted");
	fresh(&k);
	chmod(path, 0646);
	T_OK(rd(&k, &f) == -EPERM, "cache_world_writable_refused", "trusted");

	/* a symlink to a good file: not followed */
	char real[4300];
	snprintf(real, sizeof(real), "%s.real", path);
	fresh(&k);
	rename(path, real);
	r = symlink(real, path);
	T_OK(r == 0 && rd(&k, &f) == -EPERM, "cache_symlink_refused",
	     "trusted (symlink %d)", r);
	unlink(path);
	unlink(real);

	/* garbage, truncated, a flipped byte: not a whole cache */
	fresh(&k);
	int fd = open(path, O_WRONLY | O_TRUNC);
	r = write(fd, "garbage\n", 8);
	close(fd);
	T_OK(rd(&k, &f) == -EINVAL, "cache_garbage_refused", "trusted");
	fresh(&k);
	r = truncate(path, 100);
	T_OK(rd(&k, &f) == -EINVAL, "cache_truncated_refused", "trusted");
	fresh(&k);
	fd = open(path, O_RDWR);
	char b;
	off_t at = 600; /* inside the features */
	if (pread(fd, &b, 1, at) == 1) {
		b ^= 0x40;
		r = pwrite(fd, &b, 1, at);
	}
	close(fd);
	T_OK(rd(&k, &f) == -EINVAL, "cache_flipped_byte_refused", "trusted");

	/* a rewrite replaces a tampered file (and a symlink) in place */
	r = chown(path, 65534, 65534);
	struct wd_features g;
	sample(&g);
	r = wd_probe_cache_write(path, &k, &g);
	T_OK(r == 0 && rd(&k, &f) == 0, "cache_rewrite_replaces_tampered",
	     "r %d", r);
	unlink(path);
	r = symlink("/etc/passwd", path);
	r = wd_probe_cache_write(path, &k, &g);
	struct stat ps;
	T_OK(r == 0 && lstat(path, &ps) == 0 && S_ISREG(ps.st_mode) &&
		 lstat("/etc/passwd", &ps) == 0 && ps.st_size != 2592,
	     "cache_rewrite_replaces_symlink", "r %d", r);

	/* a good cache in a directory someone else could write, or behind
	 * a symlink in place of the directory: not trusted (read) */
	char rt[400], alt[400];
	snprintf(rt, sizeof(rt), "%s/rt", dir);
	snprintf(alt, sizeof(alt), "%s/alt", dir);
	fresh(&k);
	T_OK(rd(&k, &f) == 0, "cache_dir_control_trusted", "refused");
	chmod(rt, 0771);
	T_OK(rd(&k, &f) == -EPERM, "cache_dir_group_writable_refused",
	     "trusted");
	chmod(rt, 0717);
	T_OK(rd(&k, &f) == -EPERM, "cache_dir_world_writable_refused",
	     "trusted");
	chmod(rt, 0711);
	r = chown(rt, 65534, 65534);
	T_OK(r == 0 && rd(&k, &f) == -EPERM, "cache_dir_not_root_refused",
	     "trusted (chown %d)", r);
	r = chown(rt, 0, 0) || rename(rt, alt) || symlink(alt, rt);
	T_OK(r == 0 && rd(&k, &f) == -EPERM, "cache_dir_symlink_refused",
	     "trusted (setup %d)", r);
	r = unlink(rt) || rename(alt, rt);
	T_OK(r == 0 && rd(&k, &f) == 0, "cache_dir_restored_trusted",
	     "refused (setup %d)", r);

	/* a directory someone else could write, or a symlink to one: no
	 * file is written there */
	char odir[400], opath[450], ldir[400];
	snprintf(odir, sizeof(odir), "%s/open", dir);
	snprintf(opath, sizeof(opath), "%s/seccomp/x", odir);
	r = mkdir(odir, 0777) || chmod(odir, 0777);
	snprintf(ldir, sizeof(ldir), "%s/seccomp", odir);
	r = mkdir(ldir, 0777) || chmod(ldir, 0777);
	r = wd_root_file_write(opath, "x", 1);
	T_OK(r == -EPERM && access(opath, F_OK) < 0, "write_dir_others_refused",
	     "r %d", r);
	r = rmdir(ldir) || symlink("/tmp", ldir);
	r = wd_root_file_write(opath, "x", 1);
	T_OK(r == -EPERM && access("/tmp/x", F_OK) < 0,
	     "write_dir_symlink_refused", "r %d", r);
	unlink(ldir);

	/* wd_probe() itself: a one-shot call's process takes a cache written
	 * under other namespace sysctls (it decides nothing on their answers,
	 * which it then does not claim to know); any other process re-probes
	 * and writes the cache under the whole key. (A first process writes
	 * the cache, the next trusts it, a tampered one is re-probed: see
	 * tests/integration/exec_probe_cache.sh.) */
	snprintf(path, sizeof(path), "%s/rt/probe-kernel", dir);
	struct wd_probe_key ko = k;
	ko.sysctl[0] = ko.sysctl[0] == '7' ? '8' : '7';
	fresh(&ko);
	struct wd_features c;
	r = probe_child(dir, true, &c);
	T_OK(r == 0 && c.from_cache && c.landlock_abi == 4242 &&
		 c.userns_err == -EAGAIN && c.ns_err[0] == -EAGAIN &&
		 c.ns_err[WD_NS_N - 1] == -EAGAIN,
	     "one_shot_takes_cache_not_ns_answers",
	     "r %d from_cache %d abi %d userns_err %d", r, c.from_cache,
	     c.landlock_abi, c.userns_err);
	r = probe_child(dir, false, &c);
	T_OK(r == 0 && !c.from_cache && c.landlock_abi != 4242 &&
		 c.userns_err != -EAGAIN,
	     "other_sysctls_reprobed", "r %d from_cache %d abi %d", r,
	     c.from_cache, c.landlock_abi);
	r = rd(&k, &f);
	T_OK(r == 0 && f.landlock_abi == c.landlock_abi,
	     "reprobe_written_whole_key", "r %d", r);
	/* the one-shot call that must probe writes the whole key too */
	unlink(path);
	r = probe_child(dir, true, &c);
	T_OK(r == 0 && !c.from_cache && rd(&k, &f) == 0,
	     "one_shot_probe_writes_whole_key", "r %d from_cache %d", r,
	     c.from_cache);
	wd_rm_rf(dir);
	return T_DONE();
}
