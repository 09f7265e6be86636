#!/usr/bin/env bash
# The gateway's failover seen from a run: the first provider of the alias
# (OpenAI wire format, loopback fake server) answers 500 every time, the
# second (Anthropic wire format) answers; the run succeeds, its model_call
# records show the failed attempts, and tool calls / tool results travel in
# each provider's wire format.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip agent-failover "needs root"; finish; }

start_fake
[ -n "$FAKE_PORT" ] || { fail fake-model "fake model server did not start"; finish; }
base_policy
agent fo failover '[echo]'
write_gateway
fake_ctl '{"lane": "a", "reset": true, "default": {"status": 500, "message": "upstream down"}}'
fake_ctl '{"lane": "b", "reset": true, "queue": [
  {"reply": {"text": "calling echo", "tool_calls": [{"name": "echo", "arguments": {"n": "hello"}}], "usage": {"input_tokens": 1000, "output_tokens": 100}}},
  {"reply": {"text": "all done", "usage": {"input_tokens": 1200, "output_tokens": 20}}}]}'
start_daemon || { fail daemon-start "see log"; finish; }

out=$(as_user 1000 "$WARDEN" run --json fo "say hello" 2>&1)
id=$(printf '%s\n' "$out" | head -1 | jq_py 'd["run_id"]')
end=$(printf '%s\n' "$out" | grep '"type":"run_end"')
expect_match failover-run-ok "$end" '"status":"ok".*"output":"all done"'
mc=$(printf '%s\n' "$out" | grep '"type":"model_call"' | head -1)
expect_match failover-provider "$mc" '"gen_ai.provider.name":"fb"'
expect_match failover-attempts-500 "$mc" '"provider":"fa","model":"m1","status":500'
expect_match failover-answered "$mc" '"provider":"fb","model":"m2","status":200'
expect_match failover-usage "$mc" '"gen_ai.usage.input_tokens":1000,"gen_ai.usage.output_tokens":100'
# price m2: 1 $/M in, 2 $/M out -> (1000 + 1200) * 1e-6 + (100 + 20) * 2e-6
cost=$(printf '%s' "$end" | jq_py '"%.6f" % d["cost_usd"]')
expect_eq failover-cost "$cost" "0.002440"
expect_match failover-tool-ran "$(printf '%s\n' "$out" | grep '"type":"tool_result"')" '"status":"ok"'
# the second request to the Anthropic lane carried the tool result block
reqs=$(curl -s "http://127.0.0.1:$FAKE_PORT/_requests?lane=b")
expect_match failover-tool-result-wire "$reqs" 'tool_result'
# cost per user
expect_eq cost-by-user "$("$WARDEN" cost --by user --json | jq_py '[(g["user"], round(g["cost_usd"], 6), g["input_tokens"]) for g in d["groups"]]')" '[["alice",0.00244,2200]]'
stop_daemon
finish
