/*
** rt.h -- internal header of the C runtime: storage, the dispatcher's call
** record, op-table hooks, errors, the thread pool and dtype helpers.
** Not installed; the public surface is tide.h.
*/
#ifndef RT_H
#define RT_H

#include "tide.h"
#include "rt_ops.h"
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

/* -- Errors ----------------------------------------------------------------- */

/* Set the thread-local message (printf-style) and return `code`. */
int rt_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, for pointer-returning functions: sets the message, returns NULL. */
void *rt_errp(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Format a shape as "[3,4]" into buf (returns buf). */
char *rt_shape_str(char *buf, size_t n, int ndim, const int64_t *size);
#define RT_SHAPE(t) rt_shape_str((char[160]){0}, 160, (t)->ndim, (t)->sizes)

/* An interrupt was requested (td_interrupt): rt_interrupted takes it and sets
** the "interrupted" error, or returns 0 when another thread took it first or
** this thread holds interrupts (rt_interrupt_hold > 0: inside a backward
** pass, which runs to its end). RT_INTERRUPT_CHECK costs one relaxed load. */
extern _Atomic int rt_interrupt_flag;
extern _Thread_local int rt_interrupt_hold;
int rt_interrupted(void);
#define RT_INTERRUPT_CHECK(fail) \
  do { if (__builtin_expect(__atomic_load_n(&rt_interrupt_flag, __ATOMIC_RELAXED), 0) && rt_interrupted()) \
    return fail; } while (0)

/* -- Argument checks shared by every public entry point ---------------------- */

/* A tensor argument of a public call must be live: NULL is what a freed Lua
** handle (x:free()) holds, or a C host's mistake. One check, one message. */
int rt_arg_dead(const char *fn, int argn);
/* Row kernels: ask for the lines of [p, p + bytes). The row kernels ask for
** the next row's lines a piece at a time during a pass over this row: the
** hardware's stream prefetcher stops at every 4 KiB page, so each row of a
** (R, 1024) float32 tensor, a page of its own, would otherwise start with
** misses to DRAM; a burst of a whole row at its start stalls on the fill
** buffers, where requests spread over the pass overlap the row's arithmetic.
** The backward kernels ask for their output row's lines too (their long
** second pass otherwise waits on the stores' misses); the forward kernels
** measured slower with it. Rows longer than RT_PREFETCH_ROW_MAX leave the
** next one to the hardware: L2 holds a row's passes and the next row's lines
** only when rows are short. */
#define RT_PREFETCH_ROW_MAX 65536
#define RT_PREFETCH(p, bytes) \
  do { const char *pp_ = (const char *)(p); size_t n_ = (size_t)(bytes); \
       for (size_t o_ = 0; o_ < n_; o_ += 64) __builtin_prefetch(pp_ + o_); } while (0)
#define RT_ARG(t, fn, argn, fail) do { if (!(t)) { rt_arg_dead(fn, argn); return fail; } } while (0)
/* Checked size arithmetic for shapes derived from user numbers (sizes >= 0):
** r = a*b or a+b, or the error "<op>: size overflows int64". */
int rt_size_mul(const char *op, int64_t a, int64_t b, int64_t *r);
int rt_size_add(const char *op, int64_t a, int64_t b, int64_t *r);
/* Validate a list of n dims of a tensor with ndim dims (0-based, negative from
** the end): count, range, repeats. Wraps them in place (sorted when `sort`);
** the error names op and the 1-based dim. Returns the mask of the dims. */
int rt_dims_check(const char *op, int n, int64_t *dims, int ndim, bool sort, uint32_t *mask);
/* A number stored into dtype dt must be representable: integer dtypes reject
** NaN and values outside their range ("<op>: value 1e+300 is out of range for
** int32"); fractions truncate toward zero, as C and PyTorch do. */
int rt_value_check(const char *op, double v, int dt);

#ifdef RT_DEBUG
#include <stdio.h>
#include <stdlib.h>
#define RT_ASSERT(c) do { if (!(c)) { fprintf(stderr, "%s:%d: RT_ASSERT(%s)\n", \
  __FILE__, __LINE__, #c); abort(); } } while (0)
#else
#define RT_ASSERT(c) ((void)0)
#endif

/* -- Dtypes ----------------------------------------------------------------- */

/* _(ENUM, name, ctype, size, category) -- category: 0 bool, 1 int, 2 float */
#define RT_DTYPEDEF(_) \
  _(BOOL,    bool,    uint8_t, 1, 0) \
  _(UINT8,   uint8,   uint8_t, 1, 1) \
  _(INT32,   int32,   int32_t, 4, 1) \
  _(INT64,   int64,   int64_t, 8, 1) \
  _(FLOAT32, float32, float,   4, 2) \
  _(FLOAT64, float64, double,  8, 2)

int rt_dtype_size(int dt);
int rt_dtype_cat(int dt);             /* 0 bool, 1 integer, 2 float */
static inline bool rt_is_float(int dt) { return dt == TD_FLOAT32 || dt == TD_FLOAT64; }
extern int rt_default_float;          /* TD_FLOAT32 */
double rt_load(const void *p, int dt);        /* one element as double */
void rt_store(void *p, int dt, double v);     /* one element from double */

/* -- Storage and allocation ------------------------------------------------------ */

typedef struct RtStorage {
  int32_t refcount;
  int16_t device_type;
  uint8_t inline_data;           /* data lives in the same small block (rt_storage.c) */
  uint8_t cold;                  /* its block left the caches before it was handed out (rt_alloc) */
  uint64_t version;              /* bumped by every in-place write (autograd checks) */
  size_t nbytes;
  void *ptr;                     /* 64-byte aligned; NULL for a traced storage */
  int32_t jit_ref;               /* traced: the root record holding the current value */
  uint32_t jit_trace;            /* traced: id of the trace it belongs to (0 = real) */
  struct td_mapping *map;        /* data inside a mapped file (tide.load), or NULL */
  void *dev;                     /* device buffer (cl_mem) of an "opencl" storage; ptr is NULL */
  uint64_t uid;                  /* unique per rt_storage_new storage, never reused; 0: other storages
                                 ** (mapped, blobs, a compiled plan's wrappers), whose bytes may change
                                 ** without a version bump: caches keyed on data never trust those */
} RtStorage;

RtStorage *rt_storage_new(size_t nbytes);      /* NULL + error on failure */
void rt_storage_retain(RtStorage *s);
void rt_storage_release(RtStorage *s);
void *rt_alloc(size_t nbytes);                 /* caching allocator, 64-byte aligned */
void *rt_alloc_cold(size_t nbytes, bool *cold);  /* the same; *cold: a cached block gone stale (RtStorage.cold) */
void rt_free(void *p, size_t nbytes);
void rt_live_add(int64_t delta);              /* host bytes (tensor headers) for the GC pacer */
void rt_mem_add(int device, int64_t delta);    /* storage bytes of a device (and the pacer's count) */
void *rt_small_get(void);                      /* a 64-aligned RT_SMALL_BLOCK-byte block */
void rt_small_put(void *p);
#define RT_SMALL_BLOCK 320

/* -- Tensors -------------------------------------------------------------------- */

td_tensor *rt_tensor_alloc(void);              /* zeroed header, refcount 1, no storage */
/* New contiguous tensor with fresh storage. */
td_tensor *rt_tensor_new(int ndim, const int64_t *size, int dtype);
/* Same, on a device (TD_CPU or TD_OPENCL). */
td_tensor *rt_tensor_new_on(int device, int ndim, const int64_t *size, int dtype);
/* A filled tensor on a device. */
td_tensor *rt_full_on(int device, int ndim, const int64_t *size, double v, int dtype);
/* OpenCL hooks (opencl/): device storage, host copies, fill. */
struct RtStorage *cl_storage_new(size_t nbytes);
void cl_storage_free(struct RtStorage *s);
void cl_empty_cache(void);
int64_t cl_cached_bytes(void);
int cl_init(int index);
/* t (contiguous, on the device) = random values of kind 0 rand, 1 randn,
** 2 randint [lo, lo + span), Philox counters base + i/4 under key (rt_rng.c) */
int cl_rng_fill(td_tensor *t, uint64_t key, uint64_t base, int kind, int64_t lo, int64_t span);
td_tensor *cl_to_cpu(const td_tensor *t);
int cl_fill(td_tensor *t, double v);
/* Has values: host memory or a device buffer (not a traced tensor). */
static inline bool rt_has_data(const td_tensor *t) { return t->ptr || (t->rt_storage && t->rt_storage->dev); }
/* New tensor header aliasing t's storage with the given geometry. */
td_tensor *rt_tensor_alias(td_tensor *t, int ndim, const int64_t *size,
                           const int64_t *stride, int64_t offset);
void rt_tensor_contig_strides(int ndim, const int64_t *size, int64_t *stride);
int64_t rt_numel(int ndim, const int64_t *size);
bool rt_tensor_is_contig(const td_tensor *t);
static inline char *rt_ptr(const td_tensor *t) { return (char *)t->ptr; }
extern int64_t rt_streamed;                   /* eager results streamed so far (td_memory_stats) */
/* t's storage came from a cached block that had left the caches (rt_isa.h streams into it) */
static inline bool rt_cold(const td_tensor *t) { return t->rt_storage && t->rt_storage->cold; }
static inline void rt_bump_version(td_tensor *t) { if (t->rt_storage) t->rt_storage->version++; }

/* -- The dispatcher's call record ------------------------------------------------ */

#define RT_MAX_IN 64   /* cat takes up to this many tensors */

typedef struct RtCall {
  int op;
  int nin;
  td_tensor *const *in;
  td_attrs attrs;            /* a copy, normalized by meta (dims made 0-based, sorted) */
  int cdtype;                /* common compute dtype of the promoted inputs */
  int device;                /* where it runs: TD_OPENCL when any input is there */
  /* filled by meta: */
  int ndim;
  int64_t sizes[TD_MAX_DIMS];
  int scalar_type;           /* the result's dtype */
  td_tensor *aux;            /* a second result (max/min indices), made by the kernel */
} RtCall;

typedef int (*RtMetaFn)(RtCall *c);
typedef int (*RtKernFn)(RtCall *c, td_tensor *out);

typedef struct RtOpInfo {
  const char *name;
  int kind, arity, flags;
  RtMetaFn meta;
  RtKernFn kern;
  struct JitGradRule *grad;
} RtOpInfo;

extern const RtOpInfo rt_ops[RT_OP__MAX];

/* Meta (shape and dtype rule) and kernel hooks named in the op table. */
#define RT_DECLHOOKS(name, kind, arity, flags, meta, kern, grad) \
  int rt_meta_##meta(RtCall *c); int rt_kern_##kern(RtCall *c, td_tensor *out);
RT_OPDEF(RT_DECLHOOKS)
#undef RT_DECLHOOKS

/* Broadcast shapes a and b into out; error names the op. */
int rt_broadcast(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                 int *nout, int64_t *out);
/* Normalize slice attrs.i = { dim, start, stop, step } against x; the slice's shape into c. */
int rt_slice_shape(const char *op, RtCall *c, const td_tensor *x);
/* Normalize a dim index (0-based, negative from the end) against ndim. */
int rt_wrap_dim(const char *op, int64_t *dim, int ndim);
/* t converted to dtype dt on its own device (a new ref: the same tensor
** retained, or a converted copy). */
td_tensor *rt_as_dtype(td_tensor *t, int dt);
/* Contiguous version of t on its device (retained t if already contiguous). */
td_tensor *rt_as_contig(td_tensor *t);
/* Eager derivatives in one pass (rt_ewgrad.c): g * op'(v), v the input or the
** output as the op's rule saves it, the rule's arithmetic; GELU's flags & 1
** is its tanh form, POW's y the scalar exponent. When rt_ew_grad_fits: CPU,
** same float dtype and shape, v contiguous, g contiguous or one value
** broadcast, not tracing. NULL for an op without one (or pow with NaN y - 1). */
bool rt_ew_grad_fits(const td_tensor *g, const td_tensor *v);
td_tensor *rt_ew_grad(int op, int flags, const td_tensor *g, const td_tensor *v, double y);
/* Fused eager row kernels (rt_norm.c), run by jit/jit_fused.c: every
** tensor contiguous on the CPU, of `dtype` (cross_entropy's target int64). */
enum { RT_NORM_FWD, RT_NORM_BWD, RT_NORM_SM_BWD, RT_NORM_LSM_BWD, RT_NORM_CE_FWD, RT_NORM_CE_BWD,
       RT_NORM_BN_FWD, RT_NORM_BN_BWD };
typedef struct RtNormJob {
  int kind, dtype;
  int64_t R, D, M;               /* rows and row length (softmax: P, K, M; batch_norm: N, C, S) */
  const void *x, *g, *w, *b;     /* input, incoming gradient, weight, bias (NULL: none) */
  void *y, *dx, *dw, *db;        /* results (NULL: not wanted); softmax bwd: y is an input */
  void *mean, *rstd;             /* norm: per-row statistics (mean NULL for rms); batch_norm: per channel */
  void *var;                     /* batch_norm: the biased batch variance per channel (or NULL) */
  double eps;
  int rms;                       /* rms_norm instead of layer_norm */
  bool y_cold;                   /* fwd: y's block is cold (rt_cold) */
  bool stream;                   /* fwd: y is streamed (rt_isa.h), decided at the entry */
  /* cross_entropy: x (R, D) logits */
  const int64_t *target;         /* R class indices, 0-based */
  int64_t ignore;                /* the ignored index */
  double ls, wsum;               /* label smoothing; sum of the class weights (D without) */
  void *lse;                     /* R: log-sum-exp per row (saved for the backward) */
  double *rowloss, *rowweight;   /* fwd: R each */
  double go, go_scale;           /* bwd: incoming gradient (a scalar), times go_scale */
  int go_rows;                   /* bwd: g holds one gradient per row (stride go_stride) */
  int64_t go_stride;
} RtNormJob;
int rt_norm_run(RtNormJob *j);
/* cumsum of `lines` contiguous float lines of n (rt_scan.c; x and y contiguous, same float dtype) */
int rt_cumsum_lines(td_tensor *x, td_tensor *y, int64_t lines, int64_t n);
/* dx of softmax (log: log_softmax) along dim from the output y, one fused
** pass per row (jit/jit_fused.c), when rt_softmax_grad_fits (CPU, same float
** dtype and shape, both contiguous, not tracing). */
bool rt_softmax_grad_fits(const td_tensor *g, const td_tensor *y);
td_tensor *rt_softmax_grad(const td_tensor *g, const td_tensor *y, int64_t dim, int log);
/* Convolution and pooling without windows in memory (rt_convgemm.c), run by
** jit/jit_conv.c: x (N, C, H, W), w (O, C/G, kh, kw), b (O), y (N, O, OH, OW)
** (pooling: O = C, no w), contiguous CPU tensors of `dtype`. */
/* kd == 0: a 2-D convolution (depth fields unused: one slice); kd >= 1: 3-D
** (conv3d, x (N, C, D, H, W)), run by rt_convmk.c's tiles only (float32, x86-64-v4) */
typedef struct RtConvGeom {
  int64_t N, C, H, W, O, G, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
  int64_t D, kd, sd, pd, dd, OD;
} RtConvGeom;
/* FWD: y (+ b). BWD: dx (+ b (C), a transposed convolution's bias), dw, db.
** CONVT_BWD, a transposed convolution's backward (its dY is x here, its input
** dy): y = conv(x, w), dw (dy and x as BWD's), sx[c] = sum of x[., c] (its
** bias gradient), from one padded copy of x; x may be strided (xs). */
enum { RT_CONV_FWD, RT_CONV_BWD, RT_POOL_MAX_FWD, RT_POOL_MAX_BWD, RT_POOL_AVG_FWD, RT_POOL_AVG_BWD, RT_CONVT_BWD };
typedef struct RtConvJob {
  int kind, dtype;
  RtConvGeom g;
  const void *x, *w, *b, *dy;    /* inputs (NULL: none) */
  void *y, *dx, *dw, *db, *sx;   /* results (NULL: not wanted) */
  const int64_t *xs;             /* CONVT_BWD: x's element strides (4 of them), NULL: contiguous */
  int64_t *idx;                  /* max pool: the window position (ki kw + kj) of each output */
} RtConvJob;
int rt_conv_run(RtConvJob *j);
/* the forward of a float32 3x3 stride-1 convolution by Winograd's F(2x2, 3x3) (rt_convwino.c, x86-64-v4 only):
** 0 done, 1 not taken (rt_convmk.c's tiles run it), < 0 an error */
int rt_wino_fwd_v4(const RtConvJob *j);
bool rt_wino_fits_v4(const RtConvJob *j);     /* its kind, dtype and geometry are the path's */
/* CTC (rt_ctc.c), run by jit/jit_ctc.c: log_probs lp (T, N, C) contiguous of
** `dtype`, labels 0-based int64 (sequence n's at tg + off[n], tl[n] of them),
** input lengths il[n] <= T; alpha is (N, T, rt_ctc_width(L)) doubles, written
** by the forward and read by the backward; sums in double. */
typedef struct RtCtcJob {
  int dtype;
  int64_t T, N, C, L, blank;     /* L = 2 smax + 1 */
  const void *lp;
  const int64_t *tg, *off, *il, *tl;
  double *alpha;                 /* N * T * rt_ctc_width(L) */
  double *nll;                   /* fwd: N, -log p(target | input) (inf where impossible) */
  const double *gs;              /* bwd: N, d loss / d nll[n] (0 skips the sequence) */
  void *dlp;                     /* bwd: (T, N, C) of dtype, d loss / d lp */
  double *scratch;               /* N * rt_ctc_scratch(L, C) */
  uint8_t *logspace;             /* N: the forward fell back to log space (its rows hold log alpha) */
} RtCtcJob;
/* a row of alpha or beta: 2 -inf before, a multiple of 8 (vector loops run whole) */
static inline int64_t rt_ctc_width(int64_t L) { return (L + 11 + 7) & ~(int64_t)7; }
static inline int64_t rt_ctc_scratch(int64_t L, int64_t C) { return 8 * (L + 8) + 2 * rt_ctc_width(L) + C; }
int rt_ctc_forward(RtCtcJob *j);
int rt_ctc_backward(RtCtcJob *j);
/* float32 C (M,N) = A (M,K) @ B (K,N) on the AVX-512 register tile (rt_mmtile.c), C contiguous;
** A's element (i,k) at a[i ars + k acs]; B's (k,j) at b[k ldb + j] (btrans 0) or b[j ldb + k]
** (btrans 1: packed into panels, cached per storage uid and version when bs is given). */
typedef struct RtMmTile {
  int64_t M, N, K, ars, acs, ldb;
  const float *a, *b;
  float *c;
  int btrans;
  const RtStorage *bs;           /* B's storage (cache key), or NULL: never cached */
} RtMmTile;
int rt_mm_tile(const RtMmTile *j);   /* 0, an error code, or 1: not applicable (OpenBLAS runs it) */
void rt_mm_tile_clear(void);   /* frees the packed-B cache (td_empty_cache, exit) */
/* float32 batched C = A @ B on the 64-column AVX-512 tile (rt_bmmtile.c): g's nbatch products
** into the contiguous c; a, b at the operands' offsets (batch bi adds rt_mm_batch_off's offsets);
** A's (i,k) at a[i ars + k acs], B's (k,j) at b[k brs + j bcs]. */
typedef struct RtMmGeom RtMmGeom;
typedef struct RtBmmTile {
  const RtMmGeom *g;
  const float *a, *b;
  float *c;
  int64_t ars, acs, brs, bcs;
} RtBmmTile;
int rt_bmm_tile(const RtBmmTile *j);   /* 0, an error code, or 1: not applicable (OpenBLAS runs it) */
void rt_blas_single(void);     /* OpenBLAS single-threaded inside the pool's threads (rt_blas.c) */
/* The eager kernel of op for tensors on `device`. */
RtKernFn rt_kern_of(int op, int device);
int cl_kern(RtCall *c, td_tensor *out);      /* every op on opencl (opencl/cl_rt.c) */
/* Elementwise geometry: out and nin inputs broadcast to out's shape, size-1
** dims dropped and dims merged where every operand is contiguous across them
** (strides in elements, 0 on broadcast dims; operand 0 is out). */
#define RT_EW_MAXOP 4
void rt_ew_dims(const td_tensor *out, int nin, td_tensor *const *in, int *nd, int64_t *sizes,
                int64_t (*strides)[TD_MAX_DIMS]);
/* Run a call whose meta has succeeded, into a new or given output. */
td_tensor *rt_call_op(int op, int nin, td_tensor *const *in, const td_attrs *attrs);
/* dst <- src through dst's strides, converting the dtype: the COPY kernel of
** dst's device (rt_index.c). */
int rt_copy_into(td_tensor *dst, td_tensor *src);

/* -- Matmul geometry (rt_blas.c; shared by the CPU and OpenCL kernels) ------------- */

/* A matmul is `nbatch` products C (M,N) = A (M,K) @ B (K,N) into the contiguous
** result. An operand is a strided (rows x cols) matrix: element strides rs, cs,
** its tensor's element offset `off`, and strides over the result's batch dims
** (0 where it is broadcast), so broadcast operands are never copied. A 1-D a is
** a (1,K) row, a 1-D b a (K,1) column. */
typedef struct RtMmOperand {
  int64_t rows, cols, rs, cs, off;     /* the matrix, its element strides and offset */
  int64_t bst[TD_MAX_DIMS];            /* strides over the result's batch dims (0: broadcast) */
} RtMmOperand;

typedef struct RtMmGeom {
  int64_t M, N, K, nbatch;
  int nbd;                             /* batch dims of the result */
  int64_t bsz[TD_MAX_DIMS];
  RtMmOperand a, b;
} RtMmGeom;

void rt_mm_geom(RtMmGeom *g, const td_tensor *a, const td_tensor *b, const td_tensor *out);

/* How the operands go to a row-major BLAS: each RT_MM_NOTRANS with leading dim
** ld ((i,j) at i*ld + j) or RT_MM_TRANS ((i,j) at j*ld + i), ld <= maxld (the
** values are CBLAS's and CLBlast's enums). An operand that fits neither is
** replaced by its contiguous copy (on its device; the reference in *a or *b
** moves to the copy) and g = rt_mm_geom(*a, *b, out) is recomputed. 0, or
** TD_ERR_NOMEM. */
#define RT_MM_NOTRANS 111
#define RT_MM_TRANS 112
typedef struct RtMmLayout { int ta, tb; int64_t lda, ldb; } RtMmLayout;
int rt_mm_layouts(RtMmGeom *g, td_tensor **a, td_tensor **b, const td_tensor *out, int64_t maxld, RtMmLayout *l);
/* When b has no batch strides and a (layout ta, leading dim lda) continues its
** rows through its batch dims, the whole call is one (nbatch*M, K) @ (K, N)
** product (x (B,T,C) @ W (C,D)): its row stride (rows and stride <= maxld), or -1. */
int64_t rt_mm_fold_ld(const RtMmGeom *g, int ta, int64_t lda, int64_t maxld);

/* Element offsets of batch bi from a's and b's `off` (row-major over the
** result's batch dims). Inline: the CPU's integer loop calls it per row. */
static inline void rt_mm_batch_off(const RtMmGeom *g, int64_t bi, int64_t *oa, int64_t *ob)
{
  int64_t a = 0, b = 0;
  for (int d = g->nbd - 1; d >= 0; d--) {
    int64_t i = bi % g->bsz[d];
    bi /= g->bsz[d];
    a += i * g->a.bst[d]; b += i * g->b.bst[d];
  }
  *oa = a; *ob = b;
}

/* -- Autograd hooks (jit/jit_grad.c) ---------------------------------------------- */

bool jit_grad_wants(const RtCall *c);                /* record this call? */
int jit_grad_record(RtCall *c, td_tensor *out);      /* attach a node to out */
/* In place: take over self's history into a new header (returned, +1) before the
** write, then record the call with that header standing for self's old value
** (a copy of it when the call's derivative rule reads self). */
td_tensor *jit_grad_inplace_begin(const RtCall *c, td_tensor *self);
int jit_grad_record_inplace(RtCall *c, td_tensor *self, td_tensor *old);
void jit_node_release(struct RtNode *n);
/* y = x moved to another device: y's node sends the gradient back (td_to_device). */
int jit_grad_record_to(td_tensor *x, td_tensor *y);
/* After an in-place write into `view`, give its root `base` the history
** base_new = scatter(base_old * keep, positions of view, view). */
int jit_grad_rebase_view(td_tensor *view, td_tensor *base);
/* Trace recorder hooks (jit/jit_record.c): jit_tracing is nonzero while a
** compiled function is being traced on this thread. */
extern _Thread_local int jit_tracing;
void jit_record_note_grad(td_tensor *leaf, td_tensor *prev);   /* leaf's .grad is set (it was prev) */
void jit_record_note_backward(void);          /* a backward pass ran */
td_tensor *jit_record_call(RtCall *c);        /* record instead of running */
td_tensor *jit_record_zeros(int ndim, const int64_t *sizes, int dtype);  /* traced zeros (a constant) */
int jit_record_write(RtCall *c, td_tensor *out, td_tensor *value);  /* functionalized in-place write */
int rt_call_prepare(RtCall *c, int op, int nin, td_tensor *const *in, const td_attrs *attrs);
td_tensor *rt_call_record(int op, int nin, td_tensor *const *in, const td_attrs *attrs);
const char *rt_op_lname(int op);
int rt_result_type_n(int n, td_tensor *const *in);

/* -- Profiler (rt_prof.c) ------------------------------------------------------------
** rt_prof_on is read by every op: a plain load and a predicted branch when off. */
extern int rt_prof_on;
int rt_prof_begin(int kind, const char *name, int nin, td_tensor *const *in);  /* event index, or -1 */
void rt_prof_end(int ev);
void rt_prof_alloc(int64_t bytes);             /* bytes allocated inside the open events of this thread */
void rt_prof_set_device_time(int ev, int64_t ns);   /* a TD_PROF_DEVICE event's dev_ns */
extern void (*rt_prof_device_flush)(void);      /* the device's times into their events (cl_mem.c) */

/* -- Thread pool ------------------------------------------------------------------- */

/* Run fn(ctx, begin, end) over [0, n) split in chunks of at least `grain`.
** Chunk boundaries depend only on n, grain and the thread count. */
typedef void (*RtRangeFn)(void *ctx, int64_t begin, int64_t end);
void rt_parallel_for(int64_t n, int64_t grain, RtRangeFn fn, void *ctx);
int rt_num_threads(void);

/* -- RNG ----------------------------------------------------------------------------- */

/* Philox4x32-10: 4 random 32-bit words for (key, counter). */
void rt_philox(uint64_t key, uint64_t ctr, uint32_t out[4]);
/* Reserve n counters from the global stream; returns the first. */
uint64_t rt_rng_reserve(uint64_t n, uint64_t *key);

#endif
