#!/usr/bin/env bash
# Monitoring with the servers monitoring teams run (Debian's prometheus and
# prometheus-alertmanager, started here on loopback ports): Prometheus
# scrapes wardend's /metrics and evaluates the shipped rules
# (policy/monitoring/warden-rules.yaml); one tool, denied connecting to
# 127.0.0.1 by its manifest (network.allow: []), makes a denial spike; the
# rule fires with that tool's label (Prometheus HTTP API); wardend's own
# spike alert goes to Alertmanager's v2 API (--alertmanager), which routes
# it to a webhook receiver run here, and then its resolve; promtool checks
# a real scrape and unit-tests the rules; the dashboard and the rules name
# only exported metrics.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip monitoring "needs root"; finish; }
. tests/integration/monitoring_lib/servers.sh
mon_deps monitoring-deps || finish

# the tool: connects to 127.0.0.1:9, each denied by cgroup/connect4, for
# 8 s at a rising rate (10, 20, ... 80 a second: 360), so wardend's own
# detector (5 s window) stays in its spike past its 5 s resend; the quiet
# tool, called in the same step, makes 2 denials: a baseline, no spike
RAMP_S=8 RAMP_PER=10 RAMP_N=360
base_policy
tool spiker "[\"$HELPERS/netprobe\", \"connect-ramp\", \"9\", \"$RAMP_S\", \"$RAMP_PER\"]" \
	"input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:spiker\"]}" "side_effects: none"
tool quiet "[\"$HELPERS/netprobe\", \"connect-flood\", \"9\", \"2\"]" \
	"input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:quiet\"]}" "side_effects: none"
# a tool in audit mode: 40 connects, each allowed and audited (refused by
# nobody listening): audits are not denials, no spike rule may fire
tool trier "[\"$HELPERS/netprobe\", \"connect-flood\", \"9\", \"40\"]" \
	"input: stdin" "args_schema: {type: object}" "mode: audit" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:trier\"]}" "side_effects: none"
script trial <<'S'
{"step": 0, "tool_calls": [{"name": "trier", "arguments": {}}]}
{"text": "done"}
S
agent trial trial '[trier]'
script spike <<'S'
{"step": 0, "tool_calls": [{"name": "spiker", "arguments": {}}, {"name": "quiet", "arguments": {}}]}
{"text": "done"}
S
agent spiky spike '[spiker, quiet, echo]'
write_gateway

# the webhook receiver Alertmanager routes to
python3 "$LIB/receiver.py" "$T/recv.port" "$T/recv.out" >"$T/recv.log" 2>&1 &
RECV_PID=$!
wait_until 10 test -s "$T/recv.port" || { fail receiver-start "$(cat "$T/recv.log")"; finish; }
HPORT=$(cat "$T/recv.port")

start_servers "$(cat <<Y
route:
  receiver: hook
  group_by: [alertname, tool]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:$HPORT/
        send_resolved: true
Y
)" || finish
pass servers-started

start_daemon --metrics "127.0.0.1:$MPORT" --alertmanager "http://127.0.0.1:$APORT" --alert-window 5 ||
	{ fail daemon-start "see log"; finish; }
T0=$(date +%s)

# the tool's series is scraped at 0 before its first denial (rate() needs it)
wait_until 30 prom_zero 'warden_denials_total{tool="spiker"}' &&
	pass prom-scrapes-zero-series || fail prom-scrapes-zero-series "$(prom_q 'warden_denials_total')"
# past the daemon detector's warm-up (2 windows of 5 s)
while [ $(($(date +%s) - T0)) -lt 12 ]; do sleep 0.5; done

# the audit-mode agent first: its audits are counted as audits
out=$(as_user 1000 "$WARDEN" run --json trial go 2>&1)
expect_match trial-run "$(printf '%s\n' "$out" | grep '"type":"run_end"')" '"status":"ok"'
AUD='warden_denials_total{team="team-trial",agent="trial",tool="trier",tier="1",verdict="audited"}'
mtrial() { curl -s "http://127.0.0.1:$MPORT/metrics" | awk -v k="$1" '$1==k {v=$2} END{print v+0}'; }
a_n=$(mtrial "$AUD")
[ "$a_n" -ge 40 ] && pass metrics-audits-by-verdict "$a_n audited" ||
	fail metrics-audits-by-verdict "$(curl -s "http://127.0.0.1:$MPORT/metrics" | grep 'tool="trier"')"
expect_eq metrics-audits-not-denials "$(mtrial "${AUD/audited/denied}")" 0

# am_updates: while the run's spike lasts, Alertmanager's copy of
# wardend's tool alert (GET /api/v2/alerts) is updated again (updatedAt
# moves, startsAt stays): wardend re-sends it while it fires. Polls for up
# to 40 s; prints the first and the later updatedAt; 1 if never seen
# twice, 2 on any error talking to Alertmanager.
am_updates() {
	python3 - "$APORT" <<'PY'
import json, sys, time, urllib.request
url = "http://127.0.0.1:%s/api/v2/alerts" % sys.argv[1]
first = None
deadline = time.time() + 40
while time.time() < deadline:
    try:
        alerts = json.load(urllib.request.urlopen(url, timeout=5))
    except Exception as e:
        print("alertmanager: %s" % e); sys.exit(2)
    for a in alerts:
        l = a["labels"]
        if l.get("alertname") == "WardenDaemonDenialSpike" and l.get("dim") == "tool" and l.get("tool") == "spiker":
            if first is None:
                first = (a["startsAt"], a["updatedAt"])
            elif a["updatedAt"] > first[1] and a["startsAt"] == first[0] and a["status"]["state"] == "active":
                print("updatedAt %s -> %s, startsAt %s" % (first[1], a["updatedAt"], a["startsAt"])); sys.exit(0)
    time.sleep(0.2)
print("seen: %s" % (first,)); sys.exit(1)
PY
}
as_user 1000 "$WARDEN" run --json spiky go >"$T/run.out" 2>&1 &
RUN_PID=$!
upd=$(am_updates) && pass alertmanager-alert-resent-while-firing && echo "# $upd" ||
	fail alertmanager-alert-resent-while-firing "$upd"
wait "$RUN_PID"
out=$(cat "$T/run.out")
expect_match spike-run "$(printf '%s\n' "$out" | grep '"type":"run_end"')" '"status":"ok"'
expect_match spike-tool-denied "$out" "connect-ramp: $RAMP_N refused \\(EPERM\\), 0 failed otherwise"
m=$(curl -s "http://127.0.0.1:$MPORT/metrics")
n=$(printf '%s\n' "$m" | awk '/^warden_denials_total\{.*tool="spiker".*verdict="denied"/ {print $2}')
expect_eq metrics-denials-labelled "${n:-0}" "$RAMP_N"
QUIET='warden_denials_total{team="team-spiky",agent="spiky",tool="quiet",tier="1",verdict="denied"}'
expect_eq metrics-quiet-tool-baseline "$(printf '%s\n' "$m" | awk -v k="$QUIET" '$1==k {print $2}')" 2
expect_match metrics-tool-calls "$m" 'warden_tool_calls_total\{team="team-spiky",agent="spiky",tool="spiker",tier="1",outcome="[a-z_]+"\} 1'
expect_match metrics-tool-histogram "$m" 'warden_tool_call_duration_seconds_count\{team="team-spiky",agent="spiky",tool="spiker",tier="1"\} 1'
expect_match metrics-step-histogram "$m" 'warden_step_duration_seconds_count\{team="team-spiky",agent="spiky"\} 1'
expect_match metrics-model-histogram "$m" 'warden_model_call_duration_seconds_count\{team="team-spiky",agent="spiky",outcome="ok"\} 2'
expect_match metrics-denial-events "$m" 'warden_denial_events_total\{source="bpf",kind="connect",team="team-spiky",tool="spiker",verdict="denied"\} [1-9]'

# promtool on a real scrape
printf '%s\n' "$m" >"$T/scrape.txt"
pt=$(promtool check metrics <"$T/scrape.txt" 2>&1) && pass promtool-check-metrics || fail promtool-check-metrics "$pt"
pt=$(promtool check rules "$MON/warden-rules.yaml" 2>&1) && pass promtool-check-rules || fail promtool-check-rules "$pt"
pt=$(cd "$MON" && promtool test rules warden-rules.test.yaml 2>&1) && pass promtool-test-rules || fail promtool-test-rules "$pt"
# the dashboard and the rules name only exported metrics (prints PASS/FAIL)
python3 "$LIB/check_names.py" "$T/scrape.txt" "$MON/warden-dashboard.json" "$MON/warden-rules.yaml" || _fail=1

# Prometheus: the shipped rule fires for that tool
wait_until 60 prom_alert WardenDenialSpikeTool tool spiker &&
	pass prometheus-rule-fires-for-tool ||
	fail prometheus-rule-fires-for-tool "$(curl -s "http://127.0.0.1:$PPORT/api/v1/alerts" | head -c 600)"
wait_until 10 prom_alert WardenDenialSpikeAgent agent spiky &&
	pass prometheus-rule-fires-for-agent || fail prometheus-rule-fires-for-agent "not firing"
wait_until 10 prom_alert WardenDenialSpikeTeam team team-spiky &&
	pass prometheus-rule-fires-for-team || fail prometheus-rule-fires-for-team "not firing"
# the quiet tool: its 2 denials are in Prometheus, the rules have been
# evaluated since (the spiker's fired), and it is not a spike. An error
# asking Prometheus is a failure, not a quiet tool.
quiet_scraped() { prom_q "sum($QUIET)" | grep -q '"value":\[[0-9.]*,"2"\]'; }
wait_until 30 quiet_scraped && pass prometheus-has-quiet-baseline ||
	fail prometheus-has-quiet-baseline "$(prom_q "$QUIET")"
st=$(prom_alert_state WardenDenialSpikeTool tool quiet)
expect_eq prometheus-rule-quiet-tool "$st" absent
# the audit-mode tool: its audits are in Prometheus, and no spike rule
# judged them a spike
aud_scraped() { prom_q "sum($AUD)" | grep -q '"value":\[[0-9.]*,"'"$a_n"'"\]'; }
wait_until 30 aud_scraped && pass prometheus-has-audits ||
	fail prometheus-has-audits "$(prom_q "$AUD")"
expect_eq prometheus-rule-ignores-audits-tool "$(prom_alert_state WardenDenialSpikeTool tool trier)" absent
expect_eq prometheus-rule-ignores-audits-team "$(prom_alert_state WardenDenialSpikeTeam team team-trial)" absent
# the shipped rules' alerts reach Alertmanager (prometheus.yml alerting:)
am_has_prom_alert() {
	curl -sf "http://127.0.0.1:$APORT/api/v2/alerts" | python3 -c "import json,sys
a=[x for x in json.load(sys.stdin) if x['labels'].get('alertname')=='WardenDenialSpikeTool' and x['labels'].get('tool')=='spiker']
sys.exit(0 if a else 1)"
}
wait_until 60 am_has_prom_alert && pass alertmanager-gets-prometheus-rule-alert ||
	fail alertmanager-gets-prometheus-rule-alert "$(curl -s "http://127.0.0.1:$APORT/api/v2/alerts" | head -c 600)"

# Alertmanager: wardend's own alert, routed to the receiver, then resolved
recv_has() { # STATUS: a notification of that status for the spiker alert
	python3 -c "import json,sys
for line in open('$T/recv.out'):
    d=json.loads(line)
    for a in d.get('alerts', []):
        l=a.get('labels', {})
        if l.get('alertname')=='WardenDaemonDenialSpike' and l.get('tool')=='spiker' and a.get('status')=='$1':
            print(json.dumps(a, separators=(',', ':'))); sys.exit(0)
sys.exit(1)" 2>/dev/null
}
wait_until 30 recv_has firing && pass alertmanager-routes-daemon-alert ||
	fail alertmanager-routes-daemon-alert "receiver got: $(head -c 600 "$T/recv.out" 2>/dev/null); wardend: $(grep -i alertmanager "$T/wardend.log" | tail -3)"
# wardend judged the audits no spike either: the receiver, which got the
# spiker's alert (raised after the audits), got nothing for team-trial —
# firing or resolved (Alertmanager's API lists only alerts still active)
trial_notes=$(python3 -c "import json,sys
n=0
for line in open('$T/recv.out'):
    for a in json.loads(line).get('alerts', []):
        l=a.get('labels', {})
        if l.get('alertname')=='WardenDaemonDenialSpike' and (l.get('team')=='team-trial' or l.get('tool')=='trier'):
            n+=1
print(n)" 2>&1)
expect_eq alertmanager-no-daemon-alert-for-audits "$trial_notes" 0
a=$(recv_has firing)
expect_match alert-annotations "$a" '"last_event":"run [a-z0-9_-]+ step 0 tool spiker \(team team-spiky, agent spiky\): bpf connect .*127\.0\.0\.1:9'
expect_match alert-generator-url "$a" "\"generatorURL\":\"http://127.0.0.1:$MPORT/metrics\""
wait_until 60 recv_has resolved && pass alertmanager-resolve-arrives ||
	fail alertmanager-resolve-arrives "receiver got: $(tail -c 600 "$T/recv.out" 2>/dev/null)"
expect_match metrics-alertmanager-sent "$(curl -s "http://127.0.0.1:$MPORT/metrics")" 'warden_alertmanager_sent_total ([2-9]|[1-9][0-9]+)$'

stop_daemon
finish
