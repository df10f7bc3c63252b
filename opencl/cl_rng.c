/*
** cl_rng.c -- random tensors made on the device: rt_rng.c's Philox4x32-10
** stream (same key, same counters: element i uses counter base + i/4, lane
** i%4) and the same formulas, so tide.rand/randn/randint with a device give
** the CPU's values for the same seed, with no host round trip.
**
** A hand kernel beside the kernel IR's: random values are not an op of the
** op table (the runtime draws them when a tensor is made), so the IR has no
** node for them; the strict OpenCL C check covers it like the rest. One
** work-item makes the 4 elements of one counter.
**
** Equality. rand is exact on any device: (w >> 8) * 2^-24 and the 53-bit
** double are exact in their types. randn computes in double where the device
** has fp64, as the CPU does; OpenCL's log/sin/cos may differ from glibc's by
** an ulp or two, so a float32 result is the CPU's except in rare roundings, a
** float64 one agrees to ~1e-15. Without fp64 (float32 only) it computes in
** float: ~1e-6 relative. randint converts through double as rt_store does.
*/
#include "cl.h"
#include <stdio.h>

static const char philox_src[] =
  "/* Philox4x32-10 of counter (lo, hi, 0, 0) under key (Salmon et al. 2011) */\n"
  "inline void philox(ulong key, ulong ctr, uint *w) {\n"
  "  uint c0 = (uint)ctr, c1 = (uint)(ctr >> 32), c2 = 0, c3 = 0, k0 = (uint)key, k1 = (uint)(key >> 32);\n"
  "  for (int r = 0; r < 10; r++) {\n"
  "    uint h0 = mul_hi(0xD2511F53u, c0), l0 = 0xD2511F53u * c0;\n"
  "    uint h1 = mul_hi(0xCD9E8D57u, c2), l1 = 0xCD9E8D57u * c2;\n"
  "    uint n0 = h1 ^ c1 ^ k0, n2 = h0 ^ c3 ^ k1;\n"
  "    c1 = l1; c3 = l0; c0 = n0; c2 = n2;\n"
  "    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;\n"
  "  }\n"
  "  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;\n"
  "}\n";

/* the value of element i (lane l = i % 4) as OpenCL C, by kind and dtype */
static const char *value_expr(int kind, int dt, int fp64)
{
  switch (kind) {
  case 0:
    if (dt == TD_FLOAT64)
      return "(double)((((ulong)w[l] << 32) | w[(l + 1) & 3]) >> 11) * (1.0 / 9007199254740992.0)";
    return "(float)(w[l] >> 8) * (1.0f / 16777216.0f)";
  case 1:
    if (fp64)     /* rt_rng.c's Box-Muller on the lane pair (0,1) or (2,3), in double */
      return dt == TD_FLOAT64
        ? "nrm(1.0 - ((double)(w[l & 2] >> 8) * (1.0 / 16777216.0) + (double)(w[(l & 2) + 1] & 0xff) / 4294967296.0), "
          "(double)(w[(l & 2) + 1] >> 8) * (1.0 / 16777216.0), l)"
        : "(float)nrm(1.0 - (double)(w[l & 2] >> 8) * (1.0 / 16777216.0), "
          "(double)(w[(l & 2) + 1] >> 8) * (1.0 / 16777216.0), l)";
    return "nrm(1.0f - (float)(w[l & 2] >> 8) * (1.0f / 16777216.0f), (float)(w[(l & 2) + 1] >> 8) * (1.0f / 16777216.0f), l)";
  default:
    return NULL;
  }
}

int cl_rng_fill(td_tensor *t, uint64_t key, uint64_t base, int kind, int64_t lo, int64_t span)
{
  static const char *names[3] = { "rand", "randn", "randint" };
  const char *op = names[kind];
  int dt = t->scalar_type, fp64 = cl_has_fp64();
  if (dt == TD_FLOAT64 && !fp64) return rt_err(TD_ERR_DTYPE, "%s: the OpenCL device has no float64 (cl_khr_fp64)", op);
  if (t->nelem == 0) return 0;
  const char *F = fp64 ? "double" : "float";
  char src[4096], val[512];
  if (kind == 2) {
    /* lo + x % span, then through double to the dtype, as rt_store(double) */
    const char *T = cl_type(dt);
    if (dt == TD_BOOL) snprintf(val, sizeof val, "(uchar)(v != 0)");
    else if (dt == TD_FLOAT32 || dt == TD_FLOAT64 || fp64) snprintf(val, sizeof val, "(%s)(%s)v", T, fp64 ? "double" : "float");
    else snprintf(val, sizeof val, "(%s)v", T);
  } else snprintf(val, sizeof val, "%s", value_expr(kind, dt, fp64));
  int n = snprintf(src, sizeof src,
    "%s"
    "#define F %s\n"
    "/* Box-Muller: radius from u1, angle from u2; even lanes take cos, odd sin */\n"
    "inline F nrm(F u1, F u2, int l) {\n"
    "  F r = sqrt((F)-2 * log(u1)), a = (F)2 * %s * u2;\n"
    "  return (l & 1) ? r * sin(a) : r * cos(a);\n}\n"
    "kernel void k(global %s *o, long off, long n, ulong key, ulong base, long lo, ulong span) {\n"
    "  long g = get_global_id(0), i0 = g * 4;\n"
    "  if (i0 >= n) return;\n"
    "  uint w[4];\n"
    "  philox(key, base + (ulong)g, w);\n"
    "  for (int l = 0; l < 4 && i0 + l < n; l++) {\n"
    "%s"
    "    o[off + i0 + l] = %s;\n"
    "  }\n}\n",
    philox_src, F, fp64 ? "M_PI" : "M_PI_F", cl_type(dt),
    kind == 2 ? "    ulong x = ((ulong)w[l] << 32) | w[(l + 1) & 3];\n"
                "    long v = lo + (long)(x % (span ? span : 1));\n" : "", val);
  if (n >= (int)sizeof src) return rt_err(TD_ERR_ARG, "%s: OpenCL kernel source too long", op);
  cl_kernel k = cl_kernel_get(src, "k", op);
  if (!k) return TD_ERR_DEVICE;
  cl_mem m = cl_buf(t);
  cl_long off = t->offset, nn = t->nelem, l0 = lo;
  cl_ulong ky = key, b = base, sp = (cl_ulong)span;
  int rc = CL_ARGV(k, 0, m, op);
  if (!rc) rc = CL_ARGV(k, 1, off, op);
  if (!rc) rc = CL_ARGV(k, 2, nn, op);
  if (!rc) rc = CL_ARGV(k, 3, ky, op);
  if (!rc) rc = CL_ARGV(k, 4, b, op);
  if (!rc) rc = CL_ARGV(k, 5, l0, op);
  if (!rc) rc = CL_ARGV(k, 6, sp, op);
  if (!rc) rc = cl_run(k, (nn + 3) / 4, op);
  return rc;
}
