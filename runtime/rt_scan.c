/*
** rt_scan.c -- scans along one dim (attrs.i[0]): cumsum cumprod cummax cummin
** (and their index ops cumargmax/cumargmin) logcumsumexp; attrs.flags & 1
** scans from the end (the derivative rules' reverse scans). Eager CPU kernels;
** tide.compile runs them as eager steps of its plan (the kernel IR has no
** loop-carried accumulator along a dim other than a reduction's).
**
** Thread-count independence: a line of n <= SCAN_BLK elements is scanned in
** order by one thread; a longer line is cut into blocks of SCAN_BLK (a constant,
** never the thread count): each block's total, then the totals combined left to
** right into each block's carry-in, then each block scanned from its carry-in.
** Which path runs depends only on the shape. Float32 accumulates in double.
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>
#include <string.h>
#include <float.h>
#include <stdlib.h>
#if !RT_ISA_SHARED
#include <immintrin.h>
#endif

#define SCAN_BLK 32768

#if RT_ISA_SHARED
/* -- Meta ------------------------------------------------------------------------------------ */

int rt_meta_scan(RtCall *c)
{
  const char *name = rt_op_lname(c->op);
  td_tensor *x = c->in[0];
  if (rt_wrap_dim(name, &c->attrs.i[0], x->ndim)) return TD_ERR_INDEX;
  int op = c->op;
  if ((op == RT_OP_CUMSUM || op == RT_OP_CUMPROD) && !rt_is_float(c->cdtype))
    c->scalar_type = TD_INT64;          /* integers and bool accumulate in int64, as PyTorch */
  c->ndim = x->ndim;
  memcpy(c->sizes, x->sizes, sizeof c->sizes);
  return 0;
}

/* -- Steps ----------------------------------------------------------------------------------
** acc (A) <- acc (+) v. max/min keep the later index on ties (>=, <=) and stay at
** the first NaN, as PyTorch's cummax/cummin. */
static inline double lse2(double a, double b)
{
  double lo = a < b ? a : b, hi = a < b ? b : a;
  if (a != a || b != b) return a + b;
  if (lo != hi || isfinite(lo)) return hi + log1p(exp(lo - hi));
  return a;                            /* equal infinities */
}
#define ST_SUM(acc, ai, v, vi) (acc += (v))
#define ST_PROD(acc, ai, v, vi) (acc *= (v))
#define ST_MAX(acc, ai, v, vi) do { if (!((acc) != (acc)) && ((v) != (v) || (v) >= (acc))) { acc = (v); ai = (vi); } } while (0)
#define ST_MIN(acc, ai, v, vi) do { if (!((acc) != (acc)) && ((v) != (v) || (v) <= (acc))) { acc = (v); ai = (vi); } } while (0)
#define ST_LSE(acc, ai, v, vi) (acc = lse2(acc, (v)))

enum { SK_SUM, SK_PROD, SK_MAX, SK_MIN, SK_LSE };

typedef struct { double d; int64_t i; int64_t ix; } Acc;   /* value (float or int), index */

/* One line: x[k*s], k = 0..n-1 (in scan order: the caller passes a negative
** stride to scan from the end), from carry `a`; stores when y (and iy) given.
** Indices are positions along the dim, base + k (or base - k backwards). */
#define SCAN_LINE(FN, T, A, FIELD, STEP) \
  static void FN(const T *x, T *y, int64_t *iy, int64_t n, int64_t s, Acc *a, int64_t base, int64_t dir) { \
    A acc = (A)a->FIELD; int64_t ai = a->ix; \
    if (y) { \
      for (int64_t k = 0; k < n; k++) { STEP(acc, ai, (A)x[k * s], base + dir * k); y[k * s] = (T)acc; if (iy) iy[k * s] = ai; } \
    } else { \
      for (int64_t k = 0; k < n; k++) STEP(acc, ai, (A)x[k * s], base + dir * k); \
    } \
    a->FIELD = acc; a->ix = ai; }

#define SCAN_TYPES(M, OPN, STEP) \
  M(scan_##OPN##_f32, float, double, d, STEP) M(scan_##OPN##_f64, double, double, d, STEP) \
  M(scan_##OPN##_i64, int64_t, int64_t, i, STEP)
SCAN_TYPES(SCAN_LINE, sum, ST_SUM)
SCAN_TYPES(SCAN_LINE, prod, ST_PROD)
SCAN_TYPES(SCAN_LINE, max, ST_MAX)
SCAN_TYPES(SCAN_LINE, min, ST_MIN)
SCAN_LINE(scan_lse_f32, float, double, d, ST_LSE)
SCAN_LINE(scan_lse_f64, double, double, d, ST_LSE)

typedef void (*ScanFn)(const void *x, void *y, int64_t *iy, int64_t n, int64_t s, Acc *a, int64_t base, int64_t dir);

static ScanFn scan_fn(int kind, int dt)
{
  int t = dt == TD_FLOAT32 ? 0 : dt == TD_FLOAT64 ? 1 : 2;
#define ROW(OPN) { (ScanFn)scan_##OPN##_f32, (ScanFn)scan_##OPN##_f64, (ScanFn)scan_##OPN##_i64 }
  static const ScanFn tab[5][3] = { ROW(sum), ROW(prod), ROW(max), ROW(min),
                                    { (ScanFn)scan_lse_f32, (ScanFn)scan_lse_f64, NULL } };
#undef ROW
  return tab[kind][t];
}

/* the carry-in of a block: the previous carry combined with a block total */
static void acc_combine(int kind, int isf, Acc *a, const Acc *t)
{
  switch (kind) {
  case SK_SUM: if (isf) a->d += t->d; else a->i += t->i; break;
  case SK_PROD: if (isf) a->d *= t->d; else a->i *= t->i; break;
  case SK_MAX: if (isf) ST_MAX(a->d, a->ix, t->d, t->ix); else ST_MAX(a->i, a->ix, t->i, t->ix); break;
  case SK_MIN: if (isf) ST_MIN(a->d, a->ix, t->d, t->ix); else ST_MIN(a->i, a->ix, t->i, t->ix); break;
  case SK_LSE: a->d = lse2(a->d, t->d); break;
  }
}

static Acc acc_init(int kind)
{
  Acc a = { 0, 0, -1 };
  switch (kind) {
  case SK_PROD: a.d = 1; a.i = 1; break;
  case SK_MAX: a.d = -INFINITY; a.i = INT64_MIN; break;
  case SK_MIN: a.d = INFINITY; a.i = INT64_MAX; break;
  case SK_LSE: a.d = -INFINITY; break;
  }
  return a;
}

#endif

/* -- Float cumsum of unit-stride lines --------------------------------------------------------
** The common case gets two things the generic line cannot: block totals summed
** in 8 partial sums (vectorizable; a fixed order, so still the same for any
** thread count), and 4 segments (rows, or blocks of one row) scanned together,
** 4 independent chains of double adds instead of one (the add's latency bounds
** a single chain). Each value is still its segment's carry plus its elements
** added in order, however the segments are grouped.
** On x86-64-v3/v4 (this file's variants, rt_isa.h) 8 segments of a group run
** as one: 8x8 blocks transposed in registers, so that one vector holds an
** element of each segment, added in double (the same adds, in the same order,
** as the scalar chains: the same bits), transposed back. */
#define SUM_TOTAL(FN, T) \
  static double FN(const T *x, int64_t m) { \
    double a[8] = { 0 }; int64_t k = 0; \
    for (; k + 8 <= m; k += 8) for (int q = 0; q < 8; q++) a[q] += (double)x[k + q]; \
    double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); \
    for (; k < m; k++) s += (double)x[k]; \
    return s; }
#define SUM_SEG4(FN, T) \
  static void FN(const T *const *x, T *const *y, const int64_t *m, double *c, int nseg) { \
    int64_t lo = 0; \
    if (nseg == 4) { \
      lo = m[0]; for (int q = 1; q < 4; q++) if (m[q] < lo) lo = m[q]; \
      const T *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3]; T *y0 = y[0], *y1 = y[1], *y2 = y[2], *y3 = y[3]; \
      double c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3]; \
      for (int64_t k = 0; k < lo; k++) { \
        c0 += (double)x0[k]; c1 += (double)x1[k]; c2 += (double)x2[k]; c3 += (double)x3[k]; \
        y0[k] = (T)c0; y1[k] = (T)c1; y2[k] = (T)c2; y3[k] = (T)c3; } \
      c[0] = c0; c[1] = c1; c[2] = c2; c[3] = c3; } \
    for (int q = 0; q < nseg; q++) { double a = c[q]; \
      for (int64_t k = lo; k < m[q]; k++) { a += (double)x[q][k]; y[q][k] = (T)a; } c[q] = a; } }
SUM_TOTAL(sum_total_f32, float) SUM_TOTAL(sum_total_f64, double)
SUM_SEG4(sum_seg4_f32, float) SUM_SEG4(sum_seg4_f64, double)

#if !RT_ISA_SHARED
/* r[0..8) rows of 8 floats -> r[j] = (r[0][j], ..., r[7][j]) */
static inline void tr8(__m256 *r)
{
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20); r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20); r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31); r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31); r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* 8 float segments of at least lo elements: their first lo - lo % 8 elements
** from carries c[0..8); returns how many were done */
static int64_t sum_seg8_f32(const float *const *x, float *const *y, int64_t lo, double *c)
{
  __m256d a0 = _mm256_loadu_pd(c), a1 = _mm256_loadu_pd(c + 4);   /* segments 0-3, 4-7 */
  int64_t k = 0;
  for (; k + 8 <= lo; k += 8) {
    __m256 r[8];
    for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(x[q] + k);
    tr8(r);
    for (int e = 0; e < 8; e++) {
      a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(r[e])));
      a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(r[e], 1)));
      r[e] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(a0)), _mm256_cvtpd_ps(a1), 1);
    }
    tr8(r);
    for (int q = 0; q < 8; q++) _mm256_storeu_ps(y[q] + k, r[q]);
  }
  _mm256_storeu_pd(c, a0); _mm256_storeu_pd(c + 4, a1);
  return k;
}
#endif

typedef struct {
  int f32;
  const char *x; char *y;
  int64_t es, lines, n, nblk, blk;
  double *carry;                       /* [line][block] */
} SumJob;

/* segment i: block i % nblk of line i / nblk (nblk = 1: whole rows) */
static void sum_seg(const SumJob *j, int64_t i, const char **x, char **y, int64_t *m)
{
  int64_t l = i / j->nblk, q = i % j->nblk, k0 = q * j->blk;
  int64_t off = (l * j->n + k0) * j->es;
  *x = j->x + off; *y = j->y + off;
  *m = j->n - k0 < j->blk ? j->n - k0 : j->blk;
}
static void sum_totals(void *ctx, int64_t b, int64_t e)
{
  SumJob *j = ctx;
  for (int64_t i = b; i < e; i++) {
    const char *x; char *y; int64_t m;
    sum_seg(j, i, &x, &y, &m);
    j->carry[i] = j->f32 ? sum_total_f32((const float *)x, m) : sum_total_f64((const double *)x, m);
  }
}
static void sum_groups(void *ctx, int64_t b, int64_t e)   /* groups of 8 segments */
{
  SumJob *j = ctx;
  int64_t nseg = j->lines * j->nblk;
  for (int64_t g = b; g < e; g++) {
    const void *x[8]; void *y[8]; int64_t m[8]; double c[8];
    int k = 0;
    for (int64_t i = g * 8; i < nseg && k < 8; i++, k++) {
      sum_seg(j, i, (const char **)&x[k], (char **)&y[k], &m[k]);
      c[k] = j->carry ? j->carry[i] : 0;
    }
#if !RT_ISA_SHARED
    if (j->f32 && k == 8) {              /* the common length at once, then the rest of each */
      int64_t lo = m[0];
      for (int q = 1; q < 8; q++) if (m[q] < lo) lo = m[q];
      int64_t done = sum_seg8_f32((const float *const *)x, (float *const *)y, lo, c);
      for (int q = 0; q < 8; q++) { x[q] = (const float *)x[q] + done; y[q] = (float *)y[q] + done; m[q] -= done; }
    }
#endif
    for (int h = 0; h < k; h += 4) {
      int n = k - h < 4 ? k - h : 4;
      if (j->f32) sum_seg4_f32((const float *const *)x + h, (float *const *)y + h, m + h, c + h, n);
      else sum_seg4_f64((const double *const *)x + h, (double *const *)y + h, m + h, c + h, n);
    }
  }
}

int RT_ISA_FN(rt_cumsum_lines)(td_tensor *x, td_tensor *y, int64_t lines, int64_t n)
{
  SumJob j = { .f32 = x->scalar_type == TD_FLOAT32, .x = rt_ptr(x), .y = rt_ptr(y), .es = rt_dtype_size(x->scalar_type),
               .lines = lines, .n = n, .nblk = 1, .blk = n };
  if (n > SCAN_BLK) { j.blk = SCAN_BLK / 4; j.nblk = (n + j.blk - 1) / j.blk; }
  int64_t nseg = lines * j.nblk, ngroups = (nseg + 7) / 8;
  if (j.nblk > 1) {
    if (!(j.carry = malloc((size_t)nseg * sizeof(double)))) return rt_err(TD_ERR_NOMEM, "cumsum: out of memory");
    rt_parallel_for(nseg, 4, sum_totals, &j);
    for (int64_t l = 0; l < lines; l++) {            /* carry-ins, left to right */
      double a = 0;
      for (int64_t q = 0; q < j.nblk; q++) { double t = j.carry[l * j.nblk + q]; j.carry[l * j.nblk + q] = a; a += t; }
    }
  }
  rt_parallel_for(ngroups, (SCAN_BLK / 8 + n - 1) / n, sum_groups, &j);
  free(j.carry);
  return 0;
}

#if RT_ISA_SHARED
/* -- The kernel ---------------------------------------------------------------------------- */

typedef struct {
  ScanFn fn;
  int kind, isf, rev;
  const char *x; char *y; int64_t *iy;
  int64_t es, outer, n, inner, nblk;
  Acc *carry;                          /* [line][block] carry-ins (long lines) */
} ScanJob;

/* line l = (o, j): its first element in scan order, and the step */
static int64_t line_start(const ScanJob *j, int64_t l, int64_t *s)
{
  int64_t o = l / j->inner, jj = l % j->inner;
  *s = j->rev ? -j->inner : j->inner;
  return o * j->n * j->inner + jj + (j->rev ? (j->n - 1) * j->inner : 0);
}

static void scan_lines(void *ctx, int64_t b, int64_t e)
{
  const ScanJob *j = ctx;
  for (int64_t l = b; l < e; l++) {
    int64_t s, p = line_start(j, l, &s);
    Acc a = acc_init(j->kind);
    j->fn(j->x + p * j->es, j->y + p * j->es, j->iy ? j->iy + p : NULL, j->n, s, &a,
          j->rev ? j->n - 1 : 0, j->rev ? -1 : 1);
  }
}

/* block q of line l: its total (pass 1, y NULL) or its scan from its carry (pass 2) */
static void scan_block(const ScanJob *j, int64_t t, int store)
{
  int64_t l = t / j->nblk, q = t % j->nblk, s, p = line_start(j, l, &s);
  int64_t k0 = q * SCAN_BLK, m = j->n - k0 < SCAN_BLK ? j->n - k0 : SCAN_BLK;
  int64_t at = p + k0 * s;
  int64_t base = j->rev ? j->n - 1 - k0 : k0;
  Acc *a = &j->carry[t];
  if (store) j->fn(j->x + at * j->es, j->y + at * j->es, j->iy ? j->iy + at : NULL, m, s, a, base, j->rev ? -1 : 1);
  else j->fn(j->x + at * j->es, NULL, NULL, m, s, a, base, j->rev ? -1 : 1);
}
static void scan_totals(void *ctx, int64_t b, int64_t e) { for (int64_t t = b; t < e; t++) scan_block(ctx, t, 0); }
static void scan_finish(void *ctx, int64_t b, int64_t e) { for (int64_t t = b; t < e; t++) scan_block(ctx, t, 1); }

static int scan_run(int kind, int rev, td_tensor *x, td_tensor *y, td_tensor *iy, int dim)
{
  ScanJob j = { .kind = kind, .rev = rev, .isf = rt_is_float(x->scalar_type) };
  j.fn = scan_fn(kind, x->scalar_type);
  j.x = rt_ptr(x); j.y = rt_ptr(y); j.iy = iy ? (int64_t *)rt_ptr(iy) : NULL;
  j.es = rt_dtype_size(x->scalar_type);
  j.outer = 1; j.inner = 1; j.n = x->ndim ? x->sizes[dim] : 1;
  for (int d = 0; d < dim; d++) j.outer *= x->sizes[d];
  for (int d = dim + 1; d < x->ndim; d++) j.inner *= x->sizes[d];
  int64_t lines = j.outer * j.inner;
  if (x->nelem == 0) return 0;
  if (kind == SK_SUM && j.isf && j.inner == 1 && !rev) return rt_cumsum_lines(x, y, lines, j.n);
  if (j.n <= SCAN_BLK) {
    rt_parallel_for(lines, (SCAN_BLK + j.n - 1) / j.n, scan_lines, &j);
    return 0;
  }
  j.nblk = (j.n + SCAN_BLK - 1) / SCAN_BLK;
  int64_t nt = lines * j.nblk;
  if (!(j.carry = malloc((size_t)nt * sizeof(Acc)))) return rt_err(TD_ERR_NOMEM, "scan: out of memory");
  Acc init = acc_init(kind);
  for (int64_t t = 0; t < nt; t++) j.carry[t] = init;
  rt_parallel_for(nt, 1, scan_totals, &j);            /* block totals */
  for (int64_t l = 0; l < lines; l++) {                /* carry-ins, left to right */
    Acc a = init;
    for (int64_t q = 0; q < j.nblk; q++) {
      Acc tot = j.carry[l * j.nblk + q];
      j.carry[l * j.nblk + q] = a;
      acc_combine(kind, j.isf, &a, &tot);
    }
  }
  rt_parallel_for(nt, 1, scan_finish, &j);
  free(j.carry);
  return 0;
}

int rt_kern_scan(RtCall *c, td_tensor *out)
{
  int op = c->op, dim = (int)c->attrs.i[0], rev = c->attrs.flags & 1;
  int kind = op == RT_OP_CUMSUM ? SK_SUM : op == RT_OP_CUMPROD ? SK_PROD :
             op == RT_OP_CUMMAX || op == RT_OP_CUMARGMAX ? SK_MAX :
             op == RT_OP_CUMMIN || op == RT_OP_CUMARGMIN ? SK_MIN : SK_LSE;
  bool idx = kind == SK_MAX || kind == SK_MIN;
  bool want_vals = op != RT_OP_CUMARGMAX && op != RT_OP_CUMARGMIN;
  /* computed in float32, float64 or int64 (the others: int64, cast back after) */
  int cd = rt_is_float(c->cdtype) ? c->cdtype : TD_INT64;
  td_tensor *xc = rt_as_dtype(c->in[0], cd), *x = xc ? rt_as_contig(xc) : NULL;
  td_release(xc);
  if (!x) return TD_ERR_NOMEM;
  td_tensor *y = NULL, *iy = NULL;
  int rc = 0;
  bool direct = want_vals && out->scalar_type == cd && rt_tensor_is_contig(out);
  y = direct ? (td_retain(out), out) : rt_tensor_new(x->ndim, x->sizes, cd);
  if (idx) iy = !want_vals && rt_tensor_is_contig(out) ? (td_retain(out), out) : rt_tensor_new(x->ndim, x->sizes, TD_INT64);
  if (!y || (idx && !iy)) rc = TD_ERR_NOMEM;
  if (!rc) rc = scan_run(kind, rev, x, y, iy, dim);
  if (!rc && want_vals && !direct) {                  /* into out's dtype and strides */
    RtCall cc = { .op = RT_OP_CAST, .nin = 1, .in = &y, .cdtype = cd, .scalar_type = out->scalar_type, .ndim = out->ndim };
    cc.attrs.dtype = out->scalar_type; cc.attrs.ndims = -1;
    memcpy(cc.sizes, out->sizes, sizeof cc.sizes);
    rc = rt_kern_ew(&cc, out);
  }
  if (!rc && !want_vals && iy != out) {
    RtCall cc = { .op = RT_OP_COPY, .nin = 1, .in = &iy, .cdtype = TD_INT64, .scalar_type = TD_INT64, .ndim = out->ndim };
    cc.attrs.dtype = -1; cc.attrs.ndims = -1;
    memcpy(cc.sizes, out->sizes, sizeof cc.sizes);
    rc = rt_kern_ew(&cc, out);
  }
  if (!rc && want_vals && idx) { c->aux = iy; iy = NULL; }   /* cummax/cummin: the indices too */
  td_release(x); td_release(y); td_release(iy);
  return rc;
}
#endif
