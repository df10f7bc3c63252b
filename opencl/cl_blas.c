/*
** cl_blas.c -- matmul on the OpenCL device with rt_blas.c's semantics (1-D
** operands promoted to a row/column and their dim removed, broadcast batch
** dims): float32/float64 products through CLBlast, integer products in a
** generated kernel.
*/
#include "cl.h"
#include <clblast_c.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- CLBlast, loaded at the first float product (cl_dl.h) ------------------------------------
** TIDE_CLBLAST or libclblast.so.1; the routines below call these four through
** the table (a direct call fails the link of libtide.so: -z defs). */
#define BLAST_FNS(_) _(Sgemm) _(Dgemm) _(SgemmBatched) _(DgemmBatched) _(OverrideParameters)
static struct {
#define BLAST_FIELD(f) __typeof__(CLBlast##f) *f;
  BLAST_FNS(BLAST_FIELD)
#undef BLAST_FIELD
} blast;
static pthread_once_t blast_once = PTHREAD_ONCE_INIT;
static char blast_err[512];

static void blast_open(void)
{
  static const char *const syms[] = {
#define BLAST_NAME(f) "CLBlast" #f,
    BLAST_FNS(BLAST_NAME)
#undef BLAST_NAME
  };
  void *fns[sizeof syms / sizeof *syms];
  const char *name = getenv("TIDE_CLBLAST");
  if (!name || !*name) name = "libclblast.so.1";
  if (ocl_dl(name, "apt install libclblast1; float matmul on OpenCL needs it", syms, fns,
             (int)(sizeof syms / sizeof *syms))) {
    snprintf(blast_err, sizeof blast_err, "%s", td_last_error());
    return;
  }
  int i = 0;
#define BLAST_SET(f) blast.f = (__typeof__(blast.f))fns[i++];
  BLAST_FNS(BLAST_SET)
#undef BLAST_SET
}

static int blast_load(void)
{
  pthread_once(&blast_once, blast_open);
  return blast_err[0] ? rt_err(TD_ERR_DEVICE, "%s", blast_err) : 0;
}
#define CLBlastSgemm (blast.Sgemm)
#define CLBlastDgemm (blast.Dgemm)
#define CLBlastSgemmBatched (blast.SgemmBatched)
#define CLBlastDgemmBatched (blast.DgemmBatched)
#define CLBlastOverrideParameters (blast.OverrideParameters)

/* -- Design note --------------------------------------------------------------------------
**
** As on the CPU, a call is `nbatch` products C (M,N) = A (M,K) @ B (K,N) into
** the contiguous result. An operand is a strided matrix (rows, cols, rs, cs),
** its element offset in its buffer, and strides over the result's batch dims
** (0 where it is broadcast), so broadcast operands are never copied. CLBlast
** (row-major) takes a matrix as it is when cs == 1 (NoTrans, ld = rs) or
** transposed when rs == 1 (Trans, ld = cs): t() views cost nothing, and only an
** operand that is neither is copied (rt_as_contig). The products run as
**   - one GEMM when nbatch == 1, or when b is shared by every product and a's
**     batches continue its rows (x (B,T,C) @ W (C,D) is one (B*T,C) @ (C,D));
**   - else one batched GEMM with per-product offsets of A, B and C (any broadcast).
** Two CLBlast routines per precision, on purpose: each is an OpenCL program
** that PoCL compiles in ~10 s with a cold cache (TOOLCHAIN.md section 4).
** Integers (uint8, int32, int64): one work-item per result element, products
** accumulated in int64 and truncated to the dtype, as rt_blas.c's loop.
*/

/* -- Geometry: rt_blas.c's (RtMmGeom, rt.h) ----------------------------------------------------- */

/* Operand offsets are the tensors' element offsets in their buffers; CLBlast
** takes any leading dim (rt_mm_layouts' and rt_mm_fold_ld's limit: INT64_MAX). */
_Static_assert(CLBlastTransposeNo == RT_MM_NOTRANS && CLBlastTransposeYes == RT_MM_TRANS,
               "RT_MM_* are CLBlast's values");

/* -- Float path: CLBlast ----------------------------------------------------------------------- */

static const char *mm_status_name(CLBlastStatusCode st)
{
  switch (st) {
  case CLBlastOpenCLBuildProgramFailure: return " (OpenCL kernel build failure)";
  case CLBlastTempBufferAllocFailure: case CLBlastOpenCLOutOfResources: case CLBlastOpenCLOutOfHostMemory:
    return " (out of device memory or resources)";
  case CLBlastNoDoublePrecision: return " (the device has no float64)";
  case CLBlastInvalidLocalMemUsage: return " (not enough local memory on the device)";
  case CLBlastInsufficientMemoryA: case CLBlastInsufficientMemoryB: case CLBlastInsufficientMemoryC:
    return " (a matrix extends past its buffer)";
  default: return "";
  }
}

static int mm_check(CLBlastStatusCode st, int dt, const char *routine)
{
  if (st == CLBlastSuccess) return 0;
  return rt_err(TD_ERR_DEVICE, "matmul: CLBlast %c%s failed: status %d%s", dt == TD_FLOAT64 ? 'd' : 's',
                routine, (int)st, mm_status_name(st));
}

/* -- Tuned SGEMM parameters -------------------------------------------------------------------
** Debian's CLBlast ships no tuners and knows few devices (untuned on an H200:
** 28.8 TFLOP/s against cuBLAS's 50.9). bench/clblast_tune.lua sweeps Xgemm
** parameter sets through td_opencl_gemm_params and keeps the best per device
** name in a TSV file (device name, TAB, "KWG=32 KWI=2 ..."); the file named by
** TIDE_CLBLAST_TUNING is read before the first float32 product and its line
** for this device, if any, applied. */

#define GP_MAX 32
TD_API int td_opencl_gemm_params(const char *params)
{
  if (!params) return rt_err(TD_ERR_ARG, "opencl_gemm_params: a string \"NAME=value ...\" expected");
  if (cl_init(-1) || blast_load()) return TD_ERR_DEVICE;
  char buf[1024], *names[GP_MAX];
  size_t vals[GP_MAX], n = 0;
  snprintf(buf, sizeof buf, "%s", params);
  for (char *save = NULL, *tok = strtok_r(buf, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
    char *eq = strchr(tok, '='), *end = NULL;
    if (!eq || eq == tok || n == GP_MAX || (*eq = 0, strtoull(eq + 1, &end, 10), !end || *end || end == eq + 1))
      return rt_err(TD_ERR_ARG, "opencl_gemm_params: '%s' is not NAME=number (in \"%s\")", tok, params);
    names[n] = tok; vals[n++] = (size_t)strtoull(eq + 1, NULL, 10);
  }
  CLBlastStatusCode st = CLBlastOverrideParameters(cl_dev(), "Xgemm", CLBlastPrecisionSingle, n,
                                                   (const char **)names, vals);
  if (st != CLBlastSuccess)
    return rt_err(TD_ERR_ARG, "opencl_gemm_params: CLBlast refused Xgemm parameters \"%s\": status %d (it wants "
                  "every Xgemm parameter: GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN)",
                  params, (int)st);
  return 0;
}

static int tuned;                 /* 1: the tuning file's line for this device was applied */
static pthread_once_t tune_once = PTHREAD_ONCE_INIT;

static void tuning_load(void)
{
  const char *path = getenv("TIDE_CLBLAST_TUNING");
  FILE *f = path && *path ? fopen(path, "r") : NULL;
  if (!f) return;
  char line[1536];
  const char *name = cl_device_name();
  size_t nl = strlen(name);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, name, nl) || line[nl] != '\t') continue;
    char *params = line + nl + 1, *tab = strchr(params, '\t');
    if (tab) *tab = 0;
    char err[512];
    snprintf(err, sizeof err, "%s", td_last_error());     /* a bad line warns, and leaves the error as it was */
    if (td_opencl_gemm_params(params)) fprintf(stderr, "tide: %s: %s (ignored)\n", path, td_last_error());
    else tuned = 1;
    rt_err(0, "%s", err);
    break;
  }
  fclose(f);
}

TD_API int td_opencl_gemm_tuned(void) { return tuned; }

/* C (the contiguous result at element offset coff) = the nbatch products. */
static int mm_clblast(const RtMmGeom *g, int dt, cl_mem A, int ta, int64_t lda, cl_mem B, int tb, int64_t ldb,
                      cl_mem C, int64_t coff)
{
  if (blast_load()) return TD_ERR_DEVICE;
  cl_command_queue q = cl_queue();
  const CLBlastLayout L = CLBlastLayoutRowMajor;
  const CLBlastTranspose TA = (CLBlastTranspose)ta, TB = (CLBlastTranspose)tb;
  int64_t fld = rt_mm_fold_ld(g, ta, lda, INT64_MAX);
  if (dt == TD_FLOAT32) pthread_once(&tune_once, tuning_load);
  size_t M = (size_t)g->M, N = (size_t)g->N, K = (size_t)g->K;
  if (g->nbatch == 1 || fld > 0) {
    if (fld > 0) { M *= (size_t)g->nbatch; lda = fld; }
    cl_event e = NULL;
    int h = cl_prof_open(dt == TD_FLOAT32 ? "clblast_sgemm" : "clblast_dgemm");
    CLBlastStatusCode st = dt == TD_FLOAT32
      ? CLBlastSgemm(L, TA, TB, M, N, K, 1.0f, A, (size_t)g->a.off, (size_t)lda, B, (size_t)g->b.off, (size_t)ldb,
                     0.0f, C, (size_t)coff, N, &q, h >= 0 ? &e : NULL)
      : CLBlastDgemm(L, TA, TB, M, N, K, 1.0, A, (size_t)g->a.off, (size_t)lda, B, (size_t)g->b.off, (size_t)ldb,
                     0.0, C, (size_t)coff, N, &q, h >= 0 ? &e : NULL);
    cl_prof_close(h, st == CLBlastSuccess ? e : NULL);
    return mm_check(st, dt, "gemm");
  }
  size_t nb = (size_t)g->nbatch;
  size_t *offs = malloc(3 * nb * sizeof *offs);
  double *scal = malloc(2 * nb * sizeof *scal);     /* alphas then betas, as float or double */
  if (!offs || !scal) { free(offs); free(scal); return rt_err(TD_ERR_NOMEM, "matmul: out of host memory"); }
  for (size_t i = 0; i < nb; i++) {
    int64_t oa, ob;
    rt_mm_batch_off(g, (int64_t)i, &oa, &ob);
    offs[i] = (size_t)(g->a.off + oa); offs[nb + i] = (size_t)(g->b.off + ob);
    offs[2 * nb + i] = (size_t)coff + i * M * N;
  }
  CLBlastStatusCode st;
  cl_event e = NULL;
  int h = cl_prof_open(dt == TD_FLOAT32 ? "clblast_sgemm_batched" : "clblast_dgemm_batched");
  if (dt == TD_FLOAT32) {
    float *al = (float *)scal, *be = al + nb;
    for (size_t i = 0; i < nb; i++) { al[i] = 1.0f; be[i] = 0.0f; }
    st = CLBlastSgemmBatched(L, TA, TB, M, N, K, al, A, offs, (size_t)lda, B, offs + nb, (size_t)ldb,
                             be, C, offs + 2 * nb, N, nb, &q, h >= 0 ? &e : NULL);
  } else {
    double *al = scal, *be = al + nb;
    for (size_t i = 0; i < nb; i++) { al[i] = 1.0; be[i] = 0.0; }
    st = CLBlastDgemmBatched(L, TA, TB, M, N, K, al, A, offs, (size_t)lda, B, offs + nb, (size_t)ldb,
                             be, C, offs + 2 * nb, N, nb, &q, h >= 0 ? &e : NULL);
  }
  cl_prof_close(h, st == CLBlastSuccess ? e : NULL);
  free(offs); free(scal);
  return mm_check(st, dt, "gemm_batched");
}

/* -- Integer path -------------------------------------------------------------------------------- */

/* One work-item per result element i: operand offsets over the result's shape
** (batch dims, then M unless a is 1-D, then N unless b is 1-D). */
static int mm_int(const RtMmGeom *g, const td_tensor *a, const td_tensor *b, td_tensor *out)
{
  const char *T = cl_type(out->scalar_type);
  char src[1024];
  snprintf(src, sizeof src,
    "/* o (..., M, N) = a (..., M, K) @ b (..., K, N), accumulated in int64 */\n"
    "kernel void k(global %s *o, global const %s *a, global const %s *b, ClGeo g, long n, long K,\n"
    "              long ak, long bk) {\n"
    "  long i = get_global_id(0); if (i >= n) return;\n"
    "  long pa = geo_off(&g, 1, i), pb = geo_off(&g, 2, i), acc = 0;\n"
    "  for (long k = 0; k < K; k++) acc += (long)a[pa + k * ak] * (long)b[pb + k * bk];\n"
    "  o[geo_off(&g, 0, i)] = (%s)acc;\n}\n", T, T, T, T);
  cl_kernel k = cl_kernel_get(src, "k", "matmul");
  if (!k) return TD_ERR_DEVICE;
  ClGeo geo;
  memset(&geo, 0, sizeof geo);
  geo.nd = out->ndim;
  for (int d = 0; d < out->ndim; d++) { geo.size[d] = out->sizes[d]; geo.st[0][d] = out->strides[d]; }
  for (int d = 0; d < g->nbd; d++) { geo.st[1][d] = g->a.bst[d]; geo.st[2][d] = g->b.bst[d]; }
  int d = g->nbd;
  if (a->ndim > 1) geo.st[1][d++] = g->a.rs;   /* the M dim: a's rows, b's 0 */
  if (b->ndim > 1) geo.st[2][d] = g->b.cs;     /* the N dim: b's columns, a's 0 */
  geo.off[0] = out->offset; geo.off[1] = g->a.off; geo.off[2] = g->b.off;
  cl_long n = out->nelem, K = g->K, ak = g->a.cs, bk = g->b.rs;
  cl_mem ob = cl_buf(out), ab = cl_buf(a), bb = cl_buf(b);
  int rc = CL_ARGV(k, 0, ob, "matmul");
  if (!rc) rc = CL_ARGV(k, 1, ab, "matmul");
  if (!rc) rc = CL_ARGV(k, 2, bb, "matmul");
  if (!rc) rc = CL_ARGV(k, 3, geo, "matmul");
  if (!rc) rc = CL_ARGV(k, 4, n, "matmul");
  if (!rc) rc = CL_ARGV(k, 5, K, "matmul");
  if (!rc) rc = CL_ARGV(k, 6, ak, "matmul");
  if (!rc) rc = CL_ARGV(k, 7, bk, "matmul");
  if (!rc) rc = cl_run(k, n, "matmul");
  return rc;
}

/* -- The kernel ------------------------------------------------------------------------------------ */

int cl_kern_matmul(RtCall *c, td_tensor *out)
{
  int dt = c->cdtype, rc = 0;
  if (dt == TD_FLOAT64 && !cl_has_fp64())
    return rt_err(TD_ERR_DTYPE, "matmul: the OpenCL device has no float64 (cl_khr_fp64)");
  td_tensor *a = rt_as_dtype(c->in[0], dt), *b = rt_as_dtype(c->in[1], dt);
  if (!a || !b) { rc = TD_ERR_NOMEM; goto done; }
  RtMmGeom g;
  rt_mm_geom(&g, a, b, out);
  if (out->nelem == 0) goto done;
  if (g.K == 0) { rc = cl_fill(out, 0); goto done; }
  if (rt_is_float(dt)) {
    RtMmLayout l;   /* an operand that is neither row-major nor transposed is copied (rt_as_contig) */
    if ((rc = rt_mm_layouts(&g, &a, &b, out, INT64_MAX, &l))) goto done;
    rc = mm_clblast(&g, dt, cl_buf(a), l.ta, l.lda, cl_buf(b), l.tb, l.ldb, cl_buf(out), out->offset);
  } else if (dt == TD_UINT8 || dt == TD_INT32 || dt == TD_INT64) {
    rc = mm_int(&g, a, b, out);
  } else {
    rc = rt_err(TD_ERR_DTYPE, "matmul: not supported for dtype %s", td_dtype_name(dt));
  }
done:
  td_release(a); td_release(b);
  return rc;
}
