/*
** device/link/msg.c - messages of the device layer (msg.h).
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/link/msg.h"

char *dev_vmprintf(const char *zFmt, va_list ap) {
  char *z = NULL;
  if (vasprintf(&z, zFmt, ap) < 0) z = NULL;
  return z;
}

char *dev_mprintf(const char *zFmt, ...) {
  va_list ap;
  va_start(ap, zFmt);
  char *z = dev_vmprintf(zFmt, ap);
  va_end(ap);
  return z;
}

const char *dev_name_show(const char *zName, char aBuf[DEV_NAME_SHOW_BUF]) {
  size_t n = strlen(zName);
  if (n <= DEV_NAME_SHOW) return zName;
  n = DEV_NAME_SHOW;
  while (n > 0 && ((unsigned char)zName[n] & 0xC0) == 0x80) n--; /* not inside a character */
  memcpy(aBuf, zName, n);
  memcpy(aBuf + n, "...", 4);
  return aBuf;
}
