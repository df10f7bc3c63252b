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
** Speed: a row (all s at one t) depends only on the row before, so its loop
** runs without branches over arrays padded with -inf (s - 1, s - 2 before
** the start; s + 1, s + 2 past the end; the skip rule as an added 0 or -inf)
** and GCC vectorizes it, exp and log through libmvec (an ISA variant per
** CPU, runtime/rt_isa.h). Only the band of s that can still be on a complete
** path is computed, as PyTorch does: s < 2 (t + 1) (reachable from the start)
** and s >= L_n - 2 (I - t) (can reach the end); outside it the variables are
** -inf, which the full recursion gives too (below the band alpha is finite,
** but beta is -inf there, so nothing it feeds counts).
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>

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
** skip rule as 0/-inf (alpha: s-2 -> s, beta: s+2 -> s), lp at the labels
** for one t, the posterior at one t, two beta rows and the per-class sums.
** Row loops run over whole vectors of 8 past the band's end (their tail is
** set to -inf after), so these arrays hold L + 8 and their tails are
** harmless: skip -inf, lpx 0. */
typedef struct { int64_t *ext; double *skip, *skipb, *lpx, *post, *b0, *b1, *acc; } CtcRow;

static int64_t ctc_row(const RtCtcJob *j, int64_t n, CtcRow *r)
{
  int64_t L = j->L, P = L + 8, W = rt_ctc_width(L), S = j->tl[n], Ln = 2 * S + 1;
  double *m = j->scratch + n * rt_ctc_scratch(L, j->C);
  r->ext = (int64_t *)m; r->skip = m + P; r->skipb = m + 2 * P; r->lpx = m + 3 * P; r->post = m + 4 * P;
  r->b0 = m + 5 * P; r->b1 = r->b0 + W; r->acc = r->b1 + W;
  const int64_t *tg = j->tg + j->off[n];
  for (int64_t s = 0; s < Ln; s++) r->ext[s] = s & 1 ? tg[s >> 1] : j->blank;
  for (int64_t s = 0; s < P; s++) {
    r->skip[s] = s >= 2 && s < Ln && r->ext[s] != j->blank && r->ext[s] != r->ext[s - 2] ? 0 : -INFINITY;
    r->skipb[s] = s + 2 < Ln && r->ext[s + 2] != j->blank && r->ext[s + 2] != r->ext[s] ? 0 : -INFINITY;
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

/* the band [lo, hi) of s that can lie on a complete path at t, and the end of
** its loop rounded up to whole vectors of 8 */
static inline void ctc_band(int64_t t, int64_t I, int64_t Ln, int64_t *lo, int64_t *hi, int64_t *end)
{
  int64_t a = Ln - 2 * (I - t), b = 2 * (t + 1);
  *lo = a > 0 ? a : 0;
  *hi = b < Ln ? b : Ln;
  *end = *lo + ((*hi - *lo + 7) & ~(int64_t)7);
}

/* -- Forward ----------------------------------------------------------------------------------- */

/* alpha of sequence n: T rows of W, row[2 + s] = alpha_t(s), -inf outside the band */
static void ctc_fwd_range(void *ctx, int64_t b, int64_t e)
{
  const RtCtcJob *j = ctx;
  int64_t W = rt_ctc_width(j->L);
  for (int64_t n = b; n < e; n++) {
    CtcRow r;
    int64_t Ln = ctc_row(j, n, &r), I = j->il[n];
    if (I == 0) { j->nll[n] = j->tl[n] == 0 ? 0 : INFINITY; continue; }
    double *al = j->alpha + n * j->T * W;
    for (int64_t t = 0; t < I; t++) {
      double *cu = al + t * W + 2;
      int64_t lo, hi, end;
      ctc_band(t, I, Ln, &lo, &hi, &end);
      ctc_gather(j, t, n, &r, Ln);
      const double *lpx = r.lpx, *skip = r.skip;
      if (t == 0) for (int64_t s = lo; s < hi; s++) cu[s] = lpx[s];
      else {
        const double *pr = cu - W;
        for (int64_t v = lo; v < end; v += 8)
          for (int64_t s = v; s < v + 8; s++) cu[s] = lse3(pr[s], pr[s - 1], pr[s - 2] + skip[s]) + lpx[s];
      }
      for (int64_t s = -2; s < lo; s++) cu[s] = -INFINITY;
      for (int64_t s = hi; s < W - 2; s++) cu[s] = -INFINITY;
    }
    const double *last = al + (I - 1) * W + 2;
    j->nll[n] = -lse3(last[Ln - 1], Ln >= 2 ? last[Ln - 2] : -INFINITY, -INFINITY);
  }
}

int RT_ISA_FN(rt_ctc_forward)(RtCtcJob *j)
{
  rt_parallel_for(j->N, 1, ctc_fwd_range, j);
  return 0;
}

/* -- Backward ---------------------------------------------------------------------------------- */

static void ctc_zero_row(const RtCtcJob *j, int64_t t, int64_t n)
{
  int64_t o = (t * j->N + n) * j->C;
  for (int64_t c = 0; c < j->C; c++) {
    if (j->dtype == TD_FLOAT32) ((float *)j->dlp)[o + c] = 0;
    else ((double *)j->dlp)[o + c] = 0;
  }
}

static void ctc_bwd_range(void *ctx, int64_t b, int64_t e)
{
  const RtCtcJob *j = ctx;
  int64_t C = j->C, W = rt_ctc_width(j->L);
  for (int64_t n = b; n < e; n++) {
    CtcRow r;
    int64_t Ln = ctc_row(j, n, &r), I = j->il[n];
    double g = j->gs[n], nll = j->nll[n];
    bool live = g != 0 && I > 0 && isfinite(nll);
    for (int64_t t = live ? I : 0; t < j->T; t++) ctc_zero_row(j, t, n);   /* past I; all of a dead sequence */
    if (!live) continue;
    const double *al = j->alpha + n * j->T * W;
    double *nx = r.b0, *cu = r.b1;                  /* beta rows: cu[s] = beta_t(s), -inf outside the band */
    for (int64_t t = I - 1; t >= 0; t--) {
      int64_t lo, hi, end;
      ctc_band(t, I, Ln, &lo, &hi, &end);
      ctc_gather(j, t, n, &r, Ln);
      const double *lpx = r.lpx, *skipb = r.skipb, *at = al + t * W + 2;
      if (t == I - 1) for (int64_t s = lo; s < hi; s++) cu[s] = s >= Ln - 2 ? lpx[s] : -INFINITY;
      else
        for (int64_t v = lo; v < end; v += 8)
          for (int64_t s = v; s < v + 8; s++) cu[s] = lse3(nx[s], nx[s + 1], nx[s + 2] + skipb[s]) + lpx[s];
      for (int64_t s = 0; s < lo; s++) cu[s] = -INFINITY;
      for (int64_t s = hi; s < W; s++) cu[s] = -INFINITY;
      /* the posterior of each extended label (alpha + beta - lp - log p), summed per class */
      double *post = r.post, *acc = r.acc;
      for (int64_t v = lo; v < end; v += 8)
        for (int64_t s = v; s < v + 8; s++) post[s] = ctc_exp(at[s] + cu[s] - lpx[s] + nll);
      for (int64_t c = 0; c < C; c++) acc[c] = 0;
      for (int64_t s = lo; s < hi; s++) acc[r.ext[s]] += post[s];
      int64_t o = (t * j->N + n) * C;
      if (j->dtype == TD_FLOAT32) for (int64_t c = 0; c < C; c++) ((float *)j->dlp)[o + c] = (float)(-g * acc[c]);
      else for (int64_t c = 0; c < C; c++) ((double *)j->dlp)[o + c] = -g * acc[c];
      double *sw = nx; nx = cu; cu = sw;
    }
  }
}

int RT_ISA_FN(rt_ctc_backward)(RtCtcJob *j)
{
  rt_parallel_for(j->N, 1, ctc_bwd_range, j);
  return 0;
}
