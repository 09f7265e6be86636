/* libcrypto for the CLI, loaded when a verb first asks for it.
 *
 * The CLI's SHA-256 (trace records, an HTML report's script hash) is
 * OpenSSL's; a one-shot `warden exec` never takes one, and libcrypto
 * bound at start costs ~0.5 ms of CPU in the dynamic loader on every
 * start of `warden` (an empty program linked with -lcrypto: 0.83 ms
 * against 0.32 ms, perf stat -r 100). Linked out as libsqlite3 is
 * (cli/sqlite_lazy.c); a libcrypto that cannot be loaded ends the
 * process at the first call: no digest is left unwritten and used. */
#include "common/lazy.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

enum { DIGEST, ENCODE_BLOCK, MD_SHA256, ONE_SHOT, INIT, UPDATE, FINAL, N_SYM };
static const char *const names[] = {
    "EVP_Digest",  "EVP_EncodeBlock", "EVP_sha256",   "SHA256",
    "SHA256_Init", "SHA256_Update",   "SHA256_Final",
};
WD_LAZY_LIBRARY(wd_lazy_need, "libcrypto.so.3");

/* ready() returns only once the library is loaded */
#define C(T, S) (ready(), F(T, S))

int EVP_Digest(const void *data, size_t n, unsigned char *md,
	       unsigned int *size, const EVP_MD *type, ENGINE *impl)
{
	return C(int (*)(const void *, size_t, unsigned char *, unsigned int *,
			 const EVP_MD *, ENGINE *),
		 DIGEST)(data, n, md, size, type, impl);
}

int EVP_EncodeBlock(unsigned char *t, const unsigned char *f, int n)
{
	return C(int (*)(unsigned char *, const unsigned char *, int),
		 ENCODE_BLOCK)(t, f, n);
}

const EVP_MD *EVP_sha256(void)
{
	return C(const EVP_MD *(*)(void), MD_SHA256)();
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
unsigned char *SHA256(const unsigned char *d, size_t n, unsigned char *md)
{
	return C(
	    unsigned char *(*)(const unsigned char *, size_t, unsigned char *),
	    ONE_SHOT)(d, n, md);
}

int SHA256_Init(SHA256_CTX *c)
{
	return C(int (*)(SHA256_CTX *), INIT)(c);
}

int SHA256_Update(SHA256_CTX *c, const void *data, size_t n)
{
	return C(int (*)(SHA256_CTX *, const void *, size_t), UPDATE)(c, data,
								      n);
}

int SHA256_Final(unsigned char *md, SHA256_CTX *c)
{
	return C(int (*)(unsigned char *, SHA256_CTX *), FINAL)(md, c);
}
#pragma GCC diagnostic pop
