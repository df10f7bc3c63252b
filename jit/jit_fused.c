/*
** jit_fused.c -- eager fast paths of composite functions: layer_norm,
** rms_norm and cross_entropy as one fused kernel each (runtime/rt_norm.c),
** with a custom autograd node whose backward is one fused kernel too. When a
** graph of the gradient is recorded (create_graph), the node's backward
** composes ops instead (the same formula, recomputed from the saved inputs),
** so higher-order gradients stay right. Also the fused backward of the
** softmax and log_softmax ops, which their rules (jit_grad.c) call. None of
** this traces: under tide.compile the Lua functions keep their composite
** form, which the compiler fuses itself.
*/
#include "jit_fused.h"
#include <math.h>
#include <string.h>
#include <stdlib.h>

/* -- layer_norm and rms_norm ----------------------------------------------------------------- */

typedef struct { td_tensor *mean, *rstd; double eps; int64_t R, D, S; int rms, bn; } NormExt;

static void norm_ext_free(void *p)
{
  NormExt *e = p;
  td_release(e->mean); td_release(e->rstd);
  free(e);
}

/* create_graph: the gradient from ops on x (R, D), so it has a history.
**   layer_norm: xh = (x - mean x) r, dx = r (gw - mean gw - xh mean(gw xh))
**   rms_norm:   xh = x r,            dx = r (gw - xh r mean(gw x))
** with r = 1/sqrt(var + eps) (rms: mean x^2 + eps), gw = g w; dw = sum g xh, db = sum g. */
static int norm_composite(JitCtx *k, const NormExt *ne, td_tensor *x, td_tensor *w)
{
  int64_t rd[2] = { ne->R, ne->D }, d1 = ne->D;
  td_tensor *X = reshape(k, x, 2, rd), *Gm = reshape(k, GO, 2, rd), *r, *xh;
  if (ne->rms) {
    r = opn(k, RT_OP_ADD, red(k, RT_OP_MEAN, MUL(X, X), 1, 1), ne->eps);
    r = r ? jit_tmp(k, td_op(RT_OP_RSQRT, 1, &r, NULL)) : NULL;
    xh = MUL(X, r);
  } else {
    td_tensor *xc = SUB(X, red(k, RT_OP_MEAN, X, 1, 1));
    r = opn(k, RT_OP_ADD, red(k, RT_OP_MEAN, MUL(xc, xc), 1, 1), ne->eps);
    r = r ? jit_tmp(k, td_op(RT_OP_RSQRT, 1, &r, NULL)) : NULL;
    xh = MUL(xc, r);
  }
  int rc = 0;
  if (needs(k, 0)) {
    td_tensor *gw = w ? MUL(Gm, reshape(k, w, 1, &d1)) : Gm, *dx;
    if (ne->rms) dx = MUL(r, SUB(gw, MUL(xh, MUL(r, red(k, RT_OP_MEAN, MUL(gw, X), 1, 1)))));
    else dx = MUL(r, SUB(SUB(gw, red(k, RT_OP_MEAN, gw, 1, 1)), MUL(xh, red(k, RT_OP_MEAN, MUL(gw, xh), 1, 1))));
    rc |= set(k, 0, reshape(k, dx, k->n->edge[0].ndim, k->n->edge[0].sizes));
  }
  if (needs(k, 1)) rc |= set(k, 1, reshape(k, red(k, RT_OP_SUM, MUL(Gm, xh), 0, 0), k->n->edge[1].ndim, k->n->edge[1].sizes));
  if (needs(k, 2)) rc |= set(k, 2, reshape(k, red(k, RT_OP_SUM, Gm, 0, 0), k->n->edge[2].ndim, k->n->edge[2].sizes));
  return rc;
}

/* create_graph, batch_norm over x (N, C, S): the statistics over dims 0 and 2,
**   dx = r (gw - mean gw - xh mean(gw xh)), dw = sum g xh, db = sum g */
static int bn_composite(JitCtx *k, const NormExt *ne, td_tensor *x, td_tensor *w)
{
  int64_t s3[3] = { ne->R, ne->D, ne->S }, c3[3] = { 1, ne->D, 1 };
  td_attrs at = { .ndims = 2, .keepdim = 1, .dtype = -1, .dims = { 0, 2 } };
  td_tensor *X = reshape(k, x, 3, s3), *Gm = reshape(k, GO, 3, s3);
#define BNRED(op, t, keep) ({ td_tensor *a_ = (t); at.keepdim = keep; a_ ? jit_tmp(k, td_op(op, 1, &a_, &at)) : NULL; })
  td_tensor *xc = SUB(X, BNRED(RT_OP_MEAN, X, 1));
  td_tensor *r = opn(k, RT_OP_ADD, BNRED(RT_OP_MEAN, MUL(xc, xc), 1), ne->eps);
  r = r ? jit_tmp(k, td_op(RT_OP_RSQRT, 1, &r, NULL)) : NULL;
  td_tensor *xh = MUL(xc, r);
  int rc = 0;
  if (needs(k, 0)) {
    td_tensor *gw = w ? MUL(Gm, reshape(k, w, 3, c3)) : Gm;
    td_tensor *dx = MUL(r, SUB(SUB(gw, BNRED(RT_OP_MEAN, gw, 1)), MUL(xh, BNRED(RT_OP_MEAN, MUL(gw, xh), 1))));
    rc |= set(k, 0, reshape(k, dx, k->n->edge[0].ndim, k->n->edge[0].sizes));
  }
  if (needs(k, 1)) rc |= set(k, 1, reshape(k, BNRED(RT_OP_SUM, MUL(Gm, xh), 0), k->n->edge[1].ndim, k->n->edge[1].sizes));
  if (needs(k, 2)) rc |= set(k, 2, reshape(k, BNRED(RT_OP_SUM, Gm, 0), k->n->edge[2].ndim, k->n->edge[2].sizes));
#undef BNRED
  return rc;
}

static int norm_backward(JitCtx *k)
{
  const NormExt *ne = k->n->ext;
  td_tensor *x = jit_saved_in(k, 0), *w = k->n->edge[1].saved ? jit_saved_in(k, 1) : NULL;
  if (!x || (k->n->edge[1].saved && !w) || !GO) return TD_ERR_GRAD;
  if (td_grad_enabled()) return ne->bn ? bn_composite(k, ne, x, w) : norm_composite(k, ne, x, w);
  td_tensor *g = contig(k, GO), *xc = contig(k, x), *wc = w ? contig(k, w) : NULL;
  if (!g || !xc || (w && !wc)) return TD_ERR_NOMEM;
  if (g->device_type != TD_CPU || !g->ptr || g->scalar_type != x->scalar_type)
    return rt_err(TD_ERR_GRAD, "%s: the gradient must be a CPU tensor of %s", k->n->rule->name,
                  td_dtype_name(x->scalar_type));
  int dt = x->scalar_type;
  JitEdge *e = k->n->edge;
  td_tensor *dx = needs(k, 0) ? jit_tmp(k, rt_tensor_new(x->ndim, x->sizes, dt)) : NULL;
  td_tensor *dw = needs(k, 1) ? jit_tmp(k, rt_tensor_new(e[1].ndim, e[1].sizes, dt)) : NULL;
  td_tensor *db = needs(k, 2) ? jit_tmp(k, rt_tensor_new(e[2].ndim, e[2].sizes, dt)) : NULL;
  if ((needs(k, 0) && !dx) || (needs(k, 1) && !dw) || (needs(k, 2) && !db)) return TD_ERR_NOMEM;
  RtNormJob j = { .kind = ne->bn ? RT_NORM_BN_BWD : RT_NORM_BWD, .dtype = dt, .R = ne->R, .D = ne->D, .M = ne->S,
                  .x = xc->ptr, .g = g->ptr,
                  .w = wc ? wc->ptr : NULL, .dx = dx ? dx->ptr : NULL, .dw = dw ? dw->ptr : NULL,
                  .db = db ? db->ptr : NULL, .mean = ne->mean ? ne->mean->ptr : NULL, .rstd = ne->rstd->ptr,
                  .rms = ne->rms };
  int rc = rt_norm_run(&j);
  if (rc) return rc;
  return set(k, 0, dx) | set(k, 1, dw) | set(k, 2, db);
}

static const JitGradRule layer_norm_rule = { "layer_norm_backward", norm_backward, 0 };
static const JitGradRule rms_norm_rule = { "rms_norm_backward", norm_backward, 0 };
static const JitGradRule batch_norm_rule = { "batch_norm_backward", norm_backward, 0 };

static td_tensor *norm_entry(const char *fn, td_tensor *x, int nd, td_tensor *w, td_tensor *b, double eps, int rms)
{
  RT_ARG(x, fn, 1, NULL);
  RT_INTERRUPT_CHECK(NULL);
  if (fused_arg(fn, x, 1, -1) || (w && fused_arg(fn, w, 3, x->scalar_type)) ||
      (b && fused_arg(fn, b, 4, x->scalar_type)))
    return NULL;
  if (nd < 1 || nd > x->ndim)
    return rt_errp(TD_ERR_SHAPE, "%s: %d normalized dims for an input of shape %s", fn, nd, RT_SHAPE(x));
  int64_t D = 1, R = 1;
  for (int i = 0; i < x->ndim; i++) { if (i < x->ndim - nd) R *= x->sizes[i]; else D *= x->sizes[i]; }
  if ((w && w->nelem != D) || (b && b->nelem != D))
    return rt_errp(TD_ERR_SHAPE, "%s: %s of shape %s does not match the %lld normalized elements of input %s", fn,
                   w && w->nelem != D ? "weight" : "bias", RT_SHAPE(w && w->nelem != D ? w : b), (long long)D,
                   RT_SHAPE(x));
  int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, fn, 1, &x) : -1;
  int dt = x->scalar_type;
  td_tensor *xc = rt_as_contig(x), *wc = w ? rt_as_contig(w) : NULL, *bc = b ? rt_as_contig(b) : NULL;
  td_tensor *y = rt_tensor_new(x->ndim, x->sizes, dt);
  td_tensor *mean = rms ? NULL : rt_tensor_new(1, &R, dt), *rstd = rt_tensor_new(1, &R, dt);
  NormExt *ne = calloc(1, sizeof *ne);
  JitNode *n = NULL;
  bool grad = wants_grad(x, w, b);
  if (!xc || (w && !wc) || (b && !bc) || !y || (!rms && !mean) || !rstd || !ne) {
    rt_err(TD_ERR_NOMEM, "%s: out of memory", fn);
    goto fail;
  }
  RtNormJob j = { .kind = RT_NORM_FWD, .dtype = dt, .R = R, .D = D, .x = xc->ptr, .w = wc ? wc->ptr : NULL,
                  .b = bc ? bc->ptr : NULL, .y = y->ptr, .mean = mean ? mean->ptr : NULL, .rstd = rstd->ptr,
                  .eps = eps, .rms = rms, .y_cold = rt_cold(y) };
  if (rt_norm_run(&j)) goto fail;
  if (grad) {
    if (!(n = jit_node_custom(rms ? &rms_norm_rule : &layer_norm_rule, 3))) goto fail;
    edge_of(n, 0, x, true); edge_of(n, 1, w, true); edge_of(n, 2, b, false);
    *ne = (NormExt){ .mean = mean, .rstd = rstd, .eps = eps, .R = R, .D = D, .S = 1, .rms = rms };
    mean = rstd = NULL;
    n->ext = ne; n->ext_free = norm_ext_free; ne = NULL;
    node_attach(n, y);
  }
  td_release(xc); td_release(wc); td_release(bc); td_release(mean); td_release(rstd); free(ne);
  if (pe >= 0) rt_prof_end(pe);
  return y;
fail:
  td_release(xc); td_release(wc); td_release(bc); td_release(y); td_release(mean); td_release(rstd); free(ne);
  if (pe >= 0) rt_prof_end(pe);
  return NULL;
}

TD_API td_tensor *td_layer_norm(td_tensor *x, int nd, td_tensor *w, td_tensor *b, double eps)
{
  return norm_entry("layer_norm", x, nd, w, b, eps, 0);
}

TD_API td_tensor *td_rms_norm(td_tensor *x, int nd, td_tensor *w, double eps)
{
  return norm_entry("rms_norm", x, nd, w, NULL, eps, 1);
}

TD_API td_tensor *td_batch_norm(td_tensor *x, td_tensor *w, td_tensor *b, double eps, td_tensor **mean_out,
                                td_tensor **var_out)
{
  const char *fn = "batch_norm";
  if (mean_out) *mean_out = NULL;
  if (var_out) *var_out = NULL;
  RT_ARG(x, fn, 1, NULL);
  RT_INTERRUPT_CHECK(NULL);
  if (fused_arg(fn, x, 1, -1) || (w && fused_arg(fn, w, 2, x->scalar_type)) || (b && fused_arg(fn, b, 3, x->scalar_type)))
    return NULL;
  if (x->ndim < 2) return rt_errp(TD_ERR_SHAPE, "batch_norm: expected an input (N, C, ...), got %s", RT_SHAPE(x));
  int64_t N = x->sizes[0], C = x->sizes[1], S = 1;
  for (int i = 2; i < x->ndim; i++) S *= x->sizes[i];
  if ((w && w->nelem != C) || (b && b->nelem != C))
    return rt_errp(TD_ERR_SHAPE, "batch_norm: %s of shape %s for %lld channels", w && w->nelem != C ? "weight" : "bias",
                   RT_SHAPE(w && w->nelem != C ? w : b), (long long)C);
  int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, fn, 1, &x) : -1;
  int dt = x->scalar_type;
  td_tensor *xc = rt_as_contig(x), *wc = w ? rt_as_contig(w) : NULL, *bc = b ? rt_as_contig(b) : NULL;
  td_tensor *y = rt_tensor_new(x->ndim, x->sizes, dt);
  td_tensor *mean = rt_tensor_new(1, &C, dt), *rstd = rt_tensor_new(1, &C, dt), *var = rt_tensor_new(1, &C, dt);
  NormExt *ne = calloc(1, sizeof *ne);
  JitNode *n = NULL;
  if (!xc || (w && !wc) || (b && !bc) || !y || !mean || !rstd || !var || !ne) {
    rt_err(TD_ERR_NOMEM, "%s: out of memory", fn);
    goto fail;
  }
  RtNormJob j = { .kind = RT_NORM_BN_FWD, .dtype = dt, .R = N, .D = C, .M = S, .x = xc->ptr,
                  .w = wc ? wc->ptr : NULL, .b = bc ? bc->ptr : NULL, .y = y->ptr, .mean = mean->ptr,
                  .rstd = rstd->ptr, .var = var->ptr, .eps = eps };
  if (rt_norm_run(&j)) goto fail;
  if (mean_out) { td_retain(mean); *mean_out = mean; }
  if (var_out) { td_retain(var); *var_out = var; }
  if (wants_grad(x, w, b)) {
    if (!(n = jit_node_custom(&batch_norm_rule, 3))) goto fail;
    edge_of(n, 0, x, true); edge_of(n, 1, w, true); edge_of(n, 2, b, false);
    *ne = (NormExt){ .mean = mean, .rstd = rstd, .eps = eps, .R = N, .D = C, .S = S, .bn = 1 };
    mean = rstd = NULL;
    n->ext = ne; n->ext_free = norm_ext_free; ne = NULL;
    node_attach(n, y);
  }
  td_release(xc); td_release(wc); td_release(bc); td_release(mean); td_release(rstd); td_release(var); free(ne);
  if (pe >= 0) rt_prof_end(pe);
  return y;
fail:
  if (mean_out && *mean_out) { td_release(*mean_out); *mean_out = NULL; }
  if (var_out && *var_out) { td_release(*var_out); *var_out = NULL; }
  td_release(xc); td_release(wc); td_release(bc); td_release(y); td_release(mean); td_release(rstd); td_release(var);
  free(ne);
  if (pe >= 0) rt_prof_end(pe);
  return NULL;
}

/* -- cross_entropy ------------------------------------------------------------------------------ */

typedef struct {
  td_tensor *lse, *target, *w;   /* contiguous */
  double scale, ls, wsum;        /* scale: 1 / sum of the weights for 'mean', else 1 */
  int64_t ignore;
  int reduction;
} CeExt;

static void ce_ext_free(void *p)
{
  CeExt *e = p;
  td_release(e->lse); td_release(e->target); td_release(e->w);
  free(e);
}

/* create_graph: dx = (g s_i) (A_i softmax(x) + B), from ops on x and g, with
** the constants s_i = scale [row valid], A_i = (1 - ls) wt + ls W / C and
** B_ic = -(1 - ls) wt [c = t] - ls w_c / C (0 on ignored rows). */
static int ce_composite(JitCtx *k, const CeExt *ce, td_tensor *x)
{
  int64_t N = x->sizes[0], C = x->sizes[1], n1[2] = { N, 1 };
  int dt = x->scalar_type;
  td_tensor *S = jit_tmp(k, rt_tensor_new(2, n1, dt)), *A = jit_tmp(k, rt_tensor_new(2, n1, dt));
  td_tensor *B = jit_tmp(k, rt_full_on(TD_CPU, 2, x->sizes, 0, dt));
  if (!S || !A || !B) return TD_ERR_NOMEM;
  const int64_t *t = ce->target->ptr;
  for (int64_t i = 0; i < N; i++) {
    bool valid = t[i] != ce->ignore;
    double wt = !valid ? 0 : ce->w ? rt_load((char *)ce->w->ptr + t[i] * rt_dtype_size(dt), dt) : 1;
    rt_store((char *)S->ptr + i * rt_dtype_size(dt), dt, valid ? ce->scale : 0);
    rt_store((char *)A->ptr + i * rt_dtype_size(dt), dt, (1 - ce->ls) * wt + ce->ls * ce->wsum / (double)C);
    if (!valid) continue;
    char *row = (char *)B->ptr + i * C * rt_dtype_size(dt);
    if (ce->ls > 0)
      for (int64_t c = 0; c < C; c++)
        rt_store(row + c * rt_dtype_size(dt), dt,
                 -ce->ls / (double)C * (ce->w ? rt_load((char *)ce->w->ptr + c * rt_dtype_size(dt), dt) : 1));
    rt_store(row + t[i] * rt_dtype_size(dt), dt, rt_load(row + t[i] * rt_dtype_size(dt), dt) - (1 - ce->ls) * wt);
  }
  td_attrs at = { .ndims = -1, .dtype = -1 };
  at.i[0] = 1;
  td_tensor *p = jit_tmp(k, td_op(RT_OP_SOFTMAX, 1, &x, &at));
  td_tensor *gv = ce->reduction == TD_REDUCE_NONE ? reshape(k, GO, 2, n1) : GO;
  return set(k, 0, MUL(MUL(gv, S), ADD(MUL(A, p), B)));
}

static int ce_backward(JitCtx *k)
{
  const CeExt *ce = k->n->ext;
  td_tensor *x = jit_saved_in(k, 0);
  if (!x || !GO) return TD_ERR_GRAD;
  if (td_grad_enabled()) return ce_composite(k, ce, x);
  td_tensor *xc = contig(k, x), *g = contig(k, GO);
  if (!xc || !g) return TD_ERR_NOMEM;
  if (g->device_type != TD_CPU || !g->ptr)
    return rt_err(TD_ERR_GRAD, "cross_entropy_backward: the gradient must be a CPU tensor");
  int dt = x->scalar_type;
  td_tensor *dx = jit_tmp(k, rt_tensor_new(x->ndim, x->sizes, dt));
  td_tensor *gd = g->scalar_type == dt ? g : jit_tmp(k, td_cast(g, dt));
  if (!dx || !gd) return TD_ERR_NOMEM;
  RtNormJob j = { .kind = RT_NORM_CE_BWD, .dtype = dt, .R = x->sizes[0], .D = x->sizes[1], .x = xc->ptr,
                  .g = gd->ptr, .w = ce->w ? ce->w->ptr : NULL, .dx = dx->ptr, .target = ce->target->ptr,
                  .ignore = ce->ignore, .ls = ce->ls, .wsum = ce->wsum, .lse = ce->lse->ptr,
                  .go_scale = ce->scale, .go_rows = ce->reduction == TD_REDUCE_NONE, .go_stride = 1 };
  if (!j.go_rows) j.go = rt_load(gd->ptr, dt);
  int rc = rt_norm_run(&j);
  return rc ? rc : set(k, 0, dx);
}

static const JitGradRule ce_rule = { "cross_entropy_backward", ce_backward, 0 };

TD_API td_tensor *td_cross_entropy(td_tensor *x, td_tensor *target, td_tensor *w, int64_t ignore, int reduction,
                                   double ls)
{
  const char *fn = "cross_entropy";
  RT_ARG(x, fn, 1, NULL);
  RT_ARG(target, fn, 2, NULL);
  RT_INTERRUPT_CHECK(NULL);
  if (fused_arg(fn, x, 1, -1) || fused_arg(fn, target, 2, TD_INT64) || (w && fused_arg(fn, w, 3, x->scalar_type)))
    return NULL;
  if (x->ndim != 2 || target->ndim != 1 || target->sizes[0] != x->sizes[0])
    return rt_errp(TD_ERR_SHAPE, "%s: expected logits (N, C) and target (N), got %s and %s", fn, RT_SHAPE(x),
                   RT_SHAPE(target));
  int64_t N = x->sizes[0], C = x->sizes[1];
  if (w && w->nelem != C)
    return rt_errp(TD_ERR_SHAPE, "%s: weight of shape %s for %lld classes", fn, RT_SHAPE(w), (long long)C);
  if (reduction < TD_REDUCE_NONE || reduction > TD_REDUCE_SUM || !(ls >= 0 && ls <= 1))
    return rt_errp(TD_ERR_ARG, "%s: reduction %d or label smoothing %g out of range", fn, reduction, ls);
  if (w && (w->flags & TD_TF_REQUIRES_GRAD) && td_grad_enabled())
    return rt_errp(TD_ERR_GRAD, "%s: the fused kernel does not differentiate the class weights", fn);
  int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, fn, 1, &x) : -1;
  int dt = x->scalar_type;
  td_tensor *xc = rt_as_contig(x), *tc = rt_as_contig(target), *wc = w ? rt_as_contig(w) : NULL;
  td_tensor *lse = rt_tensor_new(1, &N, dt), *y = NULL;
  double *rows = malloc((size_t)(N > 0 ? N : 1) * 2 * sizeof(double));
  CeExt *ce = calloc(1, sizeof *ce);
  JitNode *n = NULL;
  if (!xc || !tc || (w && !wc) || !lse || !rows || !ce) { rt_err(TD_ERR_NOMEM, "%s: out of memory", fn); goto fail; }
  const int64_t *t = tc->ptr;
  for (int64_t i = 0; i < N; i++)
    if (t[i] != ignore && (t[i] < 0 || t[i] >= C)) {
      rt_err(TD_ERR_INDEX, "%s: target %lld is out of range for %lld classes", fn, (long long)t[i], (long long)C);
      goto fail;
    }
  double wsum = (double)C;
  if (wc) { wsum = 0; for (int64_t c = 0; c < C; c++) wsum += rt_load((char *)wc->ptr + c * rt_dtype_size(dt), dt); }
  RtNormJob j = { .kind = RT_NORM_CE_FWD, .dtype = dt, .R = N, .D = C, .x = xc->ptr, .w = wc ? wc->ptr : NULL,
                  .target = t, .ignore = ignore, .ls = ls, .wsum = wsum, .lse = lse->ptr,
                  .rowloss = rows, .rowweight = rows + N };
  if (rt_norm_run(&j)) goto fail;
  double total = 0, denom = 0;
  for (int64_t i = 0; i < N; i++) { total += rows[i]; denom += rows[N + i]; }
  if (reduction == TD_REDUCE_NONE) {
    if (!(y = rt_tensor_new(1, &N, dt))) goto fail;
    for (int64_t i = 0; i < N; i++) rt_store((char *)y->ptr + i * rt_dtype_size(dt), dt, rows[i]);
  } else if (!(y = rt_full_on(TD_CPU, 0, NULL, reduction == TD_REDUCE_MEAN ? total / denom : total, dt))) goto fail;
  if (wants_grad(x, NULL, NULL)) {
    if (!(n = jit_node_custom(&ce_rule, 1))) goto fail;
    edge_of(n, 0, x, true);
    *ce = (CeExt){ lse, tc, wc, reduction == TD_REDUCE_MEAN ? 1 / denom : 1, ls, wsum, ignore, reduction };
    lse = tc = wc = NULL;
    n->ext = ce; n->ext_free = ce_ext_free; ce = NULL;
    node_attach(n, y);
  }
  td_release(xc); td_release(tc); td_release(wc); td_release(lse); free(rows); free(ce);
  if (pe >= 0) rt_prof_end(pe);
  return y;
fail:
  td_release(xc); td_release(tc); td_release(wc); td_release(lse); td_release(y); free(rows); free(ce);
  if (pe >= 0) rt_prof_end(pe);
  return NULL;
}

/* -- softmax and log_softmax backward ------------------------------------------------------- */

bool rt_softmax_grad_fits(const td_tensor *g, const td_tensor *y)
{
  return !jit_tracing && g->device_type == TD_CPU && y->device_type == TD_CPU && g->ptr && y->ptr &&
         rt_is_float(y->scalar_type) && g->scalar_type == y->scalar_type && g->ndim == y->ndim &&
         !memcmp(g->sizes, y->sizes, (size_t)y->ndim * sizeof(int64_t)) &&
         rt_tensor_is_contig(g) && rt_tensor_is_contig(y);
}

td_tensor *rt_softmax_grad(const td_tensor *g, const td_tensor *y, int64_t dim, int log)
{
  td_tensor *dx = rt_tensor_new(y->ndim, y->sizes, y->scalar_type);
  if (!dx) return NULL;
  RtNormJob j = { .kind = log ? RT_NORM_LSM_BWD : RT_NORM_SM_BWD, .dtype = y->scalar_type, .R = 1, .D = 1, .M = 1,
                  .g = g->ptr, .y = y->ptr, .dx = dx->ptr };
  for (int i = 0; i < y->ndim; i++) {
    if (i < dim) j.R *= y->sizes[i];
    else if (i == dim) j.D = y->sizes[i];
    else j.M *= y->sizes[i];
  }
  if (dx->nelem > 0 && rt_norm_run(&j)) { td_release(dx); return NULL; }
  return dx;
}
