#!/usr/bin/env bash
# `warden trace failures`: on a store written from the documented format
# (trace_lib/store.py): 400 runs of one agent whose tool fails with the
# same bytes are one group of 400 (and their failed runs one group of 400
# by end reason), 3 with another result a group of 3, ok runs in none;
# --agent leaves out another agent's 7 identical failures, --since leaves
# out results and runs that ended before it. Real runs through wardend:
# trace_failures_real.sh.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh

S=$(mktemp -d /tmp/wd-trace-failures.XXXXXX)
trap 'rm -rf "$S"' EXIT
python3 tests/integration/trace_lib/store.py "$S" failures >/dev/null || { fail trace-failures-store "store writer failed"; finish; }
F() { "$WARDEN" trace failures --state "$S" "$@"; }
J() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

out=$(F --agent deployer --since 7d 2>&1)
echo "$out" | head -12
expect_match trace-failures-400 "$out" '^ +400 +400  deploy +error +sha256:'
expect_match trace-failures-3 "$out" $'\n +3 +3  deploy +error'
expect_match trace-failures-runs-400 "$out" $'\n +400  tool deploy failed: psql'
expect_match trace-failures-examples "$out" 'run-f0000@0 run-f0001@0 run-f0002@0'

j=$(F --agent deployer --json)
expect_eq trace-failures-json "$(printf '%s' "$j" | J '[(g["count"], g["runs"], g["tool"]) for g in d["tool_failures"]], [g["count"] for g in d["failed_runs"]], d["runs"]')" \
	"[(400, 400, 'deploy'), (3, 3, 'deploy')] [400, 3] 408"
j=$(F --json)
expect_eq trace-failures-all-agents "$(printf '%s' "$j" | J '[g["count"] for g in d["tool_failures"]]')" "[407, 3]"
j=$(F --since 30m --json)
expect_eq trace-failures-since "$(printf '%s' "$j" | J 'd["runs"], d["tool_failures"]')" "0 []"
expect_eq trace-failures-usage "$(F extra >/dev/null 2>&1; echo $?)" 2
finish
