/*
** vtab/backup.c - csq_backup(DEST [, DIR]): a consistent copy of the main
** database and of the device images its csq tables keep their rows in.
**
**   SELECT csq_backup('/backups/sales.db');
**       -- writes /backups/sales.db and /backups/sales.db-csd
**   SELECT csq_backup('/backups/sales.db', '/backups/images');
**       -- also copies the images that device= / devices= name
**
** What goes where:
**   - the main database file: to DEST, with SQLite's online backup API in
**     one step (the same bytes `.backup` writes).
**   - the image of the database's default device ("X-csd" beside database
**     file X, or the in-memory device of an in-memory or temporary database):
**     to DEST-csd, the image the copy's tables without device= look for.
**   - an image a table names with device= or devices=: to DIR/<its file
**     name>. The copy's tables still name the original paths, so a restore
**     puts those images back where the tables say (relative paths resolve
**     against the working directory, so running from DIR also works).
**     Without DIR, such a table is an error naming it: a copy that quietly
**     left out or redirected those rows would surprise more.
** Only image files are copied: a table on an nvme: device is an error.
**
** Consistency: before anything is copied, every image is locked as a writer
** locks it (store_txn_begin, waiting up to VT_BUSY_MS for a writer to
** finish), in the order writers take several devices (by path), and it stays
** locked until its last block is copied; then the lock is dropped with
** nothing written (store_txn_rollback). No commit can land mid-copy, so each
** image is one committed state, and a striped table's members agree. The
** database file is copied while the images are locked. Images are read
** through the device (NVM Read of blocks 0 to the high-water mark: every
** block a committed catalog can reference), so in-memory devices copy like
** files; blocks that read as zeros are left as holes.
**
** Not copied: rows of a transaction not committed yet (as with SQLite's own
** backup); this connection's own uncommitted writes are refused ("COMMIT
** first"). Temporary and attached databases are not copied.
**
** Refused with a message: a DEST or destination image that exists and is not
** empty (like VACUUM INTO: a backup never overwrites), a missing directory,
** DEST ':memory:' or ''. On any failure the files it created are removed.
** Returns the number of images written.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "vtab/vtab.h"
#include "vtab/module_name.h"

#define BK_CHUNK_BLOCKS 256 /* blocks read per NVM Read (1 MiB) */

/* One device image to copy: the connection's device (not owned) and the
** writer lock held on it while copying. */
typedef struct bk_image {
  vt_dev *pDev;
  store_txn *pLock;
} bk_image;

/* One file to write: image iImage to zDest. */
typedef struct bk_copy {
  int iImage;
  char *zDest;        /* sqlite3_malloc'd */
  const char *zTable; /* a table whose rows it holds (for messages; the vt_tab's) */
  int fd;             /* -1 when not open */
  int bExisted;       /* an empty file was there before (it is reused) */
  int bCreated;       /* this call created the file: removed on failure */
} bk_copy;

typedef struct bk_job {
  sqlite3 *db;
  vt_conn *pConn;
  const char *zDest; /* DEST (the argument's text) */
  const char *zDir;  /* DIR, or NULL */
  bk_image *aImage;
  int nImage;
  bk_copy *aCopy;
  int nCopy;
  sqlite3 *pDestDb;
  int bDestExisted;
  int bDestCreated;
  char *zErr; /* sqlite3_malloc'd message of the first failure */
} bk_job;

/* Record the first failure's message; returns rc. */
static int bk_error(bk_job *j, int rc, const char *zFmt, ...) {
  if (!j->zErr) {
    va_list ap;
    va_start(ap, zFmt);
    j->zErr = sqlite3_vmprintf(zFmt, ap);
    va_end(ap);
  }
  return rc;
}

/* ---- The images the main database's csq tables use ---- */

/* Connect every csq table of main (a table SQLite has not needed yet is not
** connected), so that each one is in pConn->pTabs. */
static int connect_tables(bk_job *j) {
  sqlite3_stmt *pStmt = NULL;
  char **azName = NULL;
  int nName = 0, rc;
  rc = sqlite3_prepare_v2(j->db,
                          "SELECT name, sql FROM main.sqlite_schema WHERE type = 'table' "
                          "AND sql LIKE 'CREATE VIRTUAL TABLE%'",
                          -1, &pStmt, NULL);
  while (rc == SQLITE_OK && sqlite3_step(pStmt) == SQLITE_ROW) {
    const char *zName = (const char *)sqlite3_column_text(pStmt, 0);
    const char *zSql = (const char *)sqlite3_column_text(pStmt, 1);
    if (!zName || !zSql || !vt_sql_is_csq_table(zSql)) continue;
    char **az = sqlite3_realloc64(azName, sizeof(char *) * (size_t)(nName + 1));
    if (!az) {
      rc = SQLITE_NOMEM;
      break;
    }
    azName = az;
    azName[nName] = sqlite3_mprintf("%s", zName);
    if (!azName[nName]) rc = SQLITE_NOMEM;
    nName++;
  }
  if (rc == SQLITE_OK)
    rc = sqlite3_finalize(pStmt);
  else
    sqlite3_finalize(pStmt);
  if (rc != SQLITE_OK && rc != SQLITE_NOMEM)
    bk_error(j, rc, "csq_backup: cannot read the schema: %s", sqlite3_errmsg(j->db));
  for (int i = 0; rc == SQLITE_OK && i < nName; i++) {
    char *zSql = sqlite3_mprintf("SELECT 0 FROM main.\"%w\" LIMIT 0", azName[i]);
    sqlite3_stmt *p = NULL;
    if (!zSql)
      rc = SQLITE_NOMEM;
    else
      rc = sqlite3_prepare_v2(j->db, zSql, -1, &p, NULL);
    if (rc != SQLITE_OK && rc != SQLITE_NOMEM)
      bk_error(j, rc, "csq_backup: cannot open table %s: %s", azName[i], sqlite3_errmsg(j->db));
    sqlite3_finalize(p);
    sqlite3_free(zSql);
  }
  for (int i = 0; i < nName; i++) sqlite3_free(azName[i]);
  sqlite3_free(azName);
  return rc;
}

/* The image entry of device d (one per store: two spellings of one path
** share it), added if new. Its index, or -1 when out of memory. */
static int image_of(bk_job *j, vt_dev *d) {
  for (int i = 0; i < j->nImage; i++)
    if (j->aImage[i].pDev->pStore == d->pStore) return i;
  bk_image *a = sqlite3_realloc64(j->aImage, sizeof(*a) * (size_t)(j->nImage + 1));
  if (!a) return -1;
  j->aImage = a;
  memset(&a[j->nImage], 0, sizeof(*a));
  a[j->nImage].pDev = d;
  return j->nImage++;
}

/* Plan the copy of image iImage to zDest (takes zDest) for table zTable. */
static int add_copy(bk_job *j, int iImage, char *zDest, const char *zTable) {
  if (!zDest) return SQLITE_NOMEM;
  for (int i = 0; i < j->nCopy; i++) {
    if (strcmp(j->aCopy[i].zDest, zDest) != 0) continue;
    int iOther = j->aCopy[i].iImage;
    sqlite3_free(zDest);
    if (iOther == iImage) return SQLITE_OK;
    return bk_error(j, SQLITE_ERROR,
                    "csq_backup: the images of tables %s (%s) and %s (%s) would both be copied "
                    "to %s; give the devices distinct file names",
                    j->aCopy[i].zTable, dev_path(j->aImage[iOther].pDev->pDev), zTable,
                    dev_path(j->aImage[iImage].pDev->pDev), j->aCopy[i].zDest);
  }
  bk_copy *a = sqlite3_realloc64(j->aCopy, sizeof(*a) * (size_t)(j->nCopy + 1));
  if (!a) {
    sqlite3_free(zDest);
    return SQLITE_NOMEM;
  }
  j->aCopy = a;
  a[j->nCopy].iImage = iImage;
  a[j->nCopy].zDest = zDest;
  a[j->nCopy].zTable = zTable;
  a[j->nCopy].fd = -1;
  a[j->nCopy].bExisted = 0;
  a[j->nCopy].bCreated = 0;
  j->nCopy++;
  return SQLITE_OK;
}

/* Plan the copies: every device of every csq table of main. */
static int plan_copies(bk_job *j) {
  int rc = SQLITE_OK;
  for (vt_tab *p = j->pConn->pTabs; p && rc == SQLITE_OK; p = p->pNextTab) {
    if (sqlite3_stricmp(p->zDb, "main") != 0) continue;
    int bDefault = p->s.zDevice == NULL && p->s.nDevice == 0;
    for (int k = 0; k < p->nMem && rc == SQLITE_OK; k++) {
      vt_dev *d = p->apMem[k];
      int iImage = image_of(j, d);
      if (iImage < 0) return SQLITE_NOMEM;
      if (d->pTxn)
        return bk_error(j, SQLITE_ERROR,
                        "csq_backup: this connection has uncommitted writes on table %s; "
                        "COMMIT or ROLLBACK first (a backup holds committed rows only)",
                        p->zName);
      if (bDefault) {
        rc = add_copy(j, iImage, sqlite3_mprintf("%s-csd", j->zDest), p->zName);
        continue;
      }
      const char *zPath = dev_path(d->pDev);
      struct stat st;
      if (d == j->pConn->pMem || strcmp(dev_backend_name(d->pDev), "emu") != 0 ||
          stat(zPath, &st) != 0 || !S_ISREG(st.st_mode))
        return bk_error(j, SQLITE_ERROR,
                        "csq_backup: table %s is on device %s, which is not an image file; "
                        "csq_backup copies image files only",
                        p->zName, d->zKey);
      if (!j->zDir)
        return bk_error(j, SQLITE_ERROR,
                        "csq_backup: table %s keeps its rows in %s (its %s= option), not in the "
                        "database's default image; name a directory to copy such images into: "
                        "SELECT csq_backup('%q', 'DIR')",
                        p->zName, zPath, p->s.nDevice ? "devices" : "device", j->zDest);
      const char *zBase = strrchr(zPath, '/');
      zBase = zBase ? zBase + 1 : zPath;
      rc = add_copy(j, iImage, sqlite3_mprintf("%s/%s", j->zDir, zBase), p->zName);
    }
  }
  return rc;
}

/* ---- Destination files ---- */

/* Refuse a destination that exists and is not empty; *pbExisted: an empty
** file is there. */
static int check_new(bk_job *j, const char *zPath, int *pbExisted) {
  struct stat st;
  *pbExisted = stat(zPath, &st) == 0;
  if (*pbExisted && (st.st_size > 0 || !S_ISREG(st.st_mode)))
    return bk_error(j, SQLITE_CANTOPEN,
                    "csq_backup: %s already exists; a backup writes new files only (remove it "
                    "or choose another name)",
                    zPath);
  return SQLITE_OK;
}

/* Create file zPath for writing (bExisted: open the empty file that was
** there). A file that appears meanwhile, or is another destination of this
** backup under another spelling, is an error. A descriptor, or -1 with the
** message recorded; *pbCreated: this call created the file. */
static int create_file(bk_job *j, const char *zPath, int bExisted, int *pbCreated) {
  int fd = open(zPath, O_WRONLY | O_CLOEXEC | (bExisted ? O_TRUNC : O_CREAT | O_EXCL), 0644);
  *pbCreated = fd >= 0 && !bExisted;
  if (fd < 0)
    bk_error(j, SQLITE_CANTOPEN, "csq_backup: cannot create %s: %s", zPath, strerror(errno));
  return fd;
}

/* Check every destination, then create the files and open the copy. */
static int open_dests(bk_job *j) {
  int rc = check_new(j, j->zDest, &j->bDestExisted);
  for (int i = 0; rc == SQLITE_OK && i < j->nCopy; i++)
    rc = check_new(j, j->aCopy[i].zDest, &j->aCopy[i].bExisted);
  if (rc) return rc;
  if (j->zDir) {
    struct stat st;
    if (stat(j->zDir, &st) != 0 || !S_ISDIR(st.st_mode))
      return bk_error(j, SQLITE_CANTOPEN, "csq_backup: %s is not a directory", j->zDir);
  }
  int fd = create_file(j, j->zDest, j->bDestExisted, &j->bDestCreated);
  if (fd < 0) return SQLITE_CANTOPEN;
  close(fd);
  for (int i = 0; i < j->nCopy; i++) {
    j->aCopy[i].fd = create_file(j, j->aCopy[i].zDest, j->aCopy[i].bExisted, &j->aCopy[i].bCreated);
    if (j->aCopy[i].fd < 0) return SQLITE_CANTOPEN;
  }
  rc = sqlite3_open_v2(j->zDest, &j->pDestDb, SQLITE_OPEN_READWRITE, NULL);
  if (rc != SQLITE_OK)
    return bk_error(j, rc, "csq_backup: cannot open %s: %s", j->zDest,
                    j->pDestDb ? sqlite3_errmsg(j->pDestDb) : sqlite3_errstr(rc));
  return SQLITE_OK;
}

/* Close what is open; on failure (rc) remove the files this call created. */
static void close_dests(bk_job *j, int rc) {
  for (int i = 0; i < j->nCopy; i++) {
    if (j->aCopy[i].fd >= 0) close(j->aCopy[i].fd);
    if (rc && j->aCopy[i].bCreated) unlink(j->aCopy[i].zDest);
  }
  if (j->pDestDb) sqlite3_close(j->pDestDb);
  if (rc && j->bDestCreated) {
    static const char *const azSuffix[] = {"", "-journal", "-wal", "-shm"};
    for (int i = 0; i < 4; i++) {
      char *z = sqlite3_mprintf("%s%s", j->zDest, azSuffix[i]);
      if (z) unlink(z);
      sqlite3_free(z);
    }
  }
}

/* ---- Copying ---- */

/* Lock every image as a writer would, in writers' order (by path), so that
** two backups, or a backup and a writer of a striped table, cannot each hold
** what the other waits for. */
static int lock_images(bk_job *j) {
  int *aOrder = sqlite3_malloc64(sizeof(int) * (size_t)(j->nImage + 1));
  if (!aOrder) return SQLITE_NOMEM;
  for (int i = 0; i < j->nImage; i++) { /* insertion sort: a handful of images */
    int k = i;
    while (k > 0 && strcmp(j->aImage[aOrder[k - 1]].pDev->zKey, j->aImage[i].pDev->zKey) > 0) {
      aOrder[k] = aOrder[k - 1];
      k--;
    }
    aOrder[k] = i;
  }
  int rc = SQLITE_OK;
  for (int i = 0; i < j->nImage && rc == SQLITE_OK; i++) {
    bk_image *pImg = &j->aImage[aOrder[i]];
    char *zErr = NULL;
    int e = store_txn_begin(pImg->pDev->pStore, pImg->pDev->pQ, VT_BUSY_MS, &pImg->pLock, &zErr);
    if (e) {
      pImg->pLock = NULL;
      rc = vt_rc_from(e < 0 ? e : -EIO);
      bk_error(j, rc, "csq_backup: %s%s", zErr ? zErr : "cannot lock the device",
               rc == SQLITE_BUSY ? " (a writer kept it busy; try again)" : "");
      free(zErr);
    }
  }
  sqlite3_free(aOrder);
  return rc;
}

static void unlock_images(bk_job *j) {
  for (int i = 0; i < j->nImage; i++) {
    if (j->aImage[i].pLock) store_txn_rollback(j->aImage[i].pLock);
    j->aImage[i].pLock = NULL;
  }
}

/* Copy the main database to the destination connection, in one step. A
** lock another connection holds for a moment is waited for (5 s). */
static int copy_database(bk_job *j) {
  sqlite3_backup *pBk = sqlite3_backup_init(j->pDestDb, "main", j->db, "main");
  if (!pBk)
    return bk_error(j, sqlite3_errcode(j->pDestDb), "csq_backup: %s", sqlite3_errmsg(j->pDestDb));
  int rc, nTry = 0;
  while ((rc = sqlite3_backup_step(pBk, -1)) == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    if (++nTry > 50) break;
    sqlite3_sleep(100);
  }
  int rc2 = sqlite3_backup_finish(pBk);
  if (rc == SQLITE_DONE) rc = rc2;
  if (rc != SQLITE_OK)
    return bk_error(j, rc, "csq_backup: copying the database to %s failed: %s", j->zDest,
                    sqlite3_errmsg(j->pDestDb));
  return SQLITE_OK;
}

static int all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* Copy blocks [0, high-water mark) of copy c's image (locked) to its file. */
static int copy_image(bk_job *j, bk_copy *c) {
  vt_dev *d = j->aImage[c->iImage].pDev;
  uint64_t nUsed = 0, nHigh = 0;
  void *pBuf = NULL;
  int rc = SQLITE_OK;
  store_space(d->pStore, &nUsed, &nHigh);
  /* device buffers are block-aligned: the nvme backend hands them to the kernel */
  if (posix_memalign(&pBuf, CSQ_LBA_SIZE, (size_t)BK_CHUNK_BLOCKS * CSQ_LBA_SIZE))
    return SQLITE_NOMEM;
  for (uint64_t lba = 0; lba < nHigh && rc == SQLITE_OK;) {
    uint32_t n = nHigh - lba > BK_CHUNK_BLOCKS ? BK_CHUNK_BLOCKS : (uint32_t)(nHigh - lba);
    int e = dev_nvm_read(d->pQ, lba, n, pBuf);
    if (e) {
      rc = bk_error(j, SQLITE_IOERR, "csq_backup: reading device %s at block %llu: %s", d->zKey,
                    (unsigned long long)lba, dev_errmsg(d->pQ));
      break;
    }
    for (uint32_t b = 0; b < n; b++) {
      const uint8_t *pBlk = (const uint8_t *)pBuf + (size_t)b * CSQ_LBA_SIZE;
      if (all_zero(pBlk, CSQ_LBA_SIZE)) continue; /* a hole */
      if (pwrite(c->fd, pBlk, CSQ_LBA_SIZE, (off_t)((lba + b) * CSQ_LBA_SIZE)) != CSQ_LBA_SIZE) {
        rc = bk_error(j, SQLITE_IOERR, "csq_backup: writing %s: %s", c->zDest, strerror(errno));
        break;
      }
    }
    lba += n;
  }
  free(pBuf);
  if (rc == SQLITE_OK && (ftruncate(c->fd, (off_t)(nHigh * CSQ_LBA_SIZE)) || fsync(c->fd)))
    rc = bk_error(j, SQLITE_IOERR, "csq_backup: writing %s: %s", c->zDest, strerror(errno));
  return rc;
}

/* ---- The SQL function ---- */

static const char *arg_text(sqlite3_value *v) {
  return sqlite3_value_type(v) == SQLITE_TEXT ? (const char *)sqlite3_value_text(v) : NULL;
}

/* csq_backup(DEST [, DIR]): see the banner. */
static void backup_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  bk_job job, *j = &job;
  memset(j, 0, sizeof(*j));
  j->db = sqlite3_context_db_handle(ctx);
  j->pConn = sqlite3_user_data(ctx);
  j->zDest = arg_text(argv[0]);
  j->zDir = argc > 1 ? arg_text(argv[1]) : NULL;
  int rc = SQLITE_OK;
  if (!j->zDest || !j->zDest[0] || strcmp(j->zDest, ":memory:") == 0)
    rc = bk_error(j, SQLITE_ERROR,
                  "csq_backup: the first argument must name the database file to write, e.g. "
                  "SELECT csq_backup('backup.db')");
  else if (argc > 1 && (!j->zDir || !j->zDir[0]))
    rc = bk_error(j, SQLITE_ERROR,
                  "csq_backup: the second argument must name a directory for the images that "
                  "device= or devices= name");
  else if (sqlite3_txn_state(j->db, "main") == SQLITE_TXN_WRITE)
    rc = bk_error(j, SQLITE_ERROR,
                  "csq_backup: this connection has uncommitted writes; COMMIT or ROLLBACK first "
                  "(a backup holds committed rows only)");
  if (rc == SQLITE_OK) rc = connect_tables(j);
  if (rc == SQLITE_OK) rc = plan_copies(j);
  if (rc == SQLITE_OK) rc = open_dests(j);
  if (rc == SQLITE_OK) rc = lock_images(j);
  if (rc == SQLITE_OK) rc = copy_database(j);
  for (int i = 0; rc == SQLITE_OK && i < j->nCopy; i++) rc = copy_image(j, &j->aCopy[i]);
  unlock_images(j);
  close_dests(j, rc);
  if (rc == SQLITE_OK) {
    sqlite3_result_int(ctx, j->nCopy);
  } else if (rc == SQLITE_NOMEM && !j->zErr) {
    sqlite3_result_error_nomem(ctx);
  } else {
    sqlite3_result_error(ctx, j->zErr ? j->zErr : sqlite3_errstr(rc), -1);
    sqlite3_result_error_code(ctx, rc);
  }
  for (int i = 0; i < j->nCopy; i++) sqlite3_free(j->aCopy[i].zDest);
  sqlite3_free(j->aCopy);
  sqlite3_free(j->aImage);
  sqlite3_free(j->zErr);
}

/* Register csq_backup with one and two arguments. DIRECTONLY: it writes
** files, so no view or trigger of a database from elsewhere may call it. */
int vt_backup_register(sqlite3 *db, vt_conn *pConn) {
  int flags = SQLITE_UTF8 | SQLITE_DIRECTONLY;
  int rc = sqlite3_create_function(db, "csq_backup", 1, flags, pConn, backup_func, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_backup", 2, flags, pConn, backup_func, NULL, NULL);
  return rc;
}
