/* Model gateway: one provider-neutral call, many providers.
 *
 *   caller (agent loop) ── wd_gateway_complete(req) ──▶ alias → failover list
 *       [(provider, model), ...] → per entry: retries with backoff on 429 /
 *       5xx / connect errors / timeouts (Retry-After honoured) → next entry.
 *
 * Providers (policy/gateway.yaml, see gateway_config.h):
 *   anthropic  Messages API   POST {base}/v1/messages
 *   openai     Chat Completions POST {base}/v1/chat/completions (also any
 *              OpenAI-compatible server: llama.cpp server, vLLM, Ollama)
 *   script     a deterministic scripted model read from a file
 *              (policy/models/NAME.script, format in gateway/script.h)
 *
 * Conversation model. A request is an array of messages:
 *   WD_ROLE_SYSTEM     text (providers that have a system slot get it there;
 *                      several system messages are joined with "\n\n")
 *   WD_ROLE_USER       text
 *   WD_ROLE_ASSISTANT  text (may be NULL) + tool_calls[] (may be empty);
 *                      pass back exactly what a previous response returned
 *   WD_ROLE_TOOL       one tool result: tool_call_id, text (the content),
 *                      is_error. Consecutive tool messages answering one
 *                      assistant turn are sent together (Anthropic: one user
 *                      message with several tool_result blocks).
 *
 * Usage is normalised: input_tokens counts ALL prompt tokens including the
 * ones served from a cache; cached_tokens is the cached part of it
 * (Anthropic: input_tokens + cache_read_input_tokens +
 * cache_creation_input_tokens, cached = cache_read_input_tokens; OpenAI:
 * prompt_tokens, cached = prompt_tokens_details.cached_tokens).
 * cost_usd = (input - cached) * price.input + cached * price.cached_input +
 * output * price.output, prices per million tokens from gateway.yaml.
 *
 * Secrets: API keys come only from the environment or a file, are sent only
 * in request headers, and are redacted ("[REDACTED]") from every string the
 * gateway returns: error messages, raw bodies, attempt errors. raw_request
 * never contains headers.
 *
 * Threads: a struct wd_gateway is immutable after wd_gateway_new() and may
 * be used from any number of threads at once. It keeps a pool of curl easy
 * handles and a curl share (connections, DNS, TLS sessions) so calls reuse
 * keep-alive connections. On a policy reload, build a new gateway and swap;
 * free the old one when no call is using it (wd_gateway_ref/unref).
 */
#ifndef WD_GATEWAY_H
#define WD_GATEWAY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"

struct wd_gateway_config; /* policy/gateway_config.h */
struct wd_gateway;

enum wd_role {
	WD_ROLE_SYSTEM,
	WD_ROLE_USER,
	WD_ROLE_ASSISTANT,
	WD_ROLE_TOOL,
};

struct wd_tool_call {
	char *id;	   /* provider's id ("toolu_...", "call_..."); the
			    * script provider makes "call_<step>_<i>" */
	char *name;	   /* tool name */
	json_t *arguments; /* a JSON object (owned reference); with
			    * parse_error, whatever the model sent instead
			    * (OpenAI: its argument text, as a JSON string),
			    * sent back to the model as it was */
	bool parse_error;
};

struct wd_msg {
	enum wd_role role;
	const char
	    *text; /* system/user/assistant text, tool result content;
		    * may be NULL for an assistant turn with only calls */
	/* WD_ROLE_ASSISTANT */
	const struct wd_tool_call *tool_calls;
	int n_tool_calls;
	/* WD_ROLE_TOOL */
	const char *tool_call_id;
	const char *tool_name; /* optional; helps the script provider */
	bool is_error;
};

struct wd_tool_schema {
	const char *name;
	const char *description;
	const char *parameters_json; /* a JSON Schema object as text (e.g. the
				      * manifest's args_schema); NULL =
				      * {"type":"object"} */
};

struct wd_attribution {
	const char *team, *agent, *run_id, *user; /* each may be NULL */
};

struct wd_complete_req {
	const char *model; /* an alias from gateway.yaml ("default", "claude"),
			    * or "provider/model" to bypass aliases */
	const struct wd_msg *msgs;
	int n_msgs;
	const struct wd_tool_schema *tools;
	int n_tools;
	uint32_t max_tokens; /* 0 = 4096 */
	double temperature;  /* < 0 = provider default */
	/* OpenAI Chat Completions `seed` (best effort there); a route whose
	 * provider has no seed (Anthropic) refuses a request that sets one
	 * rather than dropping it (replay's pinned determinism) */
	bool seed_set;
	int64_t seed;
	struct wd_attribution attr;
	uint64_t deadline_ns; /* CLOCK_MONOTONIC (wd_now_ns()); 0 = none. No
			       * attempt or backoff sleep goes past it. */
};

/* Neutral stop reasons; what the runtime does with each is in
 * runtime/loop.c (README "Model gateway"). */
enum wd_stop_reason {
	WD_STOP_END_TURN,
	WD_STOP_TOOL_USE,
	WD_STOP_MAX_TOKENS, /* the answer was cut at max_tokens */
	WD_STOP_OTHER,	    /* a word the provider table does not know */
	WD_STOP_REFUSAL,    /* Anthropic refusal, OpenAI content_filter or
			     * message.refusal: text is the provider's */
	WD_STOP_PAUSE,	    /* Anthropic pause_turn: send the turn back */
	WD_STOP_CONTEXT,    /* model_context_window_exceeded */
};

/* Why an attempt failed, from the provider's own error body. Only the
 * first four are worth another attempt on the same route. */
enum wd_err_class {
	WD_ERRC_NONE,
	WD_ERRC_RATE_LIMIT,   /* 429 rate_limit_error / rate_limit_exceeded */
	WD_ERRC_OVERLOADED,   /* 529 overloaded_error */
	WD_ERRC_SERVER,	      /* 5xx api_error / server_error */
	WD_ERRC_TIMEOUT,      /* no answer in time, connection failed */
	WD_ERRC_QUOTA,	      /* insufficient_quota, billing: not until a
			       * human pays; retrying cannot help */
	WD_ERRC_AUTH,	      /* 401/403, key missing */
	WD_ERRC_INVALID,      /* 400 invalid_request_error & co */
	WD_ERRC_CONTEXT,      /* prompt longer than the context window */
	WD_ERRC_BAD_RESPONSE, /* 2xx we could not parse, too big */
	WD_ERRC_CIRCUIT_OPEN, /* skipped: the route's breaker is open */
};
const char *wd_err_class_name(enum wd_err_class c);

struct wd_usage {
	uint64_t input_tokens; /* all prompt tokens, cached included */
	uint64_t output_tokens;
	uint64_t cached_tokens; /* part of input_tokens read from a cache */
	uint64_t cache_write_tokens;	/* part of input_tokens written to a
					 * cache (Anthropic
					 * cache_creation_input_tokens) */
	uint64_t cache_write_1h_tokens; /* the part of cache_write_tokens
					 * kept an hour */
};

/* One HTTP (or script) attempt, in order. */
struct wd_attempt {
	char provider[64];
	char model[128];
	int http_status; /* 0 if no HTTP response (connect error, timeout) */
	char error[256]; /* "" on success; redacted */
	uint64_t latency_us;
	uint64_t wait_ms;	     /* backoff slept BEFORE this attempt */
	enum wd_err_class err_class; /* WD_ERRC_NONE on success */
};

struct wd_complete_resp {
	enum wd_stop_reason stop_reason;
	char *stop_raw; /* provider's own word ("end_turn", "tool_calls") */
	char *text;	/* concatenated text blocks; "" if none, never NULL
			 * after success */
	struct wd_tool_call *tool_calls;
	int n_tool_calls;
	struct wd_usage usage;
	double cost_usd;
	bool priced;	/* false: no price for the model (cost_usd = 0) */
	char *provider; /* provider name that answered */
	char *model;	/* provider-side model that answered */
	char *response_id;
	char *system_fingerprint; /* OpenAI's, when the response gives one */
	/* why the model stopped, when the provider says more than its word:
	 * Anthropic's stop_details of a refusal ("category: explanation") */
	char *stop_detail;
	uint64_t latency_us; /* whole call including retries and backoff */
	struct wd_attempt *attempts;
	int n_attempts;
	char *raw_request;  /* body sent on the successful (or last) attempt;
			     * redacted; no headers */
	char *raw_response; /* body received on that attempt; redacted */
};

/* Build a gateway from a loaded config. Takes ownership of `cfg` (freed on
 * failure too). Reads API keys now (env / files); a provider whose key is
 * missing is kept but every attempt on it fails with "api key not set"
 * (so failover still works and the demo runs without keys). NULL + errno
 * and err filled on failure. */
struct wd_gateway *wd_gateway_new(struct wd_gateway_config *cfg,
				  struct wd_err *err);
/* Load policy/gateway.yaml (or any path) and build a gateway. */
struct wd_gateway *wd_gateway_open(const char *path, struct wd_err *err);
struct wd_gateway *wd_gateway_ref(struct wd_gateway *gw);
void wd_gateway_unref(struct wd_gateway *gw); /* NULL ok */

/* Is `model` resolvable (an alias or provider/model)? For agent-definition
 * checks at policy load. */
bool wd_gateway_has_model(const struct wd_gateway *gw, const char *model);

/* One model call. Blocking; thread-safe. `resp` is always initialised (even
 * on failure: attempts[] tell what happened) and must be released with
 * wd_complete_resp_free(). Returns 0, or -errno with err filled:
 *   -ENOENT       unknown model alias
 *   -EINVAL       bad request (e.g. a tool schema that is not JSON)
 *   -ETIMEDOUT    deadline reached
 *   -EPROTO       every entry failed; err gives each route's last error
 *   -E2BIG        as -EPROTO, the last route saying the prompt is over
 *                 its context window (fit and call again)
 *   -EBADMSG      (inside attempts) a response that could not be parsed */
int wd_gateway_complete(struct wd_gateway *gw,
			const struct wd_complete_req *req,
			struct wd_complete_resp *resp, struct wd_err *err);
void wd_complete_resp_free(struct wd_complete_resp *resp);

/* The route `model` resolves to, in failover order, as recorded in a
 * run's trace: [{provider, kind, model, seed}] (seed: the provider honours
 * a request seed). A new reference, or NULL when `model` does not
 * resolve. */
json_t *wd_gateway_route_json(const struct wd_gateway *gw, const char *model);

/* The routes' circuit breakers: [{provider, model, state
 * (closed|open|half_open), failures, opened, open_ms_left, last_error}]
 * (/metrics, warden status). A new reference. */
json_t *wd_gateway_breakers_json(struct wd_gateway *gw);

/* The config the gateway was built from (policy load checks). */
const struct wd_gateway_config *
wd_gateway_config_of(const struct wd_gateway *gw);

/* Called after every successful completion (from the calling thread) with
 * the request's attribution and the cost: the daemon's cost ledger hooks
 * in here. Set before the gateway is shared between threads. */
typedef void (*wd_gateway_usage_fn)(void *ud, const struct wd_attribution *a,
				    const struct wd_complete_resp *resp);
void wd_gateway_set_usage_cb(struct wd_gateway *gw, wd_gateway_usage_fn fn,
			     void *ud);

const char *wd_role_name(enum wd_role r);
const char *wd_stop_reason_name(enum wd_stop_reason s);
/* Back from wd_stop_reason_name's word (records); WD_STOP_OTHER if none */
enum wd_stop_reason wd_stop_reason_parse(const char *s);

/* Deep-copy helpers for callers that keep tool calls across steps. */
void wd_tool_call_copy(struct wd_tool_call *dst,
		       const struct wd_tool_call *src);
void wd_tool_call_clear(struct wd_tool_call *c);

#endif
