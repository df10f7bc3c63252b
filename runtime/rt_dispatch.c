/*
** rt_dispatch.c -- the one path every op takes: check arguments and infer the
** result's shape and dtype (the op's meta rule, shared with tracing), allocate,
** run the eager kernel, and let autograd record the call. Also the shape and
** dtype helpers the meta rules share, and the named C wrappers.
*/
#include "rt.h"
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

struct JitGradRule;
#define RT_GRADSYM_0 NULL
#define RT_DECLGRAD(name, kind, arity, flags, meta, kern, grad) extern struct JitGradRule jit_grad_rule_##grad;
#define jit_grad_rule_0 jit_grad_rule_none
extern struct JitGradRule jit_grad_rule_none;
RT_OPDEF(RT_DECLGRAD)
#undef RT_DECLGRAD

const RtOpInfo rt_ops[RT_OP__MAX] = {
#define RT_OPROW(name, kind, arity, flags, meta, kern, grad) \
  [RT_OP_##name] = { #name, RT_K_##kind, arity, flags, rt_meta_##meta, rt_kern_##kern, &jit_grad_rule_##grad },
  RT_OPDEF(RT_OPROW)
#undef RT_OPROW
};

/* lower-case names for messages and the Lua op table */
static char op_lname[RT_OP__MAX][24];

__attribute__((constructor)) static void dispatch_init(void)
{
  for (int i = 0; i < RT_OP__MAX; i++) {
    const char *s = rt_ops[i].name; int k = 0;
    for (; s[k] && k < 23; k++) op_lname[i][k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]);
    op_lname[i][k] = 0;
  }
}

const char *rt_op_lname(int op) { return op_lname[op]; }
TD_API int td_op_count(void) { return RT_OP__MAX; }
TD_API const char *td_op_name(int op) { return op >= 0 && op < RT_OP__MAX ? op_lname[op] : "?"; }
TD_API int td_op_arity(int op) { return op >= 0 && op < RT_OP__MAX ? rt_ops[op].arity : 0; }
TD_API int td_op_kind(int op) { return op >= 0 && op < RT_OP__MAX ? rt_ops[op].kind : -1; }

/* -- Shared meta helpers ------------------------------------------------------------------ */

int rt_broadcast(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                 int *nout, int64_t *out)
{
  int n = na > nb ? na : nb;
  int64_t r[TD_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : a[i - (n - na)], y = i < n - nb ? 1 : b[i - (n - nb)];
    if (x != y && x != 1 && y != 1)
      return rt_err(TD_ERR_SHAPE, "%s: shapes %s and %s cannot be broadcast", op,
                    rt_shape_str((char[160]){0}, 160, na, a), rt_shape_str((char[160]){0}, 160, nb, b));
    r[i] = x == 1 ? y : x;
  }
  *nout = n; memcpy(out, r, n * sizeof *r);
  return 0;
}

int rt_wrap_dim(const char *op, int64_t *dim, int ndim)
{
  int lim = ndim > 0 ? ndim : 1;
  if (*dim < -lim || *dim >= lim)
    return rt_err(TD_ERR_INDEX, "%s: dim %lld out of range for a tensor with %d dims", op,
                  (long long)(*dim >= 0 ? *dim + 1 : *dim), ndim);
  if (*dim < 0) *dim += lim;
  return 0;
}

RtKernFn rt_kern_of(int op, int device)
{
  return device == TD_OPENCL ? cl_kern : rt_ops[op].kern;
}

/* t converted to dtype dt (CAST) or made contiguous (COPY), on t's device */
static td_tensor *as_copy(td_tensor *t, int op, int dt)
{
  td_tensor *o = rt_tensor_new_on(t->device_type, t->ndim, t->sizes, dt);
  if (!o) return NULL;
  RtCall c = { .op = op, .nin = 1, .in = &t, .cdtype = t->scalar_type, .scalar_type = dt, .device = t->device_type };
  c.attrs.dtype = op == RT_OP_CAST ? dt : -1;
  if (t->device_type == TD_OPENCL ? cl_kern(&c, o) : rt_kern_ew(&c, o)) { td_release(o); return NULL; }
  return o;
}

td_tensor *rt_as_dtype(td_tensor *t, int dt)
{
  if (t->scalar_type == dt) { td_retain(t); return t; }
  return as_copy(t, RT_OP_CAST, dt);
}

td_tensor *rt_as_contig(td_tensor *t)
{
  if (rt_tensor_is_contig(t)) { td_retain(t); return t; }
  return as_copy(t, RT_OP_COPY, t->scalar_type);
}

/* -- The dispatcher ------------------------------------------------------------------------- */

int rt_result_type_n(int n, td_tensor *const *in);

int rt_call_prepare(RtCall *c, int op, int nin, td_tensor *const *in, const td_attrs *attrs)
{
  if (op < 0 || op >= RT_OP__MAX) return rt_err(TD_ERR_ARG, "op: invalid op id %d", op);
  const RtOpInfo *oi = &rt_ops[op];
  const char *name = op_lname[op];
  if (oi->arity >= 0 ? nin != oi->arity : (nin < 1 || nin > RT_MAX_IN))
    return rt_err(TD_ERR_ARG, "%s: expected %d tensor arguments, got %d", name, oi->arity, nin);
  for (int i = 0; i < nin; i++) RT_ARG(in[i], name, i + 1, TD_ERR_ARG);
  if (attrs && (attrs->ndims < -1 || attrs->ndims > TD_MAX_DIMS))
    return rt_err(TD_ERR_ARG, "%s: %d dims given, at most %d are supported", name, attrs->ndims, TD_MAX_DIMS);
  memset(c, 0, sizeof *c);
  c->op = op; c->nin = nin; c->in = in;
  if (attrs) c->attrs = *attrs; else { c->attrs.ndims = -1; c->attrs.dtype = -1; }
  /* where promotes its values, not its condition; attention its q, k, v (and g), not the mask */
  int np = op == RT_OP_WHERE ? 2 : op == RT_OP_SDPA ? (nin < 3 ? nin : 3) : op == RT_OP_SDPA_BACKWARD ? (nin < 4 ? nin : 4) : nin;
  c->cdtype = (oi->flags & RT_F_NOPROMO) ? in[0]->scalar_type : rt_result_type_n(np, op == RT_OP_WHERE ? in + 1 : in);
  if ((oi->flags & RT_F_FLOAT) && !rt_is_float(c->cdtype)) c->cdtype = rt_default_float;
  if ((oi->flags & RT_F_NOBOOL) && c->cdtype == TD_BOOL)
    return rt_err(TD_ERR_DTYPE, "%s: bool tensors are not supported", name);
  if ((oi->flags & RT_F_FLOATIN) && !rt_is_float(c->cdtype))
    return rt_err(TD_ERR_DTYPE, "%s: expected a floating point tensor, got %s", name, td_dtype_name(c->cdtype));
  c->scalar_type = (oi->flags & RT_F_BOOLOUT) ? TD_BOOL : (oi->flags & RT_F_LONGOUT) ? TD_INT64 : c->cdtype;
  /* the call runs where its tensors are; CPU 0-dim tensors (Lua numbers,
  ** scalars) join a device call, as in PyTorch */
  int dev = TD_CPU, first = 0;
  for (int i = 0; i < nin; i++)
    if (in[i]->device_type != TD_CPU) { dev = in[i]->device_type; first = i; break; }
  for (int i = 0; i < nin; i++)
    if (in[i]->device_type != dev && !(in[i]->device_type == TD_CPU && in[i]->ndim == 0 && (oi->kind == RT_K_EW || op == RT_OP_COPY)))
      return rt_err(TD_ERR_DEVICE, "%s: tensors are on different devices (argument %d on %s, argument %d on %s)",
                    name, first + 1, dev ? "opencl" : "cpu", i + 1, in[i]->device_type ? "opencl" : "cpu");
  c->device = dev;
  int rc = oi->meta(c);
  if (rc) return rc;
  /* every derived shape passes one check: no negative size, no product past int64 */
  if (rt_numel(c->ndim, c->sizes) < 0)
    return rt_err(TD_ERR_SHAPE, "%s: size overflows int64 (result shape %s)", name,
                  rt_shape_str((char[160]){0}, 160, c->ndim, c->sizes));
  return 0;
}

/* A device allocation that failed inside an op: its message gains the op's
** name (the allocator does not know it; composite ops keep the innermost). */
static void *oom_named(int op)
{
  const char *m = td_last_error();
  if (strncmp(m, "out of device memory", 20) == 0) {
    char b[1024];
    snprintf(b, sizeof b, "%s", m);
    rt_err(TD_ERR_NOMEM, "%s: %s", op_lname[op], b);
  }
  return NULL;
}

static td_tensor *call_run(RtCall *c)
{
  const RtOpInfo *oi = &rt_ops[c->op];
  td_tensor *out;
  if (oi->flags & RT_F_VIEW) {
    out = rt_tensor_alloc();            /* the view kernel fills the geometry */
    if (!out) return NULL;
    out->scalar_type = c->scalar_type;
    out->flags = TD_TF_VIEW;
    if (oi->kern(c, out)) { td_release(out); return NULL; }
    /* views know their root base (in-place autograd) */
    out->rt_base = c->in[0]->rt_base ? c->in[0]->rt_base : c->in[0];
    td_retain(out->rt_base);
  } else if (jit_tracing) {
    if (!(out = jit_record_call(c))) return NULL;   /* traced: a record, no data */
  } else {
    for (int i = 0; i < c->nin; i++)
      if (!rt_has_data(c->in[i]))
        return rt_errp(TD_ERR_STATE, "%s: argument %d has no data (a tensor made inside a compiled "
                       "function that was not returned from it)", op_lname[c->op], i + 1);
    out = rt_tensor_new_on(c->device, c->ndim, c->sizes, c->scalar_type);
    if (!out) return c->device == TD_OPENCL ? oom_named(c->op) : NULL;
    if (rt_kern_of(c->op, c->device)(c, out)) { td_release(out); return c->device == TD_OPENCL ? oom_named(c->op) : NULL; }
  }
  if (jit_grad_wants(c) && jit_grad_record(c, out)) { td_release(out); return NULL; }
  return out;
}

/* the profiler's event for a public call (-1 when it is off: one load and a branch) */
#define PROF_BEGIN(op, nin, in) \
  (rt_prof_on ? rt_prof_begin(jit_tracing ? TD_PROF_TRACE : TD_PROF_OP, \
                              (op) >= 0 && (op) < RT_OP__MAX ? op_lname[op] : "?", nin, in) : -1)
#define PROF_END(pe) do { if (pe >= 0) rt_prof_end(pe); } while (0)

/* The public entries check for an interrupt (Ctrl-C in a REPL: the next op
** fails); the compiled executor and the backward engine, which call the
** dispatcher inside, run to the end of their step. */
TD_API td_tensor *td_op(int op, int nin, td_tensor *const *in, const td_attrs *attrs)
{
  RtCall c;
  RT_INTERRUPT_CHECK(NULL);
  int pe = PROF_BEGIN(op, nin, in);
  td_tensor *out = NULL;
  if (!rt_call_prepare(&c, op, nin, in, attrs)) {
    out = call_run(&c);
    td_release(c.aux);
  }
  PROF_END(pe);
  return out;
}

/* Record a call for autograd without running its kernel: the result is a
** contiguous header with the meta's shape and no data. For history whose
** values already exist (the base of a view written in place). */
td_tensor *rt_call_record(int op, int nin, td_tensor *const *in, const td_attrs *attrs)
{
  RtCall c;
  if (rt_call_prepare(&c, op, nin, in, attrs)) return NULL;
  td_tensor *out;
  if (jit_tracing) out = jit_record_call(&c);          /* traced: the value is a record */
  else if ((out = rt_tensor_alloc())) {
    out->ndim = c.ndim; out->scalar_type = c.scalar_type; out->device_type = c.device;
    memcpy(out->sizes, c.sizes, sizeof out->sizes);
    rt_tensor_contig_strides(c.ndim, c.sizes, out->strides);
    out->nelem = rt_numel(c.ndim, c.sizes);
  }
  td_release(c.aux);
  if (!out) return NULL;
  if (jit_grad_wants(&c) && jit_grad_record(&c, out)) { td_release(out); return NULL; }
  return out;
}

TD_API td_tensor *td_op_aux(int op, int nin, td_tensor *const *in, const td_attrs *attrs, td_tensor **aux)
{
  RtCall c;
  *aux = NULL;
  RT_INTERRUPT_CHECK(NULL);
  int pe = PROF_BEGIN(op, nin, in);
  td_tensor *out = NULL;
  if (!rt_call_prepare(&c, op, nin, in, attrs)) {
    out = call_run(&c);
    if (out) *aux = c.aux; else td_release(c.aux);
  }
  PROF_END(pe);
  return out;
}

td_tensor *rt_call_op(int op, int nin, td_tensor *const *in, const td_attrs *attrs)
{
  return td_op(op, nin, in, attrs);
}

/* In place: the result (broadcast to out's shape) is written through out's strides. */
static int op_out(int op, int nin, td_tensor *const *in, const td_attrs *attrs, td_tensor *out)
{
  RtCall c;
  RT_ARG(out, op >= 0 && op < RT_OP__MAX ? op_lname[op] : "op", 1, TD_ERR_ARG);
  RT_INTERRUPT_CHECK(TD_ERR_INTERRUPTED);
  if (rt_call_prepare(&c, op, nin, in, attrs)) return TD_ERR_ARG;
  const char *name = op_lname[op];
  const RtOpInfo *oi = &rt_ops[op];
  int n; int64_t bs[TD_MAX_DIMS];
  if (rt_broadcast(name, c.ndim, c.sizes, out->ndim, out->sizes, &n, bs) || n != out->ndim ||
      memcmp(bs, out->sizes, n * sizeof *bs))
    return rt_err(TD_ERR_SHAPE, "%s_: result of shape %s cannot be written into a tensor of shape %s",
                  name, rt_shape_str((char[160]){0}, 160, c.ndim, c.sizes), RT_SHAPE(out));
  if (rt_dtype_cat(c.scalar_type) > rt_dtype_cat(out->scalar_type) && op != RT_OP_COPY)
    return rt_err(TD_ERR_DTYPE, "%s_: result type %s can't be cast to the destination type %s",
                  name, td_dtype_name(c.scalar_type), td_dtype_name(out->scalar_type));
  if (!rt_has_data(out) && !jit_tracing) return rt_err(TD_ERR_STATE, "%s_: destination has no data", name);
  /* a Lua number written into an integer tensor (fill_) must fit it */
  if (op == RT_OP_COPY && (in[0]->flags & TD_TF_WRAPPED_NUMBER) && in[0]->ptr &&
      rt_value_check("fill_", rt_load(in[0]->ptr, in[0]->scalar_type), out->scalar_type))
    return TD_ERR_ARG;
  /* numbers written into a device tensor (fill_, x:mul_(2) on scalars) run there */
  bool scalars = oi->kind == RT_K_EW || op == RT_OP_COPY;
  for (int i = 0; i < nin; i++) scalars = scalars && in[i]->ndim == 0 && in[i]->device_type == TD_CPU;
  if (scalars) c.device = out->device_type;
  if (out->device_type != c.device)
    return rt_err(TD_ERR_DEVICE, "%s_: the destination is on %s and the arguments on %s", name,
                  out->device_type ? "opencl" : "cpu", c.device ? "opencl" : "cpu");
  for (int d = 0; d < out->ndim; d++)
    if (out->strides[d] == 0 && out->sizes[d] > 1)
      return rt_err(TD_ERR_ARG, "%s_: more than one element of the destination of shape %s refers to the same "
                    "memory (dim %d is expanded); clone() it first", name, RT_SHAPE(out), d + 1);
  /* an integer or bool destination never requires grad (copy_ of a float that does) */
  bool grad = td_grad_enabled() && rt_is_float(out->scalar_type) &&
              (out->flags & TD_TF_REQUIRES_GRAD || jit_grad_wants(&c));
  if (grad && !out->rt_grad_fn && (out->flags & TD_TF_REQUIRES_GRAD))
    return rt_err(TD_ERR_GRAD, "%s_: a leaf tensor that requires grad is used in an in-place operation "
                  "(wrap the update in tide.no_grad)", name);
  /* a view written in place: its base's history is rewritten after the write */
  td_tensor *base = grad && (out->flags & TD_TF_VIEW) ? out->rt_base : NULL;
  if (base && !base->rt_grad_fn && (base->flags & TD_TF_REQUIRES_GRAD))
    return rt_err(TD_ERR_GRAD, "%s_: a view of a leaf tensor that requires grad is used in an in-place "
                  "operation (wrap the update in tide.no_grad)", name);
  if (base && !rt_tensor_is_contig(base))
    return rt_err(TD_ERR_GRAD, "%s_: writing a value that requires grad into a view of a non-contiguous "
                  "tensor of shape %s is not supported; make the base contiguous first", name, RT_SHAPE(base));
  /* Elementwise kernels write through out's strides when no input overlaps it
  ** at a different position; everything else goes through a temporary. */
  bool direct = oi->kind == RT_K_EW && c.scalar_type == out->scalar_type && !jit_tracing;
  for (int i = 0; direct && i < nin; i++)
    if (in[i]->rt_storage == out->rt_storage && (in[i]->ptr != out->ptr || in[i]->ndim != out->ndim ||
        memcmp(in[i]->strides, out->strides, out->ndim * sizeof(int64_t)) ||
        memcmp(in[i]->sizes, out->sizes, out->ndim * sizeof(int64_t))))
      direct = false;
  td_tensor *saved_self = NULL;
  if (grad && (saved_self = jit_grad_inplace_begin(&c, out)) == NULL) return TD_ERR_NOMEM;
  int rc;
  if (direct) {
    c.ndim = out->ndim; memcpy(c.sizes, out->sizes, sizeof c.sizes);
    rc = rt_kern_of(op, c.device)(&c, out);
  } else {
    td_tensor *tmp = NULL;
    { int g = td_set_grad_enabled(0); tmp = td_op(op, nin, in, attrs); td_set_grad_enabled(g); }
    rc = tmp ? 0 : TD_ERR_ARG;
    if (tmp && jit_tracing) {           /* functionalized: a new version of out's root */
      rc = jit_record_write(&c, out, tmp);
      td_release(c.aux); c.aux = NULL;
      td_release(tmp);
    } else if (tmp) {
      RtCall cc = { .op = RT_OP_COPY, .nin = 1, .in = &tmp, .cdtype = tmp->scalar_type, .scalar_type = out->scalar_type,
                    .ndim = out->ndim };
      memcpy(cc.sizes, out->sizes, sizeof cc.sizes);
      rc = rt_kern_of(RT_OP_COPY, c.device)(&cc, out);
      td_release(c.aux); c.aux = NULL;
      td_release(tmp);
    }
  }
  td_release(c.aux);
  if (rc) { td_release(saved_self); return rc; }
  rt_bump_version(out);
  if (grad) {
    rc = jit_grad_record_inplace(&c, out, saved_self);
    td_release(saved_self);
    if (!rc && base) rc = jit_grad_rebase_view(out, base);
  }
  return rc;
}

TD_API int td_op_out(int op, int nin, td_tensor *const *in, const td_attrs *attrs, td_tensor *out)
{
  if (!rt_prof_on) return op_out(op, nin, in, attrs, out);
  char name[32];
  snprintf(name, sizeof name, "%s_", op >= 0 && op < RT_OP__MAX ? op_lname[op] : "?");
  int pe = rt_prof_begin(jit_tracing ? TD_PROF_TRACE : TD_PROF_OP, name, nin, in);
  int rc = op_out(op, nin, in, attrs, out);
  rt_prof_end(pe);
  return rc;
}

TD_API td_tensor *td_op_number(int op, td_tensor *a, double v, int rev)
{
  RT_ARG(a, td_op_name(op), rev ? 2 : 1, NULL);
  td_tensor *s = td_wrap_number(v);
  if (!s) return NULL;
  td_tensor *in[2] = { rev ? s : a, rev ? a : s };
  td_tensor *r = td_op(op, 2, in, NULL);
  td_release(s);
  return r;
}

/* -- Named wrappers ---------------------------------------------------------------------------- */

static td_tensor *op1(int op, td_tensor *a) { return td_op(op, 1, &a, NULL); }
static td_tensor *op2(int op, td_tensor *a, td_tensor *b) { td_tensor *in[2] = { a, b }; return td_op(op, 2, in, NULL); }

TD_API td_tensor *td_add(td_tensor *a, td_tensor *b) { return op2(RT_OP_ADD, a, b); }
TD_API td_tensor *td_sub(td_tensor *a, td_tensor *b) { return op2(RT_OP_SUB, a, b); }
TD_API td_tensor *td_mul(td_tensor *a, td_tensor *b) { return op2(RT_OP_MUL, a, b); }
TD_API td_tensor *td_div(td_tensor *a, td_tensor *b) { return op2(RT_OP_DIV, a, b); }
TD_API td_tensor *td_matmul(td_tensor *a, td_tensor *b) { return op2(RT_OP_MATMUL, a, b); }
TD_API td_tensor *td_neg(td_tensor *a) { return op1(RT_OP_NEG, a); }
TD_API td_tensor *td_exp(td_tensor *a) { return op1(RT_OP_EXP, a); }
TD_API td_tensor *td_log(td_tensor *a) { return op1(RT_OP_LOG, a); }
TD_API td_tensor *td_contiguous(td_tensor *a)
{
  RT_ARG(a, "contiguous", 1, NULL);
  if (a && rt_tensor_is_contig(a)) { td_retain(a); return a; }
  return op1(RT_OP_COPY, a);
}

static td_attrs dims_attrs(int n, const int64_t *d)
{
  td_attrs at = { .ndims = n, .dtype = -1 };
  if (n > 0) memcpy(at.dims, d, (n > TD_MAX_DIMS ? TD_MAX_DIMS : n) * sizeof *d);
  return at;
}

TD_API td_tensor *td_sum(td_tensor *a, int ndims, const int64_t *dims, int keepdim)
{
  if (ndims > TD_MAX_DIMS) return rt_errp(TD_ERR_ARG, "sum: too many dims (%d)", ndims);
  td_attrs at = dims_attrs(ndims, dims); at.keepdim = keepdim;
  return td_op(RT_OP_SUM, 1, &a, &at);
}

#define SHAPE_OP(fn, OP, what) \
  TD_API td_tensor *fn(td_tensor *a, int n, const int64_t *s) { \
    if (n < 0 || n > TD_MAX_DIMS) return rt_errp(TD_ERR_SHAPE, what ": %d dims requested, at most %d are supported", n, TD_MAX_DIMS); \
    td_attrs at = dims_attrs(n, s); return td_op(OP, 1, &a, &at); }
SHAPE_OP(td_view, RT_OP_VIEW, "view")
SHAPE_OP(td_permute, RT_OP_PERMUTE, "permute")
SHAPE_OP(td_expand, RT_OP_EXPAND, "expand")

TD_API td_tensor *td_reshape(td_tensor *a, int n, const int64_t *s)
{
  RT_ARG(a, "reshape", 1, NULL);
  td_tensor *v = td_view(a, n, s);
  if (v || !a) return v;
  /* not viewable with these strides: copy, then view (fails with the view's
  ** message when the sizes themselves are invalid) */
  td_tensor *c = op1(RT_OP_COPY, a);
  if (!c) return NULL;
  v = td_view(c, n, s);
  td_release(c);
  return v;
}

TD_API td_tensor *td_cast(td_tensor *a, int dtype)
{
  RT_ARG(a, "to", 1, NULL);
  if (a && a->scalar_type == dtype) { td_retain(a); return a; }
  td_attrs at = { .ndims = -1, .dtype = dtype };
  return td_op(RT_OP_CAST, 1, &a, &at);
}

/* Sum a broadcast gradient back to `size` (the reverse of expand). */
TD_API td_tensor *td_sum_to(td_tensor *g, int ndim, const int64_t *size)
{
  RT_ARG(g, "sum_to", 1, NULL);
  if (ndim < 0 || ndim > TD_MAX_DIMS) return rt_errp(TD_ERR_SHAPE, "sum_to: %d dims requested", ndim);
  if (g->ndim == ndim && !memcmp(g->sizes, size, ndim * sizeof *size)) { td_retain(g); return g; }
  int lead = g->ndim - ndim;
  if (lead < 0) return rt_errp(TD_ERR_SHAPE, "sum_to: cannot sum %s to %s", RT_SHAPE(g),
                               rt_shape_str((char[160]){0}, 160, ndim, size));
  td_attrs at = { .ndims = 0, .dtype = -1, .keepdim = 1 };
  for (int i = 0; i < g->ndim; i++)
    if (i < lead || (size[i - lead] == 1 && g->sizes[i] != 1)) at.dims[at.ndims++] = i;
  td_tensor *s = at.ndims ? td_op(RT_OP_SUM, 1, &g, &at) : (td_retain(g), g);
  if (!s) return NULL;
  td_tensor *r = td_view(s, ndim, size);
  td_release(s);
  return r;
}
