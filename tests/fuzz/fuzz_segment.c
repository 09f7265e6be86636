/* Fuzz the segment reader: framing check, chain walk, and the redaction
 * scanner, on arbitrary bytes (a crash or an attacker may leave anything in
 * a segment file). */
#include "trace/trace.h"

#include <string.h>

static int cb(void *ctx, const char *line, size_t len, uint64_t off,
	      json_t *rec)
{
	size_t *n = ctx;
	/* what the reader hands on must be a framed JSON object */
	if (!json_is_object(rec) || !len || line[len - 1] != '}')
		__builtin_trap();
	(*n)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	size_t n = 0;
	bool chain;
	size_t good = wd_trace_scan(buf, size, NULL, cb, &n, NULL);
	size_t n_plain = n;
	if (good > size)
		__builtin_trap();
	static const char zero[65] =
	    "0000000000000000000000000000000000000000000000000000000000000000";
	size_t good2 = wd_trace_scan(buf, size, zero, cb, &n, &chain);
	if (good2 > good)
		__builtin_trap(); /* chain checks can only stop earlier */
	/* past damage: sees at least what the stopping walk saw */
	size_t bad = 0;
	n = 0;
	size_t end = wd_trace_scan_skip(buf, size, cb, &n, &bad);
	if (end > size || end < good || n < n_plain)
		__builtin_trap();
	/* every line on its own */
	size_t off = 0;
	while (off < size) {
		const char *nl = memchr(buf + off, '\n', size - off);
		size_t ll = nl ? (size_t)(nl - (buf + off)) : size - off;
		char h[65];
		json_t *rec = NULL;
		if (wd_trace_check_line(buf + off, ll, h, &rec) == 0 &&
		    (!rec || strlen(h) != 64))
			__builtin_trap();
		json_decref(rec);
		off += ll + 1;
	}
	size_t rl;
	char *r = wd_trace_redact_text(NULL, buf, size, &rl);
	if (r) {
		/* redaction is idempotent */
		size_t rl2;
		char *again = wd_trace_redact_text(NULL, r, rl, &rl2);
		if (again && (rl2 != rl || memcmp(again, r, rl)))
			__builtin_trap();
		free(again);
		free(r);
	}
	return 0;
}
