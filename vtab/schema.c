/*
** vtab/schema.c - the arguments of CREATE VIRTUAL TABLE t USING csq(...).
**
** Each argument is either an option, key='value' (device=, devices=, rowgroup=,
** pushdown=auto|always|never, media=buffered|direct), or a
** column definition exactly as in CREATE TABLE: a name, an optional declared
** type, and constraints. Table constraints (PRIMARY KEY(...), UNIQUE(...),
** CHECK(...), FOREIGN KEY, CONSTRAINT name ...) are accepted and passed on
** to SQLite's declared schema. The declared type gives the column its
** affinity, by SQLite's own rules; "INTEGER PRIMARY KEY" makes the column an
** alias of the rowid, as in a native table.
*/
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"

/* SQLite's affinity rules (section 3.1 of the datatype documentation). */
char vt_affinity(const char *zType) {
  char aff = VT_AFF_NUMERIC;
  if (!zType || !zType[0]) return VT_AFF_BLOB;
  size_t n = strlen(zType);
  char *z = sqlite3_malloc64(n + 1);
  if (!z) return VT_AFF_NUMERIC;
  for (size_t i = 0; i <= n; i++) z[i] = (char)toupper((unsigned char)zType[i]);
  if (strstr(z, "INT"))
    aff = VT_AFF_INTEGER;
  else if (strstr(z, "CHAR") || strstr(z, "CLOB") || strstr(z, "TEXT"))
    aff = VT_AFF_TEXT;
  else if (strstr(z, "BLOB"))
    aff = VT_AFF_BLOB;
  else if (strstr(z, "REAL") || strstr(z, "FLOA") || strstr(z, "DOUB"))
    aff = VT_AFF_REAL;
  sqlite3_free(z);
  return aff;
}

typedef struct tok {
  const char *z;
  int n;
} tok;

/* Next token of a column definition: an identifier/keyword (possibly quoted),
** a number, a string, or a single punctuation character; parenthesised
** groups are returned whole. n == 0 at the end; n < 0 on an unterminated
** quote or parenthesis. */
static tok next_tok(const char **pz) {
  const char *z = *pz;
  while (isspace((unsigned char)*z)) z++;
  tok t = {z, 0};
  if (!*z) return t;
  const char *s = z;
  if (*z == '"' || *z == '`' || *z == '\'' || *z == '[') {
    char q = *z == '[' ? ']' : *z;
    z++;
    for (;;) {
      if (!*z) {
        t.n = -1;
        return t;
      }
      if (*z == q) {
        if (q != ']' && z[1] == q) {
          z += 2;
          continue;
        }
        z++;
        break;
      }
      z++;
    }
  } else if (*z == '(') {
    int depth = 0;
    char q = 0;
    for (; *z; z++) {
      if (q) {
        if (*z == q) q = 0;
      } else if (*z == '\'' || *z == '"' || *z == '`') {
        q = *z;
      } else if (*z == '(') {
        depth++;
      } else if (*z == ')') {
        if (--depth == 0) {
          z++;
          break;
        }
      }
    }
    if (depth != 0) {
      t.n = -1;
      return t;
    }
  } else if (isalnum((unsigned char)*z) || *z == '_' || *z == '$' || (unsigned char)*z >= 0x80 ||
             *z == '+' || *z == '-' || *z == '.') {
    z++;
    while (isalnum((unsigned char)*z) || *z == '_' || *z == '$' || (unsigned char)*z >= 0x80 ||
           *z == '.')
      z++;
  } else {
    z++;
  }
  t.z = s;
  t.n = (int)(z - s);
  *pz = z;
  return t;
}

static int tok_is(tok t, const char *zKw) {
  return t.n == (int)strlen(zKw) && sqlite3_strnicmp(t.z, zKw, t.n) == 0;
}

/* Dequote an identifier token into a new string. */
static char *tok_ident(tok t) {
  if (t.n >= 2 && (t.z[0] == '"' || t.z[0] == '`' || t.z[0] == '[' || t.z[0] == '\'')) {
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

static const char *azConstraint[] = {"CONSTRAINT", "PRIMARY", "NOT",     "NULL",       "UNIQUE",
                                     "CHECK",      "DEFAULT", "COLLATE", "REFERENCES", "GENERATED",
                                     "AS",         "HIDDEN",  0};

static int is_constraint_kw(tok t) {
  for (int i = 0; azConstraint[i]; i++)
    if (tok_is(t, azConstraint[i])) return 1;
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
    tok t = {z, (int)n};
    return tok_ident(t);
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

/* Parse one column definition into pCol; appends its text for the
** declared schema to pDecl. */
static int parse_column(const char *zArg, vt_col *pCol, sqlite3_str *pDecl, char **pzErr) {
  const char *z = zArg;
  tok t = next_tok(&z);
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
  pCol->zName = tok_ident(t);
  if (!pCol->zName) return SQLITE_NOMEM;
  /* declared type: words (and a parenthesised size) up to the first constraint */
  const char *zType0 = NULL, *zTypeEnd = NULL;
  for (;;) {
    const char *zSave = z;
    t = next_tok(&z);
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
  /* constraints */
  tok prev = {0, 0};
  int bPrimary = 0, bDesc = 0;
  for (;;) {
    t = next_tok(&z);
    if (t.n < 0) {
      *pzErr = sqlite3_mprintf("csq: malformed column definition '%s'", zArg);
      return SQLITE_ERROR;
    }
    if (t.n == 0) break;
    if (tok_is(t, "NULL") && tok_is(prev, "NOT")) pCol->bNotNull = 1;
    if (tok_is(t, "KEY") && tok_is(prev, "PRIMARY")) bPrimary = 1;
    if (bPrimary && tok_is(t, "DESC")) bDesc = 1;
    if (tok_is(t, "AUTOINCREMENT")) pCol->bAutoinc = 1;
    if (tok_is(prev, "COLLATE")) {
      char *zColl = tok_ident(t);
      if (!zColl) return SQLITE_NOMEM;
      pCol->bColl = sqlite3_stricmp(zColl, "BINARY") != 0;
      sqlite3_free(zColl);
    }
    prev = t;
  }
  pCol->bIpk = bPrimary && !bDesc && sqlite3_stricmp(pCol->zType, "INTEGER") == 0;
  sqlite3_str_appendf(pDecl, "%s", zArg);
  return SQLITE_OK;
}

static int is_table_constraint(const char *zArg) {
  const char *z = zArg;
  tok t = next_tok(&z);
  if (tok_is(t, "CONSTRAINT") || tok_is(t, "CHECK") || tok_is(t, "FOREIGN")) return 1;
  if (tok_is(t, "PRIMARY") || tok_is(t, "UNIQUE")) {
    tok u = next_tok(&z);
    if (tok_is(t, "PRIMARY")) u = next_tok(&z); /* KEY */
    return u.n > 0 && u.z[0] == '(';
  }
  return 0;
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
    if (is_table_constraint(zArg)) {
      sqlite3_str_appendall(pDecl, zArg);
      continue;
    }
    vt_col *pCol = &pS->aCol[pS->nCol];
    memset(pCol, 0, sizeof(*pCol));
    pS->nCol++;
    rc = parse_column(zArg, pCol, pDecl, pzErr);
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
  }
  sqlite3_free(pS->aCol);
  sqlite3_free(pS->zDeclare);
  sqlite3_free(pS->zDevice);
  for (int i = 0; i < pS->nDevice; i++) sqlite3_free(pS->azDevice[i]);
  sqlite3_free(pS->azDevice);
  sqlite3_free(pS->zDevices);
  memset(pS, 0, sizeof(*pS));
  pS->iIpk = -1;
}
