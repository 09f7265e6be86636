/* libFuzzer target: wardend's API request parsing (wd_api_parse and
 * wd_api_parse_since) on arbitrary method/path/query/body.
 * Input layout: byte 0 picks the method, then "PATH\nQUERY\nBODY" where
 * QUERY is "k=v&k=v". */
#include <stdint.h>
#include <string.h>

#include "api/request.h"

struct q {
	char *text;
};

static const char *query_get(void *arg, const char *key)
{
	struct q *q = arg;
	static __thread char val[256];
	size_t kl = strlen(key);
	for (char *p = q->text; p && *p;) {
		char *amp = strchr(p, '&');
		size_t l = amp ? (size_t)(amp - p) : strlen(p);
		if (l > kl && !strncmp(p, key, kl) && p[kl] == '=') {
			size_t vl = l - kl - 1;
			if (vl >= sizeof(val))
				vl = sizeof(val) - 1;
			memcpy(val, p + kl + 1, vl);
			val[vl] = 0;
			return val;
		}
		p = amp ? amp + 1 : NULL;
	}
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const methods[] = {"GET", "POST", "PUT", "DELETE"};
	if (size < 1)
		return 0;
	const char *method = methods[data[0] % 4];
	char *buf = malloc(size);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = 0;
	char *path = buf, *query = NULL, *body = NULL;
	size_t body_len = 0;
	char *nl = memchr(path, '\n', size - 1);
	if (nl) {
		*nl = 0;
		query = nl + 1;
		char *nl2 =
		    memchr(query, '\n', (size_t)(buf + size - 1 - query));
		if (nl2) {
			*nl2 = 0;
			body = nl2 + 1;
			body_len = (size_t)(buf + size - 1 - body);
		}
	}
	struct q q = {.text = query};
	struct wd_api_req req;
	struct wd_err err = {0};
	int rc = wd_api_parse(method, path, query_get, &q, body, body_len, &req,
			      &err);
	if (rc == 0) {
		/* a parsed request holds only what the endpoint allows */
		if ((req.ep == WD_EP_RUN_CREATE) != (req.agent != NULL))
			__builtin_trap();
		if (req.id[0] && !wd_api_id_ok(req.id))
			__builtin_trap();
		wd_api_req_free(&req);
	} else if (rc < 400 || rc > 599) {
		__builtin_trap(); /* errors are HTTP statuses */
	}
	uint64_t ns;
	if (query)
		wd_api_parse_since(query, 1700000000000000000ull, &ns);
	free(buf);
	return 0;
}
