/*
** device/host/result.h - a program's result (device/format/program.h,
** "Result in the output area") read back into column vectors, every count,
** offset and class checked against the bytes that arrived: a device that
** returns garbage gets -EBADMSG, never a read outside the result.
*/
#ifndef CSQ_DEVICE_RESULT_H
#define CSQ_DEVICE_RESULT_H

#include <stdint.h>
#include "device/format/program.h"
#include "device/format/vec.h"

/* The result p[0..n) of one Execute of prog over rows [startRow, nRow) of
** a row group of nRow rows: aOut[0..prog->nResCol) (caller-initialised) are
** reset and receive *pnRows rows, *pNext the first row the result did not
** cover. bAcc: the Execute accumulated into an earlier result, so it may
** hold more rows than the row group and end where it started. A program
** with CSQ_PF_ROWNUM: *ppRowNum points at the *pnRows row numbers inside
** p (checked ascending inside [startRow, *pNext)); else NULL. Returns 0,
** -EBADMSG or -ENOMEM. */
int dev_result_decode(const csq_prog *prog, const uint8_t *p, uint64_t n, uint32_t startRow,
                      uint32_t nRow, int bAcc, csq_vec *aOut, uint32_t *pnRows, uint32_t *pNext,
                      const uint8_t **ppRowNum);

#endif /* CSQ_DEVICE_RESULT_H */
