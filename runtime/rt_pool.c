/*
** rt_pool.c -- the one persistent thread pool, shared by eager and compiled
** kernels. rt_parallel_for splits [0,n) into fixed chunks that depend only on
** n, grain and the thread count, so results are reproducible per thread count.
** Workers spin briefly before sleeping: back-to-back eager ops stay cheap.
*/
#include "rt.h"
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define POOL_MAX 64
/* ~50 us of pause before sleeping: long enough for back-to-back eager ops,
** short enough not to steal a core from OpenBLAS's own threads during the
** matmul that follows (20000 cost a 384^2 add+matmul step 45%). */
#define SPIN_ITERS 2000

static struct {
  pthread_mutex_t mu;            /* one job at a time; guards workers' sleep */
  pthread_cond_t wake, done_cv;
  int nthreads;                  /* including the caller */
  int started;                   /* workers running */
  /* current job */
  RtRangeFn fn; void *ctx; int64_t n; int nchunks;
  int next_chunk;                /* atomic */
  int pending;                   /* atomic: chunks not finished */
  unsigned gen;                  /* atomic: job generation */
  int sleeping;
} pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static pthread_mutex_t submit_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int in_worker;

static void run_chunks(void)
{
  int c;
  while ((c = __atomic_fetch_add(&pool.next_chunk, 1, __ATOMIC_ACQ_REL)) < pool.nchunks) {
    int64_t b = pool.n * c / pool.nchunks, e = pool.n * (c + 1) / pool.nchunks;
    pool.fn(pool.ctx, b, e);
    if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_ACQ_REL) == 0) {
      pthread_mutex_lock(&pool.mu);
      pthread_cond_broadcast(&pool.done_cv);
      pthread_mutex_unlock(&pool.mu);
    }
  }
}

static void *worker(void *arg)
{
  (void)arg;
  in_worker = 1;
  unsigned seen = 0;
  for (;;) {
    int spins = 0;
    while (__atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE) == seen) {
      if (++spins < SPIN_ITERS) { __builtin_ia32_pause(); continue; }
      pthread_mutex_lock(&pool.mu);
      pool.sleeping++;
      while (__atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE) == seen) pthread_cond_wait(&pool.wake, &pool.mu);
      pool.sleeping--;
      pthread_mutex_unlock(&pool.mu);
    }
    seen = __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE);
    run_chunks();
  }
  return NULL;
}

static int default_threads(void)
{
  const char *s = getenv("TIDE_NUM_THREADS");
  int n = s && *s ? atoi(s) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > POOL_MAX ? POOL_MAX : n;
}

static void pool_start(void)
{
  if (!pool.nthreads) pool.nthreads = default_threads();
  while (pool.started < pool.nthreads - 1) {
    pthread_t th;
    pthread_attr_t at; pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, worker, NULL)) { pool.nthreads = pool.started + 1; break; }
    pool.started++;
  }
}

int rt_num_threads(void) { if (!pool.nthreads) pool.nthreads = default_threads(); return pool.nthreads; }
TD_API int td_get_num_threads(void) { return rt_num_threads(); }

TD_API int td_set_num_threads(int n)
{
  if (n < 1 || n > POOL_MAX) return rt_err(TD_ERR_ARG, "set_num_threads: %d is not in 1..%d", n, POOL_MAX);
  pthread_mutex_lock(&submit_mu);
  pool.nthreads = n;     /* extra workers stay idle; chunks follow nthreads */
  pthread_mutex_unlock(&submit_mu);
  return 0;
}

void rt_parallel_for(int64_t n, int64_t grain, RtRangeFn fn, void *ctx)
{
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int nt = rt_num_threads();
  int64_t nch = (n + grain - 1) / grain;
  if (nch > nt) nch = nt;
  if (nch <= 1 || in_worker || pthread_mutex_trylock(&submit_mu)) { fn(ctx, 0, n); return; }
  pool_start();
  if (nch > pool.started + 1) nch = pool.started + 1;
  pool.fn = fn; pool.ctx = ctx; pool.n = n; pool.nchunks = (int)nch;
  __atomic_store_n(&pool.pending, (int)nch, __ATOMIC_RELEASE);
  __atomic_store_n(&pool.next_chunk, 0, __ATOMIC_RELEASE);
  pthread_mutex_lock(&pool.mu);
  __atomic_add_fetch(&pool.gen, 1, __ATOMIC_ACQ_REL);
  if (pool.sleeping) pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.mu);
  in_worker = 1;
  run_chunks();
  in_worker = 0;
  int spins = 0;
  while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) > 0) {
    if (++spins < SPIN_ITERS) { __builtin_ia32_pause(); continue; }
    pthread_mutex_lock(&pool.mu);
    while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) > 0) pthread_cond_wait(&pool.done_cv, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
  }
  pthread_mutex_unlock(&submit_mu);
}
