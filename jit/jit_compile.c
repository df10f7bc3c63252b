/*
** jit_compile.c -- compiled functions: variants keyed by the trace itself.
** Every call re-traces the function (recording is cheap: no data moves), so
** the trace *is* the guard: shapes, dtypes, strides, the ops the Lua code
** chose to run, and the values of the Lua numbers it used. A call whose trace
** matches a variant runs that variant's kernels; a miss prints its reason and
** compiles a new variant (at most JIT_MAX_VARIANTS, then the trace runs
** through the interpreter with a warning). A Lua number whose value changes
** between calls becomes a run-time kernel argument ("dynamic") instead of
** recompiling again (PyTorch's automatic dynamic, for scalars).
**
** Sizes. A miss whose trace equals a variant's but for geometry (sizes,
** strides, offsets: a new batch size) and Lua number values is a size miss.
** Kernels take the counts a batch dim turns into at run time (cg.h, "Run-time
** sizes"), so the new variant's kernels mostly hit the memory cache: only
** those whose code depends on the size compile (a reduction over the batch
** inside a row, e.g. the mean of a loss; size-1 dims, which are dropped).
** The first size miss prints a note, then (or from the start with
** TD_COMPILE_DYNAMIC, opts.dynamic) sizes are dynamic: size misses are
** logged only with TIDE_LOG=recompiles and never hit the variant limit (the
** least recently used variant of a size family is evicted instead).
*/
#include "jit_rec.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JIT_MAX_VARIANTS 8
#define JIT_MAX_DYN 4096

typedef struct Variant {
  JitTrace t;                /* optimized copy of the trace (no inputs) */
  JitTrace raw;              /* the trace as recorded, to explain later misses */
  char *key; size_t nkey; uint64_t hash;
  JitPlan *plan;
  CgKernelFn *fns;
  JitExec *exec;
  char *text;                /* graph + schedule + code, for explain */
  int64_t calls;
  int64_t last;              /* cf->tick of the last call that used it (LRU eviction) */
  char *skey; size_t nskey;  /* trace_key with geometry and scalar values erased */
  int32_t refs;              /* the compiled function, and autograd nodes (a backward variant) */
  struct Variant *bwd;       /* AOT: the backward of a value returned with history */
} Variant;

struct td_compiled {
  char name[64];
  int flags;
  Variant *v[JIT_MAX_VARIANTS]; int nv;
  uint8_t dyn[JIT_MAX_DYN / 8];    /* scalar ordinals passed at run time */
  JitRec *rec;
  JitRec *spare;                   /* the last call's trace arrays, reused by the next */
  uint64_t rng_seed, rng_off;
  int warned_limit, eager_grad;
  int dyn_sizes;                   /* size misses: quiet, evicting (opts.dynamic or after the first) */
  int64_t tick;
  int nargs;                       /* input slots of the arguments */
  char *text;
};

/* -- TIDE_LOG ------------------------------------------------------------------------- */

enum { LOG_GRAPH = 1, LOG_SCHEDULE = 2, LOG_CODE = 4, LOG_RECOMPILES = 8 };

static int log_flags(void)
{
  static int cached = -1;                    /* atomic: read once, by whichever thread is first */
  int flags = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (flags < 0) {
    const char *e = getenv("TIDE_LOG");
    flags = 0;
    if (e) {
      if (strstr(e, "graph")) flags |= LOG_GRAPH;
      if (strstr(e, "schedule")) flags |= LOG_SCHEDULE;
      if (strstr(e, "code")) flags |= LOG_CODE;
      if (strstr(e, "recompile")) flags |= LOG_RECOMPILES;
      if (strstr(e, "all")) flags = 15;
    }
    __atomic_store_n(&cached, flags, __ATOMIC_RELAXED);
  }
  return flags;
}

/* -- Keys ------------------------------------------------------------------------------- */

static void erase_geometry(JitView *v) { v->offset = 0; memset(v->sizes, 0, sizeof v->sizes); memset(v->strides, 0, sizeof v->strides); }

/* The key of a trace: its records (line numbers and scheduler flags cleared,
** dynamic scalar values zeroed), operand views, outputs and effects, as bytes.
** shape: the size-family key, without sizes, strides, offsets and scalar values.
** One walker produces it: into buf, or compared with an existing key cmp
** (a call that matches its last variant builds no key: ~0.5 MB for a GPT step). */
typedef struct { char *buf; const char *cmp; size_t pos; bool diff; } KeySink;

static void key_put(KeySink *s, const void *p, size_t n)
{
  if (!n) return;                     /* p may be NULL (a trace without effects) */
  if (s->buf) memcpy(s->buf + s->pos, p, n);
  else if (!s->diff && memcmp(s->cmp + s->pos, p, n)) s->diff = true;
  s->pos += n;
}

static size_t key_size(const JitTrace *t)
{
  return (size_t)t->nins * sizeof(JitIns) + (size_t)t->nviews * sizeof(JitView) +
         (size_t)t->nouts * sizeof(JitView) + (size_t)t->neffects * sizeof(JitEffect) + 16;
}

static void key_views(KeySink *s, const JitView *v, int n, bool shape)
{
  if (!shape) { key_put(s, v, (size_t)n * sizeof *v); return; }
  for (int i = 0; i < n && !s->diff; i++) { JitView c = v[i]; erase_geometry(&c); key_put(s, &c, sizeof c); }
}

static void key_walk(KeySink *s, const JitTrace *t, bool shape)
{
  int32_t counts[4] = { t->nins, t->nviews, t->nouts, t->neffects };
  key_put(s, counts, 16);
  for (int i = 0; i < t->nins && !s->diff; i++) {
    JitIns c = t->ins[i];
    c.line = 0; c.flags &= JIT_IF_DYN | JIT_IF_OUTPUT;
    if (c.flags & JIT_IF_DYN) c.value = 0;
    if (shape) { c.flags &= JIT_IF_OUTPUT; c.value = 0; memset(c.sizes, 0, sizeof c.sizes); }
    key_put(s, &c, sizeof c);
  }
  if (s->diff) return;
  key_views(s, t->views, t->nviews, shape);
  key_views(s, t->outs, t->nouts, shape);
  if (!s->diff) key_put(s, t->effects, (size_t)t->neffects * sizeof(JitEffect));
}

static char *trace_key_of(const JitTrace *t, size_t *n, bool shape)
{
  KeySink s = { .buf = malloc(key_size(t)) };
  if (!s.buf) return rt_errp(TD_ERR_NOMEM, "tide.compile: out of memory");
  key_walk(&s, t, shape);
  *n = s.pos;
  return s.buf;
}
/* whether t's key equals v's (the key trace_key would build) */
static bool key_matches(const JitTrace *t, const Variant *v)
{
  if (key_size(t) != v->nkey) return false;
  KeySink s = { .cmp = v->key };
  key_walk(&s, t, false);
  return !s.diff;
}
static char *trace_key(const JitTrace *t, size_t *n) { return trace_key_of(t, n, false); }

/* 64-bit multiply-xorshift over 8-byte words (the key is ~250 bytes per record) */
static uint64_t key_hash(const char *k, size_t n)
{
  uint64_t h = 1469598103934665603ull ^ n, w;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { memcpy(&w, k + i, 8); h = (h ^ w) * 0x9e3779b97f4a7c15ull; h ^= h >> 29; }
  for (; i < n; i++) { h ^= (uint8_t)k[i]; h *= 1099511628211ull; }
  return h;
}

static void mark_dyn(td_compiled *cf, JitTrace *t)
{
  for (int i = 0; i < t->nins; i++) {
    JitIns *ins = &t->ins[i];
    if (ins->op == JIT_OP_SCALAR && ins->slot >= 0 && (ins->slot >= JIT_MAX_DYN || (cf->dyn[ins->slot / 8] >> (ins->slot % 8) & 1)))
      ins->flags |= JIT_IF_DYN;
  }
}

/* -- Recompile reasons -------------------------------------------------------------------- */

static char *shape_str(char *b, int nd, const int64_t *s) { return rt_shape_str(b, 160, nd, s); }

/* The first difference between a trace and a variant, in words. Scalars that
** differ only in value are marked dynamic in cf (returns 1) instead. */
static int explain_miss(td_compiled *cf, const Variant *v, const JitTrace *t, int nargs, char *why, size_t n)
{
  const JitTrace *o = &v->raw;
  char a[160], b[160];
  /* inputs first: the arguments, then other tensors the function reached */
  int nin = t->ninputs < o->ninputs ? t->ninputs : o->ninputs;
  for (int i = 0; i < t->nins && i < o->nins; i++) {
    const JitIns *x = &t->ins[i], *y = &o->ins[i];
    if (x->op != y->op) break;
    if (x->op != JIT_OP_INPUT || x->slot >= nin) continue;
    char who[48];
    if (x->slot < nargs) snprintf(who, sizeof who, "arg %d", x->slot + 1);
    else snprintf(who, sizeof who, "tensor input %d (not an argument)", x->slot + 1);
    if (x->dtype != y->dtype) { snprintf(why, n, "%s dtype %s -> %s", who, td_dtype_name(y->dtype), td_dtype_name(x->dtype)); return 0; }
    /* the first operand view of this input tells its shape as used */
    for (int j = 0; j < t->nviews && j < o->nviews; j++) {
      const JitView *vx = &t->views[j], *vy = &o->views[j];
      if (vx->root != i || vy->root != i) continue;
      if (vx->ndim != vy->ndim || memcmp(vx->sizes, vy->sizes, sizeof vx->sizes)) {
        snprintf(why, n, "%s shape %s -> %s", who, shape_str(b, vy->ndim, vy->sizes), shape_str(a, vx->ndim, vx->sizes));
        return 0;
      }
      if (memcmp(vx->strides, vy->strides, sizeof vx->strides) || vx->offset != vy->offset) {
        snprintf(why, n, "%s strides %s -> %s", who, shape_str(b, vy->ndim, vy->strides), shape_str(a, vx->ndim, vx->strides));
        return 0;
      }
      break;
    }
    if (x->sizes[0] != y->sizes[0]) {
      snprintf(why, n, "%s storage of %lld -> %lld elements", who, (long long)y->sizes[0], (long long)x->sizes[0]);
      return 0;
    }
  }
  /* same structure but some Lua numbers changed: make them run-time arguments */
  if (t->nins == o->nins && t->nviews == o->nviews && t->nouts == o->nouts && t->neffects == o->neffects) {
    int same = 1, nd = 0;
    char first[160] = "";
    for (int i = 0; i < t->nins && same; i++) {
      JitIns x = t->ins[i], y = o->ins[i];
      if (x.op == JIT_OP_SCALAR && x.value != y.value && !(y.flags & JIT_IF_DYN)) {
        if (!nd++) snprintf(first, sizeof first, "Lua number %d changed %.9g -> %.9g", x.slot + 1, y.value, x.value);
        if (x.slot < JIT_MAX_DYN) cf->dyn[x.slot / 8] |= (uint8_t)(1 << (x.slot % 8));
        continue;
      }
      x.line = y.line = 0; x.flags = y.flags = 0; x.value = y.value = 0;
      if (memcmp(&x, &y, sizeof x)) same = 0;
    }
    if (same && nd) {
      snprintf(why, n, "%s%s; passing %s as kernel argument%s from now on", first,
               nd > 1 ? " (and others)" : "", nd > 1 ? "them" : "it", nd > 1 ? "s" : "");
      return 1;
    }
  }
  for (int i = 0; i < t->nins && i < o->nins; i++) {
    const JitIns *x = &t->ins[i], *y = &o->ins[i];
    if (x->op != y->op) {
      snprintf(why, n, "op %d is %s instead of %s: the function took another path", i + 1, jit_op_name(x->op), jit_op_name(y->op));
      return 0;
    }
    if (x->ndim != y->ndim || memcmp(x->sizes, y->sizes, sizeof x->sizes)) {
      snprintf(why, n, "op %d (%s) shape %s -> %s", i + 1, jit_op_name(x->op), shape_str(b, y->ndim, y->sizes), shape_str(a, x->ndim, x->sizes));
      return 0;
    }
    if (x->op == JIT_OP_SCALAR && x->value != y->value && !(x->flags & JIT_IF_DYN)) {
      snprintf(why, n, "Lua number %d changed %.9g -> %.9g", x->slot + 1, y->value, x->value);
      return 0;
    }
  }
  if (t->nins != o->nins) snprintf(why, n, "the function recorded %d ops instead of %d", t->nins, o->nins);
  else if (t->nouts != o->nouts) snprintf(why, n, "%d outputs instead of %d", t->nouts, o->nouts);
  else snprintf(why, n, "an op's attributes, operand views or requires_grad changed");
  return 0;
}

/* -- Variants ----------------------------------------------------------------------------- */

static void variant_free(Variant *v)
{
  if (!v || __atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
  variant_free(v->bwd);
  jit_exec_free(v->exec);
  if (v->plan) jit_plan_free(v->plan);
  free(v->fns); free(v->key); free(v->skey); free(v->text);
  v->t.ninputs = v->raw.ninputs = 0;
  jit_trace_clear(&v->t); jit_trace_clear(&v->raw);
  free(v);
}

static int copy_trace(JitTrace *d, const JitTrace *s)
{
  memset(d, 0, sizeof *d);
  d->ins = malloc(sizeof(JitIns) * (size_t)(s->nins + 1));
  d->views = malloc(sizeof(JitView) * (size_t)(s->nviews + 1));
  d->outs = malloc(sizeof(JitView) * (size_t)(s->nouts + 1));
  d->effects = malloc(sizeof(JitEffect) * (size_t)(s->neffects + 1));
  if (!d->ins || !d->views || !d->outs || !d->effects) return rt_err(TD_ERR_NOMEM, "tide.compile: out of memory");
  /* (an empty array of s may be NULL: memcpy's arguments must not be) */
#define COPY(a, n, cap) do { if (s->n) memcpy(d->a, s->a, sizeof *d->a * (size_t)s->n); d->n = d->cap = s->n; } while (0)
  COPY(ins, nins, cap); COPY(views, nviews, vcap); COPY(outs, nouts, ocap); COPY(effects, neffects, ecap);
#undef COPY
  d->nscalars = s->nscalars; d->ninputs = s->ninputs; d->id = s->id;
  return 0;
}

static char *cat_text(char *a, const char *b)
{
  size_t na = a ? strlen(a) : 0, nb = strlen(b);
  char *r = realloc(a, na + nb + 1);
  if (!r) return a;
  memcpy(r + na, b, nb + 1);
  return r;
}

/* Build a variant from a trace: passes, schedule, kernels. raw: the trace as
** recorded (for later explain_miss), t unless t is a part of it. */
static Variant *variant_build(td_compiled *cf, const JitTrace *t, const JitTrace *raw, char *key, size_t nkey,
                              bool eager, const char *part)
{
  Variant *v = calloc(1, sizeof *v);
  if (!v) { free(key); return rt_errp(TD_ERR_NOMEM, "tide.compile: out of memory"); }
  v->refs = 1;
  v->key = key; v->nkey = nkey; v->hash = key_hash(key, nkey);
  if (copy_trace(&v->t, t) || copy_trace(&v->raw, raw)) goto fail;
  if (eager) {
    if (!(v->plan = jit_plan_eager(&v->t))) goto fail;
  } else {
    jit_opt_writes(&v->t); jit_opt_fold(&v->t); jit_opt_split_grads(&v->t); jit_opt_cse(&v->t); jit_opt_dce(&v->t);
    if (!(v->plan = jit_schedule(&v->t))) goto fail;
  }
  int lf = log_flags();
  char *g = jit_trace_text(&v->t);
  char hdr[128];
  snprintf(hdr, sizeof hdr, "== tide.compile %s: variant %d%s ==\n-- graph\n", cf->name, cf->nv + 1, part);
  v->text = cat_text(v->text, hdr);
  if (g) { v->text = cat_text(v->text, g); if (lf & LOG_GRAPH) fprintf(stderr, "%s%s", hdr, g); free(g); }
  v->text = cat_text(v->text, "-- schedule\n");
  if (v->plan->schedule_text) {
    v->text = cat_text(v->text, v->plan->schedule_text);
    if (lf & LOG_SCHEDULE) fprintf(stderr, "-- %s schedule\n%s", cf->name, v->plan->schedule_text);
  }
  v->text = cat_text(v->text, "-- code\n");
  int dev = jit_trace_device(&v->t);
  for (int k = 0; k < v->plan->nkernels; k++) {
    char *c = jit_kernel_source(v->plan->kernels[k], dev);
    if (!c) continue;
    v->text = cat_text(v->text, c);
    if (lf & LOG_CODE) fprintf(stderr, "%s", c);
    free(c);
  }
  if (!(v->fns = calloc((size_t)v->plan->nkernels + 1, sizeof *v->fns))) goto fail;
  if (jit_plan_compile(v->plan, dev, v->fns)) goto fail;
  if (!(v->exec = jit_exec_new(&v->t, v->plan, v->fns))) goto fail;
  return v;
fail:
  variant_free(v);
  return NULL;
}

/* An AOT variant: the forward variant (keyed by the joint trace j) carries the
** backward variant; the text shows both. */
static Variant *variant_build_aot(td_compiled *cf, const JitTrace *j, const JitAot *a, char *key, size_t nkey, bool eager)
{
  JitTrace f, b;
  if (jit_aot_split(j, a, &f, &b)) { free(key); return NULL; }
  Variant *v = variant_build(cf, &f, j, key, nkey, eager, " (forward; backward ahead of time)");
  size_t nb = 0;
  char *bkey = v ? trace_key(&b, &nb) : NULL;
  if (v && (!bkey || !(v->bwd = variant_build(cf, &b, &b, bkey, nb, eager, " (backward)")))) { variant_free(v); v = NULL; }
  if (v && v->bwd->text) v->text = cat_text(v->text, v->bwd->text);
  jit_trace_clear(&f); jit_trace_clear(&b);
  return v;
}

/* The backward of an AOT variant, run by the autograd node of the returned value. */
static int aot_run(void *ctx, const JitTrace *b, td_tensor **outs) { return jit_exec_run(((Variant *)ctx)->exec, b, outs); }
static void aot_release(void *ctx) { variant_free(ctx); }

/* Run an AOT variant: the forward, then the node on output yk with this call's backward trace. */
static int aot_exec(Variant *v, const JitTrace *j, const JitAot *a, td_tensor **res, int yk)
{
  JitTrace f, b;
  int rc = jit_aot_split(j, a, &f, &b);
  if (rc) return rc;
  td_tensor **fo = calloc((size_t)f.nouts + 1, sizeof *fo);
  if (!fo) rc = rt_err(TD_ERR_NOMEM, "tide.compile: out of memory");
  else rc = jit_exec_run(v->exec, &f, fo);
  if (!rc) {
    for (int k = 0; k < a->nfo; k++) { res[k] = fo[k]; fo[k] = NULL; }
    for (int s = a->nfo; s < f.nouts; s++) { b.inputs[j->ninputs + s - a->nfo] = fo[s]; fo[s] = NULL; }
    __atomic_add_fetch(&v->bwd->refs, 1, __ATOMIC_RELAXED);
    rc = jit_aot_attach(res[yk], a, &b, aot_run, v->bwd, aot_release);
  }
  for (int k = 0; fo && k < f.nouts; k++) td_release(fo[k]);
  free(fo);
  jit_trace_clear(&f); jit_trace_clear(&b);
  return rc;
}

/* -- The API --------------------------------------------------------------------------------- */

/* -- One trace at a time per process ------------------------------------------------------
** Whether this thread traces is per thread (jit_tracing, jit_record.c): eager
** ops on any other thread are never recorded. Traces themselves run one at a
** time per process (the RNG state a trace saves and restores, the kernel
** caches and compiled functions shared between threads assume it): the thread
** that begins a trace owns the process's tracing until its traces end; a
** begin on another thread meanwhile fails. depth counts the owner's traces
** (one, or more while one is paused). */
static _Thread_local char owner_me;             /* never read: its address is this thread's token */
static char *trace_owner;                       /* atomic: the owner's token, NULL = none */
static int owner_depth;                         /* the owner's only */

static char *owner_token(void) { return &owner_me; }

static int trace_take(const td_compiled *cf)
{
  char *me = owner_token(), *none = NULL;
  if (!__atomic_compare_exchange_n(&trace_owner, &none, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && none != me)
    return rt_err(TD_ERR_STATE, "tide.compile: %s: another thread is tracing (tide.compile runs one trace at a "
                  "time per process)", cf->name);
  owner_depth++;
  return 0;
}

static void trace_give(void)
{
  char *me = owner_token();
  if (__atomic_load_n(&trace_owner, __ATOMIC_ACQUIRE) == me && --owner_depth == 0)
    __atomic_store_n(&trace_owner, NULL, __ATOMIC_RELEASE);
}

TD_API td_compiled *td_compile_new(const char *name, int flags)
{
  td_compiled *cf = calloc(1, sizeof *cf);
  if (!cf) return rt_errp(TD_ERR_NOMEM, "tide.compile: out of memory");
  snprintf(cf->name, sizeof cf->name, "%s", name && *name ? name : "function");
  cf->flags = flags;
  cf->dyn_sizes = (flags & TD_COMPILE_DYNAMIC) != 0;
  return cf;
}

TD_API void td_compile_free(td_compiled *cf)
{
  if (!cf) return;
  if (cf->rec) trace_give();
  jit_rec_free(cf->rec); jit_rec_free(cf->spare);
  for (int i = 0; i < cf->nv; i++) variant_free(cf->v[i]);
  free(cf->text);
  free(cf);
}

TD_API int td_is_tracing(void) { return jit_tracing; }
TD_API int td_compile_variants(const td_compiled *cf) { return cf->nv; }
TD_API int td_compile_eager_grad(const td_compiled *cf) { return cf->eager_grad; }
TD_API const char *td_compile_text(const td_compiled *cf) { return cf->text ? cf->text : ""; }

TD_API void td_jit_stats(int64_t *out)
{
  CgStats s; cg_stats(&s);
  out[0] = s.compiles; out[1] = s.disk_loads; out[2] = s.mem_hits; out[3] = s.kernels_compiled;
}

TD_API int td_compile_begin(td_compiled *cf, int nargs, td_tensor *const *args)
{
  if (jit_tracing) return rt_err(TD_ERR_STATE, "tide.compile: %s: already tracing", cf->name);
  if (trace_take(cf)) return TD_ERR_STATE;
  if (cf->rec) { trace_give(); jit_rec_free(cf->rec); }    /* a trace left unended: discarded */
  td_rng_get_state(&cf->rng_seed, &cf->rng_off);
  if (!(cf->rec = jit_rec_begin(cf->spare))) { trace_give(); return TD_ERR_NOMEM; }
  cf->spare = NULL;
  for (int i = 0; i < nargs; i++)
    if (args[i] && jit_rec_input(cf->rec, args[i]) < 0) { td_compile_abort(cf); return TD_ERR_STATE; }
  cf->nargs = cf->rec->t.ninputs;
  return 0;
}

/* the trace ends; its arrays are kept for the next call */
static void rec_done(td_compiled *cf)
{
  if (!cf->rec) return;
  trace_give();
  jit_rec_reset(cf->rec);
  jit_rec_free(cf->spare);
  cf->spare = cf->rec; cf->rec = NULL;
}

TD_API void td_compile_abort(td_compiled *cf) { rec_done(cf); }

/* The traced function yielded (a coroutine): ops outside it must run eagerly,
** so tracing stops while it is suspended and resumes with it. */
TD_API void td_compile_pause(td_compiled *cf) { if (cf->rec) jit_rec_stop(cf->rec); }
TD_API int td_compile_resume(td_compiled *cf)
{
  if (!cf->rec) return rt_err(TD_ERR_STATE, "tide.compile: %s: the trace of this call was abandoned", cf->name);
  return jit_rec_resume(cf->rec);
}

static Variant *find_variant(td_compiled *cf, const char *key, size_t nkey)
{
  uint64_t h = key_hash(key, nkey);
  for (int i = 0; i < cf->nv; i++)
    if (cf->v[i]->hash == h && cf->v[i]->nkey == nkey && !memcmp(cf->v[i]->key, key, nkey)) return cf->v[i];
  return NULL;
}

/* -- Size families ---------------------------------------------------------------------------- */

static bool same_family(const Variant *v, const char *skey, size_t n)
{ return v->skey && v->nskey == n && !memcmp(v->skey, skey, n); }

/* The most recently used variant whose trace differs from skey's only in
** geometry and Lua number values, or NULL. */
static Variant *find_family(td_compiled *cf, const char *skey, size_t n)
{
  Variant *best = NULL;
  for (int i = 0; i < cf->nv; i++)
    if (same_family(cf->v[i], skey, n) && (!best || cf->v[i]->last > best->last)) best = cf->v[i];
  return best;
}

/* Lua numbers that differ from family member o's become run-time arguments
** (a number derived from the batch size changes with it). Returns how many. */
static int family_scalars(td_compiled *cf, const Variant *o, JitTrace *t)
{
  int nd = 0;
  for (int i = 0; i < t->nins && i < o->raw.nins; i++) {
    const JitIns *x = &t->ins[i], *y = &o->raw.ins[i];
    if (x->op != JIT_OP_SCALAR || x->value == y->value || (x->flags & JIT_IF_DYN) || x->slot >= JIT_MAX_DYN) continue;
    cf->dyn[x->slot / 8] |= (uint8_t)(1 << (x->slot % 8));
    nd++;
  }
  return nd;
}

/* At the limit, a size miss frees the least recently used variant that has a
** size sibling (one of the new trace's family, or of another variant's). */
static void evict_lru(td_compiled *cf, const char *skey, size_t n)
{
  int best = -1;
  for (int i = 0; i < cf->nv; i++) {
    bool sib = same_family(cf->v[i], skey, n);
    for (int j = 0; j < cf->nv && !sib; j++) sib = j != i && cf->v[j]->skey && same_family(cf->v[i], cf->v[j]->skey, cf->v[j]->nskey);
    if (sib && (best < 0 || cf->v[i]->last < cf->v[best]->last)) best = i;
  }
  if (best < 0) return;
  variant_free(cf->v[best]);    /* autograd nodes may still hold its backward (refs) */
  memmove(&cf->v[best], &cf->v[best + 1], sizeof cf->v[0] * (size_t)(cf->nv - best - 1));
  cf->nv--;
}

static int variant_nkernels(const Variant *v)
{ return (v->plan ? v->plan->nkernels : 0) + (v->bwd && v->bwd->plan ? v->bwd->plan->nkernels : 0); }

TD_API int td_compile_end(td_compiled *cf, int nout, td_tensor *const *outs, td_tensor **results, int mode)
{
  JitRec *r = cf->rec;
  if (!r) return rt_err(TD_ERR_STATE, "tide.compile: %s: no call is being traced", cf->name);
  JitTrace *t = &r->t;
  JitAot aot = { 0 };
  int yk = -1;                     /* AOT: the output whose backward is compiled ahead of time */
  int nargs = cf->nargs;
  int rc = 0, nres = 0;
  char *key = NULL, *skey = NULL; size_t nkey = 0, nskey = 0;
  char why[400];
  bool size_miss = false;          /* the trace differs from a variant only in sizes */
  int pe = -1;                     /* the profiler's compile event */
  CgStats st0 = { 0 };
  Variant *v = NULL, *tmp = NULL;
  for (int k = 0; k < nout; k++) results[k] = NULL;
  /* outputs: returned traced tensors, then the .grad of leaves set during the trace */
  int *outk = calloc((size_t)nout + (size_t)r->ngrads + 1, sizeof *outk);
  if (!outk) { rc = rt_err(TD_ERR_NOMEM, "tide.compile: out of memory"); goto done; }
  int nhist = 0;
  for (int k = 0; k < nout; k++) {
    outk[k] = -1;
    if (!outs[k]) {
      rc = rt_err(TD_ERR_ARG, "tide.compile: %s: returned tensor %d was freed (x:free()) inside the function",
                  cf->name, k + 1);
      goto done;
    }
    if (!jit_is_traced(outs[k])) continue;
    if (outs[k]->rt_grad_fn) { nhist++; yk = k; }
    if ((outk[k] = jit_rec_output(r, outs[k])) < 0) { rc = TD_ERR_STATE; goto done; }
  }
  for (int g = 0; g < r->ngrads; g++) {
    td_tensor *gr = r->grads[g].leaf->rt_grad;
    outk[nout + g] = gr && jit_is_traced(gr) ? jit_rec_output(r, gr) : -1;
  }
  if (!nhist || r->backward_ran || !td_grad_enabled()) yk = -1;
  /* a returned value with history: its backward is recorded now and compiled ahead of time */
  const char *no_aot = nhist > 1 && yk >= 0 ? "more than one returned tensor requires grad" : NULL;
  char aot_err[256];                /* the message outlives later calls that may set errors */
  if (yk >= 0 && !no_aot && jit_aot_record(r, outs[yk], &aot)) {
    snprintf(aot_err, sizeof aot_err, "%s", td_last_error());
    no_aot = aot_err;
  }
  jit_rec_stop(r);
  if ((rc = jit_rec_effects(r))) goto done;
  if (yk >= 0 && !no_aot) no_aot = jit_aot_effects_conflict(t, &aot);
  if (no_aot && mode == TD_COMPILE_RUN) {
    if (!cf->eager_grad)
      fprintf(stderr, "tide.compile: %s returns tensors that require grad, and their backward cannot be compiled "
              "ahead of time (%s), so %s runs eagerly while grad mode is on (call backward() inside the compiled "
              "function, or call it under tide.no_grad)\n", cf->name, no_aot, cf->name);
    cf->eager_grad = 1;
    td_rng_set_state(cf->rng_seed, cf->rng_off);
    rc = TD_COMPILE_RERUN_EAGER;
    goto done;
  }
  if (no_aot) yk = -1;
  mark_dyn(cf, t);
  for (int i = 0; i < cf->nv; i++)   /* the last variant used: compared in place, no key built */
    if (cf->v[i]->last == cf->tick && key_matches(t, cf->v[i])) { v = cf->v[i]; goto found; }
  if (!(key = trace_key(t, &nkey))) { rc = TD_ERR_NOMEM; goto done; }
  v = find_variant(cf, key, nkey);
  if (!v && !(skey = trace_key_of(t, &nskey, true))) { rc = TD_ERR_NOMEM; goto done; }
  if (!v && cf->nv) {
    Variant *fam = find_family(cf, skey, nskey);
    int dyn = explain_miss(cf, fam ? fam : cf->v[cf->nv - 1], t, nargs, why, sizeof why);
    size_miss = fam && !dyn;       /* explain_miss's dyn: same geometry, only numbers changed */
    if (size_miss) dyn = family_scalars(cf, fam, t);
    if (dyn) {                     /* re-key with the new dynamic scalars */
      mark_dyn(cf, t); free(key);
      if (!(key = trace_key(t, &nkey))) { rc = TD_ERR_NOMEM; goto done; }
      v = find_variant(cf, key, nkey);
    }
    if (v) size_miss = false;
    else if (size_miss) {          /* sizes never hit the limit: reported after the build */
      if (cf->nv >= JIT_MAX_VARIANTS) evict_lru(cf, skey, nskey);
      cg_stats(&st0);
    } else if (cf->nv >= JIT_MAX_VARIANTS) {
      if (!cf->warned_limit)
        fprintf(stderr, "tide.compile: %s has %d compiled variants (the limit); calls that match none run "
                "through the interpreter (last reason: %s)\n", cf->name, cf->nv, why);
      cf->warned_limit = 1;
    } else if (!v && mode == TD_COMPILE_RUN)
      fprintf(stderr, "tide.compile: recompiling %s (%s)\n", cf->name, why);
  } else if (!v && (log_flags() & LOG_RECOMPILES))
    fprintf(stderr, "tide.compile: compiling %s\n", cf->name);
  if (!v && rt_prof_on) {                /* a compile is an event of its own, named with its reason */
    char ev[96];
    snprintf(ev, sizeof ev, "%s %.32s%s%.48s%s", cf->nv ? "recompile" : "compile", cf->name, cf->nv ? " (" : "",
             cf->nv ? why : "", cf->nv ? ")" : "");
    pe = rt_prof_begin(TD_PROF_COMPILE, ev, 0, NULL);
  }
  if (!v) {
    bool interp = cf->nv >= JIT_MAX_VARIANTS;
    Variant *nv = yk >= 0 ? variant_build_aot(cf, t, &aot, key, nkey, interp) : variant_build(cf, t, t, key, nkey, interp, "");
    key = NULL;
    if (!nv) {
      if (!(cf->flags & TD_COMPILE_FALLBACK_EAGER)) { rc = TD_ERR_STATE; goto done; }
      fprintf(stderr, "tide.compile: %s: %s; running the trace eagerly\n", cf->name, td_last_error());
      char *k2 = trace_key(t, &nkey);
      if (!k2) { rc = TD_ERR_STATE; goto done; }
      nv = yk >= 0 ? variant_build_aot(cf, t, &aot, k2, nkey, true) : variant_build(cf, t, t, k2, nkey, true, "");
      if (!nv) { rc = TD_ERR_STATE; goto done; }
      interp = true;
    }
    if (interp) tmp = nv;
    else { cf->v[cf->nv++] = nv; nv->skey = skey; nv->nskey = nskey; skey = NULL; }
    v = nv;
    if (size_miss && !interp) {
      CgStats st1;
      cg_stats(&st1);
      if (mode == TD_COMPILE_RUN && (!cf->dyn_sizes || (log_flags() & LOG_RECOMPILES)))
        fprintf(stderr, "tide.compile: new sizes for %s (%s); kernels shared, %lld of %d compiled%s\n", cf->name, why,
                (long long)(st1.kernels_compiled - st0.kernels_compiled), variant_nkernels(nv),
                cf->dyn_sizes ? "" : "; sizes are dynamic from now on");
      cf->dyn_sizes = 1;
    }
  }
  rt_prof_end(pe); pe = -1;
found:
  v->last = ++cf->tick;
  if (mode != TD_COMPILE_RUN) {
    free(cf->text);
    cf->text = mode == TD_COMPILE_DOT ? jit_trace_dot(&v->t) : strdup(v->text ? v->text : "");
    goto done;
  }
  td_tensor **res = calloc((size_t)t->nouts + 1, sizeof *res);
  if (!res) { rc = rt_err(TD_ERR_NOMEM, "tide.compile: out of memory"); goto done; }
  if ((rc = yk >= 0 ? aot_exec(v, t, &aot, res, outk[yk]) : jit_exec_run(v->exec, t, res)) == 0) {
    v->calls++;
    for (int k = 0; k < nout; k++) {
      if (outk[k] >= 0) { results[k] = res[outk[k]]; res[outk[k]] = NULL; nres++; }
      else { td_retain(outs[k]); results[k] = outs[k]; }
      /* outputs of a function that ran its own backward carry no history */
    }
    for (int g = 0; g < r->ngrads; g++) {
      td_tensor *leaf = r->grads[g].leaf;
      if (outk[nout + g] < 0) continue;
      td_tensor *gr = res[outk[nout + g]];
      res[outk[nout + g]] = NULL;
      td_release(leaf->rt_grad);
      leaf->rt_grad = gr;
    }
  }
  for (int k = 0; k < t->nouts; k++) td_release(res[k]);
  free(res);
done:
  rt_prof_end(pe);
  if (rc < 0) for (int k = 0; k < nout; k++) { td_release(results[k]); results[k] = NULL; }
  /* leaves whose .grad is still traced (explain, a failed run, an eager re-run):
  ** the .grad they had before the call, as if it had not run */
  if (rc || mode != TD_COMPILE_RUN) for (int g = 0; g < r->ngrads; g++) {
    td_tensor *leaf = r->grads[g].leaf;
    if (!leaf->rt_grad || !jit_is_traced(leaf->rt_grad)) continue;
    td_release(leaf->rt_grad);
    td_retain(r->grads[g].prev);
    leaf->rt_grad = r->grads[g].prev;
  }
  variant_free(tmp);
  jit_aot_clear(&aot);
  free(key); free(skey); free(outk);
  rec_done(cf);
  return rc;
}
