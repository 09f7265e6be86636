#!/usr/bin/env bash
# Disk full, the whole way, on a small tmpfs the test mounts as the state
# directory: fill it while runs are in flight; the store goes unhealthy
# (/v1/status, /metrics) and new runs are refused; free the space and,
# without a restart, the store recovers by itself, new runs succeed, and
# the runs whose run_end could not be written are ended (recorded late,
# with the reason). Then again with a kill -9 while full: after the
# restart those runs are `interrupted` with their reason, and nothing in
# the trace is `running` that is not live.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-diskfull "needs root"; finish; }
FLOOD="/usr/bin/python3 $ROOT_DIR/tests/integration/daemon_lib/flood.py"

base_policy
tool slow '["/usr/bin/sleep", "0.4"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:slow\"]}" "side_effects: none"
script slowpoke <<'S'
{"step": 0, "tool_calls": [{"name": "slow", "arguments": {"n": "{{task}}"}}]}
{"step": 1, "tool_calls": [{"name": "slow", "arguments": {"n": "1"}}]}
{"step": 2, "tool_calls": [{"name": "slow", "arguments": {"n": "2"}}]}
{"text": "done"}
S
agent slowpoke slowpoke '[slow]'
write_gateway

mkdir -p "$T/state"
mount -t tmpfs -o size=16m,mode=0700 "warden-diskfull-$$" "$T/state" ||
	{ skip daemon-diskfull "cannot mount a tmpfs"; finish; }
unmount_state() { mountpoint -q "$T/state" && umount "$T/state"; }
trap 'cleanup_all; unmount_state; rm -rf "$T"' EXIT
KEEP_T=1 # cleanup_all must not remove $T before the unmount

status_of() { api GET /v1/status | cut -d' ' -f2- | jq_py "$1"; }
healthy() { [ "$(status_of 'd["trace"]["healthy"]')" = True ]; }
unhealthy() { [ "$(status_of 'd["trace"]["healthy"]')" = False ]; }
unended() { status_of 'd["runs_end_unrecorded"]'; }
some_unended() { [ "$(unended)" -gt 0 ]; }
none_unended() { [ "$(unended)" = 0 ]; }
fill() { dd if=/dev/zero of="$T/state/filler" bs=64k >/dev/null 2>&1; sync; }
running_in_trace() { # run ids the trace says are running
	"$WARDEN" trace ls --json --state "$T/state" 2>/dev/null |
		jq_py '" ".join(r["run_id"] for r in d if r.get("status") == "running")'
}

start_daemon || { fail daemon-start "see log"; finish; }

# --- fill while 24 runs are in flight
as_user 1000 $FLOOD runs "$SOCK" slowpoke 24 24 >"$T/flood1.out" 2>&1 &
FL=$!
sleep 0.8
fill
wait_until 10 unhealthy
expect_eq full-status-unhealthy "$(status_of 'd["trace"]["healthy"]')" False
expect_match full-status-reason "$(status_of 'd["trace"]["reason"]')" 'No space left on device'
expect_match full-metrics "$(curl -s --unix-socket "$SOCK" http://w/metrics)" 'warden_trace_healthy 0'
expect_match full-healthz-503 "$(api GET /healthz)" '^503 .*No space left on device'
wait "$FL"
expect_match full-runs-failed "$(cat "$T/flood1.out")" 'failed [1-9]'
if some_unended; then pass full-run-ends-kept
else fail full-run-ends-kept "no run's run_end failed: the fill came too late ($(cat "$T/flood1.out"))"; fi
n_unended=$(unended)
out=$(api POST /v1/runs '{"agent":"slowpoke","task":"x"}')
expect_match full-new-run-refused "$out" '^5[0-9][0-9] .*(unhealthy|space)'

# --- free the space: no restart
rm -f "$T/state/filler"
if wait_until 15 healthy; then pass recovers-without-restart
else fail recovers-without-restart "store still unhealthy 15 s after the space came back"; fi
expect_match healthz-200-after-recovery "$(api GET /healthz)" '^200 '
out=$(as_user 1000 $FLOOD runs "$SOCK" slowpoke 3 3)
expect_match new-runs-after-recovery "$out" '^ok 3 failed 0 other 0'
if wait_until 10 none_unended; then pass unended-recorded-after-recovery
else fail unended-recorded-after-recovery "$(unended) run_end(s) still waiting"; fi
expect_eq nothing-running-after-recovery "$(running_in_trace)" ""
n_late=$(for id in $("$WARDEN" trace ls --json --state "$T/state" | jq_py '" ".join(r["run_id"] for r in d)'); do
	rec_of "$id" run_end; done | grep -c '"recorded_late"')
expect_eq late-run-ends-have-reason "$n_late" "$n_unended"
expect_match metrics-recovered "$(curl -s --unix-socket "$SOCK" http://w/metrics)" 'warden_trace_recoveries_total [1-9]'
"$WARDEN" trace verify --state "$T/state" >"$T/verify1.out" 2>&1
expect_eq verify-after-recovery "$?" 0

# --- full again, kill -9 while full, free, restart
as_user 1000 $FLOOD runs "$SOCK" slowpoke 24 24 >"$T/flood2.out" 2>&1 &
FL=$!
sleep 0.8
fill
wait_until 10 unhealthy
wait "$FL"
wait_until 5 some_unended
n2=$(unended)
kill9_daemon
rm -f "$T/state/filler"
start_daemon || fail restart "see log"
wait_until 10 none_unended
expect_eq restart-nothing-running "$(running_in_trace)" ""
n_int=$(for id in $("$WARDEN" trace ls --json --state "$T/state" --status interrupted | jq_py '" ".join(r["run_id"] for r in d)'); do
	rec_of "$id" run_end; done | grep -c 'its run_end could not be recorded')
if [ "$n2" -gt 0 ] && [ "$n_int" -eq "$n2" ]; then pass restart-interrupted-with-reason
else fail restart-interrupted-with-reason "$n2 run_end(s) waiting at the kill, $n_int interrupted with the reason"; fi
"$WARDEN" trace verify --state "$T/state" >"$T/verify2.out" 2>&1
expect_eq verify-after-restart "$?" 0
stop_daemon
finish
