#!/usr/bin/env bash
# Fencing: a node cut off from a database that stays up starts no side
# effect once its lease may have run out. Node B reaches PostgreSQL through
# a unix-socket proxy this test controls; A and C (capacity 0: they queue
# and reap) connect directly. B runs a run whose step 0 is a slow tool
# without side effects and step 1 a tool that appends its task to a HOST
# file (outside the sandbox, read by this script).
#  1. The proxy is frozen (SIGSTOP) during step 0 for longer than a lease:
#     B's statements get no reply (a half-open connection): B goes degraded
#     within a bound derived from its lease; A/C reap the run (interrupted fleet-wide); step 0 ends, the side
#     effect waits (B's lease is uncertain); the proxy thawed, B's
#     heartbeat learns the run was taken: the run ends `interrupted` with
#     the lease's reason in B's trace, the tool never ran (no witness
#     line), and the fleet's verdict stands.
#     B ships the rest of the run's records: its last attempt is refreshed.
#  2. PostgreSQL itself stopped during step 0 (an outage: every node's
#     lease runs out with nobody at fault, fl_reap's guard): the side
#     effect waits while it is away, then runs once it is back and the run
#     ends ok -- an outage interrupts nothing.
#  3. A run's end already in the database (its write committed, the reply
#     lost): B's write of it again is not counted as a lease lost.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip fleet-fence "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { fail fleet-fence "no PostgreSQL server at ${PGBIN:-/usr/lib/postgresql/*/bin} (scripts/deps.sh installs postgresql)"; finish; }
SLOW_S=5
SLOW_MARK=$SLOW_S.$$3 # the slow tool's sleep: ~5 s, unique to this test
LEASE_MS=2500

base_policy
mail_tool
tool slow "[\"/usr/bin/sleep\", \"$SLOW_MARK\"]" "input: argv" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:slow\"]}" "side_effects: none"
agent fence fence '[slow, mail]'
agent quiet quiet '[slow]'
script quiet <<'S'
{"step": 0, "tool_calls": [{"name": "slow", "arguments": {}}]}
{"text": "quiet {{task}}"}
S
script fence <<'S'
{"step": 0, "tool_calls": [{"name": "slow", "arguments": {}}]}
{"step": 1, "tool_calls": [{"name": "mail", "arguments": {"to": "{{task}}"}}]}
{"text": "sent {{task}}"}
S
start_pg || { fail pg-start "see above"; finish; }
write_gateway

# the proxy: every connection to $T/bsock is relayed to PostgreSQL's socket
mkdir -p "$T/bsock"
cat >"$T/pgproxy.py" <<'P'
import os, socket, sys, threading
src, dst = sys.argv[1], sys.argv[2]
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(src)
ls.listen(64)
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c, _ = ls.accept()
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        u.connect(dst)
    except OSError:
        c.close()
        continue
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    threading.Thread(target=pump, args=(u, c), daemon=True).start()
P
python3 "$T/pgproxy.py" "$T/bsock/.s.PGSQL.$PGPORT" "$PGSOCK/.s.PGSQL.$PGPORT" &
PROXY_PID=$!
proxy_cleanup() {
	kill -CONT "$PROXY_PID" 2>/dev/null
	kill -KILL "$PROXY_PID" 2>/dev/null && wait "$PROXY_PID" 2>/dev/null
	fleet_cleanup
}
trap proxy_cleanup EXIT
wait_until 5 test -S "$T/bsock/.s.PGSQL.$PGPORT" || { fail proxy-start "no socket"; finish; }

launch_node A 0
FLEET_URL="host=$T/bsock port=$PGPORT user=warden dbname=postgres" launch_node B 1
launch_node C 0
wait_node A && wait_node B && wait_node C || { fail nodes-start "see logs"; finish; }
export WARDEN_SOCKET=$T/A.sock
idb=$(node_id B)

# run_on_b TASK: submitted through A, followed in the background (its pid
# in FPID); waits until B runs its step 0 (the slow tool); RID: the run
run_on_b() {
	as_user 1000 "$WARDEN" run fence "$1" >"$T/$1.out" 2>&1 &
	FPID=$!
	on_b() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE task = '$1' AND node_id = '$idb' AND state = 'running'")" = 1 ]; }
	wait_until 20 on_b "$1" || return 1
	RID=$(psql_q "SELECT id FROM warden.runs WHERE task = '$1'")
	slow_started() { pgrep -f "sleep $SLOW_MARK" >/dev/null; }
	wait_until 10 slow_started
}
b_trace() { "$WARDEN" trace show --state "$T/B/state" "$1" 2>&1; }
b_ended() { b_trace "$1" | grep -q run_end; }

# --- 1. a partition of node B alone, longer than a lease
run_on_b p1 || { fail p1-on-b "$(psql_q "SELECT task, node_id, state FROM warden.runs")"; finish; }
rid=$RID
t0=$(date +%s%N)
kill -STOP "$PROXY_PID"
# the frozen proxy is a half-open connection: B's next statement gets no
# reply; B notices within a heartbeat's period (lease/3) and the bound on a
# reply on its fleet thread (2/3 lease: fleet.c fl_thread_wait_ms), and
# says so in `warden status` -- a wait budget of that and 1.5 s of slack
b_degraded() { WARDEN_SOCKET=$T/B.sock "$WARDEN" status 2>&1 | tr -s ' \n' ' ' | grep -q 'database unreachable'; }
wait_until $(((LEASE_MS + 1500 + 999) / 1000)) b_degraded && pass p1-half-open-degraded ||
	fail p1-half-open-degraded "$(WARDEN_SOCKET=$T/B.sock "$WARDEN" status 2>&1 | sed -n '/^Fleet/,$p' | tr -s ' \n' ' ')"
echo "  B degraded $((($(date +%s%N) - t0) / 1000000)) ms after its proxy froze (lease $LEASE_MS ms)"
expect_match p1-half-open-why "$(cat "$T/B.log")" "no reply from the database within $((LEASE_MS * 2 / 3)) ms"
expect_match p1-db-errors-metric "$(curl -s --unix-socket "$T/B.sock" http://w/metrics)" 'warden_fleet_db_errors_total [1-9]'
expect_match p1-queue-depth-metric "$(curl -s --unix-socket "$T/A.sock" http://w/metrics)" 'warden_fleet_queue_depth 0'
expect_match p1-up-metric "$(curl -s --unix-socket "$T/B.sock" http://w/metrics)" 'warden_fleet_up 0'
reaped() { [ "$(psql_q "SELECT state FROM warden.runs WHERE id = '$rid'")" = interrupted ]; }
wait_until 30 reaped && pass p1-reaped-by-others ||
	fail p1-reaped-by-others "$(psql_q "SELECT state, reason FROM warden.runs WHERE id = '$rid'")"
# step 0 ends meanwhile; step 1's side effect must not start
while [ $(($(date +%s%N) - t0)) -lt $(((SLOW_S + 2) * 1000000000)) ]; do sleep 0.1; done
expect_eq p1-no-effect-while-cut-off "$(grep -c '"p1"' "$W")" 0
expect_match p1-waits-logged "$(cat "$T/B.log")" "run $rid: a tool with side effects waits: this node's fleet lease is not certain"
expect_eq p1-not-ended-while-cut-off "$(b_ended "$rid" && echo ended || echo running)" running
kill -CONT "$PROXY_PID"
wait_until 15 b_ended "$rid" || fail p1-ended "$(b_trace "$rid" | tail -5)"
expect_match p1-trace-interrupted "$(b_trace "$rid" | grep run_end)" \
	'run_end +status=interrupted.*its fleet lease was lost.*another node may have the run'
sleep 1
expect_eq p1-witness-never "$(grep -c '"p1"' "$W")" 0
expect_eq p1-fleet-verdict-stands "$(psql_q "SELECT state, status FROM warden.runs WHERE id = '$rid'")" "interrupted|interrupted"
expect_match p1-fleet-reason "$(psql_q "SELECT reason FROM warden.runs WHERE id = '$rid'")" "node $idb stopped renewing its lease"
# B, back, ships the rest of the run: its slow tool's result, recorded
# while it was cut off -- the last attempt named at the reap is refreshed
la_result() { [ "$(psql_q "SELECT last_attempt->>'tool', last_attempt->>'result' FROM warden.runs WHERE id = '$rid'")" = "slow|true" ]; }
wait_until 15 la_result && pass p1-last-attempt-refreshed ||
	fail p1-last-attempt-refreshed "$(psql_q "SELECT last_attempt FROM warden.runs WHERE id = '$rid'")"
lost_written() { curl -s --unix-socket "$T/B.sock" http://w/metrics | grep -q '^warden_fleet_lease_losses_total 1$'; }
wait_until 10 lost_written && pass p1-lease-loss-counted ||
	fail p1-lease-loss-counted "$(curl -s --unix-socket "$T/B.sock" http://w/metrics | grep lease_losses)"
wait "$FPID"
expect_eq p1-follower-exit-1 "$?" 1

# --- 2. the database itself away during step 0: the side effect waits,
# then runs once it is back; nothing is interrupted
run_on_b o1 || { fail o1-on-b "$(psql_q "SELECT task, node_id, state FROM warden.runs")"; finish; }
rid=$RID
t0=$(date +%s%N)
stop_pg
while [ $(($(date +%s%N) - t0)) -lt $(((SLOW_S + 2) * 1000000000)) ]; do sleep 0.1; done
expect_eq o1-no-effect-while-down "$(grep -c '"o1"' "$W")" 0
expect_eq o1-waits "$(b_ended "$rid" && echo ended || echo running)" running
pg_up_again || { fail pg-again "see log"; finish; }
wait_until 15 b_ended "$rid" || fail o1-ended "$(b_trace "$rid" | tail -5)"
expect_match o1-trace-ok "$(b_trace "$rid" | grep run_end)" 'run_end +status=ok'
expect_eq o1-witness-once "$(grep -c '"o1"' "$W")" 1
row_ok() { [ "$(psql_q "SELECT state, status FROM warden.runs WHERE id = '$rid'")" = "done|ok" ]; }
wait_until 10 row_ok && pass o1-row-ok || fail o1-row-ok "$(psql_q "SELECT state, status, reason FROM warden.runs WHERE id = '$rid'")"
wait "$FPID"
expect_eq o1-follower-exit-0 "$?" 0

# --- 3. a run's end written, the reply lost: B writes it again and finds
# it there -- not a lease lost. q0 runs first to learn what such a run's
# row holds; for q1 the database is given those values (its task's output)
# while B is cut off, as if B's write had committed and only its reply was
# lost; B's run ends meanwhile, and B, back, writes its end
as_user 1000 "$WARDEN" run quiet q0 >"$T/q0.out" 2>&1 || fail q0-run "$(cat "$T/q0.out")"
vals=$(psql_q "SELECT status, steps, cost_usd, output FROM warden.runs WHERE task = 'q0' AND state = 'done' AND node_id = '$idb'")
lost0=$(curl -s --unix-socket "$T/B.sock" http://w/metrics | awk '/^warden_fleet_lease_losses_total/ {print $2}')
as_user 1000 "$WARDEN" run --detach quiet q1 >"$T/q1.out" 2>&1 || fail q1-submit "$(cat "$T/q1.out")"
q1_on_b() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE task = 'q1' AND node_id = '$idb' AND state = 'running'")" = 1 ]; }
wait_until 20 q1_on_b || fail q1-on-b "$(psql_q "SELECT task, node_id, state FROM warden.runs WHERE task = 'q1'")"
wait_until 10 pgrep -f "sleep $SLOW_MARK" >/dev/null
rid=$(psql_q "SELECT id FROM warden.runs WHERE task = 'q1'")
kill -STOP "$PROXY_PID"
IFS="|" read -r st steps cost out0 <<<"$vals"
psql_q "UPDATE warden.runs SET state = 'done', status = '$st', reason = NULL, output = '${out0//q0/q1}', steps = $steps, cost_usd = $cost, ended_at = clock_timestamp(), lease_until = NULL WHERE id = '$rid' AND state = 'running'" >/dev/null
wait_until 15 b_ended "$rid" || fail q1-ended "$(b_trace "$rid" | tail -3)"
pending() { [ "$(curl -s --unix-socket "$T/B.sock" http://w/metrics | awk '/^warden_fleet_run_ends_pending/ {print $2}')" = "$1" ]; }
wait_until 5 pending 1 && pass q1-end-pending || fail q1-end-pending "$(curl -s --unix-socket "$T/B.sock" http://w/metrics | grep ends_pending)"
kill -CONT "$PROXY_PID"
q1_written() { pending 0 && curl -s --unix-socket "$T/B.sock" http://w/metrics | grep -q '^warden_fleet_up 1$'; }
wait_until 15 q1_written || fail q1-end-written "$(curl -s --unix-socket "$T/B.sock" http://w/metrics | grep ends_pending)"
expect_match q1-trace-ok "$(b_trace "$rid" | grep run_end)" 'run_end +status=ok'
expect_eq q1-not-a-lease-loss "$(curl -s --unix-socket "$T/B.sock" http://w/metrics | awk '/^warden_fleet_lease_losses_total/ {print $2}')" "$lost0"
expect_eq q1-no-loss-warning "$(grep -c "run $rid ended ok after its lease ran out" "$T/B.log")" 0
finish
