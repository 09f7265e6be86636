#!/usr/bin/env bash
# Egress by name: a TCP connect to an allowed name, resolution included,
# inside a tier-1 call (the query to the node's resolver address is sent to
# the call's resolver in-kernel, which asks upstream, pins the answer and
# replies) against the same program unconfined asking the same upstream
# directly. Both send one DNS query (UDP, as a resolver library does) and then
# connect to the answer; medians of N rounds, in one run. Goal: <= 1.2x.
# Nothing is asserted.
# The baseline, printed with the figure: where the node's resolver is on
# loopback (systemd-resolved's 127.0.0.53, or a resolv.conf nameserver on
# 127.0.0.0/8) and answers `localhost`, the same program unconfined asks it
# for `localhost` and connects there; otherwise (a resolver off the node,
# which the call never reaches) the test zone asked directly.
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
s.bind(("127.0.0.2", 19300)); s.listen(512)
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", 19300)); t.listen(512)
import threading
def loop(l):
    while True:
        c, _ = l.accept(); c.close()
threading.Thread(target=loop, args=(t,), daemon=True).start()
open(sys.argv[1], "w").write("ok")
loop(s)' "$S/listen.ready" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$S/zone.port" ] && [ -s "$S/listen.ready" ] && break; sleep 0.05; done
ZP=$(cat "$S/zone.port")
NS=$(awk '/^nameserver/{print $2; exit}' /etc/resolv.conf)
cat >"$S/probe.py" <<'PY'
import socket, struct, sys, time
server, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
name = sys.argv[4] if len(sys.argv) > 4 else "svc.test"
qname = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
def query(i):
    hdr = struct.pack(">HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0)
    return hdr + qname + struct.pack(">HH", 1, 1)
times = []
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(2)
for i in range(n):
    t0 = time.perf_counter_ns()
    u.sendto(query(i), (server, port)); m, _ = u.recvfrom(1500)
    if m[3] & 0xF or not struct.unpack(">H", m[6:8])[0]:
        sys.exit("no answer for %s from %s:%d" % (name, server, port))
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
out=""
case ${NS:-none} in
127.*)
	out=$(python3 "$S/probe.py" "$NS" 53 "$N" localhost 2>/dev/null)
	base="the node's resolver $NS (on loopback) asked for localhost, unconfined"
	;;
esac
if [ -z "$out" ]; then
	out=$(python3 "$S/probe.py" 127.0.0.1 "$ZP" "$N")
	case ${NS:-none} in
	127.*) why="the node's resolver $NS does not answer localhost" ;;
	none) why="resolv.conf names no resolver" ;;
	*) why="the node's resolver $NS is not on loopback" ;;
	esac
	base="the test zone asked directly (127.0.0.1:$ZP), unconfined ($why)"
fi
python3 - "$in" "$out" "$N" "$base" <<'PY'
import sys
a, b, n, base = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
try:
    a, b = float(a), float(b)
    print("names connect-by-name (resolve + connect), median of %s: in a tier-1 call %.1f us, "
          "baseline %.1f us -> %.2fx (goal <= 1.2x); baseline: %s" % (n, a, b, a / b, base))
except ValueError:
    print("names: no figure (in-call %r, unconfined %r)" % (a, b))
PY
