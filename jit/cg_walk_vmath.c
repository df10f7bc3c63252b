/*
** cg_walk_vmath.c -- inline vector math of the walker: expf and erff on
** float32 vectors as polynomials in emitter primitives (no libmvec call).
*/
#include "cg_walk.h"

/*
** exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n*ln2 in [-ln2/2, ln2/2].
** - n without a float->int conversion: t = x*log2e + 1.5*2^23 rounds x*log2e
**   to an integer in t's low mantissa bits (|x*log2e| < 2^22): bits(t) =
**   0x4b400000 + n, so bits(t) << 23 = n << 23 (mod 2^32), and t - 1.5*2^23
**   is n as a float, exactly.
** - Cody-Waite: r = (x - n*L2U) - n*L2L, ln2 = L2U + L2L, L2U with 15
**   significant bits (n*L2U exact for |n| < 2^9, x - n*L2U exact by Sterbenz).
**   Within 1 ulp with or without FMA contraction (GCC contracts here).
** - exp(r) = 1 + r + r^2 * u(r), u of degree 5 (Horner): the minimax
**   coefficients of SLEEF's xexpf (u10), which PyTorch's Vectorized<float>::exp
**   uses too; 1 + (r + r^2 u) last keeps the rounding error below 1 ulp.
** - 2^n: n << 23 added to the exponent bits of p = exp(r) in [0.70, 1.42].
**   Valid while the exponent stays normal: |n| <= 125, taken for |x| <= 86.
** Any lane with |x| > 86 (or inf, NaN) sends the whole vector to the full
** version, right on every input and equal to the fast one where that is
** valid (one test and branch per vector: the OR of the lanes' tests as a
** scalar; GCC moves the full version out of line; the zero-padded remainder
** vector takes it without a test). From the same p and n:
** - 2^n in two steps, p * 2^n1 * 2^n2, n1 = round(n/2), n2 = n - n1 in
**   [-75, 75] (both normal): the product rounds once, so overflow gives inf
**   and -104 <= x < -87.3 gives the right subnormals (below -103.97 +0);
** - |x| > 104 (inf, NaN): +inf for x > 0, +0 for x < 0, NaN lanes take x.
**   Their garbage factors are zeroed before the product: a product rounding
**   to a subnormal or 0 costs a microcode assist per lane (-inf or -1e9 in
**   masked softmax rows).
** Max error 1 ulp against glibc's expf over every float in [-104, 89]
** (spec/jit/cg_test.c samples it; libmvec's _ZGVdN8v_expf reaches 3 ulp).
*/
#define VX_MAGIC 12582912.0               /* 1.5 * 2^23 */

/* a*b + c (contracted to an FMA by GCC under -march=x86-64-v3) */
static int vx_fma(W *w, int a, int b, int c)
{ int t = w->ty[a]; return op2(w, t, CG_E_ADD, op2(w, t, CG_E_MUL, a, b), c); }

/* exp(r) for x with |x*log2e| < 2^22: sets *t (n in its low bits), *nf (n) */
static int vx_exp_core(W *w, int x, int *t, int *nf)
{
  int T = w->ty[x];
  *t = vx_fma(w, x, hc(w, T, 1.44269504088896341), hc(w, T, VX_MAGIC));
  *nf = op2(w, T, CG_E_SUB, *t, hc(w, T, VX_MAGIC));
  int r = op2(w, T, CG_E_SUB, x, op2(w, T, CG_E_MUL, *nf, hc(w, T, 0.693145751953125)));
  r = op2(w, T, CG_E_SUB, r, op2(w, T, CG_E_MUL, *nf, hc(w, T, 1.428606765330187045e-06)));
  static const double c[6] = { 0.000198527617612853646278381, 0.00139304355252534151077271,
    0.00833336077630519866943359, 0.0416664853692054748535156, 0.166666671633720397949219, 0.5 };
  int u = hc(w, T, c[0]);
  for (int i = 1; i < 6; i++) u = vx_fma(w, u, r, hc(w, T, c[i]));
  return op2(w, T, CG_E_ADD, hc(w, T, 1), vx_fma(w, op2(w, T, CG_E_MUL, r, r), u, r));
}

/* p * 2^n from the bits: n << 23 = bits(t) << 23 added to p's exponent */
static int vx_ldexp(W *w, int p, int t)
{
  int U = utype(w->ty[p]);
  return bitc(w, op2(w, U, CG_E_ADD, bitc(w, p, U), op2(w, U, CG_E_SHL, bitc(w, t, U), hci(w, U, 23))), w->ty[p]);
}

/* exp(x) on every input (edges, subnormal results) from the core's p, nf */
static int vx_expf_full(W *w, int x, int p, int nf)
{
  int T = w->ty[x], U = utype(T);
  int u = bitc(w, x, U), a = op2(w, U, CG_E_BAND, u, hci(w, U, 0x7fffffff));
  int ok = op1(w, U, CG_E_BNOT, topbit(w, op2(w, U, CG_E_SUB, hci(w, U, 0x42d00000), a)));   /* |x| <= 104 */
  int t1 = vx_fma(w, nf, hc(w, T, 0.5), hc(w, T, VX_MAGIC));          /* n1 = round(n/2) */
  int n2 = op2(w, T, CG_E_SUB, nf, op2(w, T, CG_E_SUB, t1, hc(w, T, VX_MAGIC)));
  int t2 = op2(w, T, CG_E_ADD, n2, hc(w, T, VX_MAGIC));
  int s2 = op2(w, U, CG_E_ADD, op2(w, U, CG_E_SHL, bitc(w, t2, U), hci(w, U, 23)), hci(w, U, 0x3f800000));
  int y = op2(w, T, CG_E_MUL, bitc(w, op2(w, U, CG_E_BAND, bitc(w, vx_ldexp(w, p, t1), U), ok), T),
              bitc(w, op2(w, U, CG_E_BAND, s2, ok), T));
  int edge = op2(w, U, CG_E_BAND, hci(w, U, 0x7f800000), op1(w, U, CG_E_BNOT, topbit(w, u)));   /* x > 0: inf, x < 0: +0 */
  y = w_sel(w, ok, y, bitc(w, edge, T));
  return w_sel(w, topbit(w, op2(w, U, CG_E_SUB, hci(w, U, 0x7f800000), a)), x, y);   /* NaN: x */
}

/* expf of a float32 vector x */
int w_vexpf(W *w, int x)
{
  int T = w->ty[x], U = utype(T), t, nf, p = vx_exp_core(w, x, &t, &nf);
  if (w->mode == MODE_VTAIL) return vx_expf_full(w, x, p, nf);   /* once per row: no test */
  int res = var(w, T, vx_ldexp(w, p, t));
  /* lanes with |x| > 86: top bit of bits(86) - |x|'s bits, OR-ed over the
  ** lanes taken in pairs (uint64) */
  int a = op2(w, U, CG_E_BAND, bitc(w, x, U), hci(w, U, 0x7fffffff));
  int d = var(w, CT_VU64, bitc(w, op2(w, U, CG_E_SUB, hci(w, U, 0x42ac0000), a), CT_VU64));
  int any = lane_get(w, d, hci(w, CT_I64, 0));
  for (int j = 1; j < w->vl / 2; j++) any = op2(w, CT_U64, CG_E_BOR, any, lane_get(w, d, hci(w, CT_I64, j)));
  any = op2(w, CT_U64, CG_E_BAND, any, hci(w, CT_U64, (int64_t)0x8000000080000000ull));
  w->e->begin_if(w->e, op2(w, CT_BOOL, CG_E_NE, any, hci(w, CT_U64, 0)));
  w->e->emit_assign(w->e, res, vx_expf_full(w, x, p, nf));
  w->e->end_if(w->e);
  return res;
}

/*
** erf(x) on float32 vectors: the rational approximation of XLA and Eigen
** (TensorFlow's and JAX's CPU erf), x P(x^2) / Q(x^2), P of degree 6 and Q
** of degree 4 in x^2: 13 FMAs and a division, against ~27 cycles per 16
** lanes for libmvec's call (the GPT step's GELU, forward and backward).
** Edges, by lane masks on the bits:
** - |x| >= 3.67306232 (where P/Q first exceeds 1; erff rounds to 1 from
**   3.919, so at most 1 ulp here): sign(x) * 1; inf too;
** - |x| < 2^-40: x * 2/sqrt(pi) (x P/Q would lose bits to underflow);
** - NaN: P/Q carries it.
** Over every float32: at most 6 ulp from glibc's erff (94% within 1 ulp),
** relative error below 3.7e-7, |erf| <= 1 (checked exhaustively when written).
*/
int w_verff(W *w, int x)
{
  static const double P[7] = { -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
    -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02 };
  static const double Q[5] = { -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
    -7.37332916720468e-03, -1.42647390514189e-02 };
  int T = w->ty[x], U = utype(T), x2 = op2(w, T, CG_E_MUL, x, x);
  int p = hc(w, T, P[0]), q = hc(w, T, Q[0]);
  for (int i = 1; i < 7; i++) p = vx_fma(w, x2, p, hc(w, T, P[i]));
  for (int i = 1; i < 5; i++) q = vx_fma(w, x2, q, hc(w, T, Q[i]));
  int r = op2(w, T, CG_E_DIV, op2(w, T, CG_E_MUL, x, p), q);
  int u = bitc(w, x, U), a = op2(w, U, CG_E_BAND, u, hci(w, U, 0x7fffffff));
  int sign = op2(w, U, CG_E_BAND, u, hci(w, U, 0x80000000));
  int rat = op2(w, U, CG_E_BOR, topbit(w, op2(w, U, CG_E_SUB, a, hci(w, U, 0x406b1374))),   /* |x| < 3.673 */
                topbit(w, op2(w, U, CG_E_SUB, hci(w, U, 0x7f800000), a)));                   /* or NaN */
  r = w_sel(w, rat, r, bitc(w, op2(w, U, CG_E_BOR, sign, hci(w, U, 0x3f800000)), T));
  int tiny = topbit(w, op2(w, U, CG_E_SUB, a, hci(w, U, 0x2b800000)));                         /* |x| < 2^-40 */
  return w_sel(w, tiny, op2(w, T, CG_E_MUL, x, hc(w, T, 1.1283791670955126)), r);
}

/*
** sin and cos of a float32 vector together: one range reduction by pi/2 and
** two polynomials on [-pi/4, pi/4] (SLEEF's u35 coefficients):
** - j = round(x 2/pi) by the 1.5*2^23 trick (bits(t) = 0x4b400000 + j: its
**   low two bits are j mod 4), r = x - j pi/2 in four parts, P1..P3 with at
**   most 12 significant bits (j Pk exact for |j| < 2^12: the same with or
**   without FMA contraction), P4 the rest: r keeps its bits next to the zeros
**   of sin and cos (with three parts, cos(3pi/2 rounded) was 6 ulp off);
** - sin r = r + (z u(z)) r, cos r = 1 + z v(z), z = r^2 (u of degree 3, v 4);
** - quadrant q = j mod 4: (sin x, cos x) = (s, c), (c, -s), (-s, -c), (-c, s):
**   odd q swaps the two, bit 1 of q (of q + 1) flips sin's (cos's) sign.
** At most 1.53 ulp from the correctly rounded values for |x| <= 1024 (every
** 97th float there and 129 floats around each multiple of pi/2; libm's
** sinf/cosf are within 0.56). A vector with any |x| > 1024 (inf, NaN)
** takes libmvec's sinf and cosf instead (exact range reduction), the
** zero-padded remainder vector too, without a test. In cache it costs 0.23 ns
** an element against 0.60 for libmvec's sinf and cosf (AVX-512, one core).
*/
void w_vsincosf(W *w, int x, int *so, int *co)
{
  int T = w->ty[x], U = utype(T);
  char vn[48];
  if (w->mode == MODE_VTAIL) {
    *so = call(w, T, cg_vec_fname("sinf", w->L, vn, sizeof vn), 1, &x);
    *co = call(w, T, cg_vec_fname("cosf", w->L, vn, sizeof vn), 1, &x);
    return;
  }
  int t = vx_fma(w, x, hc(w, T, 0.636619772367581343), hc(w, T, VX_MAGIC));
  int jf = op2(w, T, CG_E_SUB, t, hc(w, T, VX_MAGIC));
  static const double P[4] = { 1.5703125, 4.837512969970703125e-4, 7.549533620476723e-08, 2.5633440682570896e-12 };
  int r = x;
  for (int i = 0; i < 4; i++) r = op2(w, T, CG_E_SUB, r, op2(w, T, CG_E_MUL, jf, hc(w, T, P[i])));
  int z = op2(w, T, CG_E_MUL, r, r);
  static const double su[4] = { 2.6083159809786593541503e-06, -0.0001981069071916863322258,
                                0.00833307858556509017944336, -0.166666597127914428710938 };
  static const double cv[5] = { -2.71811842367242206819355e-07, 2.47990446951007470488548e-05,
                                -0.00138888787478208541870117, 0.0416666641831398010253906, -0.5 };
  int u = hc(w, T, su[0]), v = hc(w, T, cv[0]);
  for (int i = 1; i < 4; i++) u = vx_fma(w, u, z, hc(w, T, su[i]));
  for (int i = 1; i < 5; i++) v = vx_fma(w, v, z, hc(w, T, cv[i]));
  int ps = vx_fma(w, op2(w, T, CG_E_MUL, u, z), r, r), pc = vx_fma(w, v, z, hc(w, T, 1));
  int q = bitc(w, t, U);
  int swap = topbit(w, op2(w, U, CG_E_SHL, q, hci(w, U, 31)));          /* odd quadrant: all ones */
  int sn = op2(w, U, CG_E_SHL, op2(w, U, CG_E_BAND, q, hci(w, U, 2)), hci(w, U, 30));
  int cn = op2(w, U, CG_E_SHL, op2(w, U, CG_E_BAND, op2(w, U, CG_E_ADD, q, hci(w, U, 1)), hci(w, U, 2)), hci(w, U, 30));
  int s = bitc(w, op2(w, U, CG_E_BXOR, bitc(w, w_sel(w, swap, pc, ps), U), sn), T);
  int c = bitc(w, op2(w, U, CG_E_BXOR, bitc(w, w_sel(w, swap, ps, pc), U), cn), T);
  int rs = var(w, T, s), rc = var(w, T, c);
  /* lanes with |x| > 1024 (inf, NaN): top bit of bits(1024) - |x|'s bits, OR-ed over lane pairs */
  int a = op2(w, U, CG_E_BAND, bitc(w, x, U), hci(w, U, 0x7fffffff));
  int d = var(w, CT_VU64, bitc(w, op2(w, U, CG_E_SUB, hci(w, U, 0x44800000), a), CT_VU64));
  int any = lane_get(w, d, hci(w, CT_I64, 0));
  for (int j = 1; j < w->vl / 2; j++) any = op2(w, CT_U64, CG_E_BOR, any, lane_get(w, d, hci(w, CT_I64, j)));
  any = op2(w, CT_U64, CG_E_BAND, any, hci(w, CT_U64, (int64_t)0x8000000080000000ull));
  w->e->begin_if(w->e, op2(w, CT_BOOL, CG_E_NE, any, hci(w, CT_U64, 0)));
  w->e->emit_assign(w->e, rs, call(w, T, cg_vec_fname("sinf", w->L, vn, sizeof vn), 1, &x));
  w->e->emit_assign(w->e, rc, call(w, T, cg_vec_fname("cosf", w->L, vn, sizeof vn), 1, &x));
  w->e->end_if(w->e);
  *so = rs; *co = rc;
}
