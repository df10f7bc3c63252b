/*
** cg_test.c -- driver for spec/jit/cg_spec.lua: builds kernels by hand in the
** kernel IR (cg.h), compiles them as one batch, runs them on the thread pool
** and compares with plain C loops. Prints "ok N - what" / "not ok N - what: why".
**   cg_test            all tests, then a "stats ..." line (cg_stats)
**   cg_test csrc F     also writes the C text of every kernel to F
**   cg_test bench      timings (sin^2+cos^2 flat 2^24, softmax 4096^2, compile)
*/
#include "cg.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* -- Kernel builder -------------------------------------------------------------- */

typedef struct { CgKernel *k; int pass, npass; } KB;   /* pass: current pass, -1 = row level */

static KB kb_new(int nbuf, const int8_t *dts, int nouter, const int64_t *osize, int64_t inner, int64_t flat, int nargs)
{
  CgKernel *k = calloc(1, sizeof *k);
  k->nbuf = nbuf;
  memcpy(k->buf_dtype, dts, nbuf);
  k->nouter = nouter;
  for (int d = 0; d < nouter; d++) k->osize[d] = osize[d];
  k->inner = inner; k->flat = flat; k->nargs = nargs;
  k->acc = calloc(64, sizeof *k->acc);
  k->ins = calloc(1024, sizeof *k->ins);
  return (KB){ k, -1, 0 };
}
static int A(KB *b, int buf, int64_t off, const int64_t *ostr, int64_t istr)
{
  CgAccess *a = &b->k->acc[b->k->nacc];
  a->buf = buf; a->offset = off; a->istride = istr;
  for (int d = 0; d < b->k->nouter; d++) a->ostride[d] = ostr ? ostr[d] : 0;
  return b->k->nacc++;
}
static int I(KB *b, int kind, int op, int dt, int a, int bb, int c, int acc)
{
  CgIns *in = &b->k->ins[b->k->nins];
  in->kind = kind; in->op = op; in->dtype = dt; in->a = a; in->b = bb; in->c = c; in->acc = acc;
  in->level = b->pass >= 0 && kind != CG_CONST && kind != CG_ARG && kind != CG_PASS && kind != CG_ENDPASS;
  in->pass = b->pass >= 0 ? b->pass : 0;
  return b->k->nins++;
}
static void PASS(KB *b) { b->pass = b->npass++; I(b, CG_PASS, 0, 0, -1, -1, -1, -1); }
static void ENDP(KB *b) { I(b, CG_ENDPASS, 0, 0, -1, -1, -1, -1); b->pass = -1; }
static int K(KB *b, int dt, double x) { int i = I(b, CG_CONST, 0, dt, -1, -1, -1, -1); b->k->ins[i].f[0] = x; return i; }
static int ARG(KB *b, int dt, int idx) { return I(b, CG_ARG, 0, dt, -1, -1, -1, idx); }
static int LD(KB *b, int acc, int dt) { return I(b, CG_LOAD, 0, dt, -1, -1, -1, acc); }
static void ST(KB *b, int acc, int v) { I(b, CG_STORE, 0, b->k->ins[v].dtype, v, -1, -1, acc); }
static int U(KB *b, int op, int dt, int a) { return I(b, CG_ALU, op, dt, a, -1, -1, -1); }
static int B(KB *b, int op, int dt, int a, int c) { return I(b, CG_ALU, op, dt, a, c, -1, -1); }
static int W3(KB *b, int dt, int c, int x, int y) { return I(b, CG_ALU, RT_OP_WHERE, dt, c, x, y, -1); }
static int RED(KB *b, int op, int dt, int a) { return I(b, CG_RED, op, dt, a, -1, -1, -1); }
static CgKernel *kb_done(KB *b, const char *hint) { cg_kernel_finish(b->k, hint); return b->k; }

/* -- Reporting -------------------------------------------------------------------- */

static int ntest, nfail;
static void report(int ok, const char *what, const char *why)
{
  ntest++;
  if (ok) printf("ok %d - %s\n", ntest, what);
  else { nfail++; printf("not ok %d - %s: %s\n", ntest, what, why); }
}
/* relative+absolute closeness; NaNs must match */
static int close_d(double got, double want, double tol)
{
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}
static void check_f(const char *what, const float *got, const float *want, int64_t n, double tol)
{
  char why[160] = "";
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++)
    if (!close_d(got[i], want[i], tol)) {
      ok = 0; snprintf(why, sizeof why, "element %lld: got %.9g want %.9g", (long long)i, got[i], want[i]);
    }
  report(ok, what, why);
}
static void check_d(const char *what, const double *got, const double *want, int64_t n, double tol)
{
  char why[160] = "";
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++)
    if (!close_d(got[i], want[i], tol)) {
      ok = 0; snprintf(why, sizeof why, "element %lld: got %.17g want %.17g", (long long)i, got[i], want[i]);
    }
  report(ok, what, why);
}
static void check_i(const char *what, const int64_t *got, const int64_t *want, int64_t n)
{
  char why[160] = "";
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++)
    if (got[i] != want[i]) { ok = 0; snprintf(why, sizeof why, "element %lld: got %lld want %lld", (long long)i,
                                              (long long)got[i], (long long)want[i]); }
  report(ok, what, why);
}

static uint32_t rng = 12345;
static float frand(float lo, float hi) { rng = rng * 1664525u + 1013904223u; return lo + (hi - lo) * (rng >> 8) / 16777216.0f; }
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec * 1e-6; }

/* -- Reference semantics (rt_ew.c, rt_red.c) ----------------------------------------------- */

enum { NU = 24 };
static const int un_op[NU] = { RT_OP_NEG, RT_OP_ABS, RT_OP_SIGN, RT_OP_EXP, RT_OP_LOG, RT_OP_LOG1P, RT_OP_EXPM1,
  RT_OP_SQRT, RT_OP_RSQRT, RT_OP_SIN, RT_OP_COS, RT_OP_TAN, RT_OP_TANH, RT_OP_SIGMOID, RT_OP_RELU, RT_OP_GELU,
  RT_OP_GELU, RT_OP_SILU, RT_OP_ERF, RT_OP_FLOOR, RT_OP_CEIL, RT_OP_ROUND, RT_OP_CLAMP, RT_OP_CLAMP };
static const int un_flags[NU] = { [16] = 1, [22] = 6, [23] = 2 };
static double un_ref(int u, double x, int f32)
{
  switch (u) {
  case 0: return -x;
  case 1: return x < 0 ? -x : x;
  case 2: return (x > 0) - (x < 0);
  case 3: return f32 ? expf(x) : exp(x);
  case 4: return f32 ? logf(x) : log(x);
  case 5: return f32 ? log1pf(x) : log1p(x);
  case 6: return f32 ? expm1f(x) : expm1(x);
  case 7: return f32 ? sqrtf(x) : sqrt(x);
  case 8: return f32 ? 1.0f / sqrtf(x) : 1.0 / sqrt(x);
  case 9: return f32 ? sinf(x) : sin(x);
  case 10: return f32 ? cosf(x) : cos(x);
  case 11: return f32 ? tanf(x) : tan(x);
  case 12: return f32 ? tanhf(x) : tanh(x);
  case 13: return f32 ? 1.0f / (1.0f + expf(-x)) : 1.0 / (1.0 + exp(-x));
  case 14: return x > 0 ? x : 0;
  case 15: return f32 ? 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)) : 0.5 * x * (1.0 + erf(x * M_SQRT1_2));
  case 16: return f32 ? 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)))
                      : 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  case 17: return f32 ? x / (1.0f + expf(-x)) : x / (1.0 + exp(-x));
  case 18: return f32 ? erff(x) : erf(x);
  case 19: return floor(x);
  case 20: return ceil(x);
  case 21: return rint(x);
  case 22: return x > 2.5 ? 2.5 : x < -1.5 ? -1.5 : x;
  default: return x < -1.5 ? -1.5 : x;
  }
}
enum { NB = 13 };   /* add sub mul div pow pow2 min max | eq ne lt le gt ge(bool) and/or/where after */
static const int bin_op[NB] = { RT_OP_ADD, RT_OP_SUB, RT_OP_MUL, RT_OP_DIV, RT_OP_POW, RT_OP_MINIMUM, RT_OP_MAXIMUM,
  RT_OP_EQ, RT_OP_NE, RT_OP_LT, RT_OP_LE, RT_OP_GT, RT_OP_GE };
static double bin_ref(int o, double x, double y, int f32)
{
  switch (o) {
  case 0: return x + y;
  case 1: return x - y;
  case 2: return x * y;
  case 3: return x / y;
  case 4: return y == 2 ? x * x : f32 ? powf(x, y) : pow(x, y);
  case 5: return x < y ? x : (y < x ? y : (x != x ? x : y));
  case 6: return x > y ? x : (y > x ? y : (x != x ? x : y));
  case 7: return x == y;
  case 8: return x != y;
  case 9: return x < y;
  case 10: return x <= y;
  case 11: return x > y;
  default: return x >= y;
  }
}
static const float specials[] = { NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 1e30f, -1e30f,
                                  1e-30f, 3.0f, -1.0f, 1.0f, 2.0f, 16777216.0f, -3.5f, 0.49999997f };
#define NSPEC ((int)(sizeof specials / sizeof specials[0]))

/* -- Kernels ---------------------------------------------------------------------- */

/* flat elementwise: y = sin(x)^2 + cos(x)^2 */
static CgKernel *k_sincos(int64_t n, int64_t inner)
{
  int8_t d[2] = { TD_FLOAT32, TD_FLOAT32 };
  KB b = kb_new(2, d, 0, NULL, inner, n, 0);
  int ax = A(&b, 0, 0, NULL, 1), ay = A(&b, 1, 0, NULL, 1);
  PASS(&b);
  int x = LD(&b, ax, TD_FLOAT32), s = U(&b, RT_OP_SIN, TD_FLOAT32, x), c = U(&b, RT_OP_COS, TD_FLOAT32, x);
  ST(&b, ay, B(&b, RT_OP_ADD, TD_FLOAT32, B(&b, RT_OP_MUL, TD_FLOAT32, s, s), B(&b, RT_OP_MUL, TD_FLOAT32, c, c)));
  ENDP(&b);
  return kb_done(&b, "sincos");
}

/* flat y = exp(x) or erf(x), float32 (the inline vector expf and erff of cg_vmath.h) */
static CgKernel *k_math(int op, int64_t n)
{
  int8_t d[2] = { TD_FLOAT32, TD_FLOAT32 };
  KB b = kb_new(2, d, 0, NULL, 1 << 14, n, 0);
  int ax = A(&b, 0, 0, NULL, 1), ay = A(&b, 1, 0, NULL, 1);
  PASS(&b);
  ST(&b, ay, U(&b, op, TD_FLOAT32, LD(&b, ax, TD_FLOAT32)));
  ENDP(&b);
  return kb_done(&b, op == RT_OP_EXP ? "exp" : "erf");
}

/* every unary float op, one output buffer each; scalar: an int64 value forces a scalar pass */
static CgKernel *k_unary(int dt, int scalar, int64_t n)
{
  int8_t d[CG_MAX_BUFS];
  int nb = 1 + NU + (scalar ? 2 : 0);
  for (int i = 0; i < nb; i++) d[i] = i > NU ? TD_INT64 : dt;
  KB b = kb_new(nb, d, 0, NULL, 256, n, 0);
  int ax = A(&b, 0, 0, NULL, 1);
  PASS(&b);
  int x = LD(&b, ax, dt);
  for (int u = 0; u < NU; u++) {
    int ao = A(&b, 1 + u, 0, NULL, 1), v = U(&b, un_op[u], dt, x);
    b.k->ins[v].flags = un_flags[u]; b.k->ins[v].f[0] = -1.5; b.k->ins[v].f[1] = 2.5;
    ST(&b, ao, v);
  }
  if (scalar) { int ai = A(&b, NU + 1, 0, NULL, 1), ao = A(&b, NU + 2, 0, NULL, 1);
                ST(&b, ao, B(&b, RT_OP_ADD, TD_INT64, LD(&b, ai, TD_INT64), K(&b, TD_INT64, 1))); }
  ENDP(&b);
  return kb_done(&b, scalar ? "unary_scalar" : "unary");
}

enum { NBX = 5 };   /* extras: and, or, where, x != 0 (cast to bool), float(x < y) */
static CgKernel *k_binary(int dt, int scalar, int64_t n)
{
  int8_t d[CG_MAX_BUFS];
  int nout = NB + NBX, nb = 2 + nout + (scalar ? 2 : 0);
  for (int i = 0; i < nb; i++) d[i] = dt;
  for (int o = 7; o < NB; o++) d[2 + o] = TD_BOOL;
  d[2 + NB] = d[2 + NB + 1] = d[2 + NB + 3] = TD_BOOL;
  if (scalar) d[nb - 2] = d[nb - 1] = TD_INT64;
  KB b = kb_new(nb, d, 0, NULL, 256, n, 0);
  int ax = A(&b, 0, 0, NULL, 1), ay = A(&b, 1, 0, NULL, 1);
  PASS(&b);
  int x = LD(&b, ax, dt), y = LD(&b, ay, dt), lt = -1, eq = -1;
  for (int o = 0; o < NB; o++) {
    int v = B(&b, bin_op[o], o >= 7 ? TD_BOOL : dt, x, y);
    if (o == 4) b.k->ins[v].op = RT_OP_POW;
    if (bin_op[o] == RT_OP_LT) lt = v;
    if (bin_op[o] == RT_OP_EQ) eq = v;
    ST(&b, A(&b, 2 + o, 0, NULL, 1), v);
  }
  int zero = K(&b, dt, 0);
  ST(&b, A(&b, 2 + NB, 0, NULL, 1), B(&b, RT_OP_LOGICAL_AND, TD_BOOL, lt, B(&b, RT_OP_GT, TD_BOOL, x, zero)));
  ST(&b, A(&b, 2 + NB + 1, 0, NULL, 1), B(&b, RT_OP_LOGICAL_OR, TD_BOOL, eq, B(&b, RT_OP_NE, TD_BOOL, y, zero)));
  ST(&b, A(&b, 2 + NB + 2, 0, NULL, 1), W3(&b, dt, lt, x, y));
  ST(&b, A(&b, 2 + NB + 3, 0, NULL, 1), U(&b, RT_OP_CAST, TD_BOOL, x));
  ST(&b, A(&b, 2 + NB + 4, 0, NULL, 1), U(&b, RT_OP_CAST, dt, lt));
  if (scalar) { int ai = A(&b, nb - 2, 0, NULL, 1), ao = A(&b, nb - 1, 0, NULL, 1);
                ST(&b, ao, B(&b, RT_OP_ADD, TD_INT64, LD(&b, ai, TD_INT64), K(&b, TD_INT64, 1))); }
  ENDP(&b);
  return kb_done(&b, scalar ? "binary_scalar" : "binary");
}

/* int32 ops (scalar passes): x, y, z(f32) -> 15 outputs */
enum { NI = 15 };
static const int8_t int_out_dt[NI] = { TD_INT32, TD_INT32, TD_INT32, TD_INT32, TD_INT32, TD_INT32, TD_INT32, TD_INT32,
  TD_INT32, TD_INT32, TD_BOOL, TD_BOOL, TD_FLOAT32, TD_INT32, TD_INT32 };
static CgKernel *k_int(int64_t n)
{
  int8_t d[3 + NI] = { TD_INT32, TD_INT32, TD_FLOAT32 };
  memcpy(d + 3, int_out_dt, NI);
  KB b = kb_new(3 + NI, d, 0, NULL, 128, n, 0);
  int ax = A(&b, 0, 0, NULL, 1), ay = A(&b, 1, 0, NULL, 1), az = A(&b, 2, 0, NULL, 1);
  PASS(&b);
  int x = LD(&b, ax, TD_INT32), y = LD(&b, ay, TD_INT32), z = LD(&b, az, TD_FLOAT32), i32 = TD_INT32;
  int v[NI];
  v[0] = B(&b, RT_OP_ADD, i32, x, y); v[1] = B(&b, RT_OP_SUB, i32, x, y); v[2] = B(&b, RT_OP_MUL, i32, x, y);
  v[3] = U(&b, RT_OP_NEG, i32, x); v[4] = U(&b, RT_OP_ABS, i32, x); v[5] = U(&b, RT_OP_SIGN, i32, x);
  v[6] = B(&b, RT_OP_MINIMUM, i32, x, y); v[7] = B(&b, RT_OP_MAXIMUM, i32, x, y); v[8] = B(&b, RT_OP_POW, i32, x, y);
  v[9] = U(&b, RT_OP_CLAMP, i32, x); b.k->ins[v[9]].flags = 6; b.k->ins[v[9]].f[0] = -3; b.k->ins[v[9]].f[1] = 7;
  v[10] = B(&b, RT_OP_LT, TD_BOOL, x, y); v[11] = B(&b, RT_OP_EQ, TD_BOOL, x, y);
  v[12] = U(&b, RT_OP_CAST, TD_FLOAT32, x); v[13] = U(&b, RT_OP_CAST, i32, z); v[14] = U(&b, RT_OP_CAST, i32, v[10]);
  for (int o = 0; o < NI; o++) ST(&b, A(&b, 3 + o, 0, NULL, 1), v[o]);
  ENDP(&b);
  return kb_done(&b, "int");
}

/* row reductions of x (R x C): sum, prod(1 + x/1000), max, min per row */
static CgKernel *k_red(int dt, int64_t R, int64_t C)
{
  int8_t d[5] = { dt, dt, dt, dt, dt };
  int64_t os[1] = { R }, xs[1] = { C }, one[1] = { 1 };
  KB b = kb_new(5, d, 1, os, C, 0, 0);
  int ax = A(&b, 0, 0, xs, 1);
  PASS(&b);
  int x = LD(&b, ax, dt);
  int q = B(&b, RT_OP_ADD, dt, K(&b, dt, 1), B(&b, RT_OP_MUL, dt, x, K(&b, dt, 0.001)));
  int r[4] = { RED(&b, RT_OP_SUM, dt, x), RED(&b, RT_OP_PROD, dt, q), RED(&b, RT_OP_MAX, dt, x), RED(&b, RT_OP_MIN, dt, x) };
  ENDP(&b);
  for (int j = 0; j < 4; j++) ST(&b, A(&b, 1 + j, 0, one, 0), r[j]);
  return kb_done(&b, dt == TD_FLOAT32 ? "red_f32" : "red_f64");
}
/* int32 rows: sum as int64, max */
static CgKernel *k_red_int(int64_t R, int64_t C)
{
  int8_t d[3] = { TD_INT32, TD_INT64, TD_INT32 };
  int64_t os[1] = { R }, xs[1] = { C }, one[1] = { 1 };
  KB b = kb_new(3, d, 1, os, C, 0, 0);
  int ax = A(&b, 0, 0, xs, 1);
  PASS(&b);
  int x = LD(&b, ax, TD_INT32);
  int s = RED(&b, RT_OP_SUM, TD_INT64, U(&b, RT_OP_CAST, TD_INT64, x)), m = RED(&b, RT_OP_MAX, TD_INT32, x);
  ENDP(&b);
  ST(&b, A(&b, 1, 0, one, 0), s); ST(&b, A(&b, 2, 0, one, 0), m);
  return kb_done(&b, "red_int");
}

/* softmax over rows: max pass, exp-sum pass (stores e), normalize pass */
static CgKernel *k_softmax(int64_t R, int64_t C)
{
  int8_t d[2] = { TD_FLOAT32, TD_FLOAT32 };
  int64_t os[1] = { R }, xs[1] = { C };
  KB b = kb_new(2, d, 1, os, C, 0, 0);
  int ax = A(&b, 0, 0, xs, 1), ay = A(&b, 1, 0, xs, 1), f = TD_FLOAT32;
  PASS(&b);
  int m = RED(&b, RT_OP_MAX, f, LD(&b, ax, f));
  ENDP(&b);
  PASS(&b);
  int e = U(&b, RT_OP_EXP, f, B(&b, RT_OP_SUB, f, LD(&b, ax, f), m));
  ST(&b, ay, e);
  int s = RED(&b, RT_OP_SUM, f, e);
  ENDP(&b);
  int inv = B(&b, RT_OP_DIV, f, K(&b, f, 1), s);
  PASS(&b);
  ST(&b, ay, B(&b, RT_OP_MUL, f, LD(&b, ay, f), inv));
  ENDP(&b);
  return kb_done(&b, "softmax");
}

/* y = x - mean(x) and z = (x - mean(x)) * w over rows of C (64-byte rows:
** every element store may bypass the cache) */
static CgKernel *k_center(int64_t R, int64_t C)
{
  int8_t d[4] = { TD_FLOAT32, TD_FLOAT32, TD_FLOAT32, TD_FLOAT32 };
  int64_t os[1] = { R }, xs[1] = { C };
  KB b = kb_new(4, d, 1, os, C, 0, 0);
  int ax = A(&b, 0, 0, xs, 1), ay = A(&b, 1, 0, xs, 1), az = A(&b, 2, 0, xs, 1), aw = A(&b, 3, 0, NULL, 1), f = TD_FLOAT32;
  PASS(&b);
  int s = RED(&b, RT_OP_SUM, f, LD(&b, ax, f));
  ENDP(&b);
  int m = B(&b, RT_OP_DIV, f, s, K(&b, f, (double)C));
  PASS(&b);
  int c = B(&b, RT_OP_SUB, f, LD(&b, ax, f), m);
  ST(&b, ay, c);
  ST(&b, az, B(&b, RT_OP_MUL, f, c, LD(&b, aw, f)));
  ENDP(&b);
  return kb_done(&b, "center");
}

/* out[i,j] = at[j*R + i] * bv[j] + c[i] over outer dims (2, R/2): strided, broadcast, hoisted loads */
static CgKernel *k_strided(int64_t R, int64_t C)
{
  int8_t d[4] = { TD_FLOAT32, TD_FLOAT32, TD_FLOAT32, TD_FLOAT32 };
  int64_t os[2] = { 2, R / 2 }, so[2] = { R / 2 * C, C }, sa[2] = { R / 2, 1 }, sc[2] = { R / 2, 1 };
  KB b = kb_new(4, d, 2, os, C, 0, 0);
  int ao = A(&b, 0, 0, so, 1), aa = A(&b, 1, 0, sa, R), ab = A(&b, 2, 0, NULL, 1), ac = A(&b, 3, 0, sc, 0), f = TD_FLOAT32;
  PASS(&b);
  ST(&b, ao, B(&b, RT_OP_ADD, f, B(&b, RT_OP_MUL, f, LD(&b, aa, f), LD(&b, ab, f)), LD(&b, ac, f)));
  ENDP(&b);
  return kb_done(&b, "strided");
}

/* y = x * args[0] + args[1] */
static CgKernel *k_args(int64_t n)
{
  int8_t d[2] = { TD_FLOAT32, TD_FLOAT32 };
  KB b = kb_new(2, d, 0, NULL, 512, n, 2);
  int ax = A(&b, 0, 0, NULL, 1), ay = A(&b, 1, 0, NULL, 1), f = TD_FLOAT32;
  int a0 = ARG(&b, f, 0), a1 = ARG(&b, f, 1);
  PASS(&b);
  ST(&b, ay, B(&b, RT_OP_ADD, f, B(&b, RT_OP_MUL, f, LD(&b, ax, f), a0), a1));
  ENDP(&b);
  return kb_done(&b, "args");
}

/* bool buffer in a vector pass: y = where(m, x, -x), z = !m */
static CgKernel *k_where(int64_t n)
{
  int8_t d[4] = { TD_BOOL, TD_FLOAT32, TD_FLOAT32, TD_BOOL };
  KB b = kb_new(4, d, 0, NULL, 256, n, 0);
  int am = A(&b, 0, 0, NULL, 1), ax = A(&b, 1, 0, NULL, 1), ay = A(&b, 2, 0, NULL, 1), az = A(&b, 3, 0, NULL, 1);
  PASS(&b);
  int m = LD(&b, am, TD_BOOL), x = LD(&b, ax, TD_FLOAT32);
  ST(&b, ay, W3(&b, TD_FLOAT32, m, x, U(&b, RT_OP_NEG, TD_FLOAT32, x)));
  ST(&b, az, U(&b, RT_OP_LOGICAL_NOT, TD_BOOL, m));
  ENDP(&b);
  return kb_done(&b, "where");
}

/* rows only (no pass): out[r] = a[r]*2 + 1 (f64), t[r] = int64(a[r]) */
static CgKernel *k_rowonly(int64_t N)
{
  int8_t d[3] = { TD_FLOAT64, TD_FLOAT64, TD_INT64 };
  int64_t os[1] = { N }, one[1] = { 1 };
  KB b = kb_new(3, d, 1, os, 1, 0, 0);
  int aa = A(&b, 0, 0, one, 0), ao = A(&b, 1, 0, one, 0), at = A(&b, 2, 0, one, 0), f = TD_FLOAT64;
  int a = LD(&b, aa, f);
  ST(&b, ao, B(&b, RT_OP_ADD, f, B(&b, RT_OP_MUL, f, a, K(&b, f, 2)), K(&b, f, 1)));
  ST(&b, at, U(&b, RT_OP_CAST, TD_INT64, a));
  return kb_done(&b, "rowonly");
}

/* -- Tests ------------------------------------------------------------------------ */

static void *xmalloc(size_t n) { void *p = calloc(1, n ? n : 1); if (!p) { fprintf(stderr, "oom\n"); exit(2); } return p; }

static void t_sincos(CgKernel *k, CgKernelFn fn)
{
  int64_t n = k->flat;
  float *x = xmalloc(n * 4), *y = xmalloc(n * 4), *r = xmalloc(n * 4);
  for (int64_t i = 0; i < n; i++) { x[i] = frand(-10, 10); float s = sinf(x[i]), c = cosf(x[i]); r[i] = s * s + c * c; }
  char *bufs[2] = { (char *)x, (char *)y };
  cg_kernel_run(k, fn, bufs, NULL);
  check_f("flat sin^2+cos^2 (vector pass, padded tail)", y, r, n, 1e-6);
  free(x); free(y); free(r);
}

/* vector expf against libm's expf, in ulps (the distance of the bit patterns),
** on a dense sample of every float in [-104, 89] (step 577 through the bit
** patterns, the sign's two halves) with every 37th value special: NaNs, the
** infinities, the overflow and underflow edges (so vectors mix the fast path
** and the full one) */
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static void t_exp(CgKernel *k, CgKernelFn fn)
{
  static const float sp[] = { NAN, -NAN, INFINITY, -INFINITY, 88.72283f, 88.722839f, 89.0f, 100.0f, 1e30f, -1e30f,
    -87.33654f, -87.3366f, -103.972076f, -103.972084f, -104.0f, -200.0f, 86.0f, -86.0f, 86.00001f, -86.00001f,
    0.0f, -0.0f, 1e-30f, -1e-45f, 0.34657359f, -0.34657359f };
  int64_t n = k->flat, nsp = sizeof sp / sizeof sp[0];
  float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
  uint32_t lo[2] = { 0x80000000u, f2u(0.0f) }, hi[2] = { f2u(-104.0f), f2u(89.0f) }, b = lo[0];
  for (int64_t i = 0, h = 0, s = 0; i < n; i++) {
    if (i % 37 == 0) { x[i] = sp[s++ % nsp]; continue; }
    x[i] = u2f(b);
    b = b + 577 > hi[h] ? (h = !h, lo[h] + (b % 577)) : b + 577;
  }
  char *bufs[2] = { (char *)x, (char *)y };
  cg_kernel_run(k, fn, bufs, NULL);
  int64_t worst = 0, wi = 0, nbad = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = expf(x[i]);
    int64_t e = isnan(want) ? (isnan(y[i]) ? 0 : INT64_MAX) : y[i] == want ? 0 : isinf(want) || isinf(y[i]) ? INT64_MAX
              : llabs((int64_t)f2u(y[i]) - (int64_t)f2u(want));
    if (e > 2) nbad++;
    if (e > worst) { worst = e; wi = i; }
  }
  char why[200];
  snprintf(why, sizeof why, "%lld values off by > 2 ulp; worst x=%a: got %a want %a", (long long)nbad, x[wi], y[wi], expf(x[wi]));
  report(worst <= 2, "float32 vector exp within 2 ulp of expf (dense sample of [-104, 89], specials)", why);
  fprintf(stderr, "vector expf: %lld values, max %lld ulp at x=%a\n", (long long)n, (long long)worst, x[wi]);
  free(x); free(y);
}

/* vector erff against libm's erff, in ulps, on every float whose bit pattern
** is a multiple of 613 (both signs: tiny, subnormal, the range edges), inf, NaN and the edges of the
** fast path */
static void t_erf(CgKernel *k, CgKernelFn fn)
{
  int64_t n = k->flat;
  float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
  static const float sp[] = { INFINITY, -INFINITY, NAN, -NAN, 3.67306232f, 3.6730621f, -3.67306232f, 0x1p-40f,
    0x1.fffffep-41f, -0x1p-40f, 0.0f, -0.0f, 1e-45f, 3.9192059f, 1e30f };
  int64_t nsp = sizeof sp / sizeof sp[0];
  for (int64_t i = 0; i < n; i++) x[i] = i < nsp ? sp[i] : u2f((uint32_t)(i / 2 * 613) | (i % 2 ? 0x80000000u : 0));
  char *bufs[2] = { (char *)x, (char *)y };
  cg_kernel_run(k, fn, bufs, NULL);
  int64_t worst = 0, wi = 0, nbad = 0, n1 = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = erff(x[i]);
    int64_t e = isnan(want) ? (isnan(y[i]) ? 0 : INT64_MAX) : y[i] == want ? 0 : fabsf(y[i]) > 1 || signbit(y[i]) != signbit(want)
              ? INT64_MAX : llabs((int64_t)(f2u(y[i]) & 0x7fffffff) - (int64_t)(f2u(want) & 0x7fffffff));
    if (e > 6) nbad++;
    if (e <= 1) n1++;
    if (e > worst) { worst = e; wi = i; }
  }
  char why[200];
  snprintf(why, sizeof why, "%lld values off by > 6 ulp; worst x=%a: got %a want %a", (long long)nbad, x[wi], y[wi], erff(x[wi]));
  report(worst <= 6 && n1 > n * 9 / 10, "float32 vector erf within 6 ulp of erff, 90% within 1 (every 613th float, NaN, inf)", why);
  fprintf(stderr, "vector erff: %lld values, max %lld ulp at x=%a, %.1f%% within 1 ulp\n", (long long)n, (long long)worst,
          x[wi], 100.0 * (double)n1 / (double)n);
  free(x); free(y);
}

static void t_unary(CgKernel *k, CgKernelFn fn, int dt, const char *what)
{
  int64_t n = k->flat, es = dt == TD_FLOAT32 ? 4 : 8;
  char *bufs[CG_MAX_BUFS];
  for (int i = 0; i < k->nbuf; i++) bufs[i] = xmalloc(n * 8);
  double *xd = xmalloc(n * 8);
  for (int64_t i = 0; i < n; i++) {
    xd[i] = i < NSPEC ? specials[i] : frand(-6, 6);
    if (dt == TD_FLOAT32) ((float *)bufs[0])[i] = (float)xd[i]; else ((double *)bufs[0])[i] = xd[i];
  }
  cg_kernel_run(k, fn, bufs, NULL);
  for (int u = 0; u < NU; u++) {
    char w[96];
    snprintf(w, sizeof w, "%s %s%s", what, rt_op_lname(un_op[u]), un_flags[u] == 1 ? "(tanh)" : un_flags[u] == 2 ? "(lo)" : "");
    char why[160] = "";
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
      double x = dt == TD_FLOAT32 ? (double)((float *)bufs[0])[i] : xd[i];
      double want = un_ref(u, x, dt == TD_FLOAT32), got = dt == TD_FLOAT32 ? ((float *)bufs[1 + u])[i] : ((double *)bufs[1 + u])[i];
      if (dt == TD_FLOAT32) want = (float)want;
      double tol = dt == TD_FLOAT32 ? 4e-6 : 1e-14;
      if (un_op[u] == RT_OP_TAN || un_op[u] == RT_OP_EXPM1 || un_op[u] == RT_OP_GELU) tol *= 4;
      if (!close_d(got, want, tol) && !(fabs(want) < 1e-30 && fabs(got) < 1e-30)) {
        ok = 0; snprintf(why, sizeof why, "x=%.9g: got %.17g want %.17g", x, got, want);
      }
    }
    report(ok, w, why);
  }
  (void)es;
  for (int i = 0; i < k->nbuf; i++) free(bufs[i]);
  free(xd);
}

static void t_binary(CgKernel *k, CgKernelFn fn, int dt, const char *what)
{
  int64_t n = k->flat;
  int f32 = dt == TD_FLOAT32;
  char *bufs[CG_MAX_BUFS];
  for (int i = 0; i < k->nbuf; i++) bufs[i] = xmalloc(n * 8);
  double *xs = xmalloc(n * 8), *ys = xmalloc(n * 8);
  for (int64_t i = 0; i < n; i++) {
    int64_t p = i < NSPEC * NSPEC ? i : -1;
    xs[i] = p >= 0 ? specials[p / NSPEC] : frand(-4, 4);
    ys[i] = p >= 0 ? specials[p % NSPEC] : (i % 7 == 0 ? xs[i] : frand(-4, 4));
    if (f32) { ((float *)bufs[0])[i] = xs[i]; ((float *)bufs[1])[i] = ys[i]; xs[i] = (float)xs[i]; ys[i] = (float)ys[i]; }
    else { ((double *)bufs[0])[i] = xs[i]; ((double *)bufs[1])[i] = ys[i]; }
  }
  cg_kernel_run(k, fn, bufs, NULL);
  static const char *xn[NBX] = { "logical_and", "logical_or", "where", "cast to bool", "cast from bool" };
  for (int o = 0; o < NB + NBX; o++) {
    char w[96], why[160] = "";
    snprintf(w, sizeof w, "%s %s", what, o < NB ? (o == 4 ? "pow" : rt_op_lname(bin_op[o])) : xn[o - NB]);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
      double x = xs[i], y = ys[i], want, got;
      int isb = (o >= 7 && o < NB) || o == NB || o == NB + 1 || o == NB + 3;
      if (o < NB) want = bin_ref(o, x, y, f32);
      else if (o == NB) want = x < y && x > 0;
      else if (o == NB + 1) want = x == y || y != 0;
      else if (o == NB + 2) want = x < y ? x : y;
      else if (o == NB + 3) want = x != 0;
      else want = x < y;
      if (f32 && !isb) want = (float)want;
      got = isb ? ((uint8_t *)bufs[2 + o])[i] : f32 ? ((float *)bufs[2 + o])[i] : ((double *)bufs[2 + o])[i];
      int same = isb ? got == want : close_d(got, want, f32 ? 4e-6 : 1e-14) && (got != 0 || signbit(got) == signbit(want) || o == 4);
      if (!same) { ok = 0; snprintf(why, sizeof why, "x=%.9g y=%.9g: got %.17g want %.17g", x, y, got, want); }
    }
    report(ok, w, why);
  }
  for (int i = 0; i < k->nbuf; i++) free(bufs[i]);
  free(xs); free(ys);
}

static int64_t ipow_ref(int64_t x, int64_t y)
{
  if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
  int64_t r = 1;
  while (y) { if (y & 1) r *= x; x *= x; y >>= 1; }
  return r;
}
static void t_int(CgKernel *k, CgKernelFn fn)
{
  int64_t n = k->flat;
  char *bufs[CG_MAX_BUFS];
  for (int i = 0; i < k->nbuf; i++) bufs[i] = xmalloc(n * 8);
  int32_t *x = (int32_t *)bufs[0], *y = (int32_t *)bufs[1];
  float *z = (float *)bufs[2];
  for (int64_t i = 0; i < n; i++) { x[i] = (int32_t)frand(-20, 20); y[i] = (int32_t)frand(-3, 6); z[i] = frand(-100, 100); }
  cg_kernel_run(k, fn, bufs, NULL);
  static const char *nm[NI] = { "add", "sub", "mul", "neg", "abs", "sign", "minimum", "maximum", "pow", "clamp",
                                "lt", "eq", "cast i32->f32", "cast f32->i32", "cast bool->i32" };
  for (int o = 0; o < NI; o++) {
    int64_t *got = xmalloc(n * 8), *want = xmalloc(n * 8);
    for (int64_t i = 0; i < n; i++) {
      int64_t a = x[i], b = y[i], w;
      switch (o) {
      case 0: w = a + b; break; case 1: w = a - b; break; case 2: w = a * b; break; case 3: w = -a; break;
      case 4: w = a < 0 ? -a : a; break; case 5: w = (a > 0) - (a < 0); break;
      case 6: w = a < b ? a : b; break; case 7: w = a > b ? a : b; break; case 8: w = (int32_t)ipow_ref(a, b); break;
      case 9: w = a > 7 ? 7 : a < -3 ? -3 : a; break; case 10: w = a < b; break; case 11: w = a == b; break;
      case 12: w = (int64_t)(float)a; break; case 13: w = (int32_t)z[i]; break; default: w = a < b; break;
      }
      want[i] = w;
      int dt = int_out_dt[o];
      got[i] = dt == TD_INT32 ? ((int32_t *)bufs[3 + o])[i] : dt == TD_BOOL ? ((uint8_t *)bufs[3 + o])[i]
             : (int64_t)((float *)bufs[3 + o])[i];
    }
    char w[64]; snprintf(w, sizeof w, "int32 %s (scalar pass)", nm[o]);
    check_i(w, got, want, n);
    free(got); free(want);
  }
  for (int i = 0; i < k->nbuf; i++) free(bufs[i]);
}

static void t_red(CgKernel *k, CgKernelFn fn, int dt)
{
  int64_t R = k->osize[0], C = k->inner;
  int f32 = dt == TD_FLOAT32;
  char *bufs[5];
  for (int i = 0; i < 5; i++) bufs[i] = xmalloc(R * C * 8);
  double *ref[4];
  for (int j = 0; j < 4; j++) ref[j] = xmalloc(R * 8);
  for (int64_t r = 0; r < R; r++) {
    double s = 0, p = 1, mx = -INFINITY, mn = INFINITY;
    for (int64_t c = 0; c < C; c++) {
      double v = frand(-1, 1);
      if (r == 3 && c == C / 2) v = NAN;
      if (r == 4 && c == 7) v = INFINITY;
      if (f32) { ((float *)bufs[0])[r * C + c] = v; v = (float)v; } else ((double *)bufs[0])[r * C + c] = v;
      double q = f32 ? (double)(1.0f + (float)v * 0.001f) : 1.0 + v * 0.001;
      s += v; p *= q;
      mx = (!(v <= mx) && mx == mx) ? v : mx; mn = (!(v >= mn) && mn == mn) ? v : mn;
    }
    ref[0][r] = s; ref[1][r] = p; ref[2][r] = mx; ref[3][r] = mn;
  }
  cg_kernel_run(k, fn, bufs, NULL);
  static const char *nm[4] = { "sum", "prod", "max", "min" };
  for (int j = 0; j < 4; j++) {
    double *got = xmalloc(R * 8);
    for (int64_t r = 0; r < R; r++) got[r] = f32 ? ((float *)bufs[1 + j])[r] : ((double *)bufs[1 + j])[r];
    char w[64]; snprintf(w, sizeof w, "%s row %s (vector lanes, NaN sticks)", f32 ? "float32" : "float64", nm[j]);
    check_d(w, got, ref[j], R, f32 ? 2e-6 : 1e-13);
    free(got);
  }
  for (int i = 0; i < 5; i++) free(bufs[i]);
  for (int j = 0; j < 4; j++) free(ref[j]);
}

static void t_red_int(CgKernel *k, CgKernelFn fn)
{
  int64_t R = k->osize[0], C = k->inner;
  int32_t *x = xmalloc(R * C * 4);
  int64_t *s = xmalloc(R * 8), *ws = xmalloc(R * 8), *wm = xmalloc(R * 8), *gm = xmalloc(R * 8);
  int32_t *m = xmalloc(R * 4);
  for (int64_t r = 0; r < R; r++) {
    ws[r] = 0; wm[r] = INT32_MIN;
    for (int64_t c = 0; c < C; c++) {
      int32_t v = (int32_t)frand(-2e9f, 2e9f);
      x[r * C + c] = v; ws[r] += v; wm[r] = v > wm[r] ? v : wm[r];
    }
  }
  char *bufs[3] = { (char *)x, (char *)s, (char *)m };
  cg_kernel_run(k, fn, bufs, NULL);
  for (int64_t r = 0; r < R; r++) gm[r] = m[r];
  check_i("int32 row sum as int64 (scalar pass)", s, ws, R);
  check_i("int32 row max (scalar pass)", gm, wm, R);
  free(x); free(s); free(ws); free(wm); free(gm); free(m);
}

static void t_softmax(CgKernel *k, CgKernelFn fn)
{
  int64_t R = k->osize[0], C = k->inner;
  float *x = xmalloc(R * C * 4), *y = xmalloc(R * C * 4), *w = xmalloc(R * C * 4);
  for (int64_t i = 0; i < R * C; i++) x[i] = frand(-8, 8);
  for (int64_t r = 0; r < R; r++) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; c++) m = x[r * C + c] > m ? x[r * C + c] : m;
    for (int64_t c = 0; c < C; c++) s += exp(x[r * C + c] - m);
    for (int64_t c = 0; c < C; c++) w[r * C + c] = exp(x[r * C + c] - m) / s;
  }
  char *bufs[2] = { (char *)x, (char *)y };
  cg_kernel_run(k, fn, bufs, NULL);
  check_f("softmax rows (max, exp-sum, normalize passes)", y, w, R * C, 1e-5);
  free(x); free(y); free(w);
}

/* Non-temporal stores (cg_test runs with TIDE_NT_BYTES=0: whenever the
** buffers allow): the kernel takes them, its results are right with 64-byte
** aligned buffers and with an output that is not (then it stores normally),
** and kernels that read an output back or store strided do not take them. */
static void t_nt(CgKernel *k, CgKernelFn fn, const CgKernel *soft, const CgKernel *strided)
{
  int64_t R = k->osize[0], C = k->inner;
  char *src = cg_kernel_c_source(k);
  report(k->ntrow == 2 * C * 4 && src && strstr(src, "vmovntps") && strstr(src, "sfence"),
         "row kernel storing whole 64-byte rows prints non-temporal stores", src ? "no vmovntps / sfence" : "no C text");
  free(src);
  report(soft->ntrow == 0 && strided->ntrow == 0, "no non-temporal stores into a buffer read back or strided",
         "ntrow set");
  float *x = aligned_alloc(64, R * C * 4), *w = aligned_alloc(64, C * 4), *wy = xmalloc(R * C * 4), *wz = xmalloc(R * C * 4);
  float *y = aligned_alloc(64, (R * C + 16) * 4), *z = aligned_alloc(64, R * C * 4);
  for (int64_t i = 0; i < R * C; i++) x[i] = frand(-4, 4);
  for (int64_t j = 0; j < C; j++) w[j] = frand(-1, 1);
  for (int64_t r = 0; r < R; r++) {
    float s = 0;
    for (int64_t j = 0; j < C; j++) s += x[r * C + j];
    float m = s / (float)C;
    for (int64_t j = 0; j < C; j++) { wy[r * C + j] = x[r * C + j] - m; wz[r * C + j] = (x[r * C + j] - m) * w[j]; }
  }
  for (int shift = 0; shift <= 1; shift++) {
    memset(y, 0, (R * C + 16) * 4); memset(z, 0, R * C * 4);
    char *bufs[4] = { (char *)x, (char *)(y + shift), (char *)z, (char *)w };
    cg_kernel_run(k, fn, bufs, NULL);
    check_f(shift ? "centered rows, output not 64-byte aligned (normal stores)" : "centered rows through non-temporal stores",
            y + shift, wy, R * C, 1e-4);
    check_f(shift ? "scaled rows next to an unaligned output" : "scaled rows through non-temporal stores", z, wz, R * C, 1e-4);
  }
  free(x); free(w); free(wy); free(wz); free(y); free(z);
}

static void t_strided(CgKernel *k, CgKernelFn fn)
{
  int64_t R = k->osize[0] * k->osize[1], C = k->inner;
  float *o = xmalloc(R * C * 4), *at = xmalloc(R * C * 4), *bv = xmalloc(C * 4), *c = xmalloc(R * 4), *w = xmalloc(R * C * 4);
  for (int64_t i = 0; i < R * C; i++) at[i] = frand(-1, 1);
  for (int64_t j = 0; j < C; j++) bv[j] = frand(-1, 1);
  for (int64_t i = 0; i < R; i++) c[i] = frand(-1, 1);
  for (int64_t i = 0; i < R; i++) for (int64_t j = 0; j < C; j++) w[i * C + j] = at[j * R + i] * bv[j] + c[i];
  char *bufs[4] = { (char *)o, (char *)at, (char *)bv, (char *)c };
  cg_kernel_run(k, fn, bufs, NULL);
  check_f("2-D strided + broadcast pointwise (2 outer dims)", o, w, R * C, 1e-6);
  free(o); free(at); free(bv); free(c); free(w);
}

static void t_args(CgKernel *k, CgKernelFn fn)
{
  int64_t n = k->flat;
  float *x = xmalloc(n * 4), *y = xmalloc(n * 4), *w = xmalloc(n * 4);
  for (int64_t i = 0; i < n; i++) x[i] = frand(-1, 1);
  char *bufs[2] = { (char *)x, (char *)y };
  for (int t = 0; t < 2; t++) {
    double args[2] = { t ? -3.5 : 2.0, t ? 0.25 : 1.0 };
    for (int64_t i = 0; i < n; i++) w[i] = x[i] * (float)args[0] + (float)args[1];
    cg_kernel_run(k, fn, bufs, args);
    check_f(t ? "dynamic args, second values" : "dynamic args", y, w, n, 1e-6);
  }
  free(x); free(y); free(w);
}

static void t_where(CgKernel *k, CgKernelFn fn)
{
  int64_t n = k->flat;
  uint8_t *m = xmalloc(n), *z = xmalloc(n);
  float *x = xmalloc(n * 4), *y = xmalloc(n * 4), *w = xmalloc(n * 4);
  int64_t *gz = xmalloc(n * 8), *wz = xmalloc(n * 8);
  for (int64_t i = 0; i < n; i++) { m[i] = frand(0, 1) < 0.5f; x[i] = frand(-1, 1); w[i] = m[i] ? x[i] : -x[i]; wz[i] = !m[i]; }
  char *bufs[4] = { (char *)m, (char *)x, (char *)y, (char *)z };
  cg_kernel_run(k, fn, bufs, NULL);
  for (int64_t i = 0; i < n; i++) gz[i] = z[i];
  check_f("where(bool buffer, x, -x) in a vector pass", y, w, n, 0);
  check_i("logical_not stored to a bool buffer", gz, wz, n);
  free(m); free(z); free(x); free(y); free(w); free(gz); free(wz);
}

static void t_rowonly(CgKernel *k, CgKernelFn fn)
{
  int64_t N = k->osize[0];
  double *a = xmalloc(N * 8), *o = xmalloc(N * 8), *w = xmalloc(N * 8);
  int64_t *t = xmalloc(N * 8), *wt = xmalloc(N * 8);
  for (int64_t i = 0; i < N; i++) { a[i] = frand(-100, 100); w[i] = a[i] * 2 + 1; wt[i] = (int64_t)a[i]; }
  char *bufs[3] = { (char *)a, (char *)o, (char *)t };
  cg_kernel_run(k, fn, bufs, NULL);
  check_d("row statements only (no pass)", o, w, N, 0);
  check_i("row-level cast float64 -> int64", t, wt, N);
  free(a); free(o); free(w); free(t); free(wt);
}

/* the same kernel on 1 and 2 threads: bitwise equal */
static void t_threads(CgKernel *k, CgKernelFn fn)
{
  int64_t R = k->osize[0], C = k->inner;
  char *bufs[5], *out1 = xmalloc(R * 8 * 4);
  for (int i = 0; i < 5; i++) bufs[i] = xmalloc(R * C * 8);
  for (int64_t i = 0; i < R * C; i++) ((float *)bufs[0])[i] = frand(-1, 1);
  td_set_num_threads(1);
  cg_kernel_run(k, fn, bufs, NULL);
  for (int j = 0; j < 4; j++) memcpy(out1 + j * R * 8, bufs[1 + j], R * 4);
  td_set_num_threads(2);
  cg_kernel_run(k, fn, bufs, NULL);
  int same = 1;
  for (int j = 0; j < 4; j++) same &= !memcmp(out1 + j * R * 8, bufs[1 + j], R * 4);
  report(same, "results do not depend on the thread count", "1 vs 2 threads differ");
  for (int i = 0; i < 5; i++) free(bufs[i]);
  free(out1);
}

/* -- Bench ------------------------------------------------------------------------- */

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double median_run(CgKernel *k, CgKernelFn fn, char **bufs)
{
  double t[5];
  cg_kernel_run(k, fn, bufs, NULL);   /* warm */
  for (int i = 0; i < 5; i++) { double t0 = now_ms(); cg_kernel_run(k, fn, bufs, NULL); t[i] = now_ms() - t0; }
  qsort(t, 5, sizeof t[0], cmp_d);
  printf("[min %.2f] ", t[0]);
  return t[2];
}

static int bench(void)
{
  const char *nt = getenv("CG_BENCH_THREADS");
  td_set_num_threads(nt ? atoi(nt) : 2);
  int64_t n = 1 << 24, R = 4096, C = 4096;
  CgKernel *ks[3] = { k_sincos(n, 1 << 14), k_softmax(R, C), k_red(TD_FLOAT32, R, C) };
  CgKernelFn fns[3];
  double t0 = now_ms();
  if (cg_compile(ks, 3, fns)) { printf("compile failed: %s\n", td_last_error()); return 1; }
  double tc = now_ms() - t0;
  CgStats st; cg_stats(&st);
  printf("compile batch of 3: %.1f ms (compiles=%lld disk_loads=%lld)\n", tc, (long long)st.compiles, (long long)st.disk_loads);
  float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
  for (int64_t i = 0; i < n; i++) x[i] = frand(-10, 10);
  char *b1[2] = { (char *)x, (char *)y };
  printf("sin^2+cos^2 flat 2^24 f32: %.2f ms (median of 5)\n", median_run(ks[0], fns[0], b1));
  printf("softmax 4096x4096 f32: %.2f ms (median of 5)\n", median_run(ks[1], fns[1], b1));
  char *b3[5] = { (char *)x, (char *)y, (char *)y + 4 * R, (char *)y + 8 * R, (char *)y + 12 * R };
  printf("row sum+prod+max+min 4096x4096 f32: %.2f ms (median of 5)\n", median_run(ks[2], fns[2], b3));
  return 0;
}

/* -- Main ----------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
  if (argc > 1 && !strcmp(argv[1], "bench")) return bench();
  setenv("TIDE_NT_BYTES", "0", 0);   /* every kernel that can store non-temporally does */
  const char *csrc = argc > 2 && !strcmp(argv[1], "csrc") ? argv[2] : NULL;
  enum { KSIN, KEXP, KERF, KUN32, KUN64, KUNS, KBIN32, KBIN64, KBINS, KINT, KRED32, KRED64, KREDI, KSOFT, KSTR, KARG, KWH, KROW, KNT, KN };
  CgKernel *ks[KN];
  ks[KSIN] = k_sincos(100003, 4096);
  ks[KEXP] = k_math(RT_OP_EXP, 4000037);
  ks[KERF] = k_math(RT_OP_ERF, 2 * (0x7f800001 / 613 + 1));
  ks[KUN32] = k_unary(TD_FLOAT32, 0, 1003); ks[KUN64] = k_unary(TD_FLOAT64, 0, 1003); ks[KUNS] = k_unary(TD_FLOAT32, 1, 1003);
  ks[KBIN32] = k_binary(TD_FLOAT32, 0, 1003); ks[KBIN64] = k_binary(TD_FLOAT64, 0, 1003); ks[KBINS] = k_binary(TD_FLOAT32, 1, 1003);
  ks[KINT] = k_int(1003);
  ks[KRED32] = k_red(TD_FLOAT32, 37, 1001); ks[KRED64] = k_red(TD_FLOAT64, 37, 1001); ks[KREDI] = k_red_int(9, 333);
  ks[KSOFT] = k_softmax(64, 1000); ks[KSTR] = k_strided(6, 37); ks[KARG] = k_args(5000);
  ks[KWH] = k_where(1003); ks[KROW] = k_rowonly(1000); ks[KNT] = k_center(67, 1040);
  CgKernelFn fns[KN], fns2[KN];
  double t0 = now_ms();
  int rc = cg_compile(ks, KN, fns);
  report(rc == 0, "compile a batch of kernels", td_last_error());
  if (rc) { printf("%s\n", td_last_error()); return 1; }
  fprintf(stderr, "batch of %d kernels: %.1f ms\n", KN, now_ms() - t0);
  t_sincos(ks[KSIN], fns[KSIN]);
  t_exp(ks[KEXP], fns[KEXP]);
  t_erf(ks[KERF], fns[KERF]);
  t_unary(ks[KUN32], fns[KUN32], TD_FLOAT32, "float32 vector");
  t_unary(ks[KUN64], fns[KUN64], TD_FLOAT64, "float64 vector");
  t_unary(ks[KUNS], fns[KUNS], TD_FLOAT32, "float32 scalar");
  t_binary(ks[KBIN32], fns[KBIN32], TD_FLOAT32, "float32 vector");
  t_binary(ks[KBIN64], fns[KBIN64], TD_FLOAT64, "float64 vector");
  t_binary(ks[KBINS], fns[KBINS], TD_FLOAT32, "float32 scalar");
  t_int(ks[KINT], fns[KINT]);
  t_red(ks[KRED32], fns[KRED32], TD_FLOAT32);
  t_red(ks[KRED64], fns[KRED64], TD_FLOAT64);
  t_red_int(ks[KREDI], fns[KREDI]);
  t_softmax(ks[KSOFT], fns[KSOFT]);
  t_strided(ks[KSTR], fns[KSTR]);
  t_args(ks[KARG], fns[KARG]);
  t_where(ks[KWH], fns[KWH]);
  t_rowonly(ks[KROW], fns[KROW]);
  t_nt(ks[KNT], fns[KNT], ks[KSOFT], ks[KSTR]);
  t_threads(ks[KRED32], fns[KRED32]);

  CgStats s0, s1;
  cg_stats(&s0);
  rc = cg_compile(ks, KN, fns2);
  cg_stats(&s1);
  int same = rc == 0 && s1.compiles == s0.compiles && s1.mem_hits == s0.mem_hits + KN;
  for (int i = 0; i < KN && same; i++) same = fns[i] == fns2[i];
  report(same, "a second compile of the batch is served from memory", "compiled again");

  /* an op the generators do not know fails by name, never aborts */
  {
    int8_t d[2] = { TD_FLOAT32, TD_FLOAT32 };
    KB b = kb_new(2, d, 0, NULL, 64, 64, 0);
    int ax = A(&b, 0, 0, NULL, 1), ay = A(&b, 1, 0, NULL, 1);
    PASS(&b);
    ST(&b, ay, U(&b, RT_OP_MATMUL, TD_FLOAT32, LD(&b, ax, TD_FLOAT32)));
    ENDP(&b);
    CgKernel *k = kb_done(&b, "bad");
    CgKernelFn f;
    int r = cg_compile(&k, 1, &f);
    report(r < 0 && strstr(td_last_error(), "NYI") && strstr(td_last_error(), "matmul"),
           "an unknown op fails loudly by name", td_last_error());
    report(cg_kernel_c_source(k) == NULL, "cg_kernel_c_source of an unknown op is NULL", "printed");
    cg_kernel_free(k); free(k);
  }
  /* a column sum in a kernel without its scratch buffer: invalid IR, an error naming it */
  {
    int8_t d[2] = { TD_FLOAT32, TD_FLOAT32 };
    int64_t os[1] = { 8 }, xs[1] = { 64 };
    KB b = kb_new(2, d, 1, os, 64, 0, 0);
    int ax = A(&b, 0, 0, xs, 1), ay = A(&b, 1, 0, NULL, 1);
    PASS(&b);
    I(&b, CG_CSUM, RT_OP_SUM, TD_FLOAT32, LD(&b, ax, TD_FLOAT32), -1, -1, ay);
    ENDP(&b);
    CgKernel *k = kb_done(&b, "bad_csum");
    CgKernelFn f;
    int r = cg_compile(&k, 1, &f);
    report(r < 0 && strstr(td_last_error(), "invalid kernel IR") && strstr(td_last_error(), "scratch"),
           "a column sum without its scratch buffer is invalid IR, named", td_last_error());
    cg_kernel_free(k); free(k);
  }

  FILE *f = csrc ? fopen(csrc, "w") : NULL;
  int okc = 1;
  for (int i = 0; i < KN; i++) {
    char *s = cg_kernel_c_source(ks[i]);
    okc &= s && strstr(s, ks[i]->name) != NULL;
    if (f && s) fputs(s, f);
    free(s);
  }
  if (f) fclose(f);
  report(okc, "cg_kernel_c_source prints every kernel", "missing");
  CgStats st;
  cg_stats(&st);
  printf("stats compiles=%lld disk_loads=%lld mem_hits=%lld kernels_compiled=%lld compile_ms=%.1f\n",
         (long long)st.compiles, (long long)st.disk_loads, (long long)st.mem_hits, (long long)st.kernels_compiled, st.compile_ms);
  fflush(stdout);     /* a sanitizer build's leak check ends the process without flushing stdio */
  for (int i = 0; i < KN; i++) { cg_kernel_free(ks[i]); free(ks[i]); }
  return nfail ? 1 : 0;
}
