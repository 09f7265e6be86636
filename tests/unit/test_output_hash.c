/* wd_rec_output_hash (trace/records.h): the model's output without the
 * provider's per-call ids, for `warden trace diff`. */
#include "t.h"
#include "trace/records.h"

#include <errno.h>
#include <string.h>

static int hash_of(const char *json, char out[72])
{
	json_t *o = json_loads(json, 0, NULL);
	int rc = o ? wd_rec_output_hash(o, out) : -99;
	json_decref(o);
	return rc;
}

int main(void)
{
	char a[72], b[72], c[72], d[72], e[72];
	int ra = hash_of("{\"stop_reason\":\"tool_use\",\"text\":\"x\","
			 "\"tool_calls\":[{\"id\":\"toolu_01AbC\",\"name\":"
			 "\"echo\",\"arguments\":{\"n\":\"1\",\"m\":2}}]}",
			 a);
	int rb = hash_of("{\"stop_reason\":\"tool_calls\",\"text\":\"x\","
			 "\"tool_calls\":[{\"id\":\"call_9zY\",\"name\":"
			 "\"echo\",\"arguments\":{\"m\":2,\"n\":\"1\"}}]}",
			 b);
	T_OK(!ra && !rb && !strncmp(a, "sha256:", 7), "output-hash/computed",
	     "rc %d %d", ra, rb);
	T_OK(!strcmp(a, b), "output-hash/ids-and-key-order-ignored", "%s %s", a,
	     b);
	hash_of("{\"text\":\"x\",\"tool_calls\":[{\"id\":\"toolu_01AbC\","
		"\"name\":\"echo\",\"arguments\":{\"n\":\"2\",\"m\":2}}]}",
		c);
	T_OK(strcmp(a, c) != 0, "output-hash/arguments-count", "%s", c);
	hash_of("{\"text\":\"x\",\"tool_calls\":[{\"id\":\"toolu_01AbC\","
		"\"name\":\"other\",\"arguments\":{\"n\":\"1\",\"m\":2}}]}",
		d);
	T_OK(strcmp(a, d) != 0, "output-hash/tool-name-counts", "%s", d);
	hash_of("{\"text\":\"y\",\"tool_calls\":[{\"id\":\"toolu_01AbC\","
		"\"name\":\"echo\",\"arguments\":{\"n\":\"1\",\"m\":2}}]}",
		e);
	T_OK(strcmp(a, e) != 0, "output-hash/text-counts", "%s", e);
	T_OK(hash_of("{\"stop_reason\":\"end_turn\",\"tool_calls\":1}", e) ==
		 -EINVAL,
	     "output-hash/hash-only-summary-refused", "not -EINVAL");
	return T_DONE();
}
