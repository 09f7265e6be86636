#!/usr/bin/env bash
# `warden status` and `warden status --json`: runs, is complete for every
# manifest constraint, and tells the truth — each value compared with an
# independent probe made here (python3 ctypes syscalls, /proc, util-linux,
# runsc itself). Also the runsc result cache keyed by the binary's mtime.
cd "$(dirname "$0")/../.."
. tests/lib.sh

if [ "$(id -u)" -ne 0 ]; then
	skip status "needs root"
	finish
fi
if [ ! -x "$WARDEN" ]; then
	fail status "no warden binary at $WARDEN"
	finish
fi

tmp=$(mktemp -d /tmp/warden-status-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

secfs_before=$(grep -c ' securityfs ' /proc/self/mountinfo)

# ---- usage -------------------------------------------------------------------
"$WARDEN" status --help >"$tmp/help" 2>&1
expect_eq status_help_exit "$?" 0
expect_match status_help_text "$(cat "$tmp/help")" 'usage: warden status'
"$WARDEN" status --bogus >/dev/null 2>&1
expect_eq status_bad_flag_exit "$?" 2

# ---- human output ------------------------------------------------------------
"$WARDEN" status >"$tmp/text" 2>"$tmp/text.err"
expect_eq status_text_exit "$?" 0
text=$(cat "$tmp/text")
for sec in 'Kernel' 'BPF' 'cgroups' 'runsc \(tier 3\)' \
	'Enforcement per manifest constraint' 'mode: audit can watch' \
	'mode: audit cannot watch'; do
	expect_match "status_text_section_$(echo "$sec" | tr -dc 'A-Za-z0-9' | tr 'A-Z' 'a-z')" "$text" "^$sec"
done
for c in network.allow network.families network.listen filesystem.read filesystem.write \
	filesystem.exec syscalls.deny memory_mb pids cpus timeout_ms \
	output.max_bytes identity tier; do
	expect_match "status_text_row_$c" "$text" "^  $c\$"
done
expect_match status_text_kernel "$text" "release +$(uname -r | sed 's/[.]/[.]/g')"
long=$(awk 'length($0) > 80' "$tmp/text" | head -3)
expect_eq status_text_fits_80_columns "$long" ""
# a value column that starts at the same place on every feature line
cols=$(sed -n '/^Kernel/,/^Enforcement/p' "$tmp/text" | grep -E '^  [A-Za-z]' |
	grep -Ev '^  [^ ].{21} [^ ]' | head -2)
expect_eq status_text_aligned "$cols" ""

# ---- JSON --------------------------------------------------------------------
"$WARDEN" status --json >"$tmp/j" 2>"$tmp/j.err"
expect_eq status_json_exit "$?" 0

# Independent facts for python to compare with.
ind_lsm=$(cat /sys/kernel/security/lsm 2>/dev/null ||
	unshare -m --propagation private sh -c \
		'mount -t securityfs s /sys/kernel/security && cat /sys/kernel/security/lsm' 2>/dev/null)
ind_runsc=$(command -v runsc || true)
ind_runsc_ver=$([ -n "$ind_runsc" ] && "$ind_runsc" --version 2>/dev/null | head -1)
ind_netns=$(unshare -n true 2>/dev/null && echo 1 || echo 0)

LSM="$ind_lsm" RUNSC="$ind_runsc" RUNSC_VER="$ind_runsc_ver" NETNS="$ind_netns" \
python3 - "$tmp/j" <<'EOF'
import ctypes, json, os, sys
def ok(name, cond, why=""):
    print(("PASS %s" % name) if cond else ("FAIL %s: %s" % (name, why)))
try:
    j = json.load(open(sys.argv[1]))
    ok("status_json_parses", True)
except Exception as e:
    ok("status_json_parses", False, str(e)); sys.exit(0)

for k in ["kernel", "features", "cgroup", "runsc", "mechanisms", "constraints", "audit"]:
    ok("status_json_has_" + k, k in j, "missing %s" % k)
f = j["features"]
for k in ["lsm", "bpf_lsm", "bpf_trampoline", "bpf_cgroup_sock_addr", "bpf_ringbuf",
          "landlock", "seccomp", "user_namespaces", "namespaces", "io_uring", "audit"]:
    ok("status_json_feature_" + k, k in f, "missing features.%s" % k)

# kernel
ok("status_json_kernel_release", j["kernel"]["release"] == os.uname().release,
   "%s vs %s" % (j["kernel"]["release"], os.uname().release))
ok("status_json_btf", j["kernel"]["btf"] == os.path.exists("/sys/kernel/btf/vmlinux"))

# Landlock ABI: ask the kernel ourselves (x86_64 landlock_create_ruleset = 444)
libc = ctypes.CDLL(None, use_errno=True)
abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
want = abi if abi >= 0 else 0
ok("status_json_landlock_abi_matches_kernel", f["landlock"]["abi"] == want,
   "status %s kernel %s (errno %d)" % (f["landlock"]["abi"], abi, ctypes.get_errno()))

# seccomp: SECCOMP_GET_ACTION_AVAIL(USER_NOTIF) via seccomp(2) = 317
act = ctypes.c_uint32(0x7fc00000)
avail = libc.syscall(317, 2, 0, ctypes.byref(act)) == 0
ok("status_json_user_notif_matches_kernel", f["seccomp"]["user_notif"]["ok"] == avail)

# LSM list
lsm = os.environ.get("LSM", "").strip()
if lsm:
    ok("status_json_lsm_list_matches_securityfs", ",".join(f["lsm"]["list"]) == lsm,
       "%s vs %s" % (f["lsm"]["list"], lsm))
    ok("status_json_bpf_in_lsm_list", f["bpf_lsm"]["in_lsm_list"] == ("bpf" in lsm.split(",")))
else:
    print("SKIP status_json_lsm_list_matches_securityfs: securityfs unreadable")
ok("status_json_trampoline_err_is_errno",
   isinstance(f["bpf_trampoline"]["err"], int) and -4096 < f["bpf_trampoline"]["err"] <= 0
   and (f["bpf_trampoline"]["err"] == 0) == f["bpf_trampoline"]["ok"]
   and (f["bpf_trampoline"]["ok"] or f["bpf_trampoline"]["error"]),
   str(f["bpf_trampoline"]))

# io_uring sysctl
try:
    io = int(open("/proc/sys/kernel/io_uring_disabled").read())
except OSError:
    io = None
ok("status_json_io_uring_matches_proc", f["io_uring"]["disabled"] == io,
   "%s vs %s" % (f["io_uring"]["disabled"], io))
ok("status_json_netns_matches_unshare",
   f["namespaces"]["net"]["ok"] == (os.environ["NETNS"] == "1"))

# cgroup layout from /proc/self/mountinfo, parsed here
v2 = None; v1 = {}; any_v1 = False
for line in open("/proc/self/mountinfo"):
    a, b = line.split(" - ", 1)
    mp = a.split()[4].replace("\\040", " ")
    fs, src, sopts = b.split()[:3]
    if fs == "cgroup2" and v2 is None:
        v2 = mp
    if fs == "cgroup":
        opts = sopts.split(",")
        for c in ("memory", "pids", "cpu"):
            if c in opts and c not in v1:
                v1[c] = mp
        if any(o in opts for o in ("memory", "pids", "cpu", "cpuacct", "cpuset", "blkio",
                                   "devices", "freezer", "net_cls", "perf_event", "hugetlb",
                                   "net_prio", "rdma", "misc")):
            any_v1 = True
cg = j["cgroup"]
ok("status_json_cgroup_v2_root", cg["v2_root"] == v2, "%s vs %s" % (cg["v2_root"], v2))
layout = "hybrid" if (v2 and any_v1) else "v2" if v2 else "v1" if any_v1 else "none"
ok("status_json_cgroup_layout", cg["layout"] == layout, "%s vs %s" % (cg["layout"], layout))
v2ctl = open(v2 + "/cgroup.controllers").read().split() if v2 else []
for c in ("memory", "pids", "cpu"):
    h = cg["controllers"][c]
    if c in v2ctl:
        want = ("v2", v2)
    elif c in v1:
        want = ("v1", v1[c])
    else:
        want = (None, None)
    ok("status_json_cgroup_" + c, (h["hierarchy"], h["path"]) == want,
       "%s vs %s" % ((h["hierarchy"], h["path"]), want))

# runsc
rs = j["runsc"]
if os.environ.get("RUNSC"):
    ok("status_json_runsc_present", rs["present"] and rs["path"] == os.environ["RUNSC"],
       "%s" % rs)
    ok("status_json_runsc_version", rs["version"] and rs["version"] in os.environ["RUNSC_VER"],
       "%s vs %s" % (rs["version"], os.environ["RUNSC_VER"]))
    ok("status_json_runsc_tested", rs["tested"] is True)
else:
    ok("status_json_runsc_absent", rs["present"] is False)

# constraint table: every manifest constraint, every tier, truthful shape
want = ["network.allow", "network.allow names", "network.families", "network.listen", "filesystem.read", "filesystem.write",
        "filesystem.exec", "syscalls.deny", "memory_mb", "pids", "cpus", "timeout_ms",
        "output.max_bytes", "identity", "tier"]
rows = {r["constraint"]: r for r in j["constraints"]}
ok("status_json_constraints_complete", sorted(rows) == sorted(want),
   "got %s" % sorted(rows))
shape = True; why = ""
for r in j["constraints"]:
    for t in ("tier1", "tier2", "tier3"):
        c = r.get(t)
        good = isinstance(c, dict) and isinstance(c.get("enforced"), bool) and (
            (c["enforced"] and isinstance(c.get("mechanism"), str) and c["mechanism"]) or
            (not c["enforced"] and isinstance(c.get("reason"), str) and c["reason"]))
        if not good:
            shape = False; why = "%s %s: %s" % (r["constraint"], t, c)
ok("status_json_constraint_cells", shape, why)
# truthful: the limits name the hierarchy the controller really lives on
for name, c in (("memory_mb", "memory"), ("pids", "pids"), ("cpus", "cpu")):
    cell = rows[name]["tier1"]
    if c in v2ctl:
        good = cell["enforced"] and "cgroup v2" in cell["mechanism"]
    elif c in v1:
        good = cell["enforced"] and v1[c] in cell["mechanism"]
    else:
        good = not cell["enforced"]
    ok("status_json_%s_mechanism_truthful" % name, good, str(cell))
fsr = rows["filesystem.read"]["tier1"]
ok("status_json_fs_needs_landlock", fsr["enforced"] == (want_abi := f["landlock"]["abi"] > 0)
   and (not want_abi or ("Landlock ABI %d" % f["landlock"]["abi"]) in fsr["mechanism"]), str(fsr))
net = rows["network.allow"]["tier1"]
ok("status_json_egress_needs_connect4", net["enforced"] == (f["bpf_cgroup_sock_addr"]["ok"] and v2 is not None), str(net))
hooks = {h["hook"]: h for h in f["bpf_lsm"]["hooks"]}
ok("status_json_lsm_hooks_listed", len(hooks) >= 4 and all(
   isinstance(h["active"], bool) and (h["active"] or (h["err"] < 0 and h["reason"]))
   for h in hooks.values()), str(f["bpf_lsm"]["hooks"])[:300])
# no hook can be active where no lsm program loads or bpf is not an active LSM
if not f["bpf_lsm"]["lsm_prog_load"]["ok"] or not f["bpf_lsm"]["in_lsm_list"]:
    ok("status_json_lsm_hooks_consistent_with_probe",
       not any(h["active"] for h in hooks.values()), str(hooks)[:300])
ok("status_json_require_bpf_lsm",
   j["mechanisms"]["bpf_lsm"]["available"] == (bool(hooks) and all(h["active"] for h in hooks.values())))
sc = hooks.get("socket_connect", {"active": False})
ok("status_json_lsm_fallback_reported",
   ("BPF LSM socket_connect" in net["mechanism"]) if sc["active"] else
   ("BPF LSM socket_connect not used" in (net.get("note") or "")), str(net))
t3 = rows["tier"]["tier3"]
ok("status_json_tier3_matches_runsc", t3["enforced"] == bool(rs["platform"]), str(t3))
# tier 3 holds names with the resolver on the call's link, tc BPF on its host end
n3, e3 = rows["network.allow names"]["tier3"], rows["network.allow"]["tier3"]
ok("status_json_tier3_names_mechanism", not t3["enforced"] or (
   n3["enforced"] and "link" in n3["mechanism"] and "tc BPF" in n3["mechanism"]
   and e3["enforced"] and "tc BPF on the host end" in e3["mechanism"]), str(n3))

# audit mode
a = j["audit"]
names = [x["constraint"] for x in a["watchable"]] + [x["constraint"] for x in a["not_watchable"]]
ok("status_json_audit_covers_all", sorted(names) == sorted(want), "got %s" % sorted(names))
w = {x["constraint"] for x in a["watchable"]}
ok("status_json_audit_syscalls", ("syscalls.deny" in w) == f["seccomp"]["flag_continue"]["ok"])
# Landlock stays on in audit mode: the filesystem can never be watched
ok("status_json_audit_fs_not_watchable",
   not ({"filesystem.read", "filesystem.write", "filesystem.exec"} & w), str(w))
ok("status_json_audit_limits_not_watchable", not ({"memory_mb", "pids", "cpus"} & w))
ok("status_json_audit_reasons", all(x.get("reason") for x in a["not_watchable"]))
EOF

secfs_after=$(grep -c ' securityfs ' /proc/self/mountinfo)
expect_eq status_left_host_mounts "$secfs_after" "$secfs_before"

# ---- no runsc ----------------------------------------------------------------
WARDEN_RUNSC=/nonexistent/runsc "$WARDEN" status --json >"$tmp/nr" 2>/dev/null
expect_eq status_no_runsc_exit "$?" 0
python3 - "$tmp/nr" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
ok = j["runsc"]["present"] is False and all(
    not r["tier3"]["enforced"] and "runsc" in r["tier3"]["reason"] for r in j["constraints"])
print("PASS status_no_runsc_tier3_refused" if ok else
      "FAIL status_no_runsc_tier3_refused: %s" % j["constraints"][0]["tier3"])
EOF

# ---- rows that tell what holds a line, and what does not --------------------
cell() { # CONSTRAINT TIER: the mechanism, or "refused: reason"
	jq -r --arg c "$1" --arg t "$2" '.constraints[] | select(.constraint == $c) | .[$t] |
		if .enforced then .mechanism + " | note: " + (.note // "") else "refused: " + .reason end' "$tmp/j"
}
# tier 3 does not hold `ld.so FILE` (gVisor maps a noexec file executable)
# and says so; its memfd rules are named
c=$(cell filesystem.exec tier3)
if [ "${c#refused: }" = "$c" ]; then
	expect_match status_tier3_exec_ldso_not_held "$c" "not held: .*ld.so FILE"
	expect_match status_tier3_exec_memfd_rules "$c" "refuses memfd_create without MFD_NOEXEC_SEAL and execveat"
else
	skip status_tier3_exec_ldso_not_held "tier 3 unavailable: $c"
fi

# the tool runs as a uid of the call's own, not as the calling user; tier 1
# has an IPC and a mount namespace of its own
for t in tier1 tier2 tier3; do
	c=$(cell identity $t)
	[ "${c#refused: }" = "$c" ] || continue
	expect_match "status_identity_${t}_call_uid" "$c" "uid/gid of the call's own"
	expect_eq "status_identity_${t}_not_caller" "$(printf '%s' "$c" | grep -c 'to the calling user')" 0
done
c=$(cell tier tier1)
if [ "${c#refused: }" = "$c" ]; then
	expect_match status_tier1_ipc_namespace "$c" "an IPC namespace of the call's own"
	expect_match status_tier1_mount_namespace "$c" "a mount namespace of its own"
else
	skip status_tier1_namespaces "tier 1 unavailable: $c"
fi

# names in tiers 1-2: the row says what the call start does (one test,
# wd_egress_names_ok): held => a call with a name starts, and the row names
# what keeps host resolvers' unix sockets from the tool; not held => such
# a call is refused with the row's reason
mkdir -p "$tmp/nm"
for t in 1 2; do
	c=$(cell "network.allow names" tier$t)
	printf 'name: nm%s\ntier: %s\ntimeout_ms: 10000\nnetwork: {allow: ["svc.test:80"]}\nfilesystem: {read: ["/usr", "/lib", "/lib64", "/etc"], exec: ["/usr/bin"]}\n' "$t" "$t" >"$tmp/nm/t$t.yaml"
	out=$("$WARDEN" exec --json --policy "$tmp/nm/t$t.yaml" -- /usr/bin/true 2>&1)
	if [ "${c#refused: }" = "$c" ]; then
		expect_match "status_names_tier${t}_unix_held" "$c" "host resolvers' unix sockets .* refused to the call by (BPF cgroup/connect_unix|the BPF LSM)"
		expect_match "status_names_tier${t}_call_starts" "$out" '"exit_code": 0'
	else
		expect_match "status_names_tier${t}_call_refused" "$out" "network.allow names: cannot enforce"
	fi
done

# ---- runsc cache keyed by the binary's mtime ---------------------------------
if [ -n "$ind_runsc" ]; then
	cp -p "$ind_runsc" "$tmp/runsc"
	field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runsc"]; print(r["tested"], r["cached"], r["platform"])' "$1"; }
	WARDEN_RUNSC=$tmp/runsc "$WARDEN" status --json >"$tmp/c1" 2>/dev/null
	WARDEN_RUNSC=$tmp/runsc "$WARDEN" status --json >"$tmp/c2" 2>/dev/null
	touch -d '2001-01-01' "$tmp/runsc"
	WARDEN_RUNSC=$tmp/runsc "$WARDEN" status --json >"$tmp/c3" 2>/dev/null
	p=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runsc"]["platform"] or "None")' "$tmp/c1")
	expect_eq status_runsc_cache_miss_runs "$(field "$tmp/c1")" "True False $p"
	expect_eq status_runsc_cache_hit "$(field "$tmp/c2")" "True True $p"
	expect_eq status_runsc_cache_mtime_invalidates "$(field "$tmp/c3")" "True False $p"
	# leave the cache describing the real runsc again
	"$WARDEN" status --json >/dev/null 2>&1
	left=$(ls -d /tmp/warden-probe-runsc.* 2>/dev/null | head -1)
	expect_eq status_runsc_probe_cleaned "$left" ""
else
	skip status_runsc_cache "runsc not installed"
fi

finish
