/*
** vtab/csv.h - the CSV reader of csq_import (RFC 4180; see vtab/csv.c).
*/
#ifndef CSQ_VTAB_CSV_H
#define CSQ_VTAB_CSV_H

#include <stdint.h>
#include "vtab/vtab.h"

typedef struct vt_csv vt_csv;

/* One field of a record: n bytes at z (not terminated), bQuoted when it
** was written in quotes (so "" is an empty string, never NULL). */
typedef struct vt_csv_field {
  const char *z;
  uint32_t n;
  int bQuoted;
} vt_csv_field;

/* Open zPath with separator cSep. SQLite codes; *pzErr sqlite3_malloc'd. */
int vt_csv_open(const char *zPath, char cSep, vt_csv **pp, char **pzErr);
void vt_csv_close(vt_csv *p);
/* The next record: SQLITE_ROW with *pnField fields at *paField (valid until
** the next call), SQLITE_DONE at the end, or an error: SQLITE_ERROR for a
** malformed record, with *pzErr naming its line and field, after which the
** reader stands at the next record; other codes (I/O, memory) are final. */
int vt_csv_next(vt_csv *p, int *pnField, const vt_csv_field **paField, char **pzErr);
int64_t vt_csv_line(const vt_csv *p);    /* line where the last record started */
uint64_t vt_csv_offset(const vt_csv *p); /* bytes of the file consumed */
uint64_t vt_csv_size(const vt_csv *p);   /* the file's size, 0 if unknown (a pipe) */

#endif /* CSQ_VTAB_CSV_H */
