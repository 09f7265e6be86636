#!/usr/bin/env bash
# GET /v1/trace/runs answers a page at a time, like /v1/trace/records: at
# most `limit` runs (default 1000, at most 5000) after the cursor `after`
# (the previous page's next_after), in the order of `trace ls`, and says
# whether more follow. Paging returns every run the caller may read exactly
# once; a limit or cursor out of range is a 400 that says why; `warden
# trace ls` through wardend follows the pages, so it lists every run the
# caller may read (more than one page of them). The store (trace_lib/
# store.py manyruns): 1500 runs, 1200 of them alice's (uid 1000), 300 of
# uid 1001.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-runs-page "needs root"; finish; }

base_policy
script once <<'S'
{"text": "done"}
S
agent one once '[echo]'
write_gateway
python3 tests/integration/trace_lib/store.py "$T/state" manyruns >/dev/null ||
	{ fail trace-runs-page-store "store writer failed"; finish; }
expect_eq trace-runs-page-store "$("$WARDEN" trace ls --state "$T/state" --json | jq_py 'len(d)')" 1500
start_daemon || { fail daemon-start "see log"; finish; }

get() { curl -s --unix-socket "$SOCK" -w '\n%{http_code}' "http://w$1"; }
body() { printf '%s' "$1" | sed '$d'; }
code() { printf '%s' "$1" | tail -1; }

r=$(get "/v1/trace/runs")
expect_eq trace-runs-page-status "$(code "$r")" 200
expect_eq trace-runs-page-default "$(body "$r" | jq_py '(len(d["runs"]), d["more"], d["next_after"].endswith("." + d["runs"][-1]["run_id"]))')" \
	"(1000, True, True)"

page_all() { # UID LIMIT -> run ids one a line in $T/ids, pages in $T/pages
	local uid=$1 limit=$2 after= out n=0
	: >"$T/ids"
	while :; do
		out=$(as_user "$uid" curl -s --unix-socket "$SOCK" "http://w/v1/trace/runs?limit=$limit${after:+&after=$after}")
		printf '%s' "$out" | jq_py '"\n".join(r["run_id"] for r in d["runs"])' >>"$T/ids"
		n=$((n + 1))
		[ "$(printf '%s' "$out" | jq_py 'd["more"]')" = True ] || break
		after=$(printf '%s' "$out" | jq_py 'd["next_after"]')
		[ $n -lt 100 ] || break
	done
	echo $n >"$T/pages"
}
page_all 0 400
expect_eq trace-runs-page-pages "$(cat "$T/pages")" 4
expect_eq trace-runs-page-every-run "$(wc -l <"$T/ids")" 1500
expect_eq trace-runs-page-once "$(sort -u "$T/ids" | wc -l)" 1500
"$WARDEN" trace ls --state "$T/state" --json | jq_py '"\n".join(r["run_id"] for r in d)' >"$T/want"
expect_eq trace-runs-page-order "$(cmp "$T/want" "$T/ids" >/dev/null && echo same)" same

# a reader's pages are full pages of the runs they may read
page_all 1000 500
expect_eq trace-runs-page-reader "$(sort -u "$T/ids" | wc -l) $(cat "$T/pages") $(grep -c . "$T/ids")" "1200 3 1200"
page_all 1001 500
expect_eq trace-runs-page-other "$(sort -u "$T/ids" | wc -l) $(cat "$T/pages")" "300 1"

for bad in 5001 0 -1 1x; do
	r=$(get "/v1/trace/runs?limit=$bad")
	expect_eq "trace-runs-page-limit-$bad" "$(code "$r")" 400
	expect_match "trace-runs-page-limit-$bad-message" "$(body "$r")" "limit must be 1 to 5000 runs a page"
done
for bad in x 12 12.a/b .run-r00001; do
	expect_eq "trace-runs-page-after-bad-$bad" "$(code "$(get "/v1/trace/runs?after=$bad")")" 400
done
r=$(get "/v1/trace/runs?limit=5000")
expect_eq trace-runs-page-max "$(body "$r" | jq_py '(len(d["runs"]), d["more"], "next_after" in d)')" "(1500, False, False)"

# the CLI through wardend follows the pages
expect_eq trace-runs-page-cli-root "$("$WARDEN" trace ls --json | jq_py 'len(d)')" 1500
expect_eq trace-runs-page-cli-alice "$(as_user 1000 "$WARDEN" trace ls --json | jq_py '(len(d), len(set(r["run_id"] for r in d)), sorted(set(r["uid"] for r in d)))')" \
	"(1200, 1200, [1000])"
finish
