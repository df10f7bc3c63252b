/*
** cg_walk.c -- the one walker over the kernel IR (cg.h), driving an emitter
** (cg_emit.h) for every printer: the kernel's checks, its hoisted constants,
** run-time sizes and geometry, the row loop (or the work groups' share of
** rows) and the row bases of every access. The rest of the walker is in the
** files cg_walk.h names.
*/

/*
** Work groups (caps.wg > 0: the OpenCL printer). The kernel runs as a grid
** of groups of wg work items instead of one call per range of rows:
** - row mode: group g takes rows r0 + g, r0 + g + G, ... (G groups); the
**   items of a group share each row: a pass's loop gives item l the vectors
**   l, l + wg, l + 2 wg, ... (consecutive items read consecutive memory), the
**   remainder vector falls to exactly one item, and each reduction ends in a
**   fixed tree over local memory (cg_walk_pass.c), so a sum's order depends
**   on the group size only, never on scheduling. Row values are computed by
**   every item alike; row-level stores by item 0. A barrier ends each pass
**   (the next pass may read what another item stored).
** - column sums in a row kernel (CG_CSUM): group g takes blocks of rows g,
**   g + G, ... and runs each block's rows in order, so a column's partial
**   has one writer: the item whose share holds that column.
** - flat mode: no rows; item i of the grid takes vectors i, i + G wg, ...
** - column mode: units and rows per group as rows are (cg_walk_col.c).
*/
#include "cg_walk.h"

/* rtgeo: read every geometry value once, at the top of the kernel */
static int w_geo_load(W *w)
{
  const CgKernel *k = w->k;
  int n = cg_kernel_ndims(k) - CG_NDIMS;
  if (!(w->geo = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1)))) return TD_ERR_NOMEM;
  for (int i = 0; i < n; i++) w->geo[i] = -1;
  for (int d = 0; d < k->nouter; d++) { w->geo[CG_GEO_OSIZE(d) - CG_NDIMS] = w_new(w, CT_I64);
    w->e->emit_dim(w->e, w->geo[CG_GEO_OSIZE(d) - CG_NDIMS], CG_GEO_OSIZE(d)); }
  int in = CG_GEO_INNER - CG_NDIMS;
  w->geo[in] = w_new(w, CT_I64);
  w->e->emit_dim(w->e, w->geo[in], CG_GEO_INNER);
  for (int a = 0; a < k->nacc; a++) {
    const CgAccess *ac = &k->acc[a];
    int base = CG_GEO_ACC(a);
    for (int f = 0; f < TD_MAX_DIMS + 2; f++) {
      bool used = f == 0 || (f == 1 && ac->istride != 0 && ac->istride != 1) || (f >= 2 && f - 2 < k->nouter && ac->ostride[f - 2]);
      if (!used) continue;
      int v = w_new(w, CT_I64);
      w->e->emit_dim(w->e, v, base + f);
      w->geo[base + f - CG_NDIMS] = v;
    }
  }
  return 0;
}

/* Row r's access bases (od: its outer index; flat mode: r's range), the
** column sums' block slot, the element count, and the row's instructions. */
static void w_row(W *w, int r, const int *od, int nout)
{
  const CgKernel *k = w->k;
  for (int a = 0; a < k->nacc; a++) {       /* row bases */
    const CgAccess *ac = &k->acc[a];
    int b = w_aoff(w, a);
    if (k->flat > 0) {
      if (ac->istride && !w->wg) b = op2(w, CT_I64, CG_E_ADD, b, op2(w, CT_I64, CG_E_MUL, r, hci(w, CT_I64, k->inner * ac->istride)));
    } else {
      for (int d = 0; d < nout; d++)
        if (ac->ostride[d]) b = op2(w, CT_I64, CG_E_ADD, b, op2(w, CT_I64, CG_E_MUL, od[d], w_aost(w, a, d)));
    }
    w->base[a] = b;
  }
  if (k->nscratch > 0)                      /* column sums: the slot of this row's block */
    w->cs = op2(w, CT_I64, CG_E_MUL, op2(w, CT_I64, CG_E_DIV, r, w->dim[CG_DIM_BLK]), w_inner(w));
  int n;
  if (k->flat > 0 && w->wg) n = w->dim[CG_DIM_N];   /* the whole range: the grid shares it */
  else {
    n = w_inner(w);
    if (k->flat > 0) {
      int t = op2(w, CT_I64, CG_E_SUB, w->dim[CG_DIM_N], op2(w, CT_I64, CG_E_MUL, r, n));
      n = w_sel(w, op2(w, CT_BOOL, CG_E_LT, t, n), t, n);
    }
  }
  for (int i = 0; i < k->nins && !w->rc; ) {
    const CgIns *in = &k->ins[i];
    if (in->kind == CG_PASS) { i = w_pass(w, i, n); continue; }
    if (in->kind != CG_CONST && in->kind != CG_ARG && in->kind != CG_ENDPASS) {
      if (in->level != 0) { w->rc = cg_bad_ir(k, "element-level instruction outside a pass"); break; }
      emit_row_ins(w, i);
    }
    i++;
  }
}

/* outer index od[] of row r (every row: groups take rows apart) */
static void w_outer_index(W *w, int r, int *od, int nout)
{
  int rem = r;
  for (int d = nout - 1; d > 0; d--) {
    int sz = w_osize(w, d);
    od[d] = op2(w, CT_I64, CG_E_MOD, rem, sz);
    rem = op2(w, CT_I64, CG_E_DIV, rem, sz);
  }
  if (nout > 0) od[0] = rem;
}

/* Work-group mode: the grid's share of rows, blocks of rows, or the flat range. */
static void w_rows_wg(W *w, int nout)
{
  const CgKernel *k = w->k;
  CgEmitter *E = w->e;
  int od[TD_MAX_DIMS] = { 0 };
  int gid = w_new(w, CT_I64), ng = w_new(w, CT_I64);
  E->emit_wgid(E, gid, CG_WG_GROUP);
  E->emit_wgid(E, ng, CG_WG_NGROUPS);
  if (k->flat > 0) {                        /* item i of the grid: vectors i, i + G wg, ... */
    w->e0 = op2(w, CT_I64, CG_E_ADD, op2(w, CT_I64, CG_E_MUL, gid, hci(w, CT_I64, w->wg)), w->lid);
    w->estep = 0;
    w->estep_h = op2(w, CT_I64, CG_E_MUL, ng, hci(w, CT_I64, w->wg));
    for (int i = 0; i < k->nins; i++)
      if (k->ins[i].kind == CG_RED || k->ins[i].kind == CG_CSUM) { w->rc = cg_bad_ir(k, "a reduction in a flat kernel"); return; }
    w_row(w, 0, od, 0);
    return;
  }
  w->e0 = w->lid;
  w->estep = w->wg;
  if (k->nscratch > 0) {                    /* column sums: whole blocks of rows per group, in order */
    int b = var(w, CT_I64, gid);
    E->begin_loop_step(E, b, gid, w->dim[CG_DIM_NBLK], ng);
    int lo = op2(w, CT_I64, CG_E_MUL, b, w->dim[CG_DIM_BLK]);
    int hi = op2(w, CT_I64, CG_E_ADD, lo, w->dim[CG_DIM_BLK]);
    hi = w_sel(w, op2(w, CT_BOOL, CG_E_LT, hi, 1), hi, 1);   /* handle 1: r1 */
    int r = var(w, CT_I64, lo);
    E->begin_loop(E, r, lo, hi, 1);
    w_outer_index(w, r, od, nout);
    w_row(w, r, od, nout);
    w_sync(w);
    E->end_loop(E);
    E->end_loop(E);
    return;
  }
  int r0 = op2(w, CT_I64, CG_E_ADD, 0, gid), r = var(w, CT_I64, r0);
  E->begin_loop_step(E, r, r0, 1, ng);
  w_outer_index(w, r, od, nout);
  w_row(w, r, od, nout);
  w_sync(w);
  E->end_loop(E);
}

/* -- The kernel -------------------------------------------------------------------- */

int cg_walk(const CgKernel *k, CgEmitter *E)
{
  W w0 = { 0 }, *w = &w0;
  const CgCaps *cp = &E->caps;
  w->k = k; w->e = E; w->caps = cp; w->vl = cp->vlanes; w->wg = cp->wg;
  w->mode = MODE_ROW; w->nt = -1; w->cs = -1; w->pair = -1; w->lid = -1;
  for (int b = 0; b < CG_MAX_BUFS; b++) w->keep[b] = -1;
  for (int t = 0; t < CT__MAX; t++) w->loc[t] = -1;
  int rc = E->begin_kernel(E, k, cp->vlanes);
  if (rc) return rc;
  w_new(w, CT_I64); w_new(w, CT_I64);     /* r0, r1 */
  int ni = k->nins > 0 ? k->nins : 1;
  w->val = malloc(ni * sizeof(int)); w->pv = malloc(ni * sizeof(int));
  w->inpass = calloc(ni, sizeof(int)); w->base = malloc((k->nacc + k->nbuf + 1) * sizeof(int));
  if (!w->val || !w->pv || !w->inpass || !w->base) { w->rc = TD_ERR_NOMEM; goto done; }
  if (w->wg && (w->wg & (w->wg - 1))) { w->rc = cg_bad_ir(k, "work groups of a size that is not a power of 2"); goto done; }
  if (k->rtgeo && k->cred > 0) { w->rc = cg_bad_ir(k, "run-time geometry in a column-mode kernel"); goto done; }
  for (int i = 0; i < k->nins; i++) w->val[i] = w->pv[i] = -1;
  for (int i = 0; i < k->nins; i++) {     /* constants and args: hoisted */
    const CgIns *in = &k->ins[i];
    if (in->kind == CG_CONST) w->val[i] = in->dtype == TD_BOOL ? op2(w, CT_BOOL, CG_E_NE, hc(w, CT_I32, in->f[0]), hc(w, CT_I32, 0))
                                                              : hc(w, in->dtype, in->f[0]);
    else if (in->kind == CG_ARG) {
      if (in->acc < 0 || in->acc >= k->nargs) { w->rc = cg_bad_ir(k, "arg index out of range"); goto done; }
      int v = w_new(w, CT_F64);
      E->emit_arg(E, v, in->acc);
      w->val[i] = w_conv(w, v, in->dtype);
    }
  }
  for (int i = 0; i < k->nacc; i++)
    if (k->acc[i].buf < 0 || k->acc[i].buf >= k->nbuf) { w->rc = cg_bad_ir(k, "access to a missing buffer"); goto done; }
  for (int i = 0, ncs = 0; i < k->nins; i++)
    if (k->ins[i].kind == CG_CSUM && (k->cred > 0 || ++ncs > k->nscratch || k->ins[i].acc < 0 || k->ins[i].acc >= k->nacc)) {
      w->rc = cg_bad_ir(k, "column sum without its scratch buffer or output");
      goto done;
    }
  for (int d = 0; d < CG_NDIMS; d++) {     /* run-time sizes: read once */
    w->dim[d] = -1;
    bool used = d == CG_DIM_N ? k->flat > 0 || k->cred > 0 : k->cred > 0 || (d == CG_DIM_BLK && k->nscratch > 0) ||
                (d == CG_DIM_NBLK && k->nscratch > 0 && w->wg);
    if (used) { w->dim[d] = w_new(w, CT_I64); E->emit_dim(E, w->dim[d], d); }
  }
  if (k->rtgeo && (w->rc = w_geo_load(w))) goto done;
  if (w->wg) { w->lid = w_new(w, CT_I64); E->emit_wgid(E, w->lid, CG_WG_LID); }
  if (k->cred > 0) { w_ckernel(w); goto done; }   /* column mode */
  for (int i = 0; i < k->nins && w->nt < 0 && cp->nt; i++)
    if (k->ins[i].kind == CG_STORE && cg_store_nt(k, k->ins[i].acc)) {
      int d = w_new(w, CT_I64);
      E->emit_dim(E, d, CG_DIM_NT);
      w->nt = op2(w, CT_BOOL, CG_E_NE, d, hci(w, CT_I64, 0));
    }
  for (int b = 0; b < k->nbuf && b < CG_MAX_BUFS && cp->row_arrays; b++)
    if ((w->keep[b] = cg_row_keep(k, b)) >= 0) {
      E->emit_row_array(E, CG_MAX_BUFS + b, buf_ty(k, b), k->inner);
      w->vacc[b] = (CgAccess){ .buf = CG_MAX_BUFS + b, .istride = 1 };
      w->base[k->nacc + b] = hci(w, CT_I64, 0);
    }
  int nout = k->flat > 0 ? 0 : k->nouter, od[TD_MAX_DIMS] = { 0 }, npass = 0;
  for (int i = 0; i < k->nins; i++) npass += k->ins[i].kind == CG_PASS;
  w->pf = nout > 0 && npass > 1 && cp->prefetch;
  if (w->wg) { w_rows_wg(w, nout); goto done; }
  if (nout > 0) {                           /* outer index of r0; osize[0] is not needed (run-time size) */
    int rem = 0;                            /* handle 0: r0 */
    for (int d = nout - 1; d > 0; d--) {
      int sz = w_osize(w, d);
      od[d] = var(w, CT_I64, op2(w, CT_I64, CG_E_MOD, rem, sz));
      rem = op2(w, CT_I64, CG_E_DIV, rem, sz);
    }
    od[0] = var(w, CT_I64, rem);
  }
  int r = var(w, CT_I64, 0);
  E->begin_loop(E, r, 0, 1, 1);
  w_row(w, r, od, nout);
  if (nout > 0) {                           /* next row's outer index */
    int d = nout - 1, depth = 0;
    for (;; d--) {
      E->emit_assign(E, od[d], op2(w, CT_I64, CG_E_ADD, od[d], hci(w, CT_I64, 1)));
      if (d == 0) break;
      E->begin_if(E, op2(w, CT_BOOL, CG_E_EQ, od[d], w_osize(w, d)));
      E->emit_assign(E, od[d], hci(w, CT_I64, 0));
      depth++;
    }
    while (depth--) E->end_if(E);
  }
  E->end_loop(E);
  if (w->nt >= 0) { E->begin_if(E, w->nt); E->emit_fence(E); E->end_if(E); }
done:
  rc = w->rc;
  int rc2 = E->end_kernel(E);
  free(w->ty); free(w->val); free(w->pv); free(w->inpass); free(w->base); free(w->geo);
  return rc ? rc : rc2;
}
