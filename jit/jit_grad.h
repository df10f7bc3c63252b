/*
** jit_grad.h -- autograd records (nodes) and derivative rules.
** A node is the record of one differentiable op call: its op and attrs, one
** edge per input (to the producing node, or to the leaf tensor), and the values
** its derivative rule reads. The rules (jit_grad.c) are written against the
** public op API, so eager backward and the trace compiler replay the same rules.
*/
#ifndef JIT_GRAD_H
#define JIT_GRAD_H

#include "../runtime/rt.h"

typedef struct JitEdge {
  struct RtNode *node;           /* producer of this input (retained), or NULL */
  td_tensor *leaf;               /* the leaf tensor itself (retained), or NULL */
  td_tensor *saved;              /* the input's value if the rule reads it */
  uint64_t version;              /* saved->rt_storage->version when saved */
  int32_t ndim, scalar_type;     /* the input's geometry, for reducing broadcast grads */
  int64_t sizes[TD_MAX_DIMS];
} JitEdge;

typedef struct RtNode {
  int32_t refcount;
  int32_t op;
  int32_t nin;
  int32_t released;              /* saved values freed after a backward */
  td_attrs attrs;
  const struct JitGradRule *rule;
  td_tensor *owner;              /* the output tensor (weak: cleared when it dies) */
  td_tensor *saved_out;          /* alias of the output without history, if read */
  uint64_t out_version;
  td_tensor *aux;                /* second result of the op (max/min indices) */
  uint32_t trace;                /* id of the trace that recorded it (0: eager) */
  void *ext;                     /* a compiled backward's state (jit_aot.c), freed with the saved values */
  void (*ext_free)(void *ext);
  char *where;                   /* anomaly mode: where the forward op was called (malloc'd) */
  int32_t out_ndim, out_dtype;
  int64_t out_size[TD_MAX_DIMS];
  /* engine scratch for one backward pass */
  uint64_t epoch;
  int32_t deps;
  int32_t needed;                /* autograd.grad: JIT_NEED_* (jit_autograd.c) */
  td_tensor *gacc;
  struct JitPiece *pieces;       /* gradients of slices of the output, joined when it runs */
  int32_t npieces, cappieces;
  JitEdge edge[];
} JitNode;

/* Edges of one node: an op's inputs (RT_MAX_IN), or a compiled function's
** boundary (the parameters and arguments its backward reaches). */
#define JIT_MAX_EDGES 256

/* Context of one rule invocation: the node, the incoming gradient, the results. */
typedef struct JitCtx {
  JitNode *n;
  td_tensor *g;                  /* d loss / d output */
  td_tensor *gin[JIT_MAX_EDGES]; /* results: d loss / d input i (NULL = none) */
  td_tensor *tmp[64];            /* temporaries released after the rule */
  int ntmp;
} JitCtx;

#define JIT_SAVE_OUT 0x80000000u
#define JIT_SAVE_AUX 0x40000000u
#define JIT_SAVE_ALL 0x0000ffffu

typedef struct JitGradRule {
  const char *name;              /* "MulBackward" */
  int (*fn)(JitCtx *k);
  uint32_t save;                 /* bit i: input i's value; JIT_SAVE_OUT/AUX */
} JitGradRule;

/* autograd.grad that stops at the captured inputs: gradients of `inputs` (leaf
** tensors, or tensors whose grad_fn is a node outside the graph being walked)
** without running any node behind them (tide.compile's AOT backward). */
int jit_grad_capture(int nout, td_tensor *const *outputs, td_tensor *const *grads,
                     int nin, td_tensor *const *inputs, td_tensor **results);
/* A node with a custom rule and no op (its edges are set by the caller). */
JitNode *jit_node_custom(const JitGradRule *rule, int nin);

td_tensor *jit_saved_in(JitCtx *k, int i);   /* NULL + error if modified in place */
td_tensor *jit_saved_out(JitCtx *k);
td_tensor *jit_tmp(JitCtx *k, td_tensor *t); /* register a temporary; passes NULL through */

#endif
