#!/usr/bin/env bash
# Trace reads are authorised by the uid that started a run, never by its
# user name: users.yaml maps names to uids, and a name may later be given to
# another uid. alice (uid 1000) runs; users.yaml then gives the name alice
# to uid 1001 and drops uid 1000; after a reload, uid 1001 sees none of uid
# 1000's runs (list, grep, cost, show, the raw endpoints) and uid 1000 still
# sees its own. The index rows that ls/grep/cost read carry the uid
# (run_start's); an index of the previous format (no uid column) is rebuilt
# from the segments with it.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-uid "needs root"; finish; }

base_policy
cat >"$POL/users.yaml" <<'Y'
users:
  root:  {uid: 0, groups: [admin]}
  alice: {uid: 1000, groups: [eng]}
  bob:   {uid: 1001, groups: [eng]}
groups:
  admin: {scopes: ["*"]}
  eng: {scopes: ["test:*"]}
approvers:
  users: []
  groups: []
Y
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "done"}
S
agent one once '[echo]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

id=$(as_user 1000 "$WARDEN" run --detach one "uid-run-$$")
wait_until 30 run_done "$id" || fail trace-uid-run "run $id did not finish"
expect_match trace-uid-run-start "$(rec_of "$id" run_start)" '"user":"alice".*"uid":1000|"uid":1000.*"user":"alice"'
expect_eq trace-uid-index-row "$("$WARDEN" trace ls --json --state "$T/state" | jq_py "[r.get('uid') for r in d if r['run_id']=='$id']")" "[1000]"

# the name alice now belongs to uid 1001; uid 1000 is no longer listed
cat >"$POL/users.yaml" <<'Y'
users:
  root:  {uid: 0, groups: [admin]}
  alice: {uid: 1001, groups: [eng]}
groups:
  admin: {scopes: ["*"]}
  eng: {scopes: ["test:*"]}
approvers:
  users: []
  groups: []
Y
"$WARDEN" policy reload >/dev/null 2>&1 || fail trace-uid-reload "policy reload failed"

check() { # NAME UID WANT(yes|no)
	local name=$1 uid=$2 want=$3 out got
	for what in ls grep cost show raw-runs raw-records; do
		case $what in
		ls) out=$(as_user "$uid" "$WARDEN" trace ls --json 2>&1) ;;
		grep) out=$(as_user "$uid" "$WARDEN" trace grep --tool echo --json 2>&1) ;;
		cost) out=$(as_user "$uid" curl -s --unix-socket "$SOCK" "http://w/v1/cost?by=user") ;;
		show) out=$(as_user "$uid" "$WARDEN" trace show --json "$id" 2>&1) ;;
		raw-runs) out=$(as_user "$uid" curl -s --unix-socket "$SOCK" "http://w/v1/trace/runs") ;;
		raw-records) out=$(as_user "$uid" curl -s --unix-socket "$SOCK" "http://w/v1/trace/records?tool=echo") ;;
		esac
		case $what in
		cost) printf '%s' "$out" | jq_py "sum(g['runs'] for g in d['groups'])" | grep -qx 1 && got=yes || got=no ;;
		show) printf '%s' "$out" | grep -q '"type": *"run_start"' && got=yes || got=no ;;
		*) printf '%s' "$out" | grep -q "$id" && got=yes || got=no ;;
		esac
		expect_eq "trace-uid-$name-$what" "$got" "$want"
	done
}
check renamed-1001 1001 no
check owner-1000 1000 yes
# the same after a restart: the run is read from the trace, not memory
stop_daemon
start_daemon || { fail daemon-restart "see log"; finish; }
check restarted-1001 1001 no
check restarted-1000 1000 yes
out=$(as_user 1001 "$WARDEN" trace show "$id" 2>&1)
expect_match trace-uid-renamed-403 "$out" "may not read run $id"

# an index written by the previous format (no uid column) is rebuilt from
# the segments at open, with the uid of each run's run_start
stop_daemon
db=$T/state/trace/index.db
python3 - "$db" <<'P'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("ALTER TABLE runs DROP COLUMN uid")
c.execute("PRAGMA user_version = 3")
c.commit()
P
start_daemon || { fail daemon-restart-old-index "see log"; finish; }
check old-index-1001 1001 no
check old-index-1000 1000 yes
finish
