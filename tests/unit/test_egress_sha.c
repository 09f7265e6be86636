/* The egress object's sha256 the Makefile wrote (egress.sha256.h) is the
 * hash of the bytes the skeleton embeds: the pin directory a one-shot
 * `warden exec` opens is named by it (enforce/egress_pin.c), so a build
 * whose constant drifted from its object would open another build's pins.
 * Hashing the embedded bytes here (not at run time) is the check; the
 * same for the BPF LSM object (enforce/lsm_pin.c). */
#include "t.h"

#include <openssl/evp.h>
#include <string.h>

#include "egress.sha256.h"
#include "egress.skel.h"
#include "lsm.sha256.h"
#include "lsm.skel.h"

int main(void)
{
	static const uint8_t built[32] = EGRESS_BPF_SHA256;
	size_t sz = 0;
	const void *b = egress_bpf__elf_bytes(&sz);
	uint8_t sha[32];
	unsigned int n = 0;
	T_OK(sz > 0 && EVP_Digest(b, sz, sha, &n, EVP_sha256(), NULL) &&
		 n == 32,
	     "egress_sha_hashed", "embedded object of %zu bytes", sz);
	T_OK(!memcmp(sha, built, 32), "egress_sha_matches_object",
	     "the Makefile's hash is not the embedded object's");
	/* a constant of zeros or one repeated byte would be no hash */
	int same = 1;
	for (int i = 1; i < 32; i++)
		same &= built[i] == built[0];
	T_OK(!same, "egress_sha_not_constant", "hash is one repeated byte");
	/* the LSM object's, for its pin directory (enforce/lsm_pin.c) */
	static const uint8_t lsm_built[32] = LSM_BPF_SHA256;
	b = lsm_bpf__elf_bytes(&sz);
	T_OK(sz > 0 && EVP_Digest(b, sz, sha, &n, EVP_sha256(), NULL) &&
		 n == 32 && !memcmp(sha, lsm_built, 32),
	     "lsm_sha_matches_object",
	     "the Makefile's hash is not the embedded LSM object's");
	return T_DONE();
}
