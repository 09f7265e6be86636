#!/usr/bin/env bash
# A fleet run parked on an approval, brought back at a restart from a
# snapshot a build before lease fencing wrote (no "fenced" key): a --fleet
# node takes it as fenced. Node A is killed with -9 while the run waits
# for its approval and restarted at once with that older snapshot; at its
# registration the fleet has the run interrupted. The approval, still
# pending, is decided: the run's side-effecting tool must not run on A
# (the witness file outside the sandbox stays empty) and the run ends
# interrupted on A too. On the build that read a missing key as "not
# fenced", the tool ran.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip fleet-upgrade "needs root"; finish; }
[ -x "$PGBIN/postgres" ] || { fail fleet-upgrade "no PostgreSQL server at ${PGBIN:-/usr/lib/postgresql/*/bin} (scripts/deps.sh installs postgresql)"; finish; }

base_policy
mail_tool
printf 'approval: always\n' >>"$POL/tools/mail.yaml"
script gm <<'S'
{"step": 0, "tool_calls": [{"name": "mail", "arguments": {"to": "old@example.com"}}]}
{"text": "sent"}
S
agent gm gm '[mail]'
write_gateway
start_pg || { fail pg-start "see $T/pglog"; finish; }
LEASE_MS=4000
start_node A 2 || { fail a-start "see log"; finish; }

gid=$(as_user 1000 "$WARDEN" run --detach gm go --socket "$T/A.sock")
pending() { [ "$(psql_q "SELECT count(*) FROM warden.approvals WHERE run_id = '$gid' AND state = 'pending'")" = 1 ]; }
wait_until 10 pending && pass approval-pending || fail approval-pending "$(psql_q "SELECT state FROM warden.approvals WHERE run_id = '$gid'")"
snap=$(grep -l "\"id\":\"$gid\"" "$T/A/state/runs/"* 2>/dev/null | grep -v '\.active$' | head -1)
[ -n "$snap" ] && pass snapshot-written || fail snapshot-written "$(ls "$T/A/state/runs" 2>&1)"
expect_match snapshot-says-fenced "$(cat "$snap" 2>/dev/null)" '"fenced":true'

kill9_node A
# the snapshot as the build before fencing wrote it
python3 - "$snap" <<'P'
import json, sys
p = sys.argv[1]
s = json.load(open(p))
s.pop("fenced", None)
open(p, "w").write(json.dumps(s, separators=(",", ":")))
P
expect_eq snapshot-key-gone "$(grep -c '"fenced"' "$snap")" 0
start_node A 2 || { fail a-restart "see log"; finish; }
gone() { [ "$(psql_q "SELECT state FROM warden.runs WHERE id = '$gid'")" = interrupted ]; }
wait_until 15 gone && pass run-interrupted-fleet-wide || fail run-interrupted-fleet-wide "$(psql_q "SELECT state, node_id FROM warden.runs WHERE id = '$gid'")"

# the approval, if still to be decided, is decided; either way A must not
# send the mail
aid=$(psql_q "SELECT id FROM warden.approvals WHERE run_id = '$gid' AND state = 'pending'")
if [ -n "$aid" ]; then
	as_user 1001 "$WARDEN" approvals approve "$aid" --reason "after upgrade" --socket "$T/A.sock" >"$T/approve.out" 2>&1
	echo "  approve: exit $? $(head -c 200 "$T/approve.out")"
else
	# the local approval (A's own view) is decided instead
	aid=$(as_user 1001 "$WARDEN" approvals ls --json --socket "$T/A.sock" | jq_py "[x['id'] for x in d if x['run_id'] == '$gid'][0] if [x for x in d if x['run_id'] == '$gid'] else ''")
	[ -n "$aid" ] && as_user 1001 "$WARDEN" approvals approve "$aid" --socket "$T/A.sock" >/dev/null 2>&1
fi
ended() { "$WARDEN" trace show --json --state "$T/A/state" "$gid" 2>/dev/null | grep -q '"type": *"run_end"'; }
wait_until 15 ended && pass run-ended-on-a || fail run-ended-on-a "$("$WARDEN" trace show --state "$T/A/state" "$gid" 2>&1 | tail -5)"
expect_eq mail-never-sent "$(grep -c old@example.com "$W")" 0
expect_match run-end-says-lease "$("$WARDEN" trace show --json --state "$T/A/state" "$gid" | jq_py '[x.get("reason", "") + x.get("status", "") for x in d if x["type"] == "run_end"]')" 'lease|interrupted'
# the restored approval is published again as the fleet reads it (its
# created time a number: the record's text ts put the node in degraded)
expect_eq restored-approval-published "$(grep -c 'approvals: publish' "$T/A.log")" 0
stop_node A
finish
