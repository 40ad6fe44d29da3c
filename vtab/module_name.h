/*
** vtab/module_name.h - which module a CREATE VIRTUAL TABLE statement names:
** vt_sql_is_csq_table(zSql) is true when it is csq.
**
** Two programs ask: csq_backup() (vtab/backup.c), to find the tables whose
** images it copies, and the csq shell's .dump (ext/shell_main.c), to write a
** csq table with its rows. The shell is linked with SQLite alone, not with
** csq.so, so this is a header of static inline functions that call nothing
** of SQLite's (the case folding is ASCII, as sqlite3_strnicmp's), and each
** program compiles its own copy.
*/
#ifndef CSQ_VTAB_MODULE_NAME_H
#define CSQ_VTAB_MODULE_NAME_H

#include <string.h>

/* Skip white space and comments, as SQLite's tokenizer does: its white
** space is space, \t, \n, \f and \r (a \v is an illegal token there,
** though sqlite3Isspace counts it). Also the skipper of vtab/schema.c's
** tokens (vt_tok_next). */
static inline const char *vt_sql_space(const char *z) {
  for (;;) {
    while (*z == ' ' || *z == '\t' || *z == '\n' || *z == '\r' || *z == '\f') z++;
    if (z[0] == '-' && z[1] == '-') {
      while (*z && *z != '\n') z++;
    } else if (z[0] == '/' && z[1] == '*') {
      const char *e = strstr(z + 2, "*/");
      z = e ? e + 2 : z + strlen(z);
    } else {
      return z;
    }
  }
}

/* The end of the token at z: a bare word, a quoted name ("", ``, [], ''),
** or one other character. */
static inline const char *vt_sql_token_end(const char *z) {
  char q = *z == '[' ? ']' : *z;
  if (q == '"' || q == '`' || q == ']' || q == '\'') {
    for (z++; *z; z++) {
      if (*z == q) {
        if (q != ']' && z[1] == q) {
          z++;
          continue;
        }
        return z + 1;
      }
    }
    return z;
  }
  const char *s = z;
  while (*z == '_' || *z == '$' || (*z >= '0' && *z <= '9') ||
         ((*z | 0x20) >= 'a' && (*z | 0x20) <= 'z') || (unsigned char)*z >= 0x80)
    z++;
  return z == s && *z ? z + 1 : z;
}

/* Is token [z, e) the word zWord, ASCII letters (any case, quoted or not)? */
static inline int vt_sql_is(const char *z, const char *e, const char *zWord) {
  int n = (int)strlen(zWord);
  if (e - z == n + 2 && (*z == '"' || *z == '`' || *z == '['))
    z++;
  else if (e - z != n)
    return 0;
  for (int i = 0; i < n; i++) {
    unsigned char a = (unsigned char)z[i], b = (unsigned char)zWord[i];
    if (a >= 'A' && a <= 'Z') a |= 0x20;
    if (b >= 'A' && b <= 'Z') b |= 0x20;
    if (a != b) return 0;
  }
  return 1;
}

/* Does zSql, a CREATE VIRTUAL TABLE as sqlite_schema stores it, name the
** module csq? Reads the tokens: CREATE VIRTUAL TABLE [IF NOT EXISTS]
** [schema.]name USING module. */
static inline int vt_sql_is_csq_table(const char *zSql) {
  const char *z = zSql, *e;
  for (int i = 0; i < 3; i++) z = vt_sql_token_end(vt_sql_space(z)); /* CREATE VIRTUAL TABLE */
  z = vt_sql_space(z);
  e = vt_sql_token_end(z);
  if (vt_sql_is(z, e, "IF")) { /* IF NOT EXISTS */
    for (int i = 0; i < 2; i++) e = vt_sql_token_end(vt_sql_space(e));
    z = vt_sql_space(e);
    e = vt_sql_token_end(z);
  }
  z = vt_sql_space(e); /* after the name */
  if (*z == '.') z = vt_sql_space(vt_sql_token_end(vt_sql_space(z + 1)));
  e = vt_sql_token_end(z);
  if (!vt_sql_is(z, e, "USING")) return 0;
  z = vt_sql_space(e);
  return vt_sql_is(z, vt_sql_token_end(z), "csq");
}

#endif /* CSQ_VTAB_MODULE_NAME_H */
