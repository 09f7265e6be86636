#!/usr/bin/env bash
# `warden trace html` on a 30-step run with 100 KB prompts (issue 13's
# goal: rendered in <= 2 s): the page's write time (median of 5) and its
# load in headless Chromium (navigation start to the load event, the
# page's own html[data-load-ms]; median of 5), the two together (the
# whole render against the goal), beside the same browser loading an
# empty page, and the page's size against the run's compressed
# payloads (goal <= 5x). Measured, printed, never asserted; the viewer's
# behaviour is tests/integration/trace_html.sh's.
set -u
BUILD=${BUILD:-build}
WARDEN=$PWD/$BUILD/warden
CHROMIUM=$(command -v chromium || command -v chromium-browser)
[ -n "$CHROMIUM" ] || { echo "bench_trace_html: chromium is not installed (scripts/deps.sh installs it)"; exit 0; }
S=$(mktemp -d /tmp/wd-bench-html.XXXXXX)
trap 'rm -rf "$S"' EXIT
chrome() { # URL: headless, JS on, no proxy reachable (nothing to load)
	timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
		--user-data-dir="$S/profile" --proxy-server="http://127.0.0.1:9" \
		--disable-background-networking --disable-component-update --disable-sync \
		--no-first-run --disable-default-apps --disable-extensions --no-pings \
		--dump-dom "$1" 2>>"$S/chrome.err"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b ? a / b : 0}'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mkdir -p "$S/big"
zbytes=$(python3 tests/integration/trace_lib/store.py "$S/big" big)
: >"$S/w"
for _ in 1 2 3 4 5; do
	t0=$(date +%s%N)
	"$WARDEN" trace html --state "$S/big" run-big -o "$S/big.html" >/dev/null || { echo "trace html failed"; exit 1; }
	echo $((($(date +%s%N) - t0) / 1000000)) >>"$S/w"
done
printf '<!doctype html><html><body></body></html>' >"$S/empty.html"
: >"$S/l"; : >"$S/e"
for _ in 1 2 3 4 5; do
	chrome "file://$S/big.html" | sed -nE 's/.*<html[^>]* data-load-ms="([0-9]+)".*/\1/p' | head -1 >>"$S/l"
	t0=$(date +%s%N); chrome "file://$S/empty.html" >/dev/null
	echo $((($(date +%s%N) - t0) / 1000000)) >>"$S/e"
done
size=$(stat -c %s "$S/big.html")
# the whole render, as a reader meets it: the i-th write and the i-th load
paste -d+ "$S/w" "$S/l" | awk -F+ '$1 != "" && $2 != "" {print $1 + $2}' >"$S/wl"
w=$(median <"$S/w") l=$(median <"$S/l") e=$(median <"$S/e") wl=$(median <"$S/wl")
printf '%-52s %10s %10s %8s %8s\n' "trace html, 30 steps x 100 KB prompts (median of 5)" "warden" "goal" "ratio" ""
printf '%-52s %7s ms %7s ms %7sx\n' "page written (warden trace html)" "$w" 2000 "$(ratio "$w" 2000)"
printf '%-52s %7s ms %7s ms %7sx %s\n' "page loaded in Chromium (to the load event)" "${l:-?}" 2000 "$(ratio "${l:-0}" 2000)" "(chromium on an empty page: whole run $e ms)"
printf '%-52s %7s ms %7s ms %7sx\n' "page written and loaded (the whole render)" "${wl:-?}" 2000 "$(ratio "${wl:-0}" 2000)"
printf '%-52s %7s B  %7s B  %7sx %s\n' "page size vs the run's compressed payloads" "$size" "$zbytes" "$(ratio "$size" "$zbytes")" "(goal <= 5x)"
