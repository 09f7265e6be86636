/* Model calls per second through the gateway, and the gateway's own cost
 * per call. Prints figures; asserts nothing.
 *
 * Servers (both on loopback, started here):
 *   - tests/fakemodel/fakemodel.py (python, the test fake): realistic wire
 *     format, but python's http.server is itself the bottleneck;
 *   - a minimal C HTTP/1.1 keep-alive server in this file answering every
 *     POST with a canned OpenAI/Anthropic response: what the gateway can do
 *     when the model side is not the limit.
 * Peer: the same request body POSTed with a bare reused libcurl handle (no
 * JSON build, no parse, no routing): gateway overhead = gateway - peer.
 * Also the script provider (no network): the routing + script cost alone. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "bench/bench.h"
#include "gateway/gateway.h"
#include "policy/gateway_config.h"

/* ---- minimal C server ------------------------------------------------------
 */

static const char OPENAI_BODY[] =
    "{\"id\":\"chatcmpl-b\",\"object\":\"chat.completion\",\"created\":1,"
    "\"model\":\"bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
    "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
    "\"type\":\"function\",\"function\":{\"name\":\"run_python\","
    "\"arguments\":\"{\\\"code\\\":\\\"print(1)\\\"}\"}}]},\"finish_reason\":"
    "\"tool_calls\"}],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":"
    "20,\"total_tokens\":140,\"prompt_tokens_details\":{\"cached_tokens\":0}"
    "}}";
static const char ANTHROPIC_BODY[] =
    "{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
    "\"bench\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\","
    "\"name\":\"run_python\",\"input\":{\"code\":\"print(1)\"}}],"
    "\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"usage\":{"
    "\"input_tokens\":120,\"cache_read_input_tokens\":0,\"output_tokens\":"
    "20}}";

static void *conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[65536];
	size_t have = 0;

	for (;;) {
		char *hend;
		ssize_t n;
		while (!(hend = memmem(buf, have, "\r\n\r\n", 4))) {
			if (have == sizeof(buf))
				goto out;
			n = read(fd, buf + have, sizeof(buf) - have);
			if (n <= 0)
				goto out;
			have += (size_t)n;
		}
		size_t hlen = (size_t)(hend + 4 - buf), clen = 0;
		char *cl = memmem(buf, hlen, "Content-Length:", 15);
		if (!cl)
			cl = memmem(buf, hlen, "content-length:", 15);
		if (cl)
			clen = strtoul(cl + 15, NULL, 10);
		bool anth = memmem(buf, hlen, "/v1/messages", 12) != NULL;
		while (have < hlen + clen) {
			if (hlen + clen > sizeof(buf))
				goto out;
			n = read(fd, buf + have, sizeof(buf) - have);
			if (n <= 0)
				goto out;
			have += (size_t)n;
		}
		const char *body = anth ? ANTHROPIC_BODY : OPENAI_BODY;
		char resp[2048];
		int rl = snprintf(resp, sizeof(resp),
				  "HTTP/1.1 200 OK\r\nContent-Type: "
				  "application/json\r\nContent-Length: "
				  "%zu\r\n\r\n%s",
				  strlen(body), body);
		if (wd_write_all(fd, resp, (size_t)rl))
			goto out;
		memmove(buf, buf + hlen + clen, have - hlen - clen);
		have -= hlen + clen;
	}
out:
	close(fd);
	return NULL;
}

static long n_accepts; /* connections opened: keep-alive check */

static void *accept_main(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (;;) {
		int fd = accept(lfd, NULL, NULL), one = 1;
		pthread_t t;
		if (fd < 0)
			return NULL;
		__atomic_add_fetch(&n_accepts, 1, __ATOMIC_RELAXED);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_create(&t, NULL, conn_main, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

static int c_server_start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pthread_t t;

	if (lfd < 0 || bind(lfd, (void *)&a, sizeof(a)) || listen(lfd, 256) ||
	    getsockname(lfd, (void *)&a, &al))
		return -1;
	pthread_create(&t, NULL, accept_main, (void *)(intptr_t)lfd);
	pthread_detach(t);
	return ntohs(a.sin_port);
}

/* ---- python fake --------------------------------------------------------- */

static pid_t py_pid = -1;

static int py_start(void)
{
	char pf[] = "/tmp/wd-bench-fake.XXXXXX";
	int fd = mkstemp(pf);

	if (fd < 0)
		return -1;
	close(fd);
	unlink(pf);
	py_pid = fork();
	if (py_pid == 0) {
		int dn = open("/dev/null", O_WRONLY);
		dup2(dn, 1);
		execlp("python3", "python3", "tests/fakemodel/fakemodel.py",
		       "--port", "0", "--port-file", pf, NULL);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		char *t = NULL;
		size_t n;
		if (wd_read_file(pf, &t, &n) == 0) {
			int p = atoi(t);
			free(t);
			unlink(pf);
			return p;
		}
		usleep(50000);
	}
	return -1;
}

/* ---- load ------------------------------------------------------------------
 */

static struct wd_gateway *gw;
static const char *g_model;
static double g_secs;
static long g_fail;

static struct wd_msg msgs[] = {
    {.role = WD_ROLE_SYSTEM, .text = "You are an analyst."},
    {.role = WD_ROLE_USER,
     .text = "Calculate the average of this list of numbers and tell me if "
	     "it's above 50: 45, 80, 62, 63"}};
static struct wd_tool_schema tools[] = {
    {.name = "run_python",
     .description = "Run Python code, return its output.",
     .parameters_json = "{\"type\":\"object\",\"required\":[\"code\"],"
			"\"properties\":{\"code\":{\"type\":\"string\"}}}"}};

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double g_cpu_us; /* client CPU per call, last 1-thread run */

static void *load_main(void *arg)
{
	long *count = arg;
	uint64_t end = wd_now_ns() + (uint64_t)(g_secs * 1e9);
	uint64_t c0 = thread_cpu_ns();

	while (wd_now_ns() < end) {
		struct wd_complete_req req = {.model = g_model,
					      .msgs = msgs,
					      .n_msgs = 2,
					      .tools = tools,
					      .n_tools = 1,
					      .temperature = -1};
		struct wd_complete_resp resp;
		struct wd_err err;
		if (wd_gateway_complete(gw, &req, &resp, &err))
			__atomic_add_fetch(&g_fail, 1, __ATOMIC_RELAXED);
		else
			(*count)++;
		wd_complete_resp_free(&resp);
	}
	if (*count)
		g_cpu_us = (thread_cpu_ns() - c0) / 1e3 / (double)*count;
	return NULL;
}

static double run_load(const char *model, int threads, double secs)
{
	pthread_t th[64];
	long counts[64] = {0}, total = 0;
	uint64_t t0 = wd_now_ns();

	g_model = model;
	g_secs = secs;
	g_fail = 0;
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, load_main, &counts[i]);
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		total += counts[i];
	}
	return total / ((wd_now_ns() - t0) / 1e9);
}

static size_t discard(char *p, size_t s, size_t n, void *ud)
{
	return s * n;
}

/* Peer: the same body over a bare reused curl handle. */
static double raw_curl_us(int port, int n, double *cpu_us)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hd = NULL;
	char url[128];
	struct wd_complete_req req = {.model = "b",
				      .msgs = msgs,
				      .n_msgs = 2,
				      .tools = tools,
				      .n_tools = 1,
				      .temperature = -1};
	struct wd_complete_resp resp;
	struct wd_err err;
	uint64_t t0;

	/* take the body the gateway really sends */
	wd_gateway_complete(gw, &req, &resp, &err);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/chat/completions",
		 port);
	hd = curl_slist_append(hd, "Content-Type: application/json");
	hd = curl_slist_append(hd, "Authorization: Bearer bench-key");
	hd = curl_slist_append(hd, "Expect:");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, resp.raw_request);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)strlen(resp.raw_request));
	for (int i = 0; i < 100; i++) /* warm */
		curl_easy_perform(h);
	t0 = wd_now_ns();
	uint64_t c0 = thread_cpu_ns();
	for (int i = 0; i < n; i++)
		curl_easy_perform(h);
	double us = (wd_now_ns() - t0) / 1e3 / n;
	*cpu_us = (thread_cpu_ns() - c0) / 1e3 / n;
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	wd_complete_resp_free(&resp);
	return us;
}

int main(void)
{
	struct wd_gateway_config *cfg;
	struct wd_err err = {0};
	int cport, pport;
	char *yaml;

	signal(SIGPIPE, SIG_IGN);
	setenv("WD_BENCH_KEY", "bench-key", 1);
	cport = c_server_start();
	pport = py_start();
	if (cport < 0) {
		printf("bench_gateway: cannot start the C server\n");
		return 1;
	}
	yaml = wd_asprintf(
	    "providers:\n"
	    "  c: {kind: openai, base_url: 'http://127.0.0.1:%d', api_key_env: "
	    "WD_BENCH_KEY}\n"
	    "  ca: {kind: anthropic, base_url: 'http://127.0.0.1:%d', "
	    "api_key_env: WD_BENCH_KEY}\n"
	    "  py: {kind: openai, base_url: 'http://127.0.0.1:%d', "
	    "api_key_env: "
	    "WD_BENCH_KEY}\n"
	    "  s: {kind: script}\n"
	    "models:\n"
	    "  b: [{provider: c, model: bench}]\n"
	    "  ba: [{provider: ca, model: bench}]\n"
	    "  p: [{provider: py, model: bench}]\n"
	    "  s: [{provider: s, model: models/demo.script}]\n"
	    "prices:\n  bench: {input: 3, output: 15}\n",
	    cport, cport, pport > 0 ? pport : 1);
	if (wd_gateway_config_load_str("bench.yaml", "policy", yaml,
				       strlen(yaml), &cfg, &err)) {
		printf("bench_gateway: %s\n", err.msg);
		return 1;
	}
	free(yaml);
	gw = wd_gateway_new(cfg, &err);

	printf("model calls/s through the gateway (goal >= 500/s); each call "
	       "= build JSON + POST + parse + cost\n");
	run_load("b", 1, 0.3); /* warm up connections */
	double c1 = run_load("b", 1, 2), c1cpu = g_cpu_us,
	       c8 = run_load("b", 8, 2);
	double ca8 = run_load("ba", 8, 2);
	long calls_c = (long)(c1 * 2 + c8 * 2 + ca8 * 2);
	printf("  C loopback server, openai wire:    %8.0f/s (1 thread)  "
	       "%8.0f/s (8 threads)%s\n",
	       c1, c8, g_fail ? "  (FAILURES)" : "");
	printf("  C loopback server, anthropic wire: %8.0f/s (8 threads)\n",
	       ca8);
	/* the rate moves with the machine's load, printed beside it */
	bench_held("gateway calls/s (C server, 8 threads)", c8, 25000, 0, "/s",
		   NULL);
	printf("  keep-alive: ~%ld calls to the C server over %ld TCP "
	       "connections\n",
	       calls_c, __atomic_load_n(&n_accepts, __ATOMIC_RELAXED));
	if (pport > 0) {
		run_load("p", 1, 0.3);
		double p1 = run_load("p", 1, 2), p8 = run_load("p", 8, 2);
		printf(
		    "  python fakemodel.py, openai wire:  %8.0f/s (1 thread)  "
		    "%8.0f/s (8 threads)  <- the python server is the "
		    "bottleneck\n",
		    p1, p8);
	} else {
		printf(
		    "  python fakemodel.py: not started (python3 missing?)\n");
	}
	double s1 = run_load("s", 1, 1);
	printf("  script provider (no network):      %8.0f/s (1 thread), "
	       "%.1f us CPU per call\n",
	       s1, g_cpu_us);

	double rawcpu, raw = raw_curl_us(cport, 5000, &rawcpu);
	double gwus = 1e6 / c1;
	printf("gateway overhead per call (1 thread, C server), wall: gateway "
	       "%.1f us vs bare reused libcurl POST of the same body %.1f us "
	       "(peer), ratio %.2fx\n",
	       gwus, raw, gwus / raw);
	printf("gateway overhead per call, client CPU (robust on a loaded "
	       "machine): gateway %.1f us vs bare libcurl %.1f us (peer): "
	       "overhead %.1f us, ratio %.2fx\n",
	       c1cpu, rawcpu, c1cpu - rawcpu, c1cpu / rawcpu);

	wd_gateway_unref(gw);
	if (py_pid > 0) {
		kill(py_pid, SIGTERM);
		waitpid(py_pid, NULL, 0);
	}
	return 0;
}
