/* policy/gateway.yaml: providers, model aliases (ordered failover lists),
 * retries, prices. Parsed strictly with libyaml: unknown or duplicate keys,
 * wrong types and dangling references are errors "file:line:col: message".
 *
 *   providers:
 *     anthropic: {kind: anthropic, base_url: "https://api.anthropic.com",
 *                 api_key_env: ANTHROPIC_API_KEY, timeout_ms: 120000,
 *                 cache_ttl: 5m}   # prompt-cache breakpoints: 5m|1h|off
 *     openai:    {kind: openai, base_url: "https://api.openai.com",
 *                 api_key_file: /etc/warden/openai.key,
 *                 max_tokens_param: max_completion_tokens}
 *     script:    {kind: script}
 *   models:                      # alias -> ordered failover list
 *     default: [{provider: script, model: models/demo.script}]
 *     claude:  [{provider: anthropic, model: claude-sonnet-4-5},
 *               {provider: openai, model: gpt-4.1}]
 *   retries: {max_attempts: 3, backoff_base_ms: 200, backoff_max_ms: 5000,
 *             retry_after_max_ms: 30000, breaker_failures: 3,
 *             breaker_open_ms: 30000}
 *   prices:                      # USD per million tokens
 *     claude-sonnet-4-5: {input: 3.0, output: 15.0, cached_input: 0.30}
 *
 * For `kind: script` the model is a script file path, relative to the
 * directory of gateway.yaml; it is loaded and checked at config load.
 * base_url may carry a path prefix ("http://127.0.0.1:8080/proxy"); the
 * provider appends "/v1/messages" or "/v1/chat/completions". An openai
 * base_url that already ends in "/v1" is accepted as is.
 * API keys: never in the YAML itself (there is no api_key key on purpose).
 */
#ifndef WD_GATEWAY_CONFIG_H
#define WD_GATEWAY_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"

enum wd_provider_kind {
	WD_PROVIDER_ANTHROPIC,
	WD_PROVIDER_OPENAI,
	WD_PROVIDER_SCRIPT,
};

enum wd_cache_ttl {
	WD_CACHE_5M, /* default for providers with explicit breakpoints */
	WD_CACHE_1H,
	WD_CACHE_OFF,
};

struct wd_provider_cfg {
	char *name;
	enum wd_provider_kind kind;
	char *base_url;	   /* NULL for script; no trailing '/' */
	char *api_key_env; /* at most one of these two */
	char *api_key_file;
	uint32_t timeout_ms;	     /* per attempt; default 120000 */
	uint32_t connect_timeout_ms; /* default min(timeout, 10000) */
	bool max_completion_tokens;  /* openai: `max_tokens_param:
				      * max_completion_tokens` (reasoning
				      * models); default max_tokens */
	enum wd_cache_ttl cache_ttl; /* anthropic `cache_ttl: 5m|1h|off` */
};

struct wd_route {
	int provider; /* index into providers[] */
	char *model;  /* provider-side model (script: absolute file path) */
	struct wd_script *script; /* parsed script (kind script), else NULL */
};

struct wd_alias {
	char *name;
	struct wd_route *routes;
	int n_routes;
};

struct wd_price {
	char *model; /* provider-side model name, or "provider/model" */
	double input, output; /* USD per 1e6 tokens */
	double cached_input;  /* a cache read; < 0 (absent) = input times the
			       * provider's cache_read_x (provider.h) */
};

struct wd_retry_cfg {
	uint32_t max_attempts;	     /* per route, >= 1; default 3 */
	uint32_t backoff_base_ms;    /* default 200 */
	uint32_t backoff_max_ms;     /* default 5000 */
	uint32_t retry_after_max_ms; /* a longer Retry-After moves on to the
				      * next route instead; default 30000 */
	/* circuit breaker: after this many calls in a row that a route
	 * failed (0 = never), skip it for breaker_open_ms, then let one
	 * call try it (half-open) */
	uint32_t breaker_failures; /* default 3 */
	uint32_t breaker_open_ms;  /* default 30000 */
};

struct wd_gateway_config {
	char *source; /* file it came from */
	struct wd_provider_cfg *providers;
	int n_providers;
	struct wd_alias *aliases;
	int n_aliases;
	struct wd_price *prices;
	int n_prices;
	struct wd_retry_cfg retry;
};

/* Parse. 0 or -EINVAL (err->msg holds one "file:line:col: message" per
 * line, several if there were several errors) or another -errno (I/O). */
int wd_gateway_config_load_file(const char *path,
				struct wd_gateway_config **out,
				struct wd_err *err);
/* `file` names the text in messages; `base_dir` resolves script paths. */
int wd_gateway_config_load_str(const char *file, const char *base_dir,
			       const char *text, size_t len,
			       struct wd_gateway_config **out,
			       struct wd_err *err);
void wd_gateway_config_free(struct wd_gateway_config *cfg);

const struct wd_alias *
wd_gateway_config_alias(const struct wd_gateway_config *cfg, const char *name);
const struct wd_price *
wd_gateway_config_price(const struct wd_gateway_config *cfg,
			const char *provider, const char *model);
int wd_gateway_config_provider(const struct wd_gateway_config *cfg,
			       const char *name); /* index or -1 */

const char *wd_provider_kind_name(enum wd_provider_kind k);

/* Can every route of `model` (alias or provider/model) take these
 * parameters (temperature < 0 = not set)? 0, or -EINVAL with why naming
 * the route. The range comes from the provider table (gateway/provider.h);
 * the policy loaders call this so a parameter a route cannot take is a
 * load error, never a 400 at every step. */
int wd_route_check_params(const struct wd_gateway_config *cfg,
			  const char *model, double temperature, char *why,
			  size_t n);

#endif
