/*
** jit_exec_dev.c -- a compiled variant on the OpenCL device: the same plan as
** on the CPU (jit_exec.c plans the buffers), its kernels printed as OpenCL C
** (opencl/cl_gen.c) and launched on the device's queue, its eager steps
** (matmul through CLBlast, index ops) through the device's eager kernels.
*/

/*
** Design note. Every root's buffer is a device buffer and an element offset
** (OclBuf): inputs their storage's cl_mem, intermediates blocks of one
** device arena (64-byte aligned, so a block's byte offset is a whole number
** of elements), outputs new device storages. A CPU tensor in a device trace
** (only 0-dim ones enter one: jit_record.c) is copied to the device per
** call. Nothing waits for the device: the queue is in order, and values are
** read back only when the caller reads them.
*/
#include "jit_exec.h"
#include "cg_emit.h"
#include <stdlib.h>
#include <string.h>

/* -- Device of a trace, compiles, text -------------------------------------------------------- */

int jit_trace_device(const JitTrace *t)
{
  for (int i = 0; i < t->nins; i++)
    if (t->ins[i].op == JIT_OP_INPUT && t->ins[i].attrs.i[0] == TD_OPENCL) return TD_OPENCL;
  return TD_CPU;
}

int jit_plan_compile(JitPlan *p, int device, CgKernelFn *fns)
{
  if (!p->nkernels) return 0;
  if (device != TD_OPENCL) return cg_compile(p->kernels, p->nkernels, fns);
  if (!(p->ocl = calloc((size_t)p->nkernels, sizeof *p->ocl))) return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory");
  return ocl_compile(p->kernels, p->nkernels, (cl_kernel *)p->ocl);
}

char *jit_kernel_source(const CgKernel *k, int device)
{
  if (device != TD_OPENCL) return cg_kernel_c_source(k);
  if (cl_init(-1)) return NULL;
  CgKernel *ks[1] = { (CgKernel *)k };
  int rc = 0;
  char *s = ocl_source_batch(ks, 1, ocl_caps(), &rc);
  if (rc) { free(s); return NULL; }
  return s;
}

/* -- Eager steps ------------------------------------------------------------------------------- */

/* A header over root r's device buffer with view v's geometry (never freed). */
static void view_header(JitExec *x, td_tensor *h, const JitView *v, int dtype)
{
  memset(h, 0, sizeof *h);
  RtStorage *s = &x->wrap[v->root];
  s->refcount = 1 << 30; s->ptr = NULL; s->dev = x->db[v->root].m; s->device_type = TD_OPENCL;
  s->nbytes = (size_t)rec_bytes(&x->t->ins[v->root]);
  h->refcount = 1 << 30;
  h->ndim = v->ndim; h->scalar_type = dtype; h->device_type = TD_OPENCL;
  memcpy(h->sizes, v->sizes, sizeof h->sizes); memcpy(h->strides, v->strides, sizeof h->strides);
  h->offset = v->offset + x->db[v->root].off; h->nelem = rt_numel(v->ndim, v->sizes);
  h->rt_storage = s; h->ptr = NULL;
}

static int copy_buf(const OclBuf *dst, const OclBuf *src, int64_t nbytes, int es)
{
  if ((dst->m == src->m && dst->off == src->off) || nbytes <= 0) return 0;
  return cl_check(clEnqueueCopyBuffer(cl_queue(), src->m, dst->m, (size_t)(src->off * es), (size_t)(dst->off * es),
                                      (size_t)nbytes, 0, NULL, NULL), "tide.compile", "clEnqueueCopyBuffer");
}

static int exec_eager(JitExec *x, const JitTrace *cur, JitRef r)
{
  const JitTrace *t = x->t;
  const JitIns *ins = &t->ins[r];
  td_tensor hin[RT_MAX_IN], *in[RT_MAX_IN], out, *tmp[RT_MAX_IN] = { 0 };
  double scal[RT_MAX_IN];
  int rc = 0;
  for (int k = 0; k < ins->nin && !rc; k++) {
    const JitView *v = jit_arg(t, ins, k);
    const JitIns *src = &t->ins[v->root];
    in[k] = &hin[k];
    if (src->op == JIT_OP_SCALAR) {     /* a number (a CPU 0-dim tensor joins the call), or zeros of a shape */
      double val = (src->flags & JIT_IF_DYN) ? cur->ins[v->root].value : src->value;
      if (v->ndim) {
        if (!(tmp[k] = rt_full_on(TD_OPENCL, v->ndim, v->sizes, val, src->dtype))) rc = TD_ERR_NOMEM;
        in[k] = tmp[k];
        continue;
      }
      memset(&hin[k], 0, sizeof hin[k]);
      rt_store(&scal[k], src->dtype, val);
      hin[k].refcount = 1 << 30; hin[k].scalar_type = src->dtype;
      hin[k].flags = TD_TF_WRAPPED_NUMBER; hin[k].nelem = 1; hin[k].ptr = &scal[k];
    } else view_header(x, &hin[k], v, src->dtype);
  }
  JitView ov; memset(&ov, 0, sizeof ov);
  ov.root = r; ov.ndim = ins->ndim; memcpy(ov.sizes, ins->sizes, sizeof ov.sizes);
  rt_tensor_contig_strides(ins->ndim, ins->sizes, ov.strides);
  view_header(x, &out, &ov, ins->dtype);
  if (!rc && ins->op == JIT_OP_WRITE) {   /* new version = old, then value written at dst */
    JitRef old = jit_arg(t, ins, 0)->root;
    rc = copy_buf(&x->db[r], &x->db[old], rec_bytes(ins), rt_dtype_size(ins->dtype));
    td_tensor dst;
    JitView dv = t->views[ins->dst]; dv.root = r;
    view_header(x, &dst, &dv, ins->dtype);
    RtCall c = { .op = RT_OP_COPY, .nin = 1, .in = &in[1], .cdtype = in[1]->scalar_type,
                 .scalar_type = ins->dtype, .ndim = dv.ndim, .device = TD_OPENCL };
    c.attrs.ndims = -1; c.attrs.dtype = -1;
    memcpy(c.sizes, dv.sizes, sizeof c.sizes);
    if (!rc) rc = cl_kern(&c, &dst);
  } else if (!rc) {
    RtCall c;
    rc = rt_call_prepare(&c, ins->op, ins->nin, in, &ins->attrs);
    if (!rc) rc = cl_kern(&c, &out);
    td_release(c.aux);
  }
  for (int k = 0; k < ins->nin; k++) td_release(tmp[k]);
  return rc;
}

/* -- A call ------------------------------------------------------------------------------------- */

int jit_exec_run_dev(JitExec *x, const JitTrace *cur, td_tensor **outs)
{
  const JitTrace *t = x->t; const JitPlan *p = x->p;
  RtStorage **ost = x->ost;
  int rc = 0;
  for (int i = 0; i < t->nins && !rc; i++) {
    ExecBuf *b = &x->b[i];
    const JitIns *ins = &t->ins[i];
    x->db[i] = (OclBuf){ NULL, 0 };
    switch (b->kind) {
    case BUF_INPUT: {
      td_tensor *in = cur->inputs[ins->slot];
      RtStorage *s = in->rt_storage;
      if (s->dev) { x->db[i].m = (cl_mem)s->dev; break; }
      /* a CPU 0-dim tensor: its storage, copied for this call */
      if (!(ost[i] = cl_storage_new(s->nbytes))) { rc = TD_ERR_NOMEM; break; }
      x->db[i].m = (cl_mem)ost[i]->dev;
      rc = cl_upload(x->db[i].m, 0, s->ptr, s->nbytes, NULL, "tide.compile");
      break;
    }
    case BUF_ARENA: x->db[i] = (OclBuf){ (cl_mem)x->darena->dev, b->off / rt_dtype_size(ins->dtype) }; break;
    case BUF_OUTPUT:
      if (!(ost[i] = cl_storage_new((size_t)rec_bytes(ins)))) rc = TD_ERR_NOMEM;
      else x->db[i].m = (cl_mem)ost[i]->dev;
      break;
    case BUF_ALIAS: x->db[i] = x->db[jit_exec_resolve(x, i)]; break;
    default: break;
    }
  }
  OclBuf bufs[CG_MAX_BUFS]; double args[CG_MAX_BUFS];
  for (int s = 0; s < p->nsteps && !rc; s++) {
    const JitStep *st = &p->steps[s];
    if (st->kind == JIT_STEP_EAGER) {
      int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, jit_op_name(t->ins[st->ref].op), 0, NULL) : -1;
      rc = exec_eager(x, cur, st->ref);
      rt_prof_end(pe);
      continue;
    }
    for (int k = 0; k < st->nbuf; k++) bufs[k] = x->db[st->bufs[k]];
    for (int k = 0; k < st->nargs; k++) args[k] = cur->ins[st->args[k]].value;
    int pe = rt_prof_on ? rt_prof_begin(TD_PROF_KERNEL, p->kernels[st->kernel]->name, 0, NULL) : -1;
    rc = ocl_kernel_run(p->kernels[st->kernel], (cl_kernel)p->ocl[st->kernel], bufs, args);
    rt_prof_end(pe);
  }
  /* effects: the newest version of each written input goes back into its storage */
  for (int e = 0; e < t->neffects && !rc; e++) {
    td_tensor *in = cur->inputs[t->effects[e].slot];
    RtStorage *s = in->rt_storage;
    const OclBuf *src = &x->db[t->effects[e].ref];
    int es = rt_dtype_size(t->ins[t->effects[e].ref].dtype);
    if (s->dev) rc = copy_buf(&(OclBuf){ (cl_mem)s->dev, 0 }, src, (int64_t)s->nbytes, es);
    else {
      rc = cl_check(clEnqueueReadBuffer(cl_queue(), src->m, CL_TRUE, (size_t)(src->off * es), s->nbytes, s->ptr,
                                        0, NULL, NULL), "tide.compile", "clEnqueueReadBuffer");
      cl_synced();
    }
    rt_bump_version(in);
  }
  for (int k = 0; k < t->nouts; k++) outs[k] = NULL;
  for (int k = 0; k < t->nouts && !rc; k++) {
    const JitView *v = &t->outs[k];
    JitRef root = v->root;
    const JitIns *ri = &t->ins[root];
    td_tensor *o = rt_tensor_alloc();
    if (!o) { rc = TD_ERR_NOMEM; break; }
    RtStorage *s = t->ins[root].op == JIT_OP_INPUT ? NULL : ost[root];
    if (!s) {                           /* an input, or a version written back into one */
      JitRef in = root;
      while (t->ins[in].op == JIT_OP_WRITE) in = jit_arg(t, &t->ins[in], 0)->root;
      s = t->ins[in].op == JIT_OP_INPUT ? cur->inputs[t->ins[in].slot]->rt_storage : NULL;
      if (!s) { td_release(o); rc = rt_err(TD_ERR_STATE, "tide.compile: output %d has no buffer", k + 1); break; }
    }
    rt_storage_retain(s);
    o->ndim = v->ndim; o->scalar_type = ri->dtype; o->device_type = s->dev ? TD_OPENCL : TD_CPU;
    memcpy(o->sizes, v->sizes, sizeof o->sizes); memcpy(o->strides, v->strides, sizeof o->strides);
    o->offset = v->offset; o->nelem = rt_numel(v->ndim, v->sizes);
    o->rt_storage = s; o->ptr = s->dev ? NULL : (char *)s->ptr + v->offset * rt_dtype_size(ri->dtype);
    outs[k] = o;
  }
  for (int i = 0; i < t->nins; i++) { rt_storage_release(ost[i]); ost[i] = NULL; }
  if (rc) for (int k = 0; k < t->nouts; k++) { td_release(outs[k]); outs[k] = NULL; }
  return rc;
}
