/* The OTLP exporter fed live by the store: spans reach a loopback collector
 * (python3 http.server, started here) with the GenAI attribute names; and
 * with a collector that never answers, appends do not block (the bounded
 * queue drops and counts instead). */
#include "t.h"
#include "test_trace_util.h"
#include "trace/otlp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

static const char collector[] =
    "import http.server, sys\n"
    "out = open(sys.argv[1], 'ab')\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_POST(self):\n"
    "        body = self.rfile.read(int(self.headers['Content-Length']))\n"
    "        out.write(body + b'\\n'); out.flush()\n"
    "        self.send_response(200); self.end_headers()\n"
    "    def log_message(self, *a): pass\n"
    "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
    "print(s.server_address[1], flush=True)\n"
    "s.serve_forever()\n";

static pid_t start_collector(const char *outfile, int *port)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execlp("python3", "python3", "-c", collector, outfile,
		       (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[32] = {0};
	size_t n = 0;
	while (n < sizeof(buf) - 1 && !memchr(buf, '\n', n)) {
		ssize_t r = read(p[0], buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			break;
		n += r;
	}
	close(p[0]);
	*port = memchr(buf, '\n', n) ? atoi(buf) : 0;
	return pid;
}

static void test_live(void)
{
	char *dir = tt_tmpdir();
	char *out = wd_asprintf("%s/collected", dir);
	int port;
	pid_t col = start_collector(out, &port);
	if (col < 0 || !port) {
		T_SKIP("trace-otlp-live", "cannot start python3 collector");
		return;
	}
	struct wd_err err = {0};
	char *url = wd_asprintf("http://127.0.0.1:%d", port);
	struct wd_otlp *o;
	int r =
	    wd_otlp_start(&(struct wd_otlp_opts){.endpoint = url}, &o, &err);
	struct wd_trace *t;
	if (r == 0)
		r = wd_trace_open(dir, &(struct wd_trace_opts){.otlp = o}, &t,
				  &err);
	if (r < 0) {
		T_FAIL("trace-otlp-live", "%s", err.msg);
		goto out;
	}
	json_t *m = tt_rec("run-o", 1, "model_call");
	json_object_set_new(m, "gen_ai.request.model", json_string("m-x"));
	json_object_set_new(m, "gen_ai.usage.input_tokens", json_integer(11));
	json_object_set_new(m, "gen_ai.usage.output_tokens", json_integer(5));
	json_object_set_new(m, "latency_ms", json_integer(30));
	tt_append(t, m, false);
	json_t *tr = tt_rec("run-o", 1, "tool_result");
	json_object_set_new(tr, "gen_ai.tool.name", json_string("grep_docs"));
	json_object_set_new(tr, "gen_ai.tool.call.id", json_string("call-9"));
	json_object_set_new(tr, "status", json_string("ok"));
	tt_append(t, tr, false);
	tt_append(t, tt_rec("run-o", 2, "run_end"), false);
	r = wd_otlp_flush(o, 10000);
	struct wd_otlp_stats st;
	wd_otlp_stats(o, &st);
	T_OK(r == 0 && st.sent == 2 && st.failed == 0, "trace-otlp-live-sent",
	     "flush %d sent %llu failed %llu", r, (unsigned long long)st.sent,
	     (unsigned long long)st.failed);
	wd_trace_close(t);
	wd_otlp_stop(o);
	T_OK(tt_file_has(out, "\"gen_ai.operation.name\"") &&
		 tt_file_has(out, "\"chat\"") &&
		 tt_file_has(out, "\"execute_tool\"") &&
		 tt_file_has(out, "\"gen_ai.usage.input_tokens\"") &&
		 tt_file_has(out, "\"call-9\"") && tt_file_has(out, "\"m-x\""),
	     "trace-otlp-live-genai-attrs", "collector did not get the spans");
out:
	kill(col, SIGTERM);
	waitpid(col, NULL, 0);
	free(url);
	free(out);
	wd_rm_rf(dir);
	free(dir);
}

static void test_never_blocks(void)
{
	/* a collector that accepts connections into the backlog and never
	 * answers */
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(s, 16) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &al) < 0) {
		T_SKIP("trace-otlp-never-blocks", "loopback socket: %s",
		       strerror(errno));
		return;
	}
	char *dir = tt_tmpdir();
	char *url =
	    wd_asprintf("http://127.0.0.1:%d/v1/traces", ntohs(a.sin_port));
	struct wd_err err = {0};
	struct wd_otlp *o;
	struct wd_trace *t;
	wd_otlp_start(&(struct wd_otlp_opts){.endpoint = url,
					     .queue_max = 64,
					     .batch_max = 8,
					     .timeout_ms = 3000},
		      &o, &err);
	wd_trace_open(dir, &(struct wd_trace_opts){.otlp = o}, &t, &err);
	uint64_t worst = 0;
	for (int i = 0; i < 3000; i++) {
		json_t *m = tt_rec("run-b", i, "model_call");
		json_object_set_new(m, "gen_ai.request.model",
				    json_string("m"));
		uint64_t t0 = wd_now_ns();
		tt_append(t, m, false);
		uint64_t d = wd_now_ns() - t0;
		worst = d > worst ? d : worst;
	}
	struct wd_otlp_stats st;
	wd_otlp_stats(o, &st);
	T_OK(st.dropped > 2000 && st.sent == 0, "trace-otlp-bounded-queue",
	     "dropped %llu sent %llu", (unsigned long long)st.dropped,
	     (unsigned long long)st.sent);
	T_OK(worst < 500000000ull, "trace-otlp-never-blocks",
	     "an append took %.1f ms with a hung collector", worst / 1e6);
	wd_trace_close(t);
	uint64_t t0 = wd_now_ns();
	wd_otlp_stop(o);
	T_OK(wd_now_ns() - t0 < 10000000000ull, "trace-otlp-stop-bounded",
	     "stop took %.1f s", (wd_now_ns() - t0) / 1e9);
	printf("# otlp stop with a hung collector: %.1f ms; worst append "
	       "%.3f ms\n",
	       (wd_now_ns() - t0) / 1e6, worst / 1e6);
	close(s);
	free(url);
	wd_rm_rf(dir);
	free(dir);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_live();
	test_never_blocks();
	return T_DONE();
}
