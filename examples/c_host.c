/*
** c_host.c -- tide from C with no Lua: build a small graph, backpropagate,
** read the gradient, and handle an error through td_last_error().
** Build and run:  make examples/c_host && ./build/c_host
*/
#include "tide.h"
#include <stdio.h>

int main(void)
{
  td_manual_seed(42);
  int64_t shape[2] = { 2, 3 };
  td_tensor *x = td_randn(2, shape, TD_FLOAT32);
  td_set_requires_grad(x, 1);

  /* y = sum(exp(x) * x) ; dy/dx = exp(x) * (1 + x) */
  td_tensor *e = td_exp(x), *p = td_mul(e, x), *y = td_sum(p, -1, NULL, 0);
  double v;
  td_item(y, &v);
  printf("y = %.6f\n", v);

  if (td_backward(1, &y, NULL, 0, NULL, NULL, 0, 0) != 0) {
    fprintf(stderr, "backward failed: %s\n", td_last_error());
    return 1;
  }
  td_tensor *g = td_grad(x);
  double gx[6], xs[6];
  td_read(g, gx);
  td_read(x, xs);
  int ok = 1;
  for (int i = 0; i < 6; i++) {
    double want = __builtin_exp(xs[i]) * (1 + xs[i]);
    if (__builtin_fabs(gx[i] - want) > 1e-4 * (1 + __builtin_fabs(want))) ok = 0;
  }
  printf("grad %s\n", ok ? "matches exp(x) * (1 + x)" : "MISMATCH");

  /* errors are values, never aborts */
  int64_t bad[1] = { 5 };
  td_tensor *z = td_randn(1, bad, TD_FLOAT32);
  td_tensor *w = td_add(x, z);
  if (!w) printf("error: %s\n", td_last_error());

  td_release(z); td_release(g); td_release(y); td_release(p); td_release(e); td_release(x);
  printf("live bytes after release: %lld\n", (long long)td_live_bytes());
  return ok ? 0 : 1;
}
