/* args_schema `pattern`: JSON Schema's dialect is ECMA-262 (with the `u`
 * flag: patterns match code points), glibc has POSIX regcomp. A pattern is
 * translated to a POSIX ERE matched under C.UTF-8, and only constructs
 * whose meaning the translation keeps are accepted; anything else is an
 * error at load (a pattern warden would read differently from the schema's
 * author is a policy that says one thing and enforces another):
 *
 *   supported   literals; `.` (any code point but \n \r U+2028 U+2029);
 *               `^` `$` (input start/end, where they begin/end their
 *               alternative); `|`; `( )` `(?: )` `(?<name> )`;
 *               `* + ? {n} {n,} {n,m}` (n, m <= 1000; lazy forms `*?` etc.
 *               test the same strings); classes `[...]` `[^...]` with
 *               ranges; `\d \D \w \W \s \S` (ASCII digits/word, ECMA
 *               white space) outside classes, `\d \w \s` inside;
 *               escapes `\t \n \r \v \f \cX \xHH \uHHHH \u{H...}` and
 *               `\` before a syntax character ^ $ \ . * + ? ( ) [ ] { } | / -
 *   refused     lookaround `(?= (?! (?<= (?<!`, backreferences `\1 \k<n>`,
 *               `\b \B`, `\p{..} \P{..}`, an escape for NUL (`\0`, `\x00`,
 *               `\u{0}`: no argument holds one), `\D \S \W` inside a class,
 *               anything after a `$` on its path ("a$b", "(a$|b)c": ECMA's
 *               `$` is the end of the input, glibc lets "$[^c]" match a
 *               newline), anything before a `^` on its path ("x(^a)"),
 *               a quantifier on a group holding `^` or `$` (glibc matches
 *               "(a$){2}" where ECMA-262 does not), groups nested deeper
 *               than 64, empty classes `[]` `[^]`, a lone `{ } ]`, a
 *               quantifier with nothing to repeat, ranges of more than 512
 *               non-ASCII code points, any other escape, and so POSIX
 *               `[[:space:]]` (in ECMA-262 the class `[[:space:]` and a
 *               lone `]`).
 */
#ifndef WD_SCHEMA_REGEX_H
#define WD_SCHEMA_REGEX_H

#include <regex.h>
#include <stdbool.h>

#include "common/util.h"

/* The POSIX ERE for ECMA pattern `pat` (UTF-8) into out (NUL-terminated);
 * 0 or -EINVAL with the refused construct and its offset in err. */
int wd_regex_translate(const char *pat, struct wd_buf *out, struct wd_err *err);

/* Translate and regcomp (REG_EXTENDED | REG_NOSUB) under C.UTF-8: 0, or
 * -EINVAL with err set (the caller regfree()s only on success). */
int wd_regex_compile(const char *pat, regex_t *re, struct wd_err *err);

/* Does re match somewhere in s (valid UTF-8, no NUL)? Unanchored, as
 * JSON Schema's `pattern`. */
bool wd_regex_match(const regex_t *re, const char *s);

#endif
