#!/usr/bin/env bash
# Fencing: a node cut off from a database that stays up starts no side
# effect once its lease may have run out. Node B reaches PostgreSQL through
# a unix-socket proxy this test controls; A and C (capacity 0: they queue
# and reap) connect directly. B runs a run whose step 0 is a slow tool
# without side effects and step 1 a tool that appends its task to a HOST
# file (outside the sandbox, read by this script).
#  1. The proxy is frozen (SIGSTOP) during step 0 for longer than a lease:
#     A/C reap the run (interrupted fleet-wide); step 0 ends, the side
#     effect waits (B's lease is uncertain); the proxy thawed, B's
#     heartbeat learns the run was taken: the run ends `interrupted` with
#     the lease's reason in B's trace, the tool never ran (no witness
#     line), and the fleet's verdict stands.
#  2. PostgreSQL itself stopped during step 0 (an outage: every node's
#     lease runs out with nobody at fault, fl_reap's guard): the side
#     effect waits while it is away, then runs once it is back and the run
#     ends ok -- an outage interrupts nothing.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip fleet-fence "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { skip fleet-fence "no PostgreSQL at $PGBIN (scripts/deps.sh installs postgresql)"; finish; }
SLOW_S=5
SLOW_MARK=$SLOW_S.$$3 # the slow tool's sleep: ~5 s, unique to this test
LEASE_MS=2500

base_policy
mail_tool
tool slow "[\"/usr/bin/sleep\", \"$SLOW_MARK\"]" "input: argv" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:slow\"]}" "side_effects: none"
agent fence fence '[slow, mail]'
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
finish
