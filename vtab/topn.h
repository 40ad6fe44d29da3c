/*
** vtab/topn.h - the top-N heap a cursor merges a consumed ORDER BY ... LIMIT
** with: it keeps the nMax rows that sort first among those offered, then
** hands them back in order (vtab/topn.c).
*/
#ifndef CSQ_VTAB_TOPN_H
#define CSQ_VTAB_TOPN_H

#include "vtab/plan.h"

typedef struct vt_topn vt_topn;

/* A heap over rows of nCol values, sorted on the values aKey[0..nKey)
** (nKey <= VT_TOPN_MAXKEY), descending where aDesc[k], as SQLite's ORDER BY
** with BINARY collation; equal keys keep the row offered first. It keeps
** nMax rows at most. NULL: no memory. */
vt_topn *vt_topn_new(int nCol, int nKey, const int *aKey, const uint8_t *aDesc, uint32_t nMax);
void vt_topn_free(vt_topn *t); /* NULL is fine */

/* Offer rows [iRow, iRow + nRow) of the vectors apSrc[0..nCol), which the
** heap copies (the batch may go once this returns). SQLITE_NOMEM or
** SQLITE_OK. */
int vt_topn_add(vt_topn *t, const csq_vec *const *apSrc, uint32_t iRow, uint32_t nRow);

/* The rows kept, sorted, into aOut[0..nCol) (reset first): vt_topn_rows()
** of them. Once emitted, the heap is only freed. */
int vt_topn_emit(vt_topn *t, csq_vec *aOut);
uint32_t vt_topn_rows(const vt_topn *t);

#endif /* CSQ_VTAB_TOPN_H */
