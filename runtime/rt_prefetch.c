/*
** rt_prefetch.c -- a DataLoader's worker threads: batches of rows gathered from
** CPU tensors (dim 0, the bytes index_select would copy) in a fixed order,
** prepared ahead on C threads while the host consumes earlier batches.
*/
#include "rt.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Design note ---------------------------------------------------------------------------
**
** Batch b (0-based) is rows order[b*bs .. min((b+1)*bs, nrows)) of every source
** tensor. Workers claim batches in increasing order from one counter, but only
** while b < taken + depth, so at most `depth` batches exist ahead of the host
** and batch b always lands in ring slot b % depth, which the host emptied when
** it took batch b - depth. The host takes batches strictly in order, waiting
** for the one it needs: the sequence never depends on the thread count or on
** which worker finished first.
**
** What a worker touches is thread-safe by the runtime's rules: it reads the
** retained sources (their storage never moves while retained), allocates
** results through rt_tensor_new (the caching allocator locks, small blocks
** are per thread, byte counts are atomic) and copies rows with memcpy. It
** never calls the dispatcher (no autograd, tracing, profiler or thread pool),
** and reports a failure through its slot: the host raises that message.
*/

#define PF_MAX_TENSORS 16

typedef struct {
  td_tensor *t[PF_MAX_TENSORS];
  int ready;                     /* set by the worker that filled it */
  int rc;                        /* 0, or the error code of a failed gather */
  char err[256];
} PfSlot;

struct td_prefetch {
  int ntensors;
  td_tensor *src[PF_MAX_TENSORS];   /* retained, contiguous, on the CPU */
  size_t row[PF_MAX_TENSORS];       /* bytes of one dim-0 row */
  int64_t *order;                   /* nrows 0-based row indices */
  int64_t nrows, bs, nbatches;
  int depth, nworkers;
  PfSlot *slots;                    /* depth of them */
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t ready_cv, space_cv;
  int64_t next_claim, taken;
  int stop;
};

/* Batch b into out[]: new contiguous tensors, rows copied from the sources. */
static int pf_gather(const td_prefetch *pf, int64_t b, td_tensor **out, char *err, size_t errn)
{
  int64_t lo = b * pf->bs, hi = lo + pf->bs < pf->nrows ? lo + pf->bs : pf->nrows;
  for (int k = 0; k < pf->ntensors; k++) {
    const td_tensor *s = pf->src[k];
    int64_t size[TD_MAX_DIMS];
    memcpy(size, s->sizes, sizeof size);
    size[0] = hi - lo;
    td_tensor *o = rt_tensor_new(s->ndim, size, s->scalar_type);
    if (!o) {
      snprintf(err, errn, "DataLoader worker: %s", td_last_error());
      for (int j = 0; j < k; j++) { td_release(out[j]); out[j] = NULL; }
      return TD_ERR_NOMEM;
    }
    size_t row = pf->row[k];
    const char *from = rt_ptr(s);
    char *to = rt_ptr(o);
    for (int64_t i = lo; i < hi; i++) memcpy(to + (i - lo) * row, from + pf->order[i] * row, row);
    out[k] = o;
  }
  return 0;
}

static void *pf_worker(void *arg)
{
  td_prefetch *pf = arg;
  for (;;) {
    pthread_mutex_lock(&pf->mu);
    while (!pf->stop && pf->next_claim < pf->nbatches && pf->next_claim >= pf->taken + pf->depth)
      pthread_cond_wait(&pf->space_cv, &pf->mu);
    if (pf->stop || pf->next_claim >= pf->nbatches) { pthread_mutex_unlock(&pf->mu); break; }
    int64_t b = pf->next_claim++;
    pthread_mutex_unlock(&pf->mu);

    PfSlot *sl = &pf->slots[b % pf->depth];
    td_tensor *out[PF_MAX_TENSORS] = { 0 };
    char err[256] = "";
    int rc = pf_gather(pf, b, out, err, sizeof err);

    pthread_mutex_lock(&pf->mu);
    memcpy(sl->t, out, sizeof out);
    sl->rc = rc;
    memcpy(sl->err, err, sizeof err);
    sl->ready = 1;
    pthread_cond_broadcast(&pf->ready_cv);
    pthread_mutex_unlock(&pf->mu);
  }
  return NULL;
}

/* -- Public API --------------------------------------------------------------------------- */

TD_API void td_prefetch_free(td_prefetch *pf)
{
  if (!pf) return;
  pthread_mutex_lock(&pf->mu);
  pf->stop = 1;
  pthread_cond_broadcast(&pf->space_cv);
  pthread_mutex_unlock(&pf->mu);
  for (int i = 0; i < pf->nworkers; i++) pthread_join(pf->threads[i], NULL);
  for (int s = 0; pf->slots && s < pf->depth; s++)
    for (int k = 0; k < pf->ntensors; k++) td_release(pf->slots[s].t[k]);
  for (int k = 0; k < pf->ntensors; k++) td_release(pf->src[k]);
  pthread_mutex_destroy(&pf->mu);
  pthread_cond_destroy(&pf->ready_cv);
  pthread_cond_destroy(&pf->space_cv);
  free(pf->slots); free(pf->threads); free(pf->order); free(pf);
}

TD_API td_prefetch *td_prefetch_new(int ntensors, td_tensor *const *tensors, const int64_t *order, int64_t nrows,
                                    int64_t batch_size, int nworkers, int depth)
{
  static const char *fn = "DataLoader";
  if (ntensors < 1 || ntensors > PF_MAX_TENSORS)
    return rt_errp(TD_ERR_ARG, "%s: workers gather from 1 to %d tensors, got %d", fn, PF_MAX_TENSORS, ntensors);
  if (batch_size < 1) return rt_errp(TD_ERR_ARG, "%s: batch_size must be positive, got %lld", fn, (long long)batch_size);
  if (nworkers < 0 || nworkers > 64) return rt_errp(TD_ERR_ARG, "%s: num_workers must be in 0..64, got %d", fn, nworkers);
  if (depth < 1 || depth > 4096) return rt_errp(TD_ERR_ARG, "%s: prefetch depth must be in 1..4096, got %d", fn, depth);
  if (nrows < 0 || (nrows > 0 && !order)) return rt_errp(TD_ERR_ARG, "%s: %lld rows without an order", fn, (long long)nrows);
  for (int k = 0; k < ntensors; k++) {
    const td_tensor *t = tensors[k];
    if (!t) return rt_errp(TD_ERR_ARG, "%s: tensor %d is NULL (freed?)", fn, k + 1);
    if (t->device_type != TD_CPU || !t->ptr)
      return rt_errp(TD_ERR_DEVICE, "%s: worker threads read CPU memory, but tensor %d is %s", fn, k + 1,
                     t->device_type != TD_CPU ? "on opencl" : "traced (no data)");
    if (t->ndim < 1) return rt_errp(TD_ERR_SHAPE, "%s: tensor %d is 0-dim; rows are taken along dim 1", fn, k + 1);
    for (int64_t i = 0; i < nrows; i++)
      if (order[i] < 0 || order[i] >= t->sizes[0])
        return rt_errp(TD_ERR_INDEX, "%s: row %lld is out of range for tensor %d with %lld rows", fn,
                       (long long)order[i] + 1, k + 1, (long long)t->sizes[0]);
  }
  td_prefetch *pf = calloc(1, sizeof *pf);
  if (!pf) return rt_errp(TD_ERR_NOMEM, "%s: out of memory", fn);
  pthread_mutex_init(&pf->mu, NULL);
  pthread_cond_init(&pf->ready_cv, NULL);
  pthread_cond_init(&pf->space_cv, NULL);
  pf->ntensors = ntensors;
  pf->nrows = nrows; pf->bs = batch_size; pf->nbatches = (nrows + batch_size - 1) / batch_size;
  pf->depth = depth;
  for (int k = 0; k < ntensors; k++) {
    /* a strided source becomes one contiguous copy, made here on the host's thread */
    pf->src[k] = rt_as_contig(tensors[k]);
    if (!pf->src[k]) { td_prefetch_free(pf); return NULL; }
    const td_tensor *s = pf->src[k];
    pf->row[k] = s->sizes[0] ? (size_t)(s->nelem / s->sizes[0]) * (size_t)rt_dtype_size(s->scalar_type) : 0;
  }
  pf->order = malloc((size_t)(nrows ? nrows : 1) * sizeof *pf->order);
  pf->slots = calloc((size_t)depth, sizeof *pf->slots);
  pf->threads = calloc((size_t)(nworkers ? nworkers : 1), sizeof *pf->threads);
  if (!pf->order || !pf->slots || !pf->threads) { td_prefetch_free(pf); return rt_errp(TD_ERR_NOMEM, "%s: out of memory", fn); }
  if (nrows) memcpy(pf->order, order, (size_t)nrows * sizeof *pf->order);
  for (int i = 0; i < nworkers; i++) {
    if (pthread_create(&pf->threads[i], NULL, pf_worker, pf)) {
      if (i == 0) { td_prefetch_free(pf); return rt_errp(TD_ERR_STATE, "%s: cannot start a worker thread", fn); }
      break;                   /* fewer workers: the same batches, a little later */
    }
    pf->nworkers = i + 1;
  }
  return pf;
}

TD_API int td_prefetch_next(td_prefetch *pf, td_tensor **out)
{
  if (!pf) return rt_err(TD_ERR_ARG, "DataLoader: no prefetcher");
  if (pf->taken >= pf->nbatches) return 0;
  int64_t b = pf->taken;
  if (pf->nworkers == 0) {              /* no threads: gather on the caller's */
    char err[256] = "";
    int rc = pf_gather(pf, b, out, err, sizeof err);
    if (rc) return rt_err(rc, "%s", err);
    pf->taken++;
    return 1;
  }
  PfSlot *sl = &pf->slots[b % pf->depth];
  pthread_mutex_lock(&pf->mu);
  while (!sl->ready) pthread_cond_wait(&pf->ready_cv, &pf->mu);
  int rc = sl->rc;
  char err[256];
  memcpy(err, sl->err, sizeof err);
  for (int k = 0; k < pf->ntensors; k++) { out[k] = sl->t[k]; sl->t[k] = NULL; }
  sl->ready = 0;
  pf->taken++;
  pthread_cond_broadcast(&pf->space_cv);
  pthread_mutex_unlock(&pf->mu);
  if (rc) return rt_err(rc, "%s", err);
  return 1;
}
