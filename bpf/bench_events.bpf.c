// SPDX-License-Identifier: GPL-2.0
/* BENCH ONLY: loaded by tests/bench/bench_events.c, never by warden.
 *
 * A producer of denial records as fast as the kernel can write them, to
 * measure the event stream's capacity without a syscall + cgroup program
 * per event in front of it. It writes into the production ring buffer
 * (wd_events, shared by fd: bpf_map__reuse_fd with the egress object's
 * maps) exactly what bpf/egress.bpf.c writes for a denied IPv4 connect:
 * wd_event_reserve_short_pol (reserve failures counted in wd_loss), the same
 * fields,
 * wd_event_submit (the production wake-up policy).
 *
 * Run with BPF_PROG_TEST_RUN: one run writes ctx->count records (bpf_loop).
 */
#include "vmlinux.h"

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "lib/maps.h"

char LICENSE[] SEC("license") = "GPL";

struct wd_bench_args {
	__u32 count;	  /* records to write in this run */
	__u32 max_fill;	  /* stop early while this many bytes are pending in
			   * the ring (back-pressure); 0 = never stop */
	__u32 written;	  /* out: records written */
	__u32 failed;	  /* out: reserve failures (also in wd_loss) */
	__u16 port;	  /* destination port written in the records */
	__u16 old_wakeup; /* 1: submit as egress did before wd_event_submit
			   * (flags 0: the kernel wakes the consumer
			   * whenever it has caught up), for comparison */
	__u16 pad[2];
};

static long emit_one(__u64 i, void *c)
{
	struct wd_bench_args *a = c;
	if (a->max_fill &&
	    bpf_ringbuf_query(&wd_events, BPF_RB_AVAIL_DATA) > a->max_fill)
		return 1;
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 cgid = wd_task_cgid(t);
	struct wd_kevent *e = wd_event_reserve_short_pol(
	    WD_KEV_CONNECT, WD_KEV_DENIED, 1 /*EPERM*/, cgid,
	    bpf_map_lookup_elem(&wd_policy, &cgid), t);
	if (!e) {
		a->failed++;
		return 0;
	}
	/* as judge() in egress.bpf.c for connect() of a TCP socket to
	 * 127.0.0.1:port */
	e->family = 2 /* AF_INET */;
	e->protocol = 6 /* IPPROTO_TCP */;
	e->arg2 = 1 /* SOCK_STREAM */;
	e->port = a->port;
	__u32 addr[4] = {0, 0, bpf_htonl(0xffff), bpf_htonl(0x7f000001)};
	__builtin_memcpy(e->addr, addr, 16);
	e->arg = 0;
	if (a->old_wakeup)
		bpf_ringbuf_submit(e, 0);
	else
		wd_event_submit(e);
	a->written++;
	return 0;
}

SEC("syscall")
int wd_bench_emit(struct wd_bench_args *ctx)
{
	struct wd_bench_args a = {
	    .count = ctx->count,
	    .max_fill = ctx->max_fill,
	    .port = ctx->port,
	    .old_wakeup = ctx->old_wakeup,
	};
	bpf_loop(a.count, emit_one, &a, 0);
	ctx->written = a.written;
	ctx->failed = a.failed;
	return 0;
}
