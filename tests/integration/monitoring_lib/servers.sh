# Prometheus and Alertmanager as monitoring teams run them (Debian's
# prometheus and prometheus-alertmanager), started on loopback ports for
# one test and stopped by its cleanup (mon_cleanup, by pid). Source after
# tests/lib.sh and daemon_lib/common.sh; sets LIB, MON, MPORT (wardend's
# metrics), PPORT, APORT.
LIB=$ROOT_DIR/tests/integration/monitoring_lib
MON=$ROOT_DIR/policy/monitoring
PROM_PID= AM_PID= RECV_PID=

mon_deps() { # NAME: fail NAME and return 1 if a server is missing
	local b
	for b in prometheus prometheus-alertmanager promtool; do
		command -v "$b" >/dev/null || {
			fail "$1" "$b missing (scripts/deps.sh installs prometheus, prometheus-alertmanager)"
			return 1
		}
	done
}

mon_cleanup() {
	local p
	for p in $PROM_PID $AM_PID $RECV_PID; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	cleanup_all
}
trap mon_cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
MPORT=$(free_port) PPORT=$(free_port) APORT=$(free_port)

# start_servers ALERTMANAGER_YAML: Alertmanager with that config, then
# Prometheus scraping wardend (127.0.0.1:$MPORT) every second and
# evaluating the shipped rules every second; 0 once both are ready.
start_servers() {
	mkdir -p "$T/am" "$T/prom"
	printf '%s\n' "$1" >"$T/am/alertmanager.yml"
	prometheus-alertmanager --config.file="$T/am/alertmanager.yml" --storage.path="$T/am/data" \
		--web.listen-address="127.0.0.1:$APORT" --cluster.listen-address= >"$T/am.log" 2>&1 &
	AM_PID=$!
	cat >"$T/prom/prometheus.yml" <<Y
global: {scrape_interval: 1s, evaluation_interval: 1s}
alerting:
  alertmanagers:
    - static_configs: [{targets: ["127.0.0.1:$APORT"]}]
rule_files: ["$MON/warden-rules.yaml"]
scrape_configs:
  - job_name: warden
    static_configs: [{targets: ["127.0.0.1:$MPORT"]}]
Y
	prometheus --config.file="$T/prom/prometheus.yml" --storage.tsdb.path="$T/prom/data" \
		--web.listen-address="127.0.0.1:$PPORT" >"$T/prom.log" 2>&1 &
	PROM_PID=$!
	wait_until 30 curl -sf "http://127.0.0.1:$APORT/-/ready" || { fail alertmanager-start "$(tail -5 "$T/am.log")"; return 1; }
	wait_until 30 curl -sf "http://127.0.0.1:$PPORT/-/ready" || { fail prometheus-start "$(tail -5 "$T/prom.log")"; return 1; }
}

prom_q() { curl -s --get "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1"; }
# prom_zero QUERY: Prometheus holds the series at 0 (rate()/increase() need
# a sample before the first rise)
prom_zero() { prom_q "$1" | grep -q '"value":\[[0-9.]*,"0"\]'; }
# prom_alert ALERTNAME LABEL VALUE: Prometheus has that alert firing
prom_alert() {
	curl -s "http://127.0.0.1:$PPORT/api/v1/alerts" | python3 -c "import json,sys
d=json.load(sys.stdin)
a=[x for x in d['data']['alerts'] if x['labels'].get('alertname')=='$1' and x['labels'].get('$2')=='$3' and x['state']=='firing']
sys.exit(0 if a else 1)"
}
# prom_alert_state ALERTNAME LABEL VALUE: prints firing, pending or
# absent; exits 2 (and prints why) when Prometheus cannot be asked
prom_alert_state() {
	curl -sf "http://127.0.0.1:$PPORT/api/v1/alerts" | python3 -c "import json,sys
try:
    d=json.load(sys.stdin)
    a=[x['state'] for x in d['data']['alerts'] if x['labels'].get('alertname')=='$1' and x['labels'].get('$2')=='$3']
except Exception as e:
    print('error: %s' % e); sys.exit(2)
print('firing' if 'firing' in a else a[0] if a else 'absent')"
}
