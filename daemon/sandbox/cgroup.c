#include "sandbox/cgroup.h"
#include "common/log.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *const ctrl_name[WD_CG_NCTRL] = {"memory", "pids", "cpu"};

static int cg_write(const char *dir, const char *file, const char *val)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return wd_write_str(p, val);
}

static uint64_t cg_read_key(const char *dir, const char *file, const char *key)
{
	char p[600];
	cleanup_free char *s = NULL;
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	if (wd_read_file(p, &s, NULL) < 0)
		return 0;
	if (!key)
		return strtoull(s, NULL, 10);
	size_t kl = strlen(key);
	for (char *l = s; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == ' ')
			return strtoull(l + kl + 1, NULL, 10);
	return 0;
}

/* The warden/ parents this process used, removed at its exit when empty
 * (a directory other processes still use stays: rmdir fails), the last
 * noted first (warden/keep-warm before the warden/ it is in). Registered
 * on first use, before the reaper's exit drain, so it runs after it. */
static pthread_mutex_t parents_mu = PTHREAD_MUTEX_INITIALIZER;
static char parents[WD_CG_NCTRL + 4][512];
static int n_parents;
static pid_t parents_owner;
/* a tier-3 call of this process had runsc make its v1 parents */
static bool parents_runsc;

void wd_cgroup_each_v1(void (*fn)(const char *mp, void *arg), void *arg)
{
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	char line[1024];
	while (mi && fgets(line, sizeof(line), mi)) {
		char mp[512], fstype[64];
		const char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", mp) != 1 ||
		    sscanf(sep + 3, "%63s", fstype) != 1 ||
		    strcmp(fstype, "cgroup"))
			continue;
		fn(mp, arg);
	}
	if (mi)
		fclose(mi);
}

static void rmdir_parent(const char *mp, void *arg)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/warden", mp);
	rmdir(p);
}

static void parents_remove_at_exit(void)
{
	pthread_mutex_lock(&parents_mu);
	bool mine = parents_owner == getpid();
	bool runsc = parents_runsc;
	for (int i = n_parents - 1; mine && i >= 0; i--)
		rmdir(parents[i]);
	n_parents = 0;
	pthread_mutex_unlock(&parents_mu);
	/* and those runsc made for this process's tier-3 calls (a
	 * mountinfo walk and a rmdir per v1 hierarchy: only if any) */
	if (mine && runsc)
		wd_cgroup_each_v1(rmdir_parent, NULL);
}

static void parent_note(const char *parent)
{
	pthread_mutex_lock(&parents_mu);
	if (parents_owner != getpid()) { /* first use, or a forked child */
		if (!parents_owner && atexit(parents_remove_at_exit) != 0) {
			pthread_mutex_unlock(&parents_mu);
			return;
		}
		parents_owner = getpid();
		n_parents = 0;
	}
	bool known = false;
	for (int i = 0; i < n_parents && !known; i++)
		known = !strcmp(parents[i], parent);
	if (!known && n_parents < (int)WD_ARRAY_SIZE(parents))
		wd_strlcpy(parents[n_parents++], parent, sizeof(parents[0]));
	pthread_mutex_unlock(&parents_mu);
}

void wd_cgroup_parent_keep(const char *parent)
{
	pthread_mutex_lock(&parents_mu);
	for (int i = 0; parents_owner == getpid() && i < n_parents; i++)
		if (!strcmp(parents[i], parent)) {
			memmove(parents[i], parents[i + 1],
				(size_t)(n_parents - i - 1) *
				    sizeof(parents[0]));
			n_parents--;
			break;
		}
	pthread_mutex_unlock(&parents_mu);
}

static void keep_path(const struct wd_cgroup_layout *lay, char *out, size_t n)
{
	snprintf(out, n, "%s/warden/keep-warm", lay->v2_root);
}

int wd_cgroup_keep_dir(const struct wd_cgroup_layout *lay, char *out, size_t n)
{
	/* a mkdir the first time only: the egress keep-warm links are made
	 * once a process (wd_egress_keep_warm) */
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static pid_t made_by;
	static int made_rc;
	keep_path(lay, out, n);
	pthread_mutex_lock(&mu);
	if (made_by != getpid()) {
		made_by = getpid();
		made_rc = 0;
		if (mkdir(out, 0755) == 0)
			parent_note(out);
		else if (errno != EEXIST)
			made_rc = -errno;
	}
	int rc = made_rc;
	pthread_mutex_unlock(&mu);
	return rc;
}

void wd_cgroup_parents_keep(const struct wd_cgroup_layout *lay,
			    const struct wd_cgroup *cg)
{
	char p[600];
	keep_path(lay, p, sizeof(p));
	wd_cgroup_parent_keep(p);
	snprintf(p, sizeof(p), "%s/warden", lay->v2_root);
	wd_cgroup_parent_keep(p);
	for (int c = 0; c < WD_CG_NCTRL; c++)
		if (cg->v1[c][0]) {
			snprintf(p, sizeof(p), "%s/warden", lay->v1_root[c]);
			wd_cgroup_parent_keep(p);
		}
}

void wd_cgroup_note_runsc_parents(void)
{
	pthread_mutex_lock(&parents_mu);
	parents_runsc = true;
	pthread_mutex_unlock(&parents_mu);
}

/* Make "<root>/warden/<id>"; the parent is created on first use (again,
 * if another process removed it at its exit in between). */
static int mkleaf(char *out, size_t len, const char *root, const char *id)
{
	char parent[512];
	snprintf(parent, sizeof(parent), "%s/warden", root);
	snprintf(out, len, "%s/%s", parent, id);
	for (int tries = 0;; tries++) {
		if (mkdir(parent, 0755) < 0 && errno != EEXIST)
			return -errno;
		if (mkdir(out, 0755) == 0)
			break;
		if (errno != ENOENT || tries == 3)
			return -errno;
	}
	parent_note(parent);
	return 0;
}

/* ---- spare v1 leaves ----------------------------------------------------
 * A v1 mkdir costs ~0.1 ms (the memory controller allocates its per-cpu
 * state), a rename within warden/ a tenth of that. So the reaper thread
 * (sandbox/reaper.h) makes a couple of bare leaves ahead, under names of
 * the call-id shape (the start-up sweep treats one left by a process killed
 * with -9 as an empty call leaf: removed once stale), and a call renames
 * one to its id, then sets its limits as on a new leaf. A spare older than
 * SPARE_TTL_NS is not used (a sweep would take it for stale); all are
 * removed at exit. v2 has no rename: its leaf is made per call. */
#define SPARE_MAX    2
#define SPARE_TTL_NS (60ull * 1000000000ull)

static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char path[512];
	uint64_t born;
} spare[WD_CG_NCTRL][SPARE_MAX];
static int n_spare[WD_CG_NCTRL];
static bool spare_closed, spare_atexit;
static pid_t spare_owner;

static void spares_clear_at_exit(void)
{
	wd_cgroup_spares_clear();
}

void wd_cgroup_spares_clear(void)
{
	pthread_mutex_lock(&spare_mu);
	spare_closed = true; /* a refill still running removes its own */
	bool mine = spare_owner == getpid();
	for (int c = 0; c < WD_CG_NCTRL; c++) {
		for (int i = 0; mine && i < n_spare[c]; i++)
			rmdir(spare[c][i].path);
		n_spare[c] = 0;
	}
	pthread_mutex_unlock(&spare_mu);
}

/* A spare leaf of controller c renamed to dst: true, or false (none). */
static bool take_spare(int c, const char *dst)
{
	char p[512];
	bool got = false;
	pthread_mutex_lock(&spare_mu);
	while (n_spare[c] && !got) {
		n_spare[c]--;
		memcpy(p, spare[c][n_spare[c]].path, sizeof(p));
		if (spare_owner == getpid() &&
		    wd_now_ns() - spare[c][n_spare[c]].born < SPARE_TTL_NS) {
			got = true;
			break;
		}
		if (spare_owner == getpid())
			rmdir(p);
	}
	pthread_mutex_unlock(&spare_mu);
	if (!got)
		return false;
	if (rename(p, dst) == 0)
		return true;
	rmdir(p);
	return false;
}

int wd_cgroup_spares_count(int c)
{
	pthread_mutex_lock(&spare_mu);
	int n = n_spare[c];
	pthread_mutex_unlock(&spare_mu);
	return n;
}

void wd_cgroup_spares_fill(const struct wd_cgroup_layout *lay, unsigned v1_mask)
{
	for (int c = 0; c < WD_CG_NCTRL; c++) {
		if (!(v1_mask & (1u << c)) || !lay->v1_root[c][0])
			continue;
		for (;;) {
			pthread_mutex_lock(&spare_mu);
			bool full = spare_closed || n_spare[c] >= SPARE_MAX;
			pthread_mutex_unlock(&spare_mu);
			if (full)
				break;
			char id[20], p[512];
			wd_rand_hex(id, 16);
			if (mkleaf(p, sizeof(p), lay->v1_root[c], id) < 0)
				break;
			pthread_mutex_lock(&spare_mu);
			pid_t me = getpid();
			bool keep = !spare_closed && n_spare[c] < SPARE_MAX &&
				    (!spare_owner || spare_owner == me);
			if (keep && !spare_atexit) {
				/* runs before the reaper's drain (atexit
				 * order), which then finds spare_closed */
				keep = atexit(spares_clear_at_exit) == 0;
				spare_atexit = keep;
			}
			if (keep) {
				spare_owner = me;
				memcpy(spare[c][n_spare[c]].path, p, sizeof(p));
				spare[c][n_spare[c]++].born = wd_now_ns();
			}
			pthread_mutex_unlock(&spare_mu);
			if (!keep) {
				rmdir(p);
				break;
			}
		}
	}
}

static int limit_v2(struct wd_cgroup *cg, int c, const struct wd_cg_limits *l)
{
	char v[64];
	int r = 0;
	switch (c) {
	case WD_CG_MEMORY:
		snprintf(v, sizeof(v), "%llu",
			 (unsigned long long)l->memory_bytes);
		r = cg_write(cg->v2, "memory.max", v);
		/* No swap: the limit must be a limit. */
		if (!r)
			cg_write(cg->v2, "memory.swap.max", "0");
		break;
	case WD_CG_PIDS:
		snprintf(v, sizeof(v), "%u", l->pids);
		r = cg_write(cg->v2, "pids.max", v);
		break;
	case WD_CG_CPU:
		snprintf(v, sizeof(v), "%llu 100000",
			 (unsigned long long)(l->cpus * 100000));
		r = cg_write(cg->v2, "cpu.max", v);
		break;
	}
	return r;
}

static int limit_v1(struct wd_cgroup *cg, int c, const struct wd_cg_limits *l)
{
	char v[64];
	int r = 0;
	const char *d = cg->v1[c];
	switch (c) {
	case WD_CG_MEMORY:
		snprintf(v, sizeof(v), "%llu",
			 (unsigned long long)l->memory_bytes);
		r = cg_write(d, "memory.limit_in_bytes", v);
		/* memsw exists only with swap accounting; where it does, hold
		 * it to the same value so swap cannot extend the limit. */
		cg_write(d, "memory.memsw.limit_in_bytes", v);
		cg_write(d, "memory.swappiness", "0");
		break;
	case WD_CG_PIDS:
		snprintf(v, sizeof(v), "%u", l->pids);
		r = cg_write(d, "pids.max", v);
		break;
	case WD_CG_CPU:
		r = cg_write(d, "cpu.cfs_period_us", "100000");
		if (!r) {
			snprintf(v, sizeof(v), "%llu",
				 (unsigned long long)(l->cpus * 100000));
			r = cg_write(d, "cpu.cfs_quota_us", v);
		}
		break;
	}
	return r;
}

/* Enable a controller for warden/ children on v2 (subtree_control of the
 * root and of warden/). */
static bool v2_enable(const char *root, int c)
{
	char p[600], v[32];
	snprintf(v, sizeof(v), "+%s", ctrl_name[c]);
	snprintf(p, sizeof(p), "%s/cgroup.subtree_control", root);
	if (wd_write_str(p, v) < 0)
		return false;
	snprintf(p, sizeof(p), "%s/warden/cgroup.subtree_control", root);
	return wd_write_str(p, v) == 0;
}

/* One v1 controller's leaf for call id, with its limit: a spare renamed,
 * else made. 0 or -errno (cg->v1[c] "" when no leaf was made). */
static int v1_leaf(struct wd_cgroup *cg, const struct wd_cgroup_layout *lay,
		   const char *id, int c, const struct wd_cg_limits *lim)
{
	snprintf(cg->v1[c], sizeof(cg->v1[c]), "%s/warden/%s", lay->v1_root[c],
		 id);
	int r = take_spare(c, cg->v1[c])
		    ? 0
		    : mkleaf(cg->v1[c], sizeof(cg->v1[c]), lay->v1_root[c], id);
	if (r < 0) {
		cg->v1[c][0] = 0;
		return r;
	}
	return limit_v1(cg, c, lim);
}

/* The leaves a v1 job makes: a controller of `mask` each. Its first error
 * (with the controller's name) in j->rc, j->err. */
static void v1_leaves(struct wd_cgroup_job *j)
{
	for (int c = 0; c < WD_CG_NCTRL && !j->rc; c++) {
		if (!(j->mask & (1u << c)))
			continue;
		int r = v1_leaf(j->cg, j->lay, j->id, c, &j->lim);
		if (r < 0)
			j->rc = wd_err_set(&j->err, r,
					   "%s limit: cannot enforce: %s",
					   ctrl_name[c], strerror(-r));
	}
}

static void *v1_main(void *arg)
{
	v1_leaves(arg);
	return NULL;
}

int wd_cgroup_create_begin(struct wd_cgroup *cg,
			   const struct wd_cgroup_layout *lay, const char *id,
			   const struct wd_cg_limits *lim, bool threaded,
			   struct wd_cgroup_job *job, struct wd_err *err)
{
	bool want[WD_CG_NCTRL] = {lim->memory_bytes > 0, lim->pids > 0,
				  lim->cpus > 0};
	int r;

	memset(cg, 0, sizeof(*cg));
	memset(job, 0, sizeof(*job));
	cg->v2_fd = -1;
	if (!lay->v2_root[0])
		return wd_err_set(err, -ENOTSUP,
				  "cgroup: no cgroup v2 hierarchy on this node "
				  "(needed for the call's identity and BPF)");
	/* the v1 leaves are named from the job's copy: never a shorter one */
	if (strlen(id) >= sizeof(job->id))
		return wd_err_set(err, -ENAMETOOLONG,
				  "cgroup: call id '%s' too long", id);
	r = mkleaf(cg->v2, sizeof(cg->v2), lay->v2_root, id);
	if (r < 0)
		return wd_err_set(err, r, "cgroup '%s': cannot create: %s",
				  cg->v2, strerror(-r));
	cg->v2_fd = open(cg->v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (cg->v2_fd < 0 || fstat(cg->v2_fd, &st) < 0) {
		r = -errno;
		wd_cgroup_destroy(cg);
		return wd_err_set(err, r, "cgroup '%s': %s", cg->v2,
				  strerror(-r));
	}
	cg->v2_id = st.st_ino; /* the kernel's cgroup id on cgroup2 */

	unsigned v1 = 0, made = 0;
	for (int c = 0; c < WD_CG_NCTRL; c++) {
		if (!want[c])
			continue;
		if (lay->v2_ctrl[c] && v2_enable(lay->v2_root, c)) {
			cg->on_v2[c] = true;
			r = limit_v2(cg, c, lim);
		} else if (lay->v1_root[c][0]) {
			v1 |= 1u << c;
			made |= wd_cgroup_spares_count(c) ? 0 : 1u << c;
			r = 0;
		} else {
			wd_cgroup_destroy(cg);
			return wd_err_set(err, -ENOTSUP,
					  "%s limit: cannot enforce: no %s "
					  "controller on cgroup v2 or v1",
					  ctrl_name[c], ctrl_name[c]);
		}
		if (r < 0) {
			wd_cgroup_destroy(cg);
			return wd_err_set(err, r,
					  "%s limit: cannot enforce: %s",
					  ctrl_name[c], strerror(-r));
		}
	}
	*job = (struct wd_cgroup_job){
	    .cg = cg, .lay = lay, .lim = *lim, .mask = v1};
	wd_strlcpy(job->id, id, sizeof(job->id));
	/* A v1 leaf to make (no spare) costs ~0.1 ms, the memory
	 * controller's per-cpu state: made on a thread of its own while the
	 * caller goes on with the call's set-up. It writes cg->v1 only. */
	/* (a few pages of stack: paths, the limit writes) */
	job->running = made && threaded &&
		       wd_aside_start(&job->t, 256 << 10, v1_main, job) == 0;
	if (!job->running)
		v1_leaves(job);
	return 0;
}

int wd_cgroup_create_end(struct wd_cgroup_job *job, struct wd_err *err)
{
	if (job->running)
		wd_aside_join(&job->t);
	job->running = false;
	if (job->rc && err)
		*err = job->err;
	return job->rc;
}

int wd_cgroup_create(struct wd_cgroup *cg, const struct wd_cgroup_layout *lay,
		     const char *id, const struct wd_cg_limits *lim,
		     struct wd_err *err)
{
	struct wd_cgroup_job job;
	int r = wd_cgroup_create_begin(cg, lay, id, lim, false, &job, err);
	if (r == 0 && (r = wd_cgroup_create_end(&job, err)) < 0)
		wd_cgroup_destroy(cg);
	return r;
}

int wd_cgroup_enter(struct wd_cgroup *cg, pid_t pid)
{
	char v[32];
	int r;
	snprintf(v, sizeof(v), "%d", pid);
	r = cg_write(cg->v2, "cgroup.procs", v);
	if (r < 0)
		return r;
	for (int c = 0; c < WD_CG_NCTRL; c++)
		if (cg->v1[c][0] &&
		    (r = cg_write(cg->v1[c], "cgroup.procs", v)) < 0)
			return r;
	return 0;
}

int wd_cgroup_enter_self(struct wd_cgroup *cg, bool v2)
{
	int r;
	/* "0" is the writer itself. On v1's tasks file that moves one
	 * thread (our whole, single-threaded process) and skips the global
	 * cgroup_threadgroup_rwsem whose write side waits for an RCU grace
	 * period (kernel 6.2+, "cgroup: Optimize single thread migration");
	 * v2's cgroup.procs has no such path, hence clone3 into the leaf. */
	if (v2 && (r = cg_write(cg->v2, "cgroup.procs", "0")) < 0)
		return r;
	for (int c = 0; c < WD_CG_NCTRL; c++)
		if (cg->v1[c][0] && (r = cg_write(cg->v1[c], "tasks", "0")) < 0)
			return r;
	return 0;
}

static int kill_listed(const char *dir)
{
	char p[600];
	cleanup_free char *s = NULL;
	int n = 0;
	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	if (wd_read_file(p, &s, NULL) < 0)
		return 0;
	for (char *t = strtok(s, "\n"); t; t = strtok(NULL, "\n")) {
		pid_t pid = atoi(t);
		if (pid > 1 && kill(pid, SIGKILL) == 0)
			n++;
	}
	return n;
}

bool wd_cgroup_populated(struct wd_cgroup *cg)
{
	if (!cg->v2[0])
		return false;
	return cg_read_key(cg->v2, "cgroup.events", "populated") != 0;
}

int wd_cgroup_wait_empty(struct wd_cgroup *cg, int timeout_ms)
{
	char p[600], buf[256];
	if (!cg->v2[0])
		return 0;
	snprintf(p, sizeof(p), "%s/cgroup.events", cg->v2);
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	uint64_t until = wd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			return -errno;
		buf[n] = 0;
		const char *k = strstr(buf, "populated ");
		if (!k || k[10] == '0')
			return 0;
		/* kernfs wakes pollers (POLLPRI) when the file changes */
		uint64_t now = wd_now_ns();
		if (now >= until)
			return -ETIMEDOUT;
		struct pollfd pf = {fd, POLLPRI, 0};
		int tmo = (int)((until - now) / 1000000) + 1;
		if (poll(&pf, 1, tmo) < 0 && errno != EINTR)
			return -errno;
	}
}

int wd_cgroup_kill(struct wd_cgroup *cg)
{
	if (!cg->v2[0])
		return 0;
	/* cgroup.kill (5.14+) kills atomically, including processes forking
	 * while we look. The pid-list fallback loops until empty. */
	if (cg_write(cg->v2, "cgroup.kill", "1") == 0)
		return 0;
	for (int i = 0; i < 100 && kill_listed(cg->v2) > 0; i++)
		;
	return 0;
}

uint64_t wd_cgroup_oom_kills(struct wd_cgroup *cg)
{
	if (cg->on_v2[WD_CG_MEMORY])
		return cg_read_key(cg->v2, "memory.events", "oom_kill");
	if (cg->v1[WD_CG_MEMORY][0])
		return cg_read_key(cg->v1[WD_CG_MEMORY], "memory.oom_control",
				   "oom_kill");
	return 0;
}

static void rmdir_retry(const char *dir)
{
	for (int i = 0; i < 200; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return;
		if (errno != EBUSY)
			break;
		kill_listed(dir);
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	wd_log_errno(WD_LOG_WARN, -errno, "cgroup '%s': cannot remove", dir);
}

int wd_cgroup_remove_dir(const char *dir)
{
	/* v2: one atomic kill; v1 (no cgroup.kill): the listed pids, again
	 * and again while rmdir finds the leaf busy */
	cg_write(dir, "cgroup.kill", "1");
	rmdir_retry(dir);
	return access(dir, F_OK) == 0 ? -EBUSY : 0;
}

void wd_cgroup_destroy(struct wd_cgroup *cg)
{
	if (cg->v2[0]) {
		wd_cgroup_kill(cg);
		wd_cgroup_wait_empty(cg, 2000);
	}
	wd_cgroup_remove_emptied(cg);
}

bool wd_cgroup_remove_emptied(struct wd_cgroup *cg)
{
	bool gone = true;
	for (int c = 0; c < WD_CG_NCTRL; c++)
		if (cg->v1[c][0]) {
			rmdir_retry(cg->v1[c]);
			cg->v1[c][0] = 0;
		}
	if (cg->v2_fd >= 0) {
		close(cg->v2_fd);
		cg->v2_fd = -1;
	}
	if (cg->v2[0]) {
		rmdir_retry(cg->v2);
		gone = access(cg->v2, F_OK) < 0 && errno == ENOENT;
		cg->v2[0] = 0;
	}
	return gone;
}
