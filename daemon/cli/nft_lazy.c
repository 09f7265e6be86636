/* libnftables for the CLI, loaded when a call first asks for it.
 *
 * Only a tier-3 call that routes beyond the node makes nftables tables
 * (sandbox/t3beyond.c); libnftables and what it links (libnftnl, libmnl,
 * libxtables, libgmp) cost ~0.3 ms of CPU in the dynamic loader on every
 * start of `warden` otherwise. As with libcurl (cli/curl_lazy.c), the CLI
 * is linked without -lnftables and these load libnftables.so.1 at the
 * first call; wardend and the tests link it directly.
 *
 * If it cannot be loaded, nft_ctx_new returns NULL (as libnftables does
 * when it cannot make a context): t3beyond refuses the call, fail closed,
 * and the reason is logged once (cli/lazy.c). */
#include "common/lazy.h"

#include <nftables/libnftables.h>

enum { CTX_NEW, CTX_FREE, BUF_OUT, BUF_ERR, GET_OUT, GET_ERR, RUN_CMD, N_SYM };
static const char *const names[N_SYM] = {
    "nft_ctx_new",
    "nft_ctx_free",
    "nft_ctx_buffer_output",
    "nft_ctx_buffer_error",
    "nft_ctx_get_output_buffer",
    "nft_ctx_get_error_buffer",
    "nft_run_cmd_from_buffer",
};
WD_LAZY_LIBRARY(wd_lazy_open, "libnftables.so.1");

struct nft_ctx *nft_ctx_new(uint32_t flags)
{
	return ready() ? F(struct nft_ctx * (*)(uint32_t), CTX_NEW)(flags)
		       : NULL;
}

/* a context exists only if libnftables made it: loaded by then */
void nft_ctx_free(struct nft_ctx *ctx)
{
	if (ready())
		F(void (*)(struct nft_ctx *), CTX_FREE)(ctx);
}

int nft_ctx_buffer_output(struct nft_ctx *ctx)
{
	return ready() ? F(int (*)(struct nft_ctx *), BUF_OUT)(ctx) : -1;
}

int nft_ctx_buffer_error(struct nft_ctx *ctx)
{
	return ready() ? F(int (*)(struct nft_ctx *), BUF_ERR)(ctx) : -1;
}

const char *nft_ctx_get_output_buffer(struct nft_ctx *ctx)
{
	return ready() ? F(const char *(*)(struct nft_ctx *), GET_OUT)(ctx)
		       : "";
}

const char *nft_ctx_get_error_buffer(struct nft_ctx *ctx)
{
	return ready() ? F(const char *(*)(struct nft_ctx *), GET_ERR)(ctx)
		       : "libnftables.so.1 not loaded";
}

int nft_run_cmd_from_buffer(struct nft_ctx *nft, const char *buf)
{
	return ready() ? F(int (*)(struct nft_ctx *, const char *),
			   RUN_CMD)(nft, buf)
		       : -1;
}
