/* Route circuit breakers (breaker.c), used by the gateway only. */
#ifndef WD_GATEWAY_BREAKER_H
#define WD_GATEWAY_BREAKER_H

#include <jansson.h>
#include <stdbool.h>

#include "gateway/gateway.h"

struct wd_gateway_config;
struct wd_route;
struct wd_breakers;

/* cfg must outlive the breakers (the gateway owns both) */
struct wd_breakers *wd_breakers_new(const struct wd_gateway_config *cfg);
void wd_breakers_free(struct wd_breakers *b); /* NULL ok */
/* May this call try the route? false (with why) while its breaker is
 * open; `last`: the call's last route and nothing tried yet (tried
 * anyway: trying beats failing on old evidence). */
bool wd_breaker_allow(struct wd_breakers *b, const struct wd_route *route,
		      bool last, char *why, size_t n);
/* The route answered (ok) or failed this call with class ec. */
void wd_breaker_note(struct wd_breakers *b, const struct wd_route *route,
		     bool ok, enum wd_err_class ec, const char *error);
/* [{provider, model, state, failures, opened, open_ms_left, last_error}] */
json_t *wd_breakers_json(struct wd_breakers *b);

#endif
