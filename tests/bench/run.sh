#!/usr/bin/env bash
# make bench: every benchmark, each figure printed next to its peer tool as a
# ratio. Figures are measured now, on this machine; nothing is asserted.
set -u
BUILD=${BUILD:-build}
export BUILD HELPERS=$PWD/$BUILD/tests/helpers
echo "warden benchmarks on $(uname -r), $(nproc) cores, $(date -u +%FT%TZ)"
# tier 1's empty netns pin (a per-boot bind mount): one the benchmarks made
# is unmounted at the end, as tests/run.sh does; one there before stays
pin=${WARDEN_NETNS_PIN:-/run/warden/netns-empty}
pin_before=$(mountpoint -q "$pin" 2>/dev/null && echo y)
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
if [ -z "$pin_before" ] && mountpoint -q "$pin" 2>/dev/null; then
	umount -l "$pin" 2>/dev/null || true
fi
