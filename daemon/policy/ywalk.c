#include "policy/ywalk.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* ---- diagnostics ----------------------------------------------------------
 */

static void diag_vadd(struct wd_diag *d, const char *file, int line, int col,
		      const char *fmt, va_list ap)
{
	if (!d)
		return;
	if (d->n >= WD_DIAG_MAX) {
		d->dropped++;
		return;
	}
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (!file)
		file = "<input>";
	d->msgs = wd_realloc(d->msgs, (d->n + 1) * sizeof(*d->msgs));
	d->items = wd_realloc(d->items, (d->n + 1) * sizeof(*d->items));
	if (line > 0)
		d->msgs[d->n] =
		    wd_asprintf("%s:%d:%d: %s", file, line, col, msg);
	else
		d->msgs[d->n] = wd_asprintf("%s: %s", file, msg);
	d->items[d->n] = (struct wd_diag_item){.file = wd_strdup(file),
					       .line = line,
					       .col = col,
					       .msg = wd_strdup(msg)};
	d->n++;
}

void wd_diag_add(struct wd_diag *d, const char *file, int line, int col,
		 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_vadd(d, file, line, col, fmt, ap);
	va_end(ap);
}

void wd_diag_free(struct wd_diag *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->n; i++) {
		free(d->msgs[i]);
		free(d->items[i].file);
		free(d->items[i].msg);
	}
	free(d->msgs);
	free(d->items);
	*d = (struct wd_diag){0};
}

/* ---- nodes ------------------------------------------------------------------
 */

void wd_y_err(struct wd_ywalk *w, const yaml_node_t *n, const char *fmt, ...)
{
	va_list ap;
	int line = 1, col = 1;
	if (n) {
		line = (int)n->start_mark.line + 1;
		col = (int)n->start_mark.column + 1;
	}
	w->nerr++;
	va_start(ap, fmt);
	diag_vadd(w->diag, w->file, line, col, fmt, ap);
	va_end(ap);
}

bool wd_y_visit(struct wd_ywalk *w, const yaml_node_t *n)
{
	if (w->budget > 0) {
		w->budget--;
		return true;
	}
	if (!w->budget_reported) {
		w->budget_reported = true;
		wd_y_err(w, n,
			 "document too large or too many aliases "
			 "(more than %d node visits)",
			 WD_Y_NODE_BUDGET);
	}
	return false;
}

yaml_node_t *wd_y_get(struct wd_ywalk *w, int idx)
{
	yaml_node_t *n = yaml_document_get_node(w->doc, idx);
	if (!n || !wd_y_visit(w, n))
		return NULL;
	return n;
}

const char *wd_y_kind(const yaml_node_t *n)
{
	if (wd_y_is_null(n))
		return "null";
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_SCALAR_NODE:
		return "a scalar";
	default:
		return "nothing";
	}
}

bool wd_y_is_null(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return !n;
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = (const char *)n->data.scalar.value;
	return !*v || !strcmp(v, "~") || !strcmp(v, "null") ||
	       !strcmp(v, "Null") || !strcmp(v, "NULL");
}

const char *wd_y_scalar(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	const char *v = (const char *)n->data.scalar.value;
	if (strlen(v) != n->data.scalar.length)
		return NULL;
	return v;
}

static bool is_plain(const yaml_node_t *n)
{
	return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

int wd_y_str(struct wd_ywalk *w, yaml_node_t *n, const char *what, char **out)
{
	const char *v = wd_y_scalar(n);
	if (n && n->type == YAML_SCALAR_NODE && !v) {
		wd_y_err(w, n, "%s: string contains a NUL byte", what);
		return -EINVAL;
	}
	if (!v || wd_y_is_null(n)) {
		wd_y_err(w, n, "%s must be a string, not %s", what,
			 wd_y_kind(n));
		return -EINVAL;
	}
	free(*out);
	*out = wd_strdup(v);
	return 0;
}

/* Numbers must be plain scalars: `tier: "1"` is a string, and accepting it
 * would make the type rules depend on quoting accidents. */
int wd_y_uint(struct wd_ywalk *w, yaml_node_t *n, const char *what,
	      uint64_t min, uint64_t max, uint64_t *out)
{
	const char *v = wd_y_scalar(n);
	if (!v || wd_y_is_null(n) || !is_plain(n)) {
		wd_y_err(w, n, "%s must be an integer, not %s", what,
			 v && !wd_y_is_null(n) ? "a string" : wd_y_kind(n));
		return -EINVAL;
	}
	const char *p = v;
	if (*p == '+')
		p++;
	if (*p == '-' && p[1] >= '0' && p[1] <= '9') {
		wd_y_err(w, n, "%s: %s is out of range %llu..%llu", what, v,
			 (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	if (*p < '0' || *p > '9') {
		wd_y_err(w, n, "%s must be an integer, not '%s'", what, v);
		return -EINVAL;
	}
	uint64_t x = 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9') {
			wd_y_err(w, n, "%s must be an integer, not '%s'", what,
				 v);
			return -EINVAL;
		}
		if (x > (UINT64_MAX - 9) / 10) {
			wd_y_err(w, n, "%s: %s is out of range %llu..%llu",
				 what, v, (unsigned long long)min,
				 (unsigned long long)max);
			return -EINVAL;
		}
		x = x * 10 + (uint64_t)(*p - '0');
	}
	if (x < min || x > max) {
		wd_y_err(w, n, "%s: %s is out of range %llu..%llu", what, v,
			 (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

static bool parse_float(const char *v, double *out)
{
	/* YAML 1.2 core float/int syntax only: no hex, no inf/nan */
	const char *p = v;
	if (*p == '+' || *p == '-')
		p++;
	bool digits = false;
	while (*p >= '0' && *p <= '9')
		p++, digits = true;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9')
			p++, digits = true;
	}
	if (!digits)
		return false;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (*p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p)
		return false;
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (*end || !isfinite(d))
		return false;
	*out = d;
	return true;
}

int wd_y_double(struct wd_ywalk *w, yaml_node_t *n, const char *what,
		double min_excl, double max, double *out)
{
	const char *v = wd_y_scalar(n);
	double d;
	if (!v || wd_y_is_null(n) || !is_plain(n)) {
		wd_y_err(w, n, "%s must be a number, not %s", what,
			 v && !wd_y_is_null(n) ? "a string" : wd_y_kind(n));
		return -EINVAL;
	}
	if (!parse_float(v, &d)) {
		wd_y_err(w, n, "%s must be a number, not '%s'", what, v);
		return -EINVAL;
	}
	if (!(d > min_excl) || d > max) {
		wd_y_err(w, n, "%s: %s is out of range (%g, %g]", what, v,
			 min_excl, max);
		return -EINVAL;
	}
	*out = d;
	return 0;
}

int wd_y_bool(struct wd_ywalk *w, yaml_node_t *n, const char *what, bool *out)
{
	const char *v = wd_y_scalar(n);
	if (v && is_plain(n)) {
		if (!strcmp(v, "true") || !strcmp(v, "True") ||
		    !strcmp(v, "TRUE")) {
			*out = true;
			return 0;
		}
		if (!strcmp(v, "false") || !strcmp(v, "False") ||
		    !strcmp(v, "FALSE")) {
			*out = false;
			return 0;
		}
	}
	wd_y_err(w, n, "%s must be true or false", what);
	return -EINVAL;
}

int wd_y_enum(struct wd_ywalk *w, yaml_node_t *n, const char *what,
	      const char *const *words, int nwords, int *out)
{
	const char *v = wd_y_scalar(n);
	if (v && !wd_y_is_null(n)) {
		for (int i = 0; i < nwords; i++)
			if (!strcmp(v, words[i])) {
				*out = i;
				return 0;
			}
	}
	char list[256] = "";
	size_t off = 0;
	for (int i = 0; i < nwords && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s",
					i ? "|" : "", words[i]);
	if (v && !wd_y_is_null(n))
		wd_y_err(w, n, "%s: '%s' is not one of %s", what, v, list);
	else
		wd_y_err(w, n, "%s must be one of %s, not %s", what, list,
			 wd_y_kind(n));
	return -EINVAL;
}

void wd_y_strv_free(char **v, int n)
{
	if (!v)
		return;
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int wd_y_strlist(struct wd_ywalk *w, yaml_node_t *n, const char *what,
		 char ***out, int *nout, wd_y_item_check check, void *arg)
{
	if (!n || n->type != YAML_SEQUENCE_NODE) {
		wd_y_err(w, n, "%s must be a list of strings, not %s", what,
			 wd_y_kind(n));
		return -EINVAL;
	}
	yaml_node_item_t *it = n->data.sequence.items.start;
	int cnt = (int)(n->data.sequence.items.top - it);
	char **v = wd_calloc((size_t)cnt + 1, sizeof(*v));
	int k = 0, rc = 0;
	for (int i = 0; i < cnt; i++) {
		yaml_node_t *item = wd_y_get(w, it[i]);
		if (!item) {
			rc = -EINVAL;
			break;
		}
		char *s = NULL;
		if (wd_y_str(w, item, what, &s) < 0) {
			rc = -EINVAL;
			continue;
		}
		if (check && check(w, item, s, arg) < 0) {
			free(s);
			rc = -EINVAL;
			continue;
		}
		v[k++] = s;
	}
	if (rc < 0) {
		wd_y_strv_free(v, k);
		return rc;
	}
	wd_y_strv_free(*out, *nout);
	*out = v;
	*nout = k;
	return 0;
}

int wd_y_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 40 || lb > 40)
		return 99;
	int d[41][41];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			c = WD_MIN(c, d[i - 1][j] + 1);
			d[i][j] = WD_MIN(c, d[i][j - 1] + 1);
		}
	return d[la][lb];
}

int wd_y_map(struct wd_ywalk *w, yaml_node_t *n, const char *what,
	     const struct wd_y_key *keys, size_t nkeys, void *obj)
{
	if (!n || n->type != YAML_MAPPING_NODE) {
		wd_y_err(w, n, "%s must be a mapping, not %s", what,
			 wd_y_kind(n));
		return -EINVAL;
	}
	bool seen[64] = {false};
	if (nkeys > WD_ARRAY_SIZE(seen))
		abort(); /* programming error */
	int rc = 0;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = wd_y_get(w, p->key);
		yaml_node_t *v = wd_y_get(w, p->value);
		if (!k || !v)
			return -EINVAL;
		const char *ks = wd_y_scalar(k);
		if (!ks) {
			wd_y_err(w, k, "%s: keys must be strings", what);
			rc = -EINVAL;
			continue;
		}
		size_t i;
		for (i = 0; i < nkeys; i++)
			if (!strcmp(ks, keys[i].name))
				break;
		if (i == nkeys) {
			const char *best = NULL;
			int bd = 3;
			for (size_t j = 0; j < nkeys; j++) {
				int dd = wd_y_edit_distance(ks, keys[j].name);
				if (dd < bd)
					bd = dd, best = keys[j].name;
			}
			if (best)
				wd_y_err(w, k,
					 "unknown key '%s' in %s (did you "
					 "mean '%s'?)",
					 ks, what, best);
			else
				wd_y_err(w, k, "unknown key '%s' in %s", ks,
					 what);
			rc = -EINVAL;
			continue;
		}
		if (seen[i]) {
			wd_y_err(w, k, "duplicate key '%s' in %s", ks, what);
			rc = -EINVAL;
			continue;
		}
		seen[i] = true;
		if (keys[i].fn(w, v, obj) < 0)
			rc = -EINVAL;
	}
	for (size_t i = 0; i < nkeys; i++)
		if (keys[i].required && !seen[i]) {
			wd_y_err(w, n, "missing required key '%s' in %s",
				 keys[i].name, what);
			rc = -EINVAL;
		}
	return rc;
}

/* ---- YAML -> JSON ----------------------------------------------------------
 */

static bool all_digits(const char *p)
{
	if (*p == '-' || *p == '+')
		p++;
	if (!*p)
		return false;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

static json_t *scalar_to_json(struct wd_ywalk *w, yaml_node_t *n)
{
	const char *v = wd_y_scalar(n);
	if (!v) {
		wd_y_err(w, n, "string contains a NUL byte");
		return NULL;
	}
	if (is_plain(n)) {
		double d;
		if (wd_y_is_null(n))
			return json_null();
		if (!strcmp(v, "true") || !strcmp(v, "True") ||
		    !strcmp(v, "TRUE"))
			return json_true();
		if (!strcmp(v, "false") || !strcmp(v, "False") ||
		    !strcmp(v, "FALSE"))
			return json_false();
		if (all_digits(v)) {
			errno = 0;
			long long x = strtoll(v, NULL, 10);
			if (errno == 0)
				return json_integer(x);
		}
		if (parse_float(v, &d))
			return json_real(d);
	}
	json_t *j = json_stringn(v, n->data.scalar.length);
	if (!j)
		wd_y_err(w, n, "string is not valid UTF-8");
	return j;
}

json_t *wd_y_to_json(struct wd_ywalk *w, yaml_node_t *n, int depth)
{
	if (depth > WD_Y_MAX_DEPTH) {
		wd_y_err(w, n, "nested deeper than %d levels", WD_Y_MAX_DEPTH);
		return NULL;
	}
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return scalar_to_json(w, n);
	case YAML_SEQUENCE_NODE: {
		json_t *a = json_array();
		for (yaml_node_item_t *it = n->data.sequence.items.start;
		     it < n->data.sequence.items.top; it++) {
			yaml_node_t *c = wd_y_get(w, *it);
			json_t *jc = c ? wd_y_to_json(w, c, depth + 1) : NULL;
			if (!jc) {
				json_decref(a);
				return NULL;
			}
			json_array_append_new(a, jc);
		}
		return a;
	}
	case YAML_MAPPING_NODE: {
		json_t *o = json_object();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = wd_y_get(w, p->key);
			yaml_node_t *v = wd_y_get(w, p->value);
			if (!k || !v) {
				json_decref(o);
				return NULL;
			}
			const char *ks = wd_y_scalar(k);
			if (!ks) {
				wd_y_err(w, k, "keys must be strings");
				json_decref(o);
				return NULL;
			}
			if (json_object_get(o, ks)) {
				wd_y_err(w, k, "duplicate key '%s'", ks);
				json_decref(o);
				return NULL;
			}
			json_t *jv = wd_y_to_json(w, v, depth + 1);
			if (!jv || json_object_set_new(o, ks, jv) < 0) {
				if (jv) {
					wd_y_err(w, k,
						 "key is not valid UTF-8");
					json_decref(jv);
				}
				json_decref(o);
				return NULL;
			}
		}
		return o;
	}
	default:
		wd_y_err(w, n, "empty node");
		return NULL;
	}
}

/* ---- loading
 * ------------------------------------------------------------------ */

/* libyaml's scanner is quadratic in flow nesting (every token re-checks the
 * simple-key stack, one entry per open bracket): 20000 nested "[" take
 * seconds, 200000 take minutes. Policy files nest a few levels, so tokens
 * are scanned first and a document nested deeper than WD_Y_MAX_DEPTH is
 * refused before the loader sees it; the scan stops at that depth, so its
 * own cost stays linear. Returns false (one diagnostic) if too deep; a
 * syntax error is left for the loader to report. */
static bool depth_ok(const char *file, const char *text, size_t len,
		     struct wd_diag *diag)
{
	yaml_parser_t p;
	yaml_token_t t;
	int depth = 0;
	bool ok = true, done = false;
	if (!yaml_parser_initialize(&p))
		abort();
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	while (!done && yaml_parser_scan(&p, &t)) {
		switch (t.type) {
		case YAML_FLOW_SEQUENCE_START_TOKEN:
		case YAML_FLOW_MAPPING_START_TOKEN:
		case YAML_BLOCK_SEQUENCE_START_TOKEN:
		case YAML_BLOCK_MAPPING_START_TOKEN:
			if (++depth > WD_Y_MAX_DEPTH) {
				wd_diag_add(diag, file,
					    (int)t.start_mark.line + 1,
					    (int)t.start_mark.column + 1,
					    "nested deeper than %d levels",
					    WD_Y_MAX_DEPTH);
				ok = false;
				done = true;
			}
			break;
		case YAML_FLOW_SEQUENCE_END_TOKEN:
		case YAML_FLOW_MAPPING_END_TOKEN:
		case YAML_BLOCK_END_TOKEN:
			depth--;
			break;
		case YAML_STREAM_END_TOKEN:
			done = true;
			break;
		default:
			break;
		}
		yaml_token_delete(&t);
	}
	yaml_parser_delete(&p);
	return ok;
}

/* How warden reads a plain scalar (scalar_to_json's rules, YAML 1.2 core
 * schema): "null", "bool", "int", "float" or "str". */
const char *wd_y_plain_type(const char *v)
{
	double d;
	if (!*v || !strcmp(v, "~") || !strcmp(v, "null") ||
	    !strcmp(v, "Null") || !strcmp(v, "NULL"))
		return "null";
	if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE") ||
	    !strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
		return "bool";
	if (all_digits(v)) {
		errno = 0;
		(void)strtoll(v, NULL, 10);
		if (errno == 0)
			return "int";
	}
	if (parse_float(v, &d))
		return "float";
	return "str";
}

int wd_y_load(const char *file, const char *text, size_t len,
	      struct wd_diag *diag, wd_y_doc_fn fn, void *arg)
{
	if (!depth_ok(file, text, len, diag))
		return -EINVAL;
	int tag_errs = wd_y_check_tags(file, text, len, diag);
	yaml_parser_t parser;
	int ndocs = 0, nerr = 0;
	if (!yaml_parser_initialize(&parser))
		abort();
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	for (;;) {
		yaml_document_t doc;
		if (!yaml_parser_load(&parser, &doc)) {
			const char *ctx = parser.context;
			wd_diag_add(diag, file,
				    (int)parser.problem_mark.line + 1,
				    (int)parser.problem_mark.column + 1,
				    "YAML syntax error: %s%s%s",
				    parser.problem ? parser.problem : "?",
				    ctx ? " " : "", ctx ? ctx : "");
			nerr++;
			break;
		}
		yaml_node_t *root = yaml_document_get_root_node(&doc);
		if (!root) {
			yaml_document_delete(&doc);
			break; /* end of stream */
		}
		/* an empty document ("---" at the end of a file, or
		 * between two) is skipped, not an error */
		if (root->type == YAML_SCALAR_NODE &&
		    root->data.scalar.length == 0 &&
		    root->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
			yaml_document_delete(&doc);
			continue;
		}
		struct wd_ywalk w = {.doc = &doc,
				     .file = file,
				     .diag = diag,
				     .budget = WD_Y_NODE_BUDGET};
		ndocs++;
		if (wd_y_visit(&w, root))
			fn(&w, root, arg);
		nerr += w.nerr;
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&parser);
	nerr += tag_errs;
	return nerr ? -EINVAL : ndocs;
}

/* ---- names
 * ---------------------------------------------------------------------- */

bool wd_y_valid_name(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || *s == '-'))
			return false;
	return true;
}

int wd_y_name(struct wd_ywalk *w, yaml_node_t *n, const char *what, char **out)
{
	char *s = NULL;
	if (wd_y_str(w, n, what, &s) < 0)
		return -EINVAL;
	if (!wd_y_valid_name(s)) {
		wd_y_err(w, n, "%s '%s' must match [a-z0-9_-]{1,64}", what, s);
		free(s);
		return -EINVAL;
	}
	free(*out);
	*out = s;
	return 0;
}

int wd_y_each_named(struct wd_ywalk *w, yaml_node_t *map,
		    const struct wd_y_named *spec, void *ctx)
{
	if (map->type != YAML_MAPPING_NODE) {
		wd_y_err(w, map, "%s must be a mapping %s, not %s", spec->what,
			 spec->shape, wd_y_kind(map));
		return -EINVAL;
	}
	char what[64];
	snprintf(what, sizeof(what), "%s name", spec->item);
	int rc = 0;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = wd_y_get(w, p->key);
		yaml_node_t *val = wd_y_get(w, p->value);
		char *name = NULL;
		if (!k || !val)
			return -EINVAL;
		if (wd_y_name(w, k, what, &name) < 0) {
			rc = -EINVAL;
			continue;
		}
		if (spec->seen(ctx, name)) {
			wd_y_err(w, k, "duplicate %s '%s'", spec->item, name);
			free(name);
			rc = -EINVAL;
			continue;
		}
		if (spec->add(w, k, name, val, ctx) < 0)
			rc = -EINVAL;
	}
	return rc;
}

int wd_y_load_docs(const char *file, const char *text, size_t len,
		   const char *none, struct wd_diag *diag, wd_y_doc_fn fn,
		   void *arg)
{
	struct wd_diag local = {0};
	struct wd_diag *d = diag ? diag : &local;
	int before = d->n + d->dropped;
	int rc = wd_y_load(file, text, len, d, fn, arg);
	if (rc == 0)
		wd_diag_add(d, file, 1, 1, "%s", none);
	bool bad = rc <= 0 || d->n + d->dropped != before;
	wd_diag_free(&local);
	return bad ? -EINVAL : 0;
}

int wd_y_read_path(const char *path, char **text, size_t *len,
		   struct wd_diag *diag)
{
	*text = NULL;
	*len = 0;
	int rc = wd_read_file(path, text, len);
	if (rc < 0)
		wd_diag_add(diag, path, 0, 0, "cannot read: %s", strerror(-rc));
	return rc;
}
