/* The egress object loaded once per boot and pinned in bpffs; a one-shot
 * `warden exec` opens the pins and attaches them to its call's cgroup
 * instead of loading the object (BTF parsing and the verifier: most of a
 * one-shot call's time). See wd_egress_open_pinned (egress.h).
 *
 * Layout: <pin dir>/<16 hex of sha256(object bytes)>/ holds the programs
 * and the maps user space touches, plus wd_version, a frozen one-entry
 * array: the full hash, and each program's tag and each map's shape as
 * this build pinned them. A directory is used only if it is root's, not
 * writable by others, and every pin matches wd_version and wd_version our
 * object; anything else is another build's (or broken) and is replaced,
 * never used.
 *
 * Races: pins are made in a fresh directory and renamed into place, so a
 * reader sees all of them or none (bpffs refuses names with a dot: the
 * temp dir is new_<random>); creators (and removers of stale pins)
 * serialise on a flock of the pin dir. wardend keeps its own loaded
 * instance (one ring, one consumer: egress.c), not these pins.
 */
#include "enforce/egress_int.h"
#include "enforce/bpf_pin.h"
#include "enforce/probe.h"
#include "common/log.h"
#include "common/util.h"

#include <dirent.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "egress.sha256.h"
#include "egress.skel.h"

#define WD_PIN_DIR_DEFAULT "/sys/fs/bpf/warden"
#define WD_PIN_VERSION	   "wd_version"

enum {
	PM_POLICY,
	PM_RULES,
	PM_UNIX,
	PM_LOSS,
	PM_EVENTS,
	PM_RINGS,
	PM_SLOT,
	PM_OWNER,
	PM_N
};
static const char *const map_names[PM_N] = {
    "wd_policy", "wd_egress_rules", "wd_unix_rules", "wd_loss",
    "wd_events", "wd_call_rings",   "wd_ring_slot",  "wd_ring_owner"};

#define PIN_NPROG (WD_EG_NPROG + WD_EG_NKEEP)

struct pin_version {
	uint8_t sha[32];
	uint32_t unix_ok;
	uint32_t n_prog;
	uint8_t tag[PIN_NPROG][8];
	struct {
		uint32_t type, key, value, max;
		/* the map's kernel id when pinned (ids are unique within a
		 * boot): a same-shaped map put in its place is not ours */
		uint32_t id;
	} map[PM_N];
	/* each program's id when pinned: a keep link is checked against it
	 * without opening the program (wd_egress_pin_keep), a call's
	 * programs when opened */
	uint32_t id[PIN_NPROG];
};

const char *wd_pin_dir(void)
{
	const char *d = getenv("WARDEN_BPF_PIN_DIR");
	return d && *d ? d : WD_PIN_DIR_DEFAULT;
}

static const char *prog_name(int i)
{
	return i < WD_EG_NPROG ? wd_eg_prog_names[i]
			       : wd_eg_keep_names[i - WD_EG_NPROG];
}

/* the unix programs, loaded only where the kernel has the hooks */
static bool unix_prog(int i)
{
	return i == 4 || i == 5 || i >= WD_EG_NPROG + WD_EG_KEEP_UNIX;
}

static int *prog_slot(struct wd_egress *e, int i)
{
	return i < WD_EG_NPROG ? &e->prog_fd[i] : &e->keep_fd[i - WD_EG_NPROG];
}

static int *map_slot(struct wd_egress *e, int m)
{
	int *s[PM_N] = {&e->policy_fd, &e->rules_fd, &e->unix_fd, &e->loss_fd,
			&e->events_fd, &e->rings_fd, &e->slot_fd, &e->owner_fd};
	return s[m];
}

/* sha256 of the object's bytes, taken by the Makefile from the file the
 * skeleton embeds (test_egress_sha checks the two agree) */
static const uint8_t object_sha[32] = EGRESS_BPF_SHA256;

static bool no_names;

void wd_egress_pins_no_names(bool on)
{
	__atomic_store_n(&no_names, on, __ATOMIC_RELAXED);
}

/* Root's and writable by root alone; a directory, not a symlink. */
int wd_pin_owner_ok(const char *who, const char *p, const struct stat *sp,
		    struct wd_err *err)
{
	struct stat st = *sp;
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
		return wd_err_set(err, -EPERM,
				  "%s: pin dir '%s' is not ours (%s, owner "
				  "%u, mode %03o; want a directory of root's "
				  "that only root can write): refusing the "
				  "BPF objects pinned there",
				  who, p,
				  S_ISDIR(st.st_mode) ? "directory"
						      : "not "
							"a directory",
				  st.st_uid, st.st_mode & 07777);
	return 0;
}

static int check_owner(const char *p, struct wd_err *err)
{
	struct stat st;
	if (lstat(p, &st) < 0)
		return -errno;
	return wd_pin_owner_ok("egress", p, &st, err);
}

/* BPF_OBJ_GET of `name` in the directory `dfd` (BPF_F_PATH_FD, Linux
 * 6.5+): one component walked, not the whole pin path (a bpffs walk of
 * six components per object was ~1.6 us of each of a one-shot call's 33
 * gets); `full` (the same object) where the kernel has no path_fd. */
#define PIN_F_PATH_FD (1U << 14)
static int path_fd_off; /* this kernel refused BPF_F_PATH_FD */

/* cmd (BPF_OBJ_GET, or BPF_OBJ_PIN of fd) on `name` in the directory
 * dfd; by `full` where the kernel has no path_fd. */
static int pin_obj(int cmd, int dfd, const char *full, const char *name, int fd)
{
	if (dfd >= 0 && !__atomic_load_n(&path_fd_off, __ATOMIC_RELAXED)) {
		struct {
			uint64_t pathname;
			uint32_t bpf_fd, file_flags;
			int32_t path_fd;
		} a;
		/* every byte zero (the padding too: the kernel refuses a
		 * non-zero byte past the last field it knows), and the
		 * size ends at path_fd */
		memset(&a, 0, sizeof(a));
		a.pathname = (uintptr_t)name;
		a.bpf_fd = cmd == BPF_OBJ_PIN ? (uint32_t)fd : 0;
		a.file_flags = PIN_F_PATH_FD;
		a.path_fd = dfd;
		int r = (int)syscall(SYS_bpf, cmd, &a,
				     offsetof(__typeof__(a), path_fd) +
					 sizeof(a.path_fd));
		if (r >= 0 || errno != EINVAL)
			return r;
		/* EINVAL: a kernel before path_fd (its attr check refuses
		 * the field), if the whole path works */
		r = cmd == BPF_OBJ_PIN ? bpf_obj_pin(fd, full)
				       : bpf_obj_get(full);
		if (r >= 0)
			__atomic_store_n(&path_fd_off, 1, __ATOMIC_RELAXED);
		return r;
	}
	return cmd == BPF_OBJ_PIN ? bpf_obj_pin(fd, full) : bpf_obj_get(full);
}

int wd_pin_get(int dfd, const char *full, const char *name)
{
	return pin_obj(BPF_OBJ_GET, dfd, full, name, -1);
}

int wd_pin_put(int dfd, const char *full, const char *name, int fd)
{
	return pin_obj(BPF_OBJ_PIN, dfd, full, name, fd);
}

static bool on_bpffs(const char *p)
{
	struct statfs sf;
	return statfs(p, &sf) == 0 && sf.f_type == BPF_FS_MAGIC;
}

/* The pin dir exists, on bpffs (mounted on its parent if need be), and is
 * ours. */
int wd_pin_dir_ensure(const char *who, const char *dir, struct wd_err *err)
{
	char parent[4096];
	if (wd_strlcpy(parent, dir, sizeof(parent)) < 0)
		return -ENAMETOOLONG;
	char *sl = strrchr(parent, '/');
	if (!sl || sl == parent)
		return wd_err_set(err, -EINVAL,
				  "%s: pin dir '%s': want /PARENT/NAME", who,
				  dir);
	*sl = 0;
	if (!on_bpffs(parent) &&
	    mount("bpf", parent, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0700") < 0) {
		int rc = -errno;
		return wd_err_set(err, rc,
				  "%s: '%s' is not a BPF filesystem and "
				  "mounting one there failed: %s (cannot pin "
				  "the %s programs)",
				  who, parent, strerror(-rc), who);
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int rc = -errno;
		return wd_err_set(err, rc, "%s: pin dir '%s': %s", who, dir,
				  strerror(-rc));
	}
	if (!on_bpffs(dir))
		return wd_err_set(err, -EXDEV,
				  "%s: pin dir '%s' is not on a BPF "
				  "filesystem",
				  who, dir);
	struct stat st;
	if (lstat(dir, &st) < 0)
		return -errno;
	return wd_pin_owner_ok(who, dir, &st, err);
}

static void close_pins(struct wd_egress *e)
{
	for (int i = 0; i < PIN_NPROG; i++) {
		int *s = prog_slot(e, i);
		if (*s >= 0)
			close(*s);
		*s = -1;
	}
	for (int m = 0; m < PM_N; m++) {
		int *s = map_slot(e, m);
		if (*s >= 0)
			close(*s);
		*s = -1;
	}
}

/* Open every pin of hd into e, checked against wd_version and wd_version
 * against our object. 0; -EPERM (not ours, message in err); -ENOENT (no
 * such dir); -ESTALE (anything else: why in err). */
static int open_pins_at(struct wd_egress *e, int dfd, const char *hd,
			const uint8_t sha[32], struct wd_err *err);

/* The pins of directory hd, checked (open_pins_at); e->pin_dfd holds the
 * directory on success. */
static int open_pins(struct wd_egress *e, const char *hd, const uint8_t sha[32],
		     struct wd_err *err)
{
	/* the directory judged is the one the pins are taken from */
	int dfd = open(hd, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		int rc = -errno;
		/* a symlink or a file in its place: judged (not ours) */
		if (rc != -ENOENT && check_owner(hd, err) < 0)
			return -EPERM;
		return rc;
	}
	struct stat st;
	int rc = fstat(dfd, &st) < 0 ? -errno
				     : wd_pin_owner_ok("egress", hd, &st, err);
	if (rc == 0)
		rc = open_pins_at(e, dfd, hd, sha, err);
	if (rc < 0) {
		close(dfd);
		return rc;
	}
	if (e->pin_dfd >= 0)
		close(e->pin_dfd);
	e->pin_dfd = dfd;
	return 0;
}

static int open_pins_at(struct wd_egress *e, int dfd, const char *hd,
			const uint8_t sha[32], struct wd_err *err)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", hd, WD_PIN_VERSION);
	struct pin_version v;
	int vfd = wd_pin_get(dfd, p, WD_PIN_VERSION);
	struct bpf_map_info mi = {0};
	uint32_t ml = sizeof(mi);
	uint32_t zero = 0;
	if (vfd < 0 || bpf_obj_get_info_by_fd(vfd, &mi, &ml) < 0 ||
	    mi.type != BPF_MAP_TYPE_ARRAY || mi.key_size != 4 ||
	    mi.value_size != sizeof(v) ||
	    bpf_map_lookup_elem(vfd, &zero, &v) < 0) {
		if (vfd >= 0)
			close(vfd);
		return wd_err_set(err, -ESTALE,
				  "egress: pinned '%s' is missing or not a "
				  "version record of this build",
				  p);
	}
	close(vfd);
	if (memcmp(v.sha, sha, 32) || v.n_prog != PIN_NPROG)
		return wd_err_set(err, -ESTALE,
				  "egress: pins in '%s' are another build's "
				  "(object hash differs)",
				  hd);
	/* made without the unix programs on a kernel that has their hook
	 * (a failed load then, now never a reason to go without): stale */
	if (!v.unix_ok && !wd_egress_unix_hook_missing())
		return wd_err_set(err, -ESTALE,
				  "egress: pins in '%s' lack the unix socket "
				  "programs this kernel can run",
				  hd);
	e->unix_ok = v.unix_ok;
	for (int i = 0; i < PIN_NPROG; i++) {
		if (!v.unix_ok && unix_prog(i))
			continue;
		/* DNS redirection only (wd_egress_pins_no_names) */
		if (i >= WD_EG_FIRST_DNS && i < WD_EG_NPROG &&
		    __atomic_load_n(&no_names, __ATOMIC_RELAXED))
			continue;
		if (i >= WD_EG_NPROG) {
			/* keep-warm: opened only to make its link (below),
			 * and checked then; a call attaches none of them */
			e->keep_id[i - WD_EG_NPROG] = v.id[i];
			memcpy(e->keep_tag[i - WD_EG_NPROG], v.tag[i], 8);
			continue;
		}
		snprintf(p, sizeof(p), "%s/%s", hd, prog_name(i));
		int fd = wd_pin_get(dfd, p, prog_name(i));
		struct bpf_prog_info pi = {0};
		uint32_t pl = sizeof(pi);
		*prog_slot(e, i) = fd;
		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &pi, &pl) < 0 ||
		    pi.type != BPF_PROG_TYPE_CGROUP_SOCK_ADDR ||
		    memcmp(pi.tag, v.tag[i], 8) || pi.id != v.id[i]) {
			close_pins(e);
			return wd_err_set(err, -ESTALE,
					  "egress: pinned program '%s' is "
					  "missing, of the wrong type or not "
					  "the one this build pinned",
					  p);
		}
	}
	for (int m = 0; m < PM_N; m++) {
		snprintf(p, sizeof(p), "%s/%s", hd, map_names[m]);
		int fd = wd_pin_get(dfd, p, map_names[m]);
		struct bpf_map_info i2 = {0};
		uint32_t l2 = sizeof(i2);
		*map_slot(e, m) = fd;
		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &i2, &l2) < 0 ||
		    i2.type != v.map[m].type || i2.key_size != v.map[m].key ||
		    i2.value_size != v.map[m].value ||
		    i2.max_entries != v.map[m].max || i2.id != v.map[m].id) {
			close_pins(e);
			return wd_err_set(err, -ESTALE,
					  "egress: pinned map '%s' is missing, "
					  "of another shape or not the one "
					  "this build pinned",
					  p);
		}
	}
	return 0;
}

/* Remove a directory of pins (unlinking a pin drops the name only: a
 * program still attached to a cgroup stays attached). */
void wd_pin_remove(int dfd, const char *name)
{
	int fd =
	    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(fd, de->d_name, 0);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		unlinkat(dfd, name, 0);
}

int wd_pin_commit(const char *who, const char *dir, int dfd, const char *tmp,
		  const char *name, const void *ver, size_t vsz, int rc,
		  struct wd_err *err)
{
	char p[4200];
	if (!rc) {
		uint32_t zero = 0;
		int vfd = bpf_map_create(BPF_MAP_TYPE_ARRAY, WD_PIN_VERSION, 4,
					 (uint32_t)vsz, 1, NULL);
		snprintf(p, sizeof(p), "%s/%s/%s", dir, tmp, WD_PIN_VERSION);
		/* frozen: not even root's syscalls can change it now */
		if (vfd < 0 || bpf_map_update_elem(vfd, &zero, ver, 0) < 0 ||
		    bpf_map_freeze(vfd) < 0 || bpf_obj_pin(vfd, p) < 0)
			rc = -errno;
		if (vfd >= 0)
			close(vfd);
	}
	if (rc) {
		wd_err_set(err, rc, "%s: pinning in '%s/%s': %s", who, dir, tmp,
			   strerror(-rc));
		wd_pin_remove(dfd, tmp);
		return rc;
	}
	if (renameat(dfd, tmp, dfd, name) < 0) {
		rc = -errno;
		wd_err_set(err, rc, "%s: pin dir '%s/%s': rename: %s", who, dir,
			   name, strerror(-rc));
		wd_pin_remove(dfd, tmp);
	}
	return rc;
}

/* Load the object and pin it as <dir>/<name>, whole or not at all. */
static int create_pins(const char *dir, int dfd, const char *name,
		       const uint8_t sha[32], struct wd_err *err)
{
	struct wd_egress *e = wd_egress_new();
	char tmp[64], p[4200], rnd[17];
	int rc = wd_egress_load_skel(e, WD_RING_PINNED, true, true, err);
	e->unix_ok = !rc;
	/* without the unix programs only where the kernel lacks them: the
	 * pins are used for the whole boot */
	if (rc && wd_egress_unix_hook_missing())
		rc = wd_egress_load_skel(e, WD_RING_PINNED, false, true, err);
	if (rc)
		goto out;
	wd_egress_fds_from_skel(e);
	/* slot -> cgroup id of the call holding it: user space only */
	e->owner_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "wd_ring_owner", 4, 8,
				     WD_CALL_RING_SLOTS, NULL);
	if (e->owner_fd < 0) {
		rc = -errno;
		wd_err_set(err, rc, "egress: map 'wd_ring_owner': %s",
			   strerror(-rc));
		goto out;
	}
	struct pin_version v = {.unix_ok = e->unix_ok, .n_prog = PIN_NPROG};
	memcpy(v.sha, sha, 32);
	wd_rand_hex(rnd, 16);
	snprintf(tmp, sizeof(tmp), "new_%s", rnd);
	if (mkdirat(dfd, tmp, 0700) < 0) {
		rc = -errno;
		wd_err_set(err, rc, "egress: pin dir '%s/%s': %s", dir, tmp,
			   strerror(-rc));
		goto out;
	}
	for (int i = 0; i < PIN_NPROG && !rc; i++) {
		int fd = *prog_slot(e, i);
		if (fd < 0)
			continue;
		struct bpf_prog_info pi = {0};
		uint32_t pl = sizeof(pi);
		snprintf(p, sizeof(p), "%s/%s/%s", dir, tmp, prog_name(i));
		if (bpf_obj_get_info_by_fd(fd, &pi, &pl) < 0 ||
		    bpf_obj_pin(fd, p) < 0)
			rc = -errno;
		memcpy(v.tag[i], pi.tag, 8);
		v.id[i] = pi.id;
	}
	for (int m = 0; m < PM_N && !rc; m++) {
		int fd = *map_slot(e, m);
		struct bpf_map_info mi = {0};
		uint32_t ml = sizeof(mi);
		snprintf(p, sizeof(p), "%s/%s/%s", dir, tmp, map_names[m]);
		if (bpf_obj_get_info_by_fd(fd, &mi, &ml) < 0 ||
		    bpf_obj_pin(fd, p) < 0)
			rc = -errno;
		v.map[m].type = mi.type;
		v.map[m].key = mi.key_size;
		v.map[m].value = mi.value_size;
		v.map[m].max = mi.max_entries;
		v.map[m].id = mi.id;
	}
	rc = wd_pin_commit("egress", dir, dfd, tmp, name, &v, sizeof(v), rc,
			   err);
out:
	wd_egress_close(e);
	return rc;
}

/* Under the lock: ours made anew; every other entry of the pin dir (other
 * builds' pins, an invalid copy of ours, a crashed creator's temp dir) goes
 * first. */
static int replace_pins(const char *dir, int dfd, const char *name,
			const uint8_t sha[32], struct wd_err *err)
{
	DIR *d = fdopendir(dup(dfd));
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		wd_debug("egress: removing stale pins '%s/%s'", dir,
			 de->d_name);
		wd_pin_remove(dfd, de->d_name);
	}
	if (d)
		closedir(d);
	return create_pins(dir, dfd, name, sha, err);
}

bool wd_cgroup_alive(int mfd, uint64_t cgid)
{
	struct {
		struct file_handle h;
		uint64_t id;
	} fh = {.h = {.handle_bytes = 8, .handle_type = 0xfe /* kernfs */}};
	memcpy(fh.h.f_handle, &cgid, 8);
	int fd = open_by_handle_at(mfd, &fh.h, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	/* only a cgroup known gone counts as dead */
	return errno != ESTALE && errno != ENOENT;
}

void wd_egress_pin_purge(struct wd_egress *e, uint64_t cgid)
{
	bpf_map_delete_elem(e->policy_fd, &cgid);
	bpf_map_delete_elem(e->slot_fd, &cgid);
	/* a slot held for it */
	uint32_t s, next, *sprev = NULL;
	uint64_t owner;
	while (bpf_map_get_next_key(e->owner_fd, sprev, &next) == 0) {
		if (bpf_map_lookup_elem(e->owner_fd, &next, &owner) == 0 &&
		    owner == cgid &&
		    bpf_map_delete_elem(e->owner_fd, &next) == 0) {
			sprev = NULL;
			continue;
		}
		s = next;
		sprev = &s;
	}
	struct {
		int fd;
		size_t ksz;
		size_t lo_off;
	} m[2] = {{e->rules_fd, sizeof(struct wd_egress_key),
		   offsetof(struct wd_egress_key, cgid_lo)},
		  {e->unix_fd, sizeof(struct wd_unix_key),
		   offsetof(struct wd_unix_key, cgid_lo)}};
	for (int j = 0; j < 2; j++) {
		union {
			struct wd_egress_key a;
			struct wd_unix_key b;
		} k, nk;
		uint32_t lo = (uint32_t)cgid, hi = cgid >> 32;
		void *prev = NULL;
		/* delete behind the iterator: the next key is fetched from
		 * the one before it, which stays */
		while (bpf_map_get_next_key(m[j].fd, prev, &nk) == 0) {
			uint32_t klo, khi;
			memcpy(&klo, (char *)&nk + m[j].lo_off, 4);
			memcpy(&khi, (char *)&nk + m[j].lo_off + 4, 4);
			if (klo == lo && khi == hi &&
			    bpf_map_delete_elem(m[j].fd, &nk) == 0) {
				prev = NULL; /* the trie changed: restart */
				continue;
			}
			memcpy(&k, &nk, m[j].ksz);
			prev = &k;
		}
	}
}

/* Entries of calls whose cgroup is gone (a caller killed before its
 * detach): removed. */
static void sweep_dead(struct wd_egress *e)
{
	const struct wd_features *f = wd_probe();
	if (!f->cg.v2_root[0])
		return;
	cleanup_close int mfd =
	    open(f->cg.v2_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return; /* keyed by cgroup id: wd_policy, wd_ring_slot; valued
			 * by it: wd_ring_owner */
	int maps[3] = {e->policy_fd, e->slot_fd, e->owner_fd};
	for (int j = 0; j < 3; j++) {
		uint64_t key, next = 0, dead[64];
		int n = 0;
		void *prev = NULL;
		while (n < 64 &&
		       bpf_map_get_next_key(maps[j], prev, &next) == 0) {
			uint64_t cg = next;
			if (j == 2) {
				uint32_t sl = (uint32_t)next;
				if (bpf_map_lookup_elem(maps[j], &sl, &cg))
					cg = 0;
			}
			if (cg && !wd_cgroup_alive(mfd, cg))
				dead[n++] = cg;
			key = next;
			prev = &key;
		}
		for (int i = 0; i < n; i++) {
			wd_debug("egress: entries of gone cgroup %llu removed",
				 (unsigned long long)dead[i]);
			wd_egress_pin_purge(e, dead[i]);
		}
	}
}

int wd_pin_open_or_make(const char *who, const char *dir, const char *hd,
			int (*open_fn)(void *ctx, const char *hd,
				       struct wd_err *err),
			int (*make_fn)(void *ctx, int dfd, struct wd_err *err),
			void *ctx, struct wd_err *err)
{
	struct wd_err why = {0};
	int rc = open_fn(ctx, hd, &why);
	if (rc < 0 && rc != -EPERM) {
		/* missing or stale: make ours, one creator at a time (the
		 * lock goes with dfd) */
		cleanup_close int dfd =
		    open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0 || flock(dfd, LOCK_EX) < 0) {
			rc = -errno;
			return wd_err_set(err, rc, "%s: pin dir '%s': lock: %s",
					  who, dir, strerror(-rc));
		}
		why = (struct wd_err){0};
		rc = open_fn(ctx, hd, &why); /* another creator's? */
		if (rc < 0 && rc != -EPERM) {
			if (why.msg[0])
				wd_debug("%s: replacing", why.msg);
			if ((rc = make_fn(ctx, dfd, err)) == 0)
				rc = open_fn(ctx, hd, err);
			return rc;
		}
	}
	if (rc == -EPERM && err)
		*err = why;
	return rc;
}

struct eg_pin_ctx {
	struct wd_egress *e;
	const char *dir, *name;
};

static int eg_open(void *ctx, const char *hd, struct wd_err *err)
{
	struct eg_pin_ctx *c = ctx;
	return open_pins(c->e, hd, object_sha, err);
}

static int eg_make(void *ctx, int dfd, struct wd_err *err)
{
	struct eg_pin_ctx *c = ctx;
	return replace_pins(c->dir, dfd, c->name, object_sha, err);
}

int wd_egress_open_pinned(struct wd_egress **out, struct wd_err *err)
{
	const char *dir = wd_pin_dir();
	char name[17], hd[4200];
	int rc;
	*out = NULL;
	wd_log_route_libbpf();
	for (int i = 0; i < 8; i++)
		snprintf(name + 2 * i, 3, "%02x", object_sha[i]);
	snprintf(hd, sizeof(hd), "%s/%s", dir, name);
	if ((rc = wd_pin_dir_ensure("egress", dir, err)) < 0)
		return rc;

	struct wd_egress *e = wd_egress_new();
	e->pinned = true;
	struct eg_pin_ctx c = {e, dir, name};
	rc = wd_pin_open_or_make("egress", dir, hd, eg_open, eg_make, &c, err);
	if (rc < 0) {
		wd_egress_close(e);
		return rc;
	}
	sweep_dead(e);
	e->pin_hd = wd_strdup(hd);
	*out = e;
	return 0;
}

int wd_egress_pin_claim(struct wd_egress *e, uint64_t cgid, struct wd_err *err)
{
	int rc;
	uint32_t slot = 0, id;
	/* a slot is held by exactly one call: the NOEXIST insert is the
	 * claim (atomic in the kernel), whoever else tries at once */
	for (; slot < WD_CALL_RING_SLOTS; slot++)
		if (bpf_map_update_elem(e->owner_fd, &slot, &cgid,
					BPF_NOEXIST) == 0)
			break;
	if (slot == WD_CALL_RING_SLOTS)
		return wd_err_set(err, -EBUSY,
				  "egress: all %u per-call event rings are in "
				  "use (one-shot calls running at once)",
				  WD_CALL_RING_SLOTS);
	int fd = -1;
	if (bpf_map_lookup_elem(e->rings_fd, &slot, &id) == 0) {
		fd = bpf_map_get_fd_by_id(id);
	} else {
		/* the slot's first use this boot: its ring, kept in the
		 * slot for every later holder (the update waits for an RCU
		 * grace period, once) */
		fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "wd_call_ring", 0, 0,
				    WD_CALL_RING_BYTES, NULL);
		if (fd >= 0 &&
		    bpf_map_update_elem(e->rings_fd, &slot, &fd, BPF_ANY) < 0) {
			int s = errno;
			close(fd);
			errno = s;
			fd = -1;
		}
	}
	if (fd < 0) {
		rc = -errno;
		bpf_map_delete_elem(e->owner_fd, &slot);
		return wd_err_set(err, rc, "egress: per-call ring %u: %s", slot,
				  strerror(-rc));
	}
	pthread_mutex_lock(&e->consume_lock);
	e->own_slot = (int)slot;
	e->own_ring_fd = fd;
	e->own_cgid = cgid;
	rc = wd_egress_open_ring(e, fd, err);
	if (rc == 0) {
		/* an earlier holder's unread records (it died): not ours */
		e->discard = true;
		wd_ringbuf_consume(e->rb);
		e->discard = false;
	}
	pthread_mutex_unlock(&e->consume_lock);
	if (rc == 0 && bpf_map_update_elem(e->slot_fd, &cgid, &slot, BPF_ANY)) {
		rc = -errno;
		wd_err_set(err, rc, "map 'wd_ring_slot': cgroup %llu: %s",
			   (unsigned long long)cgid, strerror(-rc));
	}
	if (rc < 0)
		wd_egress_pin_release(e, cgid);
	return rc;
}

void wd_egress_pin_release(struct wd_egress *e, uint64_t cgid)
{
	bpf_map_delete_elem(e->slot_fd, &cgid);
	pthread_mutex_lock(&e->consume_lock);
	if (e->own_slot >= 0 && e->own_cgid == cgid) {
		/* nothing of ours reads the ring once the slot is free */
		wd_ringbuf_free(e->rb);
		e->rb = NULL;
		if (e->poll_ep >= 0)
			close(e->poll_ep);
		e->poll_ep = -1;
		if (e->own_ring_fd >= 0)
			close(e->own_ring_fd);
		e->own_ring_fd = -1;
		uint32_t slot = (uint32_t)e->own_slot;
		bpf_map_delete_elem(e->owner_fd, &slot);
		e->own_slot = -1;
		e->own_cgid = 0;
	}
	pthread_mutex_unlock(&e->consume_lock);
}
