/*
** cg_walk.c -- the one walker over the kernel IR (cg.h): it lays out the row
** loop, the passes (vector or scalar), the address arithmetic and the lowering
** of every RT_OP_* into emitter primitives (cg_emit.h), for every printer.
*/

/*
** Design note.
** - Row r: every access gets its row base once (offset + sum od_k*ostride[k],
**   od_k kept incrementally from r0; flat mode: offset + r*inner*istride).
** - A pass is *vector* when every element value is float32 (float64) or bool:
**   values are vectors of L lanes (bool = a lane mask, all ones / zero, of the
**   unsigned integer lane type). The body runs over full vectors, then once
**   more over a zero-padded vector for the remainder (loads and stores lane by
**   lane for j < m; reductions take only lanes < m), so an element's value
**   never depends on where it fell. Loads/stores that are not unit-stride of
**   the lane type go lane by lane; loads with istride 0 are hoisted.
** - libgccjit 12 has no vector compare or select, so compares work on the
**   bits: key(x) = bits ^ (sign ? 0x7fff.. : 0) + sign orders floats like
**   signed integers (-0 == +0), a signed less-than from wrapping unsigned
**   arithmetic, NaN masks from |bits| > inf; select is b ^ ((a ^ b) & m).
** - Eager semantics (rt_ew.c, rt_red.c) are followed op by op: NaN propagation
**   of minimum/maximum and max/min reductions, relu(NaN) = 0, rint for round,
**   pow(x, 2) = x*x, bool add/mul as or/and. Float32 sums accumulate in double
**   (vector passes: the L float32 lanes widened into two float64 vectors, which
**   GCC turns into two vcvtps2pd), then a fixed tree over the lanes. Vector
**   max/min reductions take the sign of x - acc (vmax_step) plus a NaN lane
**   accumulator, instead of the compare on keys (~6 + 5 ops, not ~40).
*/
#include "cg_emit.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

enum { MODE_ROW, MODE_SCALAR, MODE_VMAIN, MODE_VTAIL };

typedef struct {
  const CgKernel *k;
  CgEmitter *e;
  int vl;                 /* float32 lanes of the host */
  int nv, cap, *ty;       /* handles and their types */
  int *val;               /* per ins: row-level handle */
  int *pv;                /* per ins: handle inside the current pass */
  int *inpass;            /* per ins: 1 = element value of the current pass */
  int *base;              /* per access: row base (I64) */
  int mode;
  int vt, mt, L, fdt;     /* vector pass: float vector type, mask type, lanes, float dtype */
  int hi, hm;             /* element index var, tail lane count */
  int dim[CG_NDIMS];      /* run-time sizes (cg.h): handles of dims[] */
  int pf;                 /* a row kernel of several passes: pass 1 prefetches the next row */
  int cs;                 /* column sums (CG_CSUM): this row's block's first partial (I64), or -1 */
  int phase;              /* a pass split in two loops: 1 all but column sums, 2 only them (0: one loop) */
  int pair, *stash;       /* unrolled step: which of its two vectors (0, 1; -1 none); float32 wide sums' first vector */
  int keep[CG_MAX_BUFS];  /* row_keep: the pass of a buffer's last store when its row lives in a local array, or -1 */
  CgAccess vacc[CG_MAX_BUFS];   /* accesses nacc + b: that array of buffer b */
  int nt;                 /* BOOL handle: dims[CG_DIM_NT] (stores cg_store_nt names bypass the cache), or -1 */
  int rc;
} W;

/* -- Handles and primitives ------------------------------------------------------ */

static int w_new(W *w, int ty)
{
  if (w->nv == w->cap) {
    w->cap = w->cap ? 2 * w->cap : 256;
    int *t = realloc(w->ty, w->cap * sizeof *t);
    if (!t) { w->rc = TD_ERR_NOMEM; w->cap = w->nv; return 0; }
    w->ty = t;
  }
  w->ty[w->nv] = ty;
  return w->nv++;
}
static int hc(W *w, int ty, double x)
{ int v = w_new(w, ty); w->e->emit_const(w->e, v, ty, x, (int64_t)x); return v; }
static int hci(W *w, int ty, int64_t ix)
{ int v = w_new(w, ty); w->e->emit_const(w->e, v, ty, (double)ix, ix); return v; }
static int op3(W *w, int ty, int op, int a, int b, int c)
{
  int v = w_new(w, ty);
  int rc = w->e->emit_op(w->e, v, ty, op, a, b, c);
  if (rc && !w->rc) w->rc = rc;
  return v;
}
static int op1(W *w, int ty, int op, int a) { return op3(w, ty, op, a, -1, -1); }
static int op2(W *w, int ty, int op, int a, int b) { return op3(w, ty, op, a, b, -1); }
static int var(W *w, int ty, int init) { int v = w_new(w, ty); w->e->emit_var(w->e, v, ty, init); return v; }
static int call(W *w, int ty, const char *f, int n, const int *a)
{ int v = w_new(w, ty); w->e->emit_call(w->e, v, ty, f, n, a); return v; }
static int lane_get(W *w, int vec, int j)
{ int v = w_new(w, cg_ty_elem(w->ty[vec])); w->e->emit_lane_get(w->e, v, vec, j); return v; }

static int ubits(int ty) { return ty == CT_VF32 || ty == CT_VU32 ? 32 : 64; }
/* the unsigned lane type of a vector type */
static int utype(int ty) { return ubits(ty) == 32 ? CT_VU32 : CT_VU64; }
static int bitc(W *w, int a, int ty) { return w->ty[a] == ty ? a : op1(w, ty, CG_E_BITCAST, a); }
static int topbit(W *w, int u)                  /* 0 - (u >> (bits-1)): the sign as a mask */
{
  int t = w->ty[u], b = ubits(t);
  return op2(w, t, CG_E_SUB, hci(w, t, 0), op2(w, t, CG_E_SHR, u, hci(w, t, b - 1)));
}

/* -- Mode-polymorphic logic (scalar bool or vector lane mask) ------------------------- */

static int vkey(W *w, int a)
{
  int u = bitc(w, a, utype(w->ty[a])), t = w->ty[u];
  int s = topbit(w, u);
  return op2(w, t, CG_E_SUB, op2(w, t, CG_E_BXOR, u, op2(w, t, CG_E_SHR, s, hci(w, t, 1))), s);
}
static int vslt(W *w, int x, int y)             /* signed x < y on wrapping lanes */
{
  int t = w->ty[x], d = op2(w, t, CG_E_SUB, x, y);
  int q = op2(w, t, CG_E_BAND, op2(w, t, CG_E_BXOR, x, y), op2(w, t, CG_E_BXOR, d, x));
  return topbit(w, op2(w, t, CG_E_BXOR, d, q));
}
static int vne(W *w, int x, int y)
{
  int t = w->ty[x], d = op2(w, t, CG_E_BXOR, x, y);
  return topbit(w, op2(w, t, CG_E_BOR, d, op2(w, t, CG_E_SUB, hci(w, t, 0), d)));
}
static int w_nan(W *w, int a)
{
  if (!cg_ty_is_vec(w->ty[a])) return op2(w, CT_BOOL, CG_E_NE, a, a);
  int u = bitc(w, a, utype(w->ty[a])), t = w->ty[u], b = ubits(t);
  int64_t absm = b == 32 ? 0x7fffffff : INT64_MAX, inf = b == 32 ? 0x7f800000 : 0x7ff0000000000000;
  return topbit(w, op2(w, t, CG_E_SUB, hci(w, t, inf), op2(w, t, CG_E_BAND, u, hci(w, t, absm))));
}
static int w_not(W *w, int m)
{ return op1(w, w->ty[m], cg_ty_is_vec(w->ty[m]) ? CG_E_BNOT : CG_E_LNOT, m); }
static int w_and(W *w, int a, int b)
{ return op2(w, w->ty[a], cg_ty_is_vec(w->ty[a]) ? CG_E_BAND : CG_E_LAND, a, b); }
static int w_or(W *w, int a, int b)
{ return op2(w, w->ty[a], cg_ty_is_vec(w->ty[a]) ? CG_E_BOR : CG_E_LOR, a, b); }

/* a <op> b, op one of CG_E_EQ..GE: a bool, or a lane mask for vectors */
static int w_cmp(W *w, int op, int a, int b)
{
  int t = w->ty[a];
  if (!cg_ty_is_vec(t)) return op2(w, CT_BOOL, op, a, b);
  if (!cg_ty_is_float(t)) {                     /* masks: equality only */
    int ne = vne(w, a, b);
    return op == CG_E_NE ? ne : w_not(w, ne);
  }
  int ka = vkey(w, a), kb = vkey(w, b);
  int ord = w_not(w, w_or(w, w_nan(w, a), w_nan(w, b)));
  switch (op) {
  case CG_E_LT: return w_and(w, vslt(w, ka, kb), ord);
  case CG_E_GT: return w_and(w, vslt(w, kb, ka), ord);
  case CG_E_LE: return w_and(w, w_not(w, vslt(w, kb, ka)), ord);
  case CG_E_GE: return w_and(w, w_not(w, vslt(w, ka, kb)), ord);
  case CG_E_EQ: return w_and(w, w_not(w, vne(w, ka, kb)), ord);
  default:      return w_or(w, vne(w, ka, kb), w_not(w, ord));
  }
}
/* m ? a : b */
static int w_sel(W *w, int m, int a, int b)
{
  int t = w->ty[a];
  if (!cg_ty_is_vec(t)) return op3(w, t, CG_E_SELECT, m, a, b);
  int ut = utype(t), ua = bitc(w, a, ut), ub = bitc(w, b, ut);
  int r = op2(w, ut, CG_E_BXOR, ub, op2(w, ut, CG_E_BAND, op2(w, ut, CG_E_BXOR, ua, ub), m));
  return bitc(w, r, t);
}

/* -- Types and conversions ---------------------------------------------------------- */

/* the handle type of a dtype value in the current mode */
static int w_tyof(W *w, int dt)
{
  if (w->mode == MODE_VMAIN || w->mode == MODE_VTAIL) return dt == TD_BOOL ? w->mt : w->vt;
  return dt;
}
/* constant x of type ty (a vector: every lane) */
static int w_c(W *w, int ty, double x) { return hc(w, ty, x); }

static int w_tobool(W *w, int a)
{
  int t = w->ty[a];
  if (t == CT_BOOL || t == CT_VU32 || t == CT_VU64) return a;
  return w_cmp(w, CG_E_NE, a, w_c(w, t, 0));
}
/* bool / mask a as 0 or 1 of type ty */
static int w_b2x(W *w, int m, int ty)
{
  if (!cg_ty_is_vec(ty)) {
    if (ty == CT_BOOL) return m;
    return op1(w, ty, CG_E_CAST, op1(w, CT_I32, CG_E_CAST, m));
  }
  if (!cg_ty_is_float(ty)) return m;
  int ut = utype(ty);
  int64_t one = ty == CT_VF32 ? 0x3f800000 : 0x3ff0000000000000;
  return bitc(w, op2(w, ut, CG_E_BAND, m, hci(w, ut, one)), ty);
}
static int w_conv(W *w, int a, int ty)
{
  int t = w->ty[a];
  if (t == ty) return a;
  if ((ty == CT_VU32 || ty == CT_VU64) && !cg_ty_is_vec(t)) {   /* a row bool into a lane mask */
    int et = cg_ty_elem(ty);
    int64_t ones = et == CT_U32 ? (int64_t)0xffffffffu : -1;
    return op1(w, ty, CG_E_SPLAT, op3(w, et, CG_E_SELECT, w_tobool(w, a), hci(w, et, ones), hci(w, et, 0)));
  }
  if (ty == CT_BOOL || ty == CT_VU32 || ty == CT_VU64) return w_tobool(w, a);
  if (t == CT_BOOL || t == CT_VU32 || t == CT_VU64) return w_b2x(w, a, ty);
  if (cg_ty_is_vec(ty) && !cg_ty_is_vec(t)) return op1(w, ty, CG_E_SPLAT, w_conv(w, a, cg_ty_elem(ty)));
  return op1(w, ty, CG_E_CAST, a);
}

/* -- Errors ----------------------------------------------------------------------- */

const char *cg_eop_name(int op)
{
  static const char *const names[CG_E__MAX] = {
#define CG_EOPNAME(name, c, ar) #name,
    CG_EOPDEF(CG_EOPNAME)
#undef CG_EOPNAME
  };
  return op >= 0 && op < CG_E__MAX ? names[op] : "?";
}

int cg_nyi(const CgKernel *k, int op, int dtype, const char *what)
{
  return rt_err(TD_ERR_ARG, "cg: NYI %s %s (dtype %s) in kernel %s", what,
                op >= 0 && op < RT_OP__MAX ? rt_op_lname(op) : "?",
                dtype >= 0 && dtype < TD_DTYPE__MAX ? td_dtype_name(dtype) : "?", k->name);
}

/* kernel IR that breaks cg.h's rules (the lowering never makes it; a hand-built
** kernel may): an error naming the kernel and the rule, never a crash */
int cg_bad_ir(const CgKernel *k, const char *what)
{
  return rt_err(TD_ERR_ARG, "cg: invalid kernel IR in kernel %s: %s", k->name, what);
}

#include "cg_vmath.h"                    /* w_vexpf, w_verff: expf and erff on float32 vectors, inline */

/* -- Math functions ------------------------------------------------------------------ */

const char *cg_vec_fname(const char *f, int lanes, char *buf, size_t n)
{
  size_t l = strlen(f);
  int f32 = f[l - 1] == 'f' && strcmp(f, "erf") != 0;
  int wide = f32 ? lanes == 16 : lanes == 8;
  const char *arity = strncmp(f, "pow", 3) == 0 ? "vv" : "v";
  snprintf(buf, n, "_ZGV%cN%d%s_%s", wide ? 'e' : 'd', lanes, arity, f);
  return buf;
}

/* fname(args...) on a scalar or a vector: libm for scalars, libmvec for vectors
** (float32 exp and erf: inline, cg_vmath.h); lanewise: a function without a
** vector form (correctly rounded ones: sqrt, floor, ...), called per lane on vectors */
static int w_math(W *w, const char *f, int n, const int *a, int lanewise)
{
  int t = w->ty[a[0]];
  char name[32];
  snprintf(name, sizeof name, "%s%s", f, cg_ty_elem(t) == CT_F32 ? "f" : "");
  if (!cg_ty_is_vec(t)) return call(w, t, name, n, a);
  if (!lanewise) {
    if (cg_ty_elem(t) == CT_F32 && !strcmp(name, "expf")) return w_vexpf(w, a[0]);
    if (cg_ty_elem(t) == CT_F32 && !strcmp(name, "erff")) return w_verff(w, a[0]);
    char vn[48];
    return call(w, t, cg_vec_fname(name, w->L, vn, sizeof vn), n, a);
  }
  int tmp = var(w, t, a[0]);
  for (int j = 0; j < w->L; j++) {
    int jj = hci(w, CT_I64, j), x = lane_get(w, tmp, jj);
    w->e->emit_lane_set(w->e, tmp, jj, call(w, cg_ty_elem(t), name, 1, &x));
  }
  return tmp;
}
static int w_math1(W *w, const char *f, int x) { return w_math(w, f, 1, &x, 0); }

/* -- ALU ops ----------------------------------------------------------------------- */

/* x ** y for integers, as rt_ew.c's ipow (in int64, negative exponents: 0 unless |x| = 1) */
static int w_ipow(W *w, int x, int y, int ty)
{
  int x64 = w_conv(w, x, CT_I64), y64 = w_conv(w, y, CT_I64);
  int r = var(w, CT_U64, hci(w, CT_U64, 1)), xb = var(w, CT_U64, w_conv(w, x64, CT_U64));
  int yb = var(w, CT_I64, y64), t = var(w, CT_I64, hci(w, CT_I64, 0));
  w->e->begin_loop(w->e, t, t, hci(w, CT_I64, 63), 1);
  int odd = op2(w, CT_BOOL, CG_E_NE, op2(w, CT_I64, CG_E_BAND, yb, hci(w, CT_I64, 1)), hci(w, CT_I64, 0));
  w->e->begin_if(w->e, odd);
  w->e->emit_assign(w->e, r, op2(w, CT_U64, CG_E_MUL, r, xb));
  w->e->end_if(w->e);
  w->e->emit_assign(w->e, xb, op2(w, CT_U64, CG_E_MUL, xb, xb));
  w->e->emit_assign(w->e, yb, op2(w, CT_I64, CG_E_SHR, yb, hci(w, CT_I64, 1)));
  w->e->end_loop(w->e);
  int one = hci(w, CT_I64, 1), mone = hci(w, CT_I64, -1), zero = hci(w, CT_I64, 0);
  int yodd = op2(w, CT_BOOL, CG_E_NE, op2(w, CT_I64, CG_E_BAND, y64, one), zero);
  int neg = w_sel(w, w_cmp(w, CG_E_EQ, x64, one), one,
                  w_sel(w, w_cmp(w, CG_E_EQ, x64, mone), w_sel(w, yodd, mone, one), zero));
  int pos = op1(w, CT_I64, CG_E_CAST, r);
  return w_conv(w, w_sel(w, w_cmp(w, CG_E_LT, y64, zero), neg, pos), ty);
}

static int dt_rank(int dt) { return dt == TD_BOOL ? 0 : dt == TD_UINT8 ? 1 : dt; }

static int opnd(W *w, int o) { return w->mode == MODE_ROW ? w->val[o] : w->pv[o]; }

/* one elementwise op (rt_ew.c semantics); returns its handle */
static int w_alu(W *w, const CgIns *in)
{
  const CgKernel *k = w->k;
  int dt = in->dtype, T = w_tyof(w, dt), op = in->op;
  int ra = in->a >= 0 ? opnd(w, in->a) : -1, rb = in->b >= 0 ? opnd(w, in->b) : -1;
  int rc3 = in->c >= 0 ? opnd(w, in->c) : -1;
  int fl = rt_is_float(dt);
  if (ra < 0) return cg_nyi(k, op, dt, "operand-less op"), 0;
  int x = (op == RT_OP_CAST || op == RT_OP_WHERE || op == RT_OP_LOGICAL_NOT ||
           op == RT_OP_LOGICAL_AND || op == RT_OP_LOGICAL_OR || (op >= RT_OP_EQ && op <= RT_OP_GE))
          ? ra : w_conv(w, ra, T);
  int y = rb >= 0 && op != RT_OP_WHERE && !(op >= RT_OP_EQ && op <= RT_OP_GE) &&
          op != RT_OP_LOGICAL_AND && op != RT_OP_LOGICAL_OR ? w_conv(w, rb, T) : rb;
  int zero = fl || dt != TD_BOOL ? w_c(w, T, 0) : -1;
  switch (op) {
  case RT_OP_NEG: return op1(w, T, CG_E_NEG, x);
  case RT_OP_ABS: return w_sel(w, w_cmp(w, CG_E_LT, x, zero), op1(w, T, CG_E_NEG, x), x);
  case RT_OP_SIGN:
    return op2(w, T, CG_E_SUB, w_b2x(w, w_cmp(w, CG_E_GT, x, zero), T), w_b2x(w, w_cmp(w, CG_E_LT, x, zero), T));
  case RT_OP_EXP: return w_math1(w, "exp", x);
  case RT_OP_LOG: return w_math1(w, "log", x);
  case RT_OP_LOG1P: return w_math1(w, "log1p", x);
  case RT_OP_EXPM1: return w_math1(w, "expm1", x);
  case RT_OP_SIN: return w_math1(w, "sin", x);
  case RT_OP_COS: return w_math1(w, "cos", x);
  case RT_OP_TAN: return w_math1(w, "tan", x);
  case RT_OP_TANH: return w_math1(w, "tanh", x);
  case RT_OP_ERF: return w_math1(w, "erf", x);
  case RT_OP_SQRT: return w_math(w, "sqrt", 1, &x, 1);
  case RT_OP_RSQRT: return op2(w, T, CG_E_DIV, w_c(w, T, 1), w_math(w, "sqrt", 1, &x, 1));
  case RT_OP_SIGMOID: case RT_OP_SILU: {     /* 1 / (1 + exp(-x)), x / (1 + exp(-x)) */
    int d = op2(w, T, CG_E_ADD, w_c(w, T, 1), w_math1(w, "exp", op1(w, T, CG_E_NEG, x)));
    return op2(w, T, CG_E_DIV, op == RT_OP_SIGMOID ? w_c(w, T, 1) : x, d);
  }
  case RT_OP_GELU: {
    int hx = op2(w, T, CG_E_MUL, w_c(w, T, 0.5), x), g;
    if (in->flags & 1) {   /* 0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3))) */
      int c3 = op2(w, T, CG_E_MUL, op2(w, T, CG_E_MUL, op2(w, T, CG_E_MUL, w_c(w, T, 0.044715), x), x), x);
      g = w_math1(w, "tanh", op2(w, T, CG_E_MUL, w_c(w, T, 0.7978845608028654), op2(w, T, CG_E_ADD, x, c3)));
    } else {               /* 0.5 x (1 + erf(x / sqrt 2)) */
      g = w_math1(w, "erf", op2(w, T, CG_E_MUL, x, w_c(w, T, M_SQRT1_2)));
    }
    return op2(w, T, CG_E_MUL, hx, op2(w, T, CG_E_ADD, w_c(w, T, 1), g));
  }
  case RT_OP_RELU: return w_sel(w, w_cmp(w, CG_E_GT, x, zero), x, zero);
  case RT_OP_FLOOR: case RT_OP_CEIL: case RT_OP_ROUND:
    if (!fl) return x;
    return w_math(w, op == RT_OP_FLOOR ? "floor" : op == RT_OP_CEIL ? "ceil" : "rint", 1, &x, 1);
  case RT_OP_CLAMP: {      /* hi test first; lo > hi gives hi (rt_ew.c) */
    double lo = in->f[0], hi = in->f[1];
    if (!fl) { lo = (double)(int64_t)lo; hi = (double)(int64_t)hi; }
    int r = x;
    if (in->flags & 2) {
      int lov = w_c(w, T, (in->flags & 4) && in->f[0] > in->f[1] ? hi : lo);
      r = w_sel(w, w_cmp(w, CG_E_LT, x, w_c(w, T, lo)), lov, x);
    }
    if (in->flags & 4) { int hv = w_c(w, T, hi); r = w_sel(w, w_cmp(w, CG_E_GT, x, hv), hv, r); }
    return r;
  }
  case RT_OP_CAST: case RT_OP_COPY: return w_conv(w, ra, T);
  case RT_OP_LOGICAL_NOT: return w_not(w, w_tobool(w, ra));
  case RT_OP_LOGICAL_AND: return w_and(w, w_tobool(w, ra), w_tobool(w, rb));
  case RT_OP_LOGICAL_OR: return w_or(w, w_tobool(w, ra), w_tobool(w, rb));
  case RT_OP_ADD: case RT_OP_MAXIMUM:
    if (dt == TD_BOOL) return w_or(w, x, y);
    if (op == RT_OP_ADD) return op2(w, T, CG_E_ADD, x, y);
    /* x > y ? x : (y > x ? y : (x != x ? x : y)) */
    return w_sel(w, w_cmp(w, CG_E_GT, x, y), x, w_sel(w, w_cmp(w, CG_E_GT, y, x), y, w_sel(w, w_nan(w, x), x, y)));
  case RT_OP_MUL: case RT_OP_MINIMUM:
    if (dt == TD_BOOL) return w_and(w, x, y);
    if (op == RT_OP_MUL) return op2(w, T, CG_E_MUL, x, y);
    return w_sel(w, w_cmp(w, CG_E_LT, x, y), x, w_sel(w, w_cmp(w, CG_E_LT, y, x), y, w_sel(w, w_nan(w, x), x, y)));
  case RT_OP_SUB: if (dt == TD_BOOL) break; return op2(w, T, CG_E_SUB, x, y);
  case RT_OP_DIV: if (!fl) break; return op2(w, T, CG_E_DIV, x, y);
  case RT_OP_POW:
    if (!fl) { if (dt == TD_BOOL) break; return w_ipow(w, x, y, T); }
    { int a2[2] = { x, y };   /* y == 2 ? x*x : pow(x, y) */
      return w_sel(w, w_cmp(w, CG_E_EQ, y, w_c(w, T, 2)), op2(w, T, CG_E_MUL, x, x), w_math(w, "pow", 2, a2, 0)); }
  case RT_OP_EQ: case RT_OP_NE: case RT_OP_LT: case RT_OP_LE: case RT_OP_GT: case RT_OP_GE: {
    int da = k->ins[in->a].dtype, db = k->ins[in->b].dtype;
    int ct = w_tyof(w, dt_rank(da) >= dt_rank(db) ? da : db);
    return w_cmp(w, CG_E_EQ + (op - RT_OP_EQ), w_conv(w, ra, ct), w_conv(w, rb, ct));
  }
  case RT_OP_WHERE:
    if (rc3 < 0) break;
    return w_sel(w, w_tobool(w, ra), w_conv(w, rb, T), w_conv(w, rc3, T));
  default: break;
  }
  w->rc = cg_nyi(k, op, dt, "op");
  return zero >= 0 ? zero : x;
}

/* -- Reductions ------------------------------------------------------------------- */

/* accumulator type of a RED in the current mode */
static int red_acct(W *w, const CgIns *in)
{
  if (w->mode == MODE_VMAIN || w->mode == MODE_VTAIL) return w->vt;
  int dt = in->dtype;
  if (in->op == RT_OP_SUM || in->op == RT_OP_PROD)
    return rt_is_float(dt) ? CT_F64 : CT_U64;
  return dt;
}
static int red_neutral(W *w, const CgIns *in, int acct)
{
  int dt = in->dtype, mx = in->op == RT_OP_MAX;
  if (in->op == RT_OP_SUM) return hc(w, acct, 0);
  if (in->op == RT_OP_PROD) return hc(w, acct, 1);
  if (rt_is_float(dt)) return hc(w, acct, mx ? -INFINITY : INFINITY);
  int64_t lo = dt == TD_INT64 ? INT64_MIN : dt == TD_INT32 ? INT32_MIN : 0;
  int64_t hi = dt == TD_INT64 ? INT64_MAX : dt == TD_INT32 ? INT32_MAX : dt == TD_UINT8 ? 255 : 1;
  return hci(w, acct, mx ? lo : hi);
}
/* a (+) b as rt_red.c: a NaN in the accumulator sticks, a NaN in b is taken */
static int red_comb(W *w, int op, int a, int b)
{
  int t = w->ty[a];
  switch (op) {
  case RT_OP_SUM: return op2(w, t, CG_E_ADD, a, b);
  case RT_OP_PROD: return op2(w, t, CG_E_MUL, a, b);
  case RT_OP_MAX: case RT_OP_MIN:
    if (t == CT_BOOL) return op == RT_OP_MAX ? w_or(w, a, b) : w_and(w, a, b);
    return w_sel(w, w_and(w, w_not(w, w_cmp(w, op == RT_OP_MAX ? CG_E_LE : CG_E_GE, b, a)), w_not(w, w_nan(w, a))), b, a);
  }
  return a;
}

/* Vector max/min step for NaN-free lanes: acc' = x > acc ? x : acc (min: x <
** acc), eager's R_MAX with ties keeping the accumulator, in 6 integer ops
** and no compare. For floats x != acc, d = x - acc is never 0 (gradual
** underflow) and has the comparison's sign (an overflow to inf keeps it);
** x = -0 vs acc = +0 gives d = -0, a tie, hence "d > 0 as a signed integer":
** the top bit of -d & ~d. Equal infinities give d = NaN: either side is then
** the same value. NaN lanes are tracked apart (w_ins) and win at the end. */
static int vmax_step(W *w, int op, int acc, int x)
{
  int ft = w->ty[acc], t = utype(ft), mx = op == RT_OP_MAX;
  int d = bitc(w, op2(w, ft, CG_E_SUB, mx ? x : acc, mx ? acc : x), t);
  return w_sel(w, topbit(w, op2(w, t, CG_E_BAND, op2(w, t, CG_E_SUB, hci(w, t, 0), d), op1(w, t, CG_E_BNOT, d))), x, acc);
}

/* -- Loads and stores ---------------------------------------------------------------- */

/* buffer b's element type (a row array CG_MAX_BUFS + b: buffer b's) */
static int buf_ty(const CgKernel *k, int b) { int d = k->buf_dtype[b % CG_MAX_BUFS]; return d == TD_BOOL ? CT_U8 : d; }

static int row_keep(const CgKernel *k, int b);

/* The access an instruction uses: its own, or the row array standing for its buffer. */
static int w_redirect(const W *w, const CgIns *in)
{
  int b = w->k->acc[in->acc].buf;
  return w->keep[b] >= 0 && (in->kind == CG_LOAD || in->pass < w->keep[b]) ? w->k->nacc + b : in->acc;
}
static const CgAccess *w_acc(const W *w, int acc) { return acc < w->k->nacc ? &w->k->acc[acc] : &w->vacc[acc - w->k->nacc]; }

/* scalar load of access acc at element index i (I64 handle or -1 for the row base) */
static int ld_scalar(W *w, const CgAccess *a, int acc, int i)
{
  int bt = buf_ty(w->k, a->buf), idx = w->base[acc];
  if (i >= 0 && a->istride) idx = op2(w, CT_I64, CG_E_ADD, idx, a->istride == 1 ? i :
                                      op2(w, CT_I64, CG_E_MUL, i, hci(w, CT_I64, a->istride)));
  int v = w_new(w, bt);
  w->e->emit_load(w->e, v, bt, a->buf, idx);
  return v;
}
static void st_scalar(W *w, const CgAccess *a, int acc, int i, int val)
{
  int idx = w->base[acc];
  if (i >= 0 && a->istride) idx = op2(w, CT_I64, CG_E_ADD, idx, a->istride == 1 ? i :
                                      op2(w, CT_I64, CG_E_MUL, i, hci(w, CT_I64, a->istride)));
  w->e->emit_store(w->e, buf_ty(w->k, a->buf), a->buf, idx, val);
}
/* a buffer value as a lane of a vector of type vt/mt (dtype dt) */
static int lane_in(W *w, int s, int dt)
{
  int et = cg_ty_elem(dt == TD_BOOL ? w->mt : w->vt);
  if (dt != TD_BOOL) return w_conv(w, s, et);
  int b = op1(w, et, CG_E_CAST, op2(w, CT_BOOL, CG_E_NE, s, hci(w, w->ty[s], 0)));
  return op2(w, et, CG_E_SUB, hci(w, et, 0), b);
}
static int lane_out(W *w, int s, int bdt)
{
  if (w->ty[s] == CT_U32 || w->ty[s] == CT_U64)   /* a mask lane */
    return op1(w, buf_ty(w->k, bdt), CG_E_CAST, op2(w, w->ty[s], CG_E_BAND, s, hci(w, w->ty[s], 1)));
  return w_conv(w, s, buf_ty(w->k, bdt));
}

static int w_load(W *w, const CgIns *in)
{
  int ac = w_redirect(w, in);
  const CgAccess *a = w_acc(w, ac);
  int dt = in->dtype;
  if (w->mode == MODE_ROW || w->mode == MODE_SCALAR) {
    int s = ld_scalar(w, a, ac, w->mode == MODE_ROW ? -1 : w->hi);
    return w->k->buf_dtype[a->buf] == TD_BOOL && dt != TD_BOOL ? w_conv(w, w_tobool(w, s), dt) : w_conv(w, s, dt);
  }
  int T = w_tyof(w, dt);
  if (w->mode == MODE_VMAIN && a->istride == 1 && buf_ty(w->k, a->buf) == cg_ty_elem(T)) {
    int v = w_new(w, T);
    w->e->emit_load(w->e, v, T, a->buf, op2(w, CT_I64, CG_E_ADD, w->base[ac], w->hi));
    return v;
  }
  int tmp = var(w, T, hc(w, T, 0));
  if (w->mode == MODE_VMAIN) {
    for (int j = 0; j < w->L; j++) {
      int jj = hci(w, CT_I64, j);
      int s = ld_scalar(w, a, ac, op2(w, CT_I64, CG_E_ADD, w->hi, jj));
      w->e->emit_lane_set(w->e, tmp, jj, lane_in(w, s, dt));
    }
  } else {
    int j = var(w, CT_I64, hci(w, CT_I64, 0));
    w->e->begin_loop(w->e, j, j, w->hm, 1);
    int s = ld_scalar(w, a, ac, op2(w, CT_I64, CG_E_ADD, w->hi, j));
    w->e->emit_lane_set(w->e, tmp, j, lane_in(w, s, dt));
    w->e->end_loop(w->e);
  }
  return tmp;
}

static void w_store(W *w, const CgIns *in)
{
  int ac = w_redirect(w, in);
  const CgAccess *a = w_acc(w, ac);
  int v = opnd(w, in->a), bt = buf_ty(w->k, a->buf);
  if (w->mode == MODE_ROW || w->mode == MODE_SCALAR) {
    st_scalar(w, a, ac, w->mode == MODE_ROW ? -1 : w->hi, w_conv(w, v, bt));
    return;
  }
  int T = w_tyof(w, w->k->ins[in->a].dtype);
  v = w_conv(w, v, T);
  if (w->mode == MODE_VMAIN && a->istride == 1 && bt == cg_ty_elem(T)) {
    CgEmitter *E = w->e;
    int idx = op2(w, CT_I64, CG_E_ADD, w->base[ac], w->hi);
    if (w->nt < 0 || !cg_store_nt(w->k, ac)) { E->emit_store(E, T, a->buf, idx, v); return; }
    E->begin_if(E, w->nt);                 /* loop-invariant: GCC unswitches the loop */
    E->emit_store_nt(E, T, a->buf, idx, v);
    E->end_if(E);
    E->begin_if(E, op1(w, CT_BOOL, CG_E_LNOT, w->nt));
    E->emit_store(E, T, a->buf, idx, v);
    E->end_if(E);
    return;
  }
  int tmp = var(w, T, v);
  if (w->mode == MODE_VMAIN) {
    for (int j = 0; j < w->L; j++) {
      int jj = hci(w, CT_I64, j);
      st_scalar(w, a, ac, op2(w, CT_I64, CG_E_ADD, w->hi, jj), lane_out(w, lane_get(w, tmp, jj), a->buf));
    }
  } else {
    int j = var(w, CT_I64, hci(w, CT_I64, 0));
    w->e->begin_loop(w->e, j, j, w->hm, 1);
    st_scalar(w, a, ac, op2(w, CT_I64, CG_E_ADD, w->hi, j), lane_out(w, lane_get(w, tmp, j), a->buf));
    w->e->end_loop(w->e);
  }
}

/* part[i] += a for the element's column i in this row block's partial sums
** (the n-th CSUM's: the n-th scratch buffer, of in->dtype) */
static void w_csum(W *w, const CgIns *in)
{
  CgEmitter *E = w->e;
  int b = w->k->nbuf - w->k->nscratch, et = in->dtype, v = opnd(w, in->a);
  for (const CgIns *p = w->k->ins; p < in; p++) b += p->kind == CG_CSUM;
  if (w->mode == MODE_ROW || w->cs < 0) { w->rc = cg_bad_ir(w->k, "column sum outside a row pass"); return; }
  if (w->mode != MODE_VTAIL) {              /* one vector, or one element */
    int T = w->mode == MODE_VMAIN ? w_tyof(w, et) : et, idx = op2(w, CT_I64, CG_E_ADD, w->cs, w->hi), old = w_new(w, T);
    E->emit_load(E, old, T, b, idx);
    E->emit_store(E, T, b, idx, op2(w, T, CG_E_ADD, old, w_conv(w, v, T)));
    return;
  }
  int tmp = var(w, w_tyof(w, et), w_conv(w, v, w_tyof(w, et))), j = var(w, CT_I64, hci(w, CT_I64, 0));
  E->begin_loop(E, j, j, w->hm, 1);
  int idx = op2(w, CT_I64, CG_E_ADD, w->cs, op2(w, CT_I64, CG_E_ADD, w->hi, j)), old = w_new(w, et);
  E->emit_load(E, old, et, b, idx);
  E->emit_store(E, et, b, idx, op2(w, et, CG_E_ADD, old, lane_get(w, tmp, j)));
  E->end_loop(E);
}

/* -- Instructions -------------------------------------------------------------------- */

static void w_ins(W *w, int i, int *accv, int lmask)
{
  const CgIns *in = &w->k->ins[i];
  int *dst = w->mode == MODE_ROW ? w->val : w->pv;
  if (w->phase == 1 ? in->kind == CG_CSUM : w->phase == 2 && (in->kind == CG_STORE || in->kind == CG_RED)) return;
  switch (in->kind) {
  case CG_LOAD: dst[i] = w_load(w, in); break;
  case CG_STORE: w_store(w, in); break;
  case CG_CSUM: w_csum(w, in); break;
  case CG_ALU: dst[i] = w_alu(w, in); break;
  case CG_RED: {
    if (w->mode == MODE_ROW) { w->rc = cg_bad_ir(w->k, "row-level reduction"); break; }
    int acc = accv[i], acc2 = accv[w->k->nins + i], wide = acc2 >= 0 && in->op == RT_OP_SUM;
    int vt = wide ? w->vt : w->ty[acc], v = w_conv(w, opnd(w, in->a), vt);
    if (w->mode == MODE_VTAIL) v = w_sel(w, lmask, v, red_neutral(w, in, vt));
    if (acc2 >= 0 && !wide) {     /* vector max/min: the NaN lanes' bits OR-ed into acc2 */
      w->e->emit_assign(w->e, acc, vmax_step(w, in->op, acc, v));
      w->e->emit_assign(w->e, acc2, op2(w, w->mt, CG_E_BOR, acc2, op2(w, w->mt, CG_E_BAND, bitc(w, v, w->mt), w_nan(w, v))));
      break;
    }
    if (wide && w->pair == 0) { w->stash[i] = v; break; }   /* added to the step's second vector in float32 */
    if (wide && w->pair == 1) v = op2(w, vt, CG_E_ADD, w->stash[i], v);
    if (wide) {   /* float32 lanes summed in double: the lanes converted to two float64 vectors */
      /* v + 0 (exact here: the sum starts at +0, so -0 and +0 add alike) is a
      ** use of the whole vector: without it GCC splits a loaded vector whose
      ** only uses are lane reads into 8 scalar loads, then never uses vcvtps2pd */
      int hi = acc2, h = w->L / 2, tmp = var(w, vt, op2(w, vt, CG_E_ADD, v, hc(w, vt, 0))), z = hc(w, CT_VF64, 0);
      int dv[2] = { var(w, CT_VF64, z), var(w, CT_VF64, z) };
      for (int j = 0; j < w->L; j++)
        w->e->emit_lane_set(w->e, dv[j / h], hci(w, CT_I64, j % h),
                            op1(w, CT_F64, CG_E_CAST, lane_get(w, tmp, hci(w, CT_I64, j))));
      w->e->emit_assign(w->e, acc, op2(w, CT_VF64, CG_E_ADD, acc, dv[0]));
      w->e->emit_assign(w->e, hi, op2(w, CT_VF64, CG_E_ADD, hi, dv[1]));
      break;
    }
    w->e->emit_assign(w->e, acc, red_comb(w, in->op, acc, v));
    break;
  }
  default: break;
  }
}

/* -- Passes ------------------------------------------------------------------------- */

/* Can pass [s, e) run on vectors? Sets w->fdt. */
static int pass_vec_ok(W *w, int s, int e)
{
  const CgKernel *k = w->k;
  int f = -1;
  for (int i = s; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if (in->level != 1 || in->kind == CG_CONST || in->kind == CG_ARG || in->kind == CG_STORE) continue;
    int dt = in->dtype;
    if (rt_is_float(dt)) { if (f >= 0 && f != dt) return 0; f = dt; }
    else if (dt != TD_BOOL || in->kind == CG_RED) return 0;
    if (in->kind == CG_ALU && in->op >= RT_OP_EQ && in->op <= RT_OP_GE && in->op != RT_OP_EQ && in->op != RT_OP_NE &&
        k->ins[in->a].dtype == TD_BOOL && k->ins[in->b].dtype == TD_BOOL) return 0;
  }
  for (int i = s; i < e; i++) {   /* stored element values must be of the lane types too */
    const CgIns *in = &k->ins[i];
    if (in->level == 1 && in->kind == CG_STORE && k->ins[in->a].level == 1) {
      int dt = k->ins[in->a].dtype;
      if (dt != TD_BOOL && dt != f) return 0;
    }
  }
  w->fdt = f;
  return f >= 0;
}

/* Does ins i (level 0, inside pass range (s, e)) read a reduction of the pass? */
static int reads_pass(W *w, int i, int s, int e, const char *post)
{
  const CgIns *in = &w->k->ins[i];
  int ops[3] = { in->a, in->b, in->c };
  for (int j = 0; j < 3; j++)
    if (ops[j] >= 0 && (post[ops[j]] || (ops[j] > s && ops[j] < e && w->k->ins[ops[j]].kind == CG_RED))) return 1;
  return 0;
}

static void emit_row_ins(W *w, int i)
{
  int m = w->mode; w->mode = MODE_ROW; w_ins(w, i, NULL, -1); w->mode = m;
}

/* whether the kernel stores into buffer b */
static bool buf_stored(const CgKernel *k, int b)
{
  for (int i = 0; i < k->nins; i++)
    if (k->ins[i].kind == CG_STORE && k->acc[k->ins[i].acc].buf == b) return true;
  return false;
}

/* A row kernel of several passes reads its row from memory in pass 0 and from
** cache after: while pass 1 computes, the next row's loads are prefetched at
** the same column, so memory and arithmetic overlap (softmax's exp pass would
** otherwise leave the memory idle). That is the pass-0 loads, the inputs a
** later pass reads first (a backward's incoming gradient), and, for writing,
** the rows the kernel stores: a store to a line not in cache waits for it to
** be read from memory first (softmax fwd+bwd over 4096-wide rows ~15% faster
** on 2 threads). Those two only for rows of 2048 elements or more: on shorter
** ones (layer_norm's 1024) the hardware prefetcher keeps up, no gain measured. */
static void w_prefetch_next(W *w)
{
  const CgKernel *k = w->k;
  if (!w->pf) return;
  uint64_t done[4] = { 0 };          /* accesses already prefetched (the first 256) */
  bool long_rows = k->inner >= 2048;
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    if ((in->kind != CG_LOAD && in->kind != CG_STORE) || in->level != 1 || in->acc >= 256 || w_redirect(w, in) != in->acc)
      continue;
    if (in->pass != 0 && (!long_rows || (in->kind == CG_LOAD && buf_stored(k, k->acc[in->acc].buf)))) continue;
    const CgAccess *ac = &k->acc[in->acc];
    int64_t rs = ac->ostride[k->nouter - 1];
    if (ac->istride != 1 || rs == 0 || (done[in->acc / 64] >> (in->acc % 64) & 1)) continue;
    done[in->acc / 64] |= 1ull << (in->acc % 64);
    bool nt = in->kind == CG_STORE && w->nt >= 0 && cg_store_nt(k, in->acc);   /* not when it bypasses the cache */
    if (nt) w->e->begin_if(w->e, op1(w, CT_BOOL, CG_E_LNOT, w->nt));
    w->e->emit_prefetch(w->e, ac->buf, op2(w, CT_I64, CG_E_ADD, w->base[in->acc],
                                           op2(w, CT_I64, CG_E_ADD, hci(w, CT_I64, rs), w->hi)), in->kind == CG_STORE);
    if (nt) w->e->end_if(w->e);
  }
}

/* The remainder of a vector loop (w->hi < n): opens the if, enters tail mode
** (w->hm lanes valid) and returns the mask of the valid lanes for the
** reductions' neutral fill (-1 when the pass has none). The caller emits the
** body and closes the if. */
static int w_tail_begin(W *w, int n, int nred)
{
  CgEmitter *E = w->e;
  int zero = hci(w, CT_I64, 0), lm = -1;
  E->begin_if(E, op2(w, CT_BOOL, CG_E_LT, w->hi, n));
  E->comment(E, "remainder: one zero-padded vector");
  w->mode = MODE_VTAIL;
  w->hm = op2(w, CT_I64, CG_E_SUB, n, w->hi);
  if (nred) {
    int j = var(w, CT_I64, zero);
    lm = var(w, w->mt, hci(w, w->mt, 0));
    E->begin_loop(E, j, zero, w->hm, 1);
    E->emit_lane_set(E, lm, j, hci(w, cg_ty_elem(w->mt), -1));
    E->end_loop(E);
  }
  return lm;
}

/* the accumulators of the reductions in ins [s, e), at their neutral values
** (accv: as w_ins takes them) */
static void w_accs_new(W *w, int s, int e, int *accv)
{
  const CgKernel *k = w->k;
  int vec = w->mode == MODE_VMAIN;
  for (int i = s; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if (w->inpass[i] != 1 || in->kind != CG_RED) continue;
    int at = red_acct(w, in);
    if (vec && in->op == RT_OP_SUM && w->fdt == TD_FLOAT32) {   /* as rt_red.c: in double */
      accv[i] = var(w, CT_VF64, hc(w, CT_VF64, 0));
      accv[k->nins + i] = var(w, CT_VF64, hc(w, CT_VF64, 0));
    } else {
      accv[i] = var(w, at, red_neutral(w, in, at));
      if (vec && (in->op == RT_OP_MAX || in->op == RT_OP_MIN)) accv[k->nins + i] = var(w, w->mt, hci(w, w->mt, 0));
    }
  }
}

/* vector accumulators b combined into a, lane by lane (max/min: NaN lanes
** kept apart, their bits OR-ed, as in w_ins) */
static void w_accs_fold(W *w, int s, int e, int *a, int *b)
{
  const CgKernel *k = w->k;
  CgEmitter *E = w->e;
  for (int i = s; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if (w->inpass[i] != 1 || in->kind != CG_RED) continue;
    int a2 = a[k->nins + i], b2 = b[k->nins + i];
    if (a2 >= 0 && in->op != RT_OP_SUM) {
      E->emit_assign(E, a[i], vmax_step(w, in->op, a[i], b[i]));
      E->emit_assign(E, a2, op2(w, w->mt, CG_E_BOR, a2, b2));
      continue;
    }
    E->emit_assign(E, a[i], red_comb(w, in->op, a[i], b[i]));
    if (a2 >= 0) E->emit_assign(E, a2, op2(w, w->ty[a2], CG_E_ADD, a2, b2));
  }
}

/* the body of a vector pass [s, e) at element w->hi, reductions into accv */
static void w_vbody(W *w, int s, int e, int *accv)
{
  for (int i = s + 1; i < e; i++) if (w->inpass[i] == 1) w_ins(w, i, accv, -1);
  if (w->k->ins[s].pass == 1 && w->phase != 2) w_prefetch_next(w);
}

/* The column sums of a pass that may store bypassing the cache run in a loop
** of their own over the same (cached) row, recomputing what they read: their
** partials' loads and stores in the loop of the non-temporal stores slowed it
** (W8 layer_norm fwd+bwd, 4 alternating runs: 5.8 -> 5.6 ms median). */
static bool pass_split(const W *w, int s, int e)
{
  bool st = false, cs = false;
  for (int i = s + 1; i < e; i++) {
    st |= w->k->ins[i].kind == CG_STORE && w->k->ins[i].level == 1;
    cs |= w->k->ins[i].kind == CG_CSUM;
  }
  return st && cs && w->nt >= 0;
}

/* pass beginning at ins s (a CG_PASS); returns the index after it */
static int w_pass(W *w, int s, int n)
{
  const CgKernel *k = w->k;
  CgEmitter *E = w->e;
  int e = s + 1;
  while (e < k->nins && k->ins[e].kind != CG_PASS && k->ins[e].kind != CG_ENDPASS) e++;
  char *post = calloc(k->nins, 1);
  /* accv[i], accv[nins + i] (NaN lanes, or a wide sum's high half); from
  ** accv[2 nins]: the same for the second vector of an unrolled step */
  int *accv = malloc(4 * k->nins * sizeof *accv);
  if (!post || !accv) { free(post); free(accv); w->rc = TD_ERR_NOMEM; return e; }
  for (int i = 0; i < 4 * k->nins; i++) accv[i] = -1;
  int nred = 0;
  for (int i = s + 1; i < e; i++) nred += k->ins[i].kind == CG_RED;
  for (int i = s + 1; i < e; i++) w->inpass[i] = k->ins[i].level == 1 && k->ins[i].kind != CG_CONST && k->ins[i].kind != CG_ARG;
  for (int i = s + 1; i < e; i++)   /* row statements in the range: before the loop, or after if they read it */
    if (!w->inpass[i] && k->ins[i].kind != CG_CONST && k->ins[i].kind != CG_ARG) {
      if (reads_pass(w, i, s, e, post)) post[i] = 1; else emit_row_ins(w, i);
    }
  int vec = pass_vec_ok(w, s + 1, e);
  char cm[64];
  snprintf(cm, sizeof cm, "pass %d (%s)", k->ins[s].pass, vec ? "vector" : "scalar");
  E->comment(E, cm);
  if (vec) {
    w->L = w->fdt == TD_FLOAT32 ? w->vl : w->vl / 2;
    w->vt = w->fdt == TD_FLOAT32 ? CT_VF32 : CT_VF64;
    w->mt = w->fdt == TD_FLOAT32 ? CT_VU32 : CT_VU64;
  }
  w->mode = vec ? MODE_VMAIN : MODE_SCALAR;
  /* values from outside the pass, in the pass's types; hoisted loads */
  for (int i = s + 1; i < e; i++) {
    if (!w->inpass[i]) continue;
    const CgIns *in = &k->ins[i];
    int ops[3] = { in->a, in->b, in->c };
    for (int j = 0; j < 3; j++) {
      int o = ops[j];
      if (o < 0 || w->inpass[o]) continue;
      w->pv[o] = vec ? w_conv(w, w->val[o], w_tyof(w, k->ins[o].dtype)) : w->val[o];
    }
    if (in->kind == CG_LOAD && k->acc[in->acc].istride == 0) {
      int m = w->mode; w->mode = MODE_ROW;
      int sv = w_load(w, in);
      w->mode = m;
      w->pv[i] = vec ? w_conv(w, sv, w_tyof(w, in->dtype)) : sv;
      w->inpass[i] = 2;   /* hoisted */
    }
  }
  w_accs_new(w, s + 1, e, accv);
  int zero = hci(w, CT_I64, 0);
  w->hi = var(w, CT_I64, zero);
  if (vec) {
    if (nred) {   /* two vectors a step, into two accumulator sets: two dependency chains */
      int *acc2 = accv + 2 * k->nins;
      w_accs_new(w, s + 1, e, acc2);
      /* a float32 sum in double adds the step's two vectors in float32 first:
      ** half the widening conversions, within an ulp of the pair */
      w->stash = malloc(sizeof(int) * (size_t)k->nins);
      E->begin_loop(E, w->hi, zero, op2(w, CT_I64, CG_E_SUB, n, hci(w, CT_I64, 2 * w->L - 1)), 2 * w->L);
      w->pair = w->stash ? 0 : -1;
      w_vbody(w, s, e, accv);
      int hv = w->hi;
      w->hi = op2(w, CT_I64, CG_E_ADD, hv, hci(w, CT_I64, w->L));
      w->pair = w->stash ? 1 : -1;
      w_vbody(w, s, e, acc2);
      w->pair = -1;
      free(w->stash); w->stash = NULL;
      w->hi = hv;
      E->end_loop(E);
      E->comment(E, "what is left: single vectors");
    }
    bool split = pass_split(w, s, e);
    w->phase = split ? 1 : 0;
    E->begin_loop(E, w->hi, nred ? w->hi : zero, op2(w, CT_I64, CG_E_SUB, n, hci(w, CT_I64, w->L - 1)), w->L);
    w_vbody(w, s, e, accv);
    E->end_loop(E);
    int lm = w_tail_begin(w, n, nred);
    for (int i = s + 1; i < e; i++) if (w->inpass[i] == 1) w_ins(w, i, accv, lm);
    E->end_if(E);
    if (split) {
      w->phase = 2;
      w->mode = MODE_VMAIN;
      E->comment(E, "column sums");
      E->begin_loop(E, w->hi, zero, op2(w, CT_I64, CG_E_SUB, n, hci(w, CT_I64, w->L - 1)), w->L);
      w_vbody(w, s, e, accv);
      E->end_loop(E);
      w_tail_begin(w, n, 0);
      for (int i = s + 1; i < e; i++) if (w->inpass[i] == 1) w_ins(w, i, accv, -1);
      E->end_if(E);
      w->phase = 0;
    }
    if (nred) w_accs_fold(w, s + 1, e, accv, accv + 2 * k->nins);
    w->mode = MODE_ROW;
    for (int i = s + 1; i < e; i++) {   /* lanes combined in a fixed tree */
      if (!w->inpass[i] || k->ins[i].kind != CG_RED) continue;
      int l[16] = { 0 };
      int a2 = accv[k->nins + i], wide = a2 >= 0 && k->ins[i].op == RT_OP_SUM, h2 = w->L / 2;
      int nan = a2 >= 0 && !wide ? bitc(w, a2, w->vt) : -1;   /* max/min: a lane's NaNs (bits OR-ed) win */
      for (int q = 0; q < w->L; q++) {
        l[q] = wide ? lane_get(w, accv[q < h2 ? i : k->nins + i], hci(w, CT_I64, q % h2)) : lane_get(w, accv[i], hci(w, CT_I64, q));
        if (nan >= 0) { int nq = lane_get(w, nan, hci(w, CT_I64, q)); l[q] = w_sel(w, w_nan(w, nq), nq, l[q]); }
      }
      for (int h = w->L / 2; h >= 1; h /= 2)
        for (int q = 0; q < h; q++) l[q] = red_comb(w, k->ins[i].op, l[q], l[q + h]);
      w->val[i] = wide ? w_conv(w, l[0], CT_F32) : l[0];
    }
  } else {
    E->begin_loop(E, w->hi, zero, n, 1);
    for (int i = s + 1; i < e; i++) if (w->inpass[i] == 1) w_ins(w, i, accv, -1);
    E->end_loop(E);
    w->mode = MODE_ROW;
    for (int i = s + 1; i < e; i++)
      if (w->inpass[i] && k->ins[i].kind == CG_RED) w->val[i] = w_conv(w, accv[i], k->ins[i].dtype);
  }
  for (int i = s + 1; i < e; i++) if (post[i]) emit_row_ins(w, i);
  for (int i = s + 1; i < e; i++) w->inpass[i] = 0;
  free(post); free(accv);
  return e;
}

#include "cg_walk_col.h"                  /* w_ckernel: the body of a column-mode kernel */

/* -- The kernel -------------------------------------------------------------------- */

int cg_walk(const CgKernel *k, CgEmitter *E, int vlanes)
{
  W w0 = { 0 }, *w = &w0;
  w->k = k; w->e = E; w->vl = vlanes; w->mode = MODE_ROW; w->nt = -1; w->cs = -1; w->pair = -1;
  for (int b = 0; b < CG_MAX_BUFS; b++) w->keep[b] = -1;
  int rc = E->begin_kernel(E, k, vlanes);
  if (rc) return rc;
  w_new(w, CT_I64); w_new(w, CT_I64);     /* r0, r1 */
  int ni = k->nins > 0 ? k->nins : 1;
  w->val = malloc(ni * sizeof(int)); w->pv = malloc(ni * sizeof(int));
  w->inpass = calloc(ni, sizeof(int)); w->base = malloc((k->nacc + k->nbuf + 1) * sizeof(int));
  if (!w->val || !w->pv || !w->inpass || !w->base) { w->rc = TD_ERR_NOMEM; goto done; }
  for (int i = 0; i < k->nins; i++) w->val[i] = w->pv[i] = -1;
  for (int i = 0; i < k->nins; i++) {     /* constants and args: hoisted */
    const CgIns *in = &k->ins[i];
    if (in->kind == CG_CONST) w->val[i] = in->dtype == TD_BOOL ? op2(w, CT_BOOL, CG_E_NE, hc(w, CT_I32, in->f[0]), hc(w, CT_I32, 0))
                                                              : hc(w, in->dtype, in->f[0]);
    else if (in->kind == CG_ARG) {
      if (in->acc < 0 || in->acc >= k->nargs) { w->rc = cg_bad_ir(k, "arg index out of range"); goto done; }
      int v = w_new(w, CT_F64);
      E->emit_arg(E, v, in->acc);
      w->val[i] = w_conv(w, v, in->dtype);
    }
  }
  for (int i = 0; i < k->nacc; i++)
    if (k->acc[i].buf < 0 || k->acc[i].buf >= k->nbuf) { w->rc = cg_bad_ir(k, "access to a missing buffer"); goto done; }
  for (int i = 0, ncs = 0; i < k->nins; i++)
    if (k->ins[i].kind == CG_CSUM && (k->cred > 0 || ++ncs > k->nscratch || k->ins[i].acc < 0 || k->ins[i].acc >= k->nacc)) {
      w->rc = cg_bad_ir(k, "column sum without its scratch buffer or output");
      goto done;
    }
  for (int d = 0; d < CG_NDIMS; d++) {     /* run-time sizes: read once */
    w->dim[d] = -1;
    bool used = d == CG_DIM_N ? k->flat > 0 || k->cred > 0 : k->cred > 0 || (d == CG_DIM_BLK && k->nscratch > 0);
    if (used) { w->dim[d] = w_new(w, CT_I64); E->emit_dim(E, w->dim[d], d); }
  }
  if (k->cred > 0) { w_ckernel(w); goto done; }   /* column mode */
  for (int i = 0; i < k->nins && w->nt < 0; i++)
    if (k->ins[i].kind == CG_STORE && cg_store_nt(k, k->ins[i].acc)) {
      int d = w_new(w, CT_I64);
      E->emit_dim(E, d, CG_DIM_NT);
      w->nt = op2(w, CT_BOOL, CG_E_NE, d, hci(w, CT_I64, 0));
    }
  for (int b = 0; b < k->nbuf && b < CG_MAX_BUFS; b++)
    if ((w->keep[b] = row_keep(k, b)) >= 0) {
      E->emit_row_array(E, CG_MAX_BUFS + b, buf_ty(k, b), k->inner);
      w->vacc[b] = (CgAccess){ .buf = CG_MAX_BUFS + b, .istride = 1 };
      w->base[k->nacc + b] = hci(w, CT_I64, 0);
    }
  int nout = k->flat > 0 ? 0 : k->nouter, od[TD_MAX_DIMS], npass = 0;
  for (int i = 0; i < k->nins; i++) npass += k->ins[i].kind == CG_PASS;
  w->pf = nout > 0 && npass > 1;
  if (nout > 0) {                           /* outer index of r0; osize[0] is not needed (run-time size) */
    int rem = 0;                            /* handle 0: r0 */
    for (int d = nout - 1; d > 0; d--) {
      int sz = hci(w, CT_I64, k->osize[d]);
      od[d] = var(w, CT_I64, op2(w, CT_I64, CG_E_MOD, rem, sz));
      rem = op2(w, CT_I64, CG_E_DIV, rem, sz);
    }
    od[0] = var(w, CT_I64, rem);
  }
  int r = var(w, CT_I64, 0);
  E->begin_loop(E, r, 0, 1, 1);
  for (int a = 0; a < k->nacc; a++) {       /* row bases */
    const CgAccess *ac = &k->acc[a];
    int b = hci(w, CT_I64, ac->offset);
    if (k->flat > 0) {
      if (ac->istride) b = op2(w, CT_I64, CG_E_ADD, b, op2(w, CT_I64, CG_E_MUL, r, hci(w, CT_I64, k->inner * ac->istride)));
    } else {
      for (int d = 0; d < nout; d++)
        if (ac->ostride[d]) b = op2(w, CT_I64, CG_E_ADD, b, op2(w, CT_I64, CG_E_MUL, od[d], hci(w, CT_I64, ac->ostride[d])));
    }
    w->base[a] = b;
  }
  if (k->nscratch > 0)                      /* column sums: the slot of this row's block */
    w->cs = op2(w, CT_I64, CG_E_MUL, op2(w, CT_I64, CG_E_DIV, r, w->dim[CG_DIM_BLK]), hci(w, CT_I64, k->inner));
  int n = hci(w, CT_I64, k->inner);
  if (k->flat > 0) {
    int t = op2(w, CT_I64, CG_E_SUB, w->dim[CG_DIM_N], op2(w, CT_I64, CG_E_MUL, r, n));
    n = w_sel(w, op2(w, CT_BOOL, CG_E_LT, t, n), t, n);
  }
  for (int i = 0; i < k->nins && !w->rc; ) {
    const CgIns *in = &k->ins[i];
    if (in->kind == CG_PASS) { i = w_pass(w, i, n); continue; }
    if (in->kind != CG_CONST && in->kind != CG_ARG && in->kind != CG_ENDPASS) {
      if (in->level != 0) { w->rc = cg_bad_ir(k, "element-level instruction outside a pass"); break; }
      emit_row_ins(w, i);
    }
    i++;
  }
  if (nout > 0) {                           /* next row's outer index */
    int d = nout - 1, depth = 0;
    for (;; d--) {
      E->emit_assign(E, od[d], op2(w, CT_I64, CG_E_ADD, od[d], hci(w, CT_I64, 1)));
      if (d == 0) break;
      E->begin_if(E, op2(w, CT_BOOL, CG_E_EQ, od[d], hci(w, CT_I64, k->osize[d])));
      E->emit_assign(E, od[d], hci(w, CT_I64, 0));
      depth++;
    }
    while (depth--) E->end_if(E);
  }
  E->end_loop(E);
  if (w->nt >= 0) { E->begin_if(E, w->nt); E->emit_fence(E); E->end_if(E); }
done:
  rc = w->rc;
  int rc2 = E->end_kernel(E);
  free(w->ty); free(w->val); free(w->pv); free(w->inpass); free(w->base);
  return rc ? rc : rc2;
}

/* -- Kernel helpers ------------------------------------------------------------------- */

void cg_kernel_dims(const CgKernel *k, int64_t dims[CG_NDIMS])
{
  int64_t nblk = k->cred > 0 && k->cblk > 0 ? (k->cred + k->cblk - 1) / k->cblk : 0;
  dims[CG_DIM_N] = k->flat > 0 ? k->flat : k->cred;
  dims[CG_DIM_BLK] = k->cblk;
  dims[CG_DIM_NBLK] = nblk;
  if (k->cred <= 0 && k->nscratch > 0) {   /* row mode column sums: about 16 blocks, by the row count only */
    int64_t rows = cg_kernel_rows(k), b = (rows + 15) / 16;
    b = b < 1 ? 1 : b > CG_CSUM_BLK ? CG_CSUM_BLK : b;
    dims[CG_DIM_BLK] = b;
    dims[CG_DIM_NBLK] = (rows + b - 1) / b;
  }
  dims[CG_DIM_UNITS] = k->cred > 0 ? cg_kernel_rows(k) * nblk : 0;
  dims[CG_DIM_NT] = 0;
}

/* Row arrays. A buffer that a row kernel stores, reads back in a later pass
** and stores last (softmax keeps e = exp(x - max) in y, then scales it) keeps
** its row in between in a local array instead: the output is then written
** once, by its last store (non-temporal when big), and never read. Returns the
** pass of those last stores, or -1. Rows up to 64 KiB (on the stack). */
static int row_keep(const CgKernel *k, int b)
{
  if (k->cred > 0 || k->flat > 0 || b < 0 || b >= k->nbuf || k->inner < 2) return -1;
  int dt = k->buf_dtype[b];
  if ((dt != TD_FLOAT32 && dt != TD_FLOAT64) || k->inner * rt_dtype_size(dt) > (1 << 16)) return -1;
  const CgAccess *a0 = NULL;
  int last = -1, st0 = INT32_MAX, ld0 = INT32_MAX, ldi = -1;
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    if ((in->kind != CG_LOAD && in->kind != CG_STORE) || in->acc < 0 || in->acc >= k->nacc || k->acc[in->acc].buf != b)
      continue;
    const CgAccess *a = &k->acc[in->acc];
    if (in->level != 1 || a->istride != 1) return -1;
    if (!a0) a0 = a;
    else if (a->offset != a0->offset || memcmp(a->ostride, a0->ostride, sizeof a->ostride) != 0) return -1;
    if (in->kind == CG_STORE) { if (in->pass > last) last = in->pass; if (in->pass < st0) st0 = in->pass; }
    else { ldi = i; if (in->pass < ld0) ld0 = in->pass; }
  }
  if (ldi < 0 || st0 >= ld0) return -1;
  for (int i = 0; i < ldi; i++)             /* every load before the last stores */
    if (k->ins[i].kind == CG_STORE && k->ins[i].pass == last && k->acc[k->ins[i].acc].buf == b) return -1;
  return last;
}

/* a unit-stride float store whose rows start 64-byte aligned, into a buffer
** the kernel does not read back (or reads back from its row array) */
static bool nt_access(const CgKernel *k, int acc)
{
  const CgAccess *a = &k->acc[acc];
  int dt = k->buf_dtype[a->buf];
  if ((dt != TD_FLOAT32 && dt != TD_FLOAT64) || a->istride != 1) return false;
  if (row_keep(k, a->buf) < 0)
    for (int i = 0; i < k->nins; i++)
      if (k->ins[i].kind == CG_LOAD && k->acc[k->ins[i].acc].buf == a->buf) return false;
  int64_t es = rt_dtype_size(dt);
  if (a->offset * es % 64) return false;
  if (k->flat > 0) return k->inner * es % 64 == 0;
  for (int d = 0; d < k->nouter; d++) if (a->ostride[d] * es % 64) return false;
  return k->inner * es >= 64;
}

/* Bytes a row writes through non-temporal stores: all of the kernel's
** element stores, or none (a loop mixing them with normal stores ran slower:
** softmax fwd+bwd 11 -> 19 ms). */
static int64_t nt_row_bytes(const CgKernel *k)
{
  int64_t n = 0;
  if (k->cred > 0) return 0;
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    if (in->kind != CG_STORE || in->level != 1) continue;
    if (in->acc < 0 || in->acc >= k->nacc) return 0;
    int keep = row_keep(k, k->acc[in->acc].buf);
    if (keep >= 0 && in->pass < keep) continue;    /* into the row array */
    if (!nt_access(k, in->acc)) return 0;
    n += k->inner * rt_dtype_size(k->buf_dtype[k->acc[in->acc].buf]);
  }
  return n;
}

bool cg_store_nt(const CgKernel *k, int acc)
{
  return k->ntrow > 0 && acc >= 0 && acc < k->nacc && nt_access(k, acc);
}

int64_t cg_kernel_rows(const CgKernel *k)
{
  if (k->flat > 0) return k->inner > 0 ? (k->flat + k->inner - 1) / k->inner : 0;
  int64_t n = 1;
  for (int d = 0; d < k->nouter; d++) n *= k->osize[d];
  if (k->cred > 0 && k->ctile > 0) n *= (k->inner + k->ctile - 1) / k->ctile;   /* column tiles */
  return n;
}

#define FNV_OFF 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= FNV_PRIME; }
  return h;
}
#define FNV_FIELD(h, x) ((h) = fnv((h), &(x), sizeof (x)))

/* field by field: no padding bytes reach the hash */
static uint64_t kernel_hash(const CgKernel *k)
{
  uint64_t h = FNV_OFF;
  FNV_FIELD(h, k->nbuf);
  h = fnv(h, k->buf_dtype, k->nbuf > 0 ? (size_t)k->nbuf : 0);
  FNV_FIELD(h, k->nouter);
  /* not the run-time sizes (cg.h: osize[0], flat, cred, cblk), only the mode */
  for (int d = 1; d < k->nouter; d++) FNV_FIELD(h, k->osize[d]);
  int8_t mode = k->flat > 0 ? 1 : k->cred > 0 ? 2 : 0;
  FNV_FIELD(h, mode);
  FNV_FIELD(h, k->inner); FNV_FIELD(h, k->nargs);
  if (k->cred > 0) { FNV_FIELD(h, k->ctile); FNV_FIELD(h, k->nscratch); }
  FNV_FIELD(h, k->nacc);
  for (int i = 0; i < k->nacc; i++) {
    const CgAccess *a = &k->acc[i];
    FNV_FIELD(h, a->buf); FNV_FIELD(h, a->offset); FNV_FIELD(h, a->istride);
    if (k->cred > 0) FNV_FIELD(h, a->rstride);
    for (int d = 0; d < k->nouter; d++) FNV_FIELD(h, a->ostride[d]);
  }
  FNV_FIELD(h, k->nins);
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    FNV_FIELD(h, in->kind); FNV_FIELD(h, in->op); FNV_FIELD(h, in->dtype); FNV_FIELD(h, in->level);
    FNV_FIELD(h, in->pass); FNV_FIELD(h, in->a); FNV_FIELD(h, in->b); FNV_FIELD(h, in->c);
    FNV_FIELD(h, in->acc); FNV_FIELD(h, in->flags); FNV_FIELD(h, in->f[0]); FNV_FIELD(h, in->f[1]);
  }
  return h;
}

void cg_kernel_finish(CgKernel *k, const char *hint)
{
  k->hash = kernel_hash(k);
  k->ntrow = nt_row_bytes(k);
  char h[24] = { 0 };
  int n = 0;
  for (const char *p = hint ? hint : ""; *p && n < 40; p++)
    h[n < 23 ? n : 22] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) ? *p : '_', n++;
  h[n < 23 ? n : 23] = 0;
  snprintf(k->name, sizeof k->name, "k_%s_%016llx", n ? h : "anon", (unsigned long long)k->hash);
}

void cg_kernel_free(CgKernel *k)
{
  if (!k) return;
  free(k->acc); free(k->ins);
  k->acc = NULL; k->ins = NULL; k->nacc = k->nins = 0;
}
