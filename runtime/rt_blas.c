/*
** rt_blas.c -- contraction: matmul with torch.matmul semantics (1-D . 1-D dot,
** 2-D @ 2-D, a 1-D operand promoted to a row/column and its dim removed, and
** batched products with broadcast batch dims). Eager kernel of the runtime:
** float32/float64 go to OpenBLAS through CBLAS, integers to a plain loop.
*/
#include "rt.h"
#include <cblas.h>
#include <limits.h>
#include <string.h>

/* -- Design note --------------------------------------------------------------------------
**
** Every call is seen as `nbatch` products C (M,N) = A (M,K) @ B (K,N) into the
** contiguous result. An operand is a strided matrix (rows, cols, rs, cs) plus
** per-batch-dim strides aligned to the result's batch dims (0 where it is
** broadcast), so broadcast operands are never copied. A strided matrix goes to
** BLAS as it is when it is row-major (cs == 1) or transposed row-major (rs == 1,
** passed with CblasTrans); only when neither fits is the operand copied.
**
** Threads: OpenBLAS runs single-threaded and tide's pool splits the work: the
** batch of products, and each product into blocks of rows or columns of C (the
** larger side, in multiples of 16, a cut that depends on the shapes only, so
** results do not depend on the thread count). Two pools on the same cores
** (OpenBLAS's threads yield-spinning while tide's run the next kernel) cost a
** training step ~15% in sched_yield; one pool also runs small batched products
** (attention's heads) side by side instead of threading each tiny one. The
** integer loop uses the pool over output rows.
*/

/* -- Meta -------------------------------------------------------------------------------- */

/* a (..., M, K) or (K); b (..., K, N) or (K)  ->  broadcast(batch) ++ [M] ++ [N],
** with M dropped when a is 1-D and N dropped when b is 1-D (both: a 0-dim dot). */
int rt_meta_matmul(RtCall *c)
{
  const td_tensor *a = c->in[0], *b = c->in[1];
  if (a->ndim == 0 || b->ndim == 0)
    return rt_err(TD_ERR_SHAPE, "matmul: both arguments need at least 1 dim, got %s @ %s",
                  RT_SHAPE(a), RT_SHAPE(b));
  int64_t ka = a->sizes[a->ndim - 1], kb = b->sizes[b->ndim == 1 ? 0 : b->ndim - 2];
  if (ka != kb)
    return rt_err(TD_ERR_SHAPE, "matmul: shape mismatch %s @ %s (inner dims %lld and %lld differ)",
                  RT_SHAPE(a), RT_SHAPE(b), (long long)ka, (long long)kb);
  int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0;
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : a->sizes[i - (n - na)], y = i < n - nb ? 1 : b->sizes[i - (n - nb)];
    if (x != y && x != 1 && y != 1)
      return rt_err(TD_ERR_SHAPE, "matmul: batch dims of %s @ %s cannot be broadcast (%lld and %lld at batch dim %d)",
                    RT_SHAPE(a), RT_SHAPE(b), (long long)x, (long long)y, i + 1);
    c->sizes[i] = x == 1 ? y : x;
  }
  c->ndim = n;
  if (a->ndim > 1) c->sizes[c->ndim++] = a->sizes[a->ndim - 2];
  if (b->ndim > 1) c->sizes[c->ndim++] = b->sizes[b->ndim - 1];
  return 0;
}

/* -- Geometry (RtMmGeom in rt.h: shared with opencl/cl_blas.c) --------------------------- */

void rt_mm_geom(RtMmGeom *g, const td_tensor *a, const td_tensor *b, const td_tensor *out)
{
  int a1 = a->ndim == 1, b1 = b->ndim == 1;
  g->K = a->sizes[a->ndim - 1];
  g->M = a1 ? 1 : a->sizes[a->ndim - 2];
  g->N = b1 ? 1 : b->sizes[b->ndim - 1];
  g->nbd = out->ndim - !a1 - !b1;
  g->nbatch = 1;
  for (int d = 0; d < g->nbd; d++) { g->bsz[d] = out->sizes[d]; g->nbatch *= out->sizes[d]; }
  g->a.rows = g->M; g->a.cols = g->K;
  g->a.rs = a1 ? 0 : a->strides[a->ndim - 2]; g->a.cs = a->strides[a->ndim - 1];
  g->b.rows = g->K; g->b.cols = g->N;
  g->b.rs = b1 ? b->strides[0] : b->strides[b->ndim - 2]; g->b.cs = b1 ? 0 : b->strides[b->ndim - 1];
  for (int k = 0; k < 2; k++) {
    const td_tensor *t = k ? b : a;
    RtMmOperand *o = k ? &g->b : &g->a;
    int tb = t->ndim - (t->ndim == 1 ? 1 : 2);   /* t's batch dims, aligned right */
    for (int d = 0; d < g->nbd; d++) {
      int td = d - (g->nbd - tb);
      o->bst[d] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td];
    }
    o->off = t->offset;
  }
}

/* RT_MM_NOTRANS or RT_MM_TRANS with leading dim *ld <= maxld, or -1 (rt.h);
** the stride of a size-1 dim is irrelevant. */
static int mm_layout(const RtMmOperand *o, int64_t maxld, int64_t *ld)
{
  int64_t r1 = o->rows > 1 ? o->rows : 1, c1 = o->cols > 1 ? o->cols : 1;
  if (o->cs == 1 || o->cols <= 1) {
    *ld = o->rows <= 1 ? c1 : o->rs;
    if (*ld >= c1 && *ld <= maxld) return RT_MM_NOTRANS;
  }
  if (o->rs == 1 || o->rows <= 1) {
    *ld = o->cols <= 1 ? r1 : o->cs;
    if (*ld >= r1 && *ld <= maxld) return RT_MM_TRANS;
  }
  return -1;
}

int rt_mm_layouts(RtMmGeom *g, td_tensor **a, td_tensor **b, const td_tensor *out, int64_t maxld, RtMmLayout *l)
{
  l->lda = l->ldb = 0;
  l->ta = mm_layout(&g->a, maxld, &l->lda); l->tb = mm_layout(&g->b, maxld, &l->ldb);
  if (l->ta >= 0 && l->tb >= 0) return 0;
  /* neither row-major nor transposed: copy the offending operand(s) */
  td_tensor *t;
  if (l->ta < 0) { t = rt_as_contig(*a); td_release(*a); *a = t; }
  if (l->tb < 0) { t = rt_as_contig(*b); td_release(*b); *b = t; }
  if (!*a || !*b) return TD_ERR_NOMEM;
  rt_mm_geom(g, *a, *b, out);
  l->ta = mm_layout(&g->a, maxld, &l->lda); l->tb = mm_layout(&g->b, maxld, &l->ldb);
  return 0;
}

int64_t rt_mm_fold_ld(const RtMmGeom *g, int ta, int64_t lda, int64_t maxld)
{
  if (ta != RT_MM_NOTRANS || g->nbatch == 1) return -1;
  int64_t ld = g->M > 1 ? lda : -1, rows = g->M;   /* M == 1: the first batch stride sets it */
  for (int d = g->nbd - 1; d >= 0; d--) {
    if (g->bsz[d] == 1) continue;
    if (g->b.bst[d] != 0) return -1;
    if (ld < 0) ld = g->a.bst[d];
    else if (g->a.bst[d] != ld * rows) return -1;
    rows *= g->bsz[d];
  }
  return ld >= (g->K > 1 ? g->K : 1) && ld <= maxld && rows <= maxld ? ld : -1;
}

/* The CPU's call: the geometry and the operands' data (a tensor's data pointer
** is its storage at the geometry's `off`; batch bi adds rt_mm_batch_off's
** element offsets). */
typedef struct {
  RtMmGeom g;
  const char *a, *b;
  char *c;                             /* the contiguous result, nbatch blocks of M*N */
  int64_t es;                          /* element size */
} MmCpu;

/* -- BLAS path ----------------------------------------------------------------------------- */

/* CblasNoTrans / CblasTrans are rt_mm_layouts' values (leading dims up to INT_MAX). */
_Static_assert(CblasNoTrans == RT_MM_NOTRANS && CblasTrans == RT_MM_TRANS, "RT_MM_* are CBLAS's values");

/* One product C (M,N) = op(A) op(B), C row-major with leading dim ldc. gemv for a single row or
** column, dot for 1x1; strides along K: A NoTrans 1, Trans lda; B NoTrans ldb, Trans 1. */
static void mm_blas_one(int dt, int ta, int tb, int M, int N, int K, const void *A, int lda,
                        const void *B, int ldb, void *C, int ldc)
{
  int inca = ta == CblasNoTrans ? 1 : lda, incb = tb == CblasNoTrans ? ldb : 1;
  bool f = dt == TD_FLOAT32;
  if (M == 1 && N == 1) {
    if (f) *(float *)C = cblas_sdot(K, A, inca, B, incb);
    else *(double *)C = cblas_ddot(K, A, inca, B, incb);
  } else if (N == 1) {
    /* y (M) = op(A) x; A stored (M,K) or (K,M) */
    int r = ta == CblasNoTrans ? M : K, cc = ta == CblasNoTrans ? K : M;
    if (f) cblas_sgemv(CblasRowMajor, ta, r, cc, 1.0f, A, lda, B, incb, 0.0f, C, ldc);
    else cblas_dgemv(CblasRowMajor, ta, r, cc, 1.0, A, lda, B, incb, 0.0, C, ldc);
  } else if (M == 1) {
    /* y (N) = op(B)^T a; B stored (K,N) (use Trans) or (N,K) (use NoTrans) */
    int t = tb == CblasNoTrans ? CblasTrans : CblasNoTrans;
    int r = tb == CblasNoTrans ? K : N, cc = tb == CblasNoTrans ? N : K;
    if (f) cblas_sgemv(CblasRowMajor, t, r, cc, 1.0f, B, ldb, A, inca, 0.0f, C, 1);
    else cblas_dgemv(CblasRowMajor, t, r, cc, 1.0, B, ldb, A, inca, 0.0, C, 1);
  } else {
    if (f) cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
    else cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, C, ldc);
  }
}

/* The float path's work items: nbatch products, each cut into nsplit blocks of
** rows (split_m) or columns of C. */
typedef struct {
  const MmCpu *m;
  int ta, tb, dt, split_m;
  int64_t lda, ldb, fld, nsplit, blk;
} MmJob;

static void mm_blas_items(void *ctx, int64_t begin, int64_t end)
{
  const MmJob *j = ctx; const MmCpu *m = j->m; const RtMmGeom *g = &m->g;
  int64_t es = m->es;
  for (int64_t it = begin; it < end; it++) {
    int64_t bi = it / j->nsplit, s = it % j->nsplit;
    int64_t M = j->fld > 0 ? g->nbatch * g->M : g->M, N = g->N;
    const char *A = m->a, *B = m->b;
    char *C = m->c + bi * g->M * g->N * es;
    int64_t lda = j->fld > 0 ? j->fld : j->lda;
    if (j->fld <= 0) { int64_t oa, ob; rt_mm_batch_off(g, bi, &oa, &ob); A += oa * es; B += ob * es; }
    int64_t b0 = s * j->blk, n = (j->split_m ? M : N) - b0;
    if (n > j->blk) n = j->blk;
    if (n <= 0) continue;
    if (j->split_m) {          /* rows b0.. of C and of op(A) */
      A += (j->ta == CblasNoTrans ? b0 * lda : b0) * es;
      C += b0 * N * es;
      M = n;
    } else {                   /* columns b0.. of C and of op(B) */
      B += (j->tb == CblasNoTrans ? b0 : b0 * j->ldb) * es;
      C += b0 * es;
    }
    mm_blas_one(j->dt, j->ta, j->tb, (int)M, j->split_m ? (int)N : (int)n, (int)g->K, A, (int)lda, B, (int)j->ldb,
                C, (int)N);
  }
}

/* OpenBLAS runs single-threaded inside tide's pool threads, each on its own block */
void rt_blas_single(void)
{
  static int blas_single;
  if (!__atomic_load_n(&blas_single, __ATOMIC_ACQUIRE)) {
    openblas_set_num_threads(1);
    __atomic_store_n(&blas_single, 1, __ATOMIC_RELEASE);
  }
}

static void mm_blas(const MmCpu *m, int ta, int64_t lda, int tb, int64_t ldb, int dt)
{
  rt_blas_single();
  const RtMmGeom *g = &m->g;
  MmJob j = { .m = m, .ta = ta, .tb = tb, .dt = dt, .lda = lda, .ldb = ldb, .fld = rt_mm_fold_ld(g, ta, lda, INT_MAX) };
  int64_t nb = j.fld > 0 ? 1 : g->nbatch, M = j.fld > 0 ? g->nbatch * g->M : g->M, N = g->N;
  /* cut a product into up to 4 blocks when the batch has fewer than 4 products,
  ** keeping >= ~2 MFLOP and 16 rows/columns per block. The cut depends on the
  ** shapes only, never on the thread count, so results do not either (OpenBLAS
  ** may sum a block's K differently by the block's size). Each block packs all
  ** of the operand it does not cut: up to 8 blocks made the MLP's 512x128x784
  ** weight gradient 15% and its whole compiled step ~4% slower on 2 threads. */
  j.split_m = M >= N;
  int64_t side = j.split_m ? M : N, want = nb >= 4 ? 1 : (4 + nb - 1) / nb;
  int64_t maxs = (2 * M * N * g->K) / (2 << 20);
  if (want > maxs) want = maxs > 1 ? maxs : 1;
  if (want > side / 16) want = side / 16 > 1 ? side / 16 : 1;
  j.blk = (side + want - 1) / want;
  if (want > 1) j.blk = (j.blk + 15) & ~(int64_t)15;
  j.nsplit = (side + j.blk - 1) / j.blk;
  int64_t items = nb * j.nsplit, flops = 2 * M * N * g->K * nb;
  /* batches of tiny products: ~64 KFLOP per chunk at least */
  int64_t grain = items > 1 ? 1 + (int64_t)(65536 * items / (flops + 1)) : 1;
  rt_parallel_for(items, grain, mm_blas_items, &j);
}

const char *td_blas_core(void) { return openblas_get_corename(); }

/* -- Short products on tide's register tile ---------------------------------------------------
** One float32 product (or a batch folded into one: B broadcast, A's rows evenly
** strided) to rt_mmtile.c, which takes a short A on x86-64-v4 and answers 1
** (not applicable) otherwise. B's storage keys its packed-panel cache only
** when b is the caller's own tensor, not a copy made here. */
static int mm_tile(const MmCpu *m, const td_tensor *b, const td_tensor *b0, const RtMmLayout *l)
{
  const RtMmGeom *g = &m->g;
  int64_t fld = rt_mm_fold_ld(g, l->ta, l->lda, INT64_MAX);
  if (g->nbatch != 1 && fld <= 0) return 1;
  RtMmTile t = { .M = fld > 0 ? g->nbatch * g->M : g->M, .N = g->N, .K = g->K, .ldb = l->ldb,
                 .a = (const float *)m->a, .b = (const float *)m->b, .c = (float *)m->c, .btrans = l->tb == RT_MM_TRANS,
                 .bs = b->rt_storage == b0->rt_storage ? b->rt_storage : NULL };
  if (fld > 0) { t.ars = fld; t.acs = 1; }
  else if (l->ta == RT_MM_NOTRANS) { t.ars = l->lda; t.acs = 1; }
  else { t.ars = 1; t.acs = l->lda; }
  return rt_mm_tile(&t);
}

/* The float32 products rt_mmtile.c does not take, on the 64-column tile
** (rt_bmmtile.c: mid-size products, batched or not; 1 where OpenBLAS runs). It
** reads any strides, so an operand BLAS cannot take (a broadcast gradient:
** sum()'s ones expanded) goes to it before rt_mm_layouts would copy it. */
static int mm_bmm_tile(const MmCpu *m, int64_t ars, int64_t acs, int64_t brs, int64_t bcs)
{
  RtBmmTile t = { .g = &m->g, .a = (const float *)m->a, .b = (const float *)m->b, .c = (float *)m->c,
                  .ars = ars, .acs = acs, .brs = brs, .bcs = bcs };
  return rt_bmm_tile(&t);
}

static int mm_bmm_tile_l(const MmCpu *m, const RtMmLayout *l)
{
  int an = l->ta == RT_MM_NOTRANS, bn = l->tb == RT_MM_NOTRANS;
  return mm_bmm_tile(m, an ? l->lda : 1, an ? 1 : l->lda, bn ? l->ldb : 1, bn ? 1 : l->ldb);
}

/* -- Integer path --------------------------------------------------------------------------- */

/* C[r, j] = sum_k A[i, k] B[k, j] accumulated in int64, over result rows r = (batch, i). */
#define MM_INT(sfx, T) \
  static void mm_rows_##sfx(void *ctx, int64_t begin, int64_t end) { \
    const MmCpu *m = ctx; const RtMmGeom *g = &m->g; \
    for (int64_t r = begin; r < end; r++) { \
      int64_t bi = r / g->M, i = r % g->M, oa, ob; \
      rt_mm_batch_off(g, bi, &oa, &ob); \
      const T *A = (const T *)m->a + oa + i * g->a.rs, *B = (const T *)m->b + ob; \
      T *C = (T *)m->c + r * g->N; \
      for (int64_t j = 0; j < g->N; j++) { \
        int64_t acc = 0; \
        for (int64_t k = 0; k < g->K; k++) acc += (int64_t)A[k * g->a.cs] * (int64_t)B[k * g->b.rs + j * g->b.cs]; \
        C[j] = (T)acc; \
      } \
    } }
MM_INT(u8, uint8_t)
MM_INT(i32, int32_t)
MM_INT(i64, int64_t)

/* -- The kernel ------------------------------------------------------------------------------ */

int rt_kern_matmul(RtCall *c, td_tensor *out)
{
  int dt = c->cdtype, rc = 0;
  td_tensor *a = rt_as_dtype(c->in[0], dt), *b = rt_as_dtype(c->in[1], dt);
  if (!a || !b) { rc = TD_ERR_NOMEM; goto done; }
  MmCpu m;
  const RtMmGeom *g = &m.g;
  rt_mm_geom(&m.g, a, b, out);
  m.a = rt_ptr(a); m.b = rt_ptr(b); m.c = rt_ptr(out); m.es = rt_dtype_size(out->scalar_type);
  if (out->nelem == 0) goto done;
  if (g->K == 0) { memset(rt_ptr(out), 0, (size_t)out->nelem * m.es); goto done; }
  if (rt_is_float(dt)) {
    if (g->M > INT_MAX || g->N > INT_MAX || g->K > INT_MAX) {
      rc = rt_err(TD_ERR_SHAPE, "matmul: %s @ %s has a dim above BLAS's limit of %d",
                  RT_SHAPE(c->in[0]), RT_SHAPE(c->in[1]), INT_MAX);
      goto done;
    }
    RtMmLayout l;
    int64_t ld;
    if (dt == TD_FLOAT32 && (mm_layout(&g->a, INT_MAX, &ld) < 0 || mm_layout(&g->b, INT_MAX, &ld) < 0) &&
        (rc = mm_bmm_tile(&m, g->a.rs, g->a.cs, g->b.rs, g->b.cs)) <= 0)
      goto done;
    if ((rc = rt_mm_layouts(&m.g, &a, &b, out, INT_MAX, &l))) goto done;
    m.a = rt_ptr(a); m.b = rt_ptr(b);           /* a copied operand's data */
    if (dt == TD_FLOAT32 && (rc = mm_tile(&m, b, c->in[1], &l)) <= 0) goto done;
    if (dt == TD_FLOAT32 && (rc = mm_bmm_tile_l(&m, &l)) <= 0) goto done;
    rc = 0;
    mm_blas(&m, l.ta, l.lda, l.tb, l.ldb, dt);
  } else {
    RtRangeFn fn = dt == TD_UINT8 ? mm_rows_u8 : dt == TD_INT32 ? mm_rows_i32 : dt == TD_INT64 ? mm_rows_i64 : NULL;
    if (!fn) { rc = rt_err(TD_ERR_DTYPE, "matmul: not supported for dtype %s", td_dtype_name(dt)); goto done; }
    int64_t rows = g->nbatch * g->M, work = g->N * g->K;
    rt_parallel_for(rows, work > 0 ? 1 + 65536 / work : 65536, fn, &m);
  }
done:
  td_release(a); td_release(b);
  return rc;
}
