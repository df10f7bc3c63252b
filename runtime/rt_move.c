/*
** rt_move.c -- movement ops that are views: view, permute, expand, slice,
** select. Meta computes the result's shape (and rejects impossible views);
** the one view kernel gives the result new sizes/strides over the same
** storage, so no data moves. Works on traced tensors (no data) as well.
*/
#include "rt.h"
#include <string.h>

/* Strides for viewing (size, stride) as `nsize` without copying, or -1
** (PyTorch's computeStride: split the old shape into contiguous chunks). */
static int view_strides(int ndim, const int64_t *size, const int64_t *stride,
                        int nnd, const int64_t *nsize, int64_t *nstride)
{
  int64_t numel = rt_numel(ndim, size);
  if (numel == 0 || ndim == 0) { rt_tensor_contig_strides(nnd, nsize, nstride); return 0; }
  int vd = nnd - 1;
  int64_t chunk_base = stride[ndim - 1], tensor_n = 1, view_n = 1;
  for (int td = ndim - 1; td >= 0; td--) {
    tensor_n *= size[td];
    if (td == 0 || (size[td - 1] != 1 && stride[td - 1] != tensor_n * chunk_base)) {
      while (vd >= 0 && (view_n < tensor_n || nsize[vd] == 1)) {
        nstride[vd] = view_n * chunk_base;
        view_n *= nsize[vd];
        vd--;
      }
      if (view_n != tensor_n) return -1;
      if (td > 0) { chunk_base = stride[td - 1]; tensor_n = 1; view_n = 1; }
    }
  }
  return vd == -1 ? 0 : -1;
}

int rt_meta_view(RtCall *c)
{
  const td_tensor *x = c->in[0];
  td_attrs *a = &c->attrs;
  if (a->ndims < 0 || a->ndims > TD_MAX_DIMS) return rt_err(TD_ERR_SHAPE, "view: invalid number of dims %d", a->ndims);
  int infer = -1; int64_t known = 1;
  for (int i = 0; i < a->ndims; i++) {
    if (a->dims[i] == -1) {
      if (infer >= 0) return rt_err(TD_ERR_SHAPE, "view: only one dimension can be inferred (-1)");
      infer = i;
    } else if (a->dims[i] < 0) return rt_err(TD_ERR_SHAPE, "view: invalid size %lld", (long long)a->dims[i]);
    else known *= a->dims[i];
  }
  if (infer >= 0) {
    if (known == 0 || x->nelem % known)
      return rt_err(TD_ERR_SHAPE, "view: shape %s is invalid for input of size %lld",
                    rt_shape_str((char[160]){0}, 160, a->ndims, a->dims), (long long)x->nelem);
    a->dims[infer] = x->nelem / known; known = x->nelem;
  }
  if (known != x->nelem)
    return rt_err(TD_ERR_SHAPE, "view: shape %s is invalid for input of size %lld",
                  rt_shape_str((char[160]){0}, 160, a->ndims, a->dims), (long long)x->nelem);
  c->ndim = a->ndims; memcpy(c->sizes, a->dims, a->ndims * sizeof(int64_t));
  int64_t st[TD_MAX_DIMS];
  if (view_strides(x->ndim, x->sizes, x->strides, c->ndim, c->sizes, st))
    return rt_err(TD_ERR_SHAPE, "view: shape %s is not compatible with the input's size %s and strides "
                  "(at least one dim spans two contiguous chunks); use reshape",
                  rt_shape_str((char[160]){0}, 160, c->ndim, c->sizes), RT_SHAPE(x));
  return 0;
}

int rt_meta_permute(RtCall *c)
{
  const td_tensor *x = c->in[0];
  td_attrs *a = &c->attrs;
  if (a->ndims != x->ndim)
    return rt_err(TD_ERR_SHAPE, "permute: %d dims given for a tensor with %d dims", a->ndims, x->ndim);
  if (rt_dims_check("permute", a->ndims, a->dims, x->ndim, false, NULL)) return TD_ERR_INDEX;
  for (int i = 0; i < a->ndims; i++) c->sizes[i] = x->sizes[a->dims[i]];
  c->ndim = x->ndim;
  return 0;
}

int rt_meta_expand(RtCall *c)
{
  const td_tensor *x = c->in[0];
  td_attrs *a = &c->attrs;
  if (a->ndims < x->ndim || a->ndims > TD_MAX_DIMS)
    return rt_err(TD_ERR_SHAPE, "expand: the number of sizes (%d) must be at least the tensor's dims (%d)", a->ndims, x->ndim);
  int lead = a->ndims - x->ndim;
  for (int i = 0; i < a->ndims; i++) {
    int64_t want = a->dims[i], have = i < lead ? -2 : x->sizes[i - lead];
    if (want == -1) {
      if (have == -2) return rt_err(TD_ERR_SHAPE, "expand: -1 is not allowed in a new leading dim (%d)", i + 1);
      want = have;
    }
    if (want < 0) return rt_err(TD_ERR_SHAPE, "expand: invalid size %lld", (long long)want);
    if (have >= 0 && have != want && have != 1)
      return rt_err(TD_ERR_SHAPE, "expand: the expanded size %lld must match the existing size %lld at dim %d "
                    "(tensor of shape %s to %s)", (long long)want, (long long)have, i + 1, RT_SHAPE(x),
                    rt_shape_str((char[160]){0}, 160, a->ndims, a->dims));
    c->sizes[i] = a->dims[i] = want;
  }
  c->ndim = a->ndims;
  return 0;
}

/* attrs.i = { dim, start, stop, step }: Python slicing, clamped to the dim.
** Normalizes c->attrs.i in place and sets the slice's shape as the result's
** (shared with slice_scatter, whose source has this shape). */
int rt_slice_shape(const char *op, RtCall *c, const td_tensor *x)
{
  int64_t *s = c->attrs.i;
  if (x->ndim == 0) return rt_err(TD_ERR_INDEX, "%s: cannot slice a 0-dim tensor", op);
  if (rt_wrap_dim(op, &s[0], x->ndim)) return TD_ERR_INDEX;
  if (s[3] <= 0) return rt_err(TD_ERR_ARG, "%s: step must be positive, got %lld", op, (long long)s[3]);
  int64_t n = x->sizes[s[0]];
  for (int k = 1; k <= 2; k++) { if (s[k] < 0) s[k] += n; if (s[k] < 0) s[k] = 0; if (s[k] > n) s[k] = n; }
  if (s[2] < s[1]) s[2] = s[1];
  c->ndim = x->ndim; memcpy(c->sizes, x->sizes, sizeof c->sizes);
  c->sizes[s[0]] = (s[2] - s[1] + s[3] - 1) / s[3];
  return 0;
}

int rt_meta_slice(RtCall *c) { return rt_slice_shape("slice", c, c->in[0]); }

/* attrs.i = { dim, index } */
int rt_meta_select(RtCall *c)
{
  const td_tensor *x = c->in[0];
  int64_t *s = c->attrs.i;
  if (x->ndim == 0) return rt_err(TD_ERR_INDEX, "select: cannot index a 0-dim tensor");
  if (rt_wrap_dim("select", &s[0], x->ndim)) return TD_ERR_INDEX;
  int64_t n = x->sizes[s[0]];
  if (s[1] < -n || s[1] >= n)
    return rt_err(TD_ERR_INDEX, "select: index %lld is out of range for dim %lld with size %lld",
                  (long long)(s[1] >= 0 ? s[1] + 1 : s[1]), (long long)s[0] + 1, (long long)n);
  if (s[1] < 0) s[1] += n;
  c->ndim = 0;
  for (int d = 0; d < x->ndim; d++) if (d != s[0]) c->sizes[c->ndim++] = x->sizes[d];
  return 0;
}

int rt_kern_view(RtCall *c, td_tensor *out)
{
  td_tensor *x = c->in[0];
  const td_attrs *a = &c->attrs;
  int64_t st[TD_MAX_DIMS], off = x->offset;
  int nd = c->ndim;
  switch (c->op) {
  case RT_OP_VIEW:
    if (view_strides(x->ndim, x->sizes, x->strides, nd, c->sizes, st)) return rt_err(TD_ERR_SHAPE, "view: incompatible strides");
    break;
  case RT_OP_PERMUTE:
    for (int i = 0; i < nd; i++) st[i] = x->strides[a->dims[i]];
    break;
  case RT_OP_EXPAND: {
    int lead = nd - x->ndim;
    for (int i = 0; i < nd; i++)
      st[i] = (i < lead || (x->sizes[i - lead] == 1 && c->sizes[i] != 1)) ? 0 : x->strides[i - lead];
    break;
  }
  case RT_OP_SLICE:
    memcpy(st, x->strides, sizeof st);
    off += a->i[1] * x->strides[a->i[0]];
    st[a->i[0]] *= a->i[3];
    break;
  case RT_OP_SELECT:
    off += a->i[1] * x->strides[a->i[0]];
    for (int d = 0, j = 0; d < x->ndim; d++) if (d != a->i[0]) st[j++] = x->strides[d];
    break;
  default:
    return rt_err(TD_ERR_ARG, "view kernel: %s is not a view op", rt_op_lname(c->op));
  }
  out->ndim = nd; out->scalar_type = x->scalar_type; out->device_type = x->device_type;
  memcpy(out->sizes, c->sizes, nd * sizeof(int64_t));
  memcpy(out->strides, st, nd * sizeof(int64_t));
  out->offset = off; out->nelem = rt_numel(nd, c->sizes);
  out->rt_storage = x->rt_storage;
  if (out->rt_storage) {
    rt_storage_retain(out->rt_storage);
    if (out->rt_storage->ptr) out->ptr = (char *)out->rt_storage->ptr + off * rt_dtype_size(x->scalar_type);
  }
  return 0;
}
