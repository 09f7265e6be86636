#!/usr/bin/env bash
# Tier 3 beyond the node (sandbox/t3beyond.h): the whole one-shot
# `warden exec` of /usr/bin/true with an IP rule beyond the node (the
# call's nftables table made and deleted, forwarding on its host end)
# against the same with a rule on the node's loopback (a link, no
# routing), alternating the two so both see the same machine. Both run in
# a "node" of the bench's own: a network namespace with ip_forward=1 and
# an uplink (a veth pair) carrying the route to the destination; the
# host's sysctls are never touched. Medians of N rounds each, in one run.
# Nothing is asserted.
[ "$(id -u)" -eq 0 ] || { echo "bench_t3beyond: needs root"; exit 0; }
command -v runsc >/dev/null || { echo "bench_t3beyond: runsc not installed"; exit 0; }
command -v nsenter >/dev/null || { echo "bench_t3beyond: nsenter not installed"; exit 0; }
BUILD=${BUILD:-build}
N=${T3NET_N:-12}
S=$(mktemp -d /tmp/warden-bench-t3b.XXXXXX)
NS=wdbt3b$$
trap 'ip netns del "$NS" 2>/dev/null; rm -rf "$S"' EXIT
ip netns add "$NS" || { echo "bench_t3beyond: cannot make a network namespace"; exit 0; }
ip -n "$NS" link set lo up
ip -n "$NS" link add up0 type veth peer name up1
ip -n "$NS" addr add 10.233.0.1/24 dev up0
ip -n "$NS" link set up0 up
ip -n "$NS" link set up1 up
nsenter --net="/run/netns/$NS" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward'
for net in link beyond; do
	allow='["127.0.0.1:19399"]'
	[ $net = beyond ] && allow='["10.233.0.9:19399"]'
	cat >"$S/$net.yaml" <<Y
name: bench_t3_$net
tier: 3
exec: ["/usr/bin/true"]
timeout_ms: 30000
network: {allow: $allow}
filesystem: {read: ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"], exec: ["/usr/bin/true"]}
Y
done
W=(nsenter --net="/run/netns/$NS" "$BUILD/warden")
"${W[@]}" exec --policy "$S/link.yaml" >/dev/null 2>&1 # warm the probe caches
"${W[@]}" exec --policy "$S/beyond.yaml" >/dev/null 2>&1
python3 - "$S" "$N" "${W[@]}" <<'PY'
import subprocess, sys, time
s, n, warden = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
t = {"link": [], "beyond": []}
fails = 0
for i in range(n):
    for net in ("link", "beyond") if i % 2 == 0 else ("beyond", "link"):
        t0 = time.perf_counter()
        r = subprocess.run(warden + ["exec", "--policy", "%s/%s.yaml" % (s, net)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            fails += 1
            continue
        t[net].append(dt * 1000.0)
if not t["link"] or not t["beyond"]:
    print("bench_t3beyond: calls failed (%d)" % fails)
    sys.exit(0)
med = {k: sorted(v)[len(v) // 2] for k, v in t.items()}
print("tier-3 call (warden exec /usr/bin/true, cold), median of %d: a rule "
      "beyond the node (forwarded, source NAT) %.1f ms, a rule on the node's "
      "loopback %.1f ms: %.2fx%s" % (n, med["beyond"], med["link"],
                                    med["beyond"] / med["link"],
                                    "; %d calls failed" % fails if fails else ""))
PY
