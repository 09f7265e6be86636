#!/usr/bin/env bash
# Execution replay of a sub-agent tree (real wardend, broker, sandbox,
# scripted models): a replayed parent's live call to a sub-agent starts a
# child run that replays by the same rules against the original child run
# of the same call — its external tool (witnessed in a HOST file) answered
# from the child's record, never run again; a child the original never
# started has no record, so its external call is refused; recorded-model
# reaches the children too (no model call anywhere in the tree).
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip replay-subagent "needs root"; finish; }

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
base_policy
mkdir -p "$T/witness"
chmod 777 "$T/witness"
W=$T/witness/sent.log
tool mail "[\"/usr/bin/tee\", \"-a\", \"$W\"]" "input: stdin" \
	"args_schema: {type: object, required: [to], properties: {to: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:mail\"]}" "side_effects: external"
sed -i "s|write: \[\]|write: [\"$T/witness\"]|" "$POL/tools/mail.yaml"
script boss <<'S'
{"step": 0, "system": "CHANGED", "tool_calls": [{"name": "agent__helper", "arguments": {"task": "another task"}}]}
{"step": 0, "tool_calls": [{"name": "agent__helper", "arguments": {"task": "send it"}}]}
{"text": "boss done: {{result.output}}"}
S
script helper <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "h"}}]}
{"step": 1, "tool_calls": [{"name": "mail", "arguments": {"to": "sub@example.com"}}]}
{"text": "helper done"}
S
agent boss boss '[]'
echo "subagents: [helper]" >>"$POL/agents/boss.yaml"
agent helper helper '[echo, mail]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }
sent() { [ -f "$W" ] && grep -o '"to"' "$W" | wc -l || echo 0; }
as_alice() { as_user 1000 "$WARDEN" "$@"; }
rid_of() { printf '%s\n' "$1" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p'; }
child_of() { rec_of "$1" tool_attempt | jq_py 'd.get("child_run_id","")'; }

id=$(as_alice run --detach boss go)
wait_until 30 run_done "$id"
expect_eq original-ok "$(run_state "$id" status)" ok
expect_eq original-sent-once "$(sent)" 1
ochild=$(child_of "$id")
expect_match original-child "$ochild" '^run_'

out=$(as_alice replay "$id" --from 0 2>&1)
rid=$(rid_of "$out")
expect_match tree-converged "$out" "replay of $id from step 0: converged"
rchild=$(child_of "$rid")
expect_match tree-child-started "$rchild" '^run_'
expect_eq child-linked "$(rec_of "$rchild" run_start | jq_py 'd["replay_of"]["run_id"]')" "$ochild"
expect_match child-mail-recorded "$(recs_of "$rchild" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'mail:recorded'
expect_match child-echo-live "$(recs_of "$rchild" tool_attempt | jq_py '[x["gen_ai.tool.name"] for x in d]')" 'echo'
expect_eq child-converged "$(rec_of "$rchild" run_end | jq_py 'd["replay"]["summary"]')" converged
expect_eq tree-not-sent "$(sent)" 1

echo "You are CHANGED." >"$T/sp.txt"
out=$(as_alice replay "$id" --from 0 --system-prompt "$T/sp.txt" 2>&1)
rid=$(rid_of "$out")
expect_match new-child-diverged "$out" 'diverged at step 0: recorded agent__helper\(\{"task":"send it"\}\), replay agent__helper\(\{"task":"another task"\}\)|diverged at step 0: recorded agent__helper\(task: "send it"\), replay agent__helper\(task: "another task"\)'
rchild=$(child_of "$rid")
expect_match new-child-mail-refused "$(rec_of "$rchild" replay_refused | jq_py 'd["reason"]')" 'external side effect, no recording or mock'
expect_eq new-child-not-sent "$(sent)" 1

# --- a --tool patch (root) of a tool only the sub-agent uses: applied in
# the child run, checked like any patch, never a way to relabel
sed 's|/usr/bin/cat|/usr/bin/rev|g' "$POL/tools/echo.yaml" >"$T/echo-rev.yaml"
sed 's/side_effects: external/side_effects: none/' "$POL/tools/mail.yaml" >"$T/mail-none.yaml"
sed 's/scopes: \["test:mail"\]/scopes: []/' "$POL/tools/mail.yaml" >"$T/mail-noscope.yaml"
out=$("$WARDEN" replay "$id" --from 0 --tool echo="$T/echo-rev.yaml" 2>&1)
rid=$(rid_of "$out")
rchild=$(child_of "$rid")
expect_eq sub-tool-patch-defs "$(rec_of "$rchild" run_start | jq_py 'd["definitions"]["tools"]["echo"]["ref"]')" \
	"$(rec_of "$rid" run_start | jq_py 'd["replay_of"]["patches"]["tool"]["echo"]')"
expect_eq sub-tool-patch-applied "$(recs_of "$rchild" tool_result | jq_py '[json.loads(x["preview"])["stdout"].startswith(chr(125)) for x in d if x["gen_ai.tool.name"] == "echo"]')" '[true]'
expect_match sub-tool-patch-mail-recorded "$(recs_of "$rchild" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'mail:recorded'
out=$("$WARDEN" replay "$id" --from 0 --tool mail="$T/mail-noscope.yaml" 2>&1)
expect_match sub-tool-patch-checked "$out" "--tool mail: the patched manifest drops scope 'test:mail'"
expect_eq sub-tool-patch-checked-no-run "$(rid_of "$out")" ""
# (the witness writable by any call's uid: a live send would show)
chmod 666 "$W"
out=$("$WARDEN" replay "$id" --from 0 --system-prompt "$T/sp.txt" --tool mail="$T/mail-none.yaml" 2>&1)
rid=$(rid_of "$out")
rchild=$(child_of "$rid")
expect_match sub-relabel-refused "$(rec_of "$rchild" replay_refused | jq_py 'd["reason"]+" "+d["side_effects"]')" 'external side effect, no recording or mock external'
expect_eq sub-relabel-no-attempt "$(recs_of "$rchild" tool_attempt | jq_py '[x["gen_ai.tool.name"] for x in d]')" '["echo"]'
expect_eq sub-relabel-not-sent "$(sent)" 1

out=$(as_alice replay "$id" --from 0 --determinism recorded-model 2>&1)
rid=$(rid_of "$out")
rchild=$(child_of "$rid")
expect_eq rm-parent-calls-from-record "$(recs_of "$rid" model_call | jq_py 'all(x.get("from_record") for x in d) and len(d)')" 2
expect_eq rm-child-calls-from-record "$(recs_of "$rchild" model_call | jq_py 'all(x.get("from_record") for x in d) and len(d)')" 3
expect_eq rm-tree-not-sent "$(sent)" 1
stop_daemon
finish
