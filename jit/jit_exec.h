/*
** jit_exec.h -- internal interface of the executor (jit_exec.c: buffer plan,
** CPU runs; jit_exec_dev.c: runs on the OpenCL device).
*/
#ifndef JIT_EXEC_H
#define JIT_EXEC_H

#include "jit_rec.h"
#include "cl.h"

/* Where a root's buffer lives during a call. */
enum { BUF_NONE, BUF_INPUT, BUF_ARENA, BUF_OUTPUT, BUF_ALIAS };

typedef struct ExecBuf {
  int32_t kind;
  int32_t alias;          /* BUF_ALIAS: the root whose buffer this one reuses */
  int64_t off, nbytes;    /* BUF_ARENA */
  int32_t def, last;      /* first and last step touching it */
} ExecBuf;

struct JitExec {
  const JitTrace *t;
  const JitPlan *p;
  const CgKernelFn *fns;
  ExecBuf *b;             /* per record */
  char **ptr;             /* per record, during a call */
  RtStorage *wrap;        /* per record: non-owning storages for eager steps */
  RtStorage **ost;        /* per record, during a call: the storage of an output root */
  char *arena; int64_t arena_bytes;
  int dev;                /* TD_CPU, or TD_OPENCL: the plan runs on the device */
  OclBuf *db;             /* device: per record, during a call: its buffer */
  RtStorage *darena;      /* device: the arena */
};

static inline int64_t rec_bytes(const JitIns *ins) { return rt_numel(ins->ndim, ins->sizes) * rt_dtype_size(ins->dtype); }
JitRef jit_exec_resolve(const JitExec *x, JitRef r);
int jit_exec_run_dev(JitExec *x, const JitTrace *cur, td_tensor **outs);

#endif
