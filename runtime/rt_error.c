/*
** rt_error.c -- thread-local error messages for the C API (td_last_error).
** C never aborts on user errors: fallible calls set a message and return
** NULL or a negative TD_ERR_* code.
*/
#include "rt.h"
#include <stdarg.h>
#include <stdio.h>

static _Thread_local char rt_errbuf[4096];

TD_API const char *td_last_error(void) { return rt_errbuf; }

static void err_set(const char *fmt, va_list ap) { vsnprintf(rt_errbuf, sizeof rt_errbuf, fmt, ap); }

int rt_err(int code, const char *fmt, ...)
{
  va_list ap; va_start(ap, fmt); err_set(fmt, ap); va_end(ap);
  return code;
}

void *rt_errp(int code, const char *fmt, ...)
{
  va_list ap; va_start(ap, fmt); err_set(fmt, ap); va_end(ap);
  (void)code;
  return NULL;
}

char *rt_shape_str(char *buf, size_t n, int ndim, const int64_t *size)
{
  size_t k = 0;
  k += snprintf(buf + k, n - k, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)size[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* -- Argument checks ------------------------------------------------------------------------ */

int rt_arg_dead(const char *fn, int argn)
{
  return rt_err(TD_ERR_ARG, "bad argument #%d to '%s' (Tensor expected, got a freed tensor or NULL)", argn, fn);
}

int rt_size_mul(const char *op, int64_t a, int64_t b, int64_t *r)
{
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, r))
    return rt_err(TD_ERR_SHAPE, "%s: size overflows int64 (%lld * %lld)", op, (long long)a, (long long)b);
  return 0;
}

int rt_size_add(const char *op, int64_t a, int64_t b, int64_t *r)
{
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, r))
    return rt_err(TD_ERR_SHAPE, "%s: size overflows int64 (%lld + %lld)", op, (long long)a, (long long)b);
  return 0;
}

int rt_dims_check(const char *op, int n, int64_t *dims, int ndim, bool sort, uint32_t *mask)
{
  int lim = ndim > 0 ? ndim : 1;       /* a 0-dim tensor takes dim 0 (or -1) */
  if (n < 0 || n > TD_MAX_DIMS || n > lim)
    return rt_err(TD_ERR_ARG, "%s: %d dims given for a tensor with %d dims", op, n, ndim);
  uint32_t seen = 0;
  for (int i = 0; i < n; i++) {
    int64_t d = dims[i];
    if (rt_wrap_dim(op, &d, ndim)) return TD_ERR_INDEX;
    if (seen >> d & 1) return rt_err(TD_ERR_ARG, "%s: dim %lld appears multiple times in the list of dims", op,
                                     (long long)d + 1);
    seen |= 1u << d;
    int k = i;
    if (sort) for (; k > 0 && dims[k - 1] > d; k--) dims[k] = dims[k - 1];
    dims[k] = d;
  }
  if (mask) *mask = seen;
  return 0;
}

int rt_value_check(const char *op, double v, int dt)
{
  /* truncation toward zero must land in range: uint8 takes (-1, 256), int32
  ** (-2^31-1, 2^31), int64 [-2^63, 2^63) (its bounds are exact doubles) */
  bool ok;
  switch (dt) {
  case TD_UINT8: ok = v > -1.0 && v < 256.0; break;
  case TD_INT32: ok = v > -2147483649.0 && v < 2147483648.0; break;
  case TD_INT64: ok = v >= -9223372036854775808.0 && v < 9223372036854775808.0; break;
  default: return 0;                   /* floats hold any double (float32 rounds, overflows to inf); bool: v != 0 */
  }
  if (v != v) return rt_err(TD_ERR_ARG, "%s: cannot convert nan to %s", op, td_dtype_name(dt));
  if (!ok) return rt_err(TD_ERR_ARG, "%s: value %.15g is out of range for %s", op, v, td_dtype_name(dt));
  return 0;
}
