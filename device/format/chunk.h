/*
** device/format/chunk.h - column chunks: the encoded form of one column of one row
** group, as stored on the media, and its zone map.
**
** A chunk is self-describing and checksummed (the byte layout is documented
** in device/store/FORMAT.md, section "Column chunk"): it starts with a fixed header
** (magic, encoding, value count, sizes, XXH3-64 of everything after the
** checksum field), then the null bitmap, then the encoded payload. Encodings are chosen per chunk
** from the values: frame-of-reference bit-packing for integers, dictionary
** and plain for text, decimal-scaled integers or plain for reals, plain for blobs, run-length where
*runs pay,
** and a tagged encoding for chunks that mix storage classes (slower, exact).
**
** The zone map (csq_zone) of a chunk is kept in the catalog, beside the
** chunk's location, so that row groups can be skipped without reading them.
*/
#ifndef CSQ_DEVICE_CHUNK_H
#define CSQ_DEVICE_CHUNK_H

#include <stddef.h>
#include <stdint.h>
#include "device/format/le.h"
#include "device/format/vec.h"

/* Encodings (the chunk header's enc byte). */
#define CSQ_ENC_CONST      1 /* all values equal (incl. all NULL) */
#define CSQ_ENC_INT_FOR    2 /* INT: frame of reference + bit-packing */
#define CSQ_ENC_INT_RLE    3 /* INT: runs of (value, length) */
#define CSQ_ENC_REAL_PLAIN 4 /* REAL: 8-byte doubles */
#define CSQ_ENC_TEXT_PLAIN 5 /* TEXT: offsets + bytes */
#define CSQ_ENC_TEXT_DICT  6 /* TEXT: sorted dictionary + bit-packed codes */
#define CSQ_ENC_BLOB_PLAIN 7 /* BLOB: offsets + bytes */
#define CSQ_ENC_TAGGED     8 /* mixed classes: one tag byte per value + payloads */
#define CSQ_ENC_REAL_DEC   9 /* REAL: decimal-scaled integers, FOR bit-packed */

/* REAL_DEC: value = (double)(int64)(iRef + code) / 10^scale, scale in nAux;
** written only where that division gives back every value's exact bits. */
#define CSQ_DEC_MAX_SCALE 8
static inline double csq_pow10(unsigned s) {
  static const double a[CSQ_DEC_MAX_SCALE + 1] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8};
  return a[s <= CSQ_DEC_MAX_SCALE ? s : 0];
}

#define CSQ_ZONE_PREFIX 24 /* bytes of TEXT/BLOB min/max kept in a zone map */

/* Zone map of a chunk: what a predicate may know without reading it. */
typedef struct csq_zone {
  uint32_t nVal; /* values, NULLs included */
  uint32_t nNull;
  uint8_t clsMask;              /* OR of (1 << class) */
  uint8_t bMinTrunc, bMaxTrunc; /* text/blob min/max prefix was truncated */
  uint8_t nMinTxt, nMaxTxt;     /* bytes in zMinTxt / zMaxTxt */
  uint8_t pad[3];
  int64_t iMin, iMax;            /* over INT values (valid if clsMask has CSQ_INT) */
  double rMin, rMax;             /* over INT and REAL values as doubles (valid if any number) */
  char zMinTxt[CSQ_ZONE_PREFIX]; /* smallest TEXT (or BLOB if no TEXT) value, prefix */
  char zMaxTxt[CSQ_ZONE_PREFIX]; /* largest, prefix; if bMaxTrunc, the true max starts
                                    with these bytes and may be longer */
} csq_zone;

typedef struct csq_chunk_info {
  uint8_t enc;     /* encoding chosen */
  uint64_t nBytes; /* encoded size, header included */
  uint64_t xxh3;   /* XXH3-64 of the whole encoded chunk (header included) */
  csq_zone zone;
} csq_chunk_info;

/* Encode values [i0, i0+n) of v. On success *ppOut is a malloc'd buffer of
** *pnOut bytes that the caller frees; pInfo describes it. Returns 0 or
** -ENOMEM / -EINVAL. */
int csq_chunk_encode(const csq_vec *v, uint32_t i0, uint32_t n, uint8_t **ppOut, size_t *pnOut,
                     csq_chunk_info *pInfo);

/* Decode a whole chunk of n bytes, appending its values to pOut. Verifies
** the header and the checksum first. Returns 0, -EBADMSG (checksum or
** structure wrong: the chunk is corrupt), or -ENOMEM. Never reads outside
** p[0..n) whatever the bytes say. */
int csq_chunk_decode(const uint8_t *p, size_t n, csq_vec *pOut);

/* Checks only the header and checksum (cheap), 0 or -EBADMSG. */
int csq_chunk_verify(const uint8_t *p, size_t n);

/* Merge zone b into a (for a zone map over several chunks). */
void csq_zone_merge(csq_zone *a, const csq_zone *b);

/* ---- Additions (chunk_dec.c, bitpack.c): limits, and reading encoded data in place ----
**
** A vectorised executor can evaluate predicates on the encoded form without
** decoding to a csq_vec: csq_chunk_view() checks a chunk exactly as
** csq_chunk_decode() does (checksum, every size, offset, code and tag) and
** then describes where its sections lie, so the executor may trust every
** count and index it finds there. Order is preserved by the encodings:
** INT_FOR codes (and INT_RLE run-value codes) are value - iRef as unsigned
** numbers, so code order is value order; TEXT_DICT entries are sorted
** ascending in BINARY (memcmp, shorter first) order and distinct, so code
** order is value order and "= literal" is one dictionary search.
**
** Positions: every encoding has one slot per value, NULLs included, so slot
** i is row i of the row group. A NULL slot holds some valid value of the
** encoding (INT: the previous value, so NULLs never break a run; REAL 0.0;
** PLAIN an empty string; DICT code 0; TAGGED tag CSQ_NULL) and must be
** ignored: aNull is the truth. Multi-byte numbers are
** little-endian; sections start at multiples of 8 from the chunk start, so a
** chunk in an 8-aligned buffer has aligned arrays (read them with
** csq_le32/csq_le64 of le.h to be safe on any host and any alignment). */

/* Largest value count of one chunk; bounds what decoding may allocate when
** counts do not come with bytes (CONST, INT_RLE). */
#define CSQ_CHUNK_MAX_VALS (1u << 20)
#define CSQ_CHUNK_HDR      56 /* bytes of the fixed header */

typedef struct csq_chunk_desc {
  uint8_t enc;     /* CSQ_ENC_* */
  uint8_t cls;     /* class of every non-NULL value; 0 for TAGGED; CONST: CSQ_NULL if all NULL */
  uint8_t width;   /* bits per packed code (INT_FOR, INT_RLE run values, TEXT_DICT), else 0 */
  uint8_t clsMask; /* OR of (1 << class) over all values */
  uint32_t nVal, nNull;
  uint32_t nAux;   /* INT_RLE: runs; TEXT_DICT: dictionary entries; REAL_DEC: the scale; else 0 */
  uint64_t nBytes; /* bytes of the chunk, header included (may be less than the buffer) */
  int64_t
      iRef; /* INT_FOR, INT_RLE, REAL_DEC: value = iRef + code (mod 2^64); CONST INT: the value */
  double rConst;          /* CONST REAL: the value, bit-exact */
  uint64_t nVar;          /* bytes at aVar */
  const uint8_t *aNull;   /* bit i (byte i/8, bit i%8) set = value i is NULL; NULL when nNull
                             is 0 or nVal (then no slot or every slot is NULL) */
  const uint8_t *aPacked; /* INT_FOR, TEXT_DICT, REAL_DEC: nVal codes; INT_RLE: nAux run-value
                             codes; read with csq_unpack_u64(aPacked, width, ...) */
  const uint8_t *aRunEnd; /* INT_RLE: nAux u32, exclusive end slot of each run, strictly
                             ascending, the last = nVal */
  const uint8_t *aReal;   /* REAL_PLAIN: nVal doubles (IEEE bits) */
  const uint8_t *aOff;    /* TEXT_PLAIN, BLOB_PLAIN: nVal+1 u32, value i = aVar[aOff[i]..aOff[i+1]);
                             TEXT_DICT: nAux+1 u32, the same for dictionary entry k */
  const uint8_t *aVar;    /* TEXT/BLOB bytes; CONST TEXT/BLOB: the value (nVar bytes) */
  const uint8_t *aTag;    /* TAGGED: nVal class bytes (CSQ_INT..CSQ_NULL) */
  const uint8_t *aSlot;   /* TAGGED: nVal u64: INT value, REAL bits, TEXT/BLOB length (the bytes of
                             successive TEXT/BLOB values follow one another in aVar), NULL 0 */
} csq_chunk_desc;

/* Check chunk p[0..n) (n may exceed the chunk) like csq_chunk_decode and
** describe it in *pDesc, whose pointers point into p (p must outlive them).
** 0 or -EBADMSG. */
int csq_chunk_view(const uint8_t *p, size_t n, csq_chunk_desc *pDesc);
/* The same description of a chunk whose very bytes passed csq_chunk_view
** before (the caller holds a checksum of the whole chunk that says so): the
** header and every size and section bound are checked again, the checksum
** and the checks that read every value (bitmap population, offsets,
** dictionary order, codes below nAux) are not. 0 or -EBADMSG. */
int csq_chunk_layout(const uint8_t *p, size_t n, csq_chunk_desc *pDesc);

/* Unpack codes [i0, i0+n) of a bit-packed section of width bits (0..64)
** into out[0..n). Codes are an LSB-first bit stream in little-endian 64-bit
** words; a section of nTotal codes occupies csq_packed_size(nTotal, width)
** bytes (8 bytes of slack at the end let the unpacker use whole-word loads),
** and i0+n must not exceed nTotal. Fast for any width (specialised loops). */
void csq_unpack_u64(const uint8_t *packed, unsigned width, uint32_t i0, uint32_t n, uint64_t *out);
/* The codes at indexes aIdx[0..n) (any order), into out[0..n): for a few
** rows of a batch, cheaper than unpacking all of it. */
void csq_unpack_sel(const uint8_t *packed, unsigned width, const uint32_t *aIdx, uint32_t n,
                    uint64_t *out);
/* REAL_DEC values of codes u[0..n): out[k] = (double)(int64)(u[k] + ref) /
** 10^scale, the correctly rounded quotient, bit for bit what the division
** gives (on CPUs with FMA without dividing: see bitpack.c). */
void csq_dec_values(const uint64_t *u, uint32_t n, int64_t ref, unsigned scale, double *out);
/* Select in one pass over codes [i0, i0+n): the indexes i of the codes c
** with (c - lo <= w) != neg (unsigned, so [lo, lo+w] is a range of codes),
** in ascending order into out[], which has room for n. Returns how many. */
uint32_t csq_select_range(const uint8_t *packed, unsigned width, uint32_t i0, uint32_t n,
                          uint64_t lo, uint64_t w, int neg, uint32_t *out);

static inline uint64_t csq_packed_size(uint32_t nTotal, unsigned width) {
  return width == 0 ? 0 : ((uint64_t)nTotal * width + 63) / 64 * 8 + 8;
}

#endif /* CSQ_DEVICE_CHUNK_H */
