#!/usr/bin/env bash
# /v1/cost (`warden cost`) follows the read rule of the run views: a user
# sees the cost of the runs they may read (their own, their team's), an
# auditor and root all of them; the runs of another team are not counted,
# neither ended runs (from the index) nor live ones.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-cost "needs root"; finish; }

base_policy
team_users ""
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "done"}
S
agent one once '[echo]'
agent other once '[echo]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

a=$(as_user 1000 "$WARDEN" run --detach one go)
c=$(as_user 1002 "$WARDEN" run --detach other go)
wait_until 30 run_done "$a" || fail cost-run-a "run $a did not finish"
wait_until 30 run_done "$c" || fail cost-run-c "run $c did not finish"

teams() { # UID BY: the groups' keys /v1/cost answers that user
	as_user "$1" curl -s --unix-socket "$SOCK" "http://w/v1/cost?by=$2" |
		jq_py "sorted(g['$2'] for g in d['groups'])"
}
expect_eq cost-own-user "$(teams 1000 team)" '["team-one"]'
expect_eq cost-own-by-user "$(teams 1000 user)" '["alice"]'
expect_eq cost-other-user "$(teams 1002 team)" '["team-other"]'
expect_eq cost-team-member "$(teams 1001 team)" '["team-one"]'
expect_eq cost-auditor "$(teams 1003 team)" '["team-one","team-other"]'
expect_eq cost-root "$(teams 0 team)" '["team-one","team-other"]'
expect_eq cost-unlisted "$(teams 1009 team)" "[]"
# the total is of the runs shown
t1=$(as_user 1000 curl -s --unix-socket "$SOCK" "http://w/v1/cost" | jq_py 'd["total_usd"]')
t0=$(curl -s --unix-socket "$SOCK" "http://w/v1/cost" | jq_py 'd["total_usd"]')
if python3 -c "import sys; sys.exit(0 if 0 < $t1 < $t0 else 1)"; then pass cost-total-filtered
else fail cost-total-filtered "alice $t1, root $t0"; fi
# the CLI, as carol
out=$(as_user 1002 "$WARDEN" cost 2>&1)
expect_match cost-cli-own "$out" "team-other"
if printf '%s' "$out" | grep -q "team-one"; then fail cost-cli-not-other-team "$out"; else pass cost-cli-not-other-team; fi
finish
