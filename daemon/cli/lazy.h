/* Shared libraries the CLI loads at their first call (cli/curl_lazy.c,
 * cli/nft_lazy.c): what a one-shot `warden exec` never calls is not bound
 * at every start of `warden` (issue 16). */
#pragma once

#include <stddef.h>

/* dlopen SONAME and dlsym each of N names into slots[i]; 0, or -1 with
 * the reason logged (once per library: callers run it under pthread_once) */
int wd_lazy_open(const char *soname, const char *const *names, void **slots,
		 size_t n);
