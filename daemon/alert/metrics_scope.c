/* /metrics for a reader who may see only some teams (wardend's unix
 * socket, a uid that is neither root nor an auditor): the exposition text
 * with every series that names another team, or names an agent, a tool or
 * an alert key without naming a team the reader is in, left out. Label
 * values come from policy (metrics.h), so a team's agent and tool names
 * are as much its business as its counts. Node-wide series (no such
 * label: the API's connections, the trace store's health, the model
 * routes) stay; `# HELP`/`# TYPE` lines name families only and stay. */
#include "alert/metrics.h"

#include <string.h>

/* Labels whose values name a team's own things. */
static const char *const owned[] = {"agent", "tool", "key"};

/* The value of a label at *p (after `name="`), unescaped into v (at most
 * n - 1 bytes, cut silently: a value that long matches no team); *p moves
 * past the closing quote. False on a malformed line. */
static bool label_value(const char **p, char *v, size_t n)
{
	size_t k = 0;
	const char *s = *p;
	for (; *s && *s != '"'; s++) {
		char c = *s;
		if (c == '\\') {
			s++;
			if (!*s)
				return false;
			c = *s == 'n' ? '\n' : *s;
		}
		if (k + 1 < n)
			v[k++] = c;
	}
	if (*s != '"')
		return false;
	v[k] = 0;
	*p = s + 1;
	return true;
}

static bool in_teams(const char *v, const char *const *teams, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v, teams[i]))
			return true;
	return false;
}

/* Keep one line (without its '\n')? */
static bool keep_line(const char *l, size_t len, const char *const *teams,
		      size_t n_teams)
{
	if (!len || l[0] == '#')
		return true;
	const char *brace = memchr(l, '{', len);
	if (!brace)
		return true; /* unlabelled: a node-wide figure */
	cleanup_free char *line = wd_strndup(l, len);
	const char *p = line + (brace - l) + 1;
	bool team = false, team_ok = false, owns = false;
	while (*p && *p != '}') {
		const char *eq = strchr(p, '=');
		if (!eq || eq[1] != '"')
			return false; /* not ours to pass on */
		size_t nl = (size_t)(eq - p);
		char name[64], v[256];
		if (nl >= sizeof(name))
			return false;
		memcpy(name, p, nl);
		name[nl] = 0;
		p = eq + 2;
		if (!label_value(&p, v, sizeof(v)))
			return false;
		if (!strcmp(name, "team")) {
			team = true;
			team_ok = in_teams(v, teams, n_teams);
		}
		for (size_t i = 0; i < WD_ARRAY_SIZE(owned); i++)
			owns |= !strcmp(name, owned[i]);
		if (*p == ',')
			p++;
	}
	if (team)
		return team_ok;
	return !owns;
}

char *wd_metrics_scoped(const char *text, const char *const *teams,
			size_t n_teams)
{
	struct wd_buf b = {0};
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (keep_line(p, len, teams, n_teams)) {
			wd_buf_append(&b, p, len);
			wd_buf_append(&b, "\n", 1);
		}
		p += len + (nl ? 1 : 0);
	}
	return b.data ? b.data : wd_strdup("");
}
