/*
** rt_storage.c -- reference-counted storage over a caching allocator.
** Large blocks are kept on per-size-class free lists after release, so a
** training loop that allocates the same temporaries every step reuses pages
** that are already faulted in (what glibc's mmap threshold would otherwise
** undo on every free). Live bytes are counted for the Lua GC pacer.
*/
#include "rt.h"
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* -- Live-bytes accounting ------------------------------------------------------- */

static int64_t live_bytes;       /* atomically updated: every host and device byte, for the GC pacer */
static int64_t cached_bytes;
/* storage bytes per device (TD_CPU, TD_OPENCL), their peaks, and allocation counts */
static int64_t dev_live[2], dev_peak[2], dev_allocs[2];

void rt_live_add(int64_t d) { __atomic_add_fetch(&live_bytes, d, __ATOMIC_RELAXED); }
TD_API int64_t td_live_bytes(void) { return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED); }
TD_API int64_t td_cached_bytes(void) { return __atomic_load_n(&cached_bytes, __ATOMIC_RELAXED); }

void rt_mem_add(int device, int64_t d)
{
  rt_live_add(d);
  int64_t now = __atomic_add_fetch(&dev_live[device], d, __ATOMIC_RELAXED);
  if (d <= 0) return;
  __atomic_add_fetch(&dev_allocs[device], 1, __ATOMIC_RELAXED);
  int64_t p = __atomic_load_n(&dev_peak[device], __ATOMIC_RELAXED);
  while (now > p && !__atomic_compare_exchange_n(&dev_peak[device], &p, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  if (rt_prof_on) rt_prof_alloc(d);
}

TD_API void td_memory_stats(td_mem_stats *m)
{
  for (int d = 0; d < 2; d++) {
    m->live[d] = __atomic_load_n(&dev_live[d], __ATOMIC_RELAXED);
    m->peak[d] = __atomic_load_n(&dev_peak[d], __ATOMIC_RELAXED);
    m->allocs[d] = __atomic_load_n(&dev_allocs[d], __ATOMIC_RELAXED);
  }
  m->cached[TD_CPU] = td_cached_bytes();
  m->cached[TD_OPENCL] = cl_cached_bytes();   /* opencl/cl_mem.c's free lists */
  m->host_total = td_live_bytes();
  m->streamed = __atomic_load_n(&rt_streamed, __ATOMIC_RELAXED);
}

TD_API void td_reset_peak_memory_stats(void)
{
  for (int d = 0; d < 2; d++) __atomic_store_n(&dev_peak[d], __atomic_load_n(&dev_live[d], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

/* -- Caching allocator ------------------------------------------------------------- */

/* Size classes: 4 per power of two (2^k, 1.25, 1.5, 1.75 x 2^k) from 64 KiB up.
** Smaller blocks go straight to aligned_alloc (glibc keeps those on its heap).
** A request its own class cannot serve takes a cached block of the next
** classes up to twice its size: a fresh block costs page faults (about 0.4 ms
** a MiB in a VM here, the kernel zeroing each page), more than most kernels
** that fill it, so a 32 MiB result after 64 MiB ones reuses their pages.
** Failing that, a larger cached block is split: the request takes its front
** and the rest goes back to the cache as a block of the largest class that
** fits, so the 6 MiB results of one phase reuse the pages of another phase's
** 512 MiB blocks instead of faulting fresh ones. The pieces of a split block
** share a Slab, and the memory goes back to the system with the last of them.
** A block therefore has a 64-byte header before the data: its class and Slab. */
#define CACHE_MIN   ((size_t)1 << 16)
#define NCLASS      (4 * 40)
#define HDR         64
#define REACH       4                           /* classes above a request's own: up to 2x */
typedef struct { void *base; int64_t pieces; } Slab;   /* a split block: its malloc'd base, live pieces */
typedef struct {
  int cls; size_t size;              /* the data bytes */
  Slab *slab;                        /* NULL: a block of its own */
  int64_t born, used;                /* alloc_clock when handed out, and at its last known use */
} BlockHdr;
_Static_assert(sizeof(BlockHdr) <= HDR, "block header fits");
static size_t cache_limit = (size_t)4 << 30;   /* TIDE_CACHE_LIMIT bytes */
/* Bytes of large blocks handed out so far, the clock of a block's last
** known use: a cached block of r bytes that waited while more than STALE and
** 2r bytes were handed out (this request's included) is taken to have left
** the caches (the streaming stores of rt_isa.h then skip reading its lines).
** A block freed when its last reference went (C's reference counts, x:free())
** was in use until then; one freed by Lua's collector (td_collecting) may have
** been dead since it was handed out, so its clock is that of its birth.
** Measured here with 32 MiB blocks: a layer_norm result written into a block
** last used one result before ran warm (1.6-1.7 ms), three or more 20-50%
** slower; a chain of ops reusing the blocks of the op before last (64 MiB
** counted) still found them warm. Only allocations are counted, not reads. */
static int64_t alloc_clock;
static int collecting;                         /* td_collecting: frees now are the collector's */
#define STALE ((int64_t)48 << 20)

TD_API void td_collecting(int on) { __atomic_store_n(&collecting, on, __ATOMIC_RELAXED); }
static void **cache_head[NCLASS];
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static BlockHdr *hdr_of(void *p) { return (BlockHdr *)((char *)p - HDR); }

static int size_class(size_t n, size_t *rounded)
{
  int k = 63 - __builtin_clzll(n);               /* 2^k <= n */
  size_t base = (size_t)1 << k, q = base >> 2;
  int j = (int)((n - base + q - 1) / q);         /* 0..4 quarters above 2^k */
  if (j == 4) { k++; j = 0; base <<= 1; q <<= 1; }
  *rounded = base + (size_t)j * q;
  return (k - 16) * 4 + j;
}

/* the system's memory back: a block, or its piece of a Slab */
static void block_release(void *p)
{
  BlockHdr *h = hdr_of(p);
  Slab *s = h->slab;
  if (!s) { free(h); return; }
  if (__atomic_sub_fetch(&s->pieces, 1, __ATOMIC_ACQ_REL) == 0) { free(s->base); free(s); }
}

/* Under cache_mu: pop a cached block of class k, or NULL; push one. */
static char *cache_pop(int k)
{
  char *p = (char *)cache_head[k];
  if (p) { cache_head[k] = (void **)*(void **)p; __atomic_sub_fetch(&cached_bytes, (int64_t)hdr_of(p)->size, __ATOMIC_RELAXED); }
  return p;
}

static void cache_push(char *p)
{
  BlockHdr *h = hdr_of(p);
  *(void **)p = cache_head[h->cls]; cache_head[h->cls] = (void **)p;
  __atomic_add_fetch(&cached_bytes, (int64_t)h->size, __ATOMIC_RELAXED);
}

/* Under cache_mu: the front r bytes (class c) of the smallest cached block
** above reach, the rest cached as a block of its own class; NULL if none. */
static char *cache_split(int c, size_t r)
{
  int k = c + REACH + 1;
  while (k < NCLASS && !cache_head[k]) k++;
  if (k >= NCLASS) return NULL;
  char *p = cache_pop(k);
  BlockHdr *h = hdr_of(p);
  size_t rest = h->size - r;                     /* the remainder's header and data */
  Slab *s = h->slab;
  if (!s) {
    if (!(s = malloc(sizeof *s))) { cache_push(p); return NULL; }
    s->base = h; s->pieces = 1;
  }
  h->cls = c; h->slab = s;
  if (rest >= HDR + CACHE_MIN) {                 /* else the slack stays with the piece */
    size_t rr; int rc = size_class(rest - HDR, &rr);
    if (rr > rest - HDR) rc--;                   /* the largest class that fits */
    char *q = p + r + HDR;
    *hdr_of(q) = (BlockHdr){ .cls = rc, .size = rest - HDR, .slab = s, .born = h->born, .used = h->used };
    __atomic_add_fetch(&s->pieces, 1, __ATOMIC_ACQ_REL);
    h->size = r;
    cache_push(q);
  }
  return p;
}

/* TIDE_HUGEPAGES=1: blocks of HUGE_MIN to HUGE_MAX bytes are whole 2 MiB
** pages, asked for as transparent huge pages (madvise; Linux's default mode
** serves only those who ask). A kernel streaming 32-64 MiB then misses the
** TLB 512 times less (here: layer_norm (8192, 1024) fwd 1.36 -> 1.26 ms,
** softmax (4096, 4096) fwd 4.67 -> 4.49, W1 fwd 27.5-31 -> 25.8-26.4), but a
** huge page's first fault may compact memory synchronously: a process of the
** bench spent 1.3-3.5 s in the kernel instead of 0.5 (session 23 saw the
** same with 512 MiB blocks, hence the cap). Off by default: a game or a tool
** embedding tide cannot have such pauses; a long training run may want it. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN  ((size_t)4 << 20)
#define HUGE_MAX  ((size_t)64 << 20)
static bool thp_on = false;

void *rt_alloc(size_t n) { return rt_alloc_cold(n, NULL); }

void *rt_alloc_cold(size_t n, bool *cold)
{
  if (cold) *cold = false;
  if (n == 0) n = 64;
  if (n < CACHE_MIN) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    return p;
  }
  size_t r; int c = size_class(n, &r);
  if (c >= NCLASS) return NULL;
  char *p = NULL;
  pthread_mutex_lock(&cache_mu);
  int64_t now = alloc_clock += (int64_t)r;
  for (int k = c; k <= c + REACH && k < NCLASS && !p; k++) p = cache_pop(k);
  if (!p) p = cache_split(c, r);
  if (p) {
    int64_t since = now - hdr_of(p)->used;
    if (cold) *cold = since > STALE && since > 2 * (int64_t)r;
    hdr_of(p)->born = now;
  }
  pthread_mutex_unlock(&cache_mu);
  if (p) return p;
  BlockHdr *h;
  if (r + HDR >= HUGE_MIN && r <= HUGE_MAX && thp_on) {
    size_t sz = (r + HDR + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if ((h = aligned_alloc(HUGE_PAGE, sz))) madvise(h, sz, MADV_HUGEPAGE);
  } else h = aligned_alloc(64, r + HDR);
  if (!h) return NULL;
  *h = (BlockHdr){ .cls = c, .size = r, .slab = NULL, .born = now };   /* fresh pages: not cold (zeroed in cache) */
  return (char *)h + HDR;
}

void rt_free(void *p, size_t n)
{
  if (!p) return;
  if (n == 0) n = 64;
  if (n < CACHE_MIN) { free(p); return; }
  pthread_mutex_lock(&cache_mu);
  if ((size_t)cached_bytes + hdr_of(p)->size <= cache_limit) {   /* (cached_bytes only changes under cache_mu) */
    hdr_of(p)->used = __atomic_load_n(&collecting, __ATOMIC_RELAXED) ? hdr_of(p)->born : alloc_clock;
    cache_push(p); p = NULL;                     /* on its own class's list (it may serve smaller requests) */
  }
  pthread_mutex_unlock(&cache_mu);
  if (p) block_release(p);
}

TD_API void td_empty_cache(void)
{
  rt_mm_tile_clear();                       /* its packed weights go back to the blocks freed below */
  pthread_mutex_lock(&cache_mu);
  for (int c = 0; c < NCLASS; c++)
    for (void **p = cache_head[c]; p; ) { void **nx = (void **)*p; block_release(p); p = nx; }
  memset(cache_head, 0, sizeof cache_head);
  __atomic_store_n(&cached_bytes, 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&cache_mu);
  cl_empty_cache();                         /* the device's buffers too */
}

__attribute__((constructor)) static void storage_init(void)
{
  const char *s = getenv("TIDE_CACHE_LIMIT");
  if (s && *s) cache_limit = (size_t)strtoull(s, NULL, 10);
  s = getenv("TIDE_HUGEPAGES");
  thp_on = s && !strcmp(s, "1");
}

/* -- Small blocks ------------------------------------------------------------------------ */

/* Tensor headers and small storages (header + up to 256 data bytes in one
** block) come from a per-thread free list: one small eager op then costs no
** malloc at all, and glibc's free-list consolidation stays out of the loop.
** A block may be freed on another thread than the one that made it (it joins
** that thread's list). A thread's list is freed when the thread exits. */
#define SMALL_KEEP 32768   /* 10 MiB at most: the GC frees tensors in bursts */
static _Thread_local void *small_head;
static _Thread_local int small_count, small_keyed;
static pthread_key_t small_key;
static pthread_once_t small_once = PTHREAD_ONCE_INIT;

static void small_exit(void *unused)
{
  (void)unused;
  for (void *p = small_head; p; ) { void *nx = *(void **)p; free(p); p = nx; }
  small_head = NULL; small_count = 0;
}
static void small_key_init(void) { pthread_key_create(&small_key, small_exit); }

void *rt_small_get(void)
{
  void *p = small_head;
  if (p) { small_head = *(void **)p; small_count--; return p; }
  return aligned_alloc(64, RT_SMALL_BLOCK);
}

void rt_small_put(void *p)
{
  if (small_count >= SMALL_KEEP) { free(p); return; }
  if (__builtin_expect(!small_keyed, 0)) {       /* this thread's first block: free the list at its exit */
    pthread_once(&small_once, small_key_init);
    pthread_setspecific(small_key, (void *)1);
    small_keyed = 1;
  }
  *(void **)p = small_head; small_head = p; small_count++;
}

/* -- Storage ------------------------------------------------------------------------ */

#define SMALL_DATA_OFF 64
_Static_assert(sizeof(RtStorage) <= SMALL_DATA_OFF, "storage header fits before the inline data");

RtStorage *rt_storage_new(size_t nbytes)
{
  RtStorage *s;
  void *p;
  if (nbytes <= RT_SMALL_BLOCK - SMALL_DATA_OFF) {
    if (!(s = rt_small_get())) return rt_errp(TD_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
    p = (char *)s + SMALL_DATA_OFF;
    s->inline_data = 1; s->cold = 0;
  } else {
    bool cold = false;
    s = malloc(sizeof *s);
    p = s ? rt_alloc_cold(nbytes, &cold) : NULL;
    if (!p) {
      free(s);
      return rt_errp(TD_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
    }
    s->inline_data = 0;
    s->cold = cold;
  }
  s->refcount = 1; s->device_type = TD_CPU; s->version = 0; s->nbytes = nbytes; s->ptr = p;
  s->jit_ref = 0; s->jit_trace = 0; s->map = NULL; s->dev = NULL;
  static uint64_t next_uid;
  s->uid = __atomic_add_fetch(&next_uid, 1, __ATOMIC_RELAXED);
  rt_mem_add(TD_CPU, (int64_t)nbytes);
  return s;
}

void rt_storage_retain(RtStorage *s) { __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED); }

void rt_storage_release(RtStorage *s)
{
  if (!s || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  rt_mem_add(s->device_type == TD_OPENCL ? TD_OPENCL : TD_CPU, -(int64_t)s->nbytes);
  if (s->dev) { cl_storage_free(s); return; }
  if (s->map) { td_mapping_release(s->map); free(s); return; }
  if (s->inline_data) { rt_small_put(s); return; }
  rt_free(s->ptr, s->nbytes);
  free(s);
}

/* -- File mappings -------------------------------------------------------------------------
** tide.load maps a safetensors file once (private, copy-on-write: writes into a
** loaded tensor never reach the file) and makes each tensor a storage inside the
** mapping; the mapping is unmapped when its last tensor dies. A file replaced
** by an atomic save (rename) keeps the old mapping valid. */

/* A mapping is also how a host's own memory joins (td_from_blob, blob = 1):
** its release (if any) runs instead of munmap. */
struct td_mapping {
  int32_t refcount; int32_t blob; void *base; size_t len;
  td_blob_release release; void *ctx;
};

TD_API td_mapping *td_map_fd(int fd, int64_t *size)
{
  struct stat st;
  if (fstat(fd, &st)) return rt_errp(TD_ERR_IO, "map: fstat failed: %s", strerror(errno));
  if (st.st_size <= 0) return rt_errp(TD_ERR_IO, "map: the file is empty");
  void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (base == MAP_FAILED) return rt_errp(TD_ERR_IO, "map: mmap failed: %s", strerror(errno));
  td_mapping *m = malloc(sizeof *m);
  if (!m) { munmap(base, (size_t)st.st_size); return rt_errp(TD_ERR_NOMEM, "map: out of memory"); }
  m->refcount = 1; m->blob = 0; m->base = base; m->len = (size_t)st.st_size; m->release = NULL; m->ctx = NULL;
  if (size) *size = (int64_t)st.st_size;
  return m;
}

TD_API void td_mapping_release(td_mapping *m)
{
  if (!m || __atomic_sub_fetch(&m->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (!m->blob) munmap(m->base, m->len);
  else if (m->release) m->release(m->base, m->ctx);
  free(m);
}

TD_API const void *td_mapping_data(const td_mapping *m) { return m->base; }

TD_API td_tensor *td_from_mapping(td_mapping *m, int64_t offset, int ndim, const int64_t *size, int dtype)
{
  if (dtype < 0 || dtype >= TD_DTYPE__MAX) return rt_errp(TD_ERR_DTYPE, "map: bad dtype %d", dtype);
  if (ndim < 0 || ndim > TD_MAX_DIMS) return rt_errp(TD_ERR_SHAPE, "map: bad ndim %d", ndim);
  int64_t n = rt_numel(ndim, size), es = rt_dtype_size(dtype);
  if (offset < 0 || offset % es || n < 0 || (size_t)offset + (size_t)(n * es) > m->len)
    return rt_errp(TD_ERR_ARG, "map: %lld elements of %s at offset %lld are outside the %zu-byte mapping or not aligned",
                   (long long)n, td_dtype_name(dtype), (long long)offset, m->len);
  RtStorage *s = calloc(1, sizeof *s);
  td_tensor *t = s ? rt_tensor_alloc() : NULL;
  if (!t) { free(s); return rt_errp(TD_ERR_NOMEM, "map: out of memory"); }
  s->refcount = 1; s->device_type = TD_CPU; s->nbytes = (size_t)(n * es);
  s->ptr = (char *)m->base + offset; s->map = m;
  __atomic_add_fetch(&m->refcount, 1, __ATOMIC_RELAXED);
  rt_mem_add(TD_CPU, (int64_t)s->nbytes);
  t->ndim = ndim; t->scalar_type = dtype; t->device_type = TD_CPU;
  if (ndim) memcpy(t->sizes, size, (size_t)ndim * sizeof *size);
  rt_tensor_contig_strides(ndim, size, t->strides);
  t->nelem = n; t->rt_storage = s; t->ptr = s->ptr;
  return t;
}

/* -- Host memory (td_from_blob) ----------------------------------------------------------
** A tensor over memory the host owns, without a copy: the storage points into
** it through a mapping whose release runs the host's callback once, when the
** last tensor or view over it dies (on whichever thread drops it). The
** allocator never sees the memory: nothing frees, caches or reuses it. Sizes
** and strides count elements; strides must be >= 0 (0 repeats an element);
** the storage spans the furthest element the strides reach. */

TD_API td_tensor *td_from_blob(void *data, int ndim, const int64_t *size, const int64_t *strides, int dtype,
                               td_blob_release release, void *ctx)
{
  if (dtype < 0 || dtype >= TD_DTYPE__MAX) return rt_errp(TD_ERR_DTYPE, "from_blob: bad dtype %d", dtype);
  if (ndim < 0 || ndim > TD_MAX_DIMS || (ndim > 0 && !size))
    return rt_errp(TD_ERR_SHAPE, "from_blob: bad ndim %d (0..%d, with sizes)", ndim, TD_MAX_DIMS);
  int64_t es = rt_dtype_size(dtype), n = 1, last = 0;    /* last: offset of the furthest element */
  for (int d = 0; d < ndim; d++) {
    if (size[d] < 0) return rt_errp(TD_ERR_SHAPE, "from_blob: size %lld of dim %d is negative", (long long)size[d], d);
    if (strides && strides[d] < 0)
      return rt_errp(TD_ERR_ARG, "from_blob: stride %lld of dim %d is negative", (long long)strides[d], d);
    if (size[d] && __builtin_mul_overflow(n, size[d], &n))
      return rt_errp(TD_ERR_SHAPE, "from_blob: size overflows int64");
    if (!size[d]) n = 0;
  }
  int64_t st[TD_MAX_DIMS];
  if (strides) { if (ndim) memcpy(st, strides, (size_t)ndim * sizeof *st); }
  else rt_tensor_contig_strides(ndim, size, st);
  if (n > 0) {
    for (int d = 0; d < ndim; d++) {
      int64_t reach;
      if (__builtin_mul_overflow(size[d] - 1, st[d], &reach) || __builtin_add_overflow(last, reach, &last))
        return rt_errp(TD_ERR_SHAPE, "from_blob: strides reach beyond int64");
    }
  }
  int64_t nbytes = 0;
  if (n > 0 && __builtin_mul_overflow(last + 1, es, &nbytes))
    return rt_errp(TD_ERR_SHAPE, "from_blob: the memory the strides span overflows int64");
  if (n > 0 && !data) return rt_errp(TD_ERR_ARG, "from_blob: data is NULL");
  if ((uintptr_t)data % (uintptr_t)es)
    return rt_errp(TD_ERR_ARG, "from_blob: data %p is not aligned for %s (%lld bytes)", data, td_dtype_name(dtype),
                   (long long)es);
  td_mapping *m = malloc(sizeof *m);
  RtStorage *s = m ? calloc(1, sizeof *s) : NULL;
  td_tensor *t = s ? rt_tensor_alloc() : NULL;
  if (!t) { free(s); free(m); return rt_errp(TD_ERR_NOMEM, "from_blob: out of memory"); }
  m->refcount = 1; m->blob = 1; m->base = data; m->len = (size_t)nbytes; m->release = release; m->ctx = ctx;
  s->refcount = 1; s->device_type = TD_CPU; s->nbytes = (size_t)nbytes; s->ptr = data; s->map = m;
  rt_mem_add(TD_CPU, nbytes);
  t->ndim = ndim; t->scalar_type = dtype; t->device_type = TD_CPU;
  if (ndim) { memcpy(t->sizes, size, (size_t)ndim * sizeof *size); memcpy(t->strides, st, (size_t)ndim * sizeof *st); }
  t->nelem = n; t->rt_storage = s; t->ptr = data;
  return t;
}

/* Owners kept alive by a binding (tide.from_blob in Lua keeps a Lua value per
** blob): td_blob_note is the release function, its ctx an id; the binding
** collects the ids of released blobs with td_blob_released. */
static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t *note_ids;
static int note_n, note_cap;

TD_API void td_blob_note(void *data, void *ctx)
{
  (void)data;
  pthread_mutex_lock(&note_mu);
  if (note_n == note_cap) {
    int cap = note_cap ? 2 * note_cap : 64;
    int64_t *p = realloc(note_ids, (size_t)cap * sizeof *p);
    if (p) { note_ids = p; note_cap = cap; }
  }
  if (note_n < note_cap) note_ids[note_n++] = (int64_t)(intptr_t)ctx;   /* else the owner is kept: safe */
  pthread_mutex_unlock(&note_mu);
}

TD_API int td_blob_released(int64_t *ids, int max)
{
  pthread_mutex_lock(&note_mu);
  int k = note_n < max ? note_n : max;
  if (k > 0) memcpy(ids, note_ids + (note_n - k), (size_t)k * sizeof *ids);
  note_n -= k;
  pthread_mutex_unlock(&note_mu);
  return k;
}
