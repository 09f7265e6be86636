#!/usr/bin/env bash
# Tier 3 beyond the node through wardend (sandbox/t3beyond.h): one daemon,
# one libnftables context for every call, calls cold and from the warm
# pool (a warm sandbox boots routed beyond the node: its own table and
# forwarding). The daemon runs in a "node" of the test's own, a network
# namespace N with net.ipv4.ip_forward=1 inside it, joined to a "remote"
# namespace R (10.231.0.1/30 in N, 10.231.0.2/30 in R); the host's sysctls
# and firewall are never touched. Judged outside the sandbox: R's listener
# logs each connection with its peer's address (N's, when the source was
# translated), the trace holds the denial, nft/ip in N show what is left.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-t3beyond "needs root"; finish; }
command -v runsc >/dev/null || { skip daemon-t3beyond "runsc not installed: no tier-3 call can run"; finish; }
command -v nft >/dev/null || { skip daemon-t3beyond "nft not installed (Debian package nftables)"; finish; }
command -v nsenter >/dev/null || { skip daemon-t3beyond "nsenter not installed"; finish; }

N=wdt3dN$$
R=wdt3dR$$
LPID=
cleanup() {
	cleanup_all
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null
	ip netns del "$N" 2>/dev/null
	ip netns del "$R" 2>/dev/null
}
trap cleanup EXIT
inN() { nsenter --net="/run/netns/$N" "$@"; }
ip netns add "$N" && ip netns add "$R" || { fail daemon-t3beyond-setup "cannot make network namespaces"; finish; }
ip -n "$N" link set lo up
ip -n "$R" link set lo up
ip link add up0 netns "$N" type veth peer name dn0 netns "$R"
ip -n "$N" addr add 10.231.0.1/30 dev up0
ip -n "$R" addr add 10.231.0.2/30 dev dn0
ip -n "$N" link set up0 up
ip -n "$R" link set dn0 up
inN sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward'

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
A=18090 B=18091
nsenter --net="/run/netns/$R" python3 - "$T" "$A" "$B" <<'PY' &
import socket, sys, threading
d, A, B = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def tcp(port, tag):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(16)
    def loop():
        while True:
            c, peer = s.accept(); open(d + "/hits", "a").write("%s %s\n" % (tag, peer[0]))
            c.sendall(b"pong"); c.close()
    threading.Thread(target=loop, daemon=True).start()
tcp(A, "A"); tcp(B, "B")
open(d + "/listen.ready", "w").write("ok")
threading.Event().wait()
PY
LPID=$!
for _ in $(seq 100); do [ -f "$T/listen.ready" ] && break; sleep 0.05; done
: >"$T/hits"
base_policy
sed -e 's/scopes: \["code:run"\]/scopes: ["test:code"]/' \
	-e "s/network: {allow: \[\]}/network: {allow: [\"10.231.0.2:$A\"]}/" \
	policy/tools/run_python.yaml >"$POL/tools/run_python.yaml"
code="import socket\\nfor p in ($A, $B):\\n    s = socket.socket(); s.settimeout(3)\\n    try:\\n        s.connect(('10.231.0.2', p)); print(p, s.recv(4).decode())\\n    except Exception as e:\\n        print(p, type(e).__name__)\\n"
script py <<S
{"step": 0, "tool_calls": [{"name": "run_python", "arguments": {"code": "$code"}}]}
{"text": "final: {{result}}"}
S
agent py py '[run_python]'
write_gateway
printf 'warm_pool: {size: 1, per_tenant: 4, idle_s: 300, key_idle_s: 600, max_keys: 8}\n' >"$POL/daemon.yaml"
# wardend in N (nsenter execs it: its pid is the daemon's)
printf '#!/bin/sh\nexec nsenter --net=/run/netns/%s %s "$@"\n' "$N" "$WARDEND" >"$T/wardend-in-node"
chmod 755 "$T/wardend-in-node"
WARDEND=$T/wardend-in-node
start_daemon || { fail daemon-start "see log"; finish; }
out=$(as_user 1000 "$WARDEN" run --json py go 2>&1)
id=$(printf '%s\n' "$out" | grep -o 'run_[0-9a-f]\{16\}' | head -1)
expect_match t3beyond-d-allowed-reached "$out" "$A pong"
expect_match t3beyond-d-other-refused "$out" "$B ConnectionRefusedError"
expect_eq t3beyond-d-remote-hits "$(sort "$T/hits" | tr '\n' ' ')" "A 10.231.0.1 "
tr=$(recs_of "$id" tool_result)
expect_match t3beyond-d-cold "$(printf '%s' "$tr" | jq_py '[x.get("enforcement",{}).get("pool") for x in d]')" 'cold start'
expect_match t3beyond-d-routed "$(printf '%s' "$tr" | jq_py '[x.get("enforcement",{}).get("network_beyond") for x in d]')" 'forwarded from w3h.*source NAT'
expect_match t3beyond-d-denial "$(recs_of "$id" denial | jq_py '[x["event"].get("target") for x in d]')" "10\.231\.0\.2:$B"
# the warm sandbox of this shape boots routed beyond the node: its table
# is there while it waits, with the daemon's one libnftables context
metric() { api GET /metrics | sed -n "s/^$1 //p"; }
pool_ready() { [ "$(metric warden_pool_ready)" = 1 ]; }
wait_until 30 pool_ready || fail t3beyond-d-pool-ready "no warm sandbox: $(api GET /metrics | grep warden_pool_ | tr '\n' ' ')"
expect_eq t3beyond-d-warm-table "$(inN nft list tables | grep -c 'table ip warden_w3h')" 1
: >"$T/hits"
out=$(as_user 1000 "$WARDEN" run --json py go 2>&1)
id=$(printf '%s\n' "$out" | grep -o 'run_[0-9a-f]\{16\}' | head -1)
expect_match t3beyond-d-pool-allowed-reached "$out" "$A pong"
expect_match t3beyond-d-pool-other-refused "$out" "$B ConnectionRefusedError"
expect_eq t3beyond-d-pool-remote-hits "$(sort "$T/hits" | tr '\n' ' ')" "A 10.231.0.1 "
expect_match t3beyond-d-pool-hit "$(recs_of "$id" tool_result | jq_py '[x.get("enforcement",{}).get("pool") for x in d]')" 'warm'
stop_daemon
# the daemon stopped: no call's table or link is left in N
links_left() { inN ip -o link show 2>/dev/null | grep -c ' w3h' || true; }
for _ in $(seq 50); do [ "$(links_left)" = 0 ] && break; sleep 0.1; done
expect_eq t3beyond-d-no-links-left "$(links_left)" 0
expect_eq t3beyond-d-no-table-left "$(inN nft list tables | grep -c 'warden_w3h' || true)" 0
finish
