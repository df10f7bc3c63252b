/*
** cl_ew.c -- elementwise ops on the OpenCL device: one generated kernel per
** (op, dtypes), one work-item per output element, operands addressed through
** ClGeo (broadcasting, views and a strided output cost no copies). The
** expressions are rt_ew.c's, written in OpenCL C: same NaN rules for
** minimum/maximum, same integer pow, bool arithmetic as logic.
*/
#include "cl.h"
#include <stdio.h>
#include <string.h>

/* Float unary ops (OpenCL builtins; full precision, no native_*). */
static const char *float1(int op, int flags)
{
  switch (op) {
  case RT_OP_EXP: return "exp(x)";
  case RT_OP_LOG: return "log(x)";
  case RT_OP_LOG1P: return "log1p(x)";
  case RT_OP_EXPM1: return "expm1(x)";
  case RT_OP_SQRT: return "sqrt(x)";
  case RT_OP_RSQRT: return "(CT)1 / sqrt(x)";
  case RT_OP_SIN: return "sin(x)";
  case RT_OP_COS: return "cos(x)";
  case RT_OP_TAN: return "tan(x)";
  case RT_OP_TANH: return "tanh(x)";
  case RT_OP_SIGMOID: return "(CT)1 / ((CT)1 + exp(-x))";
  case RT_OP_SILU: return "x / ((CT)1 + exp(-x))";
  case RT_OP_ERF: return "erf(x)";
  case RT_OP_GELU: return (flags & 1)
    ? "(CT)0.5 * x * ((CT)1 + tanh((CT)0.7978845608028654 * (x + (CT)0.044715 * x * x * x)))"
    : "(CT)0.5 * x * ((CT)1 + erf(x * (CT)0.70710678118654752440))";
  case RT_OP_FLOOR: return "floor(x)";
  case RT_OP_CEIL: return "ceil(x)";
  case RT_OP_ROUND: return "rint(x)";
  }
  return NULL;
}

/* Unary ops on every numeric dtype; s0/s1 are clamp's bounds, fl its sides. */
static const char *any1(int op)
{
  switch (op) {
  case RT_OP_NEG: return "-x";
  case RT_OP_ABS: return "x < 0 ? -x : x";
  case RT_OP_SIGN: return "(x > 0) - (x < 0)";
  case RT_OP_RELU: return "x > 0 ? x : (CT)0";
  case RT_OP_CLAMP: return "((fl & 4) && x > s1) ? s1 : ((fl & 2) && x < s0) ? (((fl & 4) && s0 > s1) ? s1 : s0) : x";
  case RT_OP_FLOOR: case RT_OP_CEIL: case RT_OP_ROUND: return "x";   /* integers: identity */
  case RT_OP_LOGICAL_NOT: return "!x";
  }
  return NULL;
}

static const char *binary(int op, int cd)
{
  if (cd == TD_BOOL) {   /* bool arithmetic is logic, as in PyTorch */
    if (op == RT_OP_ADD || op == RT_OP_MAXIMUM || op == RT_OP_LOGICAL_OR) return "x || y";
    if (op == RT_OP_MUL || op == RT_OP_MINIMUM || op == RT_OP_LOGICAL_AND) return "x && y";
  }
  switch (op) {
  case RT_OP_ADD: return "x + y";
  case RT_OP_SUB: return "x - y";
  case RT_OP_MUL: return "x * y";
  case RT_OP_DIV: return rt_is_float(cd) ? "x / y" : NULL;
  /* a NaN operand wins; integers have none (and clang warns on x != x) */
  case RT_OP_MINIMUM: return rt_is_float(cd) ? "x < y ? x : (y < x ? y : (x != x ? x : y))" : "x < y ? x : y";
  case RT_OP_MAXIMUM: return rt_is_float(cd) ? "x > y ? x : (y > x ? y : (x != x ? x : y))" : "x > y ? x : y";
  case RT_OP_POW: return rt_is_float(cd) ? "y == (CT)2 ? x * x : pow(x, y)" : "ipow(x, y)";
  case RT_OP_EQ: return "x == y";
  case RT_OP_NE: return "x != y";
  case RT_OP_LT: return "x < y";
  case RT_OP_LE: return "x <= y";
  case RT_OP_GT: return "x > y";
  case RT_OP_GE: return "x >= y";
  case RT_OP_LOGICAL_AND: return "x && y";
  case RT_OP_LOGICAL_OR: return "x || y";
  }
  return NULL;
}

/* integer pow by squaring (negative exponents give 0 except for |x| = 1), as rt_ew.c */
static const char ipow_src[] =
  "inline long ipow(long x, long y) {\n"
  "  if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;\n"
  "  long r = 1; while (y) { if (y & 1) r *= x; x *= x; y >>= 1; } return r;\n}\n";

/* Build and run: `expr` over x (input 1), y (input 2), c (where's condition). */
static int launch(RtCall *c, td_tensor *out, int nin, td_tensor *const *in, int ct, const char *expr)
{
  const char *name = rt_op_lname(c->op);
  if (ct == TD_FLOAT64 || out->scalar_type == TD_FLOAT64)
    if (!cl_has_fp64()) return rt_err(TD_ERR_DTYPE, "%s: the OpenCL device has no float64 (cl_khr_fp64)", name);
  char src[4096];
  const char *OT = cl_type(out->scalar_type), *CT = cl_type(ct);
  int n = snprintf(src, sizeof src, "#define CT %s\n%s", CT, strstr(expr, "ipow") ? ipow_src : "");
  n += snprintf(src + n, sizeof src - n,
    "kernel void k(global %s *o, global const %s *a, global const %s *b, global const %s *d,\n"
    "              ClGeo g, long n, CT s0, CT s1, int fl) {\n"
    "  long i = get_global_id(0); if (i >= n) return;\n",
    OT, cl_type(in[0]->scalar_type), nin > 1 ? cl_type(in[1]->scalar_type) : OT, nin > 2 ? cl_type(in[2]->scalar_type) : OT);
  if (c->op == RT_OP_WHERE)
    n += snprintf(src + n, sizeof src - n, "  uchar cnd = a[geo_off(&g, 1, i)]; CT x = b[geo_off(&g, 2, i)], y = d[geo_off(&g, 3, i)];\n");
  else
    n += snprintf(src + n, sizeof src - n, "  %s x = a[geo_off(&g, 1, i)];%s\n", cl_type(in[0]->scalar_type),
                  nin > 1 ? " CT y = b[geo_off(&g, 2, i)];" : "");
  n += snprintf(src + n, sizeof src - n, "  o[geo_off(&g, 0, i)] = (%s)(%s);\n}\n", OT, expr);
  if (n >= (int)sizeof src) return rt_err(TD_ERR_ARG, "%s: OpenCL kernel source too long", name);
  cl_kernel k = cl_kernel_get(src, "k", name);
  if (!k) return TD_ERR_DEVICE;
  ClGeo g;
  cl_geo(&g, out, nin, in);
  cl_long ne = out->nelem;
  cl_int fl = c->attrs.flags;
  /* clamp's bounds in the compute type */
  union { cl_uchar u8; cl_int i32; cl_long i64; cl_float f32; cl_double f64; } s[2];
  size_t ssz = (size_t)rt_dtype_size(ct);
  for (int j = 0; j < 2; j++) rt_store(&s[j], ct, c->attrs.s[j]);
  cl_mem dummy = cl_buf(in[0]);
  int rc = cl_arg(k, 0, sizeof(cl_mem), &(cl_mem){ cl_buf(out) }, name);
  for (int j = 0; j < 3 && !rc; j++) rc = cl_arg(k, 1 + j, sizeof(cl_mem), j < nin ? &(cl_mem){ cl_buf(in[j]) } : &dummy, name);
  if (!rc) rc = CL_ARGV(k, 4, g, name);
  if (!rc) rc = CL_ARGV(k, 5, ne, name);
  if (!rc) rc = cl_arg(k, 6, ssz, &s[0], name);
  if (!rc) rc = cl_arg(k, 7, ssz, &s[1], name);
  if (!rc) rc = CL_ARGV(k, 8, fl, name);
  if (!rc) rc = cl_run(k, out->nelem, name);
  return rc;
}

int cl_kern_ew(RtCall *c, td_tensor *out)
{
  const char *name = rt_op_lname(c->op);
  int op = c->op, cd = c->cdtype, nin = c->nin, rc = 0, ct = cd;
  const char *expr = NULL;
  td_tensor *in[3] = { 0 };
  if (op == RT_OP_COPY || op == RT_OP_CAST) {
    in[0] = c->in[0]; td_retain(in[0]);
    ct = out->scalar_type;
    expr = out->scalar_type == TD_BOOL ? "x != 0" : "x";
  } else if (op == RT_OP_WHERE) {
    in[0] = c->in[0]; td_retain(in[0]);
    in[1] = rt_as_dtype(c->in[1], out->scalar_type); in[2] = rt_as_dtype(c->in[2], out->scalar_type);
    ct = out->scalar_type;
    expr = "cnd ? x : y";
  } else {
    if (op == RT_OP_LOGICAL_NOT || op == RT_OP_LOGICAL_AND || op == RT_OP_LOGICAL_OR) ct = TD_BOOL;
    for (int i = 0; i < nin; i++) in[i] = rt_as_dtype(c->in[i], ct);
    if (nin == 2) expr = binary(op, ct);
    else expr = rt_is_float(ct) && float1(op, c->attrs.flags) ? float1(op, c->attrs.flags) : any1(op);
    if (!expr || (nin == 1 && ct == TD_BOOL && op != RT_OP_LOGICAL_NOT))
      rc = rt_err(TD_ERR_DTYPE, "%s: not supported for dtype %s", name, td_dtype_name(ct));
  }
  for (int i = 0; i < nin; i++) if (!in[i]) rc = TD_ERR_NOMEM;
  if (!rc && out->nelem > 0) rc = launch(c, out, nin, in, ct, expr);
  for (int i = 0; i < nin; i++) td_release(in[i]);
  return rc;
}

/* Fill a device tensor (any geometry) with v. */
int cl_fill(td_tensor *t, double v)
{
  const char *T = cl_type(t->scalar_type);
  if (t->scalar_type == TD_FLOAT64 && !cl_has_fp64())
    return rt_err(TD_ERR_DTYPE, "full: the OpenCL device has no float64 (cl_khr_fp64)");
  if (t->scalar_type == TD_BOOL) v = v != 0;
  char src[512];
  snprintf(src, sizeof src, "kernel void k(global %s *o, ClGeo g, long n, %s v) {\n"
           "  long i = get_global_id(0); if (i < n) o[geo_off(&g, 0, i)] = v;\n}\n", T, T);
  cl_kernel k = cl_kernel_get(src, "k", "full");
  if (!k) return TD_ERR_DEVICE;
  ClGeo g;
  cl_geo(&g, t, 0, NULL);
  cl_long n = t->nelem;
  union { cl_uchar u8; cl_int i32; cl_long i64; cl_float f32; cl_double f64; } s;
  rt_store(&s, t->scalar_type, v);
  int rc = cl_arg(k, 0, sizeof(cl_mem), &(cl_mem){ cl_buf(t) }, "full");
  if (!rc) rc = CL_ARGV(k, 1, g, "full");
  if (!rc) rc = CL_ARGV(k, 2, n, "full");
  if (!rc) rc = cl_arg(k, 3, (size_t)rt_dtype_size(t->scalar_type), &s, "full");
  if (!rc) rc = cl_run(k, n, "full");
  return rc;
}
