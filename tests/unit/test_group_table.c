/*
** tests/unit/test_group_table.c - the table of groups (device/format/
** group.h) across tables large enough that their arrays are mapped and
** kept for the next table (group.c): tables of several sizes made one
** after another, keys in and out of order, each group found again by
** its key with its state intact, the hash slots of a kept mapping empty,
** and a table made without hashes (bNoHash) hashed on its first lookup.
*/
#include "device/format/group.h"
#include "tests/unit/helpers.h"

/* Key i of a round: distinct, spread over the int64 range. */
static int64_t key_of(uint32_t i, uint32_t salt) {
  return (int64_t)(((uint64_t)i * 0x9E3779B97F4A7C15ull) ^ salt);
}

static csq_value int_val(int64_t i) {
  csq_value v;
  memset(&v, 0, sizeof(v));
  v.cls = CSQ_INT;
  v.i = i;
  return v;
}

/* Make n groups keyed key_of(i, salt) in a shuffled order, state = i; then
** find every one, and some absent keys. */
static void round_hashed(uint32_t n, uint32_t salt) {
  csq_group t;
  csq_group_init(&t, 1, 16);
  uint32_t *aOrd = malloc(sizeof(uint32_t) * n);
  for (uint32_t i = 0; i < n; i++) aOrd[i] = i;
  for (uint32_t i = n - 1; i > 0; i--) {
    uint32_t j = (uint32_t)rndn(i + 1), x = aOrd[i];
    aOrd[i] = aOrd[j];
    aOrd[j] = x;
  }
  int nBad = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = aOrd[k], pos;
    csq_value v = int_val(key_of(i, salt));
    uint64_t h = csq_group_hash(&v, 1);
    if (csq_group_reserve(&t)) {
      CHECK(0, ": out of memory at %u groups", k);
      break;
    }
    int64_t g = csq_group_find(&t, &v, h, &pos);
    if (g >= 0 && nBad++ < 3) CHECK(0, ": key %u found before it was added (slot left set)", i);
    g = csq_group_add(&t, &v, h, pos);
    if (g != (int64_t)k && nBad++ < 3) CHECK(0, ": group %lld for the %u-th key", (long long)g, k);
    memcpy(csq_group_state(&t, (uint32_t)g), &i, sizeof(i));
  }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t pos, st;
    csq_value v = int_val(key_of(i, salt));
    int64_t g = csq_group_find(&t, &v, csq_group_hash(&v, 1), &pos);
    if (g < 0) {
      if (nBad++ < 3) CHECK(0, ": n %u: key %u lost", n, i);
      continue;
    }
    memcpy(&st, csq_group_state(&t, (uint32_t)g), sizeof(st));
    if ((st != i || csq_group_keys(&t, (uint32_t)g)->i != v.i) && nBad++ < 3)
      CHECK(0, ": n %u: key %u has state %u", n, i, st);
  }
  for (uint32_t i = n; i < n + 1000; i++) {
    uint32_t pos;
    csq_value v = int_val(key_of(i, salt));
    if (csq_group_find(&t, &v, csq_group_hash(&v, 1), &pos) >= 0 && nBad++ < 3)
      CHECK(0, ": n %u: absent key %u found", n, i);
  }
  CHECK(nBad == 0, ": n %u: %d wrong", n, nBad);
  free(aOrd);
  csq_group_free(&t);
}

/* Groups made in ascending key order without hashes, then looked up. */
static void round_nohash(uint32_t n) {
  csq_group t;
  csq_group_init(&t, 1, 16);
  t.bNoHash = 1;
  for (uint32_t i = 0; i < n; i++) {
    csq_value v = int_val(2 * (int64_t)i);
    CHECK(csq_group_add(&t, &v, 0, CSQ_GROUP_NO_SLOT) == (int64_t)i);
  }
  int nBad = 0;
  for (uint32_t i = 0; i < 2 * n; i++) {
    uint32_t pos;
    csq_value v = int_val((int64_t)i);
    CHECK_RC(csq_group_reserve(&t), 0);
    int64_t g = csq_group_find(&t, &v, csq_group_hash(&v, 1), &pos);
    if (g != (i % 2 ? -1 : (int64_t)(i / 2)) && nBad++ < 3)
      CHECK(0, ": bNoHash n %u: key %u -> group %lld", n, i, (long long)g);
  }
  CHECK(nBad == 0);
  csq_group_free(&t);
}

int main(void) {
  if (getenv("SEED")) rng = strtoull(getenv("SEED"), NULL, 10);
  /* sizes whose arrays are mapped (4 MiB and more) and differ from round to
  ** round, so kept mappings serve tables of other sizes */
  static const uint32_t aN[] = {300000, 120000, 700000, 300000, 50000, 700000, 1000};
  for (size_t i = 0; i < sizeof(aN) / sizeof(aN[0]); i++) round_hashed(aN[i], (uint32_t)i);
  round_nohash(400000);
  round_hashed(500000, 99);
  csq_group_release_kept();
  round_hashed(200000, 7);
  csq_group_release_kept();
  return test_done("test_group_table");
}
