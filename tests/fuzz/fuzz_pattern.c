/* libFuzzer target: args_schema `pattern` (ECMA-262) translated to a POSIX
 * ERE (policy/schema_regex.c). Input: a pattern, a NUL byte, a subject.
 * A pattern the translator accepts must compile (a bracket expression or
 * quantifier emitted wrong would fail regcomp, or worse compile to another
 * language), and matching must terminate without faults. */
#include "policy/schema_regex.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	const char *nul = memchr(data, 0, size);
	size_t plen = nul ? (size_t)(nul - (const char *)data) : size;
	/* patterns and subjects reach the translator as JSON strings:
	 * valid UTF-8, no NUL */
	json_t *p = json_stringn((const char *)data, plen);
	json_t *s =
	    nul ? json_stringn(nul + 1, size - plen - 1) : json_string("");
	if (!p || !s || strlen(json_string_value(s)) != json_string_length(s)) {
		json_decref(p);
		json_decref(s);
		return 0;
	}
	struct wd_buf b = {0};
	struct wd_err e = {0};
	int rc = wd_regex_translate(json_string_value(p), &b, &e);
	if (rc && !e.msg[0])
		abort(); /* refused without saying why */
	wd_buf_free(&b);
	if (!rc) {
		regex_t re;
		if (wd_regex_compile(json_string_value(p), &re, &e))
			abort(); /* translated to something POSIX refuses */
		wd_regex_match(&re, json_string_value(s));
		regfree(&re);
	}
	json_decref(p);
	json_decref(s);
	return 0;
}
