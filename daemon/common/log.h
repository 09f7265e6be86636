/* The one logger. Messages go to stderr, as text ("warden: level: msg") or,
 * with wd_log_set_json(true), one JSON object per line for the node's log
 * pipeline. Prefix messages with the object they concern, libbpf style:
 *     wd_warn("cgroup '%s': cannot set memory.max", path);
 */
#ifndef WD_LOG_H
#define WD_LOG_H

#include <stdbool.h>

enum wd_log_level { WD_LOG_ERROR, WD_LOG_WARN, WD_LOG_INFO, WD_LOG_DEBUG };

void wd_log_set_level(enum wd_log_level lvl);
void wd_log_set_json(bool json);
void wd_log_set_ident(const char *ident);
/* Route libbpf's print callback into this logger. */
void wd_log_route_libbpf(void);

void wd_log(enum wd_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends ": strerror(-err)". `err` is a -errno value. */
void wd_log_errno(enum wd_log_level lvl, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define wd_error(...) wd_log(WD_LOG_ERROR, __VA_ARGS__)
#define wd_warn(...)  wd_log(WD_LOG_WARN, __VA_ARGS__)
#define wd_info(...)  wd_log(WD_LOG_INFO, __VA_ARGS__)
#define wd_debug(...) wd_log(WD_LOG_DEBUG, __VA_ARGS__)

#endif
