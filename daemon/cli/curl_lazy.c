/* libcurl for the CLI, loaded when a verb first asks for it.
 *
 * libcurl and what it links (GnuTLS, Kerberos, LDAP, SSH, nettle, ...:
 * 27 of the CLI's 40 shared objects, all bound at start) cost ~4.5 ms of
 * CPU in the dynamic loader on every start of `warden`, before main. Most
 * verbs talk to wardend through libcurl and pay it anyway; a one-shot
 * `warden exec` never does (issue 16: a whole `warden exec` against
 * bwrap). So the CLI is linked without -lcurl and these definitions of
 * the libcurl calls libwarden makes load libcurl.so.4 at the first call
 * and forward to it. wardend and the tests link libcurl directly.
 *
 * If libcurl cannot be loaded every call fails the way libcurl reports a
 * failure (NULL, CURLE_FAILED_INIT) and the reason is logged once. */
#include "common/log.h"

/* these are the definitions: curl.h's type-checking macros would rename them */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>

static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	void (*easy_reset)(CURL *);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	CURLSH *(*share_init)(void);
	CURLSHcode (*share_cleanup)(CURLSH *);
	CURLSHcode (*share_setopt)(CURLSH *, CURLSHoption, ...);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	int ok;
} lc;

static pthread_once_t lc_once = PTHREAD_ONCE_INIT;

#define LC_SYM(field, name)                                                    \
	do {                                                                   \
		*(void **)&lc.field = dlsym(h, name);                          \
		if (!lc.field) {                                               \
			wd_warn("libcurl: no symbol %s in libcurl.so.4",       \
				name);                                         \
			return;                                                \
		}                                                              \
	} while (0)

static void lc_load(void)
{
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		wd_warn("libcurl: cannot load libcurl.so.4: %s", dlerror());
		return;
	}
	LC_SYM(global_init, "curl_global_init");
	LC_SYM(easy_init, "curl_easy_init");
	LC_SYM(easy_cleanup, "curl_easy_cleanup");
	LC_SYM(easy_reset, "curl_easy_reset");
	LC_SYM(easy_perform, "curl_easy_perform");
	LC_SYM(easy_setopt, "curl_easy_setopt");
	LC_SYM(easy_getinfo, "curl_easy_getinfo");
	LC_SYM(easy_strerror, "curl_easy_strerror");
	LC_SYM(share_init, "curl_share_init");
	LC_SYM(share_cleanup, "curl_share_cleanup");
	LC_SYM(share_setopt, "curl_share_setopt");
	LC_SYM(slist_append, "curl_slist_append");
	LC_SYM(slist_free_all, "curl_slist_free_all");
	lc.ok = 1; /* the handle stays open for the process's life */
}

static int lc_ready(void)
{
	pthread_once(&lc_once, lc_load);
	return lc.ok;
}

CURLcode curl_global_init(long flags)
{
	return lc_ready() ? lc.global_init(flags) : CURLE_FAILED_INIT;
}

CURL *curl_easy_init(void)
{
	return lc_ready() ? lc.easy_init() : NULL;
}

/* the handle-taking calls below can only see handles libcurl made, so
 * libcurl is loaded when they run; the check keeps a NULL call safe */
void curl_easy_cleanup(CURL *c)
{
	if (lc_ready())
		lc.easy_cleanup(c);
}

void curl_easy_reset(CURL *c)
{
	if (lc_ready())
		lc.easy_reset(c);
}

CURLcode curl_easy_perform(CURL *c)
{
	return lc_ready() ? lc.easy_perform(c) : CURLE_FAILED_INIT;
}

/* The option's number says the type of its one argument (curl.h:
 * CURLOPTTYPE_LONG 0, OBJECTPOINT/STRINGPOINT/SLISTPOINT/CBPOINT 10000,
 * FUNCTIONPOINT 20000, OFF_T 30000, BLOB 40000), read as libcurl's own
 * curl_easy_setopt reads it and passed on as that type. */
CURLcode curl_easy_setopt(CURL *c, CURLoption opt, ...)
{
	if (!lc_ready())
		return CURLE_FAILED_INIT;
	va_list ap;
	CURLcode rc;
	va_start(ap, opt);
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		rc = lc.easy_setopt(c, opt, va_arg(ap, long));
	else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
		rc = lc.easy_setopt(c, opt, va_arg(ap, void *));
	else if (opt < CURLOPTTYPE_OFF_T)
		rc = lc.easy_setopt(c, opt, va_arg(ap, void (*)(void)));
	else if (opt < CURLOPTTYPE_BLOB)
		rc = lc.easy_setopt(c, opt, va_arg(ap, curl_off_t));
	else
		rc = lc.easy_setopt(c, opt, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

/* every CURLINFO takes a pointer to where the answer goes */
CURLcode curl_easy_getinfo(CURL *c, CURLINFO info, ...)
{
	if (!lc_ready())
		return CURLE_FAILED_INIT;
	va_list ap;
	va_start(ap, info);
	void *out = va_arg(ap, void *);
	va_end(ap);
	return lc.easy_getinfo(c, info, out);
}

const char *curl_easy_strerror(CURLcode rc)
{
	return lc_ready() ? lc.easy_strerror(rc) : "libcurl not loaded";
}

CURLSH *curl_share_init(void)
{
	return lc_ready() ? lc.share_init() : NULL;
}

CURLSHcode curl_share_cleanup(CURLSH *sh)
{
	return lc_ready() ? lc.share_cleanup(sh) : CURLSHE_NOT_BUILT_IN;
}

/* CURLSHOPT_SHARE/UNSHARE take an int (curl_lock_data), LOCKFUNC and
 * UNLOCKFUNC a function, USERDATA a pointer (libcurl's share.c) */
CURLSHcode curl_share_setopt(CURLSH *sh, CURLSHoption opt, ...)
{
	if (!lc_ready())
		return CURLSHE_NOT_BUILT_IN;
	va_list ap;
	CURLSHcode rc;
	va_start(ap, opt);
	switch (opt) {
	case CURLSHOPT_SHARE:
	case CURLSHOPT_UNSHARE:
		rc = lc.share_setopt(sh, opt, va_arg(ap, int));
		break;
	case CURLSHOPT_LOCKFUNC:
	case CURLSHOPT_UNLOCKFUNC:
		rc = lc.share_setopt(sh, opt, va_arg(ap, void (*)(void)));
		break;
	case CURLSHOPT_USERDATA:
		rc = lc.share_setopt(sh, opt, va_arg(ap, void *));
		break;
	default:
		rc = CURLSHE_BAD_OPTION;
	}
	va_end(ap);
	return rc;
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
	return lc_ready() ? lc.slist_append(l, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *l)
{
	if (lc_ready())
		lc.slist_free_all(l);
}
