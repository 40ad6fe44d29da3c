/*
** device/format/vec.h - csq_vec, a vector of up to a row group's values of one column.
**
** The unit of work everywhere below SQL: chunk decoders fill vectors, the
** program executor filters and aggregates them, the vtab cursor hands values
** to SQLite straight from them. Every value carries its SQLite storage class,
** so a column may mix classes exactly as a native SQLite column can; clsMask
** tells consumers when the whole vector is one class (the common case) so
** they can take a typed loop.
**
** Memory: a vector owns aCls, aVal, aLen and aHeap (libc malloc); free with
** csq_vec_free(). TEXT and BLOB bytes live in aHeap at offset aVal[i].off,
** aLen[i] bytes long; TEXT is stored without a terminator.
*/
#ifndef CSQ_DEVICE_VEC_H
#define CSQ_DEVICE_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Storage classes: SQLite's own numbering (SQLITE_INTEGER ... SQLITE_NULL). */
#define CSQ_INT  1
#define CSQ_REAL 2
#define CSQ_TEXT 3
#define CSQ_BLOB 4
#define CSQ_NULL 5

typedef union csq_val {
  int64_t i;    /* CSQ_INT */
  double r;     /* CSQ_REAL */
  uint64_t off; /* CSQ_TEXT, CSQ_BLOB: offset into aHeap */
} csq_val;

typedef struct csq_vec {
  uint32_t n;     /* values held */
  uint32_t nCap;  /* capacity of aCls/aVal/aLen */
  uint8_t *aCls;  /* storage class of each value */
  csq_val *aVal;  /* the values */
  uint32_t *aLen; /* byte length of TEXT/BLOB values, 0 otherwise */
  char *aHeap;    /* TEXT/BLOB bytes */
  uint64_t nHeap; /* bytes used in aHeap */
  uint64_t nHeapCap;
  uint8_t clsMask; /* OR of (1 << class) over the n values */
} csq_vec;

/* All return 0 or -ENOMEM. */
/* n bytes from p to d (not overlapping). Most TEXT values of rows, joins
** and groups are a few bytes to a few dozen (names, codes, dates, flags),
** for which a call to memcpy costs more than the copy: up to 16 bytes move
** as two overlapping fixed-size loads and stores that stay inside both
** ranges. */
static inline void csq_copy_short(void *d, const void *p, uint32_t n) {
  char *dc = d;
  const char *pc = p;
  if (n >= 8 && n <= 16) {
    uint64_t a, b;
    memcpy(&a, pc, 8);
    memcpy(&b, pc + n - 8, 8);
    memcpy(dc, &a, 8);
    memcpy(dc + n - 8, &b, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    memcpy(&a, pc, 4);
    memcpy(&b, pc + n - 4, 4);
    memcpy(dc, &a, 4);
    memcpy(dc + n - 4, &b, 4);
  } else if (n < 4) {
    for (uint32_t i = 0; i < n; i++) dc[i] = pc[i];
  } else {
    memcpy(dc, pc, n);
  }
}

void csq_vec_init(csq_vec *v);
void csq_vec_free(csq_vec *v);  /* frees buffers, leaves v empty and reusable */
void csq_vec_reset(csq_vec *v); /* n = 0, keeps buffers */
int csq_vec_reserve(csq_vec *v, uint32_t nCap, uint64_t nHeapCap);
int csq_vec_push_null(csq_vec *v);
int csq_vec_push_int(csq_vec *v, int64_t i);
int csq_vec_push_real(csq_vec *v, double r);
int csq_vec_push_bytes(csq_vec *v, int cls, const void *p, uint32_t n); /* TEXT or BLOB */
/* Append values [i0, i0+n) of src (all classes). */
int csq_vec_append(csq_vec *v, const csq_vec *src, uint32_t i0, uint32_t n);
/* Append the values aIdx[0..n) of src (any order, repeats allowed; an index
** of UINT32_MAX appends NULL), v != src. */
int csq_vec_gather(csq_vec *v, const csq_vec *src, const uint32_t *aIdx, uint32_t n);
/* Keep only the values whose index is listed in aSel[0..nSel) (ascending). */
void csq_vec_select(csq_vec *v, const uint32_t *aSel, uint32_t nSel);
/* Reorder: value k becomes the old value aPerm[k], for k < n (heap kept). */
int csq_vec_permute(csq_vec *v, const uint32_t *aPerm, uint32_t n);
/* Truncate to the first n values (heap bytes of dropped values are reclaimed
** only when they are at the end). */
void csq_vec_truncate(csq_vec *v, uint32_t n);

/* Ask for transparent huge pages over p[0..n) when it is large (a hint,
** for arrays about to be written through, as vec.c's own). */
void csq_mem_advise(void *p, size_t n);
/* Free the large arrays csq_vec keeps for reuse (vec.c, at most 128 MiB
** of them); later ones are kept again. */
void csq_vec_release_kept(void);

static inline const char *csq_vec_bytes(const csq_vec *v, uint32_t i) {
  return v->aHeap + v->aVal[i].off;
}

#endif /* CSQ_DEVICE_VEC_H */
