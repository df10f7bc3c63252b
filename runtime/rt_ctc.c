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
*/
#include "rt.h"
#include <math.h>

static inline double lse3(double a, double b, double c)
{
  double m = a > b ? a : b;
  if (c > m) m = c;
  if (m == -INFINITY) return -INFINITY;
  return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

static inline double lp_at(const RtCtcJob *j, int64_t t, int64_t n, int64_t c)
{
  int64_t i = (t * j->N + n) * j->C + c;
  return j->dtype == TD_FLOAT32 ? (double)((const float *)j->lp)[i] : ((const double *)j->lp)[i];
}

/* sequence n's extended labels (L_n = 2 S_n + 1 of them) into ext */
static int64_t ctc_ext(const RtCtcJob *j, int64_t n, int64_t *ext)
{
  int64_t S = j->tl[n], Ln = 2 * S + 1;
  const int64_t *tg = j->tg + j->off[n];
  for (int64_t s = 0; s < Ln; s++) ext[s] = s & 1 ? tg[s >> 1] : j->blank;
  return Ln;
}

/* -- Forward ----------------------------------------------------------------------------------- */

static void ctc_fwd_range(void *ctx, int64_t b, int64_t e)
{
  const RtCtcJob *j = ctx;
  for (int64_t n = b; n < e; n++) {
    int64_t *ext = (int64_t *)(j->scratch + n * (3 * j->L + j->C));
    int64_t Ln = ctc_ext(j, n, ext), I = j->il[n], L = j->L;
    double *al = j->alpha + n * j->T * L;
    if (I == 0) { j->nll[n] = j->tl[n] == 0 ? 0 : INFINITY; continue; }
    for (int64_t s = 0; s < Ln; s++) al[s] = s < 2 ? lp_at(j, 0, n, ext[s]) : -INFINITY;
    for (int64_t t = 1; t < I; t++) {
      const double *pr = al + (t - 1) * L;
      double *cu = al + t * L;
      for (int64_t s = 0; s < Ln; s++) {
        double a1 = s >= 1 ? pr[s - 1] : -INFINITY;
        double a2 = s >= 2 && ext[s] != j->blank && ext[s] != ext[s - 2] ? pr[s - 2] : -INFINITY;
        double v = lse3(pr[s], a1, a2);
        cu[s] = v == -INFINITY ? v : v + lp_at(j, t, n, ext[s]);
      }
    }
    const double *last = al + (I - 1) * L;
    double ll = lse3(last[Ln - 1], Ln >= 2 ? last[Ln - 2] : -INFINITY, -INFINITY);
    j->nll[n] = -ll;
  }
}

int rt_ctc_forward(RtCtcJob *j)
{
  rt_parallel_for(j->N, 1, ctc_fwd_range, j);
  return 0;
}

/* -- Backward ---------------------------------------------------------------------------------- */

static void ctc_bwd_range(void *ctx, int64_t b, int64_t e)
{
  const RtCtcJob *j = ctx;
  int64_t L = j->L, C = j->C;
  for (int64_t n = b; n < e; n++) {
    double *buf = j->scratch + n * (3 * L + C);
    int64_t *ext = (int64_t *)(buf + 2 * L + C);
    int64_t Ln = ctc_ext(j, n, ext), I = j->il[n];
    double g = j->gs[n], nll = j->nll[n];
    bool live = g != 0 && I > 0 && isfinite(nll);
    for (int64_t t = 0; t < j->T; t++) {                    /* zero past I, and all of a dead sequence */
      if (live && t < I) continue;
      int64_t o = (t * j->N + n) * C;
      for (int64_t c = 0; c < C; c++) {
        if (j->dtype == TD_FLOAT32) ((float *)j->dlp)[o + c] = 0;
        else ((double *)j->dlp)[o + c] = 0;
      }
    }
    if (!live) continue;
    const double *al = j->alpha + n * j->T * L;
    double *nx = buf, *cu = buf + L, *acc = buf + 2 * L;
    for (int64_t t = I - 1; t >= 0; t--) {
      for (int64_t s = 0; s < Ln; s++) {
        double v;
        if (t == I - 1) v = s >= Ln - 2 ? 0 : -INFINITY;
        else {
          double b1 = s + 1 < Ln ? nx[s + 1] : -INFINITY;
          double b2 = s + 2 < Ln && ext[s + 2] != j->blank && ext[s + 2] != ext[s] ? nx[s + 2] : -INFINITY;
          v = lse3(nx[s], b1, b2);
        }
        cu[s] = v == -INFINITY ? v : v + lp_at(j, t, n, ext[s]);
      }
      /* the posterior of each extended label, summed per class */
      for (int64_t c = 0; c < C; c++) acc[c] = 0;
      const double *at = al + t * L;
      for (int64_t s = 0; s < Ln; s++) {
        double w = at[s] + cu[s];
        if (w != -INFINITY) acc[ext[s]] += exp(w - lp_at(j, t, n, ext[s]) + nll);
      }
      int64_t o = (t * j->N + n) * C;
      for (int64_t c = 0; c < C; c++) {
        if (j->dtype == TD_FLOAT32) ((float *)j->dlp)[o + c] = (float)(-g * acc[c]);
        else ((double *)j->dlp)[o + c] = -g * acc[c];
      }
      double *sw = nx; nx = cu; cu = sw;
    }
  }
}

int rt_ctc_backward(RtCtcJob *j)
{
  rt_parallel_for(j->N, 1, ctc_bwd_range, j);
  return 0;
}
