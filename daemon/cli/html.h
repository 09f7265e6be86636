/* Self-contained HTML pages for `warden trace html` and `trace diff
 * --html`: escaping and the page frame (inline style, one inline script
 * admitted by its sha256 in a Content-Security-Policy that forbids every
 * request: default-src 'none'). */
#ifndef WD_CLI_HTML_H
#define WD_CLI_HTML_H

#include <stddef.h>
#include <stdio.h>

/* Text as HTML character data or a quoted attribute value: & < > " '
 * escaped, NUL and other C0 controls but \t \n \r dropped. */
void html_esc_n(FILE *f, const char *s, size_t n);
void html_esc(FILE *f, const char *s);
/* <!DOCTYPE html> ... <body>, with `script` (may be NULL) inline. */
void html_head(FILE *f, const char *title, const char *script);
void html_foot(FILE *f);

#endif
