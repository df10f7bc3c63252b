/*
** jit_rec.h -- the recorder's state for one traced call (jit_record.c), and
** the executor (jit_exec.c) that runs a scheduled plan or a trace eagerly.
*/
#ifndef JIT_REC_H
#define JIT_REC_H

#include "jit_ir.h"
#include "jit_sched.h"

/* A real storage met during the trace: its INPUT slot and current version. */
typedef struct JitStorageRef { RtStorage *s; int32_t slot; JitRef input, ref; } JitStorageRef;

typedef struct JitRec {
  JitTrace t;
  JitStorageRef *map; int32_t mcap, mn;
  /* leaves whose .grad was set, with the .grad they had before the trace (both retained) */
  struct JitGradNote { td_tensor *leaf, *prev; } *grads; int32_t ngrads, gcap;
  int32_t backward_ran;
  int32_t device;                 /* the trace's device: TD_OPENCL once a tensor there entered it */
} JitRec;

JitRec *jit_rec_begin(JitRec *reuse);          /* starts tracing on this thread (in reuse's arrays) */
void jit_rec_reset(JitRec *r);                 /* ends r's trace, keeping its arrays for reuse */
void jit_rec_stop(JitRec *r);                  /* stops tracing (the trace stays) */
int jit_rec_resume(JitRec *r);                 /* traces into r again after a stop (error while another traces) */
void jit_rec_free(JitRec *r);
int jit_rec_input(JitRec *r, td_tensor *x);    /* the INPUT slot of x's storage */
int jit_rec_output(JitRec *r, td_tensor *x);   /* appends an output view; its index */
int jit_rec_effects(JitRec *r);                /* in-place writes to real storages -> effects */
void jit_trace_clear(JitTrace *t);

/* -- Backward ahead of time (jit_aot.c) -------------------------------------------------- */

typedef struct JitAot {
  int F;                         /* forward records [0, F) of the joint trace; backward [F, N) */
  int nfo;                       /* the forward's own outputs: joint outs [0, nfo) */
  int gslot;                     /* INPUT slot of the placeholder gradient */
  int ntargets;                  /* the boundary: leaves, or headers carrying an outside node */
  td_tensor **targets;           /* (retained) */
  int *tout;                     /* per target: index of its gradient in the joint outs, or -1 */
} JitAot;

/* While tracing: replay the backward of traced output y (the only output with
** history) into the trace, up to the boundary. */
int jit_aot_record(JitRec *r, td_tensor *y, JitAot *a);
void jit_aot_clear(JitAot *a);
/* Split the joint trace: f = forward (its outputs, then the saved values),
** b = backward (inputs: the joint trace's slots, then the saved values; the
** saved slots are left NULL for the caller; outputs: the targets' gradients). */
int jit_aot_split(const JitTrace *j, const JitAot *a, JitTrace *f, JitTrace *b);
/* NULL, or why the joint trace's in-place writes into inputs forbid the split. */
const char *jit_aot_effects_conflict(const JitTrace *j, const JitAot *a);
/* Give y an autograd node that runs run(ctx, b, outs) on backward; takes b and
** the reference ctx (released by ctx_release when the node's values are freed). */
typedef int (*JitAotRun)(void *ctx, const JitTrace *b, td_tensor **outs);
int jit_aot_attach(td_tensor *y, const JitAot *a, JitTrace *b, JitAotRun run, void *ctx, void (*ctx_release)(void *));

/* -- Trace text (jit_dump.c) ----------------------------------------------------------- */

char *jit_trace_text(const JitTrace *t);       /* TIDE_LOG=graph listing, malloc'd */
char *jit_trace_dot(const JitTrace *t);        /* Graphviz DOT, malloc'd */

/* -- Executor (jit_exec.c) -------------------------------------------------------------- */

typedef struct JitExec JitExec;
/* Plan the buffers of a plan over its trace (liveness-based reuse of one arena). */
JitExec *jit_exec_new(const JitTrace *t, const JitPlan *p, const CgKernelFn *fns);
void jit_exec_free(JitExec *x);
/* Run with the inputs and scalar values of `cur` (a trace equal to the planned one
** up to input identities and dynamic scalar values). outs[k] receives a new real
** tensor for cur->outs[k]; effects are written into the input storages. */
int jit_exec_run(JitExec *x, const JitTrace *cur, td_tensor **outs);
/* An all-eager plan of a trace (the interpreter: fallbacks and reference runs). */
JitPlan *jit_plan_eager(JitTrace *t);
/* The device a trace runs on: TD_OPENCL when an input is there (its INPUT
** record's attrs.i[0], part of the variant key), else TD_CPU. */
int jit_trace_device(const JitTrace *t);
/* Compile a plan's kernels for the trace's device: fns for the CPU (libgccjit),
** the plan's OpenCL kernels otherwise. */
int jit_plan_compile(JitPlan *p, int device, CgKernelFn *fns);
/* A kernel's text for explain and TIDE_LOG=code: C, or OpenCL C on that device (malloc'd). */
char *jit_kernel_source(const CgKernel *k, int device);

#endif
