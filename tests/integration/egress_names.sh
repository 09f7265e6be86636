#!/usr/bin/env bash
# Egress by name (network.allow "host:port", "*.suffix:port"), held in the
# kernel, tiers 1 and 2 with the same outcomes. The upstream is a test zone
# on loopback (dns_lib/zone.py, `--dns-upstream`); every verdict comes from
# outside the sandbox: listeners count what reached them, the zone logs
# every name it was asked.
#   - an allowed name resolves (through the node's resolver address in
#     /etc/resolv.conf, redirected in-kernel) and its answer is reachable on
#     the rule's port only; a denial of another port names it;
#   - a name not allowed is NXDOMAIN, recorded (dns.name), never asked
#     upstream;
#   - every DNS path out: UDP and TCP 53 to the node's resolver, to
#     127.0.0.53, to a listener of ours on 127.0.0.3:53 (it receives
#     nothing) by sendto, by a connected UDP socket and from a v6 socket
#     to its v4-mapped address, DoT on 853 (denied);
#   - a name answering a loopback address is refused (dns.answer) unless
#     network.allow_private lists the range;
#   - the answer's TTL ending removes the address;
#   - a one-label wildcard.
. tests/lib.sh
[ "$(id -u)" -eq 0 ] || { skip egress-names "needs root"; finish; }
jq_py() { # EXPR over `d` (stdin JSON)
	python3 -c "import json,sys
d=json.load(sys.stdin)
print($1)"
}
S=$(mktemp -d /tmp/warden-names.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	[ -z "${HR_MADE:-}" ] || rm -rf /run/nscd
	[ -n "${KEEP:-}" ] || rm -rf "$S"
}
trap cleanup EXIT
chmod 755 "$S"

# the zone: svc.test -> 127.0.0.2 (TTL 3), loop.test -> 127.0.0.1,
# a.wild.test -> 127.0.0.5, evil.test exists too (never to be asked)
cat >"$S/zone.json" <<'Z'
{"svc.test": [["A", "127.0.0.2", 3]], "loop.test": [["A", "127.0.0.1", 30]],
 "a.wild.test": [["A", "127.0.0.5", 30]], "b.a.wild.test": [["A", "127.0.0.5", 30]],
 "evil.test": [["A", "127.0.0.2", 30]], "cache.test": [["A", "127.0.0.2", 30]]}
Z
python3 tests/integration/dns_lib/zone.py "$S/zone.port" "$S/zone.json" "$S/zone.log" &
PIDS+=($!)
# listeners outside: 127.0.0.2 on two ports, a fake resolver on
# 127.0.0.3:53 (UDP and TCP) and DoT on 127.0.0.3:853; each logs a line per
# packet or connection it got
python3 - "$S" <<'PY' &
import socket, sys, threading, os
d = sys.argv[1]
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
tcp("127.0.0.2", 19200, "svc:19200"); tcp("127.0.0.2", 19201, "svc:19201")
tcp("127.0.0.3", 53, "fake53/tcp"); udp("127.0.0.3", 53, "fake53/udp")
tcp("127.0.0.3", 853, "dot")
open(d + "/listen.ready", "w").write("ok")
threading.Event().wait()
PY
PIDS+=($!)
for _ in $(seq 600); do [ -s "$S/zone.port" ] && [ -f "$S/listen.ready" ] && break; sleep 0.05; done
ZP=$(cat "$S/zone.port")
: >"$S/hits"
NODE_NS=$(awk '/^nameserver/{print $2; exit}' /etc/resolv.conf)
NODE_NS=${NODE_NS:-127.0.0.53}

# the tool: each probe prints one line "NAME: RESULT"
cat >"$S/probe.py" <<'PY'
import socket, struct, sys, time
def q(name):
    hdr = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    body = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    return hdr + body + struct.pack(">HH", 1, 1)
def rcode(msg):
    return "rcode=%d answers=%d" % (msg[3] & 0xF, struct.unpack(">H", msg[6:8])[0])
def udp(addr, name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    try:
        s.sendto(q(name), (addr, 53)); m, peer = s.recvfrom(4096)
        return rcode(m) + " from=%s:%d" % peer
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
def udp6(addr, name):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.settimeout(2)
    try:
        s.sendto(q(name), (addr, 53)); m, peer = s.recvfrom(4096)
        return rcode(m) + " from=[%s]:%d" % peer[:2]
    except Exception as e:
        return "error " + type(e).__name__
def tcp6(addr, name):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.settimeout(2)
    try:
        s.connect((addr, 53)); m = q(name); s.sendall(struct.pack(">H", len(m)) + m)
        ln = struct.unpack(">H", s.recv(2))[0]; r = s.recv(ln)
        return rcode(r) + " peer=[%s]:%d" % s.getpeername()[:2]
    except Exception as e:
        return "error " + type(e).__name__
def connect(addr, port):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((addr, port)); return "connected"
    except Exception as e:
        return "error " + type(e).__name__
def resolve(name):
    try:
        return socket.getaddrinfo(name, 0, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except Exception as e:
        return "error " + type(e).__name__
ns = sys.argv[1]
a = resolve("svc.test"); print("resolve-svc:", a)
print("connect-svc:", connect(a, 19200) if not a.startswith("error") else a)
print("connect-svc-other-port:", connect("127.0.0.2", 19201))
print("resolve-evil:", resolve("evil.test"))
print("udp-node-evil:", udp(ns, "evil.test"))
print("tcp-node-evil:", tcp(ns, "evil.test"))
print("udp-53-evil:", udp("127.0.0.53", "evil.test"))
print("tcp-53-evil:", tcp("127.0.0.53", "evil.test"))
# svc.test is known to the test zone only (a real resolver says NXDOMAIN,
# as it does for evil.test): an answer on these paths is warden's
print("udp-node-svc:", udp(ns, "svc.test"))
print("tcp-node-svc:", tcp(ns, "svc.test"))
print("udp-53-svc:", udp("127.0.0.53", "svc.test"))
print("tcp-53-svc:", tcp("127.0.0.53", "svc.test"))
def udp_connected(addr, name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    try:
        s.connect((addr, 53)); s.send(q(name)); m = s.recv(4096)
        return rcode(m) + " peer=%s:%d" % s.getpeername()
    except Exception as e:
        return "error " + type(e).__name__
def udp_mapped(addr, name):  # a v6 socket to a v4-mapped address
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.settimeout(2)
    try:
        s.sendto(q(name), ("::ffff:" + addr, 53)); m, peer = s.recvfrom(4096)
        return rcode(m) + " from=[%s]:%d" % peer[:2]
    except Exception as e:
        return "error " + type(e).__name__
print("udp-conn-fake-evil:", udp_connected("127.0.0.3", "evil.test"))
print("udp-mapped-fake-evil:", udp_mapped("127.0.0.3", "evil.test"))
print("udp-fake-evil:", udp("127.0.0.3", "evil.test"))
print("tcp-fake-evil:", tcp("127.0.0.3", "evil.test"))
print("udp-fake-svc:", udp("127.0.0.3", "svc.test"))
print("dot:", connect("127.0.0.3", 853))
print("udp6-evil:", udp6("2001:db8::53", "evil.test"))
print("udp6-svc:", udp6("2001:db8::53", "svc.test"))
print("tcp6-svc:", tcp6("fd00::53", "svc.test"))
print("resolve-loop:", resolve("loop.test"))
print("resolve-wild:", resolve("a.wild.test"))
print("resolve-wild-deep:", resolve("b.a.wild.test"))
time.sleep(4.5)  # svc.test's TTL (3 s) ends
print("connect-svc-after-ttl:", connect("127.0.0.2", 19200))
PY

for tier in 1 2; do
	cat >"$S/t$tier.yaml" <<Y
name: names$tier
tier: $tier
timeout_ms: 30000
network: {allow: ["svc.test:19200", "loop.test:19200", "*.wild.test:19200"], allow_private: ["127.0.0.2/32", "127.0.0.5"]}
filesystem: {read: ["/usr", "/etc", "/lib", "/lib64"], exec: ["/usr/bin"]}
Y
	: >"$S/hits"
	: >"$S/zone.log"
	out=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/t$tier.yaml" \
		-- /usr/bin/python3 -c "$(cat "$S/probe.py")" "$NODE_NS" 2>"$S/err$tier")
	so=$(printf '%s' "$out" | jq_py 'd["stdout"]')
	line() { printf '%s\n' "$so" | sed -n "s/^$1: //p"; }
	expect_eq "t$tier-resolve-allowed" "$(line resolve-svc)" 127.0.0.2
	expect_eq "t$tier-connect-allowed" "$(line connect-svc)" connected
	expect_match "t$tier-other-port-denied" "$(line connect-svc-other-port)" 'error PermissionError'
	expect_match "t$tier-not-allowed-nxdomain" "$(line resolve-evil)" 'error gaierror'
	for p in udp-node-evil tcp-node-evil udp-53-evil tcp-53-evil udp-fake-evil tcp-fake-evil \
		udp-conn-fake-evil udp-mapped-fake-evil; do
		expect_match "t$tier-$p-nxdomain" "$(line $p)" '^rcode=3 answers=0'
	done
	# the node's resolver address and 127.0.0.53 answered by warden's
	# resolver: a name only the test zone knows, from the address asked
	for p in udp-node-svc tcp-node-svc udp-53-svc tcp-53-svc; do
		expect_match "t$tier-$p-warden-answers" "$(line $p)" '^rcode=0 answers=1 (from|peer)='
	done
	expect_match "t$tier-udp-node-svc-from-asked" "$(line udp-node-svc)" "from=${NODE_NS//./\\.}:53\$"
	expect_match "t$tier-udp-53-svc-from-asked" "$(line udp-53-svc)" 'from=127\.0\.0\.53:53$'
	# the reply shows the address asked for (a resolver library checks it)
	expect_match "t$tier-udp-reply-from-asked" "$(line udp-fake-evil)" 'from=127\.0\.0\.3:53$'
	expect_match "t$tier-tcp-peer-asked" "$(line tcp-fake-evil)" 'peer=127\.0\.0\.3:53$'
	expect_match "t$tier-udp-fake-allowed-answered" "$(line udp-fake-svc)" '^rcode=0 answers=1'
	expect_match "t$tier-dot-denied" "$(line dot)" 'error PermissionError'
	# v6 sockets: unconnected UDP and TCP to any v6 address reach the
	# resolver's [::1] side; the reply shows the address asked for
	expect_match "t$tier-udp6-evil-nxdomain" "$(line udp6-evil)" '^rcode=3 answers=0 from=\[2001:db8::53\]:53$'
	expect_match "t$tier-udp6-svc-answered" "$(line udp6-svc)" '^rcode=0 answers=1'
	expect_match "t$tier-tcp6-svc-answered" "$(line tcp6-svc)" '^rcode=0 answers=1 peer=\[fd00::53\]:53$'
	expect_match "t$tier-loopback-answer-refused" "$(line resolve-loop)" '^error'
	expect_eq "t$tier-wildcard-one-label" "$(line resolve-wild)" 127.0.0.5
	expect_match "t$tier-wildcard-not-two" "$(line resolve-wild-deep)" '^error'
	expect_match "t$tier-ttl-ends" "$(line connect-svc-after-ttl)" 'error PermissionError'
	# outside: the listener saw exactly the allowed connect; nothing
	# reached the fake resolver or DoT; the zone never heard evil.test
	expect_eq "t$tier-listener-hits" "$(sort "$S/hits" | tr '\n' ' ')" "svc:19200 "
	expect_eq "t$tier-evil-never-upstream" "$(grep -c evil "$S/zone.log")" 0
	expect_match "t$tier-svc-upstream" "$(cat "$S/zone.log")" 'svc\.test A'
	# the record: names refused, answers withheld, the denied port named
	den=$(printf '%s' "$out" | jq_py '"\n".join("%s %s %s" % (x["source"], x["kind"], x["target"]) for x in d["denials"])')
	expect_match "t$tier-denial-name" "$den" 'resolver dns.name evil.test'
	expect_match "t$tier-denial-answer" "$den" 'resolver dns.answer loop.test \(answer 127.0.0.1 is loopback'
	expect_match "t$tier-denial-names-target" "$den" 'bpf connect svc.test:19201 \(127.0.0.2\)'
	expect_match "t$tier-denial-dot" "$den" 'bpf connect 127.0.0.3:853'
done

# the same name answered into a listed private range is allowed, and an IP
# rule for the address does not list the range for a name
cat >"$S/priv.yaml" <<Y
name: priv
tier: 1
timeout_ms: 20000
network: {allow: ["loop.test:19200", "127.0.0.9:1"], allow_private: ["127.0.0.0/8"]}
filesystem: {read: ["/usr", "/etc", "/lib", "/lib64"], exec: ["/usr/bin"]}
Y
out=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/priv.yaml" \
	-- /usr/bin/python3 -c 'import socket; print(socket.getaddrinfo("loop.test", 0, socket.AF_INET)[0][4][0])' 2>/dev/null)
expect_eq private-listed-answered "$(printf '%s' "$out" | jq_py 'd["stdout"].strip()')" 127.0.0.1

# mode: audit: what enforce would refuse is answered from upstream and
# recorded as audited
cat >"$S/audit.yaml" <<Y
name: aud
tier: 1
mode: audit
timeout_ms: 20000
network: {allow: ["svc.test:19200"]}
filesystem: {read: ["/usr", "/etc", "/lib", "/lib64"], exec: ["/usr/bin"]}
Y
: >"$S/zone.log"
out=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/audit.yaml" \
	-- /usr/bin/python3 -c 'import socket; print(socket.getaddrinfo("evil.test", 0, socket.AF_INET)[0][4][0])' 2>/dev/null)
expect_eq audit-answered "$(printf '%s' "$out" | jq_py 'd["stdout"].strip()')" 127.0.0.2
expect_match audit-recorded "$(printf '%s' "$out" | jq_py '" ".join("%s:%s:%s" % (x["kind"], x["target"], x["verdict"]) for x in d["denials"] if x["source"] == "resolver")')" 'dns.name:evil.test:audited'

# the call's resolver keeps its answers for their TTL (enforce/dns.h
# wd_dns_cache): five queries of a name within its TTL reach the zone once,
# the later answers' TTL lowered by the time kept; another call (its own
# resolver, its own cache) asks again
cat >"$S/cache.yaml" <<Y
name: cache
tier: 1
timeout_ms: 20000
network: {allow: ["cache.test:19200"], allow_private: ["127.0.0.2/32"]}
filesystem: {read: ["/usr", "/etc", "/lib", "/lib64"], exec: ["/usr/bin"]}
Y
cat >"$S/cache.py" <<'PY'
import socket, struct, sys, time
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x05cache\x04test\x00" + struct.pack(">HH", 1, 1)
out = []
for i in range(5):
    if i == 4:
        time.sleep(2.2)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    s.sendto(q, (sys.argv[1], 53)); m, _ = s.recvfrom(1500)
    n = struct.unpack(">H", m[6:8])[0]
    out.append("%d/%d/%d" % (m[3] & 0xF, n, struct.unpack(">I", m[-10:-6])[0] if n else -1))
print(" ".join(out))
PY
: >"$S/zone.log"
for k in 1 2; do
	out=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/cache.yaml" \
		-- /usr/bin/python3 -c "$(cat "$S/cache.py")" "$NODE_NS" 2>/dev/null)
	ans=$(printf '%s' "$out" | jq_py 'd["stdout"].strip()')
	# rcode/answers/ttl: the first as the zone gave it, the next three
	# within its first second, the last after 2.2 s kept: 27 or 28
	expect_match "cache-call$k-answers" "$ans" '^0/1/30 0/1/(29|30) 0/1/(29|30) 0/1/(29|30) 0/1/2[78]$'
	expect_eq "cache-call$k-asked-upstream" "$(grep -c 'cache\.test A' "$S/zone.log")" "$k"
done

# a host resolver's unix socket under a write path (nscd's, a listener of
# ours where no nscd runs): the manifest is refused, at `policy check` and
# at call start, and the listener outside sees no connection in tier 1 or 2
if [ -e /run/nscd ]; then
	skip host-resolver-socket "/run/nscd exists (the node's nscd)"
else
	mkdir -m 755 /run/nscd
	HR_MADE=1
	python3 - <<'PY' &
import socket, os, struct
s = socket.socket(socket.AF_UNIX); s.bind("/run/nscd/socket"); os.chmod("/run/nscd/socket", 0o666)
s.listen(16); open("/run/nscd/ready", "w").write("ok")
while True:
    c, _ = s.accept()
    # the peer's uid: glibc on the node asks an nscd socket too; only a
    # call's uid (warden's range) is a hit
    uid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    if uid >= 1000000000:
        open("/run/nscd/hits", "a").write("hit %d\n" % uid)
    c.close()
PY
	NSCD=$!
	PIDS+=("$NSCD")
	for _ in $(seq 100); do [ -f /run/nscd/ready ] && break; sleep 0.05; done
	for tier in 1 2; do
		mkdir -p "$S/hr$tier/tools"
		cat >"$S/hr$tier/tools/hr.yaml" <<Y
name: hr$tier
tier: $tier
timeout_ms: 20000
network: {allow: ["svc.test:19200"], allow_private: ["127.0.0.2/32"]}
filesystem: {read: ["/usr", "/etc", "/lib", "/lib64"], exec: ["/usr/bin"], write: ["/run/nscd"]}
Y
		expect_match "t$tier-host-resolver-write-refused" "$("$WARDEN" policy check "$S/hr$tier" 2>&1)" \
			"hr.yaml:5:[0-9]+: 'filesystem.write' '/run/nscd': with a name in network.allow, a write path may not reach a host resolver's unix socket"
		out=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/hr$tier/tools/hr.yaml" \
			-- /usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/nscd/socket"); print("connected")' 2>&1)
		expect_eq "t$tier-host-resolver-socket-unreached" "$(cat /run/nscd/hits 2>/dev/null | wc -l)" 0
		expect_match "t$tier-host-resolver-call-refused" "$out" "host resolver's unix socket"
	done
	# a symlink in a write path naming that socket: the unix rules judge
	# the path as written, so a call whose DNS is its resolver's makes
	# no symlink (Landlock), and the listener hears nothing. Control: the
	# same call with an address rule instead of a name makes the link
	# and reaches the listener through it (what the attack would do).
	link_call() { # TIER RULE DIR: the call's output (DIR: where it links)
		rm -rf "$S/lw$1"; mkdir -m 777 "$S/lw$1"; mkdir -p "$S/lk$1/tools"
		cat >"$S/lk$1/tools/lk.yaml" <<Y
name: lk$1
tier: $1
timeout_ms: 20000
network: {allow: ["$2"], allow_private: ["127.0.0.2/32"]}
filesystem: {read: ["/usr", "/etc", "/lib", "/lib64"], exec: ["/usr/bin"], write: ["$S/lw$1"]}
Y
		"$WARDEN" exec --json --dns-upstream "127.0.0.1:$ZP" --policy "$S/lk$1/tools/lk.yaml" \
			-- /usr/bin/python3 -c 'import os, socket, sys
l = sys.argv[1] + "/l"
try:
    os.symlink("/run/nscd/socket", l); print("linked")
except OSError as e:
    print("link refused", e.errno)
try:
    s = socket.socket(socket.AF_UNIX); s.connect(l); print("connected")
except OSError as e:
    print("connect refused", e.errno)' "$3" 2>&1
	}
	: >/run/nscd/hits
	out=$(link_call 1 "127.0.0.2:19200" "$S/lw1")
	expect_match t1-symlink-control-linked "$out" 'linked.*connected'
	expect_eq t1-symlink-control-reached "$(wc -l </run/nscd/hits)" 1
	for tier in 1 2; do
		: >/run/nscd/hits
		# tier 2: in its own /tmp (a write path of the call's own)
		d=$S/lw$tier
		[ $tier = 2 ] && d=/tmp
		out=$(link_call $tier "svc.test:19200" "$d")
		expect_match "t$tier-symlink-refused" "$out" "link refused 13"
		expect_eq "t$tier-symlink-socket-unreached" "$(wc -l </run/nscd/hits)" 0
	done
	kill "$NSCD" 2>/dev/null
	wait "$NSCD" 2>/dev/null
	rm -rf /run/nscd
fi

# policy check names a bad wildcard and a bad range at file:line:col
mkdir -p "$S/pol/tools"
cat >"$S/pol/tools/bad.yaml" <<'Y'
name: bad
tier: 1
network: {allow: ["*.com:443"], allow_private: ["10.0.0.0/40"]}
Y
out=$("$WARDEN" policy check "$S/pol" 2>&1)
expect_match policy-wildcard-named "$out" 'bad.yaml:3:19: network.allow: .\*\.com:443.: a wildcard'
expect_match policy-private-named "$out" 'bad.yaml:3:49: network.allow_private: .10.0.0.0/40.'
# an IP rule for DNS that the resolver would take over: refused where it
# could not mean what it says (port 53 beside a name; 53 and 853 in tier
# 3), accepted where it does (port 53, no name, tiers 1-2)
dnsrule() { # TIER RULES: policy check's output for a tool with them
	rm -f "$S/pol/tools/"*.yaml
	printf 'name: d\ntier: %s\nnetwork: {allow: [%s]}\n' "$1" "$2" >"$S/pol/tools/d.yaml"
	"$WARDEN" policy check "$S/pol" 2>&1
}
expect_match policy-dns-ip-beside-name "$(dnsrule 1 '"svc.test:80", "10.9.9.9:53"')" \
	"d.yaml:3:18: 'network.allow' '10.9.9.9:53': with a name in network.allow, every packet to port 53 goes to the call's resolver"
expect_match policy-dns-ip-tier3 "$(dnsrule 3 '"10.9.9.9:53"')" "'10.9.9.9:53': in tier 3 every packet to port 53 goes to the call's resolver"
expect_match policy-dot-ip-tier3 "$(dnsrule 3 '"127.0.0.1:853"')" "'127.0.0.1:853': in tier 3 every packet to port 853 is dropped"
expect_match policy-dns-ip-alone-ok "$(dnsrule 1 '"10.9.9.9:53"')" '^ok: '
finish
