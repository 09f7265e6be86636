#!/usr/bin/env bash
# `warden policy check`: shipped policy passes; each kind of error is
# reported as file:line:col with exit 1; cross-file references; --json;
# usage errors exit 2.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh
FIXP=$FIX/policy
tmp=$(mktemp -d /tmp/warden-policy-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# run W ARGS...: sets $out $err $rc
run() { out=$("$WARDEN" "$@" 2>"$tmp/stderr"); rc=$?; err=$(cat "$tmp/stderr"); }

[ -x "$WARDEN" ] || { fail policy-check-binary "no $WARDEN"; finish; }

run policy check policy
expect_eq shipped-policy-exit "$rc" 0
expect_match shipped-policy-ok "$out" '^ok: [0-9]+ files$'
nfiles=$(find policy -name '*.yaml' -o -name '*.yml' -o -name '*.json' | wc -l)
expect_eq shipped-policy-count "$out" "ok: $nfiles files"

run policy check policy/tools/fetch_url.yaml
expect_eq single-file "$rc:$out" "0:ok: 1 file"

# each kind of error names file:line:col
while read -r f want; do
	run policy check "$FIXP/$f"
	expect_eq "exit-$f" "$rc" 1
	expect_match "diag-$f" "$err" "^$FIXP/$f:$want"
done <<'LIST'
bad-unknown-key.yaml 3:1: unknown key 'timout_ms' in manifest \(did you mean 'timeout_ms'\?\)
bad-deep-key.yaml 8:3: unknown key 'wirte' in 'filesystem'
bad-types.yaml 2:7: 'tier' must be an integer, not a string
bad-missing.yaml 1:1: missing required key 'name' in manifest
bad-net.yaml 10:7: network.allow: 'fd00::1:443': IPv6 addresses must be written in brackets
bad-paths.yaml 5:18: 'filesystem.read': path 'usr/lib' must be absolute
bad-syscall.yaml 4:18: syscalls.deny: unknown system call 'not_a_syscall'
bad-syntax.yaml 4:1: YAML syntax error
bad-dup.yaml 4:1: duplicate key 'network' in manifest
bad-nul.yaml 3:8: 'exec': string contains a NUL byte
LIST

# several errors in one pass
run policy check "$FIXP/bad-types.yaml"
expect_eq several-errors-one-pass "$(printf '%s\n' "$err" | grep -c "^$FIXP/bad-types.yaml:")" 10

# a typo in a copy of a shipped manifest must fail, not be ignored
sed 's/^  allow:/  alow:/' policy/tools/search_internal_docs.yaml >"$tmp/typo.yaml"
run policy check "$tmp/typo.yaml"
expect_eq typo-exit "$rc" 1
expect_match typo-diag "$err" "^$tmp/typo.yaml:[0-9]+:3: unknown key 'alow' in 'network' \(did you mean 'allow'\?\)"

# directory walk: recursive, .yaml/.yml/.json, dot files and other
# extensions ignored, users.yaml and agents/ parsed with their parsers
mkdir -p "$tmp/tree/tools/sub" "$tmp/tree/agents" "$tmp/tree/.hidden"
cp policy/tools/fetch_url.yaml "$tmp/tree/tools/"
cp policy/tools/shell.yaml "$tmp/tree/tools/sub/shell.yml"
printf '{"name": "j", "tier": 1, "side_effects": "none"}\n' >"$tmp/tree/tools/j.json"
echo 'not: [valid' >"$tmp/tree/.hidden/x.yaml"
echo 'not yaml at all: [' >"$tmp/tree/tools/README.txt"
cat >"$tmp/tree/agents/a.yaml" <<'A'
name: a
team: t
model: default
system_prompt: hi
tools: [fetch_url, shell, j]
bounds: {max_steps: 3, token_budget: 1000, wall_clock_s: 10, cost_cap_usd: 0.1}
A
cp policy/users.yaml "$tmp/tree/users.yaml"
run policy check "$tmp/tree"
expect_eq tree-ok "$rc:$out" "0:ok: 5 files"
run policy check "$tmp/tree/"
expect_eq tree-trailing-slash "$rc:$out" "0:ok: 5 files"

# cross-file: an agent naming a tool that does not exist
sed -i 's/tools: \[fetch_url, shell, j\]/tools: [fetch_url, run_pythn, j]/' "$tmp/tree/agents/a.yaml"
run policy check "$tmp/tree"
expect_eq cross-missing-tool-exit "$rc" 1
expect_match cross-missing-tool "$err" "^$tmp/tree/agents/a.yaml:5:20: agent 'a': no tool 'run_pythn' in $tmp/tree/tools"
# the same agent file checked alone has no tree to refer to: no cross check
run policy check "$tmp/tree/agents/a.yaml"
expect_eq agent-alone "$rc:$out" "0:ok: 1 file"

# duplicate tool names across files
cp "$tmp/tree/tools/fetch_url.yaml" "$tmp/tree/tools/sub/fetch_url_copy.yaml"
sed -i 's/run_pythn/shell/' "$tmp/tree/agents/a.yaml"
run policy check "$tmp/tree"
expect_match cross-duplicate-tool "$err" "tool 'fetch_url' is also defined in"
rm "$tmp/tree/tools/sub/fetch_url_copy.yaml"

# agent parser is used under agents/: a manifest key there is an error
echo 'tier: 2' >>"$tmp/tree/agents/a.yaml"
run policy check "$tmp/tree"
expect_match agent-parser-used "$err" "^$tmp/tree/agents/a.yaml:7:1: unknown key 'tier' in agent"
sed -i '$d' "$tmp/tree/agents/a.yaml"

# users.yaml parser: dangling group
sed -i 's/groups: \[eng\]}        # demo user/groups: [engg]}/' "$tmp/tree/users.yaml"
run policy check "$tmp/tree"
expect_match users-parser-used "$err" "^$tmp/tree/users.yaml:7:[0-9]+: user 'alice': unknown group 'engg'"
cp policy/users.yaml "$tmp/tree/users.yaml"

# gateway.yaml: the agent's model must be an alias there
if [ -f policy/gateway.yaml ]; then
	cp policy/gateway.yaml "$tmp/tree/"
	[ -d policy/models ] && cp -r policy/models "$tmp/tree/"
	run policy check "$tmp/tree"
	expect_eq gateway-ok "$rc" 0
	sed -i 's/^model: default/model: no_such_alias/' "$tmp/tree/agents/a.yaml"
	run policy check "$tmp/tree"
	expect_match cross-model-alias "$err" "^$tmp/tree/agents/a.yaml:3:8: agent 'a': model 'no_such_alias' is not an alias or provider in $tmp/tree/gateway.yaml"
	sed -i 's/^model: no_such_alias/model: default/' "$tmp/tree/agents/a.yaml"
else
	skip cross-model-alias "no policy/gateway.yaml in this tree"
fi

# --json
run policy check --json "$FIXP/bad-unknown-key.yaml" "$FIXP/bad-missing.yaml"
expect_eq json-exit "$rc" 1
j=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); e=d["errors"]; print(d["ok"], d["files"], len(e), e[0]["line"], e[0]["col"], e[0]["message"])' 2>&1)
expect_eq json-errors "$j" "False 2 3 3 1 unknown key 'timout_ms' in manifest (did you mean 'timeout_ms'?)"
run policy check --json policy
j=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["ok"], len(d["errors"]))' 2>&1)
expect_eq json-ok "$rc:$j" "0:True 0"

# usage
run policy; expect_eq usage-no-subcommand "$rc" 2
run policy check; expect_eq usage-no-path "$rc" 2
run policy frobnicate; expect_eq usage-unknown-subcommand "$rc" 2
run policy check --frob x; expect_eq usage-unknown-option "$rc" 2
run policy check --help; expect_eq help-exit "$rc" 0
expect_match help-text "$out" 'usage: warden policy check'
run policy --help; expect_eq help-verb "$rc" 0
run policy check /nonexistent-warden-path
expect_eq missing-path "$rc" 1
finish
