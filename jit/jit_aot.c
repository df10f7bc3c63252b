/*
** jit_aot.c -- backward ahead of time (AOTAutograd) for a compiled function
** whose returned value requires grad and whose backward() runs after the call.
**
** 1. Joint trace. While the call is still traced, the derivative rules are
**    replayed from the returned value with a placeholder gradient (a real
**    tensor, so an INPUT record) and stop at the boundary of the traced graph:
**    leaves, and nodes recorded outside the call (an argument's eager
**    history). Records [0, F) are the forward, [F, N) the backward; the
**    gradients of the boundary tensors are extra outputs.
** 2. Partition. The forward trace returns the caller's outputs plus the
**    forward values the backward reads ("saved"); the backward trace takes
**    those as inputs. A pointwise value the backward reads is recomputed there
**    instead when its operands are inputs, numbers, values the backward reads
**    anyway, or non-pointwise values (matmul outputs, reductions, row ops),
**    which the forward materializes in any case: so gelu(x @ W + b) saves the
**    matmul output only, and the bias add and the gelu are recomputed inside
**    the backward's fused kernels rather than written and read back.
** 3. The returned tensor gets one autograd node whose edges are the boundary;
**    its rule runs the compiled backward on the incoming gradient.
*/
#include "jit_rec.h"
#include "jit_grad.h"
#include <stdlib.h>
#include <string.h>

/* -- 1. Joint trace ------------------------------------------------------------------------- */

typedef struct { void **v; int n, cap; } PtrVec;

static int pv_push(PtrVec *s, void *p)
{
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    void **v = realloc(s->v, (size_t)cap * sizeof *v);
    if (!v) return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory");
    s->v = v; s->cap = cap;
  }
  s->v[s->n++] = p;
  return 0;
}

/* A set of pointers: open addressing, power-of-two capacity. */
typedef struct { void **v; int n, cap; } PtrSet;

/* Adds p; returns 1 if it was new, 0 if present, < 0 on error. */
static int ps_add(PtrSet *s, void *p)
{
  if ((s->n + 1) * 2 > s->cap) {
    int cap = s->cap ? 2 * s->cap : 256;
    void **v = calloc((size_t)cap, sizeof *v);
    if (!v) return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory");
    for (int i = 0; i < s->cap; i++) if (s->v[i]) {
      uint32_t h = (uint32_t)(((uintptr_t)s->v[i] >> 4) * 2654435761u) & (uint32_t)(cap - 1);
      while (v[h]) h = (h + 1) & (uint32_t)(cap - 1);
      v[h] = s->v[i];
    }
    free(s->v); s->v = v; s->cap = cap;
  }
  uint32_t h = (uint32_t)(((uintptr_t)p >> 4) * 2654435761u) & (uint32_t)(s->cap - 1);
  while (s->v[h] && s->v[h] != p) h = (h + 1) & (uint32_t)(s->cap - 1);
  if (s->v[h]) return 0;
  s->v[h] = p; s->n++;
  return 1;
}

/* A header that stands for node p's output (autograd.grad captures by grad_fn). */
static td_tensor *boundary_header(JitNode *p, int device)
{
  td_tensor *h = rt_tensor_alloc();
  if (!h) return NULL;
  h->ndim = p->out_ndim; h->scalar_type = p->out_dtype; h->device_type = device;
  memcpy(h->sizes, p->out_size, sizeof h->sizes);
  rt_tensor_contig_strides(h->ndim, h->sizes, h->strides);
  h->nelem = rt_numel(h->ndim, h->sizes);
  h->rt_grad_fn = p; __atomic_add_fetch(&p->refcount, 1, __ATOMIC_RELAXED);
  h->flags |= TD_TF_REQUIRES_GRAD;
  return h;
}

/* The boundary of y's graph: leaves and outside nodes behind nodes of this trace. */
static int aot_boundary(const JitTrace *t, td_tensor *y, JitAot *a)
{
  PtrSet seen = { 0 };
  PtrVec stack = { 0 }, tg = { 0 };
  int rc = ps_add(&seen, y->rt_grad_fn);
  if (rc >= 0) rc = pv_push(&stack, y->rt_grad_fn);
  while (!rc && stack.n) {
    JitNode *x = stack.v[--stack.n];
    for (int i = 0; i < x->nin && !rc; i++) {
      JitEdge *e = &x->edge[i];
      void *key = e->leaf ? (void *)e->leaf : (void *)e->node;
      int fresh = key ? ps_add(&seen, key) : 0;
      if (fresh <= 0) { rc = fresh < 0 ? fresh : 0; continue; }
      if (e->node && e->node->trace == t->id) { rc = pv_push(&stack, key); continue; }
      if (tg.n >= JIT_MAX_EDGES) {
        rc = rt_err(TD_ERR_ARG, "tide.compile: the backward of the returned value reaches more than %d "
                    "parameters and arguments", JIT_MAX_EDGES);
        break;
      }
      td_tensor *h = e->leaf ? (td_retain(e->leaf), e->leaf) : boundary_header(e->node, y->device_type);
      if (!h) { rc = TD_ERR_NOMEM; break; }
      if ((rc = pv_push(&tg, h))) td_release(h);
    }
  }
  free(seen.v); free(stack.v);
  a->targets = (td_tensor **)tg.v; a->ntargets = tg.n;
  return rc;
}

int jit_aot_record(JitRec *r, td_tensor *y, JitAot *a)
{
  JitTrace *t = &r->t;
  memset(a, 0, sizeof *a);
  a->nfo = t->nouts;
  int rc = aot_boundary(t, y, a);
  if (rc) return rc;
  if (!a->ntargets) return rt_err(TD_ERR_GRAD, "tide.compile: the returned value requires grad but reaches no leaf");
  a->F = t->nins;
  /* the placeholder gradient: a real tensor on y's device */
  td_tensor *g0 = y->device_type == TD_CPU ? rt_tensor_new(y->ndim, y->sizes, y->scalar_type)
                                           : rt_full_on(y->device_type, y->ndim, y->sizes, 0, y->scalar_type), **res = NULL;
  if (!g0 || !(a->tout = malloc(sizeof(int) * (size_t)a->ntargets)) ||
      !(res = calloc((size_t)a->ntargets, sizeof *res))) { td_release(g0); free(res); return TD_ERR_NOMEM; }
  if (g0->device_type == TD_CPU) memset(rt_ptr(g0), 0, (size_t)g0->nelem * rt_dtype_size(g0->scalar_type));
  a->gslot = jit_rec_input(r, g0);
  int ran = r->backward_ran;
  td_tensor *yy = y;
  rc = a->gslot < 0 ? TD_ERR_STATE : jit_grad_capture(1, &yy, &g0, a->ntargets, a->targets, res);
  r->backward_ran = ran;
  for (int j = 0; j < a->ntargets; j++) {
    a->tout[j] = !rc && res[j] ? jit_rec_output(r, res[j]) : -1;
    if (!rc && res[j] && a->tout[j] < 0) rc = TD_ERR_STATE;
    td_release(res[j]);
  }
  free(res); td_release(g0);
  return rc;
}

void jit_aot_clear(JitAot *a)
{
  for (int j = 0; j < a->ntargets; j++) td_release(a->targets[j]);
  free(a->targets); free(a->tout);
  memset(a, 0, sizeof *a);
}

/* -- 2. Partition --------------------------------------------------------------------------- */

enum { ST_NEED = 1, ST_COPY = 2, ST_SAVE = 4, ST_RECOMP = 8 };

static bool pointwise(const JitIns *x) { return x->op >= 0 && x->op < RT_OP__MAX && rt_ops[x->op].kind == RT_K_EW; }
static bool leafish(const JitIns *x) { return x->op == JIT_OP_INPUT || x->op == JIT_OP_SCALAR; }

static void mark_roots(const JitTrace *j, const JitIns *x, int F, uint8_t *st)
{
  for (int k = 0; k < x->nin; k++) { JitRef o = jit_arg(j, x, k)->root; if (o < F) st[o] |= ST_NEED; }
  if (x->op == JIT_OP_WRITE && j->views[x->dst].root < F) st[j->views[x->dst].root] |= ST_NEED;
}

/* Decide every forward record the backward needs: copied (inputs, numbers),
** recomputed, or saved. Consumers first, so a recomputed value's operands are
** decided after it (they become needed). */
static int partition(const JitTrace *j, const JitAot *a, uint8_t *st)
{
  int F = a->F, nsaved = 0;
  for (int i = F; i < j->nins; i++) mark_roots(j, &j->ins[i], F, st);
  for (int o = a->nfo; o < j->nouts; o++) if (j->outs[o].root < F) st[j->outs[o].root] |= ST_NEED;
  for (int r = F - 1; r >= 0; r--) {
    if (!(st[r] & ST_NEED)) continue;
    const JitIns *x = &j->ins[r];
    if (leafish(x)) { st[r] |= ST_COPY; continue; }
    bool rc = pointwise(x);
    for (int k = 0; k < x->nin && rc; k++) {
      const JitIns *o = &j->ins[jit_arg(j, x, k)->root];
      rc = leafish(o) || (st[jit_arg(j, x, k)->root] & ST_NEED) || !pointwise(o);
    }
    if (rc) { st[r] |= ST_RECOMP; mark_roots(j, x, F, st); }
    else { st[r] |= ST_SAVE; nsaved++; }
  }
  return nsaved;
}

static int grow_trace(JitTrace *t, int nins, int nviews, int nouts, int ninputs, int neffects)
{
  t->ins = calloc((size_t)nins + 1, sizeof *t->ins); t->cap = nins;
  t->views = calloc((size_t)nviews + 1, sizeof *t->views); t->vcap = nviews;
  t->outs = calloc((size_t)nouts + 1, sizeof *t->outs); t->ocap = nouts;
  t->inputs = calloc((size_t)ninputs + 1, sizeof *t->inputs); t->icap = ninputs;
  t->effects = calloc((size_t)neffects + 1, sizeof *t->effects); t->ecap = neffects;
  return t->ins && t->views && t->outs && t->inputs && t->effects ? 0 : rt_err(TD_ERR_NOMEM, "tide.compile: out of memory");
}

/* Append record x of j to b with its operand views' roots mapped. */
static void copy_rec(JitTrace *b, const JitTrace *j, const JitIns *x, const JitRef *map)
{
  JitIns *y = &b->ins[b->nins++];
  *y = *x;
  y->arg0 = b->nviews;
  for (int k = 0; k < x->nin; k++) { JitView v = *jit_arg(j, x, k); v.root = map[v.root]; b->views[b->nviews++] = v; }
  if (x->op == JIT_OP_WRITE) { JitView v = j->views[x->dst]; v.root = map[v.root]; y->dst = b->nviews; b->views[b->nviews++] = v; }
}

static void root_out(JitTrace *t, JitRef r)
{
  JitView *v = &t->outs[t->nouts++];
  const JitIns *x = &t->ins[r];
  memset(v, 0, sizeof *v);
  v->root = r; v->ndim = x->ndim;
  memcpy(v->sizes, x->sizes, sizeof v->sizes);
  rt_tensor_contig_strides(x->ndim, x->sizes, v->strides);
}

static void mark_outputs(JitTrace *t)
{
  for (int i = 0; i < t->nins; i++) t->ins[i].flags &= ~JIT_IF_OUTPUT;
  for (int o = 0; o < t->nouts; o++) t->ins[t->outs[o].root].flags |= JIT_IF_OUTPUT;
}

/* In-place writes into inputs (effects: BatchNorm's running statistics) are
** applied by the forward, so the backward must not read those inputs. */
const char *jit_aot_effects_conflict(const JitTrace *j, const JitAot *a)
{
  if (!j->neffects) return NULL;
  uint8_t *st = calloc((size_t)j->nins + 1, 1);
  if (!st) return "out of memory";
  partition(j, a, st);
  const char *why = NULL;
  for (int e = 0; e < j->neffects && !why; e++) {
    if (j->effects[e].ref >= a->F) why = "its backward writes in place into a tensor it reaches";
    for (int r = 0; r < a->F && !why; r++)
      if ((st[r] & ST_COPY) && j->ins[r].op == JIT_OP_INPUT && j->ins[r].slot == j->effects[e].slot)
        why = "it writes in place into a tensor its backward reads";
  }
  free(st);
  return why;
}

int jit_aot_split(const JitTrace *j, const JitAot *a, JitTrace *f, JitTrace *b)
{
  int F = a->F, N = j->nins;
  memset(f, 0, sizeof *f); memset(b, 0, sizeof *b);
  uint8_t *st = calloc((size_t)N + 1, 1);
  JitRef *map = malloc(sizeof(JitRef) * ((size_t)N + 1));
  if (!st || !map) { free(st); free(map); return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory"); }
  int nsaved = partition(j, a, st), fin = 0;
  for (int r = 0; r < F; r++) if (j->ins[r].op == JIT_OP_INPUT) fin++;
  int fviews = F < N ? j->ins[F].arg0 : j->nviews;
  int rc = grow_trace(f, F, fviews, a->nfo + nsaved, fin, j->neffects);
  if (!rc) rc = grow_trace(b, N, j->nviews, j->nouts, j->ninputs + nsaved, 0);
  if (rc) goto done;
  /* forward: records [0, F) as they are; outputs: the caller's, then the saved */
  memcpy(f->ins, j->ins, sizeof(JitIns) * (size_t)F); f->nins = F;
  memcpy(f->views, j->views, sizeof(JitView) * (size_t)fviews); f->nviews = fviews;
  memcpy(f->outs, j->outs, sizeof(JitView) * (size_t)a->nfo); f->nouts = a->nfo;
  for (int r = 0; r < F; r++) if (st[r] & ST_SAVE) root_out(f, r);
  if (j->neffects) memcpy(f->effects, j->effects, sizeof(JitEffect) * (size_t)j->neffects);
  f->neffects = j->neffects;
  for (int s = 0; s < fin; s++) { f->inputs[s] = j->inputs[s]; td_retain(f->inputs[s]); }
  f->ninputs = fin; f->nscalars = j->nscalars; f->id = j->id;
  /* backward: inputs, numbers and recomputed values it needs, the saved values
  ** as new inputs (slots after the joint trace's), then records [F, N) */
  int k = 0;
  for (int r = 0; r < N; r++) {
    map[r] = -1;
    if (r >= F || (st[r] & (ST_COPY | ST_RECOMP))) { map[r] = b->nins; copy_rec(b, j, &j->ins[r], map); continue; }
    if (!(st[r] & ST_SAVE)) continue;
    const JitIns *x = &j->ins[r];
    JitIns *y = &b->ins[b->nins];
    memset(y, 0, sizeof *y);
    y->op = JIT_OP_INPUT; y->dtype = y->cdtype = x->dtype; y->ndim = 1; y->dst = -1;
    y->sizes[0] = rt_numel(x->ndim, x->sizes); y->arg0 = b->nviews;
    y->attrs.ndims = -1; y->attrs.dtype = -1;
    y->attrs.i[0] = jit_trace_device(j);    /* saved on the forward's device */
    y->slot = j->ninputs + k++;
    map[r] = b->nins++;
  }
  for (int o = a->nfo; o < j->nouts; o++) { b->outs[b->nouts] = j->outs[o]; b->outs[b->nouts].root = map[j->outs[o].root]; b->nouts++; }
  for (int i = 0; i < b->nins; i++)
    if (b->ins[i].op == JIT_OP_INPUT && b->ins[i].slot < j->ninputs) {
      b->inputs[b->ins[i].slot] = j->inputs[b->ins[i].slot];
      td_retain(j->inputs[b->ins[i].slot]);
    }
  b->ninputs = j->ninputs + nsaved; b->nscalars = j->nscalars; b->id = j->id;
  mark_outputs(f); mark_outputs(b);
  for (int e = 0; e < f->neffects; e++) f->ins[f->effects[e].ref].flags |= JIT_IF_OUTPUT;
done:
  free(st); free(map);
  if (rc) { jit_trace_clear(f); jit_trace_clear(b); }
  return rc;
}

/* -- 3. The node ----------------------------------------------------------------------------- */

typedef struct AotNode {
  JitTrace b;                /* this call's backward trace: inputs bound but the gradient's */
  int gslot, gdtype;
  JitAotRun run; void *ctx; void (*ctx_release)(void *);
  int *bout;                 /* per edge: index into b.outs, or -1 */
} AotNode;

static void aot_node_free(void *p)
{
  AotNode *an = p;
  if (!an) return;
  jit_trace_clear(&an->b);
  if (an->ctx_release) an->ctx_release(an->ctx);
  free(an->bout); free(an);
}

static int aot_rule_fn(JitCtx *k)
{
  JitNode *n = k->n;
  AotNode *an = n->ext;
  if (!an)
    return rt_err(TD_ERR_GRAD, "compiled_backward: trying to backward through the graph a second time (the "
                  "saved values were freed); pass retain_graph=true to the first backward");
  if (td_grad_enabled())
    return rt_err(TD_ERR_GRAD, "compiled_backward: create_graph through a value returned by a compiled function "
                  "is not supported; compute the gradient of the gradient inside the compiled function");
  if (jit_tracing)
    return rt_err(TD_ERR_STATE, "compiled_backward: backward of a compiled function's result inside another "
                  "compiled function is not supported; call that backward inside the first function");
  td_tensor *g = k->g->scalar_type == an->gdtype ? (td_retain(k->g), k->g) : td_cast(k->g, an->gdtype);
  td_tensor *gc = g ? td_contiguous(g) : NULL;
  td_release(g);
  if (!gc) return TD_ERR_NOMEM;
  an->b.inputs[an->gslot] = gc;
  td_tensor **outs = calloc((size_t)an->b.nouts + 1, sizeof *outs);
  int rc = outs ? an->run(an->ctx, &an->b, outs) : TD_ERR_NOMEM;
  an->b.inputs[an->gslot] = NULL;
  td_release(gc);
  for (int i = 0; !rc && i < n->nin; i++)
    if (an->bout[i] >= 0) { k->gin[i] = outs[an->bout[i]]; outs[an->bout[i]] = NULL; }
  for (int o = 0; outs && o < an->b.nouts; o++) td_release(outs[o]);
  free(outs);
  return rc;
}

static const JitGradRule aot_rule = { "compiled_backward", aot_rule_fn, 0 };

int jit_aot_attach(td_tensor *y, const JitAot *a, JitTrace *b, JitAotRun run, void *ctx, void (*ctx_release)(void *))
{
  JitNode *n = jit_node_custom(&aot_rule, a->ntargets);
  AotNode *an = n ? calloc(1, sizeof *an) : NULL;
  if (an) an->bout = malloc(sizeof(int) * ((size_t)a->ntargets + 1));
  if (!an || !an->bout) {
    if (an) free(an);
    if (n) jit_node_release(n);
    jit_trace_clear(b);
    ctx_release(ctx);
    return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory");
  }
  an->b = *b; memset(b, 0, sizeof *b);
  an->gslot = a->gslot; an->run = run; an->ctx = ctx; an->ctx_release = ctx_release;
  td_release(an->b.inputs[a->gslot]);          /* the placeholder: the real gradient comes at backward */
  an->b.inputs[a->gslot] = NULL;
  for (int i = 0; i < an->b.nins; i++)
    if (an->b.ins[i].op == JIT_OP_INPUT && an->b.ins[i].slot == a->gslot) an->gdtype = an->b.ins[i].dtype;
  for (int i = 0; i < a->ntargets; i++) {
    td_tensor *x = a->targets[i];
    JitEdge *e = &n->edge[i];
    e->ndim = x->ndim; e->scalar_type = x->scalar_type; memcpy(e->sizes, x->sizes, sizeof e->sizes);
    if (x->rt_grad_fn) { e->node = x->rt_grad_fn; __atomic_add_fetch(&e->node->refcount, 1, __ATOMIC_RELAXED); }
    else { e->leaf = x; td_retain(x); }
    an->bout[i] = a->tout[i] >= 0 ? a->tout[i] - a->nfo : -1;
  }
  n->ext = an; n->ext_free = aot_node_free;
  n->out_ndim = y->ndim; n->out_dtype = y->scalar_type; memcpy(n->out_size, y->sizes, sizeof n->out_size);
  y->rt_grad_fn = n; n->owner = y;
  y->flags |= TD_TF_REQUIRES_GRAD;
  return 0;
}
