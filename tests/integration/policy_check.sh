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
# policy/monitoring/ (Prometheus rules, Grafana dashboard) is not warden policy
nfiles=$(find policy -path policy/monitoring -prune -o \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) -print | wc -l)
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
bad-name-dns.yaml 6:7: 'network.allow' 'dns.internal:53': with a name in network.allow, every packet to port 53 goes to the call's resolver: the name could never be reached on that port
bad-name-dot-t3.yaml 5:7: 'network.allow' 'dot.internal:853': in tier 3 every packet to port 853 is dropped \(only the call's resolver answers names\): the name could never be reached on that port
bad-name-resolver-write.yaml 8:7: 'filesystem.write' '/run/systemd': with a name in network.allow, a write path may not reach a host resolver's unix socket \(/run/systemd/resolve\)
bad-nul.yaml 3:8: 'exec': string contains a NUL byte
bad-schema-type.yaml 7:18: args_schema: unknown type 'strin' \(did you mean 'string'\?\)
bad-schema-keyword.yaml 7:24: args_schema: keyword 'format' is not supported by warden's validator
bad-tag.yaml 4:13: YAML tag '!!python/object/apply:os.system' is not allowed in a policy file
LIST
# every unsupported keyword, not only the first
run policy check "$FIXP/bad-schema-keyword.yaml"
expect_match schema-keyword-second "$err" "^$FIXP/bad-schema-keyword.yaml:8:24: args_schema: keyword 'multipleOf' is not supported"
# a pattern in POSIX syntax means something else in JSON Schema's ECMA-262
sed "s|pattern: '^https?://\\\\S+\$'|pattern: '^https?://[^[:space:]]+\$'|" policy/tools/fetch_url.yaml >"$tmp/posix.yaml"
run policy check "$tmp/posix.yaml"
expect_match posix-pattern-refused "$rc:$err" "^1:$tmp/posix.yaml:17:51: args_schema: pattern: a lone '\]' or '\}'"

# several errors in one pass
run policy check "$FIXP/bad-types.yaml"
expect_eq several-errors-one-pass "$(printf '%s\n' "$err" | grep -c "^$FIXP/bad-types.yaml:")" 10

# a file with no manifest (empty, only a comment, only "---") is an error
# at 1:1 like any other, in text and --json
: >"$tmp/empty.yaml"
printf '# nothing yet\n' >"$tmp/comment.yaml"
printf -- '---\n' >"$tmp/dashes.yaml"
for f in empty comment dashes; do
	run policy check "$tmp/$f.yaml"
	expect_eq "no-manifest-exit-$f" "$rc" 1
	expect_eq "no-manifest-line-col-$f" "$(printf '%s\n' "$err" | head -1)" "$tmp/$f.yaml:1:1: no manifest in file"
done
run policy check --json "$tmp/empty.yaml"
expect_match no-manifest-json "$out" "\"file\": ?\"$tmp/empty.yaml\", ?\"line\": ?1, ?\"col\": ?1, ?\"message\": ?\"no manifest in file\""

# memory_mb below the floor: a call's first process is set up in its
# memory cgroup while it still shares the supervisor's memory
printf 'name: tiny\ntier: 2\nexec: ["/bin/true"]\nmemory_mb: 8\n' >"$tmp/tiny.yaml"
run policy check "$tmp/tiny.yaml"
expect_match memory-floor "$rc:$err" "^1:$tmp/tiny.yaml:4:12: 'memory_mb': 8 is out of range 16\.\.1048576"

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

# a tag outside the core schema is an error in every policy file, each
# with its own parser: users.yaml, an agent, gateway.yaml, daemon.yaml
cp policy/daemon.yaml "$tmp/tree/daemon.yaml"
sed -i 's/^  alice: {uid: 1000,/  alice: {uid: !!python\/object 1000,/' "$tmp/tree/users.yaml"
sed -i 's/^system_prompt: hi/system_prompt: !!binary aGk=/' "$tmp/tree/agents/a.yaml"
sed -i 's/^  size: 1 /  size: !!python\/name:os.system 1 /' "$tmp/tree/daemon.yaml"
if [ -f "$tmp/tree/gateway.yaml" ]; then
	sed -i '0,/^providers:/s/^providers:/providers: !ruby\/hash/' "$tmp/tree/gateway.yaml"
fi
run policy check "$tmp/tree"
expect_eq tag-tree-exit "$rc" 1
expect_match tag-users "$err" "^$tmp/tree/users.yaml:7:[0-9]+: YAML tag '!!python/object' is not allowed"
expect_match tag-agent "$err" "^$tmp/tree/agents/a.yaml:4:16: YAML tag '!!binary' is not allowed"
expect_match tag-daemon "$err" "^$tmp/tree/daemon.yaml:[0-9]+:9: YAML tag '!!python/name:os.system' is not allowed"
if [ -f "$tmp/tree/gateway.yaml" ]; then
	expect_match tag-gateway "$err" "^$tmp/tree/gateway.yaml:[0-9]+:12: YAML tag '!ruby/hash' is not allowed"
fi
cp policy/users.yaml "$tmp/tree/users.yaml"
sed -i 's/^system_prompt: !!binary aGk=/system_prompt: hi/' "$tmp/tree/agents/a.yaml"
rm "$tmp/tree/daemon.yaml"
[ -f policy/gateway.yaml ] && cp policy/gateway.yaml "$tmp/tree/"
run policy check "$tmp/tree"
expect_eq tag-tree-restored "$rc" 0

# uids.range in daemon.yaml: a range holding the node's accounts (here
# regular users' 1000-1999) or systemd's dynamic users is an error naming
# the conflict: a tool would run as that account
want="(uid [0-9]+ is the account '[^']+'|gid [0-9]+ is the group '[^']+'|holds uids up to 60000)"
acct=$(getent passwd | awk -F: '$3 >= 1000 && $3 <= 1999 { print "uid " $3 " is the account \x27" $1 "\x27"; exit }')
[ -n "$acct" ] && want=$acct
printf 'uids:\n  range: 1000-1999\n' >"$tmp/daemon.yaml"
run policy check "$tmp/daemon.yaml"
expect_eq uids-range-accounts-exit "$rc" 1
expect_match uids-range-accounts-error "$err" "^$tmp/daemon.yaml:2:10: 'uids.range': uid range '1000-1999': $want"
printf 'uids: {range: 61184-61300}\n' >"$tmp/daemon.yaml"
run policy check "$tmp/daemon.yaml"
expect_eq uids-range-dynamic-exit "$rc" 1
expect_match uids-range-dynamic-error "$err" "^$tmp/daemon.yaml:1:15: 'uids.range': uid range '61184-61300': (overlaps systemd's dynamic users|uid [0-9]+ is the account|gid [0-9]+ is the group)"
printf 'uids: {range: 1500000000-1500000099}\n' >"$tmp/daemon.yaml"
run policy check "$tmp/daemon.yaml"
expect_eq uids-range-clear-ok "$rc" 0
# the same judge for $WARDEN_UID_RANGE: the call is refused, nothing runs
printf 'name: u\ntier: 1\nexec: ["/usr/bin/true"]\nfilesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], exec: ["/usr/bin/true"]}\n' >"$tmp/u.yaml"
out=$(WARDEN_UID_DIR=$tmp/uids WARDEN_UID_RANGE=1000-1999 "$WARDEN" exec --policy "$tmp/u.yaml" -- /usr/bin/true 2>&1); rc=$?
expect_eq uids-env-range-accounts-exit "$rc" 125
expect_match uids-env-range-accounts-error "$out" "uid range '1000-1999': $want"
rm -rf "$tmp/daemon.yaml" "$tmp/u.yaml" "$tmp/uids"

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

# policy show: the manifest as loaded, canonical paths
run policy show policy/tools/shell.yaml
j=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["name"], d["tier"], d["exec"][0], d["filesystem"]["write"], d["side_effects"])' 2>&1)
expect_eq show-json "$rc:$j" "0:shell 2 /usr/bin/dash [] none"
run policy show "$FIXP/bad-dup.yaml"
expect_match show-bad "$rc:$err" "^1:$FIXP/bad-dup.yaml:4:1: duplicate key"

# The shipped tools run, as written, under the real sandbox (tiers 1-2;
# run_python is tier 3 and tested with the gVisor runner). Inputs go to
# stdin the way the broker passes them (the JSON args, or one field).
exec_of() { "$WARDEN" policy show "policy/tools/$1.yaml" | python3 -c 'import json,sys; print("\0".join(json.load(sys.stdin)["exec"]), end="")'; }
# tool NAME STDIN: runs the tool's exec, sets $out $err $rc
tool() {
	local -a argv
	mapfile -d '' -t argv < <(exec_of "$1")
	# the shipped names (search-svc.internal) on loopback, as the demo has them
	printf '127.0.0.1 search-svc.internal\n' >"$tmp/hosts"
	out=$(printf '%s' "$2" | timeout 60 "$WARDEN" exec --dns-hosts "$tmp/hosts" --policy "policy/tools/$1.yaml" --stdin - -- "${argv[@]}" 2>"$tmp/stderr")
	rc=$?; err=$(cat "$tmp/stderr")
}
if [ "$(id -u)" -ne 0 ]; then
	skip shipped-tools-run "needs root for the sandbox"
else
	tool shell 'echo hello | tr a-z A-Z'
	expect_eq tool-shell-runs "$rc:$out" "0:HELLO"
	tool shell 'cat /etc/shadow'
	expect_eq tool-shell-denied-read "$rc:$out" "1:"
	tool send_customer_email '{"recipients":["a@example.com"],"subject":"s","body":"b"}'
	expect_eq tool-send_customer_email-dry-run "$rc:$out" '0:DRY RUN, no email sent. Would send: {"recipients":["a@example.com"],"subject":"s","body":"b"}'
	tool compile_c "$(printf '#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')"
	expect_match tool-compile_c-compiles "$rc:$out" '^0:compiled: [0-9]+ bytes of object code$'
	tool compile_c 'int main(void) { return undeclared; }'
	expect_eq tool-compile_c-error-exit "$rc" 1
	expect_match tool-compile_c-diagnostics "$err" "prog.c:1:25: error: 'undeclared' undeclared"

	# fetch_url: a loopback server on its one allowed port
	# (a token tells our server from anything else on the port)
	token=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
	mkdir -p "$tmp/www" && echo "hello $token" >"$tmp/www/index.html"
	python3 -m http.server 8080 --bind 127.0.0.1 --directory "$tmp/www" >"$tmp/http.log" 2>&1 &
	hpid=$!
	ours=
	for _ in $(seq 50); do
		[ "$(curl -s http://127.0.0.1:8080/index.html)" = "hello $token" ] && { ours=1; break; }
		kill -0 "$hpid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$ours" ]; then
		skip tool-fetch_url "cannot serve on 127.0.0.1:8080 (in use?)"
	else
		tool fetch_url 'http://127.0.0.1:8080/index.html'
		expect_eq tool-fetch_url-allowed "$rc:$out" "0:hello $token"
		tool fetch_url 'http://127.0.0.2:8080/index.html'
		expect_eq tool-fetch_url-other-address-denied "$rc" 7
		expect_match tool-fetch_url-denial-reported "$err" 'denied .*127\.0\.0\.2:8080'
		tool fetch_url 'file:///etc/passwd'
		expect_eq tool-fetch_url-no-file-scheme "$rc:$out" "1:"
	fi
	kill "$hpid" 2>/dev/null; wait "$hpid" 2>/dev/null

	# search_internal_docs: a fake search service on 127.0.0.1:9200
	cat >"$tmp/search.py" <<'PY'
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        q = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        b = json.dumps({"hits": [{"doc": "runbook.md", "q": q["query"]}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b)))
        self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 9200), H).serve_forever()
PY
	python3 "$tmp/search.py" >"$tmp/search.log" 2>&1 &
	spid=$!
	ours=
	for _ in $(seq 50); do
		[ "$(curl -s -X POST -d "{\"query\":\"$token\"}" http://127.0.0.1:9200/search)" = "{\"hits\": [{\"doc\": \"runbook.md\", \"q\": \"$token\"}]}" ] && { ours=1; break; }
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$ours" ]; then
		skip tool-search_internal_docs "cannot serve on 127.0.0.1:9200 (in use?)"
	else
		tool search_internal_docs "{\"query\":\"rotation $token\"}"
		expect_eq tool-search_internal_docs "$rc:$out" "0:{\"hits\": [{\"doc\": \"runbook.md\", \"q\": \"rotation $token\"}]}"
	fi
	kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
fi
finish
