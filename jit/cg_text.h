/*
** cg_text.h -- what the kernel IR's text printers share (jit/cg_c.c for C,
** opencl/cl_gen.c for OpenCL C): a growing text buffer and the table of the
** walker's value handles with their printed names and types (jit/cg_text.c).
*/
#ifndef CG_TEXT_H
#define CG_TEXT_H

#include <stdarg.h>
#include <stddef.h>

/* text that grows; oom set (and later output dropped) when it cannot */
typedef struct { char *p; size_t n, cap; int oom; } CgText;
void cg_text_vprintf(CgText *b, const char *fmt, va_list ap);
void cg_text_printf(CgText *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* handle v -> its name and type; fail set when a name cannot be stored */
typedef struct { char **names; int *ty, cap, fail; } CgNames;
void cg_names_set(CgNames *t, int v, int ty, const char *text);
const char *cg_names_get(const CgNames *t, int v);   /* "?" for an unnamed handle */
void cg_names_clear(CgNames *t);                     /* every name dropped (a new kernel) */
void cg_names_free(CgNames *t);

#endif
