/*
** cg_c.c -- the C text printer of the kernel IR (a CgEmitter): one GNU C
** translation unit equivalent to what cg_gccjit.c builds, printed by
** TIDE_LOG=code and embedded in compile error messages.
*/
#include "cg_emit.h"
#include "cg_text.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Language data -------------------------------------------------------------------- */

static const char *const c_tyname[CT__MAX] = {
#define CG_TYNAME(name, c, size) c,
  CG_TYDEF(CG_TYNAME)
#undef CG_TYNAME
};
static const char *const c_opstr[CG_E__MAX] = {
#define CG_EOPSTR(name, c, ar) c,
  CG_EOPDEF(CG_EOPSTR)
#undef CG_EOPSTR
};
static const char *const c_buftype[TD_DTYPE__MAX] = { "uint8_t", "uint8_t", "int32_t", "int64_t", "float", "double" };

/* -- The emitter -------------------------------------------------------------------- */

typedef struct {
  CgEmitter em;
  CgText body;              /* kernel functions */
  CgText decl;              /* libmvec prototypes */
  CgNames nt;             /* per handle: its text and type */
  int depth, vl;
  const CgKernel *k;
} CE;

static const char *nm(CE *c, int v) { return cg_names_get(&c->nt, v); }
static int lanes_of(CE *c, int ty) { return ty == CT_VF32 || ty == CT_VU32 ? c->vl : c->vl / 2; }

static void set_name(CE *c, int v, int ty, const char *text) { cg_names_set(&c->nt, v, ty, text); }

static void line(CE *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(CE *c, const char *fmt, ...)
{
  cg_text_printf(&c->body, "%*s", 2 * c->depth, "");
  va_list ap; va_start(ap, fmt); cg_text_vprintf(&c->body, fmt, ap); va_end(ap);
  cg_text_printf(&c->body, "\n");
}

/* a fresh local named v<N> */
static const char *local(CE *c, int v, int ty)
{
  char b[24]; snprintf(b, sizeof b, "v%d", v);
  set_name(c, v, ty, b);
  return nm(c, v);
}

static void scalar_lit(char *b, size_t n, int ty, double x, int64_t ix)
{
  switch (ty) {
  case CT_F32: case CT_F64: {
    const char *sfx = ty == CT_F32 ? "f" : "";
    if (isnan(x)) { snprintf(b, n, "__builtin_nan%s(\"\")", sfx); return; }
    if (isinf(x)) { snprintf(b, n, "%s__builtin_inf%s()", x < 0 ? "-" : "", sfx); return; }
    char t[40];
    snprintf(t, sizeof t, ty == CT_F32 ? "%.9g" : "%.17g", ty == CT_F32 ? (double)(float)x : x);
    int dot = strpbrk(t, ".e") != NULL;
    snprintf(b, n, x < 0 || signbit(x) ? "(%s%s%s)" : "%s%s%s", t, dot ? "" : ".0", sfx);
    return;
  }
  case CT_BOOL: snprintf(b, n, "%d", ix != 0); return;
  case CT_U8: snprintf(b, n, "(uint8_t)%d", (int)(uint8_t)ix); return;
  case CT_I32: snprintf(b, n, ix < 0 ? "(%d)" : "%d", (int)ix); return;
  case CT_U32: snprintf(b, n, "%uu", (unsigned)ix); return;
  case CT_U64: snprintf(b, n, "%lluull", (unsigned long long)ix); return;
  default:
    if (ix == INT64_MIN) snprintf(b, n, "(-9223372036854775807ll - 1)");
    else snprintf(b, n, ix < 0 ? "(%lldll)" : "%lldll", (long long)ix);
  }
}

static void c_const(CgEmitter *e, int v, int ty, double x, int64_t ix)
{
  CE *c = (CE *)e;
  char s[64];
  scalar_lit(s, sizeof s, cg_ty_elem(ty), x, ix);
  if (!cg_ty_is_vec(ty)) { set_name(c, v, ty, s); return; }
  CgText b = { 0 };
  cg_text_printf(&b, "((%s){", c_tyname[ty]);
  for (int j = 0; j < lanes_of(c, ty); j++) cg_text_printf(&b, j ? ", %s" : "%s", s);
  cg_text_printf(&b, "})");
  set_name(c, v, ty, b.p ? b.p : "?");
  free(b.p);
}

static void c_arg(CgEmitter *e, int v, int idx)
{
  CE *c = (CE *)e;
  line(c, "double %s = args[%d];", local(c, v, CT_F64), idx);
}
static void c_dim(CgEmitter *e, int v, int idx)
{
  CE *c = (CE *)e;
  line(c, "int64_t %s = dims[%d];", local(c, v, CT_I64), idx);
}

static int c_op(CgEmitter *e, int v, int ty, int op, int a, int b, int d)
{
  CE *c = (CE *)e;
  /* handle texts are separate strings: they stay valid while v is named */
  const char *an = nm(c, a), *bn = nm(c, b), *dn = nm(c, d);
  const char *t = c_tyname[ty], *x = local(c, v, ty);
  switch (op) {
  case CG_E_NEG: case CG_E_BNOT: case CG_E_LNOT: line(c, "%s %s = %s%s;", t, x, c_opstr[op], an); break;
  case CG_E_CAST: case CG_E_BITCAST: line(c, "%s %s = (%s)%s;", t, x, t, an); break;
  case CG_E_COPY: line(c, "%s %s = %s;", t, x, an); break;
  case CG_E_SELECT: line(c, "%s %s = %s ? %s : %s;", t, x, an, bn, dn); break;
  case CG_E_SPLAT: {
    CgText s = { 0 };
    for (int j = 0; j < lanes_of(c, ty); j++) cg_text_printf(&s, j ? ", %s" : "%s", an);
    line(c, "%s %s = { %s };", t, x, s.p ? s.p : "");
    free(s.p);
    break;
  }
  default:
    if (op < 0 || op >= CG_E__MAX) return rt_err(TD_ERR_ARG, "cg: NYI primitive %s in the C printer (kernel %s)", cg_eop_name(op), c->k->name);
    line(c, "%s %s = %s %s %s;", t, x, an, c_opstr[op], bn);
  }
  return 0;
}

static void c_call(CgEmitter *e, int v, int ty, const char *f, int n, const int *a)
{
  CE *c = (CE *)e;
  char key[64];
  snprintf(key, sizeof key, " %s(", f);
  if (cg_ty_is_vec(ty) && (!c->decl.p || !strstr(c->decl.p, key))) {
    cg_text_printf(&c->decl, "%s %s(%s%s%s);\n", c_tyname[ty], f, c_tyname[ty], n > 1 ? ", " : "", n > 1 ? c_tyname[ty] : "");
  }
  CgText s = { 0 };
  for (int j = 0; j < n; j++) cg_text_printf(&s, j ? ", %s" : "%s", nm(c, a[j]));
  line(c, "%s %s = %s(%s);", c_tyname[ty], local(c, v, ty), f, s.p ? s.p : "");
  free(s.p);
}

static void c_load(CgEmitter *e, int v, int ty, int buf, int idx)
{
  CE *c = (CE *)e;
  const char *ix = nm(c, idx);
  if (cg_ty_is_vec(ty)) line(c, "%s %s = *(const %su *)(p%d + %s);", c_tyname[ty], local(c, v, ty), c_tyname[ty], buf, ix);
  else line(c, "%s %s = p%d[%s];", c_tyname[ty], local(c, v, ty), buf, ix);
}

static void c_prefetch(CgEmitter *e, int buf, int idx, int write)
{ CE *c = (CE *)e; line(c, "__builtin_prefetch(p%d + %s, %d);", buf, nm(c, idx), write != 0); }

static void c_store(CgEmitter *e, int ty, int buf, int idx, int val)
{
  CE *c = (CE *)e;
  if (cg_ty_is_vec(ty)) line(c, "*(%su *)(p%d + %s) = %s;", c_tyname[ty], buf, nm(c, idx), nm(c, val));
  else line(c, "p%d[%s] = %s;", buf, nm(c, idx), nm(c, val));
}

/* as cg_gccjit.c prints it: base and index in registers, a memory clobber */
static void c_store_nt(CgEmitter *e, int ty, int buf, int idx, int val)
{
  CE *c = (CE *)e;
  line(c, "__asm__ volatile(\"%s\" :: \"r\"(p%d), \"r\"(%s), \"v\"(%s) : \"memory\");", cg_nt_asm(ty), buf, nm(c, idx),
       nm(c, val));
}
static void c_row_array(CgEmitter *e, int slot, int ty, int64_t n)
{
  CE *c = (CE *)e;
  line(c, "%s row%d[%lld] __attribute__((aligned(64)));", c_tyname[ty], slot, (long long)n);
  line(c, "%s *p%d = row%d;", c_tyname[ty], slot, slot);
}
static void c_fence(CgEmitter *e) { line((CE *)e, "__asm__ volatile(\"sfence\" ::: \"memory\");"); }

static void c_var(CgEmitter *e, int v, int ty, int init)
{
  CE *c = (CE *)e;
  const char *in = nm(c, init);
  line(c, "%s %s = %s;", c_tyname[ty], local(c, v, ty), in);
}
static void c_assign(CgEmitter *e, int var, int val) { CE *c = (CE *)e; line(c, "%s = %s;", nm(c, var), nm(c, val)); }

static void c_lane_get(CgEmitter *e, int v, int vec, int j)
{
  CE *c = (CE *)e;
  int et = cg_ty_elem(c->nt.ty[vec]);
  const char *vn = nm(c, vec), *jn = nm(c, j);
  line(c, "%s %s = ((%s *)&%s)[%s];", c_tyname[et], local(c, v, et), c_tyname[et], vn, jn);
}
static void c_lane_set(CgEmitter *e, int vec, int j, int val)
{
  CE *c = (CE *)e;
  int et = cg_ty_elem(c->nt.ty[vec]);
  line(c, "((%s *)&%s)[%s] = %s;", c_tyname[et], nm(c, vec), nm(c, j), nm(c, val));
}

static void c_begin_loop(CgEmitter *e, int iv, int lo, int hi, int64_t step)
{
  CE *c = (CE *)e;
  const char *i = nm(c, iv);
  if (step == 1) line(c, "for (%s = %s; %s < %s; %s++) {", i, nm(c, lo), i, nm(c, hi), i);
  else line(c, "for (%s = %s; %s < %s; %s += %lld) {", i, nm(c, lo), i, nm(c, hi), i, (long long)step);
  c->depth++;
}
static void c_end(CgEmitter *e) { CE *c = (CE *)e; c->depth--; line(c, "}"); }
static void c_begin_if(CgEmitter *e, int cond) { CE *c = (CE *)e; line(c, "if (%s) {", nm(c, cond)); c->depth++; }
static void c_comment(CgEmitter *e, const char *t) { CE *c = (CE *)e; line(c, "/* %s */", t); }

static int c_begin_kernel(CgEmitter *e, const CgKernel *k, int vlanes)
{
  CE *c = (CE *)e;
  c->k = k; c->vl = vlanes; c->depth = 0;
  cg_names_clear(&c->nt);
  set_name(c, 0, CT_I64, "r0"); set_name(c, 1, CT_I64, "r1");
  /* no run-time size in the text (cg.h): it is a function of the kernel hash */
  if (k->cred > 0) line(c, "/* %s: tiles of %lld columns (column mode: dims[0] reduction steps) */", k->name, (long long)k->ctile);
  else line(c, "/* %s: rows of %lld%s */", k->name, (long long)k->inner, k->flat > 0 ? " (flat: dims[0] elements)" : "");
  line(c, "void %s(int64_t r0, int64_t r1, char **bufs, const double *args, const int64_t *dims)\n{", k->name);
  c->depth = 1;
  line(c, "(void)args; (void)dims;");
  for (int b = 0; b < k->nbuf; b++) {
    const char *t = c_buftype[k->buf_dtype[b] >= 0 && k->buf_dtype[b] < TD_DTYPE__MAX ? k->buf_dtype[b] : TD_UINT8];
    line(c, "%s *p%d = (%s *)bufs[%d];", t, b, t, b);
  }
  return 0;
}
static int c_end_kernel(CgEmitter *e)
{
  CE *c = (CE *)e;
  c->depth = 0;
  line(c, "}\n");
  return c->nt.fail || c->body.oom ? rt_err(TD_ERR_NOMEM, "cg: out of memory printing C") : 0;
}

static void c_init(CE *c)
{
  memset(c, 0, sizeof *c);
  c->em = (CgEmitter){ c_begin_kernel, c_end_kernel, c_const, c_arg, c_dim, c_op, c_call, c_load, c_store, c_store_nt,
                       c_fence, c_row_array, c_prefetch, c_var, c_assign, c_lane_get, c_lane_set, c_begin_loop, c_end, c_begin_if, c_end, c_comment };
}
static void c_free(CE *c)
{
  cg_names_free(&c->nt);
  free(c->body.p); free(c->decl.p);
}

/* -- Entry points ------------------------------------------------------------------- */

char *cg_c_source_batch(CgKernel *const *ks, int n, int vlanes, int *rcp)
{
  CE c;
  c_init(&c);
  int rc = 0;
  c.em.caps = cg_caps_host(vlanes);
  for (int i = 0; i < n && !rc; i++) rc = cg_walk(ks[i], &c.em);
  CgText out = { 0 };
  int vb = vlanes * 4;
  cg_text_printf(&out, "/* tide kernels: gcc -O3 -march=%s -fno-math-errno -fno-trapping-math -shared ... -lmvec -lm */\n"
            "#include <stdint.h>\n#include <math.h>\n", cg_host_march());
  cg_text_printf(&out, "typedef float vf32 __attribute__((vector_size(%d)));\n"
            "typedef float vf32u __attribute__((vector_size(%d), aligned(4)));\n"
            "typedef double vf64 __attribute__((vector_size(%d)));\n"
            "typedef double vf64u __attribute__((vector_size(%d), aligned(8)));\n"
            "typedef uint32_t vu32 __attribute__((vector_size(%d)));\n"
            "typedef uint32_t vu32u __attribute__((vector_size(%d), aligned(4)));\n"
            "typedef uint64_t vu64 __attribute__((vector_size(%d)));\n"
            "typedef uint64_t vu64u __attribute__((vector_size(%d), aligned(8)));\n",
            vb, vb, vb, vb, vb, vb, vb, vb);
  if (c.decl.p) cg_text_printf(&out, "%s", c.decl.p);
  cg_text_printf(&out, "\n%s", c.body.p ? c.body.p : "");
  c_free(&c);
  if (out.oom) { free(out.p); rt_err(TD_ERR_NOMEM, "cg: out of memory printing C"); return NULL; }
  if (rcp) *rcp = rc;      /* on a walker error the text printed so far is still returned */
  return out.p;
}

char *cg_kernel_c_source(const CgKernel *k)
{
  CgKernel *ks[1] = { (CgKernel *)k };
  int rc = 0;
  char *s = cg_c_source_batch(ks, 1, cg_host_lanes(), &rc);
  if (rc) { free(s); return NULL; }
  return s;
}
