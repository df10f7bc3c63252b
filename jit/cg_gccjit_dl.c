/*
** cg_gccjit_dl.c -- loads libgccjit on first use (see cg_gccjit_dl.h): dlopen
** of TIDE_GCCJIT or libgccjit.so.0, then dlsym of every function in
** CG_GCCJIT_FNS. Once per process; a failure is remembered and reported with
** the same message on every later compile.
*/
#define _GNU_SOURCE
#include "cg_gccjit_dl.h"
#include "rt.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

CgGccjit cg_gj;

static pthread_once_t gj_once = PTHREAD_ONCE_INIT;
static char gj_err[512];        /* empty: loaded */

static void gj_open(void)
{
  const char *name = getenv("TIDE_GCCJIT");
  if (!name || !*name) name = "libgccjit.so.0";
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);   /* never unloaded: sanitizers and debuggers still name its frames at exit */
  if (!h) {
    const char *why = dlerror();
    snprintf(gj_err, sizeof gj_err, "tide.compile: %s not found (apt install libgccjit0); eager ops still work (%s)",
             name, why ? why : "dlopen failed");
    return;
  }
#define CG_GJ_SYM(f)                                                                              \
  if (!(cg_gj.f = (__typeof__(cg_gj.f))dlsym(h, "gcc_jit_" #f))) {                                \
    snprintf(gj_err, sizeof gj_err, "tide.compile: %s lacks gcc_jit_" #f " (libgccjit 12 or newer is needed); " \
             "eager ops still work", name);                                                       \
    return;                                                                                       \
  }
  CG_GCCJIT_FNS(CG_GJ_SYM)
#undef CG_GJ_SYM
}

int cg_gccjit_load(void)
{
  pthread_once(&gj_once, gj_open);
  if (gj_err[0]) return rt_err(TD_ERR_STATE, "%s", gj_err);
  return 0;
}
