#!/usr/bin/env bash
# A name in network.allow through wardend (--dns-hosts: names of the
# operator's own): a run's tool (tier 1) resolves the allowed name and
# reaches its port; a connect to another port of the same address is
# denied, and the denial names the name as well as the address
# (`svc.test:B (127.0.0.1)`) in the trace's denial record and in the
# node's event stream (/v1/events); a name the manifest does not list is
# NXDOMAIN, recorded as a `dns.name` denial with the name in both.
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
mkdir -m 755 "$T/pub"
cat >"$T/pub/probe.py" <<PY
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
print(dial("svc.test", $A)); print(dial("svc.test", $B)); print(dial("evil.test", $A))
PY
chmod 644 "$T/pub/probe.py"
tool dial '["/usr/bin/python3", "'"$T"'/pub/probe.py"]' "input: argv" \
	"args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:x\"]}" "side_effects: none"
sed -i -e "s|network: {allow: \[\]}|network: {allow: [\"svc.test:$A\"], allow_private: [\"127.0.0.1/32\"]}|" \
	-e "s|filesystem: {read: \[|filesystem: {read: [\"$T/pub/probe.py\", \"/usr/lib/python3\", \"/usr/lib/python3.11\", |" \
	"$POL/tools/dial.yaml"
script dialer <<'S'
{"step": 0, "tool_calls": [{"name": "dial", "arguments": {}}]}
{"text": "final: {{result}}"}
S
agent dialer dialer '[dial]'
write_gateway
printf 'dns: {hosts: "%s"}\n' "$T/hosts" >"$POL/daemon.yaml"
"$WARDEN" policy check "$POL" >"$T/pc" 2>&1 || fail names-policy "$(cat "$T/pc")"
start_daemon || { fail daemon-start "see log"; kill "$LPID"; finish; }
out=$(as_user 1000 "$WARDEN" run --json dialer go 2>&1)
id=$(printf '%s\n' "$out" | grep -o 'run_[0-9a-f]\{16\}' | head -1)
expect_match names-allowed-reached "$out" "svc.test:$A pong"
expect_match names-other-port-denied "$out" "svc.test:$B PermissionError"
expect_match names-unlisted-nxdomain "$out" "evil.test gaierror"
expect_eq names-listener-hits "$(sort "$T/hits" | tr '\n' ' ')" "A "
den=$(recs_of "$id" denial | jq_py '"\n".join("%s %s %s" % (x["event"].get("source"), x["event"].get("kind"), x["event"].get("target")) for x in d)')
expect_match names-trace-connect-named "$den" "connect svc\.test:$B \(127\.0\.0\.1\)"
expect_match names-trace-dns-name "$den" "resolver dns\.name evil\.test"
ev=$(curl -s --unix-socket "$SOCK" "http://w/v1/events?since=0")
expect_match names-events-connect-named "$ev" "\"target\": ?\"svc\.test:$B \(127\.0\.0\.1\)\""
expect_match names-events-dns-name "$ev" "\"kind\": ?\"dns\.name\"[^}]*\"target\": ?\"evil\.test\"|\"target\": ?\"evil\.test\"[^}]*\"kind\": ?\"dns\.name\""
stop_daemon
kill "$LPID" 2>/dev/null
finish
