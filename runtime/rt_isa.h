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

#define RT_ISA_DECL(ret, name, params, args) ret name##_base params; ret name##_v3 params; ret name##_v4 params;
RT_ISA_ENTRIES(RT_ISA_DECL)
#undef RT_ISA_DECL

#endif
