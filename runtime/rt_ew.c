/*
** rt_ew.c -- elementwise ops: the broadcasting shape/dtype rule and the eager
** kernels. A call is flattened to at most TD_MAX_DIMS coalesced dims; chunks of
** the output's linear index range run on the thread pool, and each run along
** the innermost dim calls a typed loop with unit-stride / scalar fast paths
** that GCC vectorizes (libmvec supplies vector expf, logf, sinf, ...).
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>
#include <string.h>

/* Let the vectorizer call glibc's libmvec variants (glibc >= 2.35 has all of
** these); -fno-math-errno is set for this file by the Makefile. */
#define SIMD __attribute__((simd("notinbranch")))
SIMD float expf(float); SIMD float logf(float); SIMD float sinf(float); SIMD float cosf(float);
SIMD float tanf(float); SIMD float tanhf(float); SIMD float erff(float); SIMD float expm1f(float);
SIMD float log1pf(float); SIMD float powf(float, float);
SIMD double exp(double); SIMD double log(double); SIMD double sin(double); SIMD double cos(double);
SIMD double tan(double); SIMD double tanh(double); SIMD double erf(double); SIMD double expm1(double);
SIMD double log1p(double); SIMD double pow(double, double);

#define EW_GRAIN 32768

/* -- Meta ------------------------------------------------------------------------------------- */

#if RT_ISA_SHARED
int rt_meta_ew(RtCall *c)
{
  const char *name = rt_op_lname(c->op);
  if (c->op == RT_OP_CAST) {
    if (c->attrs.dtype < 0 || c->attrs.dtype >= TD_DTYPE__MAX)
      return rt_err(TD_ERR_DTYPE, "to: invalid dtype %d", c->attrs.dtype);
    c->scalar_type = c->attrs.dtype;
  }
  if (c->op == RT_OP_COPY) c->scalar_type = c->in[0]->scalar_type;
  if (c->op == RT_OP_WHERE && c->in[0]->scalar_type != TD_BOOL)
    return rt_err(TD_ERR_DTYPE, "where: condition must be a bool tensor, got %s", td_dtype_name(c->in[0]->scalar_type));
  if (c->op == RT_OP_CLAMP) {
    if (!(c->attrs.flags & 6)) return rt_err(TD_ERR_ARG, "clamp: at least one of min and max must be given");
    /* the bounds promote like wrapped numbers: an integer tensor clamped to 2.5 is float */
    for (int k = 0; k < 2; k++) {
      double v = c->attrs.s[k];
      if ((c->attrs.flags & (2 << k)) && !rt_is_float(c->cdtype) && !(v == floor(v) && fabs(v) < 9.007199254740992e15))
        c->cdtype = c->scalar_type = rt_default_float;
    }
  }
  if ((c->op == RT_OP_FMOD || c->op == RT_OP_REMAINDER) && !rt_is_float(c->cdtype) &&
      (c->in[1]->flags & TD_TF_WRAPPED_NUMBER) && rt_load(c->in[1]->ptr, c->in[1]->scalar_type) == 0)
    return rt_err(TD_ERR_ARG, "%s: integer division by zero", name);
  if (c->op == RT_OP_POW && !rt_is_float(c->cdtype) && (c->in[1]->flags & TD_TF_WRAPPED_NUMBER) &&
      rt_load(c->in[1]->ptr, c->in[1]->scalar_type) < 0)
    return rt_err(TD_ERR_ARG, "pow: integers to negative integer powers are not allowed (exponent %g; "
                  "convert the base to float first)", rt_load(c->in[1]->ptr, c->in[1]->scalar_type));
  c->ndim = c->in[0]->ndim;
  memcpy(c->sizes, c->in[0]->sizes, sizeof c->sizes);
  for (int i = 1; i < c->nin; i++)
    if (rt_broadcast(name, c->ndim, c->sizes, c->in[i]->ndim, c->in[i]->sizes, &c->ndim, c->sizes)) return TD_ERR_SHAPE;
  return 0;
}
#endif

/* -- Typed inner loops --------------------------------------------------------------------------- */

typedef void (*Loop1)(int64_t n, char *o, int64_t so, const char *a, int64_t sa, const td_attrs *at);
typedef void (*Loop2)(int64_t n, char *o, int64_t so, const char *a, int64_t sa, const char *b, int64_t sb);

/* unary: OT out type, T in type, expression of x */
#define LOOP1(fn, OT, T, expr) \
  static void fn(int64_t n, char *o_, int64_t so, const char *a_, int64_t sa, const td_attrs *at) { \
    typedef T elem_t; OT *o = (OT *)o_; const T *a = (const T *)a_; (void)at; \
    if (so == 1 && sa == 1) for (int64_t i = 0; i < n; i++) { T x = a[i]; o[i] = (OT)(expr); } \
    else for (int64_t i = 0; i < n; i++) { T x = a[i * sa]; o[i * so] = (OT)(expr); } }

#define LOOP2(fn, OT, T, expr) \
  static void fn(int64_t n, char *o_, int64_t so, const char *a_, int64_t sa, const char *b_, int64_t sb) { \
    OT *o = (OT *)o_; const T *a = (const T *)a_, *b = (const T *)b_; \
    if (so == 1 && sa == 1 && sb == 1) for (int64_t i = 0; i < n; i++) { T x = a[i], y = b[i]; o[i] = (OT)(expr); } \
    else if (so == 1 && sa == 1 && sb == 0) { T y = b[0]; for (int64_t i = 0; i < n; i++) { T x = a[i]; o[i] = (OT)(expr); } } \
    else if (so == 1 && sa == 0 && sb == 1) { T x = a[0]; for (int64_t i = 0; i < n; i++) { T y = b[i]; o[i] = (OT)(expr); } } \
    else for (int64_t i = 0; i < n; i++) { T x = a[i * sa], y = b[i * sb]; o[i * so] = (OT)(expr); } }

/* Transcendental loops (libm calls). libmvec's vector variants and the scalar
** libm functions may differ in the last bit, so every element goes through the
** same vectorized block of EW_BLK elements: a partial block and strided operands
** are staged through a buffer. Otherwise a value would depend on whether it fell
** into a vector body or a scalar remainder, i.e. on the chunk boundaries, i.e.
** on the thread count. EW_BLK is a multiple of every vector width. */
#define EW_BLK 64
#define LOOPT1(fn, T, expr) \
  static __attribute__((noinline)) void fn##_blk(T *restrict o, const T *restrict a) \
  { for (int i = 0; i < EW_BLK; i++) { T x = a[i]; o[i] = (expr); } } \
  static void fn(int64_t n, char *o_, int64_t so, const char *a_, int64_t sa, const td_attrs *at) { \
    T *o = (T *)o_; const T *a = (const T *)a_; T ib[EW_BLK], ob[EW_BLK]; (void)at; \
    for (int64_t i = 0; i < n; i += EW_BLK) { \
      int64_t m = n - i < EW_BLK ? n - i : EW_BLK, j; \
      if (m == EW_BLK && so == 1 && sa == 1) { fn##_blk(o + i, a + i); continue; } \
      for (j = 0; j < m; j++) ib[j] = a[(i + j) * sa]; \
      for (; j < EW_BLK; j++) ib[j] = 0; \
      fn##_blk(ob, ib); \
      for (j = 0; j < m; j++) o[(i + j) * so] = ob[j]; } }
#define LOOPT2(fn, T, expr) \
  static __attribute__((noinline)) void fn##_blk(T *restrict o, const T *restrict a, const T *restrict b) \
  { for (int i = 0; i < EW_BLK; i++) { T x = a[i], y = b[i]; o[i] = (expr); } } \
  static void fn(int64_t n, char *o_, int64_t so, const char *a_, int64_t sa, const char *b_, int64_t sb) { \
    T *o = (T *)o_; const T *a = (const T *)a_, *b = (const T *)b_; T ia[EW_BLK], ib[EW_BLK], ob[EW_BLK]; \
    for (int64_t i = 0; i < n; i += EW_BLK) { \
      int64_t m = n - i < EW_BLK ? n - i : EW_BLK, j; \
      if (m == EW_BLK && so == 1 && sa == 1 && sb == 1) { fn##_blk(o + i, a + i, b + i); continue; } \
      for (j = 0; j < m; j++) { ia[j] = a[(i + j) * sa]; ib[j] = b[(i + j) * sb]; } \
      for (; j < EW_BLK; j++) ia[j] = ib[j] = 1; \
      fn##_blk(ob, ia, ib); \
      for (j = 0; j < m; j++) o[(i + j) * so] = ob[j]; } }

/* Float unary ops: _(OP, float expr, double expr) */
#define EW_FLOAT1(_) \
  _(EXP, expf(x), exp(x)) \
  _(LOG, logf(x), log(x)) \
  _(LOG1P, log1pf(x), log1p(x)) \
  _(EXPM1, expm1f(x), expm1(x)) \
  _(SQRT, sqrtf(x), sqrt(x)) \
  _(RSQRT, 1.0f / sqrtf(x), 1.0 / sqrt(x)) \
  _(SIN, sinf(x), sin(x)) \
  _(COS, cosf(x), cos(x)) \
  _(TAN, tanf(x), tan(x)) \
  _(TANH, tanhf(x), tanh(x)) \
  _(SIGMOID, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + exp(-x))) \
  _(SILU, x / (1.0f + expf(-x)), x / (1.0 + exp(-x))) \
  _(ERF, erff(x), erf(x)) \
  _(GELU, 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)), 0.5 * x * (1.0 + erf(x * M_SQRT1_2)))

/* Unary ops on every numeric dtype: _(OP, expr for T) with float-specific forms where needed */
#define EW_ANY1(_) \
  _(NEG, -x) \
  _(ABS, x < 0 ? -x : x) \
  _(SIGN, (x > 0) - (x < 0)) \
  _(RELU, x > 0 ? x : 0) \
  _(CLAMP, ((at->flags & 4) && x > (elem_t)at->s[1]) ? (elem_t)at->s[1] : \
           ((at->flags & 2) && x < (elem_t)at->s[0]) ? \
             ((at->flags & 4) && at->s[0] > at->s[1] ? (elem_t)at->s[1] : (elem_t)at->s[0]) : x)

/* Binary ops on every numeric dtype */
#define EW_ANY2(_) \
  _(ADD, x + y) \
  _(SUB, x - y) \
  _(MUL, x * y) \
  _(MINIMUM, x < y ? x : (y < x ? y : (x != x ? x : y))) \
  _(MAXIMUM, x > y ? x : (y > x ? y : (x != x ? x : y)))
#define EW_CMP2(_) _(EQ, x == y) _(NE, x != y) _(LT, x < y) _(LE, x <= y) _(GT, x > y) _(GE, x >= y)

#define NUMTYPES(M, OP, E) M(OP, u8, uint8_t, E) M(OP, i32, int32_t, E) M(OP, i64, int64_t, E) \
                           M(OP, f32, float, E) M(OP, f64, double, E)

#define DEF_F1(OP, ef, ed) LOOPT1(l1_##OP##_f32, float, ef) LOOPT1(l1_##OP##_f64, double, ed)
EW_FLOAT1(DEF_F1)
/* gelu, tanh approximation (attrs.flags & 1) */
DEF_F1(GELU_TANH, 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))),
       0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))))
#define DEF_A1T(OP, sfx, T, E) LOOP1(l1_##OP##_##sfx, T, T, E)
#define DEF_A1(OP, E) NUMTYPES(DEF_A1T, OP, E)
EW_ANY1(DEF_A1)
#define DEF_A2T(OP, sfx, T, E) LOOP2(l2_##OP##_##sfx, T, T, E)
#define DEF_A2(OP, E) NUMTYPES(DEF_A2T, OP, E)
EW_ANY2(DEF_A2)
#define DEF_C2T(OP, sfx, T, E) LOOP2(l2_##OP##_##sfx, uint8_t, T, E)
#define DEF_C2(OP, E) NUMTYPES(DEF_C2T, OP, E) DEF_C2T(OP, b, uint8_t, E)
EW_CMP2(DEF_C2)
/* floor/ceil/round: identity on integers; round is half-to-even (rint) */
LOOP1(l1_FLOOR_f32, float, float, floorf(x)) LOOP1(l1_FLOOR_f64, double, double, floor(x))
LOOP1(l1_CEIL_f32, float, float, ceilf(x)) LOOP1(l1_CEIL_f64, double, double, ceil(x))
LOOP1(l1_ROUND_f32, float, float, rintf(x)) LOOP1(l1_ROUND_f64, double, double, rint(x))
/* pow: float via libm; integers by squaring (negative exponents give 0 except for |x| = 1) */
static inline int64_t ipow(int64_t x, int64_t y)
{
  if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
  int64_t r = 1;
  while (y) { if (y & 1) r *= x; x *= x; y >>= 1; }
  return r;
}
LOOPT2(l2_POW_f32, float, (y == 2.0f ? x * x : powf(x, y)))
LOOPT2(l2_POW_f64, double, (y == 2.0 ? x * x : pow(x, y)))
/* pow by a scalar exponent y (a Lua number, a 0-dim tensor): what PyTorch does,
** without a libm call for the common exponents (x^2 was a vector powf per
** element, whose libmvec form falls back to scalar powf for every vector with
** a negative lane: 8x slower than sin). y = 2: x*x and y = -1: 1/x (exact
** roundings, as pow should be); y = 3: x*x*x and y = -2: 1/(x*x) (<= 2 ulp);
** y = 0.5: sqrt, y = -0.5: 1/sqrt (correctly rounded, then <= 1 ulp), with
** pow's values at -0 and -inf; y = 1: x; y = 0: 1 (also at NaN, as pow).
** Other y: powf(|x|, y) (libmvec, every lane on its fast path), the sign
** restored for odd integer y and NaN for finite negative x and fractional y. */
#define POWS_FORMS(_, T, SQRT) \
  _(sq, T, x * x) \
  _(cube, T, x * x * x) \
  _(recip, T, (T)1 / x) \
  _(rsq, T, (T)1 / (x * x)) \
  _(sqrt, T, x == -(T)INFINITY ? (T)INFINITY : SQRT(x) + (T)0) \
  _(rsqrt, T, x == -(T)INFINITY ? (T)0 : (T)1 / (SQRT(x) + (T)0)) \
  _(one, T, ((void)x, (T)1)) \
  _(id, T, x)
#define DEF_POWS(form, T, expr) LOOP1(l1_pows_##form##_##T, T, T, expr)
POWS_FORMS(DEF_POWS, float, sqrtf)
POWS_FORMS(DEF_POWS, double, sqrt)
/* the general form: at->s[0] = y, at->flags = 1 odd integer y, 2 fractional y */
#define POWS_ANY(T, POW, COPYSIGN) ({ T r_ = POW(x < 0 ? -x : x, y); \
  (fl & 1) ? COPYSIGN(r_, x) : ((fl & 2) && x < 0 && x > -(T)INFINITY) ? (T)NAN : r_; })
#define DEF_POWS_ANY(T, POW, COPYSIGN) \
  static __attribute__((noinline)) void l1_pows_any_##T##_blk(T *restrict o, const T *restrict a, T y, int fl) \
  { for (int i = 0; i < EW_BLK; i++) { T x = a[i]; o[i] = POWS_ANY(T, POW, COPYSIGN); } } \
  static void l1_pows_any_##T(int64_t n, char *o_, int64_t so, const char *a_, int64_t sa, const td_attrs *at) { \
    T *o = (T *)o_; const T *a = (const T *)a_; T ib[EW_BLK], ob[EW_BLK], y = (T)at->s[0]; int fl = at->flags; \
    for (int64_t i = 0; i < n; i += EW_BLK) { \
      int64_t m = n - i < EW_BLK ? n - i : EW_BLK, j; \
      if (m == EW_BLK && so == 1 && sa == 1) { l1_pows_any_##T##_blk(o + i, a + i, y, fl); continue; } \
      for (j = 0; j < m; j++) ib[j] = a[(i + j) * sa]; \
      for (; j < EW_BLK; j++) ib[j] = 1; \
      l1_pows_any_##T##_blk(ob, ib, y, fl); \
      for (j = 0; j < m; j++) o[(i + j) * so] = ob[j]; } }
DEF_POWS_ANY(float, powf, copysignf)
DEF_POWS_ANY(double, pow, copysign)

/* The loop of x^y for a scalar y (attrs filled for the general form), or NULL
** when y is NaN (powf(1, NaN) is 1 but pow(-1, NaN) NaN: the tensor loop).
** rt_ewgrad.c's derivative of pow calls it too. */
Loop1 RT_ISA_FN(rt_pow_scalar_loop)(double y, int dt, td_attrs *at)
{
  bool f = dt == TD_FLOAT32;
  if (y != y) return NULL;
#define POWS_PICK(form) return f ? l1_pows_##form##_float : l1_pows_##form##_double
  if (y == 2) POWS_PICK(sq);
  if (y == 3) POWS_PICK(cube);
  if (y == -1) POWS_PICK(recip);
  if (y == -2) POWS_PICK(rsq);
  if (y == 0.5) POWS_PICK(sqrt);
  if (y == -0.5) POWS_PICK(rsqrt);
  if (y == 1) POWS_PICK(id);
  if (y == 0) POWS_PICK(one);
#undef POWS_PICK
  double yt = f ? (double)(float)y : y;
  bool integer = yt == floor(yt);
  at->s[0] = yt;
  at->flags = integer ? (fabs(yt) < 9007199254740992.0 && fmod(yt, 2) != 0) : 2;
  return f ? l1_pows_any_float : l1_pows_any_double;
}

LOOP2(l2_POW_u8, uint8_t, uint8_t, ipow(x, y))
LOOP2(l2_POW_i32, int32_t, int32_t, ipow(x, y))
LOOP2(l2_POW_i64, int64_t, int64_t, ipow(x, y))
/* atan2, hypot: libm. fmod: C's (the dividend's sign); remainder: the divisor's
** sign, fmod corrected as PyTorch's kernel (mod != 0 and signs differ: + y).
** Integers: a zero divisor is rejected before the loop (int_div_check); -1
** and 0 divide as 1 so INT_MIN % -1 cannot trap (x % +-1 is 0 either way). */
LOOPT2(l2_ATAN2_f32, float, atan2f(x, y)) LOOPT2(l2_ATAN2_f64, double, atan2(x, y))
LOOPT2(l2_HYPOT_f32, float, hypotf(x, y)) LOOPT2(l2_HYPOT_f64, double, hypot(x, y))
LOOPT2(l2_FMOD_f32, float, fmodf(x, y)) LOOPT2(l2_FMOD_f64, double, fmod(x, y))
#define REM_F(FM) ({ __typeof__(x) m_ = FM(x, y); (m_ != 0 && ((y < 0) != (m_ < 0))) ? m_ + y : m_; })
LOOPT2(l2_REMAINDER_f32, float, REM_F(fmodf)) LOOPT2(l2_REMAINDER_f64, double, REM_F(fmod))
#define IMOD(x, y) ((y) == 0 || (y) == (__typeof__(y))-1 ? 0 : (x) % (y))
#define IREM(x, y) ({ __typeof__(x) m_ = IMOD(x, y); (m_ != 0 && ((y < 0) != (m_ < 0))) ? m_ + y : m_; })
LOOP2(l2_FMOD_u8, uint8_t, uint8_t, IMOD(x, y)) LOOP2(l2_FMOD_i32, int32_t, int32_t, IMOD(x, y))
LOOP2(l2_FMOD_i64, int64_t, int64_t, IMOD(x, y))
LOOP2(l2_REMAINDER_u8, uint8_t, uint8_t, IMOD(x, y)) LOOP2(l2_REMAINDER_i32, int32_t, int32_t, IREM(x, y))
LOOP2(l2_REMAINDER_i64, int64_t, int64_t, IREM(x, y))
LOOP2(l2_DIV_f32, float, float, x / y)
LOOP2(l2_DIV_f64, double, double, x / y)
LOOP2(l2_AND_b, uint8_t, uint8_t, x && y)
LOOP2(l2_OR_b, uint8_t, uint8_t, x || y)
LOOP1(l1_NOT_b, uint8_t, uint8_t, !x)

/* conversions: every (out, in) dtype pair; bool out is x != 0 */
#define CASTTYPES(M, OSFX, OT) M(OSFX, OT, b, uint8_t) M(OSFX, OT, u8, uint8_t) M(OSFX, OT, i32, int32_t) \
                               M(OSFX, OT, i64, int64_t) M(OSFX, OT, f32, float) M(OSFX, OT, f64, double)
#define DEF_CAST(OSFX, OT, ISFX, IT) LOOP1(lc_##OSFX##_##ISFX, OT, IT, x)
#define DEF_CASTB(OSFX, OT, ISFX, IT) LOOP1(lc_##OSFX##_##ISFX, OT, IT, x != 0)
CASTTYPES(DEF_CASTB, b, uint8_t)
CASTTYPES(DEF_CAST, u8, uint8_t) CASTTYPES(DEF_CAST, i32, int32_t) CASTTYPES(DEF_CAST, i64, int64_t)
CASTTYPES(DEF_CAST, f32, float) CASTTYPES(DEF_CAST, f64, double)
#define CASTROW(OSFX) { lc_##OSFX##_b, lc_##OSFX##_u8, lc_##OSFX##_i32, lc_##OSFX##_i64, lc_##OSFX##_f32, lc_##OSFX##_f64 }
static const Loop1 cast_loops[TD_DTYPE__MAX][TD_DTYPE__MAX] = {   /* [out][in], ORDER DTYPE */
  CASTROW(b), CASTROW(u8), CASTROW(i32), CASTROW(i64), CASTROW(f32), CASTROW(f64)
};

/* Loop tables by dtype (ORDER DTYPE: bool, uint8, int32, int64, float32, float64) */
#define ROW_NUM1(OP) { NULL, l1_##OP##_u8, l1_##OP##_i32, l1_##OP##_i64, l1_##OP##_f32, l1_##OP##_f64 }
#define ROW_FLT1(OP) { NULL, NULL, NULL, NULL, l1_##OP##_f32, l1_##OP##_f64 }
#define ROW_NUM2(OP) { NULL, l2_##OP##_u8, l2_##OP##_i32, l2_##OP##_i64, l2_##OP##_f32, l2_##OP##_f64 }
#define ROW_CMP2(OP) { l2_##OP##_b, l2_##OP##_u8, l2_##OP##_i32, l2_##OP##_i64, l2_##OP##_f32, l2_##OP##_f64 }

static Loop1 loop1_for(int op, int dt, const td_attrs *at)
{
  switch (op) {
#define CASE_ANY1(OP, E) case RT_OP_##OP: { static const Loop1 r[] = ROW_NUM1(OP); return r[dt]; }
  EW_ANY1(CASE_ANY1)
#define CASE_F1(OP, ef, ed) case RT_OP_##OP: { static const Loop1 r[] = ROW_FLT1(OP); \
    if (RT_OP_##OP == RT_OP_GELU && (at->flags & 1)) { static const Loop1 rt[] = ROW_FLT1(GELU_TANH); return rt[dt]; } \
    return r[dt]; }
  EW_FLOAT1(CASE_F1)
  case RT_OP_FLOOR: case RT_OP_CEIL: case RT_OP_ROUND:
    if (!rt_is_float(dt)) return cast_loops[dt][dt];     /* identity copy */
    { static const Loop1 f[] = ROW_FLT1(FLOOR), c[] = ROW_FLT1(CEIL), r[] = ROW_FLT1(ROUND);
      return (op == RT_OP_FLOOR ? f : op == RT_OP_CEIL ? c : r)[dt]; }
  case RT_OP_LOGICAL_NOT: return l1_NOT_b;
  }
  return NULL;
}

static Loop2 loop2_for(int op, int dt)
{
  if (dt == TD_BOOL) {   /* bool arithmetic is logic, as in PyTorch */
    if (op == RT_OP_ADD || op == RT_OP_MAXIMUM || op == RT_OP_LOGICAL_OR) return l2_OR_b;
    if (op == RT_OP_MUL || op == RT_OP_MINIMUM || op == RT_OP_LOGICAL_AND) return l2_AND_b;
  }
  switch (op) {
#define CASE_ANY2(OP, E) case RT_OP_##OP: { static const Loop2 r[] = ROW_NUM2(OP); return r[dt]; }
  EW_ANY2(CASE_ANY2)
#define CASE_CMP2(OP, E) case RT_OP_##OP: { static const Loop2 r[] = ROW_CMP2(OP); return r[dt]; }
  EW_CMP2(CASE_CMP2)
  case RT_OP_POW: { static const Loop2 r[] = ROW_NUM2(POW); return r[dt]; }
  case RT_OP_FMOD: { static const Loop2 r[] = ROW_NUM2(FMOD); return r[dt]; }
  case RT_OP_REMAINDER: { static const Loop2 r[] = ROW_NUM2(REMAINDER); return r[dt]; }
  case RT_OP_ATAN2: { static const Loop2 r[] = { NULL, NULL, NULL, NULL, l2_ATAN2_f32, l2_ATAN2_f64 }; return r[dt]; }
  case RT_OP_HYPOT: { static const Loop2 r[] = { NULL, NULL, NULL, NULL, l2_HYPOT_f32, l2_HYPOT_f64 }; return r[dt]; }
  case RT_OP_DIV: { static const Loop2 r[] = { NULL, NULL, NULL, NULL, l2_DIV_f32, l2_DIV_f64 }; return r[dt]; }
  }
  return NULL;
}

/* -- The strided iterator ------------------------------------------------------------------------ */

#define EW_MAXOP RT_EW_MAXOP   /* out + 3 inputs */

typedef struct {
  int nd, nop;
  int64_t sizes[TD_MAX_DIMS];
  int64_t strides[EW_MAXOP][TD_MAX_DIMS];  /* elements; 0 on broadcast dims */
  char *ptr[EW_MAXOP];
  int esize[EW_MAXOP];
  const RtCall *c;
  td_attrs at;                             /* what a unary loop reads (the call's, or pow's exponent) */
  int kind;                                /* 1 unary, 2 binary, 3 where */
  Loop1 l1; Loop2 l2;
  bool nt;                                 /* a large result: streamed (rt_isa.h) */
} EwIter;

#if RT_ISA_SHARED
void rt_ew_dims(const td_tensor *out, int nin, td_tensor *const *in, int *ndp, int64_t *sizes,
                int64_t (*strides)[TD_MAX_DIMS])
{
  int nd = out->ndim, nop = nin + 1;
  int64_t st[EW_MAXOP][TD_MAX_DIMS], sz[TD_MAX_DIMS];
  for (int d = 0; d < nd; d++) { sz[d] = out->sizes[d]; st[0][d] = out->strides[d]; }
  for (int i = 0; i < nin; i++) {
    const td_tensor *t = in[i];
    for (int d = 0; d < nd; d++) {
      int td = d - (nd - t->ndim);
      st[i + 1][d] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td];
    }
  }
  /* drop size-1 dims and merge d into d-1 when every operand is contiguous across them */
  int m = 0;
  for (int d = 0; d < nd; d++) {
    if (sz[d] == 1) continue;
    if (m > 0) {
      bool merge = true;
      for (int k = 0; k < nop && merge; k++) merge = st[k][d] * sz[d] == strides[k][m - 1];
      if (merge) {
        sizes[m - 1] *= sz[d];
        for (int k = 0; k < nop; k++) strides[k][m - 1] = st[k][d];
        continue;
      }
    }
    sizes[m] = sz[d];
    for (int k = 0; k < nop; k++) strides[k][m] = st[k][d];
    m++;
  }
  if (m == 0) { sizes[0] = 1; for (int k = 0; k < nop; k++) strides[k][0] = 0; m = 1; }
  *ndp = m;
}
#endif

static void iter_init(EwIter *it, td_tensor *out, int nin, td_tensor *const *in)
{
  it->nop = nin + 1;
  it->ptr[0] = rt_ptr(out); it->esize[0] = rt_dtype_size(out->scalar_type);
  for (int i = 0; i < nin; i++) { it->ptr[i + 1] = rt_ptr(in[i]); it->esize[i + 1] = rt_dtype_size(in[i]->scalar_type); }
  rt_ew_dims(out, nin, in, &it->nd, it->sizes, it->strides);
}

static void where_loop(int64_t n, char *o, int64_t so, const char *c, int64_t sc, const char *a, int64_t sa,
                       const char *b, int64_t sb, int es)
{
  for (int64_t i = 0; i < n; i++)
    memcpy(o + i * so * es, c[i * sc] ? a + i * sa * es : b + i * sb * es, es);
}

/* n elements along the last dim from the operands at p */
static void iter_call(const EwIter *it, int64_t n, char *const *p)
{
  int last = it->nd - 1;
  if (it->kind == 1) it->l1(n, p[0], it->strides[0][last], p[1], it->strides[1][last], &it->at);
  else if (it->kind == 2) it->l2(n, p[0], it->strides[0][last], p[1], it->strides[1][last], p[2], it->strides[2][last]);
  else where_loop(n, p[0], it->strides[0][last], p[1], it->strides[1][last], p[2], it->strides[2][last],
                  p[3], it->strides[3][last], it->esize[0]);
}

/* A streamed run (unit-stride output): pieces of EW_NT bytes are computed
** into a cached buffer, then streamed to the output; a head up to the first
** vector boundary and a tail of less than a vector are written directly. */
#define EW_NT 16384
static void iter_stream(const EwIter *it, int64_t n, char **p)
{
  char buf[EW_NT] __attribute__((aligned(64)));
  int last = it->nd - 1, es = it->esize[0];
  int64_t mis = (int64_t)((uintptr_t)p[0] % RT_VEC_BYTES), head = 0;
  if (mis) head = (RT_VEC_BYTES - mis) % es ? n : (RT_VEC_BYTES - mis) / es;
  for (int64_t c = 0; c < n; ) {
    int64_t m = c < head ? head - c : n - c < EW_NT / es ? n - c : EW_NT / es;
    if (m > n - c) m = n - c;
    char *q[EW_MAXOP];
    for (int k = 0; k < it->nop; k++) q[k] = p[k] + c * it->strides[k][last] * it->esize[k];
    int64_t bytes = m * es / RT_VEC_BYTES * RT_VEC_BYTES;
    if (c < head || bytes == 0) iter_call(it, m, q);
    else {
      m = bytes / es;
      char *dst = q[0];
      q[0] = buf;
      iter_call(it, m, q);
      for (int64_t o = 0; o < bytes; o += RT_VEC_BYTES) rt_stream_vf((float *)(dst + o), (const float *)(buf + o));
    }
    c += m;
  }
}

static void iter_range(void *vit, int64_t begin, int64_t end)
{
  const EwIter *it = vit;
  int nd = it->nd, last = nd - 1;
  int64_t idx[TD_MAX_DIMS], rem = begin;
  for (int d = last; d >= 0; d--) { idx[d] = rem % it->sizes[d]; rem /= it->sizes[d]; }
  int64_t pos = begin;
  bool nt = it->nt && it->strides[0][last] == 1;
  while (pos < end) {
    int64_t run = it->sizes[last] - idx[last];
    if (run > end - pos) run = end - pos;
    char *p[EW_MAXOP];
    for (int k = 0; k < it->nop; k++) {
      int64_t off = 0;
      for (int d = 0; d < nd; d++) off += idx[d] * it->strides[k][d];
      p[k] = it->ptr[k] + off * it->esize[k];
    }
    if (nt) iter_stream(it, run, p); else iter_call(it, run, p);
    pos += run;
    idx[last] += run;
    for (int d = last; d > 0 && idx[d] == it->sizes[d]; d--) { idx[d] = 0; idx[d - 1]++; }
  }
  if (nt) rt_stream_end();
}

/* -- The kernel ---------------------------------------------------------------------------------- */

/* Integers to negative integer powers are an error, whether the exponent is a
** number (the meta's check) or a tensor (checked here, before anything is
** written): ipow would give 0 (or +-1), which PyTorch only does silently for
** tensor exponents. */
static int int_pow_check(td_tensor *e)
{
  td_tensor *ec = rt_as_contig(e);
  if (!ec) return TD_ERR_NOMEM;
  int64_t bad = 0;
  for (int64_t i = 0; i < ec->nelem && bad >= 0; i++)
    bad = ec->scalar_type == TD_INT32 ? ((const int32_t *)ec->ptr)[i] : ((const int64_t *)ec->ptr)[i];
  td_release(ec);
  if (bad < 0)
    return rt_err(TD_ERR_ARG, "pow: integers to negative integer powers are not allowed (exponent %lld; "
                  "convert the base to float first)", (long long)bad);
  return 0;
}

/* fmod/remainder of integers by a tensor: PyTorch raises on a zero divisor */
static int int_div_check(const char *name, td_tensor *d)
{
  td_tensor *dc = rt_as_contig(d);
  if (!dc) return TD_ERR_NOMEM;
  int64_t i = 0;
  for (; i < dc->nelem; i++)
    if (rt_load((const char *)dc->ptr + i * rt_dtype_size(dc->scalar_type), dc->scalar_type) == 0) break;
  int bad = i < dc->nelem;
  td_release(dc);
  return bad ? rt_err(TD_ERR_ARG, "%s: integer division by zero (divisor element %lld is 0)", name, (long long)i + 1) : 0;
}

int RT_ISA_FN(rt_kern_ew)(RtCall *c, td_tensor *out)
{
  const char *name = rt_op_lname(c->op);
  int op = c->op, cd = c->cdtype, rc = 0;
  td_tensor *in[3] = { 0 };
  EwIter it;
  memset(&it, 0, sizeof it);
  it.c = c;
  it.at = c->attrs;
  if (op == RT_OP_COPY || op == RT_OP_CAST) {
    in[0] = c->in[0]; td_retain(in[0]);
    it.kind = 1; it.l1 = cast_loops[out->scalar_type][in[0]->scalar_type];
  } else if (op == RT_OP_WHERE) {
    in[0] = c->in[0]; td_retain(in[0]);
    in[1] = rt_as_dtype(c->in[1], out->scalar_type); in[2] = rt_as_dtype(c->in[2], out->scalar_type);
    it.kind = 3;
  } else if (op == RT_OP_LOGICAL_NOT || op == RT_OP_LOGICAL_AND || op == RT_OP_LOGICAL_OR) {
    for (int i = 0; i < c->nin; i++) in[i] = rt_as_dtype(c->in[i], TD_BOOL);
    it.kind = c->nin;
    if (c->nin == 1) it.l1 = l1_NOT_b; else it.l2 = loop2_for(op, TD_BOOL);
  } else {
    for (int i = 0; i < c->nin; i++) in[i] = rt_as_dtype(c->in[i], cd);
    it.kind = c->nin;
    if (c->nin == 1) it.l1 = loop1_for(op, cd, &c->attrs); else it.l2 = loop2_for(op, cd);
    if ((c->nin == 1 && !it.l1) || (c->nin == 2 && !it.l2))
      rc = rt_err(TD_ERR_DTYPE, "%s: not supported for dtype %s", name, td_dtype_name(cd));
  }
  for (int i = 0; i < c->nin; i++) if (!in[i]) rc = TD_ERR_NOMEM;
  if (!rc && op == RT_OP_POW && (cd == TD_INT32 || cd == TD_INT64)) rc = int_pow_check(in[1]);
  if (!rc && (op == RT_OP_FMOD || op == RT_OP_REMAINDER) && !rt_is_float(cd)) rc = int_div_check(name, in[1]);
  int nin = c->nin;
  if (!rc && op == RT_OP_POW && rt_is_float(cd) && in[1]->nelem == 1 && in[0]->nelem == out->nelem) {
    /* a scalar exponent: a unary loop over x */
    Loop1 l = RT_ISA_FN(rt_pow_scalar_loop)(rt_load(rt_ptr(in[1]), cd), cd, &it.at);
    if (l) { it.kind = 1; it.l1 = l; nin = 1; }
  }
  if (!rc && out->nelem > 0) {
    iter_init(&it, out, nin, in);
    it.nt = rt_stream_rows(rt_cold(out), NULL, out->nelem * it.esize[0], 0);   /* iter_stream aligns */
    rt_parallel_for(out->nelem, EW_GRAIN, iter_range, &it);
  }
  for (int i = 0; i < c->nin; i++) td_release(in[i]);
  return rc;
}
