/*
** jit_opt.c -- passes over a recorded trace, in place: dead-code elimination,
** common-subexpression elimination and folding of scalar identities. Stage:
** after the recorder (and autograd), before the scheduler (jit_sched.c).
*/
#include "jit_sched.h"
#include <stdlib.h>
#include <string.h>

/*
** Rules: a removed record keeps its slot and gets JIT_IF_DEAD (refs never
** move). Folds only use SCALAR records whose value is specialized (no
** JIT_IF_DYN): a dynamic scalar may be 1 now and 3 on the next call. Folds
** never change a value's dtype or shape, and never look through identities
** that only hold for exact arithmetic (no trigonometric or algebraic
** rewrites that a benchmark could notice).
*/

static bool opt_live(const JitIns *r) { return !(r->flags & JIT_IF_DEAD); }

/* -- DCE ----------------------------------------------------------------------------- */

void jit_opt_dce(JitTrace *t)
{
  uint8_t *live = calloc((size_t)t->nins + 1, 1);
  if (!live) return;                      /* keeping everything is always correct */
  for (int i = 0; i < t->nouts; i++) if (t->outs[i].root >= 0) live[t->outs[i].root] = 1;
  for (int i = 0; i < t->neffects; i++) live[t->effects[i].ref] = 1;
  for (int i = t->nins - 1; i >= 0; i--) {
    JitIns *r = &t->ins[i];
    if (r->op == JIT_OP_INPUT) live[i] = 1;     /* bound to the caller's storages */
    if (!live[i] || !opt_live(r)) continue;
    for (int k = 0; k < r->nin; k++) live[jit_arg(t, r, k)->root] = 1;
    if (r->op == JIT_OP_WRITE && r->dst >= 0) live[t->views[r->dst].root] = 1;
  }
  for (int i = 0; i < t->nins; i++) if (!live[i]) t->ins[i].flags |= JIT_IF_DEAD;
  free(live);
}

/* -- CSE ----------------------------------------------------------------------------- */

static bool opt_view_eq(const JitView *a, const JitView *b)
{
  if (a->root != b->root || a->ndim != b->ndim || a->offset != b->offset) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d] || (a->sizes[d] != 1 && a->strides[d] != b->strides[d])) return false;
  return true;
}

static uint64_t opt_mix(uint64_t h, uint64_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); return h; }

static uint64_t opt_hash(const JitTrace *t, const JitIns *r)
{
  uint64_t h = opt_mix((uint64_t)r->op, (uint64_t)r->dtype);
  h = opt_mix(h, (uint64_t)r->nin);
  for (int d = 0; d < r->ndim; d++) h = opt_mix(h, (uint64_t)r->sizes[d]);
  for (int k = 0; k < r->nin; k++) {
    const JitView *v = jit_arg(t, r, k);
    h = opt_mix(h, (uint64_t)v->root);
    h = opt_mix(h, (uint64_t)v->offset);
  }
  if (r->op == JIT_OP_SCALAR) { uint64_t b; memcpy(&b, &r->value, sizeof b); h = opt_mix(h, b); }
  return h;
}

static bool opt_same(const JitTrace *t, const JitIns *a, const JitIns *b)
{
  if (a->op != b->op || a->dtype != b->dtype || a->cdtype != b->cdtype || a->ndim != b->ndim || a->nin != b->nin)
    return false;
  if (memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) || memcmp(&a->attrs, &b->attrs, sizeof a->attrs))
    return false;
  if (a->op == JIT_OP_SCALAR &&
      (memcmp(&a->value, &b->value, sizeof a->value) || ((a->flags | b->flags) & JIT_IF_DYN))) return false;
  for (int k = 0; k < a->nin; k++) if (!opt_view_eq(jit_arg(t, a, k), jit_arg(t, b, k))) return false;
  return true;
}

void jit_opt_cse(JitTrace *t)
{
  int n = t->nins, cap = 16;
  while (cap < 2 * n) cap *= 2;
  JitRef *remap = malloc(sizeof(JitRef) * (size_t)(n + 1)), *tab = malloc(sizeof(JitRef) * (size_t)cap);
  if (!remap || !tab) { free(remap); free(tab); return; }
  for (int i = 0; i < cap; i++) tab[i] = -1;
  for (int i = 0; i < n; i++) {
    JitIns *r = &t->ins[i];
    remap[i] = i;
    if (!opt_live(r)) continue;
    for (int k = 0; k < r->nin; k++) { JitView *v = &t->views[r->arg0 + k]; v->root = remap[v->root]; }
    if (r->op == JIT_OP_WRITE && r->dst >= 0) t->views[r->dst].root = remap[t->views[r->dst].root];
    /* inputs are distinct storages, writes are effects; dynamic scalars are slots */
    if (r->op == JIT_OP_INPUT || r->op == JIT_OP_WRITE || (r->op == JIT_OP_SCALAR && (r->flags & JIT_IF_DYN)))
      continue;
    uint32_t h = (uint32_t)opt_hash(t, r) & (uint32_t)(cap - 1);
    for (;; h = (h + 1) & (uint32_t)(cap - 1)) {
      if (tab[h] < 0) { tab[h] = i; break; }
      if (opt_same(t, &t->ins[tab[h]], r)) {
        remap[i] = tab[h];
        t->ins[tab[h]].flags |= r->flags & JIT_IF_OUTPUT;
        r->flags |= JIT_IF_DEAD;
        break;
      }
    }
  }
  for (int i = 0; i < t->nouts; i++) if (t->outs[i].root >= 0) t->outs[i].root = remap[t->outs[i].root];
  free(remap); free(tab);
}

/* -- Folding ---------------------------------------------------------------------------- */

/* The specialized value of operand view v, if it is a wrapped number. */
static bool fold_const(const JitTrace *t, const JitView *v, double *x)
{
  const JitIns *s = &t->ins[v->root];
  if (s->op != JIT_OP_SCALAR || (s->flags & JIT_IF_DYN)) return false;
  *x = s->value;
  return true;
}

/* Is v the whole of its root, contiguous, with the root's element count? */
static bool fold_whole(const JitTrace *t, const JitView *v)
{
  const JitIns *x = &t->ins[v->root];
  if (x->op == JIT_OP_SCALAR || v->offset != 0) return false;
  int64_t s = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    if (v->sizes[d] != 1 && v->strides[d] != s) return false;
    s *= v->sizes[d];
  }
  int64_t n = 1;
  for (int d = 0; d < x->ndim; d++) n *= x->sizes[d];
  return s == n;
}

/* Same shape as r (no broadcasting) and r's dtype: r can become COPY of v. */
static bool fold_same(const JitTrace *t, const JitIns *r, const JitView *v)
{
  if (t->ins[v->root].dtype != r->dtype || r->cdtype != r->dtype || v->ndim != r->ndim) return false;
  return memcmp(v->sizes, r->sizes, sizeof(int64_t) * (size_t)r->ndim) == 0;
}

static void fold_to(JitTrace *t, JitIns *r, int op, const JitView *v, int nin)
{
  JitView x = *v;
  r->op = op;
  r->nin = nin;
  for (int k = 0; k < nin; k++) t->views[r->arg0 + k] = x;
}

static void fold_one(JitTrace *t, JitIns *r)
{
  double c = 0;
  if (r->nin == 2 && r->op != JIT_OP_WRITE) {
    JitView *a = &t->views[r->arg0], *b = &t->views[r->arg0 + 1];
    bool cb = fold_const(t, b, &c);
    switch (r->op) {
    case RT_OP_MUL: case RT_OP_ADD: {
      double id = r->op == RT_OP_MUL ? 1 : 0, ca;
      if (cb && c == id && fold_same(t, r, a)) fold_to(t, r, RT_OP_COPY, a, 1);
      else if (fold_const(t, a, &ca) && ca == id && fold_same(t, r, b)) fold_to(t, r, RT_OP_COPY, b, 1);
      return;
    }
    case RT_OP_SUB: if (cb && c == 0 && fold_same(t, r, a)) fold_to(t, r, RT_OP_COPY, a, 1); return;
    case RT_OP_DIV: if (cb && c == 1 && fold_same(t, r, a)) fold_to(t, r, RT_OP_COPY, a, 1); return;
    case RT_OP_POW:
      if (!cb || t->ins[a->root].op == JIT_OP_SCALAR) return;
      if (c == 1 && fold_same(t, r, a)) fold_to(t, r, RT_OP_COPY, a, 1);
      else if (c == 2) fold_to(t, r, RT_OP_MUL, a, 2);                   /* x*x, as eager's pow(x, 2) */
      else if (c == 0.5 && rt_is_float(r->cdtype)) fold_to(t, r, RT_OP_SQRT, a, 1);
      return;
    }
    return;
  }
  if (r->nin != 1) return;
  JitView *a = &t->views[r->arg0];
  const JitIns *x = &t->ins[a->root];
  if (r->op == RT_OP_CAST && x->dtype == r->attrs.dtype && fold_same(t, r, a)) { fold_to(t, r, RT_OP_COPY, a, 1); return; }
  if (r->op == RT_OP_NEG && x->op == RT_OP_NEG && !(x->flags & JIT_IF_DEAD) && fold_whole(t, a) &&
      x->ndim == a->ndim && memcmp(x->sizes, a->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0) {
    const JitView *inner = jit_arg(t, x, 0);
    if (fold_same(t, r, inner)) fold_to(t, r, RT_OP_COPY, inner, 1);
  }
}

/* An elementwise op on specialized Lua numbers only (the 2 - 1 of pow's
** derivative) becomes a Lua number itself, evaluated by the eager kernel. */
static bool fold_scalars(JitTrace *t, JitIns *r)
{
  if (r->ndim != 0 || r->nin < 1 || (r->flags & JIT_IF_OUTPUT)) return false;
  td_tensor *in[3] = { NULL, NULL, NULL };
  double x;
  bool ok = true;
  for (int k = 0; k < r->nin && ok; k++) {
    const JitView *v = jit_arg(t, r, k);
    if (!fold_const(t, v, &x) || !(in[k] = rt_tensor_new(0, NULL, t->ins[v->root].dtype))) { ok = false; break; }
    rt_store(in[k]->ptr, in[k]->scalar_type, x);
    in[k]->flags |= TD_TF_WRAPPED_NUMBER;
  }
  td_tensor *o = NULL;
  if (ok) {
    int g = td_set_grad_enabled(0);
    o = td_op(r->op, r->nin, in, &r->attrs);
    td_set_grad_enabled(g);
  }
  for (int k = 0; k < 3; k++) td_release(in[k]);
  if (!o || o->scalar_type != r->dtype) { td_release(o); return false; }
  r->op = JIT_OP_SCALAR; r->value = rt_load(o->ptr, o->scalar_type); r->nin = 0; r->slot = -1;
  td_release(o);
  return true;
}

/* A COPY of the whole of a root that nothing else reads (a .grad is made to own
** its memory) takes over that root's computation, which then stores straight
** into the copy's buffer: no copy pass. The root's operands come before it, so
** they come before the copy too. (Not max/min: their indices are a record of
** their own, which stays next to them.) */
static void fold_sole_copies(JitTrace *t)
{
  int32_t *reads = calloc((size_t)t->nins + 1, sizeof *reads);
  if (!reads) return;                     /* keeping the copies is always correct */
  for (int i = 0; i < t->nouts; i++) if (t->outs[i].root >= 0) reads[t->outs[i].root] += 2;
  for (int i = 0; i < t->neffects; i++) reads[t->effects[i].ref] += 2;
  for (int i = 0; i < t->nins; i++) {
    const JitIns *r = &t->ins[i];
    if (!opt_live(r)) continue;
    for (int k = 0; k < r->nin; k++) reads[jit_arg(t, r, k)->root]++;
    if (r->op == JIT_OP_WRITE && r->dst >= 0) reads[t->views[r->dst].root] += 2;
  }
  for (int i = 0; i < t->nins; i++) {
    JitIns *r = &t->ins[i];
    if (!opt_live(r) || r->op != RT_OP_COPY) continue;
    const JitView *v = jit_arg(t, r, 0);
    JitIns *x = &t->ins[v->root];
    if (reads[v->root] != 1 || !opt_live(x) || x->op >= RT_OP__MAX || x->op == RT_OP_MAX || x->op == RT_OP_MIN ||
        x->op == RT_OP_ARGMAX || x->op == RT_OP_ARGMIN || x->dtype != r->dtype ||
        x->ndim != r->ndim || memcmp(x->sizes, r->sizes, sizeof(int64_t) * (size_t)r->ndim) || !fold_whole(t, v))
      continue;
    int32_t flags = r->flags, line = r->line;
    *r = *x;
    r->flags = flags; r->line = line;
    x->flags |= JIT_IF_DEAD;
  }
  free(reads);
}

void jit_opt_fold(JitTrace *t)
{
  for (int i = 0; i < t->nins; i++) {
    JitIns *r = &t->ins[i];
    if (!opt_live(r) || r->op >= RT_OP__MAX || r->op < 0 || rt_ops[r->op].kind != RT_K_EW) continue;
    if (!fold_scalars(t, r)) fold_one(t, r);
  }
  fold_sole_copies(t);
  /* forward consumers of a COPY of a whole contiguous root to that root (not
  ** writes, outputs or effects: those need a buffer of their own) */
  for (int i = 0; i < t->nins; i++) {
    JitIns *r = &t->ins[i];
    if (!opt_live(r) || r->op == JIT_OP_WRITE || r->op == JIT_OP_INPUT || r->op == JIT_OP_SCALAR) continue;
    for (int k = 0; k < r->nin; k++) {
      JitView *v = &t->views[r->arg0 + k];
      const JitIns *p = &t->ins[v->root];
      if (p->op != RT_OP_COPY || (p->flags & JIT_IF_DEAD)) continue;
      const JitView *src = jit_arg(t, p, 0);
      if (t->ins[src->root].dtype == p->dtype && t->ins[src->root].op != JIT_OP_SCALAR && fold_whole(t, src))
        v->root = src->root;
    }
  }
}

/* -- The gradient of a split ----------------------------------------------------------
** The derivative of a slice scatters g into zeros (slice_scatter onto a
** constant zero, jit_record_zeros), and the gradients of the pieces of a split
** (q, k, v of one projection) are summed: add(add(scatter(0, gq, 0:d),
** scatter(0, gk, d:2d)), scatter(0, gv, 2d:3d)). When the pieces tile the dim
** the sum is cat(gq, gk, gv): one pass that writes each element once, instead
** of a full write per piece and a sum over all of them. (The autograd engine
** already joins the gradients of slices it passes back, eagerly and while
** traced: jit_autograd.c, "Gradients of slices"; this pass catches the sums
** recorded otherwise.) */

typedef struct OptPiece { int64_t start, stop; JitView src; } OptPiece;

/* Is v the whole of a record of top's shape and dtype? */
static bool opt_like(const JitTrace *t, const JitView *v, const JitIns *top)
{
  const JitIns *x = &t->ins[v->root];
  return opt_live(x) && x->dtype == top->dtype && x->ndim == top->ndim && fold_whole(t, v) &&
         memcmp(x->sizes, top->sizes, sizeof(int64_t) * (size_t)top->ndim) == 0;
}

/* Collect the pieces of sum r (a tree of adds over step-1 slice scatters onto
** constant zeros, all in dim *dim) after the n found; -1 if it is not one. */
static int opt_pieces(const JitTrace *t, const JitIns *r, const JitIns *top, OptPiece *p, int n, int64_t *dim)
{
  for (int k = 0; k < 2 && n >= 0; k++) {
    const JitView *v = jit_arg(t, r, k);
    const JitIns *x = &t->ins[v->root];
    double z;
    if (!opt_like(t, v, top)) return -1;
    if (x->op == RT_OP_ADD && x->nin == 2 && x->cdtype == x->dtype) { n = opt_pieces(t, x, top, p, n, dim); continue; }
    if (x->op != RT_OP_SLICE_SCATTER || x->attrs.i[3] != 1 || (*dim >= 0 && x->attrs.i[0] != *dim) ||
        !fold_const(t, jit_arg(t, x, 0), &z) || z != 0 || n == RT_MAX_IN) return -1;
    *dim = x->attrs.i[0];
    p[n++] = (OptPiece){ x->attrs.i[1], x->attrs.i[2], *jit_arg(t, x, 1) };
  }
  return n;
}

void jit_opt_split_grads(JitTrace *t)
{
  OptPiece p[RT_MAX_IN];
  for (int i = 0; i < t->nins; i++) {
    JitIns *r = &t->ins[i];
    int64_t dim = -1, at = 0;
    if (!opt_live(r) || r->op != RT_OP_ADD || r->nin != 2 || r->cdtype != r->dtype) continue;
    int n = opt_pieces(t, r, r, p, 0, &dim);
    if (n < 2) continue;
    for (int a = 1; a < n; a++)               /* by start */
      for (int b = a; b > 0 && p[b - 1].start > p[b].start; b--) { OptPiece x = p[b]; p[b] = p[b - 1]; p[b - 1] = x; }
    for (int a = 0; a < n && at >= 0; a++) at = p[a].start == at ? p[a].stop : -1;
    if (at != r->sizes[dim]) continue;        /* gaps or overlaps: keep the sum */
    if (jit_trace_grow_views(t, t->nviews + n)) return;   /* out of memory: keeping the sum is correct */
    r->op = RT_OP_CAT; r->nin = n; r->arg0 = t->nviews;
    for (int a = 0; a < n; a++) t->views[t->nviews++] = p[a].src;
    memset(&r->attrs, 0, sizeof r->attrs);
    r->attrs.ndims = -1; r->attrs.dtype = -1; r->attrs.i[0] = dim;
  }
}

/* -- Whole writes ---------------------------------------------------------------------
** An in-place op on a whole tensor (Adam's m.mul_(b1):add_(g)) records a chain
** of WRITE versions, each of which the scheduler would store. A version that is
** neither returned nor an effect is only read: its reads read its value
** instead (the same view: both are contiguous buffers of the same elements),
** and a later whole WRITE into it takes the version before it as its old root
** (a whole write never reads the old contents). The version is then dead, and
** the chain fuses into one kernel that stores the last version only. */

/* Can the reads of whole write w go to its value, and the whole writes into w
** to w's old root? Not if w is kept (output, effect) or a partial write reads
** its old contents. */
static bool writes_bypassable(const JitTrace *t, JitRef w, const uint8_t *kept)
{
  const JitIns *r = &t->ins[w];
  if (kept[w] || !jit_write_whole(t, r) || !fold_whole(t, jit_arg(t, r, 1))) return false;
  const JitIns *v = &t->ins[jit_arg(t, r, 1)->root];
  if (v->dtype != r->dtype || v->op == JIT_OP_SCALAR) return false;
  for (int i = w + 1; i < t->nins; i++) {
    const JitIns *x = &t->ins[i];
    if (!opt_live(x) || x->op != JIT_OP_WRITE || jit_write_whole(t, x)) continue;
    if (jit_arg(t, x, 0)->root == w || (x->dst >= 0 && t->views[x->dst].root == w)) return false;
  }
  return true;
}

void jit_opt_writes(JitTrace *t)
{
  uint8_t *kept = calloc((size_t)t->nins + 1, 1);
  if (!kept) return;                      /* keeping every version is always correct */
  for (int i = 0; i < t->nouts; i++) if (t->outs[i].root >= 0) kept[t->outs[i].root] = 1;
  for (int i = 0; i < t->neffects; i++) kept[t->effects[i].ref] = 1;
  for (int w = 0; w < t->nins; w++) {
    JitIns *r = &t->ins[w];
    if (!opt_live(r) || r->op != JIT_OP_WRITE || !writes_bypassable(t, w, kept)) continue;
    JitRef old = jit_arg(t, r, 0)->root, val = jit_arg(t, r, 1)->root;
    for (int i = w + 1; i < t->nins; i++) {
      JitIns *x = &t->ins[i];
      if (!opt_live(x)) continue;
      bool whole = x->op == JIT_OP_WRITE && jit_write_whole(t, x);
      for (int k = 0; k < x->nin; k++) {
        JitView *a = &t->views[x->arg0 + k];
        if (a->root == w) a->root = whole && k == 0 ? old : val;
      }
      if (whole && x->dst >= 0 && t->views[x->dst].root == w) t->views[x->dst].root = old;
    }
  }
  free(kept);
}
