/* TEMPORARY during development: hooks whose kernels are being written. */
#include "rt.h"
#define STUB(m) int rt_meta_##m(RtCall *c) { return rt_err(TD_ERR_ARG, "%s: not built yet", rt_op_lname(c->op)); } \
  int rt_kern_##m(RtCall *c, td_tensor *o) { (void)o; return rt_err(TD_ERR_ARG, "%s: not built yet", rt_op_lname(c->op)); }
STUB(red) STUB(row) STUB(matmul) STUB(index_select) STUB(index_add) STUB(gather) STUB(scatter_add)
STUB(slice_scatter) STUB(cat)
