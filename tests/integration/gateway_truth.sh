#!/usr/bin/env bash
# The gateway tells the truth, driven through the real daemon against the
# loopback fake (tests/fakemodel, which enforces what the Anthropic Messages
# and OpenAI Chat Completions references say):
#  - a temperature a route cannot take is a policy load error naming the
#    route (file:line:col), not a 400 at every step and a silent failover;
#  - each stop reason ends the run with its own status and exit code;
#  - whitespace-only assistant text is never sent back;
#  - a quota 429 is not retried; a route that keeps failing is skipped once
#    its breaker opens (state in /metrics and /v1/status); a failed call's
#    reason names every route's last error;
#  - cache reads and writes are priced per the provider table, and the
#    request carries cache_control breakpoints;
#  - unparsable OpenAI tool arguments go back as the model's own string.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip gateway-truth "needs root"; finish; }

start_fake
[ -n "$FAKE_PORT" ] || { fail fake-model "fake model server did not start"; finish; }
base_policy
cat >"$POL/aliases.part" <<'Y'
  claude: [{provider: fb, model: m2}]
  gpt: [{provider: fa, model: m1}]
Y
write_gateway
sed -i 's/^retries: .*/retries: {max_attempts: 2, backoff_base_ms: 10, backoff_max_ms: 50, retry_after_max_ms: 1000, breaker_failures: 2, breaker_open_ms: 60000}/' "$POL/gateway.yaml"

sed -i 's/^  m1: .*/  m1: {input: 1.0, output: 2.0, cached_input: 0.25}/' "$POL/gateway.yaml"

# ---- parameters checked at load ----------------------------------------------
agent hot claude '[echo]'
echo "temperature: 1.5" >>"$POL/agents/hot.yaml"
out=$("$WARDEN" policy check "$POL" 2>&1)
expect_match temp-load-error "$out" "hot.yaml:9:14: agent 'hot': 'temperature' 1.5 is outside 0..1, for route 1 of model 'claude' \(fb/m2, a anthropic provider\)"
start_daemon >/dev/null 2>&1 && { fail temp-daemon-refuses "wardend started with the policy"; stop_daemon; } ||
	expect_match temp-daemon-refuses "$(cat "$T/wardend.log")" "hot.yaml:9:14: agent 'hot': 'temperature' 1.5 is outside 0..1"
# the same temperature on an OpenAI route (0..2) is fine
sed -i 's/^model: claude/model: gpt/' "$POL/agents/hot.yaml"
out=$("$WARDEN" policy check "$POL" 2>&1)
expect_eq temp-openai-ok "$(printf '%s' "$out" | grep -c temperature)" 0
rm -f "$POL/agents/hot.yaml"

agent ca claude '[echo]'
agent cg gpt '[echo]'
agent short claude '[echo]' 1
agent fo failover '[echo]'
agent cgl gpt '[echo]'
sed -i "s/^system_prompt: .*/system_prompt: \"$(python3 -c 'print("Follow the rules. " * 300)')\"/" "$POL/agents/cgl.yaml"
start_daemon || { fail daemon-start "see log"; finish; }

# run AGENT: sets OUT (the --json stream), RC, END (run_end line)
run() {
	OUT=$(as_user 1000 "$WARDEN" run --json "$1" "${2:-go}" 2>&1)
	RC=$?
	END=$(printf '%s\n' "$OUT" | grep '"type":"run_end"')
}
reqs() { curl -s "http://127.0.0.1:$FAKE_PORT/_requests?lane=$1"; }
nreqs() { reqs "$1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }

# ---- stop reasons --------------------------------------------------------------
fake_ctl '{"lane": "b", "reset": true, "queue": [
  {"reply": {"text": "part one,", "stop": "max_tokens"}},
  {"reply": {"text": " part two", "stop": "end_turn"}}]}'
run ca
expect_match max-tokens-continued "$RC:$END" '^0:.*"status":"ok".*"output":"part one, part two"'
expect_match max-tokens-asked-to-go-on "$(reqs b | jq_py 'd[1]["body"]')" 'cut off at the output token limit'

fake_ctl '{"lane": "b", "reset": true, "queue": [{"reply": {"text": "half an ans", "stop": "max_tokens"}}]}'
run short
expect_match max-tokens-truncated "$RC:$END" '^3:.*"status":"truncated".*cut at max_tokens and max_steps'
expect_match max-tokens-truncated-output "$END" '"output":"half an ans"'

# a tool call cut at max_tokens (arguments possibly incomplete) is never run
fake_ctl '{"lane": "b", "reset": true, "queue": [{"reply": {"text": "", "tool_calls": [{"name": "echo", "arguments": {"x": "cut"}}], "stop": "max_tokens"}}]}'
run ca
expect_match max-tokens-tool-call-truncated "$RC:$END" "^3:.*\"status\":\"truncated\".*tool call was cut at max_tokens"
cut=$(printf '%s' "$END" | jq_py 'd["run_id"]')
expect_eq max-tokens-tool-call-not-run "$(run_records "$cut" | jq_py 'sum(1 for r in d if r["type"] in ("tool_attempt", "tool_result"))')" 0
fake_ctl '{"lane": "a", "reset": true, "queue": [{"reply": {"text": "", "tool_calls": [{"name": "echo", "arguments": {"x": "cut"}}], "stop": "max_tokens"}}]}'
run cg
expect_match length-tool-call-truncated "$RC:$END" "^3:.*\"status\":\"truncated\".*stop reason 'length'"

fake_ctl '{"lane": "b", "reset": true, "queue": [{"reply": {"text": "I cannot help with that.", "stop": "refusal"}}]}'
run ca
expect_match refusal-refused "$RC:$END" "^4:.*\"status\":\"refused\".*stop reason 'refusal'.*I cannot help with that"

fake_ctl '{"lane": "a", "reset": true, "queue": [{"reply": {"text": "", "stop": "content_filter"}}]}'
run cg
expect_match content-filter-refused "$RC:$END" "^4:.*\"status\":\"refused\".*'content_filter'"
fake_ctl '{"lane": "a", "reset": true, "queue": [{"reply": {"refusal": "I must decline."}}]}'
run cg
expect_match openai-message-refusal "$RC:$END" '^4:.*"status":"refused".*I must decline'

fake_ctl '{"lane": "b", "reset": true, "queue": [
  {"reply": {"text": "searching...  ", "stop": "pause_turn"}},
  {"reply": {"text": " found it", "stop": "end_turn"}}]}'
run ca
expect_match pause-turn-continued "$RC:$END" '^0:.*"status":"ok".*"output":"searching...   found it"'
expect_eq pause-turn-sent-back "$(reqs b | jq_py 'json.loads(d[1]["body"])["messages"][-1]["role"]')" assistant

fake_ctl '{"lane": "b", "reset": true, "queue": [
  {"reply": {"text": "x", "stop": "model_context_window_exceeded"}},
  {"reply": {"text": "fits now", "stop": "end_turn"}}]}'
run ca
expect_match context-window-refit "$RC:$END" '^0:.*"status":"ok".*"output":"fits now"'
fake_ctl '{"lane": "b", "reset": true, "default": {"reply": {"text": "x", "stop": "model_context_window_exceeded"}}}'
run ca
expect_match context-window-exceeded "$RC:$END" '^5:.*"status":"context_exceeded"'
expect_eq context-window-one-retry "$(nreqs b)" 2
fake_ctl '{"lane": "b", "reset": true, "default": {"reply": {"text": "ok"}}}'
fake_ctl '{"lane": "a", "reset": true, "default": {"context_overflow": true}}'
run cg
expect_match context-length-exceeded "$RC:$END" '^5:.*"status":"context_exceeded".*context_exceeded'
expect_eq context-length-not-retried "$(nreqs a)" 2 # the call and its one refit

# whitespace-only text next to a tool call is not sent back (the fake
# answers a whitespace-only text block with a 400, as the API does)
fake_ctl '{"lane": "b", "reset": true, "queue": [
  {"reply": {"text": " \n ", "tool_calls": [{"name": "echo", "arguments": {"n": "a"}}]}},
  {"reply": {"text": "done"}}]}'
run ca
expect_match whitespace-not-sent "$RC:$END" '^0:.*"status":"ok".*"output":"done"'
expect_eq whitespace-one-route "$(printf '%s\n' "$OUT" | grep -c '"status":400')" 0

# ---- failover that knows its errors ---------------------------------------------
# each route's last error in the reason
fake_ctl '{"lane": "a", "reset": true, "default": {"status": 429, "message": "slow down"}}'
fake_ctl '{"lane": "b", "reset": true, "default": {"status": 500}}'
run fo
expect_match reason-lists-routes "$RC:$END" '^1:.*"status":"failed".*fa/m1: HTTP 429: [^;]*\(rate_limit\); fb/m2: HTTP 500[^"]*\(server\)'
expect_eq rate-limit-retried "$(nreqs a)" 2

# a quota 429 is not retried (and opens the breaker at once)
fake_ctl '{"lane": "a", "reset": true, "default": {"status": 429, "quota": true}}'
fake_ctl '{"lane": "b", "reset": true, "default": {"reply": {"text": "from b"}}}'
run fo
expect_match quota-failover "$RC:$END" '^0:.*"output":"from b"'
expect_eq quota-not-retried "$(nreqs a)" 1
mc=$(printf '%s\n' "$OUT" | grep '"type":"model_call"' | head -1)
expect_match quota-class "$mc" 'HTTP 429: insufficient_quota: You exceeded your current quota.*\(quota\)'

# breaker: fa failed 2 calls in a row above (rate limit, then quota):
# its breaker is open and the next call skips it
fake_ctl '{"lane": "a", "reset": true, "default": {"status": 500}}'
fake_ctl '{"lane": "b", "reset": true, "default": {"reply": {"text": "from b"}}}'
run fo
expect_match breaker-skip-run "$RC:$END" '^0:.*"output":"from b"'
expect_eq breaker-skipped "$(nreqs a)" 0
expect_match breaker-attempt "$(printf '%s\n' "$OUT" | grep '"type":"model_call"')" '"provider":"fa","model":"m1","status":0[^}]*circuit open after 2 failed calls'
expect_match breaker-metrics "$(curl -s --unix-socket "$SOCK" http://w/metrics)" 'warden_model_route_open\{provider="fa",model="m1"\} 1'
expect_match breaker-status "$(api GET /v1/status)" '"provider":"fa","model":"m1","state":"open","failures":2'
expect_match breaker-warden-status "$("$WARDEN" status 2>&1 | tr "\n" " " | tr -s " ")" 'fa/m1: open, 2 failed calls in a row, skipped for [0-9.]+ s more; last error: fa/m1: HTTP 429: insufficient_quota'

# ---- cache pricing and breakpoints ---------------------------------------------
# m2: 1 $/M input, 2 $/M output, no cached_input: Anthropic's multipliers
# apply: 1000 uncached + 2000 written 5m (1.25x) + 1000 written 1h (2x) +
# 6000 read (0.1x) + 100 out = (1000 + 2500 + 2000 + 600) e-6 + 200e-6
fake_ctl '{"lane": "b", "reset": true, "queue": [{"reply": {"text": "cached", "usage": {"input_tokens": 10000, "cached_tokens": 6000, "cache_write_tokens": 2000, "cache_write_1h_tokens": 1000, "output_tokens": 100}}}]}'
run ca
expect_eq cache-priced "$(printf '%s' "$END" | jq_py '"%.6f" % d["cost_usd"]')" "0.006300"
body=$(reqs b | jq_py 'd[0]["body"]')
expect_eq cache-breakpoints "$(printf '%s' "$body" | jq_py '(d["system"][0]["cache_control"], d["tools"][-1]["cache_control"], d["messages"][-1]["content"][-1]["cache_control"])')" \
	"({'type': 'ephemeral'}, {'type': 'ephemeral'}, {'type': 'ephemeral'})"
cost=$("$WARDEN" cost --by agent 2>&1)
expect_match cost-cached-columns "$cost" "INPUT_TOK +UNCACHED +CACHED"
# ca: the cache run read 6000 of its 10000 input tokens from the cache
expect_eq cost-cached-json "$("$WARDEN" cost --by agent --json | jq_py "[g[\"cached_tokens\"] for g in d[\"groups\"] if g[\"agent\"] == \"ca\"][0]")" 6000

# OpenAI's automatic caching read back (the fake caches a repeated prefix
# of >= 1024 tokens, as OpenAI does) and priced at cached_input
fake_ctl '{"lane": "a", "reset": true, "queue": [
  {"reply": {"tool_calls": [{"name": "echo", "arguments": {"n": "x"}}]}},
  {"reply": {"text": "ok"}}]}'
run cgl
mc2=$(printf '%s\n' "$OUT" | grep '"type":"model_call"' | tail -1)
expect_match openai-cached-read-back "$RC:$(printf '%s' "$mc2" | jq_py 'd["cached_tokens"] >= 1024')" '^0:True$'
expect_eq openai-cached-priced "$(printf '%s' "$mc2" | jq_py '"%.9f" % d["cost_usd"]')" \
	"$(printf '%s' "$mc2" | jq_py '"%.9f" % (((d["gen_ai.usage.input_tokens"] - d["cached_tokens"]) * 1.0 + d["cached_tokens"] * 0.25 + d["gen_ai.usage.output_tokens"] * 2.0) / 1e6)')"

# ---- tool arguments as the model sent them -------------------------------------
fake_ctl '{"lane": "a", "reset": true, "queue": [
  {"reply": {"tool_calls": [{"name": "echo", "raw_arguments": "{\"n\": \"x\""}]}},
  {"reply": {"text": "ok"}}]}'
run cg
expect_match raw-args-run "$RC:$END" '^0:.*"status":"ok"'
expect_eq raw-args-sent-back "$(reqs a | jq_py 'json.loads(d[1]["body"])["messages"][2]["tool_calls"][0]["function"]["arguments"]')" '{"n": "x"'

stop_daemon
finish
