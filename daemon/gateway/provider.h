/* Wire formats of the HTTP providers: pure functions from the neutral
 * request to a JSON body, and from a response body back to the neutral
 * response. No I/O here, so the parsers are fuzzed directly
 * (tests/fuzz/fuzz_model_response.c).
 *
 * Parsers treat the body as hostile: any field may be missing, of the wrong
 * type, or huge; they never crash and either fill resp or return -EBADMSG
 * with a message naming what was wrong. */
#ifndef WD_GATEWAY_PROVIDER_H
#define WD_GATEWAY_PROVIDER_H

#include <jansson.h>

#include "gateway/gateway.h"
#include "policy/gateway_config.h"

struct wd_provider_ops {
	enum wd_provider_kind kind;
	/* New reference to the request body, or NULL with err set (-EINVAL). */
	json_t *(*build)(const struct wd_complete_req *req,
			 const struct wd_provider_cfg *prov, const char *model,
			 struct wd_err *err);
	/* 0, or -EBADMSG with err set. On success fills stop_reason,
	 * stop_raw, text, tool_calls, usage, model (if given), response_id. */
	int (*parse)(const char *body, size_t len,
		     struct wd_complete_resp *resp, struct wd_err *err);
	/* The provider's error message from an error body, "" if none. */
	void (*error_message)(const char *body, size_t len, char *out,
			      size_t outlen);
};

extern const struct wd_provider_ops wd_anthropic_ops;
extern const struct wd_provider_ops wd_openai_ops;

/* What a provider is, in one place (providers.c holds the table): the
 * config loader takes kind names and parameter ranges from it, the gateway
 * its endpoint, auth header, stop-reason map, error classes and cache
 * pricing. Adding a provider = its wire-format file + one table row.
 * Values are the providers' documented ones (Anthropic Messages API,
 * OpenAI Chat Completions), not what a fake or a proxy happens to do. */
struct wd_stop_map {
	const char *raw; /* the provider's word */
	enum wd_stop_reason stop;
};

struct wd_provider_desc {
	enum wd_provider_kind kind;
	const char *name;	 /* `kind:` word in gateway.yaml */
	const char *path;	 /* appended to base_url; NULL: no HTTP */
	const char *auth_fmt;	 /* header line, %s = the key */
	const char *version_hdr; /* fixed header or NULL */
	/* temperature the API takes (Anthropic 0..1, OpenAI 0..2) */
	double temperature_min, temperature_max;
	bool seed;			 /* honours a request `seed` */
	const struct wd_stop_map *stops; /* {NULL} terminated */
	/* one error response (status, body) -> class */
	enum wd_err_class (*classify)(long status, const char *body,
				      size_t len);
	/* cache pricing as multiples of the model's input price: a cache
	 * read, a write that lives 5 minutes, one that lives an hour (0 =
	 * the provider bills no writes: OpenAI's caching is automatic) */
	double cache_read_x, cache_write_5m_x, cache_write_1h_x;
	bool cache_control; /* requests carry explicit cache breakpoints */
	/* takes `max_tokens_param: max_completion_tokens` (OpenAI's
	 * reasoning models want it instead of max_tokens) */
	bool max_completion_tokens;
	const struct wd_provider_ops *ops; /* NULL: script */
};

const struct wd_provider_desc *wd_provider_desc_of(enum wd_provider_kind k);

/* The temperature a model takes: its provider's range, narrowed by model
 * family where the API documents a narrower one. fixed_why non-NULL: the
 * model takes no temperature but its default (a value sent is a 400), and
 * says why. */
struct wd_temp_range {
	double min, max;
	const char *fixed_why;
};
struct wd_temp_range wd_model_temperature(const struct wd_provider_desc *d,
					  const char *model);
/* 0, or -EINVAL with a message in why: `temperature` (< 0 = not set) is
 * one this model cannot take */
int wd_model_temperature_check(const struct wd_provider_desc *d,
			       const char *model, double temperature, char *why,
			       size_t n);
const struct wd_provider_desc *wd_provider_desc_named(const char *name);
/* "anthropic, openai or script" for messages */
const char *wd_provider_kind_words(void);
/* The stop reason for `raw` by the provider's map; a response with tool
 * calls whose raw word means end of turn is tool use. */
void wd_resp_set_stop_desc(struct wd_complete_resp *resp, const char *raw,
			   const struct wd_provider_desc *d);
/* Does the error class make another attempt on the same route useful? */
bool wd_err_class_retryable(enum wd_err_class c);

/* Shared helpers (provider_common.c). */
/* Tool schema text -> JSON object; NULL + err if it is not an object. */
json_t *wd_tool_parameters(const struct wd_tool_schema *t, struct wd_err *err);
/* Parse a tool-call argument string (OpenAI sends JSON text): an object, or
 * the text itself as a JSON string with *parse_error = true. "" means {}. */
json_t *wd_parse_arguments(const char *s, size_t len, bool *parse_error);
/* NULL, "" or only whitespace: Anthropic rejects such text blocks, and no
 * provider gains from one being sent back */
bool wd_text_blank(const char *s);
/* A JSON integer >= 0 as uint64, else 0. */
uint64_t wd_json_count(json_t *v);

/* "model" and "id" of a response body into resp. */
void wd_resp_set_model_id(struct wd_complete_resp *resp, json_t *root);
/* An error body's {"error": {"type", "message"}} (or {"error": "text"},
 * from some compatible servers) as "type: message"; "" if neither. */
void wd_error_body_message(const char *body, size_t len, char *out,
			   size_t outlen);
/* A JSON string from C text that may not be valid UTF-8 (never NULL). */
json_t *wd_json_text(const char *s);
/* The neutral form of a request (the script provider's raw_request). */
json_t *wd_neutral_request(const struct wd_complete_req *req,
			   const char *model);

#endif
