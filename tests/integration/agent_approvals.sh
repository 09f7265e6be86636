#!/usr/bin/env bash
# Approval gates end to end: a gated call suspends the run (holding no
# thread), an approver approves or denies it as themselves (SO_PEERCRED), a
# non-approver cannot, an undecided approval is denied at its TTL with a
# webhook notification, and a suspended run survives a daemon restart.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip agent-approvals "needs root"; finish; }

base_policy
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: external" \
	"approval: always"
tool mail '["/usr/bin/cat"]' "input: stdin" \
	"args_schema: {type: object, properties: {to: {type: array, items: {type: string}}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:mail\"]}" "side_effects: external" \
	"approval: {required_above: {to: 1}}"
script gate <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"task": "{{task}}"}}]}
{"after": "gated", "error": true, "text": "refused: {{result}}"}
{"after": "gated", "text": "done: {{result}}"}
S
script mailer <<'S'
{"step": 0, "tool_calls": [{"name": "mail", "arguments": {"to": ["a@x"]}}]}
{"step": 1, "tool_calls": [{"name": "mail", "arguments": {"to": ["a@x", "b@x"]}}]}
{"text": "end: {{result}}"}
S
agent gate gate '[gated]'
# a gated call and a slow one in the same model response: the approval is
# listed only once its record and the run's snapshot are on disk
tool slow2 '["/usr/bin/sleep", "2"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: none"
script gateslow <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"task": "{{task}}"}}, {"name": "slow2", "arguments": {}}]}
{"text": "done: {{result}}"}
S
agent gateslow gateslow '[gated, slow2]'
agent mailer mailer '[mail]'
write_gateway

# webhook receiver for TTL notifications (loopback)
cat >"$T/hook.py" <<'P'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        with open(sys.argv[2], "ab") as f:
            f.write(self.rfile.read(n) + b"\n")
        self.send_response(204); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
P
python3 "$T/hook.py" "$T/hook.port" "$T/hook.log" &
HOOK_PID=$!
for _ in $(seq 50); do [ -s "$T/hook.port" ] && break; sleep 0.05; done
trap 'kill $HOOK_PID 2>/dev/null; cleanup_all' EXIT

start_daemon --webhook "http://127.0.0.1:$(cat "$T/hook.port")/hook" || { fail daemon-start "see log"; finish; }

start_run() { as_user 1000 "$WARDEN" run --detach "$1" "${2:-go}"; }
has_approval() { [ "$(approvals_count)" -ge "${1:-1}" ]; }

# --- approve
id=$(start_run gate)
wait_until 10 has_approval || fail approval-requested "no approval appeared"
expect_eq suspended-state "$(run_state "$id" state)" awaiting_approval
aid=$(first_approval)
# alice (not an approver) cannot decide; bob can
out=$(as_user 1000 "$WARDEN" approvals approve "$aid" 2>&1)
expect_match non-approver-refused "$out" "not an approver"
expect_eq non-approver-still-pending "$(approvals_count)" 1
as_user 1001 "$WARDEN" approvals approve "$aid" --reason ok >/dev/null
wait_until 10 run_done "$id"
expect_eq approve-run-ok "$(run_state "$id" status)" ok
expect_match approve-tool-ran "$(run_state "$id" output)" '^done: '
expect_match approve-decision-recorded "$(rec_of "$id" approval_decision)" '"decision":"approved","by":"bob"'
expect_match approve-attempt-after-decision "$(rec_of "$id" tool_attempt)" '"approval":\{"id":"'"$aid"'","decision":"approved","by":"bob"'

# --- deny
id=$(start_run gate)
wait_until 10 has_approval
as_user 1001 "$WARDEN" approvals deny "$(first_approval)" --reason "not today" >/dev/null
wait_until 10 run_done "$id"
expect_match deny-model-told "$(run_state "$id" output)" 'refused: .*approval denied by bob: not today'
expect_eq deny-no-attempt "$(recs_of "$id" tool_attempt | jq_py 'len(d)')" 0

# --- required_above: one recipient runs, two need approval
id=$(start_run mailer)
wait_until 10 has_approval
expect_match threshold-gates-second "$("$WARDEN" approvals ls --json | jq_py 'd[0]["reason"]')" 'to = 2 is above the approval threshold 1'
expect_eq threshold-first-ran "$(recs_of "$id" tool_attempt | jq_py 'len(d)')" 1
as_user 1001 "$WARDEN" approvals approve "$(first_approval)" >/dev/null
wait_until 10 run_done "$id"
expect_eq threshold-second-ran "$(recs_of "$id" tool_attempt | jq_py 'len(d)')" 2

# --- suspended runs hold no thread: 40 suspended runs, thread count flat
threads() { awk '/^Threads:/{print $2}' "/proc/$WPID/status"; }
before=$(threads)
ids=()
for i in $(seq 40); do ids+=("$(start_run gate "task $i")"); done
wait_until 30 has_approval 40
after=$(threads)
expect_eq forty-suspended "$(approvals_count)" 40
if [ $((after - before)) -le 2 ]; then pass suspended-hold-no-threads
else fail suspended-hold-no-threads "threads $before -> $after with 40 suspended runs"; fi

# --- across a restart: the 40 stay suspended and can be decided after it
stop_daemon
start_daemon || fail restart "see log"
expect_eq restart-approvals-restored "$(approvals_count)" 40
expect_eq restart-state "$(run_state "${ids[0]}" state)" awaiting_approval
for aid in $("$WARDEN" approvals ls --json | jq_py '" ".join(a["id"] for a in d)'); do
	as_user 1001 "$WARDEN" approvals deny "$aid" >/dev/null
done
wait_until 20 run_done "${ids[39]}"
expect_match restart-decided-run-ends "$(run_state "${ids[39]}" output)" 'refused: .*approval denied by bob'
expect_eq restart-none-left "$(approvals_count)" 0

# --- TTL (2 s): an undecided approval is denied and notified (webhook)
stop_daemon
start_daemon --approval-ttl 2 --webhook "http://127.0.0.1:$(cat "$T/hook.port")/hook" || fail restart-ttl "see log"
ids=()
for i in 1 2 3; do ids+=("$(start_run gate "ttl $i")"); done
wait_until 10 has_approval 3
sleep 2.5
wait_until 10 run_done "${ids[2]}"
expect_eq ttl-none-pending "$(approvals_count)" 0
expect_match ttl-decision "$(rec_of "${ids[0]}" approval_decision)" '"decision":"expired","by":"ttl"'
expect_match ttl-model-told "$(run_state "${ids[0]}" output)" 'refused: .*TTL'
expired3() { [ "$(grep -c approval_expired "$T/hook.log" 2>/dev/null)" -ge 3 ]; }
wait_until 5 expired3
expect_eq ttl-webhook-notified "$(grep -c approval_expired "$T/hook.log" 2>/dev/null)" 3
stop_daemon
start_daemon || fail restart3 "see log"

# --- approve after a kill -9 while suspended
id=$(start_run gate)
wait_until 10 has_approval
aid=$(first_approval)
kill9_daemon
start_daemon || fail restart2 "see log"
expect_eq kill9-approval-restored "$(first_approval)" "$aid"
as_user 1001 "$WARDEN" approvals approve "$aid" >/dev/null
wait_until 10 run_done "$id"
expect_eq kill9-approved-run-ok "$(run_state "$id" status)" ok

# --- kill -9 the moment the list shows an approval: it is still there
# after the restart (listed only once its record and the run's snapshot
# are on disk; here a slow call of the same step runs in between)
id=$(start_run gateslow)
aid=
end=$(($(date +%s) + 15))
while [ -z "$aid" ] && [ "$(date +%s)" -lt $end ]; do
	aid=$(curl -s --unix-socket "$SOCK" http://w/v1/approvals | jq_py 'd[0]["id"] if d else ""' 2>/dev/null)
done
kill9_daemon
start_daemon || fail restart4 "see log"
if [ -z "$aid" ]; then fail approval-listed-survives-kill "no approval was listed"
else expect_eq approval-listed-survives-kill "$(first_approval)" "$aid"; fi
stop_daemon
finish
