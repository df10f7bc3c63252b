/*
** rt_ewgrad.c -- eager derivatives of elementwise ops in one pass over memory.
** Autograd's rules (jit/jit_grad.c) compose each derivative from ops, i.e.
** 2-6 full passes (silu: sigmoid, sub, mul, add, mul, mul); when no graph of
** the gradient is recorded (create_graph off), the rule calls rt_ew_grad
** instead: the same arithmetic, op by op with the same roundings (this file
** is compiled with -ffp-contract=off), in one pass. The results are the
** composite's bits: transcendental calls go through the same vectorized
** block of EW_BLK elements as the forward kernels (rt_ew.c), whatever the
** chunking, so they also do not depend on the thread count.
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>
#include <string.h>

/* libm without errno (Makefile flags): GCC vectorizes through libmvec */
#define SIMD __attribute__((simd("notinbranch")))
SIMD float expf(float); SIMD float sinf(float); SIMD float cosf(float); SIMD float erff(float);
SIMD float tanhf(float);
SIMD double exp(double); SIMD double sin(double); SIMD double cos(double); SIMD double erf(double);
SIMD double tanh(double);

#define EW_BLK 64               /* rt_ew.c's block: a multiple of every vector width */
#define EW_GRAIN 32768

/* the forward's loops of x^y for a scalar y (rt_ew.c) */
typedef void (*Loop1)(int64_t n, char *o, int64_t so, const char *a, int64_t sa, const td_attrs *at);
Loop1 RT_ISA_FN(rt_pow_scalar_loop)(double y, int dt, td_attrs *at);

/* _(OP, expr of g, v and the scalar y) -- v is the saved input x or output y
** (the rule's choice, jit_grad.c); each expression is the rule's, op by op. */
#define GRAD_FORMS(_, T, F_EXP, F_SIN, F_COS, F_ERF, F_TANH) \
  _(SIN, g * F_COS(v)) \
  _(COS, -(g * F_SIN(v))) \
  _(TANH, g * ((T)1 - v * v)) \
  _(SIGMOID, g * (v * ((T)1 - v))) \
  _(SILU, ({ T s = (T)1 / ((T)1 + F_EXP(-v)); g * (s * (v * ((T)1 - s) + (T)1)); })) \
  _(RELU, v > 0 ? g : (T)0) \
  _(ERF, g * (F_EXP(-(v * v)) * (T)1.1283791670955126)) \
  _(SQRT, g / (v * (T)2)) \
  _(RSQRT, g * ((v * (v * v)) * (T)-0.5)) \
  _(TAN, g * (v * v + (T)1)) \
  _(LOG1P, g / (v + (T)1)) \
  _(EXPM1, g * (v + (T)1)) \
  /* gelu, erf form: Phi(x) + x phi(x) */ \
  _(GELU, g * ((F_ERF(v * (T)M_SQRT1_2) + (T)1) * (T)0.5 + v * (F_EXP(v * v * (T)-0.5) * (T)0.3989422804014327))) \
  /* gelu, tanh form: t = tanh(u), u = x (x^2 0.044715 + 1) sqrt(2/pi) */ \
  _(GELU_TANH, ({ T x2 = v * v, s = (T)0.7978845608028654; \
    T t = F_TANH(v * (x2 * (T)0.044715 + (T)1) * s); \
    g * ((t + (T)1) * (T)0.5 + v * (T)0.5 * (((T)1 - t * t) * ((x2 * (T)(3 * 0.044715) + (T)1) * s))); }))

/* the ops with a fused derivative (GELU's tanh form is flags & 1) */
#define GRAD_OPS(_) _(SIN) _(COS) _(TANH) _(SIGMOID) _(SILU) _(RELU) _(ERF) _(SQRT) _(RSQRT) _(TAN) \
  _(LOG1P) _(EXPM1) _(GELU)

typedef void (*GradBlk)(void *o, const void *g, const void *v, double y);

#define CAT3(a, b, c) a##b##c
#define BLKNAME(OP, sfx) CAT3(gb_, OP, sfx)
#define DEF_BLK(OP, expr) \
  static __attribute__((noinline)) void BLKNAME(OP, SFX)(void *o_, const void *g_, const void *v_, double y_) { \
    ELT *restrict o = o_; const ELT *restrict gp = g_, *restrict vp = v_; ELT y = (ELT)y_; (void)y; \
    for (int i = 0; i < EW_BLK; i++) { ELT g = gp[i], v = vp[i]; o[i] = (expr); } }
#define ELT float
#define SFX _f32
GRAD_FORMS(DEF_BLK, float, expf, sinf, cosf, erff, tanhf)
#undef ELT
#undef SFX
#define ELT double
#define SFX _f64
GRAD_FORMS(DEF_BLK, double, exp, sin, cos, erf, tanh)
#undef ELT
#undef SFX

/* pow by a scalar y: g * (y * t), t = x^(y-1) from the forward's loop */
static void gb_POW_f32(void *o_, const void *g_, const void *t_, double y_)
{ float *restrict o = o_; const float *restrict g = g_, *restrict t = t_; float y = (float)y_;
  for (int i = 0; i < EW_BLK; i++) o[i] = g[i] * (y * t[i]); }
static void gb_POW_f64(void *o_, const void *g_, const void *t_, double y)
{ double *restrict o = o_; const double *restrict g = g_, *restrict t = t_;
  for (int i = 0; i < EW_BLK; i++) o[i] = g[i] * (y * t[i]); }

typedef struct {
  char *o; const char *g, *v;
  int es, gbcast;               /* element size; g is one value broadcast */
  GradBlk blk;
  double y;                     /* pow: the exponent */
  Loop1 pow1; td_attrs pat;     /* pow: the loop of x^(y-1) */
} EwGrad;

/* Blocks of EW_BLK: full contiguous ones in place, a tail or a broadcast g
** staged through buffers (zero padded). */
static void grad_range(void *vj, int64_t b, int64_t e)
{
  const EwGrad *j = vj;
  _Alignas(64) double gb[EW_BLK], vb[EW_BLK], ob[EW_BLK], tb[EW_BLK];
  int es = j->es;
  if (j->gbcast) {
    for (int i = 0; i < EW_BLK; i++) {
      if (es == 8) gb[i] = *(const double *)j->g; else ((float *)gb)[i] = *(const float *)j->g;
    }
  }
  for (int64_t i = b; i < e; i += EW_BLK) {
    int64_t m = e - i < EW_BLK ? e - i : EW_BLK;
    const char *g = j->gbcast ? (const char *)gb : j->g + i * es, *v = j->v + i * es;
    char *o = j->o + i * es;
    if (m < EW_BLK) {
      memset(vb, 0, sizeof vb); memcpy(vb, v, (size_t)m * es); v = (const char *)vb;
      if (!j->gbcast) { memset(gb, 0, sizeof gb); memcpy(gb, g, (size_t)m * es); g = (const char *)gb; }
      o = (char *)ob;
    }
    if (j->pow1) { j->pow1(EW_BLK, (char *)tb, 1, v, 1, &j->pat); v = (const char *)tb; }
    j->blk(o, g, v, j->y);
    if (m < EW_BLK) memcpy(j->o + i * es, ob, (size_t)m * es);
  }
}

#if RT_ISA_SHARED
bool rt_ew_grad_fits(const td_tensor *g, const td_tensor *v)
{
  if (jit_tracing || g->device_type != TD_CPU || v->device_type != TD_CPU || !g->ptr || !v->ptr ||
      !rt_is_float(v->scalar_type) || g->scalar_type != v->scalar_type || g->ndim != v->ndim ||
      memcmp(g->sizes, v->sizes, (size_t)v->ndim * sizeof(int64_t)) || !rt_tensor_is_contig(v))
    return false;
  if (rt_tensor_is_contig(g)) return true;
  for (int d = 0; d < g->ndim; d++) if (g->strides[d] != 0 && g->sizes[d] > 1) return false;
  return true;                  /* one value broadcast (the gradient of a sum) */
}
#endif

td_tensor *RT_ISA_FN(rt_ew_grad)(int op, int flags, const td_tensor *g, const td_tensor *v, double y)
{
  int dt = v->scalar_type;
  bool f64 = dt == TD_FLOAT64;
  EwGrad j = { .es = rt_dtype_size(dt), .gbcast = !rt_tensor_is_contig(g) };
  switch (op) {
#define CASE(OP) case RT_OP_##OP: j.blk = f64 ? gb_##OP##_f64 : gb_##OP##_f32; break;
  GRAD_OPS(CASE)
#undef CASE
  case RT_OP_POW:
    j.blk = f64 ? gb_POW_f64 : gb_POW_f32;
    j.y = f64 ? y : (float)y;
    /* the rule's y - 1 is a double op; its result, cast, is the exponent */
    if (!(j.pow1 = RT_ISA_FN(rt_pow_scalar_loop)(f64 ? y - 1 : (float)(y - 1), dt, &j.pat))) return NULL;
    break;
  default:
    return rt_errp(TD_ERR_ARG, "%s: no fused derivative", rt_op_lname(op));
  }
  if (op == RT_OP_GELU && (flags & 1)) j.blk = f64 ? gb_GELU_TANH_f64 : gb_GELU_TANH_f32;
  td_tensor *o = rt_tensor_new(v->ndim, v->sizes, dt);
  if (!o) return NULL;
  j.o = rt_ptr(o); j.g = rt_ptr(g); j.v = rt_ptr(v);
  rt_parallel_for(v->nelem, EW_GRAIN, grad_range, &j);
  return o;
}
