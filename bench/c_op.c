/*
** c_op.c -- per-op cost of tide's C API with no Lua at all: td_add on two
** 1-element float32 tensors followed by td_release of the result, in a loop.
** It is the floor under the Lua number (dispatcher + allocation + kernel), so
** the difference to bench/eager_ops.lua is the cost of the Lua/FFI layer.
** Build (bench/run.sh does it): gcc -O2 -Iruntime bench/c_op.c build/libtide.a $(make -s print-libs)
** Usage: TIDE_NUM_THREADS=2 BENCH_OUT=records.tsv ./c_op [ops_per_rep=1000000] [reps=7]
** (record appended to $BENCH_OUT in c_loops.c's TSV format; a human line on stdout)
*/
#include "tide.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "c_bench.h"

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
  long ops = argc > 1 ? atol(argv[1]) : 1000000;
  int reps = argc > 2 ? atoi(argv[2]) : 7;
  int64_t one = 1;
  td_tensor *a = td_randn(1, &one, TD_FLOAT32), *b = td_randn(1, &one, TD_FLOAT32);
  double *t = malloc(reps * sizeof *t);
  if (!a || !b || !t) { fprintf(stderr, "c_op: %s\n", td_last_error()); return 1; }
  for (int r = -1; r < reps; r++) {
    double t0 = now();
    for (long i = 0; i < ops; i++) {
      td_tensor *c = td_add(a, b);
      if (!c) { fprintf(stderr, "c_op: %s\n", td_last_error()); return 1; }
      td_release(c);
    }
    if (r >= 0) t[r] = now() - t0;
  }
  double med = bench_record("op_add_1", "tide from C (td_add + td_release)", td_get_num_threads(), t, reps, (double)ops);
  printf("%-10s %-34s t=%d median %8.1f ns/op  min %8.1f  max %8.1f\n", "op_add_1", "tide from C (td_add + td_release)",
         td_get_num_threads(), med / ops * 1e9, t[0] / ops * 1e9, t[reps - 1] / ops * 1e9);
  td_release(a);
  td_release(b);
  return 0;
}
