/* wardend: the per-node daemon. Loads policy/, serves the API on a unix
 * socket, runs agents on a worker pool; SIGHUP reloads the policy (a bad
 * file keeps the old one), SIGTERM/SIGINT stop it. The daemon's own
 * settings (warm pool, OTLP export, extra redaction) come from
 * policy/daemon.yaml, overridden by flags, and apply at start. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "enforce/egress.h"
#include "enforce/resolver.h"
#include "fleet/fleet.h"
#include "policy/daemon_config.h"
#include "sandbox/sandbox.h"
#include "sandbox/uidpool.h"
#include "sandbox/pool.h"
#include "trace/otlp.h"
#include "runtime/runtime.h"
#include "wardend/server.h"

#define DEFAULT_STATE  "/var/lib/warden"
#define DEFAULT_POLICY "/etc/warden/policy"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: wardend [--state DIR] [--policy DIR] [--socket PATH] "
	    "[--metrics ADDR:PORT]\n"
	    "               [--workers N] [--approval-ttl SECONDS] "
	    "[--webhook URL] [--warm-pool N] [--otlp URL] [--log-json] "
	    "[-v]\n"
	    "               [--alert-webhook URL] [--alertmanager URL] "
	    "[--alert-window SECONDS]\n"
	    "               [--alert-generator-url URL]\n"
	    "               [--event-ring-bytes BYTES] [--dns-upstream "
	    "ADDR:PORT]\n"
	    "               [--dns-hosts FILE]\n"
	    "               [--fleet URL|@FILE [--fleet-capacity N|T1,T2,T3] "
	    "[--fleet-lease-ms MS]\n"
	    "                [--fleet-label KEY=VALUE]... [--fleet-when-down "
	    "refuse|run_here]]\n"
	    "  --fleet URL     join a fleet on this PostgreSQL database "
	    "(libpq URL or\n"
	    "                  key=value string; @FILE or /path: read from "
	    "that file's first\n"
	    "                  line): `warden run` queues there and runs "
	    "where there is room\n"
	    "                  (README \"More than one node\")\n"
	    "  --fleet-capacity N  fleet runs this node runs at once "
	    "(default: --workers;\n"
	    "                  0: it only queues), in each tier it can run "
	    "(0 in a tier its\n"
	    "                  kernel or runsc cannot: `warden status`)\n"
	    "  --fleet-capacity T1,T2,T3  runs using tier 1, 2, 3 held at "
	    "once (a run takes\n"
	    "                  one in each tier its agent's tools use), at "
	    "most the largest\n"
	    "                  of them in all; a tier it cannot run must "
	    "be 0\n"
	    "  --fleet-lease-ms MS  a node silent this long loses its runs: "
	    "they are\n"
	    "                  marked interrupted fleet-wide (default %u, "
	    "at least %u)\n"
	    "  --fleet-label KEY=VALUE  this node's labels: runs of an agent "
	    "with a placement\n"
	    "                  go to nodes with all its labels\n"
	    "  --fleet-when-down refuse|run_here  the database unreachable: "
	    "refuse a new\n"
	    "                  run (503, the default) or run it on this "
	    "node\n"
	    "  --dns-upstream ADDR:PORT  where calls' resolvers look up "
	    "the names of\n"
	    "                  network.allow (IPv4; default: /etc/hosts, then "
	    "the node's resolver)\n"
	    "  --dns-hosts FILE  names of your own (hosts format), asked "
	    "before the above\n"
	    "  --alert-webhook URL  POST a JSON document per denial spike "
	    "or event loss\n"
	    "  --alertmanager URL   send them to Alertmanager's v2 API "
	    "(URL/api/v2/alerts):\n"
	    "                  repeated while firing, endsAt when they "
	    "end\n"
	    "  --alert-generator-url URL  the alerts' generatorURL "
	    "(default http://ADDR:PORT/metrics\n"
	    "                  of --metrics, the host name for a wildcard "
	    "address)\n"
	    "  --alert-window SECONDS  the spike detector's short window "
	    "(default 60; the\n"
	    "                  baseline window is 60 of them)\n"
	    "  --event-ring-bytes BYTES  size of the kernel's denial event "
	    "ring buffer (default\n"
	    "                  %u: ~43k denials in flight): a power of two "
	    "and a multiple of\n"
	    "                  the page size, from %ld to %u. A flood "
	    "beyond it is counted\n"
	    "                  (warden_denial_events_lost_total"
	    "{reason=\"bpf_ringbuf\"}), never allowed\n"
	    "  --warm-pool N   keep N (0..64) tier-3 sandboxes ready per "
	    "tool call shape (0: cold\n"
	    "                  starts; overrides warm_pool.size of "
	    "daemon.yaml)\n"
	    "  --workers N     runs in progress at once, 1..1024 (default "
	    "8)\n"
	    "  --approval-ttl SECONDS  a pending approval expires after "
	    "this, 1..2592000\n"
	    "                  (default: $WARDEN_APPROVAL_TTL, else each "
	    "agent's\n"
	    "                  bounds.approval_ttl_s)\n"
	    "  --otlp URL      export GenAI spans to this OTLP/HTTP "
	    "collector (overrides\n"
	    "                  trace.otlp.endpoint of daemon.yaml)\n"
	    "  --state DIR     trace store and run state (default "
	    "$WARDEN_STATE or %s)\n"
	    "  --policy DIR    tools/, agents/, users.yaml, gateway.yaml, "
	    "daemon.yaml\n"
	    "                  (default %s)\n"
	    "  --socket PATH   API socket (default $WARDEN_SOCKET or %s)\n"
	    "  --metrics ADDR  also serve /metrics over TCP (e.g. "
	    "127.0.0.1:9464)\n"
	    "SIGHUP reloads the policy (daemon.yaml is checked; its "
	    "settings apply at\nthe next start); SIGTERM stops the "
	    "daemon.\n",
	    WD_FLEET_LEASE_MS_DEFAULT, WD_FLEET_LEASE_MS_MIN,
	    WD_EGRESS_RING_DEFAULT, sysconf(_SC_PAGESIZE), WD_EGRESS_RING_MAX,
	    DEFAULT_STATE, DEFAULT_POLICY, "/run/warden/wardend.sock");
}

/* After a reload: which daemon.yaml settings now differ from the running
 * ones (they apply at the next start, see daemon_config.h). Flags given
 * at start still win then. */
static void daemon_config_changed(const char *policy,
				  const struct wd_daemon_config *running)
{
	struct wd_daemon_config *now = NULL;
	struct wd_err err = {0};
	if (wd_daemon_config_load_dir(policy, &now, &err))
		return; /* reported by the reload */
	struct wd_buf b = {0};
	wd_daemon_config_diff(running, now, &b);
	if (b.len)
		wd_warn("%s/%s: %s changed; restart wardend to apply", policy,
			WD_DAEMON_CONFIG_FILE, b.data);
	wd_buf_free(&b);
	wd_daemon_config_free(now);
}

/* glibc gives each thread that meets a locked arena a new one, up to
 * eight per core: the connection and run threads of a busy daemon end up
 * spread over a dozen arenas, each keeping its own free chunks after a
 * burst, so idle RSS wanders by ~10 MB from one batch of runs to the next
 * while the heap in use stays flat (tests/integration/daemon_memory.sh).
 * Two arenas per core keep that spread small; an operator's own
 * MALLOC_ARENA_MAX or glibc.malloc.arena_max tunable wins. */
static void cap_arenas(void)
{
	const char *t = getenv("GLIBC_TUNABLES");
	if (getenv("MALLOC_ARENA_MAX") || (t && strstr(t, "arena_max")))
		return;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	mallopt(M_ARENA_MAX, (int)(n < 1 ? 2 : n > 64 ? 128 : n * 2));
}

/* The API may hold max_connections sockets plus as many being refused,
 * on top of the runs' own descriptors: a soft limit of 1024 would make
 * accept fail long before the configured limits. */
static void raise_nofile(const struct wd_api_limits *l)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r))
		return;
	rlim_t want = (rlim_t)l->max_connections * 2 + 4096 + 1024;
	if (r.rlim_cur >= want)
		return;
	r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max >= want
			 ? want
			 : r.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &r))
		wd_warn("cannot raise the open-file limit: %s",
			strerror(errno));
	if (r.rlim_cur < want)
		wd_warn(
		    "open-file limit %llu is below what api.max_connections "
		    "%u needs (%llu): raise LimitNOFILE",
		    (unsigned long long)r.rlim_cur, l->max_connections,
		    (unsigned long long)want);
}

/* an http(s) URL with a host, printable ASCII without blanks */
static bool url_ok(const char *u)
{
	const char *h = !strncmp(u, "http://", 7)    ? u + 7
			: !strncmp(u, "https://", 8) ? u + 8
						     : NULL;
	if (!h || !*h || *h == '/' || *h == ':')
		return false;
	for (; *u; u++)
		if ((unsigned char)*u <= 0x20 || (unsigned char)*u >= 0x7f)
			return false;
	return true;
}

/* --fleet-capacity T1,T2,T3: each tier's room; the node's, the largest.
 * 0, or -1 with the usage error printed. */
static int parse_tiers(const char *arg, int tiers[3], long *total)
{
	const char *p = arg;
	*total = 0;
	for (int i = 0; i < 3; i++) {
		char *end = NULL;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (errno || end == p || v < 0 || v > 1000000 ||
		    *end != (i < 2 ? ',' : 0)) {
			fprintf(stderr,
				"wardend: --fleet-capacity wants N or "
				"T1,T2,T3 (runs using tier 1, 2, 3), not "
				"'%s'\n",
				arg);
			return -1;
		}
		tiers[i] = (int)v;
		if (v > *total)
			*total = v;
		p = end + 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"state", required_argument, 0, 's'},
	    {"policy", required_argument, 0, 'p'},
	    {"socket", required_argument, 0, 'S'},
	    {"metrics", required_argument, 0, 'm'},
	    {"workers", required_argument, 0, 'w'},
	    {"approval-ttl", required_argument, 0, 't'},
	    {"webhook", required_argument, 0, 'W'},
	    {"alert-webhook", required_argument, 0, 'A'},
	    {"alertmanager", required_argument, 0, 'M'},
	    {"alert-window", required_argument, 0, 'a'},
	    {"alert-generator-url", required_argument, 0, 'G'},
	    {"log-json", no_argument, 0, 'j'},
	    {"warm-pool", required_argument, 0, 'P'},
	    {"otlp", required_argument, 0, 'O'},
	    {"event-ring-bytes", required_argument, 0, 'R'},
	    {"dns-upstream", required_argument, 0, 'D'},
	    {"dns-hosts", required_argument, 0, 'H'},
	    {"fleet", required_argument, 0, 'F'},
	    {"fleet-capacity", required_argument, 0, 'C'},
	    {"fleet-lease-ms", required_argument, 0, 'L'},
	    {"fleet-label", required_argument, 0, 'l'},
	    {"fleet-when-down", required_argument, 0, 'X'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	const char *state = getenv("WARDEN_STATE"), *policy = DEFAULT_POLICY;
	const char *sock = getenv("WARDEN_SOCKET"), *metrics = NULL;
	const char *otlp_url = NULL, *gen_given = NULL;
	int warm_pool = -1;	 /* -1: daemon.yaml's */
	uint32_t ring_bytes = 0; /* 0: the default */
	struct wd_dns_upstream dns_up = {0};
	bool dns_set = false;
	struct wd_rt_opts ro = {0};
	struct wd_fleet_opts fo = {.tier_capacity = {-1, -1, -1}};
	long fleet_cap = -1; /* -1: the workers */
	bool lease_given = false;
	int when_down = -1;		 /* -1: daemon.yaml's */
	struct wd_alert_config ac = {0}; /* defaults: 60 s / 1 h, x5, min 20 */
	/* the daemon's spike alerts judge denials: an agent whose manifest
	 * is in audit mode is being tried out, not attacked (the same as
	 * the shipped rules' verdict="denied"; audits are still counted,
	 * warden_denial_events_total{verdict="audited"}) */
	ac.denied_only = true;
	ro.alert = &ac;
	int c;
	wd_log_set_ident("wardend");
	cap_arenas();
	wd_log_set_level(WD_LOG_INFO);
	while ((c = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
		switch (c) {
		case 's':
		case 'p':
		case 'S':
			/* "--state $UNSET" is a mistake, not the default */
			if (!*optarg) {
				fprintf(stderr,
					"wardend: --%s wants a path, "
					"not an empty string\n",
					c == 's'   ? "state"
					: c == 'p' ? "policy"
						   : "socket");
				return 2;
			}
			if (c == 's')
				state = optarg;
			else if (c == 'p')
				policy = optarg;
			else
				sock = optarg;
			break;
		case 'm':
			metrics = optarg;
			break;
		case 'w':
		case 't':
		case 'P': {
			/* whole numbers in range: a typo is no default */
			static const struct {
				int c;
				const char *name;
				unsigned long long min, max;
			} nums[] = {{'w', "workers", 1, 1024},
				    {'t', "approval-ttl", 1, 30 * 86400},
				    {'P', "warm-pool", 0, 64}};
			unsigned long long v = 0;
			size_t i = 0;
			while (nums[i].c != c)
				i++;
			if (wd_parse_uint(optarg, nums[i].min, nums[i].max,
					  &v)) {
				fprintf(stderr,
					"wardend: --%s wants a whole number "
					"from %llu to %llu, not '%s'\n",
					nums[i].name, nums[i].min, nums[i].max,
					optarg);
				return 2;
			}
			if (c == 'w')
				ro.workers = (int)v;
			else if (c == 't')
				ro.approval_ttl_s = (unsigned)v;
			else
				warm_pool = (int)v;
			break;
		}
		case 'A':
			ac.webhook_url = optarg;
			break;
		case 'M':
			ac.alertmanager_url = optarg;
			break;
		case 'G':
			gen_given = optarg;
			break;
		case 'a': {
			char *end = NULL;
			unsigned long w = strtoul(optarg, &end, 10);
			if (!end || *end || w < 1 || w > 3600) {
				fprintf(stderr, "wardend: --alert-window wants "
						"1..3600 seconds\n");
				return 2;
			}
			ac.short_window_s = (uint32_t)w;
			ac.long_window_s = (uint32_t)w * 60;
			break;
		}
		case 'W':
			ro.webhook_url = optarg;
			break;
		case 'j':
			wd_log_set_json(true);
			break;
		case 'O':
			otlp_url = optarg;
			break;
		case 'D': {
			struct wd_err de = {0};
			if (wd_dns_upstream_parse(optarg, &dns_up, &de) < 0) {
				fprintf(stderr, "wardend: --dns-upstream: %s\n",
					de.msg);
				return 2;
			}
			dns_set = true;
			break;
		}
		case 'H':
			if (access(optarg, R_OK) < 0) {
				fprintf(stderr, "wardend: --dns-hosts %s: %s\n",
					optarg, strerror(errno));
				return 2;
			}
			if (strlen(optarg) >= sizeof(dns_up.zone_path)) {
				fprintf(
				    stderr,
				    "wardend: --dns-hosts: path too long\n");
				return 2;
			}
			wd_strlcpy(dns_up.zone_path, optarg,
				   sizeof(dns_up.zone_path));
			dns_set = true;
			break;
		case 'R': {
			char *end = NULL;
			struct wd_err re = {0};
			errno = 0;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (errno || !end || end == optarg || *end ||
			    optarg[0] == '-') {
				fprintf(stderr,
					"wardend: --event-ring-bytes wants a "
					"number of bytes, not '%s'\n",
					optarg);
				return 2;
			}
			if (wd_egress_ring_check(v, &re)) {
				fprintf(stderr,
					"wardend: --event-ring-bytes: %s\n",
					re.msg);
				return 2;
			}
			ring_bytes = (uint32_t)v;
			break;
		}
		case 'F':
			fo.url = optarg;
			break;
		case 'C':
			if (strchr(optarg, ',')) {
				if (parse_tiers(optarg, fo.tier_capacity,
						&fleet_cap))
					return 2;
				break;
			}
			/* fall through */
		case 'L': {
			char *end = NULL;
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || !end || end == optarg || *end || v < 0 ||
			    v > 1000000) {
				fprintf(stderr,
					"wardend: --%s wants a number, not "
					"'%s'\n",
					c == 'C' ? "fleet-capacity"
						 : "fleet-lease-ms",
					optarg);
				return 2;
			}
			if (c == 'C')
				fleet_cap = v;
			else {
				fo.lease_ms = (unsigned)v;
				lease_given = true;
			}
			break;
		}
		case 'l': {
			struct wd_err le = {0};
			if (fo.n_labels == WD_FLEET_LABELS_MAX) {
				fprintf(stderr,
					"wardend: at most %d --fleet-label\n",
					WD_FLEET_LABELS_MAX);
				return 2;
			}
			if (wd_fleet_label_check(optarg, &le)) {
				fprintf(stderr, "wardend: %s\n", le.msg);
				return 2;
			}
			fo.labels[fo.n_labels++] = optarg;
			break;
		}
		case 'X':
			if ((when_down = wd_fleet_when_down_parse(optarg)) <
			    0) {
				fprintf(stderr,
					"wardend: --fleet-when-down: refuse or "
					"run_here, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'v':
			wd_log_set_level(WD_LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (lease_given && fo.lease_ms < WD_FLEET_LEASE_MS_MIN) {
		fprintf(stderr, "wardend: --fleet-lease-ms: at least %u\n",
			WD_FLEET_LEASE_MS_MIN);
		return 2;
	}
	if (ro.webhook_url && !url_ok(ro.webhook_url)) {
		fprintf(stderr,
			"wardend: --webhook wants an http:// or https:// URL "
			"with a host, printable, no spaces: '%s'\n",
			ro.webhook_url);
		return 2;
	}
	/* the environment's TTL, as strictly as the option's: "-1" is no
	 * approval that never expires, "1h" no one-second one */
	const char *ttl_env = getenv("WARDEN_APPROVAL_TTL");
	if (!ro.approval_ttl_s && ttl_env && *ttl_env) {
		unsigned long long v = 0;
		/* 0: each agent's, as before */
		if (wd_parse_uint(ttl_env, 0, 30 * 86400, &v)) {
			fprintf(stderr,
				"wardend: WARDEN_APPROVAL_TTL wants a whole "
				"number of seconds from 1 to 2592000 (0: each "
				"agent's), not '%s'\n",
				ttl_env);
			return 2;
		}
		ro.approval_ttl_s = (unsigned)v;
	}
	if (!sock || !*sock)
		sock = "/run/warden/wardend.sock";
	/* the daemon's alerts link back to its metrics when it serves them
	 * (a wildcard bind address is no link: the node's name instead) */
	cleanup_free char *gen_url = NULL;
	{
		char host[256] = "";
		struct wd_err ge = {0};
		if (gethostname(host, sizeof(host) - 1) < 0)
			host[0] = 0;
		if (wd_alert_generator_url(gen_given, metrics, host, &gen_url,
					   &ge)) {
			fprintf(stderr, "wardend: %s\n", ge.msg);
			return 2;
		}
	}
	ac.generator_url = gen_url;
	if (!state || !*state)
		state = DEFAULT_STATE;
	/* the scrape endpoint bound first: monitoring that asked for it
	 * must not get a daemon that runs without it (a typo, a port
	 * already taken) */
	int metrics_fd = -1;
	if (metrics) {
		struct wd_err me = {0};
		if (wd_metrics_listen(metrics, &metrics_fd, &me)) {
			fprintf(stderr, "wardend: %s\n", me.msg);
			return me.code == -EINVAL ? 2 : 1;
		}
	}
	wd_log_route_libbpf();

	/* Signals are taken synchronously by the main thread; every other
	 * thread (workers, MHD) inherits the blocked mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct wd_err err = {0};
	struct wd_rt *rt = NULL;
	struct wd_daemon_config *dc = NULL;
	struct wd_otlp *otlp = NULL;
	if (wd_daemon_config_load_dir(policy, &dc, &err)) {
		wd_error("%s", err.msg);
		return 1;
	}
	/* dc stays as the file says (a reload compares against it); flags
	 * override it here */
	if (dc->uids.count) {
		struct wd_uid_range ur = {dc->uids.first, dc->uids.count};
		wd_uid_range_set(&ur);
	} else {
		/* a bad $WARDEN_UID_RANGE stops the start, not each call */
		struct wd_uid_range ur;
		if (wd_uid_range_get(&ur, &err) < 0) {
			wd_error("%s", err.msg);
			wd_daemon_config_free(dc);
			return 1;
		}
	}
	/* where calls' resolvers ask (names in network.allow): daemon.yaml's
	 * dns section, each part overridden by its flag */
	if (!dns_up.have_server && dc->dns.have_upstream) {
		memcpy(dns_up.server4, dc->dns.upstream.server4, 4);
		dns_up.server_port = dc->dns.upstream.server_port;
		dns_up.have_server = true;
	}
	if (!dns_up.zone_path[0] && dc->dns.hosts) {
		if (access(dc->dns.hosts, R_OK) < 0) {
			wd_error("daemon.yaml dns.hosts %s: %s", dc->dns.hosts,
				 strerror(errno));
			wd_daemon_config_free(dc);
			return 1;
		}
		wd_strlcpy(dns_up.zone_path, dc->dns.hosts,
			   sizeof(dns_up.zone_path));
	}
	if (dns_set || dns_up.have_server || dns_up.zone_path[0])
		wd_resolver_set_upstream(&dns_up);
	/* the fleet: daemon.yaml's fleet block, each setting overridden by
	 * its flag */
	if (!fo.url)
		fo.url = dc->fleet.url;
	if (fleet_cap < 0) {
		fleet_cap = dc->fleet.capacity;
		memcpy(fo.tier_capacity, dc->fleet.tier_capacity,
		       sizeof(fo.tier_capacity));
	}
	if (!fo.lease_ms)
		fo.lease_ms = dc->fleet.lease_ms;
	for (int i = 0; !fo.n_labels && i < dc->fleet.n_labels; i++)
		fo.labels[i] = dc->fleet.labels[i];
	if (!fo.n_labels)
		fo.n_labels = (unsigned)dc->fleet.n_labels;
	if (when_down < 0)
		when_down = dc->fleet.when_down;
	fo.run_here_when_down = when_down == 1;
	if (!fo.url &&
	    (fleet_cap >= 0 || fo.lease_ms || fo.n_labels || when_down >= 0)) {
		fprintf(stderr, "wardend: --fleet-capacity, --fleet-lease-ms, "
				"--fleet-label and --fleet-when-down need "
				"--fleet URL (or fleet.url in daemon.yaml)\n");
		wd_daemon_config_free(dc);
		return 2;
	}
	if (fo.url) {
		/* the URL's syntax and file now: a typo is a usage error,
		 * not a node that starts degraded */
		struct wd_err fe = {0};
		cleanup_free char *ci = NULL;
		if (wd_fleet_conninfo(fo.url, &ci, &fe)) {
			fprintf(stderr, "wardend: %s\n", fe.msg);
			wd_daemon_config_free(dc);
			return 2;
		}
	}
	if (!otlp_url)
		otlp_url = dc->otlp.endpoint;
	if (otlp_url) {
		struct wd_otlp_opts oo = {.endpoint = otlp_url,
					  .service_name = dc->otlp.service_name,
					  .queue_max = dc->otlp.queue,
					  .batch_max = dc->otlp.batch,
					  .timeout_ms = dc->otlp.timeout_ms};
		if (wd_otlp_start(&oo, &otlp, &err)) {
			wd_error("otlp: %s", err.msg);
			wd_daemon_config_free(dc);
			return 1;
		}
	}
	struct wd_pool_config pc = {
	    .size = warm_pool >= 0 ? warm_pool : dc->warm_pool.size,
	    .tenant_quota = dc->warm_pool.per_tenant,
	    .idle_ms = dc->warm_pool.idle_s * 1000u,
	    .key_idle_ms = dc->warm_pool.key_idle_s * 1000u,
	    .max_keys = dc->warm_pool.max_keys,
	};
	ro.state_dir = state;
	ro.policy_dir = policy;
	ro.pool = &pc;
	ro.redact_regexes = (const char *const *)dc->redact;
	ro.otlp = otlp;
	if (ring_bytes) {
		/* opened now, not at the first call: a size the kernel
		 * refuses stops the start instead of failing every call */
		struct wd_egress_opts eo = {.ring_bytes = ring_bytes};
		if (wd_egress_shared_set_opts(&eo, &err) ||
		    !wd_egress_shared(&err)) {
			wd_error("--event-ring-bytes %u: %s", ring_bytes,
				 err.msg);
			wd_otlp_stop(otlp);
			wd_daemon_config_free(dc);
			return 1;
		}
		wd_info("denial event ring buffer: %u bytes", ring_bytes);
	}
	ro.fleet = fo.url != NULL;
	if (wd_rt_open(&ro, &rt, &err)) {
		wd_error("%s", err.msg);
		wd_otlp_stop(otlp);
		wd_daemon_config_free(dc);
		return 1;
	}
	wd_info("daemon config %s: warm pool %d (per tenant %d, idle %u s, "
		"%d keys max), otlp %s, %d extra redaction pattern%s",
		dc->source ? dc->source : "(defaults)", pc.size,
		pc.tenant_quota, dc->warm_pool.idle_s,
		pc.max_keys ? pc.max_keys : 32, otlp_url ? otlp_url : "off",
		dc->n_redact, dc->n_redact == 1 ? "" : "s");
	raise_nofile(&dc->api);
	wd_info("api: %u workers, %u connections (%u per uid), request "
		"timeout %u s, idle timeout %u s, backlog %u",
		dc->api.threads, dc->api.max_connections,
		dc->api.max_connections_per_uid, dc->api.request_timeout_s,
		dc->api.idle_timeout_s, dc->api.listen_backlog);
	struct wd_fleet *fleet = NULL;
	if (fo.url) {
		fo.state_dir = state;
		fo.capacity = fleet_cap >= 0
				  ? (unsigned)fleet_cap
				  : (unsigned)(ro.workers > 0 ? ro.workers : 8);
		if (wd_fleet_start(&fo, rt, &fleet, &err)) {
			wd_error("fleet: %s", err.msg);
			wd_rt_close(rt);
			wd_otlp_stop(otlp);
			wd_daemon_config_free(dc);
			return 1;
		}
	}
	struct wd_server *srv = NULL;
	if (wd_server_start(rt, fleet, sock, &dc->api, &srv, &err)) {
		wd_error("%s", err.msg);
		wd_fleet_stop(fleet);
		wd_rt_close(rt);
		wd_otlp_stop(otlp);
		wd_daemon_config_free(dc);
		return 1;
	}
	if (metrics_fd >= 0 &&
	    wd_server_start_metrics(srv, metrics_fd, metrics, &err)) {
		wd_error("metrics: %s", err.msg);
		wd_server_stop(srv);
		wd_fleet_stop(fleet);
		wd_rt_close(rt);
		wd_otlp_stop(otlp);
		wd_daemon_config_free(dc);
		return 1;
	}
	wd_info("listening on %s (state %s, policy %s)", sock, state, policy);
	int oe = wd_sandbox_protect_self();
	if (oe)
		wd_warn(
		    "oom_score_adj -900 refused (%s): the node's OOM killer "
		    "may pick wardend before a tool (give it "
		    "CAP_SYS_RESOURCE, or set OOMScoreAdjust= in its unit)",
		    strerror(-oe));

	for (;;) {
		int sig;
		if (sigwait(&set, &sig))
			continue;
		if (sig == SIGHUP) {
			memset(&err, 0, sizeof(err));
			if (wd_rt_reload(rt, &err))
				wd_warn("policy reload failed, keeping the "
					"old policy: %s",
					err.msg);
			else {
				wd_info("policy reloaded from %s", policy);
				daemon_config_changed(policy, dc);
			}
			continue;
		}
		wd_info("signal %d: stopping", sig);
		break;
	}
	wd_fleet_stop_claims(fleet);
	wd_server_stop(srv);
	/* before the runtime: it stops claiming, writes the ends it has and
	 * marks what is still running interrupted (the runtime's close
	 * leaves those runs to its recovery at the next start) */
	wd_fleet_stop(fleet);
	wd_rt_close(rt);
	/* after the trace store: it feeds the exporter until it closes */
	if (otlp) {
		wd_otlp_flush(otlp, 2000);
		wd_otlp_stop(otlp);
	}
	wd_daemon_config_free(dc);
	return 0;
}
