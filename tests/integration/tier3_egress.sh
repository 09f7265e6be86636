#!/usr/bin/env bash
# Tier 3 (gVisor) with a non-empty network.allow: one allowed loopback
# listener on the host is reachable, everything else is denied. The probes
# run inside the sandbox; every verdict is judged outside it: host
# listeners log each connection or datagram they get (a wildcard listener
# on 0.0.0.0 would take anything the host end let through to any node
# address), and the call's denials are the host-side program's records.
# How the sandbox reaches the node (sandbox/gvisor_net.c): its gateway is
# the host end of its link and stands for the node's 127.0.0.1.
. "$(dirname "$0")/../lib.sh"
command -v runsc >/dev/null || { skip tier3-egress "runsc not installed (Debian package runsc)"; finish; }
[ "$(id -u)" = 0 ] || { skip tier3-egress "needs root"; finish; }
command -v jq >/dev/null || { skip tier3-egress "jq not installed"; finish; }

T=$(mktemp -d /tmp/warden-t3e.XXXXXX)
chmod 755 "$T"
HOSTIP=$(ip -4 -o addr show scope global 2>/dev/null | awk '$2 !~ /^w3h/ {split($4, a, "/"); print a[1]; exit}')
cleanup() { [ -n "${LPID:-}" ] && kill "$LPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
# free ports: A allowed, B another on loopback, C on every address, U UDP
read -r A B C U < <(python3 -c '
import socket
ps = []
for t in (socket.SOCK_STREAM,) * 3 + (socket.SOCK_DGRAM,):
    s = socket.socket(socket.AF_INET, t); s.bind(("127.0.0.1", 0)); ps.append(s)
print(*[s.getsockname()[1] for s in ps])')
python3 - "$T" "$A" "$B" "$C" "$U" <<'PY' &
import socket, sys, threading
d, A, B, C, U = sys.argv[1], *map(int, sys.argv[2:])
def tcp(addr, port, tag):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(16)
    def loop():
        while True:
            c, _ = s.accept(); open(d + "/hits", "a").write(tag + "\n")
            c.sendall(b"hello"); c.close()
    threading.Thread(target=loop, daemon=True).start()
def udp(addr, port, tag):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, port))
    def loop():
        while True:
            s.recvfrom(4096); open(d + "/hits", "a").write(tag + "\n")
    threading.Thread(target=loop, daemon=True).start()
tcp("127.0.0.1", A, "A"); tcp("127.0.0.1", B, "B"); tcp("0.0.0.0", C, "C")
udp("0.0.0.0", U, "U")
open(d + "/ready", "w").write("ok")
threading.Event().wait()
PY
LPID=$!
for _ in $(seq 100); do [ -f "$T/ready" ] && break; sleep 0.05; done
: >"$T/hits"

cat >"$T/p.yaml" <<Y
name: t3egress
description: tier 3 with one allowed loopback listener
tier: 3
exec: ["/usr/bin/python3", "-"]
input: stdin
timeout_ms: 30000
memory_mb: 256
pids: 32
network: {allow: ["127.0.0.1:$A"]}
filesystem: {read: ["/usr/lib/python3", "/usr/lib/python3.11", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/etc/ld.so.cache"], exec: ["/usr/bin/python3"]}
output: {max_bytes: 8192}
Y
cat >"$T/probe.py" <<PY
import socket, struct
A, B, C, U, hostip = $A, $B, $C, $U, "${HOSTIP:-}"
gw = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
def tcp(addr, port, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(3)
    try:
        s.connect((addr, port)); return "connected " + s.recv(5).decode()
    except Exception as e:
        return "error " + type(e).__name__
def udp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", (addr, port)); return "sent"
    except Exception as e:
        return "error " + type(e).__name__
def sock(*a):
    try:
        socket.socket(*a); return "created"
    except Exception as e:
        return "error " + type(e).__name__
print("allowed:", tcp(gw, A))
print("other-port:", tcp(gw, B))
print("wildcard-at-gw:", tcp(gw, C))
print("own-loopback:", tcp("127.0.0.1", A))
print("udp-gw:", udp(gw, U))
if hostip:
    print("host-address:", tcp(hostip, C))
    print("udp-host:", udp(hostip, U))
print("beyond-node:", tcp("198.51.100.9", 80))
print("v6-loopback:", tcp("::1", A, socket.AF_INET6))
print("raw:", sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))
print("packet:", sock(socket.AF_PACKET, socket.SOCK_RAW, 0))
print("allowed-again:", tcp(gw, A))
PY
"$WARDEN" exec --policy "$T/p.yaml" --json --stdin "$T/probe.py" >"$T/out.json" 2>"$T/err.txt"
rc=$?
expect_eq t3e_exit "$rc" 0
[ "$rc" = 0 ] || { head -c 1500 "$T/out.json"; cat "$T/err.txt"; }
so=$(jq -r .stdout "$T/out.json")
line() { printf '%s\n' "$so" | sed -n "s/^$1: //p"; }
expect_eq t3e_allowed_reached "$(line allowed)" "connected hello"
expect_eq t3e_allowed_again "$(line allowed-again)" "connected hello"
expect_match t3e_other_port_refused "$(line other-port)" 'error ConnectionRefusedError'
expect_match t3e_wildcard_at_gw_refused "$(line wildcard-at-gw)" 'error ConnectionRefusedError'
expect_match t3e_own_loopback_not_host "$(line own-loopback)" '^error'
expect_match t3e_beyond_node "$(line beyond-node)" '^error'
expect_match t3e_v6_loopback "$(line v6-loopback)" '^error'
expect_match t3e_raw_socket "$(line raw)" '^error'
expect_match t3e_packet_socket "$(line packet)" '^error'
if [ -n "$HOSTIP" ]; then
	expect_match t3e_host_address_refused "$(line host-address)" 'error ConnectionRefusedError'
else
	skip t3e_host_address "the node has no global IPv4 address"
fi
sleep 0.3 # a datagram let through would have landed by now
# outside: exactly the two allowed connections, nothing else anywhere
expect_eq t3e_listener_hits "$(sort "$T/hits" | tr '\n' ' ')" "A A "
den=$(jq -r '.denials[] | "\(.source) \(.kind) \(.target)"' "$T/out.json")
expect_match t3e_denial_other_port "$den" "bpf connect 127\.0\.0\.1:$B"
expect_match t3e_denial_wildcard "$den" "bpf connect 127\.0\.0\.1:$C"
expect_match t3e_denial_udp "$den" "bpf sendmsg 127\.0\.0\.1:$U"
expect_match t3e_denial_beyond "$den" "bpf connect 198\.51\.100\.9:80"
[ -z "$HOSTIP" ] || expect_match t3e_denial_host "$den" "bpf connect ${HOSTIP//./\\.}:$C"
expect_match t3e_enforcement "$(jq -r .enforcement.network "$T/out.json")" 'tc BPF allow-list'
expect_eq t3e_not_routed_beyond "$(jq -r .enforcement.network_beyond "$T/out.json")" "not routed: the node's own addresses only"
# the call's link is gone with it
# (the kernel deletes a call's pair with its netns, in the background)
links_left() { ip -o link show 2>/dev/null | grep -c ' w3h' || true; }
for _ in $(seq 50); do [ "$(links_left)" = 0 ] && break; sleep 0.1; done
expect_eq t3e_no_links_left "$(links_left)" 0

# inbound: nothing of the host reaches the sandbox but replies from its
# allowed peers. The sandbox waits on a UDP port (and tries to listen on
# TCP); the host finds the call's link (its host end w3h*, the sandbox at
# gw+1) and sends datagrams and SYNs there while it waits.
cat >"$T/in.py" <<'PY'
import socket, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 47001)); u.settimeout(0.2)
try:
    t = socket.socket(); t.bind(("0.0.0.0", 47002)); t.listen(4); t.settimeout(0.2); tl = "listening"
except Exception as e:
    t, tl = None, "error " + type(e).__name__
got = acc = 0
end = time.time() + 4
while time.time() < end:
    try:
        u.recvfrom(100); got += 1
    except socket.timeout:
        pass
    if t:
        try:
            t.accept(); acc += 1
        except socket.timeout:
            pass
print("udp-received:", got); print("tcp:", tl, "accepted", acc)
PY
"$WARDEN" exec --policy "$T/p.yaml" --json --stdin "$T/in.py" >"$T/in.json" 2>"$T/err.txt" &
EPID=$!
gw=""
for _ in $(seq 100); do
	gw=$(ip -4 -o addr show 2>/dev/null | awk '$2 ~ /^w3h/ {split($4, a, "/"); print a[1]; exit}')
	[ -n "$gw" ] && break
	sleep 0.05
done
if [ -n "$gw" ]; then
	sbx=$(python3 -c "import ipaddress, sys; print(ipaddress.ip_address(sys.argv[1]) + 1)" "$gw")
	sleep 1.5 # the sandbox's program is up by now
	python3 - "$sbx" <<'PY'
import socket, sys, time
sbx = sys.argv[1]
for _ in range(20):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"in", (sbx, 47001)); u.close()
    t = socket.socket(); t.settimeout(0.1)
    try: t.connect((sbx, 47002))
    except Exception: pass
    t.close(); time.sleep(0.05)
PY
fi
wait "$EPID"
if [ -z "$gw" ]; then
	fail t3e_inbound "the call's link never appeared: $(cat "$T/err.txt")"
else
	expect_match t3e_inbound_udp_none "$(jq -r .stdout "$T/in.json")" 'udp-received: 0'
	expect_match t3e_inbound_tcp_none "$(jq -r .stdout "$T/in.json")" 'accepted 0'
fi

# fail closed: where the host-side programs cannot load (the kernel's BTF
# hidden, a fresh bpffs: nothing pinned to reuse, as exec_failclosed.sh
# does for tiers 1-2) the call is refused and nothing runs
: >"$T/hits"
if [ -e /sys/kernel/btf/vmlinux ]; then
	unshare -m --propagation private sh -c 'mount -t tmpfs none /sys/kernel/btf &&
		mount -t bpf bpf /sys/fs/bpf && exec "$0" exec --policy "$1" --stdin "$2"' \
		"$WARDEN" "$T/p.yaml" "$T/probe.py" >"$T/fc.out" 2>"$T/err.txt"
	expect_eq t3e_failclosed_exit "$?" 125
	expect_match t3e_failclosed_msg "$(cat "$T/err.txt")" 'egress'
	expect_eq t3e_failclosed_nothing_ran "$(cat "$T/fc.out")$(cat "$T/hits")" ""
else
	skip t3e_failclosed "no /sys/kernel/btf/vmlinux on this node"
fi

# a rule beyond a node that does not forward is refused at call start,
# never run unfiltered (where the node forwards: tier3_beyond.sh, in a
# node of its own)
if [ "$(cat /proc/sys/net/ipv4/ip_forward)" = 0 ]; then
	sed "s|\"127.0.0.1:$A\"|\"198.51.100.9:80\"|" "$T/p.yaml" >"$T/far.yaml"
	"$WARDEN" exec --policy "$T/far.yaml" --stdin "$T/probe.py" >/dev/null 2>"$T/err.txt"
	expect_eq t3e_beyond_node_rule_refused "$?" 125
	expect_match t3e_beyond_node_rule_msg "$(cat "$T/err.txt")" "'198\.51\.100\.9:80': beyond this node, and this node does not forward IPv4 \(net\.ipv4\.ip_forward=0\)"
else
	skip t3e_beyond_node_rule "this node forwards IPv4: a rule beyond it is routed (tier3_beyond.sh)"
fi
# an IPv6 rule: policy check names it
sed "s|\"127.0.0.1:$A\"|\"[::1]:$A\"|" "$T/p.yaml" >"$T/v6.yaml"
out=$("$WARDEN" policy check "$T/v6.yaml" 2>&1)
expect_eq t3e_v6_rule_policy_check "$?" 1
expect_match t3e_v6_rule_msg "$out" "v6.yaml:[0-9]+:[0-9]+: 'network.allow' '\[::1\]:$A': tier 3's link carries IPv4 only"
finish
