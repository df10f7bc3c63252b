/*
** rt_prof.c -- the profiler's event log: ops from the dispatcher, backward
** nodes, compiled kernels and eager plan steps, compiles and host ranges, each
** with its wall-clock interval, nesting depth and the bytes allocated inside.
** The Lua layer (tide.profiler) aggregates them into self and total times.
** Events go into one growable array under a lock (taken only while on); an
** event is addressed by index, so a growth between its begin and end is safe.
*/
#include "rt.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <pthread.h>
#include <stdatomic.h>

int rt_prof_on;

static td_prof_event *evs;
static int64_t nev, cap;
static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int next_tid;
static _Thread_local int my_tid, depth;
static _Thread_local int64_t alloc_bytes;          /* allocated on this thread while on */

static int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void (*rt_prof_device_flush)(void);

void rt_prof_set_device_time(int ev, int64_t ns)
{
  pthread_mutex_lock(&prof_mu);
  if (ev >= 0 && ev < nev) evs[ev].dev_ns = ns;
  pthread_mutex_unlock(&prof_mu);
}

/* Enabling clears the events; disabling first waits for the device's times
** of the launches made while on (they come after the host's intervals). */
TD_API int td_profiler_enable(int on)
{
  if (rt_prof_device_flush) rt_prof_device_flush();
  pthread_mutex_lock(&prof_mu);
  int prev = rt_prof_on;
  if (on && !prev) nev = 0;
  rt_prof_on = on != 0;
  pthread_mutex_unlock(&prof_mu);
  return prev;
}

TD_API int64_t td_profiler_count(void) { return nev; }
TD_API const td_prof_event *td_profiler_events(void) { return evs; }

void rt_prof_alloc(int64_t bytes) { alloc_bytes += bytes; }

int rt_prof_begin(int kind, const char *name, int nin, td_tensor *const *in)
{
  td_prof_event e;
  memset(&e, 0, sizeof e);
  if (!my_tid) my_tid = atomic_fetch_add(&next_tid, 1) + 1;
  e.kind = kind; e.depth = depth++; e.tid = my_tid; e.device = kind == TD_PROF_DEVICE ? TD_OPENCL : -1;
  snprintf(e.name, sizeof e.name, "%s", name ? name : "?");
  size_t k = 0;
  for (int i = 0; i < nin && k + 2 < sizeof e.shapes; i++) {
    if (!in[i]) continue;
    if (e.device < 0) e.device = in[i]->device_type;
    k += (size_t)snprintf(e.shapes + k, sizeof e.shapes - k, i ? " %s" : "%s", RT_SHAPE(in[i]));
  }
  e.bytes = alloc_bytes;                     /* the count at begin; end turns it into a difference */
  pthread_mutex_lock(&prof_mu);
  int idx = -1;
  if (rt_prof_on && nev < INT32_MAX) {
    if (nev == cap) {
      int64_t nc = cap ? 2 * cap : 4096;
      td_prof_event *v = realloc(evs, (size_t)nc * sizeof *v);
      if (v) { evs = v; cap = nc; }
    }
    if (nev < cap) { idx = (int)nev++; e.t0 = now_ns(); evs[idx] = e; }
  }
  pthread_mutex_unlock(&prof_mu);
  if (idx < 0) depth--;
  return idx;
}

void rt_prof_end(int ev)
{
  if (ev < 0) return;
  int64_t t = now_ns();
  depth--;
  pthread_mutex_lock(&prof_mu);
  if (ev < nev) { evs[ev].t1 = t; evs[ev].bytes = alloc_bytes - evs[ev].bytes; }
  pthread_mutex_unlock(&prof_mu);
}

TD_API int td_profiler_push(const char *name) { return rt_prof_on ? rt_prof_begin(TD_PROF_RANGE, name, 0, NULL) : -1; }
TD_API void td_profiler_pop(int ev) { rt_prof_end(ev); }
