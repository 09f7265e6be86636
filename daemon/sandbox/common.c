#include "sandbox/common.h"

#include <dirent.h>
#include <string.h>

char *wd_sb_resolve_exec(const char *a)
{
	if (a[0] == '/')
		return wd_strdup(a);
	static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin",
					   "/usr/sbin", "/sbin"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(dirs); i++) {
		char *p = wd_asprintf("%s/%s", dirs[i], a);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

void wd_sb_free_strv(char **v)
{
	for (int i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

int wd_sb_copy_root_symlinks(const char *root)
{
	DIR *d = opendir("/");
	struct dirent *e;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char target[256], dst[4096], src[300];
		snprintf(src, sizeof(src), "/%s", e->d_name);
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		snprintf(dst, sizeof(dst), "%s/%s", root, e->d_name);
		if (symlink(target, dst) < 0 && errno != EEXIST) {
			int r = -errno;
			closedir(d);
			return r;
		}
	}
	closedir(d);
	return 0;
}

void wd_sb_take(struct wd_buf *b, const char *p, size_t n, size_t cap,
		bool *trunc)
{
	size_t room = b->len < cap ? cap - b->len : 0;
	if (n > room) {
		*trunc = true;
		n = room;
	}
	if (n)
		wd_buf_append(b, p, n);
}
