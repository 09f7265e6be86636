#!/usr/bin/env bash
# Execution replay against the record and today's policy (real wardend, the
# loopback fake of the OpenAI/Anthropic APIs, the scripted model): pinned
# determinism sends the seed to the OpenAI-compatible fake (seen in the
# fake's request log) and is refused on an Anthropic route; a damaged blob
# stops a replay before step 0 with a named error; an agent file changed
# on disk does not change what a replay runs (the recorded definition);
# a user who lost a scope today cannot replay into a live call needing it;
# `trace show` links a replay and its original both ways.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip replay-integrity "needs root"; finish; }

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
base_policy
start_fake
script rs <<'S'
{"step": 0, "system": "CHANGED", "tool_calls": [{"name": "echo", "arguments": {"n": "changed"}}]}
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "a"}}]}
{"step": 1, "system": "patched", "tool_calls": [{"name": "echo", "arguments": {"n": "patched"}}]}
{"step": 1, "tool_calls": [{"name": "echo", "arguments": {"n": "b"}}]}
{"text": "done: {{result}}"}
S
agent rs rs '[echo]'
agent pin oa '[echo]'
script pinsub <<'S'
{"text": "sub done"}
S
agent pinboss oa '[]'
echo "subagents: [pinsub]" >>"$POL/agents/pinboss.yaml"
agent pinsub pinsub '[]'
agent anth an '[echo]'
echo "  oa: [{provider: fa, model: m1}]" >>"$POL/aliases.part"
echo "  an: [{provider: fb, model: m2}]" >>"$POL/aliases.part"
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }
as_alice() { as_user 1000 "$WARDEN" "$@"; }
rid_of() { printf '%s\n' "$1" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p'; }
reload() { api POST /v1/policy/reload | cut -d' ' -f1; }

# --- pinned: the seed reaches the OpenAI-compatible fake
call='{"reply": {"tool_calls": [{"name": "echo", "arguments": {"n": "p"}}]}}'
fin='{"reply": {"text": "fin"}}'
fake_ctl "{\"lane\": \"a\", \"reset\": true, \"queue\": [$call, $fin, $call, $fin]}"
id=$(as_alice run --detach pin go)
wait_until 20 run_done "$id"
expect_eq pin-original-ok "$(run_state "$id" status)" ok
expect_eq pin-original-no-seed "$(curl -s "http://127.0.0.1:$FAKE_PORT/_requests?lane=a" | jq_py '[("seed" in json.loads(x["body"])) for x in d]')" '[false,false]'
out=$(as_alice replay "$id" --from 0 --determinism pinned 2>&1)
rid=$(rid_of "$out")
seeds=$(curl -s "http://127.0.0.1:$FAKE_PORT/_requests?lane=a" | jq_py '[json.loads(x["body"]).get("seed") for x in d]')
rseed=$(rec_of "$rid" model_call | jq_py 'd["params"]["seed"]')
expect_match pin-seed-recorded "$rseed" '^[0-9]+$'
expect_eq pin-seed-sent "$seeds" "[null,null,$rseed,$rseed]"
expect_eq pin-determinism-recorded "$(rec_of "$rid" run_start | jq_py 'd["replay_of"]["determinism"]')" pinned
expect_eq pin-fingerprint "$(rec_of "$rid" model_call | jq_py 'd.get("system_fingerprint")')" fp_fake
expect_match pin-converged "$out" 'converged'
expect_eq pin-seed-checked "$(rec_of "$rid" run_end | jq_py 'd["replay"]["seed"]')" "{\"value\":$rseed,\"fingerprint_changed_at\":null}"
fake_ctl "{\"lane\": \"b\", \"reset\": true, \"queue\": [$call, $fin]}"
id2=$(as_alice run --detach anth go)
wait_until 20 run_done "$id2"
out=$(as_alice replay "$id2" --from 0 --determinism pinned 2>&1)
expect_match pin-refused-anthropic "$out" "pinned: model 'an' routes to provider 'fb' \(anthropic\), which takes no seed"
expect_eq pin-anthropic-no-call "$(curl -s "http://127.0.0.1:$FAKE_PORT/_requests?lane=b" | jq_py 'len(d)')" 2
# every agent of the tree: a sub-agent on a route without a seed refuses
# the replay before anything runs
sub='{"reply": {"tool_calls": [{"name": "agent__pinsub", "arguments": {"task": "t"}}]}}'
fake_ctl "{\"lane\": \"a\", \"reset\": true, \"queue\": [$sub, $fin, $sub, $fin]}"
id2=$(as_alice run --detach pinboss go)
wait_until 30 run_done "$id2"
expect_eq pin-tree-original-ok "$(run_state "$id2" status)" ok
expect_match pin-tree-original-child "$(rec_of "$id2" tool_attempt | jq_py 'd.get("child_run_id","")')" '^run_'
out=$(as_alice replay "$id2" --from 0 --determinism pinned 2>&1)
expect_match pin-tree-sub-refused "$out" "pinned: sub-agent 'pinsub': model 'pinsub' routes to provider 'script' \(script\), which takes no seed"
expect_eq pin-tree-no-run "$(rid_of "$out")" ""
expect_eq pin-tree-no-call "$(curl -s "http://127.0.0.1:$FAKE_PORT/_requests?lane=a" | jq_py 'len(d)')" 2

# --- recorded definitions: the agent file changed on disk is not used
id=$(as_alice run --detach rs go)
wait_until 20 run_done "$id"
expect_eq rs-original-ok "$(run_state "$id" status)" ok
sed -i 's/You are a test agent./You are CHANGED./' "$POL/agents/rs.yaml"
expect_eq reload-changed-agent "$(reload)" 200
out=$(as_alice replay "$id" --from 0 2>&1)
rid=$(rid_of "$out")
expect_match recorded-def-converged "$out" "replay of $id from step 0: converged"
expect_eq recorded-def-ref "$(rec_of "$rid" run_start | jq_py 'd["definitions"]["agent"]["ref"]')" \
	"$(rec_of "$id" run_start | jq_py 'd["definitions"]["agent"]["ref"]')"
expect_eq recorded-def-prompt "$(rec_of "$rid" model_call | jq_py 'd["prompt_hash"]')" \
	"$(rec_of "$id" model_call | jq_py 'd["prompt_hash"]')"
expect_match policy-payload "$("$WARDEN" trace payload "$id" --policy --state "$T/state")" 'You are a test agent'
# a new run does use the new file (the check above can tell them apart)
id3=$(as_alice run --detach rs go)
wait_until 20 run_done "$id3"
expect_eq new-run-uses-new-file "$(rec_of "$id3" tool_attempt | jq_py 'd["args"]["n"]')" changed

# --- an --agent patch from a user changes the prompt, never the grants:
# widening a bound or a tool list is policy (root only)
sed 's/max_steps: 10/max_steps: 99/' "$POL/agents/rs.yaml" >"$T/rs-wide.yaml"
sed 's/tools: \[echo\]/tools: [echo, shell]/' "$POL/agents/rs.yaml" >"$T/rs-tools.yaml"
sed 's/You are CHANGED./You are patched./' "$POL/agents/rs.yaml" >"$T/rs-prompt.yaml"
chmod 644 "$T"/rs-*.yaml
out=$(as_alice replay "$id" --from 0 --agent "$T/rs-wide.yaml" 2>&1)
expect_match agent-patch-bound-refused "$out" "changes 'bounds.max_steps' of agent 'rs'"
expect_eq agent-patch-bound-no-run "$(rid_of "$out")" ""
out=$(as_alice replay "$id" --from 0 --agent "$T/rs-tools.yaml" 2>&1)
expect_match agent-patch-tools-refused "$out" "changes 'tools' of agent 'rs'"
out=$(as_alice replay "$id" --from 0 --agent "$T/rs-prompt.yaml" 2>&1)
expect_match agent-patch-prompt-ok "$out" "^run run_[0-9a-f]* \(replay of $id\)"
# the patched agent's system prompt reaches the model from step N on (the
# script answers "patched" at step 1 only under that prompt)
out=$(as_alice replay "$id" --from 1 --agent "$T/rs-prompt.yaml" 2>&1)
prid=$(rid_of "$out")
expect_match agent-patch-prompt-diverged "$out" 'diverged at step 1: recorded echo\(n: "b"\), replay echo\(n: "patched"\)'
expect_eq agent-patch-prompt-prefix "$(recs_of "$prid" replay_step | jq_py 'len(d)')" 1
expect_match agent-patch-prompt-sent "$("$WARDEN" trace payload "$prid" 1 --state "$T/state" 2>&1)" 'You are patched\.'
out=$("$WARDEN" replay "$id" --from 0 --agent "$T/rs-wide.yaml" 2>&1)
expect_match agent-patch-root-may-widen "$out" "^run run_[0-9a-f]* \(replay of $id\)"

# --- another user: refused before anything else about the run is looked
# at, the same answer whatever else the request says (a patch checked
# against the recorded definition would name its grants and bounds)
plain=$(as_user 1001 "$WARDEN" replay "$id" --from 0 2>&1)
expect_match stranger-refused "$plain" "only they or root may replay it"
i=0
for c in "--from 0 --agent $T/rs-wide.yaml" "--from 0 --agent $T/rs-tools.yaml" \
	"--from 99" "--from 0 --mock echo=$T/rs-prompt.yaml" "--from 0 --tool echo=$T/rs-prompt.yaml"; do
	i=$((i + 1))
	# shellcheck disable=SC2086
	expect_eq "stranger-same-answer-$i" "$(as_user 1001 "$WARDEN" replay "$id" $c 2>&1)" "$plain"
done

# --- links both ways
show=$("$WARDEN" trace show "$id" --state "$T/state")
expect_match original-links-replay "$show" "replayed by $rid from step 0: converged"
show=$("$WARDEN" trace show "$rid" --state "$T/state")
expect_match replay-links-original "$show" "replay of $id from step 0"

# --- a scope lost today: the live call is refused
sed -i 's/eng: {scopes: \["test:\*"\]}/eng: {scopes: ["other:*"]}/' "$POL/users.yaml"
expect_eq reload-scopes "$(reload)" 200
out=$(as_alice replay "$id" --from 1 2>&1)
rid=$(rid_of "$out")
expect_match scope-refused "$(recs_of "$rid" tool_result | jq_py '[x["status"]+":"+x.get("check","") for x in d]')" 'denied:authz'
expect_eq scope-no-attempt "$(recs_of "$rid" tool_attempt | jq_py 'len(d)')" 0
out=$(as_alice replay "$id" --from 0 --determinism recorded-model 2>&1)
rid=$(rid_of "$out")
expect_match scope-refused-recorded-model "$(recs_of "$rid" tool_result | jq_py '[x["status"]+":"+x.get("check","") for x in d]')" 'denied:authz'

# --- a damaged blob: the replay stops before step 0, named
ref=$(rec_of "$id" model_call | jq_py 'd["response_ref"]')
hex=${ref#sha256:}
blob=$T/state/trace/blobs/${hex:0:2}/${hex:2}
[ -f "$blob" ] || fail damaged-fixture "no blob $blob"
printf 'not zlib at all' >"$blob"
runs_before=$("$WARDEN" trace ls --json --state "$T/state" | jq_py 'len(d)')
out=$(as_alice replay "$id" --from 1 2>&1)
rc=$?
expect_eq damaged-exit "$rc" 1
expect_match damaged-named "$out" "the record cannot be reproduced: step 0: response_ref $ref: .*damaged blob"
expect_eq damaged-no-run "$("$WARDEN" trace ls --json --state "$T/state" | jq_py 'len(d)')" "$runs_before"
expect_match damaged-verify "$("$WARDEN" trace verify "$id" --state "$T/state" 2>&1)" "$hex|blob"
stop_daemon
finish
