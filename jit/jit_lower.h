/*
** jit_lower.h -- internal interface between the scheduler (jit_sched.c) and
** the lowering of one kernel group to kernel IR (jit_lower.c). Not installed,
** not part of the executor's contract (that is jit_sched.h).
*/
#ifndef JIT_LOWER_H
#define JIT_LOWER_H

#include "jit_sched.h"

/* Record classes, decided once by the scheduler. */
enum {
  JIT_SC_DEAD,      /* removed by the passes */
  JIT_SC_SCALAR,    /* Lua number: CONST or ARG inside kernels */
  JIT_SC_INPUT,     /* a real storage: always a buffer */
  JIT_SC_EW,        /* pointwise: inlined or stored */
  JIT_SC_RED,       /* reduction: a pass (or passes) of a row kernel */
  JIT_SC_ROW,       /* softmax / log_softmax: three passes of a row kernel */
  JIT_SC_EAGER      /* run by the runtime's own kernel; operands materialized */
};

/* What the scheduler must change when a group cannot be lowered. */
enum { JIT_LF_NONE, JIT_LF_MAT, JIT_LF_EAGER, JIT_LF_NOMERGE };

typedef struct JitSchedCtx {
  JitTrace *t;
  uint8_t *cls;     /* JIT_SC_* per record */
  uint8_t *mat;     /* 1: the record's root has a buffer (INPUT, eager, stored) */
} JitSchedCtx;

#define JIT_LOWER_MAXARGS 64

typedef struct JitLowered {
  CgKernel *k;
  int32_t nbuf;
  JitRef bufs[CG_MAX_BUFS];        /* kernel buffer order: root refs */
  uint8_t bstore[CG_MAX_BUFS];     /* 1: stored by this kernel, 0: only loaded */
  int32_t nargs;
  JitRef args[JIT_LOWER_MAXARGS];  /* dynamic SCALAR refs, in CG_ARG order */
  JitRef *inl; int32_t ninl;       /* records computed in the kernel (sorted) */
  int32_t nred;                    /* reductions (RED/ROW records) computed */
  JitRef fail_ref;                 /* on failure: the record to change, */
  int32_t fail_action;             /*   and how (JIT_LF_*) */
  char hint[48];                   /* kernel name hint (op names) */
} JitLowered;

/* Lower the group whose stored values are roots[0..n) (record order) into one
** kernel. Returns 0, or -1 with fail_ref/fail_action set (or TD_ERR_NOMEM). */
int jit_lower_group(const JitSchedCtx *c, const JitRef *roots, int n, JitLowered *out);
void jit_lowered_clear(JitLowered *l);   /* frees inl and the kernel (if still owned) */
/* The same in row mode only (no column-mode kernel): the OpenCL device's eager ops. */
int jit_lower_group_rows(const JitSchedCtx *c, const JitRef *roots, int n, JitLowered *out);

/* Operand views of a reduction / row op: the reduced dims of its input space. */
uint32_t jit_red_mask(const JitIns *ins, int nd);
/* A reduction over outer dims that lowers to a column-mode kernel: its units
** of work (outer kept dims x column tiles x blocks of rows), or 0 (jit_lower_col.h). */
int64_t jit_red_col(const JitTrace *t, const JitIns *r);

#endif
