/*
** cl_blas.c -- matmul on the OpenCL device with rt_blas.c's semantics (1-D
** operands promoted to a row/column and their dim removed, broadcast batch
** dims): float32/float64 products through CLBlast, integer products in a
** generated kernel.
*/
#include "cl.h"
#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Design note --------------------------------------------------------------------------
**
** As on the CPU, a call is `nbatch` products C (M,N) = A (M,K) @ B (K,N) into
** the contiguous result. An operand is a strided matrix (rows, cols, rs, cs),
** its element offset in its buffer, and strides over the result's batch dims
** (0 where it is broadcast), so broadcast operands are never copied. CLBlast
** (row-major) takes a matrix as it is when cs == 1 (NoTrans, ld = rs) or
** transposed when rs == 1 (Trans, ld = cs): t() views cost nothing, and only an
** operand that is neither is copied (cl_as_contig). The products run as
**   - one GEMM when nbatch == 1, or when b is shared by every product and a's
**     batches continue its rows (x (B,T,C) @ W (C,D) is one (B*T,C) @ (C,D));
**   - else one batched GEMM with per-product offsets of A, B and C (any broadcast).
** Two CLBlast routines per precision, on purpose: each is an OpenCL program
** that PoCL compiles in ~10 s with a cold cache (TOOLCHAIN.md section 4).
** Integers (uint8, int32, int64): one work-item per result element, products
** accumulated in int64 and truncated to the dtype, as rt_blas.c's loop.
*/

/* -- Geometry (rt_blas.c's, with device offsets) ----------------------------------------------- */

typedef struct {
  int64_t rows, cols, rs, cs, off;     /* the matrix, its element strides and offset */
  int64_t bst[TD_MAX_DIMS];            /* strides over the result's batch dims (0: broadcast) */
} MmOperand;

typedef struct {
  int64_t M, N, K, nbatch;
  int nbd;                             /* batch dims of the result */
  int64_t bsz[TD_MAX_DIMS];
  MmOperand a, b;
} MmGeom;

static void mm_operand(MmOperand *o, const td_tensor *t, int mat, int nbd)
{
  int tb = t->ndim - mat;              /* t's batch dims, aligned right */
  for (int d = 0; d < nbd; d++) {
    int td = d - (nbd - tb);
    o->bst[d] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td];
  }
  o->off = t->offset;
}

/* a 1-D is a (1,K) row, b 1-D a (K,1) column. */
static void mm_geom(MmGeom *g, const td_tensor *a, const td_tensor *b, const td_tensor *out)
{
  int a1 = a->ndim == 1, b1 = b->ndim == 1;
  g->K = a->sizes[a->ndim - 1];
  g->M = a1 ? 1 : a->sizes[a->ndim - 2];
  g->N = b1 ? 1 : b->sizes[b->ndim - 1];
  g->nbd = out->ndim - !a1 - !b1;
  g->nbatch = 1;
  for (int d = 0; d < g->nbd; d++) { g->bsz[d] = out->sizes[d]; g->nbatch *= out->sizes[d]; }
  g->a.rows = g->M; g->a.cols = g->K;
  g->a.rs = a1 ? 0 : a->strides[a->ndim - 2]; g->a.cs = a->strides[a->ndim - 1];
  g->b.rows = g->K; g->b.cols = g->N;
  g->b.rs = b1 ? b->strides[0] : b->strides[b->ndim - 2]; g->b.cs = b1 ? 0 : b->strides[b->ndim - 1];
  mm_operand(&g->a, a, a1 ? 1 : 2, g->nbd);
  mm_operand(&g->b, b, b1 ? 1 : 2, g->nbd);
}

/* Element offsets of batch bi (row-major over the result's batch dims). */
static void mm_batch_off(const MmGeom *g, int64_t bi, int64_t *oa, int64_t *ob)
{
  int64_t a = 0, b = 0;
  for (int d = g->nbd - 1; d >= 0; d--) {
    int64_t i = bi % g->bsz[d];
    bi /= g->bsz[d];
    a += i * g->a.bst[d]; b += i * g->b.bst[d];
  }
  *oa = a; *ob = b;
}

/* How a strided (rows x cols) matrix goes to row-major CLBlast: NoTrans with
** leading dim ld ((i,j) at i*ld + j) or Trans ((i,j) at j*ld + i); the stride
** of a size-1 dim is irrelevant. -1: it has to be copied. */
static int mm_layout(const MmOperand *o, int64_t *ld)
{
  int64_t r1 = o->rows > 1 ? o->rows : 1, c1 = o->cols > 1 ? o->cols : 1;
  if (o->cs == 1 || o->cols <= 1) {
    *ld = o->rows <= 1 ? c1 : o->rs;
    if (*ld >= c1) return CLBlastTransposeNo;
  }
  if (o->rs == 1 || o->rows <= 1) {
    *ld = o->cols <= 1 ? r1 : o->cs;
    if (*ld >= r1) return CLBlastTransposeYes;
  }
  return -1;
}

/* When b has no batch strides and a's batch dims continue its row stride, the
** whole call is one (nbatch*M, K) @ (K, N) product. Its row stride, or -1. */
static int64_t mm_fold_ld(const MmGeom *g, int ta, int64_t lda)
{
  if (ta != CLBlastTransposeNo || g->nbatch == 1) return -1;
  int64_t ld = g->M > 1 ? lda : -1, rows = g->M;   /* M == 1: the first batch stride sets it */
  for (int d = g->nbd - 1; d >= 0; d--) {
    if (g->bsz[d] == 1) continue;
    if (g->b.bst[d] != 0) return -1;
    if (ld < 0) ld = g->a.bst[d];
    else if (g->a.bst[d] != ld * rows) return -1;
    rows *= g->bsz[d];
  }
  return ld >= (g->K > 1 ? g->K : 1) ? ld : -1;
}

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

/* C (the contiguous result at element offset coff) = the nbatch products. */
static int mm_clblast(const MmGeom *g, int dt, cl_mem A, int ta, int64_t lda, cl_mem B, int tb, int64_t ldb,
                      cl_mem C, int64_t coff)
{
  cl_command_queue q = cl_queue();
  const CLBlastLayout L = CLBlastLayoutRowMajor;
  const CLBlastTranspose TA = (CLBlastTranspose)ta, TB = (CLBlastTranspose)tb;
  int64_t fld = mm_fold_ld(g, ta, lda);
  size_t M = (size_t)g->M, N = (size_t)g->N, K = (size_t)g->K;
  if (g->nbatch == 1 || fld > 0) {
    if (fld > 0) { M *= (size_t)g->nbatch; lda = fld; }
    CLBlastStatusCode st = dt == TD_FLOAT32
      ? CLBlastSgemm(L, TA, TB, M, N, K, 1.0f, A, (size_t)g->a.off, (size_t)lda, B, (size_t)g->b.off, (size_t)ldb,
                     0.0f, C, (size_t)coff, N, &q, NULL)
      : CLBlastDgemm(L, TA, TB, M, N, K, 1.0, A, (size_t)g->a.off, (size_t)lda, B, (size_t)g->b.off, (size_t)ldb,
                     0.0, C, (size_t)coff, N, &q, NULL);
    return mm_check(st, dt, "gemm");
  }
  size_t nb = (size_t)g->nbatch;
  size_t *offs = malloc(3 * nb * sizeof *offs);
  double *scal = malloc(2 * nb * sizeof *scal);     /* alphas then betas, as float or double */
  if (!offs || !scal) { free(offs); free(scal); return rt_err(TD_ERR_NOMEM, "matmul: out of host memory"); }
  for (size_t i = 0; i < nb; i++) {
    int64_t oa, ob;
    mm_batch_off(g, (int64_t)i, &oa, &ob);
    offs[i] = (size_t)(g->a.off + oa); offs[nb + i] = (size_t)(g->b.off + ob);
    offs[2 * nb + i] = (size_t)coff + i * M * N;
  }
  CLBlastStatusCode st;
  if (dt == TD_FLOAT32) {
    float *al = (float *)scal, *be = al + nb;
    for (size_t i = 0; i < nb; i++) { al[i] = 1.0f; be[i] = 0.0f; }
    st = CLBlastSgemmBatched(L, TA, TB, M, N, K, al, A, offs, (size_t)lda, B, offs + nb, (size_t)ldb,
                             be, C, offs + 2 * nb, N, nb, &q, NULL);
  } else {
    double *al = scal, *be = al + nb;
    for (size_t i = 0; i < nb; i++) { al[i] = 1.0; be[i] = 0.0; }
    st = CLBlastDgemmBatched(L, TA, TB, M, N, K, al, A, offs, (size_t)lda, B, offs + nb, (size_t)ldb,
                             be, C, offs + 2 * nb, N, nb, &q, NULL);
  }
  free(offs); free(scal);
  return mm_check(st, dt, "gemm_batched");
}

/* -- Integer path -------------------------------------------------------------------------------- */

/* One work-item per result element i: operand offsets over the result's shape
** (batch dims, then M unless a is 1-D, then N unless b is 1-D). */
static int mm_int(const MmGeom *g, const td_tensor *a, const td_tensor *b, td_tensor *out)
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
  td_tensor *a = cl_as_dtype(c->in[0], dt), *b = cl_as_dtype(c->in[1], dt);
  if (!a || !b) { rc = TD_ERR_NOMEM; goto done; }
  MmGeom g;
  mm_geom(&g, a, b, out);
  if (out->nelem == 0) goto done;
  if (g.K == 0) { rc = cl_fill(out, 0); goto done; }
  if (rt_is_float(dt)) {
    int64_t lda = 0, ldb = 0;
    int ta = mm_layout(&g.a, &lda), tb = mm_layout(&g.b, &ldb);
    if (ta < 0 || tb < 0) {
      /* neither row-major nor transposed: copy the offending operand(s) */
      td_tensor *t;
      if (ta < 0) { t = cl_as_contig(a); td_release(a); a = t; }
      if (tb < 0) { t = cl_as_contig(b); td_release(b); b = t; }
      if (!a || !b) { rc = TD_ERR_NOMEM; goto done; }
      mm_geom(&g, a, b, out);
      ta = mm_layout(&g.a, &lda); tb = mm_layout(&g.b, &ldb);
    }
    rc = mm_clblast(&g, dt, cl_buf(a), ta, lda, cl_buf(b), tb, ldb, cl_buf(out), out->offset);
  } else if (dt == TD_UINT8 || dt == TD_INT32 || dt == TD_INT64) {
    rc = mm_int(&g, a, b, out);
  } else {
    rc = rt_err(TD_ERR_DTYPE, "matmul: not supported for dtype %s", td_dtype_name(dt));
  }
done:
  td_release(a); td_release(b);
  return rc;
}
