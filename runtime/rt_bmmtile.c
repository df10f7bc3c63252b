/*
** rt_bmmtile.c -- float32 matmul of mid-size products, batched or not, on a
** 6 x 64 AVX-512 register tile (the x86-64-v4 variant; other ISAs answer "not
** applicable" and OpenBLAS runs the products). Runtime stage, called by
** rt_blas.c for what rt_mmtile.c (short A) does not take.
**
** Why: attention-shaped contractions (einsum "bhqd,bhkd->bhqk", (256 x 64) @
** (64 x 256), and "bhqk,bhkd->bhqd", (256 x 256) @ (256 x 64), 64 of them)
** went to OpenBLAS one product at a time, which zeroes C before it writes it
** (beta = 0) and packs both operands per call; rt_tile.h's 48-wide panels
** fill N = 64 badly. Here:
**   C (M,N) = A (M,K) @ B (K,N), per batch entry and 64-column panel of C:
**   B's panel rows k0..k0+kc packed [k][64] (any layout: rows, transposed
**   through 16 x 16 transposes, strided; zeros past N) or read in place when
**   its rows are already 64 floats apart; A read in place through any
**   strides (each step broadcasts A(i, k) for 6 rows i: rows, A stored
**   transposed, a broadcast gradient of stride 0); a tile of 6 rows x 64
**   columns (24 zmm accumulators) runs its kc steps, its rows written to C.
** K is cut into chunks (a packed one stays in L1); a later chunk starts from
** the C the earlier ones wrote, so every output still sums its K products in
** k order, in one chain of FMAs: the result does not depend on the cut, the
** thread count or the split of the work. Items (batch entries x panels, x
** row groups where those are few) are claimed by the pool's threads from a
** counter. Prefetches: C's lines at a tile's start, A's lines ahead in k and
** the next tile's first ones, the next item's B into L2 while a panel runs.
*/
#include "rt.h"
#include "rt_isa.h"
#include <stdlib.h>
#include <string.h>

#if RT_ISA_SHARED
static int64_t n_bmm;                         /* batched calls run here */
void rt_bmm_tile_count(void) { __atomic_add_fetch(&n_bmm, 1, __ATOMIC_RELAXED); }
TD_API int64_t td_bmm_tile_calls(void) { return __atomic_load_n(&n_bmm, __ATOMIC_RELAXED); }
#else
void rt_bmm_tile_count(void);
#endif

#if defined(RT_ISA_V4)

#include <immintrin.h>

#define PV 4                                  /* panel width in vectors */
#define PW (PV * 16)                          /* panel width: 64 columns */
#define RM 6                                  /* tile rows: 6 x 4 = 24 accumulators */
#define PFD 32                                /* A prefetch distance, in k steps */
#define KC_MAX 128                            /* K steps per packed chunk: 128 x 64 floats = 32 KiB */
#define KC_INPLACE 512                        /* K steps per chunk of a B read in place */

/* C rows r < R, vectors v < NV of a tile: C (or, load, C plus) sum_k A(r, k) Bp[k][v], A(r, k)
** at a[r ars + k acs] (any strides: rows, transposed, broadcast), Bp's rows NV vectors long. */
static inline __attribute__((always_inline)) void bt_tile(const int R, const int NV, int64_t kc, const float *a,
                                                          int64_t ars, int64_t acs, const float *bp, float *c,
                                                          int64_t ldc, int load, __mmask16 last)
{
  const int64_t pw = NV * 16;
  __m512 acc[RM][PV];
  if (!load)                                  /* C's lines on their way while the tile runs (BLIS does so) */
    for (int r = 0; r < R; r++)
      for (int v = 0; v < NV; v++) _mm_prefetch((const char *)(c + r * ldc + v * 16), _MM_HINT_T0);
  if (acs == 1)                               /* the next tile's rows: their first PFD steps (the k loop fetches on) */
    for (int r = R; r < 2 * R; r++)
      for (int i = 0; i < PFD; i += 16) _mm_prefetch((const char *)(a + r * ars + i), _MM_HINT_T0);
  for (int r = 0; r < R; r++)
    for (int v = 0; v < NV; v++)
      acc[r][v] = !load ? _mm512_setzero_ps()
                : v < NV - 1 ? _mm512_loadu_ps(c + r * ldc + v * 16) : _mm512_maskz_loadu_ps(last, c + r * ldc + v * 16);
#define BT_STEP(k) do { \
    __m512 bv[PV]; \
    for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(bp + (k) * pw + v * 16); \
    for (int r = 0; r < R; r++) { \
      __m512 x = _mm512_set1_ps(a[r * ars + (k) * acs]); \
      for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]); \
    } } while (0)
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    /* A streams in: fetch PFD steps ahead (A's rows: a line a row per 16 steps; A transposed: a line a step) */
    if (acs == 1) for (int r = 0; r < R; r++) _mm_prefetch((const char *)(a + r * ars + k + PFD), _MM_HINT_T0);
    else if (ars == 1) for (int i = 0; i < 16; i++) _mm_prefetch((const char *)(a + (k + PFD + i) * acs), _MM_HINT_T0);
    for (int64_t kk = k; kk < k + 16; kk++) BT_STEP(kk);
  }
  for (; k < kc; k++) BT_STEP(k);
#undef BT_STEP
  for (int r = 0; r < R; r++)
    for (int v = 0; v < NV; v++) {
      if (v < NV - 1) _mm512_storeu_ps(c + r * ldc + v * 16, acc[r][v]);
      else _mm512_mask_storeu_ps(c + r * ldc + v * 16, last, acc[r][v]);
    }
}

/* nblk tiles of R rows down the panel, one call */
typedef void (*TileFn)(int64_t nblk, int64_t kc, const float *a, int64_t ars, int64_t acs, const float *bp, float *c,
                       int64_t ldc, int load, __mmask16 last);
#define BT_FN(R, NV) \
  static void bt_##R##_##NV(int64_t nblk, int64_t kc, const float *a, int64_t ars, int64_t acs, const float *bp, \
                            float *c, int64_t ldc, int load, __mmask16 last) \
  { for (int64_t i = 0; i < nblk; i++) bt_tile(R, NV, kc, a + i * R * ars, ars, acs, bp, c + i * R * ldc, ldc, load, last); }
#define BT_ROW(R) BT_FN(R, 1) BT_FN(R, 2) BT_FN(R, 3) BT_FN(R, 4)
BT_ROW(1) BT_ROW(2) BT_ROW(3) BT_ROW(4) BT_ROW(5) BT_ROW(6)
#define BT_ENT(R) { bt_##R##_1, bt_##R##_2, bt_##R##_3, bt_##R##_4 }
static const TileFn bt_fns[RM][PV] = { BT_ENT(1), BT_ENT(2), BT_ENT(3), BT_ENT(4), BT_ENT(5), BT_ENT(6) };
_Static_assert(RM == 6 && PV == 4, "bt_fns lists RM x PV tiles");

typedef struct {
  const RtBmmTile *j;
  int64_t np, nk, kc;                         /* panels of C, K chunks and their length */
  int64_t ng, gr;                             /* row groups per panel and their rows (a multiple of RM) */
  int64_t items, unit;                        /* work items, claimed `unit` at a time */
  int64_t next;                               /* atomic: the next unclaimed item */
  int failed;                                 /* atomic: a chunk found no memory for its panel buffer */
} Bmm;

/* 16 x 16 transpose: out[i] = column i of the rows in[0..15] */
static inline __attribute__((always_inline)) void bt_t16(__m512 r[16])
{
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 8; i++) {
    int lo = (i / 4) * 8 + i % 4;
    t[lo] = _mm512_shuffle_f32x4(r[lo], r[lo + 4], 0x88);
    t[lo + 4] = _mm512_shuffle_f32x4(r[lo], r[lo + 4], 0xdd);
  }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

/* dst [k][pw] = B (k0 + k, c0 + c) for k < kc, c < nc; zeros for nc <= c < pw */
static void bt_pack(const float *B, int64_t brs, int64_t bcs, int64_t k0, int64_t kc, int64_t c0, int64_t nc,
                    int64_t pw, float *dst)
{
  if (bcs == 1) {                             /* B's rows: copied a vector at a time, zeros past nc */
    int nv = (int)(pw / 16);
    __mmask16 last = (__mmask16)((1u << (nc - (nv - 1) * 16)) - 1);
    for (int64_t k = 0; k < kc; k++) {
      const float *s = B + (k0 + k) * brs + c0;
      for (int v = 0; v < nv - 1; v++) _mm512_store_ps(dst + k * pw + v * 16, _mm512_loadu_ps(s + v * 16));
      _mm512_store_ps(dst + k * pw + (nv - 1) * 16, _mm512_maskz_loadu_ps(last, s + (nv - 1) * 16));
    }
    return;
  }
  if (brs == 1) {                             /* B stored N x K: 16 x 16 blocks transposed */
    for (int64_t cb = 0; cb < pw; cb += 16)
      for (int64_t kb = 0; kb < kc; kb += 16) {
        int64_t nk = kc - kb < 16 ? kc - kb : 16;
        __mmask16 km = (__mmask16)((1u << nk) - 1);
        __m512 r[16];
        for (int i = 0; i < 16; i++)
          r[i] = cb + i < nc ? _mm512_maskz_loadu_ps(km, B + (c0 + cb + i) * bcs + k0 + kb) : _mm512_setzero_ps();
        bt_t16(r);
        for (int i = 0; i < nk; i++) _mm512_store_ps(dst + (kb + i) * pw + cb, r[i]);
      }
    return;
  }
  for (int64_t c = 0; c < nc; c++) {          /* strided: column by column */
    const float *s = B + (c0 + c) * bcs + k0 * brs;
    for (int64_t k = 0; k < kc; k++) dst[k * pw + c] = s[k * brs];
  }
  if (nc < pw)
    for (int64_t k = 0; k < kc; k++) memset(dst + k * pw + nc, 0, (size_t)(pw - nc) * 4);
}

/* item it's B operand as bt_range sees it: the batch entry's B, the panel's first column and width */
static const float *bt_item_b(const Bmm *m, int64_t it, int64_t *c0, int64_t *nc)
{
  const RtMmGeom *g = m->j->g;
  int64_t oa, ob;
  rt_mm_batch_off(g, it / (m->np * m->ng), &oa, &ob);
  *c0 = it / m->ng % m->np * PW;
  *nc = g->N - *c0 < PW ? g->N - *c0 : PW;
  return m->j->b + ob;
}

/* the lines of item it's first K chunk of B into L2 while this item's tiles run (B rows or
** columns of a packed panel come from memory; the tiles' loads keep L1 to themselves) */
static void bt_prefetch_b(const Bmm *m, int64_t it)
{
  const RtBmmTile *j = m->j;
  int64_t c0, nc, kc = m->kc;
  const float *B = bt_item_b(m, it, &c0, &nc);
  if (j->brs == 1)
    for (int64_t c = 0; c < nc; c++)
      for (int64_t i = 0; i < kc; i += 16) _mm_prefetch((const char *)(B + (c0 + c) * j->bcs + i), _MM_HINT_T1);
  else if (j->bcs == 1)
    for (int64_t k = 0; k < kc; k++)
      for (int64_t i = 0; i < nc; i += 16) _mm_prefetch((const char *)(B + k * j->brs + c0 + i), _MM_HINT_T1);
}

/* first item of the next claim, or m->items: none left */
static int64_t bt_claim(Bmm *m) { return __atomic_fetch_add(&m->next, m->unit, __ATOMIC_RELAXED); }

/* One of the pool's chunks: the items are claimed from a shared counter rather than
** taken as the chunk's range, so a thread the host preempts holds back no fixed
** share of the work (which thread runs an item never changes its bits). */
static void bt_range(void *ctx, int64_t b, int64_t e)
{
  Bmm *m = ctx;
  const RtBmmTile *j = m->j;
  const RtMmGeom *g = j->g;
  int64_t M = g->M, N = g->N, K = g->K;
  (void)b; (void)e;
  /* the packed panel: from the heap (32 KiB would crowd a host thread's small stack) */
  float *buf = aligned_alloc(64, KC_MAX * PW * sizeof(float));
  if (!buf) { __atomic_store_n(&m->failed, 1, __ATOMIC_RELAXED); __atomic_store_n(&m->next, m->items, __ATOMIC_RELAXED); return; }
  int64_t it = bt_claim(m), end = it + m->unit;
  while (it < m->items) {
    int64_t nxt = it + 1;                     /* the item after this one, claimed ahead (its B is prefetched) */
    if (nxt >= end) { nxt = bt_claim(m); end = nxt + m->unit; }
    if (end > m->items) end = m->items;
    int64_t bi = it / (m->np * m->ng), p = it / m->ng % m->np, r1 = (it % m->ng + 1) * m->gr, oa, ob;
    if (r1 > M) r1 = M;
    rt_mm_batch_off(g, bi, &oa, &ob);
    const float *A = j->a + oa, *B = j->b + ob;
    float *C = j->c + bi * M * N;
    int64_t c0 = p * PW, nc = N - c0 < PW ? N - c0 : PW;
    int nv = (int)((nc + 15) / 16);
    int64_t pw = nv * 16;
    __mmask16 last = (__mmask16)((1u << (nc - (nv - 1) * 16)) - 1);
    for (int64_t kb = 0; kb < m->nk; kb++) {
      int64_t k0 = kb * m->kc, kc = K - k0 < m->kc ? K - k0 : m->kc;
      /* B's panel: in place where its rows are already pw contiguous floats apart, else packed */
      const float *bp = buf;
      if (j->bcs == 1 && j->brs == pw && nc == pw) bp = B + k0 * pw + c0;
      else {
        bt_pack(B, j->brs, j->bcs, k0, kc, c0, nc, pw, buf);
        if (kb == 0 && nxt < m->items) bt_prefetch_b(m, nxt);
      }
      int64_t r0 = it % m->ng * m->gr, full = (r1 - r0) / RM, R = (r1 - r0) % RM;
      const float *a0 = A + k0 * j->acs;
      if (full) bt_fns[RM - 1][nv - 1](full, kc, a0 + r0 * j->ars, j->ars, j->acs, bp, C + r0 * N + c0, N, kb > 0, last);
      r0 += full * RM;
      if (R) bt_fns[R - 1][nv - 1](1, kc, a0 + r0 * j->ars, j->ars, j->acs, bp, C + r0 * N + c0, N, kb > 0, last);
    }
    it = nxt;
  }
  free(buf);
}

/* The products it takes, measured against OpenBLAS's SkylakeX kernels on this
** machine, one thread (bench/RESULTS.md, session 22): from 1 M multiply-adds a
** product (0.75-0.9x OpenBLAS's time: the attention shapes, 128^3, K up to 8192;
** below, 64^3 and 32^3 batches ran 1.15-1.25x, OpenBLAS's kernels start faster),
** 16 rows and 32 columns at least; when C has more than one panel, A is read
** again for each: an A of 1 MiB at most (L2) or 512 rows at most (1024^3 ran
** 1.1-1.2x, 2048 x 256 x 256 1.09x; 256 x 8192 x 256 0.75x), and an A stored
** transposed (a line of it a step) only up to K 64 (K 256-1024: 0.95-1.10x).
** TIDE_BMM_TILE=1 takes every product (for measuring). */
#define BMM_MIN_MNK ((int64_t)1 << 20)
#define BMM_MAX_A_BYTES ((int64_t)1 << 20)
#define BMM_MAX_A_ROWS 512
static int bmm_takes(const RtMmGeom *g, int64_t ars, int64_t acs)
{
  static int force = -1;
  if (force < 0) { const char *s = getenv("TIDE_BMM_TILE"); force = s && *s && *s != '0'; }
  if (force) return 1;
  return g->M >= 16 && g->N >= 32 && g->M * g->N * g->K >= BMM_MIN_MNK &&
         (g->N <= PW || ((g->M * g->K * 4 <= BMM_MAX_A_BYTES || g->M <= BMM_MAX_A_ROWS) &&
                          (ars != 1 || acs == 1 || g->K <= 64)));
}

int RT_ISA_FN(rt_bmm_tile)(const RtBmmTile *j)
{
  static int off = -1;                        /* TIDE_MM_BLAS=1: every product on OpenBLAS */
  if (off < 0) { const char *s = getenv("TIDE_MM_BLAS"); off = s && *s && *s != '0'; }
  const RtMmGeom *g = j->g;
  if (off || g->M < 1 || g->N < 1 || g->K < 1 || !bmm_takes(g, j->ars, j->acs)) return 1;
  /* B read in place (every panel's rows PW floats apart) needs no buffer: longer chunks */
  int64_t kcmax = j->bcs == 1 && j->brs == PW && g->N % PW == 0 ? KC_INPLACE : KC_MAX;
  Bmm m = { .j = j, .np = (g->N + PW - 1) / PW, .nk = (g->K + kcmax - 1) / kcmax };
  m.kc = (g->K + m.nk - 1) / m.nk;
  /* items: batch entries x panels, and rows cut into groups where those are fewer than 2 a thread
  ** (any cut gives the same bits: an output's sum never depends on its neighbours) */
  int64_t items = g->nbatch * m.np, rb = (g->M + RM - 1) / RM, want = 2 * rt_num_threads();
  m.ng = items >= want ? 1 : (want + items - 1) / items;
  if (m.ng > rb / 2) m.ng = rb / 2 > 1 ? rb / 2 : 1;
  m.gr = (rb + m.ng - 1) / m.ng * RM;
  m.ng = (g->M + m.gr - 1) / m.gr;
  items *= m.ng;
  /* claims: a batch entry's items at a time (its A stays in this core's L2) while there are
  ** 4 entries a thread or more, else single items */
  m.items = items;
  m.unit = g->nbatch >= 4 * rt_num_threads() ? m.np * m.ng : 1;
  int64_t fma = m.gr * PW * g->K;
  rt_parallel_for(items, 1 + ((int64_t)1 << 18) / (fma > 0 ? fma : 1), bt_range, &m);
  if (m.failed) return rt_err(TD_ERR_NOMEM, "matmul: out of memory");
  rt_bmm_tile_count();
  return 0;
}

#else
int RT_ISA_FN(rt_bmm_tile)(const RtBmmTile *j) { (void)j; return 1; }
#endif
