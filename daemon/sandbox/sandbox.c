/* Dispatch a call to its tier's runner; what every tier shares. */
#include "sandbox/sandbox.h"
#include "common/log.h"
#include "enforce/probe.h"
#include "sandbox/cgroup.h"
#include "sandbox/pool.h"
#include "sandbox/reaper.h"
#include "sandbox/uidpool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include <string.h>

static struct wd_pool *g_pool;

void wd_sandbox_use_pool(struct wd_pool *p)
{
	g_pool = p;
}

static const struct wd_runner *runner_for(int tier)
{
	switch (tier) {
	case 1:
	case 2:
		return &wd_runner_native;
	case 3:
		return &wd_runner_gvisor;
	}
	return NULL;
}

int wd_sandbox_identity(const struct wd_call *in, struct wd_call *out,
			struct wd_uid_lease **ls, struct wd_result *res,
			struct wd_err *err)
{
	const struct wd_manifest *m = in->manifest;
	int r = wd_uid_acquire(ls, res->call_id, err);
	if (r < 0)
		return r;
	r = wd_uid_grant_paths(*ls, in->caller_uid, in->caller_gid,
			       m->fs_write.v, m->fs_write.n,
			       m->tier == WD_TIER_3, err);
	if (r < 0) {
		wd_uid_release(*ls, true);
		*ls = NULL;
		return r;
	}
	*out = *in;
	out->run_uid = (*ls)->uid;
	out->run_gid = (*ls)->gid;
	res->run_uid = out->run_uid;
	res->run_gid = out->run_gid;
	return 0;
}

void wd_sandbox_identity_end(struct wd_uid_lease *ls,
			     const struct wd_result *res)
{
	if (!ls)
		return;
	/* After the runner's own teardown (the reaper runs its jobs in
	 * order): the call's processes are dead, its cgroup gone. */
	wd_uid_release_async(ls, !res->procs_left);
}

int wd_sandbox_run(const struct wd_call *call, struct wd_result *res,
		   struct wd_err *err)
{
	const struct wd_manifest *m = call->manifest;
	memset(res, 0, sizeof(*res));
	res->status = WD_ST_SANDBOX_ERROR;
	res->exit_code = 125;
	if (!m)
		return wd_err_set(err, -EINVAL, "no manifest");
	res->tier = m->tier;
	if (call->call_id)
		wd_strlcpy(res->call_id, call->call_id, sizeof(res->call_id));
	else
		wd_rand_hex(res->call_id, 16);
	const struct wd_runner *rn = runner_for(m->tier);
	if (!rn)
		return wd_err_set(err, -EINVAL, "tier %d: no such tier",
				  m->tier);
	struct wd_call c = *call;
	uint64_t t0 = wd_now_ns();
	int r;
	if (m->tier == WD_TIER_3 && g_pool && !call->no_pool) {
		/* Registration is idempotent; a shape that cannot run in tier
		 * 3 fails here exactly as the cold path would. A warm
		 * sandbox holds a uid of its own from its boot (pool.c). */
		r = wd_pool_register(g_pool, m, call->argv, c.caller_uid,
				     c.caller_gid, err);
		if (r == 0)
			r = wd_pool_run(g_pool, &c, c.tenant, res, err);
	} else {
		struct wd_uid_lease *ls = NULL;
		r = wd_sandbox_identity(call, &c, &ls, res, err);
		if (r == 0) {
			r = rn->run(&c, res, err);
			res->run_uid = c.run_uid;
			res->run_gid = c.run_gid;
			wd_sandbox_identity_end(ls, res);
		}
	}
	res->duration_ns = wd_now_ns() - t0;
	if (r < 0) {
		res->status = WD_ST_SANDBOX_ERROR;
		res->exit_code = 125;
	}
	return r;
}

static bool is_call_id(const char *s)
{
	size_t n = strlen(s);
	if (!strncmp(s, "wd-", 3))
		s += 3, n -= 3;
	if (n != 16)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* Older than any call being set up (seconds) or run without a process. */
#define WD_SWEEP_AGE_S 120

static bool stale(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 &&
	       time(NULL) - st.st_mtime > WD_SWEEP_AGE_S;
}

/* Spare call directories: calls/spare-<k>, empty, root's, 01711. A call
 * takes one by renaming it to its own name and gives it back the same
 * way: on an ext4 runtime dir a directory made and removed per call cost
 * a mkdir, a chmod, an rmdir and the eviction of the deleted inode at
 * the lock's close (~0.1-0.2 ms of CPU, and waits on the journal). No
 * call id: a sweep (this warden's or an older one's) passes them by; at
 * most WD_CALLDIR_SPARES, one per call running at once. */
#define WD_CALLDIR_SPARES 4

static int spare_name(char *out, size_t len, const char *calldir, int k)
{
	const char *base = strrchr(calldir, '/');
	if (!base ||
	    snprintf(out, len, "%.*sspare-%d", (int)(base + 1 - calldir),
		     calldir, k) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* Take a spare under calldir's name, locked: its fd, or -1. Takers race
 * on the lock, and a taker that opened a spare's name just before another
 * took it (and a third gave another directory back under that name) holds
 * the lock of a directory that is no longer there: the name is renamed
 * only if it is still the directory locked, which nobody else may move
 * while we hold its lock. Its mtime is made now: a sweep takes an old
 * call directory whose cgroup is not there yet for a stale one. */
static int take_spare(const char *calldir)
{
	for (int k = 0; k < WD_CALLDIR_SPARES; k++) {
		char sp[600];
		if (spare_name(sp, sizeof(sp), calldir, k) < 0)
			return -1;
		int fd =
		    open(sp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat a, b;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 &&
		    lstat(sp, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino && S_ISDIR(a.st_mode) &&
		    a.st_uid == 0 && (a.st_mode & 07777) == 01711 &&
		    a.st_nlink == 2 && futimens(fd, NULL) == 0 &&
		    rename(sp, calldir) == 0)
			return fd;
		close(fd);
	}
	return -1;
}

bool wd_sandbox_spare_calldir(const char *calldir, int fd)
{
	/* empty: "." and ".." only (a call's directory holds nothing of the
	 * call: sandbox/native.c rm_calldir) */
	char buf[512];
	long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
	int ents = 0;
	for (long off = 0; n > 0 && off < n;) {
		struct {
			uint64_t ino;
			int64_t off;
			unsigned short reclen;
			unsigned char type;
			char name[];
		} *d = (void *)(buf + off);
		if (strcmp(d->name, ".") && strcmp(d->name, ".."))
			return false;
		ents++;
		off += d->reclen;
	}
	if (n < 0 || ents != 2)
		return false;
	for (int k = 0; k < WD_CALLDIR_SPARES; k++) {
		char sp[600];
		if (spare_name(sp, sizeof(sp), calldir, k) < 0)
			return false;
		if (renameat2(AT_FDCWD, calldir, AT_FDCWD, sp,
			      RENAME_NOREPLACE) == 0) {
			close(fd);
			return true;
		}
		if (errno != EEXIST)
			return false;
	}
	return false;
}

int wd_sandbox_own_calldir(const char *calldir, int *fd, struct wd_err *err)
{
	/* made and locked under a name that is no call id (a sweep passes
	 * it by), then renamed: under its own name it is never unlocked
	 * while its call lives. The lock is on the directory itself: a lock
	 * file in it cost a file made, renamed, unlinked and evicted per
	 * call (~0.3 ms on an ext4 runtime dir). */
	char tmp[600];
	const char *base = strrchr(calldir, '/');
	if (!base ||
	    snprintf(tmp, sizeof(tmp), "%.*snew-%s", (int)(base + 1 - calldir),
		     calldir, base + 1) >= (int)sizeof(tmp))
		return wd_err_set(err, -ENAMETOOLONG, "call dir '%s': %s",
				  calldir, strerror(ENAMETOOLONG));
	*fd = take_spare(calldir);
	if (*fd >= 0)
		return 0;
	int e = 0;
	if (mkdir(tmp, 0711) < 0)
		e = -errno;
	/* explicit: a umask must not take the call's uid's way through;
	 * the sticky bit says "locked on itself" (owner_gone) */
	else if (chmod(tmp, 01711) < 0 ||
		 (*fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				      O_CLOEXEC)) < 0 ||
		 flock(*fd, LOCK_EX | LOCK_NB) < 0 ||
		 rename(tmp, calldir) < 0) {
		e = -errno;
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		rmdir(tmp);
	}
	if (e)
		return wd_err_set(err, e, "call dir '%s': %s", calldir,
				  strerror(-e));
	return 0;
}

#define CALL_ID_MAX 24 /* "wd-" + 16 hex + NUL fits */

/* Call ids whose directory's owner lock is free: the process that ran the
 * call is gone (a daemon killed with -9), however recent the call. */
struct dead {
	char (*id)[CALL_ID_MAX];
	int n;
};

static bool owner_gone(const char *calldir)
{
	char p[900];
	snprintf(p, sizeof(p), "%s/.owner", calldir);
	/* an older warden's lock file; else, where the sticky bit says so,
	 * the lock on the directory itself (wd_sandbox_own_calldir). Neither:
	 * an older warden's directory still being set up, age decides */
	struct stat st;
	int fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT && lstat(calldir, &st) == 0 &&
	    S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX))
		fd = open(calldir,
			  O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	bool gone = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return gone;
}

/* "new-<call id>": a call directory being made (wd_sandbox_own_calldir) */
static bool is_new_calldir(const char *s)
{
	return !strncmp(s, "new-", 4) && is_call_id(s + 4);
}

static bool is_dead(const struct dead *dd, const char *id)
{
	for (int i = 0; dd && i < dd->n; i++)
		if (!strcmp(dd->id[i], id))
			return true;
	return false;
}

/* rmdir every empty (process-free) call cgroup under <root>/warden. A
 * cgroup with processes belongs to a live call (another warden exec) and
 * is left alone. */
static int sweep_hierarchy(const char *root, const struct dead *dd)
{
	char dir[512];
	int n = 0;
	snprintf(dir, sizeof(dir), "%s/warden", root);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!is_call_id(e->d_name))
			continue;
		char p[800];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		/* A leaf only minutes old may belong to a call being set up
		 * right now (created, no process yet): never race it, unless
		 * its owner is known to be gone. */
		bool dead = is_dead(dd, e->d_name);
		if (!stale(p) && !dead)
			continue;
		/* Its supervisor is gone: whatever still runs there (a tool
		 * daemonised past a `warden exec` killed with -9) is
		 * confined, but unattended: kill it, then remove the leaf
		 * (its egress programs go with it). */
		if (dead ? wd_cgroup_remove_dir(p) == 0 : rmdir(p) == 0)
			n++;
	}
	closedir(d);
	return n;
}

struct sweep_v1 {
	const struct dead *dd;
	int n;
};

static void sweep_v1_one(const char *mp, void *arg)
{
	struct sweep_v1 *sv = arg;
	sv->n += sweep_hierarchy(mp, sv->dd);
}

int wd_sandbox_sweep(void)
{
	const struct wd_features *f = wd_probe();
	int n = 0;
	const char *rt = getenv("WARDEN_RUNTIME_DIR");
	char calls[512];
	snprintf(calls, sizeof(calls), "%s/calls",
		 rt && *rt ? rt : "/run/warden");
	/* first the calls whose owner is gone: their leaves go too */
	struct dead dd = {0};
	DIR *d = opendir(calls);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[800];
		snprintf(p, sizeof(p), "%s/%s", calls, e->d_name);
		if (!is_call_id(e->d_name) || !owner_gone(p))
			continue;
		dd.id = wd_realloc(dd.id, (size_t)(dd.n + 1) * sizeof(*dd.id));
		snprintf(dd.id[dd.n++], CALL_ID_MAX, "%s", e->d_name);
	}
	if (d)
		closedir(d);
	if (f->cg.v2_root[0])
		n += sweep_hierarchy(f->cg.v2_root, &dd);
	/* Every v1 hierarchy, not only memory/pids/cpu: runsc makes its
	 * leaves in all of them (blkio, cpuset, devices, ...). */
	struct sweep_v1 sv = {.dd = &dd};
	wd_cgroup_each_v1(sweep_v1_one, &sv);
	n += sv.n;
	/* A call directory whose cgroup is gone has no live call. */
	d = opendir(calls);
	if (!d) {
		free(dd.id);
		return n;
	}
	while ((e = readdir(d))) {
		if (is_new_calldir(e->d_name)) {
			/* its maker died between mkdir and rename */
			char p[800];
			snprintf(p, sizeof(p), "%s/%s", calls, e->d_name);
			if (stale(p) && rmdir(p) == 0)
				n++;
			continue;
		}
		if (!is_call_id(e->d_name))
			continue;
		char cg[600], p[800];
		struct stat st;
		snprintf(cg, sizeof(cg), "%s/warden/%s", f->cg.v2_root,
			 e->d_name);
		if (stat(cg, &st) == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", calls, e->d_name);
		if (!stale(p) && !is_dead(&dd, e->d_name))
			continue;
		/* A tier-2 root may still be a mountpoint only in a dead mount
		 * namespace: on the host it is an empty directory. */
		if (wd_rm_rf(p) == 0)
			n++;
	}
	closedir(d);
	free(dd.id);
	return n;
}
