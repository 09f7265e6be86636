#!/usr/bin/env bash
# Tier 3 beyond the node (sandbox/t3beyond.h): an allowed destination that
# is not an address of the node is reached through forwarding from the
# call's host end and source NAT, held by the same host-side tc program
# and allow map; everything else stays dropped and recorded. Where the
# node does not forward, such a rule is refused at call start.
#
# The "node" is a network namespace N of the test's own (net.ipv4.ip_forward
# set inside it, never in the host's), joined by a veth pair to a "remote"
# namespace R (10.231.0.1/29 in N; 10.231.0.2 and .3 in R). `warden exec`
# runs inside N (nsenter --net: the mount namespace, so the runtime dir,
# BPF pins and cgroups, stays the host's). Judged outside the sandbox: the
# listeners in R log each connection with its peer's address (N's
# 10.231.0.1 when the source was translated), the call's denials are the
# host-side program's and the resolver's records, and nft/ip in N show
# what the call left.
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || { skip tier3-beyond "needs root"; finish; }
command -v runsc >/dev/null || { skip tier3-beyond "runsc not installed (Debian package runsc)"; finish; }
command -v jq >/dev/null || { skip tier3-beyond "jq not installed"; finish; }
command -v nft >/dev/null || { skip tier3-beyond "nft not installed (Debian package nftables)"; finish; }
command -v nsenter >/dev/null || { skip tier3-beyond "nsenter not installed"; finish; }

T=$(mktemp -d /tmp/warden-t3b.XXXXXX)
chmod 755 "$T"
N=wdt3bN$$
R=wdt3bR$$
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	ip netns del "$N" 2>/dev/null
	ip netns del "$R" 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
inN() { nsenter --net="/run/netns/$N" "$@"; }
ip netns add "$N" && ip netns add "$R" || { fail t3b-setup "cannot make network namespaces"; finish; }
ip -n "$N" link set lo up
ip -n "$R" link set lo up
ip link add up0 netns "$N" type veth peer name dn0 netns "$R"
ip -n "$N" addr add 10.231.0.1/29 dev up0
ip -n "$R" addr add 10.231.0.2/29 dev dn0
ip -n "$R" addr add 10.231.0.3/29 dev dn0
ip -n "$N" link set up0 up
ip -n "$R" link set dn0 up
fwd() { inN sh -c "echo $1 >/proc/sys/net/ipv4/ip_forward"; }
fwd 1

OK=18080 NO=18081
: >"$T/hits"
# R: TCP OK and NO on every address (each connection logged with the
# address it came from and the one it reached), a resolver's ports 53
nsenter --net="/run/netns/$R" python3 - "$T" "$OK" "$NO" <<'PY' &
import socket, sys, threading
d, OK, NO = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def log(s):
    open(d + "/hits", "a").write(s + "\n")
def tcp(port, tag):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(16)
    def loop():
        while True:
            c, peer = s.accept(); log("%s %s>%s" % (tag, peer[0], c.getsockname()[0]))
            c.sendall(b"hello"); c.close()
    threading.Thread(target=loop, daemon=True).start()
def udp(port, tag):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", port))
    def loop():
        while True:
            _, peer = s.recvfrom(4096); log("%s %s" % (tag, peer[0]))
    threading.Thread(target=loop, daemon=True).start()
tcp(OK, "ok"); tcp(NO, "no"); tcp(53, "dns/tcp"); udp(53, "dns/udp")
open(d + "/ready", "w").write("ok")
threading.Event().wait()
PY
PIDS+=($!)
# N: the resolver's upstream, the test zone on N's loopback
cat >"$T/zone.json" <<'Z'
{"mirror.test": [["A", "10.231.0.2", 30]]}
Z
nsenter --net="/run/netns/$N" python3 tests/integration/dns_lib/zone.py "$T/zone.port" "$T/zone.json" "$T/zone.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -f "$T/ready" ] && [ -s "$T/zone.port" ] && break; sleep 0.05; done
ZP=$(cat "$T/zone.port" 2>/dev/null)
[ -f "$T/ready" ] && [ -n "$ZP" ] || { fail t3b-setup "listeners did not start"; finish; }

policy() { # FILE ALLOW...
	local f=$1
	shift
	local allow
	allow=$(printf '"%s", ' "$@")
	cat >"$f" <<Y
name: t3beyond
description: tier 3 reaching one listener beyond the node
tier: 3
exec: ["/usr/bin/python3", "-"]
input: stdin
timeout_ms: 30000
memory_mb: 256
pids: 32
network: {allow: [${allow%, }], allow_private: ["10.231.0.0/29"]}
filesystem: {read: ["/usr/lib/python3", "/usr/lib/python3.11", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/etc/ld.so.cache"], exec: ["/usr/bin/python3"]}
output: {max_bytes: 8192}
Y
}
cat >"$T/probe.py" <<PY
import socket, struct
OK, NO = $OK, $NO
def tcp(addr, port):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((addr, port)); return "connected " + s.recv(5).decode()
    except Exception as e:
        return "error " + type(e).__name__
def q(name):
    hdr = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    body = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    return hdr + body + struct.pack(">HH", 1, 1)
def udp53(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    try:
        s.sendto(q("mirror.test"), (addr, 53)); s.recvfrom(512); return "answered"
    except Exception as e:
        return "error " + type(e).__name__
def resolve(name):
    try:
        return socket.getaddrinfo(name, 0, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except Exception as e:
        return "error " + type(e).__name__
for what in "@WHAT@".split():
    if what == "ip":
        print("allowed:", tcp("10.231.0.2", OK))
        print("other-port:", tcp("10.231.0.2", NO))
        print("other-address:", tcp("10.231.0.3", OK))
        print("node-address:", tcp("10.231.0.1", OK))
        print("dns-udp-remote:", udp53("10.231.0.2"))
        print("dns-tcp-remote:", tcp("10.231.0.2", 53))
        print("allowed-again:", tcp("10.231.0.2", OK))
    if what == "name":
        a = resolve("mirror.test"); print("resolve:", a)
        print("by-name:", tcp(a, OK) if not a.startswith("error") else a)
        print("by-name-other-port:", tcp("10.231.0.2", NO))
PY
run() { # POLICY WHAT OUT: the probes WHAT (ip, name) in a call inside N
	sed "s/@WHAT@/$2/" "$T/probe.py" >"$T/in.py"
	inN "$WARDEN" exec --policy "$1" --json --dns-upstream "127.0.0.1:$ZP" \
		--stdin "$T/in.py" >"$3" 2>"$T/err.txt"
}
links_left() { inN ip -o link show 2>/dev/null | grep -c ' w3h' || true; }
tables_left() { inN nft list tables 2>/dev/null | grep -c 'warden_w3h' || true; }

# 1. an IP rule beyond the node, the node forwarding. A table left by a
# supervisor that died (its link gone) is removed by the next call that
# makes one; another table of the node is not touched.
inN nft add table ip warden_w3hdead000000
inN nft add table ip warden_keep
policy "$T/ip.yaml" "10.231.0.2:$OK"
run "$T/ip.yaml" ip "$T/ip.json"
rc=$?
expect_eq t3b_ip_exit "$rc" 0
[ "$rc" = 0 ] || { head -c 1500 "$T/ip.json"; cat "$T/err.txt"; }
so=$(jq -r .stdout "$T/ip.json")
line() { printf '%s\n' "$so" | sed -n "s/^$1: //p"; }
expect_eq t3b_allowed_reached "$(line allowed)" "connected hello"
expect_eq t3b_allowed_again "$(line allowed-again)" "connected hello"
expect_match t3b_other_port_refused "$(line other-port)" 'error ConnectionRefusedError'
expect_match t3b_other_address_refused "$(line other-address)" 'error ConnectionRefusedError'
expect_match t3b_node_address_refused "$(line node-address)" 'error ConnectionRefusedError'
expect_match t3b_dns_udp_remote_none "$(line dns-udp-remote)" '^error'
expect_match t3b_dns_tcp_remote_refused "$(line dns-tcp-remote)" 'error ConnectionRefusedError'
sleep 0.3 # a datagram let through would have landed by now
# outside: R saw the two allowed connections only, from N's address
# (translated: the sandbox's 169.254.X.Y never left the node)
expect_eq t3b_remote_hits "$(sort "$T/hits" | tr '\n' ' ')" "ok 10.231.0.1>10.231.0.2 ok 10.231.0.1>10.231.0.2 "
den=$(jq -r '.denials[] | "\(.source) \(.kind) \(.target)"' "$T/ip.json")
expect_match t3b_denial_other_port "$den" "bpf connect 10\.231\.0\.2:$NO"
expect_match t3b_denial_other_address "$den" "bpf connect 10\.231\.0\.3:$OK"
expect_match t3b_denial_node_address "$den" "bpf connect 10\.231\.0\.1:$OK"
expect_match t3b_denial_dns_udp "$den" "bpf sendmsg 10\.231\.0\.2:53"
expect_match t3b_denial_dns_tcp "$den" "bpf connect 10\.231\.0\.2:53"
expect_match t3b_enforcement "$(jq -r .enforcement.network_beyond "$T/ip.json")" '^forwarded from w3h[0-9a-f]+, source NAT \(nftables table warden_w3h'
# nothing of the call is left in N: its table, its link
for _ in $(seq 50); do [ "$(links_left)" = 0 ] && break; sleep 0.1; done
expect_eq t3b_no_links_left "$(links_left)" 0
expect_eq t3b_no_table_left "$(tables_left)" 0
expect_eq t3b_other_table_kept "$(inN nft list tables)" "table ip warden_keep"
inN nft delete table ip warden_keep

# 2. a name whose answer is beyond the node: given, pinned, reached on
# its port only (forwarding and NAT turned on at the answer)
: >"$T/hits"
: >"$T/zone.log"
policy "$T/name.yaml" "mirror.test:$OK"
run "$T/name.yaml" name "$T/name.json"
rc=$?
expect_eq t3b_name_exit "$rc" 0
[ "$rc" = 0 ] || { head -c 1500 "$T/name.json"; cat "$T/err.txt"; }
so=$(jq -r .stdout "$T/name.json")
expect_eq t3b_name_resolved "$(line resolve)" 10.231.0.2
expect_eq t3b_name_reached "$(line by-name)" "connected hello"
expect_match t3b_name_other_port_refused "$(line by-name-other-port)" 'error ConnectionRefusedError'
sleep 0.3
expect_eq t3b_name_remote_hits "$(sort "$T/hits" | tr '\n' ' ')" "ok 10.231.0.1>10.231.0.2 "
den=$(jq -r '.denials[] | "\(.source) \(.kind) \(.target)"' "$T/name.json")
expect_match t3b_name_enforcement "$(jq -r .enforcement.network_beyond "$T/name.json")" '^forwarded from w3h'
expect_match t3b_name_denial_other_port "$den" "bpf connect mirror\.test:$NO \(10\.231\.0\.2\)"
for _ in $(seq 50); do [ "$(links_left)" = 0 ] && break; sleep 0.1; done
expect_eq t3b_name_no_links_left "$(links_left)" 0
expect_eq t3b_name_no_table_left "$(tables_left)" 0

# 3. the node does not forward: the rule is refused at call start (and
# nothing runs), the name's answer withheld and recorded
fwd 0
: >"$T/hits"
run "$T/ip.yaml" ip "$T/off.json"
expect_eq t3b_noforward_refused "$?" 125
expect_match t3b_noforward_msg "$(cat "$T/err.txt")" "network.allow '10\.231\.0\.2:$OK': beyond this node, and this node does not forward IPv4 \(net\.ipv4\.ip_forward=0\)"
run "$T/name.yaml" name "$T/off-name.json"
so=$(jq -r .stdout "$T/off-name.json")
expect_match t3b_noforward_name_withheld "$(line resolve)" '^error'
den=$(jq -r '.denials[] | "\(.source) \(.kind) \(.target)"' "$T/off-name.json")
expect_match t3b_noforward_name_recorded "$den" 'resolver dns.answer mirror\.test \(answer 10\.231\.0\.2 is beyond the node: this node does not forward IPv4 \(net\.ipv4\.ip_forward=0\)'
sleep 0.3
expect_eq t3b_noforward_nothing_reached "$(cat "$T/hits")" ""

# 4. the node forwards but the uplink does not: the replies would arrive
# there, and IPv4 forwards by the device a packet arrives on
fwd 1
inN sh -c 'echo 0 >/proc/sys/net/ipv4/conf/up0/forwarding'
run "$T/ip.yaml" ip "$T/up.json"
expect_eq t3b_uplink_refused "$?" 125
expect_match t3b_uplink_msg "$(cat "$T/err.txt")" "leaves by 'up0', which does not forward IPv4 \(net\.ipv4\.conf\.up0\.forwarding=0\)"
expect_eq t3b_uplink_nothing_reached "$(cat "$T/hits")" ""
for _ in $(seq 50); do [ "$(links_left)" = 0 ] && break; sleep 0.1; done
expect_eq t3b_end_no_links_left "$(links_left)" 0
expect_eq t3b_end_no_table_left "$(tables_left)" 0
finish
