#!/usr/bin/env bash
# Execution replay end to end (real wardend, broker, sandbox, scripted
# model): an external tool whose effect is a line in a HOST file (outside
# the sandbox, read by this script) runs once in the original and never in
# any replay — every flag combination, including a --tool patch that
# relabels it `side_effects: none`; internal tools replay their recorded
# result; a mock stands in when there is no recording; recorded-model from
# step 0 reproduces the original exactly at $0 with no model call; a changed
# system prompt diverges where the script says, and `warden trace diff` of
# the original and a replay diverging at step 3 puts the first difference
# at step 3 (steps 0-2 the same); unbuilt modes are refused.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip replay-effects "needs root"; finish; }

# a private runtime dir (call directories): the node's shared /run/warden
# is other tests' business
export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
base_policy
mkdir -p "$T/witness"
chmod 777 "$T/witness"
W=$T/witness/sent.log
# the external effect: each call appends its arguments to a host file
tool mail "[\"/usr/bin/tee\", \"-a\", \"$W\"]" "input: stdin" \
	"args_schema: {type: object, required: [to], properties: {to: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:mail\"]}" "side_effects: external"
sed -i "s|write: \[\]|write: [\"$T/witness\"]|" "$POL/tools/mail.yaml"
tool note '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:note\"]}" "side_effects: internal"
script rp <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "a"}}]}
{"step": 1, "tool_calls": [{"name": "mail", "arguments": {"to": "x@example.com"}}]}
{"step": 2, "system": "CHANGED", "tool_calls": [{"name": "mail", "arguments": {"to": "other@example.com"}}]}
{"step": 2, "tool_calls": [{"name": "note", "arguments": {"k": "1"}}]}
{"step": 3, "system": "THIRD", "text": "other answer: {{result}}"}
{"text": "done: {{result}}"}
S
agent rp rp '[echo, mail, note]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

sent() { [ -f "$W" ] && grep -o "\"to\"" "$W" | wc -l || echo 0; }
as_alice() { as_user 1000 "$WARDEN" "$@"; }
last_run() { "$WARDEN" trace ls --json --state "$T/state" | jq_py 'd[0]["run_id"]'; }
end_of() { rec_of "$1" run_end; }

id=$(as_alice run --detach rp go)
wait_until 20 run_done "$id"
expect_eq original-ok "$(run_state "$id" status)" ok
expect_eq original-sent-once "$(sent)" 1
expect_match original-defs-recorded "$(rec_of "$id" run_start | jq_py 'sorted(d["definitions"]["tools"])')" 'echo.*mail.*note'
expect_match original-params-recorded "$(rec_of "$id" model_call | jq_py 'd["params"]')" '"max_tokens":4096'

# --- recorded-model from 0: the same trajectory, $0, no model call
out=$(as_alice replay "$id" --from 0 --determinism recorded-model 2>&1)
rid=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
expect_match rm-converged "$out" "replay of $id from step 0: converged"
expect_eq rm-cost-zero "$(end_of "$rid" | jq_py 'd["cost_usd"]')" 0.0
expect_eq rm-no-model-call "$(recs_of "$rid" model_call | jq_py 'all(x.get("from_record") for x in d) and len(d)')" 4
expect_eq rm-same-prompts "$(recs_of "$rid" model_call | jq_py '[x["prompt_hash"] for x in d]')" \
	"$(recs_of "$id" model_call | jq_py '[x["prompt_hash"] for x in d]')"
expect_eq rm-same-output "$(end_of "$rid" | jq_py 'd["output"]')" "$(end_of "$id" | jq_py 'd["output"]')"
expect_match rm-mail-recorded "$(recs_of "$rid" tool_result | jq_py '[x.get("replay") for x in d]')" '"live"|null,"recorded","recorded"|recorded.*recorded'
expect_eq rm-linked "$(rec_of "$rid" run_start | jq_py 'd["replay_of"]["run_id"]')" "$id"
expect_eq rm-not-sent "$(sent)" 1

# --- a replay of that replay: the results its gate answered from the
# record are its record too (same trajectory, the email recorded, never run)
r1=$rid
out=$(as_alice replay "$r1" --from 0 --determinism recorded-model 2>&1)
r2=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
expect_match rr-converged "$out" "replay of $r1 from step 0: converged"
expect_match rr-gate-args-recorded "$(recs_of "$r1" tool_result | jq_py '" ".join(x["gen_ai.tool.name"]+":"+json.dumps(x.get("args")) for x in d if x.get("replay") == "recorded")')" 'mail:\{"to": "x@example.com"\} note:\{"k": "1"\}'
expect_match rr-mail-recorded "$(recs_of "$r2" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'mail:recorded.*note:recorded'
expect_eq rr-mail-no-attempt "$(recs_of "$r2" tool_attempt | jq_py '[x["gen_ai.tool.name"] for x in d]')" '["echo"]'
expect_eq rr-no-refusal "$(recs_of "$r2" replay_refused | jq_py 'len(d)')" 0
expect_eq rr-same-output "$(end_of "$r2" | jq_py 'd["output"]')" "$(end_of "$id" | jq_py 'd["output"]')"
expect_eq rr-not-sent "$(sent)" 1

# --- a changed system prompt from step 2 diverges there; the new email is refused
echo "You are CHANGED." >"$T/sp.txt"
out=$(as_alice replay "$id" --from 2 --system-prompt "$T/sp.txt" 2>&1)
rid=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
expect_match sp-diverged "$out" 'diverged at step 2: recorded note\(\{"k":"1"\}\), replay mail\(\{"to":"other@example.com"\}\)'
expect_eq sp-divergence-record "$(rec_of "$rid" replay_divergence | jq_py 'd["kind"]+"/"+d["what"]')" different/tool
expect_match sp-refused "$(rec_of "$rid" replay_refused | jq_py 'd["reason"]')" 'not executed during replay: external side effect, no recording or mock'
expect_match sp-model-told "$(end_of "$rid" | jq_py 'd["output"]')" 'not executed during replay'
expect_eq sp-prefix-from-record "$(recs_of "$rid" replay_step | jq_py 'len(d)')" 2
expect_eq sp-no-prefix-model-call "$(recs_of "$rid" model_call | jq_py 'min(x["step"] for x in d)')" 2
expect_eq sp-not-sent "$(sent)" 1
# --- `warden trace diff` of the original and a replay that diverges at
# step 3 (another system prompt from step 3: steps 0-2 from the record,
# another final answer): the first difference is at step 3, the steps
# before it are the same, in text and --json, read through wardend as the
# run's user
echo "You are THIRD." >"$T/sp3.txt"
out=$(as_alice replay "$id" --from 3 --system-prompt "$T/sp3.txt" 2>&1)
r3=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
expect_match diff-replay-diverged "$out" "replay of $id from step 3: diverged at step 3"
out=$(as_alice trace diff "$id" "$r3" 2>&1)
expect_match diff-relation "$out" "$r3 is a replay of $id from step 3"
expect_match diff-first-step3 "$out" 'first divergence: step 3: changed model output'
expect_eq diff-rows "$(printf '%s\n' "$out" | sed -n 's/^[ >]\([0-9/]*\) \+\(same\|extra in B\|missing in B\|changed model output\|different [a-z]*\).*/\1:\2/p' | tr '\n' ' ')" \
	"0:same 1:same 2:same 3:changed model output "
expect_match diff-marker "$out" '>3 +changed model output'
expect_eq diff-json "$(as_alice trace diff "$id" "$r3" --json | jq_py '"%s %s %s" % (d["first_divergence"], d["counts"], [(s["a_step"], s["b_step"], s["verdict"]) for s in d["steps"]])')" \
	"3 {'same': 3, 'changed': 1, 'missing': 0, 'extra': 0} [(0, 0, 'same'), (1, 1, 'same'), (2, 2, 'same'), (3, 3, 'changed model output')]"
expect_eq diff-not-sent "$(sent)" 1

# a replay of it from after its change: the prefix has each step's
# recorded system prompt (the changed one from step 2), so it reproduces
r1=$rid
out=$(as_alice replay "$r1" --from 3 2>&1)
expect_match rr-sp-prefix "$out" "replay of $r1 from step 3: converged"
expect_eq rr-sp-prefix-steps "$(recs_of "$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')" replay_step | jq_py 'len(d)')" 3

# --- every way to ask for the email again: never sent
cat >"$T/relabel.yaml" <<Y
$(sed 's/side_effects: external/side_effects: none/' "$POL/tools/mail.yaml")
Y
grep -q 'side_effects: none' "$T/relabel.yaml" || fail relabel-fixture "no relabel"
combos=(
	"--from 1"
	"--from 1 --args 1.0={\"to\":\"new@example.com\"}"
	"--from 1 --tool mail=$T/relabel.yaml --args 1.0={\"to\":\"new@example.com\"}"
	"--from 1 --tools recorded --args 1.0={\"to\":\"new@example.com\"}"
	"--from 2 --system-prompt $T/sp.txt --tool mail=$T/relabel.yaml"
	"--from 2 --system-prompt $T/sp.txt --tool mail=$T/relabel.yaml --tools recorded"
	"--from 2 --system-prompt $T/sp.txt --determinism recorded-model"
	"--from 0 --tool mail=$T/relabel.yaml --args 1.0={\"to\":\"z@example.com\"} --determinism recorded-model"
	"--from 1 --live-internal"
	"--from 1 --determinism pinned"
)
i=0
for c in "${combos[@]}"; do
	i=$((i + 1))
	# a --tool patch is policy: root replays with it (alice is refused)
	case $c in
	*"--tool "*)
		# shellcheck disable=SC2086
		as_alice replay "$id" $c >"$T/combo.$i.alice" 2>&1
		expect_match "tool-patch-root-only-$i" "$(cat "$T/combo.$i.alice")" 'only root may replay with one'
		# shellcheck disable=SC2086
		"$WARDEN" replay "$id" $c >"$T/combo.$i" 2>&1 ;;
	*)
		# shellcheck disable=SC2086
		as_alice replay "$id" $c >"$T/combo.$i" 2>&1 ;;
	esac
	expect_eq "never-sent-$i" "$(sent)" 1
done
expect_match relabel-refused "$(cat "$T/combo.3")" 'replay_refused .*side_effects=external'
# a replay of the relabelled replay: its record keeps the stricter label
r3=$(sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p' "$T/combo.3")
expect_eq relabel-recorded-strict "$(rec_of "$r3" run_start | jq_py 'd["definitions"]["tools"]["mail"]["side_effects"]')" external
"$WARDEN" replay "$r3" --from 1 --args '1.0={"to":"chain@example.com"}' >"$T/chain" 2>&1
expect_eq never-sent-chain "$(sent)" 1
expect_match chain-refused "$(cat "$T/chain")" 'replay_refused .*side_effects=external'
# note names no replay environment: --live-internal leaves it recorded
r9=$(sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p' "$T/combo.9")
expect_match live-internal-no-env-recorded "$(recs_of "$r9" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'note:recorded'
expect_match pinned-refused-on-script "$(cat "$T/combo.10")" "pinned: model 'rp' routes to provider 'script'"
expect_match args-diverged "$(cat "$T/combo.2")" 'diverged at step 1|refused'

# --- a mock stands in for the external tool when there is no recording
echo "MOCKED-SEND-OK" >"$T/mock.txt"
out=$(as_alice replay "$id" --from 2 --system-prompt "$T/sp.txt" --mock mail="$T/mock.txt" 2>&1)
rid=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
expect_match mock-used "$(end_of "$rid" | jq_py 'd["output"]')" 'MOCKED-SEND-OK'
expect_match mock-recorded "$(recs_of "$rid" tool_result | jq_py '[x.get("replay") for x in d]')" '"mock"'
expect_eq mock-not-sent "$(sent)" 1
# a replay of the mocked replay: the mock's result is its record
out=$(as_alice replay "$rid" --from 2 --system-prompt "$T/sp.txt" --determinism recorded-model 2>&1)
r2=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
expect_match rr-mock-converged "$out" "replay of $rid from step 2: converged"
expect_match rr-mock-recorded "$(recs_of "$r2" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'mail:recorded'
expect_match rr-mock-output "$(end_of "$r2" | jq_py 'd["output"]')" 'MOCKED-SEND-OK'
expect_eq rr-mock-not-sent "$(sent)" 1
out=$(as_alice replay "$id" --from 1 --mock echo="$T/mock.txt" 2>&1)
expect_match mock-only-external "$out" 'mock echo: not an external tool'

# --- internal: the recorded result of the same call; another call is refused
out=$(as_alice replay "$id" --from 2 2>&1)
rid=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
expect_match internal-recorded "$(recs_of "$rid" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'note:recorded'
expect_eq internal-no-attempt "$(recs_of "$rid" tool_attempt | jq_py 'len(d)')" 0
out=$(as_alice replay "$id" --from 2 --args '2.0={"k":"2"}' 2>&1)
expect_match internal-other-refused "$out" 'note side_effects=internal: not executed during replay: internal side effect'

# --- the original is never changed; another user cannot replay it
n_before=$(run_records "$id" | jq_py 'len(d)')
out=$(as_user 1001 "$WARDEN" replay "$id" --from 0 2>&1)
expect_match other-user-refused "$out" "only they or root may replay it"
expect_eq original-unchanged "$(run_records "$id" | jq_py 'len(d)')" "$n_before"
out=$(as_alice replay "$id" --from 9 2>&1)
expect_match from-out-of-range "$out" 'has 4 model steps \(0..3\)'
out=$(as_alice replay "$id" --from 0 --tools live2 2>&1)
expect_match bad-tools-value "$out" "tools live2: only 'recorded'"
stop_daemon
finish
