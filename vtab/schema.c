/*
** vtab/schema.c - the arguments of CREATE VIRTUAL TABLE t USING csq(...).
**
** Each argument is either an option, key='value' (device=, devices=, rowgroup=,
** pushdown=auto|always|never, media=buffered|direct), or a
** column definition exactly as in CREATE TABLE: a name, an optional declared
** type, and constraints, or a table constraint. The declared type gives the
** column its affinity, by SQLite's own rules; "INTEGER PRIMARY KEY" makes
** the column an alias of the rowid, as in a native table. Column and table
** text goes to SQLite's declared schema as written.
**
** Constraints are read here, because csq must enforce each one itself:
**
**   enforced   NOT NULL, CHECK (column and table, named or not), DEFAULT,
**              INTEGER PRIMARY KEY [AUTOINCREMENT], COLLATE (any: SQLite
**              compares such a column itself), NULL, ON CONFLICT ABORT
**   refused    UNIQUE (but on the rowid alias), PRIMARY KEY other than the column
**              form INTEGER PRIMARY KEY (see table_key), REFERENCES and
**              FOREIGN KEY, generated columns (AS ...), ON CONFLICT other
**              than ABORT, anything not understood
**
** A refused constraint is noted in vt_schema.zRefused rather than failing
** the parse: CREATE then fails with that message (vt_check_create), and a
** table an older csq created with it still opens, for reading and DROP,
** but takes no writes (vt_check_row). CHECK and DEFAULT are kept for
** vtab/check.c.
*/
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/module_name.h" /* vt_sql_space */
#include "vtab/vtab.h"
#include "planner/parse.h"

/* SQLite's affinity rules (section 3.1 of the datatype documentation),
** written once in the planner. */
char vt_affinity(const char *zType) {
  return pl_decl_affinity(zType);
}

static int is_id_char(unsigned char c) {
  return isalnum(c) || c == '_' || c == '$' || c >= 0x80;
}

/* The end of the quoted token at z ('...', "...", `...` or [...]), or NULL
** if it is not terminated. */
static const char *skip_quoted(const char *z) {
  char q = *z == '[' ? ']' : *z;
  for (z++; *z; z++) {
    if (*z != q) continue;
    if (q != ']' && z[1] == q) {
      z++;
      continue;
    }
    return z + 1;
  }
  return NULL;
}

/* The end of the parenthesised group at z, or NULL if it is not closed. */
static const char *skip_group(const char *z) {
  int depth = 0;
  while (*z) {
    if (*z == '\'' || *z == '"' || *z == '`' || *z == '[') {
      z = skip_quoted(z);
      if (!z) return NULL;
    } else if ((z[0] == '-' && z[1] == '-') || (z[0] == '/' && z[1] == '*')) {
      z = vt_sql_space(z);
    } else {
      if (*z == '(') depth++;
      if (*z == ')' && --depth == 0) return z + 1;
      z++;
    }
  }
  return NULL;
}

vt_tok vt_tok_next(const char **pz) {
  const char *z = vt_sql_space(*pz);
  const unsigned char c = (unsigned char)*z;
  const char *e;
  vt_tok t = {z, 0};
  if (!c) {
    *pz = z;
    return t;
  }
  if (c == '\'' || c == '"' || c == '`' || c == '[') {
    e = skip_quoted(z);
  } else if ((c == 'x' || c == 'X') && z[1] == '\'') {
    e = skip_quoted(z + 1); /* a blob literal */
  } else if (c == '(') {
    e = skip_group(z);
  } else if (isdigit(c) || (c == '.' && isdigit((unsigned char)z[1]))) {
    e = z;
    if (e[0] == '0' && (e[1] == 'x' || e[1] == 'X') && isxdigit((unsigned char)e[2])) {
      e += 2;
      while (isxdigit((unsigned char)*e)) e++;
    } else {
      while (isdigit((unsigned char)*e)) e++;
      if (*e == '.') e++;
      while (isdigit((unsigned char)*e)) e++;
      if ((*e == 'e' || *e == 'E') &&
          (isdigit((unsigned char)e[1]) ||
           ((e[1] == '+' || e[1] == '-') && isdigit((unsigned char)e[2])))) {
        e += 2;
        while (isdigit((unsigned char)*e)) e++;
      }
    }
    while (is_id_char((unsigned char)*e)) e++; /* "12ab" stays one (bad) token */
  } else if (is_id_char(c)) {
    e = z + 1;
    while (is_id_char((unsigned char)*e)) e++;
  } else {
    e = z + 1;
  }
  if (!e) {
    t.n = -1;
    return t;
  }
  t.n = (int)(e - z);
  *pz = e;
  return t;
}

int vt_tok_is(vt_tok t, const char *zKw) {
  return t.n == (int)strlen(zKw) && sqlite3_strnicmp(t.z, zKw, t.n) == 0;
}

static int tok_is_char(vt_tok t, char c) {
  return t.n == 1 && t.z[0] == c;
}

static int tok_is_group(vt_tok t) {
  return t.n >= 2 && t.z[0] == '(';
}

static int tok_is_quoted(vt_tok t) {
  return t.n >= 2 && (t.z[0] == '"' || t.z[0] == '`' || t.z[0] == '[' || t.z[0] == '\'');
}

char *vt_tok_ident(vt_tok t) {
  if (tok_is_quoted(t)) {
    char q = t.z[0] == '[' ? ']' : t.z[0];
    char *z = sqlite3_malloc64((size_t)t.n);
    if (!z) return NULL;
    int j = 0;
    for (int i = 1; i < t.n - 1; i++) {
      z[j++] = t.z[i];
      if (t.z[i] == q && q != ']' && i + 1 < t.n - 1 && t.z[i + 1] == q) i++;
    }
    z[j] = 0;
    return z;
  }
  return sqlite3_mprintf("%.*s", t.n, t.z);
}

/* The next token, if it is the keyword zKw (else the position stays). */
static int accept_kw(const char **pz, const char *zKw) {
  const char *z = *pz;
  if (!vt_tok_is(vt_tok_next(&z), zKw)) return 0;
  *pz = z;
  return 1;
}

static const char *azConstraint[] = {"CONSTRAINT", "PRIMARY", "NOT",     "NULL",       "UNIQUE",
                                     "CHECK",      "DEFAULT", "COLLATE", "REFERENCES", "GENERATED",
                                     "AS",         "HIDDEN",  0};

static int is_constraint_kw(vt_tok t) {
  for (int i = 0; azConstraint[i]; i++)
    if (vt_tok_is(t, azConstraint[i])) return 1;
  return 0;
}

/* Is this argument an option (key=value)? Returns the key length, else 0. */
static int option_key(const char *z) {
  int i = 0;
  while (isspace((unsigned char)z[i])) i++;
  int k0 = i;
  while (isalnum((unsigned char)z[i]) || z[i] == '_') i++;
  int k1 = i;
  while (isspace((unsigned char)z[i])) i++;
  return (k1 > k0 && z[i] == '=') ? i + 1 : 0;
}

static char *option_value(const char *z) {
  while (isspace((unsigned char)*z)) z++;
  size_t n = strlen(z);
  while (n > 0 && isspace((unsigned char)z[n - 1])) n--;
  if (n >= 2 && (z[0] == '\'' || z[0] == '"') && z[n - 1] == z[0]) {
    vt_tok t = {z, (int)n};
    return vt_tok_ident(t);
  }
  return sqlite3_mprintf("%.*s", (int)n, z);
}

/* devices='a.csd,b.csd,...': one path is the same as device=; two or more
** make a striped table (vtab/stripe.c). Paths are taken as device= takes
** them; an empty entry, a repeated path, or device= as well are refused. */
static int parse_devices(const char *zVal, vt_schema *pS, char **pzErr) {
  if (pS->zDevice || pS->nDevice) {
    *pzErr = sqlite3_mprintf("csq: give either device= or devices=, once");
    return SQLITE_ERROR;
  }
  int n = 1;
  for (const char *z = zVal; *z; z++) n += *z == ',';
  char **az = sqlite3_malloc64(sizeof(char *) * (size_t)n);
  if (!az) return SQLITE_NOMEM;
  memset(az, 0, sizeof(char *) * (size_t)n);
  int rc = SQLITE_OK, i = 0;
  for (const char *z = zVal; rc == SQLITE_OK && i < n; i++) {
    const char *e = strchr(z, ',');
    size_t len = e ? (size_t)(e - z) : strlen(z);
    while (len > 0 && isspace((unsigned char)*z)) z++, len--;
    while (len > 0 && isspace((unsigned char)z[len - 1])) len--;
    if (len == 0) {
      *pzErr = sqlite3_mprintf("csq: devices='%s' has an empty entry (entry %d); give paths "
                               "separated by commas",
                               zVal, i + 1);
      rc = SQLITE_ERROR;
      break;
    }
    az[i] = sqlite3_mprintf("%.*s", (int)len, z);
    if (!az[i]) rc = SQLITE_NOMEM;
    for (int k = 0; rc == SQLITE_OK && k < i; k++) {
      if (strcmp(az[k], az[i]) == 0) {
        *pzErr = sqlite3_mprintf("csq: devices= names %s twice; each member must be its own "
                                 "device",
                                 az[i]);
        rc = SQLITE_ERROR;
      }
    }
    z = e ? e + 1 : z + len;
  }
  if (rc == SQLITE_OK && n == 1) {
    pS->zDevice = az[0];
    sqlite3_free(az);
    return SQLITE_OK;
  }
  if (rc == SQLITE_OK) {
    sqlite3_str *pStr = sqlite3_str_new(NULL);
    for (int k = 0; k < n; k++) sqlite3_str_appendf(pStr, "%s%s", k ? "," : "", az[k]);
    pS->zDevices = sqlite3_str_finish(pStr);
    if (!pS->zDevices) rc = SQLITE_NOMEM;
  }
  if (rc) {
    for (int k = 0; k < n; k++) sqlite3_free(az[k]);
    sqlite3_free(az);
    return rc;
  }
  pS->azDevice = az;
  pS->nDevice = n;
  return SQLITE_OK;
}

static int parse_option(const char *zArg, int nKey, vt_schema *pS, char **pzErr) {
  int i = 0;
  while (isspace((unsigned char)zArg[i])) i++;
  int k0 = i;
  while (isalnum((unsigned char)zArg[i]) || zArg[i] == '_') i++;
  int kn = i - k0;
  const char *zKey = zArg + k0;
  char *zVal = option_value(zArg + nKey);
  if (!zVal) return SQLITE_NOMEM;
  int rc = SQLITE_OK;
  if (kn == 6 && sqlite3_strnicmp(zKey, "device", 6) == 0) {
    if (pS->zDevice || pS->nDevice) {
      *pzErr = sqlite3_mprintf("csq: give either device= or devices=, once");
      rc = SQLITE_ERROR;
    } else if (!zVal[0]) {
      *pzErr = sqlite3_mprintf("csq: device= needs a path");
      rc = SQLITE_ERROR;
    } else {
      pS->zDevice = zVal;
      zVal = NULL;
    }
  } else if (kn == 7 && sqlite3_strnicmp(zKey, "devices", 7) == 0) {
    rc = parse_devices(zVal, pS, pzErr);
  } else if (kn == 8 && sqlite3_strnicmp(zKey, "rowgroup", 8) == 0) {
    char *zEnd = NULL;
    long n = strtol(zVal, &zEnd, 10);
    if (!zVal[0] || *zEnd || n < 16 || n > 1048576) {
      *pzErr =
          sqlite3_mprintf("csq: rowgroup='%s' must be a number of rows from 16 to 1048576", zVal);
      rc = SQLITE_ERROR;
    } else {
      pS->nRowGroup = (int)n;
    }
  } else if (kn == 8 && sqlite3_strnicmp(zKey, "pushdown", 8) == 0) {
    if (sqlite3_stricmp(zVal, "auto") == 0)
      pS->ePush = VT_PUSH_AUTO;
    else if (sqlite3_stricmp(zVal, "always") == 0)
      pS->ePush = VT_PUSH_ALWAYS;
    else if (sqlite3_stricmp(zVal, "never") == 0)
      pS->ePush = VT_PUSH_NEVER;
    else {
      *pzErr = sqlite3_mprintf("csq: pushdown='%s' must be auto, always or never", zVal);
      rc = SQLITE_ERROR;
    }
  } else if (kn == 5 && sqlite3_strnicmp(zKey, "media", 5) == 0) {
    if (sqlite3_stricmp(zVal, "buffered") == 0)
      pS->eMedia = VT_MEDIA_BUFFERED;
    else if (sqlite3_stricmp(zVal, "direct") == 0)
      pS->eMedia = VT_MEDIA_DIRECT;
    else {
      *pzErr = sqlite3_mprintf("csq: media='%s' must be buffered or direct", zVal);
      rc = SQLITE_ERROR;
    }
  } else {
    *pzErr = sqlite3_mprintf(
        "csq: unknown option '%.*s' (options: device, devices, rowgroup, pushdown, media)", kn,
        zKey);
    rc = SQLITE_ERROR;
  }
  sqlite3_free(zVal);
  return rc;
}

/* Note a constraint csq does not enforce; the first one found is the
** message CREATE fails with. */
static int refuse(vt_schema *pS, const char *zFmt, ...) {
  if (pS->zRefused) return SQLITE_OK;
  va_list ap;
  va_start(ap, zFmt);
  pS->zRefused = sqlite3_vmprintf(zFmt, ap);
  va_end(ap);
  return pS->zRefused ? SQLITE_OK : SQLITE_NOMEM;
}

/* An optional ON CONFLICT clause after constraint zWhat of zWhere ("column
** x", or NULL for a table constraint). csq takes the conflict mode from the
** statement (sqlite3_vtab_on_conflict), so only ABORT, the default, means
** what it says; bIgnored: SQLite itself ignores this clause (on CHECK). */
static int parse_onconf(const char **pz, vt_schema *pS, const char *zWhere, const char *zWhat,
                        int bIgnored) {
  if (!accept_kw(pz, "ON")) return SQLITE_OK;
  vt_tok t = vt_tok_next(pz);
  vt_tok m = vt_tok_next(pz);
  if (!vt_tok_is(t, "CONFLICT") || m.n <= 0)
    return refuse(pS, "csq: %s%s%s: malformed ON CONFLICT clause", zWhere ? zWhere : "",
                  zWhere ? " " : "", zWhat);
  if (bIgnored || vt_tok_is(m, "ABORT")) return SQLITE_OK;
  return refuse(pS,
                "csq: %s%s%s ON CONFLICT %.*s is not supported on csq tables (csq takes the "
                "conflict mode from the statement, e.g. INSERT OR %.*s)",
                zWhere ? zWhere : "", zWhere ? ": " : "", zWhat, m.n, m.z, m.n, m.z);
}

/* Add CHECK (expression group g), named zName or, when NULL, by its text
** between the parentheses without the white space at either end (as
** SQLite names it). */
static int add_check(vt_schema *pS, vt_tok g, const char *zName, int iCol) {
  const char *z = g.z + 1, *e = g.z + g.n - 1;
  while (z < e && isspace((unsigned char)*z)) z++;
  while (e > z && isspace((unsigned char)e[-1])) e--;
  vt_check *a = sqlite3_realloc64(pS->aCheck, sizeof(vt_check) * (size_t)(pS->nCheck + 1));
  if (!a) return SQLITE_NOMEM;
  pS->aCheck = a;
  vt_check *c = &a[pS->nCheck];
  c->zExpr = sqlite3_mprintf("%.*s", (int)(e - z), z);
  c->zName = sqlite3_mprintf("%s", zName ? zName : c->zExpr ? c->zExpr : "");
  c->iCol = iCol;
  pS->nCheck++;
  return c->zExpr && c->zName ? SQLITE_OK : SQLITE_NOMEM;
}

/* DEFAULT's value as an SQL expression, in *pzDflt (sqlite3_malloc'd; NULL
** for DEFAULT NULL, which is no default). SQLite's forms: (expr), a literal
** (number, string, blob, NULL, TRUE, FALSE, CURRENT_TIME/DATE/TIMESTAMP),
** a signed literal, or an identifier, which stands for a string. */
static int parse_default(const char **pz, vt_schema *pS, const char *zWhere, char **pzDflt) {
  *pzDflt = NULL;
  vt_tok t = vt_tok_next(pz);
  if (tok_is_group(t)) {
    *pzDflt = sqlite3_mprintf("%.*s", t.n, t.z);
    return *pzDflt ? SQLITE_OK : SQLITE_NOMEM;
  }
  int bSigned = tok_is_char(t, '+') || tok_is_char(t, '-');
  const char *zSign = tok_is_char(t, '-') ? "-" : "";
  if (bSigned) t = vt_tok_next(pz);
  if (t.n <= 0) return refuse(pS, "csq: %s: DEFAULT needs a value", zWhere);
  unsigned char c = (unsigned char)t.z[0];
  if (isdigit(c) || c == '.' || c == '\'' ||
      ((c == 'x' || c == 'X') && t.n > 1 && t.z[1] == '\'') || vt_tok_is(t, "NULL") ||
      vt_tok_is(t, "TRUE") || vt_tok_is(t, "FALSE") || vt_tok_is(t, "CURRENT_TIME") ||
      vt_tok_is(t, "CURRENT_DATE") || vt_tok_is(t, "CURRENT_TIMESTAMP")) {
    if (vt_tok_is(t, "NULL") && !bSigned) return SQLITE_OK;
    *pzDflt = sqlite3_mprintf("%s%.*s", zSign, t.n, t.z);
  } else if (!bSigned && (is_id_char(c) || tok_is_quoted(t))) {
    char *zId = vt_tok_ident(t);
    *pzDflt = zId ? sqlite3_mprintf("%Q", zId) : NULL;
    sqlite3_free(zId);
  } else {
    return refuse(pS, "csq: %s: DEFAULT %.*s is not understood", zWhere, t.n, t.z);
  }
  return *pzDflt ? SQLITE_OK : SQLITE_NOMEM;
}

/* The next word of the constraints in argument zArg at *pz, in *pt (n 0
** at their end). zWhere is "column x" in a column definition, NULL in table
** constraints (as for parse_onconf). A CONSTRAINT name is read here: it
** names the constraints after it, up to the next one, as in SQLite (*pzCons,
** freed and replaced), and *pt is the CONSTRAINT word. A malformed argument
** is SQLITE_ERROR with *pzErr set; a CONSTRAINT without a name is refused
** (refuse) and ends the words; else SQLITE_OK or SQLITE_NOMEM. */
static int constraint_word(const char **pz, const char *zArg, const char *zWhere, vt_schema *pS,
                           char **pzCons, vt_tok *pt, char **pzErr) {
  *pt = vt_tok_next(pz);
  if (pt->n < 0) {
    *pzErr = sqlite3_mprintf("csq: malformed %s '%s'",
                             zWhere ? "column definition" : "table constraint", zArg);
    return SQLITE_ERROR;
  }
  if (!vt_tok_is(*pt, "CONSTRAINT")) return SQLITE_OK;
  vt_tok nm = vt_tok_next(pz);
  if (nm.n <= 0) {
    pt->n = 0;
    if (zWhere) return refuse(pS, "csq: %s: CONSTRAINT needs a name", zWhere);
    return refuse(pS, "csq: table constraint '%s': CONSTRAINT needs a name", zArg);
  }
  sqlite3_free(*pzCons);
  *pzCons = vt_tok_ident(nm);
  return *pzCons ? SQLITE_OK : SQLITE_NOMEM;
}

/* Parse one column definition into pCol (column iCol of pS). */
static int parse_column(const char *zArg, vt_schema *pS, int iCol, char **pzErr) {
  vt_col *pCol = &pS->aCol[iCol];
  const char *z = zArg;
  vt_tok t = vt_tok_next(&z);
  if (t.n <= 0) {
    *pzErr = sqlite3_mprintf("csq: malformed column definition '%s'", zArg);
    return SQLITE_ERROR;
  }
  if (t.z[0] == '\'' || !(isalpha((unsigned char)t.z[0]) || t.z[0] == '_' || t.z[0] == '"' ||
                          t.z[0] == '`' || t.z[0] == '[' || (unsigned char)t.z[0] >= 0x80)) {
    *pzErr =
        sqlite3_mprintf("csq: malformed column definition '%s' (expected a column name)", zArg);
    return SQLITE_ERROR;
  }
  pCol->zName = vt_tok_ident(t);
  if (!pCol->zName) return SQLITE_NOMEM;
  /* declared type: words (and a parenthesised size) up to the first constraint */
  const char *zType0 = NULL, *zTypeEnd = NULL;
  for (;;) {
    const char *zSave = z;
    t = vt_tok_next(&z);
    if (t.n < 0) {
      *pzErr = sqlite3_mprintf("csq: malformed column definition '%s'", zArg);
      return SQLITE_ERROR;
    }
    if (t.n == 0 || is_constraint_kw(t)) {
      z = zSave;
      break;
    }
    if (!zType0) zType0 = t.z;
    zTypeEnd = t.z + t.n;
  }
  pCol->zType =
      zType0 ? sqlite3_mprintf("%.*s", (int)(zTypeEnd - zType0), zType0) : sqlite3_mprintf("");
  if (!pCol->zType) return SQLITE_NOMEM;
  pCol->aff = vt_affinity(pCol->zType);
  /* constraints; a CONSTRAINT name holds for the column's constraints after
  ** it, up to the next one, as in SQLite */
  char *zWhere = sqlite3_mprintf("column %s", pCol->zName);
  char *zCons = NULL;
  int bPk = 0, bPkDesc = 0, bUnique = 0, bAutoinc = 0;
  int rc = zWhere ? SQLITE_OK : SQLITE_NOMEM;
  while (rc == SQLITE_OK) {
    rc = constraint_word(&z, zArg, zWhere, pS, &zCons, &t, pzErr);
    if (rc || t.n == 0) break;
    if (vt_tok_is(t, "CONSTRAINT")) {
      /* named by constraint_word */
    } else if (vt_tok_is(t, "NOT")) {
      if (!accept_kw(&z, "NULL")) {
        rc = refuse(pS, "csq: %s: NOT without NULL is not understood", zWhere);
        break;
      }
      pCol->bNotNull = 1;
      rc = parse_onconf(&z, pS, zWhere, "NOT NULL", 0);
    } else if (vt_tok_is(t, "NULL") || vt_tok_is(t, "HIDDEN")) {
      /* nothing to enforce */
    } else if (vt_tok_is(t, "PRIMARY")) {
      if (!accept_kw(&z, "KEY")) {
        rc = refuse(pS, "csq: %s: PRIMARY without KEY is not understood", zWhere);
        break;
      }
      bPk = 1;
      if (accept_kw(&z, "DESC"))
        bPkDesc = 1;
      else
        accept_kw(&z, "ASC");
      rc = parse_onconf(&z, pS, zWhere, "PRIMARY KEY", 0);
      if (accept_kw(&z, "AUTOINCREMENT")) bAutoinc = 1;
    } else if (vt_tok_is(t, "UNIQUE")) {
      bUnique = 1;
      rc = parse_onconf(&z, pS, zWhere, "UNIQUE", 0);
    } else if (vt_tok_is(t, "CHECK")) {
      vt_tok g = vt_tok_next(&z);
      if (!tok_is_group(g)) {
        rc = refuse(pS, "csq: %s: CHECK needs an expression in parentheses", zWhere);
        break;
      }
      rc = add_check(pS, g, zCons, iCol);
    } else if (vt_tok_is(t, "DEFAULT")) {
      sqlite3_free(pCol->zDflt);
      rc = parse_default(&z, pS, zWhere, &pCol->zDflt);
    } else if (vt_tok_is(t, "COLLATE")) {
      vt_tok c = vt_tok_next(&z);
      char *zColl = c.n > 0 ? vt_tok_ident(c) : NULL;
      if (c.n <= 0) {
        rc = refuse(pS, "csq: %s: COLLATE needs a collation name", zWhere);
        break;
      }
      if (!zColl) rc = SQLITE_NOMEM;
      pCol->bColl = zColl && sqlite3_stricmp(zColl, "BINARY") != 0;
      sqlite3_free(zColl);
    } else if (vt_tok_is(t, "REFERENCES")) {
      rc = refuse(pS, "csq: %s: REFERENCES (a foreign key) is not supported on csq tables", zWhere);
      break;
    } else if (vt_tok_is(t, "GENERATED") || vt_tok_is(t, "AS")) {
      rc = refuse(pS,
                  "csq: %s: generated columns (GENERATED ALWAYS AS, AS) are not supported on "
                  "csq tables",
                  zWhere);
      break;
    } else {
      rc = refuse(pS, "csq: %s: '%.*s' is not a constraint csq knows", zWhere, t.n, t.z);
      break;
    }
  }
  if (rc == SQLITE_OK) {
    int bInteger = sqlite3_stricmp(pCol->zType, "INTEGER") == 0;
    pCol->bIpk = bPk && !bPkDesc && bInteger;
    pCol->bAutoinc = bAutoinc;
    if (bPk && !pCol->bIpk && bInteger)
      rc = refuse(pS,
                  "csq: %s: INTEGER PRIMARY KEY DESC is not supported on csq tables (unlike "
                  "INTEGER PRIMARY KEY, it is not an alias of the rowid)",
                  zWhere);
    else if (bPk && !pCol->bIpk)
      rc = refuse(pS,
                  "csq: %s: PRIMARY KEY is not supported on csq tables (only INTEGER PRIMARY "
                  "KEY, an alias of the rowid)",
                  zWhere);
    else if (bUnique && !pCol->bIpk)
      rc = refuse(pS, "csq: %s: UNIQUE is not supported on csq tables (only INTEGER PRIMARY KEY)",
                  zWhere);
    else if (bAutoinc && !pCol->bIpk)
      rc = refuse(pS, "csq: %s: AUTOINCREMENT is only allowed on an INTEGER PRIMARY KEY", zWhere);
  }
  sqlite3_free(zWhere);
  sqlite3_free(zCons);
  return rc;
}

static int is_table_constraint(const char *zArg) {
  const char *z = zArg;
  vt_tok t = vt_tok_next(&z);
  if (vt_tok_is(t, "CONSTRAINT") || vt_tok_is(t, "CHECK") || vt_tok_is(t, "FOREIGN")) return 1;
  if (vt_tok_is(t, "PRIMARY") || vt_tok_is(t, "UNIQUE")) {
    vt_tok u = vt_tok_next(&z);
    if (vt_tok_is(t, "PRIMARY")) u = vt_tok_next(&z); /* KEY */
    return tok_is_group(u);
  }
  return 0;
}

/* PRIMARY KEY(...) or UNIQUE(...) as a table constraint (g: the group).
** UNIQUE on the rowid alias alone holds anyway; csq enforces no other key.
** PRIMARY KEY(x) on one INTEGER column makes x the rowid alias in SQLite,
** but csq before it read constraints kept such an x as a plain column: a
** table it created that way would read differently now, so this form is
** refused too, with the column form to use instead. */
static int table_key(vt_schema *pS, vt_tok g, int bPk) {
  const char *zKind = bPk ? "PRIMARY KEY" : "UNIQUE";
  char *zIn = sqlite3_mprintf("%.*s", g.n - 2, g.z + 1);
  if (!zIn) return SQLITE_NOMEM;
  const char *z = zIn;
  vt_tok nm = vt_tok_next(&z);
  int bOne = nm.n > 0 && (is_id_char((unsigned char)nm.z[0]) || tok_is_quoted(nm));
  for (vt_tok t = vt_tok_next(&z); bOne && t.n > 0; t = vt_tok_next(&z)) {
    if (vt_tok_is(t, "COLLATE"))
      vt_tok_next(&z);
    else if (!vt_tok_is(t, "ASC") && !vt_tok_is(t, "DESC"))
      bOne = 0; /* another column, AUTOINCREMENT, or an expression */
  }
  int iCol = -1, rc = SQLITE_OK;
  char *zName = bOne ? vt_tok_ident(nm) : NULL;
  if (bOne && !zName) rc = SQLITE_NOMEM;
  for (int i = 0; zName && i < pS->nCol; i++)
    if (sqlite3_stricmp(pS->aCol[i].zName, zName) == 0) iCol = i;
  if (rc) {
    /* out of memory */
  } else if (iCol >= 0 && !bPk && iCol == pS->iIpk) {
    /* UNIQUE(alias): the rowid is unique */
  } else if (iCol >= 0 && bPk && sqlite3_stricmp(pS->aCol[iCol].zType, "INTEGER") == 0) {
    rc = refuse(pS,
                "csq: column %s: PRIMARY KEY(%s) as a table constraint is not supported on csq "
                "tables (declare the column %s INTEGER PRIMARY KEY)",
                pS->aCol[iCol].zName, zIn, pS->aCol[iCol].zName);
  } else if (iCol >= 0) {
    rc =
        refuse(pS, "csq: column %s: %s is not supported on csq tables (only INTEGER PRIMARY KEY%s)",
               pS->aCol[iCol].zName, zKind, bPk ? ", an alias of the rowid" : "");
  } else {
    rc = refuse(pS, "csq: %s(%s) is not supported on csq tables (only INTEGER PRIMARY KEY)", zKind,
                zIn);
  }
  sqlite3_free(zName);
  sqlite3_free(zIn);
  return rc;
}

/* One argument of table constraints: [CONSTRAINT name] CHECK(...),
** PRIMARY KEY(...), UNIQUE(...) or FOREIGN KEY ..., possibly several in a
** row (SQLite needs no comma between them; a name then holds for those
** after it, up to the next one). */
static int parse_table_constraint(const char *zArg, vt_schema *pS, char **pzErr) {
  const char *z = zArg;
  char *zCons = NULL;
  int rc = SQLITE_OK;
  while (rc == SQLITE_OK) {
    vt_tok t;
    rc = constraint_word(&z, zArg, NULL, pS, &zCons, &t, pzErr);
    if (rc || t.n == 0) break;
    if (vt_tok_is(t, "CONSTRAINT")) {
      /* named by constraint_word */
    } else if (vt_tok_is(t, "CHECK")) {
      vt_tok g = vt_tok_next(&z);
      if (!tok_is_group(g)) {
        rc = refuse(pS, "csq: table constraint '%s': CHECK needs an expression in parentheses",
                    zArg);
        break;
      }
      rc = add_check(pS, g, zCons, -1);
      if (rc == SQLITE_OK) rc = parse_onconf(&z, pS, NULL, "CHECK", 1);
    } else if (vt_tok_is(t, "PRIMARY") || vt_tok_is(t, "UNIQUE")) {
      int bPk = vt_tok_is(t, "PRIMARY");
      if (bPk && !accept_kw(&z, "KEY")) {
        rc = refuse(pS, "csq: table constraint '%s': PRIMARY without KEY is not understood", zArg);
        break;
      }
      vt_tok g = vt_tok_next(&z);
      if (!tok_is_group(g)) {
        rc = refuse(pS, "csq: table constraint '%s': %s needs its columns in parentheses", zArg,
                    bPk ? "PRIMARY KEY" : "UNIQUE");
        break;
      }
      rc = table_key(pS, g, bPk);
      if (rc == SQLITE_OK) rc = parse_onconf(&z, pS, NULL, bPk ? "PRIMARY KEY" : "UNIQUE", 0);
    } else if (vt_tok_is(t, "FOREIGN")) {
      rc = refuse(pS, "csq: table constraint '%s': FOREIGN KEY is not supported on csq tables",
                  zArg);
      break;
    } else {
      rc = refuse(pS, "csq: table constraint '%s': '%.*s' is not a constraint csq knows", zArg, t.n,
                  t.z);
      break;
    }
  }
  sqlite3_free(zCons);
  return rc;
}

int vt_schema_parse(int argc, const char *const *argv, vt_schema *pS, char **pzErr) {
  memset(pS, 0, sizeof(*pS));
  pS->iIpk = -1;
  pS->eMedia = VT_MEDIA_ANY;
  pS->nRowGroup = VT_ROWGROUP_ROWS;
  sqlite3_str *pDecl = sqlite3_str_new(0);
  sqlite3_str_appendall(pDecl, "CREATE TABLE x(");
  int rc = SQLITE_OK;
  int nDecl = 0;
  pS->aCol = sqlite3_malloc64(sizeof(vt_col) * (size_t)(argc > 3 ? argc - 3 : 1));
  if (!pS->aCol) rc = SQLITE_NOMEM;
  for (int i = 3; i < argc && rc == SQLITE_OK; i++) {
    const char *zArg = argv[i];
    int nKey = option_key(zArg);
    if (nKey) {
      rc = parse_option(zArg, nKey, pS, pzErr);
      continue;
    }
    const char *zTrim = zArg;
    while (isspace((unsigned char)*zTrim)) zTrim++;
    if (!*zTrim) {
      *pzErr = sqlite3_mprintf("csq: empty column definition");
      rc = SQLITE_ERROR;
      break;
    }
    if (nDecl++) sqlite3_str_appendall(pDecl, ", ");
    sqlite3_str_appendall(pDecl, zArg);
    if (is_table_constraint(zArg)) {
      rc = parse_table_constraint(zArg, pS, pzErr);
      continue;
    }
    vt_col *pCol = &pS->aCol[pS->nCol];
    memset(pCol, 0, sizeof(*pCol));
    pS->nCol++;
    rc = parse_column(zArg, pS, pS->nCol - 1, pzErr);
    if (rc == SQLITE_OK && pCol->bIpk) {
      if (pS->iIpk >= 0) {
        *pzErr = sqlite3_mprintf("csq: more than one INTEGER PRIMARY KEY");
        rc = SQLITE_ERROR;
      }
      pS->iIpk = pS->nCol - 1;
    }
    for (int j = 0; rc == SQLITE_OK && j < pS->nCol - 1; j++) {
      if (sqlite3_stricmp(pS->aCol[j].zName, pCol->zName) == 0) {
        *pzErr = sqlite3_mprintf("csq: duplicate column name: %s", pCol->zName);
        rc = SQLITE_ERROR;
      }
    }
  }
  if (rc == SQLITE_OK && pS->nCol == 0) {
    *pzErr = sqlite3_mprintf("csq: no columns (usage: CREATE VIRTUAL TABLE t USING csq(col "
                             "type, ..., [device='PATH']))");
    rc = SQLITE_ERROR;
  }
  sqlite3_str_appendall(pDecl, ")");
  char *zDecl = sqlite3_str_finish(pDecl);
  if (rc == SQLITE_OK && !zDecl) rc = SQLITE_NOMEM;
  pS->zDeclare = zDecl;
  if (rc) vt_schema_clear(pS);
  return rc;
}

void vt_schema_clear(vt_schema *pS) {
  for (int i = 0; i < pS->nCol; i++) {
    sqlite3_free(pS->aCol[i].zName);
    sqlite3_free(pS->aCol[i].zType);
    sqlite3_free(pS->aCol[i].zDflt);
  }
  sqlite3_free(pS->aCol);
  for (int i = 0; i < pS->nCheck; i++) {
    sqlite3_free(pS->aCheck[i].zExpr);
    sqlite3_free(pS->aCheck[i].zName);
  }
  sqlite3_free(pS->aCheck);
  sqlite3_free(pS->zRefused);
  sqlite3_free(pS->zDeclare);
  sqlite3_free(pS->zDevice);
  for (int i = 0; i < pS->nDevice; i++) sqlite3_free(pS->azDevice[i]);
  sqlite3_free(pS->azDevice);
  sqlite3_free(pS->zDevices);
  memset(pS, 0, sizeof(*pS));
  pS->iIpk = -1;
}
