/*
** jit_ir.h -- the trace IR of tide.compile: SSA records in one growable array,
** addressed by integer refs (JitRef), with the runtime's op table as the
** single source of op ids, names and shape rules.
**
** Design note (read before changing the recorder, the passes or the scheduler):
** - Every record defines one *root value*: a contiguous buffer of the record's
**   dtype and shape (sizes[]). Nothing else owns memory.
** - Operands are *views* of roots (JitView: root ref + sizes/strides/offset in
**   elements). Movement ops (view, permute, expand, slice, select, reshape of
**   contiguous data) are never recorded: the recorder folds them into the
**   operand geometry, so they cost nothing inside kernels.
** - An INPUT record stands for the whole storage of a real tensor the function
**   reached (argument, upvalue, parameter, a tensor made eagerly inside it): a
**   1-D root of the storage's element count. Views of it carry the tensor's own
**   offset and strides.
** - In-place writes are functionalized: WRITE(old root, value) makes a new
**   version of the root, written at the geometry in attrs-view `dst`; later
**   reads of any alias see the newest version (storage->jit_ref).
** - SCALAR records are Lua numbers that entered an op (wrapped numbers). Their
**   value is part of the variant key unless the slot became dynamic, in which
**   case it is passed to kernels as an argument.
** - The record array is POD and zero-padded so that a variant key is a hash
**   of its bytes and a match is a memcmp.
*/
#ifndef JIT_IR_H
#define JIT_IR_H

#include "../runtime/rt.h"

typedef int32_t JitRef;

/* Pseudo ops after the op table's ids. */
#define JIT_OPDEF(_) \
  _(INPUT)   /* a real tensor's storage; slot = input index */ \
  _(SCALAR)  /* a Lua number (0-dim); value; slot = scalar ordinal */ \
  _(WRITE)   /* in[0] old root (full view), in[1] value; dst geometry in views[dst] */

enum {
#define JIT_OPENUM(name) JIT_OP_##name,
  JIT_OP__BASE = RT_OP__MAX - 1,
  JIT_OPDEF(JIT_OPENUM)
#undef JIT_OPENUM
  JIT_OP__MAX
};

/* An operand: a strided view of a root value. */
typedef struct JitView {
  JitRef root;
  int32_t ndim;
  int64_t offset;
  int64_t sizes[TD_MAX_DIMS];
  int64_t strides[TD_MAX_DIMS];
} JitView;

/* Record flags */
#define JIT_IF_OUTPUT  0x01   /* returned by the function (or a .grad / effect value) */
#define JIT_IF_DYN     0x02   /* SCALAR: value passed at run time, not specialized */
#define JIT_IF_MAT     0x04   /* scheduler: materialized into a buffer */
#define JIT_IF_DEAD    0x08   /* passes: removed */

typedef struct JitIns {
  int32_t op;            /* RT_OP_* or JIT_OP_* */
  int32_t dtype;         /* td_dtype of the result */
  int32_t ndim;
  int32_t nin;           /* operands: views[arg0 .. arg0+nin) */
  int32_t arg0;
  int32_t flags;         /* JIT_IF_* (not part of the key except DYN) */
  int32_t slot;          /* INPUT: input index; SCALAR: scalar ordinal */
  int32_t dst;           /* WRITE: index of the destination view in views[] */
  int64_t sizes[TD_MAX_DIMS];
  td_attrs attrs;        /* normalized by the op's meta rule */
  double value;          /* SCALAR */
  int32_t cdtype;        /* compute dtype of the promoted inputs (RtCall.cdtype) */
  int32_t line;          /* source line that recorded it (for messages), not keyed */
} JitIns;

/* An effect: after the call, root `ref` (a WRITE version) is stored into
** input slot `slot`'s storage. */
typedef struct JitEffect { int32_t slot; JitRef ref; } JitEffect;

typedef struct JitTrace {
  JitIns *ins;  int32_t nins, cap;
  JitView *views; int32_t nviews, vcap;
  /* inputs, by slot: the real tensors whose storages the INPUT records stand for */
  td_tensor **inputs; int32_t ninputs, icap;
  /* outputs: views the caller receives, in order */
  JitView *outs; int32_t nouts, ocap;
  JitEffect *effects; int32_t neffects, ecap;
  int32_t nscalars;
  uint32_t id;           /* trace generation, to reject tensors of an older trace */
} JitTrace;

static inline JitView *jit_arg(const JitTrace *t, const JitIns *ins, int i) { return &t->views[ins->arg0 + i]; }
const char *jit_op_name(int op);          /* table name, lower case, pseudo ops too */

/* -- Recorder (jit_record.c) ----------------------------------------------------- */

JitTrace *jit_trace_active(void);
int jit_trace_grow_views(JitTrace *t, int32_t need);   /* room for `need` operand views (zero-padded) */
/* Dispatcher hooks: record a prepared call instead of running it. */
td_tensor *jit_record_call(RtCall *c);
int jit_record_inplace(RtCall *c, td_tensor *out);
/* Traced tensors: storages with no data that stand for a root of the active trace. */
bool jit_is_traced(const td_tensor *t);

/* -- Passes (jit_opt_*.c, declared in jit_opt.h) ----------------------------------- */
/* -- Scheduler and lowering (jit_sched.c): see jit_sched.h ------------------------ */

#endif
