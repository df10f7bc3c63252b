/*
** jit_conv.c -- eager convolution and pooling (td_conv2d, td_pool2d): the
** kernels of runtime/rt_convgemm.c, which never hold the whole im2col matrix,
** behind a custom autograd node whose backward is one kernel too. Under
** create_graph the backward composes ops instead (unfold, matmul and fold for
** the convolution, scatter_add or fold for pooling), so higher-order
** gradients stay right (td_conv3d: float32 on rt_convmk.c's tiles, no
** create_graph). tide.compile keeps the Lua composite (im2col +
** matmul, windows + a reduction), which it lowers itself.
*/
#include "jit_fused.h"
#include <stdlib.h>

typedef struct { RtConvGeom g; td_tensor *idx; int max; } ConvExt;

static void conv_ext_free(void *p)
{
  ConvExt *e = p;
  td_release(e->idx);
  free(e);
}

/* the window attrs of unfold/fold (rt_conv.c) for geometry g */
static td_attrs win_attrs(const RtConvGeom *g)
{
  td_attrs at = { .ndims = 6, .dtype = -1 };
  at.i[0] = g->kh; at.i[1] = g->kw; at.i[2] = g->sh; at.i[3] = g->sw;
  at.dims[0] = g->ph; at.dims[1] = g->pw; at.dims[2] = g->dh; at.dims[3] = g->dw;
  at.dims[4] = g->H; at.dims[5] = g->W;
  return at;
}

static td_tensor *op1a(JitCtx *k, int op, td_tensor *a, const td_attrs *at)
{ return a ? jit_tmp(k, td_op(op, 1, &a, at)) : NULL; }
static td_tensor *permute(JitCtx *k, td_tensor *a, int nd, const int64_t *perm)
{ return a ? jit_tmp(k, td_permute(a, nd, perm)) : NULL; }

/* -- conv2d ----------------------------------------------------------------------------------- */

/* create_graph: from ops, cols = unfold(x) (N, G, K, L), dY (N, G, Og, L):
**   dx = fold(W^T @ dY), dw = sum_n dY @ cols^T, db = sum dY over (n, h, w) */
static int conv_composite(JitCtx *k, const RtConvGeom *g, td_tensor *x, td_tensor *w)
{
  int64_t Og = g->O / g->G, Cg = g->C / g->G, K = Cg * g->kh * g->kw, L = g->OH * g->OW;
  (void)Og;
  int64_t sw[3] = { g->G, Og, K }, sy[4] = { g->N, g->G, Og, L }, sc[4] = { g->N, g->G, K, L };
  int64_t p021[3] = { 0, 2, 1 }, p0132[4] = { 0, 1, 3, 2 };
  td_attrs at = win_attrs(g);
  td_tensor *dy = reshape(k, GO, 4, sy);
  int rc = 0;
  if (needs(k, 0)) {
    int64_t s3[3] = { g->N, g->C * g->kh * g->kw, L };
    td_tensor *dc = op2(k, RT_OP_MATMUL, permute(k, reshape(k, w, 3, sw), 3, p021), dy);
    rc |= set(k, 0, op1a(k, RT_OP_FOLD, reshape(k, dc, 3, s3), &at));
  }
  if (needs(k, 1)) {
    td_tensor *cols = reshape(k, op1a(k, RT_OP_UNFOLD, x, &at), 4, sc);
    td_tensor *dw = red(k, RT_OP_SUM, op2(k, RT_OP_MATMUL, dy, permute(k, cols, 4, p0132)), 0, 0);
    rc |= set(k, 1, reshape(k, dw, k->n->edge[1].ndim, k->n->edge[1].sizes));
  }
  if (needs(k, 2)) {
    td_attrs s = { .ndims = 3, .dtype = -1, .dims = { 0, 2, 3 } };
    rc |= set(k, 2, op1a(k, RT_OP_SUM, GO, &s));
  }
  return rc;
}

/* dx, dw, db of a convolution node by rt_conv_run (no create_graph); fn names the rule */
static int conv_kernels_backward(JitCtx *k, const char *fn)
{
  const ConvExt *ce = k->n->ext;
  td_tensor *x = jit_saved_in(k, 0), *w = jit_saved_in(k, 1);
  td_tensor *g = contig(k, GO), *xc = contig(k, x), *wc = contig(k, w);
  if (!g || !xc || !wc) return TD_ERR_NOMEM;
  int dt = x->scalar_type;
  if (g->device_type != TD_CPU || !g->ptr || g->scalar_type != dt)
    return rt_err(TD_ERR_GRAD, "%s: the gradient must be a CPU tensor of %s", fn, td_dtype_name(dt));
  JitEdge *e = k->n->edge;
  td_tensor *dx = needs(k, 0) ? jit_tmp(k, rt_tensor_new(x->ndim, x->sizes, dt)) : NULL;
  td_tensor *dw = needs(k, 1) ? jit_tmp(k, rt_tensor_new(w->ndim, w->sizes, dt)) : NULL;
  td_tensor *db = needs(k, 2) ? jit_tmp(k, rt_tensor_new(e[2].ndim, e[2].sizes, dt)) : NULL;
  if ((needs(k, 0) && !dx) || (needs(k, 1) && !dw) || (needs(k, 2) && !db)) return TD_ERR_NOMEM;
  RtConvJob j = { .kind = RT_CONV_BWD, .dtype = dt, .g = ce->g, .x = xc->ptr, .w = wc->ptr, .dy = g->ptr,
                  .dx = dx && dx->nelem > 0 ? dx->ptr : NULL, .dw = dw && dw->nelem > 0 ? dw->ptr : NULL,
                  .db = db && db->nelem > 0 ? db->ptr : NULL };
  int rc = rt_conv_run(&j);
  return rc ? rc : set(k, 0, dx) | set(k, 1, dw) | set(k, 2, db);
}

static int conv_backward(JitCtx *k)
{
  td_tensor *x = jit_saved_in(k, 0), *w = jit_saved_in(k, 1);
  if (!x || !w || !GO) return TD_ERR_GRAD;
  if (td_grad_enabled()) return conv_composite(k, &((const ConvExt *)k->n->ext)->g, x, w);
  return conv_kernels_backward(k, "conv2d_backward");
}

static const JitGradRule conv_rule = { "conv2d_backward", conv_backward, 0 };

/* The output plane of windows (checked sizes); error names fn. */
static int conv_geom(const char *fn, RtConvGeom *g)
{
  if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 || g->pw < 0)
    return rt_err(TD_ERR_ARG, "%s: kernel (%lld,%lld), stride (%lld,%lld) and dilation (%lld,%lld) must be positive "
                  "and padding (%lld,%lld) non-negative", fn, (long long)g->kh, (long long)g->kw, (long long)g->sh,
                  (long long)g->sw, (long long)g->dh, (long long)g->dw, (long long)g->ph, (long long)g->pw);
  /* dilated kernel eh x ew, padded input Hp x Wp: every product checked */
  int64_t eh, ew, Hp, Wp, L, K, Y;
  if (rt_size_mul(fn, g->dh, g->kh - 1, &eh) || rt_size_add(fn, eh, 1, &eh) ||
      rt_size_mul(fn, g->dw, g->kw - 1, &ew) || rt_size_add(fn, ew, 1, &ew) ||
      rt_size_mul(fn, 2, g->ph, &Hp) || rt_size_add(fn, Hp, g->H, &Hp) ||
      rt_size_mul(fn, 2, g->pw, &Wp) || rt_size_add(fn, Wp, g->W, &Wp))
    return TD_ERR_SHAPE;
  if (Hp < eh || Wp < ew)
    return rt_err(TD_ERR_SHAPE, "%s: the %lldx%lld kernel (dilated %lldx%lld) does not fit the padded %lldx%lld input",
                  fn, (long long)g->kh, (long long)g->kw, (long long)eh, (long long)ew, (long long)Hp, (long long)Wp);
  g->OH = (Hp - eh) / g->sh + 1;
  g->OW = (Wp - ew) / g->sw + 1;
  if (rt_size_mul(fn, g->OH, g->OW, &L) || rt_size_mul(fn, g->kh, g->kw, &K) ||
      rt_size_mul(fn, K, g->C / (g->G > 0 ? g->G : 1), &K) || rt_size_mul(fn, L, g->N, &Y) ||
      rt_size_mul(fn, Y, g->O, &Y))
    return TD_ERR_SHAPE;
  if (K > INT32_MAX || L > INT32_MAX)
    return rt_err(TD_ERR_SHAPE, "%s: %lld windows of %lld elements are above BLAS's limit of %d", fn, (long long)L,
                  (long long)K, INT32_MAX);
  return 0;
}

/* y (nd dims ys) = the convolution of geometry g, and its node (rule) when an
** input wants a gradient; fn names the op */
static td_tensor *conv_forward(const char *fn, const RtConvGeom *g, td_tensor *x, td_tensor *w, td_tensor *b,
                               int nd, const int64_t *ys, const JitGradRule *rule)
{
  int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, fn, 1, &x) : -1;
  int dt = x->scalar_type;
  td_tensor *xc = rt_as_contig(x), *wc = rt_as_contig(w), *bc = b ? rt_as_contig(b) : NULL;
  td_tensor *y = rt_tensor_new(nd, ys, dt);
  ConvExt *ce = calloc(1, sizeof *ce);
  JitNode *n = NULL;
  if (!xc || !wc || (b && !bc) || !y || !ce) { rt_err(TD_ERR_NOMEM, "%s: out of memory", fn); goto fail; }
  RtConvJob j = { .kind = RT_CONV_FWD, .dtype = dt, .g = *g, .x = xc->ptr, .w = wc->ptr, .b = bc ? bc->ptr : NULL,
                  .y = y->ptr };
  if (y->nelem > 0 && rt_conv_run(&j)) goto fail;
  if (wants_grad(x, w, b)) {
    if (!(n = jit_node_custom(rule, 3))) goto fail;
    edge_of(n, 0, x, true); edge_of(n, 1, w, true); edge_of(n, 2, b, false);
    ce->g = *g;
    n->ext = ce; n->ext_free = conv_ext_free; ce = NULL;
    node_attach(n, y);
  }
  td_release(xc); td_release(wc); td_release(bc); free(ce);
  if (pe >= 0) rt_prof_end(pe);
  return y;
fail:
  td_release(xc); td_release(wc); td_release(bc); td_release(y); free(ce);
  if (pe >= 0) rt_prof_end(pe);
  return NULL;
}

TD_API td_tensor *td_conv2d(td_tensor *x, td_tensor *w, td_tensor *b, const int64_t *p, int64_t groups)
{
  const char *fn = "conv2d";
  RT_ARG(x, fn, 1, NULL);
  RT_ARG(w, fn, 2, NULL);
  RT_INTERRUPT_CHECK(NULL);
  if (fused_arg(fn, x, 1, -1) || fused_arg(fn, w, 2, x->scalar_type) || (b && fused_arg(fn, b, 3, x->scalar_type)))
    return NULL;
  if (x->ndim != 4 || w->ndim != 4 || groups < 1 || x->sizes[1] % groups || w->sizes[0] % groups ||
      w->sizes[1] * groups != x->sizes[1] || (b && b->nelem != w->sizes[0]))
    return rt_errp(TD_ERR_SHAPE, "conv2d: input %s, weight %s%s%s and %lld groups do not fit (N, C, H, W), "
                   "(O, C/groups, kh, kw) and (O)", RT_SHAPE(x), RT_SHAPE(w), b ? ", bias " : "", b ? RT_SHAPE(b) : "",
                   (long long)groups);
  RtConvGeom g = { .N = x->sizes[0], .C = x->sizes[1], .H = x->sizes[2], .W = x->sizes[3], .O = w->sizes[0],
                   .G = groups, .kh = w->sizes[2], .kw = w->sizes[3], .sh = p[0], .sw = p[1], .ph = p[2], .pw = p[3],
                   .dh = p[4], .dw = p[5] };
  if (conv_geom(fn, &g)) return NULL;
  int64_t ys[4] = { g.N, g.O, g.OH, g.OW };
  return conv_forward(fn, &g, x, w, b, 4, ys, &conv_rule);
}

/* -- conv3d ---------------------------------------------------------------------------------- */

/* The backward of td_conv3d: dx, dw, db by rt_convmk.c's tiles. Under
** create_graph it has no composite of ops (F.conv3d's composite, F.fused =
** false, is differentiable to any order): a clear error instead. */
static int conv3d_backward(JitCtx *k)
{
  if (!jit_saved_in(k, 0) || !jit_saved_in(k, 1) || !GO) return TD_ERR_GRAD;
  if (td_grad_enabled())
    return rt_err(TD_ERR_GRAD, "conv3d_backward: create_graph (a gradient of the gradient) is not supported by the "
                  "fused conv3d; set tide.nn.functional.fused = false for its composite form");
  return conv_kernels_backward(k, "conv3d_backward");
}

static const JitGradRule conv3d_rule = { "conv3d_backward", conv3d_backward, 0 };

TD_API td_tensor *td_conv3d(td_tensor *x, td_tensor *w, td_tensor *b, const int64_t *p, int64_t groups)
{
  const char *fn = "conv3d";
  RT_ARG(x, fn, 1, NULL);
  RT_ARG(w, fn, 2, NULL);
  RT_INTERRUPT_CHECK(NULL);
  if (fused_arg(fn, x, 1, -1) || fused_arg(fn, w, 2, x->scalar_type) || (b && fused_arg(fn, b, 3, x->scalar_type)))
    return NULL;
  if (x->scalar_type != TD_FLOAT32)
    return rt_errp(TD_ERR_DTYPE, "conv3d: the eager kernel takes float32, got %s (F.fused = false: the composite)",
                   td_dtype_name(x->scalar_type));
  if (x->ndim != 5 || w->ndim != 5 || groups < 1 || x->sizes[1] % groups || w->sizes[0] % groups ||
      w->sizes[1] * groups != x->sizes[1] || (b && b->nelem != w->sizes[0]))
    return rt_errp(TD_ERR_SHAPE, "conv3d: input %s, weight %s%s%s and %lld groups do not fit (N, C, D, H, W), "
                   "(O, C/groups, kd, kh, kw) and (O)", RT_SHAPE(x), RT_SHAPE(w), b ? ", bias " : "",
                   b ? RT_SHAPE(b) : "", (long long)groups);
  RtConvGeom g = { .N = x->sizes[0], .C = x->sizes[1], .D = x->sizes[2], .H = x->sizes[3], .W = x->sizes[4],
                   .O = w->sizes[0], .G = groups, .kd = w->sizes[2], .kh = w->sizes[3], .kw = w->sizes[4],
                   .sd = p[0], .sh = p[1], .sw = p[2], .pd = p[3], .ph = p[4], .pw = p[5],
                   .dd = p[6], .dh = p[7], .dw = p[8] };
  if (conv_geom(fn, &g)) return NULL;
  /* the depth as conv_geom's plane: dilated kernel ed, padded depth Dp */
  int64_t ed, Dp, Y;
  if (g.kd < 1 || g.sd < 1 || g.dd < 1 || g.pd < 0)
    return rt_errp(TD_ERR_ARG, "conv3d: depth kernel %lld, stride %lld and dilation %lld must be positive and "
                   "padding %lld non-negative", (long long)g.kd, (long long)g.sd, (long long)g.dd, (long long)g.pd);
  if (rt_size_mul(fn, g.dd, g.kd - 1, &ed) || rt_size_add(fn, ed, 1, &ed) || rt_size_mul(fn, 2, g.pd, &Dp) ||
      rt_size_add(fn, Dp, g.D, &Dp))
    return NULL;
  if (Dp < ed)
    return rt_errp(TD_ERR_SHAPE, "conv3d: the depth %lld kernel (dilated %lld) does not fit the padded depth %lld",
                   (long long)g.kd, (long long)ed, (long long)Dp);
  g.OD = (Dp - ed) / g.sd + 1;
  if (rt_size_mul(fn, g.OD, g.OH * g.OW * g.N, &Y) || rt_size_mul(fn, Y, g.O, &Y)) return NULL;
  int64_t ys[5] = { g.N, g.O, g.OD, g.OH, g.OW };
  return conv_forward(fn, &g, x, w, b, 5, ys, &conv3d_rule);
}

/* -- conv_transpose2d ------------------------------------------------------------------------- */

/* The transposed convolution is conv2d's input gradient: with the conv2d
** whose input is y (N, Cout, OH', OW') and weight w (Cin, Cout/G, kh, kw)
** (geometry g, its output plane x's H x W):
**   y = dX(dY = x) + b, dx = conv2d(GO, w), dw = conv2d's dW with input GO and dY = x,
**   db = GO summed over (n, h, w),
** rt_conv_run's kernels in those roles (no unfolded matrix in memory; the
** bias in the forward's epilogue; dx, dw and db one RT_CONVT_BWD job over
** one padded copy of GO, read through its strides). Under create_graph the
** same from ops: cols = unfold(GO) (N, G, K, L), dx = W (G, Cin/G, K) @ cols,
** dw = sum_n x (N, G, Cin/G, L) @ cols^T, db = sum(GO). */
static int convt_backward(JitCtx *k)
{
  const ConvExt *ce = k->n->ext;
  const RtConvGeom *g = &ce->g;
  td_tensor *x = jit_saved_in(k, 0), *w = jit_saved_in(k, 1);
  if (!x || !w || !GO) return TD_ERR_GRAD;
  if (td_grad_enabled()) {
    int64_t Og = g->O / g->G, K = g->C / g->G * g->kh * g->kw, L = g->OH * g->OW;
    int64_t sw[3] = { g->G, Og, K }, sx[4] = { g->N, g->G, Og, L }, sc[4] = { g->N, g->G, K, L };
    int64_t p0132[4] = { 0, 1, 3, 2 };
    td_attrs at = win_attrs(g);
    td_tensor *cols = needs(k, 0) || needs(k, 1) ? reshape(k, op1a(k, RT_OP_UNFOLD, GO, &at), 4, sc) : NULL;
    int rc = 0;
    if (needs(k, 0))
      rc |= set(k, 0, reshape(k, op2(k, RT_OP_MATMUL, reshape(k, w, 3, sw), cols), x->ndim, x->sizes));
    if (needs(k, 1)) {
      td_tensor *dw = red(k, RT_OP_SUM, op2(k, RT_OP_MATMUL, reshape(k, x, 4, sx), permute(k, cols, 4, p0132)), 0, 0);
      rc |= set(k, 1, reshape(k, dw, w->ndim, w->sizes));
    }
    if (needs(k, 2)) {
      td_attrs s = { .ndims = 3, .dtype = -1, .dims = { 0, 2, 3 } };
      rc |= set(k, 2, op1a(k, RT_OP_SUM, GO, &s));
    }
    return rc;
  }
  int dt = x->scalar_type;
  if (GO->device_type != TD_CPU || !GO->ptr || GO->scalar_type != dt)
    return rt_err(TD_ERR_GRAD, "conv_transpose2d_backward: the gradient must be a CPU tensor of %s", td_dtype_name(dt));
  /* GO is read in place through its strides when it has the output's shape (a sum's gradient is expanded) */
  int64_t os[4] = { g->N, g->C, g->H, g->W };
  bool strided = GO->ndim == 4 && !memcmp(GO->sizes, os, sizeof os);
  td_tensor *gc = strided ? GO : contig(k, GO), *xc = needs(k, 1) ? contig(k, x) : x, *wc = contig(k, w);
  if (!gc || !xc || !wc) return TD_ERR_NOMEM;
  JitEdge *e = k->n->edge;
  td_tensor *dx = needs(k, 0) ? jit_tmp(k, rt_tensor_new(x->ndim, x->sizes, dt)) : NULL;
  td_tensor *dw = needs(k, 1) ? jit_tmp(k, rt_tensor_new(w->ndim, w->sizes, dt)) : NULL;
  td_tensor *db = needs(k, 2) ? jit_tmp(k, rt_tensor_new(e[2].ndim, e[2].sizes, dt)) : NULL;
  if ((needs(k, 0) && !dx) || (needs(k, 1) && !dw) || (needs(k, 2) && !db)) return TD_ERR_NOMEM;
  /* an empty x (Cin = 0) or GO: nothing to convolve, dx empty or zero, dw zero; db zero or GO's sums */
  bool conv = x->nelem > 0 && gc->nelem > 0;
  td_tensor *z[3] = { conv ? NULL : dx, conv ? NULL : dw, gc->nelem > 0 ? NULL : db };
  for (int i = 0; i < 3; i++) if (z[i] && z[i]->nelem > 0) memset(z[i]->ptr, 0, (size_t)z[i]->nelem * rt_dtype_size(dt));
  if (conv || (db && gc->nelem > 0)) {
    RtConvJob j = { .kind = RT_CONVT_BWD, .dtype = dt, .g = *g, .x = gc->ptr, .xs = gc == GO ? GO->strides : NULL,
                    .w = wc->ptr, .dy = xc->ptr, .y = dx && conv ? dx->ptr : NULL, .dw = dw && conv ? dw->ptr : NULL,
                    .sx = db ? db->ptr : NULL };
    int rc = rt_conv_run(&j);
    if (rc) return rc;
  }
  return set(k, 0, dx) | set(k, 1, dw) | set(k, 2, db);
}

static const JitGradRule convt_rule = { "conv_transpose2d_backward", convt_backward, 0 };

TD_API td_tensor *td_conv_transpose2d(td_tensor *x, td_tensor *w, td_tensor *b, const int64_t *p, int64_t groups)
{
  const char *fn = "conv_transpose2d";
  RT_ARG(x, fn, 1, NULL);
  RT_ARG(w, fn, 2, NULL);
  RT_INTERRUPT_CHECK(NULL);
  if (fused_arg(fn, x, 1, -1) || fused_arg(fn, w, 2, x->scalar_type) || (b && fused_arg(fn, b, 3, x->scalar_type)))
    return NULL;
  if (x->ndim != 4 || w->ndim != 4 || groups < 1 || x->sizes[1] % groups || w->sizes[0] != x->sizes[1] ||
      p[6] < 1 || p[7] < 1 || (b && b->nelem != w->sizes[1] * groups))
    return rt_errp(TD_ERR_SHAPE, "conv_transpose2d: input %s, weight %s%s%s, %lld groups and output plane %lldx%lld do "
                   "not fit (N, Cin, H, W), (Cin, Cout/groups, kh, kw) and (Cout)", RT_SHAPE(x), RT_SHAPE(w),
                   b ? ", bias " : "", b ? RT_SHAPE(b) : "", (long long)groups, (long long)p[6], (long long)p[7]);
  int64_t Cout;
  if (rt_size_mul(fn, w->sizes[1], groups, &Cout)) return NULL;
  RtConvGeom g = { .N = x->sizes[0], .C = Cout, .H = p[6], .W = p[7], .O = x->sizes[1], .G = groups,
                   .kh = w->sizes[2], .kw = w->sizes[3], .sh = p[0], .sw = p[1], .ph = p[2], .pw = p[3],
                   .dh = p[4], .dw = p[5] };
  if (conv_geom(fn, &g)) return NULL;
  if (g.OH != x->sizes[2] || g.OW != x->sizes[3])
    return rt_errp(TD_ERR_SHAPE, "conv_transpose2d: an output plane %lldx%lld gives a %lldx%lld input plane, not %s",
                   (long long)g.H, (long long)g.W, (long long)g.OH, (long long)g.OW, RT_SHAPE(x));
  int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, fn, 1, &x) : -1;
  int dt = x->scalar_type;
  int64_t ys[4] = { g.N, g.C, g.H, g.W };
  td_tensor *xc = rt_as_contig(x), *wc = rt_as_contig(w), *bc = b ? rt_as_contig(b) : NULL;
  td_tensor *y = rt_tensor_new(4, ys, dt);
  ConvExt *ce = calloc(1, sizeof *ce);
  JitNode *n = NULL;
  if (!xc || !wc || (b && !bc) || !y || !ce) { rt_err(TD_ERR_NOMEM, "conv_transpose2d: out of memory"); goto fail; }
  if (y->nelem > 0) {
    if (x->nelem == 0) {                      /* no input: the bias alone */
      size_t es = rt_dtype_size(dt);
      memset(y->ptr, 0, (size_t)y->nelem * es);
      for (int64_t i = 0; bc && i < y->nelem; i++) {
        int64_t c = i / (g.H * g.W) % g.C;
        if (dt == TD_FLOAT64) ((double *)y->ptr)[i] = ((const double *)bc->ptr)[c];
        else if (dt == TD_FLOAT32) ((float *)y->ptr)[i] = ((const float *)bc->ptr)[c];
        else memcpy((char *)y->ptr + (size_t)i * es, (const char *)bc->ptr + (size_t)c * es, es);
      }
    } else {
      RtConvJob j = { .kind = RT_CONV_BWD, .dtype = dt, .g = g, .w = wc->ptr, .b = bc ? bc->ptr : NULL,
                      .dy = xc->ptr, .dx = y->ptr };
      if (rt_conv_run(&j)) goto fail;
    }
  }
  if (wants_grad(x, w, b)) {
    if (!(n = jit_node_custom(&convt_rule, 3))) goto fail;
    edge_of(n, 0, x, true); edge_of(n, 1, w, true); edge_of(n, 2, b, false);
    ce->g = g;
    n->ext = ce; n->ext_free = conv_ext_free; ce = NULL;
    node_attach(n, y);
  }
  td_release(xc); td_release(wc); td_release(bc); free(ce);
  if (pe >= 0) rt_prof_end(pe);
  return y;
fail:
  td_release(xc); td_release(wc); td_release(bc); td_release(y); free(ce);
  if (pe >= 0) rt_prof_end(pe);
  return NULL;
}

/* -- Pooling --------------------------------------------------------------------------------- */

/* create_graph: linear in g. max: g scattered to each maximum's position
** (scatter_add over the flattened plane); average: fold(g / (kh kw)). */
static int pool_composite(JitCtx *k, const ConvExt *pe)
{
  const RtConvGeom *g = &pe->g;
  int64_t P = g->N * g->C, L = g->OH * g->OW, HW = g->H * g->W, kk = g->kh * g->kw;
  int dt = k->n->edge[0].scalar_type;
  td_tensor *d;
  if (pe->max) {
    int64_t s2[2] = { P, L }, sp[2] = { P, HW };
    td_tensor *pos = jit_tmp(k, rt_tensor_new(2, s2, TD_INT64)), *z = jit_tmp(k, rt_full_on(TD_CPU, 2, sp, 0, dt));
    if (!pos || !z) return TD_ERR_NOMEM;
    const int64_t *ix = pe->idx->ptr;
    int64_t *q = pos->ptr;
    for (int64_t i = 0; i < P * L; i++) {
      int64_t l = i % L, oh = l / g->OW, ow = l % g->OW, ki = ix[i] / g->kw, kj = ix[i] % g->kw;
      int64_t ih = oh * g->sh - g->ph + ki * g->dh, iw = ow * g->sw - g->pw + kj * g->dw;
      q[i] = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W ? ih * g->W + iw : 0;
    }
    td_attrs at = { .ndims = -1, .dtype = -1 };
    at.i[0] = 1;
    td_tensor *src = reshape(k, GO, 2, s2), *in[3] = { z, pos, src };
    d = src ? jit_tmp(k, td_op(RT_OP_SCATTER_ADD, 3, in, &at)) : NULL;
  } else {
    int64_t s1[3] = { P, 1, L }, se[3] = { P, kk, L };
    td_tensor *gv = reshape(k, GO, 3, s1);
    td_tensor *ge = gv ? jit_tmp(k, td_expand(gv, 3, se)) : NULL;
    RtConvGeom g1 = *g;
    g1.C = 1;
    td_attrs at = win_attrs(&g1);
    d = op1a(k, RT_OP_FOLD, opn(k, RT_OP_MUL, ge, 1.0 / (double)kk), &at);
  }
  return set(k, 0, reshape(k, d, k->n->edge[0].ndim, k->n->edge[0].sizes));
}

static int pool_backward(JitCtx *k)
{
  const ConvExt *pe = k->n->ext;
  if (k->n->released)
    return rt_err(TD_ERR_GRAD, "%s: trying to backward through the graph a second time (or to read saved values "
                  "after they were freed); pass retain_graph=true to the first backward", k->n->rule->name);
  if (!GO) return TD_ERR_GRAD;
  if (td_grad_enabled()) return pool_composite(k, pe);
  td_tensor *g = contig(k, GO);
  int dt = k->n->edge[0].scalar_type;
  if (!g) return TD_ERR_NOMEM;
  if (g->device_type != TD_CPU || !g->ptr || g->scalar_type != dt)
    return rt_err(TD_ERR_GRAD, "%s: the gradient must be a CPU tensor of %s", k->n->rule->name, td_dtype_name(dt));
  td_tensor *dx = jit_tmp(k, rt_tensor_new(k->n->edge[0].ndim, k->n->edge[0].sizes, dt));
  if (!dx) return TD_ERR_NOMEM;
  RtConvJob j = { .kind = pe->max ? RT_POOL_MAX_BWD : RT_POOL_AVG_BWD, .dtype = dt, .g = pe->g, .dy = g->ptr,
                  .dx = dx->ptr, .idx = pe->idx ? pe->idx->ptr : NULL };
  int rc = rt_conv_run(&j);
  return rc ? rc : set(k, 0, dx);
}

static const JitGradRule max_pool_rule = { "max_pool2d_backward", pool_backward, 0 };
static const JitGradRule avg_pool_rule = { "avg_pool2d_backward", pool_backward, 0 };

TD_API td_tensor *td_pool2d(td_tensor *x, int max, const int64_t *p, td_tensor **indices)
{
  const char *fn = max ? "max_pool2d" : "avg_pool2d";
  if (indices) *indices = NULL;
  RT_ARG(x, fn, 1, NULL);
  RT_INTERRUPT_CHECK(NULL);
  if (fused_arg(fn, x, 1, -1)) return NULL;
  if (x->ndim != 4) return rt_errp(TD_ERR_SHAPE, "%s: expected a 4-D input (N, C, H, W), got %s", fn, RT_SHAPE(x));
  RtConvGeom g = { .N = x->sizes[0], .C = x->sizes[1], .H = x->sizes[2], .W = x->sizes[3], .O = x->sizes[1], .G = 1,
                   .kh = p[0], .kw = p[1], .sh = p[2], .sw = p[3], .ph = p[4], .pw = p[5], .dh = p[6], .dw = p[7] };
  if (conv_geom(fn, &g)) return NULL;
  if (2 * g.ph > g.kh || 2 * g.pw > g.kw)
    return rt_errp(TD_ERR_ARG, "%s: padding {%lld, %lld} must be at most half the kernel {%lld, %lld}", fn,
                   (long long)g.ph, (long long)g.pw, (long long)g.kh, (long long)g.kw);
  int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, fn, 1, &x) : -1;
  int dt = x->scalar_type;
  int64_t ys[4] = { g.N, g.C, g.OH, g.OW };
  td_tensor *xc = rt_as_contig(x), *y = rt_tensor_new(4, ys, dt), *idx = max ? rt_tensor_new(4, ys, TD_INT64) : NULL;
  ConvExt *ce = calloc(1, sizeof *ce);
  JitNode *n = NULL;
  if (!xc || !y || (max && !idx) || !ce) { rt_err(TD_ERR_NOMEM, "%s: out of memory", fn); goto fail; }
  RtConvJob j = { .kind = max ? RT_POOL_MAX_FWD : RT_POOL_AVG_FWD, .dtype = dt, .g = g, .x = xc->ptr, .y = y->ptr,
                  .idx = idx ? idx->ptr : NULL };
  if (y->nelem > 0 && rt_conv_run(&j)) goto fail;
  if (wants_grad(x, NULL, NULL)) {
    if (!(n = jit_node_custom(max ? &max_pool_rule : &avg_pool_rule, 1))) goto fail;
    edge_of(n, 0, x, false);
    ce->g = g; ce->max = max; ce->idx = idx;
    if (idx) td_retain(idx);
    n->ext = ce; n->ext_free = conv_ext_free; ce = NULL;
    node_attach(n, y);
  }
  if (indices) *indices = idx; else td_release(idx);
  td_release(xc); free(ce);
  if (pe >= 0) rt_prof_end(pe);
  return y;
fail:
  td_release(xc); td_release(y); td_release(idx); free(ce);
  if (pe >= 0) rt_prof_end(pe);
  return NULL;
}
