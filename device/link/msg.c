/*
** device/link/msg.c - messages of the device layer (msg.h).
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
