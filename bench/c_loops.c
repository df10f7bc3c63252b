/*
** c_loops.c -- the plain-C reference for the bandwidth benchmark: what a
** hand-written OpenMP loop gets on this machine for c[i] = a[i] + b[i] (into a
** preallocated output) and s = sum(a[i]), over N float32 values.
** Build: gcc -O3 -march=native -fopenmp bench/c_loops.c -o c_loops
** Usage: OMP_NUM_THREADS=2 BENCH_OUT=records.tsv ./c_loops [N=16777216] [reps=50]
** One record per case appended to $BENCH_OUT (bench/run.sh's TSV, seconds):
**   case  peer  threads  median  min  max  reps  bytes
** and a human line per case on stdout.
** Bytes moved: add reads a and b and writes c = 12 B/elem; sum reads a = 4 B/elem
** (the write-allocate read of c is not counted, as in STREAM).
*/
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "c_bench.h"

/* -- The two loops -------------------------------------------------------------- */

__attribute__((visibility("default"))) void cl_add(const float *restrict a, const float *restrict b,
                                                  float *restrict c, long n)
{
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) c[i] = a[i] + b[i];
}

/* float accumulators, vectorized per thread (simd), combined by OpenMP */
__attribute__((visibility("default"))) float cl_sum(const float *restrict a, long n)
{
  float s = 0;
#pragma omp parallel for simd schedule(static) reduction(+:s)
  for (long i = 0; i < n; i++) s += a[i];
  return s;
}

#ifndef C_LOOPS_LIB

static void report(const char *name, int th, double *t, int reps, double bytes, double check)
{
  double med = bench_record(name, "C loop (gcc -O3 -march=native -fopenmp)", th, t, reps, bytes);
  printf("%-10s %-34s t=%d median %8.3f ms  min %8.3f  max %8.3f  %6.2f GB/s  (check %g)\n",
         name, "C loop (gcc -O3, OpenMP)", th, med * 1e3, t[0] * 1e3, t[reps - 1] * 1e3, bytes / med / 1e9, check);
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 1L << 24;
  int reps = argc > 2 ? atoi(argv[2]) : 50;
  float *restrict a = aligned_alloc(64, n * sizeof(float));
  float *restrict b = aligned_alloc(64, n * sizeof(float));
  float *restrict c = aligned_alloc(64, n * sizeof(float));
  double *t = malloc(reps * sizeof *t);
  int th = omp_get_max_threads();
  if (!a || !b || !c || !t) { fprintf(stderr, "c_loops: out of memory\n"); return 1; }
  /* first touch with the same static schedule as the timed loops */
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) { a[i] = (float)(i % 1000) * 1e-3f; b[i] = 1.0f; c[i] = 0.0f; }

  /* add: c = a + b, 3 warm-up passes then reps timed passes */
  for (int r = -3; r < reps; r++) {
    double t0 = omp_get_wtime();
    cl_add(a, b, c, n);
    if (r >= 0) t[r] = omp_get_wtime() - t0;
  }
  report("add", th, t, reps, 12.0 * n, c[n - 1]);

  volatile float sink = 0;
  for (int r = -3; r < reps; r++) {
    double t0 = omp_get_wtime();
    sink = cl_sum(a, n);
    if (r >= 0) t[r] = omp_get_wtime() - t0;
  }
  report("sum", th, t, reps, 4.0 * n, sink);
  return 0;
}

#endif
