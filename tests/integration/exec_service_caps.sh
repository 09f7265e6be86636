#!/usr/bin/env bash
# wardend as deployed runs with the capability set of
# scripts/wardend.service (CapabilityBoundingSet=) or of the DaemonSet in
# scripts/k8s-daemonset.yaml (capabilities.add), not a full root's. A
# call is run here by `warden exec` under exactly each set (setpriv
# --bounding-set: root's capabilities after the exec are the set's), so a
# capability a deployment lacks shows as a call that fails or a host path
# changed.
# Seen: without CAP_FSETID the kernel clears the set-group-id bit of a
# write path's directory whose group the daemon is not in on every ACL
# write (posix_acl_update_mode): a team's 2770 shared directory came back
# 0770 after one call (*/setgid-kept fails on both files before).
. tests/lib.sh
set -u
[ "$(id -u)" -eq 0 ] || { skip exec-service-caps "needs root"; finish; }
command -v setpriv >/dev/null || { skip exec-service-caps "setpriv missing (util-linux)"; finish; }
T=$(mktemp -d /tmp/warden-svccaps.XXXXXX)
chmod 711 "$T"
export WARDEN_RUNTIME_DIR=$T/rt WARDEN_UID_DIR=$T/uids
trap 'remove_calls "$T/rt"; rm -rf "$T"' EXIT
# NAME CAPS...: the call under that set (names as CAP_X or X)
run_under() {
	local n=$1 bs=-all c
	shift
	[ $# -gt 0 ] || { fail "$n/set-found" "no capability list found"; return; }
	for c in "$@"; do
		c=${c#CAP_}
		bs="$bs,+${c,,}"
	done
	rm -rf "$T/w"
	mkdir "$T/w"
	chgrp 65534 "$T/w"
	chmod 2770 "$T/w"
	out=$(setpriv --bounding-set "$bs" --inh-caps -all -- "$WARDEN" exec --policy "$T/m.yaml" -- /usr/bin/touch "$T/w/made" 2>&1)
	rc=$?
	expect_eq "$n/call-runs" "rc=$rc" "rc=0"
	[ $rc -eq 0 ] || printf '%s\n' "$out" | head -5 >&2
	[ -e "$T/w/made" ] && pass "$n/tool-wrote" || fail "$n/tool-wrote" "no file"
	expect_eq "$n/setgid-kept" "$(stat -c '%a %g' "$T/w")" "2770 65534"
	acl=$(python3 -c 'import os, sys
try: os.getxattr(sys.argv[1], "system.posix_acl_access"); print("acl")
except OSError as e: print("none" if e.errno == 61 else e)' "$T/w")
	expect_eq "$n/acl-gone" "$acl" none
}
cat >"$T/m.yaml" <<Y
name: svccaps
tier: 1
timeout_ms: 20000
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: ["$T/w"], exec: ["/usr/bin/touch"]}
Y
# shellcheck disable=SC2046
run_under systemd $(sed -n 's/^CapabilityBoundingSet=//p' scripts/wardend.service)
# the DaemonSet's list: capabilities: add: ["A", "B", ...] over lines
# shellcheck disable=SC2046
run_under k8s $(sed -n '/^ *add: \[/,/\]/p' scripts/k8s-daemonset.yaml | tr -d '[]",' | sed 's/^ *add://')
finish
