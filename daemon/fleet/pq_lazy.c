/* libpq for wardend, loaded when --fleet first asks for it.
 *
 * A single node (no --fleet) never talks to PostgreSQL: it needs no libpq
 * installed, and none is mapped into it (tests/integration/fleet_lazy.sh
 * reads /proc/PID/maps). wd_fleet_conninfo, the first fleet call of any
 * start with --fleet, loads it (fl_pq_load) and refuses the start with the
 * reason when it cannot; every call below comes after that. A call without
 * a loaded library ends the process as the dynamic loader would have. */
#include "common/lazy.h"
#include "common/util.h"
#include "fleet/fleet_int.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

enum {
	CONNECTDB_PARAMS,
	FINISH,
	STATUS,
	ERROR_MESSAGE,
	SOCKET,
	CONNINFO_PARSE,
	CONNINFO_FREE,
	EXEC,
	EXEC_PARAMS,
	SEND_QUERY_PARAMS,
	GET_RESULT,
	IS_BUSY,
	CONSUME_INPUT,
	NOTIFIES,
	FREEMEM,
	RESULT_STATUS,
	RESULT_ERROR_MESSAGE,
	CLEAR,
	NTUPLES,
	GETVALUE,
	GETLENGTH,
	GETISNULL,
	CMD_TUPLES,
	N_SYM
};
static const char *const names[] = {
    "PQconnectdbParams",
    "PQfinish",
    "PQstatus",
    "PQerrorMessage",
    "PQsocket",
    "PQconninfoParse",
    "PQconninfoFree",
    "PQexec",
    "PQexecParams",
    "PQsendQueryParams",
    "PQgetResult",
    "PQisBusy",
    "PQconsumeInput",
    "PQnotifies",
    "PQfreemem",
    "PQresultStatus",
    "PQresultErrorMessage",
    "PQclear",
    "PQntuples",
    "PQgetvalue",
    "PQgetlength",
    "PQgetisnull",
    "PQcmdTuples",
};
#define PQ_SONAME "libpq.so.5"
WD_LAZY_LIBRARY(wd_lazy_open, PQ_SONAME);

int fl_pq_load(struct wd_err *err)
{
	if (ready())
		return 0;
	return wd_err_set(err, -ENOENT,
			  "--fleet: cannot load PostgreSQL's client library "
			  "%s (Debian's libpq5 package; see the warning above)",
			  PQ_SONAME);
}

static void need(void)
{
	if (ready())
		return;
	fprintf(stderr, "wardend: cannot use %s (see above): stopping\n",
		PQ_SONAME);
	_exit(127);
}

#define C(T, S) (need(), F(T, S))

PGconn *PQconnectdbParams(const char *const *k, const char *const *v, int e)
{
	return C(PGconn * (*)(const char *const *, const char *const *, int),
		 CONNECTDB_PARAMS)(k, v, e);
}

void PQfinish(PGconn *c)
{
	C(void (*)(PGconn *), FINISH)(c);
}

ConnStatusType PQstatus(const PGconn *c)
{
	return C(ConnStatusType(*)(const PGconn *), STATUS)(c);
}

char *PQerrorMessage(const PGconn *c)
{
	return C(char *(*)(const PGconn *), ERROR_MESSAGE)(c);
}

int PQsocket(const PGconn *c)
{
	return C(int (*)(const PGconn *), SOCKET)(c);
}

PQconninfoOption *PQconninfoParse(const char *s, char **errmsg)
{
	return C(PQconninfoOption * (*)(const char *, char **),
		 CONNINFO_PARSE)(s, errmsg);
}

void PQconninfoFree(PQconninfoOption *o)
{
	C(void (*)(PQconninfoOption *), CONNINFO_FREE)(o);
}

PGresult *PQexec(PGconn *c, const char *q)
{
	return C(PGresult * (*)(PGconn *, const char *), EXEC)(c, q);
}

PGresult *PQexecParams(PGconn *c, const char *q, int n, const Oid *types,
		       const char *const *vals, const int *lens,
		       const int *fmts, int rfmt)
{
	return C(PGresult * (*)(PGconn *, const char *, int, const Oid *,
				const char *const *, const int *, const int *,
				int),
		 EXEC_PARAMS)(c, q, n, types, vals, lens, fmts, rfmt);
}

int PQsendQueryParams(PGconn *c, const char *q, int n, const Oid *types,
		      const char *const *vals, const int *lens, const int *fmts,
		      int rfmt)
{
	return C(int (*)(PGconn *, const char *, int, const Oid *,
			 const char *const *, const int *, const int *, int),
		 SEND_QUERY_PARAMS)(c, q, n, types, vals, lens, fmts, rfmt);
}

PGresult *PQgetResult(PGconn *c)
{
	return C(PGresult * (*)(PGconn *), GET_RESULT)(c);
}

int PQisBusy(PGconn *c)
{
	return C(int (*)(PGconn *), IS_BUSY)(c);
}

int PQconsumeInput(PGconn *c)
{
	return C(int (*)(PGconn *), CONSUME_INPUT)(c);
}

PGnotify *PQnotifies(PGconn *c)
{
	return C(PGnotify * (*)(PGconn *), NOTIFIES)(c);
}

void PQfreemem(void *p)
{
	C(void (*)(void *), FREEMEM)(p);
}

ExecStatusType PQresultStatus(const PGresult *r)
{
	return C(ExecStatusType(*)(const PGresult *), RESULT_STATUS)(r);
}

char *PQresultErrorMessage(const PGresult *r)
{
	return C(char *(*)(const PGresult *), RESULT_ERROR_MESSAGE)(r);
}

void PQclear(PGresult *r)
{
	C(void (*)(PGresult *), CLEAR)(r);
}

int PQntuples(const PGresult *r)
{
	return C(int (*)(const PGresult *), NTUPLES)(r);
}

char *PQgetvalue(const PGresult *r, int t, int f)
{
	return C(char *(*)(const PGresult *, int, int), GETVALUE)(r, t, f);
}

int PQgetlength(const PGresult *r, int t, int f)
{
	return C(int (*)(const PGresult *, int, int), GETLENGTH)(r, t, f);
}

int PQgetisnull(const PGresult *r, int t, int f)
{
	return C(int (*)(const PGresult *, int, int), GETISNULL)(r, t, f);
}

char *PQcmdTuples(PGresult *r)
{
	return C(char *(*)(PGresult *), CMD_TUPLES)(r);
}
