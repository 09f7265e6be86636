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
 * failure (NULL, CURLE_FAILED_INIT) and the reason is logged once
 * (cli/lazy.c). */
#include "common/lazy.h"

/* these are the definitions: curl.h's type-checking macros would rename them */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <stdarg.h>

enum {
	GLOBAL_INIT,
	EASY_INIT,
	EASY_CLEANUP,
	EASY_RESET,
	EASY_PERFORM,
	EASY_SETOPT,
	EASY_GETINFO,
	EASY_STRERROR,
	SHARE_INIT,
	SHARE_CLEANUP,
	SHARE_SETOPT,
	SLIST_APPEND,
	SLIST_FREE_ALL,
	N_SYM
};
static const char *const names[N_SYM] = {
    "curl_global_init",	   "curl_easy_init",	 "curl_easy_cleanup",
    "curl_easy_reset",	   "curl_easy_perform",	 "curl_easy_setopt",
    "curl_easy_getinfo",   "curl_easy_strerror", "curl_share_init",
    "curl_share_cleanup",  "curl_share_setopt",	 "curl_slist_append",
    "curl_slist_free_all",
};
WD_LAZY_LIBRARY(wd_lazy_open, "libcurl.so.4");

CURLcode curl_global_init(long flags)
{
	return ready() ? F(CURLcode(*)(long), GLOBAL_INIT)(flags)
		       : CURLE_FAILED_INIT;
}

CURL *curl_easy_init(void)
{
	return ready() ? F(CURL * (*)(void), EASY_INIT)() : NULL;
}

/* the handle-taking calls below can only see handles libcurl made, so
 * libcurl is loaded when they run; the check keeps a NULL call safe */
void curl_easy_cleanup(CURL *c)
{
	if (ready())
		F(void (*)(CURL *), EASY_CLEANUP)(c);
}

void curl_easy_reset(CURL *c)
{
	if (ready())
		F(void (*)(CURL *), EASY_RESET)(c);
}

CURLcode curl_easy_perform(CURL *c)
{
	return ready() ? F(CURLcode(*)(CURL *), EASY_PERFORM)(c)
		       : CURLE_FAILED_INIT;
}

/* The option's number says the type of its one argument (curl.h:
 * CURLOPTTYPE_LONG 0, OBJECTPOINT/STRINGPOINT/SLISTPOINT/CBPOINT 10000,
 * FUNCTIONPOINT 20000, OFF_T 30000, BLOB 40000), read as libcurl's own
 * curl_easy_setopt reads it and passed on as that type. */
CURLcode curl_easy_setopt(CURL *c, CURLoption opt, ...)
{
	if (!ready())
		return CURLE_FAILED_INIT;
	CURLcode (*setopt)(CURL *, CURLoption, ...) =
	    F(CURLcode(*)(CURL *, CURLoption, ...), EASY_SETOPT);
	va_list ap;
	CURLcode rc;
	va_start(ap, opt);
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		rc = setopt(c, opt, va_arg(ap, long));
	else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
		rc = setopt(c, opt, va_arg(ap, void *));
	else if (opt < CURLOPTTYPE_OFF_T)
		rc = setopt(c, opt, va_arg(ap, void (*)(void)));
	else if (opt < CURLOPTTYPE_BLOB)
		rc = setopt(c, opt, va_arg(ap, curl_off_t));
	else
		rc = setopt(c, opt, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

/* every CURLINFO takes a pointer to where the answer goes */
CURLcode curl_easy_getinfo(CURL *c, CURLINFO info, ...)
{
	if (!ready())
		return CURLE_FAILED_INIT;
	va_list ap;
	va_start(ap, info);
	void *out = va_arg(ap, void *);
	va_end(ap);
	return F(CURLcode(*)(CURL *, CURLINFO, ...), EASY_GETINFO)(c, info,
								   out);
}

const char *curl_easy_strerror(CURLcode rc)
{
	return ready() ? F(const char *(*)(CURLcode), EASY_STRERROR)(rc)
		       : "libcurl not loaded";
}

CURLSH *curl_share_init(void)
{
	return ready() ? F(CURLSH * (*)(void), SHARE_INIT)() : NULL;
}

CURLSHcode curl_share_cleanup(CURLSH *sh)
{
	return ready() ? F(CURLSHcode(*)(CURLSH *), SHARE_CLEANUP)(sh)
		       : CURLSHE_NOT_BUILT_IN;
}

/* CURLSHOPT_SHARE/UNSHARE take an int (curl_lock_data), LOCKFUNC and
 * UNLOCKFUNC a function, USERDATA a pointer (libcurl's share.c) */
CURLSHcode curl_share_setopt(CURLSH *sh, CURLSHoption opt, ...)
{
	if (!ready())
		return CURLSHE_NOT_BUILT_IN;
	CURLSHcode (*shopt)(CURLSH *, CURLSHoption, ...) =
	    F(CURLSHcode(*)(CURLSH *, CURLSHoption, ...), SHARE_SETOPT);
	va_list ap;
	CURLSHcode rc;
	va_start(ap, opt);
	switch (opt) {
	case CURLSHOPT_SHARE:
	case CURLSHOPT_UNSHARE:
		rc = shopt(sh, opt, va_arg(ap, int));
		break;
	case CURLSHOPT_LOCKFUNC:
	case CURLSHOPT_UNLOCKFUNC:
		rc = shopt(sh, opt, va_arg(ap, void (*)(void)));
		break;
	case CURLSHOPT_USERDATA:
		rc = shopt(sh, opt, va_arg(ap, void *));
		break;
	default:
		rc = CURLSHE_BAD_OPTION;
	}
	va_end(ap);
	return rc;
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
	return ready() ? F(struct curl_slist *
			       (*)(struct curl_slist *, const char *),
			   SLIST_APPEND)(l, s)
		       : NULL;
}

void curl_slist_free_all(struct curl_slist *l)
{
	if (ready())
		F(void (*)(struct curl_slist *), SLIST_FREE_ALL)(l);
}
