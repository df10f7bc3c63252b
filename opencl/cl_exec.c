/*
** cl_exec.c -- kernels of the kernel IR on the OpenCL device: the printer's
** capabilities for this device, compiling a batch of kernels into one program
** (memory table by kernel hash first), and launching one: its parameters,
** its work groups, the scratch of column sums and column-mode partials.
*/

/*
** Launch. Every kernel runs as groups of caps.wg work items (cg_walk.c,
** "Work groups"); the number of groups only spreads rows (flat ranges, units)
** over the device, it never changes a result: each row's sums run in one
** group in a fixed tree. At most ~16 groups per compute unit are launched;
** the groups stride over the rest.
** - row mode: rows [0, rows); with column sums (CG_CSUM) blocks of rows, then
**   a finishing kernel adds each column's blocks in block order (in double
**   where the device has it), as cg_cache.c's run_csums does on the CPU;
** - column mode: phase 1 over units [0, units), phase 2 over rows [units,
**   units + rows): two launches, the queue orders them;
** - flat mode: the range [0, flat) over the whole grid.
** Scratch buffers (partials) are device buffers kept for the next launch and
** grown on demand.
*/
#include "cl.h"
#include "../jit/cg_emit.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t exec_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t n_launches, n_groups;      /* td_opencl_stats */

/* -- Capabilities ---------------------------------------------------------------------------- */

const CgCaps *ocl_caps(void)
{
  static CgCaps c;
  if (!c.wg) {
    const ClLimits *l = cl_limits();
    const char *e = getenv("TIDE_OPENCL_WG");
    /* a GPU: 256 items (8 warps); a CPU device runs a group's items in loops
    ** split at every barrier: 16 (PoCL: row sums 256x256 in 44 us, 383 at 256) */
    int want = e && atoi(e) > 0 ? atoi(e) : l->cpu ? 16 : 256, wg = 1;
    while (wg * 2 <= want && wg * 2 <= l->max_wg && wg * 2 * 8 * 4 <= l->local_mem) wg *= 2;
    c = (CgCaps){ .vlanes = 4, .libmvec = 0, .inline_vmath = 0, .nt = 0, .prefetch = 0, .row_arrays = 0, .unroll = 0,
                  .fp64 = l->fp64, .wg = wg };
  }
  return &c;
}

/* -- Compiled kernels ------------------------------------------------------------------------ */

typedef struct { uint64_t hash; cl_kernel k; } Slot;
static Slot *tab;
static size_t tab_cap, tab_n;

static cl_kernel tab_get(uint64_t h)
{
  if (!tab_cap) return NULL;
  for (size_t i = h & (tab_cap - 1);; i = (i + 1) & (tab_cap - 1)) {
    if (!tab[i].k) return NULL;
    if (tab[i].hash == h) return tab[i].k;
  }
}

static void tab_put(uint64_t h, cl_kernel k)
{
  if ((tab_n + 1) * 2 > tab_cap) {
    size_t cap = tab_cap ? tab_cap * 2 : 256;
    Slot *t = calloc(cap, sizeof *t);
    if (!t) return;                         /* not kept: found in its program next time */
    for (size_t j = 0; j < tab_cap; j++)
      if (tab[j].k) {
        size_t i = tab[j].hash & (cap - 1);
        while (t[i].k) i = (i + 1) & (cap - 1);
        t[i] = tab[j];
      }
    free(tab); tab = t; tab_cap = cap;
  }
  size_t i = h & (tab_cap - 1);
  while (tab[i].k && tab[i].hash != h) i = (i + 1) & (tab_cap - 1);
  if (!tab[i].k) tab_n++;
  tab[i].hash = h; tab[i].k = k;
}

int ocl_compile(CgKernel *const *ks, int n, cl_kernel *out)
{
  if (n <= 0) return 0;
  if (cl_init(-1)) return TD_ERR_DEVICE;
  CgKernel **miss = malloc(sizeof *miss * (size_t)n);
  const char **names = malloc(sizeof *names * (size_t)n);
  cl_kernel *mk = malloc(sizeof *mk * (size_t)n);
  if (!miss || !names || !mk) { free(miss); free(names); free(mk); return rt_err(TD_ERR_NOMEM, "opencl: out of memory"); }
  int nm = 0, rc = 0;
  pthread_mutex_lock(&exec_mu);
  for (int i = 0; i < n; i++) {
    if ((out[i] = tab_get(ks[i]->hash))) continue;
    int dup = 0;
    for (int j = 0; j < nm && !dup; j++) dup = miss[j]->hash == ks[i]->hash;
    if (!dup) { names[nm] = ks[i]->name; miss[nm++] = ks[i]; }
  }
  pthread_mutex_unlock(&exec_mu);
  if (nm) {
    int wrc = 0;
    char *src = ocl_source_batch(miss, nm, ocl_caps(), &wrc);
    if (!src) rc = TD_ERR_NOMEM;
    else if (wrc) rc = wrc;
    else rc = ocl_program_kernels(src, nm, names, mk, miss[0]->name);
    free(src);
    pthread_mutex_lock(&exec_mu);
    for (int j = 0; j < nm && !rc; j++) tab_put(miss[j]->hash, mk[j]);
    pthread_mutex_unlock(&exec_mu);
    for (int i = 0; i < n && !rc; i++)
      if (!out[i]) for (int j = 0; j < nm; j++) if (miss[j]->hash == ks[i]->hash) { out[i] = mk[j]; break; }
  }
  free(miss); free(names); free(mk);
  return rc;
}

/* -- Scratch --------------------------------------------------------------------------------- */

static struct { cl_mem m; size_t n; } scratch[CG_MAX_SCRATCH];

/* scratch buffer i of at least n bytes (zeroed when zero) */
static cl_mem scratch_get(int i, size_t n, int zero, const char *what)
{
  if (n == 0) n = 64;
  if (scratch[i].n < n) {
    if (scratch[i].m) clReleaseMemObject(scratch[i].m);
    scratch[i].m = NULL; scratch[i].n = 0;
    cl_int st;
    cl_mem m = clCreateBuffer(cl_ctx(), CL_MEM_READ_WRITE, n, NULL, &st);
    if (st != CL_SUCCESS) return cl_check(st, what, "clCreateBuffer (partial sums)"), NULL;
    scratch[i].m = m; scratch[i].n = n;
  }
  if (zero) {
    cl_uchar z = 0;
    if (cl_check(clEnqueueFillBuffer(cl_queue(), scratch[i].m, &z, 1, 0, n, 0, NULL, NULL), what, "clEnqueueFillBuffer"))
      return NULL;
  }
  return scratch[i].m;
}

/* a dtype's size on the device (float64 stands as float32 without cl_khr_fp64) */
static size_t dev_size(int dt) { return dt == TD_FLOAT64 && !ocl_caps()->fp64 ? 4 : (size_t)rt_dtype_size(dt); }

/* -- Column sums: each column's blocks in order ------------------------------------------------ */

static const char csum_src[] =
  "/* out[off + c*ist] = sum over blocks q in order of part[q*ncol + c] */\n"
  "#define FIN(NAME, PT, OT) kernel void NAME(global const PT *part, long nblk, long ncol, global OT *o, long off, \\\n"
  "    long ist) { long c = get_global_id(0); if (c >= ncol) return; ACC s = 0; \\\n"
  "  for (long q = 0; q < nblk; q++) s += (ACC)part[q * ncol + c]; o[off + c * ist] = (OT)s; }\n"
  "FIN(fin_ff, float, float)\nFIN(fin_fd, float, DT)\nFIN(fin_df, DT, float)\nFIN(fin_dd, DT, DT)\n";

static int csum_finish(const CgKernel *k, int in, cl_mem part, int64_t nblk, const OclBuf *bufs)
{
  const CgAccess *a = &k->acc[k->ins[in].acc];
  int fp64 = ocl_caps()->fp64;
  char src[1024];
  snprintf(src, sizeof src, "%s#define ACC %s\n#define DT %s\n%s",
           fp64 ? "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n" : "",
           fp64 ? "double" : "float", fp64 ? "double" : "float", csum_src);
  bool p64 = k->ins[in].dtype == TD_FLOAT64, o64 = k->buf_dtype[a->buf] == TD_FLOAT64;
  const char *name = p64 ? (o64 ? "fin_dd" : "fin_df") : (o64 ? "fin_fd" : "fin_ff");
  cl_kernel kk;
  if (ocl_program_kernels(src, 1, &name, &kk, k->name)) return TD_ERR_DEVICE;
  cl_long nb = nblk, nc = k->inner, off = bufs[a->buf].off + k->buf_base[a->buf] + a->offset, ist = a->istride;
  cl_mem o = bufs[a->buf].m;
  int rc = CL_ARGV(kk, 0, part, k->name);
  if (!rc) rc = CL_ARGV(kk, 1, nb, k->name);
  if (!rc) rc = CL_ARGV(kk, 2, nc, k->name);
  if (!rc) rc = CL_ARGV(kk, 3, o, k->name);
  if (!rc) rc = CL_ARGV(kk, 4, off, k->name);
  if (!rc) rc = CL_ARGV(kk, 5, ist, k->name);
  if (!rc) rc = cl_run(kk, nc, k->name);
  return rc;
}

/* -- Launch ------------------------------------------------------------------------------------- */

/* one launch of groups x wg items over units [r0, r1) */
static int launch(const CgKernel *k, cl_kernel ck, int64_t r0, int64_t r1, int64_t groups, const OclBuf *bufs,
                  cl_mem *scr, const void *par, size_t npar)
{
  const CgCaps *c = ocl_caps();
  int64_t maxg = (int64_t)cl_limits()->units * 16;
  if (groups > maxg) groups = maxg;
  if (groups < 1) groups = 1;
  cl_long a0 = r0, a1 = r1;
  int rc = CL_ARGV(ck, 0, a0, k->name), nb = k->nbuf - k->nscratch, i = 2;
  if (!rc) rc = CL_ARGV(ck, 1, a1, k->name);
  for (int b = 0; b < k->nbuf && !rc; b++) {
    cl_mem m = b < nb ? bufs[b].m : scr[b - nb];
    cl_long off = b < nb ? bufs[b].off + k->buf_base[b] : 0;   /* buffer bases: cg.h */
    rc = CL_ARGV(ck, i, m, k->name);
    if (!rc) rc = CL_ARGV(ck, i + 1, off, k->name);
    i += 2;
  }
  if (!rc) rc = cl_arg(ck, i, npar, par, k->name);
  if (rc) return rc;
  size_t lw = (size_t)c->wg, gw = (size_t)groups * lw;
  n_launches++; n_groups += groups;
  cl_event e = NULL;
  int h = cl_prof_open(k->name);
  cl_int st = clEnqueueNDRangeKernel(cl_queue(), ck, 1, NULL, &gw, &lw, 0, NULL, h >= 0 ? &e : NULL);
  cl_prof_close(h, e);
  return cl_check(st, k->name, "clEnqueueNDRangeKernel");
}

int ocl_kernel_run(const CgKernel *k, cl_kernel ck, const OclBuf *bufs, const double *args)
{
  const CgCaps *c = ocl_caps();
  int nd = cg_kernel_ndims(k);
  size_t npar = (size_t)nd * 8 + (c->fp64 ? (size_t)k->nargs * 8 : ((size_t)k->nargs * 4 + 7) / 8 * 8);
  char *par = calloc(1, npar + 8);
  if (!par) return rt_err(TD_ERR_NOMEM, "%s: out of memory", k->name);
  int64_t *dims = (int64_t *)par;
  cg_kernel_dims(k, dims);
  cg_kernel_geo(k, dims);
  for (int a = 0; a < k->nargs; a++) {
    if (c->fp64) ((double *)(par + nd * 8))[a] = args[a];
    else ((float *)(par + nd * 8))[a] = (float)args[a];
  }
  int64_t rows = cg_kernel_rows(k), inner = k->inner > 0 ? k->inner : 1;
  int ns = k->nscratch, rc = 0;
  cl_mem scr[CG_MAX_SCRATCH] = { 0 };
  pthread_mutex_lock(&exec_mu);
  if (k->cred > 0) {                        /* column mode: partials of units, then rows */
    int64_t units = dims[CG_DIM_UNITS];
    for (int i = 0; i < ns && !rc; i++)
      if (!(scr[i] = scratch_get(i, (size_t)(units * k->ctile) * dev_size(k->buf_dtype[k->nbuf - ns + i]), 0, k->name)))
        rc = TD_ERR_DEVICE;
    if (!rc && units > 0) rc = launch(k, ck, 0, units, units, bufs, scr, par, npar);
    if (!rc && rows > 0) rc = launch(k, ck, units, units + rows, rows, bufs, scr, par, npar);
  } else if (ns > 0) {                      /* column sums: blocks of rows, then each column's blocks */
    int64_t nblk = dims[CG_DIM_NBLK];
    for (int i = 0; i < ns && !rc; i++) {
      const CgIns *in = NULL;
      for (int j = 0, q = 0; j < k->nins && !in; j++) if (k->ins[j].kind == CG_CSUM && q++ == i) in = &k->ins[j];
      if (!(scr[i] = scratch_get(i, (size_t)(nblk * inner) * dev_size(in ? in->dtype : TD_FLOAT64), 1, k->name)))
        rc = TD_ERR_DEVICE;
    }
    if (!rc && rows > 0) rc = launch(k, ck, 0, rows, nblk, bufs, scr, par, npar);
    for (int j = 0, q = 0; j < k->nins && !rc; j++)
      if (k->ins[j].kind == CG_CSUM) rc = csum_finish(k, j, scr[q++], nblk, bufs);
  } else if (k->flat > 0) {
    int64_t g = (k->flat + 4 * c->wg - 1) / (4 * c->wg);
    rc = launch(k, ck, 0, 1, g, bufs, scr, par, npar);
  } else if (rows > 0) {
    rc = launch(k, ck, 0, rows, rows, bufs, scr, par, npar);
  }
  pthread_mutex_unlock(&exec_mu);
  free(par);
  return rc;
}

/* -- Statistics ----------------------------------------------------------------------------------- */

TD_API void td_opencl_stats(int64_t *out)
{
  ClProgStats s;
  ocl_prog_stats(&s);
  out[0] = s.builds; out[1] = s.disk_loads;
  pthread_mutex_lock(&exec_mu);
  out[2] = n_launches; out[3] = n_groups;
  pthread_mutex_unlock(&exec_mu);
}

TD_API int td_opencl_build(const char *src)
{
  if (!src) return rt_err(TD_ERR_ARG, "opencl_build: source expected");
  if (cl_init(-1)) return TD_ERR_DEVICE;
  return ocl_program_kernels(src, 0, NULL, NULL, "opencl_build");
}
