// SPDX-License-Identifier: GPL-2.0
/* BENCH ONLY: loaded by tests/bench/bench_events.c, never by warden.
 *
 * The floor under one producer's denials: cgroup/connect4 programs that
 * deny with as little as a program can do, attached to a scratch cgroup
 * of their own, so that "ours" (bpf/egress.bpf.c's wd_connect4) is read
 * against what a denied connect() costs this kernel at all.
 *  wd_floor_deny  returns 0 (EPERM) and does nothing else;
 *  wd_floor_ring  also writes a short record (kind, verdict, cgroup id)
 *                 into the production ring (wd_events, shared by fd),
 *                 without a wake-up: the bench drains it itself;
 *  wd_floor_ring_ts  the same record with its timestamp, read as every
 *                 warden record's is (bpf_ktime_get_boot_ns): what the
 *                 clock adds to a denial on this machine.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "lib/maps.h"

char LICENSE[] SEC("license") = "GPL";

SEC("cgroup/connect4")
int wd_floor_deny(struct bpf_sock_addr *ctx)
{
	return 0;
}

/* A minimal record into the production ring, no wake-up; with_ts: with
 * the timestamp every warden record carries */
static __always_inline void ring_record(bool with_ts)
{
	struct wd_kevent *e =
	    bpf_ringbuf_reserve(&wd_events, WD_KEV_SHORT_SIZE, 0);
	if (e) {
		if (with_ts)
			e->ts_ns = bpf_ktime_get_boot_ns();
		e->cgroup_id = bpf_get_current_cgroup_id();
		e->kind = WD_KEV_CONNECT;
		e->verdict = WD_KEV_DENIED;
		bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	}
}

SEC("cgroup/connect4")
int wd_floor_ring(struct bpf_sock_addr *ctx)
{
	ring_record(false);
	return 0;
}

SEC("cgroup/connect4")
int wd_floor_ring_ts(struct bpf_sock_addr *ctx)
{
	ring_record(true);
	return 0;
}
