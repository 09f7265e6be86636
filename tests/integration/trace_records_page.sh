#!/usr/bin/env bash
# GET /v1/trace/records answers a page at a time: at most `limit` records
# (default 1000, at most 10000) with seq > `after`, and says whether more
# follow and from which seq (next_after). Paging returns every record
# exactly once, in seq order; a limit out of range is a 400 that says the
# range; `warden trace grep` through wardend pages, so it prints every
# record the caller may read (and only those: the read rule is part of the
# query, so a page holds only readable records; a run is its uid's, not
# its recorded user name's). The store (trace_lib/store.py many): 3000
# records of tool lookup, 2400 of them alice's, 600 uid 1001's.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-page "needs root"; finish; }

base_policy
# uid 1002's name is "1001": the user name recorded for run-m1 (uid 1001)
cat >"$POL/users.yaml" <<'Y'
users:
  root:  {uid: 0, groups: [admin]}
  alice: {uid: 1000, groups: [eng]}
  bob:   {uid: 1001, groups: [eng]}
  "1001": {uid: 1002, groups: [eng]}
groups:
  admin: {scopes: ["*"]}
  eng: {scopes: ["test:*"]}
approvers:
  users: []
  groups: []
Y
script once <<'S'
{"text": "done"}
S
agent one once '[echo]'
write_gateway
python3 tests/integration/trace_lib/store.py "$T/state" many >/dev/null ||
	{ fail trace-page-store "store writer failed"; finish; }
total=$("$WARDEN" trace grep --state "$T/state" --tool lookup --json | jq_py 'len(d)')
expect_eq trace-page-store-records "$total" 3000
start_daemon || { fail daemon-start "see log"; finish; }

get() { curl -s --unix-socket "$SOCK" -w '\n%{http_code}' "http://w$1"; }
body() { printf '%s' "$1" | sed '$d'; }
code() { printf '%s' "$1" | tail -1; }

r=$(get "/v1/trace/records?tool=lookup")
expect_eq trace-page-status "$(code "$r")" 200
expect_eq trace-page-default "$(body "$r" | jq_py '(len(d["records"]), d["more"], d["next_after"] == d["records"][-1]["seq"])')" \
	"(1000, True, True)"
r=$(get "/v1/trace/records?tool=lookup&limit=7")
expect_eq trace-page-limit "$(body "$r" | jq_py '(len(d["records"]), d["more"])')" "(7, True)"

# every record exactly once, in order, by pages of 450 (the last one short)
page_all() { # USER QUERY -> the seqs, one a line; pages count in $T/pages
	local uid=$1 q=$2 after=0 out n=0
	: >"$T/seqs"
	while :; do
		out=$(as_user "$uid" curl -s --unix-socket "$SOCK" "http://w/v1/trace/records?$q${after:+&after=$after}")
		printf '%s' "$out" | jq_py '"\n".join(str(r["seq"]) for r in d["records"])' >>"$T/seqs"
		n=$((n + 1))
		[ "$(printf '%s' "$out" | jq_py 'd["more"]')" = True ] || break
		after=$(printf '%s' "$out" | jq_py 'd["next_after"]')
		[ $n -lt 100 ] || break
	done
	echo $n >"$T/pages"
}
page_all 0 "tool=lookup&limit=450"
expect_eq trace-page-pages "$(cat "$T/pages")" 7
expect_eq trace-page-every-record "$(wc -l <"$T/seqs")" 3000
expect_eq trace-page-once "$(sort -un "$T/seqs" | wc -l)" 3000
expect_eq trace-page-in-order "$(sort -n "$T/seqs" | cmp - "$T/seqs" >/dev/null && echo sorted)" sorted
"$WARDEN" trace grep --state "$T/state" --tool lookup --json | jq_py '"\n".join(str(r["seq"]) for r in d)' >"$T/want"
expect_eq trace-page-same-records "$(cmp "$T/want" "$T/seqs" >/dev/null && echo same)" same

# a page of alice's holds only records of her run, full pages of them
r=$(as_user 1000 curl -s --unix-socket "$SOCK" "http://w/v1/trace/records?tool=lookup")
expect_eq trace-page-reader "$(printf '%s' "$r" | jq_py '(len(d["records"]), sorted(set(x["run_id"] for x in d["records"])), d["more"])')" \
	"(1000, ['run-m0'], True)"
page_all 1000 "tool=lookup"
expect_eq trace-page-reader-all "$(sort -un "$T/seqs" | wc -l) $(cat "$T/pages")" "2400 3"

# run-m1 is uid 1001's, whose recorded name "1001" is uid 1002's name
expect_eq trace-page-uid-owner "$(as_user 1001 "$WARDEN" trace grep --tool lookup --json | jq_py '(len(d), sorted(set(x["run_id"] for x in d)))')" \
	"(600, ['run-m1'])"
expect_eq trace-page-name-not-owner "$(as_user 1002 "$WARDEN" trace grep --tool lookup --json 2>/dev/null | jq_py 'len(d)' 2>/dev/null || echo 0)" 0
expect_eq trace-page-name-not-owner-runs "$(as_user 1002 curl -s --unix-socket "$SOCK" "http://w/v1/trace/runs" | jq_py 'len(d["runs"])')" 0

# out of range: 400, saying the range
for bad in 10001 0 -1 1x; do
	r=$(get "/v1/trace/records?tool=lookup&limit=$bad")
	expect_eq "trace-page-limit-$bad" "$(code "$r")" 400
	expect_match "trace-page-limit-$bad-message" "$(body "$r")" "limit must be 1 to 10000 records a page"
done
r=$(get "/v1/trace/records?tool=lookup&after=x")
expect_eq trace-page-after-bad "$(code "$r")" 400
r=$(get "/v1/trace/records?tool=lookup&limit=10000")
expect_eq trace-page-max "$(body "$r" | jq_py '(len(d["records"]), d["more"], "next_after" in d)')" "(3000, False, False)"

# the CLI through wardend pages: every record
expect_eq trace-page-cli-root "$("$WARDEN" trace grep --tool lookup --json | jq_py 'len(d)')" 3000
expect_eq trace-page-cli-alice "$(as_user 1000 "$WARDEN" trace grep --tool lookup --json | jq_py '(len(d), sorted(set(x["run_id"] for x in d)))')" \
	"(2400, ['run-m0'])"
expect_eq trace-page-cli-text "$(as_user 1000 "$WARDEN" trace grep --tool lookup | wc -l)" 2400
finish
