#!/usr/bin/env bash
# Tier 3 call start with a non-empty network.allow (a netns and veth pair of
# the call's own, tc BPF on the host end, the call's resolver on the link:
# sandbox/gvisor_net.c) against --network=none: the whole one-shot
# `warden exec` of /usr/bin/true, cold (a one-shot exec has no warm pool),
# alternating the two so both see the same machine. Medians
# of N rounds each, in one run. Goal (issue 14): <= 1.3x. Nothing is
# asserted.
[ "$(id -u)" -eq 0 ] || { echo "bench_t3net: needs root"; exit 0; }
command -v runsc >/dev/null || { echo "bench_t3net: runsc not installed"; exit 0; }
BUILD=${BUILD:-build}
N=${T3NET_N:-12}
S=$(mktemp -d /tmp/warden-bench-t3net.XXXXXX)
trap 'rm -rf "$S"' EXIT
for net in none link; do
	allow='[]'
	[ $net = link ] && allow='["127.0.0.1:19399"]'
	cat >"$S/$net.yaml" <<Y
name: bench_t3_$net
tier: 3
exec: ["/usr/bin/true"]
timeout_ms: 30000
network: {allow: $allow}
filesystem: {read: ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"], exec: ["/usr/bin/true"]}
Y
done
"$BUILD/warden" exec --policy "$S/none.yaml" >/dev/null 2>&1 # warm the probe caches
"$BUILD/warden" exec --policy "$S/link.yaml" >/dev/null 2>&1
python3 - "$BUILD/warden" "$S" "$N" <<'PY'
import subprocess, sys, time
warden, s, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = {"none": [], "link": []}
fails = 0
for i in range(n):
    for net in ("none", "link") if i % 2 == 0 else ("link", "none"):
        t0 = time.perf_counter()
        r = subprocess.run([warden, "exec", "--policy", "%s/%s.yaml" % (s, net)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            fails += 1
            continue
        t[net].append(dt * 1000.0)
if not t["none"] or not t["link"]:
    print("bench_t3net: calls failed (%d)" % fails)
    sys.exit(0)
med = {k: sorted(v)[len(v) // 2] for k, v in t.items()}
print("tier-3 call start (warden exec /usr/bin/true, cold), median of %d: "
      "network.allow non-empty %.1f ms, --network=none %.1f ms: %.2fx "
      "(goal <= 1.3x)%s" % (n, med["link"], med["none"], med["link"] / med["none"],
                           "; %d calls failed" % fails if fails else ""))
PY
