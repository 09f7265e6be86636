#!/usr/bin/env bash
# make bench: every benchmark, each figure printed next to its peer tool as a
# ratio. Figures are measured now, on this machine; nothing is asserted.
set -u
BUILD=${BUILD:-build}
export BUILD HELPERS=$PWD/$BUILD/tests/helpers
echo "warden benchmarks on $(uname -r), $(nproc) cores, $(date -u +%FT%TZ)"
for b in "$BUILD"/tests/bench/*; do
	[ -x "$b" ] || continue
	echo; echo "== $(basename "$b")"
	"$b" || echo "($(basename "$b") failed: exit $?)"
done
for s in tests/bench/*.sh; do
	[ "$(basename "$s")" = run.sh ] && continue
	[ -f "$s" ] || continue
	echo; echo "== $(basename "$s" .sh)"
	bash "$s" || echo "($(basename "$s") failed: exit $?)"
done
