/*
** device/store/encq.c - encoding row groups on a thread of their own.
**
** A bulk load spends its time in two places: making the values of a row
** group (parsing, conversion) and encoding them into column chunks. The
** machine has cores to spare for the second, so an encode queue takes a
** filled row group's vectors, encodes them on its own thread, and hands
** the encoded extent back in order; the transaction's thread writes it
** (store_txn_append_encoded), so all device I/O of a transaction stays on
** one queue pair and one thread.
**
** Memory is bounded by the queue's depth: at most nDepth row groups are in
** flight (filled, being encoded, or encoded and not yet taken), and the
** producer's vectors are swapped with a free slot's, so buffers are reused
** instead of reallocated row group after row group.
**
** The thread exists only while a queue does: a process that never loads
** in bulk never has one (glibc's stdio takes its locks once a second
** thread has existed, which slows a shell's per-row .import).
*/
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "device/store/store.h"

enum { SLOT_FREE, SLOT_FILLED, SLOT_DONE };

typedef struct encq_slot {
  int eState;
  csq_vec *aCol; /* nChunk vectors */
  uint32_t nRow;
  store_enc_rg *pEnc; /* SLOT_DONE: the result, or NULL with rc/zErr */
  int rc;
  char *zErr;
} encq_slot;

struct store_encq {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  pthread_t thread;
  int bThread; /* the thread was started */
  int bStop;
  int nChunk;
  char *zTable;
  int nDepth;
  encq_slot *aSlot;
  int iPut, iEnc, iGet; /* ring positions: producer, encoder, consumer */
  int nInFlight;        /* slots not free */
};

static void *encq_main(void *pArg) {
  store_encq *q = pArg;
  pthread_setname_np(pthread_self(), "csq-encode"); /* what top and perf show */
  pthread_mutex_lock(&q->mu);
  for (;;) {
    encq_slot *s = &q->aSlot[q->iEnc];
    while (!q->bStop && s->eState != SLOT_FILLED) pthread_cond_wait(&q->cond, &q->mu);
    if (q->bStop) break;
    pthread_mutex_unlock(&q->mu);
    /* the slot is this thread's until it is marked done */
    char *zErr = NULL;
    store_enc_rg *pEnc = NULL;
    int rc = store_rg_encode(q->nChunk, q->zTable, s->aCol, 0, s->nRow, &pEnc, &zErr);
    for (int c = 0; c < q->nChunk; c++) csq_vec_reset(&s->aCol[c]);
    pthread_mutex_lock(&q->mu);
    s->pEnc = pEnc;
    s->rc = rc;
    s->zErr = zErr;
    s->eState = SLOT_DONE;
    q->iEnc = (q->iEnc + 1) % q->nDepth;
    pthread_cond_broadcast(&q->cond);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

int store_encq_new(int nChunk, const char *zTable, int nDepth, store_encq **ppQ) {
  *ppQ = NULL;
  if (nDepth < 1) nDepth = 1;
  store_encq *q = calloc(1, sizeof(*q));
  if (!q) return -ENOMEM;
  q->nChunk = nChunk;
  q->nDepth = nDepth;
  q->zTable = strdup(zTable);
  q->aSlot = calloc((size_t)nDepth, sizeof(encq_slot));
  int rc = q->zTable && q->aSlot ? 0 : -ENOMEM;
  for (int i = 0; rc == 0 && i < nDepth; i++) {
    q->aSlot[i].aCol = calloc((size_t)nChunk, sizeof(csq_vec));
    if (!q->aSlot[i].aCol) rc = -ENOMEM;
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cond, NULL);
  if (rc == 0) {
    rc = -pthread_create(&q->thread, NULL, encq_main, q);
    q->bThread = rc == 0;
  }
  if (rc) {
    store_encq_free(q);
    return rc;
  }
  *ppQ = q;
  return 0;
}

int store_encq_in_flight(store_encq *q) {
  pthread_mutex_lock(&q->mu);
  int n = q->nInFlight;
  pthread_mutex_unlock(&q->mu);
  return n;
}

int store_encq_depth(const store_encq *q) {
  return q->nDepth;
}

int store_encq_put(store_encq *q, csq_vec *aCol, uint32_t nRow) {
  pthread_mutex_lock(&q->mu);
  encq_slot *s = &q->aSlot[q->iPut];
  if (s->eState != SLOT_FREE) {
    pthread_mutex_unlock(&q->mu);
    return -EAGAIN; /* the caller takes a finished one first */
  }
  pthread_mutex_unlock(&q->mu);
  /* a free slot is the producer's alone: swap buffers outside the lock */
  for (int c = 0; c < q->nChunk; c++) {
    csq_vec tmp = s->aCol[c];
    s->aCol[c] = aCol[c];
    aCol[c] = tmp;
    csq_vec_reset(&aCol[c]);
  }
  pthread_mutex_lock(&q->mu);
  s->nRow = nRow;
  s->eState = SLOT_FILLED;
  q->iPut = (q->iPut + 1) % q->nDepth;
  q->nInFlight++;
  pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->mu);
  return 0;
}

int store_encq_get(store_encq *q, int bWait, store_enc_rg **ppEnc, char **pzErr) {
  *ppEnc = NULL;
  pthread_mutex_lock(&q->mu);
  encq_slot *s = &q->aSlot[q->iGet];
  if (s->eState == SLOT_FREE || (!bWait && s->eState != SLOT_DONE)) {
    pthread_mutex_unlock(&q->mu);
    return 0;
  }
  while (s->eState != SLOT_DONE) pthread_cond_wait(&q->cond, &q->mu);
  int rc = s->rc;
  *ppEnc = s->pEnc;
  if (rc) {
    *pzErr = s->zErr;
  } else {
    free(s->zErr);
  }
  s->pEnc = NULL;
  s->zErr = NULL;
  s->rc = 0;
  s->eState = SLOT_FREE;
  q->iGet = (q->iGet + 1) % q->nDepth;
  q->nInFlight--;
  pthread_mutex_unlock(&q->mu);
  return rc;
}

void store_encq_free(store_encq *q) {
  if (!q) return;
  if (q->bThread) {
    pthread_mutex_lock(&q->mu);
    q->bStop = 1;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
  }
  for (int i = 0; q->aSlot && i < q->nDepth; i++) {
    encq_slot *s = &q->aSlot[i];
    for (int c = 0; s->aCol && c < q->nChunk; c++) csq_vec_free(&s->aCol[c]);
    free(s->aCol);
    store_enc_rg_free(s->pEnc);
    free(s->zErr);
  }
  free(q->aSlot);
  free(q->zTable);
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->cond);
  free(q);
}
