/*
** cl_index.c -- indexing, concatenation and sliding windows on the OpenCL
** device: index_select, index_add, gather, scatter_add, slice_scatter and cat
** (rt_index.c's semantics) and unfold/fold (rt_conv.c's), same attrs, same
** results, same error messages; and the reductions that give indices
** (argmax, argmin, max/min along a dim). Hand-written because the kernel IR
** has no indexed loads or stores and no (value, index) reductions; the strict
** OpenCL C check covers them like the printed kernels.
*/
#include "cl.h"
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* -- Design note ---------------------------------------------------------------------------
**
** One generated kernel per (op, dtypes); each work-item owns what it writes:
**   index_select, gather, unfold  one result element each (a pure gather);
**   index_add, scatter_add        one position of the result's other dims (index_add)
**                                 or one line of idx along dim (scatter_add), adding
**                                 j = 0, 1, ... in order, as the CPU's threads do;
**   fold                          one result pixel, summing the windows that cover it
**                                 from 0 in (ki, kj) order, the CPU's order.
** No two work-items write one element and no data atomics are needed, so the
** accumulating ops add in the CPU's order and match it bit for bit (the build
** has no -cl-fast-relaxed-math). slice_scatter and cat are rt_index.c's kernels:
** copies into views of the result through the device's COPY kernel (cl_ew.c,
** through rt_copy_into), which also converts dtypes.
**
** Index errors: every kernel tests each index it reads; a bad one is skipped
** and its row-major position in idx goes into a one-int device slot with
** atomic_min (INT_MAX = none). After the launch the host reads the slot and, on
** error, that single index value, and raises the CPU's message for the first
** bad index in idx's order ("gather: index 7 is out of range for dim 2 with
** size 3"). Where a launch would not read every index (index_select/index_add
** with an empty result), a check-only kernel does. The result is discarded on
** error (in-place forms write through the dispatcher's temporary).
*/

/* -- Launch helpers ------------------------------------------------------------------------- */

/* A kernel argument: its size and where its value is (see ix_run). */
typedef struct { size_t size; const void *p; } IxArg;
#define IX_ARG(v) { sizeof(v), &(v) }
#define IX_NARGS(av) ((int)(sizeof(av) / sizeof *(av)))

/* Offsets of operands 0..nk-1 at linear index i over g's size, in one pass. */
static const char ix_prelude[] =
  "inline void offs(const ClGeo *g, int nk, long i, long *o) {\n"
  "  for (int k = 0; k < nk; k++) o[k] = g->off[k];\n"
  "  for (int d = (int)g->nd - 1; d >= 0; d--) {\n"
  "    long s = g->size[d], c = i % s; i /= s;\n"
  "    for (int k = 0; k < nk; k++) o[k] += c * g->st[k][d];\n"
  "  }\n}\n"
  "#define BAD(pos) atomic_min(err, (int)min((long)(pos), (long)INT_MAX - 1))\n";

/* The program for `body` with T, XT (data types) and IT (index type) defined. */
static cl_kernel ix_kernel(const char *op, const char *body, int t, int xt, int it)
{
  if ((t == TD_FLOAT64 || xt == TD_FLOAT64) && !cl_has_fp64())
    return rt_errp(TD_ERR_DTYPE, "%s: the OpenCL device has no float64 (cl_khr_fp64)", op);
  char src[4096];
  int n = snprintf(src, sizeof src, "#define T %s\n#define XT %s\n#define IT %s\n%s%s",
                   cl_type(t), cl_type(xt), cl_type(it), ix_prelude, body);
  if (n >= (int)sizeof src) return rt_errp(TD_ERR_ARG, "%s: OpenCL kernel source too long", op);
  return cl_kernel_get(src, "k", op);
}

/* A geometry over `size`, every operand stride 0 until set. */
static void geo_init(ClGeo *g, int nd, const int64_t *size)
{
  memset(g, 0, sizeof *g);
  g->nd = nd;
  for (int d = 0; d < nd; d++) g->size[d] = size[d];
}

static void geo_set(ClGeo *g, int k, const int64_t *st, int64_t off)
{
  for (int d = 0; d < g->nd; d++) g->st[k][d] = st[d];
  g->off[k] = off;
}

/* -- Index errors ---------------------------------------------------------------------------- */

static cl_mem err_slot;   /* one int: row-major position of the first bad index, INT_MAX if none */

static int err_begin(const char *op)
{
  cl_int st = CL_SUCCESS, none = INT_MAX;
  if (!err_slot) {
    cl_mem m = clCreateBuffer(cl_ctx(), CL_MEM_READ_WRITE, sizeof(cl_int), NULL, &st);
    if (st != CL_SUCCESS) return cl_check(st, op, "clCreateBuffer");
    err_slot = m;
  }
  return cl_check(clEnqueueFillBuffer(cl_queue(), err_slot, &none, sizeof none, 0, sizeof none, 0, NULL, NULL),
                  op, "clEnqueueFillBuffer");
}

/* After the launch: 0, or the CPU's message for the first bad index of idx
** (reads the slot, then the one offending element). Positions past INT_MAX - 1
** are clamped to it, so with more indices than that the value named may not be
** the first bad one. */
static int err_end(const char *op, const td_tensor *idx, int dim, int64_t size)
{
  cl_int pos;
  int rc = cl_check(clEnqueueReadBuffer(cl_queue(), err_slot, CL_TRUE, 0, sizeof pos, &pos, 0, NULL, NULL),
                    op, "clEnqueueReadBuffer");
  cl_synced();
  if (rc || pos == INT_MAX) return rc;
  int64_t off = idx->offset, p = pos;
  for (int d = idx->ndim - 1; d >= 0; d--) { off += (p % idx->sizes[d]) * idx->strides[d]; p /= idx->sizes[d]; }
  size_t es = (size_t)rt_dtype_size(idx->scalar_type);
  union { cl_int i32; cl_long i64; } v;
  rc = cl_check(clEnqueueReadBuffer(cl_queue(), cl_buf(idx), CL_TRUE, (size_t)off * es, es, &v, 0, NULL, NULL),
                op, "clEnqueueReadBuffer");
  if (rc) return rc;
  long long x = es == 4 ? v.i32 : v.i64;
  return rt_err(TD_ERR_INDEX, "%s: index %lld is out of range for dim %d with size %lld",
                op, x + 1, dim + 1, (long long)size);
}

/* Run k over n work-items with the arguments av[0..nargs). With idx, the error
** slot is reset and passed after them, and a bad index of idx raises the CPU's
** message (dim, size: the ones it names); without, nothing is checked. */
static int ix_run(cl_kernel k, const char *op, int nargs, const IxArg *av, cl_long n,
                  const td_tensor *idx, int dim, int64_t size)
{
  int rc = idx ? err_begin(op) : 0;
  for (int i = 0; i < nargs && !rc; i++) rc = cl_arg(k, i, av[i].size, av[i].p, op);
  if (!rc && idx) rc = CL_ARGV(k, nargs, err_slot, op);
  if (!rc) rc = cl_run(k, n, op);
  return rc || !idx ? rc : err_end(op, idx, dim, size);
}

/* Every index of idx checked against [0, size), nothing else. */
static const char check_src[] =
  "kernel void k(global const IT *ix, ClGeo g, long n, long S, global int *err) {\n"
  "  long i = get_global_id(0); if (i >= n) return;\n"
  "  long v = ix[geo_off(&g, 0, i)];\n"
  "  if (v < 0 || v >= S) BAD(i);\n}\n";

static int ix_check(const char *op, const td_tensor *idx, int dim, int64_t size)
{
  cl_kernel k = ix_kernel(op, check_src, TD_UINT8, TD_UINT8, idx->scalar_type);
  if (!k) return TD_ERR_DEVICE;
  ClGeo g;
  geo_init(&g, idx->ndim, idx->sizes);
  geo_set(&g, 0, idx->strides, idx->offset);
  cl_long n = idx->nelem, S = size;
  cl_mem ib = cl_buf(idx);
  IxArg av[] = { IX_ARG(ib), IX_ARG(g), IX_ARG(n), IX_ARG(S) };
  return ix_run(k, op, IX_NARGS(av), av, n, idx, dim, size);
}

/* -- index_select and gather ------------------------------------------------------------------- */

/* One work-item per result element. Operands over the result's shape: 0 the
** result, 1 x without dim (added: v * xsd), 2 the index element, 3 its
** row-major position in idx (for errors). */
static const char gather_src[] =
  "/* o[m] = x[m with m[dim] = v], v = the index for m */\n"
  "kernel void k(global T *o, global const T *x, global const IT *ix, ClGeo g, long n, long xsd, long S,\n"
  "              global int *err) {\n"
  "  long i = get_global_id(0); if (i >= n) return;\n"
  "  long p[4]; offs(&g, 4, i, p);\n"
  "  long v = ix[p[2]];\n"
  "  if (v < 0 || v >= S) { BAD(p[3]); return; }\n"
  "  o[p[0]] = x[p[1] + v * xsd];\n}\n";

static int ix_gather(RtCall *c, td_tensor *out)
{
  const char *op = rt_op_lname(c->op);
  int dim = (int)c->attrs.i[0];
  td_tensor *x = c->in[0], *idx = c->in[1];
  int64_t S = x->sizes[dim];
  if (out->nelem == 0) return idx->nelem ? ix_check(op, idx, dim, S) : 0;
  cl_kernel k = ix_kernel(op, gather_src, x->scalar_type, x->scalar_type, idx->scalar_type);
  if (!k) return TD_ERR_DEVICE;
  ClGeo g;
  geo_init(&g, out->ndim, out->sizes);
  geo_set(&g, 0, out->strides, out->offset);
  geo_set(&g, 1, x->strides, x->offset);
  g.st[1][dim] = 0;
  if (c->op == RT_OP_INDEX_SELECT) {         /* idx (n): out[o, j, i] = x[o, idx[j], i] */
    g.st[2][dim] = idx->ndim ? idx->strides[0] : 0;
    g.off[2] = idx->offset;
    g.st[3][dim] = 1;
  } else {                                   /* idx of out's shape */
    int64_t pos[TD_MAX_DIMS];
    rt_tensor_contig_strides(idx->ndim, idx->sizes, pos);
    geo_set(&g, 2, idx->strides, idx->offset);
    geo_set(&g, 3, pos, 0);
  }
  cl_long n = out->nelem, xsd = x->strides[dim], Sl = S;
  cl_mem ob = cl_buf(out), xb = cl_buf(x), ib = cl_buf(idx);
  IxArg av[] = { IX_ARG(ob), IX_ARG(xb), IX_ARG(ib), IX_ARG(g), IX_ARG(n), IX_ARG(xsd), IX_ARG(Sl) };
  return ix_run(k, op, IX_NARGS(av), av, n, idx, dim, S);
}

/* -- index_add and scatter_add ----------------------------------------------------------------- */

/* One work-item per position of the iteration shape (dim's size set to 1).
** Operands: 0 the result, 1 src, 2 the index, 3 the position in idx of the
** line's first index (for errors); along the line, step osd/ssd/isd/pstep. */
static const char accum_src[] =
  "/* o[m with m[dim] = v_j] += s[m with m[dim] = j], j = 0 .. L-1 in order */\n"
  "kernel void k(global T *o, global const XT *s, global const IT *ix, ClGeo g, long n, long L, long osd,\n"
  "              long ssd, long isd, long pstep, long S, global int *err) {\n"
  "  long i = get_global_id(0); if (i >= n) return;\n"
  "  long p[4]; offs(&g, 4, i, p);\n"
  "  for (long j = 0; j < L; j++) {\n"
  "    long v = ix[p[2] + j * isd];\n"
  "    if (v < 0 || v >= S) { BAD(p[3] + j * pstep); continue; }\n"
  "    o[p[0] + v * osd] += (T)s[p[1] + j * ssd];\n"
  "  }\n}\n";

static int ix_accum(RtCall *c, td_tensor *out)
{
  const char *op = rt_op_lname(c->op);
  int dim = (int)c->attrs.i[0], rc;
  td_tensor *idx = c->in[1], *src = c->in[2];
  int64_t S = out->sizes[dim], it[TD_MAX_DIMS], pos[TD_MAX_DIMS];
  if ((rc = rt_copy_into(out, c->in[0]))) return rc;
  ClGeo g;
  cl_long L, isd, pstep;
  if (c->op == RT_OP_INDEX_ADD) {           /* positions (o, i) of out; idx (n) along dim */
    memcpy(it, out->sizes, sizeof it);
    it[dim] = 1;
    geo_init(&g, out->ndim, it);
    g.off[2] = idx->offset;
    L = idx->nelem; isd = idx->ndim ? idx->strides[0] : 0; pstep = 1;
  } else {                                  /* lines of idx along dim */
    memcpy(it, idx->sizes, sizeof it);
    it[dim] = 1;
    geo_init(&g, idx->ndim, it);
    geo_set(&g, 2, idx->strides, idx->offset);
    rt_tensor_contig_strides(idx->ndim, idx->sizes, pos);
    geo_set(&g, 3, pos, 0);
    L = idx->sizes[dim]; isd = idx->strides[dim]; pstep = pos[dim];
  }
  geo_set(&g, 0, out->strides, out->offset);
  geo_set(&g, 1, src->strides, src->offset);
  cl_long n = rt_numel((int)g.nd, it);
  if (L == 0 || idx->nelem == 0) return 0;
  if (n == 0) return ix_check(op, idx, dim, S);
  cl_kernel k = ix_kernel(op, accum_src, out->scalar_type, src->scalar_type, idx->scalar_type);
  if (!k) return TD_ERR_DEVICE;
  cl_long osd = out->strides[dim], ssd = src->strides[dim], Sl = S;
  cl_mem ob = cl_buf(out), sb = cl_buf(src), ib = cl_buf(idx);
  IxArg av[] = { IX_ARG(ob), IX_ARG(sb), IX_ARG(ib), IX_ARG(g), IX_ARG(n), IX_ARG(L), IX_ARG(osd), IX_ARG(ssd),
                 IX_ARG(isd), IX_ARG(pstep), IX_ARG(Sl) };
  return ix_run(k, op, IX_NARGS(av), av, n, idx, dim, S);
}

/* -- unfold and fold -------------------------------------------------------------------------- */

/* Window geometry and x's strides, as the kernels read it (all 8-byte fields). */
typedef struct {
  cl_long kh, kw, sh, sw, ph, pw, dh, dw, H, W, OH, OW, C, xoff, ooff, xs[4];
} ClWin;
#define WIN_DECL \
  "typedef struct { long kh, kw, sh, sw, ph, pw, dh, dw, H, W, OH, OW, C, xoff, ooff, xs[4]; } Win;\n"

/* o (N, C*kh*kw, OH*OW) <- x (N, C, H, W); row c*K + ki*kw + kj, column oh*OW + ow */
static const char unfold_src[] = WIN_DECL
  "kernel void k(global T *o, global const XT *x, Win w, long n) {\n"
  "  long i = get_global_id(0); if (i >= n) return;\n"
  "  long L = w.OH * w.OW, K = w.kh * w.kw;\n"
  "  long l = i % L, r = i / L, kk = r % K, nc = r / K;\n"
  "  long c = nc % w.C, b = nc / w.C, oh = l / w.OW, ow = l % w.OW;\n"
  "  long ih = oh * w.sh - w.ph + (kk / w.kw) * w.dh, iw = ow * w.sw - w.pw + (kk % w.kw) * w.dw;\n"
  "  o[w.ooff + i] = (ih >= 0 && ih < w.H && iw >= 0 && iw < w.W)\n"
  "    ? (T)x[w.xoff + b * w.xs[0] + c * w.xs[1] + ih * w.xs[2] + iw * w.xs[3]] : (T)0;\n}\n";

/* o (N, C, H, W) = sum over the windows covering (ih, iw) of x (N, C*K, L),
** from 0 in (ki, kj) order: the CPU's order of additions into a pixel */
static const char fold_src[] = WIN_DECL
  "kernel void k(global T *o, global const XT *x, Win w, long n) {\n"
  "  long i = get_global_id(0); if (i >= n) return;\n"
  "  long iw = i % w.W, t = i / w.W, ih = t % w.H, nc = t / w.H, c = nc % w.C, b = nc / w.C;\n"
  "  long K = w.kh * w.kw;\n"
  "  T acc = 0;\n"
  "  for (long ki = 0; ki < w.kh; ki++) {\n"
  "    long th = ih + w.ph - ki * w.dh;\n"
  "    if (th < 0 || th % w.sh || th / w.sh >= w.OH) continue;\n"
  "    for (long kj = 0; kj < w.kw; kj++) {\n"
  "      long tw = iw + w.pw - kj * w.dw;\n"
  "      if (tw < 0 || tw % w.sw || tw / w.sw >= w.OW) continue;\n"
  "      acc += (T)x[w.xoff + b * w.xs[0] + (c * K + ki * w.kw + kj) * w.xs[1] + (th / w.sh * w.OW + tw / w.sw) * w.xs[2]];\n"
  "    }\n"
  "  }\n"
  "  o[w.ooff + i] = acc;\n}\n";

/* attrs.i = { kh, kw, sh, sw }, attrs.dims = { ph, pw, dh, dw, H, W } (checked by meta) */
static int ix_window(RtCall *c, td_tensor *out, int fold)
{
  const char *op = rt_op_lname(c->op);
  td_tensor *x = c->in[0];
  const td_attrs *at = &c->attrs;
  ClWin w = { .kh = at->i[0], .kw = at->i[1], .sh = at->i[2], .sw = at->i[3],
              .ph = at->dims[0], .pw = at->dims[1], .dh = at->dims[2], .dw = at->dims[3],
              .xoff = x->offset, .ooff = out->offset };
  w.H = fold ? at->dims[4] : x->sizes[2];
  w.W = fold ? at->dims[5] : x->sizes[3];
  w.C = fold ? out->sizes[1] : x->sizes[1];
  w.OH = (w.H + 2 * w.ph - (w.dh * (w.kh - 1) + 1)) / w.sh + 1;
  w.OW = (w.W + 2 * w.pw - (w.dw * (w.kw - 1) + 1)) / w.sw + 1;
  for (int d = 0; d < x->ndim; d++) w.xs[d] = x->strides[d];
  if (out->nelem == 0) return 0;
  cl_kernel k = ix_kernel(op, fold ? fold_src : unfold_src, out->scalar_type, x->scalar_type, TD_INT64);
  if (!k) return TD_ERR_DEVICE;
  cl_long n = out->nelem;
  cl_mem ob = cl_buf(out), xb = cl_buf(x);
  IxArg av[] = { IX_ARG(ob), IX_ARG(xb), IX_ARG(w), IX_ARG(n) };
  return ix_run(k, op, IX_NARGS(av), av, n, NULL, 0, 0);
}

/* -- Arg reductions: argmax, argmin, max and min with indices ------------------------------------ */

/* The kernel IR's reductions fold values, not (value, index) pairs: the
** indices of argmax/argmin and of max/min along a dim come from these hand
** kernels, one work-item per output walking its reduced elements in
** row-major order (the position j of an element in that walk is its index
** along the dim, or its flat index when every dim is reduced, so strided
** inputs need no copy). Ties keep the first; the first NaN wins; as rt_red.c.
** Geometry (ArgGeo): kept dims (x and out strides) locate an output's first
** element; the reduced dims (size-1 dims dropped, neighbours merged) are walked
** as rows of K elements (the innermost one, stride ks). */

typedef struct ArgGeo {
  cl_long nk, nr, nout, nrow, K, ks, xoff, ooff;
  cl_long ksz[TD_MAX_DIMS], kxs[TD_MAX_DIMS], kos[TD_MAX_DIMS];
  cl_long rsz[TD_MAX_DIMS], rxs[TD_MAX_DIMS];
} ArgGeo;

static const char arg_src[] =
  "typedef struct { long nk, nr, nout, nrow, K, ks, xoff, ooff;\n"
  "  long ksz[8], kxs[8], kos[8], rsz[8], rxs[8]; } ArgGeo;\n"
  "/* v replaces the best a so far: v > a (v < a for min), or v is the first NaN */\n"
  "#define BETTER(a, v, ia) ((ia) < 0 || ((!((v) <= (a)) & ((a) == (a))) & (MX)) || ((!((v) >= (a)) & ((a) == (a))) & !(MX)))\n"
  "kernel void k(global T *o, global long *ox, global const T *x, ArgGeo g, int want_values) {\n"
  "  long i = get_global_id(0); if (i >= g.nout) return;\n"
  "  long xb = g.xoff, ob = g.ooff, q = i;\n"
  "  for (int d = (int)g.nk - 1; d >= 0; d--) { long s = g.ksz[d], c = q % s; q /= s; xb += c * g.kxs[d]; ob += c * g.kos[d]; }\n"
  "  T a = 0; long ia = -1;\n"
  "  for (long r = 0; r < g.nrow; r++) {\n"
  "    long xo = xb, t = r;\n"
  "    for (int d = (int)g.nr - 1; d >= 0; d--) { xo += (t % g.rsz[d]) * g.rxs[d]; t /= g.rsz[d]; }\n"
  "    for (long kk = 0; kk < g.K; kk++) {\n"
  "      T v = x[xo + kk * g.ks];\n"
  "      if (BETTER(a, v, ia)) { a = v; ia = r * g.K + kk; }\n"
  "    }\n"
  "  }\n"
  "  if (want_values) o[ob] = a;\n"
  "  ox[ob] = ia;\n}\n";

/* Append dim (size, x stride, out stride) to a list, merged into the previous
** entry when the list stays row-major over x and out (os NULL: no out strides). */
static void arg_push(cl_long *n, cl_long *sz, cl_long *xs, cl_long *os, int64_t s, int64_t x, int64_t o)
{
  int i = (int)*n - 1;
  if (i >= 0 && xs[i] == x * s && (!os || os[i] == o * s)) {
    sz[i] *= s; xs[i] = x; if (os) os[i] = o;
    return;
  }
  sz[++i] = s; xs[i] = x; if (os) os[i] = o;
  *n = i + 1;
}

int cl_kern_argred(RtCall *c, td_tensor *out)
{
  const char *op = rt_op_lname(c->op);
  const td_attrs *at = &c->attrs;
  td_tensor *x = c->in[0];
  int mx = c->op == RT_OP_MAX || c->op == RT_OP_ARGMAX;
  bool values = c->op == RT_OP_MAX || c->op == RT_OP_MIN;   /* also the indices, in c->aux */
  td_tensor *idx = values ? (c->aux = cl_tensor_new(out->ndim, out->sizes, TD_INT64)) : out;
  if (!idx) return TD_ERR_NOMEM;
  if (out->nelem == 0) return 0;
  uint32_t mask = 0;
  if (at->ndims < 0) mask = x->ndim > 0 ? (1u << x->ndim) - 1 : 0;
  else for (int i = 0; i < at->ndims; i++) if (at->dims[i] < x->ndim) mask |= 1u << at->dims[i];
  ArgGeo g;
  memset(&g, 0, sizeof g);
  cl_long rn = 0, rsz[TD_MAX_DIMS], rxs[TD_MAX_DIMS];
  int od = 0;
  for (int d = 0; d < x->ndim; d++) {
    bool red = mask >> d & 1;
    int64_t os = 0;
    if (!red || at->keepdim) os = out->strides[od++];
    if (x->sizes[d] == 1) continue;
    if (red) arg_push(&rn, rsz, rxs, NULL, x->sizes[d], x->strides[d], 0);
    else arg_push(&g.nk, g.ksz, g.kxs, g.kos, x->sizes[d], x->strides[d], os);
  }
  g.K = 1; g.nrow = 1;
  if (rn > 0) { g.K = rsz[rn - 1]; g.ks = rxs[rn - 1]; rn--; }
  g.nr = rn;
  for (int i = 0; i < rn; i++) { g.rsz[i] = rsz[i]; g.rxs[i] = rxs[i]; g.nrow *= rsz[i]; }
  g.nout = out->nelem; g.xoff = x->offset; g.ooff = out->offset;
  if (idx != out && idx->offset != out->offset) return rt_err(TD_ERR_STATE, "%s: index tensor offset", op);
  char src[2048];
  snprintf(src, sizeof src, "#define MX %d\n%s", mx, arg_src);
  cl_kernel k = ix_kernel(op, src, x->scalar_type, x->scalar_type, TD_INT64);
  if (!k) return TD_ERR_DEVICE;
  cl_mem ob = cl_buf(values ? out : x), ib = cl_buf(idx), xb = cl_buf(x);
  cl_int wv = values;
  IxArg av[] = { IX_ARG(ob), IX_ARG(ib), IX_ARG(xb), IX_ARG(g), IX_ARG(wv) };
  return ix_run(k, op, IX_NARGS(av), av, g.nout, NULL, 0, 0);
}

/* -- Dispatch ------------------------------------------------------------------------------------ */

int cl_kern_index(RtCall *c, td_tensor *out)
{
  switch (c->op) {
  case RT_OP_INDEX_SELECT: case RT_OP_GATHER: return ix_gather(c, out);
  case RT_OP_INDEX_ADD: case RT_OP_SCATTER_ADD: return ix_accum(c, out);
  case RT_OP_SLICE_SCATTER: return rt_kern_slice_scatter(c, out);   /* copies: rt_index.c's */
  case RT_OP_CAT: return rt_kern_cat(c, out);
  case RT_OP_UNFOLD: return ix_window(c, out, 0);
  case RT_OP_FOLD: return ix_window(c, out, 1);
  }
  return rt_err(TD_ERR_DEVICE, "%s: not available on opencl", rt_op_lname(c->op));
}
