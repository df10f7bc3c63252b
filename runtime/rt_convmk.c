/*
** rt_convmk.c -- float32 convolution on tide's own register tiles
** (the x86-64-v4 variant; other ISAs and float64 keep rt_convgemm.c's
** im2col tiles + OpenBLAS). Runtime stage, called by rt_convgemm.c.
**
** Implicit GEMM on a zero-padded copy of the input, split into stride phases.
** With the input planes padded to Hp x Wp and each cut into sh sw phase
** planes of Hq x Wq (phase (a, b) holds the padded rows a, a + sh, ... and
** columns b, b + sw, ...), output position (oh, ow) reads, for tap (ki, kj),
**   xpad[c, oh sh + ki dh, ow sw + kj dw] = xp[off(c, ki, kj) + l'],  l' = oh Wq + ow,
**   off = c sh sw PS + ((ki dh % sh) sw + kj dw % sw) PS + (ki dh / sh) Wq + kj dw / sw,
** so in the column space l' in [0, OH Wq) every tap's operand row is a
** contiguous run of xp, for any stride: a tile of output positions is a GEMM
** whose B rows are read in place (no im2col matrix, no packing of B). The
** columns with ow >= OW (Wq - OW of each row) are computed and dropped (a
** stride-1 row shares its right zeros with the next row's left ones, PS is
** the plane's size: mk_plane); a
** valid column reads only its own phase plane.
** 3-D (g->kd >= 1, conv3d): the same with a depth phase, planes Dq x Hq x Wq
** per phase (sd sh sw of them), the tap offsets gaining (rd % sd) and
** (rd / sd) Hq Wq (rd = td dd), and the column space l' = (od Hq + oh) Wq + ow
** (rows oh >= OH of each slice dropped too, L2 = ((OD - 1) Hq + OH) Wq). A
** 2-D geometry is one slice deep (D = kd = sd = dd = OD = 1, pd = 0).
**   forward  y[o, l] = sum_k W[o, k] xp[off_k + l']: 8 output channels x 48
**            columns per register tile (24 zmm accumulators), the weights
**            packed by 8 rows so a tile broadcasts contiguous floats;
**   dW       dW[o, k] = sum_l dY[o, l] xp[off_k + l']: taps x channels per
**            tile, the tap rows read in place (one pointer per tile row, the
**            valid columns only), dY packed transposed by panels of channels.
**   dX       phase by phase of dX, each a stride-1 correlation of the padded
**            dY with that phase's taps: the forward's tile again (below),
**            plus b (conv_transpose2d's bias) as it stores.
**   CONVT_BWD (conv_transpose2d's backward): the forward and dW from one
**            padded copy of x (its dY, read through its strides), whose
**            padding pass also sums each plane (sx, its db).
** Sums run in float in k order (forward, dX) or position order (dW, per block
** of images, the blocks' partials summed in block order), so results do not
** depend on the thread count.
*/
#include "rt.h"
#include "rt_isa.h"
#include <stdlib.h>
#include <string.h>

#if defined(RT_ISA_V4)

#include "rt_tile.h"
#define PART_ELEMS (1 << 22)                  /* dW partials per block, at most (as rt_convgemm.c) */

/* the depth of g: a 2-D geometry (kd == 0) is one slice deep */
typedef struct { int64_t D, kd, sd, pd, dd, OD; } Dep;
static inline Dep dep_of(const RtConvGeom *g)
{
  return g->kd > 0 ? (Dep){ g->D, g->kd, g->sd, g->pd, g->dd, g->OD } : (Dep){ 1, 1, 1, 0, 1, 1 };
}

typedef struct {
  const RtConvJob *j;
  Dep d;
  int64_t Cg, Og, K, Dq, Hq, Wq, PS, CS, L2;  /* phase planes of PS (mk_plane), channel stride CS = sd sh sw PS */
  int64_t L;                                  /* output positions per channel, OD OH OW */
  float *xp;                                  /* N C channels of phase planes, then zeros (mk_xp_bytes) */
  int64_t *off;                               /* K tap offsets within a group's planes */
  float *wp;                                  /* forward: weights by FMR rows [g][rb][k][FMR] */
  int64_t nrb, ppi, nit;                      /* forward: row blocks, panels per item, items per (n, g) */
  int64_t bsz, nblk, rows;                    /* dW: images per block, blocks, output rows per tile */
  float *part;                                /* dW: per block G K Og floats ([g][k][o]), then O doubles */
  double *psum;                               /* CONVT_BWD's sx: the N C planes' sums of x */
  bool lazy;                                  /* forward: each thread pads its groups into a buffer of its own */
  size_t pstride;
  int failed;
} Mk;

/* -- The padded input in phases --------------------------------------------------------------- */

typedef int VI __attribute__((vector_size(VL * 4)));
static const VI EVEN = { 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30 };

/* d[t] = s[t sw] for t < n (s's elements st apart): stride 2 of a contiguous row by shuffles
** (which read s[2 t + 2 VL - 1]: the last vector stops short of the row's end) */
static inline void gather_row(float *restrict d, const float *restrict s, int64_t n, int64_t sw, int64_t st)
{
  int64_t t = 0;
  if (st == 1 && sw == 1) { memcpy(d, s, (size_t)n * 4); return; }
  if (st == 0) { for (; t < n; t++) d[t] = s[0]; return; }     /* an expanded x (a sum's gradient) */
  if (st == 1 && sw == 2)
    for (; t + VL < n; t += VL) *(V *)(d + t) = __builtin_shuffle(*(const V *)(s + 2 * t), *(const V *)(s + 2 * t + VL), EVEN);
  for (; t < n; t++) d[t] = s[t * sw * st];
}

/* the sum of n floats st apart; lanes in float, the row in double */
static double row_sum(const float *r, int64_t n, int64_t st)
{
  double s = 0;
  int64_t i = 0;
  if (st == 0) return (double)n * r[0];     /* exact: n copies of a float fit in a double's mantissa */
  if (st == 1) {
    V a = { 0 };
    for (; i + VL <= n; i += VL) a += *(const V *)(r + i);
    for (int q = 0; q < VL; q++) s += a[q];
  }
  for (; i < n; i++) s += r[i * st];
  return s;
}

/* x's element strides: image, channel, depth, row, column (xs: a strided 2-D x) */
static void x_strides(const RtConvJob *j, int64_t D, int64_t st[5])
{
  const RtConvGeom *g = &j->g;
  const int64_t *xs = j->xs;
  st[0] = xs ? xs[0] : g->C * D * g->H * g->W; st[1] = xs ? xs[1] : D * g->H * g->W; st[2] = g->H * g->W;
  st[3] = xs ? xs[2] : g->W; st[4] = xs ? xs[3] : 1;
}

/* psum[p] = the sum of x's plane p (n, c), in double */
static void plane_sum(const Mk *m, int64_t p)
{
  const RtConvGeom *g = &m->j->g;
  int64_t st[5];
  x_strides(m->j, m->d.D, st);
  const float *s = (const float *)m->j->x + p / g->C * st[0] + p % g->C * st[1];
  double acc = 0;
  for (int64_t id = 0; id < m->d.D; id++)
    for (int64_t ih = 0; ih < g->H; ih++) acc += row_sum(s + id * st[2] + ih * st[3], g->W, st[4]);
  m->psum[p] = acc;
}

/* planes p in [b, e) (image p / C, channel p % C) padded into dst + (p - b) CS */
static void pad_planes(const Mk *m, int64_t b, int64_t e, float *dst)
{
  const RtConvGeom *g = &m->j->g;
  int64_t D = m->d.D, H = g->H, W = g->W, Dq = m->Dq, Hq = m->Hq, Wq = m->Wq;
  int64_t st[5];
  x_strides(m->j, D, st);
  int64_t sN = st[0], sC = st[1], sD = st[2], sH = st[3], sW = st[4];
  for (int64_t p = b; p < e; p++) {
    const float *s = (const float *)m->j->x + p / g->C * sN + p % g->C * sC;
    for (int64_t ad = 0; ad < m->d.sd; ad++)
    for (int64_t a = 0; a < g->sh; a++)
      for (int64_t bb = 0; bb < g->sw; bb++) {
        /* columns t with 0 <= t sw + bb - pw < W: [t0, t1) (per phase: no division a row) */
        int64_t o = bb - g->pw, t0 = o >= 0 ? 0 : (-o + g->sw - 1) / g->sw, t1 = (W - o + g->sw - 1) / g->sw;
        if (t1 > Wq) t1 = Wq;
        if (t1 < t0) t1 = t0;
        float *ph = dst + (p - b) * m->CS + ((ad * g->sh + a) * g->sw + bb) * m->PS;
        memset(ph + Dq * Hq * Wq, 0, (size_t)(m->PS - Dq * Hq * Wq) * 4);
        for (int64_t dq = 0; dq < Dq; dq++)
        for (int64_t i = 0; i < Hq; i++) {
          float *d = ph + (dq * Hq + i) * Wq;
          int64_t id = dq * m->d.sd + ad - m->d.pd, ih = i * g->sh + a - g->ph;
          if (id < 0 || id >= D || ih < 0 || ih >= H) { memset(d, 0, (size_t)Wq * 4); continue; }
          const float *sr = s + id * sD + ih * sH;
          if (g->sw == 1 && sW == 1) {            /* a short row: masked vectors, not three libc calls */
            int64_t t = 0;
            for (; t < t0; t++) d[t] = 0;
            for (const float *r = sr + t0 + o - t; t < t1; t += VL) {
              __mmask16 k = tile_lanes(t1 - t);
              _mm512_mask_storeu_ps(d + t, k, _mm512_maskz_loadu_ps(k, r + t));
            }
            for (t = t1; t < Wq; t++) d[t] = 0;
            continue;
          }
          memset(d, 0, (size_t)t0 * 4);
          gather_row(d + t0, sr + (t0 * g->sw + o) * sW, t1 - t0, g->sw, sW);
          memset(d + t1, 0, (size_t)(Wq - t1) * 4);
        }
      }
    if (m->psum) plane_sum(m, p);             /* CONVT_BWD's sx, read while in cache */
  }
}

static void pad_range(void *ctx, int64_t b, int64_t e)
{
  const Mk *m = ctx;
  pad_planes(m, b, e, m->xp + b * m->CS);
}

/* sx alone: the planes' sums without the padded copy */
static void sum_range(void *ctx, int64_t b, int64_t e)
{
  for (int64_t p = b; p < e; p++) plane_sum(ctx, p);
}

/* A phase plane: Dq x Hq x Wq, then PS - Dq Hq Wq zeros. With stride 1 a row
** keeps only its left zeros: a read past its end lands on the next row's (the
** padding is symmetric), so the tiles compute Wq - OW = pw dropped columns a
** row instead of 2 pw (Wq >= OW: when the kernel reaches less than pw, the row
** ends in zeros of its own). The plane's last row reads pw zeros after it: the
** plane's own, so a plane never reads another's (padded by another thread). */
static int64_t mk_plane(const RtConvGeom *g, int64_t *Dq, int64_t *Hq, int64_t *Wq)
{
  Dep d = dep_of(g);
  *Dq = (d.D + 2 * d.pd + d.sd - 1) / d.sd;
  *Hq = (g->H + 2 * g->ph + g->sh - 1) / g->sh;
  if (g->sw > 1) { *Wq = (g->W + 2 * g->pw + g->sw - 1) / g->sw; return *Dq * *Hq * *Wq; }
  *Wq = g->W + g->pw > g->OW ? g->W + g->pw : g->OW;
  return *Dq * *Hq * *Wq + g->pw;
}

/* the phase planes and the zeros after them: the last tiles' dropped columns read past the end */
static size_t mk_xp_bytes(const RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  int64_t Dq, Hq, Wq, PS = mk_plane(g, &Dq, &Hq, &Wq);
  return ((size_t)(g->N * g->C * dep_of(g).sd * g->sh * g->sw * PS) + FNR + g->kw * g->dw + 64) * 4;
}

/* lazy: no shared copy; the forward's threads pad their groups into buffers of their own (fwd_range) */
static int mk_setup(Mk *m, const RtConvJob *j, bool lazy)
{
  const RtConvGeom *g = &j->g;
  m->j = j;
  m->d = dep_of(g);
  m->Cg = g->C / g->G; m->Og = g->O / g->G; m->K = m->Cg * m->d.kd * g->kh * g->kw;
  m->PS = mk_plane(g, &m->Dq, &m->Hq, &m->Wq); m->CS = m->d.sd * g->sh * g->sw * m->PS;
  m->L2 = ((m->d.OD - 1) * m->Hq + g->OH) * m->Wq; m->L = m->d.OD * g->OH * g->OW;
  size_t planes = (size_t)(g->N * g->C * m->CS), bytes = mk_xp_bytes(j);
  m->lazy = lazy;
  if (!lazy) m->xp = rt_alloc(bytes);         /* the caching allocator: pages already faulted in */
  m->off = malloc((size_t)(m->K > 0 ? m->K : 1) * sizeof *m->off);
  if (j->kind == RT_CONVT_BWD && j->sx && !(m->psum = malloc((size_t)(g->N * g->C + 1) * sizeof *m->psum))) return -1;
  if ((!lazy && !m->xp) || !m->off) return -1;
  if (!lazy) memset(m->xp + planes, 0, bytes - planes * 4);
  for (int64_t c = 0, k = 0; c < m->Cg; c++)
    for (int64_t t = 0; t < m->d.kd; t++)
    for (int64_t ki = 0; ki < g->kh; ki++)
      for (int64_t kj = 0; kj < g->kw; kj++) {
        int64_t rd = t * m->d.dd, rh = ki * g->dh, rw = kj * g->dw;
        m->off[k++] = c * m->CS + (((rd % m->d.sd) * g->sh + rh % g->sh) * g->sw + rw % g->sw) * m->PS +
                      rd / m->d.sd * m->Hq * m->Wq + rh / g->sh * m->Wq + rw / g->sw;
      }
  if (lazy) return 0;
  rt_parallel_for(g->N * g->C, 1 + 65536 / (m->CS > 0 ? m->CS : 1), pad_range, m);
  return 0;
}

/* -- Forward (the tile is rt_tile.h's) ------------------------------------------------------ */

/* Lazy padding: a thread pads the groups (image n, group gi) it computes into
** a buffer of its own, just before their tiles read them (then in its L2),
** instead of a padding pass into one shared copy first: that copy, written
** into a block the allocator had cold, cost its line reads from memory. A
** group that two threads' ranges share is padded by both. */
static size_t fwd_group_bytes(const Mk *m)
{
  const RtConvGeom *g = &m->j->g;
  return ((size_t)(m->Cg * m->CS) + FNR + g->kw * g->dw + 64) * 4;
}

static void fwd_range(void *ctx, int64_t b, int64_t e)
{
  const Mk *m = ctx;
  const RtConvJob *j = m->j;
  const RtConvGeom *g = &j->g;
  float *buf = NULL;
  if (m->lazy) {
    size_t gb = fwd_group_bytes(m), planes = (size_t)(m->Cg * m->CS);
    if (!(buf = rt_alloc(gb))) { __atomic_store_n(&((Mk *)m)->failed, 1, __ATOMIC_RELAXED); return; }
    memset(buf + planes, 0, gb - planes * 4);
  }
  for (int64_t u = b; u < e; u++) {
    int64_t n = u / (g->G * m->nit), gi = (u / m->nit) % g->G, it = u % m->nit;
    if (buf && (u == b || it == 0)) pad_planes(m, n * g->C + gi * m->Cg, n * g->C + (gi + 1) * m->Cg, buf);
    const float *xg = buf ? buf : m->xp + (n * g->C + gi * m->Cg) * m->CS;
    float *yg = (float *)j->y + (n * g->O + gi * m->Og) * m->L;
    for (int64_t p = it * m->ppi; p < (it + 1) * m->ppi; p++) {
      int64_t c0 = p * FNR;
      if (c0 >= m->L2) break;
      /* the panel's valid columns, per vector (the same for every row block): where
      ** the first lands in y, the lanes kept, their count; stored compressed straight
      ** from the accumulators (a copy through `out` and runs of any length cost 5%) */
      int64_t y0 = -1;
      __mmask16 keep[FNV]; int cnt[FNV];
      {
        int64_t L = m->Wq, oh = c0 / L, ow = c0 - oh * L, od = oh / m->Hq;
        oh -= od * m->Hq;
        for (int v = 0; v < FNV; v++) {
          unsigned k = 0;
          for (int q = 0; q < VL; q++) {
            if (c0 + v * VL + q < m->L2 && ow < g->OW && oh < g->OH) {
              k |= 1u << q;
              if (y0 < 0) y0 = (od * g->OH + oh) * g->OW + ow;
            }
            if (++ow == L) { ow = 0; if (++oh == m->Hq) { oh = 0; od++; } }
          }
          keep[v] = (__mmask16)k; cnt[v] = __builtin_popcount(k);
        }
      }
      for (int64_t rb = 0; rb < m->nrb; rb++) {
        int64_t o0 = rb * FMR, mr = m->Og - o0 < FMR ? m->Og - o0 : FMR;
        const float *bias = j->b ? (const float *)j->b + gi * m->Og + o0 : NULL;
        V acc[FMR][FNV];
        tile_acc(m->K, m->wp + (gi * m->nrb + rb) * m->K * FMR, xg + c0, m->off, acc);
        if (y0 < 0) continue;
#pragma GCC unroll 8
        for (int r = 0; r < FMR; r++)
          if (r < mr) {
            float *d = yg + (o0 + r) * m->L + y0;
            __m512 bv = _mm512_set1_ps(bias ? bias[r] : 0.0f);
#pragma GCC unroll 3
            for (int v = 0; v < FNV; v++) {
              __m512 c = _mm512_maskz_compress_ps(keep[v], _mm512_add_ps((__m512)acc[r][v], bv));
              _mm512_mask_storeu_ps(d, tile_lanes(cnt[v]), c);
              d += cnt[v];
            }
          }
      }
    }
  }
  if (buf) rt_free(buf, fwd_group_bytes(m));
}

/* y = conv(x, w) (+ b) from m's padded x */
static int mk_fwd_run(Mk *m)
{
  const RtConvJob *j = m->j;
  const RtConvGeom *g = &j->g;
  m->nrb = (m->Og + FMR - 1) / FMR;
  if (!(m->wp = calloc((size_t)(g->G * m->nrb * m->K * FMR) + 1, 4))) return -1;
  for (int64_t gi = 0; gi < g->G; gi++)
    for (int64_t o = 0; o < m->Og; o++)
      for (int64_t k = 0; k < m->K; k++)
        m->wp[((gi * m->nrb + o / FMR) * m->K + k) * FMR + o % FMR] = ((const float *)j->w)[(gi * m->Og + o) * m->K + k];
  /* an item: ppi panels of FNR columns, about 2 M FMAs */
  int64_t panels = (m->L2 + FNR - 1) / FNR, fma = m->Og * m->K * FNR;
  m->ppi = 1 + (1 << 21) / (fma > 0 ? fma : 1);
  if (m->ppi > panels) m->ppi = panels;
  m->nit = panels > 0 ? (panels + m->ppi - 1) / m->ppi : 0;
  rt_parallel_for(g->N * g->G * m->nit, 1, fwd_range, m);
  return m->failed ? -1 : 0;
}

static void mk_free(Mk *m)
{
  if (m->xp) rt_free(m->xp, mk_xp_bytes(m->j));
  free(m->off); free(m->wp); free(m->psum);
  rt_free(m->part, m->pstride * (size_t)(m->nblk > 0 ? m->nblk : 1));
}

static int mk_fwd(const RtConvJob *j)
{
  int wr = rt_wino_fwd_v4(j);                 /* 3x3 stride 1: Winograd, when it takes it */
  if (wr <= 0) return wr;
  Mk m = { 0 };
  /* padded lazily when each thread has whole images of its own */
  int rc = mk_setup(&m, j, j->g.N * j->g.G >= rt_num_threads()) || mk_fwd_run(&m) ? rt_err(TD_ERR_NOMEM, "%s: out of memory", j->g.kd > 0 ? "conv3d" : "conv2d") : 0;
  mk_free(&m);
  return rc;
}

/* -- Weight gradient ----------------------------------------------------------------------------
** out (R x NV VL) = sum over nseg segments of seglen positions l of
**   a_r[s segstride + l] * bp[(s seglen + l) NV VL + ...]   (a_r: R tap rows in place, bp packed) */
#define DEF_WGT(R, NV) \
  static void tile_wgt_##R##_##NV(int64_t nseg, int64_t seglen, int64_t segstride, const float *const *arow, \
                                  const float *restrict bp, float *restrict out) { \
    V acc[R][NV]; const float *a[R]; \
    for (int r = 0; r < R; r++) { a[r] = arow[r]; for (int v = 0; v < NV; v++) acc[r][v] = (V){ 0 }; } \
    for (int64_t s = 0; s < nseg; s++) { \
      _Pragma("GCC unroll 4") \
      for (int64_t l = 0; l < seglen; l++, bp += NV * VL) { \
        V bv[NV]; \
        for (int v = 0; v < NV; v++) bv[v] = *(const V *)(bp + v * VL); \
        for (int r = 0; r < R; r++) for (int v = 0; v < NV; v++) acc[r][v] += a[r][l] * bv[v]; } \
      for (int r = 0; r < R; r++) a[r] += segstride; } \
    for (int r = 0; r < R; r++) for (int v = 0; v < NV; v++) *(V *)(out + (r * NV + v) * VL) = acc[r][v]; }
DEF_WGT(6, 4)
DEF_WGT(12, 2)
DEF_WGT(8, 1)
#define WMR_MAX 12
#define WNR_MAX (4 * VL)

/* a 16 x 16 block (row i = a[i]) transposed: off-diagonal s x s blocks swapped, s = 8, 4, 2, 1 */
static inline void transpose16(V a[VL])
{
  static const VI lo[4] = {
    { 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23 }, { 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27 },
    { 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29 }, { 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30 } };
  static const VI hi[4] = {
    { 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31 }, { 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31 },
    { 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31 }, { 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31 } };
  for (int t = 0, sz = 8; t < 4; t++, sz /= 2)
    for (int i = 0; i < VL; i++) {
      if (i & sz) continue;
      V x = a[i], y = a[i + sz];
      a[i] = __builtin_shuffle(x, y, lo[t]);
      a[i + sz] = __builtin_shuffle(x, y, hi[t]);
    }
}

/* one block of images: its partial dW ([g][k][o]) and db */
static void wgt_range(void *ctx, int64_t b, int64_t e)
{
  Mk *m = ctx;
  const RtConvJob *j = m->j;
  const RtConvGeom *g = &j->g;
  int64_t L = m->L, Og = m->Og, K = m->K;
  int nv = Og > 2 * VL ? 4 : Og > VL ? 2 : 1, R = nv == 4 ? 6 : nv == 2 ? 12 : 8, nr = nv * VL;
  int64_t npan = (Og + nr - 1) / nr, lt = m->rows * g->OW;
  float *bp = aligned_alloc(64, (size_t)(npan * lt * nr) * 4), out[WMR_MAX * WNR_MAX];
  if (!bp) { __atomic_store_n(&m->failed, 1, __ATOMIC_RELAXED); return; }
  for (int64_t blk = b; blk < e; blk++) {
    float *pw = j->dw ? (float *)((char *)m->part + blk * m->pstride) : NULL;
    double *pb = j->db ? (double *)((char *)m->part + blk * m->pstride + (((size_t)(g->G * K * Og) * 4 + 7) & ~(size_t)7)) : NULL;
    if (pw) memset(pw, 0, (size_t)(g->G * K * Og) * 4);
    if (pb) memset(pb, 0, (size_t)g->O * sizeof(double));
    for (int64_t n = blk * m->bsz; n < (blk + 1) * m->bsz && n < g->N; n++)
      for (int64_t gi = 0; gi < g->G; gi++) {
        const float *dyg = (const float *)j->dy + (n * g->O + gi * Og) * L;
        if (pb)
          for (int64_t o = 0; o < Og; o++) {   /* in double, 8 lanes (one chain would wait on each add) */
            double s[8] = { 0 };
            int64_t l = 0;
            for (; l + 8 <= L; l += 8) for (int q = 0; q < 8; q++) s[q] += dyg[o * L + l + q];
            for (; l < L; l++) s[0] += dyg[o * L + l];
            pb[gi * Og + o] += ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
          }
        if (!pw) continue;
        const float *xg = m->xp + (n * g->C + gi * m->Cg) * m->CS;
        for (int64_t od = 0; od < m->d.OD; od++)   /* a tile's rows lie in one depth slice */
        for (int64_t oh0 = 0; oh0 < g->OH; oh0 += m->rows) {
          int64_t nseg = g->OH - oh0 < m->rows ? g->OH - oh0 : m->rows, len = nseg * g->OW;
          /* bp[panel][l][nr] = dY[o][l] (zeros past Og): 16 x 16 blocks transposed in registers */
          for (int64_t p = 0; p < npan; p++)
            for (int64_t v0 = 0; v0 < nr; v0 += VL) {
              int64_t o0 = p * nr + v0, l = 0;
              float *d = bp + p * len * nr + v0;
              const float *s = dyg + o0 * L + (od * g->OH + oh0) * g->OW;
              if (o0 + VL <= Og)
                for (; l + VL <= len; l += VL) {
                  V a[VL];
                  for (int i = 0; i < VL; i++) a[i] = *(const V *)(s + i * L + l);
                  transpose16(a);
                  for (int i = 0; i < VL; i++) *(V *)(d + (l + i) * nr) = a[i];
                }
              for (; l < len; l++)
                for (int64_t v = 0; v < VL; v++) d[l * nr + v] = o0 + v < Og ? s[v * L + l] : 0.0f;
            }
          for (int64_t k0 = 0; k0 < K; k0 += R) {
            const float *arow[WMR_MAX];
            for (int r = 0; r < R; r++) arow[r] = xg + m->off[k0 + r < K ? k0 + r : k0] + (od * m->Hq + oh0) * m->Wq;
            for (int64_t p = 0; p < npan; p++) {
              const float *bpp = bp + p * len * nr;
              if (nv == 4) tile_wgt_6_4(nseg, g->OW, m->Wq, arow, bpp, out);
              else if (nv == 2) tile_wgt_12_2(nseg, g->OW, m->Wq, arow, bpp, out);
              else tile_wgt_8_1(nseg, g->OW, m->Wq, arow, bpp, out);
              for (int r = 0; r < R && k0 + r < K; r++) {
                float *d = pw + (gi * K + k0 + r) * Og + p * nr;
                int64_t w = Og - p * nr < nr ? Og - p * nr : nr;
                for (int64_t v = 0; v < w; v++) d[v] += out[r * nr + v];
              }
            }
          }
        }
      }
  }
  free(bp);
}

/* dW[g Og + o][k] and db: the blocks' partials summed in block order */
/* items: the partials' rows (g, k), summed along o (vectors) in double, then the
** db item (G K) */
static void wsum_range(void *ctx, int64_t b, int64_t e)
{
  const Mk *m = ctx;
  const RtConvJob *j = m->j;
  int64_t G = j->g.G, Og = m->Og, K = m->K;
  size_t boff = (((size_t)(G * K * Og) * 4 + 7) & ~(size_t)7);
  for (int64_t r = b; r < e; r++) {
    if (r == G * K) {
      for (int64_t o = 0; j->db && o < j->g.O; o++) {
        double acc = 0;
        for (int64_t blk = 0; blk < m->nblk; blk++) acc += ((const double *)((const char *)m->part + blk * m->pstride + boff))[o];
        ((float *)j->db)[o] = (float)acc;
      }
      continue;
    }
    if (!j->dw) continue;
    int64_t gi = r / K, k = r % K;
    for (int64_t o0 = 0; o0 < Og; o0 += 64) {
      int64_t n = Og - o0 < 64 ? Og - o0 : 64;
      double acc[64] = { 0 };
      for (int64_t blk = 0; blk < m->nblk; blk++) {
        const float *s = (const float *)((const char *)m->part + blk * m->pstride) + r * Og + o0;
        for (int64_t o = 0; o < n; o++) acc[o] += s[o];
      }
      for (int64_t o = 0; o < n; o++) ((float *)j->dw)[(gi * Og + o0 + o) * K + k] = (float)acc[o];
    }
  }
}

/* dW and db from m's padded x */
static int mk_wgt_run(Mk *m)
{
  const RtConvJob *j = m->j;
  const RtConvGeom *g = &j->g;
  int64_t per = g->G * m->K * m->Og + g->O;
  m->nblk = PART_ELEMS / (per > 0 ? per : 1);
  if (m->nblk < 1) m->nblk = 1;
  if (m->nblk > g->N) m->nblk = g->N;
  m->bsz = m->nblk > 0 ? (g->N + m->nblk - 1) / m->nblk : 1;
  m->nblk = g->N > 0 ? (g->N + m->bsz - 1) / m->bsz : 0;
  m->rows = g->OW > 0 ? 1 + 127 / g->OW : 1;                 /* 128+ positions a tile: its packed dY (64 channels: 32 KiB) stays in L1 */
  m->pstride = ((((size_t)(g->G * m->K * m->Og) * 4 + 7) & ~(size_t)7) + (size_t)g->O * 8 + 63) & ~(size_t)63;
  if (!(m->part = rt_alloc(m->pstride * (size_t)(m->nblk > 0 ? m->nblk : 1)))) return -1;
  if (m->nblk > 0) rt_parallel_for(m->nblk, 1, wgt_range, m);
  if (m->failed) return -1;
  if (m->nblk == 0) {
    if (j->dw) memset(j->dw, 0, (size_t)(g->O * m->K) * 4);
    if (j->db) memset(j->db, 0, (size_t)g->O * 4);
  } else rt_parallel_for(g->G * m->K + 1, 1 + 4096 / (m->Og + 1), wsum_range, m);
  return 0;
}

static int mk_wgt(const RtConvJob *j)
{
  Mk m = { 0 };
  int rc = mk_setup(&m, j, false) || mk_wgt_run(&m) ? rt_err(TD_ERR_NOMEM, "%s_backward: out of memory", j->g.kd > 0 ? "conv3d" : "conv2d") : 0;
  mk_free(&m);
  return rc;
}

/* A transposed convolution's backward (RT_CONVT_BWD): y (its dx) and dW from
** one padded copy of x (its dY), whose pass also sums each plane (sx, its db;
** the planes' sums added in image order). */
static int mk_convt_bwd(const RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  Mk m = { .j = j, .d = dep_of(g) };
  int rc = 0;
  if (!j->y && !j->dw) {                      /* sx alone */
    if (!(m.psum = malloc((size_t)(g->N * g->C + 1) * sizeof *m.psum))) rc = -1;
    else rt_parallel_for(g->N * g->C, 1 + 16384 / (g->H * g->W + 1), sum_range, &m);
  } else rc = mk_setup(&m, j, false) || (j->y && mk_fwd_run(&m)) || (j->dw && mk_wgt_run(&m)) ? -1 : 0;
  if (rc) rc = rt_err(TD_ERR_NOMEM, "conv_transpose2d_backward: out of memory");
  else if (j->sx)
    for (int64_t c = 0; c < j->g.C; c++) {
      double acc = 0;
      for (int64_t n = 0; n < j->g.N; n++) acc += m.psum[n * j->g.C + c];
      ((float *)j->sx)[c] = (float)acc;
    }
  mk_free(&m);
  return rc;
}

/* -- Input gradient ----------------------------------------------------------------------------
** dX of a convolution with stride s, by the phases of dX: padded input row
** sh i + a receives dY[oh] through the taps ki with ki dh = a + sh q (q = qi),
** at oh = i - q. So each phase (a, b) of dX is a stride-1 correlation of dY,
** zero-padded by Qh = max q rows above (Qw columns left), with that phase's
** taps, rows c and inner index k' = (o, ki, kj):
**   dX[c, sh i + a - ph, sw j + b - pw] = sum_k' W[o, c, ki, kj] dYp[o, i - qi + Qh, j - qj + Qw]
** the forward's tile again, in the column space l' = i Wd + j of the phase.
** 3-D: phases (ad, a, b), dYp slices Rz x Rd x Wd (dY at depth Qd), columns
** l' = (iz Rd + i) Wd + j with the rows i >= ni of each slice dropped.
** Stride 1 is the flipped convolution. Every dX element lies in one phase,
** so nothing is zeroed first. With sw == 2 an item computes both column
** phases of a row phase (same column space, same dYp rows: their taps' qj
** agree) and interleaves the two tiles by shuffles into one contiguous span
** of a dX row (else each output is a strided scalar store). A phase's
** columns start at its first valid row. */

#define MAXPH 64

typedef struct {
  const RtConvJob *j;
  Dep dp;
  int64_t Cg, Og, Qd, Qh, Qw, Rz, Rd, Wd;     /* dYp: Rz slices of Rd x Wd, dY at slice Qd, row Qh, column Qw */
  float *dyp;
  int64_t nph, nrb;                           /* phases (sd sh sw), row blocks of Cg */
  int64_t gsw;                                /* phases a unit: both column phases of sw == 2 (interleaved as stored), else 1 */
  int64_t kp[MAXPH], k0[MAXPH];               /* per phase: its taps' count (o, td, ki, kj) and first index */
  int64_t nz[MAXPH], ni[MAXPH], nj[MAXPH];    /* per phase: slices, rows, columns (from 0) */
  int64_t z0[MAXPH], i0[MAXPH], j0[MAXPH];    /* per phase: first valid slice, row, column */
  int64_t nit[MAXPH], it0[MAXPH + 1];         /* per unit: items per (n, g) and their prefix sums */
  int64_t ppi;
  int64_t *off;                               /* offsets, phase by phase */
  float *ap;                                  /* weights: [g][tap index k0[p] + k'] by FMR rows of c */
} MkDx;

static size_t mk_dyp_bytes(const MkDx *d)
{
  const RtConvGeom *g = &d->j->g;
  return ((size_t)(g->N * g->O * d->Rz * d->Rd * d->Wd) + FNR + d->Qw + 64) * 4;
}

static void dyp_range(void *ctx, int64_t b, int64_t e)
{
  const MkDx *d = ctx;
  const RtConvGeom *g = &d->j->g;
  for (int64_t p = b; p < e; p++) {
    const float *s = (const float *)d->j->dy + p * d->dp.OD * g->OH * g->OW;
    float *t = d->dyp + p * d->Rz * d->Rd * d->Wd;
    memset(t, 0, (size_t)(d->Rz * d->Rd * d->Wd) * 4);
    for (int64_t od = 0; od < d->dp.OD; od++)
      for (int64_t oh = 0; oh < g->OH; oh++)
        memcpy(t + ((od + d->Qd) * d->Rd + oh + d->Qh) * d->Wd + d->Qw, s + (od * g->OH + oh) * g->OW,
               (size_t)g->OW * 4);
  }
}

/* phase p's column space [dx_first, dx_cols): from its first valid row to the end of its last */
static int64_t dx_cols(const MkDx *d, int64_t p)
{
  return d->nz[p] > 0 && d->ni[p] > 0 ? ((d->nz[p] - 1) * d->Rd + d->ni[p]) * d->Wd : 0;
}
static int64_t dx_first(const MkDx *d, int64_t p) { return (d->z0[p] * d->Rd + d->i0[p]) * d->Wd; }

static const VI ILO = { 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23 };
static const VI IHI = { 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31 };

static void dx_range(void *ctx, int64_t b, int64_t e)
{
  const MkDx *d = ctx;
  const RtConvJob *j = d->j;
  const RtConvGeom *g = &j->g;
  int64_t T = d->it0[d->nph / d->gsw], HW = g->H * g->W, DHW = d->dp.D * HW, kk = d->dp.kd * g->kh * g->kw;
  float out[2][FMR * FNR + VL], il[2 * FNR + 2 * VL];
  memset(out[0] + FMR * FNR, 0, VL * 4); memset(out[1] + FMR * FNR, 0, VL * 4);   /* read, never stored */
  for (int64_t u = b; u < e; u++) {
    int64_t n = u / (g->G * T), gi = (u / T) % g->G, r = u % T, un = 0;
    while (r >= d->it0[un + 1]) un++;
    int64_t p = un * d->gsw, it = r - d->it0[un], az = p / (g->sh * g->sw), a = p / g->sw % g->sh, bb = p % g->sw;
    int64_t L2 = dx_cols(d, p), cf = dx_first(d, p);
    const float *dyg = d->dyp + (n * g->O + gi * d->Og) * d->Rz * d->Rd * d->Wd;
    float *dxg = (float *)j->dx + (n * g->C + gi * d->Cg) * DHW;
    const float *bias = j->b ? (const float *)j->b + gi * d->Cg : NULL;
    for (int64_t q = it * d->ppi; q < (it + 1) * d->ppi; q++) {
      int64_t c0 = cf + q * FNR;
      if (c0 >= L2) break;
      for (int64_t rb = 0; rb < d->nrb; rb++) {
        int64_t cb = rb * FMR, mr = d->Cg - cb < FMR ? d->Cg - cb : FMR;
        for (int64_t h = 0; h < d->gsw; h++)
          tile_fwd(d->kp[p + h], d->ap + ((gi * d->nrb + rb) * d->Og * kk + d->k0[p + h]) * FMR, dyg + c0,
                   d->off + d->k0[p + h], out[h]);
        /* columns l' = (iz Rd + i) Wd + jj, by runs within a row: slices iz >= z0, rows i0 <= i < ni,
        ** columns j0 <= jj < nj go to dX (plus the bias) */
        int64_t i = c0 / d->Wd, jj = c0 - i * d->Wd, iz = i / d->Rd;
        i -= iz * d->Rd;
        for (int64_t t = 0; t < FNR && c0 + t < L2; ) {
          int64_t run = FNR - t;
          if (run > d->Wd - jj) run = d->Wd - jj;
          if (run > L2 - c0 - t) run = L2 - c0 - t;
          if (iz >= d->z0[p] && i >= d->i0[p] && i < d->ni[p]) {
            float *row = dxg + cb * DHW + (iz * d->dp.sd + az - d->dp.pd) * HW + (i * g->sh + a - g->ph) * g->W;
            if (d->gsw == 2) {      /* both phases: dX columns 2 jj' + h - pw, one span [x0, x0 + 2 run) */
              int64_t x0 = 2 * jj - g->pw, lo = x0 > 0 ? x0 : 0, hi = x0 + 2 * run < g->W ? x0 + 2 * run : g->W;
              for (int64_t rr = 0; rr < mr && lo < hi; rr++) {
                const float *s0 = out[0] + rr * FNR + t, *s1 = out[1] + rr * FNR + t;
                for (int64_t v = 0; v < run; v += VL) {
                  V A = *(const V *)(s0 + v), B = *(const V *)(s1 + v);
                  *(V *)(il + 2 * v) = __builtin_shuffle(A, B, ILO);
                  *(V *)(il + 2 * v + VL) = __builtin_shuffle(A, B, IHI);
                }
                float bv = bias ? bias[cb + rr] : 0.0f, *dst = row + rr * DHW;
                for (int64_t x = lo; x < hi; x++) dst[x] = il[x - x0] + bv;
              }
            } else {
              int64_t lo = jj > d->j0[p] ? jj : d->j0[p], hi = jj + run < d->nj[p] ? jj + run : d->nj[p];
              float *dst = row + bb - g->pw;
              const float *src = out[0] + t - jj;
              for (int64_t rr = 0; rr < mr && lo < hi; rr++, dst += DHW, src += FNR) {
                float bv = bias ? bias[cb + rr] : 0.0f;
                if (g->sw == 1) for (int64_t x = lo; x < hi; x++) dst[x] = src[x] + bv;
                else for (int64_t x = lo; x < hi; x++) dst[x * g->sw] = src[x] + bv;
              }
            }
          }
          t += run; jj += run;
          if (jj == d->Wd) { jj = 0; if (++i == d->Rd) { i = 0; iz++; } }
        }
      }
    }
  }
}

/* the phase's rows (from 0) of an axis of n padded by pad, stride s, phase a; and its first valid one */
static void dx_axis(int64_t n, int64_t pad, int64_t s, int64_t a, int64_t *cnt, int64_t *first)
{
  *cnt = n - 1 + pad - a >= 0 ? (n - 1 + pad - a) / s + 1 : 0;
  *first = pad > a ? (pad - a + s - 1) / s : 0;
}

/* dX of a 3x3 stride-1 convolution is a forward one: dY padded by 2 - p, the
** weights flipped with in and out channels swapped (w'[c][o] = w[o][c] turned
** 180 degrees): Winograd's forward when it takes it (rt_convwino.c) */
static int mk_dx_wino(const RtConvJob *j)
{
  const RtConvGeom *g = &j->g;
  RtConvJob f = { .kind = RT_CONV_FWD, .dtype = j->dtype, .x = j->dy, .b = j->b, .y = j->dx,
                  .g = { .N = g->N, .C = g->O, .H = g->OH, .W = g->OW, .O = g->C, .G = g->G, .kh = 3, .kw = 3,
                         .sh = 1, .sw = 1, .ph = 2 - g->ph, .pw = 2 - g->pw, .dh = 1, .dw = 1, .OH = g->H, .OW = g->W } };
  if (g->kd != 0 || g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 ||
      !rt_wino_fits_v4(&f))   /* (p > 2: a negative padding there) */
    return 1;
  int64_t Cg = g->C / g->G, Og = g->O / g->G;
  float *wf = malloc((size_t)(g->O * Cg * 9) * 4);
  if (!wf) return rt_err(TD_ERR_NOMEM, "conv2d_backward: out of memory");
  const float *w = j->w;
  for (int64_t gi = 0; gi < g->G; gi++)
    for (int64_t o = 0; o < Og; o++)
      for (int64_t c = 0; c < Cg; c++)
        for (int q = 0; q < 9; q++)
          wf[((gi * Cg + c) * Og + o) * 9 + q] = w[((gi * Og + o) * Cg + c) * 9 + 8 - q];
  f.w = wf;
  int rc = rt_wino_fwd_v4(&f);
  free(wf);
  return rc;
}

static int mk_dx(const RtConvJob *j)
{
  int wr = mk_dx_wino(j);
  if (wr <= 0) return wr;
  const RtConvGeom *g = &j->g;
  MkDx d = { .j = j, .dp = dep_of(g), .Cg = g->C / g->G, .Og = g->O / g->G };
  int rc = 0;
  d.nph = d.dp.sd * g->sh * g->sw;
  if (d.nph > MAXPH) return 1;
  d.Qd = (d.dp.kd - 1) * d.dp.dd / d.dp.sd;
  d.Qh = (g->kh - 1) * g->dh / g->sh; d.Qw = (g->kw - 1) * g->dw / g->sw;
  int64_t zmax = 0, imax = 0, jmax = 0, ktot = 0, kk = d.dp.kd * g->kh * g->kw;
  for (int64_t p = 0; p < d.nph; p++) {
    int64_t az = p / (g->sh * g->sw), a = p / g->sw % g->sh, b = p % g->sw, nz = 0, nh = 0, nw = 0;
    for (int64_t t = 0; t < d.dp.kd; t++) nz += t * d.dp.dd % d.dp.sd == az;
    for (int64_t ki = 0; ki < g->kh; ki++) nh += ki * g->dh % g->sh == a;
    for (int64_t kj = 0; kj < g->kw; kj++) nw += kj * g->dw % g->sw == b;
    d.kp[p] = d.Og * nz * nh * nw; d.k0[p] = ktot; ktot += d.kp[p];
    dx_axis(d.dp.D, d.dp.pd, d.dp.sd, az, &d.nz[p], &d.z0[p]);
    dx_axis(g->H, g->ph, g->sh, a, &d.ni[p], &d.i0[p]);
    dx_axis(g->W, g->pw, g->sw, b, &d.nj[p], &d.j0[p]);
    if (d.nz[p] > zmax) zmax = d.nz[p];
    if (d.ni[p] > imax) imax = d.ni[p];
    if (d.nj[p] > jmax) jmax = d.nj[p];
  }
  /* a row: Qw zeros, then dY's OW; a valid column's read past its row's end lands in the next row's
  ** zeros (Wd >= jmax: at most Qw - 1 past), so the width need not hold both */
  d.Rz = d.Qd + (d.dp.OD > zmax ? d.dp.OD : zmax);
  d.Rd = d.Qh + (g->OH > imax ? g->OH : imax);
  d.Wd = d.Qw + g->OW > jmax ? d.Qw + g->OW : jmax;
  d.gsw = g->sw == 2 ? 2 : 1;
  d.nrb = (d.Cg + FMR - 1) / FMR;
  d.dyp = rt_alloc(mk_dyp_bytes(&d));
  d.off = malloc((size_t)(ktot > 0 ? ktot : 1) * sizeof *d.off);
  d.ap = calloc((size_t)(g->G * d.nrb * d.Og * kk * FMR) + 1, 4);
  if (!d.dyp || !d.off || !d.ap) goto nomem;
  size_t planes = (size_t)(g->N * g->O * d.Rz * d.Rd * d.Wd);
  memset(d.dyp + planes, 0, mk_dyp_bytes(&d) - planes * 4);
  /* the taps of each phase: offsets into dYp and the weights packed by FMR rows of c */
  for (int64_t p = 0; p < d.nph; p++) {
    int64_t az = p / (g->sh * g->sw), a = p / g->sw % g->sh, b = p % g->sw, k = d.k0[p];
    for (int64_t o = 0; o < d.Og; o++)
      for (int64_t t = 0; t < d.dp.kd; t++) {
        if (t * d.dp.dd % d.dp.sd != az) continue;
        for (int64_t ki = 0; ki < g->kh; ki++) {
          if (ki * g->dh % g->sh != a) continue;
          for (int64_t kj = 0; kj < g->kw; kj++) {
            if (kj * g->dw % g->sw != b) continue;
            int64_t qz = t * d.dp.dd / d.dp.sd, qi = ki * g->dh / g->sh, qj = kj * g->dw / g->sw;
            d.off[k] = ((o * d.Rz + d.Qd - qz) * d.Rd + d.Qh - qi) * d.Wd + (d.Qw - qj);
            for (int64_t gi = 0; gi < g->G; gi++)
              for (int64_t c = 0; c < d.Cg; c++)
                d.ap[((gi * d.nrb + c / FMR) * d.Og * kk + k) * FMR + c % FMR] =
                  ((const float *)j->w)[((((gi * d.Og + o) * d.Cg + c) * d.dp.kd + t) * g->kh + ki) * g->kw + kj];
            k++;
          }
        }
      }
  }
  int64_t plane = d.Rz * d.Rd * d.Wd;
  rt_parallel_for(g->N * g->O, 1 + 65536 / (plane > 0 ? plane : 1), dyp_range, &d);
  /* items: (n, g, unit of gsw phases, ppi panels of about 2 M FMAs) */
  int64_t fma = d.Cg * (d.Og * kk / d.nph + 1) * FNR * d.gsw, nun = d.nph / d.gsw;
  d.ppi = 1 + (1 << 21) / (fma > 0 ? fma : 1);
  d.it0[0] = 0;
  for (int64_t un = 0; un < nun; un++) {
    int64_t cols = dx_cols(&d, un * d.gsw) - dx_first(&d, un * d.gsw), panels = cols > 0 ? (cols + FNR - 1) / FNR : 0;
    d.nit[un] = (panels + d.ppi - 1) / d.ppi;
    d.it0[un + 1] = d.it0[un] + d.nit[un];
  }
  rt_parallel_for(g->N * g->G * d.it0[nun], 1, dx_range, &d);
  goto done;
nomem:
  rc = rt_err(TD_ERR_NOMEM, "%s_backward: out of memory", g->kd > 0 ? "conv3d" : "conv2d");
done:
  if (d.dyp) rt_free(d.dyp, mk_dyp_bytes(&d));
  free(d.off); free(d.ap);
  return rc;
}

/* 1: not for this kernel (the caller's im2col + OpenBLAS path runs it) */
int RT_ISA_FN(rt_conv_mk)(const RtConvJob *j)
{
  static int off = -1;                        /* TIDE_CONV_BLAS=1: the OpenBLAS path, for comparison */
  if (off < 0) { const char *e = getenv("TIDE_CONV_BLAS"); off = e && *e && *e != '0'; }
  if (j->dtype != TD_FLOAT32 || off) return 1;
  if (j->kind == RT_CONV_FWD) return mk_fwd(j);
  if (j->kind == RT_CONV_BWD && !j->dx && (j->dw || j->db)) return mk_wgt(j);
  if (j->kind == RT_CONV_BWD && j->dx && !j->dw && !j->db) return mk_dx(j);
  if (j->kind == RT_CONVT_BWD && j->g.kd == 0) return mk_convt_bwd(j);
  return 1;
}

#else
int RT_ISA_FN(rt_conv_mk)(const RtConvJob *j) { (void)j; return 1; }
#endif
