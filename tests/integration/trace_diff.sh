#!/usr/bin/env bash
# `warden trace diff A B`: on a store written from the documented format
# (trace_lib/store.py): an original and its replay from step 3 (steps 0-2
# from the record, then another answer, other send_mail arguments, the call
# refused, no step 4) show the first difference at step 3, naming the
# changed output, the differing argument and the missing step; another run
# with a different tool at step 1 and a different result at step 2 is told
# apart; a run against itself has no divergence; --json and --html agree.
# The steps are aligned by what they did: run-d is run-a with one step
# more inserted at step 2, and the diff says exactly that (one extra step
# at 2, every other step the same, paired 2/3 3/4 4/5), in text, --json
# and --html; the other way round it is one missing step.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh

S=$(mktemp -d /tmp/wd-trace-diff.XXXXXX)
trap 'rm -rf "$S"' EXIT
python3 tests/integration/trace_lib/store.py "$S" diff >/dev/null || { fail trace-diff-store "store writer failed"; finish; }
D() { "$WARDEN" trace diff --state "$S" "$@"; }

out=$(D run-a run-b 2>&1)
expect_match trace-diff-relation "$out" 'run-b is a replay of run-a from step 3'
expect_match trace-diff-first-step3 "$out" 'first divergence: step 3: changed model output; different arguments; different result'
expect_match trace-diff-steps-same "$(printf '%s\n' "$out" | grep -E '^ [012] ' | grep -c same)" '^3$'
expect_match trace-diff-marker "$out" '>3 +changed model output'
expect_match trace-diff-arg-named "$out" 'arguments differ: send_mail: body'
expect_match trace-diff-refused "$out" 'send_mail refused'
expect_match trace-diff-missing "$out" ' 4 +missing in B'

out=$(D run-a run-c 2>&1)
expect_match trace-diff-tool "$out" 'first divergence: step 1: different tool'
expect_match trace-diff-result "$out" ' 2 +different result'
expect_match trace-diff-after "$out" ' 3 +same'

expect_match trace-diff-self "$(D run-a run-a 2>&1)" 'no divergence: every step is the same'
expect_match trace-diff-extra "$(D run-b run-a 2>&1)" ' 4 +extra in B'

j=$(D run-a run-b --json)
expect_eq trace-diff-json "$(printf '%s' "$j" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["first_divergence"], [s["verdict"] for s in d["steps"]][3])')" \
	"3 changed model output; different arguments; different result"

expect_eq trace-diff-html-writes "$(D run-a run-b --html -o "$S/d.html")" "$S/d.html"
first=$(python3 - "$S/d.html" <<'PY'
import html.parser, sys
class P(html.parser.HTMLParser):
    def __init__(s):
        super().__init__(); s.rows = []
    def handle_starttag(s, t, a):
        a = dict(a)
        if t == "tr" and "data-step" in a:
            s.rows.append((a["data-step"], a.get("class", ""), a.get("id", "")))
p = P(); p.feed(open(sys.argv[1]).read())
print(" ".join("%s:%s%s" % (st, "first" if "first" in c.split() else ("differs" if "differs" in c else "same"),
               "#" if i == "first-divergence" else "") for st, c, i in p.rows))
PY
)
expect_eq trace-diff-html-rows "$first" "0:same 1:same 2:same 3:first# 4:differs"
out=$(D run-a run-d 2>&1)
expect_match trace-diff-insert-first "$out" 'first divergence: step 2: extra in B'
expect_match trace-diff-insert-counts "$out" '5 same, 0 changed, 0 missing in B, 1 extra in B'
expect_eq trace-diff-insert-rows "$(printf '%s\n' "$out" | sed -n 's/^[ >]\([0-9/]*\) \+\(same\|extra in B\|missing in B\|changed[^ ]*\|different [a-z]*\).*/\1:\2/p' | tr '\n' ' ')" \
	"0:same 1:same 2:extra in B 2/3:same 3/4:same 4/5:same "
j=$(D run-a run-d --json)
expect_eq trace-diff-insert-json "$(printf '%s' "$j" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["first_divergence"], d["first_divergence_a_step"], d["first_divergence_b_step"], d["counts"], [(s["a_step"], s["b_step"], s["verdict"]) for s in d["steps"]])')" \
	"2 None 2 {'same': 5, 'changed': 0, 'missing': 0, 'extra': 1} [(0, 0, 'same'), (1, 1, 'same'), (None, 2, 'extra in B'), (2, 3, 'same'), (3, 4, 'same'), (4, 5, 'same')]"
expect_match trace-diff-insert-reverse "$(D run-d run-a 2>&1)" '5 same, 0 changed, 1 missing in B, 0 extra in B'
h=$(D run-a run-d --html -o -)
expect_eq trace-diff-insert-html "$(printf '%s' "$h" | grep -o '<tr class="[a-z ]*" data-step="[0-9]*"\( data-a-step="[0-9]*"\)\?\( data-b-step="[0-9]*"\)\?' | sed 's/<tr class="\([a-z ]*\)" data-step="\([0-9]*\)"\( data-a-step="\([0-9]*\)"\)\?\( data-b-step="\([0-9]*\)"\)\?/\2:\4:\6:\1/' | tr '\n' ' ')" \
	"0:0:0:same 1:1:1:same 2::2:differs first 2:2:3:same 3:3:4:same 4:4:5:same "
# a hash_only run holds no argument values: its calls compare with a full
# run's by args_hash (steps 0-3 the same), and the call it made otherwise
# (step 4) is still told apart
out=$(D run-a run-e 2>&1)
expect_match trace-diff-hashonly-counts "$out" '4 same, 1 changed, 0 missing in B, 0 extra in B'
expect_match trace-diff-hashonly-first "$out" 'first divergence: step 4: different arguments'
# the replay's own page: the divergence marked at its step (3, and no
# other), a link to the original, and the original's page linking back
h=$("$WARDEN" trace html --state "$S" run-b -o -)
expect_eq trace-diff-replay-html-divergence "$(printf '%s' "$h" | grep -o '<section class="step has-divergence" data-step="[0-9]*"' | grep -o '[0-9]*"$' | tr -d '"' | tr '\n' ' ')" "3 "
expect_match trace-diff-replay-html-link "$h" 'replay of <a href="run-a.html"'
expect_match trace-diff-original-html-link "$("$WARDEN" trace html --state "$S" run-a -o -)" 'replayed by <a href="run-b.html">run-b</a> from step 3'
expect_eq trace-diff-usage "$(D run-a >/dev/null 2>&1; echo $?)" 2
finish
