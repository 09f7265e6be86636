/* Gateway against a real HTTP server: tests/fakemodel/fakemodel.py on a
 * loopback port, started (and killed, by pid) by this test. Covers both
 * wire formats round-tripping tool calls and results, usage and cost,
 * 429 + Retry-After, failover on 500s and on connect errors, timeouts and
 * deadlines, bad JSON, API-key redaction, and calls from many threads. */
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "gateway/gateway.h"
#include "policy/gateway_config.h"
#include "t.h"

#define KEY "sk-test-SECRET-7f3a9c1e5b2d4680"

static pid_t fake_pid = -1;
static int fake_port;
static char key_file[] = "/tmp/wd-gw-key.XXXXXX";
static char bad_key_file[] = "/tmp/wd-gw-badkey.XXXXXX";

static int fake_start(void)
{
	char pf[] = "/tmp/wd-fakemodel-port.XXXXXX";
	int fd = mkstemp(pf);

	if (fd < 0)
		return -errno;
	close(fd);
	unlink(pf);
	fake_pid = fork();
	if (fake_pid == 0) {
		int dn = open("/dev/null", O_WRONLY);
		dup2(dn, 1);
		execlp("python3", "python3", "tests/fakemodel/fakemodel.py",
		       "--port", "0", "--port-file", pf, "--key", KEY, NULL);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		char *t = NULL;
		size_t n;
		if (wd_read_file(pf, &t, &n) == 0) {
			fake_port = atoi(t);
			free(t);
			unlink(pf);
			return fake_port > 0 ? 0 : -EINVAL;
		}
		usleep(50000);
	}
	return -ETIMEDOUT;
}

static void fake_stop(void)
{
	if (fake_pid > 0) {
		kill(fake_pid, SIGTERM);
		waitpid(fake_pid, NULL, 0);
		fake_pid = -1;
	}
}

static size_t sink(char *p, size_t s, size_t n, void *ud)
{
	wd_buf_append(ud, p, s * n);
	return s * n;
}

/* POST /_control or GET /_requests on the fake. */
static json_t *fake_http(const char *path, const char *post)
{
	CURL *h = curl_easy_init();
	struct wd_buf b = {0};
	char url[256];
	json_t *r;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", fake_port, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	if (post)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
	curl_easy_perform(h);
	curl_easy_cleanup(h);
	r = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
	wd_buf_free(&b);
	return r;
}

static void ctl(const char *lane, const char *queue_json)
{
	char *body = wd_asprintf(
	    "{\"lane\":\"%s\",\"reset\":true,\"queue\":%s}", lane, queue_json);
	json_decref(fake_http("/_control", body));
	free(body);
}

static json_t *last_request_body(const char *lane)
{
	char path[64];
	json_t *log, *last, *body;

	snprintf(path, sizeof(path), "/_requests?lane=%s", lane);
	log = fake_http(path, NULL);
	last = json_array_get(log, json_array_size(log) - 1);
	body = json_loads(json_string_value(json_object_get(last, "body")), 0,
			  NULL);
	json_decref(log);
	return body;
}

static int requests_seen(const char *lane)
{
	char path[64];
	json_t *log;
	int n;

	snprintf(path, sizeof(path), "/_requests?lane=%s", lane);
	log = fake_http(path, NULL);
	n = (int)json_array_size(log);
	json_decref(log);
	return n;
}

static struct wd_gateway *make_gateway(void)
{
	struct wd_gateway_config *cfg;
	struct wd_err err = {0};
	char *yaml = wd_asprintf(
	    "providers:\n"
	    "  ant: {kind: anthropic, base_url: 'http://127.0.0.1:%1$d/ant', "
	    "api_key_env: WD_T_KEY, timeout_ms: 3000}\n"
	    "  ant2: {kind: anthropic, base_url: 'http://127.0.0.1:%1$d/ant2', "
	    "api_key_env: WD_T_KEY}\n"
	    "  oai: {kind: openai, base_url: 'http://127.0.0.1:%1$d/oai', "
	    "api_key_env: WD_T_KEY, timeout_ms: 3000}\n"
	    "  v1: {kind: openai, base_url: 'http://127.0.0.1:%1$d/v1', "
	    "api_key_env: WD_T_KEY}\n"
	    "  slow: {kind: openai, base_url: 'http://127.0.0.1:%1$d/slow', "
	    "api_key_env: WD_T_KEY, timeout_ms: 300}\n"
	    "  dead: {kind: openai, base_url: 'http://127.0.0.1:1', "
	    "api_key_env: WD_T_KEY, timeout_ms: 500}\n"
	    "  nokey: {kind: anthropic, base_url: 'http://127.0.0.1:%1$d/nk', "
	    "api_key_env: WD_T_UNSET_KEY}\n"
	    "  wrongkey: {kind: openai, base_url: "
	    "'http://127.0.0.1:%1$d/wk', api_key_env: WD_T_WRONG}\n"
	    "  filekey: {kind: openai, base_url: 'http://127.0.0.1:%1$d/fk', "
	    "api_key_file: '%2$s'}\n"
	    "  badkey: {kind: openai, base_url: 'http://127.0.0.1:%1$d/bk', "
	    "api_key_file: '%3$s'}\n"
	    "models:\n"
	    "  a: [{provider: ant, model: claude-test}]\n"
	    "  o: [{provider: oai, model: gpt-test}]\n"
	    "  fo: [{provider: ant, model: claude-test}, {provider: oai, "
	    "model: "
	    "gpt-test}]\n"
	    "  deadfirst: [{provider: dead, model: x}, {provider: ant2, model: "
	    "claude-test}]\n"
	    "  slow: [{provider: slow, model: x}]\n"
	    "  nokey: [{provider: nokey, model: x}, {provider: oai, model: "
	    "gpt-test}]\n"
	    "  wrongkey: [{provider: wrongkey, model: x}]\n"
	    "  filekey: [{provider: filekey, model: x}]\n"
	    "  badkey: [{provider: badkey, model: x}]\n"
	    "retries: {max_attempts: 3, backoff_base_ms: 20, backoff_max_ms: "
	    "100, retry_after_max_ms: 5000}\n"
	    "prices:\n"
	    "  claude-test: {input: 3, output: 15, cached_input: 0.3}\n"
	    "  gpt-test: {input: 2, output: 8, cached_input: 0.5}\n",
	    fake_port, key_file, bad_key_file);
	int r = wd_gateway_config_load_str("test.yaml", ".", yaml, strlen(yaml),
					   &cfg, &err);
	free(yaml);
	if (r) {
		printf("FAIL gw-config: %s\n", err.msg);
		return NULL;
	}
	return wd_gateway_new(cfg, &err);
}

static struct wd_tool_schema tools[] = {
    {.name = "run_python",
     .description = "Run Python code",
     .parameters_json = "{\"type\":\"object\",\"required\":[\"code\"],"
			"\"properties\":{\"code\":{\"type\":\"string\"}}}"}};

static const char *TOOL_REPLY =
    "[{\"reply\":{\"text\":\"computing\",\"tool_calls\":[{\"name\":"
    "\"run_python\",\"arguments\":{\"code\":\"print(62.5)\"}}],\"usage\":{"
    "\"input_tokens\":1200,\"output_tokens\":300,\"cached_tokens\":200}}},"
    "{\"reply\":{\"text\":\"The average is 62.5, above 50.\"}}]";

/* Two turns: a tool call, then the result goes back and is accepted by the
 * fake's validator (which rejects a tool result that does not answer the
 * previous turn's call, as the real APIs do). */
static void round_trip(struct wd_gateway *gw, const char *alias,
		       const char *lane, const char *id_prefix, double price_in,
		       double price_cached, double price_out)
{
	struct wd_complete_resp resp;
	struct wd_err err = {0};
	struct wd_msg msgs[4] = {
	    {.role = WD_ROLE_SYSTEM, .text = "You are an analyst."},
	    {.role = WD_ROLE_USER, .text = "Average of 45, 80, 62, 63?"}};
	struct wd_complete_req req = {.model = alias,
				      .msgs = msgs,
				      .n_msgs = 2,
				      .tools = tools,
				      .n_tools = 1,
				      .temperature = -1};
	char name[96];
	int r;

	ctl(lane, TOOL_REPLY);
	r = wd_gateway_complete(gw, &req, &resp, &err);
	snprintf(name, sizeof(name), "%s-tool-call", lane);
	T_OK(
	    r == 0 && resp.stop_reason == WD_STOP_TOOL_USE &&
		resp.n_tool_calls == 1 &&
		!strncmp(resp.tool_calls[0].id, id_prefix, strlen(id_prefix)) &&
		!strcmp(resp.tool_calls[0].name, "run_python") &&
		!strcmp(json_string_value(json_object_get(
			    resp.tool_calls[0].arguments, "code")),
			"print(62.5)") &&
		!strcmp(resp.text, "computing"),
	    name, "r=%d %s stop=%d n=%d", r, err.msg, resp.stop_reason,
	    resp.n_tool_calls);
	if (r || resp.n_tool_calls != 1) {
		wd_complete_resp_free(&resp);
		return;
	}
	snprintf(name, sizeof(name), "%s-usage-cost", lane);
	double want =
	    (1000 * price_in + 200 * price_cached + 300 * price_out) / 1e6;
	T_OK(resp.usage.input_tokens == 1200 &&
		 resp.usage.cached_tokens == 200 &&
		 resp.usage.output_tokens == 300 && resp.priced &&
		 resp.cost_usd > want - 1e-12 && resp.cost_usd < want + 1e-12,
	     name, "in=%lu cached=%lu out=%lu cost=%.9f want %.9f",
	     (unsigned long)resp.usage.input_tokens,
	     (unsigned long)resp.usage.cached_tokens,
	     (unsigned long)resp.usage.output_tokens, resp.cost_usd, want);
	snprintf(name, sizeof(name), "%s-raw-bodies", lane);
	T_OK(resp.raw_request && resp.raw_response &&
		 strstr(resp.raw_request, "run_python") &&
		 strstr(resp.raw_response, resp.tool_calls[0].id) &&
		 !strstr(resp.raw_request, KEY) && resp.n_attempts == 1 &&
		 resp.attempts[0].http_status == 200,
	     name, "raw bodies missing or wrong");

	struct wd_tool_call tc;
	wd_tool_call_copy(&tc, &resp.tool_calls[0]);
	msgs[2] = (struct wd_msg){.role = WD_ROLE_ASSISTANT,
				  .text = resp.text,
				  .tool_calls = &tc,
				  .n_tool_calls = 1};
	char *text = wd_strdup(resp.text);
	msgs[2].text = text;
	wd_complete_resp_free(&resp);
	msgs[3] = (struct wd_msg){.role = WD_ROLE_TOOL,
				  .text = "{\"stdout\":\"62.5\\n\"}",
				  .tool_call_id = tc.id,
				  .is_error = false};
	req.n_msgs = 4;
	r = wd_gateway_complete(gw, &req, &resp, &err);
	snprintf(name, sizeof(name), "%s-tool-result-accepted", lane);
	T_OK(r == 0 && resp.stop_reason == WD_STOP_END_TURN &&
		 resp.n_tool_calls == 0 &&
		 !strcmp(resp.text, "The average is 62.5, above 50."),
	     name, "r=%d %s", r, err.msg);
	json_t *body = last_request_body(lane);
	char *dump = json_dumps(body, JSON_COMPACT);
	snprintf(name, sizeof(name), "%s-tool-result-wire", lane);
	T_OK(dump && strstr(dump, tc.id) && strstr(dump, "62.5\\\\n"), name,
	     "%s", dump);
	free(dump);
	json_decref(body);
	free(text);
	wd_tool_call_clear(&tc);
	wd_complete_resp_free(&resp);
}

static struct wd_complete_req simple_req(const char *model)
{
	static struct wd_msg m = {.role = WD_ROLE_USER, .text = "hello"};
	return (struct wd_complete_req){
	    .model = model, .msgs = &m, .n_msgs = 1, .temperature = 0.2};
}

static void test_retry_after(struct wd_gateway *gw)
{
	struct wd_complete_resp resp;
	struct wd_err err = {0};
	struct wd_complete_req req = simple_req("a");
	uint64_t t0;
	int r;

	ctl("ant", "[{\"status\":429,\"retry_after\":\"1\",\"message\":"
		   "\"rate limited\"},{\"reply\":{\"text\":\"ok\"}}]");
	t0 = wd_now_ns();
	r = wd_gateway_complete(gw, &req, &resp, &err);
	uint64_t ms = (wd_now_ns() - t0) / 1000000;
	T_OK(r == 0 && resp.n_attempts == 2 &&
		     resp.attempts[0].http_status == 429 &&
		     strstr(resp.attempts[0].error, "rate_limit_error") &&
		     resp.attempts[1].wait_ms == 1000 && ms >= 1000 &&
		     ms<2500, "retry-after-honoured",
			"r=%d n=%d wait=%lu ms=%lu %s", r, resp.n_attempts,
			resp.n_attempts> 1
		 ? (unsigned long)resp.attempts[1].wait_ms
		 : 0,
	     (unsigned long)ms, err.msg);
	wd_complete_resp_free(&resp);

	/* OpenAI's retry-after-ms */
	ctl("oai", "[{\"status\":429,\"retry_after_ms\":300},{\"reply\":{"
		   "\"text\":\"ok\"}}]");
	req.model = "o";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == 0 && resp.n_attempts == 2 && resp.attempts[1].wait_ms == 300,
	     "retry-after-ms-honoured", "r=%d n=%d", r, resp.n_attempts);
	wd_complete_resp_free(&resp);

	/* Retry-After as an HTTP date, ~2 s ahead (second granularity) */
	{
		char date[64], q[256];
		time_t t = time(NULL) + 2;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		snprintf(q, sizeof(q),
			 "[{\"status\":503,\"retry_after\":\"%s\"},{"
			 "\"reply\":{\"text\":\"ok\"}}]",
			 date);
		ctl("ant", q);
		req.model = "a";
		r = wd_gateway_complete(gw, &req, &resp, &err);
		T_OK(r == 0 && resp.n_attempts == 2 &&
			 resp.attempts[1].wait_ms >= 900 &&
			 resp.attempts[1].wait_ms <= 2100,
		     "retry-after-http-date", "r=%d n=%d wait=%lu", r,
		     resp.n_attempts,
		     resp.n_attempts > 1
			 ? (unsigned long)resp.attempts[1].wait_ms
			 : 0);
		wd_complete_resp_free(&resp);
	}

	/* a Retry-After beyond retry_after_max_ms: straight to the next
	 * route, no sleeping */
	ctl("ant", "[{\"status\":429,\"retry_after\":\"60\"}]");
	ctl("oai", "[{\"reply\":{\"text\":\"from openai\"}}]");
	req.model = "fo";
	t0 = wd_now_ns();
	r = wd_gateway_complete(gw, &req, &resp, &err);
	ms = (wd_now_ns() - t0) / 1000000;
	T_OK(r == 0 && !strcmp(resp.provider, "oai") && resp.n_attempts == 2 &&
		 ms < 1000,
	     "retry-after-too-long-fails-over", "r=%d n=%d ms=%lu", r,
	     resp.n_attempts, (unsigned long)ms);
	wd_complete_resp_free(&resp);
}

static void test_failover(struct wd_gateway *gw)
{
	struct wd_complete_resp resp;
	struct wd_err err = {0};
	struct wd_complete_req req = simple_req("fo");
	int r;

	ctl("ant", "[{\"status\":500},{\"status\":529},{\"status\":503}]");
	ctl("oai", "[{\"reply\":{\"text\":\"from openai\"}}]");
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == 0 && !strcmp(resp.provider, "oai") &&
		 !strcmp(resp.model, "gpt-test") && resp.n_attempts == 4 &&
		 resp.attempts[0].http_status == 500 &&
		 resp.attempts[1].http_status == 529 &&
		 strstr(resp.attempts[1].error, "overloaded_error") &&
		 resp.attempts[3].http_status == 200 &&
		 !strcmp(resp.attempts[3].provider, "oai") &&
		 !strcmp(resp.text, "from openai"),
	     "failover-after-500s", "r=%d n=%d prov=%s %s", r, resp.n_attempts,
	     resp.provider ? resp.provider : "-", err.msg);
	T_OK(requests_seen("ant") == 3, "failover-retried-3-times",
	     "ant saw %d requests", requests_seen("ant"));
	wd_complete_resp_free(&resp);

	/* connection refused on the first route */
	ctl("ant2", "[{\"reply\":{\"text\":\"ok\"}}]");
	req.model = "deadfirst";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == 0 && !strcmp(resp.provider, "ant2") && resp.n_attempts == 4 &&
		 resp.attempts[0].http_status == 0 &&
		 strstr(resp.attempts[0].error, "connection"),
	     "failover-after-connect-errors", "r=%d n=%d %s %s", r,
	     resp.n_attempts, resp.n_attempts ? resp.attempts[0].error : "",
	     err.msg);
	wd_complete_resp_free(&resp);

	/* every route down: a clear error naming the last failure */
	ctl("ant", "[{\"status\":500},{\"status\":500},{\"status\":500}]");
	ctl("oai", "[{\"status\":502},{\"status\":502},{\"status\":502}]");
	req.model = "fo";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == -EPROTO && resp.n_attempts == 6 &&
		 strstr(err.msg, "oai/gpt-test: HTTP 502"),
	     "all-routes-down-error", "r=%d n=%d %s", r, resp.n_attempts,
	     err.msg);
	wd_complete_resp_free(&resp);
}

static void test_timeouts(struct wd_gateway *gw)
{
	struct wd_complete_resp resp;
	struct wd_err err = {0};
	struct wd_complete_req req = simple_req("slow");
	uint64_t t0;
	int r;

	ctl("slow", "[{\"delay_ms\":1500},{\"delay_ms\":1500},{\"delay_ms\":"
		    "1500}]");
	t0 = wd_now_ns();
	r = wd_gateway_complete(gw, &req, &resp, &err);
	uint64_t ms = (wd_now_ns() - t0) / 1000000;
	T_OK(r == -EPROTO && resp.n_attempts == 3 &&
		 strstr(resp.attempts[2].error, "timeout") &&
		 strstr(err.msg, "timeout") && ms >= 900 && ms < 2500,
	     "timeout-retried-then-error", "r=%d n=%d ms=%lu %s", r,
	     resp.n_attempts, (unsigned long)ms, err.msg);
	wd_complete_resp_free(&resp);

	ctl("slow", "[{\"delay_ms\":1500},{\"delay_ms\":1500},{\"delay_ms\":"
		    "1500}]");
	req.deadline_ns = wd_now_ns() + 450 * 1000000ull;
	t0 = wd_now_ns();
	r = wd_gateway_complete(gw, &req, &resp, &err);
	ms = (wd_now_ns() - t0) / 1000000;
	T_OK(r == -ETIMEDOUT && ms < 700, "deadline-respected",
	     "r=%d ms=%lu %s", r, (unsigned long)ms, err.msg);
	wd_complete_resp_free(&resp);
	usleep(1600 * 1000); /* let the fake finish its sleeps */
}

static void test_bad_responses(struct wd_gateway *gw)
{
	struct wd_complete_resp resp;
	struct wd_err err = {0};
	struct wd_complete_req req = simple_req("a");
	int r;

	ctl("ant", "[{\"body\":\"{\\\"content\\\": [oops\"}]");
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == -EPROTO && resp.n_attempts == 1 &&
		 strstr(err.msg, "anthropic: response is not JSON"),
	     "bad-json-clear-error", "r=%d n=%d %s", r, resp.n_attempts,
	     err.msg);
	T_OK(resp.raw_response && strstr(resp.raw_response, "oops"),
	     "bad-json-raw-kept", "raw=%s",
	     resp.raw_response ? resp.raw_response : "(null)");
	wd_complete_resp_free(&resp);

	ctl("oai", "[{\"body\":\"{\\\"choices\\\": {}}\"}]");
	req.model = "o";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == -EPROTO && strstr(err.msg, "choices[0].message"),
	     "bad-shape-clear-error", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);

	/* the request validator of the fake: a 400 is not retried */
	ctl("ant", "[{\"status\":400,\"message\":\"messages: bad\"}]");
	req.model = "a";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == -EPROTO && resp.n_attempts == 1 &&
		 strstr(err.msg, "HTTP 400: invalid_request_error: messages: "
				 "bad"),
	     "http-400-not-retried", "r=%d n=%d %s", r, resp.n_attempts,
	     err.msg);
	wd_complete_resp_free(&resp);
}

/* A long provider message of multibyte characters is cut to fit the
 * attempt's error buffer: the cut must not split a character (callers put
 * the text into JSON, which must be valid UTF-8). */
static void test_utf8_cut(struct wd_gateway *gw)
{
	struct wd_complete_resp resp;
	struct wd_err err = {0};
	struct wd_complete_req req = simple_req("a");
	struct wd_buf q = {0};
	int r;

	wd_buf_printf(&q, "[{\"status\":400,\"message\":\"x");
	for (int i = 0; i < 300; i++)
		wd_buf_printf(&q, "\xc3\xa9");
	wd_buf_printf(&q, "\"}]");
	ctl("ant", q.data);
	wd_buf_free(&q);
	r = wd_gateway_complete(gw, &req, &resp, &err);
	json_t *a =
	    resp.n_attempts ? json_string(resp.attempts[0].error) : NULL;
	json_t *e = json_string(err.msg);
	T_OK(r == -EPROTO && a && e && strlen(resp.attempts[0].error) > 200,
	     "error-text-cut-keeps-utf8", "r=%d attempt-ok=%d err-ok=%d", r,
	     a != NULL, e != NULL);
	json_decref(a);
	json_decref(e);
	wd_complete_resp_free(&resp);
}

static void test_secrets(struct wd_gateway *gw)
{
	struct wd_complete_resp resp;
	struct wd_err err = {0};
	struct wd_complete_req req = simple_req("a");
	bool leak = false;
	int r;

	/* a provider that quotes the key back in its error body */
	ctl("ant", "[{\"echo_key\":true}]");
	r = wd_gateway_complete(gw, &req, &resp, &err);
	leak |= strstr(err.msg, KEY) != NULL;
	for (int i = 0; i < resp.n_attempts; i++)
		leak |= strstr(resp.attempts[i].error, KEY) != NULL;
	leak |= resp.raw_response && strstr(resp.raw_response, KEY);
	leak |= resp.raw_request && strstr(resp.raw_request, KEY);
	T_OK(r == -EPROTO && !leak && strstr(err.msg, "[REDACTED]") &&
		 resp.raw_response && strstr(resp.raw_response, "[REDACTED]"),
	     "api-key-redacted", "r=%d leak=%d err=%s", r, leak, err.msg);
	wd_complete_resp_free(&resp);

	/* the server got the key in the right header */
	char path[64];
	snprintf(path, sizeof(path), "/_requests?lane=ant");
	json_t *log = fake_http(path, NULL);
	json_t *h = json_object_get(json_array_get(log, 0), "headers");
	const char *xk = json_string_value(json_object_get(h, "x-api-key"));
	const char *av =
	    json_string_value(json_object_get(h, "anthropic-version"));
	T_OK(xk && !strcmp(xk, KEY) && av && !strcmp(av, "2023-06-01"),
	     "anthropic-headers", "x-api-key/anthropic-version missing");
	json_decref(log);

	/* a provider whose key is not set: no request, next route answers */
	ctl("oai", "[{\"reply\":{\"text\":\"ok\"}}]");
	ctl("nk", "[]");
	req.model = "nokey";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == 0 && !strcmp(resp.provider, "oai") &&
		 strstr(resp.attempts[0].error, "WD_T_UNSET_KEY") &&
		 requests_seen("nk") == 0,
	     "missing-key-skips-provider", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);

	/* a wrong key: 401, not retried, key not echoed */
	ctl("wk", "[]");
	req.model = "wrongkey";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == -EPROTO && resp.n_attempts == 1 &&
		 resp.attempts[0].http_status == 401 &&
		 !strstr(err.msg, "wrong-key-value-123"),
	     "wrong-key-401", "r=%d n=%d %s", r, resp.n_attempts, err.msg);
	wd_complete_resp_free(&resp);

	/* an empty user text is not sent as an empty block (the API, and
	 * the fake, reject those) */
	{
		struct wd_msg em = {.role = WD_ROLE_USER, .text = ""};
		struct wd_complete_req er = {
		    .model = "a", .msgs = &em, .n_msgs = 1, .temperature = -1};
		ctl("ant", "[]");
		r = wd_gateway_complete(gw, &er, &resp, &err);
		T_OK(r == 0, "anthropic-empty-user-text", "r=%d %s", r,
		     err.msg);
		wd_complete_resp_free(&resp);
	}

	/* a key from a file (trailing newline stripped) */
	ctl("fk", "[]");
	req.model = "filekey";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == 0 && !strcmp(resp.text, "ok"), "api-key-file", "r=%d %s", r,
	     err.msg);
	wd_complete_resp_free(&resp);
	/* a key file smuggling a second header line is refused */
	ctl("bk", "[]");
	req.model = "badkey";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == -EPROTO && requests_seen("bk") == 0 &&
		 strstr(err.msg, "line break") && !strstr(err.msg, "X-Evil"),
	     "api-key-file-header-injection", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);

	req.model = "nope";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == -ENOENT && strstr(err.msg, "unknown model 'nope'"),
	     "unknown-alias", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);
	req.model = "oai/gpt-test";
	ctl("oai", "[]");
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == 0 && !strcmp(resp.model, "gpt-test"), "provider-slash-model",
	     "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);
	/* base_url ending in /v1 (llama.cpp, Ollama style) */
	req.model = "v1/local-model";
	r = wd_gateway_complete(gw, &req, &resp, &err);
	T_OK(r == 0, "openai-base-url-v1", "r=%d %s", r, err.msg);
	wd_complete_resp_free(&resp);
}

struct usage_seen {
	pthread_mutex_t mu;
	int calls;
	double cost;
	char agent[64];
};

static void on_usage(void *ud, const struct wd_attribution *a,
		     const struct wd_complete_resp *resp)
{
	struct usage_seen *u = ud;
	pthread_mutex_lock(&u->mu);
	u->calls++;
	u->cost += resp->cost_usd;
	if (a->agent)
		snprintf(u->agent, sizeof(u->agent), "%s", a->agent);
	pthread_mutex_unlock(&u->mu);
}

static struct wd_gateway *g_gw;
static int thread_fail;

static void *worker(void *arg)
{
	for (int i = 0; i < 25; i++) {
		struct wd_complete_resp resp;
		struct wd_err err = {0};
		struct wd_complete_req req = simple_req(i % 2 ? "a" : "o");
		req.attr = (struct wd_attribution){.team = "data",
						   .agent = "analyst",
						   .run_id = "r1",
						   .user = "alice"};
		if (wd_gateway_complete(g_gw, &req, &resp, &err) ||
		    strcmp(resp.text, "ok"))
			__atomic_add_fetch(&thread_fail, 1, __ATOMIC_RELAXED);
		wd_complete_resp_free(&resp);
	}
	return NULL;
}

static void test_threads(struct wd_gateway *gw)
{
	struct usage_seen u = {.mu = PTHREAD_MUTEX_INITIALIZER};
	pthread_t th[8];

	ctl("ant", "[]");
	ctl("oai", "[]");
	wd_gateway_set_usage_cb(gw, on_usage, &u);
	g_gw = gw;
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	T_OK(thread_fail == 0 && u.calls == 200 && u.cost > 0 &&
		 !strcmp(u.agent, "analyst"),
	     "threads-and-usage-callback", "fail=%d calls=%d", thread_fail,
	     u.calls);
	/* keep-alive: ~100 calls per provider from 8 threads ride at most a
	 * few connections each (not one per call) */
	const char *lanes[] = {"ant", "oai"};
	for (int l = 0; l < 2; l++) {
		char path[64], name[64];
		int peers[256], np = 0;
		snprintf(path, sizeof(path), "/_requests?lane=%s", lanes[l]);
		json_t *log = fake_http(path, NULL), *e;
		size_t i;
		json_array_foreach(log, i, e)
		{
			int p = (int)json_integer_value(
				json_object_get(e, "peer")),
			    seen = 0;
			for (int k = 0; k < np; k++)
				seen |= peers[k] == p;
			if (!seen && np < 256)
				peers[np++] = p;
		}
		snprintf(name, sizeof(name), "keep-alive-%s", lanes[l]);
		T_OK(json_array_size(log) >= 90 && np <= 16, name,
		     "%zu requests over %d connections", json_array_size(log),
		     np);
		json_decref(log);
	}
	wd_gateway_set_usage_cb(gw, NULL, NULL);
}

int main(void)
{
	struct wd_gateway *gw;
	int r;

	signal(SIGPIPE, SIG_IGN);
	setenv("WD_T_KEY", KEY, 1);
	setenv("WD_T_WRONG", "wrong-key-value-123", 1);
	unsetenv("WD_T_UNSET_KEY");
	int kf = mkstemp(key_file), bf = mkstemp(bad_key_file);
	if (kf < 0 || bf < 0 || wd_write_all(kf, KEY "\n", strlen(KEY) + 1) ||
	    wd_write_all(bf, KEY "\r\nX-Evil: 1\n", strlen(KEY) + 13)) {
		T_FAIL("key-files", "cannot write key files");
		return T_DONE();
	}
	close(kf);
	close(bf);
	r = fake_start();
	if (r) {
		T_FAIL("fakemodel-start", "cannot start fake model: %d", r);
		fake_stop();
		return T_DONE();
	}
	gw = make_gateway();
	if (gw) {
		round_trip(gw, "a", "ant", "toolu_", 3, 0.3, 15);
		round_trip(gw, "o", "oai", "call_", 2, 0.5, 8);
		test_retry_after(gw);
		test_failover(gw);
		test_timeouts(gw);
		test_bad_responses(gw);
		test_utf8_cut(gw);
		test_secrets(gw);
		test_threads(gw);
		wd_gateway_unref(gw);
	}
	fake_stop();
	unlink(key_file);
	unlink(bad_key_file);
	return T_DONE();
}
