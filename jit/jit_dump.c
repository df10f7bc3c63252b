/*
** jit_dump.c -- the trace as text (TIDE_LOG=graph, compiled:explain) and as
** Graphviz DOT (tide.jit.to_dot): one line or node per live record, operands
** shown as %ref, or %ref<sizes/strides+offset> when the view is not the whole root.
*/
#include "jit_rec.h"
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

typedef struct Buf { char *p; size_t n, cap; } Buf;

static void bput(Buf *b, const char *fmt, ...)
{
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int w = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (w < 0) return;
    if (b->p && b->n + (size_t)w < b->cap) { b->n += (size_t)w; return; }
    size_t nc = b->cap ? b->cap * 2 : 4096;
    while (nc < b->n + (size_t)w + 1) nc *= 2;
    char *q = realloc(b->p, nc);
    if (!q) return;
    b->p = q; b->cap = nc;
  }
}

static bool whole_root(const JitTrace *t, const JitView *v)
{
  const JitIns *r = &t->ins[v->root];
  if (r->op == JIT_OP_SCALAR) return true;
  if (v->offset || v->ndim != r->ndim || memcmp(v->sizes, r->sizes, v->ndim * sizeof(int64_t))) return false;
  int64_t st[TD_MAX_DIMS];
  rt_tensor_contig_strides(v->ndim, v->sizes, st);
  return !memcmp(st, v->strides, v->ndim * sizeof(int64_t));
}

static void put_shape(Buf *b, int nd, const int64_t *s)
{
  bput(b, "[");
  for (int i = 0; i < nd; i++) bput(b, i ? ",%lld" : "%lld", (long long)s[i]);
  bput(b, "]");
}

static void put_view(Buf *b, const JitTrace *t, const JitView *v)
{
  bput(b, "%%%d", v->root);
  if (whole_root(t, v)) return;
  bput(b, "<"); put_shape(b, v->ndim, v->sizes); bput(b, "/"); put_shape(b, v->ndim, v->strides);
  if (v->offset) bput(b, "+%lld", (long long)v->offset);
  bput(b, ">");
}

static void put_attrs(Buf *b, const JitIns *ins)
{
  const td_attrs *a = &ins->attrs;
  int kind = ins->op < RT_OP__MAX ? rt_ops[ins->op].kind : -1;
  if (kind == RT_K_RED) {
    if (a->ndims < 0) bput(b, " dims=all"); else { bput(b, " dims="); put_shape(b, a->ndims, a->dims); }
    if (a->keepdim) bput(b, " keepdim");
  } else if (kind == RT_K_ROW || kind == RT_K_INDEX || kind == RT_K_SORT || kind == RT_K_SCAN) bput(b, " dim=%lld", (long long)a->i[0]);
  if (ins->op == RT_OP_TOPK) bput(b, " k=%lld mode=%lld", (long long)a->i[1], (long long)a->i[2]);
  if (ins->op == RT_OP_CLAMP) bput(b, " min=%g max=%g", a->s[0], a->s[1]);
  if (a->flags && ins->op < RT_OP__MAX) bput(b, " flags=%d", a->flags);
}

char *jit_trace_text(const JitTrace *t)
{
  Buf b = { 0 };
  for (int i = 0; i < t->nins; i++) {
    const JitIns *ins = &t->ins[i];
    if (ins->flags & JIT_IF_DEAD) continue;
    bput(&b, "%%%d = %s %s", i, jit_op_name(ins->op), td_dtype_name(ins->dtype));
    if (ins->op == JIT_OP_SCALAR) {
      if (ins->flags & JIT_IF_DYN) bput(&b, " arg(%.9g)\n", ins->value); else bput(&b, " %.9g\n", ins->value);
      continue;
    }
    bput(&b, " "); put_shape(&b, ins->ndim, ins->sizes);
    if (ins->op == JIT_OP_INPUT) { bput(&b, " slot %d\n", ins->slot + 1); continue; }
    bput(&b, " (");
    for (int k = 0; k < ins->nin; k++) { if (k) bput(&b, ", "); put_view(&b, t, jit_arg(t, ins, k)); }
    bput(&b, ")");
    if (ins->op == JIT_OP_WRITE) { bput(&b, " at "); put_view(&b, t, &t->views[ins->dst]); }
    put_attrs(&b, ins);
    bput(&b, "\n");
  }
  for (int k = 0; k < t->neffects; k++) bput(&b, "store slot %d <- %%%d\n", t->effects[k].slot + 1, t->effects[k].ref);
  bput(&b, "return");
  for (int k = 0; k < t->nouts; k++) { bput(&b, k ? ", " : " "); put_view(&b, t, &t->outs[k]); }
  bput(&b, "\n");
  return b.p;
}

char *jit_trace_dot(const JitTrace *t)
{
  Buf b = { 0 };
  bput(&b, "digraph trace {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
  for (int i = 0; i < t->nins; i++) {
    const JitIns *ins = &t->ins[i];
    if (ins->flags & JIT_IF_DEAD) continue;
    const char *style = ins->op == JIT_OP_INPUT ? ", style=filled, fillcolor=lightblue"
                      : ins->op == JIT_OP_SCALAR ? ", shape=ellipse"
                      : ins->op == RT_OP_MATMUL ? ", style=filled, fillcolor=lightyellow" : "";
    bput(&b, "  n%d [label=\"%%%d %s\\n%s ", i, i, jit_op_name(ins->op), td_dtype_name(ins->dtype));
    if (ins->op == JIT_OP_SCALAR) bput(&b, "%.6g", ins->value); else put_shape(&b, ins->ndim, ins->sizes);
    bput(&b, "\"%s];\n", style);
    for (int k = 0; k < ins->nin; k++) {
      const JitView *v = jit_arg(t, ins, k);
      bput(&b, "  n%d -> n%d", v->root, i);
      if (!whole_root(t, v)) { bput(&b, " [label=\""); put_shape(&b, v->ndim, v->sizes); bput(&b, "\"]"); }
      bput(&b, ";\n");
    }
  }
  for (int k = 0; k < t->nouts; k++) bput(&b, "  out%d [label=\"output %d\", shape=plaintext];\n  n%d -> out%d;\n", k, k + 1, t->outs[k].root, k);
  for (int k = 0; k < t->neffects; k++)
    bput(&b, "  eff%d [label=\"store slot %d\", shape=plaintext];\n  n%d -> eff%d;\n", k, t->effects[k].slot + 1, t->effects[k].ref, k);
  bput(&b, "}\n");
  return b.p;
}
