/*
** device/format/checksum.h - XXH3-64 of bulk bytes, the fastest way this CPU
** allows (device/format/checksum.c). Same values as XXH3_64bits.
*/
#ifndef CSQ_DEVICE_CHECKSUM_H
#define CSQ_DEVICE_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

uint64_t csq_checksum(const void *p, size_t n);

#endif /* CSQ_DEVICE_CHECKSUM_H */
