/* input: argv (see argv.h for the rules and why). */
#include "broker/argv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/schema_rules.h"

struct vec {
	char **v;
	size_t n, cap;
};

static void vec_push(struct vec *a, char *s)
{
	if (a->n + 2 > a->cap) {
		a->cap = a->cap ? a->cap * 2 : 16;
		a->v = wd_realloc(a->v, a->cap * sizeof(char *));
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

static void vec_free(struct vec *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}

/* One scalar's text, or NULL with err set. */
static char *render(const char *name, const json_t *x, bool dash_ok,
		    struct wd_err *err)
{
	char *s = NULL;
	switch (json_typeof(x)) {
	case JSON_STRING:
		if (strlen(json_string_value(x)) != json_string_length(x)) {
			wd_err_set(err, -EINVAL,
				   "$.%s: a NUL character cannot be passed on "
				   "the command line",
				   name);
			return NULL;
		}
		s = wd_strdup(json_string_value(x));
		break;
	case JSON_INTEGER:
		s = wd_asprintf("%lld", (long long)json_integer_value(x));
		break;
	case JSON_REAL: {
		double d = json_real_value(x);
		s = wd_asprintf("%.15g", d);
		if (strtod(s, NULL) != d) {
			free(s);
			s = wd_asprintf("%.17g", d);
		}
		break;
	}
	case JSON_TRUE:
	case JSON_FALSE:
		s = wd_strdup(json_is_true(x) ? "true" : "false");
		break;
	default:
		wd_err_set(err, -EINVAL,
			   "$.%s: %s cannot be passed on the command line "
			   "(send a string, number, boolean or a list of "
			   "them)",
			   name,
			   json_is_null(x)    ? "null"
			   : json_is_array(x) ? "a list inside a list"
					      : "an object");
		return NULL;
	}
	if (s[0] == '-' && !dash_ok) {
		wd_err_set(err, -EINVAL,
			   "$.%s: a value that starts with '-' would be read "
			   "as an option; this tool does not allow it for "
			   "'%s'",
			   name, name);
		free(s);
		return NULL;
	}
	return s;
}

/* The value of property `name` appended to a: a list as one element per
 * item (only when `spread`). */
static int place(struct vec *a, const char *name, const json_t *val,
		 const json_t *prop, bool spread, struct wd_err *err)
{
	bool dash_ok =
	    json_is_true(json_object_get(prop, WD_SCHEMA_ALLOW_DASH));
	if (!json_is_array(val)) {
		char *s = render(name, val, dash_ok, err);
		if (!s)
			return -EINVAL;
		vec_push(a, s);
		return 0;
	}
	if (!spread)
		return wd_err_set(err, -EINVAL,
				  "$.%s: a list cannot be passed here", name);
	size_t i;
	json_t *x;
	json_array_foreach(val, i, x)
	{
		char *s = render(name, x, dash_ok, err);
		if (!s)
			return -EINVAL;
		vec_push(a, s);
	}
	return 0;
}

/* One template element: dropped when a property it names is absent. */
static int place_elem(struct vec *a, const char *elem, const json_t *props,
		      const json_t *args, struct wd_err *err)
{
	struct wd_argv_piece pc[WD_ARGV_MAX_PIECES];
	int n = 0;
	if (wd_argv_elem_parse(elem, pc, WD_ARGV_MAX_PIECES, &n, err))
		return -EINVAL; /* refused at load: not reached */
	if (n == 1 && pc[0].name) {
		cleanup_free char *name = wd_strndup(pc[0].name, pc[0].len);
		json_t *val = json_object_get(args, name);
		return val ? place(a, name, val, json_object_get(props, name),
				   true, err)
			   : 0;
	}
	struct wd_buf b = {0};
	for (int k = 0; k < n; k++) {
		if (!pc[k].name) {
			wd_buf_append(&b, pc[k].text, pc[k].len);
			continue;
		}
		cleanup_free char *name = wd_strndup(pc[k].name, pc[k].len);
		json_t *val = json_object_get(args, name);
		struct vec one = {0};
		if (!val) {
			wd_buf_free(&b);
			return 0;
		}
		if (place(&one, name, val, json_object_get(props, name), false,
			  err)) {
			wd_buf_free(&b);
			return -EINVAL;
		}
		wd_buf_append(&b, one.v[0], strlen(one.v[0]));
		vec_free(&one);
	}
	wd_buf_append(&b, "", 1);
	vec_push(a, b.data);
	return 0;
}

int wd_argv_build(const struct wd_manifest *m, const json_t *args, char ***out,
		  struct wd_err *err)
{
	*out = NULL;
	/* without exec the first value would choose the program */
	if (m->n_exec == 0)
		return wd_err_set(err, -EINVAL,
				  "tool '%s' has no exec: input: argv cannot "
				  "run it",
				  m->name);
	json_t *schema =
	    json_loads(m->args_schema ? m->args_schema : "{}", 0, NULL);
	json_t *props = json_object_get(schema, "properties");
	if (!json_is_object(props))
		props = NULL;
	struct vec a = {0};
	int rc = 0;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)args, k, v)
	{
		if (!props || !json_object_get(props, k)) {
			rc = wd_err_set(err, -EINVAL,
					"$: unknown property '%s': this tool "
					"takes only the properties of its "
					"schema",
					k);
			goto out;
		}
	}
	for (int i = 0; i < m->n_exec; i++)
		vec_push(&a, wd_strdup(m->exec[i]));
	if (m->argv_tmpl) {
		for (int i = 0; i < m->n_argv_tmpl && !rc; i++)
			rc = place_elem(&a, m->argv_tmpl[i], props, args, err);
	} else {
		vec_push(&a, wd_strdup("--"));
		json_object_foreach(props, k, v)
		{
			json_t *val = json_object_get(args, k);
			if (val && (rc = place(&a, k, val, v, true, err)))
				break;
		}
	}
out:
	json_decref(schema);
	if (rc) {
		vec_free(&a);
		return rc;
	}
	*out = a.v;
	return 0;
}
