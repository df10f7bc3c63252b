/*
** cl_red.c -- reductions (sum mean prod max min argmax argmin var std
** logsumexp norm) and the row-wise normalizers (softmax, log_softmax) on the
** OpenCL device: generated kernels, one program per (kernel family, dtypes),
** one work-item per output element (per row for softmax); results as the CPU's
** runtime/rt_red.c and rt_row.c.
*/

/*
** Design note. Every work-item folds all the reduced elements of one output in
** row-major order of the reduced dims, sequentially: no atomics, no partials,
** so results do not depend on the work-group size or the device. The order is
** also the one that defines indices: the position j of an element in that walk
** is its index along the dim (argmax(dim), max(dim)), or its flat index when
** every dim is reduced (argmax()), so strided inputs need no copy.
**
** Geometry (RedGeo, mirrored in the kernel source): kept dims (x and out
** strides) locate an output's first element; the reduced dims, size-1 dims
** dropped and neighbours merged where x is contiguous across them, are walked
** as rows (outer reduced dims) of K elements (the innermost one, stride ks).
**
** A program holds every kernel of a family (RED_KDEF) for one (input type,
** loop type): PoCL spends tens of ms per program build even from its disk cache.
**
** Semantics follow the CPU kernels: float inputs accumulate in double (in
** float on a device without cl_khr_fp64; float64 tensors are an error there),
** integer sum/prod in int64 with wrap-around, max/min in the input type with
** NaN sticking, arg reductions keep the first of ties and the first NaN;
** var/std and logsumexp take two passes over the elements (center, then the
** centered sum), logsumexp's exp in the element type as on the CPU.
*/
#include "cl.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* -- Geometry ---------------------------------------------------------------------------------- */

typedef struct RedGeo {
  cl_long nk, nr;                 /* kept dims; outer reduced dims */
  cl_long nout, nrow;             /* outputs (work-items); rows per output (product of rsz) */
  cl_long K, ks, ko;              /* innermost reduced dim: size, x stride, out stride (softmax) */
  cl_long xoff, ooff;             /* element offsets */
  cl_long ksz[TD_MAX_DIMS], kxs[TD_MAX_DIMS], kos[TD_MAX_DIMS];
  cl_long rsz[TD_MAX_DIMS], rxs[TD_MAX_DIMS];
} RedGeo;

/* The same struct and the walk, in OpenCL C. WALK(body) runs body for every
** reduced element of the output whose first element is at xb: v is the element
** (type DT), j its position in the walk. */
static const char red_head[] =
  "typedef struct { long nk, nr, nout, nrow, K, ks, ko, xoff, ooff;\n"
  "  long ksz[8], kxs[8], kos[8], rsz[8], rxs[8]; } RedGeo;\n"
  "#define RMAX(a, b) ((!((b) <= (a)) & ((a) == (a))) ? (b) : (a))\n"
  "#define RMIN(a, b) ((!((b) >= (a)) & ((a) == (a))) ? (b) : (a))\n"
  "#define BMAX(a, v) (!((v) <= (a)) & ((a) == (a)))\n"
  "#define BMIN(a, v) (!((v) >= (a)) & ((a) == (a)))\n"
  "/* x offset of output i's first element; its out offset into *ob */\n"
  "inline long red_item(const RedGeo *g, long i, long *ob) {\n"
  "  long xo = g->xoff, oo = g->ooff;\n"
  "  for (int d = (int)g->nk - 1; d >= 0; d--) { long s = g->ksz[d], q = i % s; i /= s; xo += q * g->kxs[d]; oo += q * g->kos[d]; }\n"
  "  *ob = oo; return xo;\n}\n"
  /* one macro argument, not a variadic one (OpenCL C has none: NVIDIA rejects
  ** them); every comma of a body sits inside parentheses */
  "#define WALK(BODY) for (long r = 0; r < g.nrow; r++) { long xo = xb, t = r; \\\n"
  "    for (int d = (int)g.nr - 1; d >= 0; d--) { xo += (t % g.rsz[d]) * g.rxs[d]; t /= g.rsz[d]; } \\\n"
  "    for (long kk = 0; kk < g.K; kk++) { DT v = (DT)x[xo + kk * g.ks]; long j = r * g.K + kk; (void)j; \\\n"
  "      BODY } }\n";

/* Append dim (size, x stride, out stride) to a list, merged into the previous
** entry when the list stays row-major over x and out (os NULL: no out strides). */
static void geo_push(cl_long *n, cl_long *sz, cl_long *xs, cl_long *os, int64_t s, int64_t x, int64_t o)
{
  int i = (int)*n - 1;
  if (i >= 0 && xs[i] == x * s && (!os || os[i] == o * s)) {
    sz[i] *= s; xs[i] = x; if (os) os[i] = o;
    return;
  }
  sz[++i] = s; xs[i] = x; if (os) os[i] = o;
  *n = i + 1;
}

/* Kept dims of x (with out's strides) and reduced dims `mask`; for softmax
** (row = dim d) the one reduced dim is d, with out's stride in ko. */
static void red_geo(RedGeo *g, const td_tensor *x, const td_tensor *out, uint32_t mask, int keepdim)
{
  cl_long rn = 0, rsz[TD_MAX_DIMS], rxs[TD_MAX_DIMS];
  memset(g, 0, sizeof *g);
  int od = 0;                     /* out's dim for x's dim d */
  for (int d = 0; d < x->ndim; d++) {
    bool red = mask >> d & 1;
    int64_t os = 0;
    if (!red || keepdim) os = out->strides[od++];
    if (x->sizes[d] == 1) continue;
    if (red) geo_push(&rn, rsz, rxs, NULL, x->sizes[d], x->strides[d], 0);
    else geo_push(&g->nk, g->ksz, g->kxs, g->kos, x->sizes[d], x->strides[d], os);
  }
  g->K = 1; g->nrow = 1;
  if (rn > 0) { g->K = rsz[rn - 1]; g->ks = rxs[rn - 1]; rn--; }
  g->nr = rn;
  for (int i = 0; i < rn; i++) { g->rsz[i] = rsz[i]; g->rxs[i] = rxs[i]; g->nrow *= rsz[i]; }
  g->nout = out->nelem; g->xoff = x->offset; g->ooff = out->offset;
}

/* -- Kernels ------------------------------------------------------------------------------------ */

/* Bodies over the walk: `a` is the result written to o[ob] (cast to OT);
** n = reduced count, corr = var's correction, p = norm's p (type ACC). */
#define DSUM(TERM, FIN) "ACC a = 0; WALK(a += " TERM ";) " FIN " o[ob] = (OT)a;"
/* var/std: the mean, then the centered sum of squares over max(n - corr, 0) */
#define B_VAR(FIN) "ACC c = 0; WALK(c += (ACC)v;) c /= n; ACC a = 0; WALK(ACC w = (ACC)v - c; a += w * w;) " \
                   "ACC dof = n - corr > 0 ? n - corr : 0; " FIN " o[ob] = (OT)a;"
/* value and index: ties keep the first, a NaN sticks (the first NaN wins) */
#define B_ARG(B) "DT a = 0; long ia = -1; WALK(if (" B "(a, v) | (ia < 0)) { a = v; ia = j; })"

/* _(NAME, family, out type, body). Families are programs, built once per
** (input type, loop type DT): F folds float DT in ACC, I is int64 sum/prod
** (wrapping), N works in the input's own type (max/min values, LO/HI its
** lowest/highest; arg and value+index forms). */
#define RED_KDEF(_) \
  _(sum,      F, "DT",   DSUM("(ACC)v", "")) \
  _(prod,     F, "DT",   "ACC a = 1; WALK(a *= (ACC)v;) o[ob] = (OT)a;") \
  _(mean,     F, "DT",   DSUM("(ACC)v", "a /= n;")) \
  _(norm2,    F, "DT",   DSUM("(ACC)v * (ACC)v", "a = sqrt(a);")) \
  _(norm1,    F, "DT",   DSUM("fabs((ACC)v)", "")) \
  _(norm0,    F, "DT",   DSUM("(ACC)((ACC)v != 0)", "")) \
  _(normp,    F, "DT",   DSUM("pow(fabs((ACC)v), p)", "a = pow(a, (ACC)1 / p);")) \
  _(norminf,  F, "DT",   "ACC a = 0; WALK(a = RMAX(a, fabs((ACC)v));) o[ob] = (OT)a;") \
  _(normninf, F, "DT",   "ACC a = INFINITY; WALK(a = RMIN(a, fabs((ACC)v));) o[ob] = (OT)a;") \
  _(var,      F, "DT",   B_VAR("a = a / dof;")) \
  _(std,      F, "DT",   B_VAR("a = sqrt(a / dof);")) \
  /* logsumexp: the max (infinities count as 0), then exp in the element type */ \
  _(lse,      F, "DT",   "ACC c = -INFINITY; WALK(c = RMAX(c, (ACC)v);) if (isinf(c)) c = 0; " \
                         "ACC a = 0; WALK(a += (ACC)exp(v - (DT)c);) a = log(a) + c; o[ob] = (OT)a;") \
  _(isum,     I, "long", "long a = 0; WALK(a = (long)((ulong)a + (ulong)v);) o[ob] = a;") \
  _(iprod,    I, "long", "long a = 1; WALK(a = (long)((ulong)a * (ulong)v);) o[ob] = a;") \
  _(max,      N, "DT",   "DT a = LO; WALK(a = RMAX(a, v);) o[ob] = a;") \
  _(min,      N, "DT",   "DT a = HI; WALK(a = RMIN(a, v);) o[ob] = a;") \
  _(argmax,   N, "long", B_ARG("BMAX") " o[ob] = ia;") \
  _(argmin,   N, "long", B_ARG("BMIN") " o[ob] = ia;") \
  _(maxi,     N, "DT",   B_ARG("BMAX") " o[ob] = a; ax[i] = ia;") \
  _(mini,     N, "DT",   B_ARG("BMIN") " o[ob] = a; ax[i] = ia;")

enum { RF_F, RF_I, RF_N };
enum {
#define RK_ENUM(NAME, F, OT, BODY) RK_##NAME,
  RED_KDEF(RK_ENUM)
#undef RK_ENUM
  RK__MAX
};
static const struct { const char *name; int family; const char *ot, *body; } red_kerns[RK__MAX] = {
#define RK_ROW(NAME, F, OT, BODY) { "k_" #NAME, RF_##F, OT, BODY },
  RED_KDEF(RK_ROW)
#undef RK_ROW
};

/* lowest and highest value of a dtype, in OpenCL C */
static const char *red_lo(int dt)
{
  switch (dt) {
  case TD_BOOL: case TD_UINT8: return "0";
  case TD_INT32: return "INT_MIN";
  case TD_INT64: return "LONG_MIN";
  }
  return "-INFINITY";
}

static const char *red_hi(int dt)
{
  switch (dt) {
  case TD_BOOL: case TD_UINT8: return "UCHAR_MAX";
  case TD_INT32: return "INT_MAX";
  case TD_INT64: return "LONG_MAX";
  }
  return "INFINITY";
}

/* "op: the OpenCL device has no float64" when any of the dtypes is float64 */
static int red_need_fp64(const char *name, int a, int b, int c)
{
  if ((a == TD_FLOAT64 || b == TD_FLOAT64 || c == TD_FLOAT64) && !cl_has_fp64())
    return rt_err(TD_ERR_DTYPE, "%s: the OpenCL device has no float64 (cl_khr_fp64)", name);
  return 0;
}

/* the accumulator of float folds: double where the device has it */
static const char *red_acc(void) { return cl_has_fp64() ? "double" : "float"; }

static int red_scalar_arg(cl_kernel k, int i, double v, const char *name)
{
  if (cl_has_fp64()) { cl_double d = v; return CL_ARGV(k, i, d, name); }
  cl_float f = (cl_float)v;
  return CL_ARGV(k, i, f, name);
}

/* -- Reductions ---------------------------------------------------------------------------------- */

/* Bit d set when dim d is reduced (attrs normalized by meta; ndims -1 = all). */
static uint32_t red_mask(const td_attrs *at, int nd)
{
  if (at->ndims < 0) return (1u << nd) - 1;
  uint32_t mask = 0;
  for (int i = 0; i < at->ndims; i++) if (at->dims[i] < nd) mask |= 1u << at->dims[i];
  return mask;   /* a 0-dim input reduced over "dim 0" reduces nothing */
}

/* The kernel for op (p = norm's p; idx: max/min also return indices). */
static int red_kind(int op, int dt, double p, bool idx)
{
  switch (op) {
  case RT_OP_SUM: return dt == TD_INT64 ? RK_isum : RK_sum;
  case RT_OP_PROD: return dt == TD_INT64 ? RK_iprod : RK_prod;
  case RT_OP_MEAN: return RK_mean;
  case RT_OP_MAX: return idx ? RK_maxi : RK_max;
  case RT_OP_MIN: return idx ? RK_mini : RK_min;
  case RT_OP_ARGMAX: return RK_argmax;
  case RT_OP_ARGMIN: return RK_argmin;
  case RT_OP_VAR: return RK_var;
  case RT_OP_STD: return RK_std;
  case RT_OP_LOGSUMEXP: return RK_lse;
  case RT_OP_NORM:
    return p == 2 ? RK_norm2 : p == 1 ? RK_norm1 : p == INFINITY ? RK_norminf : p == -INFINITY ? RK_normninf :
           p == 0 ? RK_norm0 : RK_normp;
  }
  return -1;
}

/* Kernel kk of the program of its family for input type xt and loop type dt. */
static cl_kernel red_kernel(int kk, int xt, int dt, const char *op)
{
  char src[16384];
  int f = red_kerns[kk].family;
  int n = snprintf(src, sizeof src, "#define XT %s\n#define DT %s\n#define ACC %s\n#define LO %s\n#define HI %s\n%s",
                   cl_type(xt), cl_type(dt), red_acc(), red_lo(dt), red_hi(dt), red_head);
  for (int i = 0; i < RK__MAX && n < (int)sizeof src; i++) {
    if (red_kerns[i].family != f) continue;
    n += snprintf(src + n, sizeof src - n,
                  "#undef OT\n#define OT %s\n"
                  "kernel void %s(global OT *o, global const XT *x, global long *ax, RedGeo g, ACC n, ACC corr, ACC p) {\n"
                  "  long i = get_global_id(0); if (i >= g.nout) return;\n"
                  "  long ob, xb = red_item(&g, i, &ob);\n  %s\n}\n", red_kerns[i].ot, red_kerns[i].name, red_kerns[i].body);
  }
  if (n >= (int)sizeof src) return rt_errp(TD_ERR_ARG, "%s: OpenCL kernel source too long", op);
  return cl_kernel_get(src, red_kerns[kk].name, op);
}

/* Reducing over nothing: the op's value on an empty set (max/min failed in meta). */
static int red_fill_empty(int op, td_tensor *out)
{
  double v = op == RT_OP_PROD ? 1 : op == RT_OP_LOGSUMEXP ? -INFINITY :
             (op == RT_OP_MEAN || op == RT_OP_VAR || op == RT_OP_STD) ? NAN : 0;
  return cl_fill(out, v);
}

/* out (+ c->aux for max/min along one dim) = op over the reduced dims of x */
int cl_kern_red(RtCall *c, td_tensor *out)
{
  int op = c->op, rc = 0;
  const char *name = rt_op_lname(op);
  const td_attrs *at = &c->attrs;
  td_tensor *x = c->in[0];
  uint32_t mask = red_mask(at, x->ndim);
  double n = 1;                   /* elements per output */
  for (int d = 0; d < x->ndim; d++) if (mask >> d & 1) n *= (double)x->sizes[d];
  /* max/min over one dim also return indices, unless values only (amax/amin) */
  bool idx = (op == RT_OP_MAX || op == RT_OP_MIN) && at->ndims == 1 && !(at->flags & 1);
  /* the dtype the loops read: the input's for max/min/arg, else the float compute type or int64 */
  bool native = op == RT_OP_MAX || op == RT_OP_MIN || op == RT_OP_ARGMAX || op == RT_OP_ARGMIN;
  int dt = native ? x->scalar_type : rt_is_float(c->cdtype) ? c->cdtype : TD_INT64;
  int kk = red_kind(op, dt, at->s[0], idx);
  if (kk < 0) return rt_err(TD_ERR_ARG, "%s: not a reduction", name);
  if ((rc = red_need_fp64(name, x->scalar_type, dt, out->scalar_type))) return rc;
  if (idx && !(c->aux = cl_tensor_new(out->ndim, out->sizes, TD_INT64))) return TD_ERR_NOMEM;
  if (out->nelem == 0) return 0;
  if (x->nelem == 0) rc = red_fill_empty(op, out);
  else {
    cl_kernel k = red_kernel(kk, x->scalar_type, dt, name);
    if (!k) rc = TD_ERR_DEVICE;
    RedGeo g;
    red_geo(&g, x, out, mask, at->keepdim);
    cl_mem ax = cl_buf(idx ? c->aux : x);
    if (!rc) rc = cl_arg(k, 0, sizeof(cl_mem), &(cl_mem){ cl_buf(out) }, name);
    if (!rc) rc = cl_arg(k, 1, sizeof(cl_mem), &(cl_mem){ cl_buf(x) }, name);
    if (!rc) rc = CL_ARGV(k, 2, ax, name);
    if (!rc) rc = CL_ARGV(k, 3, g, name);
    if (!rc) rc = red_scalar_arg(k, 4, n, name);
    if (!rc) rc = red_scalar_arg(k, 5, at->s[0], name);
    if (!rc) rc = red_scalar_arg(k, 6, at->s[0], name);
    if (!rc) rc = cl_run(k, g.nout, name);
  }
  if (rc) { td_release(c->aux); c->aux = NULL; }
  return rc;
}

/* -- Softmax, log_softmax -------------------------------------------------------------------------- */

/* One work-item per row along dim attrs.i[0], as rt_row.c:
**   m = max x;  e = exp(x - m) (element type), s = sum e (ACC)
**   softmax: y = e * (T)(1/s);  log_softmax: y = x - (T)(m + log s)
** Both kernels in one program per dtype. */
static const char row_src[] =
  "#define ROW(NAME, LG) kernel void NAME(global T *o, global const T *x, RedGeo g) { \\\n"
  "  long i = get_global_id(0); if (i >= g.nout) return; \\\n"
  "  long ob, xb = red_item(&g, i, &ob); \\\n"
  "  T m = -INFINITY; \\\n"
  "  for (long k = 0; k < g.K; k++) m = RMAX(m, x[xb + k * g.ks]); \\\n"
  "  ACC s = 0; \\\n"
  "  for (long k = 0; k < g.K; k++) { T e = exp(x[xb + k * g.ks] - m); o[ob + k * g.ko] = e; s += e; } \\\n"
  "  if (LG) { T lse = (T)((ACC)m + log(s)); \\\n"
  "    for (long k = 0; k < g.K; k++) o[ob + k * g.ko] = x[xb + k * g.ks] - lse; \\\n"
  "  } else { T inv = (T)((ACC)1 / s); \\\n"
  "    for (long k = 0; k < g.K; k++) o[ob + k * g.ko] *= inv; } }\n"
  "ROW(k_softmax, 0)\nROW(k_log_softmax, 1)\n";

int cl_kern_row(RtCall *c, td_tensor *out)
{
  const char *name = rt_op_lname(c->op);
  td_tensor *x = c->in[0];
  int64_t d = c->attrs.i[0];
  int rc = red_need_fp64(name, x->scalar_type, out->scalar_type, -1);
  if (rc || out->nelem == 0) return rc;
  if (x->scalar_type != out->scalar_type || !rt_is_float(x->scalar_type))
    return rt_err(TD_ERR_DTYPE, "%s: expected a floating point tensor, got %s", name, td_dtype_name(x->scalar_type));
  RedGeo g;
  /* the rows: every dim but d kept; d is the innermost "reduced" dim */
  red_geo(&g, x, out, x->ndim > 0 ? 1u << d : 0, 1);
  g.K = x->ndim > 0 ? x->sizes[d] : 1;
  g.ks = x->ndim > 0 ? x->strides[d] : 0;
  g.ko = x->ndim > 0 ? out->strides[d] : 0;
  g.nout = g.K > 0 ? out->nelem / g.K : 0;
  char src[4096];
  snprintf(src, sizeof src, "#define T %s\n#define ACC %s\n%s%s", cl_type(x->scalar_type), red_acc(), red_head, row_src);
  cl_kernel k = cl_kernel_get(src, c->op == RT_OP_LOG_SOFTMAX ? "k_log_softmax" : "k_softmax", name);
  if (!k) return TD_ERR_DEVICE;
  rc = cl_arg(k, 0, sizeof(cl_mem), &(cl_mem){ cl_buf(out) }, name);
  if (!rc) rc = cl_arg(k, 1, sizeof(cl_mem), &(cl_mem){ cl_buf(x) }, name);
  if (!rc) rc = CL_ARGV(k, 2, g, name);
  if (!rc) rc = cl_run(k, g.nout, name);
  return rc;
}
