/*
** cl_eager.c -- eager ops on the OpenCL device as one-op kernels of the kernel
** IR: an elementwise op, a copy, a reduction or a row normalizer on device
** tensors is lowered by the compiler's own lowering (jit/jit_lower.c) from a
** one-record trace, printed as OpenCL C (cl_gen.c) and launched (cl_exec.c).
** An op's math is thus written once for the compiler and for the device.
*/

/*
** Design note.
** - Run-time geometry: the kernel reads sizes, strides and offsets from its
**   parameters (cg.h, rtgeo) and the lowering's float constants (mean's 1/n,
**   a Lua number) become run-time arguments, so one program serves every
**   shape and value of a given op, dtypes and structure: the kernel hash is
**   the cache key, and a training loop builds a few dozen programs, not one
**   per shape.
** - The output: a contiguous result is the op record's own buffer; any other
**   destination (an in-place write through a view, a broadcast) is a WRITE
**   record whose destination view has the tensor's strides, lowered as the
**   compiler lowers in-place writes, in the same kernel.
** - Reductions whose reduced dims do not merge into one (dims {1, 3} of a 3-D
**   tensor) first copy their input with the reduced dims last, contiguous.
** - Few outputs over many elements (x:sum() of 2^26 values) run as a tree
**   over work groups: blocks of OCL_RBLK elements reduce to partials (float
**   sums in float64, as the CPU sums), then the partials to the result, each
**   step a kernel of the same kind. Results do not depend on scheduling.
** - Indices (argmax, max along a dim) are not in the IR: cl_index.c.
*/
#include "cl.h"
#include "../jit/jit_lower.h"
#include "../jit/cg_emit.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OCL_RBLK 8192            /* elements per partial of a tree reduction */
#define EG_MAXREC (RT_MAX_IN + 4)
#define EG_MAXARGS (JIT_LOWER_MAXARGS + 64)

typedef struct {
  JitTrace t;
  JitIns ins[EG_MAXREC];
  JitView views[2 * EG_MAXREC];
  uint8_t cls[EG_MAXREC], mat[EG_MAXREC];
  td_tensor *tens[EG_MAXREC];      /* per record: the tensor whose storage is its buffer (INPUT) */
  JitRef root;
} Eager;

/* a view of tensor x on root r (its own geometry) */
static JitView eg_view(JitRef r, const td_tensor *x)
{
  JitView v;
  memset(&v, 0, sizeof v);
  v.root = r; v.ndim = x->ndim; v.offset = x->offset;
  memcpy(v.sizes, x->sizes, sizeof v.sizes); memcpy(v.strides, x->strides, sizeof v.strides);
  return v;
}

static JitRef eg_rec(Eager *e, int op, int dtype, int cdtype, int ndim, const int64_t *sizes, int cls)
{
  JitTrace *t = &e->t;
  JitIns *r = &t->ins[t->nins];
  memset(r, 0, sizeof *r);
  r->op = op; r->dtype = dtype; r->cdtype = cdtype; r->ndim = ndim; r->dst = -1; r->arg0 = t->nviews;
  if (ndim) memcpy(r->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  r->attrs.ndims = -1; r->attrs.dtype = -1;
  e->cls[t->nins] = (uint8_t)cls; e->mat[t->nins] = cls == JIT_SC_INPUT;
  e->tens[t->nins] = NULL;
  return t->nins++;
}

/* the INPUT record of device tensor x's storage (one per tensor) */
static JitRef eg_input(Eager *e, td_tensor *x)
{
  int64_t n = (int64_t)(x->rt_storage->nbytes / (size_t)rt_dtype_size(x->scalar_type));
  JitRef r = eg_rec(e, JIT_OP_INPUT, x->scalar_type, x->scalar_type, 1, &n, JIT_SC_INPUT);
  e->t.ins[r].slot = r; e->t.ins[r].attrs.i[0] = TD_OPENCL;
  e->tens[r] = x;
  return r;
}

/* The one-record trace of call c into out (a WRITE through out's view unless
** out is contiguous with the call's shape). */
static int eg_build(Eager *e, const RtCall *c, td_tensor *out)
{
  memset(&e->t, 0, sizeof e->t);
  e->t.ins = e->ins; e->t.views = e->views; e->t.cap = EG_MAXREC; e->t.vcap = 2 * EG_MAXREC;
  JitView args[RT_MAX_IN];
  for (int k = 0; k < c->nin; k++) {
    td_tensor *x = c->in[k];
    if (x->device_type == TD_OPENCL) { args[k] = eg_view(eg_input(e, x), x); continue; }
    if (x->ndim != 0 || !x->ptr)
      return rt_err(TD_ERR_DEVICE, "%s: argument %d is on cpu, the others on opencl", rt_op_lname(c->op), k + 1);
    /* a number (or CPU 0-dim tensor): a run-time argument of the kernel */
    JitRef s = eg_rec(e, JIT_OP_SCALAR, x->scalar_type, x->scalar_type, 0, NULL, JIT_SC_SCALAR);
    e->t.ins[s].value = rt_load(x->ptr, x->scalar_type);
    e->t.ins[s].flags = JIT_IF_DYN;
    e->t.ins[s].slot = k;
    args[k] = eg_view(s, x);
  }
  int kind = rt_ops[c->op].kind;
  int cls = kind == RT_K_RED ? JIT_SC_RED : kind == RT_K_ROW ? JIT_SC_ROW : JIT_SC_EW;
  JitRef op = eg_rec(e, c->op, c->scalar_type, c->cdtype, c->ndim, c->sizes, cls);
  JitIns *r = &e->t.ins[op];
  r->attrs = c->attrs; r->nin = c->nin;
  for (int k = 0; k < c->nin; k++) e->t.views[e->t.nviews++] = args[k];
  bool direct = rt_tensor_is_contig(out) && out->ndim == c->ndim &&
                !memcmp(out->sizes, c->sizes, sizeof(int64_t) * (size_t)c->ndim);
  if (direct || cls != JIT_SC_EW) {
    if (!direct) return rt_err(TD_ERR_STATE, "%s: device result must be contiguous", rt_op_lname(c->op));
    e->mat[op] = 1; e->tens[op] = out; e->root = op;
    return 0;
  }
  /* WRITE(out's storage, value) at out's view: the op inlined into the store */
  JitRef o = eg_input(e, out);
  JitView ov;
  memset(&ov, 0, sizeof ov);
  ov.root = o; ov.ndim = 1; ov.sizes[0] = e->t.ins[o].sizes[0]; ov.strides[0] = 1;
  JitView vv;
  memset(&vv, 0, sizeof vv);
  vv.root = op; vv.ndim = c->ndim;
  memcpy(vv.sizes, c->sizes, sizeof(int64_t) * (size_t)c->ndim);
  rt_tensor_contig_strides(c->ndim, c->sizes, vv.strides);
  JitRef w = eg_rec(e, JIT_OP_WRITE, out->scalar_type, c->scalar_type, 1, &ov.sizes[0], JIT_SC_EW);
  e->t.ins[w].nin = 2;
  e->t.views[e->t.nviews++] = ov;
  e->t.views[e->t.nviews++] = vv;
  e->t.ins[w].dst = e->t.nviews;
  JitView dv = eg_view(w, out);
  e->t.views[e->t.nviews++] = dv;
  e->mat[w] = 1; e->tens[w] = out; e->root = w;
  return 0;
}

/* Lower, compile (found by hash after the first time) and launch. */
static int eg_run(Eager *e, const char *what)
{
  JitSchedCtx ctx = { &e->t, e->cls, e->mat };
  JitLowered l;
  int rc = jit_lower_group_rows(&ctx, &e->root, 1, &l);
  if (rc) {
    jit_lowered_clear(&l);
    return rc == TD_ERR_NOMEM ? rc : 1;          /* 1: the caller reshapes and retries */
  }
  CgKernel *k = l.k;
  double args[EG_MAXARGS];
  for (int i = 0; i < l.nargs; i++) args[i] = e->t.ins[l.args[i]].value;
  /* float constants (a mean's 1/n, a variance's divisor) become arguments too */
  for (int i = 0; i < k->nins; i++) {
    CgIns *in = &k->ins[i];
    if (in->kind != CG_CONST || !rt_is_float(in->dtype) || k->nargs >= EG_MAXARGS) continue;
    args[k->nargs] = in->f[0];
    in->kind = CG_ARG; in->acc = k->nargs++; in->f[0] = 0;
  }
  k->rtgeo = 1;
  cg_kernel_finish(k, l.hint);
  OclBuf bufs[CG_MAX_BUFS];
  for (int b = 0; b < l.nbuf; b++) {
    td_tensor *x = e->tens[l.bufs[b]];
    if (!x) { jit_lowered_clear(&l); return rt_err(TD_ERR_STATE, "%s: a kernel buffer without storage", what); }
    bufs[b] = (OclBuf){ (cl_mem)x->rt_storage->dev, e->t.ins[l.bufs[b]].op == JIT_OP_INPUT ||
                                                   e->t.ins[l.bufs[b]].op == JIT_OP_WRITE ? 0 : x->offset };
  }
  cl_kernel ck;
  rc = ocl_compile(&k, 1, &ck);
  if (!rc) rc = ocl_kernel_run(k, ck, bufs, args);
  jit_lowered_clear(&l);
  return rc;
}

/* -- Reductions: reduced dims last, tree over work groups --------------------------------------- */

/* A contiguous copy of x with its dims in order perm (device). */
static td_tensor *permuted_copy(td_tensor *x, const int *perm)
{
  td_tensor v = *x;
  for (int d = 0; d < x->ndim; d++) { v.sizes[d] = x->sizes[perm[d]]; v.strides[d] = x->strides[perm[d]]; }
  v.refcount = 1 << 30;
  td_tensor *o = rt_tensor_new_on(TD_OPENCL, v.ndim, v.sizes, x->scalar_type);
  if (!o) return NULL;
  td_tensor *in[1] = { &v };
  RtCall c = { .op = RT_OP_COPY, .nin = 1, .in = in, .cdtype = x->scalar_type, .scalar_type = x->scalar_type,
               .ndim = v.ndim, .device = TD_OPENCL };
  c.attrs.ndims = -1; c.attrs.dtype = -1;
  memcpy(c.sizes, v.sizes, sizeof c.sizes);
  if (cl_kern_ir(&c, o)) { td_release(o); return NULL; }
  return o;
}

/* reduced-dims mask of a reduction or row op over x */
static uint32_t red_mask(const RtCall *c, int nd)
{
  if (rt_ops[c->op].kind == RT_K_ROW) return nd ? 1u << c->attrs.i[0] : 0;
  if (c->attrs.ndims < 0) return nd > 0 ? (1u << nd) - 1 : 0;
  uint32_t m = 0;
  for (int i = 0; i < c->attrs.ndims; i++) if (c->attrs.dims[i] < nd) m |= 1u << c->attrs.dims[i];
  return m;
}

/* The reduction again on x copied with kept dims first, reduced dims last (its
** output has the same elements in the same order: kept dims keep their order). */
static int red_reshaped(RtCall *c, td_tensor *out)
{
  td_tensor *x = c->in[0];
  uint32_t m = red_mask(c, x->ndim);
  int perm[TD_MAX_DIMS], np = 0, nk = 0;
  for (int d = 0; d < x->ndim; d++) if (!(m >> d & 1)) perm[np++] = d;
  nk = np;
  for (int d = 0; d < x->ndim; d++) if (m >> d & 1) perm[np++] = d;
  td_tensor *xc = permuted_copy(x, perm);
  if (!xc) return TD_ERR_DEVICE;
  RtCall c2 = *c;
  td_tensor *in[1] = { xc };
  c2.in = in;
  c2.attrs.ndims = x->ndim - nk;
  for (int i = 0; i < c2.attrs.ndims; i++) c2.attrs.dims[i] = nk + i;
  c2.attrs.keepdim = 0;
  c2.ndim = nk;
  for (int i = 0; i < nk; i++) c2.sizes[i] = x->sizes[perm[i]];
  td_tensor o = *out;                          /* out's elements as the kept dims */
  o.ndim = nk; memcpy(o.sizes, c2.sizes, sizeof o.sizes);
  rt_tensor_contig_strides(nk, o.sizes, o.strides);
  o.refcount = 1 << 30;
  Eager e;
  int rc = eg_build(&e, &c2, &o);
  if (!rc) rc = eg_run(&e, rt_op_lname(c->op));
  if (rc == 1) rc = rt_err(TD_ERR_DEVICE, "%s: no kernel for this reduction on opencl", rt_op_lname(c->op));
  td_release(xc);
  return rc;
}

/* A tree over work groups for few outputs of many elements: x (kept K, then
** N reduced elements, contiguous) as [K, nb, OCL_RBLK] + [K, rem] partials, then
** those. Sums and products of floats keep float64 partials (float32 without fp64). */
static int red_tree(RtCall *c, td_tensor *out, int64_t K, int64_t N)
{
  int op = c->op;
  td_tensor *x = c->in[0];
  int pdt = rt_is_float(c->cdtype) && (op == RT_OP_SUM || op == RT_OP_MEAN || op == RT_OP_PROD)
            ? (cl_has_fp64() ? TD_FLOAT64 : TD_FLOAT32) : c->scalar_type;
  int pop = op == RT_OP_MEAN ? RT_OP_SUM : op;
  int64_t nb = N / OCL_RBLK, rem = N - nb * OCL_RBLK, np = nb + (rem > 0);
  int64_t ps[2] = { K, np };
  td_tensor *part = rt_tensor_new_on(TD_OPENCL, 2, ps, pdt);
  if (!part) return TD_ERR_NOMEM;
  int rc = 0;
  for (int piece = 0; piece < 2 && !rc; piece++) {
    int64_t cnt = piece ? (rem > 0) : nb;
    if (!cnt) continue;
    /* x as [K, cnt, len] at element nb*OCL_RBLK (the remainder: one block of rem) */
    td_tensor xv = *x, pv = *part, *xin = &xv;
    int64_t len = piece ? rem : OCL_RBLK;
    xv.ndim = 3; xv.sizes[0] = K; xv.sizes[1] = cnt; xv.sizes[2] = len;
    xv.strides[0] = N; xv.strides[1] = OCL_RBLK; xv.strides[2] = 1;
    xv.offset = x->offset + (piece ? nb * OCL_RBLK : 0); xv.refcount = 1 << 30;
    /* float partials: the sum computed in float64 (the lowering loads and widens in one pass) */
    RtCall r = { .op = pop, .nin = 1, .in = &xin, .cdtype = pdt == c->scalar_type || !rt_is_float(pdt) ? c->cdtype : pdt,
                 .scalar_type = pdt, .ndim = 2, .device = TD_OPENCL };
    r.sizes[0] = K; r.sizes[1] = cnt;
    r.attrs = c->attrs; r.attrs.ndims = 1; r.attrs.dims[0] = 2; r.attrs.keepdim = 0;
    pv.ndim = 2; pv.sizes[0] = K; pv.sizes[1] = cnt; pv.strides[0] = np; pv.strides[1] = 1;
    pv.offset = part->offset + (piece ? nb : 0); pv.refcount = 1 << 30;
    Eager e;
    {
      if (pv.strides[0] == pv.sizes[1] || K == 1) {
        rc = eg_build(&e, &r, &pv);
        if (!rc) rc = eg_run(&e, rt_op_lname(op));
      } else {                                   /* partials of K > 1 rows land strided: go through a temp */
        td_tensor *tmp = rt_tensor_new_on(TD_OPENCL, 2, r.sizes, pdt);
        rc = tmp ? eg_build(&e, &r, tmp) : TD_ERR_NOMEM;
        if (!rc) rc = eg_run(&e, rt_op_lname(op));
        if (!rc) {
          RtCall cp = { .op = RT_OP_COPY, .nin = 1, .in = &tmp, .cdtype = pdt, .scalar_type = pdt, .ndim = 2,
                        .device = TD_OPENCL };
          cp.attrs.ndims = -1; cp.attrs.dtype = -1;
          memcpy(cp.sizes, r.sizes, sizeof cp.sizes);
          rc = cl_kern_ir(&cp, &pv);
        }
        td_release(tmp);
      }
    }
    if (rc == 1) rc = rt_err(TD_ERR_DEVICE, "%s: no kernel for the partials on opencl", rt_op_lname(op));
  }
  if (!rc) {                                     /* the partials to the result (mean: / N) */
    RtCall f = *c;
    td_tensor *pin = part;
    f.in = &pin; f.cdtype = pdt;
    f.attrs.ndims = 1; f.attrs.dims[0] = 1; f.attrs.keepdim = 0;
    f.ndim = 1; f.sizes[0] = K;
    if (op == RT_OP_MEAN) f.op = RT_OP_SUM;
    td_tensor o = *out;
    o.ndim = 1; o.sizes[0] = K; o.strides[0] = 1; o.refcount = 1 << 30;
    if (op == RT_OP_MEAN || pdt != c->scalar_type) {   /* in the partials' type, then scaled / cast */
      int64_t ks[1] = { K };
      td_tensor *s = rt_tensor_new_on(TD_OPENCL, 1, ks, pdt);
      f.scalar_type = pdt;
      Eager e;
      rc = s ? eg_build(&e, &f, s) : TD_ERR_NOMEM;
      if (!rc) rc = eg_run(&e, rt_op_lname(op));
      if (!rc) {
        td_tensor *nn = op == RT_OP_MEAN ? td_wrap_number((double)N) : NULL, *in2[2] = { s, nn };
        RtCall d = { .op = op == RT_OP_MEAN ? RT_OP_DIV : RT_OP_CAST, .nin = op == RT_OP_MEAN ? 2 : 1, .in = in2,
                     .cdtype = pdt, .scalar_type = c->scalar_type, .ndim = 1, .device = TD_OPENCL };
        d.attrs.ndims = -1; d.attrs.dtype = op == RT_OP_MEAN ? -1 : c->scalar_type;
        d.sizes[0] = K;
        if (op == RT_OP_MEAN && !nn) rc = TD_ERR_NOMEM;
        /* mean: the quotient in the partials' type, cast to the result's in the same kernel */
        if (!rc) rc = cl_kern_ir(&d, &o);
        td_release(nn);
      }
      td_release(s);
    } else {
      Eager e;
      rc = eg_build(&e, &f, &o);
      if (!rc) rc = eg_run(&e, rt_op_lname(op));
    }
    if (rc == 1) rc = rt_err(TD_ERR_DEVICE, "%s: no kernel for the partials on opencl", rt_op_lname(op));
  }
  td_release(part);
  return rc;
}

/* Does reduction c over x run as a tree (few outputs, many contiguous elements each)? */
static bool red_tree_fits(const RtCall *c, int64_t *K, int64_t *N)
{
  int op = c->op;
  const td_tensor *x = c->in[0];
  if (op != RT_OP_SUM && op != RT_OP_MEAN && op != RT_OP_PROD && op != RT_OP_MAX && op != RT_OP_MIN) return false;
  if (x->device_type != TD_OPENCL || !rt_tensor_is_contig(x)) return false;
  uint32_t m = red_mask(c, x->ndim);
  int64_t k = 1, n = 1;
  bool seen = false;
  for (int d = 0; d < x->ndim; d++) {
    if (m >> d & 1) { n *= x->sizes[d]; seen = true; }
    else { if (seen && x->sizes[d] > 1) return false; k *= x->sizes[d]; }   /* reduced dims last */
  }
  *K = k; *N = n;
  return n >= 4 * OCL_RBLK && k <= 4 * cl_limits()->units;
}

/* -- Entry ----------------------------------------------------------------------------------------- */

int cl_kern_ir(RtCall *c, td_tensor *out)
{
  const char *name = rt_op_lname(c->op);
  for (int i = 0; i < c->nin; i++)
    if ((c->in[i]->scalar_type == TD_FLOAT64 || c->cdtype == TD_FLOAT64 || out->scalar_type == TD_FLOAT64) && !cl_has_fp64())
      return rt_err(TD_ERR_DTYPE, "%s: the OpenCL device has no float64 (cl_khr_fp64)", name);
  if (out->nelem == 0) return 0;
  int kind = rt_ops[c->op].kind;
  if (kind == RT_K_RED && c->in[0]->nelem == 0) {   /* over nothing: the op's value on an empty set */
    int op = c->op;
    return cl_fill(out, op == RT_OP_PROD ? 1 : op == RT_OP_LOGSUMEXP ? -INFINITY :
                        (op == RT_OP_MEAN || op == RT_OP_VAR || op == RT_OP_STD) ? NAN : 0);
  }
  if (kind == RT_K_RED) {
    int64_t K, N;
    if (red_tree_fits(c, &K, &N)) return red_tree(c, out, K, N);
  }
  RtCall cc;
  if (kind == RT_K_EW || c->op == RT_OP_COPY) {   /* elementwise: over out's shape (callers may leave c's unset) */
    cc = *c;
    cc.ndim = out->ndim;
    memcpy(cc.sizes, out->sizes, sizeof cc.sizes);
    c = &cc;
  }
  Eager e;
  int rc = eg_build(&e, c, out);
  if (!rc) rc = eg_run(&e, name);
  if (rc == 1 && kind != RT_K_EW) rc = red_reshaped(c, out);
  if (rc == 1) rc = rt_err(TD_ERR_DEVICE, "%s: no kernel for this geometry on opencl", name);
  return rc;
}

int cl_fill(td_tensor *t, double v)
{
  if (t->scalar_type == TD_FLOAT64 && !cl_has_fp64())
    return rt_err(TD_ERR_DTYPE, "full: the OpenCL device has no float64 (cl_khr_fp64)");
  double val = v;
  td_tensor num;
  memset(&num, 0, sizeof num);
  num.refcount = 1 << 30; num.scalar_type = TD_FLOAT64; num.flags = TD_TF_WRAPPED_NUMBER; num.nelem = 1; num.ptr = &val;
  td_tensor *in[1] = { &num };
  RtCall c = { .op = RT_OP_COPY, .nin = 1, .in = in, .cdtype = TD_FLOAT64, .scalar_type = t->scalar_type,
               .ndim = t->ndim, .device = TD_OPENCL };
  c.attrs.ndims = -1; c.attrs.dtype = -1;
  memcpy(c.sizes, t->sizes, sizeof c.sizes);
  return cl_kern_ir(&c, t);
}
