#!/usr/bin/env bash
# Fail closed (issue 2, item 6): when a mechanism a manifest constraint needs
# is missing, `warden exec` refuses the call, names the constraint and the
# mechanism, exits 125, and runs nothing. The mechanisms are really taken
# away, not simulated: each case runs warden in a private mount namespace
# (unshare -m, propagation private) where a cgroup hierarchy is unmounted or
# the kernel's BTF is hidden under an empty tmpfs. The node's own mounts are
# untouched (the namespace goes with its last process).
. tests/lib.sh
tmp=$(mktemp -d /tmp/warden-failclosed.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# tools run as an unprivileged uid: it must reach $tmp/w
chmod 0711 "$tmp"
mkdir -p "$tmp/w" && chmod 0777 "$tmp/w"

# The tool leaves a marker when it runs: a refusal must come first.
cat >"$tmp/ok.yaml" <<EOF
name: failclosed_probe
description: writes a marker if it runs
tier: 1
exec: ["/usr/bin/touch", "$tmp/w/ran"]
timeout_ms: 5000
memory_mb: 64
cpus: 0.5
pids: 16
network: {allow: ["127.0.0.1:9"]}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: ["$tmp/w"], exec: ["/usr/bin/touch"]}
side_effects: none
output: {max_bytes: 4096}
EOF

# the call leaves (the warden/ parent itself goes when its last user exits;
# warden/keep-warm, where the keep-warm links hang, is no call's)
V2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
cg_list() { call_leaves "$V2/warden"; }
before=$(cg_list)

# the control: with every mechanism present the same manifest runs
out=$("$WARDEN" exec --policy "$tmp/ok.yaml" -- /usr/bin/touch "$tmp/w/ran" 2>&1)
rc=$?
expect_eq failclosed-control-runs "$rc" 0
[ -e "$tmp/w/ran" ] && pass failclosed-control-marker ||
	fail failclosed-control-marker "the control call did not run: $out"
rm -f "$tmp/w/ran"

# refused NAME SETUP REGEX: run warden after SETUP in a private mount ns
refused() {
	local name=$1 setup=$2 want=$3 out rc
	out=$(unshare -m --propagation private sh -c \
		"$setup && exec \"$WARDEN\" exec --policy \"$tmp/ok.yaml\" -- /usr/bin/touch \"$tmp/w/ran\"" 2>&1)
	rc=$?
	expect_eq "failclosed-$name-exit125" "$rc" 125
	expect_match "failclosed-$name-names-it" "$out" "$want"
	if [ -e "$tmp/w/ran" ]; then
		fail "failclosed-$name-nothing-ran" "the tool ran: $tmp/w/ran exists"
		rm -f "$tmp/w/ran"
	else
		pass "failclosed-$name-nothing-ran"
	fi
	# the message is whole: no repeated or torn prefix
	local n
	n=$(printf '%s' "$out" | grep -o 'cannot enforce' | wc -l)
	[ "$n" -le 1 ] && pass "failclosed-$name-message-once" ||
		fail "failclosed-$name-message-once" "$out"
}

have_v1() { grep -q " /sys/fs/cgroup/$1 .* cgroup .*[ ,]$1\b" /proc/self/mountinfo; }

for c in pids memory cpu; do
	if have_v1 "$c"; then
		case $c in
		pids) want='pids limit: cannot enforce: no pids controller' ;;
		memory) want='memory limit: cannot enforce: no memory controller' ;;
		cpu) want='cpu limit: cannot enforce: no cpu controller' ;;
		esac
		refused "no-$c-controller" "umount /sys/fs/cgroup/$c" "$want"
	else
		skip "failclosed-no-$c-controller" "the $c controller is not on a v1 hierarchy of this node (only a v1 mount can be taken away in a private namespace without touching the node)"
	fi
done

v2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
if [ -n "$v2" ]; then
	refused no-cgroup-v2 "umount $v2" 'cgroup: no cgroup v2 hierarchy'
else
	skip failclosed-no-cgroup-v2 "no cgroup2 mount on this node"
fi

# BPF egress needs the kernel's BTF (libbpf): hidden, the programs do not
# load and network.allow cannot be held. A one-shot call uses the node's
# pinned programs when an earlier call loaded them (enforce/egress_pin.c):
# a fresh, empty bpffs in the namespace stands for a node where none is
# pinned yet, so this call must load them itself.
if [ -e /sys/kernel/btf/vmlinux ]; then
	refused no-btf-egress "mount -t tmpfs none /sys/kernel/btf && mount -t bpf bpf /sys/fs/bpf" \
		'network.allow: cannot enforce: BPF egress programs unavailable: egress: load'
else
	skip failclosed-no-btf-egress "no /sys/kernel/btf/vmlinux on this node"
fi

# tier 2's pid 1 named by $WARDEN_INIT: a path that is not there is
# refused, not replaced by the warden-init next to the binary
sed 's/^tier: 1$/tier: 2/' "$tmp/ok.yaml" >"$tmp/ok2.yaml"
out=$(WARDEN_INIT=/nonexistent/warden-init "$WARDEN" exec --policy "$tmp/ok2.yaml" -- /usr/bin/touch "$tmp/w/ran" 2>&1)
rc=$?
expect_eq failclosed-init-named-missing-exit125 "$rc" 125
expect_match failclosed-init-named-missing-names-it "$out" 'warden-init not found .*at \$WARDEN_INIT=/nonexistent/warden-init'
if [ -e "$tmp/w/ran" ]; then
	fail failclosed-init-named-missing-nothing-ran "the tool ran"
	rm -f "$tmp/w/ran"
else
	pass failclosed-init-named-missing-nothing-ran
fi

after=$(cg_list)
expect_eq failclosed-no-cgroup-left "$after" "$before"
finish
