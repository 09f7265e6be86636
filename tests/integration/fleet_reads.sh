#!/usr/bin/env bash
# Fleet-wide answers of the plain commands on a real PostgreSQL, three
# nodes: a run placed on node A (and one on node B) is read on node C by
# its user with `warden trace show|payload|html|diff|ls|failures` and
# `warden cost`, from what the nodes shipped (warden.trace_lines,
# warden.trace_blobs), under the same rule as on one node: its user, its
# team's group and the auditors group may read it, another team's user is
# refused (and sees none of it in ls); every payload handed out on C is a
# payload_read in C's store naming the reader and the run's node; a
# hash_only run's payloads are refused there as locally. With the database
# stopped, C still answers its own runs and says that the other nodes'
# are not available.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
expect_no_match() { if printf '%s' "$2" | grep -Eq -- "$3"; then fail "$1" "'$(printf '%s' "$2" | grep -E -- "$3" | head -c 300)' matches /$3/"; else pass "$1"; fi; }
[ "$(id -u)" -eq 0 ] || { skip fleet-reads "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { fail fleet-reads "no PostgreSQL server at ${PGBIN:-/usr/lib/postgresql/*/bin} (scripts/deps.sh installs postgresql)"; finish; }

base_policy
team_users
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "final: {{result.stdout}}"}
S
# the same team on two nodes (placement), a hash_only one, another team's
for a in ona onb hidden; do
	agent "$a" once '[echo]'
	sed -i 's/^team: .*/team: team-one/' "$POL/agents/$a.yaml"
done
printf 'placement: {zone: a}\n' >>"$POL/agents/ona.yaml"
printf 'placement: {zone: b}\n' >>"$POL/agents/onb.yaml"
sed -i 's/payloads: full/payloads: hash_only/' "$POL/agents/hidden.yaml"
tool boom '["/bin/false"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:boom\"]}" "side_effects: none"
script booms <<'S'
{"step": 0, "tool_calls": [{"name": "boom", "arguments": {}}]}
{"text": "it failed"}
S
agent onf booms '[boom]'
sed -i 's/^team: .*/team: team-one/' "$POL/agents/onf.yaml"
printf 'placement: {zone: a}\n' >>"$POL/agents/onf.yaml"
gate_agent
sed -i 's/^team: .*/team: team-one/' "$POL/agents/gate.yaml"
agent other once '[echo]'
sed -i 's/^team: .*/team: team-other/' "$POL/agents/other.yaml"
printf 'placement: {zone: c}\n' >>"$POL/agents/other.yaml"
write_gateway
start_pg || { fail pg-start "see above"; finish; }
# A: room for the three runs it may claim below and the hash_only run
# submitted to it (which takes a slot of its own)
launch_node A 4 --fleet-label zone=a
launch_node B 2 --fleet-label zone=b
launch_node C 2 --fleet-label zone=c
wait_node A && wait_node B && wait_node C || { fail nodes-start "see logs"; finish; }
ida_node=$(node_id A)
idb_node=$(node_id B)

SECRET="fleet-secret-$$"
ra=$(as_user 1000 "$WARDEN" run --detach ona "$SECRET" --socket "$T/C.sock")
rb=$(as_user 1000 "$WARDEN" run --detach onb "$SECRET-b" --socket "$T/C.sock")
ro=$(as_user 1002 "$WARDEN" run --detach other "other-$$" --socket "$T/C.sock")
rf=$(as_user 1000 "$WARDEN" run --detach onf x --socket "$T/C.sock")
# hash_only: not queued, run on the node it was submitted to (A), in a
# slot of A's
out=$(as_user 1000 "$WARDEN" run hidden "HIDDEN-$$" --socket "$T/A.sock" 2>&1)
expect_match hash-only-ran "$out" 'run_end +status=ok'
rh=$("$WARDEN" trace ls --json --state "$T/A/state" --agent hidden | jq_py 'd[0]["run_id"]')
# each run's end shipped, with its node's lines
shipped() {
	[ "$(psql_q "SELECT count(*) FROM warden.trace_lines WHERE run_id IN ('$ra', '$rb', '$ro', '$rh', '$rf')
		AND line LIKE '%\"type\":\"run_end\"%'")" = 5 ] 2>/dev/null
}
wait_until 30 shipped || { fail runs-shipped "$(psql_q "SELECT run_id, count(*) FROM warden.trace_lines GROUP BY 1" 2>&1)"; finish; }
a_blobs() { [ "$(psql_q "SELECT count(*) FROM warden.trace_blobs WHERE run_id = '$ra'")" -gt 0 ] 2>/dev/null; }
wait_until 10 a_blobs && pass blobs-shipped || fail blobs-shipped "node A shipped no payload blob of run $ra"
expect_eq ran-on-a "$(psql_q "SELECT node_id FROM warden.runs WHERE id = '$ra'")" "$ida_node"
expect_eq ran-on-b "$(psql_q "SELECT node_id FROM warden.runs WHERE id = '$rb'")" "$idb_node"
[ -z "$("$WARDEN" trace ls --json --state "$T/C/state" | jq_py "[r['run_id'] for r in d if r['run_id'] in ('$ra', '$rb')]" | tr -d '[]')" ] &&
	pass not-in-c-store || fail not-in-c-store "C's own store holds them"

export WARDEN_SOCKET=$T/C.sock
c_reads() { # READER: payload_read records of run $ra in C's store
	"$WARDEN" trace show --json --state "$T/C/state" "$ra" 2>/dev/null |
		jq_py "len([r for r in d if r['type'] == 'payload_read' and r.get('reader') == '$1' and r.get('run_node') == '$ida_node'])"
}
for who in 1000:alice 1001:bob 1003:dave; do
	uid=${who%%:*} name=${who#*:}
	out=$(as_user "$uid" "$WARDEN" trace show "$ra" 2>&1)
	expect_match "show-on-c-$name" "$(printf '%s' "$out" | grep tool_result)" 'tool_result +echo '
	expect_match "show-names-node-$name" "$out" "node=$ida_node"
	before=$(c_reads "$name")
	out=$(as_user "$uid" "$WARDEN" trace payload "$ra" 0 2>&1)
	expect_match "payload-on-c-$name" "$out" "$SECRET"
	expect_eq "payload-read-recorded-on-c-$name" "$(c_reads "$name")" "$((${before:-0} + 1))"
done
r=$("$WARDEN" trace show --json --state "$T/C/state" "$ra" | jq_py "[r for r in d if r['type'] == 'payload_read'][-1]")
expect_match payload-read-auditor "$r" '"access":"auditor"'
# the run's node's own store holds none of C's reads; the fleet copy does
expect_eq a-store-no-c-reads "$("$WARDEN" trace show --json --state "$T/A/state" "$ra" | jq_py "len([r for r in d if r['type'] == 'payload_read'])")" 0
# the fleet run's row (GET /v1/fleet/runs/ID, `warden fleet run`) holds
# its output: read on C by a team member it is a run_view payload_read in
# C's store naming node B, as the local view's read is; its own user's
# read is not recorded (as locally); a repeated read is recorded once
b_done() { [ "$(psql_q "SELECT state FROM warden.runs WHERE id = '$rb'")" = done ]; }
wait_until 20 b_done || fail fleet-run-b-done "$(psql_q "SELECT state FROM warden.runs WHERE id = '$rb'")"
c_view_reads() { # READER: run_view payload_reads of run $rb in C's store
	"$WARDEN" trace show --json --state "$T/C/state" "$rb" 2>/dev/null |
		jq_py "len([r for r in d if r['type'] == 'payload_read' and r.get('payload_type') == 'run_view' and r.get('reader') == '$1' and r.get('run_node') == '$idb_node'])" ||
		echo 0 # C's store holds no record of the run
}
expect_match fleet-run-alice-output "$(as_user 1000 "$WARDEN" fleet run "$rb" 2>&1)" "final: .*$SECRET-b"
expect_eq fleet-run-alice-not-recorded "$(c_view_reads alice)" 0
out=$(as_user 1001 curl -s -w '\n%{http_code}' --unix-socket "$T/C.sock" "http://w/v1/fleet/runs/$rb")
expect_eq fleet-run-bob-200 "$(printf '%s' "$out" | tail -1)" 200
expect_match fleet-run-bob-output "$out" "final: .*$SECRET-b"
expect_eq fleet-run-bob-recorded "$(c_view_reads bob)" 1
expect_match fleet-run-bob-cli "$(as_user 1001 "$WARDEN" fleet run "$rb" 2>&1)" "final: .*$SECRET-b"
expect_eq fleet-run-bob-once "$(c_view_reads bob)" 1
expect_eq fleet-run-b-store-no-c-reads "$("$WARDEN" trace show --json --state "$T/B/state" "$rb" | jq_py "len([r for r in d if r['type'] == 'payload_read'])")" 0
# show --json: the run's records as node A holds them (its chain), payloads inline
expect_eq show-json-records "$(as_user 1000 "$WARDEN" trace show --json "$ra" | jq_py "len([r for r in d if 'node' not in r])")" \
	"$("$WARDEN" trace show --json --state "$T/A/state" "$ra" | jq_py 'len(d)')"
expect_match show-json-task "$(as_user 1000 "$WARDEN" trace show --json "$ra")" "$SECRET"

# how long a read of another node's run takes, against the same read on
# its own node (a figure, not a check)
ms_of() { # SOCKET: ms for 10 `trace show --json` of $ra as root
	local t0
	t0=$(date +%s%N)
	for _ in $(seq 10); do "$WARDEN" trace show --json --socket "$1" "$ra" >/dev/null; done
	echo $((($(date +%s%N) - t0) / 10000000))
}
echo "  trace show of a node-A run: $(ms_of "$T/A.sock") ms on A, $(ms_of "$T/C.sock") ms on C (mean of 10)"

# another team's user: refused, nothing read, none of it listed
out=$(as_user 1002 "$WARDEN" trace show "$ra" 2>&1)
expect_eq carol-show-exit "$?" 1
expect_match carol-show-refused "$out" "carol may not read run $ra \\(team team-one\\)"
out=$(as_user 1002 "$WARDEN" trace payload "$ra" 0 2>&1)
expect_eq carol-payload-exit "$?" 1
expect_no_match carol-payload-nothing "$out" "$SECRET"
expect_eq carol-nothing-recorded "$(c_reads carol)" 0
out=$(as_user 1002 "$WARDEN" trace ls 2>&1)
expect_no_match carol-ls-not-listed "$out" "$ra|$rb"
expect_match carol-ls-own "$out" "$ro"
st=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$T/C.sock" "http://w/v1/runs/$ra/payload/0")
expect_eq raw-payload-root-200 "$st" 200
st=$(as_user 1002 curl -s -o /dev/null -w '%{http_code}' --unix-socket "$T/C.sock" "http://w/v1/runs/$ra/payload/0")
expect_eq raw-payload-carol-403 "$st" 403

# ls on C: both nodes' runs, each naming its node
ls=$(as_user 1000 "$WARDEN" trace ls --json)
expect_eq ls-node-a "$(printf '%s' "$ls" | jq_py "[r['node'] for r in d if r['run_id'] == '$ra']")" "[\"$ida_node\"]"
expect_eq ls-node-b "$(printf '%s' "$ls" | jq_py "[r['node'] for r in d if r['run_id'] == '$rb']")" "[\"$idb_node\"]"
expect_match ls-text-node "$(as_user 1000 "$WARDEN" trace ls)" "$ra .* $ida_node"
# paged: one run a page walks every run once
all=$(as_user 1001 "$WARDEN" trace ls --json | jq_py 'sorted(r["run_id"] for r in d)')
walk() { # PATH KEY: every page of PATH (limit=1) as root on C, the KEY of each item in order
	python3 - "$T/C.sock" "$1" "$2" <<'PY'
import json, socket, sys, urllib.parse
def get(path):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    s.sendall(("GET %s HTTP/1.0\r\nHost: w\r\n\r\n" % path).encode())
    b = b""
    while True:
        x = s.recv(65536)
        if not x: break
        b += x
    return json.loads(b.split(b"\r\n\r\n", 1)[1])
ids, after = [], None
for _ in range(1000):
    p = get(sys.argv[2] + "?limit=1" + ("&after=" + urllib.parse.quote(str(after)) if after is not None else ""))
    ids += [[r.get("node"), r[sys.argv[3]]] for r in p[sys.argv[2].split("/")[-1]]]
    if not p["more"]: break
    after = p["next_after"]
print(json.dumps(ids, separators=(",", ":")))
PY
}
pages=$(walk /v1/trace/runs run_id | jq_py 'sorted(x[1] for x in d)')
root_all=$("$WARDEN" trace ls --json | jq_py 'sorted(r["run_id"] for r in d)')
expect_eq ls-paged-once-each "$pages" "$root_all"
expect_match ls-bob-sees-team "$all" "$ra"
recs=$(walk /v1/trace/records seq)
expect_eq records-paged-once-each "$(printf '%s' "$recs" | jq_py 'len(d) == len(set(map(tuple, d)))')" True
expect_eq records-paged-all "$(printf '%s' "$recs" | jq_py 'len(d)')" "$(curl -s --unix-socket "$T/C.sock" "http://w/v1/trace/records?limit=10000" | jq_py 'len(d["records"])')"
expect_eq records-paged-nodes "$(printf '%s' "$recs" | jq_py 'len(set(x[0] for x in d))')" 3

# html and diff of runs on two other nodes, on C
mkdir -m 777 "$T/out"
check html-on-c as_user 1000 "$WARDEN" trace html "$ra" -o "$T/out/ra.html"
expect_match html-payload "$(cat "$T/out/ra.html" 2>/dev/null)" "$SECRET"
out=$(as_user 1000 "$WARDEN" trace diff "$ra" "$rb" --json 2>&1)
expect_match diff-a-b "$out" '"changed"'
expect_match diff-differs "$(as_user 1000 "$WARDEN" trace diff "$ra" "$rb" 2>&1)" 'different arguments|different result|changed model output'
check failures-on-c as_user 1000 "$WARDEN" trace failures --json
expect_eq failures-tool-on-a "$(as_user 1000 "$WARDEN" trace failures --json |
	jq_py "[(g['tool'], [x['run_id'] for x in g['examples']]) for g in d['tool_failures']]")" "[[\"boom\",[\"$rf\"]]]"
expect_match failures-text "$(as_user 1000 "$WARDEN" trace failures)" "boom .*$rf@0"
expect_eq failures-carol-none "$(as_user 1002 "$WARDEN" trace failures --json | jq_py 'len(d["tool_failures"])')" 0
# grep: every node's records, each naming its node; paged one at a time
g=$(as_user 1000 "$WARDEN" trace grep --tool echo --json)
expect_match grep-text-node "$(as_user 1000 "$WARDEN" trace grep --tool echo)" "$ra +seq=[0-9]+ step=0 tool_result echo ok node=$ida_node"
expect_eq grep-nodes "$(printf '%s' "$g" | jq_py "sorted(set((r['run_id'], r['node']) for r in d if r['type'] == 'tool_result'))")" \
	"$(python3 -c "import json; print(json.dumps(sorted([('$ra', '$ida_node'), ('$rb', '$idb_node'), ('$rh', '$ida_node')]), separators=(',', ':')))")"
expect_eq failures-counts-fleet "$(as_user 1000 "$WARDEN" trace failures --json | jq_py 'd["runs"]')" \
	"$(as_user 1000 "$WARDEN" trace ls --json | jq_py 'len(d)')"

# hash_only on another node: records without payload, payload refused
out=$(as_user 1000 "$WARDEN" trace show --json "$rh" 2>&1)
expect_no_match hash-only-show-no-task "$out" "HIDDEN-$$"
expect_match hash-only-show-records "$out" 'run_end'
out=$(as_user 1000 "$WARDEN" trace payload "$rh" 0 --json 2>&1)
expect_no_match hash-only-payload-refused "$out" "HIDDEN-$$"
expect_match hash-only-payload-says "$out" 'hash_only run: payloads are not shown'

# cost on C: every node's runs the caller may read
cost=$(as_user 1000 "$WARDEN" cost --by agent --json)
expect_eq cost-agents "$(printf '%s' "$cost" | jq_py 'sorted(g["agent"] for g in d["groups"])')" '["hidden","ona","onb","onf"]'
expect_eq cost-carol "$(as_user 1002 "$WARDEN" cost --by agent --json | jq_py 'sorted(g["agent"] for g in d["groups"])')" '["other"]'

# approvals: a node-A run's pending approval listed on C naming its node,
# approved there by an approver; while the database is away C says the
# other nodes' approvals are not listed
gid=$(as_user 1000 "$WARDEN" run --detach gate go)
pending() { as_user 1001 "$WARDEN" approvals ls 2>&1 | grep -q "$gid"; }
wait_until 10 pending && pass approval-listed-on-c || fail approval-listed-on-c "$(as_user 1001 "$WARDEN" approvals ls 2>&1)"
expect_match approval-names-node "$(as_user 1001 "$WARDEN" approvals ls 2>&1 | grep -A1 "$gid")" "on node $ida_node"
aid=$(as_user 1001 "$WARDEN" approvals ls --json | jq_py "[x['id'] for x in d if x['run_id'] == '$gid'][0]")
# its arguments, to an approver of its team on C, from the shipped
# approval_request record: the read recorded in C's store, once
args_listed() { as_user 1001 "$WARDEN" approvals ls --json | grep -q 'x@example.com'; }
wait_until 10 args_listed && pass approval-args-on-c || fail approval-args-on-c "$(as_user 1001 "$WARDEN" approvals ls --json)"
expect_eq approval-args-read-recorded "$("$WARDEN" trace show --json --state "$T/C/state" "$gid" |
	jq_py "len([r for r in d if r['type'] == 'payload_read' and r.get('payload_type') == 'approval' and r.get('reader') == 'bob' and r.get('run_node') == '$ida_node'])")" 1
expect_eq approval-carol-none "$(as_user 1002 "$WARDEN" approvals ls --json | jq_py "len([x for x in d if x['run_id'] == '$gid'])")" 0
check approval-approved-on-c as_user 1001 "$WARDEN" approvals approve "$aid"
gate_done() { [ "$(psql_q "SELECT state || status FROM warden.runs WHERE id = '$gid'")" = doneok ]; }
wait_until 10 gate_done && pass approval-run-done-on-a || fail approval-run-done-on-a "$(psql_q "SELECT state, status, node_id FROM warden.runs WHERE id = '$gid'")"

# the database away: C answers its own runs and says the others' are not available
stop_pg
out=$(as_user 1001 "$WARDEN" approvals ls 2>&1)
expect_match degraded-approvals-says "$out" "other nodes' approvals are not listed"
out=$(as_user 1000 "$WARDEN" trace show "$ra" 2>&1)
expect_eq degraded-show-exit "$?" 1
expect_match degraded-show-says "$out" "other nodes' runs are not available"
out=$(as_user 1002 "$WARDEN" trace ls 2>&1)
expect_match degraded-ls-says "$out" "other nodes' runs are not listed"
expect_match degraded-ls-own "$out" "$ro"
out=$(as_user 1002 "$WARDEN" cost 2>&1)
expect_match degraded-cost-says "$out" "other nodes' runs are not counted"
out=$(as_user 1002 "$WARDEN" trace show "$ro" 2>&1)
expect_match degraded-show-own-run "$out" 'run_end +status=ok'
out=$(as_user 1002 "$WARDEN" trace grep --tool echo 2>&1)
expect_match degraded-grep-says "$out" "other nodes' records are not included"
expect_match degraded-grep-own "$out" "$ro"
finish
