#!/usr/bin/env bash
# wardend's tier-1 calls without network join the node's pinned empty
# network namespace (sandbox/netns.h), as one-shot `warden exec` calls do:
# two calls of two runs print the same /proc/self/ns/net, and it is the
# namespace mounted at the pin -- judged from outside by the pin's inode.
# Without the pin, wardend made a namespace of its own that no path names.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/daemon_lib/netns.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-netns "needs root"; finish; }

netns_policy
start_daemon || { fail daemon-netns-start "see log"; finish; }
a=$(ns_of_run); b=$(ns_of_run)
stop_daemon
pin=${WARDEN_NETNS_PIN:-/run/warden/netns-empty}
p=
awk -v p="$pin" '$5 == p' /proc/self/mountinfo | grep -q ' - nsfs ' && p="net:[$(stat -L -c %i "$pin")]"
expect_match daemon-netns/has-one "$a" '^net:\[[0-9]+\]$'
[ "$a" != "$(readlink /proc/self/ns/net)" ] && [ "$a" = "$b" ] && [ "$a" = "$p" ] &&
	pass daemon-netns/pinned || fail daemon-netns/pinned "calls '$a' '$b', host $(readlink /proc/self/ns/net), pin '$p' ($(tail -5 "$T/wardend.log"))"
finish
