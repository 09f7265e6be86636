#!/usr/bin/env bash
# A flood of denials beyond the kernel's event ring buffer, on the
# production path: wardend runs with a one-page ring (--event-ring-bytes
# 4096: 42 denial records); a tool INSIDE the sandbox (netprobe
# connect-flood, a static helper) makes $N connects to 127.0.0.1:9, each
# denied by cgroup/connect4 (network.allow: []), faster than wardend's own
# consumer (the call's supervisor, events/bpf_route.c) drains the ring. From
# OUTSIDE: /metrics counts the loss where it happened
# (warden_denial_events_lost_total{reason="bpf_ringbuf"}) and every denial
# is either delivered or counted lost; `warden events` shows the loss;
# wardend's own events_lost alert reaches Alertmanager (real, v2 API); and
# Prometheus (real) fires the shipped WardenEventsLost rule with that
# reason. The flood is denied all the same (the tool saw EPERM $N times).
# Bad --event-ring-bytes values are refused at start.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip events_loss "needs root"; finish; }
. tests/integration/monitoring_lib/servers.sh
mon_deps events-loss-deps || finish
N=20000
RING=4096

# the option is checked before anything starts
for bad in 6144 2048 2147483648 4k; do
	out=$("$WARDEND" --state "$T/nostate" --policy "$T/nopolicy" --socket "$T/no.sock" \
		--event-ring-bytes "$bad" 2>&1)
	rc=$?
	[ "$rc" -eq 2 ] && printf '%s' "$out" | grep -Eq -- '--event-ring-bytes(: event ring size| wants a number)' &&
		pass "ring-size-refused-$bad" || fail "ring-size-refused-$bad" "exit $rc: $out"
done
expect_match ring-size-in-help "$("$WARDEND" --help)" '--event-ring-bytes BYTES'
# so is the alerts' back-link
out=$("$WARDEND" --state "$T/nostate" --policy "$T/nopolicy" --socket "$T/no.sock" \
	--alert-generator-url 'ftp://x/' 2>&1)
rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$out" | grep -q -- "--alert-generator-url wants an http:// or https:// URL" &&
	pass generator-url-refused || fail generator-url-refused "exit $rc: $out"

base_policy
tool flooder "[\"$HELPERS/netprobe\", \"connect-flood\", \"9\", \"$N\"]" \
	"input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:flooder\"]}" "side_effects: none"
script flood <<'S'
{"step": 0, "tool_calls": [{"name": "flooder", "arguments": {}}]}
{"text": "done"}
S
agent flood flood '[flooder]'
write_gateway

start_servers "route: {receiver: none}
receivers: [{name: none}]" || finish
start_daemon --metrics "127.0.0.1:$MPORT" --alertmanager "http://127.0.0.1:$APORT" \
	--alert-window 5 --event-ring-bytes "$RING" || { fail daemon-start "see log"; finish; }

metrics() { curl -s "http://127.0.0.1:$MPORT/metrics"; }
# mval NAME_WITH_LABELS: the sample's value (0 if absent)
mval() { metrics | awk -v k="$1" '$1==k {v=$2} END{print v+0}'; }
LOST='warden_denial_events_lost_total{reason="bpf_ringbuf"}'
expect_eq metrics-ring-size "$(mval warden_bpf_event_ring_bytes)" "$RING"
m=$(metrics)
for r in bpf_ringbuf bpf_invalid bpf_unrouted landlock_audit overrun; do
	expect_match "metrics-lost-$r-at-zero" "$m" "^warden_denial_events_lost_total\\{reason=\"$r\"\\} 0\$"
done
# the series is in Prometheus at 0 before the flood (increase() needs it)
wait_until 30 prom_zero "$LOST" && pass prom-scrapes-zero-loss ||
	fail prom-scrapes-zero-loss "$(prom_q "$LOST")"

out=$(as_user 1000 "$WARDEN" run --json flood go 2>&1)
expect_match flood-run "$(printf '%s\n' "$out" | grep '"type":"run_end"')" '"status":"ok"'
# inside the sandbox every connect was refused: the loss cost no denial
expect_match flood-all-denied "$out" "connect-flood: $N refused \\(EPERM\\), 0 failed otherwise, 0 connected"

lost_grew() { [ "$(mval "$LOST")" -gt 0 ]; }
wait_until 20 lost_grew && pass metrics-loss-counted && echo "# $(mval "$LOST") of $N denials lost in the kernel's $RING-byte ring" ||
	fail metrics-loss-counted "$(metrics | grep -E '^warden_(denial_events_lost|bpf_event)')"

# every denial is delivered (seen by the alerter, labelled with the tool)
# or counted lost: nothing vanishes. Only cgroup/connect4 records a
# connect here unless BPF LSM runs (then socket_connect records it too).
DELIV='warden_denial_events_total{source="bpf",kind="connect",team="team-flood",tool="flooder",verdict="denied"}'
accounted() {
	local d l o
	d=$(mval "$DELIV") l=$(mval "$LOST") o=$(mval 'warden_denial_events_lost_total{reason="overrun"}')
	echo "delivered $d + lost in the ring $l + alerter overrun $o"
	[ $((d + l + o)) -eq "$N" ]
}
lsm=$("$WARDEN" status --json 2>/dev/null | jq_py "d['mechanisms']['bpf_lsm']['available']" 2>/dev/null)
if [ "$lsm" = True ]; then
	skip flood-accounted "BPF LSM is active: a connect writes two records, the sum is not $N"
else
	wait_until 20 accounted && pass flood-accounted && echo "# $(accounted) = $N" ||
		fail flood-accounted "$(accounted) != $N"
fi
# warden_denials_total counts every denial the call made, not only the
# ones its result could list (at most 4,096, and none of those the ring
# had no room for): the kernel counts each against its call before it
# asks the ring for room. What the trace does not list is counted apart.
DEN='warden_denials_total{team="team-flood",agent="flood",tool="flooder",tier="1",verdict="denied"}'
UNTR='warden_denials_untraced_total{team="team-flood",agent="flood",tool="flooder",tier="1"}'
tier=$(metrics | grep -o 'warden_denials_total{team="team-flood",agent="flood",tool="flooder",tier="[123]"' | head -1 | grep -o 'tier="[123]"')
DEN=${DEN/tier=\"1\"/$tier} UNTR=${UNTR/tier=\"1\"/$tier}
if [ "$lsm" = True ]; then
	skip denials-total-is-every-denial "BPF LSM is active: a connect is counted by two programs"
else
	expect_eq denials-total-is-every-denial "$(mval "$DEN")" "$N"
fi
untraced=$(mval "$UNTR")
[ "$untraced" -gt 0 ] && [ "$untraced" -le "$N" ] && pass denials-untraced-counted &&
	echo "# $untraced of the call's denials are not in its trace" ||
	fail denials-untraced-counted "$(metrics | grep -E '^warden_denials_(untraced_)?total.*flooder')"
expect_eq denials-audited-zero "$(mval "${DEN/verdict=\"denied\"/verdict=\"audited\"}")" 0
tr=$("$WARDEN" trace show --json --state "$T/state" "$(printf '%s\n' "$out" | grep -o '"run_id":"[^"]*"' | head -1 | cut -d'"' -f4)" 2>&1 |
	grep -o '"untraced_denials": *[0-9]*' | head -1)
tr=${tr#*:}
expect_eq trace-shows-untraced "${tr# }" "$untraced"
for r in bpf_invalid bpf_unrouted; do
	expect_eq "metrics-no-$r" "$(mval "warden_denial_events_lost_total{reason=\"$r\"}")" 0
done

# `warden events`: the loss line (JSON) and its text form
ev=$("$WARDEN" events --json 2>&1 | grep '"type":"loss"' | tail -1)
n_ev=$(printf '%s' "$ev" | jq_py "d.get('bpf_ringbuf', 0)")
[ "${n_ev:-0}" -gt 0 ] && [ "$n_ev" -eq "$(mval "$LOST")" ] &&
	pass events-json-shows-loss && echo "# $ev" || fail events-json-shows-loss "'$ev' vs /metrics $(mval "$LOST")"
expect_match events-text-shows-loss "$("$WARDEN" events 2>&1 | grep '^# lost:')" "^# lost: bpf_ringbuf=$n_ev bpf_invalid=0 bpf_unrouted=0 "

# wardend's own events_lost alert, counted and sent to Alertmanager
has_loss_alert() { [ "$(mval 'warden_alerts_total{type="events_lost"}')" -ge 1 ]; }
wait_until 10 has_loss_alert && pass daemon-loss-alert-raised ||
	fail daemon-loss-alert-raised "$(metrics | grep '^warden_alerts_total')"
am_has() {
	curl -s "http://127.0.0.1:$APORT/api/v2/alerts" | python3 -c "import json,sys
a=[x for x in json.load(sys.stdin) if x['labels'].get('alertname')=='WardenDaemonEventsLost' and x['labels'].get('reason')=='$1']
print(json.dumps(a[0]['annotations']) if a else ''); sys.exit(0 if a else 1)"
}
# one alert per reason, labelled with it as the Prometheus rule is
wait_until 20 am_has bpf_ringbuf && pass alertmanager-has-daemon-loss-alert ||
	fail alertmanager-has-daemon-loss-alert "$(curl -s "http://127.0.0.1:$APORT/api/v2/alerts" | head -c 400)"
expect_match alertmanager-loss-alert-says-where "$(am_has bpf_ringbuf)" '[1-9][0-9]* bpf_ringbuf'
am_has bpf_unrouted >/dev/null && fail alertmanager-loss-alert-only-where "bpf_unrouted alert sent" ||
	pass alertmanager-loss-alert-only-where

# Prometheus: the shipped rule fires, labelled with where the loss was
wait_until 60 prom_alert WardenEventsLost reason bpf_ringbuf && pass prometheus-events-lost-fires ||
	fail prometheus-events-lost-fires "$(curl -s "http://127.0.0.1:$PPORT/api/v1/alerts" | head -c 600)"
prom_alert WardenEventsLost reason bpf_unrouted && fail prometheus-events-lost-only-where "bpf_unrouted fired" ||
	pass prometheus-events-lost-only-where

# the scrape with the loss is still promtool-clean
metrics >"$T/scrape.txt"
pt=$(promtool check metrics <"$T/scrape.txt" 2>&1) && pass promtool-check-metrics-after-loss ||
	fail promtool-check-metrics-after-loss "$pt"

stop_daemon
finish
