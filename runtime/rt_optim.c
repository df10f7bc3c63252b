/*
** rt_optim.c -- fused optimizer updates for eager steps: Adam and AdamW in one
** pass over a parameter and its state (read p, g, m, v; write p, m, v)
** instead of the ~13 elementwise ops of optim.lua's formula, each a pass over
** memory (PyTorch's fused=True). The arithmetic is that formula's, operation
** by operation: the same float32 (or float64) operations in the same order,
** each rounded (no FMA contraction: the Makefile builds this file with
** -ffp-contract=off), the Lua numbers rounded to the tensor's dtype as an op
** with a number does. So a fused step and the op-by-op one give the same bits
** (spec/lua/optim_spec.lua), and traced steps keep the formula (tide.compile
** fuses it into its own kernels).
*/
#include "rt.h"
#include "rt_isa.h"
#include <math.h>

typedef struct {
  char *p, *g, *m, *v, *vmax;
  const double *hp;              /* 1 - lr wd, wd, b1, 1 - b1, b2, 1 - b2, sqrt(bc2), eps, -lr / bc1 */
  int flags;
} AdamJob;

/*   decoupled: p = p * (1 - lr wd)          else if wd != 0: g = g + p wd
**   m = m b1 + g (1 - b1);  v = v b2 + (g (1 - b2)) g;  [amsgrad: vmax = max(vmax, v)]
**   p = p + (m (-lr / bc1)) / (sqrt(v or vmax) / sqrt(bc2) + eps) */
#define ADAM_LOOP(sfx, T, SQRT) \
  static void adam_##sfx(void *ctx, int64_t i0, int64_t i1) { \
    const AdamJob *j = ctx; \
    T *restrict p = (T *)j->p, *restrict m = (T *)j->m, *restrict v = (T *)j->v, *restrict vx = (T *)j->vmax; \
    const T *restrict g = (const T *)j->g; \
    const double *h = j->hp; \
    const T wd_mul = (T)h[0], wd = (T)h[1], b1 = (T)h[2], omb1 = (T)h[3], b2 = (T)h[4], omb2 = (T)h[5]; \
    const T bc2 = (T)h[6], eps = (T)h[7], ns = (T)h[8]; \
    const int decoupled = j->flags & TD_ADAM_DECOUPLED, l2 = !decoupled && h[1] != 0, maximize = j->flags & TD_ADAM_MAXIMIZE; \
    for (int64_t i = i0; i < i1; i++) { \
      T gi = maximize ? -g[i] : g[i], pi = p[i]; \
      if (decoupled) pi = pi * wd_mul; \
      else if (l2) gi = gi + pi * wd; \
      T mi = m[i] * b1; mi = mi + gi * omb1; \
      T t = gi * omb2; t = t * gi; \
      T vi = v[i] * b2; vi = vi + t; \
      T s = vi; \
      if (vx) { s = vx[i] > vi || vx[i] != vx[i] ? vx[i] : vi; vx[i] = s; } \
      T d = SQRT(s); d = d / bc2; d = d + eps; \
      T u = mi * ns; u = u / d; \
      m[i] = mi; v[i] = vi; p[i] = pi + u; \
    } }
ADAM_LOOP(f32, float, sqrtf)
ADAM_LOOP(f64, double, sqrt)

static bool adam_fits(const td_tensor *x, const td_tensor *p)
{
  return x && x->device_type == TD_CPU && x->scalar_type == p->scalar_type && x->nelem == p->nelem &&
         rt_tensor_is_contig(x) && x->ptr;
}

int RT_ISA_FN(rt_adam_step)(td_tensor *p, td_tensor *g, td_tensor *m, td_tensor *v, td_tensor *vmax,
                        const double *hp, int flags)
{
  if (!p || (p->scalar_type != TD_FLOAT32 && p->scalar_type != TD_FLOAT64) || !adam_fits(p, p) ||
      !adam_fits(g, p) || !adam_fits(m, p) || !adam_fits(v, p) || (vmax && !adam_fits(vmax, p)))
    return 1;                                     /* not fusable: the caller runs the formula */
  AdamJob j = { rt_ptr(p), rt_ptr(g), rt_ptr(m), rt_ptr(v), vmax ? rt_ptr(vmax) : NULL, hp, flags };
  rt_parallel_for(p->nelem, 16384, p->scalar_type == TD_FLOAT32 ? adam_f32 : adam_f64, &j);
  rt_bump_version(p); rt_bump_version(m); rt_bump_version(v);
  if (vmax) rt_bump_version(vmax);
  return 0;
}
