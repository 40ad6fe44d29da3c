/*
** bench/gen_common.h - what the TPC-H and SSB generators share: the
** counter-based random number streams, column descriptors, the calendar of
** 1992-01-01 .. 1999-06-30, the pool of comment text and hand-rolled
** number formatting.
**
** Determinism: every row (or every order, for the order/lineitem pair) draws
** from its own stream, seeded from (seed, table stream, row index). A row's
** values therefore depend on nothing but the seed and its index: any slice
** of a table can be generated on its own, in any order, on any thread, and
** comes out byte-identical.
**
** Nothing here allocates after gen_init(); the text pool and calendar are
** process-wide, built once, read-only afterwards (thread safe).
*/
#ifndef CSQ_BENCH_GEN_COMMON_H
#define CSQ_BENCH_GEN_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- random streams ---------------------------------------------------- */

/* A splitmix64 stream: tiny state, good enough statistics for data
** generation, and cheap to seed anywhere (which is why it is used instead of
** a long-period generator that would need skip-ahead). */
typedef struct gen_rng {
  uint64_t s;
} gen_rng;

#define GEN_GAMMA 0x9E3779B97F4A7C15ULL

static inline uint64_t gen_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Position r at the start of row `index` of stream `stream` under `seed`. */
static inline void gen_rng_seed(gen_rng *r, uint64_t seed, uint32_t stream, uint64_t index) {
  uint64_t base = gen_mix64(seed ^ ((uint64_t)stream << 48) ^ 0x5851F42D4C957F2DULL);
  r->s = gen_mix64(base + index * GEN_GAMMA);
}

static inline uint64_t gen_rng_next(gen_rng *r) {
  r->s += GEN_GAMMA;
  return gen_mix64(r->s);
}

/* Uniform integer in [lo, hi] (hi - lo < 2^32); multiply-shift, so no
** division and a bias below 2^-32. */
static inline int64_t gen_rand(gen_rng *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1;
  return lo + (int64_t)(((gen_rng_next(r) >> 32) * span) >> 32);
}

/* ---- column descriptors ------------------------------------------------ */

/* How a column is held in a row struct: GEN_INT an int64_t, GEN_REAL a
** double, GEN_TEXT a NUL-terminated char array inside the struct. */
typedef enum gen_kind { GEN_INT = 1, GEN_REAL = 2, GEN_TEXT = 3 } gen_kind;

typedef struct gen_col {
  const char *zName; /* column name, e.g. "l_orderkey" */
  const char *zType; /* declared SQL type: INTEGER, REAL or TEXT */
  gen_kind eKind;
  uint16_t off; /* byte offset of the field in the row struct */
  uint8_t nDec; /* GEN_REAL: decimals the value is exact to (for text output) */
} gen_col;

/* One table of a benchmark: its name, columns and row struct size. */
typedef struct gen_table {
  const char *zName;
  const gen_col *aCol;
  int nCol;
  size_t szRow;
} gen_table;
#define GEN_TABLE(name, cols, S)                                                                   \
  { name, cols, (int)(sizeof(cols) / sizeof(cols[0])), sizeof(S) }

/* ---- calendar ---------------------------------------------------------- */

/* Day numbers count from 1992-01-01 (day 0). The calendar covers
** GEN_NDAYS days, more than any generated date needs. */
#define GEN_NDAYS       2738 /* 1992-01-01 .. 1999-06-30 */
#define GEN_DAY_END     2556 /* 1998-12-31 */
#define GEN_DAY_CURRENT 1263 /* 1995-06-17, TPC-H's CURRENTDATE */

typedef struct gen_day {
  char zIso[11]; /* "YYYY-MM-DD" */
  uint8_t month; /* 1..12 */
  uint8_t mday;  /* 1..31 */
  uint8_t wday;  /* 0 = Sunday .. 6 = Saturday */
  uint8_t lastInMonth;
  int16_t year;
  int16_t yday; /* 1..366 */
  int32_t yyyymmdd;
} gen_day;

extern gen_day gen_aDay[GEN_NDAYS];

/* ---- text -------------------------------------------------------------- */

/* The comment text pool: GEN_TEXT_POOL bytes of sentences built from a fixed
** vocabulary (TPC-H's grammar, simplified), with no comma, quote or newline.
** Comments are substrings of it at random offsets, as dbgen does. */
#define GEN_TEXT_POOL (4u << 20)
extern const char *gen_zText;

/* Build the calendar and text pool (idempotent, thread safe). */
void gen_init(void);

/* A comment drawn from r: length uniform in [nMin, nMax], copied NUL-terminated
** into z (which holds nMax + 1 bytes). Returns the length. Exactly two draws.
** gen_text_pick makes the same two draws but only returns where the text is,
** for generators that draw a row long before they format it. */
static inline int gen_text_pick(gen_rng *r, int nMin, int nMax, uint32_t *pOff) {
  int n = (int)gen_rand(r, nMin, nMax);
  *pOff = (uint32_t)gen_rand(r, 0, (int64_t)GEN_TEXT_POOL - 1 - n);
  return n;
}
static inline void gen_text_copy(char *z, uint32_t off, int n) {
  memcpy(z, gen_zText + off, (size_t)n);
  z[n] = 0;
}
static inline int gen_text(gen_rng *r, char *z, int nMin, int nMax) {
  uint32_t off;
  int n = gen_text_pick(r, nMin, nMax, &off);
  gen_text_copy(z, off, n);
  return n;
}

/* A random alphanumeric string ("v-string") of length [nMin, nMax] into z. */
int gen_vstring(gen_rng *r, char *z, int nMin, int nMax);

/* Copy NUL-terminated zSrc into z; returns the length (no bounds: callers
** size their arrays for the longest word of their list). */
static inline int gen_copy(char *z, const char *zSrc) {
  size_t n = strlen(zSrc);
  memcpy(z, zSrc, n + 1);
  return (int)n;
}

/* ---- number formatting (no printf in hot paths) ------------------------ */

/* Decimal digits of v into z, no terminator; returns the count. */
int gen_fmt_u64(char *z, uint64_t v);
int gen_fmt_i64(char *z, int64_t v);

/* v as exactly nWidth digits, zero padded (v < 10^nWidth); no terminator. */
void gen_fmt_padded(char *z, uint64_t v, int nWidth);
/* "Prefix#000000042" into z: the prefix then a 9-digit zero-padded key. */
void gen_key_name(char *z, const char *zPrefix, int64_t key);

/* A value with nDec decimals from its scaled integer (e.g. cents and 2 ->
** "-12.05"); no terminator; returns the length. */
int gen_fmt_scaled(char *z, int64_t v, int nDec);

/* Phone number "CC-LLL-LLL-LLLL" for a nation key, into z (16 bytes). Three draws. */
void gen_phone(gen_rng *r, char *z, int nationkey);

/* Row count base * sf, floored, at least 1. The tiny epsilon absorbs the
** representation error of decimal scale factors such as 0.3. */
int64_t gen_scaled(int64_t base, double sf);

/* TPC-H part retail price in cents for a part key (spec 4.2.3). */
static inline int64_t gen_retail_cents(int64_t partkey) {
  return 90000 + (partkey / 10) % 20001 + 100 * (partkey % 1000);
}

/* Sparse order key for order index i (0-based): TPC-H keeps the low 3 bits
** of each group of 32 keys, so keys go 1..7, 32..39, 64..71, ... (the
** index i + 1 with two zero bits inserted above the lowest three). */
static inline int64_t gen_orderkey(int64_t i) {
  uint64_t k = (uint64_t)i + 1;
  return (int64_t)(((k >> 3) << 5) | (k & 7));
}

/* Word lists shared by TPC-H and SSB. */
extern const char *const gen_aNation[25];
extern const int gen_aNationRegion[25];
extern const char *const gen_aRegion[5];
extern const char *const gen_aColor[92];
extern const char *const gen_aTypeS1[6];
extern const char *const gen_aTypeS2[5];
extern const char *const gen_aTypeS3[5];
extern const char *const gen_aContainerS1[5];
extern const char *const gen_aContainerS2[8];
extern const char *const gen_aSegment[5];
extern const char *const gen_aPriority[5];
extern const char *const gen_aShipMode[7];
extern const char *const gen_aShipInstruct[4];

#endif /* CSQ_BENCH_GEN_COMMON_H */
