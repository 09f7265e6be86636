/* The `script` provider: a deterministic scripted model read from a file.
 * It is the embedded default for the demo and for tests, so it never
 * touches the network and answers the same conversation the same way.
 *
 * Format (policy/models/NAME.script): one JSON object per line (a rule); blank
 * lines and lines starting with '#' are ignored. On each call the rules are
 * tried in file order; the first whose conditions ALL hold answers. A rule
 * without conditions always matches (a fallback). If none matches the model
 * ends the turn with the text "(script has no rule for this step)".
 *
 *   conditions
 *     "step":  N       the conversation holds exactly N assistant turns
 *                      (0 = the first call of a run)
 *     "after": "TOOL"  the last message is a tool result of a call to TOOL
 *     "match": "RE"    POSIX extended regex found in the last message's text
 *     "system": "RE"   POSIX extended regex found in the system prompt
 *     "error": bool    the last message is a tool result with is_error ==
 *                      bool
 *   reply
 *     "text":  "..."                         the assistant's text
 *     "tool_calls": [{"name": "TOOL", "arguments": {...}}, ...]
 *     "stop":  "end_turn"|"tool_use"|"max_tokens"   (default: tool_use when
 *                      there are tool calls, else end_turn)
 *     "usage": {"input_tokens": N, "output_tokens": N, "cached_tokens": N}
 *                      (default: bytes/4 of the request and the reply)
 *
 * Templates: every string in "text" and in "arguments" (recursively) may
 * contain {{...}} references to the conversation, replaced with trimmed text:
 *   {{task}}               the first user message
 *   {{last}}               the last message's text
 *   {{step}}               the number of assistant turns so far
 *   {{result}}             the content of the last tool result
 *   {{result:TOOL}}        the content of the latest result of TOOL
 *   {{result.a.b}}         a field of a result whose content is JSON (dot
 *   {{result:TOOL.a.0}}    path, numbers index arrays); strings unquoted,
 *                          other values as compact JSON. If the content is
 *                          not JSON the whole content is used; a missing
 *                          field gives "".
 *   {{task.numbers}}       the longest list of numbers in the task (numbers
 *                          separated by spaces, commas, ';' or "and") as a
 *                          JSON array
 *                          ("[45, 80, 62, 63]"; "[]" if none)
 * Tool-call ids are "call_<step>_<index>".
 */
#ifndef WD_GATEWAY_SCRIPT_H
#define WD_GATEWAY_SCRIPT_H

#include "common/util.h"

struct wd_script;
struct wd_complete_req;
struct wd_complete_resp;

/* 0 or -EINVAL ("file:line:col: message") / -errno. */
int wd_script_load_file(const char *path, struct wd_script **out,
			struct wd_err *err);
int wd_script_load_str(const char *file, const char *text, size_t len,
		       struct wd_script **out, struct wd_err *err);
void wd_script_free(struct wd_script *s);

/* Answer one request. Fills resp's reply fields (stop_reason, text,
 * tool_calls, usage, raw_response); returns 0 or -errno. Thread-safe: a
 * loaded script is read-only. */
int wd_script_complete(const struct wd_script *s,
		       const struct wd_complete_req *req,
		       struct wd_complete_resp *resp, struct wd_err *err);

#endif
