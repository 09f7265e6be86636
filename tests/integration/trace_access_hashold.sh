#!/usr/bin/env bash
# A hash_only run's denial targets are hashed by the broker before they
# leave the call (trace_access_hashonly.sh); a run an older build wrote
# with the targets verbatim is handed out through wardend with them hashed
# the same way (sha256:<hex>, a network target with its port). The store:
# trace_lib/store.py hashold (run-h, uid 1000).
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-hashold "needs root"; finish; }

base_policy
script once <<'S'
{"text": "done"}
S
agent one once '[echo]'
write_gateway
python3 tests/integration/trace_lib/store.py "$T/state" hashold >/dev/null ||
	{ fail trace-hashold-store "store writer failed"; finish; }
start_daemon || { fail daemon-start "see log"; finish; }
no_secret() { # NAME TEXT
	if printf '%s' "$2" | grep -q -F -e 10.77.66.55 -e secret-hold; then
		fail "$1" "$(printf '%s' "$2" | grep -o -F -e 10.77.66.55 -e secret-hold | head -2)"
	else pass "$1"; fi
}
ip_ref="sha256:$(printf '%s' 10.77.66.55 | sha256sum | cut -c1-64)"
path_ref="sha256:$(printf '%s' /srv/secret-hold/file | sha256sum | cut -c1-64)"
out=$(curl -s --unix-socket "$SOCK" http://w/v1/runs/run-h/trace)
no_secret hashold-api-root "$out"
expect_match hashold-api-host-hashed "$out" "\"target\": ?\"$ip_ref:443\""
expect_match hashold-api-path-hashed "$out" "\"target\": ?\"$path_ref\""
no_secret hashold-api-stream "$(as_user 1000 curl -s -m 10 --unix-socket "$SOCK" http://w/v1/runs/run-h/stream)"
no_secret hashold-cli-show "$(as_user 1000 "$WARDEN" trace show run-h 2>&1)"
no_secret hashold-cli-html "$(as_user 1000 "$WARDEN" trace html run-h -o - 2>&1)"
# the store read straight (--state: root on the node) keeps the rule too:
# run-h's model call names blobs run-f stored, and they are not shown
shared() { # NAME TEXT: the text run-f stored is absent
	if printf '%s' "$2" | grep -q -F SHARED-SECRET; then
		fail "$1" "$(printf '%s' "$2" | grep -o -F -e SHARED-SECRET-PROMPT -e SHARED-SECRET-ANSWER | sort | uniq -c | tr '\n' ' ')"
	else pass "$1"; fi
}
shared hashold-state-payload "$("$WARDEN" trace payload run-h 0 --state "$T/state" --json 2>&1)"
shared hashold-state-html "$("$WARDEN" trace html run-h -o - --state "$T/state" 2>&1)"
shared hashold-api-payload "$(curl -s --unix-socket "$SOCK" http://w/v1/runs/run-h/payload/0)"
expect_match hashold-state-says-why "$("$WARDEN" trace payload run-h 0 --state "$T/state" 2>&1)" "hash_only run: payloads are not shown"
# control: the full run's own payload is shown
expect_match hashold-state-control "$("$WARDEN" trace payload run-f 0 --state "$T/state" 2>&1)" "SHARED-SECRET-ANSWER"
stop_daemon
finish
