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
