/* Segment framing: crc32c per line, sha256 chain between lines. This is the
 * code that reads bytes an attacker or a crash may have mangled, so it trusts
 * nothing: every length is checked before use (it is the fuzz target). */
#include "trace/trace_int.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <openssl/sha.h>

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			crc_tab[k][i] = (crc_tab[k - 1][i] >> 8) ^
					crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

#if defined(__x86_64__)
/* SSE4.2 has a crc32c instruction: 8 bytes a cycle or so. */
__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = c;
	while (len--)
		c32 = __builtin_ia32_crc32qi(c32, *p++);
	return ~c32;
}

/* One cpuid, when the first checksum is taken: __builtin_cpu_supports
 * would link libgcc's __cpu_indicator_init, a constructor of some ten
 * cpuid instructions that every process of ours ran at start whether it
 * framed a record or not (a cpuid traps to the hypervisor: ~5 us each on
 * our VMs, ~0.1 ms per `warden exec`). */
static bool have_hw;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;
static void hw_init(void)
{
	unsigned a, b, c, d;
	have_hw = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
}
#endif

/* Slicing-by-8 crc32c (Castagnoli), the framing checksum. */
uint32_t wd_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
#if defined(__x86_64__)
	pthread_once(&hw_once, hw_init);
	if (have_hw)
		return crc_hw(crc, buf, len);
#endif
	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc;
		crc = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^
		      crc_tab[5][(w >> 16) & 0xff] ^
		      crc_tab[4][(w >> 24) & 0xff] ^
		      crc_tab[3][(w >> 32) & 0xff] ^
		      crc_tab[2][(w >> 40) & 0xff] ^
		      crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

/* SHA-256 with the context on the stack: OpenSSL 3.0's EVP_Digest (and
 * EVP_DigestInit_ex2 on a kept context) allocates and frees a provider
 * context per call, i.e. per record under the store's lock; the low-level
 * functions (deprecated in 3.0, still built, same SHA-NI code) do not. */
void wd_sha256_hex(const void *data, size_t len, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[SHA256_DIGEST_LENGTH];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	SHA256_CTX c;
	if (!SHA256_Init(&c) || !SHA256_Update(&c, data, len) ||
	    !SHA256_Final(md, &c))
		SHA256(data, len, md);
#pragma GCC diagnostic pop
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = 0;
}

void wd_trace_ref_of(const void *data, size_t len, char out[WD_TRACE_REF_LEN])
{
	memcpy(out, "sha256:", 7);
	wd_sha256_hex(data, len, out + 7);
}

bool wd_trace_ref_ok(const char *ref)
{
	if (!ref || strncmp(ref, "sha256:", 7) || strlen(ref) != 71)
		return false;
	/* without a branch per digit: random hex mispredicted half of them
	 * (a ref is checked on every record that names one) */
	unsigned ok = 1;
	for (int i = 7; i < 71; i++) {
		unsigned char c = (unsigned char)ref[i];
		ok &= ((unsigned char)(c - '0') <= 9) |
		      ((unsigned char)(c - 'a') <= 5);
	}
	return ok;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int wd_trace_parse_line(const char *line, size_t len, json_t **rec)
{
	json_error_t je;
	json_t *r = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (!r || !json_is_object(r) ||
	    !json_is_integer(json_object_get(r, "seq")) ||
	    !json_is_string(json_object_get(r, "prev"))) {
		json_decref(r);
		return -EBADMSG;
	}
	*rec = r;
	return 0;
}

int wd_trace_check_line(const char *line, size_t len, char hash_hex[65],
			json_t **rec)
{
	if (rec)
		*rec = NULL;
	if (len < WD_CRC_TAIL_LEN + 2 || line[0] != '{' ||
	    line[len - 1] != '}' || line[len - 2] != '"')
		return -EBADMSG;
	const char *tail = line + len - WD_CRC_TAIL_LEN;
	if (memcmp(tail, WD_CRC_TAIL, sizeof(WD_CRC_TAIL) - 1))
		return -EBADMSG;
	uint32_t want = 0;
	for (int i = 0; i < 8; i++) {
		int v = hexval(tail[sizeof(WD_CRC_TAIL) - 1 + i]);
		if (v < 0)
			return -EBADMSG;
		want = want << 4 | (uint32_t)v;
	}
	if (wd_crc32c(0, line, len - WD_CRC_TAIL_LEN) != want)
		return -EBADMSG;
	if (memchr(line, '\n', len))
		return -EBADMSG;
	if (rec && wd_trace_parse_line(line, len, rec) < 0)
		return -EBADMSG;
	if (hash_hex)
		wd_sha256_hex(line, len, hash_hex);
	return 0;
}

size_t wd_trace_scan(const char *buf, size_t len, const char *prev_hex,
		     int (*cb)(void *ctx, const char *line, size_t len,
			       uint64_t off, json_t *rec),
		     void *ctx, bool *chain_ok)
{
	char prev[65], h[65];
	size_t off = 0;
	if (chain_ok)
		*chain_ok = true;
	if (prev_hex)
		memcpy(prev, prev_hex, 65);
	while (off < len) {
		const char *nl = memchr(buf + off, '\n', len - off);
		if (!nl)
			break; /* torn: no newline */
		size_t ll = nl - (buf + off);
		json_t *rec = NULL;
		/* the line's hash only matters for the chain */
		if (wd_trace_check_line(buf + off, ll, prev_hex ? h : NULL,
					&rec) < 0)
			break;
		const char *p = json_string_value(json_object_get(rec, "prev"));
		if (prev_hex &&
		    (strncmp(p, "sha256:", 7) || strcmp(p + 7, prev))) {
			if (chain_ok)
				*chain_ok = false;
			json_decref(rec);
			break;
		}
		int r = cb ? cb(ctx, buf + off, ll, off, rec) : 0;
		json_decref(rec);
		if (r < 0)
			break;
		if (prev_hex)
			memcpy(prev, h, 65);
		off += ll + 1;
	}
	return off;
}

static size_t scan_skip(const char *buf, size_t len,
			int (*cb)(void *ctx, const char *line, size_t len,
				  uint64_t off, json_t *rec),
			void *ctx, size_t *bad_lines, bool parse)
{
	size_t off = 0, bad = 0;
	while (off < len) {
		const char *nl = memchr(buf + off, '\n', len - off);
		if (!nl)
			break; /* a partial line: not a record (yet) */
		size_t ll = nl - (buf + off);
		json_t *rec = NULL;
		if (wd_trace_check_line(buf + off, ll, NULL,
					parse ? &rec : NULL) < 0) {
			bad++;
			off += ll + 1;
			continue;
		}
		int r = cb ? cb(ctx, buf + off, ll, off, rec) : 0;
		json_decref(rec);
		if (r < 0)
			break;
		off += ll + 1;
	}
	if (bad_lines)
		*bad_lines = bad;
	return off;
}

size_t wd_trace_scan_skip(const char *buf, size_t len,
			  int (*cb)(void *ctx, const char *line, size_t len,
				    uint64_t off, json_t *rec),
			  void *ctx, size_t *bad_lines)
{
	return scan_skip(buf, len, cb, ctx, bad_lines, true);
}

size_t wd_trace_scan_frames(const char *buf, size_t len,
			    int (*cb)(void *ctx, const char *line, size_t len,
				      uint64_t off, json_t *rec),
			    void *ctx)
{
	return scan_skip(buf, len, cb, ctx, NULL, false);
}
