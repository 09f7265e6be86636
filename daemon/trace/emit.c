/* A fast compact JSON encoder for records: jansson's json_dumps escapes one
 * character at a time, which dominated the append path. Strings from jansson
 * are valid UTF-8, so only '"', '\\' and control characters need escapes.
 * Reals use %.17g (round-trips exactly, so a reindex sees the same value). */
#include "trace/trace_int.h"

#include <math.h>
#include <string.h>

static void emit_str(struct wd_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	wd_buf_append(b, "\"", 1);
	size_t from = 0;
	for (size_t i = 0; i < n; i++) {
		/* skip 8 clean bytes at a time */
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			uint64_t m = wd_ltbytes(w, 0x20) |
				     wd_zbytes(w ^ WD_REP8('"')) |
				     wd_zbytes(w ^ WD_REP8('\\'));
			if (m) {
				i += __builtin_ctzll(m) >> 3;
				break;
			}
			i += 8;
		}
		if (i >= n)
			break;
		unsigned char c = s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		wd_buf_append(b, s + from, i - from);
		char e[6] = {'\\', 0};
		size_t el = 2;
		switch (c) {
		case '"':
			e[1] = '"';
			break;
		case '\\':
			e[1] = '\\';
			break;
		case '\n':
			e[1] = 'n';
			break;
		case '\r':
			e[1] = 'r';
			break;
		case '\t':
			e[1] = 't';
			break;
		case '\b':
			e[1] = 'b';
			break;
		case '\f':
			e[1] = 'f';
			break;
		default:
			memcpy(e, "\\u00", 4);
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			el = 6;
		}
		wd_buf_append(b, e, el);
		from = i + 1;
	}
	wd_buf_append(b, s + from, n - from);
	wd_buf_append(b, "\"", 1);
}

int wd_trace_emit(struct wd_buf *b, json_t *v)
{
	char num[40];
	const char *k;
	json_t *x;
	size_t i;
	bool first = true;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		wd_buf_append(b, "{", 1);
		json_object_foreach(v, k, x)
		{
			if (!first)
				wd_buf_append(b, ",", 1);
			first = false;
			emit_str(b, k, strlen(k));
			wd_buf_append(b, ":", 1);
			if (wd_trace_emit(b, x) < 0)
				return -EINVAL;
		}
		wd_buf_append(b, "}", 1);
		return 0;
	case JSON_ARRAY:
		wd_buf_append(b, "[", 1);
		json_array_foreach(v, i, x)
		{
			if (i)
				wd_buf_append(b, ",", 1);
			if (wd_trace_emit(b, x) < 0)
				return -EINVAL;
		}
		wd_buf_append(b, "]", 1);
		return 0;
	case JSON_STRING:
		emit_str(b, json_string_value(v), json_string_length(v));
		return 0;
	case JSON_INTEGER: {
		long long iv = json_integer_value(v);
		unsigned long long u =
		    iv < 0 ? -(unsigned long long)iv : (unsigned long long)iv;
		char *e = num + sizeof(num), *p = e;
		do
			*--p = '0' + u % 10;
		while (u /= 10);
		if (iv < 0)
			*--p = '-';
		wd_buf_append(b, p, e - p);
		return 0;
	}
	case JSON_REAL: {
		double d = json_real_value(v);
		if (!isfinite(d))
			return -EINVAL;
		int n = snprintf(num, sizeof(num), "%.17g", d);
		if (!strpbrk(num, ".eE"))
			n += snprintf(num + n, sizeof(num) - n, ".0");
		wd_buf_append(b, num, n);
		return 0;
	}
	case JSON_TRUE:
		wd_buf_append(b, "true", 4);
		return 0;
	case JSON_FALSE:
		wd_buf_append(b, "false", 5);
		return 0;
	case JSON_NULL:
		wd_buf_append(b, "null", 4);
		return 0;
	}
	return -EINVAL;
}

int wd_trace_emit_member(struct wd_buf *b, const char *k, json_t *v)
{
	emit_str(b, k, strlen(k));
	wd_buf_append(b, ":", 1);
	return wd_trace_emit(b, v);
}
