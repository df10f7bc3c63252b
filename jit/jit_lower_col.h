/*
** jit_lower_col.h -- lowering of column reductions (reduced dims outside the
** innermost kept dim) to a column-mode kernel (cg.h). Part of jit_lower.c
** (included once, uses its Lower and helpers).
*/

/*
** Virtual dims of a column kernel: A (kept dims before the reduced ones:
** [0, nout), rows), C (kept dims after them: [nout, ncv), the columns) and R
** (the reduced dims: [ncv, nv), the reduction loop t). All in one pass (the
** final segment): a RED's value is an element value (one per column), read
** after the loop over t. Rules:
** - A value that depends on t (an R coefficient) must not read a RED value;
**   the lowering fails on that RED (JIT_LF_MAT: it gets its own kernel), as
**   it does for reductions not over R (a row reduction feeding this one) and
**   for those without a one-pass form here (var, std, logsumexp, norm).
** - C and R must each coalesce into one dim, with unit-stride columns in what
**   moves with t; else the group is lowered again in row mode (colretry) or,
**   big, the reduction runs eagerly.
** - Tiles and blocks of rows (cg.h) depend on the shape only: the partials
**   of blocks combine in order, whatever the thread count.
*/

static bool lower_can_merge(const Lower *L, int a, int b);
static void lower_merge_dim(Lower *L, int a, int b);

/* Columns per tile: all (up to CG_MAX_CTILE, 8 KiB of float64 partials per
** RED), in equal tiles, a multiple of 16 lanes. Whole rows stream best. */
static int64_t lower_col_tile(int64_t c)
{
  int64_t nt = (c + CG_MAX_CTILE - 1) / CG_MAX_CTILE;
  return ((c + nt - 1) / nt + 15) / 16 * 16;
}

/* Reduction steps per block: blocks for 16 units of work (rows x blocks)
** when the rows are fewer, each of 2^16 elements at least. By shape only. */
static int64_t lower_col_blk(int64_t rows, int64_t red, int64_t ctile)
{
  if (rows >= 16) return red;
  int64_t b = (red * rows + 15) / 16, lo = ((1 << 16) + ctile - 1) / ctile;
  b = b > lo ? b : lo;
  return b < red ? b : red;
}

int64_t jit_red_col(const JitTrace *t, const JitIns *r)
{
  if (r->op != RT_OP_SUM && r->op != RT_OP_MEAN && r->op != RT_OP_PROD && r->op != RT_OP_MAX && r->op != RT_OP_MIN)
    return 0;
  if (!rt_is_float(r->cdtype) || !rt_is_float(r->dtype)) return 0;
  const JitView *v = jit_arg(t, r, 0);
  if (rt_numel(v->ndim, v->sizes) == 0) return 0;   /* no element: no blocks (a row kernel or eager) */
  uint32_t mask = jit_red_mask(r, v->ndim);
  int64_t a = 1, c = 1, red = 1;
  int state = 0;                           /* A* R+ C+ over the dims of size > 1 */
  for (int d = 0; d < v->ndim; d++) {
    if (v->sizes[d] == 1) continue;
    bool rd = mask >> d & 1;
    if (rd && state == 2) return 0;
    if (rd) { state = 1; red *= v->sizes[d]; }
    else if (state == 0) a *= v->sizes[d];
    else { state = 2; c *= v->sizes[d]; }
  }
  if (state != 2) return 0;
  int64_t ct = lower_col_tile(c), rows = a * ((c + ct - 1) / ct), blk = lower_col_blk(rows, red, ct);
  return rows * ((red + blk - 1) / blk);
}

/* Virtual dims A, C, R of the anchor reduction an->red (jit_red_col holds). */
static void lower_col_anchor(Lower *L, LAnchor *an)
{
  int n = 0, fr = 0;
  while (fr < an->nd && (an->sh[fr] == 1 || !(an->mask >> fr & 1))) fr++;
  for (int cls = 0; cls < 3; cls++) {
    for (int d = 0; d < an->nd; d++) {
      bool red = an->mask >> d & 1;
      if (an->sh[d] == 1 || (cls == 0 && (red || d > fr)) || (cls == 1 && (red || d < fr)) || (cls == 2 && !red))
        continue;
      an->vd[d] = (int8_t)n; L->vs[n++] = an->sh[d];
    }
    if (cls == 0) L->nout = n; else if (cls == 1) L->ncv = n;
  }
  L->nv = n;
  L->col = 1;
}

/* A reduction at output map om (no R coefficient): one RED over t of its input. */
static int lower_red_col(Lower *L, JitRef ref, const LMap *om)
{
  const JitIns *r = &L->t->ins[ref];
  if (!jit_red_col(L->t, r) || L->out->nred >= CG_MAX_SCRATCH) return LW_FAIL(L, ref, JIT_LF_MAT);
  for (int d = 0; d < om->nd; d++) if (!lower_col_free(L, om->coef[d])) return LW_FAIL(L, ref, JIT_LF_MAT);
  LMap im;
  if (lower_red_inmap(L, ref, om, &im)) return -1;
  double n = lower_red_count(L->t, r);
  bool native = r->op == RT_OP_MAX || r->op == RT_OP_MIN;
  int op = r->op == RT_OP_MEAN ? RT_OP_SUM : r->op, adt = native ? r->dtype : r->cdtype;
  int x = lower_cast(L, lower_operand(L, r, 0, &im), adt);
  if (x < 0) return -1;
  L->out->nred++;
  L->redref = ref;
  int res = lower_emit(L, (CgIns){ .kind = CG_RED, .op = (int16_t)op, .dtype = (int8_t)adt, .a = x, .b = -1, .c = -1 }, 1);
  if (r->op == RT_OP_MEAN) res = lower_bin(L, RT_OP_DIV, TD_FLOAT64, res, lower_const(L, TD_FLOAT64, n));
  return lower_cast(L, res, r->dtype);
}

/* Coalesce R, C and A dims, each class on its own, into one dim each (A: any);
** else, or when an access that moves with t is strided along the columns,
** the group is lowered again in row mode (colretry), or for a big input
** (strided row kernels are slow there) run eagerly, as the scheduler did. */
#define LW_COLBIG (1 << 18)
static int lower_col_dims(Lower *L, JitRef anchor_red)
{
  for (int k = L->nv - 2; k >= L->ncv; k--) if (lower_can_merge(L, k, k + 1)) lower_merge_dim(L, k, k + 1);
  for (int k = L->ncv - 2; k >= L->nout; k--) if (lower_can_merge(L, k, k + 1)) lower_merge_dim(L, k, k + 1);
  bool unit = L->nv - L->ncv == 1 && L->ncv - L->nout == 1;
  for (int i = 0; i < L->nacc && unit; i++)   /* what moves with t streams whole columns */
    unit = !L->acc[i].a.coef[L->ncv] || L->acc[i].a.coef[L->nout] == 0 || L->acc[i].a.coef[L->nout] == 1;
  if (!unit || L->npass != 1) {
    int64_t n = 1;
    for (int k = 0; k < L->nv; k++) n *= L->vs[k];
    if (n >= LW_COLBIG) return LW_FAIL(L, anchor_red, lower_is_root(L, anchor_red) ? JIT_LF_EAGER : JIT_LF_MAT);
    L->colretry = true;
    return LW_FAIL(L, anchor_red, JIT_LF_MAT);
  }
  for (int k = L->nout - 2; k >= 0; k--) if (lower_can_merge(L, k, k + 1)) lower_merge_dim(L, k, k + 1);
  return 0;
}

/* Column-mode fields of kernel k (built as a one-pass kernel over C): the
** reduction loop, the strides along it, a scratch buffer per RED. */
static int lower_col_kernel(Lower *L, CgKernel *k)
{
  k->inner = L->vs[L->nout];
  k->cred = L->vs[L->ncv];
  k->ctile = lower_col_tile(k->inner);
  k->cblk = lower_col_blk(cg_kernel_rows(k), k->cred, k->ctile);
  for (int i = 0; i < L->nacc; i++) {
    k->acc[i].istride = L->acc[i].a.coef[L->nout];
    k->acc[i].rstride = L->acc[i].a.coef[L->ncv];
  }
  for (int i = 0; i < k->nins; i++) {
    CgIns *in = &k->ins[i];
    if (in->kind != CG_RED) continue;
    if (k->nscratch >= CG_MAX_SCRATCH || k->nbuf >= CG_MAX_BUFS)
      return LW_FAIL(L, L->roots[L->nroots - 1], L->nroots > 1 ? JIT_LF_NOMERGE : JIT_LF_EAGER);
    /* accumulators as rt_red.c: double for float sums and products, the type for max/min */
    in->acc = k->nbuf;
    k->buf_dtype[k->nbuf++] = (int8_t)(in->op == RT_OP_SUM || in->op == RT_OP_PROD ? TD_FLOAT64 : in->dtype);
    k->nscratch++;
  }
  return 0;
}
