#!/usr/bin/env bash
# The empty network namespaces of calls without network (sandbox/netns.h),
# made on a thread while the call is set up and joined by its first
# process: a tier-2 call is in a namespace of its own, another one each
# call, never the host's; a tier-1 call is in the node's shared empty
# one, not the host's either; a call with network.allow stays in the
# host's (tier 1). Judged from inside by /proc/self/ns/net and from
# outside against the host's. Calls compared with each other run at the
# same time (each stays a second): the kernel reuses a freed namespace's
# inode number, so two calls one after the other may show the same one.
#
# The shared one is pinned once per boot (netns.h): one-shot calls one
# after the other are in the node's pinned namespace; with a location of
# this test's own ($WARDEN_NETNS_PIN under $T), racing calls make one pin,
# and whatever else is found there (a namespace with lo up or a link, one
# owned by another user namespace, another type, a plain file, a symlink)
# is replaced, never joined -- judged from outside: the bad namespace is
# held by a mount of its own, so its inode cannot be reused by the new one.
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || { skip netns "needs root"; finish; }
T=$(mktemp -d /tmp/warden-netns.XXXXXX)
# every mount under $T (the test's pins and the namespaces it holds), then
# $T: the node's pin is the only one the test leaves
cleanup() {
	local i m
	for i in $(seq 20); do
		m=$(awk -v t="$T/" 'index($5, t) == 1 {print $5}' /proc/self/mountinfo)
		[ -z "$m" ] && break
		for i in $m; do umount -l "$i" 2>/dev/null; done
	done
	rm -rf "$T"
}
trap cleanup EXIT
chmod 755 "$T"
for t in 1 2; do
	for net in none allow; do
		allow='[]'; [ $net = allow ] && allow='["127.0.0.1:9"]'
		cat >"$T/t$t-$net.yaml" <<EOF2
name: netns$t$net
description: the network namespace of a call
tier: $t
timeout_ms: 30000
memory_mb: 64
network: {allow: $allow}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/proc"], exec: ["/usr/bin/readlink", "/usr/bin/sh", "/usr/bin/dash", "/usr/bin/sleep"]}
EOF2
	done
done
host=$(readlink /proc/self/ns/net)
ns() { "$WARDEN" exec --policy "$T/$1.yaml" -- /usr/bin/readlink /proc/self/ns/net 2>"$T/err"; }
# NAME OUT: a call that prints its namespace, then stays a second
ns_held() { "$WARDEN" exec --policy "$T/$1.yaml" -- /usr/bin/sh -c 'readlink /proc/self/ns/net; sleep 1' >"$2" 2>"$2.err"; }
ns_held t2-none "$T/a" & pa=$!
ns_held t2-none "$T/b" & pb=$!
ns_held t1-none "$T/c" & pc=$!
wait $pa $pb $pc
a=$(cat "$T/a"); b=$(cat "$T/b"); c=$(cat "$T/c")
expect_match netns/tier2-has-one "$a" '^net:\[[0-9]+\]$'
[ -n "$a" ] && [ "$a" != "$host" ] && pass netns/tier2-not-host || fail netns/tier2-not-host "call '$a' host '$host' ($(cat "$T/a.err"))"
[ -n "$b" ] && [ "$a" != "$b" ] && pass netns/tier2-one-per-call || fail netns/tier2-one-per-call "'$a' and '$b' at the same time ($(cat "$T/b.err"))"
expect_match netns/tier1-has-one "$c" '^net:\[[0-9]+\]$'
[ -n "$c" ] && [ "$c" != "$host" ] && [ "$c" != "$a" ] && [ "$c" != "$b" ] &&
	pass netns/tier1-empty-not-host || fail netns/tier1-empty-not-host "call '$c' host '$host' tier 2 '$a' '$b' ($(cat "$T/c.err"))"
expect_eq netns/tier1-allow-host "$(ns t1-allow)" "$host"

# The node's pin: consecutive one-shot calls are in it.
node_pin=${WARDEN_NETNS_PIN:-/run/warden/netns-empty}
x1=$(ns t1-none); x2=$(ns t1-none)
pin_ns() { [ -e "$1" ] && echo "net:[$(stat -L -c %i "$1")]"; }
is_mount() { awk -v p="$1" '$5 == p' /proc/self/mountinfo | grep -q ' - nsfs '; }
expect_match netns/tier1-pinned-has-one "$x1" '^net:\[[0-9]+\]$'
[ -n "$x1" ] && [ "$x1" = "$x2" ] && pass netns/tier1-consecutive-same ||
	fail netns/tier1-consecutive-same "'$x1' then '$x2' ($(cat "$T/err"))"
is_mount "$node_pin" && [ "$x1" = "$(pin_ns "$node_pin")" ] && pass netns/tier1-node-pin ||
	fail netns/tier1-node-pin "call '$x1', pin '$node_pin' $(pin_ns "$node_pin") ($(grep -F " $node_pin " /proc/self/mountinfo))"

# A location of the test's own.
mkdir -m 755 "$T/pd"
P=$T/pd/pin
export WARDEN_NETNS_PIN=$P
mounts() { awk -v p="$1" '$5 == p' /proc/self/mountinfo | wc -l; }
ns_held t1-none "$T/r1" & p1=$!
ns_held t1-none "$T/r2" & p2=$!
wait $p1 $p2
r1=$(cat "$T/r1"); r2=$(cat "$T/r2")
[ -n "$r1" ] && [ "$r1" = "$r2" ] && [ "$r1" = "$(pin_ns "$P")" ] && [ "$(mounts "$P")" = 1 ] &&
	pass netns/pin-race-one || fail netns/pin-race-one "calls '$r1' '$r2', pin $(pin_ns "$P"), $(mounts "$P") mounts ($(cat "$T/r1.err" "$T/r2.err"))"
[ "$r1" != "$host" ] && [ "$r1" != "$x1" ] && pass netns/pin-own-location ||
	fail netns/pin-own-location "call '$r1' host '$host' node pin '$x1'"
# lo alone, down
empty_at() { [ "$(nsenter --net="$1" ip -o link show | wc -l)" = 1 ] &&
	! nsenter --net="$1" ip -o link show | grep -q 'state UP\|<[^>]*,UP'; }
empty_at "$P" && pass netns/pin-empty || fail netns/pin-empty "$(nsenter --net="$P" ip -o link show)"

unpin() { while umount "$P" 2>/dev/null; do :; done; rm -f "$P"; touch "$P"; }
# NAME: the bad thing is at $P (held at $T/bad-NAME too); a call must run
# in a new, empty, pinned namespace, not the bad one, and say so
n=0
replaced() {
	local name=$1 bad c
	n=$((n + 1))
	touch "$T/bad$n"
	bad=$(stat -L -c %i "$P")
	mount --bind "$P" "$T/bad$n" 2>/dev/null || true
	c=$(ns t1-none)
	if [ -n "$c" ] && [ "$c" != "net:[$bad]" ] && [ "$c" != "$host" ] &&
		[ "$c" = "$(pin_ns "$P")" ] && is_mount "$P" && empty_at "$P"; then
		pass "netns/pin-replaced-$name"
	else
		fail "netns/pin-replaced-$name" "call '$c' bad [$bad] pin $(pin_ns "$P") ($(cat "$T/err"))"
	fi
	case $name in plain) ;;
	*) expect_match "netns/pin-reported-$name" "$(cat "$T/err")" "netns pin '$P'" ;;
	esac
}
unpin
unshare --net="$P" ip link set lo up && replaced lo-up || fail netns/pin-lo-up "cannot make it"
# links down, lo down; stacked on the good pin: every layer goes
if unshare --net="$P" ip link add wdx0 type veth peer name wdx1 2>"$T/e"; then
	replaced veth-down
else
	skip netns/pin-replaced-veth-down "no veth links here: $(cat "$T/e")"
fi
unpin
# empty, but owned by a user namespace whose owner could change it
unshare --user --map-root-user --net sleep 30 & u=$!
for i in $(seq 50); do
	[ "$(readlink /proc/$u/ns/net)" != "$host" ] && break
	sleep 0.1
done
if mount --bind /proc/$u/ns/net "$P" 2>"$T/e"; then
	replaced other-userns
else
	skip netns/pin-replaced-other-userns "$(cat "$T/e")"
fi
kill $u; wait $u 2>/dev/null
unpin
unshare --uts="$P" true && replaced uts || fail netns/pin-uts "cannot make it"
unpin
echo junk >"$P" && replaced plain
unpin
rm -f "$P"
ln -s "$T/bad1" "$P" && replaced symlink || fail netns/pin-symlink "cannot make it"
unpin
rm -f "$P"
mkfifo -m 600 "$P" && replaced fifo || fail netns/pin-fifo "cannot make it"

# A directory others can write: the pin is not used, nor made; the call
# still gets an empty namespace (a private one)
mkdir -m 777 "$T/pw"
export WARDEN_NETNS_PIN=$T/pw/pin
w=$(ns t1-none)
[ -n "$w" ] && [ "$w" != "$host" ] && [ "$w" != "$x1" ] && [ ! -e "$T/pw/pin" ] &&
	pass netns/pin-dir-refused || fail netns/pin-dir-refused "call '$w' host '$host' ($(ls -la "$T/pw"; cat "$T/err"))"
expect_match netns/pin-dir-reported "$(cat "$T/err")" "netns pin '$T/pw/pin': found a directory that is not root's alone"
# A read-only file system: no pin can be made; a private namespace
mkdir -m 755 "$T/ro"
if mount --bind "$T/ro" "$T/ro" && mount -o remount,bind,ro "$T/ro"; then
	export WARDEN_NETNS_PIN=$T/ro/pin
	o=$(ns t1-none)
	[ -n "$o" ] && [ "$o" != "$host" ] && [ "$o" != "$x1" ] && ! is_mount "$T/ro/pin" &&
		pass netns/pin-readonly-private || fail netns/pin-readonly-private "call '$o' host '$host' ($(cat "$T/err"))"
	expect_match netns/pin-readonly-reported "$(cat "$T/err")" "netns pin '$T/ro/pin': .*a private empty namespace instead"
else
	skip netns/pin-readonly-private "cannot make a read-only bind mount here"
fi
# Every directory up to / is judged, not only the pin's (netns.c dir_ok):
# a grandparent a non-root uid can write (it could rename the root-owned
# directory below away and put its own in place), or a symlink anywhere
# on the path, and the pin is not used, nor made; the call gets a private
# empty namespace and it is reported. On the build before, only the pin's
# own directory was looked at: pin-ancestor-* failed there.
mkdir -m 755 "$T/ga" "$T/ga/g" "$T/ga/g/sub"
chown 1000 "$T/ga/g"
chmod 700 "$T/ga/g"
export WARDEN_NETNS_PIN=$T/ga/g/sub/pin
w=$(ns t1-none)
[ -n "$w" ] && [ "$w" != "$host" ] && [ "$w" != "$x1" ] && ! is_mount "$T/ga/g/sub/pin" &&
	pass netns/pin-ancestor-owner-refused || fail netns/pin-ancestor-owner-refused "call '$w' host '$host' ($(cat "$T/err"))"
expect_match netns/pin-ancestor-owner-reported "$(cat "$T/err")" "netns pin '$T/ga/g/sub/pin': found a directory that is not root's alone \\('$T/ga/g'\\)"
chown 0 "$T/ga/g"
chmod 777 "$T/ga/g"
w=$(ns t1-none)
[ -n "$w" ] && [ "$w" != "$host" ] && [ "$w" != "$x1" ] && ! is_mount "$T/ga/g/sub/pin" &&
	pass netns/pin-ancestor-writable-refused || fail netns/pin-ancestor-writable-refused "call '$w' host '$host' ($(cat "$T/err"))"
expect_match netns/pin-ancestor-writable-reported "$(cat "$T/err")" "found a directory that is not root's alone \\('$T/ga/g'\\)"
mkdir -m 755 "$T/real" "$T/real/sub"
ln -s "$T/real" "$T/ln"
export WARDEN_NETNS_PIN=$T/ln/sub/pin
w=$(ns t1-none)
[ -n "$w" ] && [ "$w" != "$host" ] && [ "$w" != "$x1" ] && ! is_mount "$T/real/sub/pin" &&
	pass netns/pin-ancestor-symlink-refused || fail netns/pin-ancestor-symlink-refused "call '$w' host '$host' ($(cat "$T/err"))"
expect_match netns/pin-ancestor-symlink-reported "$(cat "$T/err")" "found a symlink on its path \\('$T/ln'\\)"
# a sticky ancestor of root's (as /tmp) is fine above the pin's directory
chmod 1777 "$T/ga/g"
export WARDEN_NETNS_PIN=$T/ga/g/sub/pin
w=$(ns t1-none)
[ -n "$w" ] && [ "$w" = "$(pin_ns "$T/ga/g/sub/pin")" ] && is_mount "$T/ga/g/sub/pin" &&
	pass netns/pin-ancestor-sticky-pinned || fail netns/pin-ancestor-sticky-pinned "call '$w' pin $(pin_ns "$T/ga/g/sub/pin") ($(cat "$T/err"))"
unset WARDEN_NETNS_PIN
# and the default location still works (after the changes above)
y=$(ns t1-none)
[ -n "$y" ] && [ "$y" != "$host" ] && [ "$y" = "$(pin_ns "$node_pin")" ] && pass netns/pin-default-still ||
	fail netns/pin-default-still "call '$y' node pin '$x1' ($(cat "$T/err"))"
finish
