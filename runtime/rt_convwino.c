/*
** rt_convwino.c -- the float32 3x3 stride-1 convolution forward by Winograd's
** F(2x2, 3x3) (the x86-64-v4 variant; elsewhere it declines). Runtime stage,
** called by rt_convmk.c's forward before its direct tiles.
**
** Each 2x2 block of outputs (a "tile") of output channel o is
**   Y = A^T [ sum_c (G g_oc G^T) . (B^T d_c B) ] A
** with d_c the tile's 4x4 window of input channel c (zero-padded), g_oc the
** 3x3 weights and . the elementwise product: 16 products a tile and channel
** pair instead of 36, summed over c as 16 GEMMs M_xi = U_xi V_xi (U_xi:
** O x C, V_xi: C x tiles) on rt_tile.h's register tile. The transforms:
**   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
**   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
**   A^T = [1 1 1 0; 0 1 -1 -1]
** A thread takes (image, group, block of WB tiles) units. It pads its group
** of the image with each padded row split into its even and odd columns, so
** that 16 tiles of a tile row read each column of their windows as one vector
** (a vector's tiles may run into the next tile row: a second, expanding
** load), transforms the block's windows into V (16 x Cg x WB floats, in L2),
** multiplies, and transforms M back into y. Sums run over c in order per
** tile, so results do not depend on the thread count. The transforms add up
** to 4 values and mix a window's values into every output of its tile, so a
** call whose input or weights hold a value that is not finite or not below
** 2^50 in magnitude is left to the direct tiles (rt_wino_fwd_v4 returns 1): a
** NaN or an infinity then reaches exactly the outputs whose windows hold it.
** TIDE_CONV_WINOGRAD=0 leaves every call to them.
*/
#include "rt.h"
#include "rt_isa.h"
#include <stdlib.h>
#include <string.h>

#if defined(RT_ISA_V4)

#include "rt_tile.h"
#define WB 96                                  /* tiles a unit: two panels of the tile */
#define WBIG 1.125899906842624e15f             /* 2^50 */

typedef struct {
  const RtConvJob *j;
  int64_t Cg, Og, th, tw, T, nblk, Hp, Wh;     /* tiles th x tw an image; padded rows Hp of Wh even and Wh odd */
  float *up;                                   /* U: [g][xi][rb][c][FMR] */
  int64_t nrb;
  int64_t off[1024];                           /* V's rows: c WB (Cg <= 1024) */
  __mmask16 pm[8][2];                          /* padding: per block of 16 u, the x lanes of its two loads (OW <= 254) */
  int failed;
} Wino;

static const int32_t EVEN[16] __attribute__((aligned(64))) = { 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30 };
static const int32_t ODD[16] __attribute__((aligned(64))) = { 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 };
static const int32_t ILO[16] __attribute__((aligned(64))) = { 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23 };
static const int32_t IHI[16] __attribute__((aligned(64))) = { 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31 };


/* any of x[0..n) not finite or not below 2^50 in magnitude */
static bool wino_bad(const float *x, int64_t n)
{
  __mmask16 bad = 0;
  __m512 big = _mm512_set1_ps(WBIG);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    bad |= ~_mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), big, _CMP_LT_OQ);
  for (; i < n; i++) bad |= !(__builtin_fabsf(x[i]) < WBIG);
  return bad != 0;
}

typedef struct { const float *x; int64_t n, per; int bad; } Scan;
static void scan_range(void *ctx, int64_t b, int64_t e)
{
  Scan *s = ctx;
  for (int64_t k = b; k < e; k++) {
    int64_t lo = k * s->per, hi = lo + s->per < s->n ? lo + s->per : s->n;
    if (wino_bad(s->x + lo, hi - lo)) __atomic_store_n(&s->bad, 1, __ATOMIC_RELAXED);
  }
}

/* the group gi of image n padded into q: [c][r][parity][Wh], P[r][2u + p] = x[r - ph][2u + p - pw] */
static void wino_pad(const Wino *w, int64_t n, int64_t gi, float *q)
{
  const RtConvGeom *g = &w->j->g;
  const __m512i ev = _mm512_load_si512(EVEN), od = _mm512_load_si512(ODD);
  int64_t H = g->H, W = g->W, Wh = w->Wh;
  for (int64_t c = 0; c < w->Cg; c++) {
    const float *xc = (const float *)w->j->x + ((n * g->C + gi * w->Cg + c) * H) * W;
    for (int64_t r = 0; r < w->Hp; r++) {
      float *d = q + ((c * w->Hp + r) * 2) * Wh;
      int64_t ih = r - g->ph;
      if (ih < 0 || ih >= H) { memset(d, 0, (size_t)(2 * Wh) * 4); continue; }
      const float *xr = xc + ih * W - g->pw;      /* xr[2u + p] = P[r][2u + p] where inside */
      for (int64_t u0 = 0, k = 0; u0 < Wh; u0 += 16, k++) {
        __m512 a = _mm512_maskz_loadu_ps(w->pm[k][0], xr + 2 * u0), b = _mm512_maskz_loadu_ps(w->pm[k][1], xr + 2 * u0 + 16);
        __mmask16 m = tile_lanes(Wh - u0);
        _mm512_mask_storeu_ps(d + u0, m, _mm512_permutex2var_ps(a, ev, b));
        _mm512_mask_storeu_ps(d + Wh + u0, m, _mm512_permutex2var_ps(a, od, b));
      }
    }
  }
}

/* V[xi][c][t - t0] = B^T d B for the tiles [t0, t1) */
static void wino_in(const Wino *w, const float *q, int64_t t0, int64_t t1, float *vt)
{
  int64_t Wh = w->Wh, Hp = w->Hp, tw = w->tw;
  for (int64_t c = 0; c < w->Cg; c++) {
    const float *qc = q + c * Hp * 2 * Wh;
    for (int64_t t = t0; t < t1; t += 16) {
      int64_t n = t1 - t < 16 ? t1 - t : 16, ty = t / tw, tx = t - ty * tw;
      int64_t ka = tw - tx < n ? tw - tx : n;   /* lanes in tile row ty; the rest in ty + 1 from tx 0 */
      __mmask16 ma = tile_lanes(ka), mb = (__mmask16)(tile_lanes(n) & ~ma);
      __m512 r[4][4];
      for (int i = 0; i < 4; i++) {
        __m512 d[4];
        for (int jj = 0; jj < 4; jj++) {
          const float *ra = qc + ((2 * ty + i) * 2 + (jj & 1)) * Wh + (jj >> 1);
          d[jj] = _mm512_maskz_loadu_ps(ma, ra + tx);
          if (mb) d[jj] = _mm512_mask_expandloadu_ps(d[jj], mb, ra + 4 * Wh);   /* row 2 (ty + 1) + i */
        }
        r[i][0] = _mm512_sub_ps(d[0], d[2]); r[i][1] = _mm512_add_ps(d[1], d[2]);
        r[i][2] = _mm512_sub_ps(d[2], d[1]); r[i][3] = _mm512_sub_ps(d[1], d[3]);
      }
      __mmask16 mn = tile_lanes(n);
      float *v = vt + c * WB + (t - t0);
      for (int jj = 0; jj < 4; jj++) {
        __m512 v0 = _mm512_sub_ps(r[0][jj], r[2][jj]), v1 = _mm512_add_ps(r[1][jj], r[2][jj]);
        __m512 v2 = _mm512_sub_ps(r[2][jj], r[1][jj]), v3 = _mm512_sub_ps(r[1][jj], r[3][jj]);
        _mm512_mask_storeu_ps(v + ((0 * 4 + jj) * w->Cg) * WB, mn, v0);
        _mm512_mask_storeu_ps(v + ((1 * 4 + jj) * w->Cg) * WB, mn, v1);
        _mm512_mask_storeu_ps(v + ((2 * 4 + jj) * w->Cg) * WB, mn, v2);
        _mm512_mask_storeu_ps(v + ((3 * 4 + jj) * w->Cg) * WB, mn, v3);
      }
    }
  }
}

/* y's outputs of the tiles [t0, t1) of channels o of group gi of image n from M (+ the bias) */
static void wino_out(const Wino *w, const float *mt, int64_t n, int64_t gi, int64_t t0, int64_t t1)
{
  const RtConvJob *j = w->j;
  const RtConvGeom *g = &j->g;
  const __m512i lo = _mm512_load_si512(ILO), hi = _mm512_load_si512(IHI);
  int64_t OH = g->OH, OW = g->OW, tw = w->tw;
  float tmp[32] __attribute__((aligned(64)));
  for (int64_t o = 0; o < w->Og; o++) {
    int64_t oc = gi * w->Og + o;
    float *yo = (float *)j->y + (n * g->O + oc) * OH * OW;
    __m512 bv = _mm512_set1_ps(j->b ? ((const float *)j->b)[oc] : 0.0f);
    for (int64_t t = t0; t < t1; t += 16) {
      int64_t nn = t1 - t < 16 ? t1 - t : 16, ty = t / tw, tx = t - ty * tw, ka = tw - tx < nn ? tw - tx : nn;
      __mmask16 mn = tile_lanes(nn);
      __m512 m[16];
      for (int xi = 0; xi < 16; xi++) m[xi] = _mm512_maskz_loadu_ps(mn, mt + (xi * w->Og + o) * WB + (t - t0));
      __m512 s0[4], s1[4];                      /* A^T m: rows, for each column b */
      for (int b = 0; b < 4; b++) {
        s0[b] = _mm512_add_ps(_mm512_add_ps(m[b], m[4 + b]), m[8 + b]);
        s1[b] = _mm512_sub_ps(_mm512_sub_ps(m[4 + b], m[8 + b]), m[12 + b]);
      }
      __m512 yv[2][2] = {
        { _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), s0[2]), bv),
          _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s0[1], s0[2]), s0[3]), bv) },
        { _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), s1[2]), bv),
          _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s1[1], s1[2]), s1[3]), bv) } };
      for (int a = 0; a < 2; a++) {
        _mm512_store_ps(tmp, _mm512_permutex2var_ps(yv[a][0], lo, yv[a][1]));
        _mm512_store_ps(tmp + 16, _mm512_permutex2var_ps(yv[a][0], hi, yv[a][1]));
        /* tiles [0, ka) in tile row ty from column 2 tx, the rest in ty + 1 from column 0 */
        for (int s = 0; s < 2; s++) {
          int64_t row = 2 * (ty + s) + a, col = s ? 0 : 2 * tx, first = s ? 2 * ka : 0;
          int64_t cnt = (s ? 2 * (nn - ka) : 2 * ka);
          if (cnt > OW - col) cnt = OW - col;
          if (row >= OH || cnt <= 0) continue;
          float *dst = yo + row * OW + col;
          for (int64_t k = 0; k < cnt; k += 16)
            _mm512_mask_storeu_ps(dst + k, tile_lanes(cnt - k), _mm512_maskz_loadu_ps(tile_lanes(cnt - k), tmp + first + k));
        }
      }
    }
  }
}

static void wino_range(void *ctx, int64_t b, int64_t e)
{
  Wino *w = ctx;
  const RtConvGeom *g = &w->j->g;
  size_t qb = (size_t)(w->Cg * w->Hp * 2 * w->Wh + 16) * 4, vb = (size_t)(16 * w->Cg * WB) * 4, mb = (size_t)(16 * w->Og * WB) * 4;
  float *q = rt_alloc(qb), *vt = rt_alloc(vb), *mt = rt_alloc(mb);
  if (q && vt && mt)
    for (int64_t u = b; u < e; u++) {
      int64_t n = u / (g->G * w->nblk), gi = (u / w->nblk) % g->G, blk = u % w->nblk;
      if (u == b || blk == 0) wino_pad(w, n, gi, q);
      int64_t t0 = blk * WB, t1 = t0 + WB < w->T ? t0 + WB : w->T;
      wino_in(w, q, t0, t1, vt);
      for (int xi = 0; xi < 16; xi++)
        for (int64_t rb = 0; rb < w->nrb; rb++) {
          int64_t mr = w->Og - rb * FMR < FMR ? w->Og - rb * FMR : FMR;
          const float *ap = w->up + (((gi * 16 + xi) * w->nrb + rb) * w->Cg) * FMR;
          for (int64_t p = 0; p * FNR < t1 - t0; p++) {
            V acc[FMR][FNV];
            tile_acc(w->Cg, ap, vt + xi * w->Cg * WB + p * FNR, w->off, acc);
            float *d = mt + (xi * w->Og + rb * FMR) * WB + p * FNR;
            for (int r = 0; r < FMR; r++)
              if (r < mr) for (int v = 0; v < FNV; v++) *(V *)(d + r * WB + v * VL) = acc[r][v];
          }
        }
      wino_out(w, mt, n, gi, t0, t1);
    }
  else __atomic_store_n(&w->failed, 1, __ATOMIC_RELAXED);
  if (q) rt_free(q, qb);
  if (vt) rt_free(vt, vb);
  if (mt) rt_free(mt, mb);
}

/* U for output channels [b, e) of all groups (gi Og + o) */
static void wino_u_range(void *ctx, int64_t b, int64_t e)
{
  const Wino *w = ctx;
  int64_t Cg = w->Cg, Og = w->Og;
  for (int64_t go = b; go < e; go++) {
    int64_t gi = go / Og, o = go % Og;
    for (int64_t c = 0; c < Cg; c++) {
      const float *k = (const float *)w->j->w + (go * Cg + c) * 9;
      float t[4][3], u[4][4];
      for (int q = 0; q < 3; q++) {
        t[0][q] = k[q]; t[1][q] = 0.5f * (k[q] + k[3 + q] + k[6 + q]);
        t[2][q] = 0.5f * (k[q] - k[3 + q] + k[6 + q]); t[3][q] = k[6 + q];
      }
      for (int a = 0; a < 4; a++) {
        u[a][0] = t[a][0]; u[a][1] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
        u[a][2] = 0.5f * (t[a][0] - t[a][1] + t[a][2]); u[a][3] = t[a][2];
      }
      for (int xi = 0; xi < 16; xi++)
        w->up[(((gi * 16 + xi) * w->nrb + o / FMR) * Cg + c) * FMR + o % FMR] = u[xi / 4][xi % 4];
    }
  }
}

/* the call's kind, dtype and geometry are Winograd's (its values are checked by rt_wino_fwd_v4) */
bool rt_wino_fits_v4(const RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  static int off = -1;
  if (off < 0) { const char *s = getenv("TIDE_CONV_WINOGRAD"); off = s && !strcmp(s, "0"); }
  int64_t Cg = g->C / g->G, Og = g->O / g->G;
  return !off && j->kind == RT_CONV_FWD && j->dtype == TD_FLOAT32 && g->kd == 0 && g->kh == 3 && g->kw == 3 &&
         g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->ph >= 0 && g->ph <= 2 && g->pw >= 0 &&
         g->pw <= 2 && Cg >= 8 && Cg <= 1024 && Og >= 8 && g->OW >= 32 && g->OW <= 254 && g->OH >= 4 && g->N >= 1;
}

/* 0: done; 1: not this path (the caller runs the direct tiles); < 0: an error */
int rt_wino_fwd_v4(const RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  if (!rt_wino_fits_v4(j)) return 1;
  int64_t Cg = g->C / g->G, Og = g->O / g->G;
  /* no value that the transforms could turn into NaN or infinity elsewhere */
  if (wino_bad(j->w, g->O * Cg * 9)) return 1;
  Scan sc = { .x = j->x, .n = g->N * g->C * g->H * g->W, .per = 1 << 16 };
  rt_parallel_for((sc.n + sc.per - 1) / sc.per, 4, scan_range, &sc);
  if (sc.bad) return 1;
  Wino w = { .j = j, .Cg = Cg, .Og = Og, .th = (g->OH + 1) / 2, .tw = (g->OW + 1) / 2 };
  w.T = w.th * w.tw; w.nblk = (w.T + WB - 1) / WB;
  w.Hp = 2 * w.th + 2; w.Wh = w.tw + 1;
  w.nrb = (Og + FMR - 1) / FMR;
  for (int64_t c = 0; c < Cg; c++) w.off[c] = c * WB;
  for (int64_t k = 0; k * 16 < w.Wh; k++)     /* x columns 2u + p - pw inside [0, W) */
    for (int h = 0; h < 2; h++) {
      unsigned m = 0;
      for (int l = 0; l < 16; l++) { int64_t col = 32 * k + 16 * h + l - g->pw; if (col >= 0 && col < g->W) m |= 1u << l; }
      w.pm[k][h] = (__mmask16)m;
    }
  /* U = G g G^T by FMR rows of o: up[g][xi][rb][c][r] */
  if (!(w.up = calloc((size_t)(g->G * 16 * w.nrb * Cg * FMR), 4))) return rt_err(TD_ERR_NOMEM, "conv2d: out of memory");
  rt_parallel_for(g->G * Og, 1 + 256 / Cg, wino_u_range, &w);
  rt_parallel_for(g->N * g->G * w.nblk, 1, wino_range, &w);
  free(w.up);
  return w.failed ? rt_err(TD_ERR_NOMEM, "conv2d: out of memory") : 0;
}

#endif
