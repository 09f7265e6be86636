#!/usr/bin/env bash
# Who sees what beyond the trace endpoints (README "Who can read what"):
# 1. /metrics and /v1/status on wardend's unix socket (any local uid may
#    connect): root, the daemon's uid and auditors see the whole node; any
#    other uid sees only its own teams' label values and runs (another
#    team's user sees none of team-one's series, agent or tool names, nor
#    its runs); the --metrics TCP listener (the operator's scrape
#    endpoint) serves the whole node.
# 2. Every payload_read names exactly what its read returned: the fields
#    (and seqs) of the records, payload entries, stream lines, run view,
#    approval and events handed out (trace_lib/returned.py).
# 3. A followed stream is judged again at a policy reload: erin, in the
#    gate and knocker teams, follows a run's stream and the event stream;
#    users.yaml drops her from both teams and wardend gets SIGHUP: her run
#    stream ends with an access_revoked line and none of the run's later
#    records, her event stream gets none of the run's later denials (an
#    auditor's streams, the control, get them all).
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-scope "needs root"; finish; }

base_policy
users() { # ERIN'S GROUPS
	cat >"$POL/users.yaml" <<Y
users:
  root:  {uid: 0, groups: [admin]}
  alice: {uid: 1000, groups: [eng, team-one, team-gate, team-knocker]}
  bob:   {uid: 1001, groups: [eng, team-one]}
  carol: {uid: 1002, groups: [eng, team-other]}
  dave:  {uid: 1003, groups: [auditors]}
  erin:  {uid: 1004, groups: [$1]}
groups:
  admin: {scopes: ["*"]}
  eng: {scopes: ["test:*"]}
  team-one: {scopes: []}
  team-other: {scopes: []}
  team-gate: {scopes: []}
  team-knocker: {scopes: []}
  auditors: {scopes: []}
approvers:
  users: [bob]
  groups: []
Y
}
users "eng, team-gate, team-knocker"
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "final: {{result.stdout}}"}
S
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: external" \
	"approval: always"
script gate <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"n": "{{task}}"}}]}
{"step": 1, "tool_calls": [{"name": "echo", "arguments": {"n": "after the approval"}}]}
{"text": "done"}
S
# three refused connects, a pause, three more: the reload falls between
tool knock '["/bin/bash", "-c", "for i in 1 2 3; do : 3<>/dev/tcp/127.0.0.1/9; done 2>/dev/null; /usr/bin/sleep 8; for i in 1 2 3; do : 3<>/dev/tcp/127.0.0.1/9; done 2>/dev/null; echo tried"]' \
	"input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:knock\"]}" "side_effects: none"
sed -i 's|exec: \["/bin/bash"\]}|exec: ["/bin/bash", "/usr/bin/sleep"]}|' "$POL/tools/knock.yaml"
script knocks <<'S'
{"step": 0, "tool_calls": [{"name": "knock", "arguments": {}}]}
{"text": "done"}
S
agent one once '[echo]'
agent other once '[echo]'
agent gate gate '[gated, echo]'
agent knocker knocks '[knock]'
write_gateway
MPORT=$((20000 + RANDOM % 20000))
start_daemon --metrics "127.0.0.1:$MPORT" || { fail daemon-start "see log"; finish; }
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; cleanup_all' EXIT

id=$(as_user 1000 "$WARDEN" run --detach one "hello")
wait_until 20 run_done "$id" || fail scope-run "run $id did not finish"

# ---- 1. /metrics and /v1/status -------------------------------------------
metrics() { as_user "$1" curl -s --unix-socket "$SOCK" http://w/metrics; }
m=$(metrics 1002)
expect_match scope-metrics-other-own "$m" 'warden_runs_started_total\{team="team-other",agent="other"\}'
expect_match scope-metrics-other-node-wide "$m" '^warden_trace_healthy 1$'
if printf '%s' "$m" | grep -q 'team-one\|agent="one"\|team-gate\|team-knocker\|tool="knock"\|tool="gated"'; then
	fail scope-metrics-other-team-hidden "$(printf '%s' "$m" | grep 'team-one\|agent="one"\|team-gate\|tool="knock"' | head -3)"
else pass scope-metrics-other-team-hidden; fi
expect_match scope-metrics-member "$(metrics 1001)" 'warden_runs_started_total\{team="team-one",agent="one"\} 1'
if metrics 1001 | grep -q 'team-other'; then fail scope-metrics-member-only-own "sees team-other"; else pass scope-metrics-member-only-own; fi
for who in 0:root 1003:auditor; do
	m=$(metrics "${who%%:*}")
	expect_match "scope-metrics-${who#*:}-all" "$m" 'team="team-one",agent="one"\} 1'
	expect_match "scope-metrics-${who#*:}-all-other" "$m" 'team="team-other",agent="other"'
done
m=$(curl -s "http://127.0.0.1:$MPORT/metrics")
expect_match scope-metrics-tcp-all "$m" 'warden_runs_started_total\{team="team-one",agent="one"\} 1'
expect_match scope-metrics-tcp-all-other "$m" 'team="team-other",agent="other"'

status() { as_user "$1" curl -s --unix-socket "$SOCK" http://w/v1/status; }
expect_eq scope-status-other "$(status 1002 | jq_py '(d["runs"]["done_in_memory"], d["agents"], d["tools"], d["scope"]["teams"])')" \
	"(0, 1, 1, ['eng', 'team-other'])"
expect_eq scope-status-member "$(status 1001 | jq_py '(d["runs"]["done_in_memory"], d["agents"])')" "(1, 1)"
expect_eq scope-status-root "$(status 0 | jq_py '(d["runs"]["done_in_memory"], d["agents"], "scope" in d)')" "(1, 4, False)"
expect_eq scope-status-auditor "$(status 1003 | jq_py '(d["runs"]["done_in_memory"], d["agents"], "scope" in d)')" "(1, 4, False)"

# ---- 2. payload_read names what was returned ------------------------------
last_read() { # TYPE READER: the newest payload_read of TYPE by READER in $id's trace
	run_records "${3:-$id}" | jq_py "[r for r in d if r['type']=='payload_read' and (r.get('payload_type') or '')=='$1' and r.get('reader')=='$2'][-1]"
}
check() { # NAME TYPE READER OBJECTS_JSON [RUN]
	local r
	r=$(python3 tests/integration/trace_lib/returned.py "$(last_read "$2" "$3" "$5")" "$4" $([ "$2" = events ] && echo events) 2>&1)
	expect_eq "$1" "$r" ok
}
get() { as_user 1001 curl -s --unix-socket "$SOCK" "http://w$1"; }
check scope-returned-records records bob "$(get "/v1/runs/$id/trace")"
check scope-returned-payload "" bob "$(get "/v1/runs/$id/payload/0")"
check scope-returned-run-view run_view bob "$(get "/v1/runs/$id")"
check scope-returned-stream stream bob "$(get "/v1/runs/$id/stream" | python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in sys.stdin if l.strip()]))')"

gid=$(as_user 1000 "$WARDEN" run --detach gate "to approve")
pending() { curl -s --unix-socket "$SOCK" http://w/v1/approvals | grep -q "$gid"; }
wait_until 20 pending || fail scope-gate-pending "no approval for $gid"
check scope-returned-approval approval bob "$(get /v1/approvals | jq_py "[a for a in d if a['run_id']=='$gid'][0]")" "$gid"

# ---- 3. a reload judges followed streams again ----------------------------
as_user 1004 curl -sN --unix-socket "$SOCK" "http://w/v1/runs/$gid/stream" >"$T/erin.stream" 2>/dev/null &
ERIN_STREAM=$!
PIDS+=($!)
as_user 1003 curl -sN --unix-socket "$SOCK" "http://w/v1/runs/$gid/stream" >"$T/dave.stream" 2>/dev/null &
PIDS+=($!)
as_user 1004 curl -sN --unix-socket "$SOCK" "http://w/v1/events?follow=1" >"$T/erin.events" 2>/dev/null &
PIDS+=($!)
as_user 1003 curl -sN --unix-socket "$SOCK" "http://w/v1/events?follow=1" >"$T/dave.events" 2>/dev/null &
PIDS+=($!)
wait_until 10 grep -q run_start "$T/erin.stream" || fail scope-erin-stream-open "$(cat "$T/erin.stream")"
kid=$(as_user 1000 "$WARDEN" run --detach knocker go)
denials() { grep -c "\"run_id\":\"$kid\".*127.0.0.1:9\|127.0.0.1:9.*\"run_id\":\"$kid\"" "$1"; }
wait_until 15 sh -c "grep -q '\"run_id\":\"$kid\"' '$T/erin.events'" || fail scope-erin-events-before "erin saw no denial of $kid before the reload"
users "eng"
kill -HUP "$WPID"
revoked() { [ "$(as_user 1004 curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" "http://w/v1/runs/$gid")" = 403 ]; }
wait_until 10 revoked || fail scope-reload "erin still reads $gid after the reload"
before=$(denials "$T/erin.events")
as_user 1001 "$WARDEN" approvals approve "$(as_user 1001 "$WARDEN" approvals ls --json | jq_py "[a['id'] for a in d if a['run_id']=='$gid'][0]")" >/dev/null 2>&1
wait_until 20 run_done "$gid" || fail scope-gate-run "run $gid did not finish"
wait_until 20 run_done "$kid" || fail scope-knock-run "run $kid did not finish"
wait_until 10 grep -q run_end "$T/dave.stream" || fail scope-auditor-stream "$(tail -2 "$T/dave.stream")"
wait_until 10 sh -c "[ \$(grep -c '\"run_id\":\"$kid\"' '$T/dave.events') -ge 6 ]" || fail scope-auditor-events "$(grep -c "$kid" "$T/dave.events")"
# erin's stream: ended, with the reason, without the records after the reload
if wait_until 10 sh -c "! kill -0 $ERIN_STREAM 2>/dev/null"; then pass scope-stream-closed; else fail scope-stream-closed "still open"; fi
expect_match scope-stream-revoked "$(tail -1 "$T/erin.stream")" '"type":"access_revoked".*may not read run'
if grep -q '"type":"run_end"\|"type":"tool_result"' "$T/erin.stream"; then
	fail scope-stream-nothing-after "$(grep -o '"type":"[a-z_]*"' "$T/erin.stream" | tr '\n' ' ')"
else pass scope-stream-nothing-after; fi
# erin's events: the denials before the reload, none after
after=$(denials "$T/erin.events")
all=$(denials "$T/dave.events")
if [ "$before" -ge 1 ] && [ "$after" -eq "$before" ] && [ "$all" -gt "$after" ]; then pass scope-events-stop
else fail scope-events-stop "erin: $before before, $after after the reload; dave: $all"; fi
# what she was handed before the reload was recorded, field by field
check scope-returned-events events erin "$(grep -m1 "\"run_id\":\"$kid\"" "$T/erin.events")" "$kid"
finish
