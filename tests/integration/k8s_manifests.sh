#!/usr/bin/env bash
# scripts/k8s-daemonset.yaml against the Kubernetes API schema, with
# Debian's kubectl (kubernetes-client 1.20) and `kubectl apply
# --dry-run=client --validate=true`, and README's "On Kubernetes" lines run
# as written.
#
# kubectl validates against the schema its API server serves
# (/openapi/v2, protobuf). Debian has no kube-apiserver, so the test runs
# tests/k8s/apiserver.go on loopback: the real schema of that release
# (api/openapi-spec/swagger.json of Debian's kubernetes source package,
# fetched by scripts/deps-k8s.sh) served by kube-openapi's own handler, as
# kube-apiserver serves it; discovery derived from that schema; create and
# get kept in memory. What is checked:
#   - the shipped manifest validates, after kubectl read the schema;
#   - a misspelled field, a string where an integer belongs, a missing
#     required field, a mistyped Secret volume each make it fail (exit 1,
#     naming the field) -- and pass with --validate=false, so the refusal
#     is the schema's;
#   - the Secret README's command makes validates, one with a number
#     where its bytes belong does not;
#   - README's ```sh k8s block, line by line in one bash -e session,
#     with Debian's kubectl first in PATH and KUBECONFIG naming the loopback
#     endpoint (the only adaptation: a reader's kubectl and cluster);
#     afterwards the endpoint holds the Namespace, ConfigMap, DaemonSet and
#     the Secret whose `url` is README's line;
#   - the DaemonSet's `--fleet @FILE` names the Secret's key through its
#     volume and mount, and wardend given that argument -- the mount's
#     directory moved into the test's dir, laid out as a kubelet lays out a
#     Secret volume (..data symlinks, mode 0400), holding a real
#     PostgreSQL's URL made by the same kubectl command -- joins the fleet.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
. tests/integration/fleet_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip k8s-manifests "needs root"; finish; }
K8S=${WARDEN_K8S_DIR:-/var/cache/warden-deps/k8s}
KUBECTL=$K8S/bin/kubectl
if [ ! -x "$KUBECTL" ] || [ ! -s "$K8S/swagger.json" ] || ! command -v go >/dev/null; then
	fail k8s-tools "no Debian kubectl, API schema (in $K8S) or go: scripts/deps.sh installs them"
	finish
fi
kv=$("$KUBECTL" version --client 2>&1)
expect_match k8s-kubectl-is-debian-1.20 "$kv" 'GitVersion:"v1\.20\.'
M=$ROOT_DIR/scripts/k8s-daemonset.yaml

APISERVER=$ROOT_DIR/$BUILD/k8s/apiserver
mkdir -p "$ROOT_DIR/$BUILD/k8s"
if ! (cd "$ROOT_DIR" && GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= \
	GOCACHE=$ROOT_DIR/$BUILD/k8s/go-cache go build -o "$APISERVER" tests/k8s/apiserver.go) >"$T/gobuild.log" 2>&1; then
	fail k8s-apiserver-build "$(tail -5 "$T/gobuild.log")"
	finish
fi

API_PIDS=()
api_cleanup() {
	local p
	for p in "${API_PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	fleet_cleanup
}
trap api_cleanup EXIT

# start_api NAME: a fresh endpoint (empty store), $T/NAME.kubeconfig
start_api() {
	local n=$1 port
	"$APISERVER" -spec "$K8S/swagger.json" -port-file "$T/$n.port" >"$T/$n.log" 2>&1 &
	API_PIDS+=($!)
	for _ in $(seq 200); do [ -s "$T/$n.port" ] && break; sleep 0.05; done
	port=$(cat "$T/$n.port" 2>/dev/null) || { echo "no port: $(tail -3 "$T/$n.log")"; return 1; }
	cat >"$T/$n.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "http://127.0.0.1:$port"}
contexts:
- name: test
  context: {cluster: test, user: test}
users:
- name: test
  user: {}
current-context: test
EOF
	eval "API_$n=http://127.0.0.1:$port"
}
# kc NAME ARGS...: Debian's kubectl against endpoint NAME (its caches in $T)
kc() {
	local n=$1
	shift
	HOME=$T KUBECONFIG=$T/$n.kubeconfig "$KUBECTL" --cache-dir "$T/kcache-$n" "$@"
}

start_api v || { fail k8s-apiserver-start "$(tail -5 "$T/v.log")"; finish; }

# discovery as derived from the schema: which resources are namespaced
res=$(kc v api-resources 2>&1 | awk '$1 ~ /^(configmaps|namespaces|secrets|daemonsets)$/ { print $1, $(NF-1), $NF }' | sort | tr '\n' ' ')
expect_eq k8s-discovery "$res" "configmaps true ConfigMap daemonsets true DaemonSet namespaces false Namespace secrets true Secret "

# --- the shipped manifest
out=$(kc v apply --dry-run=client --validate=true -f "$M" 2>&1)
rc=$?
expect_eq k8s-manifest-validates "$rc" 0
expect_match k8s-manifest-objects "$(printf '%s' "$out" | grep -c 'created (dry run)')" '^3$'
[ "$rc" -eq 0 ] || echo "$out" | head -5
expect_match k8s-schema-read-as-protobuf "$(cat "$T/v.log")" \
	'GET /openapi/v2(\?[^ ]*)? accept="application/com.github.proto-openapi.spec.v2@v1.0\+protobuf"'

# bad NAME SED-EXPR MESSAGE-RE: the mutated manifest is refused by the
# schema (and accepted without validation: the refusal is the schema's)
bad() {
	local name=$1 expr=$2 re=$3 f=$T/$1.yaml
	sed -e "$expr" "$M" >"$f"
	if cmp -s "$M" "$f"; then
		fail "k8s-bad-$name" "the mutation '$expr' changed nothing"
		return
	fi
	out=$(kc v apply --dry-run=client --validate=true -f "$f" 2>&1)
	expect_eq "k8s-bad-$name-exit" "$?" 1
	expect_match "k8s-bad-$name-says" "$out" "$re"
	kc v apply --dry-run=client --validate=false -f "$f" >/dev/null 2>&1
	expect_eq "k8s-bad-$name-unvalidated-passes" "$?" 0
}
bad misspelled-field 's/hostPID: true/hostPid: true/' \
	'unknown field "hostPid" in io.k8s.api.core.v1.PodSpec'
bad string-for-integer 's/terminationGracePeriodSeconds: 30/terminationGracePeriodSeconds: "30"/' \
	'terminationGracePeriodSeconds: got "string", expected "integer"'
bad missing-required 's/^        - name: wardend$/        - stdin: false/' \
	'missing required field "name" in io.k8s.api.core.v1.Container'
bad secret-volume-field 's/secretName: warden-fleet/secretname: warden-fleet/' \
	'unknown field "secretname" in io.k8s.api.core.v1.SecretVolumeSource'
bad secret-mode-string 's/defaultMode: 256/defaultMode: "0400"/' \
	'defaultMode: got "string", expected "integer"'

# the Secret as README's command makes it, validated; a broken one refused
echo 'host=/run/postgresql dbname=warden user=warden' >"$T/fleet.url"
kc v -n warden-system create secret generic warden-fleet --from-file=url="$T/fleet.url" \
	--dry-run=client -o yaml >"$T/secret.yaml" 2>"$T/secret.err"
out=$(kc v apply --dry-run=client --validate=true -f "$T/secret.yaml" 2>&1)
expect_eq k8s-secret-validates "$?" 0
sed 's/^data:/dataa:/' "$T/secret.yaml" >"$T/secret-bad.yaml"
out=$(kc v apply --dry-run=client --validate=true -f "$T/secret-bad.yaml" 2>&1)
expect_eq k8s-secret-bad-exit "$?" 1
expect_match k8s-secret-bad-says "$out" 'unknown field "dataa" in io.k8s.api.core.v1.Secret'

# --- README's lines, as written
start_api r || { fail k8s-apiserver-start "$(tail -5 "$T/r.log")"; finish; }
W=$T/readme
mkdir -p "$W"
ln -s "$ROOT_DIR/scripts" "$W/scripts"
python3 - "$ROOT_DIR/README.md" "$T/readme.sh" >"$T/readme.n" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"^```sh k8s\n(.*?)^```", text, re.S | re.M)
lines = [l for b in blocks for l in b.splitlines() if l.strip()]
out = ["set -e -o pipefail",
       "trap 'echo \"README line failed ($?): $BASH_COMMAND\" >&2' ERR"]
for i, l in enumerate(lines, 1):
    out += [l, f"echo '@@ line {i} ran'"]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print(len(lines))
PY
nl=$(cat "$T/readme.n")
[ "$nl" -ge 3 ] && pass k8s-readme-lines-found || fail k8s-readme-lines-found "$nl lines in \`\`\`sh k8s blocks"
(cd "$W" && PATH=$K8S/bin:$PATH HOME=$T KUBECONFIG=$T/r.kubeconfig timeout 300 bash "$T/readme.sh") \
	>"$T/readme.out" 2>&1
for i in $(seq "$nl"); do
	grep -q "^@@ line $i ran" "$T/readme.out" && pass "k8s-readme-line$i" ||
		fail "k8s-readme-line$i" "$(grep -m1 'README line failed' "$T/readme.out" || tail -3 "$T/readme.out")"
done
get() { curl -s "$API_r$1"; }
readme_url=$(sed -n "s/.*echo '\(.*\)' *>fleet.url.*/\1/p" "$ROOT_DIR/README.md" | head -1)
for o in /api/v1/namespaces/warden-system /api/v1/namespaces/warden-system/configmaps/warden-policy \
	/apis/apps/v1/namespaces/warden-system/daemonsets/wardend; do
	expect_match "k8s-readme-created-${o##*/}" "$(get "$o")" '"creationTimestamp"'
done
got=$(get /api/v1/namespaces/warden-system/secrets/warden-fleet | jq_py 'd["data"]["url"]' | base64 -d)
[ -n "$readme_url" ] && expect_eq k8s-readme-secret-holds-url "$got" "$readme_url" ||
	fail k8s-readme-secret-holds-url "no echo '...' >fleet.url line in README"

# --- the DaemonSet's --fleet @FILE is the Secret's key, through its mount
get /apis/apps/v1/namespaces/warden-system/daemonsets/wardend >"$T/ds.json"
wiring=$(python3 - "$T/ds.json" <<'PY'
import json, os, sys
ds = json.load(open(sys.argv[1]))
spec = ds["spec"]["template"]["spec"]
c = spec["containers"][0]
args = c["args"]
f = args[args.index("--fleet") + 1]
assert f.startswith("@"), f
path = f[1:]
for m in c["volumeMounts"]:
    if os.path.dirname(path) == m["mountPath"].rstrip("/"):
        assert m.get("readOnly") is True, "mount not read-only"
        v = [v for v in spec["volumes"] if v["name"] == m["name"]][0]
        s = v["secret"]
        item = [i for i in s["items"] if i["path"] == os.path.basename(path)][0]
        print(s["secretName"], item["key"], m["mountPath"], os.path.basename(path), oct(s["defaultMode"]))
        break
else:
    sys.exit("no volume mounted at " + os.path.dirname(path))
PY
)
expect_eq k8s-fleet-file-is-secret-key "$wiring" "warden-fleet url /etc/warden/fleet url 0o400"
fleet_arg=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]["args"]; print(a[a.index("--fleet")+1])' "$T/ds.json")

# --- wardend reads the URL through that volume and joins the fleet
if ! start_pg >"$T/pgstart.log" 2>&1; then
	fail k8s-pg-start "$(tail -3 "$T/pgstart.log")"
	finish
fi
base_policy
write_gateway
printf '%s\n' "$FLEET_URL" >"$T/pg.url"
kc v -n warden-system create secret generic warden-fleet --from-file=url="$T/pg.url" \
	--dry-run=client -o json >"$T/pgsecret.json"
# a Secret volume as a kubelet writes it: files in a timestamped dir,
# ..data -> it, each key a symlink through ..data; the mode is the volume's
V=$T/vol
ts=..2026_01_01_00_00_00.000000001
mkdir -p "$V/$ts"
jq_py 'd["data"]["url"]' <"$T/pgsecret.json" | base64 -d >"$V/$ts/url"
chmod 0400 "$V/$ts/url"
ln -s "$ts" "$V/..data"
ln -s ..data/url "$V/url"
# (the DaemonSet's argument with the mount's directory moved: the only URL
# this node is given)
FLEET_URL=${fleet_arg/\/etc\/warden\/fleet/$V} launch_node k8s 0
if wait_node k8s >"$T/wait.out"; then
	pass k8s-wardend-starts
	st=$(psql_q "SELECT state FROM warden.nodes WHERE id = '$(node_id k8s)'")
	expect_eq k8s-wardend-joined-fleet "$st" up
else
	fail k8s-wardend-starts "$(tail -3 "$T/wait.out")"
fi
finish
