/*
** cl_attn.c -- scaled dot-product attention on the OpenCL device, fused
** (the op table's ATTN rows, rt_attn.c's semantics):
**   sdpa(q, k, v) = softmax(scale q k^T [+ mask]) v
** with the causal mask (query i sees keys j <= i) or a mask input: bool
** (true = takes part) or float (added to the scores), broadcast to
** (..., Tq, Tk). Nothing of size (Tq, Tk) is stored: O(T) memory.
**
** A hand kernel, as DESIGN.md allows for attention ("a fused kernel beats a
** library call"): the kernel IR has no loops over a second operand's rows
** inside a kernel (no contractions), which flash attention is. Checked by the
** strict OpenCL C spec like every printed kernel.
**
** Forward (FlashAttention): a work-group is WG query rows of one batch entry,
** a work-item one row. Keys and values come in tiles of BK rows through
** local memory, loaded by the whole group; each item keeps its query row,
** its output accumulator, and its running max m and sum l (online softmax:
** per tile the scores s_j, the new max m', then acc = acc e^(m - m') +
** sum_j e^(s_j - m') v_j, l likewise). A row whose every key is masked has
** l = 0 and gives NaN, as softmax over -inf does.
**
** Backward (FlashAttention-2, recomputing p from q and k as rt_attn.c does):
**   rows kernel: per query row, a forward pass gives lse_i = m + log l and
**     D_i = g_i . o_i, kept (scratch of 2 Tq per batch entry), then a second
**     pass over the keys gives dq_i = scale sum_j p_ij (g_i . v_j - D_i) k_j;
**   keys kernel: per key row j, over the query tiles (q, g, lse, D through
**     local memory): dv_j = sum_i p_ij g_i, dk_j = scale sum_i ds_ij q_i.
** Each result element is written by one work-item that adds in a fixed order:
** no atomics, the same bits on every run.
**
** q, k, v, g and the mask are read where they are (batch and row strides;
** the embedding dim must have stride 1, else a contiguous copy is made);
** results are contiguous ([dq, dk, dv] flat for the backward).
*/
#include "cl.h"
#include <stdio.h>
#include <string.h>

#define AT_MAXB (TD_MAX_DIMS - 2)
#define AT_MAXD 256                /* head sizes (D, Dv) kept in private arrays */
enum { AQ, AK, AV, AG, AM, AT_NOP };
/* geometry of the operands, as the kernels read it (every field 8 bytes) */
typedef struct {
  cl_long nbd, Tq, Tk, mcol;       /* batch dims, lengths, the mask's stride along keys */
  cl_long bsz[AT_MAXB];
  cl_long bst[AT_NOP][AT_MAXB];    /* batch strides of q, k, v, g, mask */
  cl_long row[AT_NOP];             /* row strides */
  cl_long off[AT_NOP];             /* element offsets */
} AttnGeo;

static const char attn_src[] =
  "typedef struct { long nbd, Tq, Tk, mcol; long bsz[6]; long bst[5][6]; long row[5]; long off[5]; } AttnGeo;\n"
  "/* element offset of batch entry b in operand x */\n"
  "inline long boff(const AttnGeo *g, int x, long b) {\n"
  "  long o = g->off[x];\n"
  "  for (int d = (int)g->nbd - 1; d >= 0; d--) { o += (b % g->bsz[d]) * g->bst[x][d]; b /= g->bsz[d]; }\n"
  "  return o;\n}\n"
  "/* the score of query i (its row qr, pre-loaded) and key row kr: masked keys are -inf */\n"
  "inline T score(const T *qr, local const T *kr, long i, long j, const AttnGeo *g, global const MT *mask, long mo,\n"
  "               T scale) {\n"
  "  T s = 0;\n"
  "  for (int d = 0; d < D; d++) s += qr[d] * kr[d];\n"
  "  s *= scale;\n"
  "#if CAUSAL\n"
  "  if (j > i) s = -INFINITY;\n"
  "#endif\n"
  "#if MASK == 1\n"
  "  if (!mask[mo + i * g->row[4] + j * g->mcol]) s = -INFINITY;\n"
  "#elif MASK == 2\n"
  "  s += (T)mask[mo + i * g->row[4] + j * g->mcol];\n"
  "#endif\n"
  "  return s;\n}\n"
  "/* keys [j0, j0 + n) of batch entry offsets ko, vo into local tiles */\n"
  "inline void load_kv(local T *ks, local T *vs, global const T *k, global const T *v, long ko, long vo, long j0,\n"
  "                    int n, const AttnGeo *g, int lid) {\n"
  "  for (int t = lid; t < n * D; t += WG) ks[t] = k[ko + (j0 + t / D) * g->row[1] + t % D];\n"
  "  for (int t = lid; t < n * DV; t += WG) vs[t] = v[vo + (j0 + t / DV) * g->row[2] + t % DV];\n"
  "}\n"
  "/* the online softmax of row i over keys [0, jend): m, l and acc (unnormalized output) */\n"
  "inline void row_pass(const T *qr, long i, bool live, long jend, local T *ks, local T *vs, global const T *k,\n"
  "                     global const T *v, long ko, long vo, global const MT *mask, long mo, const AttnGeo *g, T scale,\n"
  "                     int lid, T *pm, T *pl, T *acc) {\n"
  "  T m = -INFINITY, l = 0, s[BK];\n"
  "  for (int c = 0; c < DV; c++) acc[c] = 0;\n"
  "  for (long j0 = 0; j0 < jend; j0 += BK) {\n"
  "    int n = (int)min((long)BK, jend - j0);\n"
  "    barrier(CLK_LOCAL_MEM_FENCE);\n"
  "    load_kv(ks, vs, k, v, ko, vo, j0, n, g, lid);\n"
  "    barrier(CLK_LOCAL_MEM_FENCE);\n"
  "    if (!live) continue;\n"
  "    T mt = m;\n"
  "    for (int jj = 0; jj < n; jj++) { s[jj] = score(qr, ks + jj * D, i, j0 + jj, g, mask, mo, scale); mt = fmax(mt, s[jj]); }\n"
  "    if (mt == -INFINITY) continue;\n"
  "    T c = exp(m - mt);\n"
  "    l *= c;\n"
  "    for (int e = 0; e < DV; e++) acc[e] *= c;\n"
  "    for (int jj = 0; jj < n; jj++) {\n"
  "      T p = exp(s[jj] - mt);\n"
  "      l += p;\n"
  "      for (int e = 0; e < DV; e++) acc[e] += p * vs[jj * DV + e];\n"
  "    }\n"
  "    m = mt;\n"
  "  }\n"
  "  *pm = m; *pl = l;\n"
  "}\n"
  "/* the keys a group of query rows [i0, i0 + WG) looks at */\n"
  "inline long key_end(long i0, const AttnGeo *g) {\n"
  "#if CAUSAL\n"
  "  return min(g->Tk, i0 + WG);\n"
  "#else\n"
  "  return g->Tk;\n"
  "#endif\n"
  "}\n"
  "kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
  "void fwd(global const T *q, global const T *k, global const T *v, global const MT *mask, global T *o, long oo,\n"
  "         AttnGeo g, T scale) {\n"
  "  local T ks[BK * D], vs[BK * DV];\n"
  "  int lid = (int)get_local_id(0);\n"
  "  long nqb = (g.Tq + WG - 1) / WG, grp = (long)get_group_id(0), b = grp / nqb, i0 = (grp % nqb) * WG, i = i0 + lid;\n"
  "  bool live = i < g.Tq;\n"
  "  long qo = boff(&g, 0, b), mo = boff(&g, 4, b);\n"
  "  T qr[D], acc[DV], m, l;\n"
  "  for (int d = 0; d < D; d++) qr[d] = live ? q[qo + i * g.row[0] + d] : 0;\n"
  "  row_pass(qr, i, live, key_end(i0, &g), ks, vs, k, v, boff(&g, 1, b), boff(&g, 2, b), mask, mo, &g, scale, lid,\n"
  "           &m, &l, acc);\n"
  "  if (!live) return;\n"
  "  global T *orow = o + oo + (b * g.Tq + i) * DV;\n"
  "  for (int e = 0; e < DV; e++) orow[e] = acc[e] / l;\n"
  "}\n"
  "/* backward, per query row: lse and D into st (2 per row), dq into dq */\n"
  "kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
  "void bwd_rows(global const T *q, global const T *k, global const T *v, global const T *gr,\n"
  "              global const MT *mask, global T *dq, long oq, global T *st, AttnGeo g, T scale) {\n"
  "  local T ks[BK * D], vs[BK * DV];\n"
  "  int lid = (int)get_local_id(0);\n"
  "  long nqb = (g.Tq + WG - 1) / WG, grp = (long)get_group_id(0), b = grp / nqb, i0 = (grp % nqb) * WG, i = i0 + lid;\n"
  "  bool live = i < g.Tq;\n"
  "  long qo = boff(&g, 0, b), ko = boff(&g, 1, b), vo = boff(&g, 2, b), go = boff(&g, 3, b), mo = boff(&g, 4, b);\n"
  "  long jend = key_end(i0, &g);\n"
  "  T qr[D], grow[DV], acc[DV], m, l;\n"
  "  for (int d = 0; d < D; d++) qr[d] = live ? q[qo + i * g.row[0] + d] : 0;\n"
  "  for (int e = 0; e < DV; e++) grow[e] = live ? gr[go + i * g.row[3] + e] : 0;\n"
  "  row_pass(qr, i, live, jend, ks, vs, k, v, ko, vo, mask, mo, &g, scale, lid, &m, &l, acc);\n"
  "  T lse = m + log(l), dd = 0;\n"
  "  for (int e = 0; e < DV; e++) dd += grow[e] * (acc[e] / l);\n"
  "  T dqr[D];\n"
  "  for (int d = 0; d < D; d++) dqr[d] = 0;\n"
  "  for (long j0 = 0; j0 < jend; j0 += BK) {\n"
  "    int n = (int)min((long)BK, jend - j0);\n"
  "    barrier(CLK_LOCAL_MEM_FENCE);\n"
  "    load_kv(ks, vs, k, v, ko, vo, j0, n, &g, lid);\n"
  "    barrier(CLK_LOCAL_MEM_FENCE);\n"
  "    if (!live) continue;\n"
  "    for (int jj = 0; jj < n; jj++) {\n"
  "      T s = score(qr, ks + jj * D, i, j0 + jj, &g, mask, mo, scale);\n"
  "      if (s == -INFINITY) continue;\n"
  "      T p = exp(s - lse), dp = 0;\n"
  "      for (int e = 0; e < DV; e++) dp += grow[e] * vs[jj * DV + e];\n"
  "      T ds = p * (dp - dd);\n"
  "      for (int d = 0; d < D; d++) dqr[d] += ds * ks[jj * D + d];\n"
  "    }\n"
  "  }\n"
  "  if (!live) return;\n"
  "  long r = b * g.Tq + i;\n"
  "  for (int d = 0; d < D; d++) dq[oq + r * D + d] = scale * dqr[d];\n"
  "  st[2 * r] = lse; st[2 * r + 1] = dd;\n"
  "}\n"
  "/* backward, per key row: dk and dv, over the query rows (q, g, lse, D through local tiles) */\n"
  "kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
  "void bwd_keys(global const T *q, global const T *k, global const T *v, global const T *gr,\n"
  "              global const MT *mask, global const T *st, global T *dkv, long ok, long ov, AttnGeo g, T scale) {\n"
  "  local T qs[BK * D], gs[BK * DV], ls[2 * BK];\n"
  "  int lid = (int)get_local_id(0);\n"
  "  long nkb = (g.Tk + WG - 1) / WG, grp = (long)get_group_id(0), b = grp / nkb, j0 = (grp % nkb) * WG, j = j0 + lid;\n"
  "  bool live = j < g.Tk;\n"
  "  long qo = boff(&g, 0, b), ko = boff(&g, 1, b), vo = boff(&g, 2, b), go = boff(&g, 3, b), mo = boff(&g, 4, b);\n"
  "  T kr[D], vr[DV], dkr[D], dvr[DV];\n"
  "  for (int d = 0; d < D; d++) { kr[d] = live ? k[ko + j * g.row[1] + d] : 0; dkr[d] = 0; }\n"
  "  for (int e = 0; e < DV; e++) { vr[e] = live ? v[vo + j * g.row[2] + e] : 0; dvr[e] = 0; }\n"
  "#if CAUSAL\n"
  "  long istart = j0 / BK * BK;      /* queries before the group's first key see none of its keys */\n"
  "#else\n"
  "  long istart = 0;\n"
  "#endif\n"
  "  for (long i0 = istart; i0 < g.Tq; i0 += BK) {\n"
  "    int n = (int)min((long)BK, g.Tq - i0);\n"
  "    barrier(CLK_LOCAL_MEM_FENCE);\n"
  "    for (int t = lid; t < n * D; t += WG) qs[t] = q[qo + (i0 + t / D) * g.row[0] + t % D];\n"
  "    for (int t = lid; t < n * DV; t += WG) gs[t] = gr[go + (i0 + t / DV) * g.row[3] + t % DV];\n"
  "    for (int t = lid; t < 2 * n; t += WG) ls[t] = st[2 * (b * g.Tq + i0) + t];\n"
  "    barrier(CLK_LOCAL_MEM_FENCE);\n"
  "    if (!live) continue;\n"
  "    for (int ii = 0; ii < n; ii++) {\n"
  "      long i = i0 + ii;\n"
  "      T s = 0;\n"
  "      for (int d = 0; d < D; d++) s += qs[ii * D + d] * kr[d];\n"
  "      s *= scale;\n"
  "#if CAUSAL\n"
  "      if (j > i) continue;\n"
  "#endif\n"
  "#if MASK == 1\n"
  "      if (!mask[mo + i * g.row[4] + j * g.mcol]) continue;\n"
  "#elif MASK == 2\n"
  "      s += (T)mask[mo + i * g.row[4] + j * g.mcol];\n"
  "      if (s == -INFINITY) continue;\n"
  "#endif\n"
  "      T p = exp(s - ls[2 * ii]), dp = 0;\n"
  "      for (int e = 0; e < DV; e++) { dvr[e] += p * gs[ii * DV + e]; dp += gs[ii * DV + e] * vr[e]; }\n"
  "      T ds = p * (dp - ls[2 * ii + 1]);\n"
  "      for (int d = 0; d < D; d++) dkr[d] += ds * qs[ii * D + d];\n"
  "    }\n"
  "  }\n"
  "  if (!live) return;\n"
  "  long r = b * g.Tk + j;\n"
  "  for (int d = 0; d < D; d++) dkv[ok + r * D + d] = scale * dkr[d];\n"
  "  for (int e = 0; e < DV; e++) dkv[ov + r * DV + e] = dvr[e];\n"
  "}\n";

/* the program for these sizes and mask (WG rows per group, tiles of BK keys) */
static int attn_kernels(int dt, int D, int DV, int causal, int mask, int mdt, int wg, int bk, cl_kernel *out,
                        const char *op)
{
  char src[sizeof attn_src + 512];
  snprintf(src, sizeof src, "#define T %s\n#define MT %s\n#define D %d\n#define DV %d\n#define WG %d\n#define BK %d\n"
           "#define CAUSAL %d\n#define MASK %d\n%s", cl_type(dt), mask ? cl_type(mdt) : "uchar", D, DV, wg, bk, causal,
           mask, attn_src);
  static const char *const names[3] = { "fwd", "bwd_rows", "bwd_keys" };
  for (int i = 0; i < 3; i++) if (!(out[i] = cl_kernel_get(src, names[i], op))) return TD_ERR_DEVICE;
  return 0;
}

/* run k over groups x wg items */
static int attn_launch(cl_kernel k, int64_t groups, int wg, const char *name, const char *op)
{
  if (groups <= 0) return 0;
  size_t lw = (size_t)wg, gw = (size_t)groups * lw;
  cl_event e = NULL;
  int h = cl_prof_open(name);
  cl_int st = clEnqueueNDRangeKernel(cl_queue(), k, 1, NULL, &gw, &lw, 0, NULL, h >= 0 ? &e : NULL);
  cl_prof_close(h, e);
  return cl_check(st, op, "clEnqueueNDRangeKernel");
}

/* set kernel arguments in order: (size, pointer) pairs */
static int set_args(cl_kernel k, const char *op, int n, const size_t *sz, const void *const *p)
{
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) rc = cl_arg(k, i, sz[i], p[i], op);
  return rc;
}

int cl_kern_attn(RtCall *c, td_tensor *out)
{
  bool fwd = c->op == RT_OP_SDPA;
  const char *op = fwd ? "scaled_dot_product_attention" : "scaled_dot_product_attention backward";
  int dt = c->cdtype, nt = fwd ? 3 : 4;            /* q, k, v (, g), then the mask if any */
  int hasmask = c->nin > nt;
  if (dt != TD_FLOAT32 && dt != TD_FLOAT64)
    return rt_err(TD_ERR_DTYPE, "%s: expected float32 or float64 tensors, got %s", op, td_dtype_name(dt));
  if (dt == TD_FLOAT64 && !cl_has_fp64()) return rt_err(TD_ERR_DTYPE, "%s: the OpenCL device has no float64 (cl_khr_fp64)", op);
  td_tensor *in[AT_NOP] = { 0 };
  int n = c->in[0]->ndim, rc = 0;
  AttnGeo g;
  memset(&g, 0, sizeof g);
  g.nbd = n - 2;
  int64_t nb = 1;
  for (int d = 0; d < n - 2; d++) { g.bsz[d] = c->in[0]->sizes[d]; nb *= g.bsz[d]; }
  for (int i = 0; i < c->nin && !rc; i++) {
    int x = i < nt ? i : AM;
    td_tensor *t;
    if (x == AM) {
      /* the mask as (batch..., Tq, Tk), right-aligned: broadcast dims read stride 0 */
      t = c->in[i]; td_retain(t);
      int64_t st[TD_MAX_DIMS];
      for (int d = 0; d < n; d++) {
        int sd = d - (n - t->ndim);
        st[d] = sd >= 0 && t->sizes[sd] != 1 ? t->strides[sd] : 0;
      }
      for (int d = 0; d < n - 2; d++) g.bst[AM][d] = st[d];
      g.row[AM] = st[n - 2]; g.mcol = st[n - 1]; g.off[AM] = t->offset;
    } else {
      /* the compute dtype, read in place unless the embedding dim is strided */
      t = rt_as_dtype(c->in[i], dt);
      if (t && t->strides[n - 1] != 1 && t->sizes[n - 1] > 1) { td_tensor *y = rt_as_contig(t); td_release(t); t = y; }
      if (t) {
        for (int d = 0; d < n - 2; d++) g.bst[x][d] = t->strides[d];
        g.row[x] = t->strides[n - 2]; g.off[x] = t->offset;
      }
    }
    if (!(in[x] = t)) rc = TD_ERR_NOMEM;
  }
  int64_t D = rc ? 1 : in[AQ]->sizes[n - 1], DV = rc ? 1 : in[AV]->sizes[n - 1];
  if (!rc && (D > AT_MAXD || DV > AT_MAXD || D < 1 || DV < 1))
    rc = rt_err(TD_ERR_SHAPE, "%s: head sizes of %lld and %lld are not fused on opencl (1 to %d)", op, (long long)D,
                (long long)DV, AT_MAXD);
  if (!rc) { g.Tq = in[AQ]->sizes[n - 2]; g.Tk = in[AK]->sizes[n - 2]; }
  /* work groups: WG rows (64 on a GPU, 16 on a CPU device), tiles of BK rows
  ** as large as half the device's local memory takes (the keys kernel holds
  ** q and g rows and two numbers per row, the others k and v rows) */
  const ClLimits *L = cl_limits();
  int es = rt_dtype_size(dt), wg = L->cpu ? 16 : 64;
  while (wg > 1 && wg > L->max_wg) wg /= 2;
  int bk = wg;
  while (bk > 1 && (int64_t)bk * (D + DV + 2) * es > L->local_mem / 2) bk /= 2;
  cl_kernel ks[3];
  int mkind = hasmask ? (in[AM]->scalar_type == TD_BOOL ? 1 : 2) : 0;
  if (!rc) rc = attn_kernels(dt, (int)D, (int)DV, c->attrs.i[0] != 0, mkind, hasmask ? in[AM]->scalar_type : TD_UINT8,
                             wg, bk, ks, op);
  if (rc || out->nelem == 0) goto done;
  cl_mem qm = cl_buf(in[AQ]), km = cl_buf(in[AK]), vm = cl_buf(in[AV]), om = cl_buf(out);
  cl_mem mm = hasmask ? cl_buf(in[AM]) : qm;         /* no mask: any buffer, never read */
  cl_double sc64 = c->attrs.s[0];
  cl_float sc32 = (cl_float)c->attrs.s[0];
  size_t scn = dt == TD_FLOAT64 ? sizeof sc64 : sizeof sc32;
  const void *scp = dt == TD_FLOAT64 ? (const void *)&sc64 : (const void *)&sc32;
  int64_t qgroups = nb * ((g.Tq + wg - 1) / wg), kgroups = nb * ((g.Tk + wg - 1) / wg);
  size_t M = sizeof(cl_mem), Lg = sizeof(cl_long);
  if (fwd) {
    cl_long oo = out->offset;
    const size_t sz[] = { M, M, M, M, M, Lg, sizeof g, scn };
    const void *const pv[] = { &qm, &km, &vm, &mm, &om, &oo, &g, scp };
    rc = set_args(ks[0], op, 8, sz, pv);
    if (!rc) rc = attn_launch(ks[0], qgroups, wg, "sdpa_fwd", op);
    goto done;
  }
  /* backward: per-row lse and D in a scratch tensor (2 per query row), then
  ** dq, dk, dv into the flat result at their element offsets */
  int64_t ns = 2 * nb * g.Tq;
  td_tensor *st = cl_tensor_new(1, &ns, dt);
  if (!st) { rc = TD_ERR_NOMEM; goto done; }
  cl_mem gm = cl_buf(in[AG]), sm = cl_buf(st);
  cl_long oq = out->offset, ok = oq + in[AQ]->nelem, ov = ok + in[AK]->nelem;
  {
    const size_t sz[] = { M, M, M, M, M, M, Lg, M, sizeof g, scn };
    const void *const pv[] = { &qm, &km, &vm, &gm, &mm, &om, &oq, &sm, &g, scp };
    rc = set_args(ks[1], op, 10, sz, pv);
  }
  if (!rc) rc = attn_launch(ks[1], qgroups, wg, "sdpa_bwd_rows", op);
  if (!rc) {
    const size_t sz[] = { M, M, M, M, M, M, M, Lg, Lg, sizeof g, scn };
    const void *const pv[] = { &qm, &km, &vm, &gm, &mm, &sm, &om, &ok, &ov, &g, scp };
    rc = set_args(ks[2], op, 11, sz, pv);
  }
  if (!rc) rc = attn_launch(ks[2], kgroups, wg, "sdpa_bwd_keys", op);
  td_release(st);                 /* its buffer is reused only by commands queued after these */
done:
  for (int i = 0; i < AT_NOP; i++) td_release(in[i]);
  return rc;
}
