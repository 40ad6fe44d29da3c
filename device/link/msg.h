/*
** device/link/msg.h - messages of the device layer, on both sides of the link: a
** malloc'd, printf-formatted string (NULL when out of memory); the caller
** frees it. Every device/ file uses these.
*/
#ifndef CSQ_DEVICE_MSG_H
#define CSQ_DEVICE_MSG_H

#include <stdarg.h>

char *dev_mprintf(const char *zFmt, ...) __attribute__((format(printf, 1, 2)));
char *dev_vmprintf(const char *zFmt, va_list ap);

#endif /* CSQ_DEVICE_MSG_H */
