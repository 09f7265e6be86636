#!/usr/bin/env bash
# network.listen lets a call bind ports; two UDP sockets that both set
# SO_REUSEADDR share a port whoever owns them, and the later one takes the
# unicast datagrams: a call could take a host service's (or another
# call's). The egress bind program refuses a datagram socket with
# SO_REUSEADDR to such a call. The attack runs INSIDE the sandbox (bind
# the service's port with SO_REUSEADDR, print what arrives); the verdict
# comes from outside: the host service, a python UDP server with
# SO_REUSEADDR on 127.0.0.1, still receives the datagrams a host client
# sends, the tool received none, the bind was refused with EPERM and the
# denial names the socket option. Controls: the same call binds another
# UDP port without the option, and a TCP socket with it (listen holds).
# Tiers 1 and 2. On the build with the hole the tool printed the payload
# and the service received nothing.
. tests/lib.sh
set -u
T=$(mktemp -d /var/tmp/warden-udpreuse.XXXXXX)
chmod 755 "$T"
export WARDEN_RUNTIME_DIR=$T/rt WARDEN_UID_DIR=$T/uids
mkdir -m 711 "$T/rt"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cat >"$T/tool.py" <<'PY'
import socket, sys, time
port, other = int(sys.argv[1]), int(sys.argv[2])
def try_bind(kind, p, reuse):
    s = socket.socket(socket.AF_INET, kind)
    if reuse:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", p))
        return s, "bound"
    except OSError as e:
        return None, "refused errno=%d" % e.errno
s, r = try_bind(socket.SOCK_DGRAM, port, True)
print("hijack:", r, flush=True)
if s:
    s.settimeout(3)
    try:
        m, _ = s.recvfrom(100)
        print("got:", m.decode(), flush=True)
    except socket.timeout:
        print("got: nothing", flush=True)
_, r = try_bind(socket.SOCK_DGRAM, other, False)
print("udp-other:", r)
t, r = try_bind(socket.SOCK_STREAM, other, True)
print("tcp-reuseaddr:", r)
PY

for tier in 1 2; do
	P=$(free_port) O=$(free_port)
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
open(sys.argv[2], "w").write("ok")
n = 0
while True:
    s.recvfrom(100); n += 1
    open(sys.argv[3], "w").write(str(n))' "$P" "$T/svc$tier.ready" "$T/svc$tier.n" &
	PIDS+=($!)
	for _ in $(seq 100); do [ -s "$T/svc$tier.ready" ] && break; sleep 0.05; done
	cat >"$T/t$tier.yaml" <<Y
name: udpreuse
tier: $tier
timeout_ms: 20000
network: {allow: ["127.0.0.1:9"], listen: true}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "$T"], exec: ["/usr/bin"]}
Y
	"$WARDEN" exec --policy "$T/t$tier.yaml" --json -- /usr/bin/python3 "$T/tool.py" "$P" "$O" >"$T/out$tier.json" 2>/dev/null &
	W=$!
	sleep 1 # the tool has bound (or been refused) by now
	python3 -c '
import socket, sys
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3): c.sendto(b"host-datagram", ("127.0.0.1", int(sys.argv[1])))' "$P"
	wait $W
	out=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("stdout",""))' "$T/out$tier.json" 2>/dev/null)
	den=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])).get("denials",[])))' "$T/out$tier.json" 2>/dev/null)
	expect_match "t$tier/udp-reuseaddr-bind-refused" "$out" 'hijack: refused errno=1$'
	case $out in *"got: host-datagram"*) fail "t$tier/tool-got-nothing" "the tool took the service's datagram" ;;
	*) pass "t$tier/tool-got-nothing" ;; esac
	sleep 0.2
	expect_eq "t$tier/service-still-receives" "$(cat "$T/svc$tier.n" 2>/dev/null)" 3
	expect_match "t$tier/denial-names-option" "$den" "bind.*127.0.0.1:$P \\(udp, SO_REUSEADDR\\)"
	expect_match "t$tier/listen-still-binds-udp" "$out" 'udp-other: bound'
	expect_match "t$tier/listen-still-binds-tcp-reuseaddr" "$out" 'tcp-reuseaddr: bound'
done
finish
