#!/usr/bin/env bash
# input: argv through the real broker (wardend, scripted model, tier-1
# sandbox): a "list files" tool built on `find DIR` must not become
# `find DIR -delete` when the model adds a key or sends a value starting
# with '-'. The verdict is outside the sandbox: the host files in the
# scratch directory still exist, no attempt was recorded, and the model got
# a schema error it could read. A positive control shows the same tool can
# reach (and so could delete) those files. Then the argv template and the
# schema's property order place values where the manifest says, whatever
# the model's JSON key order.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip agent-argv "needs root"; finish; }

base_policy
SCR=$T/scratch
mkdir -p "$SCR/sub"
for f in keep1 keep2 sub/keep3; do echo "host file $f" >"$SCR/$f"; done
# any uid the call runs as may delete here: only the broker stands between
# the model and the files
chmod 777 "$SCR" "$SCR/sub"
chmod 666 "$SCR"/keep1 "$SCR"/keep2 "$SCR"/sub/keep3

# `find DIR`, with additionalProperties left open: unknown keys must be
# refused anyway
tool lsdir '["/usr/bin/find"]' "input: argv" \
	"args_schema: {type: object, required: [dir], properties: {dir: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:ls\"]}" "side_effects: none"
sed -i "s|read: \[|read: [\"$SCR\", |; s|write: \[\]|write: [\"$SCR\"]|" "$POL/tools/lsdir.yaml"
# no template: "--", then the schema's order (b before a)
tool ord '["/usr/bin/echo"]' "input: argv" \
	"args_schema: {type: object, required: [b, a], properties: {b: {type: string}, a: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:ls\"]}" "side_effects: none"

inj_script() { # NAME ARGS_JSON
	script "$1" <<S
{"step": 0, "tool_calls": [{"name": "lsdir", "arguments": $2}]}
{"after": "lsdir", "error": true, "text": "schema error seen: {{result}}"}
{"after": "lsdir", "text": "tool ran: {{result}}"}
{"text": "other: {{last}}"}
S
}
inj_script extrakey "{\"dir\": \"$SCR\", \"zz\": \"-delete\"}"
inj_script dashval '{"dir": "-delete"}'
inj_script lsok "{\"dir\": \"$SCR\"}"
script tmplrun <<'S'
{"step": 0, "tool_calls": [{"name": "tmpl", "arguments": {"first": "1", "list": ["a", "b c"], "n": 7, "second": "2"}}]}
{"after": "tmpl", "text": "out=[{{result.stdout}}]"}
{"text": "other: {{last}}"}
S
script ordrun <<'S'
{"step": 0, "tool_calls": [{"name": "ord", "arguments": {"a": "A", "b": "B"}}]}
{"after": "ord", "text": "out=[{{result.stdout}}]"}
{"text": "other: {{last}}"}
S
for a in extrakey dashval lsok ordrun; do
	case $a in ordrun) t='[ord]' ;; *) t='[lsdir]' ;; esac
	agent "$a" "$a" "$t"
done
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

end_of() { printf '%s\n' "$1" | grep '"type":"run_end"' | head -1; }
seed_files() {
	mkdir -p "$SCR/sub" && chmod 777 "$SCR/sub"
	for f in keep1 keep2 sub/keep3; do echo "host file $f" >"$SCR/$f"; done
	chmod 666 "$SCR"/keep1 "$SCR"/keep2 "$SCR"/sub/keep3
}
files_left() { local n=0 f; for f in keep1 keep2 sub/keep3; do [ -f "$SCR/$f" ] && n=$((n + 1)); done; echo "$n"; }

# run NAME: the run's records into $out (as alice, uid 1000)
run() { out=$(as_user 1000 "$WARDEN" run --json "$1" go 2>&1); }

# NAME WHY: each refused as a schema error naming WHY, the files kept
for c in "extrakey|unknown property 'zz'" "dashval|dir: a value that starts with '-'"; do
	a=${c%%|*}
	seed_files
	run "$a"
	expect_eq "$a-host-files-kept" "$(files_left)" 3
	r=$(printf '%s\n' "$out" | grep '"type":"tool_result"' | head -1)
	expect_match "$a-schema-refusal" "$r" '"status":"invalid".*"check":"schema"'
	expect_eq "$a-never-attempted" "$(printf '%s\n' "$out" | grep -c '"type":"tool_attempt"')" 0
	expect_match "$a-model-saw-schema-error" "$(end_of "$out")" "schema error seen: .*invalid arguments for 'lsdir'.*${c#*|}"
done

# control: the same tool, a plain call, lists the files it could have
# deleted (so the refusals above are the broker's, not a missing grant)
run lsok
expect_match lsok-runs "$(end_of "$out")" "tool ran: .*keep1.*keep2"
expect_eq lsok-files-kept "$(files_left)" 3
expect_match lsok-ok "$(printf '%s\n' "$out" | grep '"type":"tool_result"' | head -1)" '"status":"ok"'

run ordrun
expect_match schema-order-after-dashdash "$(end_of "$out")" 'out=\[-- B A\]'
stop_daemon

# the template tool in a policy of its own (a parser that does not know
# `argv:` refuses the whole policy)
# a template: values in its order, a list spread, a value inside an element
tool tmpl '["/usr/bin/echo"]' "input: argv" \
	"args_schema: {type: object, required: [first, second, list, n], properties: {first: {type: string}, second: {type: string}, list: {type: array, items: {type: string}}, n: {type: integer}}}" \
	'argv: ["{second}", "x-{first}", "--", "{list}", "n={n}"]' \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:ls\"]}" "side_effects: none"
agent tmplrun tmplrun '[tmpl]'
start_daemon || { fail template-daemon-start "see log"; finish; }
run tmplrun
expect_match template-order "$(end_of "$out")" 'out=\[2 x-1 -- a b c n=7\]'
stop_daemon
finish
