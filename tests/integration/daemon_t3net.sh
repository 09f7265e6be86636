#!/usr/bin/env bash
# Tier 3 with a non-empty network.allow through wardend (its own egress
# object, the node-wide ring routed to calls by cgroup id, one tc object
# for every call): the run's tool call reaches the allowed loopback
# listener at its gateway and nothing else, cold and then from the warm
# pool (a warm sandbox boots with a link of its own); its denial is in the
# trace, named by the host-side program's record. Judged outside: the host
# listener's log, the trace.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-t3net "needs root"; finish; }
command -v runsc >/dev/null || { skip daemon-t3net "runsc not installed: no tier-3 call can run"; finish; }

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
two_listeners # A, B, LPID; $T/hits
: >"$T/hits"
base_policy
sed -e 's/scopes: \["code:run"\]/scopes: ["test:code"]/' \
	-e "s/network: {allow: \[\]}/network: {allow: [\"127.0.0.1:$A\"]}/" \
	policy/tools/run_python.yaml >"$POL/tools/run_python.yaml"
code="import socket\\ngw = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]\\nfor p in ($A, $B):\\n    s = socket.socket(); s.settimeout(3)\\n    try:\\n        s.connect((gw, p)); print(p, s.recv(4).decode())\\n    except Exception as e:\\n        print(p, type(e).__name__)\\n"
script py <<S
{"step": 0, "tool_calls": [{"name": "run_python", "arguments": {"code": "$code"}}]}
{"text": "final: {{result}}"}
S
agent py py '[run_python]'
write_gateway
printf 'warm_pool: {size: 1, per_tenant: 4, idle_s: 300, key_idle_s: 600, max_keys: 8}\n' >"$POL/daemon.yaml"
start_daemon || { fail daemon-start "see log"; kill "$LPID"; finish; }
out=$(as_user 1000 "$WARDEN" run --json py go 2>&1)
id=$(printf '%s\n' "$out" | grep -o 'run_[0-9a-f]\{16\}' | head -1)
expect_match t3net-allowed-reached "$out" "$A pong"
expect_match t3net-other-refused "$out" "$B ConnectionRefusedError"
expect_eq t3net-listener-hits "$(sort "$T/hits" | tr '\n' ' ')" "A "
tr=$(recs_of "$id" tool_result)
expect_match t3net-cold "$(printf '%s' "$tr" | jq_py '[x.get("enforcement",{}).get("pool") for x in d]')" 'cold start'
expect_match t3net-link "$(printf '%s' "$tr" | jq_py '[x.get("enforcement",{}).get("network") for x in d]')" 'tc BPF allow-list'
expect_match t3net-denial-recorded "$(recs_of "$id" denial | jq_py '[x["event"].get("target") for x in d]')" "127\.0\.0\.1:$B"
# the pool refilled with a sandbox of this shape (its own link, filter
# and resolver, made at its boot): the next call takes it, same outcome
metric() { api GET /metrics | sed -n "s/^$1 //p"; }
pool_ready() { [ "$(metric warden_pool_ready)" = 1 ]; }
wait_until 30 pool_ready || fail t3net-pool-ready "no warm sandbox: $(api GET /metrics | grep warden_pool_ | tr '\n' ' ')"
: >"$T/hits"
out=$(as_user 1000 "$WARDEN" run --json py go 2>&1)
id=$(printf '%s\n' "$out" | grep -o 'run_[0-9a-f]\{16\}' | head -1)
expect_match t3net-pool-allowed-reached "$out" "$A pong"
expect_match t3net-pool-other-refused "$out" "$B ConnectionRefusedError"
expect_eq t3net-pool-listener-hits "$(sort "$T/hits" | tr '\n' ' ')" "A "
expect_match t3net-pool-hit "$(recs_of "$id" tool_result | jq_py '[x.get("enforcement",{}).get("pool") for x in d]')" 'warm'
expect_match t3net-pool-denial "$(recs_of "$id" denial | jq_py '[x["event"].get("target") for x in d]')" "127\.0\.0\.1:$B"
stop_daemon
kill "$LPID" 2>/dev/null
finish
