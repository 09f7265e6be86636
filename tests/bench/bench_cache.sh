#!/usr/bin/env bash
# Prompt caching, measured now against the loopback fake (which reports
# cache writes and reads the way the Anthropic Messages API does: a prefix
# ending at a cache_control block is written, a later request repeating it
# reads it; tests/fakemodel/fakemodel.py): the input cost of one 30-step run
# (a ~2,000-token system prompt, one tool call per step) with the provider's
# cache_ttl off and with the default 5-minute breakpoints, printed side by
# side as a ratio. Prices: the provider table's multipliers on a 1 $/M
# input price (writes 1.25x, reads 0.1x), output priced 0 so the figure is
# input only. Goal: <= 0.3x the uncached bill. Nothing asserted.
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { echo "bench_cache: needs root"; exit 0; }

start_fake
[ -n "$FAKE_PORT" ] || { echo "fake model did not start"; exit 1; }
base_policy
cat >"$POL/aliases.part" <<'Y'
  cached: [{provider: fb, model: m2}]
  uncached: [{provider: fc, model: m2}]
Y
write_gateway
sed -i "s|^  fb: .*|&\n  fc: {kind: anthropic, base_url: \"http://127.0.0.1:$FAKE_PORT/b\", api_key_env: FAKE_KEY, timeout_ms: 5000, cache_ttl: off}|; s|^  m2: .*|  m2: {input: 1.0, output: 0}|" "$POL/gateway.yaml"
for a in cached uncached; do
	agent "$a" "$a" '[echo]' 40
	python3 - "$POL/agents/$a.yaml" <<'P'
import sys
p = sys.argv[1]
s = open(p).read()
rules = " ".join("Rule %d: answer precisely, cite the tool output you used, and never guess a value the tools can give." % i
                 for i in range(1, 90))
s = s.replace('system_prompt: "You are a test agent."', 'system_prompt: "You are a test agent. %s"' % rules)
open(p, "w").write(s)
P
done
start_daemon || exit 1

# one run of AGENT: 29 tool calls, then an answer; prints its cost
run30() {
	local q='[' i
	for i in $(seq 1 29); do
		q="$q{\"reply\": {\"text\": \"step $i\", \"tool_calls\": [{\"name\": \"echo\", \"arguments\": {\"n\": \"value $i\"}}]}},"
	done
	fake_ctl "{\"lane\": \"b\", \"reset\": true, \"queue\": $q{\"reply\": {\"text\": \"done\"}}]}"
	local out end
	out=$(as_user 1000 "$WARDEN" run --json "$1" "walk 30 steps" 2>&1)
	end=$(printf '%s\n' "$out" | grep '"type":"run_end"')
	printf '%s' "$end" | jq_py '"%s %d %d" % (d["status"], d["steps"], d["gen_ai.usage.input_tokens"])' >&2
	printf '%s' "$end" | jq_py '"%.6f" % d["cost_usd"]'
}
unc=$(run30 uncached 2>"$T/u")
cac=$(run30 cached 2>"$T/c")
read -r us usteps utok <"$T/u"
read -r cs csteps ctok <"$T/c"
printf 'uncached: %s, %s steps, %s input tokens, input cost $%s\n' "$us" "$usteps" "$utok" "$unc"
printf 'cached (cache_ttl 5m): %s, %s steps, %s input tokens, input cost $%s\n' "$cs" "$csteps" "$ctok" "$cac"
printf 'ratio cached / uncached input cost: %.3f (goal <= 0.3)\n' "$(echo "$cac / $unc" | bc -l)"
stop_daemon
