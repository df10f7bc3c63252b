/*
** cg_walk.c -- the one walker over the kernel IR (cg.h), driving an emitter
** (cg_emit.h) for every printer: the kernel's checks, its hoisted constants,
** run-time sizes, the row loop and the row bases of every access. The rest
** of the walker is in the files cg_walk.h names.
*/
#include "cg_walk.h"

/* -- The kernel -------------------------------------------------------------------- */

int cg_walk(const CgKernel *k, CgEmitter *E, int vlanes)
{
  W w0 = { 0 }, *w = &w0;
  w->k = k; w->e = E; w->vl = vlanes; w->mode = MODE_ROW; w->nt = -1; w->cs = -1; w->pair = -1;
  for (int b = 0; b < CG_MAX_BUFS; b++) w->keep[b] = -1;
  int rc = E->begin_kernel(E, k, vlanes);
  if (rc) return rc;
  w_new(w, CT_I64); w_new(w, CT_I64);     /* r0, r1 */
  int ni = k->nins > 0 ? k->nins : 1;
  w->val = malloc(ni * sizeof(int)); w->pv = malloc(ni * sizeof(int));
  w->inpass = calloc(ni, sizeof(int)); w->base = malloc((k->nacc + k->nbuf + 1) * sizeof(int));
  if (!w->val || !w->pv || !w->inpass || !w->base) { w->rc = TD_ERR_NOMEM; goto done; }
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
    bool used = d == CG_DIM_N ? k->flat > 0 || k->cred > 0 : k->cred > 0 || (d == CG_DIM_BLK && k->nscratch > 0);
    if (used) { w->dim[d] = w_new(w, CT_I64); E->emit_dim(E, w->dim[d], d); }
  }
  if (k->cred > 0) { w_ckernel(w); goto done; }   /* column mode */
  for (int i = 0; i < k->nins && w->nt < 0; i++)
    if (k->ins[i].kind == CG_STORE && cg_store_nt(k, k->ins[i].acc)) {
      int d = w_new(w, CT_I64);
      E->emit_dim(E, d, CG_DIM_NT);
      w->nt = op2(w, CT_BOOL, CG_E_NE, d, hci(w, CT_I64, 0));
    }
  for (int b = 0; b < k->nbuf && b < CG_MAX_BUFS; b++)
    if ((w->keep[b] = cg_row_keep(k, b)) >= 0) {
      E->emit_row_array(E, CG_MAX_BUFS + b, buf_ty(k, b), k->inner);
      w->vacc[b] = (CgAccess){ .buf = CG_MAX_BUFS + b, .istride = 1 };
      w->base[k->nacc + b] = hci(w, CT_I64, 0);
    }
  int nout = k->flat > 0 ? 0 : k->nouter, od[TD_MAX_DIMS], npass = 0;
  for (int i = 0; i < k->nins; i++) npass += k->ins[i].kind == CG_PASS;
  w->pf = nout > 0 && npass > 1;
  if (nout > 0) {                           /* outer index of r0; osize[0] is not needed (run-time size) */
    int rem = 0;                            /* handle 0: r0 */
    for (int d = nout - 1; d > 0; d--) {
      int sz = hci(w, CT_I64, k->osize[d]);
      od[d] = var(w, CT_I64, op2(w, CT_I64, CG_E_MOD, rem, sz));
      rem = op2(w, CT_I64, CG_E_DIV, rem, sz);
    }
    od[0] = var(w, CT_I64, rem);
  }
  int r = var(w, CT_I64, 0);
  E->begin_loop(E, r, 0, 1, 1);
  for (int a = 0; a < k->nacc; a++) {       /* row bases */
    const CgAccess *ac = &k->acc[a];
    int b = hci(w, CT_I64, ac->offset);
    if (k->flat > 0) {
      if (ac->istride) b = op2(w, CT_I64, CG_E_ADD, b, op2(w, CT_I64, CG_E_MUL, r, hci(w, CT_I64, k->inner * ac->istride)));
    } else {
      for (int d = 0; d < nout; d++)
        if (ac->ostride[d]) b = op2(w, CT_I64, CG_E_ADD, b, op2(w, CT_I64, CG_E_MUL, od[d], hci(w, CT_I64, ac->ostride[d])));
    }
    w->base[a] = b;
  }
  if (k->nscratch > 0)                      /* column sums: the slot of this row's block */
    w->cs = op2(w, CT_I64, CG_E_MUL, op2(w, CT_I64, CG_E_DIV, r, w->dim[CG_DIM_BLK]), hci(w, CT_I64, k->inner));
  int n = hci(w, CT_I64, k->inner);
  if (k->flat > 0) {
    int t = op2(w, CT_I64, CG_E_SUB, w->dim[CG_DIM_N], op2(w, CT_I64, CG_E_MUL, r, n));
    n = w_sel(w, op2(w, CT_BOOL, CG_E_LT, t, n), t, n);
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
  if (nout > 0) {                           /* next row's outer index */
    int d = nout - 1, depth = 0;
    for (;; d--) {
      E->emit_assign(E, od[d], op2(w, CT_I64, CG_E_ADD, od[d], hci(w, CT_I64, 1)));
      if (d == 0) break;
      E->begin_if(E, op2(w, CT_BOOL, CG_E_EQ, od[d], hci(w, CT_I64, k->osize[d])));
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
  free(w->ty); free(w->val); free(w->pv); free(w->inpass); free(w->base);
  return rc ? rc : rc2;
}
