#!/usr/bin/env bash
# Tier 1's scratch cannot fill the host or outlive its call. The attacks
# run inside the sandbox; the verdicts come from outside: the host's view
# of the scratch's mount point (du) while the tool holds its files, the host
# file system's free space, the call's directory, cgroup and processes
# after the call, and `warden exec` itself surviving the teardown.
# On the old build the scratch was a directory on the host's /run:
# 8 MiB files (RLIMIT_FSIZE bounds one file, not their number) filled the
# host disk, and a 10,000-deep tree crashed the recursive remover.
. tests/lib.sh
[ "$(id -u)" -eq 0 ] || { skip exec-scratch "needs root"; finish; }
T=$(mktemp -d /tmp/warden-scratch.XXXXXX)
chmod 755 "$T"
RT=${WARDEN_RUNTIME_DIR:-/run/warden}
MARK=wardenscratch$$
cleanup() {
	for p in /proc/[0-9]*; do
		tr '\0' ' ' <"$p/cmdline" | grep -q -- "^$MARK" && kill -KILL "${p#/proc/}"
	done 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
cat >"$T/t1.yaml" <<'EOF'
name: scratch
description: tier-1 scratch attacks
tier: 1
exec: ["/usr/bin/dash", "-c"]
timeout_ms: 60000
memory_mb: 64
pids: 32
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: [], exec: ["/usr/bin"]}
EOF

# 1. fill: 8 MiB files until something stops it (up to 256 MiB), then
# hold them while the host looks
free0=$(df -Pk "$RT" | awk 'NR==2 {print $4}')
"$WARDEN" exec --policy "$T/t1.yaml" --json -- /usr/bin/dash -c '
cd "$HOME"; i=0
while [ $i -lt 32 ] && dd if=/dev/zero of=f$i bs=1M count=8 2>/dev/null; do i=$((i+1)); done
echo "wrote $i"; touch ready; sleep 3' >"$T/fill.json" 2>&1 &
EP=$!
host_mb=-1
for _ in $(seq 300); do
	d=$(ls -d "$RT/t1scratch" 2>/dev/null)
	# the host's view of the call's scratch, while the tool holds its files
	if [ -n "$d" ] && [ "$(find "$d" -name ready 2>/dev/null)" ] || [ -n "$d" ] && ! kill -0 $EP 2>/dev/null; then
		break
	fi
	if [ -n "$d" ]; then
		host_mb=$(du -sm "$d" 2>/dev/null | cut -f1)
	fi
	sleep 0.05
done
sleep 1
d=$(ls -d "$RT/t1scratch" 2>/dev/null)
[ -n "$d" ] && host_mb=$(du -sm "$d" 2>/dev/null | cut -f1)
free1=$(df -Pk "$RT" | awk 'NR==2 {print $4}')
wait $EP
wrote=$(grep -o 'wrote [0-9]*' "$T/fill.json" | cut -d' ' -f2)
[ -n "$wrote" ] || wrote=-1
# 64 MiB of memory: at most 8 files of 8 MiB fit, less what the tool uses
# (and at least one: a tool that wrote nothing proves no cap)
if [ "$wrote" -ge 1 ] && [ "$wrote" -le 8 ]; then
	pass scratch/fill-stops-at-cap
else
	fail scratch/fill-stops-at-cap "the tool wrote $wrote files of 8 MiB under memory_mb 64"
fi
expect_match scratch/fill-host-view-empty "${host_mb:-0}" '^(-1|0|1)$'
used_mb=$(((free0 - free1) / 1024))
if [ "$used_mb" -lt 64 ]; then
	pass scratch/fill-host-disk
else
	fail scratch/fill-host-disk "host file system lost $used_mb MiB during the call"
fi

# 2. a 10,000-deep tree, a symlink to / and a background process: the
# call ends cleanly, its directory, cgroup and processes are gone, and
# warden exec (the supervisor) is alive to report it
out=$("$WARDEN" exec --policy "$T/t1.yaml" --json -- /usr/bin/python3 -c '
import os
os.chdir(os.environ["HOME"]); os.symlink("/", "root-link")
os.system("(exec -a '"$MARK"' /usr/bin/sleep 100 </dev/null >/dev/null 2>&1 &)")
i = 0
while i < 10000:
    os.mkdir("d"); os.chdir("d"); i += 1
print("depth", i, flush=True)
os._exit(7)')
rc=$?
expect_eq scratch/deep-supervisor-alive "$rc" 7
expect_match scratch/deep-made "$out" 'depth 10000'
id=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["call_id"])' 2>/dev/null)
gone=1
for _ in $(seq 50); do
	[ -n "$id" ] && [ ! -e "$RT/calls/$id" ] && break
	sleep 0.1
done
[ -n "$id" ] && [ ! -e "$RT/calls/$id" ] || gone=0
expect_eq scratch/deep-calldir-gone "$gone" 1
left=$(find /sys/fs/cgroup -maxdepth 4 -type d -name "$id" 2>/dev/null | head -3)
expect_eq scratch/no-cgroup-left "$left" ""
procs=$(for p in /proc/[0-9]*; do tr '\0' ' ' <"$p/cmdline" | grep -q -- "^$MARK" && echo "${p#/proc/}"; done 2>/dev/null)
expect_eq scratch/no-process-left "$procs" ""
expect_eq scratch/host-root-intact "$(test -d /usr/bin && echo ok)" ok
finish
