#!/usr/bin/env bash
# Confinement that must hold past the obvious: a supervisor killed with -9,
# the caller's open fds, executing without execve (memfd, the dynamic
# loader), host unix sockets. A static helper inside the sandbox attacks;
# the verdict comes from outside (listeners' accept counts, /proc, the
# call's cgroup, bpftool), not only from the helper.
. tests/lib.sh
set -u
T=$(mktemp -d /run/warden-confine.XXXXXX); chmod 755 "$T"
# uid records of our own: a call killed with -9 (section 1) leaves its
# record naming $T/w, gone with $T, so that uid would never be reused (a
# record whose write path is not the one the call had), and every later
# `warden exec` walking over it in the node's records paid a /proc walk
# (uidpool.c recover); a range of our own, away from the first uids
# other calls on the node start from
export WARDEN_UID_DIR=$T/uids WARDEN_UID_RANGE=2000003584-2000003839
cp "$HELPERS/probe" "$T/probe"; chmod 755 "$T/probe"
P=$T/probe
V2=$(awk '$3=="cgroup2"{print $2; exit}' /proc/mounts)
WARDEND=${WARDEND:-$PWD/$BUILD/wardend}
mkdir -m 1777 "$T/w" "$T/out"
mkdir -m 755 "$T/data"
cp "$P" "$T/data/pcopy"; chmod 644 "$T/data/pcopy" # readable, not in exec
SECRET=$T/secret; echo topsecret-fd > "$SECRET"; chmod 600 "$SECRET"
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "${WPID:-}" ] && kill -9 "$WPID" 2>/dev/null
	remove_calls "$T"/rt*
	rm -rf "$T"
}
trap cleanup EXIT
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# Listeners outside the sandbox that count what reaches them: TCP on
# loopback, unix sockets outside and inside the policy's write path.
python3 - "$T" <<'PY' &
import socket, sys, os, threading
d = sys.argv[1]
def tcp():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
    open(f"{d}/port.tmp", "w").write(str(s.getsockname()[1]))
    os.rename(f"{d}/port.tmp", f"{d}/port")
    while True:
        c, _ = s.accept(); open(f"{d}/tcp-hits", "a").write("x\n"); c.close()
def unix(path, name):
    s = socket.socket(socket.AF_UNIX); s.bind(path); os.chmod(path, 0o777); s.listen(64)
    while True:
        c, _ = s.accept(); open(f"{d}/{name}-hits", "a").write("x\n"); c.close()
def abstract():
    s = socket.socket(socket.AF_UNIX); s.bind("\0warden-confine-" + os.path.basename(d)); s.listen(64)
    while True:
        c, _ = s.accept(); open(f"{d}/abs-hits", "a").write("x\n"); c.close()
for f, a in ((tcp, ()), (unix, (f"{d}/out/host.sock", "out")),
             (unix, (f"{d}/w/ok.sock", "w")), (abstract, ())):
    threading.Thread(target=f, args=a, daemon=True).start()
threading.Event().wait()
PY
PIDS+=($!)
for i in $(seq 100); do [ -f "$T/port" ] && [ -S "$T/w/ok.sock" ] && break; sleep 0.05; done
PORT=$(cat "$T/port")
hits() { [ -f "$T/$1-hits" ] && wc -l < "$T/$1-hits" || echo 0; }

mk() { # name tier allow
	cat > "$T/$1.yaml" <<Y
name: $1
tier: $2
timeout_ms: 20000
pids: 32
network: {allow: $3}
filesystem: {read: ["$T/data", "/usr", "/etc/ld.so.cache"], write: ["$T/w"], exec: ["$P"]}
Y
	echo "$T/$1.yaml"
}

# ---- 1. kill -9 of the supervisor ------------------------------------------
# Tier 1 keeps the host netns ([] = no egress by BPF alone); tier 2 gets an
# allow-list that does not name the listener, so it too keeps the host
# network and BPF is the line. The tool leaves a daemonised grandchild that
# tries the listener every 100 ms; the CLI is killed mid-call.
for tier in 1 2; do
	allow='[]'; [ $tier = 2 ] && allow='["127.0.0.2:9"]'
	M=$(mk kill$tier $tier "$allow")
	RT=$T/rt$tier; PD=$T/w/pids$tier; mkdir -p "$RT"; mkdir -m 1777 "$PD"
	WARDEN_RUNTIME_DIR=$RT "$WARDEN" exec --policy "$M" -- "$P" linger-connect "$PORT" 8 "$PD" >/dev/null 2>&1 &
	WPID=$!
	for i in $(seq 100); do [ -s "$PD/grand" ] && break; sleep 0.05; done
	id=$(ls "$RT/calls" 2>/dev/null | grep -v "^spare-" | head -1)
	CG=$V2/warden/$id
	if [ -z "$id" ] || [ ! -s "$PD/grand" ]; then
		fail "t$tier/kill9-setup" "the call did not start"; continue
	fi
	before=$(hits tcp)
	kill -9 "$WPID"; wait "$WPID" 2>/dev/null; WPID=
	# the tool's first process dies with its supervisor (tier 2: pid 1 of
	# the call's namespace, taking every process with it)
	gone=no
	for i in $(seq 40); do
		if [ $tier = 1 ]; then
			first=$(cat "$PD/first")
			st=$(awk '{print $3}' /proc/$first/stat 2>/dev/null)
			{ [ -z "$st" ] || [ "$st" = Z ]; } && { gone=yes; break; }
		else
			[ -z "$(cat "$CG/cgroup.procs" 2>/dev/null)" ] && { gone=yes; break; }
		fi
		sleep 0.05
	done
	if [ $tier = 1 ]; then
		expect_eq "t1/kill9-first-process-dies" "$gone" yes
	else
		expect_eq "t2/kill9-every-process-dies" "$gone" yes
	fi
	# a survivor (tier 1's daemonised grandchild) stays confined: the
	# call's egress programs stay on its cgroup, the listener gets nothing
	sleep 1.5
	left=$(cat "$CG/cgroup.procs" 2>/dev/null | wc -l)
	progs=$(bpftool cgroup show "$CG" 2>/dev/null | grep -c connect4)
	if [ "$left" -gt 0 ]; then
		[ "$progs" -ge 1 ] && pass "t$tier/kill9-survivor-keeps-egress-programs" ||
			fail "t$tier/kill9-survivor-keeps-egress-programs" "$left processes, no connect4 program on $CG"
	fi
	expect_eq "t$tier/kill9-no-egress-after-supervisor-death" "$(( $(hits tcp) - before ))" 0
	# wardend's start-up sweep kills and removes what is left
	WARDEN_RUNTIME_DIR=$RT "$WARDEND" --state "$T/st$tier" --policy policy --socket "$T/s$tier" >"$T/wd$tier.log" 2>&1 &
	WPID=$!
	for i in $(seq 100); do curl -s --unix-socket "$T/s$tier" http://w/healthz >/dev/null 2>&1 && break; sleep 0.1; done
	kill "$WPID"; wait "$WPID" 2>/dev/null; WPID=
	grand=$(cat "$PD/grand")
	alive=no
	if [ $tier = 1 ]; then
		st=$(awk '{print $3}' /proc/$grand/stat 2>/dev/null)
		[ -n "$st" ] && [ "$st" != Z ] && alive=yes
	fi
	[ -d "$CG" ] && cgl=yes || cgl=no
	expect_eq "t$tier/kill9-sweep-removes-leftovers" "$alive $cgl $(ls "$RT/calls" | grep -vc "^spare-")" "no no 0"
done

# ---- 2. the caller's fds ----------------------------------------------------
for tier in 1 2; do
	M=$(mk fd$tier $tier '[]')
	out=$( (exec 7<"$SECRET"; "$WARDEN" exec --policy "$M" -- "$P" fd-read 7 2>&1) )
	case "$out" in
	*topsecret*) fail "t$tier/caller-fd-not-inherited" "read the secret through fd 7: $out" ;;
	*"Bad file descriptor"*) pass "t$tier/caller-fd-not-inherited" ;;
	*) fail "t$tier/caller-fd-not-inherited" "$out" ;;
	esac
done

# ---- 3. execution without execve ---------------------------------------------
for tier in 1 2; do
	M=$(mk ex$tier $tier '[]')
	# (a) a readable, non-executable binary copied into a memfd
	for fl in 0 8; do
		j=$("$WARDEN" exec --policy "$M" --json -- "$P" memfd-exec "$T/data/pcopy" $fl 2>/dev/null)
		so=$(printf '%s' "$j" | jq_ 'd["stdout"]')
		case "$so" in
		*MEMFD-RAN*) fail "t$tier/memfd-exec-flags$fl-denied" "ran: $so" ;;
		*refused*) pass "t$tier/memfd-exec-flags$fl-denied" ;;
		*) fail "t$tier/memfd-exec-flags$fl-denied" "$so" ;;
		esac
		if [ $tier = 1 ]; then
			sys=$([ $fl = 0 ] && echo memfd_create || echo execveat)
			expect_match "t1/memfd-exec-flags$fl-recorded" \
				"$(printf '%s' "$j" | jq_ '[x["syscall"] for x in d["denials"]]')" "'$sys'"
		fi
	done
	# (b) a binary the tool writes, run through the dynamic loader
	if [ $tier = 2 ]; then
		for where in scratch write-path; do
			dst=TMPDIR/echo; [ $where = write-path ] && dst=$T/w/echo$tier
			n=t2/loader-run-written-to-$where-denied
			out=$("$WARDEN" exec --policy "$M" -- "$P" loader-run /usr/bin/echo "$dst" /lib64/ld-linux-x86-64.so.2 2>&1)
			case "$out" in
			*LOADER-RAN*) fail "$n" "ran" ;;
			*"failed to map segment"*) pass "$n" ;;
			*) fail "$n" "$out" ;;
			esac
		done
	fi
done
# what stays possible is said in `warden status`, not hidden
st=$("$WARDEN" status 2>/dev/null | tr -s ' \n' ' ')
expect_match "status-states-loader-route" "$st" "Landlock holds execve; mapping a readable file executable through the dynamic loader \(ld.so FILE\) is not held without BPF LSM mmap_file"
expect_match "status-states-tier2-noexec" "$st" "noexec"

# ---- 4. host unix sockets ---------------------------------------------------
for tier in 1 2; do
	allow='[]'; [ $tier = 2 ] && allow='["127.0.0.2:9"]' # tier 2 on the host netns: abstract reachable
	M=$(mk ux$tier $tier "$allow")
	b=$(hits out)
	j=$("$WARDEN" exec --policy "$M" --json -- "$P" unix-connect "$T/out/host.sock" 2>/dev/null)
	expect_eq "t$tier/unix-connect-outside-write-denied" "$(( $(hits out) - b ))" 0
	expect_match "t$tier/unix-connect-outside-write-recorded" \
		"$(printf '%s' "$j" | jq_ '[x["target"] for x in d["denials"]]')" "'$T/out/host.sock'"
	b=$(hits out)
	"$WARDEN" exec --policy "$M" -- "$P" unix-connect "$T/w/../out/host.sock" >/dev/null 2>&1
	expect_eq "t$tier/unix-connect-dotdot-denied" "$(( $(hits out) - b ))" 0
	b=$(hits out)
	"$WARDEN" exec --policy "$M" -- "$P" unix-sendto "$T/out/host.sock" >/dev/null 2>&1
	"$WARDEN" exec --policy "$M" -- "$P" unix-connect "@warden-confine-$(basename "$T")" >/dev/null 2>&1
	expect_eq "t$tier/unix-abstract-denied" "$(hits abs)" 0
	b=$(hits w)
	out=$("$WARDEN" exec --policy "$M" -- "$P" unix-connect "$T/w/ok.sock" 2>&1)
	expect_eq "t$tier/unix-connect-under-write-allowed" "$(( $(hits w) - b ))" 1
done

# ---- 5. a tool starts with SIGPIPE's default action -------------------------
# The supervisor ignores SIGPIPE for itself (wardend; warden exec), and an
# ignored signal stays ignored across exec: the tool would see EPIPE where
# a shell's pipeline ends it (`yes | head`). Run from a caller that ignores
# it too; judged by the tool's own SigIgn mask (bit 13 = SIGPIPE).
for tier in 1 2; do
	cat >"$T/sp$tier.yaml" <<Y
name: sp$tier
tier: $tier
timeout_ms: 20000
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/proc"], exec: ["/usr/bin"]}
Y
	ign=$( (trap '' PIPE; "$WARDEN" exec --policy "$T/sp$tier.yaml" -- /usr/bin/grep SigIgn /proc/self/status 2>/dev/null) | awk '{print $2}')
	if [ -n "$ign" ] && (( (16#$ign >> 12 & 1) == 0 )); then
		pass "t$tier/sigpipe-default"
	else
		fail "t$tier/sigpipe-default" "SigIgn '$ign' (bit 12: SIGPIPE ignored, or no answer)"
	fi
done
finish
