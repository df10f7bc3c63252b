/*
** rt_dtype.c -- the dtype table and PyTorch's type-promotion rules.
** Categories order bool < integer < float; a wrapped number or a 0-dim tensor
** only raises the category of a dimensioned operand, never its width.
*/
#include "rt.h"

int rt_default_float = TD_FLOAT32;

static const struct { const char *name; int size, cat; } dt_info[] = {
#define DT_ROW(E, name, ctype, size, cat) { #name, size, cat },
  RT_DTYPEDEF(DT_ROW)
#undef DT_ROW
};
_Static_assert(sizeof(dt_info) / sizeof(dt_info[0]) == TD_DTYPE__MAX, "ORDER DTYPE");

int rt_dtype_size(int dt) { return dt_info[dt].size; }
int rt_dtype_cat(int dt) { return dt_info[dt].cat; }
TD_API int td_dtype_size(int dt) { return (dt >= 0 && dt < TD_DTYPE__MAX) ? dt_info[dt].size : 0; }
TD_API const char *td_dtype_name(int dt)
{
  return (dt >= 0 && dt < TD_DTYPE__MAX) ? dt_info[dt].name : "invalid";
}

double rt_load(const void *p, int dt)
{
  switch (dt) {
#define DT_LOAD(E, name, ctype, size, cat) case TD_##E: return (double)*(const ctype *)p;
  RT_DTYPEDEF(DT_LOAD)
#undef DT_LOAD
  }
  return 0;
}

void rt_store(void *p, int dt, double v)
{
  switch (dt) {
  case TD_BOOL: *(uint8_t *)p = v != 0; break;
  case TD_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
  case TD_INT32: *(int32_t *)p = (int32_t)v; break;
  case TD_INT64: *(int64_t *)p = (int64_t)v; break;
  case TD_FLOAT32: *(float *)p = (float)v; break;
  case TD_FLOAT64: *(double *)p = v; break;
  }
}

/* Promotion of two dtypes of the same priority: the wider within the higher
** category; uint8 with a signed int goes to the signed one (int8 is absent). */
static int promote2(int a, int b)
{
  int ca = dt_info[a].cat, cb = dt_info[b].cat;
  if (ca != cb) return ca > cb ? a : b;
  return a > b ? a : b;   /* enum order is width order inside a category */
}

/* Priority: 2 = dimensioned tensor, 1 = 0-dim tensor, 0 = wrapped number. */
static int prio(const td_tensor *t)
{
  if (t->flags & TD_TF_WRAPPED_NUMBER) return 0;
  return t->ndim == 0 ? 1 : 2;
}

/* PyTorch's result_type over n operands. */
int rt_result_type_n(int n, td_tensor *const *in)
{
  int best[3] = { -1, -1, -1 };
  for (int i = 0; i < n; i++) {
    int p = prio(in[i]), dt = in[i]->scalar_type;
    if (p == 0 && rt_is_float(dt)) dt = rt_default_float;   /* a Lua number is a "float" */
    best[p] = best[p] < 0 ? dt : promote2(best[p], dt);
  }
  int r = -1;
  for (int p = 2; p >= 0; p--) {
    if (best[p] < 0) continue;
    if (r < 0) r = best[p];
    else if (dt_info[best[p]].cat > dt_info[r].cat)
      r = dt_info[best[p]].cat == 2 && p == 0 ? rt_default_float : best[p];
  }
  return r;
}

TD_API int td_result_type(const td_tensor *a, const td_tensor *b)
{
  td_tensor *in[2] = { (td_tensor *)a, (td_tensor *)b };
  return rt_result_type_n(2, in);
}
