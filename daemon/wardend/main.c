/* wardend: the per-node daemon. Loads policy/, serves the API on a unix
 * socket, runs agents on a worker pool; SIGHUP reloads the policy (a bad
 * file keeps the old one), SIGTERM/SIGINT stop it. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "common/log.h"
#include "runtime/runtime.h"
#include "wardend/server.h"

#define DEFAULT_STATE  "/var/lib/warden"
#define DEFAULT_POLICY "/etc/warden/policy"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: wardend [--state DIR] [--policy DIR] [--socket PATH] "
		"[--metrics ADDR:PORT]\n"
		"               [--workers N] [--approval-ttl SECONDS] "
		"[--webhook URL] [--warm-pool N] [--log-json] [-v]\n"
		"  --warm-pool N   keep N tier-3 sandboxes ready per tool call "
		"shape (0: cold starts)\n"
		"  --state DIR     trace store and run state (default %s)\n"
		"  --policy DIR    tools/, agents/, users.yaml, gateway.yaml "
		"(default %s)\n"
		"  --socket PATH   API socket (default $WARDEN_SOCKET or %s)\n"
		"  --metrics ADDR  also serve /metrics over TCP (e.g. "
		"127.0.0.1:9464)\n"
		"SIGHUP reloads the policy; SIGTERM stops the daemon.\n",
		DEFAULT_STATE, DEFAULT_POLICY, "/run/warden/wardend.sock");
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
	    {"log-json", no_argument, 0, 'j'},
	    {"warm-pool", required_argument, 0, 'P'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	const char *state = DEFAULT_STATE, *policy = DEFAULT_POLICY;
	const char *sock = getenv("WARDEN_SOCKET"), *metrics = NULL;
	struct wd_rt_opts ro = {0};
	struct wd_alert_config ac = {0}; /* defaults: 60 s / 1 h, x5, min 20 */
	ro.alert = &ac;
	int c;
	wd_log_set_ident("wardend");
	wd_log_set_level(WD_LOG_INFO);
	while ((c = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			state = optarg;
			break;
		case 'p':
			policy = optarg;
			break;
		case 'S':
			sock = optarg;
			break;
		case 'm':
			metrics = optarg;
			break;
		case 'w':
			ro.workers = atoi(optarg);
			break;
		case 't':
			ro.approval_ttl_s = (unsigned)atoi(optarg);
			break;
		case 'A':
			ac.webhook_url = optarg;
			break;
		case 'W':
			ro.webhook_url = optarg;
			break;
		case 'j':
			wd_log_set_json(true);
			break;
		case 'P':
			ro.warm_pool = atoi(optarg);
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
	if (!sock || !*sock)
		sock = "/run/warden/wardend.sock";
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
	ro.state_dir = state;
	ro.policy_dir = policy;
	if (wd_rt_open(&ro, &rt, &err)) {
		wd_error("%s", err.msg);
		return 1;
	}
	struct wd_server *srv = NULL;
	if (wd_server_start(rt, sock, &srv, &err)) {
		wd_error("%s", err.msg);
		wd_rt_close(rt);
		return 1;
	}
	if (metrics && wd_server_start_metrics(srv, metrics, &err))
		wd_warn("metrics: %s", err.msg);
	wd_info("listening on %s (state %s, policy %s)", sock, state, policy);

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
			else
				wd_info("policy reloaded from %s", policy);
			continue;
		}
		wd_info("signal %d: stopping", sig);
		break;
	}
	wd_server_stop(srv);
	wd_rt_close(rt);
	return 0;
}
