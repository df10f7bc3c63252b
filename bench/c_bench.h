/*
** c_bench.h -- shared by the C benchmarks (c_loops.c, c_fuse.c, c_op.c): sort
** the timed repetitions, take the median, and append the record to $BENCH_OUT
** in the TSV format bench/compile.lua and report.lua read:
**   case  peer  threads  median  min  max  reps  bytes   (times in seconds)
*/
#ifndef C_BENCH_H
#define C_BENCH_H
#include <stdio.h>
#include <stdlib.h>

static inline int bench_cmp(const void *x, const void *y)
{
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Sorts t (so t[0] is the min, t[reps - 1] the max) and returns the median. */
static inline double bench_record(const char *name, const char *peer, int th, double *t, int reps, double bytes)
{
  qsort(t, reps, sizeof *t, bench_cmp);
  double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
  const char *path = getenv("BENCH_OUT");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "%s\t%s\t%d\t%.9f\t%.9f\t%.9f\t%d\t%.0f\n", name, peer, th, med, t[0], t[reps - 1], reps, bytes);
    fclose(f);
  }
  return med;
}

#endif
