#!/usr/bin/env bash
# A name in network.allow through wardend (--dns-hosts: names of the
# operator's own), in each tier (3 where runsc is installed): a run's tool
# resolves the allowed name and
# reaches its port; a connect to another port of the same address is
# denied, and the denial names the name as well as the address
# (`svc.test:B (127.0.0.1)`) in the trace's denial record and in the
# node's event stream (/v1/events); a name the manifest does not list is
# NXDOMAIN, recorded as a `dns.name` denial with the name in both. Tier 3
# reaches the node's loopback at its link's gateway (sandbox/gvisor_net.c)
# and a denied connect is refused there (ECONNREFUSED, not EPERM).
# Judged outside: the host listeners' log, the trace, the stream.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-names "needs root"; finish; }

two_listeners # A, B, LPID; $T/hits
: >"$T/hits"
echo "127.0.0.1 svc.test" >"$T/hosts"
base_policy
# the tool runs as a uid of the pool's: its script in a directory it may
# reach
chmod 711 "$T"
# (under /run: tier 2 mounts a tmpfs of its own on /tmp)
PUB=$(mktemp -d /run/warden-dn.XXXXXX)
chmod 755 "$PUB"
trap 'cleanup_all; rm -rf "$PUB"' EXIT
cat >"$PUB/probe.py" <<PY
import socket
def dial(name, port):
    try:
        a = socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
    except Exception as e:
        return "%s %s" % (name, type(e).__name__)
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect(a); return "%s:%d %s" % (name, port, s.recv(4).decode())
    except Exception as e:
        return "%s:%d %s" % (name, port, type(e).__name__)
import sys
print(dial("svc.test", $A)); print(dial("svc.test", $B)); print(dial(sys.argv[1], $A))
PY
chmod 644 "$PUB/probe.py"
TIERS="1 2"
if command -v runsc >/dev/null; then
	TIERS="1 2 3"
	export WARDEN_RUNTIME_DIR=$T/run
	mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
else
	skip names-tier3 "runsc not installed: no tier-3 call can run"
fi
for t in $TIERS; do
	tool "dial$t" '["/usr/bin/python3", "'"$PUB"'/probe.py", "evil'"$t"'.test"]' "input: argv" \
		"args_schema: {type: object}" \
		"auth: {mode: on_behalf_of_user, scopes: [\"test:x\"]}" "side_effects: none"
	sed -i -e "s|^tier: 1$|tier: $t|" \
		-e "s|network: {allow: \[\]}|network: {allow: [\"svc.test:$A\"], allow_private: [\"127.0.0.1/32\"]}|" \
		-e "s|filesystem: {read: \[|filesystem: {read: [\"$PUB/probe.py\", \"/usr/lib/python3\", \"/usr/lib/python3.11\", |" \
		"$POL/tools/dial$t.yaml"
	# tier 2 sees only the listed paths: the resolver library's files
	[ "$t" = 2 ] && sed -i "s|filesystem: {read: \[|filesystem: {read: [\"/etc/resolv.conf\", \"/etc/nsswitch.conf\", \"/etc/hosts\", |" "$POL/tools/dial$t.yaml"
	script "dialer$t" <<S
{"step": 0, "tool_calls": [{"name": "dial$t", "arguments": {}}]}
{"text": "final: {{result}}"}
S
	agent "dialer$t" "dialer$t" "[dial$t]"
done
write_gateway
printf 'dns: {hosts: "%s"}\n' "$T/hosts" >"$POL/daemon.yaml"
"$WARDEN" policy check "$POL" >"$T/pc" 2>&1 || fail names-policy "$(cat "$T/pc")"
start_daemon || { fail daemon-start "see log"; kill "$LPID"; finish; }
for t in $TIERS; do
	: >"$T/hits"
	out=$(as_user 1000 "$WARDEN" run --json "dialer$t" go 2>&1)
	id=$(printf '%s\n' "$out" | grep -o 'run_[0-9a-f]\{16\}' | head -1)
	refused=PermissionError
	[ "$t" = 3 ] && refused=ConnectionRefusedError
	expect_match "t$t-names-allowed-reached" "$out" "svc.test:$A pong"
	expect_match "t$t-names-other-port-denied" "$out" "svc.test:$B $refused"
	expect_match "t$t-names-unlisted-nxdomain" "$out" "evil$t.test gaierror"
	expect_eq "t$t-names-listener-hits" "$(sort "$T/hits" | tr '\n' ' ')" "A "
	den=$(recs_of "$id" denial | jq_py '"\n".join("%s %s %s" % (x["event"].get("source"), x["event"].get("kind"), x["event"].get("target")) for x in d)')
	expect_match "t$t-names-trace-connect-named" "$den" "connect svc\.test:$B \(127\.0\.0\.1\)"
	expect_match "t$t-names-trace-dns-name" "$den" "resolver dns\.name evil$t\.test"
	# the stream's events of this run
	ev=$(curl -s --unix-socket "$SOCK" "http://w/v1/events?since=0" | grep "\"run_id\": \?\"$id\"")
	expect_match "t$t-names-events-connect-named" "$ev" "\"target\": ?\"svc\.test:$B \(127\.0\.0\.1\)\""
	expect_match "t$t-names-events-dns-name" "$ev" "\"kind\": ?\"dns\.name\"[^}]*\"target\": ?\"evil$t\.test\"|\"target\": ?\"evil$t\.test\"[^}]*\"kind\": ?\"dns\.name\""
done
stop_daemon
kill "$LPID" 2>/dev/null
finish
