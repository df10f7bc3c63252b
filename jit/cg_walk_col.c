/*
** cg_walk_col.c -- the walker's pass of a column-mode kernel (cg.h):
** reductions over an outer dim, in two phases (partials per block of steps,
** then the blocks in order).
*/
#include "cg_walk.h"

/*
** Loop order. For each reduction step t, one unit-stride vector loop over the
** tile's columns folds into per-column accumulators in scratch memory (a
** float32 sum: its L lanes widened into two float64 vectors, as rt_red.c sums
** in double); then one scalar loop over the columns reads the accumulators and
** finishes (mean's division, pointwise consumers, stores). The input streams
** row by row, ctile columns at a time. Each column folds t = 0, 1, ... in
** order in one thread, so results do not depend on the thread count.
** Per element instruction: CP_T = depends on t (an access with rstride != 0,
** or an operand), CP_I = depends on the column. T-only values (per-row
** statistics: a loaded mean, rsqrt(var + eps)) are scalars, once per t.
*/

enum { CP_T = 1, CP_I = 2, CP_LOOP = 4, CP_EPI = 8 };

/* Is ins o an element value of the pass beginning at s? */
static int cp_elem(const CgKernel *k, int o, int s)
{
  return o > s && k->ins[o].level == 1 && k->ins[o].kind != CG_CONST && k->ins[o].kind != CG_ARG;
}

/* Flags of pass (s, e); -1 when a value that depends on t reads a RED. */
static int cp_classify(const CgKernel *k, int s, int e, char *fl)
{
  for (int i = s + 1; i < e; i++) {
    const CgIns *in = &k->ins[i];
    fl[i] = 0;
    if (!cp_elem(k, i, s)) continue;
    if (in->kind == CG_LOAD || in->kind == CG_STORE)
      fl[i] |= (k->acc[in->acc].rstride ? CP_T : 0) | (k->acc[in->acc].istride ? CP_I : 0);
    int ops[3] = { in->a, in->b, in->c };
    for (int j = 0; j < 3; j++) if (ops[j] >= 0 && cp_elem(k, ops[j], s)) fl[i] |= fl[ops[j]] & (CP_T | CP_I);
    if (in->kind == CG_RED) fl[i] = CP_I;   /* per column, not per t */
  }
  for (int i = e - 1; i > s; i--) {         /* what the t loop and the final loop compute */
    const CgIns *in = &k->ins[i];
    if (!cp_elem(k, i, s)) continue;
    if ((fl[i] & CP_T) || in->kind == CG_RED) fl[i] |= CP_LOOP;
    if (in->kind == CG_STORE && !(fl[i] & CP_T)) fl[i] |= CP_EPI;
    int ops[3] = { in->a, in->b, in->c };
    for (int j = 0; j < 3; j++) {
      int o = ops[j];
      if (o < 0 || !cp_elem(k, o, s)) continue;
      if ((fl[i] & CP_LOOP) && k->ins[o].kind == CG_RED) return -1;
      fl[o] |= fl[i] & (k->ins[o].kind == CG_RED ? 0 : CP_LOOP | CP_EPI);
    }
  }
  return 0;
}

/* Can the vector loop (CP_LOOP | CP_I) run on vectors? As pass_vec_ok; sets w->fdt. */
static int cp_vec_ok(W *w, int s, int e, const char *fl)
{
  const CgKernel *k = w->k;
  int f = -1;
  for (int i = s + 1; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if ((fl[i] & (CP_LOOP | CP_I)) != (CP_LOOP | CP_I)) continue;
    int dt = in->kind == CG_STORE ? k->ins[in->a].dtype : in->dtype;
    if (rt_is_float(dt)) { if (f >= 0 && f != dt) return 0; f = dt; }
    else if (dt != TD_BOOL || in->kind == CG_RED) return 0;
    if (in->kind == CG_ALU && in->op >= RT_OP_LT && in->op <= RT_OP_GE &&
        k->ins[in->a].dtype == TD_BOOL && k->ins[in->b].dtype == TD_BOOL) return 0;
  }
  w->fdt = f;
  return f >= 0;
}

/* acc[sb + i..] (+)= operand of RED `in`, in the current mode (a tail: neutral lanes >= m) */
static void cp_red(W *w, const CgIns *in, int lm, int sb)
{
  int buf = in->acc, at = buf_ty(w->k, buf), idx = op2(w, CT_I64, CG_E_ADD, sb, w->hi);
  if (w->mode == MODE_SCALAR) {
    int a = w_new(w, at);
    w->e->emit_load(w->e, a, at, buf, idx);
    w->e->emit_store(w->e, at, buf, idx, red_comb(w, in->op, a, w_conv(w, opnd(w, in->a), at)));
    return;
  }
  int vt = w->vt, v = w_conv(w, opnd(w, in->a), vt);
  if (w->mode == MODE_VTAIL) v = w_sel(w, lm, v, red_neutral(w, in, vt));
  if (at == cg_ty_elem(vt)) {
    int a = w_new(w, vt);
    w->e->emit_load(w->e, a, vt, buf, idx);
    w->e->emit_store(w->e, vt, buf, idx, red_comb(w, in->op, a, v));
    return;
  }
  /* float32 lanes into float64 partials, two vectors of L/2. A sum's v + 0
  ** (exact: partials start at +0) keeps a loaded vector whole for GCC, which
  ** then converts with vcvtps2pd instead of eight scalar loads (as w_ins) */
  if (in->op == RT_OP_SUM) v = op2(w, vt, CG_E_ADD, v, hc(w, vt, 0));
  int h = w->L / 2, tmp = var(w, vt, v), z = hc(w, CT_VF64, 0);
  int dv[2] = { var(w, CT_VF64, z), var(w, CT_VF64, z) };
  for (int j = 0; j < w->L; j++) {
    int x = op1(w, CT_F64, CG_E_CAST, lane_get(w, tmp, hci(w, CT_I64, j)));
    w->e->emit_lane_set(w->e, dv[j / h], hci(w, CT_I64, j % h), x);
  }
  for (int q = 0; q < 2; q++) {
    int ix = q ? op2(w, CT_I64, CG_E_ADD, idx, hci(w, CT_I64, h)) : idx, a = w_new(w, CT_VF64);
    w->e->emit_load(w->e, a, CT_VF64, buf, ix);
    w->e->emit_store(w->e, CT_VF64, buf, ix, red_comb(w, in->op, a, dv[q]));
  }
}

static void cp_body(W *w, int s, int e, const char *fl, int lm, int sb)
{
  for (int i = s + 1; i < e; i++) {
    if ((fl[i] & (CP_LOOP | CP_I)) != (CP_LOOP | CP_I)) continue;
    if (w->k->ins[i].kind == CG_RED) cp_red(w, &w->k->ins[i], lm, sb);
    else w_ins(w, i, NULL, -1);
  }
}

/* Row `row` (outer index x column tile): access bases, the row statements;
** returns the tile's column count. stores: also level-0 stores. */
static int cp_row(W *w, int row, int stores)
{
  const CgKernel *k = w->k;
  int64_t ntile = (k->inner + k->ctile - 1) / k->ctile;
  int nt = hci(w, CT_I64, ntile), tl = op2(w, CT_I64, CG_E_MOD, row, nt), rem = op2(w, CT_I64, CG_E_DIV, row, nt);
  int od[TD_MAX_DIMS];
  for (int d = k->nouter - 1; d > 0; d--) {   /* osize[0]: a run-time size, not needed */
    int sz = hci(w, CT_I64, k->osize[d]);
    od[d] = op2(w, CT_I64, CG_E_MOD, rem, sz);
    rem = op2(w, CT_I64, CG_E_DIV, rem, sz);
  }
  od[0] = rem;
  int c0 = op2(w, CT_I64, CG_E_MUL, tl, hci(w, CT_I64, k->ctile));
  for (int a = 0; a < k->nacc; a++) {
    const CgAccess *ac = &k->acc[a];
    int b = hci(w, CT_I64, ac->offset);
    for (int d = 0; d < k->nouter; d++)
      if (ac->ostride[d]) b = op2(w, CT_I64, CG_E_ADD, b, op2(w, CT_I64, CG_E_MUL, od[d], hci(w, CT_I64, ac->ostride[d])));
    if (ac->istride) b = op2(w, CT_I64, CG_E_ADD, b, op2(w, CT_I64, CG_E_MUL, c0, hci(w, CT_I64, ac->istride)));
    w->base[a] = b;
  }
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    if (in->level == 0 && in->kind != CG_CONST && in->kind != CG_ARG && in->kind != CG_PASS &&
        in->kind != CG_ENDPASS && (stores || in->kind != CG_STORE)) emit_row_ins(w, i);
  }
  int t = op2(w, CT_I64, CG_E_SUB, hci(w, CT_I64, k->inner), c0), ct = hci(w, CT_I64, k->ctile);
  return w_sel(w, op2(w, CT_BOOL, CG_E_LT, t, ct), t, ct);
}

/* Phase 1 of unit u: fold steps [t0, t1) of pass (s, e) into slot u (scratch offset sb). */
static void cp_fold(W *w, int s, int e, const char *fl, int *b0, int n, int t0, int t1, int sb)
{
  const CgKernel *k = w->k;
  CgEmitter *E = w->e;
  int zero = hci(w, CT_I64, 0), nred = 0;
  for (int i = s + 1; i < e; i++) {         /* partials: the neutral element */
    const CgIns *in = &k->ins[i];
    if (in->kind != CG_RED) continue;
    int at = buf_ty(k, in->acc), j = var(w, CT_I64, zero);
    E->begin_loop(E, j, w->wg ? w->lid : zero, hci(w, CT_I64, k->ctile), w->wg ? w->wg : 1);   /* work groups: shared */
    E->emit_store(E, at, in->acc, op2(w, CT_I64, CG_E_ADD, sb, j), red_neutral(w, in, at));
    E->end_loop(E);
    nred++;
  }
  w_sync(w);                                /* a column's partial: another item writes it next */
  int vec = cp_vec_ok(w, s, e, fl);
  char cm[64];
  snprintf(cm, sizeof cm, "pass %d (column partials, %s)", k->ins[s].pass, vec ? "vector" : "scalar");
  E->comment(E, cm);
  if (vec) {
    w->L = w->fdt == TD_FLOAT32 ? w->vl : w->vl / 2;
    w->vt = w->fdt == TD_FLOAT32 ? CT_VF32 : CT_VF64;
    w->mt = w->fdt == TD_FLOAT32 ? CT_VU32 : CT_VU64;
  }
  /* for t: bases of the accesses that move with t, then the t-only values */
  int t = var(w, CT_I64, t0);
  E->begin_loop(E, t, t0, t1, 1);
  for (int a = 0; a < k->nacc; a++) {
    b0[a] = w->base[a];
    if (k->acc[a].rstride)
      w->base[a] = op2(w, CT_I64, CG_E_ADD, b0[a], op2(w, CT_I64, CG_E_MUL, t, hci(w, CT_I64, k->acc[a].rstride)));
  }
  for (int i = s + 1; i < e; i++) if ((fl[i] & (CP_LOOP | CP_I)) == CP_LOOP) emit_row_ins(w, i);
  w->mode = vec ? MODE_VMAIN : MODE_SCALAR;
  for (int i = s + 1; i < e; i++) {         /* values from outside the column loop, in its types */
    if ((fl[i] & (CP_LOOP | CP_I)) != (CP_LOOP | CP_I)) continue;
    int ops[3] = { k->ins[i].a, k->ins[i].b, k->ins[i].c };
    for (int j = 0; j < 3; j++) {
      int o = ops[j];
      if (o >= 0 && !(cp_elem(k, o, s) && (fl[o] & CP_I)))
        w->pv[o] = vec ? w_conv(w, w->val[o], w_tyof(w, k->ins[o].dtype)) : w->val[o];
    }
  }
  w->hi = var(w, CT_I64, zero);
  if (vec) {
    w_eloop(w, zero, op2(w, CT_I64, CG_E_SUB, n, hci(w, CT_I64, w->L - 1)), w->L);
    cp_body(w, s, e, fl, -1, sb);
    E->end_loop(E);
    int lm = w_tail_begin(w, n, nred);
    cp_body(w, s, e, fl, lm, sb);
    E->end_if(E);
  } else {
    w_eloop(w, zero, n, 1);
    cp_body(w, s, e, fl, -1, sb);
    E->end_loop(E);
  }
  E->end_loop(E);
  w->mode = MODE_ROW;
  for (int a = 0; a < k->nacc; a++) w->base[a] = b0[a];
}

/* Phase 2 of row `row`: partials of blocks 1.. folded into slot row*nblk (at
** sb) in block order, then the column results. nb: the block count (a
** run-time size: the loop is there even when it runs no iteration). */
static void cp_finish(W *w, int s, int e, const char *fl, int n, int sb, int nb)
{
  const CgKernel *k = w->k;
  CgEmitter *E = w->e;
  int zero = hci(w, CT_I64, 0);
  w->mode = MODE_SCALAR;
  for (int i = s + 1; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if (in->kind != CG_RED) continue;
    int at = buf_ty(k, in->acc), b = var(w, CT_I64, hci(w, CT_I64, 1));
    E->begin_loop(E, b, b, nb, 1);
    int pb = op2(w, CT_I64, CG_E_ADD, sb, op2(w, CT_I64, CG_E_MUL, b, hci(w, CT_I64, k->ctile)));
    w->hi = var(w, CT_I64, zero);
    w_eloop(w, zero, n, 1);
    int ia = op2(w, CT_I64, CG_E_ADD, sb, w->hi), ib = op2(w, CT_I64, CG_E_ADD, pb, w->hi);
    int x = w_new(w, at), y = w_new(w, at);
    E->emit_load(E, x, at, in->acc, ia);
    E->emit_load(E, y, at, in->acc, ib);
    E->emit_store(E, at, in->acc, ia, red_comb(w, in->op, x, y));
    E->end_loop(E);
    E->end_loop(E);
  }
  E->comment(E, "column results");
  w->hi = var(w, CT_I64, zero);
  w_eloop(w, zero, n, 1);
  for (int i = s + 1; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if (!(fl[i] & CP_EPI)) continue;
    int ops[3] = { in->a, in->b, in->c };
    for (int j = 0; j < 3; j++) {
      int o = ops[j];
      if (o >= 0 && !cp_elem(k, o, s)) w->pv[o] = w->val[o];
      else if (o >= 0 && k->ins[o].kind == CG_RED) {
        int at = buf_ty(k, k->ins[o].acc), a = w_new(w, at);
        E->emit_load(E, a, at, k->ins[o].acc, op2(w, CT_I64, CG_E_ADD, sb, w->hi));
        w->pv[o] = w_conv(w, a, k->ins[o].dtype);
      }
    }
    w_ins(w, i, NULL, -1);
  }
  E->end_loop(E);
  w->mode = MODE_ROW;
}

/* The body of a column-mode kernel (cg_walk's row loop): one pass, two phases. */
void w_ckernel(W *w)
{
  const CgKernel *k = w->k;
  CgEmitter *E = w->e;
  int s = 0;
  while (s < k->nins && k->ins[s].kind != CG_PASS) s++;
  int e = s + 1;
  while (e < k->nins && k->ins[e].kind != CG_ENDPASS) e++;
  char *fl = calloc(k->nins + 1, 1);
  int *b0 = malloc((k->nacc + 1) * sizeof *b0);
  if (!fl || !b0) { w->rc = TD_ERR_NOMEM; goto done; }
  if (s >= k->nins || k->ctile <= 0 || k->cblk <= 0) {
    w->rc = cg_bad_ir(k, "column kernel without its pass or tile");
    goto done;
  }
  if (cp_classify(k, s, e, fl)) {
    w->rc = cg_bad_ir(k, "column pass: a value per reduction step reads a RED");
    goto done;
  }
  for (int i = s + 1; i < e; i++)
    if (k->ins[i].kind == CG_RED && (k->ins[i].acc < k->nbuf - k->nscratch || k->ins[i].acc >= k->nbuf)) {
      w->rc = cg_bad_ir(k, "column RED without scratch");
      goto done;
    }
  /* cred, cblk, the block count and the unit count rows * nblk are run-time sizes */
  int n1 = w->dim[CG_DIM_UNITS], nb = w->dim[CG_DIM_NBLK];
  int r = var(w, CT_I64, 0), ct = hci(w, CT_I64, k->ctile), r0 = 0, ng = -1;
  if (w->wg) {                              /* work groups: units (rows) r0 + g, r0 + g + G, ... */
    int gid = w_new(w, CT_I64);
    ng = w_new(w, CT_I64);
    E->emit_wgid(E, gid, CG_WG_GROUP);
    E->emit_wgid(E, ng, CG_WG_NGROUPS);
    r0 = op2(w, CT_I64, CG_E_ADD, 0, gid);
    w->e0 = w->lid; w->estep = w->wg;
  }
  E->begin_if(E, op2(w, CT_BOOL, CG_E_LT, 0, n1));
  if (w->wg) E->begin_loop_step(E, r, r0, 1, ng);
  else E->begin_loop(E, r, 0, 1, 1);        /* phase 1: unit r = (row r / nblk, block r % nblk) */
  {
    int n = cp_row(w, op2(w, CT_I64, CG_E_DIV, r, nb), 0);
    int t0 = op2(w, CT_I64, CG_E_MUL, op2(w, CT_I64, CG_E_MOD, r, nb), w->dim[CG_DIM_BLK]);
    int t1 = op2(w, CT_I64, CG_E_ADD, t0, w->dim[CG_DIM_BLK]), rc = w->dim[CG_DIM_N];
    t1 = w_sel(w, op2(w, CT_BOOL, CG_E_LT, t1, rc), t1, rc);
    cp_fold(w, s, e, fl, b0, n, t0, t1, op2(w, CT_I64, CG_E_MUL, r, ct));
    w_sync(w);
  }
  E->end_loop(E);
  E->end_if(E);
  E->begin_if(E, op2(w, CT_BOOL, CG_E_GE, 0, n1));
  if (w->wg) E->begin_loop_step(E, r, r0, 1, ng);
  else E->begin_loop(E, r, 0, 1, 1);        /* phase 2: row r - n1 */
  {
    int row = op2(w, CT_I64, CG_E_SUB, r, n1);
    int n = cp_row(w, row, 1);
    cp_finish(w, s, e, fl, n, op2(w, CT_I64, CG_E_MUL, op2(w, CT_I64, CG_E_MUL, row, nb), ct), nb);
    w_sync(w);
  }
  E->end_loop(E);
  E->end_if(E);
done:
  free(fl); free(b0);
}
