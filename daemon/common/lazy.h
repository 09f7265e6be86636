/* Shared libraries loaded at their first call: the CLI's (cli/curl_lazy.c,
 * cli/nft_lazy.c, cli/crypto_lazy.c, cli/sqlite_lazy.c): what a one-shot
 * `warden exec` never calls is not bound at every start of `warden`
 * (issue 16); wardend's libpq (fleet/pq_lazy.c): a node without --fleet
 * needs no libpq installed. */
#pragma once

#include <pthread.h>
#include <stddef.h>

/* dlopen SONAME and dlsym each of N names into slots[i]; 0, or -1 with
 * the reason logged (once per library: callers run it under pthread_once) */
int wd_lazy_open(const char *soname, const char *const *names, void **slots,
		 size_t n);

/* wd_lazy_open, or the process ends as the dynamic loader would have
 * ended it at start had the library been linked (exit 127, the reason on
 * stderr); 0 when it returns: for libraries whose calls have no way to report
 * that they did nothing (a SHA-256 that leaves its digest unwritten) */
int wd_lazy_need(const char *soname, const char *const *names, void **slots,
		 size_t n);

/* One library's loader, in the file that forwards its calls: SYM[N_SYM]
 * filled from NAMES[N_SYM] at the first ready() of any thread. */
#define WD_LAZY_LIBRARY(open_fn, soname)                                       \
	static void *sym[N_SYM];                                               \
	static int loaded;                                                     \
	static pthread_once_t once = PTHREAD_ONCE_INIT;                        \
	static void load(void)                                                 \
	{                                                                      \
		loaded = open_fn(soname, names, sym, N_SYM) == 0;              \
	}                                                                      \
	static int ready(void)                                                 \
	{                                                                      \
		pthread_once(&once, load);                                     \
		return loaded;                                                 \
	}                                                                      \
	_Static_assert(sizeof(names) / sizeof(names[0]) == N_SYM, soname)

/* the loaded function of slot S, as type T */
#define F(T, S) ((T)sym[S])
