#!/usr/bin/env bash
# The fleet's queue on a real PostgreSQL (started here, as the fleet tests
# do), measured now on this machine (nothing asserted):
#  - claim latency: a run submitted while nodes have room, from its INSERT
#    (submitted_at) to a node's claim (claimed_at), both the database's
#    clock: commit + NOTIFY + the node waking + warden.claim(); p50/p99 over
#    100 runs with 3 nodes (goal p99 <= 20 ms);
#  - runs/s across 3 nodes of capacity 2 vs one such node, for runs whose
#    time is spent waiting on the model (the fake model answers after
#    200 ms): 120 runs submitted at once (8 CLIs in parallel) to a node,
#    from the first submission to the last end (goal >= 2.7x);
#  - shipping lag: runs (a tool call, then an answer) submitted at 50/s for
#    20 s (a paced client on node A's socket; 3 nodes of capacity 2), lines
#    and payload blobs shipped, each record from its ts (the
#    node's clock) to the commit of the batch that put its line in the
#    database (pg_xact_commit_timestamp of its row; the same machine's
#    clock): p50/p99/max over every record of those runs (goal p99 <= 1 s);
#  - approval latency: a run waits for an approval on its node; an approver
#    approves it through another node (C, or B when the run is on C): from
#    the decision's row (decided_at, the database's clock) to the run's
#    node recording it (its approval_decision record's ts, shipped; the
#    same machine's clock): p50/p99 over 30 runs, one at a time (goal: the
#    run resumes within 1 s).
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { echo "bench_fleet: needs root"; exit 0; }
[ -x "$PGBIN/postgres" ] || { echo "bench_fleet: no PostgreSQL at $PGBIN"; exit 0; }
N=${FLEET_BENCH_RUNS:-120}

base_policy
start_fake
fake_ctl '{"lane": "a", "reset": true, "default": {"delay_ms": 200, "reply": {"text": "slow done"}}}'
echo "  slow: [{provider: fa, model: m1}]" >>"$POL/aliases.part"
script quick <<'S'
{"text": "quick"}
S
agent quick quick '[echo]'
agent one slow '[echo]'
agent three slow '[echo]'
# the lag runs call a tool (records with payload blobs) and answer
script lagq <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "lag {{task}}"}
S
agent lag lagq '[echo]'
# the approval runs: step 0 waits for an approval
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: none" "approval: always"
script gb <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"to": "x@example.com"}}]}
{"text": "after approval"}
S
agent gb gb '[gated]'
write_gateway
# commit times of rows, for the shipping lag
PG_OPTS="-c track_commit_timestamp=on"
start_pg >/dev/null || { echo "bench_fleet: PostgreSQL did not start"; exit 0; }

# throughput: AGENT NODE -> runs/s (first submission to last end)
burst() {
	local agent=$1 node=$2
	seq "$N" | WARDEN_SOCKET=$T/$node.sock xargs -P 8 -I{} \
		setpriv --reuid 1000 --regid 1000 --clear-groups "$WARDEN" run --detach "$agent" "t{}" >/dev/null
	local end=$(($(date +%s) + 120))
	while [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = '$agent' AND state = 'done'")" != "$N" ]; do
		[ "$(date +%s)" -lt $end ] || { echo "bench_fleet: $agent did not finish" >&2; return 1; }
		sleep 0.1
	done
	psql_q "SELECT round(($N / extract(epoch FROM max(ended_at) - min(submitted_at)))::numeric, 2)
		FROM warden.runs WHERE agent = '$agent'"
}

start_node A 2 >/dev/null || exit 1
one=$(burst one A) || exit 1
maxc() { psql_q "SELECT max(c) FROM (SELECT (SELECT count(*) FROM warden.runs b WHERE b.node_id = a.node_id
	AND b.claimed_at <= a.claimed_at AND b.ended_at > a.claimed_at) c FROM warden.runs a WHERE a.agent = '$1') x"; }
printf 'one node, capacity 2: %s runs/s (%d runs of 200 ms model time; most at once on a node: %s)\n' \
	"$one" "$N" "$(maxc one)"
launch_node B 2
launch_node C 2
wait_node B >/dev/null && wait_node C >/dev/null || exit 1
three=$(burst three A) || exit 1
printf '3 nodes, capacity 2 each: %s runs/s (spread %s; most at once on a node: %s)\n' "$three" \
	"$(psql_q "SELECT string_agg(n::text, '/' ORDER BY n DESC) FROM (SELECT count(*) n FROM warden.runs WHERE agent = 'three' GROUP BY node_id) x")" \
	"$(maxc three)"
awk -v a="$one" -v b="$three" 'BEGIN{ printf "3 nodes vs one: %.2fx (goal >= 2.7x; ideal 3.0)\n", b / a }'

# claim latency: one submission at a time, nodes idle
for i in $(seq 100); do
	WARDEN_SOCKET=$T/A.sock as_user 1000 "$WARDEN" run --detach quick "q$i" >/dev/null
	sleep 0.02
done
sleep 1
psql_q "SELECT 'claim latency, 3 nodes, ' || count(*) || ' runs: p50 ' ||
	round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 2) || ' ms, p99 ' ||
	round((percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))::numeric, 2) || ' ms, max ' ||
	round(max(ms)::numeric, 2) || ' ms (goal p99 <= 20 ms)'
	FROM (SELECT extract(epoch FROM claimed_at - submitted_at) * 1000 AS ms FROM warden.runs
	WHERE agent = 'quick' AND claimed_at IS NOT NULL) x"

# shipping lag at RATE runs/s
RATE=${FLEET_BENCH_RATE:-50}
LAG_S=${FLEET_BENCH_LAG_S:-20}
nlag=$((RATE * LAG_S))
sent=$(python3 tests/conn_client.py --uid 1000 paced "$T/A.sock" "$nlag" "$RATE" lag |
	python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["created"], d["per_s"])')
read -r nsent rate_got <<<"$sent"
end=$(($(date +%s) + 120))
while [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'lag' AND state = 'done'")" != "$nsent" ]; do
	[ "$(date +%s)" -lt $end ] || { echo "bench_fleet: the lag runs did not finish" >&2; exit 1; }
	sleep 0.2
done
# every node's cursor at its store's last record
for n in A B C; do
	want=$(cat "$T/$n/state/trace/segments/"*.jsonl | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
	while [ "$(psql_q "SELECT seq FROM warden.trace_ship WHERE node_id = '$(node_id $n)'")" != "$want" ]; do
		[ "$(date +%s)" -lt $end ] || { echo "bench_fleet: node $n did not ship" >&2; exit 1; }
		sleep 0.2
	done
done
span=$(psql_q "SELECT round(extract(epoch FROM max(ended_at) - min(submitted_at))::numeric, 1) FROM warden.runs WHERE agent = 'lag'")
psql_q "SELECT 'shipping lag at ${rate_got} runs/s submitted ($nsent runs ended within ${span} s, ' || count(*) || ' records, ' ||
	(SELECT count(*) FROM warden.trace_blobs WHERE run_id IN (SELECT id FROM warden.runs WHERE agent = 'lag')) || ' blobs, 3 nodes): p50 ' ||
	round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 1) || ' ms, p99 ' ||
	round((percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))::numeric, 1) || ' ms, max ' ||
	round(max(ms)::numeric, 1) || ' ms (goal p99 <= 1000 ms)'
	FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(l.xmin) - (l.line::jsonb->>'ts')::timestamptz) * 1000 AS ms
	FROM warden.trace_lines l WHERE l.run_id IN (SELECT id FROM warden.runs WHERE agent = 'lag')) x"

# approval latency: decided on another node -> the run's node applies it
NA=${FLEET_BENCH_APPROVALS:-30}
ida=$(node_id A) idb=$(node_id B) idc=$(node_id C)
for i in $(seq "$NA"); do
	rid=$(WARDEN_SOCKET=$T/A.sock as_user 1000 "$WARDEN" run --detach gb "g$i")
	end=$(($(date +%s) + 30))
	row=
	while [ -z "$row" ]; do
		[ "$(date +%s)" -lt $end ] || { echo "bench_fleet: no approval for $rid" >&2; exit 1; }
		row=$(psql_q "SELECT id, node_id FROM warden.approvals WHERE run_id = '$rid' AND state = 'pending'")
		[ -n "$row" ] || sleep 0.02
	done
	IFS='|' read -r aid anode <<<"$row"
	dn=C
	[ "$anode" = "$idc" ] && dn=B
	as_user 1001 "$WARDEN" approvals approve "$aid" --socket "$T/$dn.sock" >/dev/null ||
		{ echo "bench_fleet: approving $aid on $dn failed" >&2; exit 1; }
done
end=$(($(date +%s) + 60))
applied() { psql_q "SELECT count(*) FROM warden.approvals a JOIN warden.trace_records t ON t.node_id = a.node_id
	AND t.run_id = a.run_id AND t.type = 'approval_decision' WHERE a.agent = 'gb' AND a.decided_on <> a.node_id"; }
while [ "$(applied)" != "$NA" ]; do
	[ "$(date +%s)" -lt $end ] || { echo "bench_fleet: $(applied) of $NA decisions shipped" >&2; exit 1; }
	sleep 0.2
done
psql_q "SELECT 'approval decided on another node -> applied on the node of the run, ' || count(*) || ' runs (' ||
	count(DISTINCT node_id) || ' nodes ran them): p50 ' ||
	round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 1) || ' ms, p99 ' ||
	round((percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))::numeric, 1) || ' ms, max ' ||
	round(max(ms)::numeric, 1) || ' ms (goal: resumed within 1000 ms)'
	FROM (SELECT a.node_id, extract(epoch FROM t.ts - a.decided_at) * 1000 AS ms FROM warden.approvals a
	JOIN warden.trace_records t ON t.node_id = a.node_id AND t.run_id = a.run_id AND t.type = 'approval_decision'
	WHERE a.agent = 'gb' AND a.decided_on <> a.node_id) x"
