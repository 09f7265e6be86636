/* Circuit breakers of the gateway's routes (gateway.h, README "Model
 * gateway"): one per provider + model, shared by every alias naming it.
 * A route that failed breaker_failures calls in a row (or once with a
 * quota or auth error: those do not heal by themselves) is skipped for
 * breaker_open_ms; then one call may try it (half-open) and decides. */
#include <pthread.h>
#include <string.h>

#include "gateway/breaker.h"
#include "gateway/provider.h"
#include "policy/gateway_config.h"

#define MAX_BREAKERS 256

struct breaker {
	int provider;
	char model[128];
	uint32_t fails;		/* calls in a row the route failed */
	uint64_t open_until_ns; /* 0 = closed */
	bool trial;		/* a half-open trial call is in flight */
	uint64_t opened;	/* times it opened (metrics) */
	char last_error[256];
};

struct wd_breakers {
	const struct wd_gateway_config *cfg;
	pthread_mutex_t brk_lock;
	struct breaker brk[MAX_BREAKERS];
	int n_brk;
};

struct wd_breakers *wd_breakers_new(const struct wd_gateway_config *cfg)
{
	struct wd_breakers *b = wd_calloc(1, sizeof(*b));
	b->cfg = cfg;
	pthread_mutex_init(&b->brk_lock, NULL);
	return b;
}

void wd_breakers_free(struct wd_breakers *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->brk_lock);
	free(b);
}

static const char *basename_of(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static struct breaker *brk_find(struct wd_breakers *bs,
				const struct wd_route *route)
{
	for (int i = 0; i < bs->n_brk; i++)
		if (bs->brk[i].provider == route->provider &&
		    !strcmp(bs->brk[i].model, route->model))
			return &bs->brk[i];
	if (bs->n_brk == MAX_BREAKERS)
		return NULL; /* only direct provider/model routes get here */
	struct breaker *b = &bs->brk[bs->n_brk++];
	memset(b, 0, sizeof(*b));
	b->provider = route->provider;
	wd_strlcpy(b->model, route->model, sizeof(b->model));
	return b;
}

/* May this call try the route? false (with why) while its breaker is
 * open; after open_ms one call is let through (half-open). `last` asks
 * for the last route of a call that tried nothing yet: it is tried anyway
 * (trying is better than failing on old evidence). */
bool wd_breaker_allow(struct wd_breakers *bs, const struct wd_route *route,
		      bool last, char *why, size_t n)
{
	const struct wd_retry_cfg *rc = &bs->cfg->retry;
	bool ok = true;

	if (!rc->breaker_failures)
		return true;
	pthread_mutex_lock(&bs->brk_lock);
	struct breaker *b = brk_find(bs, route);
	uint64_t now = wd_now_ns();
	if (b && b->open_until_ns) {
		if (now < b->open_until_ns || b->trial) {
			ok = last;
			snprintf(why, n,
				 "circuit open after %u failed calls in a row "
				 "(%.1f s left); last error: %s",
				 b->fails,
				 now < b->open_until_ns
				     ? (double)(b->open_until_ns - now) / 1e9
				     : 0.0,
				 b->last_error);
		} else {
			b->trial = true; /* half-open: this call decides */
		}
	}
	pthread_mutex_unlock(&bs->brk_lock);
	return ok;
}

/* The route answered (ok) or failed this call with class ec. An invalid
 * request or a context overflow says nothing about the route's health;
 * a quota or an auth failure will not heal by itself, so it opens the
 * breaker at once. */
void wd_breaker_note(struct wd_breakers *bs, const struct wd_route *route,
		     bool ok, enum wd_err_class ec, const char *error)
{
	const struct wd_retry_cfg *rc = &bs->cfg->retry;

	if (!rc->breaker_failures)
		return;
	bool counts = ok || !(ec == WD_ERRC_INVALID || ec == WD_ERRC_CONTEXT ||
			      ec == WD_ERRC_CIRCUIT_OPEN);
	pthread_mutex_lock(&bs->brk_lock);
	struct breaker *b = brk_find(bs, route);
	if (b)
		b->trial = false;
	if (b && counts) {
		if (ok) {
			b->fails = 0;
			b->open_until_ns = 0;
		} else {
			b->fails++;
			wd_strlcpy(b->last_error, error, sizeof(b->last_error));
			if (b->fails >= rc->breaker_failures ||
			    ec == WD_ERRC_QUOTA || ec == WD_ERRC_AUTH) {
				if (!b->open_until_ns)
					b->opened++;
				b->open_until_ns =
				    wd_now_ns() +
				    (uint64_t)rc->breaker_open_ms * 1000000ull;
			}
		}
	}
	pthread_mutex_unlock(&bs->brk_lock);
}

json_t *wd_breakers_json(struct wd_breakers *bs)
{
	json_t *a = json_array();
	uint64_t now = wd_now_ns();

	pthread_mutex_lock(&bs->brk_lock);
	for (int i = 0; i < bs->n_brk; i++) {
		const struct breaker *b = &bs->brk[i];
		const char *st = !b->open_until_ns	  ? "closed"
				 : now < b->open_until_ns ? "open"
							  : "half_open";
		json_t *o = json_pack(
		    "{s:s,s:s,s:s,s:i,s:I,s:I}", "provider",
		    bs->cfg->providers[b->provider].name, "model",
		    bs->cfg->providers[b->provider].kind == WD_PROVIDER_SCRIPT
			? basename_of(b->model)
			: b->model,
		    "state", st, "failures", (int)b->fails, "opened",
		    (json_int_t)b->opened, "open_ms_left",
		    (json_int_t)(now < b->open_until_ns
				     ? (b->open_until_ns - now) / 1000000
				     : 0));
		if (b->last_error[0])
			json_object_set_new(o, "last_error",
					    wd_json_text(b->last_error));
		json_array_append_new(a, o);
	}
	pthread_mutex_unlock(&bs->brk_lock);
	return a;
}
