/*
** cg_walk_alu.c -- the lowering of every elementwise RT_OP_* into emitter
** primitives, with the eager kernels' semantics (rt_ew.c), and the math
** function calls (libm, libmvec, or inline polynomials: cg_walk_vmath.c).
*/
#include "cg_walk.h"

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
** (float32 exp and erf: inline, cg_walk_vmath.c); lanewise: a function without a
** vector form (correctly rounded ones: sqrt, floor, ...), called per lane on
** vectors. A target whose functions take vectors (OpenCL) gets the libm name. */
static int w_math(W *w, const char *f, int n, const int *a, int lanewise)
{
  int t = w->ty[a[0]];
  char name[32];
  snprintf(name, sizeof name, "%s%s", f, cg_ty_elem(t) == CT_F32 ? "f" : "");
  if (!cg_ty_is_vec(t) || !w->caps->libmvec) return call(w, t, name, n, a);
  if (!lanewise) {
    if (cg_ty_elem(t) == CT_F32 && !strcmp(name, "expf") && w->caps->inline_vmath) return w_vexpf(w, a[0]);
    if (cg_ty_elem(t) == CT_F32 && !strcmp(name, "erff") && w->caps->inline_vmath) return w_verff(w, a[0]);
    char vn[48];
    return call(w, t, cg_vec_fname(name, w->L, vn, sizeof vn), n, a);
  }
  int tmp = var(w, t, a[0]), b = n > 1 ? var(w, t, a[1]) : -1;
  for (int j = 0; j < w->L; j++) {
    int jj = hci(w, CT_I64, j), x[2] = { lane_get(w, tmp, jj), n > 1 ? lane_get(w, b, jj) : -1 };
    w->e->emit_lane_set(w->e, tmp, jj, call(w, cg_ty_elem(t), name, n, x));
  }
  return tmp;
}
static int w_math1(W *w, const char *f, int x) { return w_math(w, f, 1, &x, 0); }

/* sin and cos of float32 vector x: made once for both (sin(x)^2 + cos(x)^2
** reads one value twice), the pair remembered by x's handle. Handles are
** never reused, so a remembered pair is one of this x, emitted before it in
** the same loop body (the walker's ALU ops are straight-line code there). */
static void w_sincos(W *w, int x, int *s, int *c)
{
  for (int i = 0; i < w->nsc; i++)
    if (w->sc_x[i] == x) { *s = w->sc_s[i]; *c = w->sc_c[i]; return; }
  w_vsincosf(w, x, s, c);
  int i = w->nsc < 8 ? w->nsc++ : 7;
  w->sc_x[i] = x; w->sc_s[i] = *s; w->sc_c[i] = *c;
}

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

/* one elementwise op (rt_ew.c semantics); returns its handle */
int w_alu(W *w, const CgIns *in)
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
  case RT_OP_SIN: case RT_OP_COS:
    if (cg_ty_is_vec(T) && cg_ty_elem(T) == CT_F32 && w->caps->inline_vmath) {   /* both at once, inline (cg_walk_vmath.c) */
      int sv, cv;
      w_sincos(w, x, &sv, &cv);
      return op == RT_OP_SIN ? sv : cv;
    }
    return w_math1(w, op == RT_OP_SIN ? "sin" : "cos", x);
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
  case RT_OP_ATAN2: case RT_OP_HYPOT: {   /* libm, per lane: the eager kernels' exact values */
    if (!fl) break;
    int a2[2] = { x, y };
    return w_math(w, op == RT_OP_ATAN2 ? "atan2" : "hypot", 2, a2, 1);
  }
  case RT_OP_FMOD: case RT_OP_REMAINDER: {   /* rt_ew.c: IMOD/IREM, fmod and REM_F */
    int m;
    if (fl) { int a2[2] = { x, y }; m = w_math(w, "fmod", 2, a2, 1); }
    else {
      if (dt == TD_BOOL) break;
      int one = w_c(w, T, 1);
      int bad = w_or(w, w_cmp(w, CG_E_EQ, y, zero), w_cmp(w, CG_E_EQ, y, w_c(w, T, -1)));
      m = op2(w, T, CG_E_MOD, x, w_sel(w, bad, one, y));
    }
    if (op == RT_OP_FMOD || dt == TD_UINT8) return m;
    /* m != 0 and sign(m) != sign(y): y < 0 ? m > 0 : m < 0 */
    int ylt = w_cmp(w, CG_E_LT, y, zero);
    int fix = w_or(w, w_and(w, ylt, w_cmp(w, CG_E_GT, m, zero)), w_and(w, w_not(w, ylt), w_cmp(w, CG_E_LT, m, zero)));
    return w_sel(w, fix, op2(w, T, CG_E_ADD, m, y), m);
  }
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
