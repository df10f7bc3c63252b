/*
** jit_grad.c -- one derivative rule per op, named by the op table's grad
** column. Rules are written against the public op API (td_op), so they run
** eagerly, record higher-order graphs under create_graph, and will be
** replayed on traced tensors by the compiler. A rule sets k->gin[i] for the
** inputs that need a gradient; the engine reduces broadcast dims and casts.
*/
#include "jit_grad.h"
#include <math.h>
#include <string.h>

/* -- Helpers: every result is a temporary of the rule; NULL propagates ------------------- */

static td_tensor *op1a(JitCtx *k, int op, td_tensor *a, const td_attrs *at)
{ return a ? jit_tmp(k, td_op(op, 1, &a, at)) : NULL; }
static td_tensor *op1(JitCtx *k, int op, td_tensor *a) { return op1a(k, op, a, NULL); }
static td_tensor *op2(JitCtx *k, int op, td_tensor *a, td_tensor *b)
{ td_tensor *in[2] = { a, b }; return a && b ? jit_tmp(k, td_op(op, 2, in, NULL)) : NULL; }
static td_tensor *op2a(JitCtx *k, int op, td_tensor *a, td_tensor *b, const td_attrs *at)
{ td_tensor *in[2] = { a, b }; return a && b ? jit_tmp(k, td_op(op, 2, in, at)) : NULL; }
static td_tensor *op3a(JitCtx *k, int op, td_tensor *a, td_tensor *b, td_tensor *c, const td_attrs *at)
{ td_tensor *in[3] = { a, b, c }; return a && b && c ? jit_tmp(k, td_op(op, 3, in, at)) : NULL; }
static td_tensor *num(JitCtx *k, double v) { return jit_tmp(k, td_wrap_number(v)); }
static td_tensor *opn(JitCtx *k, int op, td_tensor *a, double v) { return a ? jit_tmp(k, td_op_number(op, a, v, 0)) : NULL; }

#define ADD(a, b) op2(k, RT_OP_ADD, a, b)
#define SUB(a, b) op2(k, RT_OP_SUB, a, b)
#define MUL(a, b) op2(k, RT_OP_MUL, a, b)
#define DIV(a, b) op2(k, RT_OP_DIV, a, b)
#define MULN(a, v) opn(k, RT_OP_MUL, a, v)
#define ADDN(a, v) opn(k, RT_OP_ADD, a, v)
#define NEG(a) op1(k, RT_OP_NEG, a)
#define WHERE(c, a, b) op3a(k, RT_OP_WHERE, c, a, b, NULL)
#define IN(i) jit_saved_in(k, i)
#define OUT jit_saved_out(k)
#define G (k->g)

static bool needs(JitCtx *k, int i) { return k->n->edge[i].node || k->n->edge[i].leaf; }

/* Set the gradient of input i (retained); a needed NULL is an error (already set). */
static int set(JitCtx *k, int i, td_tensor *g)
{
  if (!needs(k, i)) return 0;
  if (!g) return TD_ERR_GRAD;
  td_retain(g); k->gin[i] = g;
  return 0;
}

/* Zeros on the device of gradient g. A zero gradient itself is a real tensor
** (it may be returned as a .grad); a base that a gradient is scattered into
** is, while tracing, a constant of the trace (jit_record_zeros): no buffer and
** no memset per call. */
static td_tensor *zeros(JitCtx *k, const td_tensor *g, int ndim, const int64_t *sizes, int dtype, bool base)
{
  if (base && jit_tracing) return jit_tmp(k, jit_record_zeros(ndim, sizes, dtype));
  return jit_tmp(k, rt_full_on(g ? g->device_type : TD_CPU, ndim, sizes, 0, dtype));
}
#define ZEROS(i, base) zeros(k, k->g, k->n->edge[i].ndim, k->n->edge[i].sizes, k->n->edge[i].scalar_type, base)
static td_tensor *zeros_of(JitCtx *k, int i) { return ZEROS(i, true); }
static td_tensor *zero_grad_of(JitCtx *k, int i) { return ZEROS(i, false); }

/* g of a reduced output, viewed with the reduced dims kept as 1, expanded to the input. */
static td_tensor *expand_back(JitCtx *k, td_tensor *g, int input)
{
  JitNode *n = k->n;
  JitEdge *e = &n->edge[input];
  if (!g) return NULL;
  int64_t ks[TD_MAX_DIMS];
  memcpy(ks, e->sizes, sizeof ks);
  if (n->attrs.ndims < 0) for (int d = 0; d < e->ndim; d++) ks[d] = 1;
  else for (int j = 0; j < n->attrs.ndims; j++) ks[n->attrs.dims[j]] = 1;
  td_tensor *v = jit_tmp(k, td_reshape(g, e->ndim, ks));
  return v ? jit_tmp(k, td_expand(v, e->ndim, e->sizes)) : NULL;
}

static double reduced_count(JitNode *n, int input)
{
  JitEdge *e = &n->edge[input];
  double c = 1;
  if (n->attrs.ndims < 0) for (int d = 0; d < e->ndim; d++) c *= (double)e->sizes[d];
  else for (int j = 0; j < n->attrs.ndims; j++) c *= (double)e->sizes[n->attrs.dims[j]];
  return c;
}

/* Eager, no graph of the gradient (create_graph off): g * op'(v) in one pass
** (rt_ewgrad.c, the same arithmetic), or NULL to take the composite formula. */
static td_tensor *fused(JitCtx *k, td_tensor *v, double y)
{
  if (!v || !G || td_grad_enabled() || !rt_ew_grad_fits(G, v)) return NULL;
  return jit_tmp(k, rt_ew_grad(k->n->op, k->n->attrs.flags, G, v, y));
}
#define FUSED(v) do { td_tensor *d_ = fused(k, v, 0); if (d_) return set(k, 0, d_); } while (0)

#define RULE(name, save, ...) \
  static int grad_##name(JitCtx *k) { __VA_ARGS__ } \
  struct JitGradRule jit_grad_rule_##name = { #name "_backward", grad_##name, save };

#define S0 1u
#define S1 2u
#define S2 4u
#define SO JIT_SAVE_OUT
#define SA JIT_SAVE_AUX

struct JitGradRule jit_grad_rule_none = { "none", NULL, 0 };

/* -- Elementwise unary ---------------------------------------------------------------------- */

RULE(neg, 0, return set(k, 0, NEG(G));)
RULE(abs, S0, return set(k, 0, MUL(G, op1(k, RT_OP_SIGN, IN(0))));)
/* sign, floor, ceil, round: zero almost everywhere */
RULE(zero, 0, return set(k, 0, zero_grad_of(k, 0));)
RULE(exp, SO, return set(k, 0, MUL(G, OUT));)
RULE(log, S0, return set(k, 0, DIV(G, IN(0)));)
RULE(log1p, S0, FUSED(IN(0)); return set(k, 0, DIV(G, ADDN(IN(0), 1)));)
RULE(expm1, SO, FUSED(OUT); return set(k, 0, MUL(G, ADDN(OUT, 1)));)
/* d sqrt(x) = 1 / (2 sqrt(x)) */
RULE(sqrt, SO, FUSED(OUT); return set(k, 0, DIV(G, MULN(OUT, 2)));)
/* d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3 */
RULE(rsqrt, SO, { FUSED(OUT); td_tensor *y = OUT; return set(k, 0, MUL(G, MULN(MUL(y, MUL(y, y)), -0.5))); })
RULE(sin, S0, FUSED(IN(0)); return set(k, 0, MUL(G, op1(k, RT_OP_COS, IN(0))));)
RULE(cos, S0, FUSED(IN(0)); return set(k, 0, NEG(MUL(G, op1(k, RT_OP_SIN, IN(0)))));)
/* d tan = 1 + tan^2 */
RULE(tan, SO, { FUSED(OUT); td_tensor *y = OUT; return set(k, 0, MUL(G, ADDN(MUL(y, y), 1))); })
RULE(tanh, SO, { FUSED(OUT); td_tensor *y = OUT; return set(k, 0, MUL(G, SUB(num(k, 1), MUL(y, y)))); })
RULE(sigmoid, SO, { FUSED(OUT); td_tensor *y = OUT; return set(k, 0, MUL(G, MUL(y, SUB(num(k, 1), y)))); })
RULE(relu, SO, FUSED(OUT); return set(k, 0, WHERE(opn(k, RT_OP_GT, OUT, 0), G, num(k, 0)));)
/* erf form: Phi(x) + x phi(x); tanh form (flags 1): d/dx 0.5 x (1 + tanh(u)),
** u = sqrt(2/pi) (x + 0.044715 x^3) */
RULE(gelu, S0, {
  td_tensor *x = IN(0), *d;
  FUSED(x);
  if (k->n->attrs.flags & 1) {
    td_tensor *x2 = MUL(x, x);
    td_tensor *u = MULN(MUL(x, ADDN(MULN(x2, 0.044715), 1)), sqrt(2.0 / M_PI));
    td_tensor *t = op1(k, RT_OP_TANH, u);
    td_tensor *du = MULN(ADDN(MULN(x2, 3 * 0.044715), 1), sqrt(2.0 / M_PI));
    d = ADD(MULN(ADDN(t, 1), 0.5), MUL(MULN(x, 0.5), MUL(SUB(num(k, 1), MUL(t, t)), du)));
  } else {
    td_tensor *cdf = MULN(ADDN(op1(k, RT_OP_ERF, MULN(x, M_SQRT1_2)), 1), 0.5);
    td_tensor *pdf = MULN(op1(k, RT_OP_EXP, MULN(MUL(x, x), -0.5)), 0.3989422804014327);
    d = ADD(cdf, MUL(x, pdf));
  }
  return set(k, 0, MUL(G, d));
})
/* silu = x s(x); d = s (1 + x (1 - s)) */
RULE(silu, S0, {
  FUSED(IN(0));
  td_tensor *x = IN(0), *s = op1(k, RT_OP_SIGMOID, x);
  return set(k, 0, MUL(G, MUL(s, ADDN(MUL(x, SUB(num(k, 1), s)), 1))));
})
RULE(erf, S0, { FUSED(IN(0)); td_tensor *x = IN(0);
  return set(k, 0, MUL(G, MULN(op1(k, RT_OP_EXP, NEG(MUL(x, x))), 1.1283791670955126))); })
/* gradient passes where lo <= x <= hi */
RULE(clamp, S0, {
  td_tensor *x = IN(0), *m = NULL;
  const td_attrs *a = &k->n->attrs;
  if (a->flags & 2) m = opn(k, RT_OP_GE, x, a->s[0]);
  if (a->flags & 4) { td_tensor *h = opn(k, RT_OP_LE, x, a->s[1]); m = m ? op2(k, RT_OP_LOGICAL_AND, m, h) : h; }
  return set(k, 0, m ? WHERE(m, G, num(k, 0)) : G);
})
RULE(cast, 0, return set(k, 0, G);)
RULE(copy, 0, return set(k, 0, G);)

/* -- Elementwise binary and ternary ----------------------------------------------------------- */

RULE(add, 0, return set(k, 0, G) | set(k, 1, G);)
RULE(sub, 0, return set(k, 0, G) | set(k, 1, needs(k, 1) ? NEG(G) : NULL);)
RULE(mul, S0 | S1, {
  int rc = needs(k, 0) ? set(k, 0, MUL(G, IN(1))) : 0;
  return rc | (needs(k, 1) ? set(k, 1, MUL(G, IN(0))) : 0);
})
/* d(a/b) = g/b, -g a / b^2 */
RULE(div, S0 | S1, {
  td_tensor *b = IN(1);
  int rc = needs(k, 0) ? set(k, 0, DIV(G, b)) : 0;
  return rc | (needs(k, 1) ? set(k, 1, NEG(DIV(MUL(G, IN(0)), MUL(b, b)))) : 0);
})
/* d a^b = b a^(b-1), a^b log a (0 where a == 0 and b >= 0, as in PyTorch) */
RULE(pow, S0 | S1 | SO, {
  td_tensor *a = IN(0), *b = IN(1), *d;
  int rc = 0;
  /* eager, no graph of the gradient, a number exponent: one pass (rt_ew.c) */
  if (needs(k, 0) && a && b && b->nelem == 1 && b->ptr && b->device_type == TD_CPU && !needs(k, 1) &&
      (d = fused(k, a, rt_load(b->ptr, b->scalar_type))))
    rc |= set(k, 0, d);
  else if (needs(k, 0)) rc |= set(k, 0, MUL(G, MUL(b, op2(k, RT_OP_POW, a, opn(k, RT_OP_SUB, b, 1)))));
  if (needs(k, 1)) {
    td_tensor *z = op2(k, RT_OP_LOGICAL_AND, opn(k, RT_OP_EQ, a, 0), opn(k, RT_OP_GE, b, 0));
    rc |= set(k, 1, WHERE(z, num(k, 0), MUL(G, MUL(OUT, op1(k, RT_OP_LOG, a)))));
  }
  return rc;
})
/* the smaller (larger) input takes the gradient; ties split it evenly */
RULE(minmax, S0 | S1, {
  td_tensor *a = IN(0), *b = IN(1);
  int cmp = k->n->op == RT_OP_MINIMUM ? RT_OP_LT : RT_OP_GT;
  td_tensor *half = MULN(G, 0.5), *eq = op2(k, RT_OP_EQ, a, b), *z = num(k, 0);
  int rc = 0;
  if (needs(k, 0)) rc |= set(k, 0, WHERE(op2(k, cmp, a, b), G, WHERE(eq, half, z)));
  if (needs(k, 1)) rc |= set(k, 1, WHERE(op2(k, cmp, b, a), G, WHERE(eq, half, z)));
  return rc;
})
/* d atan2(a, b) = (b, -a) / (a^2 + b^2) */
RULE(atan2, S0 | S1, {
  td_tensor *a = IN(0), *b = IN(1), *r = DIV(G, ADD(MUL(a, a), MUL(b, b)));
  int rc = needs(k, 0) ? set(k, 0, MUL(r, b)) : 0;
  return rc | (needs(k, 1) ? set(k, 1, NEG(MUL(r, a))) : 0);
})
/* d hypot(a, b) = (a, b) / hypot(a, b) */
RULE(hypot, S0 | S1 | SO, {
  td_tensor *r = DIV(G, OUT);
  int rc = needs(k, 0) ? set(k, 0, MUL(r, IN(0))) : 0;
  return rc | (needs(k, 1) ? set(k, 1, MUL(r, IN(1))) : 0);
})
/* fmod(a, b) = a - trunc(a / b) b, remainder(a, b) = a - floor(a / b) b:
** d/da = g, d/db = -g trunc(a / b) (floor for remainder), as PyTorch */
RULE(fmod, S0 | S1, {
  int rc = set(k, 0, G);
  if (needs(k, 1)) {
    td_tensor *q = DIV(IN(0), IN(1)), *f = op1(k, RT_OP_FLOOR, q);
    if (k->n->op == RT_OP_FMOD) f = WHERE(opn(k, RT_OP_GE, q, 0), f, op1(k, RT_OP_CEIL, q));
    rc |= set(k, 1, NEG(MUL(G, f)));
  }
  return rc;
})
RULE(where, S0, {
  td_tensor *c = IN(0), *z = num(k, 0);
  int rc = needs(k, 1) ? set(k, 1, WHERE(c, G, z)) : 0;
  return rc | (needs(k, 2) ? set(k, 2, WHERE(c, z, G)) : 0);
})

/* -- Reductions -------------------------------------------------------------------------------- */

RULE(sum, 0, return set(k, 0, expand_back(k, G, 0));)
RULE(mean, 0, return set(k, 0, MULN(expand_back(k, G, 0), 1.0 / reduced_count(k->n, 0)));)
/* d prod / dx_i = the product of the others: prod / x_i where x_i != 0; at a
** zero, the product of the nonzero elements if it is the only zero of its
** group, else 0. Divisions only by nonzero values, so no NaN reaches where.
** Second order is exact except at groups with two or more zeros. */
RULE(prod, S0 | SO, {
  td_tensor *x = IN(0);
  if (!x) return TD_ERR_GRAD;
  td_attrs at = k->n->attrs; at.keepdim = 1;
  td_tensor *zero = opn(k, RT_OP_EQ, x, 0), *nz = WHERE(zero, num(k, 1), x);
  td_tensor *cnt = op1a(k, RT_OP_SUM, op1a(k, RT_OP_CAST, zero, &(td_attrs){ .ndims = -1, .dtype = x->scalar_type }), &at);
  td_tensor *only = WHERE(opn(k, RT_OP_EQ, cnt, 1), op1a(k, RT_OP_PROD, nz, &at), num(k, 0));
  td_tensor *d = WHERE(zero, only, DIV(expand_back(k, OUT, 0), nz));
  return set(k, 0, MUL(expand_back(k, G, 0), d));
})
/* all maximal elements share the gradient evenly */
/* x with a size-1 dim inserted at `at` */
static td_tensor *unsq(JitCtx *k, td_tensor *x, int at)
{
  if (!x) return NULL;
  int64_t s[TD_MAX_DIMS]; int n = 0;
  for (int i = 0; i <= x->ndim; i++) { if (i == at) s[n++] = 1; if (i < x->ndim) s[n++] = x->sizes[i]; }
  return jit_tmp(k, td_reshape(x, n, s));
}

/* max/min over one dim returned indices: the gradient goes to that index, as in
** PyTorch; over several dims (amax) the maximal elements share it evenly */
RULE(maxmin, S0 | SO | SA, {
  if (k->n->aux) {
    const td_attrs *a = &k->n->attrs;
    int dim = (int)a->dims[0];
    td_tensor *idx = k->n->aux, *g = G;
    if (!a->keepdim) { idx = unsq(k, idx, dim); g = unsq(k, g, dim); }
    td_attrs s = { .ndims = -1, .dtype = -1, .i = { dim } };
    return set(k, 0, op3a(k, RT_OP_SCATTER_ADD, zeros_of(k, 0), idx, g, &s));
  }
  td_tensor *x = IN(0);
  td_tensor *m = op1a(k, RT_OP_CAST, op2(k, RT_OP_EQ, x, expand_back(k, OUT, 0)), &(td_attrs){ .ndims = -1, .dtype = x->scalar_type });
  td_attrs at = k->n->attrs; at.keepdim = 1;
  td_tensor *cnt = op1a(k, RT_OP_SUM, m, &at);
  JitEdge *e = &k->n->edge[0];
  td_tensor *ce = cnt ? jit_tmp(k, td_expand(cnt, e->ndim, e->sizes)) : NULL;
  return set(k, 0, DIV(MUL(expand_back(k, G, 0), m), ce));
})
/* d var = 2 (x - mean) / (N - correction) */
static td_tensor *centered(JitCtx *k, td_tensor *x)
{
  td_attrs at = k->n->attrs; at.keepdim = 1;
  return SUB(x, op1a(k, RT_OP_MEAN, x, &at));
}
RULE(var, S0, {
  double n = reduced_count(k->n, 0) - k->n->attrs.s[0];
  return set(k, 0, MUL(expand_back(k, G, 0), MULN(centered(k, IN(0)), 2.0 / n)));
})
RULE(std, S0 | SO, {
  double n = reduced_count(k->n, 0) - k->n->attrs.s[0];
  return set(k, 0, DIV(MUL(expand_back(k, G, 0), MULN(centered(k, IN(0)), 1.0 / n)), expand_back(k, OUT, 0)));
})
RULE(logsumexp, S0 | SO, return set(k, 0, MUL(expand_back(k, G, 0), op1(k, RT_OP_EXP, SUB(IN(0), expand_back(k, OUT, 0)))));)
/* d ||x||_p = x |x|^(p-2) / ||x||^(p-1); p = 2: x / ||x||; p = 1: sign(x) */
RULE(norm, S0 | SO, {
  double p = k->n->attrs.s[0];
  td_tensor *x = IN(0), *g = expand_back(k, G, 0), *y = expand_back(k, OUT, 0), *d;
  if (p == 0) return set(k, 0, zero_grad_of(k, 0));     /* a count of nonzeros: piecewise constant */
  if (p == 1) d = op1(k, RT_OP_SIGN, x);
  else if (isinf(p)) {
    td_tensor *m = op1a(k, RT_OP_CAST, op2(k, RT_OP_EQ, op1(k, RT_OP_ABS, x), y), &(td_attrs){ .ndims = -1, .dtype = x->scalar_type });
    td_attrs at = k->n->attrs; at.keepdim = 1;
    td_tensor *cnt = op1a(k, RT_OP_SUM, m, &at);
    d = DIV(MUL(op1(k, RT_OP_SIGN, x), m), cnt);
  } else if (p == 2) d = WHERE(opn(k, RT_OP_EQ, y, 0), num(k, 0), DIV(x, y));
  else {
    td_tensor *ax = op1(k, RT_OP_ABS, x);
    d = DIV(MUL(x, op2(k, RT_OP_POW, ax, num(k, p - 2))), op2(k, RT_OP_POW, y, num(k, p - 1)));
    d = WHERE(opn(k, RT_OP_EQ, y, 0), num(k, 0), d);
  }
  return set(k, 0, MUL(g, d));
})

/* -- Row-wise -------------------------------------------------------------------------------- */

static td_tensor *row_sum(JitCtx *k, td_tensor *x)
{
  td_attrs at = { .ndims = 1, .keepdim = 1, .dtype = -1 };
  at.dims[0] = k->n->attrs.i[0];
  return op1a(k, RT_OP_SUM, x, &at);
}
/* eager, no graph of the gradient: one fused pass per row (jit_fused.c) */
static td_tensor *softmax_fused(JitCtx *k, td_tensor *y, int log)
{
  if (!y || !G || td_grad_enabled() || !rt_softmax_grad_fits(G, y)) return NULL;
  return jit_tmp(k, rt_softmax_grad(G, y, k->n->attrs.i[0], log));
}
/* dx = y (g - sum(g y)) */
RULE(softmax, SO, { td_tensor *y = OUT, *d = softmax_fused(k, y, 0);
  return set(k, 0, d ? d : MUL(y, SUB(G, row_sum(k, MUL(G, y))))); })
/* dx = g - exp(y) sum(g) */
RULE(log_softmax, SO, { td_tensor *y = OUT, *d = softmax_fused(k, y, 1);
  return set(k, 0, d ? d : SUB(G, MUL(op1(k, RT_OP_EXP, y), row_sum(k, G)))); })

/* -- Contraction -------------------------------------------------------------------------------- */

static td_tensor *mT(JitCtx *k, td_tensor *x)
{
  if (!x) return NULL;
  int64_t perm[TD_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) perm[i] = i;
  perm[x->ndim - 1] = x->ndim - 2; perm[x->ndim - 2] = x->ndim - 1;
  return jit_tmp(k, td_permute(x, x->ndim, perm));
}

/* True when x's last two dims are a transpose of contiguous memory (x = W^T). */
static bool is_mT(const td_tensor *x)
{
  int n = x->ndim;
  return n >= 2 && x->sizes[n - 1] > 1 && x->sizes[n - 2] > 1 && x->strides[n - 2] == 1 &&
         x->strides[n - 1] == x->sizes[n - 2];
}

/* 1-D operands are promoted as in matmul: a (K) -> (1,K), b (K) -> (K,1);
** then dA = g B^T, dB = A^T g, reduced over broadcast batch dims by the engine.
** An operand that is a transposed view (Linear's x @ W^T) gets its gradient
** computed transposed, dB = (g^T A)^T, so that flowing back through the view
** it lands contiguous in W's layout: no transposing copy into W.grad. */
RULE(matmul, S0 | S1, {
  td_tensor *a = IN(0), *b = IN(1), *g = G;
  if (!a || !b) return TD_ERR_GRAD;
  int a1 = a->ndim == 1, b1 = b->ndim == 1;
  if (a1 && b1) {
    int rc = needs(k, 0) ? set(k, 0, MUL(g, b)) : 0;
    return rc | (needs(k, 1) ? set(k, 1, MUL(g, a)) : 0);
  }
  td_tensor *A = a1 ? unsq(k, a, 0) : a, *B = b1 ? unsq(k, b, 1) : b;
  if (a1) g = unsq(k, g, g->ndim - 1);
  if (b1) g = unsq(k, g, g->ndim);
  int rc = 0;
  if (needs(k, 0)) {
    td_tensor *da = is_mT(A) ? mT(k, op2(k, RT_OP_MATMUL, B, mT(k, g))) : op2(k, RT_OP_MATMUL, g, mT(k, B));
    if (a1 && da) da = jit_tmp(k, td_sum_to(da, 2, (int64_t[]){ 1, a->sizes[0] }));
    if (a1 && da) da = jit_tmp(k, td_reshape(da, 1, a->sizes));
    rc |= set(k, 0, da);
  }
  if (needs(k, 1)) {
    td_tensor *db = is_mT(B) ? mT(k, op2(k, RT_OP_MATMUL, mT(k, g), A)) : op2(k, RT_OP_MATMUL, mT(k, A), g);
    if (b1 && db) db = jit_tmp(k, td_sum_to(db, 2, (int64_t[]){ b->sizes[0], 1 }));
    if (b1 && db) db = jit_tmp(k, td_reshape(db, 1, b->sizes));
    rc |= set(k, 1, db);
  }
  return rc;
})

/* -- Attention ------------------------------------------------------------------------------------ */

/* p = softmax(scale q k^T) with keys after each query masked (causal), from differentiable ops */
static td_tensor *attn_probs(JitCtx *k, td_tensor *q, td_tensor *kk)
{
  const td_attrs *a = &k->n->attrs;
  td_tensor *s = MULN(op2(k, RT_OP_MATMUL, q, mT(k, kk)), a->s[0]);
  if (!s) return NULL;
  int n = s->ndim;
  if (a->i[0]) {                       /* masked where key j > query i */
    int64_t Tq = s->sizes[n - 2], Tk = s->sizes[n - 1];
    td_tensor *iq = jit_tmp(k, td_arange(0, (double)Tq, 1, TD_INT64)), *jk = jit_tmp(k, td_arange(0, (double)Tk, 1, TD_INT64));
    iq = iq ? jit_tmp(k, td_reshape(iq, 2, (int64_t[]){ Tq, 1 })) : NULL;
    if (s->device_type != TD_CPU) {      /* the mask where the scores are (OpenCL) */
      iq = iq ? jit_tmp(k, td_to_device(iq, s->device_type, -1)) : NULL;
      jk = jk ? jit_tmp(k, td_to_device(jk, s->device_type, -1)) : NULL;
    }
    s = op3a(k, RT_OP_WHERE, op2(k, RT_OP_LT, iq, jk), num(k, -INFINITY), s, NULL);
  }
  if (k->n->nin > 3 && s) {            /* a mask input: bool keeps where true, float is added */
    td_tensor *m = IN(3);
    s = m && m->scalar_type == TD_BOOL ? op3a(k, RT_OP_WHERE, m, s, num(k, -INFINITY), NULL) : ADD(s, m);
  }
  td_attrs sm = { .ndims = -1, .dtype = -1, .i = { n - 1 } };
  return op1a(k, RT_OP_SOFTMAX, s, &sm);
}

/* The fused backward (sdpa_backward: dq, dk, dv in one flat tensor, viewed
** apart). While a graph of the gradient is recorded (create_graph), the same
** formula from differentiable ops, p recomputed:
**   dv = p^T g;  dp = g v^T;  ds = scale p (dp - rowsum(p dp));  dq = ds k;  dk = ds^T q */
static td_tensor *attn_part(JitCtx *k, td_tensor *all, int64_t off, const td_tensor *like)
{
  td_attrs sl = { .ndims = -1, .dtype = -1, .i = { 0, off, off + like->nelem, 1 } };
  td_tensor *x = op1a(k, RT_OP_SLICE, all, &sl);
  return x ? jit_tmp(k, td_reshape(x, like->ndim, like->sizes)) : NULL;
}
RULE(sdpa, S0 | S1 | S2 | 8u, {
  td_tensor *q = IN(0), *kk = IN(1), *v = IN(2), *g = G, *m = k->n->nin > 3 ? IN(3) : NULL;
  if (!q || !kk || !v || !g || (k->n->nin > 3 && !m)) return TD_ERR_GRAD;
  if (k->n->nin > 3 && needs(k, 3))
    return rt_err(TD_ERR_GRAD, "scaled_dot_product_attention: the fused op gives no gradient for its mask "
                  "(nn.functional composes a mask that requires grad)");
  if (!td_grad_enabled()) {
    td_tensor *in[5] = { q, kk, v, g, m };
    td_tensor *all = jit_tmp(k, td_op(RT_OP_SDPA_BACKWARD, m ? 5 : 4, in, &k->n->attrs));
    if (!all) return TD_ERR_GRAD;
    int rc = needs(k, 0) ? set(k, 0, attn_part(k, all, 0, q)) : 0;
    rc |= needs(k, 1) ? set(k, 1, attn_part(k, all, q->nelem, kk)) : 0;
    return rc | (needs(k, 2) ? set(k, 2, attn_part(k, all, q->nelem + kk->nelem, v)) : 0);
  }
  td_tensor *p = attn_probs(k, q, kk);
  td_tensor *dp = op2(k, RT_OP_MATMUL, g, mT(k, v));
  td_attrs rs = { .ndims = 1, .keepdim = 1, .dtype = -1, .dims = { p ? p->ndim - 1 : 0 } };
  td_tensor *ds = MULN(MUL(p, SUB(dp, op1a(k, RT_OP_SUM, MUL(p, dp), &rs))), k->n->attrs.s[0]);
  int rc = needs(k, 0) ? set(k, 0, op2(k, RT_OP_MATMUL, ds, kk)) : 0;
  rc |= needs(k, 1) ? set(k, 1, op2(k, RT_OP_MATMUL, mT(k, ds), q)) : 0;
  return rc | (needs(k, 2) ? set(k, 2, op2(k, RT_OP_MATMUL, mT(k, p), g)) : 0);
})

/* -- Scans ------------------------------------------------------------------------------------- */

/* the scan of op over the rule's dim, reversed (flags ^ 1) or not */
static td_tensor *scan(JitCtx *k, int op, td_tensor *x, int reverse)
{
  td_attrs a = k->n->attrs;
  a.flags = reverse ? (a.flags ^ 1) : a.flags;
  return op1a(k, op, x, &a);
}
#define RCUMSUM(x) scan(k, RT_OP_CUMSUM, x, 1)

/* d cumsum: the cumsum of g from the other end */
RULE(cumsum, 0, return set(k, 0, RCUMSUM(G));)
/* d cumprod (PyTorch's formula that handles zeros): before a line's first zero,
** g_i = rcumsum(g y)_i / x_i; at the first zero z, g_z = rcumsum(g cumprod(x'))_z
** with x' = x whose x_z is 1 (the products that skip x_z); after it, 0. */
RULE(cumprod, S0 | SO, {
  td_tensor *x = IN(0), *y = OUT;
  td_tensor *isz = opn(k, RT_OP_EQ, x, 0);
  td_tensor *nz = scan(k, RT_OP_CUMSUM, isz, 0);                 /* zeros so far (int64) */
  td_tensor *before = opn(k, RT_OP_EQ, nz, 0);
  td_tensor *first = op2(k, RT_OP_LOGICAL_AND, isz, opn(k, RT_OP_EQ, nz, 1));
  td_tensor *safe = WHERE(before, x, num(k, 1));
  td_tensor *g0 = DIV(RCUMSUM(MUL(G, y)), safe);
  td_tensor *x1 = WHERE(first, num(k, 1), x);
  td_tensor *gz = RCUMSUM(MUL(G, scan(k, RT_OP_CUMPROD, x1, 0)));
  return set(k, 0, WHERE(before, g0, WHERE(first, gz, num(k, 0))));
})
/* cummax/cummin: each output's gradient goes to the element it took */
RULE(cummaxmin, SA, {
  if (k->n->edge[0].ndim == 0) return set(k, 0, G);      /* one element: it took its own */
  td_attrs s = { .ndims = -1, .dtype = -1, .i = { k->n->attrs.i[0] } };
  return set(k, 0, op3a(k, RT_OP_SCATTER_ADD, zeros_of(k, 0), k->n->aux, G, &s));
})
/* d logcumsumexp, PyTorch's stable form: the positive and negative parts of g in
** log space, g_i = exp(rlcse(log g+ - y)_i + x_i) - exp(rlcse(log g- - y)_i + x_i),
** log of nothing as the dtype's lowest finite value */
RULE(logcumsumexp, S0 | SO, {
  td_tensor *x = IN(0), *y = OUT, *g = G;
  double lowest = x && x->scalar_type == TD_FLOAT32 ? -3.4028234663852886e38 : -1.7976931348623157e308;
  td_tensor *lg = op1(k, RT_OP_LOG, op1(k, RT_OP_ABS, g)), *lo = num(k, lowest);
  td_tensor *lp = WHERE(opn(k, RT_OP_GT, g, 0), lg, lo), *ln = WHERE(opn(k, RT_OP_LT, g, 0), lg, lo);
  td_tensor *p = op1(k, RT_OP_EXP, ADD(scan(k, RT_OP_LOGCUMSUMEXP, SUB(lp, y), 1), x));
  td_tensor *n = op1(k, RT_OP_EXP, ADD(scan(k, RT_OP_LOGCUMSUMEXP, SUB(ln, y), 1), x));
  return set(k, 0, SUB(p, n));
})

/* -- Movement ----------------------------------------------------------------------------------- */

RULE(view, 0, { JitEdge *e = &k->n->edge[0]; return set(k, 0, G ? jit_tmp(k, td_reshape(G, e->ndim, e->sizes)) : NULL); })
RULE(permute, 0, {
  const td_attrs *a = &k->n->attrs;
  int64_t inv[TD_MAX_DIMS];
  for (int i = 0; i < a->ndims; i++) inv[a->dims[i]] = i;
  return set(k, 0, jit_tmp(k, td_permute(G, a->ndims, inv)));
})
/* the engine sums the gradient back over the expanded dims */
RULE(expand, 0, return set(k, 0, G);)
RULE(slice, 0, return set(k, 0, op2a(k, RT_OP_SLICE_SCATTER, zeros_of(k, 0), G, &k->n->attrs));)
RULE(select, 0, {
  const td_attrs *a = &k->n->attrs;
  td_attrs s = { .ndims = -1, .dtype = -1, .i = { a->i[0], a->i[1], a->i[1] + 1, 1 } };
  return set(k, 0, op2a(k, RT_OP_SLICE_SCATTER, zeros_of(k, 0), unsq(k, G, (int)a->i[0]), &s));
})

/* -- Indexing ------------------------------------------------------------------------------------ */

/* index_select(x, dim, idx) -> index_add(zeros, dim, idx, g) */
RULE(index_select, S1, return set(k, 0, op3a(k, RT_OP_INDEX_ADD, zeros_of(k, 0), IN(1), G, &k->n->attrs));)
RULE(index_add, S1, return set(k, 0, G) | (needs(k, 2) ? set(k, 2, op2a(k, RT_OP_INDEX_SELECT, G, IN(1), &k->n->attrs)) : 0);)
/* gather(x, dim, idx) -> scatter_add(zeros, dim, idx, g) */
RULE(gather, S1, return set(k, 0, op3a(k, RT_OP_SCATTER_ADD, zeros_of(k, 0), IN(1), G, &k->n->attrs));)
/* g (idx's shape) zero-padded at the end of each dim to input i's shape: src may
** be larger than idx in scatter_add, and only its leading block was read. */
static td_tensor *pad_to(JitCtx *k, td_tensor *g, int input)
{
  JitEdge *e = &k->n->edge[input];
  for (int d = 0; g && d < e->ndim; d++) {
    if (g->sizes[d] == e->sizes[d]) continue;
    int64_t s[TD_MAX_DIMS];
    memcpy(s, g->sizes, sizeof s);
    s[d] = e->sizes[d];
    td_attrs at = { .ndims = -1, .dtype = -1, .i = { d, 0, g->sizes[d], 1 } };
    g = op2a(k, RT_OP_SLICE_SCATTER, zeros(k, g, g->ndim, s, g->scalar_type, true), g, &at);
  }
  return g;
}
RULE(scatter_add, S1, return set(k, 0, G) | (needs(k, 2) ? set(k, 2, pad_to(k, op2a(k, RT_OP_GATHER, G, IN(1), &k->n->attrs), 2)) : 0);)
/* base: g with the slice zeroed; src: the slice of g */
RULE(slice_scatter, 0, {
  int rc = needs(k, 0) ? set(k, 0, op2a(k, RT_OP_SLICE_SCATTER, G, zeros_of(k, 1), &k->n->attrs)) : 0;
  return rc | (needs(k, 1) ? set(k, 1, op1a(k, RT_OP_SLICE, G, &k->n->attrs)) : 0);
})
RULE(cat, 0, {
  int64_t dim = k->n->attrs.i[0], off = 0;
  int rc = 0;
  for (int i = 0; i < k->n->nin; i++) {
    int64_t len = k->n->edge[i].ndim ? k->n->edge[i].sizes[dim] : 0;
    if (needs(k, i)) {
      td_attrs s = { .ndims = -1, .dtype = -1, .i = { dim, off, off + len, 1 } };
      rc |= set(k, i, op1a(k, RT_OP_SLICE, G, &s));
    }
    off += len;
  }
  return rc;
})

/* -- Sliding windows ----------------------------------------------------------------------- */

/* unfold and fold are adjoint: each one's gradient is the other on g */
RULE(unfold, 0, return set(k, 0, op1a(k, RT_OP_FOLD, G, &k->n->attrs));)
RULE(fold, 0, return set(k, 0, op1a(k, RT_OP_UNFOLD, G, &k->n->attrs));)
