/*
** cg_walk_pass.c -- the walker's passes: one loop over a row's elements
** (vector or scalar, unrolled for reductions), the reductions' accumulators
** and how they combine, prefetching the next row, and one instruction.
*/
#include "cg_walk.h"

/* -- Reductions ------------------------------------------------------------------- */

/* accumulator type of a RED in the current mode */
static int red_acct(W *w, const CgIns *in)
{
  if (w->mode == MODE_VMAIN || w->mode == MODE_VTAIL) return w->vt;
  int dt = in->dtype;
  if (in->op == RT_OP_SUM || in->op == RT_OP_PROD)
    return rt_is_float(dt) ? CT_F64 : CT_U64;
  return dt;
}
int red_neutral(W *w, const CgIns *in, int acct)
{
  int dt = in->dtype, mx = in->op == RT_OP_MAX;
  if (in->op == RT_OP_SUM) return hc(w, acct, 0);
  if (in->op == RT_OP_PROD) return hc(w, acct, 1);
  if (rt_is_float(dt)) return hc(w, acct, mx ? -INFINITY : INFINITY);
  int64_t lo = dt == TD_INT64 ? INT64_MIN : dt == TD_INT32 ? INT32_MIN : 0;
  int64_t hi = dt == TD_INT64 ? INT64_MAX : dt == TD_INT32 ? INT32_MAX : dt == TD_UINT8 ? 255 : 1;
  return hci(w, acct, mx ? lo : hi);
}
/* a (+) b as rt_red.c: a NaN in the accumulator sticks, a NaN in b is taken */
int red_comb(W *w, int op, int a, int b)
{
  int t = w->ty[a];
  switch (op) {
  case RT_OP_SUM: return op2(w, t, CG_E_ADD, a, b);
  case RT_OP_PROD: return op2(w, t, CG_E_MUL, a, b);
  case RT_OP_MAX: case RT_OP_MIN:
    if (t == CT_BOOL) return op == RT_OP_MAX ? w_or(w, a, b) : w_and(w, a, b);
    return w_sel(w, w_and(w, w_not(w, w_cmp(w, op == RT_OP_MAX ? CG_E_LE : CG_E_GE, b, a)), w_not(w, w_nan(w, a))), b, a);
  }
  return a;
}

/* Vector max/min step for NaN-free lanes: acc' = x > acc ? x : acc (min: x <
** acc), eager's R_MAX with ties keeping the accumulator, in 6 integer ops
** and no compare. For floats x != acc, d = x - acc is never 0 (gradual
** underflow) and has the comparison's sign (an overflow to inf keeps it);
** x = -0 vs acc = +0 gives d = -0, a tie, hence "d > 0 as a signed integer":
** the top bit of -d & ~d. Equal infinities give d = NaN: either side is then
** the same value. NaN lanes are tracked apart (w_ins) and win at the end. */
static int vmax_step(W *w, int op, int acc, int x)
{
  int ft = w->ty[acc], t = utype(ft), mx = op == RT_OP_MAX;
  int d = bitc(w, op2(w, ft, CG_E_SUB, mx ? x : acc, mx ? acc : x), t);
  return w_sel(w, topbit(w, op2(w, t, CG_E_BAND, op2(w, t, CG_E_SUB, hci(w, t, 0), d), op1(w, t, CG_E_BNOT, d))), x, acc);
}

/* -- Instructions -------------------------------------------------------------------- */

void w_ins(W *w, int i, int *accv, int lmask)
{
  const CgIns *in = &w->k->ins[i];
  int *dst = w->mode == MODE_ROW ? w->val : w->pv;
  if (w->phase == 1 ? in->kind == CG_CSUM : w->phase == 2 && (in->kind == CG_STORE || in->kind == CG_RED)) return;
  switch (in->kind) {
  case CG_LOAD: dst[i] = w_load(w, in); break;
  case CG_STORE: w_store(w, in); break;
  case CG_CSUM: w_csum(w, in); break;
  case CG_ALU: dst[i] = w_alu(w, in); break;
  case CG_RED: {
    if (w->mode == MODE_ROW) { w->rc = cg_bad_ir(w->k, "row-level reduction"); break; }
    int acc = accv[i], acc2 = accv[w->k->nins + i], wide = acc2 >= 0 && in->op == RT_OP_SUM;
    int vt = wide ? w->vt : w->ty[acc], v = w_conv(w, opnd(w, in->a), vt);
    if (w->mode == MODE_VTAIL) v = w_sel(w, lmask, v, red_neutral(w, in, vt));
    if (acc2 >= 0 && !wide) {     /* vector max/min: the NaN lanes' bits OR-ed into acc2 */
      w->e->emit_assign(w->e, acc, vmax_step(w, in->op, acc, v));
      w->e->emit_assign(w->e, acc2, op2(w, w->mt, CG_E_BOR, acc2, op2(w, w->mt, CG_E_BAND, bitc(w, v, w->mt), w_nan(w, v))));
      break;
    }
    if (wide && w->pair == 0) { w->stash[i] = v; break; }   /* added to the step's second vector in float32 */
    if (wide && w->pair == 1) v = op2(w, vt, CG_E_ADD, w->stash[i], v);
    if (wide) {   /* float32 lanes summed in double: the lanes converted to two float64 vectors */
      /* v + 0 (exact here: the sum starts at +0, so -0 and +0 add alike) is a
      ** use of the whole vector: without it GCC splits a loaded vector whose
      ** only uses are lane reads into 8 scalar loads, then never uses vcvtps2pd */
      int hi = acc2, h = w->L / 2, tmp = var(w, vt, op2(w, vt, CG_E_ADD, v, hc(w, vt, 0))), z = hc(w, CT_VF64, 0);
      int dv[2] = { var(w, CT_VF64, z), var(w, CT_VF64, z) };
      for (int j = 0; j < w->L; j++)
        w->e->emit_lane_set(w->e, dv[j / h], hci(w, CT_I64, j % h),
                            op1(w, CT_F64, CG_E_CAST, lane_get(w, tmp, hci(w, CT_I64, j))));
      w->e->emit_assign(w->e, acc, op2(w, CT_VF64, CG_E_ADD, acc, dv[0]));
      w->e->emit_assign(w->e, hi, op2(w, CT_VF64, CG_E_ADD, hi, dv[1]));
      break;
    }
    w->e->emit_assign(w->e, acc, red_comb(w, in->op, acc, v));
    break;
  }
  default: break;
  }
}

/* -- Passes ------------------------------------------------------------------------- */

/* Can pass [s, e) run on vectors? Sets w->fdt. */
static int pass_vec_ok(W *w, int s, int e)
{
  const CgKernel *k = w->k;
  int f = -1;
  for (int i = s; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if (in->level != 1 || in->kind == CG_CONST || in->kind == CG_ARG || in->kind == CG_STORE) continue;
    int dt = in->dtype;
    if (rt_is_float(dt)) { if (f >= 0 && f != dt) return 0; f = dt; }
    else if (dt != TD_BOOL || in->kind == CG_RED) return 0;
    if (in->kind == CG_ALU && in->op >= RT_OP_EQ && in->op <= RT_OP_GE && in->op != RT_OP_EQ && in->op != RT_OP_NE &&
        k->ins[in->a].dtype == TD_BOOL && k->ins[in->b].dtype == TD_BOOL) return 0;
  }
  for (int i = s; i < e; i++) {   /* stored element values must be of the lane types too */
    const CgIns *in = &k->ins[i];
    if (in->level == 1 && in->kind == CG_STORE && k->ins[in->a].level == 1) {
      int dt = k->ins[in->a].dtype;
      if (dt != TD_BOOL && dt != f) return 0;
    }
  }
  w->fdt = f;
  return f >= 0;
}

/* Does ins i (level 0, inside pass range (s, e)) read a reduction of the pass? */
static int reads_pass(W *w, int i, int s, int e, const char *post)
{
  const CgIns *in = &w->k->ins[i];
  int ops[3] = { in->a, in->b, in->c };
  for (int j = 0; j < 3; j++)
    if (ops[j] >= 0 && (post[ops[j]] || (ops[j] > s && ops[j] < e && w->k->ins[ops[j]].kind == CG_RED))) return 1;
  return 0;
}

void emit_row_ins(W *w, int i)
{
  int m = w->mode; w->mode = MODE_ROW; w_ins(w, i, NULL, -1); w->mode = m;
}

/* whether the kernel stores into buffer b */
static bool buf_stored(const CgKernel *k, int b)
{
  for (int i = 0; i < k->nins; i++)
    if (k->ins[i].kind == CG_STORE && k->acc[k->ins[i].acc].buf == b) return true;
  return false;
}

/* A row kernel of several passes reads its row from memory in pass 0 and from
** cache after: while pass 1 computes, the next row's loads are prefetched at
** the same column, so memory and arithmetic overlap (softmax's exp pass would
** otherwise leave the memory idle). That is the pass-0 loads, the inputs a
** later pass reads first (a backward's incoming gradient), and, for writing,
** the rows the kernel stores: a store to a line not in cache waits for it to
** be read from memory first (softmax fwd+bwd over 4096-wide rows ~15% faster
** on 2 threads). Those two only for rows of 2048 elements or more: on shorter
** ones (layer_norm's 1024) the hardware prefetcher keeps up, no gain measured. */
static void w_prefetch_next(W *w)
{
  const CgKernel *k = w->k;
  if (!w->pf) return;
  uint64_t done[4] = { 0 };          /* accesses already prefetched (the first 256) */
  bool long_rows = k->inner >= 2048;
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    if ((in->kind != CG_LOAD && in->kind != CG_STORE) || in->level != 1 || in->acc >= 256 || w_redirect(w, in) != in->acc)
      continue;
    if (in->pass != 0 && (!long_rows || (in->kind == CG_LOAD && buf_stored(k, k->acc[in->acc].buf)))) continue;
    const CgAccess *ac = &k->acc[in->acc];
    int64_t rs = ac->ostride[k->nouter - 1];
    if (ac->istride != 1 || rs == 0 || (done[in->acc / 64] >> (in->acc % 64) & 1)) continue;
    done[in->acc / 64] |= 1ull << (in->acc % 64);
    bool nt = in->kind == CG_STORE && w->nt >= 0 && cg_store_nt(k, in->acc);   /* not when it bypasses the cache */
    if (nt) w->e->begin_if(w->e, op1(w, CT_BOOL, CG_E_LNOT, w->nt));
    w->e->emit_prefetch(w->e, ac->buf, op2(w, CT_I64, CG_E_ADD, w->base[in->acc],
                                           op2(w, CT_I64, CG_E_ADD, hci(w, CT_I64, rs), w->hi)), in->kind == CG_STORE);
    if (nt) w->e->end_if(w->e);
  }
}

/* The remainder of a vector loop (w->hi < n): opens the if, enters tail mode
** (w->hm lanes valid) and returns the mask of the valid lanes for the
** reductions' neutral fill (-1 when the pass has none). The caller emits the
** body and closes the if. */
int w_tail_begin(W *w, int n, int nred)
{
  CgEmitter *E = w->e;
  int zero = hci(w, CT_I64, 0), lm = -1;
  E->begin_if(E, op2(w, CT_BOOL, CG_E_LT, w->hi, n));
  E->comment(E, "remainder: one zero-padded vector");
  w->mode = MODE_VTAIL;
  w->hm = op2(w, CT_I64, CG_E_SUB, n, w->hi);
  if (nred) {
    int j = var(w, CT_I64, zero);
    lm = var(w, w->mt, hci(w, w->mt, 0));
    E->begin_loop(E, j, zero, w->hm, 1);
    E->emit_lane_set(E, lm, j, hci(w, cg_ty_elem(w->mt), -1));
    E->end_loop(E);
  }
  return lm;
}

/* -- Work groups ------------------------------------------------------------------------ */

void w_eloop(W *w, int lo, int hi, int L)
{
  CgEmitter *E = w->e;
  if (!w->wg) { E->begin_loop(E, w->hi, lo, hi, L); return; }
  int start = op2(w, CT_I64, CG_E_MUL, w->e0, hci(w, CT_I64, L));
  if (w->estep > 0) E->begin_loop(E, w->hi, start, hi, w->estep * L);
  else E->begin_loop_step(E, w->hi, start, hi, op2(w, CT_I64, CG_E_MUL, w->estep_h, hci(w, CT_I64, L)));
}

void w_sync(W *w) { if (w->wg) w->e->emit_barrier(w->e); }

/* x, this work item's partial (a scalar), combined over the group in a fixed
** tree through local memory (items l and l + h, h = wg/2, wg/4, ..., 1): the
** result, the same for every item, from an order that only the group size
** decides. red_comb as between lanes (a NaN sticks in max/min). */
static int w_wg_reduce(W *w, int op, int x)
{
  CgEmitter *E = w->e;
  int t = w->ty[x], slot = CG_SLOT_LOCAL + t;
  if (w->loc[t] < 0) { E->emit_local_array(E, slot, t, w->wg); w->loc[t] = 1; }
  E->emit_barrier(E);                       /* the last reduction's readers are done */
  E->emit_store(E, t, slot, w->lid, x);
  E->emit_barrier(E);
  for (int h = w->wg / 2; h >= 1; h /= 2) {
    E->begin_if(E, op2(w, CT_BOOL, CG_E_LT, w->lid, hci(w, CT_I64, h)));
    int a = w_new(w, t), b = w_new(w, t);
    E->emit_load(E, a, t, slot, w->lid);
    E->emit_load(E, b, t, slot, op2(w, CT_I64, CG_E_ADD, w->lid, hci(w, CT_I64, h)));
    E->emit_store(E, t, slot, w->lid, red_comb(w, op, a, b));
    E->end_if(E);
    E->emit_barrier(E);
  }
  int r = w_new(w, t);
  E->emit_load(E, r, t, slot, hci(w, CT_I64, 0));
  return r;
}

/* the accumulators of the reductions in ins [s, e), at their neutral values
** (accv: as w_ins takes them) */
static void w_accs_new(W *w, int s, int e, int *accv)
{
  const CgKernel *k = w->k;
  int vec = w->mode == MODE_VMAIN;
  for (int i = s; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if (w->inpass[i] != 1 || in->kind != CG_RED) continue;
    int at = red_acct(w, in);
    if (vec && in->op == RT_OP_SUM && w->fdt == TD_FLOAT32) {   /* as rt_red.c: in double */
      accv[i] = var(w, CT_VF64, hc(w, CT_VF64, 0));
      accv[k->nins + i] = var(w, CT_VF64, hc(w, CT_VF64, 0));
    } else {
      accv[i] = var(w, at, red_neutral(w, in, at));
      if (vec && (in->op == RT_OP_MAX || in->op == RT_OP_MIN)) accv[k->nins + i] = var(w, w->mt, hci(w, w->mt, 0));
    }
  }
}

/* vector accumulators b combined into a, lane by lane (max/min: NaN lanes
** kept apart, their bits OR-ed, as in w_ins) */
static void w_accs_fold(W *w, int s, int e, int *a, int *b)
{
  const CgKernel *k = w->k;
  CgEmitter *E = w->e;
  for (int i = s; i < e; i++) {
    const CgIns *in = &k->ins[i];
    if (w->inpass[i] != 1 || in->kind != CG_RED) continue;
    int a2 = a[k->nins + i], b2 = b[k->nins + i];
    if (a2 >= 0 && in->op != RT_OP_SUM) {
      E->emit_assign(E, a[i], vmax_step(w, in->op, a[i], b[i]));
      E->emit_assign(E, a2, op2(w, w->mt, CG_E_BOR, a2, b2));
      continue;
    }
    E->emit_assign(E, a[i], red_comb(w, in->op, a[i], b[i]));
    if (a2 >= 0) E->emit_assign(E, a2, op2(w, w->ty[a2], CG_E_ADD, a2, b2));
  }
}

/* the body of a vector pass [s, e) at element w->hi, reductions into accv */
static void w_vbody(W *w, int s, int e, int *accv)
{
  for (int i = s + 1; i < e; i++) if (w->inpass[i] == 1) w_ins(w, i, accv, -1);
  if (w->k->ins[s].pass == 1 && w->phase != 2) w_prefetch_next(w);
}

/* The column sums of a pass that may store bypassing the cache run in a loop
** of their own over the same (cached) row, recomputing what they read: their
** partials' loads and stores in the loop of the non-temporal stores slowed it
** (W8 layer_norm fwd+bwd, 4 alternating runs: 5.8 -> 5.6 ms median). */
static bool pass_split(const W *w, int s, int e)
{
  bool st = false, cs = false;
  for (int i = s + 1; i < e; i++) {
    st |= w->k->ins[i].kind == CG_STORE && w->k->ins[i].level == 1;
    cs |= w->k->ins[i].kind == CG_CSUM;
  }
  return st && cs && w->nt >= 0;
}

/* pass beginning at ins s (a CG_PASS); returns the index after it */
int w_pass(W *w, int s, int n)
{
  const CgKernel *k = w->k;
  CgEmitter *E = w->e;
  int e = s + 1;
  while (e < k->nins && k->ins[e].kind != CG_PASS && k->ins[e].kind != CG_ENDPASS) e++;
  char *post = calloc(k->nins, 1);
  /* accv[i], accv[nins + i] (NaN lanes, or a wide sum's high half); from
  ** accv[2 nins]: the same for the second vector of an unrolled step */
  int *accv = malloc(4 * k->nins * sizeof *accv);
  if (!post || !accv) { free(post); free(accv); w->rc = TD_ERR_NOMEM; return e; }
  for (int i = 0; i < 4 * k->nins; i++) accv[i] = -1;
  int nred = 0;
  for (int i = s + 1; i < e; i++) nred += k->ins[i].kind == CG_RED;
  for (int i = s + 1; i < e; i++) w->inpass[i] = k->ins[i].level == 1 && k->ins[i].kind != CG_CONST && k->ins[i].kind != CG_ARG;
  for (int i = s + 1; i < e; i++)   /* row statements in the range: before the loop, or after if they read it */
    if (!w->inpass[i] && k->ins[i].kind != CG_CONST && k->ins[i].kind != CG_ARG) {
      if (reads_pass(w, i, s, e, post)) post[i] = 1; else emit_row_ins(w, i);
    }
  int vec = pass_vec_ok(w, s + 1, e);
  char cm[64];
  snprintf(cm, sizeof cm, "pass %d (%s)", k->ins[s].pass, vec ? "vector" : "scalar");
  E->comment(E, cm);
  if (vec) {
    w->L = w->fdt == TD_FLOAT32 ? w->vl : w->vl / 2;
    w->vt = w->fdt == TD_FLOAT32 ? CT_VF32 : CT_VF64;
    w->mt = w->fdt == TD_FLOAT32 ? CT_VU32 : CT_VU64;
  }
  w->mode = vec ? MODE_VMAIN : MODE_SCALAR;
  /* values from outside the pass, in the pass's types; hoisted loads */
  for (int i = s + 1; i < e; i++) {
    if (!w->inpass[i]) continue;
    const CgIns *in = &k->ins[i];
    int ops[3] = { in->a, in->b, in->c };
    for (int j = 0; j < 3; j++) {
      int o = ops[j];
      if (o < 0 || w->inpass[o]) continue;
      w->pv[o] = vec ? w_conv(w, w->val[o], w_tyof(w, k->ins[o].dtype)) : w->val[o];
    }
    if (in->kind == CG_LOAD && k->acc[in->acc].istride == 0) {
      int m = w->mode; w->mode = MODE_ROW;
      int sv = w_load(w, in);
      w->mode = m;
      w->pv[i] = vec ? w_conv(w, sv, w_tyof(w, in->dtype)) : sv;
      w->inpass[i] = 2;   /* hoisted */
    }
  }
  w_accs_new(w, s + 1, e, accv);
  int zero = hci(w, CT_I64, 0);
  w->hi = var(w, CT_I64, zero);
  if (vec) {
    bool unroll = nred && w->caps->unroll;
    if (unroll) {   /* two vectors a step, into two accumulator sets: two dependency chains */
      int *acc2 = accv + 2 * k->nins;
      w_accs_new(w, s + 1, e, acc2);
      /* a float32 sum in double adds the step's two vectors in float32 first:
      ** half the widening conversions, within an ulp of the pair */
      w->stash = malloc(sizeof(int) * (size_t)k->nins);
      E->begin_loop(E, w->hi, zero, op2(w, CT_I64, CG_E_SUB, n, hci(w, CT_I64, 2 * w->L - 1)), 2 * w->L);
      w->pair = w->stash ? 0 : -1;
      w_vbody(w, s, e, accv);
      int hv = w->hi;
      w->hi = op2(w, CT_I64, CG_E_ADD, hv, hci(w, CT_I64, w->L));
      w->pair = w->stash ? 1 : -1;
      w_vbody(w, s, e, acc2);
      w->pair = -1;
      free(w->stash); w->stash = NULL;
      w->hi = hv;
      E->end_loop(E);
      E->comment(E, "what is left: single vectors");
    }
    bool split = pass_split(w, s, e);
    w->phase = split ? 1 : 0;
    w_eloop(w, unroll ? w->hi : zero, op2(w, CT_I64, CG_E_SUB, n, hci(w, CT_I64, w->L - 1)), w->L);
    w_vbody(w, s, e, accv);
    E->end_loop(E);
    int lm = w_tail_begin(w, n, nred);
    for (int i = s + 1; i < e; i++) if (w->inpass[i] == 1) w_ins(w, i, accv, lm);
    E->end_if(E);
    if (split) {
      w->phase = 2;
      w->mode = MODE_VMAIN;
      E->comment(E, "column sums");
      w_eloop(w, zero, op2(w, CT_I64, CG_E_SUB, n, hci(w, CT_I64, w->L - 1)), w->L);
      w_vbody(w, s, e, accv);
      E->end_loop(E);
      w_tail_begin(w, n, 0);
      for (int i = s + 1; i < e; i++) if (w->inpass[i] == 1) w_ins(w, i, accv, -1);
      E->end_if(E);
      w->phase = 0;
    }
    if (unroll) w_accs_fold(w, s + 1, e, accv, accv + 2 * k->nins);
    w->mode = MODE_ROW;
    for (int i = s + 1; i < e; i++) {   /* lanes combined in a fixed tree */
      if (!w->inpass[i] || k->ins[i].kind != CG_RED) continue;
      int l[16] = { 0 };
      int a2 = accv[k->nins + i], wide = a2 >= 0 && k->ins[i].op == RT_OP_SUM, h2 = w->L / 2;
      int nan = a2 >= 0 && !wide ? bitc(w, a2, w->vt) : -1;   /* max/min: a lane's NaNs (bits OR-ed) win */
      for (int q = 0; q < w->L; q++) {
        l[q] = wide ? lane_get(w, accv[q < h2 ? i : k->nins + i], hci(w, CT_I64, q % h2)) : lane_get(w, accv[i], hci(w, CT_I64, q));
        if (nan >= 0) { int nq = lane_get(w, nan, hci(w, CT_I64, q)); l[q] = w_sel(w, w_nan(w, nq), nq, l[q]); }
      }
      for (int h = w->L / 2; h >= 1; h /= 2)
        for (int q = 0; q < h; q++) l[q] = red_comb(w, k->ins[i].op, l[q], l[q + h]);
      int v = w->wg ? w_wg_reduce(w, k->ins[i].op, l[0]) : l[0];
      w->val[i] = wide ? w_conv(w, v, CT_F32) : v;
    }
  } else {
    w_eloop(w, zero, n, 1);
    for (int i = s + 1; i < e; i++) if (w->inpass[i] == 1) w_ins(w, i, accv, -1);
    E->end_loop(E);
    w->mode = MODE_ROW;
    for (int i = s + 1; i < e; i++)
      if (w->inpass[i] && k->ins[i].kind == CG_RED)
        w->val[i] = w_conv(w, w->wg ? w_wg_reduce(w, k->ins[i].op, accv[i]) : accv[i], k->ins[i].dtype);
  }
  for (int i = s + 1; i < e; i++) if (post[i]) emit_row_ins(w, i);
  w_sync(w);                                /* the next pass may read what other items stored */
  for (int i = s + 1; i < e; i++) w->inpass[i] = 0;
  free(post); free(accv);
  return e;
}
