#!/usr/bin/env bash
# make fuzz: every target for FUZZ_SECONDS.
set -u
BUILD=${BUILD:-build}
rc=0
for t in "$BUILD"/tests/fuzz/*; do
	[ -x "$t" ] || continue
	tests/fuzz/run-one.sh "$t" "${FUZZ_SECONDS:-300}" || rc=1
done
exit $rc
