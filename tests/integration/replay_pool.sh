#!/usr/bin/env bash
# A replay's tier-3 calls are cold starts, never the warm pool: a replay's
# manifests (recorded, parsed for it alone) are freed when it ends, while a
# pool key must outlive the pool (its refill thread boots sandboxes from
# the key's manifest). Witnessed through /metrics: the replay's live call
# adds no pool key and no pool miss, and its tool_result says cold start.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip replay-pool "needs root"; finish; }
command -v runsc >/dev/null || { skip replay-pool "runsc not installed: no tier-3 call can run"; finish; }

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
base_policy
sed 's/scopes: \["code:run"\]/scopes: ["test:code"]/' policy/tools/run_python.yaml >"$POL/tools/run_python.yaml"
script py <<'S'
{"step": 0, "tool_calls": [{"name": "run_python", "arguments": {"code": "print('hello ' + 'pool')\n"}}]}
{"text": "final: {{result}}"}
S
agent py py '[run_python]'
write_gateway
printf 'warm_pool: {size: 1, per_tenant: 4, idle_s: 300, key_idle_s: 600, max_keys: 8}\n' >"$POL/daemon.yaml"
start_daemon || { fail daemon-start "see log"; finish; }
metric() { api GET /metrics | sed -n "s/^$1 //p"; }

out=$(as_user 1000 "$WARDEN" run --json py go 2>&1)
id=$(printf '%s\n' "$out" | grep -o 'run_[0-9a-f]\{16\}' | head -1)
expect_match original-ok "$out" 'hello pool'
expect_eq original-pool "$(metric warden_pool_keys):$(metric warden_pool_misses_total)" 1:1
out=$(as_user 1000 "$WARDEN" replay "$id" --from 0 2>&1)
rid=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p')
expect_match replay-ran-live "$(recs_of "$rid" tool_result | jq_py '[x["status"]+":"+str(x.get("enforcement",{}).get("pool")) for x in d]')" 'ok:cold start'
expect_eq replay-no-pool-key "$(metric warden_pool_keys):$(metric warden_pool_misses_total)" 1:1
stop_daemon
finish
