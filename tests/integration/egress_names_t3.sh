#!/usr/bin/env bash
# Egress by name in tier 3 (gVisor): the cases of egress_names.sh, held by
# the host-side tc programs on the sandbox's link (bpf/t3net.bpf.c) and
# the call's resolver on that link. The upstream is the test zone on
# loopback (dns_lib/zone.py); every verdict comes from outside the
# sandbox: listeners on the host count what reached them, the zone logs
# every name it was asked, the call's denials are the host's records.
#
# What differs from tiers 1-2 is only where things are, as the sandbox
# sees them (sandbox/gvisor_net.c): its nameserver is its link's host end
# (gw), and the node's loopback 127.0.0.1 is reached at gw (gVisor drops a
# loopback source on a link), so an answer 127.0.0.1 is told as gw and
# pinned as 127.0.0.1. A denied connect fails at once (the host answers
# the SYN with a RST: ECONNREFUSED where tiers 1-2 give EPERM).
#   - an allowed name resolves and is reachable on the rule's port only; a
#     denial of another port names it;
#   - a name not allowed is NXDOMAIN, recorded (dns.name), never asked
#     upstream;
#   - every DNS path out: UDP and TCP 53 to the node's resolver address, to
#     127.0.0.53, to the node's own address (a listener of ours on :53
#     receives nothing), to an arbitrary address, DoT on 853 — none
#     escapes, each recorded;
#   - an answer in a private range is refused unless allow_private lists
#     it; an answer beyond a node that does not forward is withheld and
#     recorded;
#   - the answer's TTL ending removes the address; a one-label wildcard.
. tests/lib.sh
[ "$(id -u)" -eq 0 ] || { skip egress-names-t3 "needs root"; finish; }
command -v runsc >/dev/null || { skip egress-names-t3 "runsc not installed (Debian package runsc)"; finish; }
jq_py() { # EXPR over `d` (stdin JSON)
	python3 -c "import json,sys
d=json.load(sys.stdin)
print($1)"
}
# the node's own non-loopback IPv4 address (a fake resolver listens there)
HOSTIP=$(ip -4 -o addr show scope global 2>/dev/null | awk '$2 !~ /^w3h/ {split($4, a, "/"); print a[1]; exit}')
S=$(mktemp -d /tmp/warden-names3.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$S"; }
trap cleanup EXIT
chmod 755 "$S"

cat >"$S/zone.json" <<'Z'
{"svc.test": [["A", "127.0.0.1", 3], ["AAAA", "::1", 3]],
 "loop.test": [["A", "127.0.0.1", 30]], "far.test": [["A", "198.51.100.7", 30]],
 "a.wild.test": [["A", "127.0.0.1", 30]], "b.a.wild.test": [["A", "127.0.0.1", 30]],
 "evil.test": [["A", "127.0.0.1", 30]]}
Z
python3 tests/integration/dns_lib/zone.py "$S/zone.port" "$S/zone.json" "$S/zone.log" &
PIDS+=($!)
# listeners outside: the allowed one and another port on 127.0.0.1, a fake
# resolver on the node's address :53 (UDP and TCP) and DoT :853 there
python3 - "$S" "${HOSTIP:-}" <<'PY' &
import socket, sys, threading
d, hostip = sys.argv[1], sys.argv[2]
def tcp(addr, port, tag):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(16)
    def loop():
        while True:
            c, _ = s.accept(); open(d + "/hits", "a").write(tag + "\n"); c.close()
    threading.Thread(target=loop, daemon=True).start()
def udp(addr, port, tag):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, port))
    def loop():
        while True:
            s.recvfrom(4096); open(d + "/hits", "a").write(tag + "\n")
    threading.Thread(target=loop, daemon=True).start()
tcp("127.0.0.1", 19200, "svc:19200"); tcp("127.0.0.1", 19201, "svc:19201")
if hostip:
    tcp(hostip, 53, "fake53/tcp"); udp(hostip, 53, "fake53/udp"); tcp(hostip, 853, "dot")
open(d + "/listen.ready", "w").write("ok")
threading.Event().wait()
PY
MAINL=$!
PIDS+=("$MAINL")
# a resolver of the host's on 127.0.0.1:53 (UDP and TCP) and DoT over UDP
# on 127.0.0.1:853 and the node's address: each logs what reached it
cat >"$S/hostdns.py" <<'PY'
import socket, sys, threading
d, tag, addrs = sys.argv[1], sys.argv[2], sys.argv[3:]
def tcp(addr, port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(16)
    def loop():
        while True:
            c, _ = s.accept(); open(d + "/hits", "a").write("%s:%d/tcp\n" % (tag, port)); c.close()
    threading.Thread(target=loop, daemon=True).start()
def udp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, port))
    def loop():
        while True:
            s.recvfrom(4096); open(d + "/hits", "a").write("%s:%d/udp\n" % (tag, port))
    threading.Thread(target=loop, daemon=True).start()
bound = []
for a in addrs:
    host, port, proto = a.split(":")
    try:
        (tcp if proto == "tcp" else udp)(host, int(port)); bound.append(a)
    except OSError as e:
        print("cannot bind %s: %s" % (a, e), file=sys.stderr)
open(d + "/" + tag + ".ready", "w").write(" ".join(bound))
threading.Event().wait()
PY
python3 "$S/hostdns.py" "$S" lo 127.0.0.1:53:tcp 127.0.0.1:53:udp 127.0.0.1:853:udp ${HOSTIP:+$HOSTIP:853:udp} &
LO53=$!
PIDS+=("$LO53")
for _ in $(seq 100); do [ -s "$S/zone.port" ] && [ -f "$S/listen.ready" ] && [ -f "$S/lo.ready" ] && break; sleep 0.05; done
expect_match t3-host-lo53-listening "$(cat "$S/lo.ready")" '127\.0\.0\.1:53:tcp 127\.0\.0\.1:53:udp 127\.0\.0\.1:853:udp'
ZP=$(cat "$S/zone.port")
NODE_NS=$(awk '/^nameserver/{print $2; exit}' /etc/resolv.conf)
NODE_NS=${NODE_NS:-127.0.0.53}

cat >"$S/probe.py" <<'PY'
import socket, struct, sys, time
ns, hostip = sys.argv[1], sys.argv[2]
gw = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
def q(name):
    hdr = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    body = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    return hdr + body + struct.pack(">HH", 1, 1)
def rcode(msg):
    return "rcode=%d answers=%d" % (msg[3] & 0xF, struct.unpack(">H", msg[6:8])[0])
def udp(addr, name, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(2)
    try:
        s.sendto(q(name), (addr, 53)); m, peer = s.recvfrom(4096)
        return rcode(m) + " from=%s:%d" % peer[:2]
    except Exception as e:
        return "error " + type(e).__name__
def tcp(addr, name, port=53):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((addr, port)); m = q(name); s.sendall(struct.pack(">H", len(m)) + m)
        ln = struct.unpack(">H", s.recv(2))[0]; r = s.recv(ln)
        return rcode(r) + " peer=%s:%d" % s.getpeername()
    except Exception as e:
        return "error " + type(e).__name__
def connect(addr, port):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((addr, port)); return "connected"
    except Exception as e:
        return "error " + type(e).__name__
def resolve(name, fam=socket.AF_INET):
    try:
        return socket.getaddrinfo(name, 0, fam, socket.SOCK_STREAM)[0][4][0]
    except Exception as e:
        return "error " + type(e).__name__
a = resolve("svc.test"); print("resolve-svc-is-gw:", "yes" if a == gw else a)
print("resolve-svc-v6:", resolve("svc.test", socket.AF_INET6))
print("connect-svc:", connect(a, 19200) if not a.startswith("error") else a)
print("connect-svc-other-port:", connect(gw, 19201))
print("resolve-evil:", resolve("evil.test"))
print("udp-gw-evil:", udp(gw, "evil.test"))
print("tcp-gw-svc:", tcp(gw, "svc.test"))
print("udp-node-evil:", udp(ns, "evil.test"))
print("tcp-node-evil:", tcp(ns, "evil.test"))
print("udp-53-evil:", udp("127.0.0.53", "evil.test"))
print("tcp-53-evil:", tcp("127.0.0.53", "evil.test"))
print("udp-lo-evil:", udp("127.0.0.1", "evil.test"))
print("tcp-lo-evil:", tcp("127.0.0.1", "evil.test"))
def udp853(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
    try:
        s.sendto(b"dot-over-udp", (addr, 853)); s.recvfrom(100); return "answered"
    except Exception as e:
        return "error " + type(e).__name__
print("udp853-gw:", udp853(gw))
if hostip:
    print("udp853-host:", udp853(hostip))
print("udp-any-evil:", udp("198.51.100.53", "evil.test"))
if hostip:
    print("udp-host-evil:", udp(hostip, "evil.test"))
    print("tcp-host-evil:", tcp(hostip, "evil.test"))
    print("dot-host:", connect(hostip, 853))
print("dot-gw:", connect(gw, 853))
print("udp6-evil:", udp("2001:db8::53", "evil.test", socket.AF_INET6))
print("resolve-far:", resolve("far.test"))
time.sleep(4.5)  # svc.test's TTL (3 s) ends
print("connect-svc-after-ttl:", connect(gw, 19200))
# after the TTL: every answer in tier 3 is the one address (127.0.0.1)
print("resolve-wild-is-gw:", "yes" if resolve("a.wild.test") == gw else "no")
print("resolve-wild-deep:", resolve("b.a.wild.test"))
PY

cat >"$S/t3.yaml" <<Y
name: names3
tier: 3
timeout_ms: 40000
exec: ["/usr/bin/python3"]
network: {allow: ["svc.test:19200", "far.test:19200", "*.wild.test:19200"], allow_private: ["127.0.0.1/32", "::1/128"]}
filesystem: {read: ["/usr/lib/python3", "/usr/lib/python3.11", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/etc/ld.so.cache"], exec: ["/usr/bin/python3"]}
Y
# the node's own processes try the call's resolver on the link while the
# call runs (its address is the host end's: reached over loopback): a
# query for a name the manifest allows and one it does not, UDP and TCP;
# none may be answered nor show in the call's denials (they are not the
# sandbox's)
cat >"$S/hostprobe.py" <<'PY'
import socket, struct, subprocess, sys, time
def q(name):
    b = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b + struct.pack(">HH", 1, 1)
gw = None
for _ in range(200):
    o = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
    for l in o.splitlines():
        f = l.split()
        if f[1].startswith("w3h"):
            gw = f[3].split("/")[0]
    if gw:
        break
    time.sleep(0.05)
if not gw:
    print("no-link"); sys.exit()
time.sleep(0.5)
for name in ("svc.test", "hostprobe.test"):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1.5)
    try:
        u.sendto(q(name), (gw, 53)); u.recvfrom(1500); print("udp-%s: answered" % name)
    except Exception as e:
        print("udp-%s: %s" % (name, type(e).__name__))
    t = socket.socket(); t.settimeout(1.5)
    try:
        t.connect((gw, 53)); m = q(name); t.sendall(struct.pack(">H", len(m)) + m)
        r = t.recv(2); print("tcp-%s: %s" % (name, "answered" if len(r) == 2 else "closed"))
    except Exception as e:
        print("tcp-%s: %s" % (name, type(e).__name__))
PY
python3 "$S/hostprobe.py" >"$S/hostprobe.out" 2>&1 & HP=$!
: >"$S/hits"
: >"$S/zone.log"
out=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/t3.yaml" \
	-- /usr/bin/python3 -c "$(cat "$S/probe.py")" "$NODE_NS" "${HOSTIP:-}" 2>"$S/err3")
rc=$?
expect_eq t3-exit "$rc" 0
[ "$rc" = 0 ] || { printf '%s\n' "$out" | head -c 2000; cat "$S/err3"; }
so=$(printf '%s' "$out" | jq_py 'd["stdout"]')
line() { printf '%s\n' "$so" | sed -n "s/^$1: //p"; }
expect_eq t3-resolve-allowed "$(line resolve-svc-is-gw)" yes
expect_match t3-aaaa-not-carried "$(line resolve-svc-v6)" '^error'
expect_eq t3-connect-allowed "$(line connect-svc)" connected
expect_match t3-other-port-denied "$(line connect-svc-other-port)" 'error ConnectionRefusedError'
expect_match t3-not-allowed-nxdomain "$(line resolve-evil)" 'error gaierror'
expect_match t3-resolver-udp-nxdomain "$(line udp-gw-evil)" '^rcode=3 answers=0'
expect_match t3-resolver-tcp-answered "$(line tcp-gw-svc)" '^rcode=0 answers=1'
# every other DNS path: nothing comes back
for p in udp-node-evil udp-53-evil udp-any-evil udp6-evil tcp-53-evil udp-lo-evil tcp-lo-evil udp853-gw ${HOSTIP:+udp853-host}; do
	expect_match "t3-$p-no-answer" "$(line $p)" '^error'
done
expect_match t3-tcp-node-evil-refused "$(line tcp-node-evil)" '^error'
expect_match t3-dot-gw-refused "$(line dot-gw)" 'error ConnectionRefusedError'
if [ -n "$HOSTIP" ]; then
	expect_match t3-udp-host-no-answer "$(line udp-host-evil)" '^error'
	expect_match t3-tcp-host-refused "$(line tcp-host-evil)" 'error ConnectionRefusedError'
	expect_match t3-dot-host-refused "$(line dot-host)" 'error ConnectionRefusedError'
else
	skip t3-host-address-paths "the node has no global IPv4 address to listen on"
fi
# beyond a node that does not forward (where it does: tier3_beyond.sh)
FWD=$(cat /proc/sys/net/ipv4/ip_forward)
if [ "$FWD" = 0 ]; then
	expect_match t3-far-answer-withheld "$(line resolve-far)" '^error'
else
	skip t3-far-answer-withheld "this node forwards IPv4: an answer beyond it is given (tier3_beyond.sh)"
fi
expect_eq t3-wildcard-one-label "$(line resolve-wild-is-gw)" yes
expect_match t3-wildcard-not-two "$(line resolve-wild-deep)" '^error'
expect_match t3-ttl-ends "$(line connect-svc-after-ttl)" 'error ConnectionRefusedError'
# outside: the listeners saw exactly the allowed connect; nothing reached
# the fake resolver or DoT; the zone never heard evil.test
expect_eq t3-listener-hits "$(sort "$S/hits" | tr '\n' ' ')" "svc:19200 "
expect_eq t3-evil-never-upstream "$(grep -c evil "$S/zone.log")" 0
expect_match t3-svc-upstream "$(cat "$S/zone.log")" 'svc\.test A'
den=$(printf '%s' "$out" | jq_py '"\n".join("%s %s %s" % (x["source"], x["kind"], x["target"]) for x in d["denials"])')
[ -z "${KEEP:-}" ] || printf '%s\n' "$den" >"$S/den"
wait "$HP"
hp=$(cat "$S/hostprobe.out")
expect_match t3-host-queries-unanswered "$(printf '%s\n' "$hp" | sort | tr '\n' ' ')" \
	'^tcp-hostprobe.test: (closed|ConnectionResetError) tcp-svc.test: (closed|ConnectionResetError) udp-hostprobe.test: TimeoutError udp-svc.test: TimeoutError $'
if printf '%s' "$den" | grep -q hostprobe; then fail t3-host-queries-not-denials "$(printf '%s' "$den" | grep hostprobe)"; else pass t3-host-queries-not-denials; fi
expect_match t3-denial-name "$den" 'resolver dns.name evil.test'
expect_match t3-denial-names-target "$den" 'bpf connect svc.test:19201 \(127.0.0.1\)'
# a loopback nameserver (127.0.0.53 on a systemd-resolved node) is, inside
# gVisor, the sandbox's own loopback: its packets never reach the host end,
# so there is no host-side denial to record (udp/tcp-node-evil above still
# got no answer)
case $NODE_NS in
127.* | ::1)
	for p in udp tcp; do
		skip "t3-denial-node-resolver-$p" "the node's nameserver $NODE_NS is a loopback address: inside gVisor it is the sandbox's own loopback, nothing reaches the host to deny"
	done
	;;
*)
	expect_match t3-denial-node-resolver-udp "$den" "bpf sendmsg ${NODE_NS//./\\.}:53"
	expect_match t3-denial-node-resolver-tcp "$den" "bpf connect ${NODE_NS//./\\.}:53"
	;;
esac
expect_match t3-denial-any-53 "$den" 'bpf sendmsg 198\.51\.100\.53:53'
expect_match t3-denial-dot-gw "$den" 'bpf connect (svc\.test:853 \(127\.0\.0\.1\)|127\.0\.0\.1:853)'
[ -z "$HOSTIP" ] || expect_match t3-denial-dot-host "$den" "bpf connect ${HOSTIP//./\\.}:853"
[ "$FWD" != 0 ] || expect_match t3-denial-far "$den" 'resolver dns.answer far.test \(answer 198\.51\.100\.7 is beyond the node: this node does not forward IPv4 \(net\.ipv4\.ip_forward=0\)'
expect_match t3-denial-ttl "$den" 'bpf connect svc.test:19200 \(127.0.0.1\)'
expect_match t3-enforcement "$(printf '%s' "$out" | jq_py 'd["enforcement"]["network"]')" 'tc BPF allow-list'

# a private answer: refused unless allow_private lists its range
for listed in no yes; do
	priv=""
	[ $listed = yes ] && priv=', allow_private: ["127.0.0.0/8"]'
	cat >"$S/priv.yaml" <<Y
name: priv3
tier: 3
timeout_ms: 20000
exec: ["/usr/bin/python3"]
network: {allow: ["loop.test:19200"]$priv}
filesystem: {read: ["/usr/lib/python3", "/usr/lib/python3.11", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/etc/ld.so.cache"], exec: ["/usr/bin/python3"]}
Y
	: >"$S/hits"
	out=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/priv.yaml" \
		-- /usr/bin/python3 -c '
import socket
try:
    a = socket.getaddrinfo("loop.test", 0, socket.AF_INET)[0][4][0]
    s = socket.socket(); s.settimeout(3); s.connect((a, 19200)); print("reached")
except Exception as e:
    print("error", type(e).__name__)' 2>/dev/null)
	so=$(printf '%s' "$out" | jq_py 'd["stdout"].strip()')
	den=$(printf '%s' "$out" | jq_py '"\n".join("%s %s" % (x["kind"], x["target"]) for x in d["denials"])')
	if [ $listed = no ]; then
		expect_match t3-private-refused "$so" '^error'
		expect_match t3-private-refused-recorded "$den" 'dns.answer loop.test \(answer 127.0.0.1 is loopback'
		expect_eq t3-private-refused-no-hit "$(cat "$S/hits")" ""
	else
		expect_eq t3-private-listed-reached "$so" reached
		expect_eq t3-private-listed-hit "$(cat "$S/hits")" "svc:19200"
	fi
done
# a host resolver on 0.0.0.0:53 (UDP and TCP): it would hear the link's
# address too. The call's resolver binds the link's port 53 with the
# device bound; the kernel refuses its TCP bind beside a listening
# wildcard socket, so the call is refused before the tool runs; nothing
# reaches the host's listener either way
# (the listeners above hold port 53 of 127.0.0.1 and the node's address)
kill "$LO53" "$MAINL" 2>/dev/null
wait "$LO53" "$MAINL" 2>/dev/null
: >"$S/hits"
python3 "$S/hostdns.py" "$S" any 0.0.0.0:53:tcp 0.0.0.0:53:udp 2>"$S/any.err" &
ANY53=$!
PIDS+=("$ANY53")
for _ in $(seq 100); do [ -f "$S/any.ready" ] && break; sleep 0.05; done
if [ "$(cat "$S/any.ready")" = "0.0.0.0:53:tcp 0.0.0.0:53:udp" ]; then
	out=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/t3.yaml" \
		-- /usr/bin/python3 -c "$(cat "$S/probe.py")" "$NODE_NS" "${HOSTIP:-}" 2>&1)
	expect_match t3-any53-call-refused "$out" "the call's resolver cannot listen on its tier-3 link '[^']*' \(port 53\): Address already in use"
	sleep 0.3
	expect_eq t3-any53-listener-unreached "$(cat "$S/hits")" ""
else
	skip t3-any53 "0.0.0.0:53 cannot be bound now: $(tr '\n' ' ' <"$S/any.err") (sockets on port 53: $(awk 'NR > 1 && $2 ~ /:0035$/ {print $2, $4}' /proc/net/tcp /proc/net/udp | tr '\n' ' '))"
fi
kill "$ANY53" 2>/dev/null
wait "$ANY53" 2>/dev/null

# nothing of the calls is left on the host: links, netns
# (the kernel deletes a call's pair with its netns, in the background)
links_left() { ip -o link show 2>/dev/null | grep -c ' w3h' || true; }
for _ in $(seq 50); do [ "$(links_left)" = 0 ] && break; sleep 0.1; done
expect_eq t3-no-links-left "$(links_left)" 0
finish
