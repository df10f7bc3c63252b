/*
** cl.h -- internal header of the OpenCL device runtime (opencl/): the device,
** its buffers, the program cache and the eager kernels of every op kind.
**
** A tensor on "opencl" has a storage whose `dev` is a cl_mem and whose `ptr`
** is NULL; its geometry (sizes, strides, offset in elements) is the same as on
** the CPU, so views are made by the CPU's view kernel and cost nothing here.
** Kernels are OpenCL C generated per (op, dtypes) and built once per process
** (PoCL also keeps the binaries on disk, POCL_CACHE_DIR). One device per
** process: the first "opencl:N" used picks it.
*/
#ifndef CL_H
#define CL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include "rt.h"
#include "cl_dl.h"      /* the ICD loader through a table, loaded on first use */

/* -- The device ---------------------------------------------------------------------- */

/* Open device `index` (-1: TIDE_OPENCL_DEVICE or 0) once; 0 or an error. */
int cl_init(int index);
int cl_has_fp64(void);
/* The open device's limits (cl_init first). */
typedef struct ClLimits {
  int64_t max_wg;         /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  int64_t local_mem;      /* CL_DEVICE_LOCAL_MEM_SIZE, bytes */
  int64_t max_alloc;      /* CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes */
  int64_t global_mem;     /* CL_DEVICE_GLOBAL_MEM_SIZE, bytes */
  int units;              /* CL_DEVICE_MAX_COMPUTE_UNITS */
  int base_align;         /* CL_DEVICE_MEM_BASE_ADDR_ALIGN, bytes */
  int fp64;               /* cl_khr_fp64 (and not TIDE_OPENCL_NO_FP64) */
  int cpu;                /* CL_DEVICE_TYPE_CPU (PoCL): small work groups run faster there */
} ClLimits;
const ClLimits *cl_limits(void);

const char *cl_device_name(void);
/* The device's context and in-order queue (for libraries such as CLBlast). */
cl_context cl_ctx(void);      /* (not "cl_context": that is the OpenCL type) */
cl_command_queue cl_queue(void);
cl_device_id cl_dev(void);
/* Turn an OpenCL status into a Lua-facing error: "op: OpenCL <call> failed: CL_... (code)". */
int cl_check(cl_int st, const char *op, const char *call);
const char *cl_status_name(cl_int st);

/* -- Buffers and transfers ---------------------------------------------------------- */

/* cl_mem.c: the caching allocator, uploads, host waits, device times */
RtStorage *cl_storage_new(size_t nbytes);     /* device storage (a cached buffer when one fits), or NULL + error */
void cl_storage_free(RtStorage *s);           /* from rt_storage_release: back to the cache */
void cl_empty_cache(void);                    /* tide.empty_cache */
int64_t cl_cached_bytes(void);
void cl_mem_init(void);                       /* at cl_init */
int cl_closed(void);                          /* the process is exiting: no more driver calls */
/* Enqueue a write of n host bytes at src into m at byte off, not waiting: the
** bytes are staged first, unless `hold` (a tensor no one else can write)
** owns them, which is then kept alive until the write is done. */
int cl_upload(cl_mem m, size_t off, const void *src, size_t n, td_tensor *hold, const char *op);
void cl_synced(void);                         /* the host waited for the queue (a read, a finish) */
int64_t cl_sync_count(void);
/* A launch's profiler event: h = cl_prof_open(name) (-1 when the profiler is
** off), enqueue with &e when h >= 0, then cl_prof_close(h, e). */
int cl_prof_open(const char *name);
void cl_prof_close(int h, cl_event e);
static inline cl_mem cl_buf(const td_tensor *t) { return (cl_mem)t->rt_storage->dev; }
/* A contiguous tensor on the device, uninitialized. */
td_tensor *cl_tensor_new(int ndim, const int64_t *size, int dtype);
/* Copies between a contiguous device tensor and host memory (blocking). */
int cl_write(td_tensor *dst, const void *src, size_t nbytes);
int cl_read(const td_tensor *src, void *dst, size_t nbytes);
/* A CPU tensor's contiguous copy on the device, and the reverse (+1 refs). */
td_tensor *cl_from_cpu(td_tensor *t);
td_tensor *cl_to_cpu(const td_tensor *t);

/* -- Programs and launches ------------------------------------------------------------ */

/* The OpenCL C every hand-written program starts with: fp64 where the device
** has it, and ClGeo with geo_off() (the strided index of linear element i). */
extern const char cl_prelude[];
/* Kernel `name` of the program whose source is cl_prelude + `src` (cl_prog.c:
** built on first use, cached by the text in memory and on disk). A failed
** build is an error carrying the build log and the source; `op` names the op
** in messages. */
cl_kernel cl_kernel_get(const char *src, const char *name, const char *op);
/* Kernels names[0..n) of the program whose whole text is src, into out. */
int ocl_program_kernels(const char *src, int n, const char *const *names, cl_kernel *out, const char *what);
typedef struct ClProgStats { int64_t builds, disk_loads; } ClProgStats;
void ocl_prog_stats(ClProgStats *s);

/* -- Kernels of the kernel IR (cl_gen.c: the OpenCL C printer; cl_exec.c) ----------------- */

struct CgKernel;
struct CgCaps;
/* A kernel buffer: a device buffer and the element offset where it starts. */
typedef struct OclBuf { cl_mem m; int64_t off; } OclBuf;
/* The printer's capabilities on this device (work-group size, fp64, lanes). */
const struct CgCaps *ocl_caps(void);
/* The OpenCL C of kernels ks[0..n) as one program (malloc'd); *rc the walker's result. */
char *ocl_source_batch(struct CgKernel *const *ks, int n, const struct CgCaps *caps, int *rc);
/* Compile ks[0..n) as one program (kernels found by hash first): out[i]. */
int ocl_compile(struct CgKernel *const *ks, int n, cl_kernel *out);
/* Launch kernel k (compiled ck) on buffers bufs[0 .. nbuf - nscratch) with args;
** the scratch buffers are the runtime's. Asynchronous (the queue orders it). */
int ocl_kernel_run(const struct CgKernel *k, cl_kernel ck, const OclBuf *bufs, const double *args);
/* Set argument i (size bytes at p); errors name the op. */
int cl_arg(cl_kernel k, int i, size_t size, const void *p, const char *op);
#define CL_ARGV(k, i, v, op) cl_arg((k), (i), sizeof(v), &(v), (op))
/* Run k over n work-items (1-D); nothing when n == 0. */
int cl_run(cl_kernel k, int64_t n, const char *op);
/* The OpenCL C type name of a dtype ("float", "long", "uchar", ...). */
const char *cl_type(int dtype);

/* Strided geometry of up to 4 operands, as the kernels read it (a struct
** argument by value; every field 8 bytes so host and device layouts agree). */
#define CL_MAXOP 4
typedef struct ClGeo {
  cl_long nd;
  cl_long size[TD_MAX_DIMS];
  cl_long st[CL_MAXOP][TD_MAX_DIMS];   /* element strides; 0 on broadcast dims */
  cl_long off[CL_MAXOP];               /* element offsets */
} ClGeo;
/* Geometry of out and inputs broadcast to out's shape (dims merged where all
** operands allow it; see rt_ew_dims). */
void cl_geo(ClGeo *g, const td_tensor *out, int nin, td_tensor *const *in);

/* -- Kernels per op kind (the op table's kernel hook for device tensors) ------------- */

int cl_kern(RtCall *c, td_tensor *out);        /* dispatch on the op's kind */
int cl_kern_ir(RtCall *c, td_tensor *out);     /* cl_eager.c: elementwise, copy, reductions, softmax */
int cl_kern_argred(RtCall *c, td_tensor *out); /* cl_index.c: argmax, argmin, max/min with indices */
int cl_kern_matmul(RtCall *c, td_tensor *out); /* cl_blas.c */
int cl_kern_index(RtCall *c, td_tensor *out);  /* cl_index.c: index ops, cat, unfold/fold */
int cl_kern_attn(RtCall *c, td_tensor *out);   /* cl_attn.c: fused attention, forward and backward */
/* Fill a contiguous device tensor with v. */
int cl_fill(td_tensor *t, double v);          /* cl_eager.c: a copy of a number */

#endif
