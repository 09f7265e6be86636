#!/usr/bin/env bash
# IPv4 options past the allow-list: a source route (IP_OPTIONS with LSRR,
# set by setsockopt or per send as an IP_RETOPTS control message) would
# send a packet to the route's first hop, not the destination the cgroup
# hooks judged. The kernel refuses source routes to a process without
# CAP_NET_RAW (EPERM), and a tool has no capabilities: this guards that
# fact. From inside tiers 1 and 2, with 127.0.0.2:PORT allowed: UDP (both
# ways) and TCP to it with a source route through 127.0.0.3. Judged
# outside by a packet socket on lo counting every IPv4 packet that carries
# options: none may leave.
. tests/lib.sh
[ "$(id -u)" -eq 0 ] || { skip ipopts "needs root"; finish; }
S=$(mktemp -d /tmp/warden-ipopts.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$S"' EXIT
chmod 755 "$S"
# outside: count IPv4 packets with options on lo (IHL > 5)
python3 - "$S" <<'PY' &
import socket, sys
d = sys.argv[1]
s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
s.bind(("lo", 0))
open(d + "/cap.ready", "w").write("ok")
while True:
    pkt = s.recv(65535)
    if pkt and (pkt[0] & 0x0F) > 5:
        open(d + "/optpkts", "a").write("%s\n" % socket.inet_ntoa(pkt[16:20]))
PY
PIDS+=($!)
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", 19400)); s.listen(8)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.2", 19400))
open(sys.argv[1] + "/listen.ready", "w").write("ok")
import time; time.sleep(600)' "$S" &
PIDS+=($!)
for _ in $(seq 100); do [ -f "$S/cap.ready" ] && [ -f "$S/listen.ready" ] && break; sleep 0.05; done

cat >"$S/probe.py" <<'PY'
import socket, struct
HOP = socket.inet_aton("127.0.0.3")
LSRR = bytes([0x83, 7, 4]) + HOP + b"\x00"  # loose source route, 1 hop
def udp_sockopt():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, LSRR)
        s.sendto(b"exfil", ("127.0.0.2", 19400)); return "sent"
    except OSError as e:
        return "error %d" % e.errno
def udp_cmsg():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendmsg([b"exfil"], [(socket.IPPROTO_IP, 7, LSRR)], 0, ("127.0.0.2", 19400))  # IP_RETOPTS
        return "sent"
    except OSError as e:
        return "error %d" % e.errno
def tcp_sockopt():
    s = socket.socket(); s.settimeout(2)
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, LSRR)
        s.connect(("127.0.0.2", 19400)); return "connected"
    except OSError as e:
        return "error %s" % (e.errno,)
def plain():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"ok", ("127.0.0.2", 19400)); return "sent"
    except OSError as e:
        return "error %d" % e.errno
for f in (udp_sockopt, udp_cmsg, tcp_sockopt, plain):
    print("%s: %s" % (f.__name__, f()))
PY
for tier in 1 2; do
	cat >"$S/t$tier.yaml" <<Y
name: ipopts$tier
tier: $tier
timeout_ms: 20000
network: {allow: ["127.0.0.2:19400"]}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], exec: ["/usr/bin"]}
Y
	rm -f "$S/optpkts"
	out=$("$WARDEN" exec --json --policy "$S/t$tier.yaml" -- /usr/bin/python3 -c "$(cat "$S/probe.py")" 2>/dev/null)
	so=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["stdout"])')
	line() { printf '%s\n' "$so" | sed -n "s/^$1: //p"; }
	expect_eq "t$tier-udp-sockopt-refused" "$(line udp_sockopt)" "error 1"
	expect_eq "t$tier-udp-cmsg-refused" "$(line udp_cmsg)" "error 1"
	expect_match "t$tier-tcp-sockopt-refused" "$(line tcp_sockopt)" '^error'
	expect_eq "t$tier-plain-still-allowed" "$(line plain)" sent
	sleep 0.3
	expect_eq "t$tier-no-option-packet-left" "$(cat "$S/optpkts" 2>/dev/null | sort -u | tr '\n' ' ')" ""
done
finish
