/*
** vtab/bpf.c - a user's eBPF programs from SQL: a connection's registry of
** named programs, and the two functions over it.
**
**   SELECT csq_bpf_load('near', readfile('near.o'), 'REAL,REAL,REAL,REAL,REAL');
**   SELECT count(*) FROM trips WHERE csq_bpf('near', lat, lon, 40.75, -73.99, 2.0);
**   SELECT csq_bpf('luhn', card) FROM cards;          -- as a function: an INTEGER
**
** csq_bpf_load(name, object, types) takes the object as clang writes it (or
** raw instructions), checks it (device/format/bpf.c: csq's rules), runs the
** eBPF verifier (device/engine/bpf_rt.c) and registers it under name for this
** connection, replacing an earlier program of that name; it returns the
** number of instructions. types is the comma-separated list of the SQL
** arguments' types (INTEGER, REAL, TEXT, BLOB or ANY); it fixes how many
** arguments a call passes, and converts an INTEGER passed for a REAL.
** It is SQLITE_DIRECTONLY: a view or trigger of a database file from
** elsewhere cannot register code.
**
** csq_bpf(name, args...) runs the program on the host, over the slots the
** arguments make (device/format/bpf.h), with the same runtime the device
** uses, and returns its u64 as an INTEGER. csq_bpf_col(col, name) is
** csq_bpf(name, col) spelled the one way SQLite offers a function to a
** virtual table as a constraint (an overloaded function of two arguments
** whose first is a column: xFindFunction, vt_bpf_find_function): in a
** WHERE on a csq table it runs on the device, as a term of the filter
** program. csq_bpf(name, ...) over several columns is pushed by csq's own
** planner (csq_query views, the csq shell: planner/split.c) under an
** aggregate; elsewhere it runs here, on the rows the device returns. Either
** way the program and the slots are the same, so the answer does not depend
** on where it ran.
**
** A program is never freed while the connection is open (a statement may
** hold it): loading a name again puts a new entry in front of the old one.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"
#include "device/engine/bpf_rt.h"
#include "device/format/bpf.h"

struct vt_bpf {
  char *zName;
  int nArg;
  uint8_t aDecl[CSQ_BPF_MAX_ARGS];
  char *zTypes; /* as given, for messages */
  uint8_t *aIns;
  uint32_t nIns;
  dev_bpf *pRt; /* the host's compiled copy */
  vt_bpf *pNext;
};

const vt_bpf *vt_bpf_find(vt_conn *pConn, const char *zName) {
  for (const vt_bpf *p = pConn->pBpf; p; p = p->pNext)
    if (sqlite3_stricmp(p->zName, zName) == 0) return p;
  return NULL;
}

int vt_bpf_nArg(const vt_bpf *p) {
  return p->nArg;
}

void vt_bpf_code(const vt_bpf *p, const uint8_t **paIns, uint32_t *pnIns, const uint8_t **paDecl) {
  *paIns = p->aIns;
  *pnIns = p->nIns;
  *paDecl = p->aDecl;
}

void vt_bpf_free_all(vt_conn *pConn) {
  while (pConn->pBpf) {
    vt_bpf *p = pConn->pBpf;
    pConn->pBpf = p->pNext;
    dev_bpf_free(p->pRt);
    sqlite3_free(p->zName);
    sqlite3_free(p->zTypes);
    sqlite3_free(p->aIns);
    sqlite3_free(p);
  }
}

/* Parse "REAL, INTEGER,..." into aDecl; the count, or -1 with *pzBad the
** offending item (sqlite3_malloc'd). */
static int parse_types(const char *z, uint8_t *aDecl, char **pzBad) {
  int n = 0;
  *pzBad = NULL;
  while (1) {
    while (*z == ' ') z++;
    const char *e = strchr(z, ',');
    size_t len = e ? (size_t)(e - z) : strlen(z);
    while (len > 0 && z[len - 1] == ' ') len--;
    int t = csq_bpf_decl_parse(z, len);
    if (t < 0 || n >= CSQ_BPF_MAX_ARGS) {
      *pzBad = t < 0 ? sqlite3_mprintf("%.*s", (int)len, z)
                     : sqlite3_mprintf("more than %d types", CSQ_BPF_MAX_ARGS);
      return -1;
    }
    aDecl[n++] = (uint8_t)t;
    if (!e) return n;
    z = e + 1;
  }
}

/* csq_bpf_load(name, object, types) */
static void load_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  vt_conn *pConn = sqlite3_user_data(ctx);
  (void)argc;
  const char *zName = (const char *)sqlite3_value_text(argv[0]);
  const uint8_t *pObj = sqlite3_value_blob(argv[1]);
  int nObj = sqlite3_value_bytes(argv[1]);
  const char *zTypes = (const char *)sqlite3_value_text(argv[2]);
  char zErr[600];
  char *zBad = NULL;
  const uint8_t *aIns = NULL;
  uint32_t nIns = 0;
  vt_bpf *p = NULL;
  if (!zName || !zName[0]) {
    vt_result_errorf(ctx, "csq_bpf_load: the first argument must name the program");
    return;
  }
  if (!pObj || nObj == 0) {
    vt_result_errorf(ctx, "csq_bpf_load: the second argument must be the program (a BLOB)");
    return;
  }
  p = sqlite3_malloc64(sizeof(*p));
  if (!p) goto nomem;
  memset(p, 0, sizeof(*p));
  p->nArg = parse_types(zTypes ? zTypes : "", p->aDecl, &zBad);
  if (p->nArg < 0) {
    vt_result_errorf(ctx,
                     "csq_bpf_load('%s'): unknown argument type '%s' (INTEGER, REAL, TEXT, BLOB "
                     "or ANY, separated by commas)",
                     zName, zBad ? zBad : "");
    goto fail;
  }
  /* csq's rules, then the eBPF verifier: either says why in zErr */
  int rc = csq_bpf_code(pObj, (size_t)nObj, &aIns, &nIns, zErr, sizeof(zErr));
  if (rc == 0) rc = csq_bpf_check(aIns, nIns, zErr, sizeof(zErr));
  if (rc == 0) rc = dev_bpf_load(aIns, nIns, p->nArg, &p->pRt, zErr, sizeof(zErr));
  if (rc == -ENOMEM) goto nomem;
  if (rc) {
    vt_result_errorf(ctx, "csq_bpf_load('%s'): %s", zName, zErr);
    goto fail;
  }
  p->zName = sqlite3_mprintf("%s", zName);
  p->zTypes = sqlite3_mprintf("%s", zTypes ? zTypes : "");
  p->aIns = sqlite3_malloc64(8ull * nIns);
  if (!p->zName || !p->zTypes || !p->aIns) goto nomem;
  memcpy(p->aIns, aIns, 8ull * nIns);
  p->nIns = nIns;
  p->pNext = pConn->pBpf;
  pConn->pBpf = p;
  sqlite3_free(zBad);
  sqlite3_result_int64(ctx, nIns);
  return;
nomem:
  sqlite3_result_error_nomem(ctx);
fail:
  sqlite3_free(zBad);
  if (p) {
    dev_bpf_free(p->pRt);
    sqlite3_free(p->zName);
    sqlite3_free(p->zTypes);
    sqlite3_free(p->aIns);
    sqlite3_free(p);
  }
}

/* Program zName (NULL: none given) over the nArg SQL values apArg, on the
** host: its u64 as the INTEGER result, or an error. */
static void run_program(sqlite3_context *ctx, const char *zName, int nArg, sqlite3_value **apArg) {
  vt_conn *pConn = sqlite3_user_data(ctx);
  const vt_bpf *p = zName ? vt_bpf_find(pConn, zName) : NULL;
  if (!p) {
    vt_result_errorf(ctx, "csq_bpf: no eBPF program named '%s' (load it first with csq_bpf_load)",
                     zName ? zName : "");
    return;
  }
  if (nArg != p->nArg) {
    vt_result_errorf(ctx, "csq_bpf('%s'): the program takes %d argument%s (%s), %d given", p->zName,
                     p->nArg, p->nArg == 1 ? "" : "s", p->zTypes, nArg);
    return;
  }
  uint8_t aBlock[CSQ_BPF_SLOT * CSQ_BPF_MAX_ARGS];
  const uint8_t *apZ[CSQ_BPF_MAX_ARGS];
  uint32_t aN[CSQ_BPF_MAX_ARGS];
  for (int j = 0; j < p->nArg; j++) {
    sqlite3_value *a = apArg[j];
    csq_value v;
    memset(&v, 0, sizeof(v));
    switch (sqlite3_value_type(a)) {
    case SQLITE_INTEGER:
      v.cls = CSQ_INT;
      v.i = sqlite3_value_int64(a);
      break;
    case SQLITE_FLOAT:
      v.cls = CSQ_REAL;
      v.r = sqlite3_value_double(a);
      break;
    case SQLITE_TEXT:
      v.cls = CSQ_TEXT;
      v.z = sqlite3_value_text(a);
      v.n = (uint32_t)sqlite3_value_bytes(a);
      break;
    case SQLITE_BLOB:
      v.cls = CSQ_BLOB;
      v.z = sqlite3_value_blob(a);
      v.n = (uint32_t)sqlite3_value_bytes(a);
      break;
    default:
      v.cls = CSQ_NULL;
    }
    csq_bpf_slot_put(aBlock + CSQ_BPF_SLOT * j, &v, p->aDecl[j]);
    apZ[j] = v.z;
    aN[j] = v.n;
  }
  dev_bpf_frame f;
  memset(&f, 0, sizeof(f));
  f.nArg = p->nArg;
  f.aBlock = aBlock;
  f.apZ = apZ;
  f.aN = aN;
  dev_bpf_frame_set(&f);
  uint64_t r = dev_bpf_run(p->pRt, &f);
  dev_bpf_frame_set(NULL);
  if (f.fault) {
    char z[300];
    dev_bpf_fault_msg(&f, p->zName, z, sizeof(z));
    vt_result_errorf(ctx, "%s", z);
    return;
  }
  sqlite3_result_int64(ctx, (sqlite3_int64)r);
}

/* csq_bpf(name, args...) */
static void call_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *zName = argc > 0 ? (const char *)sqlite3_value_text(argv[0]) : NULL;
  run_program(ctx, zName, argc - 1, argv + 1);
}

/* csq_bpf_col(value, name): csq_bpf(name, value), spelled so that SQLite
** offers it to a virtual table as a constraint on the column value. */
static void col_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  run_program(ctx, (const char *)sqlite3_value_text(argv[1]), 1, argv);
}

int vt_bpf_find_function(sqlite3_vtab *pVtab, int nArg, const char *zName,
                         void (**pxFunc)(sqlite3_context *, int, sqlite3_value **), void **ppArg) {
  vt_tab *p = (vt_tab *)pVtab;
  if (nArg != 2 || sqlite3_stricmp(zName, "csq_bpf_col") != 0) return 0;
  *pxFunc = col_func;
  *ppArg = p->pConn;
  return SQLITE_INDEX_CONSTRAINT_FUNCTION;
}

int vt_bpf_register(sqlite3 *db, vt_conn *pConn) {
  int rc = sqlite3_create_function(db, "csq_bpf_load", 3, SQLITE_UTF8 | SQLITE_DIRECTONLY, pConn,
                                   load_func, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_bpf", -1, SQLITE_UTF8, pConn, call_func, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_bpf_col", 2, SQLITE_UTF8, pConn, col_func, NULL, NULL);
  return rc;
}
