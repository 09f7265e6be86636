/* policy/gateway.yaml parser. Strict: a typo'd key must never silently
 * change which provider (and so which data processor) gets an agent's
 * prompts, so unknown keys, duplicate keys, wrong types and references to
 * undefined providers are all errors with file:line:col. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <yaml.h>

#include "gateway/provider.h"
#include "gateway/script.h"
#include "policy/gateway_config.h"
#include "policy/ywalk.h"

struct gc_ctx {
	const char *file;
	const char *base_dir;
	yaml_document_t *doc;
	struct wd_buf errs;
	int nerr;
	struct wd_gateway_config *cfg;
};

__attribute__((format(printf, 3, 4))) static void
gc_err(struct gc_ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
	va_list ap;
	char msg[512];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->nerr++;
	if (c->errs.len > 8192)
		return;
	wd_buf_printf(&c->errs, "%s%s:%zu:%zu: %s", c->errs.len ? "\n" : "",
		      c->file, n ? n->start_mark.line + 1 : 1,
		      n ? n->start_mark.column + 1 : 1, msg);
}

static const char *kind_word(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return "a scalar";
	case YAML_SEQUENCE_NODE:
		return "a sequence";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "nothing";
	}
}

/* The scalar's text, or NULL (with a diagnostic) if n is not a scalar or
 * holds a NUL byte ("/etc\0x" must not become "/etc"). */
static const char *gc_scalar(struct gc_ctx *c, const yaml_node_t *n,
			     const char *what)
{
	if (!n || n->type != YAML_SCALAR_NODE) {
		gc_err(c, n, "%s: expected a scalar, got %s", what,
		       n ? kind_word(n) : "nothing");
		return NULL;
	}
	if (strlen((const char *)n->data.scalar.value) !=
	    n->data.scalar.length) {
		gc_err(c, n, "%s: embedded NUL byte", what);
		return NULL;
	}
	return (const char *)n->data.scalar.value;
}

static int gc_str(struct gc_ctx *c, yaml_node_t *n, const char *what,
		  char **out)
{
	const char *s = gc_scalar(c, n, what);

	if (!s)
		return -EINVAL;
	if (!*s) {
		gc_err(c, n, "%s: must not be empty", what);
		return -EINVAL;
	}
	free(*out);
	*out = wd_strdup(s);
	return 0;
}

static int gc_uint(struct gc_ctx *c, yaml_node_t *n, const char *what,
		   uint64_t min, uint64_t max, uint32_t *out)
{
	const char *s = gc_scalar(c, n, what);
	char *end;
	unsigned long long v;

	if (!s)
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-' || v < min || v > max) {
		gc_err(
		    c, n, "%s: expected an integer in [%llu, %llu], got '%s'",
		    what, (unsigned long long)min, (unsigned long long)max, s);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

static int gc_price_num(struct gc_ctx *c, yaml_node_t *n, const char *what,
			double *out)
{
	const char *s = gc_scalar(c, n, what);
	char *end;
	double v;

	if (!s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < 0 || v > 1e6) {
		gc_err(c, n,
		       "%s: expected a price in USD per million tokens "
		       "(0..1000000), got '%s'",
		       what, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static yaml_node_t *gc_node(struct gc_ctx *c, int idx)
{
	return yaml_document_get_node(c->doc, idx);
}

/* Iterate a mapping: checks each key is a scalar, unique, and in `allowed`
 * (NULL = any key). Calls fn(c, key_node, key, value_node, arg). */
typedef void (*gc_pair_fn)(struct gc_ctx *c, yaml_node_t *kn, const char *k,
			   yaml_node_t *vn, void *arg);

static int gc_map(struct gc_ctx *c, yaml_node_t *n, const char *what,
		  const char *const *allowed, gc_pair_fn fn, void *arg)
{
	yaml_node_pair_t *p, *q;
	int before = c->nerr;

	if (!n || n->type != YAML_MAPPING_NODE) {
		gc_err(c, n, "%s: expected a mapping, got %s", what,
		       n ? kind_word(n) : "nothing");
		return -EINVAL;
	}
	for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *kn = gc_node(c, p->key),
			    *vn = gc_node(c, p->value);
		const char *k = gc_scalar(c, kn, "key");
		bool ok = !allowed;

		if (!k)
			continue;
		for (q = n->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *qk = gc_node(c, q->key);
			if (qk && qk->type == YAML_SCALAR_NODE &&
			    !strcmp((const char *)qk->data.scalar.value, k)) {
				gc_err(c, kn, "%s: duplicate key '%s'", what,
				       k);
				k = NULL;
				break;
			}
		}
		if (!k)
			continue;
		for (int i = 0; allowed && allowed[i]; i++)
			if (!strcmp(allowed[i], k))
				ok = true;
		if (!ok) {
			gc_err(c, kn, "%s: unknown key '%s'", what, k);
			continue;
		}
		if (!vn) {
			gc_err(c, kn, "%s: '%s' has no value", what, k);
			continue;
		}
		fn(c, kn, k, vn, arg);
	}
	return c->nerr > before ? -EINVAL : 0;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' ||
		      *s == '.'))
			return false;
	return true;
}

/* ---- providers ---------------------------------------------------------- */

struct prov_parse {
	struct wd_provider_cfg *p;
	yaml_node_t *kind_node, *url_node, *cache_node;
	bool have_kind;
};

static void provider_pair(struct gc_ctx *c, yaml_node_t *kn, const char *k,
			  yaml_node_t *vn, void *arg)
{
	struct prov_parse *pp = arg;
	struct wd_provider_cfg *p = pp->p;

	if (!strcmp(k, "kind")) {
		const char *s = gc_scalar(c, vn, "'kind'");
		pp->kind_node = vn;
		if (!s)
			return;
		const struct wd_provider_desc *d = wd_provider_desc_named(s);
		if (!d) {
			gc_err(c, vn, "'kind': expected %s, got '%s'",
			       wd_provider_kind_words(), s);
			return;
		}
		p->kind = d->kind;
		pp->have_kind = true;
	} else if (!strcmp(k, "base_url")) {
		pp->url_node = vn;
		if (gc_str(c, vn, "'base_url'", &p->base_url) == 0) {
			size_t n = strlen(p->base_url);
			if (strncmp(p->base_url, "http://", 7) &&
			    strncmp(p->base_url, "https://", 8))
				gc_err(c, vn,
				       "'base_url': must start with http:// or "
				       "https://");
			while (n > 8 && p->base_url[n - 1] == '/')
				p->base_url[--n] = 0;
		}
	} else if (!strcmp(k, "api_key_env")) {
		gc_str(c, vn, "'api_key_env'", &p->api_key_env);
	} else if (!strcmp(k, "api_key_file")) {
		if (gc_str(c, vn, "'api_key_file'", &p->api_key_file) == 0 &&
		    p->api_key_file[0] != '/') {
			char *abs =
			    wd_asprintf("%s/%s", c->base_dir, p->api_key_file);
			free(p->api_key_file);
			p->api_key_file = abs;
		}
	} else if (!strcmp(k, "timeout_ms")) {
		gc_uint(c, vn, "'timeout_ms'", 1, 3600000, &p->timeout_ms);
	} else if (!strcmp(k, "max_tokens_param")) {
		const char *s = gc_scalar(c, vn, "'max_tokens_param'");
		if (s && !strcmp(s, "max_completion_tokens"))
			p->max_completion_tokens = true;
		else if (s && strcmp(s, "max_tokens"))
			gc_err(c, vn,
			       "'max_tokens_param': expected max_tokens or "
			       "max_completion_tokens, got '%s'",
			       s);
	} else if (!strcmp(k, "connect_timeout_ms")) {
		gc_uint(c, vn, "'connect_timeout_ms'", 1, 3600000,
			&p->connect_timeout_ms);
	} else if (!strcmp(k, "cache_ttl")) {
		const char *s = gc_scalar(c, vn, "'cache_ttl'");
		pp->cache_node = vn;
		if (!s)
			return;
		if (!strcmp(s, "5m"))
			p->cache_ttl = WD_CACHE_5M;
		else if (!strcmp(s, "1h"))
			p->cache_ttl = WD_CACHE_1H;
		else if (!strcmp(s, "off"))
			p->cache_ttl = WD_CACHE_OFF;
		else
			gc_err(c, vn,
			       "'cache_ttl': expected 5m, 1h or off, got '%s'",
			       s);
	}
}

static void providers_pair(struct gc_ctx *c, yaml_node_t *kn, const char *k,
			   yaml_node_t *vn, void *arg)
{
	static const char *const keys[] = {"kind",
					   "base_url",
					   "api_key_env",
					   "api_key_file",
					   "timeout_ms",
					   "connect_timeout_ms",
					   "max_tokens_param",
					   "cache_ttl",
					   NULL};
	struct wd_gateway_config *cfg = c->cfg;
	struct wd_provider_cfg *p;
	struct prov_parse pp = {0};
	char what[128];

	if (!valid_name(k)) {
		gc_err(c, kn, "provider name '%s': use [A-Za-z0-9_.-]{1,63}",
		       k);
		return;
	}
	cfg->providers = wd_realloc(
	    cfg->providers, (cfg->n_providers + 1) * sizeof(*cfg->providers));
	p = &cfg->providers[cfg->n_providers++];
	memset(p, 0, sizeof(*p));
	p->name = wd_strdup(k);
	p->timeout_ms = 120000;
	pp.p = p;
	snprintf(what, sizeof(what), "provider '%s'", k);
	if (gc_map(c, vn, what, keys, provider_pair, &pp))
		return;
	if (!pp.have_kind) {
		if (!pp.kind_node)
			gc_err(c, vn, "%s: missing 'kind'", what);
		return;
	}
	if (p->kind == WD_PROVIDER_SCRIPT) {
		if (p->base_url || p->api_key_env || p->api_key_file)
			gc_err(c, vn,
			       "%s: a script provider takes no base_url or "
			       "api key",
			       what);
	} else if (!p->base_url) {
		gc_err(c, vn, "%s: missing 'base_url'", what);
	}
	if (p->api_key_env && p->api_key_file)
		gc_err(c, vn, "%s: give api_key_env or api_key_file, not both",
		       what);
	if (p->max_completion_tokens &&
	    !wd_provider_desc_of(p->kind)->max_completion_tokens)
		gc_err(c, vn,
		       "%s: max_tokens_param is for providers that take "
		       "max_completion_tokens (openai)",
		       what);
	if (!p->connect_timeout_ms)
		p->connect_timeout_ms = WD_MIN(p->timeout_ms, 10000u);
	/* explicit breakpoints are an Anthropic API feature; OpenAI caches
	 * by itself and a script has nothing to cache: accepting the key
	 * there would be a setting that does nothing */
	if (pp.cache_node && !wd_provider_desc_of(p->kind)->cache_control)
		gc_err(c, pp.cache_node,
		       "%s: cache_ttl is for anthropic providers (%s caching, "
		       "if any, is automatic)",
		       what, wd_provider_kind_name(p->kind));
}

/* ---- models (aliases) ---------------------------------------------------- */

struct route_parse {
	yaml_node_t *prov_node, *model_node;
	char *prov, *model;
};

static void route_pair(struct gc_ctx *c, yaml_node_t *kn, const char *k,
		       yaml_node_t *vn, void *arg)
{
	struct route_parse *rp = arg;

	if (!strcmp(k, "provider")) {
		rp->prov_node = vn;
		gc_str(c, vn, "'provider'", &rp->prov);
	} else {
		rp->model_node = vn;
		gc_str(c, vn, "'model'", &rp->model);
	}
}

/* Routes are resolved after all providers are known (key order in the
 * file must not matter), so they are parsed in a second pass. */
static void models_pair(struct gc_ctx *c, yaml_node_t *kn, const char *k,
			yaml_node_t *vn, void *arg)
{
	static const char *const keys[] = {"provider", "model", NULL};
	struct wd_gateway_config *cfg = c->cfg;
	struct wd_alias *a;
	yaml_node_item_t *it;
	char what[160];

	if (!valid_name(k)) {
		gc_err(c, kn, "model alias '%s': use [A-Za-z0-9_.-]{1,63}", k);
		return;
	}
	if (vn->type != YAML_SEQUENCE_NODE) {
		gc_err(c, vn,
		       "model alias '%s': expected a sequence of {provider, "
		       "model}, got %s",
		       k, kind_word(vn));
		return;
	}
	cfg->aliases = wd_realloc(cfg->aliases,
				  (cfg->n_aliases + 1) * sizeof(*cfg->aliases));
	a = &cfg->aliases[cfg->n_aliases++];
	memset(a, 0, sizeof(*a));
	a->name = wd_strdup(k);
	if (vn->data.sequence.items.start == vn->data.sequence.items.top)
		gc_err(c, vn, "model alias '%s': empty failover list", k);
	for (it = vn->data.sequence.items.start;
	     it < vn->data.sequence.items.top; it++) {
		yaml_node_t *rn = gc_node(c, *it);
		struct route_parse rp = {0};
		struct wd_route *r;
		int pi;

		snprintf(what, sizeof(what), "model alias '%s' entry %d", k,
			 (int)(it - vn->data.sequence.items.start) + 1);
		if (gc_map(c, rn, what, keys, route_pair, &rp) || !rp.prov ||
		    !rp.model) {
			if (rn && rn->type == YAML_MAPPING_NODE &&
			    (!rp.prov_node || !rp.model_node))
				gc_err(c, rn,
				       "%s: needs 'provider' and 'model'",
				       what);
			free(rp.prov);
			free(rp.model);
			continue;
		}
		pi = wd_gateway_config_provider(cfg, rp.prov);
		if (pi < 0) {
			gc_err(c, rp.prov_node, "%s: no provider named '%s'",
			       what, rp.prov);
			free(rp.prov);
			free(rp.model);
			continue;
		}
		a->routes = wd_realloc(a->routes,
				       (a->n_routes + 1) * sizeof(*a->routes));
		r = &a->routes[a->n_routes++];
		memset(r, 0, sizeof(*r));
		r->provider = pi;
		r->model = steal_pointer(&rp.model);
		free(rp.prov);
		if (cfg->providers[pi].kind == WD_PROVIDER_SCRIPT) {
			struct wd_err serr = {0};
			char *path =
			    r->model[0] == '/'
				? wd_strdup(r->model)
				: wd_asprintf("%s/%s", c->base_dir, r->model);
			free(r->model);
			r->model = path;
			if (wd_script_load_file(path, &r->script, &serr))
				gc_err(c, rp.model_node, "%s: script: %s", what,
				       serr.msg);
		}
	}
}

/* ---- retries, prices ------------------------------------------------------
 */

static void retries_pair(struct gc_ctx *c, yaml_node_t *kn, const char *k,
			 yaml_node_t *vn, void *arg)
{
	struct wd_retry_cfg *r = &c->cfg->retry;
	char what[64];

	snprintf(what, sizeof(what), "'%s'", k);
	if (!strcmp(k, "max_attempts"))
		gc_uint(c, vn, what, 1, 20, &r->max_attempts);
	else if (!strcmp(k, "backoff_base_ms"))
		gc_uint(c, vn, what, 0, 600000, &r->backoff_base_ms);
	else if (!strcmp(k, "backoff_max_ms"))
		gc_uint(c, vn, what, 0, 600000, &r->backoff_max_ms);
	else if (!strcmp(k, "retry_after_max_ms"))
		gc_uint(c, vn, what, 0, 3600000, &r->retry_after_max_ms);
	else if (!strcmp(k, "breaker_failures"))
		gc_uint(c, vn, what, 0, 1000, &r->breaker_failures);
	else if (!strcmp(k, "breaker_open_ms"))
		gc_uint(c, vn, what, 1, 86400000, &r->breaker_open_ms);
}

struct price_parse {
	struct wd_price *p;
	bool in, out;
};

static void price_pair(struct gc_ctx *c, yaml_node_t *kn, const char *k,
		       yaml_node_t *vn, void *arg)
{
	struct price_parse *pp = arg;
	char what[64];

	snprintf(what, sizeof(what), "'%s'", k);
	if (!strcmp(k, "input")) {
		pp->in = !gc_price_num(c, vn, what, &pp->p->input);
	} else if (!strcmp(k, "output")) {
		pp->out = !gc_price_num(c, vn, what, &pp->p->output);
	} else {
		gc_price_num(c, vn, what, &pp->p->cached_input);
	}
}

static void prices_pair(struct gc_ctx *c, yaml_node_t *kn, const char *k,
			yaml_node_t *vn, void *arg)
{
	static const char *const keys[] = {"input", "output", "cached_input",
					   NULL};
	struct wd_gateway_config *cfg = c->cfg;
	struct price_parse pp = {0};
	char what[200];

	cfg->prices =
	    wd_realloc(cfg->prices, (cfg->n_prices + 1) * sizeof(*cfg->prices));
	pp.p = &cfg->prices[cfg->n_prices++];
	memset(pp.p, 0, sizeof(*pp.p));
	pp.p->model = wd_strdup(k);
	pp.p->cached_input = -1;
	snprintf(what, sizeof(what), "price '%s'", k);
	if (gc_map(c, vn, what, keys, price_pair, &pp))
		return;
	if (!pp.in || !pp.out)
		gc_err(c, vn, "%s: needs 'input' and 'output'", what);
	/* cached_input < 0: the provider's read multiplier applies
	 * (price_it, gateway.c) */
}

struct root_parse {
	yaml_node_t *models;
};

static void root_pair(struct gc_ctx *c, yaml_node_t *kn, const char *k,
		      yaml_node_t *vn, void *arg)
{
	struct root_parse *rp = arg;

	if (!strcmp(k, "providers"))
		gc_map(c, vn, "'providers'", NULL, providers_pair, NULL);
	else if (!strcmp(k, "models"))
		rp->models = vn;
	else if (!strcmp(k, "retries")) {
		static const char *const keys[] = {"max_attempts",
						   "backoff_base_ms",
						   "backoff_max_ms",
						   "retry_after_max_ms",
						   "breaker_failures",
						   "breaker_open_ms",
						   NULL};
		gc_map(c, vn, "'retries'", keys, retries_pair, NULL);
	} else if (!strcmp(k, "prices"))
		gc_map(c, vn, "'prices'", NULL, prices_pair, NULL);
}

int wd_gateway_config_load_str(const char *file, const char *base_dir,
			       const char *text, size_t len,
			       struct wd_gateway_config **out,
			       struct wd_err *err)
{
	static const char *const keys[] = {"providers", "models", "retries",
					   "prices", NULL};
	yaml_parser_t parser;
	yaml_document_t doc;
	struct gc_ctx c = {.file = file, .base_dir = base_dir ? base_dir : "."};
	struct root_parse rp = {0};
	yaml_node_t *root;
	int r;

	*out = NULL;
	c.cfg = wd_calloc(1, sizeof(*c.cfg));
	c.cfg->source = wd_strdup(file);
	c.cfg->retry = (struct wd_retry_cfg){.max_attempts = 3,
					     .backoff_base_ms = 200,
					     .backoff_max_ms = 5000,
					     .retry_after_max_ms = 30000,
					     .breaker_failures = 3,
					     .breaker_open_ms = 30000};
	if (!yaml_parser_initialize(&parser)) {
		wd_gateway_config_free(c.cfg);
		return wd_err_set(err, -ENOMEM, "%s: yaml init failed", file);
	}
	/* tags outside the core schema, as every policy file (ywalk.h) */
	struct wd_diag td = {0};
	if (wd_y_check_tags(file, text, len, &td)) {
		for (int i = 0; i < td.n; i++) {
			c.nerr++;
			wd_buf_printf(&c.errs, "%s%s", c.errs.len ? "\n" : "",
				      td.msgs[i]);
		}
		wd_diag_free(&td);
		r = wd_err_set(err, -EINVAL, "%s", c.errs.data);
		wd_buf_free(&c.errs);
		yaml_parser_delete(&parser);
		wd_gateway_config_free(c.cfg);
		return r;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		r = wd_err_set(err, -EINVAL, "%s:%zu:%zu: %s", file,
			       parser.problem_mark.line + 1,
			       parser.problem_mark.column + 1,
			       parser.problem ? parser.problem : "YAML error");
		yaml_parser_delete(&parser);
		wd_gateway_config_free(c.cfg);
		return r;
	}
	c.doc = &doc;
	root = yaml_document_get_root_node(&doc);
	if (!root)
		gc_err(&c, NULL, "empty document");
	else if (gc_map(&c, root, "gateway config", keys, root_pair, &rp) ==
		     0 ||
		 rp.models) {
		if (rp.models)
			gc_map(&c, rp.models, "'models'", NULL, models_pair,
			       NULL);
	}
	if (root && !c.nerr && !c.cfg->n_providers)
		gc_err(&c, root, "no 'providers'");
	if (root && !c.nerr && !c.cfg->n_aliases)
		gc_err(&c, root, "no 'models'");
	if (c.cfg->retry.backoff_max_ms < c.cfg->retry.backoff_base_ms)
		gc_err(&c, root, "'retries': backoff_max_ms < backoff_base_ms");
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	if (c.nerr) {
		r = wd_err_set(err, -EINVAL, "%s", c.errs.data);
		wd_buf_free(&c.errs);
		wd_gateway_config_free(c.cfg);
		return r;
	}
	wd_buf_free(&c.errs);
	*out = c.cfg;
	return 0;
}

int wd_gateway_config_load_file(const char *path,
				struct wd_gateway_config **out,
				struct wd_err *err)
{
	cleanup_free char *text = NULL;
	cleanup_free char *dir = wd_strdup(path);
	char *slash;
	size_t len;
	int r;

	*out = NULL;
	r = wd_read_file(path, &text, &len);
	if (r)
		return wd_err_set(err, r, "%s: %s", path, strerror(-r));
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = 0;
	else if (slash)
		*slash = 0;
	else {
		free(dir);
		dir = wd_strdup(".");
	}
	return wd_gateway_config_load_str(path, dir, text, len, out, err);
}

void wd_gateway_config_free(struct wd_gateway_config *cfg)
{
	if (!cfg)
		return;
	for (int i = 0; i < cfg->n_providers; i++) {
		free(cfg->providers[i].name);
		free(cfg->providers[i].base_url);
		free(cfg->providers[i].api_key_env);
		free(cfg->providers[i].api_key_file);
	}
	free(cfg->providers);
	for (int i = 0; i < cfg->n_aliases; i++) {
		for (int j = 0; j < cfg->aliases[i].n_routes; j++) {
			free(cfg->aliases[i].routes[j].model);
			wd_script_free(cfg->aliases[i].routes[j].script);
		}
		free(cfg->aliases[i].routes);
		free(cfg->aliases[i].name);
	}
	free(cfg->aliases);
	for (int i = 0; i < cfg->n_prices; i++)
		free(cfg->prices[i].model);
	free(cfg->prices);
	free(cfg->source);
	free(cfg);
}

const struct wd_alias *
wd_gateway_config_alias(const struct wd_gateway_config *cfg, const char *name)
{
	for (int i = 0; i < cfg->n_aliases; i++)
		if (!strcmp(cfg->aliases[i].name, name))
			return &cfg->aliases[i];
	return NULL;
}

const struct wd_price *
wd_gateway_config_price(const struct wd_gateway_config *cfg,
			const char *provider, const char *model)
{
	size_t pl = strlen(provider);

	/* "provider/model" is more specific than "model" */
	for (int i = 0; i < cfg->n_prices; i++) {
		const char *m = cfg->prices[i].model;
		if (!strncmp(m, provider, pl) && m[pl] == '/' &&
		    !strcmp(m + pl + 1, model))
			return &cfg->prices[i];
	}
	for (int i = 0; i < cfg->n_prices; i++)
		if (!strcmp(cfg->prices[i].model, model))
			return &cfg->prices[i];
	return NULL;
}

int wd_gateway_config_provider(const struct wd_gateway_config *cfg,
			       const char *name)
{
	for (int i = 0; i < cfg->n_providers; i++)
		if (!strcmp(cfg->providers[i].name, name))
			return i;
	return -1;
}

const char *wd_provider_kind_name(enum wd_provider_kind k)
{
	const struct wd_provider_desc *d = wd_provider_desc_of(k);
	return d ? d->name : "?";
}
