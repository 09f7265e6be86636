#include "common/log.h"
#include "common/util.h"

#include <bpf/libbpf.h>
#include <jansson.h>
#include <stdarg.h>
#include <string.h>

static enum wd_log_level g_level = WD_LOG_WARN;
static bool g_json;
static const char *g_ident = "warden";

static const char *const names[] = {"error", "warn", "info", "debug"};

void wd_log_set_level(enum wd_log_level lvl)
{
	g_level = lvl;
}
void wd_log_set_json(bool json)
{
	g_json = json;
}
void wd_log_set_ident(const char *ident)
{
	g_ident = ident;
}

static void emit(enum wd_log_level lvl, const char *msg)
{
	if (lvl > g_level)
		return;
	if (g_json) {
		char ts[40];
		wd_iso8601(wd_wall_ns(), ts, sizeof(ts));
		json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "ts", ts, "level",
				      names[lvl], "ident", g_ident, "msg", msg);
		char *s = json_dumps(o, JSON_COMPACT);
		fprintf(stderr, "%s\n", s);
		free(s);
		json_decref(o);
	} else {
		fprintf(stderr, "%s: %s: %s\n", g_ident, names[lvl], msg);
	}
}

static void vlog(enum wd_log_level lvl, int err, const char *fmt, va_list ap)
{
	char buf[2048];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n < 0)
		return;
	if (err && (size_t)n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, ": %s", strerror(-err));
	emit(lvl, buf);
}

void wd_log(enum wd_log_level lvl, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(lvl, 0, fmt, ap);
	va_end(ap);
}

void wd_log_errno(enum wd_log_level lvl, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(lvl, err, fmt, ap);
	va_end(ap);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	enum wd_log_level l = level == LIBBPF_WARN   ? WD_LOG_WARN
			      : level == LIBBPF_INFO ? WD_LOG_INFO
						     : WD_LOG_DEBUG;
	char buf[2048];
	if (l > g_level)
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	size_t n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = 0;
	/* libbpf warns loudly while we probe features; probes report
	 * their own outcome, so its chatter is debug-level for us. */
	emit(l == WD_LOG_WARN ? WD_LOG_DEBUG : l, buf);
	return 0;
}

void wd_log_route_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
