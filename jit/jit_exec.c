/*
** jit_exec.c -- runs a compiled variant: binds the call's inputs, plans the
** intermediate buffers once per variant (one arena, blocks reused by
** liveness), runs the plan's steps (compiled kernels on the thread pool, or
** one record through the runtime's eager kernel), applies in-place effects
** to the caller's tensors and hands out the outputs as new real tensors.
** A trace on OpenCL runs the same plan on the device (jit_exec_dev.c).
*/
#include "jit_exec.h"
#include <stdlib.h>
#include <string.h>


/* -- Buffer planning ---------------------------------------------------------------------- */

static void touch(JitExec *x, JitRef r, int step)
{
  ExecBuf *b = &x->b[r];
  if (b->def < 0) b->def = step;
  if (step > b->last) b->last = step;
}

JitRef jit_exec_resolve(const JitExec *x, JitRef r) { while (x->b[r].kind == BUF_ALIAS) r = x->b[r].alias; return r; }
#define resolve jit_exec_resolve

static int exec_plan_buffers(JitExec *x)
{
  const JitTrace *t = x->t; const JitPlan *p = x->p;
  for (int i = 0; i < t->nins; i++) x->b[i] = (ExecBuf){ .def = -1, .last = -1 };
  for (int s = 0; s < p->nsteps; s++) {
    const JitStep *st = &p->steps[s];
    if (st->kind == JIT_STEP_KERNEL) for (int k = 0; k < st->nbuf; k++) touch(x, st->bufs[k], s);
    else {
      const JitIns *ins = &t->ins[st->ref];
      touch(x, st->ref, s);
      for (int k = 0; k < ins->nin; k++) touch(x, jit_arg(t, ins, k)->root, s);
    }
  }
  /* is_out: read after the last step (1 returned or a .grad, 2 an effect, 3 both) */
  uint8_t *is_out = calloc((size_t)t->nins + 1, 1);
  if (!is_out) return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory");
  for (int k = 0; k < t->nouts; k++) is_out[t->outs[k].root] |= 1;
  for (int k = 0; k < t->neffects; k++) is_out[t->effects[k].ref] |= 2;
  for (int i = 0; i < t->nins; i++) if (is_out[i]) x->b[i].last = p->nsteps;   /* read after the last step */
  /* free blocks: (offset, size) pairs reused best-fit; blocks never split */
  int64_t *fo = malloc(sizeof(int64_t) * 2 * (size_t)(t->nins + 1)); int nf = 0;
  JitRef *order = malloc(sizeof(JitRef) * (size_t)(t->nins + 1)); int no = 0;
  if (!fo || !order) { free(is_out); free(fo); free(order); return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory"); }
  int64_t end = 0;
  for (int i = 0; i < t->nins; i++) {
    const JitIns *ins = &t->ins[i];
    ExecBuf *b = &x->b[i];
    if (ins->op == JIT_OP_INPUT) { b->kind = BUF_INPUT; continue; }
    if (ins->op == JIT_OP_SCALAR || !(ins->flags & JIT_IF_MAT) || (ins->flags & JIT_IF_DEAD)) continue;
    /* effects and outputs of inputs: a WRITE whose old version dies here reuses its buffer
    ** (an optimizer's p.add_ updates the parameter's own memory) */
    if (ins->op == JIT_OP_WRITE) {
      JitRef old = jit_arg(t, ins, 0)->root;
      const JitIns *oi = &t->ins[old];
      JitRef ro = resolve(x, old);
      bool old_dies = x->b[old].last <= b->def && !is_out[old];
      /* into a dying intermediate (not for a returned value: it needs its own storage),
      ** or into the input it is a version of: the final one (the effect) or one on
      ** the way to it, so that a chain of in-place updates (Adam's m, v, p) runs in
      ** the input's own memory and needs no copy back */
      bool ok_kind = (x->b[ro].kind == BUF_ARENA && !(is_out[i] & 1)) ||
                     (x->b[ro].kind == BUF_INPUT && (is_out[i] == 2 || is_out[i] == 0));
      if (old_dies && ok_kind && oi->dtype == ins->dtype) {
        b->kind = BUF_ALIAS; b->alias = old;
        /* the alias extends the life of the block it uses */
        if (x->b[ro].kind == BUF_ARENA && b->last > x->b[ro].last) x->b[ro].last = b->last;
        continue;
      }
    }
    if (is_out[i]) {
      /* effects of an input go back into its storage; other outputs get their own */
      b->kind = BUF_OUTPUT;
      continue;
    }
    b->kind = BUF_ARENA; b->nbytes = (rec_bytes(ins) + 63) & ~(int64_t)63;
    order[no++] = i;
  }
  /* assign arena blocks in order of definition; a block is free once its last step passed */
  for (int a = 1; a < no; a++)
    for (int c = a; c > 0 && x->b[order[c - 1]].def > x->b[order[c]].def; c--) { JitRef q = order[c]; order[c] = order[c - 1]; order[c - 1] = q; }
  int *live = malloc(sizeof(int) * (size_t)(no + 1)); int nl = 0;
  for (int a = 0; a < no; a++) {
    ExecBuf *b = &x->b[order[a]];
    for (int l = 0; l < nl; l++) {
      ExecBuf *o = &x->b[live[l]];
      if (o->last < b->def) { fo[2 * nf] = o->off; fo[2 * nf + 1] = o->nbytes; nf++; live[l--] = live[--nl]; }
    }
    int best = -1;
    for (int f = 0; f < nf; f++)
      if (fo[2 * f + 1] >= b->nbytes && (best < 0 || fo[2 * f + 1] < fo[2 * best + 1])) best = f;
    if (best >= 0) { b->off = fo[2 * best]; b->nbytes = fo[2 * best + 1]; fo[2 * best] = fo[2 * (nf - 1)]; fo[2 * best + 1] = fo[2 * (nf - 1) + 1]; nf--; }
    else { b->off = end; end += b->nbytes; }
    live[nl++] = order[a];
  }
  free(live); free(fo); free(order); free(is_out);
  x->arena_bytes = end;
  if (end && x->dev == TD_OPENCL) return (x->darena = cl_storage_new((size_t)end)) ? 0 : TD_ERR_NOMEM;
  if (end && !(x->arena = rt_alloc((size_t)end)))
    return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory allocating %lld bytes of intermediate buffers", (long long)end);
  return 0;
}

JitExec *jit_exec_new(const JitTrace *t, const JitPlan *p, const CgKernelFn *fns)
{
  JitExec *x = calloc(1, sizeof *x);
  if (!x) return rt_errp(TD_ERR_NOMEM, "tide.compile: out of memory");
  x->t = t; x->p = p; x->fns = fns; x->dev = jit_trace_device(t);
  x->db = calloc((size_t)t->nins + 1, sizeof *x->db);
  x->b = calloc((size_t)t->nins + 1, sizeof *x->b);
  x->ptr = calloc((size_t)t->nins + 1, sizeof *x->ptr);
  x->wrap = calloc((size_t)t->nins + 1, sizeof *x->wrap);
  x->ost = calloc((size_t)t->nins + 1, sizeof *x->ost);
  if (!x->b || !x->ptr || !x->wrap || !x->ost || !x->db || exec_plan_buffers(x)) { jit_exec_free(x); return NULL; }
  return x;
}

void jit_exec_free(JitExec *x)
{
  if (!x) return;
  if (x->arena) rt_free(x->arena, (size_t)x->arena_bytes);
  rt_storage_release(x->darena);
  free(x->b); free(x->ptr); free(x->wrap); free(x->ost); free(x->db); free(x);
}

/* -- Eager steps ------------------------------------------------------------------------------ */

/* A header over root r's buffer with view v's geometry (refcount 1: never freed). */
static void view_header(JitExec *x, td_tensor *h, const JitView *v, int dtype)
{
  memset(h, 0, sizeof *h);
  RtStorage *s = &x->wrap[v->root];
  s->refcount = 1 << 30; s->ptr = x->ptr[v->root]; s->nbytes = (size_t)rec_bytes(&x->t->ins[v->root]);
  h->refcount = 1 << 30;
  h->ndim = v->ndim; h->scalar_type = dtype; h->device_type = TD_CPU;
  memcpy(h->sizes, v->sizes, sizeof h->sizes); memcpy(h->strides, v->strides, sizeof h->strides);
  h->offset = v->offset; h->nelem = rt_numel(v->ndim, v->sizes);
  h->rt_storage = s; h->ptr = s->ptr + v->offset * rt_dtype_size(dtype);
}

static int exec_eager(JitExec *x, const JitTrace *cur, JitRef r)
{
  const JitTrace *t = x->t;
  const JitIns *ins = &t->ins[r];
  td_tensor hin[RT_MAX_IN], *in[RT_MAX_IN], out;
  for (int k = 0; k < ins->nin; k++) {
    const JitView *v = jit_arg(t, ins, k);
    const JitIns *src = &t->ins[v->root];
    if (src->op == JIT_OP_SCALAR) {     /* a wrapped number, with this call's value */
      memset(&hin[k], 0, sizeof hin[k]);
      static _Thread_local double scal[RT_MAX_IN];
      /* this call's value when dynamic; else the variant's (maybe a folded constant) */
      rt_store(&scal[k], src->dtype, (src->flags & JIT_IF_DYN) ? cur->ins[v->root].value : src->value);
      hin[k].refcount = 1 << 30; hin[k].scalar_type = src->dtype;
      hin[k].flags = TD_TF_WRAPPED_NUMBER; hin[k].nelem = 1; hin[k].ptr = &scal[k];
      if (v->ndim) {                    /* a constant expanded to a shape (traced zeros) */
        hin[k].flags = 0; hin[k].ndim = v->ndim; hin[k].nelem = rt_numel(v->ndim, v->sizes);
        memcpy(hin[k].sizes, v->sizes, sizeof hin[k].sizes);
      }
    } else view_header(x, &hin[k], v, src->dtype);
    in[k] = &hin[k];
  }
  JitView ov; memset(&ov, 0, sizeof ov);
  ov.root = r; ov.ndim = ins->ndim; memcpy(ov.sizes, ins->sizes, sizeof ov.sizes);
  rt_tensor_contig_strides(ins->ndim, ins->sizes, ov.strides);
  view_header(x, &out, &ov, ins->dtype);
  if (ins->op == JIT_OP_WRITE) {        /* new version = old, then value written at dst */
    if (x->ptr[r] != x->ptr[jit_arg(t, ins, 0)->root]) memcpy(x->ptr[r], x->ptr[jit_arg(t, ins, 0)->root], (size_t)rec_bytes(ins));
    td_tensor dst;
    JitView dv = t->views[ins->dst]; dv.root = r;
    view_header(x, &dst, &dv, ins->dtype);
    RtCall c = { .op = RT_OP_COPY, .nin = 1, .in = &in[1], .cdtype = in[1]->scalar_type,
                 .scalar_type = ins->dtype, .ndim = dv.ndim };
    c.attrs.ndims = -1; c.attrs.dtype = -1;
    memcpy(c.sizes, dv.sizes, sizeof c.sizes);
    return rt_kern_ew(&c, &dst);
  }
  RtCall c;
  int rc = rt_call_prepare(&c, ins->op, ins->nin, in, &ins->attrs);
  if (!rc) rc = rt_ops[ins->op].kern(&c, &out);
  td_release(c.aux);
  return rc;
}

/* -- A call ------------------------------------------------------------------------------------ */

int jit_exec_run(JitExec *x, const JitTrace *cur, td_tensor **outs)
{
  if (x->dev == TD_OPENCL) return jit_exec_run_dev(x, cur, outs);
  const JitTrace *t = x->t; const JitPlan *p = x->p;
  RtStorage **ost = x->ost;
  int rc = 0;
  for (int i = 0; i < t->nins && !rc; i++) {
    ExecBuf *b = &x->b[i];
    switch (b->kind) {
    case BUF_INPUT: x->ptr[i] = cur->inputs[t->ins[i].slot]->rt_storage->ptr; break;
    case BUF_ARENA: x->ptr[i] = x->arena + b->off; break;
    case BUF_OUTPUT:
      if (!(ost[i] = rt_storage_new((size_t)rec_bytes(&t->ins[i])))) rc = TD_ERR_NOMEM;
      else x->ptr[i] = ost[i]->ptr;
      break;
    case BUF_ALIAS: x->ptr[i] = x->ptr[resolve(x, i)]; break;
    default: x->ptr[i] = NULL;
    }
  }
  char *bufs[CG_MAX_BUFS]; double args[CG_MAX_BUFS];
  for (int s = 0; s < p->nsteps && !rc; s++) {
    const JitStep *st = &p->steps[s];
    if (st->kind == JIT_STEP_EAGER) {
      int pe = rt_prof_on ? rt_prof_begin(TD_PROF_OP, jit_op_name(t->ins[st->ref].op), 0, NULL) : -1;
      rc = exec_eager(x, cur, st->ref);
      rt_prof_end(pe);
      continue;
    }
    for (int k = 0; k < st->nbuf; k++) bufs[k] = x->ptr[st->bufs[k]];
    for (int k = 0; k < st->nargs; k++) args[k] = cur->ins[st->args[k]].value;
    int pe = rt_prof_on ? rt_prof_begin(TD_PROF_KERNEL, p->kernels[st->kernel]->name, 0, NULL) : -1;
    rc = cg_kernel_run(p->kernels[st->kernel], x->fns[st->kernel], bufs, args);
    rt_prof_end(pe);
  }
  /* effects: the newest version of each written input goes back into its storage */
  for (int e = 0; e < t->neffects && !rc; e++) {
    RtStorage *s = cur->inputs[t->effects[e].slot]->rt_storage;
    char *src = x->ptr[t->effects[e].ref];
    if (src != s->ptr) memcpy(s->ptr, src, s->nbytes);
    rt_bump_version(cur->inputs[t->effects[e].slot]);
  }
  for (int k = 0; k < t->nouts; k++) outs[k] = NULL;
  for (int k = 0; k < t->nouts && !rc; k++) {
    const JitView *v = &t->outs[k];
    JitRef root = v->root;
    const JitIns *ri = &t->ins[root];
    td_tensor *o = rt_tensor_alloc();
    if (!o) { rc = TD_ERR_NOMEM; break; }
    RtStorage *s = ost[root];
    if (!s) {                           /* an input, or a version written back into one */
      JitRef in = root;
      while (t->ins[in].op == JIT_OP_WRITE) in = jit_arg(t, &t->ins[in], 0)->root;
      s = t->ins[in].op == JIT_OP_INPUT ? cur->inputs[t->ins[in].slot]->rt_storage : NULL;
      if (!s) { td_release(o); rc = rt_err(TD_ERR_STATE, "tide.compile: output %d has no buffer", k + 1); break; }
    }
    rt_storage_retain(s);
    o->ndim = v->ndim; o->scalar_type = ri->dtype; o->device_type = TD_CPU;
    memcpy(o->sizes, v->sizes, sizeof o->sizes); memcpy(o->strides, v->strides, sizeof o->strides);
    o->offset = v->offset; o->nelem = rt_numel(v->ndim, v->sizes);
    o->rt_storage = s; o->ptr = (char *)s->ptr + v->offset * rt_dtype_size(ri->dtype);
    outs[k] = o;
  }
  for (int i = 0; i < t->nins; i++) { rt_storage_release(ost[i]); ost[i] = NULL; }
  if (rc) for (int k = 0; k < t->nouts; k++) { td_release(outs[k]); outs[k] = NULL; }
  return rc;
}

/* -- The interpreter ------------------------------------------------------------------------------ */

JitPlan *jit_plan_eager(JitTrace *t)
{
  JitPlan *p = calloc(1, sizeof *p);
  if (!p || !(p->steps = calloc((size_t)t->nins + 1, sizeof *p->steps))) { free(p); return rt_errp(TD_ERR_NOMEM, "tide.compile: out of memory"); }
  for (int i = 0; i < t->nins; i++) {
    JitIns *ins = &t->ins[i];
    if (ins->op == JIT_OP_INPUT || ins->op == JIT_OP_SCALAR || (ins->flags & JIT_IF_DEAD)) continue;
    ins->flags |= JIT_IF_MAT;
    p->steps[p->nsteps++] = (JitStep){ .kind = JIT_STEP_EAGER, .ref = i };
  }
  return p;
}
