/* `warden status`: the model routes' circuit breakers, from wardend
 * (GET /v1/status model_routes; gateway/breaker.c). The rest of the report
 * is this host's; this part needs the daemon and says so when it is not
 * there. */
#include <stdio.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"
#include "cli/status_int.h"

json_t *wd_status_model_routes(char *why, size_t n)
{
	const char *sock = wd_cli_socket(NULL);
	struct wd_err err = {0};
	json_t *resp = NULL;
	long st = 0;
	int rc = wd_api_call(sock, "GET", "/v1/status", NULL, &st, &resp, &err);
	json_t *routes = NULL;
	if (rc)
		snprintf(why, n, "wardend not reachable: %s", err.msg);
	else if (st != 200)
		snprintf(why, n, "wardend: %s", wd_api_error_text(resp, st));
	else if (!(routes = json_object_get(resp, "model_routes")))
		snprintf(why, n, "wardend reports no model routes");
	json_incref(routes);
	json_decref(resp);
	return routes;
}

/* The report fits 80 columns (tests/integration/status.sh): words wrapped
 * at 78, continuation lines indented 4. */
void wd_status_wrap(const char *t)
{
	int col = 2;
	printf("  ");
	while (*t) {
		size_t w = strcspn(t, " ");
		if (col > 4 && col + 1 + (int)w > 78) {
			printf("\n    ");
			col = 4;
		} else if (col > 2 && col != 4) {
			putchar(' ');
			col++;
		}
		printf("%.*s", (int)w, t);
		col += (int)w;
		t += w;
		while (*t == ' ')
			t++;
	}
	putchar('\n');
}

void wd_status_model_routes_text(void)
{
	char why[300] = "";
	json_t *routes = wd_status_model_routes(why, sizeof(why));
	printf("\nModel routes (circuit breakers, from wardend)\n");
	if (!routes) {
		wd_status_wrap(why);
		return;
	}
	if (!json_array_size(routes))
		printf("  no model call made since the policy was loaded\n");
	size_t i;
	json_t *r;
	json_array_foreach(routes, i, r)
	{
		const char *state =
		    json_string_value(json_object_get(r, "state"));
		const char *le =
		    json_string_value(json_object_get(r, "last_error"));
		struct wd_buf b = {0};
		wd_buf_printf(&b, "%s/%s: %s, %lld failed calls in a row",
			      json_string_value(json_object_get(r, "provider")),
			      json_string_value(json_object_get(r, "model")),
			      state,
			      (long long)json_integer_value(
				  json_object_get(r, "failures")));
		if (!strcmp(state, "open"))
			wd_buf_printf(&b, ", skipped for %.1f s more",
				      (double)json_integer_value(
					  json_object_get(r, "open_ms_left")) /
					  1000.0);
		if (le && strcmp(state, "closed"))
			wd_buf_printf(&b, "; last error: %s", le);
		wd_status_wrap(b.data);
		wd_buf_free(&b);
	}
	json_decref(routes);
}
