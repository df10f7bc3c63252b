/*
** rt_attn.c -- scaled dot-product attention as one op (the op table's ATTN rows):
**   sdpa(q, k, v) = softmax(scale q k^T [+ causal mask]) v
** q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv) with equal batch dims;
** attrs.i[0] = causal (query i sees keys j <= i: PyTorch's is_causal, the
** top-left triangle), attrs.s[0] = scale.
**
** The CPU kernels never store the (Tq, Tk) scores. One work item is one batch
** entry: its K^T (and V^T) are packed once, then the scores, probabilities and
** outputs of 4 query rows at a time stay in registers and L1. With the causal
** mask the keys after each query are skipped: half the products. The backward
** recomputes the probabilities from q and k (FlashAttention's trade: one more
** q k^T instead of a saved (Tq, Tk) tensor per batch entry) and returns dq, dk
** and dv packed into one flat tensor. Each batch entry is computed by one
** thread in a fixed order, so results do not depend on the thread count. On
** OpenCL the op runs opencl/cl_attn.c's flash-attention kernels. Masks and
** dropout: nn/functional.lua composes the same formula from matmul and softmax.
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* libm without errno side effects: GCC vectorizes the calls through libmvec */
__attribute__((simd("notinbranch"), const, nothrow, leaf)) double exp(double);


/* -- Meta ------------------------------------------------------------------------------------- */

/* q, k, v: ranks, batch dims and the inner sizes must agree */
#if RT_ISA_SHARED
static int attn_check(const td_tensor *q, const td_tensor *k, const td_tensor *v)
{
  const char *op = "scaled_dot_product_attention";
  if (q->ndim < 2 || k->ndim != q->ndim || v->ndim != q->ndim)
    return rt_err(TD_ERR_SHAPE, "%s: query, key and value need the same rank >= 2 (..., L, E), got %s, %s and %s",
                  op, RT_SHAPE(q), RT_SHAPE(k), RT_SHAPE(v));
  int n = q->ndim;
  for (int d = 0; d < n - 2; d++)
    if (k->sizes[d] != q->sizes[d] || v->sizes[d] != q->sizes[d])
      return rt_err(TD_ERR_SHAPE, "%s: batch dims of query %s, key %s and value %s differ (dim %d)", op,
                    RT_SHAPE(q), RT_SHAPE(k), RT_SHAPE(v), d + 1);
  if (k->sizes[n - 1] != q->sizes[n - 1])
    return rt_err(TD_ERR_SHAPE, "%s: query %s and key %s have different embedding sizes (%lld and %lld)", op,
                  RT_SHAPE(q), RT_SHAPE(k), (long long)q->sizes[n - 1], (long long)k->sizes[n - 1]);
  if (v->sizes[n - 2] != k->sizes[n - 2])
    return rt_err(TD_ERR_SHAPE, "%s: key %s and value %s have different lengths (%lld and %lld)", op,
                  RT_SHAPE(k), RT_SHAPE(v), (long long)k->sizes[n - 2], (long long)v->sizes[n - 2]);
  if (k->sizes[n - 2] == 0 && q->sizes[n - 2] > 0)
    return rt_err(TD_ERR_SHAPE, "%s: key %s has no positions to attend to", op, RT_SHAPE(k));
  return 0;
}

/* the optional mask (input 3 of sdpa, 4 of its backward): bool (true = takes
** part) or float (added to the scores), broadcastable to (..., Tq, Tk) */
static int mask_check(const RtCall *c, int at)
{
  const char *op = "scaled_dot_product_attention";
  if (c->nin <= at) return 0;
  if (c->nin > at + 1) return rt_err(TD_ERR_ARG, "%s: expected %d or %d tensor arguments, got %d", op, at, at + 1, c->nin);
  const td_tensor *q = c->in[0], *k = c->in[1], *m = c->in[at];
  if (c->attrs.i[0]) return rt_err(TD_ERR_ARG, "%s: is_causal and a mask cannot both be given", op);
  if (m->scalar_type != TD_BOOL && !rt_is_float(m->scalar_type))
    return rt_err(TD_ERR_DTYPE, "%s: the mask must be bool or floating point, got %s", op, td_dtype_name(m->scalar_type));
  int n = q->ndim;
  bool ok = m->ndim <= n;
  for (int d = 0; ok && d < m->ndim; d++) {
    int qd = n - m->ndim + d;
    int64_t want = qd == n - 1 ? k->sizes[n - 2] : q->sizes[qd];
    ok = m->sizes[d] == want || m->sizes[d] == 1;
  }
  if (!ok)
    return rt_err(TD_ERR_SHAPE, "%s: mask %s cannot be broadcast to the scores of query %s and key %s", op,
                  RT_SHAPE(m), RT_SHAPE(q), RT_SHAPE(k));
  return 0;
}

int rt_meta_sdpa(RtCall *c)
{
  const td_tensor *q = c->in[0], *v = c->in[2];
  if (c->nin < 3) return rt_err(TD_ERR_ARG, "scaled_dot_product_attention: expected 3 or 4 tensor arguments, got %d", c->nin);
  if (attn_check(q, c->in[1], v) || mask_check(c, 3)) return TD_ERR_SHAPE;
  c->ndim = q->ndim;
  memcpy(c->sizes, q->sizes, sizeof c->sizes);
  c->sizes[q->ndim - 1] = v->sizes[v->ndim - 1];
  return 0;
}

/* (q, k, v, g[, mask]) -> flat [dq, dk, dv]; g has the forward result's shape */
int rt_meta_sdpa_backward(RtCall *c)
{
  if (c->nin < 4)
    return rt_err(TD_ERR_ARG, "scaled_dot_product_attention backward: expected 4 or 5 tensor arguments, got %d", c->nin);
  const td_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *g = c->in[3];
  if (attn_check(q, k, v) || mask_check(c, 4)) return TD_ERR_SHAPE;
  int n = q->ndim;
  bool ok = g->ndim == n && g->sizes[n - 1] == v->sizes[n - 1];
  for (int d = 0; ok && d < n - 1; d++) ok = g->sizes[d] == q->sizes[d];
  if (!ok)
    return rt_err(TD_ERR_SHAPE, "scaled_dot_product_attention backward: gradient %s does not match the result of "
                  "query %s and value %s", RT_SHAPE(g), RT_SHAPE(q), RT_SHAPE(v));
  c->ndim = 1;
  c->sizes[0] = q->nelem + k->nelem + v->nelem;
  return 0;
}

/* -- With a mask, on the CPU: the formula from ops -------------------------------------------
** The fused CPU kernels below have no mask; a masked call (nn.functional
** composes masks itself on the CPU, so only a direct op call comes here)
** runs the same formula from matmul and softmax, without grad:
**   p = softmax(scale q k^T masked);  o = p v
**   dv = p^T g;  dp = g v^T;  ds = scale p (dp - rowsum(p dp));  dq = ds k;  dk = ds^T q */
static td_tensor *mT(td_tensor *x)
{
  int n = x->ndim;
  int64_t sz[TD_MAX_DIMS], st[TD_MAX_DIMS];
  memcpy(sz, x->sizes, sizeof sz); memcpy(st, x->strides, sizeof st);
  int64_t t = sz[n - 1]; sz[n - 1] = sz[n - 2]; sz[n - 2] = t;
  t = st[n - 1]; st[n - 1] = st[n - 2]; st[n - 2] = t;
  return rt_tensor_alias(x, n, sz, st, x->offset);
}

static td_tensor *op2r(int op, td_tensor *a, td_tensor *b)   /* releases a and b */
{
  td_tensor *in[2] = { a, b }, *r = a && b ? td_op(op, 2, in, NULL) : NULL;
  td_release(a); td_release(b);
  return r;
}

static td_tensor *masked_probs(RtCall *c, td_tensor *q, td_tensor *k, td_tensor *m)
{
  td_tensor *s = op2r(RT_OP_MATMUL, (td_retain(q), q), mT(k));
  td_tensor *ss = s ? td_op_number(RT_OP_MUL, s, c->attrs.s[0], 0) : NULL;
  td_release(s);
  if (!ss) return NULL;
  if (m->scalar_type == TD_BOOL) {
    td_tensor *ninf = td_wrap_number(-INFINITY);
    td_tensor *in[3] = { m, ss, ninf }, *w = ninf ? td_op(RT_OP_WHERE, 3, in, NULL) : NULL;
    td_release(ninf); td_release(ss); ss = w;
  } else ss = op2r(RT_OP_ADD, ss, (td_retain(m), m));
  if (!ss) return NULL;
  td_attrs sm = { .ndims = -1, .dtype = -1, .i = { ss->ndim - 1 } };
  td_tensor *p = td_op(RT_OP_SOFTMAX, 1, &ss, &sm);
  td_release(ss);
  return p;
}

/* copy x into out's elements [off, off + x->nelem) */
static int put(td_tensor *out, int64_t off, td_tensor *x)
{
  if (!x) return TD_ERR_NOMEM;
  int64_t st[TD_MAX_DIMS];
  rt_tensor_contig_strides(x->ndim, x->sizes, st);
  td_tensor *v = rt_tensor_alias(out, x->ndim, x->sizes, st, out->offset + off);
  int rc = v ? td_op_out(RT_OP_COPY, 1, &x, NULL, v) : TD_ERR_NOMEM;
  td_release(v); td_release(x);
  return rc;
}

int rt_sdpa_masked(RtCall *c, td_tensor *out)
{
  int g0 = td_set_grad_enabled(0), rc;
  bool fwd = c->op == RT_OP_SDPA;
  td_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *m = c->in[fwd ? 3 : 4];
  td_tensor *p = masked_probs(c, q, k, m);
  if (fwd) rc = put(out, 0, p ? op2r(RT_OP_MATMUL, p, (td_retain(v), v)) : NULL);
  else {
    td_tensor *g = c->in[3];
    td_tensor *dp = p ? op2r(RT_OP_MATMUL, (td_retain(g), g), mT(v)) : NULL;
    td_tensor *pdp = dp ? op2r(RT_OP_MUL, (td_retain(p), p), (td_retain(dp), dp)) : NULL;
    td_attrs rs = { .ndims = 1, .keepdim = 1, .dtype = -1, .dims = { q->ndim - 1 } };
    td_tensor *row = pdp ? td_op(RT_OP_SUM, 1, &pdp, &rs) : NULL;
    td_release(pdp);
    td_tensor *d = row ? op2r(RT_OP_SUB, dp, row) : (td_release(dp), NULL);
    td_tensor *ds0 = d ? op2r(RT_OP_MUL, (td_retain(p), p), d) : NULL;
    td_tensor *ds = ds0 ? td_op_number(RT_OP_MUL, ds0, c->attrs.s[0], 0) : NULL;
    td_release(ds0);
    rc = ds ? put(out, 0, op2r(RT_OP_MATMUL, (td_retain(ds), ds), (td_retain(k), k))) : TD_ERR_NOMEM;
    if (!rc) rc = put(out, q->nelem, op2r(RT_OP_MATMUL, mT(ds), (td_retain(q), q)));
    if (!rc) rc = put(out, q->nelem + k->nelem, op2r(RT_OP_MATMUL, mT(p), (td_retain(g), g)));
    td_release(ds);
    td_release(p);
  }
  td_set_grad_enabled(g0);
  return rc ? rc : 0;
}
#endif

/* -- Kernels ---------------------------------------------------------------------------------- */

/* q, k, v, g are read where they are (any batch and row strides, unit stride
** along the embedding: the heads of a (B, T, h, hd) tensor transposed to
** (B, h, T, hd) need no copy); the results are contiguous. */
typedef struct {
  const char *in[4];             /* q, k, v, g, of the compute dtype */
  int64_t row[4];                /* their row strides (elements) */
  int64_t bst[4][TD_MAX_DIMS];   /* their batch-dim strides */
  int64_t bsz[TD_MAX_DIMS];      /* the batch dims */
  int nbd;
  char *o;                       /* forward: the result; backward: [dq, dk, dv] */
  int64_t Tq, Tk, D, Dv, nq, nk; /* nq, nk: elements of q and k (where dk and dv start) */
  int causal;
  double scale;
  int failed;                    /* a work item could not allocate its scratch */
} AttnJob;

/* element offset of batch entry b in input x */
static int64_t att_off(const AttnJob *a, int x, int64_t b)
{
  int64_t off = 0;
  for (int d = a->nbd - 1; d >= 0; d--) { off += (b % a->bsz[d]) * a->bst[x][d]; b /= a->bsz[d]; }
  return off;
}

/* The kernels take ATT_Q query rows at a time and keys in blocks of ATT_W
** lanes, with fixed-width inner loops over register tiles: the scores q.k_j
** are an ATT_Q x (up to 4 key blocks) tile of accumulators, the weighted sums
** of rows an ATT_Q x (up to 4 column blocks) tile, so that each loaded block
** feeds 4 FMAs and the independent chains hide the FMA latency (one query at
** a time ran ~4x slower, latency-bound). The scores read kt (D, Tkp) and vt
** (Dv, Tkp), one batch entry's k and v transposed (16 x 16 tiles in registers
** for float) and padded with zeros to whole blocks; the weighted sums of rows
** read k and v in place, or copies padded to whole blocks (kp, vp) when D or
** Dv is not a multiple of ATT_W. The softmax of a group's four rows is one
** function, so that their lane reductions overlap. Under the causal mask a
** group computes up to its last row's keys; each row's later keys get
** probability 0. */
#define ATT_W 16
/* a block loaded once stays in a register: the empty asm stops GCC from
** folding the load into every FMA that reads it (as a memory operand: one
** load per FMA). Only where a float block is one register (AVX-512). */
#ifdef __AVX512F__
#define KEEP_F32(x) __asm__("" : "+v"(x))
#else
#define KEEP_F32(x) ((void)0)
#endif
#define KEEP_NONE(x) ((void)0)
#define ATT_Q 4                  /* rank_ below is written out for 4 rows */
static int64_t att_up(int64_t n) { return (n + ATT_W - 1) / ATT_W * ATT_W; }

/* exp of a block of x <= 0 (a score minus its row's max; -inf gives 0).
** float: inline (rt_isa.h), flushed to 0 below 2^-126. double: libmvec. */
typedef rt_vf16 VF16;
typedef rt_vi16 VI16;
typedef rt_vf16u VU16F;
typedef double VD16 __attribute__((vector_size(128)));
#define vexp_f32 rt_vexpneg_f32_ftz
static inline VD16 vexp_f64(VD16 x)
{
  VD16 y;
  for (int t = 0; t < 16; t++) y[t] = exp(x[t]);
  return y;
}

#define DEF_ATT(sfx, T, TI, EXPV, KEEP) \
  typedef T V_##sfx __attribute__((vector_size(ATT_W * sizeof(T))));                    /* a block */ \
  typedef TI VI_##sfx __attribute__((vector_size(ATT_W * sizeof(T))));                  /* its lane masks */ \
  typedef T VU_##sfx __attribute__((vector_size(ATT_W * sizeof(T)), aligned(sizeof(T)))); /* one at any address */ \
  /* s[r, jb W .. (jb + NB) W) = x[r] . mt[:, j] for the ATT_Q rows x[r] (stride xs): an ATT_Q x NB \
  ** tile of accumulators; each mt block is loaded once per d (KEEP) */ \
  static inline __attribute__((always_inline)) void dtile_##sfx(const T *restrict x, int64_t xs, \
      const T *restrict mt, int64_t D, int64_t Tkp, int64_t jb, int NB, T *restrict s) { \
    V_##sfx a[ATT_Q][4] = { { { 0 } } }; \
    for (int64_t d = 0; d < D; d++) { \
      V_##sfx r[4]; \
      for (int b = 0; b < NB; b++) { r[b] = *(const VU_##sfx *)(mt + d * Tkp + (jb + b) * ATT_W); KEEP(r[b]); } \
      for (int q = 0; q < ATT_Q; q++) { T xd = x[q * xs + d]; for (int b = 0; b < NB; b++) a[q][b] += xd * r[b]; } } \
    for (int q = 0; q < ATT_Q; q++) for (int b = 0; b < NB; b++) *(VU_##sfx *)(s + q * Tkp + (jb + b) * ATT_W) = a[q][b]; } \
  /* s[r, 0 .. nb W) = x[r] . mt[:, j] for the ATT_Q rows x[r] (stride xs) and key blocks [0, nb) */ \
  static void dots_##sfx(const T *restrict x, int64_t xs, const T *restrict mt, int64_t D, int64_t Tkp, int64_t nb, \
                         T *restrict s) { \
    for (int64_t jb = 0; jb < nb; jb += 4) \
      switch (nb - jb) { \
      case 1: dtile_##sfx(x, xs, mt, D, Tkp, jb, 1, s); break; \
      case 2: dtile_##sfx(x, xs, mt, D, Tkp, jb, 2, s); break; \
      case 3: dtile_##sfx(x, xs, mt, D, Tkp, jb, 3, s); break; \
      default: dtile_##sfx(x, xs, mt, D, Tkp, jb, 4, s); } } \
  /* out[r, cb W .. (cb + NC) W) = sum_{j < n} w[r, j] m[j, :]: ATT_Q x NC accumulators, m's blocks \
  ** loaded once per j */ \
  static inline __attribute__((always_inline)) void wtile_##sfx(const T *restrict w, int64_t Tkp, \
      const T *restrict m, int64_t ms, int64_t n, int64_t Dp, int64_t cb, int NC, T *restrict out) { \
    V_##sfx a[ATT_Q][4] = { { { 0 } } }; \
    for (int64_t j = 0; j < n; j++) { \
      V_##sfx r[4]; \
      for (int c = 0; c < NC; c++) { r[c] = *(const VU_##sfx *)(m + j * ms + (cb + c) * ATT_W); KEEP(r[c]); } \
      for (int q = 0; q < ATT_Q; q++) { T wq = w[q * Tkp + j]; for (int c = 0; c < NC; c++) a[q][c] += wq * r[c]; } } \
    for (int q = 0; q < ATT_Q; q++) for (int c = 0; c < NC; c++) *(VU_##sfx *)(out + q * Dp + (cb + c) * ATT_W) = a[q][c]; } \
  /* out[r, 0 .. Dp) = sum_{j < n} w[r, j] m[j, :] for the ATT_Q rows of w (stride Tkp), m (n, Dp) rows of stride ms */ \
  static void wsum_##sfx(const T *restrict w, int64_t Tkp, const T *restrict m, int64_t ms, int64_t n, int64_t Dp, \
                         T *restrict out) { \
    for (int64_t cb = 0; cb < Dp / ATT_W; cb += 4) \
      switch (Dp / ATT_W - cb) { \
      case 1: wtile_##sfx(w, Tkp, m, ms, n, Dp, cb, 1, out); break; \
      case 2: wtile_##sfx(w, Tkp, m, ms, n, Dp, cb, 2, out); break; \
      case 3: wtile_##sfx(w, Tkp, m, ms, n, Dp, cb, 3, out); break; \
      default: wtile_##sfx(w, Tkp, m, ms, n, Dp, cb, 4, out); } } \
  /* m[j, :] += sum_r w[r, j] u[r, :] for j < n: the updates of dk and dv (u rows of stride Dp); \
  ** the ATT_Q u rows of NC column blocks stay in registers over j, each j's four weights are \
  ** broadcast once for all blocks, and the sum is a tree (two chains, not four) */ \
  static inline __attribute__((always_inline)) void rtile_##sfx(const T *restrict w, int64_t Tkp, \
      const T *restrict u, int64_t n, int64_t Dp, int64_t cb, int NC, T *restrict m, int64_t ms) { \
    V_##sfx uu[ATT_Q][4]; \
    for (int q = 0; q < ATT_Q; q++) for (int c = 0; c < NC; c++) uu[q][c] = *(const VU_##sfx *)(u + q * Dp + (cb + c) * ATT_W); \
    for (int64_t j = 0; j < n; j++) { \
      T w0 = w[j], w1 = w[Tkp + j], w2 = w[2 * Tkp + j], w3 = w[3 * Tkp + j]; \
      for (int c = 0; c < NC; c++) { \
        VU_##sfx *r = (VU_##sfx *)(m + j * ms + (cb + c) * ATT_W); \
        *r += (w0 * uu[0][c] + w1 * uu[1][c]) + (w2 * uu[2][c] + w3 * uu[3][c]); } } } \
  static void rank_##sfx(const T *restrict w, int64_t Tkp, const T *restrict u, int64_t n, int64_t Dp, T *restrict m, \
                         int64_t ms) { \
    for (int64_t cb = 0; cb < Dp / ATT_W; cb += 2) \
      if (Dp / ATT_W - cb == 1) rtile_##sfx(w, Tkp, u, n, Dp, cb, 1, m, ms); \
      else rtile_##sfx(w, Tkp, u, n, Dp, cb, 2, m, ms); } \
  /* lane sum and lane max by halves: lane 0 of the result holds the total */ \
  static inline __attribute__((always_inline)) T hsum_##sfx(V_##sfx x) { \
    VI_##sfx lane, idx; \
    for (int t = 0; t < ATT_W; t++) lane[t] = t; \
    for (int w = ATT_W / 2; w >= 1; w /= 2) { idx = (lane + w) % ATT_W; x += __builtin_shuffle(x, idx); } \
    return x[0]; } \
  static inline __attribute__((always_inline)) T hmax_##sfx(V_##sfx m) { \
    VI_##sfx lane, idx; \
    for (int t = 0; t < ATT_W; t++) lane[t] = t; \
    for (int w = ATT_W / 2; w >= 1; w /= 2) { \
      idx = (lane + w) % ATT_W; \
      V_##sfx x = __builtin_shuffle(m, idx); VI_##sfx k = x > m; m = (V_##sfx)(((VI_##sfx)x & k) | ((VI_##sfx)m & ~k)); } \
    return m[0]; } \
  /* the group's rows p (normalized in place by inv[r]) and dp: dp = sc p (dp - sum_j p dp), over \
  ** whole blocks (p is 0 past each row's keys) */ \
  static inline __attribute__((always_inline)) void dsoft_##sfx(T *restrict p, T *restrict dp, int64_t Tkp, \
                                                               int64_t nb, const T *inv, T sc) { \
    T di[ATT_Q]; \
    for (int r = 0; r < ATT_Q; r++) { \
      V_##sfx acc = { 0 }; \
      for (int64_t jb = 0; jb < nb; jb++) { \
        VU_##sfx *pv = (VU_##sfx *)(p + r * Tkp + jb * ATT_W); V_##sfx x = *pv * inv[r]; *pv = x; \
        acc += x * *(const VU_##sfx *)(dp + r * Tkp + jb * ATT_W); } \
      di[r] = hsum_##sfx(acc); } \
    for (int r = 0; r < ATT_Q; r++) \
      for (int64_t jb = 0; jb < nb; jb++) { \
        VU_##sfx *dv = (VU_##sfx *)(dp + r * Tkp + jb * ATT_W); \
        *dv = sc * *(const VU_##sfx *)(p + r * Tkp + jb * ATT_W) * (*dv - di[r]); } } \
  /* the group's rows s[r, 0 .. nb W): p[j] = exp(s[j] - max) for j < n[r], 0 after; inv[r] = 1 / sum p. \
  ** Only a row's last block can be partial: its lanes past n are masked by lane index (exp flushes \
  ** -inf to 0). The four rows' reductions are independent chains, written in one function so that \
  ** they overlap. */ \
  static inline __attribute__((always_inline)) void softmax_##sfx(T *restrict s, int64_t Tkp, const int64_t *n, \
                                                                 int64_t nb, T *inv) { \
    VI_##sfx lane; \
    for (int t = 0; t < ATT_W; t++) lane[t] = t; \
    V_##sfx ninf = { 0 }; ninf -= (T)INFINITY; \
    T mx[ATT_Q]; \
    for (int r = 0; r < ATT_Q; r++) { \
      T *sr = s + r * Tkp; \
      if (n[r] == 0) { memset(sr, 0, sizeof(T) * (size_t)(nb * ATT_W)); continue; }   /* a missing row */ \
      int64_t lb = (n[r] - 1) / ATT_W;       /* the row's last block; later ones are all masked */ \
      for (int64_t jb = lb + 1; jb < nb; jb++) *(VU_##sfx *)(sr + jb * ATT_W) = ninf; \
      VU_##sfx *last = (VU_##sfx *)(sr + lb * ATT_W); \
      VI_##sfx out = lane >= (TI)(n[r] - lb * ATT_W); \
      *last = (V_##sfx)(((VI_##sfx)*last & ~out) | ((VI_##sfx)ninf & out)); \
      V_##sfx m = *(const VU_##sfx *)sr; \
      for (int64_t jb = 1; jb <= lb; jb++) { \
        V_##sfx x = *(const VU_##sfx *)(sr + jb * ATT_W); \
        VI_##sfx k = x > m; m = (V_##sfx)(((VI_##sfx)x & k) | ((VI_##sfx)m & ~k)); } \
      mx[r] = hmax_##sfx(m); } \
    for (int r = 0; r < ATT_Q; r++) { \
      if (n[r] == 0) { inv[r] = 0; continue; } \
      V_##sfx sum = { 0 }; \
      for (int64_t jb = 0; jb < nb; jb++) { \
        VU_##sfx *x = (VU_##sfx *)(s + r * Tkp + jb * ATT_W); \
        V_##sfx e = EXPV(*x - mx[r]); *x = e; sum += e; } \
      inv[r] = (T)1 / hsum_##sfx(sum); } } \
  /* x (n, D), row stride xs, into xt (D, np) transposed or into xp (n, Dp) by rows, zero padded */ \
  static __attribute__((unused)) void pack_ts_##sfx(const T *restrict x, int64_t xs, T *restrict xt, int64_t n, int64_t D, int64_t np) { \
    for (int64_t d = 0; d < D; d++) { \
      T *r = xt + d * np; \
      for (int64_t j = 0; j < n; j++) r[j] = x[j * xs + d]; \
      for (int64_t j = n; j < np; j++) r[j] = 0; } } \
  static void pack_r_##sfx(const T *x, int64_t xs, T *xp, int64_t n, int64_t D, int64_t Dp) { \
    for (int64_t j = 0; j < n; j++) for (int64_t d = 0; d < Dp; d++) xp[j * Dp + d] = d < D ? x[j * xs + d] : 0; } \
  /* the query group [i0, i0 + nr) (nr <= ATT_Q; missing rows are zeros): each row's key count n[r] */ \
  static int64_t group_##sfx(const AttnJob *a, int64_t i0, int64_t nr, int64_t *n) { \
    int64_t mx = 0; \
    for (int r = 0; r < ATT_Q; r++) { \
      n[r] = r >= nr ? 0 : a->causal && i0 + r + 1 < a->Tk ? i0 + r + 1 : a->Tk; \
      mx = n[r] > mx ? n[r] : mx; } \
    return mx; }

/* forward of batch entries [b0, b1): o_i = sum_j p_ij v_j / sum_j p_ij */
#define DEF_FWD(sfx, T) \
  static void fwd_##sfx(void *ctx, int64_t b0, int64_t b1) { \
    const AttnJob *a = ctx; \
    int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, Dv = a->Dv, Tkp = att_up(Tk), Dvp = att_up(Dv); \
    T *kt = malloc(sizeof(T) * (size_t)(D * Tkp + Tk * Dvp + ATT_Q * (Tkp + D + Dvp))); \
    if (!kt) { __atomic_store_n(&((AttnJob *)ctx)->failed, 1, __ATOMIC_RELAXED); return; } \
    T *vp = kt + D * Tkp, *s = vp + Tk * Dvp, *qs = s + ATT_Q * Tkp, *og = qs + ATT_Q * D; \
    for (int64_t b = b0; b < b1; b++) { \
      const T *q = (const T *)a->in[0] + att_off(a, 0, b); \
      int64_t qr = a->row[0]; \
      T *o = (T *)a->o + b * Tq * Dv; \
      pack_t_##sfx((const T *)a->in[1] + att_off(a, 1, b), a->row[1], kt, Tk, D, Tkp); \
      const T *vr = (const T *)a->in[2] + att_off(a, 2, b); \
      int64_t vs = a->row[2]; \
      if (Dv != Dvp) { pack_r_##sfx(vr, vs, vp, Tk, Dv, Dvp); vr = vp; vs = Dvp; }   /* else read in place */ \
      for (int64_t i0 = 0; i0 < Tq; i0 += ATT_Q) { \
        int64_t nr = Tq - i0 < ATT_Q ? Tq - i0 : ATT_Q, n[ATT_Q], mx = group_##sfx(a, i0, nr, n), nb = (mx + ATT_W - 1) / ATT_W; \
        T inv[ATT_Q]; \
        if (nr < ATT_Q) memset(qs, 0, sizeof(T) * ATT_Q * (size_t)D); \
        for (int64_t r = 0; r < nr; r++) for (int64_t d = 0; d < D; d++) qs[r * D + d] = q[(i0 + r) * qr + d] * (T)a->scale; \
        dots_##sfx(qs, D, kt, D, Tkp, nb, s); \
        softmax_##sfx(s, Tkp, n, nb, inv); \
        wsum_##sfx(s, Tkp, vr, vs, mx, Dvp, og); \
        for (int64_t r = 0; r < nr; r++) for (int64_t c = 0; c < Dv; c++) o[(i0 + r) * Dv + c] = og[r * Dvp + c] * inv[r]; } } \
    free(kt); }

/* backward of batch entries [b0, b1), per query row i (p recomputed, normalized):
**   dv_j += p_j g_i;  dp_j = g_i . v_j;  ds_j = scale p_j (dp_j - sum_j p_j dp_j)
**   dq_i = sum_j ds_j k_j;  dk_j += ds_j q_i */
#define DEF_BWD(sfx, T) \
  static void bwd_##sfx(void *ctx, int64_t b0, int64_t b1) { \
    const AttnJob *a = ctx; \
    int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, Dv = a->Dv, Tkp = att_up(Tk), Dp = att_up(D), Dvp = att_up(Dv); \
    T *kt = malloc(sizeof(T) * (size_t)(D * Tkp + Dv * Tkp + 2 * Tk * Dp + Tk * Dvp + ATT_Q * (2 * Tkp + D + 2 * Dp + Dvp))); \
    if (!kt) { __atomic_store_n(&((AttnJob *)ctx)->failed, 1, __ATOMIC_RELAXED); return; } \
    T *vt = kt + D * Tkp, *kp = vt + Dv * Tkp, *dkp = kp + Tk * Dp, *dvp = dkp + Tk * Dp, *s = dvp + Tk * Dvp; \
    T *dp = s + ATT_Q * Tkp, *qs = dp + ATT_Q * Tkp, *qp = qs + ATT_Q * D, *dqg = qp + ATT_Q * Dp, *gp = dqg + ATT_Q * Dp; \
    T sc = (T)a->scale; \
    for (int64_t b = b0; b < b1; b++) { \
      const T *q = (const T *)a->in[0] + att_off(a, 0, b), *k = (const T *)a->in[1] + att_off(a, 1, b); \
      const T *v = (const T *)a->in[2] + att_off(a, 2, b), *g = (const T *)a->in[3] + att_off(a, 3, b); \
      int64_t qr = a->row[0], kr = a->row[1], vr = a->row[2], gr = a->row[3]; \
      T *dq = (T *)a->o + b * Tq * D, *dk = (T *)a->o + a->nq + b * Tk * D, *dv = (T *)a->o + a->nq + a->nk + b * Tk * Dv; \
      pack_t_##sfx(k, kr, kt, Tk, D, Tkp); pack_t_##sfx(v, vr, vt, Tk, Dv, Tkp); \
      const T *kk = k; int64_t ks = kr; \
      if (D != Dp) { pack_r_##sfx(k, kr, kp, Tk, D, Dp); kk = kp; ks = Dp; } \
      T *dka = D == Dp ? dk : dkp, *dva = Dv == Dvp ? dv : dvp;   /* whole blocks: accumulate in place */ \
      memset(dka, 0, sizeof(T) * (size_t)(Tk * Dp)); memset(dva, 0, sizeof(T) * (size_t)(Tk * Dvp)); \
      for (int64_t i0 = 0; i0 < Tq; i0 += ATT_Q) { \
        int64_t nr = Tq - i0 < ATT_Q ? Tq - i0 : ATT_Q, n[ATT_Q], mx = group_##sfx(a, i0, nr, n), nb = (mx + ATT_W - 1) / ATT_W; \
        if (nr < ATT_Q || D != Dp || Dv != Dvp) {   /* missing rows and padding lanes are zeros */ \
          memset(qs, 0, sizeof(T) * ATT_Q * (size_t)D); memset(qp, 0, sizeof(T) * ATT_Q * (size_t)Dp); \
          memset(gp, 0, sizeof(T) * ATT_Q * (size_t)Dvp); } \
        for (int64_t r = 0; r < nr; r++) { \
          for (int64_t d = 0; d < D; d++) { qs[r * D + d] = q[(i0 + r) * qr + d] * sc; qp[r * Dp + d] = q[(i0 + r) * qr + d]; } \
          for (int64_t c = 0; c < Dv; c++) gp[r * Dvp + c] = g[(i0 + r) * gr + c]; } \
        dots_##sfx(qs, D, kt, D, Tkp, nb, s); \
        dots_##sfx(gp, Dvp, vt, Dv, Tkp, nb, dp); \
        T inv[ATT_Q]; \
        softmax_##sfx(s, Tkp, n, nb, inv); \
        dsoft_##sfx(s, dp, Tkp, nb, inv, sc); \
        wsum_##sfx(dp, Tkp, kk, ks, mx, Dp, dqg); \
        for (int64_t r = 0; r < nr; r++) for (int64_t d = 0; d < D; d++) dq[(i0 + r) * D + d] = dqg[r * Dp + d]; \
        rank_##sfx(dp, Tkp, qp, mx, Dp, dka, Dp); \
        rank_##sfx(s, Tkp, gp, mx, Dvp, dva, Dvp); } \
      for (int64_t j = 0; j < Tk; j++) { \
        if (dka != dk) memcpy(dk + j * D, dkp + j * Dp, sizeof(T) * (size_t)D); \
        if (dva != dv) memcpy(dv + j * Dv, dvp + j * Dvp, sizeof(T) * (size_t)Dv); } } \
    free(kt); }

DEF_ATT(f32, float, int32_t, vexp_f32, KEEP_F32) DEF_ATT(f64, double, int64_t, vexp_f64, KEEP_NONE)
/* K^T packing for float: whole 16 x 16 tiles are transposed in registers by
** four perfect shuffles (interleaving rows i and i + 8 rotates the 8-bit index
** (row, column) left by one bit; four rotations swap row and column), the
** rest element by element. Scalar copies were ~10% of the backward. */
static void pack_t_f32(const float *restrict x, int64_t xs, float *restrict xt, int64_t n, int64_t D, int64_t np)
{
  const VI16 lo = { 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23 };
  const VI16 hi = { 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31 };
  int64_t n16 = n / 16 * 16, D16 = D / 16 * 16;
  for (int64_t j0 = 0; j0 < n16; j0 += 16)
    for (int64_t d0 = 0; d0 < D16; d0 += 16) {
      VF16 r[16], t[16];
      for (int i = 0; i < 16; i++) r[i] = *(const VU16F *)(x + (j0 + i) * xs + d0);
      for (int st = 0; st < 4; st++) {
        for (int i = 0; i < 8; i++) { t[2 * i] = __builtin_shuffle(r[i], r[i + 8], lo); t[2 * i + 1] = __builtin_shuffle(r[i], r[i + 8], hi); }
        memcpy(r, t, sizeof r);
      }
      for (int i = 0; i < 16; i++) *(VU16F *)(xt + (d0 + i) * np + j0) = r[i];
    }
  for (int64_t d = 0; d < D; d++) {
    float *r = xt + d * np;
    for (int64_t j = d < D16 ? n16 : 0; j < n; j++) r[j] = x[j * xs + d];
    for (int64_t j = n; j < np; j++) r[j] = 0;
  }
}
static void pack_t_f64(const double *restrict x, int64_t xs, double *restrict xt, int64_t n, int64_t D, int64_t np)
{ pack_ts_f64(x, xs, xt, n, D, np); }

DEF_FWD(f32, float) DEF_FWD(f64, double)
DEF_BWD(f32, float) DEF_BWD(f64, double)

/* the inputs in the compute dtype, kept where they are unless the embedding dim is strided */
static int attn_job(RtCall *c, int nin, td_tensor **in, AttnJob *a, char *out)
{
  const char *name = c->op == RT_OP_SDPA ? "scaled_dot_product_attention" : "scaled_dot_product_attention backward";
  int dt = c->cdtype;
  if (dt != TD_FLOAT32 && dt != TD_FLOAT64)
    return rt_err(TD_ERR_DTYPE, "%s: expected float32 or float64 tensors, got %s", name, td_dtype_name(dt));
  memset(a, 0, sizeof *a);
  int n = c->in[0]->ndim;
  a->nbd = n - 2;
  for (int d = 0; d < n - 2; d++) a->bsz[d] = c->in[0]->sizes[d];
  for (int i = 0; i < nin; i++) {
    td_tensor *x = rt_as_dtype(c->in[i], dt);
    if (x && x->strides[n - 1] != 1 && x->sizes[n - 1] > 1) { td_tensor *y = rt_as_contig(x); td_release(x); x = y; }
    if (!(in[i] = x)) return TD_ERR_NOMEM;
    a->in[i] = rt_ptr(x); a->row[i] = x->strides[n - 2];
    for (int d = 0; d < n - 2; d++) a->bst[i][d] = x->strides[d];
  }
  const td_tensor *q = in[0], *k = in[1], *v = in[2];
  a->o = out;
  a->Tq = q->sizes[n - 2]; a->Tk = k->sizes[n - 2]; a->D = q->sizes[n - 1]; a->Dv = v->sizes[n - 1];
  a->nq = q->nelem; a->nk = k->nelem;
  a->causal = c->attrs.i[0] != 0; a->scale = c->attrs.s[0];
  return 0;
}

static int attn_run(RtCall *c, td_tensor *out, int nin, RtRangeFn f32, RtRangeFn f64)
{
  td_tensor *in[4] = { 0 };
  AttnJob a;
  int rc = attn_job(c, nin, in, &a, rt_ptr(out));
  if (!rc && out->nelem > 0) {
    const td_tensor *q = in[0];
    int64_t nb = 1;
    for (int d = 0; d < q->ndim - 2; d++) nb *= q->sizes[d];
    int64_t work = (a.Tq * a.Tk * (a.D + a.Dv)) / (a.causal ? 2 : 1) + 1;
    rt_parallel_for(nb, work >= 65536 ? 1 : 65536 / work, c->cdtype == TD_FLOAT32 ? f32 : f64, &a);
    if (a.failed)
      rc = rt_err(TD_ERR_NOMEM, "scaled_dot_product_attention: out of memory for the scratch of keys of %s",
                  RT_SHAPE(in[1]));
  }
  for (int i = 0; i < nin; i++) td_release(in[i]);
  return rc;
}

int rt_sdpa_masked(RtCall *c, td_tensor *out);
int RT_ISA_FN(rt_kern_sdpa)(RtCall *c, td_tensor *out)
{ return c->nin > 3 ? rt_sdpa_masked(c, out) : attn_run(c, out, 3, fwd_f32, fwd_f64); }
int RT_ISA_FN(rt_kern_sdpa_backward)(RtCall *c, td_tensor *out)
{ return c->nin > 4 ? rt_sdpa_masked(c, out) : attn_run(c, out, 4, bwd_f32, bwd_f64); }
