#!/usr/bin/env bash
# Daemon memory per run, measured now on this machine (nothing asserted):
# RSS of wardend (/proc/PID/status VmRSS, once settled) with 1,000 and
# 10,000 runs held at once, (a) active: queued behind 4 workers whose runs
# sit in a slow tool call, (b) suspended on an approval. Bytes per run =
# (RSS with N runs - RSS idle) / N, the two points side by side: a figure
# that does not grow from 1,000 to 10,000 is a per-run cost, not a leak.
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { echo "bench_daemon_mem: needs root"; exit 0; }
FLOOD="/usr/bin/python3 $ROOT_DIR/tests/integration/daemon_lib/flood.py"
N1=${MEM_N1:-1000} N2=${MEM_N2:-10000}
SLOW_MARK=3599.$$1 # the held runs' tool outlasts the bench (kill_slow_tools ends it)

base_policy
tool slow '["/usr/bin/sleep", "'"$SLOW_MARK"'"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:slow\"]}" "side_effects: none"
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: none" "approval: always"
sed -i 's/^timeout_ms: .*/timeout_ms: 3600000/' "$POL/tools/slow.yaml"
script slowpoke <<'S'
{"step": 0, "tool_calls": [{"name": "slow", "arguments": {}}]}
{"text": "done"}
S
script gate <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {}}]}
{"text": "done"}
S
agent slowpoke slowpoke '[slow]' 10 1000000 100000
agent gate gate '[gated]' 10 1000000 100000
write_gateway

rss() { awk '/^VmRSS:/{print $2}' "/proc/$WPID/status"; }
status_of() { api GET /v1/status | cut -d' ' -f2- | jq_py "$1"; }
held() { # KIND: runs held now
	if [ "$1" = active ]; then status_of 'd["runs"]["queued"] + d["runs"]["running"]'
	else status_of 'd["runs"]["awaiting_approval"]'; fi
}
wait_held() { # KIND N
	local end=$(($(date +%s) + 300))
	while [ "$(held "$1")" -lt "$2" ] && [ "$(date +%s)" -lt $end ]; do sleep 0.5; done
}

measure() { # KIND AGENT
	start_daemon --approval-ttl 86400 >/dev/null || { echo "wardend did not start"; return 1; }
	sleep 2
	local idle r1 r2 t
	idle=$(rss)
	t=$(as_user 1000 $FLOOD create "$SOCK" "$2" "$N1" 8)
	wait_held "$1" "$N1"; sleep 3
	r1=$(rss)
	as_user 1000 $FLOOD create "$SOCK" "$2" $((N2 - N1)) 8 >/dev/null
	wait_held "$1" "$N2"; sleep 3
	r2=$(rss)
	printf '%-10s idle %6d kB   %6d runs: %6d kB = %5d B/run   %6d runs: %6d kB = %5d B/run   (%s)\n' \
		"$1" "$idle" "$N1" "$r1" $(((r1 - idle) * 1024 / N1)) "$N2" "$r2" $(((r2 - idle) * 1024 / N2)) "$t"
	kill9_daemon
	kill_slow_tools
	rm -rf "$T/state"; mkdir -p "$T/state"
}
echo "daemon RSS per run held (runs created by 8 clients; 4 workers)"
measure active slowpoke
measure suspended gate
