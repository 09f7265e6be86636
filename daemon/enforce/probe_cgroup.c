/* cgroup layout: which hierarchies (v2, v1 controllers) are mounted where,
 * from /proc/self/mountinfo. */
#include "enforce/probe.h"
#include "enforce/probe_int.h"
#include "common/util.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- cgroups ----------------------------------------------------------- */

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' &&
		    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 +
				      (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
}

static bool opt_has(const char *opts, const char *word)
{
	return wd_probe_list_has(opts, word);
}

int wd_cgroup_layout_parse(const char *mountinfo, const char *controllers,
			   struct wd_cgroup_layout *out)
{
	memset(out, 0, sizeof(*out));
	bool v2 = false;
	const char *line = mountinfo;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char l[4096];
		if (len < sizeof(l)) {
			memcpy(l, line, len);
			l[len] = 0;
			/* id parent maj:min root mountpoint opts [tags] - fs
			 * source superopts */
			char *sep = strstr(l, " - ");
			char *f[5] = {0};
			char *save = NULL;
			int nf = 0;
			if (sep) {
				*sep = 0;
				for (char *t = strtok_r(l, " ", &save);
				     t && nf < 5;
				     t = strtok_r(NULL, " ", &save))
					f[nf++] = t;
				save = NULL;
				char *fs = strtok_r(sep + 3, " ", &save);
				char *src = strtok_r(NULL, " ", &save);
				char *sopts = strtok_r(NULL, " ", &save);
				(void)src;
				if (nf == 5 && fs && !strcmp(fs, "cgroup2") &&
				    !v2) {
					unescape(f[4]);
					wd_strlcpy(out->v2_root, f[4],
						   sizeof(out->v2_root));
					v2 = true;
				} else if (nf == 5 && fs &&
					   !strcmp(fs, "cgroup") && sopts) {
					bool any = false;
					unescape(f[4]);
					for (int c = 0; c < WD_CG_NCTRL; c++) {
						if (!opt_has(
							sopts,
							wd_cg_ctrl_name(c)))
							continue;
						any = true;
						if (!out->v1_root[c][0])
							wd_strlcpy(
							    out->v1_root[c],
							    f[4],
							    sizeof(out->v1_root
								       [c]));
					}
					/* any real controller, not only a
					 * named hierarchy (name=systemd) */
					char tmp[512];
					wd_strlcpy(tmp, sopts, sizeof(tmp));
					char *s2 = NULL;
					for (char *t = strtok_r(tmp, ",", &s2);
					     t; t = strtok_r(NULL, ",", &s2))
						if (strcmp(t, "rw") &&
						    strcmp(t, "ro") &&
						    strncmp(t, "name=", 5) &&
						    strcmp(t, "none") &&
						    strcmp(t, "noprefix") &&
						    strncmp(t, "release_agent",
							    13) &&
						    strcmp(t,
							   "clone_children") &&
						    strcmp(t, "xattr") &&
						    strcmp(t, "cpuset_v2_mode"))
							any = true;
					if (any)
						out->n_v1++;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (v2) {
		cleanup_free char *own = NULL;
		if (!controllers) {
			char p[300];
			snprintf(p, sizeof(p), "%s/cgroup.controllers",
				 out->v2_root);
			if (wd_read_file(p, &own, NULL) == 0)
				controllers = own;
		}
		if (controllers) {
			char tmp[256];
			wd_strlcpy(out->v2_controllers, controllers,
				   sizeof(out->v2_controllers));
			wd_probe_strip_nl(out->v2_controllers);
			wd_strlcpy(tmp, out->v2_controllers, sizeof(tmp));
			char *s2 = NULL;
			for (char *t = strtok_r(tmp, " ", &s2); t;
			     t = strtok_r(NULL, " ", &s2))
				for (int c = 0; c < WD_CG_NCTRL; c++)
					if (!strcmp(t, wd_cg_ctrl_name(c)))
						out->v2_ctrl[c] = true;
		}
	}
	out->hybrid = v2 && out->n_v1 > 0;
	if (!v2 && !out->n_v1)
		return -ENOENT;
	return 0;
}

int wd_cgroup_layout_detect(struct wd_cgroup_layout *out)
{
	cleanup_free char *mi = NULL;
	int r = wd_read_file("/proc/self/mountinfo", &mi, NULL);
	if (r < 0) {
		memset(out, 0, sizeof(*out));
		return r;
	}
	return wd_cgroup_layout_parse(mi, NULL, out);
}

/* ---- the layout one-shot calls share (wd_cgroup_layout_cached) -------- */

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U /* <linux/stat.h>, 6.8 */
#endif
#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

/* The never-reused id of the mount whose root path is, or -errno
 * (-ENOTSUP: no such id on this kernel, or path not a mount's root). */
static int mount_id(const char *path, uint64_t *id)
{
	struct statx sx;
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
		  STATX_MNT_ID_UNIQUE, &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & STATX_MNT_ID_UNIQUE) ||
	    !(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
	    !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) || !sx.stx_mnt_id)
		return -ENOTSUP;
	*id = sx.stx_mnt_id;
	return 0;
}

static const char *cgl_path(const struct wd_cgroup_layout *l, int i)
{
	return i == 0 ? l->v2_root : l->v1_root[i - 1];
}

/* Every mount of l's ids into mnt; -errno when one has none. */
static int cgl_ids(const struct wd_cgroup_layout *l, uint64_t *mnt)
{
	for (int i = 0; i < 1 + WD_CG_NCTRL; i++) {
		mnt[i] = 0;
		int r =
		    cgl_path(l, i)[0] ? mount_id(cgl_path(l, i), &mnt[i]) : 0;
		if (r < 0)
			return r;
	}
	return 0;
}

static bool controllers_same(const struct wd_cgroup_layout *l)
{
	if (!l->v2_root[0])
		return true;
	char p[300], now[sizeof(l->v2_controllers)];
	snprintf(p, sizeof(p), "%s/cgroup.controllers", l->v2_root);
	if (wd_read_small(p, now, sizeof(now)) < 0)
		return false;
	wd_probe_strip_nl(now);
	return !strcmp(now, l->v2_controllers);
}

int wd_cgroup_layout_cached(const struct wd_probe_key *k,
			    struct wd_cgroup_layout *out)
{
	char path[4096];
	if (wd_probe_runtime_path(path, sizeof(path), "probe-cgroup") < 0)
		return wd_cgroup_layout_detect(out);
	cleanup_free struct wd_cgl_file *c = NULL;
	size_t n;
	if (wd_root_file_read(path, (void **)&c, &n, sizeof(*c)) == 0 &&
	    n == sizeof(*c) && !memcmp(c->magic, WD_CGL_MAGIC, 8) &&
	    c->layout_size == sizeof(c->lay) &&
	    wd_crc32(c, offsetof(struct wd_cgl_file, sum)) == c->sum &&
	    !strncmp(c->boot_id, k->boot_id, sizeof(c->boot_id)) &&
	    !strncmp(c->build, k->build, sizeof(c->build))) {
		uint64_t mnt[1 + WD_CG_NCTRL];
		/* strings from the file bounded before any use */
		c->lay.v2_root[sizeof(c->lay.v2_root) - 1] = 0;
		c->lay.v2_controllers[sizeof(c->lay.v2_controllers) - 1] = 0;
		for (int i = 0; i < WD_CG_NCTRL; i++)
			c->lay.v1_root[i][sizeof(c->lay.v1_root[i]) - 1] = 0;
		if (cgl_ids(&c->lay, mnt) == 0 &&
		    !memcmp(mnt, c->mnt, sizeof(mnt)) &&
		    controllers_same(&c->lay)) {
			*out = c->lay;
			return 0;
		}
	}
	int r = wd_cgroup_layout_detect(out);
	if (r < 0)
		return r;
	struct wd_cgl_file w;
	struct wd_cgroup_layout again;
	memset(&w, 0, sizeof(w));
	memcpy(w.magic, WD_CGL_MAGIC, 8);
	wd_strlcpy(w.boot_id, k->boot_id, sizeof(w.boot_id));
	wd_strlcpy(w.build, k->build, sizeof(w.build));
	w.layout_size = sizeof(w.lay);
	w.lay = *out;
	/* a kernel without unique mount ids keeps no file: mount ids are
	 * reused, and a reused one would pass for the old mount. The ids
	 * are those of the mounts the layout names only if mountinfo still
	 * reads the same after they were taken (a mount swapped in between
	 * would be kept for the boot) */
	if (cgl_ids(&w.lay, w.mnt) == 0 &&
	    wd_cgroup_layout_detect(&again) == 0 &&
	    !memcmp(&again, out, sizeof(again))) {
		w.sum = wd_crc32(&w, offsetof(struct wd_cgl_file, sum));
		(void)wd_root_file_write(path, &w, sizeof(w));
	}
	return 0;
}
