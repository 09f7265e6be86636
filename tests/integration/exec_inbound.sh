#!/usr/bin/env bash
# Inbound, SO_REUSEPORT and ICMP, tiers 1 and 2. The attack runs INSIDE the
# sandbox (tests/helpers/netprobe binds, listens, joins a port, pings); the
# verdict comes from OUTSIDE it: a host client that tries to connect or
# send to what the tool bound, a host listener counting whose connections
# it answered, the host's ICMP echo counters, and the denials warden
# recorded. Loopback only.
. tests/lib.sh
set -u
T=$(mktemp -d /run/warden-test.XXXXXX); chmod 755 "$T"
cp "$HELPERS/netprobe" "$T/netprobe"; chmod 755 "$T/netprobe"
P=$T/netprobe
PGR=/proc/sys/net/ipv4/ping_group_range
PGR_WAS=$(cat "$PGR")
BG=()
cleanup() {
	# the node's value back exactly as it was
	[ -n "$PGR_WAS" ] && printf '%s\n' "$PGR_WAS" >"$PGR"
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
W=2500 # ms the tool waits for a peer; the client tries for W - 500

manifest() { # file tier allow-json [network extra yaml]
	cat >"$1" <<Y
name: inbound_t$2
tier: $2
exec: ["$P"]
timeout_ms: 15000
memory_mb: 64
pids: 16
network: {allow: $3${4:+, $4}}
filesystem: {read: ["$P"], write: [], exec: ["$P"]}
output: {max_bytes: 8192}
Y
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The host-side client: how many of its attempts reached the tool.
cat >"$T/client.py" <<'PY'
import socket, sys, time, errno
mode, target, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.time() + secs
reached = 0
while time.time() < end:
    time.sleep(0.1)
    try:
        if mode in ("tcp4", "tcp6"):
            fam = socket.AF_INET if mode == "tcp4" else socket.AF_INET6
            host = "127.0.0.1" if mode == "tcp4" else "::1"
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(0.3)
            s.connect((host, int(target)))
            reached += 1
        elif mode in ("udp4", "udp6"):
            # connected UDP: an unbound port answers ICMP port
            # unreachable, seen as ECONNREFUSED; a bound one stays silent
            fam = socket.AF_INET if mode == "udp4" else socket.AF_INET6
            host = "127.0.0.1" if mode == "udp4" else "::1"
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.connect((host, int(target)))
            s.settimeout(0.1)
            s.send(b"cmd")
            try:
                s.recv(10)
                reached += 1
            except socket.timeout:
                reached += 1
        elif mode == "abstract-stream":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect("\0" + target)
            reached += 1
        elif mode == "abstract-dgram":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.sendto(b"cmd", "\0" + target)
            reached += 1
        s.close()
    except OSError as e:
        pass
    if reached:
        break  # reached once is the verdict
print(reached)
PY

# attack NAME MANIFEST CLIENT-MODE TARGET NETPROBE-ARGS...: run the tool and
# the client side by side; $T/out.json = the tool's result, echoes the
# client's count.
attack() {
	local m=$1 mode=$2 target=$3; shift 3
	"$WARDEN" exec --policy "$m" --json -- "$P" "$@" >"$T/out.json" 2>/dev/null &
	local tp=$!
	sleep 0.3
	python3 "$T/client.py" "$mode" "$target" "$(python3 -c "print(($W - 500) / 1000)")"
	wait "$tp"
}
field() { jq -r "$1" "$T/out.json" 2>/dev/null; }
denied_kinds() { jq -r '.denials[]? | "\(.kind) \(.syscall)"' "$T/out.json" 2>/dev/null | sort -u | tr '\n' ';'; }

# ---- a "no network" tool cannot be reached -------------------------------
# 1, 2: allow: [] (an empty netns: tier 1 the shared one, tier 2 its own);
# 1h, 2h: a non-empty allow-list keeps the host's network namespace.
for cfg in 1 2 1h 2h; do
	tier=${cfg%h}
	if [ "$cfg" = "$tier" ]; then allow="[]"; else allow='["127.0.0.1:9"]'; fi
	M=$T/m$cfg.yaml; manifest "$M" "$tier" "$allow"
	n=t$cfg
	for fam in 4 6; do
		port=$(free_port)
		got=$(attack "$M" tcp$fam "$port" tcp-listen $fam "$port" $W)
		expect_eq "$n/tcp$fam-not-reached" "$got" 0
		out=$(field .stdout)
		expect_match "$n/tcp$fam-bind-refused" "$out" "bind: refused: Operation not permitted"
		expect_match "$n/tcp$fam-listen-refused" "$out" "listen: refused: Operation not permitted"
		expect_match "$n/tcp$fam-denials-recorded" "$(denied_kinds)" "bind bind;.*syscall listen"
		port=$(free_port)
		got=$(attack "$M" udp$fam "$port" udp-recv $fam "$port" $W)
		expect_eq "$n/udp$fam-not-reached" "$got" 0
		expect_match "$n/udp$fam-bind-refused" "$(field .stdout)" "bind: refused: Operation not permitted"
		expect_match "$n/udp$fam-denial-recorded" "$(denied_kinds)" "bind bind"
	done
	name=wd-inbound-$cfg-$$
	got=$(attack "$M" abstract-stream "$name" abstract-listen "$name" $W)
	expect_eq "$n/abstract-stream-not-reached" "$got" 0
	expect_match "$n/abstract-stream-listen-refused" "$(field .stdout)" "listen: refused: Operation not permitted"
	# raw, rawpair: AF_UNIX + SOCK_RAW, which the kernel makes a datagram
	# socket (with SOCK_CLOEXEC / SOCK_NONBLOCK above the type's bits)
	for how in dgram pair raw rawpair; do
		got=$(attack "$M" abstract-dgram "$name-$how" abstract-$how "$name-$how" $W)
		expect_eq "$n/abstract-$how-not-reached" "$got" 0
		if [ "$cfg" != "$tier" ]; then
			# host namespace: a unix datagram socket is refused at birth
			expect_match "$n/abstract-$how-socket-refused" "$(field .stdout)" \
				"socket(pair)?: refused: Operation not permitted"
			expect_match "$n/abstract-$how-denial-recorded" "$(denied_kinds)" "syscall socket"
		fi
	done
done

# ---- two no-network tier-1 calls share one empty namespace: neither
# reaches the other (Landlock's abstract-unix scope; netns.h) -------------
M=$T/m1.yaml
name=wd-inbound-x-$$
"$WARDEN" exec --policy "$M" --json -- "$P" abstract-dgram "$name" 3000 >"$T/victim.json" 2>/dev/null &
vp=$!
sleep 0.5
"$WARDEN" exec --policy "$M" --json -- "$P" abstract-send "$name" >"$T/out.json" 2>/dev/null
wait "$vp"
expect_match t1/cross-call-bound "$(jq -r .stdout "$T/victim.json")" "bind: succeeded"
expect_eq t1/cross-call-not-received "$(jq -r .exit_code "$T/victim.json")" 3
expect_match t1/cross-call-send-refused "$(field .stdout)" "sendto: refused: Operation not permitted"

# ---- network.listen: true: a listener works ------------------------------
W=5000 # the client stops at its first success: room for a slow start
for tier in 1 2; do
	M=$T/ml$tier.yaml; manifest "$M" "$tier" "[]" "listen: true"
	port=$(free_port)
	got=$(attack "$M" tcp4 "$port" tcp-listen 4 "$port" $W)
	if [ "$got" -ge 1 ] && [ "$(field .exit_code)" = 0 ]; then
		pass "t$tier/listen-true-reached"
	else
		fail "t$tier/listen-true-reached" "client reached it $got times; tool: $(field .stdout | tr '\n' ' ')"
	fi
	name=wd-inbound-l$tier-$$
	got=$(attack "$M" abstract-dgram "$name" abstract-dgram "$name" $W)
	[ "$got" -ge 1 ] && pass "t$tier/listen-true-unix-dgram" ||
		fail "t$tier/listen-true-unix-dgram" "client reached it $got times; tool: $(field .stdout | tr '\n' ' ')"
done

W=2500
# ---- SO_REUSEPORT: joining a host service's port -------------------------
# The host listener runs as the tools' default uid (a SO_REUSEPORT group
# admits sockets of the same uid only), answers "host", and counts.
port=$(free_port)
mkdir -m 1777 "$T/rp"
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 - "$port" "$T/rp/ready" <<'PY' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
open(sys.argv[2], "w").close()
while True:
    c, _ = s.accept()
    c.sendall(b"host\n")
    c.close()
PY
BG+=($!)
for i in $(seq 50); do [ -f "$T/rp/ready" ] && break; sleep 0.1; done
for cfg in 1h 2h; do
	M=$T/m$cfg.yaml
	"$WARDEN" exec --policy "$M" --json -- "$P" reuseport "$port" 4000 >"$T/out.json" 2>/dev/null &
	tp=$!
	sleep 1
	answers=$(python3 - "$port" <<'PY'
import socket, sys
got = []
for i in range(12):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    s.settimeout(2)
    try:
        got.append(s.recv(10).decode().strip() or "none")
    except OSError:
        got.append("none")
    s.close()
print(" ".join(got))
PY
)
	wait "$tp"
	hostn=$(printf '%s\n' $answers | grep -c '^host$')
	expect_eq "t$cfg/reuseport-all-12-reach-host" "$hostn" 12
	expect_match "t$cfg/reuseport-refused" "$(field .stdout)" "setsockopt SO_REUSEPORT: refused: Operation not permitted"
	expect_match "t$cfg/reuseport-denials-recorded" "$(denied_kinds)" "bind bind;.*syscall setsockopt"
done

# ---- ICMP: ping sockets with ping_group_range widened --------------------
# Stock systemd distributions admit every gid to ping sockets; this node's
# value is saved above and restored exactly on exit.
printf '0\t2147483647\n' >"$PGR"
echos4() { awk '/^Icmp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "InEchos") c = i; h = 1 } else print $c }' /proc/net/snmp; }
echos6() { awk '$1 == "Icmp6InEchos" { print $2 }' /proc/net/snmp6; }
for cfg in 1h 2h; do
	M=$T/m$cfg.yaml
	for fam in 4 6; do
		b=$(echos$fam)
		"$WARDEN" exec --policy "$M" --json -- "$P" ping $fam >"$T/out.json" 2>/dev/null
		a=$(echos$fam)
		expect_eq "t$cfg/ping$fam-no-echo-reached-host" "$((a - b))" 0
		expect_match "t$cfg/ping$fam-socket-refused" "$(field .stdout)" "socket ping: refused: Operation not permitted"
		expect_match "t$cfg/ping$fam-denial-recorded" "$(denied_kinds)" "syscall socket"
		"$WARDEN" exec --policy "$M" --json -- "$P" raw $fam >"$T/out.json" 2>/dev/null
		expect_match "t$cfg/raw$fam-socket-refused" "$(field .stdout)" "socket SOCK_RAW: refused: Operation not permitted"
	done
	# network.families: [icmp] lets ping sockets through (and shows the
	# host counter above does see a sandboxed ping)
	MI=$T/mi$cfg.yaml; manifest "$MI" "${cfg%h}" '["127.0.0.1:9"]' "families: [icmp]"
	b=$(echos4)
	"$WARDEN" exec --policy "$MI" --json -- "$P" ping 4 >"$T/out.json" 2>/dev/null
	a=$(echos4)
	[ "$((a - b))" -ge 1 ] && pass "t$cfg/ping4-with-icmp-family" ||
		fail "t$cfg/ping4-with-icmp-family" "echoes $((a - b)); tool: $(field .stdout | tr '\n' ' ')"
done
printf '%s\n' "$PGR_WAS" >"$PGR"
expect_eq ping_group_range-restored "$(cat "$PGR")" "$PGR_WAS"

# ---- policy check -----------------------------------------------------------
printf 'name: fam_key\ntier: 1\nnetwork:\n  families: [netlink, key]\n' >"$T/key.yaml"
out=$("$WARDEN" policy check "$T/key.yaml" 2>&1); rc=$?
expect_eq policy-families-key-exit "$rc" 1
expect_match policy-families-key-error "$out" "key.yaml:4:23: network.families: 'key' is not a socket family"
printf 'name: fam_icmp\ntier: 1\nnetwork: {families: [icmp]}\n' >"$T/icmp.yaml"
check policy-families-icmp-ok "$WARDEN" policy check "$T/icmp.yaml"
printf 'name: l3\ntier: 3\nnetwork:\n  allow: []\n  listen: true\n' >"$T/l3.yaml"
out=$("$WARDEN" policy check "$T/l3.yaml" 2>&1); rc=$?
expect_eq policy-listen-tier3-exit "$rc" 1
expect_match policy-listen-tier3-error "$out" "l3.yaml:5:11: 'network.listen': in tier 3 nothing outside the sandbox can reach a listener"
printf 'name: lx\ntier: 1\nnetwork: {listen: yes please}\n' >"$T/lx.yaml"
out=$("$WARDEN" policy check "$T/lx.yaml" 2>&1)
expect_match policy-listen-not-bool "$out" "lx.yaml:3:"

# ---- warden status reports ping_group_range -----------------------------------
st=$("$WARDEN" status --json 2>/dev/null)
expect_eq status-ping-group-range "$(printf '%s' "$st" | jq -r '.features.ping_group_range.value')" "$(tr '\t' ' ' <"$PGR")"
finish
