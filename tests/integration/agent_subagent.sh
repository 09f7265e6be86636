#!/usr/bin/env bash
# Sub-agents end to end (real wardend, broker, sandbox, scripted models): a
# parent delegates to a child (tool "agent__<name>") that calls a tool; the
# child's output reaches the parent's final answer; a child whose own budget
# is larger than what remains of its parent's is stopped by the inherited
# bound (steps, tokens, cost, wall clock) with the reason in the parent's
# tool result and in both traces; the parent's totals include the child's
# usage; the child never has more authority than the user or its own
# definition; an ungranted sub-agent fails at the grant check; a cycle is
# refused at load with file:line:col; the trace links parent <-> child.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip agent-subagent "needs root"; finish; }

base_policy
tool sleepy '["/usr/bin/sleep", "0.6"]' "input: stdin" \
	"args_schema: {type: object}" "auth: {mode: on_behalf_of_user, scopes: [\"test:sleep\"]}" \
	"side_effects: none"
# granted to a parent only: its child must not reach it
tool parentonly '["/usr/bin/true"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:echo\"]}" "side_effects: none"

# needs a human: a sub-agent's run cannot suspend for one
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:echo\"]}" "side_effects: external" \
	"approval: always"

# the child: one tool call, then an answer built from the tool's output
script worker <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "child saw: {{task}}"}}], "usage": {"input_tokens": 20, "output_tokens": 10}}
{"after": "echo", "error": false, "text": "CHILD-DONE {{result.stdout}}", "usage": {"input_tokens": 30, "output_tokens": 10}}
{"text": "CHILD-TOOL-FAILED {{result}}", "usage": {"input_tokens": 30, "output_tokens": 10}}
S
# a child that never stops by itself: 150 tokens, $0.00105 per call
script loop <<'S'
{"tool_calls": [{"name": "echo", "arguments": {"n": "loop {{step}}"}}], "usage": {"input_tokens": 100, "output_tokens": 50}}
S
script sleeper <<'S'
{"tool_calls": [{"name": "sleepy", "arguments": {"k": "{{step}}"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}
S
# a child that tries a tool only its parent is granted
script greedy <<'S'
{"step": 0, "tool_calls": [{"name": "parentonly", "arguments": {}}], "usage": {"input_tokens": 10, "output_tokens": 5}}
{"text": "GREEDY-SAW {{result.check}}", "usage": {"input_tokens": 10, "output_tokens": 5}}
S
script gater <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"x": 1}}], "usage": {"input_tokens": 10, "output_tokens": 5}}
{"text": "GATER-SAW {{result.check}}", "usage": {"input_tokens": 10, "output_tokens": 5}}
S
# a sub-agent with a sub-agent of its own
script middle <<'S'
{"step": 0, "tool_calls": [{"name": "agent__helper", "arguments": {"task": "inner: {{task}}"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}
{"after": "agent__helper", "error": false, "text": "MID [{{result.output}}]", "usage": {"input_tokens": 10, "output_tokens": 5}}
{"text": "MID-FAILED {{result}}"}
S
# deleg NAME CHILD: a parent model that delegates once, then reports
deleg() {
	script "$1" <<S
{"step": 0, "tool_calls": [{"name": "agent__$2", "arguments": {"task": "please handle: {{task}}"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}
{"after": "agent__$2", "error": false, "text": "PARENT-FINAL [{{result.output}}]", "usage": {"input_tokens": 10, "output_tokens": 5}}
{"after": "agent__$2", "error": true, "text": "PARENT-SAW-FAILURE status={{result.status}} check={{result.check}} bound={{result.bound}} inherited={{result.inherited}} reason={{result.reason}}{{result.error}}", "usage": {"input_tokens": 10, "output_tokens": 5}}
{"text": "PARENT-OTHER {{result}}"}
S
}
subagents() { echo "subagents: $2" >>"$POL/agents/$1.yaml"; }

deleg pboss helper
deleg psteps looper
deleg ptokens looper
deleg pcost looper
deleg pwall sleeper
deleg pown short
deleg progue helper
deleg pgreedy greedy
deleg pnest mid
deleg pgate gatechild
deleg pslow sleeper

# agent NAME MODEL TOOLS steps tokens wall cost
agent helper worker '[echo]'
agent looper loop '[echo]' 100 1000000 60 10
agent short loop '[echo]' 2 1000000 60 10
agent sleeper sleeper '[sleepy]' 100 1000000 60 10
agent greedy greedy '[echo]'
agent boss pboss '[]'
subagents boss '[helper]'
agent psteps psteps '[]' 4 1000000 60 10
subagents psteps '[looper]'
# 15 tokens used at the delegation: the child gets 485 (3 calls = 450 < 485)
agent ptokens ptokens '[]' 100 500 60 10
subagents ptokens '[looper]'
# $0.000105 used at the delegation: the child gets $0.003895 (4 calls)
agent pcost pcost '[]' 100 1000000 60 0.004
subagents pcost '[looper]'
agent pwall pwall '[]' 100 1000000 3 10
subagents pwall '[sleeper]'
agent pown pown '[]' 10 1000000 60 10
subagents pown '[short]'
# lists a different sub-agent: its model's call to agent__helper is not granted
agent progue progue '[]'
subagents progue '[short]'
agent pgreedy pgreedy '[parentonly]'
subagents pgreedy '[greedy]'
agent gatechild gater '[gated]'
agent pgate pgate '[]'
subagents pgate '[gatechild]'
agent mid middle '[]'
subagents mid '[helper]'
agent pnest pnest '[]'
subagents pnest '[mid]'
agent pslow pslow '[]' 100 1000000 120 10
subagents pslow '[sleeper]'
write_gateway

# the shipped-format checker accepts the policy (cross-file checks included)
out=$("$WARDEN" policy check "$POL" 2>&1)
expect_eq policy-check-ok "$?" 0
start_daemon || { fail daemon-start "see log"; finish; }

run_id_of() { printf '%s\n' "$1" | head -1 | jq_py 'd["run_id"]'; }
end_of() { printf '%s\n' "$1" | grep '"type":"run_end"' | head -1; }
field() { printf '%s' "$1" | jq_py "$2"; } # JSON EXPR
sub_result() { printf '%s\n' "$1" | grep '"type":"tool_result"' | grep '"gen_ai.tool.name":"agent__' | head -1; }

# 1. delegation: the child calls a tool, its output reaches the parent's answer
out=$(as_user 1000 "$WARDEN" run --json boss "the quarterly numbers" 2>&1)
pid=$(run_id_of "$out")
end=$(end_of "$out")
expect_match delegate-parent-ok "$end" '"status":"ok"'
expect_match delegate-output-reaches-parent "$(field "$end" 'd.get("output","")')" \
	'^PARENT-FINAL \[CHILD-DONE \{"n":"child saw: please handle: the quarterly numbers"\}\]$'
res=$(sub_result "$out")
cid=$(field "$res" 'd.get("child_run_id","")')
expect_match delegate-result-ok "$res" '"status":"ok"'
expect_match delegate-child-id "$cid" '^run_[0-9a-f]{16}$'
att=$(printf '%s\n' "$out" | grep '"type":"tool_attempt"' | head -1)
expect_match delegate-attempt-links-child "$att" "\"child_run_id\":\"$cid\""
# the child's own trace: linked back to the parent, its tool call ran as alice
cstart=$(rec_of "$cid" run_start)
expect_match child-start-parent "$cstart" "\"parent_run_id\":\"$pid\""
expect_eq child-start-parent-step "$(field "$cstart" 'd["parent_step"]')" 0
expect_eq child-start-depth "$(field "$cstart" 'd["depth"]')" 1
expect_eq child-same-user "$(field "$cstart" 'd["user"]')" alice
expect_match child-tool-ran "$(rec_of "$cid" tool_result)" '"gen_ai.tool.name":"echo".*"status":"ok"'
expect_match child-tool-for-user "$(rec_of "$cid" tool_attempt)" '"user_uid":1000'
expect_match child-tool-own-uid "$(rec_of "$cid" tool_result)" '"run_as_uid":20000[0-9]{5}'
cend=$(rec_of "$cid" run_end)
expect_match child-end-parent "$cend" "\"parent_run_id\":\"$pid\""
expect_match parent-end-lists-child "$(rec_of "$pid" run_end)" "\"subagent_runs\":\\[\"$cid\"\\]"
# totals: the parent's include the child's usage; its own figures do not
pend=$(rec_of "$pid" run_end)
got=$(printf '%s\n%s\n' "$pend" "$cend" | python3 -c "import json,sys
p=json.loads(sys.stdin.readline()); c=json.loads(sys.stdin.readline()); t=p['total']
ok = (t['input_tokens'] == p['gen_ai.usage.input_tokens'] + c['gen_ai.usage.input_tokens'] and
      t['output_tokens'] == p['gen_ai.usage.output_tokens'] + c['gen_ai.usage.output_tokens'] and
      abs(t['cost_usd'] - (p['cost_usd'] + c['cost_usd'])) < 1e-9 and
      c['gen_ai.usage.input_tokens'] == 50 and t['steps'] == p['steps'] + 2)
print('ok' if ok else 'bad: %s / %s' % (t, c))")
expect_eq parent-totals-include-child "$got" ok
info=$(api GET "/v1/runs/$pid" | cut -d' ' -f2-)
expect_eq parent-run-info-total "$(field "$info" 'd["total"]["input_tokens"]')" \
	"$(field "$pend" 'd["total"]["input_tokens"]')"
# trace show of the parent shows the child's run and timeline
show=$("$WARDEN" trace show --state "$T/state" "$pid" 2>&1)
expect_match trace-show-child-link "$show" "tool_attempt .*agent__helper .*child=$cid"
expect_match trace-show-child-timeline "$show" "sub-agent run $cid \(agent helper, parent step 0\)"
expect_match trace-show-child-records "$show" "run_start .*agent=helper .*parent=$pid@step0"
# the parent's cost is attributed once per agent (the child's to the child)
c=$("$WARDEN" cost --by agent --json)
expect_match cost-child-attributed "$(field "$c" '[g["agent"] for g in d["groups"] if g["cost_usd"] > 0]')" '"helper"'

# 2. inherited bounds: the child's own budget is larger than what remains
check_inherited() { # PARENT BOUND CHILD_LIMIT_EXPR
	local out pid res cid cstart cstop pstop
	out=$(as_user 1000 "$WARDEN" run --json "$1" go 2>&1)
	pid=$(run_id_of "$out")
	res=$(sub_result "$out")
	cid=$(field "$res" 'd.get("child_run_id","")')
	expect_match "inherit-$2-result" "$res" "\"status\":\"stopped\".*\"bound\":\"$2\".*\"inherited\":true"
	expect_match "inherit-$2-reason" "$(field "$res" 'd["reason"]')" \
		"^$2 reached \(limit .*; the limit is what remained of parent run $pid's budget\)$"
	cstart=$(rec_of "$cid" run_start)
	expect_match "inherit-$2-child-start" "$(field "$cstart" 'd["bounds_inherited"]')" "\"$2\""
	expect_eq "inherit-$2-child-limit" "$(field "$cstart" "$3")" True
	cstop=$(rec_of "$cid" budget_stop)
	expect_match "inherit-$2-child-budget_stop" "$cstop" "\"bound\":\"$2\".*\"inherited\":true.*\"parent_run_id\":\"$pid\""
	expect_match "inherit-$2-child-end" "$(rec_of "$cid" run_end)" "\"status\":\"stopped\""
	# the child spent what was left: the parent stops on the same bound,
	# its usage counting the child's
	pstop=$(rec_of "$pid" budget_stop)
	expect_match "inherit-$2-parent-stopped" "$pstop" "\"bound\":\"$2\""
	expect_match "inherit-$2-parent-end" "$(end_of "$out")" "\"status\":\"stopped\".*\"reason\":\"$2 reached"
	RES=$res CID=$cid PID_=$pid PSTOP=$pstop
}
# max_steps 4: the parent's call is one, so 3 remain for the child
check_inherited psteps max_steps 'd["bounds"]["max_steps"] == 3 and d["agent_bounds"]["max_steps"] == 100'
expect_eq inherit-max_steps-child-calls "$(recs_of "$CID" model_call | jq_py 'len(d)')" 3
expect_eq inherit-max_steps-parent-used "$(field "$PSTOP" 'd["used"]')" 4.0
expect_eq inherit-max_steps-parent-used-by-child "$(field "$PSTOP" 'd["used_by_subagents"]')" 3.0
check_inherited ptokens token_budget 'd["bounds"]["token_budget"] == 485'
expect_eq inherit-token_budget-child-calls "$(recs_of "$CID" model_call | jq_py 'len(d)')" 4
expect_eq inherit-token_budget-parent-used "$(field "$PSTOP" 'd["used"]')" 615.0
check_inherited pcost cost_cap_usd 'abs(d["bounds"]["cost_cap_usd"] - 0.003895) < 1e-9'
expect_eq inherit-cost_cap_usd-child-calls "$(recs_of "$CID" model_call | jq_py 'len(d)')" 4
expect_eq inherit-cost_cap_usd-parent-used "$(field "$PSTOP" 'round(d["used"], 6)')" 0.004305
# wall clock 3 s; the child's 0.6 s tool calls run into what is left
check_inherited pwall wall_clock_s '0 < d["bounds"]["wall_clock_s"] < 3 and d["agent_bounds"]["wall_clock_s"] == 60'

# 3. a child stopped by its OWN bound: the parent's model gets the reason
out=$(as_user 1000 "$WARDEN" run --json pown go 2>&1)
expect_match own-bound-parent-answer "$(field "$(end_of "$out")" 'd.get("output","")')" \
	'^PARENT-SAW-FAILURE status=stopped check= bound=max_steps inherited=false reason=max_steps reached \(limit 2, used 2\)$'
expect_match own-bound-parent-ok "$(end_of "$out")" '"status":"ok"'

# 4. an ungranted sub-agent fails at the grant check; no child run starts
out=$(as_user 1000 "$WARDEN" run --json progue go 2>&1)
res=$(sub_result "$out")
expect_match ungranted-grant-check "$res" '"status":"denied".*"check":"grant"'
expect_match ungranted-reason "$res" "tool 'agent__helper' is not granted to agent 'progue'"
expect_eq ungranted-no-attempt "$(printf '%s\n' "$out" | grep -c '"type":"tool_attempt"')" 0
expect_match ungranted-model-told "$(field "$(end_of "$out")" 'd.get("output","")')" 'status=denied check=grant'

# 5. authority: the child has its own grants only, and the user's scopes
out=$(as_user 1000 "$WARDEN" run --json pgreedy go 2>&1)
cid=$(field "$(sub_result "$out")" 'd.get("child_run_id","")')
expect_match child-own-grants-only "$(rec_of "$cid" tool_result)" \
	"\"status\":\"denied\".*\"check\":\"grant\".*not granted to agent 'greedy'"
expect_match child-grant-told-parent "$(field "$(end_of "$out")" 'd.get("output","")')" 'PARENT-FINAL \[GREEDY-SAW grant\]'
# carol lacks test:echo: the child's echo is refused as her, at authz
out=$(as_user 1002 "$WARDEN" run --json boss go 2>&1)
cid=$(field "$(sub_result "$out")" 'd.get("child_run_id","")')
expect_match child-user-authz "$(rec_of "$cid" tool_result)" \
	"\"status\":\"denied\".*\"check\":\"authz\".*user 'carol' lacks scope 'test:echo'"
expect_eq child-user-no-attempt "$(recs_of "$cid" tool_attempt | jq_py 'len(d)')" 0

# an approval-gated tool is refused inside a sub-agent's run (no suspension)
out=$(as_user 1000 "$WARDEN" run --json pgate go 2>&1)
cid=$(field "$(sub_result "$out")" 'd.get("child_run_id","")')
expect_match child-approval-refused "$(rec_of "$cid" tool_result)" \
	'"status":"denied".*"check":"approval".*cannot wait for an approval'
expect_eq child-approval-none-pending "$(approvals_count)" 0
expect_match child-approval-parent-ok "$(field "$(end_of "$out")" 'd.get("output","")')" 'PARENT-FINAL \[GATER-SAW approval\]'

# 6. nesting: the grandchild's output and usage reach the top run
out=$(as_user 1000 "$WARDEN" run --json pnest deep 2>&1)
pid=$(run_id_of "$out")
pend=$(end_of "$out")
expect_match nest-output "$(field "$pend" 'd.get("output","")')" \
	'^PARENT-FINAL \[MID \[CHILD-DONE \{"n":"child saw: inner: please handle: deep"\}\]\]$'
mid=$(field "$(sub_result "$out")" 'd.get("child_run_id","")')
gc=$(field "$(recs_of "$mid" tool_result)" '[r for r in d if r.get("child_run_id")][0]["child_run_id"]')
gstart=$(rec_of "$gc" run_start)
expect_match nest-grandchild-link "$gstart" "\"parent_run_id\":\"$mid\""
expect_eq nest-grandchild-depth "$(field "$gstart" 'd["depth"]')" 2
# top: own 10+10 in; mid 10+10; helper 20+30 -> 90 in, 5 model calls below
expect_eq nest-total-tokens "$(field "$pend" 'd["total"]["input_tokens"]')" 90
expect_eq nest-total-steps "$(field "$pend" 'd["total"]["steps"] - d["steps"]')" 4
expect_eq nest-mid-total "$(field "$(rec_of "$mid" run_end)" 'd["total"]["input_tokens"]')" 70
show=$("$WARDEN" trace show --state "$T/state" "$pid" 2>&1)
expect_match nest-trace-show "$show" "^  sub-agent run $gc \(agent helper, parent step 0\)"

# 7. a daemon stop while a child runs: the child ends `interrupted`, the
# parent is parked with that result and its usage, and resumes after start
pid=$(as_user 1000 "$WARDEN" run --detach pslow go)
child_busy() { # the child has finished at least one tool call
	local c
	c=$(rec_of "$pid" tool_attempt | jq_py 'd.get("child_run_id","")')
	[ -n "$c" ] && [ "$(recs_of "$c" tool_result | jq_py 'len(d)')" -ge 1 ]
}
if wait_until 20 child_busy; then pass restart-child-running; else fail restart-child-running "no child tool call"; fi
stop_daemon
cid=$(rec_of "$pid" tool_attempt | jq_py 'd.get("child_run_id","")')
expect_match restart-child-interrupted "$(rec_of "$cid" run_end)" '"status":"interrupted"'
expect_match restart-parent-result "$(rec_of "$pid" tool_result)" '"status":"interrupted"'
expect_eq restart-parent-not-ended "$(recs_of "$pid" run_end | jq_py 'len(d)')" 0
start_daemon || { fail daemon-restart "see log"; finish; }
if wait_until 30 run_done "$pid"; then pass restart-parent-resumed; else fail restart-parent-resumed "not done"; fi
pend=$(rec_of "$pid" run_end)
expect_match restart-parent-saw "$(field "$pend" 'd.get("output","")')" '^PARENT-SAW-FAILURE status=interrupted '
cin=$(field "$(rec_of "$cid" run_end)" 'd["gen_ai.usage.input_tokens"]')
expect_eq restart-parent-total-kept "$(field "$pend" 'd["total"]["input_tokens"] - d["gen_ai.usage.input_tokens"]')" "$cin"

# 8. policy: a cycle, an unknown sub-agent and a typo'd key are refused
C=$T/cyc
cp -r "$POL" "$C"
cat >"$C/agents/ca.yaml" <<'Y'
name: ca
team: t
model: worker
system_prompt: "a"
tools: [echo]
subagents: [helper, cb]
bounds: {max_steps: 3, token_budget: 1000, wall_clock_s: 10, cost_cap_usd: 1}
Y
cat >"$C/agents/cb.yaml" <<'Y'
name: cb
team: t
model: worker
system_prompt: "b"
tools: [echo]
subagents:
  - ca
bounds: {max_steps: 3, token_budget: 1000, wall_clock_s: 10, cost_cap_usd: 1}
Y
err=$("$WARDEN" policy check "$C" 2>&1)
rc=$?
expect_eq cycle-check-exit "$rc" 1
expect_match cycle-file-line-col "$err" \
	"$C/agents/cb.yaml:7:5: agent 'cb': sub-agent 'ca' makes a cycle \(ca -> cb -> ca\)"
# the daemon refuses to load it too (its old policy stays)
cp "$C/agents/ca.yaml" "$C/agents/cb.yaml" "$POL/agents/"
err=$("$WARDEN" policy reload 2>&1)
rc=$?
expect_eq cycle-reload-refused "$rc" 1
expect_match cycle-reload-reason "$err" "agents/cb.yaml:7:5: agent 'cb': sub-agent 'ca' makes a cycle"
rm -f "$POL/agents/ca.yaml" "$POL/agents/cb.yaml"
out=$(as_user 1000 "$WARDEN" run --json boss again 2>&1)
expect_match cycle-old-policy-serves "$(end_of "$out")" '"status":"ok"'
# unknown name, self-delegation and a typo'd key
rm -f "$C/agents/cb.yaml"
sed -i 's/subagents: \[helper, cb\]/subagents: [helper, nosuch, ca]/' "$C/agents/ca.yaml"
err=$("$WARDEN" policy check "$C" 2>&1)
expect_match unknown-subagent "$err" "$C/agents/ca.yaml:6:21: agent 'ca': sub-agent 'nosuch': no agent of that name in the policy"
expect_match self-subagent "$err" "$C/agents/ca.yaml:6:29: agent 'ca': sub-agent 'ca': an agent cannot be its own sub-agent"
sed -i 's/subagents: \[helper, nosuch, ca\]/subagent: [helper]/' "$C/agents/ca.yaml"
err=$("$WARDEN" policy check "$C" 2>&1)
expect_match typo-key-refused "$err" "$C/agents/ca.yaml:6:1: unknown key 'subagent'"
stop_daemon
finish
