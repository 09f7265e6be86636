#!/usr/bin/env bash
# Capacity per tier on a real PostgreSQL. Node A `--fleet-capacity 3,3,1`
# (three runs at once, at most one using tier 3), node B `2,2,0` (no
# tier 3); a tier-3 agent's runs (and those of an agent whose sub-agent has
# a tier-3 tool) submitted to B all run on A, never on B, and never more
# than one at a time there; a tier-1 agent's runs run on both; no node
# above its capacity, in all or per tier (the database's claim and end
# times). The registration, `warden fleet nodes`, /v1/status and /metrics
# name each tier's capacity; a node without runsc registers 0 for tier 3
# with `--fleet-capacity N`, and is refused at start when told to give
# tier 3 room; with no node up having tier-3 room, a tier-3 run is refused,
# not queued for ever; a malformed --fleet-capacity is a usage error.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip fleet-tiers "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { fail fleet-tiers "no PostgreSQL server at ${PGBIN:-/usr/lib/postgresql/*/bin} (scripts/deps.sh installs postgresql)"; finish; }
# node A must be able to run tier 3 (the refusal below checks the other case)
if ! "$WARDEN" status --json 2>/dev/null | python3 -c 'import json,sys; s=json.dumps(json.load(sys.stdin)); sys.exit(0 if "runsc" in s else 1)'; then
	skip fleet-tiers "warden status cannot be read"
	finish
fi

base_policy
start_fake
fake_ctl '{"lane": "a", "reset": true, "default": {"delay_ms": 200, "reply": {"text": "slow done"}}}'
echo "  slow: [{provider: fa, model: m1}]" >>"$POL/aliases.part"
tool light '["/bin/echo"]'
tool gv '["/bin/echo"]'
sed -i 's/^tier: 1$/tier: 3/' "$POL/tools/gv.yaml"
agent one slow '[light]'
agent three slow '[gv]'
agent boss slow '[light]'
printf 'subagents: [three]\n' >>"$POL/agents/boss.yaml"
write_gateway
check tiers-policy-ok "$WARDEN" policy check "$POL"

# --- usage errors and a node that cannot run what it is told to
for bad in 2,2 2,2,x 1,-1,1 2,2,2,2 ,,; do
	out=$("$WARDEND" --state "$T/x" --policy "$POL" --socket "$T/x.sock" --fleet "host=/nonexistent" \
		--fleet-capacity "$bad" 2>&1)
	expect_eq "capacity-bad-$bad-exit" "$?" 2
	expect_match "capacity-bad-$bad-says" "$out" "--fleet-capacity wants N or T1,T2,T3"
done
mkdir -p -m 711 "$T/norunsc-run"
out=$(WARDEN_RUNSC=/nonexistent/runsc WARDEN_RUNTIME_DIR=$T/norunsc-run timeout 60 "$WARDEND" --state "$T/x" \
	--policy "$POL" --socket "$T/x.sock" --fleet "host=$T/nopg dbname=x" --fleet-capacity 1,1,1 2>&1)
expect_eq tier3-without-runsc-refused-exit "$?" 1
expect_match tier3-without-runsc-refused-says "$out" \
	'--fleet-capacity gives tier 3 room for 1 runs, but this node cannot run tier 3: runsc not found'

start_pg || { fail pg-start "see above"; finish; }
launch_node A 3,3,1
launch_node B 2,2,0
wait_node A && wait_node B || { fail nodes-start "see logs"; finish; }
ida=$(node_id A)
idb=$(node_id B)
expect_eq node-a-registered "$(psql_q "SELECT capacity || ' ' || capacity_t1 || ',' || capacity_t2 || ',' || capacity_t3 FROM warden.nodes WHERE id = '$ida'")" "3 3,3,1"
expect_eq node-b-registered "$(psql_q "SELECT capacity || ' ' || capacity_t1 || ',' || capacity_t2 || ',' || capacity_t3 FROM warden.nodes WHERE id = '$idb'")" "2 2,2,0"
out=$(WARDEN_SOCKET=$T/B.sock "$WARDEN" fleet nodes 2>&1)
expect_match fleet-nodes-shows-tiers "$out" "$ida .* 3 3,3,1 "
expect_match fleet-nodes-shows-tiers-b "$out" "$idb .* 2 2,2,0 "
expect_eq fleet-nodes-json "$(WARDEN_SOCKET=$T/B.sock "$WARDEN" fleet nodes --json 2>&1 |
	jq_py 'sorted(n["tier_capacity"] for n in d)')" "[[2,2,0],[3,3,1]]"
expect_match status-tiers "$(node_api B GET /v1/status)" '"tier_capacity":\[2,2,0\]'
expect_match status-text-tiers "$(WARDEN_SOCKET=$T/B.sock "$WARDEN" status 2>&1)" 'tier 1/2/3 capacity 2/2/0'
m=$(curl -s --unix-socket "$T/B.sock" http://w/metrics)
expect_match metrics-tier3-zero "$m" 'warden_fleet_tier_capacity\{tier="3"\} 0'
expect_match metrics-tier1 "$m" 'warden_fleet_tier_capacity\{tier="1"\} 2'

# --- runs submitted to B, the node without tier 3
export WARDEN_SOCKET=$T/B.sock
for i in $(seq 6); do as_user 1000 "$WARDEN" run --detach three "t$i" >/dev/null; done
for i in $(seq 2); do as_user 1000 "$WARDEN" run --detach boss "b$i" >/dev/null; done
for i in $(seq 10); do as_user 1000 "$WARDEN" run --detach one "o$i" >/dev/null; done
all_done() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE state = 'done'")" = 18 ]; }
wait_until 90 all_done && pass tier-runs-done || fail tier-runs-done "$(psql_q "SELECT agent, state, count(*) FROM warden.runs GROUP BY 1, 2")"
expect_eq tier-runs-ok "$(psql_q "SELECT count(*) FROM warden.runs WHERE status = 'ok'")" 18
expect_eq run-tiers-recorded "$(psql_q "SELECT string_agg(DISTINCT agent || '=' || tiers, ' ' ORDER BY agent || '=' || tiers) FROM warden.runs")" \
	"boss=10 one=2 three=8"
expect_eq tier3-never-on-b "$(psql_q "SELECT count(*) FROM warden.runs WHERE tiers & 8 <> 0 AND node_id = '$idb'")" 0
expect_eq tier3-all-on-a "$(psql_q "SELECT count(*) FROM warden.runs WHERE tiers & 8 <> 0 AND node_id = '$ida'")" 8
expect_eq tier1-on-b-too "$(psql_q "SELECT count(*) > 0 FROM warden.runs WHERE agent = 'one' AND node_id = '$idb'")" t
psql_q "SELECT agent, node_id, count(*) FROM warden.runs GROUP BY 1, 2 ORDER BY 1, 2" | sed 's/^/  /'
# at each claim on a node, its runs claimed before and not ended yet (of
# the tier: WHERE on both sides)
maxc() { # NODE FILTER
	psql_q "SELECT coalesce(max(c), 0) FROM (SELECT (SELECT count(*) FROM warden.runs b WHERE b.node_id = a.node_id
		AND b.claimed_at <= a.claimed_at AND b.ended_at > a.claimed_at AND $2) c
		FROM warden.runs a WHERE a.node_id = '$1' AND $2) x"
}
expect_eq tier3-capacity-held-a "$(maxc "$ida" 'tiers & 8 <> 0')" 1
a_all=$(maxc "$ida" true)
b_all=$(maxc "$idb" true)
echo "  most runs held at once: A $a_all (capacity 3), B $b_all (capacity 2)"
[ "$a_all" -le 3 ] && [ "$a_all" -ge 2 ] && pass capacity-a-never-exceeded || fail capacity-a-never-exceeded "$a_all"
[ "$b_all" -le 2 ] && pass capacity-b-never-exceeded || fail capacity-b-never-exceeded "$b_all"
m=$(curl -s --unix-socket "$T/A.sock" http://w/metrics)
expect_match metrics-a-tier3-held-zero "$m" 'warden_fleet_tier_runs_held\{tier="3"\} 0'

# --- no node up with tier-3 room: refused, not queued for ever
stop_node A
out=$(as_user 1000 "$WARDEN" run three late 2>&1)
expect_eq tier3-no-node-exit "$?" 1
expect_match tier3-no-node-says "$out" "agent 'three' uses tools of tier 3 and no node up has capacity for each of those tiers; the run was not queued"
expect_eq tier3-no-node-not-queued "$(psql_q "SELECT count(*) FROM warden.runs WHERE task = 'late'")" 0
expect_match tier1-still-runs "$(as_user 1000 "$WARDEN" run one late1 2>&1)" 'run_end status=ok'

# --- a node without runsc: `--fleet-capacity N` gives tier 3 none
WARDEN_RUNSC=/nonexistent/runsc launch_node N 2
if wait_node N; then
	expect_eq no-runsc-registers-0 "$(psql_q "SELECT capacity_t1 || ',' || capacity_t2 || ',' || capacity_t3 FROM warden.nodes WHERE id = '$(node_id N)'")" "2,2,0"
	expect_match no-runsc-log-says "$(cat "$T/N.log")" 'tier 3 capacity 0: runsc not found'
else
	fail no-runsc-node-start "see $T/N.log"
fi
# --- the same from policy/daemon.yaml: capacity: [T1, T2, T3]
cp -r "$POL" "$T/dpol"
printf 'fleet: {url: "%s", capacity: [1, 1, 0], lease_ms: 3000}\n' "$FLEET_URL" >"$T/dpol/daemon.yaml"
NODE_POL=$T/dpol launch_node D -
if wait_node D; then
	expect_eq daemon-yaml-tiers "$(psql_q "SELECT capacity || ' ' || capacity_t1 || ',' || capacity_t2 || ',' || capacity_t3 FROM warden.nodes WHERE id = '$(node_id D)'")" "1 1,1,0"
else
	fail daemon-yaml-node-start "see $T/D.log"
fi
expect_match help-names-tiers "$("$WARDEND" --help 2>&1)" '--fleet-capacity T1,T2,T3  runs using tier 1, 2, 3'
finish
