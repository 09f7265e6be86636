#include "trace/otlp.h"
#include "trace/records.h"
#include "trace/trace_int.h"
#include "common/log.h"

#include <curl/curl.h>
#include <string.h>
#include <time.h>

struct wd_otlp {
	char *url, *service;
	unsigned qmax, bmax, timeout_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv, idle;
	json_t **q;
	size_t head, n;
	bool stop, busy;
	pthread_t th;
	struct wd_otlp_stats st;
};

static json_t *attr(const char *k, json_t *v)
{
	return json_pack("{s:s, s:o}", "key", k, "value", v);
}

static json_t *sval(const char *s)
{
	return json_pack("{s:s}", "stringValue", s);
}

static json_t *ival(int64_t i)
{
	char b[32];
	snprintf(b, sizeof(b), "%lld", (long long)i);
	return json_pack("{s:s}", "intValue", b); /* int64 is a string */
}

static void add_str(json_t *a, const char *k, json_t *rec, const char *f1,
		    const char *f2)
{
	const char *s = json_string_value(json_object_get(rec, f1));
	if (!s && f2)
		s = json_string_value(json_object_get(rec, f2));
	if (s)
		json_array_append_new(a, attr(k, sval(s)));
}

static void add_int(json_t *a, const char *k, json_t *rec, const char *f1,
		    const char *f2)
{
	json_t *v = json_object_get(rec, f1);
	if (!v && f2)
		v = json_object_get(rec, f2);
	if (json_is_number(v))
		json_array_append_new(
		    a, attr(k, ival((int64_t)json_number_value(v))));
}

static void hexid(const char *in, size_t n, char *out)
{
	char h[65];
	wd_sha256_hex(in, strlen(in), h);
	memcpy(out, h, n);
	out[n] = 0;
}

json_t *wd_otlp_span(json_t *rec)
{
	const char *type = json_string_value(json_object_get(rec, "type"));
	const char *run = json_string_value(json_object_get(rec, "run_id"));
	if (!type || !run)
		return NULL;
	const char *op;
	switch (wd_rec_type_of(type)) {
	case WD_REC_MODEL_CALL:
		op = "chat";
		break;
	case WD_REC_TOOL_RESULT:
		op = "execute_tool";
		break;
	case WD_REC_DENIAL:
		op = "denial";
		break;
	default:
		return NULL;
	}
	json_t *a = json_array();
	char name[256], tid[33], sid[17];
	const char *model =
	    json_string_value(json_object_get(rec, "gen_ai.request.model"));
	if (!model)
		model = json_string_value(json_object_get(rec, "model"));
	const char *tool =
	    json_string_value(json_object_get(rec, "gen_ai.tool.name"));
	if (!tool)
		tool = json_string_value(json_object_get(rec, "tool"));
	if (!strcmp(op, "chat"))
		snprintf(name, sizeof(name), "chat %s", model ? model : "");
	else
		snprintf(name, sizeof(name), "%s %s", op, tool ? tool : "");
	if (strcmp(op, "denial"))
		json_array_append_new(a,
				      attr("gen_ai.operation.name", sval(op)));
	add_str(a, "gen_ai.request.model", rec, "gen_ai.request.model",
		"model");
	add_int(a, "gen_ai.usage.input_tokens", rec,
		"gen_ai.usage.input_tokens", "input_tokens");
	add_int(a, "gen_ai.usage.output_tokens", rec,
		"gen_ai.usage.output_tokens", "output_tokens");
	add_str(a, "gen_ai.tool.name", rec, "gen_ai.tool.name", "tool");
	add_str(a, "gen_ai.tool.call.id", rec, "gen_ai.tool.call.id",
		"call_id");
	add_str(a, "gen_ai.agent.name", rec, "agent", NULL);
	add_str(a, "warden.run_id", rec, "run_id", NULL);
	add_int(a, "warden.step", rec, "step", NULL);
	add_int(a, "warden.seq", rec, "seq", NULL);
	add_str(a, "warden.status", rec, "status", NULL);
	const char *k;
	json_t *v;
	json_object_foreach(rec, k, v)
	{
		if (wd_trace_is_ref_key(k) || !strcmp(k, "prompt_hash") ||
		    !strcmp(k, "result_hash")) {
			char key[128];
			snprintf(key, sizeof(key), "warden.%s", k);
			add_str(a, key, rec, k, NULL);
		}
	}
	uint64_t end_ns =
	    wd_trace_parse_ts(json_string_value(json_object_get(rec, "ts"))) *
	    1000;
	if (!end_ns)
		end_ns = wd_wall_ns();
	json_t *lat = json_object_get(rec, "latency_ms");
	uint64_t dur =
	    json_is_number(lat) ? (uint64_t)(json_number_value(lat) * 1e6) : 0;
	uint64_t start_ns = dur < end_ns ? end_ns - dur : end_ns;
	hexid(run, 32, tid);
	char sk[300];
	json_t *seq = json_object_get(rec, "seq");
	snprintf(sk, sizeof(sk), "%s/%lld/%s", run,
		 (long long)json_integer_value(seq), type);
	hexid(sk, 16, sid);
	char s0[32], s1[32];
	snprintf(s0, sizeof(s0), "%llu", (unsigned long long)start_ns);
	snprintf(s1, sizeof(s1), "%llu", (unsigned long long)end_ns);
	const char *status = json_string_value(json_object_get(rec, "status"));
	bool error = !strcmp(op, "denial") ||
		     (status && strcmp(status, "ok") && strcmp(op, "chat"));
	return json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:o, s:{s:i}}",
			 "traceId", tid, "spanId", sid, "name", name, "kind",
			 !strcmp(op, "chat") ? 3 : 1, "startTimeUnixNano", s0,
			 "endTimeUnixNano", s1, "attributes", a, "status",
			 "code", error ? 2 : 0);
}

static size_t sink(char *p, size_t sz, size_t n, void *u)
{
	return sz * n;
}

static int post(struct wd_otlp *o, json_t *spans)
{
	json_t *body = json_pack(
	    "{s:[{s:{s:[{s:s, s:{s:s}}]}, s:[{s:{s:s}, s:o}]}]}",
	    "resourceSpans", "resource", "attributes", "key", "service.name",
	    "value", "stringValue", o->service, "scopeSpans", "scope", "name",
	    "warden.trace", "spans", spans);
	char *txt = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	CURL *c = curl_easy_init();
	if (!c || !txt) {
		free(txt);
		return -ENOMEM;
	}
	struct curl_slist *h =
	    curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, o->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, txt);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	CURLcode rc = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	free(txt);
	if (rc != CURLE_OK)
		return -EIO;
	return code >= 200 && code < 300 ? 0 : -EPROTO;
}

static void *sender(void *arg)
{
	struct wd_otlp *o = arg;
	pthread_mutex_lock(&o->mu);
	for (;;) {
		while (!o->n && !o->stop)
			pthread_cond_wait(&o->cv, &o->mu);
		if (o->stop) {
			/* shutting down: what is queued is dropped, not sent;
			 * a dead collector must not hold the daemon up */
			while (o->n) {
				json_decref(o->q[o->head]);
				o->head = (o->head + 1) % o->qmax;
				o->n--;
				o->st.dropped++;
			}
			break;
		}
		json_t *spans = json_array();
		size_t took = 0;
		while (o->n && took < o->bmax) {
			json_t *rec = o->q[o->head];
			o->head = (o->head + 1) % o->qmax;
			o->n--;
			took++;
			json_t *s = wd_otlp_span(rec);
			json_decref(rec);
			if (s)
				json_array_append_new(spans, s);
		}
		o->busy = true;
		pthread_mutex_unlock(&o->mu);
		size_t ns = json_array_size(spans);
		int r = ns ? post(o, spans) : 0;
		if (!ns)
			json_decref(spans);
		pthread_mutex_lock(&o->mu);
		o->busy = false;
		if (r < 0)
			o->st.failed += ns;
		else
			o->st.sent += ns;
		pthread_cond_broadcast(&o->idle);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int wd_otlp_start(const struct wd_otlp_opts *opt, struct wd_otlp **out,
		  struct wd_err *err)
{
	if (!opt->endpoint || strncmp(opt->endpoint, "http", 4))
		return wd_err_set(err, -EINVAL,
				  "otlp endpoint must be an http(s) URL");
	pthread_once(&curl_once, curl_init);
	struct wd_otlp *o = wd_calloc(1, sizeof(*o));
	size_t l = strlen(opt->endpoint);
	o->url = strstr(opt->endpoint, "/v1/traces")
		     ? wd_strdup(opt->endpoint)
		     : wd_asprintf(
			   "%.*s/v1/traces",
			   (int)(l && opt->endpoint[l - 1] == '/' ? l - 1 : l),
			   opt->endpoint);
	o->service =
	    wd_strdup(opt->service_name ? opt->service_name : "warden");
	o->qmax = opt->queue_max ? opt->queue_max : 4096;
	o->bmax = opt->batch_max ? opt->batch_max : 256;
	o->timeout_ms = opt->timeout_ms ? opt->timeout_ms : 2000;
	o->q = wd_calloc(o->qmax, sizeof(*o->q));
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	pthread_cond_init(&o->idle, NULL);
	int r = -pthread_create(&o->th, NULL, sender, o);
	if (r) {
		free(o->q);
		free(o->url);
		free(o->service);
		free(o);
		return wd_err_set(err, r, "otlp sender thread");
	}
	*out = o;
	return 0;
}

void wd_otlp_feed(struct wd_otlp *o, json_t *rec)
{
	const char *type = json_string_value(json_object_get(rec, "type"));
	enum wd_rec_type rt = wd_rec_type_of(type);
	if (!o || !type ||
	    (rt != WD_REC_MODEL_CALL && rt != WD_REC_TOOL_RESULT &&
	     rt != WD_REC_DENIAL))
		return;
	json_t *c = json_deep_copy(rec);
	pthread_mutex_lock(&o->mu);
	if (o->n >= o->qmax || o->stop) {
		o->st.dropped++;
		pthread_mutex_unlock(&o->mu);
		json_decref(c);
		return;
	}
	o->q[(o->head + o->n) % o->qmax] = c;
	o->n++;
	o->st.queued++;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

int wd_otlp_flush(struct wd_otlp *o, unsigned timeout_ms)
{
	uint64_t end = wd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	pthread_mutex_lock(&o->mu);
	while ((o->n || o->busy) && wd_now_ns() < end) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&o->idle, &o->mu, &ts);
	}
	bool done = !o->n && !o->busy;
	pthread_mutex_unlock(&o->mu);
	return done ? 0 : -ETIMEDOUT;
}

void wd_otlp_stats(struct wd_otlp *o, struct wd_otlp_stats *s)
{
	pthread_mutex_lock(&o->mu);
	*s = o->st;
	pthread_mutex_unlock(&o->mu);
}

void wd_otlp_stop(struct wd_otlp *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->mu);
	o->stop = true;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	pthread_join(o->th, NULL);
	free(o->q);
	free(o->url);
	free(o->service);
	pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cv);
	pthread_cond_destroy(&o->idle);
	free(o);
}
