/* libFuzzer target: the model-response parsers (a provider's reply is
 * untrusted input: a compromised or buggy endpoint, or a proxy, can send
 * anything). The first byte picks the parser; the rest is the body. */
#include <stdint.h>
#include <string.h>

#include "gateway/provider.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wd_complete_resp resp;
	struct wd_err err;
	char msg[256];
	bool pe;
	json_t *a;

	if (size < 1)
		return 0;
	const char *body = (const char *)data + 1;
	size_t len = size - 1;

	memset(&resp, 0, sizeof(resp));
	switch (data[0] % 3) {
	case 0:
		wd_anthropic_ops.parse(body, len, &resp, &err);
		wd_anthropic_ops.error_message(body, len, msg, sizeof(msg));
		break;
	case 1:
		wd_openai_ops.parse(body, len, &resp, &err);
		wd_openai_ops.error_message(body, len, msg, sizeof(msg));
		break;
	default:
		a = wd_parse_arguments(body, len, &pe);
		json_decref(a);
		break;
	}
	/* whatever parsed must be usable: re-serialise the tool calls */
	for (int i = 0; i < resp.n_tool_calls; i++) {
		char *d =
		    json_dumps(resp.tool_calls[i].arguments, JSON_COMPACT);
		if (!d || !resp.tool_calls[i].id || !resp.tool_calls[i].name)
			__builtin_trap();
		free(d);
	}
	if (resp.text == NULL && resp.stop_raw != NULL)
		__builtin_trap();
	wd_complete_resp_free(&resp);
	return 0;
}
