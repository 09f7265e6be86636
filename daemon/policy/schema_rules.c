/* args_schema keywords (see schema_rules.h) and the load-time check. */
#include "policy/schema_rules.h"

#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "policy/schema_regex.h"
#include "policy/ywalk.h"

#define MAX_DEPTH 64

static const struct wd_schema_kw keywords[] = {
    {"type", WD_KW_TYPE},
    {"enum", WD_KW_ENUM},
    {"minimum", WD_KW_NUMBER},
    {"maximum", WD_KW_NUMBER},
    {"exclusiveMinimum", WD_KW_NUMBER},
    {"exclusiveMaximum", WD_KW_NUMBER},
    {"minLength", WD_KW_COUNT},
    {"maxLength", WD_KW_COUNT},
    {"minItems", WD_KW_COUNT},
    {"maxItems", WD_KW_COUNT},
    {"pattern", WD_KW_PATTERN},
    {"required", WD_KW_REQUIRED},
    {"properties", WD_KW_PROPERTIES},
    {"additionalProperties", WD_KW_ADDITIONAL},
    {"items", WD_KW_ITEMS},
    {"title", WD_KW_TEXT},
    {"description", WD_KW_TEXT},
    {"$comment", WD_KW_TEXT},
    {"default", WD_KW_ANY},
    {"examples", WD_KW_EXAMPLES},
    {WD_SCHEMA_ALLOW_DASH, WD_KW_DASH},
};

static const char *const types[] = {"string", "number", "integer", "boolean",
				    "object", "array",	"null"};

const struct wd_schema_kw *wd_schema_kw_find(const char *name)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(keywords); i++)
		if (!strcmp(keywords[i].name, name))
			return &keywords[i];
	return NULL;
}

bool wd_schema_type_known(const char *t)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(types); i++)
		if (!strcmp(types[i], t))
			return true;
	return false;
}

static const char *closest(const char *w, const char *const *words, size_t n,
			   size_t stride)
{
	const char *best = NULL;
	int bd = 3;
	for (size_t i = 0; i < n; i++) {
		const char *c =
		    *(const char *const *)((const char *)words + i * stride);
		int d = strcasecmp(w, c) ? wd_y_edit_distance(w, c) : 0;
		if (d < bd)
			bd = d, best = c;
	}
	return best;
}

struct chk {
	wd_schema_report fn;
	void *arg;
	bool argv;
	const char *path[MAX_DEPTH * 2 + 2];
	char idx[MAX_DEPTH * 2 + 2][12];
	int depth;
	int n;
};

static void report(struct chk *c, bool at_key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(struct chk *c, bool at_key, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->n++;
	c->fn(c->arg, c->path, c->depth, at_key, msg);
}

static bool push(struct chk *c, const char *k)
{
	if (c->depth >= (int)WD_ARRAY_SIZE(c->path)) {
		report(c, false, "args_schema nested too deeply");
		return false;
	}
	c->path[c->depth++] = k;
	return true;
}

static bool push_idx(struct chk *c, size_t i)
{
	if (c->depth >= (int)WD_ARRAY_SIZE(c->path)) {
		report(c, false, "args_schema nested too deeply");
		return false;
	}
	snprintf(c->idx[c->depth], sizeof(c->idx[0]), "%zu", i);
	c->path[c->depth] = c->idx[c->depth];
	c->depth++;
	return true;
}

static void check(struct chk *c, const json_t *s, bool top_property);

static void check_type(struct chk *c, const json_t *v)
{
	if (json_is_string(v)) {
		const char *t = json_string_value(v);
		if (!wd_schema_type_known(t)) {
			const char *b = closest(t, types, WD_ARRAY_SIZE(types),
						sizeof(types[0]));
			report(c, false,
			       "args_schema: unknown type '%s'%s%s%s (one of "
			       "string, number, integer, boolean, object, "
			       "array, null)",
			       t, b ? " (did you mean '" : "", b ? b : "",
			       b ? "'?)" : "");
		}
		return;
	}
	if (!json_is_array(v) || !json_array_size(v)) {
		report(c, false,
		       "args_schema: 'type' must be a type name or a "
		       "non-empty list of them");
		return;
	}
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		if (!push_idx(c, i))
			return;
		if (!json_is_string(e))
			report(c, false, "args_schema: a type must be a name");
		else if (!wd_schema_type_known(json_string_value(e)))
			report(c, false, "args_schema: unknown type '%s'",
			       json_string_value(e));
		c->depth--;
	}
}

static void check_strings(struct chk *c, const json_t *v, const char *kw)
{
	if (!json_is_array(v)) {
		report(c, false, "args_schema: '%s' must be a list of strings",
		       kw);
		return;
	}
	size_t i, j;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		if (!push_idx(c, i))
			return;
		if (!json_is_string(e))
			report(c, false,
			       "args_schema: '%s' must be a list of strings",
			       kw);
		else
			for (j = 0; j < i; j++)
				if (json_equal(e, json_array_get(v, j)))
					report(c, false,
					       "args_schema: '%s' lists '%s' "
					       "twice",
					       kw, json_string_value(e));
		c->depth--;
	}
}

static void check_kw(struct chk *c, const struct wd_schema_kw *kw,
		     const json_t *v, bool top_property)
{
	const char *k = kw->name;
	switch (kw->kind) {
	case WD_KW_TYPE:
		check_type(c, v);
		break;
	case WD_KW_ENUM:
		if (!json_is_array(v) || !json_array_size(v))
			report(c, false,
			       "args_schema: 'enum' must be a non-empty list");
		break;
	case WD_KW_NUMBER:
		if (!json_is_number(v))
			report(c, false, "args_schema: '%s' must be a number",
			       k);
		break;
	case WD_KW_COUNT: {
		double d = json_is_number(v) ? json_number_value(v) : -1;
		if (d < 0 || d != floor(d) || d > 1e15)
			report(c, false,
			       "args_schema: '%s' must be a non-negative "
			       "integer",
			       k);
		break;
	}
	case WD_KW_PATTERN: {
		struct wd_err e = {0};
		regex_t re;
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			report(c, false,
			       "args_schema: 'pattern' must be a string "
			       "without NUL");
		else if (wd_regex_compile(json_string_value(v), &re, &e))
			report(c, false, "args_schema: %s", e.msg);
		else
			regfree(&re);
		break;
	}
	case WD_KW_REQUIRED:
		check_strings(c, v, k);
		break;
	case WD_KW_PROPERTIES: {
		if (!json_is_object(v)) {
			report(c, false,
			       "args_schema: 'properties' must be a mapping "
			       "of schemas");
			break;
		}
		const char *name;
		json_t *sub;
		bool top = c->depth == 1;
		json_object_foreach((json_t *)v, name, sub)
		{
			if (!push(c, name))
				return;
			check(c, sub, top);
			c->depth--;
		}
		break;
	}
	case WD_KW_ADDITIONAL:
		if (!json_is_boolean(v))
			check(c, v, false);
		break;
	case WD_KW_ITEMS:
		if (!json_is_object(v))
			report(c, false,
			       "args_schema: 'items' must be a schema mapping "
			       "(tuple forms are not supported)");
		else
			check(c, v, false);
		break;
	case WD_KW_TEXT:
		if (!json_is_string(v))
			report(c, false, "args_schema: '%s' must be a string",
			       k);
		break;
	case WD_KW_ANY:
		break;
	case WD_KW_EXAMPLES:
		if (!json_is_array(v))
			report(c, false,
			       "args_schema: 'examples' must be a "
			       "list");
		break;
	case WD_KW_DASH:
		if (!json_is_boolean(v))
			report(c, false,
			       "args_schema: '%s' must be true or "
			       "false",
			       k);
		else if (!top_property || !c->argv)
			report(c, false,
			       "args_schema: '%s' applies only to a property "
			       "of an input: argv tool's top-level "
			       "'properties'",
			       k);
		break;
	}
}

static void check(struct chk *c, const json_t *s, bool top_property)
{
	if (json_is_boolean(s))
		return;
	if (!json_is_object(s)) {
		report(c, false,
		       "args_schema: a schema must be a mapping (or true / "
		       "false)");
		return;
	}
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v)
	{
		if (!push(c, k))
			return;
		const struct wd_schema_kw *kw = wd_schema_kw_find(k);
		if (kw) {
			check_kw(c, kw, v, top_property);
		} else {
			const char *b = closest(k, &keywords[0].name,
						WD_ARRAY_SIZE(keywords),
						sizeof(keywords[0]));
			report(c, true,
			       "args_schema: keyword '%s' is not supported "
			       "by warden's validator%s%s%s (supported: type, "
			       "enum, required, properties, "
			       "additionalProperties, items, minimum, maximum, "
			       "exclusiveMinimum, exclusiveMaximum, minLength, "
			       "maxLength, pattern, minItems, maxItems; "
			       "annotations title, description, $comment, "
			       "default, examples; " WD_SCHEMA_ALLOW_DASH ")",
			       k, b ? " (did you mean '" : "", b ? b : "",
			       b ? "'?)" : "");
		}
		c->depth--;
	}
}

int wd_schema_check(const json_t *schema, bool argv, wd_schema_report fn,
		    void *arg)
{
	struct chk c = {.fn = fn, .arg = arg, .argv = argv};
	check(&c, schema, false);
	return c.n;
}
