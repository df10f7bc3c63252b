/*
** rt_norm.c -- fused eager row kernels: layer_norm, rms_norm and
** cross_entropy forward and backward, and the backward of softmax and
** log_softmax. Runtime stage, no op-table rows: jit/jit_fused.c runs them
** for the Lua functions (and autograd's softmax rules) when nothing is traced.
** One pass per row over memory, the row's statistics in registers (the row
** itself stays in L1/L2 between its passes). Sums run in double over NL
** lanes and a fixed tree; a row is one thread's, and cross-row sums (the
** weight's gradient) go through per-block partials in a fixed order, so the
** results do not depend on the thread count.
*/
#include "rt.h"
#include "rt_isa.h"
#include <float.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>

/* libm without errno (Makefile flags): GCC vectorizes through libmvec */
#define SIMD __attribute__((simd("notinbranch"), const, nothrow, leaf))
SIMD float expf(float); SIMD double exp(double);

#define NL 32                    /* accumulator lanes */
#define NORM_RG 16               /* float rows: dw/db terms summed in float over this many rows */
#define NORM_GRAIN 32768         /* elements per thread chunk, at least */
#define CE_GRAIN 65536
#define R_MAX(a, b) ((!((b) <= (a)) & ((a) == (a))) ? (b) : (a))   /* a NaN sticks */

/* -- Lane sums: sum_i f(i) over a row, NL double lanes, a fixed tree ------------------------- */

static inline double lanes_tree(double *l)
{
  for (int h = NL / 2; h; h /= 2)
    for (int j = 0; j < h; j++) l[j] += l[j + h];
  return l[0];
}

/* The loop of the lane sums: BODY for i in [0, n), lane j_ = i % NL. PF runs
** once per NL elements with i_ the step's first index (a prefetch in step). */
#define LANE_LOOP(n, PF, BODY) do { int64_t i_ = 0; \
  for (; i_ + NL <= (n); i_ += NL) { PF; for (int j_ = 0; j_ < NL; j_++) { int64_t i = i_ + j_; BODY; } } \
  for (int j_ = 0; i_ + j_ < (n); j_++) { int64_t i = i_ + j_; BODY; } } while (0)
/* The next row's lines at the step's elements (RT_PREFETCH), one row ahead */
#define PF_STEP(p) RT_PREFETCH((p) + i_, NL * sizeof *(p))

#define LANE_SUM(n, EXPR) ({ double l_[NL] = { 0 }; LANE_LOOP(n, (void)0, l_[j_] += (EXPR)); lanes_tree(l_); })
#define LANE_SUM_PF(n, EXPR, PF) ({ double l_[NL] = { 0 }; LANE_LOOP(n, PF, l_[j_] += (EXPR)); lanes_tree(l_); })
/* two sums in one pass: A = sum EA, C = sum EC */
#define LANE_SUM2_PF(n, A, EA, C, EC, PF) do { double la_[NL] = { 0 }, lc_[NL] = { 0 }; \
  LANE_LOOP(n, PF, (la_[j_] += (EA), lc_[j_] += (EC))); (A) = lanes_tree(la_); (C) = lanes_tree(lc_); } while (0)

/* Float rows' forward sums: a = sum d, c = sum d^2, d = x - k, in float lanes
** added into double ones every 1024 elements (32 terms a lane): the double
** lanes spent most of the forward converting, and it is compute-bound as much
** as memory-bound here ((8192, 1024): 1.5 -> 1.35 ms). Exact enough unless k
** is far off the mean (then c/D and a^2 nearly cancel) or a square leaves
** float's range: the caller redoes such a row in double. */
static void norm_sums_f32(const float *x, int64_t D, float k, const float *nx, double *pa, double *pc)
{
  double da[NL] = { 0 }, dc[NL] = { 0 };
  for (int64_t c0 = 0; c0 < D; c0 += 1024) {
    int64_t n = D - c0 < 1024 ? D - c0 : 1024, i_ = 0;
    const float *xc = x + c0, *nxc = nx + c0;
    float fa[NL] = { 0 }, fc[NL] = { 0 };
    for (; i_ + NL <= n; i_ += NL) {
      RT_PREFETCH(nxc + i_, NL * sizeof(float));
      for (int j = 0; j < NL; j++) { float d = xc[i_ + j] - k; fa[j] += d; fc[j] += d * d; }
    }
    for (int j = 0; i_ + j < n; j++) { float d = xc[i_ + j] - k; fa[j] += d; fc[j] += d * d; }
    for (int j = 0; j < NL; j++) { da[j] += fa[j]; dc[j] += fc[j]; }
  }
  *pa = lanes_tree(da); *pc = lanes_tree(dc);
}

/* -- layer_norm and rms_norm ------------------------------------------------------------------
** x (R, D) contiguous. layer_norm: m = mean x, r = 1/sqrt(mean (x-m)^2 + eps),
** y = (x - m) r w + b; rms_norm: r = 1/sqrt(mean x^2 + eps), y = x r w.
** Saves m and r per row (the x dtype). Backward, gw = g w, xh = (x - m) r:
**   layer_norm: dx = r (gw - mean gw - xh mean(gw xh)),  dw = sum g xh, db = sum g
**   rms_norm:   dx = r (gw - x r^2 mean(gw x)),           dw = sum g x r */

#define DEF_NORM(sfx, T, A) \
  static void norm_fwd_##sfx(const RtNormJob *j, int64_t r0, int64_t r1) { \
    int64_t D = j->D; const T *w = j->w, *b = j->b; \
    bool nt = j->stream; \
    for (int64_t row = r0; row < r1; row++) { \
      const T *x = (const T *)j->x + row * D; T *y = (T *)j->y + row * D; \
      int64_t nr = row + 1 < r1 && D * (int64_t)sizeof(T) <= RT_PREFETCH_ROW_MAX ? D : 0; \
      const T *nx = x + nr;   /* the next row's, prefetched */ \
      double mean = 0, var; \
      if (sizeof(T) == sizeof(float)) { /* float lanes (norm_sums_f32) */ \
        double a, c; float k = j->rms || D == 0 ? 0.0f : (float)x[0]; \
        norm_sums_f32((const float *)x, D, k, (const float *)nx, &a, &c); \
        a /= (double)D; mean = j->rms ? 0 : k + a; var = c / (double)D - (j->rms ? 0 : a * a); \
        /* k far off the mean, a square past float's range, a NaN: the row again in double, below */ \
        if (!(c <= DBL_MAX) || (!j->rms && !(var >= 0.1 * c / (double)D))) var = -1; \
      } else var = -1; \
      if (!j->rms && var < 0) { /* one pass, shifted by the row's first value k: a = mean (x - k), \
                     ** var = mean (x - k)^2 - a^2, exact enough in double while |m - k| is \
                     ** not many thousand deviations (a second pass cost 20% here) */ \
        double k = D > 0 ? (double)x[0] : 0, a, c; \
        LANE_SUM2_PF(D, a, (double)x[i] - k, c, ((double)x[i] - k) * ((double)x[i] - k), PF_STEP(nx)); \
        a /= (double)D; mean = k + a; var = c / (double)D - a * a; \
        if (var < 0) var = 0; } \
      else if (var < 0) var = LANE_SUM_PF(D, (double)x[i] * (double)x[i], PF_STEP(nx)) / (double)D; \
      T m = (T)mean, r = (T)(1.0 / sqrt(var + j->eps)); \
      if (j->mean) ((T *)j->mean)[row] = m; \
      ((T *)j->rstd)[row] = r; \
      if (w && b) RT_STORE_ROW(nt, y, D, (x[i] - m) * r * w[i] + b[i]); \
      else if (w) RT_STORE_ROW(nt, y, D, (x[i] - m) * r * w[i]); \
      else if (b) RT_STORE_ROW(nt, y, D, (x[i] - m) * r + b[i]); \
      else RT_STORE_ROW(nt, y, D, (x[i] - m) * r); } \
    if (nt) rt_stream_end(); } \
  /* rows [r0, r1): dx; pw_, pb_ (D doubles each, or NULL) accumulate dw, db, \
  ** through pw, pb (A: float for float rows, flushed every NORM_RG rows; for \
  ** double rows the double partials themselves, pw_ pb_ NULL). Two passes a row: both row \
  ** sums in one, then dx and the dw/db partials in the other (the row stays in \
  ** L1 between them). Converting every row's terms to double was 45% of the \
  ** backward here. */ \
  static void norm_bwd_##sfx(const RtNormJob *j, int64_t r0, int64_t r1, double *pw_, double *pb_, A *restrict pw, A *restrict pb) { \
    int64_t D = j->D; const T *w = j->w; \
    for (int64_t row = r0; row < r1; row++) { \
      const T *x = (const T *)j->x + row * D, *g = (const T *)j->g + row * D; \
      T *dx = j->dx ? (T *)j->dx + row * D : NULL; \
      int64_t nr = row + 1 < r1 && D * (int64_t)sizeof(T) <= RT_PREFETCH_ROW_MAX ? D : 0; \
      const T *nx = x + nr, *ng = g + nr; T *ndx = dx ? dx + nr : dx;   /* the next row's, prefetched */ \
      T m = j->rms ? (T)0 : ((const T *)j->mean)[row], r = ((const T *)j->rstd)[row]; \
      T ta = 0, tc = 0; \
      if (dx) { \
        if (!j->rms) { \
          double a, c; \
          if (w) LANE_SUM2_PF(D, a, (double)(g[i] * w[i]), c, (double)(g[i] * w[i]) * (double)((x[i] - m) * r), PF_STEP(nx); PF_STEP(ng); PF_STEP(ndx)); \
          else LANE_SUM2_PF(D, a, (double)g[i], c, (double)g[i] * (double)((x[i] - m) * r), PF_STEP(nx); PF_STEP(ng); PF_STEP(ndx)); \
          ta = (T)(a / (double)D); tc = (T)(c / (double)D); \
        } else { \
          double c = (w ? LANE_SUM_PF(D, (double)(g[i] * w[i]) * (double)x[i], PF_STEP(nx); PF_STEP(ng); PF_STEP(ndx)) \
                        : LANE_SUM_PF(D, (double)g[i] * (double)x[i], PF_STEP(nx); PF_STEP(ng); PF_STEP(ndx))) / (double)D; \
          tc = (T)((double)r * (double)r * c); } } \
      /* dx: layer_norm r (g w - a - xh c), rms_norm r (g w - x c'); xh = (x - m) r */ \
      if (dx && pw && pb) \
        for (int64_t i = 0; i < D; i++) { T gw = w ? g[i] * w[i] : g[i], xh = (x[i] - m) * r; \
          dx[i] = j->rms ? r * (gw - x[i] * tc) : r * (gw - ta - xh * tc); \
          pw[i] += (A)(g[i] * xh); pb[i] += (A)g[i]; } \
      else { \
        if (dx) for (int64_t i = 0; i < D; i++) { T gw = w ? g[i] * w[i] : g[i]; \
          dx[i] = j->rms ? r * (gw - x[i] * tc) : r * (gw - ta - (x[i] - m) * r * tc); } \
        if (pw) for (int64_t i = 0; i < D; i++) pw[i] += (A)(g[i] * ((x[i] - m) * r)); \
        if (pb) for (int64_t i = 0; i < D; i++) pb[i] += (A)g[i]; } \
      if (sizeof(A) < sizeof(double) && ((row - r0) % NORM_RG == NORM_RG - 1 || row == r1 - 1)) { \
        if (pw) for (int64_t i = 0; i < D; i++) { pw_[i] += pw[i]; pw[i] = 0; } \
        if (pb) for (int64_t i = 0; i < D; i++) { pb_[i] += pb[i]; pb[i] = 0; } } } }
DEF_NORM(f32, float, float)
DEF_NORM(f64, double, double)

static void norm_fwd_range(void *ctx, int64_t b, int64_t e)
{
  const RtNormJob *j = ctx;
  if (j->dtype == TD_FLOAT64) norm_fwd_f64(j, b, e); else norm_fwd_f32(j, b, e);
}

/* Backward units are row blocks (their count depends on R and D only); each
** block sums its rows' dw/db contributions into its own partials. */
typedef struct { const RtNormJob *j; int64_t nb, rb; double *part; float *fpart; } NormBwd;

static void norm_bwd_range(void *ctx, int64_t b, int64_t e)
{
  const NormBwd *nb = ctx;
  const RtNormJob *j = nb->j;
  int64_t D = j->D;
  for (int64_t k = b; k < e; k++) {
    int64_t r0 = k * nb->rb, r1 = r0 + nb->rb < j->R ? r0 + nb->rb : j->R;
    double *pw = j->dw ? nb->part + k * 2 * D : NULL, *pb = j->db ? nb->part + k * 2 * D + D : NULL;
    float *fw = j->dw ? nb->fpart + k * 2 * D : NULL, *fb = j->db ? nb->fpart + k * 2 * D + D : NULL;
    if (pw) memset(pw, 0, D * sizeof *pw);
    if (pb) memset(pb, 0, D * sizeof *pb);
    if (j->dtype == TD_FLOAT64) norm_bwd_f64(j, r0, r1, NULL, NULL, pw, pb);   /* no float stage */
    else {
      if (fw) memset(fw, 0, D * sizeof *fw);
      if (fb) memset(fb, 0, D * sizeof *fb);
      norm_bwd_f32(j, r0, r1, pw, pb, fw, fb);
    }
  }
}

/* dw[i], db[i] = the blocks' partials summed in block order */
static void norm_part_range(void *ctx, int64_t b, int64_t e)
{
  const NormBwd *nb = ctx;
  const RtNormJob *j = nb->j;
  int64_t D = j->D;
  for (int64_t i = b; i < e; i++)
    for (int s = 0; s < 2; s++) {
      void *dst = s ? j->db : j->dw;
      if (!dst) continue;
      double acc = 0;
      for (int64_t k = 0; k < nb->nb; k++) acc += nb->part[k * 2 * D + s * D + i];
      if (j->dtype == TD_FLOAT64) ((double *)dst)[i] = acc; else ((float *)dst)[i] = (float)acc;
    }
}

static int norm_bwd(const RtNormJob *j)
{
  NormBwd nb = { .j = j };
  /* at most 64 blocks and ~16 MB of partials */
  nb.nb = ((int64_t)1 << 20) / (j->D > 0 ? j->D : 1);
  if (nb.nb > 64) nb.nb = 64;
  if (nb.nb < 1) nb.nb = 1;
  if (nb.nb > j->R) nb.nb = j->R > 0 ? j->R : 1;
  nb.rb = (j->R + nb.nb - 1) / nb.nb;
  nb.nb = j->R > 0 ? (j->R + nb.rb - 1) / nb.rb : 0;
  if (j->dw || j->db) {
    size_t n = (size_t)(nb.nb > 0 ? nb.nb : 1) * 2 * (size_t)j->D;   /* the blocks' double partials, then float ones */
    nb.part = malloc(n * (sizeof(double) + (j->dtype == TD_FLOAT64 ? 0 : sizeof(float))));
    if (!nb.part) return rt_err(TD_ERR_NOMEM, "%s: out of memory", j->rms ? "rms_norm" : "layer_norm");
    nb.fpart = (float *)(nb.part + n);
  }
  rt_parallel_for(nb.nb, 1 + NORM_GRAIN / (nb.rb * j->D > 0 ? nb.rb * j->D : 1), norm_bwd_range, &nb);
  if (nb.part) {
    if (nb.nb == 0) {
      size_t es = rt_dtype_size(j->dtype);
      if (j->dw) memset(j->dw, 0, (size_t)j->D * es);
      if (j->db) memset(j->db, 0, (size_t)j->D * es);
    } else rt_parallel_for(j->D, 4096, norm_part_range, &nb);
  }
  free(nb.part);
  return 0;
}

/* -- batch_norm (training) ---------------------------------------------------------------------
** x (N, C, S) contiguous, statistics per channel c over its N x S values:
** m = mean, r = 1/sqrt(biased var + eps), y = (x - m) r w + b; saves m and r
** (C each). Backward, xh = (x - m) r, M = N S: dw = sum g xh, db = sum g,
** dx = r w (g - db / M - xh dw / M). A channel is one thread's. */

#define DEF_BN(sfx, T) \
  static void bn_fwd_##sfx(const RtNormJob *j, int64_t c) { \
    int64_t N = j->R, C = j->D, S = j->M; double M = (double)(N * S); \
    double mean = 0, var = 0; \
    for (int64_t n = 0; n < N; n++) { const T *x = (const T *)j->x + (n * C + c) * S; mean += LANE_SUM(S, (double)x[i]); } \
    mean /= M; \
    for (int64_t n = 0; n < N; n++) { const T *x = (const T *)j->x + (n * C + c) * S; \
      var += LANE_SUM(S, ((double)x[i] - mean) * ((double)x[i] - mean)); } \
    var /= M; \
    T m = (T)mean, r = (T)(1.0 / sqrt(var + j->eps)); \
    T w = j->w ? ((const T *)j->w)[c] : (T)1, b = j->b ? ((const T *)j->b)[c] : (T)0; \
    ((T *)j->mean)[c] = m; ((T *)j->rstd)[c] = r; \
    if (j->var) ((T *)j->var)[c] = (T)var; \
    for (int64_t n = 0; n < N; n++) { const T *x = (const T *)j->x + (n * C + c) * S; T *y = (T *)j->y + (n * C + c) * S; \
      if (j->w || j->b) for (int64_t i = 0; i < S; i++) y[i] = (x[i] - m) * r * w + b; \
      else for (int64_t i = 0; i < S; i++) y[i] = (x[i] - m) * r; } } \
  static void bn_bwd_##sfx(const RtNormJob *j, int64_t c) { \
    int64_t N = j->R, C = j->D, S = j->M; double M = (double)(N * S); \
    T m = ((const T *)j->mean)[c], r = ((const T *)j->rstd)[c], w = j->w ? ((const T *)j->w)[c] : (T)1; \
    double sg = 0, sgx = 0; \
    for (int64_t n = 0; n < N; n++) { \
      const T *x = (const T *)j->x + (n * C + c) * S, *g = (const T *)j->g + (n * C + c) * S; \
      sg += LANE_SUM(S, (double)g[i]); sgx += LANE_SUM(S, (double)g[i] * (double)((x[i] - m) * r)); } \
    if (j->dw) ((T *)j->dw)[c] = (T)sgx; \
    if (j->db) ((T *)j->db)[c] = (T)sg; \
    if (!j->dx) return; \
    T a = (T)(sg / M), k = (T)(sgx / M), rw = r * w; \
    for (int64_t n = 0; n < N; n++) { \
      const T *x = (const T *)j->x + (n * C + c) * S, *g = (const T *)j->g + (n * C + c) * S; \
      T *dx = (T *)j->dx + (n * C + c) * S; \
      for (int64_t i = 0; i < S; i++) dx[i] = rw * (g[i] - a - (x[i] - m) * r * k); } }
DEF_BN(f32, float)
DEF_BN(f64, double)

static void bn_range(void *ctx, int64_t b, int64_t e)
{
  const RtNormJob *j = ctx;
  bool f64 = j->dtype == TD_FLOAT64, fwd = j->kind == RT_NORM_BN_FWD;
  for (int64_t c = b; c < e; c++) {
    if (f64) { if (fwd) bn_fwd_f64(j, c); else bn_bwd_f64(j, c); }
    else if (fwd) bn_fwd_f32(j, c); else bn_bwd_f32(j, c);
  }
}

/* -- softmax and log_softmax backward ---------------------------------------------------------
** y (P, K, M) the forward's output, along K. softmax: dx = y (g - sum g y);
** log_softmax: dx = g - exp(y) sum g. M == 1: a row per unit; else chunks of
** up to SM_CW columns, each sum over K in double per column. */
#define SM_CW 256

#define DEF_SMB(sfx, T, EXP) \
  /* ng, ny, ndx: the next row's, prefetched during the sum's pass */ \
  static void smb_row_##sfx(const T *restrict g, const T *restrict y, T *restrict dx, int64_t K, bool lg, \
                            const T *ng, const T *ny, T *ndx) { \
    if (!lg) { T s = (T)LANE_SUM_PF(K, (double)(g[i] * y[i]), PF_STEP(ng); PF_STEP(ny); PF_STEP(ndx)); \
      for (int64_t i = 0; i < K; i++) dx[i] = y[i] * (g[i] - s); } \
    else { T s = (T)LANE_SUM_PF(K, (double)g[i], PF_STEP(ng); PF_STEP(ny); PF_STEP(ndx)); \
      for (int64_t i = 0; i < K; i++) dx[i] = g[i] - EXP(y[i]) * s; } } \
  static void smb_col_##sfx(const T *g, const T *y, T *dx, int64_t K, int64_t M, int64_t mc, bool lg) { \
    double s[SM_CW]; T ts[SM_CW]; \
    for (int64_t c = 0; c < mc; c++) s[c] = 0; \
    for (int64_t k = 0; k < K; k++) { const T *gr = g + k * M, *yr = y + k * M; \
      if (!lg) for (int64_t c = 0; c < mc; c++) s[c] += (double)(gr[c] * yr[c]); \
      else for (int64_t c = 0; c < mc; c++) s[c] += (double)gr[c]; } \
    for (int64_t c = 0; c < mc; c++) ts[c] = (T)s[c]; \
    for (int64_t k = 0; k < K; k++) { const T *gr = g + k * M, *yr = y + k * M; T *dr = dx + k * M; \
      if (!lg) for (int64_t c = 0; c < mc; c++) dr[c] = yr[c] * (gr[c] - ts[c]); \
      else for (int64_t c = 0; c < mc; c++) dr[c] = gr[c] - EXP(yr[c]) * ts[c]; } }
DEF_SMB(f32, float, expf)
DEF_SMB(f64, double, exp)

static void smb_range(void *ctx, int64_t b, int64_t e)
{
  const RtNormJob *j = ctx;
  bool f64 = j->dtype == TD_FLOAT64, lg = j->kind == RT_NORM_LSM_BWD;
  int64_t K = j->D, M = j->M, es = f64 ? 8 : 4;
  for (int64_t u = b; u < e; u++) {
    int64_t off, mc = 1;
    if (M == 1) off = u * K;
    else { int64_t nch = (M + SM_CW - 1) / SM_CW, p = u / nch, c0 = (u % nch) * SM_CW;
           mc = M - c0 < SM_CW ? M - c0 : SM_CW; off = p * K * M + c0; }
    const char *g = (const char *)j->g + off * es, *y = (const char *)j->y + off * es;
    char *dx = (char *)j->dx + off * es;
    if (M == 1) {
      int64_t nr = u + 1 < e && K * es <= RT_PREFETCH_ROW_MAX ? K * es : 0;   /* to the next row (prefetched) */
      if (f64) smb_row_f64((const double *)g, (const double *)y, (double *)dx, K, lg,
                           (const double *)(g + nr), (const double *)(y + nr), (double *)(dx + nr));
      else smb_row_f32((const float *)g, (const float *)y, (float *)dx, K, lg,
                       (const float *)(g + nr), (const float *)(y + nr), (float *)(dx + nr));
    }
    else if (f64) smb_col_f64((const double *)g, (const double *)y, (double *)dx, K, M, mc, lg);
    else smb_col_f32((const float *)g, (const float *)y, (float *)dx, K, M, mc, lg);
  }
}

/* -- cross_entropy over logits x (N, C) and class indices t (N, 0-based) ----------------------
** Row i, t valid (!= ignore): lse = log sum_c exp x_c, wt = w[t] (1 without
** weights), W = sum_c w_c (C), ls = label smoothing:
**   loss_i = (1 - ls) wt (lse - x_t) + ls/C (W lse - sum_c w_c x_c)
** and 0 for an ignored row. Backward, p_c = exp(x_c - lse), coef_i the
** incoming gradient of row i (divided by sum_i wt for 'mean'):
**   dx_ic = coef_i ((1 - ls) wt (p_c - [c = t]) + ls/C (W p_c - w_c)) */

#define DEF_CE(sfx, T, EXP) \
  static void ce_fwd_##sfx(const RtNormJob *j, int64_t r0, int64_t r1) { \
    int64_t C = j->D; const T *w = j->w; \
    for (int64_t row = r0; row < r1; row++) { \
      const T *x = (const T *)j->x + row * C; int64_t t = j->target[row]; \
      T l[NL]; int64_t i0 = 0; \
      for (int q = 0; q < NL; q++) l[q] = -(T)INFINITY; \
      for (; i0 + NL <= C; i0 += NL) for (int q = 0; q < NL; q++) l[q] = R_MAX(l[q], x[i0 + q]); \
      for (int q = 0; i0 + q < C; q++) l[q] = R_MAX(l[q], x[i0 + q]); \
      for (int h = NL / 2; h; h /= 2) for (int q = 0; q < h; q++) l[q] = R_MAX(l[q], l[q + h]); \
      T m = l[0]; \
      double s = LANE_SUM(C, (double)EXP(x[i] - m)); \
      double lse = (double)m + log(s); \
      ((T *)j->lse)[row] = (T)lse; \
      if (t == j->ignore) { j->rowloss[row] = 0; j->rowweight[row] = 0; continue; } \
      double wt = w ? (double)w[t] : 1.0, loss = (1 - j->ls) * wt * (lse - (double)x[t]); \
      if (j->ls > 0) { \
        double sx = w ? LANE_SUM(C, (double)w[i] * (double)x[i]) : LANE_SUM(C, (double)x[i]); \
        loss += j->ls / (double)C * (j->wsum * lse - sx); } \
      j->rowloss[row] = loss; j->rowweight[row] = wt; } } \
  static void ce_bwd_##sfx(const RtNormJob *j, int64_t r0, int64_t r1) { \
    int64_t C = j->D; const T *w = j->w; \
    for (int64_t row = r0; row < r1; row++) { \
      const T *x = (const T *)j->x + row * C; T *dx = (T *)j->dx + row * C; int64_t t = j->target[row]; \
      if (t == j->ignore) { memset(dx, 0, (size_t)C * sizeof(T)); continue; } \
      double go = j->go_rows ? (double)((const T *)j->g)[row * j->go_stride] : j->go; \
      double wt = w ? (double)w[t] : 1.0, coef = go * j->go_scale; \
      T A = (T)(coef * ((1 - j->ls) * wt + j->ls / (double)C * j->wsum)), lse = ((const T *)j->lse)[row]; \
      T Bw = (T)(coef * j->ls / (double)C); \
      if (w && j->ls > 0) for (int64_t i = 0; i < C; i++) dx[i] = A * EXP(x[i] - lse) - Bw * w[i]; \
      else if (j->ls > 0) for (int64_t i = 0; i < C; i++) dx[i] = A * EXP(x[i] - lse) - Bw; \
      else for (int64_t i = 0; i < C; i++) dx[i] = A * EXP(x[i] - lse); \
      dx[t] -= (T)(coef * (1 - j->ls) * wt); } }
DEF_CE(f32, float, expf)
DEF_CE(f64, double, exp)

static void ce_range(void *ctx, int64_t b, int64_t e)
{
  const RtNormJob *j = ctx;
  bool f64 = j->dtype == TD_FLOAT64;
  if (j->kind == RT_NORM_CE_FWD) { if (f64) ce_fwd_f64(j, b, e); else ce_fwd_f32(j, b, e); }
  else if (f64) ce_bwd_f64(j, b, e); else ce_bwd_f32(j, b, e);
}

/* -- The entry --------------------------------------------------------------------------------- */

int RT_ISA_FN(rt_norm_run)(RtNormJob *j)
{
  int64_t R = j->R, D = j->D > 0 ? j->D : 1;
  switch (j->kind) {
  case RT_NORM_FWD: {
    int64_t es = j->dtype == TD_FLOAT64 ? 8 : 4;
    j->stream = rt_stream_rows(j->y_cold, j->y, R * D * es, D * es);
    rt_parallel_for(R, 1 + NORM_GRAIN / D, norm_fwd_range, j);
    return 0;
  }
  case RT_NORM_BWD:
    return norm_bwd(j);
  case RT_NORM_SM_BWD: case RT_NORM_LSM_BWD: {
    int64_t units = j->M == 1 ? R : R * ((j->M + SM_CW - 1) / SM_CW);
    int64_t work = D * (j->M == 1 ? 1 : j->M < SM_CW ? j->M : SM_CW);
    rt_parallel_for(units, 1 + NORM_GRAIN / work, smb_range, j);
    return 0;
  }
  case RT_NORM_BN_FWD: case RT_NORM_BN_BWD: {
    int64_t per = j->R * j->M;
    rt_parallel_for(j->D, 1 + NORM_GRAIN / (per > 0 ? per : 1), bn_range, j);
    return 0;
  }
  case RT_NORM_CE_FWD: case RT_NORM_CE_BWD:
    rt_parallel_for(R, 1 + CE_GRAIN / D, ce_range, j);
    return 0;
  }
  return rt_err(TD_ERR_ARG, "norm: unknown kernel %d", j->kind);
}
