/*
** cg_text.c -- the text buffer and handle names of the kernel IR's text
** printers (cg_text.h).
*/
#include "cg_text.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cg_text_vprintf(CgText *b, const char *fmt, va_list ap)
{
  va_list aq;
  va_copy(aq, ap);
  int m = vsnprintf(NULL, 0, fmt, aq);
  va_end(aq);
  if (m < 0 || b->oom) return;
  if (b->n + m + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (b->n + m + 1 > cap) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p; b->cap = cap;
  }
  vsnprintf(b->p + b->n, m + 1, fmt, ap);
  b->n += m;
}

void cg_text_printf(CgText *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cg_text_vprintf(b, fmt, ap);
  va_end(ap);
}

void cg_names_set(CgNames *t, int v, int ty, const char *text)
{
  if (v < 0) { t->fail = 1; return; }
  if (v >= t->cap) {
    int cap = t->cap ? t->cap : 256;
    while (cap <= v) cap *= 2;
    char **n = realloc(t->names, cap * sizeof *n);
    if (n) t->names = n;
    int *ty2 = n ? realloc(t->ty, cap * sizeof *ty2) : NULL;
    if (!n || !ty2) { t->fail = 1; return; }
    t->ty = ty2;
    for (int i = t->cap; i < cap; i++) { t->names[i] = NULL; t->ty[i] = 0; }
    t->cap = cap;
  }
  free(t->names[v]);
  if (!(t->names[v] = strdup(text))) t->fail = 1;
  t->ty[v] = ty;
}

const char *cg_names_get(const CgNames *t, int v)
{
  return v >= 0 && v < t->cap && t->names[v] ? t->names[v] : "?";
}

void cg_names_clear(CgNames *t)
{
  for (int i = 0; i < t->cap; i++) { free(t->names[i]); t->names[i] = NULL; }
}

void cg_names_free(CgNames *t)
{
  cg_names_clear(t);
  free(t->names); free(t->ty);
  t->names = NULL; t->ty = NULL; t->cap = 0;
}
