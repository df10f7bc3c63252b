/*
** rt_red.c -- reductions: sum mean prod max min argmax argmin var std
** logsumexp norm. Runtime stage: the shape/dtype rule (meta, shared with
** tracing) and the eager CPU kernels behind the op table's RT_K_RED rows.
*/

/*
** Design note. Every call is planned once (red_plan):
**   1. drop size-1 dims, sort the others by input stride (outermost first),
**      merge neighbours of the same class (reduced / kept) that are contiguous
**      in both the input and the output;
**   2. innermost dim reduced ("row" case): each output folds its contiguous
**      runs into RED_W lanes, then the lanes pairwise; rows shorter than
**      RED_ROWK fold sequentially instead, four rows interleaved per call.
**      Innermost dim kept ("column" case): each chunk of up to RED_CW outputs
**      folds whole rows, acc[j] (+)= x[r, j], four rows per pass over acc.
** Either way the inner loop is a unit-stride loop over an accumulator array,
** the shape GCC vectorizes without -ffast-math. An input whose innermost dim
** is not unit-stride is copied to contiguous first.
**
** Determinism: the reduced range of every output is cut into segments whose
** bounds depend only on the shape (RED_SEG elements per row-case segment,
** RED_CSEG per column-case segment). A segment is folded in a fixed order and
** segment partials are combined in order; threads only pick which segments
** they run, so results do not depend on the thread count at all.
**
** Accumulators: double for float inputs (a float32 sum of 2^24 values is good
** to ~1e-9 relative), int64 for integer sum/prod (wrapping), the input type
** for max/min. NaN propagates through max/min (the first NaN wins argmax).
** var/std and logsumexp take two passes: a center (the mean, the max) per
** output, then the centered sum.
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>
#include <string.h>
#include <stdlib.h>

/* libm without errno side effects: GCC vectorizes the calls through libmvec */
#define RED_SIMD __attribute__((simd("notinbranch"), const, nothrow, leaf))
RED_SIMD double exp(double); RED_SIMD double log(double); RED_SIMD double pow(double, double);
RED_SIMD float expf(float);

#define RED_W      256        /* lanes of a row fold */
#define RED_CW     2048       /* outputs per column chunk: rows are read in pieces of up to 8 KB */
#define RED_SEG    65536      /* reduced elements per segment (row case), the unit of work */
#define RED_CSEG   (1 << 19)  /* elements per segment (column case) */
#define RED_ROWK   32         /* rows shorter than this fold sequentially, many per call */
#define RED_GRAIN  32768      /* elements per thread chunk, at least */
#define RED_PF     (4 * RED_W) /* row case: elements ahead that are asked for (RT_PREFETCH) */

/* -- Fold kernels ---------------------------------------------------------------------------- */

/* Fold nr rows of m elements, row k at x + k*rs, into acc[0..m): acc[j] (+)= x[k][j].
** Four rows are combined before touching acc, (t0 (+) t1) (+) (t2 (+) t3), which
** quarters the accumulator traffic of column reductions. Arg family: element
** x[k][j] has index i0 + k, or i0 + k*rs + j when `lanes` (a run over lanes).
** cen[0..m) are per-output centers (var, logsumexp); p is norm's p. */
typedef void (*RedColFn)(const char *x, int64_t m, int64_t nr, int64_t rs, void *acc, int64_t *idx,
                         int64_t i0, int lanes, const double *cen, double p);
/* Fold n short rows in order: acc[j] (+)= x[j*xs + 0..K); arg index k. */
typedef void (*RedRowsFn)(const char *x, int64_t K, int64_t n, int64_t xs, void *acc, int64_t *idx,
                          const double *cen, double p);
typedef void (*RedCombFn)(void *acc, int64_t *idx, const void *b, const int64_t *bi, int64_t m);
typedef void (*RedInitFn)(void *acc, int64_t *idx, int64_t m);

#define R_PLUS(a, b)   ((a) + (b))
#define R_TIMES(a, b)  ((a) * (b))
#define R_MAX(a, b)    ((!((b) <= (a)) & ((a) == (a))) ? (b) : (a))   /* a NaN sticks */
#define R_MIN(a, b)    ((!((b) >= (a)) & ((a) == (a))) ? (b) : (a))
#define R_IPLUS(a, b)  ((int64_t)((uint64_t)(a) + (uint64_t)(b)))   /* wraps, as PyTorch */
#define R_ITIMES(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))
#define R_ID(x, j, cen, p) (x)

#define COL_ARGS const char *x_, int64_t m, int64_t nr, int64_t rs, void *acc_, int64_t *restrict idx, \
                 int64_t i0, int lanes, const double *restrict cen, double p
#define ROWS_ARGS const char *x_, int64_t K, int64_t n, int64_t xs, void *acc_, int64_t *restrict idx, \
                  const double *restrict cen, double p

/* The blocked column fold: element type T, accumulator A, TERM(x, j, cen, p) the
** value of element x for output slot j, COMB the combine. */
#define COL_BODY(T, A, TERM, COMB) \
  const T *x = (const T *)x_; A *restrict acc = acc_; \
  (void)idx; (void)i0; (void)lanes; (void)cen; (void)p; \
  int64_t k = 0; \
  for (; k + 4 <= nr; k += 4) { \
    const T *restrict x0 = x + k * rs, *restrict x1 = x0 + rs, *restrict x2 = x1 + rs, *restrict x3 = x2 + rs; \
    for (int64_t j = 0; j < m; j++) { \
      A t0 = TERM(x0[j], j, cen, p), t1 = TERM(x1[j], j, cen, p); \
      A t2 = TERM(x2[j], j, cen, p), t3 = TERM(x3[j], j, cen, p); \
      acc[j] = COMB(acc[j], COMB(COMB(t0, t1), COMB(t2, t3))); } } \
  for (; k < nr; k++) { \
    const T *restrict xk = x + k * rs; \
    for (int64_t j = 0; j < m; j++) acc[j] = COMB(acc[j], TERM(xk[j], j, cen, p)); }

/* Short rows, each folded in order; four rows at a time for independent chains */
#define ROWS_BODY(T, A, TERM, COMB) \
  A *restrict acc = acc_; (void)idx; (void)cen; (void)p; \
  int64_t j = 0; \
  for (; j + 4 <= n; j += 4) { \
    const T *x0 = (const T *)x_ + j * xs, *x1 = x0 + xs, *x2 = x1 + xs, *x3 = x2 + xs; \
    A a0 = acc[j], a1 = acc[j + 1], a2 = acc[j + 2], a3 = acc[j + 3]; \
    for (int64_t k = 0; k < K; k++) { \
      a0 = COMB(a0, TERM(x0[k], j, cen, p)); a1 = COMB(a1, TERM(x1[k], j + 1, cen, p)); \
      a2 = COMB(a2, TERM(x2[k], j + 2, cen, p)); a3 = COMB(a3, TERM(x3[k], j + 3, cen, p)); } \
    acc[j] = a0; acc[j + 1] = a1; acc[j + 2] = a2; acc[j + 3] = a3; } \
  for (; j < n; j++) { \
    const T *xr = (const T *)x_ + j * xs; A a = acc[j]; \
    for (int64_t k = 0; k < K; k++) a = COMB(a, TERM(xr[k], j, cen, p)); \
    acc[j] = a; }

/* exp(x - c) for element x (its own type) and center c: float32 inputs use expf
** (8 lanes per libmvec call); c, a max of the input, is exact in float */
#define R_EXPC(x, c) _Generic((x), float: (double)expf((float)(x) - (float)(c)), default: exp((double)(x) - (c)))

/* Double family, float32/float64 inputs: _(NAME, init, term of element x (v = x as a
** double) for output slot j, combine) */
#define RED_DOPS(_) \
  _(SUM,   0.0,       v,                           R_PLUS) \
  _(PROD,  1.0,       v,                           R_TIMES) \
  _(ASUM,  0.0,       fabs(v),                     R_PLUS) \
  _(SQSUM, 0.0,       v * v,                       R_PLUS) \
  _(PSUM,  0.0,       pow(fabs(v), p),             R_PLUS) \
  _(NNZ,   0.0,       (double)(v != 0),            R_PLUS) \
  _(CSQ,   0.0,       (v - cen[j]) * (v - cen[j]), R_PLUS) \
  _(EXPC,  0.0,       R_EXPC(x, cen[j]),           R_PLUS) \
  _(MAX,   -INFINITY, v,                           R_MAX) \
  _(AMAX,  0.0,       fabs(v),                     R_MAX) \
  _(AMIN,  INFINITY,  fabs(v),                     R_MIN)

enum {
#define RA_ENUM(NAME, I, T, C) RA_##NAME,
  RED_DOPS(RA_ENUM)
#undef RA_ENUM
  RA__N
};

#define DEF_DT(NAME, TERM, COMB, sfx, T) \
  static inline double dterm_##NAME##_##sfx(T x, int64_t j, const double *restrict cen, double p) { \
    double v = x; (void)v; (void)j; (void)cen; (void)p; return (TERM); } \
  static void dcol_##NAME##_##sfx(COL_ARGS) { COL_BODY(T, double, dterm_##NAME##_##sfx, COMB) } \
  static void drows_##NAME##_##sfx(ROWS_ARGS) { ROWS_BODY(T, double, dterm_##NAME##_##sfx, COMB) }
#define DEF_D(NAME, INIT, TERM, COMB) \
  DEF_DT(NAME, TERM, COMB, f32, float) DEF_DT(NAME, TERM, COMB, f64, double) \
  static void dcomb_##NAME(void *a_, int64_t *ai, const void *b_, const int64_t *bi, int64_t m) { \
    double *a = a_; const double *b = b_; (void)ai; (void)bi; \
    for (int64_t j = 0; j < m; j++) a[j] = COMB(a[j], b[j]); } \
  static void dinit_##NAME(void *a_, int64_t *ai, int64_t m) { \
    double *a = a_; (void)ai; for (int64_t j = 0; j < m; j++) a[j] = INIT; }
RED_DOPS(DEF_D)

static const struct { RedColFn col[2]; RedRowsFn rows[2]; RedCombFn comb; RedInitFn init; } red_dfam[RA__N] = {
#define ROW_D(NAME, I, T, C) [RA_##NAME] = { { dcol_##NAME##_f32, dcol_##NAME##_f64 }, \
    { drows_##NAME##_f32, drows_##NAME##_f64 }, dcomb_##NAME, dinit_##NAME },
  RED_DOPS(ROW_D)
#undef ROW_D
};

/* Integer family (sum, prod of int64; smaller integer types are widened first) */
#define DEF_I(NAME, INIT, COMB) \
  static void icol_##NAME(COL_ARGS) { COL_BODY(int64_t, int64_t, R_ID, COMB) } \
  static void irows_##NAME(ROWS_ARGS) { ROWS_BODY(int64_t, int64_t, R_ID, COMB) } \
  static void icomb_##NAME(void *a_, int64_t *ai, const void *b_, const int64_t *bi, int64_t m) { \
    int64_t *a = a_; const int64_t *b = b_; (void)ai; (void)bi; \
    for (int64_t j = 0; j < m; j++) a[j] = COMB(a[j], b[j]); } \
  static void iinit_##NAME(void *a_, int64_t *ai, int64_t m) { \
    int64_t *a = a_; (void)ai; for (int64_t j = 0; j < m; j++) a[j] = INIT; }
DEF_I(SUM, 0, R_IPLUS)
DEF_I(PROD, 1, R_ITIMES)

/* Native families over every dtype: _(sfx, T, lowest, highest); bool uses uint8 */
#define RED_NTYPES(_, ...) \
  _(u8,  uint8_t, 0,         UINT8_MAX, __VA_ARGS__) \
  _(i32, int32_t, INT32_MIN, INT32_MAX, __VA_ARGS__) \
  _(i64, int64_t, INT64_MIN, INT64_MAX, __VA_ARGS__) \
  _(f32, float,   -INFINITY, INFINITY,  __VA_ARGS__) \
  _(f64, double,  -INFINITY, INFINITY,  __VA_ARGS__)

/* max/min values only (amax/amin; max/min over several dims) */
#define DEF_N(sfx, T, LO, HI, NAME, ISMAX, COMB) \
  static void ncol_##NAME##_##sfx(COL_ARGS) { COL_BODY(T, T, R_ID, COMB) } \
  static void nrows_##NAME##_##sfx(ROWS_ARGS) { ROWS_BODY(T, T, R_ID, COMB) } \
  static void ncomb_##NAME##_##sfx(void *a_, int64_t *ai, const void *b_, const int64_t *bi, int64_t m) { \
    T *a = a_; const T *b = b_; (void)ai; (void)bi; \
    for (int64_t j = 0; j < m; j++) a[j] = COMB(a[j], b[j]); } \
  static void ninit_##NAME##_##sfx(void *a_, int64_t *ai, int64_t m) { \
    T *a = a_; (void)ai; for (int64_t j = 0; j < m; j++) a[j] = ISMAX ? (T)(LO) : (T)(HI); }
RED_NTYPES(DEF_N, MAX, 1, R_MAX)
RED_NTYPES(DEF_N, MIN, 0, R_MIN)

/* Value and index (argmax, argmin, max/min along one dim). An index < 0 marks
** an empty slot; ties keep the lower index, and the first NaN wins. */
#define A_MAX(a, v) (!((v) <= (a)) & ((a) == (a)))
#define A_MIN(a, v) (!((v) >= (a)) & ((a) == (a)))
#define DEF_A(sfx, T, LO, HI, NAME, ISMAX, BETTER, CMP) \
  static void acol_##NAME##_##sfx(COL_ARGS) { \
    T *restrict acc = acc_; (void)cen; (void)p; \
    for (int64_t k = 0; k < nr; k++) { \
      const T *restrict x = (const T *)x_ + k * rs; \
      if (lanes) for (int64_t j = 0; j < m; j++) { \
        T v = x[j], a = acc[j]; int t = BETTER(a, v) | (idx[j] < 0); \
        acc[j] = t ? v : a; idx[j] = t ? i0 + k * rs + j : idx[j]; } \
      else for (int64_t j = 0; j < m; j++) { \
        T v = x[j], a = acc[j]; int t = BETTER(a, v) | (idx[j] < 0); \
        acc[j] = t ? v : a; idx[j] = t ? i0 + k : idx[j]; } } } \
  static void arows_##NAME##_##sfx(ROWS_ARGS) { \
    T *restrict acc = acc_; (void)cen; (void)p; \
    for (int64_t j = 0; j < n; j++) { \
      const T *x = (const T *)x_ + j * xs; T a = acc[j]; int64_t ia = idx[j]; \
      for (int64_t k = 0; k < K; k++) if (BETTER(a, x[k]) | (ia < 0)) { a = x[k]; ia = k; } \
      acc[j] = a; idx[j] = ia; } } \
  static void acomb_##NAME##_##sfx(void *a_, int64_t *ai, const void *b_, const int64_t *bi, int64_t m) { \
    T *a = a_; const T *b = b_; \
    for (int64_t j = 0; j < m; j++) { \
      if (bi[j] < 0) continue; \
      T av = a[j], bv = b[j]; int t; \
      if (ai[j] < 0) t = 1; \
      else if (av != av) t = bv != bv && bi[j] < ai[j]; \
      else if (bv != bv) t = 1; \
      else t = (bv CMP av) || (bv == av && bi[j] < ai[j]); \
      if (t) { a[j] = bv; ai[j] = bi[j]; } } } \
  static void ainit_##NAME##_##sfx(void *a_, int64_t *ai, int64_t m) { \
    T *a = a_; for (int64_t j = 0; j < m; j++) { a[j] = ISMAX ? (T)(LO) : (T)(HI); ai[j] = -1; } }
RED_NTYPES(DEF_A, MAX, 1, A_MAX, >)
RED_NTYPES(DEF_A, MIN, 0, A_MIN, <)

typedef struct { RedColFn col; RedRowsFn rows; RedCombFn comb; RedInitFn init; } RedFam;

/* ORDER DTYPE: bool, uint8, int32, int64, float32, float64 */
#define NAT_FAM(P, NAME, sfx) { P##col_##NAME##_##sfx, P##rows_##NAME##_##sfx, P##comb_##NAME##_##sfx, P##init_##NAME##_##sfx }
#define NAT_ROW(P, NAME) { NAT_FAM(P, NAME, u8), NAT_FAM(P, NAME, u8), NAT_FAM(P, NAME, i32), \
                           NAT_FAM(P, NAME, i64), NAT_FAM(P, NAME, f32), NAT_FAM(P, NAME, f64) }
static const RedFam red_nfam[2][TD_DTYPE__MAX] = { NAT_ROW(n, MIN), NAT_ROW(n, MAX) };
static const RedFam red_afam[2][TD_DTYPE__MAX] = { NAT_ROW(a, MIN), NAT_ROW(a, MAX) };

/* -- Meta ------------------------------------------------------------------------------------- */

/* Bit d set when dim d is reduced (attrs already normalized; ndims -1 = all). */
static uint32_t red_mask(const td_attrs *at, int nd)
{
  if (at->ndims < 0) return (1u << nd) - 1;
  uint32_t mask = 0;
  for (int i = 0; i < at->ndims; i++) if (at->dims[i] < nd) mask |= 1u << at->dims[i];
  return mask;   /* a 0-dim input reduced over "dim 0" reduces nothing */
}

#if RT_ISA_SHARED
int rt_meta_red(RtCall *c)
{
  const td_tensor *x = c->in[0];
  const char *name = rt_op_lname(c->op);
  td_attrs *at = &c->attrs;
  int nd = x->ndim, op = c->op;
  if (at->ndims < -1 || at->ndims > TD_MAX_DIMS)
    return rt_err(TD_ERR_ARG, "%s: invalid number of dims %d", name, at->ndims);
  if ((op == RT_OP_ARGMAX || op == RT_OP_ARGMIN) && at->ndims != -1 && at->ndims != 1)
    return rt_err(TD_ERR_ARG, "%s: expected one dim (or none, for the flattened tensor), got %d dims", name, at->ndims);
  /* wrap, sort, reject repeats; the normalized list is what autograd reads */
  if (at->ndims > 0 && rt_dims_check(name, at->ndims, at->dims, nd, true, NULL)) return TD_ERR_INDEX;
  uint32_t mask = red_mask(at, nd);
  if (op == RT_OP_NORM && isnan(at->s[0])) return rt_err(TD_ERR_ARG, "norm: p must be a number, got nan");
  /* max/min/argmax/argmin have no identity: an empty reduced dim is an error */
  if (op == RT_OP_MAX || op == RT_OP_MIN || op == RT_OP_ARGMAX || op == RT_OP_ARGMIN) {
    for (int d = 0; d < nd; d++)
      if ((mask >> d & 1) && x->sizes[d] == 0) {
        if (at->ndims < 0)
          return rt_err(TD_ERR_SHAPE, "%s: cannot reduce an empty tensor of shape %s (no identity); give a dim",
                        name, RT_SHAPE(x));
        return rt_err(TD_ERR_SHAPE, "%s: cannot reduce over dim %d of size 0 (shape %s)", name, d + 1, RT_SHAPE(x));
      }
  }
  c->ndim = 0;
  for (int d = 0; d < nd; d++) {
    if (!(mask >> d & 1)) c->sizes[c->ndim++] = x->sizes[d];
    else if (at->keepdim) c->sizes[c->ndim++] = 1;
  }
  if ((op == RT_OP_SUM || op == RT_OP_PROD) && !rt_is_float(c->cdtype)) c->scalar_type = TD_INT64;
  return 0;
}
#endif

/* -- The plan --------------------------------------------------------------------------------- */

typedef struct RedPlan {
  int nk, nr;                     /* outer kept dims, outer reduced dims */
  int64_t ksz[TD_MAX_DIMS], kxs[TD_MAX_DIMS], kos[TD_MAX_DIMS];   /* size, x stride, out stride */
  int64_t rsz[TD_MAX_DIMS], rxs[TD_MAX_DIMS];
  bool row;                       /* innermost dim reduced (else kept) */
  int64_t inner;                  /* its size: K (row) or M (column) */
  int64_t nouter, rtotal;         /* products of ksz and rsz */
} RedPlan;

static int64_t stride_key(int64_t s) { return s == 0 ? INT64_MAX : s; }   /* broadcast dims outermost */

/* Returns 1 when x must first be made contiguous (innermost dim not unit-stride). */
static int red_plan(RedPlan *pl, const td_tensor *x, const td_tensor *out, uint32_t mask, int keepdim)
{
  int64_t sz[TD_MAX_DIMS], xs[TD_MAX_DIMS], os[TD_MAX_DIMS];
  bool red[TD_MAX_DIMS];
  int n = 0, k = 0;
  for (int d = 0; d < x->ndim; d++) {
    bool r = mask >> d & 1;
    int64_t o = 0;
    if (!r) o = out->strides[keepdim ? d : k++];
    if (x->sizes[d] == 1) continue;
    int i = n++;                  /* stable insertion by stride, descending */
    for (; i > 0 && stride_key(xs[i - 1]) < stride_key(x->strides[d]); i--) {
      sz[i] = sz[i - 1]; xs[i] = xs[i - 1]; os[i] = os[i - 1]; red[i] = red[i - 1];
    }
    sz[i] = x->sizes[d]; xs[i] = x->strides[d]; os[i] = o; red[i] = r;
  }
  int m = 0;                      /* merge contiguous neighbours of one class */
  for (int i = 0; i < n; i++) {
    if (m > 0 && red[m - 1] == red[i] && xs[m - 1] == xs[i] * sz[i] && (red[i] || os[m - 1] == os[i] * sz[i])) {
      sz[m - 1] *= sz[i]; xs[m - 1] = xs[i]; os[m - 1] = os[i];
      continue;
    }
    sz[m] = sz[i]; xs[m] = xs[i]; os[m] = os[i]; red[m] = red[i]; m++;
  }
  memset(pl, 0, sizeof *pl);
  pl->nouter = pl->rtotal = 1;
  if (m == 0) { pl->row = true; pl->inner = 1; return 0; }
  if (xs[m - 1] != 1) return 1;
  pl->row = red[m - 1];
  if (!pl->row && os[m - 1] != 1) return 1;
  pl->inner = sz[m - 1];
  for (int i = 0; i < m - 1; i++) {
    if (red[i]) { pl->rsz[pl->nr] = sz[i]; pl->rxs[pl->nr++] = xs[i]; pl->rtotal *= sz[i]; }
    else { pl->ksz[pl->nk] = sz[i]; pl->kxs[pl->nk] = xs[i]; pl->kos[pl->nk++] = os[i]; pl->nouter *= sz[i]; }
  }
  return 0;
}

/* -- The job: segments, threads, finishing ------------------------------------------------------- */

enum { FIN_COPY, FIN_ARGVAL, FIN_ARGIDX, FIN_D };                 /* how results leave */
enum { FD_ID, FD_DIVN, FD_SQRT, FD_POWINV, FD_VAR, FD_STD, FD_LSE, FD_CMAX };   /* FIN_D transforms */

typedef struct RedJob {
  RedPlan pl;
  int op;
  const char *x; int xes;
  RedFam f; int asz;              /* accumulator bytes */
  double p, n, corr;              /* norm p; reduced count; var correction */
  const double *cen;              /* centers, one per output (output order), or NULL */
  int fin, xf;
  char *dst; int dst_dt;          /* values go here: out, or the centers buffer */
  int64_t *aux;                   /* max/min indices */
  bool short_rows;                /* row case, one reduced dim shorter than RED_ROWK */
  int64_t nch, rows_seg, nseg, nitems, plen;
  char *pacc; int64_t *pidx;      /* segment partials: [item][seg][plen] */
} RedJob;

typedef struct {
  _Alignas(64) char acc[RED_CW * 8];
  int64_t idx[RED_CW];
  double cbuf[RED_W];
} RedScratch;

/* x and out offsets of outer item o (last kept dim fastest) */
static void red_item(const RedPlan *pl, int64_t o, int64_t *xoff, int64_t *ooff)
{
  int64_t xo = 0, oo = 0;
  for (int d = pl->nk - 1; d >= 0; d--) {
    int64_t i = o % pl->ksz[d];
    o /= pl->ksz[d];
    xo += i * pl->kxs[d]; oo += i * pl->kos[d];
  }
  *xoff = xo; *ooff = oo;
}

/* offset of reduced row r, and its multi-index */
static int64_t red_row_start(const RedPlan *pl, int64_t r, int64_t *ri)
{
  int64_t off = 0;
  for (int d = pl->nr - 1; d >= 0; d--) { ri[d] = r % pl->rsz[d]; r /= pl->rsz[d]; off += ri[d] * pl->rxs[d]; }
  return off;
}

static inline int64_t red_row_next(const RedPlan *pl, int64_t off, int64_t *ri)
{
  for (int d = pl->nr - 1; d >= 0; d--) {
    off += pl->rxs[d];
    if (++ri[d] < pl->rsz[d]) return off;
    off -= pl->rxs[d] * pl->rsz[d]; ri[d] = 0;
  }
  return off;
}

/* Segment s of item `item`, folded into acc/idx. Returns the number of valid
** slots (1 in the row case, after folding the lanes) and the output offset. */
static int64_t red_segment(const RedJob *j, int64_t item, int64_t s, char *acc, int64_t *idx, double *cbuf,
                           int64_t *ooff)
{
  const RedPlan *pl = &j->pl;
  int64_t xoff, ri[TD_MAX_DIMS];
  int es = j->xes;
  if (pl->row) {
    /* out[item] (+)= runs of x; run positions go to lanes 0..RED_W, then lanes fold */
    int64_t K = pl->inner, Rn = pl->rtotal * K, pos = s * RED_SEG, end = pos + RED_SEG;
    if (end > Rn) end = Rn;
    red_item(pl, item, &xoff, ooff);
    int64_t nl = end - pos < RED_W ? end - pos : RED_W;
    if (nl < 1) nl = 1;
    j->f.init(acc, idx, nl);
    const double *cen = NULL;
    if (j->cen) { for (int64_t k = 0; k < nl; k++) cbuf[k] = j->cen[*ooff]; cen = cbuf; }
    int64_t k = pos % K, roff = red_row_start(pl, pos / K, ri);
    while (pos < end) {
      int64_t run = K - k < end - pos ? K - k : end - pos;
      /* one call per RED_W block: blocking 4 blocks per call measured slower here.
      ** The block RED_PF ahead is asked for: the hardware prefetcher restarts at
      ** every 4 KiB page and left a cold float32 sum at ~2/3 of the bandwidth. */
      const char *px = j->x + (xoff + roff + k) * es;
      for (int64_t b = 0; b < run; b += RED_W) {
        if (b + RED_PF < run) RT_PREFETCH(px + (b + RED_PF) * es, (run - b - RED_PF < RED_W ? run - b - RED_PF : RED_W) * es);
        j->f.col(px + b * es, run - b < RED_W ? run - b : RED_W, 1, 0, acc, idx, pos + b, 1, cen, j->p);
      }
      pos += run; k = 0;
      roff = red_row_next(pl, roff, ri);
    }
    while (nl > 1) {              /* pairwise fold of the lanes, fixed order */
      int64_t h = (nl + 1) / 2;
      j->f.comb(acc, idx, acc + h * j->asz, idx + h, nl - h);
      nl = h;
    }
    return 1;
  }
  /* column case: acc[0..mc) (+)= x[r, c0 + 0..mc) for the segment's rows r */
  int64_t o = item / j->nch, c0 = (item % j->nch) * RED_CW, M = pl->inner;
  int64_t mc = M - c0 < RED_CW ? M - c0 : RED_CW;
  red_item(pl, o, &xoff, ooff);
  xoff += c0; *ooff += c0;
  j->f.init(acc, idx, mc);
  int64_t r = s * j->rows_seg, end = r + j->rows_seg;
  if (end > pl->rtotal) end = pl->rtotal;
  const double *cen = j->cen ? j->cen + *ooff : NULL;
  /* runs of rows along the innermost reduced dim, one fold call each */
  int last = pl->nr - 1;
  while (r < end) {
    int64_t roff = red_row_start(pl, r, ri), run = end - r;
    if (last >= 0 && pl->rsz[last] - ri[last] < run) run = pl->rsz[last] - ri[last];
    j->f.col(j->x + (xoff + roff) * es, mc, run, last >= 0 ? pl->rxs[last] : 0, acc, idx, r, 0, cen, j->p);
    r += run;
  }
  return mc;
}

/* Write m results at output offset ooff. */
static void red_finish(const RedJob *j, char *acc, const int64_t *idx, int64_t m, int64_t ooff)
{
  int es = rt_dtype_size(j->dst_dt);
  char *d = j->dst + ooff * es;
  switch (j->fin) {
  case FIN_COPY: memcpy(d, acc, m * es); return;
  case FIN_ARGVAL: memcpy(d, acc, m * es); memcpy(j->aux + ooff, idx, m * sizeof *idx); return;
  case FIN_ARGIDX: memcpy(d, idx, m * sizeof *idx); return;
  }
  double *a = (double *)acc, dof = j->n - j->corr > 0 ? j->n - j->corr : 0;
  const double *c = j->cen ? j->cen + ooff : NULL;
  switch (j->xf) {
  case FD_DIVN: for (int64_t k = 0; k < m; k++) a[k] /= j->n; break;
  case FD_SQRT: for (int64_t k = 0; k < m; k++) a[k] = sqrt(a[k]); break;
  case FD_POWINV: for (int64_t k = 0; k < m; k++) a[k] = pow(a[k], 1.0 / j->p); break;
  case FD_VAR: for (int64_t k = 0; k < m; k++) a[k] /= dof; break;
  case FD_STD: for (int64_t k = 0; k < m; k++) a[k] = sqrt(a[k] / dof); break;
  case FD_LSE: for (int64_t k = 0; k < m; k++) a[k] = log(a[k]) + c[k]; break;
  case FD_CMAX: for (int64_t k = 0; k < m; k++) a[k] = isinf(a[k]) ? 0 : a[k]; break;
  }
  if (j->dst_dt == TD_FLOAT32) for (int64_t k = 0; k < m; k++) ((float *)d)[k] = (float)a[k];
  else memcpy(d, a, m * sizeof *a);
}

/* Short rows (row case, no outer reduced dims, K < RED_ROWK): items [b, e) go
** in runs along the innermost kept dim, each run one call of the rows fold. */
static void red_short_rows(const RedJob *j, int64_t b, int64_t e, RedScratch *sc)
{
  const RedPlan *pl = &j->pl;
  int last = pl->nk - 1;
  int64_t len = last >= 0 ? pl->ksz[last] : 1, xs = last >= 0 ? pl->kxs[last] : 0, os = last >= 0 ? pl->kos[last] : 1;
  while (b < e) {
    int64_t xoff, ooff, i = b % len;
    int64_t n = len - i < e - b ? len - i : e - b;
    if (n > (os == 1 ? RED_CW : RED_W)) n = os == 1 ? RED_CW : RED_W;
    red_item(pl, b, &xoff, &ooff);
    const double *cen = j->cen ? j->cen + ooff : NULL;
    if (cen && os != 1) { for (int64_t k = 0; k < n; k++) sc->cbuf[k] = cen[k * os]; cen = sc->cbuf; }
    j->f.init(sc->acc, sc->idx, n);
    j->f.rows(j->x + xoff * j->xes, pl->inner, n, xs, sc->acc, sc->idx, cen, j->p);
    if (os == 1) red_finish(j, sc->acc, sc->idx, n, ooff);
    else for (int64_t k = 0; k < n; k++) red_finish(j, sc->acc + k * j->asz, sc->idx + k, 1, ooff + k * os);
    b += n;
  }
}

/* one segment per item: fold and finish */
static void red_range_direct(void *ctx, int64_t b, int64_t e)
{
  const RedJob *j = ctx;
  RedScratch sc;
  if (j->short_rows) { red_short_rows(j, b, e, &sc); return; }
  for (int64_t it = b; it < e; it++) {
    int64_t ooff, m = red_segment(j, it, 0, sc.acc, sc.idx, sc.cbuf, &ooff);
    red_finish(j, sc.acc, sc.idx, m, ooff);
  }
}

/* units = (item, segment) pairs: fold into the partials buffer */
static void red_range_part(void *ctx, int64_t b, int64_t e)
{
  const RedJob *j = ctx;
  RedScratch sc;
  for (int64_t u = b; u < e; u++) {
    int64_t ooff, m = red_segment(j, u / j->nseg, u % j->nseg, sc.acc, sc.idx, sc.cbuf, &ooff);
    memcpy(j->pacc + u * j->plen * j->asz, sc.acc, m * j->asz);
    memcpy(j->pidx + u * j->plen, sc.idx, m * sizeof *sc.idx);
  }
}

/* combine each item's segment partials in order, then finish */
static void red_range_comb(void *ctx, int64_t b, int64_t e)
{
  const RedJob *j = ctx;
  RedScratch sc;
  for (int64_t it = b; it < e; it++) {
    int64_t xoff, ooff, m = 1;
    if (j->pl.row) red_item(&j->pl, it, &xoff, &ooff);
    else {
      int64_t c0 = (it % j->nch) * RED_CW;
      red_item(&j->pl, it / j->nch, &xoff, &ooff);
      ooff += c0;
      m = j->pl.inner - c0 < RED_CW ? j->pl.inner - c0 : RED_CW;
    }
    int64_t u = it * j->nseg;
    memcpy(sc.acc, j->pacc + u * j->plen * j->asz, m * j->asz);
    memcpy(sc.idx, j->pidx + u * j->plen, m * sizeof *sc.idx);
    for (int64_t s = 1; s < j->nseg; s++)
      j->f.comb(sc.acc, sc.idx, j->pacc + (u + s) * j->plen * j->asz, j->pidx + (u + s) * j->plen, m);
    red_finish(j, sc.acc, sc.idx, m, ooff);
  }
}

static int64_t grain_for(int64_t work) { return work >= RED_GRAIN ? 1 : RED_GRAIN / (work > 0 ? work : 1); }

/* Cut the work into units (fixed by the shape), run them, combine partials. */
static int red_run(RedJob *j, const char *name)
{
  const RedPlan *pl = &j->pl;
  int64_t work;                   /* elements per unit */
  if (pl->row) {
    int64_t Rn = pl->rtotal * pl->inner;
    j->nch = 1; j->nitems = pl->nouter; j->plen = 1;
    j->nseg = Rn > RED_SEG ? (Rn + RED_SEG - 1) / RED_SEG : 1;
    j->short_rows = pl->nr == 0 && pl->inner < RED_ROWK;
    work = Rn < RED_SEG ? Rn : RED_SEG;
  } else {
    int64_t M = pl->inner, w = M < RED_CW ? M : RED_CW;
    j->nch = (M + RED_CW - 1) / RED_CW; j->nitems = pl->nouter * j->nch; j->plen = RED_CW;
    j->rows_seg = RED_CSEG / w > 0 ? RED_CSEG / w : 1;
    j->nseg = (pl->rtotal + j->rows_seg - 1) / j->rows_seg;
    if (j->nseg < 1) j->nseg = 1;
    work = (pl->rtotal < j->rows_seg ? pl->rtotal : j->rows_seg) * w;
  }
  if (j->nseg == 1) { rt_parallel_for(j->nitems, grain_for(work), red_range_direct, j); return 0; }
  int64_t nunits = j->nitems * j->nseg;
  j->pacc = malloc((size_t)(nunits * j->plen) * j->asz);
  j->pidx = malloc((size_t)(nunits * j->plen) * sizeof(int64_t));
  if (!j->pacc || !j->pidx) {
    free(j->pacc); free(j->pidx);
    return rt_err(TD_ERR_NOMEM, "%s: out of memory for %lld partial results", name, (long long)nunits);
  }
  rt_parallel_for(nunits, grain_for(work), red_range_part, j);
  rt_parallel_for(j->nitems, grain_for(j->nseg * j->plen), red_range_comb, j);
  free(j->pacc); free(j->pidx);
  j->pacc = NULL; j->pidx = NULL;
  return 0;
}

/* -- The kernel ---------------------------------------------------------------------------------- */

/* Reducing over nothing: the op's value on an empty set (max/min failed in meta). */
static void red_fill_empty(int op, td_tensor *out)
{
  double v = op == RT_OP_PROD ? 1 : op == RT_OP_LOGSUMEXP ? -INFINITY :
             (op == RT_OP_MEAN || op == RT_OP_VAR || op == RT_OP_STD) ? NAN : 0;
  int es = rt_dtype_size(out->scalar_type);
  for (int64_t i = 0; i < out->nelem; i++) rt_store(rt_ptr(out) + i * es, out->scalar_type, v);
}

/* The double-family pass `ra` into dst (out, or the centers buffer). */
static int red_dpass(RedJob *j, int ra, int xf, char *dst, int dst_dt)
{
  j->f = (RedFam){ red_dfam[ra].col[j->xes == 8], red_dfam[ra].rows[j->xes == 8], red_dfam[ra].comb, red_dfam[ra].init };
  j->asz = 8; j->fin = FIN_D; j->xf = xf; j->dst = dst; j->dst_dt = dst_dt;
  return red_run(j, rt_op_lname(j->op));
}

int RT_ISA_FN(rt_kern_red)(RtCall *c, td_tensor *out)
{
  int op = c->op, rc = 0;
  const td_attrs *at = &c->attrs;
  td_tensor *x0 = c->in[0];
  uint32_t mask = red_mask(at, x0->ndim);
  double n = 1;                   /* elements per output */
  for (int d = 0; d < x0->ndim; d++) if (mask >> d & 1) n *= (double)x0->sizes[d];
  /* max/min over one dim also return indices, unless asked for values only
  ** (attrs.flags & 1: amax/amin, whose gradient is shared by ties) */
  bool want_idx = (op == RT_OP_MAX || op == RT_OP_MIN) && at->ndims == 1 && !(at->flags & 1);
  if (want_idx && !(c->aux = rt_tensor_new(out->ndim, out->sizes, TD_INT64))) return TD_ERR_NOMEM;
  if (out->nelem == 0) return 0;
  if (x0->nelem == 0) { red_fill_empty(op, out); return 0; }

  /* the dtype the loops read */
  bool native = op == RT_OP_MAX || op == RT_OP_MIN || op == RT_OP_ARGMAX || op == RT_OP_ARGMIN;
  int dt = native ? x0->scalar_type : rt_is_float(c->cdtype) ? c->cdtype : TD_INT64;
  td_tensor *x = rt_as_dtype(x0, dt), *t;
  if (!x) return TD_ERR_NOMEM;
  RedJob j;
  memset(&j, 0, sizeof j);
  /* argmax over everything returns flat (row-major) indices: walk x in that order */
  bool flat = (op == RT_OP_ARGMAX || op == RT_OP_ARGMIN) && at->ndims < 0;
  if (flat || red_plan(&j.pl, x, out, mask, at->keepdim)) {
    if (!(t = rt_as_contig(x))) { td_release(x); return TD_ERR_NOMEM; }
    td_release(x); x = t;
    red_plan(&j.pl, x, out, mask, at->keepdim);
  }
  j.op = op; j.x = rt_ptr(x); j.xes = rt_dtype_size(dt); j.n = n; j.corr = at->s[0]; j.p = at->s[0];
  j.dst = rt_ptr(out); j.dst_dt = out->scalar_type;
  double *cen = NULL;

  switch (op) {
  case RT_OP_SUM: case RT_OP_PROD:
    if (dt == TD_INT64) {
      j.f = op == RT_OP_SUM ? (RedFam){ icol_SUM, irows_SUM, icomb_SUM, iinit_SUM }
                            : (RedFam){ icol_PROD, irows_PROD, icomb_PROD, iinit_PROD };
      j.asz = 8; j.fin = FIN_COPY;
      rc = red_run(&j, rt_op_lname(op));
    } else rc = red_dpass(&j, op == RT_OP_SUM ? RA_SUM : RA_PROD, FD_ID, j.dst, j.dst_dt);
    break;
  case RT_OP_MEAN: rc = red_dpass(&j, RA_SUM, FD_DIVN, j.dst, j.dst_dt); break;
  case RT_OP_MAX: case RT_OP_MIN: case RT_OP_ARGMAX: case RT_OP_ARGMIN: {
    int ismax = op == RT_OP_MAX || op == RT_OP_ARGMAX;
    bool arg = want_idx || op == RT_OP_ARGMAX || op == RT_OP_ARGMIN;
    j.f = arg ? red_afam[ismax][dt] : red_nfam[ismax][dt];
    j.asz = j.xes;
    j.fin = !arg ? FIN_COPY : want_idx ? FIN_ARGVAL : FIN_ARGIDX;
    j.aux = want_idx ? (int64_t *)rt_ptr(c->aux) : NULL;
    rc = red_run(&j, rt_op_lname(op));
    break;
  }
  case RT_OP_VAR: case RT_OP_STD: case RT_OP_LOGSUMEXP:
    /* pass 1: a center per output (mean; max with infinities mapped to 0), pass 2: the centered sum */
    if (!(cen = malloc(out->nelem * sizeof *cen))) { rc = rt_err(TD_ERR_NOMEM, "%s: out of memory", rt_op_lname(op)); break; }
    if (op == RT_OP_LOGSUMEXP) rc = red_dpass(&j, RA_MAX, FD_CMAX, (char *)cen, TD_FLOAT64);
    else rc = red_dpass(&j, RA_SUM, FD_DIVN, (char *)cen, TD_FLOAT64);
    j.cen = cen;
    if (!rc) rc = red_dpass(&j, op == RT_OP_LOGSUMEXP ? RA_EXPC : RA_CSQ,
                            op == RT_OP_LOGSUMEXP ? FD_LSE : op == RT_OP_VAR ? FD_VAR : FD_STD, rt_ptr(out), out->scalar_type);
    break;
  case RT_OP_NORM: {
    /* p: 2 (default), 1, inf, -inf, 0 (count of nonzeros), any other p: (sum |x|^p)^(1/p) */
    double p = at->s[0];
    if (p == 2) rc = red_dpass(&j, RA_SQSUM, FD_SQRT, j.dst, j.dst_dt);
    else if (p == 1) rc = red_dpass(&j, RA_ASUM, FD_ID, j.dst, j.dst_dt);
    else if (p == INFINITY) rc = red_dpass(&j, RA_AMAX, FD_ID, j.dst, j.dst_dt);
    else if (p == -INFINITY) rc = red_dpass(&j, RA_AMIN, FD_ID, j.dst, j.dst_dt);
    else if (p == 0) rc = red_dpass(&j, RA_NNZ, FD_ID, j.dst, j.dst_dt);
    else rc = red_dpass(&j, RA_PSUM, FD_POWINV, j.dst, j.dst_dt);
    break;
  }
  default: rc = rt_err(TD_ERR_ARG, "%s: not a reduction", rt_op_lname(op));
  }
  free(cen);
  td_release(x);
  if (rc) { td_release(c->aux); c->aux = NULL; }
  return rc;
}
