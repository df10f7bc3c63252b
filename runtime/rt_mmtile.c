/*
** rt_mmtile.c -- float32 matmul with a short A (M <= 64 rows) on tide's own
** register tile (rt_tile.h, the x86-64-v4 variant; other ISAs return "not
** applicable" and OpenBLAS runs the product). Runtime stage, called by
** rt_blas.c for single products.
**
** Why: OpenBLAS packs all of B at every call, which a product of a few rows
** cannot amortize: an LSTM step h (32, 256) @ W_hh^T (256, 1024) ran at 85-105
** GFLOP/s there, ~125-150 here. B (either layout: rows contiguous as in
** dG @ W_hh, or stored N x K as in h @ W_hh^T and nn.Linear) is packed into
** K x 48 panels kept in a small cache keyed by the storage's uid, its version
** (bumped by every in-place write), the data pointer, the geometry and the
** layout, so the 64 steps of a sequence pack W_hh once. A key enters the
** cache on its second sighting (a transient operand seen once is not kept);
** storages without a uid (file mappings, blobs, a compiled plan's wrappers:
** their bytes may change without a version bump) are never cached. Uncached,
** a B with contiguous rows is read in place (row k at b + k ldb; only the
** last partial panel copied, zero padded) where that pays, else B is packed
** for the call alone (a cacheable B on its first sighting) or, when B could
** never be cached, the product runs on OpenBLAS. So whether a product runs
** here depends on its shape, layouts and B's storage kind, never on the
** cache's state: panels, rows in place and a fresh pack give the same bits,
** and a product's result is the same on every call.
** A is packed per call by 8 rows. The pool splits the columns into 48-wide
** panels; every output sums its K products in k order in one tile, so results
** do not depend on the thread count. TIDE_MM_BLAS=1 keeps every product on
** OpenBLAS (for comparison).
*/
#include "rt.h"
#include "rt_isa.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PNR 48                                /* panel width: rt_tile.h's FNR */

/* the packed-B cache, shared by the variants (its code is compiled once) */
typedef struct MmPack {
  uint64_t uid, version, tick;
  const float *b;
  int64_t N, K, ldb;
  int btrans;
  float *panels;                              /* [N/48 rounded up][K][48]; NULL: seen once */
  size_t bytes;
  int refs, dead;
} MmPack;
MmPack *rt_mm_pack_get(const RtMmTile *j);    /* the cached panels of j's B, or NULL: not cached */
void rt_mm_pack_put(MmPack *e);
void rt_mm_pack(const RtMmTile *j, float *panels);   /* j's B into panels, on the pool */
int rt_mm_cacheable(const RtMmTile *j);       /* j's B may enter the cache (a property of its storage) */
void rt_mm_tile_count(int64_t tiles);

#if RT_ISA_SHARED

#define NENT 16                               /* cache slots */
#define CACHE_BYTES ((size_t)64 << 20)        /* packed bytes kept, at most */
#define ENT_BYTES ((size_t)16 << 20)          /* a bigger B is not cached */

static pthread_mutex_t pack_mu = PTHREAD_MUTEX_INITIALIZER;
static MmPack *ents[NENT];
static uint64_t ticks;
static size_t held;                           /* panels' bytes in ents */
static int64_t n_tiles, n_packs;              /* products run on the tile, B packs made */

static void ent_free(MmPack *e) { if (e->panels) rt_free(e->panels, e->bytes); free(e); }

/* slot i out of the cache (under pack_mu); freed now or by its last user */
static void ent_drop(int i)
{
  MmPack *e = ents[i];
  ents[i] = NULL;
  if (e->panels) held -= e->bytes;
  if (e->refs) e->dead = 1;
  else ent_free(e);
}

typedef struct { const RtMmTile *j; float *p; } PackJob;

/* panels [p][k][c] = B (k, p 48 + c): b[k ldb + p 48 + c] or (btrans) b[(p 48 + c) ldb + k]; zeros past N */
static void pack_range(void *ctx, int64_t b, int64_t e)
{
  const PackJob *pj = ctx;
  const RtMmTile *j = pj->j;
  for (int64_t p = b; p < e; p++) {
    float *d = pj->p + p * j->K * PNR;
    int64_t nc = j->N - p * PNR < PNR ? j->N - p * PNR : PNR;
    if (!j->btrans) {
      for (int64_t k = 0; k < j->K; k++) {
        memcpy(d + k * PNR, j->b + k * j->ldb + p * PNR, (size_t)nc * 4);
        memset(d + k * PNR + nc, 0, (size_t)(PNR - nc) * 4);
      }
      continue;
    }
    for (int64_t c = 0; c < PNR; c++) {
      int64_t col = p * PNR + c;
      if (col >= j->N) { for (int64_t k = 0; k < j->K; k++) d[k * PNR + c] = 0.0f; continue; }
      const float *s = j->b + col * j->ldb;
      for (int64_t k = 0; k < j->K; k++) d[k * PNR + c] = s[k];
    }
  }
}

void rt_mm_pack(const RtMmTile *j, float *panels)
{
  PackJob pj = { j, panels };
  int64_t per = j->K * PNR;
  rt_parallel_for((j->N + PNR - 1) / PNR, 1 + 65536 / (per > 0 ? per : 1), pack_range, &pj);
}

int rt_mm_cacheable(const RtMmTile *j)
{
  const RtStorage *s = j->bs;
  return s && s->uid && !s->dev && (size_t)((j->N + PNR - 1) / PNR * j->K * PNR) * 4 <= ENT_BYTES;
}

MmPack *rt_mm_pack_get(const RtMmTile *j)
{
  if (!rt_mm_cacheable(j)) return NULL;
  const RtStorage *s = j->bs;
  size_t bytes = (size_t)((j->N + PNR - 1) / PNR * j->K * PNR) * 4;
  uint64_t ver = __atomic_load_n(&s->version, __ATOMIC_RELAXED);
  MmPack *e = NULL;
  int slot = -1;
  pthread_mutex_lock(&pack_mu);
  ticks++;
  for (int i = 0; i < NENT; i++) {
    MmPack *x = ents[i];
    if (!x || x->uid != s->uid || x->b != j->b || x->N != j->N || x->K != j->K || x->ldb != j->ldb ||
        x->btrans != j->btrans)
      continue;
    if (x->version == ver) { e = x; slot = i; break; }
    ent_drop(i);                              /* an older version: versions only grow */
  }
  if (e && e->panels) {                       /* a hit */
    e->refs++; e->tick = ticks;
    pthread_mutex_unlock(&pack_mu);
    return e;
  }
  if (!e) {                                   /* first sighting: remember it, the caller packs this one */
    int lru = -1;
    for (int i = 0; i < NENT && slot < 0; i++) if (!ents[i]) slot = i;
    if (slot < 0) {
      for (int i = 0; i < NENT; i++) if (lru < 0 || ents[i]->tick < ents[lru]->tick) lru = i;
      ent_drop(lru); slot = lru;
    }
    if ((e = calloc(1, sizeof *e))) {
      e->uid = s->uid; e->version = ver; e->b = j->b; e->N = j->N; e->K = j->K; e->ldb = j->ldb; e->btrans = j->btrans; e->tick = ticks;
      ents[slot] = e;
    }
    pthread_mutex_unlock(&pack_mu);
    return NULL;
  }
  /* second sighting: pack (under the lock: a second host thread waits instead of packing too) */
  while (held + bytes > CACHE_BYTES) {
    int lru = -1;
    for (int i = 0; i < NENT; i++)
      if (ents[i] && ents[i]->panels && (lru < 0 || ents[i]->tick < ents[lru]->tick)) lru = i;
    if (lru < 0) break;
    ent_drop(lru);
  }
  float *p = rt_alloc(bytes);
  if (!p) { pthread_mutex_unlock(&pack_mu); return NULL; }
  rt_mm_pack(j, p);
  e->panels = p; e->bytes = bytes; held += bytes; n_packs++;
  e->refs++; e->tick = ticks;
  pthread_mutex_unlock(&pack_mu);
  return e;
}

void rt_mm_pack_put(MmPack *e)
{
  if (!e) return;
  pthread_mutex_lock(&pack_mu);
  if (--e->refs == 0 && e->dead) ent_free(e);
  pthread_mutex_unlock(&pack_mu);
}

void rt_mm_tile_clear(void)
{
  pthread_mutex_lock(&pack_mu);
  for (int i = 0; i < NENT; i++) if (ents[i]) ent_drop(i);
  pthread_mutex_unlock(&pack_mu);
}

__attribute__((destructor)) static void pack_fini(void) { rt_mm_tile_clear(); }

void rt_mm_tile_count(int64_t tiles) { __atomic_add_fetch(&n_tiles, tiles, __ATOMIC_RELAXED); }

TD_API void td_mm_tile_stats(int64_t *products, int64_t *packs)
{
  pthread_mutex_lock(&pack_mu);
  *products = __atomic_load_n(&n_tiles, __ATOMIC_RELAXED); *packs = n_packs;
  pthread_mutex_unlock(&pack_mu);
}

#endif

#if defined(RT_ISA_V4)

#include "rt_tile.h"
_Static_assert(FNR == PNR, "panel width is the tile's");

/* The products it takes (measured against OpenBLAS's SkylakeX kernels, one
** thread, on this machine, loaded): a short A, 2..64 rows (OpenBLAS packs all
** of B for each call, which so few rows cannot amortize), 32 columns or more.
**   B stored N x K (transposed), panels cached: any such product (M 32, N 1024,
**     K 256: ~100 against ~60 GFLOP/s; M 2: 33 against 7);
**   B with contiguous rows, panels cached: from 4 rows and 1 MFLOP (below, the
**     call's overhead loses to OpenBLAS, whose NoTrans kernels start faster);
**   B read in place, uncached: also from 256 columns while its K rows stay in L2
**     (a power-of-two row stride maps them to few cache sets: K 1024 x N 1024
**     in place ran no faster than OpenBLAS). */
#define TILE_MAX_M 64
#define TILE_MIN_N 32
#define ROWS_MIN_M 4
#define ROWS_MIN_FLOP ((int64_t)1 << 20)
#define INPLACE_MIN_N 256
#define INPLACE_MAX_BYTES ((int64_t)1 << 21)

typedef struct {
  const RtMmTile *j;
  float *ap;                                  /* A by FMR rows [rb][k][FMR] */
  const float *bp;                            /* B panels [p][k][FNR]: packed, or NULL: B rows in place */
  float *tail;                                /* in place: the last partial panel, packed */
  int64_t *offb, *offp;                       /* row k of B in place (k ldb), of a panel (k FNR) */
  int64_t nrb;
} Tile;

static void tile_range(void *ctx, int64_t b, int64_t e)
{
  const Tile *t = ctx;
  const RtMmTile *j = t->j;
  int64_t N = j->N, K = j->K;
  float out[FMR * FNR] __attribute__((aligned(64)));
  for (int64_t p = b; p < e; p++) {
    int64_t c0 = p * FNR, nc = N - c0 < FNR ? N - c0 : FNR;
    const float *bb = t->bp ? t->bp + p * K * FNR : nc < FNR ? t->tail : j->b + c0;
    const int64_t *off = t->bp || nc < FNR ? t->offp : t->offb;
    for (int64_t rb = 0; rb < t->nrb; rb++) {
      int64_t r0 = rb * FMR, mr = j->M - r0 < FMR ? j->M - r0 : FMR;
      tile_fwd(K, t->ap + rb * K * FMR, bb, off, out);
      for (int64_t r = 0; r < mr; r++) memcpy(j->c + (r0 + r) * N + c0, out + r * FNR, (size_t)nc * 4);
    }
  }
}

int RT_ISA_FN(rt_mm_tile)(const RtMmTile *j)
{
  static int off = -1;                        /* TIDE_MM_BLAS=1: every product on OpenBLAS */
  if (off < 0) { const char *s = getenv("TIDE_MM_BLAS"); off = s && *s && *s != '0'; }
  if (off || j->M < 2 || j->M > TILE_MAX_M || j->N < TILE_MIN_N || j->K < 1) return 1;
  int64_t M = j->M, N = j->N, K = j->K, np = (N + FNR - 1) / FNR;
  Tile t = { .j = j, .nrb = (M + FMR - 1) / FMR };
  if (!j->btrans && (M < ROWS_MIN_M || 2 * M * N * K < ROWS_MIN_FLOP)) return 1;
  /* B's panels: cached, else B's rows in place where that pays, else packed for this call only */
  MmPack *pk = rt_mm_pack_get(j);
  float *own = NULL;
  size_t own_bytes = (size_t)(np * K * FNR) * 4;
  int inplace = !j->btrans && N >= INPLACE_MIN_N && K * j->ldb * 4 <= INPLACE_MAX_BYTES;
  if (!pk && !inplace && !rt_mm_cacheable(j)) return 1;   /* a pack every call: OpenBLAS does that as fast */
  if (pk) t.bp = pk->panels;
  else if (!inplace) {
    if (!(own = rt_alloc(own_bytes))) return rt_err(TD_ERR_NOMEM, "matmul: out of memory");
    rt_mm_pack(j, own);
    t.bp = own;
  }
  int tail = !t.bp && N % FNR;
  size_t an = (size_t)(t.nrb * K * FMR), tn = tail ? (size_t)(K * FNR) : 0;
  char *scratch = malloc((an + tn) * 4 + (size_t)K * 16);
  if (!scratch) { rt_mm_pack_put(pk); rt_free(own, own_bytes); return rt_err(TD_ERR_NOMEM, "matmul: out of memory"); }
  t.ap = (float *)scratch; t.tail = t.ap + an;
  t.offb = (int64_t *)(t.tail + tn); t.offp = t.offb + K;
  for (int64_t k = 0; k < K; k++) { t.offb[k] = k * j->ldb; t.offp[k] = k * FNR; }
  for (int64_t rb = 0; rb < t.nrb; rb++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t r = 0; r < FMR; r++) {
        int64_t i = rb * FMR + r;
        t.ap[(rb * K + k) * FMR + r] = i < M ? j->a[i * j->ars + k * j->acs] : 0.0f;
      }
  if (tail) {
    int64_t c0 = (np - 1) * FNR, nc = N - c0;
    for (int64_t k = 0; k < K; k++) {
      memcpy(t.tail + k * FNR, j->b + k * j->ldb + c0, (size_t)nc * 4);
      memset(t.tail + k * FNR + nc, 0, (size_t)(FNR - nc) * 4);
    }
  }
  /* items: panels, ~64 K FMAs a chunk at least (a panel is nrb FMR FNR K) */
  int64_t fma = t.nrb * FMR * FNR * K;
  rt_parallel_for(np, 1 + (1 << 16) / (fma > 0 ? fma : 1), tile_range, &t);
  free(scratch);
  rt_mm_pack_put(pk);
  rt_free(own, own_bytes);
  rt_mm_tile_count(1);
  return 0;
}

#else
int RT_ISA_FN(rt_mm_tile)(const RtMmTile *j) { (void)j; return 1; }
#endif
