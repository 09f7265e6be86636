#!/usr/bin/env bash
# wardend's start-up sweep removes what calls killed mid-flight left behind
# (empty call cgroups, call directories), and never a call being set up now:
# old leftovers by age; recent ones when the owner lock of their call
# directory is free (the process that ran the call is gone).
. tests/lib.sh
set -u
WARDEND=$PWD/$BUILD/wardend
T=$(mktemp -d /tmp/warden-sweep.XXXXXX)
export WARDEN_RUNTIME_DIR=$T/rt
V2=$(awk '$3=="cgroup2"{print $2; exit}' /proc/mounts)
old=$(head -c8 /dev/urandom | od -An -tx1 | tr -d ' \n')
new=$(head -c8 /dev/urandom | od -An -tx1 | tr -d ' \n')
dead=$(head -c8 /dev/urandom | od -An -tx1 | tr -d ' \n')
live=$(head -c8 /dev/urandom | od -An -tx1 | tr -d ' \n')
dead2=$(head -c8 /dev/urandom | od -An -tx1 | tr -d ' \n')
live2=$(head -c8 /dev/urandom | od -An -tx1 | tr -d ' \n')
cleanup() {
	[ -n "${WPID:-}" ] && kill "$WPID" 2>/dev/null && wait "$WPID" 2>/dev/null
	[ -n "${HOLDER:-}" ] && kill "$HOLDER" 2>/dev/null && wait "$HOLDER" 2>/dev/null
	[ -n "${HOLDER2:-}" ] && kill "$HOLDER2" 2>/dev/null && wait "$HOLDER2" 2>/dev/null
	for d in "$V2/warden/$old" "$V2/warden/$new" "$V2/warden/$dead" "$V2/warden/$live" "$V2/warden/$dead2" "$V2/warden/$live2" /sys/fs/cgroup/pids/warden/$old; do rmdir "$d" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$V2/warden/$old" "$V2/warden/$new" "$T/rt/calls/$old/tmp" "$T/rt/calls/$new/tmp"
[ -d /sys/fs/cgroup/pids ] && mkdir -p /sys/fs/cgroup/pids/warden/$old && touch -d '1 hour ago' /sys/fs/cgroup/pids/warden/$old
touch -d '1 hour ago' "$V2/warden/$old" "$T/rt/calls/$old"
# recent calls: one whose owner died (its lock is free), one whose owner
# lives (a process holds the lock)
mkdir -p "$V2/warden/$dead" "$V2/warden/$live" "$T/rt/calls/$dead/tmp" "$T/rt/calls/$live/tmp"
touch "$T/rt/calls/$dead/.owner" "$T/rt/calls/$live/.owner"
flock "$T/rt/calls/$live/.owner" sleep 120 &
HOLDER=$!
for i in $(seq 50); do flock -n "$T/rt/calls/$live/.owner" true || break; sleep 0.05; done
# the same two as this warden makes them: the lock on the directory
# itself, which has the sticky bit (sandbox.c wd_sandbox_own_calldir)
mkdir -p "$V2/warden/$dead2" "$V2/warden/$live2" "$T/rt/calls/$dead2" "$T/rt/calls/$live2"
chmod 1711 "$T/rt/calls/$dead2" "$T/rt/calls/$live2"
flock "$T/rt/calls/$live2" sleep 120 &
HOLDER2=$!
for i in $(seq 50); do flock -n "$T/rt/calls/$live2" true || break; sleep 0.05; done

"$WARDEND" --state "$T/state" --policy policy --socket "$T/s" >"$T/log" 2>&1 &
WPID=$!
for i in $(seq 100); do curl -s --unix-socket "$T/s" http://w/healthz >/dev/null 2>&1 && break; sleep 0.1; done
[ -d "$V2/warden/$old" ] && fail sweep-old-v2-cgroup "still there" || pass sweep-old-v2-cgroup
if [ -d /sys/fs/cgroup/pids ]; then
	[ -d /sys/fs/cgroup/pids/warden/$old ] && fail sweep-old-v1-cgroup "still there" || pass sweep-old-v1-cgroup
fi
[ -d "$T/rt/calls/$old" ] && fail sweep-old-call-dir "still there" || pass sweep-old-call-dir
[ -d "$V2/warden/$new" ] && pass sweep-keeps-fresh-cgroup || fail sweep-keeps-fresh-cgroup "removed a cgroup of a call being set up"
[ -d "$T/rt/calls/$new" ] && pass sweep-keeps-fresh-call-dir || fail sweep-keeps-fresh-call-dir "removed"
[ -d "$V2/warden/$dead" ] && fail sweep-dead-owner-cgroup "still there" || pass sweep-dead-owner-cgroup
[ -d "$T/rt/calls/$dead" ] && fail sweep-dead-owner-call-dir "still there" || pass sweep-dead-owner-call-dir
[ -d "$V2/warden/$live" ] && pass sweep-keeps-live-owner-cgroup || fail sweep-keeps-live-owner-cgroup "removed a live call's cgroup"
[ -d "$T/rt/calls/$live" ] && pass sweep-keeps-live-owner-call-dir || fail sweep-keeps-live-owner-call-dir "removed"
[ -d "$V2/warden/$dead2" ] && fail sweep-dead-dirlock-cgroup "still there" || pass sweep-dead-dirlock-cgroup
[ -d "$T/rt/calls/$dead2" ] && fail sweep-dead-dirlock-call-dir "still there" || pass sweep-dead-dirlock-call-dir
[ -d "$V2/warden/$live2" ] && pass sweep-keeps-live-dirlock-cgroup || fail sweep-keeps-live-dirlock-cgroup "removed a live call's cgroup"
[ -d "$T/rt/calls/$live2" ] && pass sweep-keeps-live-dirlock-call-dir || fail sweep-keeps-live-dirlock-call-dir "removed"
finish
