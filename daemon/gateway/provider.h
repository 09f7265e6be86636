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

/* Shared helpers (provider_common.c). */
/* Tool schema text -> JSON object; NULL + err if it is not an object. */
json_t *wd_tool_parameters(const struct wd_tool_schema *t, struct wd_err *err);
/* Parse a tool-call argument string (OpenAI sends JSON text): an object, or
 * {"_raw": text} with *parse_error = true. "" means {}. */
json_t *wd_parse_arguments(const char *s, size_t len, bool *parse_error);
/* A JSON integer >= 0 as uint64, else 0. */
uint64_t wd_json_count(json_t *v);

/* The provider's stop reason `raw` (may be NULL) into resp: stop_raw, and
 * stop_reason by the NULL-terminated lists of names meaning end of turn,
 * tool use and the token limit; a response with tool calls is tool use. */
struct wd_stop_names {
	const char *const *end, *const *tool, *const *max;
};
void wd_resp_set_stop(struct wd_complete_resp *resp, const char *raw,
		      const struct wd_stop_names *names);
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
