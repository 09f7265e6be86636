#include "broker/schema.h"

#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <string.h>

#include "policy/schema_regex.h"
#include "policy/schema_rules.h"

#define MAX_DEPTH 64

static const char *type_of(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

static bool type_matches(const char *t, const json_t *v)
{
	if (!strcmp(t, "number"))
		return json_is_number(v);
	if (!strcmp(t, "integer")) {
		if (json_is_integer(v))
			return true;
		/* 3.0 is an integer in JSON Schema */
		if (json_is_real(v)) {
			double d = json_real_value(v);
			return isfinite(d) && d == floor(d);
		}
		return false;
	}
	return !strcmp(t, type_of(v));
}

/* Number of UTF-8 code points (JSON Schema lengths count characters). */
static size_t utf8_len(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			c++;
	return c;
}

static int num_kw(const json_t *schema, const char *kw, double *out,
		  struct wd_err *err, const char *path)
{
	json_t *v = json_object_get(schema, kw);
	if (!v)
		return 0;
	if (!json_is_number(v))
		return wd_err_set(err, -EINVAL,
				  "%s: schema '%s' is not a number", path, kw);
	*out = json_number_value(v);
	return 1;
}

static int validate(const json_t *schema, const json_t *inst, char *path,
		    size_t pathcap, int depth, struct wd_err *err);

static int check_type(const json_t *schema, const json_t *inst,
		      const char *path, struct wd_err *err)
{
	json_t *t = json_object_get(schema, "type");
	if (!t)
		return 0;
	if (json_is_string(t)) {
		if (!type_matches(json_string_value(t), inst))
			return wd_err_set(err, -EINVAL,
					  "%s: expected %s, got %s", path,
					  json_string_value(t), type_of(inst));
		return 0;
	}
	if (json_is_array(t)) {
		size_t i;
		json_t *e;
		json_array_foreach(t, i, e)
		{
			if (json_is_string(e) &&
			    type_matches(json_string_value(e), inst))
				return 0;
		}
		char *want = json_dumps(t, JSON_COMPACT);
		int rc =
		    wd_err_set(err, -EINVAL, "%s: expected one of %s, got %s",
			       path, want ? want : "?", type_of(inst));
		free(want);
		return rc;
	}
	return wd_err_set(err, -EINVAL, "%s: schema 'type' is malformed", path);
}

static int check_enum(const json_t *schema, const json_t *inst,
		      const char *path, struct wd_err *err)
{
	json_t *en = json_object_get(schema, "enum");
	if (!en)
		return 0;
	if (!json_is_array(en))
		return wd_err_set(err, -EINVAL,
				  "%s: schema 'enum' is not an array", path);
	size_t i;
	json_t *e;
	json_array_foreach(en, i, e)
	{
		if (json_equal(e, (json_t *)inst))
			return 0;
		/* 1 and 1.0 are the same number */
		if (json_is_number(e) && json_is_number(inst) &&
		    json_number_value(e) == json_number_value(inst))
			return 0;
	}
	char *want = json_dumps(en, JSON_COMPACT);
	int rc = wd_err_set(err, -EINVAL, "%s: value must be one of %s", path,
			    want ? want : "?");
	free(want);
	return rc;
}

static int check_number(const json_t *schema, const json_t *inst,
			const char *path, struct wd_err *err)
{
	if (!json_is_number(inst))
		return 0;
	double v = json_number_value(inst), lim = 0;
	int r;
	if ((r = num_kw(schema, "minimum", &lim, err, path)) < 0)
		return r;
	if (r && v < lim)
		return wd_err_set(err, -EINVAL,
				  "%s: the number is less than minimum %g",
				  path, lim);
	if ((r = num_kw(schema, "maximum", &lim, err, path)) < 0)
		return r;
	if (r && v > lim)
		return wd_err_set(err, -EINVAL,
				  "%s: the number is greater than maximum %g",
				  path, lim);
	if ((r = num_kw(schema, "exclusiveMinimum", &lim, err, path)) < 0)
		return r;
	if (r && v <= lim)
		return wd_err_set(err, -EINVAL,
				  "%s: the number must be greater than %g",
				  path, lim);
	if ((r = num_kw(schema, "exclusiveMaximum", &lim, err, path)) < 0)
		return r;
	if (r && v >= lim)
		return wd_err_set(err, -EINVAL,
				  "%s: the number must be less than %g", path,
				  lim);
	return 0;
}

static int check_string(const json_t *schema, const json_t *inst,
			const char *path, struct wd_err *err)
{
	if (!json_is_string(inst))
		return 0;
	size_t n = utf8_len(json_string_value(inst), json_string_length(inst));
	double lim = 0;
	int r;
	if ((r = num_kw(schema, "minLength", &lim, err, path)) < 0)
		return r;
	if (r && (double)n < lim)
		return wd_err_set(err, -EINVAL,
				  "%s: string shorter than minLength %g", path,
				  lim);
	if ((r = num_kw(schema, "maxLength", &lim, err, path)) < 0)
		return r;
	if (r && (double)n > lim)
		return wd_err_set(err, -EINVAL,
				  "%s: string of %zu characters is longer than "
				  "maxLength %g",
				  path, n, lim);
	json_t *pat = json_object_get(schema, "pattern");
	if (pat) {
		if (!json_is_string(pat))
			return wd_err_set(
			    err, -EINVAL,
			    "%s: schema 'pattern' is not a string", path);
		regex_t re;
		struct wd_err rerr = {0};
		if (wd_regex_compile(json_string_value(pat), &re, &rerr))
			return wd_err_set(err, -EINVAL, "%s: schema %s", path,
					  rerr.msg);
		/* an embedded NUL would end the match early: refuse it */
		bool ok = strlen(json_string_value(inst)) ==
			      json_string_length(inst) &&
			  wd_regex_match(&re, json_string_value(inst));
		regfree(&re);
		if (!ok)
			return wd_err_set(
			    err, -EINVAL,
			    "%s: string does not match pattern %s", path,
			    json_string_value(pat));
	}
	return 0;
}

/* Append a path element; truncation only shortens messages. */
static size_t path_push(char *path, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static size_t path_push(char *path, size_t cap, const char *fmt, ...)
{
	size_t old = strlen(path);
	va_list ap;
	va_start(ap, fmt);
	if (old < cap)
		vsnprintf(path + old, cap - old, fmt, ap);
	va_end(ap);
	return old;
}

static int check_array(const json_t *schema, const json_t *inst, char *path,
		       size_t cap, int depth, struct wd_err *err)
{
	if (!json_is_array(inst))
		return 0;
	size_t n = json_array_size(inst);
	double lim = 0;
	int r;
	if ((r = num_kw(schema, "minItems", &lim, err, path)) < 0)
		return r;
	if (r && (double)n < lim)
		return wd_err_set(err, -EINVAL,
				  "%s: expected at least %g items, got %zu",
				  path, lim, n);
	if ((r = num_kw(schema, "maxItems", &lim, err, path)) < 0)
		return r;
	if (r && (double)n > lim)
		return wd_err_set(err, -EINVAL,
				  "%s: expected at most %g items, got %zu",
				  path, lim, n);
	json_t *items = json_object_get(schema, "items");
	if (!items)
		return 0;
	if (!json_is_object(items))
		return wd_err_set(err, -EINVAL,
				  "%s: schema 'items' is not an object", path);
	size_t i;
	json_t *e;
	json_array_foreach(inst, i, e)
	{
		size_t old = path_push(path, cap, "[%zu]", i);
		r = validate(items, e, path, cap, depth + 1, err);
		path[old] = 0;
		if (r)
			return r;
	}
	return 0;
}

static int check_object(const json_t *schema, const json_t *inst, char *path,
			size_t cap, int depth, struct wd_err *err)
{
	if (!json_is_object(inst))
		return 0;
	json_t *req = json_object_get(schema, "required");
	if (req) {
		if (!json_is_array(req))
			return wd_err_set(
			    err, -EINVAL,
			    "%s: schema 'required' is not an array", path);
		size_t i;
		json_t *k;
		json_array_foreach(req, i, k)
		{
			if (!json_is_string(k))
				return wd_err_set(
				    err, -EINVAL,
				    "%s: schema 'required' holds a "
				    "non-string",
				    path);
			if (!json_object_get(inst, json_string_value(k)))
				return wd_err_set(err, -EINVAL,
						  "%s: missing required "
						  "property '%s'",
						  path, json_string_value(k));
		}
	}
	json_t *props = json_object_get(schema, "properties");
	if (props && !json_is_object(props))
		return wd_err_set(err, -EINVAL,
				  "%s: schema 'properties' is not an object",
				  path);
	json_t *addl = json_object_get(schema, "additionalProperties");
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)inst, key, val)
	{
		json_t *ps = props ? json_object_get(props, key) : NULL;
		const json_t *sub = ps;
		if (!sub && addl) {
			if (json_is_false(addl))
				return wd_err_set(err, -EINVAL,
						  "%s: unexpected property "
						  "'%s' (allowed: %s)",
						  path, key,
						  props ? "see properties"
							: "none");
			if (json_is_object(addl))
				sub = addl;
		}
		if (!sub)
			continue;
		size_t old = path_push(path, cap, ".%s", key);
		int r = validate(sub, val, path, cap, depth + 1, err);
		path[old] = 0;
		if (r)
			return r;
	}
	return 0;
}

static int validate(const json_t *schema, const json_t *inst, char *path,
		    size_t cap, int depth, struct wd_err *err)
{
	if (depth > MAX_DEPTH)
		return wd_err_set(err, -EINVAL, "%s: nested too deeply", path);
	if (json_is_true(schema))
		return 0;
	if (json_is_false(schema))
		return wd_err_set(err, -EINVAL, "%s: no value allowed here",
				  path);
	if (!json_is_object(schema))
		return wd_err_set(err, -EINVAL, "%s: schema is not an object",
				  path);
	/* a keyword the validator does not implement is refused, never
	 * skipped: policy check refuses it at load (wd_schema_check), this
	 * keeps a schema that bypassed the loader from passing unchecked */
	const char *kw;
	json_t *kv;
	json_object_foreach((json_t *)schema, kw, kv)
	{
		const struct wd_schema_kw *k = wd_schema_kw_find(kw);
		if (!k)
			return wd_err_set(err, -EINVAL,
					  "%s: schema keyword '%s' is not "
					  "supported",
					  path, kw);
		if (k->kind == WD_KW_TYPE && json_is_string(kv) &&
		    !wd_schema_type_known(json_string_value(kv)))
			return wd_err_set(err, -EINVAL,
					  "%s: schema type '%s' is unknown",
					  path, json_string_value(kv));
	}
	int r;
	if ((r = check_type(schema, inst, path, err)) ||
	    (r = check_enum(schema, inst, path, err)) ||
	    (r = check_number(schema, inst, path, err)) ||
	    (r = check_string(schema, inst, path, err)) ||
	    (r = check_array(schema, inst, path, cap, depth, err)) ||
	    (r = check_object(schema, inst, path, cap, depth, err)))
		return r;
	return 0;
}

int wd_schema_validate(const json_t *schema, const json_t *inst,
		       struct wd_err *err)
{
	char path[512] = "$";
	if (!schema || !inst)
		return wd_err_set(err, -EINVAL, "$: missing schema or value");
	return validate(schema, inst, path, sizeof(path), 0, err);
}
