/*
** tide.h -- the one public C API of tide: tensors, ops, autograd, RNG, memory.
** Usable from C with no Lua at all; the Lua layer reads this same file through
** the LuaJIT FFI (the build preprocesses it with -DTD_CDEF into build/tide_cdef.lua).
** Conventions: 0-based dims; functions returning td_tensor* give a new (+1)
** reference or NULL with a message in td_last_error(); int functions return
** 0 or a negative TD_ERR_* code.
**
** Threads. Any number of threads may call tide at once on distinct tensors
** (a C host, or one lua_State per thread, each loading tide). Per thread:
** the error message (td_last_error), the grad mode (td_set_grad_enabled) and
** whether the thread is tracing (ops on a thread that is not tracing are
** never recorded). Shared by the process, and safe to share: the thread pool
** (one job at a time; a thread that finds it busy runs its chunks itself,
** with the same results), the caching allocator and the live-byte counter,
** the kernel caches, and the RNG: one stream (td_manual_seed seeds it for
** every thread; random ops on several threads draw disjoint numbers, in the
** order the threads get there). Reference counts are atomic: any thread may
** release. A tensor, its views, its .grad and the autograd graph through it
** belong to one thread at a time: hand them over with the host's own
** synchronization; two threads writing one tensor, or running backward
** through one graph, is a race. tide.compile traces one call at a time per
** process: td_compile_begin on a thread while another thread traces fails
** with TD_ERR_STATE. OpenCL tensors: one thread at a time.
*/
#ifndef TIDE_H
#define TIDE_H

#ifndef TD_CDEF
#include <stdint.h>
#include <stddef.h>
#define TD_API __attribute__((visibility("default")))
#else
#define TD_API
#endif

#define TD_MAX_DIMS 8

/* tide's version (td_version_string() gives the library's, which may be newer than this header) */
#define TIDE_VERSION "0.1.0"

/* -- Dtypes ------------------------------------------------------------- */

/* ORDER DTYPE: rt_dtype.c keeps the per-dtype table in this order. */
typedef enum td_dtype {
  TD_BOOL = 0, TD_UINT8, TD_INT32, TD_INT64, TD_FLOAT32, TD_FLOAT64, TD_DTYPE__MAX
} td_dtype;

typedef enum td_device { TD_CPU = 0, TD_OPENCL = 1 } td_device;

/* -- Errors --------------------------------------------------------------- */

enum {
  TD_OK = 0, TD_ERR_ARG = -1, TD_ERR_SHAPE = -2, TD_ERR_DTYPE = -3,
  TD_ERR_INDEX = -4, TD_ERR_NOMEM = -5, TD_ERR_GRAD = -6, TD_ERR_STATE = -7,
  TD_ERR_IO = -8, TD_ERR_DEVICE = -9, TD_ERR_INTERRUPTED = -10
};

/* -- Tensors -------------------------------------------------------------- */

struct RtStorage;
struct RtNode;

/* A tensor is a strided view of a storage. The fields up to `ptr` are
** read-only for users; the rest is the runtime's. Strides and offset count
** elements, not bytes. The FFI sees td_tensor as opaque (so that `x + 1` in
** Lua reaches the __add metamethod instead of pointer arithmetic) and reads
** the fields through a cast to td_tensor_fields. */
#ifdef TD_CDEF
typedef struct td_tensor td_tensor;
#define td_tensor td_tensor_fields
#endif
typedef struct td_tensor {
  int32_t ndim;
  int32_t scalar_type;           /* td_dtype */
  int32_t device_type;           /* td_device */
  int32_t flags;                 /* TD_TF_* */
  int64_t sizes[TD_MAX_DIMS];
  int64_t strides[TD_MAX_DIMS];
  int64_t offset;
  int64_t nelem;
  void *ptr;                     /* storage base + offset*itemsize, or NULL (traced) */
  /* runtime-private below (names keep clear of the Lua methods) */
  int32_t refcount;
  int32_t rt_pad;
  struct RtStorage *rt_storage;
  struct td_tensor *rt_grad;     /* accumulated gradient (leaves), or NULL */
  struct RtNode *rt_grad_fn;     /* node that produced it (non-leaf), or NULL */
  struct td_tensor *rt_base;     /* for views of tensors that require grad */
} td_tensor;
#ifdef TD_CDEF
#undef td_tensor
#endif

enum {
  TD_TF_REQUIRES_GRAD = 1,       /* autograd tracks this tensor */
  TD_TF_WRAPPED_NUMBER = 2,      /* a Lua/C number turned into a 0-dim tensor */
  TD_TF_RETAIN_GRAD = 4,         /* non-leaf keeps its .grad */
  TD_TF_VIEW = 8,                /* made by a view op: shares its base tensor's memory */
  TD_TF_HOOKED = 16              /* has backward hooks in the host (td_set_hook_runner) */
};

/* Op attributes: one struct for every op; each op reads the fields it needs. */
typedef struct td_attrs {
  double s[2];                   /* scalars: clamp lo/hi, norm p, ... */
  int64_t dims[TD_MAX_DIMS];     /* dims (reductions, permute) or a shape (view, expand) */
  int32_t ndims;                 /* number of entries in dims; -1 = all dims */
  int32_t keepdim;
  int32_t dtype;                 /* target dtype (cast), or -1 */
  int32_t flags;                 /* op-specific: gelu tanh form, var unbiased, clamp sides */
  int64_t i[4];                  /* ints: dim, start, stop, step, index */
} td_attrs;

/* -- Errors, memory, threads, RNG ----------------------------------------- */

TD_API const char *td_last_error(void);
TD_API int64_t td_live_bytes(void);      /* bytes held by live storages and tensors */
TD_API int64_t td_cached_bytes(void);    /* bytes kept by the caching allocator */
/* on = 1 while a host's garbage collector frees tensors (tide's Lua layer calls
** it around its collections): the caching allocator then takes a freed block
** as last used when it was made, not now (its streaming stores) */
TD_API void td_collecting(int on);
TD_API void td_empty_cache(void);
/* Storage bytes per device ([TD_CPU], [TD_OPENCL]): live now, the peak since
** start or the last reset, allocations made, bytes the caching allocator
** keeps; host_total is every byte the GC pacer counts (tensor headers too). */
typedef struct td_mem_stats {
  int64_t live[2], peak[2], allocs[2], cached[2];
  int64_t host_total;
  int64_t streamed;                      /* eager results written with streaming stores (cold blocks) */
} td_mem_stats;
TD_API void td_memory_stats(td_mem_stats *out);
TD_API void td_reset_peak_memory_stats(void);
TD_API int td_set_num_threads(int n);
TD_API int td_get_num_threads(void);
TD_API const char *td_blas_core(void);   /* the kernels OpenBLAS picked ("SkylakeX", "Haswell") */
/* The instruction-set level of the eager kernels ("x86-64", "x86-64-v3", "x86-64-v4"):
** the CPU's best, or TIDE_ISA's (base, v3, v4) when the CPU has it. */
TD_API const char *td_eager_isa(void);
/* float32 products run on tide's register tile (a short A, x86-64-v4) and the
** packs of a transposed B it made for its cache, since the process started */
TD_API void td_mm_tile_stats(int64_t *products, int64_t *packs);
TD_API int64_t td_bmm_tile_calls(void);   /* float32 matmul calls run on the batched 64-column tile */
TD_API void td_manual_seed(uint64_t seed);
TD_API void td_rng_get_state(uint64_t *seed, uint64_t *offset);
TD_API void td_rng_set_state(uint64_t seed, uint64_t offset);
TD_API const char *td_version_string(void);   /* "0.1.0" */

/* -- Interrupts (rt_signal.c) ----------------------------------------------
** td_interrupt() (async-signal-safe, any thread) asks the running work to
** stop: the next op fails with "interrupted" (TD_ERR_INTERRUPTED), which
** clears the request. td_interrupt_pending(1) reads and clears it (a host's
** own checks). td_interrupt_catch(1) installs a SIGINT handler that calls
** td_interrupt() (no SA_RESTART: blocking reads return EINTR), and hands a
** second SIGINT that comes while the first is pending to the previous
** handler (by default: the process ends); (0) restores the previous handler. */
TD_API void td_interrupt(void);
TD_API int td_interrupt_pending(int clear);
TD_API int td_interrupt_catch(int on);

/* -- Tensor lifetime and creation ----------------------------------------- */

TD_API void td_retain(td_tensor *t);
TD_API void td_release(td_tensor *t);
/* The Lua handle: one owned reference. Its GC finalizer is td_handle_free,
** a C function taking the handle by value (cheaper than a Lua __gc). */
typedef struct td_handle { td_tensor *p; } td_handle;
TD_API void td_handle_free(td_handle h);
TD_API td_tensor *td_empty(int ndim, const int64_t *size, int dtype);
TD_API td_tensor *td_full(int ndim, const int64_t *size, double value, int dtype);
TD_API td_tensor *td_from_buffer(int ndim, const int64_t *size, int dtype, const void *src);
TD_API td_tensor *td_from_doubles(int ndim, const int64_t *size, int dtype, const double *src);
/* Files mapped into memory (private, copy-on-write); tensors made from a
** mapping share its pages and keep it alive (tide.load). */
typedef struct td_mapping td_mapping;
TD_API td_mapping *td_map_fd(int fd, int64_t *size);     /* the whole file; fd stays open */
TD_API const void *td_mapping_data(const td_mapping *m);
TD_API td_tensor *td_from_mapping(td_mapping *m, int64_t offset, int ndim, const int64_t *size, int dtype);
TD_API void td_mapping_release(td_mapping *m);
/* A tensor over the host's own memory, without a copy (0-based strides in
** elements, >= 0, or NULL for contiguous). tide never frees or caches that
** memory: release(data, ctx) runs once when the last tensor or view over it
** dies (NULL: nothing runs). On failure (NULL) release is not called and
** the memory stays the caller's. data must be aligned for the dtype. */
typedef void (*td_blob_release)(void *data, void *ctx);
TD_API td_tensor *td_from_blob(void *data, int ndim, const int64_t *size, const int64_t *strides, int dtype,
                               td_blob_release release, void *ctx);
/* For bindings that keep an owner alive on their side: td_blob_note as the
** release function records ctx (an id); td_blob_released pops up to max ids. */
TD_API void td_blob_note(void *data, void *ctx);
TD_API int td_blob_released(int64_t *ids, int max);
TD_API td_tensor *td_scalar(double value, int dtype);      /* 0-dim tensor */
TD_API td_tensor *td_wrap_number(double value);           /* 0-dim, promotes like a scalar */
TD_API td_tensor *td_arange(double start, double stop, double step, int dtype);
TD_API td_tensor *td_linspace(double start, double stop, int64_t n, int dtype);
TD_API td_tensor *td_eye(int64_t n, int64_t m, int dtype);
TD_API td_tensor *td_rand(int ndim, const int64_t *size, int dtype);
TD_API td_tensor *td_randn(int ndim, const int64_t *size, int dtype);
TD_API td_tensor *td_randint(int64_t lo, int64_t hi, int ndim, const int64_t *size, int dtype);
/* The same on a device (TD_CPU, or TD_OPENCL with its index, -1 for the open
** one): random values drawn there from the same stream, equal to the CPU's. */
TD_API td_tensor *td_rand_on(int device, int index, int kind, int64_t lo, int64_t hi, int ndim, const int64_t *size,
                             int dtype);   /* kind 0 rand, 1 randn, 2 randint [lo, hi) */
TD_API td_tensor *td_full_on(int device, int index, int ndim, const int64_t *size, double value, int dtype);
TD_API td_tensor *td_empty_on(int device, int index, int ndim, const int64_t *size, int dtype);
TD_API int td_item(const td_tensor *t, double *out);       /* error if numel != 1 */
TD_API int td_read(const td_tensor *t, double *dst);       /* all elements, row-major */
TD_API int td_is_contiguous(const td_tensor *t);
TD_API const char *td_dtype_name(int dtype);
TD_API int td_dtype_size(int dtype);
TD_API int td_result_type(const td_tensor *a, const td_tensor *b);

/* -- Devices (opencl/cl_rt.c) ----------------------------------------------
** "opencl:N" is the N-th device over all OpenCL platforms; one device per
** process (the first one used). */
TD_API int td_opencl_init(int index);           /* open device index (-1: TIDE_OPENCL_DEVICE or 0) */
TD_API int td_opencl_device_count(void);        /* 0 when there is no OpenCL platform */
TD_API int td_opencl_device_index(void);        /* the open device, or -1 */
TD_API const char *td_opencl_device_name(void);
/* Write the full text of every OpenCL program tide builds from now on into
** dir as <hash>.cl, once per text (NULL or "": stop). TIDE_CL_DUMP=dir sets
** it at start. The specs run each through clang's strict OpenCL C 1.2 check. */
TD_API void td_opencl_dump_dir(const char *dir);
/* OpenCL counters: programs built from source, programs loaded from the disk
** cache, kernels of the kernel IR launched, and their work groups (out[0..3]). */
TD_API void td_opencl_stats(int64_t *out);
/* The device allocator's and queue's counters (out[0..5]): buffers created,
** buffers reused from the cache, cache flushes when the device was full,
** bytes held (buffers in use rounded up to their size class, plus cached),
** bytes cached, and host waits for the queue (reads, finish). */
TD_API void td_opencl_memory_stats(int64_t *out);
/* Cap the device bytes tide holds (0: the device's global memory); returns
** the previous cap; bytes < 0 only reads it. Past the cap the cache is
** emptied, then an allocation fails with "out of device memory". */
TD_API int64_t td_opencl_memory_limit(int64_t bytes);
/* CLBlast's SGEMM (Xgemm) parameters for the open device, "KWG=32 KWI=2 ..."
** (every Xgemm parameter): 0, or an error naming what CLBlast refused. The
** file named by TIDE_CLBLAST_TUNING (lines "device name<TAB>params") is
** applied before the first float32 product; td_opencl_gemm_tuned() says
** whether a line for this device was (bench/clblast_tune.lua writes it). */
TD_API int td_opencl_gemm_params(const char *params);
TD_API int td_opencl_gemm_tuned(void);
/* Build a program from OpenCL C text: 0, or the build's error with its log and
** the text (a diagnostic: which OpenCL C the device takes). */
TD_API int td_opencl_build(const char *src);
/* Wait for the device's queue. A host calls it before exit() when it used the
** device (the Lua module does it when its state closes): some drivers crash
** when the process exits under a running kernel. */
TD_API void td_opencl_finish(void);
/* A copy of t on device (TD_CPU, or TD_OPENCL with its index), or t itself
** (+1) when it is already there. Differentiable: the gradient moves back. */
TD_API td_tensor *td_to_device(td_tensor *t, int device, int index);

/* -- The dispatcher --------------------------------------------------------- */

/* Every op, by its op-table id: check, infer, record for autograd, run. */
TD_API td_tensor *td_op(int op, int nin, td_tensor *const *in, const td_attrs *attrs);
/* Same, also returning the op's second result (max/min indices; NULL if none). */
TD_API td_tensor *td_op_aux(int op, int nin, td_tensor *const *in, const td_attrs *attrs, td_tensor **aux);
/* Same, writing into `out` in place (out's shape must be the result's). */
TD_API int td_op_out(int op, int nin, td_tensor *const *in, const td_attrs *attrs, td_tensor *out);
TD_API int td_op_count(void);
TD_API const char *td_op_name(int op);
TD_API int td_op_arity(int op);
TD_API int td_op_kind(int op);

/* Binary op with a number operand (rev: number is the left operand). */
TD_API td_tensor *td_op_number(int op, td_tensor *a, double v, int rev);

/* -- Named ops (thin wrappers over td_op) ------------------------------------ */

TD_API td_tensor *td_add(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_sub(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_mul(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_div(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_neg(td_tensor *a);
TD_API td_tensor *td_exp(td_tensor *a);
TD_API td_tensor *td_log(td_tensor *a);
TD_API td_tensor *td_matmul(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_sum(td_tensor *a, int ndims, const int64_t *dims, int keepdim);
TD_API td_tensor *td_view(td_tensor *a, int ndim, const int64_t *size);
TD_API td_tensor *td_reshape(td_tensor *a, int ndim, const int64_t *size);
TD_API td_tensor *td_permute(td_tensor *a, int ndim, const int64_t *perm);
TD_API td_tensor *td_expand(td_tensor *a, int ndim, const int64_t *size);
TD_API td_tensor *td_contiguous(td_tensor *a);
TD_API td_tensor *td_cast(td_tensor *a, int dtype);
TD_API td_tensor *td_sum_to(td_tensor *a, int ndim, const int64_t *size);
/* The distinct values of CPU tensor x (flattened; consecutive: its runs of
** equal values), each element's 0-based position in them (x's shape) and their
** counts, as three new tensors (rt_sort.c). Eager only: the sizes depend on x. */
TD_API int td_unique(td_tensor *x, int consecutive, td_tensor **values, td_tensor **inverse, td_tensor **counts);
/* The same for the slices of x along dim (0-based; PyTorch's unique(dim=)): values
** has x's shape with m slices along dim, sorted lexicographically (consecutive:
** runs in place), inverse and counts are 1-D. */
TD_API int td_unique_dim(td_tensor *x, int dim, int consecutive, td_tensor **values, td_tensor **inverse,
                         td_tensor **counts);

/* -- Autograd ----------------------------------------------------------------- */

TD_API int td_set_requires_grad(td_tensor *t, int on);
TD_API int td_requires_grad(const td_tensor *t);
TD_API int td_is_leaf(const td_tensor *t);
TD_API td_tensor *td_grad(td_tensor *t);                  /* +1 ref or NULL (no error) */
TD_API int td_set_grad(td_tensor *t, td_tensor *g);       /* g may be NULL */
TD_API int td_retain_grad(td_tensor *t);
TD_API td_tensor *td_detach(td_tensor *t);
TD_API const char *td_grad_fn_name(const td_tensor *t);   /* NULL for leaves */
TD_API int td_grad_enabled(void);
TD_API int td_set_grad_enabled(int on);                   /* returns the previous mode */
/* Backpropagate from outputs[k] seeded with grads[k] (NULL: ones for a scalar).
** inputs == NULL: accumulate into leaves' .grad. Otherwise write d out/d inputs[j]
** into results[j] (+1 ref, or NULL when unreachable) and leave .grad alone. */
TD_API int td_backward(int nout, td_tensor *const *outputs, td_tensor *const *grads,
                       int nin, td_tensor *const *inputs, td_tensor **results,
                       int retain_graph, int create_graph);
TD_API uint64_t td_version(const td_tensor *t);
/* Anomaly mode (this thread): nodes remember where(), the host's description
** of the calling place, and a derivative rule that returns NaN or inf fails
** the backward naming the rule and that place. Returns the previous mode. */
TD_API int td_set_anomaly(int on, const char *(*where)(void));
TD_API int td_anomaly_enabled(void);
/* Tensor hooks. A tensor marked with td_set_hooked has hooks kept by the host;
** when a backward has its whole gradient g (a leaf: summed over its uses,
** before .grad or a requested result takes it; a non-leaf: before its node
** runs), run(t, g) returns the gradient to use instead (+1 reference; g
** itself, retained, keeps it), or NULL to fail the backward. One runner per
** process (the Lua layer installs it). */
TD_API void td_set_hook_runner(td_tensor *(*run)(td_tensor *t, td_tensor *g));
TD_API int td_set_hooked(td_tensor *t, int on);

/* -- Fused optimizer updates (rt_optim.c) ---------------------------------------
** One Adam/AdamW step of parameter p in place, with gradient g and state m, v
** (and vmax for amsgrad, else NULL), all CPU, contiguous, of p's float dtype
** and size; hp: the Lua numbers of the formula (optim.lua): 1 - lr*wd, wd, b1,
** 1 - b1, b2, 1 - b2, sqrt(bias correction 2), eps, -lr / bias correction 1.
** Returns 0, or 1 when the tensors do not fit (nothing is written). */
enum { TD_ADAM_DECOUPLED = 1, TD_ADAM_MAXIMIZE = 2 };
TD_API int td_adam_step(td_tensor *p, td_tensor *g, td_tensor *m, td_tensor *v, td_tensor *vmax,
                        const double *hp, int flags);

/* -- Batch prefetching (rt_prefetch.c) ------------------------------------------------
** A DataLoader's worker threads. Batch b (0-based) holds rows order[b*batch_size ..
** min((b+1)*batch_size, nrows)) of each of the ntensors CPU tensors (dim 0, the values
** index_select gives), as new contiguous tensors; nworkers threads prepare up to
** depth batches ahead (0 workers: each batch is gathered by td_prefetch_next itself).
** order (0-based rows, copied) and every tensor are checked here; the tensors are
** retained (a strided one is copied once) until td_prefetch_free. td_prefetch_next
** hands the batches out in order on the calling thread: 1 with ntensors new tensors
** in out, 0 after the last, or a negative code (a worker's failure, in
** td_last_error). td_prefetch_free stops and joins the workers and drops batches
** not taken. A prefetcher is used by one host thread at a time; the workers read the
** tensors while it lives, so the host must not write them meanwhile. */
typedef struct td_prefetch td_prefetch;
TD_API td_prefetch *td_prefetch_new(int ntensors, td_tensor *const *tensors, const int64_t *order, int64_t nrows,
                                    int64_t batch_size, int nworkers, int depth);
TD_API int td_prefetch_next(td_prefetch *pf, td_tensor **out);
TD_API void td_prefetch_free(td_prefetch *pf);

/* -- Fused row functions (jit/jit_fused.c, kernels in runtime/rt_norm.c) --------
** Eager fast paths of composite functions: one kernel per call, a custom
** autograd node whose backward is one fused kernel (or, when a graph of the
** gradient is recorded, the composite formula from ops). CPU tensors of one
** float dtype with data; they do not trace (tide.compile lowers the
** composite instead). Inputs of any strides; NULL with an error otherwise.
** layer_norm: normalized over the trailing nd dims, y = (x - mean) /
** sqrt(var + eps) * w + b (w, b: NULL or nelem = the normalized size);
** rms_norm: y = x / sqrt(mean(x^2) + eps) * w.
** cross_entropy: logits x (N, C), target int64 (N) of 0-based classes or
** ignore_index, class weights w (C) or NULL (not differentiated), reduction
** TD_REDUCE_*, label smoothing ls in [0, 1]: PyTorch's F.cross_entropy.
** batch_norm (training): x (N, C, ...) normalized per channel by its batch
** statistics, y = (x - mean) / sqrt(var + eps) * w + b (w, b: C or NULL);
** *mean and *var (when not NULL) get the batch mean and biased variance (C). */
enum { TD_REDUCE_NONE = 0, TD_REDUCE_MEAN = 1, TD_REDUCE_SUM = 2 };
TD_API td_tensor *td_layer_norm(td_tensor *x, int nd, td_tensor *w, td_tensor *b, double eps);
TD_API td_tensor *td_rms_norm(td_tensor *x, int nd, td_tensor *w, double eps);
TD_API td_tensor *td_batch_norm(td_tensor *x, td_tensor *w, td_tensor *b, double eps, td_tensor **mean,
                                td_tensor **var);
TD_API td_tensor *td_cross_entropy(td_tensor *x, td_tensor *target, td_tensor *w, int64_t ignore_index,
                                   int reduction, double ls);

/* CTC loss (jit/jit_ctc.c, kernels in runtime/rt_ctc.c): log_probs (T, N, C)
** of a float dtype, targets int64 0-based, (N, S) padded or 1-D concatenated,
** input_lengths and target_lengths (N) int64, blank 0-based: PyTorch's
** F.ctc_loss ('mean' divides each loss by its target length, at least 1,
** then averages), with its true gradient w.r.t. log_probs. CPU, no tracing. */
TD_API td_tensor *td_ctc_loss(td_tensor *log_probs, td_tensor *targets, td_tensor *input_lengths,
                              td_tensor *target_lengths, int64_t blank, int reduction, int zero_infinity);

/* -- Convolution and pooling (jit/jit_conv.c, kernels in runtime/rt_convgemm.c) --
** Eager fast paths as the fused row functions above (CPU, one float dtype, no
** tracing; a custom node, its backward one kernel or the composite under
** create_graph). conv2d: x (N, C, H, W), w (O, C/groups, kh, kw), b (O) or
** NULL; p = { stride h, w, padding h, w, dilation h, w }. pool2d: max (max
** != 0) or average (padding counted) over kh x kw windows of each plane;
** p = { kh, kw, stride h, w, padding h, w, dilation h, w }; *indices (when
** not NULL) gets each maximum's position in its window (ki kw + kj, int64). */
TD_API td_tensor *td_conv2d(td_tensor *x, td_tensor *w, td_tensor *b, const int64_t *p, int64_t groups);
TD_API td_tensor *td_pool2d(td_tensor *x, int max, const int64_t *p, td_tensor **indices);
/* conv_transpose2d: x (N, Cin, H, W), w (Cin, Cout/groups, kh, kw), b (Cout) or NULL; p = { stride h, w,
** padding h, w, dilation h, w, output height, width } (the output plane, output_padding included) */
TD_API td_tensor *td_conv_transpose2d(td_tensor *x, td_tensor *w, td_tensor *b, const int64_t *p, int64_t groups);
/* conv3d: x (N, C, D, H, W) float32, w (O, C/groups, kd, kh, kw), b (O) or NULL; p = { stride d, h, w,
** padding d, h, w, dilation d, h, w }. x86-64-v4's register tiles only (elsewhere an error: F.conv3d
** keeps its composite); its backward has no create_graph form (an error names F.fused = false). */
TD_API td_tensor *td_conv3d(td_tensor *x, td_tensor *w, td_tensor *b, const int64_t *p, int64_t groups);

/* -- Profiler (runtime/rt_prof.c) ------------------------------------------------
** While enabled, every op through the dispatcher, every backward node, every
** step of a compiled plan (kernels and eager steps), every compile and every
** host range (td_profiler_push/pop) leaves an event: wall-clock begin and end
** (CLOCK_MONOTONIC ns), its nesting depth on its thread (children are inside
** their parent's interval), the storage bytes allocated inside it, children
** included. Off, it costs one predicted branch per op. */
enum { TD_PROF_OP = 0, TD_PROF_BACKWARD = 1, TD_PROF_KERNEL = 2, TD_PROF_COMPILE = 3, TD_PROF_RANGE = 4,
       TD_PROF_TRACE = 5 /* an op recorded while tide.compile traces (no kernel runs) */,
       TD_PROF_DEVICE = 6 /* a launch on the OpenCL queue: host interval of the enqueue, dev_ns its run */ };
typedef struct td_prof_event {
  int32_t kind, depth, tid, device;
  int64_t t0, t1, bytes;
  char name[96];
  char shapes[64];               /* the inputs' shapes, "[3,4] [4]" (ops) */
  int64_t dev_ns;                /* TD_PROF_DEVICE: the device's time for it (its profiling info), set
                                 ** when the profile ends; 0 otherwise */
} td_prof_event;
TD_API int td_profiler_enable(int on);          /* returns the previous state; enabling clears the events */
TD_API int64_t td_profiler_count(void);
TD_API const td_prof_event *td_profiler_events(void);   /* valid until the next enable or event */
TD_API int td_profiler_push(const char *name);  /* a host range (record_function): its index, or -1 */
TD_API void td_profiler_pop(int ev);

/* -- Compiled functions (jit/jit_compile.c) -------------------------------------
** A host traces a call between begin and end: every op in between is recorded
** (no kernels run) and its tensors are traced (no data). end looks the trace up
** among the compiled variants (compiling on a miss), runs it and returns the
** outputs as real tensors. */
typedef struct td_compiled td_compiled;
enum { TD_COMPILE_FALLBACK_EAGER = 1, TD_COMPILE_DYNAMIC = 2 };   /* DYNAMIC: sizes are run-time values from the start */
enum { TD_COMPILE_RUN = 0, TD_COMPILE_EXPLAIN = 1, TD_COMPILE_DOT = 2 };
/* td_compile_end's positive result: run the function eagerly instead (its
** outputs need autograd history that the compiled code does not build). */
enum { TD_COMPILE_RERUN_EAGER = 1 };
TD_API td_compiled *td_compile_new(const char *name, int flags);
TD_API void td_compile_free(td_compiled *cf);
TD_API int td_compile_begin(td_compiled *cf, int nargs, td_tensor *const *args);
TD_API int td_compile_end(td_compiled *cf, int nout, td_tensor *const *outs, td_tensor **results, int mode);
TD_API void td_compile_abort(td_compiled *cf);
/* The traced function was suspended (a Lua coroutine yielded inside it): no
** op is traced until td_compile_resume (an error if another trace is active
** on this thread, or this one was abandoned by a later begin). */
TD_API void td_compile_pause(td_compiled *cf);
TD_API int td_compile_resume(td_compiled *cf);
TD_API const char *td_compile_text(const td_compiled *cf);   /* what the last EXPLAIN found */
TD_API int td_compile_variants(const td_compiled *cf);
TD_API int td_compile_eager_grad(const td_compiled *cf);     /* runs eagerly while grad mode is on */
TD_API int td_is_tracing(void);
/* Kernel compiler counters: [0] libgccjit compiles, [1] disk-cache loads,
** [2] memory-cache hits, [3] kernels compiled. */
TD_API void td_jit_stats(int64_t *out);
TD_API const char *td_jit_isa(void);     /* the -march of compiled kernels ("x86-64-v4") */

#endif
