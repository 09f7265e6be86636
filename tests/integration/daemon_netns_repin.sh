#!/usr/bin/env bash
# A running wardend follows its pin (sandbox/netns.c pin_moved): the
# shared empty network namespace is judged when first used and held by an
# fd, and every call compares the pin's identity (st_dev/st_ino of what is
# mounted there) with the one judged. When the pin no longer shows it --
# replaced by root with another empty namespace, replaced by a bad one,
# unmounted -- the next call judges the pin again: it joins the new empty
# one, replaces a bad one (never joins it), or makes a new pin. Judged
# from outside by the pin's inode and by `ip link` in it. On the build
# before, wardend kept the namespace it judged first for good: the calls
# after each change printed that one (repin/* fail there).
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/daemon_lib/netns.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-netns-repin "needs root"; finish; }

# every mount under $T (the test's pins), then the daemon test's cleanup
unmount_T() {
	local i m x
	for i in $(seq 20); do
		m=$(awk -v t="$T/" 'index($5, t) == 1 {print $5}' /proc/self/mountinfo)
		[ -z "$m" ] && break
		for x in $m; do umount -l "$x" 2>/dev/null; done
	done
}
trap 'unmount_T; cleanup_all' EXIT
mkdir -m 755 "$T/pd"
P=$T/pd/pin
export WARDEN_NETNS_PIN=$P

netns_policy
start_daemon || { fail daemon-netns-repin-start "see log"; finish; }
pin_ns() { awk -v p="$1" '$5 == p' /proc/self/mountinfo | grep -q ' - nsfs ' && echo "net:[$(stat -L -c %i "$1")]"; }
empty_at() { [ "$(nsenter --net="$1" ip -o link show | wc -l)" = 1 ] &&
	! nsenter --net="$1" ip -o link show | grep -q 'state UP\|<[^>]*,UP'; }
unpin() { while umount "$P" 2>/dev/null; do :; done; }
host=$(readlink /proc/self/ns/net)

a=$(ns_of_run)
expect_match repin/first-has-one "$a" '^net:\[[0-9]+\]$'
[ -n "$a" ] && [ "$a" != "$host" ] && [ "$a" = "$(pin_ns "$P")" ] && pass repin/first-pinned ||
	fail repin/first-pinned "call '$a' pin '$(pin_ns "$P")' ($(tail -3 "$T/wardend.log"))"

# 1. root puts another empty namespace there (the daemon's fd still holds
# the first: the kernel cannot give the new one its inode number)
unpin
unshare --net="$P" true
n1=$(pin_ns "$P")
b=$(ns_of_run)
[ -n "$b" ] && [ "$b" = "$n1" ] && [ "$b" != "$a" ] && pass repin/follows-new-pin ||
	fail repin/follows-new-pin "call '$b', first '$a', pin now '$n1'"
[ "$(pin_ns "$P")" = "$n1" ] && pass repin/good-pin-kept ||
	fail repin/good-pin-kept "pin '$n1' became '$(pin_ns "$P")'"

# 2. a namespace with lo up put there (held at $T/bad too, so that its
# inode stays its own): never joined, reported, replaced by an empty one
unpin
touch "$T/bad"
unshare --net="$P" ip link set lo up
bad=$(pin_ns "$P")
mount --bind "$P" "$T/bad"
c=$(ns_of_run)
[ -n "$c" ] && [ "$c" != "$bad" ] && [ "$c" != "$host" ] && [ "$c" = "$(pin_ns "$P")" ] && empty_at "$P" &&
	pass repin/bad-replaced || fail repin/bad-replaced "call '$c' bad '$bad' pin '$(pin_ns "$P")'"
expect_match repin/bad-reported "$(cat "$T/wardend.log")" "netns pin '$P': found a network namespace that is not empty"

# 3. unmounted, the mount point removed: the next call makes a new pin
unpin
rm -f "$P"
d=$(ns_of_run)
[ -n "$d" ] && [ "$d" != "$c" ] && [ "$d" = "$(pin_ns "$P")" ] && empty_at "$P" && pass repin/gone-made-again ||
	fail repin/gone-made-again "call '$d' before '$c' pin '$(pin_ns "$P")'"

# 4. unchanged: calls stay in it, nothing more is logged
e=$(ns_of_run)
n=$(grep -c "netns pin '$P'" "$T/wardend.log")
f=$(ns_of_run)
[ "$e" = "$d" ] && [ "$f" = "$d" ] && [ "$(grep -c "netns pin '$P'" "$T/wardend.log")" = "$n" ] &&
	pass repin/unchanged-stays || fail repin/unchanged-stays "calls '$e' '$f' pin '$d'"
stop_daemon
finish
