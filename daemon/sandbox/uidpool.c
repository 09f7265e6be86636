/* Per-call uids: allocation, records, release (see uidpool.h). */
#include "sandbox/uidpool.h"
#include "common/log.h"
#include "common/safepath.h"
#include "sandbox/reaper.h"

#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static struct wd_uid_range g_range;
static bool g_range_set;

/* A record's whole text while warden has never used its uid (rec_open) */
#define REC_FRESH "fresh\n"
/* The first line of a record that a recover found a write path of gone
 * (moved or removed: what it held cannot be found, the uid is never
 * reused), after it killed the uid's processes: later acquires walking
 * over the uid refuse it at once, without another walk of /proc (~1 ms
 * each; a one-shot `warden exec` starts among the first uids, where such
 * records stay for good). Below it, the record keeps the lost paths as
 * gone lines (for the operator: `warden status` counts such uids,
 * wd_uid_lost_count) and the path lines whose settling has not succeeded
 * yet: a recover that walks over the uid settles these again (at most
 * once a LOST_RETRY_S, the record's mtime saying when it last tried) and
 * drops each that is done, so a lost path never stops the cleanup of the
 * others. Builds before this one
 * appended the line at the end instead (still read as lost); an older
 * warden skips the line. */
#define REC_LOST "lost\n"
/* a lost uid's write path that was moved or removed: "gone DEV INO OWNER
 * GROUP PATH" (a path line's fields), never opened again */
#define REC_GONE     "gone "
#define LOST_RETRY_S 60

/* An account or group of the node's user database (NSS: /etc/passwd,
 * systemd's userdb, ...) with an id in [a, b]: -EINVAL naming it with
 * err, else 0. Every call's processes run with uid = gid = an id of the
 * range, so such an id would give the tool that account's files and
 * processes (a crashed call's record even has the next taker of the uid
 * SIGKILL every process of it), or that group's files. The databases
 * are enumerated once; a small range is also looked up id by id (a
 * source that does not enumerate still answers getpwuid/getgrgid). */
static int range_conflict(uint32_t a, uint32_t b, const char *s,
			  struct wd_err *err)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	char name[64] = "";
	uint32_t id = 0;
	bool user = true;
	pthread_mutex_lock(&mu); /* getpwent/getgrent: one enumeration */
	setpwent();
	for (struct passwd *pw; !name[0] && (pw = getpwent());)
		if (pw->pw_uid >= a && pw->pw_uid <= b) {
			id = pw->pw_uid;
			wd_strlcpy(name, pw->pw_name, sizeof(name));
		}
	endpwent();
	setgrent();
	for (struct group *gr; !name[0] && (gr = getgrent());)
		if (gr->gr_gid >= a && gr->gr_gid <= b) {
			id = gr->gr_gid;
			user = false;
			wd_strlcpy(name, gr->gr_name, sizeof(name));
		}
	endgrent();
	pthread_mutex_unlock(&mu);
	for (uint64_t u = a; !name[0] && b - a < 256 && u <= b; u++) {
		char buf[4096];
		struct passwd pw, *pp = NULL;
		struct group gr, *gp = NULL;
		if (!getpwuid_r((uid_t)u, &pw, buf, sizeof(buf), &pp) && pp) {
			id = (uint32_t)u;
			wd_strlcpy(name, pp->pw_name, sizeof(name));
		} else if (!getgrgid_r((gid_t)u, &gr, buf, sizeof(buf), &gp) &&
			   gp) {
			id = (uint32_t)u;
			user = false;
			wd_strlcpy(name, gp->gr_name, sizeof(name));
		}
	}
	if (!name[0])
		return 0;
	return wd_err_set(err, -EINVAL,
			  "uid range '%s': %s %u is the %s '%s' (a tool would "
			  "run as it): choose ids no account or group has",
			  s, user ? "uid" : "gid", (unsigned)id,
			  user ? "account" : "group", name);
}

int wd_uid_range_parse(const char *s, struct wd_uid_range *r,
		       struct wd_err *err)
{
	char *end;
	errno = 0;
	unsigned long a = strtoul(s, &end, 10), b;
	if (errno || end == s || *end != '-')
		goto bad;
	const char *t = end + 1;
	b = strtoul(t, &end, 10);
	if (errno || end == t || *end)
		goto bad;
	if (a == 0 || b < a)
		return wd_err_set(err, -EINVAL,
				  "uid range '%s': must be FIRST-LAST with "
				  "0 < FIRST <= LAST",
				  s);
	if (b > 0x7ffffffeul)
		return wd_err_set(err, -EINVAL,
				  "uid range '%s': above 2147483646 (ids "
				  "read as negative by some programs)",
				  s);
	int c = range_conflict((uint32_t)a, (uint32_t)b, s, err);
	if (c < 0)
		return c;
	if (a <= WD_UID_REGULAR_LAST)
		return wd_err_set(err, -EINVAL,
				  "uid range '%s': holds uids up to %u, where "
				  "the system's and regular users' accounts "
				  "are (a tool would run as one of them): "
				  "start above %u",
				  s, WD_UID_REGULAR_LAST, WD_UID_REGULAR_LAST);
	if (a <= 65519 && b >= 61184)
		return wd_err_set(err, -EINVAL,
				  "uid range '%s': overlaps systemd's dynamic "
				  "users (61184-65519, DynamicUser=)",
				  s);
	if (a <= 65535 && b >= 65534)
		return wd_err_set(err, -EINVAL,
				  "uid range '%s': holds 65534 (nobody) or "
				  "65535 ((uid_t)-1 to 16-bit programs)",
				  s);
	r->first = (uint32_t)a;
	r->count = (uint32_t)(b - a + 1);
	return 0;
bad:
	return wd_err_set(err, -EINVAL,
			  "uid range '%s': expected FIRST-LAST, e.g. "
			  "2000000000-2000004095",
			  s);
}

void wd_uid_range_set(const struct wd_uid_range *r)
{
	g_range = *r;
	g_range_set = true;
}

int wd_uid_range_get(struct wd_uid_range *r, struct wd_err *err)
{
	if (g_range_set) {
		*r = g_range;
		return 0;
	}
	/* $WARDEN_UID_RANGE is judged once a process (the user database
	 * is enumerated for it), the verdict kept */
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static int env_rc = 1; /* 1: not parsed yet */
	static struct wd_uid_range env_r;
	static char env_msg[sizeof(((struct wd_err *)0)->msg)];
	const char *e = getenv("WARDEN_UID_RANGE");
	if (!e || !*e) {
		*r = (struct wd_uid_range){WD_UID_RANGE_FIRST,
					   WD_UID_RANGE_COUNT};
		return 0;
	}
	pthread_mutex_lock(&mu);
	if (env_rc == 1) {
		struct wd_err pe = {0};
		env_rc = wd_uid_range_parse(e, &env_r, &pe);
		wd_strlcpy(env_msg, pe.msg, sizeof(env_msg));
	}
	int rc = env_rc;
	*r = env_r;
	pthread_mutex_unlock(&mu);
	if (rc < 0)
		wd_err_set(err, rc, "%s", env_msg);
	return rc;
}

/* The uid records, root's only, on persistent storage
 * ($WARDEN_UID_DIR, default /var/lib/warden/uids): a record says what a
 * call of that uid may have left (its write paths). Kept across a reboot,
 * so that a call killed mid-way before one still has its files settled by
 * the next taker of its uid; under /run they would be forgotten, and that
 * taker would own them. */
void wd_uid_dir_name(char *out, size_t n)
{
	const char *d = getenv("WARDEN_UID_DIR");
	snprintf(out, n, "%s", d && *d ? d : "/var/lib/warden/uids");
}

int wd_uid_dir(char *out, size_t n)
{
	wd_uid_dir_name(out, n);
	if (mkdir(out, 0700) == 0 || errno == EEXIST)
		return 0;
	return wd_mkdir_p(out, 0700);
}

static int rec_write(int fd, const char *s, size_t n)
{
	if (ftruncate(fd, 0) < 0 || pwrite(fd, s, n, 0) != (ssize_t)n)
		return -errno;
	return 0;
}

/* A write path recorded before its grant: on disk before the grant, so
 * after a power loss the uid's next taker still settles it */
static int rec_append(int fd, const char *s)
{
	struct stat st;
	size_t n = strlen(s);
	if (fstat(fd, &st) < 0 || pwrite(fd, s, n, st.st_size) != (ssize_t)n ||
	    fdatasync(fd) < 0)
		return -errno;
	return 0;
}

/* Settle one path until a pass changes nothing (a pass may miss an entry
 * renamed under it by another process). */
static int settle_path(int fd, uid_t uid, gid_t gid, uid_t owner, gid_t group)
{
	for (int pass = 0; pass < 4; pass++) {
		long n = wd_settle_tree(fd, uid, gid, owner, group);
		if (n <= 0)
			return (int)n;
	}
	return -EAGAIN;
}

static bool rec_is_lost(const char *buf)
{
	return !strncmp(buf, REC_LOST, strlen(REC_LOST)) ||
	       strstr(buf, "\n" REC_LOST);
}

/* A lost uid's record, rewritten in place to REC_LOST and the path and
 * gone lines still to keep (no longer than before: a record before had a
 * "call" or REC_LOST line and these lines). The REC_LOST line is the first
 * written, so a crash before the truncation leaves the record starting
 * "lost" with bytes of the old one after it (a cut line parses as nothing
 * or as one more lost path): it says lost whatever happens, never "clean"
 * (an empty record). 0 or -errno. */
static int rec_write_lost(int fd, const char *pending, size_t n)
{
	struct wd_buf b = {0};
	wd_buf_printf(&b, "%s%.*s", REC_LOST, (int)n, pending);
	int r = 0;
	if (pwrite(fd, b.data, b.len, 0) != (ssize_t)b.len ||
	    ftruncate(fd, (off_t)b.len) < 0 || fdatasync(fd) < 0)
		r = -errno;
	wd_buf_free(&b);
	return r;
}

/* Nothing of uid may remain: the work of a release, from the record of a
 * lease whose owner died (a crashed `warden exec`, a daemon killed with
 * -9). 0 when the uid is clean (record emptied), else -errno: -ESTALE for
 * a lost uid (REC_LOST), whose other paths are still settled here. */
static int recover(int lockfd, uid_t uid, const struct wd_uid_range *rg,
		   const char *rec_path)
{
	struct stat st;
	if (fstat(lockfd, &st) < 0)
		return -errno;
	if (st.st_size == 0)
		return 0;
	if (st.st_size > 1 << 20)
		return -EFBIG;
	char *buf = wd_malloc((size_t)st.st_size + 1);
	ssize_t n = pread(lockfd, buf, (size_t)st.st_size, 0);
	if (n < 0) {
		free(buf);
		return -errno;
	}
	buf[n] = 0;
	char *orig = wd_strdup(buf); /* buf is cut into lines below */
	int rc = 0;
	bool was_lost = rec_is_lost(buf), lost = was_lost;
	/* a lost uid's pending paths are retried at most once a minute
	 * (each acquire that walks over it would otherwise walk their
	 * trees again); its mtime is when that was last tried */
	time_t now = time(NULL);
	if (was_lost && st.st_mtime <= now &&
	    now - st.st_mtime < LOST_RETRY_S) {
		rc = -ESTALE;
		goto out;
	}
	/* the path lines not done yet: lost, or not settled */
	struct wd_buf pending = {0};
	if (!strcmp(buf, REC_FRESH)) {
		/* never used by warden here: not ours to clean, and taken
		 * only if nothing of it runs (a uid of the range someone
		 * else uses is skipped, never killed) */
		rc = wd_uid_count_procs(uid) > 0 ? -EEXIST : 0;
		if (rc < 0)
			wd_warn("uid %u (%s): processes of it run outside "
				"warden; not used",
				(unsigned)uid, rec_path);
		goto out;
	}
	/* its processes first: nothing may create files as we settle. A
	 * lost uid's were killed when it was marked, and it never runs a
	 * call again: not walked for again */
	if (!was_lost && wd_uid_kill_procs(uid, 2000) > 0) {
		wd_warn("uid %u (%s): processes outlive SIGKILL; not reused",
			(unsigned)uid, rec_path);
		rc = -EBUSY;
		goto out;
	}
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long long dev, ino;
		unsigned ow, gr;
		int off = 0;
		if (!strncmp(line, REC_GONE, strlen(REC_GONE))) {
			/* moved or removed when last looked at: kept (the
			 * record says what was lost), never opened again */
			wd_buf_printf(&pending, "%s\n", line);
			continue;
		}
		if (sscanf(line, "path %llx %llx %u %u %n", &dev, &ino, &ow,
			   &gr, &off) < 4 ||
		    !off)
			continue;
		const char *p = line + off;
		/* a symlink a tool put in its place is not followed (as
		 * root, to whatever it names): the path counts as moved */
		int fd = wd_open_trusted(p, O_RDONLY | O_NONBLOCK, NULL, 0);
		struct stat ps;
		if (fd < 0 || fstat(fd, &ps) < 0 || ps.st_dev != dev ||
		    ps.st_ino != ino) {
			/* moved or gone: what it held cannot be found */
			if (!was_lost)
				wd_warn("uid %u (%s): write path '%s' is not "
					"the one the call had; uid not reused",
					(unsigned)uid, rec_path, p);
			if (fd >= 0)
				close(fd);
			rc = -ESTALE;
			lost = true;
			/* as a gone line: whatever is at that path now (a
			 * symlink anyone may have made there) is never
			 * opened by a later walk */
			wd_buf_printf(&pending, "%s%s\n", REC_GONE,
				      line + strlen("path "));
			continue;
		}
		int r = wd_acl_revoke(fd, uid, rg), pr = 0;
		if (r < 0 && r != -EOPNOTSUPP)
			pr = r;
		if ((r = settle_path(fd, uid, uid, ow, gr)) < 0)
			pr = r;
		close(fd);
		if (pr < 0) {
			rc = rc ? rc : pr;
			wd_buf_printf(&pending, "%s\n", line);
		}
	}
	if (lost) {
		/* never reused; what is pending stays for the next walk */
		const char *pd = pending.data ? pending.data : "";
		/* unchanged (the usual walk over a lost uid): no write */
		int w = 0;
		if (strncmp(orig, REC_LOST, strlen(REC_LOST)) ||
		    strcmp(orig + strlen(REC_LOST), pd))
			w = rec_write_lost(lockfd, pd, pending.len);
		else if (futimens(lockfd, NULL) < 0) /* tried now */
			w = -errno;
		if (w < 0)
			wd_log_errno(WD_LOG_WARN, w,
				     "uid %u (%s): lost record not rewritten",
				     (unsigned)uid, rec_path);
		rc = -ESTALE;
		goto out;
	}
	if (rc == 0 && wd_uid_count_sockets(uid) > 0)
		rc = -EBUSY;
	if (rc == 0)
		rc = rec_write(lockfd, "", 0);
out:
	wd_buf_free(&pending);
	free(orig);
	free(buf);
	return rc;
}

int wd_uid_lost_count(const char *dir, uint32_t *first)
{
	*first = 0;
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		errno = 0;
		unsigned long u = strtoul(e->d_name, &end, 10);
		if (errno || *end || !e->d_name[0] || e->d_name[0] == '0' ||
		    u > UINT32_MAX)
			continue; /* ".new-*", ".", ".." */
		int fd = openat(dirfd(d), e->d_name,
				O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			continue;
		/* the marker is the first line (or, from builds before,
		 * the last): the whole record, as recover reads it */
		struct stat st;
		if (fstat(fd, &st) < 0 || st.st_size == 0 ||
		    st.st_size > 1 << 20) {
			close(fd);
			continue;
		}
		char *buf = wd_malloc((size_t)st.st_size + 1);
		ssize_t k = pread(fd, buf, (size_t)st.st_size, 0);
		close(fd);
		buf[k > 0 ? k : 0] = 0;
		bool lost = rec_is_lost(buf);
		free(buf);
		if (!lost)
			continue;
		n++;
		if (!*first || u < *first)
			*first = (uint32_t)u;
	}
	closedir(d);
	return n;
}

/* The record of uid, made if missing: a new one says REC_FRESH from its
 * first byte (written aside, then linked into place), so that whoever
 * locks it first, this acquire or another process's, knows warden never
 * used the uid on this node. An fd, or -1 with errno. */
static int rec_open(const char *dir, const char *p, uint32_t uid)
{
	int fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s/.new-%u-%ld", dir, uid,
		 (long)syscall(SYS_gettid));
	int t = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		     0600);
	if (t < 0)
		return -1;
	size_t n = strlen(REC_FRESH);
	int e = 0;
	if (write(t, REC_FRESH, n) != (ssize_t)n || fdatasync(t) < 0)
		e = errno ? errno : EIO;
	else if (link(tmp, p) < 0 && errno != EEXIST)
		e = errno; /* EEXIST: another acquire made it first */
	unlink(tmp);
	close(t);
	/* the record's name is durable too (once per uid, ever) */
	int dfd = e ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0)
			e = errno;
		close(dfd);
	}
	if (e) {
		errno = e;
		return -1;
	}
	return open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
}

/* Where the next search starts: not the uid just released, so a uid sits
 * free for a while before it comes back (cheap insurance on top of the
 * checks). Per process; the locks decide. */
static uint32_t next_hint;

/* A process's first search starts at a random uid among the range's first
 * WD_UID_WARM: a one-shot `warden exec` (one acquire per process) then
 * takes a uid whose record a former call left clean, not a fresh one over
 * the whole range, whose record costs two fsyncs and a walk of /proc
 * (rec_open, recover: ~1-10 ms on a virtio disk). What makes a uid safe
 * to take is its record and lock, not how long it sat free. */
#define WD_UID_WARM 64u

int wd_uid_acquire(struct wd_uid_lease **out, const char *call_id,
		   struct wd_err *err)
{
	struct wd_uid_range rg;
	char dir[400];
	int r;
	*out = NULL;
	if ((r = wd_uid_range_get(&rg, err)) < 0)
		return r;
	if ((r = wd_uid_dir(dir, sizeof(dir))) < 0)
		return wd_err_set(err, r, "identity: '%s': %s", dir,
				  strerror(-r));
	uint32_t start = __atomic_load_n(&next_hint, __ATOMIC_RELAXED);
	if (start == 0) {
		char h[9];
		wd_rand_hex(h, 8);
		start = (uint32_t)strtoul(h, NULL, 16) %
			    (rg.count < WD_UID_WARM ? rg.count : WD_UID_WARM) +
			1;
	}
	int busy = 0, unclean = 0, foreign = 0;
	for (uint32_t i = 0; i < rg.count; i++) {
		uint32_t uid = rg.first + (start + i) % rg.count;
		char p[512];
		snprintf(p, sizeof(p), "%s/%u", dir, uid);
		int fd = rec_open(dir, p, uid);
		if (fd < 0)
			return wd_err_set(err, -errno, "identity: '%s': %s", p,
					  strerror(errno));
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd);
			busy++;
			continue; /* a live call's */
		}
		if ((r = recover(fd, uid, &rg, p)) < 0) {
			close(fd);
			if (r == -EEXIST)
				foreign++;
			else
				unclean++;
			continue;
		}
		char rec[80];
		int n = snprintf(rec, sizeof(rec), "call %s\n",
				 call_id ? call_id : "-");
		if ((r = rec_write(fd, rec, (size_t)n)) < 0) {
			close(fd);
			return wd_err_set(err, r, "identity: '%s': %s", p,
					  strerror(-r));
		}
		__atomic_store_n(&next_hint, (start + i + 1) % rg.count,
				 __ATOMIC_RELAXED);
		struct wd_uid_lease *l = wd_calloc(1, sizeof(*l));
		l->uid = uid;
		l->gid = uid;
		l->lockfd = fd;
		if (call_id)
			wd_strlcpy(l->call_id, call_id, sizeof(l->call_id));
		*out = l;
		return 0;
	}
	return wd_err_set(err, -EAGAIN,
			  "identity: no free uid in %u-%u (%d held by live "
			  "calls, %d waiting until nothing of theirs "
			  "remains, %d with processes warden did not "
			  "start): call refused",
			  rg.first, rg.first + rg.count - 1, busy, unclean,
			  foreign);
}

int wd_uid_grant_paths(struct wd_uid_lease *l, uid_t principal, gid_t pgid,
		       char *const *paths, int n, bool tier3,
		       struct wd_err *err)
{
	struct wd_uid_range rg;
	int r;
	if ((r = wd_uid_range_get(&rg, err)) < 0)
		return r;
	if (n > WD_UID_MAX_PATHS)
		return wd_err_set(err, -E2BIG,
				  "filesystem.write: more than %d paths",
				  WD_UID_MAX_PATHS);
	for (int i = 0; i < n; i++) {
		struct wd_uid_path *wp = &l->p[l->n_paths];
		/* O_NONBLOCK: a write path may be a FIFO. Not through a
		 * symlink a tool could have made (safepath.h): the grant
		 * below is root's */
		char why[PATH_MAX + 160];
		int fd = wd_open_trusted(paths[i], O_RDONLY | O_NONBLOCK, why,
					 sizeof(why));
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			r = fd < 0 ? fd : -errno;
			if (fd >= 0)
				close(fd);
			return wd_err_set(
			    err, r, "filesystem.write '%s': %s", paths[i],
			    fd < 0 && why[0] ? why : strerror(-r));
		}
		*wp = (struct wd_uid_path){
		    .fd = fd,
		    .owner = principal ? principal : st.st_uid,
		    .group = principal ? pgid : st.st_gid,
		    .is_dir = S_ISDIR(st.st_mode)};
		l->n_paths++;
		/* recorded before the grant: a crash in between leaves a
		 * revoke with nothing to do, never an entry nobody knows */
		char *rec = wd_asprintf(
		    "path %llx %llx %u %u %s\n", (unsigned long long)st.st_dev,
		    (unsigned long long)st.st_ino, (unsigned)wp->owner,
		    (unsigned)wp->group, paths[i]);
		r = strchr(paths[i], '\n') ? -EINVAL
					   : rec_append(l->lockfd, rec);
		free(rec);
		if (r < 0)
			return wd_err_set(
			    err, r, "identity: record write path '%s': %s",
			    paths[i], strerror(-r));
		mode_t any = wp->is_dir ? 0003 : 0002;
		if (tier3 && (st.st_mode & any) != any)
			return wd_err_set(
			    err, -EACCES,
			    "filesystem.write '%s': tier 3 cannot give the "
			    "call's uid %u access (gVisor judges the mode "
			    "bits, not the host's POSIX ACLs): make it "
			    "writable by others (e.g. mode 1777) or use tier "
			    "1 or 2",
			    paths[i], (unsigned)l->uid);
		if (tier3)
			continue; /* recorded: its files are settled */
		r = wd_acl_grant(fd, l->uid, wp->is_dir, &rg);
		if (r == -EOPNOTSUPP && (st.st_mode & any) == any)
			continue; /* no ACLs here, but anyone may write */
		if (r < 0)
			return wd_err_set(
			    err, r,
			    "filesystem.write '%s': cannot give the call's "
			    "uid %u access: POSIX ACL: %s",
			    paths[i], (unsigned)l->uid, strerror(-r));
		wp->acl = true;
	}
	return 0;
}

void wd_uid_release(struct wd_uid_lease *l, bool procs_gone)
{
	if (!l)
		return;
	struct wd_uid_range rg;
	int rc = 0;
	if (wd_uid_range_get(&rg, NULL) < 0)
		rc = -EINVAL;
	if (!procs_gone && wd_uid_kill_procs(l->uid, 2000) > 0)
		rc = -EBUSY;
	/* with the range known and no process left, every path is cleaned
	 * whatever another one's failure: one path's failure keeps the
	 * record (the next acquire of the uid retries), not the other
	 * paths' ACL entries */
	bool go = rc == 0;
	for (int i = 0; i < l->n_paths; i++) {
		struct wd_uid_path *wp = &l->p[i];
		int r;
		/* the entry first: no new file of the uid from here on,
		 * whoever might still hold a descriptor */
		if (go && wp->acl &&
		    (r = wd_acl_revoke(wp->fd, l->uid, &rg)) < 0) {
			wd_warn("uid %u: revoke ACL entry: %s",
				(unsigned)l->uid, strerror(-r));
			rc = r;
		} else if (go && (r = settle_path(wp->fd, l->uid, l->gid,
						  wp->owner, wp->group)) < 0) {
			wd_warn("uid %u: settle files: %s", (unsigned)l->uid,
				strerror(-r));
			rc = r;
		}
		close(wp->fd);
	}
	/* A socket outlives the call's processes only in a process of
	 * another uid that received it (SCM_RIGHTS), and the call reaches
	 * no such process but through a pathname unix socket under its
	 * write paths (BPF connect_unix/sendmsg_unix; abstract ones are held
	 * by Landlock's scope). Without write paths there is none to look
	 * for; with them the dump costs ~1 ms per 300 sockets on the node
	 * (on the reaper thread, not the call's). */
	if (rc == 0 && l->n_paths > 0 && wd_uid_count_sockets(l->uid) > 0)
		rc = -EBUSY; /* the next acquire of the uid looks again */
	/* clean: empty the record; else it stays for the next acquire of
	 * this uid, which finishes the job before taking it */
	if (rc == 0)
		rec_write(l->lockfd, "", 0);
	close(l->lockfd); /* the flock goes with the last descriptor */
	free(l);
}

struct release {
	struct wd_uid_lease *l;
	bool procs_gone;
};

static void release_run(void *arg)
{
	struct release *rl = arg;
	wd_uid_release(rl->l, rl->procs_gone);
	free(rl);
}

void wd_uid_release_async(struct wd_uid_lease *l, bool procs_gone)
{
	if (!l)
		return;
	struct release *rl = wd_calloc(1, sizeof(*rl));
	rl->l = l;
	rl->procs_gone = procs_gone;
	wd_reaper_submit(release_run, rl);
}
