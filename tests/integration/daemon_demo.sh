#!/usr/bin/env bash
# `make demo` end to end (scripts/demo.sh on the shipped policy): the run
# ends ok with seed 004's answer after a tier-3 run_python call, a kernel
# denial of an egress attempt, and an email approved by the demo approver;
# cost is attributed; the exec examples behave; its replay diverges at step 2
# and `trace diff` says so; the run's page, written after the replay, links
# to it and, opened at the denial's step (#RUN-step-1), has the denial there.
. tests/lib.sh
[ "$(id -u)" -eq 0 ] || { skip demo "needs root"; finish; }
S=$(mktemp -d /tmp/warden-demo-test.XXXXXX)
trap 'rm -rf "$S"' EXIT
out=$(DEMO_STATE=$S BUILD=$BUILD timeout 300 scripts/demo.sh 2>&1)
expect_eq demo-exit "$?" 0
expect_match demo-answer "$out" 'run_end +status=ok steps=3'
expect_match demo-above-50 "$out" 'average 62.5 of 4 numbers; above 50: yes'
expect_match demo-tier3 "$out" 'tool_attempt +run_python tier=3 .*for uid 1000'
expect_match demo-kernel-denial "$out" 'step 1 fetch_url: denied connect 127.0.0.1:9 \(by bpf\)'
expect_match demo-approval "$out" 'approval_decision send_customer_email approved by bob'
expect_match demo-email-ran "$out" 'tool_result +send_customer_email status=ok'
expect_match demo-cost "$out" 'data +1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +0\.00[0-9]+'
expect_match demo-trace-verify "$out" 'trace verify: ok'
expect_match demo-exec-allowed "$out" $'62.5\nexit 0'
expect_match demo-exec-denied "$out" '"target": "127.0.0.1:9"'
expect_match demo-real-model-help "$out" 'ANTHROPIC_API_KEY'
# the seed's search-svc.internal:9200, by name through the call's resolver
search=$(printf '%s\n' "$out" | sed -n '/search_internal_docs by name/,/^.*== use a real model/p')
expect_match demo-search-by-name "$search" '"passages": \["Averages above 50'
expect_match demo-search-exit-0 "$search" '^exit 0$'
expect_match demo-search-manifest-name "$(cat policy/tools/search_internal_docs.yaml)" 'allow: \["search-svc.internal:9200"\]'
# it ends by replaying its run from the approval step with a changed
# system prompt: the email is refused (never sent again), the divergence
# is named, the original links to the replay
expect_match demo-replay-refused "$out" 'replay_refused +send_customer_email side_effects=external: not executed during replay'
expect_match demo-replay-diverged "$out" 'replay of run_[0-9a-f]+ from step 2: diverged at step 2'
expect_match demo-replay-linked "$out" 'replayed by run_[0-9a-f]+ from step 2'
expect_eq demo-email-attempts "$(printf '%s\n' "$out" | grep -c 'tool_attempt send_customer_email')" 1
# the diff of the original and its replay: the first difference where the
# replay diverged (step 2, its first live step: another email), steps 0-1
# the same, in the demo's text and in --json
RUN=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\)$/\1/p' | head -1)
REPLAY=$(printf '%s\n' "$out" | sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p' | head -1)
expect_match demo-diff-relation "$out" "$REPLAY is a replay of $RUN from step 2"
expect_match demo-diff-first "$out" 'first divergence: step 2: '
j=$("$WARDEN" trace diff --state "$S" "$RUN" "$REPLAY" --json 2>&1)
expect_eq demo-diff-json "$(printf '%s' "$j" | python3 -c 'import json,sys
d = json.load(sys.stdin)
print(d["first_divergence"], [(s["a_step"], s["b_step"], s["verdict"] == "same") for s in d["steps"]][:3])' 2>&1)" \
	"2 [(0, 0, True), (1, 1, True), (2, 2, False)]"
html=$(printf '%s\n' "$out" | sed -n 's/^run viewer: //p')
expect_match demo-html-path "$html" "^$S/run_[0-9a-f]+\.html\$"
if [ -s "$html" ] && grep -q 'class="step has-denial" data-step="1"' "$html"; then
	pass demo-html-denial-at-step
else
	fail demo-html-denial-at-step "no page with the denial at step 1: '$html'"
fi
# the page is written after the replay: it links to it
expect_match demo-html-replay-link "$(cat "$html" 2>/dev/null)" "replayed by <a href=\"$REPLAY.html\">$REPLAY</a> from step 2"
# the page as a browser shows it (headless Chromium, JavaScript on, every
# request sent to a closed loopback port): the denial sits at step 1 in the
# rendered DOM, and the screenshot is kept beside the trace_html ones
CHROMIUM=$(command -v chromium || command -v chromium-browser)
ART=$PWD/$BUILD/test-artifacts/demo
mkdir -p "$ART"
if [ -z "$CHROMIUM" ]; then
	fail demo-html-rendered "chromium is not installed (scripts/deps.sh installs it)"
elif [ -s "$html" ]; then
	demo_chrome() { # FRAGMENT ARGS...
		timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
			--user-data-dir="$S/profile" --proxy-server=http://127.0.0.1:9 \
			--proxy-bypass-list='<-loopback>' --disable-background-networking \
			--disable-component-update --disable-sync --no-first-run \
			--disable-extensions --hide-scrollbars "${@:2}" "file://$html$1" 2>>"$S/chrome.err"
	}
	# opened at the denial's step (the fragment of its step's section:
	# the page scrolls it into view), in the DOM and in the screenshot
	frag=$RUN-step-1
	demo_chrome "#$frag" --dump-dom --virtual-time-budget=2000 >"$S/dom.html"
	r=$(python3 tests/integration/trace_lib/dom.py "$S/dom.html" denial-at 1) &&
		pass demo-html-rendered-denial || fail demo-html-rendered-denial "$r"
	r=$(python3 tests/integration/trace_lib/dom.py "$S/dom.html" denial-in "$frag" 1) &&
		pass demo-html-fragment-denial || fail demo-html-fragment-denial "$r"
	r=$(python3 tests/integration/trace_lib/dom.py "$S/dom.html" replayed-by "$REPLAY") &&
		pass demo-html-rendered-replay-link || fail demo-html-rendered-replay-link "$r"
	rm -f "$ART/demo-run.png"
	demo_chrome "#$frag" --window-size=1280,2000 --virtual-time-budget=2000 \
		--screenshot="$ART/demo-run.png" >/dev/null
	[ -s "$ART/demo-run.png" ] && pass demo-html-screenshot ||
		fail demo-html-screenshot "no $ART/demo-run.png"
	# the page holds the run's payloads (prompts, results): a copy no
	# other user reads, made 0600 from the start (a file left by an
	# earlier run keeps its mode under cp: removed first)
	rm -f "$ART/demo-run.html"
	(umask 077 && cp "$html" "$ART/demo-run.html")
	chmod 0600 "$ART/demo-run.png" 2>/dev/null
	expect_eq demo-html-artifact-mode "$(stat -c %a "$ART/demo-run.html")" 600
	echo "screenshot: $ART/demo-run.png"
fi
expect_eq demo-daemon-stopped "$(pgrep -f "wardend --state $S" | wc -l)" 0
finish
