# Shell test helpers: source from tests/integration/*.sh.
# Each check prints PASS/FAIL/SKIP lines that tests/run.sh counts.
BUILD=${BUILD:-build}
WARDEN=${WARDEN:-$PWD/$BUILD/warden}
HELPERS=$PWD/$BUILD/tests/helpers
FIX=$PWD/tests/fixtures
_fail=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; _fail=1; }
skip() { echo "SKIP $1: $2"; }
# check NAME CMD...: pass if the command succeeds
check() { local n=$1; shift; if "$@" >/dev/null 2>&1; then pass "$n"; else fail "$n" "command failed: $*"; fi; }
# expect_eq NAME GOT WANT
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2' want '$3'"; fi; }
# expect_match NAME TEXT REGEX
expect_match() { if printf '%s' "$2" | grep -Eq -- "$3"; then pass "$1"; else fail "$1" "'$(printf '%s' "$2" | head -c 300)' !~ /$3/"; fi; }
finish() { exit $_fail; }
# call_leaves DIR...: the call leaves (cgroups named by a call id, with or
# without tier 3's wd-) directly under each warden/ DIR, sorted
call_leaves() { find "$@" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended -regex '.*/(wd-)?[0-9a-f]{16}' 2>/dev/null | sort; }
# remove_calls RUNDIR...: what the calls of a wardend killed with -9 left
# (their cgroup leaves, v2 and every v1 hierarchy, and whatever still runs
# in them), by the call ids under RUNDIR/calls -- what a later wardend's
# start-up sweep would do, for a node no wardend will start on again.
remove_calls() {
	local rt id h v2 i
	v2=$(awk '$3=="cgroup2"{print $2; exit}' /proc/mounts)
	for rt; do
		for id in $(ls "$rt/calls" 2>/dev/null); do
			[ -e "$v2/warden/$id/cgroup.kill" ] && echo 1 >"$v2/warden/$id/cgroup.kill" 2>/dev/null
			for h in "$v2/warden/$id" /sys/fs/cgroup/*/warden/"$id"; do
				for i in $(seq 40); do
					[ -d "$h" ] || break
					find "$h" -depth -type d -exec rmdir {} + 2>/dev/null
					[ -d "$h" ] && sleep 0.05
				done
			done
		done
	done
	remove_spares
}

# remove_spares: the spare v1 leaves (daemon/sandbox/cgroup.c: made ahead by
# a wardend's reaper under call-id names, removed at its exit) of wardends
# killed with -9. A call's v2 leaf is made before its v1 leaves and removed
# after them, so an empty v1 leaf with no v2 sibling is a spare: a live
# wardend's spare removed here only makes its next call mkdir its own.
remove_spares() {
	local v2 h n
	v2=$(awk '$3=="cgroup2"{print $2; exit}' /proc/mounts)
	for h in /sys/fs/cgroup/*/warden/*; do
		[ -d "$h" ] || continue
		case "$h" in "$v2"/*) continue ;; esac
		n=${h##*/}
		n=${n#wd-}
		[[ "$n" =~ ^[0-9a-f]{16}$ ]] || continue
		[ -e "$v2/warden/${h##*/}" ] || rmdir "$h" 2>/dev/null
	done
	return 0
}
