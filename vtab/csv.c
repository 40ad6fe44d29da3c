/*
** vtab/csv.c - a CSV reader for csq_import (vtab/import.c), RFC 4180.
**
** Records end at LF or CRLF; fields are separated by one chosen byte (','
** by default, '|' for TPC-H's files). A field that starts with '"' is
** quoted: it may hold the separator, CR, LF and doubled quotes ("" is one
** "), and must end with a quote followed by the separator, the end of the
** record or the end of the file. A quote inside an unquoted field is an
** ordinary character, as in SQLite's shell. A UTF-8 byte-order mark at the
** start of the file is skipped. Bytes are not checked for UTF-8: a field's
** bytes are kept as they are, as the sqlite3 shell's .import keeps them.
**
** Errors are the user's to fix, so they name the line (1-based, where the
** record starts) and the field (1-based): an unterminated quoted field, or
** a quote inside a quoted field that is neither doubled nor the end of it.
** After such an error the reader has moved past the bad record (as far as
** it can tell where it ends), so a caller that skips bad records may go on.
**
** Memory: the file is read in blocks into one buffer that holds at least
** the current record (it grows only for a record longer than a block);
** fields point into that buffer, or, for quoted fields with doubled
** quotes, into a scratch buffer; both stay valid until the next call.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "vtab/csv.h"

#define CSV_BLOCK (1u << 20) /* bytes read at a time */

struct vt_csv {
  FILE *pIn;
  char cSep;
  char *zBuf; /* bytes [iPos, nBuf) not consumed yet */
  size_t nBuf, nBufAlloc, iPos;
  int bEof;           /* the file has no more bytes beyond zBuf */
  uint64_t nConsumed; /* bytes of the file before zBuf[iPos] */
  uint64_t nSize;     /* the file's size, 0 unknown */
  int64_t iLine;      /* line of the next record */
  int64_t iRecLine;   /* line where the current record started */
  char *zScratch;     /* unescaped quoted fields */
  size_t nScratch, nScratchAlloc;
  int nField, nFieldAlloc;
  vt_csv_field *aField;
  size_t *aScratchOff; /* per field: offset in zScratch, or (size_t)-1 */
};

int vt_csv_open(const char *zPath, char cSep, vt_csv **pp, char **pzErr) {
  *pp = NULL;
  FILE *f = fopen(zPath, "rb");
  if (!f) {
    *pzErr = sqlite3_mprintf("cannot open %s: %s", zPath, strerror(errno));
    return SQLITE_ERROR;
  }
  vt_csv *p = sqlite3_malloc64(sizeof(*p));
  if (!p) {
    fclose(f);
    return SQLITE_NOMEM;
  }
  memset(p, 0, sizeof(*p));
  p->pIn = f;
  p->cSep = cSep;
  p->iLine = 1;
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) p->nSize = (uint64_t)st.st_size;
  *pp = p;
  return SQLITE_OK;
}

void vt_csv_close(vt_csv *p) {
  if (!p) return;
  if (p->pIn) fclose(p->pIn);
  sqlite3_free(p->zBuf);
  sqlite3_free(p->zScratch);
  sqlite3_free(p->aField);
  sqlite3_free(p->aScratchOff);
  sqlite3_free(p);
}

uint64_t vt_csv_offset(const vt_csv *p) {
  return p->nConsumed;
}
uint64_t vt_csv_size(const vt_csv *p) {
  return p->nSize;
}
int64_t vt_csv_line(const vt_csv *p) {
  return p->iRecLine;
}

/* Read more of the file after the unconsumed bytes (moved to the front).
** SQLITE_OK (p->bEof set at the end), or an error. */
static int fill(vt_csv *p, char **pzErr) {
  if (p->iPos > 0) {
    memmove(p->zBuf, p->zBuf + p->iPos, p->nBuf - p->iPos);
    p->nBuf -= p->iPos;
    p->iPos = 0;
  }
  if (p->nBufAlloc - p->nBuf < CSV_BLOCK) {
    size_t nNew = p->nBuf + 2 * (size_t)CSV_BLOCK;
    char *z = sqlite3_realloc64(p->zBuf, nNew + 1);
    if (!z) return SQLITE_NOMEM;
    p->zBuf = z;
    p->nBufAlloc = nNew;
  }
  /* read(), not fread(): a pipe hands over what it has, and the load goes
  ** on with it instead of waiting for a whole block */
  ssize_t got;
  do {
    got = read(fileno(p->pIn), p->zBuf + p->nBuf, p->nBufAlloc - p->nBuf);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    *pzErr = sqlite3_mprintf("reading the file after line %lld: %s", (long long)p->iLine,
                             strerror(errno));
    return SQLITE_IOERR;
  }
  size_t n = (size_t)got;
  if (n == 0) p->bEof = 1;
  if (p->nConsumed == 0 && p->nBuf == 0 && n >= 3 && memcmp(p->zBuf, "\xEF\xBB\xBF", 3) == 0) {
    memmove(p->zBuf, p->zBuf + 3, n - 3); /* a byte-order mark */
    n -= 3;
    p->nConsumed = 3;
  }
  p->nBuf += n;
  return SQLITE_OK;
}

/* The first of z[i..n) that is the separator or LF, or n. Eight bytes at
** a time: a byte equal to c makes (w ^ c-repeated) have a zero byte, and
** (x - 0x01..) & ~x & 0x80.. marks the lowest zero byte of x exactly. */
static inline size_t scan_plain(const char *z, size_t i, size_t n, char cSep) {
  const uint64_t k1 = 0x0101010101010101ull, k80 = 0x8080808080808080ull;
  const uint64_t mSep = k1 * (uint8_t)cSep, mLf = k1 * (uint8_t)'\n';
  while (i + 8 <= n) {
    uint64_t w;
    memcpy(&w, z + i, 8);
    uint64_t a = w ^ mSep, b = w ^ mLf;
    uint64_t t = (((a - k1) & ~a) | ((b - k1) & ~b)) & k80;
    if (t) return i + (size_t)(__builtin_ctzll(t) >> 3);
    i += 8;
  }
  while (i < n && z[i] != cSep && z[i] != '\n') i++;
  return i;
}

static int add_field_grow(vt_csv *p);

static inline int add_field(vt_csv *p, const char *z, size_t n, int bQuoted, size_t iScratch) {
  if (p->nField == p->nFieldAlloc && add_field_grow(p)) return SQLITE_NOMEM;
  vt_csv_field *f = &p->aField[p->nField];
  f->z = z;
  f->n = (uint32_t)n;
  f->bQuoted = bQuoted;
  p->aScratchOff[p->nField] = iScratch;
  p->nField++;
  return SQLITE_OK;
}

static int add_field_grow(vt_csv *p) {
  {
    int nNew = p->nFieldAlloc ? 2 * p->nFieldAlloc : 32;
    vt_csv_field *a = sqlite3_realloc64(p->aField, sizeof(*a) * (size_t)nNew);
    if (!a) return SQLITE_NOMEM;
    p->aField = a;
    size_t *o = sqlite3_realloc64(p->aScratchOff, sizeof(*o) * (size_t)nNew);
    if (!o) return SQLITE_NOMEM;
    p->aScratchOff = o;
    p->nFieldAlloc = nNew;
  }
  return SQLITE_OK;
}

static int scratch_add(vt_csv *p, const char *z, size_t n) {
  if (p->nScratch + n > p->nScratchAlloc) {
    size_t nNew = (p->nScratch + n) * 2 + 256;
    char *s = sqlite3_realloc64(p->zScratch, nNew);
    if (!s) return SQLITE_NOMEM;
    p->zScratch = s;
    p->nScratchAlloc = nNew;
  }
  memcpy(p->zScratch + p->nScratch, z, n);
  p->nScratch += n;
  return SQLITE_OK;
}

/* A bad record: consume it up to iEnd (the reader goes on after it). */
static int bad_record(vt_csv *p, size_t iEnd) {
  p->iRecLine = p->iLine;
  for (size_t t = p->iPos; t < iEnd; t++) p->iLine += p->zBuf[t] == '\n';
  p->nConsumed += iEnd - p->iPos;
  p->iPos = iEnd;
  return SQLITE_ERROR;
}

/* Parse one record from zBuf[iPos..nBuf). Returns 1 (a record: fields set,
** iPos past it), CSV_MORE (the buffer ends inside the record and the file
** has more: fill and parse again), or an SQLite error code with *pzErr. */
#define CSV_MORE (-1)
#if defined(__SSE2__)
/* The common record, with no quote before its LF: its separators and LF
** found 16 bytes at a time (a bit mask of each per block), the fields cut
** between them. 1 when it took the record (iPos past it); 0 when the
** record has a quote, or its LF is not within the buffer: the general
** parse below then reads it from the start. */
static int parse_plain(vt_csv *p) {
  const char *z = p->zBuf;
  size_t i = p->iPos, n = p->nBuf, iField = i;
  const __m128i vSep = _mm_set1_epi8(p->cSep), vLf = _mm_set1_epi8('\n'),
                vQuote = _mm_set1_epi8('"');
  p->nField = 0;
  while (i + 16 <= n) {
    __m128i v = _mm_loadu_si128((const __m128i *)(z + i));
    unsigned mLf = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vLf));
    unsigned mQuote = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vQuote));
    unsigned mSep = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vSep));
    if (mLf) {
      unsigned mUpTo = mLf & (0u - mLf); /* the first LF */
      mUpTo |= mUpTo - 1;
      if (mQuote & mUpTo) return 0;
      mSep &= mUpTo;
    } else if (mQuote) {
      return 0;
    }
    for (unsigned m = mSep | (mLf & (0u - mLf)); m; m &= m - 1) {
      size_t j = i + (size_t)__builtin_ctz(m);
      if (z[j] == '\n') {
        size_t e = j;
        if (e > iField && z[e - 1] == '\r') e--;
        if (add_field(p, z + iField, e - iField, 0, (size_t)-1)) return 0;
        p->iRecLine = p->iLine++;
        p->nConsumed += j + 1 - p->iPos;
        p->iPos = j + 1;
        return 1;
      }
      if (add_field(p, z + iField, j - iField, 0, (size_t)-1)) return 0;
      iField = j + 1;
    }
    i += 16;
  }
  return 0;
}
#endif

static int parse_record(vt_csv *p, char **pzErr) {
#if defined(__SSE2__)
  if (parse_plain(p)) return SQLITE_ROW;
#endif
  const char *z = p->zBuf;
  size_t i = p->iPos, n = p->nBuf;
  const char cSep = p->cSep;
  int64_t iLine = p->iLine;
  p->nField = 0;
  p->nScratch = 0;
  for (;;) {
    /* one field starts at i */
    if (i < n && z[i] == '"') {
      size_t j = i + 1, iRun = j, iScratch = (size_t)-1;
      for (;;) {
        const char *q = j < n ? memchr(z + j, '"', n - j) : NULL;
        if (!q) {
          if (!p->bEof) return CSV_MORE;
          *pzErr = sqlite3_mprintf("line %lld, field %d: a quoted field has no closing quote",
                                   (long long)iLine, p->nField + 1);
          return bad_record(p, n);
        }
        j = (size_t)(q - z);
        if (j + 1 >= n && !p->bEof) return CSV_MORE; /* is it doubled? read on to see */
        if (j + 1 < n && z[j + 1] == '"') {
          /* a doubled quote: the field is unescaped into the scratch buffer */
          if (iScratch == (size_t)-1) iScratch = p->nScratch;
          if (scratch_add(p, z + iRun, j + 1 - iRun)) return SQLITE_NOMEM;
          j += 2;
          iRun = j;
          continue;
        }
        break;
      }
      /* the closing quote at j: a separator, CRLF, LF or the end must follow */
      size_t k = j + 1;
      int bBad = 0;
      if (k < n && z[k] != cSep && z[k] != '\n') {
        if (z[k] != '\r') {
          bBad = 1;
        } else if (k + 1 >= n) {
          if (!p->bEof) return CSV_MORE;
        } else if (z[k + 1] != '\n') {
          bBad = 1;
        }
      }
      for (size_t t = i; t < j; t++) iLine += z[t] == '\n';
      if (bBad) {
        *pzErr = sqlite3_mprintf("line %lld, field %d: a quote inside a quoted field must be "
                                 "doubled (\"\"), or end the field",
                                 (long long)iLine, p->nField + 1);
        const char *e = memchr(z + k, '\n', n - k);
        if (!e && !p->bEof) return CSV_MORE;
        return bad_record(p, e ? (size_t)(e - z) + 1 : n);
      }
      int rc;
      if (iScratch != (size_t)-1) {
        if (scratch_add(p, z + iRun, j - iRun)) return SQLITE_NOMEM;
        rc = add_field(p, NULL, p->nScratch - iScratch, 1, iScratch);
      } else {
        rc = add_field(p, z + i + 1, j - i - 1, 1, (size_t)-1);
      }
      if (rc) return rc;
      i = k;
    } else {
      size_t j = scan_plain(z, i, n, cSep);
      if (j >= n && !p->bEof) return CSV_MORE;
      size_t e = j;
      if (e > i && z[e - 1] == '\r' && (j >= n || z[j] == '\n')) e--; /* CRLF, or CR at EOF */
      if (add_field(p, z + i, e - i, 0, (size_t)-1)) return SQLITE_NOMEM;
      i = j;
    }
    /* after a field: a separator, the end of the record, or the end of the file */
    if (i < n && z[i] == cSep) {
      i++;
      continue;
    }
    if (i < n && z[i] == '\r') i++; /* CR before LF after a quoted field */
    if (i < n && z[i] == '\n') {
      i++;
      iLine++;
    }
    break;
  }
  for (int f = 0; f < p->nField; f++) {
    if (p->aScratchOff[f] != (size_t)-1) p->aField[f].z = p->zScratch + p->aScratchOff[f];
  }
  p->iRecLine = p->iLine;
  p->iLine = iLine;
  p->nConsumed += i - p->iPos;
  p->iPos = i;
  return SQLITE_ROW;
}

int vt_csv_next(vt_csv *p, int *pnField, const vt_csv_field **paField, char **pzErr) {
  *pnField = 0;
  *paField = NULL;
  for (;;) {
    if (p->iPos >= p->nBuf) {
      if (p->bEof) return SQLITE_DONE;
      int rc = fill(p, pzErr);
      if (rc) return rc;
      continue;
    }
    int rc = parse_record(p, pzErr);
    if (rc == SQLITE_ROW) break;
    if (rc != CSV_MORE) return rc;
    rc = fill(p, pzErr);
    if (rc) return rc;
  }
  *pnField = p->nField;
  *paField = p->aField;
  return SQLITE_ROW;
}
