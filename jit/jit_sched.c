/*
** jit_sched.c -- the scheduler of tide.compile: decides which records get a
** buffer, groups the stored records into kernels (fusion), has each group
** lowered (jit_lower.c) and emits the JitPlan the executor runs.
*/
#include "jit_lower.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
** Design note (read before changing the fusion rules).
**
** Invariants
** - A record's value lives in a buffer (mat[] = 1, JIT_IF_MAT) or is recomputed
**   inside every kernel that reads it (inlined), as in Inductor. Buffers:
**   INPUT records, outputs and effects, every record an eager step reads or
**   runs, pointwise records read by more than SCHED_MAXUSE consumers or whose
**   inlined expression exceeds SCHED_MAXCOST ops, and whatever the lowering
**   could not inline (a view that is not affine in its producer's dims, a
**   reduction needed at a row structure other than the kernel's).
** - A kernel group is a list of stored records (roots) in record order; the
**   lowering computes each root, with everything it inlines, at the kernel's
**   anchor (the input space of its first reduction, or its first root's
**   shape). Reductions and row ops never leave their kernel unstored: one
**   read by two kernels is materialized.
** - Steps are emitted in record order. A root may join an earlier kernel (up
**   to SCHED_WINDOW kernels back) when it shares an input or an inlined value
**   with it, the merged group lowers, and every buffer it loads is produced by
**   a step before that kernel: steps only ever move earlier, so a read of a
**   root's old version never moves after the WRITE that replaces it.
** - A column sum over the space of a row reduction (sched_csum) is a root of
**   its own that may join that row kernel, whether or not it shares a load
**   with it, as partials per block of rows (CG_CSUM); one that joins none is
**   inlined again where it was (sched_csum_undo).
** - Every decision that can fail is retried: a failed lowering names a record
**   and an action (materialize it, run it eagerly); the scheduler applies it
**   and rebuilds the groups. Each retry adds a buffer or an eager step, so the
**   loop ends.
**
** Rules for contributors
** - A new op kind needs a class in sched_classify and, unless eager, a case in
**   jit_lower.c; eager ops need nothing else (their operands get buffers).
** - Do not make decisions in the lowering that the scheduler cannot see: the
**   lowering reports failures, the scheduler owns mat[] and cls[].
** - Keep the plan deterministic (no pointer hashing, no time-dependent choices).
*/

#define SCHED_MAXUSE   4        /* pointwise read by more consumers: stored */
#define SCHED_MAXCOST  30       /* inlined expression ops above this: stored */
#define SCHED_WINDOW   8        /* kernels looked back at for merging */
#define SCHED_MAXBUF   40       /* buffers of a merged kernel, at most */
#define SCHED_MAXINS   1200     /* instructions of a merged kernel, at most */
#define SCHED_BIGRED   (1 << 18)/* reductions over few rows / columns above this many elements run eagerly */
#define SCHED_FEWROWS  64

typedef struct SGroup {
  int kind;                      /* JIT_STEP_* */
  JitRef ref;                    /* EAGER */
  JitRef *roots; int nroots, rcap;
  JitLowered low;
} SGroup;

typedef struct Sched {
  JitSchedCtx c;
  int32_t *nuse, *lastuse, *stepof;
  uint8_t *csum;                 /* column sums that may join a row kernel over their input (sched_csum) */
  SGroup *g; int ng, gcap;
  int changed;
} Sched;

/* -- Classes, uses, initial buffers ----------------------------------------------- */

/* A WRITE whose destination is the whole root, contiguous: a pointwise store. */
bool jit_write_whole(const JitTrace *t, const JitIns *r)
{
  if (r->op != JIT_OP_WRITE || r->dst < 0) return false;
  const JitView *d = &t->views[r->dst];
  int64_t s = 1;
  for (int k = d->ndim - 1; k >= 0; k--) {
    if (d->sizes[k] != 1 && d->strides[k] != s) return false;
    s *= d->sizes[k];
  }
  int64_t n = 1;
  for (int k = 0; k < r->ndim; k++) n *= r->sizes[k];
  return d->offset == 0 && s == n;
}

static int sched_classify(const JitTrace *t, const JitIns *r)
{
  if (r->flags & JIT_IF_DEAD) return JIT_SC_DEAD;
  if (r->op == JIT_OP_SCALAR) return JIT_SC_SCALAR;
  if (r->op == JIT_OP_INPUT) return JIT_SC_INPUT;
  if (jit_write_whole(t, r)) return JIT_SC_EW;
  if (r->op < 0 || r->op >= RT_OP__MAX) return JIT_SC_EAGER;          /* other WRITEs */
  switch (rt_ops[r->op].kind) {
  case RT_K_EW:
    /* integer pow with a tensor exponent runs the eager kernel, which rejects
    ** negative exponents (a Lua number exponent is checked when recorded) */
    if ((r->op == RT_OP_POW || r->op == RT_OP_FMOD || r->op == RT_OP_REMAINDER) && !rt_is_float(r->cdtype) &&
        t->ins[jit_arg(t, r, 1)->root].op != JIT_OP_SCALAR)
      return JIT_SC_EAGER;   /* and integer fmod/remainder reject a zero divisor */
    return JIT_SC_EW;
  case RT_K_MOVE: return r->op == RT_OP_COPY ? JIT_SC_EW : JIT_SC_EAGER;
  case RT_K_ROW: return JIT_SC_ROW;
  case RT_K_RED: return r->op == RT_OP_ARGMAX || r->op == RT_OP_ARGMIN ? JIT_SC_EAGER : JIT_SC_RED;
  default: return JIT_SC_EAGER;                                        /* matmul, index ops */
  }
}

/* Reductions that the runtime runs better: few rows over many elements (a
** full sum of 2^24 values must not run on one thread), and big column sums
** (reduced dims outside the innermost one) unless they lower to a column-mode
** kernel with units of work for two threads at least. */
static bool sched_red_eager(const JitTrace *t, const JitIns *r)
{
  const JitView *v = jit_arg(t, r, 0);
  uint32_t mask = jit_red_mask(r, v->ndim);
  int64_t kept = 1, red = 1;
  int last = -1;
  for (int d = 0; d < v->ndim; d++) {
    if (v->sizes[d] == 1) continue;
    if (mask >> d & 1) red *= v->sizes[d]; else kept *= v->sizes[d];
    last = d;
  }
  if (kept * red < SCHED_BIGRED) return false;
  if (kept < SCHED_FEWROWS && r->op != RT_OP_SOFTMAX && r->op != RT_OP_LOG_SOFTMAX) return true;
  int64_t crows = jit_red_col(t, r);
  if (crows > 0) return crows < 2;
  return last >= 0 && !(mask >> last & 1);
}

/* A column sum (reduced dims first, columns kept) of a space some row
** reduction also reduces (its kept dims reduced there, its reduced dims kept):
** layer_norm's dweight and dbias next to its mean and variance. It gets a
** buffer of its own, so that it is a root that may join that row kernel as
** column partials (jit_lower.c lower_csum) whether or not it shares a load
** with it; when it joins none, sched_csum_undo inlines it again. */
static bool sched_csum(const JitTrace *t, const uint8_t *cls, JitRef i)
{
  const JitIns *r = &t->ins[i];
  if (cls[i] != JIT_SC_RED || r->op != RT_OP_SUM || !jit_red_col(t, r)) return false;
  const JitView *v = jit_arg(t, r, 0);
  uint32_t mask = jit_red_mask(r, v->ndim);
  bool kept = false;
  for (int d = 0; d < v->ndim; d++) {
    if (v->sizes[d] == 1) continue;
    if ((mask >> d & 1) && kept) return false;   /* no kept dim before a reduced one */
    kept |= !(mask >> d & 1);
  }
  for (int j = 0; j < t->nins; j++) {
    const JitIns *q = &t->ins[j];
    if ((cls[j] != JIT_SC_RED && cls[j] != JIT_SC_ROW) || j == i) continue;
    const JitView *u = jit_arg(t, q, 0);
    if (u->ndim != v->ndim || memcmp(u->sizes, v->sizes, sizeof(int64_t) * (size_t)v->ndim) != 0) continue;
    uint32_t qm = jit_red_mask(q, u->ndim);
    bool comp = true;
    for (int d = 0; d < v->ndim && comp; d++) comp = v->sizes[d] == 1 || (qm >> d & 1) != (mask >> d & 1);
    if (comp) return true;
  }
  return false;
}

static void sched_set_mat(Sched *s, JitRef ref)
{
  /* wrapped numbers never get a buffer: eager steps take their values */
  if (ref >= 0 && ref < s->c.t->nins && !s->c.mat[ref] && s->c.cls[ref] != JIT_SC_SCALAR) {
    s->c.mat[ref] = 1; s->changed = 1;
  }
}

static void sched_make_eager(Sched *s, JitRef ref)
{
  const JitTrace *t = s->c.t;
  const JitIns *r = &t->ins[ref];
  s->c.cls[ref] = JIT_SC_EAGER;
  sched_set_mat(s, ref);
  s->changed = 1;
  for (int i = 0; i < r->nin; i++) sched_set_mat(s, jit_arg(t, r, i)->root);
}

static int sched_init(Sched *s)
{
  JitTrace *t = s->c.t;
  int n = t->nins;
  for (int i = 0; i < n; i++) {
    JitIns *r = &t->ins[i];
    int cls = s->c.cls[i] = (uint8_t)sched_classify(t, r);
    r->flags &= ~JIT_IF_MAT;
    s->lastuse[i] = -1;
    if (cls == JIT_SC_DEAD) continue;
    for (int k = 0; k < r->nin; k++) {       /* distinct consumers */
      JitRef x = jit_arg(t, r, k)->root;
      bool seen = false;
      for (int j = 0; j < k && !seen; j++) seen = jit_arg(t, r, j)->root == x;
      if (!seen) { s->nuse[x]++; s->lastuse[x] = i; }
    }
  }
  for (int i = 0; i < t->nouts; i++) { sched_set_mat(s, t->outs[i].root); s->lastuse[t->outs[i].root] = n; }
  for (int i = 0; i < t->neffects; i++) { s->c.mat[t->effects[i].ref] = 1; s->lastuse[t->effects[i].ref] = n; }
  for (int i = 0; i < n; i++) {
    const JitIns *r = &t->ins[i];
    int cls = s->c.cls[i];
    if (cls == JIT_SC_INPUT) s->c.mat[i] = 1;
    if (cls == JIT_SC_EW && r->op == JIT_OP_WRITE) {   /* stored; its old version keeps a buffer */
      sched_set_mat(s, i);
      sched_set_mat(s, jit_arg(t, r, 0)->root);
    }
    if ((cls == JIT_SC_RED || cls == JIT_SC_ROW) && sched_red_eager(t, r)) s->c.cls[i] = JIT_SC_EAGER;
    if (s->c.cls[i] == JIT_SC_EAGER) sched_make_eager(s, i);
    if (cls == JIT_SC_EW && s->nuse[i] > SCHED_MAXUSE) s->c.mat[i] = 1;
  }
  for (int i = 0; i < n; i++)       /* 2: the buffer is only for that (sched_csum_undo) */
    if (sched_csum(t, s->c.cls, i)) { s->csum[i] = s->c.mat[i] ? 1 : 2; s->c.mat[i] = 1; }
  /* expression size: ops a kernel recomputes to inline i */
  int32_t *cost = calloc((size_t)n, sizeof *cost);
  if (!cost) return TD_ERR_NOMEM;
  for (int i = 0; i < n; i++) {
    const JitIns *r = &t->ins[i];
    int cls = s->c.cls[i];
    if (cls != JIT_SC_EW && cls != JIT_SC_RED && cls != JIT_SC_ROW) continue;
    int64_t c = cls == JIT_SC_EW ? 1 : 4;
    for (int k = 0; k < r->nin; k++) {
      JitRef x = jit_arg(t, r, k)->root;
      if (!s->c.mat[x]) c += cost[x];
    }
    if (c > SCHED_MAXCOST && s->nuse[i] > 0) { s->c.mat[i] = 1; c = 0; }
    cost[i] = (int32_t)(c > 1000000 ? 1000000 : c);
    if (s->c.mat[i]) cost[i] = 0;
  }
  free(cost);
  return 0;
}

/* In-place writes: an inlined value reading a version of a storage must be
** computed before the next WRITE into that storage. Inlined values whose last
** consumer comes after that WRITE are stored (at their own step, before it). */
static int sched_write_hazards(Sched *s)
{
  JitTrace *t = s->c.t;
  int n = t->nins, rc = TD_ERR_NOMEM;
  int32_t *fam = malloc(sizeof(int32_t) * (size_t)n), *nextw = malloc(sizeof(int32_t) * (size_t)n);
  int32_t *minw = malloc(sizeof(int32_t) * (size_t)n);
  if (!fam || !nextw || !minw) goto done;
  bool any = false;
  for (int i = 0; i < n; i++) {
    const JitIns *r = &t->ins[i];
    fam[i] = i;
    if (r->op == JIT_OP_WRITE && s->c.cls[i] != JIT_SC_DEAD) { fam[i] = fam[jit_arg(t, r, 0)->root]; any = true; }
  }
  rc = 0;
  if (!any) goto done;
  for (int i = 0; i < n; i++) nextw[i] = INT32_MAX;          /* per family, scanning backward */
  for (int i = n - 1; i >= 0; i--) {
    const JitIns *r = &t->ins[i];
    minw[i] = INT32_MAX;
    if (s->c.cls[i] == JIT_SC_DEAD) continue;
    for (int k = 0; k < r->nin; k++) {
      int32_t w = nextw[fam[jit_arg(t, r, k)->root]];
      if (w < minw[i]) minw[i] = w;
    }
    if (r->op == JIT_OP_WRITE) nextw[fam[i]] = i;
  }
  for (int i = 0; i < n; i++) {
    const JitIns *r = &t->ins[i];
    int cls = s->c.cls[i];
    if (s->c.mat[i] || (cls != JIT_SC_EW && cls != JIT_SC_RED && cls != JIT_SC_ROW)) continue;
    for (int k = 0; k < r->nin; k++) {
      JitRef x = jit_arg(t, r, k)->root;
      if (!s->c.mat[x] && minw[x] < minw[i]) minw[i] = minw[x];
    }
    if (s->lastuse[i] > minw[i]) s->c.mat[i] = 1;
  }
done:
  free(fam); free(nextw); free(minw);
  return rc;
}

/* -- Groups ---------------------------------------------------------------------------- */

static void sched_groups_free(Sched *s)
{
  for (int i = 0; i < s->ng; i++) { free(s->g[i].roots); jit_lowered_clear(&s->g[i].low); }
  s->ng = 0;
}

static SGroup *sched_group_new(Sched *s, int kind)
{
  if (s->ng == s->gcap) {
    int cap = s->gcap ? 2 * s->gcap : 64;
    SGroup *g = realloc(s->g, sizeof *g * (size_t)cap);
    if (!g) return NULL;
    s->g = g; s->gcap = cap;
  }
  SGroup *g = &s->g[s->ng++];
  memset(g, 0, sizeof *g);
  g->kind = kind; g->ref = -1; g->low.fail_ref = -1;
  return g;
}

static bool sched_has(const JitRef *a, int n, JitRef x)
{
  for (int i = 0; i < n; i++) if (a[i] == x) return true;
  return false;
}

/* Does the lowered root share a loaded buffer or an inlined value with g? */
static bool sched_shares(const JitLowered *a, const SGroup *g)
{
  const JitLowered *b = &g->low;
  for (int i = 0; i < a->nbuf; i++)
    if (!a->bstore[i] && (sched_has(b->bufs, b->nbuf, a->bufs[i]) || sched_has(g->roots, g->nroots, a->bufs[i])))
      return true;
  for (int i = 0; i < a->ninl; i++)
    if (sched_has(b->inl, b->ninl, a->inl[i])) return true;
  return false;
}

/* Buffers that `low` loads are ready before step gi (or stored by group gi). */
static bool sched_deps_ok(const Sched *s, const JitLowered *low, int gi)
{
  for (int i = 0; i < low->nbuf; i++) {
    JitRef b = low->bufs[i];
    if (low->bstore[i] || s->c.cls[b] == JIT_SC_INPUT) continue;
    if (sched_has(s->g[gi].roots, s->g[gi].nroots, b)) continue;
    if (s->stepof[b] < 0 || s->stepof[b] >= gi) return false;
  }
  return true;
}

static int sched_push_root(SGroup *g, JitRef r)
{
  if (g->nroots == g->rcap) {
    int cap = g->rcap ? 2 * g->rcap : 4;
    JitRef *p = realloc(g->roots, sizeof *p * (size_t)cap);
    if (!p) return TD_ERR_NOMEM;
    g->roots = p; g->rcap = cap;
  }
  g->roots[g->nroots++] = r;
  return 0;
}

/* Apply a lowering failure's action. */
static int sched_apply(Sched *s, const JitLowered *l)
{
  JitRef x = l->fail_ref;
  if (x < 0 || l->fail_action == JIT_LF_NONE) return TD_ERR_NOMEM;
  int cls = s->c.cls[x];
  if (l->fail_action == JIT_LF_MAT && !s->c.mat[x]) { sched_set_mat(s, x); return 0; }
  if (cls == JIT_SC_RED || cls == JIT_SC_ROW || s->c.t->ins[x].op == JIT_OP_WRITE) { sched_make_eager(s, x); return 0; }
  return rt_err(TD_ERR_STATE, "compile: cannot schedule %s %%%d (line %d)", jit_op_name(s->c.t->ins[x].op), x,
                s->c.t->ins[x].line);
}

/* Try to add root r (lowered alone as `one`) to an earlier kernel. */
static int sched_try_merge(Sched *s, JitRef r, JitLowered *one)
{
  int seen = 0;
  for (int gi = s->ng - 1; gi >= 0 && seen < SCHED_WINDOW; gi--) {
    SGroup *g = &s->g[gi];
    if (g->kind != JIT_STEP_KERNEL) continue;
    seen++;
    /* related work, or two pointwise loops over the same flat range */
    bool flat = one->k->flat > 0 && g->low.k->flat == one->k->flat;
    /* a column sum joins row kernels only (as partials), related or not */
    if (s->csum[r] && (g->low.k->cred > 0 || g->low.k->flat > 0 || g->low.nred == 0)) continue;
    if ((!flat && !s->csum[r] && !sched_shares(one, g)) || !sched_deps_ok(s, one, gi)) continue;
    if (sched_push_root(g, r)) return TD_ERR_NOMEM;
    JitLowered m;
    int rc = jit_lower_group(&s->c, g->roots, g->nroots, &m);
    if (rc == 0 && m.nbuf <= SCHED_MAXBUF && m.k->nins <= SCHED_MAXINS) {
      jit_lowered_clear(&g->low);
      g->low = m;
      s->stepof[r] = gi;
      return 1;
    }
    jit_lowered_clear(&m);
    g->nroots--;
    if (rc == TD_ERR_NOMEM) return rc;
  }
  return 0;
}

/* One round: steps in record order; returns 0 with s->changed set when a
** decision changed (the caller rebuilds), or a negative error. */
static int sched_round(Sched *s)
{
  JitTrace *t = s->c.t;
  sched_groups_free(s);
  s->changed = 0;
  for (int i = 0; i < t->nins; i++) s->stepof[i] = -1;
  for (int i = 0; i < t->nins; i++) {
    int cls = s->c.cls[i];
    if (cls == JIT_SC_EAGER) {
      SGroup *g = sched_group_new(s, JIT_STEP_EAGER);
      if (!g) return TD_ERR_NOMEM;
      g->ref = i;
      s->stepof[i] = s->ng - 1;
      continue;
    }
    if (!s->c.mat[i] || cls == JIT_SC_INPUT || cls == JIT_SC_DEAD || cls == JIT_SC_SCALAR) continue;
    JitLowered one;
    int rc = jit_lower_group(&s->c, &i, 1, &one);
    if (rc) {
      if (rc == TD_ERR_NOMEM) return rc;
      if ((rc = sched_apply(s, &one))) { jit_lowered_clear(&one); return rc; }
      jit_lowered_clear(&one);
      continue;                                  /* the next round rebuilds */
    }
    rc = s->changed ? 0 : sched_try_merge(s, i, &one);
    if (rc < 0) { jit_lowered_clear(&one); return rc; }
    if (rc == 1) { jit_lowered_clear(&one); continue; }
    SGroup *g = sched_group_new(s, JIT_STEP_KERNEL);
    if (!g || sched_push_root(g, i)) { jit_lowered_clear(&one); return TD_ERR_NOMEM; }
    g->low = one;
    s->stepof[i] = s->ng - 1;
  }
  if (s->changed) return 0;
  /* a reduction computed by two kernels is stored once instead */
  int32_t *owner = malloc(sizeof(int32_t) * (size_t)t->nins);
  if (!owner) return TD_ERR_NOMEM;
  for (int i = 0; i < t->nins; i++) owner[i] = -1;
  for (int gi = 0; gi < s->ng; gi++)
    for (int k = 0; k < s->g[gi].low.ninl; k++) {
      JitRef x = s->g[gi].low.inl[k];
      if (s->c.mat[x] || (s->c.cls[x] != JIT_SC_RED && s->c.cls[x] != JIT_SC_ROW)) continue;
      if (owner[x] >= 0 && owner[x] != gi) sched_set_mat(s, x);
      owner[x] = gi;
    }
  free(owner);
  return 0;
}

/* Column sums that joined no row kernel are inlined again where they were
** (their consumer's column kernel, as before sched_csum): no extra buffer and
** kernel for them. Returns 1 when it changed a decision (the caller rebuilds;
** flags only clear, so the rounds still end). */
static int sched_csum_undo(Sched *s)
{
  const JitTrace *t = s->c.t;
  int changed = 0;
  for (int i = 0; i < t->nins; i++) {
    if (!s->csum[i] || s->stepof[i] < 0) continue;
    const SGroup *g = &s->g[s->stepof[i]];
    bool fused = false;
    if (g->kind == JIT_STEP_KERNEL && g->low.k && g->low.k->cred <= 0)
      for (int j = 0; j < g->low.k->nins && !fused; j++) {
        const CgIns *in = &g->low.k->ins[j];
        fused = in->kind == CG_CSUM && g->low.bufs[g->low.k->acc[in->acc].buf] == i;
      }
    if (fused) continue;
    if (s->csum[i] == 2) s->c.mat[i] = 0;
    s->csum[i] = 0;
    changed = 1;
  }
  return changed;
}

/* -- The plan -------------------------------------------------------------------------- */

typedef struct SText { char *p; size_t n, cap; int err; } SText;

static void sched_printf(SText *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sched_printf(SText *b, const char *fmt, ...)
{
  if (b->err) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (w < 0) { b->err = 1; return; }
    if (b->p && b->n + (size_t)w < b->cap) { b->n += (size_t)w; return; }
    size_t cap = b->cap ? b->cap * 2 : 1024;
    while (cap < b->n + (size_t)w + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->err = 1; return; }
    b->p = p; b->cap = cap;
  }
}

static void sched_text_kernel(SText *b, const JitTrace *t, const SGroup *g, const CgKernel *k)
{
  const JitLowered *l = &g->low;
  sched_printf(b, "%s: [", k->name);
  for (int i = 0; i < l->ninl; i++)
    sched_printf(b, "%s %%%d %s", i ? "," : "", l->inl[i], jit_op_name(t->ins[l->inl[i]].op));
  sched_printf(b, " ] ->");
  for (int i = 0; i < g->nroots; i++) sched_printf(b, "%s %%%d", i ? "," : "", g->roots[i]);
  int npass = 0;
  for (int i = 0; i < k->nins; i++) npass += k->ins[i].kind == CG_PASS;
  if (k->flat) sched_printf(b, " (%lld elems, flat)\n", (long long)k->flat);
  else if (k->cred > 0) {   /* column mode: outer rows x columns, reduced over cred steps in blocks */
    int64_t rows = 1;
    for (int d = 0; d < k->nouter; d++) rows *= k->osize[d];
    sched_printf(b, " (%lld rows x %lld, columns reduced over %lld in %lld blocks)\n", (long long)rows,
                 (long long)k->inner, (long long)k->cred, (long long)((k->cred + k->cblk - 1) / k->cblk));
  } else {
    sched_printf(b, " (");
    for (int d = 0; d < k->nouter; d++) sched_printf(b, "%s%lld", d ? "x" : "", (long long)k->osize[d]);
    sched_printf(b, "%s rows x %lld, %d pass%s", k->nouter ? "" : "1", (long long)k->inner, npass, npass == 1 ? "" : "es");
    for (int i = 0, n = 0; i < k->nins; i++)   /* column sums accumulated as partials per block of rows */
      if (k->ins[i].kind == CG_CSUM) sched_printf(b, "%s %%%d", n++ ? "," : ", column sums of", l->bufs[k->acc[k->ins[i].acc].buf]);
    sched_printf(b, ")\n");
  }
}

static JitPlan *sched_plan(Sched *s)
{
  const JitTrace *t = s->c.t;
  JitPlan *p = calloc(1, sizeof *p);
  SText txt = { 0 };
  if (!p) return rt_errp(TD_ERR_NOMEM, "compile: out of memory for the plan");
  p->steps = calloc((size_t)(s->ng ? s->ng : 1), sizeof *p->steps);
  p->kernels = calloc((size_t)(s->ng ? s->ng : 1), sizeof *p->kernels);
  if (!p->steps || !p->kernels) goto nomem;
  for (int gi = 0; gi < s->ng; gi++) {
    SGroup *g = &s->g[gi];
    JitStep *st = &p->steps[p->nsteps++];
    st->kind = g->kind; st->ref = g->ref; st->kernel = -1;
    if (g->kind == JIT_STEP_EAGER) {
      sched_printf(&txt, "eager %s %%%d\n", jit_op_name(t->ins[g->ref].op), g->ref);
      continue;
    }
    CgKernel *k = g->low.k;
    g->low.k = NULL;
    cg_kernel_finish(k, g->low.hint);
    st->kernel = p->nkernels;
    p->kernels[p->nkernels++] = k;
    st->nbuf = g->low.nbuf; st->nargs = g->low.nargs;
    st->bufs = malloc(sizeof(JitRef) * (size_t)(st->nbuf ? st->nbuf : 1));
    st->args = malloc(sizeof(JitRef) * (size_t)(st->nargs ? st->nargs : 1));
    if (!st->bufs || !st->args) goto nomem;
    memcpy(st->bufs, g->low.bufs, sizeof(JitRef) * (size_t)st->nbuf);
    memcpy(st->args, g->low.args, sizeof(JitRef) * (size_t)st->nargs);
    sched_text_kernel(&txt, t, g, k);
  }
  if (txt.err) goto nomem;
  p->schedule_text = txt.p ? txt.p : calloc(1, 1);
  return p;
nomem:
  free(txt.p);
  jit_plan_free(p);
  return rt_errp(TD_ERR_NOMEM, "compile: out of memory for the plan");
}

JitPlan *jit_schedule(JitTrace *t)
{
  int n = t->nins;
  Sched s = { .c = { .t = t } };
  JitPlan *p = NULL;
  s.c.cls = calloc((size_t)n + 1, 1);
  s.c.mat = calloc((size_t)n + 1, 1);
  s.nuse = calloc((size_t)n + 1, sizeof *s.nuse);
  s.lastuse = calloc((size_t)n + 1, sizeof *s.lastuse);
  s.stepof = calloc((size_t)n + 1, sizeof *s.stepof);
  s.csum = calloc((size_t)n + 1, 1);
  int rc = TD_ERR_NOMEM;
  if (!s.c.cls || !s.c.mat || !s.nuse || !s.lastuse || !s.stepof || !s.csum) goto done;
  if ((rc = sched_init(&s)) || (rc = sched_write_hazards(&s))) goto done;
  for (int round = 0;; round++) {
    if ((rc = sched_round(&s))) goto done;
    if (!s.changed && sched_csum_undo(&s) && !(rc = sched_write_hazards(&s))) continue;
    if (rc) goto done;
    if (!s.changed) break;
    if (round > 2 * n + 8) { rc = rt_err(TD_ERR_STATE, "compile: the scheduler did not converge"); goto done; }
  }
  for (int i = 0; i < n; i++) if (s.c.mat[i]) t->ins[i].flags |= JIT_IF_MAT;
  p = sched_plan(&s);
done:
  if (rc == TD_ERR_NOMEM) rt_err(rc, "compile: out of memory while scheduling");
  sched_groups_free(&s);
  free(s.g); free(s.c.cls); free(s.c.mat); free(s.nuse); free(s.lastuse); free(s.stepof); free(s.csum);
  return p;
}

void jit_plan_free(JitPlan *p)
{
  if (!p) return;
  for (int i = 0; i < p->nsteps; i++) { free(p->steps[i].bufs); free(p->steps[i].args); }
  for (int i = 0; i < p->nkernels; i++) { cg_kernel_free(p->kernels[i]); free(p->kernels[i]); }
  free(p->steps); free(p->kernels); free(p->schedule_text); free(p->ocl);
  free(p);
}
