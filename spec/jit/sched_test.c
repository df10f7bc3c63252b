/*
** sched_test.c -- dev harness for the scheduler and lowering: builds traces
** by hand, prints the schedule and each kernel's C text, then runs the plan
** and the all-eager plan through the executor and compares the outputs.
**   gcc -O1 -g -Iruntime spec/jit/sched_test.c $B/libtide.a $(make -s print-libs)
*/
#include "../../jit/jit_rec.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static JitTrace T;
static int verbose = 1, failures = 0;

static void tgrow(void)
{
  if (T.nins + 1 >= T.cap) { T.cap = T.cap ? 2 * T.cap : 64; T.ins = realloc(T.ins, sizeof *T.ins * T.cap); }
  if (T.nviews + 8 >= T.vcap) { T.vcap = T.vcap ? 2 * T.vcap : 256; T.views = realloc(T.views, sizeof *T.views * T.vcap); }
}

static JitView V(JitRef r, int nd, const int64_t *sz)   /* contiguous view */
{
  JitView v; memset(&v, 0, sizeof v);
  v.root = r; v.ndim = nd;
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) { v.sizes[d] = sz[d]; v.strides[d] = s; s *= sz[d]; }
  return v;
}
static JitView W(JitRef r) { return V(r, T.ins[r].ndim, T.ins[r].sizes); }

static JitRef emit(int op, int dt, int cdt, int nd, const int64_t *sz, const td_attrs *at, int nin, const JitView *a)
{
  tgrow();
  JitIns *r = &T.ins[T.nins];
  memset(r, 0, sizeof *r);
  r->op = op; r->dtype = dt; r->cdtype = cdt; r->ndim = nd; r->nin = nin; r->arg0 = T.nviews; r->dst = -1;
  if (nd) memcpy(r->sizes, sz, sizeof(int64_t) * nd);
  if (at) r->attrs = *at; else { r->attrs.ndims = -1; r->attrs.dtype = -1; }
  for (int i = 0; i < nin; i++) T.views[T.nviews++] = a[i];
  return T.nins++;
}

static JitRef input(int nd, const int64_t *sz, int dt, int seed)
{
  int64_t n = rt_numel(nd, sz);
  td_tensor *x = td_empty(1, &n, dt);
  for (int64_t i = 0; i < n; i++) {
    double v = sin(i * 0.37 + seed) * 3 + (seed % 3) * 0.1;
    rt_store(rt_ptr(x) + i * rt_dtype_size(dt), dt, dt == TD_BOOL ? v > 0 : v);
  }
  T.inputs = realloc(T.inputs, sizeof *T.inputs * (T.ninputs + 1));
  JitRef r = emit(JIT_OP_INPUT, dt, dt, 1, &n, NULL, 0, NULL);
  T.ins[r].slot = T.ninputs;
  T.inputs[T.ninputs++] = x;
  return r;
}
static JitRef scalar(double v)
{
  JitRef r = emit(JIT_OP_SCALAR, TD_FLOAT64, TD_FLOAT64, 0, NULL, NULL, 0, NULL);
  T.ins[r].value = v; T.ins[r].slot = T.nscalars++;
  return r;
}
static JitView S(JitRef r) { JitView v; memset(&v, 0, sizeof v); v.root = r; return v; }

static JitRef ew1(int op, JitView a)
{
  int dt = T.ins[a.root].dtype;
  int cd = (rt_ops[op].flags & RT_F_FLOAT) && !rt_is_float(dt) ? TD_FLOAT32 : dt;
  return emit(op, cd, cd, a.ndim, a.sizes, NULL, 1, &a);
}
static JitRef ew2(int op, JitView a, JitView b)
{
  JitView args[2] = { a, b };
  int nd = a.ndim > b.ndim ? a.ndim : b.ndim;
  int64_t sz[TD_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int da = d - (nd - a.ndim), db = d - (nd - b.ndim);
    int64_t x = da >= 0 ? a.sizes[da] : 1, y = db >= 0 ? b.sizes[db] : 1;
    sz[d] = x > y ? x : y;
  }
  int dt = T.ins[a.root].dtype, bt = T.ins[b.root].dtype;
  int cd = T.ins[b.root].op == JIT_OP_SCALAR ? dt : (dt > bt ? dt : bt);
  if ((rt_ops[op].flags & RT_F_FLOAT) && !rt_is_float(cd)) cd = TD_FLOAT32;
  return emit(op, (rt_ops[op].flags & RT_F_BOOLOUT) ? TD_BOOL : cd, cd, nd, sz, NULL, 2, args);
}
static JitRef red(int op, JitView a, int nd, const int64_t *dims, int keep)
{
  td_attrs at; memset(&at, 0, sizeof at);
  at.ndims = nd; at.keepdim = keep; at.dtype = -1;
  for (int i = 0; i < nd; i++) at.dims[i] = dims[i];
  if (op == RT_OP_VAR || op == RT_OP_STD) at.s[0] = 1;
  if (op == RT_OP_NORM) at.s[0] = 2;
  int64_t sz[TD_MAX_DIMS]; int n = 0;
  uint32_t m = 0;
  if (nd < 0) m = (1u << a.ndim) - 1; else for (int i = 0; i < nd; i++) m |= 1u << dims[i];
  for (int d = 0; d < a.ndim; d++) { if (!(m >> d & 1)) sz[n++] = a.sizes[d]; else if (keep) sz[n++] = 1; }
  int dt = T.ins[a.root].dtype;
  int cd = (rt_ops[op].flags & RT_F_FLOAT) && !rt_is_float(dt) ? TD_FLOAT32 : dt;
  int rd = (op == RT_OP_SUM && !rt_is_float(cd)) ? TD_INT64 : cd;
  return emit(op, rd, cd, n, sz, &at, 1, &a);
}
static JitRef rowop(int op, JitView a, int dim)
{
  td_attrs at; memset(&at, 0, sizeof at); at.ndims = -1; at.dtype = -1; at.i[0] = dim;
  return emit(op, T.ins[a.root].dtype, T.ins[a.root].dtype, a.ndim, a.sizes, &at, 1, &a);
}
static void output(JitRef r)
{
  T.outs = realloc(T.outs, sizeof *T.outs * (T.nouts + 1));
  T.outs[T.nouts++] = W(r);
  T.ins[r].flags |= JIT_IF_OUTPUT;
}

static void reset(void)
{
  for (int i = 0; i < T.ninputs; i++) td_release(T.inputs[i]);
  free(T.ins); free(T.views); free(T.inputs); free(T.outs); free(T.effects);
  memset(&T, 0, sizeof T);
}

static void run_case(const char *name)
{
  printf("== %s\n", name);
  jit_opt_fold(&T); jit_opt_cse(&T); jit_opt_dce(&T);
  JitPlan *p = jit_schedule(&T);
  if (!p) { printf("schedule failed: %s\n", td_last_error()); failures++; reset(); return; }
  printf("%s", p->schedule_text);
  if (verbose > 1)
    for (int k = 0; k < p->nkernels; k++) { char *src = cg_kernel_c_source(p->kernels[k]); printf("%s\n", src); free(src); }
  CgKernelFn *fns = calloc(p->nkernels + 1, sizeof *fns);
  if (cg_compile(p->kernels, p->nkernels, fns)) { printf("compile failed: %s\n", td_last_error()); failures++; goto out; }
  JitExec *x = jit_exec_new(&T, p, fns);
  td_tensor *outs[16] = { 0 }, *ref[16] = { 0 };
  if (!x || jit_exec_run(x, &T, outs)) { printf("exec failed: %s\n", td_last_error()); failures++; jit_exec_free(x); goto out; }
  /* reference: the all-eager plan of the same trace */
  JitPlan *pe = jit_plan_eager(&T);
  JitExec *xe = jit_exec_new(&T, pe, NULL);
  if (!xe || jit_exec_run(xe, &T, ref)) { printf("eager exec failed: %s\n", td_last_error()); failures++; }
  for (int k = 0; k < T.nouts; k++) {
    if (!outs[k] || !ref[k]) continue;
    double maxd = 0, maxv = 0;
    td_tensor *a = td_contiguous(outs[k]), *b = td_contiguous(ref[k]);
    for (int64_t i = 0; i < a->nelem; i++) {
      double u = rt_load(rt_ptr(a) + i * rt_dtype_size(a->scalar_type), a->scalar_type);
      double v = rt_load(rt_ptr(b) + i * rt_dtype_size(b->scalar_type), b->scalar_type);
      double d = fabs(u - v);
      if (d > maxd || (isnan(u) != isnan(v))) maxd = isnan(u) != isnan(v) ? INFINITY : d;
      if (fabs(v) > maxv) maxv = fabs(v);
    }
    bool ok = maxd <= 1e-4 * (maxv > 1 ? maxv : 1);
    printf("  out %d: %lld elems, max |diff| %.3g (max |ref| %.3g) %s\n", k, (long long)a->nelem, maxd, maxv,
           ok ? "ok" : "MISMATCH");
    failures += !ok;
    td_release(a); td_release(b); td_release(outs[k]); td_release(ref[k]);
  }
  jit_exec_free(xe); jit_plan_free(pe); jit_exec_free(x);
out:
  free(fns);
  jit_plan_free(p);
  reset();
}

int main(int argc, char **argv)
{
  if (argc > 1) verbose = atoi(argv[1]);
  const int64_t d1 = 1, d0 = 0;
  {  /* softmax over (7, 1023) */
    int64_t sz[2] = { 7, 1023 };
    JitRef x = input(2, sz, TD_FLOAT32, 1);
    output(rowop(RT_OP_SOFTMAX, V(x, 2, sz), 1));
    run_case("softmax (7, 1023)");
  }
  {  /* sin^2 + cos^2 over 2^24 */
    int64_t n = 1 << 24;
    JitRef x = input(1, &n, TD_FLOAT32, 2);
    JitRef s = ew1(RT_OP_SIN, W(x)), c = ew1(RT_OP_COS, W(x));
    output(ew2(RT_OP_ADD, W(ew2(RT_OP_MUL, W(s), W(s))), W(ew2(RT_OP_MUL, W(c), W(c)))));
    run_case("sin^2 + cos^2 (2^24)");
  }
  {  /* layer norm: y = (x - mean) * rsqrt(var + eps) * w + b; saved mean, rstd */
    int64_t sz[2] = { 64, 512 }, c = 512;
    JitRef x = input(2, sz, TD_FLOAT32, 3), w = input(1, &c, TD_FLOAT32, 4), b = input(1, &c, TD_FLOAT32, 5);
    JitRef mean = red(RT_OP_MEAN, V(x, 2, sz), 1, &d1, 1);
    JitRef xc = ew2(RT_OP_SUB, V(x, 2, sz), W(mean));
    JitRef var = red(RT_OP_MEAN, W(ew2(RT_OP_MUL, W(xc), W(xc))), 1, &d1, 1);
    JitRef rstd = ew1(RT_OP_RSQRT, W(ew2(RT_OP_ADD, W(var), S(scalar(1e-5)))));
    JitRef y = ew2(RT_OP_ADD, W(ew2(RT_OP_MUL, W(ew2(RT_OP_MUL, W(xc), W(rstd))), W(w))), W(b));
    output(y); output(mean); output(rstd);
    run_case("layer_norm (64, 512)");
  }
  {  /* column sum: bias gradient sum(relu(x) * g, dim 0) of (64, 512) */
    int64_t sz[2] = { 64, 512 };
    JitRef x = input(2, sz, TD_FLOAT32, 6), g = input(2, sz, TD_FLOAT32, 7);
    JitRef p = ew2(RT_OP_MUL, W(ew1(RT_OP_RELU, V(x, 2, sz))), V(g, 2, sz));
    output(red(RT_OP_SUM, W(p), 1, &d0, 0));
    run_case("sum dim 0 of (64, 512)");
  }
  {  /* full sum of a big pointwise expression */
    int64_t n = 1 << 24;
    JitRef x = input(1, &n, TD_FLOAT32, 8);
    output(red(RT_OP_SUM, W(ew1(RT_OP_EXP, W(ew1(RT_OP_SIN, W(x))))), -1, NULL, 0));
    run_case("sum(exp(sin x)) over 2^24");
  }
  {  /* softmax backward: y * (g - sum(g * y, 1)) */
    int64_t sz[2] = { 128, 1000 };
    JitRef y = input(2, sz, TD_FLOAT32, 9), g = input(2, sz, TD_FLOAT32, 10);
    JitRef s = red(RT_OP_SUM, W(ew2(RT_OP_MUL, V(g, 2, sz), V(y, 2, sz))), 1, &d1, 1);
    output(ew2(RT_OP_MUL, V(y, 2, sz), W(ew2(RT_OP_SUB, V(g, 2, sz), W(s)))));
    run_case("softmax backward (128, 1000)");
  }
  {  /* cross entropy with one_hot: -sum(log_softmax(x) * onehot) / N */
    int64_t sz[2] = { 256, 10 };
    JitRef x = input(2, sz, TD_FLOAT32, 11), oh = input(2, sz, TD_FLOAT32, 12);
    JitRef ls = rowop(RT_OP_LOG_SOFTMAX, V(x, 2, sz), 1);
    JitRef l = red(RT_OP_SUM, W(ew2(RT_OP_MUL, W(ls), V(oh, 2, sz))), -1, NULL, 0);
    output(ew2(RT_OP_MUL, W(l), S(scalar(-1.0 / 256))));
    run_case("cross entropy (256, 10)");
  }
  {  /* matmul + bias + gelu, and var/std/logsumexp/norm rows */
    int64_t a[2] = { 64, 128 }, w[2] = { 128, 256 }, o[2] = { 64, 256 }, c = 256;
    JitRef A = input(2, a, TD_FLOAT32, 13), B = input(2, w, TD_FLOAT32, 14), bias = input(1, &c, TD_FLOAT32, 15);
    JitView args[2] = { V(A, 2, a), V(B, 2, w) };
    JitRef mm = emit(RT_OP_MATMUL, TD_FLOAT32, TD_FLOAT32, 2, o, NULL, 2, args);
    JitRef h = ew1(RT_OP_GELU, W(ew2(RT_OP_ADD, W(mm), W(bias))));
    output(h);
    output(red(RT_OP_STD, W(h), 1, &d1, 0));
    output(red(RT_OP_LOGSUMEXP, W(h), 1, &d1, 0));
    output(red(RT_OP_NORM, W(h), 1, &d1, 1));
    run_case("matmul + bias + gelu; std / logsumexp / norm rows");
  }
  {  /* ints and bools: where(x > 0, x, 0) on int32, then cast to float and mean */
    int64_t sz[2] = { 33, 70 };
    JitRef x = input(2, sz, TD_INT32, 16);
    JitRef pos = ew2(RT_OP_GT, V(x, 2, sz), S(scalar(0)));
    JitRef z = input(1, &d1, TD_INT32, 0);
    JitView wa[3] = { W(pos), V(x, 2, sz), V(z, 0, NULL) };
    JitRef wh = emit(RT_OP_WHERE, TD_INT32, TD_INT32, 2, sz, NULL, 3, wa);
    output(wh);
    output(red(RT_OP_SUM, W(wh), 1, &d1, 0));
    run_case("int where / sum");
  }
  {  /* transposed copy and a broadcast add over a transposed view */
    int64_t sz[2] = { 300, 500 }, tz[2] = { 500, 300 };
    JitRef x = input(2, sz, TD_FLOAT32, 17);
    JitView xt = V(x, 2, sz);
    xt.sizes[0] = 500; xt.sizes[1] = 300; xt.strides[0] = 1; xt.strides[1] = 500;
    JitRef cp = emit(RT_OP_COPY, TD_FLOAT32, TD_FLOAT32, 2, tz, NULL, 1, &xt);
    output(ew2(RT_OP_ADD, W(cp), S(scalar(1))));
    run_case("transpose + 1");
  }
  printf("%d failure(s)\n", failures);
  return failures != 0;
}
