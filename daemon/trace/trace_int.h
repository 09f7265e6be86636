/* Internals of the trace store shared by its files. Not a public API. */
#ifndef WD_TRACE_INT_H
#define WD_TRACE_INT_H

#include <pthread.h>
#include <regex.h>
#include <sqlite3.h>

#include "trace/trace.h"
#include "common/jsonstr.h"

#define WD_SEG_SUFFIX	".jsonl"
#define WD_CRC_TAIL	",\"crc\":\"" /* then 8 hex, '"', '}' */
#define WD_CRC_TAIL_LEN 18	      /* strlen(",\"crc\":\"xxxxxxxx\"}") */
#define WD_ZERO_HASH                                                           \
	"0000000000000000000000000000000000000000000000000000000000000000"

uint32_t wd_crc32c(uint32_t crc, const void *buf, size_t len);
void wd_sha256_hex(const void *data, size_t len, char out[65]);
/* "sha256:<64 hex>" -> true if well formed (lowercase hex). */
bool wd_trace_ref_ok(const char *ref);

/* What the index reads from a record (index.c, wd_idx_extract()): one
 * allocation, strings in the same block. */
enum {
	WD_IDXREC_RUN,
	WD_IDXREC_TYPE,
	WD_IDXREC_TOOL,
	WD_IDXREC_CALL,
	WD_IDXREC_STATUS,
	WD_IDXREC_PROMPT,
	WD_IDXREC_RESULT,
	WD_IDXREC_MODEL,
	WD_IDXREC_AGENT,
	WD_IDXREC_TEAM,
	WD_IDXREC_USER,
	WD_IDXREC_PAYLOADS,
	WD_IDXREC_REPLAY_OF, /* run_start: replay_of.run_id */
	WD_IDXREC_REASON,    /* run_end: reason */
	WD_IDXREC_CHECK,     /* tool_result: the broker check that refused */
	WD_IDXREC_NSTR,
	WD_IDXREC_MAXREFS = 64,
};

struct wd_idxrec {
	size_t size; /* bytes of the whole block */
	const char *s[WD_IDXREC_NSTR];
	int64_t step, in_tokens, out_tokens, cost_nusd, rd;
	int64_t cached_tokens; /* model_call: prompt tokens read from a cache */
	int64_t uid;	       /* run_start: the caller's uid (has_uid) */
	int64_t replay_from;   /* run_start: replay_of.from_step */
	int64_t diverged_at;   /* run_end: replay.diverged_at (has_diverged) */
	int replay_converged;  /* run_end: replay.converged (1/0; -1 none) */
	bool has_cost, has_rd, flagged, has_uid, has_diverged;
	unsigned nrefs;
	const char **refs; /* *_ref values that are well-formed refs */
};

/* The record members the index reads (idxrec.c), as found either by
 * walking a parsed record (wd_idx_extract) or by the typed encoder while it
 * writes one (recw.c): one rule turns them into a wd_idxrec
 * (wd_idx_build), so a live row equals a rebuilt one. Where two names are
 * listed, the first one wins (A), else the second (B). */
enum {
	WD_IM_TRACE,
	WD_IM_PAYLOADS,
	WD_IM_RD,
	WD_IM_COST,
	WD_IM_RUN,
	WD_IM_TYPE,
	WD_IM_TOOL_A,
	WD_IM_TOOL_B,
	WD_IM_CALL_A,
	WD_IM_CALL_B,
	WD_IM_STATUS,
	WD_IM_PROMPT_A,
	WD_IM_PROMPT_B,
	WD_IM_RESULT_A,
	WD_IM_RESULT_B,
	WD_IM_MODEL_A,
	WD_IM_MODEL_B,
	WD_IM_AGENT,
	WD_IM_TEAM,
	WD_IM_USER,
	WD_IM_STEP,
	WD_IM_IN_A,
	WD_IM_IN_B,
	WD_IM_OUT_A,
	WD_IM_OUT_B,
	WD_IM_FLAGGED,
	WD_IM_CACHED,
	WD_IM_UID,
	WD_IM_REPLAY_OF,
	WD_IM_REPLAY,
	WD_IM_REASON,
	WD_IM_CHECK,
	WD_IM_N,
	/* members of the objects above the index reads */
	WD_IM_TRACE_PAYLOADS = WD_IM_N, /* trace.payloads */
	WD_IM_TRACE_RD,			/* trace.retention_days */
	WD_IM_REPLAY_OF_RUN,		/* replay_of.run_id */
	WD_IM_REPLAY_OF_FROM,		/* replay_of.from_step */
	WD_IM_REPLAY_CONV,		/* replay.converged */
	WD_IM_REPLAY_DIV,		/* replay.diverged_at */
	WD_IM_ALL,
};
enum wd_iv_kind {
	WD_IV_NONE = 0, /* absent */
	WD_IV_STR,
	WD_IV_INT,
	WD_IV_REAL,
	WD_IV_TRUE,
	WD_IV_FALSE,
	WD_IV_NULL,
	WD_IV_OBJECT,
	WD_IV_ARRAY,
};
struct wd_iv {
	enum wd_iv_kind kind;
	const char *s; /* WD_IV_STR: NUL-terminated */
	int64_t i;     /* WD_IV_INT */
	double d;      /* WD_IV_REAL */
};
struct wd_idxvals {
	struct wd_iv m[WD_IM_ALL];
	unsigned nrefs;
	const char *refs[WD_IDXREC_MAXREFS]; /* well-formed *_ref values */
};
/* Which member a top-level key of n bytes is (WD_IM_*), -1 if none. */
int wd_idx_member(const char *k, size_t n);
/* Which member of the object at top-level member `parent` (WD_IM_TRACE,
 * WD_IM_REPLAY_OF, WD_IM_REPLAY) a key is, -1 if none. */
int wd_idx_submember(int parent, const char *k, size_t n);
/* The wd_idxrec of what was found (one allocation; free() it). */
struct wd_idxrec *wd_idx_build(const struct wd_idxvals *v);
/* The same appended to out as one block, 16-byte aligned and movable (its
 * string pointers are offsets until wd_idx_resolve() at the block's final
 * place): the append path copies it into the batch, the index queue, and
 * allocates nothing per record. Returns the block's offset in out; its
 * size is ->size. */
size_t wd_idx_build_into(const struct wd_idxvals *v, struct wd_buf *out);
void wd_idx_resolve(struct wd_idxrec *f);
/* The index fields a typed record (trace/recw.h) noted so far, as
 * wd_idx_build gives them (free() it): for the tests and the fuzzer. */
struct wd_recw;
struct wd_idxrec *wd_recw_idx(const struct wd_recw *w);
/* wd_idx_extract's first half: the members of a parsed record. */
void wd_idx_extract_vals(json_t *rec, struct wd_idxvals *out);
/* The same from a segment line's bytes, with its seq and ts (NULL if not a
 * string), without jansson (idxscan.c): 0, or -1 for a line it does not
 * take, which json_loadb must then judge. The strings are copied into
 * scratch (len + 1 bytes), which must outlive the values. */
int wd_idx_scan_line(const char *line, size_t len, char *scratch,
		     struct wd_idxvals *out, uint64_t *seq, const char **ts);
/* The JSON of a framed line: an object with an integer seq and a string
 * prev (wd_trace_check_line's parse), or -EBADMSG. */
int wd_trace_parse_line(const char *line, size_t len, json_t **rec);
/* wd_trace_scan_skip checking frames only: cb gets rec = NULL. */
size_t wd_trace_scan_frames(const char *buf, size_t len,
			    int (*cb)(void *ctx, const char *line, size_t len,
				      uint64_t off, json_t *rec),
			    void *ctx);

/* One record waiting in the group-commit buffer: where its line sits in the
 * batch buffer and what the index needs from it. */
struct wd_pend {
	uint64_t seq;
	uint64_t ts_us;
	size_t off, len;       /* line in the batch buffer, without '\n' */
	size_t idx_off;	       /* index fields: a wd_idx_build_into block */
	size_t idx_len;	       /* in the batch's (queue's) idx arena; 0 none */
	uint64_t seg, fileoff; /* where the writer put it */
};

/* A blob put but not stored yet: the writer settles it (compress, write,
 * fdatasync, rename) before it writes any batch, so a record naming it
 * never reaches a segment first; its directory is synced before the next
 * segment sync. */
struct wd_blob_pend {
	char hex[65];
	char *data; /* the payload as hashed (owned) */
	size_t len;
};

struct wd_batch {
	struct wd_buf buf;
	struct wd_buf ia; /* the records' index blocks (wd_pend.idx_off) */
	struct wd_pend *v;
	size_t n, cap;
	bool want_sync;
	uint64_t t0; /* wd_now_ns() of the first record */
};

/* ---- index (index.c) ---- */
struct wd_idx;
int wd_idx_open(const char *path, struct wd_idx **out, struct wd_err *err);
void wd_idx_close(struct wd_idx *x);
int wd_idx_begin(struct wd_idx *x);
int wd_idx_commit(struct wd_idx *x);
int wd_idx_rollback(struct wd_idx *x);
/* Idempotent: a seq already present is ignored. */
int wd_idx_add(struct wd_idx *x, uint64_t seq, uint64_t seg, uint64_t off,
	       uint64_t len, uint64_t ts_us, const struct wd_idxrec *f);
/* The same with f (and its strings) unchanged where it is until the
 * transaction's commit or rollback: a record above every indexed seq is
 * then inserted with others, several rows a statement. */
int wd_idx_add_kept(struct wd_idx *x, uint64_t seq, uint64_t seg, uint64_t off,
		    uint64_t len, uint64_t ts_us, const struct wd_idxrec *f);
int wd_idx_clear(struct wd_idx *x);
/* Where indexing stopped: last indexed seq and the end of its line. */
int wd_idx_tail(struct wd_idx *x, uint64_t *seq, uint64_t *seg, uint64_t *end);
sqlite3 *wd_idx_db(struct wd_idx *x);
/* The subset of a record the index reads (free() it). */
struct wd_idxrec *wd_idx_extract(json_t *rec);
/* The 8-byte key a hash column is looked up by: the first 64 bits of a
 * "sha256:<hex>" value, else a 64-bit hash of the text. Queries compare the
 * text as well. */
int64_t wd_idx_key(const char *s);
/* hkeys: the records by the key of their prompt or result hash, in
 * buckets of 2^WD_IDX_HKEY_SHIFT seqs (b = seq >> shift). WD_IDX_HKEY_SEQS
 * is a subquery of the seqs whose hash has the key given as its %lld. */
#define WD_IDX_HKEY_SHIFT   16
#define WD_IDX_STR_(x)	    #x
#define WD_IDX_STR(x)	    WD_IDX_STR_(x)
#define WD_IDX_HKEY_SHIFT_S WD_IDX_STR(WD_IDX_HKEY_SHIFT)
#define WD_IDX_HKEY_SEQS                                                       \
	"WITH RECURSIVE hb(b) AS (SELECT (SELECT min(seq) FROM records) "      \
	">> " WD_IDX_HKEY_SHIFT_S " UNION ALL SELECT b + 1 FROM hb WHERE b < " \
	"(SELECT max(seq) FROM records) >> " WD_IDX_HKEY_SHIFT_S ") SELECT "   \
	"h.seq FROM hb JOIN hkeys h ON h.b = hb.b AND h.key = %lld"
/* A line at off of len bytes lies within a segment of size bytes (an
 * index row is checked before its bytes are read). */
static inline bool wd_trace_span_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return len <= size && off <= size - len;
}

struct wd_trace {
	char *root, *segdir, *blobdir;
	struct wd_trace_opts o;
	struct wd_idx *idx;
	regex_t *rx;
	size_t nrx;

	pthread_mutex_t mu;  /* appends, batch, seq/prev, health */
	pthread_cond_t wake; /* writer: work to do */
	pthread_cond_t done; /* appenders: progress */
	uint64_t next_seq;
	char prev[65];
	uint64_t ts_sec; /* fmt_ts() cache */
	char ts_prefix[40];
	struct wd_batch cur;
	uint64_t written_seq, synced_seq;  /* last seq on file / on disk */
	uint64_t written_seg, written_end; /* where written_seq's line ends */
	uint64_t indexed_seq;		   /* last seq in the index */
	int error;			   /* latched -errno, 0 = healthy */
	/* health.c: the hash of the last line written (what `prev` goes
	 * back to when an unhealthy store recovers), the failure being
	 * probed, and waiters' view of recoveries (epoch moves at each) */
	char written_prev[65];
	int last_error;
	uint64_t error_since_ns, probe_at_ns, probe_delay_ns;
	uint64_t epoch, recoveries, failures;
	char error_what[96];
	bool stop, have_writer;
	pthread_t writer;
	int flush_waiters, vis_waiters;

	/* owned by the writer thread (or the opener before it starts) */
	struct wd_batch spare;
	int segfd;
	uint64_t seg_first, seg_size;
	uint64_t last_sync_ns;
	/* the segment's bytes before wb_off were handed to writeback, those
	 * before clean_off were dropped from the page cache once synced
	 * (segwrite.c) */
	uint64_t wb_off, clean_off;

	pthread_mutex_t idx_mu; /* the SQLite handle */

	/* index thread; iq and iq_bytes under mu */
	pthread_t indexer;
	bool have_indexer, idx_stop;
	pthread_cond_t iwake;
	struct {
		struct wd_pend *v;
		size_t n, cap;
		struct wd_buf ia; /* their index blocks */
	} iq;
	size_t iq_bytes;
	bool iq_overflow; /* written under mu, read racily by appenders */

	/* blobs put but not yet settled; settle_mu serializes settling so
	 * that the writer's settle completes every blob put before it */
	pthread_mutex_t blob_mu, settle_mu;
	struct {
		struct wd_blob_pend *v;
		size_t n, cap;
	} bq;
	size_t bq_bytes;
	/* blob directories with names not yet synced (under settle_mu):
	 * fsynced before the next segment fdatasync */
	bool dirty_dirs[256];

	/* open only: the well-framed lines of the last segment (load_tail),
	 * to check the index's rows of it */
	struct {
		uint64_t seg;
		uint64_t *off, *len;
		size_t n, cap;
	} dmg;

	/* hash_only runs seen in run_start records (for put_blob) */
	pthread_mutex_t runs_mu;
	json_t *hash_only; /* object run_id -> true */
};

/* Bytes of index fields the writer queues for the index thread before it
 * falls back to catch-up from the segments (tests lower it), and how often
 * that happened. */
extern size_t wd_trace_iq_limit;
extern unsigned long wd_trace_iq_overflows;

/* Put every queued blob in place under its name (before a batch is
 * written), and sync the ones put in place (before a segment is synced).
 * 0 or the -errno that also latched the store unhealthy. Any thread. */
int wd_trace_blobs_settle(struct wd_trace *t);
int wd_trace_blobs_sync(struct wd_trace *t);

/* Writer, under t->mu: hand a written batch's index fields to the index
 * thread (indexq.c), or switch it to catch-up from the segments. */
void wd_trace_index_enqueue(struct wd_trace *t, struct wd_batch *b);
void *wd_trace_indexer_main(void *arg);

int wd_trace_read_line(struct wd_trace *t, uint64_t seg, uint64_t off,
		       uint64_t len, json_t **rec);
int wd_trace_visible(struct wd_trace *t);
int wd_trace_idx_catch_up(struct wd_trace *t, struct wd_err *err);
/* Index thread: index what the segments hold after the index's tail, up to
 * seq `upto` (its line ends at byte upto_end of segment upto_seg),
 * publishing indexed_seq as it commits. */
int wd_trace_idx_catch_up_live(struct wd_trace *t, uint64_t upto,
			       uint64_t upto_seg, uint64_t upto_end,
			       struct wd_err *err);
/* Sorted list of segment first-seqs; free() it. */
int wd_trace_list_segments(struct wd_trace *t, uint64_t **out, size_t *n);
char *wd_trace_seg_path(struct wd_trace *t, uint64_t first);
/* segwrite.c, the writer thread's (or the opener's before it starts):
 * open segment `first` for appending, closing (and dropping from the
 * page cache) the current one, synced by the caller; the blobs settled so
 * far, then the segment, to disk, and what is on disk dropped from the
 * page cache (-1 with errno; a durable record never names a blob that is
 * not); write a batch, rotating segments (*nw: its records that reached
 * a segment; on failure the partial write is cut back off, best effort).
 * 0 or -errno. */
int wd_trace_seg_open(struct wd_trace *t, uint64_t first);
int wd_trace_seg_sync(struct wd_trace *t);
int wd_trace_write_batch(struct wd_trace *t, struct wd_batch *b, bool sync,
			 size_t *nw);
char *wd_trace_blob_path(struct wd_trace *t, const char *hex);
int wd_trace_load_blob(struct wd_trace *t, const char *hex, char **data,
		       size_t *len);
void wd_trace_redact_json(struct wd_trace *t, json_t *v);
/* A key whose string value is redacted whole (authorization, api_key...;
 * any case). */
bool wd_trace_secret_key(const char *k);
/* Where a built-in redaction pattern could start: a byte a and the next
 * b, both ORed with 0x20 (case folded), are "sk", "be", "x-" or "au" (the
 * pairs redact.c's scanner stops at and recw.c's plain check refuses). */
static inline bool wd_redact_pair(unsigned char a, unsigned char b)
{
	return (a == 's' && b == 'k') || (a == 'b' && b == 'e') ||
	       (a == 'x' && b == '-') || (a == 'a' && b == 'u');
}
#if defined(__SSE2__)
#include <emmintrin.h>
/* the same for 16 bytes: 0xff where a[i], b[i] (folded) are such a pair */
static inline __m128i wd_redact_pairs16(__m128i a, __m128i b)
{
#define WD_PAIR(x, y)                                                          \
	_mm_and_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8(x)),                     \
		      _mm_cmpeq_epi8(b, _mm_set1_epi8(y)))
	return _mm_or_si128(_mm_or_si128(WD_PAIR('s', 'k'), WD_PAIR('b', 'e')),
			    _mm_or_si128(WD_PAIR('x', '-'), WD_PAIR('a', 'u')));
#undef WD_PAIR
}
#endif
/* Frame one record into the group-commit batch (store.c): mid is its
 * compact JSON ({"run_id":...}, midlen bytes, redacted), idx its index
 * fields (a wd_idx_build_into block, copied; may be NULL). Fills the seq, ts
 * and the previous line's hash it got; waits for the disk when durable. 0 or
 * -errno. */
int wd_trace_append_body(struct wd_trace *t, const char *mid, size_t midlen,
			 const struct wd_idxrec *idx, bool durable,
			 uint64_t *seq_out, char ts[40], char prev_hex[65],
			 struct wd_err *err);
/* A run_start saying payloads: hash_only (payloads: trace.payloads, else
 * the top-level payloads) adds run_id to the store's hash_only runs, a
 * run_end takes it out (put_blob stores nothing for those runs). */
void wd_trace_note_run(struct wd_trace *t, const char *type, const char *run_id,
		       const char *payloads);
bool wd_trace_is_ref_key(const char *key);
/* Compact JSON of v appended to b; -EINVAL on NaN/Inf. */
int wd_trace_emit(struct wd_buf *b, json_t *v);
int wd_trace_emit_member(struct wd_buf *b, const char *k, json_t *v);
void wd_otlp_feed(struct wd_otlp *o, json_t *rec);

/* health.c. Latch the store unhealthy with -errno r (t->mu held): every
 * append fails until the writer's probe finds the store writable again. */
void wd_trace_latch_locked(struct wd_trace *t, int r, const char *what);
/* Writer thread, t->mu held, nothing pending (t->cur empty), store
 * unhealthy: probe when due (the lock dropped around it) and recover. */
void wd_trace_probe_locked(struct wd_trace *t);
/* The hash of line b->v[i] into t->written_prev (writer, t->mu held). */
void wd_trace_note_written(struct wd_trace *t, struct wd_batch *b, size_t i);

/* tail.c: the open-time reading of the last segment (see there). */
int wd_trace_load_tail(struct wd_trace *t, struct wd_err *err);
bool wd_trace_idx_matches_last(struct wd_trace *t);
int wd_trace_load_hash_only(struct wd_trace *t);

#endif
