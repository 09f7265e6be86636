/* A fast compact JSON encoder for records: jansson's json_dumps escapes one
 * character at a time, which dominated the append path. Strings from jansson
 * are valid UTF-8, so only '"', '\\' and control characters need escapes.
 * Reals use %.17g (round-trips exactly, so a reindex sees the same value). */
#include "trace/trace_int.h"

#include <math.h>
#include <string.h>

static void emit_str(struct wd_buf *b, const char *s, size_t n)
{
	wd_buf_end(b, wd_json_put_str(wd_buf_room(b, WD_JSON_STR_MAX(n)), s, n,
				      false));
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
		wd_buf_append(b, num, wd_json_put_real(num, d) - num);
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
