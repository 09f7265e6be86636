/* cgroup layout: which hierarchies (v2, v1 controllers) are mounted where,
 * from /proc/self/mountinfo. */
#include "enforce/probe.h"
#include "enforce/probe_int.h"
#include "common/util.h"

#include <stdio.h>
#include <string.h>

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
