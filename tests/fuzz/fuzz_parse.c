/*
** tests/fuzz/fuzz_parse.c - libFuzzer harness for the planner's SQL parser
** (pl_parse, planner/parse.h), which reads every csq_query and csq_explain
** text and every statement csq_prepare() looks at.
**
** Any bytes must parse or be refused with a position inside the text;
** what parses must dump, give every result column's source text back from
** inside the statement, collect its aggregates and column references, and
** be equal to itself; and the dump of a statement must parse again
** (it is not SQL, so only "no crash" is asked of that second parse).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "planner/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0;
  pl_ast *a = NULL;
  pl_err err;
  /* an odd length also takes subqueries, as the join planner parses */
  int rc = pl_parse_opt((const char *)data, (int)size, size & 1 ? PL_PARSE_SUBQUERY : 0, &a, &err);
  if (rc != PL_OK) {
    if (a) __builtin_trap(); /* no AST with an error */
    if (err.iPos < 0 || (size_t)err.iPos > size) __builtin_trap();
    return 0;
  }
  char *z = pl_ast_dump(a);
  for (int i = 0; i < a->nCol; i++) {
    int n = 0;
    const char *zt = pl_expr_text(a, a->aCol[i].pExpr, &n);
    if (n < 0 || zt < a->zSql || zt + n > a->zSql + a->nSql) __builtin_trap();
    if (!pl_expr_equal(a->aCol[i].pExpr, a->aCol[i].pExpr)) __builtin_trap();
    pl_refs r;
    memset(&r, 0, sizeof(r));
    pl_expr_refs(a->aCol[i].pExpr, i & 1 ? PL_REFS_OUTER : 0, &r);
    pl_refs_free(&r);
    char *ze = pl_expr_dump(a->aCol[i].pExpr);
    free(ze);
  }
  if (z) {
    pl_ast *b = NULL;
    pl_parse(z, -1, &b, NULL);
    pl_ast_free(b);
  }
  free(z);
  pl_ast_free(a);
  return 0;
}
