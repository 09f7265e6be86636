/* The per-boot file cache of exported seccomp programs (seccomp.c).
 *
 * libseccomp's build and export of a call's filter cost ~0.3 ms of CPU
 * (and its API-level probe a dozen seccomp(2) calls) in every one-shot
 * `warden exec`; wardend keeps them in memory, a one-shot process has no
 * memory of the call before. So the program is kept in
 * <runtime dir>/seccomp/<crc32 of its key>-<key length>, valid for the
 * boot, kernel and warden build of the probe cache's key (probe.h) and the
 * libseccomp version that exported it, and for exactly the key it was
 * built from (what the filter is made of: seccomp.c, prog_key), compared
 * whole.
 *
 * Threat: the program is the call's syscall line. A file we did not write
 * is never used (the same owner and mode checks as the probe cache:
 * root's, writable by root alone, not a symlink), nor one of another
 * boot, kernel, build or libseccomp, nor one whose checksum or shape is
 * off (torn, damaged): the program is built again and the file replaced.
 * The crc32 catches damage, not forgery: only root can write a file that
 * passes the owner check. */
#include "enforce/probe.h"
#include "enforce/seccomp.h"
#include "common/log.h"

#include <seccomp.h>
#include <string.h>
#include <zlib.h>

#define SC_MAGIC   "WDSECC\1"
#define SC_VERSION 1u

struct sc_head {
	char magic[8];
	uint32_t version;
	uint32_t key_len; /* bytes of the key after this header */
	uint32_t n_insn;  /* struct sock_filter after the key */
	uint32_t sum;	  /* crc32 of the file with this field 0 */
	struct wd_probe_key pk;
	char lib[32]; /* libseccomp's version */
};

static void lib_version(char out[32])
{
	const struct scmp_version *v = seccomp_version();
	memset(out, 0, 32);
	snprintf(out, 32, "%u.%u.%u", v ? v->major : 0, v ? v->minor : 0,
		 v ? v->micro : 0);
}

/* <runtime dir>/seccomp/<name>; the probe's key, or NULL: no file cache
 * (not root, no key) */
static const struct wd_probe_key *file_path(const char *key, size_t key_len,
					    char *out, size_t len)
{
	const struct wd_probe_key *pk = wd_probe_cache_key();
	if (!pk)
		return NULL;
	int n = snprintf(out, len, "%s/seccomp/%08x-%zu", wd_runtime_dir(),
			 wd_crc32(key, key_len), key_len);
	return n < 0 || (size_t)n >= len ? NULL : pk;
}

int wd_seccomp_file_get(const char *key, size_t key_len,
			struct wd_seccomp_prog *out)
{
	char path[4200];
	const struct wd_probe_key *pk =
	    file_path(key, key_len, path, sizeof(path));
	if (!pk)
		return -ENOENT;
	size_t max = sizeof(struct sc_head) + key_len +
		     BPF_MAXINSNS * sizeof(struct sock_filter);
	cleanup_free char *b = NULL;
	size_t n;
	int r = wd_root_file_read(path, (void **)&b, &n, max);
	if (r < 0) {
		if (r != -ENOENT)
			wd_debug("seccomp: cached program '%s' not used "
				 "(%s): building",
				 path, strerror(-r));
		return r;
	}
	struct sc_head h;
	char lib[32];
	lib_version(lib);
	if (n < sizeof(h))
		return -EINVAL;
	memcpy(&h, b, sizeof(h));
	if (memcmp(h.magic, SC_MAGIC, sizeof(h.magic)) ||
	    h.version != SC_VERSION || h.key_len != key_len || h.n_insn == 0 ||
	    h.n_insn > BPF_MAXINSNS ||
	    n != sizeof(h) + key_len + h.n_insn * sizeof(struct sock_filter))
		return -EINVAL;
	uint32_t sum = h.sum;
	memset(b + offsetof(struct sc_head, sum), 0, sizeof(h.sum));
	if (wd_crc32(b, n) != sum)
		return -EINVAL;
	/* another boot, kernel, build or libseccomp, or another key under
	 * the same name: every byte compared */
	if (memcmp(&h.pk, pk, sizeof(*pk)) || memcmp(h.lib, lib, sizeof(lib)) ||
	    memcmp(b + sizeof(h), key, key_len))
		return -ESTALE;
	size_t sz = h.n_insn * sizeof(struct sock_filter);
	out->prog.filter = wd_malloc(sz);
	memcpy(out->prog.filter, b + sizeof(h) + key_len, sz);
	out->prog.len = (unsigned short)h.n_insn;
	return 0;
}

void wd_seccomp_file_put(const char *key, size_t key_len,
			 const struct wd_seccomp_prog *p)
{
	char path[4200];
	const struct wd_probe_key *pk =
	    file_path(key, key_len, path, sizeof(path));
	if (!pk || !p->prog.len || p->prog.len > BPF_MAXINSNS)
		return;
	size_t sz = p->prog.len * sizeof(struct sock_filter);
	size_t n = sizeof(struct sc_head) + key_len + sz;
	cleanup_free char *b = wd_calloc(1, n);
	struct sc_head h = {.version = SC_VERSION,
			    .key_len = (uint32_t)key_len,
			    .n_insn = p->prog.len,
			    .pk = *pk};
	memcpy(h.magic, SC_MAGIC, sizeof(h.magic));
	lib_version(h.lib);
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), key, key_len);
	memcpy(b + sizeof(h) + key_len, p->prog.filter, sz);
	h.sum = wd_crc32(b, n);
	memcpy(b + offsetof(struct sc_head, sum), &h.sum, sizeof(h.sum));
	int r = wd_root_file_write(path, b, n);
	if (r < 0) /* only slower: the next process builds it again */
		wd_log_errno(WD_LOG_DEBUG, r, "seccomp: cache '%s'", path);
}
