/*
** cg_walk.h -- internal interface of the walker over the kernel IR (cg.h),
** split by idea into cg_walk*.c: the driver (cg_walk.c: rows, work groups),
** primitives and logic (cg_walk_prim.c), the lowering of RT_OP_* into
** primitives (cg_walk_alu.c, cg_walk_vmath.c), loads and stores
** (cg_walk_mem.c), passes and reductions (cg_walk_pass.c) and column-mode
** kernels (cg_walk_col.c). The kernel IR's own utilities (hash, names, run-time
** sizes) are cg_kernel.c. Symbols here are hidden (w_ is the walker's prefix).
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
#ifndef CG_WALK_H
#define CG_WALK_H

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
  int sc_x[8], sc_s[8], sc_c[8], nsc;   /* float32 vector sin and cos made together, by operand (w_sincos) */
  const CgCaps *caps;     /* what the printer's target has */
  int wg;                 /* work-group mode: items per group (0: rows [r0, r1) per call) */
  int lid, e0;            /* work groups: this item's index in its group; its first element index (in vectors) */
  int64_t estep;          /*   the step between its elements (in vectors): a constant (rows), */
  int estep_h;            /*   or a handle (flat mode: the whole grid) when estep is 0 */
  int loc[CT__MAX];       /* the local array of work-group reductions of each type, declared (1) or not (-1) */
  int *geo;               /* rtgeo: handles of dims[CG_NDIMS ..] (cg.h, run-time geometry) */
  int rc;
} W;

/* -- Handles and primitives (cg_walk_prim.c) ------------------------------------------- */

int w_new(W *w, int ty);
static inline int hc(W *w, int ty, double x)
{ int v = w_new(w, ty); w->e->emit_const(w->e, v, ty, x, (int64_t)x); return v; }
static inline int hci(W *w, int ty, int64_t ix)
{ int v = w_new(w, ty); w->e->emit_const(w->e, v, ty, (double)ix, ix); return v; }
static inline int op3(W *w, int ty, int op, int a, int b, int c)
{
  int v = w_new(w, ty);
  int rc = w->e->emit_op(w->e, v, ty, op, a, b, c);
  if (rc && !w->rc) w->rc = rc;
  return v;
}
static inline int op1(W *w, int ty, int op, int a) { return op3(w, ty, op, a, -1, -1); }
static inline int op2(W *w, int ty, int op, int a, int b) { return op3(w, ty, op, a, b, -1); }
static inline int var(W *w, int ty, int init) { int v = w_new(w, ty); w->e->emit_var(w->e, v, ty, init); return v; }
static inline int call(W *w, int ty, const char *f, int n, const int *a)
{ int v = w_new(w, ty); w->e->emit_call(w->e, v, ty, f, n, a); return v; }
static inline int lane_get(W *w, int vec, int j)
{ int v = w_new(w, cg_ty_elem(w->ty[vec])); w->e->emit_lane_get(w->e, v, vec, j); return v; }

static inline int ubits(int ty) { return ty == CT_VF32 || ty == CT_VU32 ? 32 : 64; }
/* the unsigned lane type of a vector type */
static inline int utype(int ty) { return ubits(ty) == 32 ? CT_VU32 : CT_VU64; }
static inline int bitc(W *w, int a, int ty) { return w->ty[a] == ty ? a : op1(w, ty, CG_E_BITCAST, a); }
static inline int topbit(W *w, int u)                  /* 0 - (u >> (bits-1)): the sign as a mask */
{
  int t = w->ty[u], b = ubits(t);
  return op2(w, t, CG_E_SUB, hci(w, t, 0), op2(w, t, CG_E_SHR, u, hci(w, t, b - 1)));
}

/* mode-polymorphic logic: a scalar bool, or a vector lane mask */
int w_nan(W *w, int a);
int w_not(W *w, int m);
int w_and(W *w, int a, int b);
int w_or(W *w, int a, int b);
int w_cmp(W *w, int op, int a, int b);     /* a <op> b, op one of CG_E_EQ..GE */
int w_sel(W *w, int m, int a, int b);      /* m ? a : b */
/* types and conversions */
int w_tyof(W *w, int dt);
static inline int w_c(W *w, int ty, double x) { return hc(w, ty, x); }
int w_tobool(W *w, int a);
int w_b2x(W *w, int m, int ty);
int w_conv(W *w, int a, int ty);

/* The kernel's geometry: constants, or handles of run-time values (rtgeo). */
static inline int w_geo(W *w, int slot, int64_t v) { return w->k->rtgeo ? w->geo[slot - CG_NDIMS] : hci(w, CT_I64, v); }
static inline int w_osize(W *w, int d) { return w_geo(w, CG_GEO_OSIZE(d), w->k->osize[d]); }
static inline int w_inner(W *w) { return w_geo(w, CG_GEO_INNER, w->k->inner); }
static inline int w_aoff(W *w, int a) { return w_geo(w, CG_GEO_ACC(a), w->k->acc[a].offset); }
static inline int w_aist(W *w, int a) { return w_geo(w, CG_GEO_ACC(a) + 1, w->k->acc[a].istride); }
static inline int w_aost(W *w, int a, int d) { return w_geo(w, CG_GEO_ACC(a) + 2 + d, w->k->acc[a].ostride[d]); }

/* -- Ops (cg_walk_alu.c, cg_walk_vmath.c) ---------------------------------------------- */

static inline int opnd(W *w, int o) { return w->mode == MODE_ROW ? w->val[o] : w->pv[o]; }
int w_alu(W *w, const CgIns *in);
int w_vexpf(W *w, int x);
int w_verff(W *w, int x);
void w_vsincosf(W *w, int x, int *so, int *co);

/* -- Loads and stores (cg_walk_mem.c) ------------------------------------------------- */

/* buffer b's element type (a row array CG_MAX_BUFS + b: buffer b's) */
static inline int buf_ty(const CgKernel *k, int b) { int d = k->buf_dtype[b % CG_MAX_BUFS]; return d == TD_BOOL ? CT_U8 : d; }
int w_redirect(const W *w, const CgIns *in);
int w_load(W *w, const CgIns *in);
void w_store(W *w, const CgIns *in);
void w_csum(W *w, const CgIns *in);

/* -- Passes and reductions (cg_walk_pass.c) ---------------------------------------------- */

int red_neutral(W *w, const CgIns *in, int acct);
int red_comb(W *w, int op, int a, int b);
void w_ins(W *w, int i, int *accv, int lmask);
void emit_row_ins(W *w, int i);
int w_tail_begin(W *w, int n, int nred);
/* the loop over elements [., hi) in steps of L lanes: from lo (CPU) or this work item's share */
void w_eloop(W *w, int lo, int hi, int L);
/* work groups: a barrier when in work-group mode */
void w_sync(W *w);
int w_pass(W *w, int s, int n);

/* -- Column mode (cg_walk_col.c) --------------------------------------------------------- */

void w_ckernel(W *w);

/* -- Kernel IR helpers (cg_kernel.c) ------------------------------------------------------ */

/* the pass of a buffer's last store when its row lives in a local array, or -1 */
int cg_row_keep(const CgKernel *k, int b);

#endif
