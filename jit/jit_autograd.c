/*
** jit_autograd.c -- the autograd engine: recording nodes for differentiable
** calls (the dispatcher's hook), in-place history rewriting, and backward:
** a topological walk from the outputs that runs each node's derivative rule
** once all its consumers have contributed their gradient.
**
** Invariants: a node owns references to its input producers (edges), the leaf
** tensors it feeds and the values its rule reads; it never owns its output
** (the output owns the node), so graphs are freed with their last tensor.
*/
#include "jit_grad.h"
#include "jit_ir.h"
#include <stdlib.h>
#include <string.h>

static _Thread_local int grad_disabled;
static uint64_t engine_epoch;

TD_API int td_grad_enabled(void) { return !grad_disabled; }
TD_API int td_set_grad_enabled(int on) { int prev = !grad_disabled; grad_disabled = !on; return prev; }

/* -- Anomaly mode -----------------------------------------------------------------
** While on, every node keeps where its forward op was called (the host's
** `where` callback: the Lua layer answers with the user's file:line), and
** every gradient a derivative rule returns is checked for NaN and inf: the
** first one found is an error naming the rule and that place. */
static _Thread_local int anomaly_on;
static _Thread_local const char *(*anomaly_where)(void);

TD_API int td_set_anomaly(int on, const char *(*where)(void))
{
  int prev = anomaly_on;
  anomaly_on = on != 0; anomaly_where = on ? where : NULL;
  return prev;
}
TD_API int td_anomaly_enabled(void) { return anomaly_on; }

/* -- Tensor hooks ------------------------------------------------------------------ */

static td_tensor *(*hook_runner)(td_tensor *t, td_tensor *g);
TD_API void td_set_hook_runner(td_tensor *(*run)(td_tensor *t, td_tensor *g)) { hook_runner = run; }
TD_API int td_set_hooked(td_tensor *t, int on)
{
  RT_ARG(t, "register_hook", 1, TD_ERR_ARG);
  if (on) t->flags |= TD_TF_HOOKED; else t->flags &= ~TD_TF_HOOKED;
  return 0;
}

static bool hooked(const td_tensor *t) { return t && (t->flags & TD_TF_HOOKED) && hook_runner; }

/* *g <- the host's hooks of t applied to *g (the reference in *g is replaced) */
static int run_hooks(td_tensor *t, td_tensor **g)
{
  td_tensor *r = hook_runner(t, *g);
  if (!r) return rt_err(TD_ERR_GRAD, "backward: a hook of a tensor of shape %s failed", RT_SHAPE(t));
  if (r->ndim != t->ndim || memcmp(r->sizes, t->sizes, t->ndim * sizeof(int64_t))) {
    int rc = rt_err(TD_ERR_SHAPE, "backward: a hook returned a gradient of shape %s for a tensor of shape %s",
                    RT_SHAPE(r), RT_SHAPE(t));
    td_release(r);
    return rc;
  }
  td_release(*g); *g = r;
  return 0;
}

/* Hooked leaves collect their gradient over the whole pass (one call of their
** hooks with the sum, as PyTorch's AccumulateGrad sees it); the engine
** delivers them at its end. A stack per thread: a hook may run a backward. */
typedef struct { td_tensor *leaf, *g; } HookedLeaf;
typedef struct { HookedLeaf *v; int n, cap; } HookedVec;
static _Thread_local HookedVec *hooked_leaves;

static int hooked_add(td_tensor *leaf, td_tensor *g)
{
  HookedVec *h = hooked_leaves;
  for (int i = 0; i < h->n; i++)
    if (h->v[i].leaf == leaf) {
      td_tensor *s = td_add(h->v[i].g, g);
      if (!s) return TD_ERR_NOMEM;
      td_release(h->v[i].g); h->v[i].g = s;
      return 0;
    }
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 8;
    HookedLeaf *v = realloc(h->v, (size_t)cap * sizeof *v);
    if (!v) return rt_err(TD_ERR_NOMEM, "backward: out of memory");
    h->v = v; h->cap = cap;
  }
  td_retain(leaf); td_retain(g);
  h->v[h->n++] = (HookedLeaf){ leaf, g };
  return 0;
}

/* "nan", "inf" or NULL: the first non-finite value of a float tensor (any device) */
static const char *nonfinite(const td_tensor *t)
{
  if (!rt_is_float(t->scalar_type) || t->nelem == 0) return NULL;
  td_tensor *h = t->device_type == TD_CPU ? (td_retain((td_tensor *)t), (td_tensor *)t) : cl_to_cpu(t);
  td_tensor *c = h ? rt_as_contig(h) : NULL;
  td_release(h);
  if (!c || !c->ptr) { td_release(c); return NULL; }
  const char *bad = NULL;
  for (int64_t i = 0; i < c->nelem && !bad; i++) {
    double v = c->scalar_type == TD_FLOAT32 ? ((const float *)c->ptr)[i] : ((const double *)c->ptr)[i];
    if (v != v) bad = "nan"; else if (v - v != 0) bad = "inf";
  }
  td_release(c);
  return bad;
}

/* -- Nodes ------------------------------------------------------------------------ */

static void node_free_saved(JitNode *n)
{
  for (int i = 0; i < n->nin; i++) { td_release(n->edge[i].saved); n->edge[i].saved = NULL; }
  td_release(n->saved_out); n->saved_out = NULL;
  td_release(n->aux); n->aux = NULL;
  if (n->ext_free) { n->ext_free(n->ext); n->ext = NULL; n->ext_free = NULL; }
}

/* Iterative, so that releasing a long chain does not recurse deeply. */
void jit_node_release(JitNode *n)
{
  JitNode *stack = NULL;   /* dead nodes, linked through gacc (free scratch once dead) */
  if (__atomic_sub_fetch(&n->refcount, 1, __ATOMIC_ACQ_REL)) return;
  n->gacc = NULL; stack = n;
  while (stack) {
    JitNode *x = stack; stack = (JitNode *)x->gacc;
    node_free_saved(x);
    free(x->where);
    for (int i = 0; i < x->nin; i++) {
      td_release(x->edge[i].leaf);
      JitNode *p = x->edge[i].node;
      if (p && !__atomic_sub_fetch(&p->refcount, 1, __ATOMIC_ACQ_REL)) { p->gacc = (td_tensor *)stack; stack = p; }
    }
    free(x);
  }
}

static td_tensor *node_out_alias(td_tensor *out)
{
  td_tensor *a = rt_tensor_alias(out, out->ndim, out->sizes, out->strides, out->offset);
  if (a) a->scalar_type = out->scalar_type;
  return a;
}

bool jit_grad_wants(const RtCall *c)
{
  if (grad_disabled || (rt_ops[c->op].flags & RT_F_NODIFF) || !rt_is_float(c->scalar_type)) return false;
  for (int i = 0; i < c->nin; i++)
    if (c->in[i]->flags & TD_TF_REQUIRES_GRAD) return true;
  return false;
}

static JitNode *node_new(RtCall *c, td_tensor *const *in, td_tensor *out)
{
  const JitGradRule *rule = rt_ops[c->op].grad;
  if (!rule->fn)
    return rt_errp(TD_ERR_GRAD, "%s: this op has no derivative", rt_op_lname(c->op));
  JitNode *n = calloc(1, sizeof *n + c->nin * sizeof(JitEdge));
  if (!n) return rt_errp(TD_ERR_NOMEM, "autograd: out of memory recording %s", rt_op_lname(c->op));
  n->refcount = 1; n->op = c->op; n->nin = c->nin; n->attrs = c->attrs; n->rule = rule;
  if (anomaly_on && anomaly_where) { const char *w = anomaly_where(); if (w) n->where = strdup(w); }
  if (jit_tracing) n->trace = jit_trace_active()->id;
  for (int i = 0; i < c->nin; i++) {
    td_tensor *x = in[i];
    JitEdge *e = &n->edge[i];
    e->ndim = x->ndim; e->scalar_type = x->scalar_type; memcpy(e->sizes, x->sizes, sizeof e->sizes);
    if (x->flags & TD_TF_REQUIRES_GRAD) {
      if (x->rt_grad_fn) { e->node = x->rt_grad_fn; __atomic_add_fetch(&e->node->refcount, 1, __ATOMIC_RELAXED); }
      else { e->leaf = x; td_retain(x); }
    }
    if (rule->save & (1u << i)) {
      e->saved = x; td_retain(x);
      e->version = x->rt_storage ? x->rt_storage->version : 0;
    }
  }
  if (rule->save & JIT_SAVE_OUT) {
    if (!(n->saved_out = node_out_alias(out))) { jit_node_release(n); return NULL; }
    n->out_version = out->rt_storage ? out->rt_storage->version : 0;
  }
  if ((rule->save & JIT_SAVE_AUX) && c->aux) { n->aux = c->aux; td_retain(c->aux); }
  n->out_ndim = out->ndim; n->out_dtype = out->scalar_type; memcpy(n->out_size, out->sizes, sizeof n->out_size);
  return n;
}

int jit_grad_record(RtCall *c, td_tensor *out)
{
  JitNode *n = node_new(c, c->in, out);
  if (!n) return TD_ERR_GRAD;
  out->rt_grad_fn = n; n->owner = out;
  out->flags |= TD_TF_REQUIRES_GRAD;
  return 0;
}

td_tensor *jit_grad_inplace_begin(const RtCall *c, td_tensor *self)
{
  /* the rule reads self (sin_, mul_): keep its value from before the write */
  bool keep = false;
  for (int i = 0; i < c->nin; i++)
    if (c->in[i] == self && (rt_ops[c->op].grad->save & (1u << i))) keep = true;
  td_tensor *old;
  if (keep) {
    old = rt_tensor_new_on(self->device_type, self->ndim, self->sizes, self->scalar_type);
    RtCall cc = { .op = RT_OP_COPY, .nin = 1, .in = &self, .cdtype = self->scalar_type,
                  .scalar_type = self->scalar_type, .ndim = self->ndim, .device = self->device_type };
    memcpy(cc.sizes, self->sizes, sizeof cc.sizes);
    if (old && rt_kern_of(RT_OP_COPY, self->device_type)(&cc, old)) { td_release(old); old = NULL; }
  } else old = node_out_alias(self);
  if (!old) return NULL;
  old->flags = self->flags & TD_TF_REQUIRES_GRAD;
  old->rt_grad_fn = self->rt_grad_fn;            /* old takes over self's history */
  if (old->rt_grad_fn && old->rt_grad_fn->owner == self) old->rt_grad_fn->owner = old;
  self->rt_grad_fn = NULL;
  return old;
}

int jit_grad_record_inplace(RtCall *c, td_tensor *self, td_tensor *old)
{
  td_tensor *in[RT_MAX_IN];
  for (int i = 0; i < c->nin; i++) in[i] = c->in[i] == self ? old : c->in[i];
  /* the version was bumped by the write; saved inputs aliasing self are stale by design */
  JitNode *n = node_new(c, in, self);
  if (!n) {                                 /* restore the old history */
    self->rt_grad_fn = old->rt_grad_fn; old->rt_grad_fn = NULL;
    if (self->rt_grad_fn && self->rt_grad_fn->owner == old) self->rt_grad_fn->owner = self;
    return TD_ERR_GRAD;
  }
  /* The write bumped the storage version once; inputs that alias self were
  ** saved after it, so their saved version must be the one before the write:
  ** a rule that reads self's old value then fails the version check. */
  for (int i = 0; i < n->nin; i++)
    if (n->edge[i].saved && n->edge[i].saved->rt_storage == self->rt_storage) n->edge[i].version--;
  self->rt_grad_fn = n; n->owner = self;
  self->flags |= TD_TF_REQUIRES_GRAD;
  return 0;
}

/* -- In-place writes into views ------------------------------------------------------- */

/* A write into a view changes its base too. After the view's own node is
** recorded, the (contiguous) base takes the history
**   base_new = view(scatter_add(flat(base_old) * keep, pos, flat(view)), base's shape)
** where pos are the view's element positions in the base and keep is 0 there,
** 1 elsewhere: gradients reach the written value through the view's elements
** and the base's old history through the others. The calls are recorded
** without running kernels (the data is already in place). Other views of
** the same base taken before the write keep their old history. */
int jit_grad_rebase_view(td_tensor *view, td_tensor *base)
{
  int64_t n = view->nelem, N = base->nelem;
  td_tensor *pos = rt_tensor_new(1, &n, TD_INT64);
  td_tensor *keep = td_full(1, &N, 1.0, base->scalar_type);
  td_tensor *old = node_out_alias(base), *oldf = NULL, *z = NULL, *vf = NULL, *s = NULL, *bn = NULL;
  int rc = TD_ERR_NOMEM;
  if (!pos || !keep || !old) goto done;
  /* positions: walk the view's elements in row-major order */
  int64_t idx[TD_MAX_DIMS] = { 0 }, *p = (int64_t *)rt_ptr(pos);
  int esz = rt_dtype_size(keep->scalar_type);
  for (int64_t j = 0; j < n; j++) {
    int64_t off = view->offset - base->offset;
    for (int d = 0; d < view->ndim; d++) off += idx[d] * view->strides[d];
    p[j] = off;
    rt_store(rt_ptr(keep) + off * esz, keep->scalar_type, 0);
    for (int d = view->ndim - 1; d >= 0 && ++idx[d] == view->sizes[d]; d--) idx[d] = 0;
  }
  if (base->device_type != TD_CPU && rt_has_data(base)) {     /* made here, used there */
    td_tensor *dp = td_to_device(pos, base->device_type, -1), *dk = dp ? td_to_device(keep, base->device_type, -1) : NULL;
    td_release(pos); td_release(keep); pos = dp; keep = dk;
    if (!pos || !keep) goto done;
  }
  /* old takes over the base's history, as for any in-place write */
  old->flags = base->flags & TD_TF_REQUIRES_GRAD;
  old->rt_grad_fn = base->rt_grad_fn;
  if (old->rt_grad_fn && old->rt_grad_fn->owner == base) old->rt_grad_fn->owner = old;
  base->rt_grad_fn = NULL;
  td_attrs at = { .ndims = -1, .dtype = -1 };          /* i[0] = 0: scatter along the flat dim */
  td_tensor *zin[2], *sin[3];
  if (!(oldf = td_reshape(old, 1, &N))) goto restore;
  zin[0] = oldf; zin[1] = keep;
  if (!(z = rt_call_record(RT_OP_MUL, 2, zin, NULL))) goto restore;
  if (!(vf = td_reshape(view, 1, &n))) goto restore;
  sin[0] = z; sin[1] = pos; sin[2] = vf;
  if (!(s = rt_call_record(RT_OP_SCATTER_ADD, 3, sin, &at))) goto restore;
  if (!(bn = td_view(s, base->ndim, base->sizes))) goto restore;
  base->rt_grad_fn = bn->rt_grad_fn;                   /* base adopts the new history */
  __atomic_add_fetch(&base->rt_grad_fn->refcount, 1, __ATOMIC_RELAXED);
  base->rt_grad_fn->owner = base;
  base->flags |= TD_TF_REQUIRES_GRAD;
  rc = 0;
  goto done;
restore:
  rc = TD_ERR_GRAD;
  base->rt_grad_fn = old->rt_grad_fn; old->rt_grad_fn = NULL;
  if (base->rt_grad_fn && base->rt_grad_fn->owner == old) base->rt_grad_fn->owner = base;
done:
  td_release(bn); td_release(s); td_release(vf); td_release(z); td_release(oldf);
  td_release(old); td_release(keep); td_release(pos);
  return rc;
}

/* -- Saved values ------------------------------------------------------------------------ */

static const char *released_msg =
  "%s: trying to backward through the graph a second time (or to read saved values after "
  "they were freed); pass retain_graph=true to the first backward";

td_tensor *jit_tmp(JitCtx *k, td_tensor *t)
{
  if (t) {
    if (k->ntmp == (int)(sizeof k->tmp / sizeof k->tmp[0])) { td_release(t); return rt_errp(TD_ERR_STATE, "autograd: too many temporaries"); }
    k->tmp[k->ntmp++] = t;
  }
  return t;
}

td_tensor *jit_saved_in(JitCtx *k, int i)
{
  JitNode *n = k->n;
  JitEdge *e = &n->edge[i];
  if (n->released) return rt_errp(TD_ERR_GRAD, released_msg, n->rule->name);
  if (!e->saved) return rt_errp(TD_ERR_STATE, "%s: input %d was not saved", n->rule->name, i + 1);
  if (e->saved->rt_storage && e->saved->rt_storage->version != e->version)
    return rt_errp(TD_ERR_GRAD, "%s: one of the variables needed for gradient computation has been modified "
                   "by an in-place operation (input %d of %s, version %llu, expected %llu)",
                   n->rule->name, i + 1, rt_ops[n->op].grad == n->rule ? rt_op_lname(n->op) : n->rule->name,
                   (unsigned long long)e->saved->rt_storage->version, (unsigned long long)e->version);
  return e->saved;
}

/* The output, with this node as its history when higher-order grads are recorded. */
td_tensor *jit_saved_out(JitCtx *k)
{
  JitNode *n = k->n;
  if (n->released) return rt_errp(TD_ERR_GRAD, released_msg, n->rule->name);
  if (!n->saved_out) return rt_errp(TD_ERR_STATE, "%s: output was not saved", n->rule->name);
  if (n->saved_out->rt_storage && n->saved_out->rt_storage->version != n->out_version)
    return rt_errp(TD_ERR_GRAD, "%s: one of the variables needed for gradient computation has been modified "
                   "by an in-place operation (the output of %s)", n->rule->name, rt_op_lname(n->op));
  if (!td_grad_enabled()) return n->saved_out;
  td_tensor *o = jit_tmp(k, node_out_alias(n->saved_out));
  if (o) {
    o->rt_grad_fn = n; __atomic_add_fetch(&n->refcount, 1, __ATOMIC_RELAXED);
    o->flags |= TD_TF_REQUIRES_GRAD;
  }
  return o;
}

/* -- Autograd API on tensors --------------------------------------------------------------- */

TD_API int td_set_requires_grad(td_tensor *t, int on)
{
  RT_ARG(t, "requires_grad_", 1, TD_ERR_ARG);
  if (!on) {
    if (t->rt_grad_fn)
      return rt_err(TD_ERR_GRAD, "requires_grad_: you can only change requires_grad of leaf tensors "
                    "(use detach() to get a tensor without history)");
    t->flags &= ~TD_TF_REQUIRES_GRAD;
    return 0;
  }
  if (!rt_is_float(t->scalar_type))
    return rt_err(TD_ERR_DTYPE, "requires_grad_: only floating point tensors can require gradients, got %s",
                  td_dtype_name(t->scalar_type));
  t->flags |= TD_TF_REQUIRES_GRAD;
  return 0;
}

/* The getters have no error channel: a dead handle reads as a plain leaf without grad. */
TD_API int td_requires_grad(const td_tensor *t) { return t && (t->flags & TD_TF_REQUIRES_GRAD) != 0; }
TD_API int td_is_leaf(const td_tensor *t) { return !t || t->rt_grad_fn == NULL; }
TD_API td_tensor *td_grad(td_tensor *t) { if (!t) return NULL; if (t->rt_grad) td_retain(t->rt_grad); return t->rt_grad; }
TD_API int td_retain_grad(td_tensor *t)
{
  RT_ARG(t, "retain_grad", 1, TD_ERR_ARG);
  if (!(t->flags & TD_TF_REQUIRES_GRAD))
    return rt_err(TD_ERR_GRAD, "retain_grad: can't retain_grad on a tensor that does not require grad");
  if (t->rt_grad_fn) t->flags |= TD_TF_RETAIN_GRAD;
  return 0;
}

TD_API int td_set_grad(td_tensor *t, td_tensor *g)
{
  RT_ARG(t, "grad", 1, TD_ERR_ARG);
  if (g && (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, t->ndim * sizeof(int64_t))))
    return rt_err(TD_ERR_SHAPE, "grad: assigned grad has shape %s but the tensor has shape %s",
                  RT_SHAPE(g), RT_SHAPE(t));
  if (g) td_retain(g);
  if (jit_tracing) jit_record_note_grad(t, t->rt_grad);
  td_release(t->rt_grad);
  t->rt_grad = g;
  return 0;
}

TD_API td_tensor *td_detach(td_tensor *t)
{
  RT_ARG(t, "detach", 1, NULL);
  td_tensor *d = rt_tensor_alias(t, t->ndim, t->sizes, t->strides, t->offset);
  if (d) d->scalar_type = t->scalar_type;
  return d;
}

TD_API const char *td_grad_fn_name(const td_tensor *t) { return t && t->rt_grad_fn ? t->rt_grad_fn->rule->name : NULL; }
TD_API uint64_t td_version(const td_tensor *t) { return t && t->rt_storage ? t->rt_storage->version : 0; }

/* -- Backward ------------------------------------------------------------------------------ */

typedef struct { JitNode **v; int n, cap; } NodeVec;

static int vec_push(NodeVec *s, JitNode *x)
{
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    JitNode **v = realloc(s->v, cap * sizeof *v);
    if (!v) return rt_err(TD_ERR_NOMEM, "backward: out of memory");
    s->v = v; s->cap = cap;
  }
  s->v[s->n++] = x;
  return 0;
}

/* acc += g (a new tensor; neither argument is consumed) */
static td_tensor *grad_sum(td_tensor *acc, td_tensor *g)
{
  if (!acc) { td_retain(g); return g; }
  return td_add(acc, g);
}

/* Shape a rule's result to its input: reduce broadcast dims, restore dtype. */
static td_tensor *fit_grad(td_tensor *g, const JitEdge *e, const char *rule)
{
  td_tensor *r = td_sum_to(g, e->ndim, e->sizes);
  if (!r) return rt_errp(TD_ERR_SHAPE, "%s: gradient of shape %s does not fit input of shape %s", rule,
                         RT_SHAPE(g), rt_shape_str((char[160]){0}, 160, e->ndim, e->sizes));
  if (r->scalar_type != e->scalar_type && rt_is_float(e->scalar_type)) { td_tensor *c = td_cast(r, e->scalar_type); td_release(r); r = c; }
  return r;
}

/* -- Device moves ---------------------------------------------------------------------------
** td_to_device is not an op of the table (its result lives elsewhere than its
** input): its node has a custom rule that moves the gradient back, itself
** through td_to_device, so create_graph keeps a history for it too. */

static int to_device_rule(JitCtx *k)
{
  td_tensor *g = td_to_device(k->g, (int)k->n->attrs.i[0], -1);
  if (!g) return TD_ERR_DEVICE;
  k->gin[0] = g;
  return 0;
}

static const JitGradRule to_device_grad = { "to_copy_backward", to_device_rule, 0 };

int jit_grad_record_to(td_tensor *x, td_tensor *y)
{
  JitNode *n = jit_node_custom(&to_device_grad, 1);
  if (!n) return TD_ERR_NOMEM;
  n->attrs.i[0] = x->device_type;
  JitEdge *e = &n->edge[0];
  e->ndim = x->ndim; e->scalar_type = x->scalar_type; memcpy(e->sizes, x->sizes, sizeof e->sizes);
  if (x->rt_grad_fn) { e->node = x->rt_grad_fn; __atomic_add_fetch(&e->node->refcount, 1, __ATOMIC_RELAXED); }
  else { e->leaf = x; td_retain(x); }
  n->out_ndim = y->ndim; n->out_dtype = y->scalar_type; memcpy(n->out_size, y->sizes, sizeof n->out_size);
  y->rt_grad_fn = n; n->owner = y;
  y->flags |= TD_TF_REQUIRES_GRAD;
  return 0;
}

typedef struct {
  int nin; td_tensor *const *inputs; td_tensor **results;   /* capture mode (autograd.grad) */
  int stop;                                                 /* captured nodes never run */
} Capture;

JitNode *jit_node_custom(const JitGradRule *rule, int nin)
{
  JitNode *n = calloc(1, sizeof *n + (size_t)nin * sizeof(JitEdge));
  if (!n) return rt_errp(TD_ERR_NOMEM, "autograd: out of memory");
  n->refcount = 1; n->nin = nin; n->rule = rule;
  n->attrs.ndims = -1; n->attrs.dtype = -1;
  if (anomaly_on && anomaly_where) { const char *w = anomaly_where(); if (w) n->where = strdup(w); }
  return n;
}

static int capture_index(const Capture *cap, const td_tensor *leaf, const JitNode *node)
{
  for (int j = 0; j < cap->nin; j++) {
    const td_tensor *x = cap->inputs[j];
    if ((leaf && x == leaf) || (node && x->rt_grad_fn == node)) return j;
  }
  return -1;
}

static int deliver_leaf(td_tensor *leaf, td_tensor *g, const Capture *cap, int create_graph)
{
  if (hooked_leaves && hooked(leaf)) return hooked_add(leaf, g);
  if (cap) {
    int j = capture_index(cap, leaf, NULL);
    if (j >= 0) {
      td_tensor *s = grad_sum(cap->results[j], g);
      if (!s) return TD_ERR_NOMEM;
      td_release(cap->results[j]); cap->results[j] = s;
    }
    return 0;
  }
  td_tensor *gd = create_graph ? (td_retain(g), g) : td_detach(g);
  if (!gd) return TD_ERR_NOMEM;
  if (leaf->rt_grad) {
    td_tensor *s = td_add(leaf->rt_grad, gd);
    td_release(gd);
    if (!s) return TD_ERR_NOMEM;
    gd = s;
  } else if (!create_graph && g->rt_storage && (g->rt_storage->refcount > 2 || jit_tracing)) {
    /* .grad must own its memory: the incoming buffer is shared (e.g. add passes
    ** one gradient to both inputs), and an in-place update of one .grad
    ** (clipping, zeroing) must not change the other. While traced, always:
    ** a refcount depends on when Lua collects, and the trace must not. */
    td_tensor *c = td_contiguous(gd);
    if (c == gd) { td_release(c); c = td_op(RT_OP_COPY, 1, &gd, NULL); }
    td_release(gd);
    if (!c) return TD_ERR_NOMEM;
    gd = c;
  }
  if (jit_tracing) jit_record_note_grad(leaf, leaf->rt_grad);
  td_release(leaf->rt_grad);
  leaf->rt_grad = gd;
  return 0;
}

/* -- Gradients of slices ---------------------------------------------------------------------
** A tensor read through many slices (x[t] at every step of a recurrence, the
** chunks of a fused projection) would get from each slice's rule a zero tensor
** of its whole shape with the slice's gradient scattered in, summed into its
** gradient: O(n^2) work for n slices. Instead, a slice or select node (step 1)
** whose input has a node hands its gradient to that node as a piece (dim and
** range); when the node runs, its pieces are joined: the pieces along one dim
** that do not overlap become one cat along it (zeros fill the gaps, equal
** ranges are summed first), overlapping ones fall back to the rule's zeros +
** slice_scatter. Each step is an op of the table, so create_graph and tracing
** record it like any rule's ops. */
typedef struct JitPiece { td_tensor *g, *a; int64_t dim, start, len; } JitPiece;   /* a: a product's (below) */

static bool piece_node(const JitNode *n, const td_tensor *g)
{
  if (!g || !n->edge[0].node || n->nin != 1 || n->rule != rt_ops[n->op].grad) return false;
  if (n->op == RT_OP_SELECT) return true;
  return n->op == RT_OP_SLICE && n->attrs.i[3] == 1;
}

/* append piece q (its references taken) to p; p may become ready */
static int piece_push(JitNode *p, JitPiece q, NodeVec *ready)
{
  if (p->npieces == p->cappieces) {
    int cap = p->cappieces ? 2 * p->cappieces : 8;
    JitPiece *np = realloc(p->pieces, (size_t)cap * sizeof *np);
    if (!np) { td_release(q.g); td_release(q.a); return rt_err(TD_ERR_NOMEM, "backward: out of memory"); }
    p->pieces = np; p->cappieces = cap;
  }
  p->pieces[p->npieces++] = q;
  return --p->deps == 0 ? vec_push(ready, p) : 0;
}

/* n's gradient g (retained) as a piece of its input's node; that node may become ready */
static int piece_give(JitNode *n, td_tensor *g, NodeVec *ready)
{
  JitEdge *e = &n->edge[0];
  JitNode *p = e->node;
  int64_t dim = n->attrs.i[0], start = n->attrs.i[1];
  int64_t len = n->op == RT_OP_SELECT ? 1 : n->attrs.i[2] - start;
  td_tensor *v;
  if (n->op == RT_OP_SELECT) {                 /* select dropped the dim: view it back as size 1 */
    int64_t s[TD_MAX_DIMS];
    memcpy(s, e->sizes, sizeof s);
    s[dim] = 1;
    v = td_reshape(g, e->ndim, s);
  } else { td_retain(g); v = g; }
  if (!v) return TD_ERR_NOMEM;
  return piece_push(p, (JitPiece){ v, NULL, dim, start, len }, ready);
}

/* -- Gradients of a matrix used by many products ----------------------------------------------
** A weight multiplied at every step of a recurrence (h_t W^T) would get from
** each product's rule its own gradient A_t^T G_t, added up one by one: T small
** matmuls (their inner size is the batch: slow) and T full adds. Instead a 2-D
** matmul node whose right operand comes from a node hands (A, G) to that node
** as a product piece, and the node sums its products as one matmul over all
** their rows: [A_1; ...; A_T]^T [G_1; ...; G_T] (a cat of each side). The left
** operand's gradient is the rule's, as before. A right operand that is a
** transposed view (x W^T) gets (G^T A)^T, landing in W's layout, as the rule.
** Product pieces have dim -1, their arrival order as start and 1 as len when
** transposed: they sort apart from the slices' pieces, in order. */

static bool is_mT(const td_tensor *x)
{
  int n = x->ndim;
  return n >= 2 && x->sizes[n - 1] > 1 && x->sizes[n - 2] > 1 && x->strides[n - 2] == 1 &&
         x->strides[n - 1] == x->sizes[n - 2];
}

static bool product_node(const JitNode *n, const td_tensor *g)
{
  return g && !anomaly_on && n->op == RT_OP_MATMUL && n->rule == rt_ops[RT_OP_MATMUL].grad && n->nin == 2 &&
         n->edge[1].node && n->edge[0].ndim == 2 && n->edge[1].ndim == 2 && g->ndim == 2 &&
         n->edge[0].scalar_type == g->scalar_type && n->edge[1].scalar_type == g->scalar_type;
}

/* the rule for the left operand only, the right one's gradient as a product piece */
static int product_give(JitCtx *k, NodeVec *ready)
{
  JitNode *n = k->n, *p = n->edge[1].node;
  td_tensor *a = jit_saved_in(k, 0), *b = jit_saved_in(k, 1);
  if (!a || !b) return TD_ERR_GRAD;
  bool bt = is_mT(b);
  n->edge[1].node = NULL;                      /* the rule sees no right operand to differentiate */
  int rc = n->rule->fn(k);
  n->edge[1].node = p;
  if (rc) return rc;
  td_retain(a); td_retain(k->g);
  return piece_push(p, (JitPiece){ k->g, a, -1, p->npieces, bt }, ready);   /* start: arrival order */
}

static td_tensor *sum_consume(td_tensor *acc, td_tensor *t);

/* sum over the product pieces p[0..m) of A^T G, as one matmul */
static td_tensor *products_join(JitPiece *p, int m)
{
  td_tensor *ga[RT_MAX_IN], *gg[RT_MAX_IN], *a = NULL, *g = NULL, *acc = NULL;
  for (int i = 0; i < m;) {                    /* rounds of RT_MAX_IN products */
    int c = m - i < RT_MAX_IN ? m - i : RT_MAX_IN;
    for (int j = 0; j < c; j++) { ga[j] = p[i + j].a; gg[j] = p[i + j].g; }
    td_attrs at = { .ndims = -1, .dtype = -1, .i = { 0 } };
    if (c == 1) { a = ga[0]; g = gg[0]; td_retain(a); td_retain(g); }
    else { a = td_op(RT_OP_CAT, c, ga, &at); g = a ? td_op(RT_OP_CAT, c, gg, &at) : NULL; }
    td_tensor *r = NULL;
    int64_t tp[2] = { 1, 0 };
    if (a && g) {
      if (p[i].len) {                          /* (G^T A)^T: W's layout for x W^T */
        td_tensor *gt = td_permute(g, 2, tp), *r0 = gt ? td_matmul(gt, a) : NULL;
        r = r0 ? td_permute(r0, 2, tp) : NULL;
        td_release(gt); td_release(r0);
      } else {
        td_tensor *at_ = td_permute(a, 2, tp);
        r = at_ ? td_matmul(at_, g) : NULL;
        td_release(at_);
      }
    }
    td_release(a); td_release(g);
    if (!r) { td_release(acc); return NULL; }
    acc = sum_consume(acc, r);
    if (!acc) return NULL;
    i += c;
  }
  return acc;
}

static void pieces_free(JitNode *x)
{
  for (int i = 0; i < x->npieces; i++) { td_release(x->pieces[i].g); td_release(x->pieces[i].a); }
  free(x->pieces);
  x->pieces = NULL; x->npieces = x->cappieces = 0;
}

static int piece_cmp(const void *pa, const void *pb)
{
  const JitPiece *a = pa, *b = pb;
  if (a->dim != b->dim) return a->dim < b->dim ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return a->len < b->len ? -1 : a->len > b->len;
}

/* zeros of x's output shape with dim d of size len, on g's device (a trace constant while traced) */
static td_tensor *piece_zeros(const JitNode *x, const td_tensor *g, int64_t d, int64_t len)
{
  int64_t s[TD_MAX_DIMS];
  memcpy(s, x->out_size, sizeof s);
  if (d >= 0) s[d] = len;
  if (jit_tracing) return jit_record_zeros(x->out_ndim, s, x->out_dtype);
  return rt_full_on(rt_has_data(g) ? g->device_type : TD_CPU, x->out_ndim, s, 0, x->out_dtype);
}

/* acc + t (both consumed; acc may be NULL) */
static td_tensor *sum_consume(td_tensor *acc, td_tensor *t)
{
  if (!acc || !t) { td_release(acc); return t; }
  td_tensor *s = td_add(acc, t);
  td_release(acc); td_release(t);
  return s;
}

/* cat of list[0..n) along d (each consumed), in rounds of at most RT_MAX_IN */
static td_tensor *cat_consume(td_tensor **list, int n, int64_t d)
{
  td_attrs at = { .ndims = -1, .dtype = -1, .i = { d } };
  while (n > 1) {
    int m = 0;
    for (int i = 0; i < n; i += RT_MAX_IN) {
      int c = n - i < RT_MAX_IN ? n - i : RT_MAX_IN;
      td_tensor *r = c == 1 ? list[i] : td_op(RT_OP_CAT, c, list + i, &at);
      if (c > 1) for (int j = 0; j < c; j++) td_release(list[i + j]);
      list[m++] = r;
    }
    for (int i = 0; i < m; i++) if (!list[i]) { for (int j = 0; j < m; j++) td_release(list[j]); return NULL; }
    n = m;
  }
  return list[0];
}

/* The pieces p[0..m) along one dim (sorted), as a gradient of x's whole shape */
static td_tensor *pieces_dim(const JitNode *x, JitPiece *p, int m)
{
  int64_t d = p[0].dim, size = x->out_size[d], end = 0;
  bool overlap = false;
  for (int i = 0; i < m && !overlap; i++) {
    if (i > 0 && p[i].start == p[i - 1].start && p[i].len == p[i - 1].len) continue;
    overlap = p[i].start < end;
    end = p[i].start + p[i].len;
  }
  if (overlap) {                                /* the slice rule's formula, piece by piece */
    td_tensor *acc = NULL;
    for (int i = 0; i < m; i++) {
      td_attrs at = { .ndims = -1, .dtype = -1, .i = { d, p[i].start, p[i].start + p[i].len, 1 } };
      td_tensor *z = piece_zeros(x, p[i].g, -1, 0);
      td_tensor *in[2] = { z, p[i].g };
      td_tensor *s = z ? td_op(RT_OP_SLICE_SCATTER, 2, in, &at) : NULL;
      td_release(z);
      if (!s) { td_release(acc); return NULL; }
      acc = sum_consume(acc, s);
      if (!acc) return NULL;
    }
    return acc;
  }
  td_tensor **list = calloc((size_t)(2 * m + 1), sizeof *list);
  if (!list) return rt_errp(TD_ERR_NOMEM, "backward: out of memory");
  int n = 0;
  int64_t cur = 0;
  bool ok = true;
  for (int i = 0; i < m && ok; i++) {
    if (i > 0 && p[i].start == p[i - 1].start && p[i].len == p[i - 1].len) {   /* the same slice read twice */
      td_retain(p[i].g);
      ok = (list[n - 1] = sum_consume(list[n - 1], p[i].g)) != NULL;
      continue;
    }
    if (p[i].start > cur) ok = (list[n++] = piece_zeros(x, p[i].g, d, p[i].start - cur)) != NULL;
    td_retain(p[i].g);
    list[n++] = p[i].g;
    cur = p[i].start + p[i].len;
  }
  if (ok && cur < size) ok = (list[n++] = piece_zeros(x, p[0].g, d, size - cur)) != NULL;
  if (!ok) { for (int i = 0; i < n; i++) td_release(list[i]); free(list); return NULL; }
  td_tensor *r = cat_consume(list, n, d);
  free(list);
  return r;
}

/* x->gacc += the join of x's pieces (then freed) */
static int pieces_join(JitNode *x)
{
  qsort(x->pieces, (size_t)x->npieces, sizeof *x->pieces, piece_cmp);
  td_tensor *acc = x->gacc;
  x->gacc = NULL;
  for (int i = 0; i < x->npieces;) {
    int j = i;
    while (j < x->npieces && x->pieces[j].dim == x->pieces[i].dim &&
           (x->pieces[i].dim >= 0 || x->pieces[j].len == x->pieces[i].len)) j++;
    td_tensor *full = x->pieces[i].dim < 0 ? products_join(x->pieces + i, j - i) : pieces_dim(x, x->pieces + i, j - i);
    if (!full) { td_release(acc); pieces_free(x); return TD_ERR_NOMEM; }
    acc = sum_consume(acc, full);
    if (!acc) { pieces_free(x); return TD_ERR_NOMEM; }
    i = j;
  }
  pieces_free(x);
  x->gacc = acc;
  return 0;
}

static int run_node(JitNode *n, const Capture *cap, int retain_graph, int create_graph, NodeVec *ready)
{
  JitCtx k;
  memset(&k, 0, sizeof k);
  k.n = n; k.g = n->gacc;
  int rc = 0;
  int pe = rt_prof_on ? rt_prof_begin(TD_PROF_BACKWARD, n->rule->name, 1, &k.g) : -1;
  /* a second backward is an error only where a rule reads freed saved values */
  if (n->owner && (n->owner->flags & TD_TF_RETAIN_GRAD) && !cap)
    rc = deliver_leaf(n->owner, k.g, NULL, create_graph);
  if (!rc && piece_node(n, k.g)) {
    rc = piece_give(n, k.g, ready);
    if (!retain_graph) { node_free_saved(n); n->released = 1; }
    rt_prof_end(pe);
    return rc;
  }
  if (!rc && product_node(n, k.g)) {
    rc = product_give(&k, ready);
    goto deliver;
  }
  if (!rc) rc = n->rule->fn(&k);
  for (int i = 0; anomaly_on && !rc && i < n->nin; i++) {
    const char *bad = k.gin[i] ? nonfinite(k.gin[i]) : NULL;
    /* an op's node, or a custom one (a device move, a compiled function's backward) */
    const char *op = rt_ops[n->op].grad == n->rule ? rt_op_lname(n->op) : n->rule->name;
    if (bad)
      rc = rt_err(TD_ERR_GRAD, "backward: %s returned %s values in the gradient of argument %d of %s; the forward "
                  "%s was called at %s", n->rule->name, bad, i + 1, op, op,
                  n->where ? n->where : "an unknown place (recorded outside anomaly mode)");
  }
deliver:
  for (int i = 0; !rc && i < n->nin; i++) {
    JitEdge *e = &n->edge[i];
    if (!k.gin[i] || (!e->node && !e->leaf)) continue;
    td_tensor *g = fit_grad(k.gin[i], e, n->rule->name);
    if (!g) { rc = TD_ERR_SHAPE; break; }
    if (e->leaf) rc = deliver_leaf(e->leaf, g, cap, create_graph);
    else {
      JitNode *p = e->node;
      td_tensor *s = grad_sum(p->gacc, g);
      if (!s) rc = TD_ERR_NOMEM;
      else { td_release(p->gacc); p->gacc = s; if (--p->deps == 0) rc = vec_push(ready, p); }
    }
    td_release(g);
  }
  for (int i = 0; i < n->nin; i++) td_release(k.gin[i]);
  for (int i = 0; i < k.ntmp; i++) td_release(k.tmp[i]);
  if (!retain_graph) { node_free_saved(n); n->released = 1; }
  rt_prof_end(pe);
  return rc;
}

/* autograd.grad runs only the nodes that lead to a requested input: a node is
** captured when its output is an input, and run when an input is reachable
** through its edges. The producers of a node that is not run cannot reach an
** input either, and may belong to a graph already freed by an earlier backward. */
enum { JIT_NEED_UNSEEN = -1, JIT_NEED_OPEN = -2, JIT_NEED_CAPTURE = 1, JIT_NEED_RUN = 2 };

static int mark_needed(const NodeVec *all, const Capture *cap)
{
  NodeVec st = { 0 };
  int rc = 0;
  for (int r = 0; r < all->n; r++) all->v[r]->needed = JIT_NEED_UNSEEN;
  for (int r = 0; r < all->n && !rc; r++) {
    if (all->v[r]->needed != JIT_NEED_UNSEEN) continue;
    rc = vec_push(&st, all->v[r]);
    while (!rc && st.n) {            /* iterative post-order: producers before consumers */
      JitNode *x = st.v[st.n - 1];
      if (x->needed == JIT_NEED_UNSEEN) {
        x->needed = JIT_NEED_OPEN;
        for (int i = 0; i < x->nin && !rc; i++)
          if (x->edge[i].node && x->edge[i].node->needed == JIT_NEED_UNSEEN) rc = vec_push(&st, x->edge[i].node);
        continue;
      }
      st.n--;
      if (x->needed != JIT_NEED_OPEN) continue;      /* finished through another consumer */
      int need = capture_index(cap, NULL, x) >= 0 ? JIT_NEED_CAPTURE : 0;
      for (int i = 0; i < x->nin && !(need && cap->stop); i++) {
        const JitEdge *e = &x->edge[i];
        if ((e->leaf && capture_index(cap, e->leaf, NULL) >= 0) || (e->node && e->node->needed > 0)) need |= JIT_NEED_RUN;
      }
      x->needed = need;
    }
  }
  free(st.v);
  return rc;
}

static int engine(int nout, td_tensor *const *outputs, td_tensor *const *grads, int nin, td_tensor *const *inputs,
                  td_tensor **results, int retain_graph, int create_graph, int stop)
{
  Capture capture = { nin, inputs, results, stop }, *cap = inputs ? &capture : NULL;
  if (cap) for (int j = 0; j < nin; j++) {
    results[j] = NULL;
    if (!(inputs[j]->flags & TD_TF_REQUIRES_GRAD))
      return rt_err(TD_ERR_GRAD, "grad: input %d does not require grad", j + 1);
  }
  if (jit_tracing) jit_record_note_backward();
  uint64_t epoch = __atomic_add_fetch(&engine_epoch, 1, __ATOMIC_RELAXED);
  NodeVec all = { 0 }, ready = { 0 }, stack = { 0 };
  int rc = 0;
  td_tensor *seeds[RT_MAX_IN] = { 0 };
  if (nout > RT_MAX_IN) return rt_err(TD_ERR_ARG, "backward: too many outputs (%d)", nout);
  /* 1. seeds */
  for (int i = 0; i < nout && !rc; i++) {
    td_tensor *o = outputs[i], *g = grads ? grads[i] : NULL;
    if (!(o->flags & TD_TF_REQUIRES_GRAD))
      { rc = rt_err(TD_ERR_GRAD, "backward: element %d of tensors does not require grad and does not have a grad_fn", i); break; }
    if (g) {
      if (g->ndim != o->ndim || memcmp(g->sizes, o->sizes, o->ndim * sizeof(int64_t)))
        { rc = rt_err(TD_ERR_SHAPE, "backward: grad of shape %s does not match output of shape %s", RT_SHAPE(g), RT_SHAPE(o)); break; }
      td_retain(g);
    } else {
      if (o->nelem != 1)
        { rc = rt_err(TD_ERR_GRAD, "backward: grad can be implicitly created only for scalar outputs (got shape %s)", RT_SHAPE(o)); break; }
      if (!(g = rt_full_on(o->device_type, o->ndim, o->sizes, 1.0, o->scalar_type)))   /* traced values too carry their device */
        { rc = TD_ERR_NOMEM; break; }
    }
    seeds[i] = g;
  }
  /* 2. discover the graph and count each node's consumers */
  for (int i = 0; i < nout && !rc; i++) {
    JitNode *r = outputs[i]->rt_grad_fn;
    if (r && r->epoch != epoch) { r->epoch = epoch; r->deps = 0; r->gacc = NULL; r->npieces = 0; rc = vec_push(&stack, r); }
  }
  while (!rc && stack.n) {
    JitNode *x = stack.v[--stack.n];
    if ((rc = vec_push(&all, x))) break;
    for (int i = 0; i < x->nin; i++) {
      JitNode *p = x->edge[i].node;
      if (!p) continue;
      if (p->epoch != epoch) {
        p->epoch = epoch; p->deps = 0; p->gacc = NULL; p->npieces = 0;
        if ((rc = vec_push(&stack, p))) break;
      }
      p->deps++;
    }
  }
  if (!rc && cap) rc = mark_needed(&all, cap);
  /* 3. seed and run in dependency order */
  int prev = td_set_grad_enabled(create_graph);
  HookedVec hooks = { 0 }, *outer_hooks = hooked_leaves;
  hooked_leaves = &hooks;
  for (int i = 0; i < nout && !rc; i++) {
    td_tensor *o = outputs[i];
    if (!o->rt_grad_fn) { rc = deliver_leaf(o, seeds[i], cap, create_graph); continue; }
    JitNode *r = o->rt_grad_fn;
    td_tensor *s = grad_sum(r->gacc, seeds[i]);
    if (!s) { rc = TD_ERR_NOMEM; break; }
    td_release(r->gacc); r->gacc = s;
  }
  for (int i = 0; i < nout && !rc; i++) {
    JitNode *r = outputs[i]->rt_grad_fn;
    if (r && r->deps == 0 && r->epoch == epoch) { r->deps = -1; rc = vec_push(&ready, r); }
  }
  while (!rc && ready.n) {
    JitNode *x = ready.v[--ready.n];
    if (x->npieces && (rc = pieces_join(x))) break;
    if (x->gacc && hooked(x->owner) && (rc = run_hooks(x->owner, &x->gacc))) break;
    if (cap && (x->needed & JIT_NEED_CAPTURE) && x->gacc) {
      int j = capture_index(cap, NULL, x);
      td_tensor *s = grad_sum(cap->results[j], x->gacc);
      if (!s) { rc = TD_ERR_NOMEM; break; }
      td_release(cap->results[j]); cap->results[j] = s;
    }
    if (!cap || (x->needed & JIT_NEED_RUN)) rc = run_node(x, cap, retain_graph, create_graph, &ready);
    td_release(x->gacc); x->gacc = NULL;
  }
  /* hooked leaves: their hooks on the summed gradient, then the delivery */
  for (int i = 0; i < hooks.n; i++) {
    HookedLeaf *h = &hooks.v[i];
    if (!rc) rc = run_hooks(h->leaf, &h->g);
    hooked_leaves = NULL;                      /* deliver for real this time */
    if (!rc) rc = deliver_leaf(h->leaf, h->g, cap, create_graph);
    td_release(h->leaf); td_release(h->g);
  }
  hooked_leaves = outer_hooks;
  free(hooks.v);
  td_set_grad_enabled(prev);
  /* 4. clean up scratch (also after an error) */
  for (int i = 0; i < all.n; i++) { td_release(all.v[i]->gacc); all.v[i]->gacc = NULL; pieces_free(all.v[i]); }
  for (int i = 0; i < nout; i++) td_release(seeds[i]);
  if (rc && cap) for (int j = 0; j < nin; j++) { td_release(results[j]); results[j] = NULL; }
  free(all.v); free(ready.v); free(stack.v);
  return rc;
}

TD_API int td_backward(int nout, td_tensor *const *outputs, td_tensor *const *grads,
                       int nin, td_tensor *const *inputs, td_tensor **results,
                       int retain_graph, int create_graph)
{
  if (nout < 0 || nin < 0) return rt_err(TD_ERR_ARG, "backward: negative tensor count");
  for (int i = 0; i < nout; i++) RT_ARG(outputs[i], nin ? "grad" : "backward", i + 1, TD_ERR_ARG);
  for (int i = 0; i < nin; i++) RT_ARG(inputs[i], "grad", nout + i + 1, TD_ERR_ARG);
  rt_interrupt_hold++;                 /* an interrupt waits for the next op after the pass */
  int rc = engine(nout, outputs, grads, nin, inputs, results, retain_graph, create_graph, 0);
  rt_interrupt_hold--;
  return rc;
}

int jit_grad_capture(int nout, td_tensor *const *outputs, td_tensor *const *grads,
                     int nin, td_tensor *const *inputs, td_tensor **results)
{
  return engine(nout, outputs, grads, nin, inputs, results, 1, 0, 1);
}
