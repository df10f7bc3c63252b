/*
** rt_isa.h -- one source, three instruction sets. A hot kernel file
** (RT_ISA_FILES in the Makefile) is compiled three times: for baseline x86-64
** (SSE2), with -DRT_ISA_V3 for x86-64-v3 (AVX2, FMA) and with -DRT_ISA_V4 for
** x86-64-v4 (AVX-512). Its kernel entry points are named through RT_ISA_FN
** (rt_kern_ew_base, rt_kern_ew_v3, rt_kern_ew_v4); code every variant would
** repeat (meta rules, geometry) sits under `#if RT_ISA_SHARED` and is compiled
** once. rt_isa.c declares the entries (RT_ISA_ENTRIES) and routes each call to
** the variant chosen when the library loads (the CPU, or TIDE_ISA).
*/
#ifndef RT_ISA_H
#define RT_ISA_H

#if defined(RT_ISA_V4)
#define RT_ISA_FN(f) f##_v4
#define RT_ISA_SHARED 0
#elif defined(RT_ISA_V3)
#define RT_ISA_FN(f) f##_v3
#define RT_ISA_SHARED 0
#else
#define RT_ISA_FN(f) f##_base
#define RT_ISA_SHARED 1
#endif

/* _(return type, name, parameters, arguments): every entry point with variants */
#define RT_ISA_ENTRIES(_) \
  _(int, rt_kern_ew, (RtCall *c, td_tensor *out), (c, out)) \
  _(td_tensor *, rt_ew_grad, (int op, int flags, const td_tensor *g, const td_tensor *v, double y), \
    (op, flags, g, v, y)) \
  _(int, rt_kern_red, (RtCall *c, td_tensor *out), (c, out)) \
  _(int, rt_kern_row, (RtCall *c, td_tensor *out), (c, out)) \
  _(int, rt_cumsum_lines, (td_tensor *x, td_tensor *y, int64_t lines, int64_t n), (x, y, lines, n)) \
  _(int, rt_norm_run, (RtNormJob *j), (j)) \
  _(int, rt_ctc_forward, (RtCtcJob *j), (j)) \
  _(int, rt_ctc_backward, (RtCtcJob *j), (j)) \
  _(int, rt_kern_sdpa, (RtCall *c, td_tensor *out), (c, out)) \
  _(int, rt_kern_sdpa_backward, (RtCall *c, td_tensor *out), (c, out)) \
  _(int, rt_kern_unfold, (RtCall *c, td_tensor *out), (c, out)) \
  _(int, rt_kern_fold, (RtCall *c, td_tensor *out), (c, out)) \
  _(int, rt_conv_run, (RtConvJob *j), (j)) \
  _(int, rt_mm_tile, (const RtMmTile *j), (j)) \
  _(int, rt_bmm_tile, (const RtBmmTile *j), (j)) \
  _(int, rt_adam_step, (td_tensor *p, td_tensor *g, td_tensor *m, td_tensor *v, td_tensor *vmax, \
                        const double *hp, int flags), (p, g, m, v, vmax, hp, flags))

/* Streaming (non-temporal) stores for large results written row by row. A
** plain store first reads its line (the CPU must own it), so writing a result
** into a block that left the caches moves its bytes twice; a loop that drops
** its results (freed by Lua's collector, not at once) writes into such blocks:
** layer_norm's forward on (8192, 1024) took 2.3-3.0 ms with 3-6 results alive
** against 1.7 with one, and 1.7-1.9 streamed either way. But a streamed
** result is not in the caches for its consumer either: a chain of ops whose
** results are freed at once ran 40-50% slower streamed. So results of
** RT_STREAM_MIN bytes or more are streamed only into a block the allocator
** knows is cold (rt_cold: unused while more than 48 MiB and twice its size of
** other blocks were handed out, runtime/rt_storage.c), when their rows start
** on a vector boundary (TIDE_STREAM=0: never). RT_STREAM_ROW(y, n, EXPR)
** stores EXPR (over i) for i in [0, n) to y, n a multiple of the vector;
** rt_stream_end() orders the streamed stores before the thread reports its
** work done. */
#include <immintrin.h>
#define RT_STREAM_MIN ((int64_t)16 << 20)
extern int rt_stream_on;
#if defined(RT_ISA_V4)
#define RT_VEC_BYTES 64
static inline void rt_stream_vf(float *p, const float *a) { _mm512_stream_ps(p, _mm512_load_ps(a)); }
static inline void rt_stream_vd(double *p, const double *a) { _mm512_stream_pd(p, _mm512_load_pd(a)); }
#elif defined(RT_ISA_V3)
#define RT_VEC_BYTES 32
static inline void rt_stream_vf(float *p, const float *a) { _mm256_stream_ps(p, _mm256_load_ps(a)); }
static inline void rt_stream_vd(double *p, const double *a) { _mm256_stream_pd(p, _mm256_load_pd(a)); }
#else
#define RT_VEC_BYTES 16
static inline void rt_stream_vf(float *p, const float *a) { _mm_stream_ps(p, _mm_load_ps(a)); }
static inline void rt_stream_vd(double *p, const double *a) { _mm_stream_pd(p, _mm_load_pd(a)); }
#endif
/* A kernel's result of `total` bytes in rows of `row` bytes from y (NULL and
** 0: the kernel aligns its streamed stores itself), into a cold block or not:
** streamed? (Asked once per kernel call: it counts them.) */
static inline bool rt_stream_rows(bool cold, const void *y, int64_t total, int64_t row)
{
  bool on = cold && rt_stream_on && total >= RT_STREAM_MIN && (uintptr_t)y % RT_VEC_BYTES == 0 && row % RT_VEC_BYTES == 0;
  if (on) __atomic_add_fetch(&rt_streamed, 1, __ATOMIC_RELAXED);
  return on;
}
#define RT_STREAM_ROW(y, n, EXPR) do { \
  enum { L_ = RT_VEC_BYTES / sizeof *(y) }; \
  __typeof__(*(y)) t_[L_] __attribute__((aligned(RT_VEC_BYTES))); \
  for (int64_t i0_ = 0; i0_ < (n); i0_ += L_) { \
    for (int k_ = 0; k_ < L_; k_++) { int64_t i = i0_ + k_; t_[k_] = (EXPR); } \
    _Generic((y), float *: rt_stream_vf, double *: rt_stream_vd)((y) + i0_, t_); } } while (0)
/* y[i] = EXPR for i in [0, n): streamed when nt, plain stores otherwise */
#define RT_STORE_ROW(nt, y, n, EXPR) do { \
  if (nt) RT_STREAM_ROW(y, n, EXPR); else for (int64_t i = 0; i < (n); i++) (y)[i] = (EXPR); } while (0)
static inline void rt_stream_end(void) { _mm_sfence(); }

/* 16-lane blocks in GCC's vector extension: one AVX-512 register, two AVX2 or
** four SSE ones, the same arithmetic in each variant (FMA contraction aside).
** The helpers are static inline, so -Wpsabi's note (a 64-byte vector passed
** without AVX-512 changes the calling convention) concerns no real call: the
** Makefile turns it off for these files. */
typedef float rt_vf16 __attribute__((vector_size(64)));
typedef float rt_vf16u __attribute__((vector_size(64), aligned(4)));   /* a block at any float's address */
typedef int32_t rt_vi16 __attribute__((vector_size(64)));
typedef double rt_vd8 __attribute__((vector_size(64)));

/* exp(x) of a block of x <= 0 (a value minus its row's max), inline: the
** generated kernels' float polynomial (Cody-Waite reduction by ln 2, degree-5
** polynomial; ~1 ulp). rt_vexp_poly gives e = exp(r) and z, whose low
** mantissa bits hold n (x = n ln 2 + r). rt_vexpneg_f32 adds n to the exponent
** bits; a block with a lane below -86 (results near or below 2^-126) applies
** 2^n as two factors 2^(n/2) instead, so results in the subnormal range round
** once like libm's (the same bits where both are normal); below -104 (and
** -inf) it gives 0, NaN stays NaN. rt_vexpneg_f32_ftz adds n to the exponent
** bits in every block and flushes x < -86 to 0 (results below 5e-38): no test
** a block, 6% of the attention kernel's time. */
static inline rt_vf16 rt_vexp_poly(rt_vf16 x, rt_vf16 *z)
{
  *z = x * 1.44269502f + 12582912.0f;                             /* 1.5 * 2^23: round to an integer */
  rt_vf16 n = *z - 12582912.0f;
  rt_vf16 r = x - n * 0.693145752f - n * 1.42860677e-06f;
  rt_vf16 p = ((((1.98527618e-4f * r + 1.39304355e-3f) * r + 8.33336078e-3f) * r + 4.16664854e-2f) * r
               + 0.166666672f) * r + 0.5f;
  return r * r * p + r + 1.0f;
}
/* any lane of x below lo (NaN lanes are not) */
static inline bool rt_vf16_any_lt(rt_vf16 x, float lo)
{
#if defined(RT_ISA_V4)
  return _mm512_cmp_ps_mask((__m512)x, _mm512_set1_ps(lo), _CMP_LT_OQ) != 0;
#else
  rt_vi16 m = x < lo;
  int any = 0;
  for (int i = 0; i < 16; i++) any |= m[i];
  return any != 0;
#endif
}
static inline rt_vf16 rt_vexpneg_f32(rt_vf16 x)
{
  rt_vf16 z, e;
  if (__builtin_expect(!rt_vf16_any_lt(x, -86.0f), 1)) {          /* n >= -124: e 2^n normal, by the exponent bits */
    e = rt_vexp_poly(x, &z);
    return (rt_vf16)((rt_vi16)e + ((rt_vi16)z << 23));             /* z << 23: n << 23 (z's high bits shift out) */
  }
  rt_vi16 under = x < -104.0f, lo = (rt_vi16)(x * 0.0f - 104.0f);
  x = (rt_vf16)(((rt_vi16)x & ~under) | (lo & under));          /* NaN lanes: under is 0 */
  e = rt_vexp_poly(x, &z);
  rt_vi16 k = (rt_vi16)z - 0x4B400000, k1 = k >> 1;              /* n in [-150, 0] */
  rt_vf16 s1 = (rt_vf16)((k1 + 127) << 23), s2 = (rt_vf16)((k - k1 + 127) << 23);
  return (rt_vf16)((rt_vi16)(e * s1 * s2) & ~under);
}
static inline rt_vf16 rt_vexpneg_f32_ftz(rt_vf16 x)
{
  rt_vi16 under = x < -86.0f;
  rt_vf16 z, e = rt_vexp_poly(x, &z);
  return (rt_vf16)(((rt_vi16)e + ((rt_vi16)z << 23)) & ~under);  /* z << 23: n << 23 (z's high bits shift out) */
}

/* s0 += e[0..8), s1 += e[8..16) in double (GCC splits the generic conversion in quarters) */
static inline void rt_vf16_addd(rt_vd8 *s0, rt_vd8 *s1, rt_vf16 e)
{
#if defined(RT_ISA_V4)
  *s0 += (rt_vd8)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)e));
  *s1 += (rt_vd8)_mm512_cvtps_pd(_mm512_extractf32x8_ps((__m512)e, 1));
#else
  *s0 += __builtin_convertvector(__builtin_shufflevector(e, e, 0, 1, 2, 3, 4, 5, 6, 7), rt_vd8);
  *s1 += __builtin_convertvector(__builtin_shufflevector(e, e, 8, 9, 10, 11, 12, 13, 14, 15), rt_vd8);
#endif
}

#define RT_ISA_DECL(ret, name, params, args) ret name##_base params; ret name##_v3 params; ret name##_v4 params;
RT_ISA_ENTRIES(RT_ISA_DECL)
#undef RT_ISA_DECL

#endif
