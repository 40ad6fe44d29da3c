/*
** planner/filter.c - constraints to device programs; see filter.h.
**
** Comparison affinity is applied here, on the host, to the constraint
** values only: SQLite never converts the stored column values for a
** comparison against a value without affinity, so the device compares the
** stored values with the converted constants (program.h, "Affinity").
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "planner/filter.h"
#include "device/format/bpf.h"
#include "device/format/program.h"
#include "device/format/vec.h"

#ifndef SQLITE_CORE
extern const sqlite3_api_routines *sqlite3_api;
#endif

/* Add value v, converted by affinity aff, as a constant; *pbNull = 1 if it
** is NULL. Returns the constant index or a negative errno. */
static int add_const(csq_pb *b, sqlite3_value *v, char aff, int *pbNull) {
  *pbNull = 0;
  int t = sqlite3_value_type(v);
  if (t == SQLITE_NULL) {
    *pbNull = 1;
    return csq_pb_const_null(b);
  }
  if (aff == PL_AFF_NUMERIC && t == SQLITE_TEXT) {
    /* convert a copy: the argument is SQLite's */
    sqlite3_value *c = sqlite3_value_dup(v);
    if (!c) return -12;
    int k;
    switch (sqlite3_value_numeric_type(c)) {
    case SQLITE_INTEGER:
      k = csq_pb_const_int(b, sqlite3_value_int64(c));
      break;
    case SQLITE_FLOAT:
      k = csq_pb_const_real(b, sqlite3_value_double(c));
      break;
    default:
      k = csq_pb_const_bytes(b, CSQ_TEXT, sqlite3_value_text(c), (uint32_t)sqlite3_value_bytes(c));
    }
    sqlite3_value_free(c);
    return k;
  }
  if (aff == PL_AFF_TEXT && (t == SQLITE_INTEGER || t == SQLITE_FLOAT)) {
    sqlite3_value *c = sqlite3_value_dup(v);
    if (!c) return -12;
    const unsigned char *z = sqlite3_value_text(c);
    int k = z ? csq_pb_const_bytes(b, CSQ_TEXT, z, (uint32_t)sqlite3_value_bytes(c)) : -12;
    sqlite3_value_free(c);
    return k;
  }
  switch (t) {
  case SQLITE_INTEGER:
    return csq_pb_const_int(b, sqlite3_value_int64(v));
  case SQLITE_FLOAT:
    return csq_pb_const_real(b, sqlite3_value_double(v));
  case SQLITE_TEXT:
    return csq_pb_const_bytes(b, CSQ_TEXT, sqlite3_value_text(v), (uint32_t)sqlite3_value_bytes(v));
  default:
    return csq_pb_const_bytes(b, CSQ_BLOB, sqlite3_value_blob(v), (uint32_t)sqlite3_value_bytes(v));
  }
}

int pl_bpf_const(csq_pb *b, const pl_bpf_arg *aArg, int nArg, const uint8_t *aIns, uint32_t nIns,
                 const uint8_t *aDecl, int *pSlot0) {
  uint32_t aW[CSQ_BPF_MAX_ARGS];
  int slot0 = -1;
  if (nArg < 1 || nArg > CSQ_BPF_MAX_ARGS) return -22; /* -EINVAL */
  for (int j = 0; j < nArg; j++) {
    int k;
    if (aArg[j].iChunk >= 0) {
      k = csq_pb_input(b, (uint32_t)aArg[j].iChunk);
      if (k >= 0 && slot0 < 0) slot0 = k;
    } else {
      /* constants go as they are: the program sees their own class */
      int bNull;
      k = add_const(b, aArg[j].pVal, PL_AFF_NONE, &bNull);
      if (k >= 0) k |= (int)CSQ_BPF_ARG_CONST;
    }
    if (k < 0) return k;
    aW[j] = (uint32_t)k | ((uint32_t)aDecl[j] << 24);
  }
  if (slot0 < 0) return -22; /* no column: nothing for the device to read */
  uint8_t *pCall = NULL;
  size_t nCall = 0;
  int rc = csq_bpf_call_build(nArg, aW, aIns, nIns, &pCall, &nCall);
  if (rc < 0) return rc;
  int k = csq_pb_const_bytes(b, CSQ_BLOB, pCall, (uint32_t)nCall);
  free(pCall);
  *pSlot0 = slot0;
  return k;
}

int pl_filter_bpf(csq_pb *b, const pl_bpf_arg *aArg, int nArg, const uint8_t *aIns, uint32_t nIns,
                  const uint8_t *aDecl, int bNot) {
  int slot0 = 0;
  int k = pl_bpf_const(b, aArg, nArg, aIns, nIns, aDecl, &slot0);
  if (k < 0) return k;
  int rc = csq_pb_clause(b);
  if (rc < 0) return rc;
  return csq_pb_term(b, CSQ_OP_BPF, bNot ? CSQ_TF_NOT : 0, slot0, k, 0, 0);
}

/* Constraint c as a filter clause of its own (bCond 0) or as an
** aggregation's condition (bCond 1: returns its number). */
static int filter_term(csq_pb *b, const pl_cons *c, int *pbEmpty, int bCond) {
  if (c->op == CSQ_OP_BPF) { /* its clause opens after its constants */
    if (bCond) return -EINVAL;
    pl_bpf_arg a = {c->iChunk, NULL};
    return pl_filter_bpf(b, &a, 1, c->aBpfIns, c->nBpfIns, c->aBpfDecl, 0);
  }
  int slot = csq_pb_input(b, (uint32_t)c->iChunk);
  if (slot < 0) return slot;
  int rc = bCond ? 0 : csq_pb_clause(b);
  if (rc < 0) return rc;
  int (*xTerm)(csq_pb *, int, int, int, int, int, uint32_t) = bCond ? csq_pb_cond : csq_pb_term;
  switch (c->op) {
  case CSQ_OP_ISNULL:
  case CSQ_OP_NOTNULL:
    return xTerm(b, c->op, 0, slot, 0, 0, 0);
  case CSQ_OP_IN: {
    int k0 = -1, nNonNull = 0;
    for (int i = 0; i < c->nVal; i++) {
      int bNull;
      int k = add_const(b, c->apVal[i], c->aff, &bNull);
      if (k < 0) return k;
      if (k0 < 0) k0 = k;
      nNonNull += !bNull;
    }
    /* x IN (NULL, ...) can only be true through its other values */
    if (c->nVal == 0 || nNonNull == 0) *pbEmpty = 1;
    if (c->nVal == 0) return bCond ? -EINVAL : 0;
    return xTerm(b, CSQ_OP_IN, c->flags, slot, k0, c->nVal, 0);
  }
  default: {
    int bNull;
    int k = add_const(b, c->apVal[0], c->aff, &bNull);
    if (k < 0) return k;
    if (bNull && c->op != CSQ_OP_IS && c->op != CSQ_OP_ISNOT) *pbEmpty = 1;
    return xTerm(b, c->op, c->flags, slot, k, 0, 0);
  }
  }
}

int pl_filter_add(csq_pb *b, const pl_cons *c, int *pbEmpty) {
  return filter_term(b, c, pbEmpty, 0);
}

int pl_filter_cond(csq_pb *b, const pl_cons *c, int *pbNever) {
  return filter_term(b, c, pbNever, 1);
}

int pl_like_flags(sqlite3 *db, int bGlob) {
  static const char zProbe[] =
      "SELECT 'a' LIKE 'A', 'ab' LIKE 'a_', '\xc3\x84' LIKE '\xc3\xa4', x'61' LIKE 'a', "
      "'A' GLOB 'a', 'ab' GLOB 'a?', x'61' GLOB 'a'";
  sqlite3_stmt *p = NULL;
  int r = -1, c[7];
  if (sqlite3_prepare_v2(db, zProbe, -1, &p, NULL) == SQLITE_OK && sqlite3_step(p) == SQLITE_ROW) {
    for (int i = 0; i < 7; i++)
      c[i] = sqlite3_column_type(p, i) == SQLITE_INTEGER ? sqlite3_column_int(p, i) : -1;
    if (bGlob && c[4] == 0 && c[5] == 1 && c[6] >= 0)
      r = c[6] ? CSQ_TF_BLOB_TEXT : 0;
    else if (!bGlob && c[1] == 1 && c[2] == 0 && c[0] >= 0 && c[3] >= 0)
      r = (c[0] ? 0 : CSQ_TF_LIKE_CASE) | (c[3] ? CSQ_TF_BLOB_TEXT : 0);
  }
  sqlite3_finalize(p);
  return r;
}

int pl_substr_glob(int p, int n, const char *L, int nL, char *z, int nz) {
  if (p < 1 || p > 32 || (nL == 0 && p > 1)) return -1;
  if (n >= 0 && nL > n) return -2;
  int k = 0;
  for (int i = 1; i < p; i++) z[k++] = '?';
  for (int i = 0; i < nL; i++) {
    unsigned char c = (unsigned char)L[i];
    if (c == 0 || c >= 0x80 || k + 3 >= nz) return -1;
    if (c == '*' || c == '?' || c == '[') {
      z[k++] = '[';
      z[k++] = (char)c;
      z[k++] = ']';
    } else {
      z[k++] = (char)c;
    }
  }
  /* ASCII: a character per byte, so nL is L's length in characters */
  if (nL == n) z[k++] = '*';
  return k; /* 0: L '' with p 1, x is '' */
}

int pl_substr_ok(sqlite3 *db) {
  static const char zProbe[] =
      "SELECT substr('abc', 2, 1) = 'b' AND substr(x'616263', 2, 2) = x'6263' AND "
      "substr(12345, 2, 2) = '23' AND substr(1.5, 1, 2) = '1.' AND substr('\xc3\xa4"
      "bc', 2) = "
      "'bc' AND substring('abc', 1, 2) = 'ab' AND substr(NULL, 1, 1) IS NULL AND "
      "typeof(substr(x'61', 1, 1)) = 'blob' AND (x'61' GLOB 'a') = 0";
  sqlite3_stmt *pStmt = NULL;
  int r = 0;
  if (sqlite3_prepare_v2(db, zProbe, -1, &pStmt, NULL) == SQLITE_OK &&
      sqlite3_step(pStmt) == SQLITE_ROW)
    r = sqlite3_column_type(pStmt, 0) == SQLITE_INTEGER && sqlite3_column_int(pStmt, 0) == 1;
  sqlite3_finalize(pStmt);
  return r;
}

int pl_filter_program(const pl_cons *a, int n, const int *aOut, int nOut, int bRowNum,
                      const pl_topn *pTop, uint8_t **pp, size_t *pn, int *pbEmpty, char **pzErr) {
  *pp = NULL;
  *pn = 0;
  *pbEmpty = 0;
  csq_pb *b = csq_pb_new();
  if (!b) return SQLITE_NOMEM;
  if (bRowNum) csq_pb_rownums(b);
  int rc = 0;
  /* outputs first, so their input slots come first too */
  for (int i = 0; i < nOut && rc >= 0; i++) {
    int slot = csq_pb_input(b, (uint32_t)aOut[i]);
    rc = slot < 0 ? slot : csq_pb_output(b, slot);
  }
  for (int i = 0; i < n && rc >= 0; i++) rc = pl_filter_add(b, &a[i], pbEmpty);
  if (pTop && rc >= 0) rc = csq_pb_topn(b, pTop->nTop);
  for (int k = 0; pTop && k < pTop->nKey && rc >= 0; k++) {
    int slot = csq_pb_input(b, (uint32_t)pTop->aChunk[k]);
    rc = slot < 0 ? slot : csq_pb_topn_key(b, slot, pTop->aDesc[k]);
  }
  uint8_t *p = NULL;
  size_t np = 0;
  if (rc >= 0) rc = csq_pb_finish(b, &p, &np);
  csq_pb_free(b);
  if (rc < 0) {
    *pzErr = sqlite3_mprintf("csq: cannot build the device program (%s)",
                             rc == -12 ? "out of memory" : "a limit of the program format");
    return rc == -12 ? SQLITE_NOMEM : SQLITE_ERROR;
  }
  *pp = sqlite3_malloc64(np);
  if (!*pp) {
    free(p);
    return SQLITE_NOMEM;
  }
  memcpy(*pp, p, np);
  free(p);
  *pn = np;
  return SQLITE_OK;
}

int pl_filter_add_bloom(csq_pb *b, int slot, const void *pFilter, uint32_t nBytes) {
  int rc = csq_pb_clause(b);
  return rc < 0 ? rc : csq_pb_bloom(b, 0, slot, pFilter, nBytes);
}

int pl_filter_add_keymap(csq_pb *b, int slot, const void *pMap, uint32_t nBytes) {
  int rc = csq_pb_clause(b);
  return rc < 0 ? rc : csq_pb_keymap(b, 0, slot, pMap, nBytes);
}
