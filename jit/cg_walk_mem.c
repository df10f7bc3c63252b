/*
** cg_walk_mem.c -- the walker's loads and stores: scalar, vector (unit
** stride of the lane type) or lane by lane, row arrays standing for a
** buffer's row, and the column sums' partials (CG_CSUM).
*/
#include "cg_walk.h"

/* -- Loads and stores ---------------------------------------------------------------- */

/* The access an instruction uses: its own, or the row array standing for its buffer. */
int w_redirect(const W *w, const CgIns *in)
{
  int b = w->k->acc[in->acc].buf;
  return w->keep[b] >= 0 && (in->kind == CG_LOAD || in->pass < w->keep[b]) ? w->k->nacc + b : in->acc;
}
static const CgAccess *w_acc(const W *w, int acc) { return acc < w->k->nacc ? &w->k->acc[acc] : &w->vacc[acc - w->k->nacc]; }

/* element i's index of access acc (i: an I64 handle, or -1 for the row base) */
static int w_index(W *w, const CgAccess *a, int acc, int i)
{
  int idx = w->base[acc];
  if (i >= 0 && a->istride) idx = op2(w, CT_I64, CG_E_ADD, idx, a->istride == 1 ? i :
                                      op2(w, CT_I64, CG_E_MUL, i, acc < w->k->nacc ? w_aist(w, acc) : hci(w, CT_I64, a->istride)));
  return idx;
}
/* scalar load of access acc at element index i (I64 handle or -1 for the row base) */
static int ld_scalar(W *w, const CgAccess *a, int acc, int i)
{
  int bt = buf_ty(w->k, a->buf), idx = w_index(w, a, acc, i);
  int v = w_new(w, bt);
  w->e->emit_load(w->e, v, bt, a->buf, idx);
  return v;
}
static void st_scalar(W *w, const CgAccess *a, int acc, int i, int val)
{
  int idx = w_index(w, a, acc, i);
  w->e->emit_store(w->e, buf_ty(w->k, a->buf), a->buf, idx, val);
}
/* a buffer value as a lane of a vector of type vt/mt (dtype dt) */
static int lane_in(W *w, int s, int dt)
{
  int et = cg_ty_elem(dt == TD_BOOL ? w->mt : w->vt);
  if (dt != TD_BOOL) return w_conv(w, s, et);
  int b = op1(w, et, CG_E_CAST, op2(w, CT_BOOL, CG_E_NE, s, hci(w, w->ty[s], 0)));
  return op2(w, et, CG_E_SUB, hci(w, et, 0), b);
}
static int lane_out(W *w, int s, int bdt)
{
  if (w->ty[s] == CT_U32 || w->ty[s] == CT_U64)   /* a mask lane */
    return op1(w, buf_ty(w->k, bdt), CG_E_CAST, op2(w, w->ty[s], CG_E_BAND, s, hci(w, w->ty[s], 1)));
  return w_conv(w, s, buf_ty(w->k, bdt));
}

int w_load(W *w, const CgIns *in)
{
  int ac = w_redirect(w, in);
  const CgAccess *a = w_acc(w, ac);
  int dt = in->dtype;
  if (w->mode == MODE_ROW || w->mode == MODE_SCALAR) {
    int s = ld_scalar(w, a, ac, w->mode == MODE_ROW ? -1 : w->hi);
    return w->k->buf_dtype[a->buf] == TD_BOOL && dt != TD_BOOL ? w_conv(w, w_tobool(w, s), dt) : w_conv(w, s, dt);
  }
  int T = w_tyof(w, dt);
  if (w->mode == MODE_VMAIN && a->istride == 1 && buf_ty(w->k, a->buf) == cg_ty_elem(T)) {
    int v = w_new(w, T);
    w->e->emit_load(w->e, v, T, a->buf, op2(w, CT_I64, CG_E_ADD, w->base[ac], w->hi));
    return v;
  }
  int tmp = var(w, T, hc(w, T, 0));
  if (w->mode == MODE_VMAIN) {
    for (int j = 0; j < w->L; j++) {
      int jj = hci(w, CT_I64, j);
      int s = ld_scalar(w, a, ac, op2(w, CT_I64, CG_E_ADD, w->hi, jj));
      w->e->emit_lane_set(w->e, tmp, jj, lane_in(w, s, dt));
    }
  } else {
    int j = var(w, CT_I64, hci(w, CT_I64, 0));
    w->e->begin_loop(w->e, j, j, w->hm, 1);
    int s = ld_scalar(w, a, ac, op2(w, CT_I64, CG_E_ADD, w->hi, j));
    w->e->emit_lane_set(w->e, tmp, j, lane_in(w, s, dt));
    w->e->end_loop(w->e);
  }
  return tmp;
}

void w_store(W *w, const CgIns *in)
{
  int ac = w_redirect(w, in);
  const CgAccess *a = w_acc(w, ac);
  int v = opnd(w, in->a), bt = buf_ty(w->k, a->buf);
  if (w->mode == MODE_ROW && w->wg) {      /* a row value: stored by the group's item 0 */
    int x = w_conv(w, v, bt);
    w->e->begin_if(w->e, op2(w, CT_BOOL, CG_E_EQ, w->lid, hci(w, CT_I64, 0)));
    st_scalar(w, a, ac, -1, x);
    w->e->end_if(w->e);
    return;
  }
  if (w->mode == MODE_ROW || w->mode == MODE_SCALAR) {
    st_scalar(w, a, ac, w->mode == MODE_ROW ? -1 : w->hi, w_conv(w, v, bt));
    return;
  }
  int T = w_tyof(w, w->k->ins[in->a].dtype);
  v = w_conv(w, v, T);
  if (w->mode == MODE_VMAIN && a->istride == 1 && bt == cg_ty_elem(T)) {
    CgEmitter *E = w->e;
    int idx = op2(w, CT_I64, CG_E_ADD, w->base[ac], w->hi);
    if (w->nt < 0 || !cg_store_nt(w->k, ac)) { E->emit_store(E, T, a->buf, idx, v); return; }
    E->begin_if(E, w->nt);                 /* loop-invariant: GCC unswitches the loop */
    E->emit_store_nt(E, T, a->buf, idx, v);
    E->end_if(E);
    E->begin_if(E, op1(w, CT_BOOL, CG_E_LNOT, w->nt));
    E->emit_store(E, T, a->buf, idx, v);
    E->end_if(E);
    return;
  }
  int tmp = var(w, T, v);
  if (w->mode == MODE_VMAIN) {
    for (int j = 0; j < w->L; j++) {
      int jj = hci(w, CT_I64, j);
      st_scalar(w, a, ac, op2(w, CT_I64, CG_E_ADD, w->hi, jj), lane_out(w, lane_get(w, tmp, jj), a->buf));
    }
  } else {
    int j = var(w, CT_I64, hci(w, CT_I64, 0));
    w->e->begin_loop(w->e, j, j, w->hm, 1);
    st_scalar(w, a, ac, op2(w, CT_I64, CG_E_ADD, w->hi, j), lane_out(w, lane_get(w, tmp, j), a->buf));
    w->e->end_loop(w->e);
  }
}

/* part[i] += a for the element's column i in this row block's partial sums
** (the n-th CSUM's: the n-th scratch buffer, of in->dtype) */
void w_csum(W *w, const CgIns *in)
{
  CgEmitter *E = w->e;
  int b = w->k->nbuf - w->k->nscratch, et = in->dtype, v = opnd(w, in->a);
  for (const CgIns *p = w->k->ins; p < in; p++) b += p->kind == CG_CSUM;
  if (w->mode == MODE_ROW || w->cs < 0) { w->rc = cg_bad_ir(w->k, "column sum outside a row pass"); return; }
  if (w->mode != MODE_VTAIL) {              /* one vector, or one element */
    int T = w->mode == MODE_VMAIN ? w_tyof(w, et) : et, idx = op2(w, CT_I64, CG_E_ADD, w->cs, w->hi), old = w_new(w, T);
    E->emit_load(E, old, T, b, idx);
    E->emit_store(E, T, b, idx, op2(w, T, CG_E_ADD, old, w_conv(w, v, T)));
    return;
  }
  int tmp = var(w, w_tyof(w, et), w_conv(w, v, w_tyof(w, et))), j = var(w, CT_I64, hci(w, CT_I64, 0));
  E->begin_loop(E, j, j, w->hm, 1);
  int idx = op2(w, CT_I64, CG_E_ADD, w->cs, op2(w, CT_I64, CG_E_ADD, w->hi, j)), old = w_new(w, et);
  E->emit_load(E, old, et, b, idx);
  E->emit_store(E, et, b, idx, op2(w, et, CG_E_ADD, old, lane_get(w, tmp, j)));
  E->end_loop(E);
}
