/* sandbox/t3beyond.h in a network namespace of the test's own (its
 * net.ipv4.ip_forward set there, never the host's): the node conditions a
 * call beyond the node is refused on, each named; one process's
 * libnftables context making and deleting several calls' tables in turn
 * (wardend's case: the context outlives calls), each with forwarding on
 * its own host end only; a dead supervisor's table swept. The links are
 * made by sandbox/t3link.h as a call makes them. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <nftables/libnftables.h>

#include "sandbox/t3beyond.h"
#include "sandbox/t3link.h"
#include "t.h"

static int put(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = write(fd, v, strlen(v)) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static int forwarding(const char *dev)
{
	char p[128], b[8] = "";
	snprintf(p, sizeof(p), "/proc/sys/net/ipv4/conf/%s/forwarding", dev);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, b, sizeof(b) - 1);
	close(fd);
	return n > 0 ? b[0] - '0' : -1;
}

/* nft's list of this netns's tables (a context of the test's own). */
static void tables(char *out, size_t n)
{
	struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
	nft_ctx_buffer_output(c);
	nft_ctx_buffer_error(c);
	out[0] = 0;
	if (nft_run_cmd_from_buffer(c, "list tables") == 0)
		snprintf(out, n, "%s", nft_ctx_get_output_buffer(c));
	nft_ctx_free(c);
}

static int nft(const char *cmd)
{
	struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
	nft_ctx_buffer_error(c);
	int rc = nft_run_cmd_from_buffer(c, cmd);
	nft_ctx_free(c);
	return rc;
}

static bool has_table(const char *list, const char *dev)
{
	char t[64];
	snprintf(t, sizeof(t), "table ip warden_%s\n", dev);
	return strstr(list, t) != NULL;
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("t3beyond",
		       "needs root (a network namespace, nftables)");
		return T_DONE();
	}
	if (unshare(CLONE_NEWNET) < 0) {
		T_SKIP("t3beyond", "unshare(CLONE_NEWNET): %s",
		       strerror(errno));
		return T_DONE();
	}
	char why[320] = "";
	uint32_t far = htonl(0x0a090909); /* 10.9.9.9 */
	put("/proc/sys/net/ipv4/ip_forward", "0");
	int rc = wd_t3_beyond_can(far, why, sizeof(why));
	T_OK(rc == -ENETUNREACH &&
		 strstr(why, "does not forward IPv4 (net.ipv4.ip_forward=0)"),
	     "t3beyond_no_ip_forward", "%d '%s'", rc, why);
	char desc[700];
	T_OK(!wd_t3_beyond_describe(desc, sizeof(desc)) &&
		 strstr(desc, "net.ipv4.ip_forward=0"),
	     "t3beyond_status_no_forward", "'%s'", desc);
	put("/proc/sys/net/ipv4/ip_forward", "1");
	rc = wd_t3_beyond_can(far, why, sizeof(why));
	T_OK(rc < 0 && strstr(why, "no route to 10.9.9.9"), "t3beyond_no_route",
	     "%d '%s'", rc, why);
	T_OK(wd_t3_beyond_describe(desc, sizeof(desc)), "t3beyond_status_can",
	     "'%s'", desc);

	struct wd_t3link a, b;
	struct wd_err err = {0};
	if (wd_t3link_make(&a, &err) < 0 || wd_t3link_make(&b, &err) < 0) {
		T_FAIL("t3beyond_links", "%s", err.msg);
		return T_DONE();
	}
	/* a's sandbox address is routed over a's link: never "beyond" */
	rc = wd_t3_beyond_can(a.sbx, why, sizeof(why));
	T_OK(rc == -EACCES && strstr(why, "another tier-3 call's link"),
	     "t3beyond_not_over_a_link", "%d '%s'", rc, why);

	/* a dead supervisor's table: its link does not exist */
	T_OK(nft("add table ip warden_w3hdead000000") == 0, "t3beyond_stale",
	     "nft add table");
	/* not a name t3link.c makes: never swept */
	nft("add table ip warden_w3hdead00000099");
	char list[4096];
	int ra = wd_t3_beyond_on(&a, &err);
	int rb = ra ? ra : wd_t3_beyond_on(&b, &err);
	T_OK(!ra && !rb, "t3beyond_on_two_calls", "%d %d %s", ra, rb, err.msg);
	tables(list, sizeof(list));
	T_OK(has_table(list, a.host_name) && has_table(list, b.host_name),
	     "t3beyond_tables_of_each_call", "'%s'", list);
	T_OK(!strstr(list, "warden_w3hdead000000\n") &&
		 strstr(list, "warden_w3hdead00000099\n"),
	     "t3beyond_stale_swept", "'%s'", list);
	nft("delete table ip warden_w3hdead00000099");
	T_OK(forwarding(a.host_name) == 1 && forwarding(b.host_name) == 1,
	     "t3beyond_host_ends_forward", "%d %d", forwarding(a.host_name),
	     forwarding(b.host_name));
	wd_t3_beyond_off(&a);
	tables(list, sizeof(list));
	T_OK(!has_table(list, a.host_name) && has_table(list, b.host_name),
	     "t3beyond_off_one_call", "'%s'", list);
	T_OK(forwarding(a.host_name) == 0 && forwarding(b.host_name) == 1,
	     "t3beyond_off_forwarding", "%d %d", forwarding(a.host_name),
	     forwarding(b.host_name));
	/* the same context again, after a deletion */
	ra = wd_t3_beyond_on(&a, &err);
	tables(list, sizeof(list));
	T_OK(!ra && has_table(list, a.host_name), "t3beyond_on_again",
	     "%d '%s'", ra, list);
	wd_t3_beyond_off(&a);
	wd_t3_beyond_off(&b);
	tables(list, sizeof(list));
	T_OK(!strstr(list, "warden_"), "t3beyond_none_left", "'%s'", list);
	wd_t3link_destroy(&a);
	wd_t3link_destroy(&b);
	return T_DONE();
}
