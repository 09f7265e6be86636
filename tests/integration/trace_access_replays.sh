#!/usr/bin/env bash
# `warden trace show RUN` and `warden trace html RUN` through wardend read
# RUN and nothing else: its replays are found from the index
# (/v1/trace/runs?replay_of=RUN), not by reading every other readable run's
# records, each of which would be a payload read recorded in that run (and
# O(all runs)). An auditor who views one run leaves exactly one records
# read in it (show) and none in any other run; replay links still show
# both ways, by the index alone (with --state too).
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-replays "needs root"; finish; }

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
base_policy
cat >"$POL/users.yaml" <<'Y'
users:
  root:  {uid: 0, groups: [admin]}
  alice: {uid: 1000, groups: [eng]}
  dave:  {uid: 1003, groups: [auditors]}
groups:
  admin: {scopes: ["*"]}
  eng: {scopes: ["test:*"]}
  auditors: {scopes: []}
approvers:
  users: []
  groups: []
Y
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "final: {{result.stdout}}"}
S
agent one once '[echo]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

# the auditor's reads in a run (the test's own root polling of run views
# is recorded too, and is not what is counted)
reads_in() { run_records "$1" | jq_py "len([r for r in d if r['type']=='payload_read' and r.get('reader')=='dave'])"; }
ids=()
for i in 1 2 3 4; do
	id=$(as_user 1000 "$WARDEN" run --detach one "secret-$i-$$")
	wait_until 30 run_done "$id" || fail replays-run "run $id did not finish"
	ids+=("$id")
done
orig=${ids[0]}
out=$(as_user 1000 "$WARDEN" replay "$orig" --from 0 --determinism recorded-model 2>&1)
rid=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
[ -n "$rid" ] || { fail replays-replay "no replay: $out"; finish; }
wait_until 30 run_done "$rid" || fail replays-replay-done "replay $rid did not finish"
all=("${ids[@]}" "$rid")
for id in "${all[@]}"; do
	expect_eq "replays-none-before-$id" "$(reads_in "$id")" 0
done

# the auditor shows the original: one read in it, none elsewhere, the
# replay linked
out=$(as_user 1003 "$WARDEN" trace show "$orig" 2>&1)
expect_match replays-show-links-replay "$out" "replayed by $rid from step 0: converged"
expect_eq replays-show-one-read "$(reads_in "$orig")" 1
for id in "${all[@]:1}"; do
	expect_eq "replays-show-no-read-in-$id" "$(reads_in "$id")" 0
done
# the replay shows its original (from its own run_start)
out=$(as_user 1003 "$WARDEN" trace show "$rid" 2>&1)
expect_match replays-show-links-original "$out" "replay of $orig from step 0"
expect_eq replays-show-replay-one-read "$(reads_in "$rid")" 1
expect_eq replays-show-replay-no-read-in-orig "$(reads_in "$orig")" 1

# the HTML of the original: reads in the original only, replay linked
before=$(reads_in "$orig")
as_user 1003 "$WARDEN" trace html "$orig" -o - >"$T/orig.html" 2>"$T/orig.err"
expect_match replays-html-links-replay "$(cat "$T/orig.html")" "replayed by <a href=\"$rid.html\">$rid</a> from step 0: converged"
if [ "$(reads_in "$orig")" -gt "$before" ]; then pass replays-html-read-recorded
else fail replays-html-read-recorded "no payload_read in $orig"; fi
for id in "${ids[@]:1}"; do
	expect_eq "replays-html-no-read-in-$id" "$(reads_in "$id")" 0
done
expect_eq replays-html-no-read-in-replay "$(reads_in "$rid")" 1

# the filter itself: only /v1/trace/runs takes it; readers see only the
# replays they may read
expect_match replays-api-filter "$(as_user 1003 curl -s --unix-socket "$SOCK" "http://w/v1/trace/runs?replay_of=$orig")" "\"run_id\": *\"$rid\""
expect_eq replays-api-filter-only "$(as_user 1003 curl -s --unix-socket "$SOCK" "http://w/v1/trace/runs?replay_of=$orig" | jq_py 'len(d["runs"])')" 1
expect_eq replays-api-records-refuse "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" "http://w/v1/trace/records?replay_of=$orig")" 400
# --state: the same links from the index
expect_match replays-state-links "$("$WARDEN" trace show --state "$T/state" "$orig")" "replayed by $rid from step 0: converged"

# an index of the previous format (no replay columns) is rebuilt from the
# segments at open, the links with it
stop_daemon
python3 - "$T/state/trace/index.db" <<'P'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("DROP INDEX IF EXISTS runs_replay")
for col in ("replay_of", "replay_from", "replay_converged", "replay_diverged_at", "reason"):
    c.execute("ALTER TABLE runs DROP COLUMN " + col)
c.execute("PRAGMA user_version = 4")
c.commit()
P
start_daemon || { fail daemon-restart-old-index "see log"; finish; }
expect_match replays-old-index-rebuilt "$(as_user 1003 "$WARDEN" trace show "$orig" 2>&1)" "replayed by $rid from step 0: converged"
stop_daemon
finish
