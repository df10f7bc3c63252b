/*
** rt_isa.c -- picks the instruction-set variant of the hot kernels (rt_isa.h)
** once, when the library loads: x86-64-v4 where the CPU has AVX-512
** (F, BW, CD, DQ, VL), v3 where it has AVX2, FMA, BMI1/2, LZCNT and MOVBE,
** else the baseline. TIDE_ISA=base|v3|v4 asks for one (a level the CPU lacks
** is refused: the variant would die on an illegal instruction). The library
** itself is built for baseline x86-64, so it loads on any x86-64.
*/
#include "rt.h"
#include "rt_isa.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

enum { ISA_BASE, ISA_V3, ISA_V4 };
static const char *const isa_names[] = { "x86-64", "x86-64-v3", "x86-64-v4" };
static int isa_level, isa_cpu;

static int cpu_level(void)
{
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
    return ISA_V4;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
      __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("movbe"))
    return ISA_V3;
  return ISA_BASE;
}

/* the chosen variant of every entry */
static struct {
#define RT_ISA_PTR(ret, name, params, args) ret (*name) params;
  RT_ISA_ENTRIES(RT_ISA_PTR)
#undef RT_ISA_PTR
} isa;

static void isa_set(int level)
{
#define RT_ISA_PICK(ret, name, params, args) \
  isa.name = level == ISA_V4 ? name##_v4 : level == ISA_V3 ? name##_v3 : name##_base;
  RT_ISA_ENTRIES(RT_ISA_PICK)
#undef RT_ISA_PICK
  isa_level = level;
}

int rt_stream_on = 1;                       /* rt_isa.h: TIDE_STREAM=0 turns streaming stores off */
int64_t rt_streamed;

__attribute__((constructor)) static void isa_init(void)
{
  const char *st = getenv("TIDE_STREAM");
  if (st && *st == '0') rt_stream_on = 0;
  isa_cpu = cpu_level();
  int level = isa_cpu;
  const char *e = getenv("TIDE_ISA");
  if (e && *e) {
    int want = !strcmp(e, "base") || !strcmp(e, "x86-64") ? ISA_BASE : !strcmp(e, "v3") || !strcmp(e, "x86-64-v3") ? ISA_V3
             : !strcmp(e, "v4") || !strcmp(e, "x86-64-v4") ? ISA_V4 : -1;
    if (want < 0) fprintf(stderr, "tide: TIDE_ISA=%s is not one of base, v3, v4; using %s\n", e, isa_names[level]);
    else if (want > isa_cpu)
      fprintf(stderr, "tide: TIDE_ISA=%s needs a CPU this one is not (it supports %s); using %s\n", e,
              isa_names[isa_cpu], isa_names[level]);
    else level = want;
  }
  isa_set(level);
}

TD_API const char *td_eager_isa(void) { return isa_names[isa_level]; }

/* the entry points the op table and the runtime call */
#define RT_ISA_CALL(ret, name, params, args) ret name params { return isa.name args; }
RT_ISA_ENTRIES(RT_ISA_CALL)
#undef RT_ISA_CALL

TD_API int td_adam_step(td_tensor *p, td_tensor *g, td_tensor *m, td_tensor *v, td_tensor *vmax,
                        const double *hp, int flags)
{
  return rt_adam_step(p, g, m, v, vmax, hp, flags);
}
