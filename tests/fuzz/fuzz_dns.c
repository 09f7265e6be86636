/* libFuzzer target: the DNS wire code a call's resolver runs on what a
 * tool sends it (wd_dns_parse_query, then the answer built for it) and on
 * what an upstream answers (wd_dns_parse_answers). Byte 0 picks which. */
#include <stdint.h>
#include <string.h>

#include "enforce/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *msg = data + 1;
	size_t len = size - 1;
	if (data[0] & 1) {
		struct wd_dns_rr rr[WD_DNS_MAX_RR];
		wd_dns_parse_answers(msg, len,
				     (data[0] & 2) ? WD_DNS_AAAA : WD_DNS_A, rr,
				     WD_DNS_MAX_RR);
		return 0;
	}
	struct wd_dns_query q;
	int rc = wd_dns_parse_query(msg, len, &q);
	if (rc < 0)
		return 0;
	struct wd_dns_rr rr[3];
	memset(rr, 0, sizeof(rr));
	for (int i = 0; i < 3; i++) {
		rr[i].type = i ? WD_DNS_AAAA : WD_DNS_A;
		rr[i].ttl = 60;
		rr[i].addr[10] = rr[i].addr[11] = 0xff;
	}
	uint8_t out[512];
	/* a small cap too: truncation must stay in bounds */
	wd_dns_answer(&q, msg, rc, rr, 3, out,
		      (data[0] & 2) ? 64 : sizeof(out));
	(void)wd_dns_name_match("*.svc.internal", q.name);
	return 0;
}
