#!/usr/bin/env bash
# Trace access through wardend (DESIGN §4): `warden trace ...` without
# --state asks the daemon, which reads the caller's uid from the socket.
# The CLI runs as each user with setpriv: the run's own user (alice), a
# member of the run's team group (bob), an auditor (dave) read records and
# payloads; a user of another team (carol) gets 403 and no payload, also on
# the raw endpoints, and sees none of the run in ls/grep. Every payload
# read is in the run's trace as a payload_read naming the reader; a
# hash_only run shows hashes, never payloads.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-access "needs root"; finish; }

base_policy
team_users
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "final: {{result.stdout}}"}
S
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: external" \
	"approval: always"
script gate <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"n": "{{task}}"}}]}
{"text": "done"}
S
tool knock '["/bin/bash", "-c", "for i in 1 2 3; do : 3<>/dev/tcp/127.0.0.1/9; done 2>/dev/null; echo tried"]' \
	"input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:knock\"]}" "side_effects: none"
script knocks <<'S'
{"step": 0, "tool_calls": [{"name": "knock", "arguments": {}}]}
{"text": "done"}
S
agent one once '[echo]'
agent secret once '[echo]'
agent gate gate '[gated]'
agent knocker knocks '[knock]'
sed -i 's/payloads: full/payloads: hash_only/' "$POL/agents/secret.yaml"
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

SECRET="customer-record-$$"
id=$(as_user 1000 "$WARDEN" run --detach one "$SECRET")
wait_until 20 run_done "$id" || fail trace-access-run "run $id did not finish"
hid=$(as_user 1000 "$WARDEN" run --detach secret "$SECRET-hashed")
wait_until 20 run_done "$hid" || fail trace-access-run-hash-only "run $hid did not finish"

reads() { run_records "$id" | jq_py "len([r for r in d if r['type']=='payload_read' and r.get('reader')=='$1'])"; }

for who in 1000:alice 1001:bob 1003:dave; do
	uid=${who%%:*} name=${who#*:}
	out=$(as_user "$uid" "$WARDEN" trace show "$id" 2>&1)
	expect_match "trace-access-show-$name" "$(printf '%s' "$out" | grep tool_result)" "tool_result +echo "
	before=$(reads "$name")
	out=$(as_user "$uid" "$WARDEN" trace payload "$id" 0 2>&1)
	expect_match "trace-access-payload-$name" "$out" "$SECRET"
	after=$(reads "$name")
	expect_eq "trace-access-read-recorded-$name" "$after" "$((before + 1))"
	expect_match "trace-access-ls-$name" "$(as_user "$uid" "$WARDEN" trace ls 2>&1)" "$id"
done
# the reader is named as the daemon knows the uid (passwd name, or the uid)
r=$(run_records "$id" | jq_py "[r for r in d if r['type']=='payload_read'][-1]")
expect_match trace-access-read-who "$r" '"reader":"dave"'
expect_match trace-access-read-why "$r" '"access":"auditor"'
expect_match trace-access-read-what "$r" '"read":\[\{"seq":[0-9]+,"field":"[a-z_]+_ref","hash":"sha256:'
# the records carry payload inline (task, arguments, response, preview,
# output): reading them is a recorded read too; a hash_only run's records
# hold none, so reading them records nothing
rreads() { run_records "$1" | jq_py "len([r for r in d if r['type']=='payload_read' and r.get('payload_type')=='records'])"; }
before=$(rreads "$id")
as_user 1001 "$WARDEN" trace show "$id" >/dev/null 2>&1
expect_eq trace-access-records-read-recorded "$(rreads "$id")" "$((before + 1))"
expect_match trace-access-records-read-what "$(run_records "$id" | jq_py "[r for r in d if r.get('payload_type')=='records'][-1]")" '"field":"task".*"field":"output"'
before=$(rreads "$hid")
as_user 1000 "$WARDEN" trace show "$hid" >/dev/null 2>&1
expect_eq trace-access-hash-only-records-no-read "$(rreads "$hid")" "$before"

# another team: 403, no payload, nothing listed, nothing recorded
nrec=$(run_records "$id" | jq_py 'len(d)')
out=$(as_user 1002 "$WARDEN" trace payload "$id" 0 2>&1); rc=$?
expect_eq trace-access-other-team-exit "$rc" 1
expect_match trace-access-other-team-403 "$out" "may not read run $id"
if printf '%s' "$out" | grep -q "$SECRET"; then fail trace-access-other-team-no-payload "$out"; else pass trace-access-other-team-no-payload; fi
out=$(as_user 1002 "$WARDEN" trace show "$id" 2>&1)
expect_match trace-access-other-team-show "$out" "may not read"
out=$(as_user 1002 "$WARDEN" trace html "$id" -o - 2>&1)
if printf '%s' "$out" | grep -q "$SECRET"; then fail trace-access-other-team-html "$out"; else pass trace-access-other-team-html; fi
raw=$(as_user 1002 curl -s --unix-socket "$SOCK" -w '\n%{http_code}' "http://w/v1/runs/$id/payload/0")
expect_eq trace-access-other-team-raw-status "$(printf '%s' "$raw" | tail -1)" 403
if printf '%s' "$raw" | grep -q "$SECRET"; then fail trace-access-other-team-raw "$raw"; else pass trace-access-other-team-raw; fi
raw=$(as_user 1002 curl -s --unix-socket "$SOCK" -w '\n%{http_code}' "http://w/v1/runs/$id/trace")
expect_eq trace-access-other-team-raw-trace "$(printf '%s' "$raw" | tail -1)" 403
if as_user 1002 "$WARDEN" trace ls 2>&1 | grep -q "$id"; then fail trace-access-other-team-ls "listed"; else pass trace-access-other-team-ls; fi
if as_user 1002 "$WARDEN" trace grep --tool echo 2>&1 | grep -q "$id"; then fail trace-access-other-team-grep "listed"; else pass trace-access-other-team-grep; fi
out=$(as_user 1002 "$WARDEN" trace diff "$id" "$id" 2>&1); rc=$?
expect_eq trace-access-other-team-diff "$rc:$(printf '%s' "$out" | grep -c -e "$SECRET" -e 'same')" "1:0"
expect_eq trace-access-other-team-nothing-recorded "$(run_records "$id" | jq_py 'len(d)')" "$nrec"
# the daemon's other views of a run (its stream, its view, the list, its
# pending approval) hold the same data: the same rule
raw=$(as_user 1002 curl -s -m 10 --unix-socket "$SOCK" -w '\n%{http_code}' "http://w/v1/runs/$id/stream")
expect_eq trace-access-other-team-stream "$(printf '%s' "$raw" | tail -1)" 403
if printf '%s' "$raw" | grep -q "$SECRET"; then fail trace-access-other-team-stream-no-payload "$raw"; else pass trace-access-other-team-stream-no-payload; fi
raw=$(as_user 1000 curl -s -m 10 --unix-socket "$SOCK" "http://w/v1/runs/$id/stream")
expect_match trace-access-own-stream "$raw" "$SECRET"
raw=$(as_user 1002 curl -s --unix-socket "$SOCK" -w '\n%{http_code}' "http://w/v1/runs/$id")
expect_eq trace-access-other-team-run-view "$(printf '%s' "$raw" | tail -1)" 403
if printf '%s' "$raw" | grep -q "$SECRET"; then fail trace-access-other-team-run-view-no-output "$raw"; else pass trace-access-other-team-run-view-no-output; fi
raw=$(as_user 1002 curl -s --unix-socket "$SOCK" "http://w/v1/runs")
if printf '%s' "$raw" | grep -q "$id"; then fail trace-access-other-team-run-list "$raw"; else pass trace-access-other-team-run-list; fi
expect_match trace-access-own-run-list "$(as_user 1000 curl -s --unix-socket "$SOCK" "http://w/v1/runs")" "$id"
raw=$(as_user 1000 curl -s --unix-socket "$SOCK" "http://w/v1/runs/$hid")
expect_match trace-access-hash-only-view "$raw" '"state":"done"'
if printf '%s' "$raw" | grep -q "$SECRET-hashed"; then fail trace-access-hash-only-view-no-output "$raw"; else pass trace-access-hash-only-view-no-output; fi
gid=$(as_user 1000 "$WARDEN" run --detach gate "$SECRET-gated")
pending() { curl -s --unix-socket "$SOCK" http://w/v1/approvals | grep -q "$gid"; }
wait_until 20 pending
expect_match trace-access-approver-sees-args "$(as_user 1001 curl -s --unix-socket "$SOCK" "http://w/v1/approvals")" "$SECRET-gated"
expect_match trace-access-owner-sees-approval "$(as_user 1000 curl -s --unix-socket "$SOCK" "http://w/v1/approvals")" "$gid"
raw=$(as_user 1002 curl -s --unix-socket "$SOCK" "http://w/v1/approvals")
if printf '%s' "$raw" | grep -q "$SECRET-gated\|$gid"; then fail trace-access-other-team-approvals "$raw"; else pass trace-access-other-team-approvals; fi
as_user 1001 "$WARDEN" approvals deny "$(as_user 1001 "$WARDEN" approvals ls --json | jq_py 'd[0]["id"]')" --reason done >/dev/null 2>&1
wait_until 20 run_done "$gid" || fail trace-access-gated-run "run $gid did not finish"

# denial events name their run, tool and target: another team's user sees
# none of them, the run's user and an auditor do
kid=$(as_user 1000 "$WARDEN" run --detach knocker go)
wait_until 20 run_done "$kid" || fail trace-access-knock-run "run $kid did not finish"
wait_until 10 sh -c "curl -s --unix-socket '$SOCK' 'http://w/v1/events' | grep -q '$kid'"
expect_match trace-access-events-root "$(curl -s --unix-socket "$SOCK" "http://w/v1/events")" "\"run_id\":\"$kid\""
expect_match trace-access-events-own "$(as_user 1000 "$WARDEN" events --json 2>&1)" "\"run_id\":\"$kid\""
expect_match trace-access-events-auditor "$(as_user 1003 "$WARDEN" events --json 2>&1)" "\"run_id\":\"$kid\""
out=$(as_user 1002 "$WARDEN" events --json 2>&1)
if printf '%s' "$out" | grep -q "$kid\|127.0.0.1:9"; then fail trace-access-events-other-team "$out"; else pass trace-access-events-other-team; fi
expect_match trace-access-events-other-team-loss-line "$out" '"type":"loss"'

# a uid not in users.yaml at all
out=$(as_user 1009 "$WARDEN" trace payload "$id" 0 2>&1)
expect_match trace-access-unlisted-403 "$out" "may not read"

# hash_only: hashes, never the payload (not even through the auditor)
out=$(as_user 1003 "$WARDEN" trace payload "$hid" 0 2>&1)
if printf '%s' "$out" | grep -q "$SECRET-hashed"; then fail trace-access-hash-only "$out"; else pass trace-access-hash-only; fi
expect_match trace-access-hash-only-hashes "$(as_user 1003 "$WARDEN" trace show "$hid" 2>&1)" "prompt=sha256:"

# the page of the run, as the team member: has the payload; the reads are recorded
before=$(reads bob)
as_user 1001 "$WARDEN" trace html "$id" -o - >"$T/page.html" 2>"$T/page.err"
expect_match trace-access-html-team "$(cat "$T/page.html")" "$SECRET"
after=$(reads bob)
if [ "$after" -gt "$before" ]; then pass trace-access-html-recorded; else fail trace-access-html-recorded "$before -> $after"; fi
# the page lists who read, and the reads (appended after the run's end) do
# not open new steps in its timeline
"$WARDEN" trace html --state "$T/state" "$id" -o "$T/after.html" >/dev/null
r=$(python3 tests/integration/trace_lib/dom.py "$T/after.html" steps "$id" 1) && pass trace-access-html-steps ||
	fail trace-access-html-steps "$r"
expect_match trace-access-html-readers "$(tr -d '\n' <"$T/after.html")" 'Payload reads.*read by</b> alice.*read by</b> bob.*read by</b> dave'
expect_match trace-access-show-reads "$("$WARDEN" trace show --state "$T/state" "$id")" 'payload_read +by dave \(uid 1003, auditor\)'

# $WARDEN_STATE set (as in wardend's environment) does not turn a user's
# read into a read of the store's files: only --state does
expect_match trace-access-env-state-via-daemon \
	"$(as_user 1000 env WARDEN_STATE="$T/state" "$WARDEN" trace show "$id" 2>&1 | grep tool_result)" "tool_result +echo "
finish
