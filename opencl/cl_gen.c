/*
** cl_gen.c -- the OpenCL C printer of the kernel IR (a CgEmitter): the third
** printer beside libgccjit (jit/cg_gccjit.c) and C text (jit/cg_c.c), driven by
** the same walker (jit/cg_walk.c) in work-group mode. Prints OpenCL C 1.2 with
** no extension but cl_khr_fp64 (spec/opencl/strict_spec.lua checks every
** program with clang's strict front end).
*/

/*
** Design note.
** - A kernel is `kernel void k_<hint>_<hash>(long r0, long r1, global T0 *b0,
**   long o0, ..., k_..._par par)`: each buffer is a cl_mem and the element
**   offset where the kernel's buffer starts in it (arena blocks, views), and
**   par holds the run-time sizes and geometry (dims[], cg.h) and the scalar
**   arguments, by value (no buffer to write per launch). cl_exec.c fills it
**   with the same layout.
** - Language differences are data: the type names (float64 types printed as
**   float32 on a device without cl_khr_fp64), vector loads as vloadN (element
**   alignment suffices), bit casts as as_T, vector casts as convert_T, math
**   through the builtins (overloaded on vectors: "expf" prints "exp").
** - Local arrays (work-group reductions) must sit at kernel scope in OpenCL C:
**   they are printed at the top of the function whatever the walker's order.
*/
#include "cl.h"
#include "../jit/cg_emit.h"
#include "../jit/cg_text.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Language data -------------------------------------------------------------------- */

/* CgTy -> OpenCL C, with float64 (the vector names at 4 float32 lanes) and without */
static const char *const g_ty64[CT__MAX] = { "bool", "uchar", "int", "long", "float", "double", "uint", "ulong",
                                             "float4", "double2", "uint4", "ulong2" };
static const char *const g_ty32[CT__MAX] = { "bool", "uchar", "int", "long", "float", "float", "uint", "ulong",
                                             "float4", "float2", "uint4", "ulong2" };
static const char *const g_opstr[CG_E__MAX] = {
#define CG_EOPSTR(name, c, ar) c,
  CG_EOPDEF(CG_EOPSTR)
#undef CG_EOPSTR
};

/* -- The emitter ------------------------------------------------------------------------ */

typedef struct {
  CgEmitter em;
  CgText out;               /* the program */
  CgText body, loc;         /* the kernel being printed: its statements, its local arrays */
  CgNames nt;             /* per handle: its text and type */
  int depth;
  const CgKernel *k;
  const char *const *tn;  /* type names */
} GE;

static const char *nm(GE *g, int v) { return cg_names_get(&g->nt, v); }
static const char *tyn(GE *g, int t) { return t >= 0 && t < CT__MAX ? g->tn[t] : "?"; }
static int lanes_of(GE *g, int ty) { return ty == CT_VF32 || ty == CT_VU32 ? g->em.caps.vlanes : g->em.caps.vlanes / 2; }
/* a buffer's element type as stored (bool buffers hold bytes) */
static const char *buf_tyn(GE *g, int t) { return t == CT_BOOL ? "uchar" : tyn(g, t); }
static void slot_name(char *b, size_t n, int slot) { snprintf(b, n, slot >= CG_SLOT_LOCAL ? "l%d" : "p%d", slot); }

static void set_name(GE *g, int v, int ty, const char *text) { cg_names_set(&g->nt, v, ty, text); }

static void line(GE *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(GE *g, const char *fmt, ...)
{
  cg_text_printf(&g->body, "%*s", 2 * g->depth, "");
  va_list ap; va_start(ap, fmt); cg_text_vprintf(&g->body, fmt, ap); va_end(ap);
  cg_text_printf(&g->body, "\n");
}

static const char *local(GE *g, int v, int ty)
{
  char b[24]; snprintf(b, sizeof b, "v%d", v);
  set_name(g, v, ty, b);
  return nm(g, v);
}

static void scalar_lit(GE *g, char *b, size_t n, int ty, double x, int64_t ix)
{
  int f32 = ty == CT_F32 || (ty == CT_F64 && !g->em.caps.fp64);
  switch (ty) {
  case CT_F32: case CT_F64:
    if (isnan(x)) { snprintf(b, n, f32 ? "NAN" : "((double)NAN)"); return; }
    if (isinf(x)) { snprintf(b, n, f32 ? "(%sINFINITY)" : "(%s(double)INFINITY)", x < 0 ? "-" : ""); return; }
    {
      char t[40];
      snprintf(t, sizeof t, f32 ? "%.9g" : "%.17g", f32 ? (double)(float)x : x);
      int dot = strpbrk(t, ".e") != NULL;
      snprintf(b, n, x < 0 || signbit(x) ? "(%s%s%s)" : "%s%s%s", t, dot ? "" : ".0", f32 ? "f" : "");
    }
    return;
  case CT_BOOL: snprintf(b, n, "%d", ix != 0); return;
  case CT_U8: snprintf(b, n, "((uchar)%d)", (int)(uint8_t)ix); return;
  case CT_I32: snprintf(b, n, ix < 0 ? "(%d)" : "%d", (int)ix); return;
  case CT_U32: snprintf(b, n, "%uu", (unsigned)ix); return;
  case CT_U64: snprintf(b, n, "%lluUL", (unsigned long long)ix); return;
  default:
    if (ix == INT64_MIN) snprintf(b, n, "(-9223372036854775807L - 1)");
    else snprintf(b, n, ix < 0 ? "(%lldL)" : "%lldL", (long long)ix);
  }
}

static void g_const(CgEmitter *e, int v, int ty, double x, int64_t ix)
{
  GE *g = (GE *)e;
  char s[64], b[96];
  scalar_lit(g, s, sizeof s, cg_ty_elem(ty), x, ix);
  if (!cg_ty_is_vec(ty)) { set_name(g, v, ty, s); return; }
  snprintf(b, sizeof b, "((%s)(%s))", tyn(g, ty), s);
  set_name(g, v, ty, b);
}

static void g_arg(CgEmitter *e, int v, int idx)
{ GE *g = (GE *)e; line(g, "%s %s = par.a[%d];", tyn(g, CT_F64), local(g, v, CT_F64), idx); }
static void g_dim(CgEmitter *e, int v, int idx)
{ GE *g = (GE *)e; line(g, "long %s = par.d[%d];", local(g, v, CT_I64), idx); }

static int g_op(CgEmitter *e, int v, int ty, int op, int a, int b, int d)
{
  GE *g = (GE *)e;
  const char *an = nm(g, a), *bn = nm(g, b), *dn = nm(g, d), *t = tyn(g, ty), *x = local(g, v, ty);
  switch (op) {
  case CG_E_NEG: case CG_E_BNOT: case CG_E_LNOT: line(g, "%s %s = %s%s;", t, x, g_opstr[op], an); break;
  case CG_E_CAST:
    if (cg_ty_is_vec(ty)) line(g, "%s %s = convert_%s(%s);", t, x, t, an);
    else line(g, "%s %s = (%s)%s;", t, x, t, an);
    break;
  case CG_E_BITCAST: line(g, "%s %s = as_%s(%s);", t, x, t, an); break;
  case CG_E_SPLAT: line(g, "%s %s = (%s)(%s);", t, x, t, an); break;
  case CG_E_COPY: line(g, "%s %s = %s;", t, x, an); break;
  case CG_E_SELECT: line(g, "%s %s = %s ? %s : %s;", t, x, an, bn, dn); break;
  case CG_E_EQ: case CG_E_NE: case CG_E_LT: case CG_E_LE: case CG_E_GT: case CG_E_GE:
    /* x != x is the walker's NaN test; on integers it is a constant (clang warns on it) */
    if (a == b && a >= 0 && a < g->nt.cap && !cg_ty_is_float(g->nt.ty[a])) {
      line(g, "%s %s = %d;", t, x, op == CG_E_EQ || op == CG_E_LE || op == CG_E_GE);
      break;
    }
    line(g, "%s %s = %s %s %s;", t, x, an, g_opstr[op], bn);
    break;
  default:
    if (op < 0 || op >= CG_E__MAX)
      return rt_err(TD_ERR_ARG, "cg: NYI primitive %s in the OpenCL printer (kernel %s)", cg_eop_name(op), g->k->name);
    line(g, "%s %s = %s %s %s;", t, x, an, g_opstr[op], bn);
  }
  return 0;
}

/* libm names to OpenCL builtins: float32's "expf" is "exp" (overloaded, vectors too) */
static void g_call(CgEmitter *e, int v, int ty, const char *f, int n, const int *a)
{
  GE *g = (GE *)e;
  char fn[32];
  snprintf(fn, sizeof fn, "%s", f);
  size_t l = strlen(fn);
  if (cg_ty_elem(ty) == CT_F32 && l > 1 && fn[l - 1] == 'f' && strcmp(fn, "erf") != 0) fn[l - 1] = 0;
  CgText s = { 0 };
  for (int j = 0; j < n; j++) cg_text_printf(&s, j ? ", %s" : "%s", nm(g, a[j]));
  line(g, "%s %s = %s(%s);", tyn(g, ty), local(g, v, ty), fn, s.p ? s.p : "");
  free(s.p);
}

static void g_load(CgEmitter *e, int v, int ty, int buf, int idx)
{
  GE *g = (GE *)e;
  char b[16];
  slot_name(b, sizeof b, buf);
  if (cg_ty_is_vec(ty)) line(g, "%s %s = vload%d(0, %s + %s);", tyn(g, ty), local(g, v, ty), lanes_of(g, ty), b, nm(g, idx));
  else line(g, "%s %s = %s[%s];", tyn(g, ty), local(g, v, ty), b, nm(g, idx));
}

static void g_store(CgEmitter *e, int ty, int buf, int idx, int val)
{
  GE *g = (GE *)e;
  char b[16];
  slot_name(b, sizeof b, buf);
  if (cg_ty_is_vec(ty)) line(g, "vstore%d(%s, 0, %s + %s);", lanes_of(g, ty), nm(g, val), b, nm(g, idx));
  else line(g, "%s[%s] = %s;", b, nm(g, idx), nm(g, val));
}

/* CPU-only primitives: the caps never ask for them */
static void g_store_nt(CgEmitter *e, int ty, int buf, int idx, int val) { ((GE *)e)->nt.fail = 1; }
static void g_fence(CgEmitter *e) { ((GE *)e)->nt.fail = 1; }
static void g_row_array(CgEmitter *e, int slot, int ty, int64_t n) { ((GE *)e)->nt.fail = 1; }
static void g_prefetch(CgEmitter *e, int buf, int idx, int write) { ((GE *)e)->nt.fail = 1; }

static void g_var(CgEmitter *e, int v, int ty, int init)
{ GE *g = (GE *)e; const char *in = nm(g, init); line(g, "%s %s = %s;", tyn(g, ty), local(g, v, ty), in); }
static void g_assign(CgEmitter *e, int var, int val) { GE *g = (GE *)e; line(g, "%s = %s;", nm(g, var), nm(g, val)); }

static void g_lane_get(CgEmitter *e, int v, int vec, int j)
{
  GE *g = (GE *)e;
  int et = cg_ty_elem(g->nt.ty[vec]);
  const char *vn = nm(g, vec), *jn = nm(g, j);
  line(g, "%s %s = ((%s *)&%s)[%s];", tyn(g, et), local(g, v, et), tyn(g, et), vn, jn);
}
static void g_lane_set(CgEmitter *e, int vec, int j, int val)
{
  GE *g = (GE *)e;
  int et = cg_ty_elem(g->nt.ty[vec]);
  line(g, "((%s *)&%s)[%s] = %s;", tyn(g, et), nm(g, vec), nm(g, j), nm(g, val));
}

static void g_begin_loop(CgEmitter *e, int iv, int lo, int hi, int64_t step)
{
  GE *g = (GE *)e;
  const char *i = nm(g, iv);
  if (step == 1) line(g, "for (%s = %s; %s < %s; %s++) {", i, nm(g, lo), i, nm(g, hi), i);
  else line(g, "for (%s = %s; %s < %s; %s += %lldL) {", i, nm(g, lo), i, nm(g, hi), i, (long long)step);
  g->depth++;
}
static void g_begin_loop_step(CgEmitter *e, int iv, int lo, int hi, int step)
{
  GE *g = (GE *)e;
  const char *i = nm(g, iv);
  line(g, "for (%s = %s; %s < %s; %s += %s) {", i, nm(g, lo), i, nm(g, hi), i, nm(g, step));
  g->depth++;
}
static void g_end(CgEmitter *e) { GE *g = (GE *)e; g->depth--; line(g, "}"); }
static void g_begin_if(CgEmitter *e, int cond) { GE *g = (GE *)e; line(g, "if (%s) {", nm(g, cond)); g->depth++; }
static void g_comment(CgEmitter *e, const char *t) { GE *g = (GE *)e; line(g, "/* %s */", t); }

static void g_wgid(CgEmitter *e, int v, int what)
{
  GE *g = (GE *)e;
  static const char *const fn[] = { "get_local_id", "get_group_id", "get_num_groups" };
  line(g, "long %s = (long)%s(0);", local(g, v, CT_I64), fn[what < 0 || what > 2 ? 0 : what]);
}
static void g_barrier(CgEmitter *e) { line((GE *)e, "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"); }
static void g_local_array(CgEmitter *e, int slot, int ty, int64_t n)
{
  GE *g = (GE *)e;
  cg_text_printf(&g->loc, "  local %s l%d[%lld];\n", buf_tyn(g, ty), slot, (long long)n);
}

static int g_begin_kernel(CgEmitter *e, const CgKernel *k, int vlanes)
{
  GE *g = (GE *)e;
  g->k = k; g->depth = 1;
  g->body.n = 0; g->loc.n = 0;
  if (g->body.p) g->body.p[0] = 0;
  if (g->loc.p) g->loc.p[0] = 0;
  cg_names_clear(&g->nt);
  set_name(g, 0, CT_I64, "r0"); set_name(g, 1, CT_I64, "r1");
  /* the parameters: a struct by value (cl_exec.c's layout: dims, then args) */
  cg_text_printf(&g->out, "typedef struct { long d[%d];", cg_kernel_ndims(k));
  if (k->nargs > 0) cg_text_printf(&g->out, " %s a[%d];", tyn(g, CT_F64), k->nargs);
  cg_text_printf(&g->out, " } %s_par;\n", k->name);
  if (k->cred > 0) cg_text_printf(&g->out, "/* %s: tiles of %lld columns (column mode) */\n", k->name, (long long)k->ctile);
  else cg_text_printf(&g->out, "/* %s: %s */\n", k->name, k->rtgeo ? "run-time geometry" : k->flat > 0 ? "flat" : "rows");
  cg_text_printf(&g->out, "kernel void %s(long r0, long r1", k->name);
  for (int b = 0; b < k->nbuf; b++) {
    int bt = k->buf_dtype[b] >= 0 && k->buf_dtype[b] < TD_DTYPE__MAX ? k->buf_dtype[b] : TD_UINT8;
    cg_text_printf(&g->out, ", global %s *b%d, long o%d", buf_tyn(g, bt), b, b);
  }
  cg_text_printf(&g->out, ", %s_par par)\n{\n", k->name);
  for (int b = 0; b < k->nbuf; b++) {
    int bt = k->buf_dtype[b] >= 0 && k->buf_dtype[b] < TD_DTYPE__MAX ? k->buf_dtype[b] : TD_UINT8;
    line(g, "global %s *p%d = b%d + o%d;", buf_tyn(g, bt), b, b, b);
  }
  (void)vlanes;
  return 0;
}

static int g_end_kernel(CgEmitter *e)
{
  GE *g = (GE *)e;
  cg_text_printf(&g->out, "%s%s}\n\n", g->loc.p ? g->loc.p : "", g->body.p ? g->body.p : "");
  if (g->nt.fail || g->out.oom || g->body.oom || g->loc.oom)
    return rt_err(TD_ERR_NOMEM, "opencl: out of memory printing %s (or a CPU-only primitive)", g->k ? g->k->name : "?");
  return 0;
}

/* -- Entry -------------------------------------------------------------------------------- */

/* The OpenCL C of kernels ks[0..n) as one program (malloc'd; NULL when out of
** memory). *rc: the walker's result (on an error, the text printed so far). */
char *ocl_source_batch(CgKernel *const *ks, int n, const CgCaps *caps, int *rc)
{
  GE g;
  memset(&g, 0, sizeof g);
  g.em = (CgEmitter){ g_begin_kernel, g_end_kernel, g_const, g_arg, g_dim, g_op, g_call, g_load, g_store, g_store_nt,
                      g_fence, g_row_array, g_prefetch, g_var, g_assign, g_lane_get, g_lane_set, g_begin_loop, g_end,
                      g_begin_if, g_end, g_comment, g_begin_loop_step, g_wgid, g_barrier, g_local_array };
  g.em.caps = *caps;
  g.tn = caps->fp64 ? g_ty64 : g_ty32;
  cg_text_printf(&g.out, "/* tide kernels: OpenCL C 1.2 printed from the kernel IR (opencl/cl_gen.c), "
            "work groups of %d */\n", caps->wg);
  if (caps->fp64) cg_text_printf(&g.out, "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n");
  cg_text_printf(&g.out, "\n");
  int r = 0;
  for (int i = 0; i < n && !r; i++) r = cg_walk(ks[i], &g.em);
  cg_names_free(&g.nt);
  free(g.body.p); free(g.loc.p);
  if (g.out.oom) { free(g.out.p); rt_err(TD_ERR_NOMEM, "opencl: out of memory printing kernels"); return NULL; }
  if (rc) *rc = r;
  return g.out.p;
}
