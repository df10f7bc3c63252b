/*
** rt_convgemm.c -- eager convolution and pooling kernels that never hold the
** whole im2col matrix (rt_conv.c's unfold makes it for the traced/compiled
** path). Runtime stage, run by jit/jit_conv.c.
** Convolution: the output is cut into items (image, group, tile of Lt output
** positions); an item copies its windows into a per-thread buffer (K x Lt,
** ~1 MB, in L2) and multiplies it by the group's weights with a
** single-threaded GEMM into the output (y[n, g] (Og, L) += W_g (Og, K) @ cols).
** The backward walks blocks of images: per tile, dW_part += dY_tile @ cols^T,
** dcols = W^T @ dY_tile folded back into dX (col2im, adding the overlaps).
** A 1x1 stride-1 unpadded convolution multiplies x itself. Tiles and blocks
** depend on the shapes only, so results do not depend on the thread count.
** Pooling: one (n, c) plane per item, windows read in place; max pooling
** keeps the window position of each maximum for its backward.
*/
#include "rt.h"
#include "rt_isa.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef TILE_ELEMS
#define TILE_ELEMS 262144          /* an im2col tile: K x Lt elements (1 MB of float32) */
#endif
#define PART_ELEMS (1 << 22)       /* the backward's weight-gradient partials, at most */

/* columns per tile, from the shapes only */
static int64_t conv_tile(int64_t K, int64_t L)
{
  int64_t t = TILE_ELEMS / (K > 0 ? K : 1);
  if (t >= L) return L;
  t = t < 64 ? 64 : t & ~(int64_t)15;
  return t < L ? t : L;
}

static bool conv_is_1x1(const RtConvGeom *g)
{
  return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* -- im2col of one tile and its adjoint ------------------------------------------------------
** cols (K, lt), row k = (c kh + ki) kw + kj, column j = output position l0 + j;
** xn: the group's Cg input planes. An output row's run of positions reads
** one input row: stride 1 is a copy between zeroed edges. */
#define DEF_WIN(sfx, T) \
  static void im2col_##sfx(const RtConvGeom *g, int64_t Cg, const T *xn, T *cols, int64_t l0, int64_t lt, int64_t ld) { \
    int64_t H = g->H, W = g->W, OW = g->OW; \
    for (int64_t c = 0; c < Cg; c++) for (int64_t ki = 0; ki < g->kh; ki++) for (int64_t kj = 0; kj < g->kw; kj++) { \
      T *row = cols + ((c * g->kh + ki) * g->kw + kj) * ld; \
      const T *xp = xn + c * H * W; \
      for (int64_t l = l0, e = l0 + lt; l < e; ) { \
        int64_t oh = l / OW, ow0 = l % OW, run = OW - ow0 < e - l ? OW - ow0 : e - l; \
        T *dst = row + (l - l0); \
        int64_t ih = oh * g->sh - g->ph + ki * g->dh, iw0 = ow0 * g->sw - g->pw + kj * g->dw; \
        if (ih < 0 || ih >= H) memset(dst, 0, (size_t)run * sizeof(T)); \
        else if (g->sw == 1) { \
          int64_t a = iw0 < 0 ? -iw0 : 0, b = W - iw0; \
          if (a > run) a = run; \
          if (b > run) b = run; \
          if (b < a) b = a; \
          memset(dst, 0, (size_t)a * sizeof(T)); \
          memcpy(dst + a, xp + ih * W + iw0 + a, (size_t)(b - a) * sizeof(T)); \
          memset(dst + b, 0, (size_t)(run - b) * sizeof(T)); \
        } else { \
          const T *src = xp + ih * W; \
          for (int64_t t = 0; t < run; t++) { int64_t iw = iw0 + t * g->sw; dst[t] = iw >= 0 && iw < W ? src[iw] : (T)0; } \
        } \
        l += run; } } } \
  static void col2im_##sfx(const RtConvGeom *g, int64_t Cg, T *dxn, const T *cols, int64_t l0, int64_t lt) { \
    int64_t H = g->H, W = g->W, OW = g->OW; \
    for (int64_t c = 0; c < Cg; c++) for (int64_t ki = 0; ki < g->kh; ki++) for (int64_t kj = 0; kj < g->kw; kj++) { \
      const T *row = cols + ((c * g->kh + ki) * g->kw + kj) * lt; \
      T *xp = dxn + c * H * W; \
      for (int64_t l = l0, e = l0 + lt; l < e; ) { \
        int64_t oh = l / OW, ow0 = l % OW, run = OW - ow0 < e - l ? OW - ow0 : e - l; \
        const T *src = row + (l - l0); \
        int64_t ih = oh * g->sh - g->ph + ki * g->dh, iw0 = ow0 * g->sw - g->pw + kj * g->dw; \
        if (ih >= 0 && ih < H) { \
          T *dst = xp + ih * W; \
          if (g->sw == 1) { \
            int64_t a = iw0 < 0 ? -iw0 : 0, b = W - iw0; \
            if (b > run) b = run; \
            for (int64_t t = a; t < b; t++) dst[iw0 + t] += src[t]; \
          } else for (int64_t t = 0; t < run; t++) { int64_t iw = iw0 + t * g->sw; if (iw >= 0 && iw < W) dst[iw] += src[t]; } \
        } \
        l += run; } } }
DEF_WIN(f32, float)
DEF_WIN(f64, double)

/* C (M, N) = alpha op(A) op(B) + beta C, row-major */
static void gemm(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, double beta, void *C, int64_t ldc)
{
  enum CBLAS_TRANSPOSE a = ta ? CblasTrans : CblasNoTrans, b = tb ? CblasTrans : CblasNoTrans;
  if (f64) cblas_dgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
  else cblas_sgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, (float)beta, C, (int)ldc);
}

typedef struct {
  const RtConvJob *j;
  int64_t Cg, Og, K, L, lt, nt;      /* per group; tile width and count */
  int64_t nb;                        /* images per GEMM (small planes: their windows side by side) */
  int64_t bsz, nblk;                 /* backward: images per block, blocks */
  char *part;                        /* backward: per block, dW (O K of the dtype) then db (O doubles) */
  size_t part_stride;
  int failed;                        /* a worker's buffer could not be allocated */
} ConvPlan;

/* A block's partials: dW's OK values (es bytes each), then db's O doubles,
** which start 8-byte aligned (OK * 4 bytes need not be). */
static size_t wpart_bytes(int64_t OK, size_t es) { return ((size_t)OK * es + 7) & ~(size_t)7; }

/* the tile's windows into cols, rows ld apart */
static void im2col(const ConvPlan *p, const void *xn, void *cols, int64_t l0, int64_t lt, int64_t ld)
{
  if (p->j->dtype == TD_FLOAT64) im2col_f64(&p->j->g, p->Cg, xn, cols, l0, lt, ld);
  else im2col_f32(&p->j->g, p->Cg, xn, cols, l0, lt, ld);
}

/* rows (o0.., n rows of len) of y += b[o0 + r] */
static void add_bias(bool f64, void *y, int64_t ld, const void *b, int64_t o0, int64_t rows, int64_t len)
{
  for (int64_t o = 0; o < rows; o++) {
    if (f64) { double bv = ((const double *)b)[o0 + o], *r = (double *)y + o * ld; for (int64_t t = 0; t < len; t++) r[t] += bv; }
    else { float bv = ((const float *)b)[o0 + o], *r = (float *)y + o * ld; for (int64_t t = 0; t < len; t++) r[t] += bv; }
  }
}

/* dst (rows, len, row stride ldd) <- src (row stride lds) */
static void copy_rows(char *dst, int64_t ldd, const char *src, int64_t lds, int64_t rows, int64_t len, size_t es)
{
  for (int64_t r = 0; r < rows; r++) memcpy(dst + (size_t)(r * ldd) * es, src + (size_t)(r * lds) * es, (size_t)len * es);
}

/* -- Forward: items (n, group, tile), or (nb images, group) -------------------------------------- */

static void conv_fwd_range(void *ctx, int64_t b, int64_t e)
{
  const ConvPlan *p = ctx;
  const RtConvJob *j = p->j;
  const RtConvGeom *g = &j->g;
  bool f64 = j->dtype == TD_FLOAT64, one = conv_is_1x1(g);
  size_t es = f64 ? 8 : 4;
  int64_t cl = p->nb > 1 ? p->nb * p->L : p->lt;            /* columns of the buffers */
  char *cols = one ? NULL : malloc((size_t)((p->K + (p->nb > 1 ? p->Og : 0)) * cl) * es);
  char *tmp = cols ? cols + (size_t)(p->K * cl) * es : NULL;
  if (!one && !cols) { __atomic_store_n(&((ConvPlan *)p)->failed, 1, __ATOMIC_RELAXED); return; }
  for (int64_t u = b; u < e; u++) {
    int64_t n = u / (g->G * p->nt) * p->nb, gi = (u / p->nt) % g->G, l0 = (u % p->nt) * p->lt;
    int64_t lt = p->L - l0 < p->lt ? p->L - l0 : p->lt, m = g->N - n < p->nb ? g->N - n : p->nb;
    const char *wg = (const char *)j->w + (size_t)(gi * p->Og * p->K) * es;
    if (p->nb > 1) {               /* m images: (Og, m L) = W_g @ [cols_1 .. cols_m], then to y */
      for (int64_t i = 0; i < m; i++)
        im2col(p, (const char *)j->x + (size_t)(((n + i) * g->C + gi * p->Cg) * g->H * g->W) * es, cols + i * p->L * es,
               0, p->L, m * p->L);
      gemm(f64, false, false, p->Og, m * p->L, p->K, wg, p->K, cols, m * p->L, 0, tmp, m * p->L);
      for (int64_t i = 0; i < m; i++) {
        char *yt = (char *)j->y + (size_t)(((n + i) * g->O + gi * p->Og) * p->L) * es;
        copy_rows(yt, p->L, tmp + i * p->L * es, m * p->L, p->Og, p->L, es);
        if (j->b) add_bias(f64, yt, p->L, j->b, gi * p->Og, p->Og, p->L);
      }
      continue;
    }
    const char *xn = (const char *)j->x + (size_t)((n * g->C + gi * p->Cg) * g->H * g->W) * es;
    char *yt = (char *)j->y + (size_t)((n * g->O + gi * p->Og) * p->L + l0) * es;
    if (one) gemm(f64, false, false, p->Og, lt, p->K, wg, p->K, xn + l0 * es, p->L, 0, yt, p->L);
    else {
      im2col(p, xn, cols, l0, lt, lt);
      gemm(f64, false, false, p->Og, lt, p->K, wg, p->K, cols, lt, 0, yt, p->L);
    }
    if (j->b) add_bias(f64, yt, p->L, j->b, gi * p->Og, p->Og, lt);
  }
  free(cols);
}

/* -- Backward: items are blocks of images ------------------------------------------------------ */

static void conv_bwd_range(void *ctx, int64_t b, int64_t e)
{
  const ConvPlan *p = ctx;
  const RtConvJob *j = p->j;
  const RtConvGeom *g = &j->g;
  bool f64 = j->dtype == TD_FLOAT64, one = conv_is_1x1(g);
  size_t es = f64 ? 8 : 4;
  int64_t cl = p->nb > 1 ? p->nb * p->L : p->lt, rows = p->K > p->Og ? p->K : p->Og;
  char *cols = one ? NULL : malloc((size_t)((p->K + rows) * cl) * es), *dcols = cols ? cols + p->K * cl * es : NULL;
  if (!one && !cols) { __atomic_store_n(&((ConvPlan *)p)->failed, 1, __ATOMIC_RELAXED); return; }
  for (int64_t k = b; k < e; k++) {
    char *pw = j->dw ? p->part + k * p->part_stride : NULL;
    double *pb = j->db ? (double *)(p->part + k * p->part_stride + wpart_bytes(g->O * p->K, es)) : NULL;
    if (pb) memset(pb, 0, (size_t)g->O * sizeof(double));
    int64_t n0 = k * p->bsz, n1 = n0 + p->bsz < g->N ? n0 + p->bsz : g->N;
    if (p->nb > 1) {               /* dW from sub-batches of nb images side by side; then dX */
      for (int64_t s = n0; s < n1; s += p->nb) {
        int64_t m = n1 - s < p->nb ? n1 - s : p->nb, ml = m * p->L;
        for (int64_t gi = 0; gi < g->G; gi++) {
          for (int64_t i = 0; i < m; i++) {
            const char *dyi = (const char *)j->dy + (size_t)(((s + i) * g->O + gi * p->Og) * p->L) * es;
            if (pw) im2col(p, (const char *)j->x + (size_t)(((s + i) * g->C + gi * p->Cg) * g->H * g->W) * es,
                           cols + i * p->L * es, 0, p->L, ml);
            copy_rows(dcols + i * p->L * es, ml, dyi, p->L, p->Og, p->L, es);
          }
          if (pw) gemm(f64, false, true, p->Og, p->K, ml, dcols, ml, cols, ml, s == n0 ? 0 : 1,
                       pw + (size_t)(gi * p->Og * p->K) * es, p->K);
          if (pb)
            for (int64_t o = 0; o < p->Og; o++) {
              double sum = 0;
              if (f64) { const double *r = (const double *)dcols + o * ml; for (int64_t i = 0; i < ml; i++) sum += r[i]; }
              else { const float *r = (const float *)dcols + o * ml; for (int64_t i = 0; i < ml; i++) sum += r[i]; }
              pb[gi * p->Og + o] += sum;
            }
        }
      }
      if (!j->dx) continue;
      pw = NULL; pb = NULL;          /* dX (col2im) image by image below */
    }
    for (int64_t n = n0; n < n1; n++) {
      if (j->dx) memset((char *)j->dx + (size_t)(n * g->C * g->H * g->W) * es, 0, (size_t)(g->C * g->H * g->W) * es);
      for (int64_t gi = 0; gi < g->G; gi++)
        for (int64_t t = 0; t < p->nt; t++) {
          int64_t l0 = t * p->lt, lt = p->L - l0 < p->lt ? p->L - l0 : p->lt;
          size_t xo = (size_t)((n * g->C + gi * p->Cg) * g->H * g->W) * es;
          const char *xn = (const char *)j->x + xo, *wg = (const char *)j->w + (size_t)(gi * p->Og * p->K) * es;
          const char *dyt = (const char *)j->dy + (size_t)((n * g->O + gi * p->Og) * p->L + l0) * es;
          if (pw) {        /* dW_g (Og, K) += dY_t (Og, lt) @ cols^T (lt, K) */
            const char *cb = one ? xn + l0 * es : cols;
            if (!one) im2col(p, xn, cols, l0, lt, lt);
            gemm(f64, false, true, p->Og, p->K, lt, dyt, p->L, cb, one ? p->L : lt, n == n0 && t == 0 ? 0 : 1,
                 pw + (size_t)(gi * p->Og * p->K) * es, p->K);
          }
          if (j->dx) {     /* dcols (K, lt) = W_g^T (K, Og) @ dY_t (Og, lt), folded into dX */
            char *dxn = (char *)j->dx + xo;
            if (one) gemm(f64, true, false, p->K, lt, p->Og, wg, p->K, dyt, p->L, 0, dxn + l0 * es, p->L);
            else {
              gemm(f64, true, false, p->K, lt, p->Og, wg, p->K, dyt, p->L, 0, dcols, lt);
              if (f64) col2im_f64(g, p->Cg, (double *)dxn, (const double *)dcols, l0, lt);
              else col2im_f32(g, p->Cg, (float *)dxn, (const float *)dcols, l0, lt);
            }
          }
          if (pb)
            for (int64_t o = 0; o < p->Og; o++) {
              double s = 0;
              if (f64) { const double *r = (const double *)dyt + o * p->L; for (int64_t i = 0; i < lt; i++) s += r[i]; }
              else { const float *r = (const float *)dyt + o * p->L; for (int64_t i = 0; i < lt; i++) s += r[i]; }
              pb[gi * p->Og + o] += s;
            }
        }
    }
  }
  free(cols);
}

/* dW, db: the blocks' partials summed in block order */
static void conv_part_range(void *ctx, int64_t b, int64_t e)
{
  const ConvPlan *p = ctx;
  const RtConvJob *j = p->j;
  bool f64 = j->dtype == TD_FLOAT64;
  int64_t OK = j->g.O * p->K;
  size_t es = f64 ? 8 : 4;
  for (int64_t i = b; i < e; i++) {
    double acc = 0;
    if (i < OK) {
      if (!j->dw) continue;
      for (int64_t k = 0; k < p->nblk; k++) {
        const char *pw = p->part + k * p->part_stride;
        acc += f64 ? ((const double *)pw)[i] : ((const float *)pw)[i];
      }
      if (f64) ((double *)j->dw)[i] = acc; else ((float *)j->dw)[i] = (float)acc;
    } else {
      if (!j->db) continue;
      for (int64_t k = 0; k < p->nblk; k++)
        acc += ((const double *)(p->part + k * p->part_stride + wpart_bytes(OK, es)))[i - OK];
      if (f64) ((double *)j->db)[i - OK] = acc; else ((float *)j->db)[i - OK] = (float)acc;
    }
  }
}

static int conv_run(const RtConvJob *j);

/* dX of a stride-1 convolution is the convolution of dY with the kernel
** flipped and its in/out channels swapped, padded by d (k - 1) - p:
**   dX[c, i] = sum_{o, k} W[o, c, k] dY[o, i + p - d k]
** (per group; W'[g Cg + c, o, kh-1-ki, kw-1-kj] = W[g Og + o, c, ki, kj]):
** the forward's GEMMs with no col2im. Returns 1 when it does not apply. */
static int conv_dx_flipped(const RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  int64_t qh = g->dh * (g->kh - 1) - g->ph, qw = g->dw * (g->kw - 1) - g->pw;
  int64_t Og = g->O / g->G, Cg = g->C / g->G, kk = g->kh * g->kw;
  /* the flipped product has Cg rows: few make a poor GEMM (col2im's has Cg kh kw) */
  if (g->sh != 1 || g->sw != 1 || qh < 0 || qw < 0 || conv_is_1x1(g) || Cg < 32) return 1;
  size_t es = rt_dtype_size(j->dtype);
  char *wf = malloc((size_t)(g->C * Og * kk) * es);
  if (!wf) return rt_err(TD_ERR_NOMEM, "conv2d_backward: out of memory");
  for (int64_t gi = 0; gi < g->G; gi++)
    for (int64_t o = 0; o < Og; o++)
      for (int64_t c = 0; c < Cg; c++)
        for (int64_t q = 0; q < kk; q++)
          memcpy(wf + (size_t)(((gi * Cg + c) * Og + o) * kk + (kk - 1 - q)) * es,
                 (const char *)j->w + (size_t)(((gi * Og + o) * Cg + c) * kk + q) * es, es);
  RtConvJob f = { .kind = RT_CONV_FWD, .dtype = j->dtype, .x = j->dy, .w = wf, .y = j->dx };
  f.g = (RtConvGeom){ .N = g->N, .C = g->O, .H = g->OH, .W = g->OW, .O = g->C, .G = g->G, .kh = g->kh, .kw = g->kw,
                      .sh = 1, .sw = 1, .ph = qh, .pw = qw, .dh = g->dh, .dw = g->dw, .OH = g->H, .OW = g->W };
  int rc = conv_run(&f);
  free(wf);
  return rc;
}

int RT_ISA_FN(rt_conv_mk)(const RtConvJob *j);    /* rt_convmk.c: 1 when it does not apply */

static int conv_run(const RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  if (g->kd > 0) {                    /* 3-D: rt_convmk.c's tiles alone (dW and db, then dX) */
    RtConvJob wj = *j, xj = *j;
    int rc = 0;
    wj.dx = NULL; xj.dw = NULL; xj.db = NULL;
    if (j->kind == RT_CONV_FWD) rc = RT_ISA_FN(rt_conv_mk)(j);
    else {
      if (j->dw || j->db) rc = RT_ISA_FN(rt_conv_mk)(&wj);
      if (rc == 0 && j->dx) rc = RT_ISA_FN(rt_conv_mk)(&xj);
    }
    return rc == 1 ? rt_err(TD_ERR_ARG, "conv3d: the eager kernel takes float32 on x86-64-v4 with stride phases "
                            "(%lld x %lld x %lld) up to 64 and TIDE_CONV_BLAS unset (F.fused = false: the composite)",
                            (long long)g->sd, (long long)g->sh, (long long)g->sw) : rc;
  }
  if (j->kind == RT_CONV_BWD && j->dx && j->b) {  /* dX plus a bias (conv_transpose2d's forward): the tiles' */
    int rc = j->dw || j->db ? 1 : RT_ISA_FN(rt_conv_mk)(j);   /* epilogue, else dX and then the bias */
    if (rc != 1) return rc;
    RtConvJob nb = *j;
    nb.b = NULL;
    if ((rc = conv_run(&nb))) return rc;
    for (int64_t n = 0; n < g->N; n++)
      add_bias(j->dtype == TD_FLOAT64, (char *)j->dx + (size_t)(n * g->C * g->H * g->W) * rt_dtype_size(j->dtype),
               g->H * g->W, j->b, 0, g->C, g->H * g->W);
    return 0;
  }
  if (j->kind == RT_CONV_FWD) {
    int rc = RT_ISA_FN(rt_conv_mk)(j);
    if (rc != 1) return rc;
  } else if (j->dw || j->db) {        /* dW and db by the register tiles where they apply, then dX */
    RtConvJob wj = *j;
    wj.dx = NULL;
    int rc = RT_ISA_FN(rt_conv_mk)(&wj);
    if (rc != 1) {
      if (rc < 0 || !j->dx) return rc;
      RtConvJob xj = *j;
      xj.dw = NULL; xj.db = NULL;
      return conv_run(&xj);
    }
  } else {                            /* dX alone */
    int rc = RT_ISA_FN(rt_conv_mk)(j);
    if (rc != 1) return rc;
  }
  ConvPlan p = { .j = j, .Cg = g->C / g->G, .Og = g->O / g->G, .L = g->OH * g->OW };
  p.K = p.Cg * g->kh * g->kw;
  p.lt = conv_tile(p.K, p.L);
  p.nt = p.L > 0 ? (p.L + p.lt - 1) / p.lt : 0;
  /* small planes: several images' windows side by side in one GEMM */
  p.nb = 1;
  if (p.nt == 1 && !conv_is_1x1(g) && p.K * p.L > 0) {
    p.nb = TILE_ELEMS / (p.K * p.L);
    if (p.nb > (g->N + 3) / 4) p.nb = (g->N + 3) / 4;      /* 4 items at least, for the threads */
    if (p.nb < 1) p.nb = 1;
  }
  size_t es = rt_dtype_size(j->dtype);
  rt_blas_single();
  if (j->kind == RT_CONV_FWD) {
    int64_t items = (g->N + p.nb - 1) / p.nb * g->G * p.nt, flops = 2 * p.Og * p.K * p.lt * p.nb;
    rt_parallel_for(items, 1 + (1 << 21) / (flops > 0 ? flops : 1), conv_fwd_range, &p);
    return p.failed ? rt_err(TD_ERR_NOMEM, "conv2d: out of memory") : 0;
  }
  if (j->dx) {                        /* dX by the flipped convolution, where it applies */
    int rc = conv_dx_flipped(j);
    if (rc <= 0) {
      if (rc < 0 || !(j->dw || j->db)) return rc;
      RtConvJob rest = *j;
      rest.dx = NULL;
      return conv_run(&rest);
    }
  }
  bool part = j->dw || j->db;
  p.nblk = g->N;
  if (part) {
    int64_t per = g->O * p.K + g->O;
    p.nblk = PART_ELEMS / (per > 0 ? per : 1);
    if (p.nblk < 1) p.nblk = 1;
    if (p.nblk > g->N) p.nblk = g->N;
  }
  p.bsz = p.nblk > 0 ? (g->N + p.nblk - 1) / p.nblk : 1;
  if (p.bsz < p.nb) p.bsz = p.nb;
  p.nblk = g->N > 0 ? (g->N + p.bsz - 1) / p.bsz : 0;
  if (part) {
    p.part_stride = (wpart_bytes(g->O * p.K, es) + (size_t)g->O * sizeof(double) + 63) & ~(size_t)63;
    if (!(p.part = malloc(p.part_stride * (size_t)(p.nblk > 0 ? p.nblk : 1))))
      return rt_err(TD_ERR_NOMEM, "conv2d: out of memory");
  }
  if (p.nblk > 0) {
    int64_t flops = 2 * 3 * g->O * p.K * p.L * p.bsz;
    rt_parallel_for(p.nblk, 1 + (1 << 21) / (flops > 0 ? flops : 1), conv_bwd_range, &p);
  }
  if (part) {
    if (p.nblk == 0) {
      if (j->dw) memset(j->dw, 0, (size_t)(g->O * p.K) * es);
      if (j->db) memset(j->db, 0, (size_t)g->O * es);
    } else rt_parallel_for(g->O * p.K + g->O, 4096, conv_part_range, &p);
  }
  free(p.part);
  return p.failed ? rt_err(TD_ERR_NOMEM, "conv2d_backward: out of memory") : 0;
}

/* RT_CONVT_BWD where the tiles do not run it: x made contiguous when strided,
** then the forward (y) and the weight gradient (dw) as two jobs; sx in double */
static int convt_bwd(const RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  size_t es = rt_dtype_size(j->dtype);
  int64_t HW = g->H * g->W, st[4] = { g->C * HW, HW, g->W, 1 };
  bool f64 = j->dtype == TD_FLOAT64;
  if (j->xs) memcpy(st, j->xs, sizeof st);
  char *xc = NULL;
  const void *x = j->x;
  if (j->xs && (j->y || j->dw)) {
    if (!(xc = malloc((size_t)(g->N * g->C * HW) * es + 1))) return rt_err(TD_ERR_NOMEM, "conv_transpose2d_backward: out of memory");
    for (int64_t n = 0, i = 0; n < g->N; n++)
      for (int64_t c = 0; c < g->C; c++)
        for (int64_t h = 0; h < g->H; h++)
          for (int64_t w = 0; w < g->W; w++, i++)
            memcpy(xc + (size_t)i * es, (const char *)j->x + (ptrdiff_t)(n * st[0] + c * st[1] + h * st[2] + w * st[3]) * (ptrdiff_t)es, es);
    x = xc;
  }
  int rc = 0;
  if (j->y) {
    RtConvJob f = { .kind = RT_CONV_FWD, .dtype = j->dtype, .g = *g, .x = x, .w = j->w, .y = j->y };
    rc = conv_run(&f);
  }
  if (!rc && j->dw) {
    RtConvJob b = { .kind = RT_CONV_BWD, .dtype = j->dtype, .g = *g, .x = x, .w = j->w, .dy = j->dy, .dw = j->dw };
    rc = conv_run(&b);
  }
  if (!rc && j->sx)
    for (int64_t c = 0; c < g->C; c++) {
      double acc = 0;
      for (int64_t n = 0; n < g->N; n++)
        for (int64_t h = 0; h < g->H; h++)
          for (int64_t w = 0; w < g->W; w++) {
            ptrdiff_t o = n * st[0] + c * st[1] + h * st[2] + w * st[3];
            acc += f64 ? ((const double *)j->x)[o] : ((const float *)j->x)[o];
          }
      if (f64) ((double *)j->sx)[c] = acc; else ((float *)j->sx)[c] = (float)acc;
    }
  free(xc);
  return rc;
}

/* -- Pooling: one (n, c) plane per item ------------------------------------------------------- */

/* The output positions ow whose input column ow*sw + off lies in [0, W) */
static inline void pool_cols(int64_t OW, int64_t W, int64_t sw, int64_t off, int64_t *lo, int64_t *hi)
{
  int64_t a = off >= 0 ? 0 : (-off + sw - 1) / sw, b = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
  *lo = a < OW ? a : OW;
  *hi = b < OW ? b : OW;
  if (*hi < *lo) *hi = *lo;
}

/* A row of outputs at a time, window element by window element: the inner
** loops run over the row's positions (vectorizable for stride 1). Max keeps
** the first maximum (a NaN wins and stays), as the reduction over windows. */
#define POOL_MAXW 4096
#define DEF_POOL(sfx, T) \
  static void pool_plane_##sfx(const RtConvJob *j, int64_t pl) { \
    const int64_t H = j->g.H, W = j->g.W, OH = j->g.OH, OW = j->g.OW, kh = j->g.kh, kw = j->g.kw; \
    const int64_t sh = j->g.sh, sw = j->g.sw, ph = j->g.ph, pw = j->g.pw, dh = j->g.dh, dw = j->g.dw; \
    const int64_t L = OH * OW, kk = kh * kw; \
    const bool mx = j->kind == RT_POOL_MAX_FWD || j->kind == RT_POOL_MAX_BWD; \
    if (j->kind == RT_POOL_MAX_FWD || j->kind == RT_POOL_AVG_FWD) { \
      const T *restrict x = (const T *)j->x + pl * H * W; \
      for (int64_t c0 = 0; c0 < OW; c0 += POOL_MAXW) { \
        int64_t cn = OW - c0 < POOL_MAXW ? OW - c0 : POOL_MAXW; \
        for (int64_t oh = 0; oh < OH; oh++) { \
          T acc[POOL_MAXW]; int64_t bi[POOL_MAXW]; \
          for (int64_t t = 0; t < cn; t++) { acc[t] = mx ? -(T)INFINITY : (T)0; bi[t] = -1; } \
          for (int64_t ki = 0; ki < kh; ki++) { \
            int64_t ih = oh * sh - ph + ki * dh; \
            if (ih < 0 || ih >= H) continue; \
            const T *xr = x + ih * W; \
            for (int64_t kj = 0; kj < kw; kj++) { \
              int64_t off = kj * dw - pw, lo, hi, q = ki * kw + kj; \
              pool_cols(OW, W, sw, off, &lo, &hi); \
              if (lo < c0) lo = c0; \
              if (hi > c0 + cn) hi = c0 + cn; \
              if (!mx) for (int64_t ow = lo; ow < hi; ow++) acc[ow - c0] += xr[ow * sw + off]; \
              else for (int64_t ow = lo; ow < hi; ow++) { \
                T v = xr[ow * sw + off], b = acc[ow - c0]; \
                bool take = (v > b) | (bi[ow - c0] < 0) | ((v != v) & (b == b)); \
                acc[ow - c0] = take ? v : b; bi[ow - c0] = take ? q : bi[ow - c0]; } } } \
          T *yr = (T *)j->y + pl * L + oh * OW + c0; \
          if (mx) { int64_t *ir = j->idx + pl * L + oh * OW + c0; \
            for (int64_t t = 0; t < cn; t++) { yr[t] = acc[t]; ir[t] = bi[t] < 0 ? 0 : bi[t]; } } \
          else for (int64_t t = 0; t < cn; t++) yr[t] = acc[t] / (T)kk; } } \
    } else { \
      const T *restrict dy = (const T *)j->dy + pl * L; T *restrict dx = (T *)j->dx + pl * H * W; \
      const int64_t *restrict ix = mx ? j->idx + pl * L : NULL; \
      memset(dx, 0, (size_t)(H * W) * sizeof(T)); \
      for (int64_t oh = 0; oh < OH; oh++) { \
        if (mx) { \
          for (int64_t ow = 0; ow < OW; ow++) { \
            int64_t b = ix[oh * OW + ow], ki = b / kw, kj = b - ki * kw; \
            int64_t ih = oh * sh - ph + ki * dh, iw = ow * sw - pw + kj * dw; \
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) dx[ih * W + iw] += dy[oh * OW + ow]; } \
          continue; } \
        for (int64_t ki = 0; ki < kh; ki++) { \
          int64_t ih = oh * sh - ph + ki * dh; \
          if (ih < 0 || ih >= H) continue; \
          T *xr = dx + ih * W; \
          for (int64_t kj = 0; kj < kw; kj++) { \
            int64_t off = kj * dw - pw, lo, hi; \
            pool_cols(OW, W, sw, off, &lo, &hi); \
            for (int64_t ow = lo; ow < hi; ow++) xr[ow * sw + off] += dy[oh * OW + ow] / (T)kk; } } } } }
DEF_POOL(f32, float)
DEF_POOL(f64, double)

static void pool_range(void *ctx, int64_t b, int64_t e)
{
  const RtConvJob *j = ctx;
  for (int64_t pl = b; pl < e; pl++) {
    if (j->dtype == TD_FLOAT64) pool_plane_f64(j, pl); else pool_plane_f32(j, pl);
  }
}

int RT_ISA_FN(rt_conv_run)(RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  if (j->kind == RT_CONV_FWD || j->kind == RT_CONV_BWD || j->kind == RT_CONVT_BWD) {
    /* A dim with one output position reads one window whatever its stride, so
    ** its stride is taken as 1: rt_convmk.c splits the padded input into
    ** sd sh sw stride phases, 2^64 of them for a stride of 2^32 on each dim. */
    RtConvJob n = *j;
    if (n.g.OH == 1) n.g.sh = 1;
    if (n.g.OW == 1) n.g.sw = 1;
    if (n.g.kd > 0 && n.g.OD == 1) n.g.sd = 1;
    if (n.kind != RT_CONVT_BWD) return conv_run(&n);
    int rc = RT_ISA_FN(rt_conv_mk)(&n);
    return rc != 1 ? rc : convt_bwd(&n);
  }
  int64_t work = g->OH * g->OW * g->kh * g->kw + g->H * g->W;
  rt_parallel_for(g->N * g->C, 1 + 32768 / (work > 0 ? work : 1), pool_range, j);
  return 0;
}
