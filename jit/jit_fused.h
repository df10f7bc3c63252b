/*
** jit_fused.h -- what the eager fast paths of composite functions share
** (jit_fused.c: layer_norm, rms_norm, cross_entropy; jit_conv.c: conv2d,
** pooling): argument checks, the edges of their custom autograd nodes, and
** op helpers for the composite formulas their backward takes under
** create_graph (results are the rule's temporaries; NULL propagates).
*/
#ifndef JIT_FUSED_H
#define JIT_FUSED_H

#include "jit_grad.h"
#include <string.h>

/* -- Arguments and nodes --------------------------------------------------------------------------------- */

/* a CPU float tensor with data, outside a trace */
static inline int fused_arg(const char *fn, td_tensor *t, int argn, int dtype)
{
  if (jit_tracing)
    return rt_err(TD_ERR_STATE, "%s: the fused kernel does not trace (use the composite form)", fn);
  if (t->device_type != TD_CPU || !t->ptr)
    return rt_err(TD_ERR_DEVICE, "%s: argument %d must be a CPU tensor with data", fn, argn);
  if (dtype >= 0 ? t->scalar_type != dtype : !rt_is_float(t->scalar_type))
    return rt_err(TD_ERR_DTYPE, "%s: argument %d has dtype %s, expected %s", fn, argn,
                  td_dtype_name(t->scalar_type), dtype >= 0 ? td_dtype_name(dtype) : "a floating point type");
  return 0;
}

static inline bool wants_grad(td_tensor *a, td_tensor *b, td_tensor *c)
{
  return td_grad_enabled() && ((a && (a->flags & TD_TF_REQUIRES_GRAD)) || (b && (b->flags & TD_TF_REQUIRES_GRAD)) ||
                               (c && (c->flags & TD_TF_REQUIRES_GRAD)));
}

/* edge i of a custom node: x's producer or x as a leaf, x's value if `save` */
static inline void edge_of(JitNode *n, int i, td_tensor *x, bool save)
{
  JitEdge *e = &n->edge[i];
  if (!x) return;
  e->ndim = x->ndim; e->scalar_type = x->scalar_type; memcpy(e->sizes, x->sizes, sizeof e->sizes);
  if (x->flags & TD_TF_REQUIRES_GRAD) {
    if (x->rt_grad_fn) { e->node = x->rt_grad_fn; __atomic_add_fetch(&e->node->refcount, 1, __ATOMIC_RELAXED); }
    else { e->leaf = x; td_retain(x); }
  }
  if (save) { e->saved = x; td_retain(x); e->version = x->rt_storage ? x->rt_storage->version : 0; }
}

static inline void node_attach(JitNode *n, td_tensor *y)
{
  n->out_ndim = y->ndim; n->out_dtype = y->scalar_type; memcpy(n->out_size, y->sizes, sizeof n->out_size);
  y->rt_grad_fn = n; n->owner = y;
  y->flags |= TD_TF_REQUIRES_GRAD;
}

static inline bool needs(JitCtx *k, int i) { return k->n->edge[i].node || k->n->edge[i].leaf; }

static inline int set(JitCtx *k, int i, td_tensor *g)
{
  if (!needs(k, i)) return 0;
  if (!g) return TD_ERR_GRAD;
  td_retain(g); k->gin[i] = g;
  return 0;
}

/* ops whose results are the rule's temporaries; NULL propagates */
static inline td_tensor *op2(JitCtx *k, int op, td_tensor *a, td_tensor *b)
{ td_tensor *in[2] = { a, b }; return a && b ? jit_tmp(k, td_op(op, 2, in, NULL)) : NULL; }
static inline td_tensor *opn(JitCtx *k, int op, td_tensor *a, double v) { return a ? jit_tmp(k, td_op_number(op, a, v, 0)) : NULL; }
static inline td_tensor *red(JitCtx *k, int op, td_tensor *a, int dim, int keep)
{
  td_attrs at = { .ndims = 1, .keepdim = keep, .dtype = -1 };
  at.dims[0] = dim;
  return a ? jit_tmp(k, td_op(op, 1, &a, &at)) : NULL;
}
static inline td_tensor *reshape(JitCtx *k, td_tensor *a, int nd, const int64_t *s)
{ return a ? jit_tmp(k, td_reshape(a, nd, s)) : NULL; }
static inline td_tensor *contig(JitCtx *k, td_tensor *a) { return a ? jit_tmp(k, td_contiguous(a)) : NULL; }
#define ADD(a, b) op2(k, RT_OP_ADD, a, b)
#define SUB(a, b) op2(k, RT_OP_SUB, a, b)
#define MUL(a, b) op2(k, RT_OP_MUL, a, b)
#define GO (k->g)        /* the incoming gradient */


#endif
