/*
** rt_ctc.c -- the CTC recursions (Graves et al. 2006) in log space: the
** forward variables alpha and the loss per sequence, then the backward
** variables beta and the gradient w.r.t. the log-probabilities in one pass.
** Runtime stage, no op-table row: jit/jit_ctc.c runs it for F.ctc_loss
** outside tide.compile. A sequence is one thread's (rt_parallel_for over the
** batch), everything in double, so results do not depend on the thread count.
**
** Extended labels l'(s), s = 0 .. 2 S_n: blank, l1, blank, l2, ..., blank.
**   alpha_0(0) = lp_0(blank), alpha_0(1) = lp_0(l1), else -inf
**   alpha_t(s) = lp_t(l'(s)) + lse(alpha_{t-1}(s), alpha_{t-1}(s-1), [skip s] alpha_{t-1}(s-2))
**   with skip s: l'(s) is not blank and l'(s) != l'(s-2) (no repeat without a blank between);
**   log p = lse(alpha_{I-1}(2S), alpha_{I-1}(2S-1)) for I = input length (log p = [S == 0 ? 0 : -inf] at I = 0).
** beta mirrors it from t = I-1 down (beta_t includes lp_t, as alpha_t does), and
**   d(-log p)/d lp_t(c) = -sum_{s: l'(s) = c} exp(alpha_t(s) + beta_t(s) - lp_t(c) - log p)   (t < I)
** the true derivative (PyTorch's kernel returns it plus exp(lp), which only
** log_softmax's backward makes equal).
**
** Speed: the recursions run in linear space with each row rescaled (Rabiner's
** scaled forward-backward): y_t(s) = exp(lp_t(l'(s)) - max_s lp_t), then
**   p_t(s) = a_{t-1}(s) + a_{t-1}(s-1) + [skip s] a_{t-1}(s-2),  a_t = p_t y_t / sum_s(p_t y_t)
** with log p = sum_t (log sum_s(p_t y_t) + max lp_t) + log(a_{I-1}(2S) + a_{I-1}(2S-1)); and
** beta the same way backwards. alpha_t beta_t / y_t = p_t b_t up to a factor
** per t, so the posterior is p_t b_t normalized over s: one exp per cell and
** pass, no log. A row whose sum underflows (a label far below the row's best,
** an impossible alignment) sends its sequence to the log-space recursion
** above (lse per cell), which gives the exact -inf or the large finite loss.
** Rows are branch-free loops over whole vectors of 8 that GCC vectorizes
** (exp and log through libmvec, an ISA variant per CPU, runtime/rt_isa.h),
** only over the band of s that can still be on a complete path, as PyTorch
** does: s < 2 (t + 1) (reachable from the start) and s >= L_n - 2 (I - t) (can
** reach the end); outside it the variables are 0 (-inf in log space).
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>
#include <float.h>

/* libm without errno (Makefile flags): GCC vectorizes through libmvec */
#define SIMD __attribute__((simd("notinbranch"), const, nothrow, leaf))
SIMD double exp(double); SIMD double log(double);

/* exp and log only see arguments in their fast range: libmvec's vector
** variants take a scalar detour for a whole vector when one lane is -inf or
** underflows, so differences below -700 count as e^-700 (1e-304 next to the
** maximum's 1) and an all -inf maximum is blended in after */
#define CTC_FLOOR (-700.0)
static inline double ctc_clamp(double d) { return d < CTC_FLOOR ? CTC_FLOOR : d; }

/* lse of three log values, branch-free; -inf when all are */
static inline double lse3(double a, double b, double c)
{
  double m = a > b ? a : b;
  m = c > m ? c : m;
  double z = m == -INFINITY ? 0 : m;             /* not -inf - -inf = NaN */
  double r = z + log(exp(ctc_clamp(a - z)) + exp(ctc_clamp(b - z)) + exp(ctc_clamp(c - z)));
  return m == -INFINITY ? -INFINITY : r;
}

/* exp(x), 0 below the floor */
static inline double ctc_exp(double x) { double e = exp(ctc_clamp(x)); return x < CTC_FLOOR ? 0 : e; }

/* sequence n's working memory (RtCtcJob.scratch): the extended labels, the
** skip rule as 0/-inf and 0/1 (alpha: s-2 -> s, beta: s+2 -> s), lp at the
** labels and y for one t, the posterior at one t, two rows (a or beta) and
** the per-class sums. Row loops run over whole vectors of 8 past the band's
** end, so these arrays hold L + 8 and their tails are harmless (skip -inf or
** 0, lpx 0) and the rows W = rt_ctc_width(L), two before s = 0. */
typedef struct { int64_t *ext; double *skip, *skipb, *skm, *skbm, *lpx, *y, *post, *r0, *r1, *acc; } CtcRow;

static int64_t ctc_row(const RtCtcJob *j, int64_t n, CtcRow *r)
{
  int64_t L = j->L, P = L + 8, W = rt_ctc_width(L), S = j->tl[n], Ln = 2 * S + 1;
  double *m = j->scratch + n * rt_ctc_scratch(L, j->C);
  r->ext = (int64_t *)m; r->skip = m + P; r->skipb = m + 2 * P; r->skm = m + 3 * P; r->skbm = m + 4 * P;
  r->lpx = m + 5 * P; r->y = m + 6 * P; r->post = m + 7 * P; r->r0 = m + 8 * P + 2; r->r1 = r->r0 + W; r->acc = r->r1 + W - 2;
  const int64_t *tg = j->tg + j->off[n];
  for (int64_t s = 0; s < Ln; s++) r->ext[s] = s & 1 ? tg[s >> 1] : j->blank;
  for (int64_t s = 0; s < P; s++) {
    bool a = s >= 2 && s < Ln && r->ext[s] != j->blank && r->ext[s] != r->ext[s - 2];
    bool b = s + 2 < Ln && r->ext[s + 2] != j->blank && r->ext[s + 2] != r->ext[s];
    r->skip[s] = a ? 0 : -INFINITY; r->skm[s] = a;
    r->skipb[s] = b ? 0 : -INFINITY; r->skbm[s] = b;
    if (s >= Ln) r->lpx[s] = 0;
  }
  return Ln;
}

/* lp_t(l'(s)) for s in [0, Ln) */
static void ctc_gather(const RtCtcJob *j, int64_t t, int64_t n, const CtcRow *r, int64_t Ln)
{
  int64_t o = (t * j->N + n) * j->C;
  if (j->dtype == TD_FLOAT32) for (int64_t s = 0; s < Ln; s++) r->lpx[s] = ((const float *)j->lp)[o + r->ext[s]];
  else for (int64_t s = 0; s < Ln; s++) r->lpx[s] = ((const double *)j->lp)[o + r->ext[s]];
}

/* s over [lo, end) with end - lo a multiple of 8 GCC can see (a count shifted
** left by 3): the loop vectorizes with no scalar remainder */
#define CTC_VLOOP(s, lo, end) \
  for (int64_t s##_n = (((end) - (lo)) >> 3) << 3, s##_k = 0, s = (lo); s##_k < s##_n; s##_k++, s = (lo) + s##_k)

/* the band [lo, hi) of s that can lie on a complete path at t, and the end of
** its loop rounded up to whole vectors of 8 */
static inline void ctc_band(int64_t t, int64_t I, int64_t Ln, int64_t *lo, int64_t *hi, int64_t *end)
{
  int64_t a = Ln - 2 * (I - t), b = 2 * (t + 1);
  *lo = a > 0 ? a : 0;
  *hi = b < Ln ? b : Ln;
  *end = *lo + ((*hi - *lo + 7) & ~(int64_t)7);
}

/* y(s) = exp(lpx(s) - max lpx) on the band (0 past it); returns the max */
static double ctc_emit(const CtcRow *r, int64_t lo, int64_t hi, int64_t end)
{
  double mx = -INFINITY;
  for (int64_t s = lo; s < hi; s++) mx = r->lpx[s] > mx ? r->lpx[s] : mx;
  const double *lpx = r->lpx;
  double *y = r->y;
  CTC_VLOOP(s, lo, end) { double e = ctc_exp(lpx[s] - mx); y[s] = s < hi ? e : 0; }
  return mx;
}

/* sum of x over [lo, end) in 8 lanes and a fixed tree */
static double ctc_sum(const double *x, int64_t lo, int64_t end)
{
  double l[8] = { 0 };
  for (int64_t v = lo; v < end; v += 8)
    for (int k = 0; k < 8; k++) l[k] += x[v + k];
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

static void ctc_zero_row(const RtCtcJob *j, int64_t t, int64_t n)
{
  int64_t o = (t * j->N + n) * j->C;
  for (int64_t c = 0; c < j->C; c++) {
    if (j->dtype == TD_FLOAT32) ((float *)j->dlp)[o + c] = 0;
    else ((double *)j->dlp)[o + c] = 0;
  }
}

/* dlp_t = -g * (post summed per class) */
static void ctc_grad_row(const RtCtcJob *j, int64_t t, int64_t n, const CtcRow *r, int64_t lo, int64_t hi, double g)
{
  double *acc = r->acc;
  int64_t C = j->C, o = (t * j->N + n) * C;
  for (int64_t c = 0; c < C; c++) acc[c] = 0;
  for (int64_t s = lo; s < hi; s++) acc[r->ext[s]] += r->post[s];
  if (j->dtype == TD_FLOAT32) for (int64_t c = 0; c < C; c++) ((float *)j->dlp)[o + c] = (float)(-g * acc[c]);
  else for (int64_t c = 0; c < C; c++) ((double *)j->dlp)[o + c] = -g * acc[c];
}

/* -- Log space: exact where the scaled rows underflow -------------------------------------------- */

/* log alpha of sequence n into its T rows of W (row[s], -inf outside the band); the nll */
static double ctc_fwd_log(const RtCtcJob *j, int64_t n, const CtcRow *r, int64_t Ln, int64_t I)
{
  int64_t W = rt_ctc_width(j->L);
  double *al = j->alpha + n * j->T * W + 2;
  for (int64_t t = 0; t < I; t++) {
    double *cu = al + t * W;
    int64_t lo, hi, end;
    ctc_band(t, I, Ln, &lo, &hi, &end);
    ctc_gather(j, t, n, r, Ln);
    const double *lpx = r->lpx, *skip = r->skip;
    if (t == 0) for (int64_t s = lo; s < hi; s++) cu[s] = lpx[s];
    else {
      const double *pr = cu - W;
      CTC_VLOOP(s, lo, end) cu[s] = lse3(pr[s], pr[s - 1], pr[s - 2] + skip[s]) + lpx[s];
    }
    for (int64_t s = -2; s < lo; s++) cu[s] = -INFINITY;
    for (int64_t s = hi; s < W - 2; s++) cu[s] = -INFINITY;
  }
  const double *last = al + (I - 1) * W;
  return -lse3(last[Ln - 1], Ln >= 2 ? last[Ln - 2] : -INFINITY, -INFINITY);
}

/* beta in log space and the gradient rows t < I, from ctc_fwd_log's rows */
static void ctc_bwd_log(const RtCtcJob *j, int64_t n, const CtcRow *r, int64_t Ln, int64_t I, double g, double nll)
{
  int64_t W = rt_ctc_width(j->L);
  const double *al = j->alpha + n * j->T * W + 2;
  double *nx = r->r0, *cu = r->r1;
  for (int64_t t = I - 1; t >= 0; t--) {
    int64_t lo, hi, end;
    ctc_band(t, I, Ln, &lo, &hi, &end);
    ctc_gather(j, t, n, r, Ln);
    const double *lpx = r->lpx, *skipb = r->skipb, *at = al + t * W;
    if (t == I - 1) for (int64_t s = lo; s < hi; s++) cu[s] = s >= Ln - 2 ? lpx[s] : -INFINITY;
    else
      CTC_VLOOP(s, lo, end) cu[s] = lse3(nx[s], nx[s + 1], nx[s + 2] + skipb[s]) + lpx[s];
    for (int64_t s = 0; s < lo; s++) cu[s] = -INFINITY;
    for (int64_t s = hi; s < W - 2; s++) cu[s] = -INFINITY;
    double *post = r->post;
    CTC_VLOOP(s, lo, end) post[s] = ctc_exp(at[s] + cu[s] - lpx[s] + nll);
    ctc_grad_row(j, t, n, r, lo, hi, g);
    double *sw = nx; nx = cu; cu = sw;
  }
}

/* -- Forward ----------------------------------------------------------------------------------- */

/* scaled alpha of sequence n: row t of its T rows holds p_t (0 outside the
** band), a_{t-1} is a ping-pong row; the nll, or NAN when a row underflows */
static double ctc_fwd_lin(const RtCtcJob *j, int64_t n, const CtcRow *r, int64_t Ln, int64_t I)
{
  int64_t W = rt_ctc_width(j->L);
  double *al = j->alpha + n * j->T * W + 2, *pa = r->r0, *ca = r->r1, ll = 0;
  for (int64_t s = -2; s < W - 2; s++) pa[s] = ca[s] = 0;
  for (int64_t t = 0; t < I; t++) {
    double *p = al + t * W;
    int64_t lo, hi, end;
    ctc_band(t, I, Ln, &lo, &hi, &end);
    if (lo >= hi) return NAN;
    ctc_gather(j, t, n, r, Ln);
    double mx = ctc_emit(r, lo, hi, end);
    const double *skm = r->skm, *y = r->y;
    for (int64_t s = -2; s < lo; s++) p[s] = 0;
    if (t == 0) for (int64_t s = lo; s < end; s++) p[s] = s < 2 ? 1 : 0;
    else
      CTC_VLOOP(s, lo, end) p[s] = s < hi ? pa[s] + pa[s - 1] + skm[s] * pa[s - 2] : 0;
    for (int64_t s = end; s < W - 2; s++) p[s] = 0;
    for (int64_t s = lo; s < end; s++) ca[s] = p[s] * y[s];
    double sum = ctc_sum(ca, lo, end);
    if (!(sum >= DBL_MIN) || !(sum < INFINITY)) return NAN;
    double inv = 1 / sum;
    for (int64_t s = lo; s < end; s++) ca[s] *= inv;
    for (int64_t s = 0; s < lo; s++) ca[s] = 0;
    ll += log(sum) + mx;
    double *sw = pa; pa = ca; ca = sw;
  }
  double fin = pa[Ln - 1] + (Ln >= 2 ? pa[Ln - 2] : 0);
  if (!(fin >= DBL_MIN)) return NAN;
  return -(ll + log(fin));
}

static void ctc_fwd_range(void *ctx, int64_t b, int64_t e)
{
  const RtCtcJob *j = ctx;
  for (int64_t n = b; n < e; n++) {
    CtcRow r;
    int64_t Ln = ctc_row(j, n, &r), I = j->il[n];
    j->logspace[n] = 0;
    if (I == 0) { j->nll[n] = j->tl[n] == 0 ? 0 : INFINITY; continue; }
    double nll = ctc_fwd_lin(j, n, &r, Ln, I);
    if (nll != nll) { nll = ctc_fwd_log(j, n, &r, Ln, I); j->logspace[n] = 1; }
    j->nll[n] = nll;
  }
}

int RT_ISA_FN(rt_ctc_forward)(RtCtcJob *j)
{
  rt_parallel_for(j->N, 1, ctc_fwd_range, j);
  return 0;
}

/* -- Backward ---------------------------------------------------------------------------------- */

/* scaled beta of sequence n and the gradient rows t < I; false when a row underflows */
static bool ctc_bwd_lin(const RtCtcJob *j, int64_t n, const CtcRow *r, int64_t Ln, int64_t I, double g)
{
  int64_t W = rt_ctc_width(j->L);
  const double *al = j->alpha + n * j->T * W + 2;
  double *nx = r->r0, *cu = r->r1;
  for (int64_t s = -2; s < W - 2; s++) nx[s] = cu[s] = 0;
  for (int64_t t = I - 1; t >= 0; t--) {
    int64_t lo, hi, end;
    ctc_band(t, I, Ln, &lo, &hi, &end);
    ctc_gather(j, t, n, r, Ln);
    ctc_emit(r, lo, hi, end);
    const double *skbm = r->skbm, *y = r->y, *p = al + t * W;
    if (t == I - 1) for (int64_t s = lo; s < end; s++) cu[s] = s >= Ln - 2 && s < hi ? y[s] : 0;
    else
      CTC_VLOOP(s, lo, end) cu[s] = (nx[s] + nx[s + 1] + skbm[s] * nx[s + 2]) * y[s];
    for (int64_t s = 0; s < lo; s++) cu[s] = 0;
    for (int64_t s = end; s < W - 2; s++) cu[s] = 0;
    double sum = ctc_sum(cu, lo, end);
    if (!(sum >= DBL_MIN) || !(sum < INFINITY)) return false;
    double inv = 1 / sum, *post = r->post;
    for (int64_t s = lo; s < end; s++) { cu[s] *= inv; post[s] = p[s] * cu[s]; }
    double z = ctc_sum(post, lo, end);
    if (!(z >= DBL_MIN) || !(z < INFINITY)) return false;
    double iz = 1 / z;
    for (int64_t s = lo; s < end; s++) post[s] *= iz;
    ctc_grad_row(j, t, n, r, lo, hi, g);
    double *sw = nx; nx = cu; cu = sw;
  }
  return true;
}

static void ctc_bwd_range(void *ctx, int64_t b, int64_t e)
{
  const RtCtcJob *j = ctx;
  for (int64_t n = b; n < e; n++) {
    CtcRow r;
    int64_t Ln = ctc_row(j, n, &r), I = j->il[n];
    double g = j->gs[n], nll = j->nll[n];
    bool live = g != 0 && I > 0 && isfinite(nll);
    for (int64_t t = live ? I : 0; t < j->T; t++) ctc_zero_row(j, t, n);   /* past I; all of a dead sequence */
    if (!live) continue;
    if (!j->logspace[n] && ctc_bwd_lin(j, n, &r, Ln, I, g)) continue;
    if (!j->logspace[n]) nll = ctc_fwd_log(j, n, &r, Ln, I);   /* the rows hold p: log alpha first */
    ctc_bwd_log(j, n, &r, Ln, I, g, nll);
  }
}

int RT_ISA_FN(rt_ctc_backward)(RtCtcJob *j)
{
  rt_parallel_for(j->N, 1, ctc_bwd_range, j);
  return 0;
}
