/*
** bench/gen_common.c - the calendar, the comment text pool, word lists and
** number formatting shared by bench/tpch.c and bench/ssb.c (see
** gen_common.h for the determinism rules).
**
** The text pool follows the shape of TPC-H's text grammar (spec 4.2.2.14):
** sentences of noun phrases, verb phrases and prepositional phrases over
** fixed word lists, with the frequent words (packages, requests, special,
** pending, ...) weighted by repetition. It is generated from a fixed stream,
** independent of the user's seed, so it is built once per process; the seed
** only moves the offsets comments are cut at.
*/
#include "bench/gen_common.h"

#include <pthread.h>
#include <stdlib.h>

gen_day gen_aDay[GEN_NDAYS];
const char *gen_zText;

const char *const gen_aNation[25] = {
    "ALGERIA", "ARGENTINA", "BRAZIL",         "CANADA",       "EGYPT", "ETHIOPIA", "FRANCE",
    "GERMANY", "INDIA",     "INDONESIA",      "IRAN",         "IRAQ",  "JAPAN",    "JORDAN",
    "KENYA",   "MOROCCO",   "MOZAMBIQUE",     "PERU",         "CHINA", "ROMANIA",  "SAUDI ARABIA",
    "VIETNAM", "RUSSIA",    "UNITED KINGDOM", "UNITED STATES"};
const int gen_aNationRegion[25] = {0, 1, 1, 1, 4, 0, 3, 3, 2, 2, 4, 4, 2,
                                   4, 0, 0, 0, 1, 2, 3, 4, 2, 3, 3, 1};
const char *const gen_aRegion[5] = {"AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"};

const char *const gen_aColor[92] = {
    "almond",   "antique",   "aquamarine", "azure",      "beige",     "bisque",    "black",
    "blanched", "blue",      "blush",      "brown",      "burlywood", "burnished", "chartreuse",
    "chiffon",  "chocolate", "coral",      "cornflower", "cornsilk",  "cream",     "cyan",
    "dark",     "deep",      "dim",        "dodger",     "drab",      "firebrick", "floral",
    "forest",   "frosted",   "gainsboro",  "ghost",      "goldenrod", "green",     "grey",
    "honeydew", "hot",       "indian",     "ivory",      "khaki",     "lace",      "lavender",
    "lawn",     "lemon",     "light",      "lime",       "linen",     "magenta",   "maroon",
    "medium",   "metallic",  "midnight",   "mint",       "misty",     "moccasin",  "navajo",
    "navy",     "olive",     "orange",     "orchid",     "pale",      "papaya",    "peach",
    "peru",     "pink",      "plum",       "powder",     "puff",      "purple",    "red",
    "rose",     "rosy",      "royal",      "saddle",     "salmon",    "sandy",     "seashell",
    "sienna",   "sky",       "slate",      "smoke",      "snow",      "spring",    "steel",
    "tan",      "thistle",   "tomato",     "turquoise",  "violet",    "wheat",     "white",
    "yellow"};
const char *const gen_aTypeS1[6] = {"STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"};
const char *const gen_aTypeS2[5] = {"ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"};
const char *const gen_aTypeS3[5] = {"TIN", "NICKEL", "BRASS", "STEEL", "COPPER"};
const char *const gen_aContainerS1[5] = {"SM", "LG", "MED", "JUMBO", "WRAP"};
const char *const gen_aContainerS2[8] = {"CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"};
const char *const gen_aSegment[5] = {"AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY",
                                     "HOUSEHOLD"};
const char *const gen_aPriority[5] = {"1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"};
const char *const gen_aShipMode[7] = {"REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"};
const char *const gen_aShipInstruct[4] = {"DELIVER IN PERSON", "COLLECT COD", "NONE",
                                          "TAKE BACK RETURN"};

/* Vocabulary of the text grammar; repeated entries carry weight. */
static const char *const aNoun[] = {
    "packages",  "packages",  "packages",    "requests",    "requests",       "requests",
    "accounts",  "accounts",  "accounts",    "deposits",    "deposits",       "deposits",
    "foxes",     "ideas",     "theodolites", "pinto beans", "instructions",   "dependencies",
    "excuses",   "platelets", "asymptotes",  "courts",      "dolphins",       "multipliers",
    "sauternes", "warthogs",  "frets",       "dinos",       "attainments",    "somas",
    "Tiresias",  "patterns",  "forges",      "braids",      "hockey players", "frays",
    "warhorses", "dugouts",   "notornis",    "epitaphs",    "pearls",         "tithes",
    "waters",    "orbits",    "gifts",       "sheaves",     "depths",         "sentiments",
    "decoys",    "realms",    "pains",       "grouches",    "escapades"};
static const char *const aVerb[] = {
    "sleep",  "sleep",  "wake",      "wake",     "are",    "are",   "cajole",  "cajole",
    "haggle", "haggle", "nag",       "nag",      "use",    "use",   "boost",   "boost",
    "affix",  "detect", "integrate", "maintain", "nod",    "was",   "lose",    "sublate",
    "solve",  "thrash", "promise",   "engage",   "hinder", "print", "x-ray",   "breach",
    "eat",    "grow",   "impress",   "mold",     "poach",  "serve", "run",     "dazzle",
    "snooze", "doze",   "unwind",    "kindle",   "play",   "hang",  "believe", "doubt"};
static const char *const aAdjective[] = {
    "special",  "special", "special", "pending", "pending", "pending",  "unusual",
    "unusual",  "unusual", "express", "express", "express", "furious",  "sly",
    "careful",  "blithe",  "quick",   "fluffy",  "slow",    "quiet",    "ruthless",
    "thin",     "close",   "dogged",  "daring",  "brave",   "stealthy", "permanent",
    "enticing", "idle",    "busy",    "regular", "regular", "final",    "final",
    "ironic",   "ironic",  "even",    "even",    "bold",    "bold",     "silent"};
static const char *const aAdverb[] = {
    "sometimes", "always",    "never",   "furiously",  "slyly",       "carefully",  "blithely",
    "quickly",   "fluffily",  "slowly",  "quietly",    "ruthlessly",  "thinly",     "closely",
    "doggedly",  "daringly",  "bravely", "stealthily", "permanently", "enticingly", "idly",
    "busily",    "regularly", "finally", "ironically", "evenly",      "boldly",     "silently"};
static const char *const aPreposition[] = {
    "about",        "above",   "according to", "across",  "after",       "against", "along",
    "alongside of", "among",   "around",       "at",      "atop",        "before",  "behind",
    "beneath",      "beside",  "besides",      "between", "beyond",      "by",      "despite",
    "during",       "except",  "for",          "from",    "in place of", "inside",  "instead of",
    "into",         "near",    "of",           "on",      "outside",     "over",    "past",
    "since",        "through", "throughout",   "to",      "toward",      "under",   "until",
    "up",           "upon",    "without",      "with",    "within"};
static const char *const aAuxiliary[] = {
    "do",           "may",          "might",         "shall",         "will",
    "would",        "can",          "could",         "should",        "ought to",
    "must",         "will have to", "shall have to", "could have to", "should have to",
    "must have to", "need to",      "try to"};
static const char *const aTerminator[] = {".", ".", ".", ";", ":", "?", "!", "--"};

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Appends words to the pool being built. */
typedef struct text_buf {
  char *z;
  size_t n, nCap;
  gen_rng r;
} text_buf;

static void tb_word(text_buf *p, const char *const *aWord, int nWord) {
  const char *z = aWord[gen_rand(&p->r, 0, nWord - 1)];
  size_t n = strlen(z);
  if (p->n + n + 1 >= p->nCap) return;
  if (p->n) p->z[p->n++] = ' ';
  memcpy(p->z + p->n, z, n);
  p->n += n;
}

static void tb_noun_phrase(text_buf *p) {
  switch (gen_rand(&p->r, 0, 3)) {
  case 0:
    break;
  case 1:
    tb_word(p, aAdjective, NELEM(aAdjective));
    break;
  case 2:
    tb_word(p, aAdjective, NELEM(aAdjective));
    tb_word(p, aAdjective, NELEM(aAdjective));
    break;
  default:
    tb_word(p, aAdverb, NELEM(aAdverb));
    tb_word(p, aAdjective, NELEM(aAdjective));
    break;
  }
  tb_word(p, aNoun, NELEM(aNoun));
}

static void tb_verb_phrase(text_buf *p) {
  int k = (int)gen_rand(&p->r, 0, 3);
  if (k & 1) tb_word(p, aAuxiliary, NELEM(aAuxiliary));
  tb_word(p, aVerb, NELEM(aVerb));
  if (k & 2) tb_word(p, aAdverb, NELEM(aAdverb));
}

static void tb_prep_phrase(text_buf *p) {
  static const char *const aThe[] = {"the"};
  tb_word(p, aPreposition, NELEM(aPreposition));
  tb_word(p, aThe, 1);
  tb_noun_phrase(p);
}

/* One sentence; the terminator is glued to the last word. */
static void tb_sentence(text_buf *p) {
  switch (gen_rand(&p->r, 0, 4)) {
  case 0:
    tb_noun_phrase(p);
    tb_verb_phrase(p);
    break;
  case 1:
    tb_noun_phrase(p);
    tb_verb_phrase(p);
    tb_prep_phrase(p);
    break;
  case 2:
    tb_noun_phrase(p);
    tb_verb_phrase(p);
    tb_noun_phrase(p);
    break;
  case 3:
    tb_noun_phrase(p);
    tb_prep_phrase(p);
    tb_verb_phrase(p);
    tb_noun_phrase(p);
    break;
  default:
    tb_noun_phrase(p);
    tb_prep_phrase(p);
    tb_verb_phrase(p);
    tb_prep_phrase(p);
    break;
  }
  const char *zt = aTerminator[gen_rand(&p->r, 0, NELEM(aTerminator) - 1)];
  size_t n = strlen(zt);
  if (p->n + n < p->nCap) {
    memcpy(p->z + p->n, zt, n);
    p->n += n;
  }
}

static const int aMonthLen[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

static void build_calendar(void) {
  int y = 1992, m = 1, d = 1, yday = 1, wday = 3; /* 1992-01-01 was a Wednesday */
  for (int i = 0; i < GEN_NDAYS; i++) {
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    int nMonth = aMonthLen[m - 1] + (m == 2 && leap);
    gen_day *p = &gen_aDay[i];
    gen_fmt_padded(p->zIso, (uint64_t)y, 4);
    p->zIso[4] = '-';
    gen_fmt_padded(p->zIso + 5, (uint64_t)m, 2);
    p->zIso[7] = '-';
    gen_fmt_padded(p->zIso + 8, (uint64_t)d, 2);
    p->zIso[10] = 0;
    p->year = (int16_t)y;
    p->month = (uint8_t)m;
    p->mday = (uint8_t)d;
    p->wday = (uint8_t)wday;
    p->yday = (int16_t)yday;
    p->lastInMonth = d == nMonth;
    p->yyyymmdd = y * 10000 + m * 100 + d;
    wday = (wday + 1) % 7;
    yday++;
    if (++d > nMonth) {
      d = 1;
      if (++m > 12) {
        m = 1;
        y++;
        yday = 1;
      }
    }
  }
}

static void build_text(void) {
  text_buf b = {0};
  b.nCap = GEN_TEXT_POOL + 1;
  b.z = malloc(b.nCap);
  if (!b.z) abort(); /* 4 MiB at start-up; nothing sensible to do without it */
  gen_rng_seed(&b.r, 0x7E47, 0, 0);
  while (b.n < GEN_TEXT_POOL - 64) tb_sentence(&b);
  while (b.n < GEN_TEXT_POOL) b.z[b.n++] = ' ';
  b.z[GEN_TEXT_POOL] = 0;
  gen_zText = b.z;
}

static pthread_once_t gen_once = PTHREAD_ONCE_INIT;

static void gen_init_once(void) {
  build_calendar();
  build_text();
}

void gen_init(void) {
  pthread_once(&gen_once, gen_init_once);
}

int gen_vstring(gen_rng *r, char *z, int nMin, int nMax) {
  static const char aAlnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .";
  int n = (int)gen_rand(r, nMin, nMax);
  /* One draw gives ten 6-bit characters. */
  uint64_t bits = 0;
  for (int i = 0; i < n; i++) {
    if (i % 10 == 0) bits = gen_rng_next(r);
    z[i] = aAlnum[bits & 63];
    bits >>= 6;
  }
  z[n] = 0;
  return n;
}

int gen_fmt_u64(char *z, uint64_t v) {
  char a[20];
  int n = 0;
  do {
    a[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (int i = 0; i < n; i++) z[i] = a[n - 1 - i];
  return n;
}

int gen_fmt_i64(char *z, int64_t v) {
  if (v < 0) {
    z[0] = '-';
    return 1 + gen_fmt_u64(z + 1, (uint64_t)0 - (uint64_t)v);
  }
  return gen_fmt_u64(z, (uint64_t)v);
}

void gen_fmt_padded(char *z, uint64_t v, int nWidth) {
  for (int i = nWidth - 1; i >= 0; i--) {
    z[i] = (char)('0' + v % 10);
    v /= 10;
  }
}

int gen_fmt_scaled(char *z, int64_t v, int nDec) {
  int n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  uint64_t scale = 1;
  for (int i = 0; i < nDec; i++) scale *= 10;
  if (v < 0) z[n++] = '-';
  n += gen_fmt_u64(z + n, u / scale);
  if (nDec > 0) {
    z[n++] = '.';
    gen_fmt_padded(z + n, u % scale, nDec);
    n += nDec;
  }
  return n;
}

void gen_phone(gen_rng *r, char *z, int nationkey) {
  gen_fmt_padded(z, (uint64_t)(nationkey + 10), 2);
  z[2] = '-';
  gen_fmt_padded(z + 3, (uint64_t)gen_rand(r, 100, 999), 3);
  z[6] = '-';
  gen_fmt_padded(z + 7, (uint64_t)gen_rand(r, 100, 999), 3);
  z[10] = '-';
  gen_fmt_padded(z + 11, (uint64_t)gen_rand(r, 1000, 9999), 4);
  z[15] = 0;
}

int64_t gen_scaled(int64_t base, double sf) {
  int64_t n = (int64_t)((double)base * sf + 1e-6);
  return n < 1 ? 1 : n;
}

void gen_key_name(char *z, const char *zPrefix, int64_t key) {
  int n = gen_copy(z, zPrefix);
  gen_fmt_padded(z + n, (uint64_t)key, 9);
  z[n + 9] = 0;
}
