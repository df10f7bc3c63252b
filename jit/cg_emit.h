/*
** cg_emit.h -- the emitter interface between the one walker over the kernel
** IR (cg_walk.c) and the printers that implement it: libgccjit (cg_gccjit.c)
** and C text (cg_c.c). Internal to the code generators.
**
** The walker decides everything (loop structure, vector or scalar passes, the
** lowering of each RT_OP_* into primitives, the bit tricks for vector compares);
** an emitter only prints primitives. Values are integer handles allocated by
** the walker; every handle is one local of one CgTy (or a constant). A handle
** made by emit_var is mutable (emit_assign, emit_lane_set, loop counters).
*/
#ifndef CG_EMIT_H
#define CG_EMIT_H

#include "cg.h"

/* -- Types: scalars in td_dtype order, then helpers and vectors ---------------- */

#define CG_TYDEF(_) \
  _(BOOL, "_Bool",    1) _(U8,  "uint8_t",  1) _(I32, "int32_t", 4) _(I64, "int64_t", 8) \
  _(F32,  "float",    4) _(F64, "double",   8) _(U32, "uint32_t", 4) _(U64, "uint64_t", 8) \
  _(VF32, "vf32",     4) _(VF64, "vf64",    8) _(VU32, "vu32",    4) _(VU64, "vu64",    8)

typedef enum {
#define CG_TYENUM(name, c, size) CT_##name,
  CG_TYDEF(CG_TYENUM)
#undef CG_TYENUM
  CT__MAX
} CgTy;

_Static_assert((int)CT_BOOL == TD_BOOL && (int)CT_U8 == TD_UINT8 && (int)CT_I32 == TD_INT32 &&
               (int)CT_I64 == TD_INT64 && (int)CT_F32 == TD_FLOAT32 && (int)CT_F64 == TD_FLOAT64,
               "ORDER DTYPE: scalar CgTy follow td_dtype");

static inline int cg_ty_is_vec(int t) { return t >= CT_VF32; }
static inline int cg_ty_is_float(int t) { return t == CT_F32 || t == CT_F64 || t == CT_VF32 || t == CT_VF64; }
/* element type of a vector type (a scalar stays itself) */
static inline int cg_ty_elem(int t)
{ return t == CT_VF32 ? CT_F32 : t == CT_VF64 ? CT_F64 : t == CT_VU32 ? CT_U32 : t == CT_VU64 ? CT_U64 : t; }

/* -- Primitive ops -------------------------------------------------------------- */

/* _(NAME, C operator text (binary/unary), arity). Comparisons give CT_BOOL and
** exist for scalars only (libgccjit 12 has no vector compare). */
#define CG_EOPDEF(_) \
  _(ADD, "+", 2) _(SUB, "-", 2) _(MUL, "*", 2) _(DIV, "/", 2) _(MOD, "%", 2) \
  _(BAND, "&", 2) _(BOR, "|", 2) _(BXOR, "^", 2) _(SHL, "<<", 2) _(SHR, ">>", 2) \
  _(LAND, "&&", 2) _(LOR, "||", 2) \
  _(EQ, "==", 2) _(NE, "!=", 2) _(LT, "<", 2) _(LE, "<=", 2) _(GT, ">", 2) _(GE, ">=", 2) \
  _(NEG, "-", 1) _(BNOT, "~", 1) _(LNOT, "!", 1) \
  _(CAST, "", 1)      /* value conversion between scalar types */ \
  _(BITCAST, "", 1)   /* same-size reinterpretation between vector types */ \
  _(SPLAT, "", 1)     /* scalar -> vector of that element type */ \
  _(COPY, "", 1) \
  _(SELECT, "?", 3)   /* scalar a ? b : c */

typedef enum {
#define CG_EOPENUM(name, c, ar) CG_E_##name,
  CG_EOPDEF(CG_EOPENUM)
#undef CG_EOPENUM
  CG_E__MAX
} CgEop;

/* -- Capabilities: what a printer's target has (data, not control flow) ----------- */

/* The walker asks these instead of knowing the target: the CPU printers take
** vector math from libmvec, stream with non-temporal stores and prefetches
** and keep rows in local arrays; the OpenCL printer has none of that but
** work groups: the rows (or the whole range) are shared by wg work items,
** reductions end in a tree over local memory (cg_walk.c, "Work groups"). */
typedef struct CgCaps {
  int vlanes;             /* float32 lanes of a vector pass (float64: half) */
  int libmvec;            /* vector math through libmvec entry points (else the scalar
                          ** function's name takes vectors, as OpenCL's builtins) */
  int inline_vmath;       /* float32 vector exp and erf as polynomials (cg_walk_vmath.c) */
  int nt, prefetch, row_arrays, unroll;   /* non-temporal stores, prefetches, row arrays,
                          ** reductions' loops unrolled by two vectors */
  int fp64;               /* float64 exists (else the printer gives its values float32) */
  int wg;                 /* work-group mode: items per group (a power of 2); 0: rows [r0, r1) per call */
} CgCaps;

/* What the work-group primitives return (emit_wgid). */
enum { CG_WG_LID, CG_WG_GROUP, CG_WG_NGROUPS };
/* Buffer slots of the local arrays of work-group reductions: one per CgTy. */
#define CG_SLOT_LOCAL (2 * CG_MAX_BUFS)

/* -- The emitter table ------------------------------------------------------------ */

typedef struct CgEmitter CgEmitter;
struct CgEmitter {
  /* Open the kernel function; handles 0 and 1 are r0 and r1 (CT_I64).
  ** vlanes: lanes of a float32 vector (8 or 16; float64 has half). */
  int (*begin_kernel)(CgEmitter *e, const CgKernel *k, int vlanes);
  int (*end_kernel)(CgEmitter *e);
  /* v = constant of type ty (a vector type: every lane); x for floats, ix for integers */
  void (*emit_const)(CgEmitter *e, int v, int ty, double x, int64_t ix);
  /* v = args[idx] (double) */
  void (*emit_arg)(CgEmitter *e, int v, int idx);
  /* v = dims[idx] (int64_t, a run-time size: CG_DIM_*) */
  void (*emit_dim)(CgEmitter *e, int v, int idx);
  /* v = op(a, b, c) of result type ty */
  int (*emit_op)(CgEmitter *e, int v, int ty, int op, int a, int b, int c);
  /* v = fname(args) with result type ty (a libm or libmvec function taking ty's) */
  void (*emit_call)(CgEmitter *e, int v, int ty, const char *fname, int nargs, const int *args);
  /* v = buffer buf's element at idx (element units), of type ty: the buffer's
  ** element type, or a vector of it (an unaligned load of consecutive elements) */
  void (*emit_load)(CgEmitter *e, int v, int ty, int buf, int idx);
  void (*emit_store)(CgEmitter *e, int ty, int buf, int idx, int val);
  /* a vector store that bypasses the cache (x86 vmovnt*: no read of the line
  ** first, weakly ordered); idx must be aligned to the vector's size */
  void (*emit_store_nt)(CgEmitter *e, int ty, int buf, int idx, int val);
  /* orders the non-temporal stores before everything after it (sfence) */
  void (*emit_fence)(CgEmitter *e);
  /* a local array of n elements of scalar type ty, 64-byte aligned, usable
  ** from here on as buffer `slot` (CG_MAX_BUFS + the buffer it stands for) */
  void (*emit_row_array)(CgEmitter *e, int slot, int ty, int64_t n);
  /* a hint: bring buffer buf's element idx into the cache (never faults);
  ** write: the line is about to be written (x86 prefetchw: owned, no second request) */
  void (*emit_prefetch)(CgEmitter *e, int buf, int idx, int write);
  /* mutable local v of type ty = init */
  void (*emit_var)(CgEmitter *e, int v, int ty, int init);
  void (*emit_assign)(CgEmitter *e, int var, int val);
  /* v = lane j of vector variable vec / lane j of vec = val (j: an I64 handle) */
  void (*emit_lane_get)(CgEmitter *e, int v, int vec, int j);
  void (*emit_lane_set)(CgEmitter *e, int vec, int j, int val);
  /* for (iv = lo; iv < hi; iv += step) { ... }  (iv a variable; hi re-read per iteration) */
  void (*begin_loop)(CgEmitter *e, int iv, int lo, int hi, int64_t step);
  void (*end_loop)(CgEmitter *e);
  /* if (cond) { ... } */
  void (*begin_if)(CgEmitter *e, int cond);
  void (*end_if)(CgEmitter *e);
  void (*comment)(CgEmitter *e, const char *text);
  /* work-group mode only (caps.wg > 0): */
  /* for (iv = lo; iv < hi; iv += step) with step a handle */
  void (*begin_loop_step)(CgEmitter *e, int iv, int lo, int hi, int step);
  /* v (I64) = this work item's index in its group, the group's index, the number of groups */
  void (*emit_wgid)(CgEmitter *e, int v, int what);
  /* every item of the group waits here; memory written before is visible after */
  void (*emit_barrier)(CgEmitter *e);
  /* an array of n elements of scalar type ty shared by the group, usable as buffer `slot` */
  void (*emit_local_array)(CgEmitter *e, int slot, int ty, int64_t n);
  CgCaps caps;
};

/* The CPU printers' capabilities at vlanes float32 lanes. */
static inline CgCaps cg_caps_host(int vlanes)
{
  return (CgCaps){ .vlanes = vlanes, .libmvec = 1, .inline_vmath = 1, .nt = 1, .prefetch = 1, .row_arrays = 1,
                   .unroll = 1, .fp64 = 1, .wg = 0 };
}

/* The asm of emit_store_nt, the same in both printers: the vector operand 2
** at buffer pointer operand 0 + element index operand 1 (registers; libgccjit
** 12 crashes on asm memory operands). Float buffers only (cg_store_nt). */
static inline const char *cg_nt_asm(int ty)
{ return ty == CT_VF64 ? "vmovntpd %2, (%0,%1,8)" : "vmovntps %2, (%0,%1,4)"; }

/* Walk kernel k, driving emitter e (for its e->caps). Returns 0 or a negative code with a message. */
int cg_walk(const CgKernel *k, CgEmitter *e);
/* The float32 vector width of this host (8 for AVX2, 16 for AVX-512) and the
** matching -march level. */
int cg_host_lanes(void);
const char *cg_host_march(void);
/* the name of a primitive op */
const char *cg_eop_name(int op);
/* "cg: NYI ..." error naming the op */
int cg_nyi(const CgKernel *k, int op, int dtype, const char *what);
/* "cg: invalid kernel IR ..." error: a kernel that breaks cg.h's rules */
int cg_bad_ir(const CgKernel *k, const char *what);
/* C text of a batch of kernels: one translation unit (malloc'd; NULL when out
** of memory). *rc: the walker's result (on an error, the text printed so far). */
char *cg_c_source_batch(CgKernel *const *ks, int n, int vlanes, int *rc);
/* cg_gccjit.c: compile ks[0..n) in one libgccjit context, into the shared
** object `path`, or (path NULL) in memory, setting fns[i]. */
int cg_jit_build(CgKernel *const *ks, int n, const char *path, CgKernelFn *fns);
/* cg_gccjit_dl.c: 0 once libgccjit is loaded (on first use), else an error naming it */
int cg_gccjit_load(void);
/* libmvec name for function f ("expf") at lanes (NULL when none) */
const char *cg_vec_fname(const char *f, int lanes, char *buf, size_t n);

#endif
