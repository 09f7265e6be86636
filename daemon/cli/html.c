#include "cli/html.h"

#include <openssl/evp.h>
#include <string.h>

void html_esc_n(FILE *f, const char *s, size_t n)
{
	size_t run = 0; /* bytes written through unchanged, in one go */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *rep = NULL;
		switch (c) {
		case '&':
			rep = "&amp;";
			break;
		case '<':
			rep = "&lt;";
			break;
		case '>':
			rep = "&gt;";
			break;
		case '"':
			rep = "&quot;";
			break;
		case '\'':
			rep = "&#39;";
			break;
		default:
			if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
				rep = "";
		}
		if (!rep)
			continue;
		fwrite(s + run, 1, i - run, f);
		fputs(rep, f);
		run = i + 1;
	}
	fwrite(s + run, 1, n - run, f);
}

void html_esc(FILE *f, const char *s)
{
	if (s)
		html_esc_n(f, s, strlen(s));
}

static const char style[] =
    "body{font:14px/1.45 'DejaVu Sans',sans-serif;margin:0;color:#222;"
    "background:#fafafa}"
    "header{background:#263238;color:#fff;padding:12px 20px}"
    "header h1{font-size:20px;margin:0 0 6px}header a{color:#9cf}"
    "main{padding:8px 20px 40px}h2{font-size:17px;margin:18px 0 8px}"
    ".kv{margin-right:12px}.kv b{font-weight:600;white-space:nowrap;"
    "color:#555}header .kv b{color:#b0bec5}"
    "section.step{background:#fff;border:1px solid #ddd;border-radius:6px;"
    "margin:10px 0;padding:6px 12px}"
    "section.step h3{margin:4px 0 6px;font-size:15px}"
    "section.has-denial{border-left:6px solid #c62828}"
    "section.has-divergence{border-left:6px solid #ef6c00}"
    ".badge{font-size:12px;padding:1px 7px;border-radius:9px;color:#fff;"
    "margin-left:6px}.badge.denial{background:#c62828}"
    ".badge.divergence{background:#ef6c00}.badge.refused{background:#6a1b9a}"
    ".ev{padding:4px 0 4px 8px;border-top:1px dotted #eee;"
    "overflow-wrap:anywhere}"
    ".ev .type{display:inline-block;min-width:130px;font-weight:700;"
    "font-family:'DejaVu Sans Mono',monospace;font-size:13px}"
    ".ev.denial{background:#ffebee;color:#b71c1c}"
    ".ev.denial .type{color:#b71c1c}"
    ".ev.replay_divergence{background:#fff3e0}"
    ".ev.replay_refused{background:#f3e5f5}"
    ".ev.approval_request,.ev.approval_decision{background:#e8f5e9}"
    ".ev.payload_read{color:#666;font-size:12px}"
    "details.payload{margin:3px 0 3px 138px}"
    "details.payload summary{cursor:pointer;color:#1565c0}"
    ".hash{font-family:'DejaVu Sans Mono',monospace;font-size:11px;"
    "color:#777}.size{color:#777;font-size:12px}"
    "pre.text{background:#f5f5f5;border:1px solid #e0e0e0;padding:6px;"
    "white-space:pre-wrap;max-height:360px;overflow:auto;font-size:12px}"
    ".truncated,.absent{color:#8d6e63;font-size:12px}"
    "ul.tree{list-style:none;padding-left:18px}"
    "table.budget{border-collapse:collapse;font-size:12px;margin-top:6px}"
    "table.budget td,table.budget th{border:1px solid #ddd;padding:1px 8px;"
    "text-align:right}"
    "table.diff{border-collapse:collapse;width:100%;background:#fff}"
    "table.diff td,table.diff th{border:1px solid #ddd;padding:4px 8px;"
    "vertical-align:top;overflow-wrap:anywhere}"
    "tr.same td.verdict{color:#2e7d32}tr.differs td.verdict{color:#c62828;"
    "font-weight:700}tr.first{outline:3px solid #ef6c00}"
    "#expand-all{margin-top:8px}";

void html_head(FILE *f, const char *title, const char *script)
{
	/* the script is admitted by its hash, so nothing injected as a
	 * <script> would run even if an escape were missed */
	char csp_hash[64] = "";
	if (script) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned n = 0;
		EVP_Digest(script, strlen(script), md, &n, EVP_sha256(), NULL);
		EVP_EncodeBlock((unsigned char *)csp_hash, md, (int)n);
	}
	fprintf(f,
		"<!DOCTYPE html>\n<html lang=\"en\"><head><meta "
		"charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-"
		"Policy\" content=\"default-src 'none'; style-src "
		"'unsafe-inline'; img-src 'none'; script-src %s%s%s\">\n"
		"<meta name=\"referrer\" content=\"no-referrer\">\n<title>",
		script ? "'sha256-" : "'none'", script ? csp_hash : "",
		script ? "'" : "");
	html_esc(f, title);
	fprintf(f, "</title>\n<style>%s</style>\n", style);
	if (script)
		fprintf(f, "<script>%s</script>\n", script);
	fprintf(f, "</head><body>\n");
}

void html_foot(FILE *f)
{
	fprintf(f, "</body></html>\n");
}
