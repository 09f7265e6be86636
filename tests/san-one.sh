#!/usr/bin/env bash
# san-one.sh KIND CMD...: run one test against a sanitizer build (KIND asan
# or tsan; BUILD already points at it) and turn every sanitizer report into
# a FAIL line. Reports go to files (log_path), so one from a daemon that a
# test started and stopped — or from a CLI run inside a $(...) — is not
# lost in a log nobody reads; halt_on_error stops the process at the first.
kind=$1
shift
rep=$(mktemp -d /tmp/warden-san.XXXXXX)
chmod 1777 "$rep" # the CLI also runs as the test's unprivileged users
common="halt_on_error=${SAN_HALT:-1}:log_path=$rep/report"
export UBSAN_OPTIONS="$common:print_stacktrace=1"
export ASAN_OPTIONS="$common:abort_on_error=0:detect_leaks=${SAN_LEAKS:-0}:detect_stack_use_after_return=0"
export TSAN_OPTIONS="$common:second_deadlock_stack=1:suppressions=$(cd "$(dirname "$0")" && pwd)/tsan.supp"
[ "$kind" = tsan ] && unset ASAN_OPTIONS
"$@"
rc=$?
n=0
for f in "$rep"/report.*; do
	[ -f "$f" ] || continue
	n=$((n + 1))
	what=$(grep -m1 -E 'ERROR: |WARNING: ThreadSanitizer|runtime error' "$f" | cut -c1-300)
	echo "FAIL $kind-report-$n: ${what:-sanitizer report} (${f##*/}: $(grep -m1 -E '^    #[0-9]+ .* in ' "$f" | grep -v -E 'libclang_rt|sanitizer' | head -1 | cut -c1-200))"
	if [ -n "${SAN_KEEP:-}" ]; then cp "$f" "$SAN_KEEP/" 2>/dev/null; fi
done
rm -rf "$rep"
[ "$n" -eq 0 ] || exit 1
exit "$rc"
