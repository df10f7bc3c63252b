/*
** threads_test.c -- tide from 4 OS threads at once (spec/runtime/threads_spec.lua).
** Built twice: against libtide.a (C API calls: creation, elementwise,
** reductions, matmul, autograd, random numbers, errors, grad mode, the
** caching allocator, DataLoader prefetch workers, one trace per process), with and without
** ThreadSanitizer; and with -DTHREADS_LUA, where each thread runs its own
** lua_State with tide loaded from libtide.so. Prints "ok N - ..." /
** "not ok N - ..." lines and exits nonzero on any failure.
*/
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 4

static atomic_int nfail, ncheck;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void check(int ok, int tid, const char *what, const char *why)
{
  atomic_fetch_add(&ncheck, 1);
  if (ok) return;
  atomic_fetch_add(&nfail, 1);
  pthread_mutex_lock(&out_mu);
  printf("not ok - thread %d: %s%s%s\n", tid, what, why ? ": " : "", why ? why : "");
  pthread_mutex_unlock(&out_mu);
}

#ifndef THREADS_LUA
/* -- C API --------------------------------------------------------------------------- */
#include "tide.h"

#define N 100003              /* elements: large enough for the pool and the caching allocator */
static int iters = 20;
static pthread_barrier_t bar;
static double ref_sum_bits;   /* the reduction's result computed before the threads start */
static double xs[N];

static td_tensor *vec(int64_t n, const double *v) { return td_from_doubles(1, &n, TD_FLOAT32, v); }

static int close_to(double got, double want, double rtol) { return fabs(got - want) <= rtol * (1 + fabs(want)); }

/* y = exp(x) * x + x / 2, element by element */
static void t_elementwise(int tid, td_tensor *x)
{
  td_tensor *two = td_wrap_number(2), *e = td_exp(x), *p = td_mul(e, x), *h = td_div(x, two), *y = td_add(p, h);
  check(e && p && h && y, tid, "elementwise ops", td_last_error());
  if (y) {
    double *out = malloc(sizeof(double) * N);
    td_read(y, out);
    int ok = 1;
    for (int i = 0; i < N && ok; i += 97) {
      float xf = (float)xs[i];
      ok = close_to(out[i], exp(xf) * xf + xf / 2, 1e-5);
    }
    check(ok, tid, "elementwise values", NULL);
    free(out);
  }
  td_release(two); td_release(e); td_release(p); td_release(h); td_release(y);
}

/* the sum: the same bits as computed alone, whichever thread got the pool */
static void t_reduce(int tid, td_tensor *x)
{
  td_tensor *s = td_sum(x, -1, NULL, 0);
  double v = 0;
  check(s && td_item(s, &v) == 0, tid, "sum", td_last_error());
  check(memcmp(&v, &ref_sum_bits, sizeof v) == 0, tid, "sum is bitwise equal to the single-thread result", NULL);
  td_release(s);
}

static void t_matmul(int tid, int iter)
{
  enum { M = 64, K = 48, P = 32 };
  static _Thread_local double a[M * K], b[K * P], c[M * P];
  for (int i = 0; i < M * K; i++) a[i] = ((i * 7 + tid + iter) % 13) * 0.125 - 0.75;
  for (int i = 0; i < K * P; i++) b[i] = ((i * 5 + tid) % 11) * 0.25 - 1.25;
  int64_t sa[2] = { M, K }, sb[2] = { K, P };
  td_tensor *A = td_from_doubles(2, sa, TD_FLOAT64, a), *B = td_from_doubles(2, sb, TD_FLOAT64, b), *C = td_matmul(A, B);
  check(C != NULL, tid, "matmul", td_last_error());
  if (C) {
    td_read(C, c);
    int ok = 1;
    for (int i = 0; i < M && ok; i++)
      for (int j = 0; j < P && ok; j++) {
        double w = 0;
        for (int k = 0; k < K; k++) w += a[i * K + k] * b[k * P + j];
        ok = close_to(c[i * P + j], w, 1e-12);
      }
    check(ok, tid, "matmul values", NULL);
  }
  td_release(A); td_release(B); td_release(C);
}

/* loss = sum(exp(w) * w): dloss/dw = exp(w) (1 + w) */
static void t_autograd(int tid, int iter)
{
  double v[257];
  for (int i = 0; i < 257; i++) v[i] = ((i + tid * 3 + iter) % 17) * 0.1 - 0.8;
  int64_t n = 257;
  td_tensor *w = td_from_doubles(1, &n, TD_FLOAT64, v);
  td_set_requires_grad(w, 1);
  td_tensor *e = td_exp(w), *p = td_mul(e, w), *l = td_sum(p, -1, NULL, 0);
  int rc = l ? td_backward(1, &l, NULL, 0, NULL, NULL, 0, 0) : -1;
  check(rc == 0, tid, "backward", td_last_error());
  td_tensor *g = td_grad(w);
  check(g != NULL, tid, "a gradient", NULL);
  if (g) {
    double gv[257];
    td_read(g, gv);
    int ok = 1;
    for (int i = 0; i < 257; i++) ok &= close_to(gv[i], exp(v[i]) * (1 + v[i]), 1e-12);
    check(ok, tid, "gradient values", NULL);
  }
  td_release(g); td_release(l); td_release(p); td_release(e); td_release(w);
}

/* errors are per thread: each sees its own message */
static void t_errors(int tid)
{
  int64_t a = 2 + tid, b = 7;
  td_tensor *x = td_full(1, &a, 1, TD_FLOAT32), *y = td_full(1, &b, 1, TD_FLOAT32), *z = td_add(x, y);
  char want[96];
  snprintf(want, sizeof want, "shapes [%d] and [7] cannot be broadcast", 2 + tid);
  check(!z && strstr(td_last_error(), want), tid, "an error names this thread's shapes", td_last_error());
  td_release(x); td_release(y); td_release(z);
}

/* grad mode is per thread: thread 1 turns it off, the others keep recording */
static void t_grad_mode(int tid)
{
  int64_t n = 3;
  int prev = tid == 1 ? td_set_grad_enabled(0) : td_grad_enabled();
  td_tensor *w = td_full(1, &n, 1, TD_FLOAT32);
  td_set_requires_grad(w, 1);
  td_tensor *y = td_exp(w);
  check(td_requires_grad(y) == (tid != 1), tid, "grad mode is this thread's", NULL);
  if (tid == 1) td_set_grad_enabled(prev);
  td_release(y); td_release(w);
}

static void t_random(int tid)
{
  int64_t n = 50000;
  td_tensor *r = td_randn(1, &n, TD_FLOAT32), *m = r ? td_sum(r, -1, NULL, 0) : NULL;
  double v = NAN;
  check(m && td_item(m, &v) == 0 && fabs(v / n) < 0.05, tid, "randn", td_last_error());
  td_release(r); td_release(m);
}

/* thread 0 traces; meanwhile thread 1's eager ops run (with data) and its
** td_compile_begin fails; after thread 0 ends its trace, thread 1 traces */
static void t_trace(int tid)
{
  td_compiled *cf = tid < 2 ? td_compile_new(tid ? "f1" : "f0", 0) : NULL;
  int64_t n = 8;
  td_tensor *x = td_full(1, &n, 2, TD_FLOAT32);
  if (tid == 0) {
    check(td_compile_begin(cf, 1, &x) == 0, tid, "compile begin", td_last_error());
    td_tensor *y = td_exp(x);
    check(y && y->ptr == NULL, tid, "ops on the tracing thread are traced", NULL);
    td_release(y);
  }
  pthread_barrier_wait(&bar);                    /* thread 0 is tracing */
  if (tid == 1) {
    td_tensor *y = td_exp(x), *s = y ? td_sum(y, -1, NULL, 0) : NULL;
    double v = 0;
    check(s && td_item(s, &v) == 0 && close_to(v, 8 * exp(2.0f), 1e-6), tid, "eager ops on another thread run",
          td_last_error());
    td_release(s); td_release(y);
    int rc = td_compile_begin(cf, 1, &x);
    check(rc < 0 && strstr(td_last_error(), "another thread is tracing (tide.compile runs one trace at a time per process)"),
          tid, "a second thread's compile begin fails", td_last_error());
  }
  pthread_barrier_wait(&bar);
  if (tid == 0) td_compile_abort(cf);
  pthread_barrier_wait(&bar);                    /* no one traces */
  if (tid == 1) {
    check(td_compile_begin(cf, 1, &x) == 0, tid, "compile begin after the other's trace ended", td_last_error());
    td_compile_abort(cf);
  }
  pthread_barrier_wait(&bar);
  td_release(x);
  td_compile_free(cf);
}

/* a DataLoader's worker threads (rt_prefetch.c) inside each host thread: 3 workers,
** 2 batches ahead, rows in reverse order; every other epoch is dropped half way */
static void t_prefetch(int tid, int iter)
{
  enum { R = 300, W = 16, BS = 7 };
  double rows[R * W];
  int64_t size[2] = { R, W }, order[R];
  for (int i = 0; i < R * W; i++) rows[i] = i;
  for (int i = 0; i < R; i++) order[i] = R - 1 - i;
  td_tensor *x = td_from_doubles(2, size, TD_FLOAT32, rows);
  td_prefetch *pf = x ? td_prefetch_new(1, &x, order, R, BS, 3, 2) : NULL;
  check(pf != NULL, tid, "prefetch new", td_last_error());
  int ok = 1, nb = 0, last = (iter % 2) ? (R + BS - 1) / BS : 5;
  td_tensor *b = NULL;
  while (pf && nb < last && td_prefetch_next(pf, &b) == 1) {
    const float *v = b->ptr;
    for (int64_t i = 0; i < b->sizes[0]; i++)
      ok = ok && v[i * W] == (float)(order[nb * BS + i] * W) && v[i * W + W - 1] == (float)(order[nb * BS + i] * W + W - 1);
    td_release(b);
    nb++;
  }
  check(ok && nb == last, tid, "prefetched batches hold the rows in order", NULL);
  td_prefetch_free(pf);
  td_release(x);
}

static void *run(void *arg)
{
  int tid = (int)(intptr_t)arg;
  td_tensor *x = vec(N, xs);
  check(x != NULL, tid, "create", td_last_error());
  pthread_barrier_wait(&bar);
  for (int it = 0; it < iters && x; it++) {
    t_elementwise(tid, x);
    t_reduce(tid, x);
    t_matmul(tid, it);
    t_autograd(tid, it);
    t_errors(tid);
    t_grad_mode(tid);
    t_random(tid);
    t_prefetch(tid, it);
    if (tid == 3 && it % 5 == 4) td_empty_cache();
  }
  td_release(x);
  t_trace(tid);
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc > 1) iters = atoi(argv[1]);
  td_set_num_threads(2);
  for (int i = 0; i < N; i++) xs[i] = ((i * 37) % 101) * 0.02 - 1;
  int64_t live0 = td_live_bytes();
  {
    td_tensor *x = vec(N, xs), *s = td_sum(x, -1, NULL, 0);
    td_item(s, &ref_sum_bits);
    td_release(s); td_release(x);
  }
  pthread_barrier_init(&bar, NULL, NTHREADS);
  pthread_t th[NTHREADS];
  for (int t = 0; t < NTHREADS; t++) pthread_create(&th[t], NULL, run, (void *)(intptr_t)t);
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  check(td_live_bytes() == live0, -1, "live bytes back to where they started", NULL);
  printf("%s %d checks, %d failed, %d threads x %d iterations\n", nfail ? "not ok" : "ok", atomic_load(&ncheck),
         atomic_load(&nfail), NTHREADS, iters);
  return nfail ? 1 : 0;
}

#else
/* -- One lua_State per thread ----------------------------------------------------------- */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

static const char *chunk =
  "local tid, iters = ...\n"
  "local tide = require 'tide'\n"
  "local x = tide.arange(0, 100003):float():div(100003) - 0.5\n"
  "local ref = x:sum():item()\n"
  "for it = 1, iters do\n"
  "  local y = x:exp() * x + x / 2\n"
  "  local want = math.exp(x[7]:item()) * x[7]:item() + x[7]:item() / 2\n"
  "  assert(math.abs(y[7]:item() - want) < 1e-5, 'elementwise')\n"
  "  assert(x:sum():item() == ref, 'sum bits')\n"
  "  local a, b = tide.randn(16, 8, { dtype = tide.float64 }), tide.randn(8, 4, { dtype = tide.float64 })\n"
  "  local c = a:matmul(b)\n"
  "  local w = 0\n"
  "  for k = 1, 8 do w = w + a[2][k]:item() * b[k][3]:item() end\n"
  "  assert(math.abs(c[2][3]:item() - w) < 1e-12, 'matmul')\n"
  "  local p = tide.randn(33, { dtype = tide.float64, requires_grad = true })\n"
  "  ;(p:exp() * p):sum():backward()\n"
  "  local g, pv = p.grad, p:detach()\n"
  "  assert((g - pv:exp() * (pv + 1)):abs():max():item() < 1e-12, 'gradient')\n"
  "  local ok, err = pcall(function() return tide.ones(2 + tid) + tide.ones(7) end)\n"
  "  assert(not ok and err:find(('shapes %[' .. (2 + tid) .. '%] and %[7%]')), 'error: ' .. tostring(err))\n"
  "  if it % 4 == 0 then collectgarbage() end\n"
  "end\n"
  "return 'done'\n";

static const char *lua_path;
static int iters = 10;

static void *run(void *arg)
{
  int tid = (int)(intptr_t)arg;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_pushstring(L, lua_path);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  int rc = luaL_loadstring(L, chunk);
  if (!rc) { lua_pushinteger(L, tid); lua_pushinteger(L, iters); rc = lua_pcall(L, 2, 1, 0); }
  const char *r = lua_tostring(L, -1);
  check(rc == 0 && r && !strcmp(r, "done"), tid, "a lua_State with tide", r);
  lua_close(L);
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc > 1) iters = atoi(argv[1]);
  lua_path = getenv("LUA_PATH") ? getenv("LUA_PATH") : "./lua/?.lua;./lua/?/init.lua";
  pthread_t th[NTHREADS];
  for (int t = 0; t < NTHREADS; t++) pthread_create(&th[t], NULL, run, (void *)(intptr_t)t);
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  printf("%s %d checks, %d failed, %d lua_States x %d iterations\n", nfail ? "not ok" : "ok", atomic_load(&ncheck),
         atomic_load(&nfail), NTHREADS, iters);
  return nfail ? 1 : 0;
}
#endif
