/* Gateway pure code: gateway.yaml parser, script provider (the shipped demo
 * script), Anthropic/OpenAI request building and response parsing, cost. */
#include <jansson.h>
#include <string.h>

#include "gateway/gateway.h"
#include "gateway/provider.h"
#include "gateway/script.h"
#include "policy/gateway_config.h"
#include "t.h"

static int load(const char *yaml, struct wd_gateway_config **cfg,
		struct wd_err *err)
{
	memset(err, 0, sizeof(*err));
	return wd_gateway_config_load_str("gw.yaml", "policy", yaml,
					  strlen(yaml), cfg, err);
}

static void test_config(void)
{
	struct wd_gateway_config *cfg = NULL;
	struct wd_err err;
	int r;

	r = wd_gateway_config_load_file("policy/gateway.yaml", &cfg, &err);
	T_OK(r == 0, "config-shipped-loads", "%s", err.msg);
	if (!r) {
		const struct wd_alias *a =
		    wd_gateway_config_alias(cfg, "default");
		T_OK(a && a->n_routes == 1 && a->routes[0].script,
		     "config-default-is-script",
		     "default alias not the script");
		a = wd_gateway_config_alias(cfg, "claude");
		T_OK(a && a->n_routes == 2 &&
			 cfg->providers[a->routes[0].provider].kind ==
			     WD_PROVIDER_ANTHROPIC,
		     "config-claude-failover", "claude alias wrong");
		const struct wd_price *p = wd_gateway_config_price(
		    cfg, "anthropic", "claude-sonnet-4-5");
		T_OK(p && p->input == 3.0 && p->output == 15.0 &&
			 p->cached_input == 0.30,
		     "config-price", "price wrong");
		T_OK(cfg->retry.max_attempts == 3, "config-retries", "%u",
		     cfg->retry.max_attempts);
		wd_gateway_config_free(cfg);
	}

	r = load("providers:\n  a: {kind: openai, base_url: http://x, "
		 "api_key_env: K, timout_ms: 5}\nmodels:\n  m: [{provider: a, "
		 "model: x}]\n",
		 &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "gw.yaml:2:") &&
		 strstr(err.msg, "unknown key 'timout_ms'"),
	     "config-unknown-key-error", "r=%d msg=%s", r, err.msg);

	r = load("providers:\n  a: {kind: openai, base_url: http://x}\n"
		 "models:\n  m: [{provider: b, model: x}]\n",
		 &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "gw.yaml:4:") &&
		 strstr(err.msg, "no provider named 'b'"),
	     "config-dangling-provider", "r=%d msg=%s", r, err.msg);

	r = load("providers:\n  a: {kind: gemini, base_url: http://x}\n"
		 "models:\n  m: [{provider: a, model: x}]\n",
		 &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "gw.yaml:2:") &&
		 strstr(err.msg, "'kind'"),
	     "config-bad-kind", "r=%d msg=%s", r, err.msg);

	r = load("providers:\n  a: {kind: openai, base_url: http://x, "
		 "api_key: sk-123}\nmodels:\n  m: [{provider: a, model: x}]\n",
		 &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "unknown key 'api_key'") &&
		 !strstr(err.msg, "sk-123"),
	     "config-no-inline-key", "r=%d msg=%s", r, err.msg);

	r = load("providers:\n  a: {kind: openai, base_url: http://x}\n"
		 "  a: {kind: openai, base_url: http://y}\n"
		 "models:\n  m: [{provider: a, model: x}]\n",
		 &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "gw.yaml:3:") &&
		 strstr(err.msg, "duplicate key 'a'"),
	     "config-duplicate-key", "r=%d msg=%s", r, err.msg);

	r = load("providers:\n  s: {kind: script}\nmodels:\n  m: [{provider: "
		 "s, model: models/nope.script}]\n",
		 &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "gw.yaml:4:") &&
		 strstr(err.msg, "nope.script"),
	     "config-missing-script", "r=%d msg=%s", r, err.msg);

	r = load("providers:\n  a: {kind: openai, base_url: http://x}\n"
		 "models:\n  m: [{provider: a, model: x}]\nretries: "
		 "{max_attempts: 0}\nprices:\n  x: {input: -1, output: 2}\n",
		 &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "gw.yaml:5:") &&
		 strstr(err.msg, "gw.yaml:7:"),
	     "config-several-errors", "r=%d msg=%s", r, err.msg);

	r = load("providers:\n  a: {kind: openai, base_url: http://x, "
		 "max_tokens_param: max_tokns}\nmodels:\n  m: [{provider: a, "
		 "model: x}]\n",
		 &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "gw.yaml:2:") &&
		 strstr(err.msg, "'max_tokens_param'"),
	     "config-max-tokens-param", "r=%d msg=%s", r, err.msg);

	r = load("providers: [1, 2\n", &cfg, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "gw.yaml:"), "config-yaml-syntax",
	     "r=%d msg=%s", r, err.msg);
}

/* Run the shipped demo script through the whole story. */
static void test_demo_script(void)
{
	struct wd_script *s = NULL;
	struct wd_err err = {0};
	struct wd_complete_resp resp = {0};
	struct wd_msg msgs[16];
	struct wd_tool_call calls[4][1];
	int n = 0, r;
	const char *task = "Calculate the average of this list of numbers and "
			   "tell me if it's above 50: 45, 80, 62 and 63";
	const char *results[] = {
	    "{\"status\":\"ok\",\"exit_code\":0,\"stdout\":\"average 62.5 of 4 "
	    "numbers; above 50: yes\\n\",\"stderr\":\"\"}",
	    "{\"status\":\"error\",\"exit_code\":7,\"stdout\":\"\",\"stderr\":"
	    "\"curl: (7) Couldn't "
	    "connect\",\"denials\":[{\"kind\":\"egress\"}]}",
	    "{\"status\":\"ok\",\"exit_code\":0,\"stdout\":\"DRY RUN\"}"};
	const char *want_tool[] = {"run_python", "fetch_url",
				   "send_customer_email"};

	r = wd_script_load_file("policy/models/demo.script", &s, &err);
	T_OK(r == 0, "script-demo-loads", "%s", err.msg);
	if (r)
		return;
	msgs[n++] = (struct wd_msg){.role = WD_ROLE_SYSTEM, .text = "analyst"};
	msgs[n++] = (struct wd_msg){.role = WD_ROLE_USER, .text = task};
	for (int step = 0; step < 3; step++) {
		struct wd_complete_req req = {
		    .model = "default", .msgs = msgs, .n_msgs = n};
		memset(&resp, 0, sizeof(resp));
		r = wd_script_complete(s, &req, &resp, &err);
		char name[64];
		snprintf(name, sizeof(name), "script-demo-step%d-%s", step,
			 want_tool[step]);
		T_OK(r == 0 && resp.stop_reason == WD_STOP_TOOL_USE &&
			 resp.n_tool_calls == 1 &&
			 !strcmp(resp.tool_calls[0].name, want_tool[step]),
		     name, "r=%d stop=%d n=%d", r, resp.stop_reason,
		     resp.n_tool_calls);
		if (resp.n_tool_calls != 1) {
			wd_complete_resp_free(&resp);
			break;
		}
		if (step == 0) {
			const char *code = json_string_value(json_object_get(
			    resp.tool_calls[0].arguments, "code"));
			T_OK(code && strstr(code, "nums = [45, 80, 62, 63]"),
			     "script-task-numbers", "code=%s", code);
		}
		if (step == 2) {
			json_t *rc = json_object_get(
			    resp.tool_calls[0].arguments, "recipients");
			const char *body = json_string_value(json_object_get(
			    resp.tool_calls[0].arguments, "body"));
			T_OK(json_array_size(rc) == 2 && body &&
				 strstr(body, "average 62.5 of 4 numbers; "
					      "above 50: yes."),
			     "script-result-template", "body=%s", body);
		}
		wd_tool_call_copy(&calls[step][0], &resp.tool_calls[0]);
		msgs[n++] = (struct wd_msg){.role = WD_ROLE_ASSISTANT,
					    .text = NULL,
					    .tool_calls = calls[step],
					    .n_tool_calls = 1};
		msgs[n++] = (struct wd_msg){.role = WD_ROLE_TOOL,
					    .text = results[step],
					    .tool_call_id = calls[step][0].id,
					    .is_error = step == 1};
		wd_complete_resp_free(&resp);
	}
	struct wd_complete_req req = {
	    .model = "default", .msgs = msgs, .n_msgs = n};
	memset(&resp, 0, sizeof(resp));
	r = wd_script_complete(s, &req, &resp, &err);
	T_OK(r == 0 && resp.stop_reason == WD_STOP_END_TURN &&
		 resp.n_tool_calls == 0 &&
		 strstr(resp.text, "average 62.5 of 4 numbers; above 50: yes"),
	     "script-demo-final-answer", "text=%s", resp.text);
	T_OK(resp.usage.input_tokens > 0 && resp.usage.output_tokens > 0,
	     "script-usage-estimated", "in=%lu out=%lu",
	     (unsigned long)resp.usage.input_tokens,
	     (unsigned long)resp.usage.output_tokens);
	wd_complete_resp_free(&resp);
	for (int i = 0; i < 3; i++)
		wd_tool_call_clear(&calls[i][0]);
	wd_script_free(s);

	/* no list in the task: the demo model asks for one */
	r = wd_script_load_file("policy/models/demo.script", &s, &err);
	struct wd_msg ask[] = {
	    {.role = WD_ROLE_USER,
	     .text = "Calculate the average and tell me if it's above 50"}};
	req = (struct wd_complete_req){
	    .model = "default", .msgs = ask, .n_msgs = 1};
	memset(&resp, 0, sizeof(resp));
	if (!r)
		r = wd_script_complete(s, &req, &resp, &err);
	T_OK(r == 0 && resp.n_tool_calls == 0 &&
		 resp.stop_reason == WD_STOP_END_TURN &&
		 strstr(resp.text, "Which numbers?"),
	     "script-demo-asks-for-numbers", "r=%d text=%s", r,
	     resp.text ? resp.text : "");
	wd_complete_resp_free(&resp);
	wd_script_free(s);

	/* bad scripts: file:line:col */
	const char *bad = "# c\n\n{\"step\": 0, \"txt\": \"x\"}\n";
	r = wd_script_load_str("x.script", bad, strlen(bad), &s, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "x.script:3:") &&
		 strstr(err.msg, "unknown key 'txt'"),
	     "script-unknown-key", "%s", err.msg);
	bad = "{\"text\": \"{{reslt}}\"}\n";
	r = wd_script_load_str("x.script", bad, strlen(bad), &s, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "x.script:1:"),
	     "script-bad-template", "%s", err.msg);
	bad = "{\"text\": \"a\",\n";
	r = wd_script_load_str("x.script", bad, strlen(bad), &s, &err);
	T_OK(r == -EINVAL && strstr(err.msg, "x.script:1:"), "script-bad-json",
	     "%s", err.msg);
}

static void test_wire(void)
{
	struct wd_tool_call tc = {.id = "toolu_1",
				  .name = "run_python",
				  .arguments = json_pack("{s:s}", "code", "1")};
	struct wd_msg msgs[] = {
	    {.role = WD_ROLE_SYSTEM, .text = "sys"},
	    {.role = WD_ROLE_USER, .text = "task"},
	    {.role = WD_ROLE_ASSISTANT,
	     .text = "thinking",
	     .tool_calls = &tc,
	     .n_tool_calls = 1},
	    {.role = WD_ROLE_TOOL,
	     .text = "boom",
	     .tool_call_id = "toolu_1",
	     .is_error = true},
	    {.role = WD_ROLE_USER, .text = "more \xff bytes"},
	};
	struct wd_tool_schema tools[] = {
	    {.name = "run_python",
	     .description = "py",
	     .parameters_json = "{\"type\":\"object\"}"}};
	struct wd_complete_req req = {.model = "m",
				      .msgs = msgs,
				      .n_msgs = 5,
				      .tools = tools,
				      .n_tools = 1,
				      .temperature = -1};
	struct wd_err err = {0};
	json_t *b = wd_anthropic_ops.build(&req, NULL, "claude-x", &err);
	json_t *m = json_object_get(b, "messages");

	T_OK(b &&
		 !strcmp(json_string_value(json_object_get(b, "system")),
			 "sys") &&
		 json_array_size(m) == 3 &&
		 json_integer_value(json_object_get(b, "max_tokens")) == 4096 &&
		 !json_object_get(b, "temperature"),
	     "anthropic-build-shape", "%s", json_dumps(b, JSON_COMPACT));
	json_t *u2 = json_object_get(json_array_get(m, 2), "content");
	json_t *tr = json_array_get(u2, 0);
	T_OK(!strcmp(json_string_value(json_object_get(tr, "type")),
		     "tool_result") &&
		 !strcmp(json_string_value(json_object_get(tr, "tool_use_id")),
			 "toolu_1") &&
		 json_is_true(json_object_get(tr, "is_error")) &&
		 json_array_size(u2) == 2,
	     "anthropic-build-tool-result", "%s", json_dumps(u2, JSON_COMPACT));
	T_OK(strstr(json_string_value(
			json_object_get(json_array_get(u2, 1), "text")),
		    "\xef\xbf\xbd") != NULL,
	     "build-invalid-utf8-kept", "invalid bytes dropped");
	json_decref(b);

	struct wd_provider_cfg mct = {.max_completion_tokens = true};
	b = wd_openai_ops.build(&req, &mct, "gpt-x", &err);
	m = json_object_get(b, "messages");
	json_t *am = json_array_get(m, 2);
	json_t *fn = json_object_get(
	    json_array_get(json_object_get(am, "tool_calls"), 0), "function");
	T_OK(json_array_size(m) == 5 &&
		 !strcmp(json_string_value(json_object_get(fn, "arguments")),
			 "{\"code\":\"1\"}") &&
		 !strcmp(json_string_value(json_object_get(json_array_get(m, 3),
							   "tool_call_id")),
			 "toolu_1") &&
		 json_integer_value(
		     json_object_get(b, "max_completion_tokens")) == 4096 &&
		 !json_object_get(b, "max_tokens"),
	     "openai-build-shape", "%s", json_dumps(b, JSON_COMPACT));
	json_decref(b);
	json_decref(tc.arguments);

	const char *ar =
	    "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
	    "\"model\":\"claude-x-2025\",\"content\":[{\"type\":\"text\","
	    "\"text\":\"hi\"},{\"type\":\"tool_use\",\"id\":\"toolu_9\","
	    "\"name\":\"f\",\"input\":{\"a\":1}}],\"stop_reason\":\"tool_use\","
	    "\"usage\":{\"input_tokens\":100,\"cache_read_input_tokens\":50,"
	    "\"cache_creation_input_tokens\":0,\"output_tokens\":20}}";
	struct wd_complete_resp resp = {0};
	int r = wd_anthropic_ops.parse(ar, strlen(ar), &resp, &err);
	T_OK(r == 0 && resp.n_tool_calls == 1 &&
		 !strcmp(resp.tool_calls[0].id, "toolu_9") &&
		 json_integer_value(
		     json_object_get(resp.tool_calls[0].arguments, "a")) == 1 &&
		 !strcmp(resp.text, "hi") &&
		 resp.stop_reason == WD_STOP_TOOL_USE &&
		 resp.usage.input_tokens == 150 &&
		 resp.usage.cached_tokens == 50 &&
		 resp.usage.output_tokens == 20,
	     "anthropic-parse", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);

	/* a classifier refusal: empty content, the why in stop_details */
	const char *rf =
	    "{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\","
	    "\"model\":\"claude-x\",\"content\":[],\"stop_reason\":"
	    "\"refusal\",\"stop_details\":{\"type\":\"refusal\","
	    "\"category\":\"cyber\",\"explanation\":\"This request was "
	    "declined.\"},\"usage\":{\"input_tokens\":10,"
	    "\"output_tokens\":0}}";
	memset(&resp, 0, sizeof(resp));
	r = wd_anthropic_ops.parse(rf, strlen(rf), &resp, &err);
	T_OK(r == 0 && resp.stop_reason == WD_STOP_REFUSAL &&
		 resp.stop_detail &&
		 !strcmp(resp.stop_detail, "cyber: This request was declined."),
	     "anthropic-refusal-stop-details", "r=%d %s", r,
	     resp.stop_detail ? resp.stop_detail : "(none)");
	wd_complete_resp_free(&resp);

	const char *orr =
	    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"model\":"
	    "\"gpt-x\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
	    "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
	    "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
	    "\"{\\\"a\\\": [1,2]}\"}},{\"type\":\"function\",\"function\":{"
	    "\"name\":\"g\",\"arguments\":\"{oops\"}}]},\"finish_reason\":"
	    "\"stop\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":"
	    "7,\"prompt_tokens_details\":{\"cached_tokens\":30}}}";
	r = wd_openai_ops.parse(orr, strlen(orr), &resp, &err);
	T_OK(r == 0 && resp.n_tool_calls == 2 &&
		 !strcmp(resp.tool_calls[0].id, "call_1") &&
		 json_array_size(
		     json_object_get(resp.tool_calls[0].arguments, "a")) == 2 &&
		 !resp.tool_calls[0].parse_error &&
		 resp.tool_calls[1].parse_error &&
		 !strncmp(resp.tool_calls[1].id, "call_", 5) &&
		 resp.stop_reason == WD_STOP_TOOL_USE &&
		 resp.usage.input_tokens == 100 &&
		 resp.usage.cached_tokens == 30 && !strcmp(resp.text, ""),
	     "openai-parse-defensive", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);

	r = wd_openai_ops.parse("{\"choices\":[]}", 14, &resp, &err);
	T_OK(r == -EBADMSG && strstr(err.msg, "choices[0].message"),
	     "openai-parse-no-choice", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);
	r = wd_anthropic_ops.parse("<html>", 6, &resp, &err);
	T_OK(r == -EBADMSG && strstr(err.msg, "not JSON"),
	     "anthropic-parse-not-json", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);
}

/* The provider table's words, as the Anthropic and OpenAI references
 * give them. */
static void test_table(void)
{
	const struct wd_provider_desc *an =
	    wd_provider_desc_of(WD_PROVIDER_ANTHROPIC);
	const struct wd_provider_desc *oa =
	    wd_provider_desc_of(WD_PROVIDER_OPENAI);
	const char *quota = "{\"error\":{\"message\":\"You exceeded your "
			    "current quota\",\"type\":\"insufficient_quota\","
			    "\"param\":null,\"code\":\"insufficient_quota\"}}";
	const char *rl = "{\"error\":{\"message\":\"Rate limit reached\","
			 "\"type\":\"requests\",\"code\":\"rate_limit_"
			 "exceeded\"}}";
	const char *ctx = "{\"error\":{\"message\":\"too long\",\"type\":"
			  "\"invalid_request_error\",\"code\":\"context_"
			  "length_exceeded\"}}";
	const char *ov = "{\"type\":\"error\",\"error\":{\"type\":"
			 "\"overloaded_error\",\"message\":\"Overloaded\"}}";
	const char *big = "{\"type\":\"error\",\"error\":{\"type\":"
			  "\"invalid_request_error\",\"message\":\"prompt is "
			  "too long: 210000 tokens > 200000 maximum\"}}";
	T_OK(oa->classify(429, quota, strlen(quota)) == WD_ERRC_QUOTA &&
		 oa->classify(429, rl, strlen(rl)) == WD_ERRC_RATE_LIMIT &&
		 oa->classify(400, ctx, strlen(ctx)) == WD_ERRC_CONTEXT &&
		 an->classify(529, ov, strlen(ov)) == WD_ERRC_OVERLOADED &&
		 an->classify(400, big, strlen(big)) == WD_ERRC_CONTEXT &&
		 an->classify(500, "", 0) == WD_ERRC_SERVER,
	     "table-error-classes", "%s", "a class differs");
	/* Anthropic's spend limits: the tier cap is a 429 rate_limit_error
	 * told apart by error.details.error_code; a limit the organisation
	 * set is a 400 invalid_request_error */
	const char *cap = "{\"type\":\"error\",\"error\":{\"type\":"
			  "\"rate_limit_error\",\"message\":\"spend cap\","
			  "\"details\":{\"error_code\":\"enforced_spend_"
			  "limit_reached\"}}}";
	const char *arl = "{\"type\":\"error\",\"error\":{\"type\":"
			  "\"rate_limit_error\",\"message\":\"Number of "
			  "request tokens has exceeded your per-minute rate "
			  "limit\"}}";
	const char *lim = "{\"type\":\"error\",\"error\":{\"type\":"
			  "\"invalid_request_error\",\"message\":\"You have "
			  "reached your specified workspace API usage limits. "
			  "You will regain access on 2027-01-01\"}}";
	T_OK(an->classify(429, cap, strlen(cap)) == WD_ERRC_QUOTA &&
		 an->classify(429, arl, strlen(arl)) == WD_ERRC_RATE_LIMIT &&
		 an->classify(400, lim, strlen(lim)) == WD_ERRC_QUOTA,
	     "table-anthropic-spend-limits", "%s", "a class differs");
	T_OK(!wd_err_class_retryable(WD_ERRC_QUOTA) &&
		 wd_err_class_retryable(WD_ERRC_RATE_LIMIT),
	     "table-quota-not-retryable", "%s", "retryable set");
	struct wd_complete_resp r = {0};
	const char *words[][2] = {
	    {"refusal", "refusal"},
	    {"pause_turn", "pause_turn"},
	    {"model_context_window_exceeded", "context_exceeded"},
	    {"max_tokens", "max_tokens"},
	    {"stop_sequence", "end_turn"},
	    {"end_turn", "end_turn"},
	    {"tool_use", "tool_use"},
	};
	bool ok = true;
	for (size_t i = 0; i < WD_ARRAY_SIZE(words); i++) {
		wd_resp_set_stop_desc(&r, words[i][0], an);
		ok &= !strcmp(wd_stop_reason_name(r.stop_reason), words[i][1]);
	}
	wd_resp_set_stop_desc(&r, "content_filter", oa);
	ok &= r.stop_reason == WD_STOP_REFUSAL;
	wd_resp_set_stop_desc(&r, "length", oa);
	ok &= r.stop_reason == WD_STOP_MAX_TOKENS;
	wd_resp_set_stop_desc(&r, "stop", oa);
	ok &= r.stop_reason == WD_STOP_END_TURN;
	/* a word the table does not know is not an answer */
	wd_resp_set_stop_desc(&r, "compaction", an);
	ok &= r.stop_reason == WD_STOP_OTHER;
	free(r.stop_raw);
	T_OK(ok, "table-stop-reasons", "%s", "a word maps wrong");
	/* names come from the table only */
	T_OK(!strcmp(wd_provider_kind_words(), "anthropic, openai or script") &&
		 !strcmp(wd_provider_kind_name(WD_PROVIDER_OPENAI), "openai"),
	     "table-kind-names", "%s", wd_provider_kind_words());

	struct wd_gateway_config *cfg;
	struct wd_err err;
	int rc = load("providers:\n  o: {kind: openai, base_url: "
		      "\"http://x\", cache_ttl: 1h}\nmodels: {}\n",
		      &cfg, &err);
	T_OK(rc == -EINVAL && strstr(err.msg, "gw.yaml:2:54: provider 'o': "
					      "cache_ttl is for anthropic"),
	     "config-cache-ttl-openai-refused", "%s", err.msg);
	rc = load("providers:\n  a: {kind: anthropic, base_url: \"http://x\", "
		  "cache_ttl: 1h}\n  o: {kind: openai, base_url: "
		  "\"http://y\"}\nmodels:\n  c: [{provider: a, model: m}]\n"
		  "  g: [{provider: o, model: n}]\n",
		  &cfg, &err);
	T_OK(rc == 0 && cfg->providers[0].cache_ttl == WD_CACHE_1H,
	     "config-cache-ttl-1h", "%s", err.msg);
	if (rc)
		return;
	char why[300] = "";
	T_OK(wd_route_check_params(cfg, "c", 1.5, why, sizeof(why)) ==
		     -EINVAL &&
		 strstr(why, "outside 0..1") && strstr(why, "a/m") &&
		 wd_route_check_params(cfg, "g", 1.5, why, sizeof(why)) == 0 &&
		 wd_route_check_params(cfg, "g", 2.5, why, sizeof(why)) ==
		     -EINVAL &&
		 wd_route_check_params(cfg, "a/m", 1.0, why, sizeof(why)) == 0,
	     "route-temperature-ranges", "%s", why);
	/* by model family: Claude after Opus 4.6 takes none (a 400
	 * "deprecated for this model"), OpenAI's reasoning models only 1 */
	T_OK(wd_route_check_params(cfg, "a/claude-opus-4-7", 0.5, why,
				   sizeof(why)) == -EINVAL &&
		 strstr(why, "after Opus 4.6") &&
		 wd_route_check_params(cfg, "a/claude-sonnet-5", 1.0, why,
				       sizeof(why)) == -EINVAL &&
		 wd_route_check_params(cfg, "a/claude-opus-4-7", -1, why,
				       sizeof(why)) == 0 &&
		 wd_route_check_params(cfg, "a/claude-opus-4-6", 0.5, why,
				       sizeof(why)) == 0 &&
		 wd_route_check_params(cfg, "a/claude-sonnet-4-5-20250929", 0.5,
				       why, sizeof(why)) == 0 &&
		 wd_route_check_params(cfg, "a/claude-3-5-sonnet-20241022", 0.5,
				       why, sizeof(why)) == 0,
	     "route-temperature-claude-family", "%s", why);
	T_OK(wd_route_check_params(cfg, "o/gpt-5-mini", 0.2, why,
				   sizeof(why)) == -EINVAL &&
		 strstr(why, "only the default") &&
		 wd_route_check_params(cfg, "o/o3", 0.0, why, sizeof(why)) ==
		     -EINVAL &&
		 wd_route_check_params(cfg, "o/o4-mini", 1.0, why,
				       sizeof(why)) == 0 &&
		 wd_route_check_params(cfg, "o/gpt-4o", 0.2, why,
				       sizeof(why)) == 0,
	     "route-temperature-openai-reasoning", "%s", why);
	/* the builder refuses what the loader would (a --model patch) */
	struct wd_complete_req tr = {.model = "x", .temperature = 0.3};
	struct wd_err te = {0};
	json_t *tb = wd_anthropic_ops.build(&tr, NULL, "claude-opus-4-7", &te);
	T_OK(!tb && strstr(te.msg, "after Opus 4.6"),
	     "build-temperature-claude-family", "%s", te.msg);
	json_decref(tb);

	/* 1h breakpoints on tools, system, the turns; whitespace-only
	 * assistant text left out */
	struct wd_tool_call tc = {
	    .id = "t1", .name = "f", .arguments = json_object()};
	struct wd_msg msgs[] = {
	    {.role = WD_ROLE_SYSTEM, .text = "sys"},
	    {.role = WD_ROLE_USER, .text = "task"},
	    {.role = WD_ROLE_ASSISTANT,
	     .text = " \n\t",
	     .tool_calls = &tc,
	     .n_tool_calls = 1},
	    {.role = WD_ROLE_TOOL, .text = "res", .tool_call_id = "t1"},
	};
	struct wd_tool_schema tools[] = {{.name = "f"}};
	struct wd_complete_req req = {.model = "c",
				      .msgs = msgs,
				      .n_msgs = 4,
				      .tools = tools,
				      .n_tools = 1,
				      .temperature = -1};
	json_t *b = wd_anthropic_ops.build(&req, &cfg->providers[0], "m", &err);
	char *t = b ? json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	int n1h = 0;
	for (const char *p = t; p && (p = strstr(p, "\"ttl\":\"1h\"")); p++)
		n1h++;
	T_OK(t && n1h == 4 && !strstr(t, "\" \\n") &&
		 strstr(t, "\"system\":[{\"cache_control\""),
	     "anthropic-cache-breakpoints-1h", "%s", t ? t : err.msg);
	free(t);
	json_decref(b);
	json_decref(tc.arguments);
	wd_gateway_config_free(cfg);

	/* unparsable OpenAI arguments: the model's own text */
	const char *body = "{\"choices\":[{\"message\":{\"content\":null,"
			   "\"tool_calls\":[{\"id\":\"c\",\"type\":"
			   "\"function\",\"function\":{\"name\":\"f\","
			   "\"arguments\":\"{\\\"a\\\": 1\"}}]},"
			   "\"finish_reason\":\"tool_calls\"}]}";
	struct wd_complete_resp resp = {0};
	rc = wd_openai_ops.parse(body, strlen(body), &resp, &err);
	T_OK(rc == 0 && resp.n_tool_calls == 1 &&
		 resp.tool_calls[0].parse_error &&
		 json_is_string(resp.tool_calls[0].arguments) &&
		 !strcmp(json_string_value(resp.tool_calls[0].arguments),
			 "{\"a\": 1"),
	     "openai-raw-arguments-kept", "rc %d %s", rc, err.msg);
	wd_complete_resp_free(&resp);
}

int main(void)
{
	test_config();
	test_demo_script();
	test_wire();
	test_table();
	return T_DONE();
}
