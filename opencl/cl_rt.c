/*
** cl_rt.c -- the OpenCL device runtime: picking the device, buffers, host
** transfers, the program cache, launches, and the dispatch of an op call to
** the kernels of its kind. Every OpenCL failure becomes a tide error naming
** the op, the call and the status.
*/
#include "cl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

/* -- Status names ------------------------------------------------------------------------ */

const char *cl_status_name(cl_int st)
{
  switch (st) {
#define S(x) case x: return #x;
  S(CL_DEVICE_NOT_FOUND) S(CL_DEVICE_NOT_AVAILABLE) S(CL_COMPILER_NOT_AVAILABLE)
  S(CL_MEM_OBJECT_ALLOCATION_FAILURE) S(CL_OUT_OF_RESOURCES) S(CL_OUT_OF_HOST_MEMORY)
  S(CL_BUILD_PROGRAM_FAILURE) S(CL_INVALID_VALUE) S(CL_INVALID_DEVICE) S(CL_INVALID_CONTEXT)
  S(CL_INVALID_COMMAND_QUEUE) S(CL_INVALID_MEM_OBJECT) S(CL_INVALID_PROGRAM)
  S(CL_INVALID_KERNEL_NAME) S(CL_INVALID_KERNEL) S(CL_INVALID_ARG_INDEX) S(CL_INVALID_ARG_VALUE)
  S(CL_INVALID_ARG_SIZE) S(CL_INVALID_KERNEL_ARGS) S(CL_INVALID_WORK_DIMENSION)
  S(CL_INVALID_WORK_GROUP_SIZE) S(CL_INVALID_GLOBAL_WORK_SIZE) S(CL_INVALID_BUFFER_SIZE)
  case -1001: return "CL_PLATFORM_NOT_FOUND_KHR"; S(CL_INVALID_PLATFORM) S(CL_INVALID_OPERATION)
#undef S
  }
  return "CL_ERROR";
}

int cl_check(cl_int st, const char *op, const char *call)
{
  if (st == CL_SUCCESS) return 0;
  return rt_err(TD_ERR_DEVICE, "%s: OpenCL %s failed: %s (%d)", op, call, cl_status_name(st), (int)st);
}

/* -- The device ---------------------------------------------------------------------------- */

static struct {
  int ready, index, fp64;
  ClLimits lim;
  cl_platform_id platform;
  cl_device_id device;
  cl_context ctx;
  cl_command_queue q;
  char name[256];
} dev = { .index = -1 };
static pthread_mutex_t dev_mu = PTHREAD_MUTEX_INITIALIZER;
/* Set at exit: tensors freed by Lua's final collection no longer call into
** the driver, whose own exit handlers may have run. */
static int dev_closed;
static void dev_close(void) { if (dev.q) clFinish(dev.q); dev_closed = 1; }   /* nothing left queued */
int cl_closed(void) { return dev_closed; }

/* What the device allows, asked once: kernels and launches size themselves
** from these, never from a guess (an NVIDIA GPU: work groups of 1024, 48 KiB
** of local memory; PoCL: 4096 and the CPU's cache). TIDE_OPENCL_NO_FP64=1
** makes a device with cl_khr_fp64 behave as one without (to test that path). */
static void dev_limits(ClLimits *l, cl_device_id d, int fp64)
{
  size_t wg = 0; cl_ulong lm = 0, ma = 0, gm = 0; cl_uint cu = 0, al = 0;
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ma, &ma, NULL);
  clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gm, &gm, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof al, &al, NULL);
  l->max_wg = wg ? (int64_t)wg : 1;
  l->local_mem = (int64_t)lm;
  l->max_alloc = (int64_t)ma;
  l->global_mem = (int64_t)gm;
  l->units = cu ? (int)cu : 1;
  l->base_align = al ? (int)(al / 8) : 128;   /* bits -> bytes */
  cl_device_type ty = 0;
  clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
  l->cpu = (ty & CL_DEVICE_TYPE_CPU) != 0;
  const char *e = getenv("TIDE_OPENCL_NO_FP64");
  l->fp64 = fp64 && !(e && *e && strcmp(e, "0") != 0);
}

/* Devices of every platform, in platform order: "opencl:N" counts across them. */
static int list_devices(cl_device_id *out, cl_platform_id *plat, int max, char *why, size_t whyn)
{
  if (ocl_load()) {                       /* no ICD loader: no device (the message says which file) */
    snprintf(why, whyn, "%s", td_last_error() + (strncmp(td_last_error(), "opencl: ", 8) ? 0 : 8));
    return 0;
  }
  cl_platform_id ps[16]; cl_uint np = 0;
  cl_int st = clGetPlatformIDs(16, ps, &np);
  if (st != CL_SUCCESS || np == 0) {
    snprintf(why, whyn, "no OpenCL platform found (%s); install an OpenCL driver, e.g. the Debian "
             "package pocl-opencl-icd, or check OCL_ICD_VENDORS", st == CL_SUCCESS ? "0 platforms" : cl_status_name(st));
    return 0;
  }
  int n = 0;
  for (cl_uint p = 0; p < np && n < max; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, (cl_uint)(max - n), out + n, &nd) != CL_SUCCESS) continue;
    for (cl_uint k = 0; k < nd; k++) plat[n + k] = ps[p];
    n += (int)nd;
  }
  if (n == 0) snprintf(why, whyn, "%u OpenCL platform(s) but no device", np);
  return n;
}

int cl_init(int index)
{
  if (index < 0) {
    const char *e = getenv("TIDE_OPENCL_DEVICE");
    index = dev.ready ? dev.index : (e && *e ? atoi(e) : 0);
  }
  if (dev.ready) {
    if (index != dev.index)
      return rt_err(TD_ERR_DEVICE, "opencl: device opencl:%d is in use; one OpenCL device per process "
                    "(opencl:%d was asked for)", dev.index, index);
    return 0;
  }
  pthread_mutex_lock(&dev_mu);
  int rc = 0;
  if (!dev.ready) {
    cl_device_id ds[64]; cl_platform_id ps[64]; char why[256] = "";
    int n = list_devices(ds, ps, 64, why, sizeof why);
    cl_int st = CL_SUCCESS;
    if (n == 0) rc = rt_err(TD_ERR_DEVICE, "opencl: %s", why);
    else if (index >= n) rc = rt_err(TD_ERR_DEVICE, "opencl: device opencl:%d does not exist (%d device%s found)",
                                     index, n, n == 1 ? "" : "s");
    else {
      dev.device = ds[index]; dev.platform = ps[index];
      dev.ctx = clCreateContext(NULL, 1, &dev.device, NULL, NULL, &st);
      if (st == CL_SUCCESS) dev.q = clCreateCommandQueue(dev.ctx, dev.device, CL_QUEUE_PROFILING_ENABLE, &st);
      if (st != CL_SUCCESS) rc = cl_check(st, "opencl", "context/queue creation");
      else {
        clGetDeviceInfo(dev.device, CL_DEVICE_NAME, sizeof dev.name - 1, dev.name, NULL);
        char ext[4096] = "";
        clGetDeviceInfo(dev.device, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
        dev_limits(&dev.lim, dev.device, strstr(ext, "cl_khr_fp64") != NULL);
        dev.fp64 = dev.lim.fp64;
        dev.index = index;
        cl_mem_init();
        atexit(dev_close);           /* after the driver was loaded: runs before its handlers */
        __atomic_store_n(&dev.ready, 1, __ATOMIC_RELEASE);
      }
    }
  } else if (index != dev.index)
    rc = rt_err(TD_ERR_DEVICE, "opencl: device opencl:%d is in use; one OpenCL device per process", dev.index);
  pthread_mutex_unlock(&dev_mu);
  return rc;
}

int cl_has_fp64(void) { return dev.fp64; }
const ClLimits *cl_limits(void) { return &dev.lim; }
const char *cl_device_name(void) { return dev.ready ? dev.name : ""; }
cl_context cl_ctx(void) { return dev.ctx; }
cl_device_id cl_dev(void) { return dev.device; }
cl_command_queue cl_queue(void) { return dev.q; }

TD_API int td_opencl_init(int index) { return cl_init(index); }
TD_API const char *td_opencl_device_name(void) { return cl_device_name(); }
TD_API int td_opencl_device_count(void)
{
  cl_device_id ds[64]; cl_platform_id ps[64]; char why[256];
  return list_devices(ds, ps, 64, why, sizeof why);
}
TD_API int td_opencl_device_index(void) { return dev.ready ? dev.index : -1; }
TD_API void td_opencl_finish(void)
{
  if (dev.ready && !dev_closed) { clFinish(dev.q); cl_synced(); }
}

/* -- Buffers (the allocator is cl_mem.c) ---------------------------------------------------- */

td_tensor *cl_tensor_new(int ndim, const int64_t *size, int dtype)
{
  return rt_tensor_new_on(TD_OPENCL, ndim, size, dtype);
}

int cl_write(td_tensor *dst, const void *src, size_t nbytes)
{
  if (!nbytes) return 0;
  size_t off = (size_t)dst->offset * rt_dtype_size(dst->scalar_type);
  return cl_upload(cl_buf(dst), off, src, nbytes, NULL, "to");
}

int cl_read(const td_tensor *src, void *dst, size_t nbytes)
{
  if (!nbytes) return 0;
  size_t off = (size_t)src->offset * rt_dtype_size(src->scalar_type);
  int rc = cl_check(clEnqueueReadBuffer(dev.q, cl_buf(src), CL_TRUE, off, nbytes, dst, 0, NULL, NULL),
                    "to", "clEnqueueReadBuffer");
  cl_synced();
  return rc;
}

td_tensor *cl_from_cpu(td_tensor *t)
{
  td_tensor *c = rt_as_contig(t);
  if (!c) return NULL;
  td_tensor *o = cl_tensor_new(t->ndim, t->sizes, t->scalar_type);
  /* a contiguous copy made here is private: the upload keeps it instead of staging */
  size_t n = (size_t)c->nelem * rt_dtype_size(c->scalar_type);
  if (o && cl_upload(cl_buf(o), 0, c->ptr, n, c != t ? c : NULL, "to")) { td_release(o); o = NULL; }
  td_release(c);
  return o;
}

td_tensor *cl_to_cpu(const td_tensor *t)
{
  td_tensor *c = rt_as_contig((td_tensor *)t);
  if (!c) return NULL;
  td_tensor *o = rt_tensor_new(t->ndim, t->sizes, t->scalar_type);
  if (o && cl_read(c, o->ptr, (size_t)c->nelem * rt_dtype_size(c->scalar_type))) { td_release(o); o = NULL; }
  td_release(c);
  return o;
}

/* -- Programs --------------------------------------------------------------------------------- */

const char cl_prelude[] =
  "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
  "typedef struct { long nd; long size[8]; long st[4][8]; long off[4]; } ClGeo;\n"
  "/* element offset of operand k for linear index i (row-major over size) */\n"
  "inline long geo_off(const ClGeo *g, int k, long i) {\n"
  "  long o = g->off[k];\n"
  "  for (int d = (int)g->nd - 1; d >= 0; d--) { long s = g->size[d]; o += (i % s) * g->st[k][d]; i /= s; }\n"
  "  return o;\n}\n";

int cl_arg(cl_kernel k, int i, size_t size, const void *p, const char *op)
{
  return cl_check(clSetKernelArg(k, (cl_uint)i, size, p), op, "clSetKernelArg");
}

int cl_run(cl_kernel k, int64_t n, const char *op)
{
  if (n <= 0) return 0;
  size_t g = (size_t)n;
  cl_event e = NULL;
  int h = cl_prof_open(op);
  cl_int st = clEnqueueNDRangeKernel(dev.q, k, 1, NULL, &g, NULL, 0, NULL, h >= 0 ? &e : NULL);
  cl_prof_close(h, e);
  return cl_check(st, op, "clEnqueueNDRangeKernel");
}

const char *cl_type(int dt)
{
  static const char *names[TD_DTYPE__MAX] = { "uchar", "uchar", "int", "long", "float", "double" };
  return dt >= 0 && dt < TD_DTYPE__MAX ? names[dt] : "?";
}

void cl_geo(ClGeo *g, const td_tensor *out, int nin, td_tensor *const *in)
{
  int64_t st[RT_EW_MAXOP][TD_MAX_DIMS];
  int nd;
  memset(g, 0, sizeof *g);
  rt_ew_dims(out, nin, in, &nd, g->size, st);
  g->nd = nd;
  for (int k = 0; k <= nin && k < CL_MAXOP; k++) {
    memcpy(g->st[k], st[k], sizeof g->st[k]);
    g->off[k] = k == 0 ? out->offset : in[k - 1]->offset;
  }
}

/* -- Dispatch --------------------------------------------------------------------------------- */

/* A call on the device. Elementwise ops, copies, reductions and row
** normalizers are one-op kernels of the kernel IR (cl_eager.c; numbers are
** kernel arguments); the rest are library calls or hand kernels, which see
** device tensors only: CPU 0-dim inputs are uploaded first. */
/* Sorting, searching and scans have only the CPU's kernels (rt_sort.c,
** rt_scan.c; the kernel IR has no scan and no sort): the inputs are copied to
** the host, the op runs there, and its result (and cummax's indices, aux)
** come back to the device. */
static int cl_kern_host(RtCall *c, td_tensor *out)
{
  td_tensor *host[RT_MAX_IN];
  int n = 0, rc = 0;
  for (; n < c->nin; n++)
    if (!(host[n] = c->in[n]->device_type == TD_CPU ? (td_retain(c->in[n]), c->in[n]) : cl_to_cpu(c->in[n]))) { rc = TD_ERR_NOMEM; break; }
  td_tensor *o = rc ? NULL : rt_tensor_new(out->ndim, out->sizes, out->scalar_type);
  if (!rc && !o) rc = TD_ERR_NOMEM;
  if (!rc) {
    RtCall cc = *c;
    cc.in = host; cc.device = TD_CPU; cc.aux = NULL;
    rc = rt_ops[c->op].kern(&cc, o);
    if (!rc && out->nelem) rc = cl_write(out, rt_ptr(o), (size_t)(out->nelem * rt_dtype_size(out->scalar_type)));
    if (!rc && cc.aux && !(c->aux = cl_from_cpu(cc.aux))) rc = TD_ERR_NOMEM;
    td_release(cc.aux);
  }
  td_release(o);
  for (int i = 0; i < n; i++) td_release(host[i]);
  return rc;
}

int cl_kern(RtCall *c, td_tensor *out)
{
  int kind = rt_ops[c->op].kind;
  if (kind == RT_K_SORT || kind == RT_K_SCAN) return cl_kern_host(c, out);
  bool arg = c->op == RT_OP_ARGMAX || c->op == RT_OP_ARGMIN ||
             ((c->op == RT_OP_MAX || c->op == RT_OP_MIN) && c->attrs.ndims == 1 && !(c->attrs.flags & 1));
  if (kind == RT_K_EW || kind == RT_K_ROW || c->op == RT_OP_COPY || (kind == RT_K_RED && !arg)) return cl_kern_ir(c, out);
  td_tensor *up[RT_MAX_IN];
  td_tensor *const *orig = c->in;
  int n = 0, rc = 0;
  for (int i = 0; i < c->nin; i++) {
    if (orig[i]->device_type == TD_OPENCL) { up[i] = orig[i]; td_retain(up[i]); }
    else if (!(up[i] = cl_from_cpu(orig[i]))) { rc = TD_ERR_NOMEM; break; }
    n = i + 1;
  }
  if (!rc) {
    c->in = up;
    switch (rt_ops[c->op].kind) {
    case RT_K_CONTR: rc = cl_kern_matmul(c, out); break;
    case RT_K_INDEX: rc = cl_kern_index(c, out); break;
    case RT_K_ATTN: rc = cl_kern_attn(c, out); break;
    case RT_K_RED: rc = cl_kern_argred(c, out); break;     /* only those that give indices come here */
    case RT_K_MOVE: rc = rt_ops[c->op].kern(c, out); break;
    default: rc = rt_err(TD_ERR_DEVICE, "%s: not available on opencl", rt_op_lname(c->op));
    }
    c->in = orig;
  }
  for (int i = 0; i < n; i++) td_release(up[i]);
  return rc;
}

/* -- Moving tensors between devices ----------------------------------------------------------- */

/* A copy of t on `device`, or t itself when it is already there. */
TD_API td_tensor *td_to_device(td_tensor *t, int device, int index)
{
  RT_ARG(t, "to", 1, NULL);
  if (device != TD_CPU && device != TD_OPENCL) return rt_errp(TD_ERR_DEVICE, "to: unknown device %d", device);
  if (device == TD_OPENCL && cl_init(index)) return NULL;
  if (t->device_type == device) { td_retain(t); return t; }
  if (!t->ptr && !(t->rt_storage && t->rt_storage->dev))
    return rt_errp(TD_ERR_STATE, "to: tensor of shape %s has no data (traced inside a compiled function)", RT_SHAPE(t));
  td_tensor *y = device == TD_OPENCL ? cl_from_cpu(t) : cl_to_cpu(t);
  /* differentiable, as PyTorch's to(): the gradient moves back */
  if (y && td_grad_enabled() && (t->flags & TD_TF_REQUIRES_GRAD) && jit_grad_record_to(t, y)) { td_release(y); return NULL; }
  return y;
}
