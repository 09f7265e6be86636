/* A small HTTP/JSON client for wardend's unix socket (libcurl with
 * CURLOPT_UNIX_SOCKET_PATH), shared by the CLI verbs. The daemon learns who
 * is calling from the socket (SO_PEERCRED); the client never sends a user.
 */
#ifndef WD_API_CLIENT_H
#define WD_API_CLIENT_H

#include <jansson.h>
#include <stdbool.h>

#include "common/util.h"

/* $WARDEN_TIMEOUT, whole seconds 1..86400 when set: 0, or -EINVAL with
 * the message (wd_api_call and wd_api_stream refuse to run with it). */
int wd_api_timeout_check(struct wd_err *err);
/* One request. `body` may be NULL (GET) and is sent as application/json.
 * On a response (any status) returns 0 with *status set and *resp the
 * parsed JSON body (NULL if the body was not JSON). -ECONNREFUSED/-ENOENT
 * when the daemon is not there, other -errno on transport errors; err says
 * which socket. A response that says it is partial (a fleet node whose
 * database is away: the Warden-Unavailable header) returns 0 with what it
 * lacks in err->msg (err->code stays 0). */
int wd_api_call(const char *socket, const char *method, const char *path,
		const json_t *body, long *status, json_t **resp,
		struct wd_err *err);

/* Streaming GET of JSON lines: calls `line` for each parsed line until the
 * server ends the response or `line` returns non-zero (which is returned).
 * 0 at the end of a 2xx stream; -EPROTO with the server's error message for
 * a non-2xx status. */
int wd_api_stream(const char *socket, const char *path,
		  int (*line)(void *arg, json_t *obj), void *arg,
		  struct wd_err *err);

/* The error message of an error response ({"error": "..."}), or a
 * generic one. */
const char *wd_api_error_text(const json_t *resp, long status);

#endif
