/*
** tests/fuzz/fuzz_catalog.c - libFuzzer harness for the catalog decoder
** (store_cat_decode, device/store/store_int.h). The catalog's checksum lives in
** the superblock, so the decoder is the only guard against bytes that passed
** it; it must reject anything inconsistent without reading outside the
** buffer or allocating without bound. What it accepts must encode again, and
** decoding that encoding must give the same encoding back (round trip).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/store/store_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *p = malloc(size ? size : 1);
  if (!p) return 0;
  memcpy(p, data, size);
  store_snap *s = NULL;
  uint32_t nextId = 0;
  char *zErr = NULL;
  int rc = store_cat_decode(p, size, &s, &nextId, &zErr);
  if (rc == 0) {
    uint8_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    if (store_cat_encode(s, nextId, &a, &na) == 0) {
      store_snap *s2 = NULL;
      uint32_t next2 = 0;
      char *zErr2 = NULL;
      if (store_cat_decode(a, na, &s2, &next2, &zErr2) != 0) abort(); /* own encoding refused */
      if (store_cat_encode(s2, next2, &b, &nb) != 0) abort();
      if (na != nb || memcmp(a, b, na) != 0) abort(); /* not a fixed point */
      store_snap_free_tables(s2);
      free(s2);
      free(zErr2);
      free(a);
      free(b);
    }
    store_snap_free_tables(s);
    free(s);
  }
  free(zErr);
  free(p);
  return 0;
}
