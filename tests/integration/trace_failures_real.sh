#!/usr/bin/env bash
# `warden trace failures` on REAL runs through wardend (not a hand-written
# store): 22 runs stopped by the same budget bound, each having used a
# different number of tokens (tasks of different lengths), are one group
# of failed runs ("token_budget reached (limit #, used #)"); broker
# refusals of one tool by two different checks (authz: the user lacks its
# scope; grant: the agent does not have it) are two groups, whatever the
# result hash they do not have. The command reads the index only: through
# wardend it leaves no payload_read in any run.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-failures-real "needs root"; finish; }

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
base_policy
tool guarded '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"ops:deploy\"]}" "side_effects: none"
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "final: {{result.stdout}}"}
S
script guard <<'S'
{"step": 0, "tool_calls": [{"name": "guarded", "arguments": {}}]}
{"text": "done"}
S
# token_budget 5: the first model call spends more, the run stops before
# its second
agent budget once '[echo]' 10 5
agent scoped guard '[guarded]'
agent ungranted guard '[echo]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

ids=()
for i in $(seq 1 22); do
	ids+=("$(as_user 1000 "$WARDEN" run --detach budget "$(head -c $((i * 40)) /dev/zero | tr '\0' x)")")
done
for i in 1 2 3; do ids+=("$(as_user 1000 "$WARDEN" run --detach scoped go)"); done
for i in 1 2; do ids+=("$(as_user 1000 "$WARDEN" run --detach ungranted go)"); done
for id in "${ids[@]}"; do wait_until 60 run_done "$id" || fail failures-real-run "run $id did not finish"; done

reasons=$(for id in "${ids[@]:0:22}"; do rec_of "$id" run_end | jq_py 'd.get("reason", "")'; done | sort -u)
nr=$(printf '%s\n' "$reasons" | grep -c 'token_budget reached')
[ "$nr" -ge 5 ] && pass failures-real-reasons-differ ||
	fail failures-real-reasons-differ "the runs' reasons are not different enough to test grouping: $reasons"

j=$(as_user 1000 "$WARDEN" trace failures --json 2>&1)
expect_eq failures-real-budget-one-group "$(printf '%s' "$j" | jq_py '[[g["count"], g["last_error"]] for g in d["failed_runs"]]')" \
	'[[22,"token_budget reached (limit #, used #)"]]'
expect_eq failures-real-refusals-by-check "$(printf '%s' "$j" | jq_py 'sorted([g["tool"], g.get("check"), g["count"]] for g in d["tool_failures"])')" \
	'[["guarded","authz",3],["guarded","grant",2]]'
out=$(as_user 1000 "$WARDEN" trace failures 2>&1)
expect_match failures-real-text-check "$out" 'guarded +denied +check authz'
expect_match failures-real-text-budget "$out" $'\n +22  token_budget reached \\(limit #, used #\\)'
# the index only: no run's records were read through wardend (alice's
# reads of her own runs' records are recorded; root's polling of the run
# views is not counted)
n=0
for id in "${ids[@]}"; do
	n=$((n + $(run_records "$id" | jq_py "len([r for r in d if r['type']=='payload_read' and r.get('reader')=='alice'])")))
done
expect_eq failures-real-no-reads "$n" 0
# --state: the same groups
j=$("$WARDEN" trace failures --state "$T/state" --json 2>&1)
expect_eq failures-real-state "$(printf '%s' "$j" | jq_py '[[g["count"] for g in d["failed_runs"]], len(d["tool_failures"])]')" '[[22],2]'
stop_daemon
finish
