/*
** cg.h -- the kernel IR (loops, index arithmetic, loads, ALU ops, reductions,
** stores) and the code generators that print it: libgccjit (in process) and
** C source text, both driven by one walker (cg_walk.c) through CgEmitter.
**
** A kernel is one loop nest over rows:
**
**   for r in [r0, r1):                 rows, split over the thread pool
**     row statements                   values of the row (level 0)
**     pass 0: for i in [0, n(r)):      element statements (level 1)
**     row statements                   may read pass 0's reductions
**     pass 1: for i in [0, n(r)): ...
**
** Rows are the flattened outer dims osize[0..nouter) (row-major); i runs over
** one inner dim of `inner` elements. In flat mode (flat > 0) the kernel covers
** a 1-D range of `flat` elements cut into rows of `inner`: n(r) = min(inner,
** flat - r*inner), the element index is r*inner + i.
** An access (load/store) addresses buf[offset + sum_k od_k*ostride[k] + i*istride]
** where od_k is row r's index in outer dim k (flat mode: (r*inner+i)*istride).
**
** Instructions are SSA values in program order; operands a, b, c index ins[].
** An element-level instruction may read row values defined before its pass and
** element values of its own pass. A RED instruction (element level) folds its
** operand over the pass; its value is readable at row level after the pass.
**
** Column mode (cred > 0): reductions over outer dims, one pass. Rows are
** (outer index, tile of ctile columns) pairs; the element index i runs over
** the tile's columns, n(r) = min(ctile, inner - tile*ctile); a reduction loop
** over t adds t*rstride to every access. The loop is cut into nblk =
** ceil(cred / cblk) blocks, and cg_kernel_run runs two phases:
**
**   phase 1, r in [0, rows*nblk): unit (row r / nblk, block b = r % nblk)
**     for t in [b*cblk, min(cred, (b+1)*cblk)):   values that depend on t
**       for i in [0, n):  part_RED[r][i] (+)= x(t, i)
**   phase 2, r in [rows*nblk, rows*nblk + rows): row q = r - rows*nblk
**     part_RED[q*nblk][i] (+)= part_RED[q*nblk + b][i], b = 1, 2, ... in order
**     for i in [0, n):    the element values that read REDs (per column)
**
** A RED's partials live in scratch buffer `acc` (one of the last nscratch
** buffers, rows*nblk slots of ctile elements, provided by cg_kernel_run); its
** value is an element value of the pass. An instruction that depends on t
** (through an access with rstride != 0) must not read a RED.
**
** Column sums in a row kernel (cred = 0, nscratch > 0): a CSUM adds an
** element value into the partial sum of its column i for the block of rows
** the row belongs to: scratch[r / blk][i], blocks of blk = dims[CG_DIM_BLK]
** rows (at most CG_CSUM_BLK, by the row count only). cg_kernel_run zeroes the
** scratch buffers, runs whole blocks per thread, then adds each column's
** blocks in order (in double) and stores the sum at access acc (column i at
** offset + i * istride): the same bits whatever the thread count.
** layer_norm's dweight and dbias are summed this way inside the kernel that
** computes its dx, instead of a second pass over x and the gradient.
**
** Run-time sizes. A batch dim becomes the outermost row count osize[0], the
** flat element count, or column mode's cred (and with it cblk, the block
** count and the phase-1 unit count). The code reads none of these as
** constants: they reach the kernel in dims[] (cg_kernel_dims), and
** kernel_hash and the C text leave them out, so one compiled kernel (memory
** or disk cache) serves every batch size. Nothing printed may depend on them
** (no "vector loop only if the count >= L", no unroll or tile count from
** them); inner, ctile and the other osize[] stay constants, in the hash.
**
** Run-time geometry (rtgeo, row and flat modes): every size and stride is a
** run-time value too (dims[CG_GEO_*]): osize[], inner, and each access's
** offset, ostride[] and istride. The hash keeps only their structure (which
** ostride[] are 0, whether istride is 0, 1 or other), so one compiled kernel
** serves every shape of that structure: the OpenCL device's eager ops are
** such one-op kernels (a program per op and dtypes, not per shape).
*/
#ifndef CG_H
#define CG_H

#include "../runtime/rt.h"

typedef enum {
  CG_CONST,      /* f[0] as dtype */
  CG_ARG,        /* run-time scalar args[acc] as dtype */
  CG_LOAD,       /* buf value at access acc, converted from the buffer's dtype to dtype */
  CG_ALU,        /* op = elementwise RT_OP_*; operands a, b, c; f[0..1], flags from its td_attrs */
  CG_RED,        /* op = RT_OP_SUM / MAX / MIN / PROD over the pass, of operand a */
  CG_STORE,      /* store operand a at access acc (converted to the buffer's dtype) */
  CG_PASS,       /* begins pass `pass` (the previous pass, if any, ends here) */
  CG_ENDPASS,    /* ends the current pass */
  CG_CSUM,       /* row mode, element level: adds operand a to its column's partial sum (the
                 ** n-th CSUM: the n-th scratch buffer; "Column sums in a row kernel"); stored at access acc */
  CG__MAX
} CgKind;

typedef struct CgAccess {
  int32_t buf;                       /* index into the kernel's buffers */
  int32_t pad;
  int64_t offset;
  int64_t ostride[TD_MAX_DIMS];
  int64_t istride;
  int64_t rstride;                   /* column mode: per reduction step t */
} CgAccess;

typedef struct CgIns {
  int16_t kind;                      /* CgKind */
  int16_t op;                        /* ALU / RED: RT_OP_* */
  int8_t dtype;                      /* the value's td_dtype (compute type) */
  int8_t level;                      /* 0 row, 1 element */
  int16_t pass;                      /* element level: the pass it belongs to */
  int32_t a, b, c;                   /* operands (-1 = none) */
  int32_t acc;                       /* LOAD/STORE: access; ARG: arg index; RED (column mode): scratch buffer */
  int32_t flags;                     /* ALU: attrs.flags of the op (gelu form, clamp sides) */
  double f[2];                       /* CONST: f[0]; ALU: attrs.s (clamp lo/hi, ...) */
} CgIns;

#define CG_MAX_BUFS 64
#define CG_MAX_SCRATCH 8                /* column mode: REDs per kernel */
#define CG_MAX_CTILE 1024               /* column mode: columns per tile */
#define CG_CSUM_BLK 256                 /* row mode column sums: rows per block, at most */

typedef struct CgKernel {
  char name[64];                     /* k_<hint>_<hash>, set by cg_kernel_finish */
  uint64_t hash;                     /* of everything below (the kernel IR) */
  int32_t nbuf;
  int8_t buf_dtype[CG_MAX_BUFS];     /* td_dtype of each buffer */
  int32_t nouter;
  int64_t osize[TD_MAX_DIMS];
  int64_t inner;                     /* elements per row (1 when no pass) */
  int64_t flat;                      /* > 0: flat mode over this many elements */
  int64_t cred, ctile, cblk;         /* column mode (cred > 0): reduction steps, columns per tile, steps per block */
  int32_t nscratch;                  /* column mode: the last nscratch buffers are scratch */
  int32_t nargs;                     /* run-time scalar args (double) */
  int32_t rtgeo;                     /* 1: sizes and strides are run-time values (CG_GEO_*) */
  int64_t ntrow;                     /* bytes a row stores through non-temporal stores (derived, not hashed) */
  int64_t buf_base[CG_MAX_BUFS];     /* elements added to buffer k's pointer at run time (derived, not hashed) */
  int32_t nacc, nins;
  CgAccess *acc;                     /* malloc'd, owned by the kernel */
  CgIns *ins;
} CgKernel;

/* Run-time sizes of a kernel (dims[], see "Run-time sizes" above). */
enum {
  CG_DIM_N,          /* flat mode: flat; column mode: cred */
  CG_DIM_BLK,        /* column mode: cblk; row mode with column sums: rows per block */
  CG_DIM_NBLK,       /* column mode: blocks, ceil(cred / cblk); row mode: ceil(rows / block) */
  CG_DIM_UNITS,      /* column mode: phase-1 units, rows * blocks */
  CG_DIM_NT,         /* 1: vector stores to the buffers cg_store_nt names bypass the cache */
  CG_NDIMS
};
void cg_kernel_dims(const CgKernel *k, int64_t dims[CG_NDIMS]);
/* rtgeo kernels: dims[] also holds the geometry, from CG_NDIMS on */
#define CG_GEO_OSIZE(d) (CG_NDIMS + (d))
#define CG_GEO_INNER (CG_NDIMS + TD_MAX_DIMS)
#define CG_GEO_ACC(a) (CG_NDIMS + TD_MAX_DIMS + 1 + (a) * (TD_MAX_DIMS + 2))   /* offset, istride, ostride[0..] */
/* the length of a kernel's dims[] (CG_NDIMS, or with its geometry) */
int cg_kernel_ndims(const CgKernel *k);
/* the geometry part of dims[] (rtgeo kernels; cg_kernel_dims fills the rest) */
void cg_kernel_geo(const CgKernel *k, int64_t *dims);

/* Non-temporal stores. When every element store of a row kernel is a
** unit-stride float store whose rows start 64-byte aligned (offset and outer
** strides), into a buffer the kernel does not read, each is printed twice: as
** a normal store and as a store that bypasses the cache, chosen per call by
** dims[CG_DIM_NT]. cg_kernel_run sets it when every such buffer's base is
** 64-byte aligned and the call stores more than a last-level cache holds
** (TIDE_NT_BYTES, 16 MiB): the values could not stay cached for their reader anyway,
** and a normal store first reads the line it writes (a third of the traffic
** of y = f(x)). cg_kernel_finish sets ntrow. */
bool cg_store_nt(const CgKernel *k, int acc);

/* Buffer bases. cg_kernel_finish takes the smallest offset of each buffer's
** accesses out of them into buf_base[], and cg_kernel_run adds it to the
** buffer's pointer: kernels that differ only in where they start reading a
** buffer (x[t] at every step of a loop) have the same code and hash, so one
** compiled kernel serves them all. */

/* The compiled entry point. bufs[k] points at element buf_base[k] of buffer k. */
typedef void (*CgKernelFn)(int64_t r0, int64_t r1, char **bufs, const double *args, const int64_t *dims);

/* Number of rows (column mode: outer index x tile pairs). */
int64_t cg_kernel_rows(const CgKernel *k);
/* Hash the kernel IR and name it k_<hint>_<16 hex>. */
void cg_kernel_finish(CgKernel *k, const char *hint);
void cg_kernel_free(CgKernel *k);

/* Compile a batch of kernels into one shared object (one libgccjit context:
** one compiler run for a whole compiled variant), or find them in the memory
** cache or the disk cache (TIDE_CACHE_DIR, default $XDG_CACHE_HOME/tide).
** fns[i] receives kernel i's entry. Returns 0, or a negative code with a
** message that carries the compiler's diagnostics and the kernels' C text. */
int cg_compile(CgKernel *const *ks, int n, CgKernelFn *fns);
/* The kernel as C source text (malloc'd; the caller frees). */
char *cg_kernel_c_source(const CgKernel *k);
/* Counters: libgccjit compiles, disk-cache loads, memory-cache hits. */
typedef struct CgStats { int64_t compiles, disk_loads, mem_hits, kernels_compiled; double compile_ms; } CgStats;
void cg_stats(CgStats *s);

/* Run kernel fn over all rows on the thread pool (column mode: both phases,
** with the scratch buffers). Returns 0 or TD_ERR_NOMEM. */
int cg_kernel_run(const CgKernel *k, CgKernelFn fn, char **bufs, const double *args);

/* The disk caches' directory (cg_cache.c; the OpenCL programs' too): TIDE_CACHE_DIR
** (empty: none), else $XDG_CACHE_HOME/tide or ~/.cache/tide, then sub ("" or
** "/ocl"), created. Malloc'd, or NULL when disabled or unusable: a read-only,
** missing or uncreatable directory is no error, said once per *warned:
** "<what> <dir> cannot be used (<why>); <instead> (set TIDE_CACHE_DIR ...)". */
char *cg_cache_dir(const char *sub, int *warned, const char *what, const char *instead);
char *cg_path_cat(const char *a, const char *b, const char *c);   /* malloc'd a b c */

#endif
