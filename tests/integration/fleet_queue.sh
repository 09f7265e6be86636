#!/usr/bin/env bash
# The fleet's run queue on a real PostgreSQL: three wardend nodes (own
# state, runtime dir, socket; capacity 2 each) started together migrate the
# schema once and register; 30 runs submitted to node A (a model answering
# after 200 ms) all complete, spread over the three nodes, each node's
# concurrency (from the database's claim and end times) never above its
# capacity; each run is in the trace of the node that ran it; `warden run`
# follows a fleet run to its end and exit code. Fair share: 100 queued runs
# of team A and 5 of team B, claimed by two nodes -> B's 5 start before A's
# tenth. Options without --fleet, bad URLs and unbuilt agent fields are
# refused.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip fleet-queue "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { fail fleet-queue "no PostgreSQL server at ${PGBIN:-/usr/lib/postgresql/*/bin} (scripts/deps.sh installs postgresql)"; finish; }

base_policy
start_fake
fake_ctl '{"lane": "a", "reset": true, "default": {"delay_ms": 200, "reply": {"text": "slow done"}}}'
echo "  slow: [{provider: fa, model: m1}]" >>"$POL/aliases.part"
script quick <<'S'
{"text": "quick {{task}}"}
S
agent work slow '[echo]'
agent ta quick '[echo]'
agent tb quick '[echo]'
agent one quick '[echo]'
agent placed slow '[echo]'
printf 'placement: {zone: "a"}\n' >>"$POL/agents/placed.yaml"
agent mars slow '[echo]'
agent secret quick '[echo]'
sed -i 's/payloads: full/payloads: hash_only/' "$POL/agents/secret.yaml"
grep -q 'payloads: hash_only' "$POL/agents/secret.yaml" || fail hash-only-agent "no hash_only agent written"
gate_agent
printf 'placement: {zone: mars}\n' >>"$POL/agents/mars.yaml"
write_gateway

# --- refusals before anything starts
out=$("$WARDEND" --state "$T/x" --policy "$POL" --socket "$T/x.sock" --fleet-capacity 2 2>&1)
expect_eq capacity-without-fleet-exit "$?" 2
expect_match capacity-without-fleet-says "$out" 'need --fleet URL'
out=$("$WARDEND" --state "$T/x" --policy "$POL" --socket "$T/x.sock" --fleet 'host=/tmp port=notaport =x' 2>&1)
expect_eq bad-url-exit "$?" 2
expect_match bad-url-says "$out" '^wardend: --fleet: '
out=$("$WARDEND" --state "$T/x" --policy "$POL" --socket "$T/x.sock" --fleet "@$T/nope" 2>&1)
expect_eq url-file-missing-exit "$?" 2
mkdir -p "$T/pc/agents"
cp "$POL/agents/work.yaml" "$T/pc/agents/r.yaml"
# resume: if_read_only only where running the task again does nothing
# twice: every tool side_effects: none, no sub-agents
cp -r "$POL" "$T/pc3"
tool mailer '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:mail\"]}" "side_effects: external"
mv "$POL/tools/mailer.yaml" "$T/pc3/tools/"
sed -e 's/^name: work/name: rr/' -e 's/^tools: .*/tools: [echo, mailer]/' "$POL/agents/work.yaml" >"$T/pc3/agents/rr.yaml"
printf 'resume: if_read_only\n' >>"$T/pc3/agents/rr.yaml"
expect_match resume-side-effects-refused "$("$WARDEN" policy check "$T/pc3" 2>&1)" \
	"rr.yaml:[0-9]+:9: agent 'rr': 'resume: if_read_only' but tool 'mailer' has side_effects: external"
sed -i 's/^tools: .*/tools: [echo]/' "$T/pc3/agents/rr.yaml"
check resume-read-only-ok "$WARDEN" policy check "$T/pc3"
printf 'subagents: [work]\n' >>"$T/pc3/agents/rr.yaml"
expect_match resume-subagents-refused "$("$WARDEN" policy check "$T/pc3" 2>&1)" \
	"rr.yaml:[0-9]+:9: agent 'rr': 'resume: if_read_only' with sub-agents is not built"
printf 'resume: never\n' >>"$T/pc/agents/r.yaml"
check resume-never-ok "$WARDEN" policy check "$T/pc/agents/r.yaml"
printf 'placement: {gpu: "yes", rack: r1}\n' >>"$T/pc/agents/r.yaml"
check placement-ok "$WARDEN" policy check "$T/pc/agents/r.yaml"
sed -i 's/placement: .*/placement: {GPU: "a b"}/' "$T/pc/agents/r.yaml"
expect_match placement-bad-label "$("$WARDEN" policy check "$T/pc/agents/r.yaml" 2>&1)" \
	'r.yaml:[0-9]+:[0-9]+: .placement.: --fleet-label GPU=a b: want KEY=VALUE'
sed -i 's/placement: .*/placement: []/' "$T/pc/agents/r.yaml"
expect_match placement-not-map "$("$WARDEN" policy check "$T/pc/agents/r.yaml" 2>&1)" \
	'r.yaml:[0-9]+:[0-9]+: .placement. must be a non-empty mapping'
# a sub-agent runs on its parent's node: a placement there is refused
cp -r "$POL" "$T/pc2"
sed -e 's/^name: work/name: boss/' "$POL/agents/work.yaml" >"$T/pc2/agents/boss.yaml"
printf 'subagents: [placed]\n' >>"$T/pc2/agents/boss.yaml"
expect_match placement-subagent "$("$WARDEN" policy check "$T/pc2" 2>&1)" \
	"boss.yaml:[0-9]+:[0-9]+: agent 'boss': sub-agent 'placed': the sub-agent has a placement"

# one node without --fleet: no database, the fleet views say so
start_daemon || { fail single-node-start "see log"; finish; }
expect_match single-status "$("$WARDEN" status 2>&1 | sed -n '/^Fleet/,$p')" 'not in a fleet \(wardend without --fleet\)'
out=$("$WARDEN" fleet nodes 2>&1)
expect_eq single-fleet-nodes-exit "$?" 1
expect_match single-fleet-nodes "$out" 'not in a fleet'
expect_match single-run-local "$(as_user 1000 "$WARDEN" run work x 2>&1)" 'run_end +status=ok'
out=$(as_user 1000 "$WARDEN" run placed x 2>&1)
expect_eq single-placed-exit "$?" 1
expect_match single-placed-refused "$out" "agent 'placed' has placement \\{\"zone\":\"a\"\\}: its runs are placed by a fleet's queue"
stop_daemon
start_pg || { fail pg-start "see above"; finish; }
# the URL from a file, as a Secret would hold it
printf '%s\n' "$FLEET_URL" >"$T/fleet.url"
FLEET_URL="@$T/fleet.url"

# --- three nodes starting together: one migration, three registrations
launch_node A 2 --fleet-label zone=a
launch_node B 2
launch_node C 2
wait_node A && wait_node B && wait_node C || { fail nodes-start "see logs"; finish; }
# every step this build knows (fleet_int.h), each applied once
nv=$(sed -n 's/^#define WD_FLEET_SCHEMA_VERSION \([0-9]*\)$/\1/p' daemon/fleet/fleet_int.h)
expect_eq schema-each-version-once "$(psql_q "SELECT string_agg(version::text, ',' ORDER BY version) FROM warden.schema_version")" "$(seq -s, 1 "$nv")"
expect_eq migrated-once-in-logs "$(cat "$T"/[ABC].log | grep -o 'schema migrated to version [0-9]*' | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')" "$(printf '1 %.0s' $(seq "$nv"))"
expect_eq nodes-registered "$(psql_q "SELECT count(*) FROM warden.nodes WHERE state = 'up' AND capacity = 2")" 3
expect_eq node-label "$(psql_q "SELECT labels->>'zone' FROM warden.nodes WHERE id = '$(node_id A)'")" a
expect_match node-version "$(psql_q "SELECT version FROM warden.nodes WHERE id = '$(node_id A)'")" '^gnu:[0-9a-f]+'
expect_match status-fleet "$(node_api B GET /v1/status)" '"fleet":\{[^}]*"state":"up"'
expect_match nodes-view "$(node_api C GET /v1/fleet/nodes | cut -d' ' -f2- | jq_py 'len(d)')" '^3$'
# a restarted node re-registers under the same id (state dir)
idb=$(node_id B)
stop_node B
expect_eq node-stopped "$(psql_q "SELECT state FROM warden.nodes WHERE id = '$idb'")" stopped
start_node B 2 || { fail node-restart "see log"; finish; }
expect_eq node-same-id "$(node_id B)" "$idb"
expect_eq node-up-again "$(psql_q "SELECT state FROM warden.nodes WHERE id = '$idb'")" up

# --- 30 runs through node A
export WARDEN_SOCKET=$T/A.sock
ids=()
for i in $(seq 25); do
	ids+=("$(as_user 1000 "$WARDEN" run --detach work "w$i")")
done
fpids=()
for i in $(seq 26 30); do
	as_user 1000 "$WARDEN" run work "w$i" >"$T/f$i.out" 2>&1 & fpids+=($!)
done
fok=0
for i in $(seq 26 30); do
	wait "${fpids[$((i - 26))]}" && grep -q '^\[fleet\] run_end status=ok' "$T/f$i.out" &&
		grep -q '^slow done' "$T/f$i.out" && fok=$((fok + 1))
done
expect_eq follow-exit-ok "$fok" 5
expect_match follow-says-node "$(cat "$T/f26.out")" '\[fleet\] claimed by node_[0-9a-f]{16}'
expect_match follow-json "$(as_user 1000 "$WARDEN" run --json one wj)" '^\{.*"state": *"done".*"status": *"ok"'
all_done() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'work' AND state = 'done'")" = 30 ]; }
wait_until 60 all_done && pass runs-30-done || fail runs-30-done "$(psql_q "SELECT state, count(*) FROM warden.runs GROUP BY 1")"
expect_eq runs-30-ok "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'work' AND status = 'ok' AND output = 'slow done'")" 30
expect_eq runs-spread "$(psql_q "SELECT count(DISTINCT node_id) FROM warden.runs WHERE agent = 'work'")" 3
psql_q "SELECT node_id, count(*) FROM warden.runs WHERE agent = 'work' GROUP BY 1" | sed 's/^/  per node: /'
# the most runs a node held at once: at each claim, the runs of that node
# claimed before and not yet ended (the end is written before the next
# claim by the same thread)
maxc=$(psql_q "SELECT max(c) FROM (SELECT (SELECT count(*) FROM warden.runs b WHERE b.node_id = a.node_id
	AND b.claimed_at <= a.claimed_at AND b.ended_at > a.claimed_at) c FROM warden.runs a WHERE a.agent = 'work') x")
expect_eq capacity-never-exceeded "$maxc" 2
# 30 runs x 200 ms on 6 slots: ~1 s if they overlap, 6 s on one slot
span=$(psql_q "SELECT round(extract(epoch FROM max(ended_at) - min(claimed_at)) * 1000) FROM warden.runs WHERE agent = 'work'")
echo "  30 runs: first claim to last end ${span} ms"
# they overlapped across the nodes: at some claim more runs were held in
# the fleet than one node's capacity (judged from the rows, not a time)
maxall=$(psql_q "SELECT max(c) FROM (SELECT (SELECT count(*) FROM warden.runs b WHERE b.agent = 'work'
	AND b.claimed_at <= a.claimed_at AND b.ended_at > a.claimed_at) c FROM warden.runs a WHERE a.agent = 'work') x")
[ "${maxall:-0}" -ge 3 ] && pass runs-in-parallel || fail runs-in-parallel "at most ${maxall} runs at once in the fleet (${span} ms)"
# each run is in the trace of the node that ran it, under the same id
r0=${ids[0]}
on=$(psql_q "SELECT node_id FROM warden.runs WHERE id = '$r0'")
for n in A B C; do [ "$(node_id $n)" = "$on" ] && rn=$n; done
expect_match run-in-node-trace "$("$WARDEN" trace show --state "$T/$rn/state" "$r0" 2>&1)" 'run_end +status=ok'
expect_match run-view "$(node_api C GET "/v1/fleet/runs/$r0")" '^200 .*"state":"done"'
# the trace's read rule: alice's run is not carol's to read
expect_match run-view-refused "$(as_user 1002 curl -s --unix-socket "$T/C.sock" "http://w/v1/fleet/runs/$r0")" 'readable by its user'
expect_match metrics "$(curl -s --unix-socket "$T/A.sock" http://w/metrics)" 'warden_fleet_runs_submitted_total 31'
# placement: runs of an agent placed on zone=a, submitted to B, all run on
# A (the only node labelled so); a placement no node has is not queued
pids=()
for i in $(seq 6); do as_user 1000 "$WARDEN" run placed "p$i" --socket "$T/B.sock" >"$T/p$i.out" 2>&1 & pids+=($!); done
pok=0
for p in "${pids[@]}"; do wait "$p" && pok=$((pok + 1)); done
expect_eq placed-ok "$pok" 6
expect_eq placed-on-a "$(psql_q "SELECT string_agg(DISTINCT node_id, ',') FROM warden.runs WHERE agent = 'placed'")" "$(node_id A)"
# an approval of a run on A (placed there), listed and decided on C
gid=$(as_user 1000 "$WARDEN" run --detach gate go --socket "$T/B.sock")
ap_of() { as_user 1001 "$WARDEN" approvals ls --json --socket "$T/C.sock" | jq_py "[x for x in d if x['run_id'] == '$gid']"; }
listed() { [ "$(ap_of | jq_py 'len(d)')" = 1 ]; }
wait_until 10 listed && pass approval-listed-on-c || fail approval-listed-on-c "$(ap_of)"
# its arguments: from the run's shipped records (fleet_reads.sh), until
# then withheld, saying where they are
expect_eq approval-node-args "$(ap_of | jq_py '(d[0]["node"], d[0].get("args", {"to": "x@example.com"}) == {"to": "x@example.com"} and ("args" in d[0]) != ("args_withheld" in d[0]), d[0]["you_may_decide"])')" \
	"('$(node_id A)', True, True)"
aid=$(ap_of | jq_py 'd[0]["id"]')
out=$(as_user 1002 "$WARDEN" approvals approve "$aid" --socket "$T/C.sock" 2>&1)
expect_eq approval-carol-exit "$?" 1
expect_match approval-carol-refused "$out" 'not an approver'
t0=$(date +%s%N)
check approval-bob-on-c as_user 1001 "$WARDEN" approvals approve "$aid" --reason "checked on C" --socket "$T/C.sock"
gate_done() { [ "$(psql_q "SELECT state || status FROM warden.runs WHERE id = '$gid'")" = doneok ]; }
wait_until 10 gate_done && pass approval-run-resumed-on-a || fail approval-run-resumed-on-a "$(psql_q "SELECT state, status FROM warden.runs WHERE id = '$gid'")"
echo "  approved on C -> run ended on A in $((($(date +%s%N) - t0) / 1000000)) ms (the approve command waits for A's verdict)"
expect_eq approval-ran-on-a "$(psql_q "SELECT node_id FROM warden.runs WHERE id = '$gid'")" "$(node_id A)"
expect_match approval-recorded-on-a "$("$WARDEN" trace show --json --state "$T/A/state" "$gid" | jq_py '[(x["decision"], x["by"]) for x in d if x["type"] == "approval_decision"]')" \
	"approved.*bob"
expect_eq approval-gone "$(as_user 1001 "$WARDEN" approvals ls --json --socket "$T/C.sock" | jq_py "len([x for x in d if x['run_id'] == '$gid'])")" 0
# denied on C: the deny reaches the run on A (recorded there, the tool
# never runs), and the decision's row says it was applied
gid3=$(as_user 1000 "$WARDEN" run --detach gate no --socket "$T/B.sock")
pending3() { [ "$(psql_q "SELECT count(*) FROM warden.approvals WHERE run_id = '$gid3' AND state = 'pending'")" = 1 ]; }
wait_until 10 pending3 || fail approval-deny-pending "$(psql_q "SELECT state FROM warden.approvals WHERE run_id = '$gid3'")"
aid3=$(psql_q "SELECT id FROM warden.approvals WHERE run_id = '$gid3'")
check approval-deny-on-c as_user 1001 "$WARDEN" approvals deny "$aid3" --reason "not this one" --socket "$T/C.sock"
gate3_done() { [ "$(psql_q "SELECT state FROM warden.runs WHERE id = '$gid3'")" = done ]; }
wait_until 10 gate3_done && pass approval-denied-run-ended-on-a || fail approval-denied-run-ended-on-a "$(psql_q "SELECT state, status FROM warden.runs WHERE id = '$gid3'")"
expect_eq approval-denied-ran-on-a "$(psql_q "SELECT node_id FROM warden.runs WHERE id = '$gid3'")" "$(node_id A)"
expect_match approval-denied-recorded-on-a "$("$WARDEN" trace show --json --state "$T/A/state" "$gid3" | jq_py '[(x["decision"], x["by"]) for x in d if x["type"] == "approval_decision"]')" \
	"denied.*bob"
expect_eq approval-denied-tool-not-run "$("$WARDEN" trace show --json --state "$T/A/state" "$gid3" | jq_py 'len([x for x in d if x["type"] == "tool_attempt"])')" 0
expect_eq approval-denied-row "$(psql_q "SELECT state, decision, decided_on, result FROM warden.approvals WHERE id = '$aid3'")" "done|deny|$(node_id C)|applied"
out=$(as_user 1000 "$WARDEN" run mars x --socket "$T/B.sock" 2>&1)
expect_eq placed-nowhere-exit "$?" 1
expect_match placed-nowhere "$out" 'no node up with capacity has those labels; the run was not queued'
# a hash_only agent's task is not put in the shared database: its run
# stays on the node it was submitted to (B), in B's trace
out=$(as_user 1000 "$WARDEN" run secret "HIDDEN-TASK-$$" --socket "$T/B.sock" 2>&1)
expect_match hash-only-runs-here "$out" 'run_end +status=ok'
expect_eq hash-only-not-queued "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'secret' OR task LIKE '%HIDDEN-TASK%'")" 0
expect_match hash-only-in-b-trace "$("$WARDEN" trace ls --state "$T/B/state" --agent secret 2>&1)" 'secret'
# the CLI's views: nodes, runs by the read rule, one run, status
out=$("$WARDEN" fleet nodes --socket "$T/B.sock")
expect_eq cli-nodes "$(printf '%s\n' "$out" | grep -c ' up ')" 3
expect_match cli-nodes-label "$out" '"zone":"a"'
expect_eq cli-runs-alice "$(as_user 1000 "$WARDEN" fleet runs --json --limit 1000 | jq_py 'len(d)')" \
	"$(psql_q "SELECT count(*) FROM warden.runs WHERE uid = 1000")"
expect_eq cli-runs-carol "$(as_user 1002 "$WARDEN" fleet runs --json | jq_py 'len(d)')" 0
expect_eq cli-runs-limit "$("$WARDEN" fleet runs --json --limit 7 --state done | jq_py 'len(d)')" 7
expect_eq cli-runs-bad-state "$("$WARDEN" fleet runs --state nope >/dev/null 2>&1; echo $?)" 2
expect_match cli-run "$(as_user 1000 "$WARDEN" fleet run "$r0")" "claimed by $on"
expect_match status-text "$("$WARDEN" status 2>&1 | sed -n '/^Fleet/,$p')" "node $(node_id A) \([^)]*\): up; capacity 2"
expect_match status-json "$("$WARDEN" status --json | jq_py 'd["fleet"]["state"]')" '^up$'

# a node that stops takes its runs' pending approvals with it: none is left
# pending in the table for other nodes to list or decide
gid2=$(as_user 1000 "$WARDEN" run --detach gate again --socket "$T/B.sock")
pending2() { [ "$(psql_q "SELECT count(*) FROM warden.approvals WHERE run_id = '$gid2' AND state = 'pending'")" = 1 ]; }
wait_until 10 pending2 || fail approval2-pending "$(psql_q "SELECT state FROM warden.approvals WHERE run_id = '$gid2'")"
stop_node A
expect_eq approval-closed-with-node "$(psql_q "SELECT state || ':' || result FROM warden.approvals WHERE run_id = '$gid2'")" \
	"done:its node stopped"

# --- fair share: a submit-only node queues 100 runs of team A, then 5 of
# team B; two nodes then claim
for n in A B C; do stop_node $n; done
# Q takes its fleet settings from daemon.yaml (no --fleet flag)
cp -r "$POL" "$T/polq"
printf 'fleet: {url: "%s", capacity: 0, lease_ms: 3000, labels: ["role=queue"]}\n' "$FLEET_URL" >"$T/polq/daemon.yaml"
check daemon-yaml-fleet-checks "$WARDEN" policy check "$T/polq/daemon.yaml"
NODE_POL=$T/polq start_node Q - || { fail node-q "see log"; finish; }
expect_eq daemon-yaml-fleet "$(psql_q "SELECT capacity, labels->>'role' FROM warden.nodes WHERE id = '$(node_id Q)'")" "0|queue"
export WARDEN_SOCKET=$T/Q.sock
for i in $(seq 100); do as_user 1000 "$WARDEN" run --detach ta "a$i" >/dev/null || break; done
for i in $(seq 5); do as_user 1000 "$WARDEN" run --detach tb "b$i" >/dev/null || break; done
expect_eq fair-queued "$(psql_q "SELECT count(*) FROM warden.runs WHERE state = 'queued'")" 105
launch_node B 2
launch_node C 2
wait_node B && wait_node C || { fail fair-nodes "see logs"; finish; }
fair_done() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent IN ('ta','tb') AND state = 'done'")" = 105 ]; }
wait_until 90 fair_done && pass fair-all-done || fail fair-all-done "$(psql_q "SELECT state, count(*) FROM warden.runs WHERE agent IN ('ta','tb') GROUP BY 1")"
a10=$(psql_q "SELECT claim_order FROM warden.runs WHERE team = 'team-ta' ORDER BY claim_order OFFSET 9 LIMIT 1")
blast=$(psql_q "SELECT max(claim_order) FROM warden.runs WHERE team = 'team-tb'")
echo "  team B's last claim #$blast, team A's tenth #$a10"
[ -n "$blast" ] && [ -n "$a10" ] && [ "$blast" -lt "$a10" ] && pass fair-share-b-before-a10 ||
	fail fair-share-b-before-a10 "B's last $blast, A's tenth $a10"
expect_eq fair-ok "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent IN ('ta','tb') AND status = 'ok'")" 105
finish
