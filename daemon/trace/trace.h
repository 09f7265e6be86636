/* The trace store (DESIGN.md §4 "Trace records"): append-only, hash-chained
 * JSON-lines segments + content-addressed zlib blobs + a SQLite index that is
 * derived from the segments alone (and rebuilt with wd_trace_reindex()).
 *
 * Layout under STATE/trace/:
 *   segments/<first-seq, 16 digits>.jsonl   one record per line
 *   blobs/ab/cdef...                        zlib(payload), name =
 * sha256(payload) index.db                                SQLite, rebuildable
 *
 * A segment line is a compact JSON object (UTF-8, no raw newline) whose
 * first keys are, in this order,
 *   seq, ts ("2026-01-10T12:00:01.123456Z"), prev, run_id, step, type
 * followed by the caller's fields, and whose LAST key is
 *   "crc":"<8 hex>"          crc32c of every byte of the line before ',"crc"'
 * `prev` is "sha256:<hex>" of the previous line's bytes (without '\n'); the
 * first record of the store has prev "sha256:" + 64 zeros. The chain runs
 * across segments. At open, a torn tail of the last segment (bad bytes up
 * to its end with no well-framed line after them: what a crash during a
 * write leaves) is moved to <segment>.torn-<offset>.<ns> and cut, so the
 * store can append again; nothing acknowledged as durable is ever in a torn
 * tail. Damage FOLLOWED by good records is not a torn tail: that segment is
 * kept byte for byte (verify reports the damage and its place), appends go
 * on in a new segment after the highest seq it holds (no seq is reused),
 * chained to its last good record, and readers and the index skip the
 * damaged lines. After metadata retention (wd_trace_gc_ex()) dropped the
 * oldest segments, the first remaining record's prev is the hash of the
 * last dropped record, which a `gc` record names.
 *
 * Record fields the store understands (the index and `warden trace show`
 * read them; any other field is kept as is). OpenTelemetry GenAI names are
 * preferred; the short names in brackets are accepted too:
 *   run_start        agent, team, user, gen_ai.request.model [model],
 *                    trace: {payloads: "full"|"hash_only", retention_days}
 *   model_call       gen_ai.request.model [model], prompt_hash, prompt_ref,
 *                    response_ref, gen_ai.usage.input_tokens [input_tokens],
 *                    gen_ai.usage.output_tokens [output_tokens], cost_usd,
 *                    latency_ms
 *   tool_attempt     gen_ai.tool.name [tool], gen_ai.tool.call.id [call_id],
 *                    side_effects, args | args_ref
 *   tool_result      gen_ai.tool.name [tool], gen_ai.tool.call.id [call_id],
 *                    status ("ok", "error", "denied", "timeout", ...),
 *                    result_hash, result_ref, exit_code, latency_ms
 *   denial           gen_ai.tool.name [tool], call_id, event {...}
 *   approval_request, approval_decision, budget_stop (bound, ...)
 *   run_end          status ("ok" | "failed" | ...), cost_usd, flagged
 *   flag             (marks the run: gc keeps its payloads)
 *   gc               written by wd_trace_gc(): refs[] dropped by payload
 *                    retention, or (run_id "trace-gc", reason
 *                    "metadata_retention") segments[], first_seq, last_seq,
 *                    last_hash of the records metadata retention removed
 * `*_ref` fields hold "sha256:<hex>" naming a blob (wd_trace_put_blob()).
 *
 * Thread safety: every function taking a `struct wd_trace *` may be called
 * from several threads at once, except wd_trace_close().
 *
 * Errors: 0 / -errno plus a message in `err` (may be NULL). A failed write
 * (ENOSPC, EIO, ...) is returned to the caller and latches the store
 * unhealthy (wd_trace_healthy() == false): every later append fails with the
 * same error, so the broker fails closed. Nothing is swallowed. The writer
 * then probes (backoff 100 ms .. 5 s) and, once the store can write again,
 * recovers by itself: the chain goes on after the last record on disk
 * (health.c says why that is safe).
 */
#ifndef WD_TRACE_H
#define WD_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/util.h"

struct wd_trace;
struct wd_otlp;

#define WD_TRACE_REF_LEN 72 /* "sha256:" + 64 hex + NUL */
/* "sha256:<hex>" of data (the form of every hash and ref in records). */
void wd_trace_ref_of(const void *data, size_t len, char out[WD_TRACE_REF_LEN]);

struct wd_trace_opts {
	uint64_t segment_bytes; /* rotate after this size; 0 = 64 MiB */
	unsigned commit_us;	/* group-commit window for non-durable
				 * appends; 0 = 2000 us */
	bool read_only;		/* CLI readers: no tail cut, no writes */
	bool no_index;		/* skip the SQLite index (fuzzing, tools) */
	/* Extra redaction patterns (POSIX extended regexes), applied after
	 * the built-in ones (sk-..., sk-ant-..., Bearer ..., x-api-key,
	 * Authorization). NULL-terminated; may be NULL. */
	const char *const *redact_regexes;
	/* Optional OTLP exporter fed with every appended record (best
	 * effort, never blocks). Not owned. */
	struct wd_otlp *otlp;
};

/* Open (creating if needed) STATE/trace. Cuts a torn tail and checks the
 * chain head of the last segment. */
int wd_trace_open(const char *state_dir, const struct wd_trace_opts *o,
		  struct wd_trace **out, struct wd_err *err);
/* Flushes, syncs, stops the writer thread, frees. NULL is a no-op. */
void wd_trace_close(struct wd_trace *t);

/* Store a payload. Redaction is applied first; the ref is the sha256 of the
 * redacted payload ("sha256:<hex>"). The blob is written and fsynced before
 * this returns, so a record naming it can follow. If `run_id` names a run
 * whose run_start said payloads: hash_only, nothing is stored and only the
 * ref is computed. run_id may be NULL (always stored). */
int wd_trace_put_blob(struct wd_trace *t, const char *run_id, const void *data,
		      size_t len, char out_ref[WD_TRACE_REF_LEN],
		      struct wd_err *err);
/* Read a blob back (decompressed, hash checked: -EBADMSG on mismatch,
 * -ENOENT if absent or dropped by gc). *data is NUL-terminated, free() it. */
int wd_trace_get_blob(struct wd_trace *t, const char *ref, char **data,
		      size_t *len, struct wd_err *err);
/* A blob file's bytes as a store holds them (zlib) back to the payload,
 * checked against ref: another node's blob, shipped to the fleet database
 * (fleet/trace_reads.c). 0, -EINVAL (bad ref), -EBADMSG (corrupt, or not
 * ref's content). *data is NUL-terminated, free() it. */
int wd_trace_blob_decode(const char *ref, const void *z, size_t zlen,
			 char **data, size_t *len, struct wd_err *err);

/* Append one record. `record` must hold run_id (string), step (integer) and
 * type (string); it is redacted in place and the store sets seq, ts and
 * prev in it. durable=true: returns only after the record is on disk
 * (fdatasync) — use it for a tool_attempt whose side_effects != none.
 * Otherwise the record is group-committed within commit_us.
 * seq_out may be NULL. The same without jansson: trace/recw.h. */
int wd_trace_append(struct wd_trace *t, json_t *record, bool durable,
		    uint64_t *seq_out, struct wd_err *err);
/* Wait until everything appended so far is written and fdatasync'ed. */
int wd_trace_flush(struct wd_trace *t, struct wd_err *err);
/* Wait until record `seq` is written to its segment (it survives the
 * process; the disk gets it with the next group commit, within a second),
 * without forcing an fdatasync. 0, or the store's latched -errno. */
int wd_trace_wait_written(struct wd_trace *t, uint64_t seq);
/* False while a write failure is latched (until the store recovered);
 * carries the error in *code if non-NULL. One mutex: cheap enough for a
 * liveness probe. */
bool wd_trace_healthy(struct wd_trace *t, int *code);
struct wd_trace_health {
	int error;		/* latched -errno, 0 = healthy */
	int probe_error;	/* what the last probe got (0 = none yet) */
	char what[96];		/* "write failed", "blobs not stored", ... */
	uint64_t since_ns;	/* wd_now_ns() it became unhealthy */
	uint64_t next_probe_ns; /* wd_now_ns() of the next probe */
	uint64_t failures, recoveries; /* since open */
};
/* Fills h; returns h->error. */
int wd_trace_health(struct wd_trace *t, struct wd_trace_health *h);
/* A write into the store's directory made outside the store (the daemon's
 * run markers, runs/ID.active) failed with err (-ENOSPC, -EIO, ...): the
 * store is latched unhealthy as if its own write had failed, since it
 * lives on the same file system and would fail next; its probe decides
 * when it recovers. A run refused before it wrote any record is then
 * still seen by /healthz. Errors that say nothing about the disk
 * (-ENOMEM, -EEXIST, ...) are ignored: returns whether it latched. */
bool wd_trace_note_write_error(struct wd_trace *t, int err, const char *what);
/* Give back the memory caches hold (the index's page cache); for a daemon
 * at rest. */
void wd_trace_release_memory(struct wd_trace *t);

/* All records of a run in seq order (a new JSON array), for replay and
 * `trace show`. Includes records still in the group-commit buffer. */
int wd_trace_run_records(struct wd_trace *t, const char *run_id, json_t **array,
			 struct wd_err *err);
/* The payloads of a run's step (replay, `warden trace payload`): for each
 * record of RUN at STEP (of TYPE, if not NULL) and each of its `*_ref`
 * fields, {seq, type, field, ref, payload} with the blob's text (hash
 * checked), or {..., error} when it is absent (hash_only run, dropped by
 * gc) or damaged. A new JSON array, empty when the step has no payloads;
 * -ENOENT when the run has no record at that step. */
int wd_trace_step_payloads(struct wd_trace *t, const char *run_id, int64_t step,
			   const char *type, json_t **array,
			   struct wd_err *err);
/* The same over a run's records read elsewhere (another node's, from the
 * fleet database): blob(ctx, ref, ...) reads one blob as
 * wd_trace_get_blob() does. Only refs the records at that step name are
 * read; a hash_only run's none. */
typedef int (*wd_trace_blob_fn)(void *ctx, const char *ref, char **data,
				size_t *len, struct wd_err *err);
int wd_trace_records_payloads(json_t *recs, const char *run_id, int64_t step,
			      const char *type, wd_trace_blob_fn blob,
			      void *ctx, json_t **array, struct wd_err *err);

/* Index queries. Each returns a new JSON array. */
/* Whose runs a query may return (NULL in wd_trace_query: every run): the
 * runs the index records as started by `uid` (run_start's uid) and those
 * of the teams listed. A run whose uid or team the index does not know is
 * not returned. (policy/users.h wd_read_scope is the rule's source.) */
struct wd_trace_reader {
	int64_t uid;
	const char *const *teams;
	size_t n_teams;
};
struct wd_trace_query {
	const char *agent, *team, *user, *tool, *status;
	const char *prompt_hash, *result_hash;
	const char *replay_of; /* runs: the replays of this run (index) */
	uint64_t since_ns;     /* runs started at/after; 0 = any */
	unsigned limit;	       /* 0 = no limit */
	const struct wd_trace_reader *reader;
	uint64_t
	    after_seq; /* records: only seq > after_seq (a page's cursor) */
	/* runs, a page: each row gets page_started (its start, the
	 * cursor's first half; 0 when unknown), and with after_run only
	 * runs after (after_started, after_run) in the page order */
	bool page;
	uint64_t after_started;
	const char *after_run;
};
/* Runs matching: [{run_id, agent, team, user, uid, model, status, started,
 * ended, cost_usd, input_tokens, output_tokens, steps, flagged, ...,
 * replay_of, replay_from, replay_converged, replay_diverged_at, reason}] */
int wd_trace_query_runs(struct wd_trace *t, const struct wd_trace_query *q,
			json_t **array, struct wd_err *err);
/* A page of records through wardend (GET /v1/trace/records?limit=N):
 * WD_TRACE_RECORDS_PAGE when not given, never more than WD_TRACE_RECORDS_MAX.
 */
#define WD_TRACE_RECORDS_PAGE 1000u
#define WD_TRACE_RECORDS_MAX  10000u
/* A page of runs (GET /v1/trace/runs?limit=N&after=CURSOR), the same way */
#define WD_TRACE_RUNS_PAGE 1000u
#define WD_TRACE_RUNS_MAX  5000u
/* Records matching tool/status/prompt_hash/result_hash, by seq:
 * [{seq, run_id, step, type, tool, status, prompt_hash, result_hash, ts,
 * check}] (check: the broker check of a refused tool_result) */
int wd_trace_query_records(struct wd_trace *t, const struct wd_trace_query *q,
			   json_t **array, struct wd_err *err);

/* Shipping the store elsewhere (fleet/ship.c). The indexed records after
 * after_seq, in seq order, at most limit (0: all): [{seq, ts_us, run_id,
 * line: the record's segment line byte for byte (without '\n'), payloads:
 * its run's run_start payloads mode (null: unknown), refs: [the well-formed
 * *_ref values it names], def_refs: [a run_start's definitions' refs: the
 * agent, tools, scopes and route it ran with, shared by the agent's runs]}].
 * A new JSON array. */
int wd_trace_lines(struct wd_trace *t, uint64_t after_seq, unsigned limit,
		   json_t **array, struct wd_err *err);
/* A blob's bytes as stored (zlib; inflated they hash to ref). 0, -ENOENT
 * (absent: dropped by gc, or never stored: a hash_only run's), -EINVAL
 * (not a ref), -errno. *data is malloc'd. */
int wd_trace_blob_stored(struct wd_trace *t, const char *ref, char **data,
			 size_t *len);

/* The hash chain, one line after another (`trace verify`, and the fleet's
 * verify of shipped lines): feed lines in seq order. Returns a set of
 * WD_CHAIN_* (0: the line follows), *rec the parsed record (NULL on a bad
 * frame) and the line's own hash in c->prev for the next. */
struct wd_trace_chain {
	char prev[65];	   /* the previous line's hash; "!" unknown (any) */
	uint64_t next_seq; /* the seq expected; 0 any */
};
#define WD_CHAIN_FRAME 1u /* bad framing or checksum */
#define WD_CHAIN_PREV  2u /* prev is not the previous line's hash */
#define WD_CHAIN_SEQ   4u /* seq is not the next one */
void wd_trace_chain_init(struct wd_trace_chain *c);
unsigned wd_trace_chain_next(struct wd_trace_chain *c, const char *line,
			     size_t len, json_t **rec);

/* Drop the index and rebuild it from the segments. */
int wd_trace_reindex(struct wd_trace *t, struct wd_err *err);

/* Verify framing, the chain and every referenced blob's hash, over the whole
 * store or (run_id != NULL) the records of one run plus the chain around
 * them. Problems are appended to *problems (a new JSON array of
 * {kind, file, offset, line, seq, message}); returns 0 when the store is
 * intact, -EBADMSG when damage was found, another -errno when verification
 * could not run. */
int wd_trace_verify(struct wd_trace *t, const char *run_id, json_t **problems,
		    struct wd_err *err);

/* Retention (gc.c says how). Payloads: for each run whose end is older
 * than its retention_days, not failed and not flagged, delete its payload
 * blobs that no retained run references, and append a `gc` record naming
 * them (metadata stays). Metadata: remove the oldest whole segments whose
 * records are all older than metadata_days (failed and flagged runs
 * included; runs are never split), after a `gc` record (run_id
 * "trace-gc", reason "metadata_retention", segments[], first_seq,
 * last_seq, last_hash) that lets verify accept the shortened chain; their
 * index rows and the blobs only they named go too. */
#define WD_TRACE_METADATA_DAYS 395 /* 13 months (seed 000 step 8) */
struct wd_trace_gc_opts {
	uint64_t now_ns;	/* 0 = now */
	unsigned metadata_days; /* 0 = WD_TRACE_METADATA_DAYS */
	bool keep_metadata;	/* payload retention only */
};
struct wd_trace_gc_stats {
	unsigned blobs;	   /* payload blobs deleted (both kinds) */
	unsigned segments; /* segments removed */
	uint64_t records;  /* records in them */
};
/* 0 or -errno; stats may be NULL. */
int wd_trace_gc_ex(struct wd_trace *t, const struct wd_trace_gc_opts *o,
		   struct wd_trace_gc_stats *stats, struct wd_err *err);
/* wd_trace_gc_ex() with the default metadata retention at now_ns (0 =
 * now). Returns the number of blobs deleted (>= 0) or -errno. */
int wd_trace_gc(struct wd_trace *t, uint64_t now_ns, struct wd_err *err);

/* Paths, for tools and tests. */
const char *wd_trace_dir(struct wd_trace *t);

/* ---- redaction (exposed for tests) ---- */
/* Redact a text in place into a new string (free() it); returns NULL when
 * nothing matched. */
char *wd_trace_redact_text(struct wd_trace *t, const char *s, size_t len,
			   size_t *out_len);
/* The hashes a record carries (prompt_hash, output_hash, args_hash,
 * result_hash) are of what the store keeps, redacted: a hash of the text
 * before redaction would confirm a guess of the secret it hid. These two
 * give the text's sha256:<hex> redacted as a blob is, and a copy of a
 * JSON value redacted as a record's values are (json_decref it). */
void wd_trace_ref_redacted(struct wd_trace *t, const char *s, size_t len,
			   char out[WD_TRACE_REF_LEN]);
json_t *wd_trace_redacted_copy(struct wd_trace *t, const json_t *v);

/* ---- segment reader (exposed for the fuzzer and verify) ---- */
/* Check one line (without '\n'): frame (crc) and JSON. On success returns 0,
 * fills hash_hex (64 hex + NUL) with sha256 of the line and, if rec != NULL,
 * a parsed record. -EBADMSG on a bad frame. */
int wd_trace_check_line(const char *line, size_t len, char hash_hex[65],
			json_t **rec);
/* Walk a buffer of segment bytes: calls cb for each good line; stops at the
 * first bad one. Returns the byte offset where good data ends. */
size_t wd_trace_scan(const char *buf, size_t len, const char *prev_hex,
		     int (*cb)(void *ctx, const char *line, size_t len,
			       uint64_t off, json_t *rec),
		     void *ctx, bool *chain_ok);
/* Like wd_trace_scan() without the chain, but skipping damaged lines: calls
 * cb for every well-framed '\n'-terminated line (readers and the index go
 * on past damage in the middle of a segment; verify reports it). Stops at
 * a partial last line or when cb returns < 0. Returns the offset where it
 * stopped; *bad_lines (may be NULL) counts the lines skipped. */
size_t wd_trace_scan_skip(const char *buf, size_t len,
			  int (*cb)(void *ctx, const char *line, size_t len,
				    uint64_t off, json_t *rec),
			  void *ctx, size_t *bad_lines);

/* A record's "ts" ("2024-01-02T03:04:05.123456Z") -> microseconds since
 * the epoch; 0 on error */
uint64_t wd_trace_parse_ts(const char *s);

#endif
