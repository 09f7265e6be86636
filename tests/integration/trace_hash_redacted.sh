#!/usr/bin/env bash
# The hashes a record carries (prompt_hash, output_hash, args_hash,
# result_hash) are of what the store keeps, redacted: a hash of the text
# before redaction would confirm a guess of the secret the store hid. A run
# whose model output, tool arguments and tool output hold an API key
# (redacted in the store): each hash equals the hash of the redacted text (result_hash
# is its blob's, result_ref), none is the sha256 of the unredacted text,
# and the run replays from step 2 (its rebuilt conversation, from the
# redacted blobs, hashes to the recorded prompt_hash) and its diff against
# its replay has no divergence.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-hash-redacted "needs root"; finish; }

base_policy
# the tool (printf) writes a key of its own: the key is in the tool's
# result; the model sends the key in another call's arguments, which that
# tool (cat) writes back: it is in the model's output and the arguments
SECRET="sk-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
tool leak "[\"/usr/bin/printf\", \"key=%s\\\\n\", \"$SECRET\"]" "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:leak\"]}" "side_effects: none"
script once <<S
{"step": 0, "tool_calls": [{"name": "leak", "arguments": {}}]}
{"step": 1, "tool_calls": [{"name": "echo", "arguments": {"n": "$SECRET"}}]}
{"text": "done"}
S
agent one once '[echo, leak]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

id=$("$WARDEN" run --detach one "look it up")
wait_until 20 run_done "$id" || { fail hash-redacted-run "run $id did not finish: $(tail -3 "$T/wardend.log")"; finish; }
if grep -r -a -q -F "$SECRET" "$T/state/trace"; then fail hash-redacted-store "the secret is in the store"; else pass hash-redacted-store; fi

sha() { printf '%s' "$1" | sha256sum | sed 's/^/sha256:/; s/ .*//'; }
blob() { "$WARDEN" trace payload --state "$T/state" --json "$id" "$1" | jq_py "[p['payload'] for p in d if p.get('ref')=='$2'][0]"; }
unred() { printf '%s' "$1" | sed "s/sk-\[REDACTED\]/$SECRET/g"; }
field() { # TYPE FIELD [TOOL]: of the first record of TYPE (of TOOL)
	recs_of "$id" "$1" | jq_py "[r for r in d if '$3' in ('', r.get('gen_ai.tool.name'))][0].get('$2', '')"
}

# result_hash: the redacted result (its blob), never the result as the tool wrote it
rh=$(field tool_result result_hash leak)
rr=$(field tool_result result_ref leak)
payload=$(blob 0 "$rr")
expect_match hash-redacted-result-redacted "$payload" 'sk-\[REDACTED\]'
expect_eq hash-redacted-result-is-ref "$rh" "$rr"
expect_eq hash-redacted-result-of-redacted "$rh" "$(sha "$payload")"
if [ "$rh" = "$(sha "$(unred "$payload")")" ]; then fail hash-redacted-result-not-secret "result_hash is sha256 of the unredacted output"; else pass hash-redacted-result-not-secret; fi

# args_hash: of the redacted arguments
ah=$(field tool_attempt args_hash echo)
expect_eq hash-redacted-args "$ah" "$(sha '{"n":"sk-[REDACTED]"}')"
if [ "$ah" = "$(sha "{\"n\":\"$SECRET\"}")" ]; then fail hash-redacted-args-not-secret "args_hash is of the unredacted arguments"; else pass hash-redacted-args-not-secret; fi

# output_hash: of the model's redacted output (text, tool names, arguments)
canon() { python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(json.dumps({"text": r["text"], "tool_calls": [{"name": c.get("name"), "arguments": c.get("arguments")} for c in r["tool_calls"]]}, sort_keys=True, separators=(",", ":")), end="")' "$1"; }
resp=$(recs_of "$id" model_call | jq_py "d[1]['response']")
oh=$(recs_of "$id" model_call | jq_py "d[1]['output_hash']")
expect_eq hash-redacted-output "$oh" "$(sha "$(canon "$resp")")"
if [ "$oh" = "$(sha "$(canon "$(unred "$resp")")")" ]; then fail hash-redacted-output-not-secret "output_hash is of the unredacted output"; else pass hash-redacted-output-not-secret; fi

# prompt_hash: of the redacted prompt (its blob)
# (the prompt of step 2 holds both results)
expect_eq hash-redacted-prompt-is-ref "$(recs_of "$id" model_call | jq_py "d[2]['prompt_hash'] == d[2]['prompt_ref']")" True

# replay and diff keep working on those hashes
out=$("$WARDEN" replay "$id" --from 2 --json 2>&1)
end=$(printf '%s\n' "$out" | grep '"type":"run_end"')
rid=$(printf '%s\n' "$out" | head -1 | jq_py "d['run_id']" 2>/dev/null)
expect_eq hash-redacted-replay "$(printf '%s' "$end" | jq_py "(d['status'], d['replay']['converged'])" 2>&1)" "('ok', True)"
expect_match hash-redacted-replay-diff "$("$WARDEN" trace diff --state "$T/state" "$id" "$rid" 2>&1)" 'no divergence: every step is the same'
finish
