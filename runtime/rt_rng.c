/*
** rt_rng.c -- counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
** Element i of a random op uses counter (base + i/4), lane i%4, so the values
** depend only on the seed and the op's place in the program, never on threads.
*/
#include "rt.h"
#include <math.h>
#include <pthread.h>

/* One stream per process, as PyTorch's default generator: random ops from
** several threads draw disjoint counter ranges (under the lock), in the order
** the threads reach it. */
static uint64_t rng_seed = 0x5eed, rng_offset;
static pthread_mutex_t rng_mu = PTHREAD_MUTEX_INITIALIZER;

TD_API void td_manual_seed(uint64_t seed) { td_rng_set_state(seed, 0); }

TD_API void td_rng_get_state(uint64_t *seed, uint64_t *offset)
{
  pthread_mutex_lock(&rng_mu);
  *seed = rng_seed; *offset = rng_offset;
  pthread_mutex_unlock(&rng_mu);
}

TD_API void td_rng_set_state(uint64_t seed, uint64_t offset)
{
  pthread_mutex_lock(&rng_mu);
  rng_seed = seed; rng_offset = offset;
  pthread_mutex_unlock(&rng_mu);
}

uint64_t rt_rng_reserve(uint64_t n, uint64_t *key)
{
  pthread_mutex_lock(&rng_mu);
  uint64_t base = rng_offset;
  rng_offset += (n + 3) / 4;
  *key = rng_seed;
  pthread_mutex_unlock(&rng_mu);
  return base;
}

void rt_philox(uint64_t key, uint64_t ctr, uint32_t out[4])
{
  uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* uniform in [0,1) with 24 (float) or 53 (double) random bits */
static inline double u01(const uint32_t *w, int lane, int dbl)
{
  if (!dbl) return (w[lane] >> 8) * (1.0 / 16777216.0);
  uint64_t b = ((uint64_t)w[lane] << 32 | w[(lane + 1) & 3]) >> 11;
  return (double)b * (1.0 / 9007199254740992.0);
}

typedef struct { td_tensor *t; uint64_t key, base; int kind; int64_t lo, span; } RngJob;

static void rng_range(void *vctx, int64_t b, int64_t e)
{
  RngJob *j = vctx;
  int dt = j->t->scalar_type, dbl = dt == TD_FLOAT64, sz = rt_dtype_size(dt);
  char *p = rt_ptr(j->t);
  for (int64_t i = b; i < e; i++) {
    uint32_t w[4];
    rt_philox(j->key, j->base + (uint64_t)i / 4, w);
    double v;
    if (j->kind == 0) v = u01(w, i & 3, dbl);
    else if (j->kind == 1) {
      /* Box-Muller on the lane pair (0,1) or (2,3); even lanes take cos, odd sin */
      int l = (int)(i & 2);
      double u1 = 1.0 - ((w[l] >> 8) * (1.0 / 16777216.0) + (dbl ? (w[l + 1] & 0xff) / 4294967296.0 : 0));
      double u2 = (w[l + 1] >> 8) * (1.0 / 16777216.0);
      double r = sqrt(-2.0 * log(u1));
      v = (i & 1) ? r * sin(2 * M_PI * u2) : r * cos(2 * M_PI * u2);
    } else {
      uint64_t x = ((uint64_t)w[i & 3] << 32) | w[(i + 1) & 3];
      v = (double)(j->lo + (int64_t)(x % (uint64_t)j->span));
    }
    rt_store(p + i * sz, dt, v);
  }
}

static td_tensor *rng_fill(const char *op, int device, int ndim, const int64_t *size, int dtype, int kind,
                           int64_t lo, int64_t span)
{
  if (kind < 2 && !rt_is_float(dtype))
    return rt_errp(TD_ERR_DTYPE, "%s: dtype %s is not a floating point type", op, td_dtype_name(dtype));
  td_tensor *t = rt_tensor_new_on(device, ndim, size, dtype);
  if (!t) return NULL;
  RngJob j = { t, 0, 0, kind, lo, span };
  /* round the stream up to whole 4-lane blocks so Box-Muller pairs never split */
  j.base = rt_rng_reserve((uint64_t)t->nelem + 4, &j.key);
  /* on the device: the same counters and formulas (opencl/cl_rng.c) */
  if (device == TD_OPENCL) {
    if (cl_rng_fill(t, j.key, j.base, kind, lo, span)) { td_release(t); return NULL; }
    return t;
  }
  rt_parallel_for(t->nelem, 1 << 14, rng_range, &j);
  return t;
}

static int randint_check(int64_t lo, int64_t hi, int dtype, int64_t *span)
{
  if (hi <= lo) return rt_err(TD_ERR_ARG, "randint: empty range [%lld, %lld)", (long long)lo, (long long)hi);
  if (__builtin_sub_overflow(hi, lo, span))
    return rt_err(TD_ERR_ARG, "randint: range [%lld, %lld) is wider than int64", (long long)lo, (long long)hi);
  /* every value drawn must fit the dtype (no wrapping into uint8) */
  if (dtype != TD_BOOL && (rt_value_check("randint", (double)lo, dtype) || rt_value_check("randint", (double)(hi - 1), dtype)))
    return TD_ERR_ARG;
  return 0;
}

TD_API td_tensor *td_rand(int ndim, const int64_t *size, int dtype)
{ return rng_fill("rand", TD_CPU, ndim, size, dtype, 0, 0, 0); }
TD_API td_tensor *td_randn(int ndim, const int64_t *size, int dtype)
{ return rng_fill("randn", TD_CPU, ndim, size, dtype, 1, 0, 0); }
TD_API td_tensor *td_randint(int64_t lo, int64_t hi, int ndim, const int64_t *size, int dtype)
{
  int64_t span = 0;
  if (randint_check(lo, hi, dtype, &span)) return NULL;
  return rng_fill("randint", TD_CPU, ndim, size, dtype, 2, lo, span);
}

TD_API td_tensor *td_rand_on(int device, int index, int kind, int64_t lo, int64_t hi, int ndim, const int64_t *size,
                             int dtype)
{
  static const char *names[3] = { "rand", "randn", "randint" };
  if (kind < 0 || kind > 2) return rt_errp(TD_ERR_ARG, "rand_on: kind %d is not 0 (rand), 1 (randn) or 2 (randint)", kind);
  if (device != TD_CPU && device != TD_OPENCL) return rt_errp(TD_ERR_DEVICE, "%s: unknown device %d", names[kind], device);
  if (device == TD_OPENCL && cl_init(index)) return NULL;
  if (dtype < 0 || dtype >= TD_DTYPE__MAX) return rt_errp(TD_ERR_DTYPE, "%s: bad dtype %d", names[kind], dtype);
  int64_t span = 0;
  if (kind == 2 && randint_check(lo, hi, dtype, &span)) return NULL;
  return rng_fill(names[kind], device, ndim, size, dtype, kind, kind == 2 ? lo : 0, span);
}
