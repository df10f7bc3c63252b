/*
** rt_tile.h -- tide's float32 register tile for x86-64-v4 (AVX-512): the inner
** product of a small GEMM, for kernels that feed it their own operand layout
** (rt_convmk.c: convolution by implicit GEMM). Include it only under
** RT_ISA_V4 (rt_isa.h); GCC's vector extensions give 24 zmm accumulators.
**
**   out (FMR x FNR) = sum_k ap[k FMR + r] * b[off[k] + c],  r < FMR, c < FNR
**
** ap: the A operand packed by FMR rows (row r of column k at ap[k FMR + r]),
** so a step broadcasts FMR contiguous floats; b + off[k]: the B operand's
** row k, FNR contiguous floats read in place (any offsets: a matrix's rows
** at off[k] = k ldb, or a convolution's taps). Sums run in k order.
*/
#ifndef RT_TILE_H
#define RT_TILE_H

#define VL 16                                 /* floats per zmm */
typedef float V __attribute__((vector_size(VL * 4), aligned(4)));
#define FMR 8                                 /* tile rows (A rows) */
#define FNV 3                                 /* tile columns, in vectors */
#define FNR (FNV * VL)

/* the first n lanes of a vector (n <= 0: none, n >= VL: all) */
static inline __mmask16 tile_lanes(int64_t n) { return n >= VL ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* acc (FMR x FNV vectors) = the tile's sums; the caller stores them */
static inline __attribute__((always_inline)) void tile_acc(int64_t K, const float *restrict ap, const float *restrict b,
                                                           const int64_t *restrict off, V acc[FMR][FNV])
{
  for (int r = 0; r < FMR; r++) for (int v = 0; v < FNV; v++) acc[r][v] = (V){ 0 };
  /* unrolled: the loop's index and pointer updates otherwise take FMA ports (2-3.5% here) */
#pragma GCC unroll 8
  for (int64_t k = 0; k < K; k++) {
    const float *bk = b + off[k], *a = ap + k * FMR;
    V bv[FNV];
    for (int v = 0; v < FNV; v++) bv[v] = *(const V *)(bk + v * VL);
    for (int r = 0; r < FMR; r++) for (int v = 0; v < FNV; v++) acc[r][v] += a[r] * bv[v];
  }
}

static inline __attribute__((always_inline)) void tile_fwd(int64_t K, const float *restrict ap, const float *restrict b,
                                                           const int64_t *restrict off, float *restrict out)
{
  V acc[FMR][FNV];
  tile_acc(K, ap, b, off, acc);
  for (int r = 0; r < FMR; r++) for (int v = 0; v < FNV; v++) *(V *)(out + r * FNR + v * VL) = acc[r][v];
}

#endif
