#!/bin/bash
# Runs inside the vmtest guest (scripts/vmtest.sh builds the initramfs; /init
# calls this from /w with BUILD set). Runs the unit tests named in
# tests/vm/unit.list and the integration tests named in
# tests/vm/integration.list (one name per line, '#' comments), each under a
# timeout, and prints their PASS/FAIL/SKIP lines. A test that exits non-zero
# without a FAIL line gets one. Exit status: 1 if anything failed.
set -u
BUILD=${BUILD:-build}
export BUILD
rc=0
names() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$1" 2>/dev/null; }

run() { # name cmd...
	local name=$1 out
	shift
	out=/tmp/vmtest-$(echo "$name" | tr '/ ' '__').log
	timeout -s KILL "${VMTEST_PER_TEST:-90}" "$@" >"$out" 2>&1
	local r=$?
	grep -E '^(PASS|FAIL|SKIP) ' "$out"
	if grep -q '^FAIL ' "$out"; then
		rc=1
	elif [ "$r" -ne 0 ]; then
		echo "FAIL $name: exited $r with no FAIL line"
		rc=1
	fi
	if [ "$r" -ne 0 ] || grep -q '^FAIL ' "$out"; then
		echo "--- $name output (tail):"
		tail -20 "$out" | sed 's/^/    /'
	fi
}

for n in $(names tests/vm/unit.list); do
	t=$BUILD/tests/unit/$n
	if [ -x "$t" ]; then
		run "unit/$n" "$t"
	else
		echo "SKIP $n: $t not built"
	fi
done
for n in $(names tests/vm/integration.list); do
	t=tests/integration/$n.sh
	if [ -f "$t" ]; then
		run "integration/$n" bash "$t"
	else
		echo "SKIP $n: $t does not exist"
	fi
done
exit $rc
