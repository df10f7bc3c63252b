/*
** jit_sched.h -- passes, the scheduler (fusion into kernel groups) and the
** lowering of groups to kernel IR; the result is a JitPlan, which jit_exec.c
** runs: a list of steps over buffers, each a compiled kernel or one record run
** by the runtime's eager kernel (matmul through OpenBLAS, index ops, ...).
*/
#ifndef JIT_SCHED_H
#define JIT_SCHED_H

#include "jit_ir.h"
#include "cg.h"

/* -- Passes (jit_opt.c): in place on the trace; removed records get JIT_IF_DEAD -- */

void jit_opt_writes(JitTrace *t);     /* reads of an intermediate whole-root WRITE read its value */
void jit_opt_dce(JitTrace *t);        /* keep what reaches outputs and effects */
void jit_opt_cse(JitTrace *t);        /* same op, attrs and operand views -> one record */
void jit_opt_fold(JitTrace *t);       /* x*1, x+0, x-0, x/1, x^1, x^2 -> x*x, casts to the same type */
void jit_opt_split_grads(JitTrace *t); /* sums of slice scatters onto zeros tiling a dim -> cat */
/* A WRITE whose destination is its whole root, contiguous (a pointwise store). */
bool jit_write_whole(const JitTrace *t, const JitIns *r);

/* -- Plan --------------------------------------------------------------------- */

enum { JIT_STEP_KERNEL, JIT_STEP_EAGER };

typedef struct JitStep {
  int32_t kind;
  int32_t kernel;        /* KERNEL: index into plan->kernels */
  JitRef ref;            /* EAGER: the record to run eagerly (its operands are materialized) */
  int32_t nbuf;          /* KERNEL: buffers bound, in the kernel's buffer order: */
  JitRef *bufs;          /*   root refs (INPUT records or materialized records) */
  int32_t nargs;         /* KERNEL: run-time scalar args: */
  JitRef *args;          /*   SCALAR records (JIT_IF_DYN) */
} JitStep;

typedef struct JitPlan {
  JitStep *steps; int32_t nsteps;
  CgKernel **kernels; int32_t nkernels;
  char *schedule_text;   /* human-readable groups (TIDE_LOG=schedule), malloc'd */
  void **ocl;            /* on OpenCL: the compiled kernels (cl_kernel, owned by their program) */
} JitPlan;

/* Schedule and lower an optimized trace (sets JIT_IF_MAT on records that get a
** buffer: every record an eager step, an output or an effect reads, and every
** kernel's stored value). Returns NULL with a message on failure. */
JitPlan *jit_schedule(JitTrace *t);
void jit_plan_free(JitPlan *p);

#endif
