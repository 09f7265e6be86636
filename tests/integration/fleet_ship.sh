#!/usr/bin/env bash
# The trace shipped to a real PostgreSQL (schema v6), three nodes of
# capacity 2: runs of an agent keeping payloads (a tool call, then a slow
# tool) and of a hash_only one (on a fourth node, D: such a run takes a
# slot of the node it is submitted to); PostgreSQL stopped for 30 s while they run
# -> the runs go on and end on their nodes; when it is back every node's
# shipping catches up: each record's line in warden.trace_lines exactly
# once and byte for byte as in the node's segments (and its index row in
# the day-partitioned warden.trace_records; the lag in /metrics grew while
# it was away, 0 after), the blobs of the full runs as
# the node stores them (inflating to their ref's sha256), none of the
# hash_only runs'; `warden fleet verify` passes, and reports a line altered,
# removed or the chain's start forged in the database (exit 1). `warden
# fleet gc`: a day aged past metadata retention is dropped whole (its
# partitions gone, the chain verifying from the next seq), a day within it
# kept; payload rows of runs past their retention deleted, those of flagged
# and failed runs and of runs with a longer retention kept; root only. A
# restarted node resumes after its cursor; a database at version 5 with
# shipped index rows migrates them into their days' partitions.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip fleet-ship "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { fail fleet-ship "no PostgreSQL server at ${PGBIN:-/usr/lib/postgresql/*/bin} (scripts/deps.sh installs postgresql)"; finish; }
OUTAGE_S=${FLEET_OUTAGE_S:-30}
SLOW_MARK=4.$$2 # the slow tool's sleep: ~4 s, unique to this test

base_policy
tool slow "[\"/usr/bin/sleep\", \"$SLOW_MARK\"]" "input: argv" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:slow\"]}" "side_effects: none"
script sh <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "arg {{task}}"}}]}
{"step": 1, "tool_calls": [{"name": "slow", "arguments": {}}]}
{"text": "done {{task}}"}
S
agent full sh '[echo, slow]'
agent secret sh '[echo, slow]'
sed -i 's/payloads: full/payloads: hash_only/' "$POL/agents/secret.yaml"
grep -q 'payloads: hash_only' "$POL/agents/secret.yaml" || fail hash-only-agent "no hash_only agent written"
write_gateway
# psql_v VALUE SQL: SQL with :'l' standing for VALUE, quoted by psql
psql_v() { psql -X -At -q -h "$PGSOCK" -p "$PGPORT" -U warden -d postgres -v ON_ERROR_STOP=1 -v l="$1" <<<"$2" >/dev/null; }
start_pg || { fail pg-start "see above"; finish; }
launch_node A 2
launch_node B 2
launch_node C 2
wait_node A && wait_node B && wait_node C || { fail nodes-start "see logs"; finish; }
NV=$(sed -n 's/^#define WD_FLEET_SCHEMA_VERSION \([0-9]*\)$/\1/p' daemon/fleet/fleet_int.h)
expect_eq schema-latest "$(psql_q 'SELECT max(version) FROM warden.schema_version')" "$NV"
expect_eq partitioned "$(psql_q "SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid")" \
	"trace_lines,trace_records"
export WARDEN_SOCKET=$T/A.sock

# six runs keeping payloads (one per slot of A, B, C), then two hash_only
# runs on D: a hash_only run takes a slot of the node it is submitted to
# (D, started once the six are claimed: nothing is left for it to claim)
for i in $(seq 6); do as_user 1000 "$WARDEN" run --detach full "f$i-$$" >/dev/null; done
all_running() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'full' AND state = 'running'")" = 6 ]; }
wait_until 20 all_running || fail runs-claimed "$(psql_q "SELECT state, count(*) FROM warden.runs GROUP BY 1")"
start_node D 4 || fail node-d-start "see log"
hpids=()
for i in 1 2; do
	as_user 1000 "$WARDEN" run secret "h$i-$$" --socket "$T/D.sock" >"$T/h$i.out" 2>&1 & hpids+=($!)
done

# --- the database goes away for OUTAGE_S while they run
stop_pg
t0=$(date +%s)
# hash_only runs are the node's own: they start and end meanwhile
for i in 3 4; do
	as_user 1000 "$WARDEN" run secret "h$i-$$" --socket "$T/D.sock" >"$T/h$i.out" 2>&1 & hpids+=($!)
done
hok=0
for p in "${hpids[@]}"; do wait "$p" && hok=$((hok + 1)); done
expect_eq outage-hash-only-runs-ok "$hok" 4
# the fleet's runs end on their nodes while the database is away
local_ok() { # the full runs ended ok in the nodes' own stores
	local n c=0
	for n in A B C; do
		c=$((c + $("$WARDEN" trace ls --json --state "$T/$n/state" --agent full | jq_py 'len([x for x in d if x["status"] == "ok"])')))
	done
	echo "$c"
}
six_local() { [ "$(local_ok)" = 6 ]; }
wait_until 20 six_local && pass outage-runs-continue || fail outage-runs-continue "$(local_ok) of 6 ended ok on their nodes"
left=$((OUTAGE_S - ($(date +%s) - t0)))
[ "$left" -gt 0 ] && sleep "$left"
echo "  database away for $(($(date +%s) - t0)) s"
lag_of() { curl -s --unix-socket "$T/$1.sock" http://w/metrics | awk '/^warden_fleet_trace_ship_lag_seconds/ {print $2}'; }
lags=$(for n in A B C D; do lag_of $n; done | tr '\n' ' ')
echo "  shipping lag at the outage's end: $lags s"
expect_match metrics-lag-outage "$(printf '%s\n' $lags | sort -g | tail -1)" '^([2-9]|[1-9][0-9]+)\.'
pg_up_again || { fail pg-again "see log"; finish; }

# --- shipping catches up: every record once, byte for byte
seg_last() { # NODE: the last seq in its segments
	cat "$T/$1/state/trace/segments/"*.jsonl | tail -1 | jq_py 'd["seq"]'
}
for n in A B C D; do
	id=$(node_id $n)
	caught() { [ "$(psql_q "SELECT seq FROM warden.trace_ship WHERE node_id = '$id'")" = "$(seg_last $n)" ]; }
	wait_until 20 caught || fail "ship-caught-up-$n" "local $(seg_last $n), cursor $(psql_q "SELECT seq FROM warden.trace_ship WHERE node_id = '$id'")"
	cat "$T/$n/state/trace/segments/"*.jsonl >"$T/local-$n"
	psql_q "SELECT line FROM warden.trace_lines WHERE node_id = '$id' ORDER BY seq" >"$T/db-$n"
	cnt=$(wc -l <"$T/local-$n")
	expect_eq "lines-once-$n" "$(psql_q "SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM warden.trace_lines WHERE node_id = '$id'")" "$cnt|$cnt|1|$cnt"
	cmp -s "$T/local-$n" "$T/db-$n" && pass "lines-byte-for-byte-$n" || fail "lines-byte-for-byte-$n" "$(diff "$T/local-$n" "$T/db-$n" | head -3)"
	expect_eq "index-rows-$n" "$(psql_q "SELECT count(*), count(DISTINCT seq) FROM warden.trace_records WHERE node_id = '$id'")" "$cnt|$cnt"
	expect_eq "day-of-ts-$n" "$(psql_q "SELECT count(*) FROM warden.trace_lines WHERE node_id = '$id' AND day <> substr(line::jsonb->>'ts', 1, 10)::date")" 0
done
expect_eq metrics-lag-caught-up "$(for n in A B C D; do lag_of $n; done | tr '\n' ' ')" "0.000 0.000 0.000 0.000 "
expect_eq ship-runs-ok "$(psql_q "SELECT count(*) FROM warden.trace_runs WHERE agent = 'full' AND status = 'ok' AND payloads = 'full'")" 6
expect_eq ship-hash-only-runs "$(psql_q "SELECT count(*) FROM warden.trace_runs WHERE agent = 'secret' AND status = 'ok' AND payloads = 'hash_only'")" 4
expect_match metrics-blobs "$(curl -s --unix-socket "$T/A.sock" http://w/metrics)" 'warden_fleet_trace_blobs_shipped_total [1-9]'

# --- the blobs: every blob a full run names that its node holds, as the
# node stores it (inflating to the ref's sha256); none of a hash_only run
psql_q "SELECT ref, encode(body, 'hex'), coalesce(run_id, '') FROM warden.trace_blobs" >"$T/blobs"
out=$(python3 - "$T" <<'PY'
import hashlib, json, os, sys, zlib
T = sys.argv[1]
blobs = {}
for l in open(f"{T}/blobs"):
    ref, hx, run = l.rstrip("\n").split("|")
    blobs[ref] = (bytes.fromhex(hx), run)
bad, full_refs, secret_refs, checked, ndefs = [], set(), set(), 0, 0
for n in "ABCD":
    mode = {}
    for l in open(f"{T}/local-{n}"):
        r = json.loads(l)
        if r["type"] == "run_start":
            mode[r["run_id"]] = (r.get("trace") or {}).get("payloads")
        refs = [v for k, v in r.items() if k.endswith("_ref") and isinstance(v, str) and v.startswith("sha256:")]
        # a run_start's definitions (agent, tools, scopes, route), by ref
        for k, v in (r.get("definitions") or {}).items():
            if "ref" in v:
                refs.append(v["ref"]); ndefs += 1
            else:
                refs += [x["ref"] for x in v.values() if "ref" in x]; ndefs += len(v)
        for ref in refs:
            m = mode.get(r["run_id"])
            (secret_refs if m == "hash_only" else full_refs).add(ref)
            if m != "full":
                continue
            p = f"{T}/{n}/state/trace/blobs/{ref[7:9]}/{ref[9:]}"
            if not os.path.exists(p):
                continue
            checked += 1
            if ref not in blobs:
                bad.append(f"{n}: {ref} missing"); continue
            body = blobs[ref][0]
            if body != open(p, "rb").read():
                bad.append(f"{n}: {ref} differs from the node's file")
            if "sha256:" + hashlib.sha256(zlib.decompress(body)).hexdigest() != ref:
                bad.append(f"{n}: {ref} does not inflate to its hash")
leak = [r for r in secret_refs - full_refs if r in blobs]
print(f"checked={checked} bad={len(bad)} leaked={len(leak)} definitions={ndefs} {bad[:3]} {leak[:3]}")
PY
)
echo "  blobs: $out"
expect_match blobs-full-present "$out" '^checked=[1-9][0-9]* bad=0 '
expect_match blobs-hash-only-none "$out" ' leaked=0 '
expect_match blobs-definitions-named "$out" ' definitions=[1-9]'
expect_eq blobs-no-hash-only-run "$(psql_q "SELECT count(*) FROM warden.trace_blobs b JOIN warden.trace_runs r ON r.run_id = b.run_id WHERE r.payloads = 'hash_only'")" 0

# --- the chain, fleet-wide
out=$("$WARDEN" fleet verify --socket "$T/B.sock" 2>&1)
expect_eq verify-ok-exit "$?" 0
expect_eq verify-ok-nodes "$(printf '%s\n' "$out" | grep -c '^node .*: ok$')" 4 # A, B, C, D
expect_match verify-ok-says "$out" 'fleet verify: ok'
out=$(as_user 1000 "$WARDEN" fleet verify 2>&1)
expect_eq verify-alice-exit "$?" 1
expect_match verify-alice-refused "$out" 'root and the auditors group only'
ida=$(node_id A)
rid=$(psql_q "SELECT run_id FROM warden.trace_runs WHERE node_id = '$ida' AND agent = 'full' LIMIT 1")
check verify-run-ok "$WARDEN" fleet verify "$rid"
expect_eq verify-run-json "$("$WARDEN" fleet verify --json "$rid" | jq_py '(d["ok"], d["run"], len(d["nodes"]))')" "(True, '$rid', 1)"
# a line altered in the database: its frame breaks, and the next one's prev
s5=$(psql_q "SELECT line FROM warden.trace_lines WHERE node_id = '$ida' AND seq = 5")
psql_q "UPDATE warden.trace_lines SET line = replace(line, '\"seq\":5,', '\"seq\":5 ,') WHERE node_id = '$ida' AND seq = 5" >/dev/null
out=$("$WARDEN" fleet verify 2>&1)
expect_eq verify-tampered-exit "$?" 1
expect_match verify-tampered-frame "$out" "$ida seq 5: frame: bad framing or checksum"
expect_match verify-tampered-node "$out" "node $ida: .*: BROKEN"
# a line rewritten with a valid frame (a forger's crc) still breaks the chain
python3 - "$s5" >"$T/forged" <<'PY'
import sys
def crc32c(b):
    c = 0xffffffff
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82f63b78 & -(c & 1))
    return c ^ 0xffffffff
l = sys.argv[1]
body = l[:l.rindex(',"crc":"')]
i = body.index('Z"')  # the ts's last digit, changed
body = body[:i - 1] + ("1" if body[i - 1] == "0" else "0") + body[i:]
print(body + ',"crc":"%08x"}' % crc32c(body.encode()))
PY
psql_v "$(cat "$T/forged")" "UPDATE warden.trace_lines SET line = :'l' WHERE node_id = '$ida' AND seq = 5"
out=$("$WARDEN" fleet verify --json 2>&1)
expect_eq verify-forged-exit "$?" 1
expect_eq verify-forged-problems "$(printf '%s' "$out" | jq_py '[(p["seq"], p["kind"]) for p in d["problems"]]')" "[[6,\"chain\"]]"
psql_v "$s5" "UPDATE warden.trace_lines SET line = :'l' WHERE node_id = '$ida' AND seq = 5"
check verify-restored "$WARDEN" fleet verify
# the same through `warden trace verify --fleet`
expect_match trace-verify-fleet "$("$WARDEN" trace verify --fleet 2>&1)" 'fleet verify: ok'
# a line removed: the gap is named
psql_q "DELETE FROM warden.trace_lines WHERE node_id = '$ida' AND seq = 7" >/dev/null
out=$("$WARDEN" fleet verify 2>&1)
expect_eq verify-gap-exit "$?" 1
expect_match verify-gap "$out" "$ida seq 8: seq: seq 8 where 7 was expected"
expect_eq cursor-untouched "$(psql_q "SELECT seq FROM warden.trace_ship WHERE node_id = '$ida'")" "$(seg_last A)"
l7=$(sed -n 7p "$T/local-A")
psql_v "$l7" "INSERT INTO warden.trace_lines (node_id, seq, day, run_id, line) SELECT '$ida', 7, (:'l'::jsonb->>'ts')::date, :'l'::jsonb->>'run_id', :'l'"
check verify-gap-restored "$WARDEN" fleet verify
# a line past the node's cursor: the shipper never wrote it
psql_v "$l7" "INSERT INTO warden.trace_lines (node_id, seq, day, run_id, line) SELECT '$ida', 100000, (:'l'::jsonb->>'ts')::date, :'l'::jsonb->>'run_id', :'l'"
out=$("$WARDEN" fleet verify 2>&1)
expect_eq verify-extra-exit "$?" 1
expect_match verify-extra "$out" "$ida seq 100000: extra: 1 line\(s\) after seq [0-9]+, past the node's cursor"
psql_q "DELETE FROM warden.trace_lines WHERE node_id = '$ida' AND seq = 100000" >/dev/null

# --- gc: node A's first 5 records aged 400 days (past the 395 of metadata
# retention), 6..8 aged 10 days (within it)
psql_q "SELECT warden.trace_partitions(current_date - 400), warden.trace_partitions(current_date - 10)" >/dev/null
for tb in trace_lines trace_records; do
	psql_q "UPDATE warden.$tb SET day = current_date - 400 WHERE node_id = '$ida' AND seq <= 5" >/dev/null
	psql_q "UPDATE warden.$tb SET day = current_date - 10 WHERE node_id = '$ida' AND seq BETWEEN 6 AND 8" >/dev/null
done
old=$(psql_q "SELECT to_char(current_date - 400, 'YYYYMMDD')")
mid=$(psql_q "SELECT to_char(current_date - 10, 'YYYYMMDD')")
h5=$(sed -n 5p "$T/local-A" | tr -d '\n' | sha256sum | cut -d' ' -f1)
# payloads: four full runs' ends set 40 days back: one plain (its rows go:
# its retention is 1 day), one flagged, one failed, one with 90 days
mapfile -t fr < <(psql_q "SELECT run_id FROM warden.trace_runs WHERE agent = 'full' ORDER BY run_id LIMIT 4")
psql_q "UPDATE warden.trace_runs SET ended = now() - interval '40 days' WHERE run_id IN ('${fr[0]}', '${fr[1]}', '${fr[2]}', '${fr[3]}')" >/dev/null
psql_q "UPDATE warden.trace_runs SET flagged = true WHERE run_id = '${fr[1]}'" >/dev/null
psql_q "UPDATE warden.trace_runs SET status = 'failed' WHERE run_id = '${fr[2]}'" >/dev/null
psql_q "UPDATE warden.trace_runs SET retention_days = 90 WHERE run_id = '${fr[3]}'" >/dev/null
# and one blob row of a fifth run whose day is past metadata retention
psql_q "UPDATE warden.trace_blobs SET day = current_date - 400 WHERE ref = (SELECT ref FROM warden.trace_blobs WHERE run_id NOT IN ('${fr[0]}', '${fr[1]}', '${fr[2]}', '${fr[3]}') ORDER BY ref LIMIT 1)" >/dev/null
want_gone=$(psql_q "SELECT count(*) FROM warden.trace_blobs WHERE run_id = '${fr[0]}' OR day < current_date - 395")
want_kept=$(psql_q "SELECT count(*) FROM warden.trace_blobs WHERE run_id IN ('${fr[1]}', '${fr[2]}', '${fr[3]}')")
total=$(psql_q "SELECT count(*) FROM warden.trace_blobs")
[ "$want_gone" -ge 2 ] && [ "$want_kept" -ge 3 ] || fail gc-setup "gone $want_gone kept $want_kept"
# definitions (every run of an agent shares them) carry no run: payload
# retention leaves them to metadata retention
defs=$(psql_q "SELECT count(*) FROM warden.trace_blobs WHERE run_id IS NULL")
[ "$defs" -gt 0 ] && pass blobs-definitions-no-run || fail blobs-definitions-no-run "none"
# the queue's rows of the same four runs ended as long ago: only the
# plain one's task and output go (and the fifth's: payload retention comes
# first); a fifth full run ended 400 days ago and
# a done approval decided then leave the queue, a recent one stays
psql_q "UPDATE warden.runs SET ended_at = now() - interval '40 days' WHERE id IN ('${fr[0]}', '${fr[1]}', '${fr[2]}', '${fr[3]}')" >/dev/null
fr4=$(psql_q "SELECT id FROM warden.runs WHERE agent = 'full' AND state = 'done' AND id NOT IN ('${fr[0]}', '${fr[1]}', '${fr[2]}', '${fr[3]}') ORDER BY id LIMIT 1")
psql_q "UPDATE warden.runs SET ended_at = now() - interval '400 days' WHERE id = '$fr4'" >/dev/null
psql_q "INSERT INTO warden.approvals (id, node_id, run_id, state, created_at, decided_at) VALUES ('apr_old$$', '$ida', '$fr4', 'done', now() - interval '401 days', now() - interval '400 days'), ('apr_new$$', '$ida', '$fr4', 'done', now() - interval '2 days', now() - interval '1 day')" >/dev/null
expect_eq gc-queue-setup "$(psql_q "SELECT count(*) FILTER (WHERE task IS NOT NULL AND output IS NOT NULL) FROM warden.runs WHERE id IN ('${fr[0]}', '${fr[1]}', '${fr[2]}', '${fr[3]}', '$fr4')")" 5
out=$(as_user 1000 "$WARDEN" fleet gc 2>&1)
expect_eq gc-alice-exit "$?" 1
expect_match gc-alice-refused "$out" 'root only'
expect_eq gc-alice-nothing "$(psql_q "SELECT to_regclass('warden.trace_lines_$old') IS NOT NULL")" t
# `warden trace gc --fleet` is `warden fleet gc`
out=$("$WARDEN" trace gc --fleet --socket "$T/C.sock" 2>&1)
expect_eq gc-exit "$?" 0
echo "$out" | sed 's/^/  /'
expect_match gc-dropped-lines "$out" "dropped warden.trace_lines_$old"
expect_match gc-dropped-records "$out" "dropped warden.trace_records_$old"
expect_match gc-lines-removed "$out" '5 line\(s\) past 395 days'
expect_eq gc-partitions "$(psql_q "SELECT to_regclass('warden.trace_lines_$old') IS NULL, to_regclass('warden.trace_records_$old') IS NULL, to_regclass('warden.trace_lines_$mid') IS NOT NULL")" "t|t|t"
expect_eq gc-lines-left "$(psql_q "SELECT min(seq), count(*) FROM warden.trace_lines WHERE node_id = '$ida'")" "6|$(($(wc -l <"$T/local-A") - 5))"
expect_eq gc-index-left "$(psql_q "SELECT min(seq) FROM warden.trace_records WHERE node_id = '$ida'")" 6
expect_eq gc-chain-start "$(psql_q "SELECT last_seq, last_hash FROM warden.trace_gc WHERE node_id = '$ida'")" "5|sha256:$h5"
expect_match gc-blobs-deleted "$out" "$want_gone payload blob\\(s\\) deleted"
expect_match gc-queue-says "$out" "2 fleet run\\(s\\)' task and output cleared past payload retention; 1 ended run\\(s\\) and 1 done approval\\(s\\) past metadata retention removed"
expect_eq gc-blobs-left "$(psql_q "SELECT count(*) FROM warden.trace_blobs")" "$((total - want_gone))"
expect_eq gc-definitions-kept "$(psql_q "SELECT count(*) FROM warden.trace_blobs WHERE run_id IS NULL")" "$defs"
expect_eq gc-blobs-plain-gone "$(psql_q "SELECT count(*) FROM warden.trace_blobs WHERE run_id = '${fr[0]}'")" 0
expect_eq gc-blobs-kept "$(psql_q "SELECT count(*) FROM warden.trace_blobs WHERE run_id IN ('${fr[1]}', '${fr[2]}', '${fr[3]}')")" "$want_kept"
out=$("$WARDEN" fleet verify 2>&1)
expect_eq verify-after-gc-exit "$?" 0
expect_match verify-after-gc-start "$out" "node $ida: .*\\(days before seq 6 dropped by gc\\): ok"
# the chain's start is only accepted where gc recorded it
psql_q "UPDATE warden.trace_gc SET last_hash = 'sha256:$(printf '%064d' 0)' WHERE node_id = '$ida'" >/dev/null
out=$("$WARDEN" fleet verify 2>&1)
expect_eq verify-forged-start-exit "$?" 1
expect_match verify-forged-start "$out" "$ida seq 6: chain: prev does not match"
psql_q "UPDATE warden.trace_gc SET last_hash = 'sha256:$h5' WHERE node_id = '$ida'" >/dev/null
expect_eq gc-queue-payload-cleared "$(psql_q "SELECT task IS NULL, output IS NULL FROM warden.runs WHERE id = '${fr[0]}'")" "t|t"
expect_eq gc-queue-payload-kept "$(psql_q "SELECT count(*) FROM warden.runs WHERE id IN ('${fr[1]}', '${fr[2]}', '${fr[3]}') AND task IS NOT NULL AND output IS NOT NULL")" 3
expect_eq gc-queue-run-removed "$(psql_q "SELECT count(*) FROM warden.runs WHERE id = '$fr4'")" 0
expect_eq gc-queue-approvals "$(psql_q "SELECT string_agg(id, ' ') FROM warden.approvals WHERE id IN ('apr_old$$', 'apr_new$$')")" "apr_new$$"
# a cleared run reads without its task and output
expect_eq gc-queue-run-view "$("$WARDEN" fleet run --json "${fr[0]}" | jq_py '(d["state"], d.get("output"))')" "('done', None)"
# a second gc finds nothing more to drop
out=$("$WARDEN" fleet gc --json 2>&1)
expect_eq gc-again "$(printf '%s' "$out" | jq_py '(len(d["partitions_dropped"]), d["blobs_deleted"], d["run_payloads_cleared"], d["queue_runs_removed"], d["approvals_removed"])')" "(0, 0, 0, 0, 0)"
expect_eq gc-bad-days "$("$WARDEN" fleet gc --metadata-days 0 >/dev/null 2>&1; echo $?)" 2

# --- a restarted node resumes after its cursor: nothing doubled
stop_node B
idb=$(node_id B)
start_node B 2 || { fail node-b-restart "see log"; finish; }
as_user 1000 "$WARDEN" run secret "h5-$$" --socket "$T/B.sock" >/dev/null 2>&1
b_caught() { [ "$(psql_q "SELECT seq FROM warden.trace_ship WHERE node_id = '$idb'")" = "$(seg_last B)" ]; }
wait_until 20 b_caught || fail restart-caught-up "local $(seg_last B)"
cnt=$(cat "$T/B/state/trace/segments/"*.jsonl | wc -l)
expect_eq restart-lines-once "$(psql_q "SELECT count(*), count(DISTINCT seq), max(seq) FROM warden.trace_lines WHERE node_id = '$idb'")" "$cnt|$cnt|$cnt"
check verify-after-restart "$WARDEN" fleet verify

# --- a database at version 5 with shipped index rows (v2's table, keyed by
# (node, seq)) migrates to 6: each row moves to the day of its ts (UTC)
psql_q "CREATE DATABASE mig" >/dev/null
mig() { psql -X -At -q -h "$PGSOCK" -p "$PGPORT" -U warden -d mig -v ON_ERROR_STOP=1 -c "$1"; }
mig "CREATE SCHEMA warden; CREATE TABLE warden.schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
	INSERT INTO warden.schema_version (version) SELECT generate_series(1, 5);
	CREATE TABLE warden.trace_records (node_id text NOT NULL, seq bigint NOT NULL, run_id text, step integer, type text NOT NULL, tool text,
		call_id text, status text, prompt_hash text, result_hash text, ts timestamptz, PRIMARY KEY (node_id, seq));
	CREATE INDEX trace_records_run ON warden.trace_records (run_id, seq);
	CREATE TABLE warden.trace_runs (run_id text PRIMARY KEY, node_id text NOT NULL, agent text, team text, user_name text, uid bigint,
		model text, status text, started timestamptz, ended timestamptz, cost_usd double precision, input_tokens bigint,
		output_tokens bigint, steps integer);
	INSERT INTO warden.trace_records (node_id, seq, run_id, type, ts) VALUES ('n1', 1, 'r1', 'run_start', '2026-11-30T23:59:59.5Z'),
		('n1', 2, 'r1', 'run_end', '2026-12-01T00:00:00.5Z');
	-- what the steps after 6 alter (their own tests run on real tables)
	CREATE TABLE warden.nodes (id text PRIMARY KEY); CREATE TABLE warden.runs (id text PRIMARY KEY, task text NOT NULL, ended_at timestamptz);
	CREATE FUNCTION warden.claim(text, integer, jsonb) RETURNS void LANGUAGE sql AS 'SELECT'" >/dev/null
FLEET_URL="host=$PGSOCK port=$PGPORT user=warden dbname=mig" launch_node M 2
migrated() { [ "$(mig 'SELECT max(version) FROM warden.schema_version')" = "$NV" ]; }
wait_until 10 migrated && pass migrate-v5-to-latest || fail migrate-v5-to-latest "$(tail -3 "$T/M.log")"
expect_eq migrate-rows-by-day "$(mig "SELECT string_agg(seq || ':' || day || ':' || tableoid::regclass, ' ' ORDER BY seq) FROM warden.trace_records")" \
	"1:2026-11-30:trace_records_20261130 2:2026-12-01:trace_records_20261201"
expect_eq migrate-old-table-gone "$(mig "SELECT to_regclass('warden.trace_records_v2') IS NULL")" t
stop_node M
finish
