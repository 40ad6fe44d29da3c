/*
** tests/fuzz/fuzz_bpf.c - libFuzzer harness for the eBPF loader: the object
** reader and csq's checks (csq_bpf_code, csq_bpf_check), then the rte_bpf
** verifier and JIT (dev_bpf_load), then a run of whatever was accepted.
** Whatever the bytes, nothing may read outside them, a refusal must come
** with a terminated message, and an accepted program must end (the
** verifier refuses loops: a hang is a libFuzzer timeout) without touching
** more than its argument block, whose bytes sit in an exactly sized buffer
** so that ASan sees any overread.
**
** The first input byte picks the number of arguments (1..4); the rest is
** the object (an ELF file or raw instructions). Seeds: tests/fuzz/corpus/bpf/
** (the examples, compiled).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/engine/bpf_rt.h"
#include "device/format/bpf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int nArg = 1 + data[0] % 4;
  size_t n = size - 1;
  uint8_t *p = malloc(n ? n : 1); /* exactly sized: ASan sees overreads */
  if (!p) return 0;
  memcpy(p, data + 1, n);
  char zErr[600];
  const uint8_t *aIns = NULL;
  uint32_t nIns = 0;
  dev_bpf *b = NULL;
  int rc = csq_bpf_code(p, n, &aIns, &nIns, zErr, sizeof(zErr));
  if (rc == 0 && (aIns < p || aIns + 8ull * nIns > p + n)) abort();
  if (rc == 0) rc = csq_bpf_check(aIns, nIns, zErr, sizeof(zErr));
  if (rc == 0) rc = dev_bpf_load(aIns, nIns, nArg, &b, zErr, sizeof(zErr));
  if (rc != 0) {
    if (memchr(zErr, 0, sizeof(zErr)) == NULL) abort(); /* message terminated */
  } else {
    /* run it over arguments of every type, TEXT bytes in their own buffer */
    uint8_t *aBlock = malloc((size_t)CSQ_BPF_SLOT * nArg);
    uint8_t *zText = malloc(3);
    const uint8_t *apZ[4];
    uint32_t aN[4];
    if (aBlock && zText) {
      memcpy(zText, "abc", 3);
      for (int j = 0; j < nArg; j++) {
        csq_value v = {(uint8_t)(1 + j % 4), -7, 2.5, zText, 3};
        if (v.cls == CSQ_BLOB) v.cls = CSQ_NULL;
        csq_bpf_slot_put(aBlock + CSQ_BPF_SLOT * j, &v, 0);
        apZ[j] = zText;
        aN[j] = 3;
      }
      dev_bpf_frame f;
      memset(&f, 0, sizeof(f));
      f.nArg = nArg;
      f.aBlock = aBlock;
      f.apZ = apZ;
      f.aN = aN;
      dev_bpf_frame_set(&f);
      (void)dev_bpf_run(b, &f);
      dev_bpf_frame_set(NULL);
    }
    free(aBlock);
    free(zText);
    dev_bpf_free(b);
  }
  free(p);
  return 0;
}
