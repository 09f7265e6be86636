#!/usr/bin/env bash
# Latency from a real kernel denial to its line in `warden events --follow`
# (goal p99 <= 10 ms), measured now on this machine (nothing asserted):
# a real wardend, a tier-1 tool whose connect() to 127.0.0.1:9 the egress
# program denies, N runs one after another; a reader timestamps each line
# of `warden events --follow --json` as it arrives, against the event's own
# "ts" (the BPF timestamp of the denial, as wall clock).
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { echo "bench_events_follow: needs root"; exit 0; }
N=${FOLLOW_RUNS:-20}

base_policy
tool net '["/usr/bin/curl", "-sS", "--max-time", "3", "http://127.0.0.1:9/"]' "input: stdin" \
	"args_schema: {type: object}" "auth: {mode: on_behalf_of_user, scopes: [\"test:net\"]}" \
	"side_effects: none"
sed -i 's|read: \[|read: ["/etc/ssl", |' "$POL/tools/net.yaml"
script netter <<'S'
{"step": 0, "tool_calls": [{"name": "net", "arguments": {}}]}
{"text": "done"}
S
agent netter netter '[net]'
write_gateway
start_daemon || exit 1

# the follower: `warden events --follow --json`, every line with its
# arrival time (wall clock, ns); SIGTERM ends it and its child
since=$(curl -s --unix-socket "$SOCK" 'http://w/v1/events' |
	grep -o '"seq":[0-9]*' | tail -1 | cut -d: -f2)
python3 -u -c '
import signal, subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)
signal.signal(signal.SIGTERM, lambda *a: (p.terminate(), sys.exit(0)))
for line in p.stdout:
    print(time.time_ns(), line, end="", flush=True)' \
	"$WARDEN" events --follow --json --since "${since:-0}" >"$T/follow.log" &
FPID=$!
sleep 0.5
t0=$(date +%s%N)
for i in $(seq "$N"); do as_user 1000 "$WARDEN" run netter "go $i" >/dev/null 2>&1; done
t1=$(date +%s%N)
sleep 0.5
kill "$FPID" 2>/dev/null
wait "$FPID" 2>/dev/null
python3 - "$T/follow.log" "$N" "$(((t1 - t0) / N / 1000000))" "$(cut -d' ' -f1 /proc/loadavg)" <<'P'
import json, sys, datetime
lat = []
for l in open(sys.argv[1]):
    arr, _, js = l.partition(" ")
    try:
        o = json.loads(js)
    except ValueError:
        continue
    if o.get("type") != "event" or o.get("kind") != "connect":
        continue
    ts = datetime.datetime.strptime(o["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    ts = ts.replace(tzinfo=datetime.timezone.utc)
    ns = int(ts.timestamp()) * 10**9 + ts.microsecond * 1000
    lat.append((int(arr) - ns) / 1e6)
lat.sort()
n = len(lat)
if not n:
    print("events follow: no denial line arrived (%s runs)" % sys.argv[2])
    sys.exit(0)
p = lambda q: lat[min(n - 1, int(n * q))]
print("events follow (real denial -> `warden events --follow` line): %d lines of %s runs, "
      "p50=%.1fms p99=%.1fms max=%.1fms; a run takes %s ms; load=%s" %
      (n, sys.argv[2], p(0.5), p(0.99), lat[-1], sys.argv[3], sys.argv[4]))
print("events_follow_p99_vs_goal %.2f (goal p99 <= 10 ms)" % (p(0.99) / 10))
P
stop_daemon
