#!/usr/bin/env bash
# Every one of the four bounds stops a run, with its reason, through the real
# daemon, broker, sandbox and the scripted model (which never stops by
# itself: it calls a tool on every step).
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip agent-bounds "needs root"; finish; }

base_policy
tool sleepy '["/usr/bin/sleep", "0.6"]' "input: stdin" \
	"args_schema: {type: object}" "auth: {mode: on_behalf_of_user, scopes: [\"test:sleep\"]}" \
	"side_effects: none"
script loop <<'S'
{"tool_calls": [{"name": "echo", "arguments": {"n": "step {{step}}"}}], "usage": {"input_tokens": 100, "output_tokens": 50}}
S
script sleeper <<'S'
{"tool_calls": [{"name": "sleepy", "arguments": {"k": "{{step}}"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}
S
# agent NAME MODEL TOOLS steps tokens wall cost
agent steps loop '[echo]' 3 1000000 60 10
agent tokens loop '[echo]' 100 250 60 10
agent wall sleeper '[sleepy]' 100 1000000 2 10
agent cost loop '[echo]' 100 1000000 60 0.002
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

check_bound() { # AGENT BOUND EXPECTED_STEPS_REGEX
	local out id stop end
	out=$(as_user 1000 "$WARDEN" run --json "$1" "go" 2>&1)
	id=$(printf '%s\n' "$out" | head -1 | jq_py 'd["run_id"]')
	stop=$(printf '%s\n' "$out" | grep '"type":"budget_stop"' | head -1)
	end=$(printf '%s\n' "$out" | grep '"type":"run_end"' | head -1)
	expect_match "bound-$2-budget_stop" "$stop" "\"bound\":\"$2\""
	expect_match "bound-$2-run_end" "$end" "\"status\":\"stopped\".*\"reason\":\"$2 reached"
	expect_match "bound-$2-steps" "$(printf '%s' "$end" | jq_py 'd["steps"]')" "$3"
	# the trace on disk says the same
	expect_match "bound-$2-trace" "$(rec_of "$id" budget_stop)" "\"bound\":\"$2\""
}

check_bound steps max_steps '^3$'
# 150 tokens per call: 2 calls = 300 >= 250
check_bound tokens token_budget '^2$'
# 0.6 s per tool call, 2 s of wall clock: stopped after 3 or 4 steps
check_bound wall wall_clock_s '^[34]$'
# (100*3 + 50*15)/1e6 = $0.00105 per call: 2 calls >= $0.002
check_bound cost cost_cap_usd '^2$'
# each run's cost is attributed to its agent and team
c=$("$WARDEN" cost --by agent --json | jq_py '[g["agent"] for g in d["groups"] if g["cost_usd"] > 0]')
for a in steps tokens wall cost; do
	expect_match "cost-attributed-$a" "$c" "\"$a\""
done
stop_daemon
finish
