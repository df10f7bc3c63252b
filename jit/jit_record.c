/*
** jit_record.c -- the trace recorder: while a compiled function is traced,
** the dispatcher hands every non-view op here instead of running it. Records
** go into the active trace (jit_ir.h); results are traced tensors (headers
** over a storage with no data that names the root record holding its value).
**
** Real tensors met as operands become INPUT records, one per storage; Lua
** numbers (wrapped numbers) become SCALAR records. In-place writes are
** functionalized into WRITE records; the storage (traced) or the recorder's
** storage map (real) then names the new version, so every alias reads it.
*/
#include "jit_rec.h"
#include <stdlib.h>
#include <string.h>

_Thread_local int jit_tracing;
static _Thread_local JitRec *cur;
static uint32_t trace_ids;                  /* atomic: traces on any thread get distinct ids */

static const char *jit_names[] = {
#define JIT_OPNAME(name) #name,
  JIT_OPDEF(JIT_OPNAME)
#undef JIT_OPNAME
};

/* lower-case names, filled once at load (before any thread can ask) */
static char jit_low[JIT_OP__MAX - RT_OP__MAX][16];
__attribute__((constructor)) static void jit_names_init(void)
{
  for (int op = JIT_OP__BASE + 1; op < JIT_OP__MAX; op++)
    for (int i = 0; jit_names[op - RT_OP__MAX][i] && i < 15; i++)
      jit_low[op - RT_OP__MAX][i] = (char)(jit_names[op - RT_OP__MAX][i] | 0x20);
}

const char *jit_op_name(int op)
{
  if (op >= 0 && op < RT_OP__MAX) return rt_op_lname(op);
  if (op > JIT_OP__BASE && op < JIT_OP__MAX) return jit_low[op - RT_OP__MAX];
  return "?";
}

JitTrace *jit_trace_active(void) { return cur ? &cur->t : NULL; }

bool jit_is_traced(const td_tensor *t) { return t && t->rt_storage && t->rt_storage->jit_trace; }

/* -- Growable arrays ---------------------------------------------------------------- */

static int grow(void **p, int32_t *cap, int32_t need, size_t esz)
{
  if (need <= *cap) return 0;
  int32_t nc = *cap ? *cap : 64;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, (size_t)nc * esz);
  if (!q) return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory growing the trace");
  memset((char *)q + (size_t)*cap * esz, 0, (size_t)(nc - *cap) * esz);
  *p = q; *cap = nc;
  return 0;
}
#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof *(arr))

int jit_trace_grow_views(JitTrace *t, int32_t need) { return GROW(t->views, t->vcap, need); }

/* -- Trace lifetime -------------------------------------------------------------------- */

JitRec *jit_rec_begin(JitRec *reuse)
{
  JitRec *r = reuse ? reuse : calloc(1, sizeof *r);
  if (!r) return rt_errp(TD_ERR_NOMEM, "tide.compile: out of memory");
  uint32_t id;
  while (!(id = __atomic_add_fetch(&trace_ids, 1, __ATOMIC_RELAXED))) {}   /* 0 means real */
  r->t.id = id;
  cur = r; jit_tracing = 1;
  return r;
}

void jit_rec_stop(JitRec *r)
{
  if (cur == r) { cur = NULL; jit_tracing = 0; }
}

int jit_rec_resume(JitRec *r)
{
  if (cur == r) return 0;
  if (jit_tracing) return rt_err(TD_ERR_STATE, "tide.compile: another compiled function is tracing on this thread");
  cur = r; jit_tracing = 1;
  return 0;
}

void jit_trace_clear(JitTrace *t)
{
  for (int i = 0; i < t->ninputs; i++) td_release(t->inputs[i]);
  free(t->ins); free(t->views); free(t->inputs); free(t->outs); free(t->effects);
  memset(t, 0, sizeof *t);
}

/* Ends r's trace: its references dropped, its arrays kept (empty) for the
** next trace. A compiled function reuses them call after call: growing fresh
** ones page-faulted on ~0.5 MB per GPT step. */
void jit_rec_reset(JitRec *r)
{
  jit_rec_stop(r);
  JitTrace *t = &r->t;
  for (int i = 0; i < t->ninputs; i++) td_release(t->inputs[i]);
  t->nins = t->nviews = t->ninputs = t->nouts = t->neffects = t->nscalars = 0;
  for (int i = 0; i < r->ngrads; i++) { td_release(r->grads[i].leaf); td_release(r->grads[i].prev); }
  r->ngrads = 0; r->backward_ran = 0; r->device = TD_CPU;
  if (r->mn) memset(r->map, 0, (size_t)r->mcap * sizeof *r->map);
  r->mn = 0;
}

void jit_rec_free(JitRec *r)
{
  if (!r) return;
  jit_rec_reset(r);
  jit_trace_clear(&r->t);
  free(r->grads); free(r->map);
  free(r);
}

/* -- Records ----------------------------------------------------------------------------- */

static JitRef rec_emit(JitTrace *t, int op, int dtype, int cdtype, int ndim, const int64_t *sizes,
                       const td_attrs *at, int nin, const JitView *args)
{
  if (GROW(t->ins, t->cap, t->nins + 1) || GROW(t->views, t->vcap, t->nviews + nin + 1)) return -1;
  JitIns *ins = &t->ins[t->nins];
  memset(ins, 0, sizeof *ins);
  ins->op = op; ins->dtype = dtype; ins->cdtype = cdtype; ins->ndim = ndim;
  ins->nin = nin; ins->arg0 = t->nviews; ins->dst = -1;
  if (ndim) memcpy(ins->sizes, sizes, ndim * sizeof *sizes);
  if (at) ins->attrs = *at; else { ins->attrs.ndims = -1; ins->attrs.dtype = -1; }
  for (int i = 0; i < nin; i++) t->views[t->nviews++] = args[i];
  return t->nins++;
}

/* The whole-root view of record r. */
static void root_view(const JitTrace *t, JitRef r, JitView *v)
{
  const JitIns *ins = &t->ins[r];
  memset(v, 0, sizeof *v);
  v->root = r; v->ndim = ins->ndim;
  memcpy(v->sizes, ins->sizes, ins->ndim * sizeof(int64_t));
  rt_tensor_contig_strides(ins->ndim, ins->sizes, v->strides);
}

/* Storage map of real tensors: open addressing on the storage pointer. */
static JitStorageRef *map_find(JitRec *r, RtStorage *s, bool add)
{
  if (add && (r->mn + 1) * 2 > r->mcap) {
    int32_t nc = r->mcap ? r->mcap * 2 : 64;
    JitStorageRef *m = calloc((size_t)nc, sizeof *m);
    if (!m) return rt_errp(TD_ERR_NOMEM, "tide.compile: out of memory");
    for (int i = 0; i < r->mcap; i++) if (r->map[i].s) {
      uint32_t h = (uint32_t)(((uintptr_t)r->map[i].s >> 6) * 2654435761u) & (uint32_t)(nc - 1);
      while (m[h].s) h = (h + 1) & (uint32_t)(nc - 1);
      m[h] = r->map[i];
    }
    free(r->map); r->map = m; r->mcap = nc;
  }
  if (!r->mcap) return NULL;
  uint32_t h = (uint32_t)(((uintptr_t)s >> 6) * 2654435761u) & (uint32_t)(r->mcap - 1);
  while (r->map[h].s && r->map[h].s != s) h = (h + 1) & (uint32_t)(r->mcap - 1);
  if (r->map[h].s) return &r->map[h];
  if (!add) return NULL;
  r->map[h].s = s; r->mn++;
  return &r->map[h];
}

/* The INPUT record standing for real tensor x's storage (made on first use). */
static JitStorageRef *rec_input(JitRec *r, td_tensor *x)
{
  JitTrace *t = &r->t;
  RtStorage *s = x->rt_storage;
  if (!s || (!s->ptr && !s->dev))
    return rt_errp(TD_ERR_STATE, "tide.compile: a tensor without data (shape %s) reached the compiled "
                   "function", RT_SHAPE(x));
  JitStorageRef *e = map_find(r, s, false);
  if (e) return e;
  /* one device per trace; CPU 0-dim tensors (numbers) join an OpenCL one, as in eager calls */
  int dev = x->device_type;
  if (dev != r->device && (dev != TD_CPU || x->ndim > 0)) {
    bool cpu_seen = false;
    for (int i = 0; i < t->ninputs && !cpu_seen; i++) cpu_seen = t->inputs[i]->device_type == TD_CPU && t->inputs[i]->ndim > 0;
    if (dev == TD_CPU || cpu_seen)
      return rt_errp(TD_ERR_DEVICE, "tide.compile: a tensor on %s (shape %s) met tensors on %s in one compiled "
                     "function; move them to one device", dev == TD_CPU ? "cpu" : "opencl", RT_SHAPE(x),
                     dev == TD_CPU ? "opencl" : "cpu");
    r->device = dev;
  }
  if (GROW(t->inputs, t->icap, t->ninputs + 1)) return NULL;
  int64_t n = (int64_t)(s->nbytes / (size_t)rt_dtype_size(x->scalar_type));
  JitRef ref = rec_emit(t, JIT_OP_INPUT, x->scalar_type, x->scalar_type, 1, &n, NULL, 0, NULL);
  if (ref < 0 || !(e = map_find(r, s, true))) return NULL;
  t->ins[ref].slot = t->ninputs;
  t->ins[ref].attrs.i[0] = x->device_type;   /* keyed: a variant runs on one device */
  td_retain(x);
  t->inputs[t->ninputs] = x;
  e->slot = t->ninputs++; e->input = ref; e->ref = ref;
  return e;
}

int jit_rec_input(JitRec *r, td_tensor *x)
{
  JitStorageRef *e = rec_input(r, x);
  return e ? e->slot : -1;
}

/* The operand view standing for tensor x. */
static int rec_operand(JitRec *r, td_tensor *x, JitView *v)
{
  JitTrace *t = &r->t;
  RtStorage *s = x->rt_storage;
  memset(v, 0, sizeof *v);
  if (x->flags & TD_TF_WRAPPED_NUMBER) {
    JitRef ref = rec_emit(t, JIT_OP_SCALAR, x->scalar_type, x->scalar_type, 0, NULL, NULL, 0, NULL);
    if (ref < 0) return TD_ERR_NOMEM;
    t->ins[ref].value = rt_load(x->ptr, x->scalar_type);
    t->ins[ref].slot = t->nscalars++;
    v->root = ref;
    return 0;
  }
  if (s && s->jit_trace) {
    if (s->jit_trace != t->id)
      return rt_err(TD_ERR_STATE, "tide.compile: a tensor of shape %s made inside an earlier call of a compiled "
                    "function (and not returned from it) was used; return it from that function", RT_SHAPE(x));
    v->root = s->jit_ref;
  } else {
    JitStorageRef *e = rec_input(r, x);
    if (!e) return TD_ERR_STATE;
    v->root = e->ref;
  }
  v->ndim = x->ndim; v->offset = x->offset;
  memcpy(v->sizes, x->sizes, x->ndim * sizeof(int64_t));
  memcpy(v->strides, x->strides, x->ndim * sizeof(int64_t));
  return 0;
}

/* A traced tensor: a contiguous header over a new traced storage for root ref. */
static td_tensor *traced_tensor(JitTrace *t, JitRef ref, int device)
{
  const JitIns *ins = &t->ins[ref];
  RtStorage *s = rt_storage_new(0);
  td_tensor *x = s ? rt_tensor_alloc() : NULL;
  if (!x) { rt_storage_release(s); return NULL; }
  s->ptr = NULL; s->jit_ref = ref; s->jit_trace = t->id;
  x->ndim = ins->ndim; x->scalar_type = ins->dtype; x->device_type = device;
  memcpy(x->sizes, ins->sizes, sizeof x->sizes);
  rt_tensor_contig_strides(ins->ndim, ins->sizes, x->strides);
  x->nelem = rt_numel(ins->ndim, ins->sizes);
  x->rt_storage = s; x->ptr = NULL;
  return x;
}

/* Zeros of a shape while tracing (the base a derivative scatters into): a
** constant SCALAR record viewed expanded to the shape (strides 0). Kernels
** read it as a constant and eager steps as a stride-0 tensor, so it needs no
** buffer, no memset per trace and no input slot. */
td_tensor *jit_record_zeros(int ndim, const int64_t *sizes, int dtype)
{
  JitRec *r = cur;
  if (!r) return rt_errp(TD_ERR_STATE, "zeros: no active trace");
  JitTrace *t = &r->t;
  JitRef ref = rec_emit(t, JIT_OP_SCALAR, dtype, dtype, 0, NULL, NULL, 0, NULL);
  if (ref < 0) return NULL;
  t->ins[ref].value = 0; t->ins[ref].slot = -1;      /* a constant, not a Lua number's slot */
  td_tensor *x = traced_tensor(t, ref, r->device);
  if (!x) return NULL;
  x->ndim = ndim;
  memcpy(x->sizes, sizes, (size_t)ndim * sizeof *sizes);
  memset(x->strides, 0, sizeof x->strides);
  x->nelem = rt_numel(ndim, sizes);
  return x;
}

/* -- Dispatcher hooks ---------------------------------------------------------------------- */

td_tensor *jit_record_call(RtCall *c)
{
  JitRec *r = cur;
  if (!r) return rt_errp(TD_ERR_STATE, "%s: no active trace", rt_op_lname(c->op));
  JitTrace *t = &r->t;
  JitView args[RT_MAX_IN];
  for (int i = 0; i < c->nin; i++)
    if (rec_operand(r, c->in[i], &args[i])) return NULL;
  JitRef ref = rec_emit(t, c->op, c->scalar_type, c->cdtype, c->ndim, c->sizes, &c->attrs, c->nin, args);
  if (ref < 0) return NULL;
  /* max/min over one dim also give the indices: an ARGMAX/ARGMIN record */
  if ((c->op == RT_OP_MAX || c->op == RT_OP_MIN) && c->attrs.ndims == 1 && !(c->attrs.flags & 1)) {
    JitRef ar = rec_emit(t, c->op == RT_OP_MAX ? RT_OP_ARGMAX : RT_OP_ARGMIN, TD_INT64, c->cdtype,
                         c->ndim, c->sizes, &c->attrs, 1, args);
    if (ar < 0 || !(c->aux = traced_tensor(t, ar, c->device))) return NULL;
  }
  if (c->op == RT_OP_CUMMAX || c->op == RT_OP_CUMMIN) {   /* and their indices: a CUMARGMAX/CUMARGMIN record */
    JitRef ar = rec_emit(t, c->op == RT_OP_CUMMAX ? RT_OP_CUMARGMAX : RT_OP_CUMARGMIN, TD_INT64, c->cdtype,
                         c->ndim, c->sizes, &c->attrs, 1, args);
    if (ar < 0 || !(c->aux = traced_tensor(t, ar, c->device))) return NULL;
  }
  return traced_tensor(t, ref, c->device);
}

int jit_record_write(RtCall *c, td_tensor *out, td_tensor *value)
{
  JitRec *r = cur;
  JitTrace *t = &r->t;
  RtStorage *s = out->rt_storage;
  JitStorageRef *e = NULL;
  JitRef old;
  if (s && s->jit_trace) {
    if (s->jit_trace != t->id)
      return rt_err(TD_ERR_STATE, "%s_: the destination was made inside an earlier call of a compiled function",
                    rt_op_lname(c->op));
    old = s->jit_ref;
  } else {
    if (!(e = rec_input(r, out))) return TD_ERR_STATE;
    old = e->ref;
  }
  JitView a[2], dst;
  root_view(t, old, &a[0]);
  if (rec_operand(r, value, &a[1])) return TD_ERR_STATE;
  memset(&dst, 0, sizeof dst);
  dst.root = old; dst.ndim = out->ndim; dst.offset = out->offset;
  memcpy(dst.sizes, out->sizes, out->ndim * sizeof(int64_t));
  memcpy(dst.strides, out->strides, out->ndim * sizeof(int64_t));
  JitIns oi = t->ins[old];             /* a copy: rec_emit may move the array */
  JitRef ref = rec_emit(t, JIT_OP_WRITE, oi.dtype, value->scalar_type, oi.ndim, oi.sizes, NULL, 2, a);
  if (ref < 0 || GROW(t->views, t->vcap, t->nviews + 1)) return TD_ERR_NOMEM;
  t->ins[ref].dst = t->nviews;
  t->views[t->nviews++] = dst;
  if (e) e->ref = ref; else s->jit_ref = ref;
  return 0;
}

void jit_record_note_grad(td_tensor *leaf, td_tensor *prev)
{
  JitRec *r = cur;
  if (!r) return;
  for (int i = 0; i < r->ngrads; i++) if (r->grads[i].leaf == leaf) return;
  if (GROW(r->grads, r->gcap, r->ngrads + 1)) return;
  td_retain(leaf); td_retain(prev);
  r->grads[r->ngrads++] = (struct JitGradNote){ leaf, prev };
}

void jit_record_note_backward(void) { if (cur) cur->backward_ran = 1; }

/* -- End of a trace --------------------------------------------------------------------------- */

int jit_rec_output(JitRec *r, td_tensor *x)
{
  JitTrace *t = &r->t;
  if (GROW(t->outs, t->ocap, t->nouts + 1)) return -1;
  if (rec_operand(r, x, &t->outs[t->nouts])) return -1;
  t->ins[t->outs[t->nouts].root].flags |= JIT_IF_OUTPUT;
  return t->nouts++;
}

int jit_rec_effects(JitRec *r)
{
  JitTrace *t = &r->t;
  for (int i = 0; i < r->mcap; i++) {
    JitStorageRef *e = &r->map[i];
    if (!e->s || e->ref == e->input) continue;
    if (GROW(t->effects, t->ecap, t->neffects + 1)) return TD_ERR_NOMEM;
    t->effects[t->neffects++] = (JitEffect){ e->slot, e->ref };
    t->ins[e->ref].flags |= JIT_IF_OUTPUT;
  }
  /* a fixed order (the map's order depends on addresses) */
  for (int i = 1; i < t->neffects; i++)
    for (int j = i; j > 0 && t->effects[j - 1].slot > t->effects[j].slot; j--) {
      JitEffect x = t->effects[j]; t->effects[j] = t->effects[j - 1]; t->effects[j - 1] = x;
    }
  return 0;
}
