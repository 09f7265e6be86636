#!/usr/bin/env bash
# The empty network namespaces of calls without network (sandbox/netns.h),
# made on a thread while the call is set up and joined by its first
# process: a tier-2 call is in a namespace of its own, another one each
# call, never the host's; a tier-1 call is in the process's shared empty
# one, not the host's either; a call with network.allow stays in the
# host's (tier 1). Judged from inside by /proc/self/ns/net and from
# outside against the host's. Calls compared with each other run at the
# same time (each stays a second): the kernel reuses a freed namespace's
# inode number, so two calls one after the other may show the same one.
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || { skip netns "needs root"; finish; }
T=$(mktemp -d /tmp/warden-netns.XXXXXX)
trap 'rm -rf "$T"' EXIT
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
finish
