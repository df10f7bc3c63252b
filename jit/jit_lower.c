/*
** jit_lower.c -- lowering of one kernel group (stored records + everything
** they inline) to kernel IR (cg.h): index maps, loads, ALU, reduction passes,
** stores; the composite ops (mean, var, std, logsumexp, norm, softmax) are
** expanded here into passes of primitives. Stage: after jit_sched.c's grouping.
*/
#include "jit_lower.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
** Model. A kernel iterates over *virtual dims*: outer dims [0, nout) (rows)
** and inner dims [nout, nv) (one pass), taken from the group's anchor (the
** input space of its reduction, or the shape of its first stored value), size-1
** dims dropped. Every value is asked for at an index map (LMap): its record's
** multi-index as an affine function of the virtual indices. A value whose map
** has no inner coefficient is a row value (level 0); others are element values
** of the current pass segment. Operand views compose with maps into affine
** addresses; an address into a buffer is a load, an address into an inlined
** root is decomposed back into that root's multi-index (lower_decompose), and
** fails when the view is not affine there (the scheduler then materializes it).
** Pass segments are numbered when they close, so a reduction needed inside a
** pass gets an earlier pass. At the end, virtual dims coalesce into the
** kernel's outer dims and one inner dim (or flat mode for pure pointwise).
*/

#define LW_NV (2 * TD_MAX_DIMS)
#define LW_MAXINS 4000
#define LW_FLAT_INNER 4096
#define LW_ROWCACHE (1 << 16)       /* softmax rows up to this many bytes keep e in the output */

typedef struct LMap { int32_t nd, pad; int64_t base[TD_MAX_DIMS]; int64_t coef[TD_MAX_DIMS][LW_NV]; } LMap;
typedef struct LAddr { int64_t off; int64_t coef[LW_NV]; } LAddr;
typedef struct LIns { CgIns c; int32_t seg, after, td, red; } LIns;   /* seg -1: row value; td, red: column mode */
typedef struct LMemo { JitRef ref; int32_t seg, val, pad; LMap map; } LMemo;
typedef struct LAcc { JitRef root; int32_t pad; LAddr a; } LAcc;

typedef struct Lower {
  const JitSchedCtx *c;
  const JitTrace *t;
  const JitRef *roots; int nroots;
  int nv, nout;
  int64_t vs[LW_NV];
  LIns *ins; int nins, icap;
  LAcc *acc; int nacc, acap;
  LMemo *memo; int nmemo, mcap;
  int32_t *segno; int nseg, scap, npass;
  int cur;                          /* current element segment */
  JitLowered *out;
  int icapl;
  int failed;
  int col, ncv; JitRef redref;      /* column mode (jit_lower_col.h): C dims end at ncv; the RED's record */
  bool nocol, colretry;             /*   off (a retry); failed, retry in row mode */
  JitRef root; int rseg;            /* the root being lowered, the segment of the stores */
  LMap rmap; LAddr raddr;           /*   its map and store address */
} Lower;

#define LW_FAIL(L, ref, act) (lower_fail((L), (ref), (act)))

static int lower_fail(Lower *L, JitRef ref, int act)
{
  if (!L->failed) { L->failed = 1; L->out->fail_ref = ref; L->out->fail_action = act; }
  return -1;
}

static void *lower_grow(void *p, int *cap, int need, size_t es)
{
  if (need <= *cap) return p;
  int n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  void *q = realloc(p, (size_t)n * es);
  if (q) *cap = n;
  return q;
}

uint32_t jit_red_mask(const JitIns *ins, int nd)
{
  if (ins->op == RT_OP_SOFTMAX || ins->op == RT_OP_LOG_SOFTMAX) return 1u << ins->attrs.i[0];
  if (ins->attrs.ndims < 0) return nd > 0 ? (1u << nd) - 1 : 0;
  uint32_t m = 0;
  for (int i = 0; i < ins->attrs.ndims; i++) if (ins->attrs.dims[i] < nd) m |= 1u << ins->attrs.dims[i];
  return m;
}

/* -- Instructions ------------------------------------------------------------ */

static bool lower_inner_free(const Lower *L, const int64_t *coef)
{
  for (int k = L->nout; k < L->nv; k++) if (coef[k] && L->vs[k] > 1) return false;
  return true;
}

/* column mode: does an address (or map row) with these coefficients stay put along R? */
static bool lower_col_free(const Lower *L, const int64_t *coef)
{
  for (int k = L->ncv; k < L->nv; k++) if (coef[k] && L->vs[k] > 1) return false;
  return true;
}

static bool lower_map_row(const Lower *L, const LMap *m)
{
  for (int d = 0; d < m->nd; d++) if (!lower_inner_free(L, m->coef[d])) return false;
  return true;
}

/* When a row value can be read: after its passes. */
static int lower_after(const Lower *L, int v)
{
  if (v < 0) return 0;
  const LIns *x = &L->ins[v];
  if (x->seg < 0) return x->after;
  return x->c.kind == CG_RED && !L->col ? L->segno[x->seg] + 1 : -1;   /* column mode: per column */
}

/* Append (or find, CSE) an instruction. Operands a, b, c: -1 = none. Its
** level is element when any operand is an element value (or it is a load of
** element level / a RED), else row. */
static int lower_emit(Lower *L, CgIns ci, int elem)
{
  if (L->failed) return -1;
  int ops[3] = { ci.a, ci.b, ci.c }, after = 0;
  for (int i = 0; i < 3; i++) {
    if (ops[i] < 0) continue;
    int a = lower_after(L, ops[i]);
    if (a < 0) elem = 1; else if (a > after) after = a;
  }
  if (ci.kind == CG_RED) elem = 1;
  int td = 0, red = 0;              /* column mode: depends on t; reads the value of RED (record red - 1) */
  if (L->col) {
    if ((ci.kind == CG_LOAD || ci.kind == CG_STORE) && ci.acc >= 0) td = !lower_col_free(L, L->acc[ci.acc].a.coef);
    for (int i = 0; i < 3; i++) if (ops[i] >= 0) { td |= L->ins[ops[i]].td; if (!red) red = L->ins[ops[i]].red; }
    if (ci.kind == CG_RED && !red) { red = L->redref + 1; td = 0; }
    else if (red && (td || ci.kind == CG_RED)) return LW_FAIL(L, red - 1, JIT_LF_MAT);
  }
  int seg = elem ? L->cur : -1;
  ci.level = (int8_t)(elem ? 1 : 0);
  if (ci.kind != CG_RED && ci.kind != CG_STORE && ci.kind != CG_CSUM)
    for (int i = L->nins - 1; i >= 0; i--) {
      const LIns *x = &L->ins[i];
      if (x->seg == seg && x->c.kind == ci.kind && x->c.op == ci.op && x->c.dtype == ci.dtype &&
          x->c.a == ci.a && x->c.b == ci.b && x->c.c == ci.c && x->c.acc == ci.acc &&
          x->c.flags == ci.flags && memcmp(x->c.f, ci.f, sizeof ci.f) == 0) return i;
    }
  if (L->nins >= LW_MAXINS) return LW_FAIL(L, L->roots[L->nroots - 1], JIT_LF_NOMERGE);
  if (!(L->ins = lower_grow(L->ins, &L->icap, L->nins + 1, sizeof *L->ins))) return LW_FAIL(L, -1, JIT_LF_NONE);
  L->ins[L->nins] = (LIns){ ci, seg, elem ? 0 : after, td, red };
  return L->nins++;
}

static int lower_const(Lower *L, int dt, double v)
{
  return lower_emit(L, (CgIns){ .kind = CG_CONST, .dtype = (int8_t)dt, .a = -1, .b = -1, .c = -1, .f = { v, 0 } }, 0);
}

static int lower_dt(const Lower *L, int v) { return L->ins[v].c.dtype; }

static int lower_alu(Lower *L, int op, int dt, int a, int b, int c, int flags, double f0, double f1)
{
  if (a < 0 && L->failed) return -1;
  return lower_emit(L, (CgIns){ .kind = CG_ALU, .op = (int16_t)op, .dtype = (int8_t)dt, .a = a, .b = b, .c = c,
                                .flags = flags, .f = { f0, f1 } }, 0);
}

static int lower_cast(Lower *L, int v, int dt)
{
  if (v < 0) return -1;
  if (lower_dt(L, v) == dt) return v;
  if (L->ins[v].c.kind == CG_CONST) {      /* fold: the constant in the new type */
    double x = L->ins[v].c.f[0];
    if (dt == TD_BOOL) x = x != 0;
    else if (!rt_is_float(dt) && isfinite(x)) x = trunc(x);
    else if (dt == TD_FLOAT32) x = (float)x;
    return lower_const(L, dt, x);
  }
  if (L->ins[v].c.kind == CG_LOAD)          /* a load converts by itself */
    return lower_emit(L, (CgIns){ .kind = CG_LOAD, .dtype = (int8_t)dt, .a = -1, .b = -1, .c = -1,
                                  .acc = L->ins[v].c.acc }, L->ins[v].seg >= 0);
  return lower_alu(L, RT_OP_CAST, dt, v, -1, -1, 0, 0, 0);
}

static int lower_bin(Lower *L, int op, int dt, int a, int b)
{
  if (a < 0 || b < 0) return -1;
  return lower_alu(L, op, dt, lower_cast(L, a, dt), lower_cast(L, b, dt), -1, 0, 0, 0);
}

static int lower_un(Lower *L, int op, int dt, int a)
{
  if (a < 0) return -1;
  return lower_alu(L, op, dt, lower_cast(L, a, dt), -1, -1, 0, 0, 0);
}

/* -- Segments (passes) --------------------------------------------------------- */

static int lower_seg_open(Lower *L)
{
  if (!(L->segno = lower_grow(L->segno, &L->scap, L->nseg + 1, sizeof *L->segno))) return LW_FAIL(L, -1, JIT_LF_NONE);
  L->segno[L->nseg] = -1;
  int prev = L->cur;
  L->cur = L->nseg++;
  return prev;
}

static void lower_seg_close(Lower *L, int prev)
{
  if (!L->failed) {
    bool used = false;
    for (int i = L->nins - 1; i >= 0 && !used; i--) used = L->ins[i].seg == L->cur;
    if (used) L->segno[L->cur] = L->npass++;
  }
  L->cur = prev;
}

/* -- Maps, addresses, buffers -------------------------------------------------- */

static void lower_contig(const JitIns *r, int64_t *cs)
{
  int64_t s = 1;
  for (int d = r->ndim - 1; d >= 0; d--) { cs[d] = s; s *= r->sizes[d]; }
}

/* Address of view v at the map of the record it belongs to (v right-aligned
** with the map's dims; size-1 view dims broadcast). */
static void lower_view_addr(const JitView *v, const LMap *m, LAddr *a)
{
  memset(a, 0, sizeof *a);
  a->off = v->offset;
  for (int e = 0; e < v->ndim; e++) {
    int d = e + m->nd - v->ndim;
    if (d < 0 || v->sizes[e] == 1) continue;
    int64_t st = v->strides[e];
    a->off += st * m->base[d];
    for (int k = 0; k < LW_NV; k++) a->coef[k] += st * m->coef[d][k];
  }
}

/* The multi-index map of contiguous root r that address a enumerates, or -1
** when it is not affine in r's dims. */
static int lower_decompose(const Lower *L, const JitIns *r, const LAddr *a, LMap *m)
{
  int64_t cs[TD_MAX_DIMS];
  lower_contig(r, cs);
  memset(m, 0, sizeof *m);
  m->nd = r->ndim;
  if (rt_numel(r->ndim, r->sizes) == 0) return 0;   /* no element: read by no iteration (a size 0 never broadcasts) */
  int64_t rem = a->off;
  if (rem < 0) return -1;
  for (int d = 0; d < r->ndim; d++) { m->base[d] = rem / cs[d]; rem %= cs[d]; }
  if (r->ndim == 0 && a->off != 0) return -1;
  for (int k = 0; k < L->nv; k++) {
    int64_t c = a->coef[k];
    if (!c || L->vs[k] == 1) continue;
    int d = 0;
    for (; d < r->ndim; d++) if (r->sizes[d] > 1 && c % cs[d] == 0) break;
    if (d == r->ndim) return -1;
    m->coef[d][k] = c / cs[d];
  }
  for (int d = 0; d < r->ndim; d++) {
    int64_t lo = m->base[d], hi = m->base[d];
    for (int k = 0; k < L->nv; k++) {
      int64_t x = m->coef[d][k] * (L->vs[k] - 1);
      if (x < 0) lo += x; else hi += x;
    }
    if (lo < 0 || hi >= r->sizes[d]) return -1;
  }
  return 0;
}

static int lower_buf(Lower *L, JitRef root, int store)
{
  JitLowered *o = L->out;
  for (int i = 0; i < o->nbuf; i++)
    if (o->bufs[i] == root) { o->bstore[i] |= (uint8_t)store; return i; }
  if (o->nbuf >= CG_MAX_BUFS) return LW_FAIL(L, L->roots[L->nroots - 1], JIT_LF_NOMERGE);
  o->bufs[o->nbuf] = root; o->bstore[o->nbuf] = (uint8_t)store;
  return o->nbuf++;
}

static int lower_access(Lower *L, JitRef root, const LAddr *a, int store)
{
  if (lower_buf(L, root, store) < 0) return -1;
  for (int i = 0; i < L->nacc; i++)
    if (L->acc[i].root == root && memcmp(&L->acc[i].a, a, sizeof *a) == 0) return i;
  if (!(L->acc = lower_grow(L->acc, &L->acap, L->nacc + 1, sizeof *L->acc))) return LW_FAIL(L, -1, JIT_LF_NONE);
  L->acc[L->nacc] = (LAcc){ root, 0, *a };
  return L->nacc++;
}

static int lower_load(Lower *L, JitRef root, const LAddr *a)
{
  int acc = lower_access(L, root, a, 0);
  if (acc < 0) return -1;
  CgIns ci = { .kind = CG_LOAD, .dtype = (int8_t)L->t->ins[root].dtype, .a = -1, .b = -1, .c = -1, .acc = acc };
  return lower_emit(L, ci, !lower_inner_free(L, a->coef));
}

static int lower_scalar(Lower *L, JitRef ref)
{
  const JitIns *s = &L->t->ins[ref];
  if (!(s->flags & JIT_IF_DYN)) return lower_const(L, s->dtype, s->value);
  JitLowered *o = L->out;
  int i = 0;
  for (; i < o->nargs && o->args[i] != ref; i++) {}
  if (i == o->nargs) {
    if (o->nargs >= JIT_LOWER_MAXARGS) return LW_FAIL(L, L->roots[L->nroots - 1], JIT_LF_NOMERGE);
    o->args[o->nargs++] = ref;
  }
  return lower_emit(L, (CgIns){ .kind = CG_ARG, .dtype = (int8_t)s->dtype, .a = -1, .b = -1, .c = -1, .acc = i }, 0);
}

/* -- Values ------------------------------------------------------------------------ */

static int lower_value(Lower *L, JitRef ref, const LMap *m);

static bool lower_is_root(const Lower *L, JitRef ref)
{
  for (int i = 0; i < L->nroots; i++) if (L->roots[i] == ref) return true;
  return false;
}

/* Operand view v of a record whose multi-index is map m. */
static int lower_view(Lower *L, const JitView *v, const LMap *m)
{
  if (L->failed) return -1;
  const JitIns *x = &L->t->ins[v->root];
  int cls = L->c->cls[v->root];
  if (cls == JIT_SC_SCALAR) return lower_scalar(L, v->root);
  LAddr a;
  lower_view_addr(v, m, &a);
  if (cls == JIT_SC_INPUT || (L->c->mat[v->root] && !lower_is_root(L, v->root))) return lower_load(L, v->root, &a);
  LMap xm;
  if (lower_decompose(L, x, &a, &xm)) return LW_FAIL(L, v->root, JIT_LF_MAT);
  return lower_value(L, v->root, &xm);
}

static int lower_operand(Lower *L, const JitIns *r, int i, const LMap *m)
{
  return lower_view(L, jit_arg(L->t, r, i), m);
}

static int lower_ew(Lower *L, const JitIns *r, const LMap *m)
{
  int op = r->op, cd = r->cdtype, dt = r->dtype, v[3] = { -1, -1, -1 };
  if (op == JIT_OP_WRITE) return lower_cast(L, lower_operand(L, r, 1, m), dt);   /* m: dst space */
  for (int i = 0; i < r->nin && i < 3; i++) if ((v[i] = lower_operand(L, r, i, m)) < 0) return -1;
  switch (op) {
  case RT_OP_COPY: return lower_cast(L, v[0], dt);
  case RT_OP_CAST: return lower_cast(L, v[0], dt);
  case RT_OP_WHERE:
    return lower_alu(L, op, dt, lower_cast(L, v[0], TD_BOOL), lower_cast(L, v[1], dt), lower_cast(L, v[2], dt), 0, 0, 0);
  case RT_OP_LOGICAL_NOT: case RT_OP_LOGICAL_AND: case RT_OP_LOGICAL_OR:
    return lower_alu(L, op, TD_BOOL, lower_cast(L, v[0], TD_BOOL), r->nin > 1 ? lower_cast(L, v[1], TD_BOOL) : -1,
                     -1, 0, 0, 0);
  case RT_OP_FLOOR: case RT_OP_CEIL: case RT_OP_ROUND:
    if (!rt_is_float(cd)) return lower_cast(L, v[0], dt);
    break;
  }
  if (op >= RT_OP_EQ && op <= RT_OP_GE)
    return lower_alu(L, op, TD_BOOL, lower_cast(L, v[0], cd), lower_cast(L, v[1], cd), -1, 0, 0, 0);
  if (cd == TD_BOOL) {   /* bool arithmetic is logic, as eager */
    if (op == RT_OP_ADD || op == RT_OP_MAXIMUM) op = RT_OP_LOGICAL_OR;
    else if (op == RT_OP_MUL || op == RT_OP_MINIMUM) op = RT_OP_LOGICAL_AND;
  }
  int x = lower_alu(L, op, cd, lower_cast(L, v[0], cd), r->nin > 1 ? lower_cast(L, v[1], cd) : -1, -1,
                    r->attrs.flags, r->attrs.s[0], r->attrs.s[1]);
  return lower_cast(L, x, dt);
}

/* -- Reductions ---------------------------------------------------------------------- */

/* The number of elements reduction r folds into each output (mean's divisor). */
static double lower_red_count(const JitTrace *t, const JitIns *r)
{
  const JitView *v = jit_arg(t, r, 0);
  uint32_t mask = jit_red_mask(r, v->ndim);
  double n = 1;
  for (int d = 0; d < v->ndim; d++) if (mask >> d & 1) n *= (double)v->sizes[d];
  return n;
}

/* The input-space map of reduction r whose output is at row map om: kept
** dims follow om, reduced dims (size > 1, in order) are the inner dims. */
static int lower_red_inmap(Lower *L, JitRef ref, const LMap *om, LMap *im)
{
  const JitIns *r = &L->t->ins[ref];
  const JitView *v = jit_arg(L->t, r, 0);
  uint32_t mask = jit_red_mask(r, v->ndim);
  memset(im, 0, sizeof *im);
  im->nd = v->ndim;
  int k = 0, vi = L->col ? L->ncv : L->nout;
  bool row = r->op == RT_OP_SOFTMAX || r->op == RT_OP_LOG_SOFTMAX;
  for (int d = 0; d < v->ndim; d++) {
    if (mask >> d & 1) {
      if (row || r->attrs.keepdim) k++;
      if (v->sizes[d] == 1) continue;
      if (vi >= L->nv || L->vs[vi] != v->sizes[d]) return LW_FAIL(L, ref, JIT_LF_MAT);
      im->coef[d][vi++] = 1;
      continue;
    }
    int od = k++;
    im->base[d] = om->base[od];
    memcpy(im->coef[d], om->coef[od], sizeof im->coef[d]);
  }
  for (; vi < L->nv; vi++) if (L->vs[vi] > 1) return LW_FAIL(L, ref, JIT_LF_MAT);
  return 0;
}

/* One pass: RED(op, acc dtype) of f(x) where x = r's input at im. f: 0 id,
** 1 square, 2 |x|, 3 |x|^p, 4 x != 0, 5 exp(x - c), 6 (x - c)^2. */
/* For a sum of r's input (view *v at map *m): peel factors that are constant
** along the reduction, sum(c * y) = c * sum(y), sum(-y) = -sum(y), on inlined
** products. Sets *v and *m to y's view and map and returns the row value c
** (or -1: none), *neg for a negation. The pass then reads fewer values and
** may run earlier: layer_norm backward's sum(g w rstd) joins the mean's pass
** (4 passes -> 3). */
static int lower_sum_factor(Lower *L, const JitView **v, LMap *m, bool *neg)
{
  const JitTrace *t = L->t;
  int fac = -1;
  *neg = false;
  for (;;) {
    JitRef q = (*v)->root;
    const JitIns *qi = &t->ins[q];
    if (L->c->cls[q] != JIT_SC_EW || (L->c->mat[q] && !lower_is_root(L, q)) || qi->dtype != qi->cdtype ||
        !rt_is_float(qi->dtype) || (qi->op != RT_OP_MUL && qi->op != RT_OP_NEG))
      return fac;
    LAddr a;
    LMap qm;
    lower_view_addr(*v, m, &a);
    if (lower_decompose(L, qi, &a, &qm)) return fac;
    if (qi->op == RT_OP_NEG) { *neg = !*neg; *v = jit_arg(t, qi, 0); *m = qm; continue; }
    bool row[2];
    for (int k = 0; k < 2; k++) {
      const JitView *o = jit_arg(t, qi, k);
      lower_view_addr(o, &qm, &a);
      row[k] = L->c->cls[o->root] == JIT_SC_SCALAR || lower_inner_free(L, a.coef);
    }
    if (row[0] == row[1]) return fac;
    int k = row[0] ? 0 : 1;
    int c = lower_cast(L, lower_view(L, jit_arg(t, qi, k), &qm), qi->cdtype);
    if (c < 0) return fac;
    fac = fac < 0 ? c : lower_bin(L, RT_OP_MUL, qi->cdtype, fac, c);
    *v = jit_arg(t, qi, 1 - k); *m = qm;
  }
}

static int lower_pass(Lower *L, const JitIns *r, const LMap *im, int op, int adt, int f, int c, double p)
{
  int prev = lower_seg_open(L);
  if (L->failed) return -1;
  const JitView *v = jit_arg(L->t, r, 0);
  LMap vm = *im;
  bool neg = false;
  int fac = op == RT_OP_SUM && f == 0 ? lower_sum_factor(L, &v, &vm, &neg) : -1;
  int x = lower_view(L, v, &vm), y = -1;
  bool native = op == RT_OP_MAX || op == RT_OP_MIN;
  int xdt = native && f == 0 ? (x >= 0 ? lower_dt(L, x) : 0) : rt_is_float(r->cdtype) ? r->cdtype : TD_INT64;
  x = lower_cast(L, x, xdt);
  switch (f) {
  case 0: y = x; break;
  case 1: y = lower_bin(L, RT_OP_MUL, adt, x, x); break;
  case 2: y = lower_un(L, RT_OP_ABS, adt, x); break;
  case 3: y = lower_bin(L, RT_OP_POW, adt, lower_un(L, RT_OP_ABS, adt, x), lower_const(L, adt, p)); break;
  case 4: y = lower_alu(L, RT_OP_NE, TD_BOOL, x, lower_const(L, xdt, 0), -1, 0, 0, 0); break;
  case 5: y = lower_un(L, RT_OP_EXP, xdt, lower_bin(L, RT_OP_SUB, xdt, x, c)); break;
  case 6: { int d = lower_bin(L, RT_OP_SUB, adt, x, c); y = lower_bin(L, RT_OP_MUL, adt, d, d); break; }
  }
  int red = y < 0 ? -1 : lower_emit(L, (CgIns){ .kind = CG_RED, .op = (int16_t)op, .dtype = (int8_t)adt,
                                                .a = lower_cast(L, y, adt), .b = -1, .c = -1 }, 1);
  lower_seg_close(L, prev);
  if (red >= 0 && fac >= 0) red = lower_bin(L, RT_OP_MUL, adt, red, lower_cast(L, fac, adt));
  if (red >= 0 && neg) red = lower_un(L, RT_OP_NEG, adt, red);
  return red;
}

static int lower_red_col(Lower *L, JitRef ref, const LMap *om);

static int lower_red(Lower *L, JitRef ref, const LMap *om)
{
  const JitIns *r = &L->t->ins[ref];
  if (L->col) return lower_red_col(L, ref, om);
  if (!lower_map_row(L, om)) return LW_FAIL(L, ref, JIT_LF_MAT);
  LMap im;
  if (lower_red_inmap(L, ref, om, &im)) return -1;
  double n = lower_red_count(L->t, r);
  int cd = r->cdtype, dt = r->dtype, fdt = rt_is_float(cd);
  /* passes compute in the float compute type (vector passes; the code
  ** generator picks the accumulation), row statements finish in double */
  int adt = fdt ? cd : TD_INT64, s, res;
  L->out->nred++;
  switch (r->op) {
  case RT_OP_SUM: case RT_OP_PROD:
    res = lower_pass(L, r, &im, r->op, adt, 0, -1, 0);
    break;
  case RT_OP_MAX: case RT_OP_MIN:
    res = lower_pass(L, r, &im, r->op, dt, 0, -1, 0);
    break;
  case RT_OP_MEAN:
    s = lower_pass(L, r, &im, RT_OP_SUM, adt, 0, -1, 0);
    res = lower_bin(L, RT_OP_DIV, TD_FLOAT64, s, lower_const(L, TD_FLOAT64, n));
    break;
  case RT_OP_VAR: case RT_OP_STD: {
    /* mean = sum x / n; var = sum (x - mean)^2 / max(n - correction, 0) */
    s = lower_pass(L, r, &im, RT_OP_SUM, adt, 0, -1, 0);
    int mean = lower_cast(L, lower_bin(L, RT_OP_DIV, TD_FLOAT64, s, lower_const(L, TD_FLOAT64, n)), adt);
    int q = lower_pass(L, r, &im, RT_OP_SUM, adt, 6, mean, 0);
    double dof = n - r->attrs.s[0] > 0 ? n - r->attrs.s[0] : 0;
    res = lower_bin(L, RT_OP_DIV, TD_FLOAT64, q, lower_const(L, TD_FLOAT64, dof));
    if (r->op == RT_OP_STD) res = lower_un(L, RT_OP_SQRT, TD_FLOAT64, res);
    break;
  }
  case RT_OP_LOGSUMEXP: {
    /* c = max x (0 when infinite); lse = log(sum exp(x - c)) + c */
    int m = lower_pass(L, r, &im, RT_OP_MAX, cd, 0, -1, 0);
    int inf = lower_alu(L, RT_OP_EQ, TD_BOOL, lower_un(L, RT_OP_ABS, cd, m), lower_const(L, cd, INFINITY), -1, 0, 0, 0);
    int c = lower_alu(L, RT_OP_WHERE, cd, inf, lower_const(L, cd, 0), m, 0, 0, 0);
    s = lower_pass(L, r, &im, RT_OP_SUM, adt, 5, c, 0);
    res = lower_bin(L, RT_OP_ADD, TD_FLOAT64, lower_un(L, RT_OP_LOG, TD_FLOAT64, s), lower_cast(L, c, TD_FLOAT64));
    break;
  }
  case RT_OP_NORM: {
    double p = r->attrs.s[0];
    if (p == 2) res = lower_un(L, RT_OP_SQRT, TD_FLOAT64, lower_pass(L, r, &im, RT_OP_SUM, adt, 1, -1, 0));
    else if (p == 1) res = lower_pass(L, r, &im, RT_OP_SUM, adt, 2, -1, 0);
    else if (p == INFINITY) res = lower_pass(L, r, &im, RT_OP_MAX, adt, 2, -1, 0);
    else if (p == -INFINITY) res = lower_pass(L, r, &im, RT_OP_MIN, adt, 2, -1, 0);
    else if (p == 0) res = lower_pass(L, r, &im, RT_OP_SUM, adt, 4, -1, 0);
    else res = lower_bin(L, RT_OP_POW, TD_FLOAT64, lower_pass(L, r, &im, RT_OP_SUM, adt, 3, -1, p),
                         lower_const(L, TD_FLOAT64, 1.0 / p));
    break;
  }
  default:
    return LW_FAIL(L, ref, JIT_LF_EAGER);
  }
  return lower_cast(L, res, dt);
}

/* Is softmax ref at map m the value the root store of this segment writes? */
static bool lower_row_is_root(const Lower *L, JitRef ref, const LMap *m)
{
  return ref == L->root && L->cur == L->rseg && memcmp(m, &L->rmap, sizeof *m) == 0;
}

/* softmax's sum pass when its value is stored (lower_rowop): also stores
** e = exp(x - m) into the output row, so that the last pass computes e * (1/s)
** from the row, in cache, instead of a second exp. As lower_pass(SUM, f = 5). */
static int lower_expsum_store(Lower *L, const JitIns *r, const LMap *m, int mx)
{
  int prev = lower_seg_open(L);
  if (L->failed) return -1;
  int dt = r->dtype, xdt = r->cdtype;
  int e = lower_un(L, RT_OP_EXP, xdt, lower_bin(L, RT_OP_SUB, xdt, lower_cast(L, lower_operand(L, r, 0, m), xdt), mx));
  int acc = lower_access(L, L->root, &L->raddr, 1), red = -1;
  if (e >= 0 && acc >= 0) {
    lower_emit(L, (CgIns){ .kind = CG_STORE, .dtype = (int8_t)dt, .a = lower_cast(L, e, dt), .b = -1, .c = -1, .acc = acc }, 1);
    red = lower_emit(L, (CgIns){ .kind = CG_RED, .op = RT_OP_SUM, .dtype = (int8_t)dt, .a = lower_cast(L, e, dt),
                                 .b = -1, .c = -1 }, 1);
  }
  lower_seg_close(L, prev);
  return red;
}

/* softmax / log_softmax element at map m (its dim must run along the inner dim):
**   m = max x;  s = sum exp(x - m) (double);
**   softmax: exp(x - m) * (T)(1/s);  log_softmax: x - (T)(m + log s)
** A stored softmax whose row fits in cache keeps e in its output (memo seg -3):
** the same values, one exp per element instead of two or three. Every segment
** that reads softmax values at the stored row reads e back: it runs after the
** exp-sum pass (it needs s) and no later than the store segment (closed last),
** which reads e before it overwrites it with e * (1/s). */
static int lower_rowop(Lower *L, JitRef ref, const LMap *m)
{
  const JitIns *r = &L->t->ins[ref];
  int k = (int)r->attrs.i[0], dt = r->dtype, vi = -1;
  for (int i = L->nout; i < L->nv; i++) if (L->vs[i] > 1) { if (vi >= 0) return LW_FAIL(L, ref, JIT_LF_MAT); vi = i; }
  for (int d = 0; d < m->nd; d++) {
    if (d == k) {
      if (r->sizes[k] == 1) continue;
      if (vi < 0 || m->base[d] != 0 || L->vs[vi] != r->sizes[k] || m->coef[d][vi] != 1) return LW_FAIL(L, ref, JIT_LF_MAT);
      for (int j = 0; j < L->nv; j++) if (j != vi && m->coef[d][j]) return LW_FAIL(L, ref, JIT_LF_MAT);
    } else if (!lower_inner_free(L, m->coef[d])) return LW_FAIL(L, ref, JIT_LF_MAT);
  }
  LMap om = *m;                     /* the row: dim k dropped to 0 */
  om.base[k] = 0;
  memset(om.coef[k], 0, sizeof om.coef[k]);
  int mx = -1, s = -1, kept = 0;
  for (int i = 0; i < L->nmemo; i++)
    if (L->memo[i].ref == ref && (L->memo[i].seg == -2 || L->memo[i].seg == -3) &&
        memcmp(&L->memo[i].map, &om, sizeof om) == 0) {
      mx = L->memo[i].val; s = L->memo[i].pad; kept = L->memo[i].seg == -3;
    }
  if (mx < 0) {
    L->out->nred++;
    kept = r->op == RT_OP_SOFTMAX && vi >= 0 && r->sizes[k] > 1 && r->sizes[k] * rt_dtype_size(dt) <= LW_ROWCACHE &&
           lower_row_is_root(L, ref, m);
    mx = lower_pass(L, r, m, RT_OP_MAX, dt, 0, -1, 0);
    s = kept ? lower_expsum_store(L, r, m, mx) : lower_pass(L, r, m, RT_OP_SUM, dt, 5, mx, 0);
    if (s < 0) return -1;
    if (!(L->memo = lower_grow(L->memo, &L->mcap, L->nmemo + 1, sizeof *L->memo))) return LW_FAIL(L, -1, JIT_LF_NONE);
    L->memo[L->nmemo++] = (LMemo){ ref, kept ? -3 : -2, mx, s, om };
  }
  if (r->op == RT_OP_SOFTMAX) {
    int inv = lower_cast(L, lower_bin(L, RT_OP_DIV, TD_FLOAT64, lower_const(L, TD_FLOAT64, 1), s), dt);
    int e = kept && memcmp(m, &L->rmap, sizeof *m) == 0 ? lower_load(L, ref, &L->raddr)
          : lower_un(L, RT_OP_EXP, dt, lower_bin(L, RT_OP_SUB, dt, lower_cast(L, lower_operand(L, r, 0, m), dt), mx));
    return lower_bin(L, RT_OP_MUL, dt, e, inv);
  }
  int x = lower_cast(L, lower_operand(L, r, 0, m), dt);
  int lse = lower_bin(L, RT_OP_ADD, TD_FLOAT64, lower_cast(L, mx, TD_FLOAT64), lower_un(L, RT_OP_LOG, TD_FLOAT64, s));
  return lower_bin(L, RT_OP_SUB, dt, x, lower_cast(L, lse, dt));
}

static void lower_note(Lower *L, JitRef ref)
{
  JitLowered *o = L->out;
  for (int i = 0; i < o->ninl; i++) if (o->inl[i] == ref) return;
  JitRef *p = lower_grow(o->inl, &L->icapl, o->ninl + 1, sizeof *p);
  if (!p) { LW_FAIL(L, -1, JIT_LF_NONE); return; }
  o->inl = p;
  o->inl[o->ninl++] = ref;
}

/* Value of record ref at map m (memoized per segment and map). */
static int lower_value(Lower *L, JitRef ref, const LMap *m)
{
  if (L->failed) return -1;
  int seg = lower_map_row(L, m) ? -1 : L->cur;
  for (int i = L->nmemo - 1; i >= 0; i--) {
    const LMemo *e = &L->memo[i];
    if (e->ref == ref && (e->seg == seg || e->seg == -1) && memcmp(&e->map, m, sizeof *m) == 0) return e->val;
  }
  const JitIns *r = &L->t->ins[ref];
  int v;
  switch (L->c->cls[ref]) {
  case JIT_SC_SCALAR: v = lower_scalar(L, ref); break;
  case JIT_SC_EW: v = lower_ew(L, r, m); break;
  case JIT_SC_RED: v = lower_red(L, ref, m); break;
  case JIT_SC_ROW: v = L->col ? LW_FAIL(L, ref, JIT_LF_MAT) : lower_rowop(L, ref, m); break;
  default: return LW_FAIL(L, ref, JIT_LF_MAT);   /* eager results are buffers */
  }
  if (v < 0) return -1;
  lower_note(L, ref);
  if (!(L->memo = lower_grow(L->memo, &L->mcap, L->nmemo + 1, sizeof *L->memo))) return LW_FAIL(L, -1, JIT_LF_NONE);
  L->memo[L->nmemo++] = (LMemo){ ref, L->ins[v].seg < 0 ? -1 : seg, v, 0, *m };
  return v;
}

/* -- The anchor and the stored values -------------------------------------------------- */

/* The first reduction / row op that ref computes inline (DFS), or -1. */
static JitRef lower_find_red(const Lower *L, JitRef ref, uint8_t *seen)
{
  int cls = L->c->cls[ref];
  if (cls == JIT_SC_RED || cls == JIT_SC_ROW) return ref;
  if (cls != JIT_SC_EW || seen[ref]) return -1;
  seen[ref] = 1;
  const JitIns *r = &L->t->ins[ref];
  for (int i = r->op == JIT_OP_WRITE; i < r->nin; i++) {
    JitRef x = jit_arg(L->t, r, i)->root;
    if (L->c->mat[x] && !lower_is_root(L, x)) continue;
    JitRef f = lower_find_red(L, x, seen);
    if (f >= 0) return f;
  }
  return -1;
}

typedef struct LAnchor { int nd; int64_t sh[TD_MAX_DIMS]; int8_t vd[TD_MAX_DIMS]; uint32_t mask; JitRef red; } LAnchor;

#include "jit_lower_col.h"                /* column reductions: lower_col_anchor, lower_red_col, ... */

static int lower_anchor(Lower *L, LAnchor *an)
{
  const JitTrace *t = L->t;
  memset(an, 0, sizeof *an);
  an->red = -1;
  uint8_t *seen = calloc((size_t)t->nins, 1);
  if (!seen) return LW_FAIL(L, -1, JIT_LF_NONE);
  for (int i = 0; i < L->nroots && an->red < 0; i++) an->red = lower_find_red(L, L->roots[i], seen);
  free(seen);
  const JitIns *a = &t->ins[an->red >= 0 ? an->red : L->roots[0]];
  if (an->red >= 0) {
    const JitView *v = jit_arg(t, a, 0);
    an->nd = v->ndim;
    memcpy(an->sh, v->sizes, sizeof an->sh);
    an->mask = jit_red_mask(a, v->ndim);
  } else if (a->op == JIT_OP_WRITE) {       /* a whole-root write iterates its destination */
    const JitView *d = &t->views[a->dst];
    an->nd = d->ndim;
    memcpy(an->sh, d->sizes, sizeof an->sh);
  } else {
    an->nd = a->ndim;
    memcpy(an->sh, a->sizes, sizeof an->sh);
  }
  int n = 0;
  for (int d = 0; d < an->nd; d++) an->vd[d] = -1;
  if (an->red >= 0 && !L->nocol && jit_red_col(t, a)) { lower_col_anchor(L, an); return 0; }
  for (int pass = 0; pass < 2; pass++)       /* kept dims (outer), then reduced dims (inner) */
    for (int d = 0; d < an->nd; d++) {
      if (an->sh[d] == 1 || (int)(an->mask >> d & 1) != pass) continue;
      an->vd[d] = (int8_t)n; L->vs[n++] = an->sh[d];
      if (pass == 0) L->nout = n;
    }
  L->nv = n;
  if (an->red < 0) {                       /* pointwise: the last dim is the inner dim */
    if (n > 0) L->nout = n - 1; else { L->vs[0] = 1; L->nv = 1; L->nout = 0; }
  } else if (L->nv == L->nout) { L->vs[L->nv++] = 1; }
  return 0;
}

/* The map of a stored root in the anchor: same shape as the anchor space, or
** its reduction's output shape (a row value), or the same squeezed sizes. */
static int lower_root_map(Lower *L, const LAnchor *an, const JitIns *r0, LMap *m)
{
  JitIns rw;                               /* a write: its destination's shape */
  const JitIns *r = r0;
  if (r0->op == JIT_OP_WRITE) {
    const JitView *d = &L->t->views[r0->dst];
    rw = *r0; rw.ndim = d->ndim;
    memcpy(rw.sizes, d->sizes, sizeof rw.sizes);
    r = &rw;
  }
  memset(m, 0, sizeof *m);
  m->nd = r->ndim;
  if (r->ndim == an->nd && memcmp(r->sizes, an->sh, sizeof(int64_t) * r->ndim) == 0) {
    for (int d = 0; d < r->ndim; d++) if (an->vd[d] >= 0) m->coef[d][(int)an->vd[d]] = 1;
    return 0;
  }
  if (an->red >= 0) {                      /* row shape: keepdim or not */
    const JitIns *red = &L->t->ins[an->red];
    if (red->ndim == r->ndim && memcmp(red->sizes, r->sizes, sizeof(int64_t) * r->ndim) == 0 &&
        red->op != RT_OP_SOFTMAX && red->op != RT_OP_LOG_SOFTMAX) {
      int k = 0;
      for (int d = 0; d < an->nd; d++) {
        if (an->mask >> d & 1) { if (red->attrs.keepdim) k++; continue; }
        if (an->vd[d] >= 0) m->coef[k][(int)an->vd[d]] = 1;
        k++;
      }
      return 0;
    }
  }
  /* squeezed: the kept dims (the outer ones; column mode: A and C) */
  int k = 0, nz = 0, no = 0, nk = L->col ? L->ncv : L->nout;
  for (int d = 0; d < r->ndim; d++) nz += r->sizes[d] != 1;
  for (int j = 0; j < nk; j++) no += L->vs[j] != 1;
  if (an->red >= 0 && nz == no && nz > 0) {
    for (int d = 0; d < r->ndim && k >= 0; d++) {
      if (r->sizes[d] == 1) continue;
      while (k < nk && L->vs[k] == 1) k++;
      if (k >= nk || L->vs[k] != r->sizes[d]) { k = -1; break; }
      m->coef[d][k++] = 1;
    }
    if (k >= 0) return 0;
    memset(m->coef, 0, sizeof m->coef);
    k = 0;
  }
  /* squeezed, in the anchor's dim order (column mode: not the virtual order) */
  int ord[LW_NV], nord = 0;
  if (L->col) { for (int d = 0; d < an->nd; d++) if (an->vd[d] >= 0) ord[nord++] = an->vd[d]; }
  else for (; nord < L->nv; nord++) ord[nord] = nord;
  for (int d = 0; d < r->ndim; d++) {
    if (r->sizes[d] == 1) continue;
    while (k < nord && L->vs[ord[k]] == 1) k++;
    if (k >= nord || L->vs[ord[k]] != r->sizes[d]) return -1;
    m->coef[d][ord[k++]] = 1;
  }
  for (; k < nord; k++) if (L->vs[ord[k]] != 1) return -1;
  return 0;
}

/* A stored sum whose input is the anchor's space, reduced over exactly its
** row dims (layer_norm's dweight and dbias beside its mean and variance):
** its column partials accumulate in this row kernel's store pass (CG_CSUM,
** cg.h). Returns 0 when root ref is not one (the caller maps it as a value),
** else 1 (lowered, or L->failed). */
static int lower_csum(Lower *L, const LAnchor *an, JitRef ref)
{
  const JitTrace *t = L->t;
  const JitIns *r = &t->ins[ref];
  if (L->col || an->red < 0 || L->c->cls[ref] != JIT_SC_RED || r->op != RT_OP_SUM || !rt_is_float(r->cdtype) ||
      !rt_is_float(r->dtype) || L->nout < 1)
    return 0;
  const JitView *v = jit_arg(t, r, 0);
  if (v->ndim != an->nd || memcmp(v->sizes, an->sh, sizeof(int64_t) * (size_t)an->nd) != 0) return 0;
  uint32_t mask = jit_red_mask(r, v->ndim);
  int64_t cs[TD_MAX_DIMS];
  lower_contig(r, cs);
  LMap im;
  LAddr a;
  memset(&im, 0, sizeof im); memset(&a, 0, sizeof a);
  im.nd = v->ndim;
  int k = 0, nred = 0;
  for (int d = 0; d < v->ndim; d++) {
    bool red = mask >> d & 1;
    int od = !red || r->attrs.keepdim ? k++ : -1;
    if (an->sh[d] == 1) continue;
    int vd = an->vd[d];
    if (vd < 0 || red != (vd < L->nout)) return 0;   /* rows summed, columns kept */
    im.coef[d][vd] = 1;
    if (red) nred++; else a.coef[vd] += cs[od];
  }
  if (k != r->ndim || nred == 0) return 0;
  int x = lower_cast(L, lower_operand(L, r, 0, &im), r->cdtype);
  int acc = x < 0 ? -1 : lower_access(L, ref, &a, 1);
  if (acc < 0) return 1;
  lower_emit(L, (CgIns){ .kind = CG_CSUM, .op = RT_OP_SUM, .dtype = (int8_t)r->cdtype, .a = x, .b = -1, .c = -1, .acc = acc }, 1);
  L->out->nred++;
  lower_note(L, ref);
  return 1;
}

/* -- Finishing: coalesce dims, order instructions, build the CgKernel ---------------------- */

static bool lower_can_merge(const Lower *L, int a, int b)
{
  for (int i = 0; i < L->nacc; i++) if (L->acc[i].a.coef[a] != L->acc[i].a.coef[b] * L->vs[b]) return false;
  return true;
}

static void lower_merge_dim(Lower *L, int a, int b)   /* a (outer) into b = a + 1 */
{
  L->vs[b] *= L->vs[a];
  for (int k = a; k + 1 < L->nv; k++) L->vs[k] = L->vs[k + 1];
  for (int i = 0; i < L->nacc; i++) {
    int64_t *c = L->acc[i].a.coef;
    for (int k = a; k + 1 < L->nv; k++) c[k] = c[k + 1];
    c[L->nv - 1] = 0;
  }
  L->nv--;
  if (a < L->nout) L->nout--;
  if (L->col && a < L->ncv) L->ncv--;
}

/* Renumber the passes: each pass segment runs in the earliest pass after the
** reductions its row inputs read, so independent reductions over the same
** rows share one loop (sum and max of logsumexp's neighbours, ...). A
** segment's RED is its last instruction (lower_pass), so its number is known
** before any row statement reads it. */
static int lower_merge_passes(Lower *L)
{
  int ns = L->nseg > 0 ? L->nseg : 1;
  int *need = calloc((size_t)ns, sizeof *need), *newno = malloc(sizeof(int) * (size_t)ns);
  int *aft = calloc((size_t)(L->nins ? L->nins : 1), sizeof *aft);
  if (!need || !newno || !aft) { free(need); free(newno); free(aft); return LW_FAIL(L, -1, JIT_LF_NONE); }
  for (int s = 0; s < ns; s++) newno[s] = -1;
  for (int i = 0; i < L->nins; i++) {
    LIns *x = &L->ins[i];
    int ops[3] = { x->c.a, x->c.b, x->c.c }, a = 0;
    for (int j = 0; j < 3; j++) {
      int o = ops[j];
      if (o < 0) continue;
      const LIns *y = &L->ins[o];
      int oa = y->seg < 0 ? aft[o] : y->c.kind == CG_RED && y->seg != x->seg ? newno[y->seg] + 1 : 0;
      if (oa > a) a = oa;
    }
    if (x->seg < 0) { aft[i] = x->after = a; continue; }
    if (a > need[x->seg]) need[x->seg] = a;
    if (x->c.kind == CG_RED) newno[x->seg] = need[x->seg];
  }
  L->npass = 0;
  for (int s = 0; s < L->nseg; s++) {
    if (L->segno[s] < 0) continue;
    L->segno[s] = newno[s] >= 0 ? newno[s] : need[s];
    if (L->segno[s] + 1 > L->npass) L->npass = L->segno[s] + 1;
  }
  for (int i = 0; i < L->nins; i++)   /* no row statement after the last pass reads nothing new */
    if (L->ins[i].seg < 0 && L->ins[i].after > L->npass) L->ins[i].after = L->npass;
  free(need); free(newno); free(aft);
  return 0;
}

/* Coalesce the virtual dims into outer dims and one inner dim. */
static int lower_dims(Lower *L, JitRef anchor_red)
{
  /* drop size-1 dims (no access reads them), then merge inner dims right to left */
  for (int k = L->nv - 1; k >= 0 && L->nv > 1; k--)
    if (L->vs[k] == 1 && (k < L->nout || L->nv - L->nout > 1)) {
      for (int i = 0; i < L->nacc; i++) {
        int64_t *c = L->acc[i].a.coef;
        for (int j = k; j + 1 < L->nv; j++) c[j] = c[j + 1];
        c[L->nv - 1] = 0;
      }
      for (int j = k; j + 1 < L->nv; j++) L->vs[j] = L->vs[j + 1];
      L->nv--;
      if (k < L->nout) L->nout--;
    }
  for (int k = L->nv - 2; k >= L->nout; k--)
    if (lower_can_merge(L, k, k + 1)) lower_merge_dim(L, k, k + 1);
  if (L->nv - L->nout > 1) return LW_FAIL(L, anchor_red, lower_is_root(L, anchor_red) ? JIT_LF_EAGER : JIT_LF_MAT);
  for (int k = L->nout - 2; k >= 0; k--)
    if (lower_can_merge(L, k, k + 1)) lower_merge_dim(L, k, k + 1);
  bool pointwise = L->out->nred == 0 && L->npass <= 1;
  if (pointwise && L->nout > 0 && L->npass == 1 && lower_can_merge(L, L->nout - 1, L->nout))
    lower_merge_dim(L, L->nout - 1, L->nout);
  return 0;
}

static int lower_finish(Lower *L, JitRef anchor_red)
{
  if (lower_merge_passes(L)) return -1;
  if (L->col ? lower_col_dims(L, anchor_red) : lower_dims(L, anchor_red)) return -1;
  bool pointwise = L->out->nred == 0 && L->npass <= 1;
  CgKernel *k = calloc(1, sizeof *k);
  if (!k) return LW_FAIL(L, -1, JIT_LF_NONE);
  L->out->k = k;
  int64_t inner = L->vs[L->nv - 1];
  bool flat = pointwise && L->nout == 0 && L->npass == 1;
  k->nouter = flat ? 0 : L->nout;
  for (int d = 0; d < L->nout; d++) k->osize[d] = L->vs[d];
  k->inner = flat ? (inner > 0 ? LW_FLAT_INNER : 1) : (L->npass ? inner : 1);   /* flat: not from the run-time size */
  k->flat = flat ? inner : 0;
  /* a kernel none of whose results has an element runs no row: with a size-0
  ** dim merged away, a [0,40] or [3,0] result would run rows of one element */
  bool empty = true;
  for (int i = 0; i < L->nroots && empty; i++)
    empty = rt_numel(L->t->ins[L->roots[i]].ndim, L->t->ins[L->roots[i]].sizes) == 0;
  if (empty) {
    if (!k->nouter) { k->nouter = 1; k->flat = 0; k->inner = 1; }
    k->osize[0] = 0;
  }
  k->nbuf = L->out->nbuf;
  for (int i = 0; i < k->nbuf; i++) k->buf_dtype[i] = (int8_t)L->t->ins[L->out->bufs[i]].dtype;
  k->nargs = L->out->nargs;
  k->nacc = L->nacc;
  k->acc = calloc((size_t)(L->nacc ? L->nacc : 1), sizeof *k->acc);
  int *newi = malloc(sizeof(int) * (size_t)(L->nins ? L->nins : 1));
  k->ins = calloc((size_t)(L->nins + 2 * L->npass + 1), sizeof *k->ins);
  if (!k->acc || !k->ins || !newi) { free(newi); return LW_FAIL(L, -1, JIT_LF_NONE); }
  for (int i = 0; i < L->nacc; i++) {
    CgAccess *a = &k->acc[i];
    a->buf = lower_buf(L, L->acc[i].root, 0);
    a->offset = L->acc[i].a.off;
    for (int d = 0; d < L->nout; d++) a->ostride[d] = L->acc[i].a.coef[d];
    a->istride = L->acc[i].a.coef[L->nv - 1];
    if (!L->npass && !flat) a->istride = 0;
  }
  int n = 0;
  for (int s = 0; s <= L->npass; s++) {
    for (int i = 0; i < L->nins; i++)
      if (L->ins[i].seg < 0 && L->ins[i].after == s) { newi[i] = n; k->ins[n++] = L->ins[i].c; }
    if (s == L->npass) break;
    k->ins[n++] = (CgIns){ .kind = CG_PASS, .pass = (int16_t)s, .a = -1, .b = -1, .c = -1 };
    for (int i = 0; i < L->nins; i++)
      if (L->ins[i].seg >= 0 && L->segno[L->ins[i].seg] == s) {
        newi[i] = n; k->ins[n] = L->ins[i].c; k->ins[n++].pass = (int16_t)s;
      }
    k->ins[n++] = (CgIns){ .kind = CG_ENDPASS, .pass = (int16_t)s, .a = -1, .b = -1, .c = -1 };
  }
  for (int i = 0; i < n; i++) {
    CgIns *c = &k->ins[i];
    if (c->kind == CG_PASS || c->kind == CG_ENDPASS) continue;
    if (c->a >= 0) c->a = newi[c->a];
    if (c->b >= 0) c->b = newi[c->b];
    if (c->c >= 0) c->c = newi[c->c];
  }
  k->nins = n;
  free(newi);
  if (L->col) return lower_col_kernel(L, k);
  for (int i = 0; i < k->nins; i++) {      /* a scratch buffer of partials per column sum, in order */
    CgIns *in = &k->ins[i];
    if (in->kind != CG_CSUM) continue;
    if (k->nscratch >= CG_MAX_SCRATCH || k->nbuf >= CG_MAX_BUFS || in->level != 1)
      return LW_FAIL(L, L->roots[L->nroots - 1], L->nroots > 1 ? JIT_LF_NOMERGE : JIT_LF_EAGER);
    k->buf_dtype[k->nbuf++] = in->dtype;
    k->nscratch++;
  }
  return 0;
}

/* The executor may give a write the buffer of its old version (in place):
** then every load of that storage (any version) in the kernel must read the
** element being stored, in a one-pass kernel. */
static void lower_check_writes(Lower *L)
{
  const JitTrace *t = L->t;
  for (int i = 0; i < L->nacc; i++) {
    JitRef w = L->acc[i].root;
    if (t->ins[w].op != JIT_OP_WRITE) continue;
    bool st = false;
    for (int j = 0; j < L->nins && !st; j++) st = L->ins[j].c.kind == CG_STORE && L->ins[j].c.acc == i;
    if (!st) continue;
    for (int j = 0; j < L->nacc; j++) {
      JitRef x = L->acc[j].root;
      bool fam = false;
      for (JitRef y = w; !fam; ) {
        fam = y == x;
        if (t->ins[y].op != JIT_OP_WRITE) break;
        y = jit_arg(t, &t->ins[y], 0)->root;
      }
      if (!fam || x == w) continue;
      if (L->nseg > 2 || memcmp(&L->acc[j].a, &L->acc[i].a, sizeof(LAddr)) != 0) {
        LW_FAIL(L, L->nroots > 1 ? L->roots[L->nroots - 1] : w, L->nroots > 1 ? JIT_LF_NOMERGE : JIT_LF_EAGER);
        return;
      }
    }
  }
}

/* -- Entry -------------------------------------------------------------------------------- */

static void lower_hint(const Lower *L)
{
  JitLowered *o = L->out;
  char *h = o->hint;
  size_t cap = sizeof o->hint, len = 0;
  int nops = 0;
  h[0] = 0;
  for (int i = 0; i < o->ninl; i++) {
    int op = L->t->ins[o->inl[i]].op;
    if (op == RT_OP_COPY || op == RT_OP_CAST) continue;
    const char *nm = jit_op_name(op);
    bool dup = false;
    for (int j = 0; j < i && !dup; j++) dup = L->t->ins[o->inl[j]].op == op;
    if (dup) continue;
    if (len + strlen(nm) + 8 >= cap) break;
    len += (size_t)snprintf(h + len, cap - len, "%s%s", len ? "_" : "", nm);
    nops++;
  }
  if (nops > 1 && len + 7 < cap) {
    memmove(h + 6, h, len + 1);
    memcpy(h, "fused_", 6);
  }
  if (!h[0]) snprintf(h, cap, "copy");
}

static int lower_cmp_ref(const void *a, const void *b) { return *(const JitRef *)a - *(const JitRef *)b; }

static int lower_group(const JitSchedCtx *c, const JitRef *roots, int n, JitLowered *out, bool nocol)
{
  memset(out, 0, sizeof *out);
  out->fail_ref = -1;
  Lower L = { .c = c, .t = c->t, .roots = roots, .nroots = n, .out = out, .cur = -1, .root = -1, .nocol = nocol };
  LAnchor an;
  int rc = -1;
  if (lower_anchor(&L, &an)) goto done;
  int prev = lower_seg_open(&L);           /* the final pass: element-level stores */
  L.rseg = L.cur;
  for (int i = 0; i < n && !L.failed; i++) {
    const JitIns *r = &c->t->ins[roots[i]];
    LMap m;
    if (i > 0 && lower_csum(&L, &an, roots[i])) continue;
    if (lower_root_map(&L, &an, r, &m)) {
      LW_FAIL(&L, i ? roots[i] : an.red, i ? JIT_LF_NOMERGE : JIT_LF_MAT);
      break;
    }
    int64_t cs[TD_MAX_DIMS];
    lower_contig(r, cs);
    LAddr a;
    memset(&a, 0, sizeof a);
    if (r->op == JIT_OP_WRITE) lower_view_addr(&c->t->views[r->dst], &m, &a);
    else for (int d = 0; d < r->ndim; d++) {
      a.off += cs[d] * m.base[d];
      for (int k = 0; k < LW_NV; k++) a.coef[k] += cs[d] * m.coef[d][k];
    }
    L.root = roots[i]; L.rmap = m; L.raddr = a;   /* lower_rowop may store into it early */
    int v = lower_value(&L, roots[i], &m);
    if (v < 0) break;
    int acc = lower_access(&L, roots[i], &a, 1);
    if (acc < 0) break;
    lower_emit(&L, (CgIns){ .kind = CG_STORE, .dtype = (int8_t)r->dtype, .a = v, .b = -1, .c = -1, .acc = acc },
               !lower_inner_free(&L, a.coef));
  }
  lower_seg_close(&L, prev);
  if (!L.failed) lower_check_writes(&L);
  if (L.failed || lower_finish(&L, an.red)) goto done;
  qsort(out->inl, (size_t)out->ninl, sizeof *out->inl, lower_cmp_ref);
  lower_hint(&L);
  rc = 0;
done:
  free(L.ins); free(L.acc); free(L.memo); free(L.segno);
  if (rc) {
    if (out->k) { free(out->k->acc); free(out->k->ins); free(out->k); out->k = NULL; }
    if (out->fail_action == JIT_LF_NONE) rc = TD_ERR_NOMEM;
    else if (L.colretry) rc = 1;
  }
  return rc;
}

/* A column-mode lowering whose columns are not one unit-stride dim is done
** again in row mode (each output a row of the kernel, as before columns). */
int jit_lower_group(const JitSchedCtx *c, const JitRef *roots, int n, JitLowered *out)
{
  int rc = lower_group(c, roots, n, out, false);
  if (rc == 1) { jit_lowered_clear(out); rc = lower_group(c, roots, n, out, true); }
  return rc;
}

int jit_lower_group_rows(const JitSchedCtx *c, const JitRef *roots, int n, JitLowered *out)
{
  return lower_group(c, roots, n, out, true);
}

void jit_lowered_clear(JitLowered *l)
{
  free(l->inl);
  if (l->k) { free(l->k->acc); free(l->k->ins); free(l->k); }
  memset(l, 0, sizeof *l);
  l->fail_ref = -1;
}
