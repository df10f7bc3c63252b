/*
** rt_index.c -- indexing and concatenation: index_select, index_add, gather,
** scatter_add, slice_scatter and cat (shape rules and eager kernels). Index
** tensors are int32 or int64 and hold 0-based positions (the Lua layer has
** already subtracted 1); messages print dims and indices 1-based.
*/
#include "rt.h"
#include <string.h>

/* -- Design note ---------------------------------------------------------------------------
**
** Each op writes a fresh contiguous result (in-place forms go through the
** dispatcher's temporary). A tensor around `dim` is seen as (outer, S, inner):
** outer = the dims before dim, S = its size, inner = the dims after. Every
** index is validated before anything is written, so a bad index leaves no
** half-written result. The accumulating ops (index_add, scatter_add) split the
** work over (outer, inner) positions: all additions into one output element
** happen on one thread in index order, so duplicates accumulate the same way
** for every thread count.
*/

#define IX_GRAIN 16384   /* elements per parallel chunk, at least */

/* -- Shared helpers ------------------------------------------------------------------------ */

static int64_t span(const int64_t *s, int from, int to)
{
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= s[d];
  return n;
}

static int idx_meta(const char *op, const td_tensor *idx, int argn)
{
  if (idx->scalar_type != TD_INT32 && idx->scalar_type != TD_INT64)
    return rt_err(TD_ERR_DTYPE, "%s: index (argument %d) must be an int32 or int64 tensor, got %s",
                  op, argn, td_dtype_name(idx->scalar_type));
  return 0;
}

/* An accumulating op adds src into base's dtype: no bool, no float into integers. */
static int acc_meta(const char *op, const td_tensor *base, const td_tensor *src)
{
  if (base->scalar_type == TD_BOOL)
    return rt_err(TD_ERR_DTYPE, "%s: bool tensors are not supported", op);
  if (rt_dtype_cat(src->scalar_type) > rt_dtype_cat(base->scalar_type))
    return rt_err(TD_ERR_DTYPE, "%s: source of dtype %s can't be added into a tensor of dtype %s",
                  op, td_dtype_name(src->scalar_type), td_dtype_name(base->scalar_type));
  return 0;
}

/* The index as contiguous int64 (a new ref), every value checked against [0, size). */
static td_tensor *idx_load(const char *op, td_tensor *idx, int64_t dim, int64_t size)
{
  td_tensor *t = rt_as_dtype(idx, TD_INT64), *u = t ? rt_as_contig(t) : NULL;
  td_release(t);
  if (!u) return NULL;
  const int64_t *ix = (const int64_t *)rt_ptr(u);
  for (int64_t i = 0; i < u->nelem; i++)
    if (ix[i] < 0 || ix[i] >= size) {
      rt_err(TD_ERR_INDEX, "%s: index %lld is out of range for dim %lld with size %lld",
             op, (long long)ix[i] + 1, (long long)dim + 1, (long long)size);
      td_release(u);
      return NULL;
    }
  return u;
}

/* dst <- src through dst's strides, converting the dtype: the COPY kernel of
** dst's device, so the copying kernels below (slice_scatter, cat) also serve
** the OpenCL device (opencl/cl_index.c). */
int rt_copy_into(td_tensor *dst, td_tensor *src)
{
  RtCall cc = { .op = RT_OP_COPY, .nin = 1, .in = &src, .cdtype = src->scalar_type,
                .scalar_type = dst->scalar_type, .ndim = dst->ndim, .device = dst->device_type };
  memcpy(cc.sizes, dst->sizes, sizeof cc.sizes);
  return rt_kern_of(RT_OP_COPY, dst->device_type)(&cc, dst);
}

/* Typed `dst[i*sd] += src[i*ss]` for i < n, by dtype (ORDER DTYPE; no bool). */
typedef void (*IxAddFn)(char *dst, int64_t sd, const char *src, int64_t ss, int64_t n);
#define IX_ADD(sfx, T) \
  static void ix_add_##sfx(char *d_, int64_t sd, const char *s_, int64_t ss, int64_t n) { \
    T *d = (T *)d_; const T *s = (const T *)s_; \
    if (sd == 1 && ss == 1) for (int64_t i = 0; i < n; i++) d[i] += s[i]; \
    else for (int64_t i = 0; i < n; i++) d[i * sd] += s[i * ss]; }
IX_ADD(u8, uint8_t) IX_ADD(i32, int32_t) IX_ADD(i64, int64_t) IX_ADD(f32, float) IX_ADD(f64, double)
static const IxAddFn ix_add[TD_DTYPE__MAX] = { NULL, ix_add_u8, ix_add_i32, ix_add_i64, ix_add_f32, ix_add_f64 };

/* -- index_select ---------------------------------------------------------------------------- */

/* x (..., S, ...), idx (n) -> (..., n, ...): out[o, j, i] = x[o, idx[j], i] */
int rt_meta_index_select(RtCall *c)
{
  const td_tensor *x = c->in[0], *idx = c->in[1];
  if (x->ndim == 0) return rt_err(TD_ERR_INDEX, "index_select: cannot index a 0-dim tensor");
  if (rt_wrap_dim("index_select", &c->attrs.i[0], x->ndim)) return TD_ERR_INDEX;
  if (idx_meta("index_select", idx, 2)) return TD_ERR_DTYPE;
  if (idx->ndim > 1) return rt_err(TD_ERR_SHAPE, "index_select: index must be 1-D, got shape %s", RT_SHAPE(idx));
  c->ndim = x->ndim; memcpy(c->sizes, x->sizes, sizeof c->sizes);
  c->sizes[c->attrs.i[0]] = idx->nelem;
  return 0;
}

typedef struct {
  const char *x; char *out;
  const int64_t *ix;
  int64_t n, S;
  size_t row;              /* bytes of one inner block */
} IxSel;

/* rows r = (o, j) of the result; one memcpy per row (dim 0: the embedding lookup) */
static void sel_rows(void *ctx, int64_t b, int64_t e)
{
  const IxSel *s = ctx;
  for (int64_t r = b; r < e; r++) {
    int64_t o = r / s->n, j = r % s->n;
    memcpy(s->out + r * s->row, s->x + (o * s->S + s->ix[j]) * s->row, s->row);
  }
}

int rt_kern_index_select(RtCall *c, td_tensor *out)
{
  int dim = (int)c->attrs.i[0];
  td_tensor *x = c->in[0];
  td_tensor *ix = idx_load("index_select", c->in[1], dim, x->sizes[dim]);
  if (!ix) return TD_ERR_INDEX;
  /* a non-contiguous x is made contiguous first (the rows must be blocks) */
  td_tensor *xc = out->nelem ? rt_as_contig(x) : NULL;
  int rc = 0;
  if (out->nelem && !xc) rc = TD_ERR_NOMEM;
  else if (out->nelem) {
    int64_t inner = span(x->sizes, dim + 1, x->ndim);
    IxSel s = { rt_ptr(xc), rt_ptr(out), (const int64_t *)rt_ptr(ix), ix->nelem, x->sizes[dim],
                (size_t)(inner * rt_dtype_size(x->scalar_type)) };
    rt_parallel_for(span(x->sizes, 0, dim) * s.n, 1 + IX_GRAIN / (inner ? inner : 1), sel_rows, &s);
  }
  td_release(xc); td_release(ix);
  return rc;
}

/* -- index_add ------------------------------------------------------------------------------- */

/* base (..., S, ...), idx (n), src (..., n, ...) -> base with out[o, idx[j], i] += src[o, j, i] */
int rt_meta_index_add(RtCall *c)
{
  const td_tensor *base = c->in[0], *idx = c->in[1], *src = c->in[2];
  if (base->ndim == 0) return rt_err(TD_ERR_INDEX, "index_add: cannot index a 0-dim tensor");
  int64_t *dim = &c->attrs.i[0];
  if (rt_wrap_dim("index_add", dim, base->ndim)) return TD_ERR_INDEX;
  if (idx_meta("index_add", idx, 2)) return TD_ERR_DTYPE;
  if (idx->ndim > 1) return rt_err(TD_ERR_SHAPE, "index_add: index must be 1-D, got shape %s", RT_SHAPE(idx));
  bool ok = src->ndim == base->ndim;
  for (int d = 0; ok && d < base->ndim; d++) ok = src->sizes[d] == (d == *dim ? idx->nelem : base->sizes[d]);
  if (!ok)
    return rt_err(TD_ERR_SHAPE, "index_add: source of shape %s does not fit a tensor of shape %s with %lld "
                  "indices along dim %lld", RT_SHAPE(src), RT_SHAPE(base), (long long)idx->nelem, (long long)*dim + 1);
  if (acc_meta("index_add", base, src)) return TD_ERR_DTYPE;
  c->ndim = base->ndim; memcpy(c->sizes, base->sizes, sizeof c->sizes);
  return 0;
}

typedef struct {
  char *out; const char *src;
  const int64_t *ix;
  int64_t n, S, inner;
  int es;
  IxAddFn add;
} IxAdd;

/* positions p = (o, i) over outer x inner; each adds its column segment for every j */
static void add_range(void *ctx, int64_t b, int64_t e)
{
  const IxAdd *a = ctx;
  while (b < e) {
    int64_t o = b / a->inner, i0 = b % a->inner, len = a->inner - i0;
    if (len > e - b) len = e - b;
    for (int64_t j = 0; j < a->n; j++)
      a->add(a->out + ((o * a->S + a->ix[j]) * a->inner + i0) * a->es, 1,
             a->src + ((o * a->n + j) * a->inner + i0) * a->es, 1, len);
    b += len;
  }
}

int rt_kern_index_add(RtCall *c, td_tensor *out)
{
  int dim = (int)c->attrs.i[0], dt = out->scalar_type, rc;
  td_tensor *ix = idx_load("index_add", c->in[1], dim, out->sizes[dim]);
  if (!ix) return TD_ERR_INDEX;
  td_tensor *s1 = NULL, *s = NULL;
  if ((rc = rt_copy_into(out, c->in[0]))) goto done;
  s1 = rt_as_dtype(c->in[2], dt);
  s = s1 ? rt_as_contig(s1) : NULL;
  if (!s) { rc = TD_ERR_NOMEM; goto done; }
  IxAdd a = { rt_ptr(out), rt_ptr(s), (const int64_t *)rt_ptr(ix), ix->nelem, out->sizes[dim],
              span(out->sizes, dim + 1, out->ndim), rt_dtype_size(dt), ix_add[dt] };
  int64_t npos = span(out->sizes, 0, dim) * a.inner;
  if (a.n) rt_parallel_for(npos, 1 + IX_GRAIN / a.n, add_range, &a);
done:
  td_release(s1); td_release(s); td_release(ix);
  return rc;
}

/* -- gather and scatter_add ---------------------------------------------------------------------- */

/* Both walk lines along dim: a line is one position of idx's other dims. The
** offsets of its start in dst (strides sd) and src (strides ss) come from
** decomposing the line number over idx's shape. gather indexes src along dim,
** scatter_add indexes dst. */
typedef struct {
  int nd, dim;
  int64_t isz[TD_MAX_DIMS];              /* idx's shape */
  int64_t sd[TD_MAX_DIMS], ss[TD_MAX_DIMS];
  int64_t L, inner;                      /* idx.sizes[dim], idx's elements after dim */
  char *dst; const char *src;
  const int64_t *ix;                     /* contiguous, idx's shape */
  int es;
  IxAddFn add;
} IxLine;

static void line_init(IxLine *l, const td_tensor *idx, int dim, td_tensor *dst, const td_tensor *src)
{
  l->nd = idx->ndim; l->dim = dim;
  memcpy(l->isz, idx->sizes, sizeof l->isz);
  memcpy(l->sd, dst->strides, sizeof l->sd);
  memcpy(l->ss, src->strides, sizeof l->ss);
  l->L = idx->sizes[dim]; l->inner = span(idx->sizes, dim + 1, idx->ndim);
  l->dst = rt_ptr(dst); l->src = rt_ptr(src);
  l->ix = (const int64_t *)rt_ptr(idx);
  l->es = rt_dtype_size(dst->scalar_type);
}

/* Line p = (o, i): start offsets in dst and src, and its first index (step: inner). */
static const int64_t *line_start(const IxLine *l, int64_t p, int64_t *od, int64_t *os)
{
  int64_t a = 0, b = 0, o = p / l->inner, i = p % l->inner;
  for (int d = l->nd - 1; d >= 0; d--) {
    if (d == l->dim) continue;
    int64_t k = p % l->isz[d];
    p /= l->isz[d];
    a += k * l->sd[d]; b += k * l->ss[d];
  }
  *od = a; *os = b;
  return l->ix + o * l->L * l->inner + i;
}

/* out[m] = x[m with m[dim] = idx[m]] (dst: the result, src: x), copied by element size */
#define GATHER_LINE(T) { \
    T *d = (T *)l->dst + od; const T *s = (const T *)l->src + os; \
    for (int64_t j = 0; j < l->L; j++) d[j * dd] = s[ix[j * l->inner] * sdim]; } break;

static void gather_lines(void *ctx, int64_t b, int64_t e)
{
  const IxLine *l = ctx;
  int64_t dd = l->sd[l->dim], sdim = l->ss[l->dim];
  for (int64_t p = b; p < e; p++) {
    int64_t od, os;
    const int64_t *ix = line_start(l, p, &od, &os);
    switch (l->es) {
    case 1: GATHER_LINE(uint8_t)
    case 4: GATHER_LINE(uint32_t)
    default: GATHER_LINE(uint64_t)
    }
  }
}

/* out[m with m[dim] = idx[m]] += src[m] (dst: the result) */
static void scatter_lines(void *ctx, int64_t b, int64_t e)
{
  const IxLine *l = ctx;
  int64_t dd = l->sd[l->dim], sdim = l->ss[l->dim];
  for (int64_t p = b; p < e; p++) {
    int64_t od, os;
    const int64_t *ix = line_start(l, p, &od, &os);
    for (int64_t j = 0; j < l->L; j++)
      l->add(l->dst + (od + ix[j * l->inner] * dd) * l->es, 1, l->src + (os + j * sdim) * l->es, 1, 1);
  }
}

/* x (d0..dn), idx with idx.size(d) <= x.size(d) for d != dim -> idx's shape */
int rt_meta_gather(RtCall *c)
{
  const td_tensor *x = c->in[0], *idx = c->in[1];
  if (x->ndim == 0) return rt_err(TD_ERR_INDEX, "gather: cannot index a 0-dim tensor");
  int64_t *dim = &c->attrs.i[0];
  if (rt_wrap_dim("gather", dim, x->ndim)) return TD_ERR_INDEX;
  if (idx_meta("gather", idx, 2)) return TD_ERR_DTYPE;
  if (idx->ndim != x->ndim)
    return rt_err(TD_ERR_SHAPE, "gather: index of shape %s must have as many dims as the input %s",
                  RT_SHAPE(idx), RT_SHAPE(x));
  for (int d = 0; d < x->ndim; d++)
    if (d != *dim && idx->sizes[d] > x->sizes[d])
      return rt_err(TD_ERR_SHAPE, "gather: index of shape %s is larger than the input %s at dim %d",
                    RT_SHAPE(idx), RT_SHAPE(x), d + 1);
  c->ndim = idx->ndim; memcpy(c->sizes, idx->sizes, sizeof c->sizes);
  return 0;
}

int rt_kern_gather(RtCall *c, td_tensor *out)
{
  int dim = (int)c->attrs.i[0];
  td_tensor *x = c->in[0];
  td_tensor *ix = idx_load("gather", c->in[1], dim, x->sizes[dim]);
  if (!ix) return TD_ERR_INDEX;
  IxLine l;
  line_init(&l, ix, dim, out, x);
  int64_t nlines = l.L ? out->nelem / l.L : 0;
  if (nlines) rt_parallel_for(nlines, 1 + IX_GRAIN / l.L, gather_lines, &l);
  td_release(ix);
  return 0;
}

/* base, idx, src of the same ndim; idx.size(d) <= src.size(d), and <= base.size(d) for d != dim */
int rt_meta_scatter_add(RtCall *c)
{
  const td_tensor *base = c->in[0], *idx = c->in[1], *src = c->in[2];
  if (base->ndim == 0) return rt_err(TD_ERR_INDEX, "scatter_add: cannot index a 0-dim tensor");
  int64_t *dim = &c->attrs.i[0];
  if (rt_wrap_dim("scatter_add", dim, base->ndim)) return TD_ERR_INDEX;
  if (idx_meta("scatter_add", idx, 2)) return TD_ERR_DTYPE;
  if (idx->ndim != base->ndim || src->ndim != base->ndim)
    return rt_err(TD_ERR_SHAPE, "scatter_add: tensor %s, index %s and source %s must have the same number of dims",
                  RT_SHAPE(base), RT_SHAPE(idx), RT_SHAPE(src));
  for (int d = 0; d < base->ndim; d++) {
    if (idx->sizes[d] > src->sizes[d])
      return rt_err(TD_ERR_SHAPE, "scatter_add: index of shape %s is larger than the source %s at dim %d",
                    RT_SHAPE(idx), RT_SHAPE(src), d + 1);
    if (d != *dim && idx->sizes[d] > base->sizes[d])
      return rt_err(TD_ERR_SHAPE, "scatter_add: index of shape %s is larger than the tensor %s at dim %d",
                    RT_SHAPE(idx), RT_SHAPE(base), d + 1);
  }
  if (acc_meta("scatter_add", base, src)) return TD_ERR_DTYPE;
  c->ndim = base->ndim; memcpy(c->sizes, base->sizes, sizeof c->sizes);
  return 0;
}

int rt_kern_scatter_add(RtCall *c, td_tensor *out)
{
  int dim = (int)c->attrs.i[0], rc;
  td_tensor *ix = idx_load("scatter_add", c->in[1], dim, out->sizes[dim]);
  if (!ix) return TD_ERR_INDEX;
  td_tensor *s = NULL;
  if ((rc = rt_copy_into(out, c->in[0]))) goto done;
  if (!(s = rt_as_dtype(c->in[2], out->scalar_type))) { rc = TD_ERR_NOMEM; goto done; }
  IxLine l;
  line_init(&l, ix, dim, out, s);
  l.add = ix_add[out->scalar_type];
  int64_t nlines = l.L ? ix->nelem / l.L : 0;
  if (nlines) rt_parallel_for(nlines, 1 + IX_GRAIN / l.L, scatter_lines, &l);
done:
  td_release(s); td_release(ix);
  return rc;
}

/* -- slice_scatter ------------------------------------------------------------------------------ */

/* base, src; attrs.i = { dim, start, stop, step } normalized as in slice:
** out = base with out[..., start:stop:step, ...] = src (src has the slice's shape) */
int rt_meta_slice_scatter(RtCall *c)
{
  const td_tensor *base = c->in[0], *src = c->in[1];
  const int64_t *s = c->attrs.i;
  if (rt_slice_shape("slice_scatter", c, base)) return TD_ERR_ARG;
  if (src->ndim != c->ndim || memcmp(src->sizes, c->sizes, c->ndim * sizeof(int64_t)))
    return rt_err(TD_ERR_SHAPE, "slice_scatter: source of shape %s does not match the slice shape %s "
                  "(dim %lld, %lld:%lld:%lld of a tensor of shape %s)", RT_SHAPE(src),
                  rt_shape_str((char[160]){0}, 160, c->ndim, c->sizes), (long long)s[0] + 1,
                  (long long)s[1] + 1, (long long)s[2], (long long)s[3], RT_SHAPE(base));
  c->sizes[s[0]] = base->sizes[s[0]];   /* the result has the base's shape */
  return 0;
}

int rt_kern_slice_scatter(RtCall *c, td_tensor *out)
{
  const int64_t *s = c->attrs.i;
  td_tensor *src = c->in[1];
  int rc = rt_copy_into(out, c->in[0]);
  if (rc || src->nelem == 0) return rc;
  int64_t st[TD_MAX_DIMS];
  memcpy(st, out->strides, sizeof st);
  st[s[0]] *= s[3];
  td_tensor *v = rt_tensor_alias(out, out->ndim, src->sizes, st, out->offset + s[1] * out->strides[s[0]]);
  if (!v) return TD_ERR_NOMEM;
  rc = rt_copy_into(v, src);
  td_release(v);
  return rc;
}

/* -- cat ---------------------------------------------------------------------------------------- */

/* x1..xn with equal sizes except at dim -> sizes with dim = the sum; dtypes promote */
int rt_meta_cat(RtCall *c)
{
  const td_tensor *x0 = c->in[0];
  if (x0->ndim == 0) return rt_err(TD_ERR_SHAPE, "cat: zero-dimensional tensor (argument 1) cannot be concatenated");
  int64_t *dim = &c->attrs.i[0], total = 0;
  if (rt_wrap_dim("cat", dim, x0->ndim)) return TD_ERR_INDEX;
  for (int i = 0; i < c->nin; i++) {
    const td_tensor *x = c->in[i];
    if (x->ndim != x0->ndim)
      return rt_err(TD_ERR_SHAPE, "cat: tensors must have the same number of dims, got %s (argument 1) and %s "
                    "(argument %d)", RT_SHAPE(x0), RT_SHAPE(x), i + 1);
    for (int d = 0; d < x->ndim; d++)
      if (d != *dim && x->sizes[d] != x0->sizes[d])
        return rt_err(TD_ERR_SHAPE, "cat: sizes must match except in dim %lld, got %s (argument 1) and %s "
                      "(argument %d)", (long long)*dim + 1, RT_SHAPE(x0), RT_SHAPE(x), i + 1);
    total += x->sizes[*dim];
  }
  c->ndim = x0->ndim; memcpy(c->sizes, x0->sizes, sizeof c->sizes);
  c->sizes[*dim] = total;
  return 0;
}

/* out (outer, total, inner); input i fills columns [off, off + len_i) of each outer row */
int rt_kern_cat(RtCall *c, td_tensor *out)
{
  int dim = (int)c->attrs.i[0], es = rt_dtype_size(out->scalar_type);
  int64_t outer = span(out->sizes, 0, dim), inner = span(out->sizes, dim + 1, out->ndim);
  int64_t total = out->sizes[dim], off = 0;
  for (int i = 0; i < c->nin; i++) {
    td_tensor *x = c->in[i];
    int64_t len = x->sizes[dim];
    if (x->nelem == 0) { off += len; continue; }
    if (out->device_type == TD_CPU && x->scalar_type == out->scalar_type && rt_tensor_is_contig(x)) {
      size_t blk = (size_t)(len * inner * es);
      for (int64_t o = 0; o < outer; o++)
        memcpy(rt_ptr(out) + (o * total + off) * inner * es, rt_ptr(x) + o * blk, blk);
    } else {
      /* strided, another dtype or a device: the (parallel, converting) copy kernel into a view of out */
      td_tensor *v = rt_tensor_alias(out, out->ndim, x->sizes, out->strides, out->offset + off * out->strides[dim]);
      if (!v) return TD_ERR_NOMEM;
      int rc = rt_copy_into(v, x);
      td_release(v);
      if (rc) return rc;
    }
    off += len;
  }
  return 0;
}
