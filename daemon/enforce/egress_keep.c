/* The egress programs' keep-warm links (egress_int.h wd_egress_pin_keep),
 * pinned beside the programs (egress_pin.c). */
#include "enforce/egress_int.h"
#include "enforce/bpf_pin.h"
#include "common/log.h"
#include "common/util.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- keep-warm links --------------------------------------------------
 * Attaching the first cgroup program of a type anywhere turns a kernel
 * static key on, and detaching the last turns it off: a text patch with
 * IPIs to every CPU each time (bpf/egress.bpf.c, wd_keep_connect4). A
 * one-shot call's own links would go with its process, and a lone call
 * would pay both flips for every type it attaches. So the allow-all keep
 * programs are attached, through bpf links pinned beside the programs
 * (<hash dir>/link_<program>), to a cgroup that holds no process and is
 * above no call: warden/keep-warm, a sibling of the call leaves
 * (sandbox/cgroup.h wd_cgroup_keep_dir). The static keys are per attach
 * type, node-wide: any attachment keeps them on. On the leaves' parent
 * (before) every connect, sendmsg and bind of every call also ran the
 * allow-all program (+25 ns a denied connect(), 12 paired runs). The
 * links stay for the boot and go when the pins go (another build's pins
 * removed, replace_pins: unpinning the last reference to a link detaches
 * it).
 *
 * Were a program ever run for a process there, it would change no
 * verdict: sock_addr programs of a cgroup and of its ancestors all run
 * (BPF_F_ALLOW_MULTI) and the kernel ANDs them: bpf_prog_run_array_cg()
 * sets -EPERM once any program returns 0, and a later 1 never clears it
 * (tests/integration/exec_pins.sh: keep-links-deny-still).
 *
 * A link pin is used only if it is a cgroup link of this very program
 * (by id: the program itself was checked against wd_version), of that
 * attach type, on the directory as it is now (its cgroup id: a keep-warm/
 * removed and made again has another, and the old link is defunct);
 * anything else is replaced under the pin dir's lock. */
static bool keep_link_ok(int dfd, const char *p, const char *name,
			 uint32_t prog_id, uint64_t cgid,
			 enum bpf_attach_type at)
{
	int fd = wd_pin_get(dfd, p, name);
	if (fd < 0)
		return false;
	struct bpf_link_info li = {0};
	uint32_t n = sizeof(li);
	bool ok = bpf_obj_get_info_by_fd(fd, &li, &n) == 0 &&
		  li.type == BPF_LINK_TYPE_CGROUP && li.prog_id == prog_id &&
		  li.cgroup.cgroup_id == cgid && li.cgroup.attach_type == at;
	close(fd);
	return ok;
}

/* Keep program i from its pin, if it is still the one wd_version
 * recorded (id and tag): only to make a link of it. */
static bool open_keep(struct wd_egress *e, int i)
{
	if (e->keep_fd[i] >= 0)
		return true;
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", e->pin_hd, wd_eg_keep_names[i]);
	int fd = wd_pin_get(e->pin_dfd, p, wd_eg_keep_names[i]);
	struct bpf_prog_info pi = {0};
	uint32_t pl = sizeof(pi);
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &pi, &pl) < 0 ||
	    pi.type != BPF_PROG_TYPE_CGROUP_SOCK_ADDR ||
	    pi.id != e->keep_id[i] || memcmp(pi.tag, e->keep_tag[i], 8)) {
		if (fd >= 0)
			close(fd);
		wd_debug("egress: pinned keep program '%s' is not the one "
			 "this build pinned",
			 p);
		return false;
	}
	e->keep_fd[i] = fd;
	return true;
}

/* Whether program id is attached to the cgroup of cfd for attach type at
 * (its own attachments, not inherited ones). */
static bool keep_attached(int cfd, uint32_t id, enum bpf_attach_type at)
{
	uint32_t ids[16], n = WD_ARRAY_SIZE(ids), fl = 0;
	if (bpf_prog_query(cfd, at, 0, &fl, ids, &n) < 0)
		return false;
	for (uint32_t i = 0; i < n; i++) /* n <= the array's on success */
		if (ids[i] == id)
			return true;
	return false;
}

bool wd_egress_pin_keep(struct wd_egress *e, const char *dir)
{
	if (!e->pin_hd)
		return false;
	cleanup_close int cfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (cfd < 0 || fstat(cfd, &st) < 0)
		return false;
	uint64_t cgid = st.st_ino; /* the kernel's cgroup id on cgroup2 */
	char p[4200], name[64];
	/* the ids wd_version recorded (open_pins): a link to a program of
	 * that id is a link to the program this build pinned, whatever has
	 * become of the program's own pin since (ids are not reused while
	 * the kernel runs, and the pins go with it) */
	const uint32_t *id = e->keep_id;
	/* Every keep program attached to the directory as it is now: the
	 * static keys are on, which is all the links are for. One query a
	 * type instead of opening and asking each link pin (a one-shot
	 * call's 8 pins: ~50 us); the pins are judged, and replaced, only
	 * when an attachment is missing. */
	bool warm = true;
	for (int i = 0; i < WD_EG_NKEEP && warm; i++)
		warm = !id[i] || keep_attached(cfd, id[i], wd_eg_keep_at[i]);
	if (warm)
		return true;
	unsigned bad = 0;
	for (int i = 0; i < WD_EG_NKEEP; i++) {
		if (!id[i])
			continue; /* a unix type this kernel lacks */
		snprintf(name, sizeof(name), "link_%s", wd_eg_keep_names[i]);
		snprintf(p, sizeof(p), "%s/%s", e->pin_hd, name);
		if (!keep_link_ok(e->pin_dfd, p, name, id[i], cgid,
				  wd_eg_keep_at[i]))
			bad |= 1u << i;
	}
	if (!bad)
		return true;
	cleanup_close int dfd =
	    open(wd_pin_dir(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || flock(dfd, LOCK_EX) < 0)
		return false;
	bool ok = true;
	for (int i = 0; i < WD_EG_NKEEP; i++) {
		if (!(bad & (1u << i)))
			continue;
		snprintf(name, sizeof(name), "link_%s", wd_eg_keep_names[i]);
		snprintf(p, sizeof(p), "%s/%s", e->pin_hd, name);
		/* another caller's, made while we waited for the lock */
		if (keep_link_ok(e->pin_dfd, p, name, id[i], cgid,
				 wd_eg_keep_at[i]))
			continue;
		if (!open_keep(e, i)) {
			ok = false;
			continue;
		}
		/* in the directory judged, not by a path walked again */
		if (e->pin_dfd >= 0)
			unlinkat(e->pin_dfd, name, 0);
		else
			unlink(p);
		int lfd =
		    bpf_link_create(e->keep_fd[i], cfd, wd_eg_keep_at[i], NULL);
		if (lfd < 0 || wd_pin_put(e->pin_dfd, p, name, lfd) < 0) {
			wd_log_errno(WD_LOG_DEBUG, -errno,
				     "egress: keep link '%s' on '%s'", p, dir);
			ok = false;
		}
		if (lfd >= 0)
			close(lfd);
	}
	flock(dfd, LOCK_UN);
	return ok;
}
