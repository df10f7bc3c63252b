/*
** rt_pool.c -- the one persistent thread pool, shared by eager and compiled
** kernels. rt_parallel_for splits [0,n) into fixed chunks that depend only on
** n, grain and the thread count, so results are reproducible per thread count.
** Workers spin briefly before sleeping: back-to-back eager ops stay cheap.
*/
/*
** Design note (threads). Any number of host threads may call rt_parallel_for
** at once; one job runs on the pool at a time (submit_mu). A caller that
** finds the pool busy, or a call made from inside a job, runs its chunks
** itself, one after another, with the same boundaries: results never depend
** on which caller got the pool.
**
** A job is claimed chunk by chunk through one 64-bit word, ticket = (nchunks
** << 32) | next. A thread claims chunk c by a CAS from (n, c) to (n, c + 1)
** with c < n; only then does it read the job (fn, ctx, range). A worker that
** wakes late, after its job is done, finds next == n and claims nothing; it
** can never run a chunk of the next job with a half-written description, nor
** claim a chunk twice (the CAS fails if anyone moved the ticket). The job's
** fields are written before the ticket is published (release) and read after
** a successful claim (acquire); the submitter rewrites them only after every
** claimed chunk has finished (pending == 0, acquire).
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
  pthread_mutex_t mu;            /* guards workers' sleep */
  pthread_cond_t wake, done_cv;
  int nthreads;                  /* atomic: including the caller; 0 = not read from the environment yet */
  int started;                   /* workers running (submit_mu) */
  /* the current job (written under submit_mu before its ticket is published) */
  RtRangeFn fn; void *ctx; int64_t n;
  uint64_t ticket;               /* atomic: nchunks << 32 | next chunk */
  int pending;                   /* atomic: claimed or unclaimed chunks not finished */
  unsigned gen;                  /* atomic: job generation (wakes workers) */
  int sleeping;                  /* mu */
} pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static pthread_mutex_t submit_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int in_worker;

/* Claim and run chunks of the current job until none is left. */
static void run_chunks(void)
{
  uint64_t t = __atomic_load_n(&pool.ticket, __ATOMIC_ACQUIRE);
  for (;;) {
    uint32_t nch = (uint32_t)(t >> 32), c = (uint32_t)t;
    if (c >= nch) return;
    if (!__atomic_compare_exchange_n(&pool.ticket, &t, t + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
    int64_t n = pool.n, b = n * c / nch, e = n * (c + 1) / nch;
    pool.fn(pool.ctx, b, e);
    if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_ACQ_REL) == 0) {
      pthread_mutex_lock(&pool.mu);
      pthread_cond_broadcast(&pool.done_cv);
      pthread_mutex_unlock(&pool.mu);
    }
    t = __atomic_load_n(&pool.ticket, __ATOMIC_ACQUIRE);
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

/* called with submit_mu held */
static void pool_start(int nt)
{
  while (pool.started < nt - 1) {
    pthread_t th;
    pthread_attr_t at; pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&th, &at, worker, NULL);
    pthread_attr_destroy(&at);
    if (err) break;                      /* fewer workers: jobs get fewer chunks */
    pool.started++;
  }
}

int rt_num_threads(void)
{
  int n = __atomic_load_n(&pool.nthreads, __ATOMIC_RELAXED);
  if (!n) {                              /* first use: the environment, once */
    int d = default_threads(), z = 0;
    __atomic_compare_exchange_n(&pool.nthreads, &z, d, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    n = __atomic_load_n(&pool.nthreads, __ATOMIC_RELAXED);
  }
  return n;
}
TD_API int td_get_num_threads(void) { return rt_num_threads(); }

TD_API int td_set_num_threads(int n)
{
  if (n < 1 || n > POOL_MAX) return rt_err(TD_ERR_ARG, "set_num_threads: %d is not in 1..%d", n, POOL_MAX);
  __atomic_store_n(&pool.nthreads, n, __ATOMIC_RELAXED);   /* extra workers stay idle; chunks follow nthreads */
  return 0;
}

void rt_parallel_for(int64_t n, int64_t grain, RtRangeFn fn, void *ctx)
{
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int nt = rt_num_threads();
  int64_t nch = (n + grain - 1) / grain;
  if (nch > nt) nch = nt;
  if (nch > 1 && !in_worker && !pthread_mutex_trylock(&submit_mu)) {
    pool_start(nt);
    if (nch > pool.started + 1) nch = pool.started + 1;
    if (nch > 1) {
      pool.fn = fn; pool.ctx = ctx; pool.n = n;
      __atomic_store_n(&pool.pending, (int)nch, __ATOMIC_RELAXED);
      __atomic_store_n(&pool.ticket, (uint64_t)nch << 32, __ATOMIC_RELEASE);
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
      return;
    }
    pthread_mutex_unlock(&submit_mu);
  }
  /* here, in a worker, or while another thread's job has the pool: the same
  ** chunks, one after another */
  for (int64_t c = 0; c < nch; c++) fn(ctx, n * c / nch, n * (c + 1) / nch);
}
