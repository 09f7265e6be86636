#include "enforce/lsm.h"
#include "enforce/lsm_int.h"
#include "common/safepath.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/log.h"
#include "enforce/probe.h"
#include "lib/policy.h"
#include "lsm_policy.h"
#include "lsm.skel.h"

#define hooks wd_lsm_hooks
const struct wd_lsm_hook_def wd_lsm_hooks[WD_LSM_H_NR] = {
    [WD_LSM_H_SOCKET_CREATE] = {"socket_create", "wd_socket_create",
				"lsm_cgroup", true},
    [WD_LSM_H_SOCKET_CONNECT] = {"socket_connect", "wd_socket_connect",
				 "lsm_cgroup", true},
    [WD_LSM_H_FILE_OPEN] = {"file_open", "wd_file_open", "lsm.s", false},
    [WD_LSM_H_BPRM_CHECK] = {"bprm_check_security", "wd_bprm_check", "lsm.s",
			     false},
    [WD_LSM_H_PTRACE] = {"ptrace_access_check", "wd_ptrace", "lsm", false},
    [WD_LSM_H_TASK_KILL] = {"task_kill", "wd_task_kill", "lsm", false},
    [WD_LSM_H_BPF] = {"bpf", "wd_bpf", "lsm", false},
    [WD_LSM_H_SB_MOUNT] = {"sb_mount", "wd_sb_mount", "lsm", false},
    [WD_LSM_H_MOVE_MOUNT] = {"move_mount", "wd_move_mount", "lsm", false},
    [WD_LSM_H_KMOD_REQUEST] = {"kernel_module_request", "wd_kmod_request",
			       "lsm", false},
};

/* Character devices every program may open (read and write). */
static const char *const base_devices[] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};

struct wd_lsm_call {
	uint64_t cgid;
	bool created_policy;	  /* we inserted the wd_policy entry */
	int link_fd[WD_LSM_H_NR]; /* lsm_cgroup links on the call (-1) */
	struct wd_lsm_file_key *keys;
	int n_keys;
	struct wd_lsm_call *next;
};

const char *wd_lsm_hook_name(enum wd_lsm_hook h)
{
	return h < WD_LSM_H_NR ? hooks[h].hook : "?";
}

static struct bpf_program *prog_of(struct lsm_bpf *s, int h)
{
	return bpf_object__find_program_by_name(s->obj, hooks[h].prog);
}

/* Open a fresh skeleton whose shared maps are the egress object's. */
static int open_skel(struct wd_lsm *l, struct lsm_bpf **out)
{
	struct lsm_bpf *s = lsm_bpf__open();
	if (!s)
		return -errno;
	s->rodata->wd_lsm_owner = l->owner;
	/* the egress instance's records go to per-call rings when it is
	 * the pinned one: so must ours (bpf/lib/maps.h) */
	s->rodata->wd_call_rings_on = l->fds.call_rings_on;
	int rc = 0;
	if ((rc = bpf_map__reuse_fd(s->maps.wd_policy, l->fds.policy)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_egress_rules,
				    l->fds.egress_rules)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_events, l->fds.events)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_loss, l->fds.loss)) ||
	    (rc =
		 bpf_map__reuse_fd(s->maps.wd_call_rings, l->fds.call_rings)) ||
	    (rc = bpf_map__reuse_fd(s->maps.wd_ring_slot, l->fds.ring_slot))) {
		lsm_bpf__destroy(s);
		return rc < 0 ? rc : -EINVAL;
	}
	*out = s;
	return 0;
}

void wd_lsm_set_unavailable(struct wd_lsm_hook_status *st, int err,
			    const char *why)
{
	st->active = false;
	st->err = err;
	snprintf(st->reason, sizeof(st->reason), "%s: %s (errno %d)", why,
		 strerror(-err), -err);
}

/* Load one program alone; 0 or the kernel's -errno. */
static int probe_one(struct wd_lsm *l, int h)
{
	struct lsm_bpf *s = NULL;
	int rc = open_skel(l, &s);
	if (rc)
		return rc;
	for (int j = 0; j < WD_LSM_H_NR; j++)
		bpf_program__set_autoload(prog_of(s, j), j == h);
	rc = lsm_bpf__load(s);
	lsm_bpf__destroy(s);
	return rc;
}

static int quiet_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	return 0;
}

void wd_lsm_load(struct wd_lsm *l)
{
	const struct wd_features *f = wd_probe();
	struct lsm_bpf *s = NULL;
	int rc;

	for (int h = 0; h < WD_LSM_H_NR; h++) {
		l->st[h].hook = hooks[h].hook;
		l->st[h].attach = hooks[h].attach;
	}
	if (!f->bpf_in_lsm_list) {
		/* Programs would load and attach, and the kernel would never
		 * call them: claim nothing. */
		for (int h = 0; h < WD_LSM_H_NR; h++) {
			l->st[h].active = false;
			l->st[h].err = -EOPNOTSUPP;
			snprintf(l->st[h].reason, sizeof(l->st[h].reason),
				 "bpf is not in the active LSM list '%s' "
				 "(from %s)",
				 f->lsm_list[0] ? f->lsm_list : "unknown",
				 f->lsm_source[0] ? f->lsm_source
						  : "nowhere readable");
		}
		return;
	}

	/* Hooks switched off by hand: WARDEN_LSM_DISABLE=hook,hook (for
	 * tests of the fallback, and for an operator who must switch one off
	 * on a node without rebuilding). */
	int err[WD_LSM_H_NR] = {0};
	const char *dis = getenv("WARDEN_LSM_DISABLE");
	bool any_off = false;
	for (int h = 0; dis && h < WD_LSM_H_NR; h++) {
		size_t n = strlen(hooks[h].hook);
		for (const char *p = strstr(dis, hooks[h].hook); p;
		     p = strstr(p + 1, hooks[h].hook))
			if ((p == dis || p[-1] == ',') &&
			    (p[n] == 0 || p[n] == ',')) {
				err[h] = -ECANCELED;
				any_off = true;
			}
	}

	/* Fast path: everything (not switched off) loads at once. Verifier
	 * noise of failed loads is not worth a log line; the per-hook status
	 * carries the errno. */
	libbpf_print_fn_t old = libbpf_set_print(quiet_print);
	if (f->lsm_prog_err) {
		/* The feature probe's minimal lsm/file_open program (return
		 * 0) was refused: every lsm/ program is, for the same reason
		 * (no trampoline, lockdown, no BPF LSM). Trying each would
		 * parse the kernel's BTF once a program (~20 ms apiece, a
		 * quarter of a second for `warden exec`) for the same answer.
		 */
		for (int h = 0; h < WD_LSM_H_NR; h++)
			if (!err[h])
				err[h] = f->lsm_prog_err;
		goto loaded;
	}
	if ((rc = open_skel(l, &s)) == 0) {
		for (int h = 0; any_off && h < WD_LSM_H_NR; h++)
			bpf_program__set_autoload(prog_of(s, h), !err[h]);
		if ((rc = lsm_bpf__load(s)) == 0)
			goto loaded;
		lsm_bpf__destroy(s);
	}
	s = NULL;
	/* Probe each program alone, then load the ones that can. */
	int n_ok = 0;
	for (int h = 0; h < WD_LSM_H_NR; h++) {
		if (!err[h])
			err[h] = probe_one(l, h);
		n_ok += !err[h];
	}
	if (n_ok && open_skel(l, &s) == 0) {
		for (int h = 0; h < WD_LSM_H_NR; h++)
			bpf_program__set_autoload(prog_of(s, h), !err[h]);
		if ((rc = lsm_bpf__load(s)) != 0) {
			for (int h = 0; h < WD_LSM_H_NR; h++)
				if (!err[h])
					err[h] = rc;
			lsm_bpf__destroy(s);
			s = NULL;
		}
	}
loaded:
	libbpf_set_print(old);
	l->skel = s;
	if (s)
		l->files_fd = bpf_map__fd(s->maps.wd_lsm_files);

	for (int h = 0; h < WD_LSM_H_NR; h++) {
		if (err[h]) {
			wd_lsm_set_unavailable(
			    &l->st[h], err[h],
			    err[h] == -ECANCELED
				? "switched off by WARDEN_LSM_DISABLE"
				: "load refused");
			continue;
		}
		l->prog_fd[h] = bpf_program__fd(prog_of(s, h));
		if (!hooks[h].per_cgroup) {
			l->links[h] = bpf_program__attach_lsm(prog_of(s, h));
			if (!l->links[h]) {
				wd_lsm_set_unavailable(&l->st[h], -errno,
						       "attach refused");
				continue;
			}
		}
		l->st[h].active = true;
		l->st[h].err = 0;
		l->st[h].reason[0] = 0;
	}
}

/* A tag no other instance sharing the same wd_policy map has: the maps
 * belong to one process (a child forked with them has another pid) and the
 * counter is unique within it. */
static uint64_t new_owner(void)
{
	static atomic_uint next;
	return (uint64_t)getpid() << 32 |
	       (uint32_t)(atomic_fetch_add(&next, 1) + 1);
}

struct wd_lsm *wd_lsm_new(struct wd_egress *eg)
{
	struct wd_lsm *l = wd_calloc(1, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	if (eg)
		wd_egress_map_fds(eg, &l->fds);
	l->files_fd = -1;
	for (int h = 0; h < WD_LSM_H_NR; h++) {
		l->prog_fd[h] = -1;
		l->glink_fd[h] = -1;
		l->st[h].hook = hooks[h].hook;
		l->st[h].attach = hooks[h].attach;
	}
	return l;
}

int wd_lsm_open(struct wd_lsm **out, struct wd_egress *eg, struct wd_err *err)
{
	struct wd_lsm *l = wd_lsm_new(eg);
	l->owner = new_owner();
	wd_lsm_load(l);
	*out = l;
	return 0;
}

/* One-shot processes (their egress instance is the node's pinned one:
 * per-call rings) use the node's pinned LSM instance, unless hooks are
 * switched off by hand (WARDEN_LSM_DISABLE: the pinned programs are all
 * that load), which makes a load of this process's own. */
static int open_for(struct wd_lsm **out, struct wd_egress *eg,
		    struct wd_err *err)
{
	struct wd_egress_map_fds fds;
	wd_egress_map_fds(eg, &fds);
	const char *dis = getenv("WARDEN_LSM_DISABLE");
	if (fds.call_rings_on && !(dis && *dis))
		return wd_lsm_open_pinned(out, eg, err);
	return wd_lsm_open(out, eg, err);
}

struct wd_lsm *wd_lsm_shared(struct wd_err *err)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static struct wd_lsm *shared;
	pthread_mutex_lock(&mu);
	if (!shared) {
		struct wd_egress *eg = wd_egress_shared(err);
		if (eg)
			open_for(&shared, eg, err);
	}
	struct wd_lsm *l = shared;
	pthread_mutex_unlock(&mu);
	return l;
}

void wd_lsm_status(const struct wd_lsm *l,
		   struct wd_lsm_hook_status out[WD_LSM_H_NR])
{
	memcpy(out, l->st, sizeof(l->st));
}

int wd_lsm_n_active(const struct wd_lsm *l)
{
	int n = 0;
	for (int h = 0; h < WD_LSM_H_NR; h++)
		n += l->st[h].active;
	return n;
}

int wd_lsm_hook_status(struct wd_lsm_hook_status out[WD_LSM_H_NR])
{
	struct wd_err e = {0};
	struct wd_lsm *l = wd_lsm_shared(&e);
	if (l) {
		wd_lsm_status(l, out);
		return WD_LSM_H_NR;
	}
	for (int h = 0; h < WD_LSM_H_NR; h++) {
		memset(&out[h], 0, sizeof(out[h]));
		out[h].hook = hooks[h].hook;
		out[h].attach = hooks[h].attach;
		out[h].err = e.code ? e.code : -EINVAL;
		snprintf(out[h].reason, sizeof(out[h].reason),
			 "shared BPF maps unavailable: %s",
			 e.msg[0] ? e.msg : strerror(-out[h].err));
	}
	return WD_LSM_H_NR;
}

bool wd_lsm_active(void)
{
	struct wd_lsm *l = wd_lsm_shared(NULL);
	return l && wd_lsm_n_active(l) == WD_LSM_H_NR;
}

/* ---- per call ------------------------------------------------------------ */

static struct wd_lsm_call *find_call(struct wd_lsm *l, uint64_t cgid)
{
	for (struct wd_lsm_call *c = l->calls; c; c = c->next)
		if (c->cgid == cgid)
			return c;
	return NULL;
}

static int add_file_rule(struct wd_lsm *l, struct wd_lsm_call *c,
			 const struct stat *st, unsigned access)
{
	/* st_dev is the user-space encoding; sb->s_dev is MKDEV(major,minor)
	 * = major << 20 | minor. */
	struct wd_lsm_file_key k = {
	    .cgid = c->cgid,
	    .ino = st->st_ino,
	    .dev = (uint32_t)(major(st->st_dev) << 20 | minor(st->st_dev)),
	};
	int fd = l->files_fd;
	uint32_t v = 0;
	bool known = bpf_map_lookup_elem(fd, &k, &v) == 0;
	v |= access;
	if (bpf_map_update_elem(fd, &k, &v, BPF_ANY))
		return -errno;
	if (!known) {
		c->keys =
		    wd_realloc(c->keys, (c->n_keys + 1) * sizeof(*c->keys));
		c->keys[c->n_keys++] = k;
	}
	return 0;
}

static int add_paths(struct wd_lsm *l, struct wd_lsm_call *c,
		     const struct wd_path_list *pl, unsigned access,
		     struct wd_err *err)
{
	for (int i = 0; i < pl->n; i++) {
		struct stat st;
		/* the inode the rule names: not through a symlink a tool
		 * could have made (common/safepath.h) */
		char why[PATH_MAX + 160];
		int fd = wd_open_trusted(pl->v[i], O_PATH, why, sizeof(why));
		if (fd >= 0) {
			int fr = fstat(fd, &st) < 0 ? -errno : 0;
			close(fd);
			fd = fr;
		}
		if (fd < 0) {
			if (fd == -ENOENT || fd == -ENOTDIR)
				continue; /* nothing there: nothing granted */
			return wd_err_set(err, fd, "bpf_lsm: path '%s': %s",
					  pl->v[i],
					  why[0] ? why : strerror(-fd));
		}
		int rc = add_file_rule(l, c, &st, access);
		if (rc)
			return wd_err_set(err, rc,
					  "map 'wd_lsm_files': path '%s': %s",
					  pl->v[i], strerror(-rc));
	}
	return 0;
}

/* Delete every file rule of cgid, including those a child added with
 * wd_lsm_allow_fd(). Keys are collected first: deleting while walking with
 * get_next_key can restart the walk. */
void wd_lsm_sweep_files(int ffd, uint64_t cgid)
{
	struct wd_lsm_file_key k, next, *del = NULL;
	int n = 0;
	void *prev = NULL;
	while (bpf_map_get_next_key(ffd, prev, &next) == 0) {
		if (next.cgid == cgid) {
			del = wd_realloc(del, (n + 1) * sizeof(*del));
			del[n++] = next;
		}
		k = next;
		prev = &k;
	}
	for (int i = 0; i < n; i++)
		bpf_map_delete_elem(ffd, &del[i]);
	free(del);
}

static void call_undo(struct wd_lsm *l, struct wd_lsm_call *c)
{
	for (int h = 0; h < WD_LSM_H_NR; h++)
		if (c->link_fd[h] >= 0) {
			close(c->link_fd[h]);
			c->link_fd[h] = -1;
		}
	int pfd = l->fds.policy;
	struct wd_call_policy p;
	if (bpf_map_lookup_elem(pfd, &c->cgid, &p) == 0) {
		if (c->created_policy) {
			bpf_map_delete_elem(pfd, &c->cgid);
		} else {
			p.reserved[WD_LSM_SLOT] = 0;
			p.reserved[WD_LSM_SLOT_OWNER] = 0;
			bpf_map_update_elem(pfd, &c->cgid, &p, BPF_EXIST);
		}
	}
	if (l->files_fd >= 0) {
		int ffd = l->files_fd;
		for (int i = 0; i < c->n_keys; i++)
			bpf_map_delete_elem(ffd, &c->keys[i]);
		wd_lsm_sweep_files(ffd, c->cgid);
	}
	free(c->keys);
	c->keys = NULL;
	c->n_keys = 0;
}

static bool wants_unix(const struct wd_manifest *m)
{
	for (int i = 0; i < m->n_socket_families; i++)
		if (m->socket_family_nums &&
		    m->socket_family_nums[i] == AF_UNIX)
			return true;
	return false;
}

static int begin(struct wd_lsm *l, int cgroup_fd, uint64_t cgid,
		 const struct wd_manifest *m, bool arm, struct wd_err *err)
{
	if (l->files_fd < 0 || !wd_lsm_n_active(l) || m->tier == WD_TIER_3)
		return 0;
	pthread_mutex_lock(&l->lock);
	if (find_call(l, cgid)) {
		pthread_mutex_unlock(&l->lock);
		return wd_err_set(err, -EEXIST,
				  "bpf_lsm: cgroup %llu is already armed",
				  (unsigned long long)cgid);
	}
	struct wd_lsm_call *c = wd_calloc(1, sizeof(*c));
	c->cgid = cgid;
	for (int h = 0; h < WD_LSM_H_NR; h++)
		c->link_fd[h] = -1;
	int rc = 0;

	/* Files first: nothing is armed until the policy flags are set. */
	if (l->st[WD_LSM_H_FILE_OPEN].active ||
	    l->st[WD_LSM_H_BPRM_CHECK].active) {
		for (size_t i = 0; i < WD_ARRAY_SIZE(base_devices) && !rc;
		     i++) {
			struct stat st;
			if (stat(base_devices[i], &st) == 0 &&
			    S_ISCHR(st.st_mode))
				rc = add_file_rule(l, c, &st,
						   WD_LSM_READ | WD_LSM_WRITE);
		}
		if (rc)
			wd_err_set(err, rc, "map 'wd_lsm_files': %s",
				   strerror(-rc));
		if (!rc)
			rc = add_paths(l, c, &m->fs_read, WD_LSM_READ, err);
		if (!rc)
			rc = add_paths(l, c, &m->fs_write,
				       WD_LSM_READ | WD_LSM_WRITE, err);
		if (!rc)
			rc = add_paths(l, c, &m->fs_exec, WD_LSM_EXECUTE, err);
		if (rc)
			goto fail;
	}

	for (int h = 0; h < WD_LSM_H_NR; h++) {
		if (!hooks[h].per_cgroup || !l->st[h].active)
			continue;
		/* what bpf_program__attach_cgroup does, on a program of our
		 * own load or a pinned one alike */
		c->link_fd[h] = bpf_link_create(l->prog_fd[h], cgroup_fd,
						BPF_LSM_CGROUP, NULL);
		if (c->link_fd[h] < 0) {
			rc = -errno;
			wd_err_set(err, rc, "bpf_lsm: attach %s to cgroup: %s",
				   hooks[h].hook, strerror(-rc));
			goto fail;
		}
	}

	struct wd_call_policy p;
	if (bpf_map_lookup_elem(l->fds.policy, &cgid, &p) < 0) {
		/* no egress entry: make one that asks nothing of egress */
		memset(&p, 0, sizeof(p));
		c->created_policy = true;
	}
	uint64_t fl = arm ? WD_LSM_ON : 0;
	if (l->st[WD_LSM_H_FILE_OPEN].active)
		fl |= WD_LSM_FILES;
	if (l->st[WD_LSM_H_BPRM_CHECK].active)
		fl |= WD_LSM_EXEC;
	if (wants_unix(m))
		fl |= WD_LSM_ALLOW_UNIX;
	p.reserved[WD_LSM_SLOT] = fl;
	p.reserved[WD_LSM_SLOT_OWNER] = l->owner;
	if (!(p.flags & WD_POL_FAMILIES)) {
		p.flags |= WD_POL_FAMILIES;
		p.families_mask =
		    (1ull << AF_UNIX) | (1ull << AF_INET) | (1ull << AF_INET6);
		for (int i = 0; i < m->n_socket_families; i++)
			if (m->socket_family_nums &&
			    m->socket_family_nums[i] > 0 &&
			    m->socket_family_nums[i] < 64)
				p.families_mask |= 1ull
						   << m->socket_family_nums[i];
	}
	if (m->mode == WD_MODE_AUDIT)
		p.flags |= WD_POL_AUDIT;
	if (bpf_map_update_elem(l->fds.policy, &cgid, &p, BPF_ANY)) {
		rc = -errno;
		wd_err_set(err, rc, "map 'wd_policy': %s", strerror(-rc));
		goto fail;
	}
	c->next = l->calls;
	l->calls = c;
	pthread_mutex_unlock(&l->lock);
	return 0;
fail:
	call_undo(l, c);
	free(c);
	pthread_mutex_unlock(&l->lock);
	return rc;
}

int wd_lsm_begin(struct wd_lsm *l, int cgroup_fd, uint64_t cgid,
		 const struct wd_manifest *m, struct wd_err *err)
{
	return begin(l, cgroup_fd, cgid, m, true, err);
}

int wd_lsm_prepare(struct wd_lsm *l, int cgroup_fd, uint64_t cgid,
		   const struct wd_manifest *m, struct wd_err *err)
{
	return begin(l, cgroup_fd, cgid, m, false, err);
}

/* Fork-safe (no lock, no allocation): map operations on fds only, so the
 * sandbox's own child may call it between fork and exec. */
int wd_lsm_arm(struct wd_lsm *l, uint64_t cgid)
{
	struct wd_call_policy p;
	if (l->files_fd < 0)
		return 0;
	if (bpf_map_lookup_elem(l->fds.policy, &cgid, &p) < 0)
		return -errno;
	if (p.reserved[WD_LSM_SLOT_OWNER] != l->owner)
		return -ENOENT; /* not prepared by this instance */
	p.reserved[WD_LSM_SLOT] |= WD_LSM_ON;
	if (bpf_map_update_elem(l->fds.policy, &cgid, &p, BPF_EXIST) < 0)
		return -errno;
	return 0;
}

/* Fork-safe like wd_lsm_arm. The rule is not kept in the call's key list:
 * wd_lsm_end() sweeps the map for the cgroup id, so rules added by a child
 * are removed too. */
int wd_lsm_allow_fd(struct wd_lsm *l, uint64_t cgid, int fd, unsigned access)
{
	struct stat st;
	if (l->files_fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0)
		return -errno;
	struct wd_lsm_file_key k = {
	    .cgid = cgid,
	    .ino = st.st_ino,
	    .dev = (uint32_t)(major(st.st_dev) << 20 | minor(st.st_dev)),
	};
	int mfd = l->files_fd;
	uint32_t v = 0;
	bpf_map_lookup_elem(mfd, &k, &v);
	v |= access;
	return bpf_map_update_elem(mfd, &k, &v, BPF_ANY) < 0 ? -errno : 0;
}

int wd_lsm_end(struct wd_lsm *l, uint64_t cgid)
{
	pthread_mutex_lock(&l->lock);
	struct wd_lsm_call **pp = &l->calls, *c = NULL;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->cgid == cgid) {
			c = *pp;
			*pp = c->next;
			break;
		}
	if (c) {
		call_undo(l, c);
		free(c);
	}
	pthread_mutex_unlock(&l->lock);
	return c ? 0 : -ENOENT;
}

void wd_lsm_close(struct wd_lsm *l)
{
	if (!l)
		return;
	while (l->calls)
		wd_lsm_end(l, l->calls->cgid);
	for (int h = 0; h < WD_LSM_H_NR; h++) {
		bpf_link__destroy(l->links[h]);
		if (l->glink_fd[h] >= 0)
			close(l->glink_fd[h]);
		/* a pinned instance's fds are its own; a load's, the skeleton's
		 */
		if (l->pinned && l->prog_fd[h] >= 0)
			close(l->prog_fd[h]);
	}
	if (l->pinned && l->files_fd >= 0)
		close(l->files_fd);
	lsm_bpf__destroy(l->skel);
	pthread_mutex_destroy(&l->lock);
	free(l);
}
