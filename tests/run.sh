#!/usr/bin/env bash
# Run every test: format check, unit tests, integration tests, short fuzz
# runs, and the guest-kernel tests. Each prints PASS/FAIL/SKIP lines; this
# script counts them and ends with "N passed, N failed, N skipped".
set -u
BUILD=${BUILD:-build}
export BUILD
cd "$(dirname "$0")/.."
log=$(mktemp -d /tmp/warden-test.XXXXXX)
passed=0 failed=0 skipped=0
failures=()

run_one() { # name cmd...
	local name=$1; shift
	local out="$log/$(echo "$name" | tr '/ ' '__').log"
	local t0=$(date +%s.%N)
	timeout --kill-after=10 "${TEST_TIMEOUT:-600}" "$@" >"$out" 2>&1
	local rc=$?
	local p f s
	p=$(grep -c '^PASS ' "$out"); f=$(grep -c '^FAIL ' "$out"); s=$(grep -c '^SKIP ' "$out")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $name: exited $rc with no FAIL line" >>"$out"; f=1
	fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
	printf '%-44s %3d passed %3d failed %3d skipped  %5.1fs\n' "$name" "$p" "$f" "$s" \
		"$(awk "BEGIN{print $(date +%s.%N) - $t0}")"
	grep -E '^(FAIL|SKIP) ' "$out" | sed 's/^/    /'
	[ "$f" -eq 0 ] || failures+=("$name ($out)")
}

# format
if out=$(make --no-print-directory check-format 2>&1); then
	echo "PASS clang-format" >"$log/format.out"
else
	{ echo "FAIL clang-format: files need 'make format'"; echo "$out" | head -20; } >"$log/format.out"
fi
run_one format cat "$log/format.out"

# banned calls (crun cfg.mk style)
if hits=$(git grep -nE '\b(sprintf|strcpy|strcat|system)\(' -- 'daemon/*.c' 'daemon/*.h'); then
	printf 'FAIL banned-calls: %s\n' "$hits" >"$log/banned.out"
else
	echo "PASS banned-calls" >"$log/banned.out"
fi
run_one banned-calls cat "$log/banned.out"

for t in "$BUILD"/tests/unit/*; do
	[ -x "$t" ] || continue
	run_one "unit/$(basename "$t")" "$t"
done
for t in tests/integration/*.sh; do
	[ -f "$t" ] || continue
	run_one "integration/$(basename "$t" .sh)" bash "$t"
done
for t in "$BUILD"/tests/fuzz/*; do
	[ -x "$t" ] || continue
	run_one "fuzz/$(basename "$t")" tests/fuzz/run-one.sh "$t" "${FUZZ_SECONDS:-20}"
done
if [ -x scripts/vmtest.sh ] && [ -z "${SKIP_VMTEST:-}" ]; then
	run_one vmtest scripts/vmtest.sh
fi

# The tests leave no call behind; drop the (then empty) parents warden
# created in each hierarchy, so the node is as it was. rmdir only removes an
# empty directory: a live call elsewhere keeps its parent.
for d in /sys/fs/cgroup/*/warden /sys/fs/cgroup/warden; do
	[ -d "$d" ] && rmdir "$d" 2>/dev/null
done

echo
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "logs: $log"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
