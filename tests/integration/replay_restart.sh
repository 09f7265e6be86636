#!/usr/bin/env bash
# A replay waiting on an approval when wardend restarts is not resumed: its
# replay gate (recordings, mocks, stricter side-effect labels) lives in
# memory only, and resuming it as an ordinary run could run its tools live.
# It is ended `interrupted` with a reason that says so and names the
# original to replay again; its approval is gone and its tool never ran
# (a host file the tool would append to is the witness).
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip replay-restart "needs root"; finish; }

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
base_policy
mkdir -p "$T/witness"
chmod 777 "$T/witness"
W=$T/witness/ran.log
tool gated "[\"/usr/bin/tee\", \"-a\", \"$W\"]" "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: none" "approval: always"
sed -i "s|write: \[\]|write: [\"$T/witness\"]|" "$POL/tools/gated.yaml"
script rs <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"k": "1"}}]}
{"text": "done: {{result}}"}
S
agent rs rs '[gated]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }
ran() { [ -f "$W" ] && grep -o '"k"' "$W" | wc -l || echo 0; }
has_approval() { [ "$(approvals_count)" -ge 1 ]; }

id=$(as_user 1000 "$WARDEN" run --detach rs go)
wait_until 10 has_approval || fail original-suspended "no approval request"
as_user 1001 "$WARDEN" approvals approve "$(first_approval)" >/dev/null
wait_until 20 run_done "$id"
expect_eq original-ok "$(run_state "$id" status)" ok
expect_eq original-ran "$(ran)" 1

# the replay's live call asks again (an approval is never reused) ...
rid=$(as_user 1000 "$WARDEN" replay "$id" --from 0 --detach)
wait_until 10 has_approval || fail replay-suspended "no approval request for the replay"
expect_eq replay-suspended "$(run_state "$rid" state)" awaiting_approval
# ... and the daemon restarts while it waits
stop_daemon
start_daemon || { fail daemon-restart "see log"; finish; }
end=$(rec_of "$rid" run_end)
expect_eq replay-interrupted "$(printf '%s' "$end" | jq_py 'd["status"]')" interrupted
expect_match replay-reason "$(printf '%s' "$end" | jq_py 'd["reason"]')" "a replay is not resumed across a restart .*replay gate.*replay $id again from step 0"
expect_eq replay-approval-gone "$(approvals_count)" 0
expect_eq replay-tool-not-run "$(ran)/$(recs_of "$rid" tool_attempt | jq_py 'len(d)')" 1/0
stop_daemon
finish
