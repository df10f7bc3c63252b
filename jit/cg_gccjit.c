/*
** cg_gccjit.c -- the libgccjit printer of the kernel IR (a CgEmitter) and the
** compile of one batch of kernels: one context, one compiler run, into memory
** or into a shared object for the disk cache (cg_cache.c).
*/
#include "cg_emit.h"
#include "cg_gccjit_dl.h"     /* libgccjit through a table, loaded on first use */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Language data -------------------------------------------------------------------- */

static const enum gcc_jit_binary_op g_binop[CG_E__MAX] = {
  [CG_E_ADD] = GCC_JIT_BINARY_OP_PLUS, [CG_E_SUB] = GCC_JIT_BINARY_OP_MINUS,
  [CG_E_MUL] = GCC_JIT_BINARY_OP_MULT, [CG_E_DIV] = GCC_JIT_BINARY_OP_DIVIDE,
  [CG_E_MOD] = GCC_JIT_BINARY_OP_MODULO, [CG_E_BAND] = GCC_JIT_BINARY_OP_BITWISE_AND,
  [CG_E_BOR] = GCC_JIT_BINARY_OP_BITWISE_OR, [CG_E_BXOR] = GCC_JIT_BINARY_OP_BITWISE_XOR,
  [CG_E_SHL] = GCC_JIT_BINARY_OP_LSHIFT, [CG_E_SHR] = GCC_JIT_BINARY_OP_RSHIFT,
  [CG_E_LAND] = GCC_JIT_BINARY_OP_LOGICAL_AND, [CG_E_LOR] = GCC_JIT_BINARY_OP_LOGICAL_OR,
};
static const enum gcc_jit_comparison g_cmp[CG_E__MAX] = {
  [CG_E_EQ] = GCC_JIT_COMPARISON_EQ, [CG_E_NE] = GCC_JIT_COMPARISON_NE, [CG_E_LT] = GCC_JIT_COMPARISON_LT,
  [CG_E_LE] = GCC_JIT_COMPARISON_LE, [CG_E_GT] = GCC_JIT_COMPARISON_GT, [CG_E_GE] = GCC_JIT_COMPARISON_GE,
};

/* -- The emitter -------------------------------------------------------------------- */

typedef struct { gcc_jit_block *cond, *after; int iv; int64_t step; } GFrame;

typedef struct {
  CgEmitter em;
  gcc_jit_context *ctx;
  int vl;
  gcc_jit_type *t[CT__MAX], *tup[CT__MAX], *tp[CT__MAX];   /* types, under-aligned vector ptrs, scalar ptrs */
  struct { char name[48]; gcc_jit_function *fn; } fns[64];
  int nfns;
  /* the kernel being built */
  const CgKernel *k;
  gcc_jit_function *fn;
  gcc_jit_block *cur;
  gcc_jit_rvalue **rv;
  gcc_jit_lvalue **lv;
  int *ty, cap;
  gcc_jit_rvalue *bufp[2 * CG_MAX_BUFS], *args, *dims;   /* buffers, then row arrays (emit_row_array) */
  GFrame st[64];
  int nst, fail;
} GE;

static gcc_jit_context *gctx(GE *g) { return g->ctx; }

static int g_grow(GE *g, int v)
{
  if (v < g->cap) return 1;
  int cap = g->cap ? g->cap : 512;
  while (cap <= v) cap *= 2;
  gcc_jit_rvalue **rv = realloc(g->rv, cap * sizeof *rv);
  if (rv) g->rv = rv;
  gcc_jit_lvalue **lv = rv ? realloc(g->lv, cap * sizeof *lv) : NULL;
  if (lv) g->lv = lv;
  int *ty = lv ? realloc(g->ty, cap * sizeof *ty) : NULL;
  if (!ty) { g->fail = 1; return 0; }
  g->ty = ty;
  for (int i = g->cap; i < cap; i++) { g->rv[i] = NULL; g->lv[i] = NULL; g->ty[i] = 0; }
  g->cap = cap;
  return 1;
}

/* v = e, through a fresh local */
static void g_def(GE *g, int v, int ty, gcc_jit_rvalue *e)
{
  if (!g_grow(g, v)) return;
  char n[24]; snprintf(n, sizeof n, "v%d", v);
  gcc_jit_lvalue *l = gcc_jit_function_new_local(g->fn, NULL, g->t[ty], n);
  gcc_jit_block_add_assignment(g->cur, NULL, l, e);
  g->rv[v] = gcc_jit_lvalue_as_rvalue(l);
  g->lv[v] = l;
  g->ty[v] = ty;
}
static gcc_jit_rvalue *R(GE *g, int v) { return v >= 0 && v < g->cap ? g->rv[v] : NULL; }
static int lanes_of(GE *g, int ty) { return ty == CT_VF32 || ty == CT_VU32 ? g->vl : g->vl / 2; }

static gcc_jit_rvalue *g_scalar_const(GE *g, int ty, double x, int64_t ix)
{
  if (ty < 0 || ty >= CT__MAX) return NULL;
  gcc_jit_type *t = g->t[ty];
  switch (ty) {
  case CT_F32: case CT_F64: return gcc_jit_context_new_rvalue_from_double(g->ctx, t, x);
  case CT_BOOL: return ix ? gcc_jit_context_one(g->ctx, t) : gcc_jit_context_zero(g->ctx, t);
  default: return gcc_jit_context_new_rvalue_from_long(g->ctx, t, (long)ix);
  }
}

static void g_const(CgEmitter *e, int v, int ty, double x, int64_t ix)
{
  GE *g = (GE *)e;
  if (!g_grow(g, v)) return;
  g->ty[v] = ty; g->lv[v] = NULL;
  if (!cg_ty_is_vec(ty)) { g->rv[v] = g_scalar_const(g, ty, x, ix); return; }
  gcc_jit_rvalue *el[16], *s = g_scalar_const(g, cg_ty_elem(ty), x, ix);
  int n = lanes_of(g, ty);
  for (int j = 0; j < n; j++) el[j] = s;
  g->rv[v] = gcc_jit_context_new_rvalue_from_vector(g->ctx, NULL, g->t[ty], n, el);
}

static void g_arg(CgEmitter *e, int v, int idx)
{
  GE *g = (GE *)e;
  gcc_jit_rvalue *i = gcc_jit_context_new_rvalue_from_int(g->ctx, g->t[CT_I32], idx);
  g_def(g, v, CT_F64, gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(g->ctx, NULL, g->args, i)));
}
static void g_dim(CgEmitter *e, int v, int idx)
{
  GE *g = (GE *)e;
  gcc_jit_rvalue *i = gcc_jit_context_new_rvalue_from_int(g->ctx, g->t[CT_I32], idx);
  g_def(g, v, CT_I64, gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(g->ctx, NULL, g->dims, i)));
}

static int g_op(CgEmitter *e, int v, int ty, int op, int a, int b, int c)
{
  GE *g = (GE *)e;
  gcc_jit_context *x = gctx(g);
  gcc_jit_type *t = g->t[ty];
  switch (op) {
  case CG_E_ADD: case CG_E_SUB: case CG_E_MUL: case CG_E_DIV: case CG_E_MOD: case CG_E_BAND: case CG_E_BOR:
  case CG_E_BXOR: case CG_E_SHL: case CG_E_SHR: case CG_E_LAND: case CG_E_LOR:
    g_def(g, v, ty, gcc_jit_context_new_binary_op(x, NULL, g_binop[op], t, R(g, a), R(g, b))); return 0;
  case CG_E_EQ: case CG_E_NE: case CG_E_LT: case CG_E_LE: case CG_E_GT: case CG_E_GE:
    g_def(g, v, ty, gcc_jit_context_new_comparison(x, NULL, g_cmp[op], R(g, a), R(g, b))); return 0;
  case CG_E_NEG: g_def(g, v, ty, gcc_jit_context_new_unary_op(x, NULL, GCC_JIT_UNARY_OP_MINUS, t, R(g, a))); return 0;
  case CG_E_BNOT: g_def(g, v, ty, gcc_jit_context_new_unary_op(x, NULL, GCC_JIT_UNARY_OP_BITWISE_NEGATE, t, R(g, a))); return 0;
  case CG_E_LNOT: g_def(g, v, ty, gcc_jit_context_new_unary_op(x, NULL, GCC_JIT_UNARY_OP_LOGICAL_NEGATE, t, R(g, a))); return 0;
  case CG_E_CAST: g_def(g, v, ty, gcc_jit_context_new_cast(x, NULL, R(g, a), t)); return 0;
  case CG_E_BITCAST: g_def(g, v, ty, gcc_jit_context_new_bitcast(x, NULL, R(g, a), t)); return 0;
  case CG_E_COPY: g_def(g, v, ty, R(g, a)); return 0;
  case CG_E_SPLAT: {
    gcc_jit_rvalue *el[16];
    int n = lanes_of(g, ty);
    for (int j = 0; j < n; j++) el[j] = R(g, a);
    g_def(g, v, ty, gcc_jit_context_new_rvalue_from_vector(x, NULL, t, n, el));
    return 0;
  }
  case CG_E_SELECT: {     /* no ?: in libgccjit: a diamond (if-converted by GCC) */
    char n[24]; snprintf(n, sizeof n, "v%d", v);
    if (!g_grow(g, v)) return TD_ERR_NOMEM;
    gcc_jit_lvalue *l = gcc_jit_function_new_local(g->fn, NULL, t, n);
    gcc_jit_block *bt = gcc_jit_function_new_block(g->fn, NULL), *bf = gcc_jit_function_new_block(g->fn, NULL);
    gcc_jit_block *after = gcc_jit_function_new_block(g->fn, NULL);
    gcc_jit_block_end_with_conditional(g->cur, NULL, R(g, a), bt, bf);
    gcc_jit_block_add_assignment(bt, NULL, l, R(g, b));
    gcc_jit_block_end_with_jump(bt, NULL, after);
    gcc_jit_block_add_assignment(bf, NULL, l, R(g, c));
    gcc_jit_block_end_with_jump(bf, NULL, after);
    g->cur = after;
    g->rv[v] = gcc_jit_lvalue_as_rvalue(l); g->lv[v] = l; g->ty[v] = ty;
    return 0;
  }
  default:
    return rt_err(TD_ERR_ARG, "cg: NYI primitive %s in the libgccjit printer (kernel %s)", cg_eop_name(op), g->k->name);
  }
}

static gcc_jit_function *g_fn(GE *g, const char *name, int ty, int n)
{
  for (int i = 0; i < g->nfns; i++) if (!strcmp(g->fns[i].name, name)) return g->fns[i].fn;
  gcc_jit_function *f;
  if (!cg_ty_is_vec(ty)) {              /* libm: GCC's builtins (sqrt, floor, rint inline) */
    char b[64]; snprintf(b, sizeof b, "__builtin_%s", name);
    f = gcc_jit_context_get_builtin_function(g->ctx, b);
  } else {                              /* libmvec */
    gcc_jit_param *p[2];
    for (int i = 0; i < n; i++) p[i] = gcc_jit_context_new_param(g->ctx, NULL, g->t[ty], i ? "y" : "x");
    f = gcc_jit_context_new_function(g->ctx, NULL, GCC_JIT_FUNCTION_IMPORTED, g->t[ty], name, n, p, 0);
  }
  if (g->nfns < 64) { snprintf(g->fns[g->nfns].name, sizeof g->fns[0].name, "%s", name); g->fns[g->nfns++].fn = f; }
  return f;
}

static void g_call(CgEmitter *e, int v, int ty, const char *f, int n, const int *a)
{
  GE *g = (GE *)e;
  gcc_jit_rvalue *av[2] = { R(g, a[0]), n > 1 ? R(g, a[1]) : NULL };
  g_def(g, v, ty, gcc_jit_context_new_call(g->ctx, NULL, g_fn(g, f, ty, n), n, av));
}

/* element idx of buffer buf, as a scalar lvalue or (vector ty) an under-aligned vector lvalue */
static gcc_jit_lvalue *g_elem(GE *g, int ty, int buf, int idx)
{
  gcc_jit_lvalue *el = gcc_jit_context_new_array_access(g->ctx, NULL, g->bufp[buf], R(g, idx));
  if (!cg_ty_is_vec(ty)) return el;
  gcc_jit_rvalue *p = gcc_jit_context_new_cast(g->ctx, NULL, gcc_jit_lvalue_get_address(el, NULL), g->tup[ty]);
  return gcc_jit_rvalue_dereference(p, NULL);
}
static void g_load(CgEmitter *e, int v, int ty, int buf, int idx)
{ GE *g = (GE *)e; g_def(g, v, ty, gcc_jit_lvalue_as_rvalue(g_elem(g, ty, buf, idx))); }
static void g_store(CgEmitter *e, int ty, int buf, int idx, int val)
{ GE *g = (GE *)e; gcc_jit_block_add_assignment(g->cur, NULL, g_elem(g, ty, buf, idx), R(g, val)); }

/* non-temporal store and sfence: extended asm (libgccjit has no target
** builtins; it also crashes on asm operands made with gcc_jit_lvalue_get_address) */
static void g_store_nt(CgEmitter *e, int ty, int buf, int idx, int val)
{
  GE *g = (GE *)e;
  gcc_jit_extended_asm *a = gcc_jit_block_add_extended_asm(g->cur, NULL, cg_nt_asm(ty));
  gcc_jit_extended_asm_set_volatile_flag(a, 1);
  gcc_jit_extended_asm_add_input_operand(a, NULL, "r", g->bufp[buf]);
  gcc_jit_extended_asm_add_input_operand(a, NULL, "r", R(g, idx));
  gcc_jit_extended_asm_add_input_operand(a, NULL, "v", R(g, val));
  gcc_jit_extended_asm_add_clobber(a, "memory");
}
static void g_fence(CgEmitter *e)
{
  GE *g = (GE *)e;
  gcc_jit_extended_asm *a = gcc_jit_block_add_extended_asm(g->cur, NULL, "sfence");
  gcc_jit_extended_asm_set_volatile_flag(a, 1);
  gcc_jit_extended_asm_add_clobber(a, "memory");
}

static void g_row_array(CgEmitter *e, int slot, int ty, int64_t n)
{
  GE *g = (GE *)e;
  if (slot < 0 || slot >= 2 * CG_MAX_BUFS || n <= 0 || n > INT32_MAX) { g->fail = 1; return; }
  char nm[24];
  snprintf(nm, sizeof nm, "row%d", slot);
  gcc_jit_type *at = gcc_jit_type_get_aligned(gcc_jit_context_new_array_type(g->ctx, NULL, g->t[ty], (int)n), 64);
  gcc_jit_lvalue *arr = gcc_jit_function_new_local(g->fn, NULL, at, nm);
  snprintf(nm, sizeof nm, "p%d", slot);
  gcc_jit_lvalue *p = gcc_jit_function_new_local(g->fn, NULL, g->tp[ty], nm);
  gcc_jit_rvalue *zero = gcc_jit_context_new_rvalue_from_int(g->ctx, g->t[CT_I32], 0);
  gcc_jit_block_add_assignment(g->cur, NULL, p,
    gcc_jit_lvalue_get_address(gcc_jit_context_new_array_access(g->ctx, NULL, gcc_jit_lvalue_as_rvalue(arr), zero), NULL));
  g->bufp[slot] = gcc_jit_lvalue_as_rvalue(p);
}

static void g_prefetch(CgEmitter *e, int buf, int idx, int write)
{
  GE *g = (GE *)e;
  gcc_jit_function *pf = gcc_jit_context_get_builtin_function(g->ctx, "__builtin_prefetch");
  gcc_jit_rvalue *a = gcc_jit_lvalue_get_address(gcc_jit_context_new_array_access(g->ctx, NULL, g->bufp[buf], R(g, idx)), NULL);
  a = gcc_jit_context_new_cast(g->ctx, NULL, a, gcc_jit_type_get_pointer(gcc_jit_type_get_const(gcc_jit_context_get_type(g->ctx, GCC_JIT_TYPE_VOID))));
  gcc_jit_rvalue *args[2] = { a, gcc_jit_context_new_rvalue_from_int(g->ctx, gcc_jit_context_get_type(g->ctx, GCC_JIT_TYPE_INT), write != 0) };
  gcc_jit_block_add_eval(g->cur, NULL, gcc_jit_context_new_call(g->ctx, NULL, pf, 2, args));
}

static void g_var(CgEmitter *e, int v, int ty, int init) { GE *g = (GE *)e; g_def(g, v, ty, R(g, init)); }
static void g_assign(CgEmitter *e, int var, int val)
{ GE *g = (GE *)e; gcc_jit_block_add_assignment(g->cur, NULL, g->lv[var], R(g, val)); }

static gcc_jit_lvalue *g_lane(GE *g, int vec, int j)
{
  int et = cg_ty_elem(g->ty[vec]);
  gcc_jit_rvalue *p = gcc_jit_context_new_cast(g->ctx, NULL, gcc_jit_lvalue_get_address(g->lv[vec], NULL), g->tp[et]);
  return gcc_jit_context_new_array_access(g->ctx, NULL, p, R(g, j));
}
static void g_lane_get(CgEmitter *e, int v, int vec, int j)
{ GE *g = (GE *)e; g_def(g, v, cg_ty_elem(g->ty[vec]), gcc_jit_lvalue_as_rvalue(g_lane(g, vec, j))); }
static void g_lane_set(CgEmitter *e, int vec, int j, int val)
{ GE *g = (GE *)e; gcc_jit_block_add_assignment(g->cur, NULL, g_lane(g, vec, j), R(g, val)); }

static void g_begin_loop(CgEmitter *e, int iv, int lo, int hi, int64_t step)
{
  GE *g = (GE *)e;
  if (g->nst == 64) { g->fail = 1; return; }
  gcc_jit_block *cond = gcc_jit_function_new_block(g->fn, NULL), *body = gcc_jit_function_new_block(g->fn, NULL);
  gcc_jit_block *after = gcc_jit_function_new_block(g->fn, NULL);
  gcc_jit_block_add_assignment(g->cur, NULL, g->lv[iv], R(g, lo));
  gcc_jit_block_end_with_jump(g->cur, NULL, cond);
  gcc_jit_block_end_with_conditional(cond, NULL,
    gcc_jit_context_new_comparison(g->ctx, NULL, GCC_JIT_COMPARISON_LT, R(g, iv), R(g, hi)), body, after);
  g->st[g->nst++] = (GFrame){ cond, after, iv, step };
  g->cur = body;
}
static void g_end_loop(CgEmitter *e)
{
  GE *g = (GE *)e;
  if (!g->nst) { g->fail = 1; return; }
  GFrame f = g->st[--g->nst];
  gcc_jit_block_add_assignment_op(g->cur, NULL, g->lv[f.iv], GCC_JIT_BINARY_OP_PLUS,
                                  gcc_jit_context_new_rvalue_from_long(g->ctx, g->t[CT_I64], (long)f.step));
  gcc_jit_block_end_with_jump(g->cur, NULL, f.cond);
  g->cur = f.after;
}
static void g_begin_if(CgEmitter *e, int cond)
{
  GE *g = (GE *)e;
  if (g->nst == 64) { g->fail = 1; return; }
  gcc_jit_block *then = gcc_jit_function_new_block(g->fn, NULL), *after = gcc_jit_function_new_block(g->fn, NULL);
  gcc_jit_block_end_with_conditional(g->cur, NULL, R(g, cond), then, after);
  g->st[g->nst++] = (GFrame){ NULL, after, -1, 0 };
  g->cur = then;
}
static void g_end_if(CgEmitter *e)
{
  GE *g = (GE *)e;
  if (!g->nst) { g->fail = 1; return; }
  GFrame f = g->st[--g->nst];
  gcc_jit_block_end_with_jump(g->cur, NULL, f.after);
  g->cur = f.after;
}
static void g_comment(CgEmitter *e, const char *t) { GE *g = (GE *)e; gcc_jit_block_add_comment(g->cur, NULL, t); }

static int g_begin_kernel(CgEmitter *e, const CgKernel *k, int vlanes)
{
  GE *g = (GE *)e;
  g->k = k; g->nst = 0;
  gcc_jit_param *p[5] = {
    gcc_jit_context_new_param(g->ctx, NULL, g->t[CT_I64], "r0"),
    gcc_jit_context_new_param(g->ctx, NULL, g->t[CT_I64], "r1"),
    gcc_jit_context_new_param(g->ctx, NULL,
      gcc_jit_type_get_pointer(gcc_jit_type_get_pointer(gcc_jit_context_get_type(g->ctx, GCC_JIT_TYPE_CHAR))), "bufs"),
    gcc_jit_context_new_param(g->ctx, NULL, gcc_jit_type_get_pointer(gcc_jit_type_get_const(g->t[CT_F64])), "args"),
    gcc_jit_context_new_param(g->ctx, NULL, gcc_jit_type_get_pointer(gcc_jit_type_get_const(g->t[CT_I64])), "dims"),
  };
  g->fn = gcc_jit_context_new_function(g->ctx, NULL, GCC_JIT_FUNCTION_EXPORTED,
                                       gcc_jit_context_get_type(g->ctx, GCC_JIT_TYPE_VOID), k->name, 5, p, 0);
  g->cur = gcc_jit_function_new_block(g->fn, "entry");
  if (!g_grow(g, 1)) return TD_ERR_NOMEM;
  for (int i = 0; i < g->cap; i++) { g->rv[i] = NULL; g->lv[i] = NULL; }
  g->rv[0] = gcc_jit_param_as_rvalue(p[0]); g->ty[0] = CT_I64;
  g->rv[1] = gcc_jit_param_as_rvalue(p[1]); g->ty[1] = CT_I64;
  g->args = gcc_jit_param_as_rvalue(p[3]);
  g->dims = gcc_jit_param_as_rvalue(p[4]);
  for (int b = 0; b < k->nbuf && b < CG_MAX_BUFS; b++) {
    int bt = k->buf_dtype[b] == TD_BOOL || k->buf_dtype[b] < 0 || k->buf_dtype[b] >= TD_DTYPE__MAX ? CT_U8 : k->buf_dtype[b];
    char n[16]; snprintf(n, sizeof n, "p%d", b);
    gcc_jit_lvalue *l = gcc_jit_function_new_local(g->fn, NULL, g->tp[bt], n);
    gcc_jit_rvalue *raw = gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(g->ctx, NULL, gcc_jit_param_as_rvalue(p[2]),
                            gcc_jit_context_new_rvalue_from_int(g->ctx, g->t[CT_I32], b)));
    gcc_jit_block_add_assignment(g->cur, NULL, l, gcc_jit_context_new_cast(g->ctx, NULL, raw, g->tp[bt]));
    g->bufp[b] = gcc_jit_lvalue_as_rvalue(l);
  }
  (void)vlanes;
  return 0;
}
static int g_end_kernel(CgEmitter *e)
{
  GE *g = (GE *)e;
  gcc_jit_block_end_with_void_return(g->cur, NULL);
  if (g->fail) return rt_err(TD_ERR_NOMEM, "cg: out of memory (or loop nesting) building %s", g->k->name);
  return 0;
}

/* -- Context ------------------------------------------------------------------------- */

static void g_init(GE *g, int vl)
{
  memset(g, 0, sizeof *g);
  g->em = (CgEmitter){ g_begin_kernel, g_end_kernel, g_const, g_arg, g_dim, g_op, g_call, g_load, g_store, g_store_nt,
                       g_fence, g_row_array, g_prefetch, g_var, g_assign, g_lane_get, g_lane_set, g_begin_loop, g_end_loop, g_begin_if, g_end_if, g_comment };
  g->vl = vl;
  gcc_jit_context *c = g->ctx = gcc_jit_context_acquire();
  gcc_jit_context_set_int_option(c, GCC_JIT_INT_OPTION_OPTIMIZATION_LEVEL, 3);
  gcc_jit_context_set_bool_print_errors_to_stderr(c, 0);
  gcc_jit_context_set_bool_allow_unreachable_blocks(c, 1);
  char march[32]; snprintf(march, sizeof march, "-march=%s", cg_host_march());
  gcc_jit_context_add_command_line_option(c, march);
  if (vl == 16) gcc_jit_context_add_command_line_option(c, "-mprefer-vector-width=512");
  gcc_jit_context_add_command_line_option(c, "-fno-math-errno");
  gcc_jit_context_add_command_line_option(c, "-fno-trapping-math");
  const char *extra = getenv("TIDE_CG_OPTS");     /* e.g. -fopt-info-vec-optimized (diagnostics) */
  if (extra && *extra) {
    char buf[256]; snprintf(buf, sizeof buf, "%s", extra);
    char *save = NULL;
    for (char *s = strtok_r(buf, " ", &save); s; s = strtok_r(NULL, " ", &save)) gcc_jit_context_add_command_line_option(c, s);
  }
  gcc_jit_context_add_driver_option(c, "-lmvec");
  gcc_jit_context_add_driver_option(c, "-lm");
  static const enum gcc_jit_types base[] = { GCC_JIT_TYPE_BOOL, GCC_JIT_TYPE_UNSIGNED_CHAR, 0, 0,
                                             GCC_JIT_TYPE_FLOAT, GCC_JIT_TYPE_DOUBLE };
  for (int t = CT_BOOL; t <= CT_F64; t++) if (t != CT_I32 && t != CT_I64) g->t[t] = gcc_jit_context_get_type(c, base[t]);
  g->t[CT_I32] = gcc_jit_context_get_int_type(c, 4, 1);
  g->t[CT_I64] = gcc_jit_context_get_int_type(c, 8, 1);
  g->t[CT_U32] = gcc_jit_context_get_int_type(c, 4, 0);
  g->t[CT_U64] = gcc_jit_context_get_int_type(c, 8, 0);
  for (int t = CT_VF32; t <= CT_VU64; t++) {
    int et = cg_ty_elem(t);
    g->t[t] = gcc_jit_type_get_vector(g->t[et], t == CT_VF32 || t == CT_VU32 ? vl : vl / 2);
    g->tup[t] = gcc_jit_type_get_pointer(gcc_jit_type_get_aligned(g->t[t], et == CT_F32 || et == CT_U32 ? 4 : 8));
  }
  for (int t = 0; t < CT__MAX; t++) if (!cg_ty_is_vec(t)) g->tp[t] = gcc_jit_type_get_pointer(g->t[t]);
}

static void g_free(GE *g)
{
  free(g->rv); free(g->lv); free(g->ty);
  gcc_jit_context_release(g->ctx);
}

/* Compile ks[0..n) in one context: into the shared object `path`, or in memory
** (path NULL: fns[i] set, the result kept for the life of the process). */
int cg_jit_build(CgKernel *const *ks, int n, const char *path, CgKernelFn *fns)
{
  GE g;
  int vl = cg_host_lanes(), rc = cg_gccjit_load();
  if (rc) return rc;
  g_init(&g, vl);
  g.em.caps = cg_caps_host(vl);
  for (int i = 0; i < n && !rc; i++) rc = cg_walk(ks[i], &g.em);
  if (rc) { g_free(&g); return rc; }
  gcc_jit_result *res = NULL;
  if (path) gcc_jit_context_compile_to_file(g.ctx, GCC_JIT_OUTPUT_KIND_DYNAMIC_LIBRARY, path);
  else res = gcc_jit_context_compile(g.ctx);
  const char *err = gcc_jit_context_get_first_error(g.ctx);
  if (err || (!path && !res)) {
    char *src = cg_c_source_batch(ks, n, vl, NULL);
    rc = rt_err(TD_ERR_STATE, "cg: libgccjit failed to compile %s%s: %s\n%s", ks[0]->name,
                n > 1 ? " (and the rest of its batch)" : "", err ? err : "(no message)", src ? src : "");
    free(src);
    if (res) gcc_jit_result_release(res);
    g_free(&g);
    return rc;
  }
  for (int i = 0; res && i < n; i++) {
    fns[i] = (CgKernelFn)gcc_jit_result_get_code(res, ks[i]->name);
    if (!fns[i]) rc = rt_err(TD_ERR_STATE, "cg: compiled code lacks %s", ks[i]->name);
  }
  g_free(&g);       /* the result outlives its context */
  return rc;
}
