/* Landlock denials through the audit subsystem (Landlock ABI >= 7, kernel
 * >= 6.15): the kernel writes AUDIT_LANDLOCK_ACCESS (1423) records
 *   "audit(T:SERIAL): domain=HEX blockers=fs.read_file path=\"/etc/x\" ..."
 * and, the first time a domain shows up, AUDIT_LANDLOCK_DOMAIN (1424)
 *   "domain=HEX status=allocated mode=enforcing pid=N uid=N exe=.. comm=.."
 * (and "status=deallocated denials=N" when it goes away). We read them from
 * the audit netlink multicast group AUDIT_NLGRP_READLOG (read-only, needs
 * CAP_AUDIT_READ; works next to auditd or without it) and convert each
 * access record into a struct wd_event (source landlock, domain id, pid,
 * target = path or blocker).
 *
 * Conditions, measured on this node (kernel 6.18, CONFIG_AUDIT=y, no
 * auditd): records are only produced while audit is enabled
 * (audit_enabled=1). wd_landlock_audit_open(.., enable=true, ..) turns it
 * on with an AUDIT_SET netlink message (CAP_AUDIT_CONTROL; no auditctl)
 * when it is off, and wd_landlock_audit_close() restores the previous
 * state. Enabling audit with no rules costs every process created after
 * that an audit context. Denials after an execve are logged only if the
 * sandbox passed LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON to
 * landlock_restrict_self(); same-exec denials are logged by default.
 * The pid of a denial comes from the SYSCALL record of the same event when
 * the task has an audit context, else from the domain's allocation record
 * (the task that created the domain). Numbers (pid, uid, syscall, ...) are
 * printed bare; only untrusted strings (path, name, exe, comm, ...) may be
 * hex-encoded, so "pid=5347" is never decoded as hex.
 *
 * Errors: 0 / -errno, message in err.
 */
#ifndef WD_LANDLOCK_AUDIT_H
#define WD_LANDLOCK_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/util.h"
#include "events/event.h"

#ifndef AUDIT_LANDLOCK_ACCESS
#define AUDIT_LANDLOCK_ACCESS 1423
#endif
#ifndef AUDIT_LANDLOCK_DOMAIN
#define AUDIT_LANDLOCK_DOMAIN 1424
#endif

struct wd_landlock_audit;

int wd_landlock_audit_open(struct wd_landlock_audit **out, bool enable_audit,
			   struct wd_err *err);
/* Pollable fd (readable when records are queued). */
int wd_landlock_audit_fd(struct wd_landlock_audit *a);
/* Drain queued records without blocking; one callback per Landlock access
 * denial whose event is complete (its EOE or a later event's record was
 * read): kauditd multicasts the records of one event one by one, and a
 * drain may end between the access record and its domain/SYSCALL records,
 * which say whose denial it was. An event still open, or one with no
 * SYSCALL record whose domain's allocation record has not come yet, is
 * kept for a later read or wd_landlock_audit_flush(). Returns events
 * delivered or -errno. Overflow of the socket's receive queue (ENOBUFS) is
 * counted in wd_landlock_audit_lost(). */
int wd_landlock_audit_read(struct wd_landlock_audit *a,
			   void (*cb)(const struct wd_event *ev, void *arg),
			   void *arg);
/* Deliver whatever wd_landlock_audit_read() kept back, as it is: call once
 * no more records of interest can come (after a barrier in the stream).
 * Returns events delivered. */
int wd_landlock_audit_flush(struct wd_landlock_audit *a,
			    void (*cb)(const struct wd_event *ev, void *arg),
			    void *arg);
uint64_t wd_landlock_audit_lost(struct wd_landlock_audit *a);
/* Every reader's overflows since the process started (wardend's loss
 * counter "landlock_audit", events/stream.h): each lost one or more audit
 * records of the node, not all necessarily a tool call's. */
uint64_t wd_landlock_audit_lost_total(void);
/* Leave audit on at close even if this reader turned it on: several
 * readers (concurrent calls) would otherwise switch it off under each
 * other. */
void wd_landlock_audit_keep_enabled(struct wd_landlock_audit *a);
/* The kernel said audit was on at `at_ns` (wd_now_ns(); another AUDIT_GET
 * of this process, the probe's): a wd_landlock_audit_open within the
 * second after that does not ask again, as after one of its own. */
void wd_landlock_audit_known_on(uint64_t at_ns);
/* The pid (initial pid namespace) of the task that created Landlock domain
 * `domain_id`, from the domain's allocation record if it has been read
 * (it comes with the domain's first denial); 0 if unknown. */
int wd_landlock_audit_domain_creator(struct wd_landlock_audit *a,
				     uint64_t domain_id);
/* A barrier in the audit stream. kauditd delivers every record from one
 * FIFO, each to all multicast readers in turn: a user record (tagged with
 * `tag` and a nonce) sent now comes back to this reader after every record
 * queued before it. Reads (delivering through cb, as
 * wd_landlock_audit_read) until it has come: 0. -ETIMEDOUT after
 * timeout_ms or -errno when it cannot come (audit switched off drops user
 * records; a filter; no CAP_AUDIT_WRITE): the caller drains another way,
 * and the next open asks the kernel whether audit is still on. */
int wd_landlock_audit_barrier(struct wd_landlock_audit *a, const char *tag,
			      int timeout_ms,
			      void (*cb)(const struct wd_event *ev, void *arg),
			      void *arg);
/* Done with the reader. Kept open for a later wd_landlock_audit_open of
 * the process (a few idle readers at most; emptied when taken again)
 * unless it restores audit's state or lost records; else closed. */
void wd_landlock_audit_close(struct wd_landlock_audit *a);
/* Close the idle readers (tests; shutdown). */
void wd_landlock_audit_pool_clear(void);
int wd_landlock_audit_pool_size(void);

/* Pure parser (exposed for tests and fuzzing): one record's text (after
 * the netlink header, "audit(...): k=v ...") of type `type`. For an access
 * record fills out (source landlock, domain_id, target, kind) and returns
 * 1; for other types returns 0 and leaves out alone; -EINVAL if malformed.
 * serial gets the record's event serial when non-NULL. */
int wd_landlock_audit_parse(int type, const char *text, size_t len,
			    struct wd_event *out, uint64_t *serial);
/* One record (type, text after the netlink header) into the reader, as
 * wd_landlock_audit_read() does for each record it receives (exposed for
 * tests): returns the events it completed and delivered through cb. */
int wd_landlock_audit_feed(struct wd_landlock_audit *a, int type,
			   const char *text, size_t len,
			   void (*cb)(const struct wd_event *ev, void *arg),
			   void *arg);
/* Value of key `k` in a record (quoted, bare, or hex-encoded for the keys
 * the kernel writes as untrusted strings: path, name, exe, comm, ...), into
 * buf. 0, or -ENOENT. */
int wd_audit_field(const char *text, size_t len, const char *k, char *buf,
		   size_t buflen);

#endif
