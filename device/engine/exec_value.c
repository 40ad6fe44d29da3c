/*
** device/engine/exec_value.c - SQLite values against a program's constants,
** LIKE and GLOB patterns (compiled to tokens, matched without exponential
** backtracking), and the generic evaluator: one term on one value, which
** every typed loop of exec_term.c falls back to.
*/
#include "device/engine/exec_int.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The kinds of a pattern's tokens (ex_tok). */
enum { TK_LIT, TK_ONE, TK_ALL, TK_SET, TK_BAD };

static int lower_ascii(int c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* ---- LIKE / GLOB ---- */

/* Read one UTF-8 character at z[*pi] (< n), as SQLite reads them: a lead
** byte and any continuation bytes; malformed forms become U+FFFD. */
static uint32_t utf8_read(const uint8_t *z, uint32_t n, uint32_t *pi) {
  uint32_t i = *pi, c = z[i++];
  if (c >= 0xC0) {
    c = c < 0xE0   ? c & 0x1F
        : c < 0xF0 ? c & 0x0F
        : c < 0xF8 ? c & 0x07
        : c < 0xFC ? c & 0x03
        : c < 0xFE ? c & 0x01
                   : 0;
    while (i < n && (z[i] & 0xC0) == 0x80) c = (c << 6) + (z[i++] & 0x3F);
    if (c < 0x80 || (c & 0xFFFFF800) == 0xD800 || (c & 0xFFFFFFFE) == 0xFFFE) c = 0xFFFD;
  }
  *pi = i;
  return c;
}

static uint32_t str_end(const uint8_t *z, uint32_t n) {
  const uint8_t *e = n ? memchr(z, 0, n) : NULL;
  return e ? (uint32_t)(e - z) : n;
}

/* The segments of a pattern whose tokens are all ASCII literals and
** wildcards for any run ('%', '*'): TPC-H's '%special%requests%'. Text
** bytes at or above 0x80 never equal an ASCII byte, and an ASCII byte is a
** character of its own however the text's UTF-8 is formed, so finding the
** segments' bytes in turn decides the match as the tokens would. Sets
** et->nSeg (-1: tokens only); 0 or -ENOMEM. */
static int pat_segments(ex_term *et) {
  et->nSeg = -1;
  for (int p = 0; p < et->nTok; p++) {
    const ex_tok *t = &et->aTok[p];
    if (t->kind != TK_ALL && !(t->kind == TK_LIT && t->c > 0 && t->c < 0x80)) return 0;
  }
  et->aSegByte = malloc((size_t)et->nTok + 1);
  et->aSegOff = malloc(sizeof(uint32_t) * ((size_t)et->nTok + 2));
  if (!et->aSegByte || !et->aSegOff) return -ENOMEM;
  et->bSegFold = et->t.op == CSQ_OP_LIKE && !(et->t.flags & CSQ_TF_LIKE_CASE);
  et->bAnchorStart = et->nTok > 0 && et->aTok[0].kind != TK_ALL;
  et->bAnchorEnd = et->nTok > 0 && et->aTok[et->nTok - 1].kind != TK_ALL;
  uint32_t nByte = 0;
  int nSeg = 0;
  for (int p = 0; p < et->nTok;) {
    if (et->aTok[p].kind == TK_ALL) {
      p++;
      continue;
    }
    et->aSegOff[nSeg++] = nByte;
    for (; p < et->nTok && et->aTok[p].kind == TK_LIT; p++) {
      int c = (int)et->aTok[p].c;
      et->aSegByte[nByte++] = (uint8_t)(et->bSegFold ? lower_ascii(c) : c);
    }
  }
  et->aSegOff[nSeg] = nByte;
  et->nSeg = nSeg;
  return 0;
}

/* Compile the pattern of a LIKE/GLOB term into tokens. */
int ex_pat_compile(ex_term *et) {
  const csq_pconst *k = et->a;
  uint32_t n = str_end(k->z, k->len), i = 0, nTok = 0, nRange = 0;
  int bGlob = et->t.op == CSQ_OP_GLOB;
  uint32_t esc = et->t.esc;
  et->aTok = malloc(sizeof(ex_tok) * (n + 1));
  et->aRange = malloc(sizeof(uint32_t) * 2 * (n + 1));
  if (!et->aTok || !et->aRange) return -ENOMEM;
  while (i < n) {
    uint32_t c = utf8_read(k->z, n, &i);
    ex_tok *t = &et->aTok[nTok++];
    memset(t, 0, sizeof(*t));
    if (!bGlob) {
      if (esc && c == esc) {
        if (i >= n) { /* a trailing escape matches nothing */
          t->kind = TK_BAD;
          continue;
        }
        t->kind = TK_LIT;
        t->c = utf8_read(k->z, n, &i);
      } else if (c == '%') {
        t->kind = TK_ALL;
      } else if (c == '_') {
        t->kind = TK_ONE;
      } else {
        t->kind = TK_LIT;
        t->c = c;
      }
      continue;
    }
    if (c == '*')
      t->kind = TK_ALL;
    else if (c == '?')
      t->kind = TK_ONE;
    else if (c != '[') {
      t->kind = TK_LIT;
      t->c = c;
    } else {
      /* [set]: '^' first inverts; ']' first is literal; a-b ranges; '-'
      ** first or last is literal; unterminated never matches. */
      uint32_t prior = 0, c2;
      int bHavePrior = 0;
      t->kind = TK_SET;
      t->c = nRange;
      if (i < n && k->z[i] == '^') {
        t->bInvert = 1;
        i++;
      }
      if (i < n && k->z[i] == ']') {
        et->aRange[2 * nRange] = et->aRange[2 * nRange + 1] = ']';
        nRange++;
        i++;
      }
      int bClosed = 0;
      while (i < n) {
        c2 = utf8_read(k->z, n, &i);
        if (c2 == ']') {
          bClosed = 1;
          break;
        }
        if (c2 == '-' && bHavePrior && i < n && k->z[i] != ']') {
          uint32_t hi = utf8_read(k->z, n, &i);
          et->aRange[2 * nRange] = prior;
          et->aRange[2 * nRange + 1] = hi;
          /* the prior literal was already added as [prior, prior]; widen it */
          nRange--;
          et->aRange[2 * nRange] = prior;
          et->aRange[2 * nRange + 1] = hi;
          nRange++;
          bHavePrior = 0;
        } else {
          et->aRange[2 * nRange] = et->aRange[2 * nRange + 1] = c2;
          nRange++;
          prior = c2;
          bHavePrior = 1;
        }
      }
      t->nRange = nRange - t->c;
      if (!bClosed) t->kind = TK_BAD;
    }
  }
  et->nTok = (int)nTok;
  return pat_segments(et);
}

static int tok_match(const ex_term *et, const ex_tok *t, uint32_t c) {
  switch (t->kind) {
  case TK_ONE:
    return 1;
  case TK_LIT:
    if (t->c == c) return 1;
    return et->t.op == CSQ_OP_LIKE && !(et->t.flags & CSQ_TF_LIKE_CASE) && t->c < 0x80 &&
           c < 0x80 && lower_ascii((int)t->c) == lower_ascii((int)c);
  case TK_SET: {
    int seen = 0;
    for (uint32_t r = 0; r < t->nRange && !seen; r++) {
      /* SQLite matches a range as c >= lo && c <= hi, and a literal by == */
      uint32_t lo = et->aRange[2 * (t->c + r)], hi = et->aRange[2 * (t->c + r) + 1];
      if (c >= lo && c <= hi) seen = 1;
    }
    return seen ^ t->bInvert;
  }
  default:
    return 0;
  }
}

/* Does z[0..n) equal segment bytes g[0..n) (folded when bFold)? */
static int seg_eq(const uint8_t *z, const uint8_t *g, uint32_t n, int bFold) {
  if (!bFold) return memcmp(z, g, n) == 0;
  for (uint32_t i = 0; i < n; i++)
    if (lower_ascii(z[i]) != g[i]) return 0;
  return 1;
}

/* The first place at or after z[0] where segment g[0..m) starts, or -1.
** Candidates are the places where both the segment's first and last byte
** match, sixteen places at a time, and only those are compared in full:
** a segment's first letter alone recurs often in text (the 's' of
** "special"). Folding ORs 0x20 into the text's bytes where the segment's
** byte is a letter, which maps exactly 'A'..'Z' to 'a'..'z' among the
** bytes that can equal it (g is folded already). */
static int64_t seg_find(const uint8_t *z, uint32_t n, const uint8_t *g, uint32_t m, int bFold) {
  if (m > n) return -1;
  uint8_t g0 = g[0], gl = g[m - 1];
  uint8_t f0 = bFold && g0 >= 'a' && g0 <= 'z' ? 0x20 : 0;
  uint8_t fl = bFold && gl >= 'a' && gl <= 'z' ? 0x20 : 0;
  uint32_t i = 0, nPos = n - m + 1; /* places a segment may start */
#ifdef __SSE2__
  const __m128i v0 = _mm_set1_epi8((char)g0), vl = _mm_set1_epi8((char)gl);
  const __m128i k0 = _mm_set1_epi8((char)f0), kl = _mm_set1_epi8((char)fl);
  /* the places past the last sixteen: one more window ending at the last
  ** place, its places already looked at masked off */
  for (uint32_t nLeft = nPos >= 16 ? nPos : 0; i < nLeft;) {
    uint32_t j = i + 16 <= nPos ? i : nPos - 16;
    __m128i a = _mm_or_si128(_mm_loadu_si128((const __m128i *)(z + j)), k0);
    __m128i b = _mm_or_si128(_mm_loadu_si128((const __m128i *)(z + j + m - 1)), kl);
    unsigned bits =
        (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, v0), _mm_cmpeq_epi8(b, vl)));
    bits &= ~((1u << (i - j)) - 1);
    for (; bits; bits &= bits - 1) {
      uint32_t x = j + (uint32_t)__builtin_ctz(bits);
      if (seg_eq(z + x + 1, g + 1, m - 1, bFold)) return x;
    }
    i = j + 16;
  }
#endif
  for (; i < nPos; i++)
    if ((z[i] | f0) == g0 && (z[i + m - 1] | fl) == gl && seg_eq(z + i + 1, g + 1, m - 1, bFold))
      return i;
  return -1;
}

/* pat_match for a pattern of segments (pat_segments): each segment found
** in turn, leftmost first, which is where any match may take it. */
static int seg_match(const ex_term *et, const uint8_t *z, uint32_t n) {
  const uint8_t *g = et->aSegByte;
  const uint32_t *o = et->aSegOff;
  int nSeg = et->nSeg, bFold = et->bSegFold;
  if (nSeg == 0) return et->nTok > 0 || n == 0; /* only wildcards, or empty */
  uint32_t at = 0;
  for (int k = 0; k < nSeg; k++) {
    uint32_t m = o[k + 1] - o[k];
    if (k == nSeg - 1 && et->bAnchorEnd) { /* the last: at the end */
      if (n - at < m || !seg_eq(z + n - m, g + o[k], m, bFold)) return 0;
      return !(k == 0 && et->bAnchorStart) || n == m;
    }
    if (k == 0 && et->bAnchorStart) { /* the first: at the start */
      if (n < m || !seg_eq(z, g, m, bFold)) return 0;
      at = m;
      continue;
    }
    int64_t x = seg_find(z + at, n - at, g + o[k], m, bFold);
    if (x < 0) return 0;
    at += (uint32_t)x + m;
  }
  return 1;
}

/* Wildcard match with one backtrack point (the last '%' / '*'): linear in
** the common case, O(pattern x string) at worst, never exponential. */
static int pat_match(const ex_term *et, const uint8_t *z, uint32_t n) {
  n = str_end(z, n);
  if (et->nSeg >= 0) return seg_match(et, z, n);
  int p = 0, starP = -1;
  uint32_t s = 0, starS = 0;
  for (;;) {
    if (p < et->nTok && et->aTok[p].kind == TK_ALL) {
      starP = p++;
      starS = s;
      continue;
    }
    if (s >= n) break;
    uint32_t s2 = s, c = utf8_read(z, n, &s2);
    if (p < et->nTok && tok_match(et, &et->aTok[p], c)) {
      p++;
      s = s2;
      continue;
    }
    if (starP < 0) return 0;
    utf8_read(z, n, &starS);
    s = starS;
    p = starP + 1;
  }
  while (p < et->nTok && et->aTok[p].kind == TK_ALL) p++;
  return p == et->nTok;
}

int ex_like_text_col(const ex_term *et, const ex_col *c, const uint32_t *aSel, uint32_t n,
                     uint8_t *aM) {
  if ((et->t.op != CSQ_OP_LIKE && et->t.op != CSQ_OP_GLOB) || et->nSeg < 1 ||
      et->a->cls == CSQ_NULL || c->kind != K_TEXTP || c->d.cls != CSQ_TEXT)
    return 0;
  /* a prefix alone needs no end: a NUL within it fails the compare (the
  ** segments are ASCII literals, never NUL), one after it cannot matter */
  const uint32_t m = et->aSegOff[1];
  const int bPrefix = et->nSeg == 1 && et->bAnchorStart && !et->bAnchorEnd;
  const uint8_t neg = (uint8_t)et->bNot;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t r = aSel[k];
    if (col_null(c, r)) {
      aM[k] = (uint8_t)et->nullRes;
      continue;
    }
    uint32_t o0 = csq_le32(c->d.aOff + 4 * (size_t)r), o1 = csq_le32(c->d.aOff + 4 * (size_t)r + 4);
    const uint8_t *z = c->d.aVar + o0;
    uint32_t nz = o1 - o0;
    int bMatch = bPrefix ? nz >= m && seg_eq(z, et->aSegByte, m, et->bSegFold)
                         : seg_match(et, z, str_end(z, nz));
    aM[k] = (uint8_t)bMatch ^ neg;
  }
  return 1;
}

/* The text SQLite gives a number: integers in decimal, reals as "%!.15g"
** (a ".0" where %g would print none; "Inf"/"-Inf"). */
static uint32_t render_num(const ex_val *v, char *buf, size_t nBuf) {
  int n;
  if (v->cls == CSQ_INT) return (uint32_t)snprintf(buf, nBuf, "%lld", (long long)v->i);
  if (isinf(v->r)) return (uint32_t)snprintf(buf, nBuf, "%s", v->r < 0 ? "-Inf" : "Inf");
  if (v->r == 0) return (uint32_t)snprintf(buf, nBuf, "0.0");
  n = snprintf(buf, nBuf, "%.15g", v->r);
  if (n < 0 || (size_t)n >= nBuf - 3) return n < 0 ? 0 : (uint32_t)n;
  if (!strchr(buf, '.')) {
    char *e = strchr(buf, 'e');
    if (e) {
      memmove(e + 2, e, strlen(e) + 1);
      e[0] = '.';
      e[1] = '0';
    } else {
      buf[n] = '.';
      buf[n + 1] = '0';
      buf[n + 2] = 0;
    }
    n += 2;
  }
  return (uint32_t)n;
}

static int like_val(const ex_term *et, const ex_val *v) {
  char buf[64];
  if (v->cls == CSQ_INT || v->cls == CSQ_REAL) {
    uint32_t n = render_num(v, buf, sizeof(buf));
    return pat_match(et, (const uint8_t *)buf, n);
  }
  if (v->cls == CSQ_BLOB && !(et->t.flags & CSQ_TF_BLOB_TEXT)) return 0;
  return pat_match(et, v->z, v->n);
}

/* ---- the generic evaluator: one value, any term ---- */

static int in_find(const ex_term *et, const ex_val *v) {
  int lo = 0, hi = et->nIn - 1;
  if (et->nIn <= 8) {
    for (int i = 0; i < et->nIn; i++)
      if (cmp_vk(v, &et->aIn[i], et->coll) == 0) return 1;
    return 0;
  }
  while (lo <= hi) {
    int mid = (lo + hi) / 2, c = cmp_vk(v, &et->aIn[mid], et->coll);
    if (c == 0) return 1;
    if (c < 0)
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return 0;
}

int ex_ev_one(const ex_term *et, const ex_val *v) {
  if (v->cls == CSQ_NULL) return et->nullRes;
  const csq_pconst *a = et->a;
  switch (et->t.op) {
  case CSQ_OP_ISNULL:
    return 0;
  case CSQ_OP_NOTNULL:
    return 1;
  case CSQ_OP_EQ:
  case CSQ_OP_IS:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) == 0;
  case CSQ_OP_NE:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) != 0;
  case CSQ_OP_ISNOT:
    return a->cls == CSQ_NULL || cmp_vk(v, a, et->coll) != 0;
  case CSQ_OP_LT:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) < 0;
  case CSQ_OP_LE:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) <= 0;
  case CSQ_OP_GT:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) > 0;
  case CSQ_OP_GE:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) >= 0;
  case CSQ_OP_BETWEEN: {
    /* 1 true, 0 false, -1 NULL */
    int ge = a->cls == CSQ_NULL ? -1 : cmp_vk(v, a, et->coll) >= 0;
    int le = et->b->cls == CSQ_NULL ? -1 : cmp_vk(v, et->b, et->coll) <= 0;
    return et->bNot ? (ge == 0 || le == 0) : (ge == 1 && le == 1);
  }
  case CSQ_OP_IN: {
    int f = in_find(et, v);
    if (f) return !et->bNot;
    return et->bNot && !et->bInNull;
  }
  case CSQ_OP_BLOOM:
    return csq_bloom_maybe(a->z, a->len, csq_key_hash_value(v));
  case CSQ_OP_KEYMAP:
    return csq_keymap_has_value(a->z, a->len, v);
  case CSQ_OP_LIKE:
  case CSQ_OP_GLOB:
    /* SQLite tests for a BLOB before it looks at a NULL pattern */
    if (v->cls == CSQ_BLOB && !(et->t.flags & CSQ_TF_BLOB_TEXT)) return et->bNot;
    if (a->cls == CSQ_NULL) return 0;
    return like_val(et, v) ^ et->bNot;
  }
  return 0;
}
