/*
** jit_ctc.c -- the eager fast path of F.ctc_loss (td_ctc_loss): the alpha
** recursion of runtime/rt_ctc.c forward, a custom autograd node whose
** backward is one pass of beta and the gradient per sequence. Under
** create_graph the backward composes ops instead (both recursions step by
** step, the posterior as a softmax), so higher-order gradients stay right.
** tide.compile, OpenCL tensors and F.fused = false keep the Lua composite.
*/
#include "jit_fused.h"
#include <math.h>
#include <stdlib.h>

typedef struct {
  RtCtcJob j;                    /* alpha, nll and the labels (owned) */
  int64_t *tg, *off, *il, *tl;
  int reduction;
} CtcExt;

static void ctc_ext_free(void *p)
{
  CtcExt *e = p;
  if (!e) return;
  free(e->j.alpha); free(e->j.nll); free(e->j.scratch); free(e->j.logspace); free(e->tg); free(e->off); free(e->il); free(e->tl);
  free(e);
}

/* d loss / d nll[n]: the incoming gradient, /max(S_n, 1) / N for 'mean', and 0
** where the alignment is impossible (the loss is the constant inf or 0 there) */
static int ctc_scales(JitCtx *k, const CtcExt *e, double *gs)
{
  td_tensor *g = contig(k, GO);
  if (!g) return TD_ERR_NOMEM;
  int64_t N = e->j.N;
  if (g->device_type != TD_CPU || !g->ptr || g->nelem != (e->reduction == TD_REDUCE_NONE ? N : 1))
    return rt_err(TD_ERR_GRAD, "ctc_loss_backward: the gradient must be a CPU tensor of the loss's shape");
  for (int64_t n = 0; n < N; n++) {
    double go = rt_load((char *)g->ptr + (e->reduction == TD_REDUCE_NONE ? n : 0) * rt_dtype_size(g->scalar_type),
                        g->scalar_type);
    if (e->reduction == TD_REDUCE_MEAN) go /= (double)(e->tl[n] > 1 ? e->tl[n] : 1) * (double)N;
    gs[n] = isfinite(e->j.nll[n]) ? go : 0;
  }
  return 0;
}

/* -- create_graph: the gradient from ops on lp ------------------------------------------------- */

/* A pool of temporaries (the recursions make O(T) of them, more than JitCtx holds). */
typedef struct { td_tensor **t; int64_t n, cap; bool oom; } Pool;

static td_tensor *keep(Pool *p, td_tensor *t)
{
  if (!t) { p->oom = true; return NULL; }
  if (p->n == p->cap) {
    int64_t cap = p->cap ? 2 * p->cap : 256;
    td_tensor **nt = realloc(p->t, (size_t)cap * sizeof *nt);
    if (!nt) { td_release(t); p->oom = true; return NULL; }
    p->t = nt; p->cap = cap;
  }
  return p->t[p->n++] = t;
}

static td_tensor *pop(Pool *p, int op, int nin, td_tensor *const *in, const td_attrs *at)
{
  for (int i = 0; i < nin; i++) if (!in[i]) return NULL;
  return keep(p, td_op(op, nin, in, at));
}
#define P2(op, a, b, at) pop(pl, op, 2, (td_tensor *[]){ a, b }, at)
#define P3(op, a, b, c, at) pop(pl, op, 3, (td_tensor *[]){ a, b, c }, at)

static td_tensor *p_reshape(Pool *pl, td_tensor *a, int nd, const int64_t *s) { return a ? keep(pl, td_reshape(a, nd, s)) : NULL; }
static td_tensor *p_select(Pool *pl, td_tensor *a, int64_t t)
{
  td_attrs at = { .ndims = -1, .dtype = -1, .i = { 0, t } };
  return pop(pl, RT_OP_SELECT, 1, &a, &at);
}
/* x (N, L) moved k places along L: right (x(s - k) at s) or left (x(s + k)), NEG where it leaves */
static td_tensor *p_shift(Pool *pl, td_tensor *x, td_tensor *negk, int64_t k, bool right)
{
  int64_t L = x ? x->sizes[1] : 0;
  if (!x || L <= k) return negk && L <= k ? p_reshape(pl, negk, 2, (int64_t[]){ x ? x->sizes[0] : 0, L }) : NULL;
  td_attrs sl = { .ndims = -1, .dtype = -1, .i = { 1, right ? 0 : k, right ? L - k : L, 1 } };
  td_tensor *body = pop(pl, RT_OP_SLICE, 1, &x, &sl);
  td_attrs sn = { .ndims = -1, .dtype = -1, .i = { 1, 0, k, 1 } };
  td_tensor *pad = pop(pl, RT_OP_SLICE, 1, &negk, &sn);
  td_attrs ct = { .ndims = -1, .dtype = -1, .i = { 1 } };
  return right ? P2(RT_OP_CAT, pad, body, &ct) : P2(RT_OP_CAT, body, pad, &ct);
}
/* lse(x, x shifted by 1, where(skip, x shifted by 2, NEG)) + add */
static td_tensor *p_step(Pool *pl, td_tensor *x, td_tensor *skip, td_tensor *neg, td_tensor *negk, bool right,
                         td_tensor *add)
{
  if (!x) return NULL;
  int64_t N = x->sizes[0], L = x->sizes[1], s3[3] = { N, L, 1 };
  td_tensor *s2 = P3(RT_OP_WHERE, skip, p_shift(pl, x, negk, 2, right), neg, NULL);
  td_attrs ct = { .ndims = -1, .dtype = -1, .i = { 2 } };
  td_tensor *st = P3(RT_OP_CAT, p_reshape(pl, x, 3, s3), p_reshape(pl, p_shift(pl, x, negk, 1, right), 3, s3),
                     p_reshape(pl, s2, 3, s3), &ct);
  td_attrs ls = { .ndims = 1, .dtype = -1, .dims = { 2 } };
  return P2(RT_OP_ADD, pop(pl, RT_OP_LOGSUMEXP, 1, &st, &ls), add, NULL);
}

/* (N, L) or (N, 1) constants of dtype dt from f(n, s) */
static td_tensor *p_const(Pool *pl, const CtcExt *e, int64_t cols, int dt, double (*f)(const CtcExt *, int64_t, int64_t, int64_t),
                          int64_t t)
{
  int64_t N = e->j.N, sz[2] = { N, cols };
  double *v = malloc((size_t)(N * cols > 0 ? N * cols : 1) * sizeof(double));
  if (!v) { pl->oom = true; return NULL; }
  for (int64_t n = 0; n < N; n++)
    for (int64_t s = 0; s < cols; s++) v[n * cols + s] = f(e, n, s, t);
  td_tensor *r = keep(pl, td_from_doubles(2, sz, dt, v));
  free(v);
  return r;
}
static double c_ext(const CtcExt *e, int64_t n, int64_t s, int64_t t)
{
  (void)t;
  return s & 1 && s < 2 * e->tl[n] + 1 ? (double)e->tg[e->off[n] + (s >> 1)] : (double)e->j.blank;
}
static double c_skip(const CtcExt *e, int64_t n, int64_t s, int64_t t)    /* s - 2 -> s allowed */
{
  (void)t;
  return s >= 2 && s < 2 * e->tl[n] + 1 && c_ext(e, n, s, 0) != e->j.blank && c_ext(e, n, s, 0) != c_ext(e, n, s - 2, 0);
}
static double c_skipn(const CtcExt *e, int64_t n, int64_t s, int64_t t) { return c_skip(e, n, s + 2, t); }
static double c_first(const CtcExt *e, int64_t n, int64_t s, int64_t t) { (void)t; return s < 2 && s < 2 * e->tl[n] + 1; }
static double c_end(const CtcExt *e, int64_t n, int64_t s, int64_t t)
{
  (void)t;
  int64_t Ln = 2 * e->tl[n] + 1;
  return s == Ln - 1 || s == Ln - 2;
}
static double c_active(const CtcExt *e, int64_t n, int64_t s, int64_t t) { (void)s; return t < e->il[n]; }
static double c_last(const CtcExt *e, int64_t n, int64_t s, int64_t t) { (void)s; return t == e->il[n] - 1; }
static double c_valid(const CtcExt *e, int64_t n, int64_t s, int64_t t)
{
  (void)s;
  return t < e->il[n] && isfinite(e->j.nll[n]);
}
static double c_scale(const CtcExt *e, int64_t n, int64_t s, int64_t t)
{
  (void)s; (void)t;
  if (!isfinite(e->j.nll[n])) return 0;
  return e->reduction == TD_REDUCE_MEAN ? -1 / ((double)(e->tl[n] > 1 ? e->tl[n] : 1) * (double)e->j.N) : -1;
}

/*   lpx_t(s) = lp_t(l'(s));  A_t: alpha;  B_t: beta (both with lp_t, NEG = -1e30 for log 0)
**   d loss / d lp_t(c) = -g_n sum_{l'(s) = c} softmax_s(A_t + B_t - lpx_t)(s)   (t < I_n, possible) */
static int ctc_composite(JitCtx *k, const CtcExt *e, td_tensor *lp)
{
  Pool pool = { 0 }, *pl = &pool;
  int64_t T = e->j.T, N = e->j.N, C = e->j.C, L = e->j.L, tnl[3] = { T, N, L }, nl1[3] = { 1, N, L };
  int dt = lp->scalar_type, rc = 0;
  td_tensor **A = calloc((size_t)(T > 0 ? T : 1), sizeof *A), **D = calloc((size_t)(T > 0 ? T : 1), sizeof *D);
  if (!A || !D) { free(A); free(D); return TD_ERR_NOMEM; }
  td_tensor *ext = p_const(pl, e, L, TD_INT64, c_ext, 0), *neg = keep(pl, td_scalar(-1e30, dt));
  td_tensor *negk = keep(pl, td_full(2, (int64_t[]){ N, L > 2 ? 2 : L }, -1e30, dt));
  td_tensor *skip = p_const(pl, e, L, TD_BOOL, c_skip, 0), *skipn = p_const(pl, e, L, TD_BOOL, c_skipn, 0);
  td_tensor *first = p_const(pl, e, L, TD_BOOL, c_first, 0), *end = p_const(pl, e, L, TD_BOOL, c_end, 0);
  td_tensor *idx = ext ? keep(pl, td_expand(p_reshape(pl, ext, 3, nl1), 3, tnl)) : NULL;
  td_attrs g2 = { .ndims = -1, .dtype = -1, .i = { 2 } };
  td_tensor *lpx = P2(RT_OP_GATHER, lp, idx, &g2);
  for (int64_t t = 0; t < T; t++) {                         /* alpha */
    td_tensor *x = p_select(pl, lpx, t);
    A[t] = t == 0 ? P3(RT_OP_WHERE, first, x, neg, NULL)
                  : P3(RT_OP_WHERE, p_const(pl, e, 1, TD_BOOL, c_active, t), p_step(pl, A[t - 1], skip, neg, negk, true, x),
                       A[t - 1], NULL);
  }
  td_tensor *b = NULL, *zeros = keep(pl, td_full(2, (int64_t[]){ N, C }, 0, dt));
  td_attrs sm = { .ndims = -1, .dtype = -1, .i = { 1 } }, sc = { .ndims = -1, .dtype = -1, .i = { 1 } };
  for (int64_t t = T - 1; t >= 0; t--) {                    /* beta, and the gradient at t */
    td_tensor *x = p_select(pl, lpx, t), *init = P3(RT_OP_WHERE, end, x, neg, NULL);
    td_tensor *rec = t == T - 1 ? neg : p_step(pl, b, skipn, neg, negk, false, x);
    b = P3(RT_OP_WHERE, p_const(pl, e, 1, TD_BOOL, c_last, t), init, rec, NULL);
    td_tensor *w = P2(RT_OP_ADD, A[t], P2(RT_OP_SUB, b, x, NULL), NULL);
    td_tensor *post = P3(RT_OP_WHERE, p_const(pl, e, 1, TD_BOOL, c_valid, t), pop(pl, RT_OP_SOFTMAX, 1, &w, &sm),
                         keep(pl, td_scalar(0, dt)), NULL);
    D[t] = p_reshape(pl, P3(RT_OP_SCATTER_ADD, zeros, ext, post, &sc), 3, (int64_t[]){ 1, N, C });
  }
  /* D (T, N, C): cat in rounds of RT_MAX_IN */
  td_attrs c0 = { .ndims = -1, .dtype = -1, .i = { 0 } };
  int64_t m = T;
  while (m > 1 && !pl->oom) {
    int64_t o = 0;
    for (int64_t i = 0; i < m; i += RT_MAX_IN, o++) {
      int c = (int)(m - i < RT_MAX_IN ? m - i : RT_MAX_IN);
      D[o] = c == 1 ? D[i] : pop(pl, RT_OP_CAT, c, D + i, &c0);
    }
    m = o;
  }
  td_tensor *go = GO;
  if (e->reduction == TD_REDUCE_NONE) go = p_reshape(pl, go, 3, (int64_t[]){ 1, N, 1 });
  td_tensor *s = p_reshape(pl, p_const(pl, e, 1, dt, c_scale, 0), 3, (int64_t[]){ 1, N, 1 });
  td_tensor *dlp = T > 0 ? P2(RT_OP_MUL, D[0], P2(RT_OP_MUL, go, s, NULL), NULL) : keep(pl, td_full(3, (int64_t[]){ 0, N, C }, 0, dt));
  rc = pl->oom || !dlp ? TD_ERR_GRAD : set(k, 0, dlp);
  for (int64_t i = 0; i < pool.n; i++) td_release(pool.t[i]);
  free(pool.t); free(A); free(D);
  return rc;
}
#undef P2
#undef P3

/* -- The node and the entry ---------------------------------------------------------------------- */

static int ctc_backward(JitCtx *k)
{
  const CtcExt *e = k->n->ext;
  td_tensor *lp = jit_saved_in(k, 0);
  if (!lp || !GO) return TD_ERR_GRAD;
  if (td_grad_enabled()) return ctc_composite(k, e, lp);
  td_tensor *lc = contig(k, lp);
  td_tensor *dlp = jit_tmp(k, rt_tensor_new(lp->ndim, lp->sizes, lp->scalar_type));
  double *gs = malloc((size_t)(e->j.N > 0 ? e->j.N : 1) * sizeof(double));
  int rc = !lc || !dlp || !gs ? TD_ERR_NOMEM : ctc_scales(k, e, gs);
  if (!rc) {
    RtCtcJob j = e->j;
    j.lp = lc->ptr; j.gs = gs; j.dlp = dlp->ptr;
    rc = rt_ctc_backward(&j);
  }
  free(gs);
  return rc ? rc : set(k, 0, dlp);
}

static const JitGradRule ctc_rule = { "ctc_loss_backward", ctc_backward, 0 };

static int ctc_ints(const char *fn, td_tensor *t, int argn, const char *what, int64_t N)
{
  RT_ARG(t, fn, argn, TD_ERR_ARG);
  if (fused_arg(fn, t, argn, TD_INT64)) return -1;
  if (t->ndim != 1 || t->sizes[0] != N)
    return rt_err(TD_ERR_SHAPE, "%s: %s must be (N) = (%lld), got %s", fn, what, (long long)N, RT_SHAPE(t));
  return 0;
}

/* log_probs (T, N, C); targets (N, S) padded or (sum S_n) concatenated, 0-based
** int64; input and target lengths (N) int64; blank 0-based. */
TD_API td_tensor *td_ctc_loss(td_tensor *lp, td_tensor *targets, td_tensor *input_lengths, td_tensor *target_lengths,
                              int64_t blank, int reduction, int zero_infinity)
{
  const char *fn = "ctc_loss";
  RT_ARG(lp, fn, 1, NULL);
  RT_ARG(targets, fn, 2, NULL);
  RT_INTERRUPT_CHECK(NULL);
  if (fused_arg(fn, lp, 1, -1) || fused_arg(fn, targets, 2, TD_INT64)) return NULL;
  if (lp->ndim != 3) return rt_errp(TD_ERR_SHAPE, "%s: log_probs must be (T, N, C), got %s", fn, RT_SHAPE(lp));
  int64_t T = lp->sizes[0], N = lp->sizes[1], C = lp->sizes[2];
  if (ctc_ints(fn, input_lengths, 3, "input_lengths", N) || ctc_ints(fn, target_lengths, 4, "target_lengths", N))
    return NULL;
  if (targets->ndim != 1 && (targets->ndim != 2 || targets->sizes[0] != N))
    return rt_errp(TD_ERR_SHAPE, "%s: targets must be (N, S) padded or 1-D concatenated for log_probs %s, got %s", fn,
                   RT_SHAPE(lp), RT_SHAPE(targets));
  if (blank < 0 || blank >= C)
    return rt_errp(TD_ERR_ARG, "%s: blank %lld is out of range for %lld classes", fn, (long long)blank, (long long)C);
  if (reduction < TD_REDUCE_NONE || reduction > TD_REDUCE_SUM)
    return rt_errp(TD_ERR_ARG, "%s: reduction %d out of range", fn, reduction);
  int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, fn, 1, &lp) : -1;
  int dt = lp->scalar_type;
  td_tensor *xc = rt_as_contig(lp), *tc = rt_as_contig(targets), *ic = rt_as_contig(input_lengths);
  td_tensor *lc = rt_as_contig(target_lengths), *y = NULL;
  CtcExt *e = calloc(1, sizeof *e);
  size_t n1 = (size_t)(N > 0 ? N : 1);
  if (e) { e->il = malloc(n1 * 8); e->tl = malloc(n1 * 8); e->off = malloc(n1 * 8); e->j.nll = malloc(n1 * 8); }
  if (!xc || !tc || !ic || !lc || !e || !e->il || !e->tl || !e->off || !e->j.nll) {
    rt_err(TD_ERR_NOMEM, "%s: out of memory", fn);
    goto fail;
  }
  memcpy(e->il, ic->ptr, (size_t)N * 8);
  memcpy(e->tl, lc->ptr, (size_t)N * 8);
  bool padded = tc->ndim == 2;
  int64_t S = padded ? tc->sizes[1] : tc->sizes[0], total = 0, smax = 0;
  for (int64_t n = 0; n < N; n++) {
    if (e->il[n] < 0 || e->il[n] > T) {
      rt_err(TD_ERR_ARG, "%s: input_lengths[%lld] = %lld is outside 0..%lld (T)", fn, (long long)n + 1,
             (long long)e->il[n], (long long)T);
      goto fail;
    }
    if (e->tl[n] < 0 || (padded && e->tl[n] > S)) {
      rt_err(TD_ERR_ARG, "%s: target_lengths[%lld] = %lld is outside 0..%lld (the targets' length)", fn,
             (long long)n + 1, (long long)e->tl[n], (long long)S);
      goto fail;
    }
    total += e->tl[n];
    if (e->tl[n] > smax) smax = e->tl[n];
  }
  if (!padded && total != S) {
    rt_err(TD_ERR_ARG, "%s: concatenated targets hold %lld labels, target_lengths sum to %lld", fn, (long long)S,
           (long long)total);
    goto fail;
  }
  /* the labels of sequence n at tg + off[n], in range */
  if (!(e->tg = malloc((size_t)(total > 0 ? total : 1) * 8))) { rt_err(TD_ERR_NOMEM, "%s: out of memory", fn); goto fail; }
  for (int64_t n = 0, o = 0; n < N; n++) {
    const int64_t *src = (const int64_t *)tc->ptr + (padded ? n * S : o);
    e->off[n] = o;
    for (int64_t s = 0; s < e->tl[n]; s++) {
      if (src[s] < 0 || src[s] >= C) {
        rt_err(TD_ERR_INDEX, "%s: target label %lld is out of range for %lld classes (0-based)", fn,
               (long long)src[s], (long long)C);
        goto fail;
      }
      e->tg[o + s] = src[s];
    }
    o += e->tl[n];
  }
  int64_t L = 2 * smax + 1, nt, ntl, per;
  if (rt_size_mul(fn, N, T, &nt) || rt_size_mul(fn, nt, rt_ctc_width(L), &ntl) ||
      rt_size_mul(fn, N, rt_ctc_scratch(L, C), &per))
    goto fail;
  e->j = (RtCtcJob){ .dtype = dt, .T = T, .N = N, .C = C, .L = L, .blank = blank, .lp = xc->ptr, .tg = e->tg,
                     .off = e->off, .il = e->il, .tl = e->tl, .nll = e->j.nll,
                     .alpha = malloc((size_t)(ntl > 0 ? ntl : 1) * sizeof(double)),
                     .scratch = malloc((size_t)(per > 0 ? per : 1) * sizeof(double)),
                     .logspace = malloc(n1) };
  e->reduction = reduction;
  if (!e->j.alpha || !e->j.scratch || !e->j.logspace) { rt_err(TD_ERR_NOMEM, "%s: out of memory for the CTC variables", fn); goto fail; }
  if (rt_ctc_forward(&e->j)) goto fail;
  /* the loss per sequence: inf where impossible (0 with zero_infinity); 'mean' divides by max(S_n, 1) */
  double total_loss = 0;
  if (reduction == TD_REDUCE_NONE && !(y = rt_tensor_new(1, &N, dt))) goto fail;
  for (int64_t n = 0; n < N; n++) {
    double v = isfinite(e->j.nll[n]) ? e->j.nll[n] : zero_infinity ? 0 : INFINITY;
    if (reduction == TD_REDUCE_MEAN) v /= (double)(e->tl[n] > 1 ? e->tl[n] : 1);
    if (reduction == TD_REDUCE_NONE) rt_store((char *)y->ptr + n * rt_dtype_size(dt), dt, v);
    else total_loss += v;
  }
  if (reduction != TD_REDUCE_NONE &&
      !(y = rt_full_on(TD_CPU, 0, NULL, reduction == TD_REDUCE_MEAN ? total_loss / (double)N : total_loss, dt)))
    goto fail;
  if (wants_grad(lp, NULL, NULL)) {
    JitNode *n = jit_node_custom(&ctc_rule, 1);
    if (!n) goto fail;
    edge_of(n, 0, lp, true);
    e->j.lp = NULL;
    n->ext = e; n->ext_free = ctc_ext_free; e = NULL;
    node_attach(n, y);
  }
  td_release(xc); td_release(tc); td_release(ic); td_release(lc); ctc_ext_free(e);
  if (pe >= 0) rt_prof_end(pe);
  return y;
fail:
  td_release(xc); td_release(tc); td_release(ic); td_release(lc); td_release(y); ctc_ext_free(e);
  if (pe >= 0) rt_prof_end(pe);
  return NULL;
}
