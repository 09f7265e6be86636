#!/usr/bin/env bash
# Gateway at the binary level: the shipped gateway.yaml checks clean with
# `warden policy check`, a broken one reports file:line:col; and the fake
# model server (tests/fakemodel) speaks the providers' wire formats the way
# the real APIs do (response shapes, ids, usage, error bodies, 429 +
# retry-after, request validation), checked with plain curl.
. tests/lib.sh
T=$(mktemp -d /tmp/warden-gateway.XXXXXX)
FAKE_PID=
cleanup() { [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

# ---- policy check -------------------------------------------------------------
out=$("$WARDEN" policy check policy/gateway.yaml 2>&1); rc=$?
expect_eq gateway-policy-check-shipped "$rc" 0
mkdir -p "$T/p/models" && cp policy/models/*.script "$T/p/models/"
sed 's/^    timeout_ms: 120000/    timout_ms: 120000/' policy/gateway.yaml >"$T/p/gateway.yaml"
out=$("$WARDEN" policy check "$T/p/gateway.yaml" 2>&1); rc=$?
expect_eq gateway-policy-check-typo-rc "$rc" 1
expect_match gateway-policy-check-typo-pos "$out" "gateway.yaml:[0-9]+:[0-9]+: provider 'anthropic': unknown key 'timout_ms'"
sed 's/models\/demo.script/models\/missing.script/' policy/gateway.yaml >"$T/p/gateway.yaml"
out=$("$WARDEN" policy check "$T/p/gateway.yaml" 2>&1); rc=$?
expect_match gateway-policy-check-missing-script "$rc:$out" "^1:.*gateway.yaml:[0-9]+:[0-9]+:.*missing.script"
printf '{"step": 0, "text": "{{nope}}"}\n' >"$T/p/models/demo.script"
cp policy/gateway.yaml "$T/p/gateway.yaml"
out=$("$WARDEN" policy check "$T/p/gateway.yaml" 2>&1); rc=$?
expect_match gateway-policy-check-bad-script "$rc:$out" "^1:.*demo.script:1:1: 'text': unknown template"

# ---- the fake's wire formats ------------------------------------------------------
python3 tests/fakemodel/fakemodel.py --port 0 --port-file "$T/port" --key k-123 >/dev/null 2>&1 &
FAKE_PID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
[ -s "$T/port" ] || { fail fakemodel-start "no port file"; finish; }
P=$(cat "$T/port")
B=http://127.0.0.1:$P
ctl() { curl -s -X POST "$B/_control" -d "$1" >/dev/null; }
# post PATH KEY BODY -> "STATUS\nHEADERS\nBODY" pieces in files
post() { curl -s -D "$T/h" -o "$T/b" -w '%{http_code}' -X POST "$B$1" \
	-H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' \
	-H "x-api-key: $2" -H "Authorization: Bearer $2" -d "$3"; }
jq_py() { python3 -c "import json,sys; d=json.load(open('$T/b')); print($1)"; }

ctl '{"lane": "", "reset": true, "queue": [{"reply": {"text": "hi", "tool_calls": [{"name": "run_python", "arguments": {"code": "1"}}], "usage": {"input_tokens": 50, "output_tokens": 7, "cached_tokens": 10}}}]}'
st=$(post /v1/messages k-123 '{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}')
expect_eq fake-anthropic-200 "$st" 200
expect_eq fake-anthropic-shape "$(jq_py "d['type'], d['role'], [b['type'] for b in d['content']], d['content'][1]['id'][:6], d['stop_reason'], d['usage']['input_tokens'], d['usage']['cache_read_input_tokens'], d['usage']['output_tokens']")" \
	"message assistant ['text', 'tool_use'] toolu_ tool_use 40 10 7"

ctl '{"lane": "", "reset": true, "queue": [{"reply": {"tool_calls": [{"name": "f", "arguments": {"a": 1}}]}}]}'
st=$(post /v1/chat/completions k-123 '{"model": "m", "messages": [{"role": "user", "content": "x"}]}')
expect_eq fake-openai-shape "$st:$(jq_py "d['object'], d['choices'][0]['finish_reason'], d['choices'][0]['message']['content'], d['choices'][0]['message']['tool_calls'][0]['id'][:5], d['choices'][0]['message']['tool_calls'][0]['function']['arguments'], 'prompt_tokens_details' in d['usage']")" \
	"200:chat.completion tool_calls None call_ {\"a\": 1} True"

ctl '{"lane": "", "reset": true, "queue": [{"status": 429, "retry_after": "3"}]}'
st=$(post /v1/messages k-123 '{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}')
expect_eq fake-429-status "$st" 429
expect_match fake-429-retry-after "$(cat "$T/h")" "^retry-after: 3"
expect_eq fake-429-anthropic-body "$(jq_py "d['type'], d['error']['type']")" "error rate_limit_error"
ctl '{"lane": "", "reset": true, "queue": [{"status": 429}]}'
st=$(post /v1/chat/completions k-123 '{"model": "m", "messages": [{"role": "user", "content": "x"}]}')
expect_eq fake-429-openai-body "$st:$(jq_py "d['error']['code'], d['error']['type']")" "429:rate_limit_exceeded requests"

st=$(post /v1/messages wrong '{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}')
expect_eq fake-401-bad-key "$st:$(jq_py "d['error']['type']")" "401:authentication_error"

# request validation, as the real APIs: a tool_result must answer the
# previous assistant turn's tool_use; roles alternate; tool messages follow
# tool_calls
st=$(post /v1/messages k-123 '{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "r"}]}]}')
expect_eq fake-anthropic-rejects-orphan-result "$st:$(jq_py "d['error']['type']")" "400:invalid_request_error"
st=$(post /v1/messages k-123 '{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r", "is_error": true}]}]}')
expect_eq fake-anthropic-accepts-result "$st" 200
st=$(post /v1/chat/completions k-123 '{"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "user", "content": "y"}]}')
expect_eq fake-openai-rejects-missing-tool-msg "$st" 400
st=$(post /v1/messages k-123 '{"model": "m", "messages": [{"role": "user", "content": "x"}]}')
expect_eq fake-anthropic-requires-max-tokens "$st" 400

# what the references say about parameters and text blocks
M='"model": "m", "max_tokens": 10'
st=$(post /v1/messages k-123 "{$M, \"temperature\": 1.5, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}")
expect_eq fake-anthropic-temperature-0-1 "$st" 400
st=$(post /v1/chat/completions k-123 '{"model": "m", "temperature": 1.5, "messages": [{"role": "user", "content": "x"}]}')
expect_eq fake-openai-temperature-0-2 "$st" 200
st=$(post /v1/messages k-123 "{$M, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \" \\n\"}]}, {\"role\": \"user\", \"content\": \"y\"}]}")
expect_match fake-anthropic-whitespace-text "$st:$(jq_py "d['error']['message']")" "^400:.*non-whitespace"
st=$(post /v1/messages k-123 "{$M, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"partial \"}]}")
expect_match fake-anthropic-final-assistant-whitespace "$st:$(jq_py "d['error']['message']")" "^400:.*trailing whitespace"
ctl '{"lane": "", "reset": true, "queue": [{"status": 429, "quota": true}]}'
st=$(post /v1/chat/completions k-123 '{"model": "m", "messages": [{"role": "user", "content": "x"}]}')
expect_eq fake-openai-quota-body "$st:$(jq_py "d['error']['type'], d['error']['code']")" "429:insufficient_quota insufficient_quota"
ctl '{"lane": "", "reset": true, "queue": [{"reply": {"text": "no", "stop": "refusal"}}, {"reply": {"refusal": "I cannot"}}]}'
post /v1/messages k-123 "{$M, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}" >/dev/null
expect_eq fake-anthropic-refusal "$(jq_py "d['stop_reason']")" refusal
post /v1/chat/completions k-123 '{"model": "m", "messages": [{"role": "user", "content": "x"}]}' >/dev/null
expect_eq fake-openai-message-refusal "$(jq_py "d['choices'][0]['message']['refusal'], d['choices'][0]['message']['content']")" "I cannot None"
# cache_control: at most 4 breakpoints; a prefix of >= 1024 tokens ending
# at one is written, then read by the next request that repeats it
ctl '{"lane": "", "reset": true}'
big=$(python3 -c 'print("rule " * 1200)')
CC='"cache_control": {"type": "ephemeral"}'
st=$(post /v1/messages k-123 "{$M, \"system\": [{\"type\": \"text\", \"text\": \"a\", $CC}, {\"type\": \"text\", \"text\": \"b\", $CC}, {\"type\": \"text\", \"text\": \"c\", $CC}, {\"type\": \"text\", \"text\": \"d\", $CC}, {\"type\": \"text\", \"text\": \"e\", $CC}], \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}")
expect_match fake-cache-max-4 "$st:$(jq_py "d['error']['message']")" "^400:A maximum of 4 blocks"
REQ="{$M, \"system\": [{\"type\": \"text\", \"text\": \"$big\", $CC}], \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}"
post /v1/messages k-123 "$REQ" >/dev/null
w=$(jq_py "d['usage']['cache_creation_input_tokens'], d['usage']['cache_read_input_tokens'], d['usage']['cache_creation']['ephemeral_5m_input_tokens'] > 1000")
post /v1/messages k-123 "$REQ" >/dev/null
r=$(jq_py "d['usage']['cache_creation_input_tokens'], d['usage']['cache_read_input_tokens'] > 1000")
expect_match fake-cache-write-then-read "$w|$r" "^[0-9]+ 0 True\|0 True$"
finish
