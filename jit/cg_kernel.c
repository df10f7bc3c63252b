/*
** cg_kernel.c -- utilities of the kernel IR (cg.h): run-time sizes, row
** counts, row arrays and non-temporal stores (derived from the IR), the hash
** and name of a kernel.
*/
#include "cg_emit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Kernel helpers ------------------------------------------------------------------- */

void cg_kernel_dims(const CgKernel *k, int64_t dims[CG_NDIMS])
{
  int64_t nblk = k->cred > 0 && k->cblk > 0 ? (k->cred + k->cblk - 1) / k->cblk : 0;
  dims[CG_DIM_N] = k->flat > 0 ? k->flat : k->cred;
  dims[CG_DIM_BLK] = k->cblk;
  dims[CG_DIM_NBLK] = nblk;
  if (k->cred <= 0 && k->nscratch > 0) {   /* row mode column sums: about 16 blocks, by the row count only */
    int64_t rows = cg_kernel_rows(k), b = (rows + 15) / 16;
    b = b < 1 ? 1 : b > CG_CSUM_BLK ? CG_CSUM_BLK : b;
    dims[CG_DIM_BLK] = b;
    dims[CG_DIM_NBLK] = (rows + b - 1) / b;
  }
  dims[CG_DIM_UNITS] = k->cred > 0 ? cg_kernel_rows(k) * nblk : 0;
  dims[CG_DIM_NT] = 0;
}

/* Row arrays. A buffer that a row kernel stores, reads back in a later pass
** and stores last (softmax keeps e = exp(x - max) in y, then scales it) keeps
** its row in between in a local array instead: the output is then written
** once, by its last store (non-temporal when big), and never read. Returns the
** pass of those last stores, or -1. Rows up to 64 KiB (on the stack). */
int cg_row_keep(const CgKernel *k, int b)
{
  if (k->cred > 0 || k->flat > 0 || k->rtgeo || b < 0 || b >= k->nbuf || k->inner < 2) return -1;
  int dt = k->buf_dtype[b];
  if ((dt != TD_FLOAT32 && dt != TD_FLOAT64) || k->inner * rt_dtype_size(dt) > (1 << 16)) return -1;
  const CgAccess *a0 = NULL;
  int last = -1, st0 = INT32_MAX, ld0 = INT32_MAX, ldi = -1;
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    if ((in->kind != CG_LOAD && in->kind != CG_STORE) || in->acc < 0 || in->acc >= k->nacc || k->acc[in->acc].buf != b)
      continue;
    const CgAccess *a = &k->acc[in->acc];
    if (in->level != 1 || a->istride != 1) return -1;
    if (!a0) a0 = a;
    else if (a->offset != a0->offset || memcmp(a->ostride, a0->ostride, sizeof a->ostride) != 0) return -1;
    if (in->kind == CG_STORE) { if (in->pass > last) last = in->pass; if (in->pass < st0) st0 = in->pass; }
    else { ldi = i; if (in->pass < ld0) ld0 = in->pass; }
  }
  if (ldi < 0 || st0 >= ld0) return -1;
  for (int i = 0; i < ldi; i++)             /* every load before the last stores */
    if (k->ins[i].kind == CG_STORE && k->ins[i].pass == last && k->acc[k->ins[i].acc].buf == b) return -1;
  return last;
}

/* a unit-stride float store whose rows start 64-byte aligned, into a buffer
** the kernel does not read back (or reads back from its row array) */
static bool nt_access(const CgKernel *k, int acc)
{
  const CgAccess *a = &k->acc[acc];
  int dt = k->buf_dtype[a->buf];
  if ((dt != TD_FLOAT32 && dt != TD_FLOAT64) || a->istride != 1) return false;
  if (cg_row_keep(k, a->buf) < 0)
    for (int i = 0; i < k->nins; i++)
      if (k->ins[i].kind == CG_LOAD && k->acc[k->ins[i].acc].buf == a->buf) return false;
  int64_t es = rt_dtype_size(dt);
  if (a->offset * es % 64) return false;
  if (k->flat > 0) return k->inner * es % 64 == 0;
  for (int d = 0; d < k->nouter; d++) if (a->ostride[d] * es % 64) return false;
  return k->inner * es >= 64;
}

/* Bytes a row writes through non-temporal stores: all of the kernel's
** element stores, or none (a loop mixing them with normal stores ran slower:
** softmax fwd+bwd 11 -> 19 ms). */
static int64_t nt_row_bytes(const CgKernel *k)
{
  int64_t n = 0;
  if (k->cred > 0) return 0;
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    if (in->kind != CG_STORE || in->level != 1) continue;
    if (in->acc < 0 || in->acc >= k->nacc) return 0;
    int keep = cg_row_keep(k, k->acc[in->acc].buf);
    if (keep >= 0 && in->pass < keep) continue;    /* into the row array */
    if (!nt_access(k, in->acc)) return 0;
    n += k->inner * rt_dtype_size(k->buf_dtype[k->acc[in->acc].buf]);
  }
  return n;
}

bool cg_store_nt(const CgKernel *k, int acc)
{
  return k->ntrow > 0 && acc >= 0 && acc < k->nacc && nt_access(k, acc);
}

int64_t cg_kernel_rows(const CgKernel *k)
{
  if (k->flat > 0) return k->inner > 0 ? (k->flat + k->inner - 1) / k->inner : 0;
  int64_t n = 1;
  for (int d = 0; d < k->nouter; d++) n *= k->osize[d];
  if (k->cred > 0 && k->ctile > 0) n *= (k->inner + k->ctile - 1) / k->ctile;   /* column tiles */
  return n;
}

#define FNV_OFF 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= FNV_PRIME; }
  return h;
}
#define FNV_FIELD(h, x) ((h) = fnv((h), &(x), sizeof (x)))

/* a kernel of run-time geometry (cg.h): its structure, not its sizes */
static uint64_t kernel_hash_rtgeo(const CgKernel *k, uint64_t h)
{
  int8_t mode = k->flat > 0 ? 1 : 0;
  FNV_FIELD(h, mode); FNV_FIELD(h, k->nargs); FNV_FIELD(h, k->nscratch);
  FNV_FIELD(h, k->nacc);
  for (int i = 0; i < k->nacc; i++) {
    const CgAccess *a = &k->acc[i];
    uint8_t ist = a->istride == 0 ? 0 : a->istride == 1 ? 1 : 2, ost = 0;
    for (int d = 0; d < k->nouter; d++) ost |= (uint8_t)((a->ostride[d] != 0) << d);
    FNV_FIELD(h, a->buf); FNV_FIELD(h, ist); FNV_FIELD(h, ost);
  }
  return h;
}

/* field by field: no padding bytes reach the hash */
static uint64_t kernel_hash(const CgKernel *k)
{
  uint64_t h = FNV_OFF;
  FNV_FIELD(h, k->nbuf);
  h = fnv(h, k->buf_dtype, k->nbuf > 0 ? (size_t)k->nbuf : 0);
  FNV_FIELD(h, k->nouter);
  if (k->rtgeo) h = kernel_hash_rtgeo(k, h ^ 0x5bd1e995u);
  else {
  /* not the run-time sizes (cg.h: osize[0], flat, cred, cblk), only the mode */
  for (int d = 1; d < k->nouter; d++) FNV_FIELD(h, k->osize[d]);
  int8_t mode = k->flat > 0 ? 1 : k->cred > 0 ? 2 : 0;
  FNV_FIELD(h, mode);
  FNV_FIELD(h, k->inner); FNV_FIELD(h, k->nargs);
  if (k->cred > 0) { FNV_FIELD(h, k->ctile); FNV_FIELD(h, k->nscratch); }
  FNV_FIELD(h, k->nacc);
  for (int i = 0; i < k->nacc; i++) {
    const CgAccess *a = &k->acc[i];
    FNV_FIELD(h, a->buf); FNV_FIELD(h, a->offset); FNV_FIELD(h, a->istride);
    if (k->cred > 0) FNV_FIELD(h, a->rstride);
    for (int d = 0; d < k->nouter; d++) FNV_FIELD(h, a->ostride[d]);
  }
  }
  FNV_FIELD(h, k->nins);
  for (int i = 0; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    FNV_FIELD(h, in->kind); FNV_FIELD(h, in->op); FNV_FIELD(h, in->dtype); FNV_FIELD(h, in->level);
    FNV_FIELD(h, in->pass); FNV_FIELD(h, in->a); FNV_FIELD(h, in->b); FNV_FIELD(h, in->c);
    FNV_FIELD(h, in->acc); FNV_FIELD(h, in->flags); FNV_FIELD(h, in->f[0]); FNV_FIELD(h, in->f[1]);
  }
  return h;
}

void cg_kernel_finish(CgKernel *k, const char *hint)
{
  /* buffer bases (cg.h): offsets relative to the smallest of the buffer's accesses
  ** (run-time geometry kernels take their offsets as arguments already) */
  for (int b = 0; b < k->nbuf && b < CG_MAX_BUFS && !k->rtgeo; b++) {
    int64_t m = -1;
    for (int i = 0; i < k->nacc; i++)
      if (k->acc[i].buf == b && (m < 0 || k->acc[i].offset < m)) m = k->acc[i].offset;
    k->buf_base[b] = m > 0 ? m : 0;
  }
  for (int i = 0; i < k->nacc; i++)
    if (k->acc[i].buf >= 0 && k->acc[i].buf < CG_MAX_BUFS) k->acc[i].offset -= k->buf_base[k->acc[i].buf];
  k->hash = kernel_hash(k);
  k->ntrow = k->rtgeo ? 0 : nt_row_bytes(k);
  char h[24] = { 0 };
  int n = 0;
  for (const char *p = hint ? hint : ""; *p && n < 40; p++)
    h[n < 23 ? n : 22] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) ? *p : '_', n++;
  h[n < 23 ? n : 23] = 0;
  snprintf(k->name, sizeof k->name, "k_%s_%016llx", n ? h : "anon", (unsigned long long)k->hash);
}

int cg_kernel_ndims(const CgKernel *k)
{
  return k->rtgeo ? CG_GEO_ACC(k->nacc) : CG_NDIMS;
}

void cg_kernel_geo(const CgKernel *k, int64_t *dims)
{
  if (!k->rtgeo) return;
  for (int d = 0; d < TD_MAX_DIMS; d++) dims[CG_GEO_OSIZE(d)] = d < k->nouter ? k->osize[d] : 1;
  dims[CG_GEO_INNER] = k->inner;
  for (int a = 0; a < k->nacc; a++) {
    const CgAccess *ac = &k->acc[a];
    int64_t *g = dims + CG_GEO_ACC(a);
    g[0] = ac->offset; g[1] = ac->istride;
    for (int d = 0; d < TD_MAX_DIMS; d++) g[2 + d] = ac->ostride[d];
  }
}

void cg_kernel_free(CgKernel *k)
{
  if (!k) return;
  free(k->acc); free(k->ins);
  k->acc = NULL; k->ins = NULL; k->nacc = k->nins = 0;
}
