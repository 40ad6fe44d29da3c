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
/* A name (of a table, a column) as a message shows it: itself when at most
** DEV_NAME_SHOW bytes, else its first DEV_NAME_SHOW bytes (cut between
** UTF-8 characters) and "...", written to aBuf. Keeps messages short
** whatever the name: a table name may be 65535 bytes long. */
#define DEV_NAME_SHOW     64
#define DEV_NAME_SHOW_BUF (DEV_NAME_SHOW + 4)
const char *dev_name_show(const char *zName, char aBuf[DEV_NAME_SHOW_BUF]);

#endif /* CSQ_DEVICE_MSG_H */
