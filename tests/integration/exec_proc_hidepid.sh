#!/usr/bin/env bash
# Tier 1 shares the host's pid namespace; a manifest that grants /proc got
# the host's procfs, where every process of the node is listed: another
# team's call with a secret in its argv, host daemons, /proc/1/net. The
# call now gets a procfs of its own, hidepid=invisible. The attack runs
# INSIDE the sandbox (a scan of /proc/*/cmdline); the verdict comes from
# outside: the victims are live processes the test started (a host one as
# root, a concurrent call of another manifest), whose argv carries a
# marker the attacker prints if it can read it. The attacker also proves
# its /proc works (its own status, /proc/meminfo, /proc/self/fd), so a
# /proc refused whole would fail. On the old build it printed both
# markers and counted every pid of the node. A call without /proc
# granted gets the same procfs (stat of /proc/PID is not Landlock's).
. tests/lib.sh
set -u
[ "$(id -u)" -eq 0 ] || { skip exec-proc-hidepid "needs root"; finish; }
T=$(mktemp -d /var/tmp/warden-hidepid.XXXXXX)
chmod 755 "$T"
export WARDEN_RUNTIME_DIR=$T/rt WARDEN_UID_DIR=$T/uids
mkdir -m 711 "$T/rt"
PIDS=()
# the victim calls' `warden exec` is killed with -9: its cgroups and
# call directory are the test's to remove
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; remove_calls "$T/rt"; rm -rf "$T"' EXIT
M1="hostsecret-$$-$RANDOM" M2="callsecret-$$-$RANDOM"

# manifest NAME [GRANT]: $T/NAME.yaml, reading GRANT too
manifest() {
	cat >"$T/$1.yaml" <<Y
name: hidepid
tier: 1
timeout_ms: 20000
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"${2:+, $2}], exec: ["/usr/bin"]}
Y
}
# victims NAME: a host process (HP) and another call of manifest NAME
# (VP, its tool's pid), each with a marker in argv; 1 if the call never ran
victims() {
	# the marker in sleep's own argv[0]: kill -9 leaves no child
	(exec -a "sleep-$M1" sleep 30) &
	PIDS+=($!)
	HP=$!
	"$WARDEN" exec --policy "$T/$1.yaml" -- /bin/sh -c "sleep 20 # $M2" >/dev/null 2>&1 &
	PIDS+=($!)
	VP=
	for _ in $(seq 100); do
		# the tool's shell, of the call's uid (not warden exec's)
		VP=$(for p in $(pgrep -f "sleep 20 # $M2"); do
			u=$(stat -c %u "/proc/$p" 2>/dev/null)
			[ -n "$u" ] && [ "$u" != 0 ] && echo "$p"
		done | head -1)
		[ -n "$VP" ] && return 0
		sleep 0.05
	done
	fail "$1/victim-call-started" "the victim call never ran"
	return 1
}

for grant in '"/proc"' '"/"'; do
	n=${grant//[^a-z]/}
	n=${n:-root}
	manifest "$n" "$grant"
	victims "$n" || continue
	out=$("$WARDEN" exec --policy "$T/$n.yaml" -- /bin/sh -c '
		for f in /proc/[0-9]*/cmdline; do tr "\0" " " <"$f"; echo; done 2>/dev/null
		echo "pids: $(ls -d /proc/[0-9]* | wc -l)"
		grep -c "^Uid:" /proc/self/status
		head -1 /proc/meminfo
		ls /proc/self/fd | wc -l' 2>/dev/null)
	case $out in *"$M1"*) fail "$n/host-process-argv-hidden" "the call read a host process's argv" ;;
	*) pass "$n/host-process-argv-hidden" ;; esac
	case $out in *"$M2"*) fail "$n/other-call-argv-hidden" "the call read another call's argv" ;;
	*) pass "$n/other-call-argv-hidden" ;; esac
	[ -d "/proc/$HP" ] && pass "$n/host-victim-alive" || fail "$n/host-victim-alive" "gone"
	expect_match "$n/own-proc-works" "$out" 'MemTotal:'
	pids=$(printf '%s\n' "$out" | sed -n 's/^pids: //p')
	[ -n "$pids" ] && [ "$pids" -lt 10 ] && pass "$n/only-own-pids" ||
		fail "$n/only-own-pids" "saw ${pids:-no} pids"
	for p in "${PIDS[@]}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done
	pkill -9 -f "sleep 20 # $M2" 2>/dev/null
	PIDS=()
done

# Without /proc granted Landlock refuses reading it, but not stat(): on
# the host's procfs a call still learned every process of the node, its
# owner and start time, by stat of /proc/PID (the old build printed the
# host victim's and the other call's owners). The call's own procfs
# shows none but its own processes: the attacker stats the pids the
# test knows are alive (a host process, another call, pid 1) and its own.
manifest none
if victims none; then
	out=$("$WARDEN" exec --policy "$T/none.yaml" -- /bin/sh -c "
		for p in $HP $VP 1; do stat -c 'seen %n %u' /proc/\$p 2>/dev/null || echo hidden; done
		stat -c 'own %u' /proc/\$\$" 2>&1)
	[ -d "/proc/$HP" ] && [ -d "/proc/$VP" ] && pass nogrant/victims-alive ||
		fail nogrant/victims-alive "gone"
	expect_eq nogrant/others-hidden "$(printf '%s\n' "$out" | grep -c '^hidden$')" 3
	expect_match nogrant/own-pid-seen "$out" '^own [1-9][0-9]*$'
fi
for p in "${PIDS[@]}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done
pkill -9 -f "sleep 20 # $M2" 2>/dev/null
finish
