/* The fields of a record the index reads, copied into one allocation: the
 * appender finds them (in its own thread) and the index thread binds them,
 * so no JSON is copied or re-parsed on the live path. Two ways to find
 * them, one rule to turn them into a wd_idxrec (wd_idx_build):
 *   - wd_idx_extract walks a parsed record (the JSON append path, catch-up,
 *     reindex, gc);
 *   - the typed encoder (recw.c) notes each member as it writes it.
 * So a row written live by either path equals the row a rebuild makes. */
#include "trace/trace_int.h"

#include <pthread.h>
#include <string.h>

#define MN(name)                                                               \
	{                                                                      \
		name, sizeof(name) - 1                                         \
	}
static const struct {
	const char *name;
	size_t len;
} mnames[WD_IM_ALL] = {
    [WD_IM_TRACE] = MN("trace"),
    [WD_IM_PAYLOADS] = MN("payloads"),
    [WD_IM_RD] = MN("retention_days"),
    [WD_IM_COST] = MN("cost_usd"),
    [WD_IM_RUN] = MN("run_id"),
    [WD_IM_TYPE] = MN("type"),
    [WD_IM_TOOL_A] = MN("gen_ai.tool.name"),
    [WD_IM_TOOL_B] = MN("tool"),
    [WD_IM_CALL_A] = MN("gen_ai.tool.call.id"),
    [WD_IM_CALL_B] = MN("call_id"),
    [WD_IM_STATUS] = MN("status"),
    [WD_IM_PROMPT_A] = MN("prompt_hash"),
    [WD_IM_PROMPT_B] = MN("prompt_ref"),
    [WD_IM_RESULT_A] = MN("result_hash"),
    [WD_IM_RESULT_B] = MN("result_ref"),
    [WD_IM_MODEL_A] = MN("gen_ai.request.model"),
    [WD_IM_MODEL_B] = MN("model"),
    [WD_IM_AGENT] = MN("agent"),
    [WD_IM_TEAM] = MN("team"),
    [WD_IM_USER] = MN("user"),
    [WD_IM_STEP] = MN("step"),
    [WD_IM_IN_A] = MN("gen_ai.usage.input_tokens"),
    [WD_IM_IN_B] = MN("input_tokens"),
    [WD_IM_OUT_A] = MN("gen_ai.usage.output_tokens"),
    [WD_IM_OUT_B] = MN("output_tokens"),
    [WD_IM_FLAGGED] = MN("flagged"),
    [WD_IM_CACHED] = MN("cached_tokens"),
    [WD_IM_UID] = MN("uid"),
    [WD_IM_REPLAY_OF] = MN("replay_of"),
    [WD_IM_REPLAY] = MN("replay"),
    [WD_IM_REASON] = MN("reason"),
    [WD_IM_CHECK] = MN("check"),
    [WD_IM_TRACE_PAYLOADS] = MN("payloads"),
    [WD_IM_TRACE_RD] = MN("retention_days"),
    [WD_IM_REPLAY_OF_RUN] = MN("run_id"),
    [WD_IM_REPLAY_OF_FROM] = MN("from_step"),
    [WD_IM_REPLAY_CONV] = MN("converged"),
    [WD_IM_REPLAY_DIV] = MN("diverged_at"),
};
#undef MN
_Static_assert(WD_IM_N < 127, "member numbers fit a signed char");

static bool is(int i, const char *k, size_t n)
{
	return mnames[i].len == n && mnames[i].name[0] == k[0] &&
	       !memcmp(mnames[i].name, k, n);
}

/* The top-level names by length (every key of every record is looked
 * up): at most MAXLEN bytes, at most 7 names of one length. */
#define MAXLEN 32
static signed char by_len[MAXLEN + 1][8];
static bool by_len_off; /* a name longer, or a row full: scan them all */
static pthread_once_t by_len_once = PTHREAD_ONCE_INIT;

static void by_len_make(void)
{
	memset(by_len, -1, sizeof(by_len));
	for (int i = 0; i < WD_IM_N; i++) {
		if (mnames[i].len > MAXLEN) {
			by_len_off = true;
			return;
		}
		signed char *row = by_len[mnames[i].len];
		int j = 0;
		while (j < 7 && row[j] >= 0)
			j++;
		if (j == 7) {
			by_len_off = true;
			return;
		}
		row[j] = (signed char)i;
	}
}

int wd_idx_member(const char *k, size_t n)
{
	pthread_once(&by_len_once, by_len_make);
	if (by_len_off) {
		for (int i = 0; i < WD_IM_N; i++)
			if (is(i, k, n))
				return i;
		return -1;
	}
	if (n > MAXLEN)
		return -1;
	for (const signed char *row = by_len[n]; *row >= 0; row++)
		if (is(*row, k, n))
			return *row;
	return -1;
}

int wd_idx_submember(int parent, const char *k, size_t n)
{
	int a = parent == WD_IM_TRACE	    ? WD_IM_TRACE_PAYLOADS
		: parent == WD_IM_REPLAY_OF ? WD_IM_REPLAY_OF_RUN
		: parent == WD_IM_REPLAY    ? WD_IM_REPLAY_CONV
					    : -1;
	if (a < 0)
		return -1;
	for (int i = a; i < a + 2; i++)
		if (is(i, k, n))
			return i;
	return -1;
}

static struct wd_iv iv_of(json_t *v)
{
	struct wd_iv x = {0};
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_STRING:
		x.kind = WD_IV_STR;
		x.s = json_string_value(v);
		break;
	case JSON_INTEGER:
		x.kind = WD_IV_INT;
		x.i = json_integer_value(v);
		break;
	case JSON_REAL:
		x.kind = WD_IV_REAL;
		x.d = json_real_value(v);
		break;
	case JSON_TRUE:
		x.kind = WD_IV_TRUE;
		break;
	case JSON_FALSE:
		x.kind = WD_IV_FALSE;
		break;
	case JSON_OBJECT:
		x.kind = WD_IV_OBJECT;
		break;
	case JSON_ARRAY:
		x.kind = WD_IV_ARRAY;
		break;
	case JSON_NULL:
		x.kind = v ? WD_IV_NULL : WD_IV_NONE;
		break;
	}
	return x;
}

void wd_idx_extract_vals(json_t *rec, struct wd_idxvals *out)
{
	struct wd_idxvals v = {.nrefs = 0};
	const char *k;
	json_t *x;
	void *it;
	/* one pass: the members the index reads, and the *_ref values (in
	 * the record's order) */
	for (it = json_object_iter(rec); it;
	     it = json_object_iter_next(rec, it)) {
		k = json_object_iter_key(it);
		x = json_object_iter_value(it);
		size_t kl = json_object_iter_key_len(it);
		int i = wd_idx_member(k, kl);
		if (i >= 0)
			v.m[i] = iv_of(x);
		const char *ref = json_string_value(x);
		if (v.nrefs < WD_IDXREC_MAXREFS && ref && kl > 4 &&
		    !memcmp(k + kl - 4, "_ref", 4) && wd_trace_ref_ok(ref))
			v.refs[v.nrefs++] = ref;
		if (i == WD_IM_TRACE || i == WD_IM_REPLAY_OF ||
		    i == WD_IM_REPLAY) {
			const char *sk;
			json_t *sx;
			json_object_foreach(x, sk, sx)
			{
				int j = wd_idx_submember(i, sk, strlen(sk));
				if (j >= 0)
					v.m[j] = iv_of(sx);
			}
		}
	}
	*out = v;
}

struct wd_idxrec *wd_idx_extract(json_t *rec)
{
	struct wd_idxvals v;
	wd_idx_extract_vals(rec, &v);
	return wd_idx_build(&v);
}

/* cost_usd may be a number or a decimal string ("0.0231", seed 000) */
static double num(const struct wd_iv *v)
{
	switch (v->kind) {
	case WD_IV_INT:
		return (double)v->i;
	case WD_IV_REAL:
		return v->d;
	case WD_IV_STR:
		return strtod(v->s, NULL);
	default:
		return 0;
	}
}

/* A count as the index keeps it: a value out of int64's range (a record
 * anyone may have written: 1e300 tokens) is 0, not an undefined cast. */
static int64_t to_i64(double d)
{
	return d >= -9.2e18 && d <= 9.2e18 ? (int64_t)d : 0;
}

/* llround's value (half away from zero) for |d| < 9.2e18, else 0 as
 * to_i64: without libm, which the CLI would load for this one call */
static int64_t round_i64(double d)
{
	if (!(d >= -9.2e18 && d <= 9.2e18))
		return 0;
	int64_t t = (int64_t)d;
	double frac = d - (double)t; /* exact: |d| < 2^63, t its integer part */
	if (frac >= 0.5)
		t++;
	else if (frac <= -0.5)
		t--;
	return t;
}

static bool is_num(const struct wd_iv *v)
{
	return v->kind == WD_IV_INT || v->kind == WD_IV_REAL;
}

static const char *str_of(const struct wd_idxvals *v, int a, int b)
{
	if (v->m[a].kind == WD_IV_STR)
		return v->m[a].s;
	return b >= 0 && v->m[b].kind == WD_IV_STR ? v->m[b].s : NULL;
}

static const struct wd_iv *either(const struct wd_idxvals *v, int a, int b)
{
	return v->m[a].kind != WD_IV_NONE ? &v->m[a] : &v->m[b];
}

struct strs {
	const char *v[WD_IDXREC_NSTR + WD_IDXREC_MAXREFS];
	size_t len[WD_IDXREC_NSTR + WD_IDXREC_MAXREFS];
	/* the earlier string with the same bytes, or -1: stored once (a
	 * model_call's prompt_hash is its prompt_ref, a tool_result's
	 * result_hash its result_ref; the queue holds more records in its
	 * bound before the index falls back to re-reading the segments) */
	signed char same[WD_IDXREC_NSTR + WD_IDXREC_MAXREFS];
	size_t n, bytes;
};
_Static_assert(WD_IDXREC_NSTR + WD_IDXREC_MAXREFS <= 127,
	       "string numbers fit a signed char");

static void keep_str(struct strs *s, const char *v)
{
	size_t l = v ? strlen(v) + 1 : 0;
	int same = -1;
	for (size_t j = 0; v && same < 0 && j < s->n; j++)
		if (s->len[j] == l && !memcmp(s->v[j], v, l))
			same = (int)j;
	s->v[s->n] = v;
	s->len[s->n] = l;
	s->same[s->n++] = (signed char)same;
	s->bytes += same < 0 ? l : 0;
}

size_t wd_idx_build_into(const struct wd_idxvals *v, struct wd_buf *out)
{
	const char *pl = str_of(v, WD_IM_TRACE_PAYLOADS, WD_IM_PAYLOADS);
	const struct wd_iv *rd = either(v, WD_IM_TRACE_RD, WD_IM_RD);
	const struct wd_iv *cost = &v->m[WD_IM_COST];
	/* run_start's uid (other records' "uid" is someone else's: a
	 * payload_read's reader; wd_idx_add reads it of run_start only) */
	const struct wd_iv *uid = &v->m[WD_IM_UID];
	bool has_uid =
	    uid->kind == WD_IV_INT && uid->i >= 0 && uid->i < 4294967295ll;
	const struct wd_iv *rfrom = &v->m[WD_IM_REPLAY_OF_FROM];
	const struct wd_iv *conv = &v->m[WD_IM_REPLAY_CONV];
	const struct wd_iv *dat = &v->m[WD_IM_REPLAY_DIV];
	/* same order as the WD_IDXREC_* slots */
	const char *in[WD_IDXREC_NSTR] = {
	    [WD_IDXREC_RUN] = str_of(v, WD_IM_RUN, -1),
	    [WD_IDXREC_TYPE] = str_of(v, WD_IM_TYPE, -1),
	    [WD_IDXREC_TOOL] = str_of(v, WD_IM_TOOL_A, WD_IM_TOOL_B),
	    [WD_IDXREC_CALL] = str_of(v, WD_IM_CALL_A, WD_IM_CALL_B),
	    [WD_IDXREC_STATUS] = str_of(v, WD_IM_STATUS, -1),
	    [WD_IDXREC_PROMPT] = str_of(v, WD_IM_PROMPT_A, WD_IM_PROMPT_B),
	    [WD_IDXREC_RESULT] = str_of(v, WD_IM_RESULT_A, WD_IM_RESULT_B),
	    [WD_IDXREC_MODEL] = str_of(v, WD_IM_MODEL_A, WD_IM_MODEL_B),
	    [WD_IDXREC_AGENT] = str_of(v, WD_IM_AGENT, -1),
	    [WD_IDXREC_TEAM] = str_of(v, WD_IM_TEAM, -1),
	    [WD_IDXREC_USER] = str_of(v, WD_IM_USER, -1),
	    [WD_IDXREC_PAYLOADS] = pl,
	    [WD_IDXREC_REPLAY_OF] = str_of(v, WD_IM_REPLAY_OF_RUN, -1),
	    [WD_IDXREC_REASON] = str_of(v, WD_IM_REASON, -1),
	    [WD_IDXREC_CHECK] = str_of(v, WD_IM_CHECK, -1),
	};
	/* the strings first, then the refs, in one block */
	struct strs all = {.n = 0};
	for (int i = 0; i < WD_IDXREC_NSTR; i++)
		keep_str(&all, in[i]);
	for (size_t i = 0; i < v->nrefs; i++)
		keep_str(&all, v->refs[i]);
	size_t head = sizeof(struct wd_idxrec) + v->nrefs * sizeof(char *);
	size_t size = (head + all.bytes + 15) & ~(size_t)15;
	size_t at = (out->len + 15) & ~(size_t)15;
	char *pad = wd_buf_room(out, at - out->len + size);
	char *blk = pad + (at - out->len);
	/* the padding before and after the block: defined bytes */
	memset(pad, 0, at - out->len);
	memset(blk + head + all.bytes, 0, size - head - all.bytes);
	wd_buf_end(out, blk + size);
	struct wd_idxrec *f = (struct wd_idxrec *)(void *)blk;
	size_t pos = head; /* strings: offsets from f, + 1 (0: NULL) */
	const struct wd_iv *step = &v->m[WD_IM_STEP];
	*f = (struct wd_idxrec){
	    .size = size,
	    .step = step->kind == WD_IV_INT ? step->i : 0,
	    .in_tokens = to_i64(num(either(v, WD_IM_IN_A, WD_IM_IN_B))),
	    .out_tokens = to_i64(num(either(v, WD_IM_OUT_A, WD_IM_OUT_B))),
	    .cached_tokens = to_i64(num(&v->m[WD_IM_CACHED])),
	    .has_cost = cost->kind != WD_IV_NONE,
	    .cost_nusd =
		cost->kind != WD_IV_NONE ? round_i64(num(cost) * 1e9) : 0,
	    .has_rd = is_num(rd),
	    .rd = is_num(rd) ? to_i64(num(rd)) : 0,
	    .flagged = v->m[WD_IM_FLAGGED].kind == WD_IV_TRUE,
	    .has_uid = has_uid,
	    .uid = has_uid ? uid->i : -1,
	    .replay_from = rfrom->kind == WD_IV_INT ? rfrom->i : -1,
	    .replay_converged = conv->kind == WD_IV_TRUE    ? 1
				: conv->kind == WD_IV_FALSE ? 0
							    : -1,
	    .has_diverged = dat->kind == WD_IV_INT,
	    .diverged_at = dat->kind == WD_IV_INT ? dat->i : 0,
	    .nrefs = v->nrefs,
	    .refs = (const char **)(uintptr_t)sizeof(struct wd_idxrec),
	};
	const char **refs = (const char **)(f + 1);
	size_t at_of[WD_IDXREC_NSTR + WD_IDXREC_MAXREFS];
	for (size_t i = 0; i < all.n; i++) {
		const char *dst = NULL;
		if (all.v[i] && all.same[i] >= 0) {
			at_of[i] = at_of[(size_t)all.same[i]];
			dst = (const char *)(uintptr_t)(at_of[i] + 1);
		} else if (all.v[i]) {
			memcpy(blk + pos, all.v[i], all.len[i]);
			at_of[i] = pos;
			dst = (const char *)(uintptr_t)(pos + 1);
			pos += all.len[i];
		}
		if (i < WD_IDXREC_NSTR)
			f->s[i] = dst;
		else
			refs[i - WD_IDXREC_NSTR] = dst;
	}
	return at;
}

/* The block holds offsets until it sits where it is read. */
void wd_idx_resolve(struct wd_idxrec *f)
{
	char *base = (char *)f;
	for (int i = 0; i < WD_IDXREC_NSTR; i++)
		if (f->s[i])
			f->s[i] = base + (uintptr_t)f->s[i] - 1;
	f->refs = (const char **)(void *)(base + (uintptr_t)f->refs);
	for (unsigned i = 0; i < f->nrefs; i++)
		if (f->refs[i])
			f->refs[i] = base + (uintptr_t)f->refs[i] - 1;
}

struct wd_idxrec *wd_idx_build(const struct wd_idxvals *v)
{
	struct wd_buf b = {0};
	wd_idx_build_into(v, &b); /* at offset 0 of a new buffer */
	struct wd_idxrec *f = (struct wd_idxrec *)(void *)b.data;
	wd_idx_resolve(f);
	return f;
}
