#!/usr/bin/env bash
# kill -9 of wardend in the middle of a tool call: after a restart the run is
# marked interrupted (run_end status interrupted) and its last durable
# attempt - on disk before the tool started - is visible. Also: a run whose
# side-effecting attempt cannot be recorded does not run its tool.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-restart "needs root"; finish; }

base_policy
tool slow "[\"/usr/bin/sleep\", \"$SLOW_MARK\"]" "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:slow\"]}" "side_effects: external"
sed -i 's/timeout_ms: 20000/timeout_ms: 60000/' "$POL/tools/slow.yaml"
script slowly <<'S'
{"step": 0, "tool_calls": [{"name": "slow", "arguments": {"why": "kill me"}}]}
{"text": "finished"}
S
agent slowly slowly '[slow]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

id=$(as_user 1000 "$WARDEN" run --detach slowly go)
has_attempt() { [ -n "$(rec_of "$id" tool_attempt)" ]; }
if wait_until 20 has_attempt; then pass attempt-durable-before-tool
else fail attempt-durable-before-tool "no tool_attempt on disk"; fi
sleep 0.5
kill9_daemon
kill_slow_tools
# nothing more was written: no result, no end
expect_eq killed-no-result "$(rec_of "$id" tool_result)" ""
expect_eq killed-no-end "$(rec_of "$id" run_end)" ""

start_daemon || { fail daemon-restart "see log"; finish; }
end=$(rec_of "$id" run_end)
expect_match interrupted-marked "$end" '"status":"interrupted"'
expect_match interrupted-last-attempt "$end" '"last_attempt":\{[^}]*"tool":"slow"[^}]*"completed":false'
expect_match interrupted-api "$(run_state "$id" status)" '^interrupted$'
# the chain is intact across the crash
check trace-verify-after-crash "$WARDEN" trace verify --state "$T/state"
stop_daemon

# a graceful stop (SIGTERM) parks a run between steps; the next start
# resumes it where it was
tool sleepy '["/usr/bin/sleep", "0.4"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:sleep\"]}" "side_effects: none"
script steps6 <<'S'
{"step": 6, "text": "six steps done"}
{"tool_calls": [{"name": "sleepy", "arguments": {"k": "{{step}}"}}]}
S
agent steps6 steps6 '[sleepy]'
write_gateway
start_daemon || fail restart-graceful "see log"
id=$(as_user 1000 "$WARDEN" run --detach steps6 go)
sleep 1.2
stop_daemon
expect_eq graceful-not-ended "$(rec_of "$id" run_end)" ""
start_daemon || fail restart-graceful2 "see log"
wait_until 20 run_done "$id"
expect_eq graceful-resumed-ok "$(run_state "$id" status)" ok
expect_eq graceful-resumed-output "$(run_state "$id" output)" "six steps done"
expect_eq graceful-no-interrupt "$(recs_of "$id" run_end | jq_py 'len(d)')" 1
stop_daemon
# a marker left beside a recorded run_end (a kill -9 between a late
# run_end's append and the marker's removal) does not end the run twice
echo '{}' >"$T/state/runs/$id.active"
start_daemon || fail restart-stale-marker "see log"
stop_daemon
expect_eq stale-marker-one-end "$(recs_of "$id" run_end | jq_py '",".join(r["status"] for r in d)')" ok
expect_eq stale-marker-removed "$([ -e "$T/state/runs/$id.active" ] && echo kept || echo gone)" gone

# a side-effecting tool whose attempt cannot be written is not run: the
# state directory is a small tmpfs, filled while the run waits for approval
mkdir -p "$T/small"
if mount -t tmpfs -o size=4m warden-it "$T/small" 2>/dev/null; then
	trap 'umount -l "$T/small" 2>/dev/null; cleanup_all' EXIT
	tool mark '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
		"auth: {mode: on_behalf_of_user, scopes: [\"test:mark\"]}" "side_effects: external" \
		"approval: always"
	# incompressible args > 4 KiB: the attempt needs a blob of ~40 KiB
	pad=$(head -c 30000 /dev/urandom | base64 -w0)
	script marker <<S
{"step": 0, "tool_calls": [{"name": "mark", "arguments": {"pad": "$pad"}}]}
{"text": "ran"}
S
	agent marker marker '[mark]'
	write_gateway
	FAKE_KEY=test-key "$WARDEND" --state "$T/small/state" --policy "$POL" --socket "$SOCK" \
		>>"$T/wardend.log" 2>&1 &
	WPID=$!
	wait_until 10 test -S "$SOCK"
	sleep 0.3
	id=$(as_user 1000 "$WARDEN" run --detach marker go)
	has_approval() { [ "$(approvals_count)" -ge 1 ]; }
	wait_until 10 has_approval || fail untraced-suspended "no approval request: $(tail -3 "$T/wardend.log")"
	snap=$T/small/state/runs/$id.json
	wait_until 10 test -s "$snap" || fail untraced-snapshot "no snapshot of the suspended run"
	# The approval drops the run's snapshot (it holds the ~40 KiB args):
	# freed, that space would take the attempt. A second link to every
	# file of runs/ keeps its pages allocated whatever the daemon unlinks
	# or renames over, so after the fill nothing the daemon does between
	# the approval and the attempt can give space back.
	mkdir -p "$T/small/hold"
	for f in "$T/small/state/runs/"*; do ln "$f" "$T/small/hold/${f##*/}"; done
	dd if=/dev/zero of="$T/small/fill" bs=64k 2>/dev/null
	dd if=/dev/zero of="$T/small/fill2" bs=4k 2>/dev/null
	dd if=/dev/zero of="$T/small/fill3" bs=512 2>/dev/null
	# the store is full: not one more byte can be written
	if printf x >"$T/small/probe" 2>/dev/null && [ -s "$T/small/probe" ]; then
		fail untraced-store-full "a write still fits after the fill"
	fi
	as_user 1001 "$WARDEN" approvals approve "$(first_approval)" >/dev/null
	wait_until 10 run_done "$id"
	[ -n "${DEBUG_T:-}" ] && { df -h "$T/small"; "$WARDEN" trace show --state "$T/small/state" "$id"; tail -5 "$T/wardend.log"; }
	expect_eq untraced-run-failed "$(run_state "$id" status)" failed
	expect_match untraced-tool-not-run "$(run_state "$id" reason)" "tool 'mark' not run: its attempt could not be recorded durably"
	stop_daemon
	umount -l "$T/small"
	trap cleanup_all EXIT
else
	skip untraced-run-failed "cannot mount a tmpfs here"
fi
finish
