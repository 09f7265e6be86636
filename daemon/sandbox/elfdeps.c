/* ELF start closure without running the program: see elfdeps.h.
 *
 * Every file read here is untrusted input (a manifest may name any binary,
 * a library directory may hold anything): each offset and size is checked
 * against the file before it is read, through pread (no mmap: a file
 * truncated under us must give an error, not SIGBUS in the daemon), and
 * the work is bounded by WD_ELF_MAX_OBJECTS / WD_ELF_MAX_DEPTH. */
#include "sandbox/common.h"
#include "sandbox/elfdeps.h"

#include <ctype.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PHNUM     512
#define MAX_DYN	      8192 /* entries of PT_DYNAMIC */
#define MAX_NEEDED    512
#define MAX_STRTAB    (16u << 20)
#define MAX_CACHE     (64u << 20)
#define MAX_SHEBANG   256 /* the kernel's BINPRM_BUF_SIZE */
#define ERR_MALFORMED (-ENOEXEC)

/* The default directories, after RUNPATH and ld.so.cache (Debian x86_64
 * multiarch first, then the generic ones). */
static const char *const default_dirs[] = {
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
};

struct obj {
	char *path;   /* as the loader opens it */
	char *origin; /* $ORIGIN: the directory of `path` (main: realpath) */
	char *name;   /* the DT_NEEDED name it was loaded for (NULL: main) */
	char *soname;
	char *rpath, *runpath; /* NULL when absent; RPATH dropped if RUNPATH */
	char **needed;
	int n_needed;
	bool nodeflib;
	int loader; /* index of the object whose DT_NEEDED named it, -1 */
	int depth;
	dev_t dev;
	ino_t ino;
};

static void obj_free(struct obj *o)
{
	free(o->path);
	free(o->origin);
	free(o->name);
	free(o->soname);
	free(o->rpath);
	free(o->runpath);
	for (int i = 0; i < o->n_needed; i++)
		free(o->needed[i]);
	free(o->needed);
}

/* Read exactly `len` bytes at `off`, which must lie inside the file's
 * `size` bytes. 0 or -errno with a message naming the file. */
static int rd(int fd, const char *path, uint64_t size, uint64_t off, void *buf,
	      size_t len, const char *what, struct wd_err *err)
{
	if (off > size || len > size - off)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': malformed or truncated ELF: %s at "
				  "offset %llu (+%zu) is past the end of the "
				  "file (%llu bytes)",
				  path, what, (unsigned long long)off, len,
				  (unsigned long long)size);
	size_t got = 0;
	while (got < len) {
		ssize_t n =
		    pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return wd_err_set(err, -errno, "'%s': read: %s", path,
					  strerror(errno));
		if (n == 0)
			return wd_err_set(err, ERR_MALFORMED,
					  "'%s': truncated ELF: %s", path,
					  what);
		got += n;
	}
	return 0;
}

/* The ELF header of an open file, checked to be what the loader of this
 * machine runs. 0, -ENOEXEC (not ELF, truncated, or another class, byte
 * order, machine or type) with a message. */
static int elf_header(int fd, const char *path, uint64_t size, Elf64_Ehdr *eh,
		      struct wd_err *err)
{
	unsigned char id[EI_NIDENT] = {0};
	if (size < SELFMAG)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': not an ELF file (%llu bytes)", path,
				  (unsigned long long)size);
	int r =
	    rd(fd, path, size, 0, id, WD_MIN(size, sizeof(id)), "ident", err);
	if (r < 0)
		return r;
	if (memcmp(id, ELFMAG, SELFMAG))
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': not an ELF file (bad magic)", path);
	if (size < sizeof(*eh))
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': truncated ELF: %llu bytes, the header "
				  "alone is %zu",
				  path, (unsigned long long)size, sizeof(*eh));
	if (id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': ELF class %u, byte order %u: only "
				  "64-bit little-endian x86_64 is understood",
				  path, id[EI_CLASS], id[EI_DATA]);
	if ((r = rd(fd, path, size, 0, eh, sizeof(*eh), "header", err)) < 0)
		return r;
	if (eh->e_machine != EM_X86_64)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': ELF machine %u: only x86_64 (%u) is "
				  "understood",
				  path, eh->e_machine, EM_X86_64);
	if (eh->e_type != ET_EXEC && eh->e_type != ET_DYN)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': ELF type %u is neither an executable "
				  "nor a shared object",
				  path, eh->e_type);
	return 0;
}

/* A string at `off` of a string table of `n` bytes: NUL-terminated inside
 * it, or NULL. */
static const char *str_at(const char *tab, uint64_t n, uint64_t off)
{
	if (off >= n || !memchr(tab + off, 0, n - off))
		return NULL;
	return tab + off;
}

/* File offset of virtual address `va`, through the PT_LOAD segments. */
static int va_to_off(const Elf64_Phdr *ph, int n, uint64_t va, uint64_t *off)
{
	for (int i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && va >= ph[i].p_vaddr &&
		    va - ph[i].p_vaddr < ph[i].p_filesz) {
			*off = ph[i].p_offset + (va - ph[i].p_vaddr);
			return 0;
		}
	return -ENOENT;
}

/* Parse `o->path`: identity, PT_INTERP (into *interp when wanted), and the
 * dynamic section (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH,
 * DF_1_NODEFLIB). 0 or -errno with a message naming the file. */
static int parse_elf(struct obj *o, char **interp, struct wd_err *err)
{
	const char *p = o->path;
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return wd_err_set(err, -errno, "'%s': %s", p, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0)
		return wd_err_set(err, -errno, "'%s': %s", p, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return wd_err_set(err, -EACCES, "'%s': not a regular file", p);
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	uint64_t size = st.st_size;
	Elf64_Ehdr eh;
	int r = elf_header(fd, p, size, &eh, err);
	if (r < 0)
		return r;
	if (eh.e_phnum == 0 || eh.e_phnum > MAX_PHNUM ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': malformed ELF: %u program headers of "
				  "%u bytes",
				  p, eh.e_phnum, eh.e_phentsize);
	cleanup_free Elf64_Phdr *ph = wd_calloc(eh.e_phnum, sizeof(*ph));
	if ((r = rd(fd, p, size, eh.e_phoff, ph, eh.e_phnum * sizeof(*ph),
		    "program headers", err)) < 0)
		return r;
	const Elf64_Phdr *dyn = NULL;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = &ph[i];
		if (ph[i].p_type != PT_INTERP || !interp)
			continue;
		if (ph[i].p_filesz < 2 || ph[i].p_filesz > PATH_MAX)
			return wd_err_set(err, ERR_MALFORMED,
					  "'%s': malformed ELF: PT_INTERP of "
					  "%llu bytes",
					  p,
					  (unsigned long long)ph[i].p_filesz);
		char *s = wd_calloc(1, ph[i].p_filesz + 1);
		if ((r = rd(fd, p, size, ph[i].p_offset, s, ph[i].p_filesz,
			    "PT_INTERP", err)) < 0) {
			free(s);
			return r;
		}
		if (s[0] != '/' || strlen(s) + 1 != ph[i].p_filesz) {
			free(s);
			return wd_err_set(err, ERR_MALFORMED,
					  "'%s': malformed ELF: PT_INTERP is "
					  "not one absolute path",
					  p);
		}
		free(*interp);
		*interp = s;
	}
	if (!dyn)
		return 0; /* static: nothing to load */
	uint64_t nd = dyn->p_filesz / sizeof(Elf64_Dyn);
	if (nd > MAX_DYN)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': malformed ELF: %llu dynamic entries",
				  p, (unsigned long long)nd);
	cleanup_free Elf64_Dyn *d = wd_calloc(nd + 1, sizeof(*d));
	if ((r = rd(fd, p, size, dyn->p_offset, d, nd * sizeof(*d),
		    "PT_DYNAMIC", err)) < 0)
		return r;
	uint64_t strtab = 0, strsz = 0;
	bool has_strtab = false;
	int n_needed = 0;
	int64_t soname = -1, rpath = -1, runpath = -1;
	for (uint64_t i = 0; i < nd && d[i].d_tag != DT_NULL; i++) {
		switch (d[i].d_tag) {
		case DT_STRTAB:
			strtab = d[i].d_un.d_ptr;
			has_strtab = true;
			break;
		case DT_STRSZ:
			strsz = d[i].d_un.d_val;
			break;
		case DT_NEEDED:
			n_needed++;
			break;
		case DT_SONAME:
			soname = d[i].d_un.d_val;
			break;
		case DT_RPATH:
			rpath = d[i].d_un.d_val;
			break;
		case DT_RUNPATH:
			runpath = d[i].d_un.d_val;
			break;
		case DT_FLAGS_1:
			o->nodeflib |= !!(d[i].d_un.d_val & DF_1_NODEFLIB);
			break;
		}
	}
	if (n_needed > MAX_NEEDED)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': %d DT_NEEDED entries (at most %d)", p,
				  n_needed, MAX_NEEDED);
	if (!n_needed && soname < 0 && rpath < 0 && runpath < 0)
		return 0;
	uint64_t stroff;
	if (!has_strtab || !strsz || strsz > MAX_STRTAB ||
	    va_to_off(ph, eh.e_phnum, strtab, &stroff) < 0)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': malformed ELF: no usable DT_STRTAB "
				  "(address %#llx, %llu bytes)",
				  p, (unsigned long long)strtab,
				  (unsigned long long)strsz);
	cleanup_free char *tab = wd_malloc(strsz);
	if ((r = rd(fd, p, size, stroff, tab, strsz, "DT_STRTAB", err)) < 0)
		return r;
	const char *s;
	o->needed = wd_calloc(n_needed + 1, sizeof(char *));
	for (uint64_t i = 0; i < nd && d[i].d_tag != DT_NULL; i++) {
		if (d[i].d_tag != DT_NEEDED)
			continue;
		if (!(s = str_at(tab, strsz, d[i].d_un.d_val)) || !*s)
			return wd_err_set(err, ERR_MALFORMED,
					  "'%s': malformed ELF: DT_NEEDED "
					  "string at %llu",
					  p,
					  (unsigned long long)d[i].d_un.d_val);
		o->needed[o->n_needed++] = wd_strdup(s);
	}
	struct {
		int64_t off;
		char **dst;
		const char *tag;
	} strs[] = {{soname, &o->soname, "DT_SONAME"},
		    {rpath, &o->rpath, "DT_RPATH"},
		    {runpath, &o->runpath, "DT_RUNPATH"}};
	for (size_t i = 0; i < WD_ARRAY_SIZE(strs); i++) {
		if (strs[i].off < 0)
			continue;
		if (!(s = str_at(tab, strsz, strs[i].off)))
			return wd_err_set(err, ERR_MALFORMED,
					  "'%s': malformed ELF: %s string at "
					  "%lld",
					  p, strs[i].tag,
					  (long long)strs[i].off);
		*strs[i].dst = wd_strdup(s);
	}
	/* ld.so ignores DT_RPATH when DT_RUNPATH is present */
	if (o->runpath) {
		free(o->rpath);
		o->rpath = NULL;
	}
	return 0;
}

/* ld.so.cache, format "glibc-ld.so.cache1.1", possibly behind the old
 * "ld.so-1.7.0" table (which is skipped, as glibc does). */
#define CACHE_OLD_MAGIC "ld.so-1.7.0"
#define CACHE_NEW_MAGIC "glibc-ld.so.cache1.1"
#define CACHE_HDR_SIZE	48 /* struct cache_file_new */
#define CACHE_ENT_SIZE	24 /* struct file_entry_new */
#define CACHE_OLD_ENT	12 /* struct file_entry */
#define FLAG_ELF	0x0001
#define FLAG_LIBC6_X64	0x0303 /* FLAG_ELF_LIBC6 | FLAG_X8664_LIB64 */

struct ldcache {
	char *data;
	size_t len;
	const char *base; /* the new header; string offsets are from here */
	size_t base_len;
	uint32_t nlibs;
};

static uint32_t le32(const char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* 0 (c->nlibs 0 when there is no cache) or -errno with a message. */
static int ldcache_load(const char *path, struct ldcache *c, struct wd_err *err)
{
	memset(c, 0, sizeof(*c));
	struct stat st;
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0
				       : wd_err_set(err, -errno, "'%s': %s",
						    path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_CACHE)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': not a regular file of at most %u "
				  "bytes",
				  path, MAX_CACHE);
	int r = wd_read_file(path, &c->data, &c->len);
	if (r < 0)
		return wd_err_set(err, r, "'%s': %s", path, strerror(-r));
	size_t at = 0;
	if (c->len >= 16 &&
	    !memcmp(c->data, CACHE_OLD_MAGIC, sizeof(CACHE_OLD_MAGIC) - 1)) {
		uint64_t n = le32(c->data + 12);
		at = 16 + n * CACHE_OLD_ENT;
		at = (at + 7) & ~(size_t)7; /* __alignof__(cache_file_new) */
	}
	if (at > c->len || c->len - at < CACHE_HDR_SIZE ||
	    memcmp(c->data + at, CACHE_NEW_MAGIC, sizeof(CACHE_NEW_MAGIC) - 1))
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': not a \"%s\" ld.so.cache", path,
				  CACHE_NEW_MAGIC);
	c->base = c->data + at;
	c->base_len = c->len - at;
	uint8_t endian = (uint8_t)c->base[28];
	if (endian != 0 && endian != 2) /* unset, or little-endian */
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': ld.so.cache byte order %u is not "
				  "little-endian",
				  path, endian);
	c->nlibs = le32(c->base + 20);
	if ((uint64_t)c->nlibs * CACHE_ENT_SIZE > c->base_len - CACHE_HDR_SIZE)
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': ld.so.cache lists %u libraries past "
				  "its end",
				  path, c->nlibs);
	return 0;
}

/* The cache's paths for `name`, appended to v (n entries, cap `cap`). */
static int ldcache_find(const struct ldcache *c, const char *path,
			const char *name, char ***v, int *n, struct wd_err *err)
{
	for (uint32_t i = 0; i < c->nlibs; i++) {
		const char *e = c->base + CACHE_HDR_SIZE + i * CACHE_ENT_SIZE;
		int32_t flags = (int32_t)le32(e);
		const char *key = str_at(c->base, c->base_len, le32(e + 4));
		const char *val = str_at(c->base, c->base_len, le32(e + 8));
		if (!key || !val)
			return wd_err_set(err, ERR_MALFORMED,
					  "'%s': ld.so.cache entry %u points "
					  "outside the file",
					  path, i);
		if ((flags != FLAG_ELF && flags != FLAG_LIBC6_X64) ||
		    strcmp(key, name) || val[0] != '/')
			continue;
		if (*n >= WD_ELF_MAX_OBJECTS)
			return wd_err_set(err, -E2BIG,
					  "'%s': more than %d entries for '%s'",
					  path, WD_ELF_MAX_OBJECTS, name);
		*v = wd_realloc(*v, (*n + 2) * sizeof(char *));
		(*v)[(*n)++] = wd_strdup(val);
		(*v)[*n] = NULL;
	}
	return 0;
}

int wd_ldcache_lookup(const char *cache, const char *name, char ***out,
		      struct wd_err *err)
{
	struct ldcache c;
	char **v = wd_calloc(1, sizeof(char *));
	int n = 0;
	int r = ldcache_load(cache, &c, err);
	if (r >= 0)
		r = ldcache_find(&c, cache, name, &v, &n, err);
	free(c.data);
	if (r < 0) {
		wd_sb_free_strv(v);
		*out = NULL;
		return r;
	}
	*out = v;
	return n;
}

/* Whether `p` is a regular file with an ELF header this loader accepts:
 * ld.so passes over a candidate of another class or machine (or one that
 * is absent) and goes on to the next directory. */
static bool candidate(const char *p)
{
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	Elf64_Ehdr eh;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       elf_header(fd, p, st.st_size, &eh, NULL) == 0;
}

/* `dir` with $ORIGIN / ${ORIGIN}, $LIB, $PLATFORM expanded, or NULL when
 * it names a token this resolver does not know. $LIB and $PLATFORM take
 * Debian x86_64 glibc's values. */
static char *expand_dst(const char *dir, const char *origin)
{
	static const struct {
		const char *tok;
		const char *val;
	} dst[] = {{"ORIGIN", NULL},
		   {"LIB", "lib/x86_64-linux-gnu"},
		   {"PLATFORM", "x86_64"}};
	struct wd_buf b = {0};
	for (const char *s = dir; *s;) {
		if (*s != '$') {
			wd_buf_append(&b, s++, 1);
			continue;
		}
		bool brace = s[1] == '{', done = false;
		for (size_t i = 0; i < WD_ARRAY_SIZE(dst) && !done; i++) {
			size_t l = strlen(dst[i].tok);
			const char *t = s + 1 + brace;
			if (strncmp(t, dst[i].tok, l) ||
			    (brace ? t[l] != '}'
				   : (t[l] == '_' ||
				      isalnum((unsigned char)t[l]))))
				continue;
			const char *v = dst[i].val ? dst[i].val : origin;
			wd_buf_append(&b, v, strlen(v));
			s = t + l + brace;
			done = true;
		}
		if (!done) {
			wd_buf_free(&b);
			return NULL;
		}
	}
	wd_buf_append(&b, "", 1);
	return b.data;
}

/* The first directory of the ':'-separated `list` holding a usable
 * `name`; relative and empty entries (the sandbox's working directory is
 * its scratch) and unknown tokens are passed over. */
static char *search_list(const char *list, const char *origin, const char *name)
{
	cleanup_free char *copy = wd_strdup(list);
	char *save = NULL;
	for (char *e = strtok_r(copy, ":", &save); e;
	     e = strtok_r(NULL, ":", &save)) {
		cleanup_free char *dir = expand_dst(e, origin);
		if (!dir || dir[0] != '/')
			continue;
		char *p = wd_asprintf("%s/%s", dir, name);
		if (candidate(p))
			return p;
		free(p);
	}
	return NULL;
}

struct closure {
	struct obj o[WD_ELF_MAX_OBJECTS];
	int n;
	struct ldcache cache;
	const char *cache_path;
	bool cache_loaded;
};

/* Where ld.so finds `name` for object `li` (glibc's _dl_map_object order;
 * LD_LIBRARY_PATH is absent: the sandbox's environment is fixed). The
 * paths, in *v (the cache may list several variants), count in *n. */
static int resolve(struct closure *c, int li, const char *name, char ***v,
		   int *n, struct wd_err *err)
{
	struct obj *ld = &c->o[li];
	char *p = NULL;
	*n = 0;
	*v = NULL;
	if (strchr(name, '/')) {
		cleanup_free char *x = expand_dst(name, ld->origin);
		if (!x || x[0] != '/')
			return wd_err_set(err, -ENOENT,
					  "'%s': DT_NEEDED '%s' is not an "
					  "absolute path",
					  ld->path, name);
		p = steal_pointer(&x);
		goto one;
	}
	/* DT_RPATH of the object, then of its loaders up to the
	 * executable (every chain ends there), unless the object has
	 * DT_RUNPATH */
	if (!ld->runpath)
		for (int i = li; i >= 0 && !p; i = c->o[i].loader)
			if (c->o[i].rpath)
				p = search_list(c->o[i].rpath, c->o[i].origin,
						name);
	if (!p && ld->runpath)
		p = search_list(ld->runpath, ld->origin, name);
	if (p)
		goto one;
	if (ld->nodeflib)
		goto missing;
	if (!c->cache_loaded) {
		int r = ldcache_load(c->cache_path, &c->cache, err);
		if (r < 0)
			return r;
		c->cache_loaded = true;
	}
	char **cv = NULL;
	int cn = 0;
	int r = ldcache_find(&c->cache, c->cache_path, name, &cv, &cn, err);
	if (r < 0) {
		wd_sb_free_strv(cv);
		return r;
	}
	for (int i = 0; i < cn; i++) {
		if (candidate(cv[i])) {
			*v = wd_realloc(*v, (*n + 2) * sizeof(char *));
			(*v)[(*n)++] = steal_pointer(&cv[i]);
			(*v)[*n] = NULL;
		}
	}
	wd_sb_free_strv(cv);
	if (*n)
		return 0;
	for (size_t i = 0; i < WD_ARRAY_SIZE(default_dirs) && !p; i++) {
		p = wd_asprintf("%s/%s", default_dirs[i], name);
		if (!candidate(p)) {
			free(p);
			p = NULL;
		}
	}
	if (p)
		goto one;
missing:
	return wd_err_set(err, -ENOENT,
			  "library '%s' needed by '%s' not found (RPATH, "
			  "RUNPATH, %s, default dirs)",
			  name, ld->path, c->cache_path);
one:
	*v = wd_calloc(2, sizeof(char *));
	(*v)[0] = p;
	*n = 1;
	return 0;
}

static bool known_name(const struct closure *c, const char *name)
{
	for (int i = 0; i < c->n; i++)
		if ((c->o[i].name && !strcmp(c->o[i].name, name)) ||
		    (c->o[i].soname && !strcmp(c->o[i].soname, name)))
			return true;
	return false;
}

/* Add `path` as object; 1 added, 0 already there (same file), -errno. */
static int add_obj(struct closure *c, const char *path, const char *name,
		   int loader, char **interp, struct wd_err *err)
{
	if (c->n >= WD_ELF_MAX_OBJECTS)
		return wd_err_set(err, -E2BIG,
				  "'%s': more than %d objects to load",
				  c->o[0].path, WD_ELF_MAX_OBJECTS);
	int depth = loader >= 0 ? c->o[loader].depth + 1 : 0;
	if (depth > WD_ELF_MAX_DEPTH)
		return wd_err_set(err, -E2BIG,
				  "'%s': dependency chain deeper than %d at "
				  "'%s'",
				  c->o[0].path, WD_ELF_MAX_DEPTH, path);
	struct obj *o = &c->o[c->n];
	memset(o, 0, sizeof(*o));
	o->path = wd_strdup(path);
	o->name = name ? wd_strdup(name) : NULL;
	o->loader = loader;
	o->depth = depth;
	if (loader < 0) { /* the executable: ld.so takes /proc/self/exe */
		char rp[PATH_MAX];
		o->origin = wd_strdup(realpath(path, rp) ? rp : path);
	} else {
		o->origin = wd_strdup(path);
	}
	char *slash = strrchr(o->origin, '/');
	if (slash)
		slash[slash == o->origin] = 0;
	int r = parse_elf(o, interp, err);
	if (r < 0) {
		obj_free(o);
		return r;
	}
	for (int i = 0; i < c->n; i++)
		if (c->o[i].dev == o->dev && c->o[i].ino == o->ino) {
			obj_free(o);
			return 0;
		}
	c->n++;
	return 1;
}

/* `prog`'s #! interpreter in *interp (NULL when it is not a script).
 * 0 or -errno. */
static int shebang(const char *prog, char **interp, struct wd_err *err)
{
	char buf[MAX_SHEBANG + 1] = {0};
	*interp = NULL;
	cleanup_close int fd = open(prog, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return wd_err_set(err, -errno, "'%s': %s", prog,
				  strerror(errno));
	ssize_t n = pread(fd, buf, MAX_SHEBANG, 0);
	if (n < 0)
		return wd_err_set(err, -errno, "'%s': read: %s", prog,
				  strerror(errno));
	if (n < 2 || buf[0] != '#' || buf[1] != '!')
		return 0;
	char *s = buf + 2;
	s += strspn(s, " \t");
	size_t l = strcspn(s, " \t\n");
	if (!l || !s[l])
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': #! line without an interpreter "
				  "within %d bytes",
				  prog, MAX_SHEBANG);
	if (s[0] != '/')
		return wd_err_set(err, ERR_MALFORMED,
				  "'%s': #! interpreter '%.*s' is not an "
				  "absolute path",
				  prog, (int)l, s);
	*interp = wd_strndup(s, l);
	return 0;
}

static void push(char ***v, int *n, const char *s)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp((*v)[i], s))
			return;
	*v = wd_realloc(*v, (*n + 2) * sizeof(char *));
	(*v)[(*n)++] = wd_strdup(s);
	(*v)[*n] = NULL;
}

int wd_elf_closure(const char *prog, const char *cache, char ***out,
		   struct wd_err *err)
{
	char **v = wd_calloc(1, sizeof(char *));
	int nv = 0, r = 0;
	cleanup_free char *exe = wd_strdup(prog);
	cleanup_free char *interp = NULL;
	struct closure *c = wd_calloc(1, sizeof(*c));
	c->cache_path = cache ? cache : WD_LD_SO_CACHE;
	*out = NULL;

	/* A script runs its interpreter, which must be there (and
	 * executable); `#!/usr/bin/env NAME` brings env's closure, not
	 * NAME's: NAME must be listed in the manifest. */
	for (int depth = 0;; depth++) {
		char *next = NULL;
		if ((r = shebang(exe, &next, err)) < 0)
			goto out;
		if (!next)
			break;
		if (depth >= WD_ELF_MAX_SCRIPTS) {
			free(next);
			r = wd_err_set(err, -ELOOP,
				       "'%s': more than %d nested #! "
				       "interpreters",
				       prog, WD_ELF_MAX_SCRIPTS);
			goto out;
		}
		push(&v, &nv, next);
		free(exe);
		exe = next;
	}
	if ((r = add_obj(c, exe, NULL, -1, &interp, err)) < 0)
		goto out;
	if (!interp)
		goto done; /* static: the kernel maps it, nothing else */
	/* The loader itself is an object: libc's DT_NEEDED on
	 * ld-linux-x86-64.so.2 finds it by its soname, as ld.so does. */
	if ((r = add_obj(c, interp, NULL, 0, NULL, err)) < 0)
		goto out;
	push(&v, &nv, interp);
	for (int i = 0; i < c->n; i++) {
		for (int k = 0; k < c->o[i].n_needed; k++) {
			const char *name = c->o[i].needed[k];
			if (known_name(c, name))
				continue;
			char **pv = NULL;
			int pn = 0;
			if ((r = resolve(c, i, name, &pv, &pn, err)) < 0)
				goto out;
			for (int j = 0; j < pn && r >= 0; j++) {
				r = add_obj(c, pv[j], name, i, NULL, err);
				if (r >= 0)
					push(&v, &nv, pv[j]);
			}
			wd_sb_free_strv(pv);
			if (r < 0)
				goto out;
		}
	}
	if (access(c->cache_path, R_OK) == 0)
		push(&v, &nv, c->cache_path);
done:
	*out = steal_pointer(&v);
	r = nv;
out:
	for (int i = 0; i < c->n; i++)
		obj_free(&c->o[i]);
	free(c->cache.data);
	free(c);
	wd_sb_free_strv(v);
	return r;
}
