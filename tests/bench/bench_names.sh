#!/usr/bin/env bash
# Egress by name: a TCP connect to an allowed name, resolution included,
# inside a tier-1 call (the query to the node's resolver address is sent to
# the call's resolver in-kernel, which asks upstream, pins the answer and
# replies) against the same program unconfined asking the same upstream
# directly. Both send one DNS query (UDP, as a resolver library does) and then
# connect to the answer; medians of N rounds, in one run. Goal (issue 14):
# <= 1.2x. Nothing is asserted.
[ "$(id -u)" -eq 0 ] || { echo "bench_names: needs root"; exit 0; }
BUILD=${BUILD:-build}
N=${NAMES_N:-400}
S=$(mktemp -d /tmp/warden-bench-names.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$S"' EXIT
echo '{"svc.test": [["A", "127.0.0.2", 300]]}' >"$S/zone.json"
python3 tests/integration/dns_lib/zone.py "$S/zone.port" "$S/zone.json" /dev/null &
PIDS+=($!)
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", 19300)); s.listen(512); open(sys.argv[1], "w").write("ok")
while True:
    c, _ = s.accept(); c.close()' "$S/listen.ready" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$S/zone.port" ] && [ -s "$S/listen.ready" ] && break; sleep 0.05; done
ZP=$(cat "$S/zone.port")
NS=$(awk '/^nameserver/{print $2; exit}' /etc/resolv.conf)
cat >"$S/probe.py" <<'PY'
import socket, struct, sys, time
server, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def query(i):
    hdr = struct.pack(">HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0)
    return hdr + b"\x03svc\x04test\x00" + struct.pack(">HH", 1, 1)
times = []
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(2)
for i in range(n):
    t0 = time.perf_counter_ns()
    u.sendto(query(i), (server, port)); m, _ = u.recvfrom(1500)
    addr = socket.inet_ntoa(m[-4:])
    c = socket.socket(); c.connect((addr, 19300)); c.close()
    times.append(time.perf_counter_ns() - t0)
times.sort()
print(times[len(times) // 2] / 1000.0)
PY
cat >"$S/t.yaml" <<Y
name: bench_names
tier: 1
timeout_ms: 60000
network: {allow: ["svc.test:19300"], allow_private: ["127.0.0.2/32"]}
filesystem: {read: ["/usr", "/etc", "/lib", "/lib64"], exec: ["/usr/bin"]}
Y
in=$("$BUILD/warden" exec --dns-upstream "127.0.0.1:$ZP" --policy "$S/t.yaml" \
	-- /usr/bin/python3 -c "$(cat "$S/probe.py")" "${NS:-127.0.0.53}" 53 "$N" 2>/dev/null)
out=$(python3 "$S/probe.py" 127.0.0.1 "$ZP" "$N")
python3 - "$in" "$out" "$N" <<'PY'
import sys
a, b, n = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    a, b = float(a), float(b)
    print("names connect-by-name (resolve + connect), median of %s: in a tier-1 call %.1f us, "
          "unconfined %.1f us -> %.2fx (goal <= 1.2x)" % (n, a, b, a / b))
except ValueError:
    print("names: no figure (in-call %r, unconfined %r)" % (a, b))
PY
