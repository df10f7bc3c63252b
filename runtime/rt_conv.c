/*
** rt_conv.c -- sliding windows for convolution and pooling: unfold (im2col)
** and its adjoint fold (col2im), as torch.nn.functional.unfold/fold on 4-D
** input. A convolution is unfold + matmul; pooling is unfold + a reduction.
** attrs.i = { kh, kw, sh, sw }, attrs.dims = { ph, pw, dh, dw, H, W } (H, W:
** fold's output size).
*/
#include "rt.h"
#include "rt_isa.h"
#include <string.h>

/* -- Geometry -------------------------------------------------------------------------- */

typedef struct { int64_t kh, kw, sh, sw, ph, pw, dh, dw, H, W, OH, OW; } Win;

/* The windows over an H x W plane; error names the op and the values. */
static int win_geometry(const char *op, const td_attrs *a, int64_t H, int64_t W, Win *w)
{
  w->kh = a->i[0]; w->kw = a->i[1]; w->sh = a->i[2]; w->sw = a->i[3];
  w->ph = a->dims[0]; w->pw = a->dims[1]; w->dh = a->dims[2]; w->dw = a->dims[3];
  w->H = H; w->W = W;
  if (w->kh < 1 || w->kw < 1 || w->sh < 1 || w->sw < 1 || w->dh < 1 || w->dw < 1 || w->ph < 0 || w->pw < 0)
    return rt_err(TD_ERR_ARG, "%s: kernel (%lld,%lld), stride (%lld,%lld) and dilation (%lld,%lld) must be "
                  "positive and padding (%lld,%lld) non-negative", op, (long long)w->kh, (long long)w->kw,
                  (long long)w->sh, (long long)w->sw, (long long)w->dh, (long long)w->dw,
                  (long long)w->ph, (long long)w->pw);
  /* effective (dilated) kernel eh x ew and padded input Hp x Wp, all checked */
  int64_t eh, ew, Hp, Wp;
  if (rt_size_mul(op, w->dh, w->kh - 1, &eh) || rt_size_add(op, eh, 1, &eh) ||
      rt_size_mul(op, w->dw, w->kw - 1, &ew) || rt_size_add(op, ew, 1, &ew) ||
      rt_size_mul(op, 2, w->ph, &Hp) || rt_size_add(op, Hp, H, &Hp) ||
      rt_size_mul(op, 2, w->pw, &Wp) || rt_size_add(op, Wp, W, &Wp))
    return TD_ERR_SHAPE;
  if (Hp < eh || Wp < ew)
    return rt_err(TD_ERR_SHAPE, "%s: the %lldx%lld kernel (dilated %lldx%lld) does not fit the padded "
                  "%lldx%lld input", op, (long long)w->kh, (long long)w->kw, (long long)eh, (long long)ew,
                  (long long)Hp, (long long)Wp);
  w->OH = (Hp - eh) / w->sh + 1;
  w->OW = (Wp - ew) / w->sw + 1;
  int64_t L;
  return rt_size_mul(op, w->OH, w->OW, &L);
}

/* -- Meta -------------------------------------------------------------------------------- */

/* unfold: x (N, C, H, W) -> (N, C*kh*kw, OH*OW) */
#if RT_ISA_SHARED
int rt_meta_unfold(RtCall *c)
{
  const td_tensor *x = c->in[0];
  if (x->ndim != 4) return rt_err(TD_ERR_SHAPE, "unfold: expected a 4-D input (N, C, H, W), got %s", RT_SHAPE(x));
  if (!rt_is_float(c->cdtype)) return rt_err(TD_ERR_DTYPE, "unfold: expected a floating point tensor, got %s",
                                             td_dtype_name(c->cdtype));
  Win w = { 0 };
  if (win_geometry("unfold", &c->attrs, x->sizes[2], x->sizes[3], &w)) return TD_ERR_SHAPE;
  c->attrs.dims[4] = x->sizes[2]; c->attrs.dims[5] = x->sizes[3];     /* for the gradient (fold) */
  c->ndim = 3;
  c->sizes[0] = x->sizes[0]; c->sizes[2] = w.OH * w.OW;        /* checked by win_geometry */
  int64_t k;
  return rt_size_mul("unfold", w.kh, w.kw, &k) || rt_size_mul("unfold", x->sizes[1], k, &c->sizes[1]) ? TD_ERR_SHAPE : 0;
}

/* fold: cols (N, C*kh*kw, L) -> (N, C, H, W), overlapping windows summed */
int rt_meta_fold(RtCall *c)
{
  const td_tensor *x = c->in[0];
  if (x->ndim != 3) return rt_err(TD_ERR_SHAPE, "fold: expected a 3-D input (N, C*kh*kw, L), got %s", RT_SHAPE(x));
  if (!rt_is_float(c->cdtype)) return rt_err(TD_ERR_DTYPE, "fold: expected a floating point tensor, got %s",
                                             td_dtype_name(c->cdtype));
  Win w = { 0 };
  if (win_geometry("fold", &c->attrs, c->attrs.dims[4], c->attrs.dims[5], &w)) return TD_ERR_SHAPE;
  int64_t k;
  if (rt_size_mul("fold", w.kh, w.kw, &k)) return TD_ERR_SHAPE;
  if (x->sizes[1] % k || x->sizes[2] != w.OH * w.OW)
    return rt_err(TD_ERR_SHAPE, "fold: input %s does not match a %lldx%lld kernel over a %lldx%lld output "
                  "(needs dim 2 divisible by %lld and dim 3 = %lld windows)", RT_SHAPE(x), (long long)w.kh,
                  (long long)w.kw, (long long)w.H, (long long)w.W, (long long)k, (long long)(w.OH * w.OW));
  c->ndim = 4;
  c->sizes[0] = x->sizes[0]; c->sizes[1] = x->sizes[1] / k; c->sizes[2] = w.H; c->sizes[3] = w.W;
  return 0;
}
#endif

/* -- Kernels ----------------------------------------------------------------------------- */

typedef struct { Win w; const char *src; char *dst; int64_t C; int fold, dbl; } ConvJob;

/* One (n, c) plane per task: unfold copies windows out, fold adds them back;
** both touch only the plane's own output, so tasks never collide. */
#define PLANE_LOOP(T) do { \
  const Win *w = &j->w; \
  int64_t K = w->kh * w->kw, L = w->OH * w->OW; \
  for (int64_t p = b; p < e; p++) { \
    const T *x = (const T *)j->src; T *y = (T *)j->dst; \
    int64_t n = p / j->C, ch = p % j->C; \
    T *plane = j->fold ? y + p * w->H * w->W : (T *)NULL; \
    const T *xin = j->fold ? (const T *)NULL : x + p * w->H * w->W; \
    const T *cin = j->fold ? x + (n * j->C * K + ch * K) * L : (const T *)NULL; \
    T *cout = j->fold ? (T *)NULL : y + (n * j->C * K + ch * K) * L; \
    if (j->fold) memset(plane, 0, (size_t)(w->H * w->W) * sizeof(T)); \
    for (int64_t ki = 0; ki < w->kh; ki++) \
      for (int64_t kj = 0; kj < w->kw; kj++) { \
        int64_t row = (ki * w->kw + kj) * L; \
        for (int64_t oh = 0; oh < w->OH; oh++) { \
          int64_t ih = oh * w->sh - w->ph + ki * w->dh; \
          int64_t base = row + oh * w->OW; \
          if (ih < 0 || ih >= w->H) { \
            if (!j->fold) for (int64_t ow = 0; ow < w->OW; ow++) cout[base + ow] = 0; \
            continue; \
          } \
          for (int64_t ow = 0; ow < w->OW; ow++) { \
            int64_t iw = ow * w->sw - w->pw + kj * w->dw; \
            if (j->fold) { if (iw >= 0 && iw < w->W) plane[ih * w->W + iw] += cin[base + ow]; } \
            else cout[base + ow] = (iw >= 0 && iw < w->W) ? xin[ih * w->W + iw] : (T)0; \
          } \
        } \
      } \
  } } while (0)

static void conv_range(void *ctx, int64_t b, int64_t e)
{
  const ConvJob *j = ctx;
  if (j->dbl) PLANE_LOOP(double); else PLANE_LOOP(float);
}

static int run(RtCall *c, td_tensor *out, int fold)
{
  td_tensor *x0 = rt_as_dtype(c->in[0], out->scalar_type), *x = x0 ? rt_as_contig(x0) : NULL;
  td_release(x0);
  if (!x) return TD_ERR_NOMEM;
  ConvJob j = { .src = rt_ptr(x), .dst = rt_ptr(out), .fold = fold, .dbl = out->scalar_type == TD_FLOAT64 };
  int64_t H = fold ? c->attrs.dims[4] : x->sizes[2], W = fold ? c->attrs.dims[5] : x->sizes[3];
  win_geometry(fold ? "fold" : "unfold", &c->attrs, H, W, &j.w);
  j.C = fold ? out->sizes[1] : x->sizes[1];
  int64_t planes = out->sizes[0] * j.C;
  int64_t work = j.w.kh * j.w.kw * j.w.OH * j.w.OW;
  rt_parallel_for(planes, 1 + 32768 / (work ? work : 1), conv_range, &j);
  td_release(x);
  return 0;
}

int RT_ISA_FN(rt_kern_unfold)(RtCall *c, td_tensor *out) { return run(c, out, 0); }
int RT_ISA_FN(rt_kern_fold)(RtCall *c, td_tensor *out) { return run(c, out, 1); }
