#!/usr/bin/env bash
# Leases and outages on a real PostgreSQL, three nodes of capacity 2: each
# run's first tool appends its task to a HOST file (outside the sandbox,
# read by this script), then a slow tool runs. kill -9 of node B mid-run ->
# B's runs are `interrupted` fleet-wide within its lease, B is `lost`, the
# followers of those runs exit 1; no run is executed twice (one witness line
# per task) or claimed again; B restarted ends them in its own trace too.
# Then PostgreSQL stops while runs are in progress: the runs go on on their
# nodes, a new submission is refused (503, not queued), status says
# degraded -- except on node D (capacity 0, `--fleet-when-down run_here`),
# which runs it itself unless the agent's placement is not its labels';
# when it is back the nodes reconnect, nothing is interrupted for
# the outage, and every end is written.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip fleet-lease "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { fail fleet-lease "no PostgreSQL server at ${PGBIN:-/usr/lib/postgresql/*/bin} (scripts/deps.sh installs postgresql)"; finish; }
SLOW_MARK=3.$$1 # the slow tool's sleep: ~3 s, unique to this test
LEASE_MS=2000

base_policy
mail_tool
tool slow "[\"/usr/bin/sleep\", \"$SLOW_MARK\"]" "input: argv" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:slow\"]}" "side_effects: none"
script wit <<'S'
{"step": 0, "tool_calls": [{"name": "mail", "arguments": {"to": "{{task}}"}}]}
{"step": 1, "tool_calls": [{"name": "slow", "arguments": {}}]}
{"text": "done {{task}}"}
S
agent wit wit '[mail, slow]'
# read-only (its one tool side_effects: none): run again elsewhere when
# its node is lost; placed on the nodes labelled pool=ro
script ro <<'S'
{"step": 0, "tool_calls": [{"name": "slow", "arguments": {}}]}
{"text": "ro done {{task}}"}
S
agent ro ro '[slow]'
printf 'resume: if_read_only\nplacement: {pool: ro}\n' >>"$POL/agents/ro.yaml"
write_gateway
start_pg || { fail pg-start "see above"; finish; }
launch_node A 2
launch_node B 2
launch_node C 2
wait_node A && wait_node B && wait_node C || { fail nodes-start "see logs"; finish; }
export WARDEN_SOCKET=$T/A.sock
idb=$(node_id B)

sent() { grep -o '"to"' "$W" | wc -l; }
fpids=()
for i in $(seq 6); do
	as_user 1000 "$WARDEN" run wit "k$i" >"$T/k$i.out" 2>&1 & fpids+=($!)
done
# B holds runs whose witness line is written (now in the slow tool)
b_mid() {
	local ids
	ids=$(psql_q "SELECT task FROM warden.runs WHERE node_id = '$idb' AND state = 'running'")
	[ -n "$ids" ] || return 1
	local t
	for t in $ids; do grep -q "\"$t\"" "$W" 2>/dev/null || return 1; done
}
wait_until 20 b_mid || { fail b-mid-run "$(psql_q "SELECT node_id, state FROM warden.runs")"; finish; }
# and B shipped each one's attempt of the slow tool (it runs ~3 s): what
# its runs last attempted is then in the database when B is killed
b_slow_shipped() {
	[ "$(psql_q "SELECT count(*) FROM warden.runs r WHERE r.node_id = '$idb' AND r.state = 'running' AND NOT EXISTS (SELECT 1 FROM warden.trace_records a WHERE a.node_id = r.node_id AND a.run_id = r.id AND a.type = 'tool_attempt' AND a.tool = 'slow')")" = 0 ]
}
wait_until 3 b_slow_shipped || fail b-slow-shipped "$(psql_q "SELECT run_id, type, tool FROM warden.trace_records WHERE node_id = '$idb'")"
bruns=$(psql_q "SELECT count(*) FROM warden.runs WHERE node_id = '$idb' AND state = 'running'")
echo "  node B holds $bruns run(s); kill -9"
t0=$(date +%s%N)
kill9_node B
b_gone() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE node_id = '$idb' AND state = 'running'")" = 0 ]; }
while ! b_gone && [ $(($(date +%s%N) - t0)) -lt 10000000000 ]; do sleep 0.02; done
dt=$((($(date +%s%N) - t0) / 1000000))
echo "  B's runs interrupted ${dt} ms after the kill (lease ${LEASE_MS} ms)"
expect_eq b-runs-interrupted "$(psql_q "SELECT count(*) FROM warden.runs WHERE node_id = '$idb' AND state = 'interrupted' AND status = 'interrupted'")" "$bruns"
# within the lease (+ the reaper's period, lease/10, and scheduling slack); not
# before the last heartbeat's lease (lease - lease/3) could have run out
[ "$dt" -le $((LEASE_MS + LEASE_MS / 10 + 500)) ] && [ "$dt" -ge $((LEASE_MS - LEASE_MS / 3 - 100)) ] &&
	pass interrupted-within-lease || fail interrupted-within-lease "${dt} ms"
expect_match interrupted-reason "$(psql_q "SELECT reason FROM warden.runs WHERE node_id = '$idb' LIMIT 1")" \
	"node $idb stopped renewing its lease"
expect_eq b-lost "$(psql_q "SELECT state FROM warden.nodes WHERE id = '$idb'")" lost
all_ended() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE state IN ('queued', 'running')")" = 0 ]; }
wait_until 20 all_ended || fail runs-ended "$(psql_q "SELECT node_id, state FROM warden.runs")"
expect_eq others-ok "$(psql_q "SELECT count(*) FROM warden.runs WHERE node_id <> '$idb' AND status = 'ok'")" $((6 - bruns))
# followers: B's runs exit 1 (interrupted), the others 0
okf=0 intf=0
for i in $(seq 6); do
	wait "${fpids[$((i - 1))]}"
	rc=$?
	if grep -q 'run_end status=ok' "$T/k$i.out" && [ $rc = 0 ]; then okf=$((okf + 1)); fi
	if grep -q 'run_end status=interrupted.*stopped renewing its lease' "$T/k$i.out" && [ $rc = 1 ]; then intf=$((intf + 1)); fi
done
expect_eq followers-ok-exit-0 "$okf" $((6 - bruns))
expect_eq followers-interrupted-exit-1 "$intf" "$bruns"
# nothing executed twice, nothing claimed again after a further lease
sleep $((LEASE_MS / 1000 + 1))
expect_eq witness-once-each "$(sent)|$(grep -o '"to":"k[0-9]*"' "$W" | sort -u | wc -l)" "6|6"
expect_eq not-reclaimed "$(psql_q "SELECT count(*) FROM warden.runs WHERE node_id = '$idb' AND state = 'interrupted'")" "$bruns"
expect_eq claims-once "$(psql_q "SELECT count(*) FROM warden.runs WHERE claim_order IS NOT NULL")" 6
m=$( (curl -s --unix-socket "$T/A.sock" http://w/metrics; curl -s --unix-socket "$T/C.sock" http://w/metrics) |
	awk '/^warden_fleet_runs_interrupted_total/ {s += $2} END {print s}')
expect_eq metrics-interrupted "$m" "$bruns"
# B back: the same node, its runs ended in its own trace as interrupted
start_node B 2 || fail b-restart "see log"
expect_eq b-up "$(psql_q "SELECT state FROM warden.nodes WHERE id = '$idb'")" up
r=$(psql_q "SELECT id FROM warden.runs WHERE node_id = '$idb' LIMIT 1")
expect_match b-trace-interrupted "$("$WARDEN" trace show --state "$T/B/state" "$r" 2>&1)" 'run_end +status=interrupted'
expect_eq b-still-interrupted "$(psql_q "SELECT state FROM warden.runs WHERE id = '$r'")" interrupted
# B's restart and its recovery ran nothing again
expect_eq witness-once-after-restart "$(sent)|$(grep -o '"to":"k[0-9]*"' "$W" | sort -u | wc -l)" "6|6"
# each interrupted run names its last durable attempt as shipped: the slow
# tool's at step 1, no result; the same call and seq as B's own store holds
# as its run's last tool_attempt
ok_att=0
for r in $(psql_q "SELECT id FROM warden.runs WHERE node_id = '$idb' AND state = 'interrupted'"); do
	want=$("$WARDEN" trace show --json --state "$T/B/state" "$r" |
		jq_py "[(x['step'], x['gen_ai.tool.name'], x['gen_ai.tool.call.id'], x['seq']) for x in d if x['type'] == 'tool_attempt'][-1]")
	got=$("$WARDEN" fleet run --json "$r" | jq_py "(lambda a: (a['step'], a['tool'], a['call_id'], a['seq']) if a else None)(d.get('last_attempt'))")
	res=$("$WARDEN" fleet run --json "$r" | jq_py "d['last_attempt']['result']" 2>/dev/null)
	echo "  $r: last attempt $got (B's store: $want), result $res"
	case "$got" in "(1, 'slow', "*) [ "$got" = "$want" ] && [ "$res" = False ] && ok_att=$((ok_att + 1)) ;; esac
done
expect_eq interrupted-last-attempt "$ok_att" "$bruns"
expect_match interrupted-last-attempt-cli "$("$WARDEN" fleet run "$r")" 'last attempt shipped: step 1, tool slow, call .* no result recorded'

# --- the database goes away during runs
: >"$W"
fpids=()
for i in $(seq 4); do
	as_user 1000 "$WARDEN" run wit "d$i" >"$T/d$i.out" 2>&1 & fpids+=($!)
done
four_mid() { [ "$(sent)" = 4 ]; }
wait_until 20 four_mid || fail outage-runs-started "$(sent) started"
start_node D 0 --fleet-when-down run_here || fail d-start "see log"
stop_pg
out=$(as_user 1000 "$WARDEN" run --detach wit x 2>&1)
expect_eq submit-refused-exit "$?" 1
expect_match submit-refused-says "$(printf '%s' "$out" | tr '\n' ' ')" 'fleet database unreachable.*the run was not queued'
degraded() { node_api A GET /v1/status | grep -q '"fleet":{[^}]*"state":"degraded"'; }
wait_until 2 degraded && pass status-degraded || fail status-degraded "$(node_api A GET /v1/status)"
out=$(as_user 1000 "$WARDEN" run wit here1 --socket "$T/D.sock" 2>&1)
expect_match down-run-here "$(printf '%s' "$out" | tr '\n' ' ')" 'run_end +status=ok'
expect_eq down-run-here-once "$(grep -c '"here1"' "$W")" 1
expect_match down-run-here-metric "$(curl -s --unix-socket "$T/D.sock" http://w/metrics)" \
	'warden_fleet_runs_run_here_total 1'
out=$(as_user 1000 "$WARDEN" run --detach ro y --socket "$T/D.sock" 2>&1)
expect_eq down-placed-refused-exit "$?" 1
expect_match down-placed-refused "$(printf '%s' "$out" | tr '\n' ' ')" "not queued, nor run here: this node's labels lack agent 'ro''s placement"
d_degraded() { WARDEN_SOCKET=$T/D.sock "$WARDEN" status 2>&1 | tr -s ' \n' ' ' | grep -q 'new runs are run on this node'; }
wait_until 5 d_degraded && pass down-status-says || fail down-status-says "$(WARDEN_SOCKET=$T/D.sock "$WARDEN" status 2>&1 | grep -A3 Fleet)"
sleep $((LEASE_MS / 1000 + 2)) # longer than a lease; the slow tools end meanwhile
expect_match metrics-pending "$(curl -s --unix-socket "$T/A.sock" http://w/metrics)" 'warden_fleet_up 0'
pg_up_again || { fail pg-again "see log"; finish; }
all_ok() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE task LIKE 'd_' AND status = 'ok'")" = 4 ]; }
wait_until 20 all_ok && pass outage-runs-ended-ok ||
	fail outage-runs-ended-ok "$(psql_q "SELECT task, state, status, reason FROM warden.runs WHERE task LIKE 'd_'")"
okf=0
for i in $(seq 4); do
	wait "${fpids[$((i - 1))]}" && grep -q 'run_end status=ok' "$T/d$i.out" && okf=$((okf + 1))
done
expect_eq outage-followers-ok "$okf" 4
expect_eq outage-nothing-interrupted "$(psql_q "SELECT count(*) FROM warden.runs WHERE task LIKE 'd_' AND state = 'interrupted'")" 0
expect_match status-up-again "$(node_api A GET /v1/status)" '"fleet":\{[^}]*"state":"up"'
expect_eq outage-witness "$(sent)" 5 # the four, and D's own
expect_eq submit-not-queued "$(psql_q "SELECT count(*) FROM warden.runs WHERE task IN ('x', 'here1', 'y')")" 0

# --- the trace index, shipped: every node's records once, in order, none
# missing -- across B's kill -9 and restart and the database's outage
local_last() { # NODE: the last seq of its store
	local r m=0 x
	for r in $("$WARDEN" trace ls --json --state "$T/$1/state" | jq_py '" ".join(x["run_id"] for x in d)'); do
		x=$("$WARDEN" trace show --json --state "$T/$1/state" "$r" | jq_py 'max(x["seq"] for x in d)')
		[ "$x" -gt "$m" ] && m=$x
	done
	echo "$m"
}
for n in A B C D; do
	id=$(node_id $n)
	want=$(local_last $n)
	shipped() { [ "$(psql_q "SELECT coalesce(max(seq), 0) FROM warden.trace_records WHERE node_id = '$id'")" = "$want" ]; }
	wait_until 15 shipped || fail "ship-caught-up-$n" "local $want, shipped $(psql_q "SELECT max(seq) FROM warden.trace_records WHERE node_id = '$id'")"
	expect_eq "ship-once-in-order-$n" "$(psql_q "SELECT count(*), min(seq), max(seq) FROM warden.trace_records WHERE node_id = '$id'")" "$want|1|$want"
done
expect_eq ship-outage-runs "$(psql_q "SELECT count(*) FROM warden.trace_runs t JOIN warden.runs r ON r.id = t.run_id AND r.node_id = t.node_id WHERE r.task LIKE 'd_' AND t.status = 'ok'")" 4
expect_eq ship-interrupted-runs "$(psql_q "SELECT count(*) FROM warden.trace_runs WHERE node_id = '$idb' AND status = 'interrupted'")" "$bruns"
# read fleet-wide through any node, by the trace's rule
rid=$(psql_q "SELECT id FROM warden.runs WHERE task = 'd1'")
out=$(as_user 1000 "$WARDEN" fleet trace "$rid" --socket "$T/C.sock")
expect_match fleet-trace-run "$out" "run $rid on node_[0-9a-f]+: agent wit"
expect_match fleet-trace-records "$(printf '%s\n' "$out" | grep -c 'tool_attempt')" '^2$'
expect_eq fleet-trace-ls-alice "$(as_user 1000 "$WARDEN" fleet trace --json --limit 1000 | jq_py 'len(d)')" \
	"$(psql_q "SELECT count(*) FROM warden.trace_runs WHERE uid = 1000")"
expect_eq fleet-trace-ls-carol "$(as_user 1002 "$WARDEN" fleet trace --json | jq_py 'len(d)')" 0
expect_eq fleet-trace-run-carol "$(as_user 1002 "$WARDEN" fleet trace "$rid" >/dev/null 2>&1; echo $?)" 1
expect_match metrics-shipped "$(curl -s --unix-socket "$T/A.sock" http://w/metrics)" 'warden_fleet_trace_shipped_seq [1-9]'
# the build's version (every step a build knows is applied)
expect_eq schema-latest "$(psql_q 'SELECT max(version) FROM warden.schema_version')" \
	"$(sed -n 's/^#define WD_FLEET_SCHEMA_VERSION \([0-9]*\)$/\1/p' daemon/fleet/fleet_int.h)"
# cost, fleet-wide: alice's ended runs in each node's own store, summed,
# are what the fleet answers through any one of them (runs and dollars),
# with `warden fleet cost` and with the plain `warden cost` alike
local_sum=$(for n in A B C D; do "$WARDEN" trace ls --json --state "$T/$n/state"; done |
	python3 -c "import json,sys
d=json.JSONDecoder(); t=sys.stdin.read(); i=0; usd=0; runs=0
while i < len(t):
    while i < len(t) and t[i].isspace(): i += 1
    if i >= len(t): break
    o, i = d.raw_decode(t, i)
    mine = [r for r in o if r.get('uid') == 1000 and r.get('ended')]
    usd += sum(r['cost_usd'] or 0 for r in mine); runs += len(mine)
print('%d %.6f' % (runs, usd))")
fleet_sum=$(as_user 1000 "$WARDEN" fleet cost --by team --json --socket "$T/B.sock" |
	jq_py '"%d %.6f" % (sum(g["runs"] for g in d["groups"]), d["total_usd"])')
expect_eq fleet-cost-is-sum-of-nodes "$fleet_sum" "$local_sum"
for n in A B C D; do
	expect_eq "plain-cost-fleet-wide-$n" "$(as_user 1000 "$WARDEN" cost --by team --json --socket "$T/$n.sock" |
		jq_py '"%d %.6f" % (sum(g["runs"] for g in d["groups"]), d["total_usd"])')" "$fleet_sum"
done
expect_match fleet-cost-text "$(as_user 1000 "$WARDEN" fleet cost --by agent)" '^wit +[0-9]+ +4 '
expect_eq fleet-cost-carol "$(as_user 1002 "$WARDEN" fleet cost --json | jq_py 'len(d["groups"])')" 0
expect_eq fleet-cost-bad-by "$("$WARDEN" fleet cost --by nope >/dev/null 2>&1; echo $?)" 2

# --- resume: if_read_only: B and C labelled pool=ro, four runs of the
# read-only agent; kill -9 of B -> its two are queued again and run on C
# under local ids of their own, followers exit 0
stop_node C
start_node C 2 --fleet-label pool=ro || fail c-relabel "see log"
stop_node B
start_node B 2 --fleet-label pool=ro || fail b-relabel "see log"
fpids=()
for i in $(seq 4); do
	as_user 1000 "$WARDEN" run ro "r$i" >"$T/r$i.out" 2>&1 & fpids+=($!)
done
b_two() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'ro' AND node_id = '$idb' AND state = 'running'")" = 2 ]; }
wait_until 20 b_two || fail ro-on-b "$(psql_q "SELECT node_id, state FROM warden.runs WHERE agent = 'ro'")"
robs=$(psql_q "SELECT string_agg(id, ' ') FROM warden.runs WHERE agent = 'ro' AND node_id = '$idb'")
kill9_node B
ro_done() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'ro' AND state = 'done'")" = 4 ]; }
wait_until 30 ro_done && pass ro-all-done || fail ro-all-done "$(psql_q "SELECT id, node_id, state, attempt, reason FROM warden.runs WHERE agent = 'ro'")"
idc=$(node_id C)
expect_eq ro-ok "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'ro' AND status = 'ok' AND output LIKE 'ro done r_'")" 4
for r in $robs; do
	expect_eq "ro-again-on-c-$r" "$(psql_q "SELECT node_id, attempt FROM warden.runs WHERE id = '$r'")" "$idc|1"
	expect_match "ro-again-trace-$r" "$("$WARDEN" trace show --state "$T/C/state" "$r-a1" 2>&1)" 'run_end +status=ok'
done
rok=0 ragain=0
for i in $(seq 4); do
	wait "${fpids[$((i - 1))]}" && grep -q 'run_end status=ok' "$T/r$i.out" && rok=$((rok + 1))
	grep -q 'run again as run_[0-9a-f]*-a1' "$T/r$i.out" && ragain=$((ragain + 1))
done
expect_eq ro-followers-ok "$rok" 4
expect_eq ro-followers-saw-again "$ragain" 2
# any node up may have reaped them: D too (capacity 0, still running)
m=$( (for n in A C D; do curl -s --unix-socket "$T/$n.sock" http://w/metrics; done) |
	awk '/^warden_fleet_runs_requeued_total/ {s += $2} END {print s}')
expect_eq metrics-requeued "$m" 2
finish
