/* The structs shared by BPF and user space (bpf/lib/events.h, policy.h)
 * have the same size and member offsets in the BPF object (read from its
 * BTF, as embedded in the skeleton) as in this compilation unit; and the
 * reader takes short records (WD_KEV_SHORT_SIZE) without reading past
 * them. */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>

#include "egress.skel.h"
#include "enforce/egress.h"
#include "lib/events.h"
#include "lib/policy.h"
#include "lib/t3net.h"
#include "t3net.skel.h"
#include "t.h"

struct field {
	const char *name;
	size_t off;
};

#define F(type, m)                                                             \
	{                                                                      \
#m, offsetof(struct type, m)                                   \
	}

static void check(const struct btf *btf, const char *type, size_t size,
		  const struct field *f, int n)
{
	char name[96];
	int id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
	snprintf(name, sizeof(name), "layout_%s", type);
	if (id < 0) {
		T_FAIL(name, "struct %s not in the BPF object's BTF", type);
		return;
	}
	const struct btf_type *t = btf__type_by_id(btf, id);
	if (t->size != size) {
		T_FAIL(name, "size: BPF %u, user space %zu", t->size, size);
		return;
	}
	int vlen = btf_vlen(t);
	if (vlen != n) {
		T_FAIL(name, "members: BPF %d, user space list %d", vlen, n);
		return;
	}
	const struct btf_member *m = btf_members(t);
	for (int i = 0; i < vlen; i++) {
		const char *mn = btf__name_by_offset(btf, m[i].name_off);
		size_t boff = btf_member_bit_offset(t, i);
		if (strcmp(mn, f[i].name) || boff != f[i].off * 8) {
			T_FAIL(name, "member %d: BPF %s@%zu, user space %s@%zu",
			       i, mn, boff / 8, f[i].name, f[i].off);
			return;
		}
	}
	T_PASS(name);
}

static int conv(const struct wd_kevent *k, size_t size, struct wd_event *ev)
{
	/* exactly `size` bytes on the heap: nothing past them is readable
	 * by accident (under ASan, not at all) */
	void *rec = malloc(size);
	memcpy(rec, k, size);
	int rc = wd_kevent_to_event(rec, size, 0, ev);
	free(rec);
	return rc;
}

/* Records without a path are written short (WD_KEV_SHORT_SIZE, egress);
 * the reader takes them and never reads past their end. */
static void short_records(void)
{
	struct wd_kevent k;
	struct wd_event ev;
	memset(&k, 0, sizeof(k));
	k.kind = WD_KEV_CONNECT;
	k.family = AF_INET;
	k.err = 1;
	k.port = 9;
	k.addr[10] = k.addr[11] = 0xff;
	k.addr[12] = 127;
	k.addr[15] = 1;
	memset(k.path, 'X', sizeof(k.path)); /* no NUL: must not be read */
	int rc = conv(&k, WD_KEV_SHORT_SIZE, &ev);
	T_OK(rc == 0 && !strcmp(ev.target, "127.0.0.1:9") &&
		 !strcmp(ev.kind, "connect") && ev.err == 1,
	     "short_record_connect", "rc %d target '%s'", rc, ev.target);
	rc = conv(&k, WD_KEV_SHORT_SIZE - 8, &ev);
	T_OK(rc == -EINVAL, "short_record_too_short", "rc %d", rc);
	k.addr[12] = k.addr[13] = k.addr[14] = k.addr[15] = 255;
	k.port = 65535;
	rc = conv(&k, WD_KEV_SHORT_SIZE, &ev);
	bool ok = rc == 0 && !strcmp(ev.target, "255.255.255.255:65535");
	memset(k.addr, 0, sizeof(k.addr));
	k.addr[10] = k.addr[11] = 0xff;
	k.port = 0;
	rc = conv(&k, WD_KEV_SHORT_SIZE, &ev);
	ok = ok && rc == 0 && !strcmp(ev.target, "0.0.0.0:0");
	memset(k.addr, 0, sizeof(k.addr));
	k.addr[15] = 1;
	k.family = AF_INET6;
	k.port = 443;
	rc = conv(&k, WD_KEV_SHORT_SIZE, &ev);
	T_OK(ok && rc == 0 && !strcmp(ev.target, "[::1]:443"),
	     "record_addr_format", "last: rc %d target '%s'", rc, ev.target);
	/* a path kind: full record -> path, short record -> no path */
	k.kind = WD_KEV_FILE_OPEN;
	k.family = 0;
	snprintf(k.path, sizeof(k.path), "/etc/shadow");
	rc = conv(&k, sizeof(k), &ev);
	int rc2 = conv(&k, WD_KEV_SHORT_SIZE, &ev);
	T_OK(rc == 0 && rc2 == 0 && ev.target[0] == 0, "short_record_no_path",
	     "rc %d/%d target '%s'", rc, rc2, ev.target);
	memset(k.path, 'X', sizeof(k.path)); /* unterminated: cut at 255 */
	rc = conv(&k, sizeof(k), &ev);
	T_OK(rc == 0 && strlen(ev.target) == WD_KEV_PATH_LEN - 1,
	     "record_path_bounded", "rc %d len %zu", rc, strlen(ev.target));
}

int main(void)
{
	size_t sz = 0;
	const void *elf = egress_bpf__elf_bytes(&sz);
	struct bpf_object *obj = bpf_object__open_mem(elf, sz, NULL);
	const struct btf *btf = obj ? bpf_object__btf(obj) : NULL;
	if (!btf) {
		T_FAIL("layout_btf", "egress object has no BTF");
		return T_DONE();
	}
	const struct field kev[] = {
	    F(wd_kevent, ts_ns),   F(wd_kevent, cgroup_id),
	    F(wd_kevent, pid),	   F(wd_kevent, tgid),
	    F(wd_kevent, uid),	   F(wd_kevent, kind),
	    F(wd_kevent, family),  F(wd_kevent, err),
	    F(wd_kevent, verdict), F(wd_kevent, protocol),
	    F(wd_kevent, port),	   F(wd_kevent, addr),
	    F(wd_kevent, arg),	   F(wd_kevent, arg2),
	    F(wd_kevent, comm),	   F(wd_kevent, path),
	};
	check(btf, "wd_kevent", sizeof(struct wd_kevent), kev,
	      (int)(sizeof(kev) / sizeof(kev[0])));
	const struct field pol[] = {
	    F(wd_call_policy, flags),	      F(wd_call_policy, n_rules),
	    F(wd_call_policy, families_mask), F(wd_call_policy, reserved),
	    F(wd_call_policy, n_denied),      F(wd_call_policy, n_audited),
	    F(wd_call_policy, dns_port),      F(wd_call_policy, pad16),
	};
	check(btf, "wd_call_policy", sizeof(struct wd_call_policy), pol,
	      (int)(sizeof(pol) / sizeof(pol[0])));
	const struct field key[] = {
	    F(wd_egress_key, prefixlen), F(wd_egress_key, cgid_lo),
	    F(wd_egress_key, cgid_hi),	 F(wd_egress_key, port),
	    F(wd_egress_key, addr),	 F(wd_egress_key, pad),
	};
	check(btf, "wd_egress_key", sizeof(struct wd_egress_key), key,
	      (int)(sizeof(key) / sizeof(key[0])));
	const struct field val[] = {
	    F(wd_egress_val, rule),
	    F(wd_egress_val, pad),
	};
	check(btf, "wd_egress_val", sizeof(struct wd_egress_val), val,
	      (int)(sizeof(val) / sizeof(val[0])));
	bpf_object__close(obj);
	/* tier 3's link object: its own map's value, and the allow map's key
	 * it builds (the same header as egress's) */
	elf = t3net_bpf__elf_bytes(&sz);
	obj = bpf_object__open_mem(elf, sz, NULL);
	btf = obj ? bpf_object__btf(obj) : NULL;
	if (!btf) {
		T_FAIL("layout_t3net_btf", "t3net object has no BTF");
	} else {
		const struct field link[] = {
		    F(wd_t3_link, cgid), F(wd_t3_link, sbx), F(wd_t3_link, gw),
		    F(wd_t3_link, uid),	 F(wd_t3_link, pad),
		};
		check(btf, "wd_t3_link", sizeof(struct wd_t3_link), link,
		      (int)(sizeof(link) / sizeof(link[0])));
		check(btf, "wd_egress_key", sizeof(struct wd_egress_key), key,
		      (int)(sizeof(key) / sizeof(key[0])));
	}
	bpf_object__close(obj);
	short_records();
	return T_DONE();
}
