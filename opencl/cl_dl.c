/*
** cl_dl.c -- loads the OpenCL ICD loader on first use (see cl_dl.h): dlopen of
** TIDE_OPENCL_LIB or libOpenCL.so.1, then dlsym of every function in OCL_FNS.
** Once per process; a failure is remembered and reported on every later call.
*/
#define _GNU_SOURCE
#include "cl.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

OclApi ocl_api;

int ocl_dl(const char *name, const char *hint, const char *const *syms, void **fns, int n)
{
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);   /* never unloaded: sanitizers and debuggers still name its frames at exit */
  if (!h) {
    const char *why = dlerror();
    return rt_err(TD_ERR_DEVICE, "opencl: %s not found (%s); CPU tensors still work (%s)", name, hint,
                  why ? why : "dlopen failed");
  }
  for (int i = 0; i < n; i++)
    if (!(fns[i] = dlsym(h, syms[i])))
      return rt_err(TD_ERR_DEVICE, "opencl: %s lacks %s; CPU tensors still work", name, syms[i]);
  return 0;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_err[512];

static void load_icd(void)
{
  static const char *const syms[] = {
#define OCL_NAME(f) "cl" #f,
    OCL_FNS(OCL_NAME)
#undef OCL_NAME
  };
  void *fns[sizeof syms / sizeof *syms];
  const char *name = getenv("TIDE_OPENCL_LIB");
  if (!name || !*name) name = "libOpenCL.so.1";
  load_rc = ocl_dl(name, "apt install ocl-icd-libopencl1 and a driver, e.g. pocl-opencl-icd", syms, fns,
                   (int)(sizeof syms / sizeof *syms));
  if (load_rc) { snprintf(load_err, sizeof load_err, "%s", td_last_error()); return; }
  int i = 0;
#define OCL_SET(f) ocl_api.f = (__typeof__(ocl_api.f))fns[i++];
  OCL_FNS(OCL_SET)
#undef OCL_SET
}

int ocl_load(void)
{
  pthread_once(&once, load_icd);
  return load_rc ? rt_err(TD_ERR_DEVICE, "%s", load_err) : 0;
}
