#!/usr/bin/env bash
# What the claiming node itself decides, on a real PostgreSQL (lease 2 s):
#  1. A rolling policy change: agent `ro` has resume: if_read_only in the
#     policy of A (capacity 0, the submitter) and B, and resume: never in
#     C's. B runs it and is killed (-9) mid-run; the reaper queues it again
#     (the row says resume, as A judged it); C claims it and -- by its OWN
#     policy -- never starts it: the run ends interrupted fleet-wide with
#     the reason, and C's store has no run of that attempt.
#  0. A node without --fleet maps no libpq (loaded by --fleet only).
#  3. hash_only runs in the submitting node's capacity; 4. a decision's
#     outcome whose write failed is written as it was on the next round.
#  2. A row the database gives a node that never took it up (the claim
#     committed, its reply lost; made here with psql behind C's back): C's
#     heartbeat does not renew it; it is reaped within the lease while C
#     stays up.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip fleet-claim "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { fail fleet-claim "no PostgreSQL server at ${PGBIN:-/usr/lib/postgresql/*/bin} (scripts/deps.sh installs postgresql)"; finish; }
SLOW_MARK=4.$$7 # the slow tool's sleep: ~4 s, unique to this test
LEASE_MS=2000

base_policy
tool slow "[\"/usr/bin/sleep\", \"$SLOW_MARK\"]" "input: argv" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:slow\"]}" "side_effects: none"
script ro <<'S'
{"step": 0, "tool_calls": [{"name": "slow", "arguments": {}}]}
{"text": "ro done {{task}}"}
S
agent ro ro '[slow]'
script secret <<'S'
{"step": 0, "tool_calls": [{"name": "slow", "arguments": {}}]}
{"text": "secret done"}
S
agent secret secret '[slow]'
sed -i 's/payloads: full/payloads: hash_only/' "$POL/agents/secret.yaml"
# gk: its step 0 waits for an approval
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: none" "approval: always"
script gk <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"to": "x@example.com"}}]}
{"text": "after approval"}
S
agent gk gk '[gated]'
grep -q 'payloads: hash_only' "$POL/agents/secret.yaml" || fail hash-only-agent "no hash_only agent written"
write_gateway
POL_NEVER=$T/pol-never
cp -a "$POL" "$POL_NEVER"
printf 'resume: if_read_only\n' >>"$POL/agents/ro.yaml"
printf 'resume: never\n' >>"$POL_NEVER/agents/ro.yaml"
start_pg || { fail pg-start "see above"; finish; }
launch_node A 0
launch_node B 1
NODE_POL=$POL_NEVER launch_node C 1
wait_node A && wait_node B && wait_node C || { fail nodes-start "see logs"; finish; }
export WARDEN_SOCKET=$T/A.sock
# libpq is loaded by --fleet only (fleet/pq_lazy.c): a single node maps
# none (and needs none installed); a fleet node maps it
start_node S - || fail single-start "see log"
expect_eq single-no-libpq "$(grep -c 'libpq' "/proc/$(node_pid S)/maps")" 0
expect_match fleet-node-libpq "$(grep -o 'libpq[^ ]*' "/proc/$(node_pid A)/maps" | sort -u)" '^libpq\.so\.5'
stop_node S
idb=$(node_id B)
idc=$(node_id C)

# --- 1. B runs it, is killed; C must not run it again
stop_node C # B alone has room: the run is B's
as_user 1000 "$WARDEN" run --detach ro t1 >"$T/t1.out" 2>&1 || { fail submit "$(cat "$T/t1.out")"; finish; }
on_b() { [ "$(psql_q "SELECT count(*) FROM warden.runs WHERE task = 't1' AND node_id = '$idb' AND state = 'running'")" = 1 ]; }
wait_until 20 on_b || { fail t1-on-b "$(psql_q "SELECT node_id, state FROM warden.runs")"; finish; }
slow_started() { pgrep -f "sleep $SLOW_MARK" >/dev/null; }
wait_until 10 slow_started || fail t1-slow-started "no slow tool"
rid=$(psql_q "SELECT id FROM warden.runs WHERE task = 't1'")
# one more waits in the queue (B is full, A has no room, C is away): the
# fleet's queue depth as /metrics says it (at a reaper's round)
as_user 1000 "$WARDEN" run --detach ro q1 >"$T/q1.out" 2>&1 || fail submit-q1 "$(cat "$T/q1.out")"
depth1() { curl -s --unix-socket "$T/A.sock" http://w/metrics | grep -q '^warden_fleet_queue_depth 1$'; }
wait_until 5 depth1 && pass metrics-queue-depth ||
	fail metrics-queue-depth "$(curl -s --unix-socket "$T/A.sock" http://w/metrics | grep queue_depth)"
NODE_POL=$POL_NEVER start_node C 1 || { fail c-start "see log"; finish; }
kill9_node B
ended() { [ "$(psql_q "SELECT state FROM warden.runs WHERE id = '$rid'")" = interrupted ]; }
wait_until 20 ended && pass again-refused-interrupted ||
	fail again-refused-interrupted "$(psql_q "SELECT state, status, node_id, attempt, reason FROM warden.runs WHERE id = '$rid'")"
expect_eq again-claimed-by-c "$(psql_q "SELECT node_id, attempt, status FROM warden.runs WHERE id = '$rid'")" "$idc|1|interrupted"
expect_match again-reason "$(psql_q "SELECT reason FROM warden.runs WHERE id = '$rid'")" \
	"node $idc may not run it again: agent 'ro' has resume: never in this node's policy"
expect_eq again-not-started-on-c "$("$WARDEN" trace show --state "$T/C/state" "$rid-a1" >/dev/null 2>&1 && echo started || echo absent)" absent
expect_match again-c-log "$(cat "$T/C.log")" "run $rid \\(attempt 2\\) claimed and not started"
sleep $((LEASE_MS / 1000 + 1))
expect_eq again-verdict-stands "$(psql_q "SELECT state, attempt FROM warden.runs WHERE id = '$rid'")" "interrupted|1"

expect_eq q1-ok-on-c "$(psql_q "SELECT node_id, status FROM warden.runs WHERE task = 'q1'")" "$idc|ok"

# --- 2. a row C never took up: reaped, not renewed for ever
psql_q "INSERT INTO warden.runs (id, team, agent, task, uid, gid, user_name, submitted_node, state, node_id, claimed_at, lease_until, resume) VALUES ('run_00000000deadbeef', 'team-ro', 'ro', 'ghost', 1000, 1000, 'alice', '$idc', 'running', '$idc', clock_timestamp(), clock_timestamp() + interval '$LEASE_MS milliseconds', false)" >/dev/null
t0=$(date +%s%N)
ghost_gone() { [ "$(psql_q "SELECT state FROM warden.runs WHERE id = 'run_00000000deadbeef'")" = interrupted ]; }
# the lease, the reaper's period (lease/10) and slack; a renewed row never
wait_until $((LEASE_MS / 1000 + 3)) ghost_gone && pass unheld-row-reaped ||
	fail unheld-row-reaped "$(psql_q "SELECT state, lease_until, clock_timestamp() FROM warden.runs WHERE id = 'run_00000000deadbeef'")"
echo "  the unheld row reaped $((($(date +%s%N) - t0) / 1000000)) ms after it was made (lease $LEASE_MS ms)"
expect_match unheld-reason "$(psql_q "SELECT reason FROM warden.runs WHERE id = 'run_00000000deadbeef'")" "node $idc stopped renewing"
expect_eq c-still-up "$(psql_q "SELECT state FROM warden.nodes WHERE id = '$idc'")" up
expect_match c-status-up "$(node_api C GET /v1/status)" '"fleet":\{[^}]*"state":"up"'
# C still runs what it claims
as_user 1000 "$WARDEN" run --detach ro t2 >"$T/t2.out" 2>&1 || fail submit-t2 "$(cat "$T/t2.out")"
t2_ok() { [ "$(psql_q "SELECT node_id, status FROM warden.runs WHERE task = 't2'")" = "$idc|ok" ]; }
wait_until 20 t2_ok && pass c-runs-claims || fail c-runs-claims "$(psql_q "SELECT node_id, state, status, reason FROM warden.runs WHERE task = 't2'")"

# --- 3. a hash_only agent's run is not queued (its task would be in the
# database in plain text): it runs on the node it is submitted to, in a
# slot of that node's capacity -- refused on A (capacity 0); on C
# (capacity 1) while it runs, a queued run waits for it
out=$(as_user 1000 "$WARDEN" run --detach secret s0 2>&1)
expect_eq hash-only-cap0-exit "$?" 1
expect_match hash-only-cap0-refused "$(printf '%s' "$out" | tr '\n' ' ')" \
	"agent 'secret' keeps hash_only traces: .* node $(node_id A) has no room for one \(capacity 0\); the run was not started"
expect_eq hash-only-cap0-not-run "$("$WARDEN" trace ls --json --state "$T/A/state" | jq_py "len([x for x in d if x.get('agent') == 'secret'])")" 0
sid=$(as_user 1000 "$WARDEN" run --detach secret s1 --socket "$T/C.sock")
wait_until 10 slow_started || fail hash-only-started "$(cat "$T/C.log" | tail -3)"
as_user 1000 "$WARDEN" run --detach ro t3 >"$T/t3.out" 2>&1 || fail submit-t3 "$(cat "$T/t3.out")"
sleep 1 # a claim follows a submission within milliseconds (NOTIFY): none may
expect_eq hash-only-holds-slot "$(psql_q "SELECT state FROM warden.runs WHERE task = 't3'")|$("$WARDEN" trace show --state "$T/C/state" "$sid" 2>&1 | grep -c run_end)" "queued|0"
expect_eq hash-only-not-queued "$(psql_q "SELECT count(*) FROM warden.runs WHERE agent = 'secret'")" 0
t3_ok() { [ "$(psql_q "SELECT node_id, status FROM warden.runs WHERE task = 't3'")" = "$idc|ok" ]; }
wait_until 20 t3_ok && pass hash-only-slot-freed || fail hash-only-slot-freed "$(psql_q "SELECT node_id, state FROM warden.runs WHERE task = 't3'")"
expect_match hash-only-ran-on-c "$("$WARDEN" trace show --state "$T/C/state" "$sid" 2>&1 | grep run_end)" 'run_end +status=ok'

# --- 4. a decision applied on its run's node whose outcome's write fails
# (a trigger refuses it once: as a lost reply, the row still says decided):
# the next round writes the outcome it had -- applied -- not "no such
# approval" from deciding it a second time
psql -X -q -h "$PGSOCK" -p "$PGPORT" -U warden -d postgres -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE SEQUENCE public.fail_once;
CREATE FUNCTION public.fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.state = 'decided' AND NEW.state = 'done' AND nextval('public.fail_once') = 1 THEN
		RAISE EXCEPTION 'test: the outcome''s write fails once';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER fail_once BEFORE UPDATE ON warden.approvals FOR EACH ROW EXECUTE FUNCTION public.fail_once();
SQL
gk=$(as_user 1000 "$WARDEN" run --detach gk k1)
gk_pending() { [ "$(psql_q "SELECT count(*) FROM warden.approvals WHERE run_id = '$gk' AND state = 'pending'")" = 1 ]; }
wait_until 10 gk_pending || fail gk-pending "$(psql_q "SELECT state FROM warden.approvals WHERE run_id = '$gk'")"
gaid=$(psql_q "SELECT id FROM warden.approvals WHERE run_id = '$gk'")
as_user 1001 "$WARDEN" approvals approve "$gaid" --socket "$T/A.sock" >"$T/gk.out" 2>&1
gk_done() { [ "$(psql_q "SELECT state FROM warden.approvals WHERE id = '$gaid'")" = done ]; }
wait_until 10 gk_done || fail gk-outcome-written "$(psql_q "SELECT state, result FROM warden.approvals WHERE id = '$gaid'")"
expect_match gk-write-failed-once "$(cat "$T/C.log")" "approvals: outcome: .*the outcome's write fails once"
expect_eq gk-outcome-applied "$(psql_q "SELECT result_code, result FROM warden.approvals WHERE id = '$gaid'")" "0|applied"
gk_ok() { [ "$(psql_q "SELECT node_id, status FROM warden.runs WHERE id = '$gk'")" = "$idc|ok" ]; }
wait_until 10 gk_ok && pass gk-run-ok || fail gk-run-ok "$(psql_q "SELECT node_id, state, status FROM warden.runs WHERE id = '$gk'")"
finish
