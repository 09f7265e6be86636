#!/usr/bin/env bash
# Reads of a run's payload through its view (/v1/runs/ID: the output) and
# its stream (/v1/runs/ID/stream: the records, task, arguments, answers)
# by anyone but the run's own user (a team member, an auditor, root) are
# recorded as payload_read records, like the records read: who, why
# allowed, what. The run's own user's reads are not recorded; the same
# reader reading the same content again is recorded once. The run list
# shows a run's output to its own user only. A live run's stream is
# recorded at its start with follow: true.
# A pending approval's arguments (GET /v1/approvals) are a payload read too:
# recorded (payload_type approval, which approval, the arguments' hash)
# for a team member, an auditor, an approver, once each; not for the run's
# own user; with the store unable to write, withheld (args_withheld says
# why, the hash stays).
# A full run's denial events (GET /v1/events: the target, a path or host)
# handed to anyone but the run's own user are recorded too (payload_type
# events), once per reader and run; with the store unable to write, the
# run's events are left out and a `withheld` line says why.
# Fail closed: with the trace store unable to write (its state directory
# on a small tmpfs the test fills), a team member's read of the view, the
# stream, the records and a payload is refused (503) and hands out no
# payload, while the run's own user still reads its view.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-reads "needs root"; finish; }

base_policy
team_users "bob, erin" "erin:  {uid: 1004, groups: [eng]}"
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "final: {{result.stdout}}"}
S
tool nap '["/usr/bin/sleep", "4"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:nap\"]}" "side_effects: none"
script napper <<'S'
{"step": 0, "tool_calls": [{"name": "nap", "arguments": {}}]}
{"text": "rested"}
S
tool pay '["/usr/bin/cat"]' "input: stdin" \
	"args_schema: {type: object, required: [amount], properties: {amount: {type: integer}, memo: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:pay\"]}" "side_effects: external" \
	"approval: {required_above: {amount: 100}}"
script payer <<'S'
{"step": 0, "tool_calls": [{"name": "pay", "arguments": {"amount": 500, "memo": "{{task}}"}}]}
{"text": "paid"}
S
agent one once '[echo]'
agent napper napper '[nap]'
agent payer payer '[pay]' 10 1000000 600
tool dial "[\"$HELPERS/netprobe\", \"connect-flood\", \"9\", \"3\"]" "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:dial\"]}" "side_effects: none"
script dialer <<'S'
{"step": 0, "tool_calls": [{"name": "dial", "arguments": {}}]}
{"text": "dialled"}
S
agent dialer dialer '[dial]'
sed -i 's/team: team-dialer/team: team-one/' "$POL/agents/dialer.yaml"
sed -i 's/team: team-payer/team: team-one/' "$POL/agents/payer.yaml"
sed -i 's/team: team-napper/team: team-one/' "$POL/agents/napper.yaml"
write_gateway

SMALL=$T/small
mkdir -p "$SMALL"
umount_small() { mountpoint -q "$SMALL" && umount -l "$SMALL"; }
trap 'umount_small; cleanup_all' EXIT
STATE=$T/state
start_at() {
	rm -f "$SOCK"
	FAKE_KEY=test-key "$WARDEND" --state "$STATE" --policy "$POL" --socket "$SOCK" \
		--workers 4 >>"$T/wardend.log" 2>&1 &
	WPID=$!
	wait_until 20 curl -sf --unix-socket "$SOCK" http://w/healthz
}
records() { "$WARDEN" trace show --json --state "$STATE" "$1" 2>/dev/null; }
# reads ID TYPE READER: payload_read records of that payload_type by READER
reads() { records "$1" | jq_py "len([r for r in d if r['type']=='payload_read' and r.get('payload_type')=='$2' and r.get('reader')=='$3'])"; }
last_read() { records "$1" | jq_py "[r for r in d if r['type']=='payload_read' and r.get('payload_type')=='$2'][-1]"; }
# own_view ID: the run's view as its own user (never recorded)
own_view() { as_user 1000 curl -s -m 10 --unix-socket "$SOCK" "http://w/v1/runs/$1"; }
own_done() { own_view "$1" | grep -q '"state":"done"'; }
view_as() { as_user "$1" curl -s -m 20 --unix-socket "$SOCK" -w '\n%{http_code}' "http://w/v1/runs/$2${3:-}"; }

start_at || { fail daemon-start "see log"; finish; }
SECRET="customer-record-$$"
id=$(as_user 1000 "$WARDEN" run --detach one "$SECRET")
wait_until 30 own_done "$id" || fail reads-run "run $id did not finish"

# the run's own user: view and stream hold the payload, nothing recorded
expect_match reads-own-view "$(own_view "$id")" "final: .*$SECRET"
expect_match reads-own-stream "$(as_user 1000 curl -s -m 10 --unix-socket "$SOCK" "http://w/v1/runs/$id/stream")" "$SECRET"
expect_eq reads-own-not-recorded "$(records "$id" | jq_py "len([r for r in d if r['type']=='payload_read'])")" 0

# a team member's view: recorded (who, why, what: the output's hash), once
out=$(view_as 1001 "$id")
expect_eq reads-team-view-status "$(printf '%s' "$out" | tail -1)" 200
expect_match reads-team-view-output "$out" "final: .*$SECRET"
expect_eq reads-team-view-recorded "$(reads "$id" run_view bob)" 1
r=$(last_read "$id" run_view)
expect_match reads-team-view-who "$r" '"reader":"bob","uid":1001,"access":"team"'
expect_match reads-team-view-what "$r" '"read":\[\{"field":"output","hash":"sha256:[0-9a-f]{64}"\}\]'
view_as 1001 "$id" >/dev/null
expect_eq reads-team-view-once "$(reads "$id" run_view bob)" 1
# its stream: recorded with the records' payload fields
out=$(view_as 1001 "$id" /stream)
expect_match reads-team-stream-payload "$out" "$SECRET"
expect_eq reads-team-stream-recorded "$(reads "$id" stream bob)" 1
expect_match reads-team-stream-what "$(last_read "$id" stream)" \
	'"reader":"bob".*"read":\[\{"seq":[0-9]+,"field":"task"\}.*"field":"output"\}\]'
# an auditor and root: recorded too
view_as 1003 "$id" >/dev/null
expect_eq reads-auditor-view-recorded "$(reads "$id" run_view dave)" 1
expect_match reads-auditor-why "$(last_read "$id" run_view)" '"reader":"dave","uid":1003,"access":"auditor"'
curl -s --unix-socket "$SOCK" "http://w/v1/runs/$id/stream" >/dev/null
expect_eq reads-root-stream-recorded "$(reads "$id" stream root)" 1
# another team: 403, nothing recorded
n=$(records "$id" | jq_py 'len(d)')
expect_eq reads-other-team-403 "$(view_as 1002 "$id" | tail -1)" 403
expect_eq reads-other-team-nothing-recorded "$(records "$id" | jq_py 'len(d)')" "$n"
# the list: output to the run's own user only
expect_match reads-list-own-output "$(as_user 1000 curl -s --unix-socket "$SOCK" http://w/v1/runs)" "final: .*$SECRET"
out=$(as_user 1001 curl -s --unix-socket "$SOCK" http://w/v1/runs)
expect_match reads-list-team-lists "$out" "$id"
if printf '%s' "$out" | grep -q "$SECRET"; then fail reads-list-team-no-output "$out"; else pass reads-list-team-no-output; fi

# a live run's stream, followed by a team member: recorded at its start
nid=$(as_user 1000 "$WARDEN" run --detach napper go)
napping() { records "$nid" | grep -q '"tool_attempt"'; }
wait_until 20 napping || fail reads-live-started "no tool_attempt"
view_as 1001 "$nid" /stream >"$T/live.out"
expect_match reads-live-stream-got-end "$(cat "$T/live.out")" '"type":"run_end"'
expect_match reads-live-stream-recorded "$(last_read "$nid" stream)" '"reader":"bob".*"follow":true'

# a pending approval's arguments
has_approval() { as_user 1000 curl -s --unix-socket "$SOCK" http://w/v1/approvals | grep -q "$1"; }
approvals_as() { as_user "$1" curl -s -m 10 --unix-socket "$SOCK" http://w/v1/approvals; }
pid=$(as_user 1000 "$WARDEN" run --detach payer "$SECRET-memo")
wait_until 30 has_approval "$pid" || fail reads-approval-pending "no approval for $pid"
expect_match reads-approval-own-sees "$(approvals_as 1000)" "$SECRET-memo"
expect_eq reads-approval-own-not-recorded "$(records "$pid" | jq_py "len([r for r in d if r['type']=='payload_read'])")" 0
for who in 1001:bob:team 1003:dave:auditor 1004:erin:approver; do
	IFS=: read -r uid name why <<<"$who"
	expect_match "reads-approval-$name-sees" "$(approvals_as "$uid")" "$SECRET-memo"
	expect_eq "reads-approval-$name-recorded" "$(reads "$pid" approval "$name")" 1
	expect_match "reads-approval-$name-who" "$(records "$pid" | jq_py "[r for r in d if r['type']=='payload_read' and r.get('reader')=='$name'][-1]")" \
		"\"reader\":\"$name\",\"uid\":$uid,\"access\":\"$why\".*\"read\":\[\{\"field\":\"args\",\"approval_id\":\"ap_[0-9a-f]+\",\"hash\":\"sha256:[0-9a-f]{64}\"\}\]"
	approvals_as "$uid" >/dev/null
	expect_eq "reads-approval-$name-once" "$(reads "$pid" approval "$name")" 1
done
out=$(approvals_as 1002)
if printf '%s' "$out" | grep -q "$SECRET-memo"; then fail reads-approval-other-team "$out"; else pass reads-approval-other-team; fi
expect_eq reads-approval-other-nothing "$(reads "$pid" approval carol)" 0

# a full run's denial events
events_as() { as_user "$1" curl -s -m 10 --unix-socket "$SOCK" http://w/v1/events; }
did=$(as_user 1000 "$WARDEN" run --detach dialer go)
wait_until 30 own_done "$did" || fail reads-events-run "run $did did not finish"
expect_match reads-events-own-sees "$(events_as 1000)" "\"target\":\"127.0.0.1:9\".*\"run_id\":\"$did\""
expect_eq reads-events-own-not-recorded "$(reads "$did" events alice)" 0
for who in 1001:bob:team 1003:dave:auditor; do
	IFS=: read -r uid name why <<<"$who"
	expect_match "reads-events-$name-sees" "$(events_as "$uid")" "\"target\":\"127.0.0.1:9\".*\"run_id\":\"$did\""
	expect_eq "reads-events-$name-recorded" "$(reads "$did" events "$name")" 1
	expect_match "reads-events-$name-who" "$(last_read "$did" events | grep "\"reader\":\"$name\"")" \
		"\"reader\":\"$name\",\"uid\":$uid,\"access\":\"$why\".*\"read\":\[\{\"field\":\"target\",\"kind\":\"connect\""
	events_as "$uid" >/dev/null
	expect_eq "reads-events-$name-once" "$(reads "$did" events "$name")" 1
done
out=$(events_as 1002)
if printf '%s' "$out" | grep -q "$did"; then fail reads-events-other-team "$out"; else pass reads-events-other-team; fi
expect_eq reads-events-other-nothing "$(reads "$did" events carol)" 0

# after a restart (the run judged from the trace): recorded again
stop_daemon
start_at || { fail daemon-restart "see log"; finish; }
view_as 1001 "$id" >/dev/null
expect_eq reads-team-view-from-trace-recorded "$(reads "$id" run_view bob)" 2
stop_daemon

# --- fail closed: the store cannot write
if ! mount -t tmpfs -o size=4m warden-reads "$SMALL" 2>/dev/null; then
	skip reads-failclosed "cannot mount a tmpfs here"
	finish
fi
STATE=$SMALL/state
mkdir -p "$STATE"
start_at || { fail daemon-start-small "see log"; finish; }
fid=$(as_user 1000 "$WARDEN" run --detach one "$SECRET-fc")
wait_until 30 own_done "$fid" || fail reads-fc-run "run $fid did not finish"
fdid=$(as_user 1000 "$WARDEN" run --detach dialer go)
wait_until 30 own_done "$fdid" || fail reads-fc-events-run "run $fdid did not finish"
fpid=$(as_user 1000 "$WARDEN" run --detach payer "$SECRET-fcmemo")
wait_until 30 has_approval "$fpid" || fail reads-fc-approval-pending "no approval for $fpid"
store_unhealthy() { curl -s --unix-socket "$SOCK" http://w/metrics | grep -q '^warden_trace_healthy 0'; }
NFILL=0
fill_disk() {
	NFILL=$((NFILL + 1))
	dd if=/dev/zero of="$SMALL/fill.$NFILL.a" bs=64k 2>/dev/null
	dd if=/dev/zero of="$SMALL/fill.$NFILL.b" bs=4k 2>/dev/null
}
# a run whose run_start (> 4 KiB of task) cannot be written latches the
# store unhealthy
fill_disk
pad=$(head -c 6000 /dev/urandom | base64 -w0 | head -c 6000)
as_user 1000 "$WARDEN" run --detach one "$pad" >/dev/null 2>&1
if wait_until 20 store_unhealthy; then pass reads-fc-store-failed
else fail reads-fc-store-failed "the store still writes: the test proves nothing"; fi
fill_disk
for ep in "" /stream /trace /payload/0; do
	name=reads-fc-team$(printf '%s' "$ep" | tr '/' '-')
	out=$(view_as 1001 "$fid" "$ep")
	expect_eq "$name-503" "$(printf '%s' "$out" | tail -1)" 503
	expect_match "$name-says-why" "$out" "could not be recorded"
	if printf '%s' "$out" | grep -q "$SECRET-fc"; then fail "$name-no-payload" "$out"; else pass "$name-no-payload"; fi
done
expect_match reads-fc-own-view "$(own_view "$fid")" "final: .*$SECRET-fc"
out=$(approvals_as 1003)
if printf '%s' "$out" | grep -q "$SECRET-fcmemo"; then fail reads-fc-approval-withheld "$out"; else pass reads-fc-approval-withheld; fi
expect_match reads-fc-approval-says-why "$out" '"args_withheld":"the read could not be recorded.*"args_hash":"sha256:|"args_hash":"sha256:.*"args_withheld":"the read could not be recorded'
out=$(events_as 1003)
if printf '%s' "$out" | grep '"type":"event"' | grep -q "$fdid"; then fail reads-fc-events-withheld "$out"; else pass reads-fc-events-withheld; fi
expect_match reads-fc-events-says-why "$out" "\"type\":\"withheld\",\"run_id\":\"$fdid\",\"error\":\"the read could not be recorded"
stop_daemon
umount_small
finish
