/*
** rt_tensor.c -- tensor headers: lifetime, views over storage, creation.
** A tensor header owns one reference to its storage, its .grad, its grad_fn
** node and (for views of grad-requiring tensors) its base.
*/
#include "rt.h"
#include <stdlib.h>
#include <string.h>
#include <math.h>

void jit_node_release(struct RtNode *n);

/* -- Lifetime ------------------------------------------------------------------------ */

td_tensor *rt_tensor_alloc(void)
{
  _Static_assert(sizeof(td_tensor) <= RT_SMALL_BLOCK, "tensor header fits a small block");
  td_tensor *t = rt_small_get();
  if (!t) return rt_errp(TD_ERR_NOMEM, "out of memory allocating a tensor header");
  memset(t, 0, sizeof *t);
  t->refcount = 1;
  rt_live_add(sizeof *t);
  return t;
}

TD_API void td_retain(td_tensor *t) { if (t) __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED); }

TD_API void td_release(td_tensor *t)
{
  if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  rt_storage_release(t->rt_storage);
  td_release(t->rt_grad);
  td_release(t->rt_base);
  if (t->rt_grad_fn) jit_node_release(t->rt_grad_fn);
  rt_live_add(-(int64_t)sizeof *t);
  rt_small_put(t);
}

TD_API void td_handle_free(td_handle h) { td_release(h.p); }

/* -- Geometry -------------------------------------------------------------------------- */

int64_t rt_numel(int ndim, const int64_t *size)
{
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (size[i] < 0) return -1;
    if (size[i] && n > INT64_MAX / size[i]) return -1;
    n *= size[i];
  }
  return n;
}

void rt_tensor_contig_strides(int ndim, const int64_t *size, int64_t *stride)
{
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) { stride[i] = s; s *= size[i] > 1 ? size[i] : 1; }
}

bool rt_tensor_is_contig(const td_tensor *t)
{
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->sizes[i] == 1) continue;
    if (t->strides[i] != s) return false;
    s *= t->sizes[i];
  }
  return true;
}

TD_API int td_is_contiguous(const td_tensor *t) { return t && rt_tensor_is_contig(t); }

static int check_shape(const char *op, int ndim, const int64_t *size, int64_t *numel)
{
  if (ndim < 0 || ndim > TD_MAX_DIMS)
    return rt_err(TD_ERR_SHAPE, "%s: %d dims requested, at most %d are supported", op, ndim, TD_MAX_DIMS);
  for (int i = 0; i < ndim; i++)
    if (size[i] < 0)
      return rt_err(TD_ERR_SHAPE, "%s: negative size %lld in shape %s", op,
                    (long long)size[i], rt_shape_str((char[160]){0}, 160, ndim, size));
  *numel = rt_numel(ndim, size);
  if (*numel < 0 || *numel > ((int64_t)1 << 56))
    return rt_err(TD_ERR_NOMEM, "%s: shape %s is too large", op,
                  rt_shape_str((char[160]){0}, 160, ndim, size));
  return 0;
}

td_tensor *rt_tensor_new(int ndim, const int64_t *size, int dtype)
{
  return rt_tensor_new_on(TD_CPU, ndim, size, dtype);
}

td_tensor *rt_tensor_new_on(int device, int ndim, const int64_t *size, int dtype)
{
  int64_t n = 0;
  if (dtype < 0 || dtype >= TD_DTYPE__MAX) return rt_errp(TD_ERR_DTYPE, "empty: invalid dtype %d", dtype);
  if (check_shape("empty", ndim, size, &n)) return NULL;
  size_t nbytes = (size_t)n * rt_dtype_size(dtype);
  if (nbytes / rt_dtype_size(dtype) != (size_t)n)
    return rt_errp(TD_ERR_NOMEM, "empty: %lld elements overflow the address space", (long long)n);
  RtStorage *s = device == TD_OPENCL ? cl_storage_new(nbytes) : rt_storage_new(nbytes);
  if (!s && device == TD_OPENCL) return NULL;       /* the device's message says more */
  if (!s) {
    return rt_errp(TD_ERR_NOMEM, "empty: out of memory allocating %zu bytes for shape %s",
                   nbytes, rt_shape_str((char[160]){0}, 160, ndim, size));
  }
  td_tensor *t = rt_tensor_alloc();
  if (!t) { rt_storage_release(s); return NULL; }
  t->ndim = ndim; t->scalar_type = dtype; t->device_type = device;
  if (ndim) memcpy(t->sizes, size, ndim * sizeof *size);
  rt_tensor_contig_strides(ndim, size, t->strides);
  t->nelem = n; t->rt_storage = s; t->ptr = s->ptr;
  return t;
}

td_tensor *rt_full_on(int device, int ndim, const int64_t *size, double v, int dtype)
{
  if (device == TD_CPU) return td_full(ndim, size, v, dtype);
  td_tensor *t = rt_tensor_new_on(device, ndim, size, dtype);
  if (t && cl_fill(t, v)) { td_release(t); return NULL; }
  return t;
}

td_tensor *rt_tensor_alias(td_tensor *src, int ndim, const int64_t *size,
                           const int64_t *stride, int64_t offset)
{
  td_tensor *t = rt_tensor_alloc();
  if (!t) return NULL;
  t->ndim = ndim; t->scalar_type = src->scalar_type; t->device_type = src->device_type;
  if (ndim) { memcpy(t->sizes, size, ndim * sizeof *size); memcpy(t->strides, stride, ndim * sizeof *stride); }
  t->offset = offset; t->nelem = rt_numel(ndim, size);
  t->rt_storage = src->rt_storage;
  if (t->rt_storage) {
    rt_storage_retain(t->rt_storage);
    if (t->rt_storage->ptr) t->ptr = (char *)t->rt_storage->ptr + offset * rt_dtype_size(t->scalar_type);
  }
  return t;
}

/* -- Creation ------------------------------------------------------------------------------ */

TD_API td_tensor *td_empty(int ndim, const int64_t *size, int dtype) { return rt_tensor_new(ndim, size, dtype); }

static void fill(td_tensor *t, double v)
{
  char *p = rt_ptr(t);
  switch (t->scalar_type) {
#define DT_FILL(E, name, ctype, sz, cat) case TD_##E: { \
    ctype x; if (TD_##E == TD_BOOL) x = v != 0; else x = (ctype)v; \
    for (int64_t i = 0; i < t->nelem; i++) ((ctype *)p)[i] = x; } break;
  RT_DTYPEDEF(DT_FILL)
#undef DT_FILL
  }
}

TD_API td_tensor *td_full(int ndim, const int64_t *size, double v, int dtype)
{
  if (rt_value_check("full", v, dtype)) return NULL;
  td_tensor *t = rt_tensor_new(ndim, size, dtype);
  if (t) fill(t, v);
  return t;
}

/* On a device: filled there (no host copy); empty: the cached buffer as it is. */
static int on_device(const char *op, int device, int index)
{
  if (device != TD_CPU && device != TD_OPENCL) return rt_err(TD_ERR_DEVICE, "%s: unknown device %d", op, device);
  return device == TD_OPENCL ? cl_init(index) : 0;
}

TD_API td_tensor *td_full_on(int device, int index, int ndim, const int64_t *size, double v, int dtype)
{
  if (on_device("full", device, index)) return NULL;
  if (device == TD_CPU) return td_full(ndim, size, v, dtype);
  if (rt_value_check("full", v, dtype)) return NULL;
  return rt_full_on(device, ndim, size, v, dtype);
}

TD_API td_tensor *td_empty_on(int device, int index, int ndim, const int64_t *size, int dtype)
{
  if (on_device("empty", device, index)) return NULL;
  return rt_tensor_new_on(device, ndim, size, dtype);
}

TD_API td_tensor *td_from_buffer(int ndim, const int64_t *size, int dtype, const void *src)
{
  td_tensor *t = rt_tensor_new(ndim, size, dtype);
  if (t && t->nelem) memcpy(t->ptr, src, (size_t)t->nelem * rt_dtype_size(dtype));
  return t;
}

TD_API td_tensor *td_from_doubles(int ndim, const int64_t *size, int dtype, const double *src)
{
  td_tensor *t = rt_tensor_new(ndim, size, dtype);
  if (!t) return NULL;
  int sz = rt_dtype_size(dtype);
  for (int64_t i = 0; i < t->nelem; i++) {
    if (rt_value_check("tensor", src[i], dtype)) { td_release(t); return NULL; }
    rt_store(rt_ptr(t) + i * sz, dtype, src[i]);
  }
  return t;
}

TD_API td_tensor *td_scalar(double v, int dtype) { return td_full(0, NULL, v, dtype); }

/* A Lua number: integral values are int64 scalars, others float64 scalars;
** both promote as "wrapped numbers" (they never widen a tensor's dtype). */
TD_API td_tensor *td_wrap_number(double v)
{
  int dt = (v == floor(v) && fabs(v) < 9.007199254740992e15) ? TD_INT64 : TD_FLOAT64;
  td_tensor *t = td_full(0, NULL, v, dt);
  if (t) t->flags |= TD_TF_WRAPPED_NUMBER;
  return t;
}

TD_API td_tensor *td_arange(double start, double stop, double step, int dtype)
{
  if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
    return rt_errp(TD_ERR_ARG, "arange: invalid range start=%g stop=%g step=%g", start, stop, step);
  double nd = ceil((stop - start) / step);
  if (nd >= 9007199254740992.0)
    return rt_errp(TD_ERR_SHAPE, "arange: size overflows int64 (start=%g stop=%g step=%g)", start, stop, step);
  int64_t n = nd > 0 ? (int64_t)nd : 0;
  if (n > 0 && (rt_value_check("arange", start, dtype) || rt_value_check("arange", start + (double)(n - 1) * step, dtype)))
    return NULL;
  td_tensor *t = rt_tensor_new(1, &n, dtype);
  if (!t) return NULL;
  int sz = rt_dtype_size(dtype);
  for (int64_t i = 0; i < n; i++) rt_store(rt_ptr(t) + i * sz, dtype, start + (double)i * step);
  return t;
}

TD_API td_tensor *td_linspace(double a, double b, int64_t n, int dtype)
{
  if (n < 0) return rt_errp(TD_ERR_ARG, "linspace: steps must be non-negative, got %lld", (long long)n);
  /* every value lies between the ends: checking them checks all (as arange) */
  if (n > 0 && (rt_value_check("linspace", a, dtype) || (n > 1 && rt_value_check("linspace", b, dtype)))) return NULL;
  td_tensor *t = rt_tensor_new(1, &n, dtype);
  if (!t) return NULL;
  int sz = rt_dtype_size(dtype);
  double step = n > 1 ? (b - a) / (double)(n - 1) : 0;
  /* PyTorch fills the second half from the end so that the last value is exactly b
  ** (and a single step is just a) */
  for (int64_t i = 0; i < n; i++)
    rt_store(rt_ptr(t) + i * sz, dtype,
             i < n / 2 || n == 1 ? a + step * (double)i : b - step * (double)(n - 1 - i));
  return t;
}

TD_API td_tensor *td_eye(int64_t n, int64_t m, int dtype)
{
  if (m < 0) m = n;
  if (n < 0) return rt_errp(TD_ERR_ARG, "eye: n must be non-negative, got %lld", (long long)n);
  td_tensor *t = td_full(2, (int64_t[]){ n, m }, 0, dtype);
  if (!t) return NULL;
  int sz = rt_dtype_size(dtype);
  for (int64_t i = 0; i < n && i < m; i++) rt_store(rt_ptr(t) + (i * m + i) * sz, dtype, 1);
  return t;
}

/* -- Reading ----------------------------------------------------------------------------------- */

/* Values handed to the host as doubles: any NaN becomes the plain quiet NaN.
** LuaJIT keeps its type tags in the payload bits of NaNs, so a NaN with payload
** (uninitialized memory, a file, an all-ones bit pattern) read through the FFI
** would be nil, or a forged object that crashes the collector. */
static double host_double(double v) { return v != v ? (double)NAN : v; }

/* Visit the elements of t in row-major order. */
static void read_rec(const td_tensor *t, int d, const char *p, double **dst)
{
  int sz = rt_dtype_size(t->scalar_type);
  if (d == t->ndim) { *(*dst)++ = host_double(rt_load(p, t->scalar_type)); return; }
  for (int64_t i = 0; i < t->sizes[d]; i++) read_rec(t, d + 1, p + i * t->strides[d] * sz, dst);
}

/* Reading the values of a tensor that has none: a traced tensor inside a
** compiled function (data-dependent control flow) or one left behind by it. */
static int no_data(const char *what, const td_tensor *t)
{
  if (jit_tracing && t->rt_storage && t->rt_storage->jit_trace)
    return rt_err(TD_ERR_STATE, "%s: the values of a tensor are not known while tide.compile traces the "
                  "function (data-dependent control flow on a traced tensor of shape %s); express the branch "
                  "with tide.where, move it out of the compiled function, or compile with {fallback=\"eager\"}",
                  what, RT_SHAPE(t));
  return rt_err(TD_ERR_STATE, "%s: tensor has no data (a tensor made inside a compiled function that was "
                "not returned from it)", what);
}

/* A device tensor is read through a host copy. */
static int read_device(const td_tensor *t, double *dst)
{
  td_tensor *h = cl_to_cpu(t);
  if (!h) return TD_ERR_DEVICE;
  int rc = td_read(h, dst);
  td_release(h);
  return rc;
}

TD_API int td_read(const td_tensor *t, double *dst)
{
  RT_ARG(t, "read", 1, TD_ERR_ARG);
  if (t->device_type == TD_OPENCL && rt_has_data(t)) return read_device(t, dst);
  if (!t->ptr) return no_data("read", t);
  if (t->nelem == 0) return 0;
  read_rec(t, 0, rt_ptr(t), &dst);
  return 0;
}

TD_API int td_item(const td_tensor *t, double *out)
{
  RT_ARG(t, "item", 1, TD_ERR_ARG);
  if (t->nelem != 1)
    return rt_err(TD_ERR_SHAPE, "item: a tensor with %lld elements cannot be converted to a number",
                  (long long)t->nelem);
  if (t->device_type == TD_OPENCL && rt_has_data(t)) return read_device(t, out);
  if (!t->ptr) return no_data("item", t);
  *out = host_double(rt_load(t->ptr, t->scalar_type));
  return 0;
}
