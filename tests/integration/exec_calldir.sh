#!/usr/bin/env bash
# A call's directory (calls/<id>, locked on itself while the call lives)
# is an empty spare (calls/spare-<k>) renamed to the call's id, and given
# back under a spare's name when the call ends: no directory made and
# removed per call. A spare is taken only if it is root's, 01711 and
# holds no directory; while the call lives its mtime is fresh (the sweep
# takes an old call directory whose cgroup is not there for a stale one:
# on a build that kept the spare's old mtime, calldir/taken-fresh fails).
. tests/lib.sh
set -u
[ "$(id -u)" -eq 0 ] || { skip exec-calldir "needs root"; finish; }
T=$(mktemp -d /tmp/warden-calldir.XXXXXX)
chmod 711 "$T"
export WARDEN_RUNTIME_DIR=$T/rt
C=$T/rt/calls
WPID=
cleanup() {
	[ -n "$WPID" ] && kill "$WPID" 2>/dev/null && wait "$WPID" 2>/dev/null
	remove_calls "$T/rt"
	rm -rf "$T"
}
trap cleanup EXIT
cat >"$T/m.yaml" <<'EOF'
name: calldir
tier: 1
timeout_ms: 20000
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc"], exec: ["/usr/bin/true", "/usr/bin/sleep"]}
EOF
ids() { ls "$C" 2>/dev/null | grep -v '^spare-'; }
# start a lingering call; its id in $id
linger() {
	"$WARDEN" exec --policy "$T/m.yaml" -- /usr/bin/sleep 2 >/dev/null 2>&1 &
	WPID=$!
	id=
	for _ in $(seq 100); do
		id=$(ids | head -1)
		[ -n "$id" ] && break
		sleep 0.05
	done
}

"$WARDEN" exec --policy "$T/m.yaml" -- /usr/bin/true
expect_eq calldir/first-call "$?" 0
expect_eq calldir/given-back "$(ls "$C" | tr '\n' ' ')" "spare-0 "
expect_eq calldir/spare-mode "$(stat -c '%a %u %h' "$C/spare-0" 2>&1)" "1711 0 2"
ino=$(stat -c %i "$C/spare-0")
touch -d '1 hour ago' "$C/spare-0"

linger
expect_eq calldir/spare-taken "$(stat -c %i "$C/$id" 2>&1)" "$ino"
age=$(($(date +%s) - $(stat -c %Y "$C/$id" 2>/dev/null || echo 0)))
[ "$age" -lt 60 ] && pass calldir/taken-fresh || fail calldir/taken-fresh "mtime ${age}s old: a sweep would take the live call's directory for stale"
wait "$WPID"
expect_eq calldir/linger-ok "$?" 0
WPID=
expect_eq calldir/same-spare-back "$(ls "$C" | tr '\n' ' ') $(stat -c %i "$C/spare-0")" "spare-0  $ino"

# not ours: another owner's, another mode, a directory inside: never taken
chown nobody "$C/spare-0"
mkdir -m 1711 "$C/spare-1" "$C/spare-2"
chmod 1777 "$C/spare-1"
mkdir "$C/spare-2/x"
i0=$(stat -c %i "$C/spare-0")
i1=$(stat -c %i "$C/spare-1")
i2=$(stat -c %i "$C/spare-2")
linger
got=$(stat -c %i "$C/$id" 2>&1)
[ -n "$id" ] && [ "$got" != "$i0" ] && [ "$got" != "$i1" ] && [ "$got" != "$i2" ] &&
	pass calldir/foreign-spares-not-taken ||
	fail calldir/foreign-spares-not-taken "call dir '$id' inode $got (spares $i0 $i1 $i2)"
wait "$WPID"
WPID=
expect_eq calldir/foreign-spares-left "$(stat -c %i "$C/spare-0" "$C/spare-1" "$C/spare-2" | tr '\n' ' ')" "$i0 $i1 $i2 "
# the call's own directory went back under the free name
expect_eq calldir/given-back-free-name "$(ls "$C" | tr '\n' ' ')" "spare-0 spare-1 spare-2 spare-3 "
# something in a call directory: removed, not kept (a spare holds nothing)
rm -rf "$C"/spare-*
"$WARDEN" exec --policy "$T/m.yaml" -- /usr/bin/true
linger # takes that spare-0
touch "$C/$id/left"
wait "$WPID"
WPID=
expect_eq calldir/nonempty-removed "$(ls -A "$C")" ""
finish
