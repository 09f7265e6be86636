/* args_schema and the `argv` template, checked once the whole manifest
 * mapping is read (the template needs the schema and `input`, wherever
 * they are in the file). Every problem is reported at the YAML node it
 * comes from: a schema problem is found on the JSON form and its path is
 * walked back down the YAML nodes. */
#include "policy/manifest.h"
#include "policy/manifest_int.h"
#include "policy/schema_rules.h"
#include "policy/ywalk.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int wd_argv_elem_parse(const char *elem, struct wd_argv_piece *pieces, int max,
		       int *n, struct wd_err *err)
{
	const char *p = elem;
	*n = 0;
	while (*p) {
		struct wd_argv_piece pc = {0};
		if ((p[0] == '{' && p[1] == '{') ||
		    (p[0] == '}' && p[1] == '}')) {
			pc.text = p;
			pc.len = 1;
			p += 2;
		} else if (*p == '{') {
			const char *e = p + 1;
			while (*e && *e != '{' && *e != '}')
				e++;
			if (*e != '}')
				return wd_err_set(err, -EINVAL,
						  "'%s': a '{' without its '}' "
						  "(write '{{' for a brace)",
						  elem);
			if (e == p + 1)
				return wd_err_set(err, -EINVAL,
						  "'%s': empty placeholder {}",
						  elem);
			pc.name = p + 1;
			pc.len = (size_t)(e - p - 1);
			p = e + 1;
		} else if (*p == '}') {
			return wd_err_set(err, -EINVAL,
					  "'%s': a '}' without its '{' (write "
					  "'}}' for a brace)",
					  elem);
		} else {
			pc.text = p;
			while (*p && *p != '{' && *p != '}')
				p++;
			pc.len = (size_t)(p - pc.text);
		}
		if (*n >= max)
			return wd_err_set(err, -EINVAL,
					  "'%s': more than %d pieces", elem,
					  max);
		pieces[(*n)++] = pc;
	}
	return 0;
}

int wd_manifest_f_argv(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct mctx *c = o;
	c->argv_node = v;
	return wd_y_strlist(w, v, "'argv'", &c->m->argv_tmpl,
			    &c->m->n_argv_tmpl, NULL, NULL);
}

/* The node at `path` under n (the key node itself when at_key); n when
 * the path cannot be followed. */
static yaml_node_t *node_at(struct wd_ywalk *w, yaml_node_t *n,
			    const char *const *path, int depth, bool at_key)
{
	yaml_node_t *cur = n;
	for (int i = 0; i < depth && cur; i++) {
		bool last = i == depth - 1;
		yaml_node_t *next = NULL;
		if (cur->type == YAML_MAPPING_NODE) {
			for (yaml_node_pair_t *p =
				 cur->data.mapping.pairs.start;
			     p < cur->data.mapping.pairs.top; p++) {
				yaml_node_t *k =
				    yaml_document_get_node(w->doc, p->key);
				const char *ks = wd_y_scalar(k);
				if (ks && !strcmp(ks, path[i])) {
					next = last && at_key
						   ? k
						   : yaml_document_get_node(
							 w->doc, p->value);
					break;
				}
			}
		} else if (cur->type == YAML_SEQUENCE_NODE) {
			char *e;
			unsigned long idx = strtoul(path[i], &e, 10);
			yaml_node_item_t *it = cur->data.sequence.items.start;
			size_t cnt =
			    (size_t)(cur->data.sequence.items.top - it);
			if (!*e && idx < cnt)
				next = yaml_document_get_node(w->doc, it[idx]);
		}
		cur = next;
	}
	return cur ? cur : n;
}

struct rep {
	struct wd_ywalk *w;
	yaml_node_t *root;
};

static void on_problem(void *arg, const char *const *path, int depth,
		       bool at_key, const char *msg)
{
	struct rep *r = arg;
	wd_y_err(r->w, node_at(r->w, r->root, path, depth, at_key), "%s", msg);
}

void wd_manifest_check_schema(struct wd_ywalk *w, struct mctx *c)
{
	if (!c->schema_node || !c->m->args_schema)
		return;
	json_t *j = json_loads(c->m->args_schema, 0, NULL);
	if (!j) {
		wd_y_err(w, c->schema_node, "'args_schema' is not JSON");
		return;
	}
	struct rep r = {w, c->schema_node};
	wd_schema_check(j, c->m->input == WD_INPUT_ARGV, on_problem, &r);
	json_decref(j);
}

static bool is_required(const json_t *schema, const char *name)
{
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(schema, "required"), i, e)
	{
		if (json_is_string(e) && !strcmp(json_string_value(e), name))
			return true;
	}
	return false;
}

static bool may_be_array(const json_t *prop)
{
	json_t *t = json_object_get(prop, "type");
	if (!t)
		return true;
	if (json_is_string(t))
		return !strcmp(json_string_value(t), "array");
	size_t i;
	json_t *e;
	json_array_foreach(t, i, e)
	{
		if (json_is_string(e) && !strcmp(json_string_value(e), "array"))
			return true;
	}
	return false;
}

static yaml_node_t *prop_key(struct wd_ywalk *w, struct mctx *c,
			     const char *name)
{
	const char *path[] = {"properties", name};
	return c->schema_node ? node_at(w, c->schema_node, path, 2, true)
			      : c->input_node;
}

/* Every placeholder names a property, every property is placed, an array
 * stands alone, and an optional property does not follow an option that
 * would take the next element as its value when the property is absent. */
static void check_template(struct wd_ywalk *w, struct mctx *c,
			   const json_t *schema, const json_t *props)
{
	struct wd_manifest *m = c->m;
	size_t nprops = props ? json_object_size(props) : 0;
	cleanup_free bool *placed = wd_calloc(nprops + 1, sizeof(bool));
	for (int i = 0; i < m->n_argv_tmpl; i++) {
		yaml_node_t *el = yaml_document_get_node(
		    w->doc, c->argv_node->data.sequence.items.start[i]);
		struct wd_argv_piece pc[WD_ARGV_MAX_PIECES];
		int n = 0;
		struct wd_err e = {0};
		if (wd_argv_elem_parse(m->argv_tmpl[i], pc, WD_ARGV_MAX_PIECES,
				       &n, &e)) {
			wd_y_err(w, el, "'argv': %s", e.msg);
			continue;
		}
		for (int k = 0; k < n; k++) {
			if (!pc[k].name)
				continue;
			cleanup_free char *name =
			    wd_strndup(pc[k].name, pc[k].len);
			json_t *p = props ? json_object_get(props, name) : NULL;
			if (!p) {
				wd_y_err(w, el,
					 "'argv': '{%s}' is not a property of "
					 "args_schema",
					 name);
				continue;
			}
			size_t idx = 0;
			const char *kk;
			json_t *vv;
			json_object_foreach((json_t *)props, kk, vv)
			{
				if (!strcmp(kk, name))
					break;
				idx++;
			}
			placed[idx] = true;
			if (n > 1 && may_be_array(p))
				wd_y_err(w, el,
					 "'argv': '{%s}' may be a list, which "
					 "is passed as one element per item: "
					 "it must be an element of its own "
					 "(or give the property a type)",
					 name);
			const char *prev = i ? m->argv_tmpl[i - 1] : NULL;
			if (n == 1 && prev && prev[0] == '-' &&
			    strcmp(prev, "--") && !strchr(prev, '{') &&
			    !is_required(schema, name))
				wd_y_err(w, el,
					 "'argv': optional '{%s}' follows "
					 "option '%s': when it is absent the "
					 "option would take the next element "
					 "as its value; write '%s={%s}' or "
					 "make '%s' required",
					 name, prev, prev, name, name);
		}
	}
	size_t idx = 0;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)props, k, v)
	{
		if (!placed[idx++])
			wd_y_err(w, prop_key(w, c, k),
				 "property '%s' is not placed by the 'argv' "
				 "template (the program would never see it)",
				 k);
	}
}

void wd_manifest_check_argv(struct wd_ywalk *w, struct mctx *c)
{
	struct wd_manifest *m = c->m;
	if (c->argv_node && m->input != WD_INPUT_ARGV) {
		wd_y_err(w, c->argv_node, "'argv' needs 'input: argv'");
		return;
	}
	if (m->input != WD_INPUT_ARGV)
		return;
	json_t *schema =
	    json_loads(m->args_schema ? m->args_schema : "{}", 0, NULL);
	json_t *props = json_object_get(schema, "properties");
	if (!json_is_object(props))
		props = NULL;
	if (c->argv_node) {
		check_template(w, c, schema, props);
	} else {
		/* by position after "--": an absent optional value before a
		 * present one would shift it into the wrong place */
		const char *opt = NULL, *k;
		json_t *v;
		json_object_foreach(props, k, v)
		{
			if (!is_required(schema, k))
				opt = opt ? opt : k;
			else if (opt)
				wd_y_err(w, prop_key(w, c, opt),
					 "input: argv without an 'argv' "
					 "template passes values by position: "
					 "optional property '%s' comes before "
					 "required '%s' (reorder them or add a "
					 "template)",
					 opt, k);
		}
	}
	json_decref(schema);
}
