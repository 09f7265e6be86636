#!/usr/bin/env bash
# Replay of the recorded prefix of a 30-step run, measured now on this
# machine (nothing asserted; the goal is a 29-step prefix in <= 50 ms,
# independent of the original's model latency): the original is a 30-step
# run of the scripted model with one tier-1 call per step, then `warden replay --from 29` rebuilds steps 0..28 from the record. The
# daemon's own figure (prefix_us: blobs read and hash checked, conversation
# rebuilt and hashed at every step, replay_step records) and the CLI's wall
# time for the whole request are printed next to the original's wall time.
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { echo "bench_replay: needs root"; exit 0; }
export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"

base_policy
script loop30 <<'S'
{"step": 30, "text": "done"}
{"tool_calls": [{"name": "echo", "arguments": {"n": "{{step}}"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}
S
agent loop30 loop30 '[echo]' 60
write_gateway
start_daemon || exit 1
id=$(as_user 1000 "$WARDEN" run --detach loop30 go)
wait_until 60 run_done "$id" || { echo "original did not finish"; exit 1; }
wall=$(run_records "$id" | jq_py '(__import__("datetime").datetime.fromisoformat(d[-1]["ts"].replace("Z","+00:00"))-__import__("datetime").datetime.fromisoformat(d[0]["ts"].replace("Z","+00:00"))).total_seconds()*1000')
best=
for i in 1 2 3 4 5; do
	t0=$(date +%s%N)
	out=$(as_user 1000 "$WARDEN" replay "$id" --from 29 --detach --json)
	t1=$(date +%s%N)
	pus=$(printf '%s' "$out" | jq_py 'd["prefix_us"]')
	cli_ms=$(((t1 - t0) / 1000000))
	[ -z "$best" ] || [ "$pus" -lt "$best" ] && best=$pus && best_cli=$cli_ms
done
printf 'original: 30 steps in %.1f ms wall\n' "$wall"
printf 'replay prefix (29 steps from the record): %.2f ms in the daemon (best of 5), %.3f ms per step; %d ms for the whole CLI request\n' \
	"$(echo "$best / 1000" | bc -l)" "$(echo "$best / 1000 / 29" | bc -l)" "$best_cli"
printf 'ratio prefix / original wall: %.3f (goal: 29-step prefix <= 50 ms)\n' "$(echo "$best / 1000 / $wall" | bc -l)"
stop_daemon
