/* The ELF start-closure resolver (tier 3's loader and library binds):
 * real system binaries resolve to the same files ld.so itself lists (ldd,
 * as the oracle: its files compared by realpath), ld.so.cache lookups match
 * `ldconfig -p`, a static binary needs nothing, a script brings its
 * interpreter's closure, and truncated, non-ELF, foreign-architecture
 * files and malformed caches are refused with a message naming them. */
#include <elf.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/common.h"
#include "sandbox/elfdeps.h"
#include "t.h"

static char tmpdir[] = "/tmp/wd-elfdeps.XXXXXX";

static bool has_suffix(char **v, const char *suf)
{
	for (int i = 0; v && v[i]; i++) {
		size_t l = strlen(v[i]), s = strlen(suf);
		if (l >= s && !strcmp(v[i] + l - s, suf))
			return true;
	}
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted realpaths of `v` (without the cache), joined by spaces. */
static char *real_set(char **v, int n)
{
	char **r = wd_calloc(n + 1, sizeof(char *));
	int k = 0;
	for (int i = 0; i < n; i++) {
		char rp[PATH_MAX];
		if (strcmp(v[i], WD_LD_SO_CACHE))
			r[k++] = wd_strdup(realpath(v[i], rp) ? rp : v[i]);
	}
	qsort(r, k, sizeof(char *), cmp_str);
	struct wd_buf b = {0};
	for (int i = 0; i < k; i++)
		wd_buf_printf(&b, "%s%s", i ? " " : "", r[i]);
	wd_buf_append(&b, "", 1);
	wd_sb_free_strv(r);
	return b.data;
}

/* What ld.so lists for `prog` (ldd: the loader in list mode), minus the
 * vdso, as real_set(). */
static char *ldd_set(const char *prog)
{
	cleanup_free char *cmd = wd_asprintf("ldd '%s' 2>/dev/null", prog);
	FILE *f = popen(cmd, "r");
	char line[1024];
	char **v = wd_calloc(1, sizeof(char *));
	int n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "=> /");
		p = p ? p + 3
		      : (line[0] == '\t' && line[1] == '/' ? line + 1 : NULL);
		if (!p)
			continue;
		p[strcspn(p, " \t\n")] = 0;
		v = wd_realloc(v, (n + 2) * sizeof(char *));
		v[n++] = wd_strdup(p);
		v[n] = NULL;
	}
	if (f)
		pclose(f);
	char *s = real_set(v, n);
	wd_sb_free_strv(v);
	return s;
}

static void check_resolves(const char *prog, const char *name)
{
	char **v = NULL;
	struct wd_err err = {0};
	int n = wd_elf_closure(prog, NULL, &v, &err);
	char tn[128];
	snprintf(tn, sizeof(tn), "elf_closure_%s", name);
	if (n <= 0) {
		T_FAIL(tn, "%d: %s", n, err.msg);
		return;
	}
	bool all = true;
	for (int i = 0; i < n; i++)
		all &= v[i][0] == '/' && access(v[i], R_OK) == 0;
	T_OK(all && has_suffix(v, "/ld-linux-x86-64.so.2") &&
		 has_suffix(v, "/libc.so.6") && has_suffix(v, WD_LD_SO_CACHE),
	     tn, "%d paths, exist %d, first '%s'", n, all, v[0]);
	cleanup_free char *mine = real_set(v, n);
	cleanup_free char *ldd = ldd_set(prog);
	snprintf(tn, sizeof(tn), "elf_closure_%s_matches_ldd", name);
	if (!ldd[0])
		T_SKIP(tn, "ldd lists nothing for %s", prog);
	else
		T_OK(!strcmp(mine, ldd), tn, "mine [%s] ldd [%s]", mine, ldd);
	wd_sb_free_strv(v);
}

static char *write_tmp(const char *name, const void *data, size_t len)
{
	char *p = wd_asprintf("%s/%s", tmpdir, name);
	if (wd_write_file(p, data, len, 0755) < 0)
		printf("# cannot write %s\n", p);
	return p;
}

/* A refusal: negative, and the message names the file and says `what`. */
static void check_refused(const char *tn, const char *path, const char *what)
{
	char **v = NULL;
	struct wd_err err = {0};
	int n = wd_elf_closure(path, NULL, &v, &err);
	printf("# %s\n", err.msg);
	T_OK(n < 0 && v == NULL && strstr(err.msg, path) &&
		 strstr(err.msg, what),
	     tn, "got %d '%s' (want '%s')", n, err.msg, what);
	wd_sb_free_strv(v);
}

static void cache_checks(void)
{
	/* the loader's own answer for libc.so.6 on this machine */
	FILE *f = popen("ldconfig -p 2>/dev/null", "r");
	char line[1024], want[PATH_MAX] = "";
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "=> ");
		if (!want[0] && p &&
		    strstr(line, "\tlibc.so.6 (libc6,x86-64")) {
			p[3 + strcspn(p + 3, "\n")] = 0;
			wd_strlcpy(want, p + 3, sizeof(want));
		}
	}
	if (f)
		pclose(f);
	char **v = NULL;
	struct wd_err err = {0};
	int n = wd_ldcache_lookup(WD_LD_SO_CACHE, "libc.so.6", &v, &err);
	if (!want[0])
		T_SKIP("ldcache_libc_matches_ldconfig", "ldconfig -p lists no "
							"x86-64 libc.so.6");
	else
		T_OK(n >= 1 && !strcmp(v[0], want),
		     "ldcache_libc_matches_ldconfig", "%d '%s' want '%s' %s", n,
		     n > 0 ? v[0] : "", want, err.msg);
	wd_sb_free_strv(v);
	n = wd_ldcache_lookup(WD_LD_SO_CACHE, "libwarden-no-such.so.9", &v,
			      &err);
	T_OK(n == 0 && v && !v[0], "ldcache_absent_name", "%d", n);
	wd_sb_free_strv(v);

	/* malformed caches: wrong magic, entries past the end */
	cleanup_free char *bad = write_tmp("bad.cache", "ld.so.nonsense", 14);
	n = wd_ldcache_lookup(bad, "libc.so.6", &v, &err);
	T_OK(n < 0 && strstr(err.msg, bad) &&
		 strstr(err.msg, "glibc-ld.so.cache1.1"),
	     "ldcache_bad_magic_refused", "%d '%s'", n, err.msg);
	char hdr[48] = "glibc-ld.so.cache1.1";
	uint32_t many = 1000000;
	memcpy(hdr + 20, &many, 4);
	cleanup_free char *big = write_tmp("big.cache", hdr, sizeof(hdr));
	n = wd_ldcache_lookup(big, "libc.so.6", &v, &err);
	T_OK(n < 0 && strstr(err.msg, "past its end"),
	     "ldcache_entries_past_end_refused", "%d '%s'", n, err.msg);
	/* an entry whose strings point outside the file */
	char one[48 + 24] = "glibc-ld.so.cache1.1";
	uint32_t e[6] = {0x0303, 0xfffff0, 0xfffff8, 0, 0, 0};
	many = 1;
	memcpy(one + 20, &many, 4);
	memcpy(one + 48, e, sizeof(e));
	cleanup_free char *oob = write_tmp("oob.cache", one, sizeof(one));
	n = wd_ldcache_lookup(oob, "libc.so.6", &v, &err);
	T_OK(n < 0 && strstr(err.msg, "outside the file"),
	     "ldcache_entry_out_of_bounds_refused", "%d '%s'", n, err.msg);
	/* the closure of a dynamic program fails on such a cache, naming it */
	n = wd_elf_closure("/usr/bin/dash", bad, &v, &err);
	T_OK(n < 0 && strstr(err.msg, bad), "elf_closure_bad_cache_refused",
	     "%d '%s'", n, err.msg);
	wd_sb_free_strv(v);
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!mkdtemp(tmpdir)) {
		T_FAIL("elfdeps_tmpdir", "%s", strerror(errno));
		return T_DONE();
	}
	check_resolves("/bin/sh", "sh");
	char rp[PATH_MAX];
	if (realpath("/usr/bin/python3", rp))
		check_resolves(rp, "python3");
	else
		T_SKIP("elf_closure_python3", "no /usr/bin/python3");
	/* RUNPATH (systemd's private libs) and RPATH $ORIGIN (the JDK) */
	if (realpath("/usr/bin/busctl", rp))
		check_resolves(rp, "runpath_busctl");
	else
		T_SKIP("elf_closure_runpath_busctl", "no /usr/bin/busctl");
	if (realpath("/usr/bin/java", rp))
		check_resolves(rp, "rpath_origin_java");
	else
		T_SKIP("elf_closure_rpath_origin_java", "no /usr/bin/java");

	/* a static binary: the test helpers are linked -static */
	char self[PATH_MAX];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[sl > 0 ? sl : 0] = 0;
	cleanup_free char *probe =
	    wd_asprintf("%s/../helpers/probe", dirname(self));
	char **v = NULL;
	struct wd_err err = {0};
	int n = wd_elf_closure(probe, NULL, &v, &err);
	T_OK(n == 0 && v && !v[0], "elf_closure_static_empty", "%d %s %s", n,
	     n > 0 ? v[0] : "", err.msg);
	wd_sb_free_strv(v);

	/* a script: its interpreter, then the interpreter's closure */
	const char sh[] = "#!/bin/sh -e\necho hi\n";
	cleanup_free char *script = write_tmp("script", sh, sizeof(sh) - 1);
	n = wd_elf_closure(script, NULL, &v, &err);
	T_OK(n > 2 && !strcmp(v[0], "/bin/sh") && has_suffix(v, "/libc.so.6") &&
		 has_suffix(v, "/ld-linux-x86-64.so.2"),
	     "elf_closure_script_interp", "%d %s %s", n, n > 0 ? v[0] : "",
	     err.msg);
	wd_sb_free_strv(v);
	const char rel[] = "#!sh\n";
	cleanup_free char *rels = write_tmp("relscript", rel, sizeof(rel) - 1);
	check_refused("elf_closure_script_relative_refused", rels,
		      "not an absolute path");

	/* refusals */
	cleanup_free char *dash = NULL;
	size_t dl = 0;
	if (wd_read_file("/usr/bin/dash", &dash, &dl) < 0 || dl < 4096) {
		T_SKIP("elf_truncated", "cannot read /usr/bin/dash");
	} else {
		cleanup_free char *t1 = write_tmp("trunc-hdr", dash, 40);
		check_refused("elf_truncated_header_refused", t1, "truncated");
		cleanup_free char *t2 = write_tmp("trunc-ph", dash, 100);
		check_refused("elf_truncated_phdrs_refused", t2, "truncated");
		/* headers intact, the rest (dynamic section) cut off */
		cleanup_free char *t3 = write_tmp("trunc-dyn", dash, 1024);
		check_refused("elf_truncated_dynamic_refused", t3,
			      "past the end");
		Elf64_Ehdr eh;
		memcpy(&eh, dash, sizeof(eh));
		eh.e_machine = EM_AARCH64;
		memcpy(dash, &eh, sizeof(eh));
		cleanup_free char *arm = write_tmp("arm", dash, dl);
		check_refused("elf_other_machine_refused", arm, "only x86_64");
		dash[EI_CLASS] = ELFCLASS32;
		cleanup_free char *c32 = write_tmp("c32", dash, dl);
		check_refused("elf_32bit_refused", c32,
			      "64-bit little-endian x86_64");
	}
	const char txt[] = "just some text, no #! and no ELF\n";
	cleanup_free char *plain = write_tmp("plain", txt, sizeof(txt) - 1);
	check_refused("elf_non_elf_refused", plain, "not an ELF file");
	cleanup_free char *empty = write_tmp("empty", "", 0);
	check_refused("elf_empty_refused", empty, "not an ELF file");

	cache_checks();
	wd_rm_rf(tmpdir);
	(void)argv;
	return T_DONE();
}
