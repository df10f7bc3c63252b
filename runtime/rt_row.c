/*
** rt_row.c -- row-wise normalizers over one dim: softmax, log_softmax.
** Runtime stage: the shape/dtype rule (meta) and the eager CPU kernels behind
** the op table's RT_K_ROW rows. Numerically stable: each row subtracts its max.
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>
#include <string.h>

/* libm without errno side effects: GCC vectorizes the calls through libmvec */
#define ROW_SIMD __attribute__((simd("notinbranch"), const, nothrow, leaf))
ROW_SIMD float expf(float); ROW_SIMD double exp(double);

#define ROW_W      256        /* lanes (row case) */
#define ROW_CW     1024       /* columns per chunk (column case): rows are read in 4 KB pieces */
#define ROW_GRAIN  32768      /* elements per thread chunk, at least */

#define R_MAX(a, b) ((!((b) <= (a)) & ((a) == (a))) ? (b) : (a))   /* a NaN sticks */

/* -- Meta ------------------------------------------------------------------------------------- */

#if RT_ISA_SHARED
int rt_meta_row(RtCall *c)
{
  const td_tensor *x = c->in[0];
  const char *name = rt_op_lname(c->op);
  if (!rt_is_float(x->scalar_type))
    return rt_err(TD_ERR_DTYPE, "%s: expected a floating point tensor, got %s", name, td_dtype_name(x->scalar_type));
  int64_t d = c->attrs.i[0];
  if (rt_wrap_dim(name, &d, x->ndim)) return TD_ERR_INDEX;
  c->attrs.i[0] = d;               /* autograd's rule reads the normalized dim */
  c->ndim = x->ndim;
  memcpy(c->sizes, x->sizes, sizeof c->sizes);
  return 0;
}
#endif

/* -- Kernels ---------------------------------------------------------------------------------- */

/* The input viewed as (P, K, M), contiguous; the softmax runs along K.
** M == 1: one row of K per p, rows split over threads. M > 1: chunks of up to
** ROW_CW columns, every pass a unit-stride loop over the chunk. (A one-pass
** online max/sum for tall chunks measured no faster here: it needs two more
** exps per element, and the chunk's second and third passes mostly hit L2/L3.) */
typedef struct {
  const char *x; char *y;
  int64_t P, K, M, nch;
  bool lg;                        /* log_softmax */
  bool nt;                        /* y is streamed (rt_isa.h; row case, rows up to ROW_NT bytes) */
} RowJob;

/* Row case, y[0..K) = softmax(x[0..K)) or log_softmax, two passes over x:
**   m = max x;  e = exp(x - m), s = sum e (double lanes, same pass)
**   softmax: y = e / s (e kept in y, in cache);  log_softmax: y = x - (m + log s)
** A streamed result (rt_isa.h; rows up to ROW_NT bytes) keeps e in buf, a
** cached row, and streams the last pass's values to y. The row is in cache
** for the second and last passes, so the next row (nx; this one's for the
** last row) is prefetched a line at a time during the exp pass, where the
** arithmetic hides the misses. float: 16-lane blocks and the inline exp of
** rt_isa.h; a libmvec call per block kept the sum lanes in memory and ran
** 20% slower. double: libmvec through GCC's vectorizer. */
#define ROW_NT 16384
static void row_f32(const float *restrict x, float *restrict y, int64_t K, bool lg, const float *nx,
                    float *restrict buf)
{
  float *e_ = buf ? buf : y;
  int64_t nb = K / 16, t = K % 16, i;
  rt_vf16 mv = { 0 }, pad;
  mv -= INFINITY;
  for (i = 0; i < nb; i++) {
    rt_vf16 v = *(const rt_vf16u *)(x + 16 * i);
    rt_vi16 take = ~(v <= mv) & (mv == mv);                       /* R_MAX: a NaN sticks */
    mv = (rt_vf16)(((rt_vi16)v & take) | ((rt_vi16)mv & ~take));
  }
  float m = -INFINITY;
  for (int j = 0; j < 16; j++) m = R_MAX(m, mv[j]);
  for (i = 16 * nb; i < K; i++) m = R_MAX(m, x[i]);
  /* e summed in float over up to 8 blocks, then into the double lanes: one
  ** conversion per 8 blocks (the conversions were a fifth of the pass) */
  rt_vd8 s0 = { 0 }, s1 = { 0 };
  rt_vf16 acc = { 0 };
#define ROW_EXP_BLOCK(v, store) do { \
    rt_vf16 e_v = rt_vexpneg_f32((v) - m); store; acc += e_v; \
  } while (0)
  for (i = 0; i < nb; ) {
    int64_t g = nb - i < 8 ? nb - i : 8;
    for (int64_t q = 0; q < g; q++, i++) {
      __builtin_prefetch(nx + 16 * i);
      ROW_EXP_BLOCK(*(const rt_vf16u *)(x + 16 * i), if (!lg) *(rt_vf16u *)(e_ + 16 * i) = e_v);
    }
    rt_vf16_addd(&s0, &s1, acc);
    acc = (rt_vf16){ 0 };
  }
  if (t) {                                                        /* the tail, padded with -inf (exp 0) */
    for (int j = 0; j < 16; j++) pad[j] = j < t ? x[16 * nb + j] : -INFINITY;
    ROW_EXP_BLOCK(pad, if (!lg) for (int j = 0; j < t; j++) e_[16 * nb + j] = e_v[j]);
    rt_vf16_addd(&s0, &s1, acc);
  }
#undef ROW_EXP_BLOCK
  s0 += s1;
  double s = ((s0[0] + s0[4]) + (s0[1] + s0[5])) + ((s0[2] + s0[6]) + (s0[3] + s0[7]));
  if (!lg) { float inv = (float)(1.0 / s); RT_STORE_ROW(buf, y, K, e_[i] * inv); }
  else { float lse = (float)(m + log(s)); RT_STORE_ROW(buf, y, K, x[i] - lse); }
}

static void row_f64(const double *restrict x, double *restrict y, int64_t K, bool lg, const double *nx,
                    double *restrict buf)
{
  double l[ROW_W], s[ROW_W];
  double *e_ = buf ? buf : y;
  int64_t nl = K < 1 ? 1 : K < ROW_W ? K : ROW_W, i, j;
  for (j = 0; j < nl; j++) { l[j] = -INFINITY; s[j] = 0; }
  for (i = 0; i < K; i += ROW_W) {
    int64_t n = K - i < ROW_W ? K - i : ROW_W;
    for (j = 0; j < n; j++) l[j] = R_MAX(l[j], x[i + j]); }
  for (j = 1; j < nl; j++) l[0] = R_MAX(l[0], l[j]);
  double m = l[0];
  for (i = 0; i < K; i += ROW_W) {
    int64_t n = K - i < ROW_W ? K - i : ROW_W;
    RT_PREFETCH(nx + i, n * sizeof(double));
    for (j = 0; j < n; j++) { double e = exp(x[i + j] - m); e_[i + j] = e; s[j] += e; } }
  for (int64_t h; nl > 1; nl = h) { h = (nl + 1) / 2; for (j = 0; j < nl - h; j++) s[j] += s[j + h]; }
  if (!lg) { double inv = 1.0 / s[0]; RT_STORE_ROW(buf, y, K, e_[i] * inv); }
  else { double lse = m + log(s[0]); RT_STORE_ROW(buf, y, K, x[i] - lse); }
}

/* Column case, x and y (K, M) with row stride M, columns [0, mc):
** the same passes, each over a row of mc columns at a time. */
#define DEF_COL(sfx, T, EXP) \
  static void col_##sfx(const T *restrict x, T *restrict y, int64_t K, int64_t M, int64_t mc, bool lg) { \
    T m[ROW_CW]; double s[ROW_CW]; \
    for (int64_t j = 0; j < mc; j++) { m[j] = -INFINITY; s[j] = 0; } \
    for (int64_t k = 0; k < K; k++) { const T *xr = x + k * M; \
      for (int64_t j = 0; j < mc; j++) m[j] = R_MAX(m[j], xr[j]); } \
    for (int64_t k = 0; k < K; k++) { const T *xr = x + k * M; T *yr = y + k * M; \
      for (int64_t j = 0; j < mc; j++) { T e = EXP(xr[j] - m[j]); yr[j] = e; s[j] += e; } } \
    if (!lg) { \
      T inv[ROW_CW]; \
      for (int64_t j = 0; j < mc; j++) inv[j] = (T)(1.0 / s[j]); \
      for (int64_t k = 0; k < K; k++) { T *yr = y + k * M; for (int64_t j = 0; j < mc; j++) yr[j] *= inv[j]; } \
    } else { \
      T lse[ROW_CW]; \
      for (int64_t j = 0; j < mc; j++) lse[j] = (T)(m[j] + log(s[j])); \
      for (int64_t k = 0; k < K; k++) { const T *xr = x + k * M; T *yr = y + k * M; \
        for (int64_t j = 0; j < mc; j++) yr[j] = xr[j] - lse[j]; } } }

DEF_COL(f32, float, expf) DEF_COL(f64, double, exp)

#define ROW_RANGE(sfx, T) \
  static void row_range_##sfx(void *ctx, int64_t b, int64_t e) { \
    const RowJob *j = ctx; \
    int64_t rb = j->K * (int64_t)sizeof(T); \
    T buf[ROW_NT / sizeof(T)] __attribute__((aligned(64))); \
    bool nt = j->nt; \
    for (int64_t p = b; p < e; p++) { \
      int64_t nr = p + 1 < e && rb <= RT_PREFETCH_ROW_MAX ? j->K : 0; \
      const T *x = (const T *)j->x + p * j->K; T *y = (T *)j->y + p * j->K; \
      row_##sfx(x, y, j->K, j->lg, x + nr, nt ? buf : NULL); } \
    if (nt) rt_stream_end(); }
ROW_RANGE(f32, float) ROW_RANGE(f64, double)

/* unit u = (p, column chunk) */
#define COL_RANGE(sfx, T) \
  static void col_range_##sfx(void *ctx, int64_t b, int64_t e) { \
    const RowJob *j = ctx; \
    for (int64_t u = b; u < e; u++) { \
      int64_t p = u / j->nch, c0 = (u % j->nch) * ROW_CW, mc = j->M - c0 < ROW_CW ? j->M - c0 : ROW_CW; \
      int64_t off = p * j->K * j->M + c0; \
      col_##sfx((const T *)j->x + off, (T *)j->y + off, j->K, j->M, mc, j->lg); } }
COL_RANGE(f32, float) COL_RANGE(f64, double)

int RT_ISA_FN(rt_kern_row)(RtCall *c, td_tensor *out)
{
  int64_t d = c->attrs.i[0];
  td_tensor *x = rt_as_contig(c->in[0]);
  if (!x) return TD_ERR_NOMEM;
  RowJob j = { .x = rt_ptr(x), .y = rt_ptr(out), .P = 1, .K = 1, .M = 1, .lg = c->op == RT_OP_LOG_SOFTMAX };
  for (int i = 0; i < x->ndim; i++) {
    if (i < d) j.P *= x->sizes[i];
    else if (i == d) j.K = x->sizes[i];
    else j.M *= x->sizes[i];
  }
  bool f32 = x->scalar_type == TD_FLOAT32;
  if (out->nelem > 0) {
    if (j.M == 1) {
      int64_t g = j.K >= ROW_GRAIN ? 1 : ROW_GRAIN / j.K, rb = j.K * rt_dtype_size(x->scalar_type);
      j.nt = rb <= ROW_NT && rt_stream_rows(rt_cold(out), j.y, j.P * rb, rb);
      rt_parallel_for(j.P, g, f32 ? row_range_f32 : row_range_f64, &j);
    } else {
      j.nch = (j.M + ROW_CW - 1) / ROW_CW;
      int64_t work = j.K * (j.M < ROW_CW ? j.M : ROW_CW);
      rt_parallel_for(j.P * j.nch, work >= ROW_GRAIN ? 1 : ROW_GRAIN / work, f32 ? col_range_f32 : col_range_f64, &j);
    }
  }
  td_release(x);
  return 0;
}
