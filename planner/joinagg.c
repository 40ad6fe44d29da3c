/*
** planner/joinagg.c - a join's host part as a grouped program over its
** joined rows (planner/joinagg.h).
*/
#include <stdio.h>
#include <string.h>

#include "planner/joinagg.h"

#ifndef SQLITE_CORE
extern const sqlite3_api_routines *sqlite3_api;
#endif

#define JA_NAMES 15 /* 5 affinities x 3 collations, as csq_jrows declares */

typedef struct ja_tab {
  int nCol;
  char **azName; /* JA_NAMES * nCol names, chunk i + 1 under azName[i] */
  char *aAff;
  char *aColl;
} ja_tab;

static int ja_lookup(void *pArg, const char *zDb, const char *zTable, pl_tabinfo *pInfo) {
  const ja_tab *t = pArg;
  if (zDb || sqlite3_stricmp(zTable, "csq_j") != 0) return 1;
  pInfo->nCol = JA_NAMES * t->nCol;
  pInfo->azCol = (const char *const *)t->azName;
  pInfo->aAff = t->aAff;
  pInfo->aColl = t->aColl;
  pInfo->iIpk = -1;
  /* the rows are in memory already: the program always runs, on the host */
  pInfo->ePush = PL_PUSH_ALWAYS;
  pInfo->nRows = -1;
  pInfo->nEngines = 1;
  pInfo->xBpf = NULL;
  pInfo->pBpfArg = NULL;
  return 0;
}

int pl_join_agg_plan(sqlite3 *db, const pl_join *j, sqlite3_value **aParam, int nParam,
                     pl_plan **ppPlan) {
  static const char acColl[] = {'x', 'n', 'r'};
  *ppPlan = NULL;
  int n = JA_NAMES * j->nCol;
  ja_tab t = {j->nCol, NULL, NULL, NULL};
  char *zSql = NULL;
  int rc = SQLITE_OK;
  if (!j->nHostFrom || j->nCol < 1) {
    pl_plan *p = sqlite3_malloc64(sizeof(pl_plan));
    if (!p) return SQLITE_NOMEM;
    memset(p, 0, sizeof(*p));
    snprintf(p->zWhy, sizeof(p->zWhy), "the host part is not the join's own SELECT");
    *ppPlan = p;
    return SQLITE_OK;
  }
  t.azName = sqlite3_malloc64(sizeof(char *) * (size_t)n);
  t.aAff = sqlite3_malloc64((size_t)n);
  t.aColl = sqlite3_malloc64((size_t)n);
  if (!t.azName || !t.aAff || !t.aColl) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  memset(t.azName, 0, sizeof(char *) * (size_t)n);
  for (int i = 0; i < n; i++) {
    int a = i / (3 * j->nCol), c = (i / j->nCol) % 3, k = i % j->nCol;
    t.azName[i] = sqlite3_mprintf(PL_JROWS_NAME_FMT, 'a' + a, acColl[c], k);
    if (!t.azName[i]) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    t.aAff[i] = (char)('A' + a);
    t.aColl[i] = (char)(c != 0);
  }
  const char *zBase = j->zInner ? j->zInner : j->zHost;
  zSql = sqlite3_mprintf("%.*s FROM csq_j%s", j->iHostFrom, zBase,
                         zBase + j->iHostFrom + j->nHostFrom);
  if (!zSql) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  /* a derived table's columns keep their affinities in the outer statement */
  rc = pl_plan_query_opt(db, zSql, aParam, nParam, ja_lookup, &t, j->zInner ? PL_PLAN_TYPED : 0,
                         ppPlan);
done:
  for (int i = 0; t.azName && i < n; i++) sqlite3_free(t.azName[i]);
  sqlite3_free(t.azName);
  sqlite3_free(t.aAff);
  sqlite3_free(t.aColl);
  sqlite3_free(zSql);
  return rc;
}
