/*
** examples/bpf/near.c - a geographic distance filter: is the point (lat, lon)
** within km kilometres of (lat0, lon0)? Equirectangular approximation
** (good to well under 1% at city scale), all in REAL helpers, since eBPF
** has no floating point.
**
**   clang -target bpf -O2 -I ext -c examples/bpf/near.c -o near.o
**   SELECT csq_bpf_load('near', readfile('near.o'), 'REAL,REAL,REAL,REAL,REAL');
**   SELECT count(*) FROM trips WHERE csq_bpf('near', lat, lon, 40.75, -73.99, 2.0);
**
** The same test in SQL (SQLite's math functions):
**   (radians(lon - -73.99) * cos(radians((lat + 40.75) / 2)))^2
**     + radians(lat - 40.75)^2 <= (2.0 / 6371.0)^2
** NULL or non-numeric arguments: the row does not qualify (returns 0).
*/
#include "csq_bpf.h"

CSQ_PROGRAM u64 near(const struct csq_arg *a) {
#pragma unroll
  for (int i = 0; i < 5; i++)
    if (a[i].type != CSQ_T_REAL) return 0; /* INTEGERs arrive as REAL (declared REAL) */
  u64 rad = csq_real(3.14159265358979323846 / 180.0);
  u64 dlat = csq_fmul(csq_fsub(a[0].v, a[2].v), rad);
  u64 mlat = csq_fmul(csq_fmul(csq_fadd(a[0].v, a[2].v), csq_real(0.5)), rad);
  u64 dlon = csq_fmul(csq_fmul(csq_fsub(a[1].v, a[3].v), rad), csq_fcos(mlat));
  u64 d2 = csq_fadd(csq_fmul(dlat, dlat), csq_fmul(dlon, dlon));
  u64 r = csq_fdiv(a[4].v, csq_real(6371.0));
  return csq_fcmp(d2, csq_fmul(r, r)) <= 0;
}
