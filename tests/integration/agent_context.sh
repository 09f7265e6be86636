#!/usr/bin/env bash
# Context fitting: with a small context.budget_tokens, older tool results
# are externalised to the trace (a blob the reference names) and the
# sliding window drops the oldest whole turns; the requests the Anthropic
# fake receives stay valid (every tool_result answers a tool_use of the turn
# before it), and the run completes.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip agent-context "needs root"; finish; }

start_fake
[ -n "$FAKE_PORT" ] || { fail fake-model "fake model server did not start"; finish; }
base_policy
# each result is ~12 KB, cut to the context's share with a note
tool pad '["/usr/bin/cat", "/etc/services"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:pad\"]}" "side_effects: none"
sed -i 's|read: \[|read: ["/etc/services", |' "$POL/tools/pad.yaml"
echo "  fbonly: [{provider: fb, model: m2}]" >>"$POL/aliases.part"
agent ctx fbonly '[pad]' 30 1000000 60 10 450
write_gateway
q='['
for i in 1 2 3 4 5 6; do
	q="$q{\"reply\": {\"text\": \"step $i\", \"tool_calls\": [{\"name\": \"pad\", \"arguments\": {\"i\": $i}}], \"usage\": {\"input_tokens\": 10, \"output_tokens\": 10}}},"
done
q="$q{\"reply\": {\"text\": \"finished\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 10}}}]"
fake_ctl "{\"lane\": \"b\", \"reset\": true, \"queue\": $q}"
start_daemon || { fail daemon-start "see log"; finish; }

out=$(as_user 1000 "$WARDEN" run --json ctx "pad a lot" 2>&1)
id=$(printf '%s\n' "$out" | head -1 | jq_py 'd["run_id"]')
expect_match context-run-ok "$(printf '%s\n' "$out" | grep '"type":"run_end"')" '"status":"ok".*"output":"finished"'
fits=$(printf '%s\n' "$out" | grep '"type":"context_fit"')
expect_match context-fit-recorded "$fits" '"budget_tokens":450'
ext=$(printf '%s\n' "$fits" | python3 -c 'import json,sys; print(sum(json.loads(l)["externalised"] for l in sys.stdin if l.strip()))')
drop=$(printf '%s\n' "$fits" | python3 -c 'import json,sys; print(sum(json.loads(l)["dropped_turns"] for l in sys.stdin if l.strip()))')
if [ "${ext:-0}" -ge 1 ]; then pass context-externalised; else fail context-externalised "externalised=$ext"; fi
if [ "${drop:-0}" -ge 1 ]; then pass context-window-slides; else fail context-window-slides "dropped=$drop"; fi
# the last request stayed within budget and carried a reference to the trace
reqs=$(curl -s "http://127.0.0.1:$FAKE_PORT/_requests?lane=b")
last=$(printf '%s' "$reqs" | jq_py 'json.dumps(d[-1]["body"])')
expect_match context-reference-sent "$(printf '%s\n' "$reqs" | jq_py '" ".join(json.dumps(r["body"]) for r in d)')" "moved out of the context to the run.s trace as sha256:[0-9a-f]{64}"
n=$(printf '%s' "$last" | wc -c)
if [ "$n" -lt 9000 ]; then pass context-request-bounded; else fail context-request-bounded "last request $n bytes"; fi
# the reference resolves to the original result in the blob store
ref=$(printf '%s\n' "$reqs" | grep -o 'sha256:[0-9a-f]\{64\}' | head -1)
h=${ref#sha256:}
blob="$T/state/trace/blobs/${h:0:2}/${h:2}"
got=$(python3 -c 'import sys,zlib; print(zlib.decompress(open(sys.argv[1],"rb").read()).decode()[:200])' "$blob" 2>&1)
expect_match context-ref-resolves "$got" 'Network services|truncated: the result is'
# no 400 from the fake: every request was well formed for the API
expect_eq context-no-invalid-requests "$(grep -c ' 400 ' "$T/fake.log")" 0
stop_daemon
finish
