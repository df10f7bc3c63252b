/*
** cg_walk_prim.c -- the walker's primitives: value handles, logic that works
** alike on scalar bools and vector lane masks (compares and selects on the
** bits, as libgccjit 12 has no vector compare), conversions between types,
** and the code generators' error messages.
*/
#include "cg_walk.h"

/* -- Handles and primitives ------------------------------------------------------ */

int w_new(W *w, int ty)
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
int w_nan(W *w, int a)
{
  if (!cg_ty_is_vec(w->ty[a])) return op2(w, CT_BOOL, CG_E_NE, a, a);
  int u = bitc(w, a, utype(w->ty[a])), t = w->ty[u], b = ubits(t);
  int64_t absm = b == 32 ? 0x7fffffff : INT64_MAX, inf = b == 32 ? 0x7f800000 : 0x7ff0000000000000;
  return topbit(w, op2(w, t, CG_E_SUB, hci(w, t, inf), op2(w, t, CG_E_BAND, u, hci(w, t, absm))));
}
int w_not(W *w, int m)
{ return op1(w, w->ty[m], cg_ty_is_vec(w->ty[m]) ? CG_E_BNOT : CG_E_LNOT, m); }
int w_and(W *w, int a, int b)
{ return op2(w, w->ty[a], cg_ty_is_vec(w->ty[a]) ? CG_E_BAND : CG_E_LAND, a, b); }
int w_or(W *w, int a, int b)
{ return op2(w, w->ty[a], cg_ty_is_vec(w->ty[a]) ? CG_E_BOR : CG_E_LOR, a, b); }

/* a <op> b, op one of CG_E_EQ..GE: a bool, or a lane mask for vectors */
int w_cmp(W *w, int op, int a, int b)
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
int w_sel(W *w, int m, int a, int b)
{
  int t = w->ty[a];
  if (!cg_ty_is_vec(t)) return op3(w, t, CG_E_SELECT, m, a, b);
  int ut = utype(t), ua = bitc(w, a, ut), ub = bitc(w, b, ut);
  int r = op2(w, ut, CG_E_BXOR, ub, op2(w, ut, CG_E_BAND, op2(w, ut, CG_E_BXOR, ua, ub), m));
  return bitc(w, r, t);
}

/* -- Types and conversions ---------------------------------------------------------- */

/* the handle type of a dtype value in the current mode */
int w_tyof(W *w, int dt)
{
  if (w->mode == MODE_VMAIN || w->mode == MODE_VTAIL) return dt == TD_BOOL ? w->mt : w->vt;
  return dt;
}

int w_tobool(W *w, int a)
{
  int t = w->ty[a];
  if (t == CT_BOOL || t == CT_VU32 || t == CT_VU64) return a;
  return w_cmp(w, CG_E_NE, a, w_c(w, t, 0));
}
/* bool / mask a as 0 or 1 of type ty */
int w_b2x(W *w, int m, int ty)
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
int w_conv(W *w, int a, int ty)
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
