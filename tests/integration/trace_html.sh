#!/usr/bin/env bash
# `warden trace html`: the page rendered in headless Chromium with
# JavaScript on and no way out: the browser's proxy and the URLs injected
# into a recorded prompt ("</script><script>fetch(...)", "<img src=...>")
# all point at a loopback witness this test runs. The browser itself talks
# to its update and sign-in services (the witness sees that on an empty
# page too, and answers it 404: nothing reaches them); a request from the
# viewer's page is one to a host the empty page's load did not ask for, or
# to loopback (the injected URLs), and there must be none.
# The DOM has every step, the kernel denial sits in the step whose call
# caused it, opening a payload (#p-SEQ-FIELD, the page's script) shows the
# recorded text byte for byte; a screenshot is kept in
# $BUILD/test-artifacts/trace_html/. A 30-step run with 100 KB prompts
# renders whole, each prompt cut at 32 KiB with its size and hash, and its
# page is <= 5x the run's compressed payloads (its times:
# tests/bench/bench_trace_html.sh).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh

S=$(mktemp -d /tmp/wd-trace-html.XXXXXX)
ART=$PWD/$BUILD/test-artifacts/trace_html
mkdir -p "$ART"
WIT_PID=
cleanup() { [ -n "$WIT_PID" ] && kill "$WIT_PID" 2>/dev/null; rm -rf "$S"; }
trap cleanup EXIT

CHROMIUM=$(command -v chromium || command -v chromium-browser)
[ -n "$CHROMIUM" ] || { fail trace-html-chromium "chromium is not installed (scripts/deps.sh installs it)"; finish; }

python3 tests/integration/trace_lib/witness.py "$S/wit.port" "$S/wit.log" &
WIT_PID=$!
for _ in $(seq 100); do [ -s "$S/wit.port" ] && break; sleep 0.05; done
PORT=$(cat "$S/wit.port")
: >"$S/wit.log"

# chrome URL [extra args...]: headless, JS on, every request through the witness
chrome() {
	local url=$1; shift
	timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
		--user-data-dir="$S/profile" --proxy-server="http://127.0.0.1:$PORT" \
		--proxy-bypass-list='<-loopback>' --disable-background-networking \
		--disable-component-update --disable-sync --no-first-run --disable-default-apps \
		--disable-domain-reliability --disable-extensions --no-pings \
		--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,MediaRouter \
		--hide-scrollbars "$@" "$url" 2>>"$S/chrome.err"
}

mkdir -p "$S/v"
python3 tests/integration/trace_lib/store.py "$S/v" viewer "$PORT" >/dev/null ||
	{ fail trace-html-store "store writer failed"; finish; }
python3 -c "import sys; sys.path.insert(0, 'tests/integration/trace_lib'); import store
open('$S/prompt0.txt', 'w').write('PROMPT-0 summarise ticket 42 ' + store.INJECT % ('$PORT', '$PORT'))"

out=$("$WARDEN" trace html --state "$S/v" run-v -o "$S/run-v.html" 2>&1)
expect_eq trace-html-writes "$out" "$S/run-v.html"
[ -s "$S/run-v.html" ] || { fail trace-html-file "no page written"; finish; }

# self-contained: no tag of the page names another resource (text from
# the trace is escaped, so a raw "<" starts one of the page's own tags)
res_re='<(link|iframe|object|embed|img|video|audio|source)[ >]|<[a-z]+ [^>]*(src|href|action)="?(https?:|//)|@import'
if grep -Eiq "$res_re" "$S/run-v.html"; then
	fail trace-html-self-contained "$(grep -Eio "$res_re" "$S/run-v.html" | head -3)"
else
	pass trace-html-self-contained
fi

# a field written in the record itself is cut at 4 KiB with its size and
# hash (the task here is 9,010 bytes)
expect_match trace-html-field-truncated "$(cat "$S/run-v.html")" 'truncated: 4096 of 9010 bytes shown; the whole value is sha256:'
# the budget counts the sub-agent's use (its tool_result's usage): after
# step 4, 5 calls x 1,100 tokens + the child's 50,500, $0.05 + $0.25
expect_match trace-html-budget-subagent "$(tr -d '\n' <"$S/run-v.html")" '<tr><td>4</td><td>56000</td><td>0\.300000</td>'

# the injected prompt is text: the raw markup never reaches the file
expect_eq trace-html-escaped "$(grep -c '</script><script>fetch' "$S/run-v.html")" 0

# hosts [LOG]: the hosts the witness was asked for, one a line
hosts() { sed -nE "s/^connection: b'(CONNECT ([^: ]+)|[A-Z]+ https?:\/\/([^:/ ]+)).*/\2\3/p" "$1" | sort -u; }
: >"$S/wit.log"
echo '<p>x</p>' >"$S/empty.html"
chrome "file://$S/empty.html" --dump-dom --virtual-time-budget=2000 >/dev/null
sleep 0.3
hosts "$S/wit.log" | grep -v -x -e 127.0.0.1 -e localhost >"$S/baseline.hosts"
: >"$S/wit.log"

# rendered: the DOM after the page's script ran, with the prompt of step 0
# (seq 2) opened through its fragment
chrome "file://$S/run-v.html#p-2-prompt_ref" --dump-dom --virtual-time-budget=2000 >"$S/dom.html"
DOM="python3 tests/integration/trace_lib/dom.py $S/dom.html"
r=$($DOM steps run-v 5) && pass trace-html-every-step || fail trace-html-every-step "$r"
r=$($DOM steps run-v-child 1) && pass trace-html-subagent-steps || fail trace-html-subagent-steps "$r"
r=$($DOM denial-at 2) && pass trace-html-denial-at-step || fail trace-html-denial-at-step "$r"
r=$($DOM open-payload p-2-prompt_ref "$S/prompt0.txt") && pass trace-html-payload-expands ||
	fail trace-html-payload-expands "$r"
r=$($DOM scripts) && pass trace-html-no-injected-script || fail trace-html-no-injected-script "$r"
expect_match trace-html-approval "$(tr -d '\n' <"$S/dom.html")" 'approval_decision</span>.*decided by</b> bob'

rm -f "$ART/run-v.png"
chrome "file://$S/run-v.html#p-8-prompt_ref" --window-size=1280,2600 \
	--virtual-time-budget=2000 --screenshot="$ART/run-v.png" >/dev/null
[ -s "$ART/run-v.png" ] && pass trace-html-screenshot || fail trace-html-screenshot "no $ART/run-v.png"
echo "screenshot: $ART/run-v.png"

sleep 0.3
hosts "$S/wit.log" >"$S/page.hosts"
leaks=$(grep -v -x -F -f "$S/baseline.hosts" "$S/page.hosts"; grep -x -e 127.0.0.1 -e localhost "$S/page.hosts")
expect_eq trace-html-no-request "$(echo $leaks)" ""
# a control: a page that does leak is seen
: >"$S/wit.log"
printf '<img src="http://127.0.0.1:%s/control">' "$PORT" >"$S/leak.html"
chrome "file://$S/leak.html" --dump-dom --virtual-time-budget=2000 >/dev/null
sleep 0.3
expect_match trace-html-witness-works "$(cat "$S/wit.log")" "127.0.0.1:$PORT/control"

# size: 30 steps, 100 KB prompts; the whole run's page in the DOM (its
# write and load times are tests/bench/bench_trace_html.sh's: timing goals
# live in benchmarks)
mkdir -p "$S/big"
zbytes=$(python3 tests/integration/trace_lib/store.py "$S/big" big)
"$WARDEN" trace html --state "$S/big" run-big -o "$S/big.html" >/dev/null
size=$(stat -c %s "$S/big.html")
echo "big run: page $size bytes, compressed payloads $zbytes bytes"
if [ "$size" -le $((zbytes * 5)) ]; then pass trace-html-size; else fail trace-html-size "$size > 5 x $zbytes"; fi
chrome "file://$S/big.html" --dump-dom >"$S/bigdom.html"
r=$(python3 tests/integration/trace_lib/dom.py "$S/bigdom.html" steps run-big 30) && pass trace-html-big-steps || fail trace-html-big-steps "$r"
# payloads over 32 KiB (the 100 KB prompts) show their first 32 KiB, then
# their whole size and the hash of what the store holds; the smaller ones
# (responses, results) whole
r=$(python3 tests/integration/trace_lib/dom.py "$S/bigdom.html" cut "$S/big" run-big 32768) &&
	pass trace-html-big-cut || fail trace-html-big-cut "$r"
echo "big run: $r"
expect_match trace-html-big-cut-count "$r" '^90 payloads, 30 cut at 32768 bytes'
expect_match trace-html-big-loaded "$(head -c 4000 "$S/bigdom.html")" '<html[^>]* data-load-ms="[0-9]+"'
finish
