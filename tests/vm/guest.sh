#!/bin/bash
# Runs inside the vmtest guest (scripts/vmtest.sh builds the initramfs; /init
# calls this from /w with BUILD set). Runs the unit tests named in
# tests/vm/unit.list and the integration tests named in
# tests/vm/integration.list (one name per line, optionally preceded by
# VAR=value settings; '#' comments), each under a
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
	local t0=$EPOCHREALTIME
	timeout -s KILL "${VMTEST_PER_TEST:-120}" "$@" </dev/null >"$out" 2>&1
	local r=$?
	echo "@@VM time $name $(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $t0}")s"
	grep -E '^(PASS|FAIL|SKIP) ' "$out"
	if grep -q '^FAIL ' "$out"; then
		rc=1
	elif [ "$r" -ne 0 ]; then
		echo "FAIL $name: exited $r with no FAIL line"
		rc=1
	fi
	if [ "$r" -ne 0 ] || grep -q '^FAIL ' "$out"; then
		echo "--- $name output (tail; boot with VMTEST_DUMP=1 for all):"
		if grep -qw vmtest.dump /proc/cmdline; then
			sed 's/^/    /' "$out"
		else
			tail -20 "$out" | sed 's/^/    /'
		fi
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
# integration.list lines: [full] [VAR=value ...] NAME. By default the lines
# without "full" run; with VMTEST_FULL=1 (vmtest.full on the kernel command
# line) only the "full" lines do.
full=$(grep -qw vmtest.full /proc/cmdline && echo 1)
while read -r -a words; do
	if [ "${words[0]}" = full ]; then
		[ -n "$full" ] || continue
		words=("${words[@]:1}")
	elif [ -n "$full" ]; then
		continue
	fi
	n=${words[-1]}
	envs=("${words[@]:0:${#words[@]}-1}")
	t=tests/integration/$n.sh
	[ -f "tests/vm/$n.sh" ] && t=tests/vm/$n.sh # guest-only tests
	if [ -f "$t" ]; then
		VMTEST_PER_TEST=${VMTEST_INTEGRATION_TIMEOUT:-$([ -n "$full" ] && echo 600 || echo 300)} \
			run "integration/$n" env "${envs[@]}" bash "$t"
	else
		echo "SKIP $n: $t does not exist"
	fi
done < <(names tests/vm/integration.list)
exit $rc
