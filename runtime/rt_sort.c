/*
** rt_sort.c -- sorting and searching (op table kind SORT): sort (the stable
** permutation), topk / kthvalue / median / nanmedian (selection), mode and
** searchsorted, plus td_unique. Results are 0-based int64 indices; the Lua
** layer gathers the values, so their gradient is gather's: scattered back to
** these indices.
*/
#include "rt.h"
#include <stdlib.h>
#include <string.h>

/* -- Design note ---------------------------------------------------------------------------
**
** Keys. Every dtype maps to an unsigned key whose integer order is the sort
** order: floats flip their sign bit (all bits when negative), -0.0 becomes
** +0.0 and every NaN one key above +inf, so NaN sorts last as in PyTorch and
** equal values are equal keys; signed integers flip the sign bit. Descending
** order is the complemented key, so one ascending sort serves both and ties
** keep their index order in both (PyTorch's stable sort, descending too).
**
** The total order is (key, index): sort is an LSD radix sort on 8-bit digits
** (stable, so ties stay in index order; digits every key shares are skipped),
** and selection (topk, kthvalue, median, mode) picks by the same order, so
** the k-th element and its index equal the stable sort's and no result
** depends on the thread count. Rows (a position of the other dims) run in
** parallel on the runtime's pool; topk of a few long rows splits each row into
** chunks, keeps each chunk's k best, and merges them by the same order.
*/

#define SORT_SMALL 32          /* rows this short: insertion sort */
#define SORT_GRAIN 65536       /* elements per parallel chunk, at least */

/* -- Keys ----------------------------------------------------------------------------------- */

static inline uint32_t key_f32(float f)
{
  if (f != f) return 0xFFFFFFFFu;
  if (f == 0) f = 0;
  uint32_t u; memcpy(&u, &f, 4);
  return u ^ ((u >> 31) ? 0xFFFFFFFFu : 0x80000000u);
}

/* the float of a key (NaN for the NaN key) */
static inline float f32_of_key(uint32_t u)
{
  u = (u & 0x80000000u) ? u ^ 0x80000000u : ~u;
  float f; memcpy(&f, &u, 4);
  return f;
}

static inline uint64_t key_f64(double f)
{
  if (f != f) return ~0ull;
  if (f == 0) f = 0;
  uint64_t u; memcpy(&u, &f, 8);
  return u ^ ((u >> 63) ? ~0ull : 1ull << 63);
}

/* the key of element at (element) offset off of x, dtype dt, widened to 64 bits */
static inline uint64_t key_at(const char *x, int dt, int64_t off)
{
  switch (dt) {
  case TD_FLOAT32: return key_f32(((const float *)x)[off]);
  case TD_FLOAT64: return key_f64(((const double *)x)[off]);
  case TD_INT32: return (uint32_t)((const int32_t *)x)[off] ^ 0x80000000u;
  case TD_INT64: return (uint64_t)((const int64_t *)x)[off] ^ (1ull << 63);
  default: return ((const uint8_t *)x)[off];
  }
}

static inline bool key_wide(int dt) { return dt == TD_FLOAT64 || dt == TD_INT64; }
/* the NaN key of a float dtype (no other value has it) */
static inline uint64_t key_nan(int dt) { return dt == TD_FLOAT32 ? 0xFFFFFFFFu : ~0ull; }

/* -- Radix sort of (key, index) pairs ------------------------------------------------------- */

/* Sorts n pairs (k[i], v[i]) by key, stably, using k2/v2 as scratch; returns
** which buffer holds the result (0: k/v, 1: k2/v2). W: key bits. */
#define DEF_RADIX(W, KT) \
  static int radix##W(KT *k, uint32_t *v, KT *k2, uint32_t *v2, int64_t n) \
  { \
    if (n <= SORT_SMALL) { \
      for (int64_t i = 1; i < n; i++) { \
        KT kk = k[i]; uint32_t vv = v[i]; int64_t j = i; \
        for (; j > 0 && k[j - 1] > kk; j--) { k[j] = k[j - 1]; v[j] = v[j - 1]; } \
        k[j] = kk; v[j] = vv; \
      } \
      return 0; \
    } \
    enum { P = W / 8 }; \
    uint32_t cnt[P][256]; \
    memset(cnt, 0, sizeof cnt); \
    for (int64_t i = 0; i < n; i++) { \
      KT x = k[i]; \
      for (int b = 0; b < P; b++) cnt[b][(x >> (8 * b)) & 255]++; \
    } \
    int which = 0; \
    for (int b = 0; b < P; b++) { \
      uint32_t *c = cnt[b]; \
      if (c[(k[0] >> (8 * b)) & 255] == (uint32_t)n) continue;   /* every key shares this digit */ \
      uint32_t s = 0; \
      for (int d = 0; d < 256; d++) { uint32_t t = c[d]; c[d] = s; s += t; } \
      for (int64_t i = 0; i < n; i++) { \
        uint32_t p = c[(k[i] >> (8 * b)) & 255]++; \
        k2[p] = k[i]; v2[p] = v[i]; \
      } \
      KT *tk = k; k = k2; k2 = tk; \
      uint32_t *tv = v; v = v2; v2 = tv; \
      which ^= 1; \
    } \
    return which; \
  }
DEF_RADIX(32, uint32_t)
DEF_RADIX(64, uint64_t)

/* -- Rows ------------------------------------------------------------------------------------ */

/* x seen as (outer, n, inner) around the sorted dim; a row is one (o, i). */
typedef struct {
  const char *x; int dt;
  int64_t outer, n, inner;
  bool desc;
  int64_t *out; int64_t on;      /* out as (outer, on, inner) */
  int mode; int64_t k;           /* SORT_* below */
  int fail;                      /* set when scratch memory ran out */
} SortJob;

enum { SORT_FULL, SORT_TOPK, SORT_KTH, SORT_MEDIAN, SORT_NANMEDIAN, SORT_MODE };

static inline int64_t row_base(const SortJob *j, int64_t p, int64_t len)
{
  return (p / j->inner) * len * j->inner + p % j->inner;
}

/* Scratch for one row: two key and two index buffers. */
typedef struct { void *k, *k2; uint32_t *v, *v2; } Scratch;

static bool scratch_get(Scratch *s, int64_t n, bool wide)
{
  size_t kb = (size_t)(n ? n : 1) * (wide ? 8 : 4), vb = (size_t)(n ? n : 1) * 4;
  s->k = malloc(kb); s->k2 = malloc(kb); s->v = malloc(vb); s->v2 = malloc(vb);
  return s->k && s->k2 && s->v && s->v2;
}
static void scratch_free(Scratch *s) { free(s->k); free(s->k2); free(s->v); free(s->v2); }

/* Sort row p into s: returns the buffer index holding (keys, indices). */
static int row_sort(const SortJob *j, int64_t p, Scratch *s)
{
  int64_t n = j->n, base = row_base(j, p, n), st = j->inner;
  uint64_t flip = j->desc ? ~0ull : 0;
  if (key_wide(j->dt)) {
    uint64_t *k = s->k;
    for (int64_t i = 0; i < n; i++) { k[i] = key_at(j->x, j->dt, base + i * st) ^ flip; s->v[i] = (uint32_t)i; }
    return radix64(k, s->v, s->k2, s->v2, n);
  }
  uint32_t *k = s->k, f32 = (uint32_t)flip;
  if (j->dt == TD_FLOAT32 && st == 1) {
    const float *r = (const float *)j->x + base;
    for (int64_t i = 0; i < n; i++) { k[i] = key_f32(r[i]) ^ f32; s->v[i] = (uint32_t)i; }
  } else
    for (int64_t i = 0; i < n; i++) { k[i] = (uint32_t)(key_at(j->x, j->dt, base + i * st) ^ flip); s->v[i] = (uint32_t)i; }
  return radix32(k, s->v, s->k2, s->v2, n);
}

static inline uint64_t kget(const void *k, bool wide, int64_t i)
{
  return wide ? ((const uint64_t *)k)[i] : ((const uint32_t *)k)[i];
}

/* The result of one sorted row: the permutation, its first k, the k-th, the median or the mode. */
static void row_finish(SortJob *j, int64_t p, const void *k, const uint32_t *v)
{
  int64_t n = j->n, ob = row_base(j, p, j->on), st = j->inner;
  bool wide = key_wide(j->dt);
  int64_t pos = 0;
  switch (j->mode) {
  case SORT_FULL: case SORT_TOPK:
    for (int64_t i = 0; i < j->on; i++) j->out[ob + i * st] = v[i];
    return;
  case SORT_KTH: pos = j->k - 1; break;
  case SORT_MEDIAN: case SORT_NANMEDIAN: {
    int64_t nnan = 0;
    if (rt_is_float(j->dt))
      while (nnan < n && kget(k, wide, n - 1 - nnan) == key_nan(j->dt)) nnan++;
    int64_t m = n - nnan;
    /* the lower median; median: the first NaN if there is one */
    pos = j->mode == SORT_MEDIAN ? (nnan ? m : (n - 1) / 2) : (m ? (m - 1) / 2 : 0);
    break;
  }
  case SORT_MODE: {
    /* the longest run of equal keys, the first (smallest value) on ties; its last index */
    int64_t best = 0, blen = 0;
    for (int64_t a = 0; a < n;) {
      int64_t b = a + 1;
      uint64_t ka = kget(k, wide, a);
      while (b < n && kget(k, wide, b) == ka) b++;
      if (b - a > blen) { blen = b - a; best = b - 1; }
      a = b;
    }
    pos = best;
    break;
  }
  }
  j->out[ob] = v[pos];
}

static void sort_rows(void *ctx, int64_t b, int64_t e)
{
  SortJob *j = ctx;
  Scratch s;
  if (!scratch_get(&s, j->n, key_wide(j->dt))) { scratch_free(&s); __atomic_store_n(&j->fail, 1, __ATOMIC_RELAXED); return; }
  for (int64_t p = b; p < e; p++) {
    int w = row_sort(j, p, &s);
    row_finish(j, p, w ? s.k2 : s.k, w ? s.v2 : s.v);
  }
  scratch_free(&s);
}

/* -- Selection of the k best ---------------------------------------------------------------- */

typedef struct { uint64_t k; int64_t i; } Pair;

/* a before b in the total order (key, index) */
static inline bool pair_lt(Pair a, Pair b) { return a.k < b.k || (a.k == b.k && a.i < b.i); }

static int pair_cmp(const void *a, const void *b)
{
  Pair x = *(const Pair *)a, y = *(const Pair *)b;
  return pair_lt(x, y) ? -1 : pair_lt(y, x) ? 1 : 0;
}

/* h: a max-heap (by the total order) of the m best pairs seen so far, m <= k */
static inline void heap_push(Pair *h, int64_t *m, int64_t k, Pair x)
{
  int64_t i;
  if (*m < k) {
    i = (*m)++;
    while (i > 0 && pair_lt(h[(i - 1) / 2], x)) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = x;
    return;
  }
  if (!pair_lt(x, h[0])) return;
  i = 0;                                             /* replace the worst and sift down */
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= k) break;
    if (c + 1 < k && pair_lt(h[c], h[c + 1])) c++;
    if (!pair_lt(x, h[c])) break;
    h[i] = h[c]; i = c;
  }
  h[i] = x;
}

/* the k best of elements [a, b) of row p into h (sorted); returns how many.
** One loop per dtype: most elements fail the first comparison with the worst
** kept key and cost a load, a key and a branch. */
#define TOPK_SCAN(KEY) \
  for (int64_t i = a; i < b; i++) { \
    uint64_t key = (KEY) ^ flip; \
    if (m == k && key >= h[0].k) continue;           /* later indices lose ties */ \
    heap_push(h, &m, k, (Pair){ key, i }); \
  }
static int64_t topk_range(const SortJob *j, int64_t p, int64_t a, int64_t b, Pair *h)
{
  int64_t base = row_base(j, p, j->n), st = j->inner, m = 0, k = j->k;
  uint64_t flip = j->desc ? ~0ull : 0;
  const char *x = j->x;
  if (j->dt == TD_FLOAT32 && st == 1) {
    /* a float comparison with the worst kept value first: no key for most elements
    ** (NaN and equal values fail it and take the exact path) */
    const float *r = (const float *)x + base;
    float worst = 0;
    for (int64_t i = a; i < b; i++) {
      float v = r[i];
      if (m == k && (j->desc ? v < worst : v > worst)) continue;
      uint64_t key = key_f32(v) ^ flip;
      if (m == k && key >= h[0].k) continue;
      heap_push(h, &m, k, (Pair){ key, i });
      if (m == k) worst = f32_of_key((uint32_t)(h[0].k ^ flip));
    }
  } else if (j->dt == TD_FLOAT64 && st == 1) {
    const double *r = (const double *)x + base;
    TOPK_SCAN(key_f64(r[i]))
  } else {
    TOPK_SCAN(key_at(x, j->dt, base + i * st))
  }
  qsort(h, (size_t)m, sizeof *h, pair_cmp);
  return m;
}

static void topk_rows(void *ctx, int64_t b, int64_t e)
{
  SortJob *j = ctx;
  Pair *h = malloc((size_t)(j->k ? j->k : 1) * sizeof *h);
  if (!h) { __atomic_store_n(&j->fail, 1, __ATOMIC_RELAXED); return; }
  for (int64_t p = b; p < e; p++) {
    int64_t m = topk_range(j, p, 0, j->n, h), ob = row_base(j, p, j->on);
    for (int64_t i = 0; i < m; i++) j->out[ob + i * j->inner] = h[i].i;
  }
  free(h);
}

/* one long row in chunks: chunk c's k best into cand[c * k ...] */
typedef struct { SortJob *j; int64_t p, chunk; Pair *cand; int64_t *cnt; } TopkChunks;

static void topk_chunks(void *ctx, int64_t b, int64_t e)
{
  TopkChunks *t = ctx;
  for (int64_t c = b; c < e; c++) {
    int64_t a = c * t->chunk, z = a + t->chunk < t->j->n ? a + t->chunk : t->j->n;
    t->cnt[c] = topk_range(t->j, t->p, a, z, t->cand + c * t->j->k);
  }
}

static int topk_long_row(SortJob *j, int64_t p)
{
  int64_t nc = (j->n + SORT_GRAIN - 1) / SORT_GRAIN, k = j->k;
  if (nc > 4 * (int64_t)rt_num_threads()) nc = 4 * (int64_t)rt_num_threads();
  TopkChunks t = { j, p, (j->n + nc - 1) / nc, malloc((size_t)(nc * k) * sizeof(Pair)), malloc((size_t)nc * sizeof(int64_t)) };
  Pair *h = malloc((size_t)k * sizeof *h);
  int rc = 0;
  if (!t.cand || !t.cnt || !h) rc = rt_err(TD_ERR_NOMEM, "topk: out of memory for %lld candidates", (long long)(nc * k));
  else {
    rt_parallel_for(nc, 1, topk_chunks, &t);
    int64_t m = 0;
    for (int64_t c = 0; c < nc; c++)
      for (int64_t i = 0; i < t.cnt[c]; i++) heap_push(h, &m, k, t.cand[c * k + i]);
    qsort(h, (size_t)m, sizeof *h, pair_cmp);
    int64_t ob = row_base(j, p, j->on);
    for (int64_t i = 0; i < m; i++) j->out[ob + i * j->inner] = h[i].i;
  }
  free(t.cand); free(t.cnt); free(h);
  return rc;
}

/* -- Meta rules and kernels ------------------------------------------------------------------ */

static int sort_geo(const char *op, RtCall *c, int64_t *dim, int64_t *outer, int64_t *n, int64_t *inner)
{
  const td_tensor *x = c->in[0];
  if (rt_wrap_dim(op, dim, x->ndim)) return TD_ERR_INDEX;
  *outer = 1; *inner = 1; *n = x->ndim ? x->sizes[*dim] : 1;
  for (int d = 0; d < x->ndim; d++) { if (d < *dim) *outer *= x->sizes[d]; else if (d > *dim) *inner *= x->sizes[d]; }
  if (*n >= (int64_t)1 << 32)
    return rt_err(TD_ERR_SHAPE, "%s: dim %lld of size %lld is too long to sort (at most 2^32 - 1)",
                  op, (long long)*dim + 1, (long long)*n);
  return 0;
}

/* sort: attrs.i[0] dim, flags bit 0 descending -> the stable permutation, x's shape */
int rt_meta_sort(RtCall *c)
{
  int64_t o, n, i;
  if (sort_geo(rt_op_lname(c->op), c, &c->attrs.i[0], &o, &n, &i)) return TD_ERR_INDEX;
  c->ndim = c->in[0]->ndim; memcpy(c->sizes, c->in[0]->sizes, sizeof c->sizes);
  return 0;
}

/* topk: attrs.i[0] dim, i[1] k, i[2] mode (0 topk, 1 kth, 2 median, 3 nanmedian),
** flags bit 0 largest -> k indices (modes 1-3: one) along dim; mode: one index */
int rt_meta_topk(RtCall *c)
{
  const char *op = rt_op_lname(c->op);
  int64_t o, n, i, k = c->attrs.i[1];
  if (sort_geo(op, c, &c->attrs.i[0], &o, &n, &i)) return TD_ERR_INDEX;
  int dim = (int)c->attrs.i[0];
  int mode = c->op == RT_OP_MODE ? 1 : (int)c->attrs.i[2];
  if (c->op == RT_OP_MODE) k = 1;
  if (mode < 0 || mode > 3) return rt_err(TD_ERR_ARG, "%s: invalid selection mode %d", op, mode);
  if (mode == 0 && (k < 0 || k > n))
    return rt_err(TD_ERR_ARG, "topk: k (%lld) is out of range for dim %d of size %lld", (long long)k, dim + 1, (long long)n);
  if (mode == 1 && (k < 1 || k > n))
    return rt_err(TD_ERR_ARG, "kthvalue: k (%lld) is out of range for dim %d of size %lld", (long long)k, dim + 1, (long long)n);
  if (mode > 0 && n == 0)
    return rt_err(TD_ERR_ARG, "%s: dim %d is empty", op, dim + 1);
  c->ndim = c->in[0]->ndim; memcpy(c->sizes, c->in[0]->sizes, sizeof c->sizes);
  if (c->ndim) c->sizes[dim] = mode == 0 ? k : 1;
  return 0;
}
int rt_meta_mode(RtCall *c) { return rt_meta_topk(c); }

static int sort_run(RtCall *c, td_tensor *out, int mode)
{
  td_tensor *x = rt_as_contig(c->in[0]);
  if (!x) return TD_ERR_NOMEM;
  SortJob j = { .x = rt_ptr(x), .dt = x->scalar_type, .desc = c->attrs.flags & 1, .out = (int64_t *)rt_ptr(out),
                .mode = mode, .k = c->attrs.i[1] };
  sort_geo(rt_op_lname(c->op), c, &c->attrs.i[0], &j.outer, &j.n, &j.inner);
  int dim = (int)c->attrs.i[0];
  j.on = out->ndim ? out->sizes[dim] : 1;
  int64_t rows = j.outer * j.inner;
  int rc = 0;
  if (rows && j.on && j.n) {
    if (mode == SORT_TOPK && j.k * 8 <= j.n) {
      if (rows < rt_num_threads() && j.n >= 2 * SORT_GRAIN)
        for (int64_t p = 0; p < rows && !rc; p++) rc = topk_long_row(&j, p);
      else rt_parallel_for(rows, 1 + SORT_GRAIN / (j.n + j.k), topk_rows, &j);
    } else rt_parallel_for(rows, 1 + SORT_GRAIN / j.n, sort_rows, &j);
  }
  td_release(x);
  if (!rc && j.fail) rc = rt_err(TD_ERR_NOMEM, "%s: out of memory for the scratch of rows of %lld elements",
                                 rt_op_lname(c->op), (long long)j.n);
  return rc;
}

int rt_kern_sort(RtCall *c, td_tensor *out) { return sort_run(c, out, SORT_FULL); }
int rt_kern_topk(RtCall *c, td_tensor *out) { return sort_run(c, out, SORT_TOPK + (int)c->attrs.i[2]); }
int rt_kern_mode(RtCall *c, td_tensor *out) { return sort_run(c, out, SORT_MODE); }

/* -- searchsorted ------------------------------------------------------------------------------ */

/* (sorted_sequence, values), flags bit 0 right: for each value the number of
** sequence elements before it (< it; right: <= it) in its row of the sequence.
** A 1-D sequence serves every value; otherwise the leading dims match. */
int rt_meta_searchsorted(RtCall *c)
{
  const td_tensor *s = c->in[0], *v = c->in[1];
  if (s->ndim == 0) return rt_err(TD_ERR_SHAPE, "searchsorted: the sorted sequence must have at least 1 dim, got a 0-dim tensor");
  if (s->ndim > 1) {
    bool ok = v->ndim == s->ndim;
    for (int d = 0; ok && d < s->ndim - 1; d++) ok = s->sizes[d] == v->sizes[d];
    if (!ok)
      return rt_err(TD_ERR_SHAPE, "searchsorted: the leading dims of the sorted sequence %s and the values %s "
                    "must be equal (or the sequence 1-D)", RT_SHAPE(s), RT_SHAPE(v));
  }
  if (s->sizes[s->ndim - 1] >= (int64_t)1 << 62)
    return rt_err(TD_ERR_SHAPE, "searchsorted: sequence too long");
  c->ndim = v->ndim; memcpy(c->sizes, v->sizes, sizeof c->sizes);
  return 0;
}

typedef struct { const char *s, *v; int dt; int64_t n, vlast; bool one, right; int64_t *out; } Search;

static void search_range(void *ctx, int64_t b, int64_t e)
{
  const Search *q = ctx;
  for (int64_t i = b; i < e; i++) {
    uint64_t key = key_at(q->v, q->dt, i);
    int64_t base = q->one ? 0 : (i / (q->vlast ? q->vlast : 1)) * q->n, lo = 0, hi = q->n;
    while (lo < hi) {                                  /* first position whose key is >= (right: >) */
      int64_t mid = lo + (hi - lo) / 2;
      uint64_t m = key_at(q->s, q->dt, base + mid);
      if (m < key || (q->right && m == key)) lo = mid + 1; else hi = mid;
    }
    q->out[i] = lo;
  }
}

int rt_kern_searchsorted(RtCall *c, td_tensor *out)
{
  td_tensor *s0 = rt_as_dtype(c->in[0], c->cdtype), *s = s0 ? rt_as_contig(s0) : NULL;
  td_tensor *v0 = rt_as_dtype(c->in[1], c->cdtype), *v = v0 ? rt_as_contig(v0) : NULL;
  int rc = s && v ? 0 : TD_ERR_NOMEM;
  if (!rc && out->nelem) {
    Search q = { rt_ptr(s), rt_ptr(v), c->cdtype, s->sizes[s->ndim - 1], v->ndim ? v->sizes[v->ndim - 1] : 1,
                 s->ndim == 1, c->attrs.flags & 1, (int64_t *)rt_ptr(out) };
    rt_parallel_for(out->nelem, 4096, search_range, &q);
  }
  td_release(s0); td_release(s); td_release(v0); td_release(v);
  return rc;
}

/* -- unique ------------------------------------------------------------------------------------ */

/* The distinct values of x (flattened) in ascending order, or (consecutive)
** its runs of equal values in place; the inverse (x's shape: each element's
** 0-based position in values) and the counts. NaNs are all distinct (NaN ~=
** NaN), as PyTorch's. Not an op: the sizes depend on the values, so eager
** only (the Lua layer refuses it under tide.compile). */
TD_API int td_unique(td_tensor *x, int consecutive, td_tensor **values, td_tensor **inverse, td_tensor **counts)
{
  RT_ARG(x, "unique", 1, TD_ERR_ARG);
  *values = *inverse = *counts = NULL;
  if (x->device_type != TD_CPU) return rt_err(TD_ERR_DEVICE, "unique: expected a CPU tensor");
  if (!x->ptr) return rt_err(TD_ERR_STATE, "unique: the tensor has no data (traced inside a compiled function)");
  if (x->nelem >= (int64_t)1 << 32) return rt_err(TD_ERR_SHAPE, "unique: too many elements (%lld)", (long long)x->nelem);
  td_tensor *c = rt_as_contig(x);
  if (!c) return TD_ERR_NOMEM;
  int64_t n = c->nelem, es = rt_dtype_size(c->scalar_type);
  int dt = c->scalar_type;
  SortJob j = { .x = rt_ptr(c), .dt = dt, .outer = 1, .n = n, .inner = 1 };
  Scratch s;
  int64_t *inv = malloc((size_t)(n ? n : 1) * 8), *cnt = malloc((size_t)(n ? n : 1) * 8);
  uint32_t *first = malloc((size_t)(n ? n : 1) * 4);
  int rc = 0;
  if (!scratch_get(&s, n, key_wide(dt)) || !inv || !cnt || !first) rc = rt_err(TD_ERR_NOMEM, "unique: out of memory");
  int64_t m = 0;
  if (!rc && n) {
    const uint32_t *v = s.v;
    if (consecutive) for (int64_t i = 0; i < n; i++) s.v[i] = (uint32_t)i;
    else { int w = row_sort(&j, 0, &s); v = w ? s.v2 : s.v; }
    /* runs of equal values in the order v gives; a NaN never equals the run before it */
    for (int64_t i = 0; i < n; i++) {
      bool same = false;
      if (i) {
        const char *a = j.x + (int64_t)v[i] * es, *b = j.x + (int64_t)v[i - 1] * es;
        if (dt == TD_FLOAT32) same = *(const float *)a == *(const float *)b;
        else if (dt == TD_FLOAT64) same = *(const double *)a == *(const double *)b;
        else same = !memcmp(a, b, (size_t)es);
      }
      if (!same) { first[m] = v[i]; cnt[m] = 0; m++; }
      cnt[m - 1]++;
      inv[v[i]] = m - 1;
    }
  }
  if (!rc) {
    int64_t sm = m, sn[TD_MAX_DIMS];
    *values = rt_tensor_new(1, &sm, dt);
    *counts = rt_tensor_new(1, &sm, TD_INT64);
    memcpy(sn, x->sizes, sizeof sn);
    *inverse = rt_tensor_new(x->ndim, sn, TD_INT64);
    if (!*values || !*counts || !*inverse) rc = TD_ERR_NOMEM;
    else {
      for (int64_t i = 0; i < m; i++) memcpy(rt_ptr(*values) + i * es, j.x + (int64_t)first[i] * es, (size_t)es);
      memcpy(rt_ptr(*counts), cnt, (size_t)m * 8);
      memcpy(rt_ptr(*inverse), inv, (size_t)n * 8);
    }
  }
  if (rc) { td_release(*values); td_release(*counts); td_release(*inverse); *values = *counts = *inverse = NULL; }
  scratch_free(&s); free(inv); free(cnt); free(first);
  td_release(c);
  return rc;
}

/* -- unique along a dim ------------------------------------------------------------------------ */

/* The distinct slices of x along dim (PyTorch's unique(dim=)): x viewed as n
** rows (dim moved first) of len elements, rows ordered lexicographically by
** the sort keys above (NaN last, -0.0 == 0.0), a stable merge sort so equal
** rows keep their index order; a run of equal rows is one slice (a NaN
** equals nothing, so rows holding one stay apart). consecutive: the runs in
** place, unsorted (unique_consecutive(dim=)). */
typedef struct { const char *x; int dt; int64_t len; } RowSet;

static int row_cmp(const RowSet *r, int64_t a, int64_t b)
{
  for (int64_t k = 0; k < r->len; k++) {
    uint64_t ka = key_at(r->x, r->dt, a * r->len + k), kb = key_at(r->x, r->dt, b * r->len + k);
    if (ka != kb) return ka < kb ? -1 : 1;
  }
  return 0;
}

static bool row_eq(const RowSet *r, int64_t a, int64_t b)
{
  for (int64_t k = 0; k < r->len; k++) {
    uint64_t ka = key_at(r->x, r->dt, a * r->len + k);
    if (ka != key_at(r->x, r->dt, b * r->len + k) || (rt_is_float(r->dt) && ka == key_nan(r->dt))) return false;
  }
  return true;
}

/* bottom-up merge sort of the row indices v (n), tmp as scratch; stable */
static void rows_sort(const RowSet *r, int64_t *v, int64_t *tmp, int64_t n)
{
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, o = lo;
      while (i < mid && j < hi) tmp[o++] = row_cmp(r, v[j], v[i]) < 0 ? v[j++] : v[i++];
      while (i < mid) tmp[o++] = v[i++];
      while (j < hi) tmp[o++] = v[j++];
    }
    memcpy(v, tmp, (size_t)n * sizeof *v);
  }
}

TD_API int td_unique_dim(td_tensor *x, int dim, int consecutive, td_tensor **values, td_tensor **inverse,
                         td_tensor **counts)
{
  const char *fn = consecutive ? "unique_consecutive" : "unique";
  RT_ARG(x, fn, 1, TD_ERR_ARG);
  *values = *inverse = *counts = NULL;
  if (x->device_type != TD_CPU) return rt_err(TD_ERR_DEVICE, "%s: expected a CPU tensor", fn);
  if (!x->ptr) return rt_err(TD_ERR_STATE, "%s: the tensor has no data (traced inside a compiled function)", fn);
  if (dim < 0) dim += x->ndim;
  if (dim < 0 || dim >= x->ndim)
    return rt_err(TD_ERR_ARG, "%s: dim %d is out of range for a tensor of shape %s", fn, dim, RT_SHAPE(x));
  int64_t n = x->sizes[dim], len = n ? x->nelem / n : 1;
  for (int d = 0; d < x->ndim; d++)
    if (d != dim && x->sizes[d] == 0)
      return rt_err(TD_ERR_SHAPE, "%s: the input %s has a zero-sized dim besides dim %d, so its slices along dim %d "
                    "cannot be told apart", fn, RT_SHAPE(x), dim + 1, dim + 1);
  /* x with dim first, contiguous: row i is slice i */
  int64_t perm[TD_MAX_DIMS], inv_perm[TD_MAX_DIMS];
  perm[0] = dim;
  for (int d = 0, k = 1; d < x->ndim; d++) if (d != dim) perm[k++] = d;
  for (int d = 0; d < x->ndim; d++) inv_perm[perm[d]] = d;
  td_tensor *p = td_permute(x, x->ndim, perm), *c = p ? td_contiguous(p) : NULL;
  int64_t *v = malloc((size_t)(n ? n : 1) * 8), *tmp = malloc((size_t)(n ? n : 1) * 8);
  int64_t *inv = malloc((size_t)(n ? n : 1) * 8), *cnt = malloc((size_t)(n ? n : 1) * 8);
  int64_t *first = malloc((size_t)(n ? n : 1) * 8);
  td_tensor *vals = NULL;
  int rc = !c || !v || !tmp || !inv || !cnt || !first ? rt_err(TD_ERR_NOMEM, "%s: out of memory", fn) : 0;
  int64_t m = 0, es = rt_dtype_size(x->scalar_type);
  if (!rc) {
    RowSet r = { rt_ptr(c), c->scalar_type, len };
    for (int64_t i = 0; i < n; i++) v[i] = i;
    if (!consecutive) rows_sort(&r, v, tmp, n);
    for (int64_t i = 0; i < n; i++) {
      if (!i || !row_eq(&r, v[i], v[i - 1])) { first[m] = v[i]; cnt[m] = 0; m++; }
      cnt[m - 1]++;
      inv[v[i]] = m - 1;
    }
    int64_t vs[TD_MAX_DIMS];
    memcpy(vs, c->sizes, sizeof vs);
    vs[0] = m;
    *counts = rt_tensor_new(1, &m, TD_INT64);
    *inverse = rt_tensor_new(1, &n, TD_INT64);
    vals = rt_tensor_new(c->ndim, vs, c->scalar_type);
    if (!*counts || !*inverse || !vals) rc = TD_ERR_NOMEM;
    else {
      for (int64_t i = 0; i < m; i++) memcpy(rt_ptr(vals) + i * len * es, rt_ptr(c) + first[i] * len * es, (size_t)(len * es));
      if (m) memcpy(rt_ptr(*counts), cnt, (size_t)m * 8);
      if (n) memcpy(rt_ptr(*inverse), inv, (size_t)n * 8);
      td_tensor *back = td_permute(vals, vals->ndim, inv_perm);
      *values = back ? td_contiguous(back) : NULL;
      td_release(back);
      if (!*values) rc = TD_ERR_NOMEM;
    }
  }
  if (rc) { td_release(*values); td_release(*counts); td_release(*inverse); *values = *counts = *inverse = NULL; }
  td_release(vals); td_release(p); td_release(c);
  free(v); free(tmp); free(inv); free(cnt); free(first);
  return rc;
}
