/*
** planner/filter.h - compile the constraints SQLite hands a csq table
** (xBestIndex/xFilter) into a device program (device/format/program.h).
**
** The vtab decides which constraints to push and whether each is exact
** (omit); this compiler only turns the chosen constraints and their values
** into program bytes, applying SQLite's comparison affinity to the values
** first, so that the device compares exactly what SQLite would.
*/
#ifndef CSQ_PLANNER_FILTER_H
#define CSQ_PLANNER_FILTER_H

#include <sqlite3ext.h>
#include <stddef.h>
#include <stdint.h>

#include "device/format/program.h" /* CSQ_TOPN_MAX_KEYS */

/* Affinity applied to a constraint's values before comparison. */
#define PL_AFF_NONE    'A' /* compare the value as it is */
#define PL_AFF_TEXT    'B' /* numbers become their text */
#define PL_AFF_NUMERIC 'C' /* numeric-looking text becomes a number */

/* One pushed constraint. */
typedef struct pl_cons {
  int iChunk;            /* 0 = rowid, 1 + c = column c */
  int op;                /* CSQ_OP_* */
  int flags;             /* CSQ_TF_* (collation, LIKE flags) */
  char aff;              /* PL_AFF_* */
  sqlite3_value **apVal; /* its values: 1 (comparisons, LIKE, GLOB, BPF: the name), n (IN),
                            0 (IS [NOT] NULL) */
  int nVal;
  /* CSQ_OP_BPF: the program of one argument (the column) the name means:
  ** its instructions and declared type (owned by the connection) */
  const uint8_t *aBpfIns;
  uint32_t nBpfIns;
  const uint8_t *aBpfDecl;
} pl_cons;

/* Build a program that keeps the rows satisfying every constraint of a[0..n)
** and outputs the chunks aOut[0..nOut) (chunk 0 = rowids), with each row's
** number in its row group if bRowNum (CSQ_PF_ROWNUM), only the rows of a
** top-N if pTop is not NULL. On success *pp is
** a sqlite3_malloc'd program of *pn bytes. A constraint that can never be
** true (a comparison with NULL) makes *pbEmpty 1: the scan returns nothing.
** Returns SQLITE_OK or an error code with *pzErr (sqlite3_malloc'd). */
/* Add one constraint to a program being built, as a new AND clause;
** *pbEmpty = 1 if it can never be true. Returns >= 0 or a negative errno. */
struct csq_pb;
int pl_filter_add(struct csq_pb *b, const pl_cons *c, int *pbEmpty);
/* The same constraint as a condition of a grouped program's CASE (program.h,
** AGGREGATION): its number (>= 0), or a negative errno; *pbNever = 1 if it
** can never be true (CASE then always takes its ELSE). Not for eBPF. */
int pl_filter_cond(struct csq_pb *b, const pl_cons *c, int *pbNever);

/* The flags under which the device's LIKE (bGlob 0) or GLOB term gives what
** db's operator gives, found by asking it: LIKE folds ASCII case unless
** PRAGMA case_sensitive_like is on (CSQ_TF_LIKE_CASE), and a BLOB matches
** as text only in a build without SQLITE_LIKE_DOESNT_MATCH_BLOBS
** (CSQ_TF_BLOB_TEXT). -1 when the operator is not SQLite's own (an
** application's like(), ICU's folding of other letters): then no device
** term can stand for it, not even as a superset SQLite checks again. */
int pl_like_flags(sqlite3 *db, int bGlob);

/* substr(x, p, n) = L as a GLOB of x's text, exact where L is ASCII
** without NUL: '?' p-1 times, L, then '*' when L has n characters (x
** starts so), none when fewer (x ends there). n < 0: substr(x, p), to the
** end. Writes the pattern into z[0..nz) and returns its length; -2 when
** L has more than n characters (never equal); -1 when not exact (L not
** ASCII, empty with p > 1, p out of 1..32, or the pattern too long). */
int pl_substr_glob(int p, int n, const char *L, int nL, char *z, int nz);

/* 1 when db's substr() and substring() are SQLite's own and its GLOB
** matches a BLOB never (so a BLOB's substr, a BLOB, equals no TEXT and its
** GLOB is false): then pl_substr_glob's pattern stands for the comparison.
** Asked of db each time, as pl_like_flags. */
int pl_substr_ok(sqlite3 *db);

/* Add a join filter (program.h, JOIN FILTERS) as a new AND clause: the
** rows whose input slot `slot` may hold one of the keys whose Bloom filter
** (device/format/bloom.h) is pFilter[0..nBytes), copied into the program.
** The caller hashed the keys (device/format/keyhash.h) after converting
** them as they compare with the column's values (its affinity). NULL
** never passes. Returns >= 0 or a negative errno (-EINVAL for a size
** bloom.h does not allow). */
int pl_filter_add_bloom(struct csq_pb *b, int slot, const void *pFilter, uint32_t nBytes);
/* The same with a bitmap of integer keys (device/format/keymap.h): exact,
** so only the rows whose slot holds one of the keys pass. */
int pl_filter_add_keymap(struct csq_pb *b, int slot, const void *pMap, uint32_t nBytes);

/* One argument of an eBPF call: a column (iChunk >= 0: 0 rowid, 1 + c
** column c) or a constant (iChunk -1, pVal). */
typedef struct pl_bpf_arg {
  int iChunk;
  sqlite3_value *pVal;
} pl_bpf_arg;
/* Add an eBPF term (program.h, EBPF TERMS) as a new AND clause: the
** program's nIns instructions aIns with declared types aDecl, over
** arguments aArg[0..nArg); bNot: the rows where it returns 0 (NOT of the
** call, exact: a call is never NULL). Returns >= 0 or a negative errno. */
int pl_filter_bpf(struct csq_pb *b, const pl_bpf_arg *aArg, int nArg, const uint8_t *aIns,
                  uint32_t nIns, const uint8_t *aDecl, int bNot);
/* The same call as a BLOB constant only (for a CSQ_EX_BPF expression): its
** index, and in *pSlot0 the input slot of its first column; or a negative
** errno (-EINVAL also when no argument is a column). */
int pl_bpf_const(struct csq_pb *b, const pl_bpf_arg *aArg, int nArg, const uint8_t *aIns,
                 uint32_t nIns, const uint8_t *aDecl, int *pSlot0);

/* A top-N for the device (CSQ_PF_TOPN): keep the nTop rows that sort first
** on the chunks aChunk[0..nKey) (each among the outputs), descending where
** aDesc[k]. */
typedef struct pl_topn {
  uint32_t nTop;
  int nKey;
  int aChunk[CSQ_TOPN_MAX_KEYS];
  uint8_t aDesc[CSQ_TOPN_MAX_KEYS];
} pl_topn;

int pl_filter_program(const pl_cons *a, int n, const int *aOut, int nOut, int bRowNum,
                      const pl_topn *pTop, uint8_t **pp, size_t *pn, int *pbEmpty, char **pzErr);

#endif /* CSQ_PLANNER_FILTER_H */
