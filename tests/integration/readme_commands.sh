#!/usr/bin/env bash
# Every command line in README.md's ```sh blocks, run as written: the
# blocks in order as one bash session (set -e; a variable or a daemon one
# line starts is there for the next, as for a reader typing them), from a
# scratch directory where `build` is this build and `policy` the repo's
# policy/. Then the CLI's GNU option
# order (options after positionals, `--`), for the verbs the README does
# not show that way.
#
# What is adapted, and why (keep this list minimal):
#   - WARDEN_STATE and WARDEN_SOCKET (documented in README) point into the
#     test's scratch directory: the README's defaults are a deployment's
#     paths (/var/lib/warden, /run/warden), which a test must not touch.
#   - `make demo` is not run here: it is tests/integration/daemon_demo.sh's
#     subject (scripts/demo.sh, the same job).
#   - `make test` is not run here: it runs this test.
. tests/lib.sh
[ "$(id -u)" -eq 0 ] || { skip readme-commands "needs root"; finish; }
ROOT_DIR=$PWD
T=$(mktemp -d "${WARDEN_TEST_TMP:-/tmp}/warden-readme.XXXXXX")
chmod 711 "$T"
cleanup() { [ -n "${KEEP_T:-}" ] || rm -rf "$T"; }
trap cleanup EXIT
W=$T/work
mkdir -p "$W"
ln -s "$ROOT_DIR/$BUILD" "$W/build"
ln -s "$ROOT_DIR/policy" "$W/policy"
export WARDEN_STATE=$T/state WARDEN_SOCKET=$T/wardend.sock

# One session, top to bottom: a later block uses what an earlier one set
# (the daemon it started, $RUN). Each block ends with a marker line.
python3 - "$ROOT_DIR/README.md" "$T/session.sh" >"$T/nblocks" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
out = ["set -e -o pipefail",
       "trap 'echo \"README line failed ($?): $BASH_COMMAND\" >&2' ERR",
       # background jobs the session starts (wardend, a follower) end with it
       "trap 'rc=$?; set +e; j=$(jobs -p); [ -z \"$j\" ] || kill $j 2>/dev/null; wait; exit $rc' EXIT"]
n = 0
for b in blocks:
    lines = [l for l in b.splitlines()
             if l.strip() and not re.match(r"\s*make (demo|test)\b", l)]
    if not lines:
        continue
    n += 1
    out += lines + [f"echo '@@ block {n} ran'"]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print(n)
PY
nblocks=$(cat "$T/nblocks")
[ "$nblocks" -ge 3 ] && pass readme-blocks-found || fail readme-blocks-found "$nblocks sh blocks"
(cd "$W" && timeout 900 bash "$T/session.sh") >"$T/session.out" 2>&1
for i in $(seq "$nblocks"); do
	if grep -q "^@@ block $i ran" "$T/session.out"; then
		pass "readme-block$i"
	elif ! grep -q "^@@ block $((i - 1)) ran" "$T/session.out" && [ "$i" -gt 1 ]; then
		fail "readme-block$i" "not reached"
	else
		fail "readme-block$i" "$(grep -m1 'README line failed' "$T/session.out" || tail -3 "$T/session.out")"
	fi
done
run=$(grep -ho 'run_[0-9a-f]\{16\}' "$T/session.out" | head -1)
expect_match readme-run-ended-ok "$(cat "$T/session.out")" 'run_end +status=ok'

# ---- GNU option order, verbs and subcommands the README shows otherwise ----
P=$ROOT_DIR/policy/tools/shell.yaml
expect_match opt-policy-check-after-path "$("$WARDEN" policy check "$P" --json 2>&1)" '"ok": ?true'
expect_match opt-policy-before-sub "$("$WARDEN" policy --json check "$P" 2>&1)" '"ok": ?true'
if [ -n "$run" ]; then
	expect_match opt-trace-state-before-sub \
		"$("$WARDEN" trace --state "$WARDEN_STATE" show "$run" --json 2>&1 | head -c 2000)" "\"run_id\": \"$run\""
	expect_match opt-trace-json-last \
		"$("$WARDEN" trace ls --state "$WARDEN_STATE" --json 2>&1 | head -c 2000)" "\"run_id\": \"$run\""
else
	fail opt-trace "no run id in the README block's output"
fi
# warden exec: CMD's own options are CMD's, after `--` and without it
out=$("$WARDEN" exec --policy "$P" -- /bin/echo --json -x 2>/dev/null)
expect_eq opt-exec-dashdash-passthrough "$out" "--json -x"
out=$("$WARDEN" exec --policy "$P" /bin/echo --policy x --json 2>/dev/null)
expect_eq opt-exec-cmd-options-untouched "$out" "--policy x --json"
# a usage error is still one (exit 2), wherever the option is
"$WARDEN" trace ls --state "$WARDEN_STATE" --no-such-flag >/dev/null 2>&1
expect_eq opt-unknown-is-usage "$?" 2
finish
