#!/usr/bin/env bash
# `warden trace diff` compares what the model said and called (its text,
# tool names and arguments: a model_call's output_hash), not the provider's
# random tool-call ids (Anthropic toolu_..., OpenAI call_...): two runs
# against the fake provider that answer the same, each call with its own
# random id, are the same at every step, for full and hash_only runs;
# the response hashes are still shown, and a run whose call has other
# arguments is still a changed model output.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-diff-ids "needs root"; finish; }

base_policy
start_fake
echo "  anth: [{provider: fb, model: m2}]" >>"$POL/aliases.part"
echo "  oai: [{provider: fa, model: m1}]" >>"$POL/aliases.part"
agent same anth '[echo]'
agent sameo oai '[echo]'
agent hidden anth '[echo]'
sed -i 's/payloads: full/payloads: hash_only/' "$POL/agents/hidden.yaml"
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

# queue LANE N: the answer "call echo {n: N}", then "done"
queue() {
	fake_ctl "{\"lane\": \"$1\", \"queue\": [
	  {\"reply\": {\"text\": \"calling\", \"tool_calls\": [{\"name\": \"echo\", \"arguments\": {\"n\": \"$2\"}}], \"stop\": \"tool_use\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 5}}},
	  {\"reply\": {\"text\": \"done\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 5}}}]}"
}
# one_run AGENT LANE N: a run, to its end (one at a time: the lane's queue
# is shared)
one_run() {
	queue "$2" "$3"
	local id
	id=$(as_user 1000 "$WARDEN" run --detach "$1" go) || return 1
	wait_until 30 run_done "$id" || { echo "run $id did not finish" >&2; return 1; }
	printf '%s' "$id"
}
D() { "$WARDEN" trace diff --state "$T/state" "$@" 2>&1; }
ids_of() { recs_of "$1" tool_attempt | jq_py '[r["gen_ai.tool.call.id"] for r in d]'; }

for c in same:b sameo:a hidden:b; do
	ag=${c%%:*} lane=${c#*:}
	a=$(one_run "$ag" "$lane" x1) && b=$(one_run "$ag" "$lane" x1) || { fail "diff-ids-$ag-runs" "runs failed: $(tail -3 "$T/wardend.log")"; continue; }
	# the test proves something only when the ids (and so the responses'
	# hashes) differ
	ia=$(ids_of "$a") ib=$(ids_of "$b")
	if [ "$ia" != "$ib" ] && printf '%s' "$ia" | grep -q 'toolu_\|call_'; then pass "diff-ids-$ag-ids-differ"
	else fail "diff-ids-$ag-ids-differ" "$ia vs $ib"; fi
	ra=$(rec_of "$a" model_call | jq_py 'd["response_ref"]') rb=$(rec_of "$b" model_call | jq_py 'd["response_ref"]')
	if [ "$ra" != "$rb" ]; then pass "diff-ids-$ag-response-hashes-differ"; else fail "diff-ids-$ag-response-hashes-differ" "$ra"; fi
	out=$(D "$a" "$b")
	expect_match "diff-ids-$ag-same" "$out" 'no divergence: every step is the same'
	expect_eq "diff-ids-$ag-json" "$(D "$a" "$b" --json | jq_py '[s["verdict"] for s in d["steps"]]')" '["same","same"]'
	# other arguments: a changed model output
	o=$(one_run "$ag" "$lane" x2) || { fail "diff-ids-$ag-other-run" "run failed"; continue; }
	expect_match "diff-ids-$ag-other-args" "$(D "$a" "$o")" 'first divergence: step 0: changed model output'
done
# the hashes are still shown (HTML: each step's response hash)
expect_match diff-ids-html-hash "$(D "$a" "$b" --html -o -)" 'class="hash" title="sha256:'

finish
