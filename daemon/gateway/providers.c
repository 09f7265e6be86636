/* The provider table (provider.h): one row per provider kind, with what
 * its API documents. The config loader (policy/gateway_config.c) and the
 * gateway (gateway.c, the wire-format files) read it; nothing else knows
 * a provider's words, ranges or prices. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/provider.h"

/* ---- error classes ------------------------------------------------------ */

/* error.type and error.code (or message) of {"error": {...}} bodies */
static void err_fields(const char *body, size_t len, char *type, char *code,
		       char *msg, size_t n)
{
	json_t *root = body ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *e = json_object_get(root, "error");
	const char *t = json_string_value(json_object_get(e, "type"));
	const char *c = json_string_value(json_object_get(e, "code"));
	const char *m = json_string_value(json_object_get(e, "message"));

	snprintf(type, n, "%s", t ? t : "");
	snprintf(code, n, "%s", c ? c : "");
	snprintf(msg, n, "%s", m ? m : "");
	json_decref(root);
}

static enum wd_err_class by_status(long status)
{
	if (status == 429)
		return WD_ERRC_RATE_LIMIT;
	if (status == 529)
		return WD_ERRC_OVERLOADED;
	if (status == 408 || status == 504)
		return WD_ERRC_TIMEOUT;
	if (status >= 500)
		return WD_ERRC_SERVER;
	if (status == 401 || status == 403)
		return WD_ERRC_AUTH;
	if (status == 402)
		return WD_ERRC_QUOTA;
	return WD_ERRC_INVALID;
}

/* error.details.error_code of an Anthropic error body, "" if none */
static void anthropic_detail_code(const char *body, size_t len, char *code,
				  size_t n)
{
	json_t *root = body ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *d = json_object_get(json_object_get(root, "error"), "details");
	const char *c = json_string_value(json_object_get(d, "error_code"));
	snprintf(code, n, "%s", c ? c : "");
	json_decref(root);
}

/* Anthropic: error.type is one of invalid_request_error,
 * authentication_error, permission_error, not_found_error,
 * request_too_large, rate_limit_error, api_error, overloaded_error,
 * billing_error, timeout_error; a prompt over the context window is an
 * invalid_request_error "prompt is too long: N tokens > M maximum".
 * Spend limits: the tier's monthly cap is a 429 rate_limit_error whose
 * error.details.error_code is enforced_spend_limit_reached (no
 * retry-after; retrying fails until the month turns), a limit the
 * organisation or workspace set is a 400 invalid_request_error "You have
 * reached your specified (workspace) API usage limits": both quota. */
static enum wd_err_class anthropic_classify(long status, const char *body,
					    size_t len)
{
	char t[96], c[96], m[256];

	err_fields(body, len, t, c, m, sizeof(t));
	if (!strcmp(t, "rate_limit_error")) {
		anthropic_detail_code(body, len, c, sizeof(c));
		if (!strcmp(c, "enforced_spend_limit_reached"))
			return WD_ERRC_QUOTA;
		return WD_ERRC_RATE_LIMIT;
	}
	if (!strcmp(t, "overloaded_error"))
		return WD_ERRC_OVERLOADED;
	if (!strcmp(t, "api_error"))
		return WD_ERRC_SERVER;
	if (!strcmp(t, "timeout_error"))
		return WD_ERRC_TIMEOUT;
	if (!strcmp(t, "billing_error"))
		return WD_ERRC_QUOTA;
	if (!strcmp(t, "authentication_error") ||
	    !strcmp(t, "permission_error"))
		return WD_ERRC_AUTH;
	if (!strcmp(t, "invalid_request_error")) {
		if (strcasestr(m, "prompt is too long") ||
		    strcasestr(m, "context window"))
			return WD_ERRC_CONTEXT;
		if (strcasestr(m, "credit balance") ||
		    !strncmp(m, "You have reached your specified", 31))
			return WD_ERRC_QUOTA;
		return WD_ERRC_INVALID;
	}
	if (!strcmp(t, "not_found_error") || !strcmp(t, "request_too_large"))
		return WD_ERRC_INVALID;
	return by_status(status);
}

/* OpenAI: a 429 is a rate limit (code rate_limit_exceeded) or a quota or
 * spend limit (type insufficient_quota; code insufficient_quota,
 * credit_balance_exhausted, *_spend_limit_exceeded,
 * organization_usage_limit_exceeded) — same status, opposite remedy. */
static enum wd_err_class openai_classify(long status, const char *body,
					 size_t len)
{
	char t[96], c[96], m[256];

	err_fields(body, len, t, c, m, sizeof(t));
	if (!strcmp(t, "insufficient_quota") ||
	    !strcmp(c, "insufficient_quota") ||
	    !strcmp(c, "credit_balance_exhausted") ||
	    strstr(c, "spend_limit_exceeded") ||
	    !strcmp(c, "organization_usage_limit_exceeded"))
		return WD_ERRC_QUOTA;
	if (!strcmp(c, "context_length_exceeded"))
		return WD_ERRC_CONTEXT;
	if (!strcmp(c, "rate_limit_exceeded") || !strcmp(t, "requests") ||
	    !strcmp(t, "tokens"))
		return WD_ERRC_RATE_LIMIT;
	if (!strcmp(c, "invalid_api_key") || !strcmp(t, "authentication_error"))
		return WD_ERRC_AUTH;
	if (status == 503 && strcasestr(m, "overloaded"))
		return WD_ERRC_OVERLOADED;
	return by_status(status);
}

bool wd_err_class_retryable(enum wd_err_class c)
{
	return c == WD_ERRC_RATE_LIMIT || c == WD_ERRC_OVERLOADED ||
	       c == WD_ERRC_SERVER || c == WD_ERRC_TIMEOUT;
}

const char *wd_err_class_name(enum wd_err_class c)
{
	static const char *const n[] = {
	    [WD_ERRC_NONE] = "none",
	    [WD_ERRC_RATE_LIMIT] = "rate_limit",
	    [WD_ERRC_OVERLOADED] = "overloaded",
	    [WD_ERRC_SERVER] = "server",
	    [WD_ERRC_TIMEOUT] = "timeout",
	    [WD_ERRC_QUOTA] = "quota",
	    [WD_ERRC_AUTH] = "auth",
	    [WD_ERRC_INVALID] = "invalid_request",
	    [WD_ERRC_CONTEXT] = "context_exceeded",
	    [WD_ERRC_BAD_RESPONSE] = "bad_response",
	    [WD_ERRC_CIRCUIT_OPEN] = "circuit_open",
	};
	return (unsigned)c < WD_ARRAY_SIZE(n) && n[c] ? n[c] : "?";
}

/* ---- the table ---------------------------------------------------------- */

static const struct wd_stop_map anthropic_stops[] = {
    {"end_turn", WD_STOP_END_TURN},
    {"stop_sequence", WD_STOP_END_TURN},
    {"tool_use", WD_STOP_TOOL_USE},
    {"max_tokens", WD_STOP_MAX_TOKENS},
    {"refusal", WD_STOP_REFUSAL},
    {"pause_turn", WD_STOP_PAUSE},
    {"model_context_window_exceeded", WD_STOP_CONTEXT},
    {NULL, 0},
};

/* "eos": llama.cpp server's word for a natural end */
static const struct wd_stop_map openai_stops[] = {
    {"stop", WD_STOP_END_TURN},
    {"eos", WD_STOP_END_TURN},
    {"tool_calls", WD_STOP_TOOL_USE},
    {"function_call", WD_STOP_TOOL_USE},
    {"length", WD_STOP_MAX_TOKENS},
    {"content_filter", WD_STOP_REFUSAL},
    {NULL, 0},
};

static const struct wd_provider_desc table[] = {
    {
	.kind = WD_PROVIDER_ANTHROPIC,
	.name = "anthropic",
	.path = "/v1/messages",
	.auth_fmt = "x-api-key: %s",
	.version_hdr = "anthropic-version: 2023-06-01",
	.temperature_min = 0,
	.temperature_max = 1,
	.seed = false,
	.stops = anthropic_stops,
	.classify = anthropic_classify,
	.cache_read_x = 0.1,
	.cache_write_5m_x = 1.25,
	.cache_write_1h_x = 2.0,
	.cache_control = true,
	.ops = &wd_anthropic_ops,
    },
    {
	.kind = WD_PROVIDER_OPENAI,
	.name = "openai",
	.path = "/v1/chat/completions",
	.auth_fmt = "Authorization: Bearer %s",
	.temperature_min = 0,
	.temperature_max = 2,
	.seed = true,
	.stops = openai_stops,
	.classify = openai_classify,
	/* automatic caching: writes cost nothing extra; the read discount
	 * differs by model, so without a cached_input price a read is
	 * billed as plain input (never under-billed) */
	.cache_read_x = 1.0,
	.cache_write_5m_x = 0,
	.cache_write_1h_x = 0,
	.cache_control = false,
	.max_completion_tokens = true,
	.ops = &wd_openai_ops,
    },
    {
	.kind = WD_PROVIDER_SCRIPT,
	.name = "script",
	.temperature_min = 0,
	.temperature_max = 2,
	.seed = false,
	.stops = anthropic_stops,
	/* scripted usage has no cache: reads at the input price unless
	 * the price gives cached_input */
	.cache_read_x = 1.0,
	.cache_write_5m_x = 1.0,
	.cache_write_1h_x = 1.0,
    },
};

const struct wd_provider_desc *wd_provider_desc_of(enum wd_provider_kind k)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(table); i++)
		if (table[i].kind == k)
			return &table[i];
	return NULL;
}

const struct wd_provider_desc *wd_provider_desc_named(const char *name)
{
	for (size_t i = 0; name && i < WD_ARRAY_SIZE(table); i++)
		if (!strcmp(table[i].name, name))
			return &table[i];
	return NULL;
}

/* "anthropic, openai or script": the table's names */
static char kind_words[128];

static void build_kind_words(void)
{
	size_t n = WD_ARRAY_SIZE(table), o = 0;
	for (size_t i = 0; i < n && o < sizeof(kind_words); i++)
		o += (size_t)snprintf(kind_words + o, sizeof(kind_words) - o,
				      "%s%s",
				      i == 0	   ? ""
				      : i == n - 1 ? " or "
						   : ", ",
				      table[i].name);
}

const char *wd_provider_kind_words(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, build_kind_words);
	return kind_words;
}

void wd_resp_set_stop_desc(struct wd_complete_resp *resp, const char *raw,
			   const struct wd_provider_desc *d)
{
	free(resp->stop_raw);
	resp->stop_raw = wd_strdup(raw ? raw : "");
	if (!raw) {
		resp->stop_reason =
		    resp->n_tool_calls ? WD_STOP_TOOL_USE : WD_STOP_END_TURN;
		return;
	}
	resp->stop_reason = WD_STOP_OTHER;
	for (const struct wd_stop_map *m = d->stops; m->raw; m++)
		if (!strcmp(m->raw, raw)) {
			resp->stop_reason = m->stop;
			break;
		}
	/* compatible servers say "stop" next to tool calls */
	if (resp->n_tool_calls && resp->stop_reason == WD_STOP_END_TURN)
		resp->stop_reason = WD_STOP_TOOL_USE;
}

/* ---- parameters by model family ----------------------------------------- */

/* "claude-<family>-<major>[-<minor>]..." (the naming since Claude 4):
 * true with the version; the older "claude-3-5-sonnet-..." is not this */
static bool claude_version(const char *m, int *maj, int *min)
{
	static const char *const fam[] = {"opus-", "sonnet-", "haiku-"};
	if (strncmp(m, "claude-", 7))
		return false;
	m += 7;
	for (size_t i = 0; i < WD_ARRAY_SIZE(fam); i++) {
		size_t l = strlen(fam[i]);
		if (strncmp(m, fam[i], l) || m[l] < '0' || m[l] > '9')
			continue;
		char *e;
		*maj = (int)strtol(m + l, &e, 10);
		*min = 0;
		/* a minor is short; a date suffix (-20250929) is not one */
		if (*e == '-' && e[1] >= '0' && e[1] <= '9' &&
		    strspn(e + 1, "0123456789") <= 2)
			*min = (int)strtol(e + 1, NULL, 10);
		return true;
	}
	return false;
}

/* OpenAI's reasoning families (o1, o3, o4-mini, gpt-5...) */
static bool openai_reasoning(const char *m)
{
	if (m[0] == 'o' && m[1] >= '1' && m[1] <= '9' &&
	    (m[2] == 0 || m[2] == '-'))
		return true;
	return !strncmp(m, "gpt-5", 5);
}

struct wd_temp_range wd_model_temperature(const struct wd_provider_desc *d,
					  const char *model)
{
	struct wd_temp_range r = {d->temperature_min, d->temperature_max, NULL};
	int maj, min;
	if (!model)
		return r;
	/* Claude models after Opus 4.6 take no sampling parameters: a
	 * temperature is answered "`temperature` is deprecated for this
	 * model" (400) */
	if (d->kind == WD_PROVIDER_ANTHROPIC &&
	    claude_version(model, &maj, &min) &&
	    (maj > 4 || (maj == 4 && min >= 7)))
		r.fixed_why = "Claude models after Opus 4.6 take no "
			      "temperature (the API answers 400: "
			      "deprecated for this model)";
	/* reasoning models: "Only the default (1) value is supported" */
	if (d->kind == WD_PROVIDER_OPENAI && openai_reasoning(model)) {
		r.min = r.max = 1;
		r.fixed_why = "OpenAI's reasoning models take only the "
			      "default temperature, 1";
	}
	return r;
}

int wd_model_temperature_check(const struct wd_provider_desc *d,
			       const char *model, double temperature, char *why,
			       size_t n)
{
	struct wd_temp_range r = wd_model_temperature(d, model);
	if (temperature < 0)
		return 0;
	if (r.fixed_why && !(r.min == r.max && temperature == r.min)) {
		snprintf(why, n, "'temperature' %g: %s", temperature,
			 r.fixed_why);
		return -EINVAL;
	}
	if (temperature < r.min || temperature > r.max) {
		snprintf(why, n, "'temperature' %g is outside %g..%g",
			 temperature, r.min, r.max);
		return -EINVAL;
	}
	return 0;
}

/* ---- parameters at policy load ------------------------------------------ */

int wd_route_check_params(const struct wd_gateway_config *cfg,
			  const char *model, double temperature, char *why,
			  size_t n)
{
	const struct wd_alias *a = wd_gateway_config_alias(cfg, model);
	struct wd_route direct;
	const struct wd_route *routes = a ? a->routes : NULL;
	int nr = a ? a->n_routes : 0;

	if (!a && model && strchr(model, '/')) {
		const char *slash = strchr(model, '/');
		char prov[64];
		snprintf(prov, sizeof(prov), "%.*s", (int)(slash - model),
			 model);
		direct.provider = wd_gateway_config_provider(cfg, prov);
		direct.model = (char *)slash + 1;
		if (direct.provider >= 0) {
			routes = &direct;
			nr = 1;
		}
	}
	for (int i = 0; i < nr; i++) {
		const struct wd_provider_cfg *p =
		    &cfg->providers[routes[i].provider];
		const struct wd_provider_desc *d = wd_provider_desc_of(p->kind);
		char w[256];
		bool script = d->kind == WD_PROVIDER_SCRIPT;
		if (wd_model_temperature_check(d,
					       script ? NULL : routes[i].model,
					       temperature, w, sizeof(w)) < 0) {
			/* every step would get a 400 and fail over: the run
			 * would quietly use another provider's model */
			snprintf(why, n,
				 "%s, for route %d of model '%s' (%s/%s, a %s "
				 "provider)",
				 w, i + 1, model, p->name,
				 script ? "script" : routes[i].model, d->name);
			return -EINVAL;
		}
	}
	return 0;
}
