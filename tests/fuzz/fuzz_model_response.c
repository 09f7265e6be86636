/* libFuzzer target: the model-response parsers (a provider's reply is
 * untrusted input: a compromised or buggy endpoint, or a proxy, can send
 * anything). The first byte picks the parser; the rest is the body. */
#include <stdint.h>
#include <string.h>

#include "gateway/provider.h"
#include "gateway/script.h"

/* Tool output is attacker-controlled (a fetched page, a program's stdout)
 * and reaches the script provider's templates: fuzz that path too. */
static const char SCRIPT[] =
    "{\"after\": \"t\", \"match\": \"^[{]\", \"text\": "
    "\"{{result.a.0}} {{result:t.b}} {{last}}\", \"tool_calls\": "
    "[{\"name\": \"t\", \"arguments\": {\"x\": [\"{{result}}\", "
    "\"{{task.numbers}}\"]}}]}\n"
    "{\"text\": \"{{task.numbers}} {{step}} {{result.z}}\"}\n";

static void fuzz_script(const char *body, size_t len)
{
	static struct wd_script *s;
	struct wd_err err;
	struct wd_complete_resp resp;
	char *text = strndup(body, len);
	struct wd_tool_call tc = {.id = "call_0_0", .name = "t"};
	struct wd_msg msgs[3] = {
	    {.role = WD_ROLE_USER, .text = text},
	    {.role = WD_ROLE_ASSISTANT, .tool_calls = &tc, .n_tool_calls = 1},
	    {.role = WD_ROLE_TOOL, .text = text, .tool_call_id = "call_0_0"}};
	struct wd_complete_req req = {.model = "m", .msgs = msgs, .n_msgs = 3};

	if (!s && wd_script_load_str("fuzz.script", SCRIPT, sizeof(SCRIPT) - 1,
				     &s, &err))
		__builtin_trap();
	memset(&resp, 0, sizeof(resp));
	wd_script_complete(s, &req, &resp, &err);
	wd_complete_resp_free(&resp);
	free(text);
}

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
	switch (data[0] % 4) {
	case 0:
		wd_anthropic_ops.parse(body, len, &resp, &err);
		wd_anthropic_ops.error_message(body, len, msg, sizeof(msg));
		break;
	case 1:
		wd_openai_ops.parse(body, len, &resp, &err);
		wd_openai_ops.error_message(body, len, msg, sizeof(msg));
		break;
	case 2:
		a = wd_parse_arguments(body, len, &pe);
		json_decref(a);
		break;
	default:
		fuzz_script(body, len);
		break;
	}
	/* whatever parsed must be usable: re-serialise the tool calls */
	for (int i = 0; i < resp.n_tool_calls; i++) {
		/* an object, or the model's own text when it did not parse */
		char *d = json_dumps(resp.tool_calls[i].arguments,
				     JSON_COMPACT | JSON_ENCODE_ANY);
		if (!d || !resp.tool_calls[i].id || !resp.tool_calls[i].name)
			__builtin_trap();
		free(d);
	}
	if (resp.text == NULL && resp.stop_raw != NULL)
		__builtin_trap();
	wd_complete_resp_free(&resp);
	return 0;
}
