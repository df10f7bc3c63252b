/*
** cl_mem.c -- device memory and the queue's discipline: a caching allocator
** for device buffers, uploads that do not wait for the device, the count of
** host waits, and the profiler's device times.
**
** Allocator. Buffers come in size classes (4 per power of two, as the CPU's
** rt_storage.c: 2^k, 1.25, 1.5, 1.75 x 2^k, from 256 bytes) and go back to
** their class's free list when their storage dies. Reusing one at once is
** safe because the queue is in order: the commands of the buffer's next owner
** run after those of its last. The bytes held (in use, rounded up to their
** class, plus cached) stay under the device's global memory, or the limit of
** tide.opencl.set_memory_limit; past it, or when the driver refuses, the cache
** is emptied and the allocation tried once more, then it fails with "out of
** device memory" and the sizes (the dispatcher prefixes the op's name).
**
** Queue. Kernels, copies and uploads are enqueued without waiting; the host
** waits only where it reads values (cl_read, an index op's error slot, the
** compiled executor's effects on CPU tensors) or on td_opencl_finish. An
** upload's source is first copied into a host staging block (or, for a
** private contiguous copy, that tensor is kept), so the caller may write its
** own memory at once; the blocks are freed when their writes are complete.
**
** Profiling. The queue is made with CL_QUEUE_PROFILING_ENABLE. While the
** profiler is on, every launch gets a "device" event (named by its kernel)
** and keeps its cl_event; when the profile ends, the device's start and end
** times of each become the event's dev_ns (td_prof_event).
*/
#include "cl.h"
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;

/* -- Size classes ------------------------------------------------------------------------------ */

#define CLS_MINLOG 8
#define NCLS (4 * 56)
static struct { cl_mem *v; int n, cap; } freel[NCLS];
static int64_t held, cached, limit_user;   /* bytes; limit_user 0: the device's global memory */
static int64_t n_created, n_reused, n_oom_flush;

static int size_class(size_t n, size_t *rounded)
{
  if (n < ((size_t)1 << CLS_MINLOG)) n = (size_t)1 << CLS_MINLOG;
  int k = 63 - __builtin_clzll(n);               /* 2^k <= n */
  size_t base = (size_t)1 << k, q = base >> 2;
  int j = (int)((n - base + q - 1) / q);         /* 0..4 quarters above 2^k */
  if (j == 4) { k++; j = 0; base <<= 1; q <<= 1; }
  *rounded = base + (size_t)j * q;
  return (k - CLS_MINLOG) * 4 + j;
}

static int64_t mem_limit(void) { return limit_user > 0 ? limit_user : cl_limits()->global_mem; }

/* release every cached buffer (mem_mu held) */
static void flush_cache(void)
{
  for (int c = 0; c < NCLS; c++) {
    for (int i = 0; i < freel[c].n; i++) clReleaseMemObject(freel[c].v[i]);
    freel[c].n = 0;
  }
  held -= cached; cached = 0;
}

static char *fmt_bytes(char *b, size_t n, int64_t v)
{
  if (v >= ((int64_t)1 << 30)) snprintf(b, n, "%.2f GiB", (double)v / (1 << 30));
  else if (v >= ((int64_t)1 << 20)) snprintf(b, n, "%.2f MiB", (double)v / (1 << 20));
  else snprintf(b, n, "%lld bytes", (long long)v);
  return b;
}

/* the error for an allocation of n bytes that does not fit (mem_mu held) */
static void *oom(size_t n, const char *why)
{
  char a[32], b[32], c[32];
  return rt_errp(TD_ERR_NOMEM, "out of device memory: %zu bytes (%s) asked on %s, %s in use of %s%s%s",
                 n, fmt_bytes(a, sizeof a, (int64_t)n), cl_device_name(), fmt_bytes(b, sizeof b, held),
                 fmt_bytes(c, sizeof c, mem_limit()), why ? "; " : "", why ? why : "");
}

static cl_mem buf_get(size_t n)
{
  size_t r; int c = size_class(n, &r);
  if (c >= NCLS || (int64_t)r > cl_limits()->max_alloc) {
    char a[32], why[96];
    snprintf(why, sizeof why, "the largest buffer the device allows is %s", fmt_bytes(a, sizeof a, cl_limits()->max_alloc));
    return oom(n, why);
  }
  if (freel[c].n) { cached -= (int64_t)r; n_reused++; return freel[c].v[--freel[c].n]; }
  for (int attempt = 0; attempt < 2; attempt++) {
    if (held + (int64_t)r > mem_limit()) {
      if (attempt || !cached) return oom(n, NULL);
      flush_cache(); n_oom_flush++;
      continue;
    }
    cl_int st;
    cl_mem m = clCreateBuffer(cl_ctx(), CL_MEM_READ_WRITE, r, NULL, &st);
    /* A CPU device (PoCL) keeps buffers in host memory and allocates them at
    ** first use, where a failed allocation is an assertion that aborts the
    ** process: ask the host for the bytes first (not touched, so nothing is
    ** faulted in) and refuse the buffer if it cannot give them. */
    if (st == CL_SUCCESS && cl_limits()->cpu && r >= ((size_t)16 << 20)) {
      void *probe = malloc(r);
      if (!probe) { clReleaseMemObject(m); return oom(n, "the host cannot hold it (a CPU device's buffers live in host memory)"); }
      free(probe);
    }
    if (st == CL_SUCCESS) { held += (int64_t)r; n_created++; return m; }
    if (attempt || !cached || (st != CL_MEM_OBJECT_ALLOCATION_FAILURE && st != CL_OUT_OF_RESOURCES &&
                               st != CL_OUT_OF_HOST_MEMORY))
      return oom(n, cl_status_name(st));
    flush_cache(); n_oom_flush++;
  }
  return NULL;
}

RtStorage *cl_storage_new(size_t nbytes)
{
  if (cl_init(-1)) return NULL;
  RtStorage *s = calloc(1, sizeof *s);
  if (!s) return rt_errp(TD_ERR_NOMEM, "opencl: out of host memory");
  pthread_mutex_lock(&mem_mu);
  cl_mem m = buf_get(nbytes);
  pthread_mutex_unlock(&mem_mu);
  if (!m) { free(s); return NULL; }
  s->refcount = 1; s->device_type = TD_OPENCL; s->nbytes = nbytes; s->dev = m;
  rt_mem_add(TD_OPENCL, (int64_t)nbytes);
  return s;
}

void cl_storage_free(RtStorage *s)
{
  size_t r; int c = size_class(s->nbytes, &r);
  cl_mem m = (cl_mem)s->dev;
  free(s);
  if (cl_closed()) return;
  pthread_mutex_lock(&mem_mu);
  if (freel[c].n == freel[c].cap) {
    int cap = freel[c].cap ? 2 * freel[c].cap : 8;
    cl_mem *v = realloc(freel[c].v, (size_t)cap * sizeof *v);
    if (v) { freel[c].v = v; freel[c].cap = cap; }
  }
  if (freel[c].n < freel[c].cap) { freel[c].v[freel[c].n++] = m; cached += (int64_t)r; m = NULL; }
  else held -= (int64_t)r;
  pthread_mutex_unlock(&mem_mu);
  /* commands still queued on the buffer keep it alive (OpenCL's own refcount) */
  if (m) clReleaseMemObject(m);
}

void cl_empty_cache(void)
{
  if (cl_closed()) return;
  pthread_mutex_lock(&mem_mu);
  flush_cache();
  pthread_mutex_unlock(&mem_mu);
}

int64_t cl_cached_bytes(void)
{
  pthread_mutex_lock(&mem_mu);
  int64_t c = cached;
  pthread_mutex_unlock(&mem_mu);
  return c;
}

TD_API int64_t td_opencl_memory_limit(int64_t bytes)
{
  pthread_mutex_lock(&mem_mu);
  int64_t prev = limit_user;
  if (bytes >= 0) limit_user = bytes;
  pthread_mutex_unlock(&mem_mu);
  return prev;
}

TD_API void td_opencl_memory_stats(int64_t *out)
{
  pthread_mutex_lock(&mem_mu);
  out[0] = n_created; out[1] = n_reused; out[2] = n_oom_flush; out[3] = held; out[4] = cached;
  pthread_mutex_unlock(&mem_mu);
  out[5] = cl_sync_count();
}

/* -- Uploads ----------------------------------------------------------------------------------- */

/* an upload in flight: its event and what its source is held by */
typedef struct { cl_event ev; void *stage; td_tensor *hold; } Pending;
static Pending *pend;
static int npend, cappend;
static int64_t n_syncs;

static void pend_free(Pending *p)
{
  clReleaseEvent(p->ev);
  free(p->stage);
  td_release(p->hold);
}

/* free the staging of finished uploads (all of them: the queue is idle) */
static void reap(int all)
{
  int k = 0;
  for (int i = 0; i < npend; i++) {
    cl_int st = CL_COMPLETE;
    if (!all) clGetEventInfo(pend[i].ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    if (st == CL_COMPLETE || st < 0) pend_free(&pend[i]);
    else pend[k++] = pend[i];
  }
  npend = k;
}

int cl_upload(cl_mem m, size_t off, const void *src, size_t n, td_tensor *hold, const char *op)
{
  if (!n) return 0;
  void *stage = NULL;
  if (!hold) {                       /* the caller's memory: a copy it cannot touch */
    if (!(stage = malloc(n))) return rt_err(TD_ERR_NOMEM, "%s: out of host memory staging %zu bytes", op, n);
    memcpy(stage, src, n);
    src = stage;
  } else td_retain(hold);
  cl_event ev = NULL;
  pthread_mutex_lock(&mem_mu);
  if (npend) reap(0);
  int rc = cl_check(clEnqueueWriteBuffer(cl_queue(), m, CL_FALSE, off, n, src, 0, NULL, &ev), op, "clEnqueueWriteBuffer");
  if (!rc && npend == cappend) {
    int cap = cappend ? 2 * cappend : 16;
    Pending *v = realloc(pend, (size_t)cap * sizeof *v);
    if (v) { pend = v; cappend = cap; }
  }
  if (!rc && npend < cappend) pend[npend++] = (Pending){ ev, stage, hold };
  else {                             /* nowhere to keep it: wait for this one */
    if (!rc) { clWaitForEvents(1, &ev); clReleaseEvent(ev); }
    free(stage); td_release(hold);
  }
  pthread_mutex_unlock(&mem_mu);
  return rc;
}

/* The host waits for the queue: count it, and everything enqueued is done. */
void cl_synced(void)
{
  pthread_mutex_lock(&mem_mu);
  n_syncs++;
  if (npend) reap(1);
  pthread_mutex_unlock(&mem_mu);
}

int64_t cl_sync_count(void)
{
  pthread_mutex_lock(&mem_mu);
  int64_t n = n_syncs;
  pthread_mutex_unlock(&mem_mu);
  return n;
}

/* -- Device times for the profiler --------------------------------------------------------------- */

typedef struct { int ev; cl_event e; } ProfEv;
static ProfEv *pev;
static int npev, cappev;
static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;

int cl_prof_open(const char *name) { return rt_prof_on ? rt_prof_begin(TD_PROF_DEVICE, name, 0, NULL) : -1; }

void cl_prof_close(int h, cl_event e)
{
  if (h < 0) { if (e) clReleaseEvent(e); return; }
  rt_prof_end(h);
  if (!e) return;
  pthread_mutex_lock(&prof_mu);
  if (npev == cappev) {
    int cap = cappev ? 2 * cappev : 256;
    ProfEv *v = realloc(pev, (size_t)cap * sizeof *v);
    if (v) { pev = v; cappev = cap; }
  }
  if (npev < cappev) pev[npev++] = (ProfEv){ h, e };
  else clReleaseEvent(e);
  pthread_mutex_unlock(&prof_mu);
}

/* rt_prof.c's hook when a profile ends (or a new one clears the events):
** wait for the device, then each launch's device time */
static void prof_flush(void)
{
  pthread_mutex_lock(&prof_mu);
  if (npev && !cl_closed()) {
    clFinish(cl_queue());
    for (int i = 0; i < npev; i++) {
      cl_ulong t0 = 0, t1 = 0;
      if (clGetEventProfilingInfo(pev[i].e, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
          clGetEventProfilingInfo(pev[i].e, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 >= t0)
        rt_prof_set_device_time(pev[i].ev, (int64_t)(t1 - t0));
      clReleaseEvent(pev[i].e);
    }
  }
  npev = 0;
  pthread_mutex_unlock(&prof_mu);
}

void cl_mem_init(void) { rt_prof_device_flush = prof_flush; }
