/* The BPF LSM object loaded once per boot and pinned in bpffs, for one-shot
 * `warden exec` processes (their egress instance is the pinned one,
 * egress_pin.c): a call attaches the pinned lsm_cgroup programs to its
 * cgroup and writes its rules into the pinned wd_lsm_files, instead of
 * loading the object (the verifier, ~10 programs, on every call).
 *
 * Layout: <pin dir>/lsm_<16 hex of sha256(object bytes)>/ holds
 *   wd_socket_create, wd_socket_connect  the lsm_cgroup programs
 *   link_<program>                       the global lsm/ and lsm.s/ links
 *   wd_lsm_files                         the file rules of every call
 *   wd_version                           a frozen one-entry array
 * wd_version: the full hash, the owner tag the programs were loaded with,
 * each hook's state (active, or the errno of its load or attach), each
 * program's tag and id and each link's id, wd_lsm_files' shape and id,
 * and the ids of the egress maps the programs were loaded on (wd_policy,
 * wd_egress_rules, wd_events, wd_loss, wd_call_rings, wd_ring_slot: the
 * pinned egress instance's; pins loaded on other maps are stale).
 *
 * Why the global links may stay for the boot: each global program's first
 * step is one lookup of the current task's cgroup id in wd_policy; a task
 * in no call, or in a call another instance armed (the owner tag,
 * bpf/lsm_policy.h), is allowed at once, and nothing else is judged. The
 * pinned programs read the pinned egress maps only, which wardend (its own
 * load, its own maps) never writes: a daemon's call is judged by the
 * daemon's programs alone, a one-shot call by these alone. Their owner tag
 * has bit 63 set, which no per-process tag (pid << 32) has.
 *
 * A directory is used only if it is root's, not writable by others, and
 * every pin matches wd_version and wd_version our object and the egress
 * maps we hold; anything else is replaced (under a flock of the pin dir;
 * made in new_lsm_<random> and renamed into place), never used. Removing a
 * directory unpins its links: they detach once no process holds them (a
 * process using them holds them open until it exits). The egress pins'
 * replacement (egress_pin.c) removes these too: they are on its maps.
 */
#include "enforce/lsm_int.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "enforce/bpf_pin.h"
#include "enforce/probe.h"
#include "lsm.sha256.h"
#include "lsm.skel.h"
#include "lsm_policy.h"

#define VERSION	 "wd_version"
#define FILES	 "wd_lsm_files"
#define PREFIX	 "lsm_"
#define TMP	 "new_lsm_"
#define N_SHARED 6

struct lsm_pin_version {
	uint8_t sha[32];
	uint64_t owner;
	uint32_t n_hook, call_rings_on;
	int32_t err[WD_LSM_H_NR];     /* 0: active; else -errno */
	uint32_t attach[WD_LSM_H_NR]; /* err is the attach's (loaded) */
	uint8_t tag[WD_LSM_H_NR][8];
	uint32_t prog_id[WD_LSM_H_NR];
	uint32_t link_id[WD_LSM_H_NR]; /* global hooks */
	uint32_t files_type, files_key, files_value, files_max, files_id;
	uint32_t shared_id[N_SHARED];
};

static const uint8_t object_sha[32] = LSM_BPF_SHA256;

/* Ids of the egress maps l's programs read and write. */
static int shared_ids(const struct wd_lsm *l, uint32_t id[N_SHARED])
{
	int fd[N_SHARED] = {l->fds.policy,     l->fds.egress_rules,
			    l->fds.events,     l->fds.loss,
			    l->fds.call_rings, l->fds.ring_slot};
	for (int i = 0; i < N_SHARED; i++) {
		struct bpf_map_info mi = {0};
		uint32_t ml = sizeof(mi);
		if (bpf_obj_get_info_by_fd(fd[i], &mi, &ml) < 0)
			return -errno;
		id[i] = mi.id;
	}
	return 0;
}

static void link_name(char *b, size_t n, int h)
{
	snprintf(b, n, "link_%s", wd_lsm_hooks[h].prog);
}

/* A load or attach error that may not hold on the next try (memory, a
 * busy or interrupted attach, descriptors): never kept in the pins. The
 * others (the verifier's EINVAL/EACCES, a missing hook's ENOENT/ESRCH,
 * EOPNOTSUPP/ENOTSUPP, lockdown's EPERM) hold for the boot. */
static bool lsm_err_passing(int e)
{
	switch (-e) {
	case ENOMEM:
	case EBUSY:
	case EAGAIN:
	case EINTR:
	case ENOSPC:
	case EMFILE:
	case ENFILE:
		return true;
	default:
		return false;
	}
}

static int stale(struct wd_err *err, const char *hd, const char *what)
{
	return wd_err_set(err, -ESTALE, "bpf_lsm: %s in '%s'", what, hd);
}

/* Every pin of hd into l, checked against wd_version and wd_version
 * against our object and l's egress maps. 0 or -ESTALE (why in err). */
static int open_pins_at(struct wd_lsm *l, int dfd, const char *hd,
			struct wd_err *err)
{
	char p[4200], name[64];
	struct lsm_pin_version v;
	uint32_t zero = 0, ids[N_SHARED];
	snprintf(p, sizeof(p), "%s/%s", hd, VERSION);
	int vfd = wd_pin_get(dfd, p, VERSION);
	struct bpf_map_info mi = {0};
	uint32_t ml = sizeof(mi);
	bool ok = vfd >= 0 && bpf_obj_get_info_by_fd(vfd, &mi, &ml) == 0 &&
		  mi.type == BPF_MAP_TYPE_ARRAY && mi.key_size == 4 &&
		  mi.value_size == sizeof(v) && mi.max_entries == 1 &&
		  bpf_map_lookup_elem(vfd, &zero, &v) == 0;
	if (vfd >= 0)
		close(vfd);
	if (!ok)
		return stale(err, hd, "no version record of this build");
	if (memcmp(v.sha, object_sha, 32) || v.n_hook != WD_LSM_H_NR)
		return stale(err, hd, "pins of another build");
	if (v.call_rings_on != l->fds.call_rings_on || shared_ids(l, ids) ||
	    memcmp(ids, v.shared_id, sizeof(ids)))
		return stale(err, hd, "programs loaded on other egress maps");
	l->owner = v.owner;
	if (v.files_id) {
		snprintf(p, sizeof(p), "%s/%s", hd, FILES);
		l->files_fd = wd_pin_get(dfd, p, FILES);
		memset(&mi, 0, sizeof(mi));
		ml = sizeof(mi);
		if (l->files_fd < 0 ||
		    bpf_obj_get_info_by_fd(l->files_fd, &mi, &ml) < 0 ||
		    mi.type != v.files_type || mi.key_size != v.files_key ||
		    mi.value_size != v.files_value ||
		    mi.max_entries != v.files_max || mi.id != v.files_id)
			return stale(err, hd,
				     "map 'wd_lsm_files' missing or not the "
				     "one this build pinned");
	}
	for (int h = 0; h < WD_LSM_H_NR; h++) {
		if (v.err[h] && lsm_err_passing(v.err[h]))
			return stale(err, hd,
				     "a hook pinned as refused for a passing "
				     "reason");
		if (v.err[h]) {
			wd_lsm_set_unavailable(&l->st[h], v.err[h],
					       v.attach[h] ? "attach refused"
							   : "load refused");
			continue;
		}
		if (!v.files_id)
			return stale(err, hd, "an active hook without rules");
		if (wd_lsm_hooks[h].per_cgroup) {
			/* attached per call: the program itself */
			snprintf(p, sizeof(p), "%s/%s", hd,
				 wd_lsm_hooks[h].prog);
			int fd = wd_pin_get(dfd, p, wd_lsm_hooks[h].prog);
			struct bpf_prog_info pi = {0};
			uint32_t pl = sizeof(pi);
			l->prog_fd[h] = fd;
			if (fd < 0 ||
			    bpf_obj_get_info_by_fd(fd, &pi, &pl) < 0 ||
			    pi.type != BPF_PROG_TYPE_LSM ||
			    memcmp(pi.tag, v.tag[h], 8) ||
			    pi.id != v.prog_id[h])
				return stale(err, hd,
					     "an lsm_cgroup program missing or "
					     "not the one this build pinned");
		} else {
			/* attached for the boot: its link, held open while
			 * this process runs; a link to the program of the
			 * recorded id is one to the program this build
			 * loaded (ids are not reused while the kernel runs) */
			link_name(name, sizeof(name), h);
			snprintf(p, sizeof(p), "%s/%s", hd, name);
			int fd = wd_pin_get(dfd, p, name);
			struct bpf_link_info li = {0};
			uint32_t n = sizeof(li);
			l->glink_fd[h] = fd;
			if (fd < 0 || bpf_obj_get_info_by_fd(fd, &li, &n) < 0 ||
			    li.type != BPF_LINK_TYPE_TRACING ||
			    li.tracing.attach_type != BPF_LSM_MAC ||
			    li.prog_id != v.prog_id[h] || li.id != v.link_id[h])
				return stale(err, hd,
					     "a global hook's link missing or "
					     "not the one this build pinned");
		}
		l->st[h].active = true;
		l->st[h].err = 0;
		l->st[h].reason[0] = 0;
	}
	return 0;
}

static void close_pins(struct wd_lsm *l)
{
	for (int h = 0; h < WD_LSM_H_NR; h++) {
		if (l->prog_fd[h] >= 0)
			close(l->prog_fd[h]);
		if (l->glink_fd[h] >= 0)
			close(l->glink_fd[h]);
		l->prog_fd[h] = l->glink_fd[h] = -1;
		memset(&l->st[h], 0, sizeof(l->st[h]));
		l->st[h].hook = wd_lsm_hooks[h].hook;
		l->st[h].attach = wd_lsm_hooks[h].attach;
	}
	if (l->files_fd >= 0)
		close(l->files_fd);
	l->files_fd = -1;
}

/* The pins of hd, the directory judged by the fd they are taken from. 0;
 * -EPERM (not ours); -ENOENT; -ESTALE. */
static int open_pins(struct wd_lsm *l, const char *hd, struct wd_err *err)
{
	cleanup_close int dfd =
	    open(hd, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (dfd < 0) {
		int rc = -errno;
		/* a symlink or a file in its place: judged (not ours) */
		if (rc != -ENOENT && lstat(hd, &st) == 0 &&
		    wd_pin_owner_ok("bpf_lsm", hd, &st, err) < 0)
			return -EPERM;
		return rc;
	}
	if (fstat(dfd, &st) < 0)
		return -errno;
	if (wd_pin_owner_ok("bpf_lsm", hd, &st, err) < 0)
		return -EPERM;
	int rc = open_pins_at(l, dfd, hd, err);
	if (rc < 0)
		close_pins(l);
	return rc;
}

/* Load the object on l's egress maps and pin it as <dir>/<name>, whole or
 * not at all. */
static int create_pins(struct wd_lsm *l, const char *dir, int dfd,
		       const char *name, struct wd_err *err)
{
	struct wd_lsm *t = wd_lsm_new(NULL);
	char tmp[64], p[4200], ln[64], rnd[17];
	struct lsm_pin_version v = {.n_hook = WD_LSM_H_NR,
				    .call_rings_on = l->fds.call_rings_on};
	int rc = 0;
	t->fds = l->fds;
	if (getrandom(&t->owner, sizeof(t->owner), 0) != sizeof(t->owner)) {
		rc = -errno;
		wd_err_set(err, rc, "bpf_lsm: owner tag: %s", strerror(-rc));
		goto out;
	}
	t->owner |= 1ull << 63; /* never a per-process tag (pid << 32) */
	memcpy(v.sha, object_sha, 32);
	v.owner = t->owner;
	if ((rc = shared_ids(t, v.shared_id)) < 0) {
		wd_err_set(err, rc, "bpf_lsm: egress maps: %s", strerror(-rc));
		goto out;
	}
	wd_lsm_load(t); /* loads, and attaches the global programs */
	/* A hook refused for a passing reason (memory, a busy attach) is
	 * not pinned as refused: the pins would keep it off for every
	 * one-shot call until the reboot. This call loads its own instead
	 * (wd_lsm_open_pinned), the next one tries to pin again. */
	for (int h = 0; h < WD_LSM_H_NR; h++)
		if (!t->st[h].active && lsm_err_passing(t->st[h].err)) {
			rc = -EAGAIN;
			wd_err_set(err, rc,
				   "bpf_lsm: hook %s refused for now (%s): "
				   "not pinned for the boot",
				   wd_lsm_hooks[h].prog,
				   strerror(-t->st[h].err));
			goto out;
		}
	wd_rand_hex(rnd, 16);
	snprintf(tmp, sizeof(tmp), TMP "%s", rnd);
	if (mkdirat(dfd, tmp, 0700) < 0) {
		rc = -errno;
		wd_err_set(err, rc, "bpf_lsm: pin dir '%s/%s': %s", dir, tmp,
			   strerror(-rc));
		goto out;
	}
	if (t->files_fd >= 0) {
		struct bpf_map_info mi = {0};
		uint32_t ml = sizeof(mi);
		snprintf(p, sizeof(p), "%s/%s/%s", dir, tmp, FILES);
		if (bpf_obj_get_info_by_fd(t->files_fd, &mi, &ml) < 0 ||
		    bpf_obj_pin(t->files_fd, p) < 0)
			rc = -errno;
		v.files_type = mi.type;
		v.files_key = mi.key_size;
		v.files_value = mi.value_size;
		v.files_max = mi.max_entries;
		v.files_id = mi.id;
	}
	for (int h = 0; h < WD_LSM_H_NR && !rc; h++) {
		if (!t->st[h].active) {
			v.err[h] = t->st[h].err ? t->st[h].err : -EINVAL;
			v.attach[h] = t->prog_fd[h] >= 0;
			continue;
		}
		struct bpf_prog_info pi = {0};
		uint32_t pl = sizeof(pi);
		if (bpf_obj_get_info_by_fd(t->prog_fd[h], &pi, &pl) < 0) {
			rc = -errno;
			break;
		}
		memcpy(v.tag[h], pi.tag, 8);
		v.prog_id[h] = pi.id;
		if (wd_lsm_hooks[h].per_cgroup) {
			snprintf(p, sizeof(p), "%s/%s/%s", dir, tmp,
				 wd_lsm_hooks[h].prog);
			if (bpf_obj_pin(t->prog_fd[h], p) < 0)
				rc = -errno;
			continue;
		}
		int lfd = bpf_link__fd(t->links[h]);
		struct bpf_link_info li = {0};
		uint32_t n = sizeof(li);
		link_name(ln, sizeof(ln), h);
		snprintf(p, sizeof(p), "%s/%s/%s", dir, tmp, ln);
		if (bpf_obj_get_info_by_fd(lfd, &li, &n) < 0 ||
		    bpf_obj_pin(lfd, p) < 0)
			rc = -errno;
		v.link_id[h] = li.id;
	}
	rc = wd_pin_commit("bpf_lsm", dir, dfd, tmp, name, &v, sizeof(v), rc,
			   err);
out:
	/* the pins hold what we made: closing our fds (and links: closing
	 * a pinned link's fd leaves it attached) keeps it */
	wd_lsm_close(t);
	return rc;
}

/* Under the lock: every LSM entry of the pin dir (another build's, an
 * invalid copy of ours, a crashed creator's temp dir) goes, ours is made
 * anew. The egress object's entries are its own (egress_pin.c). */
static int replace_pins(struct wd_lsm *l, const char *dir, int dfd,
			const char *name, struct wd_err *err)
{
	DIR *d = fdopendir(dup(dfd));
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, PREFIX, strlen(PREFIX)) &&
		    strncmp(de->d_name, TMP, strlen(TMP)))
			continue;
		wd_debug("bpf_lsm: removing stale pins '%s/%s'", dir,
			 de->d_name);
		wd_pin_remove(dfd, de->d_name);
	}
	if (d)
		closedir(d);
	return create_pins(l, dir, dfd, name, err);
}

/* Rules of calls whose cgroup is gone (a caller killed before its end):
 * removed (a load of our own went with its process; the pinned map
 * stays for the boot). */
static void sweep_dead(struct wd_lsm *l)
{
	const struct wd_features *f = wd_probe();
	if (l->files_fd < 0 || !f->cg.v2_root[0])
		return;
	cleanup_close int mfd =
	    open(f->cg.v2_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return;
	struct wd_lsm_file_key k, next;
	uint64_t seen[64], dead[64];
	int ns = 0, nd = 0;
	void *prev = NULL;
	while (ns < 64 && bpf_map_get_next_key(l->files_fd, prev, &next) == 0) {
		bool known = false;
		for (int i = 0; i < ns && !known; i++)
			known = seen[i] == next.cgid;
		if (!known) {
			seen[ns++] = next.cgid;
			if (!wd_cgroup_alive(mfd, next.cgid))
				dead[nd++] = next.cgid;
		}
		k = next;
		prev = &k;
	}
	for (int i = 0; i < nd; i++) {
		wd_debug("bpf_lsm: rules of gone cgroup %llu removed",
			 (unsigned long long)dead[i]);
		wd_lsm_sweep_files(l->files_fd, dead[i]);
	}
}

struct lsm_pin_ctx {
	struct wd_lsm *l;
	const char *dir, *name;
};

static int lsm_open(void *ctx, const char *hd, struct wd_err *err)
{
	return open_pins(((struct lsm_pin_ctx *)ctx)->l, hd, err);
}

static int lsm_make(void *ctx, int dfd, struct wd_err *err)
{
	struct lsm_pin_ctx *c = ctx;
	return replace_pins(c->l, c->dir, dfd, c->name, err);
}

int wd_lsm_open_pinned(struct wd_lsm **out, struct wd_egress *eg,
		       struct wd_err *err)
{
	const struct wd_features *f = wd_probe();
	*out = NULL;
	/* nothing would load (the probe's lsm/ program was refused) or run
	 * (bpf not in the LSM list): nothing to pin, and the status costs
	 * no load */
	if (!f->bpf_in_lsm_list || f->lsm_prog_err)
		return wd_lsm_open(out, eg, err);
	const char *dir = wd_pin_dir();
	char name[64], hd[4200];
	snprintf(name, sizeof(name), PREFIX);
	for (int i = 0; i < 8; i++)
		snprintf(name + strlen(PREFIX) + 2 * i, 3, "%02x",
			 object_sha[i]);
	snprintf(hd, sizeof(hd), "%s/%s", dir, name);
	int rc = wd_pin_dir_ensure("bpf_lsm", dir, err);
	if (rc < 0)
		return rc;

	struct wd_lsm *l = wd_lsm_new(eg);
	l->pinned = true;
	struct lsm_pin_ctx c = {l, dir, name};
	rc = wd_pin_open_or_make("bpf_lsm", dir, hd, lsm_open, lsm_make, &c,
				 err);
	if (rc == -EAGAIN) {
		/* a hook refused for now: not pinned, this process's own */
		wd_debug("%s", err ? err->msg : "bpf_lsm: not pinned");
		wd_lsm_close(l);
		if (err)
			*err = (struct wd_err){0};
		return wd_lsm_open(out, eg, err);
	}
	if (rc < 0) {
		wd_lsm_close(l);
		return rc;
	}
	sweep_dead(l);
	*out = l;
	return 0;
}
