#!/usr/bin/env bash
# Run one libFuzzer target for N seconds over its corpus (tests/fuzz/corpus/NAME).
set -u
bin=$1 secs=${2:-20}
name=$(basename "$bin")
corpus=tests/fuzz/corpus/$name
work=$(mktemp -d /tmp/warden-fuzz.XXXXXX)
[ -d "$corpus" ] && cp -r "$corpus"/. "$work"/ 2>/dev/null
if "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$work" >"$work.log" 2>&1; then
	echo "PASS fuzz-$name ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$work.log" | awk '{print $2}') runs in ${secs}s)"
	rm -rf "$work" "$work.log"
else
	echo "FAIL fuzz-$name: crash; see $work.log"; tail -30 "$work.log"
	exit 1
fi
