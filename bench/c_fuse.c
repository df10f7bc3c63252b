/*
** c_fuse.c -- the hand-written C references of bench/compile.lua (tide.compile):
**   w1_fwd     y = sin(x)^2 + cos(x)^2 over N float32 (read x, write y: 8 B/elem)
**   w1_fwdbwd  the same y and, in the same pass, the gradient of y:sum(),
**              dx = 2 s c - 2 c s as written (read x, write y and dx: 12 B/elem)
**   copy       a[i] = b[i] (STREAM copy: 8 B/elem)
**   triad      a[i] = b[i] + 3 c[i] (STREAM triad: 12 B/elem)
** copy and triad are the machine's memory bandwidth, the yardstick of W8. The
** write-allocate read of the output is not counted anywhere (as in STREAM).
** Build: gcc -O3 -march=native -ffast-math -fopenmp bench/c_fuse.c -lmvec -lm -o c_fuse
** Usage: OMP_NUM_THREADS=2 BENCH_OUT=records.tsv ./c_fuse [N=16777216] [reps=30] [stream N=67108864]
** Records (bench/run.sh's TSV, seconds): case peer threads median min max reps bytes.
**
** Vector math: with -ffast-math glibc's <math.h> declares sinf/cosf `omp declare
** simd`, so GCC calls libmvec's _ZGVdN8v_sinf (8 floats per call, AVX2). Writing
** cosf(x) next to sinf(x) makes GCC merge the pair into a scalar sincosf that
** does not vectorize (../shared/TOOLCHAIN.md section 9), so c = sinf(x + pi/2).
** The two gradient terms get their factor 2 from two separate arguments (k1, k2,
** both 2 at run time): with -ffast-math GCC would otherwise fold 2sc - 2cs to 0
** and the loop would only store zeros.
*/
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "c_bench.h"

#define HALF_PI 1.57079632679489661923f

__attribute__((noinline)) static void w1_fwd(const float *restrict x, float *restrict y, long n)
{
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; i++) {
    float s = sinf(x[i]), c = sinf(x[i] + HALF_PI);
    y[i] = s * s + c * c;
  }
}

__attribute__((noinline)) static void w1_fwdbwd(const float *restrict x, float *restrict y, float *restrict dx,
                                                float k1, float k2, long n)
{
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; i++) {
    float s = sinf(x[i]), c = sinf(x[i] + HALF_PI);
    y[i] = s * s + c * c;
    dx[i] = k1 * s * c - k2 * c * s;
  }
}

__attribute__((noinline)) static void copy(float *restrict a, const float *restrict b, long n)
{
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) a[i] = b[i];
}

__attribute__((noinline)) static void triad(float *restrict a, const float *restrict b, const float *restrict c, long n)
{
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
}

static void report(const char *name, int th, double *t, int reps, double bytes, double check)
{
  double med = bench_record(name, "C loop (gcc -O3 -march=native -ffast-math -fopenmp, libmvec)", th, t, reps, bytes);
  printf("%-10s %-30s t=%d median %8.3f ms  min %8.3f  max %8.3f  %6.2f GB/s  (check %g)\n",
         name, "C loop (OpenMP, libmvec)", th, med * 1e3, t[0] * 1e3, t[reps - 1] * 1e3, bytes / med / 1e9, check);
}

static float *alloc(long n)
{
  float *p = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
  if (!p) { fprintf(stderr, "c_fuse: out of memory\n"); exit(1); }
  return p;
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 1L << 24;
  int reps = argc > 2 ? atoi(argv[2]) : 30;
  long ns = argc > 3 ? atol(argv[3]) : 1L << 26;       /* STREAM arrays: 256 MiB each */
  volatile float k = 2.0f;                             /* the gradient's factors, opaque to GCC */
  int th = omp_get_max_threads();
  double *t = malloc(reps * sizeof *t);
  float *x = alloc(n), *y = alloc(n), *dx = alloc(n);
  /* first touch with the timed loops' static schedule; x ~ uniform in [-4, 4) */
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) { x[i] = (float)((i * 2654435761u) % 8000) * 1e-3f - 4.0f; y[i] = 0; dx[i] = 0; }

  for (int r = -3; r < reps; r++) {
    double t0 = omp_get_wtime();
    w1_fwd(x, y, n);
    if (r >= 0) t[r] = omp_get_wtime() - t0;
  }
  double err = 0;
  for (long i = 0; i < n; i++) err = fmax(err, fabs(y[i] - 1.0));
  report("w1_fwd", th, t, reps, 8.0 * n, err);

  for (int r = -3; r < reps; r++) {
    double t0 = omp_get_wtime();
    w1_fwdbwd(x, y, dx, k, k, n);
    if (r >= 0) t[r] = omp_get_wtime() - t0;
  }
  err = 0;
  for (long i = 0; i < n; i++) err = fmax(err, fabs(dx[i]));
  report("w1_fwdbwd", th, t, reps, 12.0 * n, err);
  free(x); free(y); free(dx);

  float *a = alloc(ns), *b = alloc(ns), *c = alloc(ns);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < ns; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
  for (int r = -2; r < reps; r++) {
    double t0 = omp_get_wtime();
    copy(a, b, ns);
    if (r >= 0) t[r] = omp_get_wtime() - t0;
  }
  report("copy", th, t, reps, 8.0 * ns, a[ns - 1]);
  for (int r = -2; r < reps; r++) {
    double t0 = omp_get_wtime();
    triad(a, b, c, ns);
    if (r >= 0) t[r] = omp_get_wtime() - t0;
  }
  report("triad", th, t, reps, 12.0 * ns, a[ns - 1]);
  return 0;
}
